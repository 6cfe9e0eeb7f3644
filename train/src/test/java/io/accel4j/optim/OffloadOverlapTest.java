package io.accel4j.optim;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.core.memory.DeviceArena;
import io.accel4j.core.memory.DeviceMemory;
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
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The overlapped offload step ({@link OffloadPipeline}): the same bits as the serial offload and as the optimizer run
 * where the parameters live, for every chunk size; the stages really overlap (copies that block until the test sees
 * the next stage start); a failure in any stage is one clear error, never a hang. The parameters live in a
 * {@link StrictMemory} "device" (host access throws), poisoned (NaN) before each step, so every element must come
 * back through the upload.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class OffloadOverlapTest {

    /** How long a gated copy waits for the event that proves the overlap before failing the step (no hang). */
    private static final long GATE_SECONDS = 20;

    private static Parallel pool;
    private static Parallel hostPool;
    private static CpuOps cpu;
    private static CpuOps host;

    @BeforeAll
    static void setUp() {
        pool = new Parallel(2);
        hostPool = new Parallel(1);
        cpu = new CpuOps(pool);
        host = new CpuOps(hostPool);
    }

    @AfterAll
    static void tearDown() {
        pool.close();
        hostPool.close();
    }

    /** 37·29 + 29 + 29 + 29 + 29·11 = 1479 parameters over four tensors, three groups. */
    private static Module body() {
        return new Sequential("net", Linear.of("fc", 37, 29), new LayerNorm("norm", 29),
                Linear.noBias("head", 29, 11));
    }

    private static Network network(Ops ops) {
        return Network.of(body()).features(37).classes(11).batch(2, 1).build(ops);
    }

    @Test
    void overlappedIsTheBitsOfSerialAndOfTheOptimizerOnTheDevice() {
        OptimizerSpec[] specs = {new AdamW.Spec(0.9f, 0.95f, 1e-8f, 0.1f, false), Sgd.of(0.9f, 0.01f),
                Lion.of(0.1f)};
        long[] chunks = {3, 7, 16, 333, 1479, 5000};
        for (OptimizerSpec spec : specs) {
            for (long chunk : chunks) {
                for (boolean defer : new boolean[] {false, true}) {
                    compare(spec, chunk, defer, 1234 + (int) chunk);
                }
            }
        }
        compare(specs[0], 1, false, 1); // one element a chunk: 1479 hand-offs a stage (slow on a loaded machine)
    }

    private static void compare(OptimizerSpec spec, long chunk, boolean defer, int seed) {
        StrictMemory mem = new StrictMemory();
        Ops device = mem.ops(cpu);
        try (Network a = network(cpu); Network b = network(device); Network c = network(device)) {
            int n = (int) a.table().count();
            Random r = new Random(seed);
            float[] p = gaussians(r, n);
            MemorySegment.copy(p, 0, a.params(), ValueLayout.JAVA_FLOAT, 0, n);
            mem.copyToDevice(MemorySegment.ofArray(p), b.params());
            mem.copyToDevice(MemorySegment.ofArray(p), c.params());
            try (Optimizer plain = spec.create(cpu, a.table(), a.params(), a.grads());
                 Optimizer serial = new Offload(spec, host, false).create(device, b.table(), b.params(), b.grads());
                 Optimizer over = new Offload(spec, host).create(device, c.table(), c.params(), c.grads())) {
                OffloadedOptimizer o = (OffloadedOptimizer) over;
                assertThat(o.overlapped()).isTrue();
                assertThat(((OffloadedOptimizer) serial).overlapped()).isFalse();
                o.rechunk(chunk);
                assertThat(o.deferUpload(defer)).isEqualTo(defer);
                for (int t = 1; t <= 4; t++) {
                    float[] g = gaussians(r, n);
                    MemorySegment.copy(g, 0, a.grads(), ValueLayout.JAVA_FLOAT, 0, n);
                    mem.copyToDevice(MemorySegment.ofArray(g), b.grads());
                    mem.copyToDevice(MemorySegment.ofArray(g), c.grads());
                    if (t > 1) {
                        float[] nan = new float[n];
                        Arrays.fill(nan, Float.NaN);
                        mem.copyToDevice(MemorySegment.ofArray(nan), b.params());
                        mem.copyToDevice(MemorySegment.ofArray(nan), c.params());
                    }
                    plain.step(t, 0.01f * t, 0.75f);
                    serial.step(t, 0.01f * t, 0.75f);
                    over.step(t, 0.01f * t, 0.75f);
                    over.awaitParameters();
                    String as = spec + " chunk " + chunk + (defer ? " deferred" : "") + " step " + t;
                    float[] want = floats(a.params(), n);
                    assertThat(deviceFloats(mem, b.params(), n)).as("serial, " + as).containsExactly(want);
                    assertThat(deviceFloats(mem, c.params(), n)).as("overlapped, " + as).containsExactly(want);
                }
                for (String name : plain.state().keySet()) {
                    float[] want = floats(plain.state().get(name), n);
                    assertThat(floats(serial.state().get(name), n)).as(name).containsExactly(want);
                    assertThat(floats(over.state().get(name), n)).as(name).containsExactly(want);
                }
                assertThat(o.bytesMoved()).containsExactly(((OffloadedOptimizer) serial).bytesMoved());
                assertThat(o.hostScratchBytes()).isEqualTo(serial.hostScratchBytes()); // no staging besides
            }
        }
    }

    /**
     * Over 16-bit gradients (a wide fp32 unit, then a half one) each chunk is widened on its way down: overlapped in
     * chunks of 7 and 100 elements, the bits of the serial offload and of AdamW on the device over the same store.
     */
    @Test
    void overlappedOverSixteenBitGradientsIsTheBitsOfSerial() {
        StrictMemory mem = new StrictMemory();
        Ops device = mem.ops(cpu);
        for (long chunk : new long[] {7, 100}) {
            try (Network a = network(device); Network b = network(device); Network c = network(device)) {
                int n = (int) a.table().count(), wide = 500;
                List<io.accel4j.nn.HalfUnitLayout.Unit> units = List.of(
                        new io.accel4j.nn.HalfUnitLayout.Unit(List.of(new io.accel4j.nn.HalfUnitLayout.Piece(0, wide,
                                0)), false),
                        new io.accel4j.nn.HalfUnitLayout.Unit(List.of(new io.accel4j.nn.HalfUnitLayout.Piece(wide,
                                n - wide, 0)), true));
                Random r = new Random(77 + chunk);
                float[] p = gaussians(r, n);
                for (Network net : List.of(a, b, c)) {
                    mem.copyToDevice(MemorySegment.ofArray(p), net.params());
                }
                AdamW.Spec spec = new AdamW.Spec(0.9f, 0.95f, 1e-8f, 0.1f, false);
                try (io.accel4j.nn.HalfGradients g = new io.accel4j.nn.HalfGradients(device,
                        io.accel4j.core.DType.BF16, n, units);
                     Optimizer plain = spec.create(device, a.table(), a.params(), g, 0, n);
                     Optimizer serial = new Offload(spec, host, false).create(device, b.table(), b.params(), g, 0, n);
                     Optimizer over = new Offload(spec, host).create(device, c.table(), c.params(), g, 0, n)) {
                    ((OffloadedOptimizer) over).rechunk(chunk);
                    for (int t = 1; t <= 3; t++) {
                        float[] x = gaussians(r, n);
                        mem.copyToDevice(MemorySegment.ofArray(x).asSlice(0, wide * 4L), g.grad(0, 0, wide));
                        g.begin(1);
                        mem.copyToDevice(MemorySegment.ofArray(x).asSlice(wide * 4L), g.grad(1, wide, n - wide));
                        g.done(1);
                        plain.step(t, 0.01f, 0.5f);
                        serial.step(t, 0.01f, 0.5f);
                        over.step(t, 0.01f, 0.5f);
                        float[] want = deviceFloats(mem, a.params(), n);
                        assertThat(deviceFloats(mem, b.params(), n)).as("serial, step %d", t).containsExactly(want);
                        assertThat(deviceFloats(mem, c.params(), n)).as("chunk %d, step %d", chunk, t)
                                .containsExactly(want);
                    }
                }
            }
        }
    }

    /**
     * Down and update overlap: the last chunk's gradients cannot come down until the host update of chunk 0 has
     * started. Update and up overlap with what follows the step: with a deferred upload the step returns while the
     * last chunk's parameters are held back, and chunk 0's are already up (a forward's first unit could run).
     */
    @Test
    void theStagesOverlap() throws InterruptedException {
        int chunks = 5;
        CountDownLatch updateStarted = new CountDownLatch(1);
        CountDownLatch firstUnitRead = new CountDownLatch(1);
        List<String> events = java.util.Collections.synchronizedList(new ArrayList<>());
        StrictMemory strict = new StrictMemory();
        Ops device = strict.ops(cpu);
        boolean[] gated = {false};
        Ops watched = watch(host, () -> {
            if (gated[0]) {
                events.add("update");
                updateStarted.countDown();
            }
        });
        try (Network a = network(cpu); Network b = network(device)) {
            int n = (int) a.table().count();
            long chunk = (n + chunks - 1) / chunks;
            AtomicInteger downs = new AtomicInteger(), ups = new AtomicInteger();
            DeviceMemory gate = new Gated(strict) {
                @Override
                public void copyToHost(MemorySegment d, MemorySegment h) {
                    int i = gated[0] ? downs.getAndIncrement() : -1;
                    if (i == chunks - 1) {
                        await(updateStarted, "the host update of chunk 0 before the last gradients are down");
                    }
                    super.copyToHost(d, h);
                    if (i >= 0) {
                        events.add("down " + i);
                    }
                }

                @Override
                public void copyToDevice(MemorySegment h, MemorySegment d) {
                    int i = gated[0] ? ups.getAndIncrement() : -1;
                    if (i == chunks - 1) {
                        await(firstUnitRead, "the first unit's parameters read before the last ones are up");
                    }
                    super.copyToDevice(h, d);
                    if (i >= 0) {
                        events.add("up " + i);
                    }
                }
            };
            Random r = new Random(5);
            float[] p = gaussians(r, n);
            MemorySegment.copy(p, 0, a.params(), ValueLayout.JAVA_FLOAT, 0, n);
            strict.copyToDevice(MemorySegment.ofArray(p), b.params());
            AdamW.Spec spec = AdamW.of(0.1f);
            try (Optimizer plain = spec.create(cpu, a.table(), a.params(), a.grads());
                 OffloadedOptimizer off = new OffloadedOptimizer(new Offload(spec, watched), gate, b.table(),
                         b.params(), b.grads(), 0, n)) {
                off.rechunk(chunk);
                off.deferUpload(true);
                for (int t = 1; t <= 2; t++) {
                    float[] g = gaussians(r, n);
                    MemorySegment.copy(g, 0, a.grads(), ValueLayout.JAVA_FLOAT, 0, n);
                    strict.copyToDevice(MemorySegment.ofArray(g), b.grads());
                    plain.step(t, 0.01f, 1f);
                    gated[0] = t == 2; // step 1 also takes the master: not gated
                    events.clear();
                    off.step(t, 0.01f, 1f);
                    if (t == 2) {
                        off.awaitParameters(0, chunk); // chunk 0 (a forward's first unit) is up already
                        assertThat(events).as("returned before the last chunk is up").doesNotContain(
                                "up " + (chunks - 1)).contains("up 0");
                        firstUnitRead.countDown();
                    }
                    off.awaitParameters();
                    assertThat(deviceFloats(strict, b.params(), n)).containsExactly(floats(a.params(), n));
                }
                assertThat(events.indexOf("update")).as(events.toString())
                        .isLessThan(events.indexOf("down " + (chunks - 1)));
                assertThat(events).contains("up " + (chunks - 1));
            }
        }
    }

    /**
     * A deferred upload in a given order (a model's units, here the tail of the vector first): the first part is
     * readable while the upload of the second is held back; every element comes up once, the same bits; an order
     * that does not cover the range once is refused.
     */
    @Test
    void anUploadDeferredInPartsGoesInTheOrderGivenAndEachPartIsReadableWhenUp() {
        StrictMemory strict = new StrictMemory();
        Ops device = strict.ops(cpu);
        CountDownLatch firstPartRead = new CountDownLatch(1);
        boolean[] gated = {false};
        List<Long> upAt = java.util.Collections.synchronizedList(new ArrayList<>());
        try (Network a = network(cpu); Network b = network(device)) {
            int n = (int) a.table().count(), split = 1000;
            long base = b.params().address();
            DeviceMemory gate = new Gated(strict) {
                @Override
                public void copyToDevice(MemorySegment h, MemorySegment d) {
                    long at = (d.address() - base) / Float.BYTES;
                    if (gated[0] && at == 0) { // the second part, [0, split): after the first was read
                        await(firstPartRead, "the first part read before the second is up");
                    }
                    super.copyToDevice(h, d);
                    if (gated[0]) {
                        upAt.add(at);
                    }
                }
            };
            Random r = new Random(9);
            float[] p = gaussians(r, n);
            MemorySegment.copy(p, 0, a.params(), ValueLayout.JAVA_FLOAT, 0, n);
            strict.copyToDevice(MemorySegment.ofArray(p), b.params());
            AdamW.Spec spec = AdamW.of(0.1f);
            try (Optimizer plain = spec.create(cpu, a.table(), a.params(), a.grads());
                 OffloadedOptimizer off = new OffloadedOptimizer(new Offload(spec, host), gate, b.table(),
                         b.params(), b.grads(), 0, n)) {
                assertThatThrownBy(() -> off.deferUpload(List.of(new Optimizer.Part(0, 1000),
                        new Optimizer.Part(999, n - 999)))).isInstanceOf(IllegalArgumentException.class)
                        .hasMessageContaining("cover [0, " + n + ") once each");
                assertThat(off.deferUpload(List.of(new Optimizer.Part(split, n - split),
                        new Optimizer.Part(0, split)))).isTrue();
                for (int t = 1; t <= 2; t++) {
                    float[] g = gaussians(r, n);
                    MemorySegment.copy(g, 0, a.grads(), ValueLayout.JAVA_FLOAT, 0, n);
                    strict.copyToDevice(MemorySegment.ofArray(g), b.grads());
                    plain.step(t, 0.01f, 1f);
                    gated[0] = t == 2;
                    off.step(t, 0.01f, 1f);
                    if (t == 2) {
                        off.awaitParameters(split, n - split);
                        assertThat(upAt).containsExactly((long) split);
                        firstPartRead.countDown();
                    }
                    off.awaitParameters();
                    assertThat(deviceFloats(strict, b.params(), n)).containsExactly(floats(a.params(), n));
                }
                assertThat(upAt).containsExactly((long) split, 0L);
            }
        }
    }

    @Test
    void aFailedCopyDownIsOneClearErrorAndNoHang() {
        failure(true, false, 2, "copying the gradients of chunk 2 down");
    }

    @Test
    void aFailedCopyUpIsOneClearErrorAndNoHang() {
        failure(false, true, 1, "copying the parameters of chunk 1 up");
    }

    @Test
    void aFailedHostUpdateIsOneClearErrorAndNoHang() {
        failure(false, false, 3, "the host update of chunk "); // the 4th kernel call: a chunk may make several
    }

    /** A copy down ({@code down}), up ({@code up}) or else the host update fails at chunk {@code at} of step 2. */
    private static void failure(boolean down, boolean up, int at, String expected) {
        StrictMemory strict = new StrictMemory();
        Ops device = strict.ops(cpu);
        AtomicInteger downs = new AtomicInteger(-100), ups = new AtomicInteger(-100), updates = new AtomicInteger(-100);
        DeviceMemory failing = new Gated(strict) {
            @Override
            public void copyToHost(MemorySegment d, MemorySegment h) {
                if (down && downs.getAndIncrement() == at) {
                    throw new IllegalArgumentException("test: the bus fell off");
                }
                super.copyToHost(d, h);
            }

            @Override
            public void copyToDevice(MemorySegment h, MemorySegment d) {
                if (up && ups.getAndIncrement() == at) {
                    throw new IllegalArgumentException("test: the bus fell off");
                }
                super.copyToDevice(h, d);
            }
        };
        Ops failingHost = watch(host, () -> {
            if (!down && !up && updates.getAndIncrement() == at) {
                throw new IllegalArgumentException("test: the bus fell off");
            }
        });
        try (Network b = network(device)) {
            int n = (int) b.table().count();
            try (OffloadedOptimizer off = new OffloadedOptimizer(new Offload(AdamW.of(0f), failingHost), failing,
                    b.table(), b.params(), b.grads(), 0, n)) {
                off.rechunk(100);
                off.deferUpload(true);
                off.step(1, 0.01f, 1f);
                off.awaitParameters();
                downs.set(0);
                ups.set(0);
                updates.set(0);
                assertThatThrownBy(() -> {
                    off.step(2, 0.01f, 1f);
                    off.awaitParameters();
                }).isInstanceOf(IllegalStateException.class)
                        .hasMessageContaining("the offloaded optimizer's pipeline failed at " + expected)
                        .hasMessageContaining("test: the bus fell off");
                // the same error again, at once: never a hang on a stage that stopped
                assertThatThrownBy(() -> off.step(3, 0.01f, 1f)).hasMessageContaining(expected);
                assertThatThrownBy(off::awaitParameters).hasMessageContaining(expected);
            }
        }
    }

    @Test
    void anOptimizerThatCannotStepInPartsStaysSerial() {
        try (Network b = network(cpu)) {
            Optimizer inner = AdamW.of(0f).create(host, b.table(), b.params(), b.grads());
            assertThat(inner.stepsInParts()).isTrue();
            inner.close();
            assertThatThrownBy(() -> new Optimizer() {
                public void step(int t, float lr, float s) {}
                public java.util.Map<String, MemorySegment> state() { return java.util.Map.of(); }
                public DeviceMemory stateMemory() { return null; }
                public String describe() { return "plain"; }
                public void close() {}
            }.stepPart(1, 0f, 1f, 0, 1)).isInstanceOf(UnsupportedOperationException.class)
                    .hasMessageContaining("plain does not step in parts");
        }
    }

    /** A memory passing everything to {@code inner}, for tests that intercept its copies. */
    private static class Gated implements DeviceMemory {
        private final DeviceMemory inner;

        Gated(DeviceMemory inner) {
            this.inner = inner;
        }

        public DeviceArena arena() {
            return inner.arena();
        }

        public void copyToDevice(MemorySegment h, MemorySegment d) {
            inner.copyToDevice(h, d);
        }

        public void copyToHost(MemorySegment d, MemorySegment h) {
            inner.copyToHost(d, h);
        }

        public void copy(MemorySegment s, MemorySegment d) {
            inner.copy(s, d);
        }

        public void zero(MemorySegment d) {
            inner.zero(d);
        }

        public boolean hostAccessible() {
            return false;
        }

        public String describe() {
            return "gated " + inner.describe();
        }

        static void await(CountDownLatch latch, String what) {
            try {
                if (!latch.await(GATE_SECONDS, TimeUnit.SECONDS)) {
                    throw new AssertionError("no overlap: waited " + GATE_SECONDS + " s for " + what);
                }
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
        }
    }

    /** {@code ops} running {@code before} ahead of each optimizer kernel call. */
    private static Ops watch(Ops ops, Runnable before) {
        return (Ops) Proxy.newProxyInstance(Ops.class.getClassLoader(), new Class<?>[] {Ops.class},
                (proxy, method, args) -> {
                    String m = method.getName();
                    if (m.equals("adamw") || m.equals("sgd") || m.equals("lion")) {
                        before.run();
                    }
                    try {
                        return method.invoke(ops, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
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
