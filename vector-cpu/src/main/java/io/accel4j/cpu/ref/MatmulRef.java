package io.accel4j.cpu.ref;

import io.accel4j.core.DType;
import java.util.Arrays;

/**
 * The linear layer in plain float64 loops: the truth {@link io.accel4j.cpu.ops.Matmul} is checked against. The
 * overloads with {@code operands} round each operand of the products to that precision first (the scalar casts of
 * {@link DType}: nearest-even, fp16 overflowing to ±inf) and then compute in float64, as
 * {@link io.accel4j.core.ops.MatmulOps} specifies; the bias and dbias see the values unrounded.
 */
public final class MatmulRef {

    private MatmulRef() {}

    /** {@code out (N,OC) = inp (N,C)·weightᵀ + bias}, weight stored (OC,C); bias may be null. */
    public static void forward(double[] out, double[] inp, double[] weight, double[] bias, int N, int C, int OC) {
        for (int n = 0; n < N; n++) {
            for (int o = 0; o < OC; o++) {
                double s = bias == null ? 0 : bias[o];
                for (int c = 0; c < C; c++) {
                    s += inp[n * C + c] * weight[o * C + c];
                }
                out[n * OC + o] = s;
            }
        }
    }

    /** {@code dinp += dout·weight}, {@code dweight += doutᵀ·inp}, {@code dbias += Σ_rows dout} (dbias may be null). */
    public static void backward(double[] dinp, double[] dweight, double[] dbias, double[] dout,
                                double[] inp, double[] weight, int N, int C, int OC) {
        for (int n = 0; n < N; n++) {
            for (int o = 0; o < OC; o++) {
                double d = dout[n * OC + o];
                for (int c = 0; c < C; c++) {
                    dinp[n * C + c] += d * weight[o * C + c];
                    dweight[o * C + c] += d * inp[n * C + c];
                }
                if (dbias != null) {
                    dbias[o] += d;
                }
            }
        }
    }

    /** {@link #forward} with inp and weight rounded to {@code operands} (FP32: unchanged). */
    public static void forward(double[] out, double[] inp, double[] weight, double[] bias, int N, int C, int OC,
                               DType operands) {
        forward(out, round(inp, operands), round(weight, operands), bias, N, C, OC);
    }

    /** {@link #backward} with dout, inp and weight rounded to {@code operands} in the products; dbias sums dout as is. */
    public static void backward(double[] dinp, double[] dweight, double[] dbias, double[] dout,
                                double[] inp, double[] weight, int N, int C, int OC, DType operands) {
        backward(dinp, dweight, null, round(dout, operands), round(inp, operands), round(weight, operands), N, C, OC);
        if (dbias != null) {
            for (int n = 0; n < N; n++) {
                for (int o = 0; o < OC; o++) {
                    dbias[o] += dout[n * OC + o];
                }
            }
        }
    }

    /**
     * {@code pre = inp·weightᵀ + bias} and {@code out = gelu(pre)} ({@link io.accel4j.core.ops.MatmulOps#
     * matmulForwardGelu}): {@link #forward} with {@code operands}, then {@link GeluRef#forward}, all in float64.
     */
    public static void forwardGelu(double[] out, double[] pre, double[] inp, double[] weight, double[] bias,
                                   int N, int C, int OC, DType operands) {
        forward(pre, inp, weight, bias, N, C, OC, operands);
        GeluRef.forward(out, pre, N * OC);
    }

    /**
     * {@link io.accel4j.core.ops.MatmulOps#matmulBackwardGelu}: {@code dweight += doutᵀ·inp}, {@code dbias += Σ dout}
     * (may be null), {@code dpre = gelu'(pre)·(dout·weight)} (written), {@code dpreBias += Σ_rows dpre} (may be
     * null); {@link #backward} with {@code operands} and {@link GeluRef#backward}, all in float64.
     */
    public static void backwardGelu(double[] dpre, double[] dpreBias, double[] dweight, double[] dbias,
                                    double[] dout, double[] inp, double[] pre, double[] weight, int N, int C, int OC,
                                    DType operands) {
        double[] g = new double[N * C];
        backward(g, dweight, dbias, dout, inp, weight, N, C, OC, operands);
        Arrays.fill(dpre, 0, N * C, 0);
        GeluRef.backward(dpre, pre, g, N * C);
        if (dpreBias != null) {
            for (int n = 0; n < N; n++) {
                for (int c = 0; c < C; c++) {
                    dpreBias[c] += dpre[n * C + c];
                }
            }
        }
    }

    /**
     * What an FP8 operand cast with {@code scale} stands for in a product ({@link io.accel4j.core.ops.MatmulOps}' FP8
     * methods): each value rounded to fp32, multiplied by {@code scale} in fp32, encoded to {@code fp8Type}
     * (nearest-even, saturating) and decoded, times the dequantisation factor {@code 1f/scale}.
     */
    public static double[] fp8(double[] x, DType fp8Type, float scale) {
        double inv = 1f / scale;
        double[] r = new double[x.length];
        for (int i = 0; i < x.length; i++) {
            r[i] = fp8Type.decode(fp8Type.encode((float) x[i] * scale, true)) * inv;
        }
        return r;
    }

    /** Each value rounded to fp32, then to {@code t} (nearest-even), and back: what a {@code t} product sees. */
    public static double[] round(double[] x, DType t) {
        double[] r = new double[x.length];
        for (int i = 0; i < x.length; i++) {
            r[i] = t.decode(t.encode((float) x[i], false));
        }
        return r;
    }
}
