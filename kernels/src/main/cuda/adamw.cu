// Fused AdamW (llm.c's adamw_kernel3), bit-identical to the CPU kernel io.accel4j.cpu.ops.AdamW.
#include <stdint.h>

// CounterRng.bits(seed, index): SplitMix64 read at position index (see io.accel4j.core.CounterRng).
__device__ __forceinline__ uint32_t counter_rng_bits(uint64_t seed, uint64_t index) {
    uint64_t z = seed + (index + 1ull) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z = z ^ (z >> 31);
    return (uint32_t) (z >> 32);
}

// Bf16.fromFloatStochastic: add the low 16 random bits to the pattern and truncate; NaN -> quiet NaN, sign kept.
__device__ __forceinline__ uint16_t bf16_stochastic(float x, uint32_t random) {
    uint32_t bits = __float_as_uint(x);
    if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t) ((bits >> 16) | 0x0040u);
    return (uint16_t) ((bits + (random & 0xFFFFu)) >> 16);
}

// One element, the CPU's fp32 operations in the CPU's order, each rounded on its own (no FMA contraction:
// the __f*_rn intrinsics are never fused), IEEE division and square root.
__device__ __forceinline__ float adamw_element(float* __restrict__ p, const float* __restrict__ g,
        float* __restrict__ m, float* __restrict__ v, long long i, float lr, float beta1, float beta2,
        float eps, float wd, float c1, float c2, float grad_scale) {
    float gs = __fmul_rn(g[i], grad_scale);
    float mi = __fadd_rn(__fmul_rn(m[i], beta1), __fmul_rn(gs, __fsub_rn(1.0f, beta1)));
    float vi = __fadd_rn(__fmul_rn(v[i], beta2), __fmul_rn(__fmul_rn(gs, gs), __fsub_rn(1.0f, beta2)));
    m[i] = mi;
    v[i] = vi;
    float pi = p[i];
    float upd = __fadd_rn(__fdiv_rn(__fmul_rn(mi, c1), __fadd_rn(__fsqrt_rn(__fmul_rn(vi, c2)), eps)),
                          __fmul_rn(pi, wd));
    float pn = __fsub_rn(pi, __fmul_rn(upd, lr));
    p[i] = pn;
    return pn;
}

// AdamW on fp32: for i in [0, length): g = grad_scale·grads[i]; m = β1·m + (1−β1)·g; v = β2·v + (1−β2)·g²;
// p −= lr·((m·c1)/(√(v·c2) + eps) + wd·p), with c1 = 1/(1−β1ᵗ), c2 = 1/(1−β2ᵗ) computed by the host.
// Shapes: params, grads, m, v each hold length floats. Grid-stride loop, any 1-D grid.
extern "C" __global__ void adamw_f32(float* __restrict__ params, const float* __restrict__ grads,
        float* __restrict__ m, float* __restrict__ v, long long length, float lr, float beta1, float beta2,
        float eps, float wd, float c1, float c2, float grad_scale) {
    long long stride = (long long) gridDim.x * blockDim.x;
    for (long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x; i < length; i += stride) {
        adamw_element(params, grads, m, v, i, lr, beta1, beta2, eps, wd, c1, c2, grad_scale);
    }
}

// The same on fp32 master weights, then params_bf16[i] = Bf16.fromFloatStochastic(master[i],
// CounterRng.bits(seed, offset + i)); offset is the range's first index in the whole parameter vector.
// Shapes: master, grads, m, v hold length floats, params_bf16 length bf16 (uint16).
extern "C" __global__ void adamw_bf16(uint16_t* __restrict__ params_bf16, float* __restrict__ master,
        const float* __restrict__ grads, float* __restrict__ m, float* __restrict__ v, long long offset,
        long long length, float lr, float beta1, float beta2, float eps, float wd, float c1, float c2,
        float grad_scale, unsigned long long seed) {
    long long stride = (long long) gridDim.x * blockDim.x;
    for (long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x; i < length; i += stride) {
        float pn = adamw_element(master, grads, m, v, i, lr, beta1, beta2, eps, wd, c1, c2, grad_scale);
        params_bf16[i] = bf16_stochastic(pn, counter_rng_bits(seed, (uint64_t) (offset + i)));
    }
}
