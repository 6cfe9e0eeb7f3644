package io.accel4j.kernels;

import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.core.ops.AdamWRange;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * adamw.cu's multi-range kernels (the very source, through cuda_emu.h and src/test/cuda/adamw_emu.cpp, built with
 * g++ -ffp-contract=off) against the CPU kernel called once per range: params, m, v and the bf16 copy must agree bit
 * for bit (the kernel does the CPU's operations in the CPU's order, each rounded), and the elements no range covers
 * must stay as they were. This checks the table, the block-to-row mapping, both load paths and the
 * stochastic-rounding index without a GPU; {@link AdamWGpuTest} runs the same case on one. Skipped without g++.
 */
class AdamWEmuTest {

    private static final ValueLayout.OfFloat LE32 = JAVA_FLOAT.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final long SEED = 20261203L;

    @TempDir
    static Path tmp;
    private static Path exe;
    private static Parallel pool;
    private static CpuOps cpu;
    private final Arena arena = Arena.ofConfined();

    @BeforeAll
    static void compile() throws Exception {
        exe = Emulator.compile(tmp, "adamw_emu", "adamw_emu", "-ffp-contract=off");
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
    void fp32RangesMatchTheCpuKernelBitForBit() throws Exception {
        run(false);
    }

    @Test
    void bf16RangesMatchTheCpuKernelBitForBit() throws Exception {
        run(true);
    }

    @Test
    void theTableHoldsEveryRowsBlocks() {
        MemorySegment host = arena.allocate(AdamWGpu.ROW_BYTES * AdamWRangesCase.RANGES.size(), 8);
        long grid = AdamWGpu.rows(host, AdamWRangesCase.RANGES, 0.25f);
        // 9000 → 3 blocks of 4096, 3 → 1, 2345 → 1, 0 → 0, 1603 → 1
        assertThat(grid).isEqualTo(6);
        assertThat(host.get(ValueLayout.JAVA_INT, 24 + 32 * 2)).isEqualTo(4);
        assertThat(host.get(ValueLayout.JAVA_INT, 24 + 32 * 4)).isEqualTo(5);
        assertThat(host.get(JAVA_FLOAT, 28)).isEqualTo(0.25f);
        assertThat(host.get(JAVA_FLOAT, 28 + 32)).isZero();
        assertThat(host.get(ValueLayout.JAVA_LONG, 32 * 4 + 8)).isEqualTo(200_000L);
    }

    private void run(boolean bf16) throws Exception {
        long n = AdamWRangesCase.ELEMENTS;
        List<AdamWRange> ranges = AdamWRangesCase.RANGES;
        MemorySegment p = floats(n, -1, 1, SEED), g = floats(n, -10, 10, SEED + 1);
        MemorySegment m = floats(n, -0.1, 0.1, SEED + 2), v = floats(n, 0, 0.01, SEED + 3);
        MemorySegment cP = copy(p), cM = copy(m), cV = copy(v);
        MemorySegment cBf = arena.allocate(2 * n, 16).fill((byte) 0xFF); // the harness poisons its copy alike
        if (bf16) {
            cpu.adamwBf16(cBf, cP, g, cM, cV, ranges, AdamWRangesCase.CONFIG, AdamWRangesCase.STEP,
                    AdamWRangesCase.GRAD_SCALE, AdamWRangesCase.SEED);
        } else {
            cpu.adamw(cP, g, cM, cV, ranges, AdamWRangesCase.CONFIG, AdamWRangesCase.STEP,
                    AdamWRangesCase.GRAD_SCALE);
        }

        Path dir = Files.createTempDirectory(tmp, bf16 ? "bf16-" : "f32-");
        MemorySegment table = arena.allocate((long) AdamWGpu.ROW_BYTES * ranges.size(), 8);
        AdamWGpu.rows(table, ranges, AdamWRangesCase.CONFIG.weightDecay());
        Emulator.write(dir.resolve("table.bin"), table);
        String[] names = {"p", "g", "m", "v"};
        MemorySegment[] in = {p, g, m, v};
        for (int i = 0; i < 4; i++) {
            Emulator.write(dir.resolve(names[i] + ".f32"), in[i]);
        }
        float[] c = AdamWGpu.adamwCoefficients(AdamWRangesCase.CONFIG, AdamWRangesCase.STEP);
        var k = AdamWRangesCase.CONFIG;
        List<String> cmd = new ArrayList<>(List.of(bf16 ? "1" : "0", Long.toString(n),
                dir.resolve("table.bin").toString()));
        for (String name : names) {
            cmd.add(dir.resolve(name + ".f32").toString());
        }
        for (float f : new float[] {k.lr(), k.beta1(), k.beta2(), k.eps(), c[0], c[1], AdamWRangesCase.GRAD_SCALE}) {
            cmd.add(Emulator.arg(f));
        }
        cmd.add(Long.toUnsignedString(AdamWRangesCase.SEED));
        cmd.add(dir.toString());
        Emulator.run(exe, cmd);

        assertSameBits("params", read(dir.resolve("params.f32")), cP);
        assertSameBits("m", read(dir.resolve("m.f32")), cM);
        assertSameBits("v", read(dir.resolve("v.f32")), cV);
        if (bf16) {
            assertSameBits("bf16 copy", read(dir.resolve("bf16.bf16")), cBf);
        }
        // the gap [11348, 11400) is no range's: untouched on both sides (and so in the comparison above)
        assertThat(cP.getAtIndex(JAVA_FLOAT, 11_350)).isEqualTo(p.getAtIndex(JAVA_FLOAT, 11_350));
        assertThat(cP.getAtIndex(JAVA_FLOAT, 0)).isNotEqualTo(p.getAtIndex(JAVA_FLOAT, 0));
    }

    private static void assertSameBits(String what, MemorySegment emulated, MemorySegment cpuOut) {
        assertThat(emulated.byteSize()).as(what + " bytes").isEqualTo(cpuOut.byteSize());
        long mismatch = emulated.mismatch(cpuOut);
        assertThat(mismatch).as("%s: first differing byte (-1 = none)", what).isEqualTo(-1L);
    }

    private MemorySegment read(Path file) throws Exception {
        return Emulator.read(arena, file);
    }

    private MemorySegment floats(long n, double lo, double hi, long seed) {
        SplittableRandom r = new SplittableRandom(seed);
        MemorySegment s = arena.allocate(JAVA_FLOAT, n);
        for (long i = 0; i < n; i++) {
            s.set(LE32, 4 * i, (float) r.nextDouble(lo, hi));
        }
        return s;
    }

    private MemorySegment copy(MemorySegment host) {
        return arena.allocate(host.byteSize(), 16).copyFrom(host);
    }
}
