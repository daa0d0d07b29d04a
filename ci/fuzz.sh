#!/usr/bin/env bash
# Builds the frame_decode fuzz target with coverage instrumentation (stable
# Rust: the sanitizer-coverage passes cargo-fuzz uses, without a sanitizer),
# replays the committed corpus, then fuzzes for FUZZ_SECONDS (default 60)
# from a copy of it, or for FUZZ_RUNS inputs where that is set (the same
# amount of fuzzing however busy the machine is). A crash fails the script
# and leaves its input in crates/repro-codec/fuzz/artifacts/. ci/test.sh
# calls it with FUZZ_RUNS=5000000 (60 s alone on a 2-core machine).
#
#   bash ci/fuzz.sh                # after ci/setup.sh
#   FUZZ_SECONDS=600 bash ci/fuzz.sh
#   FUZZ_RUNS=5000000 bash ci/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/../crates/repro-codec/fuzz"
seconds="${FUZZ_SECONDS:-60}"
target_dir="${CARGO_TARGET_DIR:-$HOME/.cache/repro/target}-fuzz"
triple="$(rustc -vV | sed -n 's/^host: //p')"
# an explicit --target keeps these flags off build scripts and proc macros
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares -Cdebug-assertions -Coverflow-checks"
echo "[fuzz] building frame_decode (coverage-instrumented, $triple)" >&2
CARGO_TARGET_DIR="$target_dir" cargo build --locked --release --target "$triple" --bin frame_decode
bin="$target_dir/$triple/release/frame_decode"
corpus=(corpus/frame_decode/*)
echo "[fuzz] replaying ${#corpus[@]} corpus inputs" >&2
"$bin" "${corpus[@]}" 2>/dev/null
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp corpus/frame_decode/* "$work/"
mkdir -p artifacts
if [[ -n "${FUZZ_RUNS:-}" ]]; then
  echo "[fuzz] fuzzing ${FUZZ_RUNS} inputs" >&2
  budget=(-runs="$FUZZ_RUNS")
else
  echo "[fuzz] fuzzing for ${seconds} s" >&2
  budget=(-max_total_time="$seconds")
fi
"$bin" "${budget[@]}" -max_len=4096 -artifact_prefix=artifacts/ "$work" 2>"$work.log" || {
  tail -n 40 "$work.log" >&2
  echo "[fuzz] FAILED: a crashing input is in crates/repro-codec/fuzz/artifacts/" >&2
  exit 1
}
grep -E '^Done [0-9]+ runs' "$work.log" | sed 's/^/[fuzz] /' >&2
rm -f "$work.log"
