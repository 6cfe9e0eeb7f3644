package io.accel4j.cli.train;

import static io.accel4j.cli.train.TrainCommandTest.quick;
import static io.accel4j.cli.train.TrainCommandTest.run;
import static io.accel4j.cli.train.TrainCommandTest.trainLosses;
import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.cli.train.TrainCommandTest.Result;
import io.accel4j.core.DType;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.Recompute;
import io.accel4j.train.plan.MemoryPlan;
import java.io.IOException;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code train --precision bf16|fp16}: 16-bit saved activations, planned, found by --find-batch-size and allocated. */
class TrainCommandSixteenBitTest {

    private static final String[] QUIET = {"--steps", "3", "--val-every", "0", "--samples", "0",
        "--eval-problems", "0"};

    @TempDir
    Path tmp;

    @Test
    void aBudgetThatFitsFp32SequencesFitsMoreWithSixteenBitStorage() throws IOException {
        // the tiny preset at T = 16: a budget that fits exactly 24 sequences with fp32 storage
        long budget = MemoryPlan.of(GptConfig.TINY, 24, 16, Recompute.NONE).total();
        int bf16 = MemoryPlan.largestBatch(GptConfig.TINY, 16, Recompute.NONE, 0, 1, DType.BF16, budget, 1024);
        assertThat(MemoryPlan.largestBatch(GptConfig.TINY, 16, Recompute.NONE, budget, 1024)).isEqualTo(24);
        System.out.println("tiny, T=16, fp32 storage fits 24 sequences, 16-bit storage " + bf16);
        assertThat(bf16).isGreaterThan(24);
        for (String p : new String[] {"bf16", "fp16"}) {
            Path dir = tmp.resolve(p);
            Result r = run(quick(dir, concat(QUIET, "--precision", p, "--find-batch-size", "--memory-budget",
                    Long.toString(budget))));
            assertThat(r.code()).as(r.err()).isZero();
            assertThat(r.out()).contains("recompute none, saved activations in " + p + ": at most " + bf16
                    + " sequences of 16 tokens fit; using --batch " + bf16)
                    .contains("trial step at --batch " + bf16 + ": ").contains("as planned")
                    .contains("saved activations in " + p);
            assertThat(trainLosses(dir)).hasSize(3);
        }
    }

    private static String[] concat(String[] a, String... b) {
        String[] out = java.util.Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, out, a.length, b.length);
        return out;
    }
}
