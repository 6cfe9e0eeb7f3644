package io.accel4j.cli.plan;

import io.accel4j.cli.MemoryCheck;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.parallel.ZeroMemory;
import io.accel4j.train.plan.Cluster;
import io.accel4j.train.plan.Layout;
import io.accel4j.train.plan.MemoryPlan;
import io.accel4j.train.plan.Planner;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/** A {@link Planner.Result} as text tables or as one JSON object. */
final class PlanReport {

    private final GptConfig config;
    private final int globalBatch;
    private final int T;
    private final Cluster cluster;
    private final Planner.Result result;
    private final String launch;
    private final boolean assumedRates;
    private final String assumptions;

    PlanReport(GptConfig config, int globalBatch, int T, Cluster cluster, Planner.Result result, String launch,
               boolean assumedRates, String assumptions) {
        this.config = config;
        this.globalBatch = globalBatch;
        this.T = T;
        this.cluster = cluster;
        this.result = result;
        this.launch = launch;
        this.assumedRates = assumedRates;
        this.assumptions = assumptions;
    }

    /** The layouts: those that fit, fastest first, then those that do not, smallest first. */
    private List<Layout> ordered() {
        List<Layout> rows = new ArrayList<>(result.feasible());
        result.all().stream().filter(l -> !result.feasible().contains(l))
                .sorted(java.util.Comparator.comparingLong(Layout::bytesPerDevice)).forEach(rows::add);
        return rows;
    }

    /** The command that runs the best layout, or null. */
    String command() {
        Layout best = result.best();
        if (best == null) {
            return null;
        }
        return launch + " " + String.join(" ", best.trainArgs());
    }

    String table() {
        StringBuilder sb = new StringBuilder();
        long psi = config.parameterCount();
        sb.append(String.format(Locale.ROOT, "model: L=%d, C=%d, NH=%d, V=%d, maxT=%d; %,d parameters (Ψ)%n",
                config.L(), config.C(), config.NH(), config.V(), config.maxT(), psi));
        sb.append(String.format(Locale.ROOT, "run: global batch %d × %d tokens on %d device%s of %s; estimate at "
                        + "%.0f TFLOP/s and %.0f GB/s per device%s%n", globalBatch, T, cluster.devices(),
                cluster.devices() == 1 ? "" : "s", MemoryCheck.size(cluster.memoryBytes()), cluster.flops() / 1e12,
                cluster.bandwidth() / 1e9, assumedRates ? " (assumed where not given: --tflops, --bandwidth)" : ""));
        sb.append(String.format(Locale.ROOT, "%nmodel states per device, the ZeRO paper's accounting (N = %d):%n",
                cluster.devices()));
        sb.append(String.format(Locale.ROOT, "  %-8s %-28s %12s   %-30s %12s%n", "stage", "fp32 (this trainer)", "",
                "mixed precision (paper)", ""));
        String[] fp32 = {"4Ψ + 4Ψ + 8Ψ", "4Ψ + 4Ψ + 8Ψ/N", "4Ψ + 4Ψ/N + 8Ψ/N", "(4Ψ + 4Ψ + 8Ψ)/N"};
        String[] mixed = {"2Ψ + 2Ψ + 12Ψ", "2Ψ + 2Ψ + 12Ψ/N", "2Ψ + 2Ψ/N + 12Ψ/N", "(2Ψ + 2Ψ + 12Ψ)/N"};
        for (int s = 0; s <= ZeroMemory.MAX_STAGE; s++) {
            sb.append(String.format(Locale.ROOT, "  %-8s %-28s %12s   %-30s %12s%n", s == 0 ? "DDP" : "ZeRO-" + s,
                    fp32[s], MemoryCheck.size(ZeroMemory.fp32(s, cluster.devices(), psi).totalBytes()), mixed[s],
                    MemoryCheck.size(new ZeroMemory(s, cluster.devices(), psi, ZeroMemory.Precision.MIXED)
                            .totalBytes())));
        }
        sb.append(String.format(Locale.ROOT, "%nlayouts, per device (the trainer's allocation: MemoryPlan):%n"));
        sb.append(String.format(Locale.ROOT, "  %-11s %-9s %-9s %10s %10s %10s %10s %10s %11s  %-4s %9s %12s%n",
                "layout", "recompute", "B×K", "params", "grads", "AdamW", "working", "activ.", "total", "fits",
                "step s", "tokens/s"));
        for (Layout l : ordered()) {
            MemoryPlan m = l.memory();
            boolean fits = l.bytesPerDevice() <= cluster.memoryBytes();
            double s = l.step().seconds();
            sb.append(String.format(Locale.ROOT, "  %-11s %-9s %-9s %10s %10s %10s %10s %10s %11s  %-4s %9.3g "
                            + "%,12.0f%n",
                    l.strategy(), l.recompute().name().toLowerCase(Locale.ROOT), l.microBatch() + "×"
                            + l.accumulation(), MemoryCheck.size(m.parameters()), MemoryCheck.size(m.gradients()),
                    MemoryCheck.size(m.optimizer()), m.working() == 0 ? "-" : MemoryCheck.size(m.working()),
                    MemoryCheck.size(m.activations()), MemoryCheck.size(m.total()), fits ? "yes" : "no", s,
                    (double) globalBatch * T / s));
        }
        sb.append(String.format(Locale.ROOT, "(B×K: micro-batch × accumulation per rank; step: compute + "
                + "collectives, not overlapped; fp32 storage except the +bf16 rows (--bf16): --precision bf16|fp16 "
                + "store the saved activations in 16 bits, fp8 changes only the matmuls' operands)%n"));
        if (!assumptions.isEmpty()) {
            sb.append("(").append(assumptions).append(")").append(System.lineSeparator());
        }
        String cmd = command();
        if (cmd != null) {
            sb.append(String.format(Locale.ROOT, "%nbest: %s, %s per device, about %.3g s a step%n  %s%n",
                    describe(result.best()), MemoryCheck.size(result.best().bytesPerDevice()),
                    result.best().step().seconds(), cmd));
        }
        return sb.toString();
    }

    private static String describe(Layout l) {
        return l.strategy() + " with --recompute " + l.recompute().name().toLowerCase(Locale.ROOT) + ", micro-batch "
                + l.microBatch() + " × " + l.accumulation();
    }

    String json() {
        StringBuilder sb = new StringBuilder("{");
        sb.append("\"model\":{\"L\":").append(config.L()).append(",\"C\":").append(config.C()).append(",\"NH\":")
                .append(config.NH()).append(",\"V\":").append(config.V()).append(",\"maxT\":").append(config.maxT())
                .append(",\"parameters\":").append(config.parameterCount()).append("},");
        sb.append("\"globalBatch\":").append(globalBatch).append(",\"seq\":").append(T).append(",\"devices\":")
                .append(cluster.devices()).append(",\"deviceMemoryBytes\":").append(cluster.memoryBytes())
                .append(",\"flopsPerDevice\":").append(num(cluster.flops())).append(",\"bandwidthBytesPerS\":")
                .append(num(cluster.bandwidth())).append(',');
        sb.append("\"zeroModelStates\":[");
        for (int s = 0; s <= ZeroMemory.MAX_STAGE; s++) {
            long psi = config.parameterCount();
            sb.append(s > 0 ? "," : "").append("{\"stage\":").append(s).append(",\"fp32Bytes\":")
                    .append(ZeroMemory.fp32(s, cluster.devices(), psi).totalBytes()).append(",\"mixedBytes\":")
                    .append(new ZeroMemory(s, cluster.devices(), psi, ZeroMemory.Precision.MIXED).totalBytes())
                    .append('}');
        }
        sb.append("],\"layouts\":[");
        List<Layout> rows = ordered();
        for (int i = 0; i < rows.size(); i++) {
            Layout l = rows.get(i);
            MemoryPlan m = l.memory();
            sb.append(i > 0 ? "," : "").append("{\"strategy\":\"").append(l.strategy()).append("\",\"zero\":")
                    .append(l.zeroStage()).append(",\"recompute\":\"")
                    .append(l.recompute().name().toLowerCase(Locale.ROOT)).append("\",\"dataParallel\":")
                    .append(l.dataParallel()).append(",\"tensorParallel\":").append(l.tensorParallel())
                    .append(",\"pipelineStages\":").append(l.pipelineStages()).append(",\"microBatch\":")
                    .append(l.microBatch()).append(",\"accumulation\":").append(l.accumulation())
                    .append(",\"bytes\":{\"parameters\":").append(m.parameters()).append(",\"gradients\":")
                    .append(m.gradients()).append(",\"optimizer\":").append(m.optimizer()).append(",\"working\":")
                    .append(m.working()).append(",\"activations\":").append(m.activations()).append(",\"batch\":")
                    .append(m.batch()).append(",\"total\":").append(m.total()).append("},\"fits\":")
                    .append(l.bytesPerDevice() <= cluster.memoryBytes()).append(",\"stepSeconds\":")
                    .append(num(l.step().seconds())).append(",\"computeSeconds\":")
                    .append(num(l.step().computeSeconds())).append(",\"commSeconds\":")
                    .append(num(l.step().commSeconds())).append(",\"trainArgs\":[");
            for (int a = 0; a < l.trainArgs().size(); a++) {
                sb.append(a > 0 ? "," : "").append('"').append(l.trainArgs().get(a)).append('"');
            }
            sb.append("]}");
        }
        sb.append("],\"assumptions\":\"").append(assumptions).append('"');
        sb.append(",\"best\":");
        String cmd = command();
        sb.append(cmd == null ? "null" : "\"" + cmd.replace("\\", "\\\\").replace("\"", "\\\"") + "\"");
        if (cmd == null) {
            sb.append(",\"needsBytesPerDevice\":").append(result.smallest().bytesPerDevice());
        }
        return sb.append("}").append(System.lineSeparator()).toString();
    }

    private static String num(double x) {
        return String.format(Locale.ROOT, "%.6g", x);
    }
}
