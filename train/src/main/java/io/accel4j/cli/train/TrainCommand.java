package io.accel4j.cli.train;

import io.accel4j.cli.CliException;
import io.accel4j.cli.IoMessages;
import io.accel4j.cli.Threads;
import io.accel4j.collectives.Communicator;
import io.accel4j.cuda.Cuda;
import io.accel4j.train.precision.Precision;
import io.accel4j.train.StepMetrics;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.checkpoint.CheckpointFiles;
import io.accel4j.train.checkpoint.LlmcCheckpoint;
import io.accel4j.train.data.DefaultDataset;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.model.GptConfig;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/**
 * {@code accel4j train}: trains a GPT-2 on the CPU, or with {@code --device cuda} on a GPU ({@link Backend}). With no
 * arguments, the README's main job: the tiny model on the generated {@link DefaultDataset} (two-digit additions),
 * about two minutes on two cores, then a summary, sample completions of held-out problems and the accuracy. Leaves in
 * the run directory the data it generated, {@code metrics.jsonl}, {@code loss.png} and the checkpoint
 * (llm.c's model file and the state beside it: {@link io.accel4j.train.checkpoint.LearnerLlmcCheckpoints}).
 */
@Command(name = "train", sortOptions = false,
        description = {"Train a GPT-2 on the CPU or a GPU (llm.c's model and file formats).",
            "With no arguments: a tiny model learns two-digit addition from a generated dataset in about two minutes."})
public final class TrainCommand implements Callable<Integer> {

    /** Generated train tokens: ~113k addition lines; the default run trains on three times as many tokens. */
    static final int DEFAULT_TRAIN_TOKENS = 1 << 20;
    /** Generated validation tokens. */
    static final int DEFAULT_VAL_TOKENS = 1 << 16;
    @Spec
    CommandSpec spec;

    @Option(names = "--model", paramLabel = "FILE|PRESET", defaultValue = "tiny",
            description = "An llm.c model file to start from, or a preset trained from scratch: tiny, bench, gpt2 "
                    + "(also tiny-bpe, gpt2-medium, gpt2-large, gpt2-xl) (default: ${DEFAULT-VALUE}).")
    String model;
    @Option(names = "--train-data", paramLabel = "FILE|GLOB|LIST",
            description = "Train tokens (llm.c format, e.g. from 'accel4j prepare'): a file, a glob such as "
                    + "'data/train_*.bin' or a comma-separated list of shards; default: the generated dataset.")
    Path trainData;
    @Mixin
    DataOptions dataOptions;
    @Option(names = "--val-data", paramLabel = "FILE",
            description = "Validation tokens; default: the generated dataset's held-out split (none with "
                    + "--train-data).")
    Path valData;
    @Option(names = "--batch", paramLabel = "B", defaultValue = "16", description = "Sequences per micro-batch "
            + "(default: ${DEFAULT-VALUE}).")
    int batch;
    @Option(names = "--seq", paramLabel = "T", defaultValue = "64", description = "Tokens per sequence, at most the "
            + "model's max_seq_len (default: ${DEFAULT-VALUE}).")
    int seq;
    @Option(names = "--steps", paramLabel = "N", defaultValue = "4000", description = "Optimizer steps "
            + "(default: ${DEFAULT-VALUE}).")
    int steps;
    @Option(names = "--lr", paramLabel = "X", defaultValue = "5e-3", description = "Peak learning rate "
            + "(default: ${DEFAULT-VALUE}).")
    float lr;
    @Option(names = "--beta1", paramLabel = "X", defaultValue = "0.9", description = "AdamW's beta1 "
            + "(default: ${DEFAULT-VALUE}).")
    float beta1;
    @Option(names = "--beta2", paramLabel = "X", defaultValue = "0.99", description = "AdamW's beta2 "
            + "(default: ${DEFAULT-VALUE}; llm.c uses 0.999).")
    float beta2;
    @Option(names = "--eps", paramLabel = "X", defaultValue = "1e-8", description = "AdamW's epsilon "
            + "(default: ${DEFAULT-VALUE}).")
    float eps;
    @Option(names = "--weight-decay", paramLabel = "X", defaultValue = "0", description = "AdamW weight decay "
            + "(default: ${DEFAULT-VALUE}).")
    float weightDecay;
    @Option(names = "--no-decay-set", description = "Spare biases and LayerNorm parameters from weight decay (decay "
            + "only the 2-D matrices, as llm.c's train_gpt2.cu); default: decay everything, as train_gpt2.c.")
    boolean noDecaySet;
    @Option(names = "--schedule", paramLabel = "constant|cosine", defaultValue = "cosine",
            converter = TrainConverters.Schedules.class, description = "Learning-rate schedule after the warmup (default: "
            + "${DEFAULT-VALUE}).")
    TrainConfig.Schedule schedule;
    @Option(names = "--warmup", paramLabel = "N", defaultValue = "100", description = "Linear warmup steps "
            + "(default: ${DEFAULT-VALUE}).")
    int warmup;
    @Option(names = "--min-lr-fraction", paramLabel = "F", defaultValue = "0.1", description = "Where the cosine "
            + "ends, as a fraction of --lr (default: ${DEFAULT-VALUE}).")
    float minLrFraction;
    @Option(names = "--grad-clip", paramLabel = "X", defaultValue = "1.0", description = "Clip the global gradient "
            + "norm to X; 0: off (default: ${DEFAULT-VALUE}).")
    float gradClip;
    @Option(names = "--grad-accum", paramLabel = "K", defaultValue = "1", description = "Micro-batches per step "
            + "(default: ${DEFAULT-VALUE}).")
    int gradAccum;
    @Option(names = "--data-order", paramLabel = "sequential|shuffled", defaultValue = "shuffled",
            converter = TrainConverters.Orders.class, description = "Train batch order (default: ${DEFAULT-VALUE}).")
    SampleOrder.Mode dataOrder;
    @Option(names = "--seed", paramLabel = "N", defaultValue = "42", description = "Seed of the initialisation, "
            + "the shuffle and the generated dataset (default: ${DEFAULT-VALUE}).")
    long seed;
    @Option(names = "--val-every", paramLabel = "N", defaultValue = "250", description = "Validate every N steps "
            + "and at the end; 0: only at the end (default: ${DEFAULT-VALUE}).")
    int valEvery;
    @Option(names = "--val-batches", paramLabel = "N", defaultValue = "8", description = "Validation batches "
            + "(default: ${DEFAULT-VALUE}).")
    int valBatches;
    @Mixin
    PrecisionOptions precision;
    @Option(names = "--device", paramLabel = "cpu|cuda", defaultValue = "cpu", converter = Backend.Devices.class,
            description = "Where the kernels run: cpu (Vector API), or cuda (the GPU kernels in the GPU's memory, "
                    + "any --precision: device 0 for one rank; with --ranks N GPUs 0..N-1, under mpirun the local "
                    + "rank's GPU, "
                    + "the gradients averaged with NCCL; an error when fewer GPUs are usable) "
                    + "(default: ${DEFAULT-VALUE}).")
    Backend.Device device;
    @Option(names = "--threads", paramLabel = "N", description = "Kernel threads, at most the processors available "
            + "(default: all of them).")
    Integer threads;
    @Option(names = "--ranks", paramLabel = "N", defaultValue = "1", description = "Data-parallel ranks in this "
            + "process, each with its own model and --batch sequences per micro-batch, gradients averaged every "
            + "step; the threads are shared among them, at least one each (default: ${DEFAULT-VALUE}). Under "
            + "'mpirun -np N' each process is one rank instead (Open MPI): omit --ranks or pass N; as root add "
            + "--allow-run-as-root to mpirun.")
    int ranks;
    @Option(names = "--bucket-mb", paramLabel = "X", defaultValue = "25", description = "With --ranks: average the "
            + "gradients in buckets of X MiB, each started as soon as backward has produced it; 0: one all-reduce "
            + "after backward (default: ${DEFAULT-VALUE}).")
    double bucketMb;
    @Option(names = "--collective-timeout", paramLabel = "SECONDS", defaultValue = "300", description = "With several "
            + "ranks: how long a collective waits for the others before failing with an error that names it, the "
            + "rank and the time waited (a rank that died or hangs) (default: ${DEFAULT-VALUE}).")
    double collectiveTimeout;
    @Mixin
    MemoryOptions memory;
    @Mixin
    PipelineOptions pipeline;
    @Mixin
    AsyncOptions async;
    @Mixin
    TensorParallelOptions tensor;
    @Mixin
    OffloadOptions offload;
    @Mixin
    Bf16ParamsOptions bf16Params;
    @Option(names = "--zero", paramLabel = "0|1|2|3", defaultValue = "0", description = "With --ranks: ZeRO "
            + "sharding of the model states over the ranks: 1 AdamW's moments, 2 also the averaged gradients "
            + "(reduce-scattered after backward, not bucketed), 3 also the parameters (gathered whole after each "
            + "update); 0: plain data parallelism. The results are the same (default: ${DEFAULT-VALUE}).")
    int zero;
    @Option(names = "--profile", description = "After the run, print a per-op table of every kernel call rank 0 "
            + "made (validation included): calls, ms, %% of the run, GFLOP/s or GB/s.")
    boolean profile;
    @Option(names = "--metrics-out", paramLabel = "FILE", description = "One JSON object per step "
            + "(default: RUN_DIR/metrics.jsonl).")
    Path metricsOut;
    @Option(names = "--out", paramLabel = "DIR", description = "The run directory (default: runs/<time>, or the "
            + "--resume directory).")
    Path out;
    @Option(names = "--save-every", paramLabel = "N", defaultValue = "0", description = "Checkpoint every N steps "
            + "as well as at the end; 0: only at the end (default: ${DEFAULT-VALUE}).")
    int saveEvery;
    @Option(names = "--keep-checkpoints", paramLabel = "N", defaultValue = "3", description = "Checkpoints kept in "
            + "the run directory, the newest N; older ones are removed as new ones are written "
            + "(default: ${DEFAULT-VALUE}).")
    int keepCheckpoints;
    @Option(names = "--save-every-keep", paramLabel = "N", defaultValue = "0", description = "Also keep every "
            + "checkpoint whose step is a multiple of N; 0: none (default: ${DEFAULT-VALUE}).")
    int saveEveryKeep;
    @Option(names = "--resume", paramLabel = "DIR", description = "Continue the run checkpointed in DIR, with the "
            + "flags it was started with (saved in DIR/" + RunConfig.FILE + "). Flags given again must agree, except "
            + "--steps, --val-every, --val-batches, --val-data, --save-every, --keep-checkpoints, --save-every-keep, "
            + "--threads, --device, --recompute, --bucket-mb, --zero, --collective-timeout, --metrics-out, --samples and "
            + "--eval-problems, which may change.")
    Path resume;
    @Option(names = "--overwrite", description = "Start a new run in an --out directory that holds another run's "
            + "checkpoint (removed) or metrics (replaced); without it that is an error.")
    boolean overwrite;
    @Option(names = "--samples", paramLabel = "N", defaultValue = "5", description = "Sample completions to show "
            + "at the end, on the generated dataset (default: ${DEFAULT-VALUE}).")
    int samples;
    @Option(names = "--eval-problems", paramLabel = "N", defaultValue = "200", description = "Held-out problems "
            + "the final accuracy is measured on, on the generated dataset (default: ${DEFAULT-VALUE}).")
    int evalProblems;

    /** The run directory of the lead rank, null on the others. */
    RunDirectory runDirectory;
    /** What the last {@link #call} produced (for tests). */
    Report.Outcome outcome;
    /** The environment {@link Launch} reads (tests replace it to act as an mpirun rank). */
    java.util.Map<String, String> env = System.getenv();

    @Override
    public Integer call() {
        if (overwrite && resume != null) {
            throw usage("--overwrite starts a new run: it does not go with --resume");
        }
        Map<String, String> restored = Map.of();
        if (resume != null && Files.isDirectory(resume)) {
            try {
                restored = RunConfig.restore(spec, resume, this::usage);
            } catch (IOException e) {
                throw new CliException("cannot resume " + resume + ": " + message(e), e);
            }
        }
        if (keepCheckpoints < 1) {
            throw usage("--keep-checkpoints must be >= 1 (the latest checkpoint is always kept), got "
                    + keepCheckpoints);
        }
        if (saveEveryKeep < 0) {
            throw usage("--save-every-keep must be >= 0 (0: none), got " + saveEveryKeep);
        }
        TrainConfig asked = config();
        memory.check(this::usage);
        Launch launch = launch();
        int worldRanks = launch.perProcess() ? launch.worldSize() : ranks;
        if (asked.zeroStage() > 0 && worldRanks == 1) {
            throw usage("--zero " + asked.zeroStage() + " shards the model states over data-parallel ranks: it needs "
                    + "--ranks 2 or more, or mpirun -np 2 or more");
        }
        if (device == Backend.Device.CUDA) {
            CudaChecks.check(launch, memory.findBatchSize, profile, this::usage);
        }
        async.check(worldRanks, asked, device == Backend.Device.CUDA, this::usage);
        offload.check(asked, async.async(), pipeline.requested(), tensor.active(), memory.findBatchSize, this::usage);
        memory.offloadOptimizer = offload.enabled;
        dataOptions.check(trainData, this::usage);
        if (!DataOptions.isShardList(trainData)) {
            checkTokenFile("--train-data", trainData);
        }
        checkTokenFile("--val-data", valData);
        Path modelFile = modelFile();
        GptConfig modelConfig = modelConfig(modelFile);
        if (tensor.active() && async.async()) {
            throw usage("--tp does not go with --sync async yet: choose one");
        }
        pipeline.check(modelConfig, asked.gradAccum(), this::usage);
        boolean bucketsAsked = bucketMb > 0 && spec.commandLine().getParseResult().hasMatchedOption("--bucket-mb");
        // bf16 working weights' offloaded optimizer reads 16-bit gradients in chunks: only fp32 weights' refuse them
        PrecisionOptions.checkGradients(asked, async.async(), pipeline.requested(), tensor.active(),
                offload.enabled && !bf16Params.enabled, bucketsAsked, this::usage);
        bf16Params.check(asked, asked.precision().label(), async.async(), pipeline.requested(), tensor.active(),
                bucketsAsked, this::usage);
        memory.bf16Params = bf16Params.enabled;
        if (pipeline.requested()) { // a strategy of its own, beside the trainer: see PipelineRun
            PipelineRun pp = new PipelineRun(this, pipeline, restored, this::usage);
            pp.checkSupported(asked, modelConfig, launch);
            int nThreads = launch.threads(Threads.cap(threads, spec.commandLine().getErr()));
            pp.run(asked, modelConfig, modelFile, launch, nThreads, timeout(), spec.commandLine().getOut());
            return 0;
        }
        tensor.check(modelConfig, worldRanks, device == Backend.Device.CUDA, asked.zeroStage(), asked.precision(),
                this::usage);
        if (tensor.active() && launch.perProcess() && launch.rendezvous() != null) {
            throw usage("--tp " + tensor.tp() + " splits the ranks into tensor groups, which the launcher's TCP "
                    + "communicator cannot do yet: use --ranks or mpirun");
        }
        if (tensor.active() && (memory.findBatchSize || DataOptions.isShardList(trainData))) {
            throw usage("--tp does not go with " + (memory.findBatchSize ? "--find-batch-size"
                    : "--train-data with several shards") + " yet");
        }
        Path runDir = out != null ? out : resume;
        if (runDir != null && launch.lead()) {
            RunDirectory.checkNotAnotherRun(runDir, resume != null && runDir.equals(resume), overwrite,
                    metricsFile(runDir), metricsOut != null ? "--metrics-out " + metricsOut : null, this::usage);
        }
        if (device == Backend.Device.CUDA) {
            CudaChecks.checkFp8(modelConfig, asked, this::usage);
        }
        if (device == Backend.Device.CUDA) {
            Backend.check(device, launch.gpusNeeded(ranks), Cuda::probe, io.accel4j.cuda.CudaLibraries::nccl);
        }
        PrintWriter w = spec.commandLine().getOut();
        PrintWriter leadOut = launch.lead() ? w : new PrintWriter(Writer.nullWriter());
        TrainConfig cfg = memory.choose(asked, modelConfig, worldRanks, leadOut, this::usage);
        if (bf16Params.enabled && offload.enabled) {
            bf16Params.print(cfg, modelConfig, memory.recompute, leadOut);
        } else {
            offload.print(cfg, modelConfig, memory.recompute, leadOut);
        }
        if (tensor.active()) {
            TensorParallelPlan.of(modelConfig, cfg, tensor.tp(), worldRanks).print(leadOut);
        } else if (device != Backend.Device.CUDA) {
            memory.checkHost(cfg, modelConfig, modelFile != null, launch.gpusNeeded(ranks), worldRanks);
        } else if (Cuda.probe() instanceof io.accel4j.cuda.CudaProbe.Ready gpu) {
            MemoryOptions.checkGpu(memory.planParts(cfg, modelConfig, false, 1, worldRanks), cfg, gpu);
        }
        int nThreads = launch.threads(Threads.cap(threads, spec.commandLine().getErr()));
        if (launch.lead() && !tensor.active()) {
            memory.trial(cfg, modelConfig, worldRanks, launch.perProcess() ? nThreads : Math.max(1, nThreads / ranks),
                    w);
        }
        Communicator world = launch.perProcess()
                ? launch.connect(timeout(), Launch.configHash(spec.commandLine().getParseResult().originalArgs()))
                : null;
        String now = LocalDateTime.now().format(DateTimeFormatter.ofPattern("yyyyMMdd-HHmmss"));
        Path dir = runDir != null ? runDir : Path.of("runs", world == null ? now : Launch.agree(world, now));
        RunDirectory run = launch.lead() ? RunDirectory.open(dir, overwrite, w) : null;
        runDirectory = run;
        boolean succeeded = false;
        try {
            if (run != null) {
                try {
                    RunConfig.of(spec, restored).with("--batch", cfg.batch()).with("--grad-accum", cfg.gradAccum())
                            .write(dir);
                    if (resume == null) {
                        run.generated(dir.resolve(RunConfig.FILE)); // a new run that fails leaves no flags behind
                    }
                } catch (IOException e) {
                    throw new CliException("cannot save the run's flags in " + dir + ": " + message(e), e);
                }
            }
            new RankRuns(this).train(dir, run, world, launch, nThreads, cfg, modelFile, modelConfig, w);
            succeeded = true;
        } finally {
            if (!succeeded && run != null) {
                run.failed();
            }
        }
        return 0;
    }

    /** The metrics file of a run in {@code dir}: --metrics-out, or {@code dir/metrics.jsonl}. */
    Path metricsFile(Path dir) {
        return metricsOut != null ? metricsOut : dir.resolve("metrics.jsonl");
    }

    /** In-process ranks, or one rank per process under mpirun ({@link Launch}); a contradiction is a usage error. */
    private Launch launch() {
        try {
            boolean ranksGiven = spec.commandLine().getParseResult().hasMatchedOption("--ranks");
            return Launch.detect(env, ranks, ranksGiven);
        } catch (IllegalArgumentException e) {
            throw usage(e.getMessage());
        }
    }

    /** --collective-timeout as a duration (checked in {@link #config}). */
    java.time.Duration timeout() {
        return java.time.Duration.ofMillis(Math.round(collectiveTimeout * 1000));
    }

    private TrainConfig config() {
        if (!(collectiveTimeout >= 0.001) || collectiveTimeout > 1e7) {
            throw usage("--collective-timeout must be between 0.001 and 1e7 seconds, got " + collectiveTimeout);
        }
        if (samples < 0 || evalProblems < 0) {
            throw usage("--samples and --eval-problems must be >= 0, got " + samples + " and " + evalProblems);
        }
        if (threads != null && threads < 1) {
            throw usage("--threads must be >= 1, got " + threads);
        }
        if (ranks < 1) {
            throw usage("--ranks must be >= 1, got " + ranks);
        }
        if (seed < 0 || seed > 0xFFFF_FFFFL) {
            throw usage("--seed must be in [0, 4294967295] (the Mersenne Twister's seed), got " + seed);
        }
        if (!(bucketMb >= 0) || Double.isInfinite(bucketMb)) {
            throw usage("--bucket-mb must be finite and >= 0, got " + bucketMb);
        }
        if (zero < 0 || zero > 3) {
            throw usage("--zero must be 0 (plain data parallelism), 1, 2 or 3, got " + zero);
        }
        Precision p = precision.precision(this::usage);
        try {
            return TrainConfig.builder().precision(p).batch(batch).seq(seq).steps(steps).gradAccum(gradAccum).lr(lr)
                    .betas(beta1, beta2).eps(eps).schedule(schedule).warmup(warmup).minLrFraction(minLrFraction)
                    .weightDecay(weightDecay).decayMatricesOnly(noDecaySet).gradClip(gradClip).valEvery(valEvery)
                    .valBatches(valBatches).saveEvery(saveEvery).dataOrder(dataOrder).seed(seed)
                    .bucketBytes((long) Math.ceil(bucketMb * (1 << 20))).zeroStage(zero).build();
        } catch (IllegalArgumentException e) {
            throw usage(ConfigFlags.flagNames(e.getMessage()));
        }
    }

    ParameterException usage(String msg) {
        return new ParameterException(spec.commandLine(), msg);
    }

    static TokenFile open(Path p, String what) throws IOException {
        try {
            return TokenFile.open(p);
        } catch (NoSuchFileException e) {
            throw new CliException("the " + what + " token file " + p + " does not exist", e);
        }
    }

    /** The model file to start from: the checkpoint's when resuming, --model's; null for a preset. */
    private Path modelFile() {
        if (resume != null) {
            if (!Files.isDirectory(resume)) {
                throw usage("--resume " + resume + (Files.exists(resume) ? " is not a directory" : " does not exist")
                        + ": give the run directory of the run to continue");
            }
            if (tensor.active() && Files.isDirectory(resume.resolve("tp-checkpoint"))) {
                return resume.resolve("model.bin"); // a --tp run's whole model, beside its checkpoint
            }
            try {
                return CheckpointFiles.latest(resume).model();
            } catch (NoSuchFileException e) {
                throw new CliException("no checkpoint to resume in " + resume + " (" + CheckpointFiles.POINTER
                        + " is missing)", e);
            } catch (IOException e) {
                throw new CliException("cannot resume " + resume + ": " + message(e), e);
            }
        }
        if (GptConfig.presetNames().contains(model)) {
            return null;
        }
        Path file = Path.of(model);
        if (!Files.exists(file)) {
            throw usage("--model " + model + " is neither a preset (" + String.join(", ", GptConfig.presetNames())
                    + ") nor an existing file");
        }
        if (Files.isDirectory(file)) {
            throw usage("--model " + model + " is a directory, not an llm.c model file (to continue a run directory, "
                    + "use --resume)");
        }
        return file;
    }

    /** A token file given by {@code flag}: a usage error unless it is an existing file. */
    private void checkTokenFile(String flag, Path file) {
        if (file == null) {
            return;
        }
        if (!Files.exists(file)) {
            throw usage(flag + " " + file + " does not exist");
        }
        if (Files.isDirectory(file)) {
            throw usage(flag + " " + file + " is a directory, not a token file (e.g. DIR/train.bin from 'accel4j "
                    + "prepare')");
        }
    }

    /** The model's shape, checked against --seq before anything is written. */
    private GptConfig modelConfig(Path file) {
        GptConfig c;
        try {
            c = file == null ? GptConfig.preset(model) : LlmcCheckpoint.readConfig(file);
        } catch (IOException e) {
            throw new CliException(message(e), e);
        }
        if (seq > c.maxT()) {
            throw usage("--seq " + seq + " is longer than the model's max_seq_len " + c.maxT());
        }
        return c;
    }

    /**
     * When resuming: the steps before {@code resumedStep} that the metrics file already holds, so that the report
     * and the loss curve cover the whole run, not only its resumed part. A line that cannot be read back is left out
     * (the file is the user's too) and so is everything the interrupted run wrote after its checkpoint.
     */
    static List<StepMetrics> earlierSteps(Path metrics, int resumedStep) throws IOException {
        if (!Files.exists(metrics)) {
            return List.of();
        }
        List<StepMetrics> earlier = new ArrayList<>();
        for (String line : Files.readAllLines(metrics, StandardCharsets.UTF_8)) {
            try {
                StepMetrics m = StepMetrics.fromJson(line);
                if (m.step() < resumedStep) {
                    earlier.add(m);
                }
            } catch (IllegalArgumentException e) {
                // not one of ours: skip it
            }
        }
        return earlier;
    }

    /** {@code e} in words for the one error line ({@link IoMessages}: the file and the problem). */
    static String message(Throwable e) {
        return IoMessages.describe(e);
    }
}
