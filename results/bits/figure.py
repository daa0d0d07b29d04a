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
    {"key":"","log_x":true,"series":[{"band":[[1.0,87.52810562987048,87.82040499182993],[2.0,86.87194411537436,87.38175365853965],[4.0,86.33521121138466,87.03891585506626],[8.0,86.13810044155026,87.16711332043432]],"dashed":false,"label":"dcd-fixed","points":[[1.0,87.675],[2.0,87.12899999999999],[4.0,86.691],[8.0,86.661]],"runs":10},{"band":[[1.0,25.87495399698163,39.503693550619886],[2.0,61.726302830723725,64.17306586216405],[4.0,75.9696003453046,77.77573009543866],[8.0,74.23856559281796,76.53724993248746]],"dashed":false,"label":"ecd-fixed","points":[[1.0,32.315],[2.0,62.958000000000006],[4.0,76.88499999999999],[8.0,75.406]],"runs":10},{"band":[[1.0,84.10289978148381,85.40237942413277],[2.0,85.26911443959953,86.87027924493026],[4.0,85.14200261972559,86.88638916184549],[8.0,85.19598274154649,86.95157758366288]],"dashed":false,"label":"choco","points":[[1.0,84.764],[2.0,86.089],[4.0,86.03699999999999],[8.0,86.09700000000001]],"runs":10},{"band":[[1.0,79.4592043779909,83.51073733764773],[2.0,84.55211327436841,85.81562038042247],[4.0,84.95296488149425,86.15426606837025],[8.0,84.76251693959559,86.1153950453526]],"dashed":false,"label":"deepsqueeze","points":[[1.0,81.571],[2.0,85.19500000000001],[4.0,85.564],[8.0,85.452]],"runs":10},{"band":[[1.0,78.02881948828075,81.66608904230273],[2.0,83.46849345373384,86.25392753850686],[4.0,84.23418515713827,86.7397988125326],[8.0,84.26161308268422,86.89791125530057]],"dashed":false,"label":"moniqua","points":[[1.0,79.90899999999999],[2.0,84.914],[4.0,85.53200000000001],[8.0,85.63000000000001]],"runs":10},{"band":[[2.0,84.58162676270709,86.63531765522566],[4.0,84.8951871546631,86.95564016492445],[8.0,84.59632588088107,86.78576725623178]],"dashed":false,"label":"dcd","points":[[2.0,85.639],[4.0,85.95700000000001],[8.0,85.72599999999998]],"runs":10},{"band":[[8.0,84.7726890551058,86.96980181058048]],"dashed":false,"label":"ecd","points":[[8.0,85.907]],"runs":10}],"title":"","x":"bits","x_label":"bits per coordinate","y_label":"test accuracy of the averaged model (%)"},
    {"key":"","log_x":true,"series":[{"band":[[74476800.0,87.52810562987048,87.82040499182993],[148521600.0,86.87194411537436,87.38175365853965],[296611200.0,86.33521121138466,87.03891585506626],[592800000.0,86.13810044155026,87.16711332043432]],"dashed":false,"label":"dcd-fixed","points":[[74476800.0,87.675],[148521600.0,87.12899999999999],[296611200.0,86.691],[592800000.0,86.661]],"runs":10},{"band":[[74476800.0,25.87495399698163,39.503693550619886],[148521600.0,61.726302830723725,64.17306586216405],[296611200.0,75.9696003453046,77.77573009543866],[592800000.0,74.23856559281796,76.53724993248746]],"dashed":false,"label":"ecd-fixed","points":[[74476800.0,32.315],[148521600.0,62.958000000000006],[296611200.0,76.88499999999999],[592800000.0,75.406]],"runs":10},{"band":[[76819200.0,84.10289978148381,85.40237942413277],[150864000.0,85.26911443959953,86.87027924493026],[298953600.0,85.14200261972559,86.88638916184549],[595142400.0,85.19598274154649,86.95157758366288]],"dashed":false,"label":"choco","points":[[76819200.0,84.764],[150864000.0,86.089],[298953600.0,86.03699999999999],[595142400.0,86.09700000000001]],"runs":10},{"band":[[76819200.0,79.4592043779909,83.51073733764773],[150864000.0,84.55211327436841,85.81562038042247],[298953600.0,84.95296488149425,86.15426606837025],[595142400.0,84.76251693959559,86.1153950453526]],"dashed":false,"label":"deepsqueeze","points":[[76819200.0,81.571],[150864000.0,85.19500000000001],[298953600.0,85.564],[595142400.0,85.452]],"runs":10},{"band":[[74476800.0,78.02881948828075,81.66608904230273],[148521600.0,83.46849345373384,86.25392753850686],[296611200.0,84.23418515713827,86.7397988125326],[592800000.0,84.26161308268422,86.89791125530057]],"dashed":false,"label":"moniqua","points":[[74476800.0,79.90899999999999],[148521600.0,84.914],[296611200.0,85.53200000000001],[592800000.0,85.63000000000001]],"runs":10},{"band":[[150864000.0,84.58162676270709,86.63531765522566],[298953600.0,84.8951871546631,86.95564016492445],[595142400.0,84.59632588088107,86.78576725623178]],"dashed":false,"label":"dcd","points":[[150864000.0,85.639],[298953600.0,85.95700000000001],[595142400.0,85.72599999999998]],"runs":10},{"band":[[595142400.0,84.7726890551058,86.96980181058048]],"dashed":false,"label":"ecd","points":[[595142400.0,85.907]],"runs":10}],"title":"against bytes","x":"bytes","x_label":"bytes sent, all workers","y_label":"test accuracy of the averaged model (%)"}
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
