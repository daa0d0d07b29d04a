//! `repro data fetch <dataset>`: the command line of
//! [`crate::launch::data::fetch`].

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand};

use crate::experiment::data::{Dataset, default_dir};
use crate::launch::data::{Source, fetch};

/// Options of `repro data`.
#[derive(Debug, Args)]
pub(crate) struct DataArgs {
    #[command(subcommand)]
    command: DataCommand,
}

#[derive(Debug, Subcommand)]
enum DataCommand {
    /// Download and verify a data set (needs internet; CIFAR-10 is 163 MB,
    /// epsilon 3 GB), or write the generated `epsilon-like`.
    Fetch(FetchArgs),
}

#[derive(Debug, Args)]
struct FetchArgs {
    dataset: Dataset,
    /// Where to put it (default: data/<dataset>); give the same directory
    /// as `data_dir` (images) or the file as `data` (LIBSVM) in a manifest.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// A mirror instead of the official source: the archive's URL for
    /// CIFAR-10, the directory URL holding the files for Fashion-MNIST and
    /// epsilon; the file's URL for `libsvm`.
    #[arg(long)]
    url: Option<String>,
    /// The mirror's MD5 when it differs from the official one (CIFAR-10
    /// only; the unpacked batches are still checked).
    #[arg(long, requires = "url")]
    md5: Option<String>,
    /// The file's SHA-256 (`libsvm`: required, with `--url`).
    #[arg(long, requires = "url")]
    sha256: Option<String>,
}

/// `repro data ...`.
pub(crate) fn run(args: &DataArgs) -> Result<()> {
    match &args.command {
        DataCommand::Fetch(f) => {
            let dir = f.dir.clone().unwrap_or_else(|| default_dir(f.dataset));
            let source = Source {
                url: f.url.as_deref(),
                md5: f.md5.as_deref(),
                sha256: f.sha256.as_deref(),
            };
            let path = fetch(f.dataset, &dir, source)?;
            println!("{}", path.display());
            eprintln!(
                "ready: {}",
                match f.dataset {
                    Dataset::Cifar10Like => format!(
                        "rehearse a paper scale with `--set scales.paper.data_dir={}` (a scale's \
                         `data_dir` wins over the params'); generated images: do not report their accuracy",
                        path.display()
                    ),
                    Dataset::Cifar10 | Dataset::FashionMnist => format!(
                        "set `data_dir: {}` (and `dataset: {}`) in a manifest's params or with --set",
                        path.display(),
                        if f.dataset == Dataset::Cifar10 {
                            "cifar10"
                        } else {
                            "fashion-mnist"
                        }
                    ),
                    _ => format!(
                        "set `data: {}` (a simulator run with `objective: logistic`) in a manifest's params or with --set",
                        path.display()
                    ),
                }
            );
            Ok(())
        }
    }
}
