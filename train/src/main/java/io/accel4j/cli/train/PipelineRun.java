package io.accel4j.cli.train;

import io.accel4j.cli.CliException;
import io.accel4j.collectives.Communicator;
import io.accel4j.fit.DataSource;
import io.accel4j.fit.Learner;
import io.accel4j.fit.LearnerBuilder;
import io.accel4j.nn.Gpt2Blocks;
import io.accel4j.optim.AdamW;
import io.accel4j.pipeline.Gpt2Stages;
import io.accel4j.pipeline.PipelineRank;
import io.accel4j.pipeline.Timeline;
import io.accel4j.train.StepMetrics;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.checkpoint.LearnerLlmcCheckpoints;
import io.accel4j.train.data.DataLoader;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.model.GptConfig;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Function;

/**
 * {@code train --pp P}: GPT-2 trained with pipeline parallelism through the Java API ({@link Learner} with
 * {@link Gpt2Stages}), beside the data-parallel trainer rather than inside it, so that every other run is unchanged.
 * P stages in this process (one thread each) or one per {@code mpirun} process; the token files (or the generated
 * dataset) read by the first and last stage; progress lines, {@code metrics.jsonl} and {@code loss.png} in the run
 * directory; each stage's measured idle fraction beside the bubble formula at the end. It starts where the trainer
 * would (the model file's weights, or llm.c's initialisation from {@code --seed}) and follows the trainer's
 * learning-rate schedule and AdamW, so it trains as {@code train --grad-accum M} does up to the order of fp32 sums;
 * its checkpoints are the trainer's ({@link LearnerLlmcCheckpoints}: the whole model gathered, llm.c's file and the
 * trainer's state), so either resumes the other's. The flags a pipeline does not take yet are refused.
 */
final class PipelineRun {

    private final TrainCommand cmd;
    private final PipelineOptions pp;
    private final Map<String, String> restored;
    private final Function<String, RuntimeException> usage;

    PipelineRun(TrainCommand cmd, PipelineOptions pp, Map<String, String> restored,
                Function<String, RuntimeException> usage) {
        this.cmd = cmd;
        this.pp = pp;
        this.restored = restored;
        this.usage = usage;
    }

    /** Refuses, as usage errors, what the pipeline path does not do yet (before anything is allocated). */
    void checkSupported(TrainConfig cfg, GptConfig model, Launch launch) {
        String no = cmd.device == Backend.Device.CUDA ? "--device cuda"
                : cmd.zero > 1 ? "--zero " + cmd.zero + " (it takes --zero 1)"
                : cfg.precision().fp8() != null ? "--precision fp8"
                : customLossScale(cfg.precision()) ? "--loss-scale or --loss-scale-window (fp16's defaults only)"
                : cmd.memory.findBatchSize ? "--find-batch-size"
                : cmd.profile ? "--profile"
                : cmd.metricsOut != null ? "--metrics-out (the metrics go to the run directory)"
                : DataOptions.isShardList(cmd.trainData) ? "--train-data with several shards (one token file)"
                : null;
        if (no != null) {
            throw usage.apply("--pp " + pp.stages + " does not take " + no + " yet");
        }
        int T = cmd.tensor.tp(), group = T * pp.stages;
        String tp = T > 1 ? "--tp " + T + " × " : "", dtp = T > 1 ? "D·T·P" : "D·P";
        if (launch.perProcess() && launch.worldSize() % group != 0) {
            throw usage.apply(tp + "--pp " + pp.stages + " needs one process per stage" + (T > 1 ? " and tensor "
                    + "rank" : "") + " of each data-parallel replica (mpirun -np D·" + group + " or launch --nproc D·"
                    + group + "), got " + launch.worldSize());
        }
        if (launch.perProcess() && launch.rendezvous() != null && launch.worldSize() > pp.stages) {
            throw usage.apply("--pp " + pp.stages + " over " + launch.worldSize() + " launched processes needs "
                    + (T > 1 ? "tensor and " : "") + "replica groups, which the launcher's TCP communicator cannot "
                    + "split yet: use mpirun or --ranks");
        }
        if (!launch.perProcess() && cmd.ranks > 1 && cmd.ranks % group != 0) {
            throw usage.apply("--ranks " + cmd.ranks + " is not a multiple of " + tp + "--pp " + pp.stages
                    + (T > 1 ? " = " + group : "") + ": the ranks are " + dtp + " (data-parallel replicas of the "
                    + "pipeline × "
                    + (T > 1 ? "tensor ranks × " : "") + "its stages)");
        }
        int world = launch.perProcess() ? launch.worldSize() : cmd.ranks > 1 ? cmd.ranks : group;
        if (cmd.zero == 1 && world / group < 2) {
            throw usage.apply("--zero 1 with " + tp + "--pp " + pp.stages + " shards each stage's optimizer state over "
                    + "its data-parallel replicas, but " + world + " ranks make " + world / group + ": it needs "
                    + "--ranks " + 2 * group + " or more");
        }
        cmd.tensor.check(model, world, false, 0, cfg.precision(), usage::apply);
    }

    /** Whether fp16's loss scaling was given other than its defaults (the Learner takes the defaults). */
    private static boolean customLossScale(io.accel4j.train.precision.Precision p) {
        return p.scalesLoss() && (p.initialLossScale() != io.accel4j.train.precision.Precision.DEFAULT_LOSS_SCALE
                || p.lossScaleWindow() != io.accel4j.train.precision.Precision.DEFAULT_LOSS_SCALE_WINDOW);
    }

    /**
     * The whole run after the flags were checked: the run directory (rank 0 creates it, saves the flags and, without
     * {@code --train-data}, writes the generated dataset), the connection to the other mpirun processes, the training.
     */
    void run(TrainConfig cfg, GptConfig c, Path modelFile, Launch launch, int threads, java.time.Duration timeout,
             PrintWriter w) {
        Communicator world = launch.perProcess() ? launch.connect(timeout,
                Launch.configHash(cmd.spec.commandLine().getParseResult().originalArgs())) : null;
        boolean lead = world == null || world.rank() == 0;
        String now = java.time.LocalDateTime.now().format(java.time.format.DateTimeFormatter
                .ofPattern("yyyyMMdd-HHmmss"));
        Path dir = cmd.out != null ? cmd.out : cmd.resume != null ? cmd.resume
                : Path.of("runs", world == null ? now : Launch.agree(world, now));
        if (lead) {
            RunDirectory.checkNotAnotherRun(dir, cmd.resume != null && dir.equals(cmd.resume), cmd.overwrite,
                    dir.resolve("metrics.jsonl"), null, usage::apply);
        }
        RunDirectory run = lead ? RunDirectory.open(dir, cmd.overwrite, w) : null;
        boolean succeeded = false;
        try {
            if (run != null) {
                RunConfig.of(cmd.spec, restored).with("--grad-accum", pp.microBatches()).write(dir);
                if (cmd.resume == null) {
                    run.generated(dir.resolve(RunConfig.FILE));
                }
            }
            Path trainPath = cmd.trainData;
            if (trainPath == null) {
                trainPath = dir.resolve("train.bin");
                if (lead) {
                    GeneratedData.write(cmd.seed, trainPath, dir.resolve("val.bin"), run, w);
                }
            }
            if (world != null) {
                world.barrier(); // rank 0 has created the run directory and written the generated dataset
            }
            train(cfg, c, modelFile, dir, trainPath, world, threads,
                    lead ? w : new PrintWriter(java.io.Writer.nullWriter()));
            succeeded = true;
        } catch (IOException e) {
            throw new CliException(TrainCommand.message(e), e);
        } catch (IllegalStateException e) {
            if (e.getMessage() != null && e.getMessage().startsWith("training diverged")) {
                throw new CliException(e.getMessage(), e);
            }
            throw e;
        } finally {
            if (!succeeded && run != null) {
                run.failed();
            }
        }
        if (world != null) {
            world.close();
        }
    }

    /** Trains in {@code dir} (set up by the caller) and returns the metrics rank 0 saw. */
    List<StepMetrics> train(TrainConfig cfg, GptConfig c, Path modelFile, Path dir, Path trainPath,
                            Communicator world, int threads, PrintWriter w) throws IOException {
        boolean lead = world == null || world.rank() == 0;
        int M = pp.microBatches();
        List<DataLoader> loaders = new ArrayList<>();
        try (TokenFile train = TokenFile.open(trainPath)) {
            DataSource.Factory data = (rank, ranks, B, T) -> {
                DataLoader l = new DataLoader(train, B, T, rank, ranks, cfg.dataOrder(), cfg.seed());
                synchronized (loaders) {
                    loaders.add(l);
                }
                return l::next;
            };
            LearnerBuilder b = Learner.of(() -> Gpt2Blocks.body(c)).tokens(c.V()).classes(c.V())
                    .parameterOrder(Gpt2Blocks.LLMC_ORDER).batch(cfg.batch(), cfg.seq())
                    .optimizer(new AdamW.Spec(cfg.beta1(), cfg.beta2(), cfg.eps(), cfg.weightDecay(),
                            !cfg.decayMatricesOnly()))
                    .schedule(cfg::learningRate).gradClip(cfg.gradClip()).precision(cfg.precision().operands())
                    .activationStorage(cfg.precision().activationStorage())
                    .recompute(cmd.memory.recompute).seed(cfg.seed()).threads(threads).data(data)
                    .pipeline(cmd.tensor.active() ? Gpt2Stages.parallel(c) : Gpt2Stages.of(c), pp.stages, M,
                            pp.schedule()).tensorParallel(cmd.tensor.tp()).zero(cmd.zero)
                    .progress(lead ? w : null).out(lead ? dir : null);
            if (world != null) {
                b.communicator(world);
            } else if (cmd.ranks > 1) {
                b.ranks(cmd.ranks); // D·T·P in this process: D replicas of the pipeline
            }
            try (Learner learner = b.build()) {
                LearnerLlmcCheckpoints ck = new LearnerLlmcCheckpoints(learner, lead, c, cfg.batch(), cfg.seq(), M, loaders,
                        new io.accel4j.train.checkpoint.CheckpointFiles.Retention(cmd.keepCheckpoints,
                                cmd.saveEveryKeep));
                if (cmd.resume != null) {
                    int step = ck.resume(cmd.resume);
                    if (lead) {
                        RunDirectory.truncateMetrics(dir.resolve("metrics.jsonl"), step);
                        w.println("resumed " + cmd.resume + " at step " + step);
                    }
                } else {
                    ck.start(modelFile, cmd.seed);
                }
                if (lead) {
                    w.printf("model %s: %,d parameters; %d steps of %d x %d x %d tokens, run directory %s%n", c,
                            c.parameterCount(), cfg.steps(), M, cfg.batch(), cfg.seq(), dir);
                    w.flush();
                }
                List<StepMetrics> history = new ArrayList<>();
                while (learner.step() < cfg.steps()) {
                    int left = cfg.steps() - learner.step();
                    int chunk = cmd.saveEvery > 0 ? Math.min(left, cmd.saveEvery - learner.step() % cmd.saveEvery)
                            : left;
                    history.addAll(learner.fit(chunk, null));
                    if (cmd.saveEvery > 0 && learner.step() % cmd.saveEvery == 0 && learner.step() < cfg.steps()) {
                        ck.save(dir);
                    }
                }
                Path file = ck.save(dir);
                if (lead && !history.isEmpty()) {
                    report(w, learner, history, file);
                }
                return history;
            }
        } finally {
            for (DataLoader l : loaders) {
                l.close();
            }
        }
    }

    private void report(PrintWriter w, Learner learner, List<StepMetrics> history, Path file) {
        StepMetrics last = history.get(history.size() - 1);
        w.printf(Locale.ROOT, "final train loss %.4f after %d steps; model saved to %s%n", last.trainLoss(),
                learner.step(), file);
        Map<Integer, PipelineRank> stages = new java.util.TreeMap<>(); // each stage's first rank held here
        for (PipelineRank r : learner.stages()) {
            stages.putIfAbsent(r.communicator().rank(), r);
        }
        StringBuilder s = new StringBuilder("idle per stage (last step):");
        for (PipelineRank r : stages.values()) {
            s.append(String.format(Locale.ROOT, " %d: %.1f%%", r.communicator().rank(), 100 * r.idleFraction()));
        }
        w.println(s.append(String.format(Locale.ROOT, "; bubble (P-1)/(M+P-1) = %.1f%%",
                100 * Timeline.bubbleFormula(pp.stages, pp.microBatches()))));
        w.flush();
    }
}
