// Bulk casts between fp32 and the narrow types, bit-identical to core's DType.encode / decode (io.accel4j.core.Bf16,
// Fp16, Fp8E4M3, Fp8E5M2): round to nearest, ties to even; subnormals and signed zeros kept; fp8 saturating.
//
// Rounding comes from the CUDA headers' intrinsics, checked against core's rules:
//  - __float2bfloat16_rn / __float2half_rn are PTX cvt.rn.bf16.f32 / cvt.rn.f16.f32: IEEE round to nearest even,
//    no flush to zero (no .ftz), overflow to ±inf — core's Bf16.fromFloat and Float.floatToFloat16.
//  - __nv_cvt_float_to_fp8(x, __NV_SATFINITE, …) is, for the sm_80 PTX, cuda_fp8.hpp's software path (the sm_89
//    cvt.rn.satfinite instruction is behind __CUDA_ARCH__ >= 890): exact float→double, then RNE on the double with
//    the same thresholds as core (E4M3: |x| > 464 → ±448, |x| ≤ 2^-10 → ±0; E5M2: |x| ≥ 61440 → ±57344,
//    |x| ≤ 2^-17 → ±0; ±inf → ±max). The sm_90a PTX (loaded on compute capability 9.0) takes the instructions
//    (cvt.rn.satfinite.e4m3x2.f32 / e5m2x2, and cvt.rn.f16x2.e4m3x2 / e5m2x2 to decode): the same rounding, but
//    CastHostCheckTest runs the software path only; GpuOpsTest checks the instructions on an H100/H200.
// NaN is where CUDA and core differ, so NaN is handled here before any intrinsic sees it:
//  - bf16: (bits >> 16) | 0x0040, sign and top payload kept, quiet bit set (Bf16.fromFloat); CUDA gives 0x7FFF.
//  - fp16: sign | 0x7E00 | payload >> 13, the IEEE quieting that x86's F16C (the JDK's intrinsic) does; the JDK's
//    portable code keeps other payload bits, so the tests compare fp16 NaNs by sign only.
//  - fp8: 0x7F | sign (Fp8E4M3/E5M2.fromFloat); CUDA drops the sign. The sign is x's: the host multiplies x·scale
//    and x86 keeps a NaN operand's sign, the GPU's multiply would not (it gives the canonical NaN).
//  - decoding: bf16 and fp8 NaN codes decode to sign | 0x7FC00000 (fp8) or the shifted bits (bf16); fp16 NaN to
//    sign | 0x7FC00000 | payload << 13 (F16C again).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <string.h>
#define BLOCK 256

// The element conversions are __host__ __device__ so that CastHostCheckTest can run this very code on the CPU (the
// bf16/fp16 intrinsics then take the headers' host emulation; fp8 takes the same software path as this sm_80 PTX).

__host__ __device__ __forceinline__ unsigned int f2u(float x) { unsigned int u; memcpy(&u, &x, 4); return u; }
__host__ __device__ __forceinline__ float u2f(unsigned int u) { float x; memcpy(&x, &u, 4); return x; }
__host__ __device__ __forceinline__ bool is_nan_bits(unsigned int bits) { return (bits & 0x7FFFFFFFu) > 0x7F800000u; }

// x · s rounded once to fp32 (no contraction with anything: there is nothing to fuse).
__host__ __device__ __forceinline__ float mul_rn(float x, float s) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(x, s);
#else
    return x * s;
#endif
}

__host__ __device__ __forceinline__ unsigned short f32_to_bf16(float x) {
    unsigned int bits = f2u(x);
    if (is_nan_bits(bits)) return (unsigned short) ((bits >> 16) | 0x0040u);
    __nv_bfloat16 h = __float2bfloat16_rn(x);
    unsigned short u;
    memcpy(&u, &h, 2);
    return u;
}

__host__ __device__ __forceinline__ unsigned short f32_to_f16(float x) {
    unsigned int bits = f2u(x);
    if (is_nan_bits(bits)) return (unsigned short) (((bits >> 16) & 0x8000u) | 0x7E00u | ((bits >> 13) & 0x3FFu));
    __half h = __float2half_rn(x);
    unsigned short u;
    memcpy(&u, &h, 2);
    return u;
}

// The fp8 code of x · scale, saturating; NaN → 0x7F with x's sign.
__host__ __device__ __forceinline__ unsigned char f32_to_fp8(float x, float scale, __nv_fp8_interpretation_t kind) {
    unsigned int bits = f2u(x);
    if (is_nan_bits(bits)) return (unsigned char) (0x7Fu | ((bits >> 24) & 0x80u));
    return __nv_cvt_float_to_fp8(mul_rn(x, scale), __NV_SATFINITE, kind);
}

__host__ __device__ __forceinline__ float bf16_to_f32(unsigned short h) { return u2f((unsigned int) h << 16); }

__host__ __device__ __forceinline__ float f16_to_f32(unsigned short h) {
    if ((h & 0x7FFFu) > 0x7C00u) return u2f(((h & 0x8000u) << 16) | 0x7FC00000u | ((h & 0x3FFu) << 13));
    __half v;
    memcpy(&v, &h, 2);
    return __half2float(v);
}

// decode(c) · scaleInv; NaN codes (E4M3 0x7F, E5M2 0x7D..0x7F, either sign) → sign | 0x7FC00000, not multiplied.
__host__ __device__ __forceinline__ float fp8_to_f32(unsigned char c, float scaleInv, __nv_fp8_interpretation_t kind) {
    unsigned int nanFrom = kind == __NV_E4M3 ? 0x7Fu : 0x7Du;
    if ((c & 0x7Fu) >= nanFrom) return u2f(((c & 0x80u) << 24) | 0x7FC00000u);
    __half_raw h = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t) c, kind);
    return mul_rn(__half2float(__half(h)), scaleInv);
}

// dst (n, bf16 bits) = round(src (n, fp32)). Grid-stride.
extern "C" __global__ void cast_f32_to_bf16(unsigned short* __restrict__ dst, const float* __restrict__ src,
        long long n) {
    long long stride = (long long) gridDim.x * blockDim.x;
    for (long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        dst[i] = f32_to_bf16(src[i]);
    }
}

// dst (n, fp16 bits) = round(src (n, fp32)). Grid-stride.
extern "C" __global__ void cast_f32_to_f16(unsigned short* __restrict__ dst, const float* __restrict__ src,
        long long n) {
    long long stride = (long long) gridDim.x * blockDim.x;
    for (long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        dst[i] = f32_to_f16(src[i]);
    }
}

// max(amax, |x|) on the bit patterns (|x| compares as its bits); NaN left out.
__device__ __forceinline__ unsigned int amax_bits(unsigned int amax, float x) {
    unsigned int abs = f2u(x) & 0x7FFFFFFFu;
    return abs <= 0x7F800000u ? max(amax, abs) : amax;
}

// The max of every thread's amax over a block of BLOCK threads (any shape, linear order), in thread 0 (the other
// threads get their warp's).
__device__ __forceinline__ unsigned int block_max_bits(unsigned int amax) {
    __shared__ unsigned int scratch[BLOCK / 32];
    int t = threadIdx.y * blockDim.x + threadIdx.x;
    amax = __reduce_max_sync(0xffffffffu, amax);
    if ((t & 31) == 0) scratch[t >> 5] = amax;
    __syncthreads();
    if (t == 0) {
        for (int w = 0; w < BLOCK / 32; w++) amax = max(amax, scratch[w]);
    }
    return amax;
}

// partial[blockIdx.x] = the max of every thread's amax over a block of BLOCK threads (any shape, linear order).
__device__ __forceinline__ void store_block_max(unsigned int amax, unsigned int* __restrict__ partial) {
    amax = block_max_bits(amax);
    if (threadIdx.y * blockDim.x + threadIdx.x == 0) partial[blockIdx.x] = amax;
}

// dst (n, fp8 codes) = round_satfinite(src · scale) as E4M3 (e4m3 != 0) or E5M2; partial[blockIdx.x] (gridDim.x
// uints) = max |src| over the block's share as a bit pattern (|x| compares as its bits), NaN ignored, 0 when empty.
// The host takes the max of the partials. Block size BLOCK.
extern "C" __global__ void __launch_bounds__(BLOCK) cast_f32_to_fp8(unsigned char* __restrict__ dst,
        unsigned int* __restrict__ partial, const float* __restrict__ src, long long n, float scale, int e4m3) {
    __nv_fp8_interpretation_t kind = e4m3 ? __NV_E4M3 : __NV_E5M2;
    unsigned int amax = 0;
    long long stride = (long long) gridDim.x * blockDim.x;
    for (long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float x = src[i];
        amax = amax_bits(amax, x);
        dst[i] = f32_to_fp8(x, scale, kind);
    }
    store_block_max(amax, partial);
}

#define TILE 32
// dst (R, C fp8 codes) = round_satfinite(src · scale) and dstT (C, R) = its transpose, for src (R, C) fp32 row-major,
// E4M3 (e4m3 != 0) or E5M2; partial[blockIdx.x] (gridDim.x uints) = max |src| over the block's tiles as bits, NaN
// ignored, 0 when none (as cast_f32_to_fp8). cuBLASLt's FP8 GEMMs take K-major operands only ("TN"), so a backward
// pass needs both the codes and their transpose: one read of src gives both. TILE×TILE tiles through shared memory
// (the transposed writes stay coalesced), block (TILE, BLOCK / TILE), grid-stride over the tiles in row-major order.
extern "C" __global__ void __launch_bounds__(BLOCK) cast_transpose_f32_to_fp8(unsigned char* __restrict__ dst,
        unsigned char* __restrict__ dstT, unsigned int* __restrict__ partial, const float* __restrict__ src, int R,
        int C, float scale, int e4m3) {
    __shared__ unsigned char tile[TILE][TILE + 1];
    __nv_fp8_interpretation_t kind = e4m3 ? __NV_E4M3 : __NV_E5M2;
    unsigned int amax = 0;
    int tilesC = (C + TILE - 1) / TILE;
    int tiles = ((R + TILE - 1) / TILE) * tilesC;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int r0 = (t / tilesC) * TILE, c0 = (t % tilesC) * TILE;
        for (int i = threadIdx.y; i < TILE; i += blockDim.y) {
            int r = r0 + i, c = c0 + threadIdx.x;
            if (r < R && c < C) {
                float x = src[(long long) r * C + c];
                amax = amax_bits(amax, x);
                unsigned char code = f32_to_fp8(x, scale, kind);
                dst[(long long) r * C + c] = code;
                tile[i][threadIdx.x] = code;
            }
        }
        __syncthreads();
        for (int i = threadIdx.y; i < TILE; i += blockDim.y) {
            int c = c0 + i, r = r0 + threadIdx.x;
            if (r < R && c < C) dstT[(long long) c * R + r] = tile[threadIdx.x][i];
        }
        __syncthreads();
    }
    store_block_max(amax, partial);
}

// An FP8 cast's amax into its tensor's device slot, so that the host need not wait for it (GpuMatmul's Fp8Slots):
// m = max of partial[0..n) (the cast's per-block |x| bit patterns: NaN already left out, each ≤ +inf's 0x7F800000,
// so the largest pattern is the largest value); slot[0] = m when first (the slot's first cast since the host last read
// it), else max(slot[0], m) (the step's casts keep their maximum, as AmaxHistory.record does); slot[1] = scaleInv's
// bits (the dequantisation factor of the codes just cast: cuBLASLt reads it through a device pointer, in stream
// order, so the host uploads nothing). One block of BLOCK threads; no atomics (deterministic).
extern "C" __global__ void __launch_bounds__(BLOCK) fp8_amax_to_slot(unsigned int* __restrict__ slot,
        const unsigned int* __restrict__ partial, int n, float scaleInv, int first) {
    unsigned int amax = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) amax = max(amax, partial[i]);
    amax = block_max_bits(amax);
    if (threadIdx.x == 0) {
        slot[0] = first ? amax : max(slot[0], amax);
        slot[1] = f2u(scaleInv);
    }
}

// dst (n, fp32) = src (n, bf16 bits), exact. Grid-stride.
extern "C" __global__ void cast_bf16_to_f32(float* __restrict__ dst, const unsigned short* __restrict__ src,
        long long n) {
    long long stride = (long long) gridDim.x * blockDim.x;
    for (long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        dst[i] = bf16_to_f32(src[i]);
    }
}

// dst (n, fp32) = src (n, fp16 bits), exact. Grid-stride.
extern "C" __global__ void cast_f16_to_f32(float* __restrict__ dst, const unsigned short* __restrict__ src,
        long long n) {
    long long stride = (long long) gridDim.x * blockDim.x;
    for (long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        dst[i] = f16_to_f32(src[i]);
    }
}

// dst (n, fp32) = decode(src (n, fp8 codes)) · scaleInv, E4M3 (e4m3 != 0) or E5M2 (fp8 → half → float is exact).
// Grid-stride.
extern "C" __global__ void cast_fp8_to_f32(float* __restrict__ dst, const unsigned char* __restrict__ src,
        long long n, float scaleInv, int e4m3) {
    __nv_fp8_interpretation_t kind = e4m3 ? __NV_E4M3 : __NV_E5M2;
    long long stride = (long long) gridDim.x * blockDim.x;
    for (long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        dst[i] = fp8_to_f32(src[i], scaleInv, kind);
    }
}
