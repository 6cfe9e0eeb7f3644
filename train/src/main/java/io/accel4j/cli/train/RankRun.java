package io.accel4j.cli.train;

import io.accel4j.cli.CliException;
import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.MpiCommunicator;
import io.accel4j.collectives.TcpCommunicator;
import io.accel4j.core.ops.Ops;
import io.accel4j.cpu.Parallel;
import io.accel4j.train.StepMetrics;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.Trainer;
import io.accel4j.train.TrainingRun;
import io.accel4j.train.checkpoint.CheckpointFiles;
import io.accel4j.train.data.DefaultDataset;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.model.Gpt2Options;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.Recompute;
import io.accel4j.train.parallel.ModelStates;
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

/**
 * One rank of {@code accel4j train}'s trainer path ({@link Trainer}: one rank, in-process DDP/ZeRO ranks, mpirun's or
 * the launcher's processes, asynchronous workers through the strategy factory): the backend and the model, the data,
 * the resume, the loop with its metrics, progress and checkpoints, and on rank 0 the report and the profile. The
 * command's flags are read from {@link TrainCommand}; the pipeline and the tensor-parallel runs are
 * {@link PipelineRun} and {@link TensorParallelRun}.
 */
final class RankRun {

    private final TrainCommand cmd;
    private final ModelStates.Factory strategy;

    /** A rank of {@code cmd}'s run, its model states made by {@code strategy}. */
    RankRun(TrainCommand cmd, ModelStates.Factory strategy) {
        this.cmd = cmd;
        this.strategy = strategy;
    }

    /**
     * One rank's run ({@code host} null: the only one) on a pool of {@code nThreads}, with --device cuda on GPU
     * {@code gpu} and, for several ranks, NCCL (its id handed out over {@code host}). Rank 0 prints, writes the
     * metrics and the checkpoints and reports; the other ranks only take the steps with it.
     */
    void train(Communicator host, int gpu, int nThreads, TrainConfig cfg, Path modelFile, GptConfig modelConfig,
               Path dir, Path trainPath, Path valPath, DefaultDataset.Splits data, PrintWriter w) {
        boolean lead = host == null || host.rank() == 0;
        ProfilingOps[] profiler = new ProfilingOps[1];
        try (Parallel pool = new Parallel(nThreads);
             Backend backend = Backend.open(cmd.device, pool, gpu);
             Communicator nccl = host == null ? null : owned(backend.dataParallel(host, cmd.timeout()), host);
             Gpt2 gpt = createModel(ops(backend, lead, profiler), cfg, modelFile, modelConfig);
             io.accel4j.train.data.TokenShards train = trainShards(trainPath);
             TokenFile val = valPath == null ? null : TrainCommand.open(valPath, "validation");
             Trainer trainer = new Trainer(gpt, cfg, train, cmd.dataOptions.loaderThreads, val,
                     nccl != null ? nccl : host, strategy)) {
            Communicator comm = nccl != null ? nccl : host;
            trainer.keepCheckpoints(new CheckpointFiles.Retention(cmd.keepCheckpoints, cmd.saveEveryKeep));
            w.println("using " + gpt.ops().describe() + (comm == null ? "" : " per rank, " + comm.size()
                    + " data-parallel ranks " + (host instanceof MpiCommunicator ? "under mpirun (Open MPI)"
                    : host instanceof TcpCommunicator ? "over TCP (one process each)" : "in this process")
                    + (nccl != null ? " over NCCL" : ""))
                    + PrecisionOptions.describe(cfg.precision(), gpt.attentionOperands()) + cmd.bf16Params.describe());
            w.printf("model %s: %,d parameters, %.1f MiB allocated (activations %.1f MiB%s)%s%n", describe(gpt),
                    gpt.layout().count(), gpt.totalBytes() / 1048576.0, gpt.activationBytes() / 1048576.0,
                    gpt.recompute() == Recompute.NONE ? "" : ", recompute " + gpt.recompute().name()
                            .toLowerCase(java.util.Locale.ROOT), comm == null ? "" : " per rank");
            if (trainer.ranks() > 1 && !cmd.async.async()) { // async: the servers hold the optimizer state
                w.println(trainer.memory().describe(trainer.modelStateBytes(), trainer.workingBytes()));
            }
            w.printf("data %s: %,d tokens%s; %d steps of %d x %d tokens%s, run directory %s%n", trainPath
                    + (train.count() > 1 ? " (" + train.count() + " shards)" : ""),
                    train.tokens(), val == null ? "" : String.format(", validation %s: %,d tokens", valPath,
                            val.size()), cfg.steps(), cfg.batch() * cfg.gradAccum() * trainer.ranks(), cfg.seq(),
                    trainer.ranks() > 1 ? " (" + cfg.gradAccum() + " x " + cfg.batch() + " sequences on each of "
                            + trainer.ranks() + " ranks)" : cfg.gradAccum() > 1 ? " (" + cfg.gradAccum()
                            + " micro-batches)" : "", dir);
            if (cmd.resume != null) {
                trainer.resume(cmd.resume);
                w.println("resumed " + cmd.resume + " at step " + trainer.step());
            }
            w.flush();
            if (!lead) { // the same loop as rank 0's (the collectives need it), telling nobody
                TrainingRun.run(trainer, new TrainingRun.Events() {
                    @Override
                    public void stepped(StepMetrics m) {
                        cmd.async.afterStep(host.rank());
                    }

                    @Override
                    public void validated(StepMetrics m) {
                    }

                    @Override
                    public Path save(Trainer t) throws IOException {
                        return t.save(dir);
                    }
                }, this::savesAfterStep);
                trainer.gatherModel(false); // ZeRO-3: rank 0 samples for its report alone
                return;
            }
            Progress progress = new Progress(w, cfg.steps(), trainer.step());
            int firstStep = trainer.step();
            long start = System.nanoTime();
            long wait0 = trainer.dataWaitNanos();
            List<StepMetrics> history = run(trainer, dir, cmd.runDirectory, progress);
            long runNanos = System.nanoTime() - start;
            trainer.gatherModel(true); // ZeRO-3: the report's samples run the model on this rank alone
            // taken before the report, whose sample completions also run the model
            List<ProfilingOps.Entry> profile = profiler[0] == null ? null : profiler[0].entries();
            try (io.accel4j.train.sample.Sampler sampler = new io.accel4j.train.sample.Sampler(trainer.model())) {
                cmd.outcome = Report.finish(w, trainer.step(), trainer.lossScaler(), trainer.model().config(),
                        sampler, history, progress, dir, data, cmd.seed, cmd.samples, cmd.evalProblems);
            }
            if (cmd.async.async()) {
                Path png = dir.resolve("staleness.png");
                try {
                    if (StalenessPlot.write(png, StalenessPlot.read(cmd.metricsFile(dir)), cmd.async.bound())) {
                        w.println("staleness curve " + png);
                    }
                } catch (IOException | RuntimeException | LinkageError e) {
                    w.println("no staleness curve (" + e + ")");
                }
            }
            if (profile != null) {
                w.println();
                w.println("kernel profile of rank 0 (the run's steps and validations; % of the run's wall time):");
                ProfileReport.print(w, profile, runNanos, Math.max(1, trainer.step() - firstStep));
                double waitMs = (trainer.dataWaitNanos() - wait0) / 1e6;
                w.printf(java.util.Locale.ROOT, "data wait of rank 0: %.3f ms per step (%.2f %% of the run's wall "
                        + "time), %d loader thread%s%n", waitMs / Math.max(1, trainer.step() - firstStep),
                        100 * waitMs / (runNanos / 1e6), cmd.dataOptions.loaderThreads,
                        cmd.dataOptions.loaderThreads == 1 ? "" : "s");
                w.flush();
            }
        } catch (IOException | IllegalArgumentException e) {
            throw new CliException(TrainCommand.message(e), e);
        } catch (IllegalStateException e) {
            if (e.getMessage() != null && e.getMessage().startsWith("training diverged")) {
                throw new CliException(e.getMessage(), e);
            }
            throw e;
        }
    }

    /** {@code comm} when this run owns it (NCCL, closed with the run), null when it is {@code host} itself. */
    private static Communicator owned(Communicator comm, Communicator host) {
        return comm == host ? null : comm;
    }

    /** The backend's kernels, in a {@link ProfilingOps} (kept in {@code profiler[0]}) for rank 0 with --profile. */
    private Ops ops(Backend backend, boolean lead, ProfilingOps[] profiler) {
        Ops ops = backend.ops();
        if (cmd.profile && lead) {
            profiler[0] = new ProfilingOps(ops);
            return profiler[0];
        }
        return ops;
    }

    /** The train data's shards (one file, a glob or a list: {@link DataOptions}). */
    private io.accel4j.train.data.TokenShards trainShards(Path p) throws IOException {
        return DataOptions.open(p, cmd::usage);
    }

    /** The model: loaded from {@code file}, or the preset initialised from --seed. */
    private Gpt2 createModel(Ops ops, TrainConfig cfg, Path file, GptConfig c) throws IOException {
        Precision p = cfg.precision();
        Gpt2Options options = Gpt2Options.DEFAULT.withRecompute(cmd.memory.recompute)
                .withPrecision(p.operands(), p.fp8()).withActivationStorage(p.activationStorage())
                .withGradientStorage(p.gradients()).withParameterStorage(cmd.bf16Params.parameters());
        if (file != null) {
            return Gpt2.load(file, ops, cfg.batch(), cfg.seq(), options);
        }
        Gpt2 g = new Gpt2(c, ops, cfg.batch(), cfg.seq(), options);
        g.initialise(cmd.seed);
        return g;
    }

    private String describe(Gpt2 g) {
        GptConfig c = g.config();
        String name = cmd.resume != null ? "from " + cmd.resume : cmd.model;
        return name + " (L=" + c.L() + ", NH=" + c.NH() + ", C=" + c.C() + ", V=" + c.V() + ", maxT=" + c.maxT() + ")";
    }

    /** The training loop with metrics, progress and checkpoints; returns every step's metrics. */
    private List<StepMetrics> run(Trainer trainer, Path dir, RunDirectory runDir, Progress progress)
            throws IOException {
        Path metrics = cmd.metricsFile(dir);
        if (metrics.toAbsolutePath().getParent() != null) {
            Files.createDirectories(metrics.toAbsolutePath().getParent());
        }
        // resuming: the records the interrupted run wrote after its checkpoint go, the resumed run writes them again
        List<StepMetrics> history = new ArrayList<>(cmd.resume != null
                ? RunDirectory.parse(RunDirectory.truncateMetrics(metrics, trainer.step())) : List.of());
        int[] lastSaved = {cmd.resume != null && dir.equals(cmd.resume) ? trainer.step() : -1};
        if (runDir != null) {
            runDir.metrics(metrics);
        }
        Path model;
        try (BufferedWriter json = Files.newBufferedWriter(metrics, StandardCharsets.UTF_8, StandardOpenOption.CREATE,
                cmd.resume != null ? StandardOpenOption.APPEND : StandardOpenOption.TRUNCATE_EXISTING,
                StandardOpenOption.WRITE)) {
            model = TrainingRun.run(trainer, new TrainingRun.Events() {
                @Override
                public void stepped(StepMetrics m) {
                    history.add(m);
                    RunDirectory.record(json, m, trainer.strategyJson(), metrics, trainer.step(), dir, lastSaved[0]);
                    progress.step(m);
                    cmd.async.afterStep(trainer.rank());
                }

                @Override
                public void validated(StepMetrics m) {
                    history.add(m);
                    RunDirectory.record(json, m, "", metrics, trainer.step(), dir, lastSaved[0]);
                }

                @Override
                public Path save(Trainer t) {
                    return RunDirectory.save(t, dir, lastSaved);
                }
            }, this::savesAfterStep);
        }
        progress.done(model, metrics);
        return history;
    }

    /** Whether the run checkpoints after step {@code step} (besides the final checkpoint). */
    private boolean savesAfterStep(int step) {
        return cmd.saveEvery > 0 && step % cmd.saveEvery == 0;
    }
}
