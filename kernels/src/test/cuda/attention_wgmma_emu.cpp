// Runs the Hopper attention forward (src/main/cuda/attention_wgmma.cu, the very source) on the CPU through
// cuda_emu.h and the instruction stand-ins of emu/wgmma_emu.h (matrix descriptors, 128-byte swizzle, warpgroup
// fragment layouts as the PTX ISA defines them), for AttentionWgmmaEmuTest, which compares the results with the
// CPU reference. Little-endian binary files in and out; out and lse are poisoned (NaN) before the kernel runs.
//
//   attention_wgmma_emu B T C NH CAUSAL QKV OUTDIR [tma]
//     QKV (B,T,3C) bf16 → OUTDIR/out.bf16 (B,T,C), OUTDIR/lse.f32 (B,NH,T); with `tma`, attention_wgmma_tma_forward
//     (its tensor map built as AttentionBf16Gpu builds it, through emu/tma_emu.h's cuTensorMapEncodeTiled)
//
// The dynamic shared memory starts at shared address 16 (as if the kernel had 16 bytes of static shared memory), so
// the kernel's rounding of its tiles up to 1024 bytes is exercised; it may touch exactly the bytes the launcher
// requests (AttentionBf16Gpu.wgmmaSharedBytes: 1024 + 6·128·HD·2; wgmmaTmaSharedBytes: 1024 + 5·128·HD·2 + 128),
// no more.
//
// Built from kernels/ with: g++ -std=c++20 -O1 -Isrc/test/cuda/emu -Isrc/main/cuda src/test/cuda/attention_wgmma_emu.cpp
#include "cuda_emu.h"
#include "emu_io.h"
#include "attention_wgmma.cu"
#include <cstdio>
#include <cstdlib>
#include <string>

// The dynamic shared memory of a launch: at most 1024 + 6·128·128·2 bytes (HD 128).
alignas(1024) unsigned char aw_smem[1024 + 6 * 128 * 128 * 2];

int main(int argc, char** argv) {
    bool tma = argc == 9 && std::string(argv[8]) == "tma";
    if (argc != 8 && !tma) {
        fprintf(stderr, "usage: attention_wgmma_emu B T C NH CAUSAL QKV OUTDIR [tma]\n");
        return 2;
    }
    int B = atoi(argv[1]), T = atoi(argv[2]), C = atoi(argv[3]), NH = atoi(argv[4]), causal = atoi(argv[5]);
    int hs = C / NH;
    if (hs != 64 && hs != 128) { fprintf(stderr, "head size %d: the kernel takes 64 or 128\n", hs); return 2; }
    size_t btc = (size_t) B * T * C, nl = (size_t) B * NH * T;
    auto qkv = read_all<bf16>(argv[6], 3 * btc);
    bf16 nan = {0x7FC0};
    std::vector<bf16> out(btc, nan);
    std::vector<float> lse(nl, NAN);
    float scale = (float) (1.0 / std::sqrt((double) hs));
    const uint32_t at = 16, bytes = tma ? 1024 + (1 + 2 * AW_STAGES) * 128 * hs * 2 + AW_TMA_BARRIER_BYTES
                                        : 1024 + 6 * 128 * hs * 2;
    emu_smem_origin = (uintptr_t) aw_smem - at;
    emu_smem_lo = at;
    emu_smem_hi = at + bytes;
    memset(aw_smem, 0xFF, sizeof aw_smem);  // NaN bf16 everywhere: a read of bytes nobody wrote shows
    uint3e grid = {(unsigned) ((T + 127) / 128), (unsigned) NH, (unsigned) B};
    if (tma) {
        // qkv as (3C, T, B) bf16, box 64 × 128 × 1, the swizzle the kernel declares, out-of-bounds rows zero
        CUtensorMap map;
        cuuint64_t dims[3] = {(cuuint64_t) 3 * C, (cuuint64_t) T, (cuuint64_t) B};
        cuuint64_t strides[2] = {(cuuint64_t) 3 * C * 2, (cuuint64_t) T * 3 * C * 2};
        cuuint32_t box[3] = {AW_TMA_BOX_COLS, 128, 1}, ones[3] = {1, 1, 1};
        if (cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, qkv.data(), dims, strides, box, ones,
                CU_TENSOR_MAP_INTERLEAVE_NONE, AW_TMA_SWIZZLE, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != 0) {
            fprintf(stderr, "cuTensorMapEncodeTiled refused the map\n");
            return 3;
        }
        emu_launch(grid, AW_TMA_THREADS, attention_wgmma_tma_forward, out.data(), lse.data(), map, B, T, C, NH,
                   scale, causal);
    } else {
        emu_launch(grid, 256, attention_wgmma_forward, out.data(), lse.data(), (const bf16*) qkv.data(), B, T, C,
                   NH, scale, causal);
    }
    std::string dir = argv[7];
    write_all(dir + "/out.bf16", out);
    write_all(dir + "/lse.f32", lse);
    return 0;
}
