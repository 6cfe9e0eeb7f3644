package io.accel4j.cpu.ops;

import io.accel4j.core.ops.AttentionOps;
import io.accel4j.cpu.Check;
import io.accel4j.cpu.Parallel;
import java.lang.foreign.MemorySegment;

/**
 * The entry checks {@link NaiveAttention} and {@link FlashAttention} share: sizes and lengths through the contract
 * ({@link AttentionOps#checkForward}/{@link AttentionOps#checkBackward}, as on the GPU), then sharing and aliasing.
 */
final class AttentionArgs {

    private AttentionArgs() {}

    /** Sizes ≥ 1 and {@code C} divisible by {@code NH} ({@link AttentionOps#checkSizes}); returns {@code hs = C/NH}. */
    static int headSize(int B, int T, int C, int NH) {
        return AttentionOps.checkSizes(B, T, C, NH);
    }

    /** The forward's segments: lengths, shared when the pool has several threads, outputs not aliasing qkv. */
    static void forward(Parallel pool, MemorySegment out, MemorySegment lse, MemorySegment qkv,
                        int B, int T, int C, int NH) {
        long bt = (long) B * T;
        AttentionOps.checkForward(out, lse, qkv, B, T, C, NH);
        int threads = pool.threads();
        Check.shared("out", out, threads);
        Check.shared("lse", lse, threads);
        Check.shared("qkv", qkv, threads);
        Check.disjoint("out", out, bt * C * Float.BYTES, "qkv", qkv, bt * 3 * C * Float.BYTES);
        Check.disjoint("lse", lse, (long) B * NH * T * Float.BYTES, "qkv", qkv, bt * 3 * C * Float.BYTES);
        Check.disjoint("out", out, bt * C * Float.BYTES, "lse", lse, (long) B * NH * T * Float.BYTES);
    }

    /** The backward's segments: lengths, shared when the pool has several threads, dqkv aliasing no input. */
    static void backward(Parallel pool, MemorySegment dqkv, MemorySegment dout, MemorySegment qkv,
                         MemorySegment out, MemorySegment lse, int B, int T, int C, int NH) {
        long bt = (long) B * T;
        long nLse = (long) B * NH * T;
        AttentionOps.checkBackward(dqkv, dout, qkv, out, lse, B, T, C, NH);
        int threads = pool.threads();
        Check.shared("dqkv", dqkv, threads);
        Check.shared("dout", dout, threads);
        Check.shared("qkv", qkv, threads);
        Check.shared("out", out, threads);
        Check.shared("lse", lse, threads);
        long dBytes = bt * 3 * C * Float.BYTES;
        Check.disjoint("dqkv", dqkv, dBytes, "dout", dout, bt * C * Float.BYTES);
        Check.disjoint("dqkv", dqkv, dBytes, "qkv", qkv, bt * 3 * C * Float.BYTES);
        Check.disjoint("dqkv", dqkv, dBytes, "out", out, bt * C * Float.BYTES);
        Check.disjoint("dqkv", dqkv, dBytes, "lse", lse, nLse * Float.BYTES);
    }

    /** Worker tasks for {@code items} independent items on {@code threads} threads (each owns one scratch slot). */
    static int workers(int threads, long items) {
        return (int) Math.max(1, Math.min(threads, items));
    }
}
