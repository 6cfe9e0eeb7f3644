package io.accel4j.train.parallel;

import io.accel4j.train.TrainConfig;
import io.accel4j.train.model.ParameterLayout.Param;
import io.accel4j.train.model.ParameterLayout;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;

/**
 * The runs of the flat parameter vector that AdamW updates with one config: with {@link TrainConfig#decayMatricesOnly}
 * and a weight decay, maximal runs of adjacent tensors that all decay (the 2-D matrices) or all do not (biases,
 * LayerNorm); otherwise one run of everything. The runs tile {@code [0, count)} in order, so one AdamW call per run
 * (or per piece of a run, for a ZeRO shard: {@link #clip}) updates every parameter exactly once.
 */
final class DecayRanges {

    /** The 2-D weight matrices: with {@link TrainConfig#decayMatricesOnly} the only tensors that decay. */
    static final Set<Param> MATRICES =
            EnumSet.of(Param.WTE, Param.WPE, Param.QKVW, Param.ATTPROJW, Param.FCW, Param.FCPROJW);

    /** Elements {@code [offset, offset + length)}, updated with weight decay when {@code decays}. */
    record Range(long offset, long length, boolean decays) {}

    private DecayRanges() {}

    /** The runs of {@code layout} for {@code cfg}. */
    static List<Range> of(ParameterLayout layout, TrainConfig cfg) {
        long count = layout.count();
        if (!cfg.decayMatricesOnly() || cfg.weightDecay() == 0) {
            return List.of(new Range(0, count, true));
        }
        List<Range> runs = new ArrayList<>();
        long start = 0;
        Boolean runDecays = null;
        for (ParameterLayout.Span tensor : layout.tensors()) {
            boolean decays = MATRICES.contains(tensor.param());
            if (runDecays != null && decays != runDecays) {
                runs.add(new Range(start, tensor.offset() - start, runDecays));
                start = tensor.offset();
            }
            runDecays = decays;
        }
        runs.add(new Range(start, count - start, runDecays));
        return List.copyOf(runs);
    }

    /** The parts of {@code runs} inside {@code [from, to)}, in order (empty parts left out). */
    static List<Range> clip(List<Range> runs, long from, long to) {
        List<Range> out = new ArrayList<>();
        for (Range r : runs) {
            long a = Math.max(from, r.offset()), b = Math.min(to, r.offset() + r.length());
            if (a < b) {
                out.add(new Range(a, b - a, r.decays()));
            }
        }
        return List.copyOf(out);
    }
}
