package io.accel4j.kernels;

import io.accel4j.core.DType;
import io.accel4j.cuda.CublasLtHandle;
import io.accel4j.cuda.CublasLtMatmul;
import io.accel4j.cuda.CudaContext;
import io.accel4j.cuda.CudaException;
import io.accel4j.cuda.DeviceBuffer;
import io.accel4j.cuda.bindings.cublas_api_h;
import java.lang.foreign.MemorySegment;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;

/**
 * The cuBLASLt side of {@link GpuMatmul}: a handle, a workspace, and the plans made so far (cached by shape, types,
 * epilogue pointers and operand alignments, least recently used closed beyond {@value #MAX_PLANS}), shared by
 * {@link LinearGpu}, {@link LinearGeluGpu} and {@link Fp8LinearGpu}. A fused epilogue cuBLASLt has no algorithm
 * for is remembered ({@link #fusedPlan}) so that it is asked once. Not thread-safe.
 */
final class CublasLtPlans implements AutoCloseable {

    /** cuBLASLt's recommended workspace for Hopper (NVIDIA's cuBLAS docs: 32 MiB). */
    static final long WORKSPACE_BYTES = 32L << 20;
    /**
     * Plans kept: a GPT-2 step has a few per layer and pass, each distinct by bias address, and with FP8 three more
     * per linear layer, distinct by their operands' scale-inverse slots (GPT-2 XL's 48 blocks: ~1,000 in all).
     */
    static final int MAX_PLANS = 2048;

    /** What a plan computes (the launchers' GEMMs). */
    enum Kind { FORWARD, DINP, DWEIGHT, FP8, FORWARD_GELU, DINP_DGELU }

    /**
     * A plan's identity: everything its spec depends on. {@code extra} is the amax address of an FP8 plan, the aux
     * address of a GELU plan; {@code scaleA} and {@code scaleB} the device addresses of an FP8 plan's operands'
     * dequantisation factors (cuBLASLt's A and B); 0 where unused.
     */
    record Key(Kind kind, int m, int n, int k, int typeA, int typeB, int typeD, long bias, long extra,
               long scaleA, long scaleB, int alignA, int alignB, int alignC, int alignD) {}

    private final CublasLtHandle lt;
    private final DeviceBuffer workspace;
    /**
     * Fused GELU epilogues cuBLASLt had no algorithm for ({@link #unsupportedKey}: kind, operand type, with or
     * without a bias): asked once, then refused at once.
     */
    private final Set<String> unsupported = new HashSet<>();
    private final Map<Key, CublasLtMatmul> plans = new LinkedHashMap<>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<Key, CublasLtMatmul> eldest) {
            if (size() > MAX_PLANS) {
                eldest.getValue().close();
                return true;
            }
            return false;
        }
    };

    /** A handle and a {@value #WORKSPACE_BYTES}-byte workspace on {@code context} (the handle closed on failure). */
    CublasLtPlans(CudaContext context) {
        this.lt = CublasLtHandle.create(context);
        try {
            this.workspace = context.allocate(WORKSPACE_BYTES);
        } catch (RuntimeException e) {
            lt.close();
            throw e;
        }
    }

    /** {@code "cuBLASLt 120605"}. */
    String describe() {
        return "cuBLASLt " + lt.version();
    }

    /** The cached plan of {@code key}, made from {@code spec(key)} on its first use. */
    CublasLtMatmul plan(Key key, Function<Key, CublasLtMatmul.Spec> spec) {
        CublasLtMatmul p = plans.get(key);
        if (p == null) {
            p = CublasLtMatmul.plan(lt, spec.apply(key), workspace);
            plans.put(key, p);
        }
        return p;
    }

    /** {@link #plan}, or null when cuBLASLt has no algorithm for a fused GELU spec (NOT_SUPPORTED; remembered). */
    CublasLtMatmul fusedPlan(Key key, Function<Key, CublasLtMatmul.Spec> spec) {
        if (unsupported.contains(unsupportedKey(key))) {
            return null;
        }
        try {
            return plan(key, spec);
        } catch (CudaException e) {
            if (e.status() != cublas_api_h.CUBLAS_STATUS_NOT_SUPPORTED) {
                throw e;
            }
            unsupported.add(unsupportedKey(key));
            return null;
        }
    }

    /** What a fused epilogue's support depends on here: the kind, the operand type, whether there is a bias. */
    private static String unsupportedKey(Key key) {
        return key.kind() + "/" + key.typeA() + "/" + (key.bias() != 0);
    }

    /** The spec every plan starts from: the key's shape and A/B types, fp32 C and D, the key's alignments. */
    static CublasLtMatmul.Spec spec(Key key) {
        return CublasLtMatmul.spec(key.m(), key.n(), key.k())
                .types(key.typeA(), key.typeB(), cublas_api_h.CUDA_R_32F, cublas_api_h.CUDA_R_32F)
                .alignments(key.alignA(), key.alignB(), key.alignC(), key.alignD());
    }

    /** cuBLASLt's alignment of {@code s}'s address. */
    static int align(MemorySegment s) {
        return CublasLtMatmul.alignment(s.address());
    }

    /** {@code cudaDataType} of a {@link DType}. */
    static int cudaType(DType t) {
        return switch (t) {
            case FP32 -> cublas_api_h.CUDA_R_32F;
            case BF16 -> cublas_api_h.CUDA_R_16BF;
            case FP16 -> cublas_api_h.CUDA_R_16F;
            case FP8_E4M3 -> cublas_api_h.CUDA_R_8F_E4M3;
            case FP8_E5M2 -> cublas_api_h.CUDA_R_8F_E5M2;
        };
    }

    @Override
    public void close() {
        plans.values().forEach(CublasLtMatmul::close);
        plans.clear();
        workspace.close();
        lt.close();
    }
}
