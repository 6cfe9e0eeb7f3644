package io.accel4j.kernels;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * attention_wgmma.cu's two forwards, attention_wgmma_forward (cp.async loads) and attention_wgmma_tma_forward (TMA
 * loads by a producer warpgroup, mbarrier pipeline; its copies, barriers and the driver's tensor-map encoder from
 * {@code src/test/cuda/emu/tma_emu.h}, which fails a read before a copy's barrier phase was waited for and an
 * overwrite before the readers' release), the very source, run on the CPU ({@code src/test/cuda/attention_wgmma_emu.cpp}:
 * a thread per CUDA thread through {@code cuda_emu.h}; wgmma, its shared-memory matrix descriptors and 128-byte
 * swizzle, the warpgroup register fragments and cp.async from {@code src/test/cuda/emu/wgmma_emu.h}, which follows
 * the PTX ISA and knows nothing of the kernel's layout) against the float64 reference ({@link AttentionBf16Check},
 * its tolerances: out within 1e-2 of the largest |out| — out and P are rounded to bf16, 2⁻⁹ relative each, measured
 * ≤ 3.3e-3 here; lse within 1e-5 — fp32 sums, measured ≤ 1.3e-7). Odd B·NH, T not a multiple of the 128-row and
 * 128-key tiles, several query and key tiles (the double buffer and the rescale), head sizes 64 and 128, causal
 * and not, outputs poisoned with NaN and shared memory filled with NaN first. Mutated copies of the source (a
 * swapped fragment register, an unswizzled tile, a wrong descriptor, a buffer reused too early) must fail: the
 * emulation sees layout and synchronisation errors. No GPU needed; the
 * hardware itself is AttentionBf16GpuTest's. Skipped without g++.
 */
class AttentionWgmmaEmuTest {

    private static final long SEED = 20261205L;
    private static final Path SOURCE = Path.of("src/main/cuda/attention_wgmma.cu");

    @TempDir
    static Path tmp;
    private static Path exe;

    @BeforeAll
    static void compile() throws Exception {
        exe = Emulator.compile(tmp, "attention_wgmma_emu", "attention_wgmma_emu", "-Isrc/test/cuda/emu");
    }

    @ParameterizedTest
    @ValueSource(booleans = {false, true})
    void headSize64MatchesReference(boolean tma) throws Exception {
        run(exe, new AttentionBf16Check(3, 67, 64, 1, true), tma);
        run(exe, new AttentionBf16Check(1, 257, 192, 3, false), tma);  // 3 query tiles, 3 key tiles, the last of 1 row
    }

    @ParameterizedTest
    @ValueSource(booleans = {false, true})
    void headSize128MatchesReference(boolean tma) throws Exception {
        run(exe, new AttentionBf16Check(1, 300, 384, 3, true), tma);  // causal over 3 tiles: masked and unmasked ones
        run(exe, new AttentionBf16Check(3, 130, 128, 1, false), tma);
    }

    @ParameterizedTest
    @ValueSource(booleans = {false, true})
    void singlePositionMatchesReference(boolean tma) throws Exception {
        run(exe, new AttentionBf16Check(1, 1, 128, 1, true), tma);
        run(exe, new AttentionBf16Check(1, 1, 128, 2, false), tma);
    }

    /** The TMA stages reused over 5 key tiles (2 stages: each refilled twice), causal and not. */
    @Test
    void tmaRingOverManyTilesMatchesReference() throws Exception {
        run(exe, new AttentionBf16Check(1, 600, 128, 1, false), true);
        run(exe, new AttentionBf16Check(1, 520, 64, 1, true), true);
    }

    /** Built with ThreadSanitizer (see AttentionBf16EmuTest): the block and warpgroup synchronisation. */
    @Test
    void sharedMemoryAccessesAreSynchronised() throws Exception {
        Path tsan;
        try {
            tsan = Emulator.compile(tmp, "attention_wgmma_emu", "attention_wgmma_emu_tsan", "-g", "-fsanitize=thread",
                    "-Isrc/test/cuda/emu");
        } catch (AssertionError e) {
            assumeTrue(false, "g++ -fsanitize=thread failed (no libtsan?): " + e.getMessage());
            return;
        }
        run(tsan, new AttentionBf16Check(1, 150, 128, 1, true), false);
        run(tsan, new AttentionBf16Check(1, 300, 128, 1, true), true);
    }

    /**
     * The deliberate mistakes the emulation must catch: P's A-fragment registers in the wrong order (rows r and r+8
     * swapped), the tiles stored without the swizzle the descriptors declare, V's LBO and SBO exchanged, V only
     * double-buffered (warpgroup 1 still reads V_{j−1} while tile j+1 is loaded).
     */
    @Test
    void layoutMistakesFail() throws Exception {
        mutantFails("fragment", "s[8 * kk + 2 * v], s[8 * kk + 2 * v + 1]",
                "s[8 * kk + 2 * (v ^ 1)], s[8 * kk + 2 * (v ^ 1) + 1]");
        mutantFails("swizzle", "(((c & 7) ^ (r & 7)) << 4)", "((c & 7) << 4)");
        mutantFails("vdesc", "128 * 128, 1024))", "1024, 128 * 128))");
        mutantFails("vbuffers", "((j + 1) % 3) * KVBYTES", "((j + 1) & 1) * KVBYTES", "((j - 1) % 3) * KVBYTES",
                "((j - 1) & 1) * KVBYTES", "(j % 3) * KVBYTES", "(j & 1) * KVBYTES");
    }

    /**
     * The TMA pipeline's mistakes: a consumer waiting for the wrong parity of a stage's full barrier (it reads the
     * stage before the copy lands, or waits for a phase nobody completes), the producer arriving without expect_tx
     * (the phase completes before its bytes), a tensor map without the 128-byte swizzle the descriptors declare, a
     * consumer releasing a V stage before its P·V has read it (the producer's next copy overwrites it).
     */
    @Test
    void tmaPipelineMistakesFail() throws Exception {
        tmaMutantFails("parity", "aw_mbar_wait(&bars->k_full[s], (j / AW_STAGES) & 1);",
                "aw_mbar_wait(&bars->k_full[s], ((j / AW_STAGES) & 1) ^ 1);");
        tmaMutantFails("expecttx", "aw_mbar_arrive_expect_tx(&bars->k_full[s], TILE);",
                "aw_mbar_arrive(&bars->k_full[s]);");
        tmaMutantFails("tmaswizzle", "#define AW_TMA_SWIZZLE 3 ", "#define AW_TMA_SWIZZLE 0 ");
        tmaMutantFails("release", """
                    aw_pv<HD>(o, p, v_addr + s * AW_KEYS * HD * 2);
                    aw_mbar_arrive(&bars->v_empty[s]);
                """, """
                    aw_mbar_arrive(&bars->v_empty[s]);
                    aw_pv<HD>(o, p, v_addr + s * AW_KEYS * HD * 2);
                """);
    }

    /** The source with each {@code fromTo[2i]} (found exactly once) replaced by {@code fromTo[2i+1]} must fail. */
    private static void mutantFails(String name, String... fromTo) throws Exception {
        Path mutant = mutant(name, fromTo);
        assertThatThrownBy(() -> run(mutant, new AttentionBf16Check(1, 300, 128, 1, false), false))
                .as("mutation %s", name).isInstanceOf(AssertionError.class);
    }

    /** {@link #mutantFails} for the TMA forward, over 5 key tiles (each stage refilled twice). */
    private static void tmaMutantFails(String name, String... fromTo) throws Exception {
        Path mutant = mutant(name, fromTo);
        assertThatThrownBy(() -> run(mutant, new AttentionBf16Check(1, 600, 128, 1, false), true))
                .as("mutation %s", name).isInstanceOf(AssertionError.class);
    }

    /** The emulation of the mutated source (deadlocks reported after 3 s without progress, not 20). */
    private static Path mutant(String name, String... fromTo) throws Exception {
        String source = Files.readString(SOURCE);
        for (int i = 0; i < fromTo.length; i += 2) {
            assertThat(source).as("mutation %s: the source text to replace", name).containsOnlyOnce(fromTo[i]);
            source = source.replace(fromTo[i], fromTo[i + 1]);
        }
        Path dir = Files.createDirectories(tmp.resolve("mutant-" + name));
        Files.writeString(dir.resolve("attention_wgmma.cu"), source);
        // the mutant's folder first on the include path: the harness includes it instead of the source
        return Emulator.compile(tmp, "attention_wgmma_emu", "attention_wgmma_emu_" + name, "-I" + dir,
                "-Isrc/test/cuda/emu", "-DEMU_TMA_STALL_S=3");
    }

    private static void run(Path exe, AttentionBf16Check c, boolean tma) throws Exception {
        AttentionBf16Check.Inputs in = c.inputs(SEED + c.T() + c.C());
        Path dir = Files.createTempDirectory(tmp, "case-");
        Path qkv = dir.resolve("qkv.bf16");
        Emulator.writeShorts(qkv, in.qkv());
        List<String> cmd = new ArrayList<>();
        for (int v : new int[] {c.B(), c.T(), c.C(), c.NH(), c.causal() ? 1 : 0}) {
            cmd.add(Integer.toString(v));
        }
        cmd.addAll(List.of(qkv.toString(), dir.toString()));
        if (tma) {
            cmd.add("tma");
        }
        Emulator.run(exe, cmd);
        c.checkForward(in, Emulator.readShorts(dir.resolve("out.bf16")), Emulator.readFloats(dir.resolve("lse.f32")));
    }
}
