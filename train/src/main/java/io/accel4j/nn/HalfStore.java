package io.accel4j.nn;

import io.accel4j.core.DType;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * One block's activations saved for backward in 16 bits: the block computes in fp32 regions held for one layer (the
 * same memory for every block, {@link Builder#childHeldForOneLayer}); after its forward {@link #save} rounds each
 * region its backward reads into this block's own store (BF16 or FP16, round to nearest even: {@code castFromFp32});
 * before its backward, when another block's forward overwrote the fp32 regions, {@link #restore} expands them back
 * ({@code castToFp32}, exact). Statistics ({@link Builder#statistic}: a LayerNorm's mean and 1/σ, attention's
 * log-sum-exp; a few floats per position) are copied in fp32. So a block's saved activations take about half their
 * fp32 bytes, plus one block's fp32 working set for the whole network, and every kernel still reads and accumulates
 * fp32. The block whose forward runs last (the top one) needs no store: its backward comes first and finds its
 * activations still in the fp32 regions ({@link Builder#requestStore}).
 *
 * <p>What backward reads then carries one 16-bit rounding (relative error ≤ 2⁻⁸ for BF16, 2⁻¹¹ for FP16 in its
 * normal range); the block whose forward ran last reads its exact fp32 values.
 */
final class HalfStore {

    private final DType type;
    private final ActRef[] work;
    private final ActRef[] saved;
    private final boolean[] exact;

    private HalfStore(DType type, ActRef[] work, ActRef[] saved, boolean[] exact) {
        this.type = type;
        this.work = work;
        this.saved = saved;
        this.exact = exact;
    }

    /** The blocks' requests for stores, in build order: every one but the last gets its store. */
    static final class Requests {
        private record Request(String path, List<Builder.Held> held, java.util.function.Consumer<HalfStore> sink) {}

        private final List<Request> requests = new ArrayList<>();

        void add(String path, List<Builder.Held> held, java.util.function.Consumer<HalfStore> sink) {
            requests.add(new Request(path, List.copyOf(held), sink));
        }

        /** Declares the stores of {@code type} in {@code acts} and hands them out; once. */
        void declare(ActivationPlan.Declarations acts, DType type) {
            for (int i = 0; i < requests.size() - 1; i++) {
                Request r = requests.get(i);
                r.sink().accept(HalfStore.declare(acts, r.path(), type, r.held()));
            }
            requests.clear();
        }

        /**
         * {@link #declare}, a store for every request, the last one's too: for a pipeline stage, whose next
         * micro-batch's forward may overwrite the held regions before the top block's backward.
         */
        void declareEvery(ActivationPlan.Declarations acts, DType type) {
            for (Request r : requests) {
                r.sink().accept(HalfStore.declare(acts, r.path(), type, r.held()));
            }
            requests.clear();
        }

        /** Whether a block asked for a store (16-bit storage without layer recomputation). */
        boolean any() {
            return !requests.isEmpty();
        }
    }

    /** {@code storage} if it is FP32, BF16 or FP16. */
    static DType checkType(DType storage) {
        Objects.requireNonNull(storage, "storage");
        if (storage != DType.FP32 && storage != DType.BF16 && storage != DType.FP16) {
            throw new IllegalArgumentException("activations are stored in FP32, BF16 or FP16, got " + storage);
        }
        return storage;
    }

    /**
     * Declares in {@code acts} a store of {@code type} for the held regions {@code held}, each region's copy named
     * {@code <path>.saved.<its key>}: 16-bit values take ⌈perRow/2⌉ floats per position, statistics perRow.
     */
    static HalfStore declare(ActivationPlan.Declarations acts, String path, DType type, List<Builder.Held> held) {
        if (type != DType.BF16 && type != DType.FP16) {
            throw new IllegalArgumentException("a 16-bit store is BF16 or FP16, got " + type);
        }
        List<ActRef> work = new ArrayList<>(), saved = new ArrayList<>();
        boolean[] exact = new boolean[held.size()];
        for (Builder.Held h : held) {
            ActRef r = h.ref();
            exact[work.size()] = h.statistic();
            work.add(r);
            saved.add(acts.own(path + ".saved." + r.name(), h.statistic() ? r.perRow() : (r.perRow() + 1) / 2));
        }
        return new HalfStore(type, work.toArray(ActRef[]::new), saved.toArray(ActRef[]::new), exact);
    }

    /** Rounds this pass's rows of every held region into the store. */
    void save(Pass p) {
        for (int i = 0; i < work.length; i++) {
            MemorySegment src = p.act(work[i]);
            long n = (long) p.rows() * work[i].perRow();
            if (exact[i]) {
                p.memory().copy(src, p.act(saved[i], work[i].perRow()));
            } else {
                p.ops().castFromFp32(p.region(saved[i], n * type.byteSize()), type, src, n);
            }
        }
    }

    /** Expands the store back into the held regions (the inverse of {@link #save}, exact). */
    void restore(Pass p) {
        for (int i = 0; i < work.length; i++) {
            MemorySegment dst = p.act(work[i]);
            long n = (long) p.rows() * work[i].perRow();
            if (exact[i]) {
                p.memory().copy(p.act(saved[i], work[i].perRow()), dst);
            } else {
                p.ops().castToFp32(dst, p.region(saved[i], n * type.byteSize()), type, n, 1f);
            }
        }
    }
}
