package io.accel4j.train;

import java.io.IOException;
import java.nio.file.Path;
import java.util.function.IntPredicate;

/**
 * A {@link Trainer}'s whole run, one loop for every rank: steps until {@link Trainer#done()}, a checkpoint after each
 * step that {@code savesAfter} accepts (not after the last), the final validation (rank 0; every rank under ZeRO-3,
 * where it is a collective), the final checkpoint. Every rank saves at the same points, since under ZeRO saving is a
 * collective (below it, ranks other than 0 have nothing to write).
 */
public final class TrainingRun {

    private TrainingRun() {
    }

    /** What a {@link #run} tells its caller; a rank other than 0 only saves. */
    public interface Events {

        /** After each step. */
        void stepped(StepMetrics m) throws IOException;

        /** The final validation's record (rank 0, when the run validates). */
        void validated(StepMetrics m) throws IOException;

        /** A checkpoint is due: {@code trainer.save(dir)} with the caller's messages; returns the model file. */
        Path save(Trainer trainer) throws IOException;
    }

    /** Runs {@code trainer} to its last step as above; returns the final checkpoint's model file. */
    public static Path run(Trainer trainer, Events events, IntPredicate savesAfter) throws IOException {
        while (!trainer.done()) {
            StepMetrics m = trainer.trainStep();
            events.stepped(m);
            if (!trainer.done() && savesAfter.test(trainer.step())) {
                events.save(trainer);
            }
        }
        if (trainer.rank() == 0 || trainer.shardsParameters()) {
            double val = trainer.validate();
            if (trainer.rank() == 0 && Double.isFinite(val)) {
                events.validated(StepMetrics.validationOnly(trainer.step(), val));
            }
        }
        return events.save(trainer);
    }
}
