package io.accel4j.train.model;

import java.util.Locale;

/**
 * Activation checkpointing: which of a layer's activations the forward keeps for backward, and which backward
 * recomputes. Every kernel is deterministic, so a recomputed activation has the bits of the one it replaces: the
 * gradients, and so the losses of the following steps, are identical whatever the choice.
 *
 * <p>The modes: {@link #NONE}, {@link #GELU}, {@link #LAYER} ({@link #values()}, as an enumeration's constants), and
 * {@link #every(int) every:K}, LAYER's per-layer recomputation plus segments of K layers of which only the first
 * layer's input is kept.
 */
public final class Recompute implements Comparable<Recompute> {

    /** Keep every layer's activations, as llm.c's {@code train_gpt2.c} does. */
    public static final Recompute NONE = new Recompute("NONE", 0, 0);

    /**
     * Keep one layer's GELU output ({@code fch_gelu}, (B,T,4C)) instead of L; backward recomputes
     * {@code gelu(fch)} of each layer before its MLP projection's backward (llm.c's {@code recompute=1}). Costs one
     * GELU per layer, saves {@code (L−1)·B·T·4C} floats.
     */
    public static final Recompute GELU = new Recompute("GELU", 1, 0);

    /**
     * Keep only each layer's output on the residual stream; every other per-layer activation (both LayerNorms and
     * their statistics, qkv, the attention output and its log-sum-exp, the MLP's hidden layer) is held for one
     * layer, and backward recomputes layer l's forward from its input before the layer's backward. Costs about one
     * more forward per step (the top layer's activations are still in place after the forward and are not
     * recomputed), saves all but one layer's worth of those activations.
     */
    public static final Recompute LAYER = new Recompute("LAYER", 2, 0);

    private static final Recompute[] VALUES = {NONE, GELU, LAYER};

    private final String name;
    private final int ordinal;
    private final int segment;

    private Recompute(String name, int ordinal, int segment) {
        this.name = name;
        this.ordinal = ordinal;
        this.segment = segment;
    }

    /**
     * {@link #LAYER} with segments of {@code k} ≥ 2 layers (the √L policy: k ≈ √L): of the residual stream only the
     * outputs of every k-th layer (and the last) are kept; the other layers' outputs are held for one segment, and
     * backward, before the top layer of a segment, recomputes the segment's forward from its kept input (then each
     * layer's own activations, as LAYER does). Costs about one more forward of the layers again; keeps
     * {@code ⌊(L−1)/k⌋} of the L − 1 block outputs below the last and holds {@code k − 1} for a segment (GPT-2
     * small, L = 12, k = 3 or 4: 5 instead of 11).
     */
    public static Recompute every(int k) {
        if (k < 2) {
            throw new IllegalArgumentException("every:K needs K >= 2 (every:1 is 'layer'), got " + k);
        }
        return new Recompute("EVERY:" + k, 3, k);
    }

    /** The three modes without segments, in order: NONE, GELU, LAYER. */
    public static Recompute[] values() {
        return VALUES.clone();
    }

    /**
     * {@code none}, {@code gelu}, {@code layer} or {@code every:K}, case-insensitive.
     *
     * @throws IllegalArgumentException naming the modes
     */
    public static Recompute parse(String s) {
        String t = s.strip().toLowerCase(Locale.ROOT);
        for (Recompute r : VALUES) {
            if (r.name.toLowerCase(Locale.ROOT).equals(t)) {
                return r;
            }
        }
        if (t.startsWith("every:")) {
            try {
                return every(Integer.parseInt(t.substring(6)));
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("'" + s + "' is not a recompute mode: every:K needs an integer K");
            }
        }
        throw new IllegalArgumentException("'" + s + "' is not a recompute mode: none, gelu, layer or every:K");
    }

    /** {@code NONE}, {@code GELU}, {@code LAYER} or {@code EVERY:K}. */
    public String name() {
        return name;
    }

    /** 0, 1, 2, or 3 for every:K. */
    public int ordinal() {
        return ordinal;
    }

    /** K of every:K, 0 for the other modes. */
    public int segment() {
        return segment;
    }

    /** Whether each layer's activations but its output are held for one layer and recomputed (LAYER, every:K). */
    public boolean holdsLayers() {
        return ordinal >= 2;
    }

    @Override
    public int compareTo(Recompute o) {
        return ordinal != o.ordinal ? Integer.compare(ordinal, o.ordinal) : Integer.compare(segment, o.segment);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Recompute r && r.ordinal == ordinal && r.segment == segment;
    }

    @Override
    public int hashCode() {
        return ordinal * 31 + segment;
    }

    /** The mode as the command line writes it: {@code none}, {@code gelu}, {@code layer}, {@code every:K}. */
    @Override
    public String toString() {
        return name.toLowerCase(Locale.ROOT);
    }
}
