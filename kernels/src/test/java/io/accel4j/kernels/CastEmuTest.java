package io.accel4j.kernels;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;
import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.cuda.CudaKernel.Dim;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.SplittableRandom;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * cast.cu's kernels, the very source, run on the CPU ({@code src/test/cuda/cast_emu.cpp} through {@code cuda_emu.h},
 * the element conversions from CUDA's own host headers) with {@link GpuOps}'s and {@link GpuMatmul}'s launches, bit
 * for bit against {@link CpuOps}'s casts. cast_transpose_f32_to_fp8 against {@link CpuOps#castToFp8} and a transpose
 * of its codes: codes, transposed codes and the amax; odd R and C (partial tiles), both formats, saturating values, a
 * NaN and an infinity, and a case with more tiles than the grid has blocks (the grid-stride loop over tiles). The
 * element-wise casts on every 16-bit or 8-bit code (decodes) and on odd-length random fp32 (encodes, with fp8's block
 * amax), and the reduction of a cast's partials into GpuMatmul's device amax slot. Checks the tiling, the
 * shared-memory transpose, the boundaries and the amax reductions without a GPU
 * ({@link CastHostCheckTest} checks the conversions themselves). Skipped without g++ or the CUDA headers.
 */
class CastEmuTest {

    private static final long SEED = 20261204L;
    /** Not a code the cast writes here (0xFF is −NaN in both formats; the inputs' NaN is positive). */
    private static final byte POISON = (byte) 0xFF;

    @TempDir
    static Path tmp;
    private static Path exe;
    private static Parallel pool;
    private static CpuOps cpu;
    private final Arena arena = Arena.ofConfined();
    private final SplittableRandom random = new SplittableRandom(SEED);

    @BeforeAll
    static void compile() throws Exception {
        Path cuda = Emulator.cudaInclude();
        exe = Emulator.compile(tmp, "cast_emu", "cast_emu", "-ffp-contract=off", "-I" + cuda);
        pool = new Parallel(1);
        cpu = new CpuOps(pool);
    }

    @AfterAll
    static void close() {
        if (pool != null) {
            pool.close();
        }
    }

    @AfterEach
    void free() {
        arena.close();
    }

    @Test
    void e4m3MatchesCpuCastAndItsTranspose() throws Exception {
        check(DType.FP8_E4M3, 37, 67, 0.37f, true);
        check(DType.FP8_E4M3, 1, 1, 1f, false);
        check(DType.FP8_E4M3, 64, 32, 3f, false); // whole tiles only
    }

    @Test
    void e5m2MatchesCpuCastAndItsTranspose() throws Exception {
        check(DType.FP8_E5M2, 67, 37, 2.5f, true);
        check(DType.FP8_E5M2, 3, 100, 0.01f, false);
    }

    @Test
    void moreTilesThanBlocksMatchCpu() throws Exception {
        int side = 33 * 32 - 5; // 33·33 = 1089 tiles > the 1024 blocks of the grid
        assertThat(CastTransposeGpu.grid(side, side + 2)).isLessThan(33 * 33);
        check(DType.FP8_E4M3, side, side + 2, 0.5f, false);
    }

    @Test
    void encodesMatchCpuBitForBit() throws Exception {
        long n = 37 * 67;
        MemorySegment src = randomFloats(n);
        src.setAtIndex(JAVA_FLOAT, 5, Float.POSITIVE_INFINITY);
        src.setAtIndex(JAVA_FLOAT, 6, -0f);
        src.setAtIndex(JAVA_FLOAT, 7, Float.MIN_VALUE);
        int grid = GpuLaunch.blocks(n);
        // no NaN for bf16 and fp16: the JDK's fp16 NaN payload varies (CastHostCheckTest); fp8's NaN is added below
        for (DType t : new DType[] {DType.BF16, DType.FP16}) {
            MemorySegment dst = arena.allocate(2 * n).fill(POISON), cDst = arena.allocate(2 * n).fill(POISON);
            cpu.castFromFp32(cDst, t, src, n);
            Emulator.launch(exe, tmp, t == DType.BF16 ? "cast_f32_to_bf16" : "cast_f32_to_f16", Dim.of(grid),
                    Dim.of(GpuLaunch.BLOCK), Emulator.buffers("dst", dst, "src", src), n);
            assertThat(dst.mismatch(cDst)).as("%s codes: first differing byte (-1 = none)", t).isEqualTo(-1L);
        }
        src.setAtIndex(JAVA_FLOAT, n - 1, Float.NaN);
        for (DType t : new DType[] {DType.FP8_E4M3, DType.FP8_E5M2}) {
            float scale = t == DType.FP8_E4M3 ? 0.37f : 2.5f;
            MemorySegment dst = arena.allocate(n).fill(POISON), cDst = arena.allocate(n).fill(POISON);
            float cAmax = cpu.castToFp8(cDst, t, src, n, scale);
            MemorySegment partial = poisonedPartials(grid);
            Emulator.launch(exe, tmp, "cast_f32_to_fp8", Dim.of(grid), Dim.of(GpuLaunch.BLOCK),
                    Emulator.buffers("dst", dst, "partial", partial, "src", src), n, scale,
                    t == DType.FP8_E4M3 ? 1 : 0);
            assertThat(dst.mismatch(cDst)).as("%s codes: first differing byte (-1 = none)", t).isEqualTo(-1L);
            checkAmax(t.toString(), partial, grid, cAmax);
        }
    }

    @Test
    void decodesOfEveryCodeMatchCpuBitForBit() throws Exception {
        for (DType t : new DType[] {DType.BF16, DType.FP16, DType.FP8_E4M3, DType.FP8_E5M2}) {
            int bytes = t.isFp8() ? 1 : 2;
            long n = 1L << (8 * bytes);
            MemorySegment codes = arena.allocate(n * bytes);
            for (long c = 0; c < n; c++) {
                if (bytes == 1) {
                    codes.set(JAVA_BYTE, c, (byte) c);
                } else {
                    codes.setAtIndex(JAVA_SHORT, c, (short) c);
                }
            }
            float scaleInv = t.isFp8() ? 0.75f : 1f;
            MemorySegment dst = arena.allocate(JAVA_FLOAT, n).fill(POISON), cDst = arena.allocate(JAVA_FLOAT, n);
            cpu.castToFp32(cDst, codes, t, n, scaleInv);
            int grid = GpuLaunch.blocks(n);
            if (t.isFp8()) {
                Emulator.launch(exe, tmp, "cast_fp8_to_f32", Dim.of(grid), Dim.of(GpuLaunch.BLOCK),
                        Emulator.buffers("dst", dst, "src", codes), n, scaleInv, t == DType.FP8_E4M3 ? 1 : 0);
            } else {
                Emulator.launch(exe, tmp, t == DType.BF16 ? "cast_bf16_to_f32" : "cast_f16_to_f32", Dim.of(grid),
                        Dim.of(GpuLaunch.BLOCK), Emulator.buffers("dst", dst, "src", codes), n);
            }
            for (long c = 0; c < n; c++) {
                int e = dst.getAtIndex(JAVA_INT, c), x = cDst.getAtIndex(JAVA_INT, c);
                if (t == DType.FP16 && Float.isNaN(Float.intBitsToFloat(x))) { // the JDK's payload varies: sign only
                    assertThat(Float.isNaN(Float.intBitsToFloat(e))).as("%s code %x: NaN", t, c).isTrue();
                    assertThat(e >>> 31).as("%s code %x: NaN's sign", t, c).isEqualTo(x >>> 31);
                } else {
                    assertThat(e).as("%s code %x: %s, the CPU's %s", t, c, Float.intBitsToFloat(e),
                            Float.intBitsToFloat(x)).isEqualTo(x);
                }
            }
        }
    }

    /**
     * GpuMatmul's deferred amax (fp8_amax_to_slot after cast_transpose_f32_to_fp8, as Fp8AmaxSlots launches it): the
     * slot holds the CPU cast's amax bit for bit — NaN left out, ±inf kept as +inf, −0 as +0, odd sizes, a tensor of
     * NaN and zeros only — and the scaleInv's bits; a later cast of the same step (first = 0) keeps the maximum, as
     * AmaxHistory.record does, and the first cast after a flush (first = 1) overwrites whatever the slot held.
     */
    @Test
    void amaxSlotHoldsTheCpuAmaxBitForBit() throws Exception {
        float[][] specials = {
            {Float.NaN, -0f},
            {Float.NEGATIVE_INFINITY, Float.NaN},
            {Float.POSITIVE_INFINITY, -0f},
            {-0f, Float.MIN_VALUE},
            {},
        };
        int[][] shapes = {{37, 67}, {1, 1}, {33, 5}, {64, 48}, {3, 101}};
        MemorySegment slot = arena.allocate(JAVA_INT, 2);
        float stepMax = 0;
        for (int c = 0; c < shapes.length; c++) {
            int R = shapes[c][0], C = shapes[c][1];
            long n = (long) R * C;
            MemorySegment src = randomFloats(n);
            for (int i = 0; i < specials[c].length; i++) {
                src.setAtIndex(JAVA_FLOAT, random.nextLong(n), specials[c][i]);
            }
            if (c == 1) { // NaN and zeros only: the amax is 0
                src.fill((byte) 0);
                src.setAtIndex(JAVA_FLOAT, 0, Float.NaN);
            }
            DType type = c % 2 == 0 ? DType.FP8_E4M3 : DType.FP8_E5M2;
            float scale = 0.75f, scaleInv = 1f / scale;
            float cAmax = cpu.castToFp8(arena.allocate(n), type, src, n, scale);
            boolean first = c % 3 == 0;
            if (first) {
                slot.setAtIndex(JAVA_INT, 0, 0x7F80_0000); // +inf: only an overwrite gets below it
                stepMax = cAmax;
            } else {
                stepMax = Math.max(stepMax, cAmax);
            }
            slot.setAtIndex(JAVA_INT, 1, -1);
            amaxToSlot(slot, type, src, R, C, scale, scaleInv, first);
            String what = type + " " + R + "×" + C + (first ? " (first cast)" : " (later cast)");
            assertThat(slot.getAtIndex(JAVA_INT, 0)).as("%s: slot amax bits, the CPU's %s", what, cAmax)
                    .isEqualTo(Float.floatToRawIntBits(stepMax));
            assertThat(slot.getAtIndex(JAVA_INT, 1)).as("%s: slot scaleInv bits", what)
                    .isEqualTo(Float.floatToRawIntBits(scaleInv));
        }
    }

    /** More partials than the reduction's block has threads (its strided loop): the largest, wherever it is. */
    @Test
    void amaxSlotReducesMorePartialsThanThreads() throws Exception {
        int n = 3 * Fp8AmaxSlots.REDUCE_BLOCK + 7;
        for (int where : new int[] {0, n - 1, Fp8AmaxSlots.REDUCE_BLOCK + 5}) {
            MemorySegment partial = arena.allocate(JAVA_INT, n);
            for (int i = 0; i < n; i++) {
                partial.setAtIndex(JAVA_INT, i, random.nextInt(0x3F80_0000)); // below 1.0f
            }
            partial.setAtIndex(JAVA_INT, where, 0x4000_0000); // 2.0f
            MemorySegment slot = arena.allocate(JAVA_INT, 2).fill((byte) 0x7F);
            Emulator.launch(exe, tmp, "fp8_amax_to_slot", Dim.of(1), Dim.of(Fp8AmaxSlots.REDUCE_BLOCK),
                    Emulator.buffers("slot", slot, "partial", partial), n, 0.5f, 1);
            assertThat(slot.getAtIndex(JAVA_FLOAT, 0)).as("amax with the largest at %d", where).isEqualTo(2f);
        }
    }

    /** cast_transpose_f32_to_fp8 then fp8_amax_to_slot, GpuMatmul's launches, into {@code slot} (two ints). */
    private void amaxToSlot(MemorySegment slot, DType type, MemorySegment src, int R, int C, float scale,
                            float scaleInv, boolean first) throws Exception {
        long n = (long) R * C;
        int grid = CastTransposeGpu.grid(R, C);
        MemorySegment partial = poisonedPartials(grid);
        Emulator.launch(exe, tmp, "cast_transpose_f32_to_fp8", Dim.of(grid), CastTransposeGpu.BLOCK,
                Emulator.buffers("dst", arena.allocate(n), "dstT", arena.allocate(n), "partial", partial, "src",
                        src), R, C, scale, type == DType.FP8_E4M3 ? 1 : 0);
        Emulator.launch(exe, tmp, "fp8_amax_to_slot", Dim.of(1), Dim.of(Fp8AmaxSlots.REDUCE_BLOCK),
                Emulator.buffers("slot", slot, "partial", partial), grid, scaleInv, first ? 1 : 0);
    }

    private void check(DType type, int R, int C, float scale, boolean specials) throws Exception {
        long n = (long) R * C;
        MemorySegment src = randomFloats(n);
        if (specials) {
            src.setAtIndex(JAVA_FLOAT, n / 3, Float.NaN);
            src.setAtIndex(JAVA_FLOAT, n / 2, Float.NEGATIVE_INFINITY);
            src.setAtIndex(JAVA_FLOAT, n - 1, 1e30f);
        }
        MemorySegment cDst = arena.allocate(n).fill(POISON);
        float cAmax = cpu.castToFp8(cDst, type, src, n, scale);
        MemorySegment cDstT = arena.allocate(n);
        for (int r = 0; r < R; r++) {
            for (int c = 0; c < C; c++) {
                cDstT.set(JAVA_BYTE, (long) c * R + r, cDst.get(JAVA_BYTE, (long) r * C + c));
            }
        }

        int grid = CastTransposeGpu.grid(R, C);
        MemorySegment dst = arena.allocate(n).fill(POISON), dstT = arena.allocate(n).fill(POISON);
        MemorySegment partial = poisonedPartials(grid);
        Emulator.launch(exe, tmp, "cast_transpose_f32_to_fp8", Dim.of(grid), CastTransposeGpu.BLOCK,
                Emulator.buffers("dst", dst, "dstT", dstT, "partial", partial, "src", src), R, C, scale,
                type == DType.FP8_E4M3 ? 1 : 0);

        String what = type + " " + R + "×" + C;
        assertThat(dst.mismatch(cDst)).as("%s codes: first differing byte (-1 = none)", what).isEqualTo(-1L);
        assertThat(dstT.mismatch(cDstT)).as("%s transposed codes: first differing byte", what).isEqualTo(-1L);
        checkAmax(what, partial, grid, cAmax);
    }

    /** Each partial written (a finite or infinite |x| pattern), and GpuOps's combination of them the CPU's amax. */
    private static void checkAmax(String what, MemorySegment partial, int grid, float cAmax) {
        for (int b = 0; b < grid; b++) {
            assertThat(partial.getAtIndex(JAVA_INT, b)).as("%s partial %d", what, b).isBetween(0, 0x7F80_0000);
        }
        assertThat(Float.floatToRawIntBits(CastGpu.maxBitsOfPartials(partial, grid))).as("%s amax", what)
                .isEqualTo(Float.floatToRawIntBits(cAmax));
    }

    /** grid amax partials holding a pattern above every |x| the kernel may write. */
    private MemorySegment poisonedPartials(int grid) {
        MemorySegment partial = arena.allocate(JAVA_INT, grid);
        for (int b = 0; b < grid; b++) {
            partial.setAtIndex(JAVA_INT, b, Integer.MAX_VALUE);
        }
        return partial;
    }

    /** n floats of magnitudes 2^-20 … 2^16, either sign: underflowing, normal and saturating fp8 codes. */
    private MemorySegment randomFloats(long n) {
        MemorySegment src = arena.allocate(JAVA_FLOAT, n);
        for (long i = 0; i < n; i++) {
            double magnitude = Math.scalb(1.0, random.nextInt(-20, 17));
            src.setAtIndex(JAVA_FLOAT, i, (float) (random.nextDouble(-1, 1) * magnitude));
        }
        return src;
    }
}
