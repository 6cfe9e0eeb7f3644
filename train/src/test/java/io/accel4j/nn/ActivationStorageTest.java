package io.accel4j.nn;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.ParameterLayout;
import io.accel4j.train.model.Recompute;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * 16-bit activation storage ({@link NetworkSpec#activationStorage}, {@link HalfStore}) side by side with fp32 storage
 * on the same parameters and tokens, fp32 matmul operands so that only the storage differs: the forward is the same
 * bits (it computes in fp32; only what backward reads is rounded), every gradient tensor within a normwise bound of
 * fp32's, and under layer recomputation (which keeps no per-layer activations to store) bit-identical.
 */
class ActivationStorageTest {

    /** Odd sizes: V = 11 padded to 16, head size 12, T = 7; 3 layers so that two blocks' stores are expanded. */
    static final GptConfig SMALL = new GptConfig(8, 11, 16, 3, 2, 24);

    /**
     * Normwise ‖g16 − g32‖ / ‖g32‖ per gradient tensor, in units of the stored type's unit roundoff u (2⁻⁸ for bf16's
     * 8 significant bits, 2⁻¹¹ for fp16's 11). Each stored value carries one rounding of relative size ≤ u; a block's
     * gradients are sums of products of such values with upstream gradients that carry the errors of the blocks above
     * (the top block reads its exact fp32 values), and LayerNorm's 1/σ and GELU's slope at a rounded pre-activation
     * amplify them, most at the embeddings after three blocks. Measured on these random parameters (std 0.5): at most
     * 10.5u for bf16 (0.041, ln_1's bias) and 8.9u for fp16 (0.0043) — the ratio of the two is the ratio of their
     * roundoffs, as rounding (and not a wrong row) predicts; the bound is 16u, an error of order 1 fails it.
     */
    private static final double BF16_TOL = 16 * 0x1p-8;
    private static final double FP16_TOL = 16 * 0x1p-11;

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

    static Stream<Arguments> storedModes() {
        List<Arguments> a = new ArrayList<>();
        for (DType d : new DType[] {DType.BF16, DType.FP16}) {
            for (Recompute r : new Recompute[] {Recompute.NONE, Recompute.GELU}) {
                a.add(Arguments.of(d, r));
            }
        }
        return a.stream();
    }

    @ParameterizedTest(name = "{0} storage, recompute {1}")
    @MethodSource("storedModes")
    void gradientsTrackFp32StorageWithinTheRoundingBound(DType storage, Recompute recompute) {
        int maxB = 3, T = 7;
        long seed = 40 + storage.ordinal() * 7L + recompute.ordinal();
        Random r = new Random(seed);
        float[] p = Gpt2BlocksTest.randomParams(SMALL, seed);
        long n = new ParameterLayout(SMALL).count();
        int[] B = {3, 2}; // the second micro-batch smaller than the allocation: the stores' rows follow the call
        try (Network ref = build(DType.FP32, recompute, maxB, T); Network half = build(storage, recompute, maxB, T)) {
            ref.copyParamsFromHost(MemorySegment.ofArray(p));
            half.copyParamsFromHost(MemorySegment.ofArray(p));
            ref.zeroGrad();
            half.zeroGrad();
            for (int k = 0; k < 2; k++) {
                MemorySegment in = MemorySegment.ofArray(tokens(B[k] * T, r));
                MemorySegment tg = MemorySegment.ofArray(tokens(B[k] * T, r));
                double want = ref.forwardBackward(in, tg, B[k], T, 0.05f);
                assertThat(half.forwardBackward(in, tg, B[k], T, 0.05f)).as("loss, micro-batch %d", k)
                        .isEqualTo(want);
            }
            float[] g32 = Gpt2BlocksTest.floats(ref.grads(), n), g16 = Gpt2BlocksTest.floats(half.grads(), n);
            double tol = storage == DType.BF16 ? BF16_TOL : FP16_TOL, worst = 0;
            for (ParameterLayout.Span t : new ParameterLayout(SMALL).tensors()) {
                double err = 0, norm = 0;
                for (long i = t.offset(); i < t.offset() + t.count(); i++) {
                    assertThat(Float.isFinite(g16[(int) i])).as("%s[%d] finite (seed %d)", t.param(), i, seed)
                            .isTrue();
                    double d = (double) g16[(int) i] - g32[(int) i];
                    err += d * d;
                    norm += (double) g32[(int) i] * g32[(int) i];
                }
                double rel = Math.sqrt(err / Math.max(norm, 1e-300));
                worst = Math.max(worst, rel);
                assertThat(rel).as("%s: normwise error of %s storage (seed %d)", t.param(), storage, seed)
                        .isLessThanOrEqualTo(tol);
            }
            System.out.printf("%s storage, recompute %s: worst normwise gradient error %.3g (bound %.3g)%n",
                    storage, recompute, worst, tol);
            assertThat(worst).as("16-bit storage changed something").isGreaterThan(0);
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("layerModes")
    void underLayerRecomputationSixteenBitStorageIsFp32Storage(Recompute recompute) {
        int B = 2, T = 7;
        long seed = 90 + recompute.segment();
        Random r = new Random(seed);
        float[] p = Gpt2BlocksTest.randomParams(SMALL, seed);
        long n = new ParameterLayout(SMALL).count();
        try (Network ref = build(DType.FP32, recompute, B, T); Network half = build(DType.BF16, recompute, B, T)) {
            assertThat(half.activationBytes()).isEqualTo(ref.activationBytes());
            ref.copyParamsFromHost(MemorySegment.ofArray(p));
            half.copyParamsFromHost(MemorySegment.ofArray(p));
            ref.zeroGrad();
            half.zeroGrad();
            MemorySegment in = MemorySegment.ofArray(tokens(B * T, r)), tg = MemorySegment.ofArray(tokens(B * T, r));
            assertThat(half.forwardBackward(in, tg, B, T, 0.1f)).isEqualTo(ref.forwardBackward(in, tg, B, T, 0.1f));
            assertThat(Gpt2BlocksTest.floats(half.grads(), n)).containsExactly(Gpt2BlocksTest.floats(ref.grads(), n));
        }
    }

    static Stream<Recompute> layerModes() {
        return Stream.of(Recompute.LAYER, Recompute.every(2));
    }

    @Test
    void sixteenBitStorageRoughlyHalvesTheBlocksActivations() {
        GptConfig gpt2 = new GptConfig(1024, 50257, 50304, 12, 12, 768);
        int B = 4, T = 1024;
        long f32 = Gpt2BlocksSpec.bytes(gpt2, B, T, Recompute.NONE, DType.FP32);
        long b16 = Gpt2BlocksSpec.bytes(gpt2, B, T, Recompute.NONE, DType.BF16);
        long f16 = Gpt2BlocksSpec.bytes(gpt2, B, T, Recompute.NONE, DType.FP16);
        assertThat(f16).isEqualTo(b16);
        // per block and position, fp32 keeps 17C + 4 + NH floats; the store 7.5C 16-bit pairs + 4 + NH statistics,
        // plus one block's working set for the whole network
        double ratio = (double) b16 / f32;
        System.out.printf("GPT-2 124M, B=%d T=%d: activations fp32 %.1f MiB, bf16 storage %.1f MiB (%.2f)%n", B, T,
                f32 / 1048576.0, b16 / 1048576.0, ratio);
        assertThat(ratio).isBetween(0.5, 0.75);
    }

    @Test
    void onlyFp32Bf16AndFp16AreStorageTypes() {
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> Gpt2Blocks.spec(SMALL).activationStorage(
                DType.FP8_E4M3)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("activations are stored in FP32, BF16 or FP16, got FP8_E4M3");
    }

    private static Network build(DType storage, Recompute recompute, int maxB, int T) {
        return Gpt2Blocks.spec(SMALL).batch(maxB, T).recompute(recompute).activationStorage(storage).build(ops);
    }

    private static int[] tokens(int n, Random r) {
        int[] t = new int[n];
        for (int i = 0; i < n; i++) {
            t[i] = r.nextInt(SMALL.V());
        }
        return t;
    }

    /** Planned activation bytes of GPT-2 {@code c}. */
    private static final class Gpt2BlocksSpec {
        static long bytes(GptConfig c, int B, int T, Recompute r, DType storage) {
            return Gpt2Blocks.spec(c).batch(B, T).recompute(r).activationStorage(storage).activationBytes();
        }
    }
}
