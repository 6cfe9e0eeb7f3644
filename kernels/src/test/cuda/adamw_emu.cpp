// Runs adamw.cu's multi-range kernels (the very source) on the CPU through cuda_emu.h, for AdamWEmuTest, which
// compares the results bit for bit with the CPU kernel (no GPU needed: it checks the range table, the block to row
// mapping, the 16-byte and the element-wise paths and the stochastic-rounding index, not the hardware).
// Little-endian binary files in and out.
//
//   adamw_emu BF16 N TABLE PARAMS GRADS M V LR BETA1 BETA2 EPS C1 C2 GRAD_SCALE SEED OUTDIR
//     TABLE: rows of 32 bytes (struct AdamwRange); PARAMS, GRADS, M, V: N fp32 (N ≥ every row's offset + length)
//     → OUTDIR/params.f32, m.f32, v.f32 (N fp32) and with BF16=1 OUTDIR/bf16.bf16 (N bf16, NaN-poisoned first:
//     0xFFFF where no row writes)
//
// Built from kernels/ with: g++ -std=c++20 -O1 -ffp-contract=off -Isrc/main/cuda src/test/cuda/adamw_emu.cpp
#include "cuda_emu.h"
#include "emu_io.h"
#include "adamw.cu"
#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
    if (argc != 17) {
        fprintf(stderr, "usage: adamw_emu BF16 N TABLE PARAMS GRADS M V LR BETA1 BETA2 EPS C1 C2 GRAD_SCALE SEED "
                "OUTDIR\n");
        return 2;
    }
    int bf16 = atoi(argv[1]);
    size_t n = strtoull(argv[2], nullptr, 10);
    FILE* tf = fopen(argv[3], "rb");
    if (!tf) { perror(argv[3]); return 2; }
    fseek(tf, 0, SEEK_END);
    int rows = (int) (ftell(tf) / sizeof(AdamwRange));
    fclose(tf);
    auto table = read_all<AdamwRange>(argv[3], rows);
    auto p = read_all<float>(argv[4], n);
    auto g = read_all<float>(argv[5], n);
    auto m = read_all<float>(argv[6], n);
    auto v = read_all<float>(argv[7], n);
    float lr = strtof(argv[8], nullptr), b1 = strtof(argv[9], nullptr), b2 = strtof(argv[10], nullptr);
    float eps = strtof(argv[11], nullptr), c1 = strtof(argv[12], nullptr), c2 = strtof(argv[13], nullptr);
    float gs = strtof(argv[14], nullptr);
    unsigned long long seed = strtoull(argv[15], nullptr, 10);
    std::string out = argv[16];
    const AdamwRange& last = table[rows - 1];
    unsigned grid = (unsigned) (last.first_block + (last.length + ADAMW_CHUNK - 1) / ADAMW_CHUNK);
    std::vector<uint16_t> pb(n, 0xFFFF);
    if (bf16) {
        emu_launch({grid, 1, 1}, ADAMW_THREADS, adamw_bf16_multi, pb.data(), p.data(), g.data(), m.data(), v.data(),
                table.data(), rows, lr, b1, b2, eps, c1, c2, gs, seed);
        write_all(out + "/bf16.bf16", pb);
    } else {
        emu_launch({grid, 1, 1}, ADAMW_THREADS, adamw_f32_multi, p.data(), g.data(), m.data(), v.data(),
                table.data(), rows, lr, b1, b2, eps, c1, c2, gs);
    }
    write_all(out + "/params.f32", p);
    write_all(out + "/m.f32", m);
    write_all(out + "/v.f32", v);
    return 0;
}
