package io.accel4j.train.parallel;

import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.Pending;
import io.accel4j.collectives.ReduceOp;
import io.accel4j.core.DType;
import io.accel4j.train.model.ParameterLayout;
import io.accel4j.train.model.ParameterLayout.Param;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.function.IntConsumer;

/**
 * Averages a model's gradients over the ranks while backward still runs (PyTorch DDP's buckets): layers are gathered
 * into buckets of at least {@code bucketBytes}, in the order backward finishes them (the last layer first), and each
 * bucket's {@code allReduce(AVG)} is started asynchronously as soon as it is full, so the communicator's thread
 * reduces it while the earlier layers' backward computes. The gradients that are final only at the end (wte, wpe,
 * lnfw, lnfb) go with the last bucket.
 *
 * <p>The layout is llm.c's (tensor by tensor, each with all L layers), so layer l's gradients are 12 slices; but
 * consecutive layers of one tensor are adjacent, so a bucket of layers {@code l0 ≥ … ≥ l1} is 12 contiguous ranges,
 * one all-reduce each (plus 2 for the globals: wte+wpe and lnfw+lnfb are adjacent pairs). Every element is reduced
 * exactly once per step, with the same per-element result on every rank.
 *
 * <p>Use: {@link #hook()} as the last micro-batch's {@code Gpt2.backward} callback, then {@link #finish()} before
 * reading the gradients. One step at a time, on the rank's own thread.
 */
final class GradientBuckets {

    private static final Param[] PER_LAYER = {Param.LN1W, Param.LN1B, Param.QKVW, Param.QKVB, Param.ATTPROJW,
        Param.ATTPROJB, Param.LN2W, Param.LN2B, Param.FCW, Param.FCB, Param.FCPROJW, Param.FCPROJB};

    private final Communicator comm;
    private final MemorySegment grads;
    private final ParameterLayout layout;
    private final long bucketBytes;
    private final long layerFloats;
    private final List<Pending> inFlight = new ArrayList<>();
    private final IntConsumer hook = this::done;
    /** Layers {@code [lo, hi)} gathered and not yet started; empty when lo == hi. */
    private int lo;
    private int hi;
    private int buckets;

    GradientBuckets(Communicator comm, MemorySegment grads, ParameterLayout layout, long bucketBytes) {
        this.comm = comm;
        this.grads = grads;
        this.layout = layout;
        this.bucketBytes = bucketBytes;
        long n = 0;
        int L = layout.config().L();
        for (Param p : PER_LAYER) {
            n += layout.tensor(p).count() / L;
        }
        this.layerFloats = n;
    }

    /** The callback for {@code Gpt2.backward}: starts buckets as layers complete. */
    IntConsumer hook() {
        return hook;
    }

    private void done(int l) {
        if (l >= 0) {
            if (lo == hi) {
                hi = l + 1;
            } else if (l != lo - 1) {
                throw new IllegalStateException("layers must complete from the last down, got " + l + " after " + lo);
            }
            lo = l;
            if ((long) (hi - lo) * layerFloats * Float.BYTES >= bucketBytes) {
                startLayers();
            }
            return;
        }
        startLayers();
        start(layout.tensor(Param.WTE).offset(), layout.tensor(Param.WTE).count() + layout.tensor(Param.WPE).count());
        start(layout.tensor(Param.LNFW).offset(), layout.tensor(Param.LNFW).count()
                + layout.tensor(Param.LNFB).count());
    }

    /** Starts the gathered layers' 12 ranges. */
    private void startLayers() {
        if (lo == hi) {
            return;
        }
        for (Param p : PER_LAYER) {
            ParameterLayout.Span t = layout.tensor(p);
            start(t.layerOffset(lo), t.layerOffset(hi) - t.layerOffset(lo));
        }
        buckets++;
        lo = hi = 0;
    }

    private void start(long offset, long count) {
        inFlight.add(comm.allReduceAsync(grads.asSlice(offset * Float.BYTES, count * Float.BYTES), count,
                DType.FP32, ReduceOp.AVG));
    }

    /** Waits for every started all-reduce; afterwards the gradients are the ranks' average. */
    void finish() {
        if (lo != hi) {
            throw new IllegalStateException("backward did not report its last gradients (layers " + lo + ".." + hi
                    + " pending)");
        }
        try {
            for (Pending p : inFlight) {
                p.await();
            }
        } finally {
            inFlight.clear();
        }
    }

    /**
     * After a failure during backward ({@code failure}): waits for the all-reduces already started (the other ranks
     * issue the same ones, so they complete, or fail within the communicator's timeout) so that none still reads the
     * gradients when the model is closed, then forgets the step. Their errors are added to {@code failure} as
     * suppressed.
     */
    void abandon(Throwable failure) {
        for (Pending p : inFlight) {
            try {
                p.await();
            } catch (RuntimeException e) {
                failure.addSuppressed(e);
            }
        }
        inFlight.clear();
        lo = hi = 0;
    }

    /** Buckets of layers started so far (for tests). */
    int layerBuckets() {
        return buckets;
    }
}
