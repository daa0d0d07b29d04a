//! `hosts` shaping, for a cluster: the condition on the configured
//! interface of every node, as in the paper, where `tc` ran on each
//! instance's NIC. The driver starts `repro net node probe|up|down` once
//! per node (the launcher's per-host prefix: `mpirun --hostfile H --map-by
//! ppr:1:node` or `srun --ntasks-per-node=1`), and each node:
//!
//! - `probe`: says whether its kernel has netem (tried in a throwaway
//!   namespace). Only if every node has it does the condition go in one
//!   netem qdisc (`delay .. rate ..`); otherwise every node gets the rate by
//!   htb or tbf (the condition's `qdisc`) and the transport injects the
//!   latency.
//! - `up`: saves the interface's root qdisc in a state file under
//!   `/run/repro` (cleared at reboot, as qdiscs are), refusing up front a
//!   root it could not put back exactly, then applies the condition. A state
//!   file left by a crashed run is kept: it holds the original.
//! - `down`: puts the saved root back (the kernel's default by deleting
//!   ours, a configured `pfifo`, `bfifo` or `pfifo_fast` by replaying it),
//!   checks it reads back as saved, and removes the state file. `repro net
//!   down --interface IFACE` does the same after a crash.
//!
//! The interface is configured (`--interface`), never guessed, and checked
//! to be an interface name before it reaches `tc`. Kernel byte counters are
//! not read in this mode (each node's counters include all its traffic),
//! and the nodes' TCP congestion control is left as it is.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::exec::argv;
use super::netns::rate_commands;
use super::{Condition, Exec, NetError, RateQdisc};

/// Whether `name` can be a Linux interface name: 1 to 15 characters of
/// letters, digits, `_`, `.`, `-`, not starting with `-`.
pub fn valid_interface(name: &str) -> bool {
    (1..=15).contains(&name.len())
        && !name.starts_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// One entry of `tc -j qdisc show`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Qdisc {
    pub kind: String,
    pub handle: String,
    #[serde(default)]
    pub root: bool,
    #[serde(default)]
    pub parent: Option<String>,
    #[serde(default)]
    pub options: serde_json::Value,
}

/// Parses `tc -j qdisc show dev IFACE` (an empty output: no qdisc).
pub fn parse_qdiscs(json: &str) -> Result<Vec<Qdisc>, String> {
    if json.trim().is_empty() {
        return Ok(Vec::new());
    }
    serde_json::from_str(json).map_err(|e| format!("unreadable `tc -j qdisc show` output: {e}"))
}

/// The root qdisc and the qdiscs under it (not ingress or clsact, which
/// sit beside the root and are never touched).
fn root_tree(qdiscs: &[Qdisc]) -> (Option<&Qdisc>, Vec<&Qdisc>) {
    let root = qdiscs.iter().find(|q| q.root);
    let under = qdiscs
        .iter()
        .filter(|q| !q.root && !matches!(q.kind.as_str(), "ingress" | "clsact"))
        .collect();
    (root, under)
}

/// How to put back the root qdisc `saved` on `iface` once ours replaced
/// it, or why that cannot be done exactly (then the node is not shaped).
pub fn restore_commands(saved: &[Qdisc], iface: &str) -> Result<Vec<Vec<String>>, String> {
    let del = vec![argv(&["tc", "qdisc", "del", "dev", iface, "root"])];
    let (root, under) = root_tree(saved);
    let Some(root) = root else {
        // no root qdisc (a virtual device's noqueue): deleting ours restores it
        return Ok(del);
    };
    if root.handle == "0:" {
        // the kernel's default (a handle of zero: never configured, children
        // included): deleting ours makes the kernel attach its default again
        return Ok(del);
    }
    if !under.is_empty() {
        return Err(format!(
            "its root qdisc `{} {}` has {} qdiscs under it",
            root.kind,
            root.handle,
            under.len()
        ));
    }
    let mut replay = argv(&[
        "tc",
        "qdisc",
        "replace",
        "dev",
        iface,
        "root",
        "handle",
        &root.handle,
        &root.kind,
    ]);
    match root.kind.as_str() {
        "pfifo" | "bfifo" => {
            let limit = root
                .options
                .get("limit")
                .and_then(serde_json::Value::as_u64)
                .ok_or_else(|| format!("its root `{}` shows no limit", root.kind))?;
            replay.extend(argv(&["limit", &limit.to_string()]));
        }
        "pfifo_fast" => {}
        kind => {
            return Err(format!(
                "its root qdisc is a configured `{kind} {}`, which repro cannot replay exactly",
                root.handle
            ));
        }
    }
    Ok(vec![replay])
}

/// The root qdisc as it matters for a restore: kind, handle (`0:` for the
/// kernel's default) and options; `None` when there is none.
pub fn root_of(qdiscs: &[Qdisc]) -> Option<(String, String, serde_json::Value)> {
    root_tree(qdiscs)
        .0
        .map(|q| (q.kind.clone(), q.handle.clone(), q.options.clone()))
}

/// A condition as flags of `repro net node up` (plain tokens: they pass
/// through any launcher unchanged).
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct NodeCondition {
    /// Bits per second (0: unlimited).
    #[arg(long, default_value_t = 0)]
    pub rate_bps: u64,
    /// Microseconds of latency (netem only).
    #[arg(long, default_value_t = 0)]
    pub latency_us: u64,
    /// The rate's qdisc where netem is not used: tbf, htb, htb-ack.
    #[arg(long, default_value = "htb-ack")]
    pub qdisc: String,
    /// Put the rate by htb or tbf even if netem is there (some node lacks it).
    #[arg(long)]
    pub no_netem: bool,
}

impl NodeCondition {
    fn of(condition: &Condition, netem: bool) -> Self {
        Self {
            rate_bps: condition.bandwidth_bps.map_or(0, |b| b as u64),
            latency_us: (condition.latency_s * 1e6).round() as u64,
            qdisc: match condition.qdisc {
                RateQdisc::Tbf => "tbf",
                RateQdisc::Htb => "htb",
                RateQdisc::HtbAck => "htb-ack",
            }
            .into(),
            no_netem: !netem,
        }
    }

    fn flags(&self) -> Vec<String> {
        let mut out = vec![
            "--rate-bps".into(),
            self.rate_bps.to_string(),
            "--latency-us".into(),
            self.latency_us.to_string(),
            "--qdisc".into(),
            self.qdisc.clone(),
        ];
        if self.no_netem {
            out.push("--no-netem".into());
        }
        out
    }

    /// The `tc` commands that apply it on `iface`.
    pub fn commands(&self, iface: &str) -> Result<Vec<Vec<String>>, NetError> {
        if !self.no_netem {
            let mut cmd = argv(&["tc", "qdisc", "replace", "dev", iface, "root", "netem"]);
            if self.latency_us > 0 {
                cmd.extend(argv(&["delay", &format!("{}us", self.latency_us)]));
            }
            if self.rate_bps > 0 {
                cmd.extend(argv(&["rate", &format!("{}bit", self.rate_bps)]));
            }
            return Ok(vec![cmd]);
        }
        let qdisc = match self.qdisc.as_str() {
            "tbf" => RateQdisc::Tbf,
            "htb" => RateQdisc::Htb,
            "htb-ack" => RateQdisc::HtbAck,
            other => {
                return Err(NetError::BadNodeFlag {
                    flag: "--qdisc".into(),
                    value: other.into(),
                });
            }
        };
        let condition = Condition {
            bandwidth_bps: (self.rate_bps > 0).then_some(self.rate_bps as f64),
            latency_s: 0.0,
            qdisc,
            tcp: Default::default(),
            label: String::new(),
        };
        Ok(rate_commands(None, iface, &condition, false))
    }
}

/// What a node saved before it was shaped: `/run/repro/node-<netns>-<iface>.json`.
#[derive(Debug, Serialize, Deserialize)]
pub struct NodeState {
    pub interface: String,
    pub saved: Vec<Qdisc>,
    pub restore: Vec<Vec<String>>,
}

/// Where nodes keep their state: `REPRO_STATE_DIR`, default `/run/repro`.
pub fn state_dir() -> PathBuf {
    std::env::var_os("REPRO_STATE_DIR").map_or_else(|| "/run/repro".into(), PathBuf::from)
}

/// The start of this network namespace's state file names, `node-<netns>-`:
/// namespaces that act as nodes of one machine keep theirs apart.
pub fn state_prefix() -> String {
    let netns = std::fs::read_link("/proc/self/ns/net")
        .ok()
        .map(|l| {
            l.to_string_lossy()
                .chars()
                .filter(char::is_ascii_digit)
                .collect::<String>()
        })
        .unwrap_or_default();
    format!("node-{netns}-")
}

/// Where this node keeps the state of `iface`.
pub fn state_path(iface: &str) -> PathBuf {
    state_dir().join(format!("{}{iface}.json", state_prefix()))
}

fn show(exec: &dyn Exec, iface: &str) -> Result<Vec<Qdisc>, NetError> {
    let json = exec.run(&argv(&["tc", "-j", "qdisc", "show", "dev", iface]))?;
    parse_qdiscs(&json).map_err(|reason| NetError::NodeQdisc {
        interface: iface.into(),
        reason,
    })
}

/// `repro net node up`: saves `iface`'s root qdisc (unless a crashed run's
/// state is there), then applies `condition`. On a failure the root is put
/// back. Returns a line for the driver's log.
pub fn node_up(
    exec: &dyn Exec,
    iface: &str,
    condition: &NodeCondition,
    state: &Path,
) -> Result<String, NetError> {
    let note = if let Ok(text) = std::fs::read_to_string(state) {
        serde_json::from_str::<NodeState>(&text).map_err(|e| NetError::NodeQdisc {
            interface: iface.into(),
            reason: format!("unreadable state file {}: {e}", state.display()),
        })?;
        " (kept the state an earlier run left: it holds the original)"
    } else {
        let saved = show(exec, iface)?;
        let restore =
            restore_commands(&saved, iface).map_err(|reason| NetError::NodeUnrestorable {
                interface: iface.into(),
                reason,
            })?;
        let st = NodeState {
            interface: iface.into(),
            saved,
            restore,
        };
        let write = state
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| {
                std::fs::write(state, serde_json::to_vec_pretty(&st).unwrap_or_default())
            });
        write.map_err(|e| NetError::NodeQdisc {
            interface: iface.into(),
            reason: format!("could not write the state file {}: {e}", state.display()),
        })?;
        ""
    };
    for cmd in condition.commands(iface)? {
        if let Err(e) = exec.run(&cmd) {
            let _ = node_down(exec, iface, state);
            return Err(e);
        }
    }
    Ok(format!("shaped {iface}{note}"))
}

/// `repro net node down`: puts back the root qdisc saved for `iface`,
/// checks it, and removes the state file. Nothing saved: nothing to do.
pub fn node_down(exec: &dyn Exec, iface: &str, state: &Path) -> Result<String, NetError> {
    let Ok(text) = std::fs::read_to_string(state) else {
        return Ok(format!("nothing to restore on {iface}"));
    };
    let st: NodeState = serde_json::from_str(&text).map_err(|e| NetError::NodeQdisc {
        interface: iface.into(),
        reason: format!("unreadable state file {}: {e}", state.display()),
    })?;
    for cmd in &st.restore {
        match exec.run(cmd) {
            Ok(_) => {}
            // already the kernel's default (nothing of ours to delete)
            Err(NetError::Failed { stderr, .. })
                if stderr.contains("handle of zero") || stderr.contains("Invalid handle") => {}
            Err(e) => return Err(e),
        }
    }
    let now = show(exec, iface)?;
    let (was, is) = (root_of(&st.saved), root_of(&now));
    if was != is {
        let text = |r: Option<(String, String, serde_json::Value)>| {
            r.map_or("none".into(), |(k, h, o)| format!("{k} {h} {o}"))
        };
        return Err(NetError::NodeQdisc {
            interface: iface.into(),
            reason: format!(
                "after the restore the root qdisc is `{}`, not the saved `{}`; the state stays in {}",
                text(is),
                text(was),
                state.display()
            ),
        });
    }
    let _ = std::fs::remove_file(state);
    Ok(format!("restored the root qdisc of {iface}"))
}

/// `repro net node <action> --interface <iface>` on every node through the
/// launcher's per-host prefix.
pub fn node_command(per_host: &[String], repro: &Path, action: &str, iface: &str) -> Vec<String> {
    let mut argv = per_host.to_vec();
    argv.push(repro.display().to_string());
    argv.extend(["net", "node", action, "--interface", iface].map(String::from));
    argv
}

/// The network condition applied on every node of a cluster run; restored
/// when dropped (on success, failure or interruption) if it was applied.
pub struct HostShaping<'e> {
    exec: &'e dyn Exec,
    per_host: Vec<String>,
    repro: PathBuf,
    interface: String,
    condition: Condition,
    /// Every node has netem (probed by [`HostShaping::probe`]).
    netem: bool,
    applied: bool,
}

impl std::fmt::Debug for HostShaping<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostShaping")
            .field("interface", &self.interface)
            .field("condition", &self.condition.label)
            .field("netem", &self.netem)
            .field("applied", &self.applied)
            .finish()
    }
}

impl<'e> HostShaping<'e> {
    /// `per_host` starts one copy of a command on every node (the
    /// launcher's per-host prefix); `repro` is this program's path, the
    /// same on every node. Until probed, netem is assumed.
    pub fn new(
        exec: &'e dyn Exec,
        per_host: Vec<String>,
        repro: PathBuf,
        interface: &str,
        condition: Condition,
    ) -> Result<Self, NetError> {
        if !valid_interface(interface) {
            return Err(NetError::BadInterface {
                name: interface.to_string(),
            });
        }
        Ok(Self {
            exec,
            per_host,
            repro,
            interface: interface.to_string(),
            condition,
            netem: true,
            applied: false,
        })
    }

    fn node_command(&self, action: &str) -> Vec<String> {
        node_command(&self.per_host, &self.repro, action, &self.interface)
    }

    /// The command that asks every node whether it has netem.
    pub fn probe_command(&self) -> Vec<String> {
        self.node_command("probe")
    }

    /// Asks every node whether its kernel has netem; without it on every
    /// node, the rate goes by htb or tbf and the transport adds latency.
    pub fn probe(&mut self) -> Result<(), NetError> {
        let out = self.exec.run(&self.probe_command())?;
        let answers: Vec<bool> = out
            .lines()
            .filter_map(|l| l.split_once("netem: ").map(|(_, v)| v.trim() == "yes"))
            .collect();
        if answers.is_empty() {
            return Err(NetError::NodeQdisc {
                interface: self.interface.clone(),
                reason: format!(
                    "no node answered `{}`: {}",
                    self.probe_command().join(" "),
                    out.trim()
                ),
            });
        }
        self.netem = answers.iter().all(|&n| n);
        Ok(())
    }

    /// The command that applies the condition on every node.
    pub fn setup_command(&self) -> Vec<String> {
        let mut argv = self.node_command("up");
        argv.extend(NodeCondition::of(&self.condition, self.netem).flags());
        argv
    }

    /// The command that restores every node's root qdisc.
    pub fn teardown_command(&self) -> Vec<String> {
        self.node_command("down")
    }

    /// Applies the condition on every node.
    pub fn up(&mut self) -> Result<(), NetError> {
        // marked first: a launch that failed halfway may have shaped some nodes
        self.applied = true;
        self.exec.run(&self.setup_command()).map(|_| ())
    }

    /// Latency the transport must add per message: the condition's where
    /// some node has no netem.
    pub fn injected_latency_s(&self) -> Option<f64> {
        (!self.netem && self.condition.latency_s > 0.0).then_some(self.condition.latency_s)
    }

    /// How the condition was applied, for runs.csv and shaping.json.
    pub fn describe(&self) -> String {
        let how = if self.netem {
            "netem".to_string()
        } else {
            let qdisc = match self.condition.qdisc {
                RateQdisc::Tbf => "tbf",
                RateQdisc::Htb => "htb",
                RateQdisc::HtbAck => "htb with pure ACKs first",
            };
            if self.condition.latency_s > 0.0 {
                format!("{qdisc} (a node has no netem: latency injected by the transport)")
            } else {
                qdisc.to_string()
            }
        };
        format!(
            "hosts: {how} on {} of every node ({}), each node's root qdisc saved and restored; \
             kernel counters not read; TCP congestion control: the nodes' own",
            self.interface, self.condition.label
        )
    }
}

impl Drop for HostShaping<'_> {
    fn drop(&mut self) {
        if self.applied
            && let Err(e) = self.exec.run(&self.teardown_command())
        {
            eprintln!(
                "warning: could not restore the nodes' qdisc on {}: {e}; run `repro net down \
                 --interface {}` on each node (or with the run's --hostfile)",
                self.interface, self.interface
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::DryRun;

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
        assert_eq!(
            exec.commands(),
            [
                "srun --ntasks-per-node=1 /opt/repro net node probe --interface eth0",
                "srun --ntasks-per-node=1 /opt/repro net node up --interface eth0 --rate-bps \
                 100000000 --latency-us 150 --qdisc htb-ack",
                "srun --ntasks-per-node=1 /opt/repro net node down --interface eth0",
            ]
        );
    }

    #[test]
    fn one_node_without_netem_puts_the_rate_by_htb_and_latency_in_the_transport() {
        let exec = DryRun::answering(|_| "netem: yes\nnetem: no\n".into());
        let mut h =
            HostShaping::new(&exec, Vec::new(), "repro".into(), "eth0", condition()).unwrap();
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
        let mut h =
            HostShaping::new(&exec, Vec::new(), "repro".into(), "eth0", condition()).unwrap();
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
        node_up(&exec, "eth0", &flags, &state).unwrap();
        assert!(state.is_file());
        // a second up (a crashed run's state is there) keeps the original
        assert!(
            node_up(&exec, "eth0", &flags, &state)
                .unwrap()
                .contains("kept")
        );
        node_down(&exec, "eth0", &state).unwrap();
        assert!(!state.exists());
        assert!(
            node_down(&exec, "eth0", &state)
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
        assert!(
            cmds.contains(&"tc qdisc replace dev eth0 root handle 8002: pfifo limit 777".into())
        );
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
        node_up(&exec, "eth0", &flags, &state).unwrap();
        let e = node_down(&exec, "eth0", &state).unwrap_err().to_string();
        assert!(e.contains("not the saved"), "{e}");
        assert!(state.is_file());
        let _ = std::fs::remove_dir_all(&dir);
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
                HostShaping::new(&DryRun::default(), Vec::new(), "r".into(), bad, condition())
                    .is_err()
            );
        }
        for good in ["eth0", "ens5", "ib0.8001", "bond-0", "enp1s0f1_x"] {
            assert!(valid_interface(good), "{good}");
        }
    }
}
