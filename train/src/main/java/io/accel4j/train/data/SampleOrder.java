package io.accel4j.train.data;

import java.util.Arrays;

/**
 * Which sample each training step reads, llm.c's {@code DataLoader} rules ({@code llmc/dataloader.h}) for one file.
 *
 * <p><b>Samples.</b> With R ranks each taking B·T tokens per step, a sample is a global batch of R·B·T tokens: a file
 * of N tokens has {@code S = floor((N − 1) / (R·B·T))} of them per epoch (the −1: a batch reads B·T + 1 tokens, the
 * targets being the inputs shifted by one). At a step that reads sample {@code j}, rank {@code r} reads the B·T + 1
 * tokens starting at token {@code (j·R + r)·B·T} ({@link #tokenOffset}). So within an epoch R ranks at batch size B
 * read, step by step, exactly what one rank at batch size R·B reads, and every token is read once per epoch.
 * (llm.c: {@code shard_num_samples = (ntok·2 − 2) / total_batch_size_bytes}, offset
 * {@code idx·total_batch_size_bytes + local_batch_offset_bytes}.)
 *
 * <p><b>Order.</b> {@link Mode#SEQUENTIAL}: 0, 1, …, S−1, then again from 0. The shuffled modes: each epoch's order is
 * a Fisher–Yates shuffle of the identity, {@code for i = S−1 down to 1: j = nextUint32 mod (i+1) (unsigned); swap},
 * from an {@link Mt19937} that runs on across epochs. llm.c does exactly this: its {@code prepare_intra_shard_indices_},
 * called every time a shard is (re)loaded, so at every epoch, starts from {@code init_identity_permutation} and
 * applies {@code random_permutation} with the loader's one {@code shuffle_rng}, never reseeded — it does not
 * reshuffle the previous epoch's permutation. (Its {@code dataloader_reset} also shuffles the list of shard files
 * first; with a single file that draws no numbers.) Sources: karpathy/llm.c {@code llmc/dataloader.h}
 * ({@code prepare_intra_shard_indices_}, {@code dataloader_reset}, {@code dataloader_advance_}) and
 * {@code llmc/rand.h} ({@code random_permutation}: {@code int j = randint32(state) % (i + 1)}).
 *
 * <p>The two shuffled modes differ only in the seed: {@link Mode#SHUFFLED_LLMC} seeds rank r's generator with
 * {@code seed + r} as llm.c does ({@code manual_seed(&shuffle_rng, 42 + process_rank)}), so each rank visits its
 * slices in its own order; {@link Mode#SHUFFLED} seeds every rank with {@code seed}, so all ranks agree on the global
 * batch of each step and R ranks × B stay equivalent to 1 rank × R·B. With one rank the two are the same, and with
 * seed 42 they are llm.c's train loader.
 */
public final class SampleOrder {

    /** How samples are ordered within an epoch. */
    public enum Mode {
        /** 0, 1, …, S−1 every epoch (llm.c's val loader). */
        SEQUENTIAL,
        /** A fresh shuffle every epoch, one stream seeded with {@code seed} on every rank. */
        SHUFFLED,
        /** A fresh shuffle every epoch, rank r's stream seeded with {@code seed + r}: llm.c's train loader. */
        SHUFFLED_LLMC
    }

    /**
     * Where an order stands: {@code step} samples of epoch {@code epoch} have been handed out (0..S; S: the epoch is
     * done, the next sample starts epoch + 1). {@code rng} is the generator's {@link Mt19937#state()} at the start of
     * the epoch, before its shuffle was drawn (empty for {@link Mode#SEQUENTIAL}): the shuffle is redrawn from it.
     */
    public record Position(long epoch, int step, int[] rng) {

        public Position {
            rng = rng.clone();
        }

        @Override
        public int[] rng() {
            return rng.clone();
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Position p && p.epoch == epoch && p.step == step && Arrays.equals(p.rng, rng);
        }

        @Override
        public int hashCode() {
            return Long.hashCode(epoch) * 31 + step + Arrays.hashCode(rng) * 961;
        }

        @Override
        public String toString() {
            return "Position[epoch=" + epoch + ", step=" + step + (rng.length == 0 ? "" : ", rng=…") + "]";
        }
    }

    private final int samples;
    /** Samples per shard, in the order the shards were given (one entry for a single file). */
    private final int[] shardSamples;
    /** The first global sample of each shard: prefix sums of {@link #shardSamples}. */
    private final int[] shardBase;
    private final Mode mode;
    private final long seed;
    private Mt19937 rng;
    private int[] epochStart = new int[0];
    private int[] perm;
    private long epoch;
    private int step;

    /**
     * The order of {@code samples} (S ≥ 1) samples for {@code rank}, starting at epoch 0.
     *
     * @param seed an unsigned 32-bit seed; llm.c's default is 42
     */
    public SampleOrder(int samples, Mode mode, long seed, int rank) {
        this(new int[] {samples}, mode, seed, rank);
    }

    /**
     * The order of the samples of several shards (files) for {@code rank}: {@code shardSamples[k]} samples in shard k
     * (each ≥ 1), numbered globally shard after shard. Sequential: every sample in that order. Shuffled, as llm.c's
     * loader over a list of shards: each epoch first draws a permutation of the shards, then, shard by shard in that
     * order, a permutation of the shard's samples (all from the one generator, at the epoch's start), and visits the
     * shards one after the other. With one shard this is {@link #SampleOrder(int, Mode, long, int)}'s order exactly
     * (a permutation of one shard draws no numbers).
     */
    public SampleOrder(int[] shardSamples, Mode mode, long seed, int rank) {
        if (shardSamples.length < 1) {
            throw new IllegalArgumentException("at least one shard is needed");
        }
        long total = 0;
        int[] base = new int[shardSamples.length];
        for (int k = 0; k < shardSamples.length; k++) {
            if (shardSamples[k] < 1) {
                throw new IllegalArgumentException(shardSamples.length == 1 ? "samples must be >= 1, got "
                        + shardSamples[k] : "shard " + k + " has " + shardSamples[k] + " samples, must be >= 1");
            }
            base[k] = (int) total;
            total += shardSamples[k];
        }
        if (total > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("the shards hold " + total + " samples, more than an epoch can count");
        }
        int samples = (int) total;
        this.shardSamples = shardSamples.clone();
        this.shardBase = base;
        if (rank < 0) {
            throw new IllegalArgumentException("rank must be >= 0, got " + rank);
        }
        this.samples = samples;
        this.mode = mode;
        this.seed = seed;
        if (mode != Mode.SEQUENTIAL) {
            long s = mode == Mode.SHUFFLED_LLMC ? (seed + rank) & 0xFFFF_FFFFL : seed;
            rng = new Mt19937(s); // checks the seed's range
            startEpoch(0);
        }
    }

    /** S = floor((N − 1) / (R·B·T)): the samples (global batches) per epoch in a file of N tokens. */
    public static long samplesPerEpoch(long tokens, int B, int T, int ranks) {
        long global = Math.multiplyExact(Math.multiplyExact((long) B, T), ranks);
        return tokens < 1 ? 0 : (tokens - 1) / global;
    }

    /** The first token rank {@code rank} of {@code ranks} reads for {@code sample}: {@code (sample·R + rank)·B·T}. */
    public static long tokenOffset(int sample, int B, int T, int rank, int ranks) {
        return ((long) sample * ranks + rank) * B * T;
    }

    /** llm.c's {@code random_permutation}: Fisher–Yates over {@code data[0..n)}, i from n−1 down to 1. */
    public static void randomPermutation(int[] data, int n, Mt19937 rng) {
        for (int i = n - 1; i > 0; i--) {
            int j = (int) (rng.nextUint32() % (i + 1));
            int tmp = data[i];
            data[i] = data[j];
            data[j] = tmp;
        }
    }

    private void startEpoch(long e) {
        epoch = e;
        step = 0;
        if (rng != null) {
            epochStart = rng.state();
            if (perm == null) {
                perm = new int[samples];
            }
            for (int i = 0; i < samples; i++) {
                perm[i] = i;
            }
            if (shardSamples.length == 1) {
                randomPermutation(perm, samples, rng);
            } else {
                int[] shards = new int[shardSamples.length];
                for (int k = 0; k < shards.length; k++) {
                    shards[k] = k;
                }
                randomPermutation(shards, shards.length, rng);
                int p = 0;
                for (int k : shards) {
                    int[] intra = new int[shardSamples[k]];
                    for (int i = 0; i < intra.length; i++) {
                        intra[i] = i;
                    }
                    randomPermutation(intra, intra.length, rng);
                    for (int i : intra) {
                        perm[p++] = shardBase[k] + i;
                    }
                }
            }
        }
    }

    /** The shard global sample {@code g} is in. */
    public int shardOf(int g) {
        int k = java.util.Arrays.binarySearch(shardBase, g);
        return k >= 0 ? k : -k - 2;
    }

    /** Global sample {@code g}'s index within its shard. */
    public int localSample(int g) {
        return g - shardBase[shardOf(g)];
    }

    /** The number of shards. */
    public int shards() {
        return shardSamples.length;
    }

    /** The next sample, starting the next epoch (and drawing its shuffle) when this one is done. */
    public int next() {
        if (step == samples) {
            startEpoch(epoch + 1);
        }
        int i = step++;
        return perm == null ? i : perm[i];
    }

    /** Samples per epoch, S. */
    public int samples() {
        return samples;
    }

    /** The mode. */
    public Mode mode() {
        return mode;
    }

    /** The seed given. */
    public long seed() {
        return seed;
    }

    /** Where the order stands now: the next {@link #next} continues from here. */
    public Position position() {
        return new Position(epoch, step, epochStart);
    }

    /** Continues from {@code p}, a {@link #position()} of an order with the same samples, mode, seed and rank. */
    public void seek(Position p) {
        if (p.epoch() < 0 || p.step() < 0 || p.step() > samples) {
            throw new IllegalArgumentException("position " + p + " is outside an order of " + samples + " samples");
        }
        if (rng == null) {
            if (p.rng.length != 0) {
                throw new IllegalArgumentException("a sequential order has no generator state, the position has one");
            }
        } else {
            rng = Mt19937.fromState(p.rng);
            startEpoch(p.epoch());
        }
        epoch = p.epoch();
        step = p.step();
    }
}
