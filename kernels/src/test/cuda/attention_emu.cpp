// The attention kernels (src/main/cuda/attention.cu, the very source) run on the CPU by cuda_emu.h against a naive
// causal attention in double: out, lse and dqkv (+= into a pre-filled buffer, out and lse poisoned with NaN) on odd
// T, partial tiles and padded head sizes, each within 1e-5 of the tensor's largest magnitude. A check of the
// indexing, masking and tile bounds without a GPU (it says nothing about speed or about the hardware), run by hand,
// from kernels/ (a few minutes on 2 cores: a thread per CUDA thread; add -fsanitize=address to catch out-of-bounds
// shared-memory or global accesses):
//   g++ -std=c++20 -O1 -Wno-unknown-pragmas -Isrc/main/cuda -o /tmp/attention_emu src/test/cuda/attention_emu.cpp \
//       -lpthread && /tmp/attention_emu
#include "cuda_emu.h"
#include "attention.cu"
#include <cstdio>
#include <random>

// The dynamic shared memory of a launch: 48 KiB, the most the kernels may take (96·HSP floats at HSP 128).
alignas(16) float4 attn_smem[49152 / 16];

// Naive causal attention in double: out, lse and the gradient of Σ dout·out.
static void reference(int B, int T, int C, int NH, const std::vector<float>& qkv, const std::vector<float>& dout,
                      std::vector<double>& out, std::vector<double>& lse, std::vector<double>& dqkv) {
    int hs = C / NH;
    double scale = (float) (1.0 / std::sqrt((double) hs));
    out.assign((size_t) B * T * C, 0); lse.assign((size_t) B * NH * T, 0); dqkv.assign((size_t) B * T * 3 * C, 0);
    auto at = [&](int b, int t, int part, int h, int d) { return ((size_t) b * T + t) * 3 * C + part * C + h * hs + d; };
    std::vector<double> s(T), p(T), dp(T);
    for (int b = 0; b < B; b++) for (int h = 0; h < NH; h++) for (int t = 0; t < T; t++) {
        double mx = -INFINITY;
        for (int u = 0; u <= t; u++) {
            double x = 0;
            for (int d = 0; d < hs; d++) x += qkv[at(b, t, 0, h, d)] * (double) qkv[at(b, u, 1, h, d)];
            s[u] = x * scale; mx = std::max(mx, s[u]);
        }
        double sum = 0;
        for (int u = 0; u <= t; u++) sum += std::exp(s[u] - mx);
        lse[((size_t) b * NH + h) * T + t] = mx + std::log(sum);
        for (int u = 0; u <= t; u++) p[u] = std::exp(s[u] - mx) / sum;
        double D = 0;
        for (int d = 0; d < hs; d++) {
            double o = 0;
            for (int u = 0; u <= t; u++) o += p[u] * qkv[at(b, u, 2, h, d)];
            out[((size_t) b * T + t) * C + h * hs + d] = o;
            D += o * dout[((size_t) b * T + t) * C + h * hs + d];
        }
        for (int u = 0; u <= t; u++) {
            double x = 0;
            for (int d = 0; d < hs; d++) x += dout[((size_t) b * T + t) * C + h * hs + d] * (double) qkv[at(b, u, 2, h, d)];
            dp[u] = x;
        }
        for (int u = 0; u <= t; u++) {
            double ds = p[u] * (dp[u] - D);
            for (int d = 0; d < hs; d++) {
                dqkv[at(b, t, 0, h, d)] += scale * ds * qkv[at(b, u, 1, h, d)];
                dqkv[at(b, u, 1, h, d)] += scale * ds * qkv[at(b, t, 0, h, d)];
                dqkv[at(b, u, 2, h, d)] += p[u] * dout[((size_t) b * T + t) * C + h * hs + d];
            }
        }
    }
}

static double worst(const char* what, const std::vector<float>& got, const std::vector<double>& want,
                    const std::vector<float>& base) {
    double big = 0, err = 0; size_t where = 0;
    for (size_t i = 0; i < got.size(); i++) {
        double w = want[i] + (base.empty() ? 0 : base[i]);
        big = std::max(big, std::fabs(w));
        double e = std::fabs(got[i] - w);
        if (!(e <= err)) { err = e; where = i; }
    }
    double rel = err / big;
    printf("  %-5s max |err| %.3g at %zu, max |ref| %.3g, relative %.3g%s\n", what, err, where, big, rel,
           rel < 1e-5 ? "" : "   <-- FAIL");
    return rel;
}

int main() {
    int fails = 0;
    struct Case { int B, T, C, NH; } cases[] = {{2, 67, 192, 3}, {1, 67, 128, 1}, {1, 100, 128, 2}, {1, 35, 48, 1},
                                                {2, 33, 40, 2}, {1, 1, 64, 1}, {1, 130, 384, 3}};
    for (auto c : cases) {
        int B = c.B, T = c.T, C = c.C, NH = c.NH, hs = C / NH;
        printf("B %d T %d C %d NH %d hs %d\n", B, T, C, NH, hs);
        std::mt19937 rng(1234 + T + C);
        std::uniform_real_distribution<float> U(-1, 1);
        std::vector<float> qkv((size_t) B * T * 3 * C), dout((size_t) B * T * C), pre((size_t) B * T * 3 * C);
        for (auto& x : qkv) x = 2 * U(rng);
        for (auto& x : dout) x = U(rng);
        for (auto& x : pre) x = U(rng);
        std::vector<float> out((size_t) B * T * C, NAN), lse((size_t) B * NH * T, NAN), D((size_t) B * NH * T, NAN);
        std::vector<float> dqkv = pre;
        float scale = (float) (1.0 / std::sqrt((double) hs));
        emu_launch({(unsigned) ((T + 31) / 32), (unsigned) NH, (unsigned) B}, 128, attention_forward,
                   out.data(), lse.data(), (const float*) qkv.data(), B, T, C, NH, scale);
        emu_launch({(unsigned) (((long) B * T * NH + 7) / 8), 1, 1}, 256, attention_backward_d,
                   D.data(), (const float*) dout.data(), (const float*) out.data(), B, T, C, NH);
        emu_launch({(unsigned) ((T + 15) / 16), (unsigned) NH, (unsigned) B}, 128, attention_backward_dkdv,
                   dqkv.data(), (const float*) dout.data(), (const float*) qkv.data(), (const float*) lse.data(),
                   (const float*) D.data(), B, T, C, NH, scale);
        emu_launch({(unsigned) ((T + 15) / 16), (unsigned) NH, (unsigned) B}, 128, attention_backward_dq,
                   dqkv.data(), (const float*) dout.data(), (const float*) qkv.data(), (const float*) lse.data(),
                   (const float*) D.data(), B, T, C, NH, scale);
        std::vector<double> rOut, rLse, rD;
        reference(B, T, C, NH, qkv, dout, rOut, rLse, rD);
        fails += worst("out", out, rOut, {}) >= 1e-5;
        fails += worst("lse", lse, rLse, {}) >= 1e-5;
        fails += worst("dqkv", dqkv, rD, pre) >= 1e-5;
    }
    printf(fails ? "FAILED %d\n" : "all passed\n", fails);
    return fails != 0;
}
