package io.accel4j.train;

import io.accel4j.train.precision.Precision;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.offset;

import io.accel4j.core.ops.Ops;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.io.FileFormatException;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.model.Gpt2Options;
import io.accel4j.train.model.ParameterLayout;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The training loop: accumulation ≡ a bigger batch, resume ≡ an uninterrupted run, checkpoint errors. */
public class TrainerTest {

    static final GptConfig TINY = new GptConfig(8, 11, 16, 2, 2, 8);
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;
    /**
     * Accumulated vs big-batch gradients, relative to each tensor's largest: the same sums grouped differently
     * (K partial sums of B·T rows vs one of K·B·T), each fp32 with a few ulps of error: ~1e-6; 2e-5 for margin.
     */
    private static final double ACCUM_REL = 2e-5;

    @TempDir
    static Path tmp;
    private static Parallel pool;
    private static CpuOps ops;
    private static TokenFile trainFile;
    private static TokenFile valFile;

    @BeforeAll
    static void setUp() throws IOException {
        pool = new Parallel(2);
        ops = new CpuOps(pool);
        Random r = new Random(7);
        trainFile = tokenFile(tmp.resolve("train.bin"), 400, r);
        valFile = tokenFile(tmp.resolve("val.bin"), 100, r);
    }

    @AfterAll
    static void tearDown() {
        trainFile.close();
        valFile.close();
        pool.close();
    }

    /** Tokens with structure a model can learn a little of: mostly (t + 1) mod V, sometimes random. */
    static TokenFile tokenFile(Path path, int n, Random r) throws IOException {
        int[] t = new int[n];
        for (int i = 1; i < n; i++) {
            t[i] = r.nextInt(4) == 0 ? r.nextInt(TINY.V()) : (t[i - 1] + 1) % TINY.V();
        }
        TokenFile.write(path, t);
        return TokenFile.open(path);
    }

    static Gpt2 model(int maxB, long seed) {
        return model(ops, maxB, seed);
    }

    public static Gpt2 model(Ops ops, int maxB, long seed) {
        return model(ops, maxB, seed, Precision.FP32);
    }

    /** The TINY model initialised from {@code seed}, built in precision {@code p} (a trainer of {@code p} needs it). */
    static Gpt2 model(Ops ops, int maxB, long seed, Precision p) {
        Gpt2 m = new Gpt2(TINY, ops, maxB, TINY.maxT(), Gpt2Options.DEFAULT.withPrecision(p.operands(), p.fp8()));
        m.initialise(seed);
        return m;
    }

    static float[] floats(MemorySegment s) {
        float[] a = new float[(int) (s.byteSize() / 4)];
        MemorySegment.copy(s, F32, 0, a, 0, a.length);
        return a;
    }

    public static TrainConfig.Builder base() {
        return TrainConfig.builder().batch(2).seq(5).steps(6).lr(1e-2f).dataOrder(SampleOrder.Mode.SEQUENTIAL);
    }

    @Test
    void gradientAccumulationIsABiggerBatch() throws IOException {
        int K = 3;
        try (Gpt2 small = model(2, 1); Gpt2 big = model(2 * K, 1);
             Trainer acc = new Trainer(small, base().gradAccum(K).build(), trainFile, null);
             Trainer one = new Trainer(big, base().batch(2 * K).build(), trainFile, null)) {
            for (int s = 0; s < 3; s++) {
                double lossAcc = acc.accumulate();
                double lossOne = one.accumulate();
                assertThat(lossAcc).as("loss of step %d", s).isCloseTo(lossOne, offset(1e-5 * lossOne));
                float[] ga = floats(small.grads()), gb = floats(big.grads());
                for (ParameterLayout.Span t : small.layout().tensors()) {
                    double scale = 0;
                    for (long i = 0; i < t.count(); i++) {
                        scale = Math.max(scale, Math.abs(gb[(int) (t.offset() + i)]));
                    }
                    for (long i = 0; i < t.count(); i++) {
                        int k = (int) (t.offset() + i);
                        assertThat(ga[k]).as("step %d grad %s[%d]", s, t.param().fileName(), i)
                                .isCloseTo(gb[k], offset((float) (ACCUM_REL * scale + 1e-12)));
                    }
                }
            }
        }
        // and whole steps, updates included, stay together
        try (Gpt2 small = model(2, 1); Gpt2 big = model(2 * K, 1);
             Trainer acc = new Trainer(small, base().gradAccum(K).build(), trainFile, null);
             Trainer one = new Trainer(big, base().batch(2 * K).build(), trainFile, null)) {
            for (int s = 0; s < 4; s++) {
                StepMetrics a = acc.trainStep(), b = one.trainStep();
                assertThat(a.trainLoss()).as("loss of step %d", s).isCloseTo(b.trainLoss(), offset(1e-4));
                assertThat(a.gradNorm()).isCloseTo(b.gradNorm(), offset(1e-4 * b.gradNorm()));
            }
        }
    }

    private static TrainConfig everything() {
        return TrainConfig.builder().batch(2).seq(5).steps(7).lr(3e-2f).schedule(TrainConfig.Schedule.COSINE)
                .warmup(2).minLrFraction(0.1f).weightDecay(0.1f).decayMatricesOnly(true).gradClip(0.5f)
                .gradAccum(2).valEvery(2).valBatches(3).dataOrder(SampleOrder.Mode.SHUFFLED).seed(5).build();
    }

    @Test
    void resumeGivesBitIdenticalLosses() throws IOException {
        TrainConfig cfg = everything();
        List<StepMetrics> straight = new ArrayList<>();
        float[] finalParams;
        try (Gpt2 m = model(2, 3); Trainer t = new Trainer(m, cfg, trainFile, valFile)) {
            while (!t.done()) {
                straight.add(t.trainStep());
            }
            finalParams = floats(m.params());
        }
        Path dir = tmp.resolve("resume");
        List<StepMetrics> resumed = new ArrayList<>();
        try (Gpt2 m = model(2, 3); Trainer t = new Trainer(m, cfg, trainFile, valFile)) {
            for (int s = 0; s < 3; s++) {
                resumed.add(t.trainStep());
            }
            t.save(dir);
            t.trainStep(); // a step the resumed run must not see
        }
        try (Gpt2 m = model(2, 99); Trainer t = new Trainer(m, cfg, trainFile, valFile)) { // other init: overwritten
            t.resume(dir);
            assertThat(t.step()).isEqualTo(3);
            while (!t.done()) {
                resumed.add(t.trainStep());
            }
            assertThat(floats(m.params())).containsExactly(finalParams);
        }
        assertThat(resumed).hasSameSizeAs(straight);
        for (int i = 0; i < straight.size(); i++) {
            StepMetrics a = straight.get(i), b = resumed.get(i);
            assertThat(b.step()).isEqualTo(a.step());
            assertThat(bits(b.trainLoss())).as("train loss of step %d", i).isEqualTo(bits(a.trainLoss()));
            assertThat(bits(b.valLoss())).as("val loss of step %d", i).isEqualTo(bits(a.valLoss()));
            assertThat(bits(b.gradNorm())).as("grad norm of step %d", i).isEqualTo(bits(a.gradNorm()));
            assertThat(b.lr()).isEqualTo(a.lr());
        }
        assertThat(straight.get(0).valLoss()).isFinite();
        assertThat(straight.get(1).valLoss()).isNaN();
        // the run learned something (the data is mostly t+1)
        assertThat(straight.get(6).valLoss()).isLessThan(straight.get(0).valLoss());
    }

    private static long bits(double x) {
        return Double.doubleToRawLongBits(x);
    }

    @Test
    void saveKeepsOnlyTheLatestCheckpoint() throws IOException {
        Path dir = tmp.resolve("latest");
        try (Gpt2 m = model(2, 3); Trainer t = new Trainer(m, base().build(), trainFile, null)) {
            t.trainStep();
            t.save(dir);
            t.trainStep();
            Path model = t.save(dir);
            assertThat(model.getFileName().toString()).isEqualTo("model_00000002.bin");
        }
        try (var files = Files.list(dir)) {
            assertThat(files.map(p -> p.getFileName().toString()).sorted().toList())
                    .containsExactly(Trainer.POINTER, "model_00000002.bin", "state_00000002.bin");
        }
    }

    @Test
    void aCheckpointOfAnotherRunIsAClearError() throws IOException {
        Path dir = tmp.resolve("other");
        try (Gpt2 m = model(2, 3); Trainer t = new Trainer(m, base().build(), trainFile, null)) {
            t.trainStep();
            t.save(dir);
        }
        try (Gpt2 m = model(2, 3); Trainer t = new Trainer(m, base().seq(4).build(), trainFile, null)) {
            assertThatThrownBy(() -> t.resume(dir)).isInstanceOf(FileFormatException.class)
                    .hasMessageContaining("state_00000001.bin").hasMessageContaining("B, T, grad accumulation");
        }
        GptConfig wider = new GptConfig(8, 11, 16, 2, 2, 12);
        try (Gpt2 m = new Gpt2(wider, ops, 2, 8); Trainer t = new Trainer(m, base().build(), trainFile, null)) {
            assertThatThrownBy(() -> t.resume(dir)).isInstanceOf(FileFormatException.class)
                    .hasMessageContaining("header[10] (C) is 8, but the model has 12");
        }
        Path state = dir.resolve("state_00000001.bin");
        byte[] bytes = Files.readAllBytes(state);
        Files.write(state, java.util.Arrays.copyOf(bytes, bytes.length - 3));
        try (Gpt2 m = model(2, 3); Trainer t = new Trainer(m, base().build(), trainFile, null)) {
            assertThatThrownBy(() -> t.resume(dir)).isInstanceOf(FileFormatException.class)
                    .hasMessageContaining("size is " + (bytes.length - 3) + " bytes");
            assertThatThrownBy(() -> t.resume(tmp.resolve("nowhere")))
                    .hasMessageContaining("no checkpoint in");
        }
    }

    @Test
    void aRunLargerThanTheModelIsRefused() {
        try (Gpt2 m = model(2, 3)) {
            assertThatThrownBy(() -> new Trainer(m, base().batch(3).build(), trainFile, null))
                    .hasMessageContaining("B <= 2");
        }
    }
}
