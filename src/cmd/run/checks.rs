//! `repro run`'s checks before the first run: the trainer, root and
//! ranks, inputs, congestion control, memory, and the manifest's specs.

use super::*;

/// Under sudo, ranks run as the invoking user; a launch whose ranks would
/// run as root instead is refused unless `--allow-root-ranks`.
pub(super) fn check_root_ranks(
    cfg: &RunConfig,
    backend: Backend,
    launcher: &Launcher,
) -> Result<()> {
    if matches!(backend, Backend::Mpi | Backend::InProcess)
        && let Some(who) = crate::util::sudo::invoker()
        && train_backend::RankUser::for_launcher(launcher).is_none()
        && !cfg.allow_root_ranks
    {
        anyhow::bail!(
            "under sudo, the ranks of this launch ({}) would run as root, not as uid {}: \
             run without sudo, or pass --allow-root-ranks if you mean it",
            if launcher.is_local() {
                "this host"
            } else {
                "--hostfile"
            },
            who.uid
        );
    }
    Ok(())
}

/// The data files the runs read, judged before the first run where
/// reading them is cheap (each file once): a LIBSVM file parses and holds
/// a sample per worker, CIFAR-10's batches are whole and labelled 0 to 9.
/// The runs check again as they read.
pub(super) fn check_inputs<'a>(runs: impl Iterator<Item = &'a PlannedRun>) -> Result<()> {
    let mut seen = std::collections::BTreeSet::new();
    for r in runs {
        match &r.params {
            plan::Params::Sim(p) => {
                let key = (p.data.clone(), p.workers, p.objective.clone());
                if p.data.is_some() && seen.insert(format!("{key:?}")) {
                    sim_backend::check_data(p)
                        .with_context(|| format!("run {} ({})", r.id, plan::describe(r)))?;
                }
            }
            plan::Params::Train(c) if c.dataset == "cifar10" => {
                let dir = c.data_dir.as_ref().map_or_else(
                    || {
                        crate::experiment::data::default_dir(
                            crate::experiment::data::Dataset::Cifar10,
                        )
                    },
                    PathBuf::from,
                );
                if dir.is_dir() && seen.insert(dir.display().to_string()) {
                    crate::launch::data::check_cifar(&dir)
                        .with_context(|| format!("run {} ({})", r.id, plan::describe(r)))?;
                }
            }
            plan::Params::Train(_) => {}
        }
    }
    Ok(())
}

/// Every MPI or in-process run needs the trainer: checked once, up front,
/// with a note of the user its ranks run as.
pub(super) fn check_trainer(
    backend: Backend,
    runs: &[PlannedRun],
    launcher: &Launcher,
    resume: bool,
) -> Result<()> {
    if matches!(backend, Backend::Mpi | Backend::InProcess)
        && runs
            .iter()
            .any(|r| matches!(r.params, plan::Params::Train(_)))
    {
        let user = train_backend::RankUser::for_launcher(launcher);
        train_backend::check_trainer_build(&train_backend::train_binary()?, user, resume)?;
        match user {
            Some(u) => crate::util::progress::note(&format!(
                "note: ranks run as uid {} gid {} (sudo's SUDO_UID); network setup and mpirun stay root",
                u.uid, u.gid
            )),
            None if crate::util::process::is_root() => crate::util::progress::note(&format!(
                "note: ranks run as root{}: the driver runs as root and SUDO_UID names no other user \
                 (run through sudo to have them run as you)",
                match launcher {
                    Launcher::Srun => " on every node of the allocation",
                    l if l.is_local() => "",
                    _ => " on every host of --hostfile",
                }
            )),
            None => {}
        }
    }
    Ok(())
}

/// A congestion control this kernel has not loaded fails the real run
/// before anything starts; a dry run says so too.
pub(super) fn check_congestion(
    backend: Backend,
    runs: &[PlannedRun],
    net: &NetContext,
    dry_run: bool,
) -> Result<()> {
    if backend != Backend::Mpi
        || !runs.iter().any(|r| net.shapes(r))
        || net.method()? != Method::Netns
    {
        return Ok(());
    }
    if dry_run && !crate::util::process::is_root() {
        crate::util::progress::note(
            "note: a real run of this plan needs root: its shaped networks are network namespaces \
             and tc rules (run it with sudo)",
        );
    }
    // a shaped network holds so many ranks: refused before the first run,
    // by the dry run and the real one alike
    for r in runs.iter().filter(|r| net.shapes(r)) {
        if let plan::Params::Train(c) = &r.params {
            let ranks = train_backend::workers(c);
            if ranks > crate::launch::net::MAX_SHAPED_RANKS {
                anyhow::bail!(
                    "run {} ({}): {ranks} ranks do not fit one shaped network (at most {}); \
                     shape fewer workers, or run this condition across hosts (`shaping: hosts`)",
                    r.id,
                    plan::describe(r),
                    crate::launch::net::MAX_SHAPED_RANKS
                );
            }
        }
    }
    if let Some(tcp) = crate::launch::net::TcpSettings::read() {
        tcp.check_loaded(&shaped_conditions(runs, net))?;
    }
    Ok(())
}

/// A manifest's `tuned_in`: the name of an experiment of the project
/// with a `tune:` section; what is wrong, if anything.
pub(super) fn check_tuned_in(name: &str) -> std::result::Result<(), String> {
    if !crate::experiment::manifest::plain_name(name) {
        return Err("not an experiment's name (letters, digits, - and _)".into());
    }
    let path = crate::experiment::manifest::locate(name).map_err(|e| e.to_string())?;
    let tuner = crate::experiment::manifest::load(&path, &[]).map_err(|e| e.to_string())?;
    match tuner.tune {
        Some(_) => Ok(()),
        None => Err(format!("{} has no `tune:` section", path.display())),
    }
}

/// The manifest's table and figure name metrics and grid keys that exist.
pub(super) fn check_specs(
    m: &manifest::Manifest,
    path: &std::path::Path,
    backend: Backend,
    runs: &[PlannedRun],
) -> Result<()> {
    let points: Vec<_> = runs.iter().map(|r| r.point.clone()).collect();
    if let Some(spec) = &m.tune {
        tune::check(spec, backend, &points).map_err(|(key, message)| {
            crate::experiment::errors::DriverError::Manifest {
                path: path.to_path_buf(),
                key,
                message,
            }
        })?;
    }
    if let Some(name) = &m.tuned_in
        && let Err(e) = check_tuned_in(name)
    {
        return Err(crate::experiment::errors::DriverError::Manifest {
            path: path.to_path_buf(),
            key: "tuned_in".into(),
            message: format!("`{name}`: {e}"),
        }
        .into());
    }
    // a tuned experiment's runs carry their configuration as a grid key
    let mut keys: Vec<String> = runs
        .first()
        .map(|r| r.point.keys().cloned().collect())
        .unwrap_or_default();
    if m.tune.is_some() {
        keys.push(plan::CONFIG_KEY.to_string());
    }
    // a grid key names a runs.csv column of its own, so no key may be one
    // of the measured, provenance or identity columns
    if let Some(k) = keys
        .iter()
        .find(|k| k.as_str() == "run_id" || metrics::columns().any(|c| c == k.as_str()))
    {
        return Err(crate::experiment::errors::DriverError::Manifest {
            path: path.to_path_buf(),
            key: format!("grid.{k}"),
            message: format!("`{k}` is a column runs.csv already has; a grid key must not be one"),
        }
        .into());
    }
    // the paper's numbers are read at plan time, so a bad path fails now
    table::load_paper(&m.table).map_err(|e| crate::experiment::errors::DriverError::Manifest {
        path: path.to_path_buf(),
        key: "table.paper.file".into(),
        message: format!("{e:#}"),
    })?;
    let figure = m.figure.as_ref().map(|f| plot::check_spec(f, &keys));
    table::check_spec(&m.table, &keys)
        .and(figure.unwrap_or(Ok(())))
        .and(claims::check_specs(&m.claims, &m.table, &points))
        .map_err(|(key, message)| {
            crate::experiment::errors::DriverError::Manifest {
                path: path.to_path_buf(),
                key,
                message,
            }
            .into()
        })
}

/// The memory each run may hold, bytes, and where the figure came from:
/// `--max-memory`, else the least of what the kernel has available now
/// (MemAvailable) and what this process's limits leave (RLIMIT_AS, its
/// memory cgroup), shared by `--jobs` runs at a time; `None` where none
/// is known.
pub(super) fn memory_budget(max_memory: Option<f64>, jobs: usize) -> Option<(u64, String)> {
    let jobs = jobs.max(1) as u64;
    let (bytes, what) = match max_memory {
        Some(gb) => ((gb * 1e9) as u64, format!("--max-memory {gb}")),
        None => {
            let info = std::fs::read_to_string("/proc/meminfo").ok()?;
            let kb: u64 = info
                .lines()
                .find_map(|l| l.strip_prefix("MemAvailable:"))?
                .split_whitespace()
                .next()?
                .parse()
                .ok()?;
            // the least of what the machine has and this process may take
            std::iter::once((kb * 1024, "available (MemAvailable)".to_string()))
                .chain(crate::util::process::memory_limits())
                .min_by_key(|(b, _)| *b)?
        }
    };
    let per_job = if jobs > 1 {
        format!("{what}, shared by --jobs {jobs}")
    } else {
        what
    };
    Some((bytes / jobs, per_job))
}

/// The simulator runs whose planned memory exceeds [`memory_budget`]:
/// run id -> MB it would need. Each is named before anything runs.
pub(super) fn refusals(cfg: &RunConfig, runs: &[PlannedRun]) -> Result<BTreeMap<String, f64>> {
    let mut out = BTreeMap::new();
    let Some((budget, what)) = cfg.memory.clone() else {
        return Ok(out);
    };
    for r in runs {
        let plan::Params::Sim(p) = &r.params else {
            continue;
        };
        let need = sim_backend::footprint(p)?;
        if need.total() > budget {
            crate::util::progress::note(&format!(
                "refused: {} {} would need {:.1} GB ({:.1} MB per worker: model {:.1}, state {:.1}, \
                 frames {:.1}, optimizer {:.1}; objective {:.1} MB); {:.1} GB {what}",
                r.id,
                plan::describe(r),
                need.total() as f64 / 1e9,
                need.per_worker() as f64 / 1e6,
                need.model as f64 / 1e6,
                need.state as f64 / 1e6,
                need.frames as f64 / 1e6,
                need.optimizer as f64 / 1e6,
                need.objective as f64 / 1e6,
                budget as f64 / 1e9,
            ));
            out.insert(r.id.clone(), need.total() as f64 / 1e6);
        }
    }
    Ok(out)
}

/// How many runs go at once. Shaped MPI runs go one at a time: each
/// builds a network of namespaces on one subnet, and concurrent jobs would
/// distort the times they measure. Other concurrent runs share the cores,
/// which is said.
pub(super) fn jobs(asked: usize, backend: Backend, runs: &[PlannedRun], net: &NetContext) -> usize {
    if asked <= 1 {
        return 1;
    }
    if backend == Backend::Mpi && runs.iter().any(|r| net.shapes(r)) {
        eprintln!(
            "note: --jobs {asked}: shaped MPI runs go one at a time (one subnet, and measured times)"
        );
        return 1;
    }
    eprintln!(
        "note: --jobs {asked}: concurrent runs share this machine's {} cores; their wall-clock times include that",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    asked
}
