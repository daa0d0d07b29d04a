#!/usr/bin/env bash
# Sets up the machine (idempotent) and runs every check CI runs:
# rustfmt, clippy with -D warnings, the workspace tests (debug profile, run by
# cargo-nextest, .config/nextest.toml; doc tests by cargo test --doc), the
# frame fuzz target (ci/fuzz.sh: built, corpus replayed, 5 million inputs),
# the trainer compiled against every other libtorch it supports
# (ci/torch-check.sh), and the GPU check's bundle packed from the binaries
# the tests built and rehearsed on the CPU (ci/gpu-check.sh rehearse
# --profile dev; no release build: on two cores from an empty target it
# was 1,230 s of the work, and the critical path). The committed record's
# own checks (tests/record.rs) run apart: their verdict is said, and fails
# nothing. While the tests run, the libtorch checks (compile only), the
# record's checks and the fuzzing (a fixed number of inputs) run beside
# them at low priority, in that order; the GPU-check rehearsal starts
# after the tests. The MPI and network tests, one at a time, leave a core
# idle for them.
# Every test runs even when one fails (--no-fail-fast); the last line counts
# passed, failed and skipped tests. Tests that need root must run here
# (REPRO_REQUIRE_ROOT_TESTS=1 makes them fail, not skip, without root); a
# test that skips writes `<test>: <why>` to REPRO_SKIPPED_LOG, printed as
# `SKIPPED: ...` lines and counted at the end.
# Each step's time is printed as it ends, and as a table at the end.
#
#   bash ci/test.sh           # every check: what CI runs
#   bash ci/test.sh --quick   # the inner loop: leaves out what it names
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
case "${1:-}" in
  "") ;;
  --quick) quick=1 ;;
  *) echo "usage: bash ci/test.sh [--quick]" >&2; exit 2 ;;
esac
# what --quick leaves out, said at its start and its end
LEFT_OUT="the paper scales' rehearsal (tests/rehearsal.rs), the record's checks (tests/record.rs), the doc tests, the fuzzing (ci/fuzz.sh), the libtorch checks (ci/torch-check.sh), the GPU-check rehearsal (ci/gpu-check.sh rehearse) and the SIMD-level report"
((quick)) && echo "[test] --quick leaves out $LEFT_OUT: run bash ci/test.sh before landing" >&2
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
echo "[test] cargo nextest run (every test binary, two tests at a time)" >&2
log="$(mktemp)"
skipped_log="$(mktemp)"
beside="$(mktemp -d)"
trap 'rm -rf "$log" "$skipped_log" "$beside"' EXIT
# what runs beside the tests: compiling, reading the record and fuzzing
# the codec only (no MPI job, no network, no timing), niced so that the
# tests keep the CPU they use; each part writes `NAME|seconds|status` to
# $beside/steps
beside_tests() {
  # after nextest has listed its binaries (its cargo call takes the lock
  # this job's cargo calls take) and started the tests
  local t=$SECONDS
  until grep -qE '^ +Starting [0-9]+ tests|^error' "$log" || ((SECONDS - t > 600)); do
    sleep 1
  done
  local version rc
  for version in $(awk '!/^#/ && NF >= 2 { print $1 }' crates/repro-trainer/libtorch-versions | tail -n +2); do
    t=$SECONDS
    bash ci/torch-check.sh "$version"
    rc=$?
    echo "torch-check $version (beside the tests)|$((SECONDS - t))|$rc" >>"$beside/steps"
    ((rc == 0)) || break
  done
  # the committed record against the manifests and the documents
  t=$SECONDS
  cargo nextest run --workspace --locked -E 'binary(record)' >"$beside/record.log" 2>&1
  echo $? >"$beside/record.rc"
  # (their verdict is said below, and fails nothing)
  echo "record checks (beside the tests)|$((SECONDS - t))|0" >>"$beside/steps"
  # the frame fuzz target: built, its corpus replayed, then 5 million
  # inputs (60 s alone here; the same amount however busy the machine is)
  t=$SECONDS
  FUZZ_RUNS=5000000 bash ci/fuzz.sh >"$beside/fuzz.log" 2>&1
  echo "fuzz (beside the tests)|$((SECONDS - t))|$?" >>"$beside/steps"
}
set +e
beside_pid=""
doc_rc=0
if ((quick == 0)); then
  # the test binaries and the doc tests first, so that the build beside
  # the tests never holds cargo's lock when these need it (nextest does
  # not run doc tests: cargo test does)
  cargo nextest run --workspace --locked --no-run
  echo "[test] cargo test --doc" >&2
  cargo test --workspace --locked --doc 2>&1 | tee -a "$log"
  doc_rc=${PIPESTATUS[0]}
  step_done "test build and doc tests"
  nice -n 19 bash -c "$(declare -f beside_tests); beside=$beside; log=$log; beside_tests" >"$beside/log" 2>&1 &
  beside_pid=$!
fi
# the tests (.config/nextest.toml: the MPI and network tests one at a time)
# the code's tests; the record's checks (tests/record.rs) run beside them
filter=(-E 'not binary(record)')
((quick)) && filter=(-E 'not binary(record) & not binary(rehearsal)')
REPRO_REQUIRE_ROOT_TESTS=1 REPRO_SKIPPED_LOG="$skipped_log" \
  cargo nextest run --workspace --locked --no-fail-fast "${filter[@]}" 2>&1 | tee -a "$log"
rc=${PIPESTATUS[0]}
((rc == 0)) && rc=$doc_rc
step_done "cargo nextest"
set -e
# one line for the whole run: nextest's summary and the doc tests' counts
summary=$(awk -v skipped="$(grep -c . "$skipped_log" || true)" '
  /^ +Summary \[|^test result: / {
    for (i = 1; i <= NF; i++) {
      w = $i; sub(/[;,.]$/, "", w)
      if ($(i + 1) ~ /^passed/) passed += w
      if ($(i + 1) ~ /^failed/) failed += w
      if ($(i + 1) ~ /^ignored/) ignored += w
    }
  }
  END {
    printf "%d passed, %d failed, %d ignored, %d skipped", passed, failed, ignored, skipped
  }' "$log")
sed 's/^/SKIPPED: /' "$skipped_log" >&2
# the GPU check's bundle, packed from the debug binaries the tests built,
# run on this CPU (ci/gpu-check.sh; the fuzzing may go on beside it)
if [[ $rc -eq 0 && $quick -eq 0 ]]; then
  set +e
  bash ci/gpu-check.sh rehearse --profile dev
  gpu_rc=$?
  set -e
  [[ $gpu_rc -eq 0 ]] || summary="$summary; ci/gpu-check.sh rehearse failed"
  rc=$gpu_rc
  step_done "gpu-check rehearse"
fi
# what ran beside the tests: its steps, the fuzzing's log, and the whole
# log where a step failed
if [[ -n "$beside_pid" ]]; then
  wait "$beside_pid"
  step_done "waiting for the fuzzing"
  while IFS='|' read -r name took status; do
    steps+=("$name|$took")
    printf '[test] %s took %d s\n' "$name" "$took" >&2
    if [[ "$status" != 0 ]]; then
      tail -n 40 "$beside/log" >&2
      summary="$summary; ${name% (beside the tests)} failed"
      ((rc == 0)) && rc=1
    fi
  done <"$beside/steps"
  cat "$beside/fuzz.log" >&2 2>/dev/null || true
  # the record's verdict: said, never failing CI (a rerun committed in
  # parts is inconsistent until it ends; its last commit runs `cargo
  # nextest run --test record`)
  if [[ "$(cat "$beside/record.rc" 2>/dev/null)" == 0 ]]; then
    record="the committed record is consistent"
  else
    grep -E '^ +FAIL \[|panicked at|^ +[^ ].*(differs|says|holds runs)' "$beside/record.log" | head -n 20 >&2 || true
    record="the committed record is NOT consistent (a rerun in progress?): cargo nextest run --test record"
  fi
  record="$record ($(sed -n 's/^ *Summary \[[^]]*\] *//p' "$beside/record.log" | tail -n 1))"
  echo "[test] $record" >&2
fi
# which codec SIMD levels this CPU let the tests compare (the rest: not
# run), from that test run again with its output shown (built already)
if ((quick == 0)); then
  levels=$(cargo nextest run --workspace --locked --no-capture \
    -E 'package(repro-codec) & kind(lib) & test(every_simd_level_rejects)' 2>&1 |
    sed -n 's/^SIMD levels exercised: //p' | head -n 1)
  echo "[test] codec SIMD levels compared with the portable kernels: ${levels:-unknown}" >&2
  step_done "SIMD levels"
fi
step_table
if [[ $rc -eq 0 ]]; then
  echo "[test] all checks passed: $summary" >&2
  ((quick)) || echo "[test] $record" >&2
  ((quick)) && echo "[test] --quick left out $LEFT_OUT" >&2
else
  grep -E '^ +(FAIL|TIMEOUT|SIGSEGV|SIGABRT) \[|^    [^ ]+$|^error: ' "$log" | tail -n 40 >&2 || true
  echo "[test] FAILED (exit $rc): $summary" >&2
fi
exit "$rc"
