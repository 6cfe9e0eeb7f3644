#!/usr/bin/env bash
# Builds the stub CUDA driver (stub_cuda.c, a test double of libcuda.so.1 over host memory; see its header) into
# OUT_DIR/libcuda.so.1, and the same without cuEventElapsedTime_v2 (a driver older than 12.8) into
# OUT_DIR/old/libcuda.so.1. Without gcc it builds nothing and writes the reason to OUT_DIR/SKIPPED: the stub-driver
# tests then skip, saying so. Exit status 0 either way, unless gcc fails on the source.
set -euo pipefail
src="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/stub_cuda.c"
out="${1:?usage: build-stub.sh OUT_DIR}"
mkdir -p "$out/old"
rm -f "$out/SKIPPED"
cc="${CC:-gcc}"
if ! command -v "$cc" > /dev/null 2>&1; then
    echo "stub driver not built: $cc not found on PATH" | tee "$out/SKIPPED"
    exit 0
fi
if [[ "$out/libcuda.so.1" -nt "$src" && "$out/old/libcuda.so.1" -nt "$src" ]]; then
    exit 0
fi
flags=(-std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Werror -shared -fPIC)
"$cc" "${flags[@]}" -o "$out/libcuda.so.1" "$src"
"$cc" "${flags[@]}" -DSTUB_NO_ELAPSED_V2 -o "$out/old/libcuda.so.1" "$src"
echo "stub driver: $out/libcuda.so.1 (and old/, without cuEventElapsedTime_v2)"
