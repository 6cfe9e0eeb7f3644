package io.accel4j.kernels;

import static io.accel4j.kernels.GpuFixture.assertClose;
import static io.accel4j.kernels.GpuFixture.assertSameBits;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static org.assertj.core.api.Assertions.assertThat;

import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * the fused classifier ({@link ClassifierGpu}) on the GPU against the CPU kernel ({@link io.accel4j.cpu.ops.CpuOps},
 * one thread) on random inputs with odd sizes. Needs a GPU: skipped, saying why, where there is none ({@link
 * GpuFixture}).
 */
class ClassifierGpuTest {

    @RegisterExtension
    static final GpuFixture F = new GpuFixture();
    private static final long SEED = GpuFixture.SEED;

    @Test
    void classifierMatchesCpu() {
        int N = 37, V = 1003, Vp = 1024;
        long nv = (long) N * Vp;
        MemorySegment logits = F.floats(nv, -6, 6, SEED), targets = F.ints(N, V, SEED + 1);
        MemorySegment losses = F.nans(N), lossesFb = F.nans(N), dlogits = F.copy(logits);
        double mean = F.cpu.classifierForward(losses, logits, targets, N, V, Vp);
        double meanFb = F.cpu.classifierForwardBackward(dlogits, lossesFb, targets, N, V, Vp, 1f / N);
        MemorySegment gLogits = F.up(logits), gTargets = F.up(targets), gLosses = F.up(F.nans(N));
        double gMean = F.gpu.classifierForward(gLosses, gLogits, gTargets, N, V, Vp);
        // a loss is log Σexp (≈ log V + 6) minus a logit: fp32 rounding of the sum of V terms, ~1e-6 relative
        assertClose("classifier losses", F.down(gLosses), losses, N, 1e-5);
        assertThat(gMean).as("mean loss (seed %d)", SEED).isCloseTo(mean, org.assertj.core.data.Offset.offset(1e-4));
        assertSameBits("classifierForward leaves logits", F.down(gLogits), logits, 4 * nv);
        double gMeanFb = F.gpu.classifierForwardBackward(gLogits, gLosses, gTargets, N, V, Vp, 1f / N);
        assertThat(gMeanFb).isCloseTo(meanFb, org.assertj.core.data.Offset.offset(1e-4));
        // dlogits = (p − onehot)/N with |p − onehot| ≤ 1: 1e-5·(1 + |ref|) absolute is ≥ 1e-5, far above fp32 noise
        MemorySegment g = F.down(gLogits);
        assertClose("classifier dlogits", g, dlogits, nv, 1e-5);
        for (int i = 0; i < N; i++) {
            for (int j = V; j < Vp; j++) {
                assertThat(g.getAtIndex(JAVA_FLOAT, (long) i * Vp + j)).as("padding [%d,%d]", i, j).isEqualTo(0f);
            }
        }
    }
}
