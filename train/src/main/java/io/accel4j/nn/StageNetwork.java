package io.accel4j.nn;

import io.accel4j.core.memory.DeviceArena;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.core.ops.Ops;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Objects;

/**
 * One stage of a pipeline-parallel model: a module tree (a contiguous run of the model's layers) made trainable over
 * its own flat parameter and gradient buffers ({@link ParameterTable}), whose forward takes the previous stage's
 * activation (or, on the first stage, the token ids or features) and whose backward returns the gradient of its input;
 * the last stage ends in the loss ({@link SoftmaxCrossEntropy}) as a {@link Network} does.
 *
 * <p>Unlike a {@link Network}, which holds the activations of one batch, a stage keeps several micro-batches in flight
 * (a pipeline schedule runs forwards ahead of backwards): each lives in a {@link Slot} (the activations laid out by the
 * {@link ActivationPlan}, the input, output and their gradients), allocated on first need and reused once released, so
 * {@link #slotsAllocated()} is the most micro-batches the schedule kept alive at once — what 1F1B bounds by the number
 * of stages. Under 16-bit activation storage ({@link NetworkSpec#activationStorage}) the slots share the stage's fp32
 * working set, the regions the blocks hold for one layer ({@link SlotLayout}), and each slot keeps a 16-bit store for
 * every block — the top one's too, but on a last stage whose every backward follows its own forward (1F1B's last
 * stage: {@code backwardNext}), whose top block then finds its fp32 values in place, as a network's top block does; a
 * stage that is not the last forgets, after each forward, that its blocks hold the working set, so that every block
 * but the model's top one reads its 16-bit copy, as on one rank. Not thread-safe.
 */
public final class StageNetwork implements AutoCloseable {

    private static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED;

    private final Module body;
    private final Ops ops;
    private final DeviceMemory memory;
    private final ParameterTable table;
    /** Which regions are each slot's and which the stage's (its working set under 16-bit storage). */
    private final SlotLayout layout;
    /** The stage's working set (null when every region is the slot's). */
    private final MemorySegment working;
    /** Who holds the working set's regions: shared by the slots' passes with it. */
    private final Pass.Holders holders = new Pass.Holders();
    /** Whether a forward forgets its holds (16-bit storage on a stage other than the last). */
    private final boolean handsOn;
    private final Loss loss;
    private final TensorParallel tensor;
    private final java.util.Map<String, Sharding> shardings;
    private final ParameterTable.Order order;
    private final ActRef out;
    private final ActRef losses;
    private final int inWidth;
    private final int outWidth;
    private final int vocabulary;
    private final boolean inputGradient;
    private final int maxB;
    private final int maxT;
    private final io.accel4j.core.DType operands;
    private final DeviceArena arena;
    private final MemorySegment params;
    private final MemorySegment grads;
    private final ParameterSource source;
    private final List<Slot> all = new ArrayList<>();
    private final Deque<Slot> free = new ArrayDeque<>();

    /**
     * The memory of one micro-batch in flight: {@link #input()} (what the forward reads: token ids, features or the
     * previous stage's activation), {@link #output()} (the forward's result: the activation the next stage takes, or
     * the logits), {@link #outputGradient()} (the next stage's gradient of it; null on the last stage),
     * {@link #inputGradient()} (what backward returns; null when the input takes none) and {@link #targets()} (the last
     * stage's class ids).
     */
    public final class Slot {
        private final DeviceArena mem;
        private final Pass pass;
        private final MemorySegment input;
        private final MemorySegment dout;
        private final MemorySegment din;
        private final MemorySegment targets;
        private boolean forwarded;

        private Slot() {
            long rows = (long) maxB * maxT;
            this.mem = memory.arena();
            try {
                MemorySegment acts = mem.allocate(layout.slotBytes());
                input = mem.allocate(rows * inWidth * Float.BYTES);
                dout = loss == null ? mem.allocate(rows * outWidth * Float.BYTES) : null;
                din = !inputGradient ? null : mem.allocate(rows * inWidth * Float.BYTES);
                targets = loss != null ? mem.allocate(rows * Integer.BYTES) : null;
                pass = new Pass(ops, source, Units.NONE, acts, layout.offset(), operands, null, working,
                        layout.common(), working != null ? holders : new Pass.Holders());
            } catch (RuntimeException | Error e) {
                mem.close();
                throw e;
            }
        }

        /** The forward's input, {@code maxB·maxT·inputWidth} values. */
        public MemorySegment input() {
            return input;
        }

        /** The forward's output, {@code B·T·outputWidth} fp32 of the last forward's shape. */
        public MemorySegment output() {
            return pass.act(out);
        }

        /** Where the next stage's gradient of {@link #output()} goes; null on the last stage. */
        public MemorySegment outputGradient() {
            return dout == null ? null : dout.asSlice(0, (long) pass.rows() * outWidth * Float.BYTES);
        }

        /** What backward writes: the gradient of the loss with respect to {@link #input()}; null for token ids. */
        public MemorySegment inputGradient() {
            return din == null ? null : din.asSlice(0, (long) pass.rows() * inWidth * Float.BYTES);
        }

        /** The last stage's class ids, {@code maxB·maxT} int32; null elsewhere. */
        public MemorySegment targets() {
            return targets;
        }

        /** Positions of the last forward, B·T. */
        public int rows() {
            return pass.rows();
        }
    }

    StageNetwork(NetworkSpec s, boolean first, boolean last, boolean backwardNext, Ops ops) {
        if (s.inWidth < 0) {
            throw new ShapeException("say what the stage takes: tokens(V) or features(D)");
        }
        if (last && s.classes < 0) {
            throw new ShapeException("say how many classes the last stage's loss is over: classes(V)");
        }
        if (s.fp8 != null || s.source != null) {
            throw new ShapeException("a pipeline stage takes neither FP8 linear layers nor a parameter source yet");
        }
        this.body = s.body;
        this.ops = Objects.requireNonNull(ops, "ops");
        this.memory = ops.memory();
        this.inWidth = s.inWidth;
        this.vocabulary = s.vocabulary;
        this.inputGradient = !first;
        this.maxB = s.maxB;
        this.maxT = s.maxT;
        this.operands = s.operands;
        Builder b = new Builder(ops, s.operands, false, s.recompute, s.maxB, s.maxT);
        b.storage(s.storage);
        this.tensor = TensorParallel.over(s.tensor, memory);
        b.tensor(tensor);
        this.outWidth = b.child(body, inWidth, inputGradient);
        if (last && outWidth < s.classes && !b.isVocabShardOutput()) {
            throw new ShapeException("the last stage outputs " + outWidth + " values per position, the loss is over "
                    + s.classes + " classes");
        }
        this.loss = last ? Loss.of(b, outWidth, s.classes) : null;
        this.shardings = java.util.Map.copyOf(b.shardings());
        this.order = s.order;
        this.out = b.activation(last ? "logits" : "stage.out", outWidth);
        this.losses = last ? b.activation("losses", 1) : null;
        boolean stored = b.declareStageStores(topStored(last, backwardNext));
        this.table = new ParameterTable(b.params(), s.order);
        this.layout = SlotLayout.of(b.activations().plan((long) s.maxB * s.maxT), stored);
        this.handsOn = stored && !last;
        this.arena = memory.arena();
        try {
            params = arena.allocate(table.fp32Bytes());
            grads = arena.allocate(table.fp32Bytes());
            working = stored ? arena.allocate(layout.commonBytes()) : null;
        } catch (RuntimeException | Error e) {
            arena.close();
            throw e;
        }
        this.source = ParameterSource.flat(table, params, grads);
    }

    /**
     * Builds the stage of {@code spec}'s tree on {@code ops}: its input as the spec says (tokens or features on the
     * first stage, which takes no input gradient; features — the previous stage's activation — on the others), the
     * loss over {@code spec}'s classes when {@code last}. Allocates the parameters and gradients; the slots come on demand.
     *
     * @throws ShapeException when the tree does not fit together (nothing is allocated then)
     */
    public static StageNetwork build(NetworkSpec spec, boolean first, boolean last, Ops ops) {
        return build(spec, first, last, false, ops);
    }

    /**
     * {@link #build(NetworkSpec, boolean, boolean, Ops)}; {@code backwardNext}: the schedule runs each micro-batch's
     * backward on this stage before the next forward (1F1B's last stage), so that a last stage keeps no 16-bit store
     * for its top block (a backward that finds another forward ran after its own then fails, saying so).
     */
    public static StageNetwork build(NetworkSpec spec, boolean first, boolean last, boolean backwardNext, Ops ops) {
        return new StageNetwork(spec, first, last, backwardNext, ops);
    }

    /** Whether the top block needs a 16-bit store: unless it is the model's and its backward follows its forward. */
    private static boolean topStored(boolean last, boolean backwardNext) {
        return !(last && backwardNext);
    }

    /** Where each parameter tensor lives in {@link #params()} and {@link #grads()}. */
    public ParameterTable table() {
        return table;
    }

    public Ops ops() {
        return ops;
    }

    /** The tensor-parallel group the stage's blocks are split over ({@link TensorParallel#NONE}: not split). */
    public TensorParallel tensor() {
        return tensor;
    }

    /** How parameter tensor {@code name} is split over the tensor group ({@link Sharding#REPLICATED}: whole). */
    public Sharding sharding(String name) {
        return shardings.getOrDefault(name, Sharding.REPLICATED);
    }

    /** How the parameter tensors are ordered in the flat buffer. */
    ParameterTable.Order order() {
        return order;
    }

    public DeviceMemory memory() {
        return memory;
    }

    public MemorySegment params() {
        return params;
    }

    public MemorySegment grads() {
        return grads;
    }

    /** Values per position of the input (1 for token ids). */
    public int inputWidth() {
        return inWidth;
    }

    /** Values per position of the output (the logits' padded width on the last stage). */
    public int outputWidth() {
        return outWidth;
    }

    /** Whether this stage ends in the loss. */
    public boolean last() {
        return loss != null;
    }

    /** Whether backward writes the input's gradient (every stage but the first). */
    public boolean inputGradient() {
        return inputGradient;
    }

    /**
     * Bytes of one slot: its activation regions (the whole plan under fp32 storage; without the working set under
     * 16-bit storage), the input, output gradient, input gradient and targets.
     */
    public long slotBytes() {
        return slotBytes(layout.slotBytes(), (long) maxB * maxT, inWidth, outWidth, loss != null, inputGradient);
    }

    /** Bytes of the fp32 working set the slots share under 16-bit storage ({@link SlotLayout}); 0 under fp32. */
    public long workingBytes() {
        return layout.commonBytes();
    }

    private static long slotBytes(long planBytes, long rows, int inWidth, int outWidth, boolean last,
                                  boolean inputGradient) {
        return planBytes + rows * inWidth * Float.BYTES + (last ? 0 : rows * outWidth * Float.BYTES)
                + (inputGradient ? rows * inWidth * Float.BYTES : 0) + (last ? rows * Integer.BYTES : 0);
    }

    /**
     * What a stage holds, planned from its spec: its parameter table (a tensor rank's shards), a slot's bytes and the
     * working set its slots share ({@link #workingBytes()}: 0 under fp32 storage).
     */
    public record Plan(ParameterTable table, long slotBytes, long workingBytes) {}

    /**
     * The {@link #table()} and {@link #slotBytes()} of the stage {@code spec} builds ({@link #build}'s {@code first},
     * {@code last}) on one rank of a tensor group of {@code tensorRanks}, without allocating anything or needing the
     * group. Builds the spec's tree: a spec is planned or built once.
     */
    public static Plan plan(NetworkSpec s, boolean first, boolean last, int tensorRanks) {
        return plan(s, first, last, tensorRanks, false);
    }

    /** {@link #plan(NetworkSpec, boolean, boolean, int)} of the stage {@link #build} makes with {@code backwardNext}. */
    public static Plan plan(NetworkSpec s, boolean first, boolean last, int tensorRanks, boolean backwardNext) {
        Builder b = new Builder(Network.PLANNING, s.operands, false, s.recompute, s.maxB, s.maxT);
        b.storage(s.storage);
        b.tensor(TensorParallel.planning(0, tensorRanks));
        int out = b.child(s.body, s.inWidth, !first);
        if (last) {
            Loss.of(b, out, s.classes);
        }
        b.activation(last ? "logits" : "stage.out", out);
        if (last) {
            b.activation("losses", 1);
        }
        boolean stored = b.declareStageStores(topStored(last, backwardNext));
        long rows = (long) s.maxB * s.maxT;
        SlotLayout layout = SlotLayout.of(b.activations().plan(rows), stored);
        return new Plan(new ParameterTable(b.params(), s.order),
                slotBytes(layout.slotBytes(), rows, s.inWidth, out, last, !first), layout.commonBytes());
    }

    /** Slots allocated so far: the most micro-batches alive at once on this stage. */
    public int slotsAllocated() {
        return all.size();
    }

    /** Bytes of the parameters (the gradients take as many again). */
    public long parameterBytes() {
        return table.fp32Bytes();
    }

    /** Sets every parameter from its {@link Init}, drawing from streams seeded by {@code seed} and its name. */
    public void initialise(long seed) {
        try (Arena staging = Arena.ofConfined()) {
            MemorySegment host = memory.writableOnHost(params, staging);
            for (ParameterTable.Entry e : table.entries()) {
                MemorySegment dst = host.asSlice(e.offset() * Float.BYTES, e.count() * Float.BYTES);
                Sharding sh = sharding(e.name());
                if (sh.replicated()) {
                    e.init().fill(dst, e.count(), e.name(), seed);
                } else { // drawn whole, as one rank would, then this rank's shard taken
                    long whole = e.count() * tensor.size();
                    MemorySegment all = staging.allocate(whole * Float.BYTES, 64);
                    e.init().fill(all, whole, e.name(), seed);
                    sh.extract(all, dst, e.dims(), tensor.rank(), tensor.size());
                }
            }
            memory.writeBack(host, params);
        }
    }

    /** Zeroes the gradients; backward adds into them. */
    public void zeroGrad() {
        memory.zero(grads);
    }

    /** A free slot (allocating one when none is). */
    public Slot acquire() {
        Slot s = free.poll();
        if (s == null) {
            s = new Slot();
            all.add(s);
        }
        s.forwarded = false;
        return s;
    }

    /** Gives {@code s} back for a later micro-batch. */
    public void release(Slot s) {
        free.push(s);
    }

    /**
     * Copies B·T token ids or feature rows ({@code host}) into {@code s}'s input, token ids checked in [0, V), and on
     * the last stage {@code targets} (host, B·T int32, checked in [0, classes)) into its targets.
     */
    public void load(Slot s, MemorySegment host, MemorySegment targets, int B, int T) {
        long n = (long) checkShape(B, T) * inWidth;
        if (host != null) {
            copyIn("inputs", host, s.input, n, vocabulary, T);
        }
        if (targets != null && loss != null) {
            copyIn("targets", targets, s.targets, (long) B * T, loss.classes(), T);
        }
    }

    /** The forward of {@code s}'s input (B sequences of T positions) into its output. */
    public void forward(Slot s, int B, int T) {
        checkShape(B, T);
        s.pass.begin(B, T);
        body.forward(s.pass, inputOf(s), s.output());
        if (handsOn) { // the next blocks are another stage's: on one rank they would overwrite the working set
            s.pass.releaseHolds();
        }
        s.forwarded = true;
    }

    /**
     * The backward of {@code s}'s forward: on the last stage the loss (its targets, {@code dlossScale · Σ losses}) and
     * then the tree, returning the mean loss; elsewhere the tree from {@link Slot#outputGradient()} (NaN returned).
     * Adds into the gradients and writes {@link Slot#inputGradient()} (when the input takes one); the output's
     * gradient buffer is overwritten.
     */
    public double backward(Slot s, float dlossScale) {
        if (!s.forwarded) {
            throw new IllegalStateException("backward needs this slot's forward first");
        }
        s.forwarded = false;
        double mean = Double.NaN;
        MemorySegment o = s.output(), d = s.outputGradient();
        if (loss != null) {
            mean = loss.forwardBackward(s.pass, s.pass.act(losses), o, s.targets, outWidth, dlossScale);
            d = o;
        }
        MemorySegment din = s.inputGradient();
        if (din != null) {
            memory.zero(din);
        }
        body.backward(s.pass, inputOf(s), o, d, din);
        return mean;
    }

    private MemorySegment inputOf(Slot s) {
        return s.input.asSlice(0, (long) s.pass.rows() * inWidth * Float.BYTES);
    }

    private int checkShape(int B, int T) {
        if (B < 1 || B > maxB || T < 1 || T > maxT) {
            throw new IllegalArgumentException("B must be in [1, " + maxB + "] and T in [1, " + maxT
                    + "] (the sizes this stage was allocated for), got B=" + B + ", T=" + T);
        }
        return B * T;
    }

    private void copyIn(String name, MemorySegment src, MemorySegment dst, long n, int bound, int T) {
        if (src.byteSize() < n * 4) {
            throw new IllegalArgumentException(name + " has " + src.byteSize() + " bytes, " + n + " values need "
                    + n * 4);
        }
        if (bound > 0) {
            for (long i = 0; i < n; i++) {
                int v = src.getAtIndex(I32, i);
                if (v < 0 || v >= bound) {
                    throw new IllegalArgumentException(name + "[b=" + i / T + ", t=" + i % T + "] is " + v
                            + ", outside [0, " + bound + ")");
                }
            }
        }
        memory.copyToDevice(src.asSlice(0, n * 4), dst);
    }

    /** A layer's parameter count and output width, as {@link #measure} finds them. */
    public record LayerSize(long parameters, int outWidth) {}

    /**
     * Builds {@code layers} one after another (the first taking {@code inWidth} values per position, without input
     * gradient) for planning only, nothing allocated: each layer's parameter count and output width. A layer that
     * shares a parameter of an earlier one (a tied head) counts none for it.
     *
     * @throws ShapeException when the layers do not fit together
     */
    public static List<LayerSize> measure(List<? extends Module> layers, int inWidth, int maxB, int maxT) {
        Builder b = new Builder(Network.PLANNING, io.accel4j.core.DType.FP32, false,
                io.accel4j.train.model.Recompute.NONE, maxB, maxT);
        List<LayerSize> out = new ArrayList<>(layers.size());
        int w = inWidth;
        long before = 0;
        for (int i = 0; i < layers.size(); i++) {
            w = b.child(layers.get(i), w, i > 0);
            long now = 0;
            for (Builder.ParamDecl d : b.params()) {
                now += d.count();
            }
            out.add(new LayerSize(now - before, w));
            before = now;
        }
        return out;
    }

    /**
     * The parameter table {@code spec}'s tree would have, planned without allocating (the whole model's, or another
     * stage's, for gathering by name). Builds the spec's tree: a spec is planned or built once.
     */
    public static ParameterTable plannedTable(NetworkSpec spec) {
        Builder b = new Builder(Network.PLANNING, spec.operands, false, spec.recompute, spec.maxB, spec.maxT);
        b.child(spec.body, spec.inWidth, false);
        return new ParameterTable(b.params(), spec.order);
    }

    @Override
    public void close() {
        for (Slot s : all) {
            s.mem.close();
        }
        all.clear();
        free.clear();
        arena.close();
    }
}
