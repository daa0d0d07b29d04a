//! `repro verify`: whether a run directory reproduces the record (or
//! another results directory), cell by cell and claim by claim.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;

use crate::experiment::{manifest, project};
use crate::records::results_dir::ResultsDir;
use crate::report::recorded::{self, PlanChoice, Recorded};
use crate::report::verify::{self, Answer, Check};

/// Options of `repro verify`.
#[derive(Debug, Args)]
pub(crate) struct VerifyArgs {
    /// A run directory (`runs/quickstart/cpu/latest`), or an experiment
    /// name: its newest run at --scale.
    #[arg(default_value = project::DEFAULT_EXPERIMENT)]
    pub run: String,
    /// The results to compare with (default: the record,
    /// results/<experiment>/).
    #[arg(long, value_name = "DIR")]
    pub against: Option<PathBuf>,
    /// With an experiment name: the scale of its run (default: the
    /// record's scale).
    #[arg(long)]
    pub scale: Option<String>,
    /// Print the summary line alone.
    #[arg(long)]
    pub brief: bool,
}

/// `repro verify`: prints each experiment's cells and claims against the
/// record's (the `then` experiments too), then the summary line, and
/// returns what the evidence says (exit codes 0, 4 and 5).
pub(crate) fn verify(args: &VerifyArgs) -> Result<Answer> {
    let yours = run_dir(args)?;
    let against = match &args.against {
        Some(a) => a.clone(),
        None => {
            let p = provenance_of(&yours)?;
            project::record_dir(&p.experiment)
        }
    };
    let checks = checks(&yours, &against)?;
    if !args.brief {
        for c in &checks {
            println!("{}", crate::util::text::terminal(&c.markdown()));
        }
    }
    println!("{}", crate::util::text::terminal(&verify::summary(&checks)));
    Ok(Answer::of(&checks))
}

/// The run directory `args` names: a directory, or the newest run of an
/// experiment at a scale.
fn run_dir(args: &VerifyArgs) -> Result<PathBuf> {
    let given = Path::new(&args.run);
    if given.is_dir() {
        return Ok(given.to_path_buf());
    }
    let m = manifest::load(&manifest::locate(&args.run)?, &[])?;
    let scale = recorded::read_scale(&m, &args.scale);
    project::latest_run(&m.name, &scale).with_context(|| {
        format!(
            "no run of `{}` at scale `{scale}` under {}: run `repro run {} --scale {scale}` \
             first, or name a results directory",
            m.name,
            project::runs_dir(&m.name, &scale).display(),
            m.name
        )
    })
}

fn provenance_of(dir: &Path) -> Result<crate::records::results_dir::Provenance> {
    ResultsDir::new(dir).provenance()?.with_context(|| {
        format!(
            "{} has no provenance.json: it is not a results directory `repro run` wrote",
            dir.display()
        )
    })
}

/// One results directory read as its provenance.json says it ran.
fn read(dir: &Path) -> Result<Recorded> {
    let Some((experiment, plan)) = recorded::results_dir_plan(dir, &PlanChoice::default())? else {
        // says why: no provenance.json, or no directory
        provenance_of(dir)?;
        bail!("{} is not a results directory", dir.display());
    };
    recorded::recorded(&experiment, &Some(dir.to_path_buf()), &plan)
}

/// `yours` against `against`, and each `then` experiment that both hold.
pub(crate) fn checks(yours: &Path, against: &Path) -> Result<Vec<Check>> {
    for dir in [yours, against] {
        crate::util::atomic::check_not_written(dir, "verify it")?;
    }
    if !verify::has_results(against) {
        bail!(
            "{} holds no results to compare with (no runs.csv)",
            against.display()
        );
    }
    let (mine, theirs) = (read(yours)?, read(against)?);
    if mine.manifest.name != theirs.manifest.name || mine.scale != theirs.scale {
        bail!(
            "{} holds `{}` at scale `{}`, {} holds `{}` at scale `{}`: only runs of one \
             experiment at one scale compare",
            yours.display(),
            mine.manifest.name,
            mine.scale,
            against.display(),
            theirs.manifest.name,
            theirs.scale
        );
    }
    let mut out = vec![verify::check(&mine, &theirs, &verdicts)?];
    for name in &mine.manifest.then {
        let (y, a) = (yours.join(name), against.join(name));
        if verify::has_results(&y) && verify::has_results(&a) {
            out.push(verify::check(&read(&y)?, &read(&a)?, &verdicts)?);
        }
    }
    Ok(out)
}

/// The verdicts of a side's claims, as `repro table` would give them.
fn verdicts(r: &Recorded) -> Result<Vec<crate::report::claims::Verdict>> {
    let tuning = crate::report::tune::recorded_tuning(&r.manifest, &r.scale, r.backend, &r.out)?;
    crate::report::outputs::verdicts(&r.manifest, &r.out, &r.rows, tuning.as_ref())
}

/// After `repro run` into a run directory: the summary line against the
/// record at the same scale, where there is one; nothing otherwise.
pub(crate) fn after_run(out: &Path, name: &str, scale: &str) {
    let record = project::record_dir(name);
    if !verify::has_results(&record)
        || ResultsDir::new(&record).recorded_scale().as_deref() != Some(scale)
    {
        return;
    }
    match checks(out, &record) {
        Ok(c) => println!(
            "{} (`repro verify {}` shows every cell and claim)",
            crate::util::text::terminal(&verify::summary(&c)),
            crate::util::text::shown(&out.display().to_string())
        ),
        Err(e) => crate::util::progress::note(&format!(
            "note: could not compare with the record {}: {e:#}",
            record.display()
        )),
    }
}
