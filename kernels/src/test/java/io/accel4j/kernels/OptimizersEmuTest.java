package io.accel4j.kernels;

import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.core.ops.LionConfig;
import io.accel4j.core.ops.SgdConfig;
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
 * sgd.cu and lion.cu (the very sources, run on the CPU by {@code src/test/cuda/optimizers_emu.cpp} through
 * {@code cuda_emu.h}, built with g++ -ffp-contract=off) against the CPU kernels through {@link CpuOps}, several steps
 * each: the parameters and the optimizer state must agree bit for bit (the kernels do the CPU's fp32 operations in
 * the CPU's order, each rounded). Odd sizes, a grid smaller than the range (the grid-stride loop goes round) and one
 * larger. This checks indexing, the modes (first step, no momentum, Nesterov, dampening) and sign(0) without a GPU.
 * The kernels are not launched by {@link GpuOps} yet. Skipped without g++.
 */
class OptimizersEmuTest {

    private static final long SEED = 20261203L;
    private static final int BLOCK = 128;

    @TempDir
    static Path tmp;
    private static Path exe;
    private static Parallel pool;
    private static CpuOps cpu;
    private final Arena arena = Arena.ofConfined();
    private final SplittableRandom random = new SplittableRandom(SEED);

    @BeforeAll
    static void compile() throws Exception {
        exe = Emulator.compile(tmp, "optimizers_emu", "optimizers_emu", "-ffp-contract=off");
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
    void sgdMatchesTheCpuKernelBitForBit() throws Exception {
        SgdConfig[] configs = {new SgdConfig(1e-2f, 0.9f, 0f, 0.01f, false), new SgdConfig(3e-2f, 0.9f, 0.1f, 0f, false),
                new SgdConfig(1e-2f, 0.95f, 0f, 5e-4f, true), new SgdConfig(0.1f, 0f, 0.3f, 0.1f, false)};
        for (SgdConfig config : configs) {
            for (int n : new int[] {1, 1003, 5003}) {
                boolean momentum = config.momentum() != 0;
                MemorySegment p = floats(n, -1, 1), buf = momentum ? nan(n) : MemorySegment.NULL;
                MemorySegment cP = copy(p), cBuf = momentum ? copy(buf) : MemorySegment.NULL;
                for (int step = 1; step <= 3; step++) {
                    MemorySegment g = floats(n, -2, 2);
                    float gradScale = step == 2 ? 0.37f : 1f;
                    cpu.sgd(cP, g, cBuf, 0, n, config, step, gradScale);
                    // a grid of 3 blocks goes round the grid-stride loop; one of ⌈n/BLOCK⌉ + 1 has idle threads
                    int blocks = step == 2 ? n / BLOCK + 2 : 3;
                    MemorySegment emuBuf = momentum ? buf : arena.allocate(0);
                    Emulator.launch(exe, tmp, "sgd_f32", Dim.of(blocks), Dim.of(BLOCK),
                            Emulator.buffers("params", p, "grads", g, "buf", emuBuf), (long) n, config.lr(),
                            config.momentum(), config.dampening(), config.weightDecay(), gradScale, step == 1 ? 1 : 0,
                            config.nesterov() ? 1 : 0);
                    String what = config + " n=" + n + " step " + step;
                    assertSameBits(what + " params", p, cP);
                    if (momentum) {
                        assertSameBits(what + " buf", buf, cBuf);
                    }
                }
            }
        }
    }

    @Test
    void lionMatchesTheCpuKernelBitForBit() throws Exception {
        LionConfig[] configs = {new LionConfig(1e-4f, 0.9f, 0.99f, 1f), new LionConfig(3e-4f, 0.95f, 0.98f, 0f),
                new LionConfig(1e-3f, 0.5f, 0.999f, 0.1f)};
        for (LionConfig config : configs) {
            for (int n : new int[] {1, 1003, 5003}) {
                MemorySegment p = floats(n, -1, 1), m = floats(n, -0.05, 0.05);
                for (int i = 0; i < n; i += 7) { // c = 0 exactly where m and the gradient are 0: sign 0
                    m.setAtIndex(JAVA_FLOAT, i, 0f);
                }
                MemorySegment cP = copy(p), cM = copy(m);
                for (int step = 1; step <= 3; step++) {
                    MemorySegment g = floats(n, -0.1, 0.1);
                    if (step == 1) {
                        for (int i = 0; i < n; i += 7) {
                            g.setAtIndex(JAVA_FLOAT, i, i % 2 == 0 ? 0f : -0f);
                        }
                    }
                    float gradScale = step == 2 ? 2.5f : 1f;
                    cpu.lion(cP, g, cM, 0, n, config, gradScale);
                    int blocks = step == 2 ? n / BLOCK + 2 : 3;
                    Emulator.launch(exe, tmp, "lion_f32", Dim.of(blocks), Dim.of(BLOCK),
                            Emulator.buffers("params", p, "grads", g, "m", m), (long) n, config.lr(), config.beta1(),
                            config.beta2(), config.decayFactor(), gradScale);
                    String what = config + " n=" + n + " step " + step;
                    assertSameBits(what + " params", p, cP);
                    assertSameBits(what + " m", m, cM);
                }
            }
        }
    }

    private static void assertSameBits(String what, MemorySegment emulated, MemorySegment cpuOut) {
        assertThat(emulated.byteSize()).as(what + " bytes").isEqualTo(cpuOut.byteSize());
        long mismatch = emulated.mismatch(cpuOut);
        assertThat(mismatch).as("%s: first differing byte (-1 = none); emulated %s, CPU %s", what,
                mismatch < 0 ? "" : emulated.get(JAVA_FLOAT, mismatch & ~3),
                mismatch < 0 ? "" : cpuOut.get(JAVA_FLOAT, mismatch & ~3)).isEqualTo(-1L);
    }

    private MemorySegment floats(int n, double lo, double hi) {
        MemorySegment s = arena.allocate(JAVA_FLOAT, n);
        for (int i = 0; i < n; i++) {
            s.setAtIndex(JAVA_FLOAT, i, (float) random.nextDouble(lo, hi));
        }
        return s;
    }

    private MemorySegment nan(int n) {
        MemorySegment s = arena.allocate(JAVA_FLOAT, n);
        for (int i = 0; i < n; i++) {
            s.setAtIndex(JAVA_FLOAT, i, Float.NaN);
        }
        return s;
    }

    private MemorySegment copy(MemorySegment s) {
        return arena.allocate(s.byteSize(), 16).copyFrom(s);
    }
}
