//! The report page: one static HTML page, `results/index.html`, with every
//! experiment's table, claim verdicts, tuning, figures and provenance,
//! readable offline. It reads only the committed files (table.md,
//! claims.md, tuning.md, figure.svg, provenance.json, runs.csv), renders
//! the Markdown the tool wrote, and links every file by a relative path.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// What one experiment's directory holds that the page shows.
const SHOWN: [(&str, &str); 3] = [
    ("table.md", "Table"),
    ("claims.md", "Claims"),
    ("tuning.md", "Tuning"),
];

/// Markdown the tool wrote, as HTML (tables included).
/// Markdown as HTML. Raw HTML in the text is shown as text, never passed
/// through: a title or label from a manifest cannot put a script on the
/// page.
fn markdown(text: &str) -> String {
    use pulldown_cmark::{Event, Options, Parser, html};
    let mut out = String::new();
    let events = Parser::new_ext(text, Options::ENABLE_TABLES).map(|e| match e {
        Event::Html(h) | Event::InlineHtml(h) => Event::Text(h),
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
        .filter(|p| p.is_dir() && (p.join("table.md").is_file() || p.join("figure.svg").is_file()))
        .collect();
    dirs.sort();
    Ok(dirs)
}

/// The whole page.
pub(crate) fn page(results: &Path) -> Result<String> {
    let dirs = experiments(results)?;
    let mut body = String::new();
    if let Ok(readme) = std::fs::read_to_string(results.join("README.md")) {
        body.push_str(&markdown(&readme));
    }
    body.push_str("<h2>Experiments</h2>\n<ul>\n");
    for d in &dirs {
        let name = dir_name(d);
        body.push_str(&format!(
            "<li><a href=\"#{0}\">{0}</a></li>\n",
            escape(&name)
        ));
    }
    body.push_str("</ul>\n");
    for d in &dirs {
        body.push_str(&section(d)?);
    }
    Ok(format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>repro results</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n\
         <p class=\"build\">Written by repro {}</p>\n{body}</body>\n</html>\n",
        escape(repro_build::VERSION)
    ))
}

fn dir_name(d: &Path) -> String {
    d.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// One experiment: provenance, table, claims, tuning, figure, files.
fn section(d: &Path) -> Result<String> {
    let name = dir_name(d);
    let href = |file: &str| format!("{}/{file}", escape(&name));
    let mut s = format!("<section id=\"{0}\">\n<h2>{0}</h2>\n", escape(&name));
    if let Ok(text) = std::fs::read_to_string(d.join("provenance.json"))
        && let Ok(p) = serde_json::from_str::<serde_json::Value>(&text)
    {
        let field = |k: &str| p.get(k).and_then(|v| v.as_str()).unwrap_or("").to_string();
        let source = p
            .pointer("/build/source")
            .and_then(|v| v.as_str())
            .unwrap_or("");
        s.push_str(&format!(
            "<p class=\"provenance\">scale <code>{}</code>, built from <code>{}</code>; \
             command <code>{}</code>; planned runs {}</p>\n",
            escape(&field("scale")),
            escape(source),
            escape(&field("command")),
            escape(
                &p.get("planned_runs")
                    .map(|v| v.to_string())
                    .unwrap_or_default()
            ),
        ));
    } else {
        s.push_str(
            "<p class=\"provenance\">no provenance.json: recorded before provenance existed</p>\n",
        );
    }
    for (file, title) in SHOWN {
        if let Ok(text) = std::fs::read_to_string(d.join(file)) {
            s.push_str(&format!(
                "<details{}><summary>{title} (<a href=\"{}\">{file}</a>)</summary>\n{}</details>\n",
                if file == "tuning.md" { "" } else { " open" },
                href(file),
                markdown(&text)
            ));
        }
    }
    for figure in ["figure.svg", "figure.png"] {
        if d.join(figure).is_file() {
            s.push_str(&format!(
                "<p><img src=\"{}\" alt=\"{} figure\"></p>\n",
                href(figure),
                escape(&name)
            ));
            break;
        }
    }
    let files: Vec<String> = [
        "runs.csv",
        "runs.parquet",
        "curves.parquet",
        "table.tex",
        "claims.csv",
        "targets.md",
    ]
    .iter()
    .filter(|f| d.join(f).is_file())
    .map(|f| format!("<a href=\"{}\">{f}</a>", href(f)))
    .collect();
    if !files.is_empty() {
        s.push_str(&format!("<p class=\"files\">{}</p>\n", files.join(" · ")));
    }
    s.push_str("</section>\n");
    Ok(s)
}

const STYLE: &str =
    "body { font-family: sans-serif; max-width: 1200px; margin: 2em auto; padding: 0 1em; }
table { border-collapse: collapse; font-size: 0.9em; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; }
img { max-width: 100%; }
section { border-top: 2px solid #888; margin-top: 2em; }
.provenance, .build, .files { color: #555; font-size: 0.9em; }
";

#[cfg(test)]
mod tests {
    use super::*;

    /// A manifest's text reaches the page as text: HTML in a title or a
    /// table cell is escaped, never run.
    #[test]
    fn html_in_markdown_is_shown_as_text() {
        let page = markdown(
            "# A <script>alert(1)</script> title\n\n| a |\n|---|\n| <img src=x onerror=y> |\n",
        );
        assert!(!page.contains("<script>"), "{page}");
        assert!(!page.contains("<img"), "{page}");
        assert!(page.contains("&lt;script&gt;"), "{page}");
    }

    /// Every link and image of the page names a file that exists, every
    /// experiment with a table has a section, and the Markdown tables
    /// became HTML tables.
    #[test]
    fn the_page_shows_every_experiment_and_links_only_files_that_exist() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("results");
        let html = page(&root).unwrap();
        let mut targets = Vec::new();
        for attr in ["href=\"", "src=\""] {
            for (i, _) in html.match_indices(attr) {
                let rest = &html[i + attr.len()..];
                let end = rest.find('"').unwrap();
                targets.push(rest[..end].replace("&amp;", "&"));
            }
        }
        let files: Vec<&String> = targets.iter().filter(|t| !t.starts_with('#')).collect();
        assert!(files.len() > 20, "{}", files.len());
        for t in &files {
            if t.starts_with("http") {
                continue;
            }
            assert!(root.join(t).exists(), "broken link {t}");
        }
        for d in experiments(&root).unwrap() {
            let name = dir_name(&d);
            assert!(html.contains(&format!("<section id=\"{name}\">")), "{name}");
            assert!(
                targets.contains(&format!("#{name}")),
                "{name} not in the index"
            );
        }
        assert!(html.contains("<table>") && html.contains("<th>algorithm</th>"));
        assert!(html.contains("convex/figure.svg"));
        // balanced structure
        for tag in ["section", "table", "details", "ul"] {
            assert_eq!(
                html.matches(&format!("<{tag}")).count(),
                html.matches(&format!("</{tag}>")).count(),
                "{tag}"
            );
        }
    }
}
