// Whole-buffer reductions: each block writes one partial per block, the host combines the gridDim.x partials in
// block order, so the result is deterministic for a given grid size. Block size 256 (BLOCK below), any grid.
#include "common.cuh"
#define BLOCK 256

// partial[blockIdx.x] (gridDim.x doubles) = Σ x[i]² over the block's grid-stride share of x (n), in float64.
extern "C" __global__ void __launch_bounds__(BLOCK) sum_of_squares(double* __restrict__ partial,
        const float* __restrict__ x, long long n) {
    __shared__ double scratch[BLOCK / 32];
    double acc = 0.0;
    long long stride = (long long) gridDim.x * blockDim.x;
    for (long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        double v = x[i];
        acc += v * v;
    }
    acc = warp_sum_d(acc);
    if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        double total = 0.0;
        for (int w = 0; w < BLOCK / 32; w++) total += scratch[w];
        partial[blockIdx.x] = total;
    }
}

// partial[blockIdx.x] (gridDim.x floats) = max |x[i]| over the block's share (0 when empty); NaN if any is NaN.
extern "C" __global__ void __launch_bounds__(BLOCK) amax(float* __restrict__ partial, const float* __restrict__ x,
        long long n) {
    __shared__ float scratch[BLOCK / 32];
    float acc = 0.0f;
    long long stride = (long long) gridDim.x * blockDim.x;
    for (long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float a = fabsf(x[i]);
        acc = (a > acc || a != a) ? a : acc;  // NaN sticks (fmaxf would drop it)
        if (acc != acc) break;
    }
    // the warp and block maxima propagate NaN too: pack "is NaN" into a vote, then take the ordinary max
    bool nan = __any_sync(0xffffffffu, acc != acc);
    float m = warp_max(acc != acc ? 0.0f : acc);
    if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = nan ? NAN : m;
    __syncthreads();
    if (threadIdx.x == 0) {
        float total = 0.0f;
        for (int w = 0; w < BLOCK / 32; w++) {
            float s = scratch[w];
            total = (s != s || total != total) ? NAN : fmaxf(total, s);
        }
        partial[blockIdx.x] = total;
    }
}

// partial[blockIdx.x] (gridDim.x ints) = 1 if any value of the block's share of x (n) is NaN or ±inf, else 0.
extern "C" __global__ void __launch_bounds__(BLOCK) has_non_finite(int* __restrict__ partial,
        const float* __restrict__ x, long long n) {
    int bad = 0;
    long long stride = (long long) gridDim.x * blockDim.x;
    for (long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        bad |= (__float_as_uint(x[i]) & 0x7F800000u) == 0x7F800000u;
    }
    bad = __syncthreads_or(bad);
    if (threadIdx.x == 0) partial[blockIdx.x] = bad ? 1 : 0;
}
