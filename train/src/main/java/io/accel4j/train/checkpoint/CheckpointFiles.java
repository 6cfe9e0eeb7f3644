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
     * Which checkpoints a directory keeps when a new one is committed: the newest {@code keep} (the new one among
     * them), and every one whose step is a multiple of {@code keepEvery} (0: none besides).
     *
     * @param keep      the newest checkpoints kept, at least 1
     * @param keepEvery also keep every checkpoint whose step is a multiple of this; 0: none
     */
    public record Retention(int keep, int keepEvery) {
        /** Only the latest checkpoint. */
        public static final Retention LATEST = new Retention(1, 0);

        public Retention {
            if (keep < 1) {
                throw new IllegalArgumentException("keep must be >= 1 (the latest checkpoint), got " + keep);
            }
            if (keepEvery < 0) {
                throw new IllegalArgumentException("keepEvery must be >= 0 (0: none), got " + keepEvery);
            }
        }
    }

    /** A checkpoint file's name: {@code model_} or {@code state_}, the zero-padded step, {@code .bin}. */
    private static final java.util.regex.Pattern FILE = java.util.regex.Pattern.compile("(model|state)_(\\d{8,10})\\.bin");

    /**
     * The latest complete checkpoint in {@code dir}, as its {@value #POINTER} names it. Every field must parse: the
     * step a number >= 0, the model and state plain file names inside {@code dir} (no path, no {@code ..}) of files
     * that exist.
     *
     * @throws NoSuchFileException when {@code dir} has no {@value #POINTER}
     * @throws FileFormatException when a field is missing or does not parse, or names a file outside {@code dir} or
     *                             one that does not exist
     */
    public static CheckpointFiles latest(Path dir) throws IOException {
        Path pointerFile = dir.resolve(POINTER);
        Properties p = new Properties();
        try (var in = Files.newBufferedReader(pointerFile, StandardCharsets.UTF_8)) {
            p.load(in);
        } catch (NoSuchFileException e) {
            throw new NoSuchFileException(pointerFile.toString(), null, "no checkpoint in " + dir + " (" + POINTER
                    + " is missing)");
        } catch (IllegalArgumentException | java.nio.charset.CharacterCodingException e) { // a bad \\u escape, not UTF-8
            throw new FileFormatException(pointerFile, "contents", "are not a properties file (" + e.getMessage()
                    + "): the file is corrupt");
        }
        step(pointerFile, p.getProperty("step"));
        return new CheckpointFiles(dir, member(dir, pointerFile, "model", p.getProperty("model")),
                member(dir, pointerFile, "state", p.getProperty("state")));
    }

    /** The pointer's step field: a number >= 0. */
    private static int step(Path pointerFile, String value) throws FileFormatException {
        if (value == null) {
            throw new FileFormatException(pointerFile, "step", "is missing: the file is corrupt");
        }
        try {
            int step = Integer.parseInt(value.strip());
            if (step >= 0) {
                return step;
            }
        } catch (NumberFormatException e) {
            // below
        }
        throw new FileFormatException(pointerFile, "step", "is '" + value + "', not a step number (>= 0): the file "
                + "is corrupt");
    }

    /** The file the pointer's {@code field} names: a plain name of an existing file in {@code dir}. */
    private static Path member(Path dir, Path pointerFile, String field, String name) throws FileFormatException {
        if (name == null || name.isBlank()) {
            throw new FileFormatException(pointerFile, field, "is missing: the file is corrupt");
        }
        if (name.contains("/") || name.contains("\\") || name.equals(".") || name.equals("..")
                || name.indexOf('\0') >= 0) {
            throw new FileFormatException(pointerFile, field, "is '" + name + "', not a file name in the run "
                    + "directory " + dir + ": the file is corrupt or was edited");
        }
        Path file = dir.resolve(name);
        if (!Files.isRegularFile(file)) {
            throw new FileFormatException(pointerFile, field, "names " + name + ", which is " + (Files.exists(file)
                    ? "not a regular file" : "missing") + " in " + dir + ": the checkpoint is incomplete");
        }
        return file;
    }

    /**
     * Makes these files, already written completely, the directory's latest checkpoint (step {@code step}): replaces
     * {@value #POINTER} atomically, then deletes every other checkpoint's files.
     */
    public void commit(int step) throws IOException {
        commit(step, Retention.LATEST);
    }

    /**
     * Makes these files, already written completely, the directory's latest checkpoint (step {@code step}): replaces
     * {@value #POINTER} atomically, then deletes the other checkpoints' files that {@code retention} does not keep
     * (and those of steps after {@code step}: a run that started over).
     */
    public void commit(int step, Retention retention) throws IOException {
        String pointer = "# the latest complete accel4j checkpoint\nstep=" + step + "\nmodel=" + model.getFileName()
                + "\nstate=" + state.getFileName() + "\n";
        AtomicWrite.write(dir.resolve(POINTER), ch -> ch.write(
                ByteBuffer.wrap(pointer.getBytes(StandardCharsets.UTF_8))));
        java.util.TreeSet<Integer> older = new java.util.TreeSet<>();
        java.util.List<Path> files = new java.util.ArrayList<>();
        try (DirectoryStream<Path> all = Files.newDirectoryStream(dir, "{model,state}_*.bin")) {
            for (Path p : all) {
                java.util.regex.Matcher m = FILE.matcher(p.getFileName().toString());
                if (m.matches() && !p.equals(model) && !p.equals(state)) {
                    files.add(p);
                    long s = Long.parseLong(m.group(2));
                    if (s < step) {
                        older.add((int) s);
                    }
                }
            }
        }
        java.util.Set<Integer> kept = new java.util.HashSet<>();
        for (Integer s : older.descendingSet()) {
            if (kept.size() + 1 >= retention.keep()) {
                break;
            }
            kept.add(s);
        }
        if (retention.keepEvery() > 0) {
            for (Integer s : older) {
                if (s % retention.keepEvery() == 0) {
                    kept.add(s);
                }
            }
        }
        for (Path p : files) {
            java.util.regex.Matcher m = FILE.matcher(p.getFileName().toString());
            m.matches();
            long s = Long.parseLong(m.group(2));
            if (!(s < step && kept.contains((int) s)) && Files.isRegularFile(p)) {
                try {
                    Files.deleteIfExists(p);
                } catch (IOException e) {
                    // the new checkpoint is committed; an old file that stays only takes space
                }
            }
        }
    }
}
