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
  "panels_key": null,
  "range": "fraction",
  "series_key": "method",
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
  "title": "Accuracy against bits and bytes - every method at 1, 2, 4 and 8 bits",
  "x_range": null,
  "y": "avg_test_accuracy",
  "y_range": null,
  "panels": [
    {"key":"","log_x":true,"series":[{"band":[[1.0,86.5047808791395,87.17987019781334],[2.0,85.86993325326532,86.52160618220334],[4.0,85.91182358281951,86.49499930612356],[8.0,85.79059080930239,86.38999423771385]],"dashed":false,"label":"dcd-fixed","points":[[1.0,86.846],[2.0,86.199],[4.0,86.20599999999999],[8.0,86.093]],"runs":10},{"band":[[1.0,0.2730485393467049,95.10706556567669],[2.0,61.879642556294144,63.37432960910311],[4.0,72.785918117572,74.07805261406509],[8.0,67.51176886173364,71.09391365673514]],"dashed":false,"label":"ecd-fixed","points":[[1.0,18.745],[2.0,62.629999999999995],[4.0,73.437],[8.0,69.33200000000001]],"runs":10},{"band":[[1.0,84.65731860938723,85.68205601400089],[2.0,85.17190341912364,86.36908080274506],[4.0,85.02636200141477,86.39049321463371],[8.0,85.1455788457848,86.4417346166955]],"dashed":false,"label":"choco","points":[[1.0,85.17699999999999],[2.0,85.78099999999999],[4.0,85.72200000000001],[8.0,85.80600000000001]],"runs":10},{"band":[[1.0,80.5000729756173,83.15626683949193],[2.0,84.55903500709951,85.72603777633154],[4.0,84.78310097912528,85.81782162124716],[8.0,84.80586872639397,85.94958713575272]],"dashed":false,"label":"deepsqueeze","points":[[1.0,81.866],[2.0,85.152],[4.0,85.308],[8.0,85.387]],"runs":10},{"band":[[1.0,18.93426148311437,42.95650069736704],[2.0,85.45809252317822,86.63123890522733],[4.0,85.53767450949519,86.7943517035226],[8.0,85.52165027501208,86.997022420923]],"dashed":false,"label":"moniqua","points":[[1.0,29.547142857142855],[2.0,86.05499999999999],[4.0,86.17799999999998],[8.0,86.276]],"runs":10},{"band":[[2.0,85.34581714713,87.04425360258837],[4.0,85.46969756451774,86.88582175216861],[8.0,85.56442956528237,87.0362808814916]],"dashed":false,"label":"dcd","points":[[2.0,86.21700000000001],[4.0,86.19300000000001],[8.0,86.317]],"runs":10},{"band":[[8.0,85.47277898529536,86.89065413979563]],"dashed":false,"label":"ecd","points":[[8.0,86.19700000000002]],"runs":10}],"title":"","x":"bits","x_label":"bits per coordinate","y_label":"test accuracy of the averaged model (%)"},
    {"key":"","log_x":true,"series":[{"band":[[74476800.0,86.5047808791395,87.17987019781334],[148521600.0,85.86993325326532,86.52160618220334],[296611200.0,85.91182358281951,86.49499930612356],[592800000.0,85.79059080930239,86.38999423771385]],"dashed":false,"label":"dcd-fixed","points":[[74476800.0,86.846],[148521600.0,86.199],[296611200.0,86.20599999999999],[592800000.0,86.093]],"runs":10},{"band":[[74476800.0,0.2730485393467049,95.10706556567669],[148521600.0,61.879642556294144,63.37432960910311],[296611200.0,72.785918117572,74.07805261406509],[592800000.0,67.51176886173364,71.09391365673514]],"dashed":false,"label":"ecd-fixed","points":[[74476800.0,18.745],[148521600.0,62.629999999999995],[296611200.0,73.437],[592800000.0,69.33200000000001]],"runs":10},{"band":[[76819200.0,84.65731860938723,85.68205601400089],[150864000.0,85.17190341912364,86.36908080274506],[298953600.0,85.02636200141477,86.39049321463371],[595142400.0,85.1455788457848,86.4417346166955]],"dashed":false,"label":"choco","points":[[76819200.0,85.17699999999999],[150864000.0,85.78099999999999],[298953600.0,85.72200000000001],[595142400.0,85.80600000000001]],"runs":10},{"band":[[76819200.0,80.5000729756173,83.15626683949193],[150864000.0,84.55903500709951,85.72603777633154],[298953600.0,84.78310097912528,85.81782162124716],[595142400.0,84.80586872639397,85.94958713575272]],"dashed":false,"label":"deepsqueeze","points":[[76819200.0,81.866],[150864000.0,85.152],[298953600.0,85.308],[595142400.0,85.387]],"runs":10},{"band":[[74476800.0,18.93426148311437,42.95650069736704],[148521600.0,85.45809252317822,86.63123890522733],[296611200.0,85.53767450949519,86.7943517035226],[592800000.0,85.52165027501208,86.997022420923]],"dashed":false,"label":"moniqua","points":[[74476800.0,29.547142857142855],[148521600.0,86.05499999999999],[296611200.0,86.17799999999998],[592800000.0,86.276]],"runs":10},{"band":[[150864000.0,85.34581714713,87.04425360258837],[298953600.0,85.46969756451774,86.88582175216861],[595142400.0,85.56442956528237,87.0362808814916]],"dashed":false,"label":"dcd","points":[[150864000.0,86.21700000000001],[298953600.0,86.19300000000001],[595142400.0,86.317]],"runs":10},{"band":[[595142400.0,85.47277898529536,86.89065413979563]],"dashed":false,"label":"ecd","points":[[595142400.0,86.19700000000002]],"runs":10}],"title":"against bytes","x":"bytes","x_label":"bytes sent, all workers","y_label":"test accuracy of the averaged model (%)"}
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
