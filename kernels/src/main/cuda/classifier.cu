// Fused softmax + cross-entropy (+ its gradient, in place) over logits (N, Vp); columns [V, Vp) are padding.
#include "common.cuh"

// One block per row i (blockDim.x a multiple of 32): with mx = max_{j<V} logits[i,j] and
// s = Σ_{j<V} exp(logits[i,j] − mx): losses[i] (N) = log s + mx − logits[i, targets[i]].
// With backward != 0 also, in place, logits[i, j<V] ← dloss_scale·(exp(logits[i,j] − mx)/s − [j = targets[i]])
// and logits[i, V ≤ j < Vp] ← 0. targets (N) int32 in [0, V).
extern "C" __global__ void classifier_forward_backward(float* __restrict__ logits, float* __restrict__ losses,
        const int* __restrict__ targets, int N, int V, int Vp, float dloss_scale, int backward) {
    __shared__ float scratch[32];
    int row = blockIdx.x;
    if (row >= N) return;
    float* x = logits + (long long) row * Vp;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < V; j += blockDim.x) mx = fmaxf(mx, x[j]);
    mx = block_max(mx, scratch);
    float s = 0.0f;
    for (int j = threadIdx.x; j < V; j += blockDim.x) s += expf(x[j] - mx);
    s = block_sum(s, scratch);
    int target = targets[row];
    float xt = x[target];
    if (threadIdx.x == 0) losses[row] = logf(s) + mx - xt;
    __syncthreads();  // every thread has read x[target] before it is overwritten
    if (backward) {
        float inv = 1.0f / s;
        for (int j = threadIdx.x; j < Vp; j += blockDim.x) {
            float d = 0.0f;
            if (j < V) d = dloss_scale * (expf(x[j] - mx) * inv - (j == target ? 1.0f : 0.0f));
            x[j] = d;
        }
    }
}
