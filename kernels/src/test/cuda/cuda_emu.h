// Runs CUDA C kernels on the CPU for checking indexing: one std::thread per CUDA thread, blocks one after another,
// __syncthreads a block barrier, __syncwarp a warp barrier, warp shuffles through a per-warp exchange slot between
// two warp barriers. emu/ holds stand-ins for <cuda_bf16.h> and <mma.h> (wmma) for kernels that include them.
#pragma once
#include <algorithm>
#include <barrier>
#include <bit>
#include <cmath>
#include <functional>
#include <thread>
#include <vector>
#include <cstdint>

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))

struct uint3e { unsigned x, y, z; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(8) uint2 { unsigned x, y; };
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }

// The IEEE round-to-nearest intrinsics: plain C++ operations, correctly rounded as long as the harness is built with
// -ffp-contract=off (no fused multiply-adds), as CUDA's __f*_rn are never fused.
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline unsigned __float_as_uint(float x) { return std::bit_cast<unsigned>(x); }
inline thread_local uint3e threadIdx, blockIdx;
inline uint3e gridDim, blockDim;
using std::min;
using std::max;

struct EmuBlock {
    std::barrier<> block;
    std::vector<std::barrier<>*> warps;
    double slot[32][32];
    explicit EmuBlock(int threads) : block(threads) {
        for (int w = 0; w < threads / 32; w++) warps.push_back(new std::barrier<>(32));
    }
    ~EmuBlock() { for (auto* w : warps) delete w; }
};
inline EmuBlock* emu_block;

inline void __syncthreads() { emu_block->block.arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu_block->warps[threadIdx.x >> 5]->arrive_and_wait(); }

template <typename F>
inline auto emu_shfl(F v, int src) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    auto* b = emu_block->warps[warp];
    emu_block->slot[warp][lane] = (double) v;
    b->arrive_and_wait();
    F r = (F) emu_block->slot[warp][src & 31];
    b->arrive_and_wait();
    return r;
}
template <typename F> inline F __shfl_sync(unsigned, F v, int src) { return emu_shfl(v, src); }
template <typename F> inline F __shfl_xor_sync(unsigned, F v, int o) {
    return emu_shfl(v, (int) (threadIdx.x & 31) ^ o);
}

// Launches kernel(args...) on grid × block threads (blockDim.x only).
template <typename K, typename... A>
void emu_launch(uint3e grid, int threads, K kernel, A... args) {
    gridDim = grid;
    blockDim = {(unsigned) threads, 1, 1};
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                EmuBlock blk(threads);
                emu_block = &blk;
                std::vector<std::thread> ts;
                for (int t = 0; t < threads; t++)
                    ts.emplace_back([=] {
                        threadIdx = {(unsigned) t, 0, 0};
                        blockIdx = {x, y, z};
                        kernel(args...);
                    });
                for (auto& t : ts) t.join();
            }
}
