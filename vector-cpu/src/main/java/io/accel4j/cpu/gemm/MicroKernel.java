package io.accel4j.cpu.gemm;

import io.accel4j.cpu.Simd;
import java.lang.foreign.MemorySegment;
import java.nio.ByteOrder;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * The register-blocked inner product of the GEMM: one MR×NR tile of C from a packed A panel and a packed B panel.
 *
 * <pre>
 *   acc[r][j] (+)= Σ_{k<kc} ap[k·MR + r] · bp[k·NR + j]      r < MR, j < NR
 * </pre>
 * A panel: kc columns of MR values (k-major); B panel: kc rows of NR values (two vectors); acc: a float[] tile with
 * row stride {@code ldacc}; the tile always starts from what acc holds (the caller zeroes it before the first K
 * block). A {@code first} flag that chose between zero and load made C2 compile a second, slower copy of the loop
 * (29 instead of 51 GFLOP/s here), so there is no branch.
 *
 * <p>The vector kernel keeps the whole tile in 2·MR = 10 registers, plus two B vectors and the broadcasts. Why 5×2
 * and not the 6×2 that C and assembly kernels use on AVX2: C2 schedules two or three broadcasts ahead, so with 12
 * accumulators it runs out of AVX2's 16 registers and spills one accumulator to the stack, turning its FMA chain
 * into a store-forwarding chain (seen here in the disassembly: 34 GFLOP/s for 6×2, 51–60 for 5×2 on a loaded
 * machine). Ten accumulators still cover the FMA latency (4 cycles × 2 pipes = 8 in flight). The kernel is one
 * method that hands no vector to another method: C2 keeps accumulators in registers only when nothing escapes (a
 * helper it declined to inline boxed them: 20× slower).
 */
final class MicroKernel {

    private static final VectorSpecies<Float> S = Simd.FLOAT;
    private static final int V = S.length();

    /** Rows of the tile. */
    static final int MR = 5;
    /** Columns of the tile: two vectors (one float in scalar mode: then NR = 2). */
    static final int NR = 2 * Simd.lanes();

    private MicroKernel() {}

    /** One tile, vector or scalar per {@link Simd#SCALAR}. */
    static void tile(int kc, float[] ap, int aOff, float[] bp, int bOff, float[] acc, int cOff, int ldacc) {
        if (Simd.SCALAR) {
            tileScalar(kc, ap, aOff, bp, bOff, acc, cOff, ldacc);
        } else {
            tileVector(kc, ap, aOff, bp, bOff, acc, cOff, ldacc);
        }
    }

    static void tileVector(int kc, float[] ap, int aOff, float[] bp, int bOff, float[] acc, int cOff, int ldacc) {
        int o = cOff;
        FloatVector c00 = FloatVector.fromArray(S, acc, o), c01 = FloatVector.fromArray(S, acc, o + V);
        o += ldacc;
        FloatVector c10 = FloatVector.fromArray(S, acc, o), c11 = FloatVector.fromArray(S, acc, o + V);
        o += ldacc;
        FloatVector c20 = FloatVector.fromArray(S, acc, o), c21 = FloatVector.fromArray(S, acc, o + V);
        o += ldacc;
        FloatVector c30 = FloatVector.fromArray(S, acc, o), c31 = FloatVector.fromArray(S, acc, o + V);
        o += ldacc;
        FloatVector c40 = FloatVector.fromArray(S, acc, o), c41 = FloatVector.fromArray(S, acc, o + V);
        int a = aOff;
        int b = bOff;
        for (int k = 0; k < kc; k++, a += MR, b += 2 * V) {
            FloatVector b0 = FloatVector.fromArray(S, bp, b);
            FloatVector b1 = FloatVector.fromArray(S, bp, b + V);
            FloatVector x = FloatVector.broadcast(S, ap[a]);
            c00 = x.fma(b0, c00); c01 = x.fma(b1, c01);
            x = FloatVector.broadcast(S, ap[a + 1]);
            c10 = x.fma(b0, c10); c11 = x.fma(b1, c11);
            x = FloatVector.broadcast(S, ap[a + 2]);
            c20 = x.fma(b0, c20); c21 = x.fma(b1, c21);
            x = FloatVector.broadcast(S, ap[a + 3]);
            c30 = x.fma(b0, c30); c31 = x.fma(b1, c31);
            x = FloatVector.broadcast(S, ap[a + 4]);
            c40 = x.fma(b0, c40); c41 = x.fma(b1, c41);
        }
        o = cOff;
        c00.intoArray(acc, o); c01.intoArray(acc, o + V); o += ldacc;
        c10.intoArray(acc, o); c11.intoArray(acc, o + V); o += ldacc;
        c20.intoArray(acc, o); c21.intoArray(acc, o + V); o += ldacc;
        c30.intoArray(acc, o); c31.intoArray(acc, o + V); o += ldacc;
        c40.intoArray(acc, o); c41.intoArray(acc, o + V);
    }

    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;

    /**
     * One full tile of a product of one K block written straight into C by {@code out}'s plain fp32 store
     * ({@link Epilogue#direct}): the tile from zero, then {@code C[i][j] = alpha·acc + beta·C[i][j] + bias[j]} for the
     * MR rows from {@code row} and NR columns from {@code col}, each operation in {@link Epilogue}'s order, so the bits
     * of the accumulator's route. The stores leave as the tile finishes, so their cache misses overlap the next tile's
     * multiply-adds instead of waiting in a block store after the sweep (7–8 % of the LM head's K = 256 products).
     * Vector mode only.
     */
    static void tileInto(int kc, float[] ap, int aOff, float[] bp, int bOff, Epilogue out, int row, int col) {
        FloatVector c00 = FloatVector.zero(S), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
        FloatVector c30 = c00, c31 = c00, c40 = c00, c41 = c00;
        int a = aOff;
        int b = bOff;
        for (int k = 0; k < kc; k++, a += MR, b += 2 * V) {
            FloatVector b0 = FloatVector.fromArray(S, bp, b);
            FloatVector b1 = FloatVector.fromArray(S, bp, b + V);
            FloatVector x = FloatVector.broadcast(S, ap[a]);
            c00 = x.fma(b0, c00); c01 = x.fma(b1, c01);
            x = FloatVector.broadcast(S, ap[a + 1]);
            c10 = x.fma(b0, c10); c11 = x.fma(b1, c11);
            x = FloatVector.broadcast(S, ap[a + 2]);
            c20 = x.fma(b0, c20); c21 = x.fma(b1, c21);
            x = FloatVector.broadcast(S, ap[a + 3]);
            c30 = x.fma(b0, c30); c31 = x.fma(b1, c31);
            x = FloatVector.broadcast(S, ap[a + 4]);
            c40 = x.fma(b0, c40); c41 = x.fma(b1, c41);
        }
        float alpha = out.alpha;
        c00 = c00.mul(alpha); c01 = c01.mul(alpha); c10 = c10.mul(alpha); c11 = c11.mul(alpha);
        c20 = c20.mul(alpha); c21 = c21.mul(alpha); c30 = c30.mul(alpha); c31 = c31.mul(alpha);
        c40 = c40.mul(alpha); c41 = c41.mul(alpha);
        MemorySegment c = out.c;
        long ld = (long) out.ldc * Float.BYTES;
        long o0 = ((long) row * out.ldc + col) * Float.BYTES, o1 = o0 + ld, o2 = o1 + ld, o3 = o2 + ld, o4 = o3 + ld;
        long v = (long) V * Float.BYTES;
        float beta = out.beta;
        if (beta != 0f) {
            c00 = c00.add(FloatVector.fromMemorySegment(S, c, o0, LE).mul(beta));
            c01 = c01.add(FloatVector.fromMemorySegment(S, c, o0 + v, LE).mul(beta));
            c10 = c10.add(FloatVector.fromMemorySegment(S, c, o1, LE).mul(beta));
            c11 = c11.add(FloatVector.fromMemorySegment(S, c, o1 + v, LE).mul(beta));
            c20 = c20.add(FloatVector.fromMemorySegment(S, c, o2, LE).mul(beta));
            c21 = c21.add(FloatVector.fromMemorySegment(S, c, o2 + v, LE).mul(beta));
            c30 = c30.add(FloatVector.fromMemorySegment(S, c, o3, LE).mul(beta));
            c31 = c31.add(FloatVector.fromMemorySegment(S, c, o3 + v, LE).mul(beta));
            c40 = c40.add(FloatVector.fromMemorySegment(S, c, o4, LE).mul(beta));
            c41 = c41.add(FloatVector.fromMemorySegment(S, c, o4 + v, LE).mul(beta));
        }
        MemorySegment bias = out.bias;
        if (bias != null) {
            long bo = (long) col * Float.BYTES;
            FloatVector bias0 = FloatVector.fromMemorySegment(S, bias, bo, LE);
            FloatVector bias1 = FloatVector.fromMemorySegment(S, bias, bo + v, LE);
            c00 = c00.add(bias0); c01 = c01.add(bias1); c10 = c10.add(bias0); c11 = c11.add(bias1);
            c20 = c20.add(bias0); c21 = c21.add(bias1); c30 = c30.add(bias0); c31 = c31.add(bias1);
            c40 = c40.add(bias0); c41 = c41.add(bias1);
        }
        c00.intoMemorySegment(c, o0, LE); c01.intoMemorySegment(c, o0 + v, LE);
        c10.intoMemorySegment(c, o1, LE); c11.intoMemorySegment(c, o1 + v, LE);
        c20.intoMemorySegment(c, o2, LE); c21.intoMemorySegment(c, o2 + v, LE);
        c30.intoMemorySegment(c, o3, LE); c31.intoMemorySegment(c, o3 + v, LE);
        c40.intoMemorySegment(c, o4, LE); c41.intoMemorySegment(c, o4 + v, LE);
    }

    /** The same tile in plain Java (scalar mode), same summation order per element. */
    static void tileScalar(int kc, float[] ap, int aOff, float[] bp, int bOff, float[] acc, int cOff, int ldacc) {
        for (int r = 0; r < MR; r++) {
            for (int j = 0; j < NR; j++) {
                float s = acc[cOff + r * ldacc + j];
                for (int k = 0; k < kc; k++) {
                    s = Math.fma(ap[aOff + k * MR + r], bp[bOff + k * NR + j], s);
                }
                acc[cOff + r * ldacc + j] = s;
            }
        }
    }
}
