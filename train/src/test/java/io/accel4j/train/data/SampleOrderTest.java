package io.accel4j.train.data;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.train.data.SampleOrder.Mode;
import java.util.Arrays;
import java.util.stream.IntStream;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.LongRange;
import org.junit.jupiter.api.Test;

class SampleOrderTest {

    @Test
    void samplesPerEpochIsLlmcs() {
        // (N - 1) / (R*B*T): a batch reads B*T + 1 tokens
        assertThat(SampleOrder.samplesPerEpoch(100, 3, 11, 1)).isEqualTo(3);   // 99/33
        assertThat(SampleOrder.samplesPerEpoch(99, 3, 11, 1)).isEqualTo(2);    // 98/33
        assertThat(SampleOrder.samplesPerEpoch(100, 3, 11, 2)).isEqualTo(1);   // 99/66
        assertThat(SampleOrder.samplesPerEpoch(66, 3, 11, 2)).isZero();
        assertThat(SampleOrder.tokenOffset(5, 2, 3, 1, 4)).isEqualTo((5L * 4 + 1) * 6);
    }

    /** S = 4, seed 5489: the first outputs 3499211612, 581869302, 3890346734 (checked in Mt19937Test). */
    @Test
    void aSmallShuffleByHand() {
        // i = 3: j = 3499211612 mod 4 = 0 -> swap 3,0: [3,1,2,0]
        // i = 2: j =  581869302 mod 3 = 0 -> swap 2,0: [2,1,3,0]
        // i = 1: j = 3890346734 mod 2 = 0 -> swap 1,0: [1,2,3,0]
        // (3499211612 and 3890346734 are above 2^31: a signed remainder would be negative)
        SampleOrder order = new SampleOrder(4, Mode.SHUFFLED, 5489, 0);
        assertThat(new int[] {order.next(), order.next(), order.next(), order.next()}).containsExactly(1, 2, 3, 0);
    }

    @Property(tries = 200)
    void eachEpochIsAPermutation(@ForAll @IntRange(min = 1, max = 300) int samples,
                                 @ForAll @LongRange(min = 0, max = 0xFFFF_FFFFL) long seed) {
        SampleOrder order = new SampleOrder(samples, Mode.SHUFFLED, seed, 0);
        for (int epoch = 0; epoch < 3; epoch++) {
            int[] seen = new int[samples];
            for (int i = 0; i < samples; i++) {
                seen[i] = order.next();
            }
            Arrays.sort(seen);
            assertThat(seen).as("epoch %d, seed %d", epoch, seed).containsExactly(IntStream.range(0, samples).toArray());
        }
    }

    /** As llm.c: every epoch shuffles the identity afresh, with the one generator running on. */
    @Test
    void epochsShuffleTheIdentityWithTheContinuingStream() {
        int s = 37;
        SampleOrder order = new SampleOrder(s, Mode.SHUFFLED, 42, 0);
        Mt19937 rng = new Mt19937(42);
        for (int epoch = 0; epoch < 4; epoch++) {
            int[] expected = IntStream.range(0, s).toArray();
            SampleOrder.randomPermutation(expected, s, rng);
            int[] actual = new int[s];
            for (int i = 0; i < s; i++) {
                actual[i] = order.next();
            }
            assertThat(actual).as("epoch %d", epoch).containsExactly(expected);
            assertThat(order.position().epoch()).isEqualTo(epoch);
            assertThat(order.position().step()).isEqualTo(s);
        }
    }

    @Test
    void sequentialRepeats() {
        SampleOrder order = new SampleOrder(3, Mode.SEQUENTIAL, 42, 5);
        int[] got = IntStream.range(0, 7).map(i -> order.next()).toArray();
        assertThat(got).containsExactly(0, 1, 2, 0, 1, 2, 0);
        assertThat(order.position()).isEqualTo(new SampleOrder.Position(2, 1, new int[0]));
    }

    @Test
    void llmcModeSeedsEachRankWithSeedPlusRank() {
        int s = 50;
        int[] rank1 = take(new SampleOrder(s, Mode.SHUFFLED_LLMC, 42, 1), s);
        assertThat(rank1).containsExactly(take(new SampleOrder(s, Mode.SHUFFLED, 43, 0), s));
        assertThat(take(new SampleOrder(s, Mode.SHUFFLED, 42, 1), s))
                .as("shared-seed mode: every rank the same order")
                .containsExactly(take(new SampleOrder(s, Mode.SHUFFLED, 42, 0), s));
        assertThat(take(new SampleOrder(s, Mode.SHUFFLED_LLMC, 42, 0), s))
                .containsExactly(take(new SampleOrder(s, Mode.SHUFFLED, 42, 0), s));
    }

    @Property(tries = 50)
    void seekingToAPositionContinuesIdentically(@ForAll @IntRange(min = 1, max = 40) int samples,
                                                @ForAll @IntRange(min = 0, max = 130) int before,
                                                @ForAll Mode mode) {
        SampleOrder a = new SampleOrder(samples, mode, 7, 2);
        take(a, before);
        SampleOrder.Position p = a.position();
        int[] expected = take(a, 100);

        SampleOrder b = new SampleOrder(samples, mode, 7, 2);
        b.seek(p);
        assertThat(b.position()).isEqualTo(p);
        assertThat(take(b, 100)).containsExactly(expected);
    }

    @Test
    void badPositionsAreRefused() {
        SampleOrder order = new SampleOrder(5, Mode.SHUFFLED, 1, 0);
        assertThatThrownBy(() -> order.seek(new SampleOrder.Position(0, 6, new Mt19937(1).state())))
                .hasMessageContaining("outside");
        assertThatThrownBy(() -> order.seek(new SampleOrder.Position(0, 0, new int[0]))).hasMessageContaining("625");
        SampleOrder seq = new SampleOrder(5, Mode.SEQUENTIAL, 1, 0);
        assertThatThrownBy(() -> seq.seek(new SampleOrder.Position(0, 0, new int[625])))
                .hasMessageContaining("sequential");
        assertThatThrownBy(() -> new SampleOrder(0, Mode.SEQUENTIAL, 1, 0)).hasMessageContaining("samples");
    }

    private static int[] take(SampleOrder order, int n) {
        int[] out = new int[n];
        for (int i = 0; i < n; i++) {
            out[i] = order.next();
        }
        return out;
    }
}
