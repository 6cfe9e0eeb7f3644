package io.accel4j.fit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import io.accel4j.train.StepMetrics;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The data position of a checkpoint is global (samples consumed by all replicas): saved on one rank of batch 32 and
 * resumed on two ranks of batch 16 (and back), the run continues on the same rows as the uninterrupted one, within
 * the fp32 order of the replicas' average (the loss is a mean over the same 32 rows). Before, each rank skipped the
 * batches rank 0 had read: one rank's 4 batches became each replica's 4, 8 batches of 16 into the data instead of 4.
 * A version-1 state file (batches per rank) still resumes on the layout it was saved with, bit for bit.
 */
class DataPositionTest {

    @TempDir
    Path tmp;

    /** Two layouts' losses on the same rows: the replicas' mean in another fp32 order (LearnerTest measures ~1e-7). */
    static final double LOSS_REL = 1e-5;

    @Test
    void positionsConvertBetweenLayoutsAndRefuseWhatDoesNotDivide() {
        DataPosition p = DataPosition.after(6, 16, 2);
        assertThat(p.samples()).isEqualTo(192);
        assertThat(p.batchesPerReplica(32, 1)).isEqualTo(6);
        assertThat(p.batchesPerReplica(8, 4)).isEqualTo(6);
        assertThatThrownBy(() -> p.batchesPerReplica(10, 4)).hasMessage("the checkpoint consumed 192 samples, which 4 "
                + "replica(s) × batch 10 = 40 do not divide: resume with a batch and data-parallel width whose "
                + "product divides it");
    }

    @Test
    void aCheckpointResumesUnderAnotherDataParallelWidthOnTheSameData() throws Exception {
        int first = 4, then = 4;
        List<StepMetrics> straight;
        try (Learner a = LearnerTest.learner(1, 32).build()) {
            straight = a.fit(first + then, null);
        }
        Path one = tmp.resolve("one"), two = tmp.resolve("two");
        try (Learner a = LearnerTest.learner(1, 32).build()) {
            a.fit(first, null);
            a.save(one);
        }
        try (Learner b = LearnerTest.learner(2, 16).build()) {
            b.resume(one);
            List<StepMetrics> rest = b.fit(then, null);
            for (int s = 0; s < then; s++) {
                double w = straight.get(first + s).trainLoss();
                assertThat(rest.get(s).trainLoss()).as("one rank → two, step %d", first + s).isCloseTo(w,
                        within(LOSS_REL * w));
            }
        }
        try (Learner a = LearnerTest.learner(2, 16).build()) {
            a.fit(first, null);
            a.save(two);
        }
        try (Learner b = LearnerTest.learner(1, 32).build()) {
            b.resume(two);
            List<StepMetrics> rest = b.fit(then, null);
            for (int s = 0; s < then; s++) {
                double w = straight.get(first + s).trainLoss();
                assertThat(rest.get(s).trainLoss()).as("two ranks → one, step %d", first + s).isCloseTo(w,
                        within(LOSS_REL * w));
            }
        }
        try (Learner b = LearnerTest.learner(4, 10).build()) { // 4 × 10 does not divide the 128 rows consumed
            assertThatThrownBy(() -> b.resume(one)).hasMessageContaining("data position")
                    .hasMessageContaining("consumed 128 samples, which 4 replica(s) × batch 10 = 40 do not divide");
        }
    }

    @Test
    void aVersionOneStateFileCountsBatchesPerRankAndStillResumes() throws Exception {
        List<StepMetrics> straight;
        try (Learner a = LearnerTest.learner(2, 16).build()) {
            straight = a.fit(5, null);
        }
        Path dir = tmp.resolve("v1");
        try (Learner a = LearnerTest.learner(2, 16).build()) {
            a.fit(3, null);
            a.save(dir);
        }
        Path state = dir.resolve(LearnerCheckpoint.STATE);
        byte[] b = Files.readAllBytes(state);
        ByteBuffer h = ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN);
        assertThat(h.getInt(4)).as("version").isEqualTo(2);
        assertThat(h.getLong(24)).as("samples").isEqualTo(3L * 16 * 2);
        h.putInt(4, 1).putLong(24, 3); // what version 1 wrote: the batches each rank had read
        Files.write(state, b);
        try (Learner c = LearnerTest.learner(2, 16).build()) {
            c.resume(dir);
            List<StepMetrics> rest = c.fit(2, null);
            for (int s = 0; s < 2; s++) {
                assertThat(rest.get(s).trainLoss()).isEqualTo(straight.get(3 + s).trainLoss());
            }
        }
    }
}
