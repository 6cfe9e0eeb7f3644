package io.accel4j.optim;

import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.core.ops.AdamWRange;
import io.accel4j.nn.ParameterTable;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A table's parameter groups as fused optimizer calls over the slice {@code [from, from + length)} of the vector: for
 * each distinct learning-rate multiplier, the runs of the slice it covers, each with or without weight decay
 * ({@link AdamWRange}: {@code start} in the slice's buffers, {@code offset} in the whole vector). With
 * {@code decayAll} every run decays (llm.c's {@code train_gpt2.c}); otherwise each tensor's own flag holds.
 */
record Groups(List<Float> lrScales, List<List<AdamWRange>> ranges) {

    static Groups of(ParameterTable table, boolean decayAll, long from, long length) {
        return of(table, decayAll, List.of(new OptimizerSpec.Run(from, 0, length)));
    }

    /**
     * The groups over {@code runs} of the vector, packed in the buffers at each run's {@code at}: each range's
     * {@code start} is where its elements are in the buffers, its {@code offset} where they are in the vector.
     */
    static Groups of(ParameterTable table, boolean decayAll, List<OptimizerSpec.Run> runs) {
        Map<Float, List<AdamWRange>> byScale = new LinkedHashMap<>();
        for (OptimizerSpec.Run run : runs) {
            long from = run.offset(), length = run.length();
            if (from < 0 || length < 0 || from + length > table.count()) {
                throw new IllegalArgumentException("slice [" + from + ", " + (from + length) + ") is outside the "
                        + table.count() + " parameters");
            }
            for (ParameterTable.Group g : table.groups()) {
                long a = Math.max(from, g.offset()), b = Math.min(from + length, g.offset() + g.length());
                if (a >= b) {
                    continue;
                }
                List<AdamWRange> list = byScale.computeIfAbsent(g.lrScale(), s -> new ArrayList<>());
                boolean decays = decayAll || g.decays();
                long start = run.at() + a - from;
                AdamWRange last = list.isEmpty() ? null : list.get(list.size() - 1);
                if (last != null && last.decays() == decays && last.offset() + last.length() == a
                        && last.start() + last.length() == start) {
                    list.set(list.size() - 1, new AdamWRange(last.start(), last.offset(), last.length() + b - a,
                            decays));
                } else {
                    list.add(new AdamWRange(start, a, b - a, decays));
                }
            }
        }
        List<List<AdamWRange>> r = new ArrayList<>();
        for (List<AdamWRange> l : byScale.values()) {
            r.add(List.copyOf(l));
        }
        return new Groups(List.copyOf(byScale.keySet()), List.copyOf(r));
    }

    /** One fused AdamW call over range {@code r} of a group with that group's config {@code c}. */
    @FunctionalInterface
    interface RangeUpdate {
        void update(AdamWRange r, AdamWConfig c);
    }

    /**
     * Calls {@code fn} for every range of every group in order, with AdamW's config at {@code lr} times the group's
     * multiplier, and without weight decay where the range does not decay.
     */
    void forEachRange(float lr, float beta1, float beta2, float eps, float weightDecay, RangeUpdate fn) {
        for (int i = 0; i < lrScales.size(); i++) {
            AdamWConfig c = new AdamWConfig(lr * lrScales.get(i), beta1, beta2, eps, weightDecay);
            for (AdamWRange r : ranges.get(i)) {
                fn.update(r, r.decays() ? c : c.withWeightDecay(0));
            }
        }
    }
}
