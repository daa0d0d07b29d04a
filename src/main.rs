//! `repro`: the driver of the Moniqua reproduction suite.
//!
//! Exit codes: 0 success; 1 a command failed (the message says why);
//! 2 bad usage (unknown command or option); 3 an experiment finished but
//! some of its runs failed (see runs.csv); 130 stopped by Ctrl-C or
//! SIGTERM (after terminating the running job and removing its network).

use std::process::ExitCode;

fn main() -> ExitCode {
    repro::main()
}
