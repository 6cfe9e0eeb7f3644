package io.accel4j.kernels;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * ring.cu's element functions (the ring all-reduce's combine: fp32 add and Java's {@code Math.max}; AVG's
 * division), compiled for the host by nvcc ({@code src/test/cuda/ring_host_check.cu}), against Java bit for bit:
 * edge values (±0, ±∞, NaN, subnormals) crossed with each other, then random bit patterns. Host and device fp32
 * add/divide are both IEEE round-to-nearest (no fast-math), so this checks the kernels' arithmetic without a GPU.
 * Skipped without nvcc.
 */
class RingHostCheckTest {

    private static final ValueLayout.OfFloat LE = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    @TempDir
    Path tmp;

    @Test
    void combineAndDivideMatchJava() throws Exception {
        Path nvcc = KernelPtxTest.findTool("nvcc");
        assumeTrue(nvcc != null, "nvcc not found (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin): ring.cu not run");
        Path exe = tmp.resolve("ring_host_check");
        KernelPtxTest.run(List.of(nvcc.toString(), "-O1", "-arch=sm_80", "-Isrc/main/cuda", "-o", exe.toString(),
                "src/test/cuda/ring_host_check.cu"), Map.of());

        float[] edges = {0f, -0f, 1f, -1f, Float.MIN_VALUE, -Float.MIN_VALUE, Float.MAX_VALUE, -Float.MAX_VALUE,
            Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, Float.NaN, Float.intBitsToFloat(0xffc00001), 3f, -2.5f};
        long seed = System.nanoTime();
        SplittableRandom r = new SplittableRandom(seed);
        int random = 100_001;
        int n = edges.length * edges.length + random;
        float[] a = new float[n], b = new float[n];
        int k = 0;
        for (float x : edges) {
            for (float y : edges) {
                a[k] = x;
                b[k++] = y;
            }
        }
        for (; k < n; k++) {
            a[k] = k % 2 == 0 ? Float.intBitsToFloat(r.nextInt()) : (float) r.nextDouble(-4, 4);
            b[k] = k % 3 == 0 ? Float.intBitsToFloat(r.nextInt()) : (k % 5 == 0 ? a[k] : (float) r.nextDouble(-4, 4));
        }
        MemorySegment in = MemorySegment.ofArray(new byte[8 * n]);
        for (int i = 0; i < n; i++) {
            in.setAtIndex(LE, i, a[i]);
            in.setAtIndex(LE, n + i, b[i]);
        }
        Path inFile = Files.write(tmp.resolve("in.f32"), in.toArray(JAVA_BYTE));
        Path outFile = tmp.resolve("out.f32");
        KernelPtxTest.run(List.of(exe.toString(), inFile.toString(), outFile.toString()), Map.of());
        MemorySegment out = MemorySegment.ofArray(Files.readAllBytes(outFile));
        if (out.byteSize() != 12L * n) {
            throw new AssertionError("harness wrote " + out.byteSize() + " bytes, expected " + 12L * n);
        }
        for (int i = 0; i < n; i++) {
            same("sum", a[i], b[i], a[i] + b[i], out.getAtIndex(LE, i), seed);
            same("max", a[i], b[i], Math.max(a[i], b[i]), out.getAtIndex(LE, n + i), seed);
            same("a/3", a[i], 3f, a[i] / 3f, out.getAtIndex(LE, 2L * n + i), seed);
        }
    }

    /** Equal bits, or both NaN (payloads are not part of the contract). */
    private static void same(String what, float x, float y, float java, float cuda, long seed) {
        boolean ok = Float.isNaN(java) ? Float.isNaN(cuda)
                : Float.floatToRawIntBits(java) == Float.floatToRawIntBits(cuda);
        if (!ok) {
            throw new AssertionError(String.format("%s(%s, %s): ring.cu %s (0x%08x), Java %s (0x%08x), seed %d", what,
                    x, y, cuda, Float.floatToRawIntBits(cuda), java, Float.floatToRawIntBits(java), seed));
        }
    }
}
