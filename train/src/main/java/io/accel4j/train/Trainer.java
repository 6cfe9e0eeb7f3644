package io.accel4j.train;

import io.accel4j.collectives.Communicator;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.fit.StepRecipe;
import io.accel4j.train.checkpoint.CheckpointFiles;
import io.accel4j.train.checkpoint.TrainState;
import io.accel4j.train.data.DataLoader;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.data.TokenShards;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.parallel.ModelStates;
import io.accel4j.train.parallel.ZeroMemory;
import io.accel4j.train.plan.MemoryPlan;
import io.accel4j.train.precision.LossScaler;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.Objects;

/**
 * The training loop of llm.c's {@code train_gpt2.c}, through the model's kernels: per step, an optional
 * validation, then K micro-batches of forward and backward accumulating into the gradients (each scaled by
 * 1/(B·T·K), so the step's gradient is that of the mean loss over K·B sequences), the global gradient norm, clipping
 * folded into AdamW's gradient scale, and one AdamW update (in ranges when the no-decay set is spared): the step of
 * {@link StepRecipe}, the Java API's too. {@link TrainingRun} is the whole run, the same loop on every rank;
 * {@link TrainerRank} puts one rank's parts together (loader, validation, model states, host batch).
 *
 * <p><b>Strategies.</b> What a rank holds of the model states and how the ranks agree on a step is a
 * {@link ModelStates}: {@code SyncStates} (one rank, DDP — gradients averaged in buckets overlapped with backward, or
 * whole — or ZeRO-1, on the Java API's strategies) or {@code ShardedStates} (ZeRO 2–3, on {@code fit.UnitSharding}); the step is written once
 * against it. With N &gt; 1 ranks each rank reads its slice of each global batch ({@link DataLoader} rank r of N), the
 * reported loss is the mean over the ranks, and every rank applies the same update to the same bits. Validation, when
 * due, runs on rank 0 (on every rank under ZeRO-3, where running the model is a collective); other ranks report NaN.
 * Every rank must call {@link #trainStep} equally often; a rank that fails makes the others fail with the
 * communicator's {@link io.accel4j.collectives.CollectiveException} within its timeout.
 *
 * <p><b>Checkpoints</b> ({@link Checkpoints}): {@link #save} writes llm.c's model file and {@link TrainState} beside
 * it, then the {@value #POINTER} commit point; {@link #resume} reads them back, rank 0's data position every rank's
 * (the shuffle is the same on every rank in {@link SampleOrder.Mode#SHUFFLED} and
 * {@link SampleOrder.Mode#SEQUENTIAL}), and the steps that follow give bit for bit the losses of an uninterrupted run.
 *
 * <p><b>Memory.</b> Everything lives in the model's memory ({@link Gpt2#memory()}: the host's on the CPU, a device's
 * on a GPU); the loaders fill a host batch the forward copies in, and only values come back. The collectives run on
 * the model's own buffers, so the communicator must take buffers of that memory ({@link Communicator#deviceBuffers()}
 * is the opposite of {@link DeviceMemory#hostAccessible()}); the constructor refuses a mismatch. The few values the
 * ranks exchange (loss, flags, norms, checksums, amaxes) cross through {@code ValueExchange}.
 */
public final class Trainer implements AutoCloseable {

    /** The file in a checkpoint directory that names the latest complete checkpoint. */
    public static final String POINTER = CheckpointFiles.POINTER;

    private final Gpt2 model;
    private final TrainConfig cfg;
    /** This rank's loader, validation (null without a val file), model states and host batch. */
    private final TrainerRank parts;
    private final Communicator comm;
    /** The model states this rank holds and how the ranks agree on a step: stage 0 (DDP, one rank) or ZeRO. */
    private final ModelStates states;
    private final LossScaler scaler;
    /** The step, shared with the Java API, and what it runs on here. */
    private final StepRecipe recipe;
    private final Gpt2Steps steps;
    private int step;
    private final Checkpoints checkpoints;
    /** {@link #gatherModel} ended the ZeRO-3 run. */
    private boolean gathered;

    /**
     * A trainer of {@code model} (its parameters already set) on {@code trainFile}, validating on {@code valFile}
     * (null, or {@code cfg.valBatches()} 0: no validation; {@code cfg.valEvery()} 0: only when asked). The model
     * must take batches of {@code cfg.batch()} × {@code cfg.seq()}; the token files must fit its vocabulary.
     */
    public Trainer(Gpt2 model, TrainConfig cfg, TokenFile trainFile, TokenFile valFile) throws IOException {
        this(model, cfg, trainFile, valFile, null);
    }

    /**
     * A data-parallel trainer: rank {@code comm.rank()} of {@code comm.size()} (null or size 1: one rank, as
     * {@link #Trainer(Gpt2, TrainConfig, TokenFile, TokenFile)}). Every rank's model must start with the same
     * parameters; {@code cfg.batch()} is per rank, so a step trains on N·K·B sequences.
     */
    public Trainer(Gpt2 model, TrainConfig cfg, TokenFile trainFile, TokenFile valFile, Communicator comm)
            throws IOException {
        this(model, cfg, TokenShards.of(trainFile), 1, valFile, comm, ModelStates::of);
    }

    /**
     * A trainer whose model states come from {@code strategy} (e.g. asynchronous data parallelism's workers), the
     * ranks of {@code comm} sharing the data as for {@link #Trainer(Gpt2, TrainConfig, TokenFile, TokenFile,
     * Communicator)}.
     */
    public Trainer(Gpt2 model, TrainConfig cfg, TokenFile trainFile, TokenFile valFile, Communicator comm,
                   ModelStates.Factory strategy) throws IOException {
        this(model, cfg, TokenShards.of(trainFile), 1, valFile, comm, strategy);
    }

    /**
     * {@link #Trainer(Gpt2, TrainConfig, TokenFile, TokenFile, Communicator, ModelStates.Factory)} on the shards of
     * {@code trainShards} (in llm.c's order over shards), read ahead by {@code loaderThreads} threads; the caller
     * closes the shards.
     */
    public Trainer(Gpt2 model, TrainConfig cfg, TokenShards trainShards, int loaderThreads, TokenFile valFile,
                   Communicator comm, ModelStates.Factory strategy) throws IOException {
        this.comm = comm == null || comm.size() == 1 ? null : comm;
        int rank = this.comm == null ? 0 : this.comm.rank(), ranks = this.comm == null ? 1 : this.comm.size();
        this.model = Objects.requireNonNull(model, "model");
        this.cfg = Objects.requireNonNull(cfg, "cfg");
        TrainerChecks.check(model, cfg, trainShards, valFile, this.comm, ranks);
        this.scaler = new LossScaler(cfg.precision());
        this.parts = TrainerRank.assemble(model, cfg, trainShards, loaderThreads, valFile, this.comm, rank, ranks,
                strategy);
        ModelStates st = parts.states;
        this.states = st;
        this.checkpoints = new Checkpoints(model, cfg, st, scaler);
        this.recipe = new StepRecipe(scaler, cfg::learningRate, cfg.gradClip(), cfg.batch(), cfg.seq(),
                cfg.gradAccum(), ranks);
        this.steps = new Gpt2Steps(model, cfg, st, parts.train, parts.inputs, parts.targets, st.overlap());
        try {
            checkReplicas();
        } catch (RuntimeException | Error e) {
            close();
            throw e;
        }
    }

    /**
     * With several ranks, checks that every rank's parameters are bit for bit the same ({@code ReplicaCheck}).
     * Called on construction and after {@link #resume}; any rank may call it between steps (all ranks must). Does
     * nothing with one rank.
     *
     * @throws IllegalStateException when the ranks' parameters differ
     */
    public void checkReplicas() {
        states.checkReplicas();
    }

    /** Fields the strategy adds to the last step's metrics line ({@link ModelStates#stepJson}). */
    public String strategyJson() {
        return states.stepJson();
    }

    /** This trainer's rank (0 without a communicator). */
    public int rank() {
        return comm == null ? 0 : comm.rank();
    }

    /** The number of ranks training together (1 without a communicator). */
    public int ranks() {
        return comm == null ? 1 : comm.size();
    }

    /**
     * Bytes this trainer allocated off-heap: AdamW's moments (with ZeRO, this rank's shards and norm partials) and
     * the batch buffers ({@link MemoryPlan}).
     */
    public long stateBytes() {
        return states.stateBytes() + parts.batchBytes() + Float.BYTES; // the loss's fp32 (the exchange's scratch is not counted)
    }

    /**
     * Bytes the offloaded optimizer allocated in host memory, outside the model's ({@code OffloadPlan}'s host side);
     * 0 without offload.
     */
    public long hostBytes() {
        return states.hostBytes();
    }

    /** Whether ZeRO-3 shards the parameters: no rank has them whole, and running the model is a collective. */
    public boolean shardsParameters() {
        return states.shardsParameters();
    }

    /**
     * Copies the whole parameter vector (Ψ fp32, the flat layout) into {@code dst}. At ZeRO stage 3 a collective that
     * gathers every unit: every rank calls it, ranks that need no copy pass null.
     */
    public void copyParameters(MemorySegment dst) {
        states.copyParameters(dst);
    }

    /**
     * Bytes this rank allocated for its model states: the model's weights (parameters and gradients, whole or
     * ZeRO's shards, with ZeRO-2/3's {@link #workingBytes}) and AdamW's moments (whole or a shard).
     */
    public long modelStateBytes() {
        return model.weights().bytes() + states.momentBytes();
    }

    /** Bytes of ZeRO-2/3's working buffers for the units in use, within {@link #modelStateBytes()} (else 0). */
    public long workingBytes() {
        return states.workingBytes();
    }

    /**
     * Ends a ZeRO-3 run for work that runs the model on one rank alone (sampling, a report): a collective that gathers
     * the whole parameter vector, unit by unit; ranks passing {@code here} get the model back as flat buffers
     * ({@link Gpt2#params()} works again, the sharded weights are freed), the others only send their shards. No
     * step may follow. Below stage 3 it does nothing.
     */
    public void gatherModel(boolean here) {
        if (!shardsParameters()) {
            return;
        }
        states.gatherModel(here);
        gathered = true;
    }

    /** The ZeRO stage (0: plain data parallelism, or one rank). */
    public int zeroStage() {
        return states.zeroStage();
    }

    /** Model-state bytes per rank by the ZeRO paper's accounting (fp32 states), for this run's stage and ranks. */
    public ZeroMemory memory() {
        return states.accounting();
    }

    /** Layer buckets the gradient averaging started so far (0 without overlap; for tests). */
    int layerBuckets() {
        return states.layerBuckets();
    }

    /** Completed optimizer steps. */
    public int step() {
        return step;
    }

    /** Whether all {@code cfg.steps()} steps are done. */
    public boolean done() {
        return step >= cfg.steps();
    }

    /** The model being trained. */
    public Gpt2 model() {
        return model;
    }

    /** The config. */
    public TrainConfig config() {
        return cfg;
    }

    /** Validation batches each {@link #validate} averages over (fewer than asked when the val file is short). */
    public int valBatches() {
        return parts.val == null ? 0 : parts.val.batches();
    }

    /** Whether {@link #trainStep} validates before step {@code s}. */
    public boolean validatesBefore(int s) {
        return parts.val != null && cfg.valEvery() > 0 && s % cfg.valEvery() == 0;
    }

    /** Nanoseconds the steps have waited for the train loader's batches so far ({@link DataLoader#waitNanos}). */
    public long dataWaitNanos() {
        return parts.train.waitNanos();
    }

    /** The loss scaler (disabled unless the run is fp16). */
    public LossScaler lossScaler() {
        return scaler;
    }

    /**
     * One optimizer step: validation first when due, then the {@link StepRecipe}'s step (the Java API's too).
     *
     * <p>With fp16 loss scaling ({@link LossScaler}) the gradients are those of the loss times the scale; when they
     * hold inf or NaN on any rank the step makes no update (AdamW's moments and step number stay as they are), the
     * scale halves, and the step still counts: {@link #step()} advances and the learning-rate schedule moves on, as
     * with PyTorch's GradScaler and a scheduler stepped every iteration. Otherwise the norm and the update see the
     * gradients divided by the scale. AdamW's step number is the number of updates made, {@code step − skipped + 1}.
     *
     * @throws IllegalStateException when the loss or the gradient norm is not finite (the run diverged), or fp16
     *                               gradients overflow at the smallest loss scale
     */
    public StepMetrics trainStep() {
        if (gathered) {
            throw new IllegalStateException("gatherModel ended this ZeRO-3 run: no more steps");
        }
        int s = step;
        double valLoss = Double.NaN;
        if (validatesBefore(s) && (rank() == 0 || shardsParameters())) { // stage 3: a collective
            double v = validate();
            valLoss = rank() == 0 ? v : Double.NaN;
        }
        long wait0 = parts.train.waitNanos();
        StepMetrics m = recipe.step(s, valLoss, steps);
        step = s + 1;
        if (done()) {
            states.awaitParameters(); // no next forward to overlap a deferred upload with: the model whole for readers
        }
        return m.withDataMs((parts.train.waitNanos() - wait0) / 1e6);
    }

    /**
     * Zeroes the gradients and accumulates the next K micro-batches' into them, without updating: the step before
     * its AdamW update. This rank's own gradients and loss only: {@link #trainStep} averages them over the ranks.
     *
     * @return the mean loss of the K micro-batches
     */
    public double accumulate() {
        return recipe.accumulate(new Gpt2Steps(model, cfg, states, parts.train, parts.inputs, parts.targets, null),
                1f);
    }

    /**
     * The mean loss over the first {@link #valBatches} batches of the val file (NaN without one). At ZeRO stage 3 a
     * collective (the forward gathers the parameters): every rank calls it. With FP8 the forwards cast with the
     * current scales but leave the amax histories as they were: training does not depend on when it validates.
     */
    public double validate() {
        return parts.val == null ? Double.NaN : parts.val.loss(parts.inputs, parts.targets);
    }

    /**
     * Writes a checkpoint of the current step into {@code dir} (created if missing); returns the model file. Every
     * rank may call it: under ZeRO it is a collective (rank 0 gathers AdamW's moments and writes, the others send
     * theirs), below it rank 0 writes and the others return at once; either way they return the path rank 0 writes.
     */
    public Path save(Path dir) throws IOException {
        return checkpoints.save(dir, step, parts.train.position());
    }

    /** Which older checkpoints {@link #save} keeps (default: none, only the latest). */
    public void keepCheckpoints(CheckpointFiles.Retention r) {
        checkpoints.keep(r);
    }

    /**
     * Continues from the checkpoint in {@code dir}: the model's parameters, AdamW's moments, the step and the train
     * data position. The checkpoint must be for this model's shape and this run's B, T and K.
     */
    public void resume(Path dir) throws IOException {
        step = checkpoints.resume(dir, parts.train, rank(), ranks());
        checkReplicas();
    }

    /** Stops the data loaders and frees the optimizer state (the model stays open). */
    @Override
    public void close() {
        parts.close();
    }
}
