#!/usr/bin/env bash
# Installs Open MPI (mpirun + libmpi.so.40) for the collectives module's MPI backend and its mpirun test.
# Idempotent: does nothing when mpirun and libmpi are already present. Needs root and apt-get (Debian/Ubuntu);
# elsewhere it says what to install and exits 1.
set -euo pipefail

have_lib() {
  ldconfig -p 2>/dev/null | grep -q 'libmpi\.so\.40' \
    || ls /usr/lib/*/libmpi.so.40 /usr/lib/*/openmpi/lib/libmpi.so.40 /usr/lib64/openmpi/lib/libmpi.so.40 >/dev/null 2>&1
}

if command -v mpirun >/dev/null 2>&1 && have_lib; then
  echo "install-openmpi: already installed: $(command -v mpirun) ($(mpirun --version 2>/dev/null | head -n1))"
  exit 0
fi

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "install-openmpi: Open MPI is missing; install it as root, e.g. on Debian/Ubuntu:" >&2
  echo "  apt-get install -y --no-install-recommends openmpi-bin libopenmpi-dev" >&2
  exit 1
fi

echo "install-openmpi: running apt-get update and installing openmpi-bin libopenmpi-dev"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends openmpi-bin libopenmpi-dev
echo "install-openmpi: installed $(command -v mpirun) ($(mpirun --version 2>/dev/null | head -n1))"
echo "install-openmpi: note: as root, mpirun needs --allow-run-as-root (and --oversubscribe for more ranks than cores)"
