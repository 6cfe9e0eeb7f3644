package io.accel4j.fit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import io.accel4j.nn.Linear;
import io.accel4j.nn.Sequential;
import io.accel4j.optim.AdamW;
import io.accel4j.optim.LrSchedule;
import io.accel4j.train.StepMetrics;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * {@link LearnerBuilder#bucketMb}: DDP's all-reduce in buckets started while backward runs
 * ({@link BucketedDataParallel} over the model's children) trains 2 ranks to the same bits as one all-reduce after
 * backward, with and without accumulation and under ZeRO-1, and as 1 rank with twice the batch within the tolerance
 * of {@link LearnerTest}; what it cannot go with is refused before anything is built.
 */
class BucketedLearnerTest {

    private static final int STEPS = 20;
    /** One child per bucket: every child's all-reduce is started as soon as its backward ends. */
    private static final long PER_CHILD = 1;

    /** Three linear children of odd widths (3 → 17 → 13 → 3): three units, three buckets a step. */
    private static LearnerBuilder learner(int ranks, int B) {
        return Learner.of(() -> new Sequential("mlp", Linear.gelu("fc1", 3, 17), Linear.gelu("fc2", 17, 13),
                        Linear.of("fc3", 13, 3)))
                .features(3).classes(3).batch(B, 1).optimizer(AdamW.of(0.01f))
                .schedule(LrSchedule.warmupCosine(5e-3f, 3, STEPS, 0f)).gradClip(1f).ranks(ranks).threads(2)
                .seed(7).data(LearnerTest.data(13));
    }

    private record Run(List<StepMetrics> metrics, float[] params, int buckets) {}

    private static Run fit(LearnerBuilder b) {
        try (Learner l = b.build()) {
            List<StepMetrics> m = l.fit(STEPS, null);
            return new Run(m, LearnerTest.params(l), l.buckets());
        }
    }

    private static void sameBits(Run a, Run b) {
        assertThat(a.params()).containsExactly(b.params());
        for (int s = 0; s < STEPS; s++) {
            assertThat(a.metrics().get(s).trainLoss()).as("loss %d", s).isEqualTo(b.metrics().get(s).trainLoss());
            assertThat(a.metrics().get(s).gradNorm()).as("norm %d", s).isEqualTo(b.metrics().get(s).gradNorm());
        }
    }

    @Test
    void twoRanksBucketedAreTwoRanksWholeBitForBit() {
        // 2 ranks: each element's average is (a + b) / 2 however the vector is cut, so the buckets change no bit
        Run whole = fit(learner(2, 16));
        Run perChild = fit(learner(2, 16).bucketBytes(PER_CHILD));
        Run oneBucket = fit(learner(2, 16).bucketMb(25)); // nothing fills 25 MiB: started at reduce
        assertThat(whole.buckets()).isZero();
        assertThat(perChild.buckets()).as("a bucket per child per step").isEqualTo(3 * STEPS);
        assertThat(oneBucket.buckets()).isEqualTo(STEPS);
        sameBits(perChild, whole);
        sameBits(oneBucket, whole);
    }

    @Test
    void accumulationAndZeroOneKeepTheBits() {
        sameBits(fit(learner(2, 8).gradAccum(2).bucketBytes(PER_CHILD)), fit(learner(2, 8).gradAccum(2)));
        Run z1 = fit(learner(2, 16).zero(1).bucketBytes(PER_CHILD));
        assertThat(z1.buckets()).isEqualTo(3 * STEPS);
        sameBits(z1, fit(learner(2, 16)));
    }

    @Test
    void twoRanksBucketedAreOneRankWithTwiceTheBatch() {
        Run one = fit(learner(1, 32));
        Run two = fit(learner(2, 16).bucketBytes(PER_CHILD));
        // as LearnerTest: fp32 sums over 32 rows in another order, ~1e-7 relative per step, compounded by AdamW
        double lossTolerance = 1e-4;
        float paramTolerance = 2e-4f;
        for (int s = 0; s < STEPS; s++) {
            assertThat(two.metrics().get(s).trainLoss()).as("step %d", s)
                    .isCloseTo(one.metrics().get(s).trainLoss(), within(lossTolerance));
        }
        for (int i = 0; i < one.params().length; i++) {
            assertThat(two.params()[i]).as("parameter %d", i).isCloseTo(one.params()[i], within(paramTolerance));
        }
        assertThat(one.metrics().get(STEPS - 1).trainLoss()).isLessThan(one.metrics().get(0).trainLoss() * 0.9);
    }

    @Test
    void oneRankIgnoresBucketsAndWhatCannotBucketIsRefused() {
        sameBits(fit(learner(1, 16).bucketBytes(PER_CHILD)), fit(learner(1, 16)));
        assertThatThrownBy(() -> learner(2, 8).bucketMb(-1)).hasMessageContaining("bucketMb must be >= 0");
        assertThatThrownBy(() -> learner(2, 8).zero(2).bucketMb(1).build())
                .hasMessageContaining("bucketMb").hasMessageContaining("zero(2)");
        assertThatThrownBy(() -> learner(2, 8).gradientStorage(io.accel4j.core.DType.BF16).bucketMb(1).build())
                .hasMessageContaining("bucketMb").hasMessageContaining("gradientStorage(BF16)");
        assertThatThrownBy(() -> Learner.of(() -> Linear.of("fc", 3, 3)).features(3).classes(3).ranks(2)
                .bucketMb(1).data(LearnerTest.data(1)).build())
                .hasMessageContaining("bucketMb").hasMessageContaining("Sequential");
    }
}
