use super::*;
use crate::launch::net::DryRun;

fn condition() -> Condition {
    Condition::from_yaml(
        &yaml_serde::from_str("{bandwidth: 100mbit, latency: 0.15ms}").unwrap(),
        None,
    )
    .unwrap()
    .unwrap()
}

#[test]
fn every_node_is_probed_shaped_then_restored() {
    let exec = DryRun::answering(|a| {
        if a.join(" ").contains(" probe ") {
            "netem: yes\nnetem: yes\n".into()
        } else {
            String::new()
        }
    });
    let prefix: Vec<String> = ["srun", "--ntasks-per-node=1"].map(String::from).to_vec();
    {
        let mut h =
            HostShaping::new(&exec, prefix, "/opt/repro".into(), "eth0", condition()).unwrap();
        h.probe().unwrap();
        h.up().unwrap();
        assert_eq!(h.injected_latency_s(), None);
    }
    let me = NodeOwner::me().arg();
    assert_eq!(
        exec.commands(),
        [
            "srun --ntasks-per-node=1 /opt/repro net node probe --interface eth0".to_string(),
            format!(
                "srun --ntasks-per-node=1 /opt/repro net node up --interface eth0 --rate-bps \
                 100000000 --latency-us 150 --qdisc htb-ack --owner {me}"
            ),
            format!("srun --ntasks-per-node=1 /opt/repro net node down --interface eth0 --by {me}"),
        ]
    );
}

#[test]
fn one_node_without_netem_puts_the_rate_by_htb_and_latency_in_the_transport() {
    let exec = DryRun::answering(|_| "netem: yes\nnetem: no\n".into());
    let mut h = HostShaping::new(&exec, Vec::new(), "repro".into(), "eth0", condition()).unwrap();
    h.probe().unwrap();
    assert_eq!(h.injected_latency_s(), Some(0.15e-3));
    assert!(h.setup_command().ends_with(&["--no-netem".to_string()]));
    assert!(h.describe().contains("injected by the transport"));
    let flags = NodeCondition::of(&condition(), false);
    let cmds = flags.commands("eth0").unwrap();
    assert_eq!(
        cmds[0].join(" "),
        "tc qdisc replace dev eth0 root handle 1: htb default 20"
    );
    assert!(!cmds.iter().any(|c| c.contains(&"netem".to_string())));
    // a silent launch is an error, not "no netem"
    let exec = DryRun::default();
    let mut h = HostShaping::new(&exec, Vec::new(), "repro".into(), "eth0", condition()).unwrap();
    assert!(h.probe().is_err());
}

#[test]
fn nothing_is_restored_that_was_never_applied() {
    let exec = DryRun::default();
    drop(HostShaping::new(&exec, Vec::new(), "repro".into(), "ib0", condition()).unwrap());
    assert!(exec.commands().is_empty());
}

#[test]
fn a_root_is_restored_only_where_it_can_be_exactly() {
    let q = |json: &str| parse_qdiscs(json).unwrap();
    // kernel defaults: deleting ours restores them
    for default in [
        "[]",
        r#"[{"kind":"pfifo_fast","handle":"0:","root":true,"refcnt":2,"options":{"bands":3}}]"#,
        r#"[{"kind":"mq","handle":"0:","root":true,"options":{}},{"kind":"fq_codel","handle":"0:","parent":":1","options":{}}]"#,
    ] {
        assert_eq!(
            restore_commands(&q(default), "eth0").unwrap(),
            [argv(&["tc", "qdisc", "del", "dev", "eth0", "root"])],
            "{default}"
        );
    }
    // a configured pfifo is replayed, an ingress beside it left alone
    let pfifo = q(
        r#"[{"kind":"pfifo","handle":"8002:","root":true,"options":{"limit":777}},{"kind":"clsact","handle":"ffff:","parent":"ffff:fff1","options":{}}]"#,
    );
    assert_eq!(
        restore_commands(&pfifo, "eth0").unwrap()[0].join(" "),
        "tc qdisc replace dev eth0 root handle 8002: pfifo limit 777"
    );
    // a configured tree or kind: refused before anything changes
    let tree = q(
        r#"[{"kind":"htb","handle":"1:","root":true,"options":{}},{"kind":"pfifo","handle":"10:","parent":"1:10","options":{"limit":5}}]"#,
    );
    assert!(
        restore_commands(&tree, "eth0")
            .unwrap_err()
            .contains("under it")
    );
    let fq = q(r#"[{"kind":"fq","handle":"8001:","root":true,"options":{}}]"#);
    assert!(
        restore_commands(&fq, "eth0")
            .unwrap_err()
            .contains("`fq 8001:`")
    );
    assert!(parse_qdiscs("not json").is_err());
}

#[test]
fn a_node_saves_restores_and_refuses_to_restore_a_different_root() {
    let dir = std::env::temp_dir().join(format!("repro-node-{}", std::process::id()));
    let state = dir.join("node.json");
    let _ = std::fs::remove_dir_all(&dir);
    let saved = r#"[{"kind":"pfifo","handle":"8002:","root":true,"options":{"limit":777}}]"#;
    let exec = DryRun::answering(move |_| saved.into());
    let flags = NodeCondition::of(&condition(), true);
    let me = NodeOwner::me();
    node_up(&exec, "eth0", &flags, &state, &me).unwrap();
    assert!(state.is_file());
    // a second up (a crashed run's state is there) keeps the original
    assert!(
        node_up(&exec, "eth0", &flags, &state, &me)
            .unwrap()
            .contains("kept")
    );
    node_down(&exec, "eth0", &state, Some(&me), false).unwrap();
    assert!(!state.exists());
    assert!(
        node_down(&exec, "eth0", &state, Some(&me), false)
            .unwrap()
            .contains("nothing")
    );
    let cmds = exec.commands();
    assert_eq!(
        cmds.iter()
            .filter(|c| c.starts_with("tc -j qdisc show"))
            .count(),
        2,
        "{cmds:?}"
    );
    assert!(cmds.contains(&"tc qdisc replace dev eth0 root handle 8002: pfifo limit 777".into()));
    // the root reads back different after the restore: an error, state kept
    let answers = std::sync::Mutex::new(vec![
        r#"[{"kind":"pfifo","handle":"8002:","root":true,"options":{"limit":1}}]"#,
        saved,
    ]);
    let exec = DryRun::answering(move |a| {
        if a.join(" ").starts_with("tc -j") {
            answers.lock().unwrap().pop().unwrap_or("[]").into()
        } else {
            String::new()
        }
    });
    node_up(&exec, "eth0", &flags, &state, &me).unwrap();
    let e = node_down(&exec, "eth0", &state, Some(&me), false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not the saved"), "{e}");
    assert!(state.is_file());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A live process of this machine other than this one (pid 1), and
/// one on a machine this node cannot check.
fn others() -> (NodeOwner, NodeOwner) {
    let init = NodeOwner {
        pid: 1,
        start: crate::util::process::start_time(1).unwrap(),
        ..NodeOwner::me()
    };
    let far: NodeOwner = "far:0123-abcd:4242:99".parse().unwrap();
    (init, far)
}

#[test]
fn a_node_touches_another_runs_shaping_only_once_that_run_is_gone() {
    let dir = std::env::temp_dir().join(format!("repro-owner-{}", std::process::id()));
    let state = dir.join("node.json");
    let _ = std::fs::remove_dir_all(&dir);
    let exec = DryRun::answering(|_| "[]".into());
    let flags = NodeCondition::of(&condition(), true);
    let me = NodeOwner::me();
    let (live, far) = others();
    let gone = NodeOwner {
        start: live.start + 1,
        ..live.clone()
    };
    let owner_in_state = || {
        let text = std::fs::read_to_string(&state).unwrap();
        serde_json::from_str::<NodeState>(&text).unwrap().owner
    };
    // shaped by a live process of this kernel (from another machine's
    // command): neither a new run nor a restore takes it over
    node_up(&exec, "eth0", &flags, &state, &live).unwrap();
    assert_eq!(owner_in_state(), Some(live.clone()));
    let e = node_up(&exec, "eth0", &flags, &state, &far)
        .unwrap_err()
        .to_string();
    assert!(e.contains("pid 1 on") && e.contains("still running"), "{e}");
    let e = node_down(&exec, "eth0", &state, None, false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("still running"), "{e}");
    assert!(state.is_file());
    // a command from the shaping run's own machine checked its record
    node_down(&exec, "eth0", &state, Some(&me), false).unwrap();
    assert!(!state.exists());
    // a dead owner of this kernel: taken over, and the state names the new one
    node_up(&exec, "eth0", &flags, &state, &gone).unwrap();
    assert!(
        node_up(&exec, "eth0", &flags, &state, &far)
            .unwrap()
            .contains("kept")
    );
    assert_eq!(owner_in_state(), Some(far.clone()));
    // an owner on a machine this node cannot check: refused, but --force
    let e = node_down(&exec, "eth0", &state, None, false)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("cannot be checked") && e.contains("on far"),
        "{e}"
    );
    node_down(&exec, "eth0", &state, None, true).unwrap();
    assert!(!state.exists());
    // state files of older versions name no owner
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(&state, r#"{"interface":"eth0","saved":[],"restore":[]}"#).unwrap();
    node_down(&exec, "eth0", &state, None, false).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_owner_reads_back_from_its_argument() {
    let me = NodeOwner::me();
    assert_eq!(me.arg().parse::<NodeOwner>().unwrap(), me);
    assert_eq!(me.alive_here(), Some(true));
    for bad in [
        "",
        "h:b:1",
        "h:xyz:1:2",
        ":ab:1:2",
        "h:ab:-1:2",
        "h:ab:1:2:3",
    ] {
        assert!(bad.parse::<NodeOwner>().is_err(), "{bad}");
    }
    let (_, far) = others();
    assert_eq!(far.alive_here(), None);
}

#[test]
fn a_second_run_from_this_machine_does_not_shape_a_shaped_interface() {
    struct Taken(DryRun);
    impl Exec for Taken {
        fn run(&self, argv: &[String]) -> Result<String, NetError> {
            self.0.run(argv)
        }
        fn claim(&self, _tag: &str) -> Result<bool, NetError> {
            Ok(false)
        }
        fn release(&self, _tag: &str) {
            panic!("released a record it does not hold");
        }
    }
    let exec = Taken(DryRun::default());
    {
        let mut h =
            HostShaping::new(&exec, Vec::new(), "repro".into(), "eth0", condition()).unwrap();
        let e = h.up().unwrap_err().to_string();
        assert!(e.contains("a live run from this machine"), "{e}");
    }
    // nothing was shaped, so nothing is restored
    assert!(exec.0.commands().is_empty());
}

#[test]
fn interface_names_are_checked() {
    for bad in [
        "",
        "-x",
        "eth0; reboot",
        "a b",
        "averyveryverylongname",
        "../x",
    ] {
        assert!(!valid_interface(bad), "{bad}");
        assert!(
            HostShaping::new(&DryRun::default(), Vec::new(), "r".into(), bad, condition()).is_err()
        );
    }
    for good in ["eth0", "ens5", "ib0.8001", "bond-0", "enp1s0f1_x"] {
        assert!(valid_interface(good), "{good}");
    }
}
