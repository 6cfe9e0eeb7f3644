package io.accel4j.fit;

import io.accel4j.nn.Network;
import io.accel4j.optim.LrSchedule;
import io.accel4j.optim.Optimizer;
import io.accel4j.train.precision.LossScaler;
import io.accel4j.train.StepMetrics;
import io.accel4j.train.model.Fp8State;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * One rank's steps of the Java API: a {@link Network}, its {@link Optimizer} and {@link DataSource} as the
 * {@link StepRecipe}'s parts (the step itself is the recipe's). The update is
 * the optimizer's step on this rank's shard followed by the strategy's gather of the shards; which ranks, shards and
 * collectives is the {@link GradientSync}'s business alone.
 */
final class RankStep implements StepRecipe.Parts, AutoCloseable {

    private final Network net;
    private final Optimizer optimizer;
    private final GradientSync sync;
    private final DataSource data;
    private final LossScaler scaler;
    private final StepRecipe recipe;
    private final int B;
    private final int T;
    private final int K;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment inputs;
    private final MemorySegment targets;
    /** The network's flat parameters and gradients, or NULL when the strategy holds them (ZeRO-3, 16-bit). */
    private final MemorySegment params;
    private final MemorySegment grads;
    private final long count;
    private int step;

    RankStep(Network net, Optimizer optimizer, GradientSync sync, DataSource data, LrSchedule schedule,
             LossScaler scaler, float gradClip, int B, int T, int K) {
        this.net = net;
        this.optimizer = optimizer;
        this.sync = sync;
        this.data = data;
        this.scaler = scaler;
        this.recipe = new StepRecipe(scaler, schedule, gradClip, B, T, K, sync.ranks());
        this.count = net.table().count();
        this.B = B;
        this.T = T;
        this.K = K;
        long rows = (long) B * T;
        this.inputs = arena.allocate(rows * net.inputWidth() * Float.BYTES, 64);
        this.targets = arena.allocate(rows * Integer.BYTES, 64);
        this.params = net.flat() ? net.params() : MemorySegment.NULL;
        this.grads = net.ownsParameters() && net.gradientStorage() == io.accel4j.core.DType.FP32 ? net.grads()
                : MemorySegment.NULL; // 16-bit gradients: the strategy reads the network's store
    }

    Network network() {
        return net;
    }

    Optimizer optimizer() {
        return optimizer;
    }

    int completed() {
        return step;
    }

    GradientSync sync() {
        return sync;
    }

    LossScaler scaler() {
        return scaler;
    }

    DataSource data() {
        return data;
    }

    /** Micro-batches read so far: {@code step · K}. */
    long batchesRead() {
        return (long) step * K;
    }

    /** Continues at step {@code s}, {@code batches} batches into the data (when it can skip). */
    void resumeAt(int s, long batches) {
        this.step = s;
        if (data instanceof DataSource.Resumable r) {
            r.skip(batches);
        }
    }

    /**
     * One optimizer step; its metrics carry the time the step waited for its batches ({@code data_ms}, as the CLI
     * trainer's) when the source measures it ({@link DataSource#waitNanos}).
     */
    StepMetrics step() {
        long wait0 = data.waitNanos();
        StepMetrics m = recipe.step(step, Double.NaN, this);
        step++;
        long wait1 = data.waitNanos();
        return wait0 < 0 || wait1 < 0 ? m : m.withDataMs((wait1 - wait0) / 1e6);
    }

    @Override
    public void zeroGrad() {
        net.zeroGrad();
    }

    @Override
    public double microBatch(float dlossScale, boolean last) {
        data.next(inputs, targets);
        return net.forwardBackward(inputs, targets, B, T, dlossScale, last ? sync.gradientsDone() : null);
    }

    @Override
    public void abandon(Throwable failure) {
        sync.abandon(failure); // no all-reduce may still read the gradients once the network is closed
    }

    @Override
    public void reduce() {
        sync.reduce(grads, count);
    }

    @Override
    public double meanLoss(double loss) {
        return sync.ranks() > 1 ? sync.mean(loss) : loss;
    }

    @Override
    public boolean anyNonFinite() {
        return sync.anyNonFinite(net.ops(), grads, count);
    }

    @Override
    public double sumOfSquares() {
        return sync.sumOfSquares(net.ops(), grads, count);
    }

    @Override
    public void update(int t, float lr, float gradScale) {
        optimizer.step(t, lr, gradScale);
        sync.afterUpdate(params, count);
    }

    @Override
    public float[] maxOverRanks(float[] amaxes) {
        return sync.max(amaxes);
    }

    @Override
    public Fp8State fp8() {
        return net.fp8();
    }

    @Override
    public void close() {
        arena.close();
        sync.close();
        optimizer.close();
        net.close();
    }
}
