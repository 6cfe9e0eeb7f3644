package io.accel4j.train;

import io.accel4j.train.precision.Precision;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
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
import io.accel4j.cuda.CudaLibraries;
import io.accel4j.cuda.CudaProbe;
import io.accel4j.kernels.GpuOps;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.model.Fp8State;
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

/**
 * The GPT-2 learner {@code accel4j train} builds ({@link Gpt2Fixtures}) on the GPU ({@link GpuOps}, the model in
 * device memory) with unchanged model code: a few steps give the CPU's losses (fp32, bf16, fp16, and fp8 with the
 * CPU's amax histories), and a GPU checkpoint resumes on the GPU bit for bit (fp8's histories included). Needs a GPU:
 * skipped, with {@link Cuda#probe()}'s description as the reason, where there is none.
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
    /** Gpt2Fixtures' tiny model with C = 16: the GPU's FP8 GEMMs need C (and B·T) multiples of 16. */
    private static final GptConfig FP8_MODEL = new GptConfig(Gpt2Fixtures.TINY.maxT(), Gpt2Fixtures.TINY.V(),
            Gpt2Fixtures.TINY.Vp(), Gpt2Fixtures.TINY.L(), Gpt2Fixtures.TINY.NH(), 16);
    /** A 3-step window, so that amaxes also leave it within the run. */
    private static final DelayedScaling FP8_RECIPE = new DelayedScaling(DelayedScaling.Format.HYBRID, 3, 0,
            DelayedScaling.Algorithm.MAX);
    /**
     * The tiny model with head size 64 (C 128, NH 2), which the GPU's bf16 attention takes (64 or 128; the tiny
     * model's 4 keeps fp32 attention).
     */
    private static final GptConfig HS64 = new GptConfig(8, 11, 16, 2, 2, 128);
    /**
     * bf16 runs, GPU vs CPU, now with bf16 attention: at T = 7 both backends see one key tile, so they round the
     * same P, but every bf16 rounding (out, P, dS, the gradients, the matmul operands) of a value that the two fp32
     * orders put on either side of a rounding boundary moves it by 2⁻⁸: a handful of such flips per step move the
     * loss by ≲ 1e-4 and a gradient norm by a little more; 1e-3 and 5e-3 (a missing rounding point on one side, or
     * fp32 attention against bf16, differs by ~1e-2).
     */
    private static final double BF16_LOSS_REL = 1e-3, BF16_NORM_REL = 5e-3;

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
        // every training step's matmuls run on cuBLASLt: without it, skip saying so (issue 18, item 5)
        CudaLibraries.Search cublasLt = CudaLibraries.cublasLt();
        assumeTrue(cublasLt.found(), "cuBLASLt not found: " + cublasLt.notFoundMessage());
        ctx = Cuda.open(0);
        gpu = new GpuOps(ctx);
        pool = new Parallel(2);
        cpu = new CpuOps(pool);
        Random r = new Random(13);
        trainFile = Gpt2Fixtures.tokenFile(tmp.resolve("train.bin"), 600, r);
        valFile = Gpt2Fixtures.tokenFile(tmp.resolve("val.bin"), 150, r);
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
        return train(ops, Gpt2Fixtures.TINY, resume, save, saveAt, precision);
    }

    /** {@link #train(Ops, Path, Path, int, Precision)} on a model of {@code config}. */
    private static List<StepMetrics> train(Ops ops, GptConfig config, Path resume, Path save, int saveAt,
                                           Precision precision) throws IOException {
        List<StepMetrics> steps = new ArrayList<>();
        try (Gpt2Fixtures.Run t = new Gpt2Fixtures.Run(config(precision), config, trainFile, valFile, 5, 1,
                b -> Gpt2Fixtures.FP32_ACTIVATIONS.apply(b).backend(r -> ops))) {
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
     * fp16 operands with loss scaling: the GPU rounds them as the CPU does (cast.cu is bit-identical to core's
     * casts) and multiplies the same values, so only the fp32 summation order differs, as in fp32; attention stays
     * fp32 under fp16 ({@link io.accel4j.train.model.Gpt2#attentionOperands}).
     */
    @Test
    void fp16OperandsGiveTheCpuLosses() throws IOException {
        Precision p = Precision.of(DType.FP16);
        assertSameSteps(train(cpu, null, null, 0, p), train(gpu, null, null, 0, p));
    }

    /**
     * bf16: the matmuls' operands and attention's (GpuOps runs the tensor-core kernel on bf16 copies, CpuOps the
     * flash kernel with the same rounding points), on a model of head size 64.
     */
    @Test
    void bf16OperandsAndAttentionGiveTheCpuLosses() throws IOException {
        Precision p = Precision.of(DType.BF16);
        assertSameSteps(train(cpu, HS64, null, null, 0, p), train(gpu, HS64, null, null, 0, p), BF16_LOSS_REL,
                BF16_NORM_REL);
    }

    /**
     * A head size the bf16 attention kernel lacks (the tiny model's 4) keeps fp32 attention on the GPU, with bf16
     * matmuls: the run starts and trains, its losses those of the same CPU run with fp32 attention within the bf16
     * tolerance (a kernel run at the wrong head size would be far off or refused).
     */
    @Test
    void bf16OnATinyHeadSizeKeepsFp32Attention() throws IOException {
        Precision p = Precision.of(DType.BF16);
        List<StepMetrics> g = train(gpu, null, null, 0, p);
        try (Parallel pool = new Parallel(2)) {
            CpuOps naive = new CpuOps(pool, CpuOps.AttentionKernel.NAIVE); // fp32 attention only, as the GPU here
            assertSameSteps(train(naive, null, null, 0, p), g, BF16_LOSS_REL, BF16_NORM_REL);
        }
    }

    private static void assertSameSteps(List<StepMetrics> c, List<StepMetrics> g) {
        assertSameSteps(c, g, LOSS_REL, NORM_REL);
    }

    private static void assertSameSteps(List<StepMetrics> c, List<StepMetrics> g, double lossRel, double normRel) {
        assertThat(g).hasSameSizeAs(c);
        for (int i = 0; i < c.size(); i++) {
            StepMetrics a = g.get(i), e = c.get(i);
            assertThat(a.trainLoss()).as("train loss of step %d", i).isCloseTo(e.trainLoss(),
                    offset(lossRel * e.trainLoss()));
            if (Double.isNaN(e.valLoss())) {
                assertThat(a.valLoss()).isNaN();
            } else {
                assertThat(a.valLoss()).as("val loss before step %d", i).isCloseTo(e.valLoss(),
                        offset(lossRel * e.valLoss()));
            }
            assertThat(a.gradNorm()).as("grad norm of step %d", i).isCloseTo(e.gradNorm(),
                    offset(normRel * e.gradNorm()));
        }
        assertThat(c.get(0).valLoss()).as("validation ran").isFinite();
    }

    /** B·T = 16 rows, C = 16: the FP8 GEMMs' K multiples of 16. */
    private static TrainConfig fp8Config() {
        return TrainConfig.builder().batch(2).seq(8).steps(6).lr(1e-2f).warmup(1).gradClip(1f).gradAccum(2)
                .valEvery(2).valBatches(2).dataOrder(SampleOrder.Mode.SHUFFLED).seed(3)
                .precision(Precision.fp8(FP8_RECIPE)).build();
    }

    /** The FP8 run on {@code ops}, {@link #FP8_MODEL} from seed 5's parameters. */
    private static Gpt2Fixtures.Run fp8Run(Ops ops) {
        return new Gpt2Fixtures.Run(fp8Config(), FP8_MODEL, trainFile, valFile, 5, 1, b -> b.backend(r -> ops));
    }

    /**
     * --precision fp8 on the GPU (its casts' amaxes deferred in device slots, flushed once per step) against the
     * CPU's, step by step: the same losses and gradient norms within FP8's tolerance, and after every step the same
     * amax windows and scales within fp32 drift — so each step's amaxes reached the histories, in that step.
     */
    @Test
    void fp8GivesTheCpuLossesAndHistories() throws IOException {
        try (Gpt2Fixtures.Run tc = fp8Run(cpu); Gpt2Fixtures.Run tg = fp8Run(gpu)) {
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
                assertSameHistories("after step " + s, tc.learner().network().fp8(), tg.learner().network().fp8());
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
        Path dir = tmp.resolve("fp8-ckpt");
        List<StepMetrics> straight = new ArrayList<>();
        byte[] finalFp8;
        try (Gpt2Fixtures.Run t = fp8Run(gpu)) {
            while (!t.done()) {
                straight.add(t.trainStep());
                if (t.step() == 4) { // the 3-step window has moved on: the checkpoint must carry it
                    t.save(dir);
                }
            }
            finalFp8 = t.learner().fp8State();
        }
        try (Gpt2Fixtures.Run t = fp8Run(gpu)) {
            t.resume(dir);
            for (int s = 4; !t.done(); s++) {
                StepMetrics a = t.trainStep();
                assertThat(Double.doubleToRawLongBits(a.trainLoss())).as("train loss of step %d", s)
                        .isEqualTo(Double.doubleToRawLongBits(straight.get(s).trainLoss()));
            }
            assertThat(t.learner().fp8State()).as("amax histories and scales").containsExactly(finalFp8);
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
