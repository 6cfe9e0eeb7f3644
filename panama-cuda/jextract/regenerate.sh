#!/usr/bin/env bash
# Regenerates the binding classes with jextract (https://jdk.java.net/jextract/) on a machine that has it and the
# headers; writes them to panama-cuda/target/jextract/ for comparison with the hand-kept classes in
# src/main/java/io/accel4j/cuda/bindings (which follow jextract's shape, plus a PROTOTYPE per holder for the gcc
# check, and load their libraries lazily through Downcall instead of jextract's --library loading at class init).
#
#   panama-cuda/jextract/regenerate.sh            # CUDA_HOME (default /usr/local/cuda); NCCL_HOME for nccl.h
#
# Untested here: jextract is not installed on the build machine. The lists below are the functions bound; keep them
# in step with the classes (CudaHeaderCheckTest and friends check the classes against the real headers).
set -euo pipefail
cd "$(dirname "$0")/../.."
cuda=${CUDA_HOME:-/usr/local/cuda}
out=panama-cuda/target/jextract
mkdir -p "$out"
command -v jextract >/dev/null || { echo "jextract not on PATH" >&2; exit 2; }

functions() { for f in "$@"; do printf -- '--include-function %s ' "$f"; done; }

# shellcheck disable=SC2046
jextract --output "$out" --target-package io.accel4j.cuda.bindings --header-class-name cuda_h \
  -I "$cuda/include" $(functions cuInit cuDriverGetVersion cuGetErrorName cuGetErrorString cuDeviceGetCount \
    cuDeviceGet cuDeviceGetName cuDeviceGetAttribute cuDeviceTotalMem_v2 cuDevicePrimaryCtxRetain \
    cuDevicePrimaryCtxRelease_v2 cuCtxSetCurrent cuCtxGetCurrent cuCtxSynchronize cuMemGetInfo_v2 cuMemAlloc_v2 \
    cuMemFree_v2 cuMemHostAlloc cuMemFreeHost cuMemsetD8_v2 cuMemsetD32_v2 cuMemsetD8Async cuMemsetD32Async \
    cuMemcpyHtoD_v2 cuMemcpyDtoH_v2 cuMemcpyDtoD_v2 cuMemcpyHtoDAsync_v2 cuMemcpyDtoHAsync_v2 cuMemcpyDtoDAsync_v2 \
    cuStreamCreate cuStreamSynchronize cuStreamDestroy_v2 cuEventCreate cuEventRecord cuEventSynchronize \
    cuEventElapsedTime_v2 cuEventDestroy_v2 cuModuleLoadDataEx cuModuleGetFunction cuModuleUnload cuLaunchKernel \
    cuOccupancyMaxActiveBlocksPerMultiprocessor) \
  "$cuda/include/cuda.h"

if [ -f "$cuda/include/cublas_api.h" ]; then
  # shellcheck disable=SC2046
  jextract --output "$out" --target-package io.accel4j.cuda.bindings --header-class-name cublas_api_h \
    -I "$cuda/include" $(functions cublasCreate_v2 cublasDestroy_v2 cublasSetStream_v2 cublasSetMathMode \
      cublasGetStatusName cublasGetStatusString cublasGemmEx cublasGemmStridedBatchedEx) \
    "$cuda/include/cublas_api.h"
fi

nccl=${NCCL_HOME:-/usr}
if [ -f "$nccl/include/nccl.h" ]; then
  # shellcheck disable=SC2046
  jextract --output "$out" --target-package io.accel4j.cuda.bindings --header-class-name nccl_h \
    -I "$nccl/include" -I "$cuda/include" $(functions ncclGetVersion ncclGetUniqueId ncclCommInitRank \
      ncclCommDestroy ncclCommAbort ncclCommGetAsyncError ncclGetErrorString ncclAllReduce ncclReduceScatter \
      ncclAllGather ncclBroadcast ncclSend ncclRecv ncclGroupStart ncclGroupEnd) \
    "$nccl/include/nccl.h"
fi
echo "generated under $out"
