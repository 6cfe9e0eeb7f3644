package io.accel4j.kernels;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeFalse;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.accel4j.core.DType;
import io.accel4j.core.ops.AdamWConfig;
import io.accel4j.cpu.Parallel;
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

/**
 * Every GPU kernel of {@link GpuOps} against the CPU kernel ({@link CpuOps}, one thread) on random inputs with odd
 * sizes. Needs a GPU: skipped, with {@link Cuda#probe()}'s description as the reason, where there is none.
 */
class GpuOpsTest {

    private static final long SEED = 20261202L;
    /**
     * Element-wise fp32 with a transcendental (GELU's tanh): CUDA's tanhf is within 2 ulp and the CPU's SVML tanh
     * within 1 ulp of the true value, and the few products around it add a few ulp: |Δ| ≤ 1e-5·(1 + |ref|) is ~100
     * ulp of slack at |x| ≤ 4.
     */
    private static final double POINTWISE_TOL = 1e-5;
    /**
     * Row reductions over C ≈ 800 in fp32 in a different order (warp tree vs. vector lanes): the rounding error of a
     * sum of C terms is ≤ C·2⁻²⁴·Σ|terms| in the worst case, ~√C·2⁻²⁴ typically; 1e-4·(1 + |ref|) covers the worst
     * case for values of order 1 (mean, rstd, normalised outputs, dinp).
     */
    private static final double ROW_TOL = 1e-4;
    /** Column sums over N rows (layernorm's dweight/dbias, encoder's dwte/dwpe): N·2⁻²⁴ relative, N ≤ 300. */
    private static final double COLUMN_TOL = 1e-4;
    /**
     * Attention in fp32 on both sides, summed in different orders (tiles of 32/16 vs 64, warp trees vs vector lanes,
     * CUDA's expf vs Softmax.exp, both within 2 ulp): every output is a sum of ≤ T ≈ 1000 terms of similar size, whose
     * rounding error grows like √T·2⁻²⁴ relative to the largest term (~2e-6 at T 1000; the CPU emulation of the
     * kernels in double reference measured ≤ 5e-7 at T 130); 1e-5 of the largest magnitude of each tensor is ~5× that.
     */
    private static final double ATTENTION_TOL = 1e-5;
    /**
     * fp32 dot products of K ≤ 203 terms |a·b| ≤ 1 in another order (cuBLASLt tiles vs. the CPU's vector lanes): worst
     * case K·2⁻²⁴·Σ|a·b| ≈ 6e-4 absolute, typically √K·2⁻²⁴·… ≈ 1e-5; 2e-4·(1 + |ref|) covers outputs of order √K ≈ 8.
     * TF32 (10 mantissa bits) would be off by ~1e-2 and fail.
     */
    private static final double MATMUL_TOL = 2e-4;

    private static CudaContext ctx;
    private static GpuOps gpu;
    private static Parallel pool;
    private static CpuOps cpu;
    private final List<DeviceBuffer> buffers = new ArrayList<>();
    private final Arena arena = Arena.ofShared();

    @BeforeAll
    static void open() {
        CudaProbe probe = Cuda.probe();
        assumeTrue(probe.ready(), "no usable GPU: CUDA " + probe.describe());
        ctx = Cuda.open(0);
        gpu = new GpuOps(ctx);
        pool = new Parallel(1);
        cpu = new CpuOps(pool);
    }

    @AfterAll
    static void close() {
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

    // ---- helpers

    private MemorySegment floats(long n, double lo, double hi, long seed) {
        SplittableRandom r = new SplittableRandom(seed);
        MemorySegment s = arena.allocate(JAVA_FLOAT, n);
        for (long i = 0; i < n; i++) {
            s.setAtIndex(JAVA_FLOAT, i, (float) r.nextDouble(lo, hi));
        }
        return s;
    }

    private MemorySegment ints(long n, int bound, long seed) {
        SplittableRandom r = new SplittableRandom(seed);
        MemorySegment s = arena.allocate(JAVA_INT, n);
        for (long i = 0; i < n; i++) {
            s.setAtIndex(JAVA_INT, i, r.nextInt(bound));
        }
        return s;
    }

    private MemorySegment nans(long n) {
        MemorySegment s = arena.allocate(JAVA_FLOAT, n);
        for (long i = 0; i < n; i++) {
            s.setAtIndex(JAVA_FLOAT, i, Float.NaN);
        }
        return s;
    }

    private MemorySegment copy(MemorySegment host) {
        return arena.allocate(host.byteSize(), 16).copyFrom(host);
    }

    /** A device buffer holding a copy of {@code host}, as a device view for GpuOps. */
    private MemorySegment up(MemorySegment host) {
        DeviceBuffer b = ctx.allocate(host.byteSize());
        buffers.add(b);
        b.copyFrom(host);
        return GpuOps.device(b);
    }

    /** The device buffer behind {@code view} copied back to a new host segment. */
    private MemorySegment down(MemorySegment view) {
        DeviceBuffer b = buffers.stream().filter(x -> x.address() == view.address()).findFirst().orElseThrow();
        MemorySegment host = arena.allocate(b.byteSize(), 16);
        b.copyTo(host);
        return host;
    }

    private static void assertClose(String what, MemorySegment gpuOut, MemorySegment cpuOut, long n, double tol) {
        for (long i = 0; i < n; i++) {
            float g = gpuOut.getAtIndex(JAVA_FLOAT, i), c = cpuOut.getAtIndex(JAVA_FLOAT, i);
            if (!(Math.abs(g - c) <= tol * (1 + Math.abs(c)))) {
                throw new AssertionError(what + "[" + i + "]: gpu " + g + ", cpu " + c + " (tolerance " + tol
                        + "·(1+|cpu|), seed " + SEED + ")");
            }
        }
    }

    /** |gpu − cpu| ≤ tol·max|cpu| for every element (a tolerance relative to the tensor's largest magnitude). */
    private static void assertCloseToLargest(String what, MemorySegment gpuOut, MemorySegment cpuOut, long n,
                                             double tol) {
        double largest = 0;
        for (long i = 0; i < n; i++) {
            largest = Math.max(largest, Math.abs(cpuOut.getAtIndex(JAVA_FLOAT, i)));
        }
        for (long i = 0; i < n; i++) {
            float g = gpuOut.getAtIndex(JAVA_FLOAT, i), c = cpuOut.getAtIndex(JAVA_FLOAT, i);
            if (!(Math.abs(g - c) <= tol * largest)) {
                throw new AssertionError(what + "[" + i + "]: gpu " + g + ", cpu " + c + " (tolerance " + tol
                        + "·" + largest + ", the largest |cpu|; seed " + SEED + ")");
            }
        }
    }

    private static void assertSameBits(String what, MemorySegment gpuOut, MemorySegment cpuOut, long bytes) {
        long at = gpuOut.asSlice(0, bytes).mismatch(cpuOut.asSlice(0, bytes));
        assertThat(at).as("%s: first differing byte (seed %d)", what, SEED).isEqualTo(-1);
    }

    // ---- pointwise

    @Test
    void geluMatchesCpu() {
        long n = (1 << 20) + 7;
        MemorySegment x = floats(n, -4, 4, SEED), dout = floats(n, -1, 1, SEED + 1);
        MemorySegment prefill = floats(n, -1, 1, SEED + 2);
        MemorySegment out = nans(n), dx = copy(prefill);
        cpu.geluForward(out, x, n);
        cpu.geluBackward(dx, x, dout, n);
        MemorySegment gOut = up(nans(n)), gDx = up(prefill);
        gpu.geluForward(gOut, up(x), n);
        gpu.geluBackward(gDx, up(x), up(dout), n);
        assertClose("gelu out", down(gOut), out, n, POINTWISE_TOL);
        assertClose("gelu dinp", down(gDx), dx, n, POINTWISE_TOL);
    }

    @Test
    void residualMatchesCpuBitForBit() {
        long n = (1 << 20) + 3;
        MemorySegment a = floats(n, -2, 2, SEED), b = floats(n, -2, 2, SEED + 1), d = floats(n, -1, 1, SEED + 2);
        MemorySegment p1 = floats(n, -1, 1, SEED + 3), p2 = floats(n, -1, 1, SEED + 4);
        MemorySegment out = nans(n), d1 = copy(p1), d2 = copy(p2);
        cpu.residualForward(out, a, b, n);
        cpu.residualBackward(d1, d2, d, n);
        MemorySegment gOut = up(nans(n)), gD1 = up(p1), gD2 = up(p2);
        gpu.residualForward(gOut, up(a), up(b), n);
        gpu.residualBackward(gD1, gD2, up(d), n);
        assertSameBits("residual out", down(gOut), out, 4 * n);
        assertSameBits("residual dinp1", down(gD1), d1, 4 * n);
        assertSameBits("residual dinp2", down(gD2), d2, 4 * n);
    }

    // ---- encoder and layernorm

    @Test
    void encoderMatchesCpu() {
        int B = 3, T = 97, C = 131, V = 503;
        long btc = (long) B * T * C;
        MemorySegment inp = ints((long) B * T, V, SEED), wte = floats((long) V * C, -1, 1, SEED + 1);
        MemorySegment wpe = floats((long) T * C, -1, 1, SEED + 2), dout = floats(btc, -1, 1, SEED + 3);
        MemorySegment pWte = floats((long) V * C, -1, 1, SEED + 4), pWpe = floats((long) T * C, -1, 1, SEED + 5);
        MemorySegment out = nans(btc), dwte = copy(pWte), dwpe = copy(pWpe);
        cpu.encoderForward(out, inp, wte, wpe, B, T, C, V);
        cpu.encoderBackward(dwte, dwpe, dout, inp, B, T, C, V);
        MemorySegment gInp = up(inp), gOut = up(nans(btc)), gDwte = up(pWte), gDwpe = up(pWpe);
        gpu.encoderForward(gOut, gInp, up(wte), up(wpe), B, T, C, V);
        gpu.encoderBackward(gDwte, gDwpe, up(dout), gInp, B, T, C, V);
        assertSameBits("encoder out", down(gOut), out, 4 * btc);
        assertClose("encoder dwte", down(gDwte), dwte, (long) V * C, COLUMN_TOL);
        assertClose("encoder dwpe", down(gDwpe), dwpe, (long) T * C, COLUMN_TOL);
    }

    @Test
    void layernormMatchesCpu() {
        int N = 301, C = 771;
        long nc = (long) N * C;
        MemorySegment x = floats(nc, -3, 5, SEED), w = floats(C, 0.5, 1.5, SEED + 1), b = floats(C, -1, 1, SEED + 2);
        MemorySegment dout = floats(nc, -1, 1, SEED + 3);
        MemorySegment pDx = floats(nc, -1, 1, SEED + 4), pDw = floats(C, -1, 1, SEED + 5);
        MemorySegment pDb = floats(C, -1, 1, SEED + 6);
        MemorySegment out = nans(nc), mean = nans(N), rstd = nans(N), dx = copy(pDx), dw = copy(pDw), db = copy(pDb);
        cpu.layernormForward(out, mean, rstd, x, w, b, N, C);
        cpu.layernormBackward(dx, dw, db, dout, x, w, mean, rstd, N, C);
        MemorySegment gX = up(x), gW = up(w), gOut = up(nans(nc)), gMean = up(nans(N)), gRstd = up(nans(N));
        MemorySegment gDx = up(pDx), gDw = up(pDw), gDb = up(pDb);
        gpu.layernormForward(gOut, gMean, gRstd, gX, gW, up(b), N, C);
        gpu.layernormBackward(gDx, gDw, gDb, up(dout), gX, gW, gMean, gRstd, N, C);
        assertClose("layernorm out", down(gOut), out, nc, ROW_TOL);
        assertClose("layernorm mean", down(gMean), mean, N, ROW_TOL);
        assertClose("layernorm rstd", down(gRstd), rstd, N, ROW_TOL);
        assertClose("layernorm dinp", down(gDx), dx, nc, ROW_TOL);
        assertClose("layernorm dweight", down(gDw), dw, C, COLUMN_TOL);
        assertClose("layernorm dbias", down(gDb), db, C, COLUMN_TOL);
    }

    // ---- classifier

    @Test
    void classifierMatchesCpu() {
        int N = 37, V = 1003, Vp = 1024;
        long nv = (long) N * Vp;
        MemorySegment logits = floats(nv, -6, 6, SEED), targets = ints(N, V, SEED + 1);
        MemorySegment losses = nans(N), lossesFb = nans(N), dlogits = copy(logits);
        double mean = cpu.classifierForward(losses, logits, targets, N, V, Vp);
        double meanFb = cpu.classifierForwardBackward(dlogits, lossesFb, targets, N, V, Vp, 1f / N);
        MemorySegment gLogits = up(logits), gTargets = up(targets), gLosses = up(nans(N));
        double gMean = gpu.classifierForward(gLosses, gLogits, gTargets, N, V, Vp);
        // a loss is log Σexp (≈ log V + 6) minus a logit: fp32 rounding of the sum of V terms, ~1e-6 relative
        assertClose("classifier losses", down(gLosses), losses, N, 1e-5);
        assertThat(gMean).as("mean loss (seed %d)", SEED).isCloseTo(mean, org.assertj.core.data.Offset.offset(1e-4));
        assertSameBits("classifierForward leaves logits", down(gLogits), logits, 4 * nv);
        double gMeanFb = gpu.classifierForwardBackward(gLogits, gLosses, gTargets, N, V, Vp, 1f / N);
        assertThat(gMeanFb).isCloseTo(meanFb, org.assertj.core.data.Offset.offset(1e-4));
        // dlogits = (p − onehot)/N with |p − onehot| ≤ 1: 1e-5·(1 + |ref|) absolute is ≥ 1e-5, far above fp32 noise
        MemorySegment g = down(gLogits);
        assertClose("classifier dlogits", g, dlogits, nv, 1e-5);
        for (int i = 0; i < N; i++) {
            for (int j = V; j < Vp; j++) {
                assertThat(g.getAtIndex(JAVA_FLOAT, (long) i * Vp + j)).as("padding [%d,%d]", i, j).isEqualTo(0f);
            }
        }
    }

    // ---- optimizer: the GPU does the CPU's fp32 operations in the same order without FMA, so bits agree

    @Test
    void adamwMatchesCpuBitForBit() {
        long n = 100_003, offset = 12_345;
        AdamWConfig k = new AdamWConfig(3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f);
        MemorySegment p = floats(n, -1, 1, SEED), g = floats(n, -1, 1, SEED + 1);
        MemorySegment m = floats(n, -0.1, 0.1, SEED + 2), v = floats(n, 0, 0.01, SEED + 3);
        MemorySegment gP = up(p), gG = up(g), gM = up(m), gV = up(v);
        MemorySegment cP = copy(p), cM = copy(m), cV = copy(v);
        cpu.adamw(cP, g, cM, cV, offset, n, k, 7, 0.5f);
        gpu.adamw(gP, gG, gM, gV, offset, n, k, 7, 0.5f);
        assertSameBits("adamw params", down(gP), cP, 4 * n);
        assertSameBits("adamw m", down(gM), cM, 4 * n);
        assertSameBits("adamw v", down(gV), cV, 4 * n);
    }

    @Test
    void adamwBf16MatchesCpuBitForBit() {
        long n = 65_537, offset = 1L << 33;
        long seed = 0x5EED_0000_0001L;
        AdamWConfig k = new AdamWConfig(1e-3f, 0.9f, 0.999f, 1e-8f, 0f);
        MemorySegment p = floats(n, -1, 1, SEED), g = floats(n, -10, 10, SEED + 1);
        MemorySegment m = floats(n, -0.1, 0.1, SEED + 2), v = floats(n, 0, 0.01, SEED + 3);
        MemorySegment cBf = arena.allocate(2 * n, 16), cP = copy(p), cM = copy(m), cV = copy(v);
        cpu.adamwBf16(cBf, cP, g, cM, cV, offset, n, k, 1, 0.25f, seed);
        DeviceBuffer bf = ctx.allocate(2 * n);
        buffers.add(bf);
        MemorySegment gBf = GpuOps.device(bf), gP = up(p), gM = up(m), gV = up(v);
        gpu.adamwBf16(gBf, gP, up(g), gM, gV, offset, n, k, 1, 0.25f, seed);
        assertSameBits("adamwBf16 master", down(gP), cP, 4 * n);
        assertSameBits("adamwBf16 m", down(gM), cM, 4 * n);
        assertSameBits("adamwBf16 v", down(gV), cV, 4 * n);
        assertSameBits("adamwBf16 bf16 copy", down(gBf), cBf, 2 * n);
    }

    @Test
    void adamwOverRangesMatchesCpuBitForBit() {
        long n = AdamWRangesCase.ELEMENTS;
        AdamWConfig k = AdamWRangesCase.CONFIG;
        for (boolean bf16 : new boolean[] {false, true}) {
            MemorySegment p = floats(n, -1, 1, SEED), g = floats(n, -10, 10, SEED + 1);
            MemorySegment m = floats(n, -0.1, 0.1, SEED + 2), v = floats(n, 0, 0.01, SEED + 3);
            MemorySegment cP = copy(p), cM = copy(m), cV = copy(v), cBf = arena.allocate(2 * n, 16).fill((byte) -1);
            DeviceBuffer bf = ctx.allocate(2 * n);
            buffers.add(bf);
            bf.fill((byte) -1);
            MemorySegment gBf = GpuOps.device(bf), gP = up(p), gG = up(g), gM = up(m), gV = up(v);
            if (bf16) {
                cpu.adamwBf16(cBf, cP, g, cM, cV, AdamWRangesCase.RANGES, k, AdamWRangesCase.STEP,
                        AdamWRangesCase.GRAD_SCALE, AdamWRangesCase.SEED);
                gpu.adamwBf16(gBf, gP, gG, gM, gV, AdamWRangesCase.RANGES, k, AdamWRangesCase.STEP,
                        AdamWRangesCase.GRAD_SCALE, AdamWRangesCase.SEED);
            } else {
                cpu.adamw(cP, g, cM, cV, AdamWRangesCase.RANGES, k, AdamWRangesCase.STEP, AdamWRangesCase.GRAD_SCALE);
                gpu.adamw(gP, gG, gM, gV, AdamWRangesCase.RANGES, k, AdamWRangesCase.STEP, AdamWRangesCase.GRAD_SCALE);
            }
            String what = bf16 ? "adamwBf16 over ranges " : "adamw over ranges ";
            assertSameBits(what + "params", down(gP), cP, 4 * n);
            assertSameBits(what + "m", down(gM), cM, 4 * n);
            assertSameBits(what + "v", down(gV), cV, 4 * n);
            assertSameBits(what + "bf16 copy", down(gBf), cBf, 2 * n);
        }
    }

    // ---- reductions

    @Test
    void reductionsMatchCpu() {
        long n = (3L << 20) + 5;
        MemorySegment x = floats(n, -3, 3, SEED);
        MemorySegment gX = up(x);
        // both sum squares of fp32 values exactly in float64; only the order differs: n·2⁻⁵³ relative
        assertThat(gpu.sumOfSquares(gX, n)).isCloseTo(cpu.sumOfSquares(x, n),
                org.assertj.core.data.Percentage.withPercentage(1e-9));
        assertThat(gpu.amax(gX, n)).isEqualTo(cpu.amax(x, n));
        assertThat(gpu.hasNonFinite(gX, n)).isFalse();
        assertThat(gpu.sumOfSquares(gX, 0)).isZero();
        assertThat(gpu.amax(gX, 0)).isZero();
        assertThat(gpu.hasNonFinite(gX, 0)).isFalse();

        x.setAtIndex(JAVA_FLOAT, n - 1, Float.NEGATIVE_INFINITY);
        MemorySegment gInf = up(x);
        assertThat(gpu.hasNonFinite(gInf, n)).isTrue();
        assertThat(gpu.amax(gInf, n)).isEqualTo(Float.POSITIVE_INFINITY);
        assertThat(gpu.sumOfSquares(gInf, n)).isInfinite();
        x.setAtIndex(JAVA_FLOAT, n / 2, Float.NaN);
        MemorySegment gNan = up(x);
        assertThat(gpu.hasNonFinite(gNan, n)).isTrue();
        assertThat(gpu.amax(gNan, n)).isNaN();
        assertThat(gpu.sumOfSquares(gNan, n)).isNaN();
    }

    // ---- attention: against the CPU's FlashAttention (CpuOps' default) on odd T, partial tiles and padded heads

    @Test
    void attentionHeadSize64ThreeHeadsMatchesCpu() {
        attentionMatchesCpu(2, 67, 192, 3);
    }

    @Test
    void attentionHeadSize128OneHeadMatchesCpu() {
        attentionMatchesCpu(1, 67, 128, 1);
    }

    @Test
    void attentionLongSequencesMatchCpu() {
        attentionMatchesCpu(1, 1000, 192, 3); // hs 64
        attentionMatchesCpu(1, 1000, 128, 1); // hs 128
    }

    @Test
    void attentionHeadSize128ThreeHeadsMatchesCpu() {
        attentionMatchesCpu(2, 131, 384, 3);
    }

    @Test
    void attentionPaddedHeadSizesMatchCpu() {
        attentionMatchesCpu(1, 35, 96, 2);  // hs 48, padded to 64
        attentionMatchesCpu(2, 33, 40, 2);  // hs 20, padded to 32
        attentionMatchesCpu(1, 1, 64, 1);   // a single position
    }

    @Test
    void attentionMatchesNaiveCpu() {
        int B = 1, T = 97, C = 192, NH = 3;
        long btc = (long) B * T * C, nLse = (long) B * NH * T;
        MemorySegment qkv = floats(3 * btc, -2, 2, SEED);
        MemorySegment out = nans(btc), lse = nans(nLse);
        new CpuOps(pool, CpuOps.AttentionKernel.NAIVE).attentionForward(out, lse, qkv, B, T, C, NH);
        MemorySegment gOut = up(nans(btc)), gLse = up(nans(nLse));
        gpu.attentionForward(gOut, gLse, up(qkv), B, T, C, NH);
        assertCloseToLargest("attention out vs naive", down(gOut), out, btc, ATTENTION_TOL);
        assertCloseToLargest("attention lse vs naive", down(gLse), lse, nLse, ATTENTION_TOL);
    }

    /**
     * Forward (out and lse poisoned with NaN) and backward (into a pre-filled dqkv) against the CPU, and the backward
     * run twice on the GPU gives the same bits (no atomics).
     */
    private void attentionMatchesCpu(int B, int T, int C, int NH) {
        long btc = (long) B * T * C, nLse = (long) B * NH * T;
        long seed = SEED + 31L * T + C + NH;
        MemorySegment qkv = floats(3 * btc, -2, 2, seed), dout = floats(btc, -1, 1, seed + 1);
        MemorySegment prefill = floats(3 * btc, -1, 1, seed + 2);
        MemorySegment out = nans(btc), lse = nans(nLse), dqkv = copy(prefill);
        cpu.attentionForward(out, lse, qkv, B, T, C, NH);
        cpu.attentionBackward(dqkv, dout, qkv, out, lse, B, T, C, NH);
        MemorySegment gQkv = up(qkv), gOut = up(nans(btc)), gLse = up(nans(nLse));
        gpu.attentionForward(gOut, gLse, gQkv, B, T, C, NH);
        String shape = " (B " + B + ", T " + T + ", C " + C + ", NH " + NH + ")";
        assertCloseToLargest("attention out" + shape, down(gOut), out, btc, ATTENTION_TOL);
        assertCloseToLargest("attention lse" + shape, down(gLse), lse, nLse, ATTENTION_TOL);
        MemorySegment gDout = up(dout), gDqkv = up(prefill), gDqkv2 = up(prefill);
        gpu.attentionBackward(gDqkv, gDout, gQkv, gOut, gLse, B, T, C, NH);
        gpu.attentionBackward(gDqkv2, gDout, gQkv, gOut, gLse, B, T, C, NH);
        MemorySegment got = down(gDqkv);
        assertCloseToLargest("attention dqkv" + shape, got, dqkv, 3 * btc, ATTENTION_TOL);
        assertSameBits("attention dqkv, second run" + shape, down(gDqkv2), got, 4 * 3 * btc);
    }

    // ---- matmul (cuBLASLt)

    @Test
    void matmulMatchesCpu() {
        assumeTrue(CudaLibraries.cublasLt().found(),
                CudaLibraries.cublasLt().notFoundMessage());
        int N = 97, C = 131, OC = 203;
        MemorySegment inp = floats((long) N * C, -1, 1, SEED), w = floats((long) OC * C, -1, 1, SEED + 1);
        MemorySegment b = floats(OC, -1, 1, SEED + 2), dout = floats((long) N * OC, -1, 1, SEED + 3);
        MemorySegment pDx = floats((long) N * C, -1, 1, SEED + 4), pDw = floats((long) OC * C, -1, 1, SEED + 5);
        MemorySegment pDb = floats(OC, -1, 1, SEED + 6);
        MemorySegment out = nans((long) N * OC), outNoBias = nans((long) N * OC);
        MemorySegment dx = copy(pDx), dw = copy(pDw), db = copy(pDb), dx2 = copy(pDx), dw2 = copy(pDw);
        cpu.matmulForward(out, inp, w, b, N, C, OC);
        cpu.matmulForward(outNoBias, inp, w, null, N, C, OC);
        cpu.matmulBackward(dx, dw, db, dout, inp, w, N, C, OC);
        cpu.matmulBackward(dx2, dw2, null, dout, inp, w, N, C, OC);
        MemorySegment gInp = up(inp), gW = up(w), gDout = up(dout), gB = up(b);
        MemorySegment gOut = up(nans((long) N * OC)), gOutNoBias = up(nans((long) N * OC));
        MemorySegment gDx = up(pDx), gDw = up(pDw), gDb = up(pDb), gDx2 = up(pDx), gDw2 = up(pDw);
        for (int rep = 0; rep < 2; rep++) { // the second time with the cached plan
            MemorySegment o = rep == 0 ? gOut : up(nans((long) N * OC));
            gpu.matmulForward(o, gInp, gW, gB, N, C, OC);
            assertClose("matmul out (run " + rep + ")", down(o), out, (long) N * OC, MATMUL_TOL);
        }
        gpu.matmulForward(gOutNoBias, gInp, gW, null, N, C, OC);
        gpu.matmulBackward(gDx, gDw, gDb, gDout, gInp, gW, N, C, OC);
        gpu.matmulBackward(gDx2, gDw2, null, gDout, gInp, gW, N, C, OC);
        assertClose("matmul out, no bias", down(gOutNoBias), outNoBias, (long) N * OC, MATMUL_TOL);
        assertClose("matmul dinp", down(gDx), dx, (long) N * C, MATMUL_TOL);
        assertClose("matmul dweight", down(gDw), dw, (long) OC * C, MATMUL_TOL);
        assertClose("matmul dbias", down(gDb), db, OC, COLUMN_TOL);
        assertClose("matmul dinp, no bias", down(gDx2), dx2, (long) N * C, MATMUL_TOL);
        assertClose("matmul dweight, no bias", down(gDw2), dw2, (long) OC * C, MATMUL_TOL);
        // an operand at an odd float offset (4-byte aligned): a plan for that alignment, same numbers
        MemorySegment shifted = up(nans((long) N * OC + 1));
        MemorySegment gOut4 = shifted.asSlice(4);
        gpu.matmulForward(gOut4, gInp, gW, gB, N, C, OC);
        assertClose("matmul out at a 4-byte aligned address", down(shifted).asSlice(4), out, (long) N * OC,
                MATMUL_TOL);
    }

    @Test
    void matmulWithoutCublasLtSaysWhatIsMissing() {
        assumeFalse(CudaLibraries.cublasLt().found(),
                "libcublasLt is installed here: nothing is missing");
        MemorySegment small = up(floats(10, -1, 1, SEED));
        assertThatThrownBy(() -> gpu.matmulForward(small, small, small, null, 1, 1, 1))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageStartingWith("matmulForward on the GPU needs cuBLASLt: libcublasLt.so.13 not found");
        assertThat(gpu.describe()).contains("no cuBLASLt");
    }

    // ---- casts: bit for bit the CPU's (core's DType.encode / decode)

    /**
     * n floats: random bit patterns (every exponent, subnormals, infinities, NaNs with payloads), random values in
     * [-2·max, 2·max] of {@code type}, and the edge cases of every format (ties, overflow thresholds, the smallest
     * subnormals and half of them, signed zeros).
     */
    private MemorySegment castInputs(long n, float max, long seed) {
        SplittableRandom r = new SplittableRandom(seed);
        float[] edges = {0f, -0f, 1f, -1f, Float.MIN_VALUE, -Float.MIN_NORMAL, Float.MAX_VALUE, Float.POSITIVE_INFINITY,
            Float.NEGATIVE_INFINITY, Float.NaN, Float.intBitsToFloat(0xFFC0_0001), Float.intBitsToFloat(0x7F80_0001),
            Float.intBitsToFloat(0x7FA0_1234), 448f, 464f, Math.nextUp(464f), Math.nextDown(464f), 480f, 57344f,
            61440f, Math.nextDown(61440f), 65504f, 65520f, Math.nextDown(65520f), 0x1p-9f, 0x1p-10f,
            Math.nextUp(0x1p-10f), 0x1.8p-9f, 0x1p-16f, 0x1p-17f, Math.nextUp(0x1p-17f), 0x1p-24f, 0x1p-25f,
            0x1.8p-24f, 0x1.ffp127f, 0x1.fep127f, Math.nextDown(0x1.ffp127f), 1.00390625f, 1.01171875f, 1.0625f,
            1.1875f, 1.125f, -1.0625f};
        MemorySegment s = arena.allocate(JAVA_FLOAT, n);
        for (long i = 0; i < n; i++) {
            float x;
            if (i < edges.length) {
                x = edges[(int) i];
            } else if (i % 2 == 0) {
                x = Float.intBitsToFloat(r.nextInt());
            } else {
                x = (float) r.nextDouble(-2.0 * max, 2.0 * max);
            }
            s.setAtIndex(JAVA_FLOAT, i, x);
        }
        return s;
    }

    /** 16-bit codes equal, except that fp16 NaNs only need the sign (the JDK's NaN payload is platform-dependent). */
    private static void assertSameHalves(String what, MemorySegment gpuOut, MemorySegment cpuOut, long n,
                                         boolean fp16) {
        for (long i = 0; i < n; i++) {
            int g = gpuOut.getAtIndex(JAVA_SHORT, i) & 0xFFFF;
            int c = cpuOut.getAtIndex(JAVA_SHORT, i) & 0xFFFF;
            boolean sameNan = fp16 && (c & 0x7FFF) > 0x7C00 && (g & 0x7FFF) > 0x7C00 && (c & 0x8000) == (g & 0x8000);
            if (g != c && !sameNan) {
                throw new AssertionError(String.format("%s[%d]: gpu 0x%04x, cpu 0x%04x (seed %d)", what, i, g, c,
                        SEED));
            }
        }
    }

    @Test
    void castsToBf16AndFp16MatchCpuBitForBit() {
        long n = (1 << 20) + 11;
        for (DType t : List.of(DType.BF16, DType.FP16)) {
            MemorySegment x = castInputs(n, t.maxFinite(), SEED + t.ordinal());
            MemorySegment c = arena.allocate(2 * n, 16);
            cpu.castFromFp32(c, t, x, n);
            DeviceBuffer d = ctx.allocate(2 * n);
            buffers.add(d);
            d.fill((byte) 0x55);
            gpu.castFromFp32(GpuOps.device(d), t, up(x), n);
            assertSameHalves("castFromFp32 " + t, down(GpuOps.device(d)), c, n, t == DType.FP16);
        }
        MemorySegment x = castInputs(1001, 1, SEED);
        MemorySegment g = up(nans(1001));
        gpu.castFromFp32(g, DType.FP32, up(x), 1001);
        assertSameBits("castFromFp32 FP32 (a copy)", down(g), x, 4 * 1001);
    }

    @Test
    void castsToFp8MatchCpuBitForBitWithTheAmax() {
        long n = (1 << 20) + 13;
        for (DType t : List.of(DType.FP8_E4M3, DType.FP8_E5M2)) {
            for (float scale : new float[] {1f, t.maxFinite() / 37.5f, 0.75f}) {
                MemorySegment x = castInputs(n, t.maxFinite(), SEED + t.ordinal());
                MemorySegment c = arena.allocate(n, 16);
                float cpuAmax = cpu.castToFp8(c, t, x, n, scale);
                DeviceBuffer d = ctx.allocate(n);
                buffers.add(d);
                d.fill((byte) 0x55);
                float gpuAmax = gpu.castToFp8(GpuOps.device(d), t, up(x), n, scale);
                assertSameBits("castToFp8 " + t + " scale " + scale, down(GpuOps.device(d)), c, n);
                assertThat(Float.floatToRawIntBits(gpuAmax)).as("amax, %s scale %s", t, scale)
                        .isEqualTo(Float.floatToRawIntBits(cpuAmax));
            }
        }
        assertThat(gpu.castToFp8(up(nans(4)), DType.FP8_E4M3, up(nans(4)), 0, 1f)).isZero();
    }

    @Test
    void castsToFp32MatchCpuForEveryCode() {
        // every 16-bit and every 8-bit code, twice over with an odd tail
        long n16 = 2 * 65536 + 3, n8 = 2 * 256 + 5;
        MemorySegment h = arena.allocate(2 * n16, 16), b = arena.allocate(n8, 16);
        for (long i = 0; i < n16; i++) {
            h.setAtIndex(JAVA_SHORT, i, (short) i);
        }
        for (long i = 0; i < n8; i++) {
            b.set(JAVA_BYTE, i, (byte) i);
        }
        for (DType t : DType.values()) {
            if (t == DType.FP32) {
                continue;
            }
            long n = t.byteSize() == 2 ? n16 : n8;
            MemorySegment src = t.byteSize() == 2 ? h : b;
            for (float scaleInv : t.isFp8() ? new float[] {1f, 1f / 37.25f, 0x1p-20f} : new float[] {1f}) {
                MemorySegment c = nans(n);
                cpu.castToFp32(c, src, t, n, scaleInv);
                MemorySegment g = up(nans(n));
                gpu.castToFp32(g, up(src), t, n, scaleInv);
                MemorySegment gh = down(g);
                for (long i = 0; i < n; i++) {
                    int gb = Float.floatToRawIntBits(gh.getAtIndex(JAVA_FLOAT, i));
                    int cb = Float.floatToRawIntBits(c.getAtIndex(JAVA_FLOAT, i));
                    boolean sameNan = t == DType.FP16 && Float.isNaN(Float.intBitsToFloat(gb))
                            && Float.isNaN(Float.intBitsToFloat(cb)) && (gb < 0) == (cb < 0);
                    if (gb != cb && !sameNan) {
                        throw new AssertionError(String.format("castToFp32 %s scaleInv %s code 0x%x: gpu 0x%08x,"
                                + " cpu 0x%08x", t, scaleInv, i, gb, cb));
                    }
                }
            }
        }
    }

    // ---- arguments and what is not on the GPU yet

    @Test
    void tooShortSegmentsAndMissingKernelsAreReported() {
        MemorySegment small = up(floats(10, -1, 1, SEED));
        assertThatThrownBy(() -> gpu.geluForward(small, small, 11)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("out holds 40 bytes, needs 11");
        assertThatThrownBy(() -> gpu.residualForward(small, small, small, -1))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("n must be >= 0");
        assertThatThrownBy(() -> gpu.attentionForward(small, small, small, 1, 1, 264, 2))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("head sizes up to 128, got hs = C/NH = 264/2 = 132");
        assertThatThrownBy(() -> gpu.attentionForward(small, small, small, 1, 1, 10, 3))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("C (10) must be divisible by NH (3)");
        assertThatThrownBy(() -> gpu.attentionBackward(small, small, small, small, small, 1, 2, 4, 1))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("dqkv holds 40 bytes, needs 24 × 4");
        assertThatThrownBy(() -> gpu.matmulForward(small, small, small, small, 2, 2, 3))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("weight holds 40 bytes, needs 6");
        assertThatThrownBy(() -> gpu.castFromFp32(small, DType.FP8_E4M3, small, 1))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("use castToFp8");
        assertThatThrownBy(() -> gpu.castToFp8(small, DType.FP8_E4M3, small, 1, 0f))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("scale must be finite and > 0");
        assertThatThrownBy(() -> gpu.castFromFp32(small.asSlice(4), DType.BF16, small, 4))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("overlaps");
        assertThat(gpu.describe()).startsWith("cuda: ");
    }
}
