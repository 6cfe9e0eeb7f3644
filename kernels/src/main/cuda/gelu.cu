// GELU, tanh approximation: out = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
#define GELU_SCALE 0.7978845608028654f  // √(2/π)

// out (n) = gelu(inp (n)). Grid-stride loop.
extern "C" __global__ void gelu_forward(float* __restrict__ out, const float* __restrict__ inp, long long n) {
    long long stride = (long long) gridDim.x * blockDim.x;
    for (long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float x = inp[i];
        float u = GELU_SCALE * (x + 0.044715f * x * x * x);
        out[i] = 0.5f * x * (1.0f + tanhf(u));
    }
}

// dinp (n) += gelu'(inp)·dout, gelu'(x) = 0.5·(1 + tanh u) + 0.5·x·(1 − tanh² u)·√(2/π)·(1 + 3·0.044715·x²).
extern "C" __global__ void gelu_backward(float* __restrict__ dinp, const float* __restrict__ inp,
        const float* __restrict__ dout, long long n) {
    long long stride = (long long) gridDim.x * blockDim.x;
    for (long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float x = inp[i];
        float u = GELU_SCALE * (x + 0.044715f * x * x * x);
        float t = tanhf(u);
        float grad = 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] += grad * dout[i];
    }
}
