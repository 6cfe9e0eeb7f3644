package io.accel4j.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.core.ops.Ops;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.fit.Learner;
import io.accel4j.fit.LearnerBuilder;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.data.TokenSource;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.Recompute;
import io.accel4j.train.plan.MemoryPlan;
import io.accel4j.train.plan.OffloadPlan;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The CLI's GPT-2 {@link Learner} with AdamW offloaded ({@link LearnerBuilder#offloadOptimizer()}, {@code optim.Offload}):
 * on a strict CPU "device" ({@link StrictMemory}) the losses and parameters are the same bits as the plain learner's
 * (accumulation and clipping on), an llm.c checkpoint resumes bit for bit (with or without offload: the same files), and
 * {@link OffloadPlan} is what is allocated on the device.
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

    /**
     * {@code steps} steps on {@code ops} from GPT-2's initialisation from seed 7 (a resume's own initial parameters,
     * seed 99, lose to the checkpoint's), a checkpoint into {@code saveAt} after step {@code saveStep}.
     */
    private static Run train(Ops ops, boolean offload, int steps, Path saveAt, int saveStep, Path resume)
            throws IOException {
        TrainConfig cfg = config(steps);
        try (TokenFile train = TokenFile.open(tmp.resolve("t.bin")); TokenSource data = Gpt2LearnerRuns.source(train, cfg)) {
            LearnerBuilder b = Gpt2LearnerRuns.builder(CONFIG, cfg, 1, data).backend(r -> ops);
            try (Learner l = (offload ? b.offloadOptimizer() : b).build()) {
                Gpt2LearnerRuns.initialised(l, CONFIG, cfg, data, resume == null ? 7 : 99);
                var ck = Gpt2LearnerRuns.checkpoints(l, CONFIG, cfg, data);
                if (resume != null) {
                    ck.resume(resume);
                }
                List<Double> losses = new java.util.ArrayList<>();
                if (saveAt != null) {
                    l.fit(saveStep - l.step(), m -> losses.add(m.trainLoss()));
                    ck.save(saveAt);
                }
                l.fit(steps - l.step(), m -> losses.add(m.trainLoss()));
                return new Run(losses, Gpt2LearnerRuns.parameters(l));
            }
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
     * The device side is the plan's: the learner's own count and the strict device's allocator's. The host side
     * ({@code plan.host()}: the master, the landing buffer and AdamW's moments) is the host arena's; the learner
     * counts its optimizer state ({@link Learner#optimizerStateBytes}), the moments.
     */
    @Test
    void thePlanIsWhatEachSideAllocates() throws IOException {
        OffloadPlan plan = OffloadPlan.of(CONFIG, B, T, Recompute.NONE);
        MemoryPlan whole = MemoryPlan.of(CONFIG, B, T, Recompute.NONE);
        long psi = new io.accel4j.train.model.ParameterLayout(CONFIG).count();
        assertThat(plan.device().total()).isEqualTo(whole.total() - 8 * psi);
        assertThat(plan.host()).isEqualTo(16 * psi);
        TrainConfig cfg = config(1);
        Gpt2LearnerRuns.assertOffloadMatchesPlan(CONFIG, cfg, tmp.resolve("t.bin"), cpu, plan);
        long budget = plan.device().total();
        assertThat(OffloadPlan.largestBatch(CONFIG, T, Recompute.NONE, budget, 64)).isEqualTo(B);
        assertThat(MemoryPlan.largestBatch(CONFIG, T, Recompute.NONE, budget, 64)).isLessThan(B);
    }

    @Test
    void zeroThreeIsRefusedNamingTheStage() throws IOException {
        TrainConfig z = config(1).toBuilder().zeroStage(3).build();
        try (TokenFile train = TokenFile.open(tmp.resolve("t.bin")); TokenSource data = Gpt2LearnerRuns.source(train, z)) {
            assertThatThrownBy(() -> Gpt2LearnerRuns.builder(CONFIG, z, 2, data).offloadOptimizer().build())
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("offloadOptimizer() does not go with zero(3)");
        }
    }
}
