package io.accel4j.cli.train;

import io.accel4j.cli.CliException;
import io.accel4j.cli.IoMessages;
import io.accel4j.train.checkpoint.CheckpointFiles;
import io.accel4j.train.io.AtomicWrite;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.function.Function;
import java.util.regex.Pattern;

/**
 * A training run's directory on the lead rank: refuses to replace another run's checkpoint or metrics unless asked
 * ({@code --overwrite}), removes the temporary files a killed save left, and when the run fails before its first
 * checkpoint removes what it made there (the generated dataset, an empty metrics file, the directory if it made it
 * and it is empty again), so that nothing but a failed run's results is lost and nothing useless stays.
 */
final class RunDirectory {

    /** {@link AtomicWrite}'s temporary files ({@code .NAME.HEX.tmp}) of the files a run writes in its directory. */
    private static final Pattern LEFTOVER = Pattern.compile(
            "\\.(?:(?:model|state)_\\d+\\.bin|" + Pattern.quote(CheckpointFiles.POINTER) + "|"
                    + Pattern.quote(RunConfig.FILE) + "|metrics\\.jsonl|train\\.bin|val\\.bin|loss\\.png)"
                    + "(?:\\.[0-9a-f]+)?\\.tmp");

    private final Path dir;
    private final boolean created;
    private final List<Path> generated = new ArrayList<>();
    private Path metrics;

    private RunDirectory(Path dir, boolean created) {
        this.dir = dir;
        this.created = created;
    }

    /**
     * A usage error (through {@code usage}) when a new run ({@code resuming} false, or resuming into another
     * directory) would replace the checkpoint in {@code dir} or the metrics in {@code metrics} without
     * {@code overwrite}; names the directory, the checkpoint's step and what to do.
     *
     * @param metricsFlag how the user named the metrics file: "--metrics-out FILE" or null for the default one
     */
    static void checkNotAnotherRun(Path dir, boolean resuming, boolean overwrite, Path metrics, String metricsFlag,
                                   Function<String, RuntimeException> usage) {
        if (overwrite) {
            return;
        }
        Path pointer = dir.resolve(CheckpointFiles.POINTER);
        if (!resuming && Files.exists(pointer)) {
            throw usage.apply("--out " + dir + " holds the checkpoint of another run (step " + step(pointer)
                    + "): continue it with --resume " + dir + ", start over there with --overwrite, or choose "
                    + "another --out");
        }
        if (!resuming && Files.isRegularFile(metrics) && size(metrics) > 0) {
            throw usage.apply((metricsFlag != null ? metricsFlag + " exists" : "--out " + dir + " holds "
                    + metrics.getFileName() + " of another run") + " (" + size(metrics) + " bytes): continue that "
                    + "run with --resume, replace it with --overwrite, or choose another "
                    + (metricsFlag != null ? "--metrics-out" : "--out"));
        }
    }

    /** The step the pointer names, or "unreadable" when it does not parse (the message only shows it). */
    private static String step(Path pointer) {
        Properties p = new Properties();
        try (var in = Files.newBufferedReader(pointer, StandardCharsets.UTF_8)) {
            p.load(in);
            return p.getProperty("step", "unknown");
        } catch (IOException | IllegalArgumentException e) {
            return "unreadable";
        }
    }

    private static long size(Path p) {
        try {
            return Files.size(p);
        } catch (IOException e) {
            return 0;
        }
    }

    /**
     * Creates {@code dir} if missing and removes the temporary files an interrupted save left there, saying so on
     * {@code w}; with {@code overwrite} also removes the checkpoint of the run it replaces.
     */
    static RunDirectory open(Path dir, boolean overwrite, PrintWriter w) {
        boolean created = !Files.exists(dir);
        try {
            Files.createDirectories(dir);
        } catch (IOException e) {
            throw new CliException("cannot create the run directory " + dir + ": " + IoMessages.describe(e, dir), e);
        }
        RunDirectory run = new RunDirectory(dir, created);
        try {
            List<String> removed = run.removeLeftovers();
            if (!removed.isEmpty()) {
                w.println("removed " + removed.size() + " temporary file" + (removed.size() == 1 ? "" : "s")
                        + " an interrupted save left in " + dir + ": " + String.join(", ", removed));
            }
            if (overwrite && Files.exists(dir.resolve(CheckpointFiles.POINTER))) {
                String step = step(dir.resolve(CheckpointFiles.POINTER));
                Files.delete(dir.resolve(CheckpointFiles.POINTER));
                removeCheckpointFiles(dir);
                w.println("--overwrite: removed the checkpoint (step " + step + ") of the run that was in " + dir);
            }
        } catch (IOException e) {
            throw new CliException("cannot tidy the run directory " + dir + ": " + IoMessages.describe(e, dir), e);
        }
        return run;
    }

    private List<String> removeLeftovers() throws IOException {
        List<String> removed = new ArrayList<>();
        try (DirectoryStream<Path> files = Files.newDirectoryStream(dir, ".*.tmp")) {
            for (Path p : files) {
                String name = p.getFileName().toString();
                if (LEFTOVER.matcher(name).matches() && Files.isRegularFile(p)) {
                    Files.delete(p);
                    removed.add(name);
                }
            }
        }
        removed.sort(null);
        return removed;
    }

    private static void removeCheckpointFiles(Path dir) throws IOException {
        try (DirectoryStream<Path> files = Files.newDirectoryStream(dir, "{model,state}_*.bin")) {
            for (Path p : files) {
                Files.deleteIfExists(p);
            }
        }
    }

    /** The directory. */
    Path dir() {
        return dir;
    }

    /** {@code file} was written by this run from generated data: removed if the run fails before a checkpoint. */
    void generated(Path file) {
        generated.add(file);
    }

    /** The run's metrics file: removed if the run fails while it is still empty. */
    void metrics(Path file) {
        metrics = file;
    }

    /**
     * After a failure: when the directory has no checkpoint, removes the generated dataset, an empty metrics file and
     * the directory itself if this run created it and it is empty now. Best effort: a failure here is not reported
     * over the run's own.
     */
    void failed() {
        if (Files.exists(dir.resolve(CheckpointFiles.POINTER))) {
            return; // a resumable run: keep everything
        }
        try {
            for (Path p : generated) {
                Files.deleteIfExists(p);
            }
            if (metrics != null && Files.isRegularFile(metrics) && Files.size(metrics) == 0) {
                Files.delete(metrics);
            }
            if (created) {
                try (var left = Files.list(dir)) {
                    if (left.findAny().isEmpty()) {
                        Files.delete(dir);
                    }
                }
            }
        } catch (IOException e) {
            // the run's failure is the message that matters
        }
    }

    /**
     * When resuming at {@code step}: rewrites {@code metrics} (atomically) without the records of step
     * {@code step} and later, which the interrupted run wrote after its checkpoint and the resumed run writes again;
     * lines that are not step records are kept. Returns the lines kept.
     */
    static List<String> truncateMetrics(Path metrics, int step) throws IOException {
        if (!Files.exists(metrics)) {
            return List.of();
        }
        List<String> kept = new ArrayList<>();
        boolean dropped = false;
        for (String line : Files.readAllLines(metrics, StandardCharsets.UTF_8)) {
            int s = recordStep(line);
            if (s >= step) {
                dropped = true;
            } else {
                kept.add(line);
            }
        }
        if (dropped) {
            StringBuilder sb = new StringBuilder();
            kept.forEach(l -> sb.append(l).append('\n'));
            byte[] bytes = sb.toString().getBytes(StandardCharsets.UTF_8);
            AtomicWrite.write(metrics, ch -> {
                ByteBuffer b = ByteBuffer.wrap(bytes);
                while (b.hasRemaining()) {
                    ch.write(b);
                }
            });
        }
        return kept;
    }

    /** The step of a metrics record ({@code {"step":N,…}}), or -1 for any other line. */
    private static int recordStep(String line) {
        java.util.regex.Matcher m = Pattern.compile("^\\{\"step\":(\\d{1,9})[,}]").matcher(line);
        return m.find() ? Integer.parseInt(m.group(1)) : -1;
    }

    /** One metrics record, flushed; a failure names the file, the step and the last complete checkpoint. */
    static void record(java.io.BufferedWriter json, io.accel4j.train.StepMetrics m, String extra, Path metrics,
                       int step, Path dir, int lastSaved) {
        try {
            String line = m.toJson(); // the strategy's fields (e.g. async's staleness) before the closing brace
            json.write(extra.isEmpty() ? line : line.substring(0, line.length() - 1) + extra + "}");
            json.newLine();
            json.flush();
        } catch (IOException e) {
            throw new CliException((IoMessages.diskFull(e) ? "disk full while writing " : "cannot write ") + metrics
                    + " at step " + step + ": " + IoMessages.describe(e, metrics) + "; "
                    + lastCheckpoint(dir, lastSaved), e);
        }
    }

    /**
     * The error of a checkpoint of step {@code step} that could not be written in {@code dir}: the step, the problem
     * and the last complete checkpoint ({@code lastSaved}, or −1: none yet).
     */
    static CliException saveFailed(IOException e, int step, Path dir, int lastSaved) {
        return new CliException((IoMessages.diskFull(e) ? "disk full while writing the checkpoint of step "
                : "cannot write the checkpoint of step ") + step + " in " + dir + ": " + IoMessages.describe(e)
                + "; " + lastCheckpoint(dir, lastSaved), e);
    }

    private static String lastCheckpoint(Path dir, int step) {
        return step >= 0 ? "the last complete checkpoint is step " + step + " (--resume " + dir + " continues from it)"
                : "no checkpoint of this run was written yet";
    }

    /** The metrics records among {@code lines} (other lines are the user's and skipped). */
    static List<io.accel4j.train.StepMetrics> parse(List<String> lines) {
        List<io.accel4j.train.StepMetrics> records = new ArrayList<>();
        for (String line : lines) {
            try {
                records.add(io.accel4j.train.StepMetrics.fromJson(line));
            } catch (IllegalArgumentException e) {
                // not one of ours
            }
        }
        return records;
    }
}
