package io.accel4j.fit;

import io.accel4j.core.ops.Ops;
import io.accel4j.nn.HalfGradients;
import io.accel4j.nn.Network;
import io.accel4j.optim.Optimizer;
import io.accel4j.optim.OptimizerSpec;
import java.lang.foreign.MemorySegment;

/**
 * One rank, DDP or ZeRO-1 ({@code inner}: {@link GradientSync#local()}, {@link DataParallel}, {@link ZeroSharding}
 * stage 1) over a network whose gradients
 * are stored in 16 bits ({@link Network#halfGradients()}): everything that reads the gradients reads them in fp32
 * chunks ({@link HalfGradients#chunks}), so no second, fp32 gradient buffer exists. {@link #reduce} averages each
 * chunk with the inner strategy's all-reduce and rounds it back into the store; the overflow check and the norm are
 * the chunks' (the same on every rank: the averaged gradients are); the optimizer reads the chunks
 * ({@link OptimizerSpec#create(Ops, io.accel4j.nn.ParameterTable, MemorySegment, HalfGradients, long, long)}:
 * AdamW), over the inner strategy's {@link #shard} — all of it, or under ZeRO-1 chunk r, whose updated parameters
 * the inner strategy's {@link #afterUpdate} all-gathers. The gradients are all-reduced whole under ZeRO-1 as under
 * DDP (as {@link ZeroSharding} stage 1 does with fp32 ones), so ZeRO-1 is DDP bit for bit. The parameters, the loss,
 * the other values and the checkpoints' moments cross as the inner strategy moves them.
 */
final class HalfGradientSync extends ForwardingGradientSync {

    private final HalfGradients grads;

    /**
     * {@code inner} over {@code net}'s 16-bit gradients.
     *
     * @throws IllegalArgumentException when {@code inner} shards the gradients (ZeRO-2/3), which needs fp32 gradient
     *                                  shards
     */
    HalfGradientSync(GradientSync inner, Network net) {
        super(inner);
        this.grads = net.halfGradients();
        long count = net.table().count();
        boolean zero1 = inner instanceof ZeroSharding z && z.stage() == 1;
        if (inner.shard(count).length() != count && !zero1) {
            throw new IllegalArgumentException("16-bit gradients (gradientStorage) do not go with "
                    + inner.getClass().getSimpleName() + "'s sharded gradients yet");
        }
    }

    @Override
    public Shard shard(long count) {
        return inner.shard(count);
    }

    /** Averages the gradients chunk by chunk over the ranks ({@code grads} is not read: the store is). */
    @Override
    public void reduce(MemorySegment unused, long count) {
        if (inner.ranks() > 1) {
            grads.chunks(0, count, true, (o, f, n) -> inner.reduce(f, n));
        }
    }

    @Override
    public double sumOfSquares(Ops ops, MemorySegment unused, long count) {
        return grads.sumOfSquares();
    }

    @Override
    public boolean anyNonFinite(Ops ops, MemorySegment unused, long count) {
        return inner.any(grads.hasNonFinite());
    }

    @Override
    public Optimizer optimizer(OptimizerSpec spec, Network net) {
        Shard s = shard(net.table().count());
        return spec.create(net.ops(), net.table(), net.params().asSlice(s.offset() * Float.BYTES,
                s.length() * Float.BYTES), grads, s.offset(), s.length());
    }
}
