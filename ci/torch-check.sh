#!/usr/bin/env bash
# Proves the trainer compiles against a libtorch other than the default, the
# way a user selects one (REPRO_TORCH, REPRO_LIBTORCH; docs/cluster.md):
#
#   bash ci/torch-check.sh 2.11.0
#
# Downloads the torch==VERSION wheel from PyPI without its dependencies
# (kept in $REPRO_HOME/wheels), unpacks its headers and version.py, copies
# the working tree to a scratch directory, runs ci/setup.sh there with
# REPRO_TORCH=VERSION and REPRO_LIBTORCH at those headers (so Cargo.lock
# pins that version's tch release in the copy only), and `cargo check`s the
# trainer, MPI transport included, against them. A check compiles tch's C++
# glue against the headers and type-checks our code against that tch; it
# does not link, which would need the wheel's libraries and CUDA's.
# ci/gpu-check.sh builds and links for real. About 3 minutes (a first
# check compiles the trainer's dependencies into a target of its own).
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION="${1:?usage: bash ci/torch-check.sh LIBTORCH_VERSION (a row of crates/repro-trainer/libtorch-versions)}"
REPRO_HOME="${REPRO_HOME:-$HOME/.cache/repro}"
bash ci/setup.sh >/dev/null 2>&1 || bash ci/setup.sh
# shellcheck disable=SC1091
source "$REPRO_HOME/env.sh"
log() { printf '[torch-check] %s\n' "$*" >&2; }

wheels="$REPRO_HOME/wheels"
mkdir -p "$wheels"
wheel=$(ls "$wheels"/torch-"$VERSION"-*.whl 2>/dev/null | head -n 1 || true)
if [[ -z "$wheel" ]]; then
  log "downloading the torch $VERSION wheel (about 530 MB, no dependencies)"
  "$REPRO_VENV/bin/pip" download -q --disable-pip-version-check --no-deps \
    -d "$wheels" "torch==$VERSION"
  wheel=$(ls "$wheels"/torch-"$VERSION"-*.whl | head -n 1)
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
log "unpacking its headers and version.py"
"$REPRO_VENV/bin/python" - "$wheel" "$scratch/libtorch" <<'PY'
import sys, zipfile, os
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for n in z.namelist():
        if n.startswith("torch/include/") or n == "torch/version.py":
            z.extract(n, out)
os.makedirs(os.path.join(out, "torch", "lib"), exist_ok=True)
PY
log "copying the working tree"
mkdir "$scratch/tree"
git ls-files -z --cached --others --exclude-standard |
  tar --null -T - -cf - | tar -xf - -C "$scratch/tree"
cd "$scratch/tree"
REPRO_HOME="$scratch/home" REPRO_TORCH="$VERSION" REPRO_LIBTORCH="$scratch/libtorch/torch" \
  REPRO_SKIP_APT=1 REPRO_SETUP=minimal bash ci/setup.sh
tch=$(awk '/^name = "tch"$/ { getline; gsub(/[^0-9.]/, ""); print; exit }' Cargo.lock)
log "cargo check of the trainer against libtorch $VERSION (tch $tch)"
(
  # the copy's environment, in a target directory of its own: cargo names
  # a path crate's build by its path inside the workspace, so the copy's
  # crates would share the checkout's builds, and their build scripts,
  # rerun here with the copy's paths, would rebuild and relink the
  # checkout's test binaries while the tests run from them
  target="${CARGO_TARGET_DIR:-$REPRO_HOME/target}-torch-check"
  # shellcheck disable=SC1091
  source "$scratch/home/env.sh"
  export CARGO_TARGET_DIR="$target"
  cargo check --locked -p repro-trainer --all-targets
)
log "the trainer compiles against libtorch $VERSION (tch $tch)"
