// Causal multi-head self-attention, FlashAttention-2 in fp32 (io.accel4j.core.ops.AttentionOps has the contract;
// io.accel4j.cpu.ops.FlashAttention is the CPU kernel these mirror). qkv (B,T,3C): Q in columns [0,C), K in [C,2C),
// V in [2C,3C), head h in columns h·hs … (h+1)·hs of each; out (B,T,C); lse (B,NH,T); hs = C/NH ≤ 128;
// scale = 1/√hs, passed by the host (rounded from float64 as the CPU kernel does). The T×T scores are never stored: tiles live in shared memory,
// statistics and accumulators in registers, everything in fp32, every sum in a fixed order (no atomics), so the
// results are deterministic.
//
// Tiles. Head dimensions are zero-padded to HSP ∈ {32, 64, 128} (the smallest ≥ hs; each lane owns the columns
// d = lane + 32·i, i < HSP/32), so a dot product over HSP columns is exact. Rows past T are zero. Every kernel runs
// 128 threads (4 warps) and takes 96·HSP floats of dynamic shared memory (48 KiB at HSP 128, the most a launch may
// use without opting in):
//   forward, dQ: a block owns a query tile (warp w its rows w·RPW …), lanes run over a key tile of 32;
//   dK/dV:       a block owns a key tile of 16 (warp w its keys w·4 …), lanes run over a query tile of 32.
// A tile read by "lane = row" is stored swizzled (column d of row r at r·HSP + (d ^ (r & 31))): reading a column
// across 32 rows and reading a row across 32 columns both hit 32 different banks; a tile read only by broadcast
// (all lanes the same address) is stored plainly so that it can be read as float4.
#include "common.cuh"

#define ATTN_THREADS 128
// Blocks per multiprocessor the register budget is planned for: 48 KiB of shared memory each, 4 fit on an SM of
// 228 KiB (Hopper; 164 KiB Ampere: 3), so up to 128 registers a thread cost no occupancy.
#define ATTN_MIN_BLOCKS 4
#define ATTN_WARPS 4
#define ATTN_KEYS 32   // key tile of the forward and dQ kernels (one key per lane)
#define ATTN_QUERIES 32  // query tile of the dK/dV kernel (one query per lane)
#define FULL_MASK 0xffffffffu

__device__ __forceinline__ int attn_swizzle(int row, int d, int hsp) {
    return row * hsp + (d ^ (row & 31));
}

// dst (rows, HSP) = mul·src rows t0 … t0+rows−1 (row t at src + t·stride, columns [0, hs)), zero past T and past hs.
// All threads of the block take part; coalesced along the columns.
template <int HSP, bool SWIZZLE>
__device__ __forceinline__ void attn_load_tile(float* dst, const float* __restrict__ src, int t0, int rows, int T,
        int hs, long long stride, float mul) {
    for (int idx = threadIdx.x; idx < rows * HSP; idx += ATTN_THREADS) {
        int r = idx / HSP, d = idx % HSP, t = t0 + r;
        float v = t < T && d < hs ? mul * src[(long long) t * stride + d] : 0.0f;
        dst[SWIZZLE ? attn_swizzle(r, d, HSP) : idx] = v;
    }
}

// The head size padded as the kernels pad it (the host computes the same to size shared memory).
__device__ __forceinline__ int attn_padded(int hs) {
    return hs <= 32 ? 32 : hs <= 64 ? 64 : 128;
}

// ---- forward

// Query tile qt (rows q0 … q0+BR−1, BR = 4·RPW) of head h of batch b; the block loops over the key tiles j at or
// left of the diagonal, as the CPU kernel:
//   m = −∞, l = 0, O = 0
//   for key tiles j:  S = (scale·Q)·Kⱼᵀ (key > query masked with −∞),  m' = max(m, rowmax S),  P = exp(S − m'),
//                     α = exp(m − m'),  l = α·l + rowsum P,  O = α·O + P·Vⱼ,  m = m'
//   out = O / l (as O·(1/l)),  lse = m + log l
// Lane = key within the tile for S (a row's max and sum are warp reductions); lane = column for O.
// Every visited tile holds a key ≤ every row's query (key tiles start at multiples of 32, query tiles at multiples
// of BR, BR divides 32 or 32 divides BR), so m' is finite after the first tile and no −∞ − −∞ arises.
template <int HSP, int RPW>
__device__ __forceinline__ void attention_forward_tile(float* __restrict__ out, float* __restrict__ lse,
        const float* __restrict__ qkv, int T, int C, int NH, float scale, float* smem) {
    constexpr int BR = ATTN_WARPS * RPW, NI = HSP / 32;
    int hs = C / NH, h = blockIdx.y, b = blockIdx.z;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int q0 = (gridDim.x - 1 - blockIdx.x) * BR;  // the longest rows first
    long long row3 = 3LL * C;
    const float* head = qkv + (long long) b * T * row3 + (long long) h * hs;
    float* Qs = smem;                 // (BR, HSP) plain, scale·q
    float* Ks = Qs + BR * HSP;        // (32, HSP) swizzled
    float* Vs = Ks + ATTN_KEYS * HSP; // (32, HSP) plain

    attn_load_tile<HSP, false>(Qs, head, q0, BR, T, hs, row3, scale);
    float m[RPW], l[RPW], o[RPW][NI];
#pragma unroll
    for (int k = 0; k < RPW; k++) {
        m[k] = -INFINITY;
        l[k] = 0.0f;
#pragma unroll
        for (int i = 0; i < NI; i++) o[k][i] = 0.0f;
    }
    int r0 = warp * RPW;
    int tiles = (min(q0 + BR, T) - 1) / ATTN_KEYS + 1;
    for (int j = 0; j < tiles; j++) {
        int u0 = j * ATTN_KEYS, u = u0 + lane;
        __syncthreads();  // the previous tile's K and V are no longer read (and Q is loaded)
        attn_load_tile<HSP, true>(Ks, head + C, u0, ATTN_KEYS, T, hs, row3, 1.0f);
        attn_load_tile<HSP, false>(Vs, head + 2 * C, u0, ATTN_KEYS, T, hs, row3, 1.0f);
        __syncthreads();
        float s[RPW];
#pragma unroll
        for (int k = 0; k < RPW; k++) s[k] = 0.0f;
#pragma unroll 2
        for (int d = 0; d < HSP; d += 4) {
            float k0 = Ks[attn_swizzle(lane, d, HSP)], k1 = Ks[attn_swizzle(lane, d + 1, HSP)];
            float k2 = Ks[attn_swizzle(lane, d + 2, HSP)], k3 = Ks[attn_swizzle(lane, d + 3, HSP)];
#pragma unroll
            for (int k = 0; k < RPW; k++) {
                float4 q = *reinterpret_cast<const float4*>(Qs + (r0 + k) * HSP + d);
                s[k] += q.x * k0 + q.y * k1 + q.z * k2 + q.w * k3;
            }
        }
#pragma unroll
        for (int k = 0; k < RPW; k++) {
            float sv = u <= q0 + r0 + k ? s[k] : -INFINITY;
            float mn = fmaxf(m[k], warp_max(sv));
            float p = expf(sv - mn), alpha = expf(m[k] - mn);
            l[k] = alpha * l[k] + warp_sum(p);
            m[k] = mn;
            s[k] = p;
#pragma unroll
            for (int i = 0; i < NI; i++) o[k][i] *= alpha;
        }
#pragma unroll 4
        for (int c = 0; c < ATTN_KEYS; c++) {
            float v[NI];
#pragma unroll
            for (int i = 0; i < NI; i++) v[i] = Vs[c * HSP + lane + 32 * i];
#pragma unroll
            for (int k = 0; k < RPW; k++) {
                float p = __shfl_sync(FULL_MASK, s[k], c);
#pragma unroll
                for (int i = 0; i < NI; i++) o[k][i] += p * v[i];
            }
        }
    }
#pragma unroll
    for (int k = 0; k < RPW; k++) {
        int t = q0 + r0 + k;
        if (t >= T) continue;
        float inv = 1.0f / l[k];
        float* o_row = out + ((long long) b * T + t) * C + (long long) h * hs;
#pragma unroll
        for (int i = 0; i < NI; i++) {
            int d = lane + 32 * i;
            if (d < hs) o_row[d] = o[k][i] * inv;
        }
        if (lane == 0) lse[((long long) b * NH + h) * T + t] = m[k] + logf(l[k]);
    }
}

// Rows of a forward query tile per warp: BR = 32, so Q, K, V tiles take 96·HSP floats.
#define ATTN_FWD_RPW 8

// Writes out (B,T,C) and lse (B,NH,T) from qkv (B,T,3C). grid = (⌈T/32⌉, NH, B), 128 threads,
// 96·HSP·4 bytes of dynamic shared memory; hs = C/NH ≤ 128 (the host checks).
extern "C" __global__ void __launch_bounds__(ATTN_THREADS, ATTN_MIN_BLOCKS) attention_forward(float* __restrict__ out,
        float* __restrict__ lse, const float* __restrict__ qkv, int B, int T, int C, int NH, float scale) {
    extern __shared__ float4 attn_smem[];
    float* smem = reinterpret_cast<float*>(attn_smem);
    switch (attn_padded(C / NH)) {
        case 32: attention_forward_tile<32, ATTN_FWD_RPW>(out, lse, qkv, T, C, NH, scale, smem); break;
        case 64: attention_forward_tile<64, ATTN_FWD_RPW>(out, lse, qkv, T, C, NH, scale, smem); break;
        default: attention_forward_tile<128, ATTN_FWD_RPW>(out, lse, qkv, T, C, NH, scale, smem); break;
    }
}

// ---- backward

// D (B,NH,T): D[b,h,t] = dout[b,t,h·hs …]·out[b,t,h·hs …] (the row sums of dO∘O). One warp per (b, t, h), the heads
// of a position in consecutive warps; blockDim.x a multiple of 32, grid = ⌈B·T·NH / warps per block⌉.
extern "C" __global__ void attention_backward_d(float* __restrict__ D, const float* __restrict__ dout,
        const float* __restrict__ out, int B, int T, int C, int NH) {
    int lane = threadIdx.x & 31;
    long long row = (long long) blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= (long long) B * T * NH) return;
    int hs = C / NH, h = (int) (row % NH);
    long long bt = row / NH;  // b·T + t
    long long at = bt * C + (long long) h * hs;
    float s = 0.0f;
    for (int d = lane; d < hs; d += 32) s += dout[at + d] * out[at + d];
    s = warp_sum(s);
    int b = (int) (bt / T), t = (int) (bt % T);
    if (lane == 0) D[((long long) b * NH + h) * T + t] = s;
}

// dQ of query tile q0 … q0+BR−1 (BR = 4·RPW) of head h of batch b, over the key tiles j at or left of the diagonal:
//   S = (scale·Q)·Kⱼᵀ,  P = exp(S − lse) (0 where key > query),  dP = dO·Vⱼᵀ,  dS = P∘(dP − D),  dQ += dS·Kⱼ
//   dqkv[Q columns] += scale·dQ
// Lane = key for S, dP, dS; lane = column for dQ. A pass of its own (FA2 adds dQ with atomics from the dK/dV pass),
// so that every dQ element is summed by one thread in key order.
template <int HSP, int RPW>
__device__ __forceinline__ void attention_backward_dq_tile(float* __restrict__ dqkv, const float* __restrict__ dout,
        const float* __restrict__ qkv, const float* __restrict__ lse, const float* __restrict__ D, int T, int C,
        int NH, float scale, float* smem) {
    constexpr int BR = ATTN_WARPS * RPW, NI = HSP / 32;
    int hs = C / NH, h = blockIdx.y, b = blockIdx.z;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int q0 = (gridDim.x - 1 - blockIdx.x) * BR;
    long long row3 = 3LL * C;
    const float* head = qkv + (long long) b * T * row3 + (long long) h * hs;
    float* Qs = smem;                   // (BR, HSP) plain, scale·q
    float* dOs = Qs + BR * HSP;         // (BR, HSP) plain
    float* Ks = dOs + BR * HSP;         // (32, HSP) swizzled
    float* Vs = Ks + ATTN_KEYS * HSP;   // (32, HSP) swizzled

    attn_load_tile<HSP, false>(Qs, head, q0, BR, T, hs, row3, scale);
    attn_load_tile<HSP, false>(dOs, dout + (long long) b * T * C + (long long) h * hs, q0, BR, T, hs, C, 1.0f);
    int r0 = warp * RPW;
    const float* lse_h = lse + ((long long) b * NH + h) * T;
    const float* D_h = D + ((long long) b * NH + h) * T;
    float lse_r[RPW], D_r[RPW], dq[RPW][NI];
#pragma unroll
    for (int k = 0; k < RPW; k++) {
        int t = q0 + r0 + k;
        lse_r[k] = t < T ? lse_h[t] : 0.0f;
        D_r[k] = t < T ? D_h[t] : 0.0f;
#pragma unroll
        for (int i = 0; i < NI; i++) dq[k][i] = 0.0f;
    }
    int tiles = (min(q0 + BR, T) - 1) / ATTN_KEYS + 1;
    for (int j = 0; j < tiles; j++) {
        int u = j * ATTN_KEYS + lane;
        __syncthreads();
        attn_load_tile<HSP, true>(Ks, head + C, j * ATTN_KEYS, ATTN_KEYS, T, hs, row3, 1.0f);
        attn_load_tile<HSP, true>(Vs, head + 2 * C, j * ATTN_KEYS, ATTN_KEYS, T, hs, row3, 1.0f);
        __syncthreads();
        float s[RPW], dp[RPW];
#pragma unroll
        for (int k = 0; k < RPW; k++) s[k] = dp[k] = 0.0f;
#pragma unroll 2
        for (int d = 0; d < HSP; d += 4) {
            float kv[4], vv[4];
#pragma unroll
            for (int e = 0; e < 4; e++) {
                kv[e] = Ks[attn_swizzle(lane, d + e, HSP)];
                vv[e] = Vs[attn_swizzle(lane, d + e, HSP)];
            }
#pragma unroll
            for (int k = 0; k < RPW; k++) {
                float4 q = *reinterpret_cast<const float4*>(Qs + (r0 + k) * HSP + d);
                float4 g = *reinterpret_cast<const float4*>(dOs + (r0 + k) * HSP + d);
                s[k] += q.x * kv[0] + q.y * kv[1] + q.z * kv[2] + q.w * kv[3];
                dp[k] += g.x * vv[0] + g.y * vv[1] + g.z * vv[2] + g.w * vv[3];
            }
        }
#pragma unroll
        for (int k = 0; k < RPW; k++) {
            int t = q0 + r0 + k;
            float p = t < T && u <= t ? expf(s[k] - lse_r[k]) : 0.0f;
            s[k] = p * (dp[k] - D_r[k]);  // dS
        }
#pragma unroll 4
        for (int c = 0; c < ATTN_KEYS; c++) {
            float kc[NI];
#pragma unroll
            for (int i = 0; i < NI; i++) kc[i] = Ks[attn_swizzle(c, lane + 32 * i, HSP)];
#pragma unroll
            for (int k = 0; k < RPW; k++) {
                float ds = __shfl_sync(FULL_MASK, s[k], c);
#pragma unroll
                for (int i = 0; i < NI; i++) dq[k][i] += ds * kc[i];
            }
        }
    }
#pragma unroll
    for (int k = 0; k < RPW; k++) {
        int t = q0 + r0 + k;
        if (t >= T) continue;
        float* dq_row = dqkv + ((long long) b * T + t) * row3 + (long long) h * hs;
#pragma unroll
        for (int i = 0; i < NI; i++) {
            int d = lane + 32 * i;
            if (d < hs) dq_row[d] += scale * dq[k][i];
        }
    }
}

// Rows of a dQ query tile per warp: BR = 16, so Q, dO (16 rows each), K, V (32 rows each) take 96·HSP floats.
#define ATTN_DQ_RPW 4

// dqkv[:, :, 0:C] += dQ from dout (B,T,C), qkv, lse (B,NH,T) and D (B,NH,T) (attention_backward_d). grid =
// (⌈T/16⌉, NH, B), 128 threads, 96·HSP·4 bytes of dynamic shared memory.
extern "C" __global__ void __launch_bounds__(ATTN_THREADS, ATTN_MIN_BLOCKS) attention_backward_dq(float* __restrict__ dqkv,
        const float* __restrict__ dout, const float* __restrict__ qkv, const float* __restrict__ lse,
        const float* __restrict__ D, int B, int T, int C, int NH, float scale) {
    extern __shared__ float4 attn_smem[];
    float* smem = reinterpret_cast<float*>(attn_smem);
    switch (attn_padded(C / NH)) {
        case 32: attention_backward_dq_tile<32, ATTN_DQ_RPW>(dqkv, dout, qkv, lse, D, T, C, NH, scale, smem); break;
        case 64: attention_backward_dq_tile<64, ATTN_DQ_RPW>(dqkv, dout, qkv, lse, D, T, C, NH, scale, smem); break;
        default: attention_backward_dq_tile<128, ATTN_DQ_RPW>(dqkv, dout, qkv, lse, D, T, C, NH, scale, smem); break;
    }
}

// dK, dV of key tile k0 … k0+BC−1 (BC = 4·KPW) of head h of batch b, over the query tiles i (of 32) at or below the
// diagonal, as the CPU kernel's inner loop:
//   S = (scale·Qᵢ)·Kᵀ,  P = exp(S − lseᵢ) (0 where key > query),  dV += Pᵀ·dOᵢ,  dP = dOᵢ·Vᵀ,  dS = P∘(dP − Dᵢ),
//   dK += dSᵀ·(scale·Qᵢ)
//   dqkv[K columns] += dK,  dqkv[V columns] += dV
// Lane = query for S, dP, dS; lane = column for dK, dV.
template <int HSP, int KPW>
__device__ __forceinline__ void attention_backward_dkdv_tile(float* __restrict__ dqkv,
        const float* __restrict__ dout, const float* __restrict__ qkv, const float* __restrict__ lse,
        const float* __restrict__ D, int T, int C, int NH, float scale, float* smem) {
    constexpr int BC = ATTN_WARPS * KPW, NI = HSP / 32;
    int hs = C / NH, h = blockIdx.y, b = blockIdx.z;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int k0 = blockIdx.x * BC;  // the first key tiles see the most queries: first
    long long row3 = 3LL * C;
    const float* head = qkv + (long long) b * T * row3 + (long long) h * hs;
    const float* dout_h = dout + (long long) b * T * C + (long long) h * hs;
    const float* lse_h = lse + ((long long) b * NH + h) * T;
    const float* D_h = D + ((long long) b * NH + h) * T;
    float* Ks = smem;                       // (BC, HSP) plain
    float* Vs = Ks + BC * HSP;              // (BC, HSP) plain
    float* Qs = Vs + BC * HSP;              // (32, HSP) swizzled, scale·q
    float* dOs = Qs + ATTN_QUERIES * HSP;   // (32, HSP) swizzled

    attn_load_tile<HSP, false>(Ks, head + C, k0, BC, T, hs, row3, 1.0f);
    attn_load_tile<HSP, false>(Vs, head + 2 * C, k0, BC, T, hs, row3, 1.0f);
    int c0 = warp * KPW;
    float dk[KPW][NI], dv[KPW][NI];
#pragma unroll
    for (int k = 0; k < KPW; k++) {
#pragma unroll
        for (int i = 0; i < NI; i++) dk[k][i] = dv[k][i] = 0.0f;
    }
    int tiles = (T + ATTN_QUERIES - 1) / ATTN_QUERIES;
    for (int i0 = k0 / ATTN_QUERIES; i0 < tiles; i0++) {
        int t0 = i0 * ATTN_QUERIES, t = t0 + lane;
        __syncthreads();
        attn_load_tile<HSP, true>(Qs, head, t0, ATTN_QUERIES, T, hs, row3, scale);
        attn_load_tile<HSP, true>(dOs, dout_h, t0, ATTN_QUERIES, T, hs, C, 1.0f);
        float lse_t = t < T ? lse_h[t] : 0.0f, D_t = t < T ? D_h[t] : 0.0f;
        __syncthreads();
        float p[KPW], ds[KPW];
#pragma unroll
        for (int k = 0; k < KPW; k++) p[k] = ds[k] = 0.0f;
#pragma unroll 2
        for (int d = 0; d < HSP; d += 4) {
            float qv[4], gv[4];
#pragma unroll
            for (int e = 0; e < 4; e++) {
                qv[e] = Qs[attn_swizzle(lane, d + e, HSP)];
                gv[e] = dOs[attn_swizzle(lane, d + e, HSP)];
            }
#pragma unroll
            for (int k = 0; k < KPW; k++) {
                float4 kk = *reinterpret_cast<const float4*>(Ks + (c0 + k) * HSP + d);
                float4 vv = *reinterpret_cast<const float4*>(Vs + (c0 + k) * HSP + d);
                p[k] += kk.x * qv[0] + kk.y * qv[1] + kk.z * qv[2] + kk.w * qv[3];   // S
                ds[k] += vv.x * gv[0] + vv.y * gv[1] + vv.z * gv[2] + vv.w * gv[3];  // dP
            }
        }
#pragma unroll
        for (int k = 0; k < KPW; k++) {
            p[k] = t < T && k0 + c0 + k <= t ? expf(p[k] - lse_t) : 0.0f;
            ds[k] = p[k] * (ds[k] - D_t);
        }
#pragma unroll 4
        for (int r = 0; r < ATTN_QUERIES; r++) {
            float qr[NI], gr[NI];
#pragma unroll
            for (int i = 0; i < NI; i++) {
                qr[i] = Qs[attn_swizzle(r, lane + 32 * i, HSP)];
                gr[i] = dOs[attn_swizzle(r, lane + 32 * i, HSP)];
            }
#pragma unroll
            for (int k = 0; k < KPW; k++) {
                float pr = __shfl_sync(FULL_MASK, p[k], r), dsr = __shfl_sync(FULL_MASK, ds[k], r);
#pragma unroll
                for (int i = 0; i < NI; i++) {
                    dv[k][i] += pr * gr[i];
                    dk[k][i] += dsr * qr[i];
                }
            }
        }
    }
#pragma unroll
    for (int k = 0; k < KPW; k++) {
        int u = k0 + c0 + k;
        if (u >= T) continue;
        float* dk_row = dqkv + ((long long) b * T + u) * row3 + C + (long long) h * hs;
        float* dv_row = dk_row + C;
#pragma unroll
        for (int i = 0; i < NI; i++) {
            int d = lane + 32 * i;
            if (d < hs) {
                dk_row[d] += dk[k][i];
                dv_row[d] += dv[k][i];
            }
        }
    }
}

// Keys of a dK/dV tile per warp: BC = 16, so K, V (16 rows each), Q, dO (32 rows each) take 96·HSP floats.
#define ATTN_DKDV_KPW 4

// dqkv[:, :, C:3C] += dK, dV from dout (B,T,C), qkv, lse (B,NH,T) and D (B,NH,T). grid = (⌈T/16⌉, NH, B),
// 128 threads, 96·HSP·4 bytes of dynamic shared memory.
extern "C" __global__ void __launch_bounds__(ATTN_THREADS, ATTN_MIN_BLOCKS) attention_backward_dkdv(float* __restrict__ dqkv,
        const float* __restrict__ dout, const float* __restrict__ qkv, const float* __restrict__ lse,
        const float* __restrict__ D, int B, int T, int C, int NH, float scale) {
    extern __shared__ float4 attn_smem[];
    float* smem = reinterpret_cast<float*>(attn_smem);
    switch (attn_padded(C / NH)) {
        case 32: attention_backward_dkdv_tile<32, ATTN_DKDV_KPW>(dqkv, dout, qkv, lse, D, T, C, NH, scale, smem); break;
        case 64: attention_backward_dkdv_tile<64, ATTN_DKDV_KPW>(dqkv, dout, qkv, lse, D, T, C, NH, scale, smem); break;
        default: attention_backward_dkdv_tile<128, ATTN_DKDV_KPW>(dqkv, dout, qkv, lse, D, T, C, NH, scale, smem); break;
    }
}
