#!/usr/bin/env bash
# Compiles every kernels/src/main/cuda/*.cu to PTX: OUTDIR/<name>.ptx (portable sm_80 PTX, which the driver
# JIT-compiles for any device of compute capability 8.0 or later) and OUTDIR/sm_90a/<name>.ptx (sm_90a PTX, for
# compute capability 9.0 only: arch-specific PTX runs on no other device, so the loader, Kernels.ptxArch, takes it
# for 9.0 and the sm_80 PTX everywhere else), and OUTDIR/sm_90a/<name>.cubin, ptxas's output of that PTX, which the
# loader tries first on 9.0 (no JIT; a driver older than this ptxas refuses it, and the PTX is JIT-compiled
# instead). ISA 8.0 both. Needs nvcc (CUDA 13) on the PATH or $NVCC, and ptxas beside it or $PTXAS.
#
#   kernels/build-ptx.sh                      regenerate the committed copy, src/main/resources/.../ptx (then commit)
#   kernels/build-ptx.sh OUTDIR               write them to OUTDIR instead
#   kernels/build-ptx.sh --build OUTDIR       what the Maven build runs (generate-resources): only the modules whose
#                                             PTX is older than their source, the shared headers or this script;
#                                             without nvcc it says so and exits 0 (the committed PTX then ships)
#
# The build's PTX (target/generated-resources/ptx) ships in the jar when nvcc is here, the committed copy otherwise;
# KernelPtxTest fails when the two differ (nvcc's leading // header aside), so a stale committed copy is caught by
# any build on a machine with nvcc.
set -euo pipefail
shopt -s nullglob
cd "$(dirname "$0")"
build=""
if [ "${1:-}" = --build ]; then
  build=1
  shift
  [ $# -eq 1 ] || { echo "usage: build-ptx.sh --build OUTDIR" >&2; exit 2; }
fi
nvcc=${NVCC:-nvcc}
if ! command -v "$nvcc" >/dev/null; then
  if [ -n "$build" ]; then
    echo "build-ptx: nvcc not found (PATH, \$NVCC): the committed PTX under src/main/resources ships"
    exit 0
  fi
  echo "build-ptx: nvcc not found (PATH, \$NVCC)" >&2
  exit 1
fi
ptxas=${PTXAS:-$(dirname "$(command -v "$nvcc")")/ptxas}
out=${1:-src/main/resources/io/accel4j/kernels/ptx}
mkdir -p "$out" "$out/sm_90a"
built=0
for cu in src/main/cuda/*.cu; do
  name=$(basename "$cu" .cu)
  for arch in sm_80 sm_90a; do
    dir=$out
    [ "$arch" = sm_80 ] || dir=$out/$arch
    ptx=$dir/$name.ptx
    if [ -n "$build" ] && [ -f "$ptx" ] && { [ "$arch" != sm_90a ] || [ -f "$dir/$name.cubin" ]; }; then
      fresh=1
      for dep in "$cu" src/main/cuda/*.cuh build-ptx.sh; do
        [ "$ptx" -nt "$dep" ] || fresh=""
      done
      [ -z "$fresh" ] || continue
    fi
    "$nvcc" -ptx -arch=$arch -Isrc/main/cuda -o "$ptx.tmp" "$cu"
    # nvcc 13 writes PTX ISA 9.0, which only a CUDA 13 driver JIT-compiles; these kernels use nothing newer than
    # ISA 8.0 (CUDA 12.0, the first with sm_90a), so say 8.0 and any driver panama-cuda accepts (12.0+) loads them.
    # ptxas checks that the text is valid 8.0 (KernelPtxTest).
    sed 's/^\.version 9\.0$/.version 8.0/' "$ptx.tmp" > "$ptx"
    rm "$ptx.tmp"
    if [ "$arch" = sm_90a ]; then
      "$ptxas" -arch=sm_90a -o "$dir/$name.cubin" "$ptx"
      [ -n "$build" ] || echo "$dir/$name.cubin"
    fi
    built=$((built + 1))
    [ -n "$build" ] || echo "$ptx"
  done
done
[ -z "$build" ] || echo "build-ptx: $built PTX files compiled by $("$nvcc" --version | tail -1) into $out"
