package io.accel4j.train.data;

import io.accel4j.fit.DataSource;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * The CLI trainer's data as the Java API's {@link DataSource.Factory}: each rank's source is a {@link DataLoader} over
 * the token shards ({@code train.bin}, or a pattern of llm.c's shards), rank r of N reading its slice of each global
 * batch in the trainer's {@link SampleOrder} (sequential, shuffled, or llm.c's), read ahead by its own threads; the
 * batches llm.c's trainer reads for the same B, T, rank, ranks, order and seed. The factory owns the
 * loaders it opened: {@link #close} stops them all (before the caller closes the shards).
 */
public final class TokenSource implements DataSource.Factory, AutoCloseable {

    private final TokenShards shards;
    private final SampleOrder.Mode order;
    private final long seed;
    private final int threads;
    private final List<DataLoader> opened = new ArrayList<>();

    /**
     * Sources over {@code shards} (the caller closes them after this factory) in {@code order} with {@code seed}
     * (llm.c: 42; unused when sequential), each read ahead by {@code threads} threads.
     *
     * @throws IllegalArgumentException when {@code threads} is below 1
     */
    public TokenSource(TokenShards shards, SampleOrder.Mode order, long seed, int threads) {
        this.shards = Objects.requireNonNull(shards, "shards");
        this.order = Objects.requireNonNull(order, "order");
        if (threads < 1) {
            throw new IllegalArgumentException("a token source reads ahead with at least 1 thread, got " + threads);
        }
        this.seed = seed;
        this.threads = threads;
    }

    @Override
    public synchronized DataSource open(int rank, int ranks, int B, int T) {
        DataLoader loader = new DataLoader(shards, B, T, rank, ranks, order, seed, threads);
        opened.add(loader);
        return new Source(loader);
    }

    /** The loaders opened so far, one per rank, in the order they were opened (for a checkpoint's position). */
    public synchronized List<DataLoader> loaders() {
        return List.copyOf(opened);
    }

    /** Stops every loader this factory opened. */
    @Override
    public synchronized void close() {
        for (DataLoader l : opened) {
            l.close();
        }
        opened.clear();
    }

    /** One rank's batches; {@link #skip} reads and drops them, so a resume sees the same batches. */
    private record Source(DataLoader loader) implements DataSource.Resumable {

        @Override
        public void next(MemorySegment inputs, MemorySegment targets) {
            loader.next(inputs, targets);
        }

        @Override
        public long waitNanos() {
            return loader.waitNanos();
        }

        @Override
        public void skip(long batches) {
            int n = loader.B() * loader.T();
            int[] in = new int[n], tg = new int[n];
            for (long b = 0; b < batches; b++) {
                loader.next(in, tg);
            }
        }
    }
}
