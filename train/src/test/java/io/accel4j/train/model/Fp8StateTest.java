package io.accel4j.train.model;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.core.DType;
import io.accel4j.core.fp8.DelayedScaling;
import io.accel4j.core.fp8.Fp8Scaling;
import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/** {@link Fp8State}: one history per role of each block's four linear layers, encoded and restored bit for bit. */
class Fp8StateTest {

    private static final DelayedScaling RECIPE = new DelayedScaling(DelayedScaling.Format.HYBRID, 4, 1,
            DelayedScaling.Algorithm.MAX);

    @Test
    void everyTensorHasItsOwnHistoryOfItsRolesType() {
        Fp8State s = new Fp8State(RECIPE, 3);
        assertThat(s.histories()).isEqualTo(3 * 4 * 3);
        for (int l = 0; l < 3; l++) {
            for (Fp8State.Linear which : Fp8State.Linear.values()) {
                Fp8Scaling x = s.linear(l, which);
                assertThat(x.input().format()).isEqualTo(DType.FP8_E4M3);
                assertThat(x.weight().format()).isEqualTo(DType.FP8_E4M3);
                assertThat(x.gradOutput().format()).isEqualTo(DType.FP8_E5M2);
                assertThat(x.input().length()).isEqualTo(4);
            }
        }
        s.linear(1, Fp8State.Linear.FC).weight().record(7f);
        float[] amaxes = s.stepAmaxes();
        assertThat(amaxes).hasSize(36);
        assertThat(amaxes[(1 * 4 + 2) * 3 + 1]).isEqualTo(7f);
        assertThat(Arrays.stream(box(amaxes)).filter(a -> a != 0).count()).isEqualTo(1);
        assertThatThrownBy(() -> s.linear(3, Fp8State.Linear.QKV)).isInstanceOf(IndexOutOfBoundsException.class);
    }

    @Test
    void encodeRestoreRoundTripsAndContinuesBitForBit() {
        SplittableRandom rnd = new SplittableRandom(3);
        Fp8State a = new Fp8State(RECIPE, 2);
        for (int step = 0; step < 6; step++) {
            a.recordStepAmaxes(randomAmaxes(rnd, a.histories()));
            a.update();
        }
        a.recordStepAmaxes(randomAmaxes(rnd, a.histories())); // mid-step
        Fp8State b = new Fp8State(RECIPE, 2);
        b.restore(a.encode());
        assertThat(b.encode()).containsExactly(a.encode());
        for (int step = 0; step < 5; step++) {
            float[] x = randomAmaxes(rnd, a.histories());
            a.recordStepAmaxes(x);
            b.recordStepAmaxes(x);
            a.update();
            b.update();
            assertThat(b.encode()).as("step %d", step).containsExactly(a.encode());
        }
        assertThat(a.linear(0, Fp8State.Linear.QKV).input().scale()).isNotEqualTo(1f);
    }

    @Test
    void aStateOfAnotherShapeOrRecipeIsRefusedByName() {
        byte[] saved = new Fp8State(RECIPE, 2).encode();
        assertThatThrownBy(() -> new Fp8State(RECIPE, 3).restore(saved)).hasMessageContaining("blocks 2, this run 3");
        DelayedScaling margin0 = new DelayedScaling(DelayedScaling.Format.HYBRID, 4, 0, DelayedScaling.Algorithm.MAX);
        assertThatThrownBy(() -> new Fp8State(margin0, 2).restore(saved))
                .hasMessageContaining("margin (--fp8-margin) 1, this run 0");
        assertThatThrownBy(() -> new Fp8State(RECIPE, 2).restore(Arrays.copyOf(saved, saved.length - 1)))
                .hasMessageContaining("truncated");
        assertThatThrownBy(() -> new Fp8State(RECIPE, 2).restore(Arrays.copyOf(saved, saved.length + 4)))
                .hasMessageContaining("4 bytes too many");
        byte[] bad = saved.clone();
        bad[0] ^= 1;
        assertThatThrownBy(() -> new Fp8State(RECIPE, 2).restore(bad)).hasMessageContaining("bad magic");
    }

    private static float[] randomAmaxes(SplittableRandom rnd, int n) {
        float[] a = new float[n];
        for (int i = 0; i < n; i++) {
            a[i] = (float) Math.scalb(rnd.nextDouble(0.5, 1), rnd.nextInt(-20, 10));
        }
        return a;
    }

    private static Float[] box(float[] x) {
        Float[] b = new Float[x.length];
        for (int i = 0; i < x.length; i++) {
            b[i] = x[i];
        }
        return b;
    }
}
