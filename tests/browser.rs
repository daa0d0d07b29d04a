//! The report pages in a real browser: headless Chromium (Debian's
//! `chromium`, which `ci/setup.sh` installs and names in `REPRO_BROWSER`)
//! renders the committed results' pages, runs their script, and takes
//! screenshots. Without `REPRO_BROWSER` the test skips.

mod common;
use common::skipped;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The results fixture (tests/fixtures/results, copies of committed
/// directories) copied to a fresh directory, with the report written there.
fn report() -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results");
    let dst = common::temp_out("browser");
    common::copy_tree(&src, &dst);
    let o = common::repro_cmd(&["report", "--results", dst.to_str().unwrap()])
        .output()
        .expect("run repro report");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    dst
}

/// Chromium headless on `url` with `args`; its stdout.
fn chromium(browser: &Path, args: &[&str], url: &str) -> String {
    let o = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            "--virtual-time-budget=3000",
        ])
        .args(args)
        .arg(url)
        .output()
        .expect("run chromium");
    assert!(
        o.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The RGB pixels of a PNG, and its size.
fn pixels(path: &Path) -> (Vec<[u8; 3]>, (u32, u32)) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let step = match info.color_type {
        png::ColorType::Rgba => 4,
        png::ColorType::Rgb => 3,
        other => panic!("unexpected PNG colour type {other:?}"),
    };
    let px = buf[..info.buffer_size()]
        .chunks(step)
        .map(|c| [c[0], c[1], c[2]])
        .collect();
    (px, (info.width, info.height))
}

/// The rows of the runs table in a dumped DOM: whether each is hidden,
/// its text, and each cell's `data-value` (empty where it has none).
fn rows(dom: &str) -> Vec<(bool, String, Vec<String>)> {
    let table = dom
        .split("<table class=\"runs\"")
        .nth(1)
        .expect("a runs table");
    let body = table
        .split("<tbody>")
        .nth(1)
        .unwrap()
        .split("</tbody>")
        .next()
        .unwrap();
    body.split("<tr")
        .skip(1)
        .map(|r| {
            let (open, rest) = r.split_once('>').unwrap();
            let hidden = open.contains("hidden");
            let values = rest
                .split("<td")
                .skip(1)
                .map(|cell| {
                    let open = cell.split('>').next().unwrap();
                    open.split("data-value=\"")
                        .nth(1)
                        .map(|v| v.split('"').next().unwrap().to_string())
                        .unwrap_or_default()
                })
                .collect();
            (hidden, rest.to_string(), values)
        })
        .collect()
}

#[test]
fn the_report_pages_render_sort_and_filter_in_chromium() {
    let Some(browser) = std::env::var_os("REPRO_BROWSER")
        .filter(|b| !b.is_empty())
        .map(PathBuf::from)
    else {
        skipped("REPRO_BROWSER is not set (source the env.sh that ci/setup.sh writes)");
        return;
    };
    let dir = report();
    let url = |page: &str| format!("file://{}/{page}", dir.display());
    // sorted by final loss, highest first, and filtered to Moniqua's runs
    // from the address, as a reader's shared link would
    let dom = chromium(
        &browser,
        &["--dump-dom"],
        &url("theorem1/index.html?sort=final_loss&order=desc&filter=moniqua"),
    );
    let runs = rows(&dom);
    // every run of the fixture's runs.csv is a row of the page
    let recorded = common::csv_rows(&dir.join("theorem1/runs.csv")).len();
    assert!(recorded > 10, "{recorded}");
    assert_eq!(runs.len(), recorded, "{}", runs.len());
    let shown: Vec<&(bool, String, Vec<String>)> = runs.iter().filter(|r| !r.0).collect();
    assert!(
        !shown.is_empty() && shown.len() < runs.len(),
        "{}",
        shown.len()
    );
    for (hidden, text, _) in &runs {
        assert_eq!(!hidden, text.contains("moniqua"), "{text}");
    }
    assert!(
        dom.contains(&format!("{} of {recorded} runs", shown.len())),
        "the count says another number"
    );
    // the final losses fall down the shown rows
    let runs_table = dom.split("<table class=\"runs\"").nth(1).unwrap();
    let header = runs_table
        .split("<thead>")
        .nth(1)
        .unwrap()
        .split("</thead>")
        .next()
        .unwrap();
    let keys: Vec<&str> = header
        .split("data-key=\"")
        .skip(1)
        .map(|k| k.split('"').next().unwrap())
        .collect();
    let column = keys
        .iter()
        .position(|k| *k == "final_loss")
        .expect("a final_loss column");
    let losses: Vec<f64> = shown.iter().map(|r| r.2[column].parse().unwrap()).collect();
    assert!(losses.windows(2).all(|w| w[0] >= w[1]), "{losses:?}");
    assert!(dom.contains("aria-sort=\"descending\""));
    // screenshots: the sidebar (its background, and the current page
    // marked on an experiment's page) beside the content
    for (page, current) in [("index.html", false), ("theorem1/index.html", true)] {
        let shot = dir.join(format!("{}.png", page.replace('/', "-")));
        chromium(
            &browser,
            &[
                &format!("--screenshot={}", shot.display()),
                "--window-size=1400,1000",
            ],
            &url(page),
        );
        let (px, size) = pixels(&shot);
        assert_eq!(size, (1400, 1000), "{page}");
        let width = size.0 as usize;
        let at = |x: usize, y: usize| px[y * width + x];
        let sidebar = (0..1000)
            .flat_map(|y| (0..200).map(move |x| (x, y)))
            .filter(|&(x, y)| at(x, y) == [0xee, 0xf1, 0xf5])
            .count();
        assert!(sidebar > 100_000, "{page}: {sidebar} sidebar pixels");
        let dark = (0..1000)
            .flat_map(|y| (260..1400).map(move |x| (x, y)))
            .filter(|&(x, y)| at(x, y).iter().all(|c| *c < 90))
            .count();
        assert!(dark > 2_000, "{page}: {dark} dark pixels of text");
        let marked = px.iter().filter(|p| **p == [0x2c, 0x6b, 0xc0]).count();
        assert_eq!(
            marked > 500,
            current,
            "{page}: {marked} pixels of the current page's mark"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
