#!/usr/bin/env bash
# All-reduce bandwidth, in-process ring beside Open MPI, in one session (AllReduceSweep: not JMH, since JMH's forked
# JVMs do not fit under mpirun). Prints Markdown rows: µs/call, algbw, busbw, memcpy GB/s and busbw / memcpy.
#
#   jmh/mpi-allreduce.sh                    # 2 ranks, 1K,1M,64M,256M: ~1 min on 2 cores
#   RANKS=4 SIZES=1K,64M jmh/mpi-allreduce.sh
#
# Environment: RANKS [2], SIZES [1K,1M,64M,256M], RING [1] (0: skip the ring), REBUILD [0] (1: rebuild
# benchmarks.jar), SINGLE_COPY [none] (Open MPI's btl_vader_single_copy_mechanism: none works in containers, cma is
# faster where ptrace is allowed), MPIRUN_ARGS (extra mpirun flags, e.g. --bind-to none). As root, mpirun needs
# --allow-run-as-root (added here when running as root). Needs Open MPI (scripts/install-openmpi.sh); without it only
# the ring is measured.
set -euo pipefail

ROOT=$(cd -P "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
JAR=$ROOT/jmh/target/benchmarks.jar
RANKS=${RANKS:-2}
SIZES=${SIZES:-1K,1M,64M,256M}

# shellcheck source=../bin/find-jdk.sh
source "$ROOT/bin/find-jdk.sh"
JAVA_HOME=$(accel4j_find_jdk) || exit 1
export JAVA_HOME

if [[ ! -f "$JAR" || "${REBUILD:-0}" == 1 ]]; then
  echo "building benchmarks.jar…" >&2
  (cd "$ROOT" && MAVEN_OPTS="--sun-misc-unsafe-memory-access=allow ${MAVEN_OPTS-}" \
    ./mvnw -q -pl jmh -am package -DskipTests) || { echo "mpi-allreduce: error: the build failed" >&2; exit 1; }
fi
flags=$(sed -n 's:.*<accel4j\.jvm\.flags>\(.*\)</accel4j\.jvm\.flags>.*:\1:p' "$ROOT/pom.xml" | head -n 1)
read -r -a jvm_flags <<< "$flags"
java=("$JAVA_HOME/bin/java" "${jvm_flags[@]}" -cp "$JAR" io.accel4j.jmh.AllReduceSweep)

if [[ "${RING:-1}" != 0 ]]; then
  echo "## in-process ring, $RANKS rank threads (one JVM)"
  "${java[@]}" ring "$RANKS" "$SIZES"
fi

if ! command -v mpirun > /dev/null; then
  echo "mpi-allreduce: mpirun not found: Open MPI not measured (scripts/install-openmpi.sh installs it)" >&2
  exit 0
fi
root=()
[[ "$(id -u)" == 0 ]] && root=(--allow-run-as-root)
read -r -a extra <<< "${MPIRUN_ARGS-}"
echo
echo "## Open MPI $(mpirun --version 2>/dev/null | head -n1 | sed 's/.* //'), mpirun -np $RANKS (one JVM per rank)," \
  "single copy: ${SINGLE_COPY:-none}${MPIRUN_ARGS:+, $MPIRUN_ARGS}"
mpirun ${root[@]+"${root[@]}"} --oversubscribe --mca btl_vader_single_copy_mechanism "${SINGLE_COPY:-none}" \
  ${extra[@]+"${extra[@]}"} -np "$RANKS" "${java[@]}" mpi "$SIZES"
