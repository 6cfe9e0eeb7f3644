package io.accel4j.train.parallel;

import io.accel4j.train.Gpt2Fixtures;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.offset;

import io.accel4j.collectives.InProcessGroup;
import io.accel4j.collectives.ReduceOp;
import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.fit.UnitSharding;
import io.accel4j.train.model.ParameterLayout;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * ZeRO-2's sharded gradient norm and overflow flag ({@link UnitSharding} over GPT-2's {@link ShardedUnits}, the
 * strategy of a GPT-2 {@code Learner}'s ZeRO-2) agree with the whole averaged gradient's, on every rank. (The
 * assertions ZeroOptimizerTest made of the class the old trainer's sharded states replaced, then made of those.)
 */
class UnitShardingNormTest {

    /** Gpt2Fixtures' tiny model: maxT 8, V 11, padded V 16, 2 layers, 2 heads, C 8. */
    private static final io.accel4j.train.model.GptConfig TINY = new io.accel4j.train.model.GptConfig(8, 11, 16, 2, 2, 8);
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
                ParameterLayout layout = new ParameterLayout(TINY);
                try (Parallel pool = new Parallel(1);
                     ShardedUnits units = new ShardedUnits(UnitLayout.of(layout), comm, new CpuOps(pool), false);
                     UnitSharding z = new UnitSharding(comm, io.accel4j.core.memory.HostMemory.INSTANCE, units, 0);
                     Arena a = Arena.ofShared()) {
                    CpuOps ops = new CpuOps(pool);
                    long count = layout.count();
                    Random r = new Random(seed + comm.rank());
                    MemorySegment grads = a.allocate(count * Float.BYTES, 64);
                    for (long i = 0; i < count; i++) { // magnitudes over 6 decades, as gradients have
                        grads.setAtIndex(F32, i, (float) (r.nextGaussian() * Math.pow(10, -r.nextInt(6))));
                    }
                    MemorySegment copy = a.allocate(count * Float.BYTES, 64);
                    MemorySegment.copy(grads, 0, copy, 0, copy.byteSize());
                    comm.allReduce(copy, count, DType.FP32, ReduceOp.AVG);
                    double ddp = ops.sumOfSquares(copy, count);
                    backward(units, grads);
                    z.reduce(MemorySegment.NULL, count);
                    double zero = z.sumOfSquares(ops, MemorySegment.NULL, count);
                    boolean finite = z.anyNonFinite(ops, MemorySegment.NULL, count);
                    // rank 2 overflows in rank 0's shard: rank 0 sees it in its shard, every rank in the flag
                    if (comm.rank() == 2) {
                        UnitShards.Piece first = new UnitShards(layout, n, 0).pieces().getFirst();
                        grads.setAtIndex(F32, first.flat() + first.length() / 2, Float.POSITIVE_INFINITY);
                    }
                    backward(units, grads);
                    z.reduce(MemorySegment.NULL, count);
                    return new Seen(zero, ddp, finite, z.anyNonFinite(ops, MemorySegment.NULL, count));
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

    /** What a backward does to ZeRO-2's units: each unit's gradients, from {@code flat}, then reduce-scattered. */
    private static void backward(ShardedUnits units, MemorySegment flat) {
        units.zeroGrad();
        for (UnitLayout.Unit u : units.layout().units()) {
            units.beginGradients(u.index());
            for (UnitLayout.Segment s : u.segments()) {
                MemorySegment.copy(flat, s.offset() * Float.BYTES, units.grad(new UnitLayout.Place("segment",
                        u.index(), s.packed(), s.offset(), s.count())), 0, s.count() * Float.BYTES);
            }
            units.gradientsDone(u.index());
        }
    }
}
