//! `repro report`: the HTML page of every experiment's results, or one
//! experiment's section of a reproduction report (`--markdown`).

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;

use crate::cmd::status;
use crate::records::results_dir::ResultsDir;
use crate::report::html::write_report;
use crate::report::recorded::{planned_results, read_scale};
use crate::report::{repeats, section};

/// Options of `repro report`.
#[derive(Debug, Args)]
pub(crate) struct ReportArgs {
    /// The results directory (one subdirectory per experiment).
    #[arg(long, default_value = "results")]
    pub results: PathBuf,
    /// Print EXPERIMENT's section of a reproduction report instead: its
    /// setting, table, the runs that are not valid results, claims and
    /// tuning, from its recorded results, between the markers
    /// REPRODUCTION.md keeps it in.
    #[arg(long, value_name = "EXPERIMENT")]
    pub markdown: Option<String>,
    /// With --markdown: the experiment's results directory (default:
    /// results/<experiment>).
    #[arg(long, requires = "markdown")]
    pub out: Option<PathBuf>,
    /// With --markdown: replace the experiment's section in this file
    /// (e.g. REPRODUCTION.md) instead of printing it.
    #[arg(long, value_name = "FILE", requires = "markdown")]
    pub into: Option<PathBuf>,
    #[command(flatten)]
    pub plan: status::PlanArgs,
}

/// `repro report`: writes `<results>/index.html` and prints its path; with
/// `--markdown`, one experiment's section.
pub(crate) fn report(args: &ReportArgs) -> Result<()> {
    if let Some(experiment) = &args.markdown {
        return markdown(args, experiment);
    }
    let written = write_report(&args.results)?;
    println!(
        "{} (and a page for each of {} experiments)",
        written[0].display(),
        written.len() - 1
    );
    Ok(())
}

/// `repro report --markdown EXPERIMENT [--into FILE]`.
fn markdown(args: &ReportArgs, experiment: &str) -> Result<()> {
    let (m, out, rows) = planned_results(experiment, &args.out, &args.plan.choice())?;
    let scale = args
        .plan
        .scale
        .clone()
        .or_else(|| ResultsDir::new(&out).recorded_scale())
        .unwrap_or_else(|| read_scale(&m, &None));
    let src = section::Source {
        out: &out,
        scale: &scale,
        backend: args.plan.backend.unwrap_or(m.backend),
    };
    let mut repeated = Vec::new();
    for dir in repeats::dirs(&out)? {
        let (_, _, rows) = planned_results(experiment, &Some(dir.clone()), &args.plan.choice())?;
        repeated.push(repeats::Repeat::judged(&m, dir, rows)?);
    }
    let text = section::section(&m, &src, &rows, &repeated)?;
    match &args.into {
        None => print!("{text}"),
        Some(file) => {
            crate::util::atomic::check_target(file)?;
            let doc = std::fs::read_to_string(file)
                .with_context(|| format!("could not read {}", file.display()))?;
            let updated = section::replace(&doc, &m.name, &text)
                .with_context(|| format!("{}", file.display()))?;
            crate::util::atomic::write(file, updated)?;
            println!("{}: replaced the section of `{}`", file.display(), m.name);
        }
    }
    Ok(())
}
