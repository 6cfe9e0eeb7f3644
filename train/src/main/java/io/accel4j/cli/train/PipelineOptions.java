package io.accel4j.cli.train;

import io.accel4j.pipeline.Schedule;
import io.accel4j.train.model.GptConfig;
import java.util.function.Function;
import picocli.CommandLine.Option;

/**
 * {@code train}'s pipeline-parallel options: the stages ({@code --pp}), the micro-batches per step
 * ({@code --micro-batches}) and their schedule ({@code --schedule-pp}); checked against the model before anything is
 * allocated. With {@code --pp 1} (the default) the options are absent and {@code train} runs as it always has.
 */
final class PipelineOptions {

    // no picocli default: a run without --pp saves no --pp in run.properties, as before the option existed
    @Option(names = "--pp", paramLabel = "P", description = "Pipeline-parallel stages: the model's transformer "
            + "blocks cut into P contiguous stages balanced by parameters (embedding in the first, head and loss in "
            + "the last), one rank each, in this process or one per mpirun process (default: 1, no pipeline).")
    Integer pp;
    /** The stages asked for (1 without --pp). */
    int stages = 1;
    @Option(names = "--micro-batches", paramLabel = "M", description = "With --pp: micro-batches of --batch "
            + "sequences per optimizer step (default: P).")
    Integer micro;
    @Option(names = "--schedule-pp", paramLabel = "gpipe|1f1b", description = "With --pp: GPipe (all forwards, "
            + "then all backwards) or 1F1B (at most P micro-batches of activations per stage; needs M >= P) "
            + "(default: 1f1b).")
    String schedule;

    /** Whether a pipeline was asked for: from the flag itself, so it is right before {@link #check} too. */
    boolean requested() {
        return pp != null && pp > 1;
    }

    /** The grad-accum the run was given (or restored from the run it resumes). */
    private int gradAccum = 1;

    /** The micro-batches per step: --micro-batches, else --grad-accum when > 1 (a resumed run's), else P. */
    int microBatches() {
        return micro != null ? micro : gradAccum > 1 ? gradAccum : stages;
    }

    /** The schedule asked for. */
    Schedule schedule() {
        return Schedule.named(schedule == null ? "1f1b" : schedule);
    }

    /**
     * Throws a usage error naming the flag and the numbers for a layout this model cannot take: P < 1, P larger than
     * the model's blocks, M < 1, M < P under 1F1B, an unknown schedule, --grad-accum other than M, and the pipeline
     * flags without {@code --pp}.
     */
    void check(GptConfig model, int gradAccum, Function<String, RuntimeException> usage) {
        stages = pp == null ? 1 : pp;
        this.gradAccum = gradAccum;
        if (stages < 1) {
            throw usage.apply("--pp must be >= 1, got " + stages);
        }
        if (!requested()) {
            if (micro != null || schedule != null) {
                throw usage.apply((micro != null ? "--micro-batches" : "--schedule-pp") + " needs --pp 2 or more");
            }
            return;
        }
        if (stages > model.L()) {
            throw usage.apply("--pp " + stages + " is larger than the model's " + model.L() + " layers (transformer "
                    + "blocks): each stage needs at least one");
        }
        if (microBatches() < 1) {
            throw usage.apply("--micro-batches must be >= 1, got " + microBatches());
        }
        if (gradAccum > 1 && gradAccum != microBatches()) {
            throw usage.apply("--grad-accum " + gradAccum + " and --micro-batches " + microBatches() + " disagree: a "
                    + "pipeline accumulates its micro-batches (give one of them)");
        }
        Schedule s;
        try {
            s = schedule();
        } catch (IllegalArgumentException e) {
            throw usage.apply("--schedule-pp: " + e.getMessage());
        }
        if (s == Schedule.ONE_F_ONE_B && microBatches() < stages) {
            throw usage.apply("--micro-batches " + microBatches() + " is fewer than --pp " + stages + ": 1F1B needs at "
                    + "least as many micro-batches as stages (or use --schedule-pp gpipe)");
        }
    }
}
