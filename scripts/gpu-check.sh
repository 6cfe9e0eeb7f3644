#!/usr/bin/env bash
# The CUDA checks on a machine with a GPU and no JDK.
#
#   scripts/gpu-check.sh prepare   on the build machine (JDK 25, the Maven repository): compiles panama-cuda, kernels
#                                  (and what they need: core, vector-cpu) with their tests, copies the test
#                                  libraries, and jlinks a ~45 MB runtime under panama-cuda/target/gpu-check/
#                                  (a few minutes; compiling and the jlink step are most of it).
#   scripts/gpu-check.sh [run] [--require-gpu]
#                                  on the GPU machine, from the repository root with panama-cuda/target, core/target,
#                                  kernels/target, collectives/target and vector-cpu/target carried over: runs every
#                                  panama-cuda test, the kernels' GpuOpsTest, GpuMatmulTest and AttentionBf16GpuTest
#                                  (GPU kernels, the bf16/fp8 GEMMs and the bf16 attention against the CPU ones) and
#                                  collectives' NcclCommunicatorGpuTest (one NCCL rank) with that runtime and
#                                  prints a table last (exit 1 on a failure, 3 with --require-gpu when the GPU tests
#                                  were skipped).
set -euo pipefail
cd "$(dirname "$0")/.."
out=panama-cuda/target/gpu-check
flags=$(sed -n 's:.*<accel4j.jvm.flags>\(.*\)</accel4j.jvm.flags>.*:\1:p' pom.xml)

case "${1:-run}" in
  prepare)
    export JAVA_HOME=${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
    ./mvnw -o -q -pl panama-cuda,kernels,collectives -am test-compile
    rm -rf "$out/lib"
    ./mvnw -o -q -pl panama-cuda dependency:copy-dependencies -DincludeScope=test \
        -DexcludeGroupIds=io.accel4j,net.jqwik -DoutputDirectory=target/gpu-check/lib
    rm -rf "$out/jre"
    "$JAVA_HOME/bin/jlink" --add-modules java.base,jdk.incubator.vector,jdk.unsupported,java.logging,java.management \
        --strip-debug --no-header-files --no-man-pages --compress=zip-6 --output "$out/jre" 2>&1 \
        | grep -v 'Using incubator modules' || true
    du -sh "$out/jre" "$out/lib"
    ;;
  run|--require-gpu)
    [ "${1:-}" = run ] && shift
    java=${ACCEL4J_JAVA:-$out/jre/bin/java}
    if [ ! -x "$java" ]; then
      echo "gpu-check: no runtime at $java: run 'scripts/gpu-check.sh prepare' on the build machine first" >&2
      exit 2
    fi
    cp="panama-cuda/target/classes:panama-cuda/target/test-classes:core/target/classes"
    # the kernels module's GPU tests compare with the CPU kernels (vector-cpu); its other tests need the sources
    cp="$cp:kernels/target/classes:kernels/target/test-classes:vector-cpu/target/classes:$out/lib/*"
    # the NCCL communicator (one rank: every collective, the explicit ring) needs libnccl; it skips without it
    cp="$cp:collectives/target/classes:collectives/target/test-classes"
    # shellcheck disable=SC2086
    exec "$java" $flags -cp "$cp" io.accel4j.cuda.GpuCheck --class io.accel4j.kernels.GpuOpsTest \
        --class io.accel4j.kernels.GpuMatmulTest --class io.accel4j.kernels.AttentionBf16GpuTest \
        --class io.accel4j.collectives.NcclCommunicatorGpuTest "$@"
    ;;
  *)
    echo "usage: scripts/gpu-check.sh prepare | run [--require-gpu]" >&2
    exit 2
    ;;
esac
