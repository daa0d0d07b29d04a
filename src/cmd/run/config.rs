//! `repro run`'s options, and the configuration it resolves from them once.

use super::*;

/// Options of `repro run`.
#[derive(Debug, Clone, Args)]
pub(crate) struct RunArgs {
    /// Experiment name (see `repro list`) or path to a manifest.
    #[arg(default_value = DEFAULT_EXPERIMENT)]
    pub experiment: String,
    /// Manifest overrides as Hydra writes them, `params.lr=0.05`: the same
    /// as `--set params.lr=0.05` (applied before the `--set` ones).
    #[arg(value_name = "KEY=VALUE")]
    pub assignments: Vec<String>,
    /// smoke (seconds), cpu (minutes on a laptop) or paper (default: the
    /// manifest's `default_scale`, else smoke).
    #[arg(long)]
    pub scale: Option<String>,
    /// Override any manifest key, e.g. `--set params.lr=0.05` or `--set grid.seed=[0,1]`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// Where results go (default: a new directory of this run,
    /// runs/<experiment>/<scale>/<time>/, linked as `latest` beside it).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write into the record, results/<experiment>/, which holds the
    /// committed scale only: what maintainers commit. Without it the
    /// record is read, never written (`repro verify` compares with it).
    #[arg(long, conflicts_with = "out")]
    pub record: bool,
    /// Print the runs the plan expands to, run nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Override the manifest's backend.
    #[arg(long, value_enum)]
    pub backend: Option<Backend>,
    /// Runs at a time.
    #[arg(long, default_value_t = 1)]
    pub jobs: usize,
    /// Keep MPI runs that already finished in the output directory (same
    /// run id, i.e. the same resolved config; every rank's log complete)
    /// and are current (this build, this manifest; see `repro status`):
    /// summarize their logs instead of running them again. Simulator runs
    /// are cheap and always run.
    #[arg(long)]
    pub resume: bool,
    /// With --resume, also keep finished runs that are stale (another
    /// build or manifest), e.g. to extend a grid without rerunning it.
    #[arg(long, requires = "resume")]
    pub resume_stale: bool,
    /// Run only the K-th of N shares of the plan (every N-th run from the
    /// K-th; a tuned experiment's tuning runs, its final runs wait for
    /// them all), and not the manifest's `then`: one task of a job array
    /// (`repro submit --array`). Each chunk writes a directory of its own;
    /// `--resume` in the directory above them adopts their runs.
    #[arg(long, value_name = "K/N", value_parser = parse_chunk)]
    pub chunk: Option<(usize, usize)>,
    /// How ranks start: mpirun on this host, or srun in a Slurm allocation
    /// (auto: srun when SLURM_JOB_ID is set, else mpirun).
    #[arg(long, value_enum, default_value = "auto")]
    pub launcher: LauncherArg,
    /// mpirun across the hosts of this hostfile (a cluster, or one line
    /// `localhost slots=8` for a multi-GPU box).
    #[arg(long, value_name = "FILE")]
    pub hostfile: Option<PathBuf>,
    /// The nodes' network interface, for `shaping: hosts` (cluster runs with
    /// network conditions: netem on this interface of every node).
    #[arg(long, value_name = "IFACE")]
    pub interface: Option<String>,
    /// Refuse a plan of more runs than this (the grid's size is checked
    /// before it is expanded).
    #[arg(long, value_name = "N", default_value_t = plan::Limits::default().max_runs)]
    pub max_runs: usize,
    /// Refuse a run with more workers than this.
    #[arg(long, value_name = "N", default_value_t = plan::Limits::default().max_workers)]
    pub max_workers: usize,
    /// Print a JSON summary on stdout at the end (runs by status, the
    /// files written) instead of the table and claims.
    #[arg(long)]
    pub json: bool,
    /// Memory the runs may hold, GB (default: what the kernel has
    /// available when the plan is made, MemAvailable). A simulator run
    /// whose plan needs more (models, replicas, frames, objective; shared
    /// by --jobs) is refused before anything runs and recorded as
    /// `refused` with what it needs.
    #[arg(long, value_name = "GB")]
    pub max_memory: Option<f64>,
    /// Let MPI ranks run as root where they cannot run as the invoking
    /// user: under sudo with --hostfile (remote ranks start as the user
    /// mpirun logs in as, root here). Without it such a launch is refused.
    #[arg(long)]
    pub allow_root_ranks: bool,
}

impl RunArgs {
    /// The experiment and every override: the `KEY=VALUE` arguments, then
    /// `--set`. `repro run lr=0.1` (no experiment named) is the default
    /// experiment with that override.
    pub(crate) fn experiment_and_overrides(&self) -> (String, Vec<String>) {
        let mut overrides = self.assignments.clone();
        let experiment =
            if self.experiment.contains('=') && !std::path::Path::new(&self.experiment).exists() {
                overrides.insert(0, self.experiment.clone());
                DEFAULT_EXPERIMENT.to_string()
            } else {
                self.experiment.clone()
            };
        overrides.extend(self.overrides.iter().cloned());
        (experiment, overrides)
    }
}

/// `--launcher`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LauncherArg {
    Auto,
    Mpirun,
    Srun,
}

/// `repro run`'s options resolved once, before the first experiment is
/// planned: what every step below [`run`] reads (none sees [`RunArgs`]).
#[derive(Debug)]
pub(super) struct RunConfig {
    pub(super) limits: plan::Limits,
    /// Runs at a time, as asked (see [`jobs`]).
    pub(super) jobs: usize,
    pub(super) dry_run: bool,
    pub(super) json: bool,
    /// Keep finished MPI runs that are current; with `resume_stale`,
    /// stale ones too.
    pub(super) resume: bool,
    pub(super) resume_stale: bool,
    /// `--chunk K/N`: run only the K-th of N shares of the plan.
    pub(super) chunk: Option<(usize, usize)>,
    /// The memory each run may hold, bytes, and where the figure came
    /// from ([`memory_budget`]).
    pub(super) memory: Option<(u64, String)>,
    pub(super) launcher: LauncherArg,
    pub(super) hostfile: Option<PathBuf>,
    pub(super) interface: Option<String>,
    pub(super) allow_root_ranks: bool,
}

impl RunConfig {
    /// Checks and resolves the options (a bad `--max-memory` fails here).
    pub(super) fn resolve(args: &RunArgs) -> Result<Self> {
        if let Some(gb) = args.max_memory
            && !(gb.is_finite() && gb >= 0.0)
        {
            anyhow::bail!("--max-memory {gb}: give the memory runs may hold in GB, 0 or more");
        }
        Ok(Self {
            limits: plan::Limits {
                max_runs: args.max_runs,
                max_workers: args.max_workers,
            },
            jobs: args.jobs,
            dry_run: args.dry_run,
            json: args.json,
            resume: args.resume,
            resume_stale: args.resume_stale,
            chunk: args.chunk,
            memory: memory_budget(args.max_memory, args.jobs),
            launcher: args.launcher,
            hostfile: args.hostfile.clone(),
            interface: args.interface.clone(),
            allow_root_ranks: args.allow_root_ranks,
        })
    }

    /// The launcher the options ask for, for `backend`.
    pub(super) fn launcher(&self, backend: Backend) -> Result<Launcher> {
        if backend == Backend::InProcess {
            if self.hostfile.is_some() || self.launcher != LauncherArg::Auto {
                anyhow::bail!(
                    "--hostfile and --launcher start MPI ranks; the in-process backend runs every worker in one process"
                );
            }
            return Ok(Launcher::InProcess);
        }
        let in_slurm = std::env::var_os("SLURM_JOB_ID").is_some();
        Ok(match (self.launcher, &self.hostfile) {
            (LauncherArg::Srun, Some(_)) => anyhow::bail!(
                "--hostfile is for mpirun; srun takes its hosts from the Slurm allocation"
            ),
            (LauncherArg::Srun, None) => Launcher::Srun,
            (_, Some(h)) => {
                let h = std::fs::canonicalize(h)
                    .with_context(|| format!("hostfile {} not found", h.display()))?;
                Launcher::Hostfile(h)
            }
            (LauncherArg::Auto, None) if in_slurm => Launcher::Srun,
            _ => Launcher::Local,
        })
    }
}
