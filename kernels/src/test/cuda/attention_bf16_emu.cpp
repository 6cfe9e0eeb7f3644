// Runs the bf16 attention kernels (src/main/cuda/attention_bf16.cu, the very source) on the CPU through cuda_emu.h
// and the wmma/bf16 stand-ins in emu/, for AttentionBf16EmuTest, which compares the results with the CPU reference
// (no GPU needed; it checks indexing, masking, tile bounds and the shared-memory staging, not the hardware).
// Little-endian binary files in and out; out, lse and dqkv are poisoned (NaN) before the kernels run.
//
//   attention_bf16_emu B T C NH CAUSAL QKV DOUT OUTDIR [ACC GX BX]
//     QKV (B,T,3C) bf16, DOUT (B,T,C) bf16 → OUTDIR/out.bf16 (B,T,C), OUTDIR/lse.f32 (B,NH,T),
//     OUTDIR/dqkv.bf16 (B,T,3C); with ACC (B,T,3C) fp32 also attention_bf16_accumulate(ACC, dqkv, 3BTC) on a grid
//     of GX blocks of BX threads (GpuOps's BF16 path) → OUTDIR/acc.f32
//
// Built from kernels/ with: g++ -std=c++20 -O1 -Isrc/test/cuda/emu -Isrc/main/cuda src/test/cuda/attention_bf16_emu.cpp
#include "cuda_emu.h"
#include "emu_io.h"
#include "attention_bf16.cu"
#include <cstdio>
#include <cstdlib>
#include <string>

// The dynamic shared memory of a launch: 48 KiB, the most the kernels take.
alignas(128) unsigned char ab_smem[49152];

int main(int argc, char** argv) {
    if (argc != 9 && argc != 12) {
        fprintf(stderr, "usage: attention_bf16_emu B T C NH CAUSAL QKV DOUT OUTDIR [ACC GX BX]\n");
        return 2;
    }
    int B = atoi(argv[1]), T = atoi(argv[2]), C = atoi(argv[3]), NH = atoi(argv[4]), causal = atoi(argv[5]);
    int hs = C / NH;
    if (hs != 64 && hs != 128) { fprintf(stderr, "head size %d: the kernels take 64 or 128\n", hs); return 2; }
    size_t btc = (size_t) B * T * C, nl = (size_t) B * NH * T;
    auto qkv = read_all<bf16>(argv[6], 3 * btc);
    auto dout = read_all<bf16>(argv[7], btc);
    bf16 nan = {0x7FC0};
    std::vector<bf16> out(btc, nan), dqkv(3 * btc, nan);
    std::vector<float> lse(nl, NAN), D(nl, NAN);
    float scale = (float) (1.0 / std::sqrt((double) hs));
    emu_launch({(unsigned) ((T + 63) / 64), (unsigned) NH, (unsigned) B}, 128, attention_bf16_forward,
               out.data(), lse.data(), (const bf16*) qkv.data(), B, T, C, NH, scale, causal);
    emu_launch({(unsigned) ((nl + 7) / 8), 1, 1}, 256, attention_bf16_backward_d,
               D.data(), (const bf16*) dout.data(), (const bf16*) out.data(), B, T, C, NH);
    emu_launch({(unsigned) ((T + 31) / 32), (unsigned) NH, (unsigned) B}, 128, attention_bf16_backward_dkdv,
               dqkv.data(), (const bf16*) dout.data(), (const bf16*) qkv.data(), (const float*) lse.data(),
               (const float*) D.data(), B, T, C, NH, scale, causal);
    emu_launch({(unsigned) ((T + 31) / 32), (unsigned) NH, (unsigned) B}, 128, attention_bf16_backward_dq,
               dqkv.data(), (const bf16*) dout.data(), (const bf16*) qkv.data(), (const float*) lse.data(),
               (const float*) D.data(), B, T, C, NH, scale, causal);
    std::string dir = argv[8];
    write_all(dir + "/out.bf16", out);
    write_all(dir + "/lse.f32", lse);
    write_all(dir + "/dqkv.bf16", dqkv);
    if (argc == 12) {
        auto acc = read_all<float>(argv[9], 3 * btc);
        emu_launch({(unsigned) atoi(argv[10]), 1, 1}, atoi(argv[11]), attention_bf16_accumulate, acc.data(),
                   (const bf16*) dqkv.data(), (long long) (3 * btc));
        write_all(dir + "/acc.f32", acc);
    }
    return 0;
}
