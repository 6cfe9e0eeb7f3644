package io.accel4j.nn;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.core.DType;
import io.accel4j.core.fp8.DelayedScaling;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.train.model.GptConfig;
import io.accel4j.train.model.Gpt2Monolith;
import io.accel4j.train.model.ParameterLayout;
import io.accel4j.train.model.Recompute;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
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
 * GPT-2 composed of blocks ({@link Gpt2Blocks}) against the monolithic {@link Gpt2Monolith}, side by side on the same
 * parameters and tokens: the parameter layout is the same, and the losses, logits and every gradient are the same
 * bits, for each operand precision and recompute mode, over two accumulated micro-batches of which one is smaller
 * than the allocation.
 */
class Gpt2BlocksTest {

    /** Odd sizes: V = 11 padded to 16, head size 4, T = 5 not a multiple of any tile; 3 layers (recompute needs 2+). */
    static final GptConfig TINY = new GptConfig(8, 11, 16, 3, 2, 8);
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;

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

    @Test
    void theParameterTableIsLlmcsLayout() {
        ParameterLayout layout = new ParameterLayout(TINY);
        try (Network net = Gpt2Blocks.spec(TINY).batch(2, 5).build(ops)) {
            ParameterTable t = net.table();
            assertThat(t.count()).isEqualTo(layout.count());
            List<String> names = new ArrayList<>();
            for (ParameterTable.Entry e : t.inBufferOrder()) {
                names.add(e.name());
            }
            assertThat(names.subList(0, 5)).containsExactly("wte", "wpe", "h.0.ln_1.weight", "h.1.ln_1.weight",
                    "h.2.ln_1.weight");
            for (ParameterLayout.Span tensor : layout.tensors()) {
                long[] dims = tensor.shape();
                boolean perLayer = dims.length > 1 && dims[0] == TINY.L() && tensor.param() != ParameterLayout.Param.WTE
                        && tensor.param() != ParameterLayout.Param.WPE;
                if (!perLayer) {
                    continue;
                }
                for (int l = 0; l < TINY.L(); l++) {
                    String name = "h." + l + "." + blockName(tensor.param());
                    assertThat(t.entry(name).offset()).as(name).isEqualTo(tensor.layerOffset(l));
                }
            }
            assertThat(t.entry("wte").offset()).isEqualTo(layout.offset(ParameterLayout.Param.WTE));
            assertThat(t.entry("ln_f.bias").offset()).isEqualTo(layout.offset(ParameterLayout.Param.LNFB));
        }
    }

    private static String blockName(ParameterLayout.Param p) {
        return switch (p) {
            case LN1W -> "ln_1.weight";
            case LN1B -> "ln_1.bias";
            case QKVW -> "attn.c_attn.weight";
            case QKVB -> "attn.c_attn.bias";
            case ATTPROJW -> "attn.c_proj.weight";
            case ATTPROJB -> "attn.c_proj.bias";
            case LN2W -> "ln_2.weight";
            case LN2B -> "ln_2.bias";
            case FCW -> "mlp.c_fc.weight";
            case FCB -> "mlp.c_fc.bias";
            case FCPROJW -> "mlp.c_proj.weight";
            case FCPROJB -> "mlp.c_proj.bias";
            default -> throw new AssertionError(p);
        };
    }

    static Recompute[] modes() {
        return Recompute.values();
    }

    static Stream<Arguments> matrix() {
        List<Arguments> a = new ArrayList<>();
        for (Recompute r : Recompute.values()) {
            for (DType d : new DType[] {DType.FP32, DType.BF16, DType.FP16}) {
                a.add(Arguments.of(r, d));
            }
        }
        return a.stream();
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("matrix")
    void blocksAreBitIdenticalToTheMonolithicModel(Recompute recompute, DType operands) {
        int maxB = 3, T = 5;
        long seed = 1000 + recompute.ordinal() * 10L + operands.ordinal();
        Random r = new Random(seed);
        float[] p = randomParams(TINY, seed);
        int[][] inp = {tokens(3 * T, r), tokens(2 * T, r)}, tgt = {tokens(3 * T, r), tokens(2 * T, r)};
        int[] B = {3, 2};
        long n = new ParameterLayout(TINY).count();
        try (Gpt2Monolith old = new Gpt2Monolith(TINY, ops, maxB, T, recompute);
             Network net = Gpt2Blocks.spec(TINY).batch(maxB, T).recompute(recompute).matmulOperands(operands)
                     .build(ops)) {
            old.matmulOperands(operands);
            MemorySegment.copy(p, 0, old.params(), F32, 0, p.length);
            net.copyParamsFromHost(MemorySegment.ofArray(p));
            old.zeroGrad();
            net.zeroGrad();
            for (int k = 0; k < 2; k++) {
                MemorySegment in = MemorySegment.ofArray(inp[k]), tg = MemorySegment.ofArray(tgt[k]);
                double want = old.forward(in, tg, B[k], T), got = net.forward(in, tg, B[k], T);
                assertThat(got).as("forward loss, micro-batch %d", k).isEqualTo(want);
                assertThat(floats(net.logits(), (long) B[k] * T * TINY.Vp()))
                        .containsExactly(floats(old.logits(), (long) B[k] * T * TINY.Vp()));
                want = old.backward(0.05f);
                got = net.backward(0.05f);
                assertThat(got).as("backward loss, micro-batch %d", k).isEqualTo(want);
            }
            assertThat(floats(net.grads(), n)).containsExactly(floats(old.grads(), n));
            // and the fused forwardBackward, as the trainer calls it
            old.zeroGrad();
            net.zeroGrad();
            MemorySegment in = MemorySegment.ofArray(inp[0]), tg = MemorySegment.ofArray(tgt[0]);
            assertThat(net.forwardBackward(in, tg, 3, T, 0.1f)).isEqualTo(old.forwardBackward(in, tg, 3, T, 0.1f));
            assertThat(floats(net.grads(), n)).containsExactly(floats(old.grads(), n));
        }
    }

    @ParameterizedTest(name = "fp8, recompute {0}")
    @org.junit.jupiter.params.provider.MethodSource("modes")
    void fp8BlocksAreBitIdenticalToTheMonolithicModelAndRecordTheSameAmaxes(Recompute recompute) {
        DelayedScaling recipe = new DelayedScaling(DelayedScaling.Format.HYBRID, 4, 0,
                DelayedScaling.Algorithm.MAX);
        int B = 2, T = 5;
        long seed = 77 + recompute.ordinal();
        Random r = new Random(seed);
        float[] p = randomParams(TINY, seed);
        long n = new ParameterLayout(TINY).count();
        try (Gpt2Monolith old = new Gpt2Monolith(TINY, ops, B, T, recompute);
             Network net = Gpt2Blocks.spec(TINY).batch(B, T).recompute(recompute).fp8(recipe).build(ops)) {
            old.fp8(new io.accel4j.train.model.Fp8State(recipe, TINY.L()));
            assertThat(net.fp8().layers()).isEqualTo(TINY.L());
            MemorySegment.copy(p, 0, old.params(), F32, 0, p.length);
            net.copyParamsFromHost(MemorySegment.ofArray(p));
            for (int step = 0; step < 3; step++) { // the scales move after the first step
                old.zeroGrad();
                net.zeroGrad();
                MemorySegment in = MemorySegment.ofArray(tokens(B * T, r)), tg = MemorySegment.ofArray(tokens(B * T,
                        r));
                assertThat(net.forwardBackward(in, tg, B, T, 0.1f)).as("step %d", step)
                        .isEqualTo(old.forwardBackward(in, tg, B, T, 0.1f));
                assertThat(floats(net.grads(), n)).containsExactly(floats(old.grads(), n));
                assertThat(net.fp8().encode()).containsExactly(old.fp8().encode());
                old.fp8().update();
                net.fp8().update();
            }
        }
    }

    @Test
    void activationBytesAreThePlansAndEveryRegionIsUsed() {
        try (Network net = Gpt2Blocks.spec(TINY).batch(2, 5).build(ops)) {
            long regions = 0;
            for (ActivationPlan.Region reg : net.plan().regions()) {
                assertThat(reg.floats() % 16).isZero();
                assertThat(reg.floats()).isGreaterThanOrEqualTo(10 * reg.perRow());
                regions += reg.floats();
            }
            assertThat(net.plan().floats()).isEqualTo(regions);
            assertThat(net.activationBytes()).isEqualTo(regions * 4 + 2 * 10 * 4);
        }
    }

    static float[] randomParams(GptConfig c, long seed) {
        Random r = new Random(seed);
        ParameterLayout layout = new ParameterLayout(c);
        float[] p = new float[(int) layout.count()];
        for (ParameterLayout.Span t : layout.tensors()) {
            ParameterLayout.Param q = t.param();
            boolean gain = q == ParameterLayout.Param.LN1W || q == ParameterLayout.Param.LN2W
                    || q == ParameterLayout.Param.LNFW;
            for (long i = 0; i < t.count(); i++) {
                p[(int) (t.offset() + i)] = (float) ((gain ? 1 : 0) + 0.5 * r.nextGaussian());
            }
        }
        return p;
    }

    static int[] tokens(int n, Random r) {
        int[] t = new int[n];
        for (int i = 0; i < n; i++) {
            t[i] = r.nextInt(TINY.V());
        }
        return t;
    }

    static float[] floats(MemorySegment s, long n) {
        float[] a = new float[(int) n];
        MemorySegment.copy(s, F32, 0, a, 0, a.length);
        return a;
    }
}
