package io.accel4j.train.model;

import io.accel4j.cpu.ref.AttentionRef;
import io.accel4j.cpu.ref.ClassifierRef;
import io.accel4j.cpu.ref.EncoderRef;
import io.accel4j.cpu.ref.GeluRef;
import io.accel4j.cpu.ref.LayerNormRef;
import io.accel4j.cpu.ref.MatmulRef;
import io.accel4j.cpu.ref.ResidualRef;
import io.accel4j.train.model.ParameterLayout.Param;
import io.accel4j.train.model.ParameterLayout.Span;

/**
 * An independent float64 GPT-2 for tests: llm.c's {@code train_gpt2.c} written out with the plain-Java references
 * ({@code io.accel4j.cpu.ref}) on double[] arrays, one array per tensor and layer, and the residual adds'
 * backward called as such. It shares nothing with {@link Gpt2} but the parameter layout.
 */
final class Gpt2Ref {

    /** The loss and, when asked for, the gradient of the mean loss with respect to every parameter. */
    record Result(double loss, double[] grads, double[] logits) {}

    private final GptConfig c;
    private final ParameterLayout layout;

    Gpt2Ref(GptConfig c) {
        this.c = c;
        this.layout = new ParameterLayout(c);
    }

    /** The mean loss of (inputs → targets) under {@code params} (flat, {@link ParameterLayout} order). */
    double loss(double[] params, int[] inputs, int[] targets, int B, int T) {
        return run(params, inputs, targets, B, T, false).loss();
    }

    /** The mean loss, its gradient (flat, like params) and the logits (B,T,Vp). */
    Result lossAndGrads(double[] params, int[] inputs, int[] targets, int B, int T) {
        return run(params, inputs, targets, B, T, true);
    }

    private Result run(double[] flat, int[] inp, int[] tgt, int B, int T, boolean backward) {
        int C = c.C(), L = c.L(), NH = c.NH(), Vp = c.Vp(), V = c.V(), BT = B * T;
        double[][][] w = split(flat);
        double[] wte = w[Param.WTE.ordinal()][0];
        double[] encoded = new double[BT * C];
        EncoderRef.forward(encoded, inp, wte, w[Param.WPE.ordinal()][0], B, T, C);
        double[][] ln1 = new double[L][BT * C], ln1m = new double[L][BT], ln1r = new double[L][BT];
        double[][] qkv = new double[L][BT * 3 * C], atty = new double[L][BT * C], lse = new double[L][B * NH * T];
        double[][] attproj = new double[L][BT * C], res2 = new double[L][BT * C];
        double[][] ln2 = new double[L][BT * C], ln2m = new double[L][BT], ln2r = new double[L][BT];
        double[][] fch = new double[L][BT * 4 * C], fchg = new double[L][BT * 4 * C];
        double[][] fcproj = new double[L][BT * C], res3 = new double[L][BT * C];
        for (int l = 0; l < L; l++) {
            double[] res = l == 0 ? encoded : res3[l - 1];
            LayerNormRef.forward(ln1[l], ln1m[l], ln1r[l], res, w(w, Param.LN1W, l), w(w, Param.LN1B, l), BT, C);
            MatmulRef.forward(qkv[l], ln1[l], w(w, Param.QKVW, l), w(w, Param.QKVB, l), BT, C, 3 * C);
            AttentionRef.forward(atty[l], lse[l], qkv[l], B, T, C, NH);
            MatmulRef.forward(attproj[l], atty[l], w(w, Param.ATTPROJW, l), w(w, Param.ATTPROJB, l), BT, C, C);
            ResidualRef.forward(res2[l], res, attproj[l], BT * C);
            LayerNormRef.forward(ln2[l], ln2m[l], ln2r[l], res2[l], w(w, Param.LN2W, l), w(w, Param.LN2B, l), BT,
                    C);
            MatmulRef.forward(fch[l], ln2[l], w(w, Param.FCW, l), w(w, Param.FCB, l), BT, C, 4 * C);
            GeluRef.forward(fchg[l], fch[l], BT * 4 * C);
            MatmulRef.forward(fcproj[l], fchg[l], w(w, Param.FCPROJW, l), w(w, Param.FCPROJB, l), BT, 4 * C, C);
            ResidualRef.forward(res3[l], res2[l], fcproj[l], BT * C);
        }
        double[] lnf = new double[BT * C], lnfm = new double[BT], lnfr = new double[BT];
        double[] lnfw = w(w, Param.LNFW, 0), lnfb = w(w, Param.LNFB, 0);
        LayerNormRef.forward(lnf, lnfm, lnfr, res3[L - 1], lnfw, lnfb, BT, C);
        double[] logits = new double[BT * Vp];
        MatmulRef.forward(logits, lnf, wte, null, BT, C, Vp);
        double[] losses = new double[BT];
        double[] logitsCopy = logits.clone();
        if (!backward) {
            return new Result(ClassifierRef.forward(losses, logits, tgt, BT, V, Vp), null, logitsCopy);
        }
        double loss = ClassifierRef.forwardBackward(logits, losses, tgt, BT, V, Vp, 1.0 / BT);
        double[] dlogits = logits;
        double[][][] g = zerosLike(w);
        double[] dlnf = new double[BT * C];
        MatmulRef.backward(dlnf, g[Param.WTE.ordinal()][0], null, dlogits, lnf, wte, BT, C, Vp);
        double[] dres3 = new double[BT * C];
        LayerNormRef.backward(dres3, w(g, Param.LNFW, 0), w(g, Param.LNFB, 0), dlnf, res3[L - 1], lnfw, lnfm, lnfr,
                BT, C);
        for (int l = L - 1; l >= 0; l--) {
            double[] res = l == 0 ? encoded : res3[l - 1];
            double[] dres = new double[BT * C], dres2 = new double[BT * C], dfcproj = new double[BT * C];
            ResidualRef.backward(dres2, dfcproj, dres3, BT * C);
            double[] dfchg = new double[BT * 4 * C], dfch = new double[BT * 4 * C], dln2 = new double[BT * C];
            MatmulRef.backward(dfchg, w(g, Param.FCPROJW, l), w(g, Param.FCPROJB, l), dfcproj, fchg[l],
                    w(w, Param.FCPROJW, l), BT, 4 * C, C);
            GeluRef.backward(dfch, fch[l], dfchg, BT * 4 * C);
            MatmulRef.backward(dln2, w(g, Param.FCW, l), w(g, Param.FCB, l), dfch, ln2[l], w(w, Param.FCW, l), BT, C,
                    4 * C);
            LayerNormRef.backward(dres2, w(g, Param.LN2W, l), w(g, Param.LN2B, l), dln2, res2[l], w(w, Param.LN2W, l),
                    ln2m[l], ln2r[l], BT, C);
            double[] dattproj = new double[BT * C], datty = new double[BT * C], dqkv = new double[BT * 3 * C];
            double[] dln1 = new double[BT * C];
            ResidualRef.backward(dres, dattproj, dres2, BT * C);
            MatmulRef.backward(datty, w(g, Param.ATTPROJW, l), w(g, Param.ATTPROJB, l), dattproj, atty[l],
                    w(w, Param.ATTPROJW, l), BT, C, C);
            AttentionRef.backward(dqkv, datty, qkv[l], atty[l], lse[l], B, T, C, NH);
            MatmulRef.backward(dln1, w(g, Param.QKVW, l), w(g, Param.QKVB, l), dqkv, ln1[l], w(w, Param.QKVW, l), BT,
                    C, 3 * C);
            LayerNormRef.backward(dres, w(g, Param.LN1W, l), w(g, Param.LN1B, l), dln1, res, w(w, Param.LN1W, l),
                    ln1m[l], ln1r[l], BT, C);
            dres3 = dres;
        }
        EncoderRef.backward(g[Param.WTE.ordinal()][0], g[Param.WPE.ordinal()][0], dres3, inp, B, T, C);
        return new Result(loss, join(g), logitsCopy);
    }

    private static double[] w(double[][][] w, Param p, int l) {
        return w[p.ordinal()][l];
    }

    /** The flat vector as one array per tensor and layer ({@code [param][layer]}; global tensors have one). */
    double[][][] split(double[] flat) {
        double[][][] out = new double[Param.values().length][][];
        for (Span t : layout.tensors()) {
            int parts = perLayer(t.param()) ? c.L() : 1;
            int n = (int) (t.count() / parts);
            out[t.param().ordinal()] = new double[parts][];
            for (int l = 0; l < parts; l++) {
                double[] a = new double[n];
                System.arraycopy(flat, (int) (t.offset() + (long) l * n), a, 0, n);
                out[t.param().ordinal()][l] = a;
            }
        }
        return out;
    }

    private double[] join(double[][][] parts) {
        double[] flat = new double[(int) layout.count()];
        for (Span t : layout.tensors()) {
            double[][] ps = parts[t.param().ordinal()];
            for (int l = 0; l < ps.length; l++) {
                System.arraycopy(ps[l], 0, flat, (int) (t.offset() + (long) l * ps[l].length), ps[l].length);
            }
        }
        return flat;
    }

    private static double[][][] zerosLike(double[][][] w) {
        double[][][] z = new double[w.length][][];
        for (int i = 0; i < w.length; i++) {
            z[i] = new double[w[i].length][];
            for (int l = 0; l < w[i].length; l++) {
                z[i][l] = new double[w[i][l].length];
            }
        }
        return z;
    }

    static boolean perLayer(Param p) {
        return p != Param.WTE && p != Param.WPE && p != Param.LNFW && p != Param.LNFB;
    }
}
