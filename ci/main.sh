#!/usr/bin/env bash
# Sets up the machine (idempotent) and runs the main job on its default:
# `repro run`, the `quickstart` experiment (Moniqua against its baselines at
# 1 bit on Fashion-MNIST, 8 in-process workers, then Theorem 1 in the
# simulator; about 5 minutes), into a run directory of its own,
# runs/quickstart/cpu/<time>/. It ends with `repro verify`'s answer: does
# this run reproduce the committed record, results/quickstart/? Extra
# arguments go to `repro run`, e.g. `bash ci/main.sh figure1`. The trainer
# `repro-train`, which in-process and MPI runs start, is built beside `repro`;
# `repro` is linked into a directory on the PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
# what running needs, no more: the tests' tools (nextest, Chromium, Slurm,
# the exporters' readers) come with `bash ci/test.sh`
REPRO_SETUP="${REPRO_SETUP:-run}" bash ci/setup.sh
setup_s=$SECONDS
# shellcheck disable=SC1091
source "${REPRO_HOME:-$HOME/.cache/repro}/env.sh"
cargo build --release --locked -p repro -p repro-trainer
build_s=$((SECONDS - setup_s))
repro="${CARGO_TARGET_DIR}/release/repro"

# `repro` on the PATH: a link in the first of these directories that the
# PATH names and this user may write; else in ~/.local/bin, with the line
# that puts it on the PATH. The trainer is found beside the link's target.
linked=""
for dir in "$HOME/.local/bin" "$HOME/bin" /usr/local/bin; do
  case ":$PATH:" in *":$dir:"*) ;; *) continue ;; esac
  if [ -d "$dir" ] && [ -w "$dir" ]; then
    ln -sfn "$repro" "$dir/repro"
    linked="$dir/repro"
    break
  fi
done
if [ -z "$linked" ]; then
  mkdir -p "$HOME/.local/bin"
  ln -sfn "$repro" "$HOME/.local/bin/repro"
  echo "[main] linked $HOME/.local/bin/repro; put it on your PATH: export PATH=\"\$HOME/.local/bin:\$PATH\"" >&2
else
  echo "[main] \`repro\` is on the PATH: $linked" >&2
fi

echo "[main] set-up took ${setup_s} s, the build ${build_s} s; now repro run" >&2
status=0
"$repro" run "$@" || status=$?
echo "[main] $((SECONDS - setup_s - build_s)) s for repro run; ${SECONDS} s in all" >&2
exit "$status"
