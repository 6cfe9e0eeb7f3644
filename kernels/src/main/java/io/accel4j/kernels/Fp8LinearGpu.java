package io.accel4j.kernels;

import static io.accel4j.kernels.CublasLtPlans.align;
import static io.accel4j.kernels.CublasLtPlans.cudaType;

import io.accel4j.core.DType;
import io.accel4j.core.fp8.AmaxHistory;
import io.accel4j.core.fp8.Fp8Scaling;
import io.accel4j.core.ops.MatmulOps;
import io.accel4j.cuda.CublasLtMatmul;
import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.CudaKernel;
import io.accel4j.cuda.DeviceBuffer;
import io.accel4j.kernels.CublasLtPlans.Key;
import io.accel4j.kernels.CublasLtPlans.Kind;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Objects;

/**
 * FP8 GEMMs on cuBLASLt and {@link MatmulOps}' linear layer with FP8 operands, for {@link GpuMatmul}:
 * <ul>
 *   <li>{@link #fp8}: {@code out (M,N) (+)= aScaleInv·bScaleInv · a (M,K) · b (N,K)ᵀ} on FP8 codes, optionally
 *       writing {@code max |out|} to a device float;</li>
 *   <li>{@link #castTransposeToFp8}: FP8 codes of an fp32 matrix and of its transpose in one pass
 *       ({@link CastTransposeGpu}), returning its amax (the K-major operands a backward pass needs);</li>
 *   <li>{@link #fp8Forward} / {@link #fp8Backward}: the linear layer with delayed scaling ({@link Fp8Scaling}),
 *       built from the two above, with no host synchronisation: each cast's amax waits in a device slot
 *       ({@link Fp8AmaxSlots}) until {@link #flushAmaxes} records them all with one copy, and the GEMM reads each
 *       operand's dequantisation factor from that slot, written by the cast.</li>
 * </ul>
 *
 * <p><b>Layout.</b> FP8 {@code out (M,N) = a (M,K)·b (N,K)ᵀ} is {@code outᶜ (N×M) = (bᶜ)ᵀ (N×K)·aᶜ (K×M)} (c = the
 * column-major view, as in {@link LinearGpu}): m = N, n = M, k = K; A = b stored K×N (ld K), transposed; B = a
 * stored K×M (ld K): the "TN" layout FP8 requires — both operands K-major. A backward pass needs transposed FP8
 * copies ({@link #castTransposeToFp8}): dinp (N,C) += dout·W takes dout (N,OC) as a and Wᵀ (C,OC) as b, K = OC;
 * dweight (OC,C) += doutᵀ·inp takes doutᵀ (OC,N) as a and inpᵀ (C,N) as b, K = N.
 *
 * <p><b>FP8 rules</b> (cuBLASLt, Ada and Hopper; checked here with this class's names, and by
 * {@link CublasLtMatmul.Spec#check()}): K a multiple of 16; a row of {@code out} a multiple of 16 bytes (N a
 * multiple of 4 for FP32, of 8 for BF16); {@code a}, {@code b}, {@code out} 16-byte aligned; not both E5M2
 * (E4M3×E4M3 for forward products, E4M3×E5M2 or E5M2×E4M3 with E5M2 gradients); the GPU must be sm_89 or newer.
 * The scales are the <em>dequantisation</em> factors, {@code 1/scale} of the cast that made each operand (an
 * {@link AmaxHistory}'s {@code scaleInv()}), as in the CPU FP8 GEMM ({@code Gemm.gemm}'s {@code scaleA},
 * {@code scaleB}). Not thread-safe.
 */
final class Fp8LinearGpu implements AutoCloseable {

    /** What an FP8 GEMM's K must be a multiple of (cuBLASLt). */
    static final int FP8_MULTIPLE = 16;

    private final CublasLtPlans plans;
    /** The fp32 linear layer: {@link #fp8Forward}'s bias broadcast, {@link #fp8Backward}'s bias gradient. */
    private final LinearGpu linear;
    /** 89 for sm_89: FP8 needs at least that. */
    private final int computeCapability;
    /** The two FP8 dequantisation factors of the next {@link #fp8} (cuBLASLt's A scale, then B scale). */
    private final DeviceBuffer fp8Scales;
    /** cast_transpose_f32_to_fp8, with its amax partials. */
    private final CastTransposeGpu castTranspose;
    /** The amaxes of {@link #fp8Forward}/{@link #fp8Backward}'s casts, until {@link #flushAmaxes}. */
    private final Fp8AmaxSlots amaxSlots;
    /** The FP8 codes of {@link #fp8Forward}/{@link #fp8Backward}'s operands and their transposes. */
    private final ScratchBuffer fp8Codes;
    /** fp32 zeros (max(N, OC) of the largest call) for {@link #fp8Forward}'s bias broadcast. */
    private final ScratchBuffer zeros;

    /** Allocates the scale pair and the cast's partials (both freed again on failure). */
    Fp8LinearGpu(CudaContext context, CublasLtPlans plans, LinearGpu linear, CudaKernel castTransposeKernel,
                 CudaKernel amaxToSlot) {
        this.plans = Objects.requireNonNull(plans, "plans");
        this.linear = Objects.requireNonNull(linear, "linear");
        this.computeCapability = context.computeCapability();
        this.amaxSlots = new Fp8AmaxSlots(context, amaxToSlot);
        this.fp8Codes = ScratchBuffer.of(context);
        this.zeros = ScratchBuffer.zeroed(context);
        this.fp8Scales = context.allocate(8);
        try {
            this.castTranspose = new CastTransposeGpu(context, castTransposeKernel);
        } catch (RuntimeException e) {
            fp8Scales.close();
            throw e;
        }
    }

    /**
     * {@code out (M,N) (+)= aScaleInv·bScaleInv · Σ_k a[i,k]·b[j,k]}: FP8 codes {@code a} (M,K) and {@code b} (N,K),
     * both row-major with K contiguous, multiplied with FP32 compute (no fast accumulation) into {@code out} (FP32
     * or BF16): overwritten, or added to when {@code accumulate}. When {@code amaxOut} is not null, cuBLASLt writes
     * {@code max |out|} (one float) there. The scale factors are uploaded to a device pair of this object before the
     * GEMM is queued (a synchronous host-to-device copy, in order with the default stream).
     */
    void fp8(MemorySegment out, DType outType, boolean accumulate, MemorySegment a, DType aType, float aScaleInv,
             MemorySegment b, DType bType, float bScaleInv, MemorySegment amaxOut, int M, int N, int K) {
        checkFp8(out, outType, a, aType, aScaleInv, b, bType, bScaleInv, amaxOut, M, N, K);
        checkFp8Device();
        try (Arena arena = Arena.ofConfined()) {
            fp8Scales.copyFrom(arena.allocateFrom(ValueLayout.JAVA_FLOAT, aScaleInv, bScaleInv));
        }
        fp8Gemm(out, outType, accumulate, a, aType, fp8Scales.address(), b, bType, fp8Scales.address() + 4, amaxOut,
                M, N, K);
    }

    /**
     * {@link #fp8} (its preconditions checked by the caller) with the dequantisation factors read on the device, in
     * stream order, from {@code aScaleInv} and {@code bScaleInv} (device addresses of one float each).
     */
    private void fp8Gemm(MemorySegment out, DType outType, boolean accumulate, MemorySegment a, DType aType,
                         long aScaleInv, MemorySegment b, DType bType, long bScaleInv, MemorySegment amaxOut,
                         int M, int N, int K) {
        long amax = amaxOut == null ? 0 : amaxOut.address();
        int d = cudaType(outType);
        CublasLtMatmul plan = plans.plan(new Key(Kind.FP8, N, M, K, cudaType(bType), cudaType(aType), d, 0, amax,
                bScaleInv, aScaleInv, align(b), align(a), align(out), align(out)), key -> {
            CublasLtMatmul.Spec s = CublasLtPlans.spec(key).transpose(true, false)
                    .types(key.typeA(), key.typeB(), d, d).scales(key.scaleA(), key.scaleB(), 0);
            return key.extra() == 0 ? s : s.amaxD(key.extra());
        });
        plan.run(null, b.address(), a.address(), out.address(), out.address(), 1f, accumulate ? 1f : 0f);
    }

    private void checkFp8Device() {
        if (computeCapability < 89) {
            throw new UnsupportedOperationException("FP8 GEMMs need compute capability 8.9 (Ada) or newer, this GPU is"
                    + " sm_" + computeCapability);
        }
    }

    /** {@link CastTransposeGpu#castTransposeToFp8}: the codes, their transpose, and the amax (a host wait). */
    float castTransposeToFp8(MemorySegment dst, MemorySegment dstT, DType fp8Type, MemorySegment src, int R, int C,
                             float scale) {
        return castTranspose.castTransposeToFp8(dst, dstT, fp8Type, src, R, C, scale);
    }

    /**
     * {@code out (N,OC) = sInp·sW · q_inp (N,C) · q_wᵀ + bias} ({@link MatmulOps}' FP8 forward, {@code bias} may be
     * null): inp and weight cast as {@link #castTransposeToFp8} does with their histories' scales (the transposed
     * codes are not used forward), their amaxes left in device slots until {@link #flushAmaxes}, then an {@link #fp8}
     * GEMM that reads the dequantisation factors from the slots. Nothing waits for the GPU. FP8 GEMMs have no fp32
     * bias epilogue here, so a bias is first broadcast into {@code out} exactly (an fp32 GEMM of zeros with the bias
     * epilogue, {@code 0·0 + bias}) and the FP8 GEMM accumulates onto it. The FP8 rules apply: C a multiple of 16,
     * OC of 4; they are checked before anything is cast.
     */
    void fp8Forward(MemorySegment out, MemorySegment inp, MemorySegment weight, MemorySegment bias, int N, int C,
                    int OC, Fp8Scaling fp8) {
        Objects.requireNonNull(fp8, "fp8");
        MatmulOps.checkSizes(N, C, OC);
        if (bias != null) {
            GpuLaunch.need("bias", bias, OC, 4);
        }
        GpuLaunch.need("inp", inp, (long) N * C, 4); GpuLaunch.need("weight", weight, (long) OC * C, 4);
        long nInp = (long) N * C, nW = (long) OC * C;
        long inpAt = 0, inpT = ScratchBuffer.slice(nInp, 1), wAt = 2 * inpT, wT = wAt + ScratchBuffer.slice(nW, 1);
        MemorySegment base = fp8Codes.view(wT + ScratchBuffer.slice(nW, 1));
        AmaxHistory hInp = fp8.input(), hW = fp8.weight();
        MemorySegment qInp = base.asSlice(inpAt, nInp), qW = base.asSlice(wAt, nW);
        checkFp8(out, DType.FP32, qInp, hInp.format(), hInp.scaleInv(), qW, hW.format(), hW.scaleInv(), null, N, OC,
                C);
        checkFp8Device();
        cast(hInp, base, inpAt, inpT, inp, N, C);
        cast(hW, base, wAt, wT, weight, OC, C);
        boolean hasBias = bias != null;
        if (hasBias) {
            MemorySegment z = zeros.view(Math.max(N, OC) * (long) Float.BYTES);
            linear.forward(out, z, z, bias, N, 1, OC, DType.FP32);
        }
        fp8Gemm(out, DType.FP32, hasBias, qInp, hInp.format(), amaxSlots.scaleInvAddress(hInp), qW, hW.format(),
                amaxSlots.scaleInvAddress(hW), null, N, OC, C);
    }

    /**
     * {@code dinp (N,C) += sDout·sW · q_dout (N,OC) · (q_wᵀ (C,OC))ᵀ}, {@code dweight (OC,C) += sDout·sInp ·
     * q_doutᵀ (OC,N) · (q_inpᵀ (C,N))ᵀ}, {@code dbias += Σ_rows dout} (fp32, may be null): dout, weight and inp cast
     * with their transposes as {@link #castTransposeToFp8} does (amaxes into device slots, as {@link #fp8Forward}),
     * then two {@link #fp8} GEMMs that add. The FP8 rules apply: OC and N multiples of 16, C of 4; they are checked
     * before anything is cast.
     */
    void fp8Backward(MemorySegment dinp, MemorySegment dweight, MemorySegment dbias, MemorySegment dout,
                     MemorySegment inp, MemorySegment weight, int N, int C, int OC, Fp8Scaling fp8) {
        Objects.requireNonNull(fp8, "fp8");
        MatmulOps.checkSizes(N, C, OC);
        if (dbias != null) {
            GpuLaunch.need("dbias", dbias, OC, 4);
        }
        GpuLaunch.need("dout", dout, (long) N * OC, 4); GpuLaunch.need("inp", inp, (long) N * C, 4);
        GpuLaunch.need("weight", weight, (long) OC * C, 4);
        long nInp = (long) N * C, nW = (long) OC * C, nDout = (long) N * OC;
        long inpAt = 0, inpT = ScratchBuffer.slice(nInp, 1), wAt = 2 * inpT, wT = wAt + ScratchBuffer.slice(nW, 1);
        long gAt = wT + ScratchBuffer.slice(nW, 1), gT = gAt + ScratchBuffer.slice(nDout, 1);
        MemorySegment base = fp8Codes.view(gT + ScratchBuffer.slice(nDout, 1));
        AmaxHistory hInp = fp8.input(), hW = fp8.weight(), hDout = fp8.gradOutput();
        MemorySegment qDout = base.asSlice(gAt, nDout), qDoutT = base.asSlice(gT, nDout);
        MemorySegment qWT = base.asSlice(wT, nW), qInpT = base.asSlice(inpT, nInp);
        checkFp8(dinp, DType.FP32, qDout, hDout.format(), hDout.scaleInv(), qWT, hW.format(), hW.scaleInv(), null, N,
                C, OC);
        checkFp8(dweight, DType.FP32, qDoutT, hDout.format(), hDout.scaleInv(), qInpT, hInp.format(),
                hInp.scaleInv(), null, OC, C, N);
        checkFp8Device();
        cast(hDout, base, gAt, gT, dout, N, OC);
        cast(hW, base, wAt, wT, weight, OC, C);
        cast(hInp, base, inpAt, inpT, inp, N, C);
        long sDout = amaxSlots.scaleInvAddress(hDout), sW = amaxSlots.scaleInvAddress(hW);
        long sInp = amaxSlots.scaleInvAddress(hInp);
        fp8Gemm(dinp, DType.FP32, true, qDout, hDout.format(), sDout, qWT, hW.format(), sW, null, N, C, OC);
        fp8Gemm(dweight, DType.FP32, true, qDoutT, hDout.format(), sDout, qInpT, hInp.format(), sInp, null, OC, C, N);
        if (dbias != null) {
            linear.addColumnSums(dbias, dout, N, OC);
        }
    }

    /**
     * Queues the cast of {@code src} (R,C) with {@code h}'s scale into {@code base} at {@code at} and its transpose
     * at {@code atT}, then the reduction of its amax into {@code h}'s slot with {@code h}'s dequantisation factor.
     */
    private void cast(AmaxHistory h, MemorySegment base, long at, long atT, MemorySegment src, int R, int C) {
        long n = (long) R * C;
        int tiles = castTranspose.launch(base.asSlice(at, n), base.asSlice(atT, n), h.format(), src, R, C, h.scale());
        amaxSlots.record(h, castTranspose.partials(), tiles, h.scaleInv());
    }

    /** Records the amaxes left in device slots into their histories: one device→host copy; nothing when none waits. */
    void flushAmaxes() {
        amaxSlots.flush();
    }

    /** Histories whose amaxes wait for {@link #flushAmaxes}. */
    int pendingAmaxes() {
        return amaxSlots.pending();
    }

    /** {@link #fp8}'s preconditions, checked without a GPU (the segments' addresses are only compared). */
    static void checkFp8(MemorySegment out, DType outType, MemorySegment a, DType aType, float aScaleInv,
                         MemorySegment b, DType bType, float bScaleInv, MemorySegment amaxOut, int M, int N, int K) {
        Objects.requireNonNull(outType, "outType");
        Objects.requireNonNull(aType, "aType");
        Objects.requireNonNull(bType, "bType");
        GpuLaunch.positive("M", M); GpuLaunch.positive("N", N); GpuLaunch.positive("K", K);
        if (!aType.isFp8() || !bType.isFp8()) {
            throw new IllegalArgumentException("fp8 takes FP8_E4M3 or FP8_E5M2 operands, got a " + aType + ", b "
                    + bType);
        }
        if (aType == DType.FP8_E5M2 && bType == DType.FP8_E5M2) {
            throw new IllegalArgumentException("a and b cannot both be FP8_E5M2 (cuBLASLt has no E5M2 x E5M2 GEMM)");
        }
        if (outType != DType.FP32 && outType != DType.BF16) {
            throw new IllegalArgumentException("fp8 writes FP32 or BF16, got " + outType);
        }
        if (K % FP8_MULTIPLE != 0) {
            throw new IllegalArgumentException("K must be a multiple of " + FP8_MULTIPLE + " for FP8 (cuBLASLt), got "
                    + K);
        }
        if ((long) N * outType.byteSize() % 16 != 0) {
            throw new IllegalArgumentException("a row of out must be a multiple of 16 bytes for FP8 (cuBLASLt): N "
                    + N + " × " + outType.byteSize() + " bytes of " + outType);
        }
        scaleFactor("aScaleInv", aScaleInv);
        scaleFactor("bScaleInv", bScaleInv);
        GpuLaunch.need("a", a, (long) M * K, 1); GpuLaunch.need("b", b, (long) N * K, 1);
        GpuLaunch.need("out", out, (long) M * N, outType.byteSize());
        aligned16("a", a);
        aligned16("b", b);
        aligned16("out", out);
        if (amaxOut != null) {
            GpuLaunch.need("amaxOut", amaxOut, 1, 4);
        }
    }

    /** A scale or dequantisation factor {@code v} is finite and positive, else an exception naming it. */
    static void scaleFactor(String name, float v) {
        if (!(v > 0 && v < Float.POSITIVE_INFINITY)) {
            throw new IllegalArgumentException(name + " must be finite and > 0, got " + v);
        }
    }

    private static void aligned16(String name, MemorySegment s) {
        if (s.address() % 16 != 0) {
            throw new IllegalArgumentException(name + " at 0x" + Long.toHexString(s.address()) + " is not 16-byte"
                    + " aligned, as an FP8 GEMM needs (cuBLASLt)");
        }
    }

    @Override
    public void close() {
        fp8Codes.close();
        zeros.close();
        amaxSlots.close();
        castTranspose.close();
        fp8Scales.close();
    }
}
