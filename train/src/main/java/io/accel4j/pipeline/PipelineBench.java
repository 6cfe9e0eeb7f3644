package io.accel4j.pipeline;

import io.accel4j.fit.DataSource;
import io.accel4j.fit.Learner;
import io.accel4j.fit.LearnerBuilder;
import io.accel4j.nn.Gpt2Blocks;
import io.accel4j.optim.AdamW;
import io.accel4j.optim.LrSchedule;
import io.accel4j.train.StepMetrics;
import io.accel4j.train.model.GptConfig;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.Locale;
import java.util.Random;

/**
 * The pipeline's benchmark, in one run on in-process ranks: GPT-2 (L = 4, C = 128, or {@code L C} from the
 * arguments) at pp=2 with M ∈ {P, 2P, 4P} micro-batches of B sequences, both schedules, beside one rank and plain
 * data parallelism (dp=2) over the same global batch: median step time and tokens/s, each stage's measured idle
 * fraction against the bubble formula (P−1)/(M+P−1), and the bytes a rank holds (parameters, gradients, AdamW
 * state, activations) against one rank's. Run: {@code java -cp 'train/target/accel4j-train.jar:train/target/lib/*'
 * <jvm flags> io.accel4j.pipeline.PipelineBench [L C steps]}.
 */
public final class PipelineBench {

    private PipelineBench() {}

    public static void main(String[] args) {
        int L = args.length > 0 ? Integer.parseInt(args[0]) : 4, C = args.length > 1 ? Integer.parseInt(args[1]) : 128;
        int steps = args.length > 2 ? Integer.parseInt(args[2]) : 6;
        GptConfig c = new GptConfig(64, 256, 256, L, 4, C);
        int B = 2, T = 64, P = 2;
        System.out.printf(Locale.ROOT, "GPT-2 %s, micro-batch %d x %d, %d steps (median of all but the first 2), "
                + "after a warm-up round of every layout%n", c, B, T, steps);
        java.io.PrintStream real = System.out;
        System.setOut(new java.io.PrintStream(java.io.OutputStream.nullOutputStream()));
        try {
            table(c, B, T, P, 4); // the JIT's warm-up: every layout once, unprinted
        } finally {
            System.setOut(real);
        }
        table(c, B, T, P, steps);
    }

    private static void table(GptConfig c, int B, int T, int P, int steps) {
        System.out.println("| layout | M | step ms | tokens/s | vs dp=2 | idle stage 0 | idle stage 1 | bubble formula "
                + "| bytes per rank (max) | vs one rank |");
        System.out.println("|---|---|---|---|---|---|---|---|---|---|");
        for (int M : new int[] {P, 2 * P, 4 * P}) {
            long oneBytes;
            try (Learner one = base(c, B, T).gradAccum(M).threads(1).build()) {
                row("one rank", M, one, steps, B, T, M, Double.NaN, -1, 0);
                oneBytes = one.network().totalBytes() + 2 * one.network().parameterBytes();
            }
            double dp;
            try (Learner d = base(c, B, T).ranks(2).gradAccum(M / 2).threads(2).build()) {
                dp = row("dp=2", M, d, steps, B, T, M / 2 * 2, Double.NaN, -1, 0);
            }
            for (Schedule s : List.of(Schedule.GPIPE, Schedule.ONE_F_ONE_B)) {
                try (Learner pp = base(c, B, T).pipeline(Gpt2Stages.of(c), P, M, s).threads(2).build()) {
                    row("pp=2 " + s.name(), M, pp, steps, B, T, M, dp, oneBytes, P);
                }
            }
        }
    }

    private static LearnerBuilder base(GptConfig c, int B, int T) {
        return Learner.of(() -> Gpt2Blocks.body(c)).tokens(c.V()).classes(c.V()).parameterOrder(Gpt2Blocks.LLMC_ORDER)
                .batch(B, T).optimizer(AdamW.of(0f)).schedule(LrSchedule.constant(1e-3f)).seed(1).data(tokens(c.V()));
    }

    /** Prints one table row; returns the median step time. */
    private static double row(String layout, int M, Learner l, int steps, int B, int T, int micro, double dpMs,
                              long oneBytes, int P) {
        double[] ms = new double[steps - 2];
        double[][] idle = new double[Math.max(P, 1)][steps - 2];
        for (int s = 0; s < steps; s++) {
            StepMetrics m = l.fit(1, null).get(0);
            if (s >= 2) {
                ms[s - 2] = m.stepMs();
                for (int p = 0; p < P; p++) {
                    idle[p][s - 2] = l.stages().get(p).idleFraction();
                }
            }
        }
        double med = median(ms), tokens = (double) B * T * micro / (med / 1e3);
        String idles = P == 0 ? "— | —" : String.format(Locale.ROOT, "%.1f%% | %.1f%%", 100 * median(idle[0]),
                100 * median(idle[1]));
        String formula = P == 0 ? "—" : String.format(Locale.ROOT, "%.1f%%", 100 * Timeline.bubbleFormula(P, M));
        String bytes = "—", ratio = "—";
        if (P > 0) {
            long most = 0;
            for (PipelineRank r : l.stages()) {
                long b = 2 * r.network().parameterBytes() + 2 * r.network().parameterBytes()
                        + r.network().slotsAllocated() * r.network().slotBytes() + r.network().workingBytes();
                most = Math.max(most, b);
            }
            bytes = String.format(Locale.ROOT, "%.2f MiB", most / 1048576.0);
            ratio = String.format(Locale.ROOT, "%.2f", (double) most / oneBytes);
        }
        System.out.printf(Locale.ROOT, "| %s | %d | %.0f | %.0f | %s | %s | %s | %s | %s |%n", layout, M, med, tokens,
                Double.isNaN(dpMs) ? "—" : String.format(Locale.ROOT, "%.2f", dpMs / med), idles, formula, bytes,
                ratio);
        return med;
    }

    private static double median(double[] v) {
        double[] s = v.clone();
        java.util.Arrays.sort(s);
        return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
    }

    private static DataSource.Factory tokens(int V) {
        return (rank, ranks, b, t) -> {
            Random r = new Random(17 + rank);
            return (MemorySegment in, MemorySegment tg) -> {
                for (int i = 0; i < b * t; i++) {
                    in.setAtIndex(ValueLayout.JAVA_INT, i, r.nextInt(V));
                    tg.setAtIndex(ValueLayout.JAVA_INT, i, r.nextInt(V));
                }
            };
        };
    }
}
