package io.accel4j.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.offset;

import io.accel4j.collectives.Chunks;
import io.accel4j.collectives.InProcessGroup;
import io.accel4j.collectives.ReduceOp;
import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.train.model.Gpt2;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** The sharded gradient's norm and overflow flag agree with the whole averaged gradient's, on every rank. */
class ZeroOptimizerTest {

    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;
    /** The kernel's fp32-lane grouping differs between a shard and the whole buffer: ≤ 35·2⁻²⁴ relative each. */
    private static final double NORM_REL = 5e-6;

    private record Seen(double zeroNorm, double ddpNorm, boolean finiteFlag, boolean overflowFlag) {}

    @Test
    void theShardedNormAndOverflowFlagAreTheWholeGradients() {
        int n = 3;
        long seed = System.nanoTime();
        List<Seen> seen;
        try (InProcessGroup g = InProcessGroup.create(n, Duration.ofSeconds(30))) {
            seen = g.run(comm -> {
                try (Parallel pool = new Parallel(1); Gpt2 m = TrainerTest.model(new CpuOps(pool), 2, 1);
                     ZeroOptimizer z = new ZeroOptimizer(2, comm, m, TrainerTest.base().build());
                     Arena a = Arena.ofShared()) {
                    long count = m.layout().count();
                    Random r = new Random(seed + comm.rank());
                    for (long i = 0; i < count; i++) { // magnitudes over 6 decades, as gradients have
                        m.grads().setAtIndex(F32, i, (float) (r.nextGaussian() * Math.pow(10, -r.nextInt(6))));
                    }
                    MemorySegment copy = a.allocate(count * Float.BYTES, 64);
                    MemorySegment.copy(m.grads(), 0, copy, 0, copy.byteSize());
                    comm.allReduce(copy, count, DType.FP32, ReduceOp.AVG);
                    double ddp = m.ops().sumOfSquares(copy, count);
                    z.reduceGradients();
                    double zero = z.sumOfSquares();
                    boolean finite = z.hasNonFinite();
                    // rank 2 overflows in rank 0's shard: rank 0 sees it in its shard, every rank in the flag
                    if (comm.rank() == 2) {
                        m.grads().setAtIndex(F32, Chunks.length(count, n, 0) / 2, Float.POSITIVE_INFINITY);
                    }
                    z.reduceGradients();
                    return new Seen(zero, ddp, finite, z.hasNonFinite());
                }
            });
        }
        for (Seen s : seen) {
            assertThat(s.zeroNorm()).as("seed %d", seed).isEqualTo(seen.get(0).zeroNorm());
            assertThat(s.zeroNorm()).as("seed %d", seed).isCloseTo(s.ddpNorm(), offset(NORM_REL * s.ddpNorm()));
            assertThat(s.finiteFlag()).isFalse();
            assertThat(s.overflowFlag()).isTrue();
        }
    }
}
