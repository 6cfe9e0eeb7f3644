package io.accel4j.train.plan;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.Recompute;
import io.accel4j.train.parallel.ZeroMemory;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.api.Test;

/**
 * The planner's figures for GPT-2 124M, 350M, 774M and 1.5B against the ZeRO paper's formulas (Rajbhandari et al.
 * 2020, §5.1): mixed-precision model states {@code 2Ψ + 2Ψ + KΨ}, K = 12, and this trainer's fp32 states
 * {@code 4Ψ + 4Ψ + 8Ψ} (fp32 parameters and gradients, AdamW's fp32 m and v, no separate master copy: the same 16Ψ at
 * stage 0, shared out differently), each divided by N where the stage shards it.
 */
class PlannerTest {

    private static final List<GptConfig> GPT2_SIZES = List.of(GptConfig.GPT2, GptConfig.GPT2_MEDIUM,
            GptConfig.GPT2_LARGE, GptConfig.GPT2_XL);

    /** The formula of the paper for a stage, bytes per parameter P, G, O, in double (an independent computation). */
    private static double formula(int stage, double psi, int n, double p, double g, double o) {
        return switch (stage) {
            case 0 -> p * psi + g * psi + o * psi;
            case 1 -> p * psi + g * psi + o * psi / n;
            case 2 -> p * psi + (g + o) * psi / n;
            default -> (p + g + o) * psi / n;
        };
    }

    @Test
    void gpt2SizesHaveTheirPublishedParameterCounts() {
        // llm.c's counts with the vocabulary padded to 50304 (its gpt2_124M.bin holds 124,475,904)
        assertThat(GptConfig.GPT2.parameterCount()).isEqualTo(124_475_904L);
        assertThat(GptConfig.GPT2_MEDIUM.parameterCount()).isBetween(350_000_000L, 360_000_000L);
        assertThat(GptConfig.GPT2_LARGE.parameterCount()).isBetween(770_000_000L, 780_000_000L);
        assertThat(GptConfig.GPT2_XL.parameterCount()).isBetween(1_550_000_000L, 1_560_000_000L);
        // the paper (§3.1): a 1.5B GPT-2 needs at least 24 GB for its model states (16Ψ bytes)
        assertThat(16.0 * GptConfig.GPT2_XL.parameterCount() / 1e9).isBetween(24.0, 25.6);
    }

    @ParameterizedTest
    @CsvSource({"1", "4", "64", "7"})
    void modelStatesFollowThePapersFormulasForEveryGpt2Size(int n) {
        for (GptConfig c : GPT2_SIZES) {
            double psi = c.parameterCount();
            for (int stage = 0; stage <= (n == 1 ? 0 : 3); stage++) {
                // the paper's mixed precision: exact up to the shard's rounding (⌈Ψ/N⌉: < 1 element per state)
                long mixed = new ZeroMemory(stage, n, c.parameterCount(), ZeroMemory.Precision.MIXED).totalBytes();
                assertThat((double) mixed).as("mixed %s stage %d", c, stage)
                        .isCloseTo(formula(stage, psi, n, 2, 2, 12), within(16.0));
                // what the planner prints for this trainer: MemoryPlan's states, 4Ψ + 4Ψ + 8Ψ divided where sharded,
                // up to stage 2/3's per-unit rounding (at most L + 1 elements more per sharded state, 16 bytes each)
                Layout l = layout(c, n, stage);
                double fp32 = formula(stage, psi, n, 4, 4, 8);
                assertThat((double) l.memory().modelStates()).as("fp32 %s stage %d", c, stage)
                        .isCloseTo(fp32, within(16.0 * (c.L() + 2)));
                assertThat(l.memory()).isEqualTo(MemoryPlan.of(c, l.microBatch(), 1024, l.recompute(), stage, n));
            }
        }
    }

    @Test
    void thePapersFigureOneExampleComesOut() {
        // Ψ = 7.5B, N = 64, K = 12: 120 GB, 31.4 GB, 16.6 GB, 1.88 GB (figure 1)
        long psi = 7_500_000_000L;
        double[] gb = {120, 31.4, 16.6, 1.88};
        for (int s = 0; s <= 3; s++) {
            double got = new ZeroMemory(s, 64, psi, ZeroMemory.Precision.MIXED).totalBytes() / 1e9;
            assertThat(got).as("stage %d", s).isCloseTo(gb[s], within(0.05));
        }
    }

    private static Layout layout(GptConfig c, int n, int stage) {
        Planner.Result r = Planner.standard().plan(c, 8 * n, 1024, new Cluster(n, 1L << 50, 1e11, 1e14));
        return r.all().stream().filter(l -> l.zeroStage() == stage && l.recompute() == Recompute.NONE)
                .findFirst().orElseThrow();
    }

    @Test
    void feasibleLayoutsAreRankedByTimeAndMakeUpTheGlobalBatch() {
        GptConfig c = GptConfig.GPT2;
        Cluster cluster = new Cluster(8, 40L << 30, 50e9, 80e12);
        Planner.Result r = Planner.standard().plan(c, 96, 1024, cluster);
        assertThat(r.all()).hasSize(4 * 4); // 4 stages × none, gelu, layer, every:3 (√12 rounded)
        assertThat(r.all()).anyMatch(l -> l.recompute().equals(Recompute.every(3))
                && l.trainArgs().containsAll(List.of("--recompute", "every:3")));
        for (Layout l : r.all()) {
            assertThat(l.microBatch() * l.accumulation() * l.dataParallel()).isEqualTo(96);
            assertThat(l.tensorParallel()).isOne();
            assertThat(l.pipelineStages()).isOne();
        }
        assertThat(r.feasible()).isNotEmpty().allMatch(l -> l.bytesPerDevice() <= cluster.memoryBytes());
        for (int i = 1; i < r.feasible().size(); i++) {
            assertThat(r.feasible().get(i).step().seconds())
                    .isGreaterThanOrEqualTo(r.feasible().get(i - 1).step().seconds());
        }
        // each (stage, recompute) keeps the largest micro-batch that fits: the next larger divisor does not
        for (Layout l : r.feasible()) {
            int perRank = 96 / 8;
            for (int b = l.microBatch() + 1; b <= perRank; b++) {
                if (perRank % b == 0) {
                    assertThat(MemoryPlan.of(c, b, 1024, l.recompute(), l.zeroStage(), 8).total())
                            .isGreaterThan(cluster.memoryBytes());
                    break;
                }
            }
        }
        assertThat(r.best().trainArgs()).contains("--batch", "--seq", "1024");
    }

    @Test
    void aClusterTooSmallHasNoBestAndNamesTheSmallestNeed() {
        Planner.Result r = Planner.standard().plan(GptConfig.GPT2_XL, 8, 1024, new Cluster(8, 1L << 30, 1e11, 1e14));
        assertThat(r.feasible()).isEmpty();
        assertThat(r.best()).isNull();
        assertThat(r.smallest().zeroStage()).isEqualTo(3);
        assertThat(r.smallest().recompute()).isEqualTo(Recompute.every(7)); // √48 rounded: the fewest outputs kept
        assertThat(r.smallest().microBatch()).isOne();
        assertThat(r.smallest().bytesPerDevice()).isEqualTo(r.all().stream().mapToLong(Layout::bytesPerDevice).min()
                .orElseThrow());
    }

    @Test
    void oneDeviceHasNoZeroAndNoCommunication() {
        Planner.Result r = Planner.standard().plan(GptConfig.TINY, 16, 64, new Cluster(1, 1L << 30, 1e9, 1e12));
        // tiny has 2 layers: no segments, so none, gelu and layer
        assertThat(r.all()).hasSize(Recompute.values().length).allMatch(l -> l.zeroStage() == 0
                && l.step().commSeconds() == 0 && l.microBatch() == 16 && l.accumulation() == 1);
    }

    @Test
    void stepTimeCountsFlopsAndRingTraffic() {
        GptConfig c = GptConfig.GPT2;
        double psi = c.parameterCount();
        // 6Ψ + 12·L·C·T per token, forward and backward
        assertThat(StepTime.flops(c, 1024, 1, Recompute.NONE)).isCloseTo((6 * psi + 12.0 * 12 * 768 * 1024) * 1024,
                within(1e3));
        assertThat(StepTime.flops(c, 1024, 1, Recompute.LAYER) - StepTime.flops(c, 1024, 1, Recompute.NONE))
                .isCloseTo(2 * 12.0 * 12 * 768 * 768 * 1024, within(1e3));
        long p = c.parameterCount();
        assertThat(StepTime.commBytes(p, 1, 3, 4)).isZero();
        double ddp = StepTime.commBytes(p, 8, 0, 1);
        assertThat(ddp).isCloseTo(2 * 4.0 * p * 7 / 8, within(1.0));
        assertThat(StepTime.commBytes(p, 8, 3, 1) / ddp).isCloseTo(1.5, within(1e-12)); // the paper's 1.5x
        assertThat(StepTime.commBytes(p, 8, 2, 1) / ddp).isCloseTo(1.0, within(1e-12));
    }
}
