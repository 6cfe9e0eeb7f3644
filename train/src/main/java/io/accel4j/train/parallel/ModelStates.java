package io.accel4j.train.parallel;

import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.ReduceOp;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.optim.AdamW;
import io.accel4j.optim.OptimizerSpec;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.checkpoint.TrainState;
import io.accel4j.train.model.Gpt2;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.function.IntConsumer;

/**
 * What one rank of a {@code Trainer} holds of the model states (AdamW's moments, and with ZeRO shards of the gradients
 * and parameters) and how the ranks agree on a step: the strategy the trainer's step is written against, the same in
 * every mode. {@link SyncStates} is one rank, plain data parallelism ("stage 0": every rank holds everything,
 * gradients averaged whole or in buckets overlapped with backward) and ZeRO-1, on the Java API's
 * {@code fit.GradientSync} strategies; {@link ShardedStates} is ZeRO 2–3; {@link HalfGradStates} is stages 0–1 over
 * 16-bit gradients, {@link Bf16ParamStates} stage 0 over bf16 working weights. After the
 * K micro-batches' backward: {@link #reduceGradients}, then {@link #meanLoss}, {@link #anyNonFinite} and
 * {@link #sumOfSquares} of the averaged gradient, then {@link #update}. Every rank calls the same methods in the same
 * order; the few values the step needs from all ranks cross through a {@link ValueExchange} in the model's memory.
 */
public abstract class ModelStates implements AutoCloseable {

    /** Several ranks, else null. */
    final Communicator comm;
    final Gpt2 model;
    final DeviceMemory memory;
    final long count;
    /** The loss, flags, amaxes and checksum pieces over the ranks; null for one rank. */
    final ValueExchange exchange;

    ModelStates(Communicator comm, Gpt2 model, int values) {
        this.comm = comm;
        this.model = model;
        this.memory = model.memory();
        this.count = model.layout().count();
        this.exchange = comm == null ? null : new ValueExchange(comm, memory, Math.max(8, values));
    }

    /** How a trainer makes its strategy ({@link #of} for the synchronous ones, {@link AsyncStates} composed in). */
    @FunctionalInterface
    public interface Factory {
        ModelStates create(Communicator comm, Gpt2 model, TrainConfig cfg, int values);
    }

    /**
     * Stage 0 (one rank, or DDP) with AdamW offloaded to the host ({@link io.accel4j.optim.Offload}): moments and
     * master weights in host memory, updated by the CPU kernels; the model's memory keeps parameters and gradients
     * (16-bit ones too: {@link HalfGradStates} widens them chunk by chunk on the way down).
     *
     * @throws IllegalArgumentException at creation with a ZeRO stage (its optimizer updates shards itself)
     */
    public static Factory offloaded() {
        return offloaded(true);
    }

    /**
     * {@link #offloaded()}, its step overlapped (the copies pipelined with the host update over chunks, the same bits)
     * or, without {@code overlap}, three serial moves.
     */
    public static Factory offloaded(boolean overlap) {
        return (comm, model, cfg, values) -> {
            if (cfg.zeroStage() > 0) {
                throw new IllegalArgumentException("the offloaded optimizer does not go with ZeRO stage "
                        + cfg.zeroStage() + " in the trainer yet");
            }
            if (model.gradientStorage() != io.accel4j.core.DType.FP32) { // widened chunk by chunk on the way down
                return new HalfGradStates(comm, model, cfg, values, true, overlap);
            }
            return new SyncStates(0, comm, model, cfg, values, true, overlap);
        };
    }

    /** The strategy of {@code cfg}: ZeRO's stage, or stage 0 (one rank, or DDP over {@code comm}). */
    public static ModelStates of(Communicator comm, Gpt2 model, TrainConfig cfg, int values) {
        if (model.parameterStorage() != io.accel4j.core.DType.FP32) { // bf16 working weights: the optimizer's master
            return new Bf16ParamStates(comm, model, cfg, values, false);
        }
        if (model.gradientStorage() != io.accel4j.core.DType.FP32) { // 16-bit gradients: read in fp32 chunks
            return new HalfGradStates(comm, model, cfg, values);
        }
        return cfg.zeroStage() <= 1 ? new SyncStates(cfg.zeroStage(), comm, model, cfg, values, false)
                : new ShardedStates(cfg.zeroStage(), comm, model, cfg, values);
    }

    /**
     * The trainer's AdamW as the Java API's spec: {@code cfg}'s betas, ε and weight decay, the decay on the matrices
     * only when {@code cfg} says so (and there is any), else on every parameter (llm.c's {@code train_gpt2.c}).
     */
    public static OptimizerSpec adamw(TrainConfig cfg) {
        return cfg.adamw();
    }

    /** The number of ranks. */
    public final int ranks() {
        return comm == null ? 1 : comm.size();
    }

    /**
     * What the last micro-batch's backward tells as gradients become final, so that their averaging starts while it
     * still runs ({@code fit.BucketedDataParallel}), or null (the default: they are averaged after backward).
     */
    public IntConsumer overlap() {
        return null;
    }

    /** A step failed after {@link #overlap()} started communicating: no transfer may still read the gradients. */
    public void abandon(Throwable failure) {
    }

    /**
     * Returns once the model's parameters hold the last update: an offloaded optimizer's deferred upload runs on into
     * the next step's forward, so after the run's last step its caller waits here before anyone reads them. Nothing to
     * wait for by default.
     */
    public void awaitParameters() {
    }

    /** After the step's backward: the gradients become their mean over the ranks (whole, or this rank's shard). */
    public abstract void reduceGradients();

    /** The mean of {@code loss} over the ranks (fp32, as reported). */
    public final double meanLoss(double loss) {
        return exchange == null ? loss : exchange.allReduce(ReduceOp.AVG, (float) loss)[0];
    }

    /** Each of {@code amaxes} replaced by its maximum over the ranks (one rank: as it is). */
    public final float[] maxOverRanks(float[] amaxes) {
        return exchange == null ? amaxes : exchange.allReduce(ReduceOp.MAX, amaxes);
    }

    /** Fields this strategy adds to the step's metrics line, as JSON ({@code ,"name":value…}); none by default. */
    public String stepJson() {
        return "";
    }

    /** Whether the averaged gradient holds inf or NaN anywhere, the same answer on every rank. */
    public abstract boolean anyNonFinite();

    /** {@code Σ g²} of the averaged gradient, the same on every rank. */
    public abstract double sumOfSquares();

    /** AdamW step {@code t} on this rank's parameters ({@code decay}'s weight decay where it applies). */
    public abstract void update(AdamWConfig decay, int t, float gradScale);

    /** With several ranks and replicated parameters, checks that every rank's are the same bits. */
    public abstract void checkReplicas();

    /** Whether no rank holds the whole parameter vector (ZeRO-3): running the model is a collective. */
    public abstract boolean shardsParameters();

    /** The ZeRO stage, 0 below ZeRO. */
    public abstract int zeroStage();

    /** Bytes of the optimizer state this rank allocated (moments, norm partials). */
    public abstract long stateBytes();

    /**
     * Bytes of host memory the optimizer allocated outside the backend's, when it is offloaded there (master copy,
     * gradient landing buffer, moments); 0 otherwise, the moments then being in {@link #stateBytes}.
     */
    public long hostBytes() {
        return 0;
    }

    /** Bytes of AdamW's moments on this rank. */
    public abstract long momentBytes();

    /** Bytes of ZeRO-2/3's working buffers (else 0). */
    public abstract long workingBytes();

    /** The ZeRO paper's model-state accounting for this stage and these ranks. */
    public abstract ZeroMemory accounting();

    /** Layer buckets the gradient averaging started so far (0 without overlap). */
    public int layerBuckets() {
        return 0;
    }

    /** Copies the whole parameter vector into {@code dst} (a collective under ZeRO-3; null on ranks that need none). */
    public abstract void copyParameters(MemorySegment dst);

    /**
     * The states a checkpoint writes, on host memory (staged in {@code arena} where needed): rank 0 gets the whole
     * moments (and under ZeRO-3 the whole parameters, else null: the model's own); the other ranks send their shards
     * (ZeRO, a collective) or have nothing to add (replicated), and get null.
     */
    public abstract Saved gatherForCheckpoint(Arena arena);

    /** The whole moments, and the whole parameters when the model does not hold them (ZeRO-3). */
    public record Saved(MemorySegment m, MemorySegment v, MemorySegment params) {}

    /** Reads this rank's moments from the checkpoint's state file; returns its header. */
    public abstract TrainState.Header readMoments(Path stateFile) throws IOException;

    /** Sets the parameters from the whole vector {@code host} (host memory), this rank's shard under ZeRO-3. */
    public abstract void setParameters(MemorySegment host);

    /** Ends a ZeRO-3 run for work on one rank ({@code Trainer.gatherModel}); below stage 3 nothing. */
    public abstract void gatherModel(boolean here);

    @Override
    public void close() {
        if (exchange != null) {
            exchange.close();
        }
    }
}
