package io.accel4j.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.offset;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.accel4j.core.DType;
import io.accel4j.core.fp8.AmaxHistory;
import io.accel4j.core.fp8.DelayedScaling;
import io.accel4j.core.fp8.Fp8Scaling;
import io.accel4j.core.ops.Ops;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.cuda.Cuda;
import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.CudaProbe;
import io.accel4j.kernels.GpuOps;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.model.Fp8State;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.model.GptConfig;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The trainer on the GPU ({@link GpuOps}, the model in device memory) with unchanged model code: a few steps give
 * the CPU's losses (fp32, bf16, fp16, and fp8 with the CPU's amax histories), and a GPU checkpoint resumes on the
 * GPU bit for bit (fp8's histories included). Needs a GPU: skipped, with
 * {@link Cuda#probe()}'s description as the reason, where there is none.
 */
class GpuTrainerTest {

    /**
     * Relative difference of a step's losses, GPU vs CPU, over 6 steps of the tiny test model: both fp32 (cuBLASLt
     * without TF32, the CPU GEMM), summed in different orders, so each op differs by ~1e-6 relative (GpuOpsTest
     * bounds them at ≤2e-4 of their scale); averaged over the batch and carried through 6 AdamW steps the losses
     * stay within ~1e-5, and 1e-4 leaves a margin (TF32's 10-bit mantissa or a wrong copy is far outside it).
     */
    private static final double LOSS_REL = 1e-4;
    /**
     * Gradient norms, GPU vs CPU: the square root of a sum over every parameter's squared gradient, in which the
     * near-cancelling sums of the small gradients differ most; 1e-3 relative.
     */
    private static final double NORM_REL = 1e-3;
    /**
     * FP8 train and val losses, GPU vs CPU, same recipe: both cast the same fp32 tensors with the same scales (cast.cu
     * is bit-identical to the CPU's casts) and multiply the same codes, so they differ only where the ~1e-6 relative
     * difference of the fp32 ops (summation order) moves a value across an FP8 rounding boundary — one code away,
     * 2^-3 (E4M3) or 2^-2 (E5M2) of that element, for a rare element of a sum. Through 6 AdamW steps that keeps the
     * losses well within 1e-2 relative (not yet measured on a GPU); a cast with the wrong scale (an amax a step late
     * or missing, a scale of 1) moves the step-0-onwards losses by whole FP8 steps of every element, far more.
     */
    private static final double FP8_LOSS_REL = 1e-2;
    /**
     * FP8 amax histories and scales, GPU vs CPU: an amax is one element's |x| of a tensor both compute with fp32 ops
     * ~1e-6 relative apart, drifting a little more with the parameters over the steps; 1e-3 relative is a margin. A
     * missing or late flush (an amax of 0, of another step or tensor) is off by orders of magnitude.
     */
    private static final double FP8_AMAX_REL = 1e-3;
    /** TrainerTest's tiny model with C = 16: the GPU's FP8 GEMMs need C (and B·T) multiples of 16. */
    private static final GptConfig FP8_MODEL = new GptConfig(TrainerTest.TINY.maxT(), TrainerTest.TINY.V(),
            TrainerTest.TINY.Vp(), TrainerTest.TINY.L(), TrainerTest.TINY.NH(), 16);
    /** A 3-step window, so that amaxes also leave it within the run. */
    private static final DelayedScaling FP8_RECIPE = new DelayedScaling(DelayedScaling.Format.HYBRID, 3, 0,
            DelayedScaling.Algorithm.MAX);

    @TempDir
    static Path tmp;
    private static CudaContext ctx;
    private static GpuOps gpu;
    private static Parallel pool;
    private static CpuOps cpu;
    private static TokenFile trainFile;
    private static TokenFile valFile;

    @BeforeAll
    static void open() throws IOException {
        CudaProbe probe = Cuda.probe();
        assumeTrue(probe.ready(), "no usable GPU: CUDA " + probe.describe());
        ctx = Cuda.open(0);
        gpu = new GpuOps(ctx);
        pool = new Parallel(2);
        cpu = new CpuOps(pool);
        Random r = new Random(13);
        trainFile = TrainerTest.tokenFile(tmp.resolve("train.bin"), 600, r);
        valFile = TrainerTest.tokenFile(tmp.resolve("val.bin"), 150, r);
    }

    @AfterAll
    static void close() {
        if (trainFile != null) {
            trainFile.close();
            valFile.close();
        }
        if (pool != null) {
            pool.close();
        }
        if (gpu != null) {
            gpu.close();
        }
        if (ctx != null) {
            ctx.close();
        }
    }

    private static TrainConfig config(Precision precision) {
        return TrainConfig.builder().batch(3).seq(7).steps(6).lr(1e-2f).warmup(1).gradClip(1f).gradAccum(2)
                .valEvery(2).valBatches(2).dataOrder(SampleOrder.Mode.SHUFFLED).seed(3).precision(precision).build();
    }

    /** Steps [from, 6) of a run on {@code ops}, resumed from {@code resume} when not null, saved into {@code save}. */
    private static List<StepMetrics> train(Ops ops, Path resume, Path save, int saveAt) throws IOException {
        return train(ops, resume, save, saveAt, Precision.FP32);
    }

    /** {@link #train(Ops, Path, Path, int)} with the matmul operands and loss scaling of {@code precision}. */
    private static List<StepMetrics> train(Ops ops, Path resume, Path save, int saveAt, Precision precision)
            throws IOException {
        List<StepMetrics> steps = new ArrayList<>();
        try (Gpt2 m = TrainerTest.model(ops, 3, 5);
             Trainer t = new Trainer(m, config(precision), trainFile, valFile)) {
            if (resume != null) {
                t.resume(resume);
            }
            while (!t.done()) {
                steps.add(t.trainStep());
                if (save != null && t.step() == saveAt) {
                    t.save(save);
                }
            }
        }
        return steps;
    }

    @Test
    void aFewStepsGiveTheCpuLosses() throws IOException {
        assertSameSteps(train(cpu, null, null, 0), train(gpu, null, null, 0));
    }

    /**
     * bf16 and fp16 operands (fp16 with loss scaling): the GPU rounds them as the CPU does (cast.cu is bit-identical
     * to core's casts) and multiplies the same values, so only the fp32 summation order differs, as in fp32.
     */
    @ParameterizedTest
    @EnumSource(value = DType.class, names = {"BF16", "FP16"})
    void lowPrecisionOperandsGiveTheCpuLosses(DType operands) throws IOException {
        Precision p = Precision.of(operands);
        assertSameSteps(train(cpu, null, null, 0, p), train(gpu, null, null, 0, p));
    }

    private static void assertSameSteps(List<StepMetrics> c, List<StepMetrics> g) {
        assertThat(g).hasSameSizeAs(c);
        for (int i = 0; i < c.size(); i++) {
            StepMetrics a = g.get(i), e = c.get(i);
            assertThat(a.trainLoss()).as("train loss of step %d", i).isCloseTo(e.trainLoss(),
                    offset(LOSS_REL * e.trainLoss()));
            if (Double.isNaN(e.valLoss())) {
                assertThat(a.valLoss()).isNaN();
            } else {
                assertThat(a.valLoss()).as("val loss before step %d", i).isCloseTo(e.valLoss(),
                        offset(LOSS_REL * e.valLoss()));
            }
            assertThat(a.gradNorm()).as("grad norm of step %d", i).isCloseTo(e.gradNorm(),
                    offset(NORM_REL * e.gradNorm()));
        }
        assertThat(c.get(0).valLoss()).as("validation ran").isFinite();
    }

    /** B·T = 16 rows, C = 16: the FP8 GEMMs' K multiples of 16. */
    private static TrainConfig fp8Config() {
        return TrainConfig.builder().batch(2).seq(8).steps(6).lr(1e-2f).warmup(1).gradClip(1f).gradAccum(2)
                .valEvery(2).valBatches(2).dataOrder(SampleOrder.Mode.SHUFFLED).seed(3)
                .precision(Precision.fp8(FP8_RECIPE)).build();
    }

    private static Gpt2 fp8Model(Ops ops) {
        Gpt2 m = new Gpt2(FP8_MODEL, ops, 2, FP8_MODEL.maxT());
        m.initialise(5);
        return m;
    }

    /**
     * --precision fp8 on the GPU (its casts' amaxes deferred in device slots, flushed once per step) against the
     * CPU's, step by step: the same losses and gradient norms within FP8's tolerance, and after every step the same
     * amax windows and scales within fp32 drift — so each step's amaxes reached the histories, in that step.
     */
    @Test
    void fp8GivesTheCpuLossesAndHistories() throws IOException {
        TrainConfig cfg = fp8Config();
        try (Gpt2 mc = fp8Model(cpu); Gpt2 mg = fp8Model(gpu);
             Trainer tc = new Trainer(mc, cfg, trainFile, valFile);
             Trainer tg = new Trainer(mg, cfg, trainFile, valFile)) {
            for (int s = 0; !tc.done(); s++) {
                StepMetrics e = tc.trainStep(), a = tg.trainStep();
                assertThat(a.trainLoss()).as("fp8 train loss of step %d", s).isCloseTo(e.trainLoss(),
                        offset(FP8_LOSS_REL * e.trainLoss()));
                if (!Double.isNaN(e.valLoss())) {
                    assertThat(a.valLoss()).as("fp8 val loss before step %d", s).isCloseTo(e.valLoss(),
                            offset(FP8_LOSS_REL * e.valLoss()));
                }
                assertThat(a.gradNorm()).as("fp8 grad norm of step %d", s).isCloseTo(e.gradNorm(),
                        offset(10 * FP8_LOSS_REL * e.gradNorm()));
                assertSameHistories("after step " + s, mc.fp8(), mg.fp8());
            }
        }
    }

    private static void assertSameHistories(String when, Fp8State cpuState, Fp8State gpuState) {
        for (int l = 0; l < FP8_MODEL.L(); l++) {
            for (Fp8State.Linear which : Fp8State.Linear.values()) {
                Fp8Scaling c = cpuState.linear(l, which), g = gpuState.linear(l, which);
                AmaxHistory[] hc = {c.input(), c.weight(), c.gradOutput()};
                AmaxHistory[] hg = {g.input(), g.weight(), g.gradOutput()};
                for (int r = 0; r < 3; r++) {
                    String what = when + ", block " + l + " " + which + " role " + r;
                    float[] ac = hc[r].amaxes(), ag = hg[r].amaxes();
                    for (int i = 0; i < ac.length; i++) {
                        assertThat((double) ag[i]).as("%s amax %d", what, i).isCloseTo(ac[i],
                                offset(FP8_AMAX_REL * ac[i]));
                    }
                    assertThat(ac[ac.length - 2]).as("%s: the step's amax was recorded", what).isPositive();
                    assertThat((double) hg[r].scale()).as("%s scale", what).isCloseTo(hc[r].scale(),
                            offset(FP8_AMAX_REL * hc[r].scale()));
                }
            }
        }
    }

    /** An fp8 GPU checkpoint (the histories flushed from the device into TrainState) resumes bit for bit. */
    @Test
    void anFp8GpuCheckpointResumesBitForBit() throws IOException {
        TrainConfig cfg = fp8Config();
        Path dir = tmp.resolve("fp8-ckpt");
        List<StepMetrics> straight = new ArrayList<>();
        byte[] finalFp8;
        try (Gpt2 m = fp8Model(gpu); Trainer t = new Trainer(m, cfg, trainFile, valFile)) {
            while (!t.done()) {
                straight.add(t.trainStep());
                if (t.step() == 4) { // the 3-step window has moved on: the checkpoint must carry it
                    t.save(dir);
                }
            }
            finalFp8 = m.fp8().encode();
        }
        try (Gpt2 m = fp8Model(gpu); Trainer t = new Trainer(m, cfg, trainFile, valFile)) {
            t.resume(dir);
            for (int s = 4; !t.done(); s++) {
                StepMetrics a = t.trainStep();
                assertThat(Double.doubleToRawLongBits(a.trainLoss())).as("train loss of step %d", s)
                        .isEqualTo(Double.doubleToRawLongBits(straight.get(s).trainLoss()));
            }
            assertThat(m.fp8().encode()).as("amax histories and scales").containsExactly(finalFp8);
        }
    }

    @Test
    void aGpuCheckpointResumesBitForBitAndLoadsOnTheCpu() throws IOException {
        Path dir = tmp.resolve("ckpt");
        List<StepMetrics> straight = train(gpu, null, dir, 3);
        List<StepMetrics> resumed = train(gpu, dir, null, 0);
        assertThat(resumed).hasSize(3);
        for (int i = 0; i < 3; i++) {
            StepMetrics a = resumed.get(i), e = straight.get(3 + i);
            assertThat(a.step()).isEqualTo(e.step());
            assertThat(Double.doubleToRawLongBits(a.trainLoss())).as("train loss of step %d", e.step())
                    .isEqualTo(Double.doubleToRawLongBits(e.trainLoss()));
            assertThat(Double.doubleToRawLongBits(a.gradNorm())).as("grad norm of step %d", e.step())
                    .isEqualTo(Double.doubleToRawLongBits(e.gradNorm()));
        }
        // the GPU's checkpoint is an ordinary llm.c file: the CPU resumes it too
        List<StepMetrics> onCpu = train(cpu, dir, null, 0);
        assertThat(onCpu.getFirst().trainLoss()).isCloseTo(straight.get(3).trainLoss(),
                offset(LOSS_REL * straight.get(3).trainLoss()));
    }
}
