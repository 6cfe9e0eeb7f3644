package io.accel4j.train.model;

import io.accel4j.train.data.Mt19937;
import io.accel4j.train.model.ParameterLayout.Param;
import io.accel4j.train.model.ParameterLayout.Span;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * GPT-2's initialisation, exactly as llm.c's {@code gpt2_build_from_random} does it (which follows PyTorch's order
 * of initialisation), so that seed 42 gives llm.c's fp32 model:
 * <ul>
 *   <li>weights {@code wte} (its first V rows), {@code wpe}, {@code qkvw}, {@code fcw} ~ N(0, 0.02);</li>
 *   <li>the projections back into the residual stream, {@code attprojw} and {@code fcprojw}, ~ N(0, 0.02/√(2L));</li>
 *   <li>LayerNorm weights {@code ln1w}, {@code ln2w}, {@code lnfw} = 1; every bias and the padded rows
 *       {@code V..Vp-1} of {@code wte} = 0.</li>
 * </ul>
 * The samples come from one {@link Mt19937} seeded with {@code seed}, through llm.c's Box–Muller
 * {@link Mt19937#normal}, drawn in llm.c's order: wte, wpe, then layer 0's qkvw, attprojw, fcw, fcprojw, then
 * layer 1's, and so on.
 */
public final class ParameterInit {

    /** The standard deviation of GPT-2's weights. */
    public static final float STD = 0.02f;

    private ParameterInit() {}

    /**
     * Writes every element of {@code params} (fp32, native order, at least {@code layout.count()} floats) with the
     * GPT-2 initialisation from {@code seed} (an unsigned 32-bit value; llm.c uses 42).
     */
    public static void gpt2(ParameterLayout layout, MemorySegment params, long seed) {
        long bytes = layout.fp32Bytes();
        if (params.byteSize() < bytes) {
            throw new IllegalArgumentException("params has " + params.byteSize() + " bytes, needs " + bytes
                    + " (" + layout.count() + " fp32 parameters)");
        }
        GptConfig c = layout.config();
        Mt19937 rng = new Mt19937(seed);
        params.asSlice(0, bytes).fill((byte) 0);
        for (Param p : new Param[] {Param.LN1W, Param.LN2W, Param.LNFW}) {
            Span t = layout.tensor(p);
            for (long i = 0; i < t.count(); i++) {
                params.setAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, t.offset() + i, 1f);
            }
        }
        float residualScale = 1.0f / (float) Math.sqrt(2.0f * c.L());
        float residualStd = STD * residualScale;
        rng.normal(params, layout.offset(Param.WTE), (long) c.V() * c.C(), 0f, STD);
        rng.normal(params, layout.offset(Param.WPE), layout.count(Param.WPE), 0f, STD);
        for (int l = 0; l < c.L(); l++) {
            for (Param p : new Param[] {Param.QKVW, Param.ATTPROJW, Param.FCW, Param.FCPROJW}) {
                Span t = layout.tensor(p);
                float std = p == Param.ATTPROJW || p == Param.FCPROJW ? residualStd : STD;
                rng.normal(params, t.layerOffset(l), t.count() / c.L(), 0f, std);
            }
        }
    }
}
