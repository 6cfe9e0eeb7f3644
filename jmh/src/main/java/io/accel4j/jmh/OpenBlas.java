package io.accel4j.jmh;

import static org.bytedeco.openblas.global.openblas_full.CblasNoTrans;
import static org.bytedeco.openblas.global.openblas_full.CblasRowMajor;
import static org.bytedeco.openblas.global.openblas_full.CblasTrans;

import java.lang.foreign.MemorySegment;
import java.nio.ByteOrder;
import org.bytedeco.javacpp.FloatPointer;
import org.bytedeco.openblas.global.openblas_full;

/**
 * The OpenBLAS baseline, through bytedeco's JavaCPP bindings on the benchmarks' own off-heap buffers (no copies).
 *
 * <p>{@code openblas_full} is the binding that exposes {@code openblas_set_num_threads}, {@code
 * openblas_get_corename} and {@code openblas_get_config}; it loads the same {@code libopenblas.so.0} (a
 * DYNAMIC_ARCH build that picks its kernels for the CPU at load time, unless {@code OPENBLAS_CORETYPE} says
 * otherwise) as the smaller bindings.
 */
final class OpenBlas {

    private OpenBlas() {}

    /** Wraps a native segment holding fp32 values, without copying. */
    static FloatPointer floats(MemorySegment seg) {
        return new FloatPointer(seg.asByteBuffer().order(ByteOrder.nativeOrder()).asFloatBuffer());
    }

    /** Sets OpenBLAS's thread count (process-wide). */
    static void setThreads(int threads) {
        openblas_full.openblas_set_num_threads(threads);
    }

    /** {@code C = op(A)·op(B)} (alpha 1, beta 0) in row-major CBLAS, the layout and packed strides of {@code s}. */
    static void sgemm(GemmShape s, FloatPointer a, FloatPointer b, FloatPointer c) {
        openblas_full.cblas_sgemm(CblasRowMajor,
                s.layout().transA() ? CblasTrans : CblasNoTrans,
                s.layout().transB() ? CblasTrans : CblasNoTrans,
                s.M(), s.N(), s.K(), 1f, a, s.lda(), b, s.ldb(), 0f, c, s.ldc());
    }

    /** The kernel set OpenBLAS chose at load, e.g. {@code Zen} or {@code Haswell}. */
    static String corename() {
        return openblas_full.openblas_get_corename().getString().trim();
    }

    /** The build configuration, e.g. {@code OpenBLAS 0.3.31 DYNAMIC_ARCH NO_AFFINITY Zen MAX_THREADS=128}. */
    static String config() {
        return openblas_full.openblas_get_config().getString().trim();
    }

    /**
     * One line for logs: core, configuration, threads, and the environment variables that override the CPU
     * detection ({@code OPENBLAS_CORETYPE}, {@code OPENBLAS_L2_SIZE}).
     */
    static String describe() {
        return "OpenBLAS core=" + corename() + ", threads=" + openblas_full.openblas_get_num_threads()
                + ", config='" + config() + "', OPENBLAS_CORETYPE=" + envOrUnset("OPENBLAS_CORETYPE")
                + ", OPENBLAS_L2_SIZE=" + envOrUnset("OPENBLAS_L2_SIZE");
    }

    private static String envOrUnset(String name) {
        String v = System.getenv(name);
        return v == null ? "(unset)" : v;
    }
}
