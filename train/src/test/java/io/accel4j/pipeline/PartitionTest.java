package io.accel4j.pipeline;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.train.model.GptConfig;
import org.junit.jupiter.api.Test;

/** Balanced contiguous splits: the most expensive stage as cheap as any split makes it; too many stages refused. */
class PartitionTest {

    @Test
    void theMostExpensiveStageIsAsCheapAsAnySplitMakesIt() {
        long[] cost = {9, 1, 1, 1, 1, 1, 1, 5};
        Partition p = Partition.balanced(cost, 3);
        assertThat(p.from(0)).isZero();
        assertThat(p.to(2)).isEqualTo(8);
        long worst = 0;
        for (int s = 0; s < 3; s++) {
            assertThat(p.to(s)).isGreaterThan(p.from(s));
            worst = Math.max(worst, p.cost(s));
        }
        assertThat(worst).isEqualTo(9); // [9] [1 1 1 1 1 1] [5] or as good
        assertThat(bruteForceBest(cost, 3)).isEqualTo(worst);
    }

    @Test
    void gpt2sEmbeddingAndHeadWeighOnTheEndStages() {
        Gpt2Stages m = Gpt2Stages.of(new GptConfig(8, 64, 64, 6, 2, 16));
        Partition p = Partition.balanced(m.parameters(), 2);
        // the embedding (Vp·C + maxT·C) and the head's copy (Vp·C) each about a block (12C² + 13C): 3 + 3
        assertThat(p.to(0)).isEqualTo(3);
        assertThat(p.describe(m::layerName, "parameters").get(0)).startsWith("stage 0: layers 0-2 (embedding, h.0");
    }

    @Test
    void moreStagesThanLayersIsRefusedNamingBoth() {
        assertThatThrownBy(() -> Partition.balanced(new long[] {1, 2, 3}, 4))
                .hasMessage("4 pipeline stages are more than the model's 3 layers: each stage needs at least one");
    }

    private static long bruteForceBest(long[] cost, int P) {
        return best(cost, 0, P);
    }

    private static long best(long[] cost, int from, int P) {
        if (P == 1) {
            long s = 0;
            for (int i = from; i < cost.length; i++) {
                s += cost[i];
            }
            return s;
        }
        long b = Long.MAX_VALUE, s = 0;
        for (int i = from; i < cost.length - P + 1; i++) {
            s += cost[i];
            b = Math.min(b, Math.max(s, best(cost, i + 1, P - 1)));
        }
        return b;
    }
}
