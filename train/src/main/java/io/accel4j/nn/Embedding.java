package io.accel4j.nn;

import java.lang.foreign.MemorySegment;

/**
 * Token plus (optionally) position embedding: {@code out[b,t,:] (B,T,C) = wte[in[b,t], :] + wpe[t, :]}, the input
 * token ids (one int32 per position, in {@code [0, V)}). Without positions the sum takes a zero table instead of
 * {@code wpe}. Backward adds into the rows used (deterministically, whatever the thread count); the input takes no
 * gradient.
 *
 * <p>Parameters: {@code wte (rows, C)} with {@code rows ≥ V} (GPT-2 pads its vocabulary to a multiple of 128 for the
 * tied head), {@code wpe (maxT, C)} when there are positions; weight-decayed only when asked (the default spares
 * embeddings).
 */
public final class Embedding implements Module {

    private final String name;
    private final int V;
    private final int rows;
    private final int C;
    private final int positions;
    private final boolean decays;
    private ParamRef wte;
    private ParamRef wpe;
    private ActRef zeroPositions;
    private ActRef discardPositions;

    /**
     * @param V         vocabulary size (token ids are in [0, V))
     * @param rows      rows of the token table, ≥ V
     * @param C         channels
     * @param positions rows of the position table (the longest sequence), or 0 for none
     * @param decays    whether weight decay applies to the tables
     */
    public Embedding(String name, int V, int rows, int C, int positions, boolean decays) {
        if (V < 1 || rows < V || C < 1 || positions < 0) {
            throw new ShapeException("embedding '" + name + "' needs V >= 1, rows >= V, C >= 1 and positions >= 0, "
                    + "got V=" + V + ", rows=" + rows + ", C=" + C + ", positions=" + positions);
        }
        this.name = name;
        this.V = V;
        this.rows = rows;
        this.C = C;
        this.positions = positions;
        this.decays = decays;
    }

    /** Tokens only: {@code out = wte[in]}. */
    public static Embedding tokens(String name, int V, int C) {
        return new Embedding(name, V, V, C, 0, false);
    }

    /** Tokens plus learned positions for sequences of up to {@code maxT}. */
    public static Embedding tokensAndPositions(String name, int V, int C, int maxT) {
        return new Embedding(name, V, V, C, maxT, false);
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public int build(Builder b, int inWidth) {
        b.expectWidth(inWidth, 1);
        int maxT = positions > 0 ? positions : b.maxT();
        if (b.maxT() > maxT) {
            throw new ShapeException("embedding '" + b.qualified("") + "' has " + positions + " positions, the network "
                    + "is built for sequences of " + b.maxT());
        }
        wte = b.parameter("wte", decays, Init.normal(0.02), rows, C);
        if (positions > 0) {
            wpe = b.parameter("wpe", decays, Init.normal(0.02), positions, C);
        } else {
            zeroPositions = b.activation("zero-positions", C); // never written: the arena hands out zeros
            discardPositions = b.shared("embedding.discarded-dwpe", C);
        }
        return C;
    }

    /** The token table {@code (rows, C)} (a tied LM head reads it). */
    public ParamRef wte() {
        return wte;
    }

    /** The position table, or null. */
    public ParamRef wpe() {
        return wpe;
    }

    /** Vocabulary size. */
    public int vocabulary() {
        return V;
    }

    @Override
    public void forward(Pass p, MemorySegment in, MemorySegment out) {
        MemorySegment pos = wpe != null ? p.param(wpe) : p.act(zeroPositions);
        p.ops().encoderForward(out, in, p.param(wte), pos, p.B(), p.T(), C, V);
    }

    @Override
    public void backward(Pass p, MemorySegment in, MemorySegment out, MemorySegment dout, MemorySegment din) {
        MemorySegment dpos = wpe != null ? p.grad(wpe) : p.act(discardPositions);
        p.ops().encoderBackward(p.grad(wte), dpos, dout, in, p.B(), p.T(), C, V);
    }
}
