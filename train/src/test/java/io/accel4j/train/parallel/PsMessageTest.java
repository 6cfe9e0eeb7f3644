package io.accel4j.train.parallel;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Random;
import org.junit.jupiter.api.Test;

/** {@link PsMessage}'s bytes: every field back as written, float bits exact (−0, ∞, NaN), odd and empty arrays. */
class PsMessageTest {

    @Test
    void aMessageDecodesToWhatWasEncoded() {
        Random r = new Random(5);
        float[] a = new float[1001];
        for (int i = 0; i < a.length; i++) {
            a[i] = (float) r.nextGaussian();
        }
        a[0] = -0f;
        a[1] = Float.POSITIVE_INFINITY;
        a[2] = Float.intBitsToFloat(0x7fc00001); // a NaN with a payload
        PsMessage m = new PsMessage(PsMessage.PUSH, new int[] {3, -7, Integer.MAX_VALUE, 0}, 1.5e-4f,
                "parameter server 1 failed: ü", new float[][] {a, new float[0], {42f}});
        PsMessage d = PsMessage.decode(m.encode());
        assertThat(d.kind()).isEqualTo(PsMessage.PUSH);
        assertThat(d.ints()).containsExactly(3, -7, Integer.MAX_VALUE, 0);
        assertThat(d.lr()).isEqualTo(1.5e-4f);
        assertThat(d.text()).isEqualTo("parameter server 1 failed: ü");
        assertThat(d.arrays()).hasNumberOfRows(3);
        for (int i = 0; i < a.length; i++) {
            assertThat(Float.floatToRawIntBits(d.arrays()[0][i])).as("element %d", i)
                    .isEqualTo(Float.floatToRawIntBits(a[i]));
        }
        assertThat(d.arrays()[1]).isEmpty();
        assertThat(d.arrays()[2]).containsExactly(42f);
        assertThat(PsMessage.decode(PsMessage.of(PsMessage.DONE, 2).encode()).ints()).containsExactly(2);
    }
}
