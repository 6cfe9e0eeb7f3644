package io.accel4j.fit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import io.accel4j.core.DType;
import io.accel4j.nn.Linear;
import io.accel4j.nn.Sequential;
import io.accel4j.nn.UnitScope;
import io.accel4j.optim.AdamW;
import io.accel4j.optim.LrSchedule;
import io.accel4j.optim.Sgd;
import io.accel4j.train.StepMetrics;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The Java API with 16-bit gradient storage ({@link LearnerBuilder#gradientStorage}): LearnerTest's model, each layer
 * in a unit of its own ({@link UnitScope#perChild}), trains to within a stated distance of fp32 gradients' loss; two
 * DDP ranks train as one rank with twice the batch within the roundings' tolerance; ZeRO-1 over 16-bit gradients is
 * DDP over them bit for bit and resumes bit for bit; the combinations not supported yet are refused naming both
 * options.
 */
class HalfGradientLearnerTest {

    private static final int STEPS = 30;
    /**
     * Train loss after 30 steps, 16-bit against fp32 gradients, absolute: each step's update sees gradients with one
     * rounding (relative ≤ 2⁻⁸ bf16); AdamW's step size depends on the gradient's sign and relative size only, so
     * the runs drift by ~lr·2⁻⁸ a step; measured well below 1e-2 (printed), bound 0.05 of a loss falling from ≈1.1.
     */
    private static final double LOSS_TOL = 0.05;
    /**
     * DDP against one rank at twice the batch, per step's train loss, absolute: three bf16 roundings (each rank's,
     * then the averaged chunk's) against one: 3·2⁻⁸ relative on the gradient, moving AdamW's update by at most lr·that
     * a step (lr 5e-3); over 30 steps bounded at 1e-2.
     */
    private static final double DDP_LOSS_TOL = 1e-2;

    static LearnerBuilder learner(int ranks, int B, DType gradients) {
        return Learner.of(() -> UnitScope.perChild(new Sequential("mlp", Linear.gelu("fc1", 3, 17),
                        Linear.of("fc2", 17, 3))))
                .features(3).classes(3).batch(B, 1).optimizer(AdamW.of(0.01f)).gradientStorage(gradients)
                .schedule(LrSchedule.warmupCosine(5e-3f, 3, 30, 0f)).gradClip(1f).ranks(ranks).threads(2).seed(5)
                .data(LearnerTest.data(9));
    }

    @Test
    void sixteenBitGradientsTrainLikeFp32OnesAndTwoRanksLikeOne() {
        List<StepMetrics> fp32, bf16, two;
        try (Learner a = learner(1, 32, DType.FP32).build()) {
            fp32 = a.fit(STEPS, null);
        }
        try (Learner b = learner(1, 32, DType.BF16).build()) {
            assertThat(b.network().gradientStorage()).isEqualTo(DType.BF16);
            assertThat(b.describe()).contains("AdamW over bf16 gradients");
            bf16 = b.fit(STEPS, null);
        }
        try (Learner c = learner(2, 16, DType.BF16).build()) {
            two = c.fit(STEPS, null);
        }
        double worst = 0, worstDdp = 0;
        for (int s = 0; s < STEPS; s++) {
            worst = Math.max(worst, Math.abs(bf16.get(s).trainLoss() - fp32.get(s).trainLoss()));
            worstDdp = Math.max(worstDdp, Math.abs(two.get(s).trainLoss() - bf16.get(s).trainLoss()));
        }
        System.out.printf("bf16 vs fp32 gradients: largest |train loss difference| %.3g; 2 ranks vs 1: %.3g%n", worst,
                worstDdp);
        assertThat(bf16.get(STEPS - 1).trainLoss()).isCloseTo(fp32.get(STEPS - 1).trainLoss(), within(LOSS_TOL));
        assertThat(bf16.get(STEPS - 1).trainLoss()).isLessThan(bf16.get(0).trainLoss() * 0.8);
        assertThat(worstDdp).isLessThanOrEqualTo(DDP_LOSS_TOL);
        assertThat(two.get(0).trainLoss()).isCloseTo(bf16.get(0).trainLoss(), within(1e-6));
    }

    @Test
    void zeroOneIsDdpBitForBitAndResumesBitForBit(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir)
            throws java.io.IOException {
        List<StepMetrics> ddp, zero;
        float[] pd, pz;
        try (Learner a = learner(2, 16, DType.BF16).build()) {
            ddp = a.fit(STEPS, null);
            pd = LearnerTest.params(a);
        }
        try (Learner b = learner(2, 16, DType.BF16).zero(1).build()) {
            assertThat(b.describe()).contains("ZeRO-1").contains("AdamW over bf16 gradients");
            long count = b.network().table().count();
            assertThat(b.optimizerStateBytes()).as("the moments of rank 0's chunk only")
                    .isEqualTo(8 * io.accel4j.collectives.Chunks.length(count, 2, 0));
            zero = b.fit(STEPS, null);
            pz = LearnerTest.params(b);
        }
        assertThat(pz).containsExactly(pd);
        for (int s = 0; s < STEPS; s++) {
            assertThat(zero.get(s).trainLoss()).as("step %d", s).isEqualTo(ddp.get(s).trainLoss());
            assertThat(zero.get(s).gradNorm()).as("step %d", s).isEqualTo(ddp.get(s).gradNorm());
        }
        java.nio.file.Path ckpt = dir.resolve("zero1");
        try (Learner a = learner(2, 16, DType.BF16).zero(1).build()) {
            a.fit(11, null);
            a.save(ckpt);
        }
        try (Learner c = learner(2, 16, DType.BF16).zero(1).seed(99).build()) { // the checkpoint's parameters win
            c.resume(ckpt);
            List<StepMetrics> rest = c.fit(STEPS - 11, null);
            for (int s = 0; s < rest.size(); s++) {
                assertThat(rest.get(s).trainLoss()).as("step %d", 11 + s).isEqualTo(zero.get(11 + s).trainLoss());
            }
            assertThat(LearnerTest.params(c)).containsExactly(pz);
        }
        try (Learner d = learner(2, 16, DType.BF16).seed(99).build()) { // and DDP resumes ZeRO-1's checkpoint
            d.resume(ckpt);
            d.fit(STEPS - 11, null);
            assertThat(LearnerTest.params(d)).containsExactly(pz);
        }
    }

    @Test
    void anOffloadedOptimizerReadsTheWidenedGradientsBitForBit() {
        for (int zero = 0; zero <= 1; zero++) { // DDP and ZeRO-1 over 2 ranks
            List<StepMetrics> device, host;
            float[] pd, ph;
            try (Learner a = learner(2, 16, DType.BF16).zero(zero).build()) {
                device = a.fit(STEPS, null);
                pd = LearnerTest.params(a);
            }
            try (Learner b = learner(2, 16, DType.BF16).zero(zero).offloadOptimizer().build()) {
                assertThat(b.describe()).contains("offloaded to host memory");
                host = b.fit(STEPS, null);
                ph = LearnerTest.params(b);
            }
            assertThat(ph).as("ZeRO %d", zero).containsExactly(pd);
            for (int s = 0; s < STEPS; s++) {
                assertThat(host.get(s).trainLoss()).as("ZeRO %d, step %d", zero, s)
                        .isEqualTo(device.get(s).trainLoss());
            }
        }
    }

    @Test
    void fp16GradientsTrainWithLossScalingLikeFp32Ones() {
        List<StepMetrics> fp32, fp16;
        try (Learner a = learner(2, 16, DType.FP32).precision(DType.FP16).build()) {
            fp32 = a.fit(STEPS, null);
        }
        try (Learner a = learner(2, 16, DType.FP16).precision(DType.FP16).build()) {
            fp16 = a.fit(STEPS, null);
        }
        StepMetrics last = fp16.get(STEPS - 1);
        System.out.printf("fp16 precision, fp16 gradients: loss %.4f (fp32 gradients %.4f), %d skipped steps (%d), "
                + "loss scale %s%n", last.trainLoss(), fp32.get(STEPS - 1).trainLoss(), last.skippedSteps(),
                fp32.get(STEPS - 1).skippedSteps(), last.lossScale());
        assertThat(last.lossScale()).isPositive();
        assertThat(last.trainLoss()).isCloseTo(fp32.get(STEPS - 1).trainLoss(), within(LOSS_TOL));
    }

    @Test
    void whatCannotTakeSixteenBitGradientsIsRefusedNamingBoth() {
        record Case(LearnerBuilder b, String message) {}
        for (Case c : List.of(
                new Case(learner(2, 8, DType.BF16).zero(2), "gradientStorage(BF16) does not go with zero(2) yet: "
                        + "drop one of them"),
                new Case(learner(2, 8, DType.BF16).zero(3), "gradientStorage(BF16) does not go with zero(3) yet: "
                        + "drop one of them"),
                new Case(learner(1, 8, DType.BF16).optimizer(Sgd.of(0.9f, 0f)), "gradientStorage(BF16) does not go "
                        + "with optimizer(Sgd) yet: drop one of them"),
                new Case(learner(1, 8, DType.FP16), "gradientStorage(FP16) needs precision(FP16), whose loss scaling "
                        + "keeps small gradients representable (this learner is FP32): store them in BF16"),
                new Case(learner(1, 8, DType.FP8_E4M3), "gradientStorage(FP8_E4M3): gradients are stored in FP32, "
                        + "BF16 or FP16"))) {
            assertThatThrownBy(c.b()::build).isInstanceOf(IllegalArgumentException.class).hasMessage(c.message());
        }
        // a tree without a unit that opens and closes its gradients: refused when the network is built
        LearnerBuilder flat = Learner.of(() -> new Sequential("mlp", Linear.gelu("fc1", 3, 17), Linear.of("fc2", 17,
                3))).features(3).classes(3).batch(8, 1).gradientStorage(DType.BF16).threads(1)
                .data(LearnerTest.data(9));
        assertThatThrownBy(flat::build).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("this tree has no such unit: wrap its blocks in UnitScopes");
    }
}
