package io.accel4j.train.model;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;

/**
 * Where GPT-2's activations and their gradients live in one flat fp32 allocation, sized for {@code maxB·maxT}
 * positions: llm.c's {@code ActivationTensors}, with the attention's (B,NH,T) log-sum-exp in place of its T×T
 * scores. Each tensor owns a region of {@code layers · maxB·maxT · perPosition} floats; a call with B·T ≤ maxB·maxT
 * positions packs its layers at the region's start ({@code layer l} at {@code l·B·T·perPosition}), as llm.c does.
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

    /** The layout for {@code maxB·maxT} positions, its memory allocated (64-byte aligned) in {@code arena}. */
    Activations(GptConfig c, int maxB, int maxT, Arena arena) {
        long C = c.C(), L = c.L();
        perPosition = new long[] {
            C, C, 1, 1, 3 * C, C, c.NH(), C, C, C, 1, 1, 4 * C, 4 * C, C, C, C, 1, 1, c.Vp(), 1,
            C, C, 3 * C, C, 4 * C, 4 * C};
        layers = new long[perPosition.length];
        Arrays.fill(layers, 1);
        for (int t : new int[] {LN1, LN1_MEAN, LN1_RSTD, QKV, ATTY, LSE, ATTPROJ, RESIDUAL2, LN2, LN2_MEAN, LN2_RSTD,
                FCH, FCH_GELU, FCPROJ, RESIDUAL3}) {
            layers[t] = L;
        }
        long positions = Math.multiplyExact((long) maxB, maxT);
        offset = new long[perPosition.length + 1];
        for (int i = 0; i < perPosition.length; i++) {
            long n = Math.multiplyExact(Math.multiplyExact(positions, perPosition[i]), layers[i]);
            // keep every region 64-byte aligned: 16 floats
            offset[i + 1] = Math.addExact(offset[i], (n + 15) / 16 * 16);
        }
        floats = offset[perPosition.length];
        memory = arena.allocate(Math.multiplyExact(floats, (long) Float.BYTES), 64);
    }

    /** Floats of the whole allocation (gradients included). */
    long floats() {
        return floats;
    }

    /** Floats of tensor {@code t}'s region (all layers, maxB·maxT positions, rounded up to 16). */
    long regionFloats(int t) {
        return offset[t + 1] - offset[t];
    }

    /** Layer {@code l}'s slice of tensor {@code t} for {@code bt} positions. */
    MemorySegment slice(int t, int l, long bt) {
        long n = bt * perPosition[t];
        return memory.asSlice((offset[t] + l * n) * Float.BYTES, n * Float.BYTES);
    }

    /** The single-layer tensor {@code t} for {@code bt} positions. */
    MemorySegment slice(int t, long bt) {
        return slice(t, 0, bt);
    }

    /** Gradient tensor {@code t} for {@code bt} positions, zeroed (backward calls add into it). */
    MemorySegment zeroed(int t, long bt) {
        MemorySegment s = slice(t, 0, bt);
        s.fill((byte) 0);
        return s;
    }

    /** The llm.c-style name of tensor {@code t}, for messages and reports. */
    static String name(int t) {
        return NAMES[t];
    }
}
