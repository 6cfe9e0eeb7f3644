package io.accel4j.train.parallel;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.offset;

import io.accel4j.train.parallel.ZeroMemory.Precision;
import io.accel4j.train.model.GptConfig;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** The model-state accounting against the ZeRO paper's formulas and its figure 1. */
class ZeroMemoryTest {

    @Test
    void thePapersFigureOne() {
        // Ψ = 7.5B, N_d = 64, K = 12: 120 GB, 31.4 GB, 16.6 GB, 1.9 GB per device (GB = 1e9 bytes)
        long psi = 7_500_000_000L;
        double[] gb = {120, 31.4, 16.6, 1.9};
        for (int stage = 0; stage <= 3; stage++) {
            ZeroMemory z = new ZeroMemory(stage, 64, psi, Precision.MIXED);
            assertThat(z.totalBytes() / 1e9).as("stage %d", stage).isCloseTo(gb[stage], offset(0.05));
        }
    }

    @Test
    void theFormulasForAnyPsiAndN() {
        Random r = new Random(5);
        for (int trial = 0; trial < 200; trial++) {
            int n = 1 + r.nextInt(70);
            long psi = r.nextInt(1 << 30) + (trial % 2 == 0 ? 0L : (long) n * r.nextInt(1 << 20)) + 1;
            for (Precision p : Precision.values()) {
                long shard = (psi + n - 1) / n; // Ψ/N, rounded up: the largest shard
                long P = p.param, G = p.grad, K = p.optimizer;
                long[] want = {(P + G + K) * psi, P * psi + G * psi + K * shard, P * psi + (G + K) * shard,
                    (P + G + K) * shard};
                for (int stage = 0; stage <= 3; stage++) {
                    ZeroMemory z = new ZeroMemory(stage, n, psi, p);
                    assertThat(z.totalBytes()).as("stage %d, Ψ %d, N %d, %s", stage, psi, n, p)
                            .isEqualTo(want[stage]);
                    assertThat(z.paramBytes() + z.gradBytes() + z.optimizerBytes()).isEqualTo(z.totalBytes());
                }
                if (psi % n == 0) {
                    assertThat(new ZeroMemory(3, n, psi, p).totalBytes()).isEqualTo((P + G + K) * (psi / n));
                }
            }
        }
        // fp32: 4Ψ + 4Ψ + 8Ψ
        assertThat(ZeroMemory.fp32(0, 4, 1000).totalBytes()).isEqualTo(16_000);
        assertThat(ZeroMemory.fp32(1, 4, 1000).totalBytes()).isEqualTo(4000 + 4000 + 2000);
        assertThat(ZeroMemory.fp32(2, 4, 1000).totalBytes()).isEqualTo(4000 + 1000 + 2000);
        assertThat(ZeroMemory.fp32(3, 4, 1000).totalBytes()).isEqualTo(1000 + 1000 + 2000);
        assertThat(ZeroMemory.fp32(3, 3, 1000).shard()).isEqualTo(334);
    }

    @Test
    void gpt2SmallsLine() {
        long psi = GptConfig.preset("gpt2").parameterCount();
        assertThat(psi).isEqualTo(124_475_904L);
        String line = ZeroMemory.fp32(2, 4, psi).describe();
        // 4Ψ = 474.8 MiB; Ψ/4 fp32 = 118.7 MiB, m,v 237.4 MiB; DDP 16Ψ = 1899.4 MiB
        assertThat(line).isEqualTo("ZeRO-2 over 4 ranks (fp32 model states): per rank params 474.8 MiB + gradients "
                + "118.7 MiB + AdamW m,v 237.4 MiB = 831.0 MiB (plain DDP: 1899.4 MiB)");
        assertThat(ZeroMemory.fp32(3, 2, psi).describe(3L << 20, 1L << 20)).endsWith("; this rank holds 3.0 MiB "
                + "(1.0 MiB of it working buffers for the units in use)");
    }

    @Test
    void badArgumentsAreRefused() {
        assertThatThrownBy(() -> ZeroMemory.fp32(4, 2, 10)).hasMessageContaining("stage must be 0..3, got 4");
        assertThatThrownBy(() -> ZeroMemory.fp32(1, 0, 10)).hasMessageContaining("ranks must be >= 1, got 0");
        assertThatThrownBy(() -> ZeroMemory.fp32(1, 2, -1)).hasMessageContaining("psi must be >= 0, got -1");
    }
}
