// Multi-head self-attention in bf16 on the tensor cores, FlashAttention-2 style, causal or not (io.accel4j.kernels.
// AttentionBf16Gpu launches it; io.accel4j.core.ops.AttentionOps has the math, attention.cu the fp32 twin).
// qkv (B,T,3C) bf16: Q in columns [0,C), K in [C,2C), V in [2C,3C), head h in columns h·HD … (h+1)·HD of each;
// out (B,T,C) bf16; lse (B,NH,T) fp32 (natural log, scale included); dqkv (B,T,3C) bf16, written (not added to);
// HD = C/NH ∈ {64, 128} (a template parameter; the host checks); scale = 1/√HD, passed by the host.
//
// Every product of two tiles is nvcuda::wmma m16n16k16 (bf16 in, fp32 accumulate; sm_80 and later). The fragment
// layout is opaque, so whatever needs a row-wise step (the online softmax, P = exp(S − lse), dS = P∘(dP − D), the
// final 1/l) goes through shared memory: a warp stores its fp32 S tile, its lanes work on rows, and the bf16 result
// (P or dS) is stored for the next product. Softmax statistics, accumulators and sums are fp32; exponentials are
// exp2 of log2(e)-scaled scores. No atomics and a fixed order of every sum: the results are deterministic.
//
// Tiles (4 warps, 128 threads; shared memory ≤ 48 KiB at HD 128, the most a launch may take without opting in):
//   forward:  a block owns 64 query rows (warp w rows 16w …), loops over key tiles of 32 (at or left of the
//             diagonal when causal); the O accumulator (16 × HD per warp) stays in fragments, rescaled through
//             shared memory when a row's max moved.
//   dQ:       a block owns 32 query rows, loops over key tiles of 32; warp (g, c) = (w/2, w%2) computes the 16×16
//             block (rows g, keys c) of S and dP, then dQ rows g, columns c·HD/2 … (a pass of its own, as the fp32
//             kernel: every dQ element is summed by one warp in key order).
//   dK, dV:   a block owns 32 keys, loops over query tiles of 32; warp (g, c) computes the block (keys g, queries c)
//             of Sᵀ and dPᵀ, then dK, dV keys g, columns c·HD/2 ….
// bf16 tiles have rows of HD + 8 elements (16 bytes of padding: consecutive rows start 4 banks apart), fp32 tiles
// rows of 32 + 4, bf16 P/dS tiles rows of 32 + 8; every wmma pointer is 32-byte aligned. Rows past T are zero.
#include "common.cuh"
#include <cuda_bf16.h>
#include <mma.h>

#define AB_THREADS 128
// Blocks per multiprocessor the registers are planned for: 3 (≤ 168 registers a thread, what ptxas needs without
// spills at HD 128; 48 KiB of shared memory would let 4 fit on Hopper's 228 KiB).
#define AB_MIN_BLOCKS 3
#define AB_KEYS 32        // key tile (forward, dQ) and query tile (dK/dV)
#define AB_FWD_ROWS 64    // query rows of a forward block (16 per warp)
#define AB_BWD_ROWS 32    // query rows of a dQ block, keys of a dK/dV block
#define AB_LDS (AB_KEYS + 4)  // row stride of the fp32 S / dP tiles
#define AB_LDP (AB_KEYS + 8)  // row stride of the bf16 P / dS tiles
#define AB_FULL_MASK 0xffffffffu
#define AB_LOG2E 1.4426950408889634f
#define AB_LN2 0.6931471805599453f

namespace wmma = nvcuda::wmma;
typedef __nv_bfloat16 bf16;
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> ab_acc;
typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> ab_a_row;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> ab_b_row;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> ab_b_col;

// dst (rows, HD + 8) = src rows t0 … t0+rows−1 (row t at src + t·stride), zero past T; 16 bytes a thread at a time
// (the host checks that the tensors are 16-byte aligned; row starts are, since C is a multiple of 8).
template <int HD>
__device__ __forceinline__ void ab_load_tile(bf16* dst, const bf16* __restrict__ src, int t0, int rows, int T,
        long long stride) {
    constexpr int CH = HD / 8;  // 16-byte chunks a row
    for (int idx = threadIdx.x; idx < rows * CH; idx += AB_THREADS) {
        int r = idx / CH, c = idx % CH, t = t0 + r;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (t < T) v = *reinterpret_cast<const uint4*>(src + (long long) t * stride + 8 * c);
        *reinterpret_cast<uint4*>(dst + r * (HD + 8) + 8 * c) = v;
    }
}

// acc[n] += A·Bₙ for n < NB: A (16 × 16·KS) row-major at a (stride lda), each of its fragments loaded once; Bₙ
// (16·KS × 16) col-major at b + 16n·ldb (element (k, j) at b[(16n + j)·ldb + k]: rows 16n … of a row-major tile, for
// S = Q·Kᵀ) or row-major at b + 16n (element (k, j) at b[k·ldb + 16n + j]: columns 16n … of a tile).
template <int KS, int NB, bool B_COL>
__device__ __forceinline__ void ab_mma(ab_acc* acc, const bf16* a, int lda, const bf16* b, int ldb) {
#pragma unroll
    for (int k = 0; k < KS; k++) {
        ab_a_row fa;
        wmma::load_matrix_sync(fa, a + 16 * k, lda);
#pragma unroll
        for (int n = 0; n < NB; n++) {
            if (B_COL) {
                ab_b_col fb;
                wmma::load_matrix_sync(fb, b + 16 * n * ldb + 16 * k, ldb);
                wmma::mma_sync(acc[n], fa, fb, acc[n]);
            } else {
                ab_b_row fb;
                wmma::load_matrix_sync(fb, b + 16 * k * ldb + 16 * n, ldb);
                wmma::mma_sync(acc[n], fa, fb, acc[n]);
            }
        }
    }
}

// Whether key u is visible from query t.
__device__ __forceinline__ bool ab_visible(int t, int u, int T, bool causal) {
    return u < T && (!causal || u <= t);
}

// A per-row value of the forward (held by lanes 2r, 2r+1 for row r) for each element lane + 32e (e < 8) of a 16×16
// row-major block this lane touches: that element's row is (lane + 32e) / 16.
__device__ __forceinline__ void ab_row_values(float v, int lane, float (&row)[8]) {
#pragma unroll
    for (int e = 0; e < 8; e++) row[e] = __shfl_sync(AB_FULL_MASK, v, 2 * ((lane + 32 * e) >> 4));
}

// ---- forward

// Query rows q0 … q0+63 of head h of batch b (warp w rows q0+16w …), in the log2 domain (x = scale·log2e·q·k):
//   m = −∞, l = 0, O = 0
//   for key tiles j:  S = x over the tile (invisible keys −∞),  m' = max(m, rowmax S),  P = exp2(S − m'),
//                     α = exp2(m − m'),  l = α·l + rowsum P,  O = α·O + bf16(P)·Vⱼ,  m = m'
//   out = bf16(O / l),  lse = (m + log2 l)·ln 2
// Lanes 2r, 2r+1 own row r of the warp's 16 (16 keys each); rows past T compute on zero rows and are not written.
// Every row's first visible key is key 0, in tile 0, so m is finite from the first tile on.
template <int HD>
__device__ __forceinline__ void attention_bf16_forward_tile(bf16* __restrict__ out, float* __restrict__ lse,
        const bf16* __restrict__ qkv, int T, int C, int NH, float scale, bool causal, unsigned char* smem) {
    constexpr int LDH = HD + 8, NF = HD / 16;
    int h = blockIdx.y, b = blockIdx.z;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int q0 = (causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * AB_FWD_ROWS;  // causal: the longest rows first
    long long row3 = 3LL * C;
    const bf16* head = qkv + (long long) b * T * row3 + (long long) h * HD;
    bf16* Qs = reinterpret_cast<bf16*>(smem);                        // (64, LDH)
    bf16* Ks = Qs + AB_FWD_ROWS * LDH;                               // (32, LDH)
    bf16* Vs = Ks + AB_KEYS * LDH;                                   // (32, LDH)
    float* Sall = reinterpret_cast<float*>(Vs + AB_KEYS * LDH);     // 4 × (16, LDS)
    bf16* Pall = reinterpret_cast<bf16*>(Sall + 4 * 16 * AB_LDS);    // 4 × (16, LDP)
    float* Ss = Sall + warp * 16 * AB_LDS;                           // this warp's S
    bf16* Ps = Pall + warp * 16 * AB_LDP;                            // this warp's P

    ab_load_tile<HD>(Qs, head, q0, AB_FWD_ROWS, T, row3);
    ab_acc o[NF];
#pragma unroll
    for (int n = 0; n < NF; n++) wmma::fill_fragment(o[n], 0.0f);
    float xscale = scale * AB_LOG2E;
    int r = lane >> 1, half = lane & 1, t = q0 + 16 * warp + r;
    float m = -INFINITY, l = 0.0f;
    int last = causal ? min(q0 + AB_FWD_ROWS, T) - 1 : T - 1;
    int tiles = last / AB_KEYS + 1;
    for (int j = 0; j < tiles; j++) {
        int u0 = j * AB_KEYS;
        __syncthreads();  // the previous tile's K and V are no longer read
        ab_load_tile<HD>(Ks, head + C, u0, AB_KEYS, T, row3);
        ab_load_tile<HD>(Vs, head + 2 * C, u0, AB_KEYS, T, row3);
        __syncthreads();
        ab_acc s[AB_KEYS / 16];
#pragma unroll
        for (int n = 0; n < AB_KEYS / 16; n++) wmma::fill_fragment(s[n], 0.0f);
        ab_mma<NF, AB_KEYS / 16, true>(s, Qs + 16 * warp * LDH, LDH, Ks, LDH);
#pragma unroll
        for (int n = 0; n < AB_KEYS / 16; n++) wmma::store_matrix_sync(Ss + 16 * n, s[n], AB_LDS, wmma::mem_row_major);
        __syncwarp();
        float x[16], mx = -INFINITY;
#pragma unroll
        for (int c = 0; c < 16; c++) {
            int k = 16 * half + c;
            x[c] = ab_visible(t, u0 + k, T, causal) ? Ss[r * AB_LDS + k] * xscale : -INFINITY;
            mx = fmaxf(mx, x[c]);
        }
        float mn = fmaxf(m, fmaxf(mx, __shfl_xor_sync(AB_FULL_MASK, mx, 1)));
        float alpha = exp2f(m - mn), sum = 0.0f;
#pragma unroll
        for (int c = 0; c < 16; c++) {
            float p = exp2f(x[c] - mn);
            sum += p;
            Ps[r * AB_LDP + 16 * half + c] = __float2bfloat16_rn(p);
        }
        l = alpha * l + (sum + __shfl_xor_sync(AB_FULL_MASK, sum, 1));
        m = mn;
        // O = α·O, through shared memory, when any row's max moved (O is 0 before tile 1; S is read: its space
        // holds one 16×16 block)
        if (j > 0 && warp_max(alpha < 1.0f ? 1.0f : 0.0f) > 0.0f) {
            float a_row[8];
            ab_row_values(alpha, lane, a_row);
#pragma unroll
            for (int n = 0; n < NF; n++) {
                __syncwarp();
                wmma::store_matrix_sync(Ss, o[n], AB_LDS, wmma::mem_row_major);
                __syncwarp();
#pragma unroll
                for (int e = 0; e < 8; e++) {
                    int idx = lane + 32 * e;
                    Ss[(idx >> 4) * AB_LDS + (idx & 15)] *= a_row[e];
                }
                __syncwarp();
                wmma::load_matrix_sync(o[n], Ss, AB_LDS, wmma::mem_row_major);
            }
        }
        __syncwarp();  // P is written
        ab_mma<AB_KEYS / 16, NF, false>(o, Ps, AB_LDP, Vs, LDH);
    }
    // out = O / l, a 16×16 block at a time through the warp's S space
    float inv_row[8];
    ab_row_values(1.0f / l, lane, inv_row);
#pragma unroll
    for (int n = 0; n < NF; n++) {
        __syncwarp();
        wmma::store_matrix_sync(Ss, o[n], AB_LDS, wmma::mem_row_major);
        __syncwarp();
#pragma unroll
        for (int e = 0; e < 8; e++) {
            int idx = lane + 32 * e, rr = idx >> 4, tt = q0 + 16 * warp + rr;
            if (tt < T) {
                out[((long long) b * T + tt) * C + (long long) h * HD + 16 * n + (idx & 15)] =
                        __float2bfloat16_rn(Ss[rr * AB_LDS + (idx & 15)] * inv_row[e]);
            }
        }
    }
    if (half == 0 && t < T) lse[((long long) b * NH + h) * T + t] = (m + log2f(l)) * AB_LN2;
}

// Writes out (B,T,C) bf16 and lse (B,NH,T) from qkv (B,T,3C) bf16; causal ≠ 0 masks keys after the query.
// grid = (⌈T/64⌉, NH, B), 128 threads, attention_bf16_forward_smem(HD) bytes of dynamic shared memory
// (64 + 2·32 rows of HD + 8 bf16, 4 warps' 16×36 fp32 and 16×40 bf16: 48 KiB at HD 128, 32 KiB at 64).
extern "C" __global__ void __launch_bounds__(AB_THREADS, AB_MIN_BLOCKS) attention_bf16_forward(
        bf16* __restrict__ out, float* __restrict__ lse, const bf16* __restrict__ qkv, int B, int T, int C, int NH,
        float scale, int causal) {
    extern __shared__ __align__(128) unsigned char ab_smem[];
    if (C / NH == 64) attention_bf16_forward_tile<64>(out, lse, qkv, T, C, NH, scale, causal != 0, ab_smem);
    else attention_bf16_forward_tile<128>(out, lse, qkv, T, C, NH, scale, causal != 0, ab_smem);
}

// ---- backward

// D (B,NH,T) fp32: D[b,h,t] = Σ_d dout[b,t,h·HD+d]·out[b,t,h·HD+d] (bf16 inputs, fp32 sum). One warp per (b, t, h),
// the heads of a position in consecutive warps; blockDim.x a multiple of 32, grid = ⌈B·T·NH / warps per block⌉.
extern "C" __global__ void attention_bf16_backward_d(float* __restrict__ D, const bf16* __restrict__ dout,
        const bf16* __restrict__ out, int B, int T, int C, int NH) {
    int lane = threadIdx.x & 31;
    long long row = (long long) blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= (long long) B * T * NH) return;
    int hs = C / NH, h = (int) (row % NH);
    long long bt = row / NH;
    long long at = bt * C + (long long) h * hs;
    float s = 0.0f;
    for (int d = lane; d < hs; d += 32) s += __bfloat162float(dout[at + d]) * __bfloat162float(out[at + d]);
    s = warp_sum(s);
    int b = (int) (bt / T), t = (int) (bt % T);
    if (lane == 0) D[((long long) b * NH + h) * T + t] = s;
}

// The shared step of both backward kernels, for warp (g, c) on its 16×16 block of a 32×32 tile pair:
//   S = A₁·B₁ᵀ (scores), dP = A₂·B₂ᵀ, P = exp2(scale·log2e·S − log2e·lse) where visible (else 0), dS = P∘(dP − D),
// P and dS (bf16) written at the same place of Pb, dSb; rows are queries (dQ) or keys (dK/dV, transposed), so the
// caller says which of (row, column) is the query through KEY_ROWS. Ends with the block's bf16 tiles complete
// (a __syncthreads).
template <int HD, bool KEY_ROWS>
__device__ __forceinline__ void ab_p_ds(const bf16* a1, const bf16* b1, const bf16* a2, const bf16* b2, float* Ss,
        float* dPs, bf16* Pb, bf16* dSb, int g, int c, int row0, int col0, int T, bool causal, float xscale,
        const float* __restrict__ lse_h, const float* __restrict__ D_h) {
    constexpr int LDH = HD + 8, NF = HD / 16;
    int lane = threadIdx.x & 31;
    ab_acc s, dp;
    wmma::fill_fragment(s, 0.0f);
    wmma::fill_fragment(dp, 0.0f);
    ab_mma<NF, 1, true>(&s, a1 + 16 * g * LDH, LDH, b1 + 16 * c * LDH, LDH);
    ab_mma<NF, 1, true>(&dp, a2 + 16 * g * LDH, LDH, b2 + 16 * c * LDH, LDH);
    int at = 16 * g * AB_LDS + 16 * c;
    wmma::store_matrix_sync(Ss + at, s, AB_LDS, wmma::mem_row_major);
    wmma::store_matrix_sync(dPs + at, dp, AB_LDS, wmma::mem_row_major);
    __syncwarp();
#pragma unroll
    for (int e = 0; e < 8; e++) {
        int idx = lane + 32 * e, rr = 16 * g + (idx >> 4), cc = 16 * c + (idx & 15);
        int t = KEY_ROWS ? col0 + cc : row0 + rr, u = KEY_ROWS ? row0 + rr : col0 + cc;
        float p = 0.0f, ds = 0.0f;
        if (t < T && ab_visible(t, u, T, causal)) {
            p = exp2f(Ss[rr * AB_LDS + cc] * xscale - lse_h[t] * AB_LOG2E);
            ds = p * (dPs[rr * AB_LDS + cc] - D_h[t]);
        }
        Pb[rr * AB_LDP + cc] = __float2bfloat16_rn(p);
        dSb[rr * AB_LDP + cc] = __float2bfloat16_rn(ds);
    }
    __syncthreads();
}

// Writes acc·mul (16 × HD/2 of fragments) as bf16 into rows row0 + 16g … (< T) of dst (row r at dst + r·stride),
// columns 16n, through the warp's 16×16 fp32 scratch.
template <int HD>
__device__ __forceinline__ void ab_store_rows(bf16* __restrict__ dst, long long stride, ab_acc* acc, float mul,
        int row0, int T, float* scratch) {
    int lane = threadIdx.x & 31;
#pragma unroll
    for (int n = 0; n < HD / 32; n++) {
        __syncwarp();
        wmma::store_matrix_sync(scratch, acc[n], 16, wmma::mem_row_major);
        __syncwarp();
#pragma unroll
        for (int e = 0; e < 8; e++) {
            int idx = lane + 32 * e, t = row0 + (idx >> 4);
            if (t < T) dst[(long long) t * stride + 16 * n + (idx & 15)] = __float2bfloat16_rn(scratch[idx] * mul);
        }
    }
}

// dQ of query rows q0 … q0+31 of head h of batch b, over the key tiles j (at or left of the diagonal when causal):
//   S = Q·Kⱼᵀ,  P = exp(scale·S − lse),  dP = dO·Vⱼᵀ,  dS = P∘(dP − D),  dQ += bf16(dS)·Kⱼ
//   dqkv[Q columns] = bf16(scale·dQ)
template <int HD>
__device__ __forceinline__ void attention_bf16_backward_dq_tile(bf16* __restrict__ dqkv, const bf16* __restrict__ dout,
        const bf16* __restrict__ qkv, const float* __restrict__ lse, const float* __restrict__ D, int T, int C,
        int NH, float scale, bool causal, unsigned char* smem) {
    constexpr int LDH = HD + 8, NC = HD / 32;
    int h = blockIdx.y, b = blockIdx.z;
    int warp = threadIdx.x >> 5, g = warp >> 1, c = warp & 1;
    int q0 = (causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * AB_BWD_ROWS;
    long long row3 = 3LL * C;
    const bf16* head = qkv + (long long) b * T * row3 + (long long) h * HD;
    const float* lse_h = lse + ((long long) b * NH + h) * T;
    const float* D_h = D + ((long long) b * NH + h) * T;
    bf16* Qs = reinterpret_cast<bf16*>(smem);  // (32, LDH) each
    bf16* dOs = Qs + AB_BWD_ROWS * LDH;
    bf16* Ks = dOs + AB_BWD_ROWS * LDH;
    bf16* Vs = Ks + AB_KEYS * LDH;
    float* Ss = reinterpret_cast<float*>(Vs + AB_KEYS * LDH);  // (32, LDS) each
    float* dPs = Ss + AB_BWD_ROWS * AB_LDS;
    bf16* Pb = reinterpret_cast<bf16*>(dPs + AB_BWD_ROWS * AB_LDS);  // (32, LDP) each
    bf16* dSb = Pb + AB_BWD_ROWS * AB_LDP;

    ab_load_tile<HD>(Qs, head, q0, AB_BWD_ROWS, T, row3);
    ab_load_tile<HD>(dOs, dout + (long long) b * T * C + (long long) h * HD, q0, AB_BWD_ROWS, T, C);
    ab_acc dq[NC];
#pragma unroll
    for (int n = 0; n < NC; n++) wmma::fill_fragment(dq[n], 0.0f);
    int last = causal ? min(q0 + AB_BWD_ROWS, T) - 1 : T - 1;
    int tiles = last / AB_KEYS + 1;
    for (int j = 0; j < tiles; j++) {
        __syncthreads();  // the previous tile is no longer read
        ab_load_tile<HD>(Ks, head + C, j * AB_KEYS, AB_KEYS, T, row3);
        ab_load_tile<HD>(Vs, head + 2 * C, j * AB_KEYS, AB_KEYS, T, row3);
        __syncthreads();
        ab_p_ds<HD, false>(Qs, Ks, dOs, Vs, Ss, dPs, Pb, dSb, g, c, q0, j * AB_KEYS, T, causal, scale * AB_LOG2E,
                lse_h, D_h);
        ab_mma<AB_KEYS / 16, NC, false>(dq, dSb + 16 * g * AB_LDP, AB_LDP, Ks + c * (HD / 2), LDH);
    }
    __syncthreads();  // S space free: warp w's 16×16 scratch
    ab_store_rows<HD>(dqkv + (long long) b * T * row3 + (long long) h * HD + c * (HD / 2), row3, dq, scale,
            q0 + 16 * g, T, Ss + 256 * warp);
}

// dqkv[:, :, 0:C] = dQ (bf16) from dout (B,T,C) bf16, qkv, lse (B,NH,T) and D (B,NH,T) (attention_bf16_backward_d).
// grid = (⌈T/32⌉, NH, B), 128 threads, attention_bf16_backward_smem(HD) bytes of dynamic shared memory
// (4·32 rows of HD + 8 bf16, 2·32×36 fp32, 2·32×40 bf16: 48 KiB at HD 128, 32 KiB at 64).
extern "C" __global__ void __launch_bounds__(AB_THREADS, AB_MIN_BLOCKS) attention_bf16_backward_dq(
        bf16* __restrict__ dqkv, const bf16* __restrict__ dout, const bf16* __restrict__ qkv,
        const float* __restrict__ lse, const float* __restrict__ D, int B, int T, int C, int NH, float scale,
        int causal) {
    extern __shared__ __align__(128) unsigned char ab_smem[];
    if (C / NH == 64) attention_bf16_backward_dq_tile<64>(dqkv, dout, qkv, lse, D, T, C, NH, scale, causal, ab_smem);
    else attention_bf16_backward_dq_tile<128>(dqkv, dout, qkv, lse, D, T, C, NH, scale, causal, ab_smem);
}

// dK, dV of keys k0 … k0+31 of head h of batch b, over the query tiles i (at or below the diagonal when causal):
//   Sᵀ = K·Qᵢᵀ,  Pᵀ = exp(scale·Sᵀ − lseᵢ),  dPᵀ = V·dOᵢᵀ,  dSᵀ = Pᵀ∘(dPᵀ − Dᵢ),
//   dV += bf16(Pᵀ)·dOᵢ,  dK += bf16(dSᵀ)·Qᵢ
//   dqkv[K columns] = bf16(scale·dK),  dqkv[V columns] = bf16(dV)
template <int HD>
__device__ __forceinline__ void attention_bf16_backward_dkdv_tile(bf16* __restrict__ dqkv,
        const bf16* __restrict__ dout, const bf16* __restrict__ qkv, const float* __restrict__ lse,
        const float* __restrict__ D, int T, int C, int NH, float scale, bool causal, unsigned char* smem) {
    constexpr int LDH = HD + 8, NC = HD / 32;
    int h = blockIdx.y, b = blockIdx.z;
    int warp = threadIdx.x >> 5, g = warp >> 1, c = warp & 1;
    int k0 = blockIdx.x * AB_BWD_ROWS;  // causal: the first keys see the most queries, first
    long long row3 = 3LL * C;
    const bf16* head = qkv + (long long) b * T * row3 + (long long) h * HD;
    const bf16* dout_h = dout + (long long) b * T * C + (long long) h * HD;
    const float* lse_h = lse + ((long long) b * NH + h) * T;
    const float* D_h = D + ((long long) b * NH + h) * T;
    bf16* Ks = reinterpret_cast<bf16*>(smem);  // (32, LDH) each
    bf16* Vs = Ks + AB_BWD_ROWS * LDH;
    bf16* Qs = Vs + AB_BWD_ROWS * LDH;
    bf16* dOs = Qs + AB_KEYS * LDH;
    float* Ss = reinterpret_cast<float*>(dOs + AB_KEYS * LDH);  // (32, LDS) each: Sᵀ, dPᵀ
    float* dPs = Ss + AB_BWD_ROWS * AB_LDS;
    bf16* Pb = reinterpret_cast<bf16*>(dPs + AB_BWD_ROWS * AB_LDS);  // (32, LDP) each: Pᵀ, dSᵀ
    bf16* dSb = Pb + AB_BWD_ROWS * AB_LDP;

    ab_load_tile<HD>(Ks, head + C, k0, AB_BWD_ROWS, T, row3);
    ab_load_tile<HD>(Vs, head + 2 * C, k0, AB_BWD_ROWS, T, row3);
    ab_acc dk[NC], dv[NC];
#pragma unroll
    for (int n = 0; n < NC; n++) {
        wmma::fill_fragment(dk[n], 0.0f);
        wmma::fill_fragment(dv[n], 0.0f);
    }
    int tiles = (T + AB_KEYS - 1) / AB_KEYS;
    for (int i = causal ? k0 / AB_KEYS : 0; i < tiles; i++) {
        int t0 = i * AB_KEYS;
        __syncthreads();
        ab_load_tile<HD>(Qs, head, t0, AB_KEYS, T, row3);
        ab_load_tile<HD>(dOs, dout_h, t0, AB_KEYS, T, C);
        __syncthreads();
        ab_p_ds<HD, true>(Ks, Qs, Vs, dOs, Ss, dPs, Pb, dSb, g, c, k0, t0, T, causal, scale * AB_LOG2E, lse_h, D_h);
        ab_mma<AB_KEYS / 16, NC, false>(dv, Pb + 16 * g * AB_LDP, AB_LDP, dOs + c * (HD / 2), LDH);
        ab_mma<AB_KEYS / 16, NC, false>(dk, dSb + 16 * g * AB_LDP, AB_LDP, Qs + c * (HD / 2), LDH);
    }
    __syncthreads();
    bf16* dk_out = dqkv + (long long) b * T * row3 + C + (long long) h * HD + c * (HD / 2);
    ab_store_rows<HD>(dk_out, row3, dk, scale, k0 + 16 * g, T, Ss + 256 * warp);
    ab_store_rows<HD>(dk_out + C, row3, dv, 1.0f, k0 + 16 * g, T, Ss + 256 * warp);
}

// dqkv[:, :, C:3C] = dK, dV (bf16) from dout (B,T,C) bf16, qkv, lse (B,NH,T) and D (B,NH,T). grid = (⌈T/32⌉, NH, B),
// 128 threads, attention_bf16_backward_smem(HD) bytes of dynamic shared memory (as attention_bf16_backward_dq).
extern "C" __global__ void __launch_bounds__(AB_THREADS, AB_MIN_BLOCKS) attention_bf16_backward_dkdv(
        bf16* __restrict__ dqkv, const bf16* __restrict__ dout, const bf16* __restrict__ qkv,
        const float* __restrict__ lse, const float* __restrict__ D, int B, int T, int C, int NH, float scale,
        int causal) {
    extern __shared__ __align__(128) unsigned char ab_smem[];
    if (C / NH == 64) {
        attention_bf16_backward_dkdv_tile<64>(dqkv, dout, qkv, lse, D, T, C, NH, scale, causal, ab_smem);
    } else {
        attention_bf16_backward_dkdv_tile<128>(dqkv, dout, qkv, lse, D, T, C, NH, scale, causal, ab_smem);
    }
}

// ---- into AttentionOps' fp32 gradient

// acc (n) fp32 += grad (n) bf16 (exact widening, one fp32 add), grid-stride: GpuOps adds the backward's bf16 dqkv
// (written, not added to) into the contract's fp32 dqkv with it, so that each gradient is rounded to bf16 once.
extern "C" __global__ void attention_bf16_accumulate(float* __restrict__ acc, const bf16* __restrict__ grad,
        long long n) {
    long long stride = (long long) gridDim.x * blockDim.x;
    for (long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        acc[i] += __bfloat162float(grad[i]);
    }
}
