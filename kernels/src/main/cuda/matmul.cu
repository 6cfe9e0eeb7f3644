// The matmuls themselves run in cuBLASLt (GpuOps); this is the one piece of their backward pass that cuBLASLt does
// not do the way the kernel contract wants: dbias += Σ_rows dout. (cuBLASLt's BGRADB epilogue computes the same sum
// inside the dweight GEMM but overwrites dbias instead of adding to it, so it would need a scratch vector and a
// second kernel anyway.)

// dbias (OC) += Σ_{i < N} dout (N, OC)[i, j]. Block (32, 8): threadIdx.x is a column of the block's 32-column tile,
// threadIdx.y a row phase summing rows y, y+8, …; the 8 phase sums are added in a fixed order, so the result is
// deterministic. Grid ceil(OC / 32).
extern "C" __global__ void __launch_bounds__(256) matmul_backward_bias(float* __restrict__ dbias,
        const float* __restrict__ dout, int N, int OC) {
    __shared__ float sums[8][33];
    int j = blockIdx.x * 32 + threadIdx.x;
    float acc = 0.0f;
    if (j < OC) {
        for (int i = threadIdx.y; i < N; i += 8) acc += dout[(long long) i * OC + j];
    }
    sums[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && j < OC) {
        float total = 0.0f;
        for (int y = 0; y < 8; y++) total += sums[y][threadIdx.x];
        dbias[j] += total;
    }
}
