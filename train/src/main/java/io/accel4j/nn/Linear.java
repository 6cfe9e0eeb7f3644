package io.accel4j.nn;

import io.accel4j.core.fp8.Fp8Scaling;
import io.accel4j.core.ops.Ops;
import java.lang.foreign.MemorySegment;

/**
 * A linear layer {@code out (rows, OC) = in (rows, C) · weightᵀ + bias}, the weight stored {@code (OC, C)} as in PyTorch
 * and llm.c; the bias optional. With {@link #gelu} the output is {@code gelu(in·weightᵀ + bias)} (tanh GELU) in one
 * GEMM epilogue ({@link Ops#matmulForwardGelu}), keeping the pre-activation for backward. Products in the network's
 * matmul precision ({@link Pass#matmulOperands()}), or with FP8 operands under the network's FP8 state (the GELU then
 * applied apart, as FP8 has no fused form).
 *
 * <p>Parameters: {@code weight (OC, C)}, weight-decayed; {@code bias (OC)}, not.
 */
public final class Linear implements Module {

    private final String name;
    private final int C;
    private final int OC;
    private final boolean hasBias;
    private final boolean gelu;
    private ParamRef weight;
    private ParamRef bias;
    private ActRef pre;
    private ActRef dpre;
    private ActRef discard;
    private int fp8Slot;
    /** A parent fuses this GELU layer's backward into the next layer's (unless FP8): no dpre scratch of its own. */
    private boolean fusedByParent;

    private Linear(String name, int C, int OC, boolean hasBias, boolean gelu) {
        if (C < 1 || OC < 1) {
            throw new ShapeException("linear '" + name + "' needs in and out features >= 1, got " + C + " -> " + OC);
        }
        this.name = name;
        this.C = C;
        this.OC = OC;
        this.hasBias = hasBias;
        this.gelu = gelu;
    }

    /** {@code in → out} features with a bias. */
    public static Linear of(String name, int in, int out) {
        return new Linear(name, in, out, true, false);
    }

    /** {@code in → out} features without a bias. */
    public static Linear noBias(String name, int in, int out) {
        return new Linear(name, in, out, false, false);
    }

    /** {@code gelu(in·weightᵀ + bias)}, the GELU fused into the GEMM's epilogue. */
    public static Linear gelu(String name, int in, int out) {
        return new Linear(name, in, out, true, true);
    }

    /** Marks a GELU layer whose parent runs its backward fused ({@link Mlp}): it keeps no scratch for it. */
    Linear fusedByParent() {
        this.fusedByParent = true;
        return this;
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public int build(Builder b, int inWidth) {
        b.expectWidth(inWidth, C);
        weight = b.parameter("weight", true, Init.fanIn(C), OC, C);
        bias = hasBias ? b.parameter("bias", false, Init.fanIn(C), OC) : null;
        if (gelu) {
            pre = b.activation("pre", OC);
            dpre = fusedByParent && !b.fp8() ? null : b.shared("linear.dpre", OC);
        }
        discard = b.inputGradient() ? null : b.shared("linear.discarded-dinp", C);
        fp8Slot = b.fp8Slot();
        return OC;
    }

    /** The weight {@code (OC, C)}. */
    public ParamRef weight() {
        return weight;
    }

    /** The bias {@code (OC)}, or null. */
    public ParamRef bias() {
        return bias;
    }

    /** Whether this layer's matmuls take FP8 operands in this pass. */
    boolean fp8(Pass p) {
        return p.fp8(fp8Slot) != null;
    }

    /** The pre-activation {@code (rows, OC)} a GELU layer keeps, or null. */
    ActRef pre() {
        return pre;
    }

    /** Input features. */
    public int in() {
        return C;
    }

    /** Output features. */
    public int out() {
        return OC;
    }

    @Override
    public void forward(Pass p, MemorySegment in, MemorySegment out) {
        Ops ops = p.ops();
        MemorySegment b = bias == null ? null : p.param(bias);
        Fp8Scaling fp8 = p.fp8(fp8Slot);
        if (fp8 != null) {
            MemorySegment y = gelu ? p.act(pre) : out;
            ops.matmulForward(y, in, p.param(weight), b, p.rows(), C, OC, fp8);
            if (gelu) {
                ops.geluForward(out, y, (long) p.rows() * OC);
            }
        } else if (gelu) {
            ops.matmulForwardGelu(out, p.act(pre), in, p.param(weight), b, p.rows(), C, OC, p.matmulOperands());
        } else {
            ops.matmulForward(out, in, p.param(weight), b, p.rows(), C, OC, p.matmulOperands());
        }
    }

    /** With GELU: {@code dpre = gelu'(pre)·dout} into scratch, then the linear backward of dpre. */
    @Override
    public void backward(Pass p, MemorySegment in, MemorySegment out, MemorySegment dout, MemorySegment din) {
        MemorySegment g = dout;
        if (gelu) {
            g = p.zeroed(dpre);
            p.ops().geluBackward(g, p.act(pre), dout, (long) p.rows() * OC);
        }
        backwardOf(p, in, g, din, bias == null ? null : p.grad(bias));
    }

    /**
     * The linear part's backward of a given {@code dpre} (the GELU, if any, already undone): {@code din += dpre·W},
     * {@code dW += dpreᵀ·in}, {@code dbias += Σ dpre} when {@code dbias} is not null. For a caller that fused the
     * GELU's backward into the next layer's ({@link Mlp}).
     */
    void backwardOf(Pass p, MemorySegment in, MemorySegment dpre, MemorySegment din, MemorySegment dbias) {
        MemorySegment dinp = din != null ? din : p.act(discard); // the kernel always writes a dinp
        Fp8Scaling fp8 = p.fp8(fp8Slot);
        if (fp8 != null) {
            p.ops().matmulBackward(dinp, p.grad(weight), dbias, dpre, in, p.param(weight), p.rows(), C, OC, fp8);
        } else {
            p.ops().matmulBackward(dinp, p.grad(weight), dbias, dpre, in, p.param(weight), p.rows(), C, OC,
                    p.matmulOperands());
        }
    }
}
