package io.accel4j.train.profile;

import java.io.PrintWriter;
import java.util.List;
import java.util.Locale;

/**
 * Prints {@link ProfilingOps}' totals as a key-averages table in the manner of torch.profiler: one row per op, most
 * time first, with calls, total ms, ms per step, share of the step time and the achieved rate (GFLOP/s for the
 * matmuls and attention, GB/s of minimal traffic for the memory-bound ops); then the time by phase (forward,
 * backward, optimizer) and the part of the step spent outside the kernel contract.
 */
public final class ProfileReport {

    private ProfileReport() {}

    /**
     * @param entries   {@link ProfilingOps#entries()} over {@code steps} steps
     * @param stepNanos the wall time of those steps together
     */
    public static void print(PrintWriter out, List<ProfilingOps.Entry> entries, long stepNanos, int steps) {
        int opWidth = Math.max(25, entries.stream().mapToInt(e -> e.op().length()).max().orElse(0));
        String fmt = "%-" + opWidth + "s  %6s  %10s  %8s  %7s  %12s%n";
        out.printf(Locale.ROOT, fmt, "op", "calls", "total ms", "ms/step", "% step", "rate");
        out.println("-".repeat(opWidth + 2 + 6 + 2 + 10 + 2 + 8 + 2 + 7 + 2 + 12));
        long opsNanos = 0, fwd = 0, bwd = 0, opt = 0;
        for (ProfilingOps.Entry e : entries) {
            opsNanos += e.nanos();
            switch (e.phase()) {
                case "forward" -> fwd += e.nanos();
                case "backward" -> bwd += e.nanos();
                case "optimizer" -> opt += e.nanos();
                default -> { }
            }
            out.printf(Locale.ROOT, fmt, e.op(), e.calls(), ms(e.nanos()), ms(e.nanos() / (double) steps),
                    pct(e.nanos(), stepNanos), rate(e));
        }
        long outside = stepNanos - opsNanos;
        out.printf(Locale.ROOT, fmt, "(outside the ops)", "-", ms(outside), ms(outside / (double) steps),
                pct(outside, stepNanos), "-");
        out.printf(Locale.ROOT, fmt, "step", steps, ms(stepNanos), ms(stepNanos / (double) steps), "100.0", "-");
        out.printf(Locale.ROOT, "per step: forward %s ms (%s%%), backward %s ms (%s%%), optimizer %s ms (%s%%)%n",
                ms(fwd / (double) steps), pct(fwd, stepNanos), ms(bwd / (double) steps), pct(bwd, stepNanos),
                ms(opt / (double) steps), pct(opt, stepNanos));
        out.println("rate: GFLOP/s for matmul (2*N*C*OC forward, 4*N*C*OC backward) and attention (FlashAttention's"
                + " causal count 2*B*T^2*C forward, 2.5x backward); GB/s of minimal memory traffic otherwise.");
        out.flush();
    }

    /** {@code 123.4 GFLOP/s}, {@code 12.3 GB/s} or {@code -}. */
    static String rate(ProfilingOps.Entry e) {
        if (e.nanos() <= 0) {
            return "-";
        }
        if (e.flops() > 0) {
            return String.format(Locale.ROOT, "%.1f GFLOP/s", e.flops() / e.nanos());
        }
        if (e.bytes() > 0) {
            return String.format(Locale.ROOT, "%.1f GB/s", e.bytes() / e.nanos());
        }
        return "-";
    }

    private static String ms(double nanos) {
        return String.format(Locale.ROOT, "%.2f", nanos / 1e6);
    }

    private static String pct(long part, long whole) {
        return whole <= 0 ? "-" : String.format(Locale.ROOT, "%.1f", 100.0 * part / whole);
    }
}
