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
  "factor": 1.0,
  "kind": "curves",
  "log_y": true,
  "panels_key": "compressor",
  "range": "positive",
  "series_key": "algorithm",
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
  "title": "Convex benchmark with top-k and random-k (1%), 8 workers on a ring",
  "x_range": null,
  "y": "subopt",
  "y_range": null,
  "panels": [
    {"key":"top-k","log_x":false,"series":[{"band":[[0,[0.5,0.008908493112162132,0.0092135339608115]],[1,[1.0,0.006775419984298445,0.007012206797488077]],[2,[1.5,0.0055610476497383494,0.005762362034085744]],[3,[2.0,0.0047552777804989585,0.00493306734017168]]],"dashed":false,"label":"d-psgd","points":[[0,[0.5,0.009059729787833693]],[1,[1.0,0.006892796679848762]],[2,[1.5,0.005660809999160369]],[3,[2.0,0.004843356843391109]]],"runs":10},{"band":[[0,[0.5,0.008569813488702945,0.008868769201320082]],[1,[1.0,0.00653047585158751,0.006758439213808067]],[2,[1.5,0.005370083738663183,0.0055629128808304795]],[3,[2.0,0.004599307968554254,0.004769392082071433]]],"dashed":false,"label":"choco","points":[[0,[0.5,0.008718009975313523]],[1,[1.0,0.006643479817098541]],[2,[1.5,0.005465647994606652]],[3,[2.0,0.004683578013466916]]],"runs":10},{"band":[[0,[0.5,0.008576097181091254,0.008884818712237761]],[1,[1.0,0.006535397907299028,0.006767482382208713]],[2,[1.5,0.005373530064241485,0.005569086332675113]],[3,[2.0,0.004601740526309241,0.00477402866210522]]],"dashed":false,"label":"deepsqueeze","points":[[0,[0.5,0.008729093235412776]],[1,[1.0,0.006650427820702204]],[2,[1.5,0.005470434428725572]],[3,[2.0,0.004687093040272561]]],"runs":10}],"title":"top-k","x":"epoch","x_label":"epoch","y_label":"f(averaged model) - f*"},
    {"key":"random-k","log_x":false,"series":[{"band":[[0,[0.5,0.008908493112162132,0.0092135339608115]],[1,[1.0,0.006775419984298445,0.007012206797488077]],[2,[1.5,0.0055610476497383494,0.005762362034085744]],[3,[2.0,0.0047552777804989585,0.00493306734017168]]],"dashed":false,"label":"d-psgd","points":[[0,[0.5,0.009059729787833693]],[1,[1.0,0.006892796679848762]],[2,[1.5,0.005660809999160369]],[3,[2.0,0.004843356843391109]]],"runs":10},{"band":[[0,[0.5,0.008699394452735352,0.008987661447535093]],[1,[1.0,0.006610965718703983,0.0068337683923256]],[2,[1.5,0.005429147820735215,0.005617999259150842]],[3,[2.0,0.004645774904004317,0.0048126660818153906]]],"dashed":false,"label":"choco","points":[[0,[0.5,0.00884235331457357]],[1,[1.0,0.006721443934991005]],[2,[1.5,0.005522766375170222]],[3,[2.0,0.004728484250185331]]],"runs":10},{"band":[[0,[0.5,0.008804268134682281,0.009113913932625992]],[1,[1.0,0.006709554150648392,0.00695120416549247]],[2,[1.5,0.00551364947968951,0.005718653167405348]],[3,[2.0,0.004720017784091462,0.004902585769095464]]],"dashed":false,"label":"deepsqueeze","points":[[0,[0.5,0.008957753179188177]],[1,[1.0,0.00682931041618291]],[2,[1.5,0.005615215851682753]],[3,[2.0,0.0048104357409869125]]],"runs":10}],"title":"random-k","x":"epoch","x_label":"epoch","y_label":"f(averaged model) - f*"},
    {"key":"top-k","log_x":false,"series":[{"band":[[0,[19321688.0,0.008908493112162132,0.0092135339608115]],[1,[39431688.0,0.006775419984298445,0.007012206797488077]],[2,[59541688.0,0.0055610476497383494,0.005762362034085744]],[3,[80440000.0,0.0047552777804989585,0.00493306734017168]]],"dashed":false,"label":"d-psgd","points":[[0,[19321688.0,0.009059729787833693]],[1,[39431688.0,0.006892796679848762]],[2,[59541688.0,0.005660809999160369]],[3,[80440000.0,0.004843356843391109]]],"runs":10},{"band":[[0,[365104.0,0.008569813488702945,0.008868769201320082]],[1,[745104.0,0.00653047585158751,0.006758439213808067]],[2,[1125104.0,0.005370083738663183,0.0055629128808304795]],[3,[1520000.0,0.004599307968554254,0.004769392082071433]]],"dashed":false,"label":"choco","points":[[0,[365104.0,0.008718009975313523]],[1,[745104.0,0.006643479817098541]],[2,[1125104.0,0.005465647994606652]],[3,[1520000.0,0.004683578013466916]]],"runs":10},{"band":[[0,[365104.0,0.008576097181091254,0.008884818712237761]],[1,[745104.0,0.006535397907299028,0.006767482382208713]],[2,[1125104.0,0.005373530064241485,0.005569086332675113]],[3,[1520000.0,0.004601740526309241,0.00477402866210522]]],"dashed":false,"label":"deepsqueeze","points":[[0,[365104.0,0.008729093235412776]],[1,[745104.0,0.006650427820702204]],[2,[1125104.0,0.005470434428725572]],[3,[1520000.0,0.004687093040272561]]],"runs":10}],"title":"top-k against bytes","x":"bytes","x_label":"bytes sent per worker","y_label":"f(averaged model) - f*"},
    {"key":"random-k","log_x":false,"series":[{"band":[[0,[19321688.0,0.008908493112162132,0.0092135339608115]],[1,[39431688.0,0.006775419984298445,0.007012206797488077]],[2,[59541688.0,0.0055610476497383494,0.005762362034085744]],[3,[80440000.0,0.0047552777804989585,0.00493306734017168]]],"dashed":false,"label":"d-psgd","points":[[0,[19321688.0,0.009059729787833693]],[1,[39431688.0,0.006892796679848762]],[2,[59541688.0,0.005660809999160369]],[3,[80440000.0,0.004843356843391109]]],"runs":10},{"band":[[0,[365104.0,0.008699394452735352,0.008987661447535093]],[1,[745104.0,0.006610965718703983,0.0068337683923256]],[2,[1125104.0,0.005429147820735215,0.005617999259150842]],[3,[1520000.0,0.004645774904004317,0.0048126660818153906]]],"dashed":false,"label":"choco","points":[[0,[365104.0,0.00884235331457357]],[1,[745104.0,0.006721443934991005]],[2,[1125104.0,0.005522766375170222]],[3,[1520000.0,0.004728484250185331]]],"runs":10},{"band":[[0,[365104.0,0.008804268134682281,0.009113913932625992]],[1,[745104.0,0.006709554150648392,0.00695120416549247]],[2,[1125104.0,0.00551364947968951,0.005718653167405348]],[3,[1520000.0,0.004720017784091462,0.004902585769095464]]],"dashed":false,"label":"deepsqueeze","points":[[0,[365104.0,0.008957753179188177]],[1,[745104.0,0.00682931041618291]],[2,[1125104.0,0.005615215851682753]],[3,[1520000.0,0.0048104357409869125]]],"runs":10}],"title":"random-k against bytes","x":"bytes","x_label":"bytes sent per worker","y_label":"f(averaged model) - f*"}
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
