package io.accel4j.train.checkpoint;

import io.accel4j.fit.Learner;
import io.accel4j.train.data.DataLoader;
import io.accel4j.train.io.FileFormatException;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.ParameterInit;
import io.accel4j.train.model.ParameterLayout;
import io.accel4j.train.precision.LossScaler;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

/**
 * A GPT-2 {@link Learner}'s start and checkpoints in llm.c's format, {@code accel4j train}'s: the whole model
 * gathered ({@link Learner#gatherState}: a pipeline's stages by name, or rank 0's replica) into llm.c's model file
 * and the state file (AdamW's m and v in llm.c's order, the
 * step, the loader's position, the loss scaler; grad accumulation = K, a pipeline's M), the pointer committed last
 * ({@link CheckpointFiles}); resuming reads either's checkpoint back into every rank ({@link Learner#restoreState})
 * and every loader. The learner's parameters are in llm.c's order ({@code Gpt2Blocks.LLMC_ORDER}); its loaders are
 * the {@link io.accel4j.train.data.TokenSource}'s (or a pipeline's). FP8's scaling state is saved and restored on
 * every rank; ZeRO's shards, bf16 working weights' master and the async servers' state are gathered by
 * {@link Learner#gatherState} and placed back by {@link Learner#restoreState}.
 */
public final class LearnerLlmcCheckpoints {

    private final Learner learner;
    private final boolean lead;
    private final GptConfig c;
    private final int B;
    private final int T;
    private final int M;
    private final List<DataLoader> loaders;
    private final CheckpointFiles.Retention keep;

    /**
     * The checkpoints of {@code learner}, a GPT-2 {@code c} training on batches of B × T with {@code M} micro-batches
     * a step (K), reading through {@code loaders}; {@code lead}: this process writes (the run's rank 0); {@code keep}:
     * which older checkpoints stay.
     */
    public LearnerLlmcCheckpoints(Learner learner, boolean lead, GptConfig c, int B, int T, int M,
                                  List<DataLoader> loaders, CheckpointFiles.Retention keep) {
        this.learner = learner;
        this.lead = lead;
        this.c = c;
        this.B = B;
        this.T = T;
        this.M = M;
        this.loaders = loaders;
        this.keep = keep;
    }

    /** The trainer's start (before {@link #resume}): {@code modelFile}'s weights, or (null) llm.c's initialisation from {@code seed}. */
    public void start(Path modelFile, long seed) throws IOException {
        try (Arena a = Arena.ofShared()) {
            MemorySegment initial = modelFile != null ? LlmcCheckpoint.read(modelFile, a).params()
                    : a.allocate(bytes(), 64);
            if (modelFile == null) {
                ParameterInit.gpt2(new ParameterLayout(c), initial, seed);
            }
            learner.loadParameters(initial);
        }
    }

    /**
     * Writes the checkpoint of the current step into {@code dir} (created if missing; the lead writes; a collective);
     * returns its model file.
     */
    public Path save(Path dir) throws IOException {
        int step = learner.step();
        CheckpointFiles files = CheckpointFiles.of(dir, step);
        try (Arena a = Arena.ofShared()) {
            MemorySegment params = a.allocate(bytes(), 64), m = a.allocate(bytes(), 64), v = a.allocate(bytes(), 64);
            learner.gatherState(params, Map.of("m", m, "v", v));
            if (!lead) {
                return files.model();
            }
            java.nio.file.Files.createDirectories(dir);
            LossScaler sc = learner.lossScaler();
            LlmcCheckpoint.write(files.model(), c, params, LlmcCheckpoint.VERSION_FP32);
            TrainState.write(files.state(), new TrainState.Header(step, B, T, M, c, position().encode(),
                    sc.enabled() ? sc.scale() : 0f, sc.cleanSteps(), sc.skippedSteps(), learner.fp8State()), m, v);
            files.commit(step, keep);
        }
        return files.model();
    }

    /** Continues from the latest checkpoint in {@code dir} (a pipeline's or the trainer's); returns its step. */
    public int resume(Path dir) throws IOException {
        CheckpointFiles files = CheckpointFiles.latest(dir);
        try (Arena a = Arena.ofShared()) {
            MemorySegment m = a.allocate(bytes(), 64), v = a.allocate(bytes(), 64);
            TrainState.Header h = TrainState.read(files.state(), c, m, v);
            if (h.B() != B || h.T() != T || h.gradAccum() != M) {
                throw new FileFormatException(files.state(), "header[3..5] (B, T, grad accumulation)", "is " + h.B()
                        + ", " + h.T() + ", " + h.gradAccum() + ", but this run uses " + B + ", " + T + ", " + M
                        + ": resume with the same --batch, --seq and --grad-accum (a pipeline's --micro-batches)");
            }
            LlmcCheckpoint.Loaded loaded = LlmcCheckpoint.read(files.model(), a);
            if (!loaded.config().equals(c)) {
                throw new FileFormatException(files.model(), "header", "describes " + loaded.config()
                        + ", but the model is " + c);
            }
            try {
                learner.restoreState(loaded.params(), Map.of("m", m, "v", v), h.step(), h.lossScale(),
                        h.cleanSteps(), h.skippedSteps());
                try {
                    learner.restoreFp8State(h.fp8State());
                } catch (IllegalArgumentException e) {
                    throw new FileFormatException(files.state(), "header[18] (FP8 state bytes)", e.getMessage()
                            + ": resume an fp8 run with --precision fp8, any other without it");
                }
                DataLoader.State at = DataLoader.State.decode(h.loaderState());
                for (DataLoader l : loaders) { // replicas: rank 0's position is every rank's, as the trainer's
                    int rank = l.position().rank();
                    if (rank != at.rank() && at.mode() == io.accel4j.train.data.SampleOrder.Mode.SHUFFLED_LLMC) {
                        throw new IllegalArgumentException("resuming data-parallel replicas needs every rank's "
                                + "shuffle; only the sequential and shuffled orders can be resumed with them");
                    }
                    l.seek(at.forRank(rank));
                }
            } catch (IllegalArgumentException e) {
                throw new FileFormatException(files.state(), "loader or scaler state", "does not fit this run: "
                        + e.getMessage());
            }
            return h.step();
        }
    }

    /**
     * Where the data is: the first and last stage read the same batches, the others none (the most read); with
     * data-parallel replicas, the first replica's (rank 0's position is every rank's, as the trainer saves it).
     */
    private DataLoader.State position() {
        DataLoader most = null;
        for (DataLoader l : loaders) {
            if (l.position().rank() == 0 && (most == null || l.position().tokens() > most.position().tokens())) {
                most = l;
            }
        }
        return (most != null ? most : loaders.get(0)).position();
    }

    private long bytes() {
        return c.parameterCount() * Float.BYTES;
    }
}
