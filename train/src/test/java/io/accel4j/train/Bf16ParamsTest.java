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
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * bf16 working weights ({@code --bf16-params}, {@link io.accel4j.train.model.Bf16ParamWeights} and
 * {@link Bf16StoreAdamW}): the model and its optimizer are bit for bit the Java API's {@link Bf16AdamW} over an fp32
 * buffer whose initial weights are rounded to bf16; what a layer computes with is the store's values exactly; a
 * resumed run is the uninterrupted one bit for bit; the plan is every byte allocated.
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
        small = TrainerTest.tokenFile(tmp.resolve("small.bin"), 600, new Random(11));
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

    private static TrainConfig config(DType gradients, int steps) {
        return TrainerTest.base().batch(B).seq(T).steps(steps).lr(2e-2f).gradClip(1f).weightDecay(0.05f)
                .decayMatricesOnly(true).seed(9).precision(Precision.of(DType.BF16).withGradients(gradients))
                .build();
    }

    private record Run(double[] losses, float[] master, float[] working) {}

    private static void steps(Trainer t, int from, int to, double[] losses) {
        for (int s = from; s < to; s++) {
            losses[s] = t.trainStep().trainLoss();
        }
    }

    private static Run finish(Trainer t, Gpt2 m, double[] losses) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment master = a.allocate(m.layout().fp32Bytes()), working = a.allocate(m.layout().fp32Bytes());
            t.copyParameters(master);
            m.copyParamsToHost(working);
            return new Run(losses, floats(master), floats(working));
        }
    }

    @ParameterizedTest(name = "{0} gradients")
    @EnumSource(value = DType.class, names = {"FP32", "BF16"})
    void aResumedRunIsTheUninterruptedOneBitForBit(DType gradients) throws IOException {
        int steps = 6;
        Run whole;
        try (Gpt2 m = model(TrainerTest.TINY, gradients, DType.BF16)) {
            m.initialise(3);
            try (Trainer t = new Trainer(m, config(gradients, steps), small, null)) {
                double[] losses = new double[steps];
                steps(t, 0, steps, losses);
                whole = finish(t, m, losses);
            }
        }
        Path dir = tmp.resolve("ckpt-" + gradients);
        double[] losses = new double[steps];
        float[] master3;
        try (Gpt2 m = model(TrainerTest.TINY, gradients, DType.BF16)) {
            m.initialise(3);
            try (Trainer t = new Trainer(m, config(gradients, steps), small, null)) {
                steps(t, 0, 3, losses);
                t.save(dir);
                master3 = finish(t, m, losses).master();
            }
        }
        Run resumed;
        try (Gpt2 m = model(TrainerTest.TINY, gradients, DType.BF16)) {
            m.initialise(99); // overwritten by the resume
            try (Trainer t = new Trainer(m, config(gradients, steps), small, null)) {
                t.resume(dir);
                assertThat(t.step()).isEqualTo(3);
                steps(t, 3, steps, losses);
                resumed = finish(t, m, losses);
            }
        }
        assertThat(resumed.losses()).containsExactly(whole.losses());
        assertThat(resumed.master()).containsExactly(whole.master());
        assertThat(resumed.working()).containsExactly(whole.working());
        assertThat(whole.master()).isNotEqualTo(whole.working()); // the master keeps what bf16 rounds away
        // the llm.c model file is the fp32 master (what a sampler or an fp32 run loads), not the bf16 copy
        try (Arena a = Arena.ofConfined()) {
            io.accel4j.train.checkpoint.LlmcCheckpoint.Loaded l = io.accel4j.train.checkpoint.LlmcCheckpoint.read(
                    io.accel4j.train.checkpoint.CheckpointFiles.latest(dir).model(), a);
            assertThat(floats(l.params().asSlice(0, master3.length * 4L))).containsExactly(master3);
        }
    }

    @ParameterizedTest(name = "{0} gradients")
    @EnumSource(value = DType.class, names = {"FP32", "BF16"})
    void thePlanIsEveryByteAModelAndItsTrainerAllocate(DType gradients) throws IOException {
        for (Recompute recompute : new Recompute[] {Recompute.NONE, Recompute.GELU, Recompute.LAYER}) {
            MemoryPlan plan = Bf16ParamsPlan.of(ODD, B, T, recompute, DType.BF16, gradients);
            CountingMemory counted = new CountingMemory();
            try (Gpt2 m = new Gpt2(ODD, counted.ops(ops), B, T, Gpt2Options.DEFAULT.withRecompute(recompute)
                    .withPrecision(DType.BF16, null).withActivationStorage(DType.BF16).withGradientStorage(gradients)
                    .withParameterStorage(DType.BF16))) {
                m.initialise(1);
                try (TokenFile f = odd(); Trainer t = new Trainer(m, config(gradients, 1), f, null)) {
                    assertThat(m.totalBytes() + t.stateBytes()).as("recompute %s", recompute).isEqualTo(plan.total());
                    assertThat(counted.live.get()).isEqualTo(plan.total() - plan.batch());
                    assertThat(t.trainStep().trainLoss()).isFinite();
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

    private record Trained(java.util.List<Double> losses, float[] master, float[] working) {}

    /** {@code steps} steps (accumulation 2, clipping), saving at {@code saveStep}, or resuming {@code resume}. */
    private static Trained train(io.accel4j.core.ops.Ops o, DType gradients, boolean offload, int steps, Path saveAt,
                                 int saveStep, Path resume) throws IOException {
        TrainConfig cfg = config(gradients, steps).toBuilder().gradAccum(2).build();
        java.util.List<Double> losses = new java.util.ArrayList<>();
        try (TokenFile f = odd();
             Gpt2 m = new Gpt2(ODD, o, B, T, Gpt2Options.DEFAULT.withPrecision(DType.BF16, null)
                     .withActivationStorage(DType.BF16).withGradientStorage(gradients)
                     .withParameterStorage(DType.BF16))) {
            m.initialise(resume == null ? 7 : 99);
            try (Trainer t = new Trainer(m, cfg, f, null, null, offload
                    ? io.accel4j.train.parallel.Bf16ParamStates.offloaded()
                    : io.accel4j.train.parallel.ModelStates::of)) {
                if (resume != null) {
                    t.resume(resume);
                }
                while (!t.done()) {
                    losses.add(t.trainStep().trainLoss());
                    if (saveAt != null && t.step() == saveStep) {
                        t.save(saveAt);
                    }
                }
                Run r = finish(t, m, new double[0]);
                return new Trained(losses, r.master(), r.working());
            }
        }
    }

    /**
     * The offloaded optimizer ({@code --offload-optimizer}: master and moments on the host, the "device" a
     * {@link StrictMemory} host code cannot touch) is the same bits as the device's, and a checkpoint of either
     * resumes into the other bit for bit.
     */
    @ParameterizedTest(name = "{0} gradients")
    @EnumSource(value = DType.class, names = {"FP32", "BF16"})
    void theOffloadedOptimizerIsTheSameBitsAndResumesEitherWay(DType gradients, @TempDir Path dir)
            throws IOException {
        io.accel4j.core.ops.Ops device = new StrictMemory().ops(ops);
        Trained plain = train(ops, gradients, false, 6, null, 0, null);
        Trained off = train(device, gradients, true, 6, dir.resolve("ckpt"), 2, null);
        assertThat(off.losses()).containsExactlyElementsOf(plain.losses());
        assertThat(off.master()).containsExactly(plain.master());
        assertThat(off.working()).containsExactly(plain.working());
        for (boolean offload : new boolean[] {true, false}) {
            Trained rest = train(offload ? device : ops, gradients, offload, 6, null, 0, dir.resolve("ckpt"));
            assertThat(rest.losses()).as("offload %s", offload).containsExactlyElementsOf(plain.losses().subList(2, 6));
            assertThat(rest.master()).as("offload %s", offload).containsExactly(plain.master());
            assertThat(rest.working()).as("offload %s", offload).containsExactly(plain.working());
        }
    }

    /** Offloaded: the device holds the bf16 parameters and the gradients only; the host what the plan says. */
    @ParameterizedTest(name = "{0} gradients")
    @EnumSource(value = DType.class, names = {"FP32", "BF16"})
    void theOffloadedPlanIsWhatEachSideAllocates(DType gradients) throws IOException {
        io.accel4j.train.plan.OffloadPlan plan = Bf16ParamsPlan.offloaded(ODD, B, T, Recompute.NONE, DType.BF16,
                gradients);
        long psi = ODD.parameterCount();
        assertThat(plan.device().optimizer()).isZero();
        assertThat(plan.host()).isEqualTo(12 * psi + 6 * Math.min(1 << 16, psi));
        CountingMemory counted = new CountingMemory();
        try (TokenFile f = odd();
             Gpt2 m = new Gpt2(ODD, counted.ops(ops), B, T, Gpt2Options.DEFAULT.withPrecision(DType.BF16, null)
                     .withActivationStorage(DType.BF16).withGradientStorage(gradients)
                     .withParameterStorage(DType.BF16))) {
            m.initialise(1);
            try (Trainer t = new Trainer(m, config(gradients, 1), f, null, null,
                    io.accel4j.train.parallel.Bf16ParamStates.offloaded())) {
                assertThat(m.totalBytes() + t.stateBytes()).isEqualTo(plan.device().total());
                assertThat(t.hostBytes()).isEqualTo(plan.host());
                assertThat(t.trainStep().trainLoss()).isFinite();
            }
        }
        // the ZeRO-Offload layout: the device's model states are the bf16 parameters and the gradients
        MemoryPlan fp32Offload = io.accel4j.train.plan.OffloadPlan.of(ODD, B, T, Recompute.NONE).device();
        assertThat(plan.device().modelStates()).isLessThan(fp32Offload.modelStates());
    }

    private record Ddp(double[] losses, double[] norms, float[] master, float[] working) {}

    private static Ddp ddp(io.accel4j.core.ops.Ops o, int batch, io.accel4j.collectives.Communicator comm)
            throws IOException {
        TrainConfig cfg = TrainerTest.base().batch(batch).seq(T).steps(4).lr(2e-2f).gradClip(1f).bucketBytes(0)
                .seed(9).precision(Precision.of(DType.BF16)).build();
        try (Gpt2 m = new Gpt2(TrainerTest.TINY, o, batch, T, Gpt2Options.DEFAULT.withPrecision(DType.BF16, null)
                .withActivationStorage(DType.BF16).withParameterStorage(DType.BF16))) {
            m.initialise(3);
            try (Trainer t = new Trainer(m, cfg, small, null, comm)) {
                double[] losses = new double[4], norms = new double[4];
                for (int s = 0; s < 4; s++) {
                    StepMetrics sm = t.trainStep();
                    losses[s] = sm.trainLoss();
                    norms[s] = sm.gradNorm();
                }
                t.checkReplicas(); // every rank's master is the same bits
                Run r = finish(t, m, losses);
                return new Ddp(losses, norms, r.master(), r.working());
            }
        }
    }

    /**
     * DDP: 2 ranks × B = 2 are 1 rank × B = 4 up to the order of fp32 sums (the all-reduce averages the ranks'
     * gradients); every rank holds the same master and bf16 weights. Step 0 (the same weights) within 1e-5 relative:
     * fp32 sums of a few hundred terms in another order; later steps within 1e-3: a master that differs in its last bit
     * may round stochastically to the neighbouring bf16 value (2⁻⁸ relative) on a few elements.
     */
    @Test
    void twoRanksAreOneRankWithTwiceTheBatch() throws IOException {
        Ddp one = ddp(ops, 4, null);
        java.util.List<Ddp> two;
        try (io.accel4j.collectives.InProcessGroup g = io.accel4j.collectives.InProcessGroup.create(2,
                java.time.Duration.ofSeconds(60))) {
            two = g.run(comm -> {
                try (Parallel p = new Parallel(1)) {
                    return ddp(new CpuOps(p), 2, comm);
                }
            });
        }
        assertThat(two.get(1).master()).containsExactly(two.get(0).master());
        assertThat(two.get(1).working()).containsExactly(two.get(0).working());
        Ddp d = two.get(0);
        assertThat(d.norms()[0]).isCloseTo(one.norms()[0], org.assertj.core.data.Offset.offset(1e-5 * one.norms()[0]));
        for (int s = 0; s < 4; s++) {
            assertThat(d.losses()[s]).as("step %d's loss", s).isCloseTo(one.losses()[s],
                    org.assertj.core.data.Offset.offset(1e-3 * one.losses()[s]));
        }
    }

    private static TokenFile odd() throws IOException {
        Path p = tmp.resolve("odd.bin");
        if (!Files.exists(p)) {
            Random r = new Random(4);
            int[] t = new int[300];
            for (int i = 0; i < t.length; i++) {
                t[i] = r.nextInt(ODD.V());
            }
            TokenFile.write(p, t);
        }
        return TokenFile.open(p);
    }

    @ParameterizedTest
    @ValueSource(ints = {1, 2})
    void whatCannotTakeBf16ParamsIsRefused(int zero) throws IOException {
        try (Gpt2 m = model(TrainerTest.TINY, DType.FP32, DType.BF16)) {
            assertThatThrownBy(() -> m.useWeights(new io.accel4j.train.model.FlatWeights(m.layout(), m.memory())))
                    .isInstanceOf(IllegalStateException.class).hasMessageContaining("bf16");
            TrainConfig cfg = TrainerTest.base().batch(B).seq(T).zeroStage(zero).precision(Precision.of(DType.BF16))
                    .build();
            assertThatThrownBy(() -> io.accel4j.train.parallel.ModelStates.of(null, m, cfg, 8))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("--bf16-params does not go with --zero " + zero);
        }
    }

    static float[] floats(MemorySegment s) {
        return TrainerTest.floats(s);
    }
}
