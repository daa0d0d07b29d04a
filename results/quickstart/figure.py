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
  "log_y": false,
  "panels_key": null,
  "range": "positive",
  "series_key": "algorithm",
  "smooth": 10,
  "t95": {
    "2": 12.70620473617469,
    "3": 4.302652729749467,
    "4": 3.1824463052837046,
    "5": 2.776445105197795
  },
  "title": "Quickstart - train loss per iteration at a 1-bit budget, 8 workers on a ring",
  "x_range": null,
  "y": "train_loss",
  "y_range": [
    0.3,
    2.5
  ],
  "panels": [
    {"key":"","log_x":false,"series":[{"band":[[0,[0.0,2.9457337036343327,5.569033013788103]],[10,[10.0,1.623330602940284,3.182598399002599]],[20,[20.0,1.0724198748780425,2.1073496019727194]],[30,[30.0,0.7483360697561477,1.8185279785948796]],[40,[40.0,0.5716128643724705,1.763908099790715]],[50,[50.0,0.4932356404581773,1.4889134353329783]],[60,[60.0,0.45304598663669166,1.3658958082864174]],[70,[70.0,0.44379643510269007,1.3163152314303388]],[80,[80.0,0.41589790735071547,1.2392198892757231]],[90,[90.0,0.42007016527453234,1.1311399161928413]],[100,[100.0,0.39227801545790153,1.1474161081105223]],[110,[110.0,0.3728752569903763,1.0994477009893255]],[120,[120.0,0.363966769015102,1.0334521238236696]],[130,[130.0,0.37207580400097356,0.9684868542673989]],[140,[140.0,0.3579156715851243,0.9452283788217762]],[150,[150.0,0.36698148693368465,0.9558497441832242]],[160,[160.0,0.34039900574027765,0.9196678718821438]],[170,[170.0,0.33658998112012983,0.8999141774750962]],[180,[180.0,0.33278422473766794,0.8353514554834818]],[190,[190.0,0.3343135097896117,0.8512816567137551]]],"dashed":false,"label":"d-psgd","points":[[0,[0.0,4.050294834375381]],[10,[10.0,2.272973686158657]],[20,[20.0,1.503317530155182]],[30,[30.0,1.1665633631497623]],[40,[40.0,1.0041277614980935]],[50,[50.0,0.8569627599045635]],[60,[60.0,0.7866470708698035]],[70,[70.0,0.7643140762671827]],[80,[80.0,0.7179059539362789]],[90,[90.0,0.6893171487376094]],[100,[100.0,0.6708994811400771]],[110,[110.0,0.6402787237241865]],[120,[120.0,0.6133043538406491]],[130,[130.0,0.6002920330688357]],[140,[140.0,0.5816459834016859]],[150,[150.0,0.5922661229595542]],[160,[160.0,0.5595123137161137]],[170,[170.0,0.5503654204308986]],[180,[180.0,0.5272492641024291]],[190,[190.0,0.5334744215756655]]],"runs":5},{"band":[[0,[0.0,2.9457337036343327,5.569033013788103]],[10,[10.0,1.6638498060966864,3.167809959349826]],[20,[20.0,1.1867769030917519,2.1150605046280435]],[30,[30.0,0.8817150131336035,2.1036781400139444]],[40,[40.0,0.7212120694589675,2.0578302295154156]],[50,[50.0,0.6073791239640289,2.0519995993400264]],[60,[60.0,0.5555275229796525,2.028202910392697]],[70,[70.0,0.5126492875396698,2.018507276995885]],[80,[80.0,0.4938224184531245,1.9811685122070555]],[90,[90.0,0.4670168262629396,1.9907729588664012]],[100,[100.0,0.4538236816830528,1.9603297655810459]],[110,[110.0,0.41675242010201574,1.9572324362794182]],[120,[120.0,0.40303529814163297,2.029524805397112]],[130,[130.0,0.39081854601231125,2.000891544745079]],[140,[140.0,0.4037333150021678,1.9017664059343249]],[150,[150.0,0.38403205989581013,1.9228348628859355]],[160,[160.0,0.36148333379686837,1.9020332127218835]],[170,[170.0,0.3707724650466114,1.8009662906224098]],[180,[180.0,0.35226690926452453,1.8240007131382183]],[190,[190.0,0.37068510866195004,1.734155790761579]]],"dashed":false,"label":"moniqua","points":[[0,[0.0,4.050294834375381]],[10,[10.0,2.295813578367233]],[20,[20.0,1.584331075102091]],[30,[30.0,1.3619267964363098]],[40,[40.0,1.2182495632767676]],[50,[50.0,1.1163967569917441]],[60,[60.0,1.061471873819828]],[70,[70.0,1.0172444728016856]],[80,[80.0,0.989113454595208]],[90,[90.0,0.9642222093790768]],[100,[100.0,0.9432094526290893]],[110,[110.0,0.9031507927924395]],[120,[120.0,0.9044170138984917]],[130,[130.0,0.8842994539439676]],[140,[140.0,0.8762456592917441]],[150,[150.0,0.8593196339160205]],[160,[160.0,0.8291883421316744]],[170,[170.0,0.8171589264273644]],[180,[180.0,0.8015828676521778]],[190,[190.0,0.8017641347274184]]],"runs":5},{"band":[[0,[0.0,2.9457337036343327,5.569033013788103]],[10,[10.0,1.7111222942634943,3.165125000122001]],[20,[20.0,1.2831580774698932,2.212247969722129]],[30,[30.0,1.0569120623389496,2.1411731184419787]],[40,[40.0,0.8728170931686844,2.174615777742236]],[50,[50.0,0.731841017797084,2.1427824608191384]],[60,[60.0,0.6843866236798524,2.001548129190611]],[70,[70.0,0.6457458682737803,1.8097937443585346]],[80,[80.0,0.6156146727200666,1.7365588785017]],[90,[90.0,0.5923457925236845,1.6226598037842022]],[100,[100.0,0.5829346592083922,1.4520727523668384]],[110,[110.0,0.5559292509317015,1.3488269748128299]],[120,[120.0,0.5537723302000311,1.2381120208774088]],[130,[130.0,0.5340663673336362,1.1912702072196124]],[140,[140.0,0.5531456879248556,1.149306912748958]],[150,[150.0,0.552441449174614,1.1190590679618064]],[160,[160.0,0.5289113808442818,1.0566198645524358]],[170,[170.0,0.5128131770430018,1.0343742497608455]],[180,[180.0,0.5096018808298177,0.96060170458328]],[190,[190.0,0.5136582097880724,0.9134982661872921]]],"dashed":false,"label":"choco","points":[[0,[0.0,4.050294834375381]],[10,[10.0,2.327212055623531]],[20,[20.0,1.6848334789276123]],[30,[30.0,1.5043376271426676]],[40,[40.0,1.3776943862438202]],[50,[50.0,1.2522683805972339]],[60,[60.0,1.1703985501825809]],[70,[70.0,1.081048950254917]],[80,[80.0,1.0339492858201267]],[90,[90.0,0.9803956892341376]],[100,[100.0,0.9200345292687416]],[110,[110.0,0.865940165221691]],[120,[120.0,0.8280290929973126]],[130,[130.0,0.7976323414221407]],[140,[140.0,0.7973293942213058]],[150,[150.0,0.7862662483006715]],[160,[160.0,0.7475682387501001]],[170,[170.0,0.7283136311173439]],[180,[180.0,0.6996602285280823]],[190,[190.0,0.6850006452947854]]],"runs":5},{"band":[[0,[0.0,2.9457337036343327,5.569033013788103]],[1,[1.0,2.4632833262300666,8.420220636714497]],[2,[2.0,1.612867380410181,63.600730632221435]],[3,[3.0,5373.29581544256,1385683.4807923879]],[4,[4.0,8.827108336464017e+21,2.277235963162025e+24]]],"dashed":false,"label":"dcd","points":[[0,[0.0,4.050294834375381]],[1,[1.0,4.554271522164345]],[2,[2.0,10.12815599242846]],[3,[3.0,86288.39579497128]],[4,[4.0,1.4177943628934055e+23]]],"runs":5},{"band":[[0,[0.0,2.9457337036343327,5.569033013788103]],[1,[1.0,2.555363906547253,6.804868547394936]],[2,[2.0,32.95559058746706,59.29411783131332]],[3,[3.0,1289.9476084224866,2347.918412341528]],[4,[4.0,16287766.432630975,181483426.6198082]],[5,[5.0,1.0617451540859951e+24,2.0123195994932107e+25]]],"dashed":false,"label":"ecd","points":[[0,[0.0,4.050294834375381]],[1,[1.0,4.1700018554925915]],[2,[2.0,44.20489420294762]],[3,[3.0,1740.3136903360485]],[4,[4.0,54368737.93069836]],[5,[5.0,4.6223052508831424e+24]]],"runs":5}],"title":"","x":"iteration","x_label":"iteration","y_label":"train loss"}
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
