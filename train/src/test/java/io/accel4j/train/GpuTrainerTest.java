package io.accel4j.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.offset;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.accel4j.core.DType;
import io.accel4j.core.ops.Ops;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.cuda.Cuda;
import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.CudaProbe;
import io.accel4j.kernels.GpuOps;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.model.Gpt2;
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
 * the CPU's losses, and a GPU checkpoint resumes on the GPU bit for bit. Needs a GPU: skipped, with
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
