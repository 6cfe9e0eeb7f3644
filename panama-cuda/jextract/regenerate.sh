#!/usr/bin/env bash
# Regenerates the binding classes with jextract (https://jdk.java.net/jextract/) on a machine that has it and the
# headers; writes them to panama-cuda/target/jextract/ for comparison with the hand-kept classes in
# src/main/java/io/accel4j/cuda/bindings (which follow jextract's shape, plus a PROTOTYPE per holder for the gcc
# check, and load their libraries lazily through Downcall instead of jextract's --library loading at class init).
#
#   panama-cuda/jextract/regenerate.sh            # CUDA_HOME (default /usr/local/cuda); NCCL_HOME for nccl.h
#   panama-cuda/jextract/regenerate.sh --list     # only print, per header, the functions it would include
#
# The functions included are read from the binding classes themselves (every Downcall.<library>("symbol", …) of a
# holder), so the list cannot fall behind them; a holder with DECLARED_AS binds an unversioned symbol that the header
# only declares under another name (cuEventElapsedTime, declared as cuEventElapsedTime_v2), which jextract cannot
# include by its own name, so it is left out. RegenerateScriptTest checks the lists against the classes.
# jextract itself is not installed on the build machine: the generation is untested here.
set -euo pipefail
cd "$(dirname "$0")/../.."
bindings=panama-cuda/src/main/java/io/accel4j/cuda/bindings

# The symbols bound through Downcall.<library> in the given files, one per line, in file order.
bound() {
  local library=$1; shift
  awk -v lib="$library" '
    match($0, /private static final class [A-Za-z0-9_]+/) { cur = substr($0, RSTART + 27, RLENGTH - 27) }
    /DECLARED_AS/ { skip[cur] = 1 }
    match($0, "Downcall\\." lib "\\(\"[A-Za-z0-9_]+\"") {
      s = substr($0, RSTART, RLENGTH); sub(/^[^"]*"/, "", s); sub(/"$/, "", s); order[++n] = s; owner[n] = cur
    }
    END { for (i = 1; i <= n; i++) if (!skip[owner[i]]) print order[i] }
  ' "$@"
}

cuda_functions=$(bound driver "$bindings"/cuda_h_2.java "$bindings"/cuda_h_1.java "$bindings"/cuda_h.java)
cublas_functions=$(bound cublas "$bindings"/cublas_api_h.java)
cublaslt_functions=$(bound cublasLt "$bindings"/cublasLt_h.java)
nccl_functions=$(bound nccl "$bindings"/nccl_h.java)

if [ "${1:-}" = "--list" ]; then
  for h in cuda cublas cublaslt nccl; do
    var="${h}_functions"
    echo "$h: $(echo ${!var})"
  done
  exit 0
fi

cuda=${CUDA_HOME:-/usr/local/cuda}
out=panama-cuda/target/jextract
mkdir -p "$out"
command -v jextract >/dev/null || { echo "jextract not on PATH" >&2; exit 2; }

functions() { for f in "$@"; do printf -- '--include-function %s ' "$f"; done; }

# shellcheck disable=SC2046,SC2086
jextract --output "$out" --target-package io.accel4j.cuda.bindings --header-class-name cuda_h \
  -I "$cuda/include" $(functions $cuda_functions) "$cuda/include/cuda.h"

if [ -f "$cuda/include/cublas_api.h" ]; then
  # shellcheck disable=SC2046,SC2086
  jextract --output "$out" --target-package io.accel4j.cuda.bindings --header-class-name cublas_api_h \
    -I "$cuda/include" $(functions $cublas_functions) "$cuda/include/cublas_api.h"
fi

if [ -f "$cuda/include/cublasLt.h" ]; then
  # shellcheck disable=SC2046,SC2086
  jextract --output "$out" --target-package io.accel4j.cuda.bindings --header-class-name cublasLt_h \
    -I "$cuda/include" $(functions $cublaslt_functions) "$cuda/include/cublasLt.h"
fi

nccl=${NCCL_HOME:-/usr}
if [ -f "$nccl/include/nccl.h" ]; then
  # shellcheck disable=SC2046,SC2086
  jextract --output "$out" --target-package io.accel4j.cuda.bindings --header-class-name nccl_h \
    -I "$nccl/include" -I "$cuda/include" $(functions $nccl_functions) "$nccl/include/nccl.h"
fi
echo "generated under $out"
