//! What an experiment's directory shows, written from its plan's run
//! records: the table (Markdown, LaTeX, CSV), the claims' verdicts, the
//! curves and the figure.

use std::path::PathBuf;

use anyhow::Result;

use crate::experiment::manifest;
use crate::records::curves;
use crate::records::frames::{self, CurvesFrame, RunsFrame};
use crate::records::results::RunRecord;
use crate::records::results_dir::Entry;
use crate::report::plot::{self, ImageFormat};
use crate::report::{claims, table};

/// Writes the table in three formats (printing the Markdown), the claims
/// and the figure, from the plan's run records (and its tuning runs, for
/// the claims). Returns the figure's files.
pub(crate) fn write_results(
    m: &manifest::Manifest,
    out: &std::path::Path,
    (rows, tuning): (&[RunRecord], Option<&crate::report::tune::TuningRecord>),
    backend: manifest::Backend,
    print: bool,
) -> Result<Vec<PathBuf>> {
    if rows.is_empty() {
        // interrupted before any run of this plan finished: the earlier
        // table and figure stay as they were
        crate::util::progress::note(
            "no run of this plan finished: the table and figure are left as they were",
        );
        return Ok(Vec::new());
    }
    let frame = RunsFrame::new(rows)?;
    let table = write_table(m, out, &frame)?;
    if print {
        println!("{}", table.markdown());
    }
    if let Some(claims) = write_claims(m, out, rows, tuning)?
        && print
    {
        println!("{claims}");
    }
    let paths =
        figure(m, out, rows, backend, &[ImageFormat::Svg, ImageFormat::Png])?.unwrap_or_default();
    for p in &paths {
        crate::util::progress::note(&format!("figure: {}", p.display()));
    }
    Ok(paths)
}

/// Builds the manifest's table from the runs and writes it as table.md,
/// table.tex and table.csv.
pub(crate) fn write_table(
    m: &manifest::Manifest,
    out: &std::path::Path,
    frame: &RunsFrame,
) -> Result<table::Table> {
    let paper = table::load_paper(&m.table)?;
    let table = table::build_table(&m.title, &m.source, &m.table, frame, paper.as_ref())?;
    for (file, text) in [
        (Entry::Table.name(), table.markdown()),
        (Entry::TableTex.name(), table.latex()),
        (Entry::TableCsv.name(), table.csv()?),
    ] {
        crate::util::atomic::write(&out.join(file), text)?;
    }
    Ok(table)
}

/// Tests the manifest's claims on `rows` (with the `tuning` runs, judged)
/// and writes claims.md and claims.csv; the Markdown, or None when the
/// manifest makes no claims.
pub(crate) fn write_claims(
    m: &manifest::Manifest,
    out: &std::path::Path,
    rows: &[RunRecord],
    tuning: Option<&crate::report::tune::TuningRecord>,
) -> Result<Option<String>> {
    if m.claims.is_empty() {
        return Ok(None);
    }
    let verdicts = verdicts(m, out, rows, tuning)?;
    let md = claims::markdown(&m.title, &verdicts);
    crate::util::atomic::write(&out.join(Entry::Claims.name()), md.clone())?;
    crate::util::atomic::write(&out.join(Entry::ClaimsCsv.name()), claims::csv(&verdicts)?)?;
    Ok(Some(md))
}

/// The verdicts of `m`'s claims on `rows` (and `tuning`) of the results
/// directory `out`, whose logs or curves.parquet give the curves.
pub(crate) fn verdicts(
    m: &manifest::Manifest,
    out: &std::path::Path,
    rows: &[RunRecord],
    tuning: Option<&crate::report::tune::TuningRecord>,
) -> Result<Vec<claims::Verdict>> {
    claims::evaluate(
        &m.claims,
        &m.table,
        rows,
        tuning,
        &mut |metric| run_curves(out, rows, metric).map(|(c, _)| c),
        m.figure.as_ref().map_or(1, |f| f.smooth),
    )
}

/// The curves of `y` of `rows`, in their order: from the runs' logs in
/// raw/, and for a run without logs from the curves.parquet an earlier run
/// wrote (committed results keep no logs). Whether any came from logs.
pub(crate) fn run_curves(
    out: &std::path::Path,
    rows: &[RunRecord],
    y: &str,
) -> Result<(Vec<curves::RunCurve>, bool)> {
    let mut logged = curves::load_curves(&out.join(Entry::Raw.name()), rows, y)?;
    let missing: Vec<RunRecord> = rows
        .iter()
        .filter(|r| !logged.iter().any(|(l, _)| l.run_id == r.run_id))
        .cloned()
        .collect();
    let saved = out.join(Entry::CurvesParquet.name());
    let kept = if missing.is_empty() || !saved.is_file() {
        Vec::new()
    } else {
        match frames::read_curves(&saved, y, &missing) {
            Ok(kept) => kept,
            // runs that logged still make a figure
            Err(e) if !logged.is_empty() => {
                eprintln!("warning: {e:#}");
                Vec::new()
            }
            Err(e) => return Err(e),
        }
    };
    let from_logs = !logged.is_empty();
    logged.extend(kept);
    let order = |id: &str| rows.iter().position(|r| r.run_id == id);
    logged.sort_by_key(|(r, _)| order(&r.run_id));
    Ok((logged, from_logs))
}

/// The figure's panels from the runs' curves ([`run_curves`]), when the
/// manifest has a figure. When any curve came from logs, curves.csv and
/// curves.parquet are written anew; otherwise the files are left as they
/// are.
pub(crate) fn figure_panels(
    m: &manifest::Manifest,
    out: &std::path::Path,
    rows: &[RunRecord],
    backend: manifest::Backend,
) -> Result<Option<(manifest::FigureSpec, Vec<plot::Panel>)>> {
    let Some(spec) = &m.figure else {
        return Ok(None);
    };
    let panels = match spec.kind {
        manifest::FigureKind::Curves => {
            let (curves, from_logs) = run_curves(out, rows, &spec.y)?;
            if !spec.targets.is_empty() {
                let reaches = plot::reaches(spec, &curves);
                crate::util::atomic::write(
                    &out.join(Entry::Targets.name()),
                    plot::reaches_markdown(&m.title, spec, &reaches),
                )?;
                crate::util::atomic::write(&out.join("targets.csv"), plot::reaches_csv(&reaches)?)?;
            }
            let frame = CurvesFrame::new(&spec.y, &curves)?;
            if from_logs {
                curves::write_curves_csv(&out.join(Entry::Curves.name()), &spec.y, &curves)?;
                frames::write_parquet(
                    &out.join(Entry::CurvesParquet.name()),
                    frame.export()?,
                    frames::metadata(rows),
                )?;
            }
            against_each_x(spec, &|s| plot::panels(s, &frame))?
        }
        manifest::FigureKind::Sweep => plot::sweep_panels(spec, &RunsFrame::new(rows)?)?,
        manifest::FigureKind::Scaling => {
            let runs = RunsFrame::new(rows)?;
            let panels = against_each_x(spec, &|s| plot::scaling_panels(s, &runs))?;
            if panels.is_empty() {
                crate::util::progress::note(&format!(
                    "no figure: its runs have fewer than two values of `{}`",
                    spec.x
                ));
                return Ok(None);
            }
            panels
        }
    };
    // one unit per metric: an accuracy in percent, as its table shows it
    let factor = table::factor(spec.scale, &spec.y);
    let panels = panels
        .into_iter()
        .map(|p| plot::scaled(plot::on_clock_of(p, backend), factor))
        .collect();
    Ok(Some((spec.clone(), panels)))
}

/// `draw`'s panels for `spec`, then the same panels against each of
/// `also_x` (the whole x range), titled by it.
fn against_each_x(
    spec: &manifest::FigureSpec,
    draw: &dyn Fn(&manifest::FigureSpec) -> Result<Vec<plot::Panel>>,
) -> Result<Vec<plot::Panel>> {
    let mut panels = draw(spec)?;
    for x in &spec.also_x {
        let other = manifest::FigureSpec {
            x: x.clone(),
            x_range: None,
            ..spec.clone()
        };
        for mut p in draw(&other)? {
            p.title = match p.title.is_empty() {
                true => format!("against {x}"),
                false => format!("{} against {x}", p.title),
            };
            panels.push(p);
        }
    }
    Ok(panels)
}

/// Draws `panels` as `dir/figure.<ext>` in each format; the paths written.
pub(crate) fn draw_figure(
    dir: &std::path::Path,
    title: &str,
    spec: &manifest::FigureSpec,
    panels: &[plot::Panel],
    formats: &[ImageFormat],
) -> Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for format in formats {
        let path = dir.join(format!("figure.{}", format.extension()));
        plot::render(&path, *format, title, spec, panels)?;
        written.push(path);
    }
    Ok(written)
}

/// Writes curves.csv, curves.parquet and the figure in each format from the
/// runs' logs when the manifest has a figure; the paths of the figures.
pub(crate) fn figure(
    m: &manifest::Manifest,
    out: &std::path::Path,
    rows: &[RunRecord],
    backend: manifest::Backend,
    formats: &[ImageFormat],
) -> Result<Option<Vec<PathBuf>>> {
    match figure_panels(m, out, rows, backend)? {
        Some((spec, panels)) => {
            let mut written = draw_figure(out, m.figure_title(), &spec, &panels, formats)?;
            // the same figure for matplotlib, to restyle
            let factor = table::factor(spec.scale, &spec.y);
            let py = out.join(Entry::FigurePy.name());
            crate::util::atomic::write(
                &py,
                crate::report::figure_py::script(m.figure_title(), &spec, &panels, factor),
            )?;
            written.push(py);
            Ok(Some(written))
        }
        None => Ok(None),
    }
}
