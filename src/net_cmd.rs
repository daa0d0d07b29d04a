//! `repro net status`, `repro net down`, and `repro net exec` (how each MPI
//! rank enters its network namespace).

use std::os::unix::process::CommandExt;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};

use crate::net::{self, NetError, System, leftovers, remove_leftovers};

/// Options of `repro net`.
#[derive(Debug, Args)]
pub struct NetArgs {
    #[command(subcommand)]
    pub command: NetCommand,
}

#[derive(Debug, Subcommand)]
pub enum NetCommand {
    /// List the network namespaces and links that shaped runs left behind.
    Status,
    /// Remove every network namespace and link a shaped run created.
    Down,
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

pub fn run(args: &NetArgs) -> Result<()> {
    match &args.command {
        NetCommand::Status => {
            let found = leftovers(&System).context("could not list namespaces and links")?;
            if found.is_empty() {
                println!("no network namespaces or links of repro on this host");
            } else {
                for l in &found {
                    println!("{l}");
                }
                println!("{} left behind; `repro net down` removes them", found.len());
            }
            Ok(())
        }
        NetCommand::Down => {
            let found = leftovers(&System).context("could not list namespaces and links")?;
            let failed = remove_leftovers(&System, &found);
            for (l, e) in &failed {
                eprintln!("could not remove {l}: {e}");
            }
            println!("removed {} of {}", found.len() - failed.len(), found.len());
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
