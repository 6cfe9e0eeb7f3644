package io.accel4j.train.parallel;

import io.accel4j.optim.Optimizer;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.model.ParameterLayout;
import java.util.ArrayList;
import java.util.List;

/**
 * Wires an offloaded optimizer's deferred upload ({@link Optimizer#deferUpload}) into a GPT-2 model: the upload goes
 * unit by unit in the order the forward reads them (the embeddings, each layer's twelve segments, the final
 * LayerNorm), and each unit's acquire waits only for its own segments ({@link Gpt2#beforeAcquire}). The strategy that
 * owns the optimizer makes every other reader of the parameters wait for all of them
 * ({@link Optimizer#awaitParameters()}) and {@link #unwire}s before closing it.
 */
final class DeferredUpload {

    private DeferredUpload() {}

    /**
     * Asks {@code optimizer} (over the whole parameter vector of {@code model}) to defer its upload in unit order and,
     * when it does, makes the model's units wait for their parameters.
     *
     * @return whether the upload is deferred (only an overlapped offloaded optimizer defers)
     */
    static boolean wire(Optimizer optimizer, Gpt2 model) {
        ParameterLayout layout = model.layout();
        List<Optimizer.Part> order = new ArrayList<>();
        for (ParameterLayout.Unit u : layout.units()) {
            for (ParameterLayout.Segment seg : u.segments()) {
                order.add(new Optimizer.Part(seg.offset(), seg.count()));
            }
        }
        if (!optimizer.deferUpload(order)) {
            return false;
        }
        model.beforeAcquire(unit -> {
            for (ParameterLayout.Segment seg : layout.units().get(unit).segments()) {
                optimizer.awaitParameters(seg.offset(), seg.count());
            }
        });
        return true;
    }

    /** The model's units no longer wait (the optimizer is about to close). */
    static void unwire(Gpt2 model) {
        model.beforeAcquire(null);
    }
}
