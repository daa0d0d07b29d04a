//! `repro net status`, `repro net down`, and `repro net exec` (how each MPI
//! rank enters its network namespace).

use std::os::unix::process::CommandExt;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};

use crate::launch::net::{
    self, NetError, NodeCondition, NodeOwner, System, leftovers, remove_dead,
};

/// Options of `repro net`.
#[derive(Debug, Args)]
pub(crate) struct NetArgs {
    #[command(subcommand)]
    pub command: NetCommand,
}

#[derive(Debug, Subcommand)]
pub(crate) enum NetCommand {
    /// List the network namespaces and links of shaped runs, each with its
    /// owner (pid, command) and whether the owner is alive.
    Status,
    /// Remove the network namespaces and links of shaped runs whose owner
    /// is gone (a killed driver's); a live run's network stays unless
    /// `--force`. With `--interface`, also put back the root qdisc that
    /// hosts shaping replaced on it (here, or on every node of
    /// `--hostfile` / srun).
    Down {
        /// Also remove the networks of live runs (they fail).
        #[arg(long)]
        force: bool,
        /// The interface a crashed cluster run shaped.
        #[arg(long, value_name = "IFACE")]
        interface: Option<String>,
        /// Restore it on every host of this hostfile (through mpirun).
        #[arg(long, value_name = "FILE", requires = "interface")]
        hostfile: Option<std::path::PathBuf>,
        /// Restore it on every node of this Slurm allocation (through srun).
        #[arg(long, requires = "interface", conflicts_with = "hostfile")]
        srun: bool,
    },
    /// One node's side of hosts shaping (started on every node by the
    /// driver): probe for netem, save and shape, or restore an interface.
    #[command(hide = true)]
    Node {
        #[command(subcommand)]
        action: NodeAction,
    },
    /// Run a command in this MPI rank's namespace (`<prefix><rank>`);
    /// mpirun starts it for every rank of a shaped run.
    #[command(hide = true)]
    Exec {
        #[arg(long)]
        namespace_prefix: String,
        #[arg(trailing_var_arg = true, required = true)]
        command: Vec<String>,
    },
}

/// A node's condition as `repro net node up` reads it: the flags
/// `NodeCondition::flags` writes.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub(crate) struct NodeConditionArgs {
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

impl From<NodeConditionArgs> for NodeCondition {
    fn from(a: NodeConditionArgs) -> Self {
        Self {
            rate_bps: a.rate_bps,
            latency_us: a.latency_us,
            qdisc: a.qdisc,
            no_netem: a.no_netem,
        }
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum NodeAction {
    /// Print `<host> netem: yes|no` (tried in a throwaway namespace).
    Probe {
        #[arg(long)]
        interface: String,
    },
    /// Save the interface's root qdisc, then apply the condition.
    Up {
        #[arg(long)]
        interface: String,
        #[command(flatten)]
        condition: NodeConditionArgs,
        /// The run that shapes it (`host:boot:pid:start`).
        #[arg(long)]
        owner: NodeOwner,
    },
    /// Put the saved root qdisc back.
    Down {
        #[arg(long)]
        interface: String,
        /// Who asks (`host:boot:pid:start`): its machine checked that no
        /// run from there still shapes the interface.
        #[arg(long)]
        by: Option<NodeOwner>,
        /// Restore it even if the run that shaped it may be alive.
        #[arg(long)]
        force: bool,
    },
}

fn node(action: &NodeAction) -> Result<()> {
    let iface = match action {
        NodeAction::Probe { interface }
        | NodeAction::Up { interface, .. }
        | NodeAction::Down { interface, .. } => interface,
    };
    if !net::hosts::valid_interface(iface) {
        return Err(NetError::BadInterface {
            name: iface.clone(),
        }
        .into());
    }
    let state = net::hosts::state_path(iface);
    let line = match action {
        NodeAction::Probe { .. } => {
            let probe = net::probe::ProbeNs::new(&System)?;
            let netem = probe.netem();
            format!("netem: {}", if netem { "yes" } else { "no" })
        }
        NodeAction::Up {
            condition, owner, ..
        } => net::hosts::node_up(
            &System,
            iface,
            &NodeCondition::from(condition.clone()),
            &state,
            owner,
        )?,
        NodeAction::Down { by, force, .. } => {
            net::hosts::node_down(&System, iface, &state, by.as_ref(), *force)?
        }
    };
    // the probe's answer ends the line: the driver reads `netem: yes|no`
    println!("{}: {line}", net::hosts::hostname());
    Ok(())
}

/// `repro net down --interface IFACE`: restores it here, or on every node,
/// unless a live run started from this machine shapes it (or `force`).
fn restore_interface(
    iface: &str,
    hostfile: Option<&std::path::Path>,
    srun: bool,
    force: bool,
) -> Result<()> {
    if !net::hosts::valid_interface(iface) {
        return Err(NetError::BadInterface { name: iface.into() }.into());
    }
    let tag = net::HostShaping::tag(iface);
    if let Some(o) = net::owner::of(&tag).filter(|o| o.alive() && !force) {
        return Err(NetError::InterfaceBusy {
            interface: iface.into(),
            reason: format!(
                "the live run pid {} ({}) shapes it; --force restores it anyway (that run \
                 then runs unshaped)",
                o.pid, o.command
            ),
        }
        .into());
    }
    let by = NodeOwner::me();
    let launcher = match (hostfile, srun) {
        (Some(h), _) => crate::launch::train::Launcher::Hostfile(h.to_path_buf()),
        (None, true) => crate::launch::train::Launcher::Srun,
        (None, false) => {
            return node(&NodeAction::Down {
                interface: iface.into(),
                by: Some(by),
                force,
            });
        }
    };
    let per_host = launcher.per_host().unwrap_or_default();
    let mut argv = net::hosts::node_command(&per_host, &std::env::current_exe()?, "down", iface);
    argv.extend(["--by".into(), by.arg()]);
    if force {
        argv.push("--force".into());
    }
    print!("{}", net::Exec::run(&System, &argv)?);
    Ok(())
}

/// How `repro net status` names the run that shaped an interface.
fn shaper(owner: Option<&NodeOwner>) -> String {
    match owner {
        None => "a cluster run (not recorded)".into(),
        Some(o) => match o.alive_here() {
            Some(true) => format!("the live run {o}"),
            Some(false) => format!("{o}, which is gone"),
            None => format!("{o} (another machine: not checked here)"),
        },
    }
}

/// The owner records of cluster runs started here, one line each.
fn hosts_records() -> Vec<String> {
    let mut found: Vec<String> = std::fs::read_dir(net::owner::dir())
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let iface = name
                .strip_prefix("hosts-")?
                .strip_suffix(".owner")?
                .to_string();
            let o = net::owner::of(&net::HostShaping::tag(&iface))?;
            let state = if o.alive() { "live" } else { "gone" };
            Some(format!(
                "cluster run pid {} ({state}) shapes {iface} on its nodes: {}",
                o.pid, o.command
            ))
        })
        .collect();
    found.sort();
    found
}

/// `repro net status`: every shaped interface and network with its owner.
fn status() -> Result<()> {
    let found = leftovers(&System).context("could not list namespaces and links")?;
    // interfaces hosts mode shaped in this namespace and has not
    // restored yet (a state file names its namespace)
    let mine = net::hosts::state_prefix();
    let shaped: Vec<String> = std::fs::read_dir(net::hosts::state_dir())
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&mine))
        .filter_map(|e| {
            let text = std::fs::read_to_string(e.path()).ok()?;
            let st: net::hosts::NodeState = serde_json::from_str(&text).ok()?;
            Some(format!(
                "interface {} shaped by {} (saved root in {}); \
                 `repro net down --interface {}` restores it",
                st.interface,
                shaper(st.owner.as_ref()),
                e.path().display(),
                st.interface
            ))
        })
        .collect();
    for s in hosts_records().iter().chain(&shaped) {
        println!("{s}");
    }
    if found.is_empty() {
        println!("no network namespaces or links of repro on this host");
        return Ok(());
    }
    let mut left = 0;
    for l in &found {
        let tag = l.tag().unwrap_or("");
        let owner = match net::owner::of(tag) {
            Some(o) if o.alive() => format!("live: pid {} ({})", o.pid, o.command),
            Some(o) => {
                left += 1;
                format!(
                    "left behind: its owner pid {} is gone ({})",
                    o.pid, o.command
                )
            }
            None => {
                left += 1;
                "left behind: no owner record".to_string()
            }
        };
        println!("{l}  [{owner}]");
    }
    if left > 0 {
        println!("{left} left behind; `repro net down` removes them (live runs' networks stay)");
    }
    Ok(())
}

/// `repro net down`: restores `interface` (here or on every node), then
/// removes the networks whose owner is gone (all of them with `force`).
fn down(
    force: bool,
    interface: Option<&str>,
    hostfile: Option<&std::path::Path>,
    srun: bool,
) -> Result<()> {
    if let Some(iface) = interface {
        restore_interface(iface, hostfile, srun, force)
            .with_context(|| format!("could not restore the root qdisc of {iface}"))?;
    }
    let net::netns::Tidied {
        removed,
        kept,
        failed,
    } = remove_dead(&System, force).context("could not list namespaces and links")?;
    for (l, e) in &failed {
        eprintln!("could not remove {l}: {e}");
    }
    println!(
        "removed {} of {}{}",
        removed.len() - failed.len(),
        removed.len(),
        if kept.is_empty() {
            String::new()
        } else {
            format!(
                "; kept {} of live runs (`repro net status` names them; --force removes them)",
                kept.len()
            )
        }
    );
    if failed.is_empty() {
        Ok(())
    } else {
        bail!("{} could not be removed (are you root?)", failed.len())
    }
}

pub(crate) fn run(args: &NetArgs) -> Result<()> {
    match &args.command {
        NetCommand::Status => status(),
        NetCommand::Node { action } => node(action),
        NetCommand::Down {
            force,
            interface,
            hostfile,
            srun,
        } => down(*force, interface.as_deref(), hostfile.as_deref(), *srun),
        NetCommand::Exec {
            namespace_prefix,
            command,
        } => {
            let rank = net::rank_from_env()?;
            let ns = format!("{namespace_prefix}{rank}");
            if !net::netns::is_our_name(&ns) {
                return Err(NetError::BadName { name: ns }.into());
            }
            let err = std::process::Command::new("ip")
                .args(["netns", "exec", &ns])
                .args(command)
                .exec();
            Err(NetError::Start {
                program: "ip".into(),
                source: err,
            }
            .into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `NodeCondition::flags` writes, `repro net node up` reads back.
    #[test]
    fn a_node_condition_reads_back_from_its_flags() {
        #[derive(clap::Parser)]
        struct Up {
            #[command(flatten)]
            condition: NodeConditionArgs,
        }
        for (rate_bps, latency_us, qdisc, no_netem) in
            [(0, 0, "htb-ack", false), (20_000_000, 150, "tbf", true)]
        {
            let sent = NodeCondition {
                rate_bps,
                latency_us,
                qdisc: qdisc.into(),
                no_netem,
            };
            let argv = std::iter::once("up".to_string()).chain(sent.flags());
            let read = <Up as clap::Parser>::try_parse_from(argv).unwrap();
            assert_eq!(NodeCondition::from(read.condition), sent);
        }
    }
}
