package io.accel4j.cpu.gemm;

import io.accel4j.core.DType;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

/** The argument checks of {@link Gemm}, done once at the entry; messages name the argument and both numbers. */
final class GemmArgs {

    private GemmArgs() {}

    /** A thread that never runs: a segment it may access is one every pool thread may access. */
    private static final Thread ANY_OTHER_THREAD = new Thread(() -> {});

    static void check(int threads, Layout layout, int M, int N, int K,
                      MemorySegment a, DType aType, int lda,
                      MemorySegment b, DType bType, int ldb,
                      MemorySegment c, DType cType, int ldc, MemorySegment bias) {
        Objects.requireNonNull(layout, "layout");
        Objects.requireNonNull(aType, "aType");
        Objects.requireNonNull(bType, "bType");
        Objects.requireNonNull(cType, "cType");
        if (M < 0 || N < 0 || K < 0) {
            throw new IllegalArgumentException("GEMM sizes must be >= 0, got M=" + M + " N=" + N + " K=" + K);
        }
        if (cType != DType.FP32 && cType != DType.BF16) {
            throw new IllegalArgumentException("C must be FP32 or BF16, got " + cType);
        }
        checkOperand("A", a, aType, lda, layout.storedRowsA(M, K), layout.storedColsA(M, K));
        checkOperand("B", b, bType, ldb, layout.storedRowsB(K, N), layout.storedColsB(K, N));
        checkOperand("C", c, cType, ldc, M, N);
        if (bias != null) {
            checkAlive("bias", bias);
            if (bias.byteSize() < (long) N * Float.BYTES) {
                throw new IllegalArgumentException("bias holds " + bias.byteSize() / Float.BYTES
                        + " floats, N=" + N + " needed");
            }
        }
        if (threads > 1) {
            checkShared("A", a, threads);
            checkShared("B", b, threads);
            checkShared("C", c, threads);
            if (bias != null) {
                checkShared("bias", bias, threads);
            }
        }
        if (M > 0 && N > 0) {
            long cBytes = usedBytes(cType, ldc, M, N);
            if (K > 0) {
                checkDisjoint("A", a, usedBytes(aType, lda, layout.storedRowsA(M, K), layout.storedColsA(M, K)), c, cBytes);
                checkDisjoint("B", b, usedBytes(bType, ldb, layout.storedRowsB(K, N), layout.storedColsB(K, N)), c, cBytes);
            }
            if (bias != null) {
                checkDisjoint("bias", bias, (long) N * Float.BYTES, c, cBytes);
            }
        }
    }

    /** The operand precision: FP32, BF16 or FP16. */
    static void checkOperands(DType operands) {
        Objects.requireNonNull(operands, "operands");
        if (operands != DType.FP32 && operands != DType.BF16 && operands != DType.FP16) {
            throw new IllegalArgumentException("GEMM operands must be FP32, BF16 or FP16, got " + operands);
        }
    }

    /** Bytes spanned by a rows×cols matrix with leading dimension ld (0 when empty). */
    static long usedBytes(DType t, int ld, int rows, int cols) {
        if (rows == 0 || cols == 0) {
            return 0;
        }
        return ((long) (rows - 1) * ld + cols) * t.byteSize();
    }

    private static void checkOperand(String name, MemorySegment s, DType t, int ld, int rows, int cols) {
        Objects.requireNonNull(s, name);
        checkAlive(name, s);
        if (ld < Math.max(1, cols)) {
            throw new IllegalArgumentException("ld" + name.toLowerCase() + "=" + ld + " is less than the "
                    + cols + " columns " + name + " holds as stored");
        }
        long need = usedBytes(t, ld, rows, cols);
        if (s.byteSize() < need) {
            throw new IllegalArgumentException(name + " is " + s.byteSize() + " bytes but a " + rows + "×" + cols + " "
                    + t + " matrix with ld=" + ld + " needs " + need);
        }
    }

    private static void checkShared(String name, MemorySegment s, int threads) {
        if (!s.isAccessibleBy(ANY_OTHER_THREAD)) {
            throw new IllegalArgumentException(name + " belongs to a confined arena, which only its owner thread may "
                    + "read, but this GEMM runs on " + threads + " threads: allocate it from Arena.ofShared(), "
                    + "Arena.ofAuto() or Arena.global(), or pass a 1-thread Parallel");
        }
    }

    private static void checkAlive(String name, MemorySegment s) {
        if (!s.scope().isAlive()) {
            throw new IllegalStateException(name + "'s memory has been freed (its arena is closed)");
        }
    }

    private static void checkDisjoint(String name, MemorySegment s, long sBytes, MemorySegment c, long cBytes) {
        if (sBytes == 0 || cBytes == 0) {
            return;
        }
        MemorySegment used = s.asSlice(0, sBytes);
        if (used.asOverlappingSlice(c.asSlice(0, cBytes)).isPresent()) {
            throw new IllegalArgumentException("C overlaps " + name + ": the output must not alias an input");
        }
    }
}
