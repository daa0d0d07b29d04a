//! `repro net status`, `repro net down`, and `repro net exec` (how each MPI
//! rank enters its network namespace).

use std::os::unix::process::CommandExt;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};

use crate::net::{self, NetError, NodeCondition, System, leftovers, remove_dead};

/// Options of `repro net`.
#[derive(Debug, Args)]
pub struct NetArgs {
    #[command(subcommand)]
    pub command: NetCommand,
}

#[derive(Debug, Subcommand)]
pub enum NetCommand {
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

#[derive(Debug, Subcommand)]
pub enum NodeAction {
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
        condition: NodeCondition,
    },
    /// Put the saved root qdisc back.
    Down {
        #[arg(long)]
        interface: String,
    },
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "?".into())
}

fn node(action: &NodeAction) -> Result<()> {
    let iface = match action {
        NodeAction::Probe { interface }
        | NodeAction::Up { interface, .. }
        | NodeAction::Down { interface } => interface,
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
        NodeAction::Up { condition, .. } => net::hosts::node_up(&System, iface, condition, &state)?,
        NodeAction::Down { .. } => net::hosts::node_down(&System, iface, &state)?,
    };
    // the probe's answer ends the line: the driver reads `netem: yes|no`
    println!("{}: {line}", hostname());
    Ok(())
}

/// `repro net down --interface IFACE`: restores it here, or on every node.
fn restore_interface(iface: &str, hostfile: Option<&std::path::Path>, srun: bool) -> Result<()> {
    let launcher = match (hostfile, srun) {
        (Some(h), _) => crate::train_backend::Launcher::Hostfile(h.to_path_buf()),
        (None, true) => crate::train_backend::Launcher::Srun,
        (None, false) => {
            return node(&NodeAction::Down {
                interface: iface.into(),
            });
        }
    };
    let per_host = launcher.per_host().unwrap_or_default();
    let argv = net::hosts::node_command(&per_host, &std::env::current_exe()?, "down", iface);
    print!("{}", net::Exec::run(&System, &argv)?);
    Ok(())
}

pub fn run(args: &NetArgs) -> Result<()> {
    match &args.command {
        NetCommand::Status => {
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
                        "interface {} shaped by a cluster run (saved root in {}); \
                         `repro net down --interface {}` restores it",
                        st.interface,
                        e.path().display(),
                        st.interface
                    ))
                })
                .collect();
            for s in &shaped {
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
                println!(
                    "{left} left behind; `repro net down` removes them (live runs' networks stay)"
                );
            }
            Ok(())
        }
        NetCommand::Node { action } => node(action),
        NetCommand::Down {
            force,
            interface,
            hostfile,
            srun,
        } => {
            if let Some(iface) = interface {
                restore_interface(iface, hostfile.as_deref(), *srun)
                    .with_context(|| format!("could not restore the root qdisc of {iface}"))?;
            }
            let net::netns::Tidied {
                removed,
                kept,
                failed,
            } = remove_dead(&System, *force).context("could not list namespaces and links")?;
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
