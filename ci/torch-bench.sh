#!/usr/bin/env bash
# Times Moniqua encode/decode in PyTorch tensor ops against ours (see ci/torch_codec_bench.py).
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh
# shellcheck disable=SC1091
source "${REPRO_HOME:-$HOME/.cache/repro}/env.sh"
exec "$REPRO_VENV/bin/python" ci/torch_codec_bench.py "$@"
