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
    {"key":"","log_x":false,"series":[{"band":[[0,[0.0,2.9457337044264653,5.569033045072377]],[10,[10.0,1.623332086884901,3.1826103977695026]],[20,[20.0,1.0722159936462328,2.1071778482536088]],[30,[30.0,0.7486965463842616,1.8181995226463321]],[40,[40.0,0.5738343663565184,1.7650428018143007]],[50,[50.0,0.49157861712916034,1.489116927375664]],[60,[60.0,0.4557616357212297,1.3650083547464151]],[70,[70.0,0.4437697034244216,1.313664679845859]],[80,[80.0,0.41841996246200935,1.2243879180320305]],[90,[90.0,0.41579696078380685,1.1500675396584663]],[100,[100.0,0.39307348462924124,1.165722071120017]],[110,[110.0,0.3723680716984585,1.0842274505239218]],[120,[120.0,0.35738428661067245,1.101085622521067]],[130,[130.0,0.3633732388289348,1.0745222953829898]],[140,[140.0,0.3519115760463707,0.9983374070332397]],[150,[150.0,0.36572691533473217,0.9501986032871065]],[160,[160.0,0.3374295225856186,0.9371902604864623]],[170,[170.0,0.33690736584790965,0.9024781229197728]],[180,[180.0,0.33161019748648196,0.8470930820689818]],[190,[190.0,0.3339318480414808,0.8685370395952107]]],"dashed":false,"label":"d-psgd","points":[[0,[0.0,4.05029484629631]],[10,[10.0,2.2729790097475058]],[20,[20.0,1.5031133657693867]],[30,[30.0,1.1667389182001353]],[40,[40.0,1.006400624886155]],[50,[50.0,0.8555805280059576]],[60,[60.0,0.7887448513507842]],[70,[70.0,0.7635211754590272]],[80,[80.0,0.7157571841776371]],[90,[90.0,0.6915161514282226]],[100,[100.0,0.6769153836369515]],[110,[110.0,0.6353988393396139]],[120,[120.0,0.6273043118789793]],[130,[130.0,0.6248621021211147]],[140,[140.0,0.5927280070446431]],[150,[150.0,0.5895025056228043]],[160,[160.0,0.5623483459278942]],[170,[170.0,0.5514086752384901]],[180,[180.0,0.5300044379383325]],[190,[190.0,0.5385463570803404]]],"runs":5},{"band":[[0,[0.0,2.9457337044264653,5.569033045072377]],[10,[10.0,1.6638116561923062,3.1678081144269776]],[20,[20.0,1.1875813116447638,2.113776744237373]],[30,[30.0,0.8800993795467357,2.103179135161476]],[40,[40.0,0.7097897985789244,2.0598717323130042]],[50,[50.0,0.6128803836449227,2.0435863200043682]],[60,[60.0,0.5607890309293985,2.040259591755707]],[70,[70.0,0.5110446498018801,2.0371510214462547]],[80,[80.0,0.4943275081827225,2.011013202760309]],[90,[90.0,0.4618704563801734,1.9818383585414638]],[100,[100.0,0.45262768374607676,1.9210617596165027]],[110,[110.0,0.4234800851251836,1.9214802043233077]],[120,[120.0,0.4093013382594113,1.9838340816652495]],[130,[130.0,0.40036790902800373,1.9181821883789378]],[140,[140.0,0.38967152997660787,1.895792610098133]],[150,[150.0,0.3889175278774483,1.8805407879907694]],[160,[160.0,0.3702276069087834,1.7747637507789567]],[170,[170.0,0.3798188487039709,1.6431254160456614]],[180,[180.0,0.3693328645545085,1.5663356893198688]],[190,[190.0,0.39011713736262543,1.49571279144962]]],"dashed":false,"label":"moniqua","points":[[0,[0.0,4.05029484629631]],[10,[10.0,2.295786589682102]],[20,[20.0,1.5843868714571]],[30,[30.0,1.3605170531570911]],[40,[40.0,1.2091633231192829]],[50,[50.0,1.1191398338973522]],[60,[60.0,1.069651905670762]],[70,[70.0,1.0203308925777674]],[80,[80.0,0.9970452073216437]],[90,[90.0,0.9567406059801579]],[100,[100.0,0.9324836377054453]],[110,[110.0,0.9020579806715251]],[120,[120.0,0.9011026270687579]],[130,[130.0,0.8763438776507974]],[140,[140.0,0.8594977643340826]],[150,[150.0,0.855204814262688]],[160,[160.0,0.8105964077636599]],[170,[170.0,0.7899936732649803]],[180,[180.0,0.7605913797765971]],[190,[190.0,0.7638738066703081]]],"runs":5},{"band":[[0,[0.0,2.9457337044264653,5.569033045072377]],[10,[10.0,1.7112705883716808,3.165057116095331]],[20,[20.0,1.2830265702889336,2.212059034171916]],[30,[30.0,1.0596266539968062,2.143350763623909]],[40,[40.0,0.8434100138917139,2.182886327121072]],[50,[50.0,0.7217973580511465,2.1531390159330956]],[60,[60.0,0.6964107117805113,2.0111627047065213]],[70,[70.0,0.6420899099958286,1.876469673424379]],[80,[80.0,0.6342221270913396,1.7033500849646022]],[90,[90.0,0.6023257507157823,1.5893041818005087]],[100,[100.0,0.6031882271742908,1.3515936236609543]],[110,[110.0,0.5869852128271669,1.25549684713124]],[120,[120.0,0.5588639886880115,1.2131121497188482]],[130,[130.0,0.5353393768455222,1.1794444118458516]],[140,[140.0,0.5537859498166563,1.0864195411545565]],[150,[150.0,0.5558490975280534,1.05904602150745]],[160,[160.0,0.5294940801926953,1.0268996526803793]],[170,[170.0,0.5164786585156717,0.9927760864795646]],[180,[180.0,0.511633077046629,0.9163571341966524]],[190,[190.0,0.527823682610476,0.8972271838001171]]],"dashed":false,"label":"choco","points":[[0,[0.0,4.05029484629631]],[10,[10.0,2.3272879394888877]],[20,[20.0,1.6846751959621904]],[30,[30.0,1.5070340400934221]],[40,[40.0,1.3568596786260603]],[50,[50.0,1.2466475256532432]],[60,[60.0,1.1834674692153928]],[70,[70.0,1.0976621719449757]],[80,[80.0,1.0393759252876045]],[90,[90.0,0.9784062726795671]],[100,[100.0,0.9029204625636339]],[110,[110.0,0.8584626282006502]],[120,[120.0,0.8233861152082682]],[130,[130.0,0.7946087316796183]],[140,[140.0,0.7756570617854595]],[150,[150.0,0.7672481836378575]],[160,[160.0,0.7373854399472475]],[170,[170.0,0.7160640064626932]],[180,[180.0,0.6847179128974675]],[190,[190.0,0.6881698600575328]]],"runs":5},{"band":[[0,[0.0,2.9457337044264653,5.569033045072377]],[1,[1.0,2.4632833239990264,8.420220677401078]],[2,[2.0,1.612867402326421,63.6007346837073]],[3,[3.0,5373.301473198021,1385684.9403738398]],[4,[4.0,8.827149968988476e+21,2.277246703608196e+24]]],"dashed":false,"label":"dcd","points":[[0,[0.0,4.05029484629631]],[1,[1.0,4.554271531105042]],[2,[2.0,10.128156383832296]],[3,[3.0,86288.48666826337]],[4,[4.0,1.4178010498350675e+23]]],"runs":5},{"band":[[0,[0.0,2.9457337044264653,5.569033045072377]],[1,[1.0,2.555363816199078,6.804868924163021]],[2,[2.0,32.95559041890768,59.29411752696345]],[3,[3.0,1289.9588163838582,2347.9581540687736]],[4,[4.0,16286332.157303259,181489563.05061966]],[5,[5.0,1.0617298728019633e+24,2.0123164361004243e+25]]],"dashed":false,"label":"ecd","points":[[0,[0.0,4.05029484629631]],[1,[1.0,4.170001897215843]],[2,[2.0,44.204893976449966]],[3,[3.0,1740.3359794422984]],[4,[4.0,54367263.19143005]],[5,[5.0,4.6222683541073247e+24]]],"runs":5}],"title":"","x":"iteration","x_label":"iteration","y_label":"train loss"}
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
