package io.accel4j.train.parallel;

import io.accel4j.fit.BucketedDataParallel.Range;
import io.accel4j.train.model.ParameterLayout;
import io.accel4j.train.model.ParameterLayout.Param;
import java.util.ArrayList;
import java.util.List;

/**
 * GPT-2's layers as {@link io.accel4j.fit.BucketedDataParallel}'s units: unit l (the number the model's backward
 * reports once layer l's gradients are final) is that layer's slice of each of the 12 per-layer tensors, in llm.c's
 * order (ln1w … fcprojb); what no layer names (wte+wpe, lnfw+lnfb) is the strategy's rest, started on the backward's
 * final report (−1). Consecutive layers of one tensor are adjacent, so a bucket of layers is 12 ranges.
 */
final class LayerRanges {

    private static final Param[] PER_LAYER = {Param.LN1W, Param.LN1B, Param.QKVW, Param.QKVB, Param.ATTPROJW,
        Param.ATTPROJB, Param.LN2W, Param.LN2B, Param.FCW, Param.FCB, Param.FCPROJW, Param.FCPROJB};

    private LayerRanges() {
    }

    /** The L layers' units of {@code layout}. */
    static List<List<Range>> of(ParameterLayout layout) {
        int L = layout.config().L();
        List<List<Range>> units = new ArrayList<>(L);
        for (int l = 0; l < L; l++) {
            List<Range> slots = new ArrayList<>(PER_LAYER.length);
            for (Param p : PER_LAYER) {
                ParameterLayout.Span t = layout.tensor(p);
                slots.add(new Range(t.layerOffset(l), t.layerOffset(l + 1) - t.layerOffset(l)));
            }
            units.add(slots);
        }
        return units;
    }
}
