package io.accel4j.kernels;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.core.DType;
import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;

/**
 * {@link GpuMatmul#fp8}'s preconditions and the GELU epilogues' aux rule, on fake device views (only addresses and
 * sizes are looked at): no GPU.
 */
class GpuMatmulArgsTest {

    private static final DType E4 = DType.FP8_E4M3;
    private static final DType E5 = DType.FP8_E5M2;

    /** A fake device view of {@code bytes} at {@code address}. */
    private static MemorySegment at(long address, long bytes) {
        return MemorySegment.ofAddress(address).reinterpret(bytes);
    }

    /** Valid: M 3, N 8, K 32, FP32 out. */
    private static void check(MemorySegment out, DType outType, DType aType, DType bType, float sa, float sb,
                              MemorySegment amax, int M, int N, int K) {
        GpuMatmul.checkFp8(out, outType, at(0x10000, (long) M * K), aType, sa, at(0x20000, (long) N * K), bType, sb,
                amax, M, N, K);
    }

    @Test
    void validCallsPass() {
        assertThatCode(() -> check(at(0x30000, 4 * 3 * 8), DType.FP32, E4, E4, 0.5f, 2f, null, 3, 8, 32))
                .doesNotThrowAnyException();
        assertThatCode(() -> check(at(0x30000, 2 * 3 * 8), DType.BF16, E4, E5, 1f, 1f, at(0x40000, 4), 3, 8, 32))
                .doesNotThrowAnyException();
        assertThatCode(() -> check(at(0x30000, 4 * 3 * 4), DType.FP32, E5, E4, 1f, 1f, null, 3, 4, 16))
                .doesNotThrowAnyException();
    }

    @Test
    void everyRuleNamesItsNumbers() {
        MemorySegment out = at(0x30000, 4 * 3 * 8);
        assertThatThrownBy(() -> check(out, DType.FP32, E5, E5, 1f, 1f, null, 3, 8, 32))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("a and b cannot both be FP8_E5M2 (cuBLASLt has no E5M2 x E5M2 GEMM)");
        assertThatThrownBy(() -> check(out, DType.FP32, DType.BF16, E4, 1f, 1f, null, 3, 8, 32))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("fp8 takes FP8_E4M3 or FP8_E5M2 operands, got a BF16, b FP8_E4M3");
        assertThatThrownBy(() -> check(out, DType.FP16, E4, E4, 1f, 1f, null, 3, 8, 32))
                .isInstanceOf(IllegalArgumentException.class).hasMessage("fp8 writes FP32 or BF16, got FP16");
        assertThatThrownBy(() -> check(out, DType.FP32, E4, E4, 1f, 1f, null, 3, 8, 40))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("K must be a multiple of 16 for FP8 (cuBLASLt), got 40");
        assertThatThrownBy(() -> check(out, DType.FP32, E4, E4, 1f, 1f, null, 3, 6, 32))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("a row of out must be a multiple of 16 bytes for FP8 (cuBLASLt): N 6 × 4 bytes of FP32");
        assertThatThrownBy(() -> check(out, DType.BF16, E4, E4, 1f, 1f, null, 3, 4, 32))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("a row of out must be a multiple of 16 bytes for FP8 (cuBLASLt): N 4 × 2 bytes of BF16");
        assertThatThrownBy(() -> check(out, DType.FP32, E4, E4, 0f, 1f, null, 3, 8, 32))
                .isInstanceOf(IllegalArgumentException.class).hasMessage("aScaleInv must be finite and > 0, got 0.0");
        assertThatThrownBy(() -> check(out, DType.FP32, E4, E4, 1f, Float.NaN, null, 3, 8, 32))
                .isInstanceOf(IllegalArgumentException.class).hasMessage("bScaleInv must be finite and > 0, got NaN");
        assertThatThrownBy(() -> check(at(0x30000, 4 * 3 * 8 - 1), DType.FP32, E4, E4, 1f, 1f, null, 3, 8, 32))
                .isInstanceOf(IllegalArgumentException.class).hasMessage("out holds 95 bytes, needs 24 × 4 = 96");
        assertThatThrownBy(() -> check(at(0x30008, 4 * 3 * 8), DType.FP32, E4, E4, 1f, 1f, null, 3, 8, 32))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("out at 0x30008 is not 16-byte aligned, as an FP8 GEMM needs (cuBLASLt)");
        assertThatThrownBy(() -> GpuMatmul.checkFp8(out, DType.FP32, at(0x10004, 96), E4, 1f, at(0x20000, 256), E4,
                1f, null, 3, 8, 32)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("a at 0x10004 is not 16-byte aligned, as an FP8 GEMM needs (cuBLASLt)");
        assertThatThrownBy(() -> check(out, DType.FP32, E4, E4, 1f, 1f, at(0x40000, 2), 3, 8, 32))
                .isInstanceOf(IllegalArgumentException.class).hasMessage("amaxOut holds 2 bytes, needs 1 × 4 = 4");
        assertThatThrownBy(() -> check(out, DType.FP32, E4, E4, 1f, 1f, null, 0, 8, 32))
                .isInstanceOf(IllegalArgumentException.class).hasMessage("M must be >= 1, got 0");
    }

    @Test
    void geluEpiloguesTakeAnAuxMatrixWithLdAMultipleOf8AndAligned() {
        assertThat(GpuMatmul.geluEpilogueRefusal(at(0x10000, 4 * 3 * 1024), 1024)).isNull();
        assertThat(GpuMatmul.geluEpilogueRefusal(at(0x10000, 4 * 3 * 1020), 1020))
                .isEqualTo("the GELU matrix's leading dimension 1020 is not a multiple of 8 (cuBLASLt's aux rule)");
        assertThat(GpuMatmul.geluEpilogueRefusal(at(0x10008, 4 * 3 * 1024), 1024))
                .isEqualTo("the GELU matrix at 0x10008 is not 16-byte aligned");
    }
}
