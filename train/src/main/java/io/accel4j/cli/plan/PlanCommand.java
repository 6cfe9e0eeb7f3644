package io.accel4j.cli.plan;

import io.accel4j.cli.CliException;
import io.accel4j.cli.IoMessages;
import io.accel4j.cli.MemoryCheck;
import io.accel4j.train.checkpoint.LlmcCheckpoint;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.plan.Cluster;
import io.accel4j.train.plan.Layout;
import io.accel4j.train.plan.Planner;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/**
 * {@code accel4j plan}: which data-parallel layout (DDP, ZeRO 1–3, each with every recompute mode) trains a model at
 * a global batch on N devices of a given memory, from the trainer's own accounting
 * ({@link io.accel4j.train.plan.MemoryPlan}); the layouts that fit ranked by estimated step time ({@link Planner}),
 * and the command line of the best ({@link PlanReport}).
 */
@Command(name = "plan", sortOptions = false,
        description = {
            "Plan a training run: the memory per device of DDP and ZeRO 1/2/3 with each recompute mode (the "
                    + "trainer's own accounting: parameters, gradients, AdamW state, ZeRO's working buffers, "
                    + "activations; --bf16, --bf16-grads, --offload and --model-parallel add their layouts), the layouts that fit "
                    + "ranked by estimated step time, and the command to run the best.",
            "The step time is an estimate: FLOPs at --tflops per device plus ring collectives at --bandwidth, not "
                    + "overlapped. Exit 1 if nothing fits: 'does not fit: needs X per device, has Y'."})
public final class PlanCommand implements Callable<Integer> {

    @Spec
    CommandSpec spec;

    @Option(names = "--model", paramLabel = "PRESET|FILE", defaultValue = "gpt2",
            description = "A preset (gpt2, gpt2-medium, gpt2-large, gpt2-xl, bench, tiny, tiny-bpe) or an llm.c "
                    + "checkpoint whose header gives the dimensions (default: ${DEFAULT-VALUE}).")
    String model;

    @Option(names = "--dims", paramLabel = "L,C,NH[,V[,maxT]]", description = "The model's dimensions instead of "
            + "--model: layers, channels, heads, and optionally vocabulary (default 50257) and max_seq_len (default "
            + "1024).")
    String dims;

    @Option(names = "--global-batch", paramLabel = "N", required = true,
            description = "Sequences per optimizer step over all devices (a multiple of --devices).")
    int globalBatch;

    @Option(names = "--seq", paramLabel = "T", description = "Tokens per sequence (default: the model's "
            + "max_seq_len).")
    Integer seq;

    @Option(names = "--devices", paramLabel = "N", defaultValue = "1", description = "Devices (data-parallel "
            + "ranks) (default: ${DEFAULT-VALUE}).")
    int devices;

    @Option(names = "--device-memory", paramLabel = "SIZE", required = true, converter = SizeConverter.class,
            description = "Memory per device: a number with an optional unit k, m, g, t (powers of 1024), e.g. 80g.")
    long deviceMemory;

    @Option(names = "--tflops", paramLabel = "X", description = "Sustained TFLOP/s per device for the estimate "
            + "(default: 100, an H100-class GPU).")
    Double tflops;

    @Option(names = "--bandwidth", paramLabel = "GB/S", description = "Collective bus bandwidth per device in GB/s "
            + "(10^9 bytes/s) for the estimate (default: 100, NVLink-class).")
    Double bandwidth;

    @Option(names = "--device", paramLabel = "cpu|cuda", defaultValue = "cuda", description = "What the devices "
            + "are, for the command line printed: cuda (one process per GPU, mpirun with more than one) or cpu (ranks "
            + "in one process) (default: ${DEFAULT-VALUE}).")
    String device;

    @picocli.CommandLine.Mixin
    PlanStrategies strategies = new PlanStrategies();

    @Option(names = "--json", description = "Print the plan as one JSON object instead of tables.")
    boolean json;

    @Override
    public Integer call() {
        GptConfig config = config();
        int T = seq != null ? seq : config.maxT();
        checkOptions(config, T);
        Cluster cluster = new Cluster(devices, deviceMemory,
                bandwidth != null ? bandwidth * 1e9 : Cluster.DEFAULT_BANDWIDTH,
                tflops != null ? tflops * 1e12 : Cluster.DEFAULT_FLOPS);
        Planner.Result result = strategies.planner().plan(config, globalBatch, T, cluster);
        String modelArg = dims != null ? "<an llm.c model file of these dimensions>" : model;
        PrintWriter out = spec.commandLine().getOut();
        PlanReport report = new PlanReport(config, globalBatch, T, cluster, result, launcher(modelArg),
                tflops == null || bandwidth == null, strategies.assumptions());
        out.print(json ? report.json() : report.table());
        out.flush();
        if (result.best() == null) {
            Layout s = result.smallest();
            throw new CliException("does not fit: needs " + MemoryCheck.size(s.bytesPerDevice()) + " per device, has "
                    + MemoryCheck.size(deviceMemory) + " (the smallest layout: " + s.strategy() + " with --recompute "
                    + s.recompute().name().toLowerCase(java.util.Locale.ROOT) + ", micro-batch " + s.microBatch()
                    + "); try more devices, more memory per device, a shorter --seq or a smaller model");
        }
        return 0;
    }

    /** The start of the command line: how the ranks are launched and the model. */
    private String launcher(String modelArg) {
        boolean cuda = device.equals("cuda");
        String prefix = cuda && devices > 1 ? "mpirun -np " + devices + " bin/accel4j train --device cuda"
                : cuda ? "bin/accel4j train --device cuda"
                : devices > 1 ? "bin/accel4j train --ranks " + devices : "bin/accel4j train";
        return prefix + " --model " + modelArg;
    }

    private GptConfig config() {
        if (dims != null) {
            if (spec.commandLine().getParseResult().hasMatchedOption("--model")) {
                throw usage("give either --model or --dims, not both");
            }
            return parseDims(dims);
        }
        if (GptConfig.presetNames().contains(model)) {
            return GptConfig.preset(model);
        }
        Path file = Path.of(model);
        if (!Files.isRegularFile(file)) {
            throw usage("--model " + model + " is neither a preset (" + String.join(", ", GptConfig.presetNames())
                    + ") nor an existing file");
        }
        try {
            return LlmcCheckpoint.readConfig(file);
        } catch (IOException e) {
            throw new CliException("cannot read the model " + file + ": " + IoMessages.describe(e, file), e);
        }
    }

    private GptConfig parseDims(String s) {
        String[] p = s.split(",", -1);
        if (p.length < 3 || p.length > 5) {
            throw usage("--dims must be L,C,NH[,V[,maxT]], got '" + s + "'");
        }
        int[] v = new int[5];
        v[3] = 50257;
        v[4] = 1024;
        String[] names = {"L", "C", "NH", "V", "maxT"};
        for (int i = 0; i < p.length; i++) {
            try {
                v[i] = Integer.parseInt(p[i].trim());
            } catch (NumberFormatException e) {
                throw usage("--dims: " + names[i] + " must be an integer, got '" + p[i] + "'");
            }
        }
        int vp = (v[3] + 127) / 128 * 128; // llm.c pads the vocabulary to a multiple of 128
        try {
            return new GptConfig(v[4], v[3], vp, v[0], v[2], v[1]);
        } catch (IllegalArgumentException e) {
            throw usage("--dims " + s + ": " + e.getMessage());
        }
    }

    private void checkOptions(GptConfig config, int T) {
        if (!device.equals("cuda") && !device.equals("cpu")) {
            throw usage("--device must be cpu or cuda, got '" + device + "'");
        }
        if (devices < 1) {
            throw usage("--devices must be >= 1, got " + devices);
        }
        if (globalBatch < 1) {
            throw usage("--global-batch must be >= 1, got " + globalBatch);
        }
        if (globalBatch % devices != 0) {
            throw usage("--global-batch " + globalBatch + " is not a multiple of --devices " + devices);
        }
        if (T < 1 || T > config.maxT()) {
            throw usage("--seq must be in [1, " + config.maxT() + "] (the model's max_seq_len), got " + T);
        }
        strategies.check(device.equals("cuda"), this::usage);
        if (tflops != null && !(tflops > 0 && Double.isFinite(tflops))) {
            throw usage("--tflops must be finite and > 0, got " + tflops);
        }
        if (bandwidth != null && !(bandwidth > 0 && Double.isFinite(bandwidth))) {
            throw usage("--bandwidth must be finite and > 0, got " + bandwidth);
        }
    }

    private ParameterException usage(String message) {
        return new ParameterException(spec.commandLine(), message);
    }

    /** Sizes as {@link MemoryCheck#parseBytes}, for picocli. */
    static final class SizeConverter implements picocli.CommandLine.ITypeConverter<Long> {
        @Override
        public Long convert(String s) {
            try {
                long v = MemoryCheck.parseBytes(s);
                if (v < 1) {
                    throw new picocli.CommandLine.TypeConversionException("must be at least 1 byte, got '" + s + "'");
                }
                return v;
            } catch (IllegalArgumentException e) {
                throw new picocli.CommandLine.TypeConversionException(e.getMessage());
            }
        }
    }
}
