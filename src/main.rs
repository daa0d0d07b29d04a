//! `repro`: the driver of the Moniqua reproduction suite.
//!
//! Exit codes: 0 success, 1 a command failed (the message says why),
//! 2 bad usage (unknown command or option).

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod demo;

/// Reproduce "Moniqua: Modulo Quantized Communication in Decentralized SGD"
/// (Lu & De Sa, ICML 2020) and its baselines.
#[derive(Debug, Parser)]
#[command(name = "repro", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show what each codec puts on the wire for one model-sized exchange:
    /// bytes, recovery error against Lemma 2's bound, hash verification.
    Demo(demo::DemoArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(args) => demo::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            for cause in err.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            ExitCode::from(1)
        }
    }
}
