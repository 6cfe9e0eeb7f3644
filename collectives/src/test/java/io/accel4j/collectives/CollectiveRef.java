package io.accel4j.collectives;

import io.accel4j.core.Bf16;

/**
 * Sequential references on float arrays, summing each element in the order the ring does (so results are bit-exact):
 * the element's chunk {@code c} is reduced as {@code x_{c+1} ⊕ x_{c+2} ⊕ … ⊕ x_c}, rank indices mod N; AVG then
 * divides once by N (not when N = 1, where the ring does not divide and x/1 = x anyway).
 */
final class CollectiveRef {

    private CollectiveRef() {}

    /** The all-reduce of {@code x[rank][i]} in fp32 (inputs already widened from bf16 if so). */
    static float[] allReduce(float[][] x, ReduceOp op) {
        int n = x.length;
        int count = x[0].length;
        float[] out = new float[count];
        for (int c = 0; c < n; c++) {
            long from = Chunks.start(count, n, c), to = Chunks.start(count, n, c + 1);
            for (int i = (int) from; i < to; i++) {
                float acc = x[(c + 1) % n][i];
                for (int j = 2; j <= n; j++) {
                    float v = x[(c + j) % n][i];
                    acc = op == ReduceOp.MAX ? Math.max(acc, v) : acc + v;
                }
                out[i] = op == ReduceOp.AVG && n > 1 ? acc / n : acc;
            }
        }
        return out;
    }

    /** fp32 → bf16 → fp32 (ties to even), what a bf16 output holds. */
    static float[] roundBf16(float[] x) {
        float[] out = new float[x.length];
        for (int i = 0; i < x.length; i++) {
            out[i] = Bf16.toFloat(Bf16.fromFloat(x[i]));
        }
        return out;
    }
}
