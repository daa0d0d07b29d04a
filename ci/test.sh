#!/usr/bin/env bash
# Sets up the machine (idempotent) and runs every check CI runs:
# rustfmt, clippy with -D warnings, the workspace tests (debug profile), the
# frame fuzz target (ci/fuzz.sh: built, corpus replayed, 60 s of fuzzing),
# the trainer compiled against every other libtorch it supports
# (ci/torch-check.sh), and the GPU check's bundle built and rehearsed on
# the CPU (ci/gpu-check.sh rehearse).
# Every test binary runs even when one fails (--no-fail-fast); the last line
# counts passed, failed and skipped tests. Tests that need root must run here
# (REPRO_REQUIRE_ROOT_TESTS=1 makes them fail, not skip, without root); any
# test that skips prints a `SKIPPED: <test>: <why>` line, counted at the end.
# Each step's time is printed as it ends, and as a table at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=()
step_start=$SECONDS
# records the step that just ended: step_done NAME
step_done() {
  local took=$((SECONDS - step_start))
  steps+=("$1|$took")
  printf '[test] %s took %d s\n' "$1" "$took" >&2
  step_start=$SECONDS
}
# the steps' times as a table
step_table() {
  printf '[test] | step | seconds |\n[test] |---|---|\n' >&2
  local s
  for s in "${steps[@]}"; do
    printf '[test] | %s | %s |\n' "${s%%|*}" "${s##*|}" >&2
  done
  printf '[test] | total | %d |\n' "$SECONDS" >&2
}
bash ci/setup.sh
step_done "set-up"
# shellcheck disable=SC1091
source "${REPRO_HOME:-$HOME/.cache/repro}/env.sh"
echo "[test] cargo fmt --check" >&2
cargo fmt --all -- --check
step_done "cargo fmt"
echo "[test] cargo clippy -D warnings" >&2
cargo clippy --workspace --all-targets --locked -- -D warnings
step_done "cargo clippy"
echo "[test] cargo test --no-fail-fast" >&2
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
set +e
REPRO_REQUIRE_ROOT_TESTS=1 cargo test --workspace --locked --no-fail-fast 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
step_done "cargo test"
# one line for the whole run: sums of every binary's `test result:` line
summary=$(awk '
  /^test result: / {
    binaries++
    for (i = 1; i <= NF; i++) {
      w = $i; sub(/[;,.]$/, "", w)
      if ($(i + 1) ~ /^passed/) passed += w
      if ($(i + 1) ~ /^failed/) failed += w
      if ($(i + 1) ~ /^ignored/) ignored += w
    }
  }
  /^SKIPPED: / { skipped++ }
  END {
    printf "%d passed, %d failed, %d ignored, %d skipped, in %d test binaries",
      passed, failed, ignored, skipped, binaries
  }' "$log")
grep '^SKIPPED: ' "$log" >&2 || true
# the frame fuzz target: built, its corpus replayed, then a minute of fuzzing
if [[ $rc -eq 0 ]]; then
  set +e
  bash ci/fuzz.sh
  rc=$?
  set -e
  [[ $rc -eq 0 ]] || summary="$summary; ci/fuzz.sh failed"
  step_done "fuzz"
fi
# every libtorch but the default: the trainer compiles against it
if [[ $rc -eq 0 ]]; then
  for version in $(awk '!/^#/ && NF >= 2 { print $1 }' crates/repro-trainer/libtorch-versions | tail -n +2); do
    set +e
    bash ci/torch-check.sh "$version"
    rc=$?
    set -e
    [[ $rc -eq 0 ]] || { summary="$summary; ci/torch-check.sh $version failed"; break; }
    step_done "torch-check $version"
  done
fi
# the GPU check's bundle built and run on this CPU (ci/gpu-check.sh)
if [[ $rc -eq 0 ]]; then
  set +e
  bash ci/gpu-check.sh rehearse
  rc=$?
  set -e
  [[ $rc -eq 0 ]] || summary="$summary; ci/gpu-check.sh rehearse failed"
  step_done "gpu-check rehearse"
fi
# which codec SIMD levels this CPU let the tests compare (the rest: not run)
levels=$(cargo test -q --locked -p repro-codec --lib every_simd_level_rejects -- --nocapture 2>&1 |
  sed -n 's/^SIMD levels exercised: //p' | head -n 1)
echo "[test] codec SIMD levels compared with the portable kernels: ${levels:-unknown}" >&2
step_done "SIMD levels"
step_table
if [[ $rc -eq 0 ]]; then
  echo "[test] all checks passed: $summary" >&2
else
  grep -E '^    [^ ]+$|^error: [0-9]+ targets? failed' "$log" | tail -n 40 >&2 || true
  echo "[test] FAILED (cargo test exit $rc): $summary" >&2
fi
exit "$rc"
