// Runs CUDA C kernels on the CPU for checking indexing: one std::thread per CUDA thread, blocks one after another,
// __syncthreads a block barrier, __syncwarp a warp barrier, warp shuffles and votes through a per-warp exchange slot
// between two warp barriers. Threads are numbered x fastest, then y, then z, and warps are 32 consecutive numbers, as
// on the GPU; a thread that returns leaves the barriers (an exited thread no longer holds up __syncthreads).
// emu/ holds stand-ins for <cuda_bf16.h> and <mma.h> (wmma) for kernels that include them, and wgmma_emu.h, the
// Hopper instructions of attention_wgmma.cu (warpgroup MMA, cp.async; its warpgroup barrier is emu_syncwarpgroup),
// and tma_emu.h, its TMA copies, mbarriers and the driver's tensor-map encoder.
//
// `__shared__` expands to nothing, which gives every emulated thread its own copy of a static __shared__ array; a
// harness whose kernels share such arrays redefines it as `static` after this header (blocks run one at a time, so
// a function-local static is the block's shared memory; like CUDA's, it is not cleared between blocks).
#pragma once
#include <algorithm>
#include <barrier>
#include <bit>
#include <cmath>
#include <functional>
#include <thread>
#include <vector>
#include <cstdint>

// (#undef first: a harness may have included CUDA's own headers, e.g. cuda_fp8.h, which define these for the host)
#undef __global__
#undef __device__
#undef __forceinline__
#undef __launch_bounds__
#undef __shared__
#undef __restrict__
#undef __align__
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))

struct uint3e { unsigned x, y, z; };
#ifndef __VECTOR_TYPES_H__  // not when the harness includes the CUDA headers themselves (e.g. cuda_fp8.h) first
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(8) uint2 { unsigned x, y; };
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
#endif

// The IEEE round-to-nearest intrinsics: plain C++ operations, correctly rounded as long as the harness is built with
// -ffp-contract=off (no fused multiply-adds), as CUDA's __f*_rn are never fused.
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline unsigned __float_as_uint(float x) { return std::bit_cast<unsigned>(x); }

// The math library, where CUDA's is not the C library's: rsqrtf is 1/sqrtf here, correctly rounded twice, the GPU's
// is an approximation within 2 ulp; expf, logf and tanhf are glibc's (within 1 ulp), the GPU's within 2 ulp (1 for
// logf). fmaxf, fabsf and sqrtf are exact on both.
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
using ::expf;
using ::logf;
using ::tanhf;
using ::fmaxf;
using ::fabsf;

inline thread_local uint3e threadIdx, blockIdx;
inline thread_local int emu_tid;  // threadIdx as one number, x fastest: warp emu_tid / 32, lane emu_tid % 32
inline uint3e gridDim, blockDim;
using std::min;
using std::max;

struct EmuBlock {
    std::barrier<> block;
    std::vector<std::barrier<>*> warps;
    std::vector<std::barrier<>*> warpgroups;  // 4 consecutive warps (128 threads): Hopper's wgmma unit
    double slot[32][32];
    int vote[1024];
    explicit EmuBlock(int threads) : block(threads) {
        for (int w = 0; w < (threads + 31) / 32; w++)  // a last partial warp waits for its threads only
            warps.push_back(new std::barrier<>(std::min(32, threads - 32 * w)));
        for (int g = 0; g < (threads + 127) / 128; g++)
            warpgroups.push_back(new std::barrier<>(std::min(128, threads - 128 * g)));
    }
    ~EmuBlock() {
        for (auto* w : warps) delete w;
        for (auto* g : warpgroups) delete g;
    }
};
inline EmuBlock* emu_block;

inline void __syncthreads() { emu_block->block.arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu_block->warps[emu_tid >> 5]->arrive_and_wait(); }
// A barrier of the caller's warpgroup (threads 128g … 128g+127): what a .sync.aligned wgmma instruction implies.
inline void emu_syncwarpgroup() { emu_block->warpgroups[emu_tid >> 7]->arrive_and_wait(); }

// Nonzero if pred is nonzero in any thread of the block (a barrier, as __syncthreads).
inline int __syncthreads_or(int pred) {
    emu_block->vote[emu_tid] = pred;
    int n = (int) (blockDim.x * blockDim.y * blockDim.z), any = 0;
    __syncthreads();
    for (int t = 0; t < n; t++) any |= emu_block->vote[t] != 0;
    __syncthreads();
    return any;
}

template <typename F>
inline auto emu_shfl(F v, int src) {
    int lane = emu_tid & 31, warp = emu_tid >> 5;
    auto* b = emu_block->warps[warp];
    emu_block->slot[warp][lane] = (double) v;
    b->arrive_and_wait();
    F r = (F) emu_block->slot[warp][src & 31];
    b->arrive_and_wait();
    return r;
}
template <typename F> inline F __shfl_sync(unsigned, F v, int src) { return emu_shfl(v, src); }
template <typename F> inline F __shfl_xor_sync(unsigned, F v, int o) {
    return emu_shfl(v, (emu_tid & 31) ^ o);
}
// Lane i + d's value, or the caller's own where i + d ≥ 32.
template <typename F> inline F __shfl_down_sync(unsigned, F v, unsigned d) {
    int src = (emu_tid & 31) + (int) d;
    return emu_shfl(v, src < 32 ? src : emu_tid & 31);
}
// Nonzero if pred is nonzero in any lane of the (full) warp.
inline int __any_sync(unsigned, int pred) {
    int lane = emu_tid & 31, warp = emu_tid >> 5, any = 0;
    auto* b = emu_block->warps[warp];
    emu_block->slot[warp][lane] = pred != 0;
    b->arrive_and_wait();
    for (int l = 0; l < 32; l++) any |= emu_block->slot[warp][l] != 0;
    b->arrive_and_wait();
    return any;
}

// The maximum of v over the (full) warp, every lane gets it.
inline unsigned __reduce_max_sync(unsigned, unsigned v) {
    int lane = emu_tid & 31, warp = emu_tid >> 5;
    unsigned m = 0;
    auto* b = emu_block->warps[warp];
    emu_block->slot[warp][lane] = v;
    b->arrive_and_wait();
    for (int l = 0; l < 32; l++) m = std::max(m, (unsigned) emu_block->slot[warp][l]);
    b->arrive_and_wait();
    return m;
}

// Launches kernel(args...) on grid × block threads: one std::thread per thread of a block, reused for every block
// (x fastest, then y, then z), the blocks one after another.
template <typename K, typename... A>
void emu_launch(uint3e grid, uint3e block, K kernel, A... args) {
    gridDim = grid;
    blockDim = block;
    int threads = (int) (block.x * block.y * block.z);
    unsigned blocks = grid.x * grid.y * grid.z;
    std::barrier<> go(threads + 1), done(threads + 1);  // the launching thread starts and ends each block
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; t++)
        ts.emplace_back([=, &go, &done] {
            emu_tid = t;
            threadIdx = {t % block.x, t / block.x % block.y, t / (block.x * block.y)};
            for (unsigned b = 0; b < blocks; b++) {
                go.arrive_and_wait();
                blockIdx = {b % grid.x, b / grid.x % grid.y, b / (grid.x * grid.y)};
                kernel(args...);
                emu_block->block.arrive_and_drop();
                emu_block->warps[t >> 5]->arrive_and_drop();
                emu_block->warpgroups[t >> 7]->arrive_and_drop();
                done.arrive_and_wait();
            }
        });
    for (unsigned b = 0; b < blocks; b++) {
        EmuBlock blk(threads);
        emu_block = &blk;
        go.arrive_and_wait();
        done.arrive_and_wait();
    }
    for (auto& t : ts) t.join();
}

// A launch on a 1-D block of `threads` threads.
template <typename K, typename... A>
void emu_launch(uint3e grid, int threads, K kernel, A... args) {
    emu_launch(grid, uint3e{(unsigned) threads, 1, 1}, kernel, args...);
}
