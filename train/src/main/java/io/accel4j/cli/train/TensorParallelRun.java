package io.accel4j.cli.train;

import io.accel4j.collectives.Communicator;
import io.accel4j.fit.DataSource;
import io.accel4j.fit.Learner;
import io.accel4j.fit.LearnerBuilder;
import io.accel4j.nn.Gpt2Blocks;
import io.accel4j.nn.ParameterTable;
import io.accel4j.optim.AdamW;
import io.accel4j.optim.LrSchedule;
import io.accel4j.train.StepMetrics;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.checkpoint.LlmcCheckpoint;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.model.GptConfig;
import java.io.IOException;
import java.io.PrintWriter;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.List;

/**
 * {@code accel4j train --tp T}: GPT-2 split over T tensor ranks ({@link Gpt2Blocks#parallelBody}) trained through
 * the Java API's {@link Learner} — the ranks in this process, or one per process under mpirun — from the blocks'
 * initialisation or an llm.c model file (any layout's: the file is the whole model), with the run's AdamW,
 * warmup and schedule, clipping and accumulation, on consecutive windows of the train tokens (replica r of D reading
 * its own B of each global batch). Prints the plan per rank and progress, writes {@code metrics.jsonl},
 * {@code loss.png}, the whole model as an llm.c model file ({@code model.bin}, what {@code accel4j sample} reads) and
 * the Learner's checkpoint ({@code tp-checkpoint/}).
 */
final class TensorParallelRun {

    private TensorParallelRun() {}

    /** The run's learner (not yet trained): {@code world} null for in-process {@code ranks}. */
    static LearnerBuilder learner(GptConfig model, TrainConfig cfg, int tp, int ranks, Communicator world,
                                  int threads, TokenFile train) {
        return learner(model, cfg, tp, ranks, world, threads, train, Communicator.DEFAULT_TIMEOUT);
    }

    /** {@link #learner}, in-process collectives giving up after {@code timeout} (--collective-timeout). */
    static LearnerBuilder learner(GptConfig model, TrainConfig cfg, int tp, int ranks, Communicator world,
                                  int threads, TokenFile train, java.time.Duration timeout) {
        LrSchedule schedule = cfg.schedule() == TrainConfig.Schedule.CONSTANT ? LrSchedule.constant(cfg.lr())
                : LrSchedule.warmupCosine(cfg.lr(), cfg.warmup(), cfg.steps(), cfg.minLrFraction());
        LearnerBuilder b = Learner.of(() -> Gpt2Blocks.parallelBody(model)).tokens(model.V()).classes(model.V())
                .parameterOrder(Gpt2Blocks.LLMC_ORDER).batch(cfg.batch(), cfg.seq()).gradAccum(cfg.gradAccum())
                .optimizer(new AdamW.Spec(cfg.beta1(), cfg.beta2(), cfg.eps(), cfg.weightDecay(),
                        !cfg.decayMatricesOnly()))
                .schedule(schedule).gradClip(cfg.gradClip()).precision(cfg.precision().operands())
                .activationStorage(cfg.precision().activationStorage()).tensorParallel(tp).zero(cfg.zeroStage())
                .threads(threads).seed(cfg.seed()).data(windows(train)).collectiveTimeout(timeout);
        return world != null ? b.communicator(world) : b.ranks(ranks);
    }

    /** Trains, writes the outputs into {@code dir}, returns the metrics (rank 0's view). */
    static List<StepMetrics> run(LearnerBuilder b, GptConfig model, Path modelFile, TrainConfig cfg, Path dir,
                                 boolean lead, PrintWriter w) throws IOException {
        return run(b, model, modelFile, cfg, dir, false, lead, w);
    }

    /**
     * {@link #run}; {@code resumed}: continues from {@code dir}'s {@code tp-checkpoint/} (the whole model, its AdamW
     * state, step and data position) up to {@code cfg.steps()}, the metrics after its step dropped.
     */
    static List<StepMetrics> run(LearnerBuilder b, GptConfig model, Path modelFile, TrainConfig cfg, Path dir,
                                 boolean resumed, boolean lead, PrintWriter w) throws IOException {
        b.out(lead ? dir : null).progress(lead ? w : null);
        try (Learner learner = b.build()) {
            if (resumed) {
                Path ck = dir.resolve("tp-checkpoint");
                if (!java.nio.file.Files.isDirectory(ck)) {
                    throw new java.io.FileNotFoundException(ck + " (--resume with --tp reads the checkpoint a --tp "
                            + "run writes there)");
                }
                learner.resume(ck);
                if (lead) {
                    RunDirectory.truncateMetrics(dir.resolve("metrics.jsonl"), learner.step());
                    w.println("resumed " + dir + " at step " + learner.step());
                }
            } else if (modelFile != null) { // an llm.c file holds the whole model in the whole table's order
                try (Arena a = Arena.ofConfined()) {
                    learner.loadParameters(LlmcCheckpoint.read(modelFile, a).params());
                }
                if (lead) {
                    w.println("started from " + modelFile + ", split over the tensor ranks");
                }
            }
            if (lead) {
                w.println("tensor parallel: " + learner.describe());
                w.flush();
            }
            List<StepMetrics> history = learner.fit(Math.max(0, cfg.steps() - learner.step()), null);
            learner.save(dir.resolve("tp-checkpoint")); // collectives: every rank sends its shards
            ParameterTable whole = learner.wholeTable();
            try (Arena a = Arena.ofShared()) {
                MemorySegment p = a.allocate(whole.fp32Bytes(), 64);
                learner.gatherParameters(p);
                if (lead) {
                    LlmcCheckpoint.write(dir.resolve("model.bin"), model, p, LlmcCheckpoint.VERSION_FP32);
                }
            }
            if (lead && !history.isEmpty()) {
                StepMetrics last = history.get(history.size() - 1);
                w.printf("done: %d steps, train loss %.4f; the whole model in %s (llm.c format)%n", history.size(),
                        last.trainLoss(), dir.resolve("model.bin"));
                w.flush();
            }
            return history;
        }
    }

    /**
     * Consecutive windows of T + 1 tokens: global batch k's sequence j starts at token {@code (k·R·B + j)·T} (modulo
     * the file), replica r of R taking sequences {@code [r·B, (r+1)·B)}; inputs the first T, targets the last T.
     */
    static DataSource.Factory windows(TokenFile train) {
        return (replica, replicas, B, T) -> new DataSource.Resumable() {
            long batch;

            @Override
            public void skip(long batches) {
                batch += batches;
            }

            @Override
            public void next(MemorySegment inputs, MemorySegment targets) {
                long span = train.size() - T - 1;
                int[] buf = new int[T + 1];
                for (int b = 0; b < B; b++) {
                    long seqIndex = batch * replicas * B + (long) replica * B + b;
                    long start = Math.floorMod(seqIndex * T, Math.max(1, span));
                    train.read(start, buf, T + 1);
                    for (int t = 0; t < T; t++) {
                        inputs.setAtIndex(ValueLayout.JAVA_INT, (long) b * T + t, buf[t]);
                        targets.setAtIndex(ValueLayout.JAVA_INT, (long) b * T + t, buf[t + 1]);
                    }
                }
                batch++;
            }
        };
    }
}
