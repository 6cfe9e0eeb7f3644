// Fused SGD with momentum (PyTorch's torch.optim.SGD), bit-identical to the CPU kernel io.accel4j.cpu.ops.Sgd.

// SGD on fp32: for i in [0, length), the CPU's fp32 operations in the CPU's order, each rounded on its own (no FMA
// contraction: the __f*_rn intrinsics are never fused):
//   g = grads[i]·grad_scale + wd·params[i]
//   buf[i] = g                                   first != 0 (step 1: the old buf[i] is not read)
//   buf[i] = momentum·buf[i] + omd·g             first == 0
//   d = nesterov ? g + momentum·buf[i] : buf[i]
//   params[i] −= lr·d
// with omd = 1 − dampening (one fp32 subtraction, as the CPU's 1f − dampening). momentum == 0 is plain SGD: d = g,
// buf is neither read nor written (it may be null). first is step == 1; nesterov needs momentum > 0 and dampening
// 0 (SgdConfig checks). Shapes: params, grads, buf each hold length floats. Grid-stride loop, any 1-D grid.
extern "C" __global__ void sgd_f32(float* __restrict__ params, const float* __restrict__ grads,
        float* __restrict__ buf, long long length, float lr, float momentum, float dampening, float wd,
        float grad_scale, int first, int nesterov) {
    float omd = __fsub_rn(1.0f, dampening);
    bool has_momentum = momentum != 0.0f;
    long long stride = (long long) gridDim.x * blockDim.x;
    for (long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x; i < length; i += stride) {
        float pi = params[i];
        float g = __fadd_rn(__fmul_rn(grads[i], grad_scale), __fmul_rn(pi, wd));
        float d = g;
        if (has_momentum) {
            float b = first ? g : __fadd_rn(__fmul_rn(buf[i], momentum), __fmul_rn(g, omd));
            buf[i] = b;
            d = nesterov ? __fadd_rn(g, __fmul_rn(b, momentum)) : b;
        }
        params[i] = __fsub_rn(pi, __fmul_rn(d, lr));
    }
}
