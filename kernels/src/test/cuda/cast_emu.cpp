// Runs cast.cu's kernels (the very source) on the CPU through cuda_emu.h, for CastEmuTest, which compares codes,
// transpose and amax with the CPU casts. The element conversions are CUDA's own headers' host code (cuda_fp8.h's
// software path, the one the sm_80 PTX takes, and the headers' emulation of cvt.rn for bf16/fp16; CastHostCheckTest
// checks them bit for bit), so this needs the CUDA headers but no GPU; it checks the grid-stride loops, the tiling,
// the transpose through shared memory, the boundaries and the amax reductions (into the partials, and from them into
// a device slot: fp8_amax_to_slot). The test passes the launch
// configuration (GpuOps's, GpuMatmul's).
//
//   cast_emu DIR KERNEL GX GY BX BY [SCALAR...]   as kernels_emu (emu_io.h's EmuArgs and EmuBuffers)
//
// Built from kernels/ with: g++ -std=c++20 -O1 -ffp-contract=off -I<CUDA>/include -Isrc/main/cuda
//   src/test/cuda/cast_emu.cpp
#include <cuda_bf16.h>  // CUDA's headers first: cuda_emu.h then leaves their vector types alone
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include "cuda_emu.h"
#include "emu_io.h"
#undef __shared__
#define __shared__ static  // blocks run one at a time: a function-local static is the block's shared memory
#include "cast.cu"
#include <string>

int main(int argc, char** argv) {
    EmuArgs a = emu_args(argc, argv);
    EmuBuffers b{argv[1], {}};
    std::string k = a.kernel();
    using u8 = unsigned char;
    using u16 = unsigned short;
    if (k == "cast_f32_to_bf16") {
        emu_launch(a.grid(), a.block(), cast_f32_to_bf16, b.get<u16>("dst"), b.get<float>("src"), a.i64(0));
    } else if (k == "cast_f32_to_f16") {
        emu_launch(a.grid(), a.block(), cast_f32_to_f16, b.get<u16>("dst"), b.get<float>("src"), a.i64(0));
    } else if (k == "cast_f32_to_fp8") {
        emu_launch(a.grid(), a.block(), cast_f32_to_fp8, b.get<u8>("dst"), b.get<unsigned int>("partial"),
                b.get<float>("src"), a.i64(0), a.f32(1), a.i32(2));
    } else if (k == "cast_bf16_to_f32") {
        emu_launch(a.grid(), a.block(), cast_bf16_to_f32, b.get<float>("dst"), b.get<u16>("src"), a.i64(0));
    } else if (k == "cast_f16_to_f32") {
        emu_launch(a.grid(), a.block(), cast_f16_to_f32, b.get<float>("dst"), b.get<u16>("src"), a.i64(0));
    } else if (k == "cast_fp8_to_f32") {
        emu_launch(a.grid(), a.block(), cast_fp8_to_f32, b.get<float>("dst"), b.get<u8>("src"), a.i64(0), a.f32(1),
                a.i32(2));
    } else if (k == "cast_transpose_f32_to_fp8") {
        emu_launch(a.grid(), a.block(), cast_transpose_f32_to_fp8, b.get<u8>("dst"),
                b.get<u8>("dstT"), b.get<unsigned int>("partial"), b.get<float>("src"), a.i32(0),
                a.i32(1), a.f32(2), a.i32(3));
    } else if (k == "fp8_amax_to_slot") {
        emu_launch(a.grid(), a.block(), fp8_amax_to_slot, b.get<unsigned int>("slot"),
                b.get<unsigned int>("partial"), a.i32(0), a.f32(1), a.i32(2));
    } else {
        fprintf(stderr, "unknown kernel %s\n", k.c_str());
        return 2;
    }
    b.write_back();
    return 0;
}
