package io.accel4j.train;

import io.accel4j.train.precision.Precision;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.InProcessGroup;
import io.accel4j.collectives.ReduceOp;
import io.accel4j.core.DType;
import io.accel4j.core.fp8.DelayedScaling;
import io.accel4j.core.ops.Ops;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.fit.Learner;
import io.accel4j.train.checkpoint.CheckpointFiles;
import io.accel4j.train.checkpoint.LearnerLlmcCheckpoints;
import io.accel4j.train.data.DataLoader;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.data.TokenSource;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.reflect.Proxy;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Data parallelism of the CLI's GPT-2 {@link Learner} with the model in a device's memory and a communicator that takes
 * device buffers, as with NCCL on GPUs, tested on the CPU: every rank's learner is on its own {@link StrictMemory}
 * (host access to it throws) and the ranks talk through {@link StrictCommunicator} (only that memory's device
 * segments, on the in-process ring). DDP (bucketed or whole) and ZeRO stages 1-3 then give bit for bit what the same
 * ranks give in host memory on the ring itself — the same kernels on the same bytes in the same order — including the
 * validation ({@code accel4j train}'s: before every other step, on rank 0, on every rank at ZeRO-3), llm.c's checkpoint
 * files ({@link LearnerLlmcCheckpoints}), a resume, fp16's loss scaling, fp8's amax maximum over the ranks and ZeRO's
 * parameters gathered to rank 0.
 */
class DeviceDataParallelTest {

    private static final int STEPS = 5, SAVED_AT = 3;
    /** Buckets of 1 byte: every layer's all-reduce starts during backward. */
    private static final long PER_LAYER = 1;

    @TempDir
    static Path tmp;
    private static TokenFile trainFile;
    private static TokenFile valFile;

    @BeforeAll
    static void setUp() throws IOException {
        Random r = new Random(23);
        trainFile = Gpt2Fixtures.tokenFile(tmp.resolve("train.bin"), 500, r);
        valFile = Gpt2Fixtures.tokenFile(tmp.resolve("val.bin"), 100, r);
    }

    @AfterAll
    static void tearDown() {
        trainFile.close();
        valFile.close();
    }

    /** Clipping, weight decay on matrices, accumulation, validation, a shuffle: every collective of a step. */
    private static TrainConfig config(long bucketBytes, int zero) {
        return config(bucketBytes, zero, DType.FP32);
    }

    /**
     * {@link #config(long, int)} with matmul operands {@code operands} (fp16: with dynamic loss scaling; FP8_E4M3:
     * {@code --precision fp8}, a 3-step amax window, the amaxes' maximum over the ranks taken through the model's
     * memory).
     */
    private static TrainConfig config(long bucketBytes, int zero, DType operands) {
        Precision p = operands.isFp8() ? Precision.fp8(new DelayedScaling(DelayedScaling.Format.HYBRID, 3, 0,
                DelayedScaling.Algorithm.MAX)) : Precision.of(operands);
        return TrainConfig.builder().precision(p).batch(2).seq(5).steps(STEPS).lr(2e-2f)
                .eps(1e-5f).gradClip(0.5f).weightDecay(0.1f).decayMatricesOnly(true).gradAccum(2).valEvery(2)
                .valBatches(2).dataOrder(SampleOrder.Mode.SHUFFLED).seed(9).bucketBytes(bucketBytes).zeroStage(zero).build();
    }

    /** One rank's run: each step's metrics and its final parameters. */
    private record RankRun(List<StepMetrics> steps, float[] params, long collectives) {}

    /** How a rank gets its kernels and communicator: host memory on the ring, or strict memory on the strict one. */
    private interface Setup {
        Ops ops(Ops cpu);

        Communicator comm(Communicator ring);
    }

    private static final class Host implements Setup {
        @Override
        public Ops ops(Ops cpu) {
            return cpu;
        }

        @Override
        public Communicator comm(Communicator ring) {
            return ring;
        }
    }

    private static final class Strict implements Setup {
        private final StrictMemory memory = new StrictMemory();

        @Override
        public Ops ops(Ops cpu) {
            return memory.ops(cpu);
        }

        @Override
        public Communicator comm(Communicator ring) {
            return new StrictCommunicator(ring, memory);
        }
    }

    /**
     * {@code n} ranks, each set up by {@code strict}: trains {@link #STEPS} steps from the start (checkpointing into
     * {@code dir} after {@link #SAVED_AT}), or from {@code resume}'s checkpoint to the end. Each rank's parameters: its
     * replica, or at ZeRO-2/3 the gathered ones on rank 0 (null elsewhere).
     */
    private static List<RankRun> run(int n, TrainConfig cfg, boolean strict, Path dir, Path resume) {
        try (InProcessGroup g = InProcessGroup.create(n, Duration.ofSeconds(60))) {
            return g.run(ring -> {
                Setup setup = strict ? new Strict() : new Host();
                Communicator comm = setup.comm(ring);
                try (Parallel pool = new Parallel(1); TokenSource data = Gpt2LearnerRuns.source(trainFile, cfg);
                     Learner l = Gpt2LearnerRuns.builder(Gpt2Fixtures.TINY, cfg, comm, data)
                             .backend(r -> setup.ops(new CpuOps(pool))).build();
                     DataLoader val = new DataLoader(valFile, cfg.batch(), cfg.seq(), 0, 1,
                             SampleOrder.Mode.SEQUENTIAL, 0)) {
                    // a resume must overwrite the parameters
                    Gpt2LearnerRuns.initialised(l, Gpt2Fixtures.TINY, cfg, data, resume == null ? 3 : 13);
                    LearnerLlmcCheckpoints ck = Gpt2LearnerRuns.checkpoints(l, ring.rank() == 0, Gpt2Fixtures.TINY, cfg,
                            data);
                    if (resume != null) {
                        ck.resume(resume);
                    }
                    DataLoader.State start = val.position();
                    // rank 0 validates; at ZeRO-3 (whose forward gathers the parameters) every rank takes part
                    boolean validates = ring.rank() == 0 || !l.network().flat();
                    List<StepMetrics> steps = new ArrayList<>();
                    while (l.step() < cfg.steps()) {
                        double v = Double.NaN;
                        if (validates && l.step() % cfg.valEvery() == 0) {
                            val.seek(start);
                            v = l.evaluate(val::next, cfg.valBatches());
                        }
                        steps.add(l.fit(1, null).get(0).withValLoss(ring.rank() == 0 ? v : Double.NaN));
                        if (dir != null && l.step() == SAVED_AT) {
                            ck.save(dir); // a collective with ZeRO; rank 0 writes
                        }
                    }
                    float[] params = Gpt2LearnerRuns.rankParameters(l, ring.rank());
                    if (setup instanceof Strict s) {
                        assertThat(s.memory.bytesOut()).as("rank %d copied something back", ring.rank())
                                .isPositive();
                    }
                    return new RankRun(steps, params, comm instanceof StrictCommunicator sc ? sc.calls() : -1);
                } catch (IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            });
        }
    }

    @ParameterizedTest(name = "{0} ranks, bucket bytes {1}, ZeRO {2}, {3}")
    @CsvSource({"2, 1, 0, FP32", "3, 0, 0, FP32", "3, 1, 1, FP32", "2, 0, 1, FP32", "3, 0, 2, FP32", "2, 0, 3, FP32",
        "3, 0, 3, FP32", "2, 1, 0, FP16", "3, 0, 1, FP16", "2, 0, 2, FP16", "2, 1, 0, FP8_E4M3",
        "3, 0, 1, FP8_E4M3"})
    void dataParallelismOnTheStrictDeviceIsBitIdenticalToHostMemory(int n, long bucketBytes, int zero,
                                                                    DType operands) throws IOException {
        TrainConfig cfg = config(bucketBytes == 1 ? PER_LAYER : 0, zero, operands);
        String name = n + "-" + bucketBytes + "-" + zero + "-" + operands;
        Path hostDir = tmp.resolve("host-" + name), strictDir = tmp.resolve("strict-" + name);
        List<RankRun> host = run(n, cfg, false, hostDir, null);
        List<RankRun> device = run(n, cfg, true, strictDir, null);

        for (int r = 0; r < n; r++) {
            assertSameBits(device.get(r).steps(), host.get(r).steps(), "rank " + r);
            assertSameParameters(device.get(r).params(), host.get(r).params(), "rank " + r);
            if (device.get(r).params() != null) { // ZeRO-2/3 gather to rank 0 alone
                assertThat(device.get(r).params()).as("rank %d vs rank 0", r)
                        .containsExactly(device.get(0).params());
            }
            assertThat(device.get(r).collectives()).as("collectives on device buffers").isGreaterThan(STEPS);
        }
        assertThat(host.get(0).steps().get(0).valLoss()).as("validation ran").isFinite();
        for (String f : new String[] {"model_00000003.bin", "state_00000003.bin", CheckpointFiles.POINTER}) {
            assertThat(Files.readAllBytes(strictDir.resolve(f))).as(f)
                    .isEqualTo(Files.readAllBytes(hostDir.resolve(f)));
        }

        // the device ranks resume from the host's checkpoint and end where the host run ended
        List<RankRun> resumed = run(n, cfg, true, null, hostDir);
        for (int r = 0; r < n; r++) {
            assertSameBits(resumed.get(r).steps(), host.get(r).steps().subList(SAVED_AT, STEPS), "resumed rank " + r);
            assertSameParameters(resumed.get(r).params(), host.get(r).params(), "resumed rank " + r);
        }
    }

    /** The same parameters, or none on both sides (ZeRO-2/3 gather them to rank 0 alone). */
    private static void assertSameParameters(float[] actual, float[] expected, String who) {
        if (expected == null) {
            assertThat(actual).as(who + "'s parameters").isNull();
        } else {
            assertThat(actual).as(who + "'s parameters").containsExactly(expected);
        }
    }

    private static void assertSameBits(List<StepMetrics> actual, List<StepMetrics> expected, String who) {
        assertThat(actual).as(who).hasSameSizeAs(expected);
        for (int i = 0; i < expected.size(); i++) {
            StepMetrics a = actual.get(i), e = expected.get(i);
            for (double[] pair : new double[][] {{a.trainLoss(), e.trainLoss()}, {a.valLoss(), e.valLoss()},
                {a.gradNorm(), e.gradNorm()}}) {
                assertThat(Double.doubleToRawLongBits(pair[0])).as("%s, step %d: %s vs %s", who, e.step(), pair[0],
                        pair[1]).isEqualTo(Double.doubleToRawLongBits(pair[1]));
            }
        }
    }

    @Test
    void theStrictCommunicatorRefusesHostBuffersAndTheDeviceRefusesHostReads() {
        StrictMemory memory = new StrictMemory();
        try (InProcessGroup g = InProcessGroup.create(1); Arena a = Arena.ofConfined();
             var arena = memory.arena()) {
            StrictCommunicator comm = new StrictCommunicator(g.communicator(0), memory);
            MemorySegment host = a.allocate(16);
            assertThatThrownBy(() -> comm.allReduce(host, 4, DType.FP32, ReduceOp.SUM))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("allReduce's buf")
                    .hasMessageContaining("not in a live allocation");
            MemorySegment device = arena.allocate(16);
            comm.allReduce(device, 4, DType.FP32, ReduceOp.SUM); // a device segment is fine
            assertThatThrownBy(() -> device.get(java.lang.foreign.ValueLayout.JAVA_FLOAT, 0))
                    .isInstanceOf(IllegalStateException.class);
            assertThatThrownBy(() -> comm.allGather(device.asSlice(0, 16), host, 4, DType.FP32))
                    .hasMessageContaining("allGather's recv");
        }
    }

    @Test
    void aCommunicatorThatDoesNotTakeTheModelsMemoryIsRefused() {
        TrainConfig cfg = config(0, 0);
        try (Parallel pool = new Parallel(1); TokenSource data = Gpt2LearnerRuns.source(trainFile, cfg)) {
            CpuOps cpu = new CpuOps(pool);
            StrictMemory strict = new StrictMemory();
            assertThatThrownBy(() -> Gpt2LearnerRuns.builder(Gpt2Fixtures.TINY, cfg, fake(false), data)
                    .backend(r -> strict.ops(cpu)).build())
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("takes host buffers and the network is in strict test device memory");
            assertThatThrownBy(() -> Gpt2LearnerRuns.builder(Gpt2Fixtures.TINY, cfg, fake(true), data)
                    .backend(r -> cpu).build())
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("takes device buffers and the network is in host memory");
            assertThat(strict.allocations()).as("the refused learner left nothing allocated").isZero();
        }
    }

    /** Rank 0 of 2 that takes device buffers or not, and fails on any collective (none may run). */
    private static Communicator fake(boolean deviceBuffers) {
        return (Communicator) Proxy.newProxyInstance(Communicator.class.getClassLoader(),
                new Class<?>[] {Communicator.class}, (proxy, method, args) -> switch (method.getName()) {
                    case "size" -> 2;
                    case "rank" -> 0;
                    case "deviceBuffers" -> deviceBuffers;
                    default -> throw new AssertionError("no collective expected, got " + method.getName());
                });
    }
}
