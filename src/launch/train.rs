//! Runs a planned trainer run, then summarizes the ranks' logs: the `mpi`
//! backend (`repro-train` ranks under mpirun or srun) and the `in-process`
//! backend (one `repro-train --in-process N`, its workers as threads on a
//! virtual clock). Both share the launch plan (`prepare`). Commands are argument vectors, never shell strings; the
//! job runs in its own process group, which is terminated (TERM, then KILL)
//! when it outlives its timeout, so mpirun's daemons and ranks go too.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use repro_runlog::{Invocation, TrainConfig, read_log};

use serde::{Deserialize, Serialize};

use crate::experiment::condition::{Condition, ShapingMode};
use crate::experiment::manifest::Backend;
use crate::experiment::plan::{Params, PlannedRun};
use crate::launch::net::{Exec, Fabric, HostNet, HostShaping, NetError, QdiscStats};
use crate::launch::summary::{RunStatus, Summary};

mod process;
mod summary;
mod timing;
mod trainer;
use process::*;
pub(crate) use summary::*;
pub(crate) use timing::*;
pub(crate) use trainer::*;

/// Ranks a run launches (`workers: 0` in a config means 8, the paper's).
pub(crate) fn workers(cfg: &TrainConfig) -> usize {
    if cfg.workers == 0 { 8 } else { cfg.workers }
}

/// How the network conditions of MPI runs are applied.
pub(crate) struct NetContext {
    pub mode: ShapingMode,
    /// What the kernel that shapes can do (netem, IPv6, its TCP sysctls),
    /// probed before the first run.
    pub host: HostNet,
    pub exec: Box<dyn Exec>,
    /// How ranks (and, in `hosts` mode, the per-node tc) are started.
    pub launcher: Launcher,
    /// The nodes' interface for `hosts` shaping.
    pub interface: Option<String>,
}

/// How the ranks of a run are started.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) enum Launcher {
    /// mpirun on this host, ranks oversubscribing its cores (the default).
    #[default]
    Local,
    /// mpirun across the hosts of a hostfile (a cluster or a multi-GPU box).
    Hostfile(PathBuf),
    /// srun inside a Slurm allocation.
    Srun,
    /// No MPI: every worker a thread of one `repro-train --in-process`,
    /// the network condition modelled by its virtual clock.
    InProcess,
}

impl Launcher {
    /// How the ranks start, in words, for provenance.json: the launcher,
    /// srun's MPI plugin, and the Slurm job it ran in (`SLURM_JOB_ID`).
    pub(crate) fn describe(&self) -> String {
        let mut words = match self {
            Launcher::Local => "mpirun".to_string(),
            Launcher::Hostfile(h) => format!("mpirun --hostfile {}", h.display()),
            Launcher::Srun => format!("srun --mpi={}", srun_mpi()),
            Launcher::InProcess => return "in-process (threads, no MPI)".into(),
        };
        if let Ok(job) = std::env::var("SLURM_JOB_ID") {
            words.push_str(&format!(" in Slurm job {job}"));
        }
        words
    }

    /// Whether the ranks start on this host.
    pub(crate) fn is_local(&self) -> bool {
        matches!(self, Launcher::Local | Launcher::InProcess)
    }
}

impl Launcher {
    /// A prefix that starts one copy of a command on every node (`hosts`
    /// shaping); `None` for a local launch.
    pub(crate) fn per_host(&self) -> Option<Vec<String>> {
        let mut argv: Vec<String> = match self {
            Launcher::Local | Launcher::InProcess => return None,
            Launcher::Hostfile(h) => vec![
                "mpirun".into(),
                "--hostfile".into(),
                h.display().to_string(),
                "--map-by".into(),
                "ppr:1:node".into(),
            ],
            Launcher::Srun => vec!["srun".into(), "--ntasks-per-node=1".into()],
        };
        if matches!(self, Launcher::Hostfile(_)) && crate::util::process::is_root() {
            argv.push("--allow-run-as-root".into());
        }
        if matches!(self, Launcher::Srun) {
            argv.push("--kill-on-bad-exit=1".into());
        }
        Some(argv)
    }
}

/// Where a run's network condition is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Method {
    /// Namespaces and veths on this host.
    Netns,
    /// netem on every node's interface.
    Hosts,
}

impl std::fmt::Debug for NetContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetContext")
            .field("mode", &self.mode)
            .field("host", &self.host)
            .field("launcher", &self.launcher)
            .field("interface", &self.interface)
            .finish()
    }
}

impl NetContext {
    /// Whether `run` gets a shaped network of namespaces.
    pub(crate) fn shapes(&self, run: &PlannedRun) -> bool {
        run.network.is_some() && self.mode != ShapingMode::None && !self.is_virtual()
    }

    /// Whether networks are modelled by the in-process virtual clock
    /// instead of shaped.
    pub(crate) fn is_virtual(&self) -> bool {
        self.launcher == Launcher::InProcess
    }

    /// Whether `run`'s timing is bounded by its network condition: shaped,
    /// or modelled by the virtual clock.
    fn conditioned(&self, run: &PlannedRun) -> bool {
        self.shapes(run) || (self.is_virtual() && run.network.is_some())
    }

    /// How shaped runs are shaped with this launcher: namespaces for a
    /// local launch, every node's interface for a cluster launch.
    pub(crate) fn method(&self) -> Result<Method, NetError> {
        let local = self.launcher == Launcher::Local;
        match (self.mode, local) {
            (ShapingMode::Auto | ShapingMode::Netns, true) => Ok(Method::Netns),
            (ShapingMode::Auto | ShapingMode::Hosts, false) => {
                if self.interface.is_none() {
                    return Err(NetError::NoInterface);
                }
                Ok(Method::Hosts)
            }
            (ShapingMode::Netns, false) => Err(NetError::ShapingLauncher {
                mode: "netns".into(),
            }),
            (ShapingMode::Hosts, true) => Err(NetError::ShapingLauncher {
                mode: "hosts".into(),
            }),
            // never asked: shapes() is false
            (ShapingMode::None, _) => Ok(Method::Netns),
        }
    }

    /// The per-node shaping of `condition` (hosts mode).
    pub(crate) fn host_shaping(&self, condition: &Condition) -> Result<HostShaping<'_>, NetError> {
        let per_host = self.launcher.per_host().ok_or(NetError::ShapingLauncher {
            mode: "hosts".into(),
        })?;
        let interface = self.interface.as_deref().ok_or(NetError::NoInterface)?;
        let repro = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("repro"));
        HostShaping::new(&*self.exec, per_host, repro, interface, condition.clone())
    }
}

/// The launch of one run: mpirun's argument vector and extra environment.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Launch {
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
}

impl Launch {
    /// The command as one line, environment first (for --dry-run and logs).
    pub(crate) fn display(&self) -> String {
        self.env
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .chain(self.argv.iter().cloned())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The user a root driver runs its ranks as: the one `sudo` names in
/// `SUDO_UID` and `SUDO_GID`. Network setup (namespaces, `tc`, entering a
/// rank's namespace) and mpirun itself stay root; each rank drops to this
/// user through `setpriv` before the trainer starts. Without `SUDO_UID`
/// (root logged in as root) the ranks run as root, and the driver says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RankUser {
    pub uid: u32,
    pub gid: u32,
}

impl RankUser {
    /// The ranks' user for `launcher`: `None` unless the driver is root,
    /// `SUDO_UID` names another user and the ranks start on this host
    /// (mpirun without a hostfile, or in-process).
    pub(crate) fn for_launcher(launcher: &Launcher) -> Option<Self> {
        if !launcher.is_local() {
            return None;
        }
        crate::util::sudo::invoker().map(|who| Self {
            uid: who.uid,
            gid: who.gid,
        })
    }

    /// What runs a rank's command as this user: no supplementary groups,
    /// and SIGTERM when its parent dies (a change of user clears the
    /// parent-death signal the driver set, so it is set again here).
    pub(crate) fn argv(&self) -> Vec<String> {
        vec![
            "setpriv".into(),
            format!("--reuid={}", self.uid),
            format!("--regid={}", self.gid),
            "--clear-groups".into(),
            "--pdeathsig=TERM".into(),
            "--".into(),
        ]
    }
}

/// The command that starts `workers` ranks under `launcher` (mpirun or
/// srun; empty for the in-process launcher, which starts no ranks).
fn mpirun_argv(launcher: &Launcher, workers: usize) -> Vec<String> {
    let mut argv: Vec<String> = match launcher {
        Launcher::InProcess => return Vec::new(),
        Launcher::Local => vec![
            "mpirun".into(),
            "-np".into(),
            workers.to_string(),
            "--oversubscribe".into(),
        ],
        // one rank per slot of the hostfile; the trainer finds libtorch
        // through the environment exported to every node
        Launcher::Hostfile(h) => vec![
            "mpirun".into(),
            "-np".into(),
            workers.to_string(),
            "--hostfile".into(),
            h.display().to_string(),
            "-x".into(),
            "LD_LIBRARY_PATH".into(),
            "-x".into(),
            "PATH".into(),
        ],
        Launcher::Srun => vec![
            "srun".into(),
            format!("--ntasks={workers}"),
            "--kill-on-bad-exit=1".into(),
            format!("--mpi={}", srun_mpi()),
        ],
    };
    if launcher != &Launcher::Srun && crate::util::process::is_root() {
        argv.push("--allow-run-as-root".into());
    }
    argv
}

/// The MPI plugin srun starts the ranks with: `$REPRO_SRUN_MPI`, else
/// `pmix` (what OpenMPI 4 and 5 use to wire up ranks srun starts; a site
/// whose OpenMPI wants another names it, e.g. `pmi2`).
pub(crate) fn srun_mpi() -> String {
    std::env::var("REPRO_SRUN_MPI")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "pmix".into())
}

/// mpirun for `workers` ranks of `train` with `config`, inside `fabric`'s
/// namespaces when there is one (each rank enters its namespace through
/// `repro net exec`), each rank as `user` when there is one.
#[allow(clippy::too_many_arguments)]
pub(crate) fn launch(
    workers: usize,
    train: &Path,
    config: &Path,
    log_dir: &Path,
    fabric: Option<&Fabric<'_>>,
    repro: &Path,
    launcher: &Launcher,
    user: Option<RankUser>,
) -> Launch {
    let as_user = user.map(|u| u.argv()).unwrap_or_default();
    let mut argv: Vec<String> = match launcher {
        Launcher::InProcess => {
            return Launch {
                argv: as_user
                    .into_iter()
                    .chain([
                        train.display().to_string(),
                        "--in-process".into(),
                        workers.to_string(),
                        "--config".into(),
                        config.display().to_string(),
                        "--log-dir".into(),
                        log_dir.display().to_string(),
                    ])
                    .collect(),
                env: Vec::new(),
            };
        }
        _ => mpirun_argv(launcher, workers),
    };
    let mut env = Vec::new();
    if let Some(f) = fabric {
        // mpirun in the hub namespace, each rank entering its own
        argv.splice(0..0, f.mpirun_prefix());
        argv.extend(f.mpirun_args());
        env.extend(f.mpirun_env());
        argv.extend([
            repro.display().to_string(),
            "net".into(),
            "exec".into(),
            "--namespace-prefix".into(),
            f.namespace_prefix(),
            "--".into(),
        ]);
    }
    argv.extend(as_user);
    argv.extend([
        train.display().to_string(),
        "--config".into(),
        config.display().to_string(),
        "--log-dir".into(),
        log_dir.display().to_string(),
    ]);
    Launch { argv, env }
}

/// What the shaped network recorded, written beside the logs as shaping.json.
#[derive(Debug, Serialize)]
struct ShapingRecord<'a> {
    condition: &'a Condition,
    method: String,
    setup: Vec<String>,
    warnings: &'a [String],
    /// The congestion control the ranks used and how it was set.
    tcp: Option<TcpRecord<'a>>,
    /// Per rank, in rank order, read after the run.
    kernel: Vec<QdiscStats>,
    counted_bytes_sent: Vec<Option<u64>>,
}

/// The TCP congestion control of a shaped run (in shaping.json).
#[derive(Debug, Serialize)]
struct TcpRecord<'a> {
    used: &'static str,
    how: &'static str,
    /// Rank 0's subnet route as the kernel showed it.
    route: &'a str,
    /// The host's sysctls at the time (its default and allowed list).
    host: Option<&'a crate::launch::net::TcpSettings>,
}

/// Runs `run` with `workers` ranks; logs go to `dir/rank-<r>.jsonl`.
/// `progress` hears the iterations rank 0 has logged, about once a second.
/// A trainer run made ready to start: its final config, its network set up
/// through `net.exec` (the system, or `--dry-run`'s recorder) and the
/// command that starts it. A real run and `--dry-run` both build it here;
/// dropping it takes the network down.
pub(crate) struct Prepared<'n> {
    pub cfg: TrainConfig,
    /// How the network was shaped, in words.
    pub shaping: String,
    pub fabric: Option<Fabric<'n>>,
    pub hosts: Option<HostShaping<'n>>,
    pub launch: Launch,
    /// Who the ranks run as, when not the driver's user.
    pub user: Option<RankUser>,
}

impl std::fmt::Debug for Prepared<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("cfg", &self.cfg)
            .field("shaping", &self.shaping)
            .field("launch", &self.launch.display())
            .finish_non_exhaustive()
    }
}

/// Sets up `run`'s network and builds its launch (`train`: the trainer,
/// `repro`: this program, through which ranks enter their namespaces).
pub(crate) fn prepare<'n>(
    run: &PlannedRun,
    dir: &Path,
    net: &'n NetContext,
    invocation: &Invocation,
    train: &Path,
    repro: &Path,
) -> Result<Prepared<'n>> {
    let Params::Train(cfg) = &run.params else {
        bail!("run {} is not a trainer run", run.id);
    };
    let workers = workers(cfg);
    let mut cfg = TrainConfig {
        workers,
        invocation: Some(invocation.clone()),
        ..cfg.clone()
    };
    let mut fabric = None;
    let mut hosts = None;
    let mut shaping = "none".to_string();
    if let Some(condition) = &run.network {
        if net.is_virtual() {
            cfg.virtual_bandwidth_bps = condition.bandwidth_bps.unwrap_or(0.0);
            cfg.latency_ms = condition.latency_s * 1e3;
            shaping = format!("virtual clock (in-process): {}", condition.label);
        } else if net.shapes(run) && net.method()? == Method::Hosts {
            let mut h = net.host_shaping(condition)?;
            h.probe()
                .context("could not ask the nodes whether they have netem")?;
            h.up().context("could not shape the nodes' interfaces")?;
            if let Some(l) = h.injected_latency_s() {
                cfg.latency_ms = l * 1e3;
            }
            shaping = h.describe();
            hosts = Some(h);
        } else if net.shapes(run) {
            let mut f = Fabric::new(&*net.exec, &run.id, workers, condition.clone(), &net.host)?;
            f.up().context("could not build the shaped network")?;
            if let Some(l) = f.injected_latency_s() {
                cfg.latency_ms = l * 1e3;
            }
            shaping = f.describe();
            fabric = Some(f);
        } else {
            shaping = format!(
                "none (condition {} not applied: shaping: none)",
                condition.label
            );
        }
    }
    let user = RankUser::for_launcher(&net.launcher);
    let launch = launch(
        workers,
        train,
        &dir.join("run.json"),
        dir,
        fabric.as_ref(),
        repro,
        &net.launcher,
        user,
    );
    Ok(Prepared {
        cfg,
        shaping,
        fabric,
        hosts,
        launch,
        user,
    })
}

/// Runs `run` as one MPI (or in-process) job, its logs in `dir`.
///
/// The job runs in a clean working directory beside `dir`
/// ([`crate::util::atomic::working_dir`]): an earlier attempt's rank logs are
/// never read as this one's. When the job ends (failed included) that
/// directory replaces `dir`; when Ctrl-C / SIGTERM stopped it, or the
/// driver was killed, `dir` keeps the earlier run's logs.
pub(crate) fn execute(
    run: &PlannedRun,
    dir: &Path,
    net: &NetContext,
    invocation: &Invocation,
    progress: &mut dyn FnMut(u64),
) -> Result<Summary> {
    if net.shapes(run) && net.method()? == Method::Netns && !crate::util::process::is_root() {
        return Err(NetError::NotRoot.into());
    }
    let work = crate::util::atomic::working_dir(dir);
    if work.exists() {
        crate::util::sudo::as_invoker(|| std::fs::remove_dir_all(&work))
            .with_context(|| format!("could not clear {} for a fresh run", work.display()))?;
    }
    crate::util::atomic::create_dir_all(&work)?;
    let ran = execute_in(run, &work, net, invocation, progress);
    if ran.is_err() && crate::util::signals::interrupted() {
        let _ = crate::util::sudo::as_invoker(|| std::fs::remove_dir_all(&work));
    } else if ran.is_err() && dir.exists() && resume(run, dir, net).is_some() {
        // a failure never replaces a finished run's logs: they stay, and
        // this attempt's go beside them
        let raw = dir.parent().unwrap_or(dir);
        let aside = crate::util::atomic::attempt_path(raw, &run.id, "");
        if let Some(parent) = aside.parent() {
            crate::util::atomic::create_dir_all(parent)?;
        }
        crate::util::sudo::as_invoker(|| std::fs::rename(&work, &aside))
            .with_context(|| format!("could not move {} to {}", work.display(), aside.display()))?;
    } else {
        crate::util::atomic::replace_dir(&work, dir)?;
    }
    ran
}

/// [`execute`] in the working directory `dir`.
fn execute_in(
    run: &PlannedRun,
    dir: &Path,
    net: &NetContext,
    invocation: &Invocation,
    progress: &mut dyn FnMut(u64),
) -> Result<Summary> {
    let train = train_binary()?;
    let repro = std::env::current_exe().context("could not locate the repro executable")?;
    let fabric_used = net.shapes(run);
    let Prepared {
        cfg,
        shaping,
        fabric,
        hosts,
        launch,
        user,
    } = prepare(run, dir, net, invocation, &train, &repro)?;
    let workers = cfg.workers;
    let config = dir.join("run.json");
    crate::util::atomic::write(&config, serde_json::to_string_pretty(&cfg)?)?;
    if let Some(u) = user {
        // the ranks write their logs here
        std::os::unix::fs::chown(dir, Some(u.uid), Some(u.gid))
            .with_context(|| format!("could not hand {} to uid {}", dir.display(), u.uid))?;
    }
    crate::util::atomic::write(&dir.join("launch.txt"), launch.display() + "\n")?;
    // mpirun's and the ranks' stderr go to a file: a pipe nobody reads while
    // we wait could fill up and stall the job
    let stderr_path = dir.join("mpirun.stderr");
    let mut child = spawn(&launch, &stderr_path)?;
    let spawned = Instant::now();
    let status = wait(&mut child, run, cfg.timeout_s, dir, progress)?;
    let wall_s = spawned.elapsed().as_secs_f64();
    crate::util::atomic::write(&dir.join("job.json"), format!("{{\"wall_s\": {wall_s}}}\n"))?;
    let kernel = match &fabric {
        Some(f) => f
            .counters()
            .context("could not read the kernel's byte counters")?,
        None => Vec::new(),
    };
    let failed = |e: Option<anyhow::Error>| {
        let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        let detail = e.map(|e| format!("\n{e:#}")).unwrap_or_default();
        anyhow::anyhow!(
            "{} exited with {status}: {}{detail}",
            launch.argv[0],
            stderr.trim()
        )
    };
    let logs = rank_logs(dir, workers, status.success(), failed)?;
    record_shaping(
        dir,
        run,
        net,
        &shaping,
        fabric.as_ref(),
        hosts.as_ref(),
        &kernel,
        &logs,
    )?;
    drop(fabric);
    drop(hosts);
    let shaped = fabric_used || net.conditioned(run);
    Ok(summarize(run, &logs, &kernel, shaping, shaped, wall_s))
}

/// Writes `shaping.json` beside a shaped run's logs: the condition, how it
/// was applied (the commands, TCP, warnings), and the bytes the kernel and
/// the ranks counted.
#[allow(clippy::too_many_arguments)]
fn record_shaping(
    dir: &Path,
    run: &PlannedRun,
    net: &NetContext,
    shaping: &str,
    fabric: Option<&Fabric<'_>>,
    hosts: Option<&HostShaping<'_>>,
    kernel: &[QdiscStats],
    logs: &[repro_runlog::Log],
) -> Result<()> {
    let counted: Vec<Option<u64>> = logs
        .iter()
        .map(|l| l.end.as_ref().and_then(|e| e.transport_bytes_sent))
        .collect();
    let record = |record: ShapingRecord<'_>| -> Result<()> {
        crate::util::atomic::write(
            &dir.join("shaping.json"),
            serde_json::to_string_pretty(&record)?,
        )
    };
    if let (Some(condition), Some(f)) = (&run.network, fabric) {
        record(ShapingRecord {
            condition,
            method: shaping.to_string(),
            setup: f.setup_commands()?.iter().map(|c| c.join(" ")).collect(),
            warnings: &f.warnings,
            tcp: Some(TcpRecord {
                used: condition.tcp.name(),
                how: "`congctl lock` on the subnet route of every rank's namespace, read back \
                      after setup; the host's sysctls are not changed",
                route: &f.route,
                host: net.host.tcp.as_ref(),
            }),
            kernel: kernel.to_vec(),
            counted_bytes_sent: counted.clone(),
        })?;
    }
    if let (Some(condition), Some(h)) = (&run.network, hosts) {
        record(ShapingRecord {
            condition,
            method: shaping.to_string(),
            setup: vec![h.setup_command().join(" ")],
            warnings: &[],
            tcp: None,
            kernel: Vec::new(),
            counted_bytes_sent: counted.clone(),
        })?;
    }
    Ok(())
}

/// What was stored of a shaped run (shaping.json), read back by `--resume`.
#[derive(Debug, Deserialize)]
struct StoredShaping {
    method: String,
    kernel: Vec<QdiscStats>,
}

/// `--resume`: the summary of a run that already finished in `dir` (every
/// rank's log ends completed or diverged, for this run id), from its logs
/// and shaping.json; `None` if it has to run (again).
pub(crate) fn resume(run: &PlannedRun, dir: &Path, net: &NetContext) -> Option<Summary> {
    let Params::Train(cfg) = &run.params else {
        return None;
    };
    let workers = workers(cfg);
    let logs: Vec<repro_runlog::Log> = (0..workers)
        .map(|r| {
            let text = std::fs::read_to_string(dir.join(format!("rank-{r}.jsonl"))).ok()?;
            read_log(text.as_bytes()).ok()
        })
        .collect::<Option<_>>()?;
    // completed on every rank, or diverged on one (which stopped the job)
    let finished =
        logs.iter().all(|l| l.header.run_id == run.id) && RunStatus::of_logs(&logs).finished();
    if !finished {
        return None;
    }
    let shaped = net.conditioned(run);
    let (kernel, method) = if net.shapes(run) {
        let text = std::fs::read_to_string(dir.join("shaping.json")).ok()?;
        let stored: StoredShaping = serde_json::from_str(&text).ok()?;
        (stored.kernel, stored.method)
    } else {
        let method = match &run.network {
            Some(c) if net.is_virtual() => format!("virtual clock (in-process): {}", c.label),
            _ => "none".to_string(),
        };
        (Vec::new(), method)
    };
    let job: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("job.json")).ok()?).ok()?;
    let wall_s = job.get("wall_s")?.as_f64()?;
    Some(summarize(run, &logs, &kernel, method, shaped, wall_s))
}

#[cfg(test)]
mod tests;
