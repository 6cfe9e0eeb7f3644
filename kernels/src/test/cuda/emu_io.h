// Binary file input and output for the emulation harnesses (*_emu.cpp): little-endian arrays, exit 2 on failure.
#pragma once
#include <cstdio>
#include <cstdlib>
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
