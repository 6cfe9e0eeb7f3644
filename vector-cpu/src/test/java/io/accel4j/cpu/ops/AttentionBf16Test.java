package io.accel4j.cpu.ops;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.core.Bf16;
import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ref.AttentionBf16Ref;
import io.accel4j.cpu.ref.AttentionRef;
import io.accel4j.cpu.testing.Buffers;
import io.accel4j.cpu.testing.Compare;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import io.accel4j.cpu.testing.Pools;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Attention with BF16 operands ({@link io.accel4j.core.ops.AttentionOps}' rounding points) on the CPU:
 * {@link FlashAttention}'s BF16 mode against the float64 reference of the same roundings ({@link AttentionBf16Ref},
 * tight), against fp32 attention ({@link AttentionRef}, bf16's tolerance), its bits on 1 and 3 threads, and the
 * backend's refusals. Forward outputs are poisoned (NaN) first; backward adds to a random prefill.
 *
 * <p>What can differ from the reference: (1) the final rounding of out and of each gradient, when the fp32 value
 * (another summation order, fp32 exp) and the float64 one straddle a rounding boundary: one bf16 ulp, ≤ 2⁻⁷ of the
 * value (8 significant bits); (2) an internal bf16(p) or bf16(ds) rounding going the other way, each moving one term
 * by ≤ 2⁻⁸ of itself, and (3) past the first key block ({@link FlashAttention#BLOCK} keys), p is rounded relative
 * to the running maximum, not the final one: every such p is off by ≤ 2⁻⁹ of itself, errors that average over the
 * keys.
 */
class AttentionBf16Test {

    /** One bf16 ulp of the value: 2⁻⁷ relative at most (the final rounding may go the other way, (1) above). */
    static final double ULP_REL = 0x1p-7;
    /**
     * Within one key block, beyond the ulp, relative to the tensor's max|ref|: (2) only, each such flip moving one
     * term of a sum by ≤ 2⁻⁸ of itself (≲ 1e-4 of the max). Measured ≤ 7e-9 (no internal rounding went the other way
     * beyond an ulp in these cases); 1e-4 allows a few flips. Leaving out the kernel's rounding of P (forward) or of
     * dS (backward) fails these cases by 4–13× the bound (tried).
     */
    static final double ONE_BLOCK_ABS = 1e-4;
    /**
     * Across key blocks, (3) adds ≤ 2⁻⁹ per probability of the keys past the first block, averaging out over keys:
     * measured ≤ 6.8e-4 of max|out| beyond the ulp at T ≤ 200 (backward has no running maximum: ≤ 6e-9); 2e-3 is 3×.
     */
    static final double TILES_ABS = 2e-3;
    /**
     * Against fp32 attention, relative to max|ref|: q and k rounded to bf16 (2⁻⁹ each) move a score s by ~2⁻⁸·|s|,
     * |s| up to ~8 with these inputs, so single probabilities move by up to ~3 %, averaging over the keys; then p,
     * dout, ds and the results are rounded too. Measured ≤ 9.1e-3 (out), 1.9e-3 (lse), 1.0e-2 (dqkv); 3e-2 is a bf16
     * tolerance that a wrong mask or a dropped key block (≥ 1e-1) still fails.
     */
    static final double FP32_ABS = 3e-2;
    /** The prefill's fp32 addition: ≤ 2⁻²⁴·|prefill + grad|, with |prefill| ≤ 1. */
    static final double U_PREFILL = 1e-6;
    /** qkv values in [−3, 3]: scores of a few units, so the softmax is neither flat nor one-hot. */
    static final double RANGE = 3;

    @RegisterExtension
    static final Pools POOLS = new Pools();

    /** Forward and backward of one case: out, lse, and dqkv minus the prefill (the gradient added). */
    private record Result(double[] out, double[] lse, double[] grad) {}

    private static Result run(Parallel pool, DType operands, double[] qkv, double[] dout, double[] prefill,
                              int B, int T, int C, int NH) {
        try (Arena arena = Arena.ofShared()) {
            MemorySegment sQkv = Buffers.floats(arena, qkv);
            MemorySegment out = Buffers.poisoned(arena, (long) B * T * C);
            MemorySegment lse = Buffers.poisoned(arena, (long) B * NH * T);
            CpuOps ops = new CpuOps(pool);
            ops.attentionForward(out, lse, sQkv, B, T, C, NH, operands);
            MemorySegment dqkv = Buffers.floats(arena, prefill);
            ops.attentionBackward(dqkv, Buffers.floats(arena, dout), sQkv, out, lse, B, T, C, NH, operands);
            double[] grad = Buffers.read(dqkv, qkv.length);
            double[] p = Buffers.roundToFloat(prefill);
            for (int i = 0; i < grad.length; i++) {
                grad[i] -= p[i];
            }
            return new Result(Buffers.read(out, B * T * C), Buffers.read(lse, B * NH * T), grad);
        }
    }

    /** The case's inputs: qkv, dout, prefill. */
    private static double[][] inputs(long seed, int B, int T, int C) {
        SplittableRandom rnd = new SplittableRandom(seed);
        return new double[][] {Buffers.uniform(rnd, B * T * 3 * C, RANGE), Buffers.uniform(rnd, B * T * C, 1),
                Buffers.uniform(rnd, B * T * 3 * C, 1)};
    }

    @ParameterizedTest(name = "B={0} T={1} C={2} NH={3}")
    @CsvSource({"2, 1, 21, 3", "2, 7, 21, 3", "1, 37, 40, 5", "2, 64, 24, 2", "1, 61, 128, 2"})
    void matchesTheBf16ReferenceWithinOneKeyBlock(int B, int T, int C, int NH) {
        assertThat(T).isLessThanOrEqualTo(FlashAttention.BLOCK);
        checkAgainstBf16Reference(B, T, C, NH, ONE_BLOCK_ABS);
    }

    @ParameterizedTest(name = "B={0} T={1} C={2} NH={3}")
    @CsvSource({"2, 67, 21, 3", "1, 130, 128, 2", "1, 200, 40, 5"})
    void matchesTheBf16ReferenceAcrossKeyBlocks(int B, int T, int C, int NH) {
        checkAgainstBf16Reference(B, T, C, NH, TILES_ABS);
    }

    private static void checkAgainstBf16Reference(int B, int T, int C, int NH, double abs) {
        long seed = 131L * T + 17L * C + NH;
        String what = "B=" + B + " T=" + T + " C=" + C + " NH=" + NH + " seed " + seed;
        double[][] in = inputs(seed, B, T, C);
        double[] qkv = Buffers.roundToFloat(in[0]), dout = Buffers.roundToFloat(in[1]);
        double[] out = new double[B * T * C], lse = new double[B * NH * T], grad = new double[qkv.length];
        AttentionBf16Ref.forward(out, lse, qkv, B, T, C, NH);
        Result r = run(POOLS.three(), DType.BF16, qkv, dout, in[2], B, T, C, NH);
        Compare.close("bf16 out vs reference, " + what, r.out(), out, ULP_REL, abs * Compare.maxAbs(out));
        Compare.close("bf16 lse vs reference, " + what, r.lse(), lse, 3e-6, 3e-6);
        // the backward reference from the kernel's own out and lse: its inputs as the contract takes them
        AttentionBf16Ref.backward(grad, dout, qkv, r.out(), r.lse(), B, T, C, NH);
        Compare.close("bf16 dqkv vs reference, " + what, r.grad(), grad, ULP_REL,
                abs * Compare.maxAbs(grad) + U_PREFILL);
        for (double x : r.out()) {
            assertThat(AttentionBf16Ref.bf16(x)).as("out holds bf16 values, " + what).isEqualTo(x);
        }
    }

    @ParameterizedTest(name = "B={0} T={1} C={2} NH={3}")
    @CsvSource({"2, 37, 21, 3", "1, 130, 128, 2"})
    void isCloseToFp32Attention(int B, int T, int C, int NH) {
        long seed = 7L * T + C;
        String what = "B=" + B + " T=" + T + " C=" + C + " NH=" + NH + " seed " + seed;
        double[][] in = inputs(seed, B, T, C);
        double[] qkv = in[0], dout = in[1];
        double[] out = new double[B * T * C], lse = new double[B * NH * T], grad = new double[qkv.length];
        AttentionRef.forward(out, lse, qkv, B, T, C, NH);
        AttentionRef.backward(grad, dout, qkv, out, lse, B, T, C, NH);
        Result r = run(POOLS.three(), DType.BF16, qkv, dout, in[2], B, T, C, NH);
        Compare.close("bf16 out vs fp32 attention, " + what, r.out(), out, 0, FP32_ABS * Compare.maxAbs(out));
        Compare.close("bf16 lse vs fp32 attention, " + what, r.lse(), lse, 0, FP32_ABS * Compare.maxAbs(lse));
        Compare.close("bf16 dqkv vs fp32 attention, " + what, r.grad(), grad, 0, FP32_ABS * Compare.maxAbs(grad));
    }

    /** Work is split over heads and query groups, never inside a sum: 1 and 3 threads give the same bits. */
    @Test
    void sameBitsOnOneAndThreeThreads() {
        int B = 2, T = 150, C = 48, NH = 3;
        double[][] in = inputs(99, B, T, C);
        Result one = run(POOLS.one(), DType.BF16, in[0], in[1], in[2], B, T, C, NH);
        Result three = run(POOLS.three(), DType.BF16, in[0], in[1], in[2], B, T, C, NH);
        assertThat(three.out()).containsExactly(one.out());
        assertThat(three.lse()).containsExactly(one.lse());
        assertThat(three.grad()).containsExactly(one.grad());
    }

    /** FP32 through the DType methods is the plain methods, bit for bit. */
    @Test
    void fp32OperandsAreThePlainMethods() {
        int B = 1, T = 70, C = 24, NH = 2;
        double[][] in = inputs(5, B, T, C);
        Result typed = run(POOLS.three(), DType.FP32, in[0], in[1], in[2], B, T, C, NH);
        try (Arena arena = Arena.ofShared()) {
            MemorySegment qkv = Buffers.floats(arena, in[0]);
            MemorySegment out = Buffers.poisoned(arena, (long) B * T * C), lse = Buffers.poisoned(arena, B * NH * T);
            MemorySegment dqkv = Buffers.floats(arena, in[2]);
            CpuOps ops = new CpuOps(POOLS.three());
            ops.attentionForward(out, lse, qkv, B, T, C, NH);
            ops.attentionBackward(dqkv, Buffers.floats(arena, in[1]), qkv, out, lse, B, T, C, NH);
            assertThat(Buffers.read(out, B * T * C)).containsExactly(typed.out());
            double[] grad = Buffers.read(dqkv, in[0].length), p = Buffers.roundToFloat(in[2]);
            for (int i = 0; i < grad.length; i++) {
                grad[i] -= p[i];
            }
            assertThat(grad).containsExactly(typed.grad());
        }
    }

    /**
     * The tiles' lane-wise rounding is {@link Bf16#fromFloat} bit for bit, then the multiply: ties both ways,
     * overflow to inf, subnormals, signed zeros, NaNs whose payload is only in the low half (which must stay NaN),
     * random values; a length that leaves a scalar tail.
     */
    @Test
    void tileRoundingIsBf16FromFloatInEveryLane() {
        int[] special = {0, 0x8000_0000, 0x3F80_0000, 0x3F80_8000, 0x3F81_8000, 0x3F80_7FFF, 0x7F7F_FFFF, 0x7F7F_8000,
                0xFF7F_8000, 0x0000_0001, 0x8000_8000, 0x0001_8000, 0x7F80_0000, 0xFF80_0000, 0x7F80_0001, 0xFF80_0001,
                0x7FC0_0000, 0xFFFF_FFFF, 0x7FA0_1234};
        SplittableRandom rnd = new SplittableRandom(17);
        float[] x = new float[1003];
        for (int i = 0; i < x.length; i++) {
            x[i] = i < special.length ? Float.intBitsToFloat(special[i]) : Float.intBitsToFloat(rnd.nextInt());
        }
        for (float mul : new float[] {1f, 0.125f}) {
            float[] got = x.clone();
            Tiles.roundBf16(got, mul);
            for (int i = 0; i < x.length; i++) {
                float want = Bf16.toFloat(Bf16.fromFloat(x[i])) * mul;
                assertThat(Float.floatToRawIntBits(got[i])).as("element %d, bits 0x%08X, mul %s", i,
                        Float.floatToRawIntBits(x[i]), mul).isEqualTo(Float.floatToRawIntBits(want));
            }
        }
    }

    @Test
    void refusesFp16AndBf16OnTheNaiveKernel() {
        try (Arena arena = Arena.ofShared()) {
            MemorySegment s = arena.allocate(4096);
            CpuOps flash = new CpuOps(POOLS.one()), naive = new CpuOps(POOLS.one(), CpuOps.AttentionKernel.NAIVE);
            assertThatThrownBy(() -> flash.attentionForward(s, s, s, 1, 1, 8, 2, DType.FP16))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("FP32 or BF16, got FP16");
            assertThatThrownBy(() -> flash.checkAttention(DType.FP16, 8, 2))
                    .isInstanceOf(IllegalArgumentException.class);
            assertThatThrownBy(() -> naive.attentionBackward(s, s, s, s, s, 1, 1, 8, 2, DType.BF16))
                    .isInstanceOf(UnsupportedOperationException.class).hasMessageContaining("naive");
            assertThatThrownBy(() -> naive.checkAttention(DType.BF16, 8, 2))
                    .isInstanceOf(UnsupportedOperationException.class);
            flash.checkAttention(DType.BF16, 8, 2);
            naive.checkAttention(DType.FP32, 8, 2);
        }
    }
}
