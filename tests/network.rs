//! The `repro` binary with real ranks and real networks: MPI jobs, shaped
//! runs in network namespaces, a virtual cluster, and what signals and
//! crashes leave behind. nextest runs this binary's tests one at a time
//! (test group `network`, .config/nextest.toml): a shaped network's bridge
//! appearing or vanishing must not be picked up by another job's ranks, and
//! a test that finds no network left on the host must be the only one that
//! made one. Under plain `cargo test`, `serial()` keeps them apart.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{
    as_root, csv_rows, finish, kill, processes_naming, read_runs, repro, repro_cmd, serial,
    temp_out, train_binary, wait_for_trainer,
};

/// `repro run` with the MPI backend: real `repro-train` ranks under mpirun,
/// their logs summarized into runs.csv; Moniqua sends a quarter of D-PSGD's
/// bytes (8-bit codes instead of f32) and both learn.
#[test]
fn train_backend_trains_with_real_ranks() {
    let _serial = serial();
    let out = temp_out("mpi");
    let o = repro_cmd(&["run", "mpi-smoke", "--out", out.to_str().unwrap()])
        .output()
        .expect("run repro");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let csv = std::fs::read_to_string(out.join("runs.csv")).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let mut bytes = std::collections::BTreeMap::new();
    for line in csv.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f[col("status")], "completed", "{line}");
        // every rank trained on the CPU (this machine has no GPU)
        assert_eq!(f[col("device")], "cpu", "{line}");
        let acc: f64 = f[col("avg_test_accuracy")].parse().unwrap();
        assert!(acc > 0.8, "{line}");
        bytes.insert(
            f[col("algorithm")].to_string(),
            f[col("bytes")].parse::<f64>().unwrap(),
        );
        // every rank left its log
        for r in 0..3 {
            assert!(
                out.join("raw")
                    .join(f[0])
                    .join(format!("rank-{r}.jsonl"))
                    .is_file()
            );
        }
    }
    let ratio = bytes["moniqua"] / bytes["d-psgd"];
    assert!(
        (ratio - 0.25).abs() < 0.01,
        "moniqua/d-psgd bytes = {ratio}"
    );
    // --resume keeps the finished runs: same rows, nothing launched again
    // (a run it did launch would fail: there is no trainer)
    let resume_without_trainer = || {
        Command::new(env!("CARGO_BIN_EXE_repro"))
            .args([
                "run",
                "mpi-smoke",
                "--resume",
                "--out",
                out.to_str().unwrap(),
            ])
            .env("REPRO_TRAIN", "/nonexistent/repro-train")
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("run repro")
    };
    let o = resume_without_trainer();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert_eq!(
        stderr
            .matches("summarized from its logs (--resume)")
            .count(),
        2,
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(out.join("runs.csv")).unwrap(), csv);
    // ... but only the current ones: a run whose logs say another build
    // produced them is run again, unless --resume-stale keeps it
    let id = csv.lines().nth(1).unwrap().split(',').next().unwrap();
    let here = repro_build::BUILD.source;
    let age = |out: &Path| {
        for r in 0..3 {
            let log = out.join("raw").join(id).join(format!("rank-{r}.jsonl"));
            let text = std::fs::read_to_string(&log).unwrap();
            assert!(text.contains(here), "{}", log.display());
            std::fs::write(&log, text.replace(here, "0ld50urce")).unwrap();
        }
    };
    age(&out);
    let resume = |extra: &[&str]| {
        let o = repro_cmd(
            &[
                &["run", "mpi-smoke", "--resume"],
                extra,
                &["--out", out.to_str().unwrap()],
            ]
            .concat(),
        )
        .output()
        .expect("run repro");
        let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success(), "{stderr}");
        stderr
    };
    let stderr = resume(&[]);
    assert_eq!(
        stderr.matches("is stale: built from 0ld50urce").count(),
        1,
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("summarized from its logs").count(),
        1,
        "{stderr}"
    );
    age(&out); // the rerun wrote logs of this build
    let stderr = resume(&["--resume-stale"]);
    assert_eq!(
        stderr.matches("summarized from its logs").count(),
        2,
        "{stderr}"
    );
    // committed results keep no logs: --resume keeps a finished run's
    // runs.csv row when it is current, and runs a stale one again (the row
    // of `id` is stale: --resume-stale kept it from its aged logs)
    std::fs::remove_dir_all(out.join("raw")).unwrap();
    let csv = std::fs::read_to_string(out.join("runs.csv")).unwrap();
    assert!(
        csv.lines()
            .any(|l| l.starts_with(id) && l.contains("0ld50urce")),
        "{csv}"
    );
    let without_logs = || {
        let o = resume_without_trainer();
        let _ = std::fs::remove_dir_all(out.join("raw"));
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (ok, stderr) = without_logs();
    assert!(!ok, "{stderr}");
    assert_eq!(stderr.matches("kept from runs.csv").count(), 1, "{stderr}");
    assert!(stderr.contains(&format!("{id} failed again")), "{stderr}");
    // the failed attempt left the earlier row; made current, both are kept
    let current = csv.replace("0ld50urce", here);
    std::fs::write(out.join("runs.csv"), &current).unwrap();
    let (ok, stderr) = without_logs();
    assert!(ok, "{stderr}");
    assert_eq!(stderr.matches("kept from runs.csv").count(), 2, "{stderr}");
    assert_eq!(
        std::fs::read_to_string(out.join("runs.csv")).unwrap(),
        current
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// Figure 2(b) at smoke scale through the driver: AD-PSGD and Moniqua on
/// AD-PSGD as real MPI jobs (4 ranks, two threads each) beside D-PSGD; all
/// complete, and Moniqua's messages are about a quarter of AD-PSGD's bytes.
/// Per message, not per run: how many pairwise averages an asynchronous run
/// makes depends on timing (a faster codec once made Moniqua's ranks average
/// about 1.6x as often and its total bytes crossed half of AD-PSGD's).
#[test]
fn asynchronous_algorithms_run_through_the_driver() {
    let _serial = serial();
    let out = temp_out("figure2b");
    let o = repro_cmd(&["run", "figure2b", "--out", out.to_str().unwrap()])
        .output()
        .expect("run repro");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let runs = read_runs(&out);
    assert_eq!(runs.len(), 3);
    let by: std::collections::BTreeMap<&str, &std::collections::BTreeMap<String, String>> =
        runs.iter().map(|r| (r["algorithm"].as_str(), r)).collect();
    for r in &runs {
        assert_eq!(r["status"], "completed", "{r:?}");
        let acc: f64 = r["avg_test_accuracy"].parse().unwrap();
        assert!(acc > 0.5, "{r:?}");
    }
    for alg in ["ad-psgd", "moniqua-ad-psgd"] {
        let total: f64 = by[alg]["counted_bytes_per_worker"].parse().unwrap();
        assert!(total > 0.0, "{alg} sent nothing");
    }
    // one message: the fewest bytes a rank sent in a step that sent any
    let message = |alg: &str| {
        let raw = out.join("raw").join(&by[alg]["run_id"]);
        let mut fewest = u64::MAX;
        for rank in 0..4 {
            let log = std::fs::read_to_string(raw.join(format!("rank-{rank}.jsonl"))).unwrap();
            for line in log.lines() {
                let v: serde_json::Value = serde_json::from_str(line).unwrap();
                if v["type"] == "step" {
                    let sent = v["bytes_sent"].as_u64().unwrap();
                    if sent > 0 {
                        fewest = fewest.min(sent);
                    }
                }
            }
        }
        assert!(fewest < u64::MAX, "{alg}: no step sent a message");
        fewest as f64
    };
    let ratio = message("moniqua-ad-psgd") / message("ad-psgd");
    assert!(
        (0.2..0.3).contains(&ratio),
        "8-bit over 32-bit messages: {ratio}"
    );
    let table = std::fs::read_to_string(out.join("table.md")).unwrap();
    assert!(table.contains("moniqua-ad-psgd"), "{table}");
}

/// Nothing of the driver's networks is left on the host.
fn assert_no_leftovers() {
    // namespace deletion finishes asynchronously in the kernel
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let o = repro(&["net", "status"]);
        let text = String::from_utf8_lossy(&o.stdout).to_string();
        if o.status.success() && text.starts_with("no network namespaces or links") {
            break;
        }
        assert!(Instant::now() < deadline, "left behind: {text}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let netns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&netns.stdout).contains("rpr-"));
}

/// A shaped run: 3 ranks in network namespaces, each rank's egress limited
/// to 20 Mbit/s by htb. It cannot finish faster than its bytes at that rate
/// (a lower bound only), the kernel's qdisc counters agree with the bytes
/// the transport counted within TCP/IP overhead, and nothing is left behind.
#[test]
fn shaped_run_is_bounded_by_the_rate_and_its_bytes_are_counted_by_the_kernel() {
    if !as_root() {
        return;
    }
    let _serial = serial();
    let out = temp_out("shaped");
    let o = repro_cmd(&[
        "run",
        "tests/fixtures/net-rate.yaml",
        "--out",
        out.to_str().unwrap(),
    ])
    .output()
    .expect("run repro");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let runs = read_runs(&out);
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    assert_eq!(run["status"], "completed", "{run:?}");
    assert!(
        run["shaping"].contains("htb with pure ACKs first"),
        "{run:?}"
    );
    let num = |k: &str| {
        run[k]
            .parse::<f64>()
            .unwrap_or_else(|_| panic!("{k}: {run:?}"))
    };
    let counted = num("counted_bytes_per_worker");
    let kernel = num("kernel_bytes_per_worker");
    assert!(counted > 1e6, "{run:?}");
    let ratio = kernel / counted;
    assert!((1.0..=1.10).contains(&ratio), "kernel/counted = {ratio}");
    assert_eq!(run["bytes_check"], "ok");
    // every byte a rank sent went through its 20 Mbit/s class (burst: two frames)
    let floor = (counted - 32768.0) / (20e6 / 8.0);
    assert!(num("wall_s") >= floor, "{} s < {floor} s", num("wall_s"));
    let shaping =
        std::fs::read_to_string(out.join("raw").join(&run["run_id"]).join("shaping.json")).unwrap();
    let shaping: serde_json::Value = serde_json::from_str(&shaping).unwrap();
    assert_eq!(shaping["kernel"].as_array().unwrap().len(), 3);
    assert_no_leftovers();
}

/// The driver's own namespace has a firewall like ufw's (INPUT and FORWARD
/// DROP, only established traffic in) and a route into the ranks' subnet:
/// a shaped run does not notice, because nothing of it lives there (the
/// bridge and mpirun sit in the run's hub namespace). With the bridge in the
/// driver's namespace the ranks' traffic would be dropped (seen: a bridged
/// TCP connect timed out under FORWARD DROP with br_netfilter loaded).
#[test]
fn shaped_runs_ignore_the_firewall_and_routes_of_the_drivers_namespace() {
    if !as_root() {
        return;
    }
    let _serial = serial();
    let ns = format!("rfw-{}", std::process::id());
    let _ = Command::new("ip").args(["netns", "del", &ns]).output();
    let sh = |args: &[&str]| {
        let o = Command::new("ip")
            .args(["netns", "exec", &ns])
            .args(args)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{}: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr)
        );
    };
    assert!(
        Command::new("ip")
            .args(["netns", "add", &ns])
            .status()
            .unwrap()
            .success()
    );
    struct Gone(String);
    impl Drop for Gone {
        fn drop(&mut self) {
            let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
        }
    }
    let _gone = Gone(ns.clone());
    sh(&["ip", "link", "set", "lo", "up"]);
    sh(&[
        "ip", "link", "add", "fw0", "type", "veth", "peer", "name", "fw1",
    ]);
    sh(&["ip", "link", "set", "fw0", "up"]);
    sh(&["ip", "route", "add", "10.217.0.0/16", "dev", "fw0"]);
    sh(&["iptables", "-A", "INPUT", "-i", "lo", "-j", "ACCEPT"]);
    sh(&[
        "iptables",
        "-A",
        "INPUT",
        "-m",
        "conntrack",
        "--ctstate",
        "ESTABLISHED,RELATED",
        "-j",
        "ACCEPT",
    ]);
    sh(&["iptables", "-P", "INPUT", "DROP"]);
    sh(&["iptables", "-P", "FORWARD", "DROP"]);
    let out = temp_out("firewall");
    let o = Command::new("ip")
        .args(["netns", "exec", &ns])
        .arg(env!("CARGO_BIN_EXE_repro"))
        .args([
            "run",
            "tests/fixtures/net-rate.yaml",
            "--out",
            out.to_str().unwrap(),
        ])
        .env("REPRO_TRAIN", train_binary())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let run = &read_runs(&out)[0];
    assert_eq!(run["status"], "completed", "{run:?}");
    assert_eq!(run["bytes_check"], "ok", "{run:?}");
    assert_no_leftovers();
}

/// Starts a shaped run that would last long, and waits until one of its
/// ranks (a repro-train whose command line names `out`) runs: (driver, rank pid).
fn start_long_shaped_run(out: &Path) -> (std::process::Child, u32) {
    let mut child = repro_cmd(&[
        "run",
        "tests/fixtures/net-rate.yaml",
        "--set",
        "scales.smoke.iterations=1000000",
        "--out",
        out.to_str().unwrap(),
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let pid = wait_for_trainer(&mut child, out);
    // let it get into training
    std::thread::sleep(Duration::from_secs(2));
    (child, pid)
}

/// A rank killed in the middle of a shaped run: the run is reported failed
/// (exit code 3), and its namespaces, veths, bridge and qdiscs are removed.
#[test]
fn a_killed_rank_fails_the_run_and_leaves_no_network_behind() {
    if !as_root() {
        return;
    }
    let _serial = serial();
    let out = temp_out("killed");
    let (child, rank) = start_long_shaped_run(&out);
    kill("-KILL", rank);
    let (code, stderr) = finish(child);
    assert_eq!(code, Some(3), "{stderr}");
    assert_eq!(read_runs(&out)[0]["status"], "failed", "{stderr}");
    assert_no_leftovers();
}

/// SIGTERM to the driver in the middle of a shaped run: it terminates the
/// job, removes the network and exits with 130.
#[test]
fn sigterm_stops_the_run_and_leaves_no_network_behind() {
    if !as_root() {
        return;
    }
    let _serial = serial();
    let out = temp_out("sigterm");
    let (child, _rank) = start_long_shaped_run(&out);
    // meanwhile: the ranks' TCP connections use the condition's congestion
    // control (cubic), whatever the host's default and allowed list say
    let netns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let netns = String::from_utf8_lossy(&netns.stdout).to_string();
    let rank0 = netns
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .find(|n| n.starts_with("rpr-") && n.ends_with("-r0"))
        .unwrap_or_else(|| panic!("no rank namespace in {netns}"))
        .to_string();
    let ss = Command::new("ip")
        .args([
            "netns",
            "exec",
            &rank0,
            "ss",
            "-tin",
            "state",
            "established",
        ])
        .output()
        .unwrap();
    let ss = String::from_utf8_lossy(&ss.stdout).to_string();
    let algorithms: Vec<&str> = ss
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| ["cubic", "bbr", "reno", "bic", "htcp", "dctcp"].contains(w))
        .collect();
    assert!(!algorithms.is_empty(), "no TCP connection in {rank0}: {ss}");
    assert!(algorithms.iter().all(|a| *a == "cubic"), "{ss}");
    kill("-TERM", child.id());
    let (code, stderr) = finish(child);
    assert_eq!(code, Some(130), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert_nothing_running(&out, "after SIGTERM");
    assert_no_leftovers();
}

/// A live run's network is owned: `repro net status` names its owner as
/// alive, `repro net down` keeps it (the run goes on), and only `--force`
/// would remove it.
#[test]
fn net_down_leaves_a_live_runs_network_alone() {
    if !as_root() {
        return;
    }
    let _serial = serial();
    let out = temp_out("owned");
    let (mut child, _rank) = start_long_shaped_run(&out);
    let status = repro(&["net", "status"]);
    let text = String::from_utf8_lossy(&status.stdout).to_string();
    assert!(text.contains("[live: pid"), "{text}");
    assert!(!text.contains("left behind"), "{text}");
    let down = repro(&["net", "down"]);
    let said = String::from_utf8_lossy(&down.stdout).to_string();
    assert!(down.status.success(), "{said}");
    assert!(
        said.starts_with("removed 0 of 0") && said.contains("kept"),
        "{said}"
    );
    let netns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(String::from_utf8_lossy(&netns.stdout).contains("rpr-"));
    std::thread::sleep(Duration::from_secs(1));
    assert!(child.try_wait().unwrap().is_none(), "the run stopped");
    kill("-TERM", child.id());
    let (code, stderr) = finish(child);
    assert_eq!(code, Some(130), "{stderr}");
    assert_no_leftovers();
}

/// Two runs of the same configuration started together take different
/// names (their run ids are equal), and both finish.
#[test]
fn two_runs_of_one_configuration_start_together_and_both_finish() {
    if !as_root() {
        return;
    }
    let _serial = serial();
    let outs: Vec<PathBuf> = (0..2).map(|i| temp_out(&format!("twin{i}"))).collect();
    let children: Vec<_> = outs
        .iter()
        .map(|o| {
            repro_cmd(&[
                "run",
                "tests/fixtures/net-rate.yaml",
                "--out",
                o.to_str().unwrap(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
        })
        .collect();
    for c in children {
        let (code, stderr) = finish(c);
        assert_eq!(code, Some(0), "{stderr}");
    }
    let ids: Vec<String> = outs
        .iter()
        .map(|o| read_runs(o)[0]["run_id"].clone())
        .collect();
    assert_eq!(ids[0], ids[1]);
    assert_no_leftovers();
    for o in outs {
        let _ = std::fs::remove_dir_all(o);
    }
}

/// A SIGKILLed driver leaves its network, owned by a dead pid: `repro net
/// status` says so, and the next shaped run removes it before it starts.
#[test]
fn the_next_shaped_run_reclaims_what_a_killed_driver_left() {
    if !as_root() {
        return;
    }
    let _serial = serial();
    let out = temp_out("reclaim");
    let (child, _rank) = start_long_shaped_run(&out);
    kill("-KILL", child.id());
    let _ = finish(child);
    let status = repro(&["net", "status"]);
    let text = String::from_utf8_lossy(&status.stdout).to_string();
    assert!(text.contains("left behind: its owner pid"), "{text}");
    let again = temp_out("reclaim-next");
    let o = repro_cmd(&[
        "run",
        "tests/fixtures/net-rate.yaml",
        "--out",
        again.to_str().unwrap(),
    ])
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("whose run is gone"), "{err}");
    assert_nothing_running(&out, "after the next run");
    assert_no_leftovers();
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_dir_all(&again);
}

/// No process (mpirun, orted, a rank, a trainer) names `out` on its command
/// line, within 30 s (they exit after SIGTERM on their own time).
fn assert_nothing_running(out: &Path, when: &str) {
    let alive = || -> Vec<String> {
        processes_naming(out)
            .into_iter()
            .map(|(_, cmd)| cmd)
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !alive().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(alive(), Vec::<String>::new(), "{when}: left running");
}

/// A run past its `timeout_s` is terminated, and with it every process of
/// its job: mpirun and its ranks, or the in-process trainer.
#[test]
fn a_timed_out_run_leaves_nothing_running() {
    let _serial = serial();
    for backend in ["mpi", "in-process"] {
        let out = temp_out(&format!("timeout-{backend}"));
        let o = repro_cmd(&[
            "run",
            "mpi-smoke",
            "--backend",
            backend,
            "--set",
            "grid.algorithm=[d-psgd]",
            "--set",
            "scales.smoke.iterations=1000000",
            "--set",
            "params.timeout_s=4",
            "--out",
            out.to_str().unwrap(),
        ])
        .output()
        .expect("run repro");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(3), "{backend}: {stderr}");
        assert!(
            stderr.contains("exceeded its timeout of 4 s"),
            "{backend}: {stderr}"
        );
        assert_eq!(read_runs(&out)[0]["status"], "failed");
        assert_nothing_running(&out, backend);
        let _ = std::fs::remove_dir_all(&out);
    }
}

/// A virtual cluster: three network namespaces act as hosts, each with its
/// own `eth0` into a bridge in a fourth, where the driver and mpirun run;
/// mpirun reaches the "nodes" through a launch agent that enters them with
/// `ip netns exec` (as ssh would log in). `hosts` shaping puts the rate on
/// every node's `eth0` (htb here, netem where the kernel has it): the run
/// completes, cannot be faster than its bytes at the rate, and each node's
/// original root qdisc (the kernel's default, a pfifo, a bfifo) is back
/// afterwards. Nothing is left behind.
#[test]
fn a_virtual_cluster_runs_shaped_in_hosts_mode_and_gets_its_qdiscs_back() {
    if !as_root() {
        return;
    }
    let _serial = serial();
    let cluster = VirtualCluster::new(3);
    // the hostfile and launch agent in one directory, the results in one of
    // their own inside it (a results directory holds only results)
    let work = temp_out("cluster");
    std::fs::create_dir_all(&work).unwrap();
    let out = work.join("out");
    let hostfile = work.join("hosts");
    let nodes: Vec<String> = (0..3).map(|k| cluster.node(k)).collect();
    std::fs::write(
        &hostfile,
        nodes
            .iter()
            .map(|n| format!("{n} slots=1\n"))
            .collect::<String>(),
    )
    .unwrap();
    let agent = VirtualCluster::agent(&work);
    // the nodes' original root qdiscs: the kernel's default, a pfifo, a bfifo
    cluster.tc(
        1,
        &[
            "qdisc", "replace", "dev", "eth0", "root", "pfifo", "limit", "777",
        ],
    );
    cluster.tc(
        2,
        &[
            "qdisc", "replace", "dev", "eth0", "root", "bfifo", "limit", "77777",
        ],
    );
    let before: Vec<String> = (0..3).map(|k| cluster.qdiscs(k)).collect();
    let subnet = VirtualCluster::SUBNET;
    let child = Command::new("ip")
        .args(["netns", "exec", &cluster.head()])
        .arg(env!("CARGO_BIN_EXE_repro"))
        .args([
            "run",
            "tests/fixtures/net-cluster.yaml",
            "--hostfile",
            hostfile.to_str().unwrap(),
            "--interface",
            "eth0",
            "--out",
            out.to_str().unwrap(),
        ])
        .env("REPRO_TRAIN", train_binary())
        .env("OMPI_MCA_plm_rsh_agent", &agent)
        .env("OMPI_MCA_oob_tcp_if_include", subnet)
        .env("OMPI_MCA_btl_tcp_if_include", subnet)
        .env("OMPI_MCA_btl", "tcp,self")
        .env("PMIX_MCA_ptl_tcp_if_include", subnet)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // while the nodes are shaped, the driver owns the interface: its record
    // here, its pid in every node's state, and a node's `net down` refused
    let driver = child.id();
    let record = Path::new("/run/repro/net/hosts-eth0.owner");
    let start = Instant::now();
    let mut seen = None;
    while seen.is_none() && start.elapsed() < Duration::from_secs(300) {
        let shaped = (0..3)
            .all(|k| cluster.qdiscs(k).contains("netem") || cluster.qdiscs(k).contains("htb"));
        if let Ok(text) = std::fs::read_to_string(record)
            && shaped
        {
            seen = Some(text);
        } else {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let seen = seen.expect("the driver never recorded itself as the owner of eth0");
    // `ip netns exec` execs repro: the driver has the child's pid
    assert!(seen.starts_with(&format!("{driver}\n")), "{seen}");
    let states: Vec<String> = std::fs::read_dir("/run/repro")
        .unwrap()
        .flatten()
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with("node-") && n.ends_with("-eth0.json")
        })
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect();
    assert_eq!(states.len(), 3, "{states:?}");
    for st in &states {
        assert!(st.contains(&format!("\"pid\": {driver}")), "{st}");
    }
    let status = Command::new("ip")
        .args(["netns", "exec", &cluster.head()])
        .arg(env!("CARGO_BIN_EXE_repro"))
        .args(["net", "status"])
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.contains(&format!("cluster run pid {driver} (live) shapes eth0")),
        "{status}"
    );
    let refused = Command::new("ip")
        .args(["netns", "exec", &nodes[1]])
        .arg(env!("CARGO_BIN_EXE_repro"))
        .args(["net", "down", "--interface", "eth0"])
        .output()
        .unwrap();
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{why}");
    assert!(why.contains(&format!("the live run pid {driver}")), "{why}");
    let o = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(!record.exists(), "the owner record outlived its run");
    let runs = read_runs(&out);
    let run = &runs[0];
    assert_eq!(run["status"], "completed", "{run:?}");
    assert!(run["shaping"].starts_with("hosts: "), "{run:?}");
    let num = |k: &str| {
        run[k]
            .parse::<f64>()
            .unwrap_or_else(|_| panic!("{k}: {run:?}"))
    };
    // every byte a rank sent left through its node's 10 Mbit/s eth0
    let counted = num("counted_bytes_per_worker");
    assert!(counted > 5e5, "{run:?}");
    let floor = (counted - 32768.0) / (10e6 / 8.0);
    assert!(num("wall_s") >= floor, "{} s < {floor} s", num("wall_s"));
    // and an iteration took at least its bytes' time at the rate
    assert!(num("time_over_bound") >= 0.95, "{run:?}");
    let launch =
        std::fs::read_to_string(out.join("raw").join(&run["run_id"]).join("launch.txt")).unwrap();
    assert!(launch.contains("--hostfile"), "{launch}");
    // every node's root qdisc is the one it had
    let after: Vec<String> = (0..3).map(|k| cluster.qdiscs(k)).collect();
    assert_eq!(before, after);
    assert!(after[1].contains("\"limit\":777"), "{}", after[1]);
    // `repro net down --interface` on a node with nothing saved: nothing to do
    let o = Command::new("ip")
        .args(["netns", "exec", &nodes[0]])
        .arg(env!("CARGO_BIN_EXE_repro"))
        .args(["net", "down", "--interface", "eth0"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("nothing to restore"));
    drop(cluster);
    let netns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&netns.stdout).contains("rvc-"));
    assert_no_leftovers();
}

/// A crashed cluster run: its nodes' interfaces are still shaped and their
/// state saved; `repro net down --interface eth0 --hostfile H` puts every
/// original root qdisc back.
#[test]
fn net_down_restores_the_interfaces_a_crashed_cluster_run_shaped() {
    if !as_root() {
        return;
    }
    let _serial = serial();
    let cluster = VirtualCluster::new(2);
    cluster.tc(
        0,
        &[
            "qdisc", "replace", "dev", "eth0", "root", "pfifo", "limit", "555",
        ],
    );
    let before: Vec<String> = (0..2).map(|k| cluster.qdiscs(k)).collect();
    // what a driver killed mid-run leaves: every node shaped, its state
    // saved and naming the driver (here a process that has exited)
    let mut gone = Command::new("true").spawn().unwrap();
    let gone_pid = gone.id();
    gone.wait().unwrap();
    let proc_text = |p: &str| std::fs::read_to_string(p).unwrap().trim().to_string();
    let host = proc_text("/proc/sys/kernel/hostname");
    let boot = proc_text("/proc/sys/kernel/random/boot_id");
    let dead_owner = format!("{host}:{boot}:{gone_pid}:1");
    for k in 0..2 {
        let o = Command::new("ip")
            .args(["netns", "exec", &cluster.node(k)])
            .arg(env!("CARGO_BIN_EXE_repro"))
            .args([
                "net",
                "node",
                "up",
                "--interface",
                "eth0",
                "--rate-bps",
                "5000000",
                "--no-netem",
                "--owner",
                &dead_owner,
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(cluster.qdiscs(k).contains("htb"), "{}", cluster.qdiscs(k));
    }
    let dir = temp_out("crashed-cluster");
    std::fs::create_dir_all(&dir).unwrap();
    let hostfile = dir.join("hosts");
    std::fs::write(
        &hostfile,
        format!("{} slots=1\n{} slots=1\n", cluster.node(0), cluster.node(1)),
    )
    .unwrap();
    let agent = VirtualCluster::agent(&dir);
    let subnet = VirtualCluster::SUBNET;
    let down = || {
        Command::new("ip")
            .args(["netns", "exec", &cluster.head()])
            .arg(env!("CARGO_BIN_EXE_repro"))
            .args([
                "net",
                "down",
                "--interface",
                "eth0",
                "--hostfile",
                hostfile.to_str().unwrap(),
            ])
            .env("OMPI_MCA_plm_rsh_agent", &agent)
            .env("OMPI_MCA_oob_tcp_if_include", subnet)
            .env("PMIX_MCA_ptl_tcp_if_include", subnet)
            .output()
            .unwrap()
    };
    // while a live run from this machine owns eth0 (this test process
    // stands in for it), the restore is refused and nothing changes
    let record = Path::new("/run/repro/net/hosts-eth0.owner");
    std::fs::create_dir_all(record.parent().unwrap()).unwrap();
    let stat = proc_text("/proc/self/stat");
    let me_start = stat[stat.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .nth(19)
        .unwrap()
        .to_string();
    std::fs::write(
        record,
        format!("{}\n{me_start}\nthe test\n", std::process::id()),
    )
    .unwrap();
    let o = down();
    let _ = std::fs::remove_file(record);
    let why = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{why}");
    assert!(why.contains("the live run pid"), "{why}");
    assert!(cluster.qdiscs(0).contains("htb"), "{}", cluster.qdiscs(0));
    let o = down();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        stdout.matches("restored the root qdisc of eth0").count(),
        2,
        "{stdout}"
    );
    let after: Vec<String> = (0..2).map(|k| cluster.qdiscs(k)).collect();
    assert_eq!(before, after);
}

/// Network namespaces that act as the hosts of a cluster: `rvc-<pid>-n<k>`
/// with `eth0` (10.218.0.k+1) into a bridge in `rvc-<pid>-head`
/// (10.218.0.254). Removed when dropped.
struct VirtualCluster {
    nodes: usize,
}

impl VirtualCluster {
    const SUBNET: &'static str = "10.218.0.0/24";

    fn ip(args: &[&str]) {
        let o = Command::new("ip").args(args).output().unwrap();
        assert!(
            o.status.success(),
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr)
        );
    }

    /// Writes mpirun's launch agent (`--mca plm_rsh_agent`) into `dir`:
    /// ssh for namespaces, `agent HOST COMMAND...`. Every node gets its own
    /// OpenMPI session directory: the nodes share one /tmp and one host
    /// name, and daemons sharing a session directory crash (seen: orted in
    /// hwloc_shmem_topology_write, one launch in six).
    fn agent(dir: &Path) -> PathBuf {
        let agent = dir.join("agent.sh");
        let sessions = dir.join("sessions");
        std::fs::write(
            &agent,
            format!(
                "#!/bin/sh\nhost=\"$1\"; shift\n\
                 export OMPI_MCA_orte_tmpdir_base=\"{}/$host\"\n\
                 mkdir -p \"$OMPI_MCA_orte_tmpdir_base\"\n\
                 exec ip netns exec \"$host\" sh -c \"$*\"\n",
                sessions.display()
            ),
        )
        .unwrap();
        let mut perms = std::fs::metadata(&agent).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&agent, perms).unwrap();
        agent
    }

    fn head(&self) -> String {
        format!("rvc-{}-head", std::process::id())
    }

    fn node(&self, k: usize) -> String {
        format!("rvc-{}-n{k}", std::process::id())
    }

    fn new(nodes: usize) -> Self {
        let c = Self { nodes };
        c.remove();
        let head = c.head();
        Self::ip(&["netns", "add", &head]);
        Self::ip(&["-n", &head, "link", "set", "lo", "up"]);
        Self::ip(&["-n", &head, "link", "add", "br0", "type", "bridge"]);
        Self::ip(&["-n", &head, "addr", "add", "10.218.0.254/24", "dev", "br0"]);
        Self::ip(&["-n", &head, "link", "set", "br0", "up"]);
        for k in 0..nodes {
            let node = c.node(k);
            let veth = format!("vc{k}");
            Self::ip(&["netns", "add", &node]);
            Self::ip(&[
                "-n", &head, "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns",
                &node,
            ]);
            Self::ip(&["-n", &head, "link", "set", &veth, "master", "br0"]);
            Self::ip(&["-n", &head, "link", "set", &veth, "up"]);
            let addr = format!("10.218.0.{}/24", k + 1);
            Self::ip(&["-n", &node, "addr", "add", &addr, "dev", "eth0"]);
            Self::ip(&["-n", &node, "link", "set", "lo", "up"]);
            Self::ip(&["-n", &node, "link", "set", "eth0", "up"]);
        }
        c
    }

    /// `tc -n <node k> ARGS`.
    fn tc(&self, k: usize, args: &[&str]) {
        let o = Command::new("tc")
            .args(["-n", &self.node(k)])
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }

    /// Node k's qdiscs on eth0 as `tc -j` prints them, without counters.
    fn qdiscs(&self, k: usize) -> String {
        let o = Command::new("tc")
            .args(["-n", &self.node(k), "-j", "qdisc", "show", "dev", "eth0"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }

    fn remove(&self) {
        for k in 0..self.nodes {
            let _ = Command::new("ip")
                .args(["netns", "del", &self.node(k)])
                .output();
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.head()])
            .output();
    }
}

impl Drop for VirtualCluster {
    fn drop(&mut self) {
        self.remove();
    }
}

/// A SIGKILLed driver leaves nothing running: its job (mpirun, or the
/// in-process trainer) gets SIGTERM when the driver dies, and stops.
#[test]
fn a_killed_driver_leaves_nothing_running() {
    for backend in ["in-process", "mpi"] {
        killed_driver_leaves_nothing_running(backend);
    }
}

fn killed_driver_leaves_nothing_running(backend: &str) {
    let _serial = serial();
    let out = temp_out(&format!("killed-driver-{backend}"));
    let args = [
        "run",
        "mpi-smoke",
        "--backend",
        backend,
        "--set",
        "scales.smoke.iterations=1000000",
        "--set",
        "grid.algorithm=[d-psgd]",
        "--out",
        out.to_str().unwrap(),
    ];
    // an earlier run of the same id left its logs: they must survive
    let plan = repro(&[&args[..], &["--dry-run"]].concat());
    let plan = String::from_utf8_lossy(&plan.stdout).into_owned();
    let id = plan
        .lines()
        .find_map(|l| l.trim().strip_suffix("algorithm=d-psgd"))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no run in {plan}"));
    let earlier = out.join("raw").join(id);
    std::fs::create_dir_all(&earlier).unwrap();
    std::fs::write(earlier.join("rank-0.jsonl"), "earlier\n").unwrap();
    let mut child = repro_cmd(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_trainer(&mut child, &out);
    kill("-KILL", child.id());
    let _ = child.wait();
    assert_nothing_running(&out, backend);
    assert_eq!(
        std::fs::read_to_string(earlier.join("rank-0.jsonl")).unwrap(),
        "earlier\n",
        "{backend}: the killed run replaced the earlier run's logs"
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// As root under sudo (`SUDO_UID`), every rank runs as the invoking user:
/// a stand-in trainer records the uid it runs as, in-process and under
/// mpirun. A trainer that user cannot run is one error before any run.
#[test]
fn ranks_run_as_the_sudo_user() {
    if !as_root() {
        return;
    }
    let _serial = serial();
    let nobody = "65534";
    // a stand-in trainer where any user can run it
    let dir = temp_out("sudo-trainer");
    std::fs::create_dir_all(&dir).unwrap();
    let version = repro(&["--version"]);
    let version = String::from_utf8_lossy(&version.stdout).replacen("repro ", "", 1);
    let fake = dir.join("repro-train");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\n\
             if [ \"$1\" = --version ]; then echo 'repro-train {}'; exit 0; fi\n\
             while [ $# -gt 0 ]; do [ \"$1\" = --log-dir ] && log=\"$2\"; shift; done\n\
             id -u > \"$log/uid-${{OMPI_COMM_WORLD_RANK:-all}}\"\n",
            version.trim()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    for p in [&dir, &fake] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    for backend in ["in-process", "mpi"] {
        let out = temp_out(&format!("sudo-{backend}"));
        let o = Command::new(env!("CARGO_BIN_EXE_repro"))
            .args(["run", "mpi-smoke", "--backend", backend])
            .args(["--set", "grid.algorithm=[d-psgd]", "--out"])
            .arg(&out)
            .env("REPRO_TRAIN", &fake)
            .env("SUDO_UID", nobody)
            .env("SUDO_GID", nobody)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("run repro");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            stderr.contains("ranks run as uid 65534 gid 65534"),
            "{stderr}"
        );
        // the stand-in writes no log, so the run fails, after it recorded its uid
        let run = read_runs(&out)[0]["run_id"].clone();
        let uids: Vec<String> = std::fs::read_dir(out.join("raw").join(&run))
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("uid-"))
            .map(|e| {
                std::fs::read_to_string(e.path())
                    .unwrap()
                    .trim()
                    .to_string()
            })
            .collect();
        let ranks = if backend == "mpi" { 3 } else { 1 };
        assert_eq!(uids, vec![nobody.to_string(); ranks], "{backend}: {stderr}");
        let _ = std::fs::remove_dir_all(&out);
    }
    // the real trainer, where that user cannot reach it (or libtorch)
    let unreachable = temp_out("sudo-unreachable");
    std::fs::create_dir_all(&unreachable).unwrap();
    std::fs::set_permissions(&unreachable, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::copy(&fake, unreachable.join("repro-train")).unwrap();
    let out = temp_out("sudo-refused");
    let o = Command::new(env!("CARGO_BIN_EXE_repro"))
        .args(["run", "mpi-smoke", "--backend", "in-process", "--out"])
        .arg(&out)
        .env("REPRO_TRAIN", unreachable.join("repro-train"))
        .env("SUDO_UID", nobody)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run repro");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("uid 65534 (SUDO_UID), who cannot run"),
        "{stderr}"
    );
    assert!(!out.join("runs.csv").exists());
    for p in [dir, unreachable, out] {
        let _ = std::fs::remove_dir_all(p);
    }
}

/// Every trainer run measures its compute per step; a profiled one also
/// the algorithm's own work per step (building and applying frames).
#[test]
fn runs_measure_compute_and_the_algorithms_work_per_step() {
    let _serial = serial();
    let out = temp_out("step-costs");
    let o = repro(&[
        "run",
        "mpi-smoke",
        "--set",
        "grid.algorithm=[choco]",
        "--set",
        "grid.profile_phases=[true,false]",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rows = csv_rows(&out.join("runs.csv"));
    assert_eq!(rows.len(), 2);
    for r in &rows {
        let compute: f64 = r["compute_step_s"].parse().unwrap();
        assert!(compute > 0.0, "{r:?}");
        match r["profile_phases"].as_str() {
            "true" => {
                let work: f64 = r["algorithm_step_s"].parse().unwrap();
                assert!(work > 0.0, "{r:?}");
            }
            _ => assert_eq!(r["algorithm_step_s"], "NaN", "{r:?}"),
        }
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// `allreduce-mpi` sums with the library's MPI_Allreduce beside our ring:
/// on 3 ranks both add in the same order, so the runs agree bit for bit;
/// the ring hands 2 (n - 1) / n of the buffer per round trip to the
/// network, MPI_Allreduce the buffer once. Halving and doubling (rank 2
/// folded into rank 0) adds in another order: the same run to rounding,
/// and on 3 ranks the ring's gossip bytes per worker. With latency the
/// transport would have to inject, `allreduce-mpi` refuses to run rather
/// than skip the latency.
#[test]
fn allreduce_mpi_sums_as_the_ring_does() {
    let _serial = serial();
    let out = temp_out("allreduce-mpi");
    let dir = out.to_str().unwrap();
    let o = repro(&[
        "run",
        "mpi-smoke",
        "--set",
        "grid.algorithm=[allreduce,allreduce-mpi,allreduce-rhd]",
        "--out",
        dir,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rows = csv_rows(&out.join("runs.csv"));
    let of = |alg: &str| rows.iter().find(|r| r["algorithm"] == alg).unwrap().clone();
    let (ring, library, rhd) = (of("allreduce"), of("allreduce-mpi"), of("allreduce-rhd"));
    for k in ["final_loss", "train_loss", "avg_test_accuracy"] {
        assert_eq!(ring[k], library[k], "{k}");
        let (a, b): (f64, f64) = (ring[k].parse().unwrap(), rhd[k].parse().unwrap());
        assert!((a - b).abs() <= 1e-3 * a.abs().max(1.0), "{k}: {a} vs {b}");
    }
    assert_eq!(library["status"], "completed");
    assert_eq!(rhd["status"], "completed");
    assert_eq!(
        rhd["gossip_bytes_per_worker"],
        ring["gossip_bytes_per_worker"]
    );
    let gossip: f64 = ring["gossip_bytes_per_worker"].parse().unwrap();
    let counted: f64 = ring["counted_bytes_per_worker"].parse().unwrap();
    // evaluation's all-reduces are counted, not gossip
    assert!(gossip > 0.0 && gossip < counted, "{gossip} {counted}");
    let o = repro(&[
        "run",
        "mpi-smoke",
        "--set",
        "grid.algorithm=[allreduce-mpi]",
        "--set",
        "params.latency_ms=1",
        "--out",
        dir,
    ]);
    assert!(!o.status.success());
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(
        said.contains("bypass the transport's injected latency"),
        "{said}"
    );
    // the failure (other parameters: another run id) is recorded beside
    // the finished run it did not replace
    let rows = csv_rows(&out.join("runs.csv"));
    assert!(
        rows.iter()
            .any(|r| r["algorithm"] == "allreduce-mpi" && r["status"] == "completed"),
        "{rows:?}"
    );
    assert!(
        rows.iter().any(|r| r["algorithm"] == "allreduce-mpi"
            && r["status"] == "failed"
            && r["error"].contains("bypass the transport's injected latency")),
        "{rows:?}"
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// A Slurm cluster from Slurm's own daemons (munge, slurmctld, slurmd),
/// with every file in a directory of its own and its own ports; stopped
/// when dropped. `SLURM_CONF` points clients at it. [`Slurm::start`]: one
/// node, this machine. [`Slurm::cluster`]: a virtual cluster, one network
/// namespace per node (each slurmd with its own `eth0` and its own `TmpFS`,
/// as a real node has), and the controller in a head namespace on their
/// bridge, where the clients run.
struct Slurm {
    dir: PathBuf,
    /// The head namespace and the nodes' (a virtual cluster).
    netns: Option<(String, Vec<String>)>,
}

impl Slurm {
    /// The subnet of a virtual cluster's nodes.
    const SUBNET: &'static str = "10.218.1.0/24";

    fn start(name: &str) -> Slurm {
        Self::boot(temp_out(name), None)
    }

    /// `nodes` nodes, each a namespace: `eth0` at 10.218.1.<k+1>.
    fn cluster(name: &str, nodes: usize) -> Slurm {
        let dir = temp_out(name);
        let head = format!("rsl-{}-head", std::process::id());
        let names: Vec<String> = (0..nodes)
            .map(|k| format!("rsl-{}-n{k}", std::process::id()))
            .collect();
        let ip = |args: &[&str]| VirtualCluster::ip(args);
        let _ = Command::new("ip").args(["netns", "del", &head]).output();
        ip(&["netns", "add", &head]);
        ip(&["-n", &head, "link", "set", "lo", "up"]);
        ip(&["-n", &head, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", &head, "addr", "add", "10.218.1.254/24", "dev", "br0"]);
        ip(&["-n", &head, "link", "set", "br0", "up"]);
        for (k, node) in names.iter().enumerate() {
            let _ = Command::new("ip").args(["netns", "del", node]).output();
            let veth = format!("sl{k}");
            ip(&["netns", "add", node]);
            ip(&[
                "-n", &head, "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns",
                node,
            ]);
            ip(&["-n", &head, "link", "set", &veth, "master", "br0"]);
            ip(&["-n", &head, "link", "set", &veth, "up"]);
            let addr = format!("10.218.1.{}/24", k + 1);
            ip(&["-n", node, "addr", "add", &addr, "dev", "eth0"]);
            ip(&["-n", node, "link", "set", "lo", "up"]);
            ip(&["-n", node, "link", "set", "eth0", "up"]);
        }
        Self::boot(dir, Some((head, names)))
    }

    /// Writes slurm.conf into `dir` and starts the daemons.
    fn boot(dir: PathBuf, netns: Option<(String, Vec<String>)>) -> Slurm {
        for d in ["state", "spool", "log", "munge", "tmp"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        let host = String::from_utf8(Command::new("hostname").output().unwrap().stdout)
            .unwrap()
            .trim()
            .to_string();
        let port = 17000 + (std::process::id() % 2000) * 2;
        let d = dir.display();
        let (controller, nodes, node_dir) = match &netns {
            None => (
                host.clone(),
                format!("NodeName={host} CPUs=8 State=UNKNOWN\n"),
                "",
            ),
            Some((_, names)) => (
                format!("{host}(10.218.1.254)"),
                (0..names.len())
                    .map(|k| {
                        format!(
                            "NodeName=vn{k} NodeHostname={host} NodeAddr=10.218.1.{} CPUs=4 \
                             State=UNKNOWN\n",
                            k + 1
                        )
                    })
                    .collect(),
                "-%n",
            ),
        };
        let conf = format!(
            "ClusterName=repro\nSlurmctldHost={controller}\nAuthType=auth/munge\n\
             AuthInfo=socket={d}/munge/socket\nCredType=cred/munge\nSlurmUser=root\n\
             SlurmctldPort={port}\nSlurmdPort={}\nStateSaveLocation={d}/state\n\
             SlurmdSpoolDir={d}/spool{node_dir}\nTmpFS={d}/tmp{node_dir}\n\
             SlurmctldPidFile={d}/slurmctld.pid\n\
             SlurmdPidFile={d}/slurmd{node_dir}.pid\nSlurmctldLogFile={d}/log/slurmctld.log\n\
             SlurmdLogFile={d}/log/slurmd{node_dir}.log\nProctrackType=proctrack/linuxproc\n\
             TaskPlugin=task/none\nSelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n\
             SlurmdParameters=config_overrides\nMpiDefault=none\nReturnToService=2\n{nodes}\
             PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES\n",
            port + 1
        );
        std::fs::write(dir.join("slurm.conf"), conf).unwrap();
        let daemons = match &netns {
            None => {
                format!("SLURM_CONF={d}/slurm.conf slurmctld; SLURM_CONF={d}/slurm.conf slurmd")
            }
            // slurmd through nsenter, not `ip netns exec`, which remounts
            // /sys without the cgroup tree slurmd needs; a TmpFS each, so
            // the nodes' PMIx directories do not collide (in one /tmp:
            // "Cannot create directory /tmp/spmix_appdir_0_1.2: File exists")
            Some((head, names)) => {
                let mut sh = format!(
                    "export SLURM_CONF={d}/slurm.conf; nsenter --net=/var/run/netns/{head} slurmctld"
                );
                for (k, node) in names.iter().enumerate() {
                    sh.push_str(&format!(
                        "; mkdir -p {d}/spool-vn{k} {d}/tmp-vn{k}; \
                         nsenter --net=/var/run/netns/{node} slurmd -N vn{k}"
                    ));
                }
                sh
            }
        };
        let sh = format!(
            "set -e; cd {d}; chmod 700 munge; head -c 1024 /dev/urandom > munge/munge.key; \
             chmod 400 munge/munge.key; \
             munged --key-file=munge/munge.key --socket={d}/munge/socket \
             --pid-file={d}/munge/munged.pid --log-file={d}/munge/munged.log \
             --seed-file={d}/munge/seed --force; {daemons}"
        );
        let o = Command::new("bash").args(["-c", &sh]).output().unwrap();
        assert!(
            o.status.success(),
            "could not start Slurm (ci/setup.sh installs slurm-wlm and munge): {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let s = Slurm { dir, netns };
        // every node registers: idle
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let o = s.cmd("sinfo").args(["-h", "-o", "%t"]).output().unwrap();
            if String::from_utf8_lossy(&o.stdout).trim() == "idle" {
                break;
            }
            assert!(Instant::now() < deadline, "the Slurm nodes never came up");
            std::thread::sleep(Duration::from_millis(300));
        }
        s
    }

    /// `program` as a client of this Slurm (in the head namespace of a
    /// virtual cluster).
    fn cmd(&self, program: &str) -> Command {
        let mut c = match &self.netns {
            None => Command::new(program),
            Some((head, _)) => {
                let mut c = Command::new("nsenter");
                c.arg(format!("--net=/var/run/netns/{head}")).arg(program);
                c
            }
        };
        c.env("SLURM_CONF", self.dir.join("slurm.conf"));
        c
    }

    /// `repro submit ARGS DIR` from the project (ARGS end with the flag
    /// that takes DIR: `--out` or `--resume`), with the test's trainer and
    /// `env`: what it printed, and the job.json it left in DIR.
    fn submit(
        &self,
        args: &[&str],
        dir: &Path,
        env: &[(&str, &str)],
    ) -> (String, serde_json::Value) {
        let o = self
            .cmd(env!("CARGO_BIN_EXE_repro"))
            .arg("submit")
            .args(args)
            .arg(dir)
            .env("REPRO_TRAIN", train_binary())
            .envs(env.iter().copied())
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&o.stdout).to_string();
        assert!(
            o.status.success(),
            "{said}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let job =
            serde_json::from_str(&std::fs::read_to_string(dir.join("job.json")).unwrap()).unwrap();
        (said, job)
    }

    /// Node k's qdiscs on eth0 as `tc -j` prints them (a virtual cluster).
    fn qdiscs(&self, k: usize) -> String {
        let (_, names) = self.netns.as_ref().unwrap();
        let o = Command::new("tc")
            .args(["-n", &names[k], "-j", "qdisc", "show", "dev", "eth0"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }

    /// Waits for job `id` to leave the queue.
    fn wait(&self, id: &str, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            let o = self.cmd("squeue").args(["-h", "-j", id]).output().unwrap();
            if String::from_utf8_lossy(&o.stdout).trim().is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "job {id} still queued after {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        let nodes = self.netns.as_ref().map_or(0, |(_, n)| n.len());
        let mut pids: Vec<String> = vec!["slurmd.pid".into(), "slurmctld.pid".into()];
        pids.extend((0..nodes).map(|k| format!("slurmd-vn{k}.pid")));
        pids.push("munge/munged.pid".into());
        for pid in pids {
            if let Ok(p) = std::fs::read_to_string(self.dir.join(pid)) {
                let _ = Command::new("kill").arg(p.trim()).status();
            }
        }
        std::thread::sleep(Duration::from_millis(500));
        if let Some((head, names)) = &self.netns {
            for n in names.iter().chain(std::iter::once(head)) {
                let _ = Command::new("ip").args(["netns", "del", n]).output();
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Hosts-mode shaping through srun, on a virtual Slurm cluster of three
/// nodes: `repro submit --interface eth0` runs the shaped experiment in a
/// batch job on the first node; the driver shapes every node's eth0
/// through `srun --ntasks-per-node=1 repro net node`, the ranks run one a
/// node, the run cannot beat its bytes at the rate, and each node's root
/// qdisc (the veth's default, a pfifo) is back afterwards.
#[test]
fn a_slurm_job_shapes_every_node_in_hosts_mode_through_srun() {
    let _serial = serial();
    if !as_root() {
        return;
    }
    let slurm = Slurm::cluster("slurm-hosts", 3);
    let (_, names) = slurm.netns.clone().unwrap();
    let o = Command::new("tc")
        .args(["-n", &names[1], "qdisc", "replace", "dev", "eth0", "root"])
        .args(["pfifo", "limit", "777"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let before: Vec<String> = (0..3).map(|k| slurm.qdiscs(k)).collect();
    let out = temp_out("slurm-hosts-out");
    let subnet = Slurm::SUBNET;
    let (_, job) = slurm.submit(
        &[
            "tests/fixtures/net-cluster.yaml",
            "--nodes",
            "3",
            "--interface",
            "eth0",
            "--out",
        ],
        &out,
        &[
            ("OMPI_MCA_oob_tcp_if_include", subnet),
            ("OMPI_MCA_btl_tcp_if_include", subnet),
            ("OMPI_MCA_btl", "tcp,self"),
            ("PMIX_MCA_ptl_tcp_if_include", subnet),
        ],
    );
    let id = job["job_id"].as_str().unwrap().to_string();
    slurm.wait(&id, Duration::from_secs(300));
    let log = std::fs::read_to_string(out.join(format!("slurm-{id}.out"))).unwrap_or_default();
    assert!(
        out.join("runs.csv").is_file(),
        "the job wrote no runs.csv: {log}"
    );
    let runs = read_runs(&out);
    assert_eq!(runs.len(), 1, "{log}");
    let run = &runs[0];
    assert_eq!(run["status"], "completed", "{run:?}\n{log}");
    assert!(run["shaping"].starts_with("hosts: "), "{run:?}");
    assert!(run["shaping"].contains("on eth0 of every node"), "{run:?}");
    let over: f64 = run["time_over_bound"].parse().unwrap();
    assert!(over >= 0.95, "faster than its bytes at the rate: {run:?}");
    let p: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("provenance.json")).unwrap())
            .unwrap();
    assert_eq!(p["launcher"], format!("srun --mpi=pmix in Slurm job {id}"));
    // every node's root qdisc is back, and no owner record is left
    for (k, b) in before.iter().enumerate() {
        assert_eq!(&slurm.qdiscs(k), b, "node {k}");
    }
    assert!(!Path::new("/run/repro/net/hosts-eth0.owner").exists());
    drop(slurm);
    let _ = std::fs::remove_dir_all(&out);
}

/// `repro submit` against a real Slurm: the job runs mpi-smoke through
/// srun (PMIx) into its run directory, and its runs are the runs an
/// mpirun run of the same manifest makes (same ids, every one completed);
/// `repro status` says the job completed, provenance.json that srun
/// started the ranks in that job. A job cancelled part-way (`repro
/// cancel`) keeps the run it finished, `repro status` says it was
/// cancelled, and `repro submit --resume` runs only what is missing. A
/// job array of two chunks runs the same runs, and the job after it
/// adopts them into the run directory. `--launcher mpirun` runs them with
/// mpirun inside the job's allocation.
#[test]
fn a_submitted_job_runs_under_slurm_as_mpirun_runs() {
    let _serial = serial();
    if !as_root() {
        return;
    }
    let slurm = Slurm::start("slurm");
    let out = temp_out("slurm-job");
    let (said, job) = slurm.submit(&["mpi-smoke", "--out"], &out, &[]);
    let id = job["job_id"].as_str().unwrap().to_string();
    assert!(said.contains(&format!("submitted job {id}")), "{said}");
    slurm.wait(&id, Duration::from_secs(300));
    let log = std::fs::read_to_string(out.join(format!("slurm-{id}.out"))).unwrap_or_default();
    assert!(
        out.join("runs.csv").is_file(),
        "the job wrote no runs.csv: {log}"
    );
    let rows = read_runs(&out);
    assert_eq!(rows.len(), 2, "{log}");
    assert!(
        rows.iter().all(|r| r["status"] == "completed"),
        "{rows:?}\n{log}"
    );
    // the same manifest through mpirun: the same runs
    let local = temp_out("slurm-mpirun");
    let o = repro(&["run", "mpi-smoke", "--out", local.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let ids = |rows: &[std::collections::BTreeMap<String, String>]| {
        let mut v: Vec<String> = rows.iter().map(|r| r["run_id"].clone()).collect();
        v.sort();
        v
    };
    assert_eq!(ids(&rows), ids(&read_runs(&local)));
    // srun started the ranks, in this job; the script kept the exit status
    let launcher = |dir: &Path| {
        let p: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("provenance.json")).unwrap())
                .unwrap();
        p["launcher"].as_str().unwrap_or_default().to_string()
    };
    assert_eq!(launcher(&out), format!("srun --mpi=pmix in Slurm job {id}"));
    assert_eq!(launcher(&local), "mpirun");
    assert_eq!(
        std::fs::read_to_string(out.join(format!("slurm-{id}.exit"))).unwrap_or_default(),
        "0\n",
        "{log}"
    );
    // `repro status` of the run directory says how the job ended
    let status = |dir: &Path| {
        let o = slurm
            .cmd(env!("CARGO_BIN_EXE_repro"))
            .args(["status"])
            .arg(dir)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap();
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    let said = status(&out);
    assert!(
        said.contains(&format!("Slurm job {id}: COMPLETED")),
        "{said}"
    );
    // a site whose MPI does not start under srun: mpirun inside the job's
    // allocation, the same runs, and provenance says which started them
    let viampi = temp_out("slurm-mpirun-inside");
    let (_, job) = slurm.submit(
        &["mpi-smoke", "--launcher", "mpirun", "--out"],
        &viampi,
        &[],
    );
    let inside = job["job_id"].as_str().unwrap().to_string();
    slurm.wait(&inside, Duration::from_secs(300));
    let log =
        std::fs::read_to_string(viampi.join(format!("slurm-{inside}.out"))).unwrap_or_default();
    let rows = read_runs(&viampi);
    assert!(
        rows.len() == 2 && rows.iter().all(|r| r["status"] == "completed"),
        "{rows:?}\n{log}"
    );
    assert_eq!(ids(&rows), ids(&read_runs(&local)));
    assert_eq!(launcher(&viampi), format!("mpirun in Slurm job {inside}"));
    // a job array of two chunks, each into a directory of its own, then
    // the job that waits for them: it adopts their runs, the only writer
    // of the run directory
    let arr = temp_out("slurm-array");
    let (_, job) = slurm.submit(&["mpi-smoke", "--array", "2", "--out"], &arr, &[]);
    let (closer, array) = (
        job["job_id"].as_str().unwrap().to_string(),
        job["array_job_id"].as_str().unwrap().to_string(),
    );
    assert_eq!(job["chunks"], 2);
    slurm.wait(&closer, Duration::from_secs(300));
    let log = std::fs::read_to_string(arr.join(format!("slurm-{closer}.out"))).unwrap_or_default();
    let rows = read_runs(&arr);
    assert!(
        rows.iter().all(|r| r["status"] == "completed"),
        "{rows:?}\n{log}"
    );
    assert_eq!(ids(&rows), ids(&read_runs(&local)), "{log}");
    assert_eq!(log.matches(": adopted from ").count(), 2, "{log}");
    for k in ["1", "2"] {
        let chunk = arr.join("chunks").join(k);
        assert_eq!(read_runs(&chunk).len(), 1, "chunk {k}");
        for r in &rows {
            assert!(!chunk.join("raw").join(&r["run_id"]).exists(), "chunk {k}");
        }
    }
    for r in &rows {
        assert!(
            arr.join("raw")
                .join(&r["run_id"])
                .join("rank-0.jsonl")
                .is_file()
        );
    }
    let said = status(&arr);
    assert!(
        said.contains(&format!("Slurm job array {array} (2 chunks into "))
            && said.contains(&format!("Slurm job {closer}: COMPLETED")),
        "{said}"
    );
    // a job cancelled part-way, while its second run trains: the run it
    // finished stays, recorded
    let long = temp_out("slurm-cancel");
    let (_, job) = slurm.submit(
        &[
            "mpi-smoke",
            "--set",
            "cases=[{when: {algorithm: moniqua}, set: {iterations: 400}}]",
            "--out",
        ],
        &long,
        &[],
    );
    let long_id = job["job_id"].as_str().unwrap().to_string();
    let log = long.join(format!("slurm-{long_id}.out"));
    let deadline = Instant::now() + Duration::from_secs(120);
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("[1/2]")
    {
        assert!(Instant::now() < deadline, "the first run never ended");
        std::thread::sleep(Duration::from_millis(300));
    }
    let train = train_binary().to_str().unwrap().to_string();
    while !processes_naming(&long)
        .iter()
        .any(|(_, cmd)| cmd.starts_with(&train))
    {
        assert!(Instant::now() < deadline, "the second run never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = slurm
        .cmd(env!("CARGO_BIN_EXE_repro"))
        .arg("cancel")
        .arg(&long)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    slurm.wait(&long_id, Duration::from_secs(120));
    let said = status(&long);
    assert!(
        said.contains(&format!("Slurm job {long_id}: CANCELLED")),
        "{said}"
    );
    let log = std::fs::read_to_string(&log).unwrap_or_default();
    let rows = read_runs(&long);
    let finished: Vec<_> = rows
        .iter()
        .filter(|r| r["algorithm"] == "d-psgd" && r["status"] == "completed")
        .cloned()
        .collect();
    assert_eq!(finished.len(), 1, "{rows:?}\n{log}");
    assert!(
        !rows
            .iter()
            .any(|r| r["algorithm"] == "moniqua" && r["status"] == "completed"),
        "the cancel came too late: {rows:?}"
    );
    // resumed: the run it finished is kept as it was, the other runs
    let (_, job) = slurm.submit(&["--resume"], &long, &[]);
    let again = job["job_id"].as_str().unwrap().to_string();
    assert_ne!(again, long_id);
    assert_eq!(job["earlier_jobs"], serde_json::json!([long_id]));
    slurm.wait(&again, Duration::from_secs(300));
    let log = std::fs::read_to_string(long.join(format!("slurm-{again}.out"))).unwrap_or_default();
    let rows = read_runs(&long);
    assert_eq!(rows.len(), 2, "{rows:?}\n{log}");
    assert!(
        rows.iter().all(|r| r["status"] == "completed"),
        "{rows:?}\n{log}"
    );
    let dpsgd = rows.iter().find(|r| r["algorithm"] == "d-psgd").unwrap();
    assert_eq!(
        dpsgd, &finished[0],
        "the finished run was not kept as it was"
    );
    let said = status(&long);
    assert!(
        said.contains(&format!("Slurm job {again}: COMPLETED")),
        "{said}"
    );
    for d in [out, local, long, arr, viampi] {
        let _ = std::fs::remove_dir_all(d);
    }
}
