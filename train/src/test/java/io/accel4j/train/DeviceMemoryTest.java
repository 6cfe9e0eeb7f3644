package io.accel4j.train;

import io.accel4j.train.sample.Generator;
import io.accel4j.train.sample.Sampler;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.collectives.Communicator;
import io.accel4j.core.ops.Ops;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.train.checkpoint.CheckpointFiles;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.model.Gpt2;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.reflect.Proxy;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The model and the GPT-2 learner {@code accel4j train} builds ({@link Gpt2Fixtures}) touch their memory only through
 * {@link io.accel4j.core.memory.DeviceMemory}'s copies: on {@link StrictMemory} (host memory that refuses every direct
 * host access, as a GPU's would crash on it) whole runs — validation, accumulation, clipping, checkpoints, resume,
 * sampling — give bit for bit what the CPU gives, and a step copies in only its tokens and copies nothing out.
 */
class DeviceMemoryTest {

    private static final int STEPS = 6, SAVED_AT = 3;

    @TempDir
    static Path tmp;
    private static Parallel pool;
    private static CpuOps cpu;
    private static TokenFile trainFile;
    private static TokenFile valFile;

    @BeforeAll
    static void setUp() throws IOException {
        pool = new Parallel(2);
        cpu = new CpuOps(pool);
        Random r = new Random(11);
        trainFile = Gpt2Fixtures.tokenFile(tmp.resolve("train.bin"), 400, r);
        valFile = Gpt2Fixtures.tokenFile(tmp.resolve("val.bin"), 100, r);
    }

    @AfterAll
    static void tearDown() {
        trainFile.close();
        valFile.close();
        pool.close();
    }

    /** Every feature of a single-rank step: validation, accumulation, clipping, decay ranges, a schedule. */
    private static TrainConfig config() {
        return TrainConfig.builder().batch(2).seq(5).steps(STEPS).lr(3e-2f).schedule(TrainConfig.Schedule.COSINE)
                .warmup(2).minLrFraction(0.1f).weightDecay(0.1f).decayMatricesOnly(true).gradClip(0.5f)
                .gradAccum(2).valEvery(2).valBatches(3).dataOrder(SampleOrder.Mode.SHUFFLED).seed(5).build();
    }

    private record Run(List<StepMetrics> steps, float[] params) {}

    /** A whole run on {@code ops}, checkpointed into {@code dir} after step {@link #SAVED_AT}. */
    private static Run train(Ops ops, Path dir) throws IOException {
        List<StepMetrics> steps = new ArrayList<>();
        try (Gpt2Fixtures.Run t = on(ops, 3)) {
            while (!t.done()) {
                steps.add(t.trainStep());
                if (t.step() == SAVED_AT) {
                    t.save(dir);
                }
            }
            return new Run(steps, t.parameters());
        }
    }

    /** The run of {@link #config()} on {@code ops}, from seed {@code seed}'s parameters. */
    private static Gpt2Fixtures.Run on(Ops ops, long seed) {
        return on(ops, config(), seed);
    }

    private static Gpt2Fixtures.Run on(Ops ops, TrainConfig cfg, long seed) {
        return new Gpt2Fixtures.Run(cfg, Gpt2Fixtures.TINY, trainFile, valFile, seed, 1, b -> b.backend(r -> ops));
    }

    /** The model's parameters, read through its memory. */
    static float[] params(Gpt2 m) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment host = a.allocate(m.parameterBytes());
            m.copyParamsToHost(host);
            return host.toArray(ValueLayout.JAVA_FLOAT);
        }
    }

    private static void assertSameBits(List<StepMetrics> actual, List<StepMetrics> expected) {
        assertThat(actual).hasSameSizeAs(expected);
        for (int i = 0; i < expected.size(); i++) {
            StepMetrics a = actual.get(i), e = expected.get(i);
            assertThat(a.step()).isEqualTo(e.step());
            assertThat(Double.doubleToRawLongBits(a.trainLoss())).as("train loss of step %d", e.step())
                    .isEqualTo(Double.doubleToRawLongBits(e.trainLoss()));
            assertThat(Double.doubleToRawLongBits(a.valLoss())).as("val loss of step %d", e.step())
                    .isEqualTo(Double.doubleToRawLongBits(e.valLoss()));
            assertThat(Double.doubleToRawLongBits(a.gradNorm())).as("grad norm of step %d", e.step())
                    .isEqualTo(Double.doubleToRawLongBits(e.gradNorm()));
        }
    }

    @Test
    void aRunOnTheStrictDeviceIsBitIdenticalToTheHostRun() throws IOException {
        Path hostDir = tmp.resolve("host"), strictDir = tmp.resolve("strict");
        Run host = train(cpu, hostDir);
        StrictMemory strict = new StrictMemory();
        Run device = train(strict.ops(cpu), strictDir);

        assertSameBits(device.steps(), host.steps());
        assertThat(device.params()).containsExactly(host.params());
        assertThat(host.steps().get(0).valLoss()).isFinite(); // validation ran
        for (String f : new String[] {"model_00000003.bin", "state_00000003.bin", CheckpointFiles.POINTER}) {
            assertThat(Files.readAllBytes(strictDir.resolve(f))).as(f)
                    .isEqualTo(Files.readAllBytes(hostDir.resolve(f)));
        }
        assertThat(strict.allocations()).as("every allocation freed").isZero();

        // resuming on the device from the host's checkpoint continues the host's run bit for bit
        List<StepMetrics> resumed = new ArrayList<>();
        try (Gpt2Fixtures.Run t = on(strict.ops(cpu), 99)) {
            t.resume(hostDir);
            resumed.addAll(t.toEnd());
            assertThat(t.parameters()).containsExactly(host.params());
        }
        assertSameBits(resumed, host.steps().subList(SAVED_AT, STEPS));
    }

    @Test
    void aStepCopiesInItsTokensAndNothingOut() throws IOException {
        StrictMemory strict = new StrictMemory();
        TrainConfig cfg = config().toBuilder().valEvery(0).build();
        try (Gpt2Fixtures.Run t = on(strict.ops(cpu), cfg, 3)) {
            long in = strict.bytesIn(), out = strict.bytesOut();
            t.trainStep();
            t.trainStep();
            long tokenBytes = (long) cfg.batch() * cfg.seq() * Integer.BYTES;
            assertThat(strict.bytesIn() - in).as("inputs and targets of 2 steps × 2 micro-batches")
                    .isEqualTo(2 * cfg.gradAccum() * 2 * tokenBytes);
            assertThat(strict.bytesOut() - out).as("losses and norms come back as values").isZero();
        }
    }

    @Test
    void loadingAndSamplingCrossThroughCopies() throws IOException {
        StrictMemory strict = new StrictMemory();
        Path file = tmp.resolve("sample.bin");
        int[] prompt = {1, 2, 3};
        try (Gpt2 h = Gpt2Fixtures.model(cpu, 1, 4); Generator g = new Generator(h); Sampler s = new Sampler(h)) {
            h.save(file);
            int[] sampled = g.generate(prompt, 12, 0.8f, 3, 7), greedy = s.greedy(prompt, 12, -1);
            try (Gpt2 d = Gpt2.load(file, strict.ops(cpu), 1, 8); Generator gd = new Generator(d);
                 Sampler sd = new Sampler(d)) {
                assertThat(params(d)).containsExactly(params(h));
                assertThat(gd.generate(prompt, 12, 0.8f, 3, 7)).containsExactly(sampled);
                assertThat(sd.greedy(prompt, 12, -1)).containsExactly(greedy);
            }
        }
        assertThat(strict.allocations()).isZero();
    }

    @Test
    void theStrictDeviceRefusesDirectHostAccess() {
        StrictMemory strict = new StrictMemory();
        Ops ops = strict.ops(cpu);
        MemorySegment stale;
        try (Gpt2 m = Gpt2Fixtures.model(ops, 2, 3); Arena a = Arena.ofConfined()) {
            assertThat(m.memory()).isSameAs(strict);
            assertThatThrownBy(() -> m.params().get(ValueLayout.JAVA_FLOAT, 0)).isInstanceOf(
                    IllegalStateException.class);
            assertThatThrownBy(() -> m.grads().fill((byte) 1)).isInstanceOf(IllegalStateException.class);
            assertThatThrownBy(() -> MemorySegment.copy(m.params(), 0, a.allocate(4), 0, 4))
                    .isInstanceOf(IllegalStateException.class);
            MemorySegment host = a.allocate(64);
            assertThatThrownBy(() -> ops.geluForward(host, m.params().asSlice(0, 64), 16))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("geluForward argument 0")
                    .hasMessageContaining("not in a live allocation");
            assertThatThrownBy(() -> m.copyParamsToHost(a.allocate(4))).hasMessageContaining("host has 4 bytes");
            stale = m.params();
        }
        assertThatThrownBy(() -> ops.sumOfSquares(stale, 4)).hasMessageContaining("used after its arena closed");
    }

    @Test
    void dataParallelismNeedsHostMemory() {
        Communicator two = (Communicator) Proxy.newProxyInstance(Communicator.class.getClassLoader(),
                new Class<?>[] {Communicator.class}, (proxy, method, args) -> switch (method.getName()) {
                    case "size" -> 2;
                    case "rank" -> 0;
                    case "deviceBuffers" -> false; // a host backend
                    default -> throw new AssertionError("no collective expected, got " + method.getName());
                });
        Ops strict = new StrictMemory().ops(cpu);
        assertThatThrownBy(() -> Gpt2Fixtures.Run.rank(two, config(), Gpt2Fixtures.TINY, trainFile, valFile, 3,
                b -> b.backend(r -> strict)).close())
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("data parallelism runs its collectives on the network's buffers, but")
                .hasMessageContaining("takes host buffers")
                .hasMessageContaining("strict test device memory");
    }
}
