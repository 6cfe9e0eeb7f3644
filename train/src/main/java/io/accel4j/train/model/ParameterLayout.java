package io.accel4j.train.model;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * Where each of GPT-2's 16 parameter tensors lives in one flat fp32 buffer: llm.c's order and shapes
 * ({@code fill_in_parameter_sizes}), which is also the order of the tensors in a checkpoint file. Each tensor is
 * row-major; the per-layer tensors are stacked with the layer as the outermost dimension.
 *
 * <pre>
 *  wte  (Vp, C)      wpe (maxT, C)
 *  ln1w (L, C)       ln1b (L, C)
 *  qkvw (L, 3C, C)   qkvb (L, 3C)
 *  attprojw (L, C, C)   attprojb (L, C)
 *  ln2w (L, C)       ln2b (L, C)
 *  fcw (L, 4C, C)    fcb (L, 4C)
 *  fcprojw (L, C, 4C)   fcprojb (L, C)
 *  lnfw (C)          lnfb (C)
 * </pre>
 *
 * Counts and offsets are elements (not bytes) and {@code long}: GPT-2 small has 124,475,904 of them.
 *
 * <p>A layer's weights are therefore not contiguous: they are twelve slices, one per per-layer tensor. {@link #units()}
 * groups the tensors by when the model uses them — the embeddings, each layer, the final LayerNorm — each unit a list
 * of contiguous {@link Segment}s (what ZeRO-3 gathers before a unit's use, {@code io.accel4j.train.parallel.UnitShards}).
 */
public final class ParameterLayout {

    /** The 16 tensors, in file order. {@link #fileName()} is llm.c's (and PyTorch's short) name. */
    public enum Param {
        WTE, WPE, LN1W, LN1B, QKVW, QKVB, ATTPROJW, ATTPROJB, LN2W, LN2B, FCW, FCB, FCPROJW, FCPROJB, LNFW, LNFB;

        /** The lower-case name llm.c uses: {@code wte}, {@code qkvw}, … */
        public String fileName() {
            return name().toLowerCase(Locale.ROOT);
        }
    }

    /**
     * Where one tensor lies in the flat buffer.
     *
     * @param param  which
     * @param offset first element in the flat buffer
     * @param count  elements
     * @param dims   the shape, outermost first ({@link #shape()} returns a copy)
     */
    public record Span(Param param, long offset, long count, long[] dims) {

        /** The shape, outermost first, e.g. {@code [L, 3C, C]} for qkvw. */
        public long[] shape() {
            return dims.clone();
        }

        /** Element offset of layer {@code l}'s slice of a per-layer tensor: {@code offset + l * count / L}. */
        public long layerOffset(int l) {
            return offset + l * (count / dims[0]);
        }

        @Override
        public String toString() {
            return param.fileName() + Arrays.toString(dims) + "@" + offset;
        }
    }

    /**
     * A contiguous piece of a unit: {@code count} elements at {@code offset} of the flat buffer, tensor {@code param}'s
     * slice for layer {@code layer} (-1 for a tensor that is not per layer), at {@code packed} in the unit's packing
     * (its segments one after another).
     */
    public record Segment(Param param, int layer, long offset, long count, long packed) {}

    /**
     * The parameters the model uses together: {@link #EMBEDDING} (wte, wpe: the encoder and the tied LM head), layer
     * l's twelve slices ({@link #layerUnit}), the final LayerNorm ({@link #finalUnit}: lnfw, lnfb).
     *
     * @param index    0 … L + 1
     * @param segments in flat order, which is also their packed order
     * @param count    elements in all
     */
    public record Unit(int index, List<Segment> segments, long count) {}

    /** The unit of wte and wpe. */
    public static final int EMBEDDING = 0;

    private final GptConfig config;
    private final List<Span> tensors;
    private final long count;
    private final List<Unit> units;

    /** The layout of {@code config}'s parameters; an {@link ArithmeticException} if the count exceeds a long. */
    public ParameterLayout(GptConfig config) {
        this.config = config;
        long[][] shapes = shapes(config.maxT(), config.Vp(), config.L(), config.C());
        List<Span> list = new ArrayList<>(shapes.length);
        long offset = 0;
        for (Param p : Param.values()) {
            long[] dims = shapes[p.ordinal()];
            long n = product(dims);
            list.add(new Span(p, offset, n, dims));
            offset = Math.addExact(offset, n);
        }
        this.tensors = List.copyOf(list);
        this.count = offset;
        List<Unit> us = new ArrayList<>(config.L() + 2);
        us.add(unit(EMBEDDING, new Param[] {Param.WTE, Param.WPE}, -1));
        Param[] perLayer = Arrays.copyOfRange(Param.values(), Param.LN1W.ordinal(), Param.LNFW.ordinal());
        for (int l = 0; l < config.L(); l++) {
            us.add(unit(layerUnit(l), perLayer, l));
        }
        us.add(unit(finalUnit(), new Param[] {Param.LNFW, Param.LNFB}, -1));
        this.units = List.copyOf(us);
    }

    private Unit unit(int index, Param[] params, int layer) {
        List<Segment> segs = new ArrayList<>(params.length);
        long packed = 0;
        for (Param p : params) {
            Span t = tensor(p);
            long n = layer < 0 ? t.count() : t.count() / config.L();
            segs.add(new Segment(p, layer, layer < 0 ? t.offset() : t.layerOffset(layer), n, packed));
            packed += n;
        }
        return new Unit(index, List.copyOf(segs), packed);
    }

    /** The L + 2 units in the order of the flat buffer: embeddings, layers 0 … L−1, final LayerNorm. */
    public List<Unit> units() {
        return units;
    }

    /** Layer {@code l}'s unit: {@code 1 + l}. */
    public static int layerUnit(int l) {
        return 1 + l;
    }

    /** The final LayerNorm's unit: {@code L + 1}. */
    public int finalUnit() {
        return config.L() + 1;
    }

    /** The unit holding tensor {@code p}'s slice for layer {@code layer} (ignored for wte, wpe, lnfw, lnfb). */
    public int unitOf(Param p, int layer) {
        return switch (p) {
            case WTE, WPE -> EMBEDDING;
            case LNFW, LNFB -> finalUnit();
            default -> layerUnit(layer);
        };
    }

    /**
     * First element in the vector of tensor {@code p}'s slice for layer {@code layer}: the whole tensor's for wte,
     * wpe, lnfw, lnfb (layer ignored).
     */
    public long offset(Param p, int layer) {
        Span t = tensor(p);
        return switch (p) {
            case WTE, WPE, LNFW, LNFB -> t.offset();
            default -> t.layerOffset(layer);
        };
    }

    /** Elements of tensor {@code p}'s slice for layer {@code layer} ({@link #offset(Param, int)}). */
    public long count(Param p, int layer) {
        Span t = tensor(p);
        return switch (p) {
            case WTE, WPE, LNFW, LNFB -> t.count();
            default -> t.count() / config.L();
        };
    }

    /** Where tensor {@code p}'s slice for {@code layer} starts in its unit's packing ({@link Segment#packed}). */
    public long packedOffset(Param p, int layer) {
        for (Segment s : units.get(unitOf(p, layer)).segments()) {
            if (s.param() == p) {
                return s.packed();
            }
        }
        throw new AssertionError(p);
    }

    /**
     * The total parameter count for these sizes, computed without building a config, with {@link Math#multiplyExact}
     * (an {@link ArithmeticException} if it exceeds a long). For validating a file header before trusting it.
     */
    public static long count(long maxT, long Vp, long L, long C) {
        long total = 0;
        for (long[] dims : shapes(maxT, Vp, L, C)) {
            total = Math.addExact(total, product(dims));
        }
        return total;
    }

    /** {@link #count(long, long, long, long)} for a config. */
    public static long count(GptConfig c) {
        return count(c.maxT(), c.Vp(), c.L(), c.C());
    }

    private static long[][] shapes(long maxT, long Vp, long L, long C) {
        long c3 = Math.multiplyExact(3, C);
        long c4 = Math.multiplyExact(4, C);
        return new long[][] {
            {Vp, C}, {maxT, C},                 // wte, wpe
            {L, C}, {L, C},                     // ln1w, ln1b
            {L, c3, C}, {L, c3},                // qkvw, qkvb
            {L, C, C}, {L, C},                  // attprojw, attprojb
            {L, C}, {L, C},                     // ln2w, ln2b
            {L, c4, C}, {L, c4},                // fcw, fcb
            {L, C, c4}, {L, C},                 // fcprojw, fcprojb
            {C}, {C},                           // lnfw, lnfb
        };
    }

    private static long product(long[] dims) {
        long n = 1;
        for (long d : dims) {
            n = Math.multiplyExact(n, d);
        }
        return n;
    }

    /** The config this layout is for. */
    public GptConfig config() {
        return config;
    }

    /** Total elements in the flat buffer. */
    public long count() {
        return count;
    }

    /** Bytes of the flat buffer in fp32. */
    public long fp32Bytes() {
        return Math.multiplyExact(count, (long) Float.BYTES);
    }

    /** The 16 tensors in file order. */
    public List<Span> tensors() {
        return tensors;
    }

    /** One tensor. */
    public Span tensor(Param p) {
        return tensors.get(p.ordinal());
    }

    /** First element of {@code p}. */
    public long offset(Param p) {
        return tensor(p).offset();
    }

    /** Elements of {@code p}. */
    public long count(Param p) {
        return tensor(p).count();
    }

    /** Shape of {@code p}, outermost first. */
    public long[] shape(Param p) {
        return tensor(p).shape();
    }
}
