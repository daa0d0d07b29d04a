use super::*;

fn net(launcher: Launcher, mode: ShapingMode, interface: Option<&str>) -> NetContext {
    NetContext {
        mode,
        host: HostNet::assumed(),
        exec: Box::new(crate::launch::net::DryRun::default()),
        launcher,
        interface: interface.map(String::from),
    }
}

fn argv(launcher: &Launcher) -> String {
    launch(
        8,
        Path::new("/opt/repro-train"),
        Path::new("r/run.json"),
        Path::new("r"),
        None,
        Path::new("/opt/repro"),
        launcher,
        None,
    )
    .display()
    .replace(" --allow-run-as-root", "")
}

/// runs.csv's `device`: one name when every rank's is the same, else
/// each rank's in rank order.
#[test]
fn the_ranks_devices_are_one_cell() {
    let on = |rank, device: &str| {
        let mut l = crate::records::curves::tests::log(rank, &[1.0], 0.1);
        l.header.provenance.device = device.into();
        l
    };
    assert_eq!(devices(&[on(1, "cpu"), on(0, "cpu")]), "cpu");
    assert_eq!(
        devices(&[on(1, "cuda:1"), on(0, "cuda:0"), on(2, "cuda:0")]),
        "cuda:0,cuda:1,cuda:0"
    );
}

#[test]
fn a_trainer_of_the_same_code_at_another_commit_is_the_same_build() {
    let ours = format!("repro-train {}", repro_build::VERSION);
    assert_eq!(version_source(&ours), Some(repro_build::BUILD.source));
    let moved = ours.replace(repro_build::BUILD.commit, "0123456789abcdef");
    assert_eq!(version_source(&moved), Some(repro_build::BUILD.source));
    let other = "repro-train 0.1.0 (source 0123abc+dirty.ff, commit 0123abc; rustc 1.90.0)";
    assert_eq!(version_source(other), Some("0123abc+dirty.ff"));
    assert_eq!(
        version_source("repro-train 0.1.0 (0123abc; rustc 1.90.0)"),
        None
    );
}

#[test]
fn ranks_drop_to_the_sudo_user_right_before_the_trainer() {
    let user = Some(RankUser {
        uid: 1000,
        gid: 1001,
    });
    let drop =
        "setpriv --reuid=1000 --regid=1001 --clear-groups --pdeathsig=TERM -- /opt/repro-train";
    for launcher in [Launcher::Local, Launcher::InProcess] {
        let l = launch(
            8,
            Path::new("/opt/repro-train"),
            Path::new("r/run.json"),
            Path::new("r"),
            None,
            Path::new("/opt/repro"),
            &launcher,
            user,
        )
        .display();
        assert!(l.contains(drop), "{l}");
        // mpirun itself stays the driver's; in-process, the job is the ranks
        assert_eq!(
            l.starts_with("setpriv"),
            launcher == Launcher::InProcess,
            "{l}"
        );
    }
}

/// `--dry-run` and a real run share `prepare`: with the recording
/// executor it runs the very setup a real run runs (route read-back
/// included), starts mpirun in the hub namespace, and dropping it
/// records the teardown.
#[test]
fn dry_run_records_the_real_setup_launch_and_teardown() {
    let recorder = std::sync::Arc::new(crate::launch::net::DryRun::planning());
    let net = NetContext {
        exec: Box::new(recorder.clone()),
        ..net(Launcher::Local, ShapingMode::Auto, None)
    };
    let run = PlannedRun {
        id: "0a1b2c3d4e5f".into(),
        point: Default::default(),
        params: Params::Train(TrainConfig {
            workers: 3,
            ..TrainConfig::default()
        }),
        network: Some(
            crate::experiment::condition::Condition::from_yaml(
                &yaml_serde::from_str("{bandwidth: 100mbit, latency: 1ms}").unwrap(),
                None,
            )
            .unwrap()
            .unwrap(),
        ),
    };
    let (train, repro) = (Path::new("/t/repro-train"), Path::new("/t/repro"));
    let p = prepare(
        &run,
        Path::new("r"),
        &net,
        &Invocation::default(),
        train,
        repro,
    )
    .unwrap();
    let setup = recorder.take();
    assert!(
        setup.iter().any(|c| c.contains("congctl lock cubic")),
        "{setup:?}"
    );
    assert!(
        setup.iter().any(|c| c.contains("route show")),
        "read back: {setup:?}"
    );
    let line = p.launch.display();
    assert!(
        line.contains("ip netns exec rpr-0a1b2c-hub mpirun"),
        "{line}"
    );
    assert_eq!(p.cfg.workers, 3);
    drop(p);
    let teardown = recorder.take();
    assert!(
        teardown.iter().any(|c| c == "ip netns del rpr-0a1b2c-hub"),
        "{teardown:?}"
    );
}

#[test]
fn each_launcher_starts_the_ranks_its_way() {
    assert_eq!(
        argv(&Launcher::Local),
        "mpirun -np 8 --oversubscribe /opt/repro-train --config r/run.json --log-dir r"
    );
    assert_eq!(
        argv(&Launcher::Hostfile("/h/hosts".into())),
        "mpirun -np 8 --hostfile /h/hosts -x LD_LIBRARY_PATH -x PATH /opt/repro-train \
         --config r/run.json --log-dir r"
    );
    assert_eq!(
        argv(&Launcher::Srun),
        "srun --ntasks=8 --kill-on-bad-exit=1 --mpi=pmix /opt/repro-train --config r/run.json --log-dir r"
    );
    assert_eq!(Launcher::Local.per_host(), None);
    assert_eq!(
        Launcher::Srun.per_host().unwrap(),
        ["srun", "--ntasks-per-node=1", "--kill-on-bad-exit=1"]
    );
}

#[test]
fn a_ring_all_reduce_waits_for_a_latency_per_round() {
    let cfg = |alg: &str| TrainConfig {
        algorithm: alg.into(),
        ..TrainConfig::default()
    };
    assert_eq!(latency_rounds(&cfg("allreduce"), 8), 14);
    assert_eq!(latency_rounds(&cfg("allreduce-rhd"), 8), 6);
    assert_eq!(latency_rounds(&cfg("allreduce-rhd"), 6), 6);
    assert_eq!(latency_rounds(&cfg("allreduce-rhd"), 1), 0);
    assert_eq!(latency_rounds(&cfg("psgd"), 4), 6);
    assert_eq!(latency_rounds(&cfg("moniqua"), 8), 1);
    assert_eq!(latency_rounds(&cfg("qsgd"), 8), 1);
    assert_eq!(latency_rounds(&cfg("allreduce"), 1), 0);
}

#[test]
fn shaping_follows_the_launcher() {
    let hosts = Launcher::Hostfile("/h".into());
    assert_eq!(
        net(Launcher::Local, ShapingMode::Auto, None)
            .method()
            .unwrap(),
        Method::Netns
    );
    assert_eq!(
        net(hosts.clone(), ShapingMode::Auto, Some("eth0"))
            .method()
            .unwrap(),
        Method::Hosts
    );
    assert_eq!(
        net(Launcher::Srun, ShapingMode::Hosts, Some("ib0"))
            .method()
            .unwrap(),
        Method::Hosts
    );
    // the interface is never guessed
    assert!(matches!(
        net(hosts.clone(), ShapingMode::Auto, None).method(),
        Err(NetError::NoInterface)
    ));
    // namespaces live on one host; hosts mode needs nodes
    assert!(matches!(
        net(hosts, ShapingMode::Netns, Some("eth0")).method(),
        Err(NetError::ShapingLauncher { .. })
    ));
    assert!(matches!(
        net(Launcher::Local, ShapingMode::Hosts, Some("eth0")).method(),
        Err(NetError::ShapingLauncher { .. })
    ));
}
