#!/usr/bin/env bash
# Idempotent setup of everything `repro` needs on a fresh Debian machine,
# in two parts: what running experiments needs (ci/main.sh asks for this
# part alone, REPRO_SETUP=run), and what only the tests need (ci/test.sh
# asks for both, the default). Each part installs only what is missing and
# says what it installs and why.
#
#   bash ci/setup.sh                       # both parts: what ci/test.sh needs
#   REPRO_SETUP=run bash ci/setup.sh       # running only: what ci/main.sh needs
#   REPRO_TORCH=2.11.0 bash ci/setup.sh    # the same, for libtorch 2.11
#
# What it does (each step is skipped when already done):
#   1. apt packages. For running: OpenMPI (mpi crate), libclang (bindgen),
#      pkg-config, iproute2 + ethtool + procps (network shaping), the
#      Fashion-MNIST dataset package, python3-venv. For the tests only:
#      iptables (a test puts a firewall in a namespace), strace, Chromium
#      with a font (a test renders the report pages headless; env.sh names
#      it in REPRO_BROWSER), Slurm's daemons and munge (a test runs a job
#      under a real slurmctld).
#   2. a Python virtualenv with torch==$REPRO_TORCH from PyPI; `tch` builds
#      against it (LIBTORCH_USE_PYTORCH=1), and ci/torch_codec_bench.py uses it.
#      With REPRO_LIBTORCH, no torch is installed: the build uses that one.
#      For the tests only: pyarrow and pandas (a test reads our Parquet
#      files back with them); mlflow-skinny and tensorboard (a test opens
#      our exports with their own readers); matplotlib (a test runs the
#      figure.py beside a figure; repro draws its figures without Python).
#   3. Cargo.lock pins the `tch` release of $REPRO_TORCH (a local change when
#      it is not the default's: `git diff Cargo.lock` shows it).
#   4. for the tests only: rustfmt + clippy components, and cargo-nextest
#      (the test runner of ci/test.sh), built once from crates.io into
#      ~/.cargo/bin (about 4 minutes the first time).
#   5. writes $REPRO_HOME/env.sh, which the other scripts source:
#      LIBTORCH_USE_PYTORCH or LIBTORCH, LD_LIBRARY_PATH (torch's lib/), PATH
#      (the venv), REPRO_TORCH, CARGO_TARGET_DIR (a cache that survives
#      between runs when the machine does).
#
# Environment knobs:
#   REPRO_TORCH     the libtorch to build against: a row of
#                   crates/repro-trainer/libtorch-versions (default its first,
#                   2.13.0), e.g. 2.11.0 for a site's PyTorch 2.11
#   REPRO_LIBTORCH  a torch installed elsewhere, used instead of installing one:
#                   a pip torch's package directory (.../site-packages/torch)
#                   or an unzipped libtorch; its version is REPRO_TORCH's default
#   REPRO_HOME      default ~/.cache/repro
#   REPRO_SKIP_APT=1  no apt-get
#   REPRO_SETUP=full  both parts (the default): what ci/test.sh needs
#   REPRO_SETUP=run   what running needs: steps 1 to 5 without their test
#                   parts (ci/main.sh)
#   REPRO_SETUP=minimal  only what a build needs (steps 3 and 5, and step 2's
#                   torch when REPRO_LIBTORCH is not given): the throwaway
#                   environments of ci/torch-check.sh and ci/gpu-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."

PYARROW_VERSION=26.0.1
PANDAS_VERSION=3.1.1
MLFLOW_VERSION=3.17.2
TENSORBOARD_VERSION=2.21.0
MATPLOTLIB_VERSION=3.11.2
NEXTEST_VERSION=0.9.151
MINIMAL=0
# TESTS=1: the second part, what only the tests need
TESTS=1
case "${REPRO_SETUP:-full}" in
  full) ;;
  run) TESTS=0 ;;
  minimal) MINIMAL=1 TESTS=0 ;;
  *) printf '[setup] REPRO_SETUP=%s: use full (the default), run or minimal\n' "$REPRO_SETUP" >&2; exit 2 ;;
esac
REPRO_HOME="${REPRO_HOME:-$HOME/.cache/repro}"
VENV="$REPRO_HOME/venv"
mkdir -p "$REPRO_HOME"

log() { printf '[setup] %s\n' "$*" >&2; }
fail() { printf '[setup] %s\n' "$*" >&2; exit 2; }

# --- 0. which libtorch, which tch release ---------------------------------------
VERSIONS=crates/repro-trainer/libtorch-versions
known=$(awk '!/^#/ && NF >= 2 { print $1 }' "$VERSIONS" | paste -sd' ')
# the libtorch version at $1 (without +cu...): version.py, else build-version
torch_version_at() {
  local v=""
  if [[ -f "$1/version.py" ]]; then
    v=$(sed -n "s/^__version__[^=]*= *['\"]\([^'\"]*\)['\"].*/\1/p" "$1/version.py" | head -n 1)
  elif [[ -f "$1/build-version" ]]; then
    v=$(head -n 1 "$1/build-version")
  fi
  printf '%s' "${v%%+*}"
}
if [[ -n "${REPRO_LIBTORCH:-}" ]]; then
  [[ -d "$REPRO_LIBTORCH/include" && -d "$REPRO_LIBTORCH/lib" ]] ||
    fail "REPRO_LIBTORCH=$REPRO_LIBTORCH has no include/ and lib/: give a pip torch's package directory (python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))') or an unzipped libtorch"
  REPRO_LIBTORCH=$(cd "$REPRO_LIBTORCH" && pwd)
  site_version=$(torch_version_at "$REPRO_LIBTORCH")
  if [[ -z "$site_version" ]]; then
    [[ -n "${REPRO_TORCH:-}" ]] ||
      fail "REPRO_LIBTORCH=$REPRO_LIBTORCH has no version.py or build-version: set REPRO_TORCH to its version"
  elif [[ -n "${REPRO_TORCH:-}" && "$REPRO_TORCH" != "$site_version" ]]; then
    fail "REPRO_TORCH=$REPRO_TORCH, but REPRO_LIBTORCH=$REPRO_LIBTORCH is libtorch $site_version"
  fi
  REPRO_TORCH="${REPRO_TORCH:-$site_version}"
fi
REPRO_TORCH="${REPRO_TORCH:-${known%% *}}"
TCH_VERSION=$(awk -v t="$REPRO_TORCH" '!/^#/ && $1 == t { print $2 }' "$VERSIONS")
[[ -n "$TCH_VERSION" ]] ||
  fail "REPRO_TORCH=$REPRO_TORCH is not a libtorch the trainer builds against; use one of: $known ($VERSIONS)"

# --- 1. system packages -------------------------------------------------------
# running: MPI, bindgen's libclang, shaping's tools, the data, the venv
APT_PACKAGES=(
  libopenmpi-dev openmpi-bin libclang-dev pkg-config
  iproute2 ethtool procps
  dataset-fashion-mnist
  python3-venv
)
# the tests only: a firewall in a namespace, strace, the report pages in
# a headless browser, a real Slurm
APT_TEST_PACKAGES=(
  iptables strace
  chromium fonts-dejavu-core
  slurmctld slurmd slurm-client munge
)
((TESTS)) && APT_PACKAGES+=("${APT_TEST_PACKAGES[@]}")
if [[ "${REPRO_SKIP_APT:-0}" != 1 ]]; then
  missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    SUDO=""
    [[ $(id -u) -ne 0 ]] && SUDO="sudo"
    log "installing apt packages: ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    log "apt packages present"
  fi
fi

# --- 2. torch virtualenv ------------------------------------------------------
PY="${PYTHON:-python3}"
# (a minimal set-up with REPRO_LIBTORCH needs no Python)
if [[ ! -x "$VENV/bin/python" ]] && ! [[ $MINIMAL == 1 && -n "${REPRO_LIBTORCH:-}" ]]; then
  log "creating virtualenv $VENV"
  "$PY" -m venv "$VENV"
fi
if [[ -n "${REPRO_LIBTORCH:-}" ]]; then
  log "libtorch $REPRO_TORCH from REPRO_LIBTORCH=$REPRO_LIBTORCH (none installed)"
  TORCH_LIB="$REPRO_LIBTORCH/lib"
else
  have_torch=$("$VENV/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null || true)
  if [[ "$have_torch" != "$REPRO_TORCH" ]]; then
    log "installing torch==$REPRO_TORCH into $VENV (about 90 s)"
    "$VENV/bin/pip" install -q --disable-pip-version-check "torch==$REPRO_TORCH" numpy
  else
    log "torch $REPRO_TORCH present"
  fi
  TORCH_LIB=$("$VENV/bin/python" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
fi
if ((TESTS == 0)); then
  log "no pyarrow, pandas, mlflow, tensorboard or matplotlib: only the tests read with them (bash ci/setup.sh installs them)"
elif ! "$VENV/bin/python" -c "import pyarrow, pandas; assert pyarrow.__version__ == '$PYARROW_VERSION'" 2>/dev/null; then
  log "installing pyarrow==$PYARROW_VERSION and pandas==$PANDAS_VERSION into $VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check "pyarrow==$PYARROW_VERSION" "pandas==$PANDAS_VERSION"
fi
if ((TESTS == 0)); then
  :
elif ! "$VENV/bin/python" -c "import mlflow, tensorboard, matplotlib; assert mlflow.__version__ == '$MLFLOW_VERSION' and tensorboard.__version__ == '$TENSORBOARD_VERSION' and matplotlib.__version__ == '$MATPLOTLIB_VERSION'" 2>/dev/null; then
  log "installing mlflow-skinny==$MLFLOW_VERSION, tensorboard==$TENSORBOARD_VERSION and matplotlib==$MATPLOTLIB_VERSION into $VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check "mlflow-skinny==$MLFLOW_VERSION" "tensorboard==$TENSORBOARD_VERSION" "matplotlib==$MATPLOTLIB_VERSION"
fi

# --- 3. the tch release of that libtorch, pinned in Cargo.lock -----------------
locked_tch=$(awk '/^name = "tch"$/ { getline; gsub(/[^0-9.]/, ""); print; exit }' Cargo.lock)
if [[ "$locked_tch" != "$TCH_VERSION" ]]; then
  log "pinning tch $TCH_VERSION (libtorch $REPRO_TORCH) in Cargo.lock, which had tch $locked_tch"
  cargo update -q -p tch --precise "$TCH_VERSION"
else
  log "Cargo.lock pins tch $TCH_VERSION, libtorch $REPRO_TORCH's"
fi

# --- 4. rust components -------------------------------------------------------
if ((TESTS == 0)); then
  :
elif command -v rustup >/dev/null 2>&1; then
  rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
  rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
fi
if ((TESTS)); then
  have_nextest=$(cargo nextest --version 2>/dev/null | sed -n 's/^cargo-nextest \([^ ]*\).*/\1/p' || true)
  if [[ "$have_nextest" != "$NEXTEST_VERSION" ]]; then
    log "building cargo-nextest $NEXTEST_VERSION from crates.io (about 4 minutes, once)"
    CARGO_TARGET_DIR="$REPRO_HOME/nextest-build" cargo install -q --locked --version "$NEXTEST_VERSION" cargo-nextest
    rm -rf "$REPRO_HOME/nextest-build"
  else
    log "cargo-nextest $NEXTEST_VERSION present"
  fi
fi

# --- 5. environment file ------------------------------------------------------
if [[ -n "${REPRO_LIBTORCH:-}" ]]; then
  TORCH_ENV="unset LIBTORCH_USE_PYTORCH
export LIBTORCH=\"$REPRO_LIBTORCH\""
else
  TORCH_ENV="export LIBTORCH_USE_PYTORCH=1
unset LIBTORCH"
fi
cat >"$REPRO_HOME/env.sh" <<ENV
# written by ci/setup.sh; source it before cargo
$TORCH_ENV
export REPRO_TORCH="$REPRO_TORCH"
export REPRO_VENV="$VENV"
export REPRO_BROWSER="$(command -v chromium || true)"
export PATH="$VENV/bin:\$PATH"
export LD_LIBRARY_PATH="$TORCH_LIB\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export CARGO_TARGET_DIR="\${CARGO_TARGET_DIR:-$REPRO_HOME/target}"
ENV
log "environment written to $REPRO_HOME/env.sh"
