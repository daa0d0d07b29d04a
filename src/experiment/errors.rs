//! Errors of the driver. Messages are lowercase fragments naming what failed
//! and how to fix it.

use std::path::PathBuf;

use thiserror::Error;

#[derive(Debug, Error)]
pub(crate) enum DriverError {
    #[error("no experiment `{name}`: looked for {tried}; `repro list` shows the experiments")]
    UnknownExperiment { name: String, tried: String },
    #[error("could not read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not valid YAML: {message}")]
    Yaml { path: PathBuf, message: String },
    #[error("{path}: `{key}`: {message}")]
    Manifest {
        path: PathBuf,
        key: String,
        message: String,
    },
    #[error("--set `{arg}` is not `key=value` (a dotted key, e.g. params.lr=0.05)")]
    BadOverride { arg: String },
    #[error("experiment `{experiment}` has no scale `{scale}`; it has: {available}")]
    UnknownScale {
        experiment: String,
        scale: String,
        available: String,
    },
    #[error(
        "grid key `{key}` has no values: an empty list makes no runs; remove the key or give it values"
    )]
    EmptyGrid { key: String },
    #[error(
        "exclude: the exclusions remove every one of the grid's {points} points at scale `{scale}`, so nothing would run; exclude less"
    )]
    ExcludedEverything { points: u128, scale: String },
    #[error(
        "scales.{scale}.grid.{key}: a grid axis must be a list of values, e.g. `grid.{key}: [a, b]`"
    )]
    ScaleGrid { scale: String, key: String },
    #[error(
        "cases[{index}].when.{key}: not a grid key; a case matches grid values (grid keys: {keys})"
    )]
    CaseKey {
        index: usize,
        key: String,
        keys: String,
    },
    #[error(
        "exclude[{index}].{key}: {problem}; an exclusion removes the grid points with these values (grid keys: {keys})"
    )]
    Exclude {
        index: usize,
        key: String,
        problem: String,
        keys: String,
    },
    #[error(
        "cases[{index}].when.{key}: `{value}` is no {key} a run can have, so the case would never apply (known: {values})"
    )]
    CaseValue {
        index: usize,
        key: String,
        value: String,
        values: String,
    },
    #[error("labels: `{key}` {problem}")]
    Label { key: String, problem: String },
    #[error("run {run}: `{key}`: {message}")]
    RunParams {
        run: String,
        key: String,
        message: String,
    },
    #[error(
        "the grid makes {runs} runs, more than the limit of {max}; shrink the grid, or pass --max-runs {runs} if you mean it"
    )]
    TooManyRuns { runs: u128, max: usize },
    #[error(
        "runs {first} and {second} resolve to the same parameters (run id {id}); remove the duplicate grid value"
    )]
    DuplicateRun {
        id: String,
        first: String,
        second: String,
    },
    #[error(
        "no `experiments/` directory in {looked}: run repro inside a project (a checkout of repro, or a directory with your own experiments/), or pass --project DIR"
    )]
    NoProject { looked: String },
    #[error("{message}")]
    Override { message: String },
    #[error("experiment `{experiment}`: `{key}` at scale `{scale}`: {message}")]
    Title {
        experiment: String,
        key: String,
        scale: String,
        message: String,
    },
    #[error("grid points {first} and {second} {problem}; {fix}")]
    LabelClash {
        first: String,
        second: String,
        problem: String,
        fix: String,
    },
}
