package io.accel4j.train.parallel;

import java.util.Locale;
import java.util.Objects;

/**
 * Bytes of model state (parameters, gradients, optimizer state) each of N data-parallel ranks holds at a ZeRO stage,
 * by the ZeRO paper's accounting (Rajbhandari et al. 2020, §5.1 and figure 1), for Ψ parameters:
 * <pre>
 *  stage 0 (DDP)         P·Ψ   + G·Ψ   + O·Ψ
 *  stage 1 (P_os)        P·Ψ   + G·Ψ   + O·Ψ/N
 *  stage 2 (P_os+g)      P·Ψ   + G·Ψ/N + O·Ψ/N
 *  stage 3 (P_os+g+p)    P·Ψ/N + G·Ψ/N + O·Ψ/N
 * </pre>
 * with bytes per parameter P, G, O of a {@link Precision}: this engine's fp32 training is P = 4, G = 4, O = 8 (AdamW's
 * m and v; no master copy, the parameters are fp32); the paper's mixed precision is P = 2, G = 2, O = K = 12 (fp32
 * master weights, m and v). Ψ/N is the largest shard, ⌈Ψ/N⌉ elements: the shards are
 * {@link io.accel4j.collectives.Chunks}' split, whose lengths differ by at most one. Activations, the communication
 * buffers and temporary buffers are not model states and are not counted (the paper's "residual states").
 *
 * <p>What this CPU trainer actually allocates is {@code MemoryPlan}'s (tested equal to its allocations): these states,
 * up to the rounding of stage 2 and 3's per-unit shards ({@code ≤ L + 1} elements per state), plus the working buffers
 * of the units in use from stage 2.
 *
 * @param stage     the ZeRO stage, 0..3
 * @param ranks     N ≥ 1
 * @param psi       Ψ, the number of parameters
 * @param precision bytes per parameter of each state
 */
public record ZeroMemory(int stage, int ranks, long psi, Precision precision) {

    /** The highest ZeRO stage: 3, parameters sharded too. */
    public static final int MAX_STAGE = 3;

    /** Bytes per parameter of each model state. */
    public enum Precision {
        /** fp32 parameters, fp32 gradients, fp32 AdamW m and v: 4Ψ + 4Ψ + 8Ψ (this engine). */
        FP32(4, 4, 8),
        /** The ZeRO paper's mixed precision: fp16 parameters 2Ψ, fp16 gradients 2Ψ, fp32 master + m + v KΨ, K = 12. */
        MIXED(2, 2, 12);

        /** Bytes per parameter of the parameters, the gradients and the optimizer state (K). */
        public final int param;
        public final int grad;
        public final int optimizer;

        Precision(int param, int grad, int optimizer) {
            this.param = param;
            this.grad = grad;
            this.optimizer = optimizer;
        }
    }

    public ZeroMemory {
        if (stage < 0 || stage > MAX_STAGE) {
            throw new IllegalArgumentException("stage must be 0..3, got " + stage);
        }
        if (ranks < 1) {
            throw new IllegalArgumentException("ranks must be >= 1, got " + ranks);
        }
        if (psi < 0) {
            throw new IllegalArgumentException("psi must be >= 0, got " + psi);
        }
        Objects.requireNonNull(precision, "precision");
    }

    /** This engine's accounting: fp32 states. */
    public static ZeroMemory fp32(int stage, int ranks, long psi) {
        return new ZeroMemory(stage, ranks, psi, Precision.FP32);
    }

    /** Elements of the largest shard, ⌈Ψ/N⌉. */
    public long shard() {
        return (psi + ranks - 1) / ranks;
    }

    /** Bytes of parameters per rank: P·Ψ, or P·Ψ/N at stage 3. */
    public long paramBytes() {
        return precision.param * (stage >= 3 ? shard() : psi);
    }

    /** Bytes of gradients per rank: G·Ψ, or G·Ψ/N from stage 2. */
    public long gradBytes() {
        return precision.grad * (stage >= 2 ? shard() : psi);
    }

    /** Bytes of optimizer state per rank: O·Ψ, or O·Ψ/N from stage 1. */
    public long optimizerBytes() {
        return precision.optimizer * (stage >= 1 ? shard() : psi);
    }

    /** Model-state bytes per rank: the sum of the three. */
    public long totalBytes() {
        return paramBytes() + gradBytes() + optimizerBytes();
    }

    /**
     * One line for a run's start, e.g. {@code ZeRO-2 over 4 ranks (fp32 model states): per rank params 1.9 MiB +
     * gradients 0.5 MiB + AdamW m,v 0.9 MiB = 3.3 MiB (plain DDP: 7.5 MiB)}.
     */
    public String describe() {
        ZeroMemory ddp = new ZeroMemory(0, ranks, psi, precision);
        String s = String.format(Locale.ROOT, "ZeRO-%d over %d rank%s (%s model states): per rank params %s + "
                        + "gradients %s + AdamW m,v %s = %s (plain DDP: %s)", stage, ranks, ranks == 1 ? "" : "s",
                precision.name().toLowerCase(Locale.ROOT), mib(paramBytes()), mib(gradBytes()),
                mib(optimizerBytes()), mib(totalBytes()), mib(ddp.totalBytes()));
        return s;
    }

    /**
     * {@link #describe()} and what the rank allocated for its model states: {@code held} bytes, of which
     * {@code working} are working buffers ({@code MemoryPlan.working()}).
     */
    public String describe(long held, long working) {
        return describe() + "; this rank holds " + mib(held) + (working > 0 ? " (" + mib(working)
                + " of it working buffers for the units in use)" : "");
    }

    private static String mib(long bytes) {
        return String.format(Locale.ROOT, "%.1f MiB", bytes / 1048576.0);
    }
}
