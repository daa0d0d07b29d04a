//! The report: static HTML pages readable offline. `results/index.html`
//! lists every experiment (title, scale, runs by health, claims by
//! verdict); `results/<name>/index.html` shows one: its provenance as a
//! table, table, claims, tuning, figure, a sortable and filterable table of
//! its runs, and its files. A sidebar links every page. The pages read
//! only the committed files (table.md, claims.md, claims.csv, tuning.md,
//! figure.svg, provenance.json, runs.csv), render the Markdown the tool
//! wrote with its headings under the page's own, and link every file by a
//! relative path.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::records::metrics::Cell;
use crate::records::results::{RunRecord, csv_rows, grid_keys, read_csv};
use crate::records::results_dir::{Entry, ResultsDir};

/// What one experiment's directory holds that its page shows.
const SHOWN: [(Entry, &str, &str); 3] = [
    (Entry::Table, "Table", "table"),
    (Entry::Claims, "Claims", "claims"),
    (Entry::Tuning, "Tuning", "tuning"),
];

/// The files an experiment's page links in its list of files.
const LISTED: [Entry; 13] = [
    Entry::Runs,
    Entry::RunsParquet,
    Entry::Curves,
    Entry::CurvesParquet,
    Entry::TableCsv,
    Entry::TableTex,
    Entry::ClaimsCsv,
    Entry::Targets,
    Entry::TuningCsv,
    Entry::FigurePng,
    Entry::FigurePy,
    Entry::Provenance,
    Entry::Combined,
];

/// Markdown the tool wrote, as HTML (tables included), each heading
/// `shift` levels down (a table.md's `#` under the page's `<h2>`). Raw
/// HTML in the text is shown as text, never passed through: a title or
/// label from a manifest cannot put a script on the page.
fn markdown(text: &str, shift: usize) -> String {
    use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd, html};
    let down = |l: HeadingLevel| {
        let n = (l as usize + shift).min(6);
        HeadingLevel::try_from(n).unwrap_or(HeadingLevel::H6)
    };
    let mut out = String::new();
    // an image the tool linked is a file of the directory: a relative
    // path without a scheme; any other shows its alt text alone
    let mut unsafe_image = false;
    let events = Parser::new_ext(text, Options::ENABLE_TABLES).map(|e| match e {
        Event::Html(h) | Event::InlineHtml(h) => Event::Text(h),
        Event::Start(Tag::Image { dest_url, .. })
            if dest_url.contains(':')
                || dest_url.starts_with('/')
                || dest_url.split('/').any(|p| p == "..") =>
        {
            unsafe_image = true;
            Event::Start(Tag::Emphasis)
        }
        Event::End(TagEnd::Image) if unsafe_image => {
            unsafe_image = false;
            Event::End(TagEnd::Emphasis)
        }
        Event::Start(Tag::Heading {
            level,
            id,
            classes,
            attrs,
        }) => Event::Start(Tag::Heading {
            level: down(level),
            id,
            classes,
            attrs,
        }),
        Event::End(TagEnd::Heading(level)) => Event::End(TagEnd::Heading(down(level))),
        other => other,
    });
    html::push_html(&mut out, events);
    out
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The experiments' directories: every subdirectory with a table or a
/// figure, sorted by name.
fn experiments(results: &Path) -> Result<Vec<PathBuf>> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(results)
        .with_context(|| format!("could not read {}", results.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let d = ResultsDir::new(p);
            p.is_dir() && (d.path(Entry::Table).is_file() || d.path(Entry::FigureSvg).is_file())
        })
        .collect();
    dirs.sort();
    Ok(dirs)
}

fn dir_name(d: &Path) -> String {
    d.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// An experiment's title: its table's first heading, else a combined
/// figure's title, else its name.
fn title_of(d: &Path) -> String {
    std::fs::read_to_string(ResultsDir::new(d).path(Entry::Table))
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("# ").map(str::to_string))
        })
        .or_else(|| combined(d).map(|(title, _)| title))
        .unwrap_or_else(|| dir_name(d))
}

/// A figure combined from other experiments (`repro plot A --with B
/// --name N` writes combined.json): its title and the experiments.
fn combined(d: &Path) -> Option<(String, Vec<String>)> {
    let text = std::fs::read_to_string(ResultsDir::new(d).path(Entry::Combined)).ok()?;
    let j: serde_json::Value = serde_json::from_str(&text).ok()?;
    let from = j
        .get("combined_from")?
        .as_array()?
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    Some((j.get("title")?.as_str()?.to_string(), from))
}

/// A CSV file of the directory as a header and rows (none if unreadable).
fn csv_of(d: &Path, file: Entry) -> Option<(Vec<String>, Vec<Vec<String>>)> {
    let text = std::fs::read_to_string(ResultsDir::new(d).path(file)).ok()?;
    let mut rows = csv_rows(&text).ok()?.into_iter();
    let header = rows.next()?;
    Some((header, rows.collect()))
}

/// "3 supported, 1 not supported": the values of `column` counted.
fn counted(header: &[String], rows: &[Vec<String>], column: &str) -> String {
    let Some(i) = header.iter().position(|h| h == column) else {
        return String::new();
    };
    tally(rows.iter().map(|r| r.get(i).cloned().unwrap_or_default()))
}

/// "12 ok, 2 exploded": the runs by health, or by status where none was
/// judged.
fn runs_by_health(runs: &[RunRecord]) -> String {
    let judged = runs.iter().any(|r| r.metrics.contains_key("health"));
    let column = if judged { "health" } else { "status" };
    tally(
        runs.iter()
            .map(|r| r.metrics.get(column).map_or("", Cell::text).to_string()),
    )
}

/// The values counted, in the order first seen ("unjudged" for an empty one).
fn tally(values: impl Iterator<Item = String>) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for v in values {
        let v = if v.is_empty() { "unjudged".into() } else { v };
        match counts.iter_mut().find(|(k, _)| *k == v) {
            Some((_, n)) => *n += 1,
            None => counts.push((v, 1)),
        }
    }
    counts
        .iter()
        .map(|(k, n)| format!("{n} {k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The page around `main`: the sidebar with every experiment (`here`
/// marked), and `toc`, this page's own sections. `up` is the path to the
/// results directory ("" or "../").
fn frame(
    title: &str,
    up: &str,
    dirs: &[PathBuf],
    here: Option<&str>,
    toc: &[(&str, &str)],
    main: &str,
) -> String {
    let mut nav = format!(
        "<nav class=\"sidebar\" aria-label=\"experiments\">\n<p class=\"home\"><a href=\"{up}index.html\">repro results</a></p>\n"
    );
    if !toc.is_empty() {
        nav.push_str("<p class=\"toc-title\">On this page</p>\n<ul class=\"toc\">\n");
        for (id, label) in toc {
            nav.push_str(&format!("<li><a href=\"#{id}\">{label}</a></li>\n"));
        }
        nav.push_str("</ul>\n");
    }
    nav.push_str("<p class=\"toc-title\">Experiments</p>\n<ul>\n");
    for d in dirs {
        let name = dir_name(d);
        let current = here == Some(name.as_str());
        let (class, aria) = if current {
            (" class=\"current\"", " aria-current=\"page\"")
        } else {
            ("", "")
        };
        nav.push_str(&format!(
            "<li{class}><a href=\"{up}{0}/index.html\"{aria}>{0}</a></li>\n",
            escape(&name)
        ));
    }
    nav.push_str("</ul>\n</nav>\n");
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n{nav}<main>\n{main}\
         <p class=\"build\">Written by repro {}</p>\n</main>\n<script>\n{SCRIPT}</script>\n</body>\n</html>\n",
        escape(title),
        escape(repro_build::VERSION)
    )
}

/// The index: the results' README, then a row per experiment.
fn index_page(results: &Path, dirs: &[PathBuf]) -> String {
    let mut main = String::from("<h1>repro results</h1>\n");
    if let Ok(readme) = std::fs::read_to_string(results.join("README.md")) {
        main.push_str(&format!(
            "<details class=\"readme\"><summary>What the results directories hold (README.md)</summary>\n{}</details>\n",
            markdown(&readme, 1)
        ));
    }
    main.push_str(
        "<h2 id=\"experiments\">Experiments</h2>\n<table class=\"experiments\">\n<thead><tr><th>experiment</th><th>title</th><th>scale</th><th>runs</th><th>claims</th></tr></thead>\n<tbody>\n",
    );
    for d in dirs {
        let name = dir_name(d);
        let scale = ResultsDir::new(d)
            .recorded_scale()
            .unwrap_or_else(|| "-".into());
        let runs = read_csv(&ResultsDir::new(d).runs_csv())
            .map(|r| format!("{}: {}", r.len(), runs_by_health(&r)))
            .unwrap_or_else(|_| "-".into());
        let claims = csv_of(d, Entry::ClaimsCsv)
            .map(|(h, r)| counted(&h, &r, "verdict"))
            .unwrap_or_default();
        main.push_str(&format!(
            "<tr><td><a href=\"{0}/index.html\">{0}</a></td><td>{1}</td><td>{2}</td><td>{3}</td><td>{4}</td></tr>\n",
            escape(&name),
            escape(&title_of(d)),
            escape(&scale),
            escape(&runs),
            escape(&claims)
        ));
    }
    main.push_str("</tbody>\n</table>\n");
    frame(
        "repro results",
        "",
        dirs,
        None,
        &[("experiments", "Experiments")],
        &main,
    )
}

/// The provenance as a table of what a reader asks: what ran, at which
/// scale and backend, from which build, by which command, when.
fn provenance_table(d: &Path) -> String {
    let Some(p) = ResultsDir::new(d).provenance_or_none() else {
        if let Some((_, from)) = combined(d) {
            let links: Vec<String> = from
                .iter()
                .map(|e| format!("<a href=\"../{0}/index.html\">{0}</a>", escape(e)))
                .collect();
            return format!(
                "<p>A figure combined from the results of {} (<a href=\"combined.json\">combined.json</a>): their pages give each run's provenance.</p>\n",
                links.join(" and ")
            );
        }
        return "<p>No provenance.json: this directory was written before provenance was recorded.</p>\n".into();
    };
    let text = |s: &str| {
        if s.is_empty() {
            "-".to_string()
        } else {
            s.to_string()
        }
    };
    let counts = |c: &std::collections::BTreeMap<String, usize>| {
        if c.is_empty() {
            return "-".to_string();
        }
        c.iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let written = if p.written_unix_s > 0 {
        crate::util::time::utc(p.written_unix_s)
    } else {
        "-".into()
    };
    let rows = [
        ("experiment", text(&p.experiment)),
        ("scale", text(&p.scale)),
        ("backend", text(p.backend.map_or("", |b| b.name()))),
        ("planned runs", counts(&p.planned_runs)),
        (
            "recorded runs by source",
            counts(&p.recorded_runs_by_source),
        ),
        ("build source id", text(&p.build.source)),
        ("git commit", text(&p.build.git_commit)),
        (
            "uncommitted changes",
            p.build.git_dirty.map_or("-".into(), |d| d.to_string()),
        ),
        ("compiler", text(&p.build.rustc)),
        ("host", text(&p.host)),
        ("ranks started by", text(&p.launcher)),
        ("command", text(&p.command)),
        ("manifest hash", text(&p.manifest_hash)),
        ("written", written),
    ];
    let mut s = String::from("<table class=\"provenance\">\n<tbody>\n");
    for (k, v) in rows {
        s.push_str(&format!(
            "<tr><th scope=\"row\">{k}</th><td><code>{}</code></td></tr>\n",
            escape(&v)
        ));
    }
    s.push_str("</tbody>\n</table>\n");
    s
}

/// The runs of runs.csv worth a column: the run id, the grid keys (the
/// columns before `status`), status and health, then the measurements a
/// reader sorts by that some run has.
const RUN_METRICS: [&str; 9] = [
    "avg_test_accuracy",
    "test_accuracy",
    "final_loss",
    "train_loss",
    "subopt",
    "grad_norm_sq",
    "epoch_time_s",
    "wall_s",
    "counted_bytes_per_worker",
];

/// The sortable, filterable table of the directory's runs, read as typed
/// records: the run id, the grid keys, status and health, then each of
/// [`RUN_METRICS`] that some run measured. A measurement sorts by its
/// number; a run without one sorts last.
fn runs_table(d: &Path, name: &str) -> String {
    let Ok(runs) = read_csv(&ResultsDir::new(d).runs_csv()) else {
        return "<p>No runs.csv.</p>\n".into();
    };
    let keys = grid_keys(&runs);
    let measured: Vec<&str> = RUN_METRICS
        .into_iter()
        .filter(|m| {
            runs.iter().any(|r| {
                r.metrics
                    .get(*m)
                    .and_then(Cell::number)
                    .is_some_and(f64::is_finite)
            })
        })
        .collect();
    let labels: Vec<&str> = std::iter::once("run_id")
        .chain(keys.iter().map(|k| k.as_str()))
        .chain(["status", "health"])
        .chain(measured.iter().copied())
        .collect();
    let id = format!("runs-{}", escape(name));
    let mut s = format!(
        "<p class=\"runs-tools\"><label>Filter <input type=\"search\" id=\"{id}-filter\" placeholder=\"text in any cell, e.g. moniqua\"></label> <output id=\"{id}-count\">{n} of {n} runs</output> · click a heading to sort</p>\n\
         <div class=\"scroll\"><table class=\"runs\" id=\"{id}\" data-filter=\"{id}-filter\" data-count=\"{id}-count\">\n<thead><tr>",
        n = runs.len()
    );
    for label in &labels {
        s.push_str(&format!(
            "<th scope=\"col\" data-key=\"{0}\" aria-sort=\"none\"><button type=\"button\">{0}</button></th>",
            escape(label)
        ));
    }
    s.push_str("</tr></thead>\n<tbody>\n");
    for r in &runs {
        s.push_str(&format!("<tr><td>{}</td>", escape(&r.run_id)));
        for k in &keys {
            let v = r.point.get(*k).map_or("", String::as_str);
            s.push_str(&format!("<td>{}</td>", escape(v)));
        }
        for k in ["status", "health"] {
            let v = r.metrics.get(k).map_or("", Cell::text);
            s.push_str(&format!("<td>{}</td>", escape(v)));
        }
        for m in &measured {
            let cell = r.metrics.get(*m);
            let text = cell.map_or(String::new(), |c| c.csv(m));
            match cell.and_then(Cell::number).filter(|x| x.is_finite()) {
                Some(x) => s.push_str(&format!(
                    "<td data-value=\"{}\">{}</td>",
                    escape(&text),
                    escape(&crate::report::table::number(x))
                )),
                None => s.push_str(&format!("<td data-value=\"\">{}</td>", escape(&text))),
            }
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</tbody>\n</table></div>\n");
    s
}

/// One experiment's page: provenance, table, claims, tuning, figure,
/// runs, files.
fn experiment_page(d: &Path, dirs: &[PathBuf]) -> String {
    let name = dir_name(d);
    let mut main = format!(
        "<h1>{}</h1>\n<p class=\"subtitle\"><code>{}</code></p>\n",
        escape(&title_of(d)),
        escape(&name)
    );
    let mut toc = vec![("provenance", "Provenance")];
    main.push_str("<section id=\"provenance\">\n<h2>Provenance</h2>\n");
    main.push_str(&provenance_table(d));
    main.push_str("</section>\n");
    let dir = ResultsDir::new(d);
    for (entry, title, id) in SHOWN {
        let file = entry.name();
        if let Ok(text) = std::fs::read_to_string(dir.path(entry)) {
            toc.push((id, title));
            main.push_str(&format!(
                "<section id=\"{id}\">\n<h2>{title} <a class=\"file\" href=\"{file}\">{file}</a></h2>\n{}</section>\n",
                markdown(&text, 2)
            ));
        }
    }
    for figure in [Entry::FigureSvg, Entry::FigurePng].map(Entry::name) {
        if d.join(figure).is_file() {
            toc.push(("figure", "Figure"));
            main.push_str(&format!(
                "<section id=\"figure\">\n<h2>Figure <a class=\"file\" href=\"{figure}\">{figure}</a></h2>\n<p><img src=\"{figure}\" alt=\"{} figure\"></p>\n</section>\n",
                escape(&name)
            ));
            break;
        }
    }
    if dir.runs_csv().is_file() {
        toc.push(("runs", "Runs"));
        main.push_str(&format!(
            "<section id=\"runs\">\n<h2>Runs <a class=\"file\" href=\"runs.csv\">runs.csv</a></h2>\n{}</section>\n",
            runs_table(d, &name)
        ));
    }
    let files: Vec<String> = LISTED
        .iter()
        .filter(|f| dir.path(**f).is_file())
        .map(|f| format!("<li><a href=\"{0}\">{0}</a></li>", f.name()))
        .collect();
    if !files.is_empty() {
        toc.push(("files", "Files"));
        main.push_str(&format!(
            "<section id=\"files\">\n<h2>Files</h2>\n<ul class=\"files\">{}</ul>\n</section>\n",
            files.join("")
        ));
    }
    frame(&title_of(d), "../", dirs, Some(&name), &toc, &main)
}

/// Writes the index and every experiment's page under `results`; the
/// paths written, the index first.
pub(crate) fn write_report(results: &Path) -> Result<Vec<PathBuf>> {
    let dirs = experiments(results)?;
    let mut written = vec![results.join(Entry::Index.name())];
    crate::util::atomic::write(&written[0], index_page(results, &dirs))?;
    for d in &dirs {
        let path = d.join(Entry::Index.name());
        crate::util::atomic::write(&path, experiment_page(d, &dirs))?;
        written.push(path);
    }
    Ok(written)
}

const STYLE: &str = "* { box-sizing: border-box; }
body { font-family: system-ui, sans-serif; margin: 0; display: grid; grid-template-columns: 15rem minmax(0, 1fr); color: #222; line-height: 1.4; }
.sidebar { position: sticky; top: 0; height: 100vh; overflow-y: auto; background: #eef1f5; border-right: 1px solid #c8ced6; padding: 1rem; font-size: 0.9rem; }
.sidebar ul { list-style: none; padding: 0; margin: 0 0 1rem 0; }
.sidebar li a { display: block; padding: 0.15rem 0.4rem; border-radius: 4px; color: #1a4d8f; text-decoration: none; }
.sidebar li a:hover { background: #dde3ea; }
.sidebar li.current a { background: #2c6bc0; color: #fff; }
.sidebar .home a { font-weight: bold; font-size: 1.05rem; color: #222; text-decoration: none; }
.toc-title { text-transform: uppercase; font-size: 0.75rem; color: #666; margin: 1rem 0 0.3rem; }
main { padding: 1rem 2rem 3rem; min-width: 0; }
h1 { font-size: 1.6rem; margin: 0.5rem 0; }
h2 { border-bottom: 2px solid #c8ced6; padding-bottom: 0.2rem; margin-top: 2rem; }
h2 a.file { font-size: 0.8rem; font-weight: normal; margin-left: 0.5rem; }
.subtitle { color: #555; margin-top: 0; }
table { border-collapse: collapse; font-size: 0.85rem; margin: 0.5rem 0; }
th, td { border: 1px solid #ccd; padding: 0.2rem 0.5rem; vertical-align: top; }
thead th { background: #f3f5f8; }
table.provenance th { text-align: left; background: #f3f5f8; font-weight: normal; color: #444; }
table.provenance code { white-space: pre-wrap; word-break: break-all; }
.scroll { max-height: 32rem; overflow: auto; border: 1px solid #ccd; }
section > table { display: block; overflow-x: auto; max-width: 100%; }
table.runs { margin: 0; }
table.runs thead th { position: sticky; top: 0; }
table.runs th button { font: inherit; font-weight: bold; border: 0; background: none; cursor: pointer; padding: 0; }
table.runs th[aria-sort=ascending] button::after { content: ' \\25B2'; }
table.runs th[aria-sort=descending] button::after { content: ' \\25BC'; }
table.runs td[data-value] { text-align: right; font-variant-numeric: tabular-nums; }
.runs-tools input { font: inherit; padding: 0.2rem 0.4rem; width: 18rem; }
img { max-width: 100%; }
.build { color: #666; font-size: 0.8rem; margin-top: 3rem; }
";

/// Sorting and filtering of the runs tables; `?sort=COLUMN&order=desc&filter=TEXT`
/// in the page's address opens it sorted and filtered.
const SCRIPT: &str = r#"for (const table of document.querySelectorAll('table.runs')) {
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  const input = document.getElementById(table.dataset.filter);
  const count = document.getElementById(table.dataset.count);
  const heads = Array.from(table.tHead.rows[0].cells);
  // a measurement's number (null: none, sorted last), else the text
  const value = (row, i) => {
    const v = row.cells[i].dataset.value;
    if (v === undefined) return row.cells[i].textContent;
    return v === '' ? null : Number(v);
  };
  const sortBy = (i, order) => {
    const sign = order === 'descending' ? -1 : 1;
    rows.sort((a, b) => {
      const x = value(a, i), y = value(b, i);
      if (x === null || y === null) return (x === null) - (y === null);
      const c = typeof x === 'number' && typeof y === 'number'
        ? x - y : String(x).localeCompare(String(y), undefined, { numeric: true });
      return sign * c;
    });
    for (const r of rows) body.appendChild(r);
    heads.forEach((h, j) => h.setAttribute('aria-sort', j === i ? order : 'none'));
  };
  const filter = () => {
    const q = input.value.trim().toLowerCase();
    let shown = 0;
    for (const r of rows) {
      const hit = !q || r.textContent.toLowerCase().includes(q);
      r.hidden = !hit;
      if (hit) shown++;
    }
    count.textContent = `${shown} of ${rows.length} runs`;
  };
  heads.forEach((h, i) => h.querySelector('button').addEventListener('click', () =>
    sortBy(i, h.getAttribute('aria-sort') === 'ascending' ? 'descending' : 'ascending')));
  input.addEventListener('input', filter);
  const asked = new URLSearchParams(location.search);
  if (asked.has('filter')) input.value = asked.get('filter');
  const key = heads.findIndex(h => h.dataset.key === asked.get('sort'));
  if (key >= 0) sortBy(key, asked.get('order') === 'desc' ? 'descending' : 'ascending');
  filter();
}
"#;

#[cfg(test)]
mod tests {
    use super::*;

    /// A manifest's text reaches the page as text: HTML in a title or a
    /// table cell is escaped, never run.
    #[test]
    fn html_in_markdown_is_shown_as_text() {
        let page = markdown(
            "# A <script>alert(1)</script> title\n\n| a |\n|---|\n| <img src=x onerror=y> |\n",
            0,
        );
        assert!(!page.contains("<script>"), "{page}");
        assert!(!page.contains("<img"), "{page}");
        assert!(page.contains("&lt;script&gt;"), "{page}");
        // a tuning figure the tool linked shows; an image elsewhere does not
        let page = markdown("![s](tuning-figures/bits-1.svg)\n", 0);
        assert!(
            page.contains("<img src=\"tuning-figures/bits-1.svg\""),
            "{page}"
        );
        for away in [
            "javascript:alert(1)",
            "/etc/x.svg",
            "../x.svg",
            "http://x/y.svg",
        ] {
            let page = markdown(&format!("![alt]({away})\n"), 0);
            assert!(!page.contains("<img"), "{away}: {page}");
            assert!(page.contains("<em>alt</em>"), "{away}: {page}");
        }
    }

    #[test]
    fn headings_sit_under_the_page_s_own() {
        assert_eq!(markdown("# T\n\n## U\n", 2), "<h3>T</h3>\n<h4>U</h4>\n");
        assert_eq!(markdown("##### deep\n", 2), "<h6>deep</h6>\n");
    }

    /// The heading levels of `html` in order.
    fn outline(html: &str) -> Vec<usize> {
        let mut levels = Vec::new();
        for (i, _) in html.match_indices("<h") {
            if let Some(d) = html[i + 2..].chars().next().and_then(|c| c.to_digit(10)) {
                levels.push(d as usize);
            }
        }
        levels
    }

    /// Every page of the results fixture (tests/fixtures/results: copies of
    /// committed directories): every link and image names a file that exists, every experiment has a page the index and the
    /// sidebar link, the headings never skip a level (one h1, sections
    /// h2, the tool's Markdown below them), provenance is a table, and
    /// the Markdown tables became HTML tables.
    #[test]
    fn every_page_links_only_files_that_exist_and_has_a_right_outline() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results");
        let dirs = experiments(&root).unwrap();
        let mut pages = vec![(root.clone(), index_page(&root, &dirs))];
        for d in &dirs {
            pages.push((d.clone(), experiment_page(d, &dirs)));
        }
        let mut linked = 0;
        for (dir, html) in &pages {
            let mut targets = Vec::new();
            for attr in ["href=\"", "src=\""] {
                for (i, _) in html.match_indices(attr) {
                    let rest = &html[i + attr.len()..];
                    let end = rest.find('"').unwrap();
                    targets.push(rest[..end].replace("&amp;", "&"));
                }
            }
            for t in targets
                .iter()
                .filter(|t| !t.starts_with('#') && !t.starts_with("http"))
            {
                let path = dir.join(t);
                // a page links the others' index.html, written beside it
                let page = t.ends_with("index.html");
                assert!(page || path.exists(), "{}: broken link {t}", dir.display());
                linked += 1;
            }
            for id in targets.iter().filter_map(|t| t.strip_prefix('#')) {
                assert!(
                    html.contains(&format!("id=\"{id}\"")),
                    "{}: no #{id}",
                    dir.display()
                );
            }
            let levels = outline(html);
            assert_eq!(
                levels.iter().filter(|l| **l == 1).count(),
                1,
                "{}",
                dir.display()
            );
            assert!(
                levels.windows(2).all(|w| w[1] <= w[0] + 1),
                "{}: a heading skips a level: {levels:?}",
                dir.display()
            );
            for tag in ["section", "table", "details", "ul", "nav", "main"] {
                assert_eq!(
                    html.matches(&format!("<{tag}")).count(),
                    html.matches(&format!("</{tag}>")).count(),
                    "{}: {tag}",
                    dir.display()
                );
            }
        }
        assert!(linked > 10 * dirs.len(), "{linked}");
        let index = &pages[0].1;
        for d in &dirs {
            let name = dir_name(d);
            assert!(
                index.contains(&format!("href=\"{name}/index.html\"")),
                "{name} not in the index"
            );
        }
        // Theorem 1: a current experiment that the rerun of one other
        // (mid-way, without its top-level table) never removes
        let theorem1 = &pages
            .iter()
            .find(|(d, _)| d.ends_with("theorem1"))
            .expect("the fixture's theorem1 has a page")
            .1;
        assert!(
            theorem1.contains("<table class=\"provenance\">")
                && theorem1.contains("<th scope=\"row\">git commit</th>")
        );
        assert!(theorem1.contains("<table class=\"runs\"") && theorem1.contains("<th>method</th>"));
        assert!(theorem1.contains(
            "<li class=\"current\"><a href=\"../theorem1/index.html\" aria-current=\"page\">"
        ));
    }
}
