// Stand-in for <mma.h> when cuda_emu.h runs kernels on the CPU (put emu/ first on the include path): nvcuda::wmma's
// m16n16k16 fragments for bf16 inputs and fp32 accumulators. The real fragment layout is opaque to the kernels, so
// here every lane holds the whole 16×16 tile (x[i·16 + j] = element (i, j)) and computes the whole product itself.
// Loads read the whole tile, stores write it split over the lanes (lane l the elements ≡ l mod 32): like the
// hardware, nothing here synchronises the warp, so a kernel that reads other lanes' stores without __syncwarp() is
// as wrong here as on a GPU (though a lucky schedule may hide it).
#pragma once
#include "cuda_bf16.h"
#include <type_traits>

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
    static_assert(M == 16 && N == 16 && K == 16, "the emulation has m16n16k16 only");
    static constexpr int num_elements = 256;
    T x[256];
};

inline float emu_float(float v) { return v; }
inline float emu_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename Use, typename T, typename Layout>
inline void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout>& f, const T* p, unsigned ldm) {
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++)
            f.x[i * 16 + j] = std::is_same<Layout, col_major>::value ? p[j * ldm + i] : p[i * ldm + j];
}

inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* p, unsigned ldm,
                             layout_t layout) {
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) f.x[i * 16 + j] = layout == mem_col_major ? p[j * ldm + i] : p[i * ldm + j];
}

inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f, unsigned ldm,
                              layout_t layout) {
    for (int e = threadIdx.x & 31; e < 256; e += 32) {
        int i = e / 16, j = e % 16;
        (layout == mem_col_major ? p[j * ldm + i] : p[i * ldm + j]) = f.x[e];
    }
}

template <typename Use, typename T, typename Layout>
inline void fill_fragment(fragment<Use, 16, 16, 16, T, Layout>& f, T v) {
    for (auto& e : f.x) e = v;
}

// d = a·b + c (d may be c), fp32 products of the bf16 inputs, summed in k order.
template <typename LA, typename LB>
inline void mma_sync(fragment<accumulator, 16, 16, 16, float>& d,
                     const fragment<matrix_a, 16, 16, 16, __nv_bfloat16, LA>& a,
                     const fragment<matrix_b, 16, 16, 16, __nv_bfloat16, LB>& b,
                     const fragment<accumulator, 16, 16, 16, float>& c) {
    float r[256];
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) {
            float s = c.x[i * 16 + j];
            for (int k = 0; k < 16; k++) s += emu_float(a.x[i * 16 + k]) * emu_float(b.x[k * 16 + j]);
            r[i * 16 + j] = s;
        }
    for (int e = 0; e < 256; e++) d.x[e] = r[e];
}

}  // namespace wmma
}  // namespace nvcuda
