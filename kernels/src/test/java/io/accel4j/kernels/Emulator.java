package io.accel4j.kernels;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import io.accel4j.cuda.CudaKernel.Dim;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The emulation harnesses of {@code src/test/cuda} (CUDA C kernels, the very sources, run on the CPU through
 * {@code cuda_emu.h}): built with g++ and run, with binary files in and out. Tests that use it skip (an assumption)
 * where g++ is not on the PATH. Run from the kernels module's directory, as Maven does.
 */
final class Emulator {

    private Emulator() {}

    /**
     * Builds {@code src/test/cuda/<harness>.cpp} into {@code dir/<name>} with g++ (C++20, -O1, the kernels' sources
     * on the include path) and {@code flags} added; skips the calling test when g++ is absent.
     */
    static Path compile(Path dir, String harness, String name, String... flags) throws Exception {
        Path gxx = KernelPtxTest.findTool("g++");
        assumeTrue(gxx != null, "g++ not found on the PATH: " + harness + " not built, the CUDA source not emulated");
        Path exe = dir.resolve(name);
        List<String> cmd = new ArrayList<>(List.of(gxx.toString(), "-std=c++20", "-O1", "-Wno-unknown-pragmas"));
        cmd.addAll(List.of(flags));
        cmd.addAll(List.of("-Isrc/main/cuda", "-o", exe.toString(), "src/test/cuda/" + harness + ".cpp", "-lpthread"));
        KernelPtxTest.run(cmd, Map.of());
        return exe;
    }

    /** Runs {@code exe} with {@code args}; fails the test with its output when it exits non-zero. */
    static void run(Path exe, List<String> args) throws Exception {
        List<String> cmd = new ArrayList<>();
        cmd.add(exe.toString());
        cmd.addAll(args);
        KernelPtxTest.run(cmd, Map.of());
    }

    /** A scalar on a harness's command line: floats as C99 hex literals (exact through strtof), the rest decimal. */
    static String arg(Object scalar) {
        return scalar instanceof Float f ? String.format(Locale.ROOT, "%a", f) : scalar.toString();
    }

    /** Writes the bytes of {@code s} to {@code file}. */
    static void write(Path file, MemorySegment s) throws Exception {
        Files.write(file, s.toArray(ValueLayout.JAVA_BYTE));
    }

    /**
     * Runs {@code kernel} in {@code exe}, a harness taking {@code DIR KERNEL GX GY BX BY [SCALAR...]} (kernels_emu,
     * cast_emu; emu_io.h's EmuArgs), on grid × block, with {@code buffers} (by their names in the .cu: each written to
     * a new directory under {@code work} and read back into its segment after the launch) and the scalars.
     */
    static void launch(Path exe, Path work, String kernel, Dim grid, Dim block, Map<String, MemorySegment> buffers,
                       Object... scalars) throws Exception {
        if (grid.z() != 1 || block.z() != 1) {
            throw new IllegalArgumentException("the harnesses take 2-D grids and blocks, got " + grid + ", " + block);
        }
        Path dir = Files.createTempDirectory(work, kernel + "-");
        for (var e : buffers.entrySet()) {
            write(dir.resolve(e.getKey() + ".bin"), e.getValue());
        }
        List<String> args = new ArrayList<>(List.of(dir.toString(), kernel, Integer.toString(grid.x()),
                Integer.toString(grid.y()), Integer.toString(block.x()), Integer.toString(block.y())));
        for (Object s : scalars) {
            args.add(arg(s));
        }
        run(exe, args);
        try (Arena a = Arena.ofConfined()) {
            for (var e : buffers.entrySet()) {
                e.getValue().copyFrom(read(a, dir.resolve(e.getKey() + ".bin")));
            }
        }
    }

    /** Name, segment, name, segment, … in order: a launch's buffers. */
    static Map<String, MemorySegment> buffers(Object... nameSegment) {
        Map<String, MemorySegment> m = new LinkedHashMap<>();
        for (int i = 0; i < nameSegment.length; i += 2) {
            m.put((String) nameSegment[i], (MemorySegment) nameSegment[i + 1]);
        }
        return m;
    }

    /**
     * The CUDA toolkit's include directory (for harnesses that take CUDA's own host headers, e.g. cuda_fp8.h):
     * $CUDA_HOME/include or /usr/local/cuda/include; skips the calling test when neither has cuda_fp8.h.
     */
    static Path cudaInclude() {
        List<Path> dirs = new ArrayList<>();
        if (System.getenv("CUDA_HOME") != null) {
            dirs.add(Path.of(System.getenv("CUDA_HOME"), "include"));
        }
        dirs.add(Path.of("/usr/local/cuda/include"));
        for (Path d : dirs) {
            if (Files.isRegularFile(d.resolve("cuda_fp8.h"))) {
                return d;
            }
        }
        assumeTrue(false, "cuda_fp8.h not found in " + dirs + ": the CUDA source not emulated");
        return null;
    }

    /** The bytes of {@code file} in a new 16-byte aligned segment of {@code arena}. */
    static MemorySegment read(Arena arena, Path file) throws Exception {
        byte[] b = Files.readAllBytes(file);
        return arena.allocate(Math.max(1, b.length), 16).asSlice(0, b.length).copyFrom(MemorySegment.ofArray(b));
    }

    private static final ValueLayout.OfShort LE16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfFloat LE32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    /** Writes {@code h} (e.g. bf16 codes) to {@code file}, little-endian. */
    static void writeShorts(Path file, short[] h) throws Exception {
        MemorySegment s = MemorySegment.ofArray(new byte[2 * h.length]);
        for (int i = 0; i < h.length; i++) {
            s.set(LE16, 2L * i, h[i]);
        }
        write(file, s);
    }

    /** The little-endian 16-bit values of {@code file}. */
    static short[] readShorts(Path file) throws Exception {
        MemorySegment s = MemorySegment.ofArray(Files.readAllBytes(file));
        short[] h = new short[(int) (s.byteSize() / 2)];
        for (int i = 0; i < h.length; i++) {
            h[i] = s.get(LE16, 2L * i);
        }
        return h;
    }

    /** The little-endian floats of {@code file}. */
    static float[] readFloats(Path file) throws Exception {
        MemorySegment s = MemorySegment.ofArray(Files.readAllBytes(file));
        float[] x = new float[(int) (s.byteSize() / 4)];
        for (int i = 0; i < x.length; i++) {
            x[i] = s.get(LE32, 4L * i);
        }
        return x;
    }
}
