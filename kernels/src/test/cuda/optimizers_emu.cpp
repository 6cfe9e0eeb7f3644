// Runs sgd.cu and lion.cu (the very sources) on the CPU through cuda_emu.h, for OptimizersEmuTest, which compares
// the results bit for bit with the CPU kernels (io.accel4j.cpu.ops.Sgd, Lion). The test holds the launch shape.
//
//   optimizers_emu DIR KERNEL GX GY BX BY [SCALAR...]   (emu_io.h's EmuArgs and EmuBuffers)
//     Every pointer argument of KERNEL is the file DIR/<its name in the .cu>.bin, read whole before the launch and
//     written back whole after it (an empty file for sgd_f32's buf without momentum). SCALARs are the kernel's
//     non-pointer arguments in order: integers in decimal, floats as C99 hex literals (exact through strtof).
//
// Built from kernels/ with: g++ -std=c++20 -O1 -ffp-contract=off -Isrc/main/cuda src/test/cuda/optimizers_emu.cpp
#include "cuda_emu.h"
#include "emu_io.h"
#include "sgd.cu"
#include "lion.cu"

int main(int argc, char** argv) {
    EmuArgs a = emu_args(argc, argv);
    EmuBuffers b{argv[1], {}};
    std::string k = a.kernel();
    uint3e grid = a.grid(), block = a.block();
    auto F = [&](const char* name) { return b.get<float>(name); };

    if (k == "sgd_f32") {
        emu_launch(grid, block, sgd_f32, F("params"), F("grads"), F("buf"), a.i64(0), a.f32(1), a.f32(2), a.f32(3),
                a.f32(4), a.f32(5), a.i32(6), a.i32(7));
    } else if (k == "lion_f32") {
        emu_launch(grid, block, lion_f32, F("params"), F("grads"), F("m"), a.i64(0), a.f32(1), a.f32(2), a.f32(3),
                a.f32(4), a.f32(5));
    } else {
        fprintf(stderr, "unknown kernel %s\n", k.c_str());
        return 2;
    }
    b.write_back();
    return 0;
}
