package io.accel4j.cpu.ops;

import io.accel4j.core.Bf16;
import io.accel4j.cpu.Simd;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.Arrays;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.VectorMask;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * The tiles of {@link FlashAttention}: the register-blocked products of BLK×hsP and BLK×BLK tiles, and moving one
 * head's rows between the (B,T,·) segments and zero-padded float[] tiles in the layouts the products read:
 * <ul>
 *   <li>A "by columns" ({@code a[k·BLK + m]}, {@link #mmColA}) or "by rows" ({@code a[m·BLK + k]},
 *       {@link #mmRowA}; a head's rows become such an A in chunks of BLK columns: {@link #loadChunks});</li>
 *   <li>B in panels of NR columns, each K rows deep ({@link #loadPanels} for B = rows,
 *       {@link #loadPanelsT} for B = rowsᵀ);</li>
 *   <li>C row-major with any leading dimension.</li>
 * </ul>
 * Every stride inside a k loop is a constant, BLK or NR or 1; padded rows and columns are zero, so the products
 * have no edge cases. Each hot loop lives in one method and no vector leaves it.
 */
final class Tiles {

    private Tiles() {}

    static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED;
    private static final VectorSpecies<Float> S = Simd.FLOAT;
    private static final int V = S.length();
    private static final int MR = FlashAttention.MR;
    private static final int NR = FlashAttention.NR;
    private static final int BLK = FlashAttention.BLOCK;
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;

    // Which part of a product a diagonal (causal) block needs; the rest multiplies exact zeros of P or dS, or feeds
    // scores the mask overwrites, so skipping it leaves the result as it was (up to the sign of an exact zero sum).
    /** The whole product. */
    static final int FULL = 0;
    /** Only k &lt; m0 + MR for the register tile at row m0 (A is zero for k &gt; m: P or dS, query-major rows). */
    static final int K_TO_ROW = 1;
    /** Only k ≥ m0 for the register tile at row m0 (A is zero for k &lt; m: P or dS with key rows). */
    static final int K_FROM_ROW = 2;
    /** Only the tiles with m0 &lt; n0 + NR (key-major scores: key m &gt; query n is masked). */
    static final int M_TO_COL = 3;
    /** Only the tiles with m0 + MR &gt; n0 (query-major scores: key n &gt; query m is masked). */
    static final int M_FROM_COL = 4;

    /**
     * {@code c[m·ldc + n] += Σ_k a[k·BLK + m] · B[k][n]} for m &lt; BLK, n &lt; N ({@code N % NR == 0}): A stored
     * column by column (k-major, so the MR values a kernel step broadcasts are adjacent), B packed in panels of NR
     * columns, {@code B[k][n] = b[n0·K + k·NR + (n − n0)]} for the panel starting at {@code n0}. Strides and
     * offsets inside the k loop are constants (a variable stride cost ~25 % here: the JIT then keeps a bounds
     * check per access); the MR×NR tile of C stays in 2·MR registers.
     */
    static void mmColA(int N, int K, float[] a, float[] b, float[] c, int ldc) {
        mmColA(N, K, a, b, c, ldc, FULL);
    }

    /** {@link #mmColA(int, int, float[], float[], float[], int)} over the k range {@code part} names. */
    static void mmColA(int N, int K, float[] a, float[] b, float[] c, int ldc, int part) {
        if (Simd.SCALAR) {
            mmScalar(N, K, a, 0, 1, BLK, b, 0, K * NR, c, ldc);
            return;
        }
        for (int n0 = 0; n0 < N; n0 += NR) { // a B panel stays in L1 while A streams past it
            for (int m0 = 0; m0 < BLK; m0 += MR) {
                int k0 = part == K_FROM_ROW ? Math.min(m0, K) : 0;
                int k1 = part == K_TO_ROW ? Math.min(m0 + MR, K) : K;
                int o0 = m0 * ldc + n0, o1 = o0 + ldc, o2 = o1 + ldc, o3 = o2 + ldc;
                FloatVector c00 = FloatVector.fromArray(S, c, o0), c01 = FloatVector.fromArray(S, c, o0 + V);
                FloatVector c10 = FloatVector.fromArray(S, c, o1), c11 = FloatVector.fromArray(S, c, o1 + V);
                FloatVector c20 = FloatVector.fromArray(S, c, o2), c21 = FloatVector.fromArray(S, c, o2 + V);
                FloatVector c30 = FloatVector.fromArray(S, c, o3), c31 = FloatVector.fromArray(S, c, o3 + V);
                int ak = m0 + k0 * BLK, bk = n0 * K + k0 * NR;
                for (int k = k0; k < k1; k++, ak += BLK, bk += NR) {
                    FloatVector b0 = FloatVector.fromArray(S, b, bk), b1 = FloatVector.fromArray(S, b, bk + V);
                    FloatVector x = FloatVector.broadcast(S, a[ak]);
                    c00 = x.fma(b0, c00); c01 = x.fma(b1, c01);
                    x = FloatVector.broadcast(S, a[ak + 1]);
                    c10 = x.fma(b0, c10); c11 = x.fma(b1, c11);
                    x = FloatVector.broadcast(S, a[ak + 2]);
                    c20 = x.fma(b0, c20); c21 = x.fma(b1, c21);
                    x = FloatVector.broadcast(S, a[ak + 3]);
                    c30 = x.fma(b0, c30); c31 = x.fma(b1, c31);
                }
                c00.intoArray(c, o0); c01.intoArray(c, o0 + V);
                c10.intoArray(c, o1); c11.intoArray(c, o1 + V);
                c20.intoArray(c, o2); c21.intoArray(c, o2 + V);
                c30.intoArray(c, o3); c31.intoArray(c, o3 + V);
            }
        }
    }

    /**
     * {@link #mmColA} with A stored row by row, {@code c[m·ldc + n] += Σ_k a[aOff + m·BLK + k] · B[k][n]} for
     * K ≤ BLK, and B's panels {@code ldp} floats apart from {@code bOff}: {@code B[k][n] = b[bOff + (n/NR)·ldp +
     * k·NR + n%NR]} (so a K range of a longer panel is one call: {@link #loadChunks}).
     */
    static void mmRowA(int N, int K, float[] a, int aOff, float[] b, int bOff, int ldp, float[] c, int ldc) {
        mmRowA(N, K, a, aOff, b, bOff, ldp, c, ldc, FULL);
    }

    /** {@link #mmRowA(int, int, float[], int, float[], int, int, float[], int)} over the part {@code part} names. */
    static void mmRowA(int N, int K, float[] a, int aOff, float[] b, int bOff, int ldp, float[] c, int ldc,
                       int part) {
        if (Simd.SCALAR) {
            mmScalar(N, K, a, aOff, BLK, 1, b, bOff, ldp, c, ldc);
            return;
        }
        for (int n0 = 0; n0 < N; n0 += NR) { // a B panel stays in L1 while A streams past it
            int mFrom = part == M_FROM_COL ? n0 : 0; // n0 is a multiple of MR: m0 + MR > n0 from m0 = n0
            int mTo = part == M_TO_COL ? Math.min(BLK, n0 + NR) : BLK;
            for (int m0 = mFrom; m0 < mTo; m0 += MR) {
                int k1 = part == K_TO_ROW ? Math.min(m0 + MR, K) : K;
                int o0 = m0 * ldc + n0, o1 = o0 + ldc, o2 = o1 + ldc, o3 = o2 + ldc;
                FloatVector c00 = FloatVector.fromArray(S, c, o0), c01 = FloatVector.fromArray(S, c, o0 + V);
                FloatVector c10 = FloatVector.fromArray(S, c, o1), c11 = FloatVector.fromArray(S, c, o1 + V);
                FloatVector c20 = FloatVector.fromArray(S, c, o2), c21 = FloatVector.fromArray(S, c, o2 + V);
                FloatVector c30 = FloatVector.fromArray(S, c, o3), c31 = FloatVector.fromArray(S, c, o3 + V);
                int ak = aOff + m0 * BLK, bk = bOff + n0 / NR * ldp;
                for (int k = 0; k < k1; k++, ak++, bk += NR) {
                    FloatVector b0 = FloatVector.fromArray(S, b, bk), b1 = FloatVector.fromArray(S, b, bk + V);
                    FloatVector x = FloatVector.broadcast(S, a[ak]);
                    c00 = x.fma(b0, c00); c01 = x.fma(b1, c01);
                    x = FloatVector.broadcast(S, a[ak + BLK]);
                    c10 = x.fma(b0, c10); c11 = x.fma(b1, c11);
                    x = FloatVector.broadcast(S, a[ak + 2 * BLK]);
                    c20 = x.fma(b0, c20); c21 = x.fma(b1, c21);
                    x = FloatVector.broadcast(S, a[ak + 3 * BLK]);
                    c30 = x.fma(b0, c30); c31 = x.fma(b1, c31);
                }
                c00.intoArray(c, o0); c01.intoArray(c, o0 + V);
                c10.intoArray(c, o1); c11.intoArray(c, o1 + V);
                c20.intoArray(c, o2); c21.intoArray(c, o2 + V);
                c30.intoArray(c, o3); c31.intoArray(c, o3 + V);
            }
        }
    }

    /**
     * {@code c[m·ldc + n] += Σ_{k<hsP} A[m][k]·B[k][n]} with A from {@link #loadChunks} and B from
     * {@link #loadPanelsT}: one {@link #mmRowA} per chunk of BLK columns.
     */
    static void mmChunks(int N, int hsP, float[] a, float[] b, float[] c, int ldc) {
        mmChunks(N, hsP, a, b, c, ldc, FULL);
    }

    /** {@link #mmChunks(int, int, float[], float[], float[], int)} over the tiles {@code part} (M_…) names. */
    static void mmChunks(int N, int hsP, float[] a, float[] b, float[] c, int ldc, int part) {
        for (int g = 0; g * BLK < hsP; g++) {
            mmRowA(N, Math.min(BLK, hsP - g * BLK), a, g * BLK * BLK, b, g * BLK * NR, hsP * NR, c, ldc, part);
        }
    }

    /** The products in plain Java (scalar mode): A at {@code a[aOff + m·ars + k·acs]}, the same fma order. */
    static void mmScalar(int N, int K, float[] a, int aOff, int ars, int acs, float[] b, int bOff, int ldp,
                         float[] c, int ldc) {
        for (int m = 0; m < BLK; m++) {
            for (int n = 0; n < N; n++) {
                int panel = bOff + n / NR * ldp + n % NR;
                float s = c[m * ldc + n];
                for (int k = 0; k < K; k++) {
                    s = Math.fma(a[aOff + m * ars + k * acs], b[panel + k * NR], s);
                }
                c[m * ldc + n] = s;
            }
        }
    }

    /**
     * Head rows {@code r < rows} of a segment ({@code hs} floats at {@code at + r·stride} bytes), times {@code mul},
     * as the A operand of {@link #mmRowA} in chunks of BLK columns: {@code dst[(i/BLK)·BLK² + r·BLK + i%BLK]}
     * (a constant row stride whatever hs is); rows r ≥ rows become 0.
     */
    static void loadChunks(float[] dst, MemorySegment src, long at, long stride, int rows, int hs, float mul) {
        int bound = Simd.SCALAR ? 0 : S.loopBound(hs);
        for (int r = 0; r < rows; r++) {
            long row = at + r * stride;
            int i = 0;
            for (; i < bound; i += V) {
                FloatVector.fromMemorySegment(S, src, row + (long) i * Float.BYTES, LE).mul(mul)
                        .intoArray(dst, i / BLK * BLK * BLK + r * BLK + i % BLK);
            }
            for (; i < hs; i++) {
                dst[i / BLK * BLK * BLK + r * BLK + i % BLK] = src.get(F32, row + (long) i * Float.BYTES) * mul;
            }
        }
        for (int g = 0; g * BLK < hs; g++) {
            Arrays.fill(dst, g * BLK * BLK + rows * BLK, (g + 1) * BLK * BLK, 0f);
        }
    }

    /**
     * The same rows as the B operand {@code B[i][r]} (K = hsP, N = BLK) in panels of NR:
     * {@code dst[(r/NR)·hsP·NR + i·NR + r%NR]}; rows r ≥ rows become 0.
     */
    static void loadPanelsT(float[] dst, int hsP, MemorySegment src, long at, long stride, int rows, int hs,
                            float mul) {
        for (int r = 0; r < BLK; r++) {
            int base = r / NR * hsP * NR + r % NR;
            long row = at + r * stride;
            for (int i = 0; i < hs; i++) {
                dst[base + i * NR] = r < rows ? src.get(F32, row + (long) i * Float.BYTES) * mul : 0f;
            }
        }
    }

    /**
     * The same rows as the B operand {@code B[r][i]} (K = BLK, N = hsP) in panels of NR:
     * {@code dst[(i/NR)·BLK·NR + r·NR + i%NR]}; rows r ≥ rows become 0.
     */
    static void loadPanels(float[] dst, MemorySegment src, long at, long stride, int rows, int hs, float mul) {
        int full = Simd.SCALAR ? 0 : hs / NR * NR;
        for (int r = 0; r < rows; r++) {
            long row = at + r * stride;
            int i = 0;
            for (; i < full; i += NR) {
                int o = i * BLK + r * NR;
                long s = row + (long) i * Float.BYTES;
                FloatVector.fromMemorySegment(S, src, s, LE).mul(mul).intoArray(dst, o);
                FloatVector.fromMemorySegment(S, src, s + (long) V * Float.BYTES, LE).mul(mul).intoArray(dst, o + V);
            }
            for (; i < hs; i++) {
                dst[i / NR * NR * BLK + r * NR + i % NR] = src.get(F32, row + (long) i * Float.BYTES) * mul;
            }
        }
        for (int i = 0; i < hs; i += NR) {
            Arrays.fill(dst, i * BLK + rows * NR, (i + NR) * BLK, 0f);
        }
    }

    /** Segment rows {@code r < rows} (hs floats at {@code at + r·stride}) {@code = src[r·ld + i]·mul[r]}. */
    static void storeRows(MemorySegment dst, long at, long stride, float[] src, int ld, int rows, int hs,
                          float[] mul) {
        int bound = Simd.SCALAR ? 0 : S.loopBound(hs);
        for (int r = 0; r < rows; r++) {
            long row = at + r * stride;
            float x = mul[r];
            int i = 0;
            for (; i < bound; i += V) {
                FloatVector.fromArray(S, src, r * ld + i).mul(x)
                        .intoMemorySegment(dst, row + (long) i * Float.BYTES, LE);
            }
            for (; i < hs; i++) {
                dst.set(F32, row + (long) i * Float.BYTES, src[r * ld + i] * x);
            }
        }
    }

    /** Segment rows {@code r < rows} (hs floats at {@code at + r·stride}) {@code += mul·src[r·ld + i]}. */
    static void addRows(MemorySegment dst, long at, long stride, float[] src, int ld, int rows, int hs, float mul) {
        int bound = Simd.SCALAR ? 0 : S.loopBound(hs);
        FloatVector mv = FloatVector.broadcast(S, mul);
        for (int r = 0; r < rows; r++) {
            long row = at + r * stride;
            int i = 0;
            for (; i < bound; i += V) {
                long o = row + (long) i * Float.BYTES;
                FloatVector.fromArray(S, src, r * ld + i).fma(mv, FloatVector.fromMemorySegment(S, dst, o, LE))
                        .intoMemorySegment(dst, o, LE);
            }
            for (; i < hs; i++) {
                long o = row + (long) i * Float.BYTES;
                dst.set(F32, o, Math.fma(src[r * ld + i], mul, dst.get(F32, o)));
            }
        }
    }

    /**
     * {@code d[t] = Σ_i x[t][i]·y[t][i]} for t &lt; T: rows of hs floats at {@code at + t·stride} of both segments;
     * lanes summed in order (the same bits in every JIT tier), {@code lanes} holds one vector.
     */
    static void rowDots(float[] d, MemorySegment x, MemorySegment y, long at, long stride, int T, int hs,
                        float[] lanes) {
        int bound = Simd.SCALAR ? 0 : S.loopBound(hs);
        for (int t = 0; t < T; t++) {
            long row = at + t * stride;
            float s = 0f;
            int i = 0;
            if (bound > 0) {
                FloatVector acc = FloatVector.zero(S);
                for (; i < bound; i += V) {
                    long o = row + (long) i * Float.BYTES;
                    acc = FloatVector.fromMemorySegment(S, x, o, LE).fma(FloatVector.fromMemorySegment(S, y, o, LE),
                            acc);
                }
                acc.intoArray(lanes, 0);
                for (int l = 0; l < V; l++) {
                    s += lanes[l];
                }
            }
            for (; i < hs; i++) {
                long o = row + (long) i * Float.BYTES;
                s = Math.fma(x.get(F32, o), y.get(F32, o), s);
            }
            d[t] = s;
        }
    }

    // ---- bf16 operands (FlashAttention's BF16 mode): Bf16.fromFloat's rounding, the tiles' lane-wise (the same
    // integer operations on the bit pattern, so the same bits at any width), the rest element by element.

    /** The float nearest-even to a bf16 value: {@code bf16(x)} as a float. */
    static float bf16(float x) {
        return Bf16.toFloat(Bf16.fromFloat(x));
    }

    /**
     * {@code x[i] = bf16(x[i])·mul} for every element (padding zeros stay zero): lane-wise, Bf16.fromFloat's
     * {@code bits + 0x7FFF + lsb} truncated to the top half, and for NaN the top half with the quiet bit set. (The
     * scalar loop made the bf16 mode 2.6–2.8× slower than fp32 at B 1, T 256, C 768, NH 12; lane-wise it is within
     * ~10 % of fp32, a rough figure from a loaded machine.)
     */
    static void roundBf16(float[] x, float mul) {
        int i = 0;
        if (!Simd.SCALAR) {
            for (int bound = S.loopBound(x.length); i < bound; i += V) {
                IntVector bits = FloatVector.fromArray(S, x, i).reinterpretAsInts();
                IntVector lsb = bits.lanewise(VectorOperators.LSHR, 16).and(1);
                IntVector rounded = bits.add(0x7FFF).add(lsb).and(0xFFFF0000);
                VectorMask<Integer> nan = bits.and(0x7FFF_FFFF).compare(VectorOperators.GT, 0x7F80_0000);
                rounded = rounded.blend(bits.and(0xFFFF0000).or(0x0040_0000), nan);
                rounded.reinterpretAsFloats().mul(mul).intoArray(x, i);
            }
        }
        for (; i < x.length; i++) {
            x[i] = bf16(x[i]) * mul;
        }
    }

    /** Segment rows {@code r < rows} (hs floats at {@code at + r·stride}) {@code = bf16(·)} in place. */
    static void roundRowsBf16(MemorySegment dst, long at, long stride, int rows, int hs) {
        for (int r = 0; r < rows; r++) {
            long row = at + r * stride;
            for (int i = 0; i < hs; i++) {
                long o = row + (long) i * Float.BYTES;
                dst.set(F32, o, bf16(dst.get(F32, o)));
            }
        }
    }

    /**
     * Segment rows {@code r < rows} {@code += bf16(mul·src[off + r·ld + i])}: a complete gradient rounded once,
     * then added in fp32.
     */
    static void addRowsBf16(MemorySegment dst, long at, long stride, float[] src, int off, int ld, int rows, int hs,
                            float mul) {
        for (int r = 0; r < rows; r++) {
            long row = at + r * stride;
            for (int i = 0; i < hs; i++) {
                long o = row + (long) i * Float.BYTES;
                dst.set(F32, o, dst.get(F32, o) + bf16(mul * src[off + r * ld + i]));
            }
        }
    }

    /** {@code d[t] = Σ_i bf16(x[t][i])·bf16(y[t][i])} for t &lt; T (fp32 fused multiply-adds in i order). */
    static void rowDotsBf16(float[] d, MemorySegment x, MemorySegment y, long at, long stride, int T, int hs) {
        for (int t = 0; t < T; t++) {
            long row = at + t * stride;
            float s = 0f;
            for (int i = 0; i < hs; i++) {
                long o = row + (long) i * Float.BYTES;
                s = Math.fma(bf16(x.get(F32, o)), bf16(y.get(F32, o)), s);
            }
            d[t] = s;
        }
    }

    /** {@code dst[off + i] += src[i]} for every element of src. */
    static void addTile(float[] dst, int off, float[] src) {
        for (int i = 0; i < src.length; i++) {
            dst[off + i] += src[i];
        }
    }
}
