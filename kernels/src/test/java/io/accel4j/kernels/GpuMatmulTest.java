package io.accel4j.kernels;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.accel4j.core.DType;
import io.accel4j.core.fp8.AmaxHistory;
import io.accel4j.core.fp8.DelayedScaling;
import io.accel4j.core.fp8.DelayedScaling.Role;
import io.accel4j.core.fp8.Fp8Scaling;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.gemm.Gemm;
import io.accel4j.cpu.gemm.Layout;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.cuda.Cuda;
import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.CudaLibraries;
import io.accel4j.cuda.CudaProbe;
import io.accel4j.cuda.DeviceBuffer;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * {@link GpuMatmul}'s BF16/FP16 linear layer (through {@link GpuOps}) against {@link CpuOps}, and its FP8 GEMM against
 * the CPU FP8 GEMM ({@link Gemm}), alone and with delayed scaling over several steps. Needs a GPU and libcublasLt
 * (FP8: sm_89 or newer); skipped with the reason elsewhere.
 */
class GpuMatmulTest {

    private static final long SEED = 20261203L;
    /**
     * BF16/FP16 operands: both sides multiply the same rounded values (cast.cu is bit-identical to the CPU's rounding)
     * and differ only in the order of the fp32 additions, as the fp32 matmul of MatmulGpuOpsTest: K ≤ 203 terms of |a·b| ≤ 1,
     * worst case K·2⁻²⁴·Σ|a·b| ≈ 6e-4, typically ~1e-5; 2e-4·(1 + |ref|). Rounding the operands differently (say
     * truncating) would be off by ~2⁻⁹·√K ≈ 3e-2 and fail.
     */
    private static final double ROUNDED_TOL = 2e-4;
    /**
     * FP8: every product of two FP8 values is exact in fp32, so only the accumulation differs. Hopper's FP8 tensor
     * cores keep fewer bits between promotions to fp32 (~14 reported in the DeepSeek-V3 report, §3.3.2; cuBLASLt
     * promotes when fast accumulation is off): √K·2⁻¹⁴ ≈ 6e-4 of Σ|a·b| at K 96; 2e-3·Σ|a·b|·scales per element.
     * A wrong scale, layout or operand type is off by O(1).
     */
    private static final double FP8_TOL = 2e-3;
    /** BF16 output: one more rounding, half an ulp of 8 bits of mantissa, 2⁻⁹ relative. */
    private static final double BF16_OUT_TOL = 0x1p-9;

    private static CudaContext ctx;
    private static GpuOps gpu;
    private static GpuMatmul mm;
    private static Parallel pool;
    private static CpuOps cpu;
    private final List<DeviceBuffer> buffers = new ArrayList<>();
    private final Arena arena = Arena.ofShared();

    @BeforeAll
    static void open() {
        CudaProbe probe = Cuda.probe();
        assumeTrue(probe.ready(), "no usable GPU: CUDA " + probe.describe());
        assumeTrue(CudaLibraries.cublasLt().found(), CudaLibraries.cublasLt().notFoundMessage());
        ctx = Cuda.open(0);
        gpu = new GpuOps(ctx);
        mm = GpuMatmul.create(ctx);
        pool = new Parallel(1);
        cpu = new CpuOps(pool);
    }

    @AfterAll
    static void close() {
        if (mm != null) {
            mm.close();
        }
        if (gpu != null) {
            gpu.close();
        }
        if (ctx != null) {
            ctx.close();
        }
        if (pool != null) {
            pool.close();
        }
    }

    @AfterEach
    void free() {
        buffers.forEach(DeviceBuffer::close);
        buffers.clear();
        arena.close();
    }

    // ---- BF16 / FP16 operands through GpuOps

    @ParameterizedTest(name = "{0}")
    @CsvSource({"BF16", "FP16"})
    void roundedOperandsMatchTheCpuGemm(DType operands) {
        int N = 97, C = 131, OC = 203;
        MemorySegment inp = floats((long) N * C, 1, SEED), w = floats((long) OC * C, 1, SEED + 1);
        MemorySegment b = floats(OC, 1, SEED + 2), dout = floats((long) N * OC, 1, SEED + 3);
        MemorySegment pDx = floats((long) N * C, 1, SEED + 4), pDw = floats((long) OC * C, 1, SEED + 5);
        MemorySegment pDb = floats(OC, 1, SEED + 6);
        if (operands == DType.FP16) {
            inp.setAtIndex(JAVA_FLOAT, 5, 70000f); // fp16 overflow: row 0 of out becomes ±inf or NaN on both sides
        }
        MemorySegment out = nans((long) N * OC), dx = copy(pDx), dw = copy(pDw), db = copy(pDb);
        cpu.matmulForward(out, inp, w, b, N, C, OC, operands);
        cpu.matmulBackward(dx, dw, db, dout, inp, w, N, C, OC, operands);
        MemorySegment gOut = up(nans((long) N * OC)), gDx = up(pDx), gDw = up(pDw), gDb = up(pDb);
        MemorySegment gInp = up(inp), gW = up(w), gB = up(b), gDout = up(dout);
        for (int rep = 0; rep < 2; rep++) { // the second time with cached plans and scratch
            gpu.matmulForward(gOut, gInp, gW, gB, N, C, OC, operands);
            assertClose(operands + " out (run " + rep + ")", down(gOut), out, (long) N * OC);
        }
        gpu.matmulBackward(gDx, gDw, gDb, gDout, gInp, gW, N, C, OC, operands);
        assertClose(operands + " dinp", down(gDx), dx, (long) N * C);
        assertClose(operands + " dweight", down(gDw), dw, (long) OC * C);
        assertClose(operands + " dbias", down(gDb), db, OC);
        // the inputs are not modified
        assertThat(down(gInp).asByteBuffer()).isEqualTo(inp.asByteBuffer());
        assertThat(down(gDout).asByteBuffer()).isEqualTo(dout.asByteBuffer());
    }

    // ---- the MLP's fused GELU matmuls through GpuOps

    /**
     * GELU in cuBLASLt's epilogue: the tanh form, but its own tanh (possibly the hardware tanh.approx.f32, relative
     * error up to 2⁻¹⁰·⁹⁹), so gelu and gelu' differ from the CPU's by up to ~1e-3 of their argument's scale:
     * 2e-3·(1 + max|x|) on top of {@link #ROUNDED_TOL}. Applying GELU to the wrong matrix or forgetting the bias
     * is off by O(1).
     */
    private static final double GELU_TOL = 2e-3;

    @ParameterizedTest(name = "{0} hidden={1}")
    @CsvSource({"FP32,200", "BF16,200", "FP16,200", "BF16,202"}) // 202: not a multiple of 8, composed
    void fusedGeluMatchesTheCpu(DType operands, int H) {
        int N = 97, Cm = 131; // fc: (N,Cm) -> (N,H), then the projection's backward (N,Cm) -> (N,H)
        MemorySegment ln = floats((long) N * Cm, 1, SEED + 10), wfc = floats((long) H * Cm, 0.3f, SEED + 11);
        MemorySegment bfc = floats(H, 1, SEED + 12), wproj = floats((long) Cm * H, 1, SEED + 13);
        MemorySegment dres = floats((long) N * Cm, 1, SEED + 14);
        MemorySegment pDw = floats((long) Cm * H, 1, SEED + 15), pDb = floats(Cm, 1, SEED + 16);
        MemorySegment pDpb = floats(H, 1, SEED + 17);
        MemorySegment out = nans((long) N * H), pre = nans((long) N * H);
        cpu.matmulForwardGelu(out, pre, ln, wfc, bfc, N, Cm, H, operands);
        MemorySegment gOut = up(nans((long) N * H)), gPre = up(nans((long) N * H));
        gpu.matmulForwardGelu(gOut, gPre, up(ln), up(wfc), up(bfc), N, Cm, H, operands);
        assertClose(operands + " pre", down(gPre), pre, (long) N * H);
        assertWithin(operands + " out", down(gOut), out, (long) N * H, GELU_TOL * (1 + maxAbs(pre, (long) N * H)));

        // backward from the CPU's pre and out, so both sides take gelu' of the same values
        MemorySegment dpre = nans((long) N * H), dpb = copy(pDpb), dw = copy(pDw), db = copy(pDb);
        cpu.matmulBackwardGelu(dpre, dpb, dw, db, dres, out, pre, wproj, N, H, Cm, operands);
        MemorySegment g = arena.allocate(4L * N * H, 16); // dres·wproj: the scale of gelu''s error
        cpu.matmulBackward(g, arena.allocate(4L * Cm * H, 16), null, dres, out, wproj, N, H, Cm, operands);
        MemorySegment gDpre = up(nans((long) N * H)), gDpb = up(pDpb), gDw = up(pDw), gDb = up(pDb);
        for (int rep = 0; rep < 2; rep++) { // the second time with cached plans; dpre is written, not added to
            if (rep == 1) {
                gDpb = up(pDpb); gDw = up(pDw); gDb = up(pDb);
            }
            gpu.matmulBackwardGelu(gDpre, gDpb, gDw, gDb, up(dres), up(out), up(pre), up(wproj), N, H, Cm, operands);
            MemorySegment hDpre = down(gDpre);
            assertWithin(operands + " dpre (run " + rep + ")", hDpre, dpre, (long) N * H,
                    ROUNDED_TOL + GELU_TOL * (1 + maxAbs(g, (long) N * H)));
            assertClose(operands + " dweight", down(gDw), dw, (long) Cm * H);
            assertClose(operands + " dbias", down(gDb), db, Cm);
            // dpreBias is the start plus the column sums of the GPU's own dpre, up to the order of the additions
            MemorySegment hDpb = down(gDpb);
            for (int c = 0; c < H; c++) {
                double sum = pDpb.getAtIndex(JAVA_FLOAT, c), mass = Math.abs(sum);
                for (int n = 0; n < N; n++) {
                    float v = hDpre.getAtIndex(JAVA_FLOAT, (long) n * H + c);
                    sum += v;
                    mass += Math.abs(v);
                }
                assertThat((double) hDpb.getAtIndex(JAVA_FLOAT, c)).as("%s dpreBias[%d] (seed %d)", operands, c, SEED)
                        .isCloseTo(sum, org.assertj.core.data.Offset.offset(1e-5 * (1 + mass)));
            }
        }
    }

    private static double maxAbs(MemorySegment s, long n) {
        double m = 0;
        for (long i = 0; i < n; i++) {
            m = Math.max(m, Math.abs(s.getAtIndex(JAVA_FLOAT, i)));
        }
        return m;
    }

    private static void assertWithin(String what, MemorySegment got, MemorySegment ref, long n, double tol) {
        for (long i = 0; i < n; i++) {
            float gv = got.getAtIndex(JAVA_FLOAT, i), r = ref.getAtIndex(JAVA_FLOAT, i);
            assertThat((double) Math.abs(gv - r)).as("%s[%d]: got %s, CPU %s (seed %d)", what, i, gv, r, SEED)
                    .isLessThanOrEqualTo(tol);
        }
    }

    // ---- FP8

    @ParameterizedTest(name = "{0} x {1} -> {2}")
    @CsvSource({"FP8_E4M3, FP8_E4M3, FP32", "FP8_E4M3, FP8_E5M2, FP32", "FP8_E5M2, FP8_E4M3, BF16"})
    void fp8MatchesTheCpuFp8Gemm(DType aType, DType bType, DType outType) {
        assumeFp8();
        int M = 37, N = 40, K = 96;
        float scaleA = 100f, scaleB = 10000f; // |x·scaleA| ≤ 300, |y·scaleB| ≤ 200: inside both formats
        MemorySegment x = floats((long) M * K, 3, SEED + 10), y = floats((long) N * K, 0.02f, SEED + 11);
        MemorySegment a8 = arena.allocate((long) M * K), b8 = arena.allocate((long) N * K);
        cpu.castToFp8(a8, aType, x, (long) M * K, scaleA);
        cpu.castToFp8(b8, bType, y, (long) N * K, scaleB);
        MemorySegment ref = nans((long) M * N);
        Gemm.gemm(pool, Layout.NT, M, N, K, 1f, a8, aType, K, 1f / scaleA, b8, bType, K, 1f / scaleB, 0f, ref,
                DType.FP32, N, null);
        MemorySegment gOut = up(nans((long) M * N)); // as many bytes as FP32: BF16 uses the first half
        mm.fp8(gOut, outType, false, up(a8), aType, 1f / scaleA, up(b8), bType, 1f / scaleB, null, M, N, K);
        double[] bound = fp8Bound(a8, aType, 1f / scaleA, b8, bType, 1f / scaleB, M, N, K);
        MemorySegment got = down(gOut);
        for (int i = 0; i < M * N; i++) {
            double r = ref.getAtIndex(JAVA_FLOAT, i);
            double g = outType == DType.FP32 ? got.getAtIndex(JAVA_FLOAT, i)
                    : DType.BF16.getFloat(got, i);
            double tol = bound[i] + (outType == DType.BF16 ? BF16_OUT_TOL * Math.abs(r) : 0);
            assertThat(Math.abs(g - r)).as("%s x %s -> %s [%d]: got %s, CPU %s (seed %d)", aType, bType, outType, i,
                    g, r, SEED).isLessThanOrEqualTo(tol);
        }
    }

    /** cuBLASLt's amax of D with FP32 D (documented for FP8 kernels; the FP32-D case is what this checks). */
    @Test
    void fp8AmaxOfTheOutput() {
        assumeFp8();
        int M = 19, N = 24, K = 64;
        MemorySegment x = floats((long) M * K, 2, SEED + 20), y = floats((long) N * K, 2, SEED + 21);
        MemorySegment a8 = arena.allocate((long) M * K), b8 = arena.allocate((long) N * K);
        cpu.castToFp8(a8, DType.FP8_E4M3, x, (long) M * K, 64f);
        cpu.castToFp8(b8, DType.FP8_E4M3, y, (long) N * K, 32f);
        MemorySegment ref = nans((long) M * N);
        Gemm.gemm(pool, Layout.NT, M, N, K, 1f, a8, DType.FP8_E4M3, K, 1f / 64, b8, DType.FP8_E4M3, K, 1f / 32, 0f,
                ref, DType.FP32, N, null);
        MemorySegment gAmax = up(nans(1));
        mm.fp8(up(nans((long) M * N)), DType.FP32, false, up(a8), DType.FP8_E4M3, 1f / 64, up(b8), DType.FP8_E4M3,
                1f / 32, gAmax, M, N, K);
        double max = 0, bound = 0;
        double[] b = fp8Bound(a8, DType.FP8_E4M3, 1f / 64, b8, DType.FP8_E4M3, 1f / 32, M, N, K);
        for (int i = 0; i < M * N; i++) {
            max = Math.max(max, Math.abs(ref.getAtIndex(JAVA_FLOAT, i)));
            bound = Math.max(bound, b[i]);
        }
        assertThat((double) down(gAmax).getAtIndex(JAVA_FLOAT, 0)).as("amax of D").isCloseTo(max,
                org.assertj.core.data.Offset.offset(bound));
    }

    /**
     * The delayed-scaling loop on the GPU (GpuOps' casts and its GpuMatmul's FP8 GEMM) and on the CPU (CpuOps, Gemm)
     * from the same inputs: the casts are bit-identical, so the amaxes, histories and scales are equal bit for bit at
     * every step, including the step that saturates; the products agree within the FP8 accumulation tolerance.
     */
    @Test
    void delayedScalingOnTheGpuFollowsTheCpu() {
        assumeFp8();
        int M = 45, N = 32, K = 80;
        DelayedScaling recipe = new DelayedScaling(DelayedScaling.Format.HYBRID, 3, 1, DelayedScaling.Algorithm.MAX);
        AmaxHistory hxCpu = recipe.newHistory(Role.GRADIENT), hwCpu = recipe.newHistory(Role.WEIGHT);
        AmaxHistory hxGpu = recipe.newHistory(Role.GRADIENT), hwGpu = recipe.newHistory(Role.WEIGHT);
        DType xType = recipe.dtype(Role.GRADIENT), wType = recipe.dtype(Role.WEIGHT);
        MemorySegment w = floats((long) N * K, 0.1f, SEED + 30), gW = up(w);
        MemorySegment x8 = arena.allocate((long) M * K), w8 = arena.allocate((long) N * K);
        MemorySegment gx8 = up(codes((long) M * K)), gw8 = up(codes((long) N * K));
        float[] magnitudes = {1, 1, 16, 16, 1e-3f, 1e-3f, 1e-3f};
        for (int step = 0; step < magnitudes.length; step++) {
            MemorySegment x = floats((long) M * K, magnitudes[step], SEED + 40 + step);
            float invX = hxCpu.quantize(cpu, x8, x, (long) M * K), invW = hwCpu.quantize(cpu, w8, w, (long) N * K);
            float gInvX = hxGpu.quantize(gpu, gx8, up(x), (long) M * K);
            float gInvW = hwGpu.quantize(gpu, gw8, gW, (long) N * K);
            String what = "step " + step + " (|x| ≤ " + magnitudes[step] + ")";
            assertThat(gInvX).as(what + " x scale").isEqualTo(invX);
            assertThat(gInvW).as(what + " w scale").isEqualTo(invW);
            assertThat(down(gx8).asByteBuffer()).as(what + " x codes").isEqualTo(x8.asByteBuffer());
            MemorySegment ref = nans((long) M * N), gOut = up(nans((long) M * N));
            Gemm.gemm(pool, Layout.NT, M, N, K, 1f, x8, xType, K, invX, w8, wType, K, invW, 0f, ref, DType.FP32, N,
                    null);
            gpu.gpuMatmul().fp8(gOut, DType.FP32, false, gx8, xType, gInvX, gw8, wType, gInvW, null, M, N, K);
            double[] bound = fp8Bound(x8, xType, invX, w8, wType, invW, M, N, K);
            MemorySegment got = down(gOut);
            for (int i = 0; i < M * N; i++) {
                double r = ref.getAtIndex(JAVA_FLOAT, i), g = got.getAtIndex(JAVA_FLOAT, i);
                assertThat(Math.abs(g - r)).as("%s out[%d]: got %s, CPU %s", what, i, g, r)
                        .isLessThanOrEqualTo(bound[i]);
            }
            hxCpu.update(); hwCpu.update(); hxGpu.update(); hwGpu.update();
            assertThat(hxGpu.amaxes()).as(what + " x history").containsExactly(hxCpu.amaxes());
        }
    }

    /**
     * An FP8 linear layer's backward on the GPU: castTransposeToFp8 gives the CPU cast's codes and their transpose bit
     * for bit and the CPU amax; then dinp += dout·W (dout E5M2 × Wᵀ E4M3, K = OC) and dweight += doutᵀ·inp (doutᵀ
     * E5M2 × inpᵀ E4M3, K = N), accumulated into earlier values, against the CPU FP8 GEMM in its NN and TN layouts.
     */
    @Test
    void fp8BackwardWithTransposedCasts() {
        assumeFp8();
        int N = 48, C = 40, OC = 32; // K = OC and K = N multiples of 16; C·4 bytes a multiple of 16
        float sx = 64f, sw = 1024f, sg = 2048f;
        MemorySegment inp = floats((long) N * C, 1, SEED + 50), w = floats((long) OC * C, 0.1f, SEED + 51);
        MemorySegment dout = floats((long) N * OC, 0.01f, SEED + 52);
        MemorySegment pDx = floats((long) N * C, 1, SEED + 53), pDw = floats((long) OC * C, 1, SEED + 54);
        DType e4 = DType.FP8_E4M3, e5 = DType.FP8_E5M2;
        MemorySegment x8 = arena.allocate((long) N * C), w8 = arena.allocate((long) OC * C);
        MemorySegment g8 = arena.allocate((long) N * OC);
        float ampX = cpu.castToFp8(x8, e4, inp, (long) N * C, sx);
        float ampW = cpu.castToFp8(w8, e4, w, (long) OC * C, sw);
        float ampG = cpu.castToFp8(g8, e5, dout, (long) N * OC, sg);
        MemorySegment x8T = transpose(x8, N, C), w8T = transpose(w8, OC, C), g8T = transpose(g8, N, OC);

        MemorySegment gx8 = up(codes(N * C)), gx8T = up(codes(N * C)), gw8 = up(codes(OC * C));
        MemorySegment gw8T = up(codes(OC * C)), gg8 = up(codes(N * OC)), gg8T = up(codes(N * OC));
        assertThat(mm.castTransposeToFp8(gx8, gx8T, e4, up(inp), N, C, sx)).as("amax of inp").isEqualTo(ampX);
        assertThat(mm.castTransposeToFp8(gw8, gw8T, e4, up(w), OC, C, sw)).as("amax of w").isEqualTo(ampW);
        assertThat(mm.castTransposeToFp8(gg8, gg8T, e5, up(dout), N, OC, sg)).as("amax of dout").isEqualTo(ampG);
        assertThat(down(gx8).asByteBuffer()).as("inp codes").isEqualTo(x8.asByteBuffer());
        assertThat(down(gx8T).asByteBuffer()).as("inpᵀ codes").isEqualTo(x8T.asByteBuffer());
        assertThat(down(gw8T).asByteBuffer()).as("Wᵀ codes").isEqualTo(w8T.asByteBuffer());
        assertThat(down(gg8T).asByteBuffer()).as("doutᵀ codes").isEqualTo(g8T.asByteBuffer());

        MemorySegment dx = copy(pDx), dw = copy(pDw), gDx = up(pDx), gDw = up(pDw);
        Gemm.gemm(pool, Layout.NN, N, C, OC, 1f, g8, e5, OC, 1f / sg, w8, e4, C, 1f / sw, 1f, dx, DType.FP32, C, null);
        Gemm.gemm(pool, Layout.TN, OC, C, N, 1f, g8, e5, OC, 1f / sg, x8, e4, C, 1f / sx, 1f, dw, DType.FP32, C,
                null);
        mm.fp8(gDx, DType.FP32, true, gg8, e5, 1f / sg, gw8T, e4, 1f / sw, null, N, C, OC);
        mm.fp8(gDw, DType.FP32, true, gg8T, e5, 1f / sg, gx8T, e4, 1f / sx, null, OC, C, N);
        assertFp8Close("dinp", down(gDx), dx, fp8Bound(g8, e5, 1f / sg, w8T, e4, 1f / sw, N, C, OC));
        assertFp8Close("dweight", down(gDw), dw, fp8Bound(g8T, e5, 1f / sg, x8T, e4, 1f / sx, OC, C, N));
    }

    /**
     * {@link GpuOps}' FP8 linear layer (MatmulOps' FP8 methods: cast-transposes with each history's scale, FP8 GEMMs,
     * the bias broadcast then accumulated onto) against {@link CpuOps}' with histories in the same state: the same
     * codes, so the same products up to the accumulation (FP8_TOL of Σ|a·b|), the same amaxes recorded — by
     * {@link GpuOps#flushAmaxes} (the forward's and backward's casts of inp and weight kept their maximum in one slot
     * each), not before.
     */
    @Test
    void fp8LinearLayerThroughGpuOpsMatchesCpuOps() {
        assumeFp8();
        int N = 48, C = 64, OC = 32; // K = C, OC, N multiples of 16; C, OC multiples of 4
        MemorySegment inp = floats((long) N * C, 2, SEED + 60), w = floats((long) OC * C, 0.1f, SEED + 61);
        MemorySegment b = floats(OC, 1, SEED + 62), dout = floats((long) N * OC, 1e-3f, SEED + 63);
        MemorySegment pDx = floats((long) N * C, 1e-3f, SEED + 64), pDw = floats((long) OC * C, 1e-3f, SEED + 65);
        MemorySegment pDb = floats(OC, 1e-3f, SEED + 66);
        Fp8Scaling onCpu = calibratedLayer(), onGpu = calibratedLayer();
        MemorySegment out = nans((long) N * OC), dx = copy(pDx), dw = copy(pDw), db = copy(pDb);
        cpu.matmulForward(out, inp, w, b, N, C, OC, onCpu);
        cpu.matmulBackward(dx, dw, db, dout, inp, w, N, C, OC, onCpu);
        MemorySegment gOut = up(nans((long) N * OC)), gDx = up(pDx), gDw = up(pDw), gDb = up(pDb);
        MemorySegment gInp = up(inp), gW = up(w), gDout = up(dout);
        float[] calibrated = calibratedLayer().input().amaxes();
        gpu.matmulForward(gOut, gInp, gW, up(b), N, C, OC, onGpu);
        gpu.matmulBackward(gDx, gDw, gDb, gDout, gInp, gW, N, C, OC, onGpu);
        assertThat(gpu.gpuMatmul().pendingAmaxes()).as("the three histories wait in device slots").isEqualTo(3);
        assertThat(onGpu.input().amaxes()).as("deferred: not recorded yet").containsExactly(calibrated);
        gpu.flushAmaxes();
        assertThat(gpu.gpuMatmul().pendingAmaxes()).isZero();
        gpu.flushAmaxes(); // nothing pending: records nothing twice
        assertThat(onGpu.input().amaxes()).containsExactly(onCpu.input().amaxes());
        assertThat(onGpu.weight().amaxes()).containsExactly(onCpu.weight().amaxes());
        assertThat(onGpu.gradOutput().amaxes()).containsExactly(onCpu.gradOutput().amaxes());
        float sx = onCpu.input().scale(), sw = onCpu.weight().scale(), sg = onCpu.gradOutput().scale();
        DType e4 = DType.FP8_E4M3, e5 = DType.FP8_E5M2;
        MemorySegment x8 = arena.allocate((long) N * C), w8 = arena.allocate((long) OC * C);
        MemorySegment g8 = arena.allocate((long) N * OC);
        cpu.castToFp8(x8, e4, inp, (long) N * C, sx);
        cpu.castToFp8(w8, e4, w, (long) OC * C, sw);
        cpu.castToFp8(g8, e5, dout, (long) N * OC, sg);
        assertFp8Close("out", down(gOut), out, fp8Bound(x8, e4, 1f / sx, w8, e4, 1f / sw, N, OC, C));
        assertFp8Close("dinp", down(gDx), dx, fp8Bound(g8, e5, 1f / sg, transpose(w8, OC, C), e4, 1f / sw, N, C,
                OC));
        assertFp8Close("dweight", down(gDw), dw, fp8Bound(transpose(g8, N, OC), e5, 1f / sg, transpose(x8, N, C), e4,
                1f / sx, OC, C, N));
        assertClose("dbias (fp32)", down(gDb), db, OC);
    }

    /**
     * More FP8 layers than the first buffer of amax slots holds (Fp8AmaxSlots: 64 slots, 2 histories per forward):
     * the buffer grows while amaxes are pending, which must survive the move, and every GEMM reads its operands'
     * scale inverses from the slots where they are then. Each layer's output against the CPU's (fresh histories:
     * scale 1), and after the flush each history's amax the CPU's bit for bit.
     */
    @Test
    void amaxSlotsGrowKeepingPendingAmaxesAndScales() {
        assumeFp8();
        int N = 16, C = 32, OC = 16, layers = 40;
        DelayedScaling recipe = new DelayedScaling(DelayedScaling.Format.HYBRID, 2, 0,
                DelayedScaling.Algorithm.MAX);
        List<Fp8Scaling> onCpu = new ArrayList<>(), onGpu = new ArrayList<>();
        List<MemorySegment> inps = new ArrayList<>(), ws = new ArrayList<>(), outs = new ArrayList<>();
        List<MemorySegment> gOuts = new ArrayList<>();
        for (int l = 0; l < layers; l++) {
            float magnitude = (float) Math.scalb(1.0, l % 7 - 3);
            MemorySegment inp = floats((long) N * C, magnitude, SEED + 100 + l);
            MemorySegment w = floats((long) OC * C, 0.1f * magnitude, SEED + 200 + l);
            onCpu.add(Fp8Scaling.of(recipe));
            onGpu.add(Fp8Scaling.of(recipe));
            MemorySegment out = nans((long) N * OC), gOut = up(nans((long) N * OC));
            cpu.matmulForward(out, inp, w, null, N, C, OC, onCpu.get(l));
            gpu.matmulForward(gOut, up(inp), up(w), null, N, C, OC, onGpu.get(l));
            inps.add(inp);
            ws.add(w);
            outs.add(out);
            gOuts.add(gOut);
        }
        gpu.flushAmaxes();
        for (int l = 0; l < layers; l++) {
            Fp8Scaling c = onCpu.get(l), g = onGpu.get(l);
            assertThat(g.input().amaxes()).as("layer %d input amaxes", l).containsExactly(c.input().amaxes());
            assertThat(g.weight().amaxes()).as("layer %d weight amaxes", l).containsExactly(c.weight().amaxes());
            assertThat(c.input().amaxes()[1]).as("layer %d: an amax was recorded", l).isPositive();
            MemorySegment x8 = arena.allocate((long) N * C), w8 = arena.allocate((long) OC * C);
            // scale 1 (fresh histories): the same codes the GEMMs multiplied
            cpu.castToFp8(x8, DType.FP8_E4M3, inps.get(l), (long) N * C, 1f);
            cpu.castToFp8(w8, DType.FP8_E4M3, ws.get(l), (long) OC * C, 1f);
            assertFp8Close("layer " + l + " out", down(gOuts.get(l)), outs.get(l),
                    fp8Bound(x8, DType.FP8_E4M3, 1f, w8, DType.FP8_E4M3, 1f, N, OC, C));
        }
    }

    /** A hybrid layer state after one step of amaxes 2, 0.1, 1e-3 (history 4): scales 224, 4480, ~5.7e7. */
    private static Fp8Scaling calibratedLayer() {
        Fp8Scaling s = Fp8Scaling.of(new DelayedScaling(
                DelayedScaling.Format.HYBRID, 4, 0, DelayedScaling.Algorithm.MAX));
        s.input().record(2f);
        s.weight().record(0.1f);
        s.gradOutput().record(1e-3f);
        s.update();
        return s;
    }

    // ---- helpers

    /** Elementwise within {@code bound} plus 2⁻²³ of the value (the fp32 addition to the earlier value). */
    private static void assertFp8Close(String what, MemorySegment got, MemorySegment ref, double[] bound) {
        for (int i = 0; i < bound.length; i++) {
            double g = got.getAtIndex(JAVA_FLOAT, i), r = ref.getAtIndex(JAVA_FLOAT, i);
            assertThat(Math.abs(g - r)).as("%s[%d]: got %s, CPU %s", what, i, g, r)
                    .isLessThanOrEqualTo(bound[i] + 0x1p-23 * Math.abs(r));
        }
    }

    /** n bytes of 0x7F, an FP8 NaN in both formats: the poison for FP8 outputs. */
    private MemorySegment codes(long n) {
        return arena.allocate(n, 16).fill((byte) 0x7F);
    }

    /** The (C, R) transpose of R×C bytes. */
    private MemorySegment transpose(MemorySegment codes, int R, int C) {
        MemorySegment t = arena.allocate((long) R * C, 16);
        for (int r = 0; r < R; r++) {
            for (int c = 0; c < C; c++) {
                t.set(JAVA_BYTE, (long) c * R + r, codes.get(JAVA_BYTE, (long) r * C + c));
            }
        }
        return t;
    }

    private static void assumeFp8() {
        assumeTrue(ctx.computeCapability() >= 89, "FP8 GEMMs need sm_89 or newer, this is sm_"
                + ctx.computeCapability());
    }

    /** Per output: FP8_TOL · Σ_k |a·b| · invA · invB, plus a tiny absolute floor. */
    private static double[] fp8Bound(MemorySegment a8, DType aType, float invA, MemorySegment b8, DType bType,
                                     float invB, int M, int N, int K) {
        double[] bound = new double[M * N];
        for (int i = 0; i < M; i++) {
            for (int j = 0; j < N; j++) {
                double s = 0;
                for (int k = 0; k < K; k++) {
                    s += Math.abs((double) aType.decode(a8.get(JAVA_BYTE, (long) i * K + k))
                            * bType.decode(b8.get(JAVA_BYTE, (long) j * K + k)));
                }
                bound[i * N + j] = FP8_TOL * s * invA * invB + 1e-30;
            }
        }
        return bound;
    }

    /** Elementwise within ROUNDED_TOL·(1 + |ref|); non-finite values must match in kind (NaN, +inf, −inf). */
    private static void assertClose(String what, MemorySegment got, MemorySegment ref, long n) {
        for (long i = 0; i < n; i++) {
            float g = got.getAtIndex(JAVA_FLOAT, i), r = ref.getAtIndex(JAVA_FLOAT, i);
            if (!Float.isFinite(r)) {
                assertThat(Float.isNaN(g) ? "NaN" : String.valueOf(g)).as("%s[%d] (seed %d)", what, i, SEED)
                        .isEqualTo(Float.isNaN(r) ? "NaN" : String.valueOf(r));
                continue;
            }
            assertThat((double) Math.abs(g - r)).as("%s[%d]: got %s, CPU %s (seed %d)", what, i, g, r, SEED)
                    .isLessThanOrEqualTo(ROUNDED_TOL * (1 + Math.abs(r)));
        }
    }

    private MemorySegment floats(long n, float magnitude, long seed) {
        SplittableRandom r = new SplittableRandom(seed);
        MemorySegment s = arena.allocate(4 * n, 16);
        for (long i = 0; i < n; i++) {
            s.setAtIndex(JAVA_FLOAT, i, (float) r.nextDouble(-1, 1) * magnitude);
        }
        return s;
    }

    private MemorySegment nans(long n) {
        MemorySegment s = arena.allocate(4 * n, 16);
        for (long i = 0; i < n; i++) {
            s.setAtIndex(JAVA_FLOAT, i, Float.NaN);
        }
        return s;
    }

    private MemorySegment copy(MemorySegment s) {
        return arena.allocate(s.byteSize(), 16).copyFrom(s);
    }

    /** A device copy of {@code host}, as a device view; freed after the test. */
    private MemorySegment up(MemorySegment host) {
        DeviceBuffer d = ctx.allocate(host.byteSize());
        buffers.add(d);
        d.copyFrom(host);
        return GpuOps.device(d);
    }

    /** The device view's bytes on the host. */
    private MemorySegment down(MemorySegment device) {
        MemorySegment host = arena.allocate(device.byteSize(), 16);
        ctx.synchronize();
        io.accel4j.cuda.CudaException.check("cuMemcpyDtoH_v2",
                io.accel4j.cuda.bindings.cuda_h.cuMemcpyDtoH_v2(host, device.address(), device.byteSize()));
        return host;
    }
}
