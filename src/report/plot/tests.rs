//! The figures' tests: panels from frames, reaches, and what is drawn.

use super::*;
use crate::experiment::manifest::FigureKind;
use crate::records::curves::tests::log;
use crate::records::curves::{curve, write_curves_csv};
use crate::records::results::RunRecord;
use std::collections::BTreeMap;

#[test]
fn the_legend_goes_to_the_corner_no_line_crosses() {
    let line = |pts: &[(f64, f64)]| Series {
        label: "a".into(),
        runs: 1,
        points: pts.to_vec(),
        band: vec![],
        dashed: false,
    };
    let corner = |s: &[Series]| legend_corner(s, [0.0, 8.0], [0.0, 1.0], (false, false));
    // rising to the upper right: the legend moves to the lower right
    let rising = [line(&[(1.0, 0.2), (2.0, 0.9), (8.0, 0.95)])];
    assert!(matches!(corner(&rising), SeriesLabelPosition::LowerRight));
    // a falling loss curve leaves the upper right free
    let falling = [line(&[(0.0, 1.0), (1.0, 0.3), (8.0, 0.1)])];
    assert!(matches!(corner(&falling), SeriesLabelPosition::UpperRight));
    // a band counts as data too
    let mut banded = line(&[(0.0, 0.5), (8.0, 0.5)]);
    banded.band = vec![(0.0, 0.45, 0.55), (8.0, 0.0, 1.0)];
    assert!(matches!(
        corner(&[banded]),
        SeriesLabelPosition::UpperLeft | SeriesLabelPosition::LowerLeft
    ));
}

fn run(id: &str, point: &[(&str, &str)]) -> RunRecord {
    RunRecord {
        run_id: id.into(),
        point: point
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect(),
        metrics: BTreeMap::new(),
    }
}

/// A series keeps its colour in a panel where another is missing (all
/// of DCD's runs diverged at 2 bits in convex).
#[test]
fn a_series_keeps_its_place_across_panels() {
    let panel = |labels: &[&str]| Panel {
        title: String::new(),
        x_label: String::new(),
        y_label: String::new(),
        log_x: false,
        series: labels
            .iter()
            .map(|l| Series {
                label: (*l).into(),
                runs: 1,
                points: Vec::new(),
                band: Vec::new(),
                dashed: false,
            })
            .collect(),
    };
    let panels = [
        panel(&["d-psgd", "choco", "ecd", "moniqua"]),
        panel(&["d-psgd", "choco", "dcd", "ecd", "moniqua (wire bound)"]),
    ];
    assert_eq!(
        series_order(&panels),
        ["d-psgd", "choco", "dcd", "ecd", "moniqua"]
    );
}

#[test]
fn bands_stay_inside_the_metrics_range() {
    use crate::records::metrics::{Range, range};
    assert_eq!(range("avg_test_loss"), Range::Positive);
    assert_eq!(range("avg_test_accuracy"), Range::Fraction);
    assert_eq!(range("objective"), Range::Real);
    // figure 2(a)'s case: a test loss whose symmetric band went below 0
    let (lo, hi) = band_within(Range::Positive, 0.6, 1.4);
    assert!(lo > 0.0 && hi > 0.6 + 1.4, "{lo} {hi}");
    let (lo, hi) = band_within(Range::Fraction, 0.95, 0.1);
    assert!(lo < 0.95 && hi < 1.0, "{lo} {hi}");
    assert_eq!(band_within(Range::Real, -1.0, 2.0), (-3.0, 1.0));
    // a small interval is nearly the symmetric one
    let (lo, hi) = band_within(Range::Positive, 10.0, 0.1);
    assert!((lo - 9.9).abs() < 1e-3 && (hi - 10.1).abs() < 1e-3);
    // at the edge: cut
    assert_eq!(band_within(Range::Fraction, 1.0, 0.2), (0.8, 1.0));
}

#[test]
fn seeds_average_into_a_series() {
    let curves = vec![
        (
            run(
                "a",
                &[
                    ("algorithm", "moniqua"),
                    ("network", "1mbit"),
                    ("seed", "0"),
                ],
            ),
            curve(&[log(0, &[3.0, 2.0, 1.0], 1.0)]),
        ),
        (
            run(
                "b",
                &[
                    ("algorithm", "moniqua"),
                    ("network", "1mbit"),
                    ("seed", "1"),
                ],
            ),
            curve(&[log(0, &[1.0, 0.0, 1.0], 3.0)]),
        ),
        (
            run(
                "c",
                &[("algorithm", "d-psgd"), ("network", "1mbit"), ("seed", "0")],
            ),
            curve(&[log(0, &[5.0, 4.0], 2.0)]),
        ),
        (
            run(
                "d",
                &[("algorithm", "d-psgd"), ("network", "9mbit"), ("seed", "0")],
            ),
            curve(&[log(0, &[5.0], 0.5)]),
        ),
    ];
    let spec = FigureSpec {
        title: None,
        kind: FigureKind::Curves,
        bound: None,
        x: "wall_s".into(),
        y: "train_loss".into(),
        panels: Some("network".into()),
        series: "algorithm".into(),
        smooth: 2,
        log_y: false,
        log_x: false,
        x_range: None,
        y_range: None,
        targets: Vec::new(),
        also_x: Vec::new(),
        scale: None,
    };
    let frame = CurvesFrame::new("train_loss", &curves).unwrap();
    let p = panels(&spec, &frame).unwrap();
    insta::assert_debug_snapshot!("figure_series", p);
    // the band of a loss (positive): the t interval of log m, m = 2,
    // half-width t(1) * sd / sqrt(2) = 12.7 for the values 3 and 1,
    // so 2 e^(-h/2) to 2 e^(h/2), where 2 -+ h would reach -10.7
    let half = 12.7062 * 2f64.sqrt() / 2f64.sqrt();
    let (x, lo, hi) = p[0].series[0].band[0];
    let (want_lo, want_hi) = (2.0 * (-half / 2.0).exp(), 2.0 * (half / 2.0).exp());
    assert!(x == 2.0 && (lo - want_lo).abs() < 1e-5 && (hi / want_hi - 1.0).abs() < 1e-4);
    assert!(
        p.iter()
            .flat_map(|p| &p.series)
            .flat_map(|s| &s.band)
            .all(|b| b.1 > 0.0)
    );
    assert!(p[0].series[1].band.is_empty(), "one run: no band");
    // time to a target: both moniqua runs first reach 1.5 at 3 s, the
    // d-psgd runs never do
    let timed = FigureSpec {
        targets: vec![1.5],
        ..spec.clone()
    };
    let r = reaches(&timed, &curves);
    assert_eq!(r.len(), 3);
    assert_eq!(
        (r[0].series.as_str(), r[0].mean, r[0].reached, r[0].runs),
        ("moniqua", Some(3.0), 2, 2)
    );
    assert_eq!((r[1].reached, r[1].mean), (0, None));
    let md = reaches_markdown("T", &timed, &r);
    assert!(md.contains("| 1mbit | moniqua | 3.000 ± 0 (2/2) |"), "{md}");
    assert!(md.contains("| 1mbit | d-psgd | never (0/1) |"), "{md}");
    // an x range shows only its part of each series
    let first = FigureSpec {
        x_range: Some([0.0, 4.0]),
        ..spec.clone()
    };
    let cut = panels(&first, &frame).unwrap();
    assert_eq!(cut[0].series[0].points.len(), 2);
    assert!(cut[0].series[0].band.iter().all(|b| b.0 <= 4.0));
    let dir = std::env::temp_dir().join(format!("repro-plot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join("f.svg");
    render(&svg, ImageFormat::Svg, "test", &spec, &p).unwrap();
    let png = dir.join("f.png");
    render(&png, ImageFormat::Png, "test", &spec, &p).unwrap();
    assert_png_has_lines(&png, size_for(p.len(), "test"));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.contains("<svg") && text.contains("moniqua") && text.contains("wall-clock time (s)")
    );
    write_curves_csv(&dir.join("curves.csv"), "train_loss", &curves).unwrap();
    let csv = std::fs::read_to_string(dir.join("curves.csv")).unwrap();
    assert!(csv.starts_with("run_id,algorithm,network,seed,iteration,epoch,wall_s,bytes,train_loss\na,moniqua,1mbit,0,0,0,1,0,3\n"), "{csv}");
    let bad = FigureSpec {
        series: "colour".into(),
        ..spec
    };
    assert!(
        panels(&bad, &frame)
            .unwrap_err()
            .to_string()
            .contains("figure.series `colour`")
    );
}

#[test]
fn sweeps_make_a_panel_per_fixed_latency_and_bandwidth() {
    use crate::experiment::condition::Condition;
    use crate::records::metrics::Cell;
    use crate::records::results::condition_cells;

    let row = |alg: &str, net: &str, seed: &str, t: f64, bound: f64| RunRecord {
        run_id: format!("{alg}{net}{seed}"),
        point: [("algorithm", alg), ("network", net), ("seed", seed)]
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect(),
        metrics: [("epoch_time_s", t), ("wire_bound_epoch_s", bound)]
            .iter()
            .map(|(k, v)| ((*k).into(), Cell::Number(Some(*v))))
            .chain([("status".into(), Cell::Text("completed".into()))])
            .chain(condition_cells(Condition::from_label(net).as_ref()))
            .collect(),
    };
    let mut failed = row("moniqua", "10mbit/5ms", "0", 1.0, 1.0);
    failed
        .metrics
        .insert("status".into(), Cell::Text("failed".into()));
    let rows = vec![
        // only completed runs count: no panel of 5 ms has moniqua
        failed,
        row("d-psgd", "10mbit/0.15ms", "0", 10.0, 9.0),
        row("d-psgd", "10mbit/0.15ms", "1", 12.0, 9.0),
        row("d-psgd", "100mbit/0.15ms", "0", 2.0, 0.9),
        row("moniqua", "10mbit/0.15ms", "0", 3.0, 2.5),
        row("moniqua", "100mbit/0.15ms", "0", 1.0, 0.25),
        row("d-psgd", "100mbit/5ms", "0", 4.0, 2.0),
        // a latency with a single bandwidth makes no bandwidth panel
        row("d-psgd", "1mbit/5ms", "0", 90.0, 80.0),
    ];
    let spec = FigureSpec {
        title: None,
        kind: FigureKind::Sweep,
        x: String::new(),
        y: "epoch_time_s".into(),
        bound: Some("wire_bound_epoch_s".into()),
        panels: None,
        series: "algorithm".into(),
        smooth: 1,
        log_y: true,
        log_x: false,
        x_range: None,
        y_range: None,
        targets: Vec::new(),
        also_x: Vec::new(),
        scale: None,
    };
    let p = sweep_panels(&spec, &RunsFrame::new(&rows).unwrap()).unwrap();
    let titles: Vec<&str> = p.iter().map(|p| p.title.as_str()).collect();
    assert_eq!(
        titles,
        ["latency 0.15 ms", "latency 5 ms", "bandwidth 100 Mbit/s"]
    );
    insta::assert_debug_snapshot!("sweep_series", p[0]);
    assert_eq!(p[2].series[0].points, vec![(0.15, 2.0), (5.0, 4.0)]);
    let svg = std::env::temp_dir().join(format!("repro-sweep-{}.svg", std::process::id()));
    render(&svg, ImageFormat::Svg, "sweep", &spec, &p).unwrap();
    assert!(
        std::fs::read_to_string(&svg)
            .unwrap()
            .contains("bandwidth (Mbit/s)")
    );
}

/// A scaling figure: a panel per value of the panel key, each series
/// y against x with seeds averaged and points in x order, and the bound
/// one dashed line averaged over the series at each x.
#[test]
fn scaling_figures_draw_y_against_x_with_one_reference() {
    use crate::records::metrics::Cell;
    let row = |alg: &str, bits: &str, n: &str, seed: &str, x: f64, t: f64, s: f64| RunRecord {
        run_id: format!("{alg}{bits}{n}{seed}"),
        point: [
            ("algorithm", alg),
            ("bits", bits),
            ("workers", n),
            ("seed", seed),
        ]
        .iter()
        .map(|(k, v)| ((*k).into(), (*v).into()))
        .collect(),
        metrics: [("coordinates", x), ("iteration_s", t), ("stream_s", s)]
            .iter()
            .map(|(k, v)| ((*k).into(), Cell::Number(Some(*v))))
            .chain([("status".into(), Cell::Text("completed".into()))])
            .collect(),
    };
    let rows = vec![
        row("moniqua", "1", "64", "0", 6.4e6, 0.004, 0.002),
        row("moniqua", "1", "8", "0", 8e5, 0.0006, 0.0002),
        row("moniqua", "1", "8", "1", 8e5, 0.0008, 0.0004),
        row("d-psgd", "1", "8", "0", 8e5, 0.002, 0.0003),
        row("d-psgd", "1", "64", "0", 6.4e6, 0.02, 0.002),
        // one size only: no panel
        row("moniqua", "8", "8", "0", 8e5, 0.001, 0.0003),
        // two sizes of one series: a panel of it alone
        row("choco", "2", "8", "0", 8e5, 0.001, 0.0003),
        row("choco", "2", "64", "0", 6.4e6, 0.01, 0.003),
    ];
    let spec = FigureSpec {
        title: None,
        kind: FigureKind::Scaling,
        x: "coordinates".into(),
        y: "iteration_s".into(),
        bound: Some("stream_s".into()),
        panels: Some("bits".into()),
        series: "algorithm".into(),
        smooth: 1,
        log_y: true,
        log_x: true,
        x_range: None,
        y_range: None,
        targets: Vec::new(),
        also_x: Vec::new(),
        scale: None,
    };
    let p = scaling_panels(&spec, &RunsFrame::new(&rows).unwrap()).unwrap();
    assert_eq!(p.len(), 2, "{p:?}");
    assert_eq!(p[0].title, "bits = 1");
    let labels: Vec<&str> = p[1].series.iter().map(|s| s.label.as_str()).collect();
    assert_eq!(labels, ["choco", "reading every model once"]);
    let labels: Vec<&str> = p[0].series.iter().map(|s| s.label.as_str()).collect();
    assert_eq!(labels, ["moniqua", "d-psgd", "reading every model once"]);
    let close = |a: &[(f64, f64)], b: &[(f64, f64)]| {
        a.len() == b.len()
            && a.iter()
                .zip(b)
                .all(|(p, q)| p.0 == q.0 && (p.1 - q.1).abs() < 1e-12)
    };
    assert!(
        close(&p[0].series[0].points, &[(8e5, 0.0007), (6.4e6, 0.004)]),
        "{p:?}"
    );
    assert!(
        close(&p[0].series[1].points, &[(8e5, 0.002), (6.4e6, 0.02)]),
        "{p:?}"
    );
    // 8e5: moniqua's seeds average 0.0003, d-psgd's 0.0003; 6.4e6: 0.002
    assert!(
        close(&p[0].series[2].points, &[(8e5, 0.0003), (6.4e6, 0.002)]),
        "{p:?}"
    );
    assert!(p[0].series[2].dashed && p[0].log_x);
    // against a numeric grid key: the series' points at each bits
    let by_bits = FigureSpec {
        title: None,
        x: "bits".into(),
        bound: None,
        panels: Some("workers".into()),
        log_x: false,
        ..spec.clone()
    };
    let p = scaling_panels(&by_bits, &RunsFrame::new(&rows).unwrap()).unwrap();
    assert_eq!(p[0].title, "workers = 64");
    // axes in words; a key without words is named as it is, never as
    // another metric
    assert_eq!(p[0].x_label, "bits per coordinate");
    assert_eq!(p[0].y_label, "seconds per iteration (host)");
    assert_eq!(column_label("bytes"), "bytes sent, all workers");
    assert_eq!(axis_label("bytes"), "bytes sent per worker");
    assert_eq!(axis_label("gamma"), "gamma");
    assert!(
        close(&p[0].series[0].points, &[(1.0, 0.004)]) && p[0].series[1].label == "d-psgd",
        "{p:?}"
    );
    assert!(
        close(&p[1].series[0].points, &[(1.0, 0.0007), (8.0, 0.001)]),
        "{p:?}"
    );
    assert_eq!(
        check_spec(
            &by_bits,
            &["bits".into(), "workers".into(), "algorithm".into()]
        ),
        Ok(())
    );
    let bad = FigureSpec {
        title: None,
        x: "nothing".into(),
        ..by_bits
    };
    let (path, why) =
        check_spec(&bad, &["bits".into(), "workers".into(), "algorithm".into()]).unwrap_err();
    assert_eq!(path, "figure.x");
    assert!(
        why.contains("or a grid key (bits, workers, algorithm)"),
        "{why}"
    );
}

/// Decodes a PNG and checks its size, that it is mostly white (a
/// background, not noise), and that it holds the first series' colour
/// and dark text pixels.
fn assert_png_has_lines(path: &Path, size: (u32, u32)) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), size);
    assert_eq!(info.color_type, png::ColorType::Rgb);
    let px: Vec<&[u8]> = buf[..info.buffer_size()].chunks(3).collect();
    let white = px.iter().filter(|p| p == &&[255, 255, 255]).count();
    let first = COLORS[0];
    let coloured = px
        .iter()
        .filter(|p| p == &&[first.0, first.1, first.2])
        .count();
    let dark = px.iter().filter(|p| p.iter().all(|c| *c < 80)).count();
    assert!(white * 2 > px.len(), "background is not white");
    assert!(coloured > 50, "no pixel of the first series' colour");
    assert!(dark > 500, "no text or axes drawn ({dark} dark pixels)");
}

/// A one-panel figure of the train loss per iteration.
fn train_loss_by_iteration(y_range: Option<[f64; 2]>) -> FigureSpec {
    FigureSpec {
        title: None,
        kind: FigureKind::Curves,
        bound: None,
        x: "iteration".into(),
        y: "train_loss".into(),
        panels: None,
        series: "algorithm".into(),
        smooth: 1,
        log_y: false,
        log_x: false,
        x_range: None,
        y_range,
        targets: Vec::new(),
        also_x: Vec::new(),
        scale: None,
    }
}

/// Figure 1's defect: series that lie on each other (DCD and ECD under
/// CHOCO, DeepSqueeze and Moniqua). Five series with the same points:
/// each still shows many pixels of its own colour (its markers, on top
/// of every line at places of its own), not just its legend entry.
#[test]
fn no_series_hides_under_another() {
    let points: Vec<(f64, f64)> = (0..200).map(|i| (i as f64, i as f64 / 200.0)).collect();
    let series: Vec<Series> = (0..5)
        .map(|k| Series {
            label: format!("s{k}"),
            runs: 1,
            points: points.clone(),
            band: Vec::new(),
            dashed: false,
        })
        .collect();
    let panel = Panel {
        title: "p".into(),
        x_label: "iteration".into(),
        y_label: "train loss".into(),
        log_x: false,
        series,
    };
    let spec = train_loss_by_iteration(None);
    let path = std::env::temp_dir().join(format!("repro-hidden-{}.png", std::process::id()));
    render(&path, ImageFormat::Png, "t", &spec, &[panel]).unwrap();
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let px: Vec<&[u8]> = buf[..info.buffer_size()].chunks(3).collect();
    let counts: Vec<usize> = COLORS[..5]
        .iter()
        .map(|c| px.iter().filter(|p| p == &&[c.0, c.1, c.2]).count())
        .collect();
    // a legend entry alone is under 100 pixels
    assert!(
        counts.iter().all(|&c| c >= 250),
        "pixels of each series' colour: {counts:?}"
    );
    let _ = std::fs::remove_file(&path);
}

/// The quickstart's defect: DCD and ECD above `y_range`, pinned on the
/// top edge as if that were their value. Their legend says so, and
/// open triangles mark the edge.
#[test]
fn values_beyond_the_y_range_are_marked() {
    let series = |label: &str, ys: &[f64]| Series {
        label: label.into(),
        runs: 1,
        points: ys.iter().enumerate().map(|(i, y)| (i as f64, *y)).collect(),
        band: Vec::new(),
        dashed: false,
    };
    let s = [
        series("inside", &[0.5, 0.4, 0.3]),
        series("partly", &[3.0, 0.9, 0.8]),
        series("above", &[5.0, 4.0, 3.0]),
    ];
    assert_eq!(off_range(&s[0], (0.0, 1.0)), "");
    assert_eq!(
        off_range(&s[1], (0.0, 1.0)),
        " (partly above the range shown)"
    );
    assert_eq!(off_range(&s[2], (0.0, 1.0)), " (above the range shown)");
    let panel = Panel {
        title: "p".into(),
        x_label: "iteration".into(),
        y_label: "train loss".into(),
        log_x: false,
        series: s.to_vec(),
    };
    let spec = train_loss_by_iteration(Some([0.0, 1.0]));
    let path = std::env::temp_dir().join(format!("repro-clipped-{}.svg", std::process::id()));
    render(&path, ImageFormat::Svg, "t", &spec, &[panel]).unwrap();
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(svg.contains("above (above the range shown)"), "{svg}");
    assert!(svg.contains("partly (partly above the range shown)"));
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_fraction_is_drawn_in_percent_as_tables_show_it() {
    let panel = Panel {
        title: String::new(),
        x_label: "bits".into(),
        y_label: axis_label("avg_test_accuracy"),
        log_x: false,
        series: vec![Series {
            label: "a".into(),
            runs: 2,
            points: vec![(1.0, 0.85)],
            band: vec![(1.0, 0.8, 0.9)],
            dashed: false,
        }],
    };
    let p = scaled(
        panel,
        crate::report::table::factor(None, "avg_test_accuracy"),
    );
    assert_eq!(p.y_label, "test accuracy of the averaged model (%)");
    assert_eq!(p.series[0].points, [(1.0, 85.0)]);
    assert_eq!(p.series[0].band, [(1.0, 80.0, 90.0)]);
}

#[test]
fn time_axes_name_the_clock_of_the_backend() {
    use crate::experiment::manifest::Backend;
    let panel = Panel {
        title: String::new(),
        x_label: axis_label("wall_s"),
        y_label: axis_label("train_loss"),
        log_x: false,
        series: Vec::new(),
    };
    assert_eq!(
        on_clock_of(panel.clone(), Backend::Mpi).x_label,
        "wall-clock time (s)"
    );
    let local = on_clock_of(panel.clone(), Backend::InProcess);
    assert!(local.x_label.starts_with("virtual time") && local.y_label == "train loss");
    assert!(
        on_clock_of(panel, Backend::Sim)
            .x_label
            .contains("simulated")
    );
}

#[test]
fn ticks_have_no_float_noise() {
    assert_eq!(tick(0.700_000_000_000_1), "0.7");
    assert_eq!(tick(0.300_000_000_000_000_04), "0.3");
    assert_eq!(tick(250.0), "250");
    assert_eq!(tick(1000.0), "1000");
    assert_eq!(tick(0.13), "0.13");
    assert_eq!(tick(0.0), "0");
    assert_eq!(tick(2e-5), "2.0e-5");
}
