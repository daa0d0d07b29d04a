//! `repro export mlflow|tensorboard`: recorded results in the file formats
//! MLflow's and TensorBoard's own UIs open offline.

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::{Args, ValueEnum};

use crate::experiment::manifest;
use crate::report::export::{self, Exported};
use crate::report::recorded;

/// Which tool's files to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Target {
    /// An MLflow file store (`mlflow ui --backend-store-uri DIR`).
    Mlflow,
    /// TensorBoard event files (`tensorboard --logdir DIR`).
    Tensorboard,
}

/// Options of `repro export`.
#[derive(Debug, Args)]
pub(crate) struct ExportArgs {
    /// mlflow or tensorboard.
    #[arg(value_enum)]
    pub target: Target,
    /// Experiments to export (every one with recorded results if none is
    /// named).
    pub experiments: Vec<String>,
    /// The directory to write into (created if needed; an experiment
    /// already there is replaced).
    #[arg(long, value_name = "DIR")]
    pub to: PathBuf,
    /// The results at this scale (default: each one's committed results).
    #[arg(long)]
    pub scale: Option<String>,
    /// The results directory of the one experiment named (default: the
    /// record results/<experiment>, or runs/<experiment>/<scale>/latest).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// The experiments to export: those named, or every manifest whose
/// results directory at the scale asked (default: committed) has runs.
fn names(args: &ExportArgs) -> Result<Vec<String>> {
    if args.out.is_some() && args.experiments.len() != 1 {
        bail!("--out names the results of one experiment: name exactly one");
    }
    if !args.experiments.is_empty() {
        return Ok(args.experiments.clone());
    }
    let mut names = Vec::new();
    for path in manifest::all_manifests()? {
        let Ok(m) = manifest::load(&path, &[]) else {
            continue;
        };
        if m.default_out(&recorded::read_scale(&m, &args.scale))
            .join("runs.csv")
            .is_file()
        {
            names.push(m.name);
        }
    }
    if names.is_empty() {
        bail!("no experiment has recorded results to export: run one first, or name it");
    }
    Ok(names)
}

/// One experiment's planned runs (health judged), parameters and figure
/// curves, as exported.
fn gather(name: &str, args: &ExportArgs) -> Result<Exported> {
    let plan = recorded::PlanChoice {
        scale: args.scale.clone(),
        ..Default::default()
    };
    let r = recorded::recorded(name, &args.out, &plan)?;
    let curves = match &r.manifest.figure {
        Some(f) if f.kind == manifest::FigureKind::Curves => {
            crate::report::outputs::run_curves(&r.out, &r.rows, &f.y)?.0
        }
        _ => Vec::new(),
    };
    export::experiment(&r.manifest, &r.out, &r.scale, &r.rows, &r.plan, &curves)
}

/// `repro export`: writes the experiments and says how to open them.
pub(crate) fn export(args: &ExportArgs) -> Result<()> {
    let names = names(args)?;
    let mut exported = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let e = gather(name, args)?;
        if e.runs.is_empty() {
            crate::util::progress::note(&format!(
                "[{}/{}] {} ({}): no run of its plan is recorded; left out",
                i + 1,
                names.len(),
                e.name,
                e.scale
            ));
            continue;
        }
        crate::util::progress::note(&format!(
            "[{}/{}] {} ({}): {} runs",
            i + 1,
            names.len(),
            e.name,
            e.scale,
            e.runs.len()
        ));
        exported.push(e);
    }
    // under sudo every file of the export is the invoking user's, and
    // written only where they may write
    crate::util::sudo::as_invoker(|| match args.target {
        Target::Mlflow => export::mlflow::write(&args.to, &exported),
        Target::Tensorboard => export::tensorboard::write(&args.to, &exported),
    })?;
    let runs: usize = exported.iter().map(|e| e.runs.len()).sum();
    println!(
        "wrote {} experiments, {runs} runs to {}; open them with: {}",
        exported.len(),
        args.to.display(),
        match args.target {
            Target::Mlflow => format!(
                "MLFLOW_ALLOW_FILE_STORE=true mlflow ui --backend-store-uri {}",
                args.to.display()
            ),
            Target::Tensorboard => format!("tensorboard --logdir {}", args.to.display()),
        }
    );
    Ok(())
}
