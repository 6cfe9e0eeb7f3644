package io.accel4j.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.core.Bf16;
import io.accel4j.core.DType;
import io.accel4j.cpu.Casts;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.optim.Bf16AdamW;
import io.accel4j.optim.Bf16StoreAdamW;
import io.accel4j.optim.OffloadedBf16AdamW;
import io.accel4j.optim.Optimizer;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.model.Gpt2Options;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.ParameterLayout;
import io.accel4j.train.model.ParameterLayout.Param;
import io.accel4j.train.model.Recompute;
import io.accel4j.train.plan.Bf16ParamsPlan;
import io.accel4j.train.plan.MemoryPlan;
import io.accel4j.train.precision.Precision;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * bf16 working weights ({@code --bf16-params}, {@link io.accel4j.train.model.Bf16ParamWeights} and
 * {@link Bf16StoreAdamW}, the optimizer {@code fit.Bf16ParamSync} makes): the model and its optimizer are bit for bit
 * the Java API's {@link Bf16AdamW} over an fp32 buffer whose initial weights are rounded to bf16; what a layer computes
 * with is the store's values exactly; the offloaded optimizer ({@link OffloadedBf16AdamW}) is the same bits with the
 * model in memory host code cannot touch; the plan is every byte the model and its optimizer allocate; on the
 * {@link io.accel4j.fit.Learner}, two ranks are one with twice the batch. Resuming bit for bit (either optimizer's
 * checkpoint into the other) is {@link LearnerBf16ParamsTest}'s.
 */
class Bf16ParamsTest {

    /** An odd shape: C = 12 (3 heads of 4), V = 23 padded to 32, 3 layers, 9 positions. */
    private static final GptConfig ODD = new GptConfig(9, 23, 32, 3, 3, 12);
    private static final int B = 3;
    private static final int T = 7;

    @TempDir
    static Path tmp;
    private static Parallel pool;
    private static CpuOps ops;
    private static TokenFile small;

    @BeforeAll
    static void setUp() throws IOException {
        pool = new Parallel(2);
        ops = new CpuOps(pool);
        small = Gpt2Fixtures.tokenFile(tmp.resolve("small.bin"), 600, new Random(11));
    }

    @AfterAll
    static void tearDown() {
        small.close();
        pool.close();
    }

    private static Gpt2 model(GptConfig c, DType gradients, DType parameters) {
        return new Gpt2(c, ops, B, T, Gpt2Options.DEFAULT.withPrecision(DType.BF16, null)
                .withActivationStorage(DType.BF16).withGradientStorage(gradients).withParameterStorage(parameters));
    }

    @Test
    void theStoreAndItsOptimizerAreBf16AdamWOverAnFp32BufferBitForBit() {
        long seed = 20261206L;
        Random r = new Random(seed);
        // decay on the matrices only: several ranges and groups; a clipping scale below 1
        Bf16AdamW.Spec spec = new Bf16AdamW.Spec(0.9f, 0.95f, 1e-8f, 0.1f, false, 77);
        try (Gpt2 ref = model(ODD, DType.FP32, DType.FP32); Gpt2 store = model(ODD, DType.FP32, DType.BF16)) {
            ref.initialise(5);
            store.initialise(5);
            long n = ref.layout().count();
            MemorySegment p = ref.params(); // the reference's initial weights rounded to bf16, as the store's
            try (Arena a = Arena.ofConfined()) {
                MemorySegment h = a.allocate(n * 2);
                Casts.f32ToBf16(h, 0, p, 0, n);
                Casts.bf16ToF32(p, 0, h, 0, n);
            }
            try (Optimizer want = spec.create(ops, ref.network().table(), ref.params(), ref.grads());
                 Bf16StoreAdamW got = new Bf16StoreAdamW(spec, ops, store.network().table(), store.halfParameters(),
                         Bf16StoreAdamW.Gradients.of(store.grads()));
                 Arena a = Arena.ofConfined()) {
                MemorySegment in = a.allocate((long) B * T * 4), tg = a.allocate((long) B * T * 4);
                MemorySegment widened = a.allocate(n * 4);
                for (int t = 1; t <= 5; t++) {
                    for (int i = 0; i < B * T; i++) {
                        in.setAtIndex(ValueLayout.JAVA_INT, i, r.nextInt(ODD.V()));
                        tg.setAtIndex(ValueLayout.JAVA_INT, i, r.nextInt(ODD.V()));
                    }
                    ref.zeroGrad();
                    store.zeroGrad();
                    double lw = ref.forwardBackward(in, tg, B, T, 1f / (B * T));
                    double lg = store.forwardBackward(in, tg, B, T, 1f / (B * T));
                    assertThat(lg).as("seed %d, step %d's loss", seed, t).isEqualTo(lw);
                    assertThat(floats(store.grads())).as("step %d's gradients", t)
                            .containsExactly(floats(ref.grads()));
                    double norm = Math.sqrt(ops.sumOfSquares(ref.grads(), n));
                    float scale = (float) Math.min(1, 0.5 / norm);
                    want.step(t, 3e-2f, scale);
                    got.step(t, 3e-2f, scale);
                    assertThat(floats(got.state().get("master"))).as("step %d's master", t)
                            .containsExactly(floats(want.state().get("master")));
                    for (String s : new String[] {"m", "v"}) {
                        assertThat(floats(got.state().get(s))).as("step %d's %s", t, s)
                                .containsExactly(floats(want.state().get(s)));
                    }
                    store.copyParamsToHost(widened);
                    assertThat(floats(widened)).as("step %d's working weights", t)
                            .containsExactly(floats(ref.params()));
                }
                checkWorkingRegionsAreTheStore(store, floats(widened));
            }
        }
    }

    /** Every unit, acquired, reads exactly the store's values (each a bf16 value) through its tensors' slices. */
    private static void checkWorkingRegionsAreTheStore(Gpt2 model, float[] store) {
        ParameterLayout layout = model.layout();
        for (float x : store) {
            assertThat(Bf16.toFloat(Bf16.fromFloat(x))).isEqualTo(x);
        }
        for (int l = model.config().L() - 1; l >= -1; l--) { // a layer, then the embeddings and the final LayerNorm
            for (Param p : Param.values()) {
                boolean whole = p == Param.WTE || p == Param.WPE || p == Param.LNFW || p == Param.LNFB;
                if (whole != (l < 0)) {
                    continue;
                }
                int layer = Math.max(l, 0);
                int unit = layout.unitOf(p, layer);
                model.weights().acquire(unit);
                float[] got = floats(model.weights().param(p, layer));
                model.weights().release(unit);
                ParameterLayout.Span s = layout.tensor(p);
                long at = whole ? s.offset() : s.layerOffset(layer);
                float[] want = java.util.Arrays.copyOfRange(store, (int) at, (int) at + got.length);
                assertThat(got).as("%s of layer %d", p, layer).containsExactly(want);
            }
        }
        assertThatThrownBy(() -> model.weights().param(Param.QKVW, 0)).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("outside an acquire");
        assertThatThrownBy(model::params).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("--bf16-params");
    }

    /** A batch of random tokens, B × T inputs then B × T targets, from {@code r}. */
    private static void randomBatch(MemorySegment in, MemorySegment tg, Random r, int V) {
        for (int i = 0; i < B * T; i++) {
            in.setAtIndex(ValueLayout.JAVA_INT, i, r.nextInt(V));
            tg.setAtIndex(ValueLayout.JAVA_INT, i, r.nextInt(V));
        }
    }

    /**
     * {@link Bf16ParamsPlan#of} is every byte the model and its {@link Bf16StoreAdamW} (master, m, v in the model's
     * memory) allocate, before and through a step, plus the plan's batch (the inputs and targets, held by the
     * caller); and the same as {@link Bf16ParamsPlan#trialStep}.
     */
    @ParameterizedTest(name = "{0} gradients")
    @EnumSource(value = DType.class, names = {"FP32", "BF16"})
    void thePlanIsEveryByteAModelAndItsOptimizerAllocate(DType gradients) {
        for (Recompute recompute : new Recompute[] {Recompute.NONE, Recompute.GELU, Recompute.LAYER}) {
            MemoryPlan plan = Bf16ParamsPlan.of(ODD, B, T, recompute, DType.BF16, gradients);
            CountingMemory counted = new CountingMemory();
            io.accel4j.core.ops.Ops o = counted.ops(ops);
            try (Gpt2 m = new Gpt2(ODD, o, B, T, Gpt2Options.DEFAULT.withRecompute(recompute)
                    .withPrecision(DType.BF16, null).withActivationStorage(DType.BF16).withGradientStorage(gradients)
                    .withParameterStorage(DType.BF16))) {
                m.initialise(1);
                try (Bf16StoreAdamW adamw = new Bf16StoreAdamW(Bf16AdamW.of(0f, 1), o, m.network().table(),
                        m.halfParameters(), gradients == DType.FP32 ? Bf16StoreAdamW.Gradients.of(m.grads())
                        : Bf16StoreAdamW.Gradients.of(m.halfGradients()));
                     Arena a = Arena.ofConfined()) {
                    assertThat(m.totalBytes() + adamw.stateBytes()).as("recompute %s", recompute)
                            .isEqualTo(plan.total() - plan.batch());
                    assertThat(counted.live.get()).isEqualTo(plan.total() - plan.batch());
                    MemorySegment in = a.allocate((long) B * T * 4), tg = a.allocate((long) B * T * 4);
                    randomBatch(in, tg, new Random(2), ODD.V());
                    m.zeroGrad();
                    assertThat(m.forwardBackward(in, tg, B, T, 1f / (B * T))).isFinite();
                    adamw.step(1, 1e-3f, 1f);
                    assertThat(counted.peak.get()).isEqualTo(plan.total() - plan.batch());
                }
            }
            assertThat(Bf16ParamsPlan.trialStep(ODD, ops, B, T, recompute, DType.BF16, gradients))
                    .isEqualTo(plan.total());
            MemoryPlan fp32Params = MemoryPlan.of(ODD, B, T, recompute, 0, 1, DType.BF16, gradients);
            long psi = ODD.parameterCount();
            // bf16 working weights: the parameters shrink, the optimizer gains the fp32 master (4Ψ)
            assertThat(plan.parameters()).isLessThan(fp32Params.parameters());
            assertThat(plan.optimizer()).isEqualTo(fp32Params.optimizer() + 4 * psi);
            assertThat(plan.gradients()).isEqualTo(fp32Params.gradients());
            assertThat(plan.activations()).isEqualTo(fp32Params.activations());
        }
    }

    /**
     * The offloaded optimizer ({@code offloadOptimizer()}: master and moments on the host, the model in a
     * {@link StrictMemory} "device" host code cannot touch) is the same bits as {@link Bf16StoreAdamW} on the model's
     * memory, step by step: master, m, v and the bf16 working weights (accumulation-free steps, clipping below 1).
     */
    @ParameterizedTest(name = "{0} gradients")
    @EnumSource(value = DType.class, names = {"FP32", "BF16"})
    void theOffloadedOptimizerIsTheSameBits(DType gradients) {
        StrictMemory strict = new StrictMemory();
        Bf16AdamW.Spec spec = new Bf16AdamW.Spec(0.9f, 0.95f, 1e-8f, 0.05f, false, 9);
        Random r = new Random(20261206L);
        try (Gpt2 plain = model(ODD, gradients, DType.BF16);
             Gpt2 device = new Gpt2(ODD, strict.ops(ops), B, T, Gpt2Options.DEFAULT.withPrecision(DType.BF16, null)
                     .withActivationStorage(DType.BF16).withGradientStorage(gradients)
                     .withParameterStorage(DType.BF16))) {
            plain.initialise(7);
            device.initialise(7);
            try (Bf16StoreAdamW want = new Bf16StoreAdamW(spec, ops, plain.network().table(), plain.halfParameters(),
                    gradients(plain));
                 OffloadedBf16AdamW got = new OffloadedBf16AdamW(spec, device.ops(), ops, device.network().table(),
                         device.halfParameters(), gradients(device));
                 Arena a = Arena.ofConfined()) {
                long n = plain.layout().count();
                MemorySegment in = a.allocate((long) B * T * 4), tg = a.allocate((long) B * T * 4);
                MemorySegment wantW = a.allocate(n * 4), gotW = a.allocate(n * 4);
                for (int t = 1; t <= 5; t++) {
                    randomBatch(in, tg, r, ODD.V());
                    plain.zeroGrad();
                    device.zeroGrad();
                    double lw = plain.forwardBackward(in, tg, B, T, 1f / (B * T));
                    double lg = device.forwardBackward(in, tg, B, T, 1f / (B * T));
                    assertThat(lg).as("step %d's loss", t).isEqualTo(lw);
                    want.step(t, 3e-2f, 0.5f);
                    got.step(t, 3e-2f, 0.5f);
                    for (String s : new String[] {"master", "m", "v"}) {
                        assertThat(floats(got.state().get(s))).as("step %d's %s", t, s)
                                .containsExactly(floats(want.state().get(s)));
                    }
                    plain.copyParamsToHost(wantW);
                    device.copyParamsToHost(gotW);
                    assertThat(floats(gotW)).as("step %d's working weights", t).containsExactly(floats(wantW));
                }
                assertThat(floats(want.state().get("master"))).as("the master keeps what bf16 rounds away")
                        .isNotEqualTo(floats(wantW));
            }
        }
    }

    private static Bf16StoreAdamW.Gradients gradients(Gpt2 m) {
        return m.gradientStorage() == DType.FP32 ? Bf16StoreAdamW.Gradients.of(m.grads())
                : Bf16StoreAdamW.Gradients.of(m.halfGradients());
    }

    /**
     * Offloaded: the model's memory holds the bf16 parameters, the gradients and the activations (what the plan's
     * device side says, less the batch); the host what the plan says ({@link OffloadedBf16AdamW}'s master, m, v and
     * chunks).
     */
    @ParameterizedTest(name = "{0} gradients")
    @EnumSource(value = DType.class, names = {"FP32", "BF16"})
    void theOffloadedPlanIsWhatEachSideAllocates(DType gradients) {
        io.accel4j.train.plan.OffloadPlan plan = Bf16ParamsPlan.offloaded(ODD, B, T, Recompute.NONE, DType.BF16,
                gradients);
        long psi = ODD.parameterCount();
        assertThat(plan.device().optimizer()).isZero();
        assertThat(plan.host()).isEqualTo(12 * psi + 6 * Math.min(1 << 16, psi));
        CountingMemory counted = new CountingMemory();
        io.accel4j.core.ops.Ops o = counted.ops(ops);
        try (Gpt2 m = new Gpt2(ODD, o, B, T, Gpt2Options.DEFAULT.withPrecision(DType.BF16, null)
                     .withActivationStorage(DType.BF16).withGradientStorage(gradients)
                     .withParameterStorage(DType.BF16))) {
            m.initialise(1);
            try (OffloadedBf16AdamW adamw = new OffloadedBf16AdamW(Bf16AdamW.of(0f, 1), o, ops, m.network().table(),
                    m.halfParameters(), gradients(m));
                 Arena a = Arena.ofConfined()) {
                assertThat(m.totalBytes()).isEqualTo(plan.device().total() - plan.device().batch());
                assertThat(counted.live.get()).as("nothing of the optimizer's on the device")
                        .isEqualTo(m.totalBytes());
                long host = adamw.hostScratchBytes();
                for (MemorySegment s : adamw.state().values()) {
                    host += s.byteSize();
                }
                assertThat(host).isEqualTo(plan.host()).isEqualTo(OffloadedBf16AdamW.hostBytes(psi));
                MemorySegment in = a.allocate((long) B * T * 4), tg = a.allocate((long) B * T * 4);
                randomBatch(in, tg, new Random(2), ODD.V());
                m.zeroGrad();
                assertThat(m.forwardBackward(in, tg, B, T, 1f / (B * T))).isFinite();
                adamw.step(1, 1e-3f, 1f);
                assertThat(counted.peak.get()).isEqualTo(m.totalBytes());
            }
        }
        // the ZeRO-Offload layout: the device's model states are the bf16 parameters and the gradients
        MemoryPlan fp32Offload = io.accel4j.train.plan.OffloadPlan.of(ODD, B, T, Recompute.NONE).device();
        assertThat(plan.device().modelStates()).isLessThan(fp32Offload.modelStates());
    }

    private record Ddp(double[] losses, double[] norms) {}

    /**
     * {@link LearnerBf16ParamsTest#builder}'s learner (GPT-2 on the trainer's parts, bf16 working weights) of
     * {@code ranks} ranks of {@code batch} sequences each, 4 steps.
     */
    private static Ddp ddp(int ranks, int batch) {
        TrainConfig cfg = Gpt2Fixtures.base().batch(batch).seq(T).steps(4).lr(2e-2f).gradClip(1f).bucketBytes(0)
                .seed(9).precision(Precision.of(DType.BF16)).build();
        try (io.accel4j.train.data.TokenSource data = new io.accel4j.train.data.TokenSource(
                io.accel4j.train.data.TokenShards.of(small), cfg.dataOrder(), cfg.seed(), 1);
             io.accel4j.fit.Learner l = LearnerBf16ParamsTest.builder(cfg, ranks, false, 0, data).build()) {
            double[] losses = new double[4], norms = new double[4];
            java.util.List<StepMetrics> steps = l.fit(4, null);
            for (int s = 0; s < 4; s++) {
                losses[s] = steps.get(s).trainLoss();
                norms[s] = steps.get(s).gradNorm();
            }
            return new Ddp(losses, norms);
        }
    }

    /**
     * DDP on the {@link io.accel4j.fit.Learner}: 2 ranks × B = 2 are 1 rank × B = 4 up to the order of fp32 sums (the
     * all-reduce averages the ranks' gradients). Step 0 (the same weights) within 1e-5 relative: fp32 sums of a few
     * hundred terms in another order; later steps within 1e-3: a master that differs in its last bit may round
     * stochastically to the neighbouring bf16 value (2⁻⁸ relative) on a few elements.
     */
    @Test
    void twoRanksAreOneRankWithTwiceTheBatch() {
        Ddp one = ddp(1, 4);
        Ddp d = ddp(2, 2);
        assertThat(d.norms()[0]).isCloseTo(one.norms()[0], org.assertj.core.data.Offset.offset(1e-5 * one.norms()[0]));
        for (int s = 0; s < 4; s++) {
            assertThat(d.losses()[s]).as("step %d's loss", s).isCloseTo(one.losses()[s],
                    org.assertj.core.data.Offset.offset(1e-3 * one.losses()[s]));
        }
    }

    /**
     * A model with bf16 working weights takes no other weights. (What the learner cannot run with them, ZeRO
     * among it, is {@link LearnerBf16ParamsTest#whatDoesNotComposeIsRefusedBeforeAllocation}.)
     */
    @Test
    void aBf16ModelRefusesOtherWeights() {
        try (Gpt2 m = model(Gpt2Fixtures.TINY, DType.FP32, DType.BF16)) {
            assertThatThrownBy(() -> m.useWeights(new io.accel4j.train.model.FlatWeights(m.layout(), m.memory())))
                    .isInstanceOf(IllegalStateException.class).hasMessageContaining("bf16");
        }
    }

    static float[] floats(MemorySegment s) {
        float[] a = new float[(int) (s.byteSize() / 4)];
        MemorySegment.copy(s, ValueLayout.JAVA_FLOAT_UNALIGNED, 0, a, 0, a.length);
        return a;
    }
}
