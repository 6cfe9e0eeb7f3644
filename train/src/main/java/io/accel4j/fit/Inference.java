package io.accel4j.fit;

import io.accel4j.nn.Network;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.function.Consumer;
import java.util.function.IntConsumer;

/**
 * A {@link Learner}'s evaluation and prediction on rank 0's network; under ZeRO-3, whose forward gathers the
 * parameters from every rank, every rank held here runs the same forward ({@code everyRank}, one thread each).
 */
final class Inference {

    private final List<RankStep> ranks;
    /** Runs its argument on every rank held here, one thread each; null with one rank here. */
    private final Consumer<IntConsumer> everyRank;
    private final int B;
    private final int T;

    Inference(List<RankStep> ranks, Consumer<IntConsumer> everyRank, int B, int T) {
        this.ranks = ranks;
        this.everyRank = everyRank;
        this.B = B;
        this.T = T;
    }

    /**
     * {@link Learner#evaluate}. With FP8 the forwards cast with the current scales but leave every rank's amax
     * histories as they were (the CLI trainer's validation does the same): training does not depend on when it
     * evaluates, and the replicas' scaling states stay the same.
     */
    double evaluate(DataSource source, int batches) {
        byte[][] fp8 = new byte[ranks.size()][];
        for (int r = 0; r < fp8.length; r++) {
            io.accel4j.train.model.Fp8State s = ranks.get(r).network().fp8();
            fp8[r] = s == null ? null : s.encode();
        }
        try {
            return meanLoss(source, batches);
        } finally {
            for (int r = 0; r < fp8.length; r++) {
                if (fp8[r] != null) {
                    ranks.get(r).network().fp8().restore(fp8[r]); // the casts recorded the data's amaxes: forget them
                }
            }
        }
    }

    private double meanLoss(DataSource source, int batches) {
        Network net = ranks.get(0).network();
        try (Arena a = Arena.ofConfined()) {
            long rows = (long) B * T;
            MemorySegment in = a.allocate(rows * net.inputWidth() * 4, 64), tg = a.allocate(rows * 4, 64);
            double sum = 0;
            for (int i = 0; i < batches; i++) {
                source.next(in, tg);
                sum += forward(in, tg, B, T);
            }
            return sum / batches;
        }
    }

    /**
     * Rank 0's forward of {@code in} (its mean loss with targets {@code tg}, or NaN); under ZeRO-3 each forward gathers
     * the parameters from every rank, so every rank held here runs it on the same input (a collective when the ranks
     * are processes: each calls it).
     */
    private double forward(MemorySegment in, MemorySegment tg, int B, int T) {
        if (ranks.get(0).network().ownsParameters() || everyRank == null) {
            return ranks.get(0).network().forward(in, tg, B, T);
        }
        double[] loss = new double[1];
        try (Arena shared = Arena.ofShared()) { // read by every rank's thread
            MemorySegment sin = shared.allocate(in.byteSize(), 64).copyFrom(in);
            MemorySegment stg = tg == null ? null : shared.allocate(tg.byteSize(), 64).copyFrom(tg);
            everyRank.accept(rank -> {
                double l = ranks.get(rank).network().forward(sin, stg, B, T);
                if (rank == 0) {
                    loss[0] = l;
                }
            });
        }
        return loss[0];
    }

    /** {@link Learner#predict}. */
    int[] predict(MemorySegment inputs, int B, int T) {
        Network net = ranks.get(0).network();
        forward(inputs, null, B, T);
        int rows = B * T, width = net.outputWidth(), n = net.classes();
        int[] best = new int[rows];
        try (Arena a = Arena.ofConfined()) {
            MemorySegment logits = net.memory().readableOnHost(net.logits(), a);
            for (int i = 0; i < rows; i++) {
                float max = Float.NEGATIVE_INFINITY;
                for (int c = 0; c < n; c++) {
                    float v = logits.getAtIndex(ValueLayout.JAVA_FLOAT, (long) i * width + c);
                    if (v > max) {
                        max = v;
                        best[i] = c;
                    }
                }
            }
        }
        return best;
    }
}
