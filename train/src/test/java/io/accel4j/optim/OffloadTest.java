package io.accel4j.optim;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.core.ops.Ops;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.nn.LayerNorm;
import io.accel4j.nn.Linear;
import io.accel4j.nn.Module;
import io.accel4j.nn.Network;
import io.accel4j.nn.Sequential;
import io.accel4j.train.StrictMemory;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@link Offload}: an optimizer run on the host over a master copy is the same bits as the same optimizer run where
 * the parameters live (the same CPU kernel on the same values), with the parameters in a {@link StrictMemory}
 * "device" (host access to its segments throws) so that every byte crosses through a counted copy; the state is host
 * memory; the device's parameters are poisoned (NaN) before each later step, so every element must come back from
 * the master.
 */
class OffloadTest {

    private static Parallel pool;
    private static Parallel hostPool;
    private static CpuOps cpu;
    private static CpuOps host;

    @BeforeAll
    static void setUp() {
        pool = new Parallel(2);
        hostPool = new Parallel(1); // another thread count: the kernel's result does not depend on it
        cpu = new CpuOps(pool);
        host = new CpuOps(hostPool);
    }

    @AfterAll
    static void tearDown() {
        pool.close();
        hostPool.close();
    }

    private static Module body() { // odd widths: 3·5+5+5+5+5·2 = 40 parameters over four tensors, three groups
        return new Sequential("net", Linear.of("fc", 3, 5), new LayerNorm("norm", 5), Linear.noBias("head", 5, 2));
    }

    @Test
    void offloadedOptimizersAreTheSameBitsAndEveryByteIsCopied() {
        for (OptimizerSpec spec : new OptimizerSpec[] {new AdamW.Spec(0.9f, 0.95f, 1e-8f, 0.1f, false),
                Sgd.of(0.9f, 0.01f), Lion.of(0.1f)}) {
            StrictMemory mem = new StrictMemory();
            Ops device = mem.ops(cpu);
            try (Network a = Network.of(body()).features(3).classes(2).batch(2, 1).build(cpu);
                 Network b = Network.of(body()).features(3).classes(2).batch(2, 1).build(device)) {
                int n = (int) a.table().count();
                Random r = new Random(11);
                float[] p = gaussians(r, n);
                MemorySegment.copy(p, 0, a.params(), ValueLayout.JAVA_FLOAT, 0, n);
                mem.copyToDevice(MemorySegment.ofArray(p), b.params());
                try (Optimizer plain = spec.create(cpu, a.table(), a.params(), a.grads());
                     Optimizer off = new Offload(spec, host).create(device, b.table(), b.params(), b.grads())) {
                    assertThat(off.stateMemory()).isSameAs(host.memory()).isNotSameAs(device.memory());
                    assertThat(off.state().keySet()).containsExactlyElementsOf(plain.state().keySet());
                    assertThat(off.stateBytes()).isEqualTo(plain.stateBytes());
                    assertThat(off.describe()).contains("offloaded to host memory");
                    int steps = 5;
                    long down = 0, up = 0;
                    for (int t = 1; t <= steps; t++) {
                        float[] g = gaussians(r, n);
                        MemorySegment.copy(g, 0, a.grads(), ValueLayout.JAVA_FLOAT, 0, n);
                        mem.copyToDevice(MemorySegment.ofArray(g), b.grads());
                        if (t > 1) { // NaN: the upload must write every parameter
                            float[] nan = new float[n];
                            java.util.Arrays.fill(nan, Float.NaN);
                            mem.copyToDevice(MemorySegment.ofArray(nan), b.params());
                        }
                        plain.step(t, 0.01f * t, 0.75f);
                        long out0 = mem.bytesOut(), in0 = mem.bytesIn();
                        off.step(t, 0.01f * t, 0.75f);
                        down += mem.bytesOut() - out0;
                        up += mem.bytesIn() - in0;
                        assertThat(deviceFloats(mem, b.params(), n)).as("%s step %d", spec, t)
                                .containsExactly(floats(a.params(), n));
                    }
                    for (String name : plain.state().keySet()) {
                        assertThat(floats(off.state().get(name), n)).as(name)
                                .containsExactly(floats(plain.state().get(name), n));
                    }
                    // the master once, then the gradients each step down; the parameters each step up
                    assertThat(down).isEqualTo(4L * n * (steps + 1));
                    assertThat(up).isEqualTo(4L * n * steps);
                    OffloadedOptimizer o = (OffloadedOptimizer) off;
                    assertThat(o.hostBytes()).isEqualTo(new Offload(spec, host).hostBytesPerParameter() * n);
                }
            }
        }
    }

    @Test
    void parametersReplacedFromOutsideAreTakenAgain() {
        StrictMemory mem = new StrictMemory();
        Ops device = mem.ops(cpu);
        try (Network a = Network.of(body()).features(3).classes(2).batch(2, 1).build(cpu);
             Network b = Network.of(body()).features(3).classes(2).batch(2, 1).build(device)) {
            int n = (int) a.table().count();
            Random r = new Random(3);
            float[] p0 = gaussians(r, n);
            MemorySegment.copy(p0, 0, a.params(), ValueLayout.JAVA_FLOAT, 0, n);
            mem.copyToDevice(MemorySegment.ofArray(p0), b.params());
            AdamW.Spec spec = AdamW.of(0.1f);
            try (Optimizer plain = spec.create(cpu, a.table(), a.params(), a.grads());
                 Optimizer off = new Offload(spec, host).create(device, b.table(), b.params(), b.grads())) {
                for (int t = 1; t <= 3; t++) {
                    if (t == 2) { // a resume: new parameters written into both
                        float[] q = gaussians(r, n);
                        MemorySegment.copy(q, 0, a.params(), ValueLayout.JAVA_FLOAT, 0, n);
                        b.copyParamsFromHost(MemorySegment.ofArray(q));
                        off.parametersReplaced();
                    }
                    float[] g = gaussians(r, n);
                    MemorySegment.copy(g, 0, a.grads(), ValueLayout.JAVA_FLOAT, 0, n);
                    mem.copyToDevice(MemorySegment.ofArray(g), b.grads());
                    plain.step(t, 0.01f, 1f);
                    off.step(t, 0.01f, 1f);
                    assertThat(deviceFloats(mem, b.params(), n)).as("step %d", t)
                            .containsExactly(floats(a.params(), n));
                }
            }
        }
    }

    @Test
    void aHostBackendAndOneLevelOfOffloadOnly() {
        StrictMemory mem = new StrictMemory();
        assertThatThrownBy(() -> new Offload(AdamW.of(0f), mem.ops(cpu)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("runs on a host backend");
        assertThatThrownBy(() -> new Offload(new Offload(AdamW.of(0f), host), host))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("offloaded already");
        try (Network a = Network.of(body()).features(3).classes(2).batch(2, 1).build(cpu);
             Network other = Network.of(new Sequential("net", Linear.of("fc", 3, 7), Linear.noBias("head", 7, 2)))
                     .features(3).classes(2).batch(2, 1).build(cpu)) {
            assertThatThrownBy(() -> new Offload(AdamW.of(0f), host).create(cpu, a.table(), other.params(),
                    other.grads())).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("params");
        }
    }

    private static float[] gaussians(Random r, int n) {
        float[] x = new float[n];
        for (int i = 0; i < n; i++) {
            x[i] = (float) r.nextGaussian();
        }
        return x;
    }

    private static float[] deviceFloats(StrictMemory mem, MemorySegment device, int n) {
        float[] x = new float[n];
        mem.copyToHost(device, MemorySegment.ofArray(x));
        return x;
    }

    private static float[] floats(MemorySegment s, int n) {
        float[] x = new float[n];
        MemorySegment.copy(s, ValueLayout.JAVA_FLOAT, 0, x, 0, n);
        return x;
    }
}
