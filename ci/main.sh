#!/usr/bin/env bash
# Sets up the machine (idempotent) and runs the main job on its default:
# `repro run` (the `smoke` experiment: every algorithm in the simulator),
# results in results/smoke/. Extra arguments go to `repro run`, e.g.
# `bash ci/main.sh figure1`: the trainer `repro-train`, which MPI and
# in-process runs start, is built beside `repro` for that.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh
# shellcheck disable=SC1091
source "${REPRO_HOME:-$HOME/.cache/repro}/env.sh"
cargo build --release --locked -p repro -p repro-trainer
exec "${CARGO_TARGET_DIR}/release/repro" run "$@"
