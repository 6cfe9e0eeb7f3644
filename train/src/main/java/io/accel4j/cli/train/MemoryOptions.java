package io.accel4j.cli.train;

import io.accel4j.cli.CliException;
import io.accel4j.cli.MemoryCheck;
import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.train.plan.BatchSizeFinder;
import io.accel4j.train.plan.Bf16ParamsPlan;
import io.accel4j.train.plan.MemoryPlan;
import io.accel4j.train.plan.OffloadPlan;
import io.accel4j.train.TrainConfig;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.Recompute;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.function.Function;
import picocli.CommandLine.ITypeConverter;
import picocli.CommandLine.Option;
import picocli.CommandLine.TypeConversionException;

/**
 * {@code train}'s memory options: activation checkpointing, and the batch size found from a memory budget
 * ({@link BatchSizeFinder}); and the refusal of a plan larger than the machine or the GPU ({@link MemoryCheck}).
 */
final class MemoryOptions {

    @Option(names = "--recompute", paramLabel = "none|gelu|layer|every:K", defaultValue = "none",
            converter = RecomputeConverter.class, description = "Activation checkpointing: keep every activation "
            + "(none), recompute each layer's GELU in backward (gelu), keep only each layer's output and recompute "
            + "the rest of the layer (layer), or as layer but keep the output of only every K-th layer and recompute "
            + "each segment of K layers from its input (every:K, K >= 2; K near sqrt(L) keeps the fewest). Same "
            + "losses, less memory (default: ${DEFAULT-VALUE}).")
    Recompute recompute;
    @Option(names = "--find-batch-size", description = "Choose --batch (and with --global-batch, --grad-accum) as "
            + "the largest micro-batch whose parameters, gradients, optimizer state and activations fit "
            + "--memory-budget, confirmed by a trial step.")
    boolean findBatchSize;
    @Option(names = "--memory-budget", paramLabel = "SIZE", converter = ByteSizeConverter.class,
            description = "Bytes per rank for --find-batch-size: a number with an optional unit k, m, g (powers of "
                    + "1024, optional 'iB' or 'B'), e.g. 512m, 1.5g.")
    Long memoryBudget;
    @Option(names = "--global-batch", paramLabel = "N", description = "With --find-batch-size: sequences per "
            + "optimizer step over all ranks; the accumulation steps are chosen to make it up exactly.")
    Integer globalBatch;

    /** Whether the optimizer is offloaded ({@link OffloadOptions}): its state is host memory, not the device's. */
    boolean offloadOptimizer;
    /** Whether the working weights are bf16 ({@link Bf16ParamsOptions}): the plan is {@link Bf16ParamsPlan}'s. */
    boolean bf16Params;

    /** The plan of a rank of this run at micro-batch {@code B}: {@link MemoryPlan}'s, or {@link Bf16ParamsPlan}'s. */
    MemoryPlan plan(GptConfig model, TrainConfig cfg, int B, int ranks) {
        return bf16Params ? Bf16ParamsPlan.of(model, B, cfg.seq(), recompute, cfg.precision().activationStorage(),
                cfg.precision().gradients())
                : MemoryPlan.of(model, B, cfg.seq(), recompute, cfg.zeroStage(), ranks,
                cfg.precision().activationStorage(), cfg.precision().gradients());
    }

    /** Checks the combination; call before anything is written. */
    void check(Function<String, RuntimeException> usage) {
        if (findBatchSize && memoryBudget == null) {
            throw usage.apply("--find-batch-size needs --memory-budget");
        }
        if (!findBatchSize && (memoryBudget != null || globalBatch != null)) {
            throw usage.apply("--memory-budget and --global-batch only apply with --find-batch-size");
        }
    }

    /**
     * With --find-batch-size, {@code cfg} with the batch and accumulation chosen for {@code ranks} ranks, the plan
     * printed to {@code w}; otherwise {@code cfg}.
     */
    TrainConfig choose(TrainConfig cfg, GptConfig model, int ranks, PrintWriter w,
                       Function<String, RuntimeException> usage) {
        if (!findBatchSize) {
            return cfg;
        }
        BatchSizeFinder.Choice c;
        try {
            c = bf16Params ? Bf16ParamsPlan.choose(model, cfg.seq(), recompute, cfg.precision().activationStorage(),
                    cfg.precision().gradients(), memoryBudget, ranks, globalBatch, cfg.gradAccum())
                    : BatchSizeFinder.choose(model, cfg.seq(), recompute, cfg.precision().activationStorage(),
                    cfg.precision().gradients(), cfg.zeroStage(), memoryBudget, ranks,
                    globalBatch, cfg.gradAccum());
        } catch (IllegalArgumentException e) {
            throw usage.apply("--find-batch-size: " + e.getMessage());
        }
        MemoryPlan p = c.plan();
        DType storage = cfg.precision().activationStorage();
        w.printf(Locale.ROOT, "find-batch-size: budget %.1f MiB per rank, recompute %s%s: at most %d sequences of %d "
                        + "tokens fit; using --batch %d --grad-accum %d%n%s%n", memoryBudget / 1048576.0,
                recompute.name().toLowerCase(Locale.ROOT), (storage == DType.FP32 ? ""
                        : ", saved activations in " + storage.name().toLowerCase(Locale.ROOT))
                        + (cfg.precision().gradients() == DType.FP32 ? "" : ", gradients in "
                        + cfg.precision().gradients().name().toLowerCase(Locale.ROOT))
                        + (bf16Params ? ", bf16 working weights" : ""), c.largest(), cfg.seq(),
                c.batch(), c.gradAccum(),
                indent(p.describe()));
        return cfg.toBuilder().batch(c.batch()).gradAccum(c.gradAccum()).build();
    }

    /**
     * With --find-batch-size, the trial step ({@link BatchSizeFinder#trialStep}) on {@code threads} threads: checks
     * that what it allocated is what the plan counted, and prints it.
     */
    void trial(TrainConfig cfg, GptConfig model, int ranks, int threads, PrintWriter w) {
        if (!findBatchSize) {
            return;
        }
        long planned = plan(model, cfg, cfg.batch(), ranks).total();
        long t0 = System.nanoTime();
        long allocated;
        try (Parallel pool = new Parallel(threads)) {
            allocated = bf16Params ? Bf16ParamsPlan.trialStep(model, new CpuOps(pool), cfg.batch(), cfg.seq(),
                    recompute, cfg.precision().activationStorage(), cfg.precision().gradients())
                    : BatchSizeFinder.trialStep(model, new CpuOps(pool), cfg.batch(), cfg.seq(), recompute,
                    cfg.precision().activationStorage(), cfg.precision().gradients(), cfg.zeroStage(), ranks);
        } catch (OutOfMemoryError e) {
            throw new CliException("--find-batch-size: the trial step at --batch " + cfg.batch() + " could not "
                    + "allocate its " + planned + " bytes: lower --memory-budget (" + e.getMessage() + ")", e);
        }
        if (allocated != planned) { // the plan and the allocations have drifted apart: a bug, not a user error
            throw new IllegalStateException("the trial step allocated " + allocated + " bytes, the plan counted "
                    + planned);
        }
        w.printf(Locale.ROOT, "trial step at --batch %d: %.1f MiB allocated, as planned; %.0f ms%n", cfg.batch(),
                allocated / 1048576.0, (System.nanoTime() - t0) / 1e6);
    }

    /**
     * Refuses, with one line, a run whose memory plan ({@link MemoryPlan}: every rank on this machine — in this process,
     * or mpirun's local ranks, which share its memory —, plus the model file read beside the model when one is loaded)
     * is more than this machine can give ({@link MemoryCheck}).
     */
    void checkHost(TrainConfig cfg, GptConfig model, boolean loadsFile, int localRanks, int worldRanks) {
        List<MemoryCheck.Part> parts = planParts(cfg, model, loadsFile, localRanks, worldRanks);
        if (offloadOptimizer) { // the "device" is this machine's memory too
            parts.add(new MemoryCheck.Part("offloaded optimizer (master, gradients, AdamW m, v)", times(
                    (bf16Params ? Bf16ParamsPlan.offloaded(model, cfg.batch(), cfg.seq(), recompute,
                            cfg.precision().activationStorage(), cfg.precision().gradients())
                            : OffloadPlan.of(model, cfg.batch(), cfg.seq(), recompute)).host(), localRanks)));
        }
        MemoryCheck.require("this run" + (localRanks > 1 ? " (" + localRanks + " ranks on this machine)" : "")
                + " at --batch " + cfg.batch() + " --seq " + cfg.seq(), parts, HINT);
    }

    private static final String HINT = "a smaller --batch or --seq, --recompute layer, --find-batch-size "
            + "--memory-budget SIZE, or a smaller model";

    /**
     * With --device cuda: refuses, with one line, a rank whose plan is more than its GPU's memory (the probe's total
     * of device 0; what other processes hold there is not known before the context is made, so this is the bound
     * that can be checked before anything is written).
     */
    static void checkGpu(List<MemoryCheck.Part> parts, TrainConfig cfg, io.accel4j.cuda.CudaProbe.Ready gpu) {
        MemoryCheck.require("each rank at --batch " + cfg.batch() + " --seq " + cfg.seq() + " on the GPU", parts,
                HINT, new MemoryCheck.Available(gpu.totalMemory(), "GPU 0 (" + gpu.deviceName().replace("%", "%%")
                        + ") has %s in all"));
    }

    /** The plan's parts for {@code localRanks} ranks, and the model file read beside the model when one is loaded. */
    List<MemoryCheck.Part> planParts(TrainConfig cfg, GptConfig model, boolean loadsFile, int localRanks,
                                     int worldRanks) {
        List<MemoryCheck.Part> parts = new ArrayList<>();
        try {
            MemoryPlan p = plan(model, cfg, cfg.batch(), worldRanks);
            parts.add(new MemoryCheck.Part("parameters", times(p.parameters(), localRanks)));
            parts.add(new MemoryCheck.Part("gradients", times(p.gradients(), localRanks)));
            parts.add(new MemoryCheck.Part(bf16Params ? "AdamW state (fp32 master, m, v)" : "AdamW state",
                    offloadOptimizer ? 0 : times(p.optimizer(), localRanks)));
            parts.add(new MemoryCheck.Part("ZeRO working buffers", times(p.working(), localRanks)));
            parts.add(new MemoryCheck.Part("activations", times(Math.addExact(p.activations(), p.batch()),
                    localRanks)));
        } catch (ArithmeticException e) {
            parts.add(new MemoryCheck.Part("activations", Long.MAX_VALUE));
        }
        if (loadsFile) {
            parts.add(new MemoryCheck.Part("the model file read", times(model.parameterCount() * Float.BYTES,
                    localRanks)));
        }
        return parts;
    }

    private static long times(long bytes, int n) {
        try {
            return Math.multiplyExact(bytes, n);
        } catch (ArithmeticException e) {
            return Long.MAX_VALUE;
        }
    }

    private static String indent(String lines) {
        return "  " + lines.replace("\n", "\n  ");
    }

    /** Parses {@code 123}, {@code 64k}, {@code 512M}, {@code 1.5g}, {@code 2GiB}, {@code 3gb}: powers of 1024. */
    static long parseBytes(String s) {
        return io.accel4j.cli.MemoryCheck.parseBytes(s);
    }

    /** {@link #parseBytes}, for picocli. */
    static final class ByteSizeConverter implements ITypeConverter<Long> {
        @Override
        public Long convert(String s) {
            try {
                return parseBytes(s);
            } catch (IllegalArgumentException e) {
                throw new TypeConversionException(e.getMessage());
            }
        }
    }

    /** {@code none|gelu|layer|every:K}, case-insensitive ({@link Recompute#parse}). */
    static final class RecomputeConverter implements ITypeConverter<Recompute> {
        @Override
        public Recompute convert(String s) {
            try {
                return Recompute.parse(s);
            } catch (IllegalArgumentException e) {
                throw new TypeConversionException(e.getMessage());
            }
        }
    }
}
