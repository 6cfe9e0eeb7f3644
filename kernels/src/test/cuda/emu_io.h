// Binary file input and output for the emulation harnesses (*_emu.cpp): little-endian arrays, exit 2 on failure.
#pragma once
#include "cuda_emu.h"
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

// The n elements of type T in path (exactly n: a short file is an error).
template <typename T>
static std::vector<T> read_all(const char* path, size_t n) {
    std::vector<T> v(n);
    FILE* f = fopen(path, "rb");
    if (!f || fread(v.data(), sizeof(T), n, f) != n) { perror(path); exit(2); }
    fclose(f);
    return v;
}

// Writes every element of v to path.
template <typename T>
static void write_all(const std::string& path, const std::vector<T>& v) {
    FILE* f = fopen(path.c_str(), "wb");
    if (!f || fwrite(v.data(), sizeof(T), v.size(), f) != v.size()) { perror(path.c_str()); exit(2); }
    fclose(f);
}

// The buffers of one launch of a `HARNESS DIR KERNEL GX GY BX BY [SCALAR...]` harness (kernels_emu, cast_emu): the
// pointer argument called name is DIR/name.bin, read whole by get and written back whole by write_back.
struct EmuBuffers {
    std::string dir;
    std::vector<std::function<void()>> writers;

    template <typename T>
    T* get(const char* name) {
        std::string path = dir + "/" + name + ".bin";
        FILE* f = fopen(path.c_str(), "rb");
        if (!f) { perror(path.c_str()); exit(2); }
        fseek(f, 0, SEEK_END);
        size_t n = (size_t) ftell(f) / sizeof(T);
        fclose(f);
        auto v = std::make_shared<std::vector<T>>(read_all<T>(path.c_str(), n));
        writers.push_back([v, path] { write_all(path, *v); });
        return v->data();
    }

    void write_back() {
        for (auto& w : writers) w();
    }
};

// The command line of such a harness: the directory, the kernel, the launch shape and the scalar arguments.
struct EmuArgs {
    int argc;
    char** argv;
    std::string kernel() const { return argv[2]; }
    uint3e grid() const { return {(unsigned) atoi(argv[3]), (unsigned) atoi(argv[4]), 1}; }
    uint3e block() const { return {(unsigned) atoi(argv[5]), (unsigned) atoi(argv[6]), 1}; }
    const char* scalar(int i) const {
        if (7 + i >= argc) { fprintf(stderr, "%s: scalar argument %d missing\n", argv[2], i); exit(2); }
        return argv[7 + i];
    }
    int i32(int i) const { return (int) strtol(scalar(i), nullptr, 10); }
    long long i64(int i) const { return strtoll(scalar(i), nullptr, 10); }
    float f32(int i) const { return strtof(scalar(i), nullptr); }  // C99 hex literals are exact
};

// Checks the command line's length; returns the arguments.
static EmuArgs emu_args(int argc, char** argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: %s DIR KERNEL GX GY BX BY [SCALAR...]\n", argv[0]);
        exit(2);
    }
    return {argc, argv};
}
