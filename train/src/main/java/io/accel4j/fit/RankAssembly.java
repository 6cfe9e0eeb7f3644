package io.accel4j.fit;

import io.accel4j.collectives.Communicator;
import io.accel4j.core.ops.Ops;
import io.accel4j.grid.ProcessGrid;
import io.accel4j.nn.Module;
import io.accel4j.nn.Network;
import io.accel4j.nn.NetworkSpec;
import io.accel4j.nn.Sequential;
import io.accel4j.nn.UnitScope;
import io.accel4j.optim.Optimizer;
import io.accel4j.train.precision.LossScaler;
import io.accel4j.train.precision.Precision;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;

/**
 * Puts one rank of a {@link Learner} together from the builder's choices: the network on the rank's backend (its
 * parameters in ZeRO-3's shards when asked, {@link ShardedModel}), the gradient-synchronisation strategy over the
 * rank's data-parallel group ({@link GradientSync#local()}, {@link DataParallel}, {@link ZeroSharding} 1–2,
 * {@link UnitSharding} (ZeRO-3, and ZeRO-2 of a model with unit scopes of its own: {@link #unitSharded}); with
 * {@link BucketedDataParallel} over the model's children when buckets are asked; composed with
 * {@link TensorParallelSync} in a tensor grid; {@link AsyncWorkers} for a worker of parameter servers), the initial
 * parameters (drawn whole from the seed, placed by the strategy), the optimizer over the rank's part
 * ({@link GradientSync#optimizer}) and the data source: a {@link RankStep}, which owns them all.
 */
final class RankAssembly {

    private RankAssembly() {
    }

    /**
     * Rank {@code rank}'s step: {@code data} its data-parallel group (null: alone), {@code grid} its place in a tensor
     * grid (null: none), reading replica {@code replica} of {@code replicas} of the data.
     */
    static RankStep build(LearnerBuilder b, io.accel4j.optim.OptimizerSpec optimizerSpec, Ops ops,
                          Communicator data, ProcessGrid grid, int replica, int replicas) {
        boolean alone = data == null || data.size() == 1;
        Module body = b.model.get();
        ShardedModel sharded = !alone && unitSharded(b, body) ? new ShardedModel(data, ops, body, b.zero == 3) : null;
        Sequential buckets = b.bucketBytes > 0 && !alone ? bucketUnits(body) : null; // each child reports its end
        NetworkSpec spec = Network.of(sharded != null ? sharded.scoped() : buckets != null ? buckets : body).classes(b.classes).batch(b.B, b.T)
                .recompute(b.recompute).matmulOperands(b.precision).activationStorage(b.storage)
                .parameterOrder(b.order).fp8(b.fp8)
                .gradientStorage(b.gradients).parameterStorage(b.parameters)
                .tensorParallel(grid == null ? null : grid.tensor());
        spec = b.tokens > 0 ? spec.tokens(b.tokens) : spec.features(b.features);
        if (sharded != null) {
            spec = sharded.parameters(spec);
        }
        Network net = null;
        GradientSync sync = null;
        Optimizer optimizer = null;
        try {
            net = spec.build(ops);
            int values = net.fp8() == null ? 0 : net.fp8().histories();
            long count = net.table().count();
            sync = b.async != null ? new AsyncWorkers(b.async, data == null ? 0 : data.rank(),
                    data == null ? 1 : data.size(), count)
                    : sharded != null ? new UnitSharding(data, ops.memory(), sharded, values)
                    : GradientSync.of(alone ? 0 : b.zero, data, ops.memory(), count, values);
            sharded = null; // the strategy owns it
            if (buckets != null) {
                List<UnitScope> scopes = new java.util.ArrayList<>();
                scopesOf(buckets, scopes);
                sync = new BucketedDataParallel(sync, net.grads(), count,
                        BucketedDataParallel.unitsOf(net.table(), scopes), b.bucketBytes);
            }
            if (grid != null) {
                sync = new TensorParallelSync(sync, grid.tensor(), net, ops.memory());
            }
            if (b.gradients != io.accel4j.core.DType.FP32) { // 16-bit gradients: read in fp32 chunks
                sync = new HalfGradientSync(sync, net);
            }
            if (b.parameters != io.accel4j.core.DType.FP32) { // bf16 working weights: the optimizer's fp32 master
                sync = new Bf16ParamSync(sync, net, b.seed);
            }
            try (Arena host = Arena.ofConfined()) {
                MemorySegment initial = host.allocate(count * Float.BYTES, 64);
                net.initialValues(b.seed, initial);
                sync.setParameters(net, initial);
            }
            optimizer = sync.optimizer(optimizerSpec, net);
            return new RankStep(net, optimizer, sync, b.data.open(replica, replicas, b.B, b.T), b.schedule,
                    new LossScaler(new Precision(b.precision, b.initialLossScale, b.lossScaleWindow)), b.gradClip, b.B, b.T, b.gradAccum);
        } catch (RuntimeException | Error e) {
            for (AutoCloseable c : new AutoCloseable[] {optimizer, sync, sharded, net}) {
                try {
                    if (c != null) {
                        c.close();
                    }
                } catch (Exception suppressed) {
                    e.addSuppressed(suppressed);
                }
            }
            throw e;
        }
    }

    /**
     * Whether the rank shards unit by unit ({@link UnitSharding} over a {@link ShardedModel}): always at ZeRO-3; at
     * ZeRO-2 when the model brackets units of its own ({@link ShardedModel#ownScopes}: GPT-2's
     * {@code Gpt2Blocks.body}), reduce-scattering each unit as its backward ends as the CLI trainer's ZeRO-2 does (its
     * bits), unless the optimizer is offloaded (whose host optimizer takes one range: {@link ZeroSharding} stage 2).
     * Other models' ZeRO-2 is {@link ZeroSharding} stage 2 (the whole buffer reduce-scattered after backward).
     */
    static boolean unitSharded(LearnerBuilder b, Module body) {
        return b.zero == 3 || b.zero == 2 && !b.offloadOptimizer && ShardedModel.ownScopes(body);
    }

    /**
     * {@code body} with units that report when their gradients are final: its own {@link UnitScope}s when it has any
     * (GPT-2's {@code Gpt2Blocks.body}: a unit per block, as the CLI trainer buckets them), else each child a unit
     * ({@link UnitScope#perChild}).
     */
    private static Sequential bucketUnits(Module body) {
        if (!(body instanceof Sequential seq)) {
            throw new IllegalArgumentException("bucketMb all-reduces the children of the model's top-level "
                    + "Sequential as their backward ends: make the model a Sequential (its "
                    + body.getClass().getSimpleName() + " '" + body.name() + "' is not)");
        }
        List<UnitScope> own = new java.util.ArrayList<>();
        scopesOf(seq, own);
        return own.isEmpty() ? UnitScope.perChild(seq) : seq;
    }

    /** The {@link UnitScope}s in {@code m}'s tree of {@link Sequential}s, in order, into {@code out}. */
    private static void scopesOf(Module m, List<UnitScope> out) {
        if (m instanceof UnitScope u) {
            out.add(u);
        } else if (m instanceof Sequential s) {
            for (Module c : s.children()) {
                scopesOf(c, out);
            }
        }
    }
}
