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

    /**
     * The checks a fused GELU GEMM adds to {@link #check}: {@code pre}, an fp32 M×N matrix with leading dimension
     * {@code ldpre}, written ({@code preWritten}: the forward, which must not overlap A, B, C or {@code vector}, the
     * bias it reads) or read (the backward: it must not overlap C; {@code vector} is the bias gradient it writes, N
     * floats, which must not overlap A, B, C or pre).
     */
    static void checkPre(int threads, boolean preWritten, Layout layout, int M, int N, int K,
                         MemorySegment a, int lda, MemorySegment b, int ldb, MemorySegment c, int ldc,
                         MemorySegment pre, int ldpre, MemorySegment vector) {
        checkOperand("pre", pre, DType.FP32, ldpre, M, N);
        if (threads > 1) {
            checkShared("pre", pre, threads);
        }
        if (M == 0 || N == 0) {
            return;
        }
        long preBytes = usedBytes(DType.FP32, ldpre, M, N);
        long aBytes = K == 0 ? 0 : usedBytes(DType.FP32, lda, layout.storedRowsA(M, K), layout.storedColsA(M, K));
        long bBytes = K == 0 ? 0 : usedBytes(DType.FP32, ldb, layout.storedRowsB(K, N), layout.storedColsB(K, N));
        checkDisjoint("pre", pre, preBytes, "C", c, usedBytes(DType.FP32, ldc, M, N));
        if (preWritten) {
            checkDisjoint("A", a, aBytes, "pre", pre, preBytes);
            checkDisjoint("B", b, bBytes, "pre", pre, preBytes);
            if (vector != null) {
                checkDisjoint("bias", vector, (long) N * Float.BYTES, "pre", pre, preBytes);
            }
        } else if (vector != null) {
            checkAlive("biasGrad", vector);
            if (vector.byteSize() < (long) N * Float.BYTES) {
                throw new IllegalArgumentException("biasGrad holds " + vector.byteSize() / Float.BYTES
                        + " floats, N=" + N + " needed");
            }
            if (threads > 1) {
                checkShared("biasGrad", vector, threads);
            }
            long vBytes = (long) N * Float.BYTES;
            checkDisjoint("A", a, aBytes, "biasGrad", vector, vBytes);
            checkDisjoint("B", b, bBytes, "biasGrad", vector, vBytes);
            checkDisjoint("C", c, usedBytes(DType.FP32, ldc, M, N), "biasGrad", vector, vBytes);
            checkDisjoint("pre", pre, preBytes, "biasGrad", vector, vBytes);
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
        checkDisjoint(name, s, sBytes, "C", c, cBytes);
    }

    /** {@code out} (an output) must not overlap {@code in}: "OUT overlaps IN: the output must not alias an input". */
    private static void checkDisjoint(String in, MemorySegment s, long sBytes, String out, MemorySegment o,
                                      long oBytes) {
        if (sBytes == 0 || oBytes == 0) {
            return;
        }
        MemorySegment used = s.asSlice(0, sBytes);
        if (used.asOverlappingSlice(o.asSlice(0, oBytes)).isPresent()) {
            throw new IllegalArgumentException(out + " overlaps " + in + ": the output must not alias an input");
        }
    }
}
