package io.accel4j.pipeline;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.accel4j.fit.DataSource;
import io.accel4j.fit.Learner;
import io.accel4j.fit.LearnerBuilder;
import io.accel4j.nn.Gpt2Blocks;
import io.accel4j.nn.Network;
import io.accel4j.nn.ParameterTable;
import io.accel4j.nn.StageNetwork;
import io.accel4j.optim.AdamW;
import io.accel4j.optim.LrSchedule;
import io.accel4j.train.StepMetrics;
import io.accel4j.train.model.GptConfig;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * GPT-2 (tiny) trained with pp=2 — GPipe and 1F1B, M = 4 micro-batches — against one rank accumulating the same 4
 * micro-batches: the same losses and final parameters up to the order of fp32 sums (the tied embedding's gradient is
 * summed from the two stages' halves instead of in backward's order), with clipping active; and 1F1B's slots bounded by
 * P where GPipe holds M.
 */
class PipelineGpt2Test {

    static final GptConfig TINY = new GptConfig(8, 11, 16, 4, 2, 16);
    static final int B = 2, T = 8, M = 4, STEPS = 20;

    /** Random token windows, a new one per batch from the batch's number: every reader sees the same sequence. */
    static DataSource.Factory tokens(int V, long seed) {
        return (rank, ranks, b, t) -> new DataSource.Resumable() {
            long n = rank;

            @Override
            public void skip(long batches) {
                n += batches * ranks;
            }

            @Override
            public void next(MemorySegment inputs, MemorySegment targets) {
                Random r = new Random(seed * 1_000_003L + n);
                int[] w = new int[b * t + 1];
                for (int i = 0; i < w.length; i++) {
                    w[i] = i > 0 && r.nextInt(3) > 0 ? (w[i - 1] * 7 + 3) % V : r.nextInt(V); // learnable
                }
                for (int i = 0; i < b * t; i++) {
                    inputs.setAtIndex(ValueLayout.JAVA_INT, i, w[i]);
                    targets.setAtIndex(ValueLayout.JAVA_INT, i, w[i + 1]);
                }
                n += ranks;
            }
        };
    }

    static LearnerBuilder gpt2() {
        return Learner.of(() -> Gpt2Blocks.body(TINY)).tokens(TINY.V()).classes(TINY.V())
                .parameterOrder(Gpt2Blocks.LLMC_ORDER).batch(B, T).optimizer(AdamW.of(0.01f))
                .schedule(LrSchedule.warmupCosine(1e-2f, 2, STEPS, 0f)).gradClip(0.6f).threads(2).seed(11)
                .data(tokens(TINY.V(), 3));
    }

    /**
     * dp=2 × pp=2 (four in-process ranks: two pipelines of two stages, each stage's gradients averaged with its
     * replica's) against one rank accumulating both replicas' micro-batches (2·M: replica r reads batches r, r+2, …,
     * so together they read what one rank does): the same losses and parameters up to the order of fp32 sums.
     */
    @Test
    void twoReplicasOfTwoStagesTrainAsOneRankAccumulatingAllTheirMicroBatches() {
        List<StepMetrics> one;
        Map<String, float[]> p1;
        try (Learner a = gpt2().gradAccum(2 * M).build()) {
            one = a.fit(STEPS, null);
            p1 = byName(a.network().table(), a.network());
        }
        try (Learner pp = gpt2().ranks(4).pipeline(Gpt2Stages.of(TINY), 2, M, Schedule.ONE_F_ONE_B).build()) {
            assertThat(pp.describe()).contains("pipeline of 2 stages", "2 data-parallel replicas");
            List<StepMetrics> four = pp.fit(STEPS, null);
            double worst = 0;
            for (int s = 0; s < STEPS; s++) {
                double rel = Math.abs(four.get(s).trainLoss() - one.get(s).trainLoss()) / one.get(s).trainLoss();
                worst = Math.max(worst, rel);
                assertThat(rel).as("step %d", s).isLessThan(1e-5); // fp32 sums in another order
            }
            assertThat(pp.stages()).hasSize(4);
            double worstParam = 0;
            for (PipelineRank r : pp.stages()) { // every replica holds the same parameters
                for (Map.Entry<String, float[]> e : byName(r.network().table(), r.network()).entrySet()) {
                    float[] a = p1.get(e.getKey().equals(Gpt2Stages.HEAD) ? "wte" : e.getKey()), b = e.getValue();
                    for (int i = 0; i < a.length; i++) {
                        if (e.getKey().endsWith("c_attn.bias") && i >= TINY.C() && i < 2 * TINY.C()) {
                            continue; // the key bias wanders on rounding alone (see above)
                        }
                        worstParam = Math.max(worstParam, Math.abs(a[i] - b[i]));
                        assertThat(b[i]).as("%s[%d]", e.getKey(), i).isCloseTo(a[i], within(1e-5f));
                    }
                }
            }
            System.out.printf("dp=2 x pp=2 vs one rank: loss %.2e relative at worst, parameters %.2e%n", worst,
                    worstParam);
        }
    }

    @Test
    void twoStagesTrainAsOneRankAccumulatingTheSameMicroBatches() {
        List<StepMetrics> one;
        Map<String, float[]> p1;
        try (Learner a = gpt2().gradAccum(M).build()) {
            one = a.fit(STEPS, null);
            p1 = byName(a.network().table(), a.network());
        }
        assertThat(one.get(STEPS - 1).trainLoss()).isLessThan(one.get(0).trainLoss());
        assertThat(one.stream().filter(m -> m.gradNorm() > 0.5).count()).as("steps clipped").isGreaterThan(3);
        for (Schedule schedule : List.of(Schedule.GPIPE, Schedule.ONE_F_ONE_B)) {
            try (Learner pp = gpt2().pipeline(Gpt2Stages.of(TINY), 2, M, schedule).build()) {
                List<StepMetrics> two = pp.fit(STEPS, null);
                double worst = 0, worstNorm = 0, worstKeyBias = 0;
                for (int s = 0; s < STEPS; s++) {
                    double rel = Math.abs(two.get(s).trainLoss() - one.get(s).trainLoss()) / one.get(s).trainLoss();
                    worst = Math.max(worst, rel);
                    // fp32 sums in another order (the tied gradient's halves): ~1e-7, compounded over 20 AdamW steps
                    double relNorm = Math.abs(two.get(s).gradNorm() / one.get(s).gradNorm() - 1);
                    worstNorm = Math.max(worstNorm, relNorm);
                    // fp32 sums in another order (the tied gradient's two halves): measured 2.5e-8 over 20 steps
                    assertThat(rel).as("%s step %d", schedule.name(), s).isLessThan(1e-5);
                    assertThat(relNorm).as("%s step %d's norm", schedule.name(), s).isLessThan(1e-5); // 2e-6
                }
                Map<String, float[]> p2 = new HashMap<>();
                for (PipelineRank r : pp.stages()) {
                    p2.putAll(byName(r.network().table(), r.network()));
                }
                assertThat(p2.get(Gpt2Stages.HEAD)).as("the tied copy").containsExactly(p2.get("wte"));
                p2.remove(Gpt2Stages.HEAD);
                assertThat(p2.keySet()).isEqualTo(p1.keySet());
                double worstParam = 0;
                for (Map.Entry<String, float[]> e : p1.entrySet()) {
                    float[] a = e.getValue(), b = p2.get(e.getKey());
                    for (int i = 0; i < a.length; i++) {
                        // the key bias's gradient is zero but for rounding (softmax ignores a constant added to a
                        // row's scores), and AdamW turns that rounding into steps of up to lr: it wanders apart
                        boolean keyBias = e.getKey().endsWith("c_attn.bias") && i >= TINY.C() && i < 2 * TINY.C();
                        if (keyBias) {
                            worstKeyBias = Math.max(worstKeyBias, Math.abs(a[i] - b[i]));
                            continue;
                        }
                        worstParam = Math.max(worstParam, Math.abs(a[i] - b[i]));
                        assertThat(b[i]).as("%s %s[%d]", schedule.name(), e.getKey(), i).isCloseTo(a[i],
                                within(1e-5f)); // measured 7.5e-7 on parameters ~0.02-1
                    }
                }
                assertThat(worstKeyBias).isLessThan(STEPS * 1e-2 / 10);
                System.out.printf("pp=2 %s vs one rank: loss %.2e relative at worst, norm %.2e, parameters %.2e "
                        + "(key biases %.2e)%n", schedule.name(), worst, worstNorm, worstParam, worstKeyBias);
                List<PipelineRank> st = pp.stages();
                for (PipelineRank r : st) { // measured: waiting over the forward-backward phase
                    assertThat(r.idleFraction()).isBetween(0.0, 1.0);
                }
                int slots0 = st.get(0).network().slotsAllocated();
                assertThat(slots0).as("%s stage 0's micro-batches alive", schedule.name())
                        .isEqualTo(schedule == Schedule.ONE_F_ONE_B ? 2 : M);
                assertThat(st.get(1).network().slotsAllocated()).isLessThanOrEqualTo(
                        schedule == Schedule.ONE_F_ONE_B ? 2 : M);
            }
        }
    }

    @Test
    void moreStagesWithMiddleStagesAndFp16LossScalingAgreeWithOneRank() {
        int steps = 6;
        List<StepMetrics> one, oneHalf;
        try (Learner a = gpt2().gradAccum(5).build()) {
            one = a.fit(steps, null);
        }
        try (Learner a = gpt2().gradAccum(4).precision(io.accel4j.core.DType.FP16).build()) {
            oneHalf = a.fit(steps, null);
        }
        record Case(int P, int M, Schedule schedule, boolean fp16) {}
        for (Case c : List.of(new Case(4, 5, Schedule.ONE_F_ONE_B, false), new Case(3, 5, Schedule.GPIPE, false),
                new Case(2, 4, Schedule.ONE_F_ONE_B, true))) {
            LearnerBuilder b = gpt2().pipeline(Gpt2Stages.of(TINY), c.P(), c.M(), c.schedule());
            try (Learner pp = (c.fp16() ? b.precision(io.accel4j.core.DType.FP16) : b).build()) {
                List<StepMetrics> got = pp.fit(steps, null), want = c.fp16() ? oneHalf : one;
                for (int s = 0; s < steps; s++) {
                    // fp32 sums in another order (1e-8 measured); fp16 operands round the same values the same way
                    assertThat(got.get(s).trainLoss()).as("%s step %d", c, s)
                            .isCloseTo(want.get(s).trainLoss(), within(1e-5 * want.get(s).trainLoss()));
                    assertThat(Float.floatToIntBits(got.get(s).lossScale())).as("%s step %d", c, s)
                            .isEqualTo(Float.floatToIntBits(want.get(s).lossScale()));
                    assertThat(got.get(s).skipped()).isEqualTo(want.get(s).skipped());
                }
                if (c.schedule() == Schedule.ONE_F_ONE_B) {
                    for (PipelineRank r : pp.stages()) {
                        assertThat(r.network().slotsAllocated()).as("%s", c).isLessThanOrEqualTo(c.P());
                    }
                }
            }
        }
    }

    static Map<String, float[]> byName(ParameterTable table, Network net) {
        float[] all = new float[Math.toIntExact(table.count())];
        MemorySegment.copy(net.params(), ValueLayout.JAVA_FLOAT, 0, all, 0, all.length);
        return split(table, all);
    }

    static Map<String, float[]> byName(ParameterTable table, StageNetwork net) {
        float[] all = new float[Math.toIntExact(table.count())];
        MemorySegment.copy(net.params(), ValueLayout.JAVA_FLOAT, 0, all, 0, all.length);
        return split(table, all);
    }

    private static Map<String, float[]> split(ParameterTable table, float[] all) {
        Map<String, float[]> out = new HashMap<>();
        for (ParameterTable.Entry e : table.entries()) {
            out.put(e.name(), java.util.Arrays.copyOfRange(all, (int) e.offset(), (int) (e.offset() + e.count())));
        }
        return out;
    }
}
