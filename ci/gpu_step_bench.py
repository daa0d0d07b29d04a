"""Measures what one paper-scale rank costs on a GPU: step time and memory.

The Rust trainer needs a CUDA libtorch of the version tch pins, which a GPU
machine may not have. This script measures the same models in PyTorch, with
the same per-step structure as the trainer (crates/repro-trainer/src/train.rs):
copy the flat model to the device tensor by tensor, forward and backward on a
batch, copy the gradients back tensor by tensor, take the momentum SGD step on
the host. What it gives is the compute part of a step; the network's part is
the frame size over the link, as docs/cluster.md says.

Each model's parameter count is checked against repro_runlog::MODEL_PARAMETERS
(the table the trainer's tests check against the models it builds), so the
timed models are ours, layer for layer.

    python3 ci/gpu_step_bench.py                  # cuda: 1 rank, then 8 sharing it
    python3 ci/gpu_step_bench.py --device cpu --steps 3 --warmup 1 --ranks 2
Prints one JSON object per line and a markdown table at the end.
"""

import argparse
import json
import multiprocessing as mp
import re
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent


def model_parameters():
    """MODEL_PARAMETERS from the runlog crate: {(model, dataset): count}."""
    src = (ROOT / "crates/repro-runlog/src/models.rs").read_text()
    table = src.split("pub const MODEL_PARAMETERS", 1)[1].split("];", 1)[0]
    rows = re.findall(r'\("([\w-]+)", "([\w-]+)", ([\d_]+)\)', table)
    return {(m, d): int(c.replace("_", "")) for m, d, c in rows}


class Block(nn.Module):
    """A basic residual block with an option-A shortcut (models.rs BasicBlock)."""

    def __init__(self, i, o, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(i, o, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(o)
        self.conv2 = nn.Conv2d(o, o, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(o)
        self.stride, self.pad = stride, (o - i) // 2

    def forward(self, x):
        out = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        if self.stride != 1 or self.pad:
            x = F.pad(x[:, :, :: self.stride, :: self.stride], (0, 0, 0, 0, self.pad, self.pad))
        return F.relu(out + x)


class ResNet(nn.Module):
    def __init__(self, depth, channels=3, classes=10):
        super().__init__()
        n = (depth - 2) // 6
        self.conv1 = nn.Conv2d(channels, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        blocks, c = [], 16
        for stage, width in enumerate([16, 32, 64]):
            for b in range(n):
                blocks.append(Block(c, width, 2 if stage > 0 and b == 0 else 1))
                c = width
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        x = self.blocks(F.relu(self.bn1(self.conv1(x))))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


VGG16 = [64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0]


class Vgg(nn.Module):
    """VGG16 with batch norm and one linear classifier (models.rs Vgg)."""

    def __init__(self, channels=3, side=32, classes=10):
        super().__init__()
        layers = []
        for w in VGG16:
            if w == 0:
                layers.append(nn.MaxPool2d(2))
                side //= 2
            else:
                layers += [nn.Conv2d(channels, w, 3, padding=1), nn.BatchNorm2d(w), nn.ReLU()]
                channels = w
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(channels * max(side, 1) ** 2, classes)

    def forward(self, x):
        return self.fc(self.features(x).flatten(1))


def build(name):
    if name == "vgg16":
        return Vgg()
    return ResNet(int(name.removeprefix("resnet")))


def bench(name, device, batch, steps, warmup, seed):
    """Median step time and peak memory of one rank training `name`."""
    torch.manual_seed(seed)
    torch.set_num_threads(1)  # the trainer's one intra-op thread per rank
    dev = torch.device(device)
    model = build(name).to(dev)
    params = [p for p in model.parameters()]
    d = sum(p.numel() for p in params)
    flat = np.concatenate([p.detach().cpu().numpy().ravel() for p in params])
    momentum, grad = np.zeros_like(flat), np.zeros_like(flat)
    x = torch.randn(batch, 3, 32, 32, device=dev)
    y = torch.randint(0, 10, (batch,), device=dev)
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    times, parts = [], {"scatter": [], "forward_backward": [], "gather": [], "host_sgd": []}
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    for k in range(warmup + steps):
        t0 = time.perf_counter()
        with torch.no_grad():  # scatter: the host model onto the device
            off = 0
            for p in params:
                p.copy_(torch.from_numpy(flat[off : off + p.numel()]).view_as(p))
                off += p.numel()
        sync()
        t1 = time.perf_counter()
        model.zero_grad(set_to_none=False)
        loss = F.cross_entropy(model(x), y)
        if not np.isfinite(loss.item()):
            raise SystemExit(f"{name}: loss {loss.item()} at step {k}")
        loss.backward()
        sync()
        t2 = time.perf_counter()
        off = 0  # gather_grad: the gradients back to the host
        for p in params:
            grad[off : off + p.numel()] = p.grad.detach().cpu().numpy().ravel()
            off += p.numel()
        t3 = time.perf_counter()
        grad += 5e-4 * flat  # momentum SGD on the host, as the trainer's step
        momentum *= 0.9
        momentum += grad
        flat -= 0.1 * momentum
        t4 = time.perf_counter()
        if k >= warmup:
            times.append(t4 - t0)
            for key, s in zip(parts, [t1 - t0, t2 - t1, t3 - t2, t4 - t3]):
                parts[key].append(s)
    out = {
        "model": name,
        "device": str(dev),
        "parameters": d,
        "step_s_median": statistics.median(times),
        "parts_s_median": {key: statistics.median(v) for key, v in parts.items()},
    }
    if dev.type == "cuda":
        out["peak_allocated_mib"] = torch.cuda.max_memory_allocated(dev) / 2**20
        out["gpu"] = torch.cuda.get_device_name(dev)
    return out, model


def _device_used_mib(device):
    """Memory in use on the whole device now (every process's context and
    allocations), by the driver's count."""
    free, total = torch.cuda.mem_get_info(torch.device(device))
    return (total - free) / 2**20


def _rank(args_and_queue):
    args, barrier, q = args_and_queue
    out, model = bench(*args)
    # every rank still holds its model: the device's use is all of theirs
    barrier.wait()
    if out["device"].startswith("cuda"):
        out["device_used_mib"] = _device_used_mib(out["device"])
    barrier.wait()
    del model
    q.put(out)


def measure(name, device, batch, steps, warmup, ranks):
    """`ranks` fresh processes training `name` on one device at once (rank %
    gpus with one GPU puts every rank on it; 1: a rank alone)."""
    ctx = mp.get_context("spawn")
    q, barrier = ctx.Queue(), ctx.Barrier(ranks)
    procs = [
        ctx.Process(target=_rank, args=(((name, device, batch, steps, warmup, r), barrier, q),))
        for r in range(ranks)
    ]
    t0 = time.perf_counter()
    for p in procs:
        p.start()
    results = [q.get() for _ in procs]
    for p in procs:
        p.join()
    wall = time.perf_counter() - t0
    return {
        "model": name,
        "device": device,
        "gpu": results[0].get("gpu", "-"),
        "ranks_sharing": ranks,
        "parameters": results[0]["parameters"],
        "step_s_median_per_rank": statistics.median(r["step_s_median"] for r in results),
        "parts_s_median": {
            key: statistics.median(r["parts_s_median"][key] for r in results)
            for key in results[0]["parts_s_median"]
        },
        "peak_allocated_mib_per_rank": max(r.get("peak_allocated_mib", 0.0) for r in results),
        "device_used_mib": max(r.get("device_used_mib", 0.0) for r in results),
        "wall_s": wall,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--models", default="resnet20,resnet110,vgg16")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--ranks", type=int, default=8, help="also time this many ranks sharing the device")
    args = ap.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("no CUDA device visible to torch; pass --device cpu")
    counts = model_parameters()
    print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda}), flush=True)
    rows = []
    for name in args.models.split(","):
        expected = counts.get((name, "cifar10"))
        got = sum(p.numel() for p in build(name).parameters())
        if got != expected:
            raise SystemExit(f"{name}: {got} parameters here, MODEL_PARAMETERS says {expected}")
        # each measurement in fresh processes: no allocator cache carried over
        for ranks in sorted({1, args.ranks}):
            r = measure(name, args.device, args.batch, args.steps, args.warmup, ranks)
            print(json.dumps(r), flush=True)
            rows.append(r)
    print(f"\ndevice: {args.device} ({rows[0]['gpu'] if rows else '-'}), torch {torch.__version__}")
    print("\n| model | parameters | ranks on the device | step per rank (median) | of it forward+backward | "
          "peak allocated per rank | device memory in use |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        ms = lambda s: f"{s * 1e3:.1f} ms"
        used = f"{r['device_used_mib'] / 1024:.1f} GiB" if r["device_used_mib"] else "-"
        alloc = f"{r['peak_allocated_mib_per_rank']:.0f} MiB" if r["peak_allocated_mib_per_rank"] else "-"
        print(f"| {r['model']} | {r['parameters']:,} | {r['ranks_sharing']} | {ms(r['step_s_median_per_rank'])} | "
              f"{ms(r['parts_s_median']['forward_backward'])} | {alloc} | {used} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
