package io.accel4j.cpu.ops;

import io.accel4j.core.DType;
import io.accel4j.core.fp8.AmaxHistory;
import io.accel4j.core.fp8.Fp8Scaling;
import io.accel4j.core.ops.CastOps;
import io.accel4j.cpu.Check;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.gemm.Gemm;
import io.accel4j.cpu.gemm.Layout;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * A linear layer with FP8 operands and delayed scaling ({@link io.accel4j.core.ops.MatmulOps}' FP8 methods) on the
 * CPU: each operand is cast to FP8 codes in this object's scratch ({@link CastOps#castToFp8} with its history's
 * scale, the amax recorded), then the FP8 GEMM ({@link Gemm}, which decodes the codes exactly while packing and
 * accumulates in fp32) multiplies them with the two {@code scaleInv}s as its per-tensor scales.
 *
 * <p>Forward {@code out (N,OC) = sInp·sW·q_inp (N,C)·q_wᵀ + bias} (NT); backward
 * {@code dinp (N,C) += sDout·sW·q_dout (N,OC)·q_w (OC,C)} (NN), {@code dweight (OC,C) += sDout·sInp·q_doutᵀ·q_inp}
 * (TN) and {@code dbias += Σ_rows dout} in fp32 ({@link Matmul}'s column sum); {@code s} is a {@code scaleInv}.
 *
 * <p>Scratch: one byte per element of the operands of the largest call so far, per calling thread, from an automatic
 * arena (readable by the pool's threads); after the first call of each shape nothing is allocated. This is the
 * reference path of the GPU's FP8 GEMM, not a fast one: the cast is an extra pass and the GEMM decodes the codes
 * back to fp32, so it runs at about the fp32 GEMM's speed (see docs/PERFORMANCE.md).
 */
final class Fp8Matmul {

    private final Parallel pool;
    private final CastOps casts;
    private final ThreadLocal<Scratch> scratch = ThreadLocal.withInitial(Scratch::new);

    /** FP8 linear layers on {@code pool}, casting through {@code casts} (the CPU backend's bulk casts). */
    Fp8Matmul(Parallel pool, CastOps casts) {
        this.pool = Objects.requireNonNull(pool, "pool");
        this.casts = Objects.requireNonNull(casts, "casts");
    }

    /** {@code out (N,OC) = sInp·sW·q_inp·q_wᵀ + bias} ({@code bias} may be null), amaxes of inp and weight recorded. */
    void forward(MemorySegment out, MemorySegment inp, MemorySegment weight, MemorySegment bias, int N, int C, int OC,
                 Fp8Scaling fp8) {
        Objects.requireNonNull(fp8, "fp8");
        Matmul.checkSizes(N, C, OC);
        checkOperands(inp, weight, null, N, C, OC);
        long nInp = (long) N * C, nW = (long) OC * C;
        MemorySegment codes = scratch.get().bytes(nInp + nW);
        MemorySegment qInp = codes.asSlice(0, nInp), qW = codes.asSlice(nInp, nW);
        float sInp = fp8.input().quantize(casts, qInp, inp, nInp);
        float sW = fp8.weight().quantize(casts, qW, weight, nW);
        Gemm.gemm(pool, Layout.NT, N, OC, C, 1f, qInp, fp8.input().format(), C, sInp, qW, fp8.weight().format(), C,
                sW, 0f, out, DType.FP32, OC, bias);
    }

    /**
     * {@code dinp += sDout·sW·q_dout·q_w}, {@code dweight += sDout·sInp·q_doutᵀ·q_inp}, {@code dbias += Σ_rows dout}
     * ({@code dbias} may be null), amaxes of dout, weight and inp recorded.
     */
    void backward(MemorySegment dinp, MemorySegment dweight, MemorySegment dbias, MemorySegment dout,
                  MemorySegment inp, MemorySegment weight, int N, int C, int OC, Fp8Scaling fp8) {
        Objects.requireNonNull(fp8, "fp8");
        Matmul.checkSizes(N, C, OC);
        checkOperands(inp, weight, dout, N, C, OC);
        Matmul.checkBias(pool, dbias, dout, N, OC);
        long nInp = (long) N * C, nW = (long) OC * C, nDout = (long) N * OC;
        MemorySegment codes = scratch.get().bytes(nInp + nW + nDout);
        MemorySegment qInp = codes.asSlice(0, nInp), qW = codes.asSlice(nInp, nW);
        MemorySegment qDout = codes.asSlice(nInp + nW, nDout);
        AmaxHistory hInp = fp8.input(), hW = fp8.weight(), hDout = fp8.gradOutput();
        float sDout = hDout.quantize(casts, qDout, dout, nDout);
        float sW = hW.quantize(casts, qW, weight, nW);
        float sInp = hInp.quantize(casts, qInp, inp, nInp);
        Gemm.gemm(pool, Layout.NN, N, C, OC, 1f, qDout, hDout.format(), OC, sDout, qW, hW.format(), C, sW,
                1f, dinp, DType.FP32, C, null);
        Gemm.gemm(pool, Layout.TN, OC, C, N, 1f, qDout, hDout.format(), OC, sDout, qInp, hInp.format(), C, sInp,
                1f, dweight, DType.FP32, C, null);
        Matmul.biasBackward(pool, dbias, dout, N, OC);
    }

    /** The fp32 inputs hold what the sizes imply (the casts would say so too, but with their own names). */
    private static void checkOperands(MemorySegment inp, MemorySegment weight, MemorySegment dout, int N, int C,
                                      int OC) {
        Check.floats("inp", inp, (long) N * C);
        Check.floats("weight", weight, (long) OC * C);
        if (dout != null) {
            Check.floats("dout", dout, (long) N * OC);
        }
    }

    /** One thread's FP8 codes, grown (never shrunk) to the largest request. */
    private static final class Scratch {
        private MemorySegment codes = MemorySegment.NULL;

        MemorySegment bytes(long n) {
            if (codes.byteSize() < n) {
                codes = Arena.ofAuto().allocate(n, 64);
            }
            return codes;
        }
    }
}
