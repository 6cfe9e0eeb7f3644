// Host harness of ring.cu's element functions (RingHostCheckTest): reads n float pairs (a[n] then b[n], raw
// little-endian fp32) from argv[1] and writes sum[n], max[n], a/3[n] as raw fp32 to argv[2].
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "ring.cu"

int main(int argc, char** argv) {
    if (argc != 3) { std::fprintf(stderr, "usage: ring_host_check IN OUT\n"); return 2; }
    FILE* f = std::fopen(argv[1], "rb");
    if (!f) { std::perror(argv[1]); return 1; }
    std::vector<float> in;
    float x;
    while (std::fread(&x, sizeof x, 1, f) == 1) in.push_back(x);
    std::fclose(f);
    size_t n = in.size() / 2;
    std::vector<float> out(3 * n);
    for (size_t i = 0; i < n; i++) {
        out[i] = ring_combine_one(in[i], in[n + i], 0);
        out[n + i] = ring_combine_one(in[i], in[n + i], 1);
        out[2 * n + i] = in[i] / 3.0f;  // ring_divide_f32's x / divisor
    }
    FILE* o = std::fopen(argv[2], "wb");
    if (!o || std::fwrite(out.data(), sizeof(float), out.size(), o) != out.size()) { std::perror(argv[2]); return 1; }
    std::fclose(o);
    return 0;
}
