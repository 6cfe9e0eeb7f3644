package io.accel4j.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.accel4j.core.Bf16;
import io.accel4j.cuda.bindings.cublas_api_h;
import io.accel4j.cuda.bindings.nccl_h;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** cuBLAS GEMMs against a float64 reference and a one-rank NCCL all-reduce; needs a GPU and the libraries. */
class CublasNcclGpuTest {

    private static final long SEED = 77L;
    /** FP32 compute over K terms of magnitude ≤ 1: relative error ~ K·2⁻²⁴ ≪ 1e-4 for K ≤ 257 (TF32 is off). */
    private static final double FP32_TOLERANCE = 1e-4;
    /** The BF16 inputs are rounded in the test too, so only the FP32 accumulation differs: same bound. */
    private static final double BF16_TOLERANCE = 1e-4;
    private static CudaContext ctx;

    @BeforeAll
    static void open() {
        CudaProbe probe = Cuda.probe();
        assumeTrue(probe.ready(), "no usable GPU: CUDA " + probe.describe());
        ctx = Cuda.open(0);
    }

    @AfterAll
    static void close() {
        if (ctx != null) {
            ctx.close();
        }
    }

    /** Column-major m×n, ld = m, values in [-1, 1) (BF16-exact when {@code bf16}). */
    private static double[] random(SplittableRandom r, int count, boolean bf16) {
        double[] v = new double[count];
        for (int i = 0; i < count; i++) {
            float x = (float) r.nextDouble(-1, 1);
            v[i] = bf16 ? Bf16.toFloat(Bf16.fromFloat(x)) : x;
        }
        return v;
    }

    private static DeviceBuffer upload(Arena arena, double[] v, boolean bf16) {
        MemorySegment host = arena.allocate((long) v.length * (bf16 ? 2 : 4));
        for (int i = 0; i < v.length; i++) {
            if (bf16) {
                host.setAtIndex(ValueLayout.JAVA_SHORT, i, Bf16.fromFloat((float) v[i]));
            } else {
                host.setAtIndex(ValueLayout.JAVA_FLOAT, i, (float) v[i]);
            }
        }
        DeviceBuffer d = ctx.allocate(host.byteSize());
        d.copyFrom(host);
        return d;
    }

    private void checkGemm(boolean bf16, double tolerance) {
        int m = 67;
        int n = 45;
        int k = 257;
        SplittableRandom r = new SplittableRandom(SEED);
        double[] a = random(r, k * m, bf16); // stored k×m (ld k), used transposed: op(A) = Aᵀ is m×k
        double[] b = random(r, k * n, bf16); // k×n, ld k
        int type = bf16 ? cublas_api_h.CUDA_R_16BF : cublas_api_h.CUDA_R_32F;
        try (Arena arena = Arena.ofConfined();
             CublasHandle h = CublasHandle.create(ctx);
             DeviceBuffer da = upload(arena, a, bf16);
             DeviceBuffer db = upload(arena, b, bf16);
             DeviceBuffer dc = ctx.allocate(4L * m * n)) {
            dc.fillInts(Float.floatToRawIntBits(Float.NaN));
            h.setMathMode(cublas_api_h.CUBLAS_PEDANTIC_MATH);
            h.gemm(true, false, m, n, k, 1f, da, type, k, db, type, k, 0f, dc, m);
            ctx.synchronize();
            MemorySegment c = arena.allocate(ValueLayout.JAVA_FLOAT, (long) m * n);
            dc.copyTo(c);
            for (int j = 0; j < n; j++) {
                for (int i = 0; i < m; i++) {
                    double ref = 0;
                    for (int p = 0; p < k; p++) {
                        ref += a[i * k + p] * b[j * k + p];
                    }
                    float got = c.getAtIndex(ValueLayout.JAVA_FLOAT, (long) j * m + i);
                    assertThat((double) got).as("C[%d,%d], seed %d", i, j, SEED)
                            .isCloseTo(ref, org.assertj.core.data.Offset.offset(tolerance * Math.max(1, Math.abs(ref))));
                }
            }
        }
    }

    @Test
    void cublasGemmFp32() {
        assumeTrue(CudaLibraries.cublas().found(), CudaLibraries.cublas().notFoundMessage());
        checkGemm(false, FP32_TOLERANCE);
    }

    @Test
    void cublasGemmBf16InputsFp32Compute() {
        assumeTrue(CudaLibraries.cublas().found(), CudaLibraries.cublas().notFoundMessage());
        checkGemm(true, BF16_TOLERANCE);
    }

    @Test
    void ncclSingleRankAllReduce() {
        assumeTrue(CudaLibraries.nccl().found(), CudaLibraries.nccl().notFoundMessage());
        int n = 1000;
        try (Arena arena = Arena.ofConfined();
             NcclComm comm = NcclComm.initRank(ctx, 1, NcclComm.uniqueId(), 0);
             Stream stream = ctx.createStream();
             DeviceBuffer send = ctx.allocate(4L * n);
             DeviceBuffer recv = ctx.allocate(4L * n)) {
            MemorySegment host = arena.allocate(ValueLayout.JAVA_FLOAT, n);
            for (int i = 0; i < n; i++) {
                host.setAtIndex(ValueLayout.JAVA_FLOAT, i, i * 0.5f);
            }
            send.copyFrom(host);
            recv.fillInts(Float.floatToRawIntBits(Float.NaN));
            comm.allReduce(send, recv, n, nccl_h.ncclFloat32, nccl_h.ncclSum, stream);
            stream.synchronize();
            MemorySegment back = arena.allocate(ValueLayout.JAVA_FLOAT, n);
            recv.copyTo(back);
            assertThat(back.mismatch(host)).isEqualTo(-1);
            assertThat(comm.asyncError()).isEqualTo(nccl_h.ncclSuccess);
        }
    }
}
