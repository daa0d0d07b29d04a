//! `repro report`: writes the HTML page of every experiment's results.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::report::html::page;

/// Options of `repro report`.
#[derive(Debug, Args)]
pub(crate) struct ReportArgs {
    /// The results directory (one subdirectory per experiment).
    #[arg(long, default_value = "results")]
    pub results: PathBuf,
}

/// `repro report`: writes `<results>/index.html` and prints its path.
pub(crate) fn report(args: &ReportArgs) -> Result<()> {
    let path = args.results.join("index.html");
    let html = page(&args.results)?;
    crate::util::atomic::write(&path, html)?;
    println!("{}", path.display());
    Ok(())
}
