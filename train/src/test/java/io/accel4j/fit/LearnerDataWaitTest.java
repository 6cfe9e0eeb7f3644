package io.accel4j.fit;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.nn.Linear;
import io.accel4j.nn.Sequential;
import io.accel4j.optim.AdamW;
import io.accel4j.train.StepMetrics;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * A {@link Learner}'s steps report the time they waited for their batches ({@code data_ms}, the CLI trainer's
 * {@code metrics.jsonl} field: the difference of the source's {@link DataSource#waitNanos} over the step, all its
 * micro-batches) when the source measures it, and leave the field out when it does not. The sources here count a
 * fixed wait per batch (no clock), so the value is exact.
 */
class LearnerDataWaitTest {

    /** What each batch "waits", ns: not a whole number of milliseconds, so a lost fraction would show. */
    private static final long WAIT_PER_BATCH = 1_234_567;

    /** {@link LearnerTest#data}'s batches, each counted as {@code perBatch} ns of waiting (−1: not measured). */
    private static DataSource.Factory counting(long perBatch) {
        DataSource.Factory inner = LearnerTest.data(9);
        return (rank, ranks, B, T) -> {
            DataSource d = inner.open(rank, ranks, B, T);
            return new DataSource() {
                long waited;

                @Override
                public void next(MemorySegment inputs, MemorySegment targets) {
                    d.next(inputs, targets);
                    waited += perBatch;
                }

                @Override
                public long waitNanos() {
                    return perBatch < 0 ? -1 : waited;
                }
            };
        };
    }

    private static LearnerBuilder learner(int ranks, int K, DataSource.Factory data) {
        return Learner.of(() -> new Sequential("mlp", Linear.gelu("fc1", 3, 7), Linear.of("fc2", 7, 3)))
                .features(3).classes(3).batch(4, 1).gradAccum(K).optimizer(AdamW.of(0.01f)).ranks(ranks)
                .threads(ranks).seed(5).data(data);
    }

    @ParameterizedTest(name = "{0} ranks, K={1}")
    @CsvSource({"1, 1", "1, 3", "2, 2"})
    void eachStepReportsItsMicroBatchesWait(int ranks, int K, @TempDir Path out) throws IOException {
        try (Learner l = learner(ranks, K, counting(WAIT_PER_BATCH)).out(out).build()) {
            List<StepMetrics> steps = l.fit(3, null);
            for (StepMetrics m : steps) {
                assertThat(m.dataMs()).as("step " + m.step()).isEqualTo(K * WAIT_PER_BATCH / 1e6);
            }
        }
        List<String> lines = Files.readAllLines(out.resolve("metrics.jsonl"));
        assertThat(lines).hasSize(3).allSatisfy(line -> assertThat(line)
                .contains("\"data_ms\":" + StepMetrics.fromJson(line).dataMs()));
        assertThat(StepMetrics.fromJson(lines.get(0)).dataMs()).isEqualTo(
                Math.round(K * WAIT_PER_BATCH / 1e6 * 1000) / 1000.0); // toJson rounds to the microsecond
    }

    @Test
    void aSourceThatDoesNotMeasureLeavesTheFieldOut(@TempDir Path out) throws IOException {
        try (Learner l = learner(1, 2, counting(-1)).out(out).build()) {
            assertThat(l.fit(2, null)).allSatisfy(m -> assertThat(m.dataMs()).isNaN());
        }
        assertThat(Files.readAllLines(out.resolve("metrics.jsonl"))).hasSize(2)
                .noneMatch(line -> line.contains("data_ms"));
    }
}
