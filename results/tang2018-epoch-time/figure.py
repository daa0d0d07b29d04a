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
    {"key":"latency 0.13 ms","log_x":true,"series":[{"band":[[5.0,22.858834718027214,23.1090748218017],[20.0,5.735390501730852,6.211809854925296],[100.0,2.2244903658247965,3.385243696238441],[1000.0,2.314315552427431,4.033643896760755]],"dashed":false,"label":"allreduce","points":[[5.0,22.983614203125],[20.0,5.968848736607139],[100.0,2.744165080357145],[1000.0,3.0553436473214273]],"runs":3},{"band":[],"dashed":true,"label":"allreduce (wire bound)","points":[[5.0,22.59490756373992],[20.0,5.971392250745869],[100.0,1.5359928113440733],[1000.0,0.537454540959703]],"runs":3},{"band":[[5.0,21.920660118090822,22.44196158246757],[20.0,5.497905468722779,6.094614014513482],[100.0,1.7333306168754894,2.6107402456344255],[1000.0,1.6921708929853605,2.953863120053009]],"dashed":false,"label":"allreduce-rhd","points":[[5.0,22.17977935491071],[20.0,5.788575966517858],[100.0,2.1272696116071383],[1000.0,2.2357193906250004]],"runs":3},{"band":[],"dashed":true,"label":"allreduce-rhd (wire bound)","points":[[5.0,22.143298288784333],[20.0,5.670407494556298],[100.0,1.2806107634854256],[1000.0,0.2926686096315815]],"runs":3},{"band":[[5.0,23.649058436457256,27.017157719598316],[20.0,6.355371869780027,6.884154174088212],[100.0,1.4693590804373609,2.6459550970584926],[1000.0,1.618776710282553,2.610304302615215]],"dashed":false,"label":"d-psgd","points":[[5.0,25.277071462053566],[20.0,6.614481066964284],[100.0,1.9717652366071412],[1000.0,2.055602055803567]],"runs":3},{"band":[],"dashed":true,"label":"d-psgd (wire bound)","points":[[5.0,24.93105402105924],[20.0,6.266704366316657],[100.0,1.2816529373941385],[1000.0,0.15578377156710035]],"runs":3},{"band":[[5.0,6.339081455441058,6.827441128708747],[20.0,1.6632805229809167,2.2851857267020095],[100.0,1.3936386239056233,1.9557547468575827],[1000.0,1.3163416958156207,2.5352721572564842]],"dashed":false,"label":"ecd","points":[[5.0,6.57873129464285],[20.0,1.94959095982143],[100.0,1.6509437767857185],[1000.0,1.8268235959821428]],"runs":3},{"band":[],"dashed":true,"label":"ecd (wire bound)","points":[[5.0,6.449390614252941],[20.0,1.6346676422910662],[100.0,0.3513391505578676],[1000.0,0.0625583814329993]],"runs":3}],"title":"latency 0.13 ms","x":"wall_s","x_label":"bandwidth (Mbit/s)","y_label":"epoch time (s)"},
    {"key":"latency 1 ms","log_x":true,"series":[{"band":[[5.0,22.31151511362218,23.14689841255284],[1000.0,6.387192547452489,7.934415818076471]],"dashed":false,"label":"allreduce","points":[[5.0,22.72536850669643],[1000.0,7.118893283482144]],"runs":3},{"band":[],"dashed":true,"label":"allreduce (wire bound)","points":[[5.0,25.469047548624943],[1000.0,3.3922428361114796]],"runs":3},{"band":[[5.0,21.951332154461973,22.303967994809806],[1000.0,3.506229431186616,4.110295480077848]],"dashed":false,"label":"allreduce-rhd","points":[[5.0,22.126947593750007],[1000.0,3.7962664531250003]],"runs":3},{"band":[],"dashed":true,"label":"allreduce-rhd (wire bound)","points":[[5.0,23.3672106300226],[1000.0,1.5162137415825665]],"runs":3},{"band":[[5.0,24.363349025015815,26.192330347191366],[1000.0,2.1740461472130646,3.2313591283958076]],"dashed":false,"label":"d-psgd","points":[[5.0,25.261292247767866],[1000.0,2.650495022321429]],"runs":3},{"band":[],"dashed":true,"label":"d-psgd (wire bound)","points":[[5.0,25.158079986847323],[1000.0,0.35982352892360586]],"runs":3},{"band":[[5.0,6.479333101159743,6.7297660260705126],[1000.0,1.4244827130557303,2.9993356797694526]],"dashed":false,"label":"ecd","points":[[5.0,6.60336245982143],[1000.0,2.067003102678572]],"runs":3},{"band":[],"dashed":true,"label":"ecd (wire bound)","points":[[5.0,6.6546777340519085],[1000.0,0.26651003624343755]],"runs":3}],"title":"latency 1 ms","x":"wall_s","x_label":"bandwidth (Mbit/s)","y_label":"epoch time (s)"},
    {"key":"latency 5 ms","log_x":true,"series":[{"band":[[5.0,22.590753597697763,22.82850241810783],[20.0,19.909263168470666,21.650225955768754],[100.0,20.17556888924479,21.842520842923495],[1000.0,19.703840190876104,20.931716190847922]],"dashed":false,"label":"allreduce","points":[[5.0,22.709316879464286],[20.0,20.761503948660714],[100.0,20.99250542410715],[1000.0,20.308500455357144]],"runs":3},{"band":[],"dashed":true,"label":"allreduce (wire bound)","points":[[5.0,38.597164122980196],[20.0,21.955182211363915],[100.0,17.515974133651227],[1000.0,16.517205389963753]],"runs":3},{"band":[[5.0,21.87289438606047,22.365656545068067],[20.0,9.731261184852928,10.186387356244815],[100.0,9.223392991403763,10.515484128575043],[1000.0,9.349856970998543,10.629105079048687]],"dashed":false,"label":"allreduce-rhd","points":[[5.0,22.117903234374996],[20.0,9.956223977678576],[100.0,9.848271046875007],[1000.0,9.968982506696427]],"runs":3},{"band":[],"dashed":true,"label":"allreduce-rhd (wire bound)","points":[[5.0,28.963669089332654],[20.0,12.515491761766881],[100.0,8.129184389721631],[1000.0,7.141098586865897]],"runs":3},{"band":[[5.0,24.885795632871712,25.107523406588644],[20.0,6.40765344434047,7.530029438650301],[100.0,2.833565892952793,4.6620133181418675],[1000.0,3.4901843354820654,3.5628215142594426]],"dashed":false,"label":"d-psgd","points":[[5.0,24.996413669642852],[20.0,6.946208970982139],[100.0,3.634573142857146],[1000.0,3.526315901785715]],"runs":3},{"band":[],"dashed":true,"label":"d-psgd (wire bound)","points":[[5.0,26.0844608721877],[20.0,7.41648015067697],[100.0,2.421122936999287],[1000.0,1.2972275019436255]],"runs":3},{"band":[[5.0,6.5598559499670275,6.866063542343197],[20.0,2.8926186996781778,3.4012316534233413],[100.0,3.0012672932267104,3.5710856979942815],[1000.0,2.943057549413009,3.916919395566757]],"dashed":false,"label":"ecd","points":[[5.0,6.711213584821429],[20.0,3.136632953125004],[100.0,3.273802484374999],[1000.0,3.3952495044642865]],"runs":3},{"band":[],"dashed":true,"label":"ecd (wire bound)","points":[[5.0,7.596935660756418],[20.0,2.773113216869674],[100.0,1.4929951575654947],[1000.0,1.2040045479868438]],"runs":3}],"title":"latency 5 ms","x":"wall_s","x_label":"bandwidth (Mbit/s)","y_label":"epoch time (s)"},
    {"key":"latency 10 ms","log_x":true,"series":[{"band":[[5.0,36.95539278045169,37.769086930682406],[1000.0,36.995663803064865,37.810119243886255]],"dashed":false,"label":"allreduce","points":[[5.0,37.36002465848213],[1000.0,37.40067459151785]],"runs":3},{"band":[],"dashed":true,"label":"allreduce (wire bound)","points":[[5.0,55.00699410579917],[1000.0,32.92348688344685]],"runs":3},{"band":[[5.0,22.814436840393103,23.58768373149358],[1000.0,17.234238827010167,17.5116812664698]],"dashed":false,"label":"allreduce-rhd","points":[[5.0,23.197838707589295],[1000.0,17.37240620089285]],"runs":3},{"band":[],"dashed":true,"label":"allreduce-rhd (wire bound)","points":[[5.0,36.026199160631165],[1000.0,14.172450254719474]],"runs":3},{"band":[[5.0,24.471500314380236,26.15050338842767],[1000.0,4.3060577146338535,5.324582307457542]],"dashed":false,"label":"d-psgd","points":[[5.0,25.297075955357155],[1000.0,4.788314810267853]],"runs":3},{"band":[],"dashed":true,"label":"d-psgd (wire bound)","points":[[5.0,27.279223939753724],[1000.0,2.4691869732705474]],"runs":3},{"band":[[5.0,6.416628334777356,6.627556354920727],[1000.0,4.450740383892209,4.585156257856461]],"dashed":false,"label":"ecd","points":[[5.0,6.521239598214289],[1000.0,4.517448408482141]],"runs":3},{"band":[],"dashed":true,"label":"ecd (wire bound)","points":[[5.0,8.759414132900043],[1000.0,2.3758601180489642]],"runs":3}],"title":"latency 10 ms","x":"wall_s","x_label":"bandwidth (Mbit/s)","y_label":"epoch time (s)"},
    {"key":"bandwidth 5 Mbit/s","log_x":false,"series":[{"band":[[0.13,22.858834718027214,23.1090748218017],[1.0,22.31151511362218,23.14689841255284],[5.0,22.590753597697763,22.82850241810783],[10.0,36.95539278045169,37.769086930682406]],"dashed":false,"label":"allreduce","points":[[0.13,22.983614203125],[1.0,22.72536850669643],[5.0,22.709316879464286],[10.0,37.36002465848213]],"runs":3},{"band":[],"dashed":true,"label":"allreduce (wire bound)","points":[[0.13,22.59490756373992],[1.0,25.469047548624943],[5.0,38.597164122980196],[10.0,55.00699410579917]],"runs":3},{"band":[[0.13,21.920660118090822,22.44196158246757],[1.0,21.951332154461973,22.303967994809806],[5.0,21.87289438606047,22.365656545068067],[10.0,22.814436840393103,23.58768373149358]],"dashed":false,"label":"allreduce-rhd","points":[[0.13,22.17977935491071],[1.0,22.126947593750007],[5.0,22.117903234374996],[10.0,23.197838707589295]],"runs":3},{"band":[],"dashed":true,"label":"allreduce-rhd (wire bound)","points":[[0.13,22.143298288784333],[1.0,23.3672106300226],[5.0,28.963669089332654],[10.0,36.026199160631165]],"runs":3},{"band":[[0.13,23.649058436457256,27.017157719598316],[1.0,24.363349025015815,26.192330347191366],[5.0,24.885795632871712,25.107523406588644],[10.0,24.471500314380236,26.15050338842767]],"dashed":false,"label":"d-psgd","points":[[0.13,25.277071462053566],[1.0,25.261292247767866],[5.0,24.996413669642852],[10.0,25.297075955357155]],"runs":3},{"band":[],"dashed":true,"label":"d-psgd (wire bound)","points":[[0.13,24.93105402105924],[1.0,25.158079986847323],[5.0,26.0844608721877],[10.0,27.279223939753724]],"runs":3},{"band":[[0.13,6.339081455441058,6.827441128708747],[1.0,6.479333101159743,6.7297660260705126],[5.0,6.5598559499670275,6.866063542343197],[10.0,6.416628334777356,6.627556354920727]],"dashed":false,"label":"ecd","points":[[0.13,6.57873129464285],[1.0,6.60336245982143],[5.0,6.711213584821429],[10.0,6.521239598214289]],"runs":3},{"band":[],"dashed":true,"label":"ecd (wire bound)","points":[[0.13,6.449390614252941],[1.0,6.6546777340519085],[5.0,7.596935660756418],[10.0,8.759414132900043]],"runs":3}],"title":"bandwidth 5 Mbit/s","x":"wall_s","x_label":"latency (ms)","y_label":"epoch time (s)"},
    {"key":"bandwidth 20 Mbit/s","log_x":false,"series":[{"band":[[0.13,5.735390501730852,6.211809854925296],[5.0,19.909263168470666,21.650225955768754]],"dashed":false,"label":"allreduce","points":[[0.13,5.968848736607139],[5.0,20.761503948660714]],"runs":3},{"band":[],"dashed":true,"label":"allreduce (wire bound)","points":[[0.13,5.971392250745869],[5.0,21.955182211363915]],"runs":3},{"band":[[0.13,5.497905468722779,6.094614014513482],[5.0,9.731261184852928,10.186387356244815]],"dashed":false,"label":"allreduce-rhd","points":[[0.13,5.788575966517858],[5.0,9.956223977678576]],"runs":3},{"band":[],"dashed":true,"label":"allreduce-rhd (wire bound)","points":[[0.13,5.670407494556298],[5.0,12.515491761766881]],"runs":3},{"band":[[0.13,6.355371869780027,6.884154174088212],[5.0,6.40765344434047,7.530029438650301]],"dashed":false,"label":"d-psgd","points":[[0.13,6.614481066964284],[5.0,6.946208970982139]],"runs":3},{"band":[],"dashed":true,"label":"d-psgd (wire bound)","points":[[0.13,6.266704366316657],[5.0,7.41648015067697]],"runs":3},{"band":[[0.13,1.6632805229809167,2.2851857267020095],[5.0,2.8926186996781778,3.4012316534233413]],"dashed":false,"label":"ecd","points":[[0.13,1.94959095982143],[5.0,3.136632953125004]],"runs":3},{"band":[],"dashed":true,"label":"ecd (wire bound)","points":[[0.13,1.6346676422910662],[5.0,2.773113216869674]],"runs":3}],"title":"bandwidth 20 Mbit/s","x":"wall_s","x_label":"latency (ms)","y_label":"epoch time (s)"},
    {"key":"bandwidth 100 Mbit/s","log_x":false,"series":[{"band":[[0.13,2.2244903658247965,3.385243696238441],[5.0,20.17556888924479,21.842520842923495]],"dashed":false,"label":"allreduce","points":[[0.13,2.744165080357145],[5.0,20.99250542410715]],"runs":3},{"band":[],"dashed":true,"label":"allreduce (wire bound)","points":[[0.13,1.5359928113440733],[5.0,17.515974133651227]],"runs":3},{"band":[[0.13,1.7333306168754894,2.6107402456344255],[5.0,9.223392991403763,10.515484128575043]],"dashed":false,"label":"allreduce-rhd","points":[[0.13,2.1272696116071383],[5.0,9.848271046875007]],"runs":3},{"band":[],"dashed":true,"label":"allreduce-rhd (wire bound)","points":[[0.13,1.2806107634854256],[5.0,8.129184389721631]],"runs":3},{"band":[[0.13,1.4693590804373609,2.6459550970584926],[5.0,2.833565892952793,4.6620133181418675]],"dashed":false,"label":"d-psgd","points":[[0.13,1.9717652366071412],[5.0,3.634573142857146]],"runs":3},{"band":[],"dashed":true,"label":"d-psgd (wire bound)","points":[[0.13,1.2816529373941385],[5.0,2.421122936999287]],"runs":3},{"band":[[0.13,1.3936386239056233,1.9557547468575827],[5.0,3.0012672932267104,3.5710856979942815]],"dashed":false,"label":"ecd","points":[[0.13,1.6509437767857185],[5.0,3.273802484374999]],"runs":3},{"band":[],"dashed":true,"label":"ecd (wire bound)","points":[[0.13,0.3513391505578676],[5.0,1.4929951575654947]],"runs":3}],"title":"bandwidth 100 Mbit/s","x":"wall_s","x_label":"latency (ms)","y_label":"epoch time (s)"},
    {"key":"bandwidth 1000 Mbit/s","log_x":false,"series":[{"band":[[0.13,2.314315552427431,4.033643896760755],[1.0,6.387192547452489,7.934415818076471],[5.0,19.703840190876104,20.931716190847922],[10.0,36.995663803064865,37.810119243886255]],"dashed":false,"label":"allreduce","points":[[0.13,3.0553436473214273],[1.0,7.118893283482144],[5.0,20.308500455357144],[10.0,37.40067459151785]],"runs":3},{"band":[],"dashed":true,"label":"allreduce (wire bound)","points":[[0.13,0.537454540959703],[1.0,3.3922428361114796],[5.0,16.517205389963753],[10.0,32.92348688344685]],"runs":3},{"band":[[0.13,1.6921708929853605,2.953863120053009],[1.0,3.506229431186616,4.110295480077848],[5.0,9.349856970998543,10.629105079048687],[10.0,17.234238827010167,17.5116812664698]],"dashed":false,"label":"allreduce-rhd","points":[[0.13,2.2357193906250004],[1.0,3.7962664531250003],[5.0,9.968982506696427],[10.0,17.37240620089285]],"runs":3},{"band":[],"dashed":true,"label":"allreduce-rhd (wire bound)","points":[[0.13,0.2926686096315815],[1.0,1.5162137415825665],[5.0,7.141098586865897],[10.0,14.172450254719474]],"runs":3},{"band":[[0.13,1.618776710282553,2.610304302615215],[1.0,2.1740461472130646,3.2313591283958076],[5.0,3.4901843354820654,3.5628215142594426],[10.0,4.3060577146338535,5.324582307457542]],"dashed":false,"label":"d-psgd","points":[[0.13,2.055602055803567],[1.0,2.650495022321429],[5.0,3.526315901785715],[10.0,4.788314810267853]],"runs":3},{"band":[],"dashed":true,"label":"d-psgd (wire bound)","points":[[0.13,0.15578377156710035],[1.0,0.35982352892360586],[5.0,1.2972275019436255],[10.0,2.4691869732705474]],"runs":3},{"band":[[0.13,1.3163416958156207,2.5352721572564842],[1.0,1.4244827130557303,2.9993356797694526],[5.0,2.943057549413009,3.916919395566757],[10.0,4.450740383892209,4.585156257856461]],"dashed":false,"label":"ecd","points":[[0.13,1.8268235959821428],[1.0,2.067003102678572],[5.0,3.3952495044642865],[10.0,4.517448408482141]],"runs":3},{"band":[],"dashed":true,"label":"ecd (wire bound)","points":[[0.13,0.0625583814329993],[1.0,0.26651003624343755],[5.0,1.2040045479868438],[10.0,2.3758601180489642]],"runs":3}],"title":"bandwidth 1000 Mbit/s","x":"wall_s","x_label":"latency (ms)","y_label":"epoch time (s)"}
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
