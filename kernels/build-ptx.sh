#!/usr/bin/env bash
# Regenerates the committed PTX: every kernels/src/main/cuda/*.cu → kernels/src/main/resources/io/accel4j/kernels/
# ptx/<name>.ptx (portable sm_80 PTX, which the driver JIT-compiles for any device of compute capability 8.0 or
# later) and ptx/sm_90a/<name>.ptx (sm_90a PTX, for compute capability 9.0 only: arch-specific PTX runs on no other
# device, so the loader, Kernels.ptxArch, takes it for 9.0 and the sm_80 PTX everywhere else). ISA 8.0 both. Needs
# nvcc (CUDA 13) on the PATH or $NVCC. KernelPtxTest runs this script into a temporary folder and fails when a
# committed file differs (nvcc's leading // header aside).
#
#   kernels/build-ptx.sh            regenerate all
#   kernels/build-ptx.sh OUTDIR     write them to OUTDIR (and OUTDIR/sm_90a) instead (what the staleness test does)
set -euo pipefail
cd "$(dirname "$0")"
nvcc=${NVCC:-nvcc}
out=${1:-src/main/resources/io/accel4j/kernels/ptx}
mkdir -p "$out" "$out/sm_90a"
for cu in src/main/cuda/*.cu; do
  name=$(basename "$cu" .cu)
  for arch in sm_80 sm_90a; do
    dir=$out
    [ "$arch" = sm_80 ] || dir=$out/$arch
    "$nvcc" -ptx -arch=$arch -Isrc/main/cuda -o "$dir/$name.ptx.tmp" "$cu"
    # nvcc 13 writes PTX ISA 9.0, which only a CUDA 13 driver JIT-compiles; these kernels use nothing newer than
    # ISA 8.0 (CUDA 12.0, the first with sm_90a), so say 8.0 and any driver panama-cuda accepts (12.8+) loads them.
    # ptxas checks that the text is valid 8.0 (KernelPtxTest).
    sed 's/^\.version 9\.0$/.version 8.0/' "$dir/$name.ptx.tmp" > "$dir/$name.ptx"
    rm "$dir/$name.ptx.tmp"
    echo "$dir/$name.ptx"
  done
done
