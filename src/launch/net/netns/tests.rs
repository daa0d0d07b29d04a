use super::*;
use crate::launch::net::DryRun;

fn host(netem: bool) -> HostNet {
    HostNet {
        netem,
        ipv6: true,
        tcp: None,
    }
}

/// A dry run whose routes read back with `congctl lock cubic`.
fn kernel(also: impl Fn(&str) -> Option<String> + Send + Sync + 'static) -> DryRun {
    DryRun::answering(move |a| {
        let line = a.join(" ");
        if let Some(reply) = also(&line) {
            reply
        } else if line.contains(" route show ") {
            format!("{SUBNET} dev eth0 proto kernel scope link src 10.217.0.1 congctl lock cubic\n")
        } else {
            String::new()
        }
    })
}

fn condition(bw: Option<f64>, latency_s: f64, qdisc: RateQdisc) -> Condition {
    Condition {
        bandwidth_bps: bw,
        latency_s,
        qdisc,
        tcp: crate::experiment::condition::TcpCongestion::Cubic,
        label: "test".into(),
    }
}

#[test]
fn names_are_validated() {
    for ok in [
        "rpr-0a1b2c-r0",
        "rpr-0a1b2c-r249",
        "rpr0a1b2ch3",
        "rpr0a1b2cp12",
        "rpr0a1b2cbr",
        "rpr-0a1b2c-hub",
        "rpr-0a1b2c-probe",
    ] {
        assert!(is_our_name(ok), "{ok}");
    }
    for bad in [
        "eth0",
        "rpr",
        "rpr-0a1b2c-r",
        "rpr-0A1B2C-r0",
        "rpr0a1b2cx1",
        "rpr0a1b2ch",
        "rpr0a1b2ch1234",
        "rpr-0a1b2c-r1;reboot",
        "rpr0a1b2cbr0",
        "rpr-zzzzzz-r0",
        "rpr-0a1b2c-hubx",
        "rpr-0a1b2c-",
        // not ASCII: a character across byte 6 once panicked the check
        "rpr-0a1b2é-r0",
        "rpr0a1b2éh1",
        "rpr-ééééé-r1",
        "rpré",
    ] {
        assert!(!is_our_name(bad), "{bad}");
    }
    let exec = DryRun::default();
    let c = condition(Some(1e6), 0.0, RateQdisc::Tbf);
    assert!(matches!(
        Fabric::new(&exec, "$(reboot)", 2, c.clone(), &host(false)),
        Err(NetError::BadName { .. })
    ));
    assert!(matches!(
        Fabric::new(&exec, "abcdef012345", 251, c, &host(false)),
        Err(NetError::TooManyRanks { .. })
    ));
}

#[test]
fn the_commands_are_pinned() {
    let exec = DryRun::default();
    let tbf = Fabric::new(
        &exec,
        "0a1b2c3d4e5f",
        2,
        condition(Some(1e8), 1e-3, RateQdisc::Tbf),
        &host(false),
    )
    .unwrap();
    insta::assert_snapshot!(
        "tbf_no_netem",
        tbf.setup_commands()
            .unwrap()
            .iter()
            .map(|c| c.join(" "))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(tbf.injected_latency_s(), Some(1e-3));
    let netem = Fabric::new(
        &exec,
        "0a1b2c3d4e5f",
        1,
        condition(Some(2e7), 5e-4, RateQdisc::Tbf),
        &host(true),
    )
    .unwrap();
    assert_eq!(netem.injected_latency_s(), None);
    let htb = Fabric::new(
        &exec,
        "0a1b2c3d4e5f",
        1,
        condition(Some(2e7), 5e-4, RateQdisc::Htb),
        &host(true),
    )
    .unwrap();
    let delay = Fabric::new(
        &exec,
        "0a1b2c3d4e5f",
        1,
        condition(None, 0.15e-3, RateQdisc::Tbf),
        &host(true),
    )
    .unwrap();
    let tc = |f: &Fabric<'_>| {
        f.setup_commands()
            .unwrap()
            .iter()
            .map(|c| c.join(" "))
            .filter(|c| c.starts_with("tc "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    insta::assert_snapshot!(
        "netem_kernels",
        format!("{}\n\n{}\n\n{}", tc(&netem), tc(&htb), tc(&delay))
    );
    let ack = |netem: bool| {
        let f = Fabric::new(
            &exec,
            "0a1b2c3d4e5f",
            1,
            condition(Some(5e6), 1e-3, RateQdisc::HtbAck),
            &host(netem),
        )
        .unwrap();
        tc(&f)
    };
    insta::assert_snapshot!("htb_ack", format!("{}\n\n{}", ack(false), ack(true)));
    insta::assert_snapshot!(
        "teardown",
        tbf.teardown_commands()
            .iter()
            .map(|c| c.join(" "))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(tbf.subnet(), "10.217.0.0/24");
    assert_eq!(tbf.mpirun_env()[0].1, tbf.subnet());
}

#[test]
fn ipv6_is_left_alone_where_the_kernel_has_none() {
    let exec = DryRun::default();
    let c = condition(Some(1e6), 0.0, RateQdisc::Tbf);
    let cmds = |ipv6: bool| {
        let host = HostNet {
            ipv6,
            ..host(false)
        };
        Fabric::new(&exec, "0a1b2c3d4e5f", 2, c.clone(), &host)
            .unwrap()
            .setup_commands()
            .unwrap()
            .iter()
            .filter(|c| c.contains(&"addrgenmode".to_string()))
            .count()
    };
    assert_eq!(cmds(true), 2);
    assert_eq!(cmds(false), 0);
}

#[test]
fn up_refuses_leftovers_and_drop_tears_down() {
    let exec =
        kernel(|line| (line == "ip netns list").then(|| "rpr-0a1b2c-r1 (id: 3)\nother\n".into()));
    let c = condition(Some(1e8), 0.0, RateQdisc::Tbf);
    // a name of the run id's tag is there (another run's, or left
    // behind): the network takes another tag and never touches it
    let mut f = Fabric::new(&exec, "0a1b2c3d4e5f", 2, c.clone(), &host(false)).unwrap();
    f.up().unwrap();
    assert_ne!(f.hub(), "rpr-0a1b2c-hub");
    assert!(is_our_name(&f.hub()), "{}", f.hub());
    drop(f);
    let touched: Vec<String> = exec
        .commands()
        .into_iter()
        .filter(|c| c.contains("0a1b2c") && !c.starts_with("ip netns list"))
        .collect();
    assert!(touched.is_empty(), "{touched:?}");

    let exec = kernel(|_| None);
    {
        let mut f = Fabric::new(&exec, "0a1b2c3d4e5f", 2, c.clone(), &host(false)).unwrap();
        f.up().unwrap();
        assert!(f.route.contains("congctl lock cubic"), "{}", f.route);
    }
    let cmds = exec.commands();
    assert!(
        cmds.iter()
            .any(|c| c == "ip -n rpr-0a1b2c-hub link add br0 type bridge")
    );
    assert_eq!(cmds.last().unwrap(), "ip netns del rpr-0a1b2c-hub");
    assert!(cmds.iter().any(|c| c == "ip netns del rpr-0a1b2c-r1"));
    // nothing is made or set in the host's own namespace: every `ip` and
    // `tc` names a namespace of ours, and no sysctl is written
    for c in &cmds {
        let w: Vec<&str> = c.split_whitespace().collect();
        let in_ours = match w.as_slice() {
            ["ip", "netns", "add" | "del" | "exec", ns, ..] => is_our_name(ns),
            ["ip", "netns", "list"] | ["ip", "-o", "link", "show"] => true,
            ["ip" | "tc", "-n", ns, ..] => is_our_name(ns),
            _ => false,
        };
        assert!(in_ours, "{c}");
        assert!(!c.contains("sysctl"), "{c}");
    }

    // a kernel that drops the route's congctl: refused, and nothing left
    let exec = DryRun::default();
    {
        let mut f = Fabric::new(&exec, "0a1b2c3d4e5f", 2, c, &host(false)).unwrap();
        let e = f.up().unwrap_err();
        assert!(matches!(e, NetError::CongctlMissing { .. }), "{e}");
    }
    assert_eq!(
        exec.commands().last().unwrap(),
        "ip netns del rpr-0a1b2c-hub"
    );
}

#[test]
fn counters_and_leftovers_are_parsed() {
    let text = "qdisc tbf 8014: root refcnt 3 rate 50Mbit burst 64Kb lat 100ms \n Sent 26345 bytes 80 pkt (dropped 2, overlimits 0 requeues 0) \n backlog 0b 0p requeues 0\n";
    assert_eq!(
        QdiscStats::parse(text),
        Some(QdiscStats {
            bytes: 26345,
            packets: 80,
            dropped: 2
        })
    );
    assert_eq!(QdiscStats::parse("qdisc noqueue 0: root"), None);
    let exec = DryRun::answering(|a| {
        match a.join(" ").as_str() {
        "ip netns list" => "rpr-0a1b2c-r0 (id: 0)\nrepro-doctor-1\n".into(),
        "ip -o link show" => "1: lo: <LOOPBACK>\n5: rpr0a1b2cbr: <BROADCAST>\n7: rpr0a1b2ch0@if6: <BROADCAST>\n8: rprx@if1: <>\n".into(),
        _ => String::new(),
    }
    });
    let found = leftovers(&exec).unwrap();
    assert_eq!(
        found,
        vec![
            Leftover::Namespace("rpr-0a1b2c-r0".into()),
            Leftover::Link("rpr0a1b2cbr".into()),
            Leftover::Link("rpr0a1b2ch0".into()),
        ]
    );
    assert!(remove_leftovers(&exec, &found).is_empty());
    let cmds = exec.commands();
    assert_eq!(
        &cmds[2..],
        [
            "ip link del rpr0a1b2cbr",
            "ip link del rpr0a1b2ch0",
            "ip netns del rpr-0a1b2c-r0"
        ]
    );
}
