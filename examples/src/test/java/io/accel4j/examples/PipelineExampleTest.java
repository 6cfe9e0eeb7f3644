package io.accel4j.examples;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.accel4j.fit.DataSource;
import io.accel4j.fit.Learner;
import io.accel4j.fit.LearnerBuilder;
import io.accel4j.nn.ParameterTable;
import io.accel4j.optim.AdamW;
import io.accel4j.optim.LrSchedule;
import io.accel4j.pipeline.PipelineRank;
import io.accel4j.pipeline.Schedule;
import io.accel4j.train.StepMetrics;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The character transformer (an example's own model: a Sequential of embedding, blocks, LayerNorm and an untied head)
 * cut between its children into two stages: GPipe and 1F1B train it as one rank accumulating the same micro-batches
 * does, within fp32's summation order.
 */
class PipelineExampleTest {

    static final int V = 13, C = 16, NH = 2, L = 3, B = 2, T = 8, M = 3, STEPS = 20;

    static final int[] TEXT = new int[400];

    static {
        java.util.Random r = new java.util.Random(7);
        for (int i = 0; i < TEXT.length; i++) {
            TEXT[i] = i > 0 && r.nextInt(4) > 0 ? (TEXT[i - 1] * 5 + 1) % V : r.nextInt(V);
        }
    }

    static LearnerBuilder chars() {
        DataSource.Factory data = (rank, ranks, b, t) -> CharTransformer.windows(TEXT, b, t, 99);
        return Learner.of(() -> CharTransformer.model(V, C, NH, L, T)).tokens(V).classes(V).batch(B, T)
                .optimizer(AdamW.of(0.01f)).schedule(LrSchedule.warmupCosine(1e-2f, 2, STEPS, 0f)).gradClip(1f)
                .threads(2).seed(3).data(data);
    }

    @Test
    void twoStagesOfTheCharTransformerTrainAsOneRank() {
        List<StepMetrics> one;
        Map<String, float[]> p1 = new HashMap<>();
        try (Learner a = chars().gradAccum(M).build()) {
            one = a.fit(STEPS, null);
            put(p1, a.network().table(), a.network().params());
        }
        for (Schedule schedule : List.of(Schedule.GPIPE, Schedule.ONE_F_ONE_B)) {
            try (Learner pp = chars().pipeline(2, M, schedule).build()) {
                List<StepMetrics> two = pp.fit(STEPS, null);
                for (int s = 0; s < STEPS; s++) {
                    // every sum in the same order but the global norm's (two stages' float64 partial sums)
                    assertThat(two.get(s).trainLoss()).as("%s step %d", schedule.name(), s)
                            .isCloseTo(one.get(s).trainLoss(), within(1e-5 * one.get(s).trainLoss()));
                }
                Map<String, float[]> p2 = new HashMap<>();
                for (PipelineRank r : pp.stages()) {
                    put(p2, r.network().table(), r.network().params());
                }
                assertThat(p2.keySet()).isEqualTo(p1.keySet());
                for (Map.Entry<String, float[]> e : p1.entrySet()) {
                    boolean keyBias = e.getKey().endsWith("c_attn.bias"); // zero gradient but for rounding: see below
                    float[] a = e.getValue(), b = p2.get(e.getKey());
                    for (int i = 0; i < a.length; i++) {
                        if (keyBias && i >= C && i < 2 * C) {
                            continue; // AdamW turns the key bias's rounding-only gradient into steps of up to lr
                        }
                        assertThat(b[i]).as("%s %s[%d]", schedule.name(), e.getKey(), i).isCloseTo(a[i],
                                within(1e-5f));
                    }
                }
            }
        }
    }

    private static void put(Map<String, float[]> out, ParameterTable table, MemorySegment params) {
        for (ParameterTable.Entry e : table.entries()) {
            float[] v = new float[Math.toIntExact(e.count())];
            MemorySegment.copy(params, ValueLayout.JAVA_FLOAT, e.offset() * Float.BYTES, v, 0, v.length);
            out.put(e.name(), v);
        }
    }
}
