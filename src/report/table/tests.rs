use super::*;
use crate::records::metrics::Cell;
use crate::records::results::tests::row;

/// Groups first seen column-major (lr=0.5 of every method, then
/// lr=0.1) list row by row, as the table does; within a row, in the
/// order the runs first have them.
#[test]
fn compare_nests_groups_by_the_first_key() {
    let keys: Vec<Vec<String>> = [
        ("naive", "0.5"),
        ("moniqua", "0.5"),
        ("naive", "0.1"),
        ("moniqua", "0.1"),
        ("fine", "0.1"),
    ]
    .iter()
    .map(|(m, lr)| vec![m.to_string(), lr.to_string()])
    .collect();
    assert_eq!(nested_order(&keys), [0, 2, 1, 3, 4]);
    assert_eq!(nested_order(&keys[..1]), [0]);
    assert!(nested_order(&[]).is_empty());
}

#[test]
fn numbers_read_well() {
    assert_eq!(number(0.9123456), "0.9123");
    assert_eq!(number(91.08), "91.08");
    assert_eq!(number(1234.4), "1234");
    assert_eq!(number(3.2e-7), "3.200e-7");
    assert_eq!(number(0.0), "0");
    assert_eq!(number(f64::NAN), "NaN");
}

/// A table of `final_loss` with a row per algorithm.
fn by_algorithm(extra: Vec<crate::experiment::manifest::ExtraColumn>) -> TableSpec {
    TableSpec {
        rows: vec!["algorithm".into()],
        cols: None,
        value: "final_loss".into(),
        scale: None,
        paper: None,
        extra,
        reference: None,
    }
}

#[test]
fn tables_aggregate_seeds() {
    let rows = vec![
        row("moniqua", "0", "1.0", "completed"),
        row("moniqua", "1", "3.0", "completed"),
        row("dcd,x", "0", "NaN", "diverged"),
    ];
    let frame = RunsFrame::new(&rows).unwrap();
    let spec = by_algorithm(Vec::new());
    let md = build_table("T", "S", &spec, &frame, None)
        .unwrap()
        .markdown();
    // mean 2, sd 1.414, half-width 12.706 * 1.414 / sqrt(2) = 12.71
    assert!(md.contains("| moniqua | 2.000 ± 12.71 (n=2) |"), "{md}");
    // a diverged run without a loss counts at the worst, unbounded
    assert!(md.contains("| dcd,x | ∞ (n=1); 1 diverged |"), "{md}");
    // a cell with runs that are not valid results: a failed run counts
    // with its value (intention to treat), the valid runs' figure
    // beside it, and their health counted; a silent run is left out
    let mut mixed = rows.clone();
    mixed.push(row("moniqua", "2", "0.1", "completed"));
    mixed[3]
        .metrics
        .insert("health".into(), Cell::Text("collapsed".into()));
    mixed.push(row("moniqua", "3", "50", "completed"));
    mixed[4]
        .metrics
        .insert("health".into(), Cell::Text("silent".into()));
    let t = build_table("T", "S", &spec, &RunsFrame::new(&mixed).unwrap(), None).unwrap();
    // 1, 3 and 0.1: mean 1.367, sd 1.484, half-width 4.303 * 1.484 / sqrt(3)
    assert_eq!(
        t.rows[0],
        [
            "moniqua",
            "1.367 ± 3.687 (n=3); ok only 2.000 ± 12.71 (n=2); 2 ok, 1 collapsed, 1 silent"
        ]
    );
    let table = build_table("T_1", "S", &spec, &frame, None).unwrap();
    insta::assert_snapshot!("table_md", table.markdown());
    insta::assert_snapshot!("table_latex", table.latex());
    insta::assert_snapshot!("table_csv", table.csv().unwrap());
    // an extra column over the runs of one setting only
    let seed0 = by_algorithm(vec![crate::experiment::manifest::ExtraColumn {
        value: "final_loss".into(),
        label: "seed 0".into(),
        paper: None,
        relative_to: None,
        select: [("seed".to_string(), yaml_serde::Value::from(0))].into(),
        scale: Some(2.0),
    }]);
    let t = build_table("T", "S", &seed0, &frame, None).unwrap();
    assert_eq!(t.rows[0], ["moniqua", "2.000 ± 12.71 (n=2)", "2.000"]);
    let bad = TableSpec {
        value: "accuracy".into(),
        ..spec
    };
    assert!(build_table("T", "S", &bad, &frame, None).is_err());
}

/// Finite values whose sum overflows have their mean and sd (ten of
/// 1e308: 1e308, not ∞); a `|` in a value cannot open a cell.
#[test]
fn huge_values_keep_their_mean_and_cells_stay_cells() {
    let rows: Vec<_> = (0..10)
        .map(|i| row("a|b", &i.to_string(), "1e308", "completed"))
        .collect();
    let t = build_table(
        "T",
        "S",
        &by_algorithm(Vec::new()),
        &RunsFrame::new(&rows).unwrap(),
        None,
    )
    .unwrap();
    assert_eq!(t.rows[0][1], format!("{} ± 0 (n=10)", number(1e308)));
    assert!(t.markdown().contains("| a\\|b | "), "{}", t.markdown());
}

#[test]
fn an_extra_column_relative_to_a_reference_row() {
    let mut rows = vec![
        row("allreduce", "0", "1", "completed"),
        row("allreduce", "1", "1", "completed"),
        row("pqasgd", "0", "1", "completed"),
    ];
    for (r, bytes) in rows.iter_mut().zip(["1000", "3000", "50"]) {
        r.metrics
            .insert("bytes".into(), Cell::parse("bytes", bytes).unwrap());
    }
    let spec = by_algorithm(vec![crate::experiment::manifest::ExtraColumn {
        value: "bytes".into(),
        label: "bytes / allreduce".into(),
        paper: None,
        relative_to: Some([("algorithm".to_string(), "allreduce".to_string())].into()),
        select: BTreeMap::new(),
        scale: None,
    }]);
    let t = build_table("T", "S", &spec, &RunsFrame::new(&rows).unwrap(), None).unwrap();
    // mean of the reference's runs: 2000
    assert_eq!(t.rows[0][2], "1.000");
    assert_eq!(t.rows[1][2], "0.02500");
    let missing = TableSpec {
        extra: vec![crate::experiment::manifest::ExtraColumn {
            relative_to: Some([("algorithm".to_string(), "none".to_string())].into()),
            ..spec.extra[0].clone()
        }],
        ..spec
    };
    let t = build_table("T", "S", &missing, &RunsFrame::new(&rows).unwrap(), None).unwrap();
    assert_eq!(t.rows[1][2], "-", "no reference runs: no ratio");
}

/// Difference rows: each row's runs minus the reference row's, paired
/// by seed where the seeds match, Welch's test where they do not.
#[test]
fn a_reference_row_gives_paired_differences() {
    let rows = vec![
        row("d-psgd", "0", "1.0", "completed"),
        row("d-psgd", "1", "2.0", "completed"),
        row("d-psgd", "2", "3.0", "completed"),
        row("moniqua", "0", "1.5", "completed"),
        row("moniqua", "1", "2.4", "completed"),
        row("moniqua", "2", "3.6", "completed"),
        row("choco", "5", "1.0", "completed"),
        row("choco", "6", "2.0", "completed"),
    ];
    let spec = TableSpec {
        reference: Some([("algorithm".to_string(), "d-psgd".into())].into()),
        ..by_algorithm(Vec::new())
    };
    let t = build_table("T", "S", &spec, &RunsFrame::new(&rows).unwrap(), None).unwrap();
    assert_eq!(t.reference.as_deref(), Some("algorithm=d-psgd"));
    // differences 0.5, 0.4, 0.6: mean 0.5, sd 0.1, 4.303 * 0.1 / sqrt(3)
    assert_eq!(
        t.rows[3],
        ["Δ moniqua − d-psgd", "+0.5000 ± 0.2484 (paired t, n=3)"]
    );
    // other seeds: Welch, 1.5 - 2.0
    assert!(
        t.rows[4][1].starts_with("-0.5000 ± ") && t.rows[4][1].contains("Welch t"),
        "{:?}",
        t.rows[4]
    );
    assert_eq!(t.rows.len(), 5);
    assert!(t.markdown().contains("paired by seed"));
    // the lowest loss, the reference left out, and its difference to
    // the next by Welch's test
    assert_eq!(t.best.len(), 1, "{:?}", t.best);
    assert!(
        t.best[0].starts_with(
            "algorithm=choco 1.500 (n=2); minus the next, algorithm=moniqua: -1.000 ± "
        ) && t.best[0].ends_with("(Welch t, n=2)"),
        "{:?}",
        t.best
    );
    assert!(t.markdown().contains(
        "\nLowest mean per column (rows with at least two valid runs, the reference \
         algorithm=d-psgd left out): algorithm=choco 1.500"
    ));
    // the reference names a row by its row keys
    let bad = TableSpec {
        reference: Some([("seed".to_string(), "0".into())].into()),
        ..spec
    };
    let (path, _) = check_spec(&bad, &["algorithm".into(), "seed".into()]).unwrap_err();
    assert_eq!(path, "table.reference.seed");
}

/// With two row keys the best is chosen among the rows that share the
/// first: one line per network, never a method of one network against
/// another's.
#[test]
fn the_best_row_is_chosen_per_setting_of_the_other_row_keys() {
    let mut rows = Vec::new();
    for (net, alg, losses) in [
        ("fast", "a", ["1.0", "1.1"]),
        ("fast", "b", ["2.0", "2.1"]),
        ("slow", "a", ["9.0", "9.1"]),
        ("slow", "b", ["5.0", "5.2"]),
    ] {
        for (seed, loss) in losses.iter().enumerate() {
            let mut r = row(alg, &seed.to_string(), loss, "completed");
            r.run_id = format!("{net}{alg}{seed}");
            r.point.insert("network".into(), net.into());
            rows.push(r);
        }
    }
    let spec = TableSpec {
        rows: vec!["network".into(), "algorithm".into()],
        ..by_algorithm(Vec::new())
    };
    let t = build_table("T", "S", &spec, &RunsFrame::new(&rows).unwrap(), None).unwrap();
    assert_eq!(t.best.len(), 2, "{:?}", t.best);
    assert!(
        t.best[0].starts_with(
            "network=fast: algorithm=a 1.050 (n=2); minus the next, algorithm=b: -1.000"
        ),
        "{:?}",
        t.best
    );
    assert!(
        t.best[1].starts_with(
            "network=slow: algorithm=b 5.100 (n=2); minus the next, algorithm=a: -3.950"
        ),
        "{:?}",
        t.best
    );
}

/// LaTeX's special characters are escaped once each, and a line break
/// in a title cannot end its comment.
#[test]
fn latex_escapes_every_special_character_once() {
    let t = Table {
        title: "a\n\\input{x}".into(),
        source: "s".into(),
        value: "v".into(),
        reference: None,
        extras: false,
        header: vec!["a_b".into(), "{c}".into()],
        rows: vec![vec!["\\x".into(), "1 ± 2 & 50% ~^".into()]],
        tidy: Vec::new(),
        best: Vec::new(),
    };
    let tex = t.latex();
    assert!(tex.starts_with("% a \\input{x}\n"), "{tex}");
    assert!(tex.contains("a\\_b & \\{c\\}"), "{tex}");
    assert!(
        tex.contains(
            "\\textbackslash{}x & 1 $\\pm$ 2 \\& 50\\% \\textasciitilde{}\\textasciicircum{}"
        ),
        "{tex}"
    );
}

#[test]
fn the_papers_numbers_sit_beside_ours() {
    // a path inside the project (the tests run in the source tree):
    // scratch/, which git ignores
    let dir =
        std::path::PathBuf::from("scratch").join(format!("test-paper-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("p.csv");
    std::fs::write(
        &csv,
        "model,bits,alg,acc,sd,div\nresnet20,1,moniqua,91.08,0.19,false\nresnet20,1,dcd,,,true\nresnet110,1,moniqua,92.97,0.23,false\n",
    )
    .unwrap();
    let mut rows = vec![
        row("moniqua", "0", "0.9", "completed"),
        row("moniqua", "1", "0.8", "completed"),
        row("dcd", "0", "0.1", "diverged"),
        row("choco", "0", "0.7", "completed"),
    ];
    for r in &mut rows {
        r.point.insert("bits".into(), "1".into());
    }
    let spec: TableSpec = yaml_serde::from_str(&format!(
        "{{rows: [algorithm], cols: bits, value: final_loss, scale: 100, paper: {{file: {}, keys: {{model: model, bits: bits, algorithm: alg}}, defaults: {{model: resnet20}}, value: acc, sd: sd, diverged: div, label: ResNet20}}}}",
        csv.display()
    ))
    .unwrap();
    let paper = load_paper(&spec).unwrap().unwrap();
    let t = build_table(
        "T",
        "S",
        &spec,
        &RunsFrame::new(&rows).unwrap(),
        Some(&paper),
    )
    .unwrap();
    insta::assert_snapshot!("table_with_paper", t.markdown());
    // the tidy CSV keeps the paper's text beside each cell and extra
    insta::assert_snapshot!("table_with_paper_csv", t.csv().unwrap());
    // sd 7.071 over 2 runs: half-width 12.706 * 7.071 / sqrt(2) = 63.53
    assert_eq!(
        t.rows[0],
        ["moniqua", "85.00 ± 63.53 (n=2)", "91.08 ± 0.19"]
    );
    // a diverged run with a finite value counts with it
    assert_eq!(t.rows[1], ["dcd", "10.00 (n=1); 1 diverged", "diverge"]);
    assert_eq!(t.rows[2], ["choco", "70.00 (n=1)", "-"]);
    let bad: TableSpec = yaml_serde::from_str(&format!(
        "{{rows: [algorithm], value: final_loss, paper: {{file: {}, keys: {{bits: budget}}, value: acc, label: x}}}}",
        csv.display()
    ))
    .unwrap();
    let err = load_paper(&bad).unwrap_err().to_string();
    assert!(err.contains("no column `budget`"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
    // a path outside the project is refused, before it is read
    for outside in ["/etc/passwd", "../x.csv"] {
        let spec: TableSpec = yaml_serde::from_str(&format!(
            "{{rows: [algorithm], value: final_loss, paper: {{file: \"{outside}\", keys: {{bits: bits}}, value: acc, label: x}}}}"
        ))
        .unwrap();
        let err = load_paper(&spec).unwrap_err().to_string();
        assert!(err.contains("inside the project"), "{outside}: {err}");
    }
}
