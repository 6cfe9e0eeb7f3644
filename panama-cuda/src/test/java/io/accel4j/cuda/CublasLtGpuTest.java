package io.accel4j.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.accel4j.core.Fp8E4M3;
import io.accel4j.cuda.bindings.cublasLt_h;
import io.accel4j.cuda.bindings.cublas_api_h;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** {@link CublasLtMatmul} against a float64 reference; needs a GPU and libcublasLt (skipped otherwise). */
class CublasLtGpuTest {

    private static final long SEED = 4242L;
    /** FP32 compute (no TF32) over K ≤ 257 terms of magnitude ≤ 1: relative error ~ K·2⁻²⁴ ≪ 1e-4. */
    private static final double FP32_TOLERANCE = 1e-4;
    /** FP8 inputs are exact in the reference too; only the FP32 accumulation (K·2⁻²⁴) differs. */
    private static final double FP8_TOLERANCE = 1e-4;
    private static final long WORKSPACE = 32L << 20;
    private static CudaContext ctx;
    private static CublasLtHandle lt;
    private static DeviceBuffer workspace;

    @BeforeAll
    static void open() {
        CudaProbe probe = Cuda.probe();
        assumeTrue(probe.ready(), "no usable GPU: CUDA " + probe.describe());
        assumeTrue(CudaLibraries.cublasLt().found(), CudaLibraries.cublasLt().notFoundMessage());
        ctx = Cuda.open(0);
        lt = CublasLtHandle.create(ctx);
        workspace = ctx.allocate(WORKSPACE);
    }

    @AfterAll
    static void close() {
        if (workspace != null) {
            workspace.close();
        }
        if (lt != null) {
            lt.close();
        }
        if (ctx != null) {
            ctx.close();
        }
    }

    private static float[] random(SplittableRandom r, int n) {
        float[] v = new float[n];
        for (int i = 0; i < n; i++) {
            v[i] = (float) r.nextDouble(-1, 1);
        }
        return v;
    }

    private static DeviceBuffer upload(Arena arena, float[] v) {
        DeviceBuffer d = ctx.allocate(4L * v.length);
        d.copyFrom(arena.allocateFrom(ValueLayout.JAVA_FLOAT, v));
        return d;
    }

    private static float[] download(Arena arena, DeviceBuffer d, int n) {
        MemorySegment host = arena.allocate(ValueLayout.JAVA_FLOAT, n);
        d.copyTo(host);
        return host.toArray(ValueLayout.JAVA_FLOAT);
    }

    private static void assertClose(String what, float[] got, double[] ref, double tol) {
        for (int i = 0; i < ref.length; i++) {
            if (!(Math.abs(got[i] - ref[i]) <= tol * Math.max(1, Math.abs(ref[i])))) {
                throw new AssertionError(what + "[" + i + "]: got " + got[i] + ", reference " + ref[i] + " (seed "
                        + SEED + ")");
            }
        }
    }

    @Test
    void fp32WithBiasEpilogueThenAccumulate() {
        int m = 67, n = 45, k = 257;
        SplittableRandom r = new SplittableRandom(SEED);
        float[] a = random(r, k * m), b = random(r, k * n), bias = random(r, m), prior = random(r, m * n);
        try (Arena arena = Arena.ofConfined();
             DeviceBuffer da = upload(arena, a); DeviceBuffer db = upload(arena, b);
             DeviceBuffer dbias = upload(arena, bias); DeviceBuffer dd = ctx.allocate(4L * m * n);
             DeviceBuffer dacc = upload(arena, prior);
             CublasLtMatmul withBias = CublasLtMatmul.plan(lt, CublasLtMatmul.spec(m, n, k).transpose(true, false)
                     .epilogue(cublasLt_h.CUBLASLT_EPILOGUE_BIAS).bias(dbias.address(), cublas_api_h.CUDA_R_32F),
                     workspace);
             CublasLtMatmul plain = CublasLtMatmul.plan(lt, CublasLtMatmul.spec(m, n, k).transpose(true, false),
                     workspace)) {
            dd.fillInts(Float.floatToRawIntBits(Float.NaN));
            withBias.run(null, da.address(), db.address(), dd.address(), dd.address(), 1f, 0f);
            plain.run(null, da.address(), db.address(), dacc.address(), dacc.address(), 1f, 1f);
            ctx.synchronize();
            double[] ref = new double[m * n], acc = new double[m * n];
            for (int j = 0; j < n; j++) {
                for (int i = 0; i < m; i++) {
                    double s = 0;
                    for (int p = 0; p < k; p++) {
                        s += (double) a[i * k + p] * b[j * k + p];
                    }
                    ref[j * m + i] = s + bias[i];
                    acc[j * m + i] = s + prior[j * m + i];
                }
            }
            assertClose("D = Aᵀ·B + bias", download(arena, dd, m * n), ref, FP32_TOLERANCE);
            assertClose("C += Aᵀ·B", download(arena, dacc, m * n), acc, FP32_TOLERANCE);
            assertThat(lt.version()).isGreaterThanOrEqualTo(120000L);
        }
    }

    @Test
    void fp8E4M3WithScales() {
        assumeTrue(ctx.computeCapability() >= 89, "FP8 matmul needs sm_89 or newer, this is sm_"
                + ctx.computeCapability());
        int m = 64, n = 48, k = 160; // FP8 needs 16-byte aligned sizes, A transposed ("TN")
        float sa = 0.5f, sb = 2f;
        SplittableRandom r = new SplittableRandom(SEED + 1);
        byte[] a = new byte[k * m], b = new byte[k * n];
        for (int i = 0; i < a.length; i++) {
            a[i] = Fp8E4M3.fromFloat((float) r.nextDouble(-8, 8), true);
        }
        for (int i = 0; i < b.length; i++) {
            b[i] = Fp8E4M3.fromFloat((float) r.nextDouble(-8, 8), true);
        }
        try (Arena arena = Arena.ofConfined();
             DeviceBuffer da = ctx.allocate(a.length); DeviceBuffer db = ctx.allocate(b.length);
             DeviceBuffer scales = ctx.allocate(8); DeviceBuffer dd = ctx.allocate(4L * m * n)) {
            da.copyFrom(MemorySegment.ofArray(a));
            db.copyFrom(MemorySegment.ofArray(b));
            scales.copyFrom(arena.allocateFrom(ValueLayout.JAVA_FLOAT, sa, sb));
            dd.fillInts(Float.floatToRawIntBits(Float.NaN));
            int e4m3 = cublas_api_h.CUDA_R_8F_E4M3, f32 = cublas_api_h.CUDA_R_32F;
            try (CublasLtMatmul mm = CublasLtMatmul.plan(lt, CublasLtMatmul.spec(m, n, k).transpose(true, false)
                    .types(e4m3, e4m3, f32, f32).scales(scales.address(), scales.address() + 4, 0), workspace)) {
                mm.run(null, da.address(), db.address(), dd.address(), dd.address(), 1f, 0f);
            }
            ctx.synchronize();
            double[] ref = new double[m * n];
            for (int j = 0; j < n; j++) {
                for (int i = 0; i < m; i++) {
                    double s = 0;
                    for (int p = 0; p < k; p++) {
                        s += (double) Fp8E4M3.toFloat(a[i * k + p]) * Fp8E4M3.toFloat(b[j * k + p]);
                    }
                    ref[j * m + i] = s * sa * sb;
                }
            }
            assertClose("D = sa·sb·Aᵀ·B (e4m3)", download(arena, dd, m * n), ref, FP8_TOLERANCE);
        }
    }

    /**
     * GELU with cuBLASLt's epilogues: GELU_AUX_BIAS writes gelu(Aᵀ·B + bias) to D and the pre-activation to aux;
     * DGELU then multiplies another product by gelu' of that aux. The reference is GPT-2's tanh form; cuBLASLt does
     * not document which form it uses, and the erf form differs from it by < 5e-4 (gelu) and < 2e-3 (gelu'), so the
     * tolerances below admit either while still catching a missing bias, a wrong aux or a wrong epilogue (O(1)).
     */
    @Test
    void geluAuxBiasThenDgelu() {
        int m = 64, n = 45, k = 131; // aux ld = m, a multiple of 8
        SplittableRandom r = new SplittableRandom(SEED + 2);
        float[] a = random(r, k * m), b = random(r, k * n), bias = random(r, m), g = random(r, k * n);
        try (Arena arena = Arena.ofConfined();
             DeviceBuffer da = upload(arena, a); DeviceBuffer db = upload(arena, b);
             DeviceBuffer dg = upload(arena, g); DeviceBuffer dbias = upload(arena, bias);
             DeviceBuffer dd = ctx.allocate(4L * m * n); DeviceBuffer aux = ctx.allocate(4L * m * n);
             DeviceBuffer dgrad = ctx.allocate(4L * m * n);
             CublasLtMatmul fwd = CublasLtMatmul.plan(lt, CublasLtMatmul.spec(m, n, k).transpose(true, false)
                     .epilogue(cublasLt_h.CUBLASLT_EPILOGUE_GELU_AUX_BIAS).bias(dbias.address(),
                             cublas_api_h.CUDA_R_32F).aux(aux.address(), m), workspace);
             CublasLtMatmul bwd = CublasLtMatmul.plan(lt, CublasLtMatmul.spec(m, n, k).transpose(true, false)
                     .epilogue(cublasLt_h.CUBLASLT_EPILOGUE_DGELU).aux(aux.address(), m), workspace)) {
            dd.fillInts(Float.floatToRawIntBits(Float.NaN));
            aux.fillInts(Float.floatToRawIntBits(Float.NaN));
            dgrad.fillInts(Float.floatToRawIntBits(Float.NaN));
            fwd.run(null, da.address(), db.address(), dd.address(), dd.address(), 1f, 0f);
            bwd.run(null, da.address(), dg.address(), dgrad.address(), dgrad.address(), 1f, 0f);
            ctx.synchronize();
            double[] pre = new double[m * n], gelu = new double[m * n], dgelu = new double[m * n];
            for (int j = 0; j < n; j++) {
                for (int i = 0; i < m; i++) {
                    double s = 0, t = 0;
                    for (int p = 0; p < k; p++) {
                        s += (double) a[i * k + p] * b[j * k + p];
                        t += (double) a[i * k + p] * g[j * k + p];
                    }
                    double x = s + bias[i], c = Math.sqrt(2 / Math.PI), u = c * (x + 0.044715 * x * x * x);
                    double th = Math.tanh(u);
                    pre[j * m + i] = x;
                    gelu[j * m + i] = 0.5 * x * (1 + th);
                    dgelu[j * m + i] = t * (0.5 * (1 + th) + 0.5 * x * (1 - th * th) * c * (1 + 3 * 0.044715 * x * x));
                }
            }
            assertClose("aux = Aᵀ·B + bias", download(arena, aux, m * n), pre, FP32_TOLERANCE);
            assertClose("D = gelu(Aᵀ·B + bias)", download(arena, dd, m * n), gelu, 1e-3);
            assertClose("D = (Aᵀ·G)·gelu'(aux)", download(arena, dgrad, m * n), dgelu, 5e-3);
        }
    }

    @Test
    void useAfterCloseIsRejectedAndFailuresNameTheStatus() {
        CublasLtMatmul mm = CublasLtMatmul.plan(lt, CublasLtMatmul.spec(8, 8, 8), workspace);
        mm.close();
        mm.close(); // a second close does nothing
        assertThatThrownBy(() -> mm.run(null, 1, 1, 1, 1, 1f, 0f)).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("is closed");
        assertThatThrownBy(() -> CublasLtMatmul.plan(lt, CublasLtMatmul.spec(8, 8, 8).compute(12345), workspace))
                .isInstanceOf(CudaException.class)
                .satisfies(e -> assertThat(((CudaException) e).errorName()).startsWith("CUBLAS_STATUS_"))
                .hasMessageContaining("cublasLt");
    }
}
