#!/usr/bin/env bash
# Sets up the machine (idempotent) and runs the main job on its default:
# `repro run` (the `smoke` experiment: every algorithm in the simulator),
# results in results/smoke/. Extra arguments go to `repro run`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh
# shellcheck disable=SC1091
source "${REPRO_HOME:-$HOME/.cache/repro}/env.sh"
cargo run --release --locked -p repro -- run "$@"
