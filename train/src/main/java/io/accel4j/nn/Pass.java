package io.accel4j.nn;

import io.accel4j.core.DType;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.core.fp8.Fp8Scaling;
import io.accel4j.core.ops.Ops;
import io.accel4j.train.model.Fp8State;
import java.lang.foreign.MemorySegment;
import java.util.function.IntConsumer;

/**
 * What a module's {@link Module#forward} and {@link Module#backward} see: the backend, this call's batch shape
 * (B sequences of T positions, {@code rows = B·T}), the operand precisions the blocks honour, and the memory behind
 * the handles declared at build time: {@link #param}, {@link #grad} (a tensor's slices of the flat buffers) and
 * {@link #act} ({@code rows × perRow} floats of an activation region). Made once by the {@link Network}, begun anew by each
 * forward; its only other state is which module's activations a region shared by recomputing
 * blocks holds now ({@link #holder}, {@link #hold}), so that a block recomputes exactly when another overwrote them.
 * A pipeline stage's micro-batch slots each have a pass; under 16-bit storage they share the stage's working set
 * (the regions held for one layer, {@link SlotLayout}) and then one {@link Holders}, whose entries name the pass too,
 * so that another micro-batch's forward counts as another module's.
 */
public final class Pass {

    private final Ops ops;
    private final ParameterSource source;
    private final Units units;
    private final MemorySegment acts;
    private final long[] actOffset;
    /** The stage's working set shared by its slots' passes (null: every region is in {@link #acts}). */
    private final MemorySegment common;
    /** Whether region i is in {@link #common} (null with it). */
    private final boolean[] inCommon;
    private final DType matmul;
    private final Fp8State fp8;
    private int B;
    private int T;
    private final Holders holders;

    private IntConsumer gradientsDone;

    Pass(Ops ops, ParameterSource source, Units units, MemorySegment acts, long[] actOffset, DType matmul,
         Fp8State fp8) {
        this(ops, source, units, acts, actOffset, matmul, fp8, null, null, new Holders());
    }

    /**
     * A pass whose regions {@code inCommon} marks are at their offset in {@code common} (memory other passes share),
     * the others in {@code acts}; who holds a shared region is recorded in {@code holders}, which those passes share.
     */
    Pass(Ops ops, ParameterSource source, Units units, MemorySegment acts, long[] actOffset, DType matmul,
         Fp8State fp8, MemorySegment common, boolean[] inCommon, Holders holders) {
        if ((common == null) != (inCommon == null)) {
            throw new IllegalArgumentException("common and inCommon come together");
        }
        this.common = common;
        this.inCommon = inCommon;
        this.holders = java.util.Objects.requireNonNull(holders, "holders");
        this.ops = ops;
        this.source = source;
        this.units = units;
        this.acts = acts;
        this.actOffset = actOffset;
        this.matmul = matmul;
        this.fp8 = fp8;
    }

    /** Starts a forward of B sequences of T positions: nothing is held in a shared region for this pass yet. */
    void begin(int B, int T) {
        this.B = B;
        this.T = T;
        releaseHolds();
    }

    /**
     * Forgets what this pass holds in shared regions: its modules' next backward refills them (a pipeline stage that
     * hands its output on, so that its blocks read what they would on one rank, whose later blocks overwrite them).
     */
    void releaseHolds() {
        holders.byKey.values().removeIf(h -> h.pass() == this);
    }

    /**
     * Who holds each shared region: a module of a pass. One per network; a pipeline stage's slots share one when
     * they share the stage's working set.
     */
    static final class Holders {
        private record Held(Pass pass, Object module) {}

        private final java.util.Map<String, Held> byKey = new java.util.HashMap<>();
    }

    /** Sets who is told, during the coming backward, that a unit's gradients are final (null: nobody). */
    void listen(IntConsumer gradientsDone) {
        this.gradientsDone = gradientsDone;
    }

    /** The brackets a {@link UnitScope} calls around a unit's use ({@link Units#NONE} for flat buffers). */
    public Units units() {
        return units;
    }

    /**
     * Tells the backward's listener (the trainer's gradient buckets) that the gradients of what {@code which} names are
     * final: it may start communicating them, but not write them.
     */
    public void gradientsDone(int which) {
        if (gradientsDone != null) {
            gradientsDone.accept(which);
        }
    }

    /** The backend every module computes through. */
    public Ops ops() {
        return ops;
    }

    /** The backend's memory. */
    public DeviceMemory memory() {
        return ops.memory();
    }

    /** Sequences in this call. */
    public int B() {
        return B;
    }

    /** Positions per sequence in this call. */
    public int T() {
        return T;
    }

    /** Positions in this call, B·T. */
    public int rows() {
        return B * T;
    }

    /** The precision the matmuls form their products in (FP32, BF16 or FP16). */
    public DType matmulOperands() {
        return matmul;
    }

    /**
     * The FP8 operand state of linear layer {@code slot} ({@link Builder#fp8Slot}), or null when the network's
     * matmuls are not FP8 (they then take {@link #matmulOperands()}).
     */
    public Fp8Scaling fp8(int slot) {
        return fp8 == null ? null : fp8.linear(slot);
    }

    /**
     * The module whose activations the shared region {@code key} holds now (null: none yet; when another pass's
     * module holds it, an object that is no module).
     */
    public Object holder(String key) {
        Holders.Held h = holders.byKey.get(key);
        return h == null ? null : h.pass() == this ? h.module() : h;
    }

    /** Records that the shared region {@code key} now holds {@code module}'s activations (this pass's). */
    public void hold(String key, Object module) {
        holders.byKey.put(key, new Holders.Held(this, module));
    }

    private MemorySegment base(int region) {
        return inCommon != null && inCommon[region] ? common : acts;
    }

    /** The parameter tensor of {@code ref}. */
    public MemorySegment param(ParamRef ref) {
        return source.param(ref.index());
    }

    /** The gradient of the parameter tensor of {@code ref} (backward adds into it). */
    public MemorySegment grad(ParamRef ref) {
        return source.grad(ref.index());
    }

    /** {@code rows × ref.perRow()} floats of the activation region of {@code ref}. */
    public MemorySegment act(ActRef ref) {
        return base(ref.index()).asSlice(actOffset[ref.index()] * Float.BYTES,
                (long) rows() * ref.perRow() * Float.BYTES);
    }

    /**
     * {@code rows × perRow} floats at the start of the region of {@code ref} (a region declared as wide as the widest
     * of several uses).
     */
    public MemorySegment act(ActRef ref, long perRow) {
        if (perRow > ref.perRow()) {
            throw new IllegalArgumentException(ref + " is declared " + ref.perRow() + " wide, asked for " + perRow);
        }
        return base(ref.index()).asSlice(actOffset[ref.index()] * Float.BYTES, (long) rows() * perRow * Float.BYTES);
    }

    /**
     * The first {@code bytes} of the region of {@code ref}, for a region read as other than fp32 (a 16-bit store):
     * at most this call's {@code rows × perRow} floats.
     */
    public MemorySegment region(ActRef ref, long bytes) {
        long most = (long) rows() * ref.perRow() * Float.BYTES;
        if (bytes < 0 || bytes > most) {
            throw new IllegalArgumentException(ref + " holds " + most + " bytes for " + rows() + " rows, asked for "
                    + bytes);
        }
        return base(ref.index()).asSlice(actOffset[ref.index()] * Float.BYTES, bytes);
    }

    /** {@link #act}, zeroed first (for gradients that backward calls add into). */
    public MemorySegment zeroed(ActRef ref) {
        MemorySegment s = act(ref);
        ops.memory().zero(s);
        return s;
    }
}
