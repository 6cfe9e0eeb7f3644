package io.accel4j.kernels.bench;

import io.accel4j.core.DType;
import io.accel4j.cuda.CublasLtMatmul;
import io.accel4j.cuda.CudaLibraries;
import io.accel4j.cuda.DeviceBuffer;
import io.accel4j.cuda.bindings.cublas_api_h;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Optional;

/**
 * GEMM throughput: the linear layer's {@code out (M,N) = inp (M,K)·Wᵀ} with W (N,K), row-major (M tokens, K inputs,
 * N outputs), 2·M·N·K FLOP, at 8192³ and at GPT-2 124M's shapes (B·T = 8·1024 tokens, C 768, the vocabulary padded
 * to 50304 as llm.c does). Each {@link Variant} is a way to run it: the engine's path ({@link
 * io.accel4j.kernels.GpuOps#matmulForward} with the operand type it takes) or cuBLASLt called directly with other
 * types, the upper bound the engine's matmuls can reach, with cuBLAS's {@code cublasGemmEx} beside cuBLASLt's BF16 as
 * its baseline ({@link #ratios}); the engine's FP8 GEMM ({@link
 * io.accel4j.kernels.GpuMatmul#fp8}, which uploads its two scales before each product) beside cuBLASLt's. A new
 * variant is one line in {@link #variants()}.
 */
final class GemmCases {

    /** One product of the linear layer: {@code M} tokens, {@code K} → {@code N} features. */
    record Shape(String name, int M, int K, int N) {
        String label() {
            return String.format(Locale.ROOT, "%s %dx%dx%d", name, M, K, N);
        }
    }

    /** The cuBLASLt BF16 GEMM and its cuBLAS baseline, whose ratio is an acceptance figure ({@link #ratios}). */
    static final String CUBLASLT_BF16 = "cuBLASLt bf16", CUBLAS_BF16 = "cuBLAS bf16";
    /** What cuBLASLt's BF16 GEMM must reach of cuBLAS's at every shape. */
    static final double ACCEPTANCE = 0.95;

    static final int GPT2_TOKENS = 8 * 1024;
    static final int GPT2_C = 768;
    static final int GPT2_VP = 50304;

    static final List<Shape> SHAPES = List.of(
            new Shape("square", 8192, 8192, 8192),
            new Shape("qkv", GPT2_TOKENS, GPT2_C, 3 * GPT2_C),
            new Shape("attproj", GPT2_TOKENS, GPT2_C, GPT2_C),
            new Shape("fc", GPT2_TOKENS, GPT2_C, 4 * GPT2_C),
            new Shape("fcproj", GPT2_TOKENS, 4 * GPT2_C, GPT2_C),
            new Shape("lmhead", GPT2_TOKENS, GPT2_C, GPT2_VP));

    /** Sets up one shape: its buffers (fresh random inputs) and the call. */
    @FunctionalInterface
    interface Setup {
        Case.Prepared prepare(BenchDevice d, Shape s);
    }

    record Variant(String name, Ceiling ceiling, Setup setup) {}

    private GemmCases() {}

    /** The variants run, in this order. */
    static List<Variant> variants() {
        return List.of(
                new Variant("GpuOps fp32", Ceiling.FP32, ops(DType.FP32)),
                new Variant("GpuOps bf16", Ceiling.BF16, ops(DType.BF16)),
                new Variant("cuBLASLt tf32", Ceiling.TF32,
                        lt(DType.FP32, DType.FP32, cublas_api_h.CUBLAS_COMPUTE_32F_FAST_TF32, false)),
                new Variant(CUBLAS_BF16, Ceiling.BF16, blas(DType.BF16)),
                new Variant(CUBLASLT_BF16, Ceiling.BF16,
                        lt(DType.BF16, DType.BF16, cublas_api_h.CUBLAS_COMPUTE_32F, false)),
                new Variant("cuBLASLt fp8e4m3", Ceiling.FP8,
                        lt(DType.FP8_E4M3, DType.BF16, cublas_api_h.CUBLAS_COMPUTE_32F, true)),
                new Variant("GpuMatmul fp8e4m3", Ceiling.FP8, fp8(DType.FP8_E4M3)),
                new Variant("GpuMatmul fp8e4m3xe5m2", Ceiling.FP8, fp8(DType.FP8_E5M2)));
    }

    /** Every variant at every shape, shape by shape; a variant whose library is missing is skipped, saying so. */
    static List<Case> cases(BenchDevice d, List<Variant> variants) {
        return cases(d, variants, CudaLibraries.cublas(), CudaLibraries.cublasLt());
    }

    /** {@link #cases(BenchDevice, List)} with the libraries' searches given (for tests). */
    static List<Case> cases(BenchDevice d, List<Variant> variants, CudaLibraries.Search cublas,
                            CudaLibraries.Search cublasLt) {
        List<Case> cases = new ArrayList<>();
        for (Shape s : SHAPES) {
            for (Variant v : variants) {
                CudaLibraries.Search needed = v.name().equals(CUBLAS_BF16) ? cublas : cublasLt;
                double flops = Flops.gemm(s.M(), s.N(), s.K());
                cases.add(needed.found()
                        ? Case.of("gemm", v.name(), s.label(), flops, v.ceiling(), () -> v.setup().prepare(d, s))
                        : new Case("gemm", v.name(), s.label(), flops, v.ceiling(), null, needed.notFoundMessage()));
            }
        }
        return cases;
    }

    /** The engine's matmul: fp32 buffers, {@code operands} as {@link io.accel4j.core.ops.MatmulOps} defines it. */
    static Setup ops(DType operands) {
        return (d, s) -> {
            BenchDevice.Buffers b = d.buffers();
            try {
                MemorySegment inp = BenchDevice.view(b.random(DType.FP32, (long) s.M() * s.K(), -1, 1));
                MemorySegment w = BenchDevice.view(b.random(DType.FP32, (long) s.N() * s.K(), -1, 1));
                MemorySegment out = BenchDevice.view(b.empty(DType.FP32, (long) s.M() * s.N()));
                return Case.Prepared.of(() -> d.ops.matmulForward(out, inp, w, null, s.M(), s.K(), s.N(), operands),
                        b::close);
            } catch (RuntimeException e) {
                b.close();
                throw e;
            }
        };
    }

    /**
     * The engine's FP8 GEMM: E4M3 activations times {@code wType} weights (both K-major), bf16 out, unit scales, no
     * amax (a forward would ask for one: a few bytes more).
     */
    static Setup fp8(DType wType) {
        return (d, s) -> {
            BenchDevice.Buffers b = d.buffers();
            try {
                MemorySegment inp = BenchDevice.view(b.random(DType.FP8_E4M3, (long) s.M() * s.K(), -1, 1));
                MemorySegment w = BenchDevice.view(b.random(wType, (long) s.N() * s.K(), -1, 1));
                MemorySegment out = BenchDevice.view(b.empty(DType.BF16, (long) s.M() * s.N()));
                return Case.Prepared.of(() -> d.ops.gpuMatmul().fp8(out, DType.BF16, false, inp, DType.FP8_E4M3, 1f,
                        w, wType, 1f, null, s.M(), s.N(), s.K()), b::close);
            } catch (RuntimeException e) {
                b.close();
                throw e;
            }
        };
    }

    /**
     * cuBLASLt directly: A, B of {@code ab}, C, D of {@code cd}, as the engine maps the row-major product (column-major
     * {@code outᵀ (N×M) = W (N×K, stored transposed) · inpᵀ}: "TN", which FP8 requires).
     */
    static Setup lt(DType ab, DType cd, int computeType, boolean fastAccum) {
        return (d, s) -> {
            if (d.lt == null) {
                throw new IllegalStateException("cuBLASLt: " + d.ltMissing);
            }
            BenchDevice.Buffers b = d.buffers();
            CublasLtMatmul plan = null;
            try {
                DeviceBuffer w = b.random(ab, (long) s.N() * s.K(), -1, 1);
                DeviceBuffer inp = b.random(ab, (long) s.M() * s.K(), -1, 1);
                DeviceBuffer out = b.empty(cd, (long) s.M() * s.N());
                CublasLtMatmul.Spec spec = CublasLtMatmul.spec(s.N(), s.M(), s.K()).transpose(true, false)
                        .types(cudaType(ab), cudaType(ab), cudaType(cd), cudaType(cd)).compute(computeType)
                        .fastAccum(fastAccum);
                CublasLtMatmul p = CublasLtMatmul.plan(d.lt, spec, d.workspace);
                plan = p;
                long wa = w.address(), xa = inp.address(), oa = out.address();
                return Case.Prepared.of(() -> p.run(null, wa, xa, oa, oa, 1f, 0f), () -> {
                    p.close();
                    b.close();
                });
            } catch (RuntimeException e) {
                if (plan != null) {
                    plan.close();
                }
                b.close();
                throw e;
            }
        };
    }

    /**
     * cuBLAS's {@code cublasGemmEx} on the same product as {@link #lt} ("TN", A and B and C of {@code type}, FP32
     * compute, the default algorithm): the baseline the cuBLASLt GEMM is measured against.
     */
    static Setup blas(DType type) {
        return (d, s) -> {
            if (d.blas == null) {
                throw new IllegalStateException("cuBLAS: " + d.blasMissing);
            }
            BenchDevice.Buffers b = d.buffers();
            try {
                DeviceBuffer w = b.random(type, (long) s.N() * s.K(), -1, 1);
                DeviceBuffer inp = b.random(type, (long) s.M() * s.K(), -1, 1);
                DeviceBuffer out = b.empty(type, (long) s.M() * s.N());
                int t = cudaType(type);
                return Case.Prepared.of(() -> d.blas.gemm(true, false, s.N(), s.M(), s.K(), 1f, w, t, s.K(), inp, t,
                        s.K(), 0f, out, t, s.N()), b::close);
            } catch (RuntimeException e) {
                b.close();
                throw e;
            }
        };
    }

    /** cuBLASLt's BF16 GEMM over cuBLAS's, per shape where both ran (the acceptance figure: ≥ 0.95). */
    static List<Report.Ratio> ratios(List<Result> results) {
        List<Report.Ratio> ratios = new ArrayList<>();
        for (Shape s : SHAPES) {
            Optional<Result> lt = find(results, CUBLASLT_BF16, s.label()), blas = find(results, CUBLAS_BF16, s.label());
            if (lt.isPresent() && blas.isPresent()) {
                ratios.add(new Report.Ratio("gemm " + s.label() + ": " + CUBLASLT_BF16 + " / " + CUBLAS_BF16,
                        lt.get().value() / blas.get().value(), ACCEPTANCE));
            }
        }
        return ratios;
    }

    private static Optional<Result> find(List<Result> results, String kernel, String shape) {
        return results.stream().filter(r -> r.ok() && r.group().equals("gemm") && r.kernel().equals(kernel)
                && r.shape().equals(shape)).findFirst();
    }

    static int cudaType(DType t) {
        return switch (t) {
            case FP32 -> cublas_api_h.CUDA_R_32F;
            case BF16 -> cublas_api_h.CUDA_R_16BF;
            case FP16 -> cublas_api_h.CUDA_R_16F;
            case FP8_E4M3 -> cublas_api_h.CUDA_R_8F_E4M3;
            case FP8_E5M2 -> cublas_api_h.CUDA_R_8F_E5M2;
        };
    }
}
