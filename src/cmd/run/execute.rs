//! Running a plan: earlier runs kept or replaced, chunks of a job array,
//! the network shaped, runs in parallel, and the merged records.

use super::*;

/// The distinct network conditions of the runs `net` shapes.
pub(super) fn shaped_conditions<'r>(
    runs: &'r [PlannedRun],
    net: &NetContext,
) -> Vec<&'r Condition> {
    let mut out: Vec<&Condition> = Vec::new();
    for c in runs
        .iter()
        .filter(|r| net.shapes(r))
        .flat_map(|r| &r.network)
    {
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

/// What [`execute`] did.
pub(super) struct Executed {
    /// This invocation's runs merged with the earlier ones of the directory.
    pub(super) merged: Vec<RunRecord>,
    /// Of runs.csv's rows: the earlier ones kept, those replaced, and
    /// those added.
    pub(super) counts: [usize; 3],
    pub(super) ran: usize,
    pub(super) failed: usize,
    /// Runs that ended (completed or diverged).
    pub(super) finished: usize,
    pub(super) invocation: Invocation,
}

/// The runs an earlier invocation left in the directory (they stay
/// unless this one reruns their point), checked to be of this experiment
/// at this scale.
pub(super) fn previous_runs(x: Job<'_>) -> Result<Vec<RunRecord>> {
    let runs_csv = x.out.join(Entry::Runs.name());
    let parquet = x.out.join(Entry::RunsParquet.name());
    let rows_there = std::fs::symlink_metadata(&parquet).is_ok_and(|m| m.is_file());
    if !runs_csv.exists() && rows_there {
        anyhow::bail!(
            "{} holds {} rows' runs.parquet but no runs.csv, the record this run would merge \
             into: writing would replace those rows. Restore runs.csv (`git checkout` where it \
             is committed), or move runs.parquet away to start the directory afresh",
            x.out.display(),
            crate::records::frames::read_parquet(&parquet)
                .map_or_else(|_| "some".into(), |df| df.height().to_string())
        );
    }
    let previous = if runs_csv.is_file() {
        results::read_csv(&runs_csv)
            .context("the results directory holds a runs.csv this run would merge into")?
    } else {
        Vec::new()
    };
    results::check_identity(
        x.out,
        &previous,
        ResultsDir::new(x.out).recorded_scale().as_deref(),
        &x.m.name,
        x.scale,
    )?;
    Ok(previous)
}

/// This invocation's `rows` merged with the `previous` ones; a failed
/// rerun of a finished run goes to attempts.csv, said on stderr.
pub(super) fn merge(
    out: &std::path::Path,
    previous: Vec<RunRecord>,
    rows: Vec<RunRecord>,
    runs: &[PlannedRun],
) -> Result<results::Merged> {
    let merged = results::merge(previous, rows, runs);
    if merged.beside > 0 {
        crate::util::progress::note(&format!(
            "note: {} runs sit at grid points where runs.csv keeps a run of other parameters; \
             both rows stay (runs.csv is keyed by run id), and the table shows this plan's",
            merged.beside
        ));
    }
    for a in &merged.attempts {
        crate::util::progress::note(&format!(
            "  {} failed again; its earlier result stays in runs.csv (the attempt: attempts.csv, its logs: raw/attempts/)",
            a.run_id
        ));
    }
    results::record_attempts(out, &merged.attempts)?;
    Ok(merged)
}

/// `--chunk K/N`'s value: K of N, 1 <= K <= N.
pub(super) fn parse_chunk(s: &str) -> std::result::Result<(usize, usize), String> {
    let bad = || format!("`{s}`: give K/N, the K-th of N chunks (1 <= K <= N), e.g. 2/4");
    let (k, n) = s.split_once('/').ok_or_else(bad)?;
    let (k, n) = (
        k.trim().parse::<usize>().map_err(|_| bad())?,
        n.trim().parse::<usize>().map_err(|_| bad())?,
    );
    if k == 0 || k > n {
        return Err(bad());
    }
    Ok((k, n))
}

/// The K-th of N shares of `runs`: every N-th run from the K-th, so each
/// chunk gets runs of every grid point's kind.
pub(crate) fn share<T: Clone>(runs: &[T], (k, n): (usize, usize)) -> Vec<T> {
    runs.iter()
        .enumerate()
        .filter(|(i, _)| i % n == k - 1)
        .map(|(_, r)| r.clone())
        .collect()
}

/// The raw/ directories of a job array's chunks whose finished runs `out`
/// adopts with --resume: `out/chunks/*/raw`, and for a tuning directory
/// `chunks/*/tuning/raw` beside it.
pub(super) fn chunk_raws(out: &std::path::Path) -> Vec<PathBuf> {
    let tuning = out.file_name() == Some(std::ffi::OsStr::new(Entry::TuningDir.name()));
    let (top, below): (&std::path::Path, &[&str]) = match (tuning, out.parent()) {
        (true, Some(p)) => (p, &[Entry::TuningDir.name(), Entry::Raw.name()]),
        _ => (out, &[Entry::Raw.name()]),
    };
    let Ok(entries) = std::fs::read_dir(top.join(Entry::Chunks.name())) else {
        return Vec::new();
    };
    let mut raws: Vec<PathBuf> = entries
        .flatten()
        .map(|e| below.iter().fold(e.path(), |p, b| p.join(b)))
        .filter(|p| p.is_dir())
        .collect();
    raws.sort();
    raws
}

/// Runs `runs` into `out` (runs.csv, runs.parquet and their logs in
/// raw/), merging with the runs an earlier invocation left there.
/// `phase` names them in messages ("tuning"; "" for the grid).
pub(super) fn execute(
    x: Job<'_>,
    runs: &[PlannedRun],
    launcher: Launcher,
    phase: &str,
) -> Result<Executed> {
    let previous = previous_runs(x)?;
    let net = prepare_network(x.cfg, x.m, x.backend, runs, launcher)?;
    crate::util::atomic::create_dir_all(&x.out.join(Entry::Raw.name()))?;
    crate::util::progress::note(&format!(
        "{}{}: {} runs at scale `{}` -> {}",
        x.m.name,
        if phase.is_empty() {
            String::new()
        } else {
            format!(" ({phase})")
        },
        runs.len(),
        x.scale,
        x.out.display()
    ));
    let session = Session {
        cfg: x.cfg,
        backend: x.backend,
        experiment: &x.m.name,
        scale: x.scale,
        invocation: freshness::invocation(x.m, x.scale, x.backend),
        out: x.out,
        net: &net,
        progress: Progress::new(runs.len()),
        done: std::sync::atomic::AtomicUsize::new(0),
        total: runs.len(),
        refused: refusals(x.cfg, runs)?,
        previous: &previous,
    };
    let rows = in_parallel(runs, jobs(x.cfg.jobs, x.backend, runs, &net), &|r| {
        session.execute(r)
    });
    session.progress.finish();
    // this invocation's outcome is its own runs'; the files hold them merged
    // with the earlier runs at other grid points
    // a run refused for memory did not run either: the exit code says so
    let failed = rows
        .iter()
        .filter(|r| matches!(r.status(), Some(RunStatus::Failed | RunStatus::Refused)))
        .count();
    let finished = rows
        .iter()
        .filter(|r| !matches!(r.status(), Some(RunStatus::Failed | RunStatus::NotRun)))
        .count();
    let ran = rows.len();
    let invocation = session.invocation;
    let results::Merged {
        rows: merged,
        kept,
        replaced,
        added,
        ..
    } = merge(x.out, previous, rows, runs)?;
    if !phase.is_empty() {
        // tuning runs are judged as the grid's are
        frames::write_runs(x.out, &results::judged(merged.clone(), runs, &x.m.health))?;
    }
    Ok(Executed {
        merged,
        counts: [kept, replaced, added],
        ran,
        failed,
        finished,
        invocation,
    })
}

/// The network context of a run of `m` whose commands go to `exec`.
pub(super) fn net_context(
    cfg: &RunConfig,
    m: &manifest::Manifest,
    launcher: Launcher,
    exec: Box<dyn crate::launch::net::Exec>,
) -> NetContext {
    NetContext {
        mode: m.shaping,
        host: HostNet::assumed(),
        exec,
        launcher,
        interface: cfg.interface.clone(),
    }
}

/// The real network context: with MPI ranks to shape, the shaping method
/// checked against the options, and this host probed (never assumed) for
/// every condition's qdiscs and congestion control.
pub(super) fn prepare_network(
    cfg: &RunConfig,
    m: &manifest::Manifest,
    backend: Backend,
    runs: &[PlannedRun],
    launcher: Launcher,
) -> Result<NetContext> {
    let mut net = net_context(cfg, m, launcher, Box::new(crate::launch::net::System));
    let shaped = backend == Backend::Mpi
        && m.shaping != ShapingMode::None
        && runs.iter().any(|r| r.network.is_some());
    if !shaped {
        return Ok(net);
    }
    check_congestion(backend, runs, &net, false)?;
    match net.method()? {
        Method::Hosts if cfg.jobs > 1 => anyhow::bail!(
            "--jobs {}: hosts shaping sets each node's interface for one run at a time (two runs \
             would shape, save and restore the same interfaces); pass --jobs 1",
            cfg.jobs
        ),
        Method::Netns => {
            if !crate::util::process::is_root() {
                return Err(crate::launch::net::NetError::NotRoot.into());
            }
            // what killed drivers left (never a live run's network)
            let gone = crate::launch::net::reclaim(&*net.exec)
                .context("could not remove the networks a killed run left")?;
            if !gone.is_empty() {
                crate::util::progress::note(&format!(
                    "note: removed {} namespaces and links whose run is gone",
                    gone.len()
                ));
            }
            // probe, don't assume: every condition's qdiscs and congestion
            // control are tried in a throwaway namespace before the first run
            let conditions = shaped_conditions(runs, &net);
            net.host = crate::launch::net::probe::preflight(&*net.exec, &conditions)
                .context("this host cannot shape the experiment's network conditions")?;
            if !net.host.netem && conditions.iter().any(|c| c.latency_s > 0.0) {
                eprintln!(
                    "note: this kernel has no netem; latency is injected per message by the transport (recorded in each run's shaping.json)"
                );
            }
        }
        _ => {}
    }
    Ok(net)
}

/// Maps `f` over `runs` on `jobs` threads (in order; one thread for 1).
pub(super) fn in_parallel(
    runs: &[PlannedRun],
    jobs: usize,
    f: &(dyn Fn(&PlannedRun) -> RunRecord + Sync),
) -> Vec<RunRecord> {
    let jobs = jobs.clamp(1, runs.len().max(1));
    if jobs == 1 {
        return runs.iter().map(f).collect();
    }
    let chunk = runs.len().div_ceil(jobs);
    std::thread::scope(|s| {
        let handles: Vec<_> = runs
            .chunks(chunk)
            .map(|part| s.spawn(move || part.iter().map(f).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}
