// The reduction step of an explicit ring all-reduce (collectives' NcclRingAllReduce): each rank combines the chunk
// it received from its left neighbour into its own, then AVG divides once at the end. Element-wise, grid-stride.

// Java's Math.max on floats: a NaN operand gives NaN, +0 is larger than -0 (fmaxf does neither).
__host__ __device__ __forceinline__ float java_max(float a, float b) {
    if (isnan(a) || isnan(b)) return a + b;
    if (a == b) return signbit(a) ? b : a;
    return a > b ? a : b;
}

// One element of ring_combine_f32 (host and device: src/test/cuda/ring_host_check.cu runs it on the host).
__host__ __device__ __forceinline__ float ring_combine_one(float acc, float in, int op) {
    return op == 0 ? acc + in : java_max(acc, in);
}

// acc (n) = acc op in, op 0: acc + in (fp32 add), op 1: java_max(acc, in). acc and in must not overlap.
extern "C" __global__ void ring_combine_f32(float* __restrict__ acc, const float* __restrict__ in, long long n,
        int op) {
    long long stride = (long long) gridDim.x * blockDim.x;
    for (long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        acc[i] = ring_combine_one(acc[i], in[i], op);
    }
}

// x (n) = x / divisor (one fp32 division per element: AVG's sum over N ranks divided by N).
extern "C" __global__ void ring_divide_f32(float* __restrict__ x, long long n, float divisor) {
    long long stride = (long long) gridDim.x * blockDim.x;
    for (long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        x[i] = x[i] / divisor;
    }
}
