package io.accel4j.kernels.bench;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

class BenchRunnerTest {

    private final FakeClock clock = new FakeClock(1, 1);
    private final AtomicInteger closed = new AtomicInteger();
    private final AtomicInteger ran = new AtomicInteger();

    private Case ok(String kernel) {
        return Case.of("g", kernel, "s", 2e9, Ceiling.FP32,
                () -> Case.Prepared.of(ran::incrementAndGet, closed::incrementAndGet));
    }

    @Test
    void aFailingCaseIsAnErrorRowAndTheNextStillRuns() {
        Case failsToPrepare = Case.of("g", "bad", "s", 1, Ceiling.BF16, () -> {
            throw new IllegalStateException("cublasLtMatmulAlgoGetHeuristic: CUBLAS_STATUS_NOT_SUPPORTED\nmore");
        });
        Case failsToRun = Case.of("g", "bad run", "s", 1, Ceiling.BF16, () -> Case.Prepared.of(() -> {
            throw new IllegalArgumentException("CUDA_ERROR_ILLEGAL_ADDRESS");
        }, closed::incrementAndGet));
        List<Result> seen = new ArrayList<>();
        Budget budget = new Budget(clock, Budget.nanos(100), Budget.nanos(0.2));
        List<Result> results = BenchRunner.run(List.of(failsToPrepare, failsToRun, ok("good")), clock, budget,
                seen::add);
        assertThat(seen).isEqualTo(results);
        assertThat(results).extracting(Result::status)
                .containsExactly(Result.Status.ERROR, Result.Status.ERROR, Result.Status.OK);
        assertThat(results.get(0).detail()).isEqualTo("cublasLtMatmulAlgoGetHeuristic: CUBLAS_STATUS_NOT_SUPPORTED");
        assertThat(results.get(1).detail()).isEqualTo("CUDA_ERROR_ILLEGAL_ADDRESS");
        assertThat(closed.get()).as("both prepared cases freed once").isEqualTo(2);
        Result good = results.get(2);
        assertThat(good.stats().medianMs()).isEqualTo(1);
        // 2e9 FLOP in 1 ms: 2 TFLOP/s, 2/67 of the fp32 peak
        assertThat(good.value()).isEqualTo(2.0);
        assertThat(good.ofCeiling()).isEqualTo(2e12 / 67e12);
        assertThat(ran.get()).isEqualTo(clock.calls);
    }

    @Test
    void skippedCasesAndCasesPastTheBudgetAreNotPrepared() {
        FakeClock slow = new FakeClock(5, 5); // a case fills its 0.6 s share: two fit in the 1 s total, not three
        Budget budget = new Budget(slow, Budget.nanos(1), Budget.nanos(0.6));
        Case skip = Case.skip("attention", "fp32", "all full", Ceiling.FP32, "fp32 is causal only");
        List<Result> results = BenchRunner.run(List.of(skip, ok("a"), ok("b"), ok("c")), slow, budget, r -> { });
        assertThat(results).extracting(Result::status).containsExactly(Result.Status.SKIPPED, Result.Status.OK,
                Result.Status.OK, Result.Status.SKIPPED);
        assertThat(results.get(0).detail()).isEqualTo("fp32 is causal only");
        assertThat(results.get(3).detail()).isEqualTo(BenchRunner.BUDGET_SPENT);
        assertThat(results.get(3).value()).isNaN();
        assertThat(closed.get()).isEqualTo(2);
    }

    @Test
    void anExceptionWithoutAMessageIsNamed() {
        assertThat(BenchRunner.message(new NullPointerException())).isEqualTo("NullPointerException");
        assertThat(BenchRunner.message(new OutOfMemoryError("Java heap space"))).isEqualTo("Java heap space");
    }
}
