package io.accel4j.train.model;

import io.accel4j.core.memory.DeviceArena;
import io.accel4j.core.memory.DeviceMemory;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;

/**
 * Where GPT-2's activations and their gradients live in one flat fp32 allocation, sized for {@code maxB·maxT}
 * positions: llm.c's {@code ActivationTensors}, with the attention's (B,NH,T) log-sum-exp in place of its T×T
 * scores. Each tensor owns a region of {@code layers · maxB·maxT · perPosition} floats; a call with B·T ≤ maxB·maxT
 * positions packs its layers at the region's start ({@code layer l} at {@code l·B·T·perPosition}), as llm.c does.
 *
 * <p>With activation checkpointing ({@link Recompute}) some per-layer tensors are held for one layer only: every
 * layer's slice of such a tensor is the same memory, which the forward overwrites layer by layer and backward
 * refills by recomputation.
 *
 * <p>The gradient tensors ({@code D*}) are one (B,T,·) buffer each, reused by every layer: the residual stream's
 * gradient accumulates in {@link #DRESIDUAL} from the top of the model down (the residual adds pass it through
 * unchanged), and a layer's other gradients are consumed before the layer below needs the buffers.
 */
final class Activations {

    static final int ENCODED = 0, LN1 = 1, LN1_MEAN = 2, LN1_RSTD = 3, QKV = 4, ATTY = 5, LSE = 6, ATTPROJ = 7,
            RESIDUAL2 = 8, LN2 = 9, LN2_MEAN = 10, LN2_RSTD = 11, FCH = 12, FCH_GELU = 13, FCPROJ = 14,
            RESIDUAL3 = 15, LNF = 16, LNF_MEAN = 17, LNF_RSTD = 18, LOGITS = 19, LOSSES = 20,
            DRESIDUAL = 21, DLN = 22, DQKV = 23, DATTY = 24, DFCH = 25, DFCH_GELU = 26;

    private static final String[] NAMES = {
        "encoded", "ln1", "ln1_mean", "ln1_rstd", "qkv", "atty", "att_lse", "attproj", "residual2", "ln2", "ln2_mean",
        "ln2_rstd", "fch", "fch_gelu", "fcproj", "residual3", "lnf", "lnf_mean", "lnf_rstd", "logits", "losses",
        "dresidual", "dln", "dqkv", "datty", "dfch", "dfch_gelu"};

    private final long[] perPosition; // floats per (b,t) position and layer
    private final long[] layers;
    private final long[] offset;      // first float of each region
    private final long floats;
    private final MemorySegment memory;
    private final DeviceMemory device;

    /** The per-layer tensors that {@link Recompute#LAYER} holds for one layer (all but the layer's output). */
    private static final int[] RECOMPUTED_BY_LAYER = {LN1, LN1_MEAN, LN1_RSTD, QKV, ATTY, LSE, ATTPROJ, RESIDUAL2,
        LN2, LN2_MEAN, LN2_RSTD, FCH, FCH_GELU, FCPROJ};

    /**
     * The layout for {@code maxB·maxT} positions keeping what {@code recompute} says, its memory allocated in
     * {@code arena}, one of {@code device}'s.
     */
    Activations(GptConfig c, int maxB, int maxT, Recompute recompute, DeviceMemory device, DeviceArena arena) {
        this.device = device;
        perPosition = perPosition(c);
        layers = layers(c, recompute);
        offset = offsets(perPosition, layers, Math.multiplyExact((long) maxB, maxT));
        floats = offset[perPosition.length];
        memory = arena.allocate(Math.multiplyExact(floats, (long) Float.BYTES));
    }

    /**
     * Floats the layout for {@code maxB·maxT} positions takes, gradients included, without allocating it: what
     * {@link #floats()} of such an {@code Activations} returns.
     */
    static long floats(GptConfig c, int maxB, int maxT, Recompute recompute) {
        long[] off = offsets(perPosition(c), layers(c, recompute), Math.multiplyExact((long) maxB, maxT));
        return off[off.length - 1];
    }

    private static long[] perPosition(GptConfig c) {
        long C = c.C();
        return new long[] {
            C, C, 1, 1, 3 * C, C, c.NH(), C, C, C, 1, 1, 4 * C, 4 * C, C, C, C, 1, 1, c.Vp(), 1,
            C, C, 3 * C, C, 4 * C, 4 * C};
    }

    /** How many layers each tensor holds: L for the per-layer tensors the forward keeps, else 1. */
    private static long[] layers(GptConfig c, Recompute recompute) {
        long[] layers = new long[NAMES.length];
        Arrays.fill(layers, 1);
        for (int t : RECOMPUTED_BY_LAYER) {
            layers[t] = c.L();
        }
        layers[RESIDUAL3] = c.L();
        if (recompute == Recompute.GELU) {
            layers[FCH_GELU] = 1;
        } else if (recompute == Recompute.LAYER) {
            for (int t : RECOMPUTED_BY_LAYER) {
                layers[t] = 1;
            }
        }
        return layers;
    }

    /** The first float of each tensor's region, and the total last; every region rounded up to 64 bytes. */
    private static long[] offsets(long[] perPosition, long[] layers, long positions) {
        long[] offset = new long[perPosition.length + 1];
        for (int i = 0; i < perPosition.length; i++) {
            long n = Math.multiplyExact(Math.multiplyExact(positions, perPosition[i]), layers[i]);
            offset[i + 1] = Math.addExact(offset[i], (n + 15) / 16 * 16);
        }
        return offset;
    }

    /** Floats of the whole allocation (gradients included). */
    long floats() {
        return floats;
    }

    /** Floats of tensor {@code t}'s region (all layers, maxB·maxT positions, rounded up to 16). */
    long regionFloats(int t) {
        return offset[t + 1] - offset[t];
    }

    /**
     * Layer {@code l}'s slice of tensor {@code t} for {@code bt} positions: the same memory for every layer when the
     * tensor is held for one layer only.
     */
    MemorySegment slice(int t, int l, long bt) {
        long n = bt * perPosition[t];
        long layer = layers[t] == 1 ? 0 : l;
        return memory.asSlice((offset[t] + layer * n) * Float.BYTES, n * Float.BYTES);
    }

    /** The single-layer tensor {@code t} for {@code bt} positions. */
    MemorySegment slice(int t, long bt) {
        return slice(t, 0, bt);
    }

    /** Gradient tensor {@code t} for {@code bt} positions, zeroed (backward calls add into it). */
    MemorySegment zeroed(int t, long bt) {
        MemorySegment s = slice(t, 0, bt);
        device.zero(s);
        return s;
    }

    /** The llm.c-style name of tensor {@code t}, for messages and reports. */
    static String name(int t) {
        return NAMES[t];
    }
}
