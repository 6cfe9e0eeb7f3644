#!/usr/bin/env bash
# The CUDA tests and the GPU benchmarks on a machine with a GPU and no JDK.
#
#   scripts/gpu-check.sh prepare
#       On the build machine (JDK 25, the Maven repository): compiles panama-cuda, kernels, collectives and train (and
#       core, vector-cpu) with their tests and puts everything a run needs in ONE directory, panama-cuda/target/gpu-check/: a jlink'd
#       runtime (jre/), the test libraries (lib/) and the compiled classes (classes/MODULE/{main,test}), and the
#       same as one archive, panama-cuda/target/gpu-check.tgz. A few minutes: compiling and jlink are most of it.
#       The device tool carries at most 64 MiB of ignored paths: carry the archive,
#       carry=["panama-cuda/target/gpu-check.tgz"] (~50 MiB; run unpacks it when it differs from what is unpacked;
#       the folder itself is ~80 MiB, too big to carry). Nothing else under */target is needed. prepare prints the
#       sizes and fails when the archive is over 64 MiB.
#
#   scripts/gpu-check.sh [run] [--require-gpu] [--skip-tests] [--skip-bench] [--skip-train] [--skip-tma] [--out DIR]
#                        [-- GpuBench options]
#       On the GPU machine, from the repository root: runs every panama-cuda test and the GPU tests of the other
#       modules (GPU_TESTS below: kernels against the CPU ones, bf16/fp8 GEMMs, bf16 attention, device memory, one NCCL
#       rank, the trainer on --device cuda) (io.accel4j.cuda.GpuCheck, at most $TEST_TIMEOUT s), then the benchmarks (io.accel4j.kernels.bench.GpuBench,
#       at most $BENCH_TIMEOUT s, measuring for $BENCH_BUDGET s), then GPT-2 training steps on the GPU
#       (io.accel4j.cli.bench.GpuTrainStep: the 124M model, B=4, T=1024, fp32, bf16 then fp8, ms/step and
#       tokens/s; at most $TRAIN_TIMEOUT s), then the TMA attention forward on its own (AttentionBf16GpuTest with it,
#       at most $TMA_TEST_TIMEOUT s, and GpuBench's group tma, at most $TMA_BENCH_TIMEOUT s: a kernel new to hardware
#       that hangs stalls only these two processes; the earlier ones run with -Daccel4j.attention.tma=false), and
#       prints the benchmark tables and the training rows last. Writes under DIR (default: $OUT when set, else
#       panama-cuda/target/gpu-check-out): tests.log, bench.log, train.log, tma-tests.log, bench-tma.log and
#       bench{,-tma}/{bench.tsv,bench.json,table.txt} (bench.tsv is written row by row, so it survives a timeout).
#       At most TEST_TIMEOUT + BENCH_TIMEOUT + TRAIN_TIMEOUT + TMA_TEST_TIMEOUT + TMA_BENCH_TIMEOUT + start-ups
#       = 9.5 minutes with the defaults: one 10-minute device call.
#       Exit: 0 done (also when there is no GPU: everything is skipped, saying why), 1 a test, a benchmark or the
#       training step failed or timed out, 2 usage error or no prepared runtime, 3 no usable GPU and --require-gpu.
set -euo pipefail
cd "$(dirname "$0")/.."
pkg=panama-cuda/target/gpu-check
modules="core panama-cuda kernels vector-cpu collectives train"
GPU_TESTS="io.accel4j.kernels.GpuOpsTest io.accel4j.kernels.GpuMatmulTest io.accel4j.kernels.AttentionBf16GpuTest
  io.accel4j.kernels.CudaMemoryTest io.accel4j.kernels.CastTransposeGpuTest io.accel4j.collectives.NcclCommunicatorGpuTest
  io.accel4j.train.GpuTrainerTest
  io.accel4j.cli.train.TrainCommandDeviceTest io.accel4j.cli.bench.GpuTrainStepTest"
carry_limit=$((64 * 1024 * 1024))
flags=$(sed -n 's:.*<accel4j.jvm.flags>\(.*\)</accel4j.jvm.flags>.*:\1:p' pom.xml)
TEST_TIMEOUT=${TEST_TIMEOUT:-180}
BENCH_TIMEOUT=${BENCH_TIMEOUT:-190}
BENCH_BUDGET=${BENCH_BUDGET:-150}
TRAIN_TIMEOUT=${TRAIN_TIMEOUT:-80}
TMA_TEST_TIMEOUT=${TMA_TEST_TIMEOUT:-40}
TMA_BENCH_TIMEOUT=${TMA_BENCH_TIMEOUT:-50}
TMA_BENCH_BUDGET=${TMA_BENCH_BUDGET:-32}
# 109 cases (gemm, adamw, attention), then 24 (tma), at most 1.2 s each (warm-up and measurement; the rest is
# set-up): inside the budgets
BENCH_CASE_S=${BENCH_CASE_S:-1.2}
NO_TMA=-Daccel4j.attention.tma=false

usage() {
  echo "usage: scripts/gpu-check.sh prepare | run [--require-gpu] [--skip-tests] [--skip-bench] [--skip-train]" \
       "[--skip-tma] [--out DIR]" \
       "[-- GpuBench options]" >&2
  exit 2
}

# timeout(1) where there is one (coreutils); TERM at the limit, KILL 10 s later.
limited() {
  local seconds=$1
  shift
  if command -v timeout >/dev/null; then
    timeout --kill-after=10 "$seconds" "$@"
  else
    "$@"
  fi
}

prepare() {
  export JAVA_HOME=${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
  ./mvnw -o -q -pl panama-cuda,kernels,collectives,train -am test-compile
  rm -rf "$pkg/lib" "$pkg/classes"
  # the test libraries, and the CLI's (picocli, SLF4J) for the trainer's tests
  ./mvnw -o -q -pl panama-cuda,train dependency:copy-dependencies -DincludeScope=test \
      -DexcludeGroupIds=io.accel4j,net.jqwik -DoutputDirectory="$PWD/$pkg/lib"
  for m in $modules; do
    mkdir -p "$pkg/classes/$m"
    cp -r "$m/target/classes" "$pkg/classes/$m/main"
    if [ -d "$m/target/test-classes" ]; then
      cp -r "$m/target/test-classes" "$pkg/classes/$m/test"
    fi
  done
  rm -rf "$pkg/jre"
  "$JAVA_HOME/bin/jlink" --add-modules java.base,jdk.incubator.vector,jdk.unsupported,java.logging,java.management,jdk.management,java.desktop \
      --strip-debug --no-header-files --no-man-pages --compress=zip-6 --output "$pkg/jre" 2>&1 \
      | grep -v 'Using incubator modules' || true
  rm -f "$pkg.tgz" "$pkg/.unpacked"
  tar czf "$pkg.tgz" -C "$(dirname "$pkg")" "$(basename "$pkg")"
  cksum < "$pkg.tgz" > "$pkg/.unpacked"
  du -sh "$pkg/jre" "$pkg/lib" "$pkg/classes"
  local bytes archive
  bytes=$(du -sb "$pkg" | cut -f1)
  archive=$(stat -c %s "$pkg.tgz")
  echo "gpu-check: carry [\"$pkg.tgz\"] ($((archive / 1024 / 1024)) MiB; unpacked $((bytes / 1024 / 1024)) MiB);" \
       "the device tool carries at most 64 MiB"
  if [ "$archive" -gt "$carry_limit" ]; then
    echo "gpu-check: over the 64 MiB the device tool carries" >&2
    exit 1
  fi
}

# Unpacks $pkg.tgz when it is here and is not what $pkg holds (a warm device machine keeps an older $pkg).
unpack() {
  [ -f "$pkg.tgz" ] || return 0
  local sum
  sum=$(cksum < "$pkg.tgz")
  if [ ! -f "$pkg/.unpacked" ] || [ "$(cat "$pkg/.unpacked")" != "$sum" ]; then
    echo "gpu-check: unpacking $pkg.tgz"
    rm -rf "$pkg"
    tar xzf "$pkg.tgz" -C "$(dirname "$pkg")"
    echo "$sum" > "$pkg/.unpacked"
  fi
}

run() {
  local require_gpu="" skip_tests="" skip_bench="" skip_train="" skip_tma="" dir=${OUT:-panama-cuda/target/gpu-check-out}
  local bench_args=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --require-gpu) require_gpu=--require-gpu ;;
      --skip-tests) skip_tests=1 ;;
      --skip-bench) skip_bench=1 ;;
      --skip-train) skip_train=1 ;;
      --skip-tma) skip_tma=1 ;;
      --out) [ $# -ge 2 ] || usage; dir=$2; shift ;;
      --) shift; bench_args=("$@"); break ;;
      *) usage ;;
    esac
    shift
  done
  unpack
  local java=${ACCEL4J_JAVA:-$pkg/jre/bin/java}
  if [ ! -x "$java" ] || [ ! -d "$pkg/classes" ]; then
    echo "gpu-check: no runtime at $pkg (jre/, classes/): run 'scripts/gpu-check.sh prepare' on the build" \
         "machine first and carry [\"$pkg.tgz\"]" >&2
    exit 2
  fi
  local c=$pkg/classes cp=""
  for m in $modules; do
    cp="$cp:$c/$m/main"
    [ -d "$c/$m/test" ] && cp="$cp:$c/$m/test"
  done
  cp="${cp#:}:$pkg/lib/*"
  mkdir -p "$dir"

  local tests_rc=skipped bench_rc=skipped train_rc=skipped tma_tests_rc=skipped tma_bench_rc=skipped
  if [ -z "$skip_tests" ]; then
    echo "== gpu-check: tests (at most $TEST_TIMEOUT s) =="
    tests_rc=0
    # shellcheck disable=SC2086
    limited "$TEST_TIMEOUT" "$java" $flags $NO_TMA -cp "$cp" io.accel4j.cuda.GpuCheck \
        $(printf -- '--class %s ' $GPU_TESTS) $require_gpu --tsv "$dir/tests.tsv" 2>&1 | tee "$dir/tests.log" \
        || tests_rc=$?
  fi
  if [ -z "$skip_bench" ]; then
    echo "== gpu-check: benchmarks (at most $BENCH_TIMEOUT s, measuring for $BENCH_BUDGET s) =="
    bench_rc=0
    rm -rf "$dir/bench"
    # shellcheck disable=SC2086
    limited "$BENCH_TIMEOUT" "$java" $flags $NO_TMA -cp "$cp" io.accel4j.kernels.bench.GpuBench --out "$dir/bench" \
        --budget-s "$BENCH_BUDGET" --case-s "$BENCH_CASE_S" --only gemm,adamw,attention \
        ${bench_args[@]+"${bench_args[@]}"} 2>&1 | tee "$dir/bench.log" || bench_rc=$?
  fi
  if [ -z "$skip_train" ]; then
    echo "== gpu-check: GPT-2 training steps on the GPU (at most $TRAIN_TIMEOUT s) =="
    train_rc=0
    # shellcheck disable=SC2086
    limited "$TRAIN_TIMEOUT" "$java" $flags $NO_TMA -cp "$cp" io.accel4j.cli.bench.GpuTrainStep 2>&1 \
        | tee "$dir/train.log" || train_rc=$?
  fi
  if [ -z "$skip_tma" ]; then
    echo "== gpu-check: the TMA attention forward on its own (tests at most $TMA_TEST_TIMEOUT s, benchmarks at most" \
         "$TMA_BENCH_TIMEOUT s) =="
    tma_tests_rc=0
    # shellcheck disable=SC2086
    limited "$TMA_TEST_TIMEOUT" "$java" $flags -cp "$cp" io.accel4j.cuda.GpuCheck \
        --classes-only --class io.accel4j.kernels.AttentionBf16GpuTest --tsv "$dir/tma-tests.tsv" 2>&1 \
        | tee "$dir/tma-tests.log" \
        || tma_tests_rc=$?
    tma_bench_rc=0
    rm -rf "$dir/bench-tma"
    # shellcheck disable=SC2086
    limited "$TMA_BENCH_TIMEOUT" "$java" $flags -cp "$cp" io.accel4j.kernels.bench.GpuBench --out "$dir/bench-tma" \
        --budget-s "$TMA_BENCH_BUDGET" --case-s "$BENCH_CASE_S" --only tma 2>&1 | tee "$dir/bench-tma.log" \
        || tma_bench_rc=$?
  fi

  echo
  echo "== gpu-check: summary (files under $dir) =="
  local rc=0 no_gpu=""
  case "$tests_rc" in
    skipped) echo "tests: not run (--skip-tests)" ;;
    0) echo "tests: $(grep -E '^[0-9]+ tests:' "$dir/tests.log" | tail -1)" ;;
    3) echo "tests: $(grep -E '^[0-9]+ tests:' "$dir/tests.log" | tail -1); --require-gpu: no usable GPU"; rc=3 ;;
    124|137) echo "tests: TIMED OUT: $(grep -m1 '^TIMEOUT:' "$dir/tests.log" || echo "after $TEST_TIMEOUT s") (rows"\
                  "so far in tests.tsv)"; rc=1 ;;
    *) echo "tests: FAILED (exit $tests_rc): $(grep -E '^[0-9]+ tests:' "$dir/tests.log" | tail -1)"; rc=1 ;;
  esac
  case "$bench_rc" in
    skipped) echo "benchmarks: not run (--skip-bench)" ;;
    0) echo "benchmarks: done" ;;
    3) no_gpu=$(grep -m1 'no GPU:' "$dir/bench.log" | sed 's/^gpu-bench: //' || true); no_gpu=${no_gpu:-no GPU} ;;
    124|137) echo "benchmarks: TIMED OUT after $BENCH_TIMEOUT s (the rows measured are in bench/bench.tsv)"; rc=1 ;;
    *) echo "benchmarks: FAILED or a case failed (exit $bench_rc; see bench.log)"; rc=1 ;;
  esac
  case "$train_rc" in
    skipped) echo "training step: not run (--skip-train)" ;;
    0) echo "training step: done" ;;
    3) if [ -z "$no_gpu" ]; then
         no_gpu=$(grep -m1 'no GPU:' "$dir/train.log" | sed 's/^gpu-train: //' || true); no_gpu=${no_gpu:-no GPU}
       fi ;;
    4) echo "training step: $(grep -m1 'skipped:' "$dir/train.log" | sed 's/^gpu-train: //')" ;;
    124|137) echo "training step: TIMED OUT after $TRAIN_TIMEOUT s (the rows measured are in train.log)"; rc=1 ;;
    *) echo "training step: FAILED (exit $train_rc; see train.log)"; rc=1 ;;
  esac
  case "$tma_tests_rc" in
    skipped) echo "TMA attention: not run (--skip-tma)" ;;
    0|3) echo "TMA attention tests (AttentionBf16GpuTest with it): $(grep -E '^[0-9]+ tests:' "$dir/tma-tests.log" \
             | tail -1)" ;;
    124|137) echo "TMA attention tests: TIMED OUT after $TMA_TEST_TIMEOUT s (a hang? see tma-tests.log)"; rc=1 ;;
    *) echo "TMA attention tests: FAILED (exit $tma_tests_rc): $(grep -E '^[0-9]+ tests:' "$dir/tma-tests.log" \
           | tail -1)"; rc=1 ;;
  esac
  case "$tma_bench_rc" in
    skipped|0|3) ;;
    124|137) echo "TMA attention benchmarks: TIMED OUT after $TMA_BENCH_TIMEOUT s (rows in bench-tma/bench.tsv)"
             rc=1 ;;
    *) echo "TMA attention benchmarks: FAILED or a case failed (exit $tma_bench_rc; see bench-tma.log)"; rc=1 ;;
  esac
  if [ -f "$dir/bench/table.txt" ]; then
    echo
    cat "$dir/bench/table.txt"
  fi
  if [ -f "$dir/bench-tma/table.txt" ]; then
    echo
    echo "The TMA attention forward (its own process; compare with flash bf16 wgmma above):"
    cat "$dir/bench-tma/table.txt"
  fi
  if [ "$train_rc" != skipped ] && grep -qE '^ *cuda ' "$dir/train.log"; then
    echo
    echo "GPT-2 124M training step on the GPU (B=4, T=1024; median/best ms per step, tokens/s):"
    grep -E '^gpu-train: accel4j|^ *threads|^ *cuda ' "$dir/train.log" | sed 's/^gpu-train: accel4j .*--precision \([a-z0-9]*\).*/\1:/'
  fi
  if [ -n "$no_gpu" ]; then
    echo "gpu-check: $no_gpu: the GPU tests were skipped, the benchmarks and the training step not run"
    if [ -n "$require_gpu" ]; then
      rc=3
    fi
  fi
  exit "$rc"
}

case "${1:-run}" in
  prepare) prepare ;;
  run) shift $(($# > 0 ? 1 : 0)); run "$@" ;;
  --*) run "$@" ;;
  *) usage ;;
esac
