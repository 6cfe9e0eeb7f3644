package io.accel4j.cuda;

import static io.accel4j.cuda.bindings.cublasLt_h.*;

import io.accel4j.cuda.bindings.cublas_api_h;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Objects;
import java.util.Set;

/**
 * One cuBLASLt matmul, planned once and run any number of times: the operation descriptor, the four matrix layouts
 * and the algorithm the heuristic chose for a workspace, all destroyed by {@link #close()}.
 *
 * <p>cuBLASLt's matmul is column-major: {@code D (m×n) = epilogue(alpha·op(A)·op(B) + beta·C)} with {@code op(A)}
 * m×k and {@code op(B)} k×n; a transposed operand is stored the other way round ({@code A} k×m when {@code transA}).
 * The epilogue may add a bias (length m, broadcast over the columns), apply GELU, store its input in an auxiliary
 * matrix, or write a bias gradient (which it <em>overwrites</em>, it does not accumulate). FP8 operands take device
 * pointers to their float scale factors, and the amax of D can be written to device memory. Every pointer fixed here
 * (bias, aux, scales, amax) is a device address that must stay valid for every {@link #run}; the operands come with
 * each run. A row-major product {@code Y = X·Wᵀ} is the column-major {@code Yᵀ = W·Xᵀ}: see {@code GpuOps}.
 *
 * <p>Scalars alpha and beta are FP32 on the host (scale type {@code CUDA_R_32F}). Every cuBLASLt status is checked:
 * a failure is a {@link CudaException} with the call, the status name and cuBLASLt's message.
 */
public final class CublasLtMatmul extends NativeResource {

    /** Epilogues this class knows, with what they need: a bias pointer, an aux pointer. */
    private static final Set<Integer> EPILOGUES = Set.of(CUBLASLT_EPILOGUE_DEFAULT, CUBLASLT_EPILOGUE_RELU,
            CUBLASLT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_GELU, CUBLASLT_EPILOGUE_GELU_AUX, CUBLASLT_EPILOGUE_GELU_BIAS,
            CUBLASLT_EPILOGUE_GELU_AUX_BIAS, CUBLASLT_EPILOGUE_DGELU, CUBLASLT_EPILOGUE_DGELU_BGRAD,
            CUBLASLT_EPILOGUE_BGRADA, CUBLASLT_EPILOGUE_BGRADB);
    private static final Set<Integer> WITH_BIAS = Set.of(CUBLASLT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_GELU_BIAS,
            CUBLASLT_EPILOGUE_GELU_AUX_BIAS, CUBLASLT_EPILOGUE_DGELU_BGRAD, CUBLASLT_EPILOGUE_BGRADA,
            CUBLASLT_EPILOGUE_BGRADB);
    private static final Set<Integer> WITH_AUX = Set.of(CUBLASLT_EPILOGUE_GELU_AUX, CUBLASLT_EPILOGUE_GELU_AUX_BIAS,
            CUBLASLT_EPILOGUE_DGELU, CUBLASLT_EPILOGUE_DGELU_BGRAD);

    /**
     * What to multiply: sizes, transposes, types, leading dimensions and the epilogue's pointers. Built with
     * {@link CublasLtMatmul#spec}; {@link #check()} validates it without touching the library.
     */
    public static final class Spec {
        private final int m;
        private final int n;
        private final int k;
        private boolean transA;
        private boolean transB;
        private int aType = cublas_api_h.CUDA_R_32F;
        private int bType = cublas_api_h.CUDA_R_32F;
        private int cType = cublas_api_h.CUDA_R_32F;
        private int dType = cublas_api_h.CUDA_R_32F;
        private int computeType = cublas_api_h.CUBLAS_COMPUTE_32F;
        private long lda = -1;
        private long ldb = -1;
        private long ldc = -1;
        private long ldd = -1;
        private int epilogue = CUBLASLT_EPILOGUE_DEFAULT;
        private long bias;
        private int biasType = -1;
        private long aux;
        private long auxLd;
        private long aScale;
        private long bScale;
        private long dScale;
        private long amaxD;
        private boolean fastAccum;
        private final int[] alignments = {MAX_ALIGNMENT, MAX_ALIGNMENT, MAX_ALIGNMENT, MAX_ALIGNMENT};

        private Spec(int m, int n, int k) {
            this.m = m;
            this.n = n;
            this.k = k;
        }

        /** {@code op(A) = Aᵀ} (A stored k×m) and/or {@code op(B) = Bᵀ} (B stored n×k). */
        public Spec transpose(boolean a, boolean b) {
            transA = a;
            transB = b;
            return this;
        }

        /** The {@code cudaDataType} of A, B, C and D ({@code cublas_api_h.CUDA_R_*}); all FP32 by default. */
        public Spec types(int a, int b, int c, int d) {
            aType = a;
            bType = b;
            cType = c;
            dType = d;
            return this;
        }

        /** {@code cublasComputeType_t}: {@code CUBLAS_COMPUTE_32F} (default) or {@code CUBLAS_COMPUTE_32F_FAST_TF32}. */
        public Spec compute(int type) {
            computeType = type;
            return this;
        }

        /** Leading dimensions in elements (column-major); by default the stored matrices are packed. */
        public Spec leadingDimensions(long a, long b, long c, long d) {
            lda = a;
            ldb = b;
            ldc = c;
            ldd = d;
            return this;
        }

        /** {@code cublasLt_h.CUBLASLT_EPILOGUE_*}. */
        public Spec epilogue(int value) {
            epilogue = value;
            return this;
        }

        /** The bias (read) or bias gradient (written) vector, a device address, and its {@code cudaDataType}. */
        public Spec bias(long address, int type) {
            bias = address;
            biasType = type;
            return this;
        }

        /** The GELU epilogues' auxiliary matrix (m×n, column-major, leading dimension {@code ld}): a device address. */
        public Spec aux(long address, long ld) {
            aux = address;
            auxLd = ld;
            return this;
        }

        /**
         * FP8 scale factors (device addresses of one float each; 0: none, i.e. 1): {@code D = dScale·(alpha·aScale·
         * bScale·op(A)·op(B) + …)}, so {@code aScale}, {@code bScale} are the <em>dequantisation</em> factors (the
         * inverse of the scale the operand was encoded with) and {@code dScale} (FP8 D only) the encoding scale of D.
         */
        public Spec scales(long a, long b, long d) {
            aScale = a;
            bScale = b;
            dScale = d;
            return this;
        }

        /**
         * Where the amax of D is written (a device float, {@code max |D|} before {@code dScale}; 0: not computed);
         * FP8 operands only (cuBLASLt computes it in its FP8 kernels).
         */
        public Spec amaxD(long address) {
            amaxD = address;
            return this;
        }

        /** FP8 fast accumulation (no periodic promotion to higher precision). */
        public Spec fastAccum(boolean on) {
            fastAccum = on;
            return this;
        }

        /**
         * The byte alignment the A, B, C, D addresses of every run will have (powers of two, at most 256, the
         * default): the heuristic only picks algorithms that work with them, and {@link #run} checks them.
         * {@link CublasLtMatmul#alignment(long)} gives an address's.
         */
        public Spec alignments(int a, int b, int c, int d) {
            alignments[0] = a;
            alignments[1] = b;
            alignments[2] = c;
            alignments[3] = d;
            return this;
        }

        private long rowsA() {
            return transA ? k : m;
        }

        private long rowsB() {
            return transB ? n : k;
        }

        long lda() {
            return lda < 0 ? rowsA() : lda;
        }

        long ldb() {
            return ldb < 0 ? rowsB() : ldb;
        }

        long ldc() {
            return ldc < 0 ? m : ldc;
        }

        long ldd() {
            return ldd < 0 ? m : ldd;
        }

        /**
         * Throws {@link IllegalArgumentException}, naming the argument and the numbers, unless the sizes are positive,
         * the leading dimensions cover the stored rows, the epilogue is known and has exactly the pointers it needs.
         */
        public Spec check() {
            if (m < 1 || n < 1 || k < 1) {
                throw new IllegalArgumentException("m, n, k must be >= 1, got " + m + ", " + n + ", " + k);
            }
            ld("lda", lda(), rowsA());
            ld("ldb", ldb(), rowsB());
            ld("ldc", ldc(), m);
            ld("ldd", ldd(), m);
            for (int i = 0; i < 4; i++) {
                int a = alignments[i];
                if (a < 1 || a > MAX_ALIGNMENT || Integer.bitCount(a) != 1) {
                    throw new IllegalArgumentException("alignment of " + "ABCD".charAt(i) + " must be a power of two"
                            + " <= " + MAX_ALIGNMENT + ", got " + a);
                }
            }
            if (!EPILOGUES.contains(epilogue)) {
                throw new IllegalArgumentException("unknown epilogue " + epilogue + " (cublasLt_h.CUBLASLT_EPILOGUE_*)");
            }
            if (WITH_BIAS.contains(epilogue) != (bias != 0)) {
                throw new IllegalArgumentException("epilogue " + epilogue + (bias == 0 ? " needs a bias pointer"
                        : " takes no bias pointer, got 0x" + Long.toHexString(bias)));
            }
            if (WITH_AUX.contains(epilogue) != (aux != 0)) {
                throw new IllegalArgumentException("epilogue " + epilogue + (aux == 0 ? " needs an aux pointer"
                        : " takes no aux pointer, got 0x" + Long.toHexString(aux)));
            }
            if (aux != 0 && (auxLd < m || auxLd % 8 != 0)) {
                throw new IllegalArgumentException("aux ld must be a multiple of 8 and >= m " + m + ", got " + auxLd);
            }
            if (isFp8(aType) || isFp8(bType)) {
                checkFp8();
            } else if (aScale != 0 || bScale != 0 || dScale != 0 || amaxD != 0 || fastAccum) {
                throw new IllegalArgumentException("scales, amax of D and fast accumulation are for FP8 operands, got"
                        + " A type " + aType + ", B type " + bType);
            }
            return this;
        }

        /**
         * cuBLASLt's rules for FP8 operands (cuBLAS docs, {@code cublasLtMatmul}, Hopper and Ada): both operands FP8,
         * not both E5M2; the "TN" layout (A transposed, B not), i.e. both stored with k as the contiguous dimension;
         * FP32 compute; D FP32, BF16, FP16 or FP8, C as D except with an FP8 D (C then BF16 or FP16); a D scale only
         * for an FP8 D; and the tensor-core alignment rules ("all matrix dimensions must meet the optimal requirements
         * ... 16-byte alignment"): k, lda, ldb multiples of 16 (one byte each), m, ldc, ldd times C's and D's element
         * size multiples of 16 bytes, every address 16-byte aligned. n is free.
         */
        private void checkFp8() {
            if (!isFp8(aType) || !isFp8(bType)) {
                throw new IllegalArgumentException("an FP8 matmul needs both A and B FP8 (types 28, 29), got A "
                        + aType + ", B " + bType);
            }
            if (aType == cublas_api_h.CUDA_R_8F_E5M2 && bType == cublas_api_h.CUDA_R_8F_E5M2) {
                throw new IllegalArgumentException("FP8 A and B cannot both be E5M2: E4M3 x E4M3, E4M3 x E5M2 or"
                        + " E5M2 x E4M3");
            }
            if (!transA || transB) {
                throw new IllegalArgumentException("FP8 needs A transposed and B not (\"TN\": both stored k-major),"
                        + " got op " + (transA ? 'T' : 'N') + (transB ? 'T' : 'N'));
            }
            if (computeType != cublas_api_h.CUBLAS_COMPUTE_32F) {
                throw new IllegalArgumentException("FP8 needs compute type CUBLAS_COMPUTE_32F ("
                        + cublas_api_h.CUBLAS_COMPUTE_32F + "), got " + computeType);
            }
            multipleOf16("k", k);
            multipleOf16("lda", lda());
            multipleOf16("ldb", ldb());
            for (int i = 0; i < 4; i++) {
                if (alignments[i] < 16) {
                    throw new IllegalArgumentException("FP8 needs " + "ABCD".charAt(i) + " 16-byte aligned, the spec"
                            + " says " + alignments[i]);
                }
            }
            boolean fp8D = isFp8(dType);
            if (!fp8D && dType != cublas_api_h.CUDA_R_32F && dType != cublas_api_h.CUDA_R_16BF
                    && dType != cublas_api_h.CUDA_R_16F) {
                throw new IllegalArgumentException("FP8 D must be FP32, BF16, FP16 or FP8, got type " + dType);
            }
            boolean cOk = fp8D ? cType == cublas_api_h.CUDA_R_16BF || cType == cublas_api_h.CUDA_R_16F
                    : cType == dType;
            if (!cOk) {
                throw new IllegalArgumentException("FP8 C type " + cType + " does not go with D type " + dType
                        + (fp8D ? ": BF16 (14) or FP16 (2) with an FP8 D" : ": C must have D's type"));
            }
            if (dScale != 0 && !fp8D) {
                throw new IllegalArgumentException("a D scale is for an FP8 D, got D type " + dType);
            }
            rowBytes("m", m, cType, "C");
            rowBytes("m", m, dType, "D");
            rowBytes("ldc", ldc(), cType, "C");
            rowBytes("ldd", ldd(), dType, "D");
        }

        /** Tensor-core rule: {@code v · sizeof(type)} a multiple of 16 bytes. */
        private static void rowBytes(String name, long v, int type, String matrix) {
            int size = type == cublas_api_h.CUDA_R_32F ? 4 : isFp8(type) ? 1 : 2;
            if (v * size % 16 != 0) {
                throw new IllegalArgumentException("FP8 needs " + name + " × " + size + " bytes (" + matrix
                        + " type " + type + ") a multiple of 16, got " + name + " " + v);
            }
        }

        private static boolean isFp8(int type) {
            return type == cublas_api_h.CUDA_R_8F_E4M3 || type == cublas_api_h.CUDA_R_8F_E5M2;
        }

        private static void multipleOf16(String name, long v) {
            if (v % 16 != 0) {
                throw new IllegalArgumentException("FP8 needs " + name + " a multiple of 16, got " + v);
            }
        }

        private static void ld(String name, long ld, long rows) {
            if (ld < rows) {
                throw new IllegalArgumentException(name + " " + ld + " is less than the stored rows " + rows);
            }
        }

        @Override
        public String toString() {
            return "m " + m + ", n " + n + ", k " + k + ", op " + (transA ? 'T' : 'N') + (transB ? 'T' : 'N')
                    + ", types A " + aType + " B " + bType + " C " + cType + " D " + dType + ", compute " + computeType
                    + ", epilogue " + epilogue + ", alignments " + java.util.Arrays.toString(alignments);
        }
    }

    private final CublasLtHandle lt;
    private final Spec spec;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment algo;
    private final long workspace;
    private final long workspaceBytes;
    private MemorySegment desc = MemorySegment.NULL;
    private final MemorySegment[] layouts = {MemorySegment.NULL, MemorySegment.NULL, MemorySegment.NULL,
        MemorySegment.NULL};

    /** The largest alignment the heuristic is told about (cuBLASLt's default assumption). */
    public static final int MAX_ALIGNMENT = 256;

    /** The byte alignment of a device address: its lowest set bit, at most {@value #MAX_ALIGNMENT}. */
    public static int alignment(long address) {
        return address == 0 ? MAX_ALIGNMENT : (int) Math.min(MAX_ALIGNMENT, Long.lowestOneBit(address));
    }

    /** A spec for {@code D (m×n) = op(A) (m×k) · op(B) (k×n)}: FP32, no transposes, packed, no epilogue. */
    public static Spec spec(int m, int n, int k) {
        return new Spec(m, n, k);
    }

    /**
     * Plans {@code spec} on {@code lt}: the heuristic's best algorithm that needs at most {@code workspace}'s bytes
     * (which the plan borrows: it must outlive every run; {@code null}: no workspace).
     *
     * @throws CudaException with {@code CUBLAS_STATUS_NOT_SUPPORTED} when no algorithm fits
     */
    public static CublasLtMatmul plan(CublasLtHandle lt, Spec spec, DeviceBuffer workspace) {
        Objects.requireNonNull(lt, "lt");
        Objects.requireNonNull(spec, "spec").check();
        return new CublasLtMatmul(lt, spec, workspace);
    }

    private CublasLtMatmul(CublasLtHandle lt, Spec s, DeviceBuffer workspace) {
        this.lt = lt;
        this.spec = s;
        this.workspace = workspace == null ? 0 : workspace.address();
        this.workspaceBytes = workspace == null ? 0 : workspace.byteSize();
        this.algo = arena.allocate(cublasLtMatmulAlgo_t);
        lt.context().makeCurrent();
        try (Arena tmp = Arena.ofConfined()) {
            MemorySegment p = tmp.allocate(ValueLayout.ADDRESS);
            CublasLtHandle.check("cublasLtMatmulDescCreate",
                    cublasLtMatmulDescCreate(p, s.computeType, cublas_api_h.CUDA_R_32F));
            desc = p.get(ValueLayout.ADDRESS, 0);
            setInt(tmp, CUBLASLT_MATMUL_DESC_TRANSA, s.transA ? cublas_api_h.CUBLAS_OP_T : cublas_api_h.CUBLAS_OP_N);
            setInt(tmp, CUBLASLT_MATMUL_DESC_TRANSB, s.transB ? cublas_api_h.CUBLAS_OP_T : cublas_api_h.CUBLAS_OP_N);
            setInt(tmp, CUBLASLT_MATMUL_DESC_EPILOGUE, s.epilogue);
            if (s.bias != 0) {
                setLong(tmp, CUBLASLT_MATMUL_DESC_BIAS_POINTER, s.bias);
                setInt(tmp, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, s.biasType);
            }
            if (s.aux != 0) {
                setLong(tmp, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, s.aux);
                setLong(tmp, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, s.auxLd);
            }
            setPointerIfAny(tmp, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, s.aScale);
            setPointerIfAny(tmp, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, s.bScale);
            setPointerIfAny(tmp, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, s.dScale);
            setPointerIfAny(tmp, CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, s.amaxD);
            if (s.fastAccum) {
                set(CUBLASLT_MATMUL_DESC_FAST_ACCUM, tmp.allocateFrom(ValueLayout.JAVA_BYTE, (byte) 1));
            }
            layouts[0] = layout(tmp, s.aType, s.transA ? s.k : s.m, s.transA ? s.m : s.k, s.lda());
            layouts[1] = layout(tmp, s.bType, s.transB ? s.n : s.k, s.transB ? s.k : s.n, s.ldb());
            layouts[2] = layout(tmp, s.cType, s.m, s.n, s.ldc());
            layouts[3] = layout(tmp, s.dType, s.m, s.n, s.ldd());
            chooseAlgorithm(tmp);
        } catch (RuntimeException e) {
            destroy();
            throw e;
        }
    }

    private void chooseAlgorithm(Arena tmp) {
        MemorySegment p = tmp.allocate(ValueLayout.ADDRESS);
        CublasLtHandle.check("cublasLtMatmulPreferenceCreate", cublasLtMatmulPreferenceCreate(p));
        MemorySegment pref = p.get(ValueLayout.ADDRESS, 0);
        try {
            MemorySegment bytes = tmp.allocateFrom(ValueLayout.JAVA_LONG, workspaceBytes);
            CublasLtHandle.check("cublasLtMatmulPreferenceSetAttribute", cublasLtMatmulPreferenceSetAttribute(pref,
                    CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, bytes, bytes.byteSize()));
            int[] prefs = {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
            for (int i = 0; i < 4; i++) {
                MemorySegment v = tmp.allocateFrom(ValueLayout.JAVA_INT, spec.alignments[i]);
                CublasLtHandle.check("cublasLtMatmulPreferenceSetAttribute",
                        cublasLtMatmulPreferenceSetAttribute(pref, prefs[i], v, v.byteSize()));
            }
            MemorySegment result = tmp.allocate(cublasLtMatmulHeuristicResult_t);
            MemorySegment count = tmp.allocate(ValueLayout.JAVA_INT);
            int status = cublasLtMatmulAlgoGetHeuristic(lt.handle(), desc, layouts[0], layouts[1], layouts[2],
                    layouts[3], pref, 1, result, count);
            if (status != cublas_api_h.CUBLAS_STATUS_SUCCESS) {
                throw CublasLtHandle.failed("cublasLtMatmulAlgoGetHeuristic", status, spec.toString());
            }
            int state = result.get(ValueLayout.JAVA_INT, STATE_OFFSET);
            if (count.get(ValueLayout.JAVA_INT, 0) < 1 || state != cublas_api_h.CUBLAS_STATUS_SUCCESS) {
                throw CublasLtHandle.failed("cublasLtMatmulAlgoGetHeuristic", cublas_api_h.CUBLAS_STATUS_NOT_SUPPORTED,
                        "no algorithm for " + spec + " within a " + workspaceBytes + "-byte workspace");
            }
            algo.copyFrom(result.asSlice(0, cublasLtMatmulAlgo_t.byteSize()));
        } finally {
            CublasLtHandle.check("cublasLtMatmulPreferenceDestroy", cublasLtMatmulPreferenceDestroy(pref));
        }
    }

    private static final long STATE_OFFSET =
            cublasLtMatmulHeuristicResult_t.byteOffset(java.lang.foreign.MemoryLayout.PathElement.groupElement("state"));

    private MemorySegment layout(Arena tmp, int type, long rows, long cols, long ld) {
        MemorySegment p = tmp.allocate(ValueLayout.ADDRESS);
        CublasLtHandle.check("cublasLtMatrixLayoutCreate", cublasLtMatrixLayoutCreate(p, type, rows, cols, ld));
        return p.get(ValueLayout.ADDRESS, 0);
    }

    private void setInt(Arena tmp, int attribute, int value) {
        set(attribute, tmp.allocateFrom(ValueLayout.JAVA_INT, value));
    }

    private void setLong(Arena tmp, int attribute, long value) {
        set(attribute, tmp.allocateFrom(ValueLayout.JAVA_LONG, value));
    }

    private void setPointerIfAny(Arena tmp, int attribute, long address) {
        if (address != 0) {
            setLong(tmp, attribute, address);
        }
    }

    private void set(int attribute, MemorySegment value) {
        CublasLtHandle.check("cublasLtMatmulDescSetAttribute(" + attribute + ")",
                cublasLtMatmulDescSetAttribute(desc, attribute, value, value.byteSize()));
    }

    /** The spec this plan was made for. */
    public Spec spec() {
        return spec;
    }

    /**
     * Queues {@code D = epilogue(alpha·op(A)·op(B) + beta·C)} on {@code stream} ({@code null}: the default stream).
     * {@code a}, {@code b}, {@code c}, {@code d} are device addresses of matrices as the spec describes them;
     * {@code c} may equal {@code d} (in place, e.g. {@code beta = 1} to accumulate).
     */
    public void run(Stream stream, long a, long b, long c, long d, float alpha, float beta) {
        ensureOpen();
        if (a == 0 || b == 0 || c == 0 || d == 0) {
            throw new IllegalArgumentException("null operand: a 0x" + Long.toHexString(a) + ", b 0x"
                    + Long.toHexString(b) + ", c 0x" + Long.toHexString(c) + ", d 0x" + Long.toHexString(d));
        }
        long[] operands = {a, b, c, d};
        for (int i = 0; i < 4; i++) {
            if (alignment(operands[i]) < spec.alignments[i]) {
                throw new IllegalArgumentException("ABCD".charAt(i) + " at 0x" + Long.toHexString(operands[i])
                        + " is " + alignment(operands[i]) + "-byte aligned, the plan assumed " + spec.alignments[i]);
            }
        }
        lt.context().makeCurrent();
        try (Arena tmp = Arena.ofConfined()) {
            int status = cublasLtMatmul(lt.handle(), desc, tmp.allocateFrom(ValueLayout.JAVA_FLOAT, alpha),
                    MemorySegment.ofAddress(a), layouts[0], MemorySegment.ofAddress(b), layouts[1],
                    tmp.allocateFrom(ValueLayout.JAVA_FLOAT, beta), MemorySegment.ofAddress(c), layouts[2],
                    MemorySegment.ofAddress(d), layouts[3], algo, MemorySegment.ofAddress(workspace), workspaceBytes,
                    Stream.handle(stream));
            if (status != cublas_api_h.CUBLAS_STATUS_SUCCESS) {
                throw CublasLtHandle.failed("cublasLtMatmul", status, spec.toString());
            }
        }
    }

    /** Destroys what was created, the first failure rethrown after the rest are destroyed. */
    private void destroy() {
        RuntimeException first = null;
        for (int i = 0; i < layouts.length; i++) {
            if (!layouts[i].equals(MemorySegment.NULL)) {
                try {
                    CublasLtHandle.check("cublasLtMatrixLayoutDestroy", cublasLtMatrixLayoutDestroy(layouts[i]));
                } catch (RuntimeException e) {
                    first = first == null ? e : first;
                }
                layouts[i] = MemorySegment.NULL;
            }
        }
        if (!desc.equals(MemorySegment.NULL)) {
            try {
                CublasLtHandle.check("cublasLtMatmulDescDestroy", cublasLtMatmulDescDestroy(desc));
            } catch (RuntimeException e) {
                first = first == null ? e : first;
            }
            desc = MemorySegment.NULL;
        }
        arena.close();
        if (first != null) {
            throw first;
        }
    }

    @Override
    String describe() {
        return "CublasLtMatmul(" + spec + ")";
    }

    @Override
    void release() {
        lt.context().makeCurrent();
        destroy();
    }
}
