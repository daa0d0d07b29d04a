#!/usr/bin/env bash
# Sets up the machine (idempotent) and runs the main job on its default:
# `repro run`, the `quickstart` experiment (Moniqua against its baselines at
# 1 bit on Fashion-MNIST, 8 in-process workers, then Theorem 1 in the
# simulator; about 12 minutes), results in results/quickstart/. Extra
# arguments go to `repro run`, e.g. `bash ci/main.sh figure1`. The trainer
# `repro-train`, which in-process and MPI runs start, is built beside `repro`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh
setup_s=$SECONDS
# shellcheck disable=SC1091
source "${REPRO_HOME:-$HOME/.cache/repro}/env.sh"
cargo build --release --locked -p repro -p repro-trainer
echo "[main] set-up took ${setup_s} s, the build $((SECONDS - setup_s)) s; now repro run" >&2
exec "${CARGO_TARGET_DIR}/release/repro" run "$@"
