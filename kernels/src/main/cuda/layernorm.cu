// Layer normalisation over the last dimension (ε passed by the host, LayerNormOps.EPS).
#include "common.cuh"

// For each row i of N: mean = Σx/C, rstd = 1/√(Σ(x−mean)²/C + ε), out (N,C) = (x − mean)·rstd·weight + bias;
// writes mean (N), rstd (N). One warp per row (two passes over the row, the second from L1/L2); blockDim.x a
// multiple of 32, grid = ceil(N / warps per block).
extern "C" __global__ void layernorm_forward(float* __restrict__ out, float* __restrict__ mean,
        float* __restrict__ rstd, const float* __restrict__ inp, const float* __restrict__ weight,
        const float* __restrict__ bias, int N, int C, float eps) {
    int lane = threadIdx.x & 31;
    int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= N) return;
    const float* x = inp + (long long) row * C;
    float s = 0.0f;
    for (int c = lane; c < C; c += 32) s += x[c];
    float mu = warp_sum(s) / C;
    float q = 0.0f;
    for (int c = lane; c < C; c += 32) { float d = x[c] - mu; q += d * d; }
    float r = rsqrtf(warp_sum(q) / C + eps);
    float* o = out + (long long) row * C;
    for (int c = lane; c < C; c += 32) o[c] = (x[c] - mu) * r * weight[c] + bias[c];
    if (lane == 0) { mean[row] = mu; rstd[row] = r; }
}

// With x̂ = (x − mean)·rstd and g = dout·weight: dinp (N,C) += rstd·(g − mean_C(g) − x̂·mean_C(g·x̂)).
// One warp per row, as the forward.
extern "C" __global__ void layernorm_backward_dinp(float* __restrict__ dinp, const float* __restrict__ dout,
        const float* __restrict__ inp, const float* __restrict__ weight, const float* __restrict__ mean,
        const float* __restrict__ rstd, int N, int C) {
    int lane = threadIdx.x & 31;
    int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= N) return;
    long long base = (long long) row * C;
    float mu = mean[row], r = rstd[row];
    float sg = 0.0f, sgx = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float g = dout[base + c] * weight[c];
        sg += g;
        sgx += g * (inp[base + c] - mu) * r;
    }
    float mg = warp_sum(sg) / C, mgx = warp_sum(sgx) / C;
    for (int c = lane; c < C; c += 32) {
        float g = dout[base + c] * weight[c];
        float xh = (inp[base + c] - mu) * r;
        dinp[base + c] += r * (g - mg - xh * mgx);
    }
}

// dweight (C) += Σ_rows dout·x̂, dbias (C) += Σ_rows dout, rows summed in order (deterministic, no atomics).
// One thread per column c (coalesced across a warp); parallelism is only C, a first version.
extern "C" __global__ void layernorm_backward_params(float* __restrict__ dweight, float* __restrict__ dbias,
        const float* __restrict__ dout, const float* __restrict__ inp, const float* __restrict__ mean,
        const float* __restrict__ rstd, int N, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float dw = 0.0f, db = 0.0f;
    for (int row = 0; row < N; row++) {
        long long at = (long long) row * C + c;
        float d = dout[at];
        dw += d * (inp[at] - mean[row]) * rstd[row];
        db += d;
    }
    dweight[c] += dw;
    dbias[c] += db;
}
