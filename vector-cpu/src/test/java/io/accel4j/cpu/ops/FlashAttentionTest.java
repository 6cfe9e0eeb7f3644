package io.accel4j.cpu.ops;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.testing.Buffers;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.IntFunction;
import org.junit.jupiter.api.Test;

/**
 * The memory of {@link FlashAttention}: its scratch never grows with T² (the point of the algorithm), and the
 * kernel takes exactly the scratch it reports, every array of it from the allocator the tests hand in, so the
 * reported figure is the kernel's real use. {@link NaiveAttention}'s T² figure is checked the same way, as the
 * contrast.
 */
class FlashAttentionTest {

    /** An allocator that hands out zeroed float[]s, as the kernels' default does, and counts the floats. */
    static final class Counting implements IntFunction<float[]> {
        final AtomicLong floats = new AtomicLong();
        final AtomicLong largest = new AtomicLong();

        @Override
        public float[] apply(int n) {
            floats.addAndGet(n);
            largest.accumulateAndGet(n, Math::max);
            return new float[n];
        }
    }

    @Test
    void workspaceGrowsAtMostLinearlyInT() {
        int B = 1, C = 256, NH = 4, threads = 2;
        long flash256 = FlashAttention.workspaceBytes(B, 256, C, NH, threads);
        long flash2048 = FlashAttention.workspaceBytes(B, 2048, C, NH, threads);
        long back256 = FlashAttention.backwardWorkspaceBytes(B, 256, C, NH, threads);
        long back2048 = FlashAttention.backwardWorkspaceBytes(B, 2048, C, NH, threads);
        long naive256 = NaiveAttention.workspaceBytes(B, 256, C, NH, threads);
        long naive2048 = NaiveAttention.workspaceBytes(B, 2048, C, NH, threads);
        long naiveBack2048 = NaiveAttention.backwardWorkspaceBytes(B, 2048, C, NH, threads);

        // 8× the sequence: flash at most 8× the memory (forward: tiles only, the same; backward: + one D vector of
        // T floats per thread), the materialising kernel ~64×.
        assertThat((double) flash2048 / flash256).as("flash forward, T 2048 vs 256").isLessThanOrEqualTo(8.0);
        assertThat((double) back2048 / back256).as("flash backward, T 2048 vs 256").isLessThanOrEqualTo(8.0);
        assertThat(back2048 - back256).as("flash backward grows by the D vector only")
                .isEqualTo((long) threads * Float.BYTES * (FlashAttention.roundUp(2048, FlashAttention.BLOCK)
                        - FlashAttention.roundUp(256, FlashAttention.BLOCK)));
        assertThat((double) naive2048 / naive256).as("naive forward, T 2048 vs 256").isGreaterThan(50.0);

        long oneScoreMatrix = 2048L * 2048 * Float.BYTES; // what a single (b, h) of materialised scores takes
        assertThat(flash2048).as("flash forward scratch at T=2048").isLessThan(oneScoreMatrix / 16);
        assertThat(back2048).as("flash backward scratch at T=2048").isLessThan(oneScoreMatrix / 16);
        assertThat(naiveBack2048).isGreaterThan(threads * oneScoreMatrix);
    }

    @Test
    void kernelsTakeExactlyTheirReportedWorkspace() {
        int B = 2, T = 130, C = 48, NH = 3;
        SplittableRandom rnd = new SplittableRandom(11);
        try (Arena arena = Arena.ofShared(); Parallel pool = new Parallel(3)) {
            MemorySegment qkv = Buffers.floats(arena, Buffers.uniform(rnd, B * T * 3 * C, 2));
            MemorySegment dout = Buffers.floats(arena, Buffers.uniform(rnd, B * T * C, 1));
            MemorySegment out = Buffers.poisoned(arena, (long) B * T * C);
            MemorySegment lse = Buffers.poisoned(arena, (long) B * NH * T);
            MemorySegment dqkv = arena.allocate(qkv.byteSize());
            MemorySegment out2 = Buffers.poisoned(arena, (long) B * T * C);
            MemorySegment lse2 = Buffers.poisoned(arena, (long) B * NH * T);
            MemorySegment dqkv2 = arena.allocate(qkv.byteSize());

            Counting fwd = new Counting();
            FlashAttention.forward(pool, out, lse, qkv, B, T, C, NH, fwd);
            assertThat(fwd.floats.get() * Float.BYTES).as("flash forward scratch")
                    .isEqualTo(FlashAttention.workspaceBytes(B, T, C, NH, pool.threads()));
            Counting bwd = new Counting();
            FlashAttention.backward(pool, dqkv, dout, qkv, out, lse, B, T, C, NH, bwd);
            assertThat(bwd.floats.get() * Float.BYTES).as("flash backward scratch")
                    .isEqualTo(FlashAttention.backwardWorkspaceBytes(B, T, C, NH, pool.threads()));
            assertThat(fwd.largest.get()).as("largest flash array").isLessThan((long) T * T);
            assertThat(bwd.largest.get()).as("largest flash array").isLessThan((long) T * T);

            // The counted path is the public one: same bits.
            FlashAttention.forward(pool, out2, lse2, qkv, B, T, C, NH);
            FlashAttention.backward(pool, dqkv2, dout, qkv, out2, lse2, B, T, C, NH);
            assertThat(Buffers.read(out2, B * T * C)).containsExactly(Buffers.read(out, B * T * C));
            assertThat(Buffers.read(dqkv2, B * T * 3 * C)).containsExactly(Buffers.read(dqkv, B * T * 3 * C));

            // BF16 operands: the forward the same tiles, the backward one head's dQ more per thread
            Counting fwd16 = new Counting();
            FlashAttention.forward(pool, out2, lse2, qkv, B, T, C, NH, DType.BF16, fwd16);
            assertThat(fwd16.floats.get()).as("bf16 flash forward scratch").isEqualTo(fwd.floats.get());
            Counting bwd16 = new Counting();
            FlashAttention.backward(pool, dqkv2, dout, qkv, out2, lse2, B, T, C, NH, DType.BF16, bwd16);
            assertThat(bwd16.floats.get() * Float.BYTES).as("bf16 flash backward scratch")
                    .isEqualTo(FlashAttention.backwardWorkspaceBytes(B, T, C, NH, pool.threads(), DType.BF16))
                    .isGreaterThan(FlashAttention.backwardWorkspaceBytes(B, T, C, NH, pool.threads()));
            assertThat(bwd16.largest.get()).as("largest bf16 flash array").isLessThan((long) T * T);

            Counting nf = new Counting();
            NaiveAttention.forward(pool, out, lse, qkv, B, T, C, NH, nf);
            assertThat(nf.floats.get() * Float.BYTES).as("naive forward scratch")
                    .isEqualTo(NaiveAttention.workspaceBytes(B, T, C, NH, pool.threads()));
            Counting nb = new Counting();
            NaiveAttention.backward(pool, dqkv, dout, qkv, out, lse, B, T, C, NH, nb);
            assertThat(nb.floats.get() * Float.BYTES).as("naive backward scratch")
                    .isEqualTo(NaiveAttention.backwardWorkspaceBytes(B, T, C, NH, pool.threads()));
        }
    }

    /**
     * The per-thread workspaces kept across calls: a call after calls of other shapes (here hs 48 and 64, whose
     * tiles have the same lengths, so stale padding would show) gives the bits of a call with fresh arrays.
     */
    @Test
    void reusedWorkspacesGiveTheBitsOfFreshOnes() {
        int B = 2, T = 70;
        try (Arena arena = Arena.ofShared(); Parallel pool = new Parallel(2)) {
            double[][] first = null;
            for (int round = 0; round < 2; round++) {
                for (int C : new int[] {96, 128}) {
                    double[][] fresh = run(pool, arena, B, T, C, 2, n -> new float[n]);
                    double[][] reused = run(pool, arena, B, T, C, 2, AttentionWorkspace.PER_THREAD);
                    for (int k = 0; k < fresh.length; k++) {
                        assertThat(reused[k]).as("C %d round %d output %d", C, round, k).containsExactly(fresh[k]);
                    }
                    if (C == 96) {
                        first = first == null ? fresh : first;
                        assertThat(fresh[0]).as("round %d", round).containsExactly(first[0]);
                    }
                }
            }
        }
    }

    /** out, lse and dqkv of a forward and backward taking scratch from {@code scratch}. */
    private static double[][] run(Parallel pool, Arena arena, int B, int T, int C, int NH,
                                 IntFunction<float[]> scratch) {
        SplittableRandom rnd = new SplittableRandom(C);
        MemorySegment qkv = Buffers.floats(arena, Buffers.uniform(rnd, B * T * 3 * C, 2));
        MemorySegment dout = Buffers.floats(arena, Buffers.uniform(rnd, B * T * C, 1));
        MemorySegment out = Buffers.poisoned(arena, (long) B * T * C);
        MemorySegment lse = Buffers.poisoned(arena, (long) B * NH * T);
        MemorySegment dqkv = arena.allocate(qkv.byteSize());
        FlashAttention.forward(pool, out, lse, qkv, B, T, C, NH, DType.FP32, scratch);
        FlashAttention.backward(pool, dqkv, dout, qkv, out, lse, B, T, C, NH, DType.FP32, scratch);
        return new double[][] {Buffers.read(out, B * T * C), Buffers.read(lse, B * NH * T),
                Buffers.read(dqkv, B * T * 3 * C)};
    }
}
