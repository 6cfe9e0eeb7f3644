package io.accel4j.cpu.gemm;

/**
 * Which operands of {@code C = alpha·op(A)·op(B) + beta·C} are stored transposed, in BLAS order (A then B).
 *
 * <p>Shapes are always those of the product: op(A) is M×K, op(B) is K×N, C is M×N, all row-major.
 * <ul>
 *   <li>{@link #NN}: A stored M×K, B stored K×N ({@code out = in·W} with W as (in, out)).</li>
 *   <li>{@link #NT}: A stored M×K, B stored N×K ({@code out = in·Wᵀ}, W as (out, in), the forward matmul).</li>
 *   <li>{@link #TN}: A stored K×M, B stored K×N ({@code dW = doutᵀ·in}, the weight gradient).</li>
 *   <li>{@link #TT}: A stored K×M, B stored N×K.</li>
 * </ul>
 */
public enum Layout {
    NN(false, false), NT(false, true), TN(true, false), TT(true, true);

    private final boolean transA;
    private final boolean transB;

    Layout(boolean transA, boolean transB) {
        this.transA = transA;
        this.transB = transB;
    }

    /** True when A is stored K×M (op(A) = Aᵀ). */
    public boolean transA() {
        return transA;
    }

    /** True when B is stored N×K (op(B) = Bᵀ). */
    public boolean transB() {
        return transB;
    }

    /** Rows of A as stored. */
    public int storedRowsA(int M, int K) {
        return transA ? K : M;
    }

    /** Columns of A as stored (the minimum leading dimension). */
    public int storedColsA(int M, int K) {
        return transA ? M : K;
    }

    /** Rows of B as stored. */
    public int storedRowsB(int K, int N) {
        return transB ? N : K;
    }

    /** Columns of B as stored (the minimum leading dimension). */
    public int storedColsB(int K, int N) {
        return transB ? K : N;
    }
}
