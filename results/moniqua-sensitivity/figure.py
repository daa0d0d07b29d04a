#!/usr/bin/env python3
"""This figure again, drawn with matplotlib (written by `repro`; edit freely).

    python3 figure.py           # figure-matplotlib.png and .svg beside this file
    python3 figure.py --check   # recompute the series and compare with repro's

A curves figure is recomputed from curves.parquet beside this file the way
repro draws it: the runs of a series (seeds) averaged at the iterations they
all have, a trailing moving average of `smooth` steps, and a 95% t band kept
inside the metric's range (a positive metric's is the interval of log(mean),
a fraction's that of logit(mean)), then multiplied by `factor` (100: an
accuracy in percent). A sweep or scaling figure holds the points drawn.
Needs pyarrow and matplotlib.
"""

import math
import sys
from pathlib import Path

true, false, null = True, False, None
SPEC = {
  "factor": 100.0,
  "kind": "scaling",
  "log_y": false,
  "panels_key": "gamma",
  "range": "fraction",
  "series_key": "bits",
  "smooth": 10,
  "t95": {
    "2": 12.70620473617469,
    "3": 4.302652729749467
  },
  "title": "Moniqua's sensitivity - test accuracy over B and gamma at 1, 2, 4 and 8 bits",
  "x_range": null,
  "y": "avg_test_accuracy",
  "y_range": null,
  "panels": [
    {"key":"gamma = 0.05","log_x":true,"series":[{"band":[[2.0,81.76053033045663,86.33808462806853],[8.0,74.00005796059988,84.95129854424897]],"dashed":false,"label":"1","points":[[2.0,84.18333333333334],[8.0,80.03333333333332]],"runs":3},{"band":[[0.5,84.37222502659047,86.7215860962087],[2.0,83.92486666296773,87.20004744660568],[8.0,83.01087593940024,87.10923535258831]],"dashed":false,"label":"2","points":[[0.5,85.58666666666667],[2.0,85.64],[8.0,85.17666666666666]],"runs":3},{"band":[[0.5,84.22769836715531,86.642417217029],[2.0,84.84159897566195,86.68837340359721],[8.0,83.92486666296773,87.20004744660568]],"dashed":false,"label":"4","points":[[0.5,85.47666666666667],[2.0,85.79],[8.0,85.64]],"runs":3},{"band":[[0.5,84.27463893223008,86.76300705218303],[2.0,84.0149259955017,87.32515557821147],[8.0,84.7229435122904,86.61812975997478]],"dashed":false,"label":"8","points":[[0.5,85.56333333333333],[2.0,85.75],[8.0,85.69666666666666]],"runs":3}],"title":"gamma = 0.05","x":"modulus","x_label":"modulus B","y_label":"test accuracy of the averaged model (%)"},
    {"key":"gamma = 0.2","log_x":true,"series":[{"band":[[0.5,84.96713218516062,86.82814176432967],[2.0,82.16946133056726,83.38682693245806]],"dashed":false,"label":"1","points":[[0.5,85.92333333333335],[2.0,82.78666666666666]],"runs":3},{"band":[[0.5,85.44110532221322,87.66753337724462],[2.0,85.7563007144325,87.02542081831369],[8.0,81.0040423711743,82.84601480427409]],"dashed":false,"label":"2","points":[[0.5,86.59333333333335],[2.0,86.40333333333334],[8.0,81.94333333333333]],"runs":3},{"band":[[0.5,85.57604371595417,87.74891261655],[2.0,85.9516959221455,87.43335658353641],[8.0,85.7563007144325,87.02542081831369]],"dashed":false,"label":"4","points":[[0.5,86.7],[2.0,86.71000000000001],[8.0,86.40333333333334]],"runs":3},{"band":[[0.5,85.68460911086824,87.50318507196427],[2.0,85.85627424341078,87.62060885520266],[8.0,85.73761836680886,87.69457194116958]],"dashed":false,"label":"8","points":[[0.5,86.62],[2.0,86.76333333333334],[8.0,86.74666666666667]],"runs":3}],"title":"gamma = 0.2","x":"modulus","x_label":"modulus B","y_label":"test accuracy of the averaged model (%)"},
    {"key":"gamma = 0.5","log_x":true,"series":[{"band":[[0.5,85.19994726106134,88.7053910202842],[2.0,83.99059008243334,86.11382138086661],[8.0,0.0948953701518572,99.84963771653719]],"dashed":false,"label":"2","points":[[0.5,87.05333333333334],[2.0,85.08333333333333],[8.0,44.265]],"runs":3},{"band":[[0.1,85.43560348964039,88.1338962464459],[0.5,85.58804033101232,88.42018963258184],[2.0,85.48061499719265,88.46659549426425],[8.0,83.99059008243334,86.11382138086661]],"dashed":false,"label":"4","points":[[0.1,86.8433333333333],[0.5,87.07],[2.0,87.04666666666667],[8.0,85.08333333333333]],"runs":3},{"band":[[0.1,85.82863961028961,87.65153712838229],[0.5,85.73088750354887,88.06092493873952],[2.0,85.39993543048094,88.50257330198316],[8.0,85.58804033101232,88.42018963258184]],"dashed":false,"label":"8","points":[[0.1,86.76666666666665],[0.5,86.94000000000001],[2.0,87.03],[8.0,87.07]],"runs":3}],"title":"gamma = 0.5","x":"modulus","x_label":"modulus B","y_label":"test accuracy of the averaged model (%)"}
  ]
}

HERE = Path(__file__).resolve().parent


def text(v):
    """A grid value as repro's frames hold it: the manifest's text."""
    if v is None:
        return ""
    return str(v)


def smooth(values, window):
    out = []
    for i in range(len(values)):
        s = values[max(0, i + 1 - max(window, 1)) : i + 1]
        out.append(sum(s) / len(s))
    return out


def band(m, h):
    r = SPEC["range"]
    if r == "positive" and m > 0:
        return m * math.exp(-h / m), m * math.exp(h / m)
    if r == "positive":
        return max(m - h, 0.0), m + h
    if r == "fraction" and 0 < m < 1:
        logit, se = math.log(m / (1 - m)), h / (m * (1 - m))
        sig = lambda v: 1 / (1 + math.exp(-v))
        return sig(logit - se), sig(logit + se)
    if r == "fraction":
        return max(m - h, 0.0), min(m + h, 1.0)
    return m - h, m + h


def curves():
    """Each panel's series recomputed from curves.parquet: {(panel, label): (points, band)}."""
    import pyarrow.parquet as pq

    rows = pq.read_table(HERE / "curves.parquet").to_pylist()
    y, key, skey = SPEC["y"], SPEC["panels_key"], SPEC["series_key"]
    out = {}
    for panel in SPEC["panels"]:
        x = panel["x"]
        for s in panel["series"]:
            mine = [
                r
                for r in rows
                if (key is None or text(r.get(key)) == panel["key"]) and text(r.get(skey)) == s["label"]
            ]
            runs = len({r["run_id"] for r in mine})
            at = {}
            for r in mine:
                at.setdefault(r["iteration"], []).append(r)
            xs, ys, halves = [], [], []
            for it in sorted(at):
                group = at[it]
                if len({r["run_id"] for r in group}) != runs:
                    continue  # only the iterations every run has
                vals = [r[y] if r[y] is not None else math.nan for r in group]
                xv = [float(r[x]) if r[x] is not None else math.nan for r in group]
                n = len(vals)
                mean = sum(vals) / n
                xs.append(sum(xv) / n)
                ys.append(mean)
                if runs >= 2 and n >= 2:
                    sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / (n - 1))
                    halves.append(SPEC["t95"][str(runs)] * sd / math.sqrt(runs))
                else:
                    halves.append(math.nan)
            ys, halves = smooth(ys, SPEC["smooth"]), smooth(halves, SPEC["smooth"])
            lo_hi = SPEC["x_range"]
            shown = lambda v: math.isfinite(v) and (lo_hi is None or lo_hi[0] <= v <= lo_hi[1])
            f = SPEC["factor"]
            points = [(a, b * f) for a, b in zip(xs, ys) if shown(a) and math.isfinite(b)]
            bands = []
            for a, b, h in zip(xs, ys, halves):
                if shown(a) and math.isfinite(b) and math.isfinite(h):
                    lo, hi = band(b, h)
                    bands.append((a, lo * f, hi * f))
            out[(panel["title"], s["label"])] = (points, bands)
    return out


def series_data():
    if SPEC["kind"] == "curves":
        return curves()
    return {
        (p["title"], s["label"]): ([tuple(v) for v in s["points"]], [tuple(v) for v in s["band"]])
        for p in SPEC["panels"]
        for s in p["series"]
    }


def check(data):
    """Compares the recomputed series with the sample of repro's numbers."""
    bad = 0
    for p in SPEC["panels"]:
        for s in p["series"]:
            points, bands = data[(p["title"], s["label"])]
            for kind, mine, theirs in (("point", points, s["points"]), ("band", bands, s["band"])):
                if SPEC["kind"] == "curves":
                    pairs = [(mine[i] if i < len(mine) else None, v) for i, v in theirs]
                else:
                    pairs = list(zip(mine, theirs))
                for a, b in pairs:
                    if a is None or any(
                        not math.isclose(u, w, rel_tol=1e-9, abs_tol=1e-12) for u, w in zip(a, b)
                    ):
                        bad += 1
                        print(f"{p['title']!r} {s['label']!r} {kind}: {a} != {b}")
    print(f"check: {bad} differences")
    return bad == 0


def draw(data):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = SPEC["panels"]
    cols = (len(panels) + 1) // 2 if len(panels) > 2 else max(len(panels), 1)
    rows = max((len(panels) + cols - 1) // cols, 1)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 4.2 * rows), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    order = []
    for p in panels:
        for s in p["series"]:
            base = s["label"].replace(" (wire bound)", "")
            if base not in order:
                order.append(base)
    markers, dashes = "o^sxDv", ["-", "--", ":", "-."]
    for ax, p in zip(axes.flat, panels):
        for k, s in enumerate(p["series"]):
            i = order.index(s["label"].replace(" (wire bound)", ""))
            points, bands = data[(p["title"], s["label"])]
            if bands:
                bx, blo, bhi = zip(*bands)
                ax.fill_between(bx, blo, bhi, color=colors[i % len(colors)], alpha=0.18, linewidth=0)
            if points:
                px, py = zip(*points)
                every = max(len(points) // 8, 1)
                ax.plot(
                    px,
                    py,
                    color=colors[i % len(colors)],
                    linestyle="--" if s["dashed"] else dashes[i % 4],
                    marker=None if s["dashed"] else markers[i % len(markers)],
                    markevery=(every * (2 * k + 1) // (2 * len(p["series"])), every),
                    label=s["label"],
                )
        ax.set_title(p["title"])
        ax.set_xlabel(p["x_label"])
        ax.set_ylabel(p["y_label"])
        if p["log_x"]:
            ax.set_xscale("log")
        if SPEC["log_y"]:
            ax.set_yscale("log")
        if SPEC["y_range"]:
            ax.set_ylim(*SPEC["y_range"])
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    fig.suptitle(SPEC["title"])
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(HERE / f"figure-matplotlib.{ext}")
    print(f"wrote {HERE / 'figure-matplotlib.png'} and .svg")


if __name__ == "__main__":
    data = series_data()
    if "--check" in sys.argv:
        sys.exit(0 if check(data) else 1)
    draw(data)
