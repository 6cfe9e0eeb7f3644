package io.accel4j.pipeline;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import io.accel4j.fit.Learner;
import io.accel4j.fit.LearnerBuilder;
import io.accel4j.train.StepMetrics;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * ZeRO-1 inside a pipeline's data-parallel group: dp=2 × pp=2 with each stage's optimizer state sharded over its two
 * replicas trains bit for bit as the same layout under DDP (each replica updates its chunk of the stage, an all-gather
 * hands out the rest; AdamW's result does not depend on the cut), so within fp32's summation order of one rank
 * accumulating both replicas' micro-batches; its checkpoint gathers the shards, so it is byte for byte DDP's (the
 * whole model and whole optimizer state), and resumes on one rank and at the same layout.
 */
class PipelineZeroTest {

    @TempDir
    Path tmp;

    static final int M = 2, STEPS = 6;

    static LearnerBuilder dpPp(int zero) {
        return PipelineGpt2Test.gpt2().ranks(4).pipeline(Gpt2Stages.of(PipelineGpt2Test.TINY), 2, M,
                Schedule.ONE_F_ONE_B).zero(zero);
    }

    @Test
    void zeroOneInThePipelinesDataGroupIsDdpBitForBitAndCheckpointsWhole() throws Exception {
        List<StepMetrics> ddp, zero, one;
        Path dDdp = tmp.resolve("ddp"), dZero = tmp.resolve("zero");
        try (Learner a = dpPp(0).build()) {
            ddp = a.fit(STEPS, null);
            a.save(dDdp);
        }
        try (Learner a = dpPp(1).build()) {
            assertThat(a.describe()).contains("2 data-parallel replicas (ZeRO-1)");
            zero = a.fit(STEPS, null);
            a.save(dZero);
        }
        try (Learner a = PipelineGpt2Test.gpt2().gradAccum(2 * M).build()) {
            one = a.fit(STEPS + 2, null);
        }
        for (int s = 0; s < STEPS; s++) {
            assertThat(zero.get(s).trainLoss()).as("step %d", s).isEqualTo(ddp.get(s).trainLoss());
            assertThat(zero.get(s).gradNorm()).as("step %d", s).isEqualTo(ddp.get(s).gradNorm());
            // fp32 sums in another order (the replicas' average, the tied gradient's halves)
            assertThat(zero.get(s).trainLoss()).isCloseTo(one.get(s).trainLoss(),
                    within(1e-5 * one.get(s).trainLoss()));
        }
        for (String f : List.of("model.bin", "state.bin")) {
            assertThat(Files.readAllBytes(dZero.resolve(f))).as(f).isEqualTo(Files.readAllBytes(dDdp.resolve(f)));
        }
        try (Learner b = dpPp(1).build()) { // the same layout: the same bits
            b.resume(dZero);
            List<StepMetrics> more = b.fit(2, null);
            try (Learner c = dpPp(1).build()) {
                List<StepMetrics> straight = c.fit(STEPS + 2, null);
                for (int s = 0; s < 2; s++) {
                    assertThat(more.get(s).trainLoss()).isEqualTo(straight.get(STEPS + s).trainLoss());
                }
            }
        }
        try (Learner b = PipelineGpt2Test.gpt2().gradAccum(2 * M).build()) { // on one rank
            b.resume(dZero);
            List<StepMetrics> more = b.fit(2, null);
            for (int s = 0; s < 2; s++) {
                assertThat(more.get(s).trainLoss()).isCloseTo(one.get(STEPS + s).trainLoss(),
                        within(1e-5 * one.get(STEPS + s).trainLoss()));
            }
        }
    }

    @Test
    void zeroNeedsReplicasAndStageOne() {
        assertThatThrownBy(() -> PipelineGpt2Test.gpt2().pipeline(Gpt2Stages.of(PipelineGpt2Test.TINY), 2, M,
                Schedule.ONE_F_ONE_B).zero(1).build()).hasMessageContaining("ZeRO-1 shards each stage's optimizer "
                + "state over the pipeline's data-parallel replicas, but 2 ranks of 2 stages make one: ask for "
                + "ranks(4) or more");
        assertThatThrownBy(() -> dpPp(2).build()).hasMessageContaining("does not combine with ZeRO-2");
    }
}
