package io.accel4j.fit;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.collectives.InProcessGroup;
import io.accel4j.nn.Linear;
import io.accel4j.nn.Sequential;
import io.accel4j.optim.AdamW;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@link Learner#checkReplicas}: data-parallel ranks that hold the same parameters pass (in-process ranks from one
 * seed; ranks of one learner each, over a communicator, from the same values), and ranks one of whose parameters
 * differs in a single bit fail on every rank, naming the checksum — before any step could average them.
 */
class LearnerReplicaCheckTest {

    private static LearnerBuilder mlp(int zero) {
        return Learner.of(() -> new Sequential("mlp", Linear.gelu("fc1", 3, 17), Linear.of("fc2", 17, 3)))
                .features(3).classes(3).batch(8, 1).optimizer(AdamW.of(0.01f)).zero(zero)
                .data(LearnerTest.data(9));
    }

    @ParameterizedTest(name = "ZeRO-{0}")
    @ValueSource(ints = {0, 1})
    void inProcessRanksFromOneSeedAreReplicas(int zero) {
        try (Learner l = mlp(zero).ranks(3).threads(3).build()) {
            l.checkReplicas();
            l.fit(2, null);
            l.checkReplicas();
        }
    }

    /** Rank 1 of 2 loads the same values but for one bit of one parameter ({@code flip}: whether it does). */
    private static List<String> twoRanks(boolean flip) {
        try (InProcessGroup g = InProcessGroup.create(2, Duration.ofSeconds(30))) {
            return g.run(comm -> {
                try (Learner l = mlp(0).communicator(comm).threads(1).build();
                     Arena a = Arena.ofConfined()) {
                    long n = l.wholeTable().count();
                    MemorySegment values = a.allocate(n * Float.BYTES, 64);
                    for (long i = 0; i < n; i++) {
                        values.setAtIndex(ValueLayout.JAVA_FLOAT, i, (float) Math.sin(i));
                    }
                    if (flip && comm.rank() == 1) {
                        long k = n / 2;
                        int bits = Float.floatToRawIntBits(values.getAtIndex(ValueLayout.JAVA_FLOAT, k));
                        values.setAtIndex(ValueLayout.JAVA_FLOAT, k, Float.intBitsToFloat(bits ^ 1));
                    }
                    l.loadParameters(values);
                    try {
                        l.checkReplicas();
                        return "same";
                    } catch (IllegalStateException e) {
                        return e.getMessage();
                    }
                }
            });
        }
    }

    @Test
    void ranksOfOneLearnerEachPassFromTheSameValues() {
        assertThat(twoRanks(false)).containsOnly("same");
    }

    @Test
    void oneBitOfOneRankFailsEveryRankNamingItsChecksum() {
        List<String> outcome = twoRanks(true);
        assertThat(outcome).hasSize(2).allSatisfy(m -> assertThat(m)
                .startsWith("the ranks' parameters differ (rank ").contains("'s checksum is ")
                .contains("the same seed or model file"));
        assertThat(outcome.get(0)).isNotEqualTo(outcome.get(1)); // each names its own checksum
    }
}
