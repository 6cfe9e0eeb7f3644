// Stand-in for the CUDA header when cuda_emu.h runs kernels on the CPU (put emu/ first on the include path): the
// bf16 storage type and the two conversions the kernels use, with the device's rounding (cvt.rn.bf16.f32: to
// nearest, ties to even; NaN stays NaN).
#pragma once
#include <cstdint>
#include <cstring>

struct __nv_bfloat16 {
    uint16_t bits;
};

inline __nv_bfloat16 __float2bfloat16_rn(float x) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return {(uint16_t) ((u >> 16) | 0x0040u)};
    u += 0x7FFFu + ((u >> 16) & 1u);
    return {(uint16_t) (u >> 16)};
}

inline float __bfloat162float(__nv_bfloat16 h) {
    uint32_t u = (uint32_t) h.bits << 16;
    float x;
    std::memcpy(&x, &u, 4);
    return x;
}
