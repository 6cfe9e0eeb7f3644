package io.accel4j.kernels;

import io.accel4j.core.DType;
import io.accel4j.cpu.ops.CpuOps;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;

/**
 * One case of {@link GpuOps}' causal attention with BF16 operands (the casts, attention_bf16.cu's kernels and the
 * accumulation into fp32) against {@link CpuOps}' BF16 operands, for the emulator and GPU tests: fp32 inputs on the
 * host, the CPU's results, and the comparison of out, lse and dqkv (the gradient added to a random prefill).
 *
 * @param B  batch
 * @param T  sequence length
 * @param C  channels (NH heads of 64 or 128)
 * @param NH heads
 */
record AttentionBf16OpsCheck(int B, int T, int C, int NH) {

    /** One bf16 ulp of a value, at most 2⁻⁷ of it: either side's final rounding may go the other way. */
    static final double ULP_REL = 0x1p-7;
    /**
     * out beyond the ulp, relative to max|out|: the CPU rounds p relative to the running maximum over 64-key blocks,
     * the kernel over 32-key tiles, so p of keys past the first tile differ by ≤ 2⁻⁹ of themselves, averaging over
     * the keys; the emulator measured ≤ 6.8e-4 at T ≤ 70; 2e-3.
     */
    static final double OUT_ABS = 2e-3;
    /**
     * dqkv beyond the ulp, relative to max|grad|: each side sums D from its own out, so ds = p∘(dp − D) moves by
     * p·ΔD, and an internal bf16(p) or bf16(ds) may go the other way (one term by ≤ 2⁻⁸ of itself); the emulator
     * measured ≤ 1.1e-3; 3e-3. (bf16 and fp32 attention differ by ~1e-2; a wrong mask or launch shape by ≥ 1e-1.)
     */
    static final double GRAD_ABS = 3e-3;
    /** lse: fp32 in two orders (the kernel in the log2 domain); the emulator measured ≤ 1.7e-7 of max|lse|. */
    static final double LSE_ABS = AttentionBf16Check.LSE_TOL;
    /** The prefill's fp32 addition on both sides: ≤ 2⁻²⁴ of |prefill + grad| each, |prefill| ≤ 1. */
    static final double PREFILL_ABS = 0x1p-22;

    long btc() {
        return (long) B * T * C;
    }

    long nLse() {
        return (long) B * NH * T;
    }

    @Override
    public String toString() {
        return "B " + B + " T " + T + " C " + C + " NH " + NH + " (hs " + C / NH + ")";
    }

    /** Host inputs (qkv in [−2, 2], dout and the dqkv prefill in [−1, 1]) and the CPU backend's results. */
    record Case(MemorySegment qkv, MemorySegment dout, MemorySegment prefill, MemorySegment out, MemorySegment lse,
                MemorySegment dqkv, long seed) {}

    /** Random inputs from {@code seed} in {@code arena} and CpuOps' BF16 results (out and lse poisoned first). */
    Case run(Arena arena, CpuOps cpu, long seed) {
        SplittableRandom r = new SplittableRandom(seed);
        MemorySegment qkv = floats(arena, 3 * btc(), r, 2), dout = floats(arena, btc(), r, 1);
        MemorySegment prefill = floats(arena, 3 * btc(), r, 1);
        MemorySegment out = nan(arena, btc()), lse = nan(arena, nLse());
        MemorySegment dqkv = arena.allocate(4 * 3 * btc(), 16).copyFrom(prefill);
        cpu.attentionForward(out, lse, qkv, B, T, C, NH, DType.BF16);
        cpu.attentionBackward(dqkv, dout, qkv, out, lse, B, T, C, NH, DType.BF16);
        return new Case(qkv, dout, prefill, out, lse, dqkv, seed);
    }

    /** Fails, naming the tensor, element and seed, unless the GPU path's host copies are within tolerance. */
    void check(Case c, MemorySegment out, MemorySegment lse, MemorySegment dqkv) {
        String what = this + ", seed " + c.seed();
        compare("out " + what, out, c.out(), null, btc(), ULP_REL, OUT_ABS);
        compare("lse " + what, lse, c.lse(), null, nLse(), 0, LSE_ABS);
        compare("dqkv " + what, dqkv, c.dqkv(), c.prefill(), 3 * btc(), ULP_REL, GRAD_ABS);
    }

    /**
     * Every element of {@code got} (minus {@code base}, when not null) within {@code rel·|want| + abs·max|want|} of
     * {@code want} (minus base), plus {@link #PREFILL_ABS} with a base; NaN fails.
     */
    private static void compare(String what, MemorySegment got, MemorySegment want, MemorySegment base, long n,
                                double rel, double abs) {
        double[] g = new double[Math.toIntExact(n)], w = new double[g.length];
        double max = 0;
        for (int i = 0; i < g.length; i++) {
            double b = base == null ? 0 : base.getAtIndex(ValueLayout.JAVA_FLOAT, i);
            g[i] = got.getAtIndex(ValueLayout.JAVA_FLOAT, i) - b;
            w[i] = want.getAtIndex(ValueLayout.JAVA_FLOAT, i) - b;
            max = Math.max(max, Math.abs(w[i]));
        }
        for (int i = 0; i < g.length; i++) {
            double bound = rel * Math.abs(w[i]) + abs * max + (base == null ? 0 : PREFILL_ABS);
            if (!(Math.abs(g[i] - w[i]) <= bound)) {
                throw new AssertionError(what + ": element " + i + " is " + g[i] + ", CPU " + w[i] + " (bound "
                        + bound + ")");
            }
        }
    }

    static MemorySegment floats(Arena arena, long n, SplittableRandom r, double range) {
        MemorySegment s = arena.allocate(4 * n, 16);
        for (long i = 0; i < n; i++) {
            s.setAtIndex(ValueLayout.JAVA_FLOAT, i, (float) r.nextDouble(-range, range));
        }
        return s;
    }

    static MemorySegment nan(Arena arena, long n) {
        MemorySegment s = arena.allocate(4 * n, 16);
        for (long i = 0; i < n; i++) {
            s.setAtIndex(ValueLayout.JAVA_FLOAT, i, Float.NaN);
        }
        return s;
    }
}
