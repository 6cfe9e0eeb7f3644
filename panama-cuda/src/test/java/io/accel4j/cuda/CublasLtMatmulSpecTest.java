package io.accel4j.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import io.accel4j.cuda.bindings.cublasLt_h;
import io.accel4j.cuda.bindings.cublas_api_h;
import org.junit.jupiter.api.Test;

/** {@link CublasLtMatmul.Spec}'s checks and the behaviour without {@code libcublasLt}: no GPU or library needed. */
class CublasLtMatmulSpecTest {

    @Test
    void aPackedFp32SpecIsValid() {
        assertThatCode(() -> CublasLtMatmul.spec(67, 45, 257).transpose(true, false).check())
                .doesNotThrowAnyException();
        CublasLtMatmul.Spec s = CublasLtMatmul.spec(67, 45, 257).transpose(true, true);
        assertThat(s.lda()).as("A stored k×m").isEqualTo(257);
        assertThat(s.ldb()).as("B stored n×k").isEqualTo(45);
        assertThat(s.ldc()).isEqualTo(67);
        assertThat(s.ldd()).isEqualTo(67);
    }

    @Test
    void rejectsBadSizesAndLeadingDimensions() {
        assertThatThrownBy(() -> CublasLtMatmul.spec(0, 3, 5).check()).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("m, n, k must be >= 1, got 0, 3, 5");
        assertThatThrownBy(() -> CublasLtMatmul.spec(7, 3, 5).leadingDimensions(6, 5, 7, 7).check())
                .isInstanceOf(IllegalArgumentException.class).hasMessage("lda 6 is less than the stored rows 7");
        assertThatThrownBy(() -> CublasLtMatmul.spec(7, 3, 5).transpose(false, true).leadingDimensions(7, 2, 7, 7)
                .check()).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("ldb 2 is less than the stored rows 3");
    }

    @Test
    void epiloguePointersMustMatchTheEpilogue() {
        assertThatThrownBy(() -> CublasLtMatmul.spec(8, 3, 5).epilogue(cublasLt_h.CUBLASLT_EPILOGUE_BIAS).check())
                .isInstanceOf(IllegalArgumentException.class).hasMessage("epilogue 4 needs a bias pointer");
        assertThatThrownBy(() -> CublasLtMatmul.spec(8, 3, 5).bias(0x1000, cublas_api_h.CUDA_R_32F).check())
                .isInstanceOf(IllegalArgumentException.class).hasMessage("epilogue 1 takes no bias pointer, got 0x1000");
        assertThatThrownBy(() -> CublasLtMatmul.spec(8, 3, 5).epilogue(cublasLt_h.CUBLASLT_EPILOGUE_GELU_AUX_BIAS)
                .bias(0x1000, cublas_api_h.CUDA_R_32F).check())
                .isInstanceOf(IllegalArgumentException.class).hasMessage("epilogue 164 needs an aux pointer");
        assertThatThrownBy(() -> CublasLtMatmul.spec(9, 3, 5).epilogue(cublasLt_h.CUBLASLT_EPILOGUE_DGELU)
                .aux(0x2000, 9).check())
                .isInstanceOf(IllegalArgumentException.class).hasMessage("aux ld must be a multiple of 8 and >= m 9, got 9");
        assertThatThrownBy(() -> CublasLtMatmul.spec(8, 3, 5).epilogue(3).check())
                .isInstanceOf(IllegalArgumentException.class).hasMessageStartingWith("unknown epilogue 3");
        assertThatCode(() -> CublasLtMatmul.spec(9, 3, 5).epilogue(cublasLt_h.CUBLASLT_EPILOGUE_DGELU_BGRAD)
                .bias(0x1000, cublas_api_h.CUDA_R_32F).aux(0x2000, 16).check()).doesNotThrowAnyException();
    }

    private static final int E4M3 = cublas_api_h.CUDA_R_8F_E4M3;
    private static final int E5M2 = cublas_api_h.CUDA_R_8F_E5M2;
    private static final int F32 = cublas_api_h.CUDA_R_32F;
    private static final int BF16 = cublas_api_h.CUDA_R_16BF;

    /** A valid FP8 spec: TN, k and the leading dimensions multiples of 16, FP32 D. */
    private static CublasLtMatmul.Spec fp8(int a, int b) {
        return CublasLtMatmul.spec(24, 7, 48).transpose(true, false).types(a, b, F32, F32);
    }

    @Test
    void fp8SpecsThatCublasLtAccepts() {
        assertThatCode(() -> fp8(E4M3, E4M3).scales(0x100, 0x200, 0).amaxD(0x300).check()).doesNotThrowAnyException();
        assertThatCode(() -> fp8(E4M3, E5M2).check()).doesNotThrowAnyException();
        assertThatCode(() -> fp8(E5M2, E4M3).types(E5M2, E4M3, BF16, BF16).check()).doesNotThrowAnyException();
        assertThatCode(() -> CublasLtMatmul.spec(32, 7, 48).transpose(true, false).types(E4M3, E4M3, BF16, E4M3)
                .scales(0x100, 0x200, 0x300).check())
                .as("FP8 D with a D scale, C BF16").doesNotThrowAnyException();
        assertThatCode(() -> CublasLtMatmul.spec(5, 3, 7).transpose(true, false).types(BF16, BF16, F32, F32).check())
                .as("BF16 has none of FP8's rules").doesNotThrowAnyException();
    }

    @Test
    void fp8RulesAreCheckedWithTheNumbers() {
        assertThatThrownBy(() -> fp8(E4M3, F32).check()).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("an FP8 matmul needs both A and B FP8 (types 28, 29), got A 28, B 0");
        assertThatThrownBy(() -> fp8(E5M2, E5M2).check()).isInstanceOf(IllegalArgumentException.class)
                .hasMessageStartingWith("FP8 A and B cannot both be E5M2");
        assertThatThrownBy(() -> fp8(E4M3, E4M3).transpose(false, false).leadingDimensions(32, 48, 24, 24).check())
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("FP8 needs A transposed and B not (\"TN\": both stored k-major), got op NN");
        assertThatThrownBy(() -> fp8(E4M3, E4M3).compute(cublas_api_h.CUBLAS_COMPUTE_32F_FAST_TF32).check())
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("FP8 needs compute type CUBLAS_COMPUTE_32F (68), got 77");
        assertThatThrownBy(() -> CublasLtMatmul.spec(24, 7, 40).transpose(true, false).types(E4M3, E4M3, F32, F32)
                .check()).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("FP8 needs k a multiple of 16, got 40");
        assertThatThrownBy(() -> fp8(E4M3, E4M3).leadingDimensions(56, 48, 24, 24).check())
                .isInstanceOf(IllegalArgumentException.class).hasMessage("FP8 needs lda a multiple of 16, got 56");
        assertThatThrownBy(() -> fp8(E4M3, E4M3).leadingDimensions(48, 50, 24, 24).check())
                .isInstanceOf(IllegalArgumentException.class).hasMessage("FP8 needs ldb a multiple of 16, got 50");
        assertThatThrownBy(() -> fp8(E4M3, E4M3).alignments(256, 8, 256, 256).check())
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("FP8 needs B 16-byte aligned, the spec says 8");
        assertThatThrownBy(() -> fp8(E4M3, E4M3).alignments(256, 256, 256, 4).check())
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("FP8 needs D 16-byte aligned, the spec says 4");
        assertThatThrownBy(() -> CublasLtMatmul.spec(6, 7, 48).transpose(true, false).types(E4M3, E4M3, F32, F32)
                .leadingDimensions(48, 48, 8, 8).check()).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("FP8 needs m × 4 bytes (C type 0) a multiple of 16, got m 6");
        assertThatThrownBy(() -> fp8(E4M3, E4M3).types(E4M3, E4M3, BF16, BF16).leadingDimensions(48, 48, 28, 28)
                .check()).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("FP8 needs ldc × 2 bytes (C type 14) a multiple of 16, got ldc 28");
        assertThatCode(() -> CublasLtMatmul.spec(8, 7, 48).transpose(true, false).types(E4M3, E4M3, BF16, BF16)
                .check()).as("m 8 of BF16: 16 bytes").doesNotThrowAnyException();
        assertThatThrownBy(() -> fp8(E4M3, E4M3).types(E4M3, E4M3, F32, BF16).check())
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("FP8 C type 0 does not go with D type 14: C must have D's type");
        assertThatThrownBy(() -> fp8(E4M3, E4M3).types(E4M3, E4M3, F32, E5M2).check())
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("FP8 C type 0 does not go with D type 29: BF16 (14) or FP16 (2) with an FP8 D");
        assertThatThrownBy(() -> fp8(E4M3, E4M3).types(E4M3, E4M3, 10, 10).check())
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("FP8 D must be FP32, BF16, FP16 or FP8, got type 10");
        assertThatThrownBy(() -> fp8(E4M3, E4M3).scales(0x100, 0x200, 0x300).check())
                .isInstanceOf(IllegalArgumentException.class).hasMessage("a D scale is for an FP8 D, got D type 0");
        assertThatThrownBy(() -> CublasLtMatmul.spec(8, 8, 8).amaxD(0x100).check())
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("scales, amax of D and fast accumulation are for FP8 operands, got A type 0, B type 0");
    }

    @Test
    void withoutTheLibraryEveryCallSaysWhereItLooked() {
        assumeFalse(CudaLibraries.cublasLt().found(),
                "libcublasLt is installed here (" + CudaLibraries.cublasLt().loadedFrom() + ")");
        assertThatThrownBy(cublasLt_h::cublasLtGetVersion).isInstanceOf(CudaException.class)
                .hasMessageStartingWith("cublasLtGetVersion: libcublasLt.so.13 not found (searched: dynamic loader"
                        + " (libcublasLt.so.13)")
                .satisfies(e -> assertThat(((CudaException) e).errorName()).isEqualTo("LIBRARY_NOT_FOUND"));
    }
}
