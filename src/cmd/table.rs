//! `repro table`: the table and the claims' verdicts, redrawn from the
//! recorded runs of the plan.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::cmd::status::{self, planned_results};
use crate::records::frames::RunsFrame;
use crate::report::outputs::{write_claims, write_table};

/// A table's output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum TableFormat {
    Md,
    Latex,
    Csv,
}

/// Options of `repro table`.
#[derive(Debug, Args)]
pub(crate) struct TableArgs {
    /// Experiment name or path to a manifest.
    pub experiment: String,
    /// Markdown, LaTeX (booktabs tabular) or CSV.
    #[arg(long, value_enum, default_value = "md")]
    pub format: TableFormat,
    /// Results directory (default: results/<experiment>, or
    /// scratch/<scale>/<experiment> for another scale).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub plan: status::PlanArgs,
}

/// `repro table`: the table (and the claims' verdicts) from runs.csv,
/// written beside it and printed.
pub(crate) fn table(args: &TableArgs) -> Result<()> {
    let (m, out, rows) = planned_results(&args.experiment, &args.out, &args.plan)?;
    let table = write_table(&m, &out, &RunsFrame::new(&rows)?)?;
    let claims = write_claims(&m, &out, &rows)?;
    crate::util::sudo::give(&out);
    print!(
        "{}",
        match args.format {
            TableFormat::Md => table.markdown(),
            TableFormat::Latex => table.latex(),
            TableFormat::Csv => table.csv()?,
        }
    );
    // the verdicts follow a Markdown table (they are in claims.* always)
    if let (TableFormat::Md, Some(claims)) = (args.format, claims) {
        print!("\n{claims}");
    }
    Ok(())
}
