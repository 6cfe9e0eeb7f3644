package io.accel4j.train.checkpoint;

import io.accel4j.train.io.AtomicWrite;
import io.accel4j.train.io.FileFormatException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.Objects;
import java.util.Properties;

/**
 * The two files of one checkpoint in a checkpoint directory: {@code model_NNNNNNNN.bin} (an llm.c model file,
 * {@link LlmcCheckpoint}) and {@code state_NNNNNNNN.bin} ({@link TrainState}), NNNNNNNN the step, zero-padded. The
 * directory's {@value #POINTER} names the latest complete pair; it is replaced atomically only after both files are
 * written ({@link #commit}), so a run stopped mid-save leaves the previous checkpoint the latest.
 *
 * @param dir   the checkpoint directory
 * @param model the model file
 * @param state the trainer-state file
 */
public record CheckpointFiles(Path dir, Path model, Path state) {

    /** The file in a checkpoint directory that names the latest complete checkpoint. */
    public static final String POINTER = "checkpoint.properties";

    public CheckpointFiles {
        Objects.requireNonNull(dir, "dir");
        Objects.requireNonNull(model, "model");
        Objects.requireNonNull(state, "state");
    }

    /** The files step {@code step}'s checkpoint is written to in {@code dir}. */
    public static CheckpointFiles of(Path dir, int step) {
        if (step < 0) {
            throw new IllegalArgumentException("step must be >= 0, got " + step);
        }
        String name = String.format("%08d", step);
        return new CheckpointFiles(dir, dir.resolve("model_" + name + ".bin"), dir.resolve("state_" + name + ".bin"));
    }

    /**
     * The latest complete checkpoint in {@code dir}, as its {@value #POINTER} names it.
     *
     * @throws NoSuchFileException when {@code dir} has no {@value #POINTER}
     * @throws FileFormatException when the pointer does not name both files
     */
    public static CheckpointFiles latest(Path dir) throws IOException {
        Path pointerFile = dir.resolve(POINTER);
        Properties p = new Properties();
        try (var in = Files.newBufferedReader(pointerFile, StandardCharsets.UTF_8)) {
            p.load(in);
        } catch (NoSuchFileException e) {
            throw new NoSuchFileException(pointerFile.toString(), null, "no checkpoint in " + dir + " (" + POINTER
                    + " is missing)");
        }
        String modelName = p.getProperty("model"), stateName = p.getProperty("state");
        if (modelName == null || stateName == null) {
            throw new FileFormatException(pointerFile, "model/state", "is missing: the file is corrupt");
        }
        return new CheckpointFiles(dir, dir.resolve(modelName), dir.resolve(stateName));
    }

    /**
     * Makes these files, already written completely, the directory's latest checkpoint (step {@code step}): replaces
     * {@value #POINTER} atomically, then deletes every other checkpoint's files.
     */
    public void commit(int step) throws IOException {
        String pointer = "# the latest complete accel4j checkpoint\nstep=" + step + "\nmodel=" + model.getFileName()
                + "\nstate=" + state.getFileName() + "\n";
        AtomicWrite.write(dir.resolve(POINTER), ch -> ch.write(
                ByteBuffer.wrap(pointer.getBytes(StandardCharsets.UTF_8))));
        try (DirectoryStream<Path> old = Files.newDirectoryStream(dir, "{model,state}_*.bin")) {
            for (Path p : old) {
                if (!p.equals(model) && !p.equals(state)) {
                    Files.deleteIfExists(p);
                }
            }
        }
    }
}
