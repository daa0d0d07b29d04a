#!/usr/bin/env bash
# Idempotent setup of everything `repro` needs on a fresh Debian machine.
#
#   bash ci/setup.sh            # system packages, torch venv, env file
#
# What it does (each step is skipped when already done):
#   1. apt packages: OpenMPI (mpi crate), libclang (bindgen), iproute2 + ethtool
#      (network shaping), iptables (a test puts a firewall in a namespace),
#      the Fashion-MNIST dataset package, python3-venv.
#   2. a Python virtualenv with torch==$TORCH_VERSION from PyPI; `tch` builds
#      against it (LIBTORCH_USE_PYTORCH=1), and ci/torch_codec_bench.py uses it.
#      Also pyarrow and pandas: a test reads our Parquet files back with them.
#   3. rustfmt + clippy components.
#   4. writes $REPRO_HOME/env.sh, which the other scripts source:
#      LIBTORCH_USE_PYTORCH, LD_LIBRARY_PATH (torch's lib/), PATH (the venv),
#      CARGO_TARGET_DIR (a cache that survives between runs when the machine does).
#
# Environment knobs: REPRO_HOME (default ~/.cache/repro), TORCH_VERSION
# (default 2.13.0, the version tch 0.26 needs), REPRO_SKIP_APT=1 (no apt-get).
set -euo pipefail

TORCH_VERSION="${TORCH_VERSION:-2.13.0}"
PYARROW_VERSION=26.0.1
PANDAS_VERSION=3.1.1
REPRO_HOME="${REPRO_HOME:-$HOME/.cache/repro}"
VENV="$REPRO_HOME/venv"
mkdir -p "$REPRO_HOME"

log() { printf '[setup] %s\n' "$*" >&2; }

# --- 1. system packages -------------------------------------------------------
APT_PACKAGES=(
  libopenmpi-dev openmpi-bin libclang-dev pkg-config
  iproute2 ethtool procps iptables strace
  dataset-fashion-mnist
  python3-venv
)
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
if [[ ! -x "$VENV/bin/python" ]]; then
  log "creating virtualenv $VENV"
  "$PY" -m venv "$VENV"
fi
have_torch=$("$VENV/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null || true)
if [[ "$have_torch" != "$TORCH_VERSION" ]]; then
  log "installing torch==$TORCH_VERSION into $VENV (about 90 s)"
  "$VENV/bin/pip" install -q --disable-pip-version-check "torch==$TORCH_VERSION" numpy
else
  log "torch $TORCH_VERSION present"
fi
if ! "$VENV/bin/python" -c "import pyarrow, pandas; assert pyarrow.__version__ == '$PYARROW_VERSION'" 2>/dev/null; then
  log "installing pyarrow==$PYARROW_VERSION and pandas==$PANDAS_VERSION into $VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check "pyarrow==$PYARROW_VERSION" "pandas==$PANDAS_VERSION"
fi
TORCH_LIB=$("$VENV/bin/python" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')

# --- 3. rust components -------------------------------------------------------
if command -v rustup >/dev/null 2>&1; then
  rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
  rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
fi

# --- 4. environment file ------------------------------------------------------
cat >"$REPRO_HOME/env.sh" <<ENV
# written by ci/setup.sh; source it before cargo
export LIBTORCH_USE_PYTORCH=1
export REPRO_VENV="$VENV"
export PATH="$VENV/bin:\$PATH"
export LD_LIBRARY_PATH="$TORCH_LIB\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export CARGO_TARGET_DIR="\${CARGO_TARGET_DIR:-$REPRO_HOME/target}"
ENV
log "environment written to $REPRO_HOME/env.sh"
