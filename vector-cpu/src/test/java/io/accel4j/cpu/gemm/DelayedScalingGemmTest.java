package io.accel4j.cpu.gemm;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.core.DType;
import io.accel4j.core.fp8.AmaxHistory;
import io.accel4j.core.fp8.DelayedScaling.Algorithm;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Delayed scaling end to end on the CPU: over a run of steps whose input magnitude changes, the FP8 GEMM
 * {@code y = scaleInvX·scaleInvW·fp8(x·scaleX)·fp8(w·scaleW)ᵀ} (inputs cast by {@link CpuOps#castToFp8} with each
 * tensor's {@link AmaxHistory}, amaxes recorded, histories updated after each step) stays within the format's
 * tolerance of the fp32 GEMM of the unrounded inputs whenever the delayed scale covers the step's values, and fails as
 * the format says when it does not: a sudden 16× growth saturates most codes at ±max (a large error), a sudden
 * shrink below the format's range underflows every code to ±0 (the output is exactly 0) — until the window has
 * caught up, which takes one step with {@link Algorithm#MOST_RECENT} and the whole window with {@link Algorithm#MAX}.
 */
class DelayedScalingGemmTest {

    private static final int M = 37;
    private static final int N = 29;
    private static final int K = 83;
    private static final int HISTORY = 3;
    private static final float WEIGHT_MAGNITUDE = 0.1f;
    /**
     * Relative Frobenius error of the E4M3×E4M3 product: each operand is off by a relative rounding error of at most
     * 2⁻⁴ (3 mantissa bits), ~0.02 rms for values spread over a binade; a dot product of K random-sign terms keeps that
     * relative rms, two operands make it ~0.03 (measured 0.034–0.039 over many seeds and steps). 0.05 leaves room
     * for the seed.
     */
    private static final double E4M3_TOL = 0.05;
    /** E5M2 (2 mantissa bits, half-ulp 2⁻³ relative) × E4M3: ~0.05 rms (measured 0.054–0.057); 0.08 likewise. */
    private static final double E5M2_TOL = 0.08;
    /** A scale 16× too large puts ~94% of |x·scale| above the saturation threshold: the product is far off. */
    private static final double SATURATED_MIN_ERROR = 0.3;

    private static Parallel pool;
    private static CpuOps cpu;

    @BeforeAll
    static void open() {
        pool = new Parallel(1);
        cpu = new CpuOps(pool);
    }

    @AfterAll
    static void close() {
        pool.close();
    }

    /** What a step should show: within tolerance, saturated, or underflowed to an all-zero product. */
    private enum Outcome { GOOD, SATURATED, UNDERFLOW }

    /**
     * x's magnitude per step: 1, 1, then ×16 (the delayed scale is 16× too large), 16, 16, then ×tiny (below the
     * format's range at the scale for 16), six times. Expected outcomes as letters: G(ood), S(aturated), U(nderflow).
     */
    @ParameterizedTest(name = "{0} x {1}: {2}")
    @CsvSource({
        "FP8_E4M3, MAX,         GGSGGUUUGGG",
        "FP8_E4M3, MOST_RECENT, GGSGGUGGGGG",
        "FP8_E5M2, MAX,         GGSGGUUUGGG",
    })
    void delayedScalingTracksTheMagnitudeAndFailsAsTheFormatSays(DType xFormat, Algorithm algorithm, String expected) {
        long seed = System.nanoTime();
        SplittableRandom rnd = new SplittableRandom(seed);
        // |x·scale| above this is clipped to ±max (it would round to the next binade): 448 + 16, 57344 + 4096
        float overflowAbove = xFormat == DType.FP8_E4M3 ? 464f : 61440f;
        // below half the smallest subnormal even at the scale fmax/16 of the big steps: every code rounds to ±0
        float tiny = xFormat == DType.FP8_E4M3 ? 0x1p-16f : 0x1p-30f;
        float[] magnitudes = {1, 1, 16, 16, 16, tiny, tiny, tiny, tiny, tiny, tiny};
        double tol = xFormat == DType.FP8_E4M3 ? E4M3_TOL : E5M2_TOL;
        AmaxHistory hx = new AmaxHistory(xFormat, HISTORY, 0, algorithm);
        AmaxHistory hw = new AmaxHistory(DType.FP8_E4M3, HISTORY, 0, algorithm);
        try (Arena arena = Arena.ofShared()) {
            MemorySegment w = random(arena, rnd, N * K, WEIGHT_MAGNITUDE);
            MemorySegment x8 = arena.allocate((long) M * K), w8 = arena.allocate((long) N * K);
            MemorySegment y8 = arena.allocate(4L * M * N), y = arena.allocate(4L * M * N);
            for (int step = 0; step < magnitudes.length; step++) {
                MemorySegment x = random(arena, rnd, M * K, magnitudes[step]);
                y8.fill((byte) 0xFF); // NaN
                y.fill((byte) 0xFF);
                float sx = hx.scale();
                float invX = hx.quantize(cpu, x8, x, (long) M * K);
                float invW = hw.quantize(cpu, w8, w, (long) N * K);
                Gemm.gemm(pool, Layout.NT, M, N, K, 1f, x8, xFormat, K, invX, w8, DType.FP8_E4M3, K, invW,
                        0f, y8, DType.FP32, N, null);
                Gemm.gemm(pool, Layout.NT, M, N, K, 1f, x, DType.FP32, K, 1f, w, DType.FP32, K, 1f,
                        0f, y, DType.FP32, N, null);
                hx.update();
                hw.update();

                double err = relativeError(y8, y, M * N);
                double saturated = clipped(x, M * K, sx, overflowAbove);
                double zeros = fraction(x8, M * K, xFormat, v -> v == 0);
                String what = "step " + step + " (|x| ≤ " + magnitudes[step] + ", scale " + sx + "): error " + err
                        + ", saturated " + saturated + ", zero codes " + zeros + " (seed " + seed + ")";
                switch (Outcome.values()["GSU".indexOf(expected.charAt(step))]) {
                    case GOOD -> {
                        assertThat(err).as(what).isLessThanOrEqualTo(tol);
                        assertThat(saturated).as(what + ": the scale covers the step").isZero();
                    }
                    case SATURATED -> {
                        assertThat(saturated).as(what).isGreaterThan(0.8);
                        assertThat(err).as(what).isGreaterThan(SATURATED_MIN_ERROR);
                    }
                    case UNDERFLOW -> {
                        assertThat(zeros).as(what).isEqualTo(1.0);
                        assertThat(err).as(what + ": the product is exactly 0").isEqualTo(1.0);
                    }
                }
            }
        }
    }

    private static MemorySegment random(Arena arena, SplittableRandom rnd, int n, float magnitude) {
        MemorySegment s = arena.allocate(4L * n);
        for (int i = 0; i < n; i++) {
            s.setAtIndex(ValueLayout.JAVA_FLOAT, i, (float) rnd.nextDouble(-1, 1) * magnitude);
        }
        return s;
    }

    /** ‖got − ref‖ / ‖ref‖ over n floats, in double. */
    private static double relativeError(MemorySegment got, MemorySegment ref, int n) {
        double diff = 0, norm = 0;
        for (int i = 0; i < n; i++) {
            double g = got.getAtIndex(ValueLayout.JAVA_FLOAT, i), r = ref.getAtIndex(ValueLayout.JAVA_FLOAT, i);
            diff += (g - r) * (g - r);
            norm += r * r;
        }
        return Math.sqrt(diff / norm);
    }

    /** The fraction of the n values of x whose |x·scale| exceeds {@code above}: those the cast saturates. */
    private static double clipped(MemorySegment x, int n, float scale, float above) {
        int count = 0;
        for (int i = 0; i < n; i++) {
            if (Math.abs(x.getAtIndex(ValueLayout.JAVA_FLOAT, i) * scale) > above) {
                count++;
            }
        }
        return (double) count / n;
    }

    private static double fraction(MemorySegment codes, int n, DType type, java.util.function.DoublePredicate p) {
        int count = 0;
        for (int i = 0; i < n; i++) {
            if (p.test(type.decode(codes.get(ValueLayout.JAVA_BYTE, i)))) {
                count++;
            }
        }
        return (double) count / n;
    }
}
