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
//! Every shaped interface names its owner. The driver holds the owner
//! record `hosts-<iface>` ([`super::owner`]) on the machine it runs on for
//! as long as the nodes are shaped, and each node's state file names the
//! driver (host, kernel boot id, pid, start time). A node lets a command
//! replace or restore another run's shaping only if that run is gone: one
//! started from the same machine as the command (that machine's record
//! said so), or one on the node's own kernel whose pid is no longer it.
//! A run on a third machine cannot be checked from the node: `--force`.
//!
//! The interface is configured (`--interface`), never guessed, and checked
//! to be an interface name before it reaches `tc`. Kernel byte counters are
//! not read in this mode (each node's counters include all its traffic),
//! and the nodes' TCP congestion control is left as it is.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::exec::argv;
use super::netns::rate_commands;
use super::owner::Owner;
use super::{Condition, Exec, NetError, RateQdisc};

pub(crate) use crate::util::process::{boot_id, hostname};

/// The process that shaped a node (or asks to restore one), as nodes
/// record it: `host:boot:pid:start` on the command line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct NodeOwner {
    pub host: String,
    /// The kernel boot id of its machine ([`boot_id`]).
    pub boot: String,
    pub pid: u32,
    /// Its start time in clock ticks after boot ([`Owner::start`]).
    pub start: u64,
}

impl NodeOwner {
    /// This process.
    pub(crate) fn me() -> Self {
        let o = Owner::me();
        Self {
            host: hostname(),
            boot: boot_id(),
            pid: o.pid,
            start: o.start,
        }
    }

    /// The command-line form, `host:boot:pid:start`.
    pub(crate) fn arg(&self) -> String {
        format!("{}:{}:{}:{}", self.host, self.boot, self.pid, self.start)
    }

    /// Whether it ran under this kernel (so its pid can be checked here).
    fn here(&self) -> bool {
        !self.boot.is_empty() && self.boot == boot_id()
    }

    /// Whether it still runs: `Some` only where that can be told here.
    pub(crate) fn alive_here(&self) -> Option<bool> {
        self.here().then(|| {
            Owner {
                pid: self.pid,
                start: self.start,
                command: String::new(),
            }
            .alive()
        })
    }
}

impl std::fmt::Display for NodeOwner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pid {} on {}", self.pid, self.host)
    }
}

impl std::str::FromStr for NodeOwner {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("`{s}` is not host:boot:pid:start");
        let parts: Vec<&str> = s.split(':').collect();
        let [host, boot, pid, start] = parts[..] else {
            return Err(bad());
        };
        let id = |t: &str| !t.is_empty() && t.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
        if host.is_empty() || !id(boot) {
            return Err(bad());
        }
        Ok(Self {
            host: host.into(),
            boot: boot.into(),
            pid: pid.parse().map_err(|_| bad())?,
            start: start.parse().map_err(|_| bad())?,
        })
    }
}

/// Whether a command started by `by` may replace or restore the shaping
/// that `shaped_by` left on a node. `by`'s machine holds the interface's
/// owner record while a run from it lives, and `by` checked it: a run from
/// that machine is `by` itself or gone. Otherwise the node checks the pid
/// if it ran under its own kernel, and refuses what it cannot check.
fn may_take(
    iface: &str,
    shaped_by: Option<&NodeOwner>,
    by: Option<&NodeOwner>,
    force: bool,
) -> Result<(), NetError> {
    let Some(s) = shaped_by.filter(|_| !force) else {
        return Ok(());
    };
    if by.is_some_and(|b| !b.boot.is_empty() && b.boot == s.boot) {
        return Ok(());
    }
    let reason = match s.alive_here() {
        Some(false) => return Ok(()),
        Some(true) => format!("it is shaped by {s}, which is still running"),
        None => format!(
            "it is shaped by {s}, which cannot be checked from this node; on {}              `repro net down --interface {iface} --hostfile H` restores it once that run              is gone, or pass --force here",
            s.host
        ),
    };
    Err(NetError::InterfaceBusy {
        interface: iface.into(),
        reason,
    })
}

/// Whether `name` can be a Linux interface name: 1 to 15 characters of
/// letters, digits, `_`, `.`, `-`, not starting with `-`.
pub(crate) fn valid_interface(name: &str) -> bool {
    (1..=15).contains(&name.len())
        && !name.starts_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// One entry of `tc -j qdisc show`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Qdisc {
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
pub(crate) fn parse_qdiscs(json: &str) -> Result<Vec<Qdisc>, String> {
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
pub(crate) fn restore_commands(saved: &[Qdisc], iface: &str) -> Result<Vec<Vec<String>>, String> {
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
pub(crate) fn root_of(qdiscs: &[Qdisc]) -> Option<(String, String, serde_json::Value)> {
    root_tree(qdiscs)
        .0
        .map(|q| (q.kind.clone(), q.handle.clone(), q.options.clone()))
}

/// A condition as a node applies it, sent as flags of `repro net node up`
/// (plain tokens: they pass through any launcher unchanged; `flags` writes
/// them, `cmd::net::NodeConditionArgs` reads them back).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NodeCondition {
    /// Bits per second (0: unlimited).
    pub rate_bps: u64,
    /// Microseconds of latency (netem only).
    pub latency_us: u64,
    /// The rate's qdisc where netem is not used: tbf, htb, htb-ack.
    pub qdisc: String,
    /// Put the rate by htb or tbf even if netem is there (some node lacks it).
    pub no_netem: bool,
}

impl NodeCondition {
    fn of(condition: &Condition, netem: bool) -> Self {
        Self {
            rate_bps: condition.bandwidth_bps.map_or(0, |b| b as u64),
            latency_us: (condition.latency_s * 1e6).round() as u64,
            qdisc: condition.qdisc.name().into(),
            no_netem: !netem,
        }
    }

    pub(crate) fn flags(&self) -> Vec<String> {
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
    pub(crate) fn commands(&self, iface: &str) -> Result<Vec<Vec<String>>, NetError> {
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
        let qdisc = RateQdisc::parse(&self.qdisc).ok_or_else(|| NetError::BadNodeFlag {
            flag: "--qdisc".into(),
            value: self.qdisc.clone(),
        })?;
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
pub(crate) struct NodeState {
    pub interface: String,
    pub saved: Vec<Qdisc>,
    pub restore: Vec<Vec<String>>,
    /// The run that shaped it (absent in state files of older versions).
    #[serde(default)]
    pub owner: Option<NodeOwner>,
}

/// Where nodes keep their state: `REPRO_STATE_DIR`, default `/run/repro`.
pub(crate) fn state_dir() -> PathBuf {
    std::env::var_os("REPRO_STATE_DIR").map_or_else(|| "/run/repro".into(), PathBuf::from)
}

/// The start of this network namespace's state file names, `node-<netns>-`:
/// namespaces that act as nodes of one machine keep theirs apart.
pub(crate) fn state_prefix() -> String {
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
pub(crate) fn state_path(iface: &str) -> PathBuf {
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
/// state is there: it holds the original, and is taken over if that run is
/// gone), then applies `condition` for `owner`. On a failure the root is
/// put back. Returns a line for the driver's log.
pub(crate) fn node_up(
    exec: &dyn Exec,
    iface: &str,
    condition: &NodeCondition,
    state: &Path,
    owner: &NodeOwner,
) -> Result<String, NetError> {
    let (st, note) = if let Some(earlier) = read_state(iface, state)? {
        may_take(iface, earlier.owner.as_ref(), Some(owner), false)?;
        let note = " (kept the state an earlier run left: it holds the original)";
        (earlier, note)
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
            owner: None,
        };
        (st, "")
    };
    let st = NodeState {
        owner: Some(owner.clone()),
        ..st
    };
    // whole or absent: the file holds the only copy of the original root
    let write = state
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .map_err(anyhow::Error::from)
        .and_then(|()| {
            crate::util::atomic::write(state, serde_json::to_vec_pretty(&st).unwrap_or_default())
        });
    write.map_err(|e| NetError::NodeQdisc {
        interface: iface.into(),
        reason: format!("could not write the state file {}: {e:#}", state.display()),
    })?;
    for cmd in condition.commands(iface)? {
        if let Err(e) = exec.run(&cmd) {
            let _ = node_down(exec, iface, state, Some(owner), false);
            return Err(e);
        }
    }
    Ok(format!("shaped {iface}{note}"))
}

/// The state saved for `iface`, if any.
fn read_state(iface: &str, state: &Path) -> Result<Option<NodeState>, NetError> {
    let Ok(text) = std::fs::read_to_string(state) else {
        return Ok(None);
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| NetError::NodeQdisc {
            interface: iface.into(),
            reason: format!("unreadable state file {}: {e}", state.display()),
        })
}

/// `repro net node down`: puts back the root qdisc saved for `iface`,
/// checks it, and removes the state file. Nothing saved: nothing to do.
/// Asked by `by` (the run itself, or `repro net down`), and refused while
/// another run that shaped it may be alive unless `force`.
pub(crate) fn node_down(
    exec: &dyn Exec,
    iface: &str,
    state: &Path,
    by: Option<&NodeOwner>,
    force: bool,
) -> Result<String, NetError> {
    let Some(st) = read_state(iface, state)? else {
        return Ok(format!("nothing to restore on {iface}"));
    };
    may_take(iface, st.owner.as_ref(), by, force)?;
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
pub(crate) fn node_command(
    per_host: &[String],
    repro: &Path,
    action: &str,
    iface: &str,
) -> Vec<String> {
    let mut argv = per_host.to_vec();
    argv.push(repro.display().to_string());
    argv.extend(["net", "node", action, "--interface", iface].map(String::from));
    argv
}

/// The network condition applied on every node of a cluster run; restored
/// when dropped (on success, failure or interruption) if it was applied.
pub(crate) struct HostShaping<'e> {
    exec: &'e dyn Exec,
    per_host: Vec<String>,
    repro: PathBuf,
    interface: String,
    condition: Condition,
    /// Every node has netem (probed by [`HostShaping::probe`]).
    netem: bool,
    /// This process, as the nodes record it.
    owner: NodeOwner,
    /// It holds the owner record of [`HostShaping::tag`].
    claimed: bool,
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
    pub(crate) fn new(
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
            owner: NodeOwner::me(),
            claimed: false,
            applied: false,
        })
    }

    /// The owner record a run holds on its own machine while it shapes
    /// `interface` on the nodes: `hosts-<interface>`.
    pub(crate) fn tag(interface: &str) -> String {
        format!("hosts-{interface}")
    }

    fn node_command(&self, action: &str) -> Vec<String> {
        node_command(&self.per_host, &self.repro, action, &self.interface)
    }

    /// The command that asks every node whether it has netem.
    pub(crate) fn probe_command(&self) -> Vec<String> {
        self.node_command("probe")
    }

    /// Asks every node whether its kernel has netem; without it on every
    /// node, the rate goes by htb or tbf and the transport adds latency.
    pub(crate) fn probe(&mut self) -> Result<(), NetError> {
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

    /// The command that applies the condition on every node (as recorded
    /// in shaping.json: [`HostShaping::up`] adds `--owner`).
    pub(crate) fn setup_command(&self) -> Vec<String> {
        let mut argv = self.node_command("up");
        argv.extend(NodeCondition::of(&self.condition, self.netem).flags());
        argv
    }

    /// The command that restores every node's root qdisc as this run.
    pub(crate) fn teardown_command(&self) -> Vec<String> {
        let mut argv = self.node_command("down");
        argv.extend(["--by".into(), self.owner.arg()]);
        argv
    }

    /// Applies the condition on every node, after recording this process
    /// as the owner of the interface here (refused while another live run
    /// from this machine shapes it).
    pub(crate) fn up(&mut self) -> Result<(), NetError> {
        let tag = Self::tag(&self.interface);
        if !self.exec.claim(&tag)? {
            let by = super::owner::of(&tag).map_or("another run".into(), |o| {
                format!("pid {} ({})", o.pid, o.command)
            });
            return Err(NetError::InterfaceBusy {
                interface: self.interface.clone(),
                reason: format!("a live run from this machine shapes it on the nodes: {by}"),
            });
        }
        self.claimed = true;
        // marked first: a launch that failed halfway may have shaped some nodes
        self.applied = true;
        let mut argv = self.setup_command();
        argv.extend(["--owner".into(), self.owner.arg()]);
        self.exec.run(&argv).map(|_| ())
    }

    /// Latency the transport must add per message: the condition's where
    /// some node has no netem.
    pub(crate) fn injected_latency_s(&self) -> Option<f64> {
        (!self.netem && self.condition.latency_s > 0.0).then_some(self.condition.latency_s)
    }

    /// How the condition was applied, for runs.csv and shaping.json.
    pub(crate) fn describe(&self) -> String {
        let how = if self.netem {
            "netem".to_string()
        } else {
            let qdisc = self.condition.qdisc.describe();
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
        // gone with this process either way: a record whose process is
        // gone lets `repro net down` restore what is left
        if self.claimed {
            self.exec.release(&Self::tag(&self.interface));
        }
    }
}

#[cfg(test)]
mod tests;
