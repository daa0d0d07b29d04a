#!/usr/bin/env python3
"""Moniqua encode/decode written with PyTorch tensor ops, timed against ours.

This is how public Python implementations do it: element-wise tensor ops for
the modulo, the stochastic rounding and the recovery, one uint8 code per value
(no bit packing, which only favours torch below 8 bits), no hash. Both sides
run on one CPU core (torch.set_num_threads(1)), on the same sizes as
`cargo bench -p repro-codec` (ResNet20 ~270k, ResNet110 ~1.7M parameters).

    bash ci/torch-bench.sh                       # runs our benchmark too
    python ci/torch_codec_bench.py --ours FILE   # compare with a saved run

Prints, for each size and bit width, torch's and our encode+decode
throughput and the ratio (ours / torch).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import torch

SIZES = [("resnet20", 270_000), ("resnet110", 1_700_000)]
BITS = [1, 2, 8]
THETA = 2.0


def modulus(bits, nearest):
    step = 1.0 / (1 << bits)
    delta = step / 2 if nearest else step
    return 2 * THETA / (1 - 2 * delta)


def encode(x, B, L, nearest, gen):
    z = torch.remainder(x / B + 0.5, 1.0) - 0.5          # (x / B) mod 1, centred
    if nearest:
        q = torch.floor(z * L + 0.5)
    else:
        u = torch.rand(x.shape, generator=gen)             # the paper's shared seed
        q = torch.floor(z * L + u)
    return torch.remainder(q, L).to(torch.uint8)


def decode(codes, y, B, L):
    q = codes.to(torch.float32) / L
    return torch.remainder(q * B - y + B / 2, B) - B / 2 + y  # (qB - y) mod B + y


def median_time(fn, reps):
    for _ in range(3):
        fn()
    t = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t, 1e-7)
    batch = max(1, int(2e-3 / one + 0.999))
    samples = []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(batch):
            fn()
        samples.append((time.perf_counter() - t) / batch)
    samples.sort()
    return samples[len(samples) // 2]


def run_ours(quick):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = tempfile.NamedTemporaryFile(suffix=".json", delete=False).name
    cmd = ["cargo", "bench", "-p", "repro-codec", "--bench", "codec", "--", "--json", out]
    if quick:
        cmd.append("--quick")
    subprocess.run(cmd, cwd=root, check=True, stdout=sys.stderr)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ours", help="JSON written by `cargo bench -p repro-codec -- --json FILE`")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = ap.parse_args()
    torch.set_num_threads(1)
    reps = 7 if args.quick else 21
    ours_path = args.ours or run_ours(args.quick)
    with open(ours_path) as f:
        ours = json.load(f)

    def ours_row(model, bits, hashed):
        nearest = bits == 1
        name = "moniqua-" + ("nearest" if nearest else "stochastic") + ("+hash" if hashed else "")
        for r in ours:
            if r["model"] == model and r["bits"] == bits and r["codec"] == name:
                return r
        raise SystemExit(f"no row for {model} {bits}-bit {name} in {ours_path}")

    print(f"torch {torch.__version__}, 1 thread; ours: {ours[0].get('simd', '?')} SIMD level")
    print(f"{'model':<10} {'d':>9} {'bits':>4} {'torch GB/s':>11} {'ours GB/s':>10} {'ratio':>7} {'ours+hash':>10} {'ratio':>7}")
    gen = torch.Generator().manual_seed(0)
    worst = None
    for model, d in SIZES:
        x = torch.sin(torch.arange(d, dtype=torch.float32) * 0.001) * 0.5
        y = x + ((torch.arange(d) % 97).to(torch.float32) - 48.0) * 1e-3
        for bits in BITS:
            nearest = bits == 1
            B, L = modulus(bits, nearest), float(1 << bits)
            codes = encode(x, B, L, nearest, gen)
            rec = decode(codes, y, B, L)
            err = (rec - x).abs().max().item()
            assert err <= (0.5 if nearest else 1.0) * B / L + 1e-5, f"torch reference is wrong: {err}"
            t_enc = median_time(lambda: encode(x, B, L, nearest, gen), reps)
            t_dec = median_time(lambda: decode(codes, y, B, L), reps)
            torch_gbps = 4 * d / (t_enc + t_dec) / 1e9
            cols = []
            for hashed in (False, True):
                r = ours_row(model, bits, hashed)
                g = 4 * d / (r["encode_s"] + r["decode_s"]) / 1e9
                cols.append((g, g / torch_gbps))
            worst = min(worst or cols[0][1], cols[0][1])
            print(f"{model:<10} {d:>9} {bits:>4} {torch_gbps:>11.3f} {cols[0][0]:>10.3f} {cols[0][1]:>6.1f}x {cols[1][0]:>10.3f} {cols[1][1]:>6.1f}x")
    print(f"smallest speed-up (ours without hash / torch): {worst:.1f}x (target: at least 10x)")


if __name__ == "__main__":
    main()
