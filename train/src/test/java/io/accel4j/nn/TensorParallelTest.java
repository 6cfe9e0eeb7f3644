package io.accel4j.nn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.InProcessGroup;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.train.model.GptConfig;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.List;
import java.util.Random;
import java.util.function.Function;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The tensor-parallel blocks: each against float64 finite differences of the whole model its T ranks compute
 * ({@link TensorGradientCheck}, at T = 2 and T = 3, odd sizes: C = 6, T = 5 positions, a padded vocabulary whose
 * last shard is part padding), and GPT-2 split over two ranks against the plain one-rank GPT-2: the same initial
 * parameters bit for bit (drawn whole, then split), and the same loss and gradients up to fp32 summation order.
 *
 * <p>Tolerances: the finite differences as {@link GradientCheck} justifies them. Split against plain: the split
 * model sums the row-parallel products, the head's input gradient and the softmax's denominator in another order
 * (partial sums over C/T, Vp/T terms then across ranks; the loss's denominator in float64): the loss within 1e-6
 * relative, each gradient element within 2e-5 of the tensor's largest (measured: below 3e-7 relative).
 */
class TensorParallelTest {

    private static final int B = 2, T = 5, C = 6;

    private static final Parallel[] POOLS = new Parallel[4];
    private static final CpuOps[] OPS = new CpuOps[4];

    @BeforeAll
    static void setUp() {
        for (int i = 0; i < POOLS.length; i++) {
            POOLS[i] = new Parallel(1);
            OPS[i] = new CpuOps(POOLS[i]);
        }
    }

    @AfterAll
    static void tearDown() {
        for (Parallel p : POOLS) {
            p.close();
        }
    }

    private static void check(int tp, Function<Communicator, NetworkSpec> spec, long seed) {
        for (GradientCheck.Comparison c : TensorGradientCheck.run(tp, spec, r -> OPS[r], B, T, seed)) {
            assertThat(c.analytic()).as("T=%d %s, direction %d (seed %d)", tp, c.name(), c.direction(), seed)
                    .isCloseTo(c.difference(), within(GradientCheck.ABS + GradientCheck.REL * Math.abs(c.difference())));
        }
    }

    /** features C → Linear C→C → block → Linear C→3. */
    private static Function<Communicator, NetworkSpec> around(java.util.function.Supplier<Module> block) {
        return comm -> Network.of(new Sequential("net", Linear.of("in", C, C), block.get(), Linear.of("head", C, 3)))
                .features(C).classes(3).batch(B, T).tensorParallel(comm);
    }

    @Test
    void parallelAttentionAndMlp() {
        check(2, around(() -> CausalSelfAttention.parallel("attn", C, 2)), 1);
        check(3, around(() -> CausalSelfAttention.parallel("attn", C, 3)), 2);
        check(2, around(() -> new ParallelMlp("mlp", C, 10)), 3);
        check(3, around(() -> new ParallelMlp("mlp", C, 9)), 4);
    }

    @Test
    void columnAndRowParallelLinear() {
        check(2, around(() -> new Sequential("s", ColumnParallelLinear.of("up", C, 8),
                new RowParallelLinear("down", 8, C))), 5);
        check(3, around(() -> new Sequential("s", ColumnParallelLinear.stacked("up", C, 9, 3), new Gelu("act"),
                new RowParallelLinear("down", 9, C))), 6);
    }

    /** tokens → vocab-parallel embedding (12 rows for 11 tokens) → parallel block → ln → vocab-parallel head. */
    @Test
    void vocabParallelEmbeddingHeadAndLoss() {
        for (int tp : new int[] {2, 3}) {
            check(tp, comm -> {
                VocabParallelEmbedding emb = new VocabParallelEmbedding("emb", 11, 12, C, T, true);
                return Network.of(new Sequential("net", emb, TransformerBlock.parallel("h", C, tp, 12),
                        new LayerNorm("ln", C), VocabParallelHead.tied("head", emb)))
                        .tokens(11).classes(11).batch(B, T).tensorParallel(comm);
            }, 30 + tp); // (seed 10 at T = 3 meets a kink the plain blocks' check meets too)
            check(tp, comm -> Network.of(new Sequential("net",
                    new VocabParallelEmbedding("emb", 11, 12, C, 0, false), new LayerNorm("ln", C),
                    VocabParallelHead.untied("head", C, 12)))
                    .tokens(11).classes(11).batch(B, T).tensorParallel(comm), 20 + tp);
        }
    }

    @Test
    void gpt2SplitOverTwoRanksEqualsThePlainGpt2() {
        GptConfig c = new GptConfig(8, 11, 16, 2, 2, 8);
        int Bq = 2, Tq = 7;
        Random r = new Random(3);
        int[] tokens = new int[Bq * Tq], targets = new int[Bq * Tq];
        for (int i = 0; i < tokens.length; i++) {
            tokens[i] = r.nextInt(11);
            targets[i] = r.nextInt(11);
        }
        try (Network plain = Gpt2Blocks.spec(c).batch(Bq, Tq).build(OPS[0]); Arena a = Arena.ofShared();
             InProcessGroup g = InProcessGroup.create(2, Duration.ofSeconds(60))) {
            MemorySegment in = a.allocate(tokens.length * 4L, 64), tg = a.allocate(tokens.length * 4L, 64);
            MemorySegment.copy(tokens, 0, in, ValueLayout.JAVA_INT, 0, tokens.length);
            MemorySegment.copy(targets, 0, tg, ValueLayout.JAVA_INT, 0, targets.length);
            plain.initialise(42);
            plain.zeroGrad();
            double want = plain.forwardBackward(in, tg, Bq, Tq, 1f / (Bq * Tq));
            long n = plain.table().count();
            float[] wantP = new float[(int) n], wantG = new float[(int) n];
            plain.copyParamsToHost(MemorySegment.ofArray(wantP));
            plain.copyGradsToHost(MemorySegment.ofArray(wantG));
            List<Object[]> got = g.run(comm -> {
                try (Network net = Gpt2Blocks.parallelSpec(c, comm).batch(Bq, Tq).build(OPS[1 + comm.rank()]);
                     Arena h = Arena.ofShared()) {
                    TensorShards s = TensorShards.of(net);
                    assertThat(s.whole().count()).isEqualTo(n);
                    net.initialise(42);
                    net.zeroGrad();
                    double loss = net.forwardBackward(in, tg, Bq, Tq, 1f / (Bq * Tq));
                    MemorySegment local = h.allocate(net.table().fp32Bytes(), 64), all = h.allocate(n * 4, 64);
                    net.copyParamsToHost(local);
                    s.gather(local, all);
                    float[] p = all.toArray(ValueLayout.JAVA_FLOAT);
                    net.copyGradsToHost(local);
                    s.gather(local, all);
                    return new Object[] {loss, p, all.toArray(ValueLayout.JAVA_FLOAT)};
                }
            });
            for (Object[] o : got) {
                assertThat((double) o[0]).isCloseTo(want, within(1e-6 * want));
                assertThat((float[]) o[1]).isEqualTo(wantP);
                float[] gr = (float[]) o[2];
                for (ParameterTable.Entry e : plain.table().entries()) {
                    double big = 0, worst = 0;
                    for (long i = e.offset(); i < e.offset() + e.count(); i++) {
                        big = Math.max(big, Math.abs(wantG[(int) i]));
                    }
                    for (long i = e.offset(); i < e.offset() + e.count(); i++) {
                        worst = Math.max(worst, Math.abs(gr[(int) i] - wantG[(int) i]));
                    }
                    assertThat(worst).as("%s: largest difference of %s (largest |g| %s)", e.name(), worst, big)
                            .isLessThanOrEqualTo(2e-5 * big + 1e-12);
                }
            }
        }
    }

    @Test
    void layoutsThatDoNotSplitAreRefusedNamingTheNumbers() {
        try (InProcessGroup g = InProcessGroup.create(4, Duration.ofSeconds(20))) {
            List<String> msgs = g.run(comm -> {
                try {
                    Gpt2Blocks.parallelSpec(new GptConfig(8, 11, 16, 1, 2, 8), comm).build(OPS[comm.rank()]).close();
                    return "built";
                } catch (ShapeException e) {
                    return e.getMessage();
                }
            });
            assertThat(msgs.get(0)).isEqualTo("module 'h.0.attn': --tp 4 does not divide its heads NH = 2");
        }
        try (InProcessGroup g = InProcessGroup.create(3, Duration.ofSeconds(20))) {
            List<String> msgs = g.run(comm -> {
                try {
                    Gpt2Blocks.parallelSpec(new GptConfig(8, 11, 16, 1, 3, 9), comm).build(OPS[comm.rank()]).close();
                    return "built";
                } catch (ShapeException e) {
                    return e.getMessage();
                }
            });
            assertThat(msgs.get(0)).isEqualTo("module '': --tp 3 does not divide the padded vocabulary Vp = 16");
        }
        assertThatThrownBy(() -> new VocabParallelEmbedding("e", 5, 4, 2, 0, false))
                .hasMessageContaining("rows >= V");
    }
}
