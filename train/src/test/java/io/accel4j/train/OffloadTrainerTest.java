package io.accel4j.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.core.ops.Ops;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.model.Gpt2Options;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.Recompute;
import io.accel4j.train.parallel.ModelStates;
import io.accel4j.train.plan.MemoryPlan;
import io.accel4j.train.plan.OffloadPlan;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The trainer with AdamW offloaded ({@link ModelStates#offloaded()}): on a strict CPU "device" ({@link StrictMemory}) the losses and
 * parameters are the same bits as the plain trainer's (accumulation and clipping on), a checkpoint resumes bit for bit
 * (with or without offload: the same llm.c files), and {@link OffloadPlan} is what is allocated on each side.
 */
class OffloadTrainerTest {

    /** Odd sizes: V 37 (padded 40), C 12, 3 layers, 2 heads; B·T = 3·7. */
    private static final GptConfig CONFIG = new GptConfig(12, 37, 40, 3, 2, 12);
    private static final int B = 3, T = 7;

    @TempDir
    static Path tmp;
    private static Parallel pool;
    private static CpuOps cpu;

    @BeforeAll
    static void setUp() throws IOException {
        pool = new Parallel(2);
        cpu = new CpuOps(pool);
        Random r = new Random(5);
        int[] tokens = new int[400];
        for (int i = 0; i < tokens.length; i++) {
            tokens[i] = r.nextInt(CONFIG.V());
        }
        TokenFile.write(tmp.resolve("t.bin"), tokens);
    }

    @AfterAll
    static void tearDown() {
        pool.close();
    }

    private static TrainConfig config(int steps) {
        return TrainConfig.builder().batch(B).seq(T).steps(steps).gradAccum(2).gradClip(0.5f).lr(3e-3f).warmup(2)
                .weightDecay(0.1f).dataOrder(SampleOrder.Mode.SEQUENTIAL).build();
    }

    private record Run(List<Double> losses, float[] params) {}

    private static Run train(Ops ops, boolean offload, int steps, Path saveAt, int saveStep, Path resume)
            throws IOException {
        List<Double> losses = new ArrayList<>();
        try (TokenFile train = TokenFile.open(tmp.resolve("t.bin"));
             Gpt2 model = new Gpt2(CONFIG, ops, B, T);
             Trainer t = new Trainer(model, config(steps), train, null, null,
                     offload ? ModelStates.offloaded() : ModelStates::of)) {
            model.initialise(resume == null ? 7 : 99); // a resume's own initial parameters lose to the checkpoint's
            if (resume != null) {
                t.resume(resume);
            }
            while (!t.done()) {
                losses.add(t.trainStep().trainLoss());
                if (saveAt != null && t.step() == saveStep) {
                    t.save(saveAt);
                }
            }
            float[] p = new float[(int) model.layout().count()];
            try (Arena a = Arena.ofConfined()) {
                MemorySegment host = a.allocate(4L * p.length, 64);
                t.copyParameters(host);
                MemorySegment.copy(host, ValueLayout.JAVA_FLOAT, 0, p, 0, p.length);
            }
            return new Run(losses, p);
        }
    }

    @Test
    void offloadIsTheSameBitsAndResumesBitForBit(@TempDir Path dir) throws IOException {
        StrictMemory mem = new StrictMemory();
        Ops device = mem.ops(cpu);
        Run plain = train(cpu, false, 8, null, 0, null);
        Run off = train(device, true, 8, dir.resolve("ckpt"), 3, null);
        assertThat(off.losses()).containsExactlyElementsOf(plain.losses());
        assertThat(off.params()).containsExactly(plain.params());
        assertThat(plain.losses().get(7)).isNotEqualTo(plain.losses().get(0)); // it trained
        for (boolean offload : new boolean[] {true, false}) {
            Run rest = train(offload ? device : cpu, offload, 8, null, 0, dir.resolve("ckpt"));
            assertThat(rest.losses()).as("offload %s", offload).containsExactlyElementsOf(plain.losses().subList(3, 8));
            assertThat(rest.params()).as("offload %s", offload).containsExactly(plain.params());
        }
    }

    /**
     * The upload overlaps the next forward: after step 2's update the final LayerNorm's parameters (the last unit, at
     * the end of the upload's unit order) are held back until the next forward has started its first unit (the
     * encoder); a forward that waited for the whole upload would wait for ever (the gate fails the copy after
     * {@code 20 s} instead). The losses are still the plain trainer's bits.
     */
    @Test
    void theNextForwardStartsBeforeTheLastUnitIsUp() throws Exception {
        nextForwardStartsBeforeTheLastUnitIsUp(io.accel4j.core.DType.FP32);
    }

    /** The same over 16-bit gradients (HalfGradStates: widened chunk by chunk on the way down). */
    @Test
    void overSixteenBitGradientsTooTheNextForwardStartsBeforeTheLastUnitIsUp() throws Exception {
        nextForwardStartsBeforeTheLastUnitIsUp(io.accel4j.core.DType.BF16);
    }

    private static Gpt2 model(Ops ops, io.accel4j.core.DType grads) {
        return new Gpt2(CONFIG, ops, B, T, Gpt2Options.DEFAULT.withGradientStorage(grads));
    }

    private static void nextForwardStartsBeforeTheLastUnitIsUp(io.accel4j.core.DType grads) throws Exception {
        java.util.concurrent.CountDownLatch encoderStarted = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.atomic.AtomicBoolean armed = new java.util.concurrent.atomic.AtomicBoolean();
        java.util.concurrent.atomic.AtomicBoolean held = new java.util.concurrent.atomic.AtomicBoolean();
        java.util.concurrent.atomic.AtomicBoolean step2Returned = new java.util.concurrent.atomic.AtomicBoolean();
        long[] lastUnit = new long[2]; // device address range of the final LayerNorm's parameters
        StrictMemory strict = new StrictMemory();
        Ops strictOps = strict.ops(cpu);
        io.accel4j.core.memory.DeviceMemory gate = new io.accel4j.core.memory.DeviceMemory() {
            public io.accel4j.core.memory.DeviceArena arena() {
                return strict.arena();
            }

            public void copyToDevice(MemorySegment h, MemorySegment d) {
                if (d.address() >= lastUnit[0] && d.address() < lastUnit[1] && armed.getAndSet(false)) {
                    held.set(true);
                    try {
                        if (!encoderStarted.await(20, java.util.concurrent.TimeUnit.SECONDS)) {
                            throw new AssertionError("no overlap: the next forward did not start in 20 s");
                        }
                    } catch (InterruptedException e) {
                        throw new AssertionError(e);
                    }
                }
                strict.copyToDevice(h, d);
            }

            public void copyToHost(MemorySegment d, MemorySegment h) {
                strict.copyToHost(d, h);
            }

            public void copy(MemorySegment src, MemorySegment dst) {
                strict.copy(src, dst);
            }

            public void zero(MemorySegment d) {
                strict.zero(d);
            }

            public boolean hostAccessible() {
                return false;
            }

            public String describe() {
                return "gated strict memory";
            }
        };
        Ops ops = (Ops) java.lang.reflect.Proxy.newProxyInstance(Ops.class.getClassLoader(), new Class<?>[] {Ops.class},
                (proxy, method, args) -> {
                    if (method.getName().equals("memory") && method.getParameterCount() == 0) {
                        return gate;
                    }
                    if (method.getName().equals("encoderForward") && step2Returned.get()) {
                        encoderStarted.countDown();
                    }
                    try {
                        return method.invoke(strictOps, args);
                    } catch (java.lang.reflect.InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
        List<Double> plain = new ArrayList<>();
        try (TokenFile train = TokenFile.open(tmp.resolve("t.bin"));
             Gpt2 model = model(cpu, grads);
             Trainer t = new Trainer(model, config(4).toBuilder().precision(
                     io.accel4j.train.precision.Precision.FP32.withGradients(grads)).build(), train, null, null, ModelStates::of)) {
            model.initialise(7);
            while (!t.done()) {
                plain.add(t.trainStep().trainLoss());
            }
        }
        List<Double> losses = new ArrayList<>();
        try (TokenFile train = TokenFile.open(tmp.resolve("t.bin"));
             Gpt2 model = model(ops, grads);
             Trainer t = new Trainer(model, config(4).toBuilder().precision(
                     io.accel4j.train.precision.Precision.FP32.withGradients(grads)).build(), train, null, null, ModelStates.offloaded())) {
            model.initialise(7);
            io.accel4j.train.model.ParameterLayout.Segment lnfw = model.layout().units()
                    .get(model.layout().finalUnit()).segments().get(0);
            lastUnit[0] = model.params().address() + lnfw.offset() * Float.BYTES;
            lastUnit[1] = model.params().address() + model.params().byteSize();
            while (!t.done()) {
                if (t.step() == 1) {
                    try (Arena a = Arena.ofConfined()) { // waits for step 1's upload: what is held next is step 2's
                        t.copyParameters(a.allocate(4L * model.layout().count(), 64));
                    }
                    armed.set(true); // step 2's upload of the last unit, held until step 3's forward starts
                }
                losses.add(t.trainStep().trainLoss());
                step2Returned.set(t.step() >= 2); // step 2 returned: its upload may still run (held at the last unit)
            }
            assertThat(held.get()).as("the last unit's upload was held").isTrue();
            assertThat(encoderStarted.getCount()).isZero();
        }
        assertThat(losses).containsExactlyElementsOf(plain);
    }

    @Test
    void thePlanIsWhatEachSideAllocates() throws IOException {
        OffloadPlan plan = OffloadPlan.of(CONFIG, B, T, Recompute.NONE);
        MemoryPlan whole = MemoryPlan.of(CONFIG, B, T, Recompute.NONE);
        long psi = new io.accel4j.train.model.ParameterLayout(CONFIG).count();
        assertThat(plan.device().total()).isEqualTo(whole.total() - 8 * psi);
        assertThat(plan.host()).isEqualTo(16 * psi);
        try (TokenFile train = TokenFile.open(tmp.resolve("t.bin"));
             Gpt2 model = new Gpt2(CONFIG, new StrictMemory().ops(cpu), B, T);
             Trainer t = new Trainer(model, config(1), train, null, null, ModelStates.offloaded())) {
            assertThat(model.totalBytes() + t.stateBytes()).isEqualTo(plan.device().total());
            assertThat(t.hostBytes()).isEqualTo(plan.host());
        }
        long budget = plan.device().total();
        assertThat(OffloadPlan.largestBatch(CONFIG, T, Recompute.NONE, budget, 64)).isEqualTo(B);
        assertThat(MemoryPlan.largestBatch(CONFIG, T, Recompute.NONE, budget, 64)).isLessThan(B);
    }

    @Test
    void zeroIsRefusedNamingTheStage() throws IOException {
        try (TokenFile train = TokenFile.open(tmp.resolve("t.bin"));
             Gpt2 model = new Gpt2(CONFIG, cpu, B, T)) {
            TrainConfig z = config(1).toBuilder().zeroStage(1).build();
            assertThatThrownBy(() -> ModelStates.offloaded().create(null, model, z, 0))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("ZeRO stage 1");
        }
    }
}
