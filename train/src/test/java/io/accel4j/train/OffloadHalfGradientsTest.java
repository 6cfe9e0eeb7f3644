package io.accel4j.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.core.DType;
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
import io.accel4j.train.precision.Precision;
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
 * The trainer with AdamW offloaded over 16-bit gradients ({@code --offload-optimizer --grad-storage bf16}): on a strict
 * CPU "device" ({@link StrictMemory}: host code cannot touch it, so the widened chunks must really be copied down) the
 * losses and parameters are the same bits as AdamW on the device over the same 16-bit gradients (accumulation and
 * clipping on), a checkpoint resumes bit for bit with or without offload, and {@link OffloadPlan} is what each side
 * allocates.
 */
class OffloadHalfGradientsTest {

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
                .weightDecay(0.1f).dataOrder(SampleOrder.Mode.SEQUENTIAL)
                .precision(Precision.FP32.withGradients(DType.BF16)).build();
    }

    private static Gpt2 model(Ops ops) {
        return new Gpt2(CONFIG, ops, B, T, Gpt2Options.DEFAULT.withGradientStorage(DType.BF16));
    }

    private record Run(List<Double> losses, float[] params) {}

    private static Run train(Ops ops, boolean offload, int steps, Path saveAt, int saveStep, Path resume)
            throws IOException {
        List<Double> losses = new ArrayList<>();
        try (TokenFile train = TokenFile.open(tmp.resolve("t.bin"));
             Gpt2 model = model(ops);
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
        Ops device = new StrictMemory().ops(cpu);
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

    @Test
    void thePlanIsWhatEachSideAllocates() throws IOException {
        OffloadPlan plan = OffloadPlan.of(CONFIG, B, T, Recompute.NONE, DType.FP32, DType.BF16);
        MemoryPlan onDevice = MemoryPlan.of(CONFIG, B, T, Recompute.NONE, 0, 1, DType.FP32, DType.BF16);
        long psi = new io.accel4j.train.model.ParameterLayout(CONFIG).count();
        assertThat(plan.device().total()).isEqualTo(onDevice.total() - 8 * psi);
        assertThat(plan.device().gradients()).isLessThan(4 * psi); // 16-bit on the device
        assertThat(plan.host()).isEqualTo(16 * psi); // the landing buffer is fp32
        CountingMemory counted = new CountingMemory();
        try (TokenFile train = TokenFile.open(tmp.resolve("t.bin"));
             Gpt2 model = model(counted.ops(cpu));
             Trainer t = new Trainer(model, config(1), train, null, null, ModelStates.offloaded())) {
            assertThat(model.totalBytes() + t.stateBytes()).isEqualTo(plan.device().total());
            // the counted memory holds the device side but the trainer's batch buffers (JVM memory), and AdamW's
            // moments: the host optimizer runs on the model's own backend when that is the CPU's, so its state is
            // allocated there (the master and the landing buffer come from the host arena, not counted)
            long want = plan.device().total() - plan.device().batch() + plan.optimizer();
            assertThat(counted.live.get()).isEqualTo(want);
            assertThat(t.hostBytes()).isEqualTo(plan.host());
            assertThat(t.trainStep().trainLoss()).isFinite();
            assertThat(counted.peak.get()).isEqualTo(want);
        }
    }

    @Test
    void zeroIsRefusedNamingTheStage() {
        try (Gpt2 model = model(cpu)) {
            TrainConfig z = config(1).toBuilder().zeroStage(1).build();
            assertThatThrownBy(() -> ModelStates.offloaded().create(null, model, z, 0))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("ZeRO stage 1");
        }
    }
}
