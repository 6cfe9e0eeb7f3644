package io.accel4j.cli.train;

import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.MpiCommunicator;
import io.accel4j.fit.DataSource;
import io.accel4j.fit.Learner;
import io.accel4j.fit.LearnerBuilder;
import io.accel4j.nn.Gpt2Blocks;
import io.accel4j.optim.AdamW;
import io.accel4j.optim.LrSchedule;
import io.accel4j.pipeline.Gpt2Stages;
import io.accel4j.pipeline.PipelineRank;
import io.accel4j.pipeline.Timeline;
import io.accel4j.train.StepMetrics;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.checkpoint.LlmcCheckpoint;
import io.accel4j.train.data.DataLoader;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.ParameterInit;
import io.accel4j.train.model.ParameterLayout;
import java.io.IOException;
import java.io.PrintWriter;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.function.Function;

/**
 * {@code train --pp P}: GPT-2 trained with pipeline parallelism through the Java API ({@link Learner} with
 * {@link Gpt2Stages}), beside the data-parallel trainer rather than inside it, so that every other run is unchanged.
 * P stages in this process (one thread each) or one per {@code mpirun} process; the token files (or the generated
 * dataset) read by the first and last stage; progress lines, {@code metrics.jsonl} and {@code loss.png} in the run
 * directory; at the end the whole model gathered into an llm.c model file {@code model_NNNNNNNN.bin} (what
 * {@code sample --model} reads) and each stage's measured idle fraction beside the bubble formula. It starts where the
 * trainer would (the model file's weights, or llm.c's initialisation from {@code --seed}) and follows the trainer's
 * learning-rate schedule and AdamW, so it trains as {@code train --grad-accum M} does up to the order of fp32 sums;
 * the flags a pipeline does not take yet are refused.
 */
final class PipelineRun {

    private final TrainCommand cmd;
    private final PipelineOptions pp;
    private final Function<String, RuntimeException> usage;

    PipelineRun(TrainCommand cmd, PipelineOptions pp, Function<String, RuntimeException> usage) {
        this.cmd = cmd;
        this.pp = pp;
        this.usage = usage;
    }

    /** Refuses, as usage errors, what the pipeline path does not do yet (before anything is allocated). */
    void checkSupported(Path modelFile, TrainConfig cfg, Launch launch) {
        String no = cmd.device == Backend.Device.CUDA ? "--device cuda"
                : cmd.ranks > 1 ? "--ranks (data parallelism with a pipeline is not composed yet)"
                : cmd.zero > 0 ? "--zero"
                : cmd.resume != null ? "--resume"
                : cfg.gradAccum() > 1 ? "--grad-accum (use --micro-batches)"
                : cfg.precision().fp8() != null ? "--precision fp8"
                : cmd.memory.findBatchSize ? "--find-batch-size"
                : cmd.profile ? "--profile"
                : cmd.metricsOut != null ? "--metrics-out (the metrics go to the run directory)"
                : cmd.saveEvery > 0 ? "--save-every (the model is saved at the end)"
                : null;
        if (no != null) {
            throw usage.apply("--pp " + pp.stages + " does not take " + no + " yet");
        }
        if (launch.mpi() && launch.worldSize() != pp.stages) {
            throw usage.apply("--pp " + pp.stages + " needs one process per stage: mpirun -np " + pp.stages
                    + ", got " + launch.worldSize());
        }
    }

    /**
     * The whole run after the flags were checked: the run directory (rank 0 creates it and, without
     * {@code --train-data}, writes the generated dataset), the connection to the other mpirun processes, the training.
     */
    void run(TrainConfig cfg, GptConfig c, Path modelFile, Launch launch, int threads, java.time.Duration timeout,
             PrintWriter w) {
        MpiCommunicator world = launch.mpi() ? launch.connect(timeout) : null;
        boolean lead = world == null || world.rank() == 0;
        String now = java.time.LocalDateTime.now().format(java.time.format.DateTimeFormatter
                .ofPattern("yyyyMMdd-HHmmss"));
        Path dir = cmd.out != null ? cmd.out : Path.of("runs", world == null ? now : Launch.agree(world, now));
        if (lead) {
            RunDirectory.checkNotAnotherRun(dir, false, cmd.overwrite, dir.resolve("metrics.jsonl"), null, usage::apply);
        }
        RunDirectory run = lead ? RunDirectory.open(dir, cmd.overwrite, w) : null;
        boolean succeeded = false;
        try {
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
            throw new io.accel4j.cli.CliException(TrainCommand.message(e), e);
        } catch (IllegalStateException e) {
            if (e.getMessage() != null && e.getMessage().startsWith("training diverged")) {
                throw new io.accel4j.cli.CliException(e.getMessage(), e);
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
                            MpiCommunicator world, int threads, PrintWriter w) throws IOException {
        boolean lead = world == null || world.rank() == 0;
        List<AutoCloseable> open = new ArrayList<>();
        try (TokenFile train = TokenFile.open(trainPath)) {
            DataSource.Factory data = (rank, ranks, B, T) -> {
                DataLoader l = new DataLoader(train, B, T, rank, ranks, cfg.dataOrder(), cfg.seed());
                synchronized (open) {
                    open.add(l);
                }
                return l::next;
            };
            LrSchedule schedule = cfg::learningRate; // the trainer's
            LearnerBuilder b = Learner.of(() -> Gpt2Blocks.body(c)).tokens(c.V()).classes(c.V())
                    .parameterOrder(Gpt2Blocks.LLMC_ORDER).batch(cfg.batch(), cfg.seq())
                    .optimizer(new AdamW.Spec(cfg.beta1(), cfg.beta2(), cfg.eps(), cfg.weightDecay(),
                            !cfg.decayMatricesOnly()))
                    .schedule(schedule).gradClip(cfg.gradClip()).precision(cfg.precision().operands())
                    .recompute(cmd.memory.recompute).seed(cfg.seed()).threads(threads).data(data)
                    .pipeline(Gpt2Stages.of(c), pp.stages, pp.microBatches(), pp.schedule())
                    .progress(lead ? w : null).out(lead ? dir : null);
            if (world != null) {
                b.communicator(world);
            }
            try (Learner learner = b.build(); Arena start = Arena.ofShared()) {
                // the trainer's start: the model file's weights, or llm.c's initialisation from --seed
                MemorySegment initial = modelFile != null ? LlmcCheckpoint.read(modelFile, start).params()
                        : start.allocate(c.parameterCount() * Float.BYTES, 64);
                if (modelFile == null) {
                    ParameterInit.gpt2(new ParameterLayout(c), initial, cmd.seed);
                }
                learner.loadParameters(initial);
                if (lead) {
                    w.printf("model %s: %,d parameters; %d steps of %d x %d x %d tokens, run directory %s%n", c,
                            c.parameterCount(), cfg.steps(), pp.microBatches(), cfg.batch(), cfg.seq(), dir);
                    w.flush();
                }
                List<StepMetrics> history = learner.fit(cfg.steps(), null);
                try (Arena a = Arena.ofShared()) {
                    MemorySegment params = a.allocate(c.parameterCount() * Float.BYTES, 64);
                    learner.gatherParameters(params);
                    if (lead) {
                        Path file = dir.resolve(String.format(Locale.ROOT, "model_%08d.bin", learner.step()));
                        LlmcCheckpoint.write(file, c, params, LlmcCheckpoint.VERSION_FP32);
                        report(w, learner, history, file);
                    }
                }
                return history;
            }
        } finally {
            for (AutoCloseable l : open) {
                try {
                    l.close();
                } catch (Exception ignored) {
                    // a loader's close does not throw
                }
            }
        }
    }

    private void report(PrintWriter w, Learner learner, List<StepMetrics> history, Path file) {
        StepMetrics last = history.get(history.size() - 1);
        w.printf(Locale.ROOT, "final train loss %.4f after %d steps; model saved to %s%n", last.trainLoss(),
                learner.step(), file);
        List<PipelineRank> stages = learner.stages();
        if (!stages.isEmpty()) {
            StringBuilder s = new StringBuilder("idle per stage (last step):");
            for (int i = 0; i < stages.size(); i++) {
                s.append(String.format(Locale.ROOT, " %d: %.1f%%", i, 100 * stages.get(i).idleFraction()));
            }
            w.println(s.append(String.format(Locale.ROOT, "; bubble (P-1)/(M+P-1) = %.1f%%",
                    100 * Timeline.bubbleFormula(pp.stages, pp.microBatches()))));
        }
        w.flush();
    }
}
