package io.accel4j.cli.bench;

import io.accel4j.cli.train.Backend;
import io.accel4j.cli.train.PrecisionOptions;
import io.accel4j.core.DType;
import io.accel4j.core.fp8.DelayedScaling;
import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.core.ops.Ops;
import io.accel4j.cpu.FmaProbe;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.Simd;
import io.accel4j.core.memory.DeviceArena;
import io.accel4j.core.memory.DeviceMemory;
import io.accel4j.cuda.Cuda;
import io.accel4j.optim.Bf16AdamW;
import io.accel4j.optim.Bf16StoreAdamW;
import io.accel4j.train.data.Mt19937;
import io.accel4j.train.model.Fp8State;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.model.Gpt2Options;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.profile.ProfileReport;
import io.accel4j.train.profile.ProfilingOps;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/**
 * {@code accel4j bench train}: tokens/s of a whole GPT-2 training step — forward, backward and AdamW over every
 * parameter — as the issue measures it: by default the {@link GptConfig#BENCH} model (L=4, NH=4, C=256, maxT=256,
 * V=50257, Vp=50304) at B=4, T=64, lr 1e-4, AdamW (0.9, 0.999, 1e-8), weight decay 0, GPT-2 initialisation and
 * uniform random tokens from {@code --seed}, a new batch each step; first, throwaway models trained for
 * {@code --warmup-seconds} (3 s: the JIT compiles the kernels), then step 0 (and any further {@code --warmup} steps)
 * untimed, then {@code --steps} steps timed one by one. tokens/s = B·T / median step time. AdamW's moments live in
 * the model's memory; each timed step ends with a 4-byte copy of a parameter back to the host, which waits for the
 * step's work, so that with {@code --device cuda} (one row, the GPU kernels on device 0) the time is the GPU's and
 * not that of queueing it. {@code --model gpt2} is the 124M model (maxT=1024). With {@code --profile}
 * the model runs on a {@link ProfilingOps} and a per-op table of the timed steps follows (the timing wrapper adds two
 * {@code System.nanoTime} calls per op, about 100 ops per step: negligible next to a step).
 */
@Command(name = "train", sortOptions = false,
        description = {
            "Time whole training steps (forward + backward + AdamW) of a GPT-2 model on random tokens and print "
                    + "ms/step and tokens/s per thread count.",
            "Defaults: the 'bench' model (L=4, NH=4, C=256, V=50257), B=4, T=64, lr 1e-4, AdamW (0.9, 0.999, 1e-8), "
                    + "weight decay 0, step 0 untimed, steps 1-40 timed."})
public final class TrainBenchCommand implements Callable<Integer> {

    private static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED;

    @Spec
    CommandSpec spec;

    @Option(names = "--model", paramLabel = "tiny|bench|gpt2", defaultValue = "bench",
            description = "Model preset: bench (L=4, NH=4, C=256, maxT=256, V=50257), tiny (L=2, NH=4, C=64, "
                    + "maxT=64, V=256) or gpt2 (124M: L=12, NH=12, C=768, maxT=1024) (default: ${DEFAULT-VALUE}).")
    String model;

    @Option(names = "--device", paramLabel = "cpu|cuda", defaultValue = "cpu", converter = Backend.Devices.class,
            description = "cpu (a row per --threads) or cuda (one row: the GPU kernels on device 0, in its memory; "
                    + "an error when no GPU is usable) (default: ${DEFAULT-VALUE}).")
    Backend.Device device;

    @Option(names = "--threads", split = ",", paramLabel = "N", defaultValue = "1,2",
            description = "Kernel thread counts, one row each (default: ${DEFAULT-VALUE}).")
    List<Integer> threads;

    @Option(names = "--batch", paramLabel = "B", defaultValue = "4", description = "Sequences per step "
            + "(default: ${DEFAULT-VALUE}).")
    int batch;

    @Option(names = "--seq", paramLabel = "T", defaultValue = "64", description = "Tokens per sequence "
            + "(default: ${DEFAULT-VALUE}).")
    int seq;

    @Option(names = "--steps", paramLabel = "N", defaultValue = "40", description = "Timed steps "
            + "(default: ${DEFAULT-VALUE}).")
    int steps;

    @Option(names = "--warmup", paramLabel = "N", defaultValue = "1", description = "Untimed steps first "
            + "(default: ${DEFAULT-VALUE}: step 0).")
    int warmup;

    @Option(names = "--warmup-seconds", paramLabel = "S", defaultValue = "3", description = "Before each row, "
            + "train a throwaway copy of the model for S seconds, so that the JIT has compiled the kernels before "
            + "the measured run starts (its losses do not depend on it) (default: ${DEFAULT-VALUE}).")
    double warmupSeconds;

    @Option(names = "--lr", paramLabel = "X", defaultValue = "1e-4", description = "AdamW's learning rate "
            + "(default: ${DEFAULT-VALUE}).")
    float lr;

    @Option(names = "--seed", paramLabel = "N", defaultValue = "42", description = "Seed of the initialisation and "
            + "the tokens (default: ${DEFAULT-VALUE}).")
    long seed;

    @Option(names = "--precision", paramLabel = "fp32|bf16|fp16|fp8", defaultValue = "fp32",
            converter = PrecisionOptions.Precisions.class, description = "Matmul operand precision, fp32 accumulation "
            + "(fp16: the rounding only, no loss scaling; fp8: the blocks' linear layers in FP8 with delayed scaling, "
            + "Transformer Engine's defaults, the LM head fp32) (default: ${DEFAULT-VALUE}).")
    DType precision;
    @Option(names = "--activation-storage", paramLabel = "fp32|bf16|fp16", converter = PrecisionOptions.Precisions.class,
            description = "How the activations saved for backward are stored (default: as accel4j train stores them: "
                    + "bf16/fp16 under --precision bf16/fp16, else fp32); to time the storage apart from the operands.")
    DType storage;
    @Option(names = "--grad-storage", paramLabel = "fp32|bf16|fp16", defaultValue = "fp32",
            converter = PrecisionOptions.Precisions.class, description = "How the gradient buffers are stored "
            + "(accel4j train's --grad-storage): 16-bit storage adds a cast of each layer's gradients before and "
            + "after its backward and reads them in fp32 chunks in the update (default: ${DEFAULT-VALUE}).")
    DType gradStorage;
    @Option(names = "--bf16-params", description = "Store the working weights in bf16 (accel4j train's "
            + "--bf16-params: each layer widened into fp32 before its forward and backward; AdamW from fp32 master "
            + "weights writing them with stochastic rounding); needs --precision bf16.")
    boolean bf16Params;
    @Option(names = "--profile", description = "Also print, per thread count, a per-op table of the timed steps: "
            + "calls, total ms, %% of the step, GFLOP/s or GB/s.")
    boolean profile;

    /** One thread count's (or the GPU's) result. */
    record Row(String threads, long medianNanos, long bestNanos, long timedNanos, double tokensPerSecond,
               double firstLoss, double lastLoss) {}

    @Override
    public Integer call() {
        GptConfig config = config();
        boolean gpu = device == Backend.Device.CUDA;
        if (gpu && profile) {
            throw usage("--profile times calls on the host, which return before the GPU's work is done: not with "
                    + "--device cuda");
        }
        Backend.check(device, Cuda::probe);
        List<Integer> rows = gpu ? List.of(1) : threads;
        PrintWriter out = spec.commandLine().getOut();
        out.printf(Locale.ROOT, "training step of %s %s: B=%d, T=%d, AdamW lr %s (0.9, 0.999, 1e-8), weight decay 0;"
                        + " %s matmul operands, %s saved activations, %s gradients%s; %s; %d untimed + %d timed steps%n",
                model, config, batch, seq, lr, PrecisionOptions.Precisions.label(precision),
                PrecisionOptions.Precisions.label(storage()), PrecisionOptions.Precisions.label(gradStorage),
                bf16Params ? ", bf16 working weights (fp32 master)" : "", gpu ? "CUDA" : Simd.describe(), warmup,
                steps);
        FmaProbe.Result peak = gpu ? null : FmaProbe.peak();
        double flopsPerToken = matmulFlopsPerToken(config);
        if (peak != null) {
            out.printf(Locale.ROOT, "FLOP limit: %.1f GFLOP of matmul per step (6 x %,d matmul weights x B*T), peak %s:"
                    + " %,.0f tokens/s per thread%n", flopsPerToken * batch * seq / 1e9, (long) (flopsPerToken / 6),
                    peak.describe(), peak.gflops() * 1e9 / flopsPerToken);
        }
        out.println();
        Table table = new Table(out,
                new String[] {"threads", "median ms", "best ms", "tokens/s", "best tok/s", "of limit", "loss first",
                        "loss last"},
                new int[] {7, 9, 9, 9, 9, 8, 10, 10},
                new boolean[] {true, true, true, true, true, true, true, true});
        table.header();
        StringBuilder profiles = new StringBuilder();
        for (int t : rows) {
            try (Parallel pool = new Parallel(t); Backend backend = Backend.open(device, pool)) {
                Ops ops = backend.ops();
                if (gpu) {
                    out.println("using " + ops.describe());
                    out.flush();
                }
                warmUp(config, ops);
                ProfilingOps prof = profile ? new ProfilingOps(ops) : null;
                Row r = run(config, prof != null ? prof : ops, prof, gpu ? "cuda" : String.valueOf(t), warmup, steps);
                table.row(r.threads(), Table.num(r.medianNanos() / 1e6), Table.num(r.bestNanos() / 1e6),
                        Table.num(r.tokensPerSecond()), Table.num((double) batch * seq * 1e9 / r.bestNanos()),
                        peak == null ? "-" : String.format(Locale.ROOT, "%.0f %%",
                                100 * peak.fraction(r.tokensPerSecond() * flopsPerToken / 1e9, t)),
                        String.format(Locale.ROOT, "%.4f", r.firstLoss()),
                        String.format(Locale.ROOT, "%.4f", r.lastLoss()));
                if (prof != null) {
                    StringWriter sw = new StringWriter();
                    PrintWriter pw = new PrintWriter(sw);
                    pw.printf(Locale.ROOT, "%nprofile, %d thread%s, %d timed steps:%n", t, t == 1 ? "" : "s", steps);
                    ProfileReport.print(pw, prof.entries(), r.timedNanos(), steps);
                    profiles.append(sw);
                }
            }
        }
        out.println();
        out.println("tokens/s = B*T / median step time (best tok/s: / best). of limit = the median's matmul GFLOP/s"
                + " / (threads x the measured peak); attention's and the memory-bound ops' work is not counted. Quick"
                + " figures from one JVM on a possibly busy machine; see docs/PERFORMANCE.md for the rigorous ones.");
        out.print(profiles);
        out.flush();
        return 0;
    }

    /**
     * The matmul flops of one training step per token: forward {@code 2·W}, backward {@code 4·W} for the
     * {@code W = L·12·C² + Vp·C} matmul weights (QKV 3C², projection C², MLP 4C² + 4C², the LM head Vp·C).
     */
    static double matmulFlopsPerToken(GptConfig c) {
        return 6.0 * ((double) c.L() * 12 * c.C() * c.C() + (double) c.Vp() * c.C());
    }

    /**
     * Trains throwaway models (two steps each, a fresh model each time) for {@code --warmup-seconds}: the Vector API
     * kernels run 10–20× slower until C2 has compiled them, and a short timed run would otherwise measure the JIT.
     */
    private void warmUp(GptConfig config, Ops ops) {
        long end = System.nanoTime() + (long) (warmupSeconds * 1e9);
        while (System.nanoTime() < end) {
            run(config, ops, null, "warm-up", 1, 1);
        }
    }

    /** --activation-storage, or what {@code train} stores under --precision. */
    private DType storage() {
        return storage != null ? storage : precision == DType.BF16 || precision == DType.FP16 ? precision
                : DType.FP32;
    }

    /** Builds the model on {@code ops}, trains {@code warmup + steps} steps, times the last {@code steps}. */
    Row run(GptConfig config, Ops ops, ProfilingOps prof, String label, int warmup, int steps) {
        int B = batch, T = seq, BT = B * T;
        int total = warmup + steps;
        AdamWConfig adam = new AdamWConfig(lr, 0.9f, 0.999f, 1e-8f, 0f);
        boolean fp8 = precision == PrecisionOptions.Precisions.FP8;
        try (Arena arena = Arena.ofShared();
             Gpt2 gpt = new Gpt2(config, ops, B, T, Gpt2Options.DEFAULT
                     .withPrecision(fp8 ? DType.FP32 : precision, fp8 ? DelayedScaling.defaults() : null)
                     .withActivationStorage(storage()).withGradientStorage(gradStorage)
                     .withParameterStorage(bf16Params ? DType.BF16 : DType.FP32));
             DeviceArena states = gpt.memory().arena();
             // --bf16-params: the optimizer's master (the initial weights, bf16), m and v
             Bf16StoreAdamW store = bf16Params ? bf16Optimizer(gpt, ops) : null) {
            if (!bf16Params) {
                gpt.initialise(seed);
            }
            DeviceMemory memory = gpt.memory();
            long count = gpt.layout().count();
            // otherwise AdamW's m and v here (zeroed)
            MemorySegment m = store != null ? null : states.allocate(count * Float.BYTES);
            MemorySegment v = store != null ? null : states.allocate(count * Float.BYTES);
            MemorySegment first4 = store != null ? store.state().get("master").asSlice(0, Float.BYTES)
                    : gpt.params().asSlice(0, Float.BYTES);
            MemorySegment done = arena.allocate(Float.BYTES);
            MemorySegment tokens = arena.allocate(((long) total * BT + 1) * Integer.BYTES, 64);
            Mt19937 rng = new Mt19937(seed);
            int V = config.V();
            for (long i = 0; i < (long) total * BT + 1; i++) {
                tokens.setAtIndex(I32, i, (int) (rng.nextUint32() % V));
            }
            long[] times = new long[steps];
            double first = Double.NaN, last = Double.NaN;
            for (int s = 0; s < total; s++) {
                if (s == warmup && prof != null) {
                    prof.reset();
                }
                MemorySegment in = tokens.asSlice((long) s * BT * Integer.BYTES, (long) BT * Integer.BYTES);
                MemorySegment tg = tokens.asSlice(((long) s * BT + 1) * Integer.BYTES, (long) BT * Integer.BYTES);
                long t0 = System.nanoTime();
                gpt.zeroGrad();
                double loss = gpt.forwardBackward(in, tg, B, T, 1f / BT);
                if (store != null) {
                    store.step(s + 1, lr, 1f);
                } else {
                    update(gpt, m, v, adam, s + 1);
                }
                if (fp8) {
                    gpt.fp8().update();
                }
                memory.copyToHost(first4, done); // waits for the step's work
                long dt = System.nanoTime() - t0;
                if (s == 0) {
                    first = loss;
                }
                last = loss;
                if (s >= warmup) {
                    times[s - warmup] = dt;
                }
            }
            long[] sorted = times.clone();
            Arrays.sort(sorted);
            long median = sorted[(steps - 1) / 2];
            return new Row(label, median, sorted[0], Arrays.stream(times).sum(), BT * 1e9 / median, first, last);
        }
    }

    /** {@code gpt} initialised, and AdamW over its bf16 store taking its master from it. */
    private Bf16StoreAdamW bf16Optimizer(Gpt2 gpt, Ops ops) {
        gpt.initialise(seed);
        return new Bf16StoreAdamW(new Bf16AdamW.Spec(0.9f, 0.999f, 1e-8f, 0f, true, seed), ops,
                gpt.network().table(), gpt.halfParameters(), gradStorage == DType.FP32
                ? Bf16StoreAdamW.Gradients.of(gpt.grads()) : Bf16StoreAdamW.Gradients.of(gpt.halfGradients()));
    }

    /** AdamW step {@code t} over the whole model: one call, or one per fp32 chunk of 16-bit gradients. */
    private void update(Gpt2 gpt, MemorySegment m, MemorySegment v, AdamWConfig adam, int t) {
        Ops ops = gpt.ops();
        MemorySegment p = gpt.params();
        if (gradStorage == DType.FP32) {
            ops.adamw(p, gpt.grads(), m, v, 0, gpt.layout().count(), adam, t, 1f);
            return;
        }
        gpt.halfGradients().chunks(0, gpt.layout().count(), false, (o, f, n) -> ops.adamw(
                p.asSlice(o * Float.BYTES, n * Float.BYTES), f, m.asSlice(o * Float.BYTES, n * Float.BYTES),
                v.asSlice(o * Float.BYTES, n * Float.BYTES), o, n, adam, t, 1f));
    }

    private GptConfig config() {
        if (!model.equals("tiny") && !model.equals("bench") && !model.equals("gpt2")) {
            throw usage("--model must be tiny, bench or gpt2, got '" + model + "'");
        }
        GptConfig c = GptConfig.preset(model);
        if (storage == PrecisionOptions.Precisions.FP8) {
            throw usage("--activation-storage must be fp32, bf16 or fp16, got fp8");
        }
        if (gradStorage == PrecisionOptions.Precisions.FP8) {
            throw usage("--grad-storage must be fp32, bf16 or fp16, got fp8");
        }
        if (bf16Params && precision != DType.BF16) {
            throw usage("--bf16-params needs --precision bf16 (this run is "
                    + PrecisionOptions.Precisions.label(precision) + ")");
        }
        if (batch < 1) {
            throw usage("--batch must be >= 1, got " + batch);
        }
        if (seq < 1 || seq > c.maxT()) {
            throw usage("--seq must be in [1, " + c.maxT() + "] (the " + model + " model's max_seq_len), got " + seq);
        }
        if (steps < 1) {
            throw usage("--steps must be >= 1, got " + steps);
        }
        if (warmup < 0) {
            throw usage("--warmup must be >= 0, got " + warmup);
        }
        if (!(warmupSeconds >= 0) || warmupSeconds > 3600) {
            throw usage("--warmup-seconds must be in [0, 3600], got " + warmupSeconds);
        }
        if (!(lr >= 0) || !Float.isFinite(lr)) {
            throw usage("--lr must be finite and >= 0, got " + lr);
        }
        if (seed < 0 || seed > 0xFFFF_FFFFL) {
            throw usage("--seed must be in [0, 4294967295], got " + seed);
        }
        for (int t : threads) {
            if (t < 1) {
                throw usage("--threads must be >= 1, got " + t);
            }
        }
        return c;
    }

    private ParameterException usage(String message) {
        return new ParameterException(spec.commandLine(), message);
    }
}
