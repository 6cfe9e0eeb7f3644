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
#   scripts/gpu-check.sh [run] [--require-gpu] [--only PHASES] [--skip-tests] [--skip-bench] [--skip-train]
#                        [--skip-tma] [--out DIR] [-- GpuBench options]
#       On the GPU machine, from the repository root, in phases (PHASES: a comma list of these names; default all):
#         (0) inventory  inventory.txt: nvidia-smi -q, the driver version, the loader's cuda/cublas/nccl, pip's NVIDIA
#                        wheels, accel4j doctor; first, before anything can hang;
#         (1) modules    modules.tsv: every PTX module loaded on its own and launched once (io.accel4j.kernels
#                        .ModuleCheck: outcome, JIT ms, registers), at most $MODULES_TIMEOUT s;
#         (2) tests      tests.tsv, a row per test as it finishes: every panama-cuda test and the GPU tests of the
#                        other modules (GPU_TESTS below) (io.accel4j.cuda.GpuCheck, at most $TEST_TIMEOUT s, and
#                        $TEST_CASE_TIMEOUT s a test: its watchdog names a hanging test);
#         (3) bench      the benchmarks (io.accel4j.kernels.bench.GpuBench, at most $BENCH_TIMEOUT s, measuring for
#                        $BENCH_BUDGET s): bench/{bench.tsv,bench.json,table.txt}, bench.tsv row by row;
#         (4) train      GPT-2 training steps (io.accel4j.cli.bench.GpuTrainStep: the 124M model, B=4, T=1024, fp32,
#                        bf16 then fp8, ms/step and tokens/s; at most $TRAIN_TIMEOUT s): train.log;
#         (5) tma        the TMA attention forward last and on its own (AttentionBf16GpuTest with it, at most
#                        $TMA_TEST_TIMEOUT s, and GpuBench's group tma, at most $TMA_BENCH_TIMEOUT s: a kernel new to
#                        hardware that hangs stalls only these processes; the earlier ones run with
#                        -Daccel4j.attention.tma=false).
#       summary.txt (a line per phase) is rewritten after every phase, so a session cut short still has it. Writes
#       under DIR (default: $OUT when set, else panama-cuda/target/gpu-check-out), also each phase's .log. The
#       defaults add up to at most 6 minutes, so that a second, targeted call (--only tests,train) fits in a
#       10-minute session. --skip-X drops phase X (kept for older instructions).
#       Exit: 0 done (also when there is no GPU: everything is skipped, saying why), 1 a module, a test, a benchmark
#       or the training step failed or timed out, 2 usage error or no prepared runtime, 3 no usable GPU and
#       --require-gpu.
set -euo pipefail
cd "$(dirname "$0")/.."
pkg=panama-cuda/target/gpu-check
modules="core panama-cuda kernels vector-cpu collectives train"
GPU_TESTS="io.accel4j.kernels.GpuOpsTest io.accel4j.kernels.PointwiseGpuTest io.accel4j.kernels.EncoderGpuTest
  io.accel4j.kernels.LayerNormGpuTest io.accel4j.kernels.ClassifierGpuTest io.accel4j.kernels.AdamWGpuTest
  io.accel4j.kernels.ReductionsGpuTest io.accel4j.kernels.AttentionGpuTest io.accel4j.kernels.MatmulGpuOpsTest
  io.accel4j.kernels.CastGpuTest io.accel4j.kernels.GpuMatmulTest io.accel4j.kernels.AttentionBf16GpuTest
  io.accel4j.kernels.CudaMemoryTest io.accel4j.kernels.CastTransposeGpuTest io.accel4j.collectives.NcclCommunicatorGpuTest
  io.accel4j.train.GpuTrainerTest io.accel4j.train.OffloadGpuTest io.accel4j.cli.train.TrainCommandDeviceTest
  io.accel4j.cli.bench.GpuTrainStepTest"
carry_limit=$((64 * 1024 * 1024))
flags=$(sed -n 's:.*<accel4j.jvm.flags>\(.*\)</accel4j.jvm.flags>.*:\1:p' pom.xml)
# The defaults add up to at most 6 minutes (with the JVM start-ups), so that a second, targeted call (--only …) fits
# in a 10-minute device session.
MODULES_TIMEOUT=${MODULES_TIMEOUT:-30}
TEST_TIMEOUT=${TEST_TIMEOUT:-90}
TEST_CASE_TIMEOUT=${TEST_CASE_TIMEOUT:-60}
BENCH_TIMEOUT=${BENCH_TIMEOUT:-110}
BENCH_BUDGET=${BENCH_BUDGET:-90}
TRAIN_TIMEOUT=${TRAIN_TIMEOUT:-55}
TMA_TEST_TIMEOUT=${TMA_TEST_TIMEOUT:-20}
TMA_BENCH_TIMEOUT=${TMA_BENCH_TIMEOUT:-25}
TMA_BENCH_BUDGET=${TMA_BENCH_BUDGET:-15}
# at most 1.2 s a case (warm-up and measurement; the rest is set-up); the budgets end a group early, keeping the
# rows measured
BENCH_CASE_S=${BENCH_CASE_S:-1.2}
NO_TMA=-Daccel4j.attention.tma=false

usage() {
  echo "usage: scripts/gpu-check.sh prepare | run [--require-gpu] [--only inventory,modules,tests,bench,train,tma]" \
       "[--skip-tests] [--skip-bench] [--skip-train] [--skip-tma] [--out DIR] [-- GpuBench options]" >&2
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

# One line per phase, what it gave so far; the exit code in $summary_rc. Phases not reached say "pending".
summarize() {
  local dir=$1 rc=0 no_gpu="" line
  summary_lines=()
  add() { summary_lines+=("$1"); }
  case "$inventory_rc" in
    skipped) add "inventory: not run" ;;
    pending) add "inventory: pending" ;;
    *) add "inventory: inventory.txt ($(grep -m1 -E '^driver:' "$dir/inventory.txt" 2>/dev/null || echo 'no driver line'))" ;;
  esac
  case "$modules_rc" in
    skipped) add "modules: not run" ;;
    pending) add "modules: pending" ;;
    0) add "modules: every module loaded and launched (modules.tsv)" ;;
    3) no_gpu=$(grep -m1 'no GPU:' "$dir/modules.log" | sed 's/^module-check: //' || true); no_gpu=${no_gpu:-no GPU}
       add "modules: $no_gpu" ;;
    124|137) add "modules: TIMED OUT after $MODULES_TIMEOUT s (rows so far in modules.tsv)"; rc=1 ;;
    *) add "modules: FAILED: $(awk -F'\t' 'NR > 1 && ($3 != "ok" || $7 == "FAILED") {printf "%s%s", s, $1; s=", "}' \
           "$dir/modules.tsv" 2>/dev/null) (see modules.tsv)"; rc=1 ;;
  esac
  case "$tests_rc" in
    skipped) add "tests: not run" ;;
    pending) add "tests: pending" ;;
    0) add "tests: $(grep -E '^[0-9]+ tests:' "$dir/tests.log" | tail -1)" ;;
    3) add "tests: $(grep -E '^[0-9]+ tests:' "$dir/tests.log" | tail -1); --require-gpu: no usable GPU"; rc=3 ;;
    124|137) add "tests: TIMED OUT: $(grep -m1 '^TIMEOUT:' "$dir/tests.log" || echo "after $TEST_TIMEOUT s") (rows so far in tests.tsv)"; rc=1 ;;
    *) add "tests: FAILED (exit $tests_rc): $(grep -E '^[0-9]+ tests:' "$dir/tests.log" | tail -1) (tests.tsv)"; rc=1 ;;
  esac
  case "$bench_rc" in
    skipped) add "benchmarks: not run" ;;
    pending) add "benchmarks: pending" ;;
    0) add "benchmarks: done (bench/table.txt)" ;;
    3) add "benchmarks: no GPU" ;;
    124|137) add "benchmarks: TIMED OUT after $BENCH_TIMEOUT s (the rows measured are in bench/bench.tsv)"; rc=1 ;;
    *) add "benchmarks: FAILED or a case failed (exit $bench_rc; see bench.log)"; rc=1 ;;
  esac
  case "$train_rc" in
    skipped) add "training step: not run" ;;
    pending) add "training step: pending" ;;
    0) add "training step: done (train.log)" ;;
    3) add "training step: no GPU" ;;
    4) add "training step: $(grep -m1 'skipped:' "$dir/train.log" | sed 's/^gpu-train: //')" ;;
    124|137) add "training step: TIMED OUT after $TRAIN_TIMEOUT s (the rows measured are in train.log)"; rc=1 ;;
    *) add "training step: FAILED (exit $train_rc; see train.log)"; rc=1 ;;
  esac
  case "$tma_tests_rc" in
    skipped) add "TMA attention: not run" ;;
    pending) add "TMA attention: pending" ;;
    0|3) add "TMA attention tests (AttentionBf16GpuTest with it): $(grep -E '^[0-9]+ tests:' "$dir/tma-tests.log" | tail -1)" ;;
    124|137) add "TMA attention tests: TIMED OUT after $TMA_TEST_TIMEOUT s (a hang? see tma-tests.log)"; rc=1 ;;
    *) add "TMA attention tests: FAILED (exit $tma_tests_rc): $(grep -E '^[0-9]+ tests:' "$dir/tma-tests.log" | tail -1)"; rc=1 ;;
  esac
  case "$tma_bench_rc" in
    skipped|pending|0|3) ;;
    124|137) add "TMA attention benchmarks: TIMED OUT after $TMA_BENCH_TIMEOUT s (rows in bench-tma/bench.tsv)"; rc=1 ;;
    *) add "TMA attention benchmarks: FAILED or a case failed (exit $tma_bench_rc; see bench-tma.log)"; rc=1 ;;
  esac
  if [ -n "$no_gpu" ]; then
    add "gpu-check: $no_gpu: the GPU tests were skipped, the benchmarks and the training step not run"
    [ -n "$require_gpu" ] && rc=3
  fi
  summary_rc=$rc
  { for line in "${summary_lines[@]}"; do echo "$line"; done; } > "$dir/summary.txt.tmp"
  mv "$dir/summary.txt.tmp" "$dir/summary.txt"
}

# Phase 0: what the machine has, before anything can hang.
inventory() {
  local dir=$1 java=$2 cp=$3
  {
    echo "date: $(date -u +%FT%TZ)"
    echo "driver: $(nvidia-smi --query-gpu=driver_version,name --format=csv,noheader 2>/dev/null | head -1 || echo 'nvidia-smi: not found')"
    echo "== nvidia-smi -q"
    limited 10 nvidia-smi -q 2>&1 || echo "(nvidia-smi failed or is missing)"
    echo "== ldconfig -p (cuda, cublas, nccl)"
    ldconfig -p 2>/dev/null | grep -E 'libcuda|libcublas|libnccl' || echo "(none in the loader cache)"
    echo "== pip's NVIDIA wheels"
    { python3 -m pip list 2>/dev/null || pip list 2>/dev/null; } | grep -i nvidia || echo "(none, or no pip)"
    echo "== accel4j doctor"
    # shellcheck disable=SC2086
    limited 20 "$java" $flags -cp "$cp" io.accel4j.cli.Main doctor 2>&1 || echo "(doctor failed)"
  } > "$dir/inventory.txt" 2>&1
}

run() {
  local dir=${OUT:-panama-cuda/target/gpu-check-out} only="inventory,modules,tests,bench,train,tma"
  require_gpu=""
  local bench_args=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --require-gpu) require_gpu=--require-gpu ;;
      --only) [ $# -ge 2 ] || usage; only=$2; shift ;;
      --skip-tests) only=${only//tests/} ;;
      --skip-bench) only=${only//bench/} ;;
      --skip-train) only=${only//train/} ;;
      --skip-tma) only=${only//tma/} ;;
      --out) [ $# -ge 2 ] || usage; dir=$2; shift ;;
      --) shift; bench_args=("$@"); break ;;
      *) usage ;;
    esac
    shift
  done
  local phase
  for phase in ${only//,/ }; do
    case "$phase" in inventory|modules|tests|bench|train|tma) ;; *) echo "gpu-check: unknown phase $phase" >&2; usage ;; esac
  done
  wants() { [[ ",$only," == *",$1,"* ]]; }
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
  # One GPU: NCCL's single-rank checks stay on the loopback interface and say only what went wrong; the JIT cache
  # lives in the package, so a second call on a warm machine does not JIT the PTX again.
  export NCCL_DEBUG=${NCCL_DEBUG:-WARN} NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo}
  export CUDA_CACHE_PATH=${CUDA_CACHE_PATH:-$PWD/$pkg/cuda-cache}

  inventory_rc=skipped modules_rc=skipped tests_rc=skipped bench_rc=skipped train_rc=skipped
  tma_tests_rc=skipped tma_bench_rc=skipped
  wants inventory && inventory_rc=pending
  wants modules && modules_rc=pending
  wants tests && tests_rc=pending
  wants bench && bench_rc=pending
  wants train && train_rc=pending
  wants tma && tma_tests_rc=pending tma_bench_rc=pending
  summarize "$dir"
  if wants inventory; then
    echo "== gpu-check: (0) inventory (inventory.txt) =="
    inventory "$dir" "$java" "$cp"
    inventory_rc=0
    summarize "$dir"
  fi
  if wants modules; then
    echo "== gpu-check: (1) every PTX module loaded and launched once (modules.tsv, at most $MODULES_TIMEOUT s) =="
    modules_rc=0
    # shellcheck disable=SC2086
    limited "$MODULES_TIMEOUT" "$java" $flags $NO_TMA -cp "$cp" io.accel4j.kernels.ModuleCheck "$dir/modules.tsv" \
        2>&1 | tee "$dir/modules.log" || modules_rc=$?
    summarize "$dir"
  fi
  if wants tests; then
    echo "== gpu-check: (2) tests (tests.tsv, at most $TEST_TIMEOUT s, $TEST_CASE_TIMEOUT s a test) =="
    tests_rc=0
    # shellcheck disable=SC2086
    limited "$TEST_TIMEOUT" "$java" $flags $NO_TMA -cp "$cp" io.accel4j.cuda.GpuCheck \
        $(printf -- '--class %s ' $GPU_TESTS) $require_gpu --tsv "$dir/tests.tsv" \
        --test-timeout "$TEST_CASE_TIMEOUT" 2>&1 | tee "$dir/tests.log" || tests_rc=$?
    summarize "$dir"
  fi
  if wants bench; then
    echo "== gpu-check: (3) benchmarks (at most $BENCH_TIMEOUT s, measuring for $BENCH_BUDGET s) =="
    bench_rc=0
    rm -rf "$dir/bench"
    # shellcheck disable=SC2086
    limited "$BENCH_TIMEOUT" "$java" $flags $NO_TMA -cp "$cp" io.accel4j.kernels.bench.GpuBench --out "$dir/bench" \
        --budget-s "$BENCH_BUDGET" --case-s "$BENCH_CASE_S" --only gemm,adamw,attention \
        ${bench_args[@]+"${bench_args[@]}"} 2>&1 | tee "$dir/bench.log" || bench_rc=$?
    summarize "$dir"
  fi
  if wants train; then
    echo "== gpu-check: (4) GPT-2 training steps on the GPU (at most $TRAIN_TIMEOUT s) =="
    train_rc=0
    # shellcheck disable=SC2086
    limited "$TRAIN_TIMEOUT" "$java" $flags $NO_TMA -cp "$cp" io.accel4j.cli.bench.GpuTrainStep 2>&1 \
        | tee "$dir/train.log" || train_rc=$?
    summarize "$dir"
  fi
  if wants tma; then
    echo "== gpu-check: (5) the TMA attention forward on its own (tests at most $TMA_TEST_TIMEOUT s, benchmarks at" \
         "most $TMA_BENCH_TIMEOUT s) =="
    tma_tests_rc=0
    # shellcheck disable=SC2086
    limited "$TMA_TEST_TIMEOUT" "$java" $flags -cp "$cp" io.accel4j.cuda.GpuCheck \
        --classes-only --class io.accel4j.kernels.AttentionBf16GpuTest --tsv "$dir/tma-tests.tsv" \
        --test-timeout "$TEST_CASE_TIMEOUT" 2>&1 | tee "$dir/tma-tests.log" || tma_tests_rc=$?
    tma_bench_rc=0
    rm -rf "$dir/bench-tma"
    # shellcheck disable=SC2086
    limited "$TMA_BENCH_TIMEOUT" "$java" $flags -cp "$cp" io.accel4j.kernels.bench.GpuBench --out "$dir/bench-tma" \
        --budget-s "$TMA_BENCH_BUDGET" --case-s "$BENCH_CASE_S" --only tma 2>&1 | tee "$dir/bench-tma.log" \
        || tma_bench_rc=$?
    summarize "$dir"
  fi

  echo
  echo "== gpu-check: summary (summary.txt; files under $dir) =="
  cat "$dir/summary.txt"
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
  exit "$summary_rc"
}

case "${1:-run}" in
  prepare) prepare ;;
  run) shift $(($# > 0 ? 1 : 0)); run "$@" ;;
  --*) run "$@" ;;
  *) usage ;;
esac
