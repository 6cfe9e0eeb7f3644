package io.accel4j.train.model;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.train.model.ParameterLayout.Param;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * GPT-2's gradients with 16-bit storage ({@link HalfWeights}) against the same model's fp32 gradients
 * ({@link FlatWeights}), on odd sizes and fresh random tokens. One micro-batch: backward reads no parameter gradient,
 * so every kernel computes the same fp32 values as with fp32 storage and each stored element must be exactly their
 * round-to-nearest-even ({@code DType.encode}), the embeddings' (fp32 here too) bit for bit. Two micro-batches: the
 * second adds into the first's rounded values, so the stored gradient is within the roundings' bound of fp32's.
 */
class HalfGradientStorageTest {

    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;
    /** Odd sizes: C = 12 over 3 heads, V = 37 padded to 40, 3 layers, maxT 9. */
    private static final GptConfig CONFIG = new GptConfig(9, 37, 40, 3, 3, 12);
    private static final int B = 3;
    private static final int T = 7;
    /**
     * The fp32 kernels' own accumulation differences once the second micro-batch adds into a start value that
     * differs by the first's rounding: relative to the gradient's largest element, a few fp32 ulps over B·T = 21 rows
     * (2⁻²⁴·21 ≈ 1.3e-6), bounded at 1e-5.
     */
    private static final double FP32_NOISE = 1e-5;
    /** fp16's half spacing of its subnormals, 2⁻²⁵: the absolute error of one rounding below its normal range. */
    private static final double FP16_SUBNORMAL = 0x1p-25;

    private static Parallel pool;
    private static CpuOps ops;

    @BeforeAll
    static void setUp() {
        pool = new Parallel(2);
        ops = new CpuOps(pool);
    }

    @AfterAll
    static void tearDown() {
        pool.close();
    }

    static Stream<Arguments> cases() {
        return Stream.of(Arguments.of(DType.BF16, Recompute.NONE, DType.FP32),
                Arguments.of(DType.BF16, Recompute.NONE, DType.BF16),
                Arguments.of(DType.BF16, Recompute.LAYER, DType.FP32),
                Arguments.of(DType.FP16, Recompute.NONE, DType.FP16),
                Arguments.of(DType.FP16, Recompute.GELU, DType.FP32));
    }

    /** The unit roundoff of one rounding to {@code type}: 2⁻⁸ for BF16 (8 significant bits), 2⁻¹¹ for FP16. */
    private static double roundoff(DType type) {
        return type == DType.BF16 ? 0x1p-8 : 0x1p-11;
    }

    private static MemorySegment tokens(Arena a, Random r, int n) {
        MemorySegment s = a.allocate((long) n * Integer.BYTES, 64);
        for (int i = 0; i < n; i++) {
            s.setAtIndex(ValueLayout.JAVA_INT, i, r.nextInt(CONFIG.V()));
        }
        return s;
    }

    private static float[] half(Gpt2 m) {
        float[] out = new float[(int) m.layout().count()];
        m.halfGradients().chunks(0, out.length, false, (o, f, n) -> {
            for (long i = 0; i < n; i++) {
                out[(int) (o + i)] = f.getAtIndex(F32, i);
            }
        });
        return out;
    }

    private static float[] floats(MemorySegment s) {
        return s.toArray(F32);
    }

    @ParameterizedTest(name = "{0} gradients, recompute {1}, {2} activations")
    @MethodSource("cases")
    void gradientsAreFp32sRoundedAndWithinTheBoundOverMicroBatches(DType type, Recompute recompute, DType acts) {
        long seed = System.nanoTime() & 0xffffffffL; // GPT-2's initialisation takes a 32-bit seed
        Random r = new Random(seed);
        // fp16 keeps its gradients in range with a loss scale, as the trainer does
        float dloss = (type == DType.FP16 ? 1024f : 1f) / (B * T);
        DType operands = acts == DType.FP32 ? DType.FP32 : acts;
        try (Arena a = Arena.ofConfined();
             Gpt2 wide = new Gpt2(CONFIG, ops, B, T, Gpt2Options.DEFAULT.withRecompute(recompute)
                     .withPrecision(operands, null).withActivationStorage(acts));
             Gpt2 narrow = new Gpt2(CONFIG, ops, B, T, Gpt2Options.DEFAULT.withRecompute(recompute)
                     .withPrecision(operands, null).withActivationStorage(acts).withGradientStorage(type))) {
            assertThat(narrow.gradientStorage()).isEqualTo(type);
            wide.initialise(seed);
            narrow.copyParamsFromHost(wide.params());
            MemorySegment in1 = tokens(a, r, B * T), tg1 = tokens(a, r, B * T);
            MemorySegment in2 = tokens(a, r, B * T), tg2 = tokens(a, r, B * T);
            long embeddings = narrow.layout().offset(Param.WPE) + narrow.layout().count(Param.WPE);
            for (Gpt2 m : new Gpt2[] {wide, narrow}) {
                m.zeroGrad();
                m.forwardBackward(in1, tg1, B, T, dloss);
            }
            float[] g1 = floats(wide.grads()), h1 = half(narrow);
            int rounded = 0;
            for (int e = 0; e < g1.length; e++) {
                float want = e < embeddings ? g1[e] : type.decode(type.encode(g1[e], false));
                assertThat(Float.floatToRawIntBits(h1[e])).as("seed %d, one micro-batch, element %d: %s, fp32 %s",
                        seed, e, h1[e], g1[e]).isEqualTo(Float.floatToRawIntBits(want));
                rounded += h1[e] != g1[e] ? 1 : 0;
            }
            assertThat(rounded).as("the 16-bit elements were rounded").isPositive();
            for (Gpt2 m : new Gpt2[] {wide, narrow}) {
                m.forwardBackward(in2, tg2, B, T, dloss);
            }
            float[] g = floats(wide.grads()), h = half(narrow);
            double scale = 0;
            for (float x : g) {
                scale = Math.max(scale, Math.abs(x));
            }
            double u = roundoff(type), floor = type == DType.FP16 ? 2 * FP16_SUBNORMAL : 0;
            for (int e = 0; e < g.length; e++) {
                if (e < embeddings) { // fp32 in both, the same kernels on the same values
                    assertThat(h[e]).as("seed %d, embedding element %d", seed, e).isEqualTo(g[e]);
                    continue;
                }
                // the first rounding carried into the second, then the second: u·|g1| + u·|g| (+ its square)
                double tol = 1.01 * u * (Math.abs(g1[e]) + Math.abs(g[e])) + FP32_NOISE * scale + floor;
                assertThat((double) h[e]).as("seed %d, two micro-batches, element %d (fp32 %s)", seed, e, g[e])
                        .isCloseTo(g[e], org.assertj.core.data.Offset.offset(tol));
            }
            assertThat(narrow.halfGradients().sumOfSquares()).as("seed %d", seed)
                    .isCloseTo(ops.sumOfSquares(wide.grads(), g.length),
                            org.assertj.core.data.Percentage.withPercentage(100 * 4 * u));
        }
    }

    @Test
    void sixteenBitGradientsAreNotAFlatBufferAndRefuseOtherWeights() {
        try (Gpt2 m = new Gpt2(CONFIG, ops, 1, 2, Gpt2Options.DEFAULT.withGradientStorage(DType.BF16))) {
            assertThatThrownBy(m::grads).isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("16-bit gradients are read through halfGradients()");
            assertThatThrownBy(() -> m.useWeights(new FlatWeights(m.layout(), m.memory())))
                    .isInstanceOf(IllegalStateException.class).hasMessageContaining("stores its gradients in BF16");
            assertThat(m.totalBytes()).isEqualTo(m.layout().fp32Bytes() + HalfWeights.gradientBytes(CONFIG)
                    + m.activationBytes());
        }
        try (Gpt2 m = new Gpt2(CONFIG, ops, 1, 2)) {
            assertThatThrownBy(m::halfGradients).isInstanceOf(IllegalStateException.class)
                    .hasMessage("the gradients are not stored in 16 bits here: FlatWeights holds them");
        }
        assertThatThrownBy(() -> new Gpt2(CONFIG, ops, 1, 2, Gpt2Options.DEFAULT.withGradientStorage(DType.FP8_E4M3)))
                .hasMessage("16-bit gradients are stored in BF16 or FP16, got FP8_E4M3");
    }

    @Test
    void theGradientBytesAreTwoAParameterOfTheBlocksAndFourOfTheEmbeddings() {
        ParameterLayout l = new ParameterLayout(CONFIG);
        long emb = l.count(Param.WTE) + l.count(Param.WPE);
        long layer = l.units().get(ParameterLayout.layerUnit(0)).count();
        long fc = 4L * CONFIG.C() * CONFIG.C(); // the largest piece, a layer's MLP matrix: the chunk
        assertThat(HalfWeights.gradientBytes(CONFIG)).isEqualTo(4 * emb + 2 * (l.count() - emb) + 4 * layer + 4 * fc);
        GptConfig gpt2 = new GptConfig(1024, 50257, 50304, 12, 12, 768);
        ParameterLayout g = new ParameterLayout(gpt2);
        long gEmb = g.count(Param.WTE) + g.count(Param.WPE);
        assertThat(HalfWeights.gradientBytes(gpt2)).isEqualTo(4 * gEmb + 2 * (g.count() - gEmb)
                + 4 * g.units().get(1).count() + 4 * io.accel4j.nn.HalfGradients.CHUNK);
    }
}
