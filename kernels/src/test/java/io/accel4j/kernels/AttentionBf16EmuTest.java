package io.accel4j.kernels;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.cpu.ref.AttentionRef;
import io.accel4j.cuda.CudaKernel.Dim;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * attention_bf16.cu's kernels, the very source, run on the CPU ({@code src/test/cuda/attention_bf16_emu.cpp}: a
 * thread per CUDA thread through {@code cuda_emu.h}, wmma and bf16 from the stand-ins in {@code src/test/cuda/emu})
 * against the float64 reference ({@link AttentionBf16Check}): odd T, partial tiles, several heads and batches, head
 * sizes 64 and 128, causal and not, outputs poisoned with NaN; once more under ThreadSanitizer for the warp and block
 * synchronisation. No GPU needed; it checks indexing, masking, tile bounds and the shared-memory staging, not the
 * hardware (AttentionBf16GpuTest does that). Also {@link GpuOps}' BF16 attention path launch by launch (casts,
 * kernels, accumulation) against {@link CpuOps}' BF16 operands. Skipped without g++.
 */
class AttentionBf16EmuTest {

    private static final long SEED = 20261203L;

    @TempDir
    static Path tmp;
    private static Path exe;

    @BeforeAll
    static void compile() throws Exception {
        exe = compile("attention_bf16_emu");
    }

    /** The harness built as {@code name} with {@code flags} added (and the wmma/bf16 stand-ins). */
    private static Path compile(String name, String... flags) throws Exception {
        List<String> all = new ArrayList<>(List.of(flags));
        all.add("-Isrc/test/cuda/emu");
        return Emulator.compile(tmp, "attention_bf16_emu", name, all.toArray(String[]::new));
    }

    @Test
    void headSize64MatchesReference() throws Exception {
        run(new AttentionBf16Check(2, 67, 128, 2, true));
        run(new AttentionBf16Check(2, 67, 128, 2, false));
        run(new AttentionBf16Check(2, 17, 64, 1, false));
    }

    @Test
    void headSize128MatchesReference() throws Exception {
        run(new AttentionBf16Check(3, 17, 256, 2, true));
        run(new AttentionBf16Check(1, 67, 384, 3, false));
    }

    @Test
    void severalQueryAndKeyTilesMatchReference() throws Exception {
        run(new AttentionBf16Check(1, 130, 256, 2, true)); // 3 forward row tiles, 5 key tiles: the rescale path
    }

    @Test
    void singlePositionMatchesReference() throws Exception {
        run(new AttentionBf16Check(1, 1, 128, 1, true));
        run(new AttentionBf16Check(2, 1, 128, 2, false));
    }

    /**
     * Built with ThreadSanitizer, which knows the emulator's barriers: a lane that reads shared memory another lane
     * wrote without a __syncwarp/__syncthreads between them (a race on the GPU too) is reported, and the harness
     * exits non-zero. Skipped where the toolchain has no ThreadSanitizer runtime.
     */
    @Test
    void sharedMemoryAccessesAreSynchronised() throws Exception {
        Path tsan;
        try {
            tsan = compile("attention_bf16_emu_tsan", "-g", "-fsanitize=thread");
        } catch (AssertionError e) {
            assumeTrue(false, "g++ -fsanitize=thread failed (no libtsan?): " + e.getMessage());
            return;
        }
        run(tsan, new AttentionBf16Check(1, 40, 128, 1, true));
        run(tsan, new AttentionBf16Check(1, 40, 128, 2, false));
    }

    /** The non-causal reference of the tests, in causal mode, is vector-cpu's AttentionRef. */
    @Test
    void fullReferenceAgreesWithAttentionRefWhenCausal() {
        int B = 2, T = 9, C = 12, NH = 3;
        SplittableRandom r = new SplittableRandom(SEED);
        double[] qkv = r.doubles(B * T * 3 * C, -2, 2).toArray(), dout = r.doubles(B * T * C, -1, 1).toArray();
        double[] out = new double[B * T * C], lse = new double[B * NH * T], dqkv = new double[B * T * 3 * C];
        double[] out2 = out.clone(), lse2 = lse.clone(), dqkv2 = dqkv.clone();
        AttentionRef.forward(out, lse, qkv, B, T, C, NH);
        AttentionRef.backward(dqkv, dout, qkv, out, lse, B, T, C, NH);
        FullAttentionRef.forwardBackward(out2, lse2, dqkv2, qkv, dout, B, T, C, NH, true);
        assertThat(out2).containsExactly(out, org.assertj.core.data.Offset.offset(1e-12));
        assertThat(lse2).containsExactly(lse, org.assertj.core.data.Offset.offset(1e-12));
        assertThat(dqkv2).containsExactly(dqkv, org.assertj.core.data.Offset.offset(1e-12));
    }

    /**
     * {@link AttentionBf16Gpu#forwardFp32}/{@link AttentionBf16Gpu#backwardFp32} as {@link GpuOps} runs them, each
     * launch emulated: cast.cu's cast_f32_to_bf16 of qkv, dout and out and cast_bf16_to_f32 of out with GpuOps's
     * grid-stride shape, the kernels, and attention_bf16_accumulate into a random fp32 dqkv with GpuOps's shape;
     * against CpuOps with BF16 operands ({@link AttentionBf16OpsCheck}).
     */
    @Test
    void gpuOpsBf16PathMatchesCpuBackend() throws Exception {
        Path cast = Emulator.compile(tmp, "cast_emu", "cast_emu", "-ffp-contract=off", "-I" + Emulator.cudaInclude());
        try (Parallel pool = new Parallel(2)) {
            CpuOps cpu = new CpuOps(pool);
            gpuOpsPath(cast, cpu, new AttentionBf16OpsCheck(2, 67, 128, 2));
            gpuOpsPath(cast, cpu, new AttentionBf16OpsCheck(1, 70, 256, 2));
        }
    }

    private static void gpuOpsPath(Path cast, CpuOps cpu, AttentionBf16OpsCheck c) throws Exception {
        long btc = c.btc(), n3 = 3 * btc;
        try (Arena arena = Arena.ofShared()) {
            AttentionBf16OpsCheck.Case cpuCase = c.run(arena, cpu, SEED + 3 * c.T() + c.C());
            Path dir = Files.createTempDirectory(tmp, "path-");
            MemorySegment q16 = toBf16(cast, arena, cpuCase.qkv(), n3), d16 = toBf16(cast, arena, cpuCase.dout(), btc);
            Path qf = dir.resolve("qkv.bf16"), df = dir.resolve("dout.bf16"), acc = dir.resolve("acc.in");
            Emulator.write(qf, q16);
            Emulator.write(df, d16);
            Emulator.write(acc, cpuCase.prefill());
            List<String> cmd = new ArrayList<>();
            for (long v : new long[] {c.B(), c.T(), c.C(), c.NH(), 1}) {
                cmd.add(Long.toString(v));
            }
            cmd.addAll(List.of(qf.toString(), df.toString(), dir.toString(), acc.toString(),
                    Integer.toString(GpuLaunch.blocks(n3)), Integer.toString(GpuLaunch.BLOCK)));
            Emulator.run(exe, cmd);
            MemorySegment o16 = Emulator.read(arena, dir.resolve("out.bf16"));
            MemorySegment out = AttentionBf16OpsCheck.nan(arena, btc);
            Emulator.launch(cast, tmp, "cast_bf16_to_f32", Dim.of(GpuLaunch.blocks(btc)), Dim.of(GpuLaunch.BLOCK),
                    Emulator.buffers("dst", out, "src", o16), btc);
            // backward casts the widened out again: exact, so the harness's own bf16 out is what its kernels read
            assertThat(toBf16(cast, arena, out, btc).mismatch(o16)).as("bf16(widened out) = out, " + c)
                    .isEqualTo(-1);
            c.check(cpuCase, out, Emulator.read(arena, dir.resolve("lse.f32")),
                    Emulator.read(arena, dir.resolve("acc.f32")));
        }
    }

    /** cast_f32_to_bf16 of n floats as castFromFp32 launches it (GpuLaunch.blocks(n) blocks of GpuLaunch.BLOCK). */
    private static MemorySegment toBf16(Path cast, Arena arena, MemorySegment src, long n) throws Exception {
        MemorySegment dst = arena.allocate(2 * n, 16).fill((byte) 0xFF); // NaN as bf16
        Emulator.launch(cast, tmp, "cast_f32_to_bf16", Dim.of(GpuLaunch.blocks(n)), Dim.of(GpuLaunch.BLOCK),
                Emulator.buffers("dst", dst, "src", src), n);
        return dst;
    }

    private static void run(AttentionBf16Check c) throws Exception {
        run(exe, c);
    }

    private static void run(Path exe, AttentionBf16Check c) throws Exception {
        AttentionBf16Check.Inputs in = c.inputs(SEED + c.T() + c.C());
        Path dir = Files.createTempDirectory(tmp, "case-");
        Path qkv = dir.resolve("qkv.bf16"), dout = dir.resolve("dout.bf16");
        Emulator.writeShorts(qkv, in.qkv());
        Emulator.writeShorts(dout, in.dout());
        List<String> cmd = new ArrayList<>();
        for (int v : new int[] {c.B(), c.T(), c.C(), c.NH(), c.causal() ? 1 : 0}) {
            cmd.add(Integer.toString(v));
        }
        cmd.addAll(List.of(qkv.toString(), dout.toString(), dir.toString()));
        Emulator.run(exe, cmd);
        c.check(in, Emulator.readShorts(dir.resolve("out.bf16")), Emulator.readFloats(dir.resolve("lse.f32")),
                Emulator.readShorts(dir.resolve("dqkv.bf16")));
    }
}
