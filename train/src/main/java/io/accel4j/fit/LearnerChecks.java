package io.accel4j.fit;

import io.accel4j.core.DType;
import io.accel4j.optim.AdamW;
import io.accel4j.optim.OptimizerSpec;
import io.accel4j.train.precision.Precision;

/**
 * What a {@link LearnerBuilder} refuses before anything is built: options that contradict each other or that a
 * strategy cannot run yet, each a clear {@link IllegalArgumentException} naming the options.
 */
final class LearnerChecks {

    private LearnerChecks() {
    }

    /** Checks {@code b}'s choices together. */
    static void check(LearnerBuilder b) {
        if (b.data == null) {
            throw new IllegalArgumentException("no data: call data(factory)");
        }
        if (b.comm != null && b.ranks != 1) {
            throw new IllegalArgumentException("ranks(" + b.ranks + ") and communicator(" + b.comm.size()
                    + " ranks) "
                    + "both say how many ranks there are: with a communicator this process is one of them");
        }
        // in process, a pipeline's ranks default to one per stage and tensor rank
        int world = b.comm != null ? b.comm.size() : b.pipeline != null && b.ranks == 1
                ? b.pipeline.stages() * b.tensorParallel : b.ranks;
        if (b.zero == 3 && b.offloadOptimizer) {
            throw new IllegalArgumentException("offloadOptimizer() does not go with zero(3) yet: ZeRO-3's shard is "
                    + "scattered over the units; use zero(1) or zero(2)");
        }
        if (b.pipeline != null && b.offloadOptimizer) {
            throw new IllegalArgumentException("offloadOptimizer() does not go with pipeline(" + b.pipeline.stages()
                    + ", …) yet: the stages create their optimizers themselves");
        }
        if (world % b.tensorParallel != 0) {
            throw new IllegalArgumentException("tensorParallel(" + b.tensorParallel + ") does not divide the "
                    + world
                    + " ranks: the ranks are D·T (data-parallel replicas × tensor ranks)");
        }
        int replicas = world / b.tensorParallel;
        if (b.tensorParallel > 1 && b.zero > 1) {
            throw new IllegalArgumentException("tensor parallelism composes with DDP and ZeRO-1, not yet with ZeRO-"
                    + b.zero);
        }
        if (b.tensorParallel > 1 && b.fp8 != null) {
            throw new IllegalArgumentException("tensor-parallel blocks have no FP8 path: drop fp8(...) or "
                    + "tensorParallel(" + b.tensorParallel + ")");
        }
        if (b.zero > 0 && replicas < 2 && b.pipeline == null) {
            throw new IllegalArgumentException("ZeRO stage " + b.zero + " shards over the ranks: ask for ranks(2) "
                    + "or more" + (b.tensorParallel > 1 ? " data-parallel replicas (ranks = replicas × "
                    + b.tensorParallel + " tensor ranks)" : ""));
        }
        checkGradients(b);
        checkAsync(b, world);
        checkParameters(b);
        String unbucketed = b.zero > 1 ? "zero(" + b.zero + ")" : b.tensorParallel > 1 ? "tensorParallel("
                + b.tensorParallel + ")" : b.pipeline != null ? "pipeline(" + b.pipeline.stages() + ", …)"
                : b.gradients != DType.FP32 ? "gradientStorage(" + b.gradients + ")" : null;
        if (b.bucketBytes > 0 && unbucketed != null) {
            throw new IllegalArgumentException("bucketMb (the overlapped all-reduce of DDP and ZeRO-1) does not go "
                    + "with " + unbucketed + " yet: drop one of them");
        }
        if (b.pipeline != null && (b.initialLossScale != Precision.DEFAULT_LOSS_SCALE
                || b.lossScaleWindow != Precision.DEFAULT_LOSS_SCALE_WINDOW)) {
            throw new IllegalArgumentException("lossScaling(...) does not go with pipeline(" + b.pipeline.stages()
                    + ", …) yet: the stages scale with the defaults");
        }
        if (b.tokens < 0 && b.features < 0) {
            throw new IllegalArgumentException("say what the model takes: tokens(V) or features(D)");
        }
    }

    private static String name(OptimizerSpec spec) {
        Class<?> c = spec.getClass().getEnclosingClass() != null ? spec.getClass().getEnclosingClass()
                : spec.getClass();
        return c.getSimpleName();
    }

    /** Refuses what asynchronous workers cannot run with, naming the options. */
    private static void checkAsync(LearnerBuilder b, int world) {
        if (b.async == null) {
            return;
        }
        String other = b.zero > 0 ? "zero(" + b.zero + "): the servers shard the optimizer state already"
                : b.tensorParallel > 1 ? "tensorParallel(" + b.tensorParallel + ")"
                : b.pipeline != null ? "pipeline(" + b.pipeline.stages() + ", …)"
                : b.offloadOptimizer ? "offloadOptimizer(): the servers run the optimizer"
                : b.bucketBytes > 0 ? "bucketMb: the workers average no gradients"
                : b.gradients != DType.FP32 ? "gradientStorage(" + b.gradients + ")"
                : b.precision == DType.FP16 ? "precision(FP16)'s loss scaling: a skipped step would push nothing"
                : null;
        if (other != null) {
            throw new IllegalArgumentException("asyncWorkers does not go with " + other + " yet: drop one of them");
        }
        if (world != b.async.servers().workers()) {
            throw new IllegalArgumentException("asyncWorkers: the learner has " + world + " rank"
                    + (world == 1 ? "" : "s") + ", but the parameter servers wait for " + b.async.servers().workers()
                    + " workers: one rank per worker");
        }
        if (!b.async.adamw().equals(b.optimizer)) {
            throw new IllegalArgumentException("asyncWorkers: the parameter servers run " + b.async.adamw()
                    + " (the TrainConfig's), but the optimizer is " + b.optimizer + ": set optimizer(...) to the "
                    + "servers' AdamW");
        }
    }

    /** Refuses bf16 working weights with what cannot take them yet, naming both options. */
    private static void checkParameters(LearnerBuilder b) {
        if (b.parameters == DType.FP32) {
            return;
        }
        String p = "parameterStorage(" + b.parameters + ")";
        if (b.parameters != DType.BF16) {
            throw new IllegalArgumentException(p + ": the working weights are stored in FP32 or BF16");
        }
        String other = b.zero > 0 ? "zero(" + b.zero + ")" : b.tensorParallel > 1 ? "tensorParallel("
                + b.tensorParallel + ")" : b.pipeline != null ? "pipeline(" + b.pipeline.stages() + ", …)"
                : !(b.optimizer instanceof AdamW.Spec) && !(b.optimizer instanceof io.accel4j.optim.Bf16AdamW.Spec)
                ? "optimizer(" + name(b.optimizer) + ")" : null;
        if (other != null) {
            throw new IllegalArgumentException(p + " does not go with " + other + " yet (its optimizer, AdamW with "
                    + "the fp32 master, holds the whole vector on every rank): drop one of them");
        }
    }

    /** Refuses 16-bit gradients with what cannot read them yet, naming both options. */
    private static void checkGradients(LearnerBuilder b) {
        if (b.gradients == DType.FP32) {
            return;
        }
        String g = "gradientStorage(" + b.gradients + ")";
        if (b.gradients != DType.BF16 && b.gradients != DType.FP16) {
            throw new IllegalArgumentException(g + ": gradients are stored in FP32, BF16 or FP16");
        }
        if (b.gradients == DType.FP16 && b.precision != DType.FP16) {
            throw new IllegalArgumentException(g + " needs precision(FP16), whose loss scaling keeps small gradients "
                    + "representable (this learner is " + b.precision + "): store them in BF16");
        }
        String other = b.zero > 1 ? "zero(" + b.zero + ")" : b.tensorParallel > 1 ? "tensorParallel("
                + b.tensorParallel + ")" : b.pipeline != null ? "pipeline(" + b.pipeline.stages() + ", …)"
                : !(b.optimizer instanceof AdamW.Spec)
                ? "optimizer(" + name(b.optimizer) + ")" : null;
        if (other != null) {
            throw new IllegalArgumentException(g + " does not go with " + other + " yet: drop one of them");
        }
    }
}
