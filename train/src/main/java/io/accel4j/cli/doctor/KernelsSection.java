package io.accel4j.cli.doctor;

import io.accel4j.cpu.FmaProbe;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.Simd;
import java.util.List;
import jdk.incubator.vector.VectorShape;

/**
 * What the CPU kernels will use: the vector width and the thread count, and where each came from; and the fp32 peak
 * of one core, measured ({@link FmaProbe}, 0.1–1 s), against which the benchmarks' "of peak" figures are given.
 */
final class KernelsSection implements DoctorSection {

    @Override
    public String title() {
        return "CPU kernels";
    }

    @Override
    public List<Line> lines() {
        return List.of(
                new Line("vector width", vectorWidth()),
                new Line("hardware width", VectorShape.preferredShape().vectorBitSize() + "-bit preferred"
                        + " (force another with -D" + Simd.BITS_PROPERTY + "=128|256|512|scalar)"),
                new Line("threads", threads()),
                new Line("fp32 peak", peak()));
    }

    /** The measured fp32 FMA peak of one core ({@link FmaProbe}), or why it could not be measured. */
    static String peak() {
        try {
            return FmaProbe.peak().describe();
        } catch (LinkageError e) {
            return "unknown: " + DoctorCommand.rootMessage(e);
        }
    }

    /** {@link Simd#describe()}, or why the kernels' width could not be chosen (e.g. a bad property). */
    static String vectorWidth() {
        try {
            return Simd.describe();
        } catch (LinkageError e) {
            return "invalid: " + DoctorCommand.rootMessage(e);
        }
    }

    /** The common pool's size and its origin; a bad property is reported, not thrown. */
    static String threads() {
        String p = System.getProperty(Parallel.THREADS_PROPERTY);
        int n;
        try {
            n = Parallel.defaultThreads();
        } catch (IllegalArgumentException e) {
            return "invalid: " + e.getMessage();
        }
        if (p == null || p.isBlank()) {
            return n + " (one per available processor; set -D" + Parallel.THREADS_PROPERTY + "=N to change)";
        }
        return n + " (from -D" + Parallel.THREADS_PROPERTY + "=" + p.strip() + ")";
    }
}
