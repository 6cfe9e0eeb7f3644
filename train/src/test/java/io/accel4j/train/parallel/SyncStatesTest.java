package io.accel4j.train.parallel;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.InProcessGroup;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.train.StepMetrics;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.Trainer;
import io.accel4j.train.data.SampleOrder;
import io.accel4j.train.data.TokenFile;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.Gpt2;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.api.io.TempDir;

/**
 * The trainer's stages 0 and 1 on the Java API's strategies ({@link SyncStates}) against the states they replace
 * ({@link ReplicatedStates}, {@link ShardedStates} stage 1 over {@code ZeroOptimizer}), side by side: the same
 * losses, norms and parameters bit for bit, and the same checkpoint files byte for byte, on one rank and two, with
 * the gradients averaged in buckets or whole, clipping active.
 */
class SyncStatesTest {

    /** TrainerTest's tiny model: maxT 8, V 11, padded V 16, 2 layers, 2 heads, C 8. */
    private static final GptConfig TINY = new GptConfig(8, 11, 16, 2, 2, 8);

    @TempDir
    static Path tmp;
    private static TokenFile trainFile;

    @BeforeAll
    static void setUp() throws IOException {
        int[] t = new int[400];
        Random r = new Random(29);
        for (int i = 1; i < t.length; i++) {
            t[i] = r.nextInt(4) == 0 ? r.nextInt(TINY.V()) : (t[i - 1] + 1) % TINY.V();
        }
        TokenFile.write(tmp.resolve("train.bin"), t);
        trainFile = TokenFile.open(tmp.resolve("train.bin"));
    }

    @AfterAll
    static void tearDown() {
        trainFile.close();
    }

    private record Run(float[] params, double[] losses, double[] norms, long stateBytes, Path checkpoint) {}

    private static final ModelStates.Factory OLD = (comm, model, cfg, values) -> cfg.zeroStage() == 0
            ? new ReplicatedStates(comm, model, cfg, values) : new ShardedStates(cfg.zeroStage(), comm, model, cfg,
            values);

    private static Run train(TrainConfig cfg, Communicator comm, ModelStates.Factory f, Path out) throws IOException {
        try (Parallel pool = new Parallel(1); Gpt2 m = new Gpt2(TINY, new CpuOps(pool), cfg.batch(), TINY.maxT())) {
            m.initialise(1);
            try (Trainer t = new Trainer(m, cfg, trainFile, null, comm, f)) {
                double[] losses = new double[cfg.steps()], norms = new double[cfg.steps()];
                for (int s = 0; s < cfg.steps(); s++) {
                    StepMetrics sm = t.trainStep();
                    losses[s] = sm.trainLoss();
                    norms[s] = sm.gradNorm();
                }
                t.checkReplicas();
                t.save(out);
                try (Arena a = Arena.ofConfined()) {
                    MemorySegment full = a.allocate(m.layout().fp32Bytes());
                    t.copyParameters(full);
                    return new Run(full.toArray(ValueLayout.JAVA_FLOAT), losses, norms, t.stateBytes(), out);
                }
            }
        }
    }

    private static Run run(int ranks, TrainConfig cfg, ModelStates.Factory f, Path out) {
        if (ranks == 1) {
            try {
                return train(cfg, null, f, out);
            } catch (IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        }
        try (InProcessGroup g = InProcessGroup.create(ranks, Duration.ofSeconds(30))) {
            List<Run> runs = g.run(comm -> train(cfg, comm, f, out));
            return runs.get(0);
        }
    }

    @ParameterizedTest(name = "stage {1} over {0} ranks, buckets of {2} bytes")
    @CsvSource({"1, 0, 0", "2, 0, 0", "2, 0, 256", "2, 1, 0", "2, 1, 256", "3, 1, 0"})
    void theNewStatesAreTheOldBitForBit(int ranks, int stage, long bucketBytes) throws IOException {
        TrainConfig cfg = TrainConfig.builder().batch(2).seq(5).steps(4).lr(1e-2f).eps(1e-5f).gradClip(0.5f)
                .weightDecay(0.1f).decayMatricesOnly(true).dataOrder(SampleOrder.Mode.SEQUENTIAL)
                .bucketBytes(bucketBytes).zeroStage(stage).build();
        String name = ranks + "-" + stage + "-" + bucketBytes;
        Run old = run(ranks, cfg, OLD, tmp.resolve("old-" + name));
        Run now = run(ranks, cfg, ModelStates::of, tmp.resolve("new-" + name));
        assertThat(now.losses()).containsExactly(old.losses());
        assertThat(now.norms()).containsExactly(old.norms());
        assertThat(now.params()).containsExactly(old.params());
        assertThat(now.stateBytes()).isEqualTo(old.stateBytes());
        List<Path> files;
        try (var list = Files.list(old.checkpoint())) {
            files = list.sorted().toList();
        }
        assertThat(files).isNotEmpty();
        for (Path f : files) {
            assertThat(Files.readAllBytes(now.checkpoint().resolve(f.getFileName())))
                    .as("%s", f.getFileName()).isEqualTo(Files.readAllBytes(f));
        }
    }
}
