// Runs the training step's element-wise, normalisation and reduction kernels (layernorm.cu, gelu.cu, residual.cu,
// encoder.cu, classifier.cu, matmul.cu, norm.cu: the very sources) on the CPU through cuda_emu.h, for
// GpuKernelsEmuTest, which compares the results with the CPU kernels. The test, not this file, holds the launch
// configuration (GpuOps's): it passes the grid and the block on the command line.
//
//   kernels_emu DIR KERNEL GX GY BX BY [SCALAR...]   (emu_io.h's EmuArgs and EmuBuffers)
//     Every pointer argument of KERNEL is the file DIR/<its name in the .cu>.bin, read whole before the launch (the
//     test writes the outputs too, poisoned or pre-filled) and written back whole after it. SCALARs are the kernel's
//     non-pointer arguments in order: integers in decimal, floats as C99 hex literals (exact through strtof).
//
// Built from kernels/ with: g++ -std=c++20 -O1 -ffp-contract=off -Isrc/main/cuda src/test/cuda/kernels_emu.cpp
#include "cuda_emu.h"
#include "emu_io.h"
#undef __shared__
#define __shared__ static  // blocks run one at a time: a function-local static is the block's shared memory
#include "layernorm.cu"
#include "gelu.cu"
#include "residual.cu"
#include "encoder.cu"
#include "classifier.cu"
#include "matmul.cu"
#include "norm.cu"

int main(int argc, char** argv) {
    EmuArgs a = emu_args(argc, argv);
    EmuBuffers b{argv[1], {}};
    std::string k = a.kernel();
    uint3e grid = a.grid(), block = a.block();
    auto F = [&](const char* name) { return b.get<float>(name); };
    auto I = [&](const char* name) { return b.get<int>(name); };

    if (k == "layernorm_forward") {
        emu_launch(grid, block, layernorm_forward, F("out"), F("mean"), F("rstd"), F("inp"), F("weight"), F("bias"),
                a.i32(0), a.i32(1), a.f32(2));
    } else if (k == "layernorm_backward_dinp") {
        emu_launch(grid, block, layernorm_backward_dinp, F("dinp"), F("dout"), F("inp"), F("weight"), F("mean"),
                F("rstd"), a.i32(0), a.i32(1));
    } else if (k == "layernorm_backward_params") {
        emu_launch(grid, block, layernorm_backward_params, F("dweight"), F("dbias"), F("dout"), F("inp"), F("mean"),
                F("rstd"), a.i32(0), a.i32(1));
    } else if (k == "gelu_forward") {
        emu_launch(grid, block, gelu_forward, F("out"), F("inp"), a.i64(0));
    } else if (k == "gelu_backward") {
        emu_launch(grid, block, gelu_backward, F("dinp"), F("inp"), F("dout"), a.i64(0));
    } else if (k == "residual_forward") {
        emu_launch(grid, block, residual_forward, F("out"), F("inp1"), F("inp2"), a.i64(0));
    } else if (k == "residual_backward") {
        emu_launch(grid, block, residual_backward, F("dinp1"), F("dinp2"), F("dout"), a.i64(0));
    } else if (k == "encoder_forward") {
        emu_launch(grid, block, encoder_forward, F("out"), I("inp"), F("wte"), F("wpe"), a.i32(0), a.i32(1),
                a.i32(2));
    } else if (k == "encoder_backward_wpe") {
        emu_launch(grid, block, encoder_backward_wpe, F("dwpe"), F("dout"), a.i32(0), a.i32(1), a.i32(2));
    } else if (k == "encoder_backward_wte") {
        emu_launch(grid, block, encoder_backward_wte, F("dwte"), F("dout"), I("inp"), a.i32(0), a.i32(1));
    } else if (k == "classifier_forward_backward") {
        emu_launch(grid, block, classifier_forward_backward, F("logits"), F("losses"), I("targets"), a.i32(0),
                a.i32(1), a.i32(2), a.f32(3), a.i32(4));
    } else if (k == "matmul_backward_bias") {
        emu_launch(grid, block, matmul_backward_bias, F("dbias"), F("dout"), a.i32(0), a.i32(1));
    } else if (k == "sum_of_squares") {
        emu_launch(grid, block, sum_of_squares, b.get<double>("partial"), F("x"), a.i64(0));
    } else if (k == "amax") {
        emu_launch(grid, block, amax, F("partial"), F("x"), a.i64(0));
    } else if (k == "has_non_finite") {
        emu_launch(grid, block, has_non_finite, I("partial"), F("x"), a.i64(0));
    } else {
        fprintf(stderr, "unknown kernel %s\n", k.c_str());
        return 2;
    }
    b.write_back();
    return 0;
}
