package io.accel4j.nn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.train.CountingMemory;
import io.accel4j.train.model.GptConfig;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.Random;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A {@link Network} with 16-bit gradient storage ({@link NetworkSpec#gradientStorage}) against the same network with
 * fp32 gradients: one micro-batch's gradients are fp32's rounded to nearest even, element for element, in the units
 * a {@link UnitScope} opens and closes (GPT-2's blocks and final LayerNorm; every child of a
 * {@link UnitScope#perChild} tree), and fp32's bit for bit elsewhere (GPT-2's tied embeddings); the spec's plan is
 * every byte the network allocates; a tree without such a unit is refused before anything is allocated.
 */
class HalfGradientNetworkTest {

    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;
    private static final GptConfig GPT = new GptConfig(9, 37, 40, 3, 3, 12);
    private static final int B = 3;
    private static final int T = 5;

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

    /** A token model of every child in a unit of its own: embedding, two blocks, a LayerNorm, an untied head. */
    private static Sequential perChild() {
        return UnitScope.perChild(new Sequential("", new Embedding("emb", 37, 37, 12, 9, true),
                new TransformerBlock("h0", 12, 3), new TransformerBlock("h1", 12, 3), new LayerNorm("lnf", 12),
                LmHead.untied("head", 12, 40)));
    }

    private static float[] half(Network n) {
        float[] out = new float[(int) n.table().count()];
        n.halfGradients().chunks(0, out.length, false, (o, f, m) -> {
            for (long i = 0; i < m; i++) {
                out[(int) (o + i)] = f.getAtIndex(F32, i);
            }
        });
        return out;
    }

    @Test
    void oneMicroBatchsGradientsAreFp32sRoundedInTheUnitsAndFp32sElsewhere() {
        record Tree(String name, Supplier<Module> body, boolean tiedEmbeddings) {}
        long seed = System.nanoTime();
        for (Tree tree : List.of(new Tree("gpt2", () -> Gpt2Blocks.body(GPT), true),
                new Tree("perChild", HalfGradientNetworkTest::perChild, false))) {
            for (DType type : new DType[] {DType.BF16, DType.FP16}) {
                Random r = new Random(seed);
                try (Arena a = Arena.ofConfined();
                     Network wide = Network.of(tree.body().get()).tokens(37).classes(37).batch(B, T).build(ops);
                     Network narrow = Network.of(tree.body().get()).tokens(37).classes(37).batch(B, T)
                             .gradientStorage(type).build(ops)) {
                    assertThat(narrow.gradientStorage()).isEqualTo(type);
                    wide.initialise(seed);
                    narrow.initialise(seed);
                    MemorySegment in = a.allocate(4L * B * T), tg = a.allocate(4L * B * T);
                    for (int i = 0; i < B * T; i++) {
                        in.setAtIndex(ValueLayout.JAVA_INT, i, r.nextInt(37));
                        tg.setAtIndex(ValueLayout.JAVA_INT, i, r.nextInt(37));
                    }
                    // fp16 keeps its gradients in range with a loss scale, as training does
                    float dloss = (type == DType.FP16 ? 1024f : 1f) / (B * T);
                    for (Network n : new Network[] {wide, narrow}) {
                        n.zeroGrad();
                        n.forwardBackward(in, tg, B, T, dloss);
                    }
                    float[] g = wide.grads().toArray(F32), h = half(narrow);
                    long embeddings = tree.tiedEmbeddings() ? narrow.table().entry("wpe").offset()
                            + narrow.table().entry("wpe").count() : 0;
                    for (int e = 0; e < g.length; e++) {
                        float want = e < embeddings ? g[e] : type.decode(type.encode(g[e], false));
                        assertThat(Float.floatToRawIntBits(h[e])).as("%s, %s, seed %d, element %d: %s, fp32 %s",
                                tree.name(), type, seed, e, h[e], g[e]).isEqualTo(Float.floatToRawIntBits(want));
                    }
                    assertThatThrownBy(narrow::grads).isInstanceOf(IllegalStateException.class)
                            .hasMessageContaining("read them through halfGradients()");
                }
            }
        }
    }

    @Test
    void thePlanIsEveryByteTheNetworkAllocates() {
        for (Supplier<Module> body : List.<Supplier<Module>>of(() -> Gpt2Blocks.body(GPT),
                HalfGradientNetworkTest::perChild)) {
            NetworkSpec.Plan plan = Network.of(body.get()).tokens(37).classes(37).batch(B, T)
                    .gradientStorage(DType.BF16).plan(1);
            NetworkSpec.Plan fp32 = Network.of(body.get()).tokens(37).classes(37).batch(B, T).plan(1);
            assertThat(fp32.gradientBytes()).isEqualTo(4 * fp32.parameters());
            assertThat(plan.gradientBytes()).isNotEqualTo(fp32.gradientBytes());
            CountingMemory counted = new CountingMemory();
            try (Network n = Network.of(body.get()).tokens(37).classes(37).batch(B, T).gradientStorage(DType.BF16)
                    .build(counted.ops(ops))) {
                assertThat(n.halfGradients().bytes()).isEqualTo(plan.gradientBytes());
                assertThat(n.totalBytes()).isEqualTo(4 * plan.parameters() + plan.gradientBytes()
                        + plan.activationBytes()).isEqualTo(counted.live.get());
            }
        }
    }

    @Test
    void aTreeWithoutAUnitToStoreIsRefusedBeforeAnyAllocation() {
        CountingMemory counted = new CountingMemory();
        Sequential flat = new Sequential("", Embedding.tokens("emb", 37, 12), new LayerNorm("lnf", 12),
                LmHead.untied("head", 12, 37));
        assertThatThrownBy(() -> Network.of(flat).tokens(37).classes(37).gradientStorage(DType.BF16)
                .build(counted.ops(ops))).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("16-bit gradient storage keeps the gradients of the units a UnitScope opens and closes "
                        + "in one backward (UnitScope.perChild, Gpt2Blocks.body), and this tree has no such unit: "
                        + "wrap its blocks in UnitScopes, or keep fp32 gradients");
        assertThat(counted.peak.get()).isZero();
        assertThatThrownBy(() -> Network.of(flat).gradientStorage(DType.FP8_E5M2))
                .hasMessage("16-bit gradients are stored in BF16 or FP16, got FP8_E5M2");
    }
}
