package io.accel4j.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.accel4j.core.ops.Ops;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.cuda.Cuda;
import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.CudaLibraries;
import io.accel4j.cuda.CudaProbe;
import io.accel4j.fit.Learner;
import io.accel4j.fit.LearnerBuilder;
import io.accel4j.kernels.GpuOps;
import io.accel4j.train.checkpoint.LearnerLlmcCheckpoints;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.data.TokenSource;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.model.Recompute;
import io.accel4j.train.plan.OffloadPlan;
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
 * The CLI's GPT-2 {@link Learner} on the GPU with AdamW offloaded to the host ({@link LearnerBuilder#offloadOptimizer()}:
 * master and moments in page-locked host memory, the Vector API's AdamW, gradients down and weights up through
 * {@code CudaMemory}): a few steps give the CPU's losses, an llm.c checkpoint resumes bit for bit on the GPU, and
 * {@link OffloadPlan} is what the device side allocates. Needs a GPU: skipped, with {@link Cuda#probe()}'s description
 * as the reason, where there is none.
 */
class OffloadGpuTest {

    /**
     * GPU-with-offload vs CPU losses, relative: the forward and backward are GpuTrainerTest's (fp32 sums in another
     * order, ~1e-6 relative per op, ≲ 1e-5 after 6 steps) and the update is the CPU's own AdamW kernel on the GPU's
     * gradients; 1e-4 as GpuTrainerTest. A missing or stale copy (an update lost, old weights uploaded) is off by the
     * whole learning-rate step, far more.
     */
    private static final double LOSS_REL = 1e-4;

    @TempDir
    static Path tmp;
    private static CudaContext ctx;
    private static GpuOps gpu;
    private static Parallel pool;
    private static CpuOps cpu;
    private static TokenFile trainFile;

    @BeforeAll
    static void open() throws IOException {
        CudaProbe probe = Cuda.probe();
        assumeTrue(probe.ready(), "no usable GPU: CUDA " + probe.describe());
        CudaLibraries.Search cublasLt = CudaLibraries.cublasLt();
        assumeTrue(cublasLt.found(), "cuBLASLt not found: " + cublasLt.notFoundMessage());
        ctx = Cuda.open(0);
        gpu = new GpuOps(ctx);
        pool = new Parallel(2);
        cpu = new CpuOps(pool);
        trainFile = Gpt2Fixtures.tokenFile(tmp.resolve("train.bin"), 600, new Random(13));
    }

    @AfterAll
    static void close() {
        if (trainFile != null) {
            trainFile.close();
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

    private static TrainConfig config() {
        return TrainConfig.builder().batch(3).seq(7).steps(6).lr(1e-2f).warmup(1).gradClip(1f).gradAccum(2)
                .dataOrder(SampleOrder.Mode.SHUFFLED).seed(3).build();
    }

    private static List<Double> train(Ops ops, boolean offload, Path resume, Path save, int saveAt) throws IOException {
        List<Double> losses = new ArrayList<>();
        TrainConfig cfg = config();
        try (TokenSource data = Gpt2LearnerRuns.source(trainFile, cfg)) {
            LearnerBuilder b = Gpt2LearnerRuns.builder(Gpt2Fixtures.TINY, cfg, 1, data).backend(r -> ops);
            try (Learner l = (offload ? b.offloadOptimizer() : b).build()) {
                Gpt2LearnerRuns.initialised(l, Gpt2Fixtures.TINY, cfg, data, 5);
                if (offload) { // the batch's buffers are the rank's host arena (RankStep's), not the GPU's
                    OffloadPlan plan = OffloadPlan.of(Gpt2Fixtures.TINY, cfg.batch(), cfg.seq(), Recompute.NONE);
                    assertThat(l.modelBytes()).isEqualTo(plan.device().total() - plan.device().batch());
                    assertThat(l.optimizerStateBytes()).as("AdamW's moments, on the host")
                            .isEqualTo(8 * Gpt2Fixtures.TINY.parameterCount());
                }
                LearnerLlmcCheckpoints ck = Gpt2LearnerRuns.checkpoints(l, Gpt2Fixtures.TINY, cfg, data);
                if (resume != null) {
                    ck.resume(resume);
                }
                if (save != null) {
                    l.fit(saveAt - l.step(), m -> losses.add(m.trainLoss()));
                    ck.save(save);
                }
                l.fit(cfg.steps() - l.step(), m -> losses.add(m.trainLoss()));
            }
        }
        return losses;
    }

    @Test
    void offloadedOnTheGpuGivesTheCpuLossesAndResumesBitForBit() throws IOException {
        List<Double> c = train(cpu, false, null, null, 0);
        List<Double> g = train(gpu, true, null, tmp.resolve("ckpt"), 3);
        assertThat(g).hasSameSizeAs(c);
        for (int s = 0; s < c.size(); s++) {
            assertThat(g.get(s)).as("step %d", s).isCloseTo(c.get(s), within(LOSS_REL * Math.abs(c.get(s))));
        }
        List<Double> rest = train(gpu, true, tmp.resolve("ckpt"), null, 0);
        assertThat(rest).containsExactlyElementsOf(g.subList(3, g.size()));
    }

    /**
     * GPT-2 124M's parameters on the GPU, AdamW offloaded serial and overlapped ({@code Offload(…, overlap)}) taking
     * turns over the same gradients: the same parameter bits after every step (the copies from the pipeline's copier
     * threads, through CudaMemory on the legacy stream, are the serial copies), and each one's step time printed
     * (what scripts/gpu-check.sh's tests phase logs: {@code offload step ms, 124M: serial … overlapped …}).
     */
    @Test
    void overlappedOffloadStepIsTheSerialBitsAndPrintsBothTimes() {
        io.accel4j.optim.AdamW.Spec spec = io.accel4j.optim.AdamW.of(0.1f);
        try (Gpt2 a = new Gpt2(io.accel4j.train.model.GptConfig.GPT2, gpu, 1, 64);
             Gpt2 b = new Gpt2(io.accel4j.train.model.GptConfig.GPT2, gpu, 1, 64);
             Parallel host = new Parallel(Parallel.defaultThreads())) {
            a.initialise(5);
            b.initialise(5);
            int n = (int) a.layout().count();
            float[] g = new float[n];
            Random r = new Random(7);
            for (int i = 0; i < n; i++) {
                g[i] = (float) r.nextGaussian() * 1e-2f;
            }
            gpu.memory().copyToDevice(java.lang.foreign.MemorySegment.ofArray(g), a.grads());
            gpu.memory().copyToDevice(java.lang.foreign.MemorySegment.ofArray(g), b.grads());
            CpuOps hostOps = new CpuOps(host);
            try (io.accel4j.optim.Optimizer serial = new io.accel4j.optim.Offload(spec, hostOps, false).create(gpu,
                    a.network().table(), a.params(), a.grads());
                 io.accel4j.optim.Optimizer over = new io.accel4j.optim.Offload(spec, hostOps, true).create(gpu,
                         b.network().table(), b.params(), b.grads())) {
                int steps = 8;
                double[][] ms = new double[2][steps];
                for (int t = 1; t <= steps + 2; t++) {
                    for (int k = 0; k < 2; k++) {
                        long t0 = System.nanoTime();
                        (k == 0 ? serial : over).step(t, 1e-4f, 1f);
                        long t1 = System.nanoTime();
                        if (t > 2) {
                            ms[k][t - 3] = (t1 - t0) / 1e6;
                        }
                    }
                    float[] pa = new float[n], pb = new float[n];
                    gpu.memory().copyToHost(a.params(), java.lang.foreign.MemorySegment.ofArray(pa));
                    gpu.memory().copyToHost(b.params(), java.lang.foreign.MemorySegment.ofArray(pb));
                    assertThat(java.util.Arrays.equals(pa, pb)).as("step %d: the same bits", t).isTrue();
                }
                java.util.Arrays.sort(ms[0]);
                java.util.Arrays.sort(ms[1]);
                System.out.printf(java.util.Locale.ROOT, "offload step ms, %d parameters, %d host threads: serial "
                        + "median %.2f best %.2f, overlapped median %.2f best %.2f%n", n, host.threads(),
                        ms[0][steps / 2], ms[0][0], ms[1][steps / 2], ms[1][0]);
            }
        }
    }
}
