//! `repro doctor`: what this host can do. Every check runs a command with an
//! argument vector (or reads a file) and reports what it found and, when
//! something is missing, how to get it.

use std::path::Path;

use anyhow::Result;

use crate::experiment::condition::TcpCongestion;
use crate::launch::net::exec::argv;
use crate::launch::net::probe::{self, ProbeNs};
use crate::launch::net::{Exec, System, TcpSettings};

/// One line of the report.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Check {
    pub what: &'static str,
    pub ok: bool,
    pub found: String,
    pub hint: &'static str,
}

/// The output of `program args` through `exec` (`None`: missing or failed).
fn output(exec: &dyn Exec, program: &str, args: &[&str]) -> Option<String> {
    let mut command = vec![program];
    command.extend_from_slice(args);
    exec.run(&argv(&command)).ok()
}

/// The first line of `program args`' output.
fn run(exec: &dyn Exec, program: &str, args: &[&str]) -> Option<String> {
    output(exec, program, args).map(|t| t.lines().next().unwrap_or("").trim().to_string())
}

/// What the kernel allows for shaping, probed in one throwaway namespace
/// (needs root; `None` where it could not probe).
struct Probed {
    tbf: Option<bool>,
    htb: Option<bool>,
    netem: Option<bool>,
    tcp: Vec<TcpProbe>,
}

/// A congestion control probed on a namespace's route (`None`: could not
/// probe) and as a namespace's default (`None`: not probed).
type TcpProbe = (TcpCongestion, Option<Result<(), String>>, Option<bool>);

fn probe(exec: &dyn Exec) -> Probed {
    let algorithms = [TcpCongestion::Cubic, TcpCongestion::Bbr];
    let probe = if crate::util::process::is_root() {
        ProbeNs::new(exec).ok()
    } else {
        None
    };
    let Some(p) = probe else {
        return Probed {
            tbf: None,
            htb: None,
            netem: None,
            tcp: algorithms.iter().map(|&a| (a, None, None)).collect(),
        };
    };
    // a namespace's own congestion-control sysctl exists from 4.15; before,
    // writing it in a namespace would change the host's
    let per_namespace = probe::kernel_version().is_some_and(|v| v >= (4, 15));
    Probed {
        tbf: Some(p.qdisc(&[
            "tbf", "rate", "1mbit", "burst", "32kbit", "latency", "400ms",
        ])),
        htb: Some(p.qdisc(&["htb", "default", "1"])),
        netem: Some(p.netem()),
        tcp: algorithms
            .iter()
            .map(|&a| {
                (
                    a,
                    Some(p.congctl(a)),
                    per_namespace.then(|| p.namespace_default(a)),
                )
            })
            .collect(),
    }
}

/// The `found` text of a qdisc probe.
fn probe_text(result: Option<bool>) -> String {
    match result {
        Some(true) => "works (probed in a throwaway namespace)".into(),
        Some(false) => "the kernel refused it".into(),
        None => "unknown: probing needs root".into(),
    }
}

/// All checks, in report order; every command goes through `exec`.
pub(crate) fn checks(exec: &dyn Exec) -> Vec<Check> {
    let root = crate::util::process::is_root();
    let probed = probe(exec);
    let mut out = tools(exec, root);
    out.extend(qdiscs(&probed));
    out.extend(tcp(&probed));
    out.extend(host(exec, root));
    out.extend(training(exec));
    out
}

/// MPI, root and tc.
fn tools(exec: &dyn Exec, root: bool) -> Vec<Check> {
    let mut out = Vec::new();
    let mpirun = run(exec, "mpirun", &["--version"]);
    out.push(Check {
        what: "MPI (mpirun)",
        ok: mpirun.is_some(),
        found: mpirun.unwrap_or_else(|| "not found".into()),
        hint: "apt-get install openmpi-bin libopenmpi-dev (ci/setup.sh does)",
    });
    out.push(Check {
        what: "running as root",
        ok: true,
        found: if root {
            "yes: mpirun needs --allow-run-as-root (repro passes it); namespaces and tc are available".into()
        } else {
            "no: network shaping in namespaces needs root".into()
        },
        hint: "",
    });
    let tc = run(exec, "tc", &["-V"]);
    out.push(Check {
        what: "tc (traffic control)",
        ok: tc.is_some(),
        found: tc.unwrap_or_else(|| "not found".into()),
        hint: "apt-get install iproute2",
    });
    out
}

/// The qdiscs a condition needs, as probed.
fn qdiscs(probed: &Probed) -> Vec<Check> {
    let mut out = Vec::new();
    for (what, result, hint) in [
        (
            "tc rate limiting (tbf)",
            probed.tbf,
            "a kernel with sch_tbf",
        ),
        (
            "tc rate limiting (htb)",
            probed.htb,
            "a kernel with sch_htb (the default `qdisc: htb-ack` needs it; `qdisc: tbf` does not)",
        ),
    ] {
        out.push(Check {
            what,
            ok: result == Some(true),
            found: probe_text(result),
            hint,
        });
    }
    out.push(Check {
        what: "tc delay (netem)",
        // optional: without it the transport injects latency
        ok: probed.netem.is_some(),
        found: if probed.netem == Some(false) {
            "absent (probed): each condition's latency is injected per message by the \
             transport instead, and shaping.json says so"
                .into()
        } else {
            probe_text(probed.netem)
        },
        hint: "a kernel with sch_netem (without it the transport injects each condition's latency per message)",
    });
    out
}

/// The host's TCP congestion controls, and each in a namespace as probed.
fn tcp(probed: &Probed) -> Vec<Check> {
    let mut out = Vec::new();
    let tcp = TcpSettings::read();
    out.push(Check {
        what: "TCP congestion control",
        ok: tcp.is_some(),
        found: tcp.as_ref().map_or_else(
            || "could not read /proc/sys/net/ipv4".into(),
            |t| {
                format!(
                    "host default {}; allowed (for a namespace's default) `{}`; available `{}`",
                    t.default,
                    t.allowed.join(" "),
                    t.available.join(" ")
                )
            },
        ),
        hint: "",
    });
    for (algorithm, route, default) in &probed.tcp {
        let name = algorithm.name();
        let loaded = tcp
            .as_ref()
            .is_some_and(|t| t.available.iter().any(|a| a == name));
        let default = match default {
            Some(true) => "may be a namespace's default".to_string(),
            Some(false) => "may not be a namespace's default (not in the allowed list)".to_string(),
            None => "namespace default not probed".to_string(),
        };
        let (ok, found) = match route {
            Some(Ok(())) => (
                true,
                format!("set on a namespace's route: works (what repro does); {default}"),
            ),
            Some(Err(e)) => (
                false,
                format!("refused on a namespace's route: {e}; {default}"),
            ),
            None if loaded => (true, "loaded; probing needs root".to_string()),
            None => (false, "not loaded".to_string()),
        };
        out.push(Check {
            what: if name == "cubic" {
                "TCP cubic in a namespace"
            } else {
                "TCP bbr in a namespace"
            },
            ok,
            found,
            hint: "load it (`modprobe tcp_<name>`), or name another `tcp` in the network condition",
        });
    }
    out
}

/// What of the host a shaped run meets: sysctls, routes, br_netfilter,
/// IPv6 and namespaces.
fn host(exec: &dyn Exec, root: bool) -> Vec<Check> {
    let mut out = Vec::new();
    out.push(Check {
        what: "congestion sysctl per namespace",
        ok: true,
        found: match probe::kernel_version() {
            Some(v) if v >= (4, 15) => format!(
                "yes (kernel {}.{}); repro never writes it: it sets congctl on the ranks' routes",
                v.0, v.1
            ),
            Some(v) => format!(
                "no (kernel {}.{}: the namespaces share the host's value); repro never writes it",
                v.0, v.1
            ),
            None => "unknown kernel version; repro never writes it".into(),
        },
        hint: "",
    });
    let routes = run(exec, "ip", &["-4", "route", "show", "10.217.0.0/16"]).unwrap_or_default();
    out.push(Check {
        what: "host routes into 10.217.0.0/16",
        ok: true,
        found: if routes.is_empty() {
            "none".into()
        } else {
            format!(
                "`{routes}`: harmless, the ranks' subnet exists only inside their own namespaces"
            )
        },
        hint: "",
    });
    let bridge_nf = std::fs::read_to_string("/proc/sys/net/bridge/bridge-nf-call-iptables")
        .ok()
        .map(|s| s.trim().to_string());
    out.push(Check {
        what: "br_netfilter",
        ok: true,
        found: match bridge_nf.as_deref() {
            Some("1") => "loaded, bridge-nf-call-iptables = 1: bridged traffic meets the \
                          firewall of the bridge's namespace; harmless here, the ranks' bridge \
                          lives in a namespace of its own with an empty firewall"
                .into(),
            Some(v) => format!("loaded, bridge-nf-call-iptables = {v}"),
            None => "not loaded".into(),
        },
        hint: "",
    });
    out.push(Check {
        what: "IPv6",
        ok: true,
        found: if probe::kernel_has_ipv6() {
            "on (the ranks' interfaces get no link-local address)".into()
        } else {
            "off (not needed)".into()
        },
        hint: "",
    });
    let netns = run(exec, "ip", &["netns", "list"]);
    out.push(Check {
        what: "network namespaces",
        ok: netns.is_some() && root,
        found: match (&netns, root) {
            (Some(_), true) => "ip netns works".into(),
            (Some(_), false) => "ip netns present, but creating namespaces needs root".into(),
            (None, _) => "ip netns unavailable".into(),
        },
        hint: "apt-get install iproute2, and run as root",
    });
    out
}

/// What training needs: the trainer with its libtorch, a GPU, the data,
/// disk.
fn training(exec: &dyn Exec) -> Vec<Check> {
    let mut out = Vec::new();
    let trainer = crate::launch::train::train_binary().ok();
    let version = trainer
        .as_ref()
        .and_then(|t| output(exec, &t.to_string_lossy(), &["--version"]));
    out.extend(trainer_checks(trainer.as_deref(), version.as_deref()));
    let gpus = run(exec, "nvidia-smi", &["-L"]);
    out.push(Check {
        what: "CUDA devices (nvidia-smi)",
        ok: true,
        found: gpus
            .unwrap_or_else(|| "none (training runs on the CPU, one thread per rank)".into()),
        hint: "",
    });
    let fmnist = Path::new(repro_runlog::FASHION_MNIST_DIR)
        .join("train-images-idx3-ubyte.gz")
        .is_file();
    out.push(Check {
        what: "Fashion-MNIST",
        ok: fmnist,
        found: if fmnist {
            repro_runlog::FASHION_MNIST_DIR.into()
        } else {
            "not installed".into()
        },
        hint: "apt-get install dataset-fashion-mnist",
    });
    let disk = output(exec, "df", &["-h", "--output=avail", "."])
        .map(|t| t.lines().nth(1).unwrap_or("").trim().to_string());
    out.push(Check {
        what: "free disk here",
        ok: disk.is_some(),
        found: disk.map_or_else(|| "unknown".into(), |d| format!("{d} available")),
        hint: "",
    });
    out
}

/// The trainer's lines of the report from its `--version` text: the
/// libtorch it was built for and loaded (they must be one version), and
/// the CUDA devices libtorch sees.
fn trainer_checks(trainer: Option<&Path>, version: Option<&str>) -> Vec<Check> {
    let line = |prefix: &str| {
        version
            .and_then(|v| v.lines().find_map(|l| l.strip_prefix(prefix)))
            .map(str::trim)
    };
    let Some(libtorch) = line("libtorch: ") else {
        return vec![Check {
            what: "libtorch (repro-train)",
            ok: false,
            found: match trainer {
                None => "repro-train not found (not beside repro, REPRO_TRAIN unset)".into(),
                Some(t) => format!(
                    "{} --version failed (is its libtorch on LD_LIBRARY_PATH?) or is too old to say",
                    t.display()
                ),
            },
            hint: "bash ci/setup.sh, source ~/.cache/repro/env.sh, then cargo build --release --locked -p repro -p repro-trainer",
        }];
    };
    // "built for 2.13.0+cu130 (tch ..., CUDA 13.0); loaded 2.13.0+cu130 (/...)"
    let version_of = |text: &str| text.split([' ', '+']).next().unwrap_or("").to_string();
    let built = libtorch
        .strip_prefix("built for ")
        .map(version_of)
        .unwrap_or_default();
    let loaded = libtorch
        .split_once("; loaded ")
        .map(|(_, l)| version_of(l))
        .unwrap_or_default();
    vec![
        Check {
            what: "libtorch (repro-train)",
            ok: !built.is_empty() && built == loaded,
            found: libtorch.to_string(),
            hint: "put the libtorch it was built for first on LD_LIBRARY_PATH (source ~/.cache/repro/env.sh), or rebuild for this one: REPRO_TORCH=<version> bash ci/setup.sh (docs/cluster.md)",
        },
        Check {
            what: "CUDA (libtorch)",
            ok: true,
            found: line("cuda: ").unwrap_or("not said").to_string(),
            hint: "",
        },
    ]
}

/// Prints the report.
pub(crate) fn run_doctor() -> Result<()> {
    for c in checks(&System) {
        let mark = if c.ok { "ok     " } else { "MISSING" };
        println!("{mark} {:<28} {}", c.what, c.found);
        if !c.ok && !c.hint.is_empty() {
            println!("        {:<28} -> {}", "", c.hint);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A trainer that loaded another libtorch than it was built for is
    /// reported, as is one that says nothing of its libtorch.
    #[test]
    fn the_trainers_libtorch_must_be_the_one_it_was_built_for() {
        let text = |loaded: &str| {
            format!(
                "repro-train 0.1.0\nlibtorch: built for 2.11.0+cu130 (tch 0.24.0, CUDA 13.0); \
                 loaded {loaded} (/x/libtorch_cpu.so)\ncuda: 1 device visible\n"
            )
        };
        let t = Some(Path::new("/x/repro-train"));
        let same = trainer_checks(t, Some(&text("2.11.0")));
        assert!(same[0].ok, "{same:?}");
        assert_eq!(same[1].found, "1 device visible");
        let other = trainer_checks(t, Some(&text("2.13.0+cu130")));
        assert!(!other[0].ok, "{other:?}");
        let old = trainer_checks(t, Some("repro-train 0.1.0 (source s)"));
        assert!(!old[0].ok && old[0].found.contains("too old"), "{old:?}");
        assert!(trainer_checks(None, None)[0].found.contains("not found"));
    }

    #[test]
    fn every_check_reports_something() {
        let checks = checks(&System);
        assert!(checks.len() >= 14);
        assert!(checks.iter().all(|c| !c.found.is_empty()));
        // a missing tool is reported as such, not as an error
        assert_eq!(run(&System, "this-command-does-not-exist", &[]), None);
    }

    #[test]
    fn every_command_goes_through_the_executor() {
        let dry = crate::launch::net::DryRun::answering(|argv| match argv[0].as_str() {
            "mpirun" => "mpirun (Open MPI) 9.9.9\n".into(),
            "df" => "Avail\n 42G\n".into(),
            _ => String::new(),
        });
        let checks = checks(&dry);
        let found = |what: &str| {
            checks
                .iter()
                .find(|c| c.what.starts_with(what))
                .map(|c| c.found.clone())
                .unwrap_or_default()
        };
        assert!(found("MPI").contains("9.9.9"), "{}", found("MPI"));
        let ran = dry.commands();
        for program in ["mpirun ", "tc ", "ip ", "df "] {
            assert!(
                ran.iter().any(|c| c.starts_with(program)),
                "{program}not run: {ran:?}"
            );
        }
    }
}
