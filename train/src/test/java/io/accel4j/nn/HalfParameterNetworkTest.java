package io.accel4j.nn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.core.DType;
import io.accel4j.cpu.Casts;
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
 * A {@link Network} with bf16 working weights ({@link NetworkSpec#parameterStorage}) against the same network with
 * fp32 parameters holding the same values (the initial weights rounded to nearest even): the same loss and the same
 * gradients bit for bit (fp32 ones, and 16-bit ones), its parameters read back as those bf16 values, every byte it
 * allocates counted by {@link Network#totalBytes()}; a tree without a unit to store, another type and a parameter
 * source are refused before anything is allocated.
 */
class HalfParameterNetworkTest {

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

    /** Every child in a unit of its own (no wide unit at all): embedding, a block, a LayerNorm, an untied head. */
    private static Sequential perChild() {
        return UnitScope.perChild(new Sequential("", new Embedding("emb", 37, 37, 12, 9, true),
                new TransformerBlock("h0", 12, 3), new LayerNorm("lnf", 12), LmHead.untied("head", 12, 40)));
    }

    private static float[] gradients(Network n) {
        if (n.gradientStorage() == DType.FP32) {
            return n.grads().toArray(F32);
        }
        float[] out = new float[(int) n.table().count()];
        n.halfGradients().chunks(0, out.length, false, (o, f, m) -> {
            for (long i = 0; i < m; i++) {
                out[(int) (o + i)] = f.getAtIndex(F32, i);
            }
        });
        return out;
    }

    @Test
    void theNetworkComputesWithTheBf16ValuesBitForBit() {
        record Tree(String name, Supplier<Module> body) {}
        long seed = System.nanoTime();
        for (Tree tree : List.of(new Tree("gpt2", () -> Gpt2Blocks.body(GPT)),
                new Tree("perChild", HalfParameterNetworkTest::perChild))) {
            for (DType grads : new DType[] {DType.FP32, DType.BF16}) {
                Random r = new Random(seed);
                try (Arena a = Arena.ofConfined();
                     Network fp32 = Network.of(tree.body().get()).tokens(37).classes(37).batch(B, T)
                             .matmulOperands(DType.BF16).gradientStorage(grads).build(ops);
                     Network bf16 = Network.of(tree.body().get()).tokens(37).classes(37).batch(B, T)
                             .matmulOperands(DType.BF16).gradientStorage(grads).parameterStorage(DType.BF16)
                             .build(ops)) {
                    assertThat(bf16.parameterStorage()).isEqualTo(DType.BF16);
                    long n = fp32.table().count();
                    MemorySegment initial = a.allocate(n * 4, 64), rounded = a.allocate(n * 4, 64),
                            h = a.allocate(n * 2, 64), back = a.allocate(n * 4, 64);
                    fp32.initialValues(seed, initial);
                    Casts.f32ToBf16(h, 0, initial, 0, n);
                    Casts.bf16ToF32(rounded, 0, h, 0, n);
                    fp32.copyParamsFromHost(rounded);
                    bf16.copyParamsFromHost(initial); // rounded to nearest even on the way in
                    bf16.copyParamsToHost(back);
                    assertThat(back.toArray(F32)).as("%s: the parameters read back", tree.name())
                            .containsExactly(rounded.toArray(F32));
                    MemorySegment in = a.allocate(4L * B * T), tg = a.allocate(4L * B * T);
                    for (int step = 0; step < 2; step++) { // twice: the working region widened again
                        for (int i = 0; i < B * T; i++) {
                            in.setAtIndex(ValueLayout.JAVA_INT, i, r.nextInt(37));
                            tg.setAtIndex(ValueLayout.JAVA_INT, i, r.nextInt(37));
                        }
                        double[] loss = new double[2];
                        Network[] nets = {fp32, bf16};
                        for (int k = 0; k < 2; k++) {
                            nets[k].zeroGrad();
                            loss[k] = nets[k].forwardBackward(in, tg, B, T, 1f / (B * T));
                        }
                        assertThat(loss[1]).as("%s, %s gradients, seed %d: the loss", tree.name(), grads, seed)
                                .isEqualTo(loss[0]);
                        assertThat(gradients(bf16)).as("%s, %s gradients, seed %d", tree.name(), grads, seed)
                                .containsExactly(gradients(fp32));
                    }
                    assertThatThrownBy(bf16::params).isInstanceOf(IllegalStateException.class)
                            .hasMessageContaining("stored in bf16 (NetworkSpec.parameterStorage)");
                    assertThatThrownBy(fp32::halfParameters).isInstanceOf(IllegalStateException.class);
                }
            }
        }
    }

    @Test
    void totalBytesIsEveryByteTheNetworkAllocates() {
        for (Supplier<Module> body : List.<Supplier<Module>>of(() -> Gpt2Blocks.body(GPT),
                HalfParameterNetworkTest::perChild)) {
            for (DType grads : new DType[] {DType.FP32, DType.BF16}) {
                CountingMemory counted = new CountingMemory();
                try (Network n = Network.of(body.get()).tokens(37).classes(37).batch(B, T).gradientStorage(grads)
                        .parameterStorage(DType.BF16).build(counted.ops(ops))) {
                    long g = grads == DType.FP32 ? 4 * n.table().count() : n.halfGradients().bytes();
                    assertThat(n.totalBytes()).isEqualTo(n.halfParameters().bytes() + g + n.activationBytes())
                            .isEqualTo(counted.live.get());
                }
            }
        }
    }

    @Test
    void whatCannotBeStoredIsRefusedBeforeAnyAllocation() {
        CountingMemory counted = new CountingMemory();
        Sequential flat = new Sequential("", Embedding.tokens("emb", 37, 12), new LayerNorm("lnf", 12),
                LmHead.untied("head", 12, 37));
        assertThatThrownBy(() -> Network.of(flat).tokens(37).classes(37).parameterStorage(DType.BF16)
                .build(counted.ops(ops))).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("bf16 parameter storage keeps the parameters of the units a UnitScope opens and closes "
                        + "in one backward (UnitScope.perChild, Gpt2Blocks.body), and this tree has no such unit: "
                        + "wrap its blocks in UnitScopes, or keep fp32 parameters");
        assertThat(counted.peak.get()).isZero();
        assertThatThrownBy(() -> Network.of(flat).parameterStorage(DType.FP16))
                .hasMessage("the working weights are stored in FP32 or BF16, got FP16");
        assertThatThrownBy(() -> Network.of(perChild()).tokens(37).classes(37).parameterStorage(DType.BF16)
                .parameters(t -> null, Units.NONE).build(counted.ops(ops)))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("parameterStorage(BF16) stores the network's own parameters");
        assertThat(counted.peak.get()).isZero();
    }
}
