//! Whether recorded runs are current: produced by this build (the same
//! source, see `repro_build`) from the same resolved manifest, the one rule
//! of staleness. `repro status` lists each planned run as current, stale
//! or missing; `repro run --resume` keeps only current runs; each `repro
//! run` writes how many are current into provenance.json.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use repro_runlog::Invocation;

use crate::experiment::manifest::{self, Backend};
use crate::experiment::plan::PlannedRun;
use crate::launch::summary::RunStatus;
use crate::records::metrics::Cell;
use crate::records::results::RunRecord;
use crate::records::results_dir::{BuildStamp, Provenance, ResultsDir};

/// A planned run's state in the results directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Freshness {
    /// Recorded by this build from this manifest.
    Current,
    /// Recorded, by another build or from another manifest (why).
    Stale(String),
    /// Not recorded, failed or interrupted (why).
    Missing(String),
}

impl Freshness {
    pub(crate) fn word(&self) -> &'static str {
        match self {
            Freshness::Current => "current",
            Freshness::Stale(_) => "stale",
            Freshness::Missing(_) => "missing",
        }
    }
}

impl Freshness {
    /// Why a run is stale or missing (empty when current).
    pub(crate) fn reason(&self) -> &str {
        match self {
            Freshness::Current => "",
            Freshness::Stale(why) | Freshness::Missing(why) => why,
        }
    }
}

impl std::fmt::Display for Freshness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Freshness::Current => write!(f, "current"),
            Freshness::Stale(why) => write!(f, "stale: {why}"),
            Freshness::Missing(why) => write!(f, "missing: {why}"),
        }
    }
}

/// This invocation as a run's provenance records it: the command line
/// (arguments quoted where a shell would need it) and the resolved
/// manifest's hash at `scale` for `backend`.
pub(crate) fn invocation(m: &manifest::Manifest, scale: &str, backend: Backend) -> Invocation {
    let quote = |a: String| {
        let plain = !a.is_empty()
            && a.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_=./:,@+[]".contains(c));
        if plain {
            a
        } else {
            format!("'{}'", a.replace('\'', "'\\''"))
        }
    };
    Invocation {
        command: std::env::args().map(quote).collect::<Vec<_>>().join(" "),
        manifest_hash: m.hash(scale, backend),
    }
}

/// The first 12 characters of a source id or hash, for messages.
fn short(id: &str) -> String {
    match id.split_once('+') {
        Some((commit, dirty)) => format!("{}+{dirty}", commit.get(..12).unwrap_or(commit)),
        None => id.get(..12).unwrap_or(id).to_string(),
    }
}

/// Whether a run produced by the build `source` from the manifest `hash`
/// is current for `now` (this build and this invocation's manifest). The
/// one rule of staleness.
pub(crate) fn judge(source: &str, hash: &str, now: &Invocation) -> Freshness {
    let build = repro_build::BUILD.source;
    if source.is_empty() {
        Freshness::Stale("recorded without provenance (before it existed)".into())
    } else if build == "unknown" || source == "unknown" {
        Freshness::Stale("the source of this build or of the run is unknown (no git)".into())
    } else if source != build {
        Freshness::Stale(format!(
            "built from {}, this build is {}",
            short(source),
            short(build)
        ))
    } else if hash != now.manifest_hash {
        Freshness::Stale(format!(
            "planned from manifest {}, now {}",
            short(hash),
            short(&now.manifest_hash)
        ))
    } else {
        Freshness::Current
    }
}

/// The state of planned run `run` given the recorded runs.
pub(crate) fn freshness(run: &PlannedRun, recorded: &[RunRecord], now: &Invocation) -> Freshness {
    let text = |r: &RunRecord, k: &str| r.metrics.get(k).map_or("", Cell::text).to_string();
    let Some(r) = recorded.iter().find(|r| r.run_id == run.id) else {
        return match recorded.iter().find(|r| r.point == run.point) {
            Some(r) => Freshness::Stale(format!(
                "recorded with another configuration (run {})",
                r.run_id
            )),
            None => Freshness::Missing("never run".into()),
        };
    };
    match r.status() {
        Some(RunStatus::Failed) => Freshness::Missing("failed".into()),
        Some(RunStatus::NotRun) => Freshness::Missing("interrupted before it finished".into()),
        Some(RunStatus::Refused) => Freshness::Missing(format!(
            "refused: it needs {:.1} GB",
            r.metrics
                .get("memory_mb")
                .and_then(Cell::number)
                .unwrap_or(f64::NAN)
                / 1e3
        )),
        _ => judge(&text(r, "source"), &text(r, "manifest_hash"), now),
    }
}

/// Counts of each state.
pub(crate) fn counts(states: &[Freshness]) -> BTreeMap<&'static str, usize> {
    let mut c = BTreeMap::from([("current", 0), ("stale", 0), ("missing", 0)]);
    for s in states {
        *c.entry(s.word()).or_default() += 1;
    }
    c
}

/// Writes `out/provenance.json`: what produced the experiment's results
/// this time (build, host, command line, resolved manifest), and how many
/// of its recorded runs are current.
pub(crate) fn write_provenance(
    out: &Path,
    (m, overrides): (&manifest::Manifest, &[String]),
    scale: &str,
    (backend, launcher): (Backend, &str),
    now: &Invocation,
    runs: &[PlannedRun],
    recorded: &[RunRecord],
) -> Result<()> {
    let states: Vec<Freshness> = runs.iter().map(|r| freshness(r, recorded, now)).collect();
    let mut sources: BTreeMap<String, usize> = BTreeMap::new();
    for r in recorded {
        let s = r.metrics.get("source").map_or("", Cell::text);
        *sources
            .entry(if s.is_empty() { "unrecorded" } else { s }.to_string())
            .or_default() += 1;
    }
    let written = crate::util::time::now_unix_s();
    let mut libtorch: Vec<String> = recorded
        .iter()
        .filter_map(|r| r.metrics.get("libtorch").map(Cell::text))
        .filter(|t| !t.is_empty() && *t != "none")
        .map(str::to_string)
        .collect();
    libtorch.sort();
    libtorch.dedup();
    ResultsDir::new(out).write_provenance(&Provenance {
        experiment: m.name.clone(),
        scale: scale.to_string(),
        backend: Some(backend),
        manifest_hash: now.manifest_hash.clone(),
        command: now.command.clone(),
        overrides: overrides.to_vec(),
        build: BuildStamp::this(),
        judged_by: None,
        host: repro_runlog::host_name(),
        launcher: launcher.to_string(),
        written_unix_s: written,
        planned_runs: counts(&states)
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        recorded_runs_by_source: sources,
        machine: crate::records::results_dir::Machine::this(libtorch),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Invocation {
        Invocation {
            command: "repro run x".into(),
            manifest_hash: "m1".into(),
        }
    }

    #[test]
    fn a_run_is_current_only_from_this_build_and_manifest() {
        let here = repro_build::BUILD.source;
        let now = now();
        if here == "unknown" {
            // no git: nothing can be shown current
            assert!(matches!(judge(here, "m1", &now), Freshness::Stale(_)));
            return;
        }
        assert_eq!(judge(here, "m1", &now), Freshness::Current);
        let older = judge("0123456789abcdef0123", "m1", &now);
        assert!(
            matches!(&older, Freshness::Stale(why) if why.contains("built from 0123456789ab")),
            "{older}"
        );
        let other = judge(here, "m0", &now);
        assert!(
            matches!(&other, Freshness::Stale(why) if why.contains("manifest")),
            "{other}"
        );
        assert!(matches!(judge("", "m1", &now), Freshness::Stale(_)));
        // the same commit with other changes is another source
        let dirty = format!("{}+dirty.00000000", here.split('+').next().unwrap());
        if dirty != here {
            assert!(matches!(judge(&dirty, "m1", &now), Freshness::Stale(_)));
        }
    }
}
