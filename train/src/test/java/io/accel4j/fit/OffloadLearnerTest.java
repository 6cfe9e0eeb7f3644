package io.accel4j.fit;

import static io.accel4j.fit.LearnerTest.learner;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.train.StrictMemory;
import io.accel4j.train.StepMetrics;
import java.nio.file.Path;
import java.util.List;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link LearnerBuilder#offloadOptimizer()}: on the CPU the offloaded optimizer is the same kernel on the same values,
 * so every loss, gradient norm and parameter is the same bits as without offload — with accumulation and clipping, on
 * a backend whose memory is a separate "device" ({@link StrictMemory}: host access to its segments throws), and under ZeRO-1/2 over two ranks — and a
 * run saved and resumed continues bit for bit (the checkpoint is the same format, so it also resumes without offload).
 */
class OffloadLearnerTest {

    @Test
    void offloadIsTheSameBitsWithAccumulationClippingAndZero() {
        try (Parallel pool = new Parallel(2)) {
            record Case(int ranks, int zero, boolean separate) {}
            for (Case c : List.of(new Case(1, 0, true), new Case(2, 1, false), new Case(2, 2, false))) {
                StrictMemory mem = new StrictMemory();
                CpuOps cpu = new CpuOps(pool);
                Supplier<LearnerBuilder> make = () -> {
                    LearnerBuilder b = learner(c.ranks(), 16).gradAccum(2).gradClip(0.5f);
                    b = c.zero() > 0 ? b.zero(c.zero()) : b;
                    return c.separate() ? b.backend(r -> mem.ops(cpu)) : b;
                };
                List<StepMetrics> plain, off;
                float[] p0, p1;
                try (Learner a = make.get().build()) {
                    plain = a.fit(10, null);
                    p0 = params(a);
                }
                long downBefore = mem.bytesOut();
                try (Learner a = make.get().offloadOptimizer().build()) {
                    assertThat(a.describe()).contains("offloaded to host memory");
                    off = a.fit(10, null);
                    p1 = params(a);
                }
                for (int s = 0; s < 10; s++) {
                    assertThat(off.get(s).trainLoss()).as("%s step %d", c, s).isEqualTo(plain.get(s).trainLoss());
                    assertThat(off.get(s).gradNorm()).as("%s step %d", c, s).isEqualTo(plain.get(s).gradNorm());
                }
                assertThat(p1).as("%s", c).containsExactly(p0);
                if (c.separate()) { // 10 steps of gradients down, plus the master once
                    long psi = p0.length;
                    assertThat(mem.bytesOut() - downBefore).isGreaterThanOrEqualTo(4 * psi * 11);
                }
            }
        }
    }

    @Test
    void anOffloadedRunResumesBitForBitWithOrWithoutOffload(@TempDir Path dir) throws Exception {
        for (int zero = 0; zero <= 1; zero++) {
            int ranks = zero == 0 ? 1 : 2;
            int z = zero;
            Supplier<LearnerBuilder> make = () -> {
                LearnerBuilder b = learner(ranks, 16).gradAccum(2);
                return z > 0 ? b.zero(z) : b;
            };
            Path ckpt = dir.resolve("zero" + zero);
            List<StepMetrics> straight;
            float[] end;
            try (Learner a = make.get().offloadOptimizer().build()) {
                straight = a.fit(12, null);
                end = params(a);
            }
            try (Learner a = make.get().offloadOptimizer().build()) {
                a.fit(5, null);
                a.save(ckpt);
            }
            for (boolean offload : new boolean[] {true, false}) {
                LearnerBuilder b = make.get().seed(99); // other initial parameters: the checkpoint's win
                try (Learner c = (offload ? b.offloadOptimizer() : b).build()) {
                    c.resume(ckpt);
                    List<StepMetrics> rest = c.fit(7, null);
                    for (int s = 0; s < 7; s++) {
                        assertThat(rest.get(s).trainLoss()).as("ZeRO %d, offload %s, step %d", z, offload, 5 + s)
                                .isEqualTo(straight.get(5 + s).trainLoss());
                    }
                    assertThat(params(c)).as("ZeRO %d, offload %s", z, offload).containsExactly(end);
                }
            }
        }
    }

    /** The first rank's parameters, copied out through its memory (a strict device's segments are not readable). */
    private static float[] params(Learner l) {
        float[] p = new float[(int) l.network().table().count()];
        l.network().copyParamsToHost(java.lang.foreign.MemorySegment.ofArray(p));
        return p;
    }

    @Test
    void aPipelineIsRefusedNamingBoth() {
        assertThatThrownBy(() -> learner(2, 8).pipeline(2, 2, io.accel4j.pipeline.Schedule.GPIPE)
                .offloadOptimizer().build()).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("offloadOptimizer()").hasMessageContaining("pipeline(2");
        assertThatThrownBy(() -> learner(2, 8).zero(3).offloadOptimizer().build())
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("offloadOptimizer()").hasMessageContaining("zero(3)");
    }
}
