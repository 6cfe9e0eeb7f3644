package io.accel4j.nn;

import io.accel4j.collectives.Communicator;
import io.accel4j.collectives.InProcessGroup;
import io.accel4j.core.ops.Ops;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.function.Function;

/**
 * {@link GradientCheck} for a network split over T in-process tensor ranks: every rank draws the same whole
 * parameters, inputs and directions (one seed), takes its shards ({@link TensorShards#extract}), and runs the forwards
 * together; the analytic derivative is taken from the gathered whole gradient, the differences from the (identical)
 * losses. So the check is of the whole model the T ranks compute, against float64 finite differences; tolerances
 * {@link GradientCheck#ABS}, {@link GradientCheck#REL}.
 */
final class TensorGradientCheck {

    private TensorGradientCheck() {}

    static List<GradientCheck.Comparison> run(int T, Function<Communicator, NetworkSpec> spec,
                                              java.util.function.IntFunction<Ops> ops, int B, int Tq, long seed) {
        try (InProcessGroup g = InProcessGroup.create(T, Duration.ofSeconds(60))) {
            return g.run(comm -> check(spec.apply(comm), ops.apply(comm.rank()), B, Tq, seed)).get(0);
        }
    }

    private static List<GradientCheck.Comparison> check(NetworkSpec spec, Ops ops, int B, int T, long seed) {
        Random r = new Random(seed);
        List<GradientCheck.Comparison> out = new ArrayList<>();
        try (Network net = spec.build(ops); Arena a = Arena.ofShared()) {
            TensorShards shards = TensorShards.of(net);
            ParameterTable whole = shards.whole();
            int n = Math.toIntExact(whole.count());
            float[] p = new float[n];
            for (int i = 0; i < n; i++) {
                p[i] = (float) (0.6 * r.nextGaussian());
            }
            for (ParameterTable.Entry e : whole.entries()) {
                if (e.init() instanceof Init.Constant k && k.value() == 1f) {
                    for (long i = 0; i < e.count(); i++) {
                        p[(int) (e.offset() + i)] += 1;
                    }
                }
            }
            int rows = B * T, width = net.inputWidth();
            MemorySegment in = a.allocate((long) rows * width * 4, 64), tg = a.allocate(rows * 4L, 64);
            boolean tokens = net.vocabulary() > 0;
            for (int i = 0; i < rows * width; i++) {
                if (tokens) {
                    in.setAtIndex(ValueLayout.JAVA_INT, i, r.nextInt(net.vocabulary()));
                } else {
                    in.setAtIndex(ValueLayout.JAVA_FLOAT, i, (float) r.nextGaussian());
                }
            }
            for (int i = 0; i < rows; i++) {
                tg.setAtIndex(ValueLayout.JAVA_INT, i, r.nextInt(net.classes()));
            }
            MemorySegment local = a.allocate(net.table().fp32Bytes(), 64);
            MemorySegment all = a.allocate((long) n * 4, 64);
            set(net, shards, p, all, local);
            net.zeroGrad();
            net.forwardBackward(in, tg, B, T, 1f / rows);
            net.copyGradsToHost(local);
            shards.gather(local, all);
            float[] grad = all.toArray(ValueLayout.JAVA_FLOAT);
            for (ParameterTable.Entry e : whole.entries()) {
                for (int dir = 0; dir < 2; dir++) {
                    double[] d = new double[(int) e.count()];
                    double norm = 0;
                    for (int i = 0; i < d.length; i++) {
                        d[i] = r.nextGaussian();
                        norm += d[i] * d[i];
                    }
                    double analytic = 0;
                    for (int i = 0; i < d.length; i++) {
                        d[i] /= Math.sqrt(norm);
                        analytic += grad[(int) (e.offset() + i)] * d[i];
                    }
                    double h = GradientCheck.H;
                    double l1 = loss(net, shards, p, e, d, h, in, tg, B, T, all, local);
                    double lm1 = loss(net, shards, p, e, d, -h, in, tg, B, T, all, local);
                    double l2 = loss(net, shards, p, e, d, 2 * h, in, tg, B, T, all, local);
                    double lm2 = loss(net, shards, p, e, d, -2 * h, in, tg, B, T, all, local);
                    out.add(new GradientCheck.Comparison(e.name(), dir, analytic,
                            (8 * (l1 - lm1) - (l2 - lm2)) / (12 * h)));
                }
            }
        }
        return out;
    }

    private static void set(Network net, TensorShards shards, float[] p, MemorySegment all, MemorySegment local) {
        MemorySegment.copy(p, 0, all, ValueLayout.JAVA_FLOAT, 0, p.length);
        shards.extract(all, local);
        net.copyParamsFromHost(local);
    }

    private static double loss(Network net, TensorShards shards, float[] p, ParameterTable.Entry e, double[] d,
                               double h, MemorySegment in, MemorySegment tg, int B, int T, MemorySegment all,
                               MemorySegment local) {
        float[] q = p.clone();
        for (int i = 0; i < d.length; i++) {
            q[(int) (e.offset() + i)] = (float) (p[(int) (e.offset() + i)] + h * d[i]);
        }
        set(net, shards, q, all, local);
        return net.forward(in, tg, B, T);
    }
}
