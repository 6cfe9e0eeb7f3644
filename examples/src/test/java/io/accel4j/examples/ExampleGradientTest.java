package io.accel4j.examples;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.nn.GradientCheck;
import io.accel4j.nn.Network;
import io.accel4j.nn.NetworkSpec;
import org.junit.jupiter.api.Test;

/**
 * The example models' backward against finite differences of their forward ({@link GradientCheck}: every parameter
 * tensor, two random directions, its tolerances), at small odd sizes: the MLP as the example builds it, and the
 * character transformer's tree (embedding with positions, two blocks, final LayerNorm, untied head).
 */
class ExampleGradientTest {

    private static void check(NetworkSpec spec, int B, int T, long seed) {
        try (Parallel pool = new Parallel(2)) {
            for (GradientCheck.Comparison c : GradientCheck.run(spec, new CpuOps(pool), B, T, seed)) {
                assertThat(c.analytic()).as("%s, direction %d (seed %d)", c.name(), c.direction(), seed)
                        .isCloseTo(c.difference(), within(GradientCheck.ABS + GradientCheck.REL
                                * Math.abs(c.difference())));
            }
        }
    }

    @Test
    void theMlp() {
        check(Network.of(MlpSpirals.model(7)).features(2).classes(2).batch(5, 1), 5, 1, 3);
    }

    @Test
    void theCharacterTransformer() {
        check(Network.of(CharTransformer.model(7, 8, 2, 2, 5)).tokens(7).classes(7).batch(2, 5), 2, 5, 4);
    }
}
