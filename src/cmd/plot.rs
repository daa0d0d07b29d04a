//! `repro plot`: the figure redrawn from the recorded runs of the plan,
//! alone or beside other experiments' panels.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;

use crate::cmd::status;
use crate::experiment::manifest;
use crate::report::outputs::{draw_figure, figure, figure_panels};
use crate::report::plot::ImageFormat;
use crate::report::recorded;

/// Options of `repro plot`.
#[derive(Debug, Args)]
pub(crate) struct PlotArgs {
    /// Experiment name or path to a manifest.
    pub experiment: String,
    /// Results directory, e.g. a run's runs/<experiment>/<scale>/latest
    /// (default: the record results/<experiment> at its scale, the newest
    /// run directory at another). The experiment may be such a directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub plan: status::PlanArgs,
    /// Image format (default: both SVG and PNG).
    #[arg(long, value_enum)]
    pub format: Option<ImageFormat>,
    /// Draw these experiments' panels beside this one's, in one figure
    /// (each from results/<experiment>), e.g. `repro plot figure2a --with
    /// figure2b --name figure2` for the paper's two-panel Figure 2.
    #[arg(long = "with", value_name = "EXPERIMENT", requires = "name")]
    pub with: Vec<String>,
    /// With `--with`: the combined figure goes to results/<NAME>/figure.*
    /// (or to `--out`; the experiments are read from results/<experiment>).
    #[arg(long)]
    pub name: Option<String>,
    /// With `--with`: the combined figure's title (default: the
    /// experiments' titles).
    #[arg(long)]
    pub title: Option<String>,
}

/// `repro plot A --with B --name N`: A's and B's panels in one figure,
/// each panel titled by its experiment where it had no title of its own.
fn combined(args: &PlotArgs, name: &str, formats: &[ImageFormat]) -> Result<()> {
    if !manifest::is_plain_name(name) {
        anyhow::bail!(
            "--name `{name}`: use letters, digits, `-` and `_` (it names a results directory)"
        );
    }
    let mut all = Vec::new();
    let mut titles = Vec::new();
    let mut first_spec = None;
    for e in std::iter::once(&args.experiment).chain(&args.with) {
        let r = recorded::recorded(e, &None, &args.plan.choice())?;
        let (m, out, rows) = (r.manifest, r.out, r.rows);
        let Some((spec, panels)) = figure_panels(&m, &out, &rows, r.backend)? else {
            anyhow::bail!(
                "experiment `{}` has no figure (its manifest has no `figure`)",
                m.name
            );
        };
        for mut p in panels {
            p.title = if p.title.is_empty() {
                m.figure_title().to_string()
            } else {
                format!("{}: {}", m.figure_title(), p.title)
            };
            all.push(p);
        }
        titles.push(m.figure_title().to_string());
        first_spec.get_or_insert(spec);
    }
    let dir = match &args.out {
        Some(o) => o.clone(),
        None => crate::experiment::project::root()?
            .join("results")
            .join(name),
    };
    crate::util::atomic::create_dir_all(&dir)?;
    let title = args.title.clone().unwrap_or_else(|| titles.join(" | "));
    let spec = first_spec.context("no experiment to draw")?;
    for p in draw_figure(&dir, &title, &spec, &all, formats)? {
        println!("wrote {}", p.display());
    }
    // what the figure was drawn from, for the report
    let names: Vec<&String> = std::iter::once(&args.experiment)
        .chain(&args.with)
        .collect();
    let combined = serde_json::json!({
        "title": title,
        "combined_from": names,
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "written_by": repro_build::VERSION,
    });
    let path = dir.join("combined.json");
    crate::util::atomic::write(&path, serde_json::to_string_pretty(&combined)? + "\n")?;
    println!("wrote {}", path.display());
    Ok(())
}

/// `repro plot`: redraws the figure from runs.csv and the logs.
pub(crate) fn plot(args: &PlotArgs) -> Result<()> {
    let formats = match args.format {
        Some(f) => vec![f],
        None => vec![ImageFormat::Svg, ImageFormat::Png],
    };
    if let Some(name) = &args.name {
        return combined(args, name, &formats);
    }
    let r = recorded::recorded(&args.experiment, &args.out, &args.plan.choice())?;
    let (m, out, rows) = (r.manifest, r.out, r.rows);
    let drawn = figure(&m, &out, &rows, r.backend, &formats);
    crate::util::sudo::give(&out);
    match drawn? {
        Some(paths) => {
            for p in paths {
                println!("wrote {}", p.display());
            }
            Ok(())
        }
        None => anyhow::bail!(
            "experiment `{}` has no figure (its manifest has no `figure`)",
            m.name
        ),
    }
}
