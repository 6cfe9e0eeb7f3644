// CPU stand-ins for the Hopper instructions of attention_wgmma.cu (included by it when there is no __CUDA_ARCH__;
// put emu/ on the include path): cp.async, fence.proxy.async and the warpgroup MMA, wgmma.mma_async m64nNk16 with
// bf16 inputs and fp32 accumulators, A from shared memory or registers, B from shared memory.
//
// The point is to fail where the hardware would give a wrong result, so nothing here knows the kernel's layout:
//   - shared memory is read through the 64-bit matrix descriptor exactly as the PTX ISA defines it (9.7.15.5.1.2.2
//     "Matrix Descriptor Format": start address >> 4 in bits 0–13, leading-dimension byte offset (LBO) >> 4 in
//     16–29, stride-dimension byte offset (SBO) >> 4 in 32–45, base offset in 49–51, swizzle mode in 62–63) and the
//     canonical layouts of 9.7.15.5.1.2 "Shared Memory Matrix Layout" (as CUTLASS's cute/atom/mma_traits_sm90_gmma.hpp
//     writes them, in 16-byte units T: K-major 128B-swizzle ((8,m),(T,2)):((8T,SBO),(1,T)); MN-major 128B-swizzle
//     ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO))), then the 128-byte swizzle applied to the address (Swizzle<3,4,3>:
//     address bits 4–6 ^= bits 7–9) — so a tile that is not 1024-byte aligned, a wrong SBO/LBO, a wrong k-step
//     advance or an unswizzled store reads the wrong elements; only swizzle mode 1 (128B) with base offset 0 is
//     emulated, anything else aborts;
//   - register fragments are distributed over the 128 threads of the warpgroup per 9.7.15.5.1.1.1 ("Matrix
//     Fragments for wgmma.mma_async.m64nNk16"): warp w holds rows 16w … 16w+15; lane 4·gr + q holds accumulator
//     d[4i + 2h + e] = (row 16w + gr + 8h, column 8i + 2q + e) and A register v = bf16 pair (row 16w + gr + 8(v & 1),
//     columns 8(v >> 1) + 2q + {0, 1}), the lower column in the low half. Each emulated thread computes only its own
//     accumulator elements, reading A elements from the registers of whichever thread holds them;
//   - the MMA is asynchronous: its result reaches the accumulator registers at the wgmma.wait_group that retires its
//     group (a kernel reading them earlier reads the old values, as it might on the GPU); chained MMAs on the same
//     accumulator inside the pipeline see each other's results, as on the GPU;
//   - the descriptors, shape and accumulate flag must be the same in all 128 threads (.aligned), else it aborts.
// cp.async copies at once (a kernel must still wait and synchronise before other threads read: the block barrier
// is what publishes it here, as there); fences are no-ops. Products are exact in fp32 (bf16 inputs); sums run in
// k order in fp32 (the hardware's internal order and precision are unspecified).
#pragma once
#include "cuda_bf16.h"
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

// The emulated shared window: shared address a is host address emu_smem_origin + a; [emu_smem_lo, emu_smem_hi) is
// what the launch may touch (the harness sets them: the dynamic allocation, at a shared address of its choosing).
inline uintptr_t emu_smem_origin;
inline uint32_t emu_smem_lo, emu_smem_hi;

[[noreturn]] inline void emu_fail(const char* what, unsigned long long v) {
    fprintf(stderr, "wgmma emulation: %s (0x%llx), thread %d\n", what, v, emu_tid);
    fflush(stderr);
    _Exit(3);  // not exit: other emulated threads are still running (and may be failing too)
}

inline uint32_t aw_smem_addr(const void* p) {
    uintptr_t a = (uintptr_t) p - emu_smem_origin;
    if (a < emu_smem_lo || a > emu_smem_hi) emu_fail("generic pointer outside the shared window", a);
    return (uint32_t) a;
}

inline unsigned char* emu_smem_at(uint32_t a, uint32_t bytes) {
    if (a < emu_smem_lo || a + bytes > emu_smem_hi) emu_fail("shared memory access out of the allocation", a);
    return (unsigned char*) (emu_smem_origin + a);
}

inline void aw_cp_async16(void* dst, const void* src, int src_bytes) {
    if (src_bytes != 0 && src_bytes != 16) emu_fail("cp.async src-size", (unsigned) src_bytes);
    unsigned char* d = emu_smem_at(aw_smem_addr(dst), 16);
    if (aw_smem_addr(dst) % 16 != 0) emu_fail("cp.async destination not 16-byte aligned", aw_smem_addr(dst));
    memset(d, 0, 16);
    memcpy(d, src, (size_t) src_bytes);
}
inline void aw_cp_async_commit() {}
template <int N> inline void aw_cp_async_wait() {}
inline void aw_fence_proxy_async() {}
inline void aw_wgmma_fence() {}
inline void aw_fence_regs(float*, int) {}  // a compiler barrier only

inline uint32_t aw_pack_bf16x2(float lo, float hi) {
    return (uint32_t) __float2bfloat16_rn(lo).bits | (uint32_t) __float2bfloat16_rn(hi).bits << 16;
}

// ---- shared-memory operands through the descriptor

struct EmuSmemMatrix {
    uint32_t start, lbo, sbo;
};

inline EmuSmemMatrix emu_decode(uint64_t desc) {
    if ((desc >> 62) != 1) emu_fail("descriptor swizzle mode is not 1 (128B), the only one emulated", desc);
    if (((desc >> 49) & 7) != 0) emu_fail("descriptor base offset is not 0", desc);
    return {(uint32_t) (desc & 0x3FFF) << 4, (uint32_t) ((desc >> 16) & 0x3FFF) << 4,
            (uint32_t) ((desc >> 32) & 0x3FFF) << 4};
}

// Called with the (swizzled) address of every shared-memory operand element a wgmma reads, when set: tma_emu.h's
// check that the read is ordered after the TMA copy that wrote it.
inline void (*emu_on_smem_read)(uint32_t addr);

inline float emu_smem_bf16(uint32_t a) {
    a ^= ((a >> 7) & 7) << 4;  // the 128-byte swizzle, on the address
    if (emu_on_smem_read) emu_on_smem_read(a);
    __nv_bfloat16 h;
    memcpy(&h, emu_smem_at(a, 2), 2);
    return __bfloat162float(h);
}

// Element (mn, k) (mn: row of A or column of B; k < 16) of a K-major operand: 8-row groups SBO apart, rows of the
// group 128 bytes apart (the swizzle width), k contiguous (two 16-byte core-matrix columns, adjacent).
inline float emu_k_major(const EmuSmemMatrix& m, int mn, int k) {
    return emu_smem_bf16(m.start + (uint32_t) (mn >> 3) * m.sbo + (uint32_t) (mn & 7) * 128 + (uint32_t) k * 2);
}

// Element (mn, k) of an MN-major operand: mn contiguous in 64-element (128-byte) rows, 64-element blocks LBO apart;
// k rows 128 bytes apart inside 8-row groups, the groups SBO apart.
inline float emu_mn_major(const EmuSmemMatrix& m, int mn, int k) {
    return emu_smem_bf16(m.start + (uint32_t) (mn >> 6) * m.lbo + (uint32_t) (mn & 63) * 2 + (uint32_t) (k & 7) * 128
            + (uint32_t) (k >> 3) * m.sbo);
}

// ---- the warpgroup MMA

// What each thread hands its warpgroup for one wgmma (indexed by thread number; blocks run one at a time).
struct EmuWgmmaSlot {
    uint32_t a[4];
    uint64_t desc_a, desc_b;
    int n, accumulate, kind;
};
inline EmuWgmmaSlot emu_wgmma_slot[1024];

// An MMA whose result has not reached its registers yet: the group it belongs to (the count of commits before it).
struct EmuPending {
    float* d;
    std::vector<float> v;
    long group;
};
inline thread_local std::vector<EmuPending> emu_pending;
inline thread_local long emu_groups_committed;

inline void aw_wgmma_commit() { emu_groups_committed++; }

// Retires every group but the N most recent: their results reach the registers, oldest first.
template <int N>
inline void aw_wgmma_wait() {
    std::vector<EmuPending> keep;
    for (auto& p : emu_pending) {
        if (p.group < emu_groups_committed - N) memcpy(p.d, p.v.data(), p.v.size() * sizeof(float));
        else keep.push_back(std::move(p));
    }
    emu_pending.swap(keep);
}

// d (64×N) = A·B (+ d when accumulate): kind 0 = A from shared memory (K-major, desc_a) and B K-major; kind 1 = A
// from registers (a_regs) and B MN-major (imm-trans-b 1). Called by all 128 threads of the warpgroup.
inline void emu_wgmma(int N, int kind, float* d, const uint32_t* a_regs, uint64_t desc_a, uint64_t desc_b,
                      bool accumulate) {
    int me = emu_tid & 127, first = emu_tid & ~127;
    EmuWgmmaSlot& mine = emu_wgmma_slot[emu_tid];
    for (int v = 0; v < 4; v++) mine.a[v] = a_regs ? a_regs[v] : 0;
    mine.desc_a = desc_a;
    mine.desc_b = desc_b;
    mine.n = N;
    mine.accumulate = accumulate;
    mine.kind = kind;
    emu_syncwarpgroup();
    const EmuWgmmaSlot& lead = emu_wgmma_slot[first];
    if (lead.desc_a != desc_a || lead.desc_b != desc_b || lead.n != N || lead.accumulate != (int) accumulate
            || lead.kind != kind)
        emu_fail("wgmma operands differ across the warpgroup (.aligned)", desc_b);
    EmuSmemMatrix ma = kind == 0 ? emu_decode(desc_a) : EmuSmemMatrix{}, mb = emu_decode(desc_b);
    auto a_at = [&](int row, int k) -> float {
        if (kind == 0) return emu_k_major(ma, row, k);
        int owner = first + 32 * (row >> 4) + 4 * (row & 7) + ((k & 7) >> 1), v = ((row >> 3) & 1) + 2 * (k >> 3);
        __nv_bfloat16 h = {(uint16_t) (emu_wgmma_slot[owner].a[v] >> (16 * (k & 1)))};
        return __bfloat162float(h);
    };
    // the accumulator as the pipeline has it: the latest pending result for d, else the registers
    const float* in = d;
    for (auto& p : emu_pending)
        if (p.d == d) in = p.v.data();
    int w = me >> 5, gr = (me & 31) >> 2, q = me & 3;
    std::vector<float> out(N / 2);
    for (int i = 0; i < N / 8; i++)
        for (int h = 0; h < 2; h++)
            for (int e = 0; e < 2; e++) {
                int idx = 4 * i + 2 * h + e, row = 16 * w + gr + 8 * h, col = 8 * i + 2 * q + e;
                float s = accumulate ? in[idx] : 0.0f;
                for (int k = 0; k < 16; k++)
                    s += a_at(row, k) * (kind == 0 ? emu_k_major(mb, col, k) : emu_mn_major(mb, col, k));
                out[idx] = s;
            }
    emu_syncwarpgroup();  // the slots may be reused
    for (auto& p : emu_pending)
        if (p.d == d) p.d = nullptr;  // superseded: only the newest result for d is written back
    std::vector<EmuPending> live;
    for (auto& p : emu_pending)
        if (p.d) live.push_back(std::move(p));
    live.push_back({d, std::move(out), emu_groups_committed});
    emu_pending.swap(live);
}

template <int N>
inline void aw_wgmma_ss(float* d, uint64_t desc_a, uint64_t desc_b, int scale_d) {
    emu_wgmma(N, 0, d, nullptr, desc_a, desc_b, scale_d != 0);
}

template <int N>
inline void aw_wgmma_rs(float* d, const uint32_t* a, uint64_t desc_b) {
    emu_wgmma(N, 1, d, a, 0, desc_b, true);
}
