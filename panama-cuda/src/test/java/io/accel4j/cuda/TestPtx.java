package io.accel4j.cuda;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;

/**
 * The PTX the GPU tests load: {@code axpy(float a, const float* x, float* y, int n)}, {@code y[i] += a·x[i]},
 * made by {@code nvcc -ptx -arch=compute_75} (CUDA 13) with {@code .version} lowered to 7.0 so that any driver
 * from CUDA 11 on can JIT it; and a broken copy that reads an undeclared register.
 */
final class TestPtx {

    private TestPtx() {}

    static String axpy() {
        try (InputStream in = TestPtx.class.getResourceAsStream("axpy.ptx")) {
            if (in == null) {
                throw new IllegalStateException("axpy.ptx missing from the test resources");
            }
            return new String(in.readAllBytes(), StandardCharsets.US_ASCII);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** {@link #axpy()} with an undeclared register {@code %f9}: the JIT rejects it with "Unknown symbol '%f9'". */
    static String broken() {
        String ptx = axpy();
        String broken = ptx.replace("%f2, %f1, %f3;", "%f2, %f1, %f9;");
        if (broken.equals(ptx)) {
            throw new IllegalStateException("axpy.ptx changed: update TestPtx.broken()");
        }
        return broken;
    }
}
