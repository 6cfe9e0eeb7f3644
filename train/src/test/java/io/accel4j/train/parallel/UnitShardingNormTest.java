package io.accel4j.train.parallel;

import io.accel4j.train.TrainerTest;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.offset;

import io.accel4j.collectives.InProcessGroup;
import io.accel4j.collectives.ReduceOp;
import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.model.ParameterLayout;
import io.accel4j.train.model.Weights;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * ZeRO-2's sharded gradient norm and overflow flag ({@link ShardedStates} over {@code fit.UnitSharding}) agree with
 * the whole averaged gradient's, on every rank. (The assertions ZeroOptimizerTest made of the class these states
 * replaced.)
 */
class ShardedNormTest {

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
                     ShardedStates z = new ShardedStates(2, comm, m, TrainerTest.base().zeroStage(2).build(), 0);
                     Arena a = Arena.ofShared()) {
                    long count = m.layout().count();
                    Random r = new Random(seed + comm.rank());
                    MemorySegment grads = a.allocate(count * Float.BYTES, 64);
                    for (long i = 0; i < count; i++) { // magnitudes over 6 decades, as gradients have
                        grads.setAtIndex(F32, i, (float) (r.nextGaussian() * Math.pow(10, -r.nextInt(6))));
                    }
                    MemorySegment copy = a.allocate(count * Float.BYTES, 64);
                    MemorySegment.copy(grads, 0, copy, 0, copy.byteSize());
                    comm.allReduce(copy, count, DType.FP32, ReduceOp.AVG);
                    double ddp = m.ops().sumOfSquares(copy, count);
                    backward(m, grads);
                    z.reduceGradients();
                    double zero = z.sumOfSquares();
                    boolean finite = z.anyNonFinite();
                    // rank 2 overflows in rank 0's shard: rank 0 sees it in its shard, every rank in the flag
                    if (comm.rank() == 2) {
                        UnitShards.Piece first = new UnitShards(m.layout(), n, 0).pieces().getFirst();
                        grads.setAtIndex(F32, first.flat() + first.length() / 2, Float.POSITIVE_INFINITY);
                    }
                    backward(m, grads);
                    z.reduceGradients();
                    return new Seen(zero, ddp, finite, z.anyNonFinite());
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

    /** What a backward does to ZeRO-2's weights: each unit's gradients, from {@code flat}, then reduce-scattered. */
    private static void backward(Gpt2 m, MemorySegment flat) {
        Weights w = m.weights();
        w.zeroGrad();
        for (ParameterLayout.Unit u : m.layout().units()) {
            w.beginGradients(u.index());
            for (ParameterLayout.Segment s : u.segments()) {
                MemorySegment.copy(flat, s.offset() * Float.BYTES, w.grad(s.param(), s.layer()), 0,
                        s.count() * Float.BYTES);
            }
            w.gradientsDone(u.index());
        }
    }
}
