//! `repro doctor`: what this host can do. Every check runs a command with an
//! argument vector (or reads a file) and reports what it found and, when
//! something is missing, how to get it.

use std::path::Path;
use std::process::Command;

use anyhow::Result;

/// One line of the report.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    pub what: &'static str,
    pub ok: bool,
    pub found: String,
    pub hint: &'static str,
}

fn run(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out.status
        .success()
        .then(|| text.lines().next().unwrap_or("").trim().to_string())
}

/// Whether this process runs as root (uid 0).
pub(crate) fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// Tries each qdisc on the loopback of a throwaway network namespace (needs
/// root): `Some(true)` if the kernel accepted it, `None` if it could not probe.
fn probe_qdiscs(qdiscs: &[&[&str]]) -> Vec<Option<bool>> {
    let ns = format!("repro-doctor-{}", std::process::id());
    if !is_root() || run("ip", &["netns", "add", &ns]).is_none() {
        return vec![None; qdiscs.len()];
    }
    let results = qdiscs
        .iter()
        .map(|q| {
            let mut args = vec![
                "netns",
                "exec",
                ns.as_str(),
                "tc",
                "qdisc",
                "replace",
                "dev",
                "lo",
                "root",
            ];
            args.extend_from_slice(q);
            Some(run("ip", &args).is_some())
        })
        .collect();
    let _ = run("ip", &["netns", "delete", &ns]);
    results
}

/// Whether the kernel accepts a netem qdisc (false when it cannot probe).
pub(crate) fn kernel_has_netem() -> bool {
    probe_qdiscs(&[&["netem", "delay", "1ms"]])[0] == Some(true)
}

/// All checks, in report order.
pub fn checks() -> Vec<Check> {
    let mut out = Vec::new();
    let mpirun = run("mpirun", &["--version"]);
    out.push(Check {
        what: "MPI (mpirun)",
        ok: mpirun.is_some(),
        found: mpirun.unwrap_or_else(|| "not found".into()),
        hint: "apt-get install openmpi-bin libopenmpi-dev (ci/setup.sh does)",
    });
    let root = is_root();
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
    let tc = run("tc", &["-V"]);
    out.push(Check {
        what: "tc (traffic control)",
        ok: tc.is_some(),
        found: tc.unwrap_or_else(|| "not found".into()),
        hint: "apt-get install iproute2",
    });
    let probes = probe_qdiscs(&[
        &[
            "tbf", "rate", "1mbit", "burst", "32kbit", "latency", "400ms",
        ],
        &["netem", "delay", "1ms"],
    ]);
    for ((what, hint), probe) in [
        ("tc rate limiting (tbf)", "a kernel with sch_tbf"),
        (
            "tc delay (netem)",
            "a kernel with sch_netem (without it, set `latency_ms`: the transport injects latency per message)",
        ),
    ]
    .into_iter()
    .zip(probes)
    {
        out.push(Check {
            what,
            ok: probe == Some(true),
            found: match probe {
                Some(true) => "works (probed in a throwaway namespace)".into(),
                Some(false) => "the kernel refused it".into(),
                None => "unknown: probing needs root".into(),
            },
            hint,
        });
    }
    let netns = run("ip", &["netns", "list"]);
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
    let torch = std::env::var("LD_LIBRARY_PATH")
        .unwrap_or_default()
        .split(':')
        .map(|d| Path::new(d).join("libtorch_cpu.so"))
        .find(|p| p.is_file());
    out.push(Check {
        what: "libtorch (for repro-train)",
        ok: torch.is_some(),
        found: torch.map_or_else(
            || "libtorch_cpu.so not on LD_LIBRARY_PATH".into(),
            |p| p.display().to_string(),
        ),
        hint: "bash ci/setup.sh, then source ~/.cache/repro/env.sh",
    });
    let gpus = run("nvidia-smi", &["-L"]);
    out.push(Check {
        what: "CUDA devices",
        ok: true,
        found: gpus
            .unwrap_or_else(|| "none (training runs on the CPU, one thread per rank)".into()),
        hint: "",
    });
    let fmnist =
        Path::new("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz").is_file();
    out.push(Check {
        what: "Fashion-MNIST",
        ok: fmnist,
        found: if fmnist {
            "/usr/share/datasets/fashion-mnist".into()
        } else {
            "not installed".into()
        },
        hint: "apt-get install dataset-fashion-mnist",
    });
    let disk = run("df", &["-h", "--output=avail", "."]).map(|_| {
        Command::new("df")
            .args(["-h", "--output=avail", "."])
            .output()
            .ok()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .nth(1)
                    .unwrap_or("")
                    .trim()
                    .to_string()
            })
            .unwrap_or_default()
    });
    out.push(Check {
        what: "free disk here",
        ok: disk.is_some(),
        found: disk.map_or_else(|| "unknown".into(), |d| format!("{d} available")),
        hint: "",
    });
    out
}

/// Prints the report.
pub fn run_doctor() -> Result<()> {
    for c in checks() {
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

    #[test]
    fn every_check_reports_something() {
        let checks = checks();
        assert!(checks.len() >= 9);
        assert!(checks.iter().all(|c| !c.found.is_empty()));
        // a missing tool is reported as such, not as an error
        assert_eq!(run("this-command-does-not-exist", &[]), None);
    }
}
