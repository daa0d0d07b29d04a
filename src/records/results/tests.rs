use super::*;

/// A run with `status` and `final_loss`, every other metric 0.
pub(crate) fn row(alg: &str, seed: &str, loss: &str, status: &str) -> RunRecord {
    RunRecord {
        run_id: format!("{alg}{seed}"),
        point: [
            ("algorithm".to_string(), alg.to_string()),
            ("seed".to_string(), seed.to_string()),
        ]
        .into(),
        metrics: METRICS
            .iter()
            .filter_map(|m| {
                let v = match *m {
                    // not judged: its status stands for it
                    "health" | "health_note" | "health_kind" | "premise" | "premise_note" => {
                        return None;
                    }
                    "status" => status.to_string(),
                    "final_loss" => loss.to_string(),
                    _ => "0".to_string(),
                };
                Some((m.to_string(), Cell::parse(m, &v)?))
            })
            .collect(),
    }
}

#[test]
fn csv_round_trips() {
    let rows = vec![
        row("moniqua", "0", "1.0", "completed"),
        row("moniqua", "1", "3.0", "completed"),
        row("dcd,x", "0", "NaN", "diverged"),
        // a field with quotes and a comma reads back whole
        row("one \"quoted\", x", "2", "0.5", "completed"),
    ];
    let mut rows = rows;
    // an error's text may have lines
    rows[2]
        .metrics
        .insert("error".into(), Cell::Text("two\nlines, \"quoted\"".into()));
    let path = std::env::temp_dir().join(format!("repro-runs-{}.csv", std::process::id()));
    write_csv(&path, &rows).unwrap();
    let back = read_csv(&path).unwrap();
    assert_eq!(back, rows);
    // the same run twice, cell for cell: counted once
    let mut twice = rows.clone();
    twice.push(rows[0].clone());
    write_csv(&path, &twice).unwrap();
    assert_eq!(read_csv(&path).unwrap(), rows);
    std::fs::remove_file(&path).unwrap();
}

/// A runs.csv record no run writes is refused, naming its record and
/// column: the same id with other results, a control character in a
/// grid value (a NUL in `algorithm`), text in a number column.
#[test]
fn a_record_no_run_writes_is_refused_where_it_is() {
    let path = std::env::temp_dir().join(format!("repro-runs-bad-{}.csv", std::process::id()));
    let refused = |rows: &[RunRecord]| {
        write_csv(&path, rows).unwrap();
        format!("{:#}", read_csv(&path).unwrap_err())
    };
    let a = row("moniqua", "0", "1.0", "completed");
    let mut b = row("moniqua", "0", "2.0", "completed");
    b.run_id = a.run_id.clone();
    let e = refused(&[a.clone(), b]);
    assert!(
        e.contains("twice with different results (records 2 and 3)"),
        "{e}"
    );
    let mut nul = row("moniqua", "1", "1.0", "completed");
    nul.point.insert("algorithm".into(), "moni\0qua".into());
    let e = refused(&[a.clone(), nul]);
    assert!(
        e.contains("record 3: `algorithm` is `moni\\u{0}qua`"),
        "{e}"
    );
    let mut text = row("moniqua", "1", "1.0", "completed");
    text.metrics
        .insert("final_loss".into(), Cell::Text("lots".into()));
    let e = refused(&[a, text]);
    assert!(
        e.contains("record 3: `final_loss` is `lots`, not a number"),
        "{e}"
    );
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn rows_of_two_grids_read_back_with_their_own_keys() {
    let mut old = row("dcd", "0", "1.0", "completed");
    old.run_id = "old".into();
    let mut new = row("dcd", "0", "2.0", "completed");
    new.point.remove("algorithm");
    new.point.insert("method".into(), "dcd".into());
    let path = std::env::temp_dir().join(format!("repro-grids-{}.csv", std::process::id()));
    write_csv(&path, &[old.clone(), new.clone()]).unwrap();
    let back = read_csv(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    // no empty `algorithm=` on the new row, no empty `method=` on the old
    assert_eq!(back, vec![old, new]);
}

#[test]
fn runs_csv_from_before_a_metric_existed_still_loads() {
    // the header of session 2's runs.csv: no train_loss, no comm_fraction
    let old = "run_id,algorithm,status,final_loss,local_loss,grad_norm_sq,consensus,bytes,\
               virtual_s,hash_failures,test_accuracy,avg_test_accuracy,wall_s,extra_memory_mb,\
               peak_rss_mb,epoch_time_s,wire_bound_epoch_s,time_over_bound,shaping,\
               counted_bytes_per_worker,kernel_bytes_per_worker,kernel_over_counted,bytes_check\n\
               a1,dcd,completed,0.5,0.6,NaN,NaN,10,1,0,0.8,0.9,3.5,0.4,200,NaN,NaN,NaN,none,NaN,NaN,NaN,\n";
    let path = std::env::temp_dir().join(format!("repro-old-{}.csv", std::process::id()));
    std::fs::write(&path, old).unwrap();
    let rows = read_csv(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].point["algorithm"], "dcd");
    assert_eq!(rows[0].metrics["wall_s"], Cell::Number(Some(3.5)));
    assert_eq!(rows[0].metrics["shaping"], Cell::Text("none".into()));
    // written before the column existed: no cell, not zero
    assert_eq!(rows[0].metrics.get("train_loss"), None);
    assert_eq!(rows[0].metrics.get("comm_fraction"), None);
}
