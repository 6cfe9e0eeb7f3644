package io.accel4j.train.model;

import io.accel4j.core.fp8.AmaxHistory;
import io.accel4j.core.fp8.DelayedScaling;
import io.accel4j.core.fp8.Fp8Scaling;
import io.accel4j.core.ops.MatmulOps;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Objects;

/**
 * A model's FP8 delayed-scaling state ({@code --precision fp8}): for each of the {@code L} blocks' four linear layers
 * ({@link Linear}) an {@link Fp8Scaling}, i.e. an {@link AmaxHistory} (amax window and scale) per tensor role —
 * input, weight, output gradient — under one {@link DelayedScaling} recipe. The LM head (tied to the token
 * embedding) is not here: it stays in higher precision, as Transformer Engine keeps a model's first and last layers.
 *
 * <p>A step's casts use the scales computed at the end of the step before and record their amaxes; {@link #update}
 * ends the step (every history computes its next scale and moves its window on). With several ranks the caller
 * first takes the maximum of this step's amaxes over the ranks ({@link #stepAmaxes}, {@link #recordStepAmaxes}) so
 * that every rank casts with the same scales, as Transformer Engine reduces amaxes over the data-parallel group.
 *
 * <p>What a step records: every cast of its forwards and backwards — micro-batches and an activation-checkpointing
 * recomputation (same values, same amax) alike; the window keeps their maximum. The trainer's validation forwards
 * cast with the current scales but leave the histories as they were ({@link #encode} before, {@link #restore}
 * after), so training does not depend on when it validates. The first step casts with scale 1 (no history yet, as in
 * Transformer Engine): output gradients below E5M2's smallest subnormal (2⁻¹⁶) flush to zero in that step only.
 *
 * <p>{@link #encode}/{@link #restore} carry the state through a checkpoint, so a resumed run casts with the same
 * scales as an uninterrupted one. Not thread-safe.
 *
 * <p><b>Deferred amaxes.</b> The backend whose FP8 matmuls cast with these histories may keep their amaxes until
 * its {@link MatmulOps#flushAmaxes()} (the GPU does, so that no cast waits for the device). Given that backend,
 * every method here that reads or changes the histories — {@link #update}, {@link #stepAmaxes},
 * {@link #recordStepAmaxes}, {@link #encode}, {@link #restore} — flushes it first: one device→host copy per
 * optimizer step, at its end, and a checkpoint, a rank's amax exchange or a validation's {@code restore} see every
 * cast made before them.
 */
public final class Fp8State {

    /** The linear layers of a block, in forward order. */
    public enum Linear { QKV, ATTPROJ, FC, FCPROJ }

    /** {@link #encode}'s first int. */
    static final int MAGIC = 0x46503853; // "FP8S"
    private static final int ROLES = 3;

    private final DelayedScaling recipe;
    /** Block l's linear layer {@code which} at {@code 4·l + which.ordinal()}; any other model's in its order. */
    private final Fp8Scaling[] linears;
    /** The backend whose casts record into these histories, flushed before they are read; null: none defers. */
    private final MatmulOps ops;

    /**
     * Fresh histories (scale 1, no amax) for every linear layer of {@code L} blocks, cast by a backend that records
     * each amax at the call (the CPU's); {@link #Fp8State(DelayedScaling, int, MatmulOps)} for any backend.
     */
    public Fp8State(DelayedScaling recipe, int L) {
        this(recipe, L, null);
    }

    /**
     * Fresh histories (scale 1, no amax) for every linear layer of {@code L} blocks, cast by {@code ops}' FP8 matmuls:
     * its deferred amaxes are flushed before the histories are read (see the class comment); null for a backend
     * that records at the call.
     */
    public Fp8State(DelayedScaling recipe, int L, MatmulOps ops) {
        this(recipe, ops, Math.multiplyExact(checkL(L), Linear.values().length));
    }

    private static int checkL(int L) {
        if (L < 1) {
            throw new IllegalArgumentException("L must be >= 1, got " + L);
        }
        return L;
    }

    private Fp8State(DelayedScaling recipe, MatmulOps ops, int n) {
        this.recipe = Objects.requireNonNull(recipe, "recipe");
        this.ops = ops;
        linears = new Fp8Scaling[n];
        for (int i = 0; i < n; i++) {
            linears[i] = Fp8Scaling.of(recipe);
        }
    }

    /**
     * Fresh histories for {@code n} (≥ 1) linear layers of any model, in the order it numbers them
     * ({@link #linear(int)}); a model of L GPT-2 blocks numbers its 4L as {@link #linear(int, Linear)} does.
     */
    public static Fp8State forLinears(DelayedScaling recipe, int n, MatmulOps ops) {
        if (n < 1) {
            throw new IllegalArgumentException("an FP8 state needs at least one linear layer, got " + n);
        }
        return new Fp8State(recipe, ops, n);
    }

    /** The recipe every history follows. */
    public DelayedScaling recipe() {
        return recipe;
    }

    /** The blocks covered: the linear layers in fours (0 when their number is not a multiple of 4). */
    public int layers() {
        return linears.length % Linear.values().length == 0 ? linears.length / Linear.values().length : 0;
    }

    /** The linear layers covered. */
    public int linears() {
        return linears.length;
    }

    /** The operand state of linear layer {@code which} of block {@code l}. */
    public Fp8Scaling linear(int l, Linear which) {
        Objects.checkIndex(l, layers());
        return linears[l * Linear.values().length + which.ordinal()];
    }

    /** The operand state of linear layer {@code i} (in the model's numbering). */
    public Fp8Scaling linear(int i) {
        return linears[Objects.checkIndex(i, linears.length)];
    }

    /**
     * Records the amaxes the backend has deferred into their histories ({@link MatmulOps#flushAmaxes()}); the other
     * methods call it where they need to, so a caller only needs it to read a history through {@link #linear}.
     */
    public void flush() {
        if (ops != null) {
            ops.flushAmaxes();
        }
    }

    /**
     * Ends the optimizer step: the deferred amaxes flushed, every history computes the scale of the next step
     * ({@link AmaxHistory#update()}).
     */
    public void update() {
        flush();
        for (Fp8Scaling s : linears) {
            s.update();
        }
    }

    /** Histories in a fixed order: linear layer (block by block), then input, weight, output gradient. */
    private AmaxHistory history(int i) {
        Fp8Scaling s = linears[i / ROLES];
        return switch (i % ROLES) {
            case 0 -> s.input();
            case 1 -> s.weight();
            default -> s.gradOutput();
        };
    }

    /** The number of histories: 3 per linear layer ({@code L · 4 · 3} for GPT-2). */
    public int histories() {
        return linears.length * ROLES;
    }

    /** This step's amax of every history so far, in a fixed order (the element count is {@link #histories()}). */
    public float[] stepAmaxes() {
        flush();
        float[] out = new float[histories()];
        for (int i = 0; i < out.length; i++) {
            float[] w = history(i).amaxes();
            out[i] = w[w.length - 1];
        }
        return out;
    }

    /** Records {@code amaxes} (as {@link #stepAmaxes} orders them, e.g. their maximum over the ranks) into this step. */
    public void recordStepAmaxes(float[] amaxes) {
        if (amaxes.length != histories()) {
            throw new IllegalArgumentException("amaxes holds " + amaxes.length + " values, there are " + histories()
                    + " histories");
        }
        flush();
        for (int i = 0; i < amaxes.length; i++) {
            history(i).record(amaxes[i]);
        }
    }

    /**
     * The state as little-endian bytes: {@code MAGIC, L (the blocks, see layers()), histories, history length, margin, format ordinal,
     * algorithm ordinal} (int32 each), then per history its scale and window (oldest first), fp32.
     */
    public byte[] encode() {
        flush();
        int n = histories(), len = recipe.historyLength();
        ByteBuffer b = ByteBuffer.allocate(7 * Integer.BYTES + n * (1 + len) * Float.BYTES)
                .order(ByteOrder.LITTLE_ENDIAN);
        b.putInt(MAGIC).putInt(layers()).putInt(n).putInt(len).putInt(recipe.margin())
                .putInt(recipe.format().ordinal()).putInt(recipe.algorithm().ordinal());
        for (int i = 0; i < n; i++) {
            AmaxHistory h = history(i);
            b.putFloat(h.scale());
            for (float a : h.amaxes()) {
                b.putFloat(a);
            }
        }
        return b.array();
    }

    /**
     * Puts back a state {@link #encode}d by a run of the same shape and recipe. Amaxes the backend still holds are
     * flushed first, then overwritten: the casts made since the state was encoded leave no trace.
     *
     * @throws IllegalArgumentException naming what differs (layers, history length, margin, format, algorithm) or
     *                                  what is malformed
     */
    public void restore(byte[] state) {
        flush();
        ByteBuffer b = ByteBuffer.wrap(state).order(ByteOrder.LITTLE_ENDIAN);
        try {
            if (b.getInt() != MAGIC) {
                throw new IllegalArgumentException("not an FP8 scaling state (bad magic)");
            }
            expect("blocks", b.getInt(), layers());
            expect("histories", b.getInt(), histories());
            expect("amax history length (--fp8-history)", b.getInt(), recipe.historyLength());
            expect("margin (--fp8-margin)", b.getInt(), recipe.margin());
            expect("format ordinal", b.getInt(), recipe.format().ordinal());
            expect("amax algorithm ordinal", b.getInt(), recipe.algorithm().ordinal());
            float[] window = new float[recipe.historyLength()];
            for (int i = 0; i < histories(); i++) {
                float scale = b.getFloat();
                b.asFloatBuffer().get(window);
                b.position(b.position() + window.length * Float.BYTES);
                history(i).restore(scale, window);
            }
        } catch (BufferUnderflowException e) {
            throw new IllegalArgumentException("the FP8 scaling state is truncated (" + state.length + " bytes)");
        }
        if (b.hasRemaining()) {
            throw new IllegalArgumentException("the FP8 scaling state has " + b.remaining() + " bytes too many");
        }
    }

    private static void expect(String what, int saved, int here) {
        if (saved != here) {
            throw new IllegalArgumentException("the saved FP8 state has " + what + " " + saved + ", this run "
                    + here + ": resume with the same model and FP8 options");
        }
    }
}
