#!/usr/bin/env bash
# Runs a suite of JMH benchmarks and prints their Markdown report (the tables of docs/PERFORMANCE.md).
#
#   jmh/run.sh gemm                          # GemmBench, GemmNaiveBench, GemmLowPrecisionBench: ~25 min on 2 cores
#   jmh/run.sh kernels                       # the training kernels (attention, AdamW, SGD, Lion, layernorm, GELU…)
#   jmh/run.sh gemm -p shape=1024            # extra arguments go to JMH as they are
#   BENCH=GemmLowPrecisionBench jmh/run.sh gemm
#
# Environment (defaults in brackets):
#   BENCH [the suite's]          JMH benchmark regex          FORKS [1]       forks per benchmark
#   WARMUP_ITERS [3]  WARMUP_TIME [3s]                        ITERS [5]       ITER_TIME [3s]
#   PEAK_PER_CORE [measured: FmaProbe]  fp32 GFLOP/s of one core, for the report's "of peak" column
#   KEEP_OPENBLAS_ENV [0]  1 keeps OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE (by default both are unset for this run)
#   REBUILD [0]  1 rebuilds benchmarks.jar even when it looks up to date
#
# Warm-up stays >= 3 s an iteration: a Vector API kernel measured before C2 compiled it runs 20x slower.
# Writes jmh/results/gemm-<time>.{json,log,md}. Exit 1 if the build or a benchmark failed.
set -euo pipefail

ROOT=$(cd -P "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

suite=${1-}
case "$suite" in
  gemm) regex='io\.accel4j\.jmh\.Gemm' ;;
  kernels) regex='io\.accel4j\.jmh\.(Attention|AdamW|Sgd|Lion|LayerNorm|Gelu|MlpGelu|Residual|Encoder|Classifier|Reductions|AllReduce)Bench' ;;
  all) regex='io\.accel4j\.jmh\.' ;;
  *) echo "usage: jmh/run.sh gemm|kernels|all [JMH arguments…]" >&2; exit 2 ;;
esac
shift
JAR=$ROOT/jmh/target/benchmarks.jar

if [[ -f "$ROOT/bin/find-jdk.sh" ]]; then
  # shellcheck source=../bin/find-jdk.sh
  source "$ROOT/bin/find-jdk.sh"
  JAVA_HOME=$(accel4j_find_jdk) || exit 1
elif [[ -z "${JAVA_HOME-}" && -d /usr/lib/jvm/temurin-25-jdk-amd64 ]]; then
  JAVA_HOME=/usr/lib/jvm/temurin-25-jdk-amd64
fi
export JAVA_HOME
JAVA=${JAVA_HOME:+$JAVA_HOME/bin/}java

# Build when the jar is missing or older than a pom or a main source of the modules it contains.
reason=""
if [[ ! -f "$JAR" ]]; then
  reason="no benchmarks.jar"
elif [[ "${REBUILD:-0}" == 1 ]]; then
  reason="REBUILD=1"
else
  newer=$(find "$ROOT/pom.xml" "$ROOT/core" "$ROOT/vector-cpu" "$ROOT/jmh" -name target -prune -o -type f \
    \( -name pom.xml -o -path '*/src/main/*' \) -newer "$JAR" -print -quit)
  [[ -n "$newer" ]] && reason="${newer#"$ROOT"/} changed"
fi
if [[ -n "$reason" ]]; then
  if [[ -x "$ROOT/mvnw" ]]; then MVN=("$ROOT/mvnw"); else MVN=(mvn); fi
  echo "building benchmarks.jar ($reason)…" >&2
  if ! (cd "$ROOT" && MAVEN_OPTS="--sun-misc-unsafe-memory-access=allow ${MAVEN_OPTS-}" \
        "${MVN[@]}" -q -pl jmh -am package -DskipTests); then
    echo "run: error: the build failed; for the full log: cd $ROOT && ${MVN[*]} -pl jmh -am package -DskipTests" >&2
    exit 1
  fi
fi

# The report JVM loads OpenBLAS through JNI: give it the project's flags (they include --enable-native-access).
flags=$(sed -n 's:.*<accel4j\.jvm\.flags>\(.*\)</accel4j\.jvm\.flags>.*:\1:p' "$ROOT/pom.xml" | head -n 1)
read -r -a jvm_flags <<< "$flags"

# OPENBLAS_CORETYPE=Haswell (set on some of these machines) makes OpenBLAS skip its own CPU detection and run
# slower kernels than the ones it picks for this CPU; unset it, and OPENBLAS_L2_SIZE, for this run only.
ENV_CMD=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE)
[[ "${KEEP_OPENBLAS_ENV:-0}" == 1 ]] && ENV_CMD=(env)

mkdir -p "$ROOT/jmh/results"
stamp=$(date +%Y%m%d-%H%M%S)
out=$ROOT/jmh/results/$suite-$stamp
peak=()
[[ -n "${PEAK_PER_CORE-}" ]] && peak=(--peak-per-core "$PEAK_PER_CORE")

cmd=("${ENV_CMD[@]}" "$JAVA" -jar "$JAR" "${BENCH:-$regex}"
  -f "${FORKS:-1}" -wi "${WARMUP_ITERS:-3}" -w "${WARMUP_TIME:-3s}" -i "${ITERS:-5}" -r "${ITER_TIME:-3s}"
  -rf json -rff "$out.json" "$@")
echo "running: ${cmd[*]}" | tee "$out.log" >&2
set +e
"${cmd[@]}" 2>&1 | tee -a "$out.log"
status=${PIPESTATUS[0]}
set -e
if [[ ! -s "$out.json" ]]; then
  echo "run: error: JMH wrote no results (exit $status); see $out.log" >&2
  exit 1
fi

"${ENV_CMD[@]}" "$JAVA" "${jvm_flags[@]}" -cp "$JAR" io.accel4j.jmh.Report ${peak[@]+"${peak[@]}"} "$out.json" \
  | tee "$out.md"
echo >&2
echo "results: $out.json, log: $out.log, report: $out.md" >&2
failures=$(grep -c '<failure>' "$out.log" || true)
if [[ "$status" != 0 || "$failures" != 0 ]]; then
  echo "run: error: JMH exited $status with $failures failed benchmark(s); see $out.log" >&2
  exit 1
fi
