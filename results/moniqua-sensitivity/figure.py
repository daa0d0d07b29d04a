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
    {"key":"gamma = 0.05","log_x":true,"series":[{"band":[[0.1,7.84349402815327,53.075996771744805],[0.5,73.34490785361129,85.51834609974046],[2.0,83.02914474427693,85.82799139115433],[8.0,75.0817529704174,84.85634568770108]],"dashed":false,"label":"1","points":[[0.1,23.68],[0.5,80.12333333333333],[2.0,84.48],[8.0,80.42666666666666]],"runs":3},{"band":[[0.1,17.030969422902174,67.22691326030079],[0.5,84.1629584861644,86.72957266943048],[2.0,84.86612910983986,86.57773379506878],[8.0,83.90160929855433,86.81767821567765]],"dashed":false,"label":"2","points":[[0.1,39.35333333333333],[0.5,85.49333333333333],[2.0,85.74333333333333],[8.0,85.42]],"runs":3},{"band":[[0.1,39.7936753453269,71.13760006928177],[0.5,84.54436013512917,86.55099203430481],[2.0,84.64972200418768,86.91484968643115],[8.0,84.86612910983986,86.57773379506878]],"dashed":false,"label":"4","points":[[0.1,56.07000000000001],[0.5,85.57666666666667],[2.0,85.82000000000002],[8.0,85.74333333333333]],"runs":3},{"band":[[0.1,28.462480037973524,78.94079910340729],[0.5,84.54102373728345,86.59793384661815],[2.0,84.79888189688644,86.45472200074012],[8.0,84.59000617220265,86.54802445699278]],"dashed":false,"label":"8","points":[[0.1,54.98],[0.5,85.6],[2.0,85.64666666666666],[8.0,85.59666666666666]],"runs":3}],"title":"gamma = 0.05","x":"modulus","x_label":"modulus B","y_label":"test accuracy of the averaged model (%)"},
    {"key":"gamma = 0.2","log_x":true,"series":[{"band":[[0.1,36.09623135347286,71.81136985526818],[0.5,84.70446086447237,87.21474138886836],[2.0,80.89973399474825,83.96166611132735]],"dashed":false,"label":"1","points":[[0.1,54.53666666666667],[0.5,86.00666666666666],[2.0,82.48333333333333]],"runs":3},{"band":[[0.1,82.88424466674175,85.23222793437574],[0.5,85.40974668153895,87.87386410999905],[2.0,85.78504148884618,87.1843709135611],[8.0,79.9684494342327,83.46160461216847]],"dashed":false,"label":"2","points":[[0.1,84.09333333333335],[0.5,86.68999999999998],[2.0,86.49999999999999],[8.0,81.78]],"runs":3},{"band":[[0.1,84.37785412963433,86.7166685574142],[0.5,85.93260021132042,87.55844056683108],[2.0,85.72323107174202,87.14532010677972],[8.0,85.78504148884618,87.1843709135611]],"dashed":false,"label":"4","points":[[0.1,85.58666666666666],[0.5,86.76666666666665],[2.0,86.44999999999999],[8.0,86.49999999999999]],"runs":3},{"band":[[0.1,83.17523832390748,87.58090160058366],[0.5,85.78509557840891,87.75904076684549],[2.0,85.19405254647984,87.92807552614359],[8.0,85.93066736978456,87.57914849171401]],"dashed":false,"label":"8","points":[[0.1,85.51666666666668],[0.5,86.80333333333333],[2.0,86.62],[8.0,86.77666666666667]],"runs":3}],"title":"gamma = 0.2","x":"modulus","x_label":"modulus B","y_label":"test accuracy of the averaged model (%)"},
    {"key":"gamma = 0.5","log_x":true,"series":[{"band":[[0.1,46.733083505503906,84.67493043925666],[0.5,68.54314955347493,82.32600541326264]],"dashed":false,"label":"1","points":[[0.1,68.76666666666668],[0.5,76.10999999999999]],"runs":3},{"band":[[0.1,85.05952284779107,87.67454373908954],[0.5,85.60070186921318,87.91969588509842],[2.0,82.5862473675605,87.11371783318963]],"dashed":false,"label":"2","points":[[0.1,86.42],[0.5,86.80333333333333],[2.0,84.98999999999998],[8.0,27.01]],"runs":3},{"band":[[0.1,85.91142708440509,87.91029443344087],[0.5,85.43046632086777,88.31452561258814],[2.0,85.42971451384167,88.27876923984148],[8.0,82.5862473675605,87.11371783318963]],"dashed":false,"label":"4","points":[[0.1,86.94333333333333],[0.5,86.93999999999998],[2.0,86.91999999999999],[8.0,84.98999999999998]],"runs":3},{"band":[[0.1,85.14608905066329,88.45692504158893],[0.5,85.82225534623595,88.10584502678486],[2.0,85.60084028522866,88.27571686504685],[8.0,85.43046632086777,88.31452561258814]],"dashed":false,"label":"8","points":[[0.1,86.89],[0.5,87.00666666666666],[2.0,86.99666666666666],[8.0,86.93999999999998]],"runs":3}],"title":"gamma = 0.5","x":"modulus","x_label":"modulus B","y_label":"test accuracy of the averaged model (%)"}
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
