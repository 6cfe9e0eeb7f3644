package io.accel4j.cpu.ops;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.core.DType;
import io.accel4j.core.ops.Ops;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ref.AttentionRef;
import io.accel4j.cpu.testing.Buffers;
import io.accel4j.cpu.testing.Compare;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The CPU backend as the trainer sees it: the casts it implements itself (split over the pool) against the scalar
 * casts of core, and the attention kernel choice. The other methods only forward to kernel classes with their own
 * tests.
 */
class CpuOpsTest {

    static Parallel pool;

    @BeforeAll
    static void open() {
        pool = new Parallel(3);
    }

    @AfterAll
    static void close() {
        pool.close();
    }

    /** Over several cast chunks (64K elements each) and a ragged end, with specials sprinkled in. */
    static final int N = 3 * 65536 + 11;

    @ParameterizedTest
    @EnumSource(DType.class)
    void castsAgreeWithTheScalarCastsOfCore(DType type) {
        SplittableRandom rnd = new SplittableRandom(type.ordinal());
        Ops ops = new CpuOps(pool);
        try (Arena arena = Arena.ofShared()) {
            MemorySegment src = arena.allocate((long) N * 4);
            float amax = 0;
            for (int i = 0; i < N; i++) {
                float x = (float) (rnd.nextGaussian() * 300);
                if (i % 9973 == 0) {
                    x = i % 3 == 0 ? Float.NaN : i % 3 == 1 ? Float.POSITIVE_INFINITY : -0f;
                }
                src.setAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, i, x);
                if (!Float.isNaN(x)) {
                    amax = Math.max(amax, Math.abs(x));
                }
            }
            MemorySegment narrow = arena.allocate((long) N * type.byteSize());
            float scale = type.isFp8() ? 0.5f : 1f;
            if (type.isFp8()) {
                assertThat(ops.castToFp8(narrow, type, src, N, scale)).isEqualTo(amax);
            } else {
                ops.castFromFp32(narrow, type, src, N);
            }
            MemorySegment back = Buffers.poisoned(arena, N);
            ops.castToFp32(back, narrow, type, N, 1 / scale);
            for (int i = 0; i < N; i++) {
                float x = src.getAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, i);
                int code = type.encode(x * scale, true);
                if (Float.isNaN(x)) { // which NaN code a cast writes is the format's business; that it is NaN is ours
                    assertThat(type.getFloat(narrow, i)).as("%s NaN element %d", type, i).isNaN();
                    continue;
                }
                assertThat(type.encode(type.getFloat(narrow, i), true)).as("%s code of element %d (%s)", type, i, x)
                        .isEqualTo(code);
                float expected = type.decode(code) * (1 / scale);
                float actual = back.getAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, i);
                assertThat(Float.isNaN(actual) ? "NaN" : Float.toString(actual)).as("%s back of element %d", type, i)
                        .isEqualTo(Float.isNaN(expected) ? "NaN" : Float.toString(expected));
            }
        }
    }

    @Test
    void castArgumentsAreChecked() {
        Ops ops = new CpuOps(pool);
        try (Arena arena = Arena.ofShared()) {
            MemorySegment f = arena.allocate(64 * 4);
            MemorySegment b = arena.allocate(64);
            assertThatThrownBy(() -> ops.castFromFp32(b, DType.FP8_E4M3, f, 64))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("use castToFp8");
            assertThatThrownBy(() -> ops.castToFp8(b, DType.BF16, f, 32, 1f))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("got BF16");
            assertThatThrownBy(() -> ops.castFromFp32(b, DType.BF16, f, 64))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("dst holds 32");
            assertThatThrownBy(() -> ops.castToFp32(f, b, DType.BF16, 32, 2f))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("scaleInv must be 1");
            assertThatThrownBy(() -> ops.castFromFp32(f.asSlice(4), DType.FP32, f, 8))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("overlaps");
        }
    }

    @ParameterizedTest
    @EnumSource(CpuOps.AttentionKernel.class)
    void eitherAttentionKernelComputesAttention(CpuOps.AttentionKernel kernel) {
        int B = 2, T = 19, C = 12, NH = 3;
        SplittableRandom rnd = new SplittableRandom(7);
        double[] qkv = Buffers.uniform(rnd, B * T * 3 * C, 1);
        double[] out = new double[B * T * C];
        double[] lse = new double[B * NH * T];
        AttentionRef.forward(out, lse, qkv, B, T, C, NH);
        Ops ops = new CpuOps(pool, kernel);
        assertThat(ops.describe()).contains(kernel.name().toLowerCase() + " attention").contains("3 threads");
        try (Arena arena = Arena.ofShared()) {
            MemorySegment sOut = Buffers.poisoned(arena, B * T * C);
            MemorySegment sLse = Buffers.poisoned(arena, B * NH * T);
            ops.attentionForward(sOut, sLse, Buffers.floats(arena, qkv), B, T, C, NH);
            // fp32 sums of ≤ 19 terms of size ≤ 1: errors far below 1e-5
            Compare.close("out " + kernel, Buffers.read(sOut, B * T * C), out, 1e-5, 1e-5);
            Compare.close("lse " + kernel, Buffers.read(sLse, B * NH * T), lse, 1e-5, 1e-5);
        }
    }
}
