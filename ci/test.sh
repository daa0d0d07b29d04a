#!/usr/bin/env bash
# Sets up the machine (idempotent) and runs every check CI runs:
# rustfmt, clippy with -D warnings, and the workspace tests (debug profile).
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh
# shellcheck disable=SC1091
source "${REPRO_HOME:-$HOME/.cache/repro}/env.sh"
echo "[test] cargo fmt --check" >&2
cargo fmt --all -- --check
echo "[test] cargo clippy -D warnings" >&2
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "[test] cargo test" >&2
# the tests that need root (network namespaces, tc) must run here, not skip
REPRO_REQUIRE_ROOT_TESTS=1 cargo test --workspace --locked
echo "[test] all checks passed" >&2
