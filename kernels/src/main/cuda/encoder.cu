// Token plus position embedding.

// out[b,t,:] (B,T,C) = wte[inp[b,t], :] + wpe[t, :]. One thread per output element, grid-stride over B·T·C.
extern "C" __global__ void encoder_forward(float* __restrict__ out, const int* __restrict__ inp,
        const float* __restrict__ wte, const float* __restrict__ wpe, int B, int T, int C) {
    long long n = (long long) B * T * C;
    long long stride = (long long) gridDim.x * blockDim.x;
    for (long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        long long bt = i / C;
        int c = (int) (i - bt * C);
        int t = (int) (bt % T);
        out[i] = wte[(long long) inp[bt] * C + c] + wpe[(long long) t * C + c];
    }
}

// dwpe[t, c] (T,C) += Σ_b dout[b,t,c], summed in b order (deterministic, no atomics). One thread per (t, c).
extern "C" __global__ void encoder_backward_wpe(float* __restrict__ dwpe, const float* __restrict__ dout,
        int B, int T, int C) {
    long long n = (long long) T * C;
    long long stride = (long long) gridDim.x * blockDim.x;
    for (long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float acc = dwpe[i];
        for (int b = 0; b < B; b++) acc += dout[(long long) b * T * C + i];
        dwpe[i] = acc;
    }
}

// dwte[v, c] (V,C) += dout[b,t,c] for every (b,t) with inp[b,t] = v, added in (b,t) order (deterministic, no
// atomics). Thread (c, k) with c = blockIdx.x·blockDim.x + threadIdx.x and bucket k = blockIdx.y owns the rows
// v ≡ k (mod gridDim.y) of column c and scans all B·T tokens; the token reads are the same for every thread of a
// block (a broadcast from L1). Work is B·T·C·gridDim.y token reads: fine for gridDim.y ~ 16–64, not a fast kernel.
extern "C" __global__ void encoder_backward_wte(float* __restrict__ dwte, const float* __restrict__ dout,
        const int* __restrict__ inp, int BT, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int buckets = gridDim.y, k = blockIdx.y;
    if (c >= C) return;
    for (int bt = 0; bt < BT; bt++) {
        int v = inp[bt];
        if (v % buckets == k) {
            dwte[(long long) v * C + c] += dout[(long long) bt * C + c];
        }
    }
}
