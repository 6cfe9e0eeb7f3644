// Residual connection: out = inp1 + inp2; backward adds dout to both inputs' gradients.

// out (n) = inp1 (n) + inp2 (n). Grid-stride loop.
extern "C" __global__ void residual_forward(float* __restrict__ out, const float* __restrict__ inp1,
        const float* __restrict__ inp2, long long n) {
    long long stride = (long long) gridDim.x * blockDim.x;
    for (long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = inp1[i] + inp2[i];
    }
}

// dinp1 (n) += dout, dinp2 (n) += dout.
extern "C" __global__ void residual_backward(float* __restrict__ dinp1, float* __restrict__ dinp2,
        const float* __restrict__ dout, long long n) {
    long long stride = (long long) gridDim.x * blockDim.x;
    for (long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float d = dout[i];
        dinp1[i] += d;
        dinp2[i] += d;
    }
}
