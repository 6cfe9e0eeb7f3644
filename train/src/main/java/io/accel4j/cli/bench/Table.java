package io.accel4j.cli.bench;

import java.io.PrintWriter;
import java.util.Locale;

/**
 * A fixed-width text table printed row by row, so a slow benchmark shows each result as it comes. Text columns are
 * left-aligned, numeric ones right-aligned.
 */
final class Table {

    private final PrintWriter out;
    private final String[] headers;
    private final int[] widths;
    private final boolean[] right;

    /** @param widths minimum widths (the header's length is the floor); @param right right-align that column */
    Table(PrintWriter out, String[] headers, int[] widths, boolean[] right) {
        this.out = out;
        this.headers = headers.clone();
        this.widths = new int[headers.length];
        for (int i = 0; i < headers.length; i++) {
            this.widths[i] = Math.max(headers[i].length(), widths[i]);
        }
        this.right = right.clone();
    }

    void header() {
        row(headers);
        StringBuilder rule = new StringBuilder();
        for (int i = 0; i < widths.length; i++) {
            rule.append(i == 0 ? "" : "  ").append("-".repeat(widths[i]));
        }
        out.println(rule);
        out.flush();
    }

    void row(String... cells) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < widths.length; i++) {
            String c = i < cells.length ? cells[i] : "";
            String pad = " ".repeat(Math.max(0, widths[i] - c.length()));
            sb.append(i == 0 ? "" : "  ").append(right[i] ? pad + c : c + pad);
        }
        out.println(sb.toString().stripTrailing());
        out.flush();
    }

    /** About three significant digits, no exponent above 1e-4: 1234, 123, 12.3, 1.23, 0.123, 0.0123. */
    static String num(double v) {
        double a = Math.abs(v);
        if (a >= 100) {
            return String.format(Locale.ROOT, "%.0f", v);
        } else if (a >= 10) {
            return String.format(Locale.ROOT, "%.1f", v);
        } else if (a >= 1) {
            return String.format(Locale.ROOT, "%.2f", v);
        }
        return String.format(Locale.ROOT, "%.3g", v);
    }
}
