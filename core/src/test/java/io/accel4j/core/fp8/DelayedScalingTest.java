package io.accel4j.core.fp8;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.core.DType;
import io.accel4j.core.fp8.DelayedScaling.Algorithm;
import io.accel4j.core.fp8.DelayedScaling.Format;
import io.accel4j.core.fp8.DelayedScaling.Role;
import org.junit.jupiter.api.Test;

/** {@link DelayedScaling} and {@link AmaxHistory} against hand-computed sequences (every scale here is exact). */
class DelayedScalingTest {

    /** Records {@code amax} (when not null) and updates, then returns the new scale. */
    private static float step(AmaxHistory h, Float amax) {
        if (amax != null) {
            h.record(amax);
        }
        h.update();
        return h.scale();
    }

    @Test
    void maxOfTheWindowByHand() {
        AmaxHistory h = new AmaxHistory(DType.FP8_E4M3, 3, 0, Algorithm.MAX);
        assertThat(h.scale()).as("before any update").isEqualTo(1f);
        assertThat(h.scaleInv()).isEqualTo(1f);
        // window after each step (oldest first), then the scale 448 / max(window)
        assertThat(step(h, 2f)).isEqualTo(224f);       // [0 0 2]
        assertThat(step(h, 4f)).isEqualTo(112f);       // [0 2 4]
        assertThat(step(h, 1f)).isEqualTo(112f);       // [2 4 1]
        assertThat(step(h, 0.5f)).isEqualTo(112f);     // [4 1 0.5]: 4 still in the window
        assertThat(step(h, 0.5f)).isEqualTo(448f);     // [1 0.5 0.5]: 4 has left it
        assertThat(h.amaxes()).containsExactly(0.5f, 0.5f, 0f); // the new step's slot is last, at 0
        assertThat(step(h, 0.25f)).isEqualTo(896f);    // [0.5 0.5 0.25]
        assertThat(step(h, 0.25f)).isEqualTo(896f);    // [0.5 0.25 0.25]
        assertThat(step(h, 0.25f)).isEqualTo(1792f);   // [0.25 0.25 0.25]
        assertThat(h.scaleInv()).isEqualTo(0x1p-8f / 7f);
    }

    @Test
    void mostRecentFollowsTheLastStep() {
        AmaxHistory h = new AmaxHistory(DType.FP8_E4M3, 4, 0, Algorithm.MOST_RECENT);
        assertThat(step(h, 8f)).isEqualTo(56f);
        assertThat(step(h, 0.5f)).isEqualTo(896f);
        assertThat(step(h, 7f)).isEqualTo(64f);
    }

    @Test
    void marginAndE5m2() {
        AmaxHistory e4 = new AmaxHistory(DType.FP8_E4M3, 2, 2, Algorithm.MAX);
        assertThat(step(e4, 2f)).as("448 / 2 / 2^2").isEqualTo(56f);
        AmaxHistory e5 = new AmaxHistory(DType.FP8_E5M2, 2, 0, Algorithm.MAX);
        assertThat(step(e5, 7f)).as("57344 / 7").isEqualTo(8192f);
        AmaxHistory e5m = new AmaxHistory(DType.FP8_E5M2, 2, 3, Algorithm.MAX);
        assertThat(step(e5m, 7f)).as("57344 / 7 / 2^3").isEqualTo(1024f);
        // 448/3 is not exact: the float quotient, then the exact power-of-two margin
        AmaxHistory odd = new AmaxHistory(DType.FP8_E4M3, 1, 1, Algorithm.MAX);
        assertThat(step(odd, 3f)).isEqualTo((448f / 3f) / 2f);
    }

    @Test
    void severalCastsInOneStepKeepTheirMaximum() {
        AmaxHistory h = new AmaxHistory(DType.FP8_E4M3, 2, 0, Algorithm.MOST_RECENT);
        h.record(1f);
        h.record(14f);
        h.record(2f);
        assertThat(step(h, null)).isEqualTo(32f);
    }

    @Test
    void zeroInfAndNanAmaxKeepThePreviousScale() {
        AmaxHistory h = new AmaxHistory(DType.FP8_E4M3, 2, 0, Algorithm.MAX);
        assertThat(step(h, 0f)).as("all-zero tensor before any scale").isEqualTo(1f);
        assertThat(step(h, null)).as("nothing recorded").isEqualTo(1f);
        assertThat(step(h, 4f)).isEqualTo(112f);
        assertThat(step(h, Float.POSITIVE_INFINITY)).as("inf in the window").isEqualTo(112f);
        assertThat(step(h, 1f)).as("inf still in the window [inf 1]").isEqualTo(112f);
        assertThat(step(h, 1f)).as("inf left: [1 1]").isEqualTo(448f);
        assertThat(step(h, Float.NaN)).as("NaN in the window").isEqualTo(448f);
        assertThat(step(h, 8f)).as("[NaN 8]").isEqualTo(448f);
        assertThat(step(h, 8f)).as("[8 8]").isEqualTo(56f);

        AmaxHistory recent = new AmaxHistory(DType.FP8_E5M2, 3, 0, Algorithm.MOST_RECENT);
        assertThat(step(recent, 7f)).isEqualTo(8192f);
        assertThat(step(recent, 0f)).as("all-zero step").isEqualTo(8192f);
        assertThat(step(recent, Float.NaN)).isEqualTo(8192f);
        assertThat(step(recent, 14f)).as("the next good step sets it").isEqualTo(4096f);
    }

    @Test
    void aTinyAmaxIsCappedSoThatTheInverseStaysNormal() {
        AmaxHistory h = new AmaxHistory(DType.FP8_E4M3, 1, 0, Algorithm.MAX);
        assertThat(step(h, Float.MIN_VALUE)).isEqualTo(0x1p126f);
        assertThat(h.scaleInv()).isEqualTo(Float.MIN_NORMAL);
        assertThat(step(h, 0x1p-120f)).as("448·2^120 is above the cap").isEqualTo(0x1p126f);
        assertThat(step(h, 0x1p-110f)).as("448·2^110 is below it").isEqualTo(448f * 0x1p110f);
    }

    @Test
    void recipeRolesAndDefaults() {
        DelayedScaling hybrid = DelayedScaling.defaults();
        assertThat(hybrid).isEqualTo(new DelayedScaling(Format.HYBRID, 1024, 0, Algorithm.MAX));
        assertThat(hybrid.dtype(Role.ACTIVATION)).isEqualTo(DType.FP8_E4M3);
        assertThat(hybrid.dtype(Role.WEIGHT)).isEqualTo(DType.FP8_E4M3);
        assertThat(hybrid.dtype(Role.GRADIENT)).isEqualTo(DType.FP8_E5M2);
        DelayedScaling e4 = new DelayedScaling(Format.E4M3, 4, 1, Algorithm.MOST_RECENT);
        assertThat(e4.dtype(Role.GRADIENT)).isEqualTo(DType.FP8_E4M3);
        AmaxHistory g = hybrid.newHistory(Role.GRADIENT);
        assertThat(g.format()).isEqualTo(DType.FP8_E5M2);
        assertThat(g.amaxes()).hasSize(1024).containsOnly(0f);
        assertThat(g.scale()).isEqualTo(1f);
    }

    @Test
    void aRestoredHistoryContinuesBitForBit() {
        for (Algorithm algorithm : Algorithm.values()) {
            AmaxHistory a = new AmaxHistory(DType.FP8_E5M2, 3, 1, algorithm);
            float[] amaxes = {3f, 0.7f, 12f, 0.01f, 5f, 0f, 2f};
            for (int i = 0; i < 4; i++) {
                step(a, amaxes[i]);
            }
            a.record(0.3f); // mid-step: this step's slot is saved too
            AmaxHistory b = new AmaxHistory(DType.FP8_E5M2, 3, 1, algorithm);
            b.restore(a.scale(), a.amaxes());
            assertThat(b.amaxes()).containsExactly(a.amaxes());
            assertThat(b.scale()).isEqualTo(a.scale());
            for (int i = 4; i < amaxes.length; i++) {
                assertThat(step(b, amaxes[i])).as(algorithm + " step " + i).isEqualTo(step(a, amaxes[i]));
                assertThat(b.amaxes()).containsExactly(a.amaxes());
            }
        }
        AmaxHistory h = new AmaxHistory(DType.FP8_E4M3, 2, 0, Algorithm.MAX);
        assertThatThrownBy(() -> h.restore(1f, new float[3])).hasMessage("amaxes holds 3 steps, the window 2");
        assertThatThrownBy(() -> h.restore(0f, new float[2])).hasMessage("scale must be in (0, 2^126], got 0.0");
        assertThatThrownBy(() -> h.restore(1f, new float[] {1f, -2f})).hasMessage("amaxes[1] must be >= 0, got -2.0");
    }

    @Test
    void aLayerHasThreeDistinctHistoriesAndNoE5m2Product() {
        Fp8Scaling s = Fp8Scaling.of(DelayedScaling.defaults());
        assertThat(s.input().format()).isEqualTo(DType.FP8_E4M3);
        assertThat(s.weight().format()).isEqualTo(DType.FP8_E4M3);
        assertThat(s.gradOutput().format()).isEqualTo(DType.FP8_E5M2);
        s.input().record(2f);
        s.gradOutput().record(4f);
        s.update();
        assertThat(s.input().scale()).isEqualTo(224f);
        assertThat(s.weight().scale()).as("nothing recorded: kept").isEqualTo(1f);
        assertThat(s.gradOutput().scale()).isEqualTo(14336f);
        AmaxHistory e4 = new AmaxHistory(DType.FP8_E4M3, 1, 0, Algorithm.MAX);
        AmaxHistory e5 = new AmaxHistory(DType.FP8_E5M2, 1, 0, Algorithm.MAX);
        AmaxHistory e5b = new AmaxHistory(DType.FP8_E5M2, 1, 0, Algorithm.MAX);
        assertThatThrownBy(() -> new Fp8Scaling(e4, e5, e5b)).hasMessageContaining("gradOutput and weight are "
                + "multiplied together but are both FP8_E5M2");
        assertThatThrownBy(() -> new Fp8Scaling(e4, e4, e5)).hasMessageContaining("need a history each");
    }

    @Test
    void badArgumentsAreNamed() {
        assertThatThrownBy(() -> new DelayedScaling(Format.HYBRID, 0, 0, Algorithm.MAX))
                .isInstanceOf(IllegalArgumentException.class).hasMessage("historyLength must be >= 1, got 0");
        assertThatThrownBy(() -> new DelayedScaling(Format.HYBRID, 4, 33, Algorithm.MAX))
                .isInstanceOf(IllegalArgumentException.class).hasMessage("margin must be in [0, 32], got 33");
        assertThatThrownBy(() -> new AmaxHistory(DType.BF16, 4, 0, Algorithm.MAX))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("format must be FP8_E4M3 or FP8_E5M2, got BF16");
        assertThatThrownBy(() -> new AmaxHistory(DType.FP8_E4M3, 0, 0, Algorithm.MAX))
                .isInstanceOf(IllegalArgumentException.class).hasMessage("length must be >= 1, got 0");
        AmaxHistory h = new AmaxHistory(DType.FP8_E4M3, 2, 0, Algorithm.MAX);
        assertThatThrownBy(() -> h.record(-1f)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("amax must be >= 0 (a max of |x|), got -1.0");
    }
}
