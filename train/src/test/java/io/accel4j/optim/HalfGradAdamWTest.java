package io.accel4j.optim;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.core.DType;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.nn.HalfGradients;
import io.accel4j.nn.ParameterTable;
import io.accel4j.train.model.Gpt2;
import io.accel4j.train.model.Gpt2Options;
import io.accel4j.train.model.GptConfig;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * AdamW over 16-bit gradients ({@link HalfGradAdamW}, one fused call per fp32 chunk) is bit for bit {@link AdamW}
 * over the same gradients widened into an fp32 buffer: parameters and moments after several steps, with decayed and
 * undecayed ranges (GPT-2's matrices and its biases, gains and position table), on a model whose layer ranges cross
 * {@link HalfGradients#CHUNK}.
 */
class HalfGradAdamWTest {

    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;
    /** C = 48, 2 layers: a layer's MLP matrices (4·48·48 = 9216) and the wte (131·48) around a few chunks' sizes. */
    private static final GptConfig CONFIG = new GptConfig(16, 131, 136, 2, 4, 48);

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
    void isAdamWBitForBitOverTheWidenedGradients() {
        long seed = System.nanoTime() & 0xffffffffL; // GPT-2's initialisation takes a 32-bit seed
        Random r = new Random(seed);
        for (DType type : new DType[] {DType.BF16, DType.FP16}) {
            try (Gpt2 half = new Gpt2(CONFIG, ops, 1, 2, Gpt2Options.DEFAULT.withGradientStorage(type));
                 Gpt2 wide = new Gpt2(CONFIG, ops, 1, 2)) {
                half.initialise(seed);
                wide.copyParamsFromHost(half.params());
                ParameterTable table = half.network().table();
                long n = table.count();
                HalfGradients g = half.halfGradients();
                AdamW.Spec spec = new AdamW.Spec(0.9f, 0.95f, 1e-6f, 0.1f, false);
                try (Optimizer h = spec.create(ops, table, half.params(), g);
                     Optimizer f = spec.create(ops, table, wide.params(), wide.grads())) {
                    assertThat(h.describe()).startsWith("AdamW over " + type.name().toLowerCase() + " gradients");
                    for (int t = 1; t <= 3; t++) {
                        g.chunks(0, n, true, (o, c, m) -> {
                            for (long i = 0; i < m; i++) {
                                c.setAtIndex(F32, i, (float) (r.nextGaussian() * 1e-2));
                            }
                        });
                        MemorySegment w = wide.grads();
                        g.chunks(0, n, false, (o, c, m) -> MemorySegment.copy(c, 0, w, o * Float.BYTES,
                                m * Float.BYTES));
                        h.step(t, 1e-2f, 0.5f);
                        f.step(t, 1e-2f, 0.5f);
                    }
                    assertThat(half.params().toArray(F32)).as("seed %d, %s: parameters", seed, type)
                            .containsExactly(wide.params().toArray(F32));
                    for (String s : new String[] {"m", "v"}) {
                        assertThat(h.state().get(s).toArray(F32)).as("seed %d, %s: %s", seed, type, s)
                                .containsExactly(f.state().get(s).toArray(F32));
                    }
                    assertThat(h.stateBytes()).isEqualTo(8 * n);
                }
            }
        }
    }

    @Test
    void shardsUpdateTheirElementsAsTheWholeVectorDoes() {
        long seed = System.nanoTime() & 0xffffffffL;
        Random r = new Random(seed);
        try (Gpt2 half = new Gpt2(CONFIG, ops, 1, 2, Gpt2Options.DEFAULT.withGradientStorage(DType.BF16));
             Gpt2 whole = new Gpt2(CONFIG, ops, 1, 2, Gpt2Options.DEFAULT.withGradientStorage(DType.BF16))) {
            half.initialise(seed);
            whole.copyParamsFromHost(half.params());
            ParameterTable table = half.network().table();
            long n = table.count();
            long[] cuts = {0, 1 + r.nextInt((int) n / 3), n / 2 + r.nextInt((int) n / 3), n}; // inside ranges
            AdamW.Spec spec = new AdamW.Spec(0.9f, 0.95f, 1e-6f, 0.1f, false);
            Optimizer[] parts = new Optimizer[cuts.length - 1];
            try (Optimizer w = spec.create(ops, table, whole.params(), whole.halfGradients())) {
                for (int i = 0; i < parts.length; i++) {
                    long len = cuts[i + 1] - cuts[i];
                    parts[i] = spec.create(ops, table, half.params().asSlice(cuts[i] * Float.BYTES,
                            len * Float.BYTES), half.halfGradients(), cuts[i], len);
                    assertThat(parts[i].stateBytes()).isEqualTo(8 * len);
                }
                for (int t = 1; t <= 3; t++) {
                    for (HalfGradients g : new HalfGradients[] {half.halfGradients(), whole.halfGradients()}) {
                        Random same = new Random(seed + t);
                        g.chunks(0, n, true, (o, c, m) -> {
                            for (long i = 0; i < m; i++) {
                                c.setAtIndex(F32, i, (float) (same.nextGaussian() * 1e-2));
                            }
                        });
                    }
                    for (Optimizer p : parts) {
                        p.step(t, 1e-2f, 0.5f);
                    }
                    w.step(t, 1e-2f, 0.5f);
                }
                assertThat(half.params().toArray(F32)).as("seed %d: parameters", seed)
                        .containsExactly(whole.params().toArray(F32));
                for (String s : new String[] {"m", "v"}) {
                    float[] all = w.state().get(s).toArray(F32);
                    for (int i = 0; i < parts.length; i++) {
                        assertThat(parts[i].state().get(s).toArray(F32)).as("seed %d: %s of part %d", seed, s, i)
                                .containsExactly(java.util.Arrays.copyOfRange(all, (int) cuts[i], (int) cuts[i + 1]));
                    }
                }
            } finally {
                for (Optimizer p : parts) {
                    if (p != null) {
                        p.close();
                    }
                }
            }
        }
        assertThatThrownBy(() -> {
            try (Gpt2 half = new Gpt2(CONFIG, ops, 1, 2, Gpt2Options.DEFAULT.withGradientStorage(DType.BF16))) {
                AdamW.of(0f).create(ops, half.network().table(), half.params(), half.halfGradients(), 4, 10);
            }
        }).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("(its shard has 10)");
    }

    @Test
    void optimizersThatReadFp32GradientsOnlyAreRefused() {
        try (Gpt2 half = new Gpt2(CONFIG, ops, 1, 2, Gpt2Options.DEFAULT.withGradientStorage(DType.BF16))) {
            assertThatThrownBy(() -> Sgd.of(0.9f, 0f).create(ops, half.network().table(), half.params(),
                    half.halfGradients())).isInstanceOf(IllegalArgumentException.class)
                    .hasMessage("16-bit gradients are read by AdamW only yet, not by Sgd: store the gradients in "
                            + "fp32 or use AdamW");
        }
    }
}
