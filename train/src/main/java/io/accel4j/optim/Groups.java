package io.accel4j.optim;

import io.accel4j.core.ops.AdamWRange;
import io.accel4j.nn.ParameterTable;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A table's parameter groups as fused optimizer calls: for each distinct learning-rate multiplier, the runs of the
 * buffer it covers, each with or without weight decay ({@link AdamWRange}; {@code start = offset}: whole buffers).
 * With {@code decayAll} every run decays (llm.c's {@code train_gpt2.c}); otherwise each tensor's own flag holds.
 */
record Groups(List<Float> lrScales, List<List<AdamWRange>> ranges) {

    static Groups of(ParameterTable table, boolean decayAll) {
        Map<Float, List<AdamWRange>> byScale = new LinkedHashMap<>();
        for (ParameterTable.Group g : table.groups()) {
            List<AdamWRange> list = byScale.computeIfAbsent(g.lrScale(), s -> new ArrayList<>());
            boolean decays = decayAll || g.decays();
            AdamWRange last = list.isEmpty() ? null : list.get(list.size() - 1);
            if (last != null && last.decays() == decays && last.offset() + last.length() == g.offset()) {
                list.set(list.size() - 1, new AdamWRange(last.start(), last.offset(), last.length() + g.length(),
                        decays));
            } else {
                list.add(new AdamWRange(g.offset(), g.offset(), g.length(), decays));
            }
        }
        List<List<AdamWRange>> r = new ArrayList<>();
        for (List<AdamWRange> l : byScale.values()) {
            r.add(List.copyOf(l));
        }
        return new Groups(List.copyOf(byScale.keySet()), List.copyOf(r));
    }
}
