package io.accel4j.train.model;

/**
 * Activation checkpointing: which of a layer's activations the forward keeps for backward, and which backward
 * recomputes. Every kernel is deterministic, so a recomputed activation has the bits of the one it replaces: the
 * gradients, and so the losses of the following steps, are identical whatever the choice.
 */
public enum Recompute {

    /** Keep every layer's activations, as llm.c's {@code train_gpt2.c} does. */
    NONE,

    /**
     * Keep one layer's GELU output ({@code fch_gelu}, (B,T,4C)) instead of L; backward recomputes
     * {@code gelu(fch)} of each layer before its MLP projection's backward (llm.c's {@code recompute=1}). Costs one
     * GELU per layer, saves {@code (L−1)·B·T·4C} floats.
     */
    GELU,

    /**
     * Keep only each layer's output on the residual stream; every other per-layer activation (both LayerNorms and
     * their statistics, qkv, the attention output and its log-sum-exp, the MLP's hidden layer) is held for one
     * layer, and backward recomputes layer l's forward from its input before the layer's backward. Costs about one
     * more forward per step (the top layer's activations are still in place after the forward and are not
     * recomputed), saves all but one layer's worth of those activations.
     */
    LAYER
}
