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
  "panels_key": "bits",
  "range": "positive",
  "series_key": "algorithm",
  "smooth": 10,
  "t95": {
    "2": 12.70620473617469,
    "3": 4.302652729749467
  },
  "title": "ResNet-8 on fashion-mnist - train loss per epoch at 1 and 2 bits, 8 workers on a ring",
  "x_range": null,
  "y": "train_loss",
  "y_range": null,
  "panels": [
    {"key":"bits = 1","log_x":false,"series":[{"band":[[0,[0.0,2.236456743063399,2.7268901779654913]],[2,[0.034133333333333335,2.211317735243915,2.597694374457134]],[4,[0.06826666666666667,2.1784939558360863,2.562863844624707]],[6,[0.1024,2.045982829203422,3.5567362132295384]],[8,[0.13653333333333334,2.2033936809269736,38.9779768057154]],[10,[0.17066666666666666,15.973004228706388,564.8063795480656]],[12,[0.2048,191.32117560126648,10208.663103513985]],[14,[0.23893333333333333,3575.4125800385746,114763.37806162401]],[16,[0.2730666666666667,45559.1841185903,2081254.9494645095]],[18,[0.3072,876614.113686712,23157546.530967332]],[20,[0.3413333333333333,9888352.17188074,489116715.1146449]],[22,[0.3754666666666666,205231001.57519838,5678723935.24747]],[24,[0.4096,3571415690.247097,67076312355.1969]],[26,[0.4437333333333333,36082252770.297035,1790010590287.6436]],[28,[0.47786666666666666,737703866446.2413,29019720594916.39]],[30,[0.512,8603822772056.974,448430282156062.06]],[32,[0.5461333333333334,127331074876294.98,8383664672363110.0]],[34,[0.5802666666666667,1790707129558873.5,1.0556906713690037e+17]],[36,[0.6144,2.758741821271198e+16,1.5787632113306675e+18]],[38,[0.6485333333333333,3.922451914209947e+17,2.313548457697254e+19]],[40,[0.6826666666666666,7.193475917998349e+18,2.6924124052368504e+20]],[42,[0.7168,1.1223964509171666e+20,3.584135353007568e+21]],[44,[0.7509333333333333,1.2140561967087325e+21,1.1020595490980108e+23]],[46,[0.7850666666666667,2.1393576644273083e+22,1.1504944115886896e+24]],[48,[0.8192,3.063412214884928e+23,1.5892525998920073e+25]]],"dashed":false,"label":"dcd","points":[[0,[0.0,2.469528685013453]],[2,[0.034133333333333335,2.3967327011956105]],[4,[0.06826666666666667,2.3628760854403175]],[6,[0.1024,2.6975954515593394]],[8,[0.13653333333333334,9.267352792951796]],[10,[0.17066666666666666,94.98239146769046]],[12,[0.2048,1397.5455006122588]],[14,[0.23893333333333333,20256.515634463234]],[16,[0.2730666666666667,307929.01363850234]],[18,[0.3072,4505577.890504471]],[20,[0.3413333333333333,69545368.87677765]],[22,[0.3754666666666666,1079560188.6416016]],[24,[0.4096,15477641758.009048]],[26,[0.4437333333333333,254140934483.7375]],[28,[0.47786666666666666,4626873683823.607]],[30,[0.512,62114528681253.48]],[32,[0.5461333333333334,1033199416441190.4]],[34,[0.5802666666666667,1.3749301116163208e+16]],[36,[0.6144,2.086959534102741e+17]],[38,[0.6485333333333333,3.012437978865634e+18]],[40,[0.6826666666666666,4.400886705925443e+19]],[42,[0.7168,6.34257108736074e+20]],[44,[0.7509333333333333,1.1567031705344598e+22]],[46,[0.7850666666666667,1.568859151521592e+23]],[48,[0.8192,2.2064758840845744e+24]]],"runs":3},{"band":[[0,[0.0,2.236456743063399,2.7268901779654913]],[7,[0.11946666666666668,62.00213693754784,115.05943486653804]],[14,[0.23893333333333333,721.7756108926097,1224.867953044742]],[21,[0.3584,6528.343912218069,17105.655639010525]],[28,[0.47786666666666666,55759.22845502658,188661.5312580526]],[35,[0.5973333333333334,587087.6146068164,1992739.1697545345]],[42,[0.7168,5774698.088113884,27949047.336938806]],[49,[0.8362666666666666,70541404.38898242,336307324.8201694]],[56,[0.9557333333333332,1383703164.147147,3719891095.6564345]],[63,[1.0752,12651184317.692871,67857931712.09364]],[70,[1.1946666666666668,171862883835.59662,873110664617.2606]],[77,[1.3141333333333334,2687972377436.4697,12261803653198.328]],[84,[1.4336,31608692406686.88,192711909486152.88]],[91,[1.5530666666666668,373852509543254.94,2794172685841244.0]],[98,[1.6725333333333332,3791245478723702.0,3.964571547715693e+16]],[105,[1.792,6.895199838906001e+16,4.368510604326945e+17]],[112,[1.9114666666666664,1.0492851584423628e+18,9.866295254101764e+18]],[119,[2.0309333333333335,2.069211798878817e+19,2.9027911360176787e+20]],[126,[2.1504,2.48695457305633e+20,9.98340860595086e+21]],[133,[2.2698666666666667,5.767735013445863e+21,1.7967597176216333e+23]],[140,[2.3893333333333335,1.3161744305623575e+23,4.209737147871546e+24]],[147,[2.5088,2.838482889260372e+24,8.331270203282108e+25]]],"dashed":false,"label":"ecd","points":[[0,[0.0,2.469528685013453]],[7,[0.11946666666666668,84.46260022372007]],[14,[0.23893333333333333,940.2551861445111]],[21,[0.3584,10567.478547668457]],[28,[0.47786666666666666,102565.20570882161]],[35,[0.5973333333333334,1081624.9283854165]],[42,[0.7168,12704224.109375]],[49,[0.8362666666666666,154024644.12916666]],[56,[0.9557333333333332,2268749673.133333]],[63,[1.0752,29299883984.533333]],[70,[1.1946666666666668,387369741627.7333]],[77,[1.3141333333333334,5741026869589.333]],[84,[1.4336,78047238708701.86]],[91,[1.5530666666666668,1022060893831168.0]],[98,[1.6725333333333332,1.2259960830016444e+16]],[105,[1.792,1.7355619728265053e+17]],[112,[1.9114666666666664,3.217538994159869e+18]],[119,[2.0309333333333335,7.750154623185673e+19]],[126,[2.1504,1.575699326878685e+21]],[133,[2.2698666666666667,3.2191977159030473e+22]],[140,[2.3893333333333335,7.443620351292128e+23]],[147,[2.5088,1.5377960826397316e+25]]],"runs":3}],"title":"bits = 1","x":"epoch","x_label":"epoch","y_label":"train loss"},
    {"key":"bits = 2","log_x":false,"series":[{"band":[[0,[0.0,2.236456743063399,2.7268901779654913]],[29,[0.4949333333333333,1.0575192636312318,1.2320814827896192]],[58,[0.9898666666666668,0.6629154026509433,0.789178278992628]],[87,[1.4848,0.5233145475177589,0.6174016314536845]],[116,[1.9797333333333331,0.4271859953413628,0.5650590520957474]],[145,[2.474666666666667,0.38931764619690684,0.5109609336435492]],[174,[2.9696,0.3502457175016087,0.4718102959607036]],[203,[3.4645333333333332,0.32070064750560895,0.43829173581798486]],[232,[3.9594666666666662,0.3248988139932182,0.39989075662001444]],[261,[4.4544,0.3069831443555276,0.39307468240533444]],[290,[4.949333333333334,0.2755050085721815,0.38485676947043806]],[319,[5.444266666666667,0.24241000412842892,0.3223503308467817]],[348,[5.9392,0.23492003499517639,0.32057126455194834]],[377,[6.434133333333333,0.23855098582974796,0.3024411966340313]],[406,[6.9290666666666665,0.21801801519411437,0.3229034238484189]],[435,[7.424,0.22274068021048937,0.31660416400936786]],[464,[7.9189333333333325,0.2266183572535528,0.3179125354260381]],[493,[8.413866666666667,0.2209027150054584,0.29935955089387445]],[522,[8.9088,0.23007784570883297,0.31028061628215053]],[551,[9.403733333333332,0.22000587412496708,0.3159843707742015]],[580,[9.898666666666667,0.22608563928801204,0.3169683427318092]]],"dashed":false,"label":"dcd","points":[[0,[0.0,2.469528685013453]],[29,[0.4949333333333333,1.1414683098594347]],[58,[0.9898666666666668,0.7232969214518865]],[87,[1.4848,0.56841468612353]],[116,[1.9797333333333331,0.49130979391435786]],[145,[2.474666666666667,0.44601133167743673]],[174,[2.9696,0.4065089613199234]],[203,[3.4645333333333332,0.3749139147500197]],[232,[3.9594666666666662,0.3604497642566761]],[261,[4.4544,0.34737199364850924]],[290,[4.949333333333334,0.3256224310025572]],[319,[5.444266666666667,0.27953701907147965]],[348,[5.9392,0.2744241474196315]],[377,[6.434133333333333,0.2686031377563874]],[406,[6.9290666666666665,0.2653276532267531]],[435,[7.424,0.26555720070997874]],[464,[7.9189333333333325,0.26841165497899055]],[493,[8.413866666666667,0.25715625124673047]],[522,[8.9088,0.2671866309518615]],[551,[9.403733333333332,0.2636634553782642]],[580,[9.898666666666667,0.2676975726460417]]],"runs":3},{"band":[],"dashed":false,"label":"ecd","points":[[0,[0.0,2.581950604915619]],[29,[0.49493333333333334,2.4241997435688973]],[58,[0.9898666666666668,12.071512341499329]],[87,[1.4848,99.3741929769516]],[116,[1.9797333333333331,1210.1149272918701]],[145,[2.474666666666667,13945.10269165039]],[174,[2.9696,159928.40107421874]],[203,[3.4645333333333332,2134800.3671875]],[232,[3.9594666666666662,27219776.88125]],[261,[4.4544,449905388.8]],[290,[4.949333333333334,5496255230.4]],[319,[5.444266666666667,55169787033.6]],[348,[5.9392,115788024320.0]],[377,[6.4341333333333335,314649284812.8]],[406,[6.9290666666666665,1059740462284.8]],[435,[7.424,2375594478796.8]],[464,[7.918933333333333,39744846535065.6]],[493,[8.413866666666667,78519314887475.2]],[522,[8.9088,110084627313459.2]],[551,[9.403733333333332,148606210801664.0]],[580,[9.898666666666667,145313800545894.4]]],"runs":1}],"title":"bits = 2","x":"epoch","x_label":"epoch","y_label":"train loss"}
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
