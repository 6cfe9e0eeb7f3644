package io.accel4j.optim;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import io.accel4j.nn.LayerNorm;
import io.accel4j.nn.Linear;
import io.accel4j.nn.Module;
import io.accel4j.nn.Network;
import io.accel4j.nn.ParameterTable;
import io.accel4j.nn.Sequential;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@link OptimizerSpec#createOverWhole} (the trainer's ZeRO-2: the parameters whole, gradients and state a packed
 * shard of scattered runs) against the same spec's whole-vector optimizer, the existing fp32 path, bit for bit over
 * several steps: every parameter of a run and every state value as the whole optimizer's, every parameter outside
 * the runs untouched. Random odd cuts of a vector with three groups (decay, no decay, an lr multiplier of 0.5), the
 * runs packed in shuffled order, for AdamW (decay by tensor and on everything), AdamW with bf16 working weights, SGD
 * with Nesterov momentum and Lion. No tolerance: the kernels are element-wise and name each element by its offset,
 * so any difference is a defect.
 */
class WholeParametersTest {

    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT;
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

    private static Network network() {
        Module body = new Sequential("net", Linear.of("fc", 7, 9), new LayerNorm("norm", 9),
                new AdamWTest.Scaled("half", 0.5f), Linear.noBias("head", 9, 3));
        return Network.of(body).features(7).classes(3).batch(2, 1).build(ops);
    }

    /** A random cut of {@code n} elements into runs, a random half of them kept, packed in shuffled order. */
    private static List<OptimizerSpec.Run> runs(long n, Random r) {
        List<long[]> pieces = new ArrayList<>();
        for (long at = 0; at < n; ) {
            long len = Math.min(n - at, 1 + r.nextInt(13));
            if (r.nextBoolean()) {
                pieces.add(new long[] {at, len});
            }
            at += len;
        }
        Collections.shuffle(pieces, r);
        List<OptimizerSpec.Run> runs = new ArrayList<>();
        long packed = 0;
        for (long[] p : pieces) {
            runs.add(new OptimizerSpec.Run(p[0], packed, p[1]));
            packed += p[1];
        }
        return runs;
    }

    private static void check(OptimizerSpec spec, long seed) {
        Random r = new Random(seed);
        try (Network whole = network(); Arena arena = Arena.ofShared()) { // shared: the kernels run on 2 threads
            ParameterTable table = whole.table();
            int n = (int) table.count();
            List<OptimizerSpec.Run> runs = runs(n, r);
            long length = OptimizerSpec.length(runs);
            MemorySegment params = arena.allocate(4L * n, 64), grads = arena.allocate(4L * Math.max(1, length), 64);
            for (int i = 0; i < n; i++) {
                float p = (float) r.nextGaussian();
                whole.params().setAtIndex(F32, i, p);
                params.setAtIndex(F32, i, p);
            }
            float[] before = params.toArray(F32);
            try (Optimizer all = spec.create(ops, table, whole.params(), whole.grads());
                 Optimizer part = spec.createOverWhole(ops, table, params, grads.asSlice(0, 4L * length), runs)) {
                assertThat(part.stateBytes()).as("state for the runs only").isEqualTo(
                        (long) spec.stateFloatsPerParameter() * 4 * length);
                for (int t = 1; t <= 4; t++) {
                    for (int i = 0; i < n; i++) {
                        whole.grads().setAtIndex(F32, i, (float) r.nextGaussian());
                    }
                    for (OptimizerSpec.Run run : runs) {
                        MemorySegment.copy(whole.grads(), 4 * run.offset(), grads, 4 * run.at(), 4 * run.length());
                    }
                    float lr = 0.01f * t, gradScale = 0.75f;
                    all.step(t, lr, gradScale);
                    part.step(t, lr, gradScale);
                    boolean[] inRun = new boolean[n];
                    for (OptimizerSpec.Run run : runs) {
                        for (long k = 0; k < run.length(); k++) {
                            int i = (int) (run.offset() + k);
                            inRun[i] = true;
                            assertThat(bits(params, i)).as("%s param %d, step %d, seed %d", spec, i, t, seed)
                                    .isEqualTo(bits(whole.params(), i));
                            for (Map.Entry<String, MemorySegment> s : part.state().entrySet()) {
                                assertThat(bits(s.getValue(), run.at() + k))
                                        .as("%s %s of param %d, step %d, seed %d", spec, s.getKey(), i, t, seed)
                                        .isEqualTo(bits(all.state().get(s.getKey()), i));
                            }
                        }
                    }
                    for (int i = 0; i < n; i++) {
                        if (!inRun[i]) {
                            assertThat(bits(params, i)).as("%s param %d outside the runs, step %d, seed %d", spec, i,
                                    t, seed).isEqualTo(Float.floatToRawIntBits(before[i]));
                        }
                    }
                }
            }
        }
    }

    private static int bits(MemorySegment s, long i) {
        return Float.floatToRawIntBits(s.getAtIndex(F32, i));
    }

    @Test
    void everyOptimizerUpdatesItsRunsOfTheWholeVectorAsTheWholeOptimizer() {
        long seed = System.nanoTime();
        check(new AdamW.Spec(0.9f, 0.95f, 1e-8f, 0.1f, false), seed);
        check(new AdamW.Spec(0.9f, 0.95f, 1e-8f, 0.1f, true), seed + 1);
        check(new Bf16AdamW.Spec(0.9f, 0.95f, 1e-8f, 0.1f, false, 77L), seed + 2);
        check(new Sgd.Spec(0.9f, 0f, 0.01f, true), seed + 3);
        check(Lion.of(0.1f), seed + 4);
    }

    @Test
    void aVectorThatIsNotTheWholeOneOrAnOffloadedOptimizerIsRefused() {
        try (Network net = network(); Arena arena = Arena.ofShared()) {
            ParameterTable table = net.table();
            long n = table.count();
            List<OptimizerSpec.Run> runs = List.of(new OptimizerSpec.Run(3, 0, 5));
            MemorySegment grads = arena.allocate(4L * 5, 64);
            assertThatThrownBy(() -> AdamW.of(0f).createOverWhole(ops, table, net.params().asSlice(0, 4L * (n - 1)),
                    grads, runs)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("params hold " + (n - 1) + " fp32 values, the whole parameter vector is "
                            + n);
            assertThatThrownBy(() -> AdamW.of(0f).createOverWhole(ops, table, net.params(), grads.asSlice(0, 16),
                    runs)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("grads hold 4 fp32 values, the parameter table it was given covers 5");
            assertThatThrownBy(() -> new Offload(AdamW.of(0f), ops).createOverWhole(ops, table, net.params(), grads,
                    runs)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("Offload cannot update a shard whose parameters are left whole");
        }
    }
}
