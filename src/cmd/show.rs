//! `repro show`: an experiment's manifest as a run reads it.

use anyhow::{Context, Result};
use clap::Args;

use crate::spec::manifest;

/// Options of `repro show`.
#[derive(Debug, Args)]
pub(crate) struct ShowArgs {
    /// Experiment name or path to a manifest
    pub experiment: String,
    /// Override manifest keys, as `repro run --set` does.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
}

/// Prints the manifest resolved: what it `extends` merged in, the
/// overrides applied, checked as `repro run` checks it. Comments are not
/// kept.
pub(crate) fn show(args: &ShowArgs) -> Result<()> {
    let path = manifest::locate(&args.experiment)?;
    let tree = manifest::resolved_tree(&path, &args.overrides)?;
    // the same checks a run makes: a manifest that would not run is an error here too
    manifest::from_tree(&path, tree.clone())?;
    let text = yaml_serde::to_string(&tree).context("could not write the manifest as YAML")?;
    print!("# {} resolved\n{text}", path.display());
    Ok(())
}
