package io.accel4j.pipeline;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.accel4j.fit.Learner;
import io.accel4j.fit.LearnerBuilder;
import io.accel4j.nn.Gpt2Blocks;
import io.accel4j.optim.AdamW;
import io.accel4j.optim.LrSchedule;
import io.accel4j.train.StepMetrics;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Checkpoints resume under any layout: one run of GPT-2 (tiny) handed on every two steps through tp=2, pp=2,
 * tp=2 × pp=2, dp=2 and one rank — each resuming the previous one's checkpoint (the whole model, the whole AdamW state,
 * the step and the global data position) — trains as one rank does straight through, within fp32's summation order
 * of the layouts (1e-5 relative per step, the bound); resumed on the layout it was saved on, bit for bit
 * (PipelineCheckpointTest, TensorParallelLearnerTest).
 */
class LayoutResumeTest {

    @TempDir
    Path tmp;

    static final int M = PipelineGpt2Test.M, EACH = 2;
    /** fp32 sums in another order per layout (row-parallel partial sums, the tied halves, the replicas' mean). */
    static final double LOSS_REL = 1e-5;

    static LearnerBuilder of(Supplier<io.accel4j.nn.Module> model) {
        return Learner.of(model).tokens(PipelineGpt2Test.TINY.V()).classes(PipelineGpt2Test.TINY.V())
                .parameterOrder(Gpt2Blocks.LLMC_ORDER).batch(PipelineGpt2Test.B, PipelineGpt2Test.T)
                .optimizer(AdamW.of(0.01f)).schedule(LrSchedule.constant(3e-3f)).gradClip(1f).threads(2).seed(11)
                .data(PipelineGpt2Test.tokens(PipelineGpt2Test.TINY.V(), 3));
    }

    record Layout(String name, Supplier<LearnerBuilder> builder) {}

    @Test
    void aRunHandedOnThroughEveryLayoutTrainsAsOneRankStraightThrough() throws Exception {
        var c = PipelineGpt2Test.TINY;
        List<Layout> layouts = List.of(
                new Layout("tp=2", () -> of(() -> Gpt2Blocks.parallelBody(c)).tensorParallel(2).ranks(2)
                        .gradAccum(M)),
                new Layout("pp=2", () -> of(() -> Gpt2Blocks.body(c)).pipeline(Gpt2Stages.of(c), 2, M,
                        Schedule.ONE_F_ONE_B)),
                new Layout("tp=2 x pp=2", () -> of(() -> Gpt2Blocks.body(c)).pipeline(Gpt2Stages.parallel(c), 2, M,
                        Schedule.GPIPE).tensorParallel(2)),
                new Layout("dp=2", () -> of(() -> Gpt2Blocks.body(c)).ranks(2).gradAccum(M / 2)),
                new Layout("one rank", () -> of(() -> Gpt2Blocks.body(c)).gradAccum(M)));
        List<StepMetrics> straight;
        try (Learner one = of(() -> Gpt2Blocks.body(c)).gradAccum(M).build()) {
            straight = one.fit(EACH * layouts.size(), null);
        }
        List<StepMetrics> handed = new ArrayList<>();
        Path previous = null;
        for (int i = 0; i < layouts.size(); i++) {
            try (Learner l = layouts.get(i).builder().get().build()) {
                if (previous != null) {
                    l.resume(previous);
                }
                assertThat(l.step()).as(layouts.get(i).name()).isEqualTo(EACH * i);
                handed.addAll(l.fit(EACH, null));
                previous = tmp.resolve("after-" + i);
                l.save(previous);
            }
        }
        double worst = 0;
        for (int s = 0; s < straight.size(); s++) {
            double w = straight.get(s).trainLoss(), g = handed.get(s).trainLoss();
            worst = Math.max(worst, Math.abs(g - w) / w);
            assertThat(g).as("step %d on %s", s, layouts.get(s / EACH).name()).isCloseTo(w, within(LOSS_REL * w));
        }
        System.out.printf("tp2 -> pp2 -> tp2xpp2 -> dp2 -> one rank vs one rank straight: loss %.2e relative at "
                + "worst%n", worst);
    }
}
