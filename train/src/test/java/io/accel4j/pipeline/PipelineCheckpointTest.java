package io.accel4j.pipeline;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.fit.Learner;
import io.accel4j.train.StepMetrics;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A pipeline's checkpoint is the whole model's: saved at pp=2 and resumed on one rank, or saved on one rank and
 * resumed at pp=2, the run continues as it would have without the interruption (the same losses within the fp32
 * summation order of the layouts, the same bits when resumed on the layout it was saved on).
 */
class PipelineCheckpointTest {

    @TempDir
    Path tmp;

    @Test
    void checkpointsMoveBetweenOneRankAndTwoStages() throws Exception {
        int M = 2, first = 3, then = 3;
        List<StepMetrics> straight;
        try (Learner a = PipelineGpt2Test.gpt2().pipeline(Gpt2Stages.of(PipelineGpt2Test.TINY), 2, M,
                Schedule.ONE_F_ONE_B).build()) {
            straight = a.fit(first + then, null);
        }
        Path pp = tmp.resolve("pp"), one = tmp.resolve("one");
        try (Learner a = PipelineGpt2Test.gpt2().pipeline(Gpt2Stages.of(PipelineGpt2Test.TINY), 2, M,
                Schedule.ONE_F_ONE_B).build()) {
            a.fit(first, null);
            a.save(pp);
        }
        try (Learner b = PipelineGpt2Test.gpt2().pipeline(Gpt2Stages.of(PipelineGpt2Test.TINY), 2, M,
                Schedule.GPIPE).build()) {
            b.resume(pp);
            assertThat(b.step()).isEqualTo(first);
            List<StepMetrics> rest = b.fit(then, null);
            for (int s = 0; s < then; s++) { // the same stages: the same bits (GPipe and 1F1B sum alike)
                assertThat(rest.get(s).trainLoss()).isEqualTo(straight.get(first + s).trainLoss());
            }
        }
        try (Learner c = PipelineGpt2Test.gpt2().gradAccum(M).build()) {
            c.resume(pp);
            List<StepMetrics> rest = c.fit(then, null);
            for (int s = 0; s < then; s++) { // fp32 sums in another order: 1e-8 measured
                assertThat(rest.get(s).trainLoss()).isCloseTo(straight.get(first + s).trainLoss(),
                        org.assertj.core.api.Assertions.within(1e-5 * straight.get(first + s).trainLoss()));
            }
            c.save(one);
        }
        try (Learner d = PipelineGpt2Test.gpt2().pipeline(Gpt2Stages.of(PipelineGpt2Test.TINY), 2, M,
                Schedule.ONE_F_ONE_B).build()) {
            d.resume(one);
            assertThat(d.step()).isEqualTo(first + then);
            List<StepMetrics> more = d.fit(1, null);
            assertThat(more.get(0).step()).isEqualTo(first + then);
            assertThat(more.get(0).trainLoss()).isFinite();
        }
    }

    /** dp=2 × pp=2: the first replica's stages write the whole model; the same layout resumes bit for bit. */
    @Test
    void replicatedPipelinesResumeBitForBit() throws Exception {
        int M = 2, first = 2, then = 2;
        List<StepMetrics> straight;
        try (Learner a = PipelineGpt2Test.gpt2().ranks(4).pipeline(Gpt2Stages.of(PipelineGpt2Test.TINY), 2, M,
                Schedule.ONE_F_ONE_B).build()) {
            straight = a.fit(first + then, null);
        }
        Path dir = tmp.resolve("dp2pp2");
        try (Learner a = PipelineGpt2Test.gpt2().ranks(4).pipeline(Gpt2Stages.of(PipelineGpt2Test.TINY), 2, M,
                Schedule.ONE_F_ONE_B).build()) {
            a.fit(first, null);
            a.save(dir);
        }
        try (Learner b = PipelineGpt2Test.gpt2().ranks(4).pipeline(Gpt2Stages.of(PipelineGpt2Test.TINY), 2, M,
                Schedule.GPIPE).build()) {
            b.resume(dir);
            assertThat(b.step()).isEqualTo(first);
            List<StepMetrics> rest = b.fit(then, null);
            for (int s = 0; s < then; s++) {
                assertThat(rest.get(s).trainLoss()).isEqualTo(straight.get(first + s).trainLoss());
            }
        }
    }
}
