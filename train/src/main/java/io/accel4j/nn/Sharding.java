package io.accel4j.nn;

import java.lang.foreign.MemorySegment;

/**
 * How a parameter tensor of a tensor-parallel network is split over the T ranks of its group: {@link #REPLICATED}
 * (every rank holds it whole), {@link #rows} (rank r holds rows {@code [r·R/T, (r+1)·R/T)} of each of {@code blocks}
 * stacked blocks of dimension 0 — a fused QKV weight is three blocks, each split by heads), or {@link #COLUMNS} (rank
 * r holds columns {@code [r·K/T, (r+1)·K/T)} of a 2-D tensor). Moves values between a whole tensor and a rank's
 * shard ({@link #extract}, {@link #place}) on the host.
 *
 * @param dim    the split dimension (−1: none)
 * @param blocks the stacked blocks of dimension 0, each split alike
 */
public record Sharding(int dim, int blocks) {

    public static final Sharding REPLICATED = new Sharding(-1, 1);
    public static final Sharding COLUMNS = new Sharding(1, 1);

    /** Rows of {@code blocks} stacked blocks. */
    public static Sharding rows(int blocks) {
        return new Sharding(0, blocks);
    }

    public boolean replicated() {
        return dim < 0;
    }

    /** The whole tensor's shape given a shard's. */
    public long[] whole(long[] shard, int T) {
        long[] d = shard.clone();
        if (dim >= 0) {
            d[dim] *= T;
        }
        return d;
    }

    /** Copies rank {@code r}'s shard (of shape {@code shardDims}) out of the whole tensor {@code whole} (host fp32). */
    public void extract(MemorySegment whole, MemorySegment shard, long[] shardDims, int r, int T) {
        move(whole, shard, shardDims, r, T, true);
    }

    /** Copies rank {@code r}'s shard into its place in the whole tensor. */
    public void place(MemorySegment shard, MemorySegment whole, long[] shardDims, int r, int T) {
        move(whole, shard, shardDims, r, T, false);
    }

    private void move(MemorySegment whole, MemorySegment shard, long[] dims, int r, int T, boolean out) {
        long count = 1;
        for (long d : dims) {
            count *= d;
        }
        long b = Float.BYTES;
        if (dim < 0) {
            copy(whole, 0, shard, 0, count * b, out);
        } else if (dim == 0) {
            long inner = count / dims[0];
            long rowsPerBlock = dims[0] / blocks; // this shard's rows of each block
            for (int k = 0; k < blocks; k++) {
                long wholeRow = k * rowsPerBlock * T + r * rowsPerBlock;
                copy(whole, wholeRow * inner * b, shard, k * rowsPerBlock * inner * b, rowsPerBlock * inner * b, out);
            }
        } else {
            long rows = dims[0], cols = dims[1];
            for (long i = 0; i < rows; i++) {
                copy(whole, (i * cols * T + r * cols) * b, shard, i * cols * b, cols * b, out);
            }
        }
    }

    private static void copy(MemorySegment whole, long wOff, MemorySegment shard, long sOff, long bytes, boolean out) {
        if (out) {
            MemorySegment.copy(whole, wOff, shard, sOff, bytes);
        } else {
            MemorySegment.copy(shard, sOff, whole, wOff, bytes);
        }
    }
}
