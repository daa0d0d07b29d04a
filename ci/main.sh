#!/usr/bin/env bash
# Sets up the machine (idempotent) and runs the main job on its default.
# Today the main job is `repro demo`: one model-sized exchange through every
# codec with real frames. Extra arguments go to `repro demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh
# shellcheck disable=SC1091
source "${REPRO_HOME:-$HOME/.cache/repro}/env.sh"
cargo run --release --locked -p repro -- demo "$@"
