package io.accel4j.cli.train;

import java.awt.BasicStroke;
import java.awt.Color;
import java.awt.Font;
import java.awt.Graphics2D;
import java.awt.RenderingHints;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.imageio.ImageIO;

/**
 * Asynchronous data parallelism's staleness as a PNG beside {@code loss.png}: per step, the minimum, mean and maximum
 * number of updates the gradients applied since the previous step had not seen ({@code staleness_min/mean/max} in
 * {@code metrics.jsonl}), under the bound S drawn as a dashed line. Headless java.awt, as {@link LossPlot}.
 */
final class StalenessPlot {

    private static final int W = 800, H = 320, LEFT = 60, RIGHT = 20, TOP = 40, BOTTOM = 45;
    private static final Pattern FIELDS = Pattern.compile("\"step\":(\\d+).*\"staleness_min\":(\\d+),"
            + "\"staleness_mean\":([0-9.]+),\"staleness_max\":(\\d+)");

    private StalenessPlot() {}

    /** One step's staleness. */
    record Point(int step, int min, double mean, int max) {}

    /** The staleness records of a metrics file (lines without them, e.g. validations, are skipped). */
    static List<Point> read(Path metrics) throws IOException {
        List<Point> points = new ArrayList<>();
        for (String line : Files.readAllLines(metrics, StandardCharsets.UTF_8)) {
            Matcher m = FIELDS.matcher(line);
            if (m.find()) {
                points.add(new Point(Integer.parseInt(m.group(1)), Integer.parseInt(m.group(2)),
                        Double.parseDouble(m.group(3)), Integer.parseInt(m.group(4))));
            }
        }
        return points;
    }

    /** Writes the plot of {@code points} under the bound {@code bound} to {@code file}; false when there are none. */
    static boolean write(Path file, List<Point> points, int bound) throws IOException {
        if (points.isEmpty()) {
            return false;
        }
        System.setProperty("java.awt.headless", "true");
        int maxStep = 1, top = Math.max(1, bound);
        for (Point p : points) {
            maxStep = Math.max(maxStep, p.step());
            top = Math.max(top, p.max());
        }
        double yMax = top + 1;
        BufferedImage img = new BufferedImage(W, H, BufferedImage.TYPE_INT_RGB);
        Graphics2D g = img.createGraphics();
        try {
            g.setRenderingHint(RenderingHints.KEY_ANTIALIASING, RenderingHints.VALUE_ANTIALIAS_ON);
            g.setColor(Color.WHITE);
            g.fillRect(0, 0, W, H);
            g.setColor(Color.BLACK);
            g.setFont(new Font(Font.SANS_SERIF, Font.PLAIN, 12));
            g.drawString("staleness per step (updates a worker's gradients had not seen): min, mean, max; bound S = "
                    + bound, LEFT, TOP - 15);
            g.drawLine(LEFT, H - BOTTOM, W - RIGHT, H - BOTTOM);
            g.drawLine(LEFT, TOP, LEFT, H - BOTTOM);
            for (int v = 0; v <= top + 1; v++) {
                int y = y(v, yMax);
                g.drawString(Integer.toString(v), LEFT - 20, y + 4);
            }
            g.drawString("step " + maxStep, W - RIGHT - 60, H - BOTTOM + 16);
            g.setColor(Color.GRAY);
            g.setStroke(new BasicStroke(1f, BasicStroke.CAP_BUTT, BasicStroke.JOIN_MITER, 10f, new float[] {6f, 4f},
                    0f));
            g.drawLine(LEFT, y(bound, yMax), W - RIGHT, y(bound, yMax));
            g.setStroke(new BasicStroke(1.5f));
            Color[] colors = {new Color(0x2E7D32), new Color(0x1565C0), new Color(0xC62828)};
            for (int series = 0; series < 3; series++) {
                g.setColor(colors[series]);
                int px = -1, py = -1;
                for (Point p : points) {
                    double v = series == 0 ? p.min() : series == 1 ? p.mean() : p.max();
                    int x = LEFT + (int) Math.round((W - LEFT - RIGHT) * (double) p.step() / maxStep);
                    int y = y(v, yMax);
                    if (px >= 0) {
                        g.drawLine(px, py, x, y);
                    }
                    px = x;
                    py = y;
                }
                g.drawString(series == 0 ? "min" : series == 1 ? "mean" : "max", W - RIGHT - 150 + 45 * series,
                        TOP + 12);
            }
        } finally {
            g.dispose();
        }
        ImageIO.write(img, "png", file.toFile());
        return true;
    }

    private static int y(double v, double yMax) {
        return H - BOTTOM - (int) Math.round((H - TOP - BOTTOM) * v / yMax);
    }
}
