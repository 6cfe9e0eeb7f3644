package io.accel4j.train.data;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

/** MT19937 against published reference outputs, and llm.c's (= PyTorch's) float conversions. */
class Mt19937Test {

    /**
     * The references are PyTorch's, which computes Box–Muller in double for n &lt; 16; llm.c (and this class) compute
     * radius·cos(θ) in float, with float log/sin/cos: a few fp32 roundings of values of order 1 (the radius), so the
     * error is a few ulps of 1 (~1e-7) whatever the sample's size — llm.c checks the match at 6 decimals (%f).
     */
    private static final double NORMAL_TOLERANCE = 1e-6;

    @Test
    void defaultSeedMatchesStdMt19937() {
        Mt19937 rng = new Mt19937(5489);
        assertThat(rng.nextUint32()).isEqualTo(3499211612L);
        assertThat(rng.nextUint32()).isEqualTo(581869302L);
        assertThat(rng.nextUint32()).isEqualTo(3890346734L);
        for (int i = 4; i < 10000; i++) {
            rng.nextInt();
        }
        assertThat(rng.nextUint32()).as("10000th output (C++ standard, [rand.predef])").isEqualTo(4123659995L);
    }

    /** The sequence printed in llm.c's llmc/rand.h for seed 137, identical to PyTorch's torch.manual_seed(137). */
    @Test
    void matchesLlmcAndPytorchForSeed137() {
        Mt19937 rng = new Mt19937(137);
        assertThat(new long[] {rng.nextUint32(), rng.nextUint32(), rng.nextUint32(), rng.nextUint32(),
            rng.nextUint32()}).containsExactly(4053805790L, 2173880614L, 380293709L, 1237255315L, 2986595568L);

        float[] t8 = new float[8];
        rng.normal(t8, 0, 8, 0f, 1f);
        assertClose(t8, 0.7947664260864258, 1.4369317293167114, -0.2292192131280899, 0.47556325793266296,
                -0.6334410905838013, -0.5791953802108765, -0.0925704762339592, -0.8659197092056274);
        assertThat(rng.nextUint32()).isEqualTo(2186503452L);

        float[] t16 = new float[16];
        rng.normal(t16, 0, 16, 0f, 1f);
        assertClose(t16, -1.2813878059387207, -2.646395683288574, -0.06569503247737885, 0.2180829495191574,
                -0.46536165475845337, -0.33108410239219666, 2.5485482215881348, 0.10425379872322083,
                0.8460659980773926, 0.9462448358535767, -0.2913765013217926, 0.34313806891441345,
                -1.1186704635620117, -0.18305328488349915, -2.3153159618377686, 0.3961987793445587);
        assertThat(rng.nextUint32()).isEqualTo(2756748748L);
    }

    private static void assertClose(float[] actual, double... expected) {
        assertThat(actual).hasSize(expected.length);
        for (int i = 0; i < expected.length; i++) {
            assertThat((double) actual[i]).as("element %d", i).isCloseTo(expected[i],
                    org.assertj.core.data.Offset.offset(NORMAL_TOLERANCE));
        }
    }

    @Test
    void aPartialBlockRecomputesTheLast16LikeLlmc() {
        // n = 20: one block of 16 from uniforms 0..15, uniforms 16..19 drawn and dropped, the last 16 (4..19) from
        // uniforms 20..35; so elements 0..3 are the first block's and 4..19 a fresh block's.
        float[] out = new float[20];
        new Mt19937(7).normal(out, 0, 20, 0f, 1f);
        float[] first = new float[16];
        Mt19937 ref = new Mt19937(7);
        ref.normal(first, 0, 16, 0f, 1f);
        for (int i = 0; i < 4; i++) {
            ref.nextFloat();
        }
        float[] last = new float[16];
        ref.normal(last, 0, 16, 0f, 1f);
        for (int i = 0; i < 4; i++) {
            assertThat(out[i]).isEqualTo(first[i]);
        }
        for (int i = 4; i < 20; i++) {
            assertThat(out[i]).isEqualTo(last[i - 4]);
        }
    }

    @Test
    void floatsAreIn01WithLlmcResolution() {
        Mt19937 a = new Mt19937(1);
        Mt19937 b = new Mt19937(1);
        for (int i = 0; i < 1000; i++) {
            float f = a.nextFloat();
            assertThat(f).isEqualTo((b.nextInt() & 0xFFFFFF) / 16777216f).isBetween(0f, 1f).isLessThan(1f);
        }
        double d = new Mt19937(1).nextDouble();
        Mt19937 c = new Mt19937(1);
        long bits = (c.nextUint32() << 32 | c.nextUint32()) & ((1L << 53) - 1);
        assertThat(d).isEqualTo(bits * 0x1p-53);
    }

    @Test
    void stateRoundTripsAndCopiesAreIndependent() {
        Mt19937 rng = new Mt19937(99);
        for (int i = 0; i < 700; i++) {
            rng.nextInt(); // past one twist
        }
        Mt19937 restored = Mt19937.fromState(rng.state());
        Mt19937 copy = rng.copy();
        for (int i = 0; i < 2000; i++) {
            int x = rng.nextInt();
            assertThat(restored.nextInt()).isEqualTo(x);
            assertThat(copy.nextInt()).isEqualTo(x);
        }
    }

    @Test
    void seedsOutside32BitsAndBadStatesAreRefused() {
        assertThatThrownBy(() -> new Mt19937(-1)).hasMessageContaining("seed");
        assertThatThrownBy(() -> new Mt19937(1L << 32)).hasMessageContaining("seed");
        assertThat(new Mt19937(0xFFFF_FFFFL).nextUint32()).isBetween(0L, 0xFFFF_FFFFL);
        assertThatThrownBy(() -> Mt19937.fromState(new int[3])).hasMessageContaining("625");
        int[] s = new Mt19937(1).state();
        s[624] = 625;
        assertThatThrownBy(() -> Mt19937.fromState(s)).hasMessageContaining("index");
    }
}
