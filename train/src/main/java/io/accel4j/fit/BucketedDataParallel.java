package io.accel4j.fit;

import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.Pending;
import io.accel4j.collectives.ReduceOp;
import io.accel4j.core.DType;
import io.accel4j.core.ops.Ops;
import io.accel4j.nn.Network;
import io.accel4j.nn.ParameterTable;
import io.accel4j.optim.Optimizer;
import io.accel4j.optim.OptimizerSpec;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.function.IntConsumer;

/**
 * DDP's all-reduce in buckets overlapped with backward (PyTorch DDP's buckets), composed over a strategy whose
 * reduction is an in-place {@code AVG} all-reduce of the whole gradient vector: {@link DataParallel} (stage 0) or
 * {@link ZeroSharding} stage 1. Everything but the reduction is the inner strategy's.
 *
 * <p>The flat gradient vector is cut into <b>units</b> (what the backward's listener reports: a {@code UnitScope}'s
 * number, e.g. GPT-2's layer l or a {@code Sequential}'s child i), each a list of ranges (its <b>slots</b>). As the
 * last micro-batch's backward reports units ({@link #gradientsDone()}), they gather into a bucket; once the bucket
 * holds at least {@code bucketBytes}, its ranges are all-reduced asynchronously — slot by slot, each slot's ranges of
 * the bucket's units sorted by offset and merged where adjacent — so the communicator's thread reduces them while the
 * earlier units' backward computes. A report of −1 (everything is final), or {@link #reduce} when none came, starts
 * what is left: the units not yet started as one bucket, then the <b>rest</b> (the ranges no unit names, as maximal
 * gaps). {@link #reduce} waits for them all. Every element is reduced exactly once per step.
 *
 * <p>With GPT-2's units (llm.c's tensor-by-tensor layout: layer l is 12 slices, one per tensor; the rest wte+wpe and
 * lnfw+lnfb) a bucket of layers {@code lo..hi−1} is 12 ranges and the rest 2: the same collectives, in the same
 * order, as the trainer's buckets always issued. With 2 ranks every element's average is {@code (a+b)/2} however the
 * vector is cut, so bucketed and whole are the same bits; with 3 or more a ring all-reduce's order of addition depends
 * on where an element falls in a call's chunks, so the two may differ in the last bit.
 *
 * <p>One step at a time, on the rank's own thread; the listener runs between kernels and only starts transfers.
 */
public final class BucketedDataParallel extends ForwardingGradientSync {

    /** {@code count} floats at {@code offset} of the flat vector. */
    public record Range(long offset, long count) {
        public Range {
            if (offset < 0 || count < 0) {
                throw new IllegalArgumentException("a range needs offset >= 0 and count >= 0, got " + offset + ", "
                        + count);
            }
        }

        long end() {
            return offset + count;
        }
    }

    private final Communicator comm;
    private final MemorySegment grads;
    private final long count;
    private final long bucketBytes;
    private final List<List<Range>> units;
    private final long[] unitFloats;
    private final int slots;
    private final List<Range> rest;
    private final boolean[] reported;
    private final List<Integer> pending = new ArrayList<>();
    private long pendingFloats;
    private boolean restStarted;
    private final List<Pending> inFlight = new ArrayList<>();
    private final IntConsumer hook = this::done;
    private int buckets;

    /**
     * {@code inner}'s reduction of {@code grads} ({@code count} fp32 values in the memory its collectives take) in
     * buckets of at least {@code bucketBytes} over {@code units} (index: the number the listener reports).
     *
     * @throws IllegalArgumentException when {@code inner} is not DDP or ZeRO-1, {@code bucketBytes} is not positive,
     *                                  or the units' ranges overlap or leave {@code [0, count)}
     */
    public BucketedDataParallel(GradientSync inner, MemorySegment grads, long count, List<List<Range>> units,
                                long bucketBytes) {
        super(inner);
        if (!(inner instanceof DataParallel dp) || inner instanceof ZeroSharding z && z.stage() != 1) {
            throw new IllegalArgumentException("bucketed all-reduce composes over DDP or ZeRO-1 (an in-place "
                    + "all-reduce of the whole vector), not " + inner.getClass().getSimpleName()
                    + (inner instanceof ZeroSharding z ? " stage " + z.stage() : ""));
        }
        if (bucketBytes <= 0) {
            throw new IllegalArgumentException("bucketBytes must be > 0, got " + bucketBytes);
        }
        if (grads.byteSize() < count * Float.BYTES) {
            throw new IllegalArgumentException("the gradients hold " + grads.byteSize() / Float.BYTES
                    + " floats, fewer than the " + count + " to reduce");
        }
        this.comm = dp.comm;
        this.grads = grads;
        this.count = count;
        this.bucketBytes = bucketBytes;
        this.units = List.copyOf(units.stream().map(List::copyOf).toList());
        this.unitFloats = new long[units.size()];
        this.reported = new boolean[units.size()];
        List<Range> all = new ArrayList<>();
        int s = 0;
        for (int u = 0; u < this.units.size(); u++) {
            List<Range> r = this.units.get(u);
            s = Math.max(s, r.size());
            for (Range x : r) {
                unitFloats[u] += x.count();
                all.add(x);
            }
        }
        this.slots = s;
        this.rest = gaps(all, count);
    }

    /** The ranges of {@code [0, count)} none of {@code taken} covers, maximal and in order. */
    private static List<Range> gaps(List<Range> taken, long count) {
        List<Range> sorted = new ArrayList<>(taken);
        sorted.sort(Comparator.comparingLong(Range::offset));
        List<Range> out = new ArrayList<>();
        long at = 0;
        for (Range r : sorted) {
            if (r.count() == 0) {
                continue;
            }
            if (r.offset() < at || r.end() > count) {
                throw new IllegalArgumentException("unit ranges must not overlap and must lie in [0, " + count
                        + "): " + r + " starts before " + at + " or ends after " + count);
            }
            if (r.offset() > at) {
                out.add(new Range(at, r.offset() - at));
            }
            at = r.end();
        }
        if (at < count) {
            out.add(new Range(at, count - at));
        }
        return List.copyOf(out);
    }

    /**
     * Units for a network built from {@code scopes} ({@code UnitScope.perChild}'s children, or a tree's own scopes
     * such as GPT-2's): unit u is the table entries declared by the scope that reports u ({@code reported() ≥ 0}),
     * merged where adjacent; the other scopes' entries are the rest.
     */
    public static List<List<Range>> unitsOf(ParameterTable table, List<io.accel4j.nn.UnitScope> scopes) {
        int n = 0;
        for (io.accel4j.nn.UnitScope scope : scopes) {
            n = Math.max(n, scope.reported() + 1);
        }
        List<List<Range>> out = new ArrayList<>(java.util.Collections.nCopies(n, List.<Range>of()));
        for (io.accel4j.nn.UnitScope scope : scopes) {
            if (scope.reported() < 0) {
                continue;
            }
            int[] d = scope.declared();
            List<Range> r = new ArrayList<>();
            for (int i = d[0]; i < d[1]; i++) {
                ParameterTable.Entry e = table.entries().get(i);
                Range last = r.isEmpty() ? null : r.get(r.size() - 1);
                if (last != null && last.end() == e.offset()) {
                    r.set(r.size() - 1, new Range(last.offset(), last.count() + e.count()));
                } else {
                    r.add(new Range(e.offset(), e.count()));
                }
            }
            out.set(scope.reported(), r);
        }
        return out;
    }

    @Override
    public IntConsumer gradientsDone() {
        return hook;
    }

    private void done(int u) {
        if (u == -1) {
            flush();
            return;
        }
        if (u < 0 || u >= units.size()) {
            throw new IllegalStateException("backward reported unit " + u + ", not one of the " + units.size()
                    + " this strategy buckets (or -1)");
        }
        if (reported[u] || restStarted) {
            throw new IllegalStateException("backward reported unit " + u + " twice in one step");
        }
        reported[u] = true;
        pending.add(u);
        pendingFloats += unitFloats[u];
        if (pendingFloats * Float.BYTES >= bucketBytes) {
            startPending();
        }
    }

    /** Starts every unit not yet started as one bucket, then the rest. */
    private void flush() {
        if (restStarted) {
            return;
        }
        for (int u = units.size() - 1; u >= 0; u--) {
            if (!reported[u]) {
                reported[u] = true;
                pending.add(u);
            }
        }
        startPending();
        for (Range r : rest) {
            start(r);
        }
        restStarted = true;
    }

    /** Starts the pending units' ranges, slot by slot, merged where adjacent. */
    private void startPending() {
        if (pending.isEmpty()) {
            return;
        }
        for (int j = 0; j < slots; j++) {
            List<Range> slot = new ArrayList<>();
            for (int u : pending) {
                List<Range> r = units.get(u);
                if (j < r.size() && r.get(j).count() > 0) {
                    slot.add(r.get(j));
                }
            }
            slot.sort(Comparator.comparingLong(Range::offset));
            Range run = null;
            for (Range r : slot) {
                if (run != null && run.end() == r.offset()) {
                    run = new Range(run.offset(), run.count() + r.count());
                } else {
                    if (run != null) {
                        start(run);
                    }
                    run = r;
                }
            }
            if (run != null) {
                start(run);
            }
        }
        buckets++;
        pending.clear();
        pendingFloats = 0;
    }

    private void start(Range r) {
        inFlight.add(comm.allReduceAsync(grads.asSlice(r.offset() * Float.BYTES, r.count() * Float.BYTES),
                r.count(), DType.FP32, ReduceOp.AVG));
    }

    /** Starts what the backward did not, then waits for every bucket: the gradients are the ranks' average. */
    @Override
    public void reduce(MemorySegment g, long n) {
        if (n != count || g.address() != grads.address()) {
            throw new IllegalArgumentException("the buckets reduce the " + count + " gradients they were made over, "
                    + "got " + n + " at another address");
        }
        try {
            flush();
            for (Pending p : inFlight) {
                p.await();
            }
        } finally {
            reset();
        }
    }

    /**
     * After a failure during backward ({@code failure}): waits for the all-reduces already started (the other ranks
     * issue the same ones, so they complete, or fail within the communicator's timeout) so that none still reads the
     * gradients when the network is closed, then forgets the step; their errors are added to {@code failure}.
     */
    @Override
    public void abandon(Throwable failure) {
        for (Pending p : inFlight) {
            try {
                p.await();
            } catch (RuntimeException e) {
                failure.addSuppressed(e);
            }
        }
        reset();
    }

    private void reset() {
        inFlight.clear();
        pending.clear();
        pendingFloats = 0;
        java.util.Arrays.fill(reported, false);
        restStarted = false;
    }

    /** Buckets of units started so far (the rest not counted). */
    public int buckets() {
        return buckets;
    }

    @Override
    public Shard shard(long n) {
        return inner.shard(n);
    }

    @Override
    public MemorySegment gradients(MemorySegment g, long n) {
        return inner.gradients(g, n);
    }

    @Override
    public double sumOfSquares(Ops ops, MemorySegment g, long n) {
        return inner.sumOfSquares(ops, g, n);
    }

    @Override
    public boolean anyNonFinite(Ops ops, MemorySegment g, long n) {
        return inner.anyNonFinite(ops, g, n);
    }

    @Override
    public Optimizer optimizer(OptimizerSpec spec, Network net) {
        return inner.optimizer(spec, net);
    }

    @Override
    public Optimizer optimizer(OptimizerSpec spec, Ops ops, ParameterTable table, MemorySegment params,
                               MemorySegment g) {
        return inner.optimizer(spec, ops, table, params, g);
    }
}
