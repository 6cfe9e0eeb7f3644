package io.accel4j.nn;

import io.accel4j.core.DType;
import io.accel4j.core.fp8.DelayedScaling;
import io.accel4j.core.ops.Ops;
import io.accel4j.train.model.Recompute;
import java.util.List;
import java.util.Objects;

/**
 * What a {@link Network} is made of and for ({@link Network#of} starts one): the module tree, what it takes (token ids
 * or features) and the loss's classes, the largest batch, recompute, the matmuls' precision or FP8, the parameter order
 * and, optionally, where its parameters come from; {@link #build} makes it, {@link #activationBytes} plans it without
 * allocating. A spec builds its tree once.
 */
public final class NetworkSpec {
    final Module body;
    int inWidth = -1;
    int vocabulary = -1;
    int classes = -1;
    int maxB = 1;
    int maxT = 1;
    Recompute recompute = Recompute.NONE;
    DType operands = DType.FP32;
    DType storage = DType.FP32;
    DType gradients = DType.FP32;
    DType parameters = DType.FP32;
    ParameterTable.Order order = ParameterTable.Order.declaration();
    DelayedScaling fp8;
    java.util.function.Function<ParameterTable, ParameterSource> source;
    Units units = Units.NONE;
    io.accel4j.collectives.Communicator tensor;

    NetworkSpec(Module body) {
        this.body = Objects.requireNonNull(body, "body");
    }

    /** Inputs are token ids in [0, V), one per position. */
    public NetworkSpec tokens(int V) {
        this.vocabulary = positive("V", V);
        this.inWidth = 1;
        return this;
    }

    /** Inputs are D fp32 features per position. */
    public NetworkSpec features(int D) {
        this.inWidth = positive("D", D);
        this.vocabulary = -1;
        return this;
    }

    /** The loss is over the first {@code V} of each position's outputs (the rest is padding). */
    public NetworkSpec classes(int V) {
        this.classes = positive("classes", V);
        return this;
    }

    /** Batches of up to {@code maxB} sequences of up to {@code maxT} positions. */
    public NetworkSpec batch(int maxB, int maxT) {
        this.maxB = positive("maxB", maxB);
        this.maxT = positive("maxT", maxT);
        return this;
    }

    /** Which activations backward recomputes (blocks that cannot recompute keep theirs). */
    public NetworkSpec recompute(Recompute recompute) {
        this.recompute = Objects.requireNonNull(recompute, "recompute");
        return this;
    }

    /** The matmuls' operand precision (FP32, BF16, FP16; attention follows where it can). */
    public NetworkSpec matmulOperands(DType operands) {
        this.operands = Objects.requireNonNull(operands, "operands");
        return this;
    }

    /**
     * How the activations saved for backward are stored: FP32 (the default), or BF16/FP16 for the blocks that can
     * ({@link TransformerBlock}: a 16-bit store per block and one block's fp32 working set, {@link HalfStore}).
     */
    public NetworkSpec activationStorage(DType storage) {
        this.storage = HalfStore.checkType(storage);
        return this;
    }

    /**
     * How the gradient buffer is stored: FP32 (the default), or BF16/FP16 for the parameters of every unit whose
     * {@link UnitScope}s each open and close its gradients in one backward (each such unit's backward adds into an
     * fp32 working region of the largest unit's size, expanded from the 16-bit store before and rounded back after;
     * {@link HalfGradients}); the other parameters' gradients stay fp32. The tree must have such a unit (wrap its
     * blocks: {@link UnitScope#perChild}, {@link Gpt2Blocks#body}); the network's own buffers only (not with
     * {@link #parameters}). Its gradients are then {@link Network#halfGradients()}.
     */
    public NetworkSpec gradientStorage(DType gradients) {
        Objects.requireNonNull(gradients, "gradients");
        if (gradients != DType.FP32) {
            HalfGradients.checkType(gradients);
        }
        this.gradients = gradients;
        return this;
    }

    /**
     * How the working weights (what forward and backward compute with) are stored: FP32 (the default), or BF16 — the
     * parameters of every unit whose {@link UnitScope}s each open and close it in one backward in a bf16 store, widened
     * (exactly) into one fp32 working region of the largest unit's size between the brackets its scopes make; the
     * other parameters (a tied embedding's unit) as an fp32 copy of bf16 values ({@link HalfParameters}). There is then
     * no fp32 parameter vector ({@link Network#params()} refuses): the fp32 master weights are the optimizer's
     * ({@code optim.Bf16StoreAdamW}, which writes the store with stochastic rounding), the parameters are set rounded
     * to nearest even ({@link Network#copyParamsFromHost}) and read widened ({@link Network#halfParameters()},
     * {@link Network#copyParamsToHost}). The tree must have such a unit; the network's own buffers only (not with
     * {@link #parameters}). Gradients fp32 or 16-bit ({@link #gradientStorage}) alike.
     */
    public NetworkSpec parameterStorage(DType parameters) {
        Objects.requireNonNull(parameters, "parameters");
        if (parameters != DType.FP32 && parameters != DType.BF16) {
            throw new IllegalArgumentException("the working weights are stored in FP32 or BF16, got " + parameters);
        }
        this.parameters = parameters;
        return this;
    }

    /**
     * Every linear layer's matmuls with FP8 operands under {@code recipe}'s delayed scaling (one
     * {@link io.accel4j.core.fp8.Fp8Scaling} per layer, numbered in build order; heads and attention stay in
     * {@link #matmulOperands}); null: none.
     */
    public NetworkSpec fp8(DelayedScaling recipe) {
        this.fp8 = recipe;
        return this;
    }

    /**
     * The parameters and gradients come from {@code source} (made once the table is known) instead of two flat
     * buffers the network allocates, with {@code units}' brackets around their use (ZeRO's sharded weights); the
     * network's own {@link #params()}, {@link #grads()} and their copies are then not available.
     */
    public NetworkSpec parameters(java.util.function.Function<ParameterTable, ParameterSource> source, Units units) {
        this.source = Objects.requireNonNull(source, "source");
        this.units = Objects.requireNonNull(units, "units");
        return this;
    }

    /**
     * Splits the network's tensor-parallel blocks over {@code group} (this rank's tensor group; null or one rank:
     * not split): each rank then holds its shards of their weights, the blocks all-reduce their partial results over
     * the group, and a vocab-parallel head's loss is vocab-parallel. Blocks that are not tensor-parallel stay whole
     * on every rank.
     */
    public NetworkSpec tensorParallel(io.accel4j.collectives.Communicator group) {
        this.tensor = group;
        return this;
    }

    /** How the parameter tensors are ordered in the flat buffer. */
    public NetworkSpec parameterOrder(ParameterTable.Order order) {
        this.order = Objects.requireNonNull(order, "order");
        return this;
    }

    /**
     * What {@link Network#activationBytes()} of the network this spec builds is, without allocating anything (the
     * tree is built against a backend that takes every attention size: the plan does not depend on it). The
     * spec's module tree is built by this call, so a spec is planned or built once.
     */
    public long activationBytes() {
        Builder b = new Builder(Network.PLANNING, operands, fp8 != null, recompute, maxB, maxT);
        b.storage(storage);
        if (tensor != null && tensor.size() > 1) {
            b.tensor(TensorParallel.planning(tensor.rank(), tensor.size()));
        }
        int out = b.child(body, inWidth, false);
        Loss.of(b, out, classes < 0 ? 1 : classes);
        b.activation("logits", out);
        b.activation("losses", 1);
        b.declareStores();
        long rows = (long) maxB * maxT;
        return b.activations().plan(rows).bytes() + rows * inWidth * Float.BYTES + rows * Integer.BYTES;
    }

    /**
     * What a network of this spec holds on one rank: its parameters (elements), its activation bytes and its
     * gradient bytes (4 a parameter in fp32; {@link #gradientStorage} 16-bit: {@link HalfGradients#bytes(List, long)}).
     */
    public record Plan(long parameters, long activationBytes, long gradientBytes) {
        /** fp32 gradients. */
        public Plan(long parameters, long activationBytes) {
            this(parameters, activationBytes, 4 * parameters);
        }
    }

    /**
     * {@link #activationBytes()} and the parameter count of the network this spec builds on one rank of a tensor
     * group of {@code tensorRanks} (1: not split), without allocating anything or needing the group. Builds the
     * spec's tree, as {@link #activationBytes()} does.
     */
    public Plan plan(int tensorRanks) {
        Builder b = new Builder(Network.PLANNING, operands, fp8 != null, recompute, maxB, maxT);
        b.storage(storage);
        b.tensor(TensorParallel.planning(0, tensorRanks));
        int out = b.child(body, inWidth, false);
        Loss.of(b, out, classes < 0 ? 1 : classes);
        b.activation("logits", out);
        b.activation("losses", 1);
        b.declareStores();
        long rows = (long) maxB * maxT;
        long params = 0;
        for (Builder.ParamDecl d : b.params()) {
            params += d.count();
        }
        long grads = gradients == DType.FP32 ? 4 * params
                : HalfGradientSource.bytes(new ParameterTable(b.params(), order), b.declaredUnits(), b.fullUnits());
        return new Plan(params, b.activations().plan(rows).bytes() + rows * inWidth * Float.BYTES
                + rows * Integer.BYTES, grads);
    }

    /**
     * Builds the tree and allocates the network on {@code ops}' memory.
     *
     * @throws ShapeException when the tree does not fit together (nothing is allocated then)
     */
    public Network build(Ops ops) {
        if (parameters != DType.FP32 && source != null) {
            throw new IllegalArgumentException("parameterStorage(" + parameters + ") stores the network's own "
                    + "parameters: it does not go with parameters(source, units) (ZeRO's sharded weights)");
        }
        if (gradients != DType.FP32 && source != null) {
            throw new IllegalArgumentException("gradientStorage(" + gradients + ") stores the network's own gradients: "
                    + "it does not go with parameters(source, units) (ZeRO's sharded weights)");
        }
        if (inWidth < 0) {
            throw new ShapeException("say what the network takes: tokens(V) or features(D)");
        }
        if (classes < 0) {
            throw new ShapeException("say how many classes the loss is over: classes(V)");
        }
        return new Network(this, ops);
    }

    private static int positive(String what, int v) {
        if (v < 1) {
            throw new ShapeException(what + " must be >= 1, got " + v);
        }
        return v;
    }
}
