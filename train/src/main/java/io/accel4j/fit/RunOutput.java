package io.accel4j.fit;

import io.accel4j.cli.train.LossPlot;
import io.accel4j.train.StepMetrics;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;

/**
 * What a {@link Learner}'s run leaves in its output directory (none: nothing): one {@code metrics.jsonl} line per step,
 * appended as it ends, and {@code loss.png} after each {@link Learner#fit}, the loss against the uniform guess's
 * {@code ln(classes)}. Only the run's rank 0 writes.
 */
final class RunOutput {

    private final Path out;
    private final int classes;

    /** Into {@code out} (null: nothing) for a loss over {@code classes} classes. */
    RunOutput(Path out, int classes) {
        this.out = out;
        this.classes = classes;
    }

    /** Whether it writes anything (a directory was given). */
    boolean writes() {
        return out != null;
    }

    /**
     * Appends {@code m} to {@code metrics.jsonl}, with the strategy's fields {@code extra} ({@code ,"name":value…},
     * {@link Learner#strategyJson}; may be empty) before the closing brace, as the CLI's lines.
     */
    void append(StepMetrics m, String extra) {
        if (out == null) {
            return;
        }
        try {
            Files.createDirectories(out);
            try (Writer w = Files.newBufferedWriter(out.resolve("metrics.jsonl"), StandardCharsets.UTF_8,
                    StandardOpenOption.CREATE, StandardOpenOption.APPEND)) {
                String line = m.toJson();
                w.write(extra.isEmpty() ? line : line.substring(0, line.length() - 1) + extra + "}");
                w.write('\n');
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write " + out.resolve("metrics.jsonl") + ": " + e.getMessage(), e);
        }
    }

    /** Writes {@code loss.png} of {@code history}, titled by {@code description}. */
    void plot(List<StepMetrics> history, String description) {
        if (out == null || history.isEmpty()) {
            return;
        }
        try {
            LossPlot.write(out.resolve("loss.png"), history, Math.log(classes), "uniform guess",
                    "accel4j: " + description);
        } catch (IOException | RuntimeException e) {
            throw new IllegalStateException("cannot write " + out.resolve("loss.png") + ": " + e.getMessage(), e);
        }
    }
}
