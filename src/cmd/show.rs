//! `repro show`: an experiment's manifest as a run reads it.

use anyhow::{Context, Result};
use clap::Args;

use yaml_serde::Value;

use crate::experiment::manifest;

/// Options of `repro show`.
#[derive(Debug, Args)]
pub(crate) struct ShowArgs {
    /// Experiment name or path to a manifest
    pub experiment: String,
    /// Override manifest keys, as `repro run --set` does.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// Print `params` and `grid` as they are at this scale (its keys merged
    /// in), without `scales`.
    #[arg(long)]
    pub scale: Option<String>,
}

/// Prints the manifest resolved: what it `extends` merged in, the
/// overrides applied, checked as `repro run` checks it. Comments are not
/// kept.
pub(crate) fn show(args: &ShowArgs) -> Result<()> {
    let path = manifest::locate(&args.experiment)?;
    let tree = manifest::resolved_tree(&path, &args.overrides)?;
    // the same checks a run makes: a manifest that would not run is an error here too
    let m = manifest::from_tree(&path, tree.clone())?;
    let mut tree = tree;
    let mut header = format!("# {} resolved", path.display());
    if let (Some(scale), Value::Mapping(map)) = (&args.scale, &mut tree) {
        let (params, grid) = crate::experiment::plan::at_scale(&m, scale)?;
        map.insert("params".into(), Value::Mapping(params));
        map.insert(
            "grid".into(),
            Value::Mapping(
                grid.into_iter()
                    .map(|(k, v)| (Value::String(k), Value::Sequence(v)))
                    .collect(),
            ),
        );
        map.remove("scales");
        // the titles as that scale's tables and figures show them
        let titled = crate::experiment::plan::titled(&m, scale)?;
        map.insert("title".into(), Value::String(titled.title));
        if let (Some(t), Some(Value::Mapping(figure))) =
            (titled.figure.and_then(|f| f.title), map.get_mut("figure"))
        {
            figure.insert("title".into(), Value::String(t));
        }
        header.push_str(&format!(
            " at scale {scale} (its keys merged into params and grid)"
        ));
    }
    let text = yaml_serde::to_string(&tree).context("could not write the manifest as YAML")?;
    print!("{header}\n{text}");
    Ok(())
}
