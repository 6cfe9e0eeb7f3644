package io.accel4j.cpu.gemm;

import io.accel4j.cpu.Simd;
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
