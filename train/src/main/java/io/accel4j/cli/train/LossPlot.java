package io.accel4j.cli.train;

import io.accel4j.train.StepMetrics;
import java.awt.BasicStroke;
import java.awt.Color;
import java.awt.Font;
import java.awt.Graphics2D;
import java.awt.RenderingHints;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import javax.imageio.ImageIO;

/**
 * The loss curve as a PNG, drawn with java.awt in headless mode: train loss per step (thin, light) and its moving
 * average, validation loss (dots joined), an optional horizontal reference line (e.g. the data's unigram entropy).
 */
public final class LossPlot {

    private static final int W = 800, H = 480, LEFT = 70, RIGHT = 20, TOP = 40, BOTTOM = 50;

    private LossPlot() {}

    /** Writes the plot of {@code metrics} to {@code file}; {@code reference} NaN for none. */
    public static void write(Path file, List<StepMetrics> metrics, double reference, String referenceLabel, String title)
            throws IOException {
        System.setProperty("java.awt.headless", "true");
        // the y range: every validation loss and the first train loss, but not a one-step spike above them
        double maxStep = 1, lo = Double.POSITIVE_INFINITY, hi = Double.NEGATIVE_INFINITY;
        boolean first = true;
        for (StepMetrics m : metrics) {
            maxStep = Math.max(maxStep, m.step());
            for (double y : new double[] {m.trainLoss(), m.valLoss()}) {
                if (Double.isFinite(y)) {
                    lo = Math.min(lo, y);
                    if (first || y == m.valLoss()) {
                        hi = Math.max(hi, y);
                    }
                }
            }
            first &= !Double.isFinite(m.trainLoss());
        }
        if (Double.isFinite(reference)) {
            lo = Math.min(lo, reference);
            hi = Math.max(hi, reference);
        }
        if (!(hi > lo)) {
            hi = lo + 1;
        }
        lo = Math.max(0, lo - 0.05 * (hi - lo));
        BufferedImage img = new BufferedImage(W, H, BufferedImage.TYPE_INT_RGB);
        Graphics2D g = img.createGraphics();
        try {
            g.setRenderingHint(RenderingHints.KEY_ANTIALIASING, RenderingHints.VALUE_ANTIALIAS_ON);
            g.setColor(Color.WHITE);
            g.fillRect(0, 0, W, H);
            Axes a = new Axes(maxStep, lo, hi);
            drawAxes(g, a, title);
            if (Double.isFinite(reference)) {
                g.setColor(new Color(150, 150, 150));
                g.setStroke(new BasicStroke(1f, BasicStroke.CAP_BUTT, BasicStroke.JOIN_MITER, 10f, new float[] {6f},
                        0f));
                int y = a.y(reference);
                g.drawLine(LEFT, y, W - RIGHT, y);
                g.drawString(referenceLabel, LEFT + 6, y - 4);
            }
            g.setStroke(new BasicStroke(1f));
            g.setColor(new Color(160, 190, 230));
            polyline(g, a, metrics, false, 1);
            g.setStroke(new BasicStroke(2f));
            g.setColor(new Color(30, 90, 180));
            polyline(g, a, metrics, false, Math.max(1, metrics.size() / 50));
            g.setColor(new Color(220, 90, 20));
            polyline(g, a, metrics, true, 1);
            legend(g);
        } finally {
            g.dispose();
        }
        Path tmp = file.resolveSibling("." + file.getFileName() + ".tmp");
        if (!ImageIO.write(img, "png", tmp.toFile())) {
            throw new IOException("no PNG writer available");
        }
        Files.move(tmp, file, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
    }

    private record Axes(double maxStep, double lo, double hi) {
        int x(double step) {
            return LEFT + (int) Math.round(step / maxStep * (W - LEFT - RIGHT));
        }

        /** y of a loss, clamped to the plot (a spike above the range touches the top). */
        int y(double loss) {
            double clamped = Math.max(lo, Math.min(hi, loss));
            return TOP + (int) Math.round((hi - clamped) / (hi - lo) * (H - TOP - BOTTOM));
        }
    }

    private static void drawAxes(Graphics2D g, Axes a, String title) {
        g.setColor(Color.BLACK);
        g.setFont(new Font(Font.SANS_SERIF, Font.BOLD, 14));
        g.drawString(title, LEFT, 24);
        g.setFont(new Font(Font.SANS_SERIF, Font.PLAIN, 11));
        g.drawRect(LEFT, TOP, W - LEFT - RIGHT, H - TOP - BOTTOM);
        for (int i = 0; i <= 5; i++) {
            double loss = a.lo() + (a.hi() - a.lo()) * i / 5;
            int y = a.y(loss);
            g.setColor(new Color(230, 230, 230));
            g.drawLine(LEFT + 1, y, W - RIGHT - 1, y);
            g.setColor(Color.BLACK);
            g.drawString(String.format(Locale.ROOT, "%.2f", loss), 10, y + 4);
            long step = Math.round(a.maxStep() * i / 5);
            g.drawString(Long.toString(step), a.x(step) - 10, H - BOTTOM + 16);
        }
        g.drawString("step", W / 2, H - 12);
        g.drawString("loss (nats/token)", 4, TOP - 6);
    }

    /** Train losses averaged over windows of {@code window} steps, or the validation losses. */
    private static void polyline(Graphics2D g, Axes a, List<StepMetrics> ms, boolean val, int window) {
        int px = -1, py = -1;
        double sum = 0;
        int n = 0;
        for (StepMetrics m : ms) {
            double y = val ? m.valLoss() : m.trainLoss();
            if (!Double.isFinite(y)) {
                continue;
            }
            sum += y;
            if (++n < window) {
                continue;
            }
            int x = a.x(m.step()), yy = a.y(sum / n);
            sum = 0;
            n = 0;
            if (px >= 0) {
                g.drawLine(px, py, x, yy);
            }
            if (val) {
                g.fillOval(x - 3, yy - 3, 6, 6);
            }
            px = x;
            py = yy;
        }
    }

    private static void legend(Graphics2D g) {
        int x = W - RIGHT - 170, y = TOP + 16;
        g.setColor(new Color(30, 90, 180));
        g.fillRect(x, y - 8, 16, 3);
        g.setColor(Color.BLACK);
        g.drawString("train loss", x + 22, y - 3);
        g.setColor(new Color(220, 90, 20));
        g.fillOval(x + 5, y + 6, 6, 6);
        g.setColor(Color.BLACK);
        g.drawString("validation loss", x + 22, y + 13);
    }
}
