// Runs cast.cu's element conversions on the host, for CastHostCheckTest (no GPU needed): the same source the PTX is
// made from, the fp8 conversions on the same software path as the sm_80 PTX, bf16/fp16 on the headers' host
// emulation of cvt.rn. Little-endian binary files in and out.
//
//   cast_host_check enc IN OUT SCALE   IN: n floats; OUT: per float bf16 (2 bytes), fp16 (2), e4m3·SCALE (1),
//                                      e5m2·SCALE (1), as four arrays of n one after the other
//   cast_host_check dec OUT SCALEINV   OUT: 65536 bf16 → f32, 65536 fp16 → f32, 256 e4m3 → f32·SCALEINV,
//                                      256 e5m2 → f32·SCALEINV
#include "cast.cu"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void* read_all(const char* path, long* bytes) {
    FILE* f = fopen(path, "rb");
    if (!f) { perror(path); exit(2); }
    fseek(f, 0, SEEK_END);
    *bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    void* p = malloc(*bytes > 0 ? *bytes : 1);
    if (fread(p, 1, *bytes, f) != (size_t) *bytes) { perror(path); exit(2); }
    fclose(f);
    return p;
}

static void write_all(const char* path, const void* p, size_t bytes) {
    FILE* f = fopen(path, "wb");
    if (!f || fwrite(p, 1, bytes, f) != bytes) { perror(path); exit(2); }
    fclose(f);
}

int main(int argc, char** argv) {
    if (argc == 5 && strcmp(argv[1], "enc") == 0) {
        long bytes;
        float* x = (float*) read_all(argv[2], &bytes);
        long n = bytes / 4;
        float scale = strtof(argv[4], NULL);
        unsigned short* bf = (unsigned short*) malloc(2 * n + 1);
        unsigned short* hf = (unsigned short*) malloc(2 * n + 1);
        unsigned char* e4 = (unsigned char*) malloc(n + 1);
        unsigned char* e5 = (unsigned char*) malloc(n + 1);
        for (long i = 0; i < n; i++) {
            bf[i] = f32_to_bf16(x[i]);
            hf[i] = f32_to_f16(x[i]);
            e4[i] = f32_to_fp8(x[i], scale, __NV_E4M3);
            e5[i] = f32_to_fp8(x[i], scale, __NV_E5M2);
        }
        FILE* f = fopen(argv[3], "wb");
        if (!f || fwrite(bf, 2, n, f) != (size_t) n || fwrite(hf, 2, n, f) != (size_t) n
                || fwrite(e4, 1, n, f) != (size_t) n || fwrite(e5, 1, n, f) != (size_t) n) {
            perror(argv[3]);
            return 2;
        }
        fclose(f);
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "dec") == 0) {
        float scaleInv = strtof(argv[3], NULL);
        static float out[65536 * 2 + 512];
        for (int c = 0; c < 65536; c++) {
            out[c] = bf16_to_f32((unsigned short) c);
            out[65536 + c] = f16_to_f32((unsigned short) c);
        }
        for (int c = 0; c < 256; c++) {
            out[2 * 65536 + c] = fp8_to_f32((unsigned char) c, scaleInv, __NV_E4M3);
            out[2 * 65536 + 256 + c] = fp8_to_f32((unsigned char) c, scaleInv, __NV_E5M2);
        }
        write_all(argv[2], out, sizeof out);
        return 0;
    }
    fprintf(stderr, "usage: cast_host_check enc IN OUT SCALE | dec OUT SCALEINV\n");
    return 2;
}
