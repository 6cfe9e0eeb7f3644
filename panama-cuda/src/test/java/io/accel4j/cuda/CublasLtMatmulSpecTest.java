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
