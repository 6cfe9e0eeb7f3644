package io.accel4j.nn;

import io.accel4j.core.ops.Ops;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

/**
 * Checks a network's backward against finite differences of its forward, for a module of one's own: for every
 * parameter tensor and two random unit directions d, the gradient's derivative {@code Σ g·d} beside the fourth-order
 * central difference of the mean loss, {@code (8(L(h)−L(−h)) − (L(2h)−L(−2h)))/12h} (the losses summed in float64
 * by the kernels). The network's parameters are set to {@code N(0, 0.6²)} (LayerNorm gains shifted by 1), so every
 * nonlinearity is exercised, and its inputs and targets drawn from the seed.
 *
 * <p>With fp32 kernels and h = 0.05 the difference's truncation error is O(h⁴) ≈ 1e-6 and its rounding error about
 * 3e-5 on networks of O(1) losses: an absolute tolerance of 5e-4 plus 1 % of the derivative leaves a 10× margin, and
 * a wrong term in a backward is an O(1) relative error.
 */
public final class GradientCheck {

    /** One comparison: tensor {@code name}, direction {@code direction}, the gradient's and the difference's value. */
    public record Comparison(String name, int direction, double analytic, double difference) {

        /** Whether they agree within {@code abs + rel·|difference|}. */
        public boolean agrees(double abs, double rel) {
            return Math.abs(analytic - difference) <= abs + rel * Math.abs(difference);
        }
    }

    /** The step of the differences. */
    public static final double H = 0.05;
    /** The tolerances the class comment justifies. */
    public static final double ABS = 5e-4, REL = 1e-2;

    private GradientCheck() {}

    /**
     * Runs the check on the network {@code spec} builds on {@code ops}, with B sequences of T positions ({@code spec}'s
     * batch), inputs and targets from {@code seed} (token ids below {@code min(V, vocabulary)} for a token network).
     */
    public static List<Comparison> run(NetworkSpec spec, Ops ops, int B, int T, long seed) {
        Random r = new Random(seed);
        List<Comparison> out = new ArrayList<>();
        try (Network net = spec.build(ops); Arena a = Arena.ofConfined()) {
            long n = net.table().count();
            float[] p = new float[Math.toIntExact(n)];
            for (int i = 0; i < p.length; i++) {
                p[i] = (float) (0.6 * r.nextGaussian());
            }
            for (ParameterTable.Entry e : net.table().entries()) {
                if (e.init() instanceof Init.Constant k && k.value() == 1f) { // gains: around 1, as trained
                    for (long i = 0; i < e.count(); i++) {
                        p[(int) (e.offset() + i)] += 1;
                    }
                }
            }
            int rows = B * T, width = net.inputWidth();
            MemorySegment in = a.allocate((long) rows * width * 4), tg = a.allocate(rows * 4L);
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
            net.copyParamsFromHost(MemorySegment.ofArray(p));
            net.zeroGrad();
            net.forwardBackward(in, tg, B, T, 1f / rows);
            float[] g = new float[p.length];
            net.copyGradsToHost(MemorySegment.ofArray(g));
            for (ParameterTable.Entry e : net.table().entries()) {
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
                        analytic += g[(int) (e.offset() + i)] * d[i];
                    }
                    double l1 = loss(net, p, e, d, H, in, tg, B, T), lm1 = loss(net, p, e, d, -H, in, tg, B, T);
                    double l2 = loss(net, p, e, d, 2 * H, in, tg, B, T), lm2 = loss(net, p, e, d, -2 * H, in, tg, B, T);
                    out.add(new Comparison(e.name(), dir, analytic, (8 * (l1 - lm1) - (l2 - lm2)) / (12 * H)));
                }
            }
        }
        return out;
    }

    private static double loss(Network net, float[] p, ParameterTable.Entry e, double[] d, double h,
                               MemorySegment in, MemorySegment tg, int B, int T) {
        float[] q = p.clone();
        for (int i = 0; i < d.length; i++) {
            q[(int) (e.offset() + i)] = (float) (p[(int) (e.offset() + i)] + h * d[i]);
        }
        net.copyParamsFromHost(MemorySegment.ofArray(q));
        return net.forward(in, tg, B, T);
    }
}
