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

// ---- multi-range AdamW: the whole optimizer step in one launch

// One row of the range table (io.accel4j.core.ops.AdamWRange): elements [start, start + length) of the flat
// buffers, whose first element is element `offset` of the whole parameter vector (the stochastic-rounding stream; a
// ZeRO shard's start differs from it), with decoupled weight decay wd, worked on by the launch's blocks
// [first_block, next row's first_block). 32 bytes; the host (AdamWGpu) builds it, ⌈length / ADAMW_CHUNK⌉ blocks a
// row.
struct AdamwRange {
    long long start;
    long long offset;
    long long length;
    int first_block;
    float wd;
};

// Elements per block: 256 threads × 4 (one float4 each) × 4 passes.
#define ADAMW_THREADS 256
#define ADAMW_CHUNK (ADAMW_THREADS * 16)

// The row whose blocks include `block` (rows in block order; a linear scan: the table has a few dozen rows).
__device__ __forceinline__ int adamw_row(const AdamwRange* __restrict__ table, int rows, int block) {
    int r = 0;
    while (r + 1 < rows && table[r + 1].first_block <= block) r++;
    return r;
}

// Four consecutive elements i..i+3 of one row: the 16-byte loads and stores when every buffer is aligned for them
// (aligned4), else one element at a time; the arithmetic is adamw_element's either way, so the results are
// bit-identical to the CPU kernel and to adamw_f32/adamw_bf16.
template <bool BF16>
__device__ __forceinline__ void adamw_quad(uint16_t* __restrict__ pb, float* __restrict__ p,
        const float* __restrict__ g, float* __restrict__ m, float* __restrict__ v, long long i, long long n,
        bool aligned4, long long offset, float lr, float beta1, float beta2, float eps, float wd, float c1, float c2,
        float grad_scale, unsigned long long seed) {
    if (aligned4 && i + 4 <= n) {
        float4 p4 = *reinterpret_cast<const float4*>(p + i), g4 = *reinterpret_cast<const float4*>(g + i);
        float4 m4 = *reinterpret_cast<const float4*>(m + i), v4 = *reinterpret_cast<const float4*>(v + i);
        float pp[4] = {p4.x, p4.y, p4.z, p4.w}, gg[4] = {g4.x, g4.y, g4.z, g4.w};
        float mm[4] = {m4.x, m4.y, m4.z, m4.w}, vv[4] = {v4.x, v4.y, v4.z, v4.w};
        for (int k = 0; k < 4; k++) {
            adamw_element(pp, gg, mm, vv, k, lr, beta1, beta2, eps, wd, c1, c2, grad_scale);
        }
        *reinterpret_cast<float4*>(p + i) = make_float4(pp[0], pp[1], pp[2], pp[3]);
        *reinterpret_cast<float4*>(m + i) = make_float4(mm[0], mm[1], mm[2], mm[3]);
        *reinterpret_cast<float4*>(v + i) = make_float4(vv[0], vv[1], vv[2], vv[3]);
        if (BF16) {
            uint32_t lo = bf16_stochastic(pp[0], counter_rng_bits(seed, (uint64_t) (offset + i)))
                    | (uint32_t) bf16_stochastic(pp[1], counter_rng_bits(seed, (uint64_t) (offset + i + 1))) << 16;
            uint32_t hi = bf16_stochastic(pp[2], counter_rng_bits(seed, (uint64_t) (offset + i + 2)))
                    | (uint32_t) bf16_stochastic(pp[3], counter_rng_bits(seed, (uint64_t) (offset + i + 3))) << 16;
            *reinterpret_cast<uint2*>(pb + i) = make_uint2(lo, hi);
        }
        return;
    }
    for (long long j = i; j < i + 4 && j < n; j++) {
        float pn = adamw_element(p, g, m, v, j, lr, beta1, beta2, eps, wd, c1, c2, grad_scale);
        if (BF16) pb[j] = bf16_stochastic(pn, counter_rng_bits(seed, (uint64_t) (offset + j)));
    }
}

template <bool BF16>
__device__ __forceinline__ void adamw_multi(uint16_t* __restrict__ params_bf16, float* __restrict__ params,
        const float* __restrict__ grads, float* __restrict__ m, float* __restrict__ v,
        const AdamwRange* __restrict__ table, int rows, float lr, float beta1, float beta2, float eps, float c1,
        float c2, float grad_scale, unsigned long long seed) {
    const AdamwRange row = table[adamw_row(table, rows, blockIdx.x)];
    long long o = row.start, n = row.length;
    float* p = params + o;
    const float* g = grads + o;
    float* mr = m + o;
    float* vr = v + o;
    uint16_t* pb = BF16 ? params_bf16 + o : nullptr;
    uintptr_t bits = (uintptr_t) p | (uintptr_t) g | (uintptr_t) mr | (uintptr_t) vr;
    bool aligned4 = (bits & 15) == 0 && (!BF16 || ((uintptr_t) pb & 7) == 0);
    long long start = (long long) (blockIdx.x - row.first_block) * ADAMW_CHUNK;
    for (int pass = 0; pass < ADAMW_CHUNK / (4 * ADAMW_THREADS); pass++) {
        long long i = start + ((long long) pass * ADAMW_THREADS + threadIdx.x) * 4;
        if (i < n) {
            adamw_quad<BF16>(pb, p, g, mr, vr, i, n, aligned4, row.offset, lr, beta1, beta2, eps, row.wd, c1, c2,
                    grad_scale, seed);
        }
    }
}

// adamw_f32 over every row of table (rows entries, device memory) in one launch: grid = the last row's
// first_block + its blocks, block ADAMW_THREADS. params, grads, m, v are the flat buffers the rows index.
extern "C" __global__ void __launch_bounds__(ADAMW_THREADS) adamw_f32_multi(float* __restrict__ params,
        const float* __restrict__ grads, float* __restrict__ m, float* __restrict__ v,
        const AdamwRange* __restrict__ table, int rows, float lr, float beta1, float beta2, float eps, float c1,
        float c2, float grad_scale) {
    adamw_multi<false>(nullptr, params, grads, m, v, table, rows, lr, beta1, beta2, eps, c1, c2, grad_scale, 0);
}

// adamw_bf16 over every row of table in one launch (as adamw_f32_multi), params_bf16 indexed as master.
extern "C" __global__ void __launch_bounds__(ADAMW_THREADS) adamw_bf16_multi(uint16_t* __restrict__ params_bf16,
        float* __restrict__ master, const float* __restrict__ grads, float* __restrict__ m, float* __restrict__ v,
        const AdamwRange* __restrict__ table, int rows, float lr, float beta1, float beta2, float eps, float c1,
        float c2, float grad_scale, unsigned long long seed) {
    adamw_multi<true>(params_bf16, master, grads, m, v, table, rows, lr, beta1, beta2, eps, c1, c2, grad_scale,
            seed);
}
