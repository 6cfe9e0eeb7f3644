package io.accel4j.fit;

import io.accel4j.core.DType;
import io.accel4j.core.fp8.DelayedScaling;
import io.accel4j.core.ops.Ops;
import io.accel4j.nn.Module;
import io.accel4j.nn.ParameterTable;
import io.accel4j.optim.AdamW;
import io.accel4j.optim.LrSchedule;
import io.accel4j.optim.OptimizerSpec;
import io.accel4j.train.model.Recompute;
import java.nio.file.Path;
import java.util.Objects;
import java.util.function.Supplier;

/**
 * The choices a {@link Learner} is made of, set one by one ({@link Learner#of} starts one); {@link #build} makes it:
 * the model (a supplier: one tree per rank), what it takes (tokens or features) and predicts (classes), the batch,
 * accumulation, optimizer, schedule, clipping, precision or FP8, recompute, ranks (in this process, or one per process
 * over a communicator) with DDP or ZeRO, the backend, the data, and where metrics, plot and progress go.
 */
public final class LearnerBuilder {
    final Supplier<? extends Module> model;
    int tokens = -1;
    int features = -1;
    int classes = -1;
    int B = 1;
    int T = 1;
    int gradAccum = 1;
    OptimizerSpec optimizer = AdamW.of(0f);
    boolean offloadOptimizer;
    boolean offloadOverlap = true;
    LrSchedule schedule = LrSchedule.constant(1e-3f);
    float gradClip;
    DType precision = DType.FP32;
    float initialLossScale = io.accel4j.train.precision.Precision.DEFAULT_LOSS_SCALE;
    int lossScaleWindow = io.accel4j.train.precision.Precision.DEFAULT_LOSS_SCALE_WINDOW;
    DType gradients = DType.FP32;
    DType parameters = DType.FP32;
    DType storage = DType.FP32;
    DelayedScaling fp8;
    Recompute recompute = Recompute.NONE;
    ParameterTable.Order order = ParameterTable.Order.declaration();
    int ranks = 1;
    int tensorParallel = 1;
    java.time.Duration collectiveTimeout = io.accel4j.collectives.Communicator.DEFAULT_TIMEOUT;
    int zero;
    long bucketBytes;
    int threads = Math.max(1, Runtime.getRuntime().availableProcessors());
    long seed = 1337;
    DataSource.Factory data;
    Path out;
    java.util.function.IntFunction<Ops> backend;
    io.accel4j.collectives.Communicator comm;
    java.io.PrintWriter progress;
    PipelineLearning.Layout pipeline;
    AsyncWorkers.Servers async;

    LearnerBuilder(Supplier<? extends Module> model) {
        this.model = Objects.requireNonNull(model, "model");
    }

    /** Inputs are token ids in [0, V). */
    public LearnerBuilder tokens(int V) {
        this.tokens = V;
        this.features = -1;
        return this;
    }

    /** Inputs are D fp32 features per position. */
    public LearnerBuilder features(int D) {
        this.features = D;
        this.tokens = -1;
        return this;
    }

    /** The loss is a softmax cross-entropy over the first {@code n} outputs. */
    public LearnerBuilder classes(int n) {
        this.classes = n;
        return this;
    }

    /** B sequences of T positions per rank and micro-batch (T = 1 for independent examples). */
    public LearnerBuilder batch(int B, int T) {
        this.B = B;
        this.T = T;
        return this;
    }

    /** Micro-batches per optimizer step. */
    public LearnerBuilder gradAccum(int K) {
        if (K < 1) {
            throw new IllegalArgumentException("gradAccum must be >= 1, got " + K);
        }
        this.gradAccum = K;
        return this;
    }

    public LearnerBuilder optimizer(OptimizerSpec spec) {
        this.optimizer = Objects.requireNonNull(spec, "optimizer");
        return this;
    }

    /**
     * Runs the optimizer on the host ({@link io.accel4j.optim.Offload}): master weights and its state in host
     * memory, updated by the CPU kernels, the gradients copied down and the parameters up each step; the backend's
     * memory keeps only the parameters, gradients and activations. Not with pipeline stages.
     */
    public LearnerBuilder offloadOptimizer() {
        return offloadOptimizer(true);
    }

    /**
     * {@link #offloadOptimizer()}, its step pipelined over chunks ({@code overlap}: the default) or three serial moves
     * (the gradients down, the update, the parameters up): the same bits either way ({@link io.accel4j.optim.Offload}).
     */
    public LearnerBuilder offloadOptimizer(boolean overlap) {
        this.offloadOptimizer = true;
        this.offloadOverlap = overlap;
        return this;
    }

    public LearnerBuilder schedule(LrSchedule schedule) {
        this.schedule = Objects.requireNonNull(schedule, "schedule");
        return this;
    }

    /** Clips the global gradient norm to {@code maxNorm} (0: no clipping). */
    public LearnerBuilder gradClip(float maxNorm) {
        if (!(maxNorm >= 0)) {
            throw new IllegalArgumentException("gradClip must be >= 0, got " + maxNorm);
        }
        this.gradClip = maxNorm;
        return this;
    }

    /** The matmuls' operand precision: FP32, BF16, or FP16 (with dynamic loss scaling). */
    public LearnerBuilder precision(DType operands) {
        this.precision = Objects.requireNonNull(operands, "precision");
        return this;
    }

    /**
     * fp16's loss scaling ({@code precision(FP16)}): the initial scale (a power of two in [1, 2^64]) and the clean
     * steps after which it doubles; default 2^16 and 1000, the CLI's {@code --loss-scale}/{@code --loss-scale-window}.
     * Ignored by the other precisions.
     */
    public LearnerBuilder lossScaling(float initialScale, int window) {
        new io.accel4j.train.precision.Precision(DType.FP16, initialScale, window); // checks both
        this.initialLossScale = initialScale;
        this.lossScaleWindow = window;
        return this;
    }

    /**
     * How the gradient buffer is stored ({@link io.accel4j.nn.NetworkSpec#gradientStorage}): FP32 (default), BF16, or
     * FP16 (with {@code precision(FP16)}'s loss scaling only). 16-bit storage keeps the gradients of the model's
     * {@link io.accel4j.nn.UnitScope}s that open and close in one backward (wrap the blocks, e.g.
     * {@link io.accel4j.nn.UnitScope#perChild}) in 16 bits; with one rank, DDP or {@code zero(1)}, offloaded or
     * not, and AdamW only, yet.
     */
    public LearnerBuilder gradientStorage(DType storage) {
        this.gradients = Objects.requireNonNull(storage, "storage");
        return this;
    }

    /**
     * How the working weights are stored ({@link io.accel4j.nn.NetworkSpec#parameterStorage}): FP32 (default), or BF16
     * — the parameters of the model's {@link io.accel4j.nn.UnitScope}s that open and close in one backward in a bf16
     * store (GPT-2's blocks and final LayerNorm: {@code Gpt2Blocks.body}), the rest fp32 copies of bf16 values — with
     * the fp32 master weights in the optimizer, which writes the store with stochastic rounding
     * ({@link io.accel4j.optim.Bf16StoreAdamW}; with {@link #offloadOptimizer()} master, m and v in host memory,
     * {@link io.accel4j.optim.OffloadedBf16AdamW}). The CLI trainer's {@code --bf16-params}, bit for bit
     * ({@link Bf16ParamSync}). The optimizer must be AdamW: an {@link AdamW.Spec}, whose rounding seed is then
     * {@link #seed}'s ({@code seed ^ 0x62663136}, as the trainer mixes its {@code --seed}), or a
     * {@link io.accel4j.optim.Bf16AdamW.Spec} with a seed of its own. One rank or DDP (bucketed or not), gradients
     * fp32 or 16-bit; not yet with ZeRO, pipeline or tensor parallelism. The learner's parameters
     * ({@link Learner#gatherParameters}, checkpoints) are then the fp32 master; its optimizer state is m and v.
     */
    public LearnerBuilder parameterStorage(DType storage) {
        this.parameters = Objects.requireNonNull(storage, "storage");
        return this;
    }

    /**
     * How the blocks store the activations they save for backward: FP32 (default), or BF16/FP16 — a 16-bit store per
     * block and one fp32 working set ({@link io.accel4j.nn.NetworkSpec#activationStorage}), for one rank, tensor
     * ranks and pipeline stages alike (a stage's micro-batches in flight share its working set).
     */
    public LearnerBuilder activationStorage(DType storage) {
        this.storage = Objects.requireNonNull(storage, "storage");
        return this;
    }

    /**
     * FP8 operands for every linear layer under {@code recipe}'s delayed scaling (heads and attention keep the
     * {@link #precision}); null: none.
     */
    public LearnerBuilder fp8(DelayedScaling recipe) {
        this.fp8 = recipe;
        return this;
    }

    public LearnerBuilder recompute(Recompute recompute) {
        this.recompute = Objects.requireNonNull(recompute, "recompute");
        return this;
    }

    public LearnerBuilder parameterOrder(ParameterTable.Order order) {
        this.order = Objects.requireNonNull(order, "order");
        return this;
    }

    /** Data-parallel ranks in this process (each a thread with its own replica; DDP). */
    public LearnerBuilder ranks(int n) {
        if (n < 1) {
            throw new IllegalArgumentException("ranks must be >= 1, got " + n);
        }
        this.ranks = n;
        return this;
    }

    /**
     * ZeRO stage 1 (optimizer state sharded), 2 (gradients too) or 3 (parameters too: the model must be a
     * {@code Sequential}, whose children are gathered one at a time) over the ranks; 0 (default): DDP. A model that
     * brackets units of its own ({@link io.accel4j.nn.UnitScope}s: GPT-2's {@code Gpt2Blocks.body}) is sharded over
     * those at stages 2 and 3, each unit reduce-scattered as its backward ends, as the CLI trainer's ZeRO-2/3 (its
     * bits; the tied head shares the embeddings' unit); at stage 2 other models reduce-scatter the whole gradient
     * buffer after backward ({@link ZeroSharding}), as does an offloaded optimizer.
     */
    public LearnerBuilder zero(int stage) {
        if (stage < 0 || stage > 3) {
            throw new IllegalArgumentException("ZeRO stage must be 0, 1, 2 or 3, got " + stage);
        }
        this.zero = stage;
        return this;
    }

    /**
     * DDP and ZeRO-1 average the gradients in buckets of at least {@code mb} MiB, each all-reduced as soon as the
     * last micro-batch's backward has produced it, while the rest of backward runs ({@link BucketedDataParallel}; the
     * units are the children of the model's top-level {@code Sequential}, whose parameters must be used inside
     * their child); 0 (default): one all-reduce after backward. Nothing changes for one rank.
     */
    public LearnerBuilder bucketMb(int mb) {
        if (mb < 0) {
            throw new IllegalArgumentException("bucketMb must be >= 0, got " + mb);
        }
        return bucketBytes((long) mb << 20);
    }

    /** {@link #bucketMb} in bytes (a bucket of 1 byte: every child on its own). */
    public LearnerBuilder bucketBytes(long bytes) {
        if (bytes < 0) {
            throw new IllegalArgumentException("bucketBytes must be >= 0, got " + bytes);
        }
        this.bucketBytes = bytes;
        return this;
    }

    /** Threads in all (shared among the ranks). */
    public LearnerBuilder threads(int n) {
        if (n < 1) {
            throw new IllegalArgumentException("threads must be >= 1, got " + n);
        }
        this.threads = n;
        return this;
    }

    /** The initialisation's seed (every rank starts from the same parameters). */
    public LearnerBuilder seed(long seed) {
        this.seed = seed;
        return this;
    }

    /**
     * The backend of each rank, {@code rank -> ops} (default: the Vector API kernels, {@code threads / ranks}
     * threads a rank); e.g. {@code r -> new GpuOps(Cuda.open(r))} for a GPU per rank, whose ops and context the
     * caller closes after the learner. Several ranks need a backend whose memory the in-process ring can take
     * (host memory); otherwise {@link #build} refuses, saying so.
     */
    public LearnerBuilder backend(java.util.function.IntFunction<Ops> opsOfRank) {
        this.backend = Objects.requireNonNull(opsOfRank, "opsOfRank");
        return this;
    }

    /**
     * This process is one rank of {@code comm} (Open MPI's world, NCCL over a rendezvous, any communicator): the
     * learner holds that rank only, every process runs the same program, and rank 0 writes the metrics, the plot
     * and the checkpoints. Replaces {@link #ranks} (in-process ranks); the communicator stays the caller's.
     */
    public LearnerBuilder communicator(io.accel4j.collectives.Communicator comm) {
        this.comm = Objects.requireNonNull(comm, "comm");
        return this;
    }

    /**
     * Pipeline parallelism: the model (a {@link io.accel4j.nn.Sequential}, cut between its children) split into
     * {@code stages} contiguous stages balanced by parameters, one rank each (in this process, or the
     * {@link #communicator}'s ranks), each optimizer step a global batch of {@code micro} micro-batches of
     * {@link #batch B × T} run in {@code schedule}'s order.
     *
     * @throws IllegalArgumentException when the schedule cannot run these numbers (1F1B needs micro >= stages)
     */
    public LearnerBuilder pipeline(int stages, int micro, io.accel4j.pipeline.Schedule schedule) {
        return pipeline(null, stages, micro, schedule);
    }

    /**
     * {@link #pipeline(int, int, io.accel4j.pipeline.Schedule)} over stages {@code model} describes (e.g.
     * {@link io.accel4j.pipeline.Gpt2Stages}, whose head is tied to the embedding across stages) instead of the
     * supplier's children; the supplier then makes the one-rank model whose parameters the stages' together are.
     */
    public LearnerBuilder pipeline(io.accel4j.pipeline.StagedModel model, int stages, int micro,
                                   io.accel4j.pipeline.Schedule schedule) {
        this.pipeline = new PipelineLearning.Layout(stages, micro, schedule, model);
        return this;
    }

    /**
     * Asynchronous data parallelism (stale synchronous parallel): every rank of this learner — {@link #ranks} in
     * this process, or this process's rank of the {@link #communicator} (then a group of the workers only, on which
     * no collective is called) — is worker {@code rank} of {@code servers}, which hold the parameters of record and
     * AdamW's state in shards. After each step's backward a worker pushes its own gradients (times the clipping's
     * scale) with the schedule's learning rate to every shard and pulls the parameters once the staleness bound
     * allows; nothing is averaged over the workers: the loss, norm, overflow and FP8 amaxes each rank reports are
     * its own (rank 0's the run's). {@link Learner#strategyJson} gives the staleness of each of rank 0's steps;
     * checkpoints ({@link Learner#save}, {@link Learner#gatherState}) gather the servers' shards on rank 0 and
     * resumes give them back, the clocks at the checkpoint's step; {@link Learner#network} and
     * {@link Learner#gatherParameters} give rank 0's own copy (its last pull). The same bits as the old trainer's
     * async workers over the same servers ({@code TrainCommandGoldenTest}'s and {@code LearnerAsyncTest}'s goldens).
     *
     * <p>The servers run GPT-2's AdamW of {@code cfg} (betas, ε, weight decay, decay on the matrices of
     * {@code layout} or on all): in-process servers start with it when the first worker steps; servers of other
     * processes ({@link io.accel4j.train.parallel.ParameterServers#remote}) were given theirs. The {@link #optimizer} must be the same AdamW
     * ({@code new AdamW.Spec(β1, β2, ε, wd, !decayMatricesOnly || wd == 0)}), the model {@code layout}'s
     * parameters in llm.c's order. Not with ZeRO, tensor or pipeline stages, an offloaded optimizer, buckets,
     * 16-bit gradients or fp16's loss scaling (a skipped step would push nothing). The caller closes
     * {@code servers} after the learner.
     */
    public LearnerBuilder asyncWorkers(io.accel4j.train.parallel.ParameterServers servers,
                                       io.accel4j.train.model.ParameterLayout layout,
                                       io.accel4j.train.TrainConfig cfg) {
        this.async = new AsyncWorkers.Servers(servers, layout, cfg);
        return this;
    }

    /**
     * Splits the model's tensor-parallel blocks ({@link io.accel4j.nn.TransformerBlock#parallel},
     * {@link io.accel4j.nn.VocabParallelEmbedding}, {@link io.accel4j.nn.VocabParallelHead}, …) over {@code T} ranks:
     * the ranks ({@link #ranks} or the communicator's) are then D·T, laid out as Megatron-LM does (tensor ranks
     * innermost), each group of T sharing one slice of every batch, and data parallelism (and ZeRO-1) runs over the D
     * replicas. Blocks that are not tensor-parallel stay whole on every rank.
     */
    public LearnerBuilder tensorParallel(int T) {
        if (T < 1) {
            throw new IllegalArgumentException("tensorParallel must be >= 1, got " + T);
        }
        this.tensorParallel = T;
        return this;
    }

    /**
     * How long a collective of the in-process ranks (and of their groups) waits for the others before failing, naming
     * the group and the rank (default {@link io.accel4j.collectives.Communicator#DEFAULT_TIMEOUT}); a communicator
     * given with {@link #communicator} keeps its own.
     */
    public LearnerBuilder collectiveTimeout(java.time.Duration timeout) {
        if (timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("collectiveTimeout must be positive, got " + timeout);
        }
        this.collectiveTimeout = timeout;
        return this;
    }

    public LearnerBuilder data(DataSource.Factory data) {
        this.data = Objects.requireNonNull(data, "data");
        return this;
    }

    /**
     * Prints {@code accel4j train}'s progress lines to {@code w} (about 25 a fit, each with the step, the loss and
     * tokens/s since the line before, the learning rate and the time left); rank 0's only.
     */
    public LearnerBuilder progress(java.io.PrintWriter w) {
        this.progress = w;
        return this;
    }

    /** Writes {@code metrics.jsonl} (a line per step) and, after {@link #fit}, {@code loss.png} into {@code dir}. */
    public LearnerBuilder out(Path dir) {
        this.out = dir;
        return this;
    }

    /**
     * Builds every rank's network and optimizer (parameters initialised from the seed).
     *
     * @throws io.accel4j.nn.ShapeException when the model's blocks do not fit together, before any allocation
     */
    public Learner build() {
        LearnerChecks.check(this);
        return new Learner(this);
    }
}
