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
  "kind": "sweep",
  "log_y": true,
  "panels_key": null,
  "range": "positive",
  "series_key": "algorithm",
  "smooth": 10,
  "t95": {
    "2": 12.70620473617469,
    "3": 4.302652729749467
  },
  "title": "Epoch time vs bandwidth and latency, 8 workers on a ring (Tang et al. 2018, Figure 3)",
  "x_range": null,
  "y": "epoch_time_s",
  "y_range": null,
  "panels": [
    {"key":"latency 0.13 ms","log_x":true,"series":[{"band":[[5.0,21.982749548768066,23.383698776499383],[20.0,5.855880139373255,5.870936298317151],[100.0,1.1801454677587493,2.4602389157534352],[1000.0,1.2902861369407639,1.8664821332808106]],"dashed":false,"label":"allreduce","points":[[5.0,22.672405997767864],[20.0,5.863403386160715],[100.0,1.7039482991071402],[1000.0,1.551868558035716]],"runs":3},{"band":[],"dashed":true,"label":"allreduce (wire bound)","points":[[5.0,22.57665807461594],[20.0,5.963671555149522],[100.0,1.5360676883091866],[1000.0,0.5375384388844303]],"runs":3},{"band":[[5.0,23.785333720245287,26.996228223313295],[20.0,5.74953224740728,8.54442766520358],[100.0,1.2868724951266701,1.7276735841441373],[1000.0,0.7696474732834644,1.4436858634514385]],"dashed":false,"label":"d-psgd","points":[[5.0,25.339974299107155],[20.0,7.009027207589287],[100.0,1.4910719687500007],[1000.0,1.0541011227678567]],"runs":3},{"band":[],"dashed":true,"label":"d-psgd (wire bound)","points":[[5.0,24.932495494841522],[20.0,6.265190710092427],[100.0,1.2786796902700355],[1000.0,0.1557540883204751]],"runs":3},{"band":[[5.0,6.307635733174134,6.87050187864025],[20.0,1.644483593716877,1.805722665784171],[100.0,0.762769243996139,0.938744704984567],[1000.0,0.8525125868356805,0.9351416483875096]],"dashed":false,"label":"ecd","points":[[5.0,6.583055761160714],[20.0,1.7232182968749992],[100.0,0.8461947700892843],[1000.0,0.8928717857142862]],"runs":3},{"band":[],"dashed":true,"label":"ecd (wire bound)","points":[[5.0,6.426340420352969],[20.0,1.6282628212908004],[100.0,0.3503268941653352],[1000.0,0.06250321496251292]],"runs":3}],"title":"latency 0.13 ms","x":"wall_s","x_label":"bandwidth (Mbit/s)","y_label":"epoch time (s)"},
    {"key":"latency 1 ms","log_x":true,"series":[{"band":[[5.0,21.976813397489593,23.58429955588297],[1000.0,4.681671429881839,5.077880452625252]],"dashed":false,"label":"allreduce","points":[[5.0,22.766373238839268],[1000.0,4.875753053571429]],"runs":3},{"band":[],"dashed":true,"label":"allreduce (wire bound)","points":[[5.0,25.435011855197416],[1000.0,3.392056844078693]],"runs":3},{"band":[[5.0,23.991751767868113,26.718517797467452],[1000.0,0.7150997068810908,1.4295845156904057]],"dashed":false,"label":"d-psgd","points":[[5.0,25.318452689732155],[1000.0,1.0110862812500006]],"runs":3},{"band":[],"dashed":true,"label":"d-psgd (wire bound)","points":[[5.0,25.14264274048162],[1000.0,0.3597223124851925]],"runs":3},{"band":[[5.0,6.505519046220526,6.513102131026797],[1000.0,0.9564070656541672,1.0184446416461304]],"dashed":false,"label":"ecd","points":[[5.0,6.509309484375],[1000.0,0.9869385245535739]],"runs":3},{"band":[],"dashed":true,"label":"ecd (wire bound)","points":[[5.0,6.622695662751059],[1000.0,0.26636374049488626]],"runs":3}],"title":"latency 1 ms","x":"wall_s","x_label":"bandwidth (Mbit/s)","y_label":"epoch time (s)"},
    {"key":"latency 5 ms","log_x":true,"series":[{"band":[[5.0,22.271382494982074,22.33462226242145],[20.0,18.43578336749835,18.617705572362002],[100.0,18.349718280881262,18.916419635652026],[1000.0,18.387009937472232,18.85697580251907]],"dashed":false,"label":"allreduce","points":[[5.0,22.302979964285715],[20.0,18.526521171875004],[100.0,18.630914395089288],[1000.0,18.62051023660715]],"runs":3},{"band":[],"dashed":true,"label":"allreduce (wire bound)","points":[[5.0,38.563233761230244],[20.0,21.950086413239358],[100.0,17.51453872251001],[1000.0,16.517095157091884]],"runs":3},{"band":[[5.0,23.77805871231019,27.143770195770262],[20.0,6.2403798208358605,6.448766814253187],[100.0,2.097300586590027,2.8957350025567536],[1000.0,2.079040543656377,2.1889480612334147]],"dashed":false,"label":"d-psgd","points":[[5.0,25.405238857142848],[20.0,6.343717703125002],[100.0,2.4643917544642844],[1000.0,2.133286611607144]],"runs":3},{"band":[],"dashed":true,"label":"d-psgd (wire bound)","points":[[5.0,26.08796940621332],[20.0,7.4027753728442205],[100.0,2.4207651636593144],[1000.0,1.29712617836884]],"runs":3},{"band":[[5.0,6.325650753101275,6.934909642564025],[20.0,2.0919500267243554,2.301006810240439],[100.0,1.9537809433244862,2.1675597201294448],[1000.0,2.01077995285761,2.1765549432495113]],"dashed":false,"label":"ecd","points":[[5.0,6.623278372767857],[20.0,2.193989803571432],[100.0,2.0578962254464304],[1000.0,2.092026062499999]],"runs":3},{"band":[],"dashed":true,"label":"ecd (wire bound)","points":[[5.0,7.5635344116136025],[20.0,2.766578356096987],[100.0,1.4916957593804832],[1000.0,1.2038468742054127]],"runs":3}],"title":"latency 5 ms","x":"wall_s","x_label":"bandwidth (Mbit/s)","y_label":"epoch time (s)"},
    {"key":"latency 10 ms","log_x":true,"series":[{"band":[[5.0,35.05333032830937,35.30644868685872],[1000.0,34.82403869399205,35.33836907443202]],"dashed":false,"label":"allreduce","points":[[5.0,35.179661859374995],[1000.0,35.08026128794643]],"runs":3},{"band":[],"dashed":true,"label":"allreduce (wire bound)","points":[[5.0,54.97897111973287],[1000.0,32.92333272527561]],"runs":3},{"band":[[5.0,24.158546014544275,26.466899814235095],[1000.0,3.359568737490717,3.585454108521341]],"dashed":false,"label":"d-psgd","points":[[5.0,25.28639588839287],[1000.0,3.4706742187500033]],"runs":3},{"band":[],"dashed":true,"label":"d-psgd (wire bound)","points":[[5.0,27.251821251950517],[1000.0,2.4689168182734167]],"runs":3},{"band":[[5.0,6.330194143565014,6.7331469995562845],[1000.0,3.117071251330188,3.4589432633533383]],"dashed":false,"label":"ecd","points":[[5.0,6.5285624531250015],[1000.0,3.2835609642857118]],"runs":3},{"band":[],"dashed":true,"label":"ecd (wire bound)","points":[[5.0,8.732821234200772],[1000.0,2.3757183585977604]],"runs":3}],"title":"latency 10 ms","x":"wall_s","x_label":"bandwidth (Mbit/s)","y_label":"epoch time (s)"},
    {"key":"bandwidth 5 Mbit/s","log_x":false,"series":[{"band":[[0.13,21.982749548768066,23.383698776499383],[1.0,21.976813397489593,23.58429955588297],[5.0,22.271382494982074,22.33462226242145],[10.0,35.05333032830937,35.30644868685872]],"dashed":false,"label":"allreduce","points":[[0.13,22.672405997767864],[1.0,22.766373238839268],[5.0,22.302979964285715],[10.0,35.179661859374995]],"runs":3},{"band":[],"dashed":true,"label":"allreduce (wire bound)","points":[[0.13,22.57665807461594],[1.0,25.435011855197416],[5.0,38.563233761230244],[10.0,54.97897111973287]],"runs":3},{"band":[[0.13,23.785333720245287,26.996228223313295],[1.0,23.991751767868113,26.718517797467452],[5.0,23.77805871231019,27.143770195770262],[10.0,24.158546014544275,26.466899814235095]],"dashed":false,"label":"d-psgd","points":[[0.13,25.339974299107155],[1.0,25.318452689732155],[5.0,25.405238857142848],[10.0,25.28639588839287]],"runs":3},{"band":[],"dashed":true,"label":"d-psgd (wire bound)","points":[[0.13,24.932495494841522],[1.0,25.14264274048162],[5.0,26.08796940621332],[10.0,27.251821251950517]],"runs":3},{"band":[[0.13,6.307635733174134,6.87050187864025],[1.0,6.505519046220526,6.513102131026797],[5.0,6.325650753101275,6.934909642564025],[10.0,6.330194143565014,6.7331469995562845]],"dashed":false,"label":"ecd","points":[[0.13,6.583055761160714],[1.0,6.509309484375],[5.0,6.623278372767857],[10.0,6.5285624531250015]],"runs":3},{"band":[],"dashed":true,"label":"ecd (wire bound)","points":[[0.13,6.426340420352969],[1.0,6.622695662751059],[5.0,7.5635344116136025],[10.0,8.732821234200772]],"runs":3}],"title":"bandwidth 5 Mbit/s","x":"wall_s","x_label":"latency (ms)","y_label":"epoch time (s)"},
    {"key":"bandwidth 20 Mbit/s","log_x":false,"series":[{"band":[[0.13,5.855880139373255,5.870936298317151],[5.0,18.43578336749835,18.617705572362002]],"dashed":false,"label":"allreduce","points":[[0.13,5.863403386160715],[5.0,18.526521171875004]],"runs":3},{"band":[],"dashed":true,"label":"allreduce (wire bound)","points":[[0.13,5.963671555149522],[5.0,21.950086413239358]],"runs":3},{"band":[[0.13,5.74953224740728,8.54442766520358],[5.0,6.2403798208358605,6.448766814253187]],"dashed":false,"label":"d-psgd","points":[[0.13,7.009027207589287],[5.0,6.343717703125002]],"runs":3},{"band":[],"dashed":true,"label":"d-psgd (wire bound)","points":[[0.13,6.265190710092427],[5.0,7.4027753728442205]],"runs":3},{"band":[[0.13,1.644483593716877,1.805722665784171],[5.0,2.0919500267243554,2.301006810240439]],"dashed":false,"label":"ecd","points":[[0.13,1.7232182968749992],[5.0,2.193989803571432]],"runs":3},{"band":[],"dashed":true,"label":"ecd (wire bound)","points":[[0.13,1.6282628212908004],[5.0,2.766578356096987]],"runs":3}],"title":"bandwidth 20 Mbit/s","x":"wall_s","x_label":"latency (ms)","y_label":"epoch time (s)"},
    {"key":"bandwidth 100 Mbit/s","log_x":false,"series":[{"band":[[0.13,1.1801454677587493,2.4602389157534352],[5.0,18.349718280881262,18.916419635652026]],"dashed":false,"label":"allreduce","points":[[0.13,1.7039482991071402],[5.0,18.630914395089288]],"runs":3},{"band":[],"dashed":true,"label":"allreduce (wire bound)","points":[[0.13,1.5360676883091866],[5.0,17.51453872251001]],"runs":3},{"band":[[0.13,1.2868724951266701,1.7276735841441373],[5.0,2.097300586590027,2.8957350025567536]],"dashed":false,"label":"d-psgd","points":[[0.13,1.4910719687500007],[5.0,2.4643917544642844]],"runs":3},{"band":[],"dashed":true,"label":"d-psgd (wire bound)","points":[[0.13,1.2786796902700355],[5.0,2.4207651636593144]],"runs":3},{"band":[[0.13,0.762769243996139,0.938744704984567],[5.0,1.9537809433244862,2.1675597201294448]],"dashed":false,"label":"ecd","points":[[0.13,0.8461947700892843],[5.0,2.0578962254464304]],"runs":3},{"band":[],"dashed":true,"label":"ecd (wire bound)","points":[[0.13,0.3503268941653352],[5.0,1.4916957593804832]],"runs":3}],"title":"bandwidth 100 Mbit/s","x":"wall_s","x_label":"latency (ms)","y_label":"epoch time (s)"},
    {"key":"bandwidth 1000 Mbit/s","log_x":false,"series":[{"band":[[0.13,1.2902861369407639,1.8664821332808106],[1.0,4.681671429881839,5.077880452625252],[5.0,18.387009937472232,18.85697580251907],[10.0,34.82403869399205,35.33836907443202]],"dashed":false,"label":"allreduce","points":[[0.13,1.551868558035716],[1.0,4.875753053571429],[5.0,18.62051023660715],[10.0,35.08026128794643]],"runs":3},{"band":[],"dashed":true,"label":"allreduce (wire bound)","points":[[0.13,0.5375384388844303],[1.0,3.392056844078693],[5.0,16.517095157091884],[10.0,32.92333272527561]],"runs":3},{"band":[[0.13,0.7696474732834644,1.4436858634514385],[1.0,0.7150997068810908,1.4295845156904057],[5.0,2.079040543656377,2.1889480612334147],[10.0,3.359568737490717,3.585454108521341]],"dashed":false,"label":"d-psgd","points":[[0.13,1.0541011227678567],[1.0,1.0110862812500006],[5.0,2.133286611607144],[10.0,3.4706742187500033]],"runs":3},{"band":[],"dashed":true,"label":"d-psgd (wire bound)","points":[[0.13,0.1557540883204751],[1.0,0.3597223124851925],[5.0,1.29712617836884],[10.0,2.4689168182734167]],"runs":3},{"band":[[0.13,0.8525125868356805,0.9351416483875096],[1.0,0.9564070656541672,1.0184446416461304],[5.0,2.01077995285761,2.1765549432495113],[10.0,3.117071251330188,3.4589432633533383]],"dashed":false,"label":"ecd","points":[[0.13,0.8928717857142862],[1.0,0.9869385245535739],[5.0,2.092026062499999],[10.0,3.2835609642857118]],"runs":3},{"band":[],"dashed":true,"label":"ecd (wire bound)","points":[[0.13,0.06250321496251292],[1.0,0.26636374049488626],[5.0,1.2038468742054127],[10.0,2.3757183585977604]],"runs":3}],"title":"bandwidth 1000 Mbit/s","x":"wall_s","x_label":"latency (ms)","y_label":"epoch time (s)"}
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
