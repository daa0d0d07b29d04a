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

/// How to build `repro` and the trainer beside it (what `bash ci/main.sh`
/// runs, after `source ~/.cache/repro/env.sh` for libtorch).
const BUILD_BOTH: &str = "cargo build --release --locked -p repro -p repro-trainer";

/// The `repro-train` binary: `$REPRO_TRAIN`, else next to this executable.
pub(crate) fn train_binary() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("REPRO_TRAIN") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().context("could not locate the repro executable")?;
    let sibling = exe.with_file_name("repro-train");
    if sibling.is_file() {
        return Ok(sibling);
    }
    bail!(
        "the trainer binary `repro-train` is not next to {} and REPRO_TRAIN is not set; \
         build it with `{BUILD_BOTH}` (it needs libtorch: source ~/.cache/repro/env.sh)",
        exe.display()
    )
}

/// Says (on stderr) when the trainer `train` was built from another source
/// than this `repro`: its runs' logs will name its build, and `repro
/// status` will call them stale.
///
/// A trainer that does not start (a loader error, a missing file) is an
/// error: every run would fail. With `resume` it is a warning, since
/// every run may be kept from earlier logs. With `user` (ranks dropped to
/// the `sudo` user), the question is asked as that user.
pub(crate) fn check_trainer_build(
    train: &Path,
    user: Option<RankUser>,
    resume: bool,
) -> Result<()> {
    let mut argv = user.map(|u| u.argv()).unwrap_or_default();
    argv.extend([train.display().to_string(), "--version".into()]);
    let asked = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .output();
    if let Some(u) = user {
        let said = match &asked {
            Ok(o) if o.status.success() => None,
            Ok(o) => Some(String::from_utf8_lossy(&o.stderr).trim().to_string()),
            Err(e) => Some(format!("could not start setpriv: {e}")),
        };
        if let Some(said) = said {
            bail!(
                "the ranks run as uid {} (SUDO_UID), who cannot run {}: {said}; build where \
                 that user can read (and see libtorch), or run without sudo's SUDO_UID \
                 (`sudo -u root` or unset it) to run the ranks as root",
                u.uid,
                train.display()
            );
        }
    }
    let failed = match asked {
        Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).trim().to_string()),
        Ok(o) => Err(first_line(&String::from_utf8_lossy(&o.stderr), o.status)),
        Err(e) => Err(e.to_string()),
    };
    let v = match failed {
        Ok(v) => v,
        Err(why) if resume => {
            eprintln!(
                "warning: the trainer {} does not start ({why}): a run --resume cannot keep \
                 will fail. {STARTS}",
                train.display()
            );
            return Ok(());
        }
        Err(why) => bail!(
            "the trainer {} does not start, so every run would fail: {why}. {STARTS}",
            train.display()
        ),
    };
    let first = v.lines().next().unwrap_or_default();
    if version_source(first) != Some(repro_build::BUILD.source) {
        eprintln!(
            "warning: {} is `{first}`, but this repro is {}: its runs will be stale; \
             rebuild both (`{BUILD_BOTH}`)",
            train.display(),
            repro_build::VERSION
        );
    }
    Ok(())
}

/// How to make a trainer that does not start start.
const STARTS: &str = "Fix: rebuild it with `bash ci/main.sh` (its build records where libtorch \
     is), or `source ~/.cache/repro/env.sh` in this shell to put libtorch on LD_LIBRARY_PATH";

/// The first line a failed `--version` wrote, else how it ended.
fn first_line(stderr: &str, status: std::process::ExitStatus) -> String {
    stderr
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map_or_else(
            || format!("`--version` ended with {status}"),
            str::to_string,
        )
}

/// The source id in a `--version` text (`repro-train 0.1.0 (source <id>,
/// commit <c>; rustc ...)`): the same id is the same code, whatever commit
/// built it.
fn version_source(version: &str) -> Option<&str> {
    let (_, rest) = version.split_once("(source ")?;
    rest.split([',', ';', ')']).next()
}

/// TERM to the process group, then KILL if any of it is still there after
/// a grace period of 3 s, polled every 50 ms: a group that is gone ends
/// the wait. (`kill(1)`, not `libc::kill`: the driver keeps its `unsafe`
/// to the blocks ARCHITECTURE.md lists.)
fn terminate_group(pgid: u32) {
    let group = format!("-{pgid}");
    let signal = |sig: &str| {
        Command::new("kill")
            .args([sig, "--", &group])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !signal("-TERM") {
        return;
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while std::time::Instant::now() < deadline {
        if !signal("-0") {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    signal("-KILL");
}

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

/// Seconds per iteration measured and the wire-time bound for it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct IterationTiming {
    /// Mean over iterations of the slowest rank's compute + communication.
    pub step_s: f64,
    /// Mean over iterations of the slowest rank's `bytes on the wire /
    /// bandwidth + latency x rounds`, where a round is a set of messages
    /// sent together (one for a gossip exchange or an all-gather, 2 (n - 1)
    /// one after the other for a ring all-reduce).
    pub bound_s: f64,
    pub iters_per_epoch: f64,
}

/// Sequential message rounds per communicating iteration of `cfg`'s
/// algorithm on `n` ranks: the ring all-reduce's 2 (n - 1) for the
/// algorithms that sum f32 frames, recursive halving and doubling's
/// `2 log2 n` (two more when n is no power of two) for `allreduce-rhd`,
/// one otherwise (every message of a gossip exchange or an all-gather
/// leaves at once).
pub(crate) fn latency_rounds(cfg: &TrainConfig, n: usize) -> u32 {
    match cfg.algorithm.as_str() {
        "allreduce" | "psgd" | "rsgd" => 2 * (n.max(1) as u32 - 1),
        "allreduce-rhd" => repro_algos::topology::halving_doubling_rounds(n),
        _ => 1,
    }
}

/// Timing of the iterations every rank logged, the first fifth (at most 5)
/// left out as warm-up. `wire_ratio` scales counted payload bytes to bytes
/// on the wire (the run's kernel/counted ratio; 1 when unknown); `rounds`
/// is [`latency_rounds`].
pub(crate) fn iteration_timing(
    logs: &[repro_runlog::Log],
    condition: Option<&Condition>,
    wire_ratio: f64,
    rounds: u32,
) -> IterationTiming {
    let mut per_iter: std::collections::BTreeMap<u64, (f64, u64, usize, f64)> =
        std::collections::BTreeMap::new();
    for l in logs {
        for s in &l.steps {
            let e = per_iter.entry(s.iteration).or_insert((0.0, 0, 0, 0.0));
            e.0 = e.0.max(s.compute_s + s.comm_s);
            e.1 = e.1.max(s.bytes_sent);
            e.2 += 1;
            e.3 = s.epoch;
        }
    }
    let complete: Vec<(u64, (f64, u64, usize, f64))> = per_iter
        .into_iter()
        .filter(|(_, v)| v.2 == logs.len())
        .collect();
    let warm = (complete.len() / 5).min(5);
    let used = &complete[warm..];
    let nan = IterationTiming {
        step_s: f64::NAN,
        bound_s: f64::NAN,
        iters_per_epoch: f64::NAN,
    };
    if used.is_empty() {
        return nan;
    }
    let ratio = if wire_ratio.is_finite() {
        wire_ratio
    } else {
        1.0
    };
    let bound = |bytes: u64| -> f64 {
        let Some(c) = condition else {
            return 0.0;
        };
        let wire = c
            .bandwidth_bps
            .map_or(0.0, |bps| bytes as f64 * ratio * 8.0 / bps);
        wire + if bytes > 0 {
            c.latency_s * f64::from(rounds)
        } else {
            0.0
        }
    };
    let n = used.len() as f64;
    let (k, epoch) = complete
        .iter()
        .rev()
        .find(|(k, v)| *k > 0 && v.3 > 0.0)
        .map_or((0, 0.0), |(k, v)| (*k, v.3));
    IterationTiming {
        step_s: used.iter().map(|(_, v)| v.0).sum::<f64>() / n,
        bound_s: used.iter().map(|(_, v)| bound(v.1)).sum::<f64>() / n,
        iters_per_epoch: if epoch > 0.0 {
            k as f64 / epoch
        } else {
            f64::NAN
        },
    }
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

/// Starts the job in its own process group, its stdout discarded and its
/// stderr (mpirun's and the ranks') into `stderr_path`.
fn spawn(launch: &Launch, stderr_path: &Path) -> Result<std::process::Child> {
    let stderr_file = crate::util::atomic::create_new(stderr_path)?;
    let mut cmd = Command::new(&launch.argv[0]);
    cmd.args(&launch.argv[1..])
        .envs(launch.env.iter().cloned())
        .stdout(Stdio::null())
        .stderr(Stdio::from(stderr_file))
        .process_group(0);
    die_with_parent(&mut cmd);
    cmd.spawn().with_context(|| {
        format!(
            "could not start `{}`; install OpenMPI (ci/setup.sh does), or Slurm's srun",
            launch.argv[0]
        )
    })
}

/// Makes `cmd`'s process get SIGTERM when the driver dies, even by
/// SIGKILL: mpirun then stops its ranks, and `repro-train --in-process`
/// stops its threads. (Linux's parent-death signal; it fires when the
/// spawning thread ends, which waits for the job.)
#[allow(unsafe_code)]
fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt as _;
    // SAFETY: between fork and exec only prctl and getppid run, both
    // async-signal-safe, touching no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // the driver died before prctl took effect: stop now
            if libc::getppid() == 1 {
                return Err(std::io::Error::other("the driver is gone"));
            }
            Ok(())
        });
    }
}

/// Waits for the job, reporting rank 0's logged steps about once a second;
/// terminates its process group on Ctrl-C / SIGTERM or past `timeout_s`.
fn wait(
    child: &mut std::process::Child,
    run: &PlannedRun,
    timeout_s: u64,
    dir: &Path,
    progress: &mut dyn FnMut(u64),
) -> Result<std::process::ExitStatus> {
    // a timeout past what the clock can hold is no timeout (it once
    // overflowed `Instant + Duration` and panicked)
    let deadline = Instant::now().checked_add(Duration::from_secs(timeout_s));
    let mut polled = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if polled.elapsed() >= Duration::from_secs(1) {
            polled = Instant::now();
            progress(crate::util::progress::logged_steps(
                &dir.join("rank-0.jsonl"),
            ));
        }
        let stop = if crate::util::signals::interrupted() {
            Some(format!(
                "run {} was interrupted and its job terminated",
                run.id
            ))
        } else if deadline.is_some_and(|d| Instant::now() > d) {
            Some(format!(
                "run {} exceeded its timeout of {timeout_s} s and was terminated",
                run.id
            ))
        } else {
            None
        };
        if let Some(why) = stop {
            terminate_group(child.id());
            let _ = child.wait();
            bail!(why);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The ranks' logs after the job. A rank that diverged records it in its
/// log and stops the job (exit 4); the others are killed wherever they
/// are, their logs possibly empty or missing. Otherwise a missing log, or
/// a job that did not succeed, is `failed(why)`.
fn rank_logs(
    dir: &Path,
    workers: usize,
    succeeded: bool,
    failed: impl Fn(Option<anyhow::Error>) -> anyhow::Error,
) -> Result<Vec<repro_runlog::Log>> {
    let logs = (0..workers)
        .map(|r| {
            let path = dir.join(format!("rank-{r}.jsonl"));
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("rank {r} left no log at {}", path.display()))?;
            read_log(text.as_bytes())
                .with_context(|| format!("rank {r}'s log {} is unreadable", path.display()))
        })
        .collect::<Vec<Result<_>>>();
    let diverged = RunStatus::of_logs(logs.iter().flatten()) == RunStatus::Diverged;
    let mut readable = Vec::new();
    for log in logs {
        match log {
            Ok(l) => readable.push(l),
            Err(_) if diverged => {}
            Err(e) => return Err(failed(Some(e))),
        }
    }
    if !succeeded && !diverged {
        return Err(failed(None));
    }
    Ok(readable)
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

/// The ranks' mean training loss over their last tenth of steps (at least
/// one step each; NaN without steps).
pub(crate) fn final_train_loss(logs: &[repro_runlog::Log]) -> f64 {
    let per_rank: Vec<f64> = logs
        .iter()
        .filter(|l| !l.steps.is_empty())
        .map(|l| {
            let k = (l.steps.len() / 10).max(1);
            let tail = &l.steps[l.steps.len() - k..];
            tail.iter().map(|s| s.train_loss).sum::<f64>() / k as f64
        })
        .collect();
    if per_rank.is_empty() {
        f64::NAN
    } else {
        per_rank.iter().sum::<f64>() / per_rank.len() as f64
    }
}

/// The share of the ranks' steps in which a gossip frame arrived (a
/// synchronous algorithm's every step; an asynchronous one's as often as
/// its exchanges complete); `None` without steps.
fn exchange_share(logs: &[repro_runlog::Log]) -> Option<f64> {
    let steps = logs.iter().flat_map(|l| &l.steps);
    let (with, all) = steps.fold((0u64, 0u64), |(w, a), s| {
        (w + u64::from(s.bytes_received > 0), a + 1)
    });
    (all > 0).then(|| with as f64 / all as f64)
}

/// The share of the coordinates the ranks recovered at their evaluations
/// that wrapped around Moniqua's modulus; `None` where none was checked.
fn wrap_rate(logs: &[repro_runlog::Log]) -> Option<f64> {
    let evals = logs.iter().flat_map(|l| &l.evals);
    let (wrapped, recovered) = evals.fold((0u64, 0u64), |(w, r), e| {
        (w + e.wrapped.unwrap_or(0), r + e.recovered.unwrap_or(0))
    });
    (recovered > 0).then(|| wrapped as f64 / recovered as f64)
}

/// The ranks' mean training loss at their first logged step.
fn first_train_loss(logs: &[repro_runlog::Log]) -> f64 {
    mean(
        logs.iter()
            .filter_map(|l| l.steps.first().map(|s| s.train_loss)),
    )
}

/// Share of step time spent communicating, over every step of every rank.
pub(crate) fn comm_fraction(logs: &[repro_runlog::Log]) -> f64 {
    let (comm, total) = logs
        .iter()
        .flat_map(|l| &l.steps)
        .fold((0.0, 0.0), |(c, t), s| {
            (c + s.comm_s, t + s.compute_s + s.comm_s)
        });
    if total > 0.0 { comm / total } else { f64::NAN }
}

/// The mean of `v`; NaN for none.
fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = v.collect();
    if v.is_empty() {
        f64::NAN
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Payload bytes each rank handed to the transport, the mean over ranks;
/// NaN unless every rank counted.
fn counted_per_worker(logs: &[repro_runlog::Log]) -> f64 {
    let counted: Vec<Option<u64>> = logs
        .iter()
        .map(|l| l.end.as_ref().and_then(|e| e.transport_bytes_sent))
        .collect();
    if counted.iter().all(Option::is_some) {
        mean(counted.iter().flatten().map(|&b| b as f64))
    } else {
        f64::NAN
    }
}

/// The run's seconds (the job's `wall_s`, or for workers in one process
/// their virtual clock: the job's own duration says how long the model
/// took to compute, not the run) and the slowest rank's clock.
fn run_seconds(logs: &[repro_runlog::Log], wall_s: f64) -> (f64, f64) {
    let virtual_s = logs
        .iter()
        .filter_map(|l| l.end.as_ref().map(|e| e.wall_s))
        .fold(0.0, f64::max);
    let in_process = logs
        .iter()
        .any(|l| l.header.provenance.backend == Backend::InProcess.name());
    (if in_process { virtual_s } else { wall_s }, virtual_s)
}

/// The summary of a run from its ranks' logs and its kernel counters:
/// how it ended and where it ran, then its evaluations, its traffic, its
/// timing and its memory.
fn summarize(
    run: &PlannedRun,
    logs: &[repro_runlog::Log],
    kernel: &[QdiscStats],
    shaping: String,
    shaped: bool,
    wall_s: f64,
) -> Summary {
    let (wall_s, virtual_s) = run_seconds(logs, wall_s);
    let mut s = Summary {
        status: RunStatus::of_logs(logs),
        provenance: logs.first().map(|l| repro_runlog::Provenance {
            device: devices(logs),
            ..l.header.provenance.clone()
        }),
        shaping,
        wall_s,
        virtual_s: repro_runlog::finite(virtual_s),
        workers: Some(logs.len()),
        theta: logs.first().and_then(|l| l.end.as_ref()?.theta),
        modulus: logs.first().and_then(|l| l.end.as_ref()?.modulus),
        ..Summary::default()
    };
    summarize_evaluations(&mut s, logs);
    summarize_traffic(&mut s, logs, kernel);
    summarize_timing(&mut s, run, logs, shaped);
    summarize_memory(&mut s, logs);
    s
}

/// The losses and accuracies: the training loss's first and last, and the
/// mean over ranks of each one's last evaluation.
fn summarize_evaluations(s: &mut Summary, logs: &[repro_runlog::Log]) {
    let some = repro_runlog::finite;
    let last = |f: fn(&repro_runlog::Eval) -> Option<f64>| {
        some(mean(logs.iter().filter_map(|l| l.evals.last().and_then(f))))
    };
    s.train_loss = some(final_train_loss(logs));
    s.first_loss = some(first_train_loss(logs));
    s.final_loss = last(|e| e.avg_test_loss);
    s.local_loss = last(|e| e.test_loss);
    s.consensus = last(|e| e.consensus_distance);
    s.max_deviation = last(|e| e.max_deviation);
    s.model_norm = last(|e| e.model_norm);
    s.test_accuracy = last(|e| e.test_accuracy);
    s.avg_test_accuracy = last(|e| e.avg_test_accuracy);
    s.val_loss = last(|e| e.val_loss);
    s.val_accuracy = last(|e| e.val_accuracy);
    s.wrap_rate = wrap_rate(logs);
}

/// The bytes: counted by the ranks, seen by the kernel's qdiscs, and the
/// frames' hashes.
fn summarize_traffic(s: &mut Summary, logs: &[repro_runlog::Log], kernel: &[QdiscStats]) {
    let some = repro_runlog::finite;
    let total = |f: fn(&repro_runlog::Step) -> u64| -> u64 {
        logs.iter().flat_map(|l| l.steps.iter().map(f)).sum()
    };
    s.bytes = total(|s| s.bytes_sent);
    s.hash_failures = total(|s| s.hash_failures);
    s.hash_verified = total(|s| s.hash_verified);
    s.exchange_share = exchange_share(logs);
    s.counted_bytes_per_worker = some(counted_per_worker(logs));
    s.gossip_bytes_per_worker =
        (!logs.is_empty()).then(|| total(|s| s.bytes_sent) as f64 / logs.len() as f64);
    s.kernel_bytes_per_worker = some(mean(kernel.iter().map(|k| k.bytes as f64)));
}

/// The time of a step and an epoch (and the wire's bound on it when
/// shaped), the communication's share and the algorithm's encode and
/// decode. Needs [`summarize_traffic`]'s bytes.
fn summarize_timing(s: &mut Summary, run: &PlannedRun, logs: &[repro_runlog::Log], shaped: bool) {
    let some = repro_runlog::finite;
    let kernel_ratio = s.kernel_bytes_per_worker.unwrap_or(f64::NAN)
        / s.counted_bytes_per_worker.unwrap_or(f64::NAN);
    let rounds = match &run.params {
        Params::Train(cfg) => latency_rounds(cfg, logs.len()),
        Params::Sim(_) => 1,
    };
    let network = run.network.as_ref().filter(|_| shaped);
    let timing = iteration_timing(logs, network, kernel_ratio, rounds);
    s.comm_fraction = some(comm_fraction(logs));
    s.epoch_time_s = some(timing.step_s * timing.iters_per_epoch);
    s.wire_bound_epoch_s = shaped
        .then(|| some(timing.bound_s * timing.iters_per_epoch))
        .flatten();
    let steps = || logs.iter().flat_map(|l| l.steps.iter());
    s.compute_step_s = some(mean(steps().map(|s| s.compute_s)));
    s.algorithm_step_s = some(mean(
        steps().filter_map(|s| s.phases.map(|p| p.encode_s + p.decode_s)),
    ));
}

/// The algorithm's extra memory (the ranks' mean) and the largest peak
/// resident set.
fn summarize_memory(s: &mut Summary, logs: &[repro_runlog::Log]) {
    let ends = || logs.iter().filter_map(|l| l.end.as_ref());
    s.extra_memory_mb = repro_runlog::finite(mean(
        ends()
            .filter_map(|e| e.extra_memory_bytes)
            .map(|b| b as f64 / 1e6),
    ));
    s.peak_rss_mb = repro_runlog::finite(
        ends()
            .filter_map(|e| e.peak_rss_bytes)
            .map(|b| b as f64 / 1e6)
            .fold(f64::NAN, f64::max),
    );
}

/// The ranks' devices, as their log headers name them: one name when all
/// are the same (`cpu`, `cuda:0`), else each rank's in rank order
/// (`cuda:0,cuda:1,cuda:0,cuda:1`).
fn devices(logs: &[repro_runlog::Log]) -> String {
    let mut names: Vec<(u32, &str)> = logs
        .iter()
        .map(|l| (l.header.rank, l.header.provenance.device.as_str()))
        .collect();
    names.sort_unstable();
    let first = names.first().map_or("", |&(_, d)| d);
    if names.iter().all(|&(_, d)| d == first) {
        first.to_string()
    } else {
        names.iter().map(|&(_, d)| d).collect::<Vec<_>>().join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(launcher: Launcher, mode: ShapingMode, interface: Option<&str>) -> NetContext {
        NetContext {
            mode,
            host: HostNet::assumed(),
            exec: Box::new(crate::launch::net::DryRun::default()),
            launcher,
            interface: interface.map(String::from),
        }
    }

    fn argv(launcher: &Launcher) -> String {
        launch(
            8,
            Path::new("/opt/repro-train"),
            Path::new("r/run.json"),
            Path::new("r"),
            None,
            Path::new("/opt/repro"),
            launcher,
            None,
        )
        .display()
        .replace(" --allow-run-as-root", "")
    }

    /// runs.csv's `device`: one name when every rank's is the same, else
    /// each rank's in rank order.
    #[test]
    fn the_ranks_devices_are_one_cell() {
        let on = |rank, device: &str| {
            let mut l = crate::records::curves::tests::log(rank, &[1.0], 0.1);
            l.header.provenance.device = device.into();
            l
        };
        assert_eq!(devices(&[on(1, "cpu"), on(0, "cpu")]), "cpu");
        assert_eq!(
            devices(&[on(1, "cuda:1"), on(0, "cuda:0"), on(2, "cuda:0")]),
            "cuda:0,cuda:1,cuda:0"
        );
    }

    #[test]
    fn a_trainer_of_the_same_code_at_another_commit_is_the_same_build() {
        let ours = format!("repro-train {}", repro_build::VERSION);
        assert_eq!(version_source(&ours), Some(repro_build::BUILD.source));
        let moved = ours.replace(repro_build::BUILD.commit, "0123456789abcdef");
        assert_eq!(version_source(&moved), Some(repro_build::BUILD.source));
        let other = "repro-train 0.1.0 (source 0123abc+dirty.ff, commit 0123abc; rustc 1.90.0)";
        assert_eq!(version_source(other), Some("0123abc+dirty.ff"));
        assert_eq!(
            version_source("repro-train 0.1.0 (0123abc; rustc 1.90.0)"),
            None
        );
    }

    #[test]
    fn ranks_drop_to_the_sudo_user_right_before_the_trainer() {
        let user = Some(RankUser {
            uid: 1000,
            gid: 1001,
        });
        let drop =
            "setpriv --reuid=1000 --regid=1001 --clear-groups --pdeathsig=TERM -- /opt/repro-train";
        for launcher in [Launcher::Local, Launcher::InProcess] {
            let l = launch(
                8,
                Path::new("/opt/repro-train"),
                Path::new("r/run.json"),
                Path::new("r"),
                None,
                Path::new("/opt/repro"),
                &launcher,
                user,
            )
            .display();
            assert!(l.contains(drop), "{l}");
            // mpirun itself stays the driver's; in-process, the job is the ranks
            assert_eq!(
                l.starts_with("setpriv"),
                launcher == Launcher::InProcess,
                "{l}"
            );
        }
    }

    /// `--dry-run` and a real run share `prepare`: with the recording
    /// executor it runs the very setup a real run runs (route read-back
    /// included), starts mpirun in the hub namespace, and dropping it
    /// records the teardown.
    #[test]
    fn dry_run_records_the_real_setup_launch_and_teardown() {
        let recorder = std::sync::Arc::new(crate::launch::net::DryRun::planning());
        let net = NetContext {
            exec: Box::new(recorder.clone()),
            ..net(Launcher::Local, ShapingMode::Auto, None)
        };
        let run = PlannedRun {
            id: "0a1b2c3d4e5f".into(),
            point: Default::default(),
            params: Params::Train(TrainConfig {
                workers: 3,
                ..TrainConfig::default()
            }),
            network: Some(
                crate::experiment::condition::Condition::from_yaml(
                    &yaml_serde::from_str("{bandwidth: 100mbit, latency: 1ms}").unwrap(),
                    None,
                )
                .unwrap()
                .unwrap(),
            ),
        };
        let (train, repro) = (Path::new("/t/repro-train"), Path::new("/t/repro"));
        let p = prepare(
            &run,
            Path::new("r"),
            &net,
            &Invocation::default(),
            train,
            repro,
        )
        .unwrap();
        let setup = recorder.take();
        assert!(
            setup.iter().any(|c| c.contains("congctl lock cubic")),
            "{setup:?}"
        );
        assert!(
            setup.iter().any(|c| c.contains("route show")),
            "read back: {setup:?}"
        );
        let line = p.launch.display();
        assert!(
            line.contains("ip netns exec rpr-0a1b2c-hub mpirun"),
            "{line}"
        );
        assert_eq!(p.cfg.workers, 3);
        drop(p);
        let teardown = recorder.take();
        assert!(
            teardown.iter().any(|c| c == "ip netns del rpr-0a1b2c-hub"),
            "{teardown:?}"
        );
    }

    #[test]
    fn each_launcher_starts_the_ranks_its_way() {
        assert_eq!(
            argv(&Launcher::Local),
            "mpirun -np 8 --oversubscribe /opt/repro-train --config r/run.json --log-dir r"
        );
        assert_eq!(
            argv(&Launcher::Hostfile("/h/hosts".into())),
            "mpirun -np 8 --hostfile /h/hosts -x LD_LIBRARY_PATH -x PATH /opt/repro-train \
             --config r/run.json --log-dir r"
        );
        assert_eq!(
            argv(&Launcher::Srun),
            "srun --ntasks=8 --kill-on-bad-exit=1 --mpi=pmix /opt/repro-train --config r/run.json --log-dir r"
        );
        assert_eq!(Launcher::Local.per_host(), None);
        assert_eq!(
            Launcher::Srun.per_host().unwrap(),
            ["srun", "--ntasks-per-node=1", "--kill-on-bad-exit=1"]
        );
    }

    #[test]
    fn a_ring_all_reduce_waits_for_a_latency_per_round() {
        let cfg = |alg: &str| TrainConfig {
            algorithm: alg.into(),
            ..TrainConfig::default()
        };
        assert_eq!(latency_rounds(&cfg("allreduce"), 8), 14);
        assert_eq!(latency_rounds(&cfg("allreduce-rhd"), 8), 6);
        assert_eq!(latency_rounds(&cfg("allreduce-rhd"), 6), 6);
        assert_eq!(latency_rounds(&cfg("allreduce-rhd"), 1), 0);
        assert_eq!(latency_rounds(&cfg("psgd"), 4), 6);
        assert_eq!(latency_rounds(&cfg("moniqua"), 8), 1);
        assert_eq!(latency_rounds(&cfg("qsgd"), 8), 1);
        assert_eq!(latency_rounds(&cfg("allreduce"), 1), 0);
    }

    #[test]
    fn shaping_follows_the_launcher() {
        let hosts = Launcher::Hostfile("/h".into());
        assert_eq!(
            net(Launcher::Local, ShapingMode::Auto, None)
                .method()
                .unwrap(),
            Method::Netns
        );
        assert_eq!(
            net(hosts.clone(), ShapingMode::Auto, Some("eth0"))
                .method()
                .unwrap(),
            Method::Hosts
        );
        assert_eq!(
            net(Launcher::Srun, ShapingMode::Hosts, Some("ib0"))
                .method()
                .unwrap(),
            Method::Hosts
        );
        // the interface is never guessed
        assert!(matches!(
            net(hosts.clone(), ShapingMode::Auto, None).method(),
            Err(NetError::NoInterface)
        ));
        // namespaces live on one host; hosts mode needs nodes
        assert!(matches!(
            net(hosts, ShapingMode::Netns, Some("eth0")).method(),
            Err(NetError::ShapingLauncher { .. })
        ));
        assert!(matches!(
            net(Launcher::Local, ShapingMode::Hosts, Some("eth0")).method(),
            Err(NetError::ShapingLauncher { .. })
        ));
    }
}
