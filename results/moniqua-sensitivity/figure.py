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
    {"key":"gamma = 0.05","log_x":true,"series":[{"band":[[2.0,79.75790116996717,84.64000671467045],[8.0,74.27093830341937,82.13458779105363]],"dashed":false,"label":"1","points":[[2.0,82.331],[8.0,78.462]],"runs":10},{"band":[[0.5,83.18611187313421,85.56214262311384],[2.0,84.40165414332336,85.66824851195341],[8.0,84.46186605867769,85.61578910799598]],"dashed":false,"label":"2","points":[[0.5,84.411],[2.0,85.04599999999998],[8.0,85.04799999999999]],"runs":10},{"band":[[0.5,83.8886499732049,85.56175526023733],[2.0,84.80902984525837,85.77581720604609],[8.0,84.38775466671,85.67927200536703]],"dashed":false,"label":"4","points":[[0.5,84.744],[2.0,85.29899999999999],[8.0,85.045]],"runs":10},{"band":[[0.5,84.14100150656544,85.40351783977616],[2.0,84.76672977054506,85.83519232385699],[8.0,84.62966680979511,85.77210546395422]],"dashed":false,"label":"8","points":[[0.5,84.78300000000002],[2.0,85.309],[8.0,85.20999999999998]],"runs":10}],"title":"gamma = 0.05","x":"modulus","x_label":"modulus B","y_label":"test accuracy of the averaged model (%)"},
    {"key":"gamma = 0.2","log_x":true,"series":[{"band":[[0.5,83.37592354625902,85.92707754751441],[2.0,81.94095365537218,83.47414815771444]],"dashed":false,"label":"1","points":[[0.5,84.695],[2.0,82.721]],"runs":10},{"band":[[0.5,85.28534346656663,86.43705381733832],[2.0,84.75833647054081,86.51680837861367],[8.0,80.54021719460539,82.40163163839631]],"dashed":false,"label":"2","points":[[0.5,85.871],[2.0,85.66],[8.0,81.489]],"runs":10},{"band":[[0.5,85.32065886731631,86.67394642359363],[2.0,85.08185554400383,86.57335225340628],[8.0,84.74159974371086,86.4673251371864]],"dashed":false,"label":"4","points":[[0.5,86.01100000000001],[2.0,85.84400000000001],[8.0,85.626]],"runs":10},{"band":[[0.5,85.16938878298991,86.55234035030244],[2.0,85.1807036479905,86.54574779986922],[8.0,85.31678171954329,86.75228971513377]],"dashed":false,"label":"8","points":[[0.5,85.875],[2.0,85.87700000000001],[8.0,86.05000000000001]],"runs":10}],"title":"gamma = 0.2","x":"modulus","x_label":"modulus B","y_label":"test accuracy of the averaged model (%)"},
    {"key":"gamma = 0.5","log_x":true,"series":[{"band":[[0.5,85.43081145270112,86.74322117074266],[2.0,83.14284553365691,84.88278216590031],[8.0,45.64707686092793,56.20405251635556]],"dashed":false,"label":"2","points":[[0.1,86.87000000000002],[0.5,86.1],[2.0,84.032],[8.0,50.93600000000001]],"runs":10},{"band":[[0.1,85.13758802764664,86.92211214415492],[0.5,85.59316205077336,86.96018568939891],[2.0,85.4313042414477,86.9095032855064],[8.0,83.17531990889643,84.9199905080895]],"dashed":false,"label":"4","points":[[0.1,86.05375000000001],[0.5,86.291],[2.0,86.187],[8.0,84.06700000000001]],"runs":10},{"band":[[0.1,85.31983021998177,86.53039028361563],[0.5,85.48777627587133,86.83085358619842],[2.0,85.60019851699614,86.92108999018741],[8.0,85.42429245832129,86.84130941749724]],"dashed":false,"label":"8","points":[[0.1,85.936],[0.5,86.173],[2.0,86.274],[8.0,86.148]],"runs":10}],"title":"gamma = 0.5","x":"modulus","x_label":"modulus B","y_label":"test accuracy of the averaged model (%)"}
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
