package io.accel4j.fit;

import io.accel4j.core.ops.Ops;
import io.accel4j.nn.Network;
import io.accel4j.optim.LrSchedule;
import io.accel4j.optim.Optimizer;
import io.accel4j.train.precision.LossScaler;
import io.accel4j.train.StepMetrics;
import io.accel4j.train.model.Fp8State;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * One rank's optimizer step, the same for every strategy: zero the gradients, K micro-batches of forward and backward
 * (each scaled by {@code 1/(B·T·K)} times the loss scale), the strategy's gradient reduction, the loss averaged over
 * the ranks, the overflow check (fp16), the global norm and clipping folded into the update's gradient scale, the
 * optimizer's update of this rank's shard at the schedule's rate and the strategy's gather of the shards, the loss
 * scaler's bookkeeping, the FP8 scales' update from the ranks' maximum amaxes. Which ranks, shards and collectives is the {@link GradientSync}'s business alone.
 */
final class RankStep implements AutoCloseable {

    private final Network net;
    private final Optimizer optimizer;
    private final GradientSync sync;
    private final DataSource data;
    private final LrSchedule schedule;
    private final LossScaler scaler;
    private final float gradClip;
    private final int B;
    private final int T;
    private final int K;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment inputs;
    private final MemorySegment targets;
    /** The network's flat parameters and gradients, or NULL when the strategy holds them (ZeRO-3). */
    private final MemorySegment params;
    private final MemorySegment grads;
    private int step;

    RankStep(Network net, Optimizer optimizer, GradientSync sync, DataSource data, LrSchedule schedule,
             LossScaler scaler, float gradClip, int B, int T, int K) {
        this.net = net;
        this.optimizer = optimizer;
        this.sync = sync;
        this.data = data;
        this.schedule = schedule;
        this.scaler = scaler;
        this.gradClip = gradClip;
        this.B = B;
        this.T = T;
        this.K = K;
        long rows = (long) B * T;
        this.inputs = arena.allocate(rows * net.inputWidth() * Float.BYTES, 64);
        this.targets = arena.allocate(rows * Integer.BYTES, 64);
        this.params = net.flat() ? net.params() : MemorySegment.NULL;
        this.grads = net.flat() ? net.grads() : MemorySegment.NULL;
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

    StepMetrics step() {
        int s = step;
        long t0 = System.nanoTime();
        Ops ops = net.ops();
        long count = net.table().count();
        float lossScale = scaler.scale();
        float dlossScale = 1f / ((float) B * T * K) * lossScale;
        net.zeroGrad();
        double loss = 0;
        for (int k = 0; k < K; k++) {
            data.next(inputs, targets);
            loss += net.forwardBackward(inputs, targets, B, T, dlossScale);
        }
        loss /= K;
        sync.reduce(grads, count);
        if (sync.ranks() > 1) {
            loss = sync.mean(loss);
        }
        boolean overflow = scaler.enabled() && sync.anyNonFinite(ops, grads, count);
        double norm = overflow ? Double.NaN : Math.sqrt(sync.sumOfSquares(ops, grads, count)) / lossScale;
        if (!Double.isFinite(loss) || !overflow && !Double.isFinite(norm)) {
            throw new IllegalStateException("training diverged at step " + s + " (loss " + loss + ", gradient norm "
                    + norm + "): lower the learning rate or clip the gradients");
        }
        float lr = schedule.lr(s);
        if (!overflow) {
            float clip = gradClip > 0 && norm > gradClip ? (float) (gradClip / norm) : 1f;
            optimizer.step(s + 1 - scaler.skippedSteps(), lr, clip / lossScale);
            sync.afterUpdate(params, count);
        }
        scaler.afterStep(overflow);
        Fp8State fp8 = net.fp8();
        if (fp8 != null) { // every rank casts with the same scales: this step's amaxes are the ranks' maximum
            if (sync.ranks() > 1) {
                fp8.recordStepAmaxes(sync.max(fp8.stepAmaxes()));
            }
            fp8.update();
        }
        step = s + 1;
        double ms = (System.nanoTime() - t0) / 1e6;
        double perS = (double) B * T * K * sync.ranks() / (ms / 1e3);
        return scaler.enabled()
                ? new StepMetrics(s, loss, Double.NaN, ms, perS, lr, norm, lossScale, overflow, scaler.skippedSteps())
                : new StepMetrics(s, loss, Double.NaN, ms, perS, lr, norm);
    }

    @Override
    public void close() {
        arena.close();
        sync.close();
        optimizer.close();
        net.close();
    }
}
