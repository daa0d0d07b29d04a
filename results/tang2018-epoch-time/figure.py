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
  "title": "Epoch time vs bandwidth and latency, 8 workers on a ring (Tang et al. 2018, Figure 3)",
  "x_range": null,
  "y": "epoch_time_s",
  "y_range": null,
  "panels": [
    {"key":"latency 0.13 ms","log_x":true,"series":[{"band":[[5.0,22.910389628682108,23.110317279016563],[20.0,6.058779461382977,6.214492164328451],[100.0,2.6580574412970988,2.9513376913122125],[1000.0,2.57942764197067,3.1023482882486313]],"dashed":false,"label":"allreduce","points":[[5.0,23.010136316517855],[20.0,6.136141905803569],[100.0,2.8008614946428585],[1000.0,2.8288306647321453]],"runs":10},{"band":[],"dashed":true,"label":"allreduce (wire bound)","points":[[5.0,22.597454252390747],[20.0,5.9713110399369835],[100.0,1.5364021923259332],[1000.0,0.537573711247904]],"runs":10},{"band":[[5.0,22.097181983030012,22.227619353891413],[20.0,5.668764312601174,5.750088236850093],[100.0,2.0306097813038146,2.3496256005893756],[1000.0,1.8574426574055496,2.1112209994629216]],"dashed":false,"label":"allreduce-rhd","points":[[5.0,22.162304706696425],[20.0,5.709281477678572],[100.0,2.1843014276785695],[1000.0,1.9802706743303577]],"runs":10},{"band":[],"dashed":true,"label":"allreduce-rhd (wire bound)","points":[[5.0,22.13955032039731],[20.0,5.668813098865566],[100.0,1.2807048171111137],[1000.0,0.29273447880023945]],"runs":10},{"band":[[5.0,24.932751542010685,25.128975920751873],[20.0,6.516503737383233,7.293014221847931],[100.0,1.8252896884171816,1.9993608142831676],[1000.0,1.849263777413417,2.2523257787389963]],"dashed":false,"label":"d-psgd","points":[[5.0,25.030671447991075],[20.0,6.8938345232142835],[100.0,1.910343602008928],[1000.0,2.040868559598215]],"runs":10},{"band":[],"dashed":true,"label":"d-psgd (wire bound)","points":[[5.0,24.95497984207954],[20.0,6.269154963683809],[100.0,1.280723424056303],[1000.0,0.1558933725212812]],"runs":10},{"band":[[5.0,6.56185769054599,6.715106656876186],[20.0,2.0139690172238254,2.3756185406109993],[100.0,2.215572242168805,2.881061065604211],[1000.0,2.1611222092341333,2.7368464278332616]],"dashed":false,"label":"ecd","points":[[5.0,6.638039941071429],[20.0,2.18733219642857],[100.0,2.5264993419642856],[1000.0,2.43200731875]],"runs":10},{"band":[],"dashed":true,"label":"ecd (wire bound)","points":[[5.0,6.450035044120081],[20.0,1.632786503706783],[100.0,0.35100848938789103],[1000.0,0.06254104112994854]],"runs":10}],"title":"latency 0.13 ms","x":"wall_s","x_label":"bandwidth (Mbit/s)","y_label":"epoch time (s)"},
    {"key":"latency 1 ms","log_x":true,"series":[{"band":[[5.0,22.587609155420527,22.896616581984237],[1000.0,6.331015411027845,6.6785476852737355]],"dashed":false,"label":"allreduce","points":[[5.0,22.741588034598212],[1000.0,6.5024601743303565]],"runs":10},{"band":[],"dashed":true,"label":"allreduce (wire bound)","points":[[5.0,25.459228929363686],[1000.0,3.392191871469971]],"runs":10},{"band":[[5.0,22.074378832511933,22.2120807404874],[1000.0,3.7621472214391707,4.408486816903702]],"dashed":false,"label":"allreduce-rhd","points":[[5.0,22.143122745535713],[1000.0,4.072514754910714]],"runs":10},{"band":[],"dashed":true,"label":"allreduce-rhd (wire bound)","points":[[5.0,23.362908934252584],[1000.0,1.51624295803805]],"runs":10},{"band":[[5.0,24.972064255799893,25.38022527462046],[1000.0,2.911575444994266,3.2940029185890465]],"dashed":false,"label":"d-psgd","points":[[5.0,25.175317602455358],[1000.0,3.0968916696428557]],"runs":10},{"band":[],"dashed":true,"label":"d-psgd (wire bound)","points":[[5.0,25.165039678018445],[1000.0,0.35980262477398106]],"runs":10},{"band":[[5.0,6.626591153450174,6.739016869961558],[1000.0,1.9747294026086724,2.3778067165572367]],"dashed":false,"label":"ecd","points":[[5.0,6.682567588392859],[1000.0,2.166915973660714]],"runs":10},{"band":[],"dashed":true,"label":"ecd (wire bound)","points":[[5.0,6.6550040103672385],[1000.0,0.2664441998074236]],"runs":10}],"title":"latency 1 ms","x":"wall_s","x_label":"bandwidth (Mbit/s)","y_label":"epoch time (s)"},
    {"key":"latency 5 ms","log_x":true,"series":[{"band":[[5.0,22.428655894065876,22.576811755122282],[20.0,20.541620335620344,21.06189320627344],[100.0,20.33649944147854,20.67248753111099],[1000.0,20.679118728422516,21.248177525888952]],"dashed":false,"label":"allreduce","points":[[5.0,22.502611893750004],[20.0,20.800130138839286],[100.0,20.503805284151788],[1000.0,20.961717148660714]],"runs":10},{"band":[],"dashed":true,"label":"allreduce (wire bound)","points":[[5.0,38.59899184254583],[20.0,21.95756809804003],[100.0,17.516270707446132],[1000.0,16.517306232370995]],"runs":10},{"band":[[5.0,22.103630721788505,22.283517431567894],[20.0,9.784768725525435,10.263849973534935],[100.0,9.750095046168676,10.062826805976334],[1000.0,9.759645218793816,10.29704033862429]],"dashed":false,"label":"allreduce-rhd","points":[[5.0,22.1933918203125],[20.0,10.021446912723217],[100.0,9.90522679151786],[1000.0,10.024742416071428]],"runs":10},{"band":[],"dashed":true,"label":"allreduce-rhd (wire bound)","points":[[5.0,28.96980056256774],[20.0,12.51585580036468],[100.0,8.130030300714095],[1000.0,7.141147742461369]],"runs":10},{"band":[[5.0,25.0831630636336,26.305805854831757],[20.0,6.686213482738395,7.438478892311184],[100.0,3.077659226494709,3.653579858565631],[1000.0,3.1668224149844524,3.418406374541481]],"dashed":false,"label":"d-psgd","points":[[5.0,25.687211171651786],[20.0,7.05232286986607],[100.0,3.3532780620535703],[1000.0,3.290210620982143]],"runs":10},{"band":[],"dashed":true,"label":"d-psgd (wire bound)","points":[[5.0,26.111144377372522],[20.0,7.415820717759635],[100.0,2.4222276085026655],[1000.0,1.2972120193562682]],"runs":10},{"band":[[5.0,6.546299413648882,6.665814909717138],[20.0,3.1486356461601828,3.6745506482004244],[100.0,3.2365209449874457,3.75779365630572],[1000.0,2.9421717504215823,3.1971612743950284]],"dashed":false,"label":"ecd","points":[[5.0,6.605786874776787],[20.0,3.401443980803574],[100.0,3.487431415178572],[1000.0,3.067017701785713]],"runs":10},{"band":[],"dashed":true,"label":"ecd (wire bound)","points":[[5.0,7.588664818535224],[20.0,2.7720179915977043],[100.0,1.4929253413347685],[1000.0,1.203982548596026]],"runs":10}],"title":"latency 5 ms","x":"wall_s","x_label":"bandwidth (Mbit/s)","y_label":"epoch time (s)"},
    {"key":"latency 10 ms","log_x":true,"series":[{"band":[[5.0,36.61784063286492,36.90214448495771],[1000.0,36.930194994503665,37.32638171054558]],"dashed":false,"label":"allreduce","points":[[5.0,36.75971770513392],[1000.0,37.127759897544635]],"runs":10},{"band":[],"dashed":true,"label":"allreduce (wire bound)","points":[[5.0,55.01082743890315],[1000.0,32.92352090509749]],"runs":10},{"band":[[5.0,23.164205748738414,23.343942324569245],[1000.0,17.150876212969735,17.604664673927903]],"dashed":false,"label":"allreduce-rhd","points":[[5.0,23.253900382366073],[1000.0,17.376289149107144]],"runs":10},{"band":[],"dashed":true,"label":"allreduce-rhd (wire bound)","points":[[5.0,36.03609430326374],[1000.0,14.172538956663363]],"runs":10},{"band":[[5.0,24.979584869356575,25.091257802526872],[1000.0,5.087095729229843,5.320154845587986]],"dashed":false,"label":"d-psgd","points":[[5.0,25.035359069866068],[1000.0,5.202320347098215]],"runs":10},{"band":[],"dashed":true,"label":"d-psgd (wire bound)","points":[[5.0,27.28843237706481],[1000.0,2.469167974676017]],"runs":10},{"band":[[5.0,6.46725836077349,7.059677114980001],[1000.0,4.7948259470437655,5.162993063615566]],"dashed":false,"label":"ecd","points":[[5.0,6.756978307366073],[1000.0,4.975505311607144]],"runs":10},{"band":[],"dashed":true,"label":"ecd (wire bound)","points":[[5.0,8.761034085101475],[1000.0,2.375889602602313]],"runs":10}],"title":"latency 10 ms","x":"wall_s","x_label":"bandwidth (Mbit/s)","y_label":"epoch time (s)"},
    {"key":"bandwidth 5 Mbit/s","log_x":false,"series":[{"band":[[0.13,22.910389628682108,23.110317279016563],[1.0,22.587609155420527,22.896616581984237],[5.0,22.428655894065876,22.576811755122282],[10.0,36.61784063286492,36.90214448495771]],"dashed":false,"label":"allreduce","points":[[0.13,23.010136316517855],[1.0,22.741588034598212],[5.0,22.502611893750004],[10.0,36.75971770513392]],"runs":10},{"band":[],"dashed":true,"label":"allreduce (wire bound)","points":[[0.13,22.597454252390747],[1.0,25.459228929363686],[5.0,38.59899184254583],[10.0,55.01082743890315]],"runs":10},{"band":[[0.13,22.097181983030012,22.227619353891413],[1.0,22.074378832511933,22.2120807404874],[5.0,22.103630721788505,22.283517431567894],[10.0,23.164205748738414,23.343942324569245]],"dashed":false,"label":"allreduce-rhd","points":[[0.13,22.162304706696425],[1.0,22.143122745535713],[5.0,22.1933918203125],[10.0,23.253900382366073]],"runs":10},{"band":[],"dashed":true,"label":"allreduce-rhd (wire bound)","points":[[0.13,22.13955032039731],[1.0,23.362908934252584],[5.0,28.96980056256774],[10.0,36.03609430326374]],"runs":10},{"band":[[0.13,24.932751542010685,25.128975920751873],[1.0,24.972064255799893,25.38022527462046],[5.0,25.0831630636336,26.305805854831757],[10.0,24.979584869356575,25.091257802526872]],"dashed":false,"label":"d-psgd","points":[[0.13,25.030671447991075],[1.0,25.175317602455358],[5.0,25.687211171651786],[10.0,25.035359069866068]],"runs":10},{"band":[],"dashed":true,"label":"d-psgd (wire bound)","points":[[0.13,24.95497984207954],[1.0,25.165039678018445],[5.0,26.111144377372522],[10.0,27.28843237706481]],"runs":10},{"band":[[0.13,6.56185769054599,6.715106656876186],[1.0,6.626591153450174,6.739016869961558],[5.0,6.546299413648882,6.665814909717138],[10.0,6.46725836077349,7.059677114980001]],"dashed":false,"label":"ecd","points":[[0.13,6.638039941071429],[1.0,6.682567588392859],[5.0,6.605786874776787],[10.0,6.756978307366073]],"runs":10},{"band":[],"dashed":true,"label":"ecd (wire bound)","points":[[0.13,6.450035044120081],[1.0,6.6550040103672385],[5.0,7.588664818535224],[10.0,8.761034085101475]],"runs":10}],"title":"bandwidth 5 Mbit/s","x":"wall_s","x_label":"latency (ms)","y_label":"epoch time (s)"},
    {"key":"bandwidth 20 Mbit/s","log_x":false,"series":[{"band":[[0.13,6.058779461382977,6.214492164328451],[5.0,20.541620335620344,21.06189320627344]],"dashed":false,"label":"allreduce","points":[[0.13,6.136141905803569],[5.0,20.800130138839286]],"runs":10},{"band":[],"dashed":true,"label":"allreduce (wire bound)","points":[[0.13,5.9713110399369835],[5.0,21.95756809804003]],"runs":10},{"band":[[0.13,5.668764312601174,5.750088236850093],[5.0,9.784768725525435,10.263849973534935]],"dashed":false,"label":"allreduce-rhd","points":[[0.13,5.709281477678572],[5.0,10.021446912723217]],"runs":10},{"band":[],"dashed":true,"label":"allreduce-rhd (wire bound)","points":[[0.13,5.668813098865566],[5.0,12.51585580036468]],"runs":10},{"band":[[0.13,6.516503737383233,7.293014221847931],[5.0,6.686213482738395,7.438478892311184]],"dashed":false,"label":"d-psgd","points":[[0.13,6.8938345232142835],[5.0,7.05232286986607]],"runs":10},{"band":[],"dashed":true,"label":"d-psgd (wire bound)","points":[[0.13,6.269154963683809],[5.0,7.415820717759635]],"runs":10},{"band":[[0.13,2.0139690172238254,2.3756185406109993],[5.0,3.1486356461601828,3.6745506482004244]],"dashed":false,"label":"ecd","points":[[0.13,2.18733219642857],[5.0,3.401443980803574]],"runs":10},{"band":[],"dashed":true,"label":"ecd (wire bound)","points":[[0.13,1.632786503706783],[5.0,2.7720179915977043]],"runs":10}],"title":"bandwidth 20 Mbit/s","x":"wall_s","x_label":"latency (ms)","y_label":"epoch time (s)"},
    {"key":"bandwidth 100 Mbit/s","log_x":false,"series":[{"band":[[0.13,2.6580574412970988,2.9513376913122125],[5.0,20.33649944147854,20.67248753111099]],"dashed":false,"label":"allreduce","points":[[0.13,2.8008614946428585],[5.0,20.503805284151788]],"runs":10},{"band":[],"dashed":true,"label":"allreduce (wire bound)","points":[[0.13,1.5364021923259332],[5.0,17.516270707446132]],"runs":10},{"band":[[0.13,2.0306097813038146,2.3496256005893756],[5.0,9.750095046168676,10.062826805976334]],"dashed":false,"label":"allreduce-rhd","points":[[0.13,2.1843014276785695],[5.0,9.90522679151786]],"runs":10},{"band":[],"dashed":true,"label":"allreduce-rhd (wire bound)","points":[[0.13,1.2807048171111137],[5.0,8.130030300714095]],"runs":10},{"band":[[0.13,1.8252896884171816,1.9993608142831676],[5.0,3.077659226494709,3.653579858565631]],"dashed":false,"label":"d-psgd","points":[[0.13,1.910343602008928],[5.0,3.3532780620535703]],"runs":10},{"band":[],"dashed":true,"label":"d-psgd (wire bound)","points":[[0.13,1.280723424056303],[5.0,2.4222276085026655]],"runs":10},{"band":[[0.13,2.215572242168805,2.881061065604211],[5.0,3.2365209449874457,3.75779365630572]],"dashed":false,"label":"ecd","points":[[0.13,2.5264993419642856],[5.0,3.487431415178572]],"runs":10},{"band":[],"dashed":true,"label":"ecd (wire bound)","points":[[0.13,0.35100848938789103],[5.0,1.4929253413347685]],"runs":10}],"title":"bandwidth 100 Mbit/s","x":"wall_s","x_label":"latency (ms)","y_label":"epoch time (s)"},
    {"key":"bandwidth 1000 Mbit/s","log_x":false,"series":[{"band":[[0.13,2.57942764197067,3.1023482882486313],[1.0,6.331015411027845,6.6785476852737355],[5.0,20.679118728422516,21.248177525888952],[10.0,36.930194994503665,37.32638171054558]],"dashed":false,"label":"allreduce","points":[[0.13,2.8288306647321453],[1.0,6.5024601743303565],[5.0,20.961717148660714],[10.0,37.127759897544635]],"runs":10},{"band":[],"dashed":true,"label":"allreduce (wire bound)","points":[[0.13,0.537573711247904],[1.0,3.392191871469971],[5.0,16.517306232370995],[10.0,32.92352090509749]],"runs":10},{"band":[[0.13,1.8574426574055496,2.1112209994629216],[1.0,3.7621472214391707,4.408486816903702],[5.0,9.759645218793816,10.29704033862429],[10.0,17.150876212969735,17.604664673927903]],"dashed":false,"label":"allreduce-rhd","points":[[0.13,1.9802706743303577],[1.0,4.072514754910714],[5.0,10.024742416071428],[10.0,17.376289149107144]],"runs":10},{"band":[],"dashed":true,"label":"allreduce-rhd (wire bound)","points":[[0.13,0.29273447880023945],[1.0,1.51624295803805],[5.0,7.141147742461369],[10.0,14.172538956663363]],"runs":10},{"band":[[0.13,1.849263777413417,2.2523257787389963],[1.0,2.911575444994266,3.2940029185890465],[5.0,3.1668224149844524,3.418406374541481],[10.0,5.087095729229843,5.320154845587986]],"dashed":false,"label":"d-psgd","points":[[0.13,2.040868559598215],[1.0,3.0968916696428557],[5.0,3.290210620982143],[10.0,5.202320347098215]],"runs":10},{"band":[],"dashed":true,"label":"d-psgd (wire bound)","points":[[0.13,0.1558933725212812],[1.0,0.35980262477398106],[5.0,1.2972120193562682],[10.0,2.469167974676017]],"runs":10},{"band":[[0.13,2.1611222092341333,2.7368464278332616],[1.0,1.9747294026086724,2.3778067165572367],[5.0,2.9421717504215823,3.1971612743950284],[10.0,4.7948259470437655,5.162993063615566]],"dashed":false,"label":"ecd","points":[[0.13,2.43200731875],[1.0,2.166915973660714],[5.0,3.067017701785713],[10.0,4.975505311607144]],"runs":10},{"band":[],"dashed":true,"label":"ecd (wire bound)","points":[[0.13,0.06254104112994854],[1.0,0.2664441998074236],[5.0,1.203982548596026],[10.0,2.375889602602313]],"runs":10}],"title":"bandwidth 1000 Mbit/s","x":"wall_s","x_label":"latency (ms)","y_label":"epoch time (s)"}
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
