use super::*;

/// `rounding` and `compressor` are written by their one name and read
/// back from it (a run id hashes the knobs' JSON, so the names are
/// those the strings were); an unknown name is refused, naming the
/// choices.
#[test]
fn rounding_and_compressor_read_and_write_their_names() {
    for r in Rounding::ALL {
        for &c in CompressorKind::ALL {
            let k = Knobs {
                rounding: r,
                compressor: c,
                ..Knobs::default()
            };
            let json = serde_json::to_value(&k).unwrap();
            assert_eq!(json["rounding"], r.name());
            assert_eq!(json["compressor"], c.name());
            assert_eq!(serde_json::from_value::<Knobs>(json).unwrap(), k);
        }
    }
    let names: Vec<&str> = CompressorKind::ALL.iter().map(|c| c.name()).collect();
    assert_eq!(
        names[..2],
        ["stochastic", "qsgd"],
        "the first in help texts"
    );
    let unique: std::collections::BTreeSet<_> = names.iter().collect();
    assert_eq!(unique.len(), names.len(), "{names:?}");
    let bad = serde_json::from_str::<Knobs>(r#"{"rounding": "up"}"#).unwrap_err();
    assert!(bad.to_string().contains("stochastic or nearest"), "{bad}");
    let bad = serde_json::from_str::<Knobs>(r#"{"compressor": "topk"}"#).unwrap_err();
    assert!(bad.to_string().contains("`top-k`"), "{bad}");
}

/// `hash` reads true, false and `count`, and writes them back as they
/// were written (a run id hashes the knobs' JSON).
#[test]
fn the_hash_knob_has_three_modes() {
    for (text, mode) in [
        ("true", HashMode::Act),
        ("false", HashMode::Off),
        ("\"count\"", HashMode::Count),
    ] {
        let read: HashMode = serde_json::from_str(text).unwrap();
        assert_eq!(read, mode);
        assert_eq!(serde_json::to_string(&mode).unwrap(), text);
    }
    assert!(serde_json::from_str::<HashMode>("\"sometimes\"").is_err());
    assert!(HashMode::Count.sent() && !HashMode::Off.sent());
}

#[test]
fn the_host_name_is_the_kernels() {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(host_name(), kernel.trim());
    assert_ne!(host_name(), "unknown");
}

#[test]
fn a_header_from_before_the_build_provenance_still_reads() {
    let old = r#"{"type":"header","schema":2,"run_id":"ab","rank":0,"world":2,"config":{},
        "provenance":{"git_commit":"unknown","version":"0.1.0","host":"h","device":"cpu",
        "backend":"sim","network":"none"}}"#
        .replace('\n', "");
    let Record::Header(h) = serde_json::from_str::<Record>(&old).unwrap() else {
        panic!("not a header");
    };
    assert_eq!(h.provenance.source, "");
    assert_eq!(h.provenance.git_dirty, None);
    assert_eq!(h.provenance.manifest_hash, None);
    // an unknown provenance key is still an error
    let bad = old.replace("\"host\":\"h\"", "\"host\":\"h\",\"hots\":1");
    assert!(serde_json::from_str::<Record>(&bad).is_err());
}

#[test]
fn a_non_finite_final_loss_is_divergence() {
    let done = || Status::Completed;
    assert_eq!(done().after_final([0.5, 0.7], 9), Status::Completed);
    assert_eq!(
        done().after_final([0.5, f64::NAN], 9),
        Status::Diverged { iteration: 9 }
    );
    assert_eq!(
        done().after_final([f64::INFINITY], 9),
        Status::Diverged { iteration: 9 }
    );
    // an earlier divergence keeps its iteration
    let early = Status::Diverged { iteration: 3 };
    assert_eq!(early.clone().after_final([f64::NAN], 9), early);
}

fn header() -> Header {
    Header {
        schema: SCHEMA_VERSION,
        run_id: "ab12".into(),
        rank: 0,
        world: 8,
        config: serde_json::json!({"algorithm": "moniqua", "bits": 8}),
        provenance: Provenance {
            git_commit: "0123abc".into(),
            version: "0.1.0".into(),
            host: "node1".into(),
            device: "cpu".into(),
            backend: "sim".into(),
            network: "virtual clock".into(),
            ..Provenance::default()
        },
    }
}

fn step(i: u64) -> Step {
    Step {
        iteration: i,
        epoch: i as f64 / 10.0,
        wall_s: 0.5 * i as f64,
        compute_s: 0.4,
        comm_s: 0.1,
        train_loss: 2.0,
        bytes_sent: 1000,
        bytes_received: 2000,
        hash_failures: 0,
        hash_verified: 0,
        phases: None,
    }
}

/// The wire form is a contract with the driver: pin it.
#[test]
fn lines_are_pinned() {
    let mut out = Vec::new();
    write_record(&mut out, &Record::Step(step(3))).unwrap();
    write_record(
        &mut out,
        &Record::End(End {
            status: Status::Diverged { iteration: 7 },
            wall_s: 1.5,
            iterations: 8,
            transport_bytes_sent: None,
            extra_memory_bytes: None,
            peak_rss_bytes: None,
            real_s: None,
            theta: None,
            modulus: None,
            metrics: None,
        }),
    )
    .unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "{\"type\":\"step\",\"iteration\":3,\"epoch\":0.3,\"wall_s\":1.5,\"compute_s\":0.4,\"comm_s\":0.1,\
         \"train_loss\":2.0,\"bytes_sent\":1000,\"bytes_received\":2000,\"hash_failures\":0}\n\
         {\"type\":\"end\",\"status\":\"diverged\",\"iteration\":7,\"wall_s\":1.5,\"iterations\":8}\n"
    );
}

#[test]
fn round_trip_and_truncated_tail() {
    let mut out = Vec::new();
    write_record(&mut out, &Record::Header(header())).unwrap();
    for i in 0..3 {
        write_record(&mut out, &Record::Step(step(i))).unwrap();
    }
    // a process killed mid-line leaves a partial record: ignored
    out.extend_from_slice(b"{\"type\":\"step\",\"itera");
    let log = read_log(out.as_slice()).unwrap();
    assert_eq!(log.header, header());
    assert_eq!(log.steps.len(), 3);
    assert_eq!(log.end, None);
}

#[test]
fn bad_logs_are_errors() {
    let err = read_log("{\"type\":\"step\"}\n".as_bytes()).unwrap_err();
    assert!(matches!(err, LogError::Parse { line: 1, .. }), "{err}");
    let mut out = Vec::new();
    write_record(&mut out, &Record::Step(step(0))).unwrap();
    assert!(matches!(read_log(out.as_slice()), Err(LogError::NoHeader)));
    let mut newer = header();
    newer.schema = SCHEMA_VERSION + 1;
    let mut out = Vec::new();
    write_record(&mut out, &Record::Header(newer)).unwrap();
    assert!(
        read_log(out.as_slice())
            .unwrap_err()
            .to_string()
            .contains("update repro")
    );
    // an unknown field in the middle of a log is an error naming its line
    let mut out = Vec::new();
    write_record(&mut out, &Record::Header(header())).unwrap();
    out.extend_from_slice(b"{\"type\":\"eval\",\"bogus\":1}\n{\"type\":\"end\",\"status\":\"completed\",\"wall_s\":1,\"iterations\":1}\n");
    assert!(matches!(
        read_log(out.as_slice()),
        Err(LogError::Parse { line: 2, .. })
    ));
}
