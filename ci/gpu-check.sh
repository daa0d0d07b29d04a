#!/usr/bin/env bash
# The trainer on a GPU machine, prepared here and run there in one call.
#
#   bash ci/gpu-check.sh pack [--torch VERSION] [--dir DIR] [--profile release|dev]
#       On a CPU machine like ours (network to crates.io and PyPI): builds
#       `repro` and `repro-train` for libtorch VERSION (default 2.11.0, the
#       PyTorch of the lent GPU machines), from the committed HEAD (in the
#       checkout and its target when the checkout is clean and VERSION is
#       this machine's libtorch, else in a scratch worktree), strips and
#       gzips them, and writes a bundle with
#       the manifest (experiments/gpu-check.yaml), the PyTorch step
#       reference (ci/gpu_step_bench.py) and this script to DIR (default
#       scratch/gpu-check/bundle). It refuses a bundle over 60 MiB. The
#       binaries are the release build; `--profile dev` packs the debug
#       build instead (the one the tests built; a rehearsal's).
#   bash BUNDLE/ci/gpu-check.sh run --out OUT [--rehearse]
#       On the GPU machine (no network needed; PyTorch and OpenMPI present):
#       libtorch and the device found, the data generated, then D-PSGD and
#       Moniqua at 1 bit, ResNet20 at batch 128, 8 workers: in process, on
#       the `mpi` backend (ranks sharing the GPU, or one per GPU where there
#       are several), and D-PSGD on one worker; then in process again with
#       each step's phases timed (where the time goes); GPU utilisation and
#       memory sampled; the PyTorch step reference beside ours. Writes six files to
#       OUT: check.log, summary.md, summary.json, gpu-samples.csv,
#       torch-bench.jsonl, results.tar.gz. About 4 minutes on an H100.
#       --rehearse runs the same on a CPU, at the manifest's `smoke` scale
#       (seconds).
#   bash ci/gpu-check.sh rehearse [--out OUT] [--profile release|dev]
#       pack for this machine's libtorch, then run --rehearse: what CI runs
#       (with `--profile dev`: the binaries the tests built, so CI compiles
#       no release build; the release build is what `pack` sends to a GPU).
#
# Exit status: 0 the check ran and every run completed; 1 a step failed
# (check.log says which); 2 bad usage or a missing prerequisite.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
log() { printf '[gpu-check] %s\n' "$*" >&2; }
fail() { printf '[gpu-check] %s\n' "$*" >&2; exit "${2:-1}"; }
MAX_BUNDLE_MIB=60

pack() {
  local torch="2.11.0" dir="" root profile=release
  while (($#)); do
    case "$1" in
      --torch) torch="$2"; shift 2 ;;
      --dir) dir="$2"; shift 2 ;;
      --profile) profile="$2"; shift 2 ;;
      *) fail "pack: unknown argument $1" 2 ;;
    esac
  done
  local built_dir
  case "$profile" in
    release) built_dir=release ;;
    dev) built_dir=debug ;;
    *) fail "pack: --profile $profile: use release or dev" 2 ;;
  esac
  root="$(cd "$HERE/.." && pwd)"
  dir="${dir:-$root/scratch/gpu-check/bundle}"
  local home="${REPRO_HOME:-$HOME/.cache/repro}"
  bash "$root/ci/setup.sh"
  # shellcheck disable=SC1091
  source "$home/env.sh"
  local default
  default=$(awk '!/^#/ && NF >= 2 { print $1; exit }' "$root/crates/repro-trainer/libtorch-versions")
  local scratch tree target
  scratch=$(mktemp -d)
  # shellcheck disable=SC2064
  trap "rm -rf '$scratch'" EXIT
  if [[ "$torch" == "$default" && -z "$(git --no-optional-locks -C "$root" status --porcelain)" ]]; then
    # the checkout is HEAD and builds for this machine's libtorch: its own
    # release build, in its own target (the next pack reuses it)
    tree="$root"
    target="$CARGO_TARGET_DIR"
    log "building repro and repro-train in the checkout ($profile profile; release: 8 to 12 minutes from an empty target)"
    (cd "$tree" && cargo build --profile "$profile" --locked -p repro -p repro-trainer)
  else
    [[ -z "$(git --no-optional-locks -C "$root" status --porcelain --untracked-files=no)" ]] ||
      log "the working tree has uncommitted changes: the bundle is built from HEAD without them"
    tree="$scratch/tree"
    git -C "$root" worktree add -q --detach "$tree" HEAD
    # shellcheck disable=SC2064
    trap "git -C '$root' worktree remove --force '$tree' >/dev/null 2>&1 || true; rm -rf '$scratch'" EXIT
    local torch_env=(REPRO_TORCH="$torch" REPRO_SKIP_APT=1)
    if [[ "$torch" == "$default" ]]; then
      # this machine's torch, as ci/setup.sh installed it
      torch_env+=(REPRO_LIBTORCH="$("$REPRO_VENV/bin/python" -c 'import os, torch; print(os.path.dirname(torch.__file__))')")
    else
      # the wheel's libraries to link against, and CUDA's beside them: a
      # virtualenv of torch==VERSION with its dependencies, kept for next time
      local venv="$home/torch-$torch"
      if ! "$venv/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$torch')" 2>/dev/null; then
        log "installing torch==$torch with its CUDA libraries into $venv (a few GB, about 2 minutes)"
        python3 -m venv "$venv"
        "$venv/bin/pip" install -q --disable-pip-version-check "torch==$torch" numpy
      fi
      torch_env+=(REPRO_LIBTORCH="$("$venv/bin/python" -c 'import os, torch; print(os.path.dirname(torch.__file__))')")
    fi
    # its own target: the worktree's binaries must not replace the
    # checkout's in the shared one
    target="$home/target-gpu-check"
    log "building repro and repro-train for libtorch $torch from HEAD in a worktree (release; 8 to 12 minutes from an empty target)"
    (
      cd "$tree"
      env "${torch_env[@]}" REPRO_HOME="$scratch/home" REPRO_SETUP=minimal bash ci/setup.sh
      # shellcheck disable=SC1091
      source "$scratch/home/env.sh"
      CARGO_TARGET_DIR="$target" cargo build --profile "$profile" --locked -p repro -p repro-trainer
    )
  fi
  (
    cd "$tree"
    rm -rf "$dir"
    mkdir -p "$dir/bin" "$dir/experiments" "$dir/ci" "$dir/crates/repro-runlog/src"
    for b in repro repro-train; do
      strip -o "$dir/bin/$b" "$target/$built_dir/$b"
      gzip -9 "$dir/bin/$b"
    done
    cp experiments/gpu-check.yaml "$dir/experiments/"
    cp ci/gpu-check.sh ci/gpu_step_bench.py ci/gpu_check_summary.py "$dir/ci/"
    # the step reference checks its models' sizes against this table
    cp crates/repro-runlog/src/models.rs "$dir/crates/repro-runlog/src/"
    {
      echo "bundle of ci/gpu-check.sh, packed $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
      echo "commit $(git rev-parse HEAD)"
      echo "profile $profile"
      echo "libtorch $torch (tch $(awk '/^name = "tch"$/ { getline; gsub(/[^0-9.]/, ""); print; exit }' Cargo.lock))"
      echo "run it: bash ci/gpu-check.sh run --out OUT"
    } >"$dir/BUNDLE"
  )
  local mib
  mib=$(du -sm "$dir" | cut -f1)
  ((mib <= MAX_BUNDLE_MIB)) || fail "the bundle is $mib MiB, over $MAX_BUNDLE_MIB MiB" 1
  log "bundle: $dir, $mib MiB"
  cat "$dir/BUNDLE" >&2
}

# the python with torch: the one on PATH that imports it
torch_python() {
  local p
  for p in "${REPRO_VENV:+$REPRO_VENV/bin/python}" python3 python; do
    [[ -n "$p" ]] && "$p" -c 'import torch' 2>/dev/null && { echo "$p"; return 0; }
  done
  return 1
}

run_check() {
  local out="" rehearse=0 scale=gpu
  while (($#)); do
    case "$1" in
      --out) out="$2"; shift 2 ;;
      --rehearse) rehearse=1; scale=smoke; shift ;;
      *) fail "run: unknown argument $1" 2 ;;
    esac
  done
  [[ -n "$out" ]] || fail "run: --out OUT is required" 2
  mkdir -p "$out"
  out="$(cd "$out" && pwd)"
  exec > >(tee -a "$out/check.log") 2>&1
  local bundle work
  bundle="$(cd "$HERE/.." && pwd)"
  [[ -f "$bundle/bin/repro.gz" ]] || fail "no bundle at $bundle (bin/repro.gz): run this script from a bundle that \`pack\` wrote" 2
  work=$(mktemp -d)
  log "bundle $bundle, work $work, scale $scale"
  cat "$bundle/BUNDLE" || true
  mkdir -p "$work/bin" "$work/experiments"
  for b in repro repro-train; do
    gzip -dc "$bundle/bin/$b.gz" >"$work/bin/$b"
    chmod +x "$work/bin/$b"
  done
  cp "$bundle/experiments/gpu-check.yaml" "$work/experiments/"
  local py
  py=$(torch_python) || fail "no python with torch here: the check needs the machine's PyTorch" 2
  local torch_lib
  torch_lib=$("$py" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
  export LD_LIBRARY_PATH="$torch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  log "python $py, torch $("$py" -c 'import torch; print(torch.__version__)'), libtorch from $torch_lib"
  if ldd "$work/bin/repro-train" | grep -q "not found"; then
    ldd "$work/bin/repro-train" | grep "not found" >&2
    fail "repro-train misses shared libraries here (above): libtorch's come from the machine's PyTorch, libmpi from OpenMPI (libopenmpi3)" 2
  fi
  "$work/bin/repro-train" --version | tee "$work/version.txt"
  local built loaded
  built=$(sed -n 's/^libtorch: built for \([^ +]*\).*/\1/p' "$work/version.txt")
  loaded=$(sed -n 's/.*; loaded \([^ +]*\).*/\1/p' "$work/version.txt")
  [[ -n "$built" && "$built" == "$loaded" ]] ||
    fail "repro-train was built for libtorch $built but loaded $loaded: pack the bundle with --torch $loaded" 2
  local gpus=0
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv || true
    gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  fi
  if ((rehearse == 0)); then
    grep -q "^cuda: [1-9]" "$work/version.txt" ||
      fail "libtorch sees no CUDA device here ($(grep '^cuda:' "$work/version.txt")); on a CPU machine use --rehearse" 2
  fi
  # GPU utilisation and memory, four times a second, while the runs go
  local sampler=""
  if ((gpus > 0)); then
    nvidia-smi --query-gpu=timestamp,index,utilization.gpu,memory.used --format=csv,noheader,nounits \
      -lms 250 >"$out/gpu-samples.csv" &
    sampler=$!
  else
    echo "no GPU: nothing sampled" >"$out/gpu-samples.csv"
  fi
  local status=0
  log "generating CIFAR-10-layout data"
  "$work/bin/repro" data fetch cifar10-like --dir "$work/data" -q || status=1
  # the runs: name, extra arguments
  local runs=(
    "in-process-1|--backend in-process params.workers=1 params.topology=complete grid.algorithm=[d-psgd]"
    "in-process-8|--backend in-process"
    "mpi-8|--backend mpi"
    "phases-8|--backend in-process params.profile_phases=true"
  )
  local spec name args
  mkdir -p "$work/results"
  for spec in "${runs[@]}"; do
    name="${spec%%|*}"
    args="${spec#*|}"
    log "run $name: repro run gpu-check --scale $scale $args"
    local t0=$SECONDS
    # shellcheck disable=SC2086
    if (cd "$work" && "$work/bin/repro" run gpu-check --scale "$scale" --out "$work/results/$name" \
      $args "scales.$scale.data_dir=$work/data"); then
      log "run $name: done in $((SECONDS - t0)) s"
    else
      log "run $name: FAILED after $((SECONDS - t0)) s"
      status=1
    fi
    echo "$name $((SECONDS - t0))" >>"$work/results/durations.txt"
  done
  log "the PyTorch step reference"
  local bench=(--models resnet20 --batch 128 --steps 50 --warmup 10 --ranks 8)
  ((rehearse)) && bench=(--device cpu --models resnet8 --batch 8 --steps 2 --warmup 1 --ranks 2)
  (cd "$bundle" && "$py" ci/gpu_step_bench.py "${bench[@]}") >"$out/torch-bench.jsonl" || {
    log "the PyTorch step reference FAILED"
    status=1
  }
  [[ -n "$sampler" ]] && kill "$sampler" 2>/dev/null || true
  cp "$work/version.txt" "$work/results/" || true
  "$py" "$bundle/ci/gpu_check_summary.py" --results "$work/results" --bench "$out/torch-bench.jsonl" \
    --samples "$out/gpu-samples.csv" --scale "$scale" --out "$out" || status=1
  tar -czf "$out/results.tar.gz" -C "$work" results
  rm -rf "$work"
  log "done (status $status): $(ls "$out" | paste -sd' ')"
  return "$status"
}

case "${1:-}" in
  pack) shift; pack "$@" ;;
  run) shift; run_check "$@" ;;
  rehearse)
    shift
    out="" profile=release
    while (($#)); do
      case "$1" in
        --out) out="$2"; shift 2 ;;
        --profile) profile="$2"; shift 2 ;;
        *) fail "rehearse: unknown argument $1" 2 ;;
      esac
    done
    [[ -n "$out" ]] || out=$(mktemp -d)
    root="$(cd "$HERE/.." && pwd)"
    default=$(awk '!/^#/ && NF >= 2 { print $1; exit }' "$root/crates/repro-trainer/libtorch-versions")
    bundle=$(mktemp -d)
    pack --torch "$default" --dir "$bundle/bundle" --profile "$profile"
    # shellcheck disable=SC1091
    source "${REPRO_HOME:-$HOME/.cache/repro}/env.sh"
    rc=0
    bash "$bundle/bundle/ci/gpu-check.sh" run --out "$out" --rehearse || rc=$?
    files=$(find "$out" -type f | wc -l)
    ((files <= 8)) || { log "the check wrote $files files, over 8"; rc=1; }
    rm -rf "$bundle"
    exit "$rc"
    ;;
  *) sed -n '2,28p' "$0" >&2; exit 2 ;;
esac
