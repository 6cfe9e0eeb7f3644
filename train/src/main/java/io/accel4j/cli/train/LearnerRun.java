package io.accel4j.cli.train;

import io.accel4j.cli.CliException;
import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.MpiCommunicator;
import io.accel4j.collectives.TcpCommunicator;
import io.accel4j.core.ops.Ops;
import io.accel4j.cpu.Parallel;
import io.accel4j.fit.Learner;
import io.accel4j.fit.LearnerBuilder;
import io.accel4j.nn.Gpt2Blocks;
import io.accel4j.train.Gpt2Learners;
import io.accel4j.train.StepMetrics;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.Validation;
import io.accel4j.train.checkpoint.CheckpointFiles;
import io.accel4j.train.checkpoint.LearnerLlmcCheckpoints;
import io.accel4j.train.data.DefaultDataset;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.data.TokenShards;
import io.accel4j.train.data.TokenSource;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.ParameterLayout;
import io.accel4j.train.parallel.ParameterServers;
import io.accel4j.train.model.Recompute;
import io.accel4j.train.precision.Precision;
import io.accel4j.train.profile.ProfileReport;
import io.accel4j.train.profile.ProfilingOps;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.function.Consumer;

/**
 * One rank of {@code accel4j train} on the Java API: a GPT-2 {@link Learner} ({@link Gpt2Learners}: {@link Gpt2Blocks}
 * in llm.c's parameter order, the run's AdamW, schedule and precision; the recompute and strategy — one rank, DDP
 * whole or bucketed, ZeRO 1–3, the optimizer offloaded, bf16 working weights, asynchronous workers) holding this rank, on the backend's kernels (wrapped for --profile on
 * rank 0), the token files as a {@link TokenSource}, llm.c's checkpoints ({@link LearnerLlmcCheckpoints}); the loop
 * validates before the steps due and after the last, writes {@code metrics.jsonl}, the progress lines and the
 * checkpoints, and rank 0 reports ({@link Report}: samples from the trained weights, gathered to rank 0). Every rank
 * runs this same loop (the collectives need it); rank 0 alone prints and writes.
 */
final class LearnerRun {

    private final TrainCommand cmd;
    /** Asynchronous data parallelism's parameter servers, whose workers the ranks are; null: synchronous. */
    private final ParameterServers servers;

    /** A synchronous rank of {@code cmd}'s run. */
    LearnerRun(TrainCommand cmd) {
        this(cmd, null);
    }

    /** A rank of {@code cmd}'s run; with {@code servers}, a worker of theirs (--sync async). */
    LearnerRun(TrainCommand cmd, ParameterServers servers) {
        this.cmd = cmd;
        this.servers = servers;
    }

    /**
     * One rank's run ({@code host} null: the only one) on a pool of {@code nThreads}, with --device cuda on GPU
     * {@code gpu} and, for several ranks, NCCL (its id handed out over {@code host}).
     */
    void train(Communicator host, int gpu, int nThreads, TrainConfig cfg, Path modelFile, GptConfig c, Path dir,
               Path trainPath, Path valPath, DefaultDataset.Splits data, PrintWriter w) {
        boolean lead = host == null || host.rank() == 0;
        ProfilingOps profiler = null;
        try (Parallel pool = new Parallel(nThreads);
             Backend backend = Backend.open(cmd.device, pool, gpu);
             Communicator nccl = host == null ? null : owned(backend.dataParallel(host, cmd.timeout()), host);
             TokenShards train = DataOptions.open(trainPath, cmd::usage);
             TokenFile val = valPath == null ? null : TrainCommand.open(valPath, "validation");
             TokenSource source = new TokenSource(train, cfg.dataOrder(), cfg.seed(), cmd.dataOptions.loaderThreads)) {
            Communicator comm = nccl != null ? nccl : host;
            int ranks = comm == null ? 1 : comm.size();
            train.checkVocabulary(c.V());
            if (val != null) {
                val.checkVocabulary(c.V());
            }
            Ops ops = backend.ops();
            if (cmd.profile && lead) {
                profiler = new ProfilingOps(ops);
                ops = profiler;
            }
            Ops rankOps = ops;
            List<StepMetrics> history;
            Progress progress = null;
            long runNanos;
            int firstStep, lastStep;
            double waitMs;
            TrainedModel trained;
            try (Learner learner = builder(cfg, c, ranks > 1 ? comm : null, nThreads, source)
                    .backend(r -> rankOps).build();
                 Validation validation = Validation.of(val, cfg)) {
                LearnerLlmcCheckpoints ck = new LearnerLlmcCheckpoints(learner, lead, c, cfg.batch(), cfg.seq(),
                        cfg.gradAccum(), source.loaders(), new CheckpointFiles.Retention(cmd.keepCheckpoints,
                        cmd.saveEveryKeep));
                ck.start(modelFile, cmd.seed);
                printStart(w, learner, cfg, c, comm, host, nccl != null, ranks, trainPath, train, valPath, val, dir);
                if (cmd.resume != null) {
                    int step = ck.resume(cmd.resume);
                    w.println("resumed " + cmd.resume + " at step " + step);
                }
                learner.checkReplicas(); // every rank from the same file or seed, and the same resumed state
                w.flush();
                firstStep = learner.step();
                if (lead) {
                    progress = new Progress(w, cfg.steps(), firstStep);
                }
                long start = System.nanoTime();
                long wait0 = source.loaders().get(0).waitNanos();
                Loop loop = new Loop(learner, ck, validation, cfg, dir, lead, host == null ? 0 : host.rank());
                history = lead ? loop.runLead(progress) : loop.run();
                runNanos = System.nanoTime() - start;
                lastStep = learner.step();
                waitMs = (source.loaders().get(0).waitNanos() - wait0) / 1e6;
                // a collective when sampling (the weights gathered to rank 0); before the report's forwards
                trained = TrainedModel.of(learner, c, options(cfg), samples(), lead);
            }
            List<ProfilingOps.Entry> profile = profiler == null ? null : profiler.entries();
            if (!lead) {
                return;
            }
            try (TrainedModel t = trained; io.accel4j.train.sample.Sampler sampler = t.sampler(backend.ops(),
                    cfg.seq())) {
                cmd.outcome = Report.finish(w, lastStep, t.lossScaler(), c, sampler, history, progress, dir, data,
                        cmd.seed, cmd.samples, cmd.evalProblems);
            }
            if (servers != null) {
                stalenessCurve(w, dir);
            }
            if (profile != null) {
                int steps = Math.max(1, lastStep - firstStep);
                w.println();
                w.println("kernel profile of rank 0 (the run's steps and validations; % of the run's wall time):");
                ProfileReport.print(w, profile, runNanos, steps);
                w.printf(Locale.ROOT, "data wait of rank 0: %.3f ms per step (%.2f %% of the run's wall "
                        + "time), %d loader thread%s%n", waitMs / steps, 100 * waitMs / (runNanos / 1e6),
                        cmd.dataOptions.loaderThreads, cmd.dataOptions.loaderThreads == 1 ? "" : "s");
                w.flush();
            }
        } catch (IOException | IllegalArgumentException e) {
            throw new CliException(TrainCommand.message(e), e);
        } catch (IllegalStateException e) {
            String m = e.getMessage();
            if (m != null && (m.startsWith("training diverged") || m.startsWith("the ranks' parameters differ"))) {
                throw new CliException(m, e);
            }
            throw e;
        }
    }

    /** The model's options as the trainer builds them: precision, FP8, recompute, 16-bit stores. */
    private io.accel4j.train.model.Gpt2Options options(TrainConfig cfg) {
        Precision p = cfg.precision();
        return io.accel4j.train.model.Gpt2Options.DEFAULT.withRecompute(cmd.memory.recompute)
                .withPrecision(p.operands(), p.fp8()).withActivationStorage(p.activationStorage())
                .withGradientStorage(p.gradients());
    }

    /** The staleness curve of an async run ({@code staleness.png}, from the metrics file), or why there is none. */
    private void stalenessCurve(PrintWriter w, Path dir) {
        Path png = dir.resolve("staleness.png");
        try {
            if (StalenessPlot.write(png, StalenessPlot.read(cmd.metricsFile(dir)), cmd.async.bound())) {
                w.println("staleness curve " + png);
            }
        } catch (IOException | RuntimeException | LinkageError e) {
            w.println("no staleness curve (" + e + ")");
        }
    }

    /** Whether the report samples from the trained model (the generated dataset's held-out problems). */
    private boolean samples() {
        return cmd.trainData == null && (cmd.samples > 0 || cmd.evalProblems > 0);
    }

    /** The GPT-2 learner of this rank: the trainer's model, optimizer, schedule, precision and strategy. */
    private LearnerBuilder builder(TrainConfig cfg, GptConfig c, Communicator comm, int nThreads,
                                   TokenSource source) {
        LearnerBuilder b = Gpt2Learners.of(c, cfg).recompute(cmd.memory.recompute)
                .zero(comm == null ? 0 : cfg.zeroStage()).bucketBytes(buckets(cfg, comm)).threads(nThreads)
                .parameterStorage(cmd.bf16Params.parameters()).data(source);
        if (cmd.offload.enabled) {
            b.offloadOptimizer(cmd.offload.overlaps());
        }
        if (servers != null) {
            b.asyncWorkers(servers, new ParameterLayout(c), cfg);
        }
        if (comm != null) {
            b.communicator(comm);
        }
        return b;
    }

    /**
     * The overlapped all-reduce's bucket bytes ({@link Gpt2Learners#bucketBytes}); 0 as well for bf16 working weights
     * (their gradients are all-reduced whole) and for async workers (nothing is reduced).
     */
    private long buckets(TrainConfig cfg, Communicator comm) {
        boolean whole = comm == null || servers != null || cmd.bf16Params.enabled;
        return whole ? 0 : Gpt2Learners.bucketBytes(cfg, comm.size());
    }

    /** The start-up lines: the backend and ranks, the model and its memory, the data. */
    private void printStart(PrintWriter w, Learner learner, TrainConfig cfg, GptConfig c, Communicator comm,
                            Communicator host, boolean overNccl, int ranks, Path trainPath, TokenShards train,
                            Path valPath, TokenFile val, Path dir) {
        w.println("using " + learner.network().ops().describe() + (comm == null ? "" : " per rank, " + comm.size()
                + " data-parallel ranks " + (host instanceof MpiCommunicator ? "under mpirun (Open MPI)"
                : host instanceof TcpCommunicator ? "over TCP (one process each)" : "in this process")
                + (overNccl ? " over NCCL" : ""))
                + PrecisionOptions.describe(cfg.precision(), learner.network().attentionOperands())
                + cmd.bf16Params.describe());
        Recompute recompute = cmd.memory.recompute;
        String name = cmd.resume != null ? "from " + cmd.resume : cmd.model;
        w.printf("model %s: %,d parameters, %.1f MiB allocated (activations %.1f MiB%s)%s%n", name + " (L=" + c.L()
                        + ", NH=" + c.NH() + ", C=" + c.C() + ", V=" + c.V() + ", maxT=" + c.maxT() + ")",
                c.parameterCount(), learner.modelBytes() / 1048576.0,
                learner.network().activationBytes() / 1048576.0, recompute == Recompute.NONE ? ""
                        : ", recompute " + recompute.name().toLowerCase(Locale.ROOT), comm == null ? "" : " per rank");
        if (ranks > 1 && servers == null) { // async: the servers hold the optimizer state
            w.println(learner.zeroMemory().describe(learner.modelStateBytes(), learner.workingBytes()));
        }
        w.printf("data %s: %,d tokens%s; %d steps of %d x %d tokens%s, run directory %s%n", trainPath
                        + (train.count() > 1 ? " (" + train.count() + " shards)" : ""),
                train.tokens(), val == null ? "" : String.format(", validation %s: %,d tokens", valPath,
                        val.size()), cfg.steps(), cfg.batch() * cfg.gradAccum() * ranks, cfg.seq(),
                ranks > 1 ? " (" + cfg.gradAccum() + " x " + cfg.batch() + " sequences on each of " + ranks
                        + " ranks)" : cfg.gradAccum() > 1 ? " (" + cfg.gradAccum() + " micro-batches)" : "", dir);
    }

    /** {@code comm} when this run owns it (NCCL, closed with the run), null when it is {@code host} itself. */
    private static Communicator owned(Communicator comm, Communicator host) {
        return comm == host ? null : comm;
    }

    /**
     * The steps to the last, one loop for every rank: validation when due, the step, its metrics line and progress
     * (rank 0), a checkpoint when due; after the last step a validation and the final checkpoint.
     */
    private final class Loop {
        private final Learner learner;
        private final LearnerLlmcCheckpoints ck;
        private final Validation validation;
        private final TrainConfig cfg;
        private final Path dir;
        private final boolean lead;
        private final int[] lastSaved;
        private final int rank;

        Loop(Learner learner, LearnerLlmcCheckpoints ck, Validation validation, TrainConfig cfg, Path dir,
             boolean lead, int rank) {
            this.learner = learner;
            this.ck = ck;
            this.validation = validation;
            this.cfg = cfg;
            this.dir = dir;
            this.lead = lead;
            this.rank = rank;
            this.lastSaved = new int[] {cmd.resume != null && dir.equals(cmd.resume) ? learner.step() : -1};
        }

        /** Rank 0's loop: the metrics file (resumed: the records after the checkpoint dropped), the progress. */
        List<StepMetrics> runLead(Progress progress) throws IOException {
            Path metrics = cmd.metricsFile(dir);
            if (metrics.toAbsolutePath().getParent() != null) {
                Files.createDirectories(metrics.toAbsolutePath().getParent());
            }
            List<StepMetrics> history = new ArrayList<>(cmd.resume != null
                    ? RunDirectory.parse(RunDirectory.truncateMetrics(metrics, learner.step())) : List.of());
            if (cmd.runDirectory != null) {
                cmd.runDirectory.metrics(metrics);
            }
            Path model;
            try (BufferedWriter json = Files.newBufferedWriter(metrics, StandardCharsets.UTF_8,
                    StandardOpenOption.CREATE, cmd.resume != null ? StandardOpenOption.APPEND
                            : StandardOpenOption.TRUNCATE_EXISTING, StandardOpenOption.WRITE)) {
                model = steps(m -> {
                    history.add(m);
                    RunDirectory.record(json, m, learner.strategyJson(), metrics, learner.step(), dir,
                            lastSaved[0]);
                    progress.step(m);
                }, m -> {
                    history.add(m);
                    RunDirectory.record(json, m, "", metrics, learner.step(), dir, lastSaved[0]);
                });
            }
            progress.done(model, metrics);
            return history;
        }

        /** Another rank's loop: the same steps, validations and checkpoints (the collectives), telling nobody. */
        List<StepMetrics> run() throws IOException {
            steps(m -> { }, m -> { });
            return List.of();
        }

        /** The steps, telling {@code stepped} each step's metrics and {@code validated} the last validation's. */
        private Path steps(Consumer<StepMetrics> stepped, Consumer<StepMetrics> validated) {
            while (learner.step() < cfg.steps()) {
                int s = learner.step();
                double v = validation != null && cfg.valEvery() > 0 && s % cfg.valEvery() == 0 ? validate()
                        : Double.NaN;
                stepped.accept(learner.fit(1, null).get(0).withValLoss(v));
                cmd.async.afterStep(rank); // a straggler's pause (--straggler-ms)
                if (learner.step() < cfg.steps() && cmd.saveEvery > 0 && learner.step() % cmd.saveEvery == 0) {
                    save();
                }
            }
            double v = validation != null ? validate() : Double.NaN;
            if (Double.isFinite(v)) {
                validated.accept(StepMetrics.validationOnly(learner.step(), v));
            }
            return save();
        }

        /**
         * The validation loss on rank 0 (NaN elsewhere); under ZeRO-3, whose forward gathers the parameters, every
         * rank runs it.
         */
        private double validate() {
            if (!lead && learner.network().flat()) {
                return Double.NaN;
            }
            double v = validation.loss(learner);
            return lead ? v : Double.NaN;
        }

        private Path save() {
            try {
                Path model = ck.save(dir);
                lastSaved[0] = learner.step();
                return model;
            } catch (IOException e) {
                throw RunDirectory.saveFailed(e, learner.step(), dir, lastSaved[0]);
            }
        }
    }
}
