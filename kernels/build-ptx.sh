#!/usr/bin/env bash
# Regenerates the committed PTX: every kernels/src/main/cuda/*.cu → kernels/src/main/resources/io/accel4j/kernels/
# ptx/<name>.ptx, portable sm_80 PTX, ISA 8.0 (the driver JIT-compiles it for the device at load time). Needs nvcc
# (CUDA 13) on the PATH or $NVCC. KernelPtxTest runs this script into a temporary folder and fails when a committed
# file differs (nvcc's leading // header aside).
#
#   kernels/build-ptx.sh            regenerate all
#   kernels/build-ptx.sh OUTDIR     write them to OUTDIR instead (what the staleness test does)
set -euo pipefail
cd "$(dirname "$0")"
nvcc=${NVCC:-nvcc}
out=${1:-src/main/resources/io/accel4j/kernels/ptx}
mkdir -p "$out"
for cu in src/main/cuda/*.cu; do
  name=$(basename "$cu" .cu)
  "$nvcc" -ptx -arch=sm_80 -Isrc/main/cuda -o "$out/$name.ptx.tmp" "$cu"
  # nvcc 13 writes PTX ISA 9.0, which only a CUDA 13 driver JIT-compiles; these kernels use nothing newer than
  # ISA 8.0 (CUDA 12.0), so say 8.0 and any driver panama-cuda accepts (12.8+) loads them. ptxas checks that the
  # text is valid 8.0 (KernelPtxTest).
  sed 's/^\.version 9\.0$/.version 8.0/' "$out/$name.ptx.tmp" > "$out/$name.ptx"
  rm "$out/$name.ptx.tmp"
  echo "$out/$name.ptx"
done
