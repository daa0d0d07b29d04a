//! The command line: parses the arguments, runs the command, and maps its
//! outcome to the documented exit code.
//!
//! Exit codes: 0 success; 1 a command failed (the message says why);
//! 2 bad usage (unknown command or option); 3 an experiment finished but
//! some of its runs failed or were refused (see runs.csv); 4 `repro
//! verify` found a cell that differs from the record's or a claim whose
//! verdict flipped; 5 `repro verify` could not tell (no cell differs, but
//! not every cell of the record reproduced: inconclusive, too few runs,
//! or not run); 130 stopped by
//! Ctrl-C or SIGTERM (after terminating the running job and removing its
//! network); 141 (a shell's 128 + SIGPIPE) when stdout was closed early,
//! as in `repro list | head -1`. Whenever an error is printed the code is
//! not 0.

use std::process::ExitCode;

use clap::{Args, CommandFactory, Parser, Subcommand};

pub(crate) mod compare;
pub(crate) mod data;
pub(crate) mod demo;
pub(crate) mod doctor;
pub(crate) mod export;
pub(crate) mod list;
pub(crate) mod net;
pub(crate) mod plot;
pub(crate) mod report;
pub(crate) mod run;
pub(crate) mod show;
pub(crate) mod status;
pub(crate) mod submit;
pub(crate) mod table;
pub(crate) mod values;
pub(crate) mod verify;

/// Reproduce "Moniqua: Modulo Quantized Communication in Decentralized SGD"
/// (Lu & De Sa, ICML 2020) and its baselines.
#[derive(Debug, Parser)]
#[command(name = "repro", version = repro_build::VERSION, about, long_about = None)]
struct Cli {
    /// Say nothing on stderr but errors: no progress, no per-run lines.
    #[arg(long, short, global = true, conflicts_with = "verbose")]
    quiet: bool,
    /// Also print each run's resolved parameters as it starts.
    #[arg(long, short, global = true)]
    verbose: bool,
    /// The project: a directory with `experiments/` (default: the working
    /// directory or its nearest parent that has one). Named experiments
    /// come only from there; runs go to its runs/, the record is its results/.
    #[arg(long, global = true, value_name = "DIR")]
    project: Option<std::path::PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run an experiment (a name from `repro list`, or a path to a manifest):
    /// every run of its grid at one scale, then its table.
    Run(run::RunArgs),
    /// Submit an MPI experiment as a Slurm batch job: its script into a new
    /// run directory (resources and time from the plan), `sbatch`, the
    /// job's id into job.json. The job runs `repro run --launcher srun
    /// --resume` there.
    Submit(submit::SubmitArgs),
    /// End the Slurm job of a run directory `repro submit` made
    /// (`scancel`); its finished runs stay.
    Cancel(submit::CancelArgs),
    /// Render an experiment's table from its runs.csv (writing table.md,
    /// table.tex, table.csv), and test its claims (claims.md, claims.csv).
    Table(table::TableArgs),
    /// One metric over the runs of several experiments (every committed
    /// one if none is named), grouped by any keys, from their runs.parquet
    /// files alone: a table, or the tidy CSV.
    Compare(compare::CompareArgs),
    /// Write recorded results for MLflow (a file store) or TensorBoard
    /// (event files): a run per run, parameters, tags, metrics and curves.
    Export(export::ExportArgs),
    /// Whether a run reproduces the record: each cell of the table against
    /// the record's (a Welch interval and an equivalence test against a
    /// margin), each claim's verdict beside the record's. Exit code 4 when
    /// a cell differs or a verdict flipped, 5 when it could not tell (a
    /// cell inconclusive, with too few runs, or not run).
    Verify(verify::VerifyArgs),
    /// Draw an experiment's figure (SVG and PNG) from its runs' logs.
    Plot(plot::PlotArgs),
    /// List the experiments, their scales and how many runs each has.
    List(list::ListArgs),
    /// Print an experiment's manifest as a run reads it: what it
    /// `extends` merged in, `--set` overrides applied.
    Show(show::ShowArgs),
    /// Whether an experiment's recorded runs are current (this build, this
    /// manifest), stale or missing; every experiment if none is named.
    Status(status::StatusArgs),
    /// What this host can do: MPI, root, tc, netem, namespaces, libtorch,
    /// CUDA, data sets, free disk; and how to get what is missing.
    Doctor,
    /// Show what each codec puts on the wire for one model-sized exchange:
    /// bytes, recovery error against Lemma 2's bound, hash verification.
    Demo(demo::DemoArgs),
    /// The shaped networks of runs: list or remove what was left behind.
    Net(net::NetArgs),
    /// Data sets: `repro data fetch cifar10` downloads and verifies one.
    Data(data::DataArgs),
    /// Print a shell completion script: `repro completions bash >
    /// ~/.local/share/bash-completion/completions/repro`.
    Completions(CompletionsArgs),
    /// Print the man page (roff), or with --out write one per command.
    Man(ManArgs),
    /// Write the report pages, readable offline: results/index.html (every
    /// experiment, its runs by health and claims by verdict) and
    /// results/<name>/index.html (its provenance, table, claims, tuning,
    /// figure, and its runs, sortable and filterable).
    Report(report::ReportArgs),
}

#[derive(Debug, Args)]
struct CompletionsArgs {
    shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
struct ManArgs {
    /// Write repro.1 and repro-<command>.1 into this directory (e.g.
    /// ~/.local/share/man/man1) instead of printing repro.1.
    #[arg(long, value_name = "DIR")]
    out: Option<std::path::PathBuf>,
}

/// The completion script for `shell`, from the same definitions the
/// parser uses, offering the project's experiment names and scales (as
/// they are when the script is written: write it again after adding one).
fn completions(args: &CompletionsArgs) -> anyhow::Result<()> {
    let mut names = Vec::new();
    let mut scales = std::collections::BTreeSet::new();
    if let Ok(paths) = crate::experiment::manifest::all_manifests() {
        for p in paths {
            if let Ok(m) = crate::experiment::manifest::load(&p, &[]) {
                scales.extend(m.scales.keys().cloned());
                names.push(m.name);
            }
        }
    }
    let values = |v: &[String]| {
        clap::builder::PossibleValuesParser::new(
            v.iter()
                // clap names are &'static (its `string` feature is off):
                // a few short names for one command's lifetime
                .map(|n| {
                    let n: &'static str = Box::leak(n.clone().into_boxed_str());
                    clap::builder::PossibleValue::new(n)
                })
                .collect::<Vec<_>>(),
        )
    };
    let scales: Vec<String> = scales.into_iter().collect();
    let mut cmd = Cli::command();
    if !names.is_empty() {
        for sub in ["run", "table", "plot", "status"] {
            cmd = cmd.mut_subcommand(sub, |c| {
                // a changed positional goes last: the experiment is put
                // back first, and `run`'s KEY=VALUE arguments after it
                let c = c
                    .mut_arg("experiment", |a| a.index(1).value_parser(values(&names)))
                    .mut_arg("scale", |a| a.value_parser(values(&scales)));
                if sub == "run" {
                    c.mut_arg("assignments", |a| a.index(2))
                } else {
                    c
                }
            });
        }
    }
    clap_complete::generate(args.shell, &mut cmd, "repro", &mut std::io::stdout());
    Ok(())
}

/// The man pages, from the same definitions the parser uses.
fn man(args: &ManArgs) -> anyhow::Result<()> {
    use anyhow::Context;
    let cmd = Cli::command();
    let Some(dir) = &args.out else {
        clap_mangen::Man::new(cmd).render(&mut std::io::stdout())?;
        return Ok(());
    };
    std::fs::create_dir_all(dir).with_context(|| format!("could not create {}", dir.display()))?;
    let mut pages = vec![("repro.1".to_string(), cmd.clone())];
    for sub in cmd.get_subcommands() {
        // clap names are &'static (its `string` feature is off); a
        // handful of short names for one command's lifetime
        let name: &'static str = Box::leak(format!("repro-{}", sub.get_name()).into_boxed_str());
        pages.push((format!("{name}.1"), sub.clone().name(name)));
    }
    for (file, page) in pages {
        let mut text = Vec::new();
        clap_mangen::Man::new(page).render(&mut text)?;
        let path = dir.join(&file);
        crate::util::atomic::write(&path, text)
            .with_context(|| format!("could not write {}", path.display()))?;
        println!("{}", path.display());
    }
    Ok(())
}

/// Runs `repro` with this process's arguments.
pub fn main() -> ExitCode {
    crate::util::signals::default_sigpipe();
    let cli = Cli::parse();
    if let Err(e) = repro_codec::simd::check_cap_env() {
        eprintln!("error: {}", crate::util::text::terminal(&e));
        return ExitCode::from(1);
    }
    if let Some(dir) = &cli.project
        && let Err(e) = crate::experiment::project::set(dir)
    {
        eprintln!("error: {}", crate::util::text::terminal(&e.to_string()));
        return ExitCode::from(1);
    }
    crate::util::progress::set_verbosity(if cli.quiet {
        crate::util::progress::Verbosity::Quiet
    } else if cli.verbose {
        crate::util::progress::Verbosity::Verbose
    } else {
        crate::util::progress::Verbosity::Normal
    });
    let result = match cli.command {
        Command::Run(args) => run::run(&args),
        Command::Submit(args) => submit::submit(&args).map(|()| run::Outcome::AllSucceeded),
        Command::Cancel(args) => submit::cancel(&args).map(|()| run::Outcome::AllSucceeded),
        Command::Table(args) => table::table(&args).map(|()| run::Outcome::AllSucceeded),
        Command::Compare(args) => compare::compare(&args).map(|()| run::Outcome::AllSucceeded),
        Command::Export(args) => export::export(&args).map(|()| run::Outcome::AllSucceeded),
        Command::Plot(args) => plot::plot(&args).map(|()| run::Outcome::AllSucceeded),
        Command::Verify(args) => match verify::verify(&args) {
            Ok(crate::report::verify::Answer::Reproduces) => Ok(run::Outcome::AllSucceeded),
            Ok(crate::report::verify::Answer::Differs) => return ExitCode::from(4),
            Ok(
                crate::report::verify::Answer::CouldNotTell | crate::report::verify::Answer::NotRun,
            ) => return ExitCode::from(5),
            Err(e) => Err(e),
        },
        Command::List(args) => list::list(&args).map(|()| run::Outcome::AllSucceeded),
        Command::Show(args) => show::show(&args).map(|()| run::Outcome::AllSucceeded),
        Command::Status(args) => status::status(&args).map(|()| run::Outcome::AllSucceeded),
        Command::Doctor => doctor::run_doctor().map(|()| run::Outcome::AllSucceeded),
        Command::Demo(args) => demo::run(&args).map(|()| run::Outcome::AllSucceeded),
        Command::Net(args) => net::run(&args).map(|()| run::Outcome::AllSucceeded),
        Command::Data(args) => data::run(&args).map(|()| run::Outcome::AllSucceeded),
        Command::Completions(args) => completions(&args).map(|()| run::Outcome::AllSucceeded),
        Command::Man(args) => man(&args).map(|()| run::Outcome::AllSucceeded),
        Command::Report(args) => report::report(&args).map(|()| run::Outcome::AllSucceeded),
    };
    match result {
        Ok(run::Outcome::AllSucceeded) => ExitCode::SUCCESS,
        Ok(run::Outcome::SomeFailed) => ExitCode::from(3),
        Ok(run::Outcome::Interrupted) => ExitCode::from(130),
        Err(err) => {
            // no control character of an echoed key or value reaches the
            // terminal
            let shown = |e: &dyn std::fmt::Display| crate::util::text::terminal(&e.to_string());
            eprintln!("error: {}", shown(&err));
            for cause in err.chain().skip(1) {
                eprintln!("  caused by: {}", shown(&cause));
            }
            ExitCode::from(1)
        }
    }
}
