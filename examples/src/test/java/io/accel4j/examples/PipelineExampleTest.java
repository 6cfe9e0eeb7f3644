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

    /**
     * The tensor-parallel character transformer (vocab-parallel embedding and untied head, blocks split by heads) cut
     * into two stages, each split over two tensor ranks (4 in-process ranks, 1F1B), against the same model on one rank
     * accumulating the same micro-batches: losses within 1e-5 relative per step (fp32 sums in another order: the
     * row-parallel partial sums, the stages' norm halves) and the parameters gathered whole within 1e-4 (20 AdamW steps
     * of lr 1e-2; a coordinate whose gradient is near zero turns rounding into steps of up to lr).
     */
    @Test
    void tensorSplitStagesOfTheCharTransformerTrainAsOneRank() {
        java.util.function.Supplier<LearnerBuilder> split = () -> Learner.of(() -> CharTransformer.parallelModel(V, C,
                NH, L, T)).tokens(V).classes(V).batch(B, T).optimizer(AdamW.of(0.01f))
                .schedule(LrSchedule.warmupCosine(1e-2f, 2, STEPS, 0f)).gradClip(1f).threads(2).seed(3)
                .data((rank, ranks, b, t) -> CharTransformer.windows(TEXT, b, t, 99));
        List<StepMetrics> one;
        float[] p1;
        ParameterTable table;
        try (Learner a = split.get().gradAccum(M).build()) {
            one = a.fit(STEPS, null);
            table = a.network().table();
            p1 = a.network().params().asSlice(0, table.fp32Bytes()).toArray(ValueLayout.JAVA_FLOAT);
        }
        try (Learner tpp = split.get().pipeline(2, M, Schedule.ONE_F_ONE_B).tensorParallel(2).build();
             java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofShared()) { // rank threads write it
            assertThat(tpp.describe()).contains("pipeline of 2 stages", "2 tensor ranks");
            List<StepMetrics> got = tpp.fit(STEPS, null);
            double worst = 0;
            for (int s = 0; s < STEPS; s++) {
                double w = one.get(s).trainLoss();
                worst = Math.max(worst, Math.abs(got.get(s).trainLoss() - w) / w);
                assertThat(got.get(s).trainLoss()).as("step %d", s).isCloseTo(w, within(1e-5 * w));
            }
            MemorySegment whole = arena.allocate(table.fp32Bytes(), 64);
            whole.fill((byte) 0xff); // NaN: every element must be gathered
            tpp.gatherParameters(whole);
            double worstParam = 0;
            for (ParameterTable.Entry e : table.entries()) {
                for (long i = 0; i < e.count(); i++) {
                    if (e.name().endsWith("c_attn.bias") && i >= C && i < 2 * C) {
                        continue; // the key bias: zero gradient but for rounding (see above)
                    }
                    float g = whole.getAtIndex(ValueLayout.JAVA_FLOAT, e.offset() + i);
                    assertThat(g).as("%s[%d]", e.name(), i).isNotNaN();
                    worstParam = Math.max(worstParam, Math.abs(g - p1[(int) (e.offset() + i)]));
                }
            }
            assertThat(worstParam).isLessThan(1e-4);
            System.out.printf("char transformer tp=2 x pp=2 vs one rank: loss %.2e relative at worst, parameters "
                    + "%.2e%n", worst, worstParam);
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
