package io.accel4j.nn;

import java.lang.foreign.MemorySegment;

/**
 * {@link Embedding} with its token table split by vocabulary over a tensor group (Megatron-LM): rank r holds rows
 * {@code [r·rows/T, (r+1)·rows/T)} and looks up the tokens that fall in them (the others give zeros); the partial
 * embeddings are all-reduced. The position table is whole on every rank and added once (by rank 0's part); every rank
 * adds the same position gradient, so it stays the same everywhere. A vocab-parallel head ({@link VocabParallelHead})
 * may share the token table.
 *
 * <p>Parameters: {@code wte (rows/T, C)} (this rank's shard), {@code wpe (positions, C)} (whole) when there are
 * positions.
 */
public final class VocabParallelEmbedding implements Module {

    private final String name;
    private final int V;
    private final int rows;
    private final int C;
    private final int positions;
    private final boolean decays;
    private TensorParallel tp;
    private int rowsLocal;
    private ParamRef wte;
    private ParamRef wpe;

    /** As {@link Embedding#Embedding}; {@code rows} (the padded vocabulary) must split evenly over the group. */
    public VocabParallelEmbedding(String name, int V, int rows, int C, int positions, boolean decays) {
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

    @Override
    public String name() {
        return name;
    }

    @Override
    public int build(Builder b, int inWidth) {
        b.expectWidth(inWidth, 1);
        if (positions > 0 && b.maxT() > positions) {
            throw new ShapeException("embedding '" + b.qualified("") + "' has " + positions + " positions, the network "
                    + "is built for sequences of " + b.maxT());
        }
        tp = b.tensor();
        rowsLocal = tp.split(b.qualified(""), "the padded vocabulary Vp", rows, 1);
        wte = b.shardedParameter("wte", decays, Init.normal(0.02), Sharding.rows(1), rowsLocal, C);
        wpe = positions > 0 ? b.parameter("wpe", decays, Init.normal(0.02), positions, C) : null;
        return C;
    }

    /** This rank's shard of the token table {@code (rows/T, C)}. */
    public ParamRef wte() {
        return wte;
    }

    /** The vocabulary. */
    public int vocabulary() {
        return V;
    }

    @Override
    public void forward(Pass p, MemorySegment in, MemorySegment out) {
        MemorySegment pos = wpe != null && tp.rank() == 0 ? p.param(wpe) : null;
        p.ops().encoderForwardShard(out, in, p.param(wte), pos, p.B(), p.T(), C, tp.rank() * rowsLocal, rowsLocal);
        tp.sum(out, (long) p.rows() * C);
    }

    @Override
    public void backward(Pass p, MemorySegment in, MemorySegment out, MemorySegment dout, MemorySegment din) {
        p.ops().encoderBackwardShard(p.grad(wte), wpe == null ? null : p.grad(wpe), dout, in, p.B(), p.T(), C,
                tp.rank() * rowsLocal, rowsLocal);
    }
}
