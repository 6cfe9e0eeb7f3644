package io.accel4j.nn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.train.CountingMemory;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.api.Test;

/**
 * {@link HalfGradients} against a scalar emulation of what it must hold: each half unit's element, after K
 * micro-batches that add {@code x_k} into its fp32 working region, is
 * {@code round16(… round16(round16(x_1) + x_2) … + x_K)} bit for bit (the casts are exact widenings and
 * round-to-nearest-even narrowings, the adds fp32); a wide unit's is the fp32 sum. The units are cut into pieces
 * interleaved over the vector (as GPT-2's layers are over its stacked tensors), with sizes around
 * {@link HalfGradients#CHUNK} so the chunks' tails are crossed.
 */
class HalfGradientsTest {

    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;
    /**
     * Σ g² over the chunks (each the backend's fp32-accumulated sum, combined in double) against a float64 sum of the
     * same decoded values: relative, fp32 accumulation over at most CHUNK terms per chunk (≈ 2⁻²⁴·√CHUNK, bounded
     * generously at 1e-5).
     */
    private static final double SUM_TOL = 1e-5;

    private static Parallel pool;
    private static CpuOps ops;

    @BeforeAll
    static void setUp() {
        pool = new Parallel(2);
        ops = new CpuOps(pool);
    }

    @AfterAll
    static void tearDown() {
        pool.close();
    }

    /** Three units over the vector: unit 0 wide (pieces a, d), units 1 and 2 half, interleaved a b c d e f. */
    private static List<HalfUnitLayout.Unit> units(long[] n) {
        long at = 0;
        long[] off = new long[n.length];
        for (int i = 0; i < n.length; i++) {
            off[i] = at;
            at += n[i];
        }
        return List.of(
                new HalfUnitLayout.Unit(List.of(new HalfUnitLayout.Piece(off[0], n[0], 0),
                        new HalfUnitLayout.Piece(off[3], n[3], n[0])), false),
                new HalfUnitLayout.Unit(List.of(new HalfUnitLayout.Piece(off[1], n[1], 0),
                        new HalfUnitLayout.Piece(off[4], n[4], n[1])), true),
                new HalfUnitLayout.Unit(List.of(new HalfUnitLayout.Piece(off[2], n[2], 0),
                        new HalfUnitLayout.Piece(off[5], n[5], n[2])), true));
    }

    @ParameterizedTest
    @EnumSource(value = DType.class, names = {"BF16", "FP16"})
    void accumulationRoundsOnceAMicroBatchAndChunksSeeTheStore(DType type) {
        long seed = System.nanoTime();
        Random r = new Random(seed);
        long[] n = {7, HalfGradients.CHUNK + 3, 1, 13, HalfGradients.CHUNK - 5, 2 * HalfGradients.CHUNK + 1};
        long count = 0;
        for (long x : n) {
            count += x;
        }
        List<HalfUnitLayout.Unit> units = units(n);
        CountingMemory counted = new CountingMemory();
        try (HalfGradients g = new HalfGradients(counted.ops(ops), type, count, units)) {
            assertThat(g.bytes()).isEqualTo(HalfGradients.bytes(units, count)).isEqualTo(counted.live.get());
            float[] expected = new float[(int) count];
            for (int step = 0; step < 2; step++) {
                g.zero();
                java.util.Arrays.fill(expected, 0f);
                for (int k = 0; k < 3; k++) { // micro-batches; the units' backward in reverse order, as a network's
                    for (int u = units.size() - 1; u >= 0; u--) {
                        HalfUnitLayout.Unit unit = units.get(u);
                        g.begin(u);
                        for (HalfUnitLayout.Piece p : unit.pieces()) {
                            MemorySegment s = g.grad(u, p.offset(), p.count());
                            for (long i = 0; i < p.count(); i++) {
                                // magnitudes over ~7 decades, within fp16's range after 3 adds
                                float x = (float) (r.nextGaussian() * Math.exp(r.nextGaussian() * 1.5));
                                s.setAtIndex(F32, i, s.getAtIndex(F32, i) + x);
                                int e = (int) (p.offset() + i);
                                expected[e] += x;
                            }
                        }
                        g.done(u);
                        if (unit.half()) {
                            for (HalfUnitLayout.Piece p : unit.pieces()) {
                                for (long i = 0; i < p.count(); i++) {
                                    int e = (int) (p.offset() + i);
                                    expected[e] = type.decode(type.encode(expected[e], false));
                                }
                            }
                        }
                    }
                }
                long[] seen = {0};
                double[] sum = {0};
                g.chunks(0, count, false, (o, f, m) -> {
                    assertThat(o).as("seed %d: chunks in order", seed).isEqualTo(seen[0]);
                    assertThat(m).isLessThanOrEqualTo(Math.max(HalfGradients.CHUNK, n[0] + n[3]));
                    for (long i = 0; i < m; i++) {
                        float want = expected[(int) (o + i)], got = f.getAtIndex(F32, i);
                        assertThat(Float.floatToRawIntBits(got)).as("seed %d, element %d: %s, expected %s", seed,
                                o + i, got, want).isEqualTo(Float.floatToRawIntBits(want));
                        sum[0] += (double) want * want;
                    }
                    seen[0] += m;
                });
                assertThat(seen[0]).isEqualTo(count);
                assertThat(g.sumOfSquares()).as("seed %d", seed).isCloseTo(sum[0],
                        org.assertj.core.data.Percentage.withPercentage(100 * SUM_TOL));
                assertThat(g.hasNonFinite()).isFalse();
            }
        }
    }

    @ParameterizedTest
    @EnumSource(value = DType.class, names = {"BF16", "FP16"})
    void writtenChunksAreRoundedBackAndAnOverflowIsSeen(DType type) {
        long[] n = {5, 9, 3, 4, HalfGradients.CHUNK + 2, 6};
        long count = 0;
        for (long x : n) {
            count += x;
        }
        try (HalfGradients g = new HalfGradients(ops, type, count, units(n))) {
            g.chunks(0, count, true, (o, f, m) -> {
                for (long i = 0; i < m; i++) {
                    f.setAtIndex(F32, i, 1f + (o + i) * 1e-3f);
                }
            });
            g.chunks(0, count, false, (o, f, m) -> {
                for (long i = 0; i < m; i++) {
                    long e = o + i;
                    boolean wide = e < n[0] || e >= n[0] + n[1] + n[2] && e < n[0] + n[1] + n[2] + n[3];
                    float x = 1f + e * 1e-3f, want = wide ? x : type.decode(type.encode(x, false));
                    assertThat(f.getAtIndex(F32, i)).as("element %d", e).isEqualTo(want);
                }
            });
            long last = count - 1; // in a half piece: 1e5 overflows fp16 to inf; NaN stays NaN in bf16
            g.chunks(last, 1, true, (o, f, m) -> f.setAtIndex(F32, 0, type == DType.FP16 ? 1e5f : Float.NaN));
            assertThat(g.hasNonFinite()).isTrue();
            g.zero();
            assertThat(g.hasNonFinite()).isFalse();
            assertThat(g.sumOfSquares()).isZero();
        }
    }

    @Test
    void badUnitsAndMisuseAreRefusedInOneLine() {
        List<HalfUnitLayout.Unit> gap = List.of(new HalfUnitLayout.Unit(List.of(new HalfUnitLayout.Piece(0, 3, 0),
                new HalfUnitLayout.Piece(4, 2, 3)), true));
        assertThatThrownBy(() -> HalfGradients.bytes(gap, 6)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("the units must cover the 6 gradients once each: element 3 is in no unit");
        List<HalfUnitLayout.Unit> twice = List.of(new HalfUnitLayout.Unit(List.of(new HalfUnitLayout.Piece(0, 3, 0)),
                true), new HalfUnitLayout.Unit(List.of(new HalfUnitLayout.Piece(2, 2, 0)), false));
        assertThatThrownBy(() -> HalfGradients.bytes(twice, 4)).hasMessage("the units must cover the 4 gradients "
                + "once each: element 2 is in two");
        List<HalfUnitLayout.Unit> short3 = List.of(new HalfUnitLayout.Unit(List.of(new HalfUnitLayout.Piece(0, 3, 0)),
                true));
        assertThatThrownBy(() -> HalfGradients.bytes(short3, 4)).hasMessage("the units cover 3 gradients, the vector "
                + "has 4");
        assertThatThrownBy(() -> new HalfGradients(ops, DType.FP32, 1, List.of()))
                .hasMessage("16-bit gradients are stored in BF16 or FP16, got FP32");
        List<HalfUnitLayout.Unit> two = new ArrayList<>(units(new long[] {1, 2, 3, 4, 5, 6}));
        try (HalfGradients g = new HalfGradients(ops, DType.BF16, 21, two)) {
            assertThatThrownBy(() -> g.grad(1, 1, 2)).isInstanceOf(IllegalStateException.class)
                    .hasMessage("unit 1's 16-bit gradients are read outside its backward (between begin and done)");
            g.begin(1);
            assertThatThrownBy(() -> g.begin(2)).hasMessage("unit 2's gradients begin while unit 1's are open: 16-bit "
                    + "gradients hold one unit at a time in fp32");
            assertThatThrownBy(() -> g.grad(1, 2, 5)).hasMessage("elements [2, 7) are not inside one piece of unit 1");
            assertThatThrownBy(() -> g.sumOfSquares()).hasMessage("the gradients are read while unit 1's backward is "
                    + "open");
            assertThatThrownBy(() -> g.done(2)).hasMessage("unit 2's gradients end, but unit 1's are");
            g.done(1);
            assertThatThrownBy(() -> g.chunks(20, 2, false, (o, f, m) -> { }))
                    .hasMessage("elements [20, 22) are outside the 21 gradients");
            assertThatThrownBy(() -> g.begin(3)).hasMessage("unit 3 is not in [0, 3)");
        }
    }
}
