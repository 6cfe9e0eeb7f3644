package io.accel4j.nn;

import io.accel4j.core.DType;
import io.accel4j.core.ops.MatmulOps;
import io.accel4j.core.ops.Ops;
import io.accel4j.train.model.Recompute;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What a module sees while it is built ({@link Module#build}): it declares its parameters ({@link #parameter}) and
 * activations ({@link #activation}, {@link #shared}) and builds its children ({@link #child}), each under its own
 * name. Nothing is allocated here; the network lays out and allocates exactly what was declared once the whole tree
 * is built. Also carries the tree-wide properties blocks honour ({@link #recompute()}), and the largest batch
 * ({@link #maxB()}, {@link #maxT()}) for modules whose parameters depend on it (position embeddings).
 */
public final class Builder {

    private static final Logger LOG = LoggerFactory.getLogger(Builder.class);

    /** A declared parameter tensor. */
    record ParamDecl(String name, long[] dims, boolean decays, float lrScale, Init init, long count) {}

    private final List<ParamDecl> params = new ArrayList<>();
    private final Set<String> paramNames = new HashSet<>();
    private final Set<Module> built = Collections.newSetFromMap(new IdentityHashMap<>());
    private final ActivationPlan.Declarations acts = new ActivationPlan.Declarations();
    private final Object paramOwner = new Object();
    private final Ops ops;
    private final DType matmul;
    private final Recompute recompute;
    private final int maxB;
    private final int maxT;
    private final List<String> path = new ArrayList<>();
    private int fp8Slots;
    private final boolean fp8;
    /** Whether the input of the module being built takes a gradient (false for the network's own input). */
    private boolean inputGradient;
    private DType attention;
    private boolean warnedAttention;

    /** The tensor-parallel group the blocks split over ({@link TensorParallel#NONE}: none). */
    private TensorParallel tensor = TensorParallel.NONE;
    /** How each split parameter is split, by full name (the others are whole on every rank). */
    private final java.util.Map<String, Sharding> shardings = new java.util.LinkedHashMap<>();
    /** Whether the tree's output is this rank's vocabulary shard of the logits (a vocab-parallel head). */
    private boolean vocabShardOutput;

    /** Path depth below which {@link #activation} declarations are held for one layer only (-1: none). */
    private int heldFrom = -1;

    /** A region declared held for one layer, and whether it is a statistic ({@link #statistic}). */
    record Held(ActRef ref, boolean statistic) {}

    /** Every held declaration, in order ({@link #heldSince}). */
    private final List<Held> held = new ArrayList<>();

    /** The blocks' requests for 16-bit stores, in build order ({@link #declareStores}). */
    private final HalfStore.Requests storeRequests = new HalfStore.Requests();

    /** How the activations saved for backward are stored (FP32, or BF16/FP16: see {@link #activationStorage()}). */
    private DType storage = DType.FP32;

    Builder(Ops ops, DType matmul, Recompute recompute, int maxB, int maxT) {
        this(ops, matmul, false, recompute, maxB, maxT);
    }

    Builder(Ops ops, DType matmul, boolean fp8, Recompute recompute, int maxB, int maxT) {
        this.fp8 = fp8;
        this.ops = Objects.requireNonNull(ops, "ops");
        this.matmul = MatmulOps.checkOperands(matmul);
        this.recompute = Objects.requireNonNull(recompute, "recompute");
        this.maxB = maxB;
        this.maxT = maxT;
    }

    void storage(DType storage) {
        this.storage = HalfStore.checkType(storage);
    }

    /**
     * How the activations a block saves for backward are stored: FP32 (each block's own fp32 regions), or BF16/FP16
     * (each block's forward works in regions held for one layer and then rounds what its backward reads into a
     * 16-bit store of its own, expanded again before its backward: {@link HalfStore}). Blocks that cannot do this
     * keep fp32.
     */
    public DType activationStorage() {
        return storage;
    }

    /**
     * Asks for a 16-bit store ({@link #activationStorage()}) of the held regions {@code held} of the module being
     * built, handed to {@code sink} once the tree is built ({@link #declareStores}) — or never, for the last module to
     * ask: its forward is the last to write the held regions, so its backward, which comes first, finds them in
     * place.
     */
    void requestStore(List<Held> held, java.util.function.Consumer<HalfStore> sink) {
        storeRequests.add(qualified(""), held, sink);
    }

    /** Declares the stores of every request but the last (see {@link #requestStore}); once, after the tree's build. */
    void declareStores() {
        storeRequests.declare(acts, storage);
    }

    /**
     * For a pipeline stage: declares a store for every request, the last one's too when {@code topStored}
     * ({@link HalfStore.Requests#declareEvery}; else as {@link #declareStores}), and says whether there were any
     * requests: the stage's slots then share the regions held for one layer ({@link SlotLayout}). Once, after the
     * tree's build, instead of {@link #declareStores}.
     */
    boolean declareStageStores(boolean topStored) {
        boolean any = storeRequests.any();
        if (topStored) {
            storeRequests.declareEvery(acts, storage);
        } else {
            storeRequests.declare(acts, storage);
        }
        return any;
    }

    /** The start of the key of every region held for one layer ({@link #childHeldForOneLayer}, the blocks'). */
    static final String HELD_PREFIX = "held-for-one-layer.";

    /** How many held declarations were made so far (a mark for {@link #heldSince}). */
    int heldCount() {
        return held.size();
    }

    /** The held declarations made since {@code mark} ({@link #heldCount()}). */
    List<Held> heldSince(int mark) {
        return List.copyOf(held.subList(mark, held.size()));
    }

    void tensor(TensorParallel tp) {
        this.tensor = Objects.requireNonNull(tp, "tp");
    }

    /**
     * The tensor-parallel group the network is split over ({@link TensorParallel#NONE} for none): tensor-parallel
     * blocks declare their shards of it; the others are whole on every rank.
     */
    public TensorParallel tensor() {
        return tensor;
    }

    /**
     * Declares a tensor-parallel parameter: this rank's shard of a whole tensor, split as {@code sharding} says
     * (declared with the whole tensor's {@link Init}, which the network draws whole and splits).
     */
    public ParamRef shardedParameter(String name, boolean decays, Init init, Sharding sharding, long... dims) {
        ParamRef ref = parameter(name, decays, init, dims);
        if (!sharding.replicated() && tensor.size() > 1) {
            shardings.put(ref.name(), sharding);
        }
        return ref;
    }

    /** Says that the tree's output is this rank's vocabulary shard of the logits (the loss is then vocab-parallel). */
    public void vocabShardOutput() {
        this.vocabShardOutput = true;
    }

    boolean isVocabShardOutput() {
        return vocabShardOutput;
    }

    java.util.Map<String, Sharding> shardings() {
        return shardings;
    }

    /** Which activations backward recomputes (a property of the whole tree, honoured by the blocks that can). */
    public Recompute recompute() {
        return recompute;
    }

    /** Whether the module being built gets a {@code din} in backward (see {@link #child(Module, int, boolean)}). */
    public boolean inputGradient() {
        return inputGradient;
    }

    /** Whether the network's linear layers run with FP8 operands (they then have no fused GELU forms). */
    public boolean fp8() {
        return fp8;
    }

    /** The backend the network will run on (for blocks that must ask it what it can take). */
    public Ops ops() {
        return ops;
    }

    /** The matmuls' operand precision (FP32, BF16 or FP16). */
    public DType matmulOperands() {
        return matmul;
    }

    /**
     * Attention's operand precision for {@code C} channels in {@code NH} heads: BF16 when the matmuls take BF16 and
     * the backend's attention takes it at this head size, else FP32 (with a warning when BF16 was wanted).
     *
     * @throws ShapeException when the backend cannot run this attention even in fp32
     */
    public DType attentionOperands(int C, int NH) {
        if (matmul == DType.BF16) {
            try {
                ops.checkAttention(DType.BF16, C, NH);
                attention = attention == null ? DType.BF16 : attention;
                return DType.BF16;
            } catch (IllegalArgumentException | UnsupportedOperationException e) {
                if (!warnedAttention) { // once per network, not once per block
                    warnedAttention = true;
                    LOG.warn("bf16 matmul operands, but attention keeps fp32 operands: {}", e.getMessage());
                }
            }
        }
        try {
            ops.checkAttention(DType.FP32, C, NH);
        } catch (IllegalArgumentException | UnsupportedOperationException e) {
            throw new ShapeException("module '" + qualified("") + "': " + e.getMessage());
        }
        attention = DType.FP32;
        return DType.FP32;
    }

    /** The attention precision the tree's attention modules took (FP32 if any took it), or null without attention. */
    DType attentionTaken() {
        return attention;
    }

    /**
     * Builds {@code child} as {@link #child} does, but every activation it (and its children) declares is held for
     * one layer only: the same memory for every module built this way, keyed by its path below {@code child}, which
     * backward refills by recomputation ({@link Recompute#LAYER}).
     */
    public int childHeldForOneLayer(Module child, int inWidth, boolean inputGradient) {
        if (heldFrom >= 0) {
            return child(child, inWidth, inputGradient);
        }
        heldFrom = path.size(); // keys start with the child's own name
        try {
            return child(child, inWidth, inputGradient);
        } finally {
            heldFrom = -1;
        }
    }

    /**
     * Numbers a linear layer that runs with FP8 operands when the network has an FP8 state ({@link Pass#fp8}): layers
     * are numbered in the order they are built, which is the order of that state's histories.
     */
    public int fp8Slot() {
        return fp8Slots++;
    }

    int fp8Slots() {
        return fp8Slots;
    }

    /** The most sequences per batch. */
    public int maxB() {
        return maxB;
    }

    /** The longest sequence (1 for a model of independent rows). */
    public int maxT() {
        return maxT;
    }

    /**
     * Builds {@code child} under its name (parameters {@code <path>.<child name>.…}) and returns its output width.
     *
     * @throws ShapeException when {@code child} was already built in this tree (use one module in one place; share a
     *                        parameter through its {@link ParamRef} instead)
     */
    public int child(Module child, int inWidth) {
        return child(child, inWidth, inputGradient);
    }

    /**
     * {@link #child(Module, int)}, saying whether the child's input takes a gradient: false for the network's input
     * (token ids, features), and for a child whose input is such an input; a module whose input takes none may be
     * handed {@code din == null} in backward, and only then needs somewhere to put the gradient it cannot skip.
     */
    public int child(Module child, int inWidth, boolean inputGradient) {
        Objects.requireNonNull(child, "child");
        if (!built.add(child)) {
            throw new ShapeException("module '" + qualified(child.name()) + "' is used twice in the network: a module "
                    + "has one place in the tree (to share weights, pass the other module's ParamRef)");
        }
        path.add(child.name());
        boolean outer = this.inputGradient;
        this.inputGradient = inputGradient;
        try {
            return child.build(this, inWidth);
        } finally {
            path.remove(path.size() - 1);
            this.inputGradient = outer;
        }
    }

    /**
     * Declares a parameter tensor {@code <path>.<name>} of shape {@code dims}, weight-decayed when {@code decays},
     * initialised by {@code init}.
     *
     * @throws ShapeException when the name is taken or a dimension is not positive
     */
    public ParamRef parameter(String name, boolean decays, Init init, long... dims) {
        return parameter(name, decays, 1f, init, dims);
    }

    /** {@link #parameter(String, boolean, Init, long...)} with a learning-rate multiplier for its group. */
    public ParamRef parameter(String name, boolean decays, float lrScale, Init init, long... dims) {
        String full = qualified(name);
        long count = 1;
        for (long d : dims) {
            if (d < 1) {
                throw new ShapeException("parameter '" + full + "' has shape " + java.util.Arrays.toString(dims)
                        + ": every dimension must be >= 1");
            }
            count = Math.multiplyExact(count, d);
        }
        if (!(lrScale >= 0) || !Float.isFinite(lrScale)) {
            throw new ShapeException("parameter '" + full + "' has learning-rate multiplier " + lrScale
                    + ": it must be finite and >= 0");
        }
        if (!paramNames.add(full)) {
            throw new ShapeException("parameter '" + full + "' is registered twice");
        }
        params.add(new ParamDecl(full, dims.clone(), decays, lrScale, Objects.requireNonNull(init, "init"), count));
        declaredInUnit.add(unit);
        return new ParamRef(params.size() - 1, full, paramOwner);
    }

    /** Declares an activation {@code <path>.<name>} of {@code perRow} floats per position, this module's own. */
    public ActRef activation(String name, long perRow) {
        return declare(name, perRow, false);
    }

    /**
     * {@link #activation}, for a few values per position that backward divides by or exponentiates (a LayerNorm's
     * mean and 1/σ, attention's log-sum-exp): under 16-bit {@link #activationStorage()} they are saved in fp32.
     */
    public ActRef statistic(String name, long perRow) {
        return declare(name, perRow, true);
    }

    private ActRef declare(String name, long perRow, boolean statistic) {
        if (heldFrom >= 0) {
            StringBuilder key = new StringBuilder("held-for-one-layer");
            for (String p : path.subList(heldFrom, path.size())) {
                key.append('.').append(p);
            }
            ActRef ref = acts.shared(key.append('.').append(name).toString(), checkPerRow(name, perRow));
            held.add(new Held(ref, statistic));
            return ref;
        }
        return acts.own(qualified(name), checkPerRow(name, perRow));
    }

    /**
     * Declares an activation under a tree-wide {@code key}: every declaration of the key is the same memory (as wide
     * as the widest). For gradient scratch that one module at a time uses, and for what a recomputing block holds for
     * one layer only.
     */
    public ActRef shared(String key, long perRow) {
        return acts.shared(key, checkPerRow(key, perRow));
    }

    /**
     * Checks that a handle declared elsewhere in this tree is this tree's (a tied head takes the embedding's).
     *
     * @throws ShapeException for a handle of another network
     */
    public ParamRef own(ParamRef ref) {
        if (ref.owner() != paramOwner) {
            throw new ShapeException("module '" + qualified("") + "' was given parameter '" + ref.name()
                    + "' of another network");
        }
        int declared = ref.index() < declaredInUnit.size() ? declaredInUnit.get(ref.index()) : unit;
        if (unit != declared) {
            throw new ShapeException("module '" + qualified("") + "' (unit " + unit + ") uses parameter '"
                    + ref.name() + "' of unit " + declared + ": a unit's parameters are gathered only while it runs "
                    + "(ZeRO-3 over the top-level Sequential's children), so a parameter cannot be shared across "
                    + "them: untie it, or use ZeRO-2");
        }
        return ref;
    }

    /**
     * Builds {@code child} as {@link #child(Module, int)} in unit {@code u} ({@link UnitScope}): a parameter it uses
     * through {@link #own} must have been declared in the same unit.
     */
    int childInUnit(Module child, int inWidth, int u) {
        int outer = unit;
        unit = u;
        try {
            return child(child, inWidth);
        } finally {
            unit = outer;
        }
    }

    /** The shape of a parameter declared so far. */
    public long[] shape(ParamRef ref) {
        return params.get(own(ref).index()).dims().clone();
    }

    /** The current module's path, e.g. {@code h.3.attn}, with {@code name} appended when not empty. */
    public String qualified(String name) {
        StringBuilder s = new StringBuilder();
        for (String p : path) {
            if (!p.isEmpty()) {
                s.append(s.isEmpty() ? "" : ".").append(p);
            }
        }
        if (!name.isEmpty()) {
            s.append(s.isEmpty() ? "" : ".").append(name);
        }
        return s.toString();
    }

    /** Throws unless {@code inWidth} is {@code expected}, naming the current module and both widths. */
    public void expectWidth(int inWidth, long expected) {
        if (inWidth != expected) {
            throw new ShapeException("module '" + qualified("") + "' takes " + expected + " values per position, "
                    + "its input has " + inWidth);
        }
    }

    private long checkPerRow(String name, long perRow) {
        if (perRow < 1) {
            throw new ShapeException("activation '" + qualified(name) + "' has " + perRow + " values per position");
        }
        return perRow;
    }

    /** The unit each parameter was declared in (−1 outside any {@link UnitScope}). */
    private final List<Integer> declaredInUnit = new ArrayList<>();
    /** Per unit, whether every {@link UnitScope} of it opens and closes its gradients in one backward (FULL). */
    private final java.util.Map<Integer, Boolean> fullUnits = new java.util.LinkedHashMap<>();

    /** Records a {@link UnitScope} of unit {@code u} whose backward brackets {@code kind}. */
    void unitScope(int u, UnitScope.Backward kind) {
        fullUnits.merge(u, kind == UnitScope.Backward.FULL, Boolean::logicalAnd);
    }

    /** The unit each declared parameter belongs to, in declaration order (−1: none). */
    List<Integer> declaredUnits() {
        return java.util.Collections.unmodifiableList(declaredInUnit);
    }

    /** The units whose every scope opens and closes their gradients in one backward. */
    java.util.Set<Integer> fullUnits() {
        java.util.Set<Integer> out = new java.util.LinkedHashSet<>();
        fullUnits.forEach((u, full) -> {
            if (full) {
                out.add(u);
            }
        });
        return out;
    }
    /** The unit being built, −1 outside any. */
    private int unit = -1;

    List<ParamDecl> params() {
        return params;
    }

    Object paramOwner() {
        return paramOwner;
    }

    ActivationPlan.Declarations activations() {
        return acts;
    }
}
