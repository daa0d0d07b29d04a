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
    "10": 2.2621571627982036,
    "2": 12.70620473617469,
    "3": 4.302652729749467,
    "4": 3.1824463052837046,
    "5": 2.776445105197795,
    "6": 2.570581835636315,
    "7": 2.4469118511449652,
    "8": 2.364624251592785,
    "9": 2.3060041352041707
  },
  "title": "Moniqua's sensitivity - test accuracy over B and gamma at 1, 2, 4 and 8 bits",
  "x_range": null,
  "y": "avg_test_accuracy",
  "y_range": null,
  "panels": [
    {"key":"gamma = 0.05","log_x":true,"series":[{"band":[[0.1,14.654933254167373,22.601456595039128],[0.5,53.711689509410455,77.17737149941006],[2.0,76.95314128667133,84.25907627044708],[8.0,73.70071371406934,80.67948858976776]],"dashed":false,"label":"1","points":[[0.1,18.295714285714286],[0.5,66.45299999999999],[2.0,80.871],[8.0,77.38]],"runs":10},{"band":[[0.1,19.765734850735754,35.96883012910556],[0.5,82.82839408969151,85.37286269152605],[2.0,84.3369053282016,85.72072801331798],[8.0,84.3776622679862,85.51854085893278]],"dashed":false,"label":"2","points":[[0.1,27.113750000000003],[0.5,84.142],[2.0,85.042],[8.0,84.957]],"runs":10},{"band":[[0.1,24.010225286754,42.77320118019585],[0.5,83.44867415491038,85.60768730267364],[2.0,84.36821210663362,85.71094259767017],[8.0,84.31970450916398,85.68662458745123]],"dashed":false,"label":"4","points":[[0.1,32.70375],[0.5,84.559],[2.0,85.052],[8.0,85.016]],"runs":10},{"band":[[0.1,26.55099155753594,51.55622718922193],[0.5,83.04580832940927,85.67215951920501],[2.0,84.6106515995392,85.71632910099324],[8.0,84.37040523507368,85.61435660811398]],"dashed":false,"label":"8","points":[[0.1,38.28125],[0.5,84.404],[2.0,85.172],[8.0,85.003]],"runs":10}],"title":"gamma = 0.05","x":"modulus","x_label":"modulus B","y_label":"test accuracy of the averaged model (%)"},
    {"key":"gamma = 0.2","log_x":true,"series":[{"band":[[0.1,25.72379282402617,52.11790814366169],[0.5,79.50822798515242,86.30884925938469],[2.0,81.20811752352469,83.61121552023334]],"dashed":false,"label":"1","points":[[0.1,38.041111111111114],[0.5,83.181],[2.0,82.442]],"runs":10},{"band":[[0.1,71.92195510211445,83.45244386286411],[0.5,84.09850443294907,86.47211217858401],[2.0,84.65850048335494,86.30853071365371],[8.0,80.68663556059819,82.09286314822933]],"dashed":false,"label":"2","points":[[0.1,78.23333333333333],[0.5,85.325],[2.0,85.503],[8.0,81.4]],"runs":10},{"band":[[0.1,82.36391572667378,85.6602161608981],[0.5,84.78628901647774,86.55803896381255],[2.0,84.82330082787306,86.37203511188393],[8.0,84.67337918530757,86.31024480768423]],"dashed":false,"label":"4","points":[[0.1,84.08111111111111],[0.5,85.695],[2.0,85.61500000000001],[8.0,85.51100000000001]],"runs":10},{"band":[[0.1,81.0877311589351,85.68573721438136],[0.5,84.92416252659916,86.57207365557412],[2.0,85.03015088287846,86.52313640784985],[8.0,84.96221321470759,86.45717679443932]],"dashed":false,"label":"8","points":[[0.1,83.515],[0.5,85.768],[2.0,85.79299999999999],[8.0,85.72599999999998]],"runs":10}],"title":"gamma = 0.2","x":"modulus","x_label":"modulus B","y_label":"test accuracy of the averaged model (%)"},
    {"key":"gamma = 0.5","log_x":true,"series":[{"band":[[0.1,37.84317025452661,67.47515510811968],[0.5,68.11083268651399,78.96280946204118]],"dashed":false,"label":"1","points":[[0.1,52.916],[0.5,73.9]],"runs":10},{"band":[[0.1,81.2464189912614,86.54584990121924],[0.5,84.89717961869965,86.710432162288],[2.0,81.77805235015136,85.36608898261571],[8.0,38.95851514909401,59.07769676896216]],"dashed":false,"label":"2","points":[[0.1,84.074],[0.5,85.828],[2.0,83.6511111111111],[8.0,48.97666666666667]],"runs":10},{"band":[[0.1,83.39846170938746,86.74247389635606],[0.5,85.50713791681743,86.94784052429955],[2.0,84.79137471999195,86.59898842228168],[8.0,83.25351057646475,85.00501683436659]],"dashed":false,"label":"4","points":[[0.1,85.148],[0.5,86.24333333333333],[2.0,85.719],[8.0,84.14888888888889]],"runs":10},{"band":[[0.1,83.26225480577081,86.55540688988906],[0.5,84.8084478455497,86.72856060792417],[2.0,85.563831518133,86.97243492199196],[8.0,85.00926084238051,86.89336860945302]],"dashed":false,"label":"8","points":[[0.1,84.983],[0.5,85.79555555555555],[2.0,86.28333333333333],[8.0,85.97777777777777]],"runs":10}],"title":"gamma = 0.5","x":"modulus","x_label":"modulus B","y_label":"test accuracy of the averaged model (%)"}
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
