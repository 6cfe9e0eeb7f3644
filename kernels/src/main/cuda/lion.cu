// Fused Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms"), bit-identical to the CPU kernel
// io.accel4j.cpu.ops.Lion.

// sign(c): 1, −1, +0 for ±0, and NaN stays NaN (Lion.sign on the CPU).
__device__ __forceinline__ float lion_sign(float c) {
    return c > 0.0f ? 1.0f : c < 0.0f ? -1.0f : c == 0.0f ? 0.0f : c;
}

// Lion on fp32: for i in [0, length), the CPU's fp32 operations in the CPU's order, each rounded on its own (no FMA
// contraction: the __f*_rn intrinsics are never fused):
//   g = grads[i]·grad_scale
//   c = beta1·m[i] + (1 − beta1)·g
//   params[i] = params[i]·decay − sign(c)·lr        (sign(c)·lr is exact)
//   m[i] = beta2·m[i] + (1 − beta2)·g
// with decay = 1 − lr·weight_decay computed by the host in float64 and rounded to fp32 (LionConfig.decayFactor).
// Shapes: params, grads, m each hold length floats. Grid-stride loop, any 1-D grid.
extern "C" __global__ void lion_f32(float* __restrict__ params, const float* __restrict__ grads,
        float* __restrict__ m, long long length, float lr, float beta1, float beta2, float decay, float grad_scale) {
    float omb1 = __fsub_rn(1.0f, beta1), omb2 = __fsub_rn(1.0f, beta2);
    long long stride = (long long) gridDim.x * blockDim.x;
    for (long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x; i < length; i += stride) {
        float gs = __fmul_rn(grads[i], grad_scale);
        float mi = m[i];
        float c = __fadd_rn(__fmul_rn(mi, beta1), __fmul_rn(gs, omb1));
        params[i] = __fsub_rn(__fmul_rn(params[i], decay), __fmul_rn(lion_sign(c), lr));
        m[i] = __fadd_rn(__fmul_rn(mi, beta2), __fmul_rn(gs, omb2));
    }
}
