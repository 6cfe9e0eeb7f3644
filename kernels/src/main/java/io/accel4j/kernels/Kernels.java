package io.accel4j.kernels;

import static io.accel4j.kernels.KernelSignature.Param.F32;
import static io.accel4j.kernels.KernelSignature.Param.I32;
import static io.accel4j.kernels.KernelSignature.Param.I64;
import static io.accel4j.kernels.KernelSignature.Param.PTR;
import static io.accel4j.kernels.KernelSignature.Param.TENSOR_MAP;

import java.util.List;

/**
 * The signature of every kernel in {@code kernels/src/main/cuda} (one constant per {@code extern "C" __global__}
 * function, in the order of its C parameter list). {@link #ALL} is what the PTX check compares with the PTX.
 */
public final class Kernels {

    private Kernels() {}

    /**
     * The PTX modules, resources {@code io/accel4j/kernels/ptx/<name>.ptx} (sm_80) and
     * {@code io/accel4j/kernels/ptx/sm_90a/<name>.ptx} (sm_90a).
     */
    public static final List<String> MODULES =
            List.of("adamw", "attention", "attention_bf16", "attention_wgmma", "cast", "classifier", "encoder", "gelu",
                    "layernorm", "lion", "matmul", "norm", "residual", "ring", "sgd");

    // adamw.cu
    public static final KernelSignature ADAMW_F32 = KernelSignature.of("adamw", "adamw_f32",
            PTR, PTR, PTR, PTR, I64, F32, F32, F32, F32, F32, F32, F32, F32);
    public static final KernelSignature ADAMW_BF16 = KernelSignature.of("adamw", "adamw_bf16",
            PTR, PTR, PTR, PTR, PTR, I64, I64, F32, F32, F32, F32, F32, F32, F32, F32, I64);
    public static final KernelSignature ADAMW_F32_MULTI = KernelSignature.of("adamw", "adamw_f32_multi",
            PTR, PTR, PTR, PTR, PTR, I32, F32, F32, F32, F32, F32, F32, F32);
    public static final KernelSignature ADAMW_BF16_MULTI = KernelSignature.of("adamw", "adamw_bf16_multi",
            PTR, PTR, PTR, PTR, PTR, PTR, I32, F32, F32, F32, F32, F32, F32, F32, I64);
    // attention.cu
    public static final KernelSignature ATTENTION_FORWARD = KernelSignature.of("attention", "attention_forward",
            PTR, PTR, PTR, I32, I32, I32, I32, F32);
    public static final KernelSignature ATTENTION_BACKWARD_D = KernelSignature.of("attention",
            "attention_backward_d", PTR, PTR, PTR, I32, I32, I32, I32);
    public static final KernelSignature ATTENTION_BACKWARD_DQ = KernelSignature.of("attention",
            "attention_backward_dq", PTR, PTR, PTR, PTR, PTR, I32, I32, I32, I32, F32);
    public static final KernelSignature ATTENTION_BACKWARD_DKDV = KernelSignature.of("attention",
            "attention_backward_dkdv", PTR, PTR, PTR, PTR, PTR, I32, I32, I32, I32, F32);
    // attention_bf16.cu
    public static final KernelSignature ATTENTION_BF16_FORWARD = KernelSignature.of("attention_bf16",
            "attention_bf16_forward", PTR, PTR, PTR, I32, I32, I32, I32, F32, I32);
    public static final KernelSignature ATTENTION_BF16_BACKWARD_D = KernelSignature.of("attention_bf16",
            "attention_bf16_backward_d", PTR, PTR, PTR, I32, I32, I32, I32);
    public static final KernelSignature ATTENTION_BF16_BACKWARD_DQ = KernelSignature.of("attention_bf16",
            "attention_bf16_backward_dq", PTR, PTR, PTR, PTR, PTR, I32, I32, I32, I32, F32, I32);
    public static final KernelSignature ATTENTION_BF16_BACKWARD_DKDV = KernelSignature.of("attention_bf16",
            "attention_bf16_backward_dkdv", PTR, PTR, PTR, PTR, PTR, I32, I32, I32, I32, F32, I32);
    public static final KernelSignature ATTENTION_BF16_ACCUMULATE = KernelSignature.of("attention_bf16",
            "attention_bf16_accumulate", PTR, PTR, I64);
    // attention_wgmma.cu (sm_90a; its sm_80 entry traps)
    public static final KernelSignature ATTENTION_WGMMA_FORWARD = KernelSignature.of("attention_wgmma",
            "attention_wgmma_forward", PTR, PTR, PTR, I32, I32, I32, I32, F32, I32);
    public static final KernelSignature ATTENTION_WGMMA_TMA_FORWARD = KernelSignature.of("attention_wgmma",
            "attention_wgmma_tma_forward", PTR, PTR, TENSOR_MAP, I32, I32, I32, I32, F32, I32);
    // cast.cu
    public static final KernelSignature CAST_F32_TO_BF16 = KernelSignature.of("cast", "cast_f32_to_bf16",
            PTR, PTR, I64);
    public static final KernelSignature CAST_F32_TO_F16 = KernelSignature.of("cast", "cast_f32_to_f16", PTR, PTR, I64);
    public static final KernelSignature CAST_F32_TO_FP8 = KernelSignature.of("cast", "cast_f32_to_fp8",
            PTR, PTR, PTR, I64, F32, I32);
    public static final KernelSignature CAST_TRANSPOSE_F32_TO_FP8 = KernelSignature.of("cast",
            "cast_transpose_f32_to_fp8", PTR, PTR, PTR, PTR, I32, I32, F32, I32);
    public static final KernelSignature CAST_BF16_TO_F32 = KernelSignature.of("cast", "cast_bf16_to_f32",
            PTR, PTR, I64);
    public static final KernelSignature CAST_F16_TO_F32 = KernelSignature.of("cast", "cast_f16_to_f32", PTR, PTR, I64);
    public static final KernelSignature CAST_FP8_TO_F32 = KernelSignature.of("cast", "cast_fp8_to_f32",
            PTR, PTR, I64, F32, I32);
    public static final KernelSignature FP8_AMAX_TO_SLOT = KernelSignature.of("cast", "fp8_amax_to_slot",
            PTR, PTR, I32, F32, I32);
    // classifier.cu
    public static final KernelSignature CLASSIFIER = KernelSignature.of("classifier", "classifier_forward_backward",
            PTR, PTR, PTR, I32, I32, I32, F32, I32);
    // encoder.cu
    public static final KernelSignature ENCODER_FORWARD = KernelSignature.of("encoder", "encoder_forward",
            PTR, PTR, PTR, PTR, I32, I32, I32);
    public static final KernelSignature ENCODER_BACKWARD_WPE = KernelSignature.of("encoder", "encoder_backward_wpe",
            PTR, PTR, I32, I32, I32);
    public static final KernelSignature ENCODER_BACKWARD_WTE = KernelSignature.of("encoder", "encoder_backward_wte",
            PTR, PTR, PTR, I32, I32);
    // gelu.cu
    public static final KernelSignature GELU_FORWARD = KernelSignature.of("gelu", "gelu_forward", PTR, PTR, I64);
    public static final KernelSignature GELU_BACKWARD = KernelSignature.of("gelu", "gelu_backward",
            PTR, PTR, PTR, I64);
    // layernorm.cu
    public static final KernelSignature LAYERNORM_FORWARD = KernelSignature.of("layernorm", "layernorm_forward",
            PTR, PTR, PTR, PTR, PTR, PTR, I32, I32, F32);
    public static final KernelSignature LAYERNORM_BACKWARD_DINP = KernelSignature.of("layernorm",
            "layernorm_backward_dinp", PTR, PTR, PTR, PTR, PTR, PTR, I32, I32);
    public static final KernelSignature LAYERNORM_BACKWARD_PARAMS = KernelSignature.of("layernorm",
            "layernorm_backward_params", PTR, PTR, PTR, PTR, PTR, PTR, I32, I32);
    // lion.cu (not launched yet: see Lion in the CPU backend for the update)
    public static final KernelSignature LION_F32 = KernelSignature.of("lion", "lion_f32",
            PTR, PTR, PTR, I64, F32, F32, F32, F32, F32);
    // matmul.cu
    public static final KernelSignature MATMUL_BACKWARD_BIAS = KernelSignature.of("matmul", "matmul_backward_bias",
            PTR, PTR, I32, I32);
    // norm.cu
    public static final KernelSignature SUM_OF_SQUARES = KernelSignature.of("norm", "sum_of_squares", PTR, PTR, I64);
    public static final KernelSignature AMAX = KernelSignature.of("norm", "amax", PTR, PTR, I64);
    public static final KernelSignature HAS_NON_FINITE = KernelSignature.of("norm", "has_non_finite", PTR, PTR, I64);
    // residual.cu
    public static final KernelSignature RESIDUAL_FORWARD = KernelSignature.of("residual", "residual_forward",
            PTR, PTR, PTR, I64);
    public static final KernelSignature RESIDUAL_BACKWARD = KernelSignature.of("residual", "residual_backward",
            PTR, PTR, PTR, I64);

    // ring.cu
    public static final KernelSignature RING_COMBINE_F32 = KernelSignature.of("ring", "ring_combine_f32",
            PTR, PTR, I64, I32);
    public static final KernelSignature RING_DIVIDE_F32 = KernelSignature.of("ring", "ring_divide_f32",
            PTR, I64, F32);
    // sgd.cu (not launched yet: see Sgd in the CPU backend for the update)
    public static final KernelSignature SGD_F32 = KernelSignature.of("sgd", "sgd_f32",
            PTR, PTR, PTR, I64, F32, F32, F32, F32, F32, I32, I32);

    /** Every signature above. */
    public static final List<KernelSignature> ALL = List.of(
            ADAMW_F32, ADAMW_BF16, ADAMW_F32_MULTI, ADAMW_BF16_MULTI, ATTENTION_FORWARD, ATTENTION_BACKWARD_D,
            ATTENTION_BACKWARD_DQ, ATTENTION_BACKWARD_DKDV, ATTENTION_BF16_FORWARD, ATTENTION_BF16_BACKWARD_D,
            ATTENTION_BF16_BACKWARD_DQ, ATTENTION_BF16_BACKWARD_DKDV, ATTENTION_BF16_ACCUMULATE, ATTENTION_WGMMA_FORWARD,
            ATTENTION_WGMMA_TMA_FORWARD, CAST_F32_TO_BF16, CAST_F32_TO_F16, CAST_F32_TO_FP8, CAST_TRANSPOSE_F32_TO_FP8, CAST_BF16_TO_F32,
            CAST_F16_TO_F32, CAST_FP8_TO_F32, FP8_AMAX_TO_SLOT, CLASSIFIER, ENCODER_FORWARD, ENCODER_BACKWARD_WPE,
            ENCODER_BACKWARD_WTE, GELU_FORWARD, GELU_BACKWARD, LAYERNORM_FORWARD, LAYERNORM_BACKWARD_DINP,
            LAYERNORM_BACKWARD_PARAMS, LION_F32, MATMUL_BACKWARD_BIAS, SUM_OF_SQUARES, AMAX, HAS_NON_FINITE,
            RESIDUAL_FORWARD, RESIDUAL_BACKWARD, RING_COMBINE_F32, RING_DIVIDE_F32, SGD_F32);

    /** The portable PTX, for every device of compute capability 8.0 or later. */
    public static final String PORTABLE_ARCH = "sm_80";
    /** The arch-specific PTX for compute capability 9.0 (H100, H200): it runs on no other device. */
    public static final String HOPPER_ARCH = "sm_90a";
    /** Every PTX set committed, {@link #PORTABLE_ARCH} first. */
    public static final List<String> ARCHS = List.of(PORTABLE_ARCH, HOPPER_ARCH);

    /**
     * The PTX set for a device of compute capability {@code major·10 + minor}: {@link #HOPPER_ARCH} for exactly 90
     * (sm_90a PTX is not forward compatible: a 10.0 device cannot run it), {@link #PORTABLE_ARCH} otherwise.
     */
    public static String ptxArch(int computeCapability) {
        return computeCapability == 90 ? HOPPER_ARCH : PORTABLE_ARCH;
    }

    /**
     * ptxas's cubin of {@code module} for {@code arch} ({@code ptx/sm_90a/<module>.cubin}, built beside the PTX by
     * build-ptx.sh), if one ships: only for {@link #HOPPER_ARCH}. Tried before the PTX; a driver older than the ptxas
     * that wrote it refuses it, and the PTX is JIT-compiled instead ({@link KernelModules}).
     */
    public static java.util.Optional<byte[]> cubin(String module, String arch) {
        if (!arch.equals(HOPPER_ARCH)) {
            return java.util.Optional.empty();
        }
        try (var in = Kernels.class.getResourceAsStream("ptx/" + arch + "/" + module + ".cubin")) {
            return in == null ? java.util.Optional.empty() : java.util.Optional.of(in.readAllBytes());
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    /** The portable ({@link #PORTABLE_ARCH}) PTX text of {@code module}, from the class path. */
    public static String ptx(String module) {
        return ptx(module, PORTABLE_ARCH);
    }

    /** The PTX text of {@code module} for {@code arch} (one of {@link #ARCHS}), from the class path. */
    public static String ptx(String module, String arch) {
        if (!ARCHS.contains(arch)) {
            throw new IllegalArgumentException("no PTX for " + arch + ": there is " + ARCHS);
        }
        String path = "ptx/" + (arch.equals(PORTABLE_ARCH) ? "" : arch + "/") + module + ".ptx";
        try (var in = Kernels.class.getResourceAsStream(path)) {
            if (in == null) {
                throw new IllegalStateException("missing resource io/accel4j/kernels/" + path);
            }
            return new String(in.readAllBytes(), java.nio.charset.StandardCharsets.US_ASCII);
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }
}
