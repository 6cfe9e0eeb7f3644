package io.accel4j.kernels;

import io.accel4j.core.DType;
import io.accel4j.core.memory.DeviceArena;
import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.core.ops.LionConfig;
import io.accel4j.core.ops.SgdConfig;
import io.accel4j.cuda.Cuda;
import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.CudaKernel.Dim;
import io.accel4j.cuda.CudaProbe;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.io.Writer;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Consumer;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The GPU check's first phase ({@code scripts/gpu-check.sh run}, {@code modules.tsv}): every PTX module loaded on
 * its own ({@link GpuOps#loadAllModules}: outcome, JIT time, the registers the JIT log reports), then one tiny launch
 * of each through the ops that use it (sizes of 1, zeroed buffers), synchronised, so that a module that does not
 * JIT or a kernel that does not launch is named before any long test or benchmark starts. A row per module is
 * appended and flushed as it is known.
 *
 * <p>{@code ModuleCheck OUT.tsv}. Exit codes: 0 every module loaded and launched, 1 one did not, 3 no usable GPU.
 */
public final class ModuleCheck {

    static final String HEADER = "module\tarch\timage\tload\trc\tjit_ms\tregisters\tlaunch\tlaunch_ms\tdetail";
    private static final Pattern REGISTERS =
            Pattern.compile("[Ff]unction properties for (\\w+)|Used (\\d+) registers");

    private ModuleCheck() {}

    public static void main(String[] args) {
        if (args.length != 1) {
            System.err.println("usage: ModuleCheck OUT.tsv");
            System.exit(2);
        }
        PrintWriter out = new PrintWriter(System.out, true);
        CudaProbe probe = Cuda.probe();
        if (!probe.ready()) {
            out.println("module-check: no GPU: " + probe.describe());
            System.exit(3);
        }
        try (CudaContext ctx = Cuda.open(0)) {
            System.exit(run(ctx, Path.of(args[0]), out));
        }
    }

    /** Loads and launches every module on {@code ctx}, a row each to {@code tsv} and {@code out}; the exit code. */
    static int run(CudaContext ctx, Path tsv, PrintWriter out) {
        int rc = 0;
        try (Writer w = Files.newBufferedWriter(tsv, StandardCharsets.UTF_8); GpuOps gpu = new GpuOps(ctx);
             DeviceArena arena = gpu.memory().arena()) {
            w.write(HEADER + "\n");
            w.flush();
            Map<String, KernelModules.Load> loads = new LinkedHashMap<>();
            gpu.loadAllModules().forEach(l -> loads.put(l.module(), l));
            Map<String, Consumer<MemorySegment>> launches = launches(gpu);
            for (String module : Kernels.MODULES) {
                KernelModules.Load l = loads.get(module);
                String launch = "skipped", detail = "";
                long launchMs = 0;
                Consumer<MemorySegment> tiny = launches.get(module);
                if (!l.ok()) {
                    detail = oneLine(l.log()); // the error and the JIT's log
                } else if (tiny == null) {
                    detail = "no tiny launch on " + l.arch() + " (its kernels need another device or shapes)";
                } else {
                    long t0 = System.nanoTime();
                    try {
                        tiny.accept(arena.allocate(64 * 1024));
                        ctx.synchronize();
                        launch = "ok";
                    } catch (RuntimeException e) {
                        launch = "FAILED";
                        detail = firstLine(e.getMessage());
                    }
                    launchMs = (System.nanoTime() - t0) / 1_000_000;
                }
                if (!l.ok() || launch.equals("FAILED")) {
                    rc = 1;
                }
                String row = String.join("\t", module, l.arch(), l.image(), l.status(), Integer.toString(l.rc()),
                        Long.toString(l.jitMillis()), registers(l.log()), launch, Long.toString(launchMs), detail);
                w.write(row + "\n");
                w.flush();
                out.println("module-check: " + row.replace('\t', ' '));
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return rc;
    }

    /**
     * A tiny launch per module, each through the op (or launcher) that uses it, on a zeroed 64 KiB buffer {@code z}
     * (every pointer argument a slice of it; every size 1). The wgmma module only on compute capability 9.0, and
     * never the TMA forward (it has its own process in the GPU check).
     */
    static Map<String, Consumer<MemorySegment>> launches(GpuOps gpu) {
        AdamWConfig adamw = new AdamWConfig(1e-3f, 0.9f, 0.999f, 1e-8f, 0f);
        Map<String, Consumer<MemorySegment>> m = new LinkedHashMap<>();
        m.put("adamw", z -> gpu.adamw(s(z, 0), s(z, 1), s(z, 2), s(z, 3), 0, 1, adamw, 1, 1f));
        m.put("attention", z -> gpu.attentionForward(s(z, 0), s(z, 4), s(z, 2), 1, 1, 32, 1, DType.FP32));
        m.put("attention_bf16", z -> gpu.attentionBackward(s(z, 0), s(z, 1), s(z, 2), s(z, 3), s(z, 4), 1, 1, 64, 1,
                DType.BF16));
        if (AttentionBf16Gpu.forwardKernelFor(gpu.context().computeCapability())
                == AttentionBf16Gpu.ForwardKernel.WGMMA) {
            m.put("attention_wgmma", z -> gpu.attentionForward(s(z, 0), s(z, 4), s(z, 2), 1, 1, 64, 1, DType.BF16));
        }
        m.put("cast", z -> gpu.castFromFp32(s(z, 0), DType.BF16, s(z, 1), 1));
        m.put("classifier", z -> gpu.classifierForward(s(z, 0), s(z, 1), s(z, 2), 1, 1, 1));
        m.put("encoder", z -> gpu.encoderForward(s(z, 0), s(z, 1), s(z, 2), s(z, 3), 1, 1, 1, 1));
        m.put("gelu", z -> gpu.geluForward(s(z, 0), s(z, 1), 1));
        m.put("layernorm", z -> gpu.layernormForward(s(z, 0), s(z, 1), s(z, 2), s(z, 3), s(z, 4), s(z, 5), 1, 1));
        m.put("lion", z -> gpu.lion(s(z, 0), s(z, 1), s(z, 2), 0, 1, new LionConfig(1e-3f, 0.9f, 0.99f, 0f), 1f));
        m.put("matmul", z -> Kernels.MATMUL_BACKWARD_BIAS.launch(gpu.kernel(Kernels.MATMUL_BACKWARD_BIAS), Dim.of(1),
                LinearGpu.BIAS_BLOCK, 0, null, s(z, 0), s(z, 1), 1, 1));
        m.put("norm", z -> gpu.sumOfSquares(s(z, 0), 1));
        m.put("residual", z -> gpu.residualForward(s(z, 0), s(z, 1), s(z, 2), 1));
        m.put("sgd", z -> gpu.sgd(s(z, 0), s(z, 1), s(z, 2), 0, 1, new SgdConfig(1e-3f, 0.9f, 0f, 0f, false), 1, 1f));
        m.put("ring", z -> Kernels.RING_DIVIDE_F32.launch(gpu.kernel(Kernels.RING_DIVIDE_F32), Dim.of(1),
                Dim.of(GpuLaunch.BLOCK), 0, null, s(z, 0), 1L, 2f));
        return m;
    }

    /** The {@code i}-th 8 KiB slice of the zeroed buffer. */
    private static MemorySegment s(MemorySegment z, int i) {
        return z.asSlice(i * 8192L, 8192);
    }

    /** {@code entry:N,…} from a verbose JIT info log (its "Function properties for" and "Used N registers" lines). */
    static String registers(String log) {
        StringBuilder b = new StringBuilder();
        String entry = null;
        Matcher m = REGISTERS.matcher(log == null ? "" : log);
        while (m.find()) {
            if (m.group(1) != null) {
                entry = m.group(1);
            } else if (entry != null) {
                b.append(b.isEmpty() ? "" : ",").append(entry).append(':').append(m.group(2));
                entry = null;
            }
        }
        return b.isEmpty() ? "-" : b.toString();
    }

    /** The non-blank lines of {@code s} joined by {@code " | "}, at most 400 characters. */
    private static String oneLine(String s) {
        String line = String.join(" | ", (s == null ? "" : s).lines().filter(l -> !l.isBlank()).map(String::strip)
                .toList()).replace('\t', ' ');
        return line.length() > 400 ? line.substring(0, 400) + "…" : line;
    }

    private static String firstLine(String s) {
        String line = s == null ? "" : s.lines().filter(l -> !l.isBlank()).findFirst().orElse("");
        return line.replace('\t', ' ');
    }
}
