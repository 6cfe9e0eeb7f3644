// Multi-head self-attention FORWARD in bf16 on Hopper's warpgroup tensor cores (wgmma), FlashAttention-3 style
// (without its producer warp and TMA; attention_wgmma_tma_forward, at the end of this file, adds them): the same
// contract as attention_bf16_forward (attention_bf16.cu), which io.accel4j.kernels.AttentionBf16Gpu launches instead
// on every device but compute capability 9.0.
// qkv (B,T,3C) bf16: Q in columns [0,C), K in [C,2C), V in [2C,3C), head h in columns h·HD … (h+1)·HD of each;
// out (B,T,C) bf16; lse (B,NH,T) fp32 (natural log, scale included); HD = C/NH ∈ {64, 128}; scale = 1/√HD.
//
// Math, per query row t (log2 domain, x = scale·log2e·q_t·k_u, keys u < T, and u ≤ t when causal):
//   m = −∞, l = 0, O = 0;  for key tiles j:  S = x over the tile,  m' = max(m, rowmax S),  P = exp2(S − m'),
//   α = exp2(m − m'),  l = α·l + rowsum P,  O = α·O + bf16(P)·Vⱼ,  m = m';   out = bf16(O/l),  lse = (m + log2 l)·ln 2
//
// Shapes: a CTA (256 threads: two warpgroups) owns 128 query rows, warpgroup g rows 64g … 64g+63, and loops over key
// tiles of 128 (at or left of the diagonal when causal). Per warpgroup and tile:
//   S (64×128, fp32 registers) = Q_g (64×HD, shared) · Kⱼᵀ   HD/16 × wgmma m64n128k16, A and B from shared memory
//   O (64×HD,  fp32 registers) += P (64×128, bf16 registers) · Vⱼ (128×HD, shared)   8 × wgmma m64nHDk16, A from
//   registers (the S accumulator's layout is the A fragment's: no shuffle), B "transposed" (MN-major, imm-trans-b 1)
// Every thread cp.asyncs its share of tile j+1 while tile j is computed; warpgroup 1 runs its P·V half a tile late
// (see attention_wgmma_forward_tile), so K is double-buffered and V triple-buffered.
//
// Shared memory (AttentionBf16Gpu.wgmmaSharedBytes: 1 KiB alignment slack + Q 128×HD + 2 × K + 3 × V 128×HD, bf16:
// 193 KiB at HD 128, 97 KiB at 64; the host opts in above 48 KiB). Every tile is stored "K-major, 128-byte swizzle"
// (PTX ISA, "Shared Memory Matrix Layout", 9.7.15.5.1.2; CUTLASS cute/atom/mma_traits_sm90_gmma.hpp names the same
// canonical layouts): HD/64 column blocks of R rows × 64 elements (128 bytes a row, R·128 bytes a block), the
// 16-byte chunk c of row r at chunk c ^ (r mod 8) of its row (aw_swizzle). The same bytes serve
//   Q, K as K-major operands (rows = M or N, the 64 contiguous elements = K): 8-row groups SBO = 1024 bytes apart,
//     LBO unused; a k16 step is +32 bytes of start address inside a block, the next block +R·128;
//   V as an MN-major operand (rows = K = keys, the 64 contiguous elements = N = columns of V): SBO = 1024 bytes
//     between 8-key groups, LBO = 128·128 bytes between the 64-column blocks; a k16 step is +16 rows = 2048 bytes.
// The base is rounded up to 1024 bytes, since the swizzle is a function of address bits 4–9.
//
// Register fragments (PTX ISA 9.7.15.5.1.1.1, "Matrix Fragments for wgmma.mma_async.m64nNk16"): warp w of a
// warpgroup holds rows 16w … 16w+15; lane = 4·gr + q holds, of the accumulator, d[4i + 2h + e] = element (row 16w +
// gr + 8h, column 8i + 2q + e) for i < N/8, h, e ∈ {0, 1}; of the bf16 A operand (m64k16), register v = {low, high}
// = elements (row 16w + gr + 8(v & 1), columns 8(v >> 1) + 2q + {0, 1}). So the S accumulator's 8 values of k16 step
// kk are P's A registers of that step, in order, two at a time.
//
// Every row's first visible key is key 0, in tile 0, so m is finite from the first tile on. Rows past T compute on
// zero rows and are not written; keys past T are zero rows (cp.async zero fill) and masked to −∞. Deterministic:
// fixed summation orders, no atomics.
//
// The kernel is Hopper-only (wgmma needs sm_90a). The sm_80 PTX has the entry point with a body that traps
// (the launcher never selects it there); the CPU emulation (src/test/cuda/emu/wgmma_emu.h) supplies the instruction
// helpers below when there is no __CUDA_ARCH__ at all.
#include "common.cuh"
#include <cuda_bf16.h>
#include <stdint.h>
#ifdef __CUDACC__
#include <cuda.h>  // CUtensorMap (attention_wgmma_tma_forward's parameter)
#endif

#define AW_THREADS 256  // two warpgroups
#define AW_ROWS 128     // query rows of a CTA, 64 per warpgroup
#define AW_KEYS 128     // key tile
#define AW_LOG2E 1.4426950408889634f
#define AW_LN2 0.6931471805599453f

#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || !defined(__CUDA_ARCH__)
#define AW_ENABLED 1
#endif

typedef __nv_bfloat16 bf16;

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// ---- the instructions (sm_90a); wgmma_emu.h has their CPU stand-ins

// The shared-state-space address of a generic pointer into shared memory.
__device__ __forceinline__ uint32_t aw_smem_addr(const void* p) {
    return (uint32_t) __cvta_generic_to_shared(p);
}

// 16 bytes global → shared, asynchronously; bytes past src_bytes (0 or 16) are zero-filled.
__device__ __forceinline__ void aw_cp_async16(void* dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(aw_smem_addr(dst)), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void aw_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most N of this thread's committed cp.async groups are pending.
template <int N>
__device__ __forceinline__ void aw_cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory"); }
// Orders this thread's generic-proxy writes of shared memory (cp.async, st.shared) before later async-proxy reads
// (wgmma's operand fetch); a barrier then publishes them to the warpgroup.
__device__ __forceinline__ void aw_fence_proxy_async() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// wgmma.fence: register writes before it (accumulators, A fragments) are seen by the wgmmas after it.
__device__ __forceinline__ void aw_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void aw_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most N of the warpgroup's committed wgmma groups are pending.
template <int N>
__device__ __forceinline__ void aw_wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory");
}

// Pins n accumulator registers at this point of the instruction stream: the compiler sees the wgmma results only as
// outputs of the wgmma asm, not of the wait, and could otherwise move a read of them above aw_wgmma_wait (CUTLASS's
// warpgroup_fence_operand).
__device__ __forceinline__ void aw_fence_regs(float* d, int n) {
#pragma unroll
    for (int i = 0; i < n; i++) asm volatile("" : "+f"(d[i]) :: "memory");
}

// Two floats → bf16x2 (round to nearest even), lo in the low half: the order of an A fragment register.
__device__ __forceinline__ uint32_t aw_pack_bf16x2(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
}

#define AW_D8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
        "+f"(d[i + 6]), "+f"(d[i + 7])
#define AW_D32 AW_D8(0), AW_D8(8), AW_D8(16), AW_D8(24)
#define AW_D64 AW_D32, AW_D8(32), AW_D8(40), AW_D8(48), AW_D8(56)
#define AW_R32 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define AW_R64 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"

// d (64×N fp32 fragments) = A·B + (scale_d ? d : 0): A (64×16) and B (16×N, K-major) from shared memory.
template <int N>
__device__ __forceinline__ void aw_wgmma_ss(float* d, uint64_t desc_a, uint64_t desc_b, int scale_d);
template <>
__device__ __forceinline__ void aw_wgmma_ss<128>(float* d, uint64_t desc_a, uint64_t desc_b, int scale_d) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" AW_R64 "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : AW_D64 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// d (64×N fp32 fragments) += A·B: A (64×16 bf16) from registers a[0..3], B (16×N) from shared memory, MN-major
// (scale-d is a predicate operand: set from a register, as CUTLASS does, rather than written as an immediate).
template <int N>
__device__ __forceinline__ void aw_wgmma_rs(float* d, const uint32_t* a, uint64_t desc_b);
template <>
__device__ __forceinline__ void aw_wgmma_rs<128>(float* d, const uint32_t* a, uint64_t desc_b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" AW_R64 "}, {%64, %65, %66, %67}, %68, "
                 "p, 1, 1, 1;\n}\n"
                 : AW_D64 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}
template <>
__device__ __forceinline__ void aw_wgmma_rs<64>(float* d, const uint32_t* a, uint64_t desc_b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" AW_R32 "}, {%32, %33, %34, %35}, %36, "
                 "p, 1, 1, 1;\n}\n"
                 : AW_D32 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}

// ---- TMA and mbarrier (attention_wgmma_tma_forward); emu/tma_emu.h has their CPU stand-ins

// mbarrier.init: the barrier's phase 0 begins, expecting `count` arrivals (and no transaction bytes).
__device__ __forceinline__ void aw_mbar_init(uint64_t* bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(aw_smem_addr(bar)), "r"(count) : "memory");
}
// Makes the initialisations visible to the async proxy (TMA's complete_tx) before they are used (CUTLASS's
// fence_barrier_init); a block barrier then publishes them to the other threads.
__device__ __forceinline__ void aw_fence_mbar_init() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// One arrival on the current phase (release semantics: this thread's earlier reads, wgmma's included once waited
// for, are ordered before whatever the phase's waiters do next).
__device__ __forceinline__ void aw_mbar_arrive(uint64_t* bar) {
    asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n"
                 :: "r"(aw_smem_addr(bar)) : "memory");
}
// Raises the current phase's expected transaction bytes by `bytes`, then arrives: the phase completes once every
// arrival has come and the TMA copies signalling this barrier have delivered exactly that many bytes.
__device__ __forceinline__ void aw_mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
    asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}\n"
                 :: "r"(aw_smem_addr(bar)), "r"(bytes) : "memory");
}
// Whether the phase of parity `parity` has completed (the current phase's parity differs), acquiring what its
// arrivals and copies released; may wait a while in hardware before answering false.
__device__ __forceinline__ bool aw_mbar_try_wait(uint64_t* bar, int parity) {
    uint32_t done;
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(aw_smem_addr(bar)), "r"(parity) : "memory");
    return done != 0;
}
// TMA: the box at coordinates (c0, c1, c2) of the tensor `map` describes, global → shared dst (1024-byte aligned for
// the 128-byte swizzle), out-of-bounds elements zero-filled; its bytes count as complete_tx on bar.
__device__ __forceinline__ void aw_tma_load_3d(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1,
        int c2) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];\n"
                 :: "r"(aw_smem_addr(dst)), "l"(map), "r"(aw_smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2) : "memory");
}
// setmaxnreg (all 128 threads of a warpgroup): the warpgroup's registers a thread become N, released to or taken from
// the CTA's pool; the launch allocates 65536 / 384 → 168 a thread, the producer gives up the difference.
template <int N>
__device__ __forceinline__ void aw_setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" :: "n"(N)); }
template <int N>
__device__ __forceinline__ void aw_setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" :: "n"(N)); }
#elif !defined(__CUDA_ARCH__)
#include "wgmma_emu.h"
#include "tma_emu.h"
#endif

#ifdef AW_ENABLED
// ---- layout helpers

// The byte offset of 16-byte chunk c (elements 8c … 8c+7) of row r in a swizzled tile of `rows` rows (see above).
__device__ __forceinline__ uint32_t aw_swizzle(int r, int c, int rows) {
    return (uint32_t) ((c >> 3) * rows * 128 + r * 128 + (((c & 7) ^ (r & 7)) << 4));
}

// A shared-memory matrix descriptor (PTX ISA 9.7.15.5.1.2.2, "Matrix Descriptor Format"): start address >> 4 in bits
// 0–13, leading-dimension byte offset >> 4 in 16–29, stride-dimension byte offset >> 4 in 32–45, base offset 0
// (bits 49–51: the tiles are 1024-byte aligned), swizzle mode 1 = 128-byte in bits 62–63.
__device__ __forceinline__ uint64_t aw_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
    return (uint64_t) ((addr & 0x3FFFF) >> 4) | (uint64_t) ((lbo & 0x3FFFF) >> 4) << 16
            | (uint64_t) ((sbo & 0x3FFFF) >> 4) << 32 | 1ULL << 62;
}

// cp.async of rows t0 … t0+rows−1 (row t at src + t·stride, HD bf16) into the swizzled tile dst; rows past T are
// zero-filled (their source address is clamped to row 0, and 0 bytes of it are read).
template <int HD>
__device__ __forceinline__ void aw_load_tile(unsigned char* dst, const bf16* __restrict__ src, int t0, int rows,
        int T, long long stride) {
    constexpr int CH = HD / 8;  // 16-byte chunks a row
    for (int idx = threadIdx.x; idx < rows * CH; idx += AW_THREADS) {
        int r = idx / CH, c = idx % CH, t = t0 + r;
        bool in = t < T;
        aw_cp_async16(dst + aw_swizzle(r, c, rows), src + (in ? (long long) t * stride : 0) + 8 * c, in ? 16 : 0);
    }
}

// ---- the three steps of a key tile, for one warpgroup (see the comment at the top)

// S (64×128 fragments) = Q_g·Kᵀ: HD/16 k16 steps; Q (q_addr: the warpgroup's 64 rows) and K (k_addr) both K-major,
// 8-row groups SBO = 1024 bytes apart; a step is +32 bytes inside a 64-column block, a block +128·128 bytes.
template <int HD>
__device__ __forceinline__ void aw_scores(float* s, uint32_t q_addr, uint32_t k_addr) {
    static_assert(AW_ROWS == AW_KEYS, "Q and K tiles share their block stride here");
    aw_wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++) {
        uint32_t at = (kk >> 2) * 128 * 128 + (kk & 3) * 32;
        aw_wgmma_ss<AW_KEYS>(s, aw_desc(q_addr + at, 16, 1024), aw_desc(k_addr + at, 16, 1024), kk > 0);
    }
    aw_wgmma_commit();
    aw_wgmma_wait<0>();
    aw_fence_regs(s, AW_KEYS / 2);
}

// The online softmax of key tile u0 … u0+127 on the thread's rows t0 and t0 + 8 (32 keys each: a quad of lanes
// shares a row, so maxima go over the quad; sums stay per thread until the end): masks s (scores, scaled to the
// log2 domain by xscale) where a key is past T or (causal) after the row, moves m, rescales l and O (o, HD/2
// fragments) by α, and writes P = exp2(S − m) as the bf16 A fragments p of the P·V product. `masked`: whether any
// key of the tile may be masked for this warpgroup (else the per-element test is skipped).
template <int HD>
__device__ __forceinline__ void aw_softmax(uint32_t (*p)[4], float* s, float* o, float* m, float* l, int u0, int t0,
        int q, int T, bool causal, bool masked, float xscale) {
    float alpha[2];
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        int t = t0 + 8 * hr;
        float mx = -INFINITY;
#pragma unroll
        for (int i = 0; i < AW_KEYS / 8; i++) {
#pragma unroll
            for (int e = 0; e < 2; e++) {
                int u = u0 + 8 * i + 2 * q + e;
                float x = s[4 * i + 2 * hr + e] * xscale;
                if (masked && (u >= T || (causal && u > t))) x = -INFINITY;
                s[4 * i + 2 * hr + e] = x;
                mx = fmaxf(mx, x);
            }
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        float mn = fmaxf(m[hr], mx), sum = 0.0f;
        alpha[hr] = exp2f(m[hr] - mn);
        m[hr] = mn;
#pragma unroll
        for (int i = 0; i < AW_KEYS / 8; i++) {
#pragma unroll
            for (int e = 0; e < 2; e++) {
                float pe = exp2f(s[4 * i + 2 * hr + e] - mn);
                s[4 * i + 2 * hr + e] = pe;
                sum += pe;
            }
        }
        l[hr] = alpha[hr] * l[hr] + sum;
    }
#pragma unroll
    for (int i = 0; i < HD / 8; i++) {
#pragma unroll
        for (int e = 0; e < 4; e++) o[4 * i + e] *= alpha[e >> 1];
    }
    // the 8 accumulator values of k16 step kk are, in order, the 4 A registers of step kk
#pragma unroll
    for (int kk = 0; kk < AW_KEYS / 16; kk++) {
#pragma unroll
        for (int v = 0; v < 4; v++) p[kk][v] = aw_pack_bf16x2(s[8 * kk + 2 * v], s[8 * kk + 2 * v + 1]);
    }
}

// O (64×HD fragments) += P·V: 8 k16 steps of 16 keys, P from registers, V (v_addr) MN-major: 8-key groups
// SBO = 1024 bytes apart, 64-column blocks LBO = 128·128 bytes apart, a step +16 rows = 2048 bytes.
template <int HD>
__device__ __forceinline__ void aw_pv(float* o, uint32_t (*p)[4], uint32_t v_addr) {
    aw_wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < AW_KEYS / 16; kk++) aw_wgmma_rs<HD>(o, p[kk], aw_desc(v_addr + kk * 2048, 128 * 128, 1024));
    aw_wgmma_commit();
    aw_wgmma_wait<0>();
    aw_fence_regs(o, HD / 2);
}

// out = bf16(O / l) two columns at a time, lse from the quad's total l, for the thread's rows t0 and t0 + 8 of head h
// of batch b (rows past T are not written).
template <int HD>
__device__ __forceinline__ void aw_write_out(bf16* __restrict__ out, float* __restrict__ lse, const float* o,
        const float* m, const float* l, int b, int h, int t0, int q, int T, int C, int NH) {
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        float lt = l[hr];
        lt += __shfl_xor_sync(0xffffffffu, lt, 1);
        lt += __shfl_xor_sync(0xffffffffu, lt, 2);
        float inv = 1.0f / lt;
        int t = t0 + 8 * hr;
        if (t < T) {
            bf16* row = out + ((long long) b * T + t) * C + (long long) h * HD + 2 * q;
#pragma unroll
            for (int i = 0; i < HD / 8; i++) {
                *reinterpret_cast<uint32_t*>(row + 8 * i) =
                        aw_pack_bf16x2(o[4 * i + 2 * hr] * inv, o[4 * i + 2 * hr + 1] * inv);
            }
            if (q == 0) lse[((long long) b * NH + h) * T + t] = (m[hr] + log2f(lt)) * AW_LN2;
        }
    }
}

// ---- forward

// Query rows q0 … q0+127 of head h of batch b (see the comment at the top). Thread: warpgroup wg, warp w (of its
// warpgroup), lane = 4·gr + q; it owns rows t = q0 + 64·wg + 16·w + gr + 8·hr (hr ∈ {0, 1}) of S, P and O.
// Iteration j (0 … tiles, one more than there are tiles): cp.async tile j+1 (K into buffer (j+1) mod 2, V into
// (j+1) mod 3), wait for tile j, then warpgroup 0: S_j, softmax, P_j·V_j; warpgroup 1: P_{j−1}·V_{j−1}, S_j, softmax
// (its P·V half a tile late, so that one warpgroup's softmax runs beside the other's MMAs rather than all four
// warps of the SM waiting on the exponentials together). A K buffer is rewritten two iterations after its S (both
// warpgroups' S_j run in iteration j), a V buffer three after its tile (warpgroup 1 reads V_j in iteration j+1):
// the barrier ending each iteration orders it.
template <int HD>
__device__ __forceinline__ void attention_wgmma_forward_tile(bf16* __restrict__ out, float* __restrict__ lse,
        const bf16* __restrict__ qkv, int T, int C, int NH, float scale, bool causal, unsigned char* smem_raw) {
    constexpr int QBYTES = AW_ROWS * HD * 2, KVBYTES = AW_KEYS * HD * 2;
    int h = blockIdx.y, b = blockIdx.z;
    int wg = threadIdx.x >> 7, w = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31, gr = lane >> 2, q = lane & 3;
    int q0 = (causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * AW_ROWS;  // causal: the longest rows first
    long long row3 = 3LL * C;
    const bf16* head = qkv + (long long) b * T * row3 + (long long) h * HD;
    uint32_t raw = aw_smem_addr(smem_raw), pad = (1024 - (raw & 1023)) & 1023;
    unsigned char* Qs = smem_raw + pad;    // (AW_ROWS, HD) swizzled
    unsigned char* Ks = Qs + QBYTES;       // 2 × (AW_KEYS, HD) swizzled
    unsigned char* Vs = Ks + 2 * KVBYTES;  // 3 × (AW_KEYS, HD) swizzled
    uint32_t q_addr = raw + pad + wg * 64 * 128, k_addr = aw_smem_addr(Ks), v_addr = aw_smem_addr(Vs);

    int last = causal ? min(q0 + AW_ROWS, T) - 1 : T - 1;
    int tiles = last / AW_KEYS + 1;
    aw_load_tile<HD>(Qs, head, q0, AW_ROWS, T, row3);
    aw_load_tile<HD>(Ks, head + C, 0, AW_KEYS, T, row3);
    aw_load_tile<HD>(Vs, head + 2 * C, 0, AW_KEYS, T, row3);
    aw_cp_async_commit();

    float o[HD / 2];
#pragma unroll
    for (int i = 0; i < HD / 2; i++) o[i] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    uint32_t p[AW_KEYS / 16][4];  // P of the last softmax, as A fragments
    float xscale = scale * AW_LOG2E;
    int t_first = q0 + 64 * wg, t0 = t_first + 16 * w + gr;  // the warpgroup's first row, the thread's first row
    for (int j = 0; j <= tiles; j++) {
        int u0 = j * AW_KEYS;
        if (j + 1 < tiles) {
            aw_load_tile<HD>(Ks + ((j + 1) & 1) * KVBYTES, head + C, u0 + AW_KEYS, AW_KEYS, T, row3);
            aw_load_tile<HD>(Vs + ((j + 1) % 3) * KVBYTES, head + 2 * C, u0 + AW_KEYS, AW_KEYS, T, row3);
        }
        aw_cp_async_commit();  // (possibly empty: the group count stays one an iteration)
        aw_cp_async_wait<1>();  // this thread's copies of tile j (and Q) have landed
        aw_fence_proxy_async();
        __syncthreads();       // everyone's have

        if (wg == 1 && j > 0) aw_pv<HD>(o, p, v_addr + ((j - 1) % 3) * KVBYTES);
        if (j < tiles) {
            float s[AW_KEYS / 2];
            aw_scores<HD>(s, q_addr, k_addr + (j & 1) * KVBYTES);
            bool masked = u0 + AW_KEYS > T || (causal && u0 + AW_KEYS - 1 > t_first);
            aw_softmax<HD>(p, s, o, m, l, u0, t0, q, T, causal, masked, xscale);
            if (wg == 0) aw_pv<HD>(o, p, v_addr + (j % 3) * KVBYTES);
        }
        __syncthreads();  // the buffers read in this iteration may be reloaded
    }

    aw_write_out<HD>(out, lse, o, m, l, b, h, t0, q, T, C, NH);
}
#endif

// Writes out (B,T,C) bf16 and lse (B,NH,T) from qkv (B,T,3C) bf16; causal ≠ 0 masks keys after the query.
// grid = (⌈T/128⌉, NH, B), 256 threads, 1024 + 6·128·HD·2 bytes of dynamic shared memory (AttentionBf16Gpu).
extern "C" __global__ void __launch_bounds__(AW_THREADS, 1) attention_wgmma_forward(bf16* __restrict__ out,
        float* __restrict__ lse, const bf16* __restrict__ qkv, int B, int T, int C, int NH, float scale, int causal) {
#ifdef AW_ENABLED
    extern __shared__ __align__(1024) unsigned char aw_smem[];
    if (C / NH == 64) attention_wgmma_forward_tile<64>(out, lse, qkv, T, C, NH, scale, causal != 0, aw_smem);
    else attention_wgmma_forward_tile<128>(out, lse, qkv, T, C, NH, scale, causal != 0, aw_smem);
#else
    __trap();  // wgmma is sm_90a only: the launcher selects attention_bf16_forward on this PTX
#endif
}

// ======== attention_wgmma_tma_forward: the same forward, its loads by TMA from a producer warpgroup ========
//
// The contract, the math, the tile shapes, the swizzled layout and the three steps of a key tile are
// attention_wgmma_forward's; what differs is who loads and how the consumers learn that a tile is there
// (FlashAttention-3's producer/consumer split: a producer warpgroup gives its registers to the two consumer
// warpgroups with setmaxnreg, AW_PRODUCER_REGS and AW_CONSUMER_REGS below):
//   - threads 0–255 are the consumer warpgroups 0 and 1 (as above, warpgroup 1's P·V half a tile late);
//     threads 256–383 the producer warpgroup, of which thread 256 issues every copy and the others exit at once;
//   - the producer loads Q once and K, V tiles into a ring of AW_STAGES stages each with
//     cp.async.bulk.tensor.3d (TMA) through the tensor map qkv_map: a (3C, T, B) bf16 view of qkv, box 64 columns
//     × 128 rows × 1 batch, CU_TENSOR_MAP_SWIZZLE_128B (AW_TMA_SWIZZLE), rows past T zero-filled by the hardware —
//     a box is exactly one 64-column block of the swizzled tile layout above (128-byte rows, 16-byte chunk c of
//     row r at c ^ (r mod 8), the XOR taken on address bits 4–6 ^ 7–9, hence the 1024-byte aligned stages);
//   - mbarriers (PTX ISA 9.7.13.15): per stage full[s] (1 arrival: the producer's arrive.expect_tx of the tile's
//     bytes, completed by the copies' complete_tx) and empty[s] (256 arrivals: every consumer thread, after the
//     wgmma.wait_group that retires its reads of the stage); Q has its own full barrier. Tile j uses stage
//     s = j mod AW_STAGES in its round n = j / AW_STAGES: consumers wait for full[s]'s phase of parity n & 1, the
//     producer for empty[s]'s of parity (n & 1) ^ 1 (round 0 passes at once: the phase "before" phase 0 counts as
//     complete), as CUTLASS's PipelineTmaAsync does.
// Shared memory (AttentionBf16Gpu.wgmmaTmaSharedBytes): 1 KiB alignment slack + Q + 2·AW_STAGES tiles of 128×HD
// bf16 + 128 bytes for the barriers: 161.1 KiB at HD 128, 81.1 KiB at 64.
#define AW_STAGES 2            // K and V ring depth
#define AW_TMA_THREADS 384     // two consumer warpgroups + the producer warpgroup
#define AW_PRODUCER_REGS 24    // setmaxnreg: the producer warpgroup's registers a thread, given up …
#define AW_CONSUMER_REGS 240   // … to the consumers': 2·128·240 + 128·24 ≤ 64 Ki
#define AW_TMA_BOX_COLS 64     // a box's inner extent: one 128-byte swizzle row
#define AW_TMA_BARRIER_BYTES 128  // shared memory reserved for AwTmaBarriers
#define AW_TMA_SWIZZLE 3       // CU_TENSOR_MAP_SWIZZLE_128B: the layout aw_desc declares (the map's encoder uses it)

#ifdef AW_ENABLED
// The barriers of a CTA, after the tiles in shared memory.
struct AwTmaBarriers {
    uint64_t q_full, k_full[AW_STAGES], k_empty[AW_STAGES], v_full[AW_STAGES], v_empty[AW_STAGES];
};
static_assert(sizeof(AwTmaBarriers) <= AW_TMA_BARRIER_BYTES, "the barriers outgrow their shared memory");

__device__ __forceinline__ void aw_mbar_wait(uint64_t* bar, int parity) {
    while (!aw_mbar_try_wait(bar, parity)) {
    }
}

// One 128-row tile (rows r0 … r0+127 of batch b, columns col … col+HD−1 of qkv) into the swizzled tile dst: HD/64
// boxes, each one 64-column block; all signal bar.
template <int HD>
__device__ __forceinline__ void aw_tma_tile(unsigned char* dst, const CUtensorMap* map, uint64_t* bar, int col,
        int r0, int b) {
#pragma unroll
    for (int cb = 0; cb < HD / AW_TMA_BOX_COLS; cb++)
        aw_tma_load_3d(dst + cb * AW_ROWS * 128, map, bar, col + cb * AW_TMA_BOX_COLS, r0, b);
}

// The producer (one thread): Q, then K_j and V_j of every tile j into stage j mod AW_STAGES once it is empty.
template <int HD>
__device__ __forceinline__ void aw_tma_produce(const CUtensorMap* map, AwTmaBarriers* bars, unsigned char* Qs,
        unsigned char* Ks, unsigned char* Vs, int q0, int h, int b, int C, int tiles) {
    constexpr uint32_t TILE = AW_KEYS * HD * 2;
    aw_mbar_arrive_expect_tx(&bars->q_full, AW_ROWS * HD * 2);
    aw_tma_tile<HD>(Qs, map, &bars->q_full, h * HD, q0, b);
    for (int j = 0; j < tiles; j++) {
        int s = j % AW_STAGES, parity = (j / AW_STAGES) & 1;
        aw_mbar_wait(&bars->k_empty[s], parity ^ 1);
        aw_mbar_arrive_expect_tx(&bars->k_full[s], TILE);
        aw_tma_tile<HD>(Ks + s * TILE, map, &bars->k_full[s], C + h * HD, j * AW_KEYS, b);
        aw_mbar_wait(&bars->v_empty[s], parity ^ 1);
        aw_mbar_arrive_expect_tx(&bars->v_full[s], TILE);
        aw_tma_tile<HD>(Vs + s * TILE, map, &bars->v_full[s], 2 * C + h * HD, j * AW_KEYS, b);
    }
}

// A consumer's P·V of tile j (stage j mod AW_STAGES): wait for V_j, multiply, release the stage.
template <int HD>
__device__ __forceinline__ void aw_tma_pv(float* o, uint32_t (*p)[4], AwTmaBarriers* bars, uint32_t v_addr, int j) {
    int s = j % AW_STAGES;
    aw_mbar_wait(&bars->v_full[s], (j / AW_STAGES) & 1);
    aw_pv<HD>(o, p, v_addr + s * AW_KEYS * HD * 2);
    aw_mbar_arrive(&bars->v_empty[s]);
}

// Query rows q0 … q0+127 of head h of batch b: thread numbering and iteration order as attention_wgmma_forward_tile,
// the waits on the barriers in place of its cp.async waits and block barriers.
template <int HD>
__device__ __forceinline__ void attention_wgmma_tma_forward_tile(bf16* __restrict__ out, float* __restrict__ lse,
        const CUtensorMap* map, int T, int C, int NH, float scale, bool causal, unsigned char* smem_raw) {
    constexpr int QBYTES = AW_ROWS * HD * 2, TILE = AW_KEYS * HD * 2;
    int h = blockIdx.y, b = blockIdx.z;
    int wg = threadIdx.x >> 7, w = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31, gr = lane >> 2, q = lane & 3;
    int q0 = (causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * AW_ROWS;  // causal: the longest rows first
    uint32_t raw = aw_smem_addr(smem_raw), pad = (1024 - (raw & 1023)) & 1023;
    unsigned char* Qs = smem_raw + pad;             // (AW_ROWS, HD) swizzled
    unsigned char* Ks = Qs + QBYTES;                // AW_STAGES × (AW_KEYS, HD) swizzled
    unsigned char* Vs = Ks + AW_STAGES * TILE;      // AW_STAGES × (AW_KEYS, HD) swizzled
    AwTmaBarriers* bars = reinterpret_cast<AwTmaBarriers*>(Vs + AW_STAGES * TILE);
    int last = causal ? min(q0 + AW_ROWS, T) - 1 : T - 1;
    int tiles = last / AW_KEYS + 1;

    if (threadIdx.x == 0) {
        aw_mbar_init(&bars->q_full, 1);
        for (int s = 0; s < AW_STAGES; s++) {
            aw_mbar_init(&bars->k_full[s], 1);
            aw_mbar_init(&bars->v_full[s], 1);
            aw_mbar_init(&bars->k_empty[s], AW_THREADS);
            aw_mbar_init(&bars->v_empty[s], AW_THREADS);
        }
        aw_fence_mbar_init();
    }
    __syncthreads();
    if (wg == 2) {  // the producer warpgroup
        aw_setmaxnreg_dec<AW_PRODUCER_REGS>();
        if (w == 0 && lane == 0) aw_tma_produce<HD>(map, bars, Qs, Ks, Vs, q0, h, b, C, tiles);
        return;
    }
    aw_setmaxnreg_inc<AW_CONSUMER_REGS>();

    uint32_t q_addr = raw + pad + wg * 64 * 128, k_addr = aw_smem_addr(Ks), v_addr = aw_smem_addr(Vs);
    float o[HD / 2];
#pragma unroll
    for (int i = 0; i < HD / 2; i++) o[i] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    uint32_t p[AW_KEYS / 16][4];  // P of the last softmax, as A fragments
    float xscale = scale * AW_LOG2E;
    int t_first = q0 + 64 * wg, t0 = t_first + 16 * w + gr;  // the warpgroup's first row, the thread's first row
    aw_mbar_wait(&bars->q_full, 0);
    for (int j = 0; j <= tiles; j++) {
        if (wg == 1 && j > 0) aw_tma_pv<HD>(o, p, bars, v_addr, j - 1);
        if (j < tiles) {
            int u0 = j * AW_KEYS, s = j % AW_STAGES;
            float sc[AW_KEYS / 2];
            aw_mbar_wait(&bars->k_full[s], (j / AW_STAGES) & 1);
            aw_scores<HD>(sc, q_addr, k_addr + s * TILE);
            aw_mbar_arrive(&bars->k_empty[s]);
            bool masked = u0 + AW_KEYS > T || (causal && u0 + AW_KEYS - 1 > t_first);
            aw_softmax<HD>(p, sc, o, m, l, u0, t0, q, T, causal, masked, xscale);
            if (wg == 0) aw_tma_pv<HD>(o, p, bars, v_addr, j);
        }
    }
    aw_write_out<HD>(out, lse, o, m, l, b, h, t0, q, T, C, NH);
}
#endif

// Writes out (B,T,C) bf16 and lse (B,NH,T) from the qkv (B,T,3C) bf16 that qkv_map describes (see above: rank 3,
// dims {3C, T, B}, box {64, 128, 1}, bf16, 128-byte swizzle, zero fill); causal ≠ 0 masks keys after the query.
// grid = (⌈T/128⌉, NH, B), 384 threads, AttentionBf16Gpu.wgmmaTmaSharedBytes of dynamic shared memory.
extern "C" __global__ void __launch_bounds__(AW_TMA_THREADS, 1) attention_wgmma_tma_forward(bf16* __restrict__ out,
        float* __restrict__ lse, const __grid_constant__ CUtensorMap qkv_map, int B, int T, int C, int NH,
        float scale, int causal) {
#ifdef AW_ENABLED
    extern __shared__ __align__(1024) unsigned char aw_smem[];
    if (C / NH == 64) attention_wgmma_tma_forward_tile<64>(out, lse, &qkv_map, T, C, NH, scale, causal != 0, aw_smem);
    else attention_wgmma_tma_forward_tile<128>(out, lse, &qkv_map, T, C, NH, scale, causal != 0, aw_smem);
#else
    __trap();  // TMA and wgmma are sm_90a only: the launcher never selects this entry on this PTX
#endif
}
