//! A results directory (`results/NAME`, or a `--out` of one's own): the
//! files it holds, named once, and its `provenance.json`, typed. Every
//! writer and reader of provenance.json goes through [`Provenance`].

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

use crate::experiment::manifest::Backend;

/// The name of the provenance file in a results directory.
pub(crate) const PROVENANCE: &str = "provenance.json";

/// Every file and folder a results directory may hold, each named once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Entry {
    /// One row per recorded run.
    Runs,
    RunsParquet,
    /// The runs' curves.
    Curves,
    CurvesParquet,
    Table,
    TableCsv,
    TableTex,
    Claims,
    ClaimsCsv,
    /// Time to each of a figure's targets.
    Targets,
    Tuning,
    TuningCsv,
    /// The tuning runs: a results directory of their own.
    TuningDir,
    FigureSvg,
    FigurePng,
    /// The matplotlib script beside the figure.
    FigurePy,
    Provenance,
    /// What a combined figure was made from.
    Combined,
    /// Failed attempts, kept apart from the runs.
    Attempts,
    /// The runs' logs, one file or folder per run.
    Raw,
    /// The report's page of this directory.
    Index,
    /// The batch script `repro submit` wrote.
    SubmitScript,
    /// `repro submit --array`'s job array script.
    ChunksScript,
    /// The Slurm job `repro submit` started: its id.
    Job,
    /// A job array's chunks, each a results directory of its own
    /// (`chunks/<k>/`); `repro run --resume` adopts their finished runs.
    Chunks,
}

impl Entry {
    #[cfg(test)]
    pub(crate) const ALL: [Entry; 25] = [
        Entry::Runs,
        Entry::RunsParquet,
        Entry::Curves,
        Entry::CurvesParquet,
        Entry::Table,
        Entry::TableCsv,
        Entry::TableTex,
        Entry::Claims,
        Entry::ClaimsCsv,
        Entry::Targets,
        Entry::Tuning,
        Entry::TuningCsv,
        Entry::TuningDir,
        Entry::FigureSvg,
        Entry::FigurePng,
        Entry::FigurePy,
        Entry::Provenance,
        Entry::Combined,
        Entry::Attempts,
        Entry::Raw,
        Entry::Index,
        Entry::SubmitScript,
        Entry::ChunksScript,
        Entry::Job,
        Entry::Chunks,
    ];

    /// Its name in the directory.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Entry::Runs => "runs.csv",
            Entry::RunsParquet => "runs.parquet",
            Entry::Curves => "curves.csv",
            Entry::CurvesParquet => "curves.parquet",
            Entry::Table => "table.md",
            Entry::TableCsv => "table.csv",
            Entry::TableTex => "table.tex",
            Entry::Claims => "claims.md",
            Entry::ClaimsCsv => "claims.csv",
            Entry::Targets => "targets.md",
            Entry::Tuning => "tuning.md",
            Entry::TuningCsv => "tuning.csv",
            Entry::TuningDir => "tuning",
            Entry::FigureSvg => "figure.svg",
            Entry::FigurePng => "figure.png",
            Entry::FigurePy => "figure.py",
            Entry::Provenance => PROVENANCE,
            Entry::Combined => "combined.json",
            Entry::Attempts => "attempts.csv",
            Entry::Raw => "raw",
            Entry::Index => "index.html",
            Entry::SubmitScript => "submit.sbatch",
            Entry::ChunksScript => "chunks.sbatch",
            Entry::Job => crate::launch::slurm::JOB,
            Entry::Chunks => "chunks",
        }
    }
}

/// A results directory: where an experiment's runs.csv, tables, claims,
/// figure and provenance.json live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResultsDir {
    root: PathBuf,
}

impl ResultsDir {
    pub(crate) fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The path of `entry` in it.
    pub(crate) fn path(&self, entry: Entry) -> PathBuf {
        self.root.join(entry.name())
    }

    /// Its runs.csv: one row per recorded run.
    pub(crate) fn runs_csv(&self) -> PathBuf {
        self.path(Entry::Runs)
    }

    /// Its curves.csv: the runs' curves.
    pub(crate) fn curves_csv(&self) -> PathBuf {
        self.path(Entry::Curves)
    }

    /// Its `provenance.json`.
    pub(crate) fn provenance_path(&self) -> PathBuf {
        self.path(Entry::Provenance)
    }

    /// What its provenance.json says; None when there is none (results
    /// written before provenance was recorded, or a combined figure's).
    pub(crate) fn provenance(&self) -> Result<Option<Provenance>> {
        let path = self.provenance_path();
        let text = match crate::util::read::text(&path, crate::util::read::MAX_JSON) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => bail!("could not read {}: {e}", path.display()),
        };
        // serde's message names the line and column, never the text
        serde_json::from_str(&text).map(Some).map_err(|e| {
            anyhow::anyhow!(
                "{} is not a provenance record ({}, line {} column {}): rewrite it with \
                     `repro table` on this directory, or remove it",
                path.display(),
                match e.classify() {
                    serde_json::error::Category::Io => "unreadable",
                    serde_json::error::Category::Syntax => "not JSON",
                    serde_json::error::Category::Data => "a field of the wrong type or missing",
                    serde_json::error::Category::Eof => "cut short",
                },
                e.line(),
                e.column()
            )
        })
    }

    /// [`ResultsDir::provenance`], an unreadable file read as none: for
    /// what only shows or defaults from it.
    pub(crate) fn provenance_or_none(&self) -> Option<Provenance> {
        self.provenance().ok().flatten()
    }

    /// Writes its provenance.json (atomically).
    pub(crate) fn write_provenance(&self, p: &Provenance) -> Result<()> {
        crate::util::atomic::write(
            &self.provenance_path(),
            serde_json::to_string_pretty(p)? + "\n",
        )
    }

    /// Records that `repro table` re-judged its runs with this build's
    /// judging code: provenance.json's `judged_by`, unless this build
    /// already judged them.
    pub(crate) fn record_judged(&self) -> Result<()> {
        let Some(mut p) = self.provenance()? else {
            return Ok(());
        };
        let this = BuildStamp::this();
        let judged = p.judged_by.as_ref().unwrap_or(&p.build);
        if judged.judge == this.judge && judged.git_commit == this.git_commit {
            return Ok(());
        }
        p.judged_by = Some(this);
        self.write_provenance(&p)
    }

    /// The scale its provenance.json records, if any.
    pub(crate) fn recorded_scale(&self) -> Option<String> {
        self.provenance_or_none()
            .map(|p| p.scale)
            .filter(|s| !s.is_empty())
    }

    /// The backend its provenance.json records, if any.
    pub(crate) fn recorded_backend(&self) -> Option<Backend> {
        self.provenance_or_none().and_then(|p| p.backend)
    }
}

/// What produced an experiment's results the last time they were written:
/// the build, host, command line and resolved manifest, and how many of
/// its recorded runs are current. Fields missing from an older file read
/// as empty.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct Provenance {
    pub experiment: String,
    pub scale: String,
    pub backend: Option<Backend>,
    pub manifest_hash: String,
    pub command: String,
    /// The manifest keys the command line overrode (`--set`), so that a
    /// reader plans the same runs.
    pub overrides: Vec<String>,
    /// The build that ran them (`repro run`).
    pub build: BuildStamp,
    /// The build that last judged and rendered them, where `repro table`
    /// re-judged them after the run (None: `build` did).
    pub judged_by: Option<BuildStamp>,
    pub host: String,
    /// How the ranks started: `mpirun`, `srun --mpi=pmix in Slurm job 7`,
    /// ... (`none` for the simulator; empty before it was recorded).
    pub launcher: String,
    /// When it was written, in seconds since 1970 (UTC).
    pub written_unix_s: i64,
    /// The plan's runs by state: current, stale, missing.
    pub planned_runs: BTreeMap<String, usize>,
    /// The recorded runs by the source id of the build that ran them.
    pub recorded_runs_by_source: BTreeMap<String, usize>,
    /// What makes the digits machine-specific. The same build on the
    /// same machine gives the same digits; elsewhere the results agree
    /// only statistically, which `repro verify` checks.
    pub machine: Machine,
}

/// The machine a results directory was written on, as far as its digits
/// depend on it: libtorch's CPU kernels and the codec's SIMD loops pick
/// their code by the processor, and threads change the order of sums.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct Machine {
    /// `/proc/cpuinfo`'s model name.
    pub cpu_model: String,
    /// The vector flags kernels choose their code by (of `CPU_FLAGS`).
    pub cpu_flags: Vec<String>,
    pub logical_cpus: usize,
    /// The codec's SIMD level (`REPRO_CODEC_SIMD` caps it).
    pub codec_simd: String,
    /// The libtorch the recorded runs loaded, from their logs.
    pub libtorch: Vec<String>,
    /// libtorch's CPU capability: `ATEN_CPU_CAPABILITY` where it is set,
    /// else the best this processor's flags allow (`avx512`, `avx2`,
    /// `default`), which libtorch chooses by the same flags.
    pub torch_cpu_capability: String,
    /// The thread variables of the environment (`unset` where not set).
    pub thread_env: BTreeMap<String, String>,
}

/// The processor flags [`Machine::cpu_flags`] records.
const CPU_FLAGS: [&str; 10] = [
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512dq",
    "avx512_vnni",
    "amx_tile",
];

/// The thread variables [`Machine::thread_env`] records.
const THREAD_ENV: [&str; 4] = [
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "RAYON_NUM_THREADS",
    "ATEN_CPU_CAPABILITY",
];

impl Machine {
    /// This machine, with the libtorch `libtorch` the runs loaded.
    pub(crate) fn this(libtorch: Vec<String>) -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        Self::of(&cpuinfo, libtorch, &|k| std::env::var(k).ok())
    }

    /// [`Machine::this`] from a `/proc/cpuinfo` text and an environment.
    fn of(cpuinfo: &str, libtorch: Vec<String>, env: &dyn Fn(&str) -> Option<String>) -> Self {
        let field = |name: &str| {
            cpuinfo.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == name).then(|| v.trim().to_string())
            })
        };
        let flags: Vec<String> = field("flags")
            .unwrap_or_default()
            .split_whitespace()
            .filter(|f| CPU_FLAGS.contains(f))
            .map(str::to_string)
            .collect();
        let has = |f: &str| flags.iter().any(|x| x == f);
        let capability = env("ATEN_CPU_CAPABILITY").unwrap_or_else(|| {
            if ["avx512f", "avx512bw", "avx512vl", "avx512dq"]
                .iter()
                .all(|f| has(f))
            {
                "avx512".into()
            } else if has("avx2") && has("fma") {
                "avx2".into()
            } else {
                "default".into()
            }
        });
        Self {
            cpu_model: field("model name").unwrap_or_else(|| "unknown".into()),
            cpu_flags: flags,
            logical_cpus: cpuinfo
                .lines()
                .filter(|l| l.starts_with("processor"))
                .count(),
            codec_simd: repro_codec::simd::level().name().to_string(),
            libtorch,
            torch_cpu_capability: capability,
            thread_env: THREAD_ENV
                .iter()
                .map(|k| (k.to_string(), env(k).unwrap_or_else(|| "unset".into())))
                .collect(),
        }
    }
}

/// The build that wrote a results directory (`repro_build::BUILD`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct BuildStamp {
    pub git_commit: String,
    /// None where git was not there to say.
    pub git_dirty: Option<bool>,
    pub source: String,
    /// The judge id: which judging code (health, tuning scores, claims,
    /// tables, figures) it carried (`repro_build::Build::judge`; empty
    /// before it was recorded).
    pub judge: String,
    pub rustc: String,
    pub version: String,
}

impl BuildStamp {
    /// This build's.
    pub(crate) fn this() -> Self {
        let b = repro_build::BUILD;
        Self {
            git_commit: b.commit.to_string(),
            git_dirty: b.dirty,
            source: b.source.to_string(),
            judge: b.judge.to_string(),
            rustc: b.rustc.to_string(),
            version: b.version.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> ResultsDir {
        let p =
            std::env::temp_dir().join(format!("repro-results-dir-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        ResultsDir::new(p)
    }

    fn remove(dir: &ResultsDir) {
        let _ = std::fs::remove_dir_all(dir.provenance_path().parent().unwrap());
    }

    #[test]
    fn provenance_round_trips_and_reads_the_committed_layout() {
        let dir = temp("round-trip");
        assert_eq!(dir.provenance().unwrap(), None);
        let p = Provenance {
            experiment: "theorem1".into(),
            scale: "cpu".into(),
            backend: Some(Backend::InProcess),
            manifest_hash: "318d3b9128786b4a".into(),
            command: "repro run theorem1".into(),
            overrides: vec!["grid.seed=[0]".into()],
            build: BuildStamp::this(),
            judged_by: None,
            host: "vm".into(),
            launcher: "in-process (threads, no MPI)".into(),
            written_unix_s: 1_795_799_542,
            planned_runs: BTreeMap::from([("current".into(), 120)]),
            recorded_runs_by_source: BTreeMap::from([("4133e9b9".into(), 120)]),
            machine: Machine::this(vec!["2.13.0+cu130".into()]),
        };
        dir.write_provenance(&p).unwrap();
        assert_eq!(dir.provenance().unwrap(), Some(p));
        assert_eq!(dir.recorded_scale().as_deref(), Some("cpu"));
        assert_eq!(dir.recorded_backend(), Some(Backend::InProcess));
        let text = std::fs::read_to_string(dir.provenance_path()).unwrap();
        assert!(text.contains("\"backend\": \"in-process\""), "{text}");
        // the layout every committed provenance.json has
        std::fs::write(
            dir.provenance_path(),
            r#"{"backend": "sim", "build": {"git_commit": "2f6e28d", "git_dirty": false,
            "rustc": "rustc 1.95.0", "source": "4133e9b9", "version": "0.1.0"},
            "command": "repro run theorem1 --scale cpu", "experiment": "theorem1", "host": "vm",
            "manifest_hash": "318d3b9128786b4a", "planned_runs": {"current": 120, "missing": 0,
            "stale": 0}, "recorded_runs_by_source": {"4133e9b9": 120}, "scale": "cpu",
            "written_unix_s": 1795799542}"#,
        )
        .unwrap();
        let read = dir.provenance().unwrap().unwrap();
        assert_eq!(read.backend, Some(Backend::Sim));
        assert_eq!(read.planned_runs["current"], 120);
        assert_eq!(read.build.git_commit, "2f6e28d");
        remove(&dir);
    }

    /// Every entry has its own name, and what the results lock may tidy
    /// (`util::atomic`, which comes before this stage) is among them.
    #[test]
    fn every_entry_is_named_once() {
        let names: Vec<&str> = Entry::ALL.iter().map(|e| e.name()).collect();
        let unique: std::collections::BTreeSet<&str> = names.iter().copied().collect();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        for n in crate::util::atomic::RESULTS_ENTRIES {
            assert!(n == ".lock" || names.contains(&n), "{n}");
        }
    }

    #[test]
    fn a_broken_provenance_is_an_error_naming_the_file() {
        let dir = temp("broken");
        std::fs::write(dir.provenance_path(), "{not json").unwrap();
        let e = format!("{:#}", dir.provenance().unwrap_err());
        assert!(
            e.contains("provenance.json is not a provenance record"),
            "{e}"
        );
        assert_eq!(dir.recorded_scale(), None);
        // an older file without some fields reads them as empty
        std::fs::write(dir.provenance_path(), r#"{"scale": "smoke"}"#).unwrap();
        let p = dir.provenance().unwrap().unwrap();
        assert_eq!((p.scale.as_str(), p.backend), ("smoke", None));
        remove(&dir);
    }

    #[test]
    fn the_machine_is_read_from_cpuinfo_and_the_environment() {
        let cpuinfo = "processor\t: 0\nmodel name\t: AMD EPYC 9654\nflags\t\t: fpu sse4_2 avx avx2 fma bmi2\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 9654\n";
        let m = Machine::of(cpuinfo, vec![], &|k| {
            (k == "OMP_NUM_THREADS").then(|| "4".to_string())
        });
        assert_eq!(m.cpu_model, "AMD EPYC 9654");
        assert_eq!(m.cpu_flags, ["sse4_2", "avx", "avx2", "fma"]);
        assert_eq!(m.logical_cpus, 2);
        assert_eq!(m.torch_cpu_capability, "avx2");
        assert_eq!(m.thread_env["OMP_NUM_THREADS"], "4");
        assert_eq!(m.thread_env["MKL_NUM_THREADS"], "unset");
        // the environment's capability wins over the flags
        let m = Machine::of(cpuinfo, vec![], &|k| {
            (k == "ATEN_CPU_CAPABILITY").then(|| "default".to_string())
        });
        assert_eq!(m.torch_cpu_capability, "default");
    }
}
