package io.accel4j.kernels.bench;

import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The benchmark results as a plain-text table (stdout), as TSV rows (written one by one while the run goes) and as
 * one JSON document at the end. Numbers are formatted with {@link Locale#ROOT}; a figure that does not exist (a case
 * that did not run) is empty in the TSV and {@code null} in the JSON.
 */
public final class Report {

    /** A figure derived from two results, with the threshold it must reach (e.g. AdamW's bandwidth over a copy's). */
    public record Ratio(String name, double value, double threshold) {
        public boolean pass() {
            return value >= threshold;
        }
    }

    private static final String ROW = "%-9s %-24s %-28s %9s %9s %4s %9s %-8s %7s  %s%n";

    private Report() {}

    /** The table: a line per result, then the ratios, then the ceilings used. */
    public static String table(List<Result> results, List<Ratio> ratios) {
        StringBuilder b = new StringBuilder();
        b.append(String.format(Locale.ROOT, ROW, "group", "kernel", "shape", "median ms", "min ms", "n", "median",
                "unit", "of peak", "ceiling"));
        for (Result r : results) {
            if (r.ok()) {
                b.append(String.format(Locale.ROOT, ROW, r.group(), r.kernel(), r.shape(),
                        ms(r.stats().medianMs()), ms(r.stats().minMs()), r.stats().samples(),
                        String.format(Locale.ROOT, "%.1f", r.value()), r.ceiling().unit(),
                        String.format(Locale.ROOT, "%.1f%%", 100 * r.ofCeiling()), r.ceiling().name()));
            } else {
                b.append(String.format(Locale.ROOT, ROW, r.group(), r.kernel(), r.shape(), "", "", "", "", "", "",
                        r.status() + ": " + clip(text(r.detail()), 100)));
            }
        }
        for (Ratio q : ratios) {
            b.append(String.format(Locale.ROOT, "%s: %.3f (acceptance >= %.2f: %s)%n", q.name(), q.value(),
                    q.threshold(), Double.isNaN(q.value()) ? "not measured" : q.pass() ? "PASS" : "FAIL"));
        }
        b.append("of peak: the median against the ").append(Ceiling.GPU).append("'s dense peak: ");
        Ceiling[] all = Ceiling.values();
        for (int i = 0; i < all.length; i++) {
            b.append(i == 0 ? "" : ", ").append(all[i].label());
        }
        return b.append('\n').toString();
    }

    /** Milliseconds with 4 significant-ish digits: {@code 12.35}, {@code 0.04213}. */
    static String ms(double v) {
        return String.format(Locale.ROOT, v >= 100 ? "%.1f" : v >= 1 ? "%.3f" : "%.5f", v);
    }

    private static String clip(String s, int n) {
        return s.length() > n ? s.substring(0, n) + "…" : s;
    }

    public static final String TSV_HEADER = String.join("\t", "group", "kernel", "shape", "status", "median_ms",
            "min_ms", "samples", "work", "median_per_s", "best_per_s", "unit", "ceiling", "of_ceiling", "detail");

    /** One TSV line (no newline) under {@link #TSV_HEADER}; tabs and newlines in text become spaces. */
    public static String tsv(Result r) {
        boolean ok = r.ok();
        return String.join("\t", text(r.group()), text(r.kernel()), text(r.shape()), r.status().name(),
                ok ? num(r.stats().medianMs()) : "", ok ? num(r.stats().minMs()) : "",
                ok ? Integer.toString(r.stats().samples()) : "", num(r.work()), ok ? num(r.value()) : "",
                ok ? num(r.best()) : "", r.ceiling().unit(), r.ceiling().name(), ok ? num(r.ofCeiling()) : "",
                text(r.detail()));
    }

    private static String text(String s) {
        return s.replaceAll("[\t\r\n]+", " ");
    }

    private static String num(double v) {
        return Double.isFinite(v) ? String.format(Locale.ROOT, "%.6g", v) : "";
    }

    /** The whole run: {@code meta} (device, seed, …), the ceilings, every result and the ratios. */
    public static String json(Map<String, String> meta, List<Result> results, List<Ratio> ratios) {
        StringBuilder b = new StringBuilder("{\n  \"meta\": {");
        int i = 0;
        for (Map.Entry<String, String> e : meta.entrySet()) {
            b.append(i++ == 0 ? "" : ", ").append(quote(e.getKey())).append(": ").append(quote(e.getValue()));
        }
        b.append("},\n  \"ceilings\": {\"gpu\": ").append(quote(Ceiling.GPU));
        for (Ceiling c : Ceiling.values()) {
            b.append(", ").append(quote(c.name())).append(": {\"per_second\": ").append(jsonNum(c.perSecond()))
                    .append(", \"unit\": ").append(quote(c.unit())).append('}');
        }
        b.append("},\n  \"results\": [");
        for (int k = 0; k < results.size(); k++) {
            Result r = results.get(k);
            boolean ok = r.ok();
            b.append(k == 0 ? "\n" : ",\n").append("    {\"group\": ").append(quote(r.group()))
                    .append(", \"kernel\": ").append(quote(r.kernel()))
                    .append(", \"shape\": ").append(quote(r.shape()))
                    .append(", \"status\": ").append(quote(r.status().name()))
                    .append(", \"median_ms\": ").append(ok ? jsonNum(r.stats().medianMs()) : "null")
                    .append(", \"min_ms\": ").append(ok ? jsonNum(r.stats().minMs()) : "null")
                    .append(", \"samples\": ").append(ok ? r.stats().samples() : 0)
                    .append(", \"work\": ").append(jsonNum(r.work()))
                    .append(", \"median_per_s\": ").append(jsonNum(r.value()))
                    .append(", \"best_per_s\": ").append(jsonNum(r.best()))
                    .append(", \"unit\": ").append(quote(r.ceiling().unit()))
                    .append(", \"ceiling\": ").append(quote(r.ceiling().name()))
                    .append(", \"of_ceiling\": ").append(jsonNum(r.ofCeiling()))
                    .append(", \"detail\": ").append(quote(r.detail())).append('}');
        }
        b.append(results.isEmpty() ? "],\n" : "\n  ],\n").append("  \"ratios\": [");
        for (int k = 0; k < ratios.size(); k++) {
            Ratio q = ratios.get(k);
            b.append(k == 0 ? "" : ", ").append("{\"name\": ").append(quote(q.name()))
                    .append(", \"value\": ").append(jsonNum(q.value()))
                    .append(", \"threshold\": ").append(jsonNum(q.threshold()))
                    .append(", \"pass\": ").append(!Double.isNaN(q.value()) && q.pass()).append('}');
        }
        return b.append("]\n}\n").toString();
    }

    /** A JSON number, or {@code null} for NaN and infinities (which JSON lacks). */
    static String jsonNum(double v) {
        if (!Double.isFinite(v)) {
            return "null";
        }
        return v == Math.rint(v) && Math.abs(v) < 0x1p53 ? Long.toString((long) v) : Double.toString(v);
    }

    /** A JSON string literal. */
    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        return b.append('"').toString();
    }
}
