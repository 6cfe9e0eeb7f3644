package io.accel4j.train;

import io.accel4j.train.checkpoint.CheckpointFiles;
import io.accel4j.train.checkpoint.LlmcCheckpoint;
import io.accel4j.train.checkpoint.TrainState;
import io.accel4j.train.data.DataLoader;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.io.FileFormatException;
import io.accel4j.train.model.Fp8State;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.parallel.ModelStates;
import io.accel4j.train.precision.LossScaler;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * A {@link Trainer}'s checkpoints: the model as an llm.c file ({@code model_NNNNNNNN.bin}), the optimizer moments, step,
 * data position, loss scaler and FP8 scaling state ({@link TrainState}, {@code state_NNNNNNNN.bin}), then — the commit
 * point — {@link CheckpointFiles}' pointer naming them, each written atomically; older checkpoints are then removed
 * but for those the {@link CheckpointFiles.Retention} keeps. The model states come from the run's
 * {@link ModelStates} (whole, ZeRO's shards gathered to rank 0), so a checkpoint of any stage resumes at any other.
 */
final class Checkpoints {

    private final Gpt2 model;
    private final TrainConfig cfg;
    private final ModelStates states;
    private final LossScaler scaler;
    private CheckpointFiles.Retention retention = CheckpointFiles.Retention.LATEST;

    Checkpoints(Gpt2 model, TrainConfig cfg, ModelStates states, LossScaler scaler) {
        this.model = model;
        this.cfg = cfg;
        this.states = states;
        this.scaler = scaler;
    }

    /**
     * Writes the checkpoint of step {@code step} into {@code dir} (created if missing), the train data at
     * {@code position}; returns the model file ({@link Trainer#save}).
     */
    Path save(Path dir, int step, DataLoader.State position) throws IOException {
        CheckpointFiles files = CheckpointFiles.of(dir, step);
        Path modelFile = files.model(), stateFile = files.state();
        try (Arena gathered = Arena.ofConfined()) {
            ModelStates.Saved saved = states.gatherForCheckpoint(gathered);
            if (saved == null) { // another rank than 0 under ZeRO: it sent its shards
                return modelFile;
            }
            Files.createDirectories(dir);
            if (saved.params() != null) {
                LlmcCheckpoint.write(modelFile, model.config(), saved.params(), LlmcCheckpoint.VERSION_FP32);
            } else {
                model.save(modelFile);
            }
            TrainState.write(stateFile, new TrainState.Header(step, cfg.batch(), cfg.seq(), cfg.gradAccum(),
                    model.config(), position.encode(), scaler.enabled() ? scaler.scale() : 0f,
                    scaler.cleanSteps(), scaler.skippedSteps(),
                    model.fp8() == null ? new byte[0] : model.fp8().encode()), saved.m(), saved.v());
        }
        files.commit(step, retention);
        return modelFile;
    }

    /** Which older checkpoints {@link #save} keeps (default: none, only the latest). */
    void keep(CheckpointFiles.Retention r) {
        retention = java.util.Objects.requireNonNull(r, "retention");
    }

    /**
     * Reads the checkpoint in {@code dir} back: the model's parameters, AdamW's moments, the loss scaler and FP8 state,
     * and {@code train}'s position (rank 0's, which is every rank's); returns the step. The checkpoint must be for
     * this model's shape and this run's B, T and K.
     */
    int resume(Path dir, DataLoader train, int rank, int ranks) throws IOException {
        CheckpointFiles files = CheckpointFiles.latest(dir);
        Path modelFile = files.model(), stateFile = files.state();
        GptConfig want = model.config();
        TrainState.Header h = states.readMoments(stateFile);
        if (h.B() != cfg.batch() || h.T() != cfg.seq() || h.gradAccum() != cfg.gradAccum()) {
            throw new FileFormatException(stateFile, "header[3..5] (B, T, grad accumulation)", "is " + h.B() + ", "
                    + h.T() + ", " + h.gradAccum() + ", but this run uses " + cfg.batch() + ", " + cfg.seq() + ", "
                    + cfg.gradAccum() + ": resume with the same --batch, --seq and --grad-accum");
        }
        try (Arena tmp = Arena.ofConfined()) {
            LlmcCheckpoint.Loaded loaded = LlmcCheckpoint.read(modelFile, tmp);
            if (!loaded.config().equals(want)) {
                throw new FileFormatException(modelFile, "header", "describes " + loaded.config()
                        + ", but the model is " + want);
            }
            states.setParameters(loaded.params());
        }
        try {
            DataLoader.State saved = DataLoader.State.decode(h.loaderState());
            if (ranks > 1) {
                if (cfg.dataOrder() == SampleOrder.Mode.SHUFFLED_LLMC) {
                    throw new IllegalArgumentException("resuming " + ranks + " ranks needs every rank's shuffle; "
                            + "only the sequential and shuffled orders can be resumed with more than one rank");
                }
                saved = saved.forRank(rank); // rank 0's position is every rank's
            }
            train.seek(saved);
        } catch (IllegalArgumentException e) {
            throw new FileFormatException(stateFile, "loader state", "does not fit this run's train data: "
                    + e.getMessage());
        }
        restoreFp8(stateFile, h.fp8State());
        scaler.restore(h.lossScale(), h.cleanSteps(), h.skippedSteps());
        return h.step();
    }

    /** The FP8 scaling state saved in {@code stateFile} back into the model's; both must be fp8 or neither. */
    private void restoreFp8(Path stateFile, byte[] saved) throws FileFormatException {
        Fp8State fp8 = model.fp8();
        if (fp8 == null && saved.length > 0 || fp8 != null && saved.length == 0) {
            throw new FileFormatException(stateFile, "header[18] (FP8 state bytes)", "is " + saved.length + ", but "
                    + "this run is " + cfg.precision().label() + ": resume an fp8 run with --precision fp8, any other "
                    + "without it");
        }
        if (fp8 != null) {
            try {
                fp8.restore(saved);
            } catch (IllegalArgumentException e) {
                throw new FileFormatException(stateFile, "FP8 state", e.getMessage());
            }
        }
    }
}
