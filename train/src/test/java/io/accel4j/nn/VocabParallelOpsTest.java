package io.accel4j.nn;

import static org.assertj.core.api.Assertions.assertThat;

import io.accel4j.core.ops.VocabParallelOps;
import io.accel4j.cpu.Parallel;
import io.accel4j.cpu.ops.CpuOps;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The vocab-parallel cross-entropy's local halves ({@link VocabParallelOps}: the CPU kernel and
 * the contract's float64 defaults), with the two
 * all-reduces done here by hand over T shards, against a float64 reference and the unsharded fused classifier
 * ({@code classifierForwardBackward}) on the whole logits; and the vocab-sharded encoder against the plain one. Odd
 * sizes: N = 7 positions, V = 13 classes padded to Vp = 16, T ∈ {1, 2, 4} (at T = 4 the last shard holds 1 real
 * class and 3 of padding). Outputs poisoned with NaN first.
 *
 * <p>Tolerances: the loss is log Σ exp with the exponentials within 1 ulp (the kernel's fp32 expf; the defaults'
 * float64) summed in float64 across blocks, rounded once to fp32, so against the float64 reference it is within a
 * few fp32 ulps: 2e-6 relative; against the fused classifier (fp32 throughout) 1e-5 relative. Each
 * gradient element is {@code scale·(p − onehot)} with p from a float64 sum: 1e-7 absolute at scale 1/N (p ≤ 1).
 */
class VocabParallelOpsTest {

    static final ValueLayout.OfFloat F = ValueLayout.JAVA_FLOAT;
    static final ValueLayout.OfInt I = ValueLayout.JAVA_INT;
    static final int N = 7, V = 13, VP = 16;

    static Parallel pool;
    static CpuOps ops;

    @BeforeAll
    static void setUp() {
        pool = new Parallel(2);
        ops = new CpuOps(pool);
    }

    @AfterAll
    static void tearDown() {
        pool.close();
    }

    /** The contract's defaults (host loops, float64 sums): the reference the CPU kernel is held to. */
    static final VocabParallelOps DEFAULTS = () -> io.accel4j.core.memory.HostMemory.INSTANCE;

    @Test
    void shardedCrossEntropyEqualsTheReferenceAndTheFusedClassifier() {
        check(ops);      // the CPU kernel (VocabShards)
        check(DEFAULTS); // the contract's defaults
    }

    private static void check(VocabParallelOps shardOps) {
        SplittableRandom r = new SplittableRandom(11);
        float[] logits = new float[N * VP];
        int[] targets = new int[N];
        for (int i = 0; i < logits.length; i++) {
            logits[i] = (float) (3 * r.nextGaussian());
        }
        for (int i = 0; i < N; i++) {
            targets[i] = i == 0 ? V - 1 : r.nextInt(V); // a target in the last shard's one real class
        }
        float scale = 1f / N;
        // float64 reference
        double[] refLoss = new double[N];
        double[][] refGrad = new double[N][VP];
        for (int i = 0; i < N; i++) {
            double m = Double.NEGATIVE_INFINITY, s = 0;
            for (int j = 0; j < V; j++) {
                m = Math.max(m, logits[i * VP + j]);
            }
            for (int j = 0; j < V; j++) {
                s += Math.exp(logits[i * VP + j] - m);
            }
            refLoss[i] = Math.log(s) + m - logits[i * VP + targets[i]];
            for (int j = 0; j < V; j++) {
                refGrad[i][j] = scale * (Math.exp(logits[i * VP + j] - m) / s - (j == targets[i] ? 1 : 0));
            }
        }
        try (Arena a = Arena.ofShared()) {
            // the unsharded fused classifier
            MemorySegment whole = a.allocate((long) N * VP * 4, 64), wl = a.allocate(N * 4L, 64);
            MemorySegment tg = a.allocate(N * 4L, 64);
            MemorySegment.copy(logits, 0, whole, F, 0, logits.length);
            MemorySegment.copy(targets, 0, tg, I, 0, N);
            double fusedMean = ops.classifierForwardBackward(whole, wl, tg, N, V, VP, scale);
            for (int T : new int[] {1, 2, 4}) {
                int Vs = VP / T;
                MemorySegment[] shard = new MemorySegment[T];
                MemorySegment max = a.allocate(N * 4L, 64), sums = a.allocate(2L * N * 4, 64);
                float[] gmax = new float[N];
                java.util.Arrays.fill(gmax, Float.NEGATIVE_INFINITY);
                for (int q = 0; q < T; q++) {
                    shard[q] = a.allocate((long) N * Vs * 4, 64);
                    for (int i = 0; i < N; i++) {
                        MemorySegment.copy(logits, i * VP + q * Vs, shard[q], F, (long) i * Vs * 4, Vs);
                    }
                    max.fill((byte) 0xff);
                    shardOps.classifierShardMax(max, shard[q], N, vv(q, Vs), Vs);
                    for (int i = 0; i < N; i++) {
                        gmax[i] = Math.max(gmax[i], max.getAtIndex(F, i));
                    }
                }
                MemorySegment.copy(gmax, 0, max, F, 0, N);
                float[] gs = new float[2 * N];
                for (int q = 0; q < T; q++) {
                    sums.fill((byte) 0xff);
                    shardOps.classifierShardSums(sums, shard[q], max, tg, N, q * Vs, vv(q, Vs), Vs);
                    for (int k = 0; k < 2 * N; k++) {
                        gs[k] += sums.getAtIndex(F, k);
                    }
                }
                MemorySegment.copy(gs, 0, sums, F, 0, 2 * N);
                for (int q = 0; q < T; q++) {
                    MemorySegment losses = a.allocate(N * 4L, 64);
                    losses.fill((byte) 0xff);
                    double mean = shardOps.classifierShardLoss(losses, shard[q], max, sums, tg, N, q * Vs, vv(q, Vs), Vs,
                            scale, true);
                    double refMean = 0;
                    for (int i = 0; i < N; i++) {
                        refMean += refLoss[i] / N;
                        assertThat((double) losses.getAtIndex(F, i)).as("T=%d rank %d loss %d", T, q, i)
                                .isCloseTo(refLoss[i], org.assertj.core.api.Assertions.within(2e-6 * Math.abs(refLoss[i])))
                                .isCloseTo(wl.getAtIndex(F, i), org.assertj.core.api.Assertions.within(1e-5 * Math.abs(refLoss[i])));
                        for (int j = 0; j < Vs; j++) {
                            float g = shard[q].getAtIndex(F, (long) i * Vs + j);
                            int col = q * Vs + j;
                            assertThat((double) g).as("T=%d grad[%d, %d]", T, i, col)
                                    .isCloseTo(refGrad[i][col], org.assertj.core.api.Assertions.within(1e-7))
                                    .isCloseTo(whole.getAtIndex(F, (long) i * VP + col),
                                            org.assertj.core.api.Assertions.within(1e-7));
                        }
                    }
                    assertThat(mean).isCloseTo(refMean, org.assertj.core.api.Assertions.within(2e-6 * refMean))
                            .isCloseTo(fusedMean, org.assertj.core.api.Assertions.within(1e-5 * refMean));
                }
            }
        }
    }

    /**
     * A shard's row maximum over wide rows (the kernel's vector loops, two accumulators and the single-vector rest),
     * exactly: a maximum has no rounding. Each row's largest value sits somewhere else (first, middle, last of the
     * real columns), and the padding holds +∞ and NaN, which must not be read.
     */
    @Test
    void shardMaxIsEachRowsExactMaximum() {
        int rows = 5, Vs = 1037, Vv = 1001;
        SplittableRandom r = new SplittableRandom(3);
        float[] x = new float[rows * Vs];
        for (int i = 0; i < rows; i++) {
            for (int j = 0; j < Vs; j++) {
                float pad = j % 2 == 0 ? Float.POSITIVE_INFINITY : Float.NaN;
                x[i * Vs + j] = j < Vv ? (float) (5 * r.nextGaussian()) : pad;
            }
            int at = switch (i) { case 0 -> 0; case 1 -> Vv - 1; case 2 -> 17; default -> r.nextInt(Vv); };
            x[i * Vs + at] = 100f + i;
        }
        for (VocabParallelOps shardOps : new VocabParallelOps[] {ops, DEFAULTS}) {
            try (Arena a = Arena.ofShared()) {
                MemorySegment logits = a.allocate((long) rows * Vs * 4, 64), max = a.allocate(rows * 4L, 64);
                MemorySegment.copy(x, 0, logits, F, 0, x.length);
                max.fill((byte) 0xff);
                shardOps.classifierShardMax(max, logits, rows, Vv, Vs);
                for (int i = 0; i < rows; i++) {
                    float want = Float.NEGATIVE_INFINITY;
                    for (int j = 0; j < Vv; j++) {
                        want = Math.max(want, x[i * Vs + j]);
                    }
                    assertThat(max.getAtIndex(F, i)).as("row %d max, %s", i, shardOps.getClass().getSimpleName())
                            .isEqualTo(want).isEqualTo(100f + i);
                }
            }
        }
    }

    static int vv(int q, int Vs) {
        return Math.max(0, Math.min(Vs, V - q * Vs));
    }

    @Test
    void shardedEncoderSumsToThePlainOne() {
        int B = 2, T = 3, C = 5, rows = 12, parts = 3, Rs = rows / parts;
        SplittableRandom r = new SplittableRandom(5);
        try (Arena a = Arena.ofShared()) {
            MemorySegment wte = a.allocate(rows * C * 4L, 64), wpe = a.allocate(T * C * 4L, 64);
            MemorySegment inp = a.allocate(B * T * 4L, 64);
            for (long i = 0; i < rows * C; i++) {
                wte.setAtIndex(F, i, (float) r.nextGaussian());
            }
            for (long i = 0; i < T * C; i++) {
                wpe.setAtIndex(F, i, (float) r.nextGaussian());
            }
            for (int i = 0; i < B * T; i++) {
                inp.setAtIndex(I, i, r.nextInt(11));
            }
            MemorySegment want = a.allocate(B * T * C * 4L, 64), got = a.allocate(B * T * C * 4L, 64);
            ops.encoderForward(want, inp, wte, wpe, B, T, C, 11);
            float[] sum = new float[B * T * C];
            for (int q = 0; q < parts; q++) {
                got.fill((byte) 0xff);
                ops.encoderForwardShard(got, inp, wte.asSlice((long) q * Rs * C * 4), q == 0 ? wpe : null, B, T, C,
                        q * Rs, Rs);
                for (int k = 0; k < sum.length; k++) {
                    sum[k] += got.getAtIndex(F, k);
                }
            }
            for (int k = 0; k < sum.length; k++) { // one term is non-zero besides wpe: the same fp32 addition
                assertThat(sum[k]).as("out[%d]", k).isEqualTo(want.getAtIndex(F, k));
            }
            // backward: the shards' dwte are the plain dwte's rows; every part adds the whole dwpe
            MemorySegment dout = a.allocate(B * T * C * 4L, 64);
            for (long i = 0; i < B * T * C; i++) {
                dout.setAtIndex(F, i, (float) r.nextGaussian());
            }
            MemorySegment dwte = a.allocate(rows * C * 4L, 64), dwpe = a.allocate(T * C * 4L, 64);
            ops.encoderBackward(dwte, dwpe, dout, inp, B, T, C, 11);
            for (int q = 0; q < parts; q++) {
                MemorySegment sd = a.allocate(Rs * C * 4L, 64), sp = a.allocate(T * C * 4L, 64);
                ops.encoderBackwardShard(sd, sp, dout, inp, B, T, C, q * Rs, Rs);
                for (long i = 0; i < Rs * C; i++) {
                    assertThat(sd.getAtIndex(F, i)).isCloseTo(dwte.getAtIndex(F, q * Rs * C + i),
                            org.assertj.core.api.Assertions.within(1e-6f));
                }
                for (long i = 0; i < T * C; i++) {
                    assertThat(sp.getAtIndex(F, i)).isCloseTo(dwpe.getAtIndex(F, i),
                            org.assertj.core.api.Assertions.within(1e-6f));
                }
            }
        }
    }
}
