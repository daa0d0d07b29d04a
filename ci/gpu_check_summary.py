"""The figures of ci/gpu-check.sh's runs: summary.json and summary.md.

Reads each run's rank logs (results/<name>/raw/<run>/rank-*.jsonl), the
PyTorch step reference's JSON lines and the GPU samples, and writes what
issue 42 asks to compare:

- real seconds per iteration of each run: the slowest rank's `real_s` (its
  loop in real time, whatever clock the run kept) over its iterations;
- each worker's step as its clock charged it (`compute_s` of the step
  records, median over steps and workers): on a GPU in process, the wall
  time with the GPU to itself;
- the ratios: 8 in-process workers' iteration over 8 times one worker's
  step (target at most 1.2), our single-worker step over PyTorch's of the
  same structure (target at most 1), 8 MPI ranks sharing the device over
  8 in-process workers;
- GPU utilisation (mean) and memory in use (max) over the check.

    python3 ci/gpu_check_summary.py --results DIR --bench torch-bench.jsonl \
        --samples gpu-samples.csv --scale gpu --out OUT
"""

import argparse
import json
import statistics
import sys
from pathlib import Path


def read_jsonl(path):
    out = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass  # a rank killed mid-line
    return out


def run_figures(run_dir):
    """One run's figures from its rank logs."""
    ranks = sorted(run_dir.glob("rank-*.jsonl"))
    if not ranks:
        return None
    compute, comm, real, iterations, devices, statuses = [], [], [], [], [], []
    phases = {}
    algorithm = backend = None
    for path in ranks:
        records = read_jsonl(path)
        header = next((r for r in records if r.get("type") == "header"), {})
        config = header.get("config", {})
        provenance = header.get("provenance", {})
        algorithm = config.get("algorithm", algorithm)
        backend = provenance.get("backend", backend)
        devices.append(provenance.get("device", "?"))
        steps = [r for r in records if r.get("type") == "step"]
        # the first steps warm up (cuDNN's choices, the allocator)
        warm = steps[min(len(steps) // 5, 10):] or steps
        compute += [s["compute_s"] for s in warm]
        comm += [s["comm_s"] for s in warm]
        for s in warm:
            for key, value in (s.get("phases") or {}).items():
                phases.setdefault(key, []).append(value)
        end = next((r for r in records if r.get("type") == "end"), None)
        statuses.append(end.get("status", "?") if end else "unfinished")
        if end:
            iterations.append(end.get("iterations", 0))
            if end.get("real_s") is not None:
                real.append(end["real_s"])
    done = min(iterations) if iterations else 0
    per_iteration = max(real) / done if real and done else None
    return {
        "run": run_dir.name,
        "algorithm": algorithm,
        "backend": backend,
        "workers": len(ranks),
        "devices": sorted(set(devices)),
        "status": sorted(set(statuses)),
        "iterations": done,
        "real_s_per_iteration": per_iteration,
        "charged_step_s_median": statistics.median(compute) if compute else None,
        "comm_s_median": statistics.median(comm) if comm else None,
        "phases_s_median": {k: statistics.median(v) for k, v in phases.items()},
    }


def samples(path):
    util, mem = [], []
    if path.is_file():
        for line in path.read_text().splitlines():
            parts = [p.strip() for p in line.split(",")]
            if len(parts) >= 4:
                try:
                    util.append(float(parts[2]))
                    mem.append(float(parts[3]))
                except ValueError:
                    pass
    return {
        "samples": len(util),
        "gpu_utilisation_mean_pct": statistics.mean(util) if util else None,
        "gpu_memory_used_max_mib": max(mem) if mem else None,
    }


def ratio(a, b):
    return a / b if a is not None and b else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", type=Path, required=True)
    ap.add_argument("--bench", type=Path, required=True)
    ap.add_argument("--samples", type=Path, required=True)
    ap.add_argument("--scale", default="gpu")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    runs = {}
    for group in sorted(p for p in args.results.iterdir() if p.is_dir()):
        for run_dir in sorted((group / "raw").glob("*")):
            if run_dir.is_dir() and not run_dir.name.startswith("."):
                fig = run_figures(run_dir)
                if fig:
                    runs[f"{group.name}/{fig['algorithm']}"] = fig
    bench = read_jsonl(args.bench) if args.bench.is_file() else []
    versions = next((b for b in bench if "torch" in b), {})
    one_rank = next((b for b in bench if b.get("ranks_sharing") == 1), None)
    shared = next((b for b in bench if b.get("ranks_sharing", 1) > 1), None)
    version_file = args.results / "version.txt"

    def get(key, field):
        return runs.get(key, {}).get(field)

    single = get("in-process-1/d-psgd", "charged_step_s_median")
    eight = get("in-process-8/d-psgd", "real_s_per_iteration")
    mpi = get("mpi-8/d-psgd", "real_s_per_iteration")
    reference = one_rank["step_s_median_per_rank"] if one_rank else None
    summary = {
        "scale": args.scale,
        "trainer": version_file.read_text().strip() if version_file.is_file() else None,
        "pytorch": versions,
        "runs": list(runs.values()),
        "pytorch_reference": {"one_rank": one_rank, "ranks_sharing": shared},
        "gpu": samples(args.samples),
        "ratios": {
            "in_process_8_iteration_over_8_single_steps": ratio(eight, 8 * single if single else None),
            "our_single_step_over_pytorch_step": ratio(single, reference),
            "mpi_8_iteration_over_in_process_8_iteration": ratio(mpi, eight),
            "moniqua_over_dpsgd_in_process_8": ratio(
                get("in-process-8/moniqua", "real_s_per_iteration"), eight
            ),
        },
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")

    def ms(s):
        return f"{s * 1e3:.1f} ms" if s is not None else "-"

    def x(r):
        return f"{r:.2f}x" if r is not None else "-"

    lines = [
        f"# GPU check ({args.scale} scale)",
        "",
        "```",
        summary["trainer"] or "trainer version: not recorded",
        "```",
        "",
        f"PyTorch {versions.get('torch', '?')} (CUDA {versions.get('cuda', '?')}); "
        f"GPU samples: {summary['gpu']['samples']}, utilisation mean "
        f"{summary['gpu']['gpu_utilisation_mean_pct'] or '-'} %, memory in use at most "
        f"{summary['gpu']['gpu_memory_used_max_mib'] or '-'} MiB.",
        "",
        "| run | backend | workers | devices | status | iterations | real time per iteration "
        "| charged step per worker (median) | communication per step (median) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for key, r in runs.items():
        lines.append(
            f"| {key} | {r['backend']} | {r['workers']} | {' '.join(r['devices'])} | "
            f"{' '.join(r['status'])} | {r['iterations']} | {ms(r['real_s_per_iteration'])} | "
            f"{ms(r['charged_step_s_median'])} | {ms(r['comm_s_median'])} |"
        )
    profiled = [(k, r) for k, r in runs.items() if r["phases_s_median"]]
    if profiled:
        names = list(profiled[0][1]["phases_s_median"])
        lines += [
            "",
            "Where a worker's step goes (profiled runs, the device waited for at each phase's end; medians):",
            "",
            "| run | " + " | ".join(n.removesuffix("_s") for n in names) + " |",
            "|---|" + "---|" * len(names),
        ]
        for key, r in profiled:
            lines.append(f"| {key} | " + " | ".join(ms(r["phases_s_median"].get(n)) for n in names) + " |")
    lines += ["", "| PyTorch reference | ranks on the device | step per rank (median) | scatter | forward+backward "
              "| gather | host SGD |", "|---|---|---|---|---|---|---|"]
    for b in (one_rank, shared):
        if b:
            p = b["parts_s_median"]
            lines.append(
                f"| {b['model']} on {b['device']} | {b['ranks_sharing']} | {ms(b['step_s_median_per_rank'])} | "
                f"{ms(p.get('scatter'))} | {ms(p.get('forward_backward'))} | {ms(p.get('gather'))} | "
                f"{ms(p.get('host_sgd'))} |"
            )
    r = summary["ratios"]
    lines += [
        "",
        "| ratio | value | target |",
        "|---|---|---|",
        f"| 8 in-process workers' iteration / (8 x one worker's step) | "
        f"{x(r['in_process_8_iteration_over_8_single_steps'])} | at most 1.2x |",
        f"| our single-worker step / PyTorch's step of the same structure | "
        f"{x(r['our_single_step_over_pytorch_step'])} | at most 1x |",
        f"| 8 MPI ranks sharing the device / 8 in-process workers, per iteration | "
        f"{x(r['mpi_8_iteration_over_in_process_8_iteration'])} | (which to use) |",
        f"| Moniqua 1 bit / D-PSGD, 8 in-process workers, per iteration | "
        f"{x(r['moniqua_over_dpsgd_in_process_8'])} | |",
        "",
    ]
    (args.out / "summary.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0 if runs else 1


if __name__ == "__main__":
    sys.exit(main())
