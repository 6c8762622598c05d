//! `trend.html` as a user gets it: a results history of six nightly runs in which the last
//! run regresses, turned into a page by the real `hcbench trend`. The first test needs no
//! browser: the files are written and the page is self-contained. The second opens the page
//! from `file://` in headless Chromium (the same chromedriver driver as the matrix report's
//! test in html.rs, and the same convention: `#[ignore]`d in a plain `cargo test`, run by
//! `scripts/test` whenever the browser is installed and always in CI).

use std::path::{Path, PathBuf};

use hcbench::history::{HISTORY_SCHEMA_VERSION, HistoryRow, write_rows};
use serde_json::{Value, json};

use crate::Test;
use crate::html::{Browser, require_browser};

const RUNS: usize = 6;
const CASES: usize = 20;

fn run_id(i: usize) -> String {
    format!("nightly-{i}")
}

/// A distinct commit per run whose first ten characters (what reports show) differ too.
fn commit(i: usize) -> String {
    format!("{i}abcdef0123456789abcdef0123456789abcdef0")
}

fn case_id(c: usize) -> String {
    format!("case-{c:02}")
}

/// Six runs of `oracle` and `agent` over 20 cases. `agent` passes 18 cases in every run but
/// the last, where only 4 pass: a regression far beyond noise, and 14 pass->fail flips after
/// a streak of 5. Under `oracle`, case-19 alternates: the one flaky case.
fn build_history(dir: &Path) {
    for i in 0..RUNS {
        let started_at = format!("2026-03-{:02}T02:00:00Z", i + 1);
        let mut rows = Vec::new();
        for profile in ["oracle", "agent"] {
            for c in 0..CASES {
                let passed = match profile {
                    "oracle" => c != 19 || i % 2 == 0,
                    _ if i + 1 < RUNS => c < 18,
                    _ => c < 4,
                };
                let agent = profile == "agent";
                rows.push(HistoryRow {
                    schema: HISTORY_SCHEMA_VERSION,
                    run_id: run_id(i),
                    started_at: started_at.clone(),
                    command: "matrix".into(),
                    git_commit: commit(i),
                    git_dirty: Some(false),
                    hcbench_version: "0.1.0".into(),
                    benchmark: "hc-bench".into(),
                    benchmark_digest: "digest-1".into(),
                    cell_id: format!("{}__{profile}__e1", case_id(c)),
                    case_id: case_id(c),
                    category: if c % 2 == 0 { "bugfix" } else { "feature" }.into(),
                    split: "test".into(),
                    profile: profile.into(),
                    provider: if agent { "openai" } else { "oracle" }.into(),
                    model: if agent { "gpt-test" } else { "" }.into(),
                    ablation: String::new(),
                    epoch: 1,
                    outcome: if passed { "passed" } else { "failed" }.into(),
                    reward: if passed { 1.0 } else { 0.0 },
                    input_tokens: if agent { 900 + 10 * i as u64 } else { 0 },
                    output_tokens: if agent { 100 } else { 0 },
                    cost_usd: agent.then_some(0.002),
                    wall_ms: if agent { 2_000 + 100 * i as u64 } else { 300 },
                });
            }
        }
        let stamp = started_at.replace(':', "-");
        write_rows(&dir.join(format!("{stamp}--{}.csv", run_id(i))), &rows).unwrap();
    }
}

/// Builds the history under `scratch/history` and runs `hcbench trend` into `scratch/trend`
/// with `extra` arguments; returns the output folder.
fn trend(scratch: &Path, extra: &[&str], code: i32) -> PathBuf {
    let history = scratch.join("history");
    build_history(&history);
    let out = scratch.join("trend");
    Test::new()
        .args(&["trend", "--history"])
        .arg_path(&history)
        .args(&["--out"])
        .arg_path(&out)
        .args(extra)
        .run()
        .code(code);
    out
}

#[test]
fn trend_writes_markdown_html_and_json_and_the_page_is_self_contained() {
    let scratch = tempfile::tempdir().unwrap();
    let out = trend(scratch.path(), &["--fail-on-regression"], hcbench::exit::REGRESSION);

    let json: Value = serde_json::from_slice(&std::fs::read(out.join("trend.json")).unwrap()).unwrap();
    assert_eq!(json["verdict"]["regressions"], 1, "{:#}", json["verdict"]);

    let md = std::fs::read_to_string(out.join("trend.md")).unwrap();
    assert!(md.contains("🔴 **REGRESSION: agent"), "the Markdown leads with the verdict:\n{md}");
    assert!(md.contains("`▇▇▇▇▇▂`"), "agent's sparkline drops in the last run:\n{md}");
    assert!(md.contains("| `case-19` | hc-bench |"), "the flaky case is in quarantine:\n{md}");

    let text = std::fs::read_to_string(out.join("trend.html")).unwrap();
    let attributes = regex::Regex::new(r#"\s(href|src|srcset|action|formaction|poster|data)="([^"]*)""#).unwrap();
    for m in attributes.captures_iter(&text) {
        assert!(m[2].starts_with('#') || m[2].starts_with("data:"), "trend.html references {}={:?}", &m[1], &m[2]);
    }
    let css = text.split("<style>").nth(1).and_then(|s| s.split("</style>").next()).expect("an inline stylesheet");
    assert!(!css.contains("url(") && !css.contains("@import"), "the stylesheet loads nothing");
    assert!(!text.contains("<script"), "the page needs no script");
    assert_eq!(text.matches("<svg class=\"chart pass\"").count(), 2, "one pass-rate chart per profile");
}

#[test]
#[ignore = "needs chromium and chromium-driver (scripts/test runs it)"]
fn the_trend_page_opens_offline_with_a_chart_point_per_run_and_the_regression_shown() {
    let chromedriver = require_browser();
    let scratch = tempfile::tempdir().unwrap();
    let out = trend(scratch.path(), &[], 0);

    let browser = Browser::start(&chromedriver, scratch.path());
    browser.open(&out.join("trend.html"));
    assert_eq!(browser.severe_logs(), Vec::<String>::new(), "the page loads without console errors");
    assert_eq!(
        browser.script("return performance.getEntriesByType('resource').map(e => e.name);"),
        json!([]),
        "the page fetches nothing"
    );

    // Each profile's chart was laid out by the browser with one point per run, left to right
    // in run order, and a line and an interval band of real length.
    let charts = browser.script(
        "return Array.from(document.querySelectorAll('article.series')).map(a => {
           const svg = a.querySelector('svg.chart.pass');
           const dots = Array.from(svg.querySelectorAll('circle.pt'));
           return {
             series: a.dataset.series,
             runs: dots.map(d => d.dataset.run),
             xs: dots.map(d => d.getBoundingClientRect().x),
             drawn: dots.every(d => d.getBoundingClientRect().width > 0),
             line: svg.querySelector('path.line').getTotalLength(),
             band: svg.querySelector('polygon.band').getBBox().height,
             titles: dots.map(d => d.querySelector('title').textContent),
           };
         });",
    );
    let charts = charts.as_array().unwrap();
    let series: Vec<&str> = charts.iter().map(|c| c["series"].as_str().unwrap()).collect();
    assert_eq!(series, ["agent", "oracle"]);
    let run_ids: Vec<String> = (0..RUNS).map(run_id).collect();
    for c in charts {
        let name = &c["series"];
        assert_eq!(c["runs"], json!(run_ids), "{name}: one point per run, in run order");
        assert_eq!(c["drawn"], true, "{name}: every point is drawn");
        let xs: Vec<f64> = c["xs"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        assert!(xs.windows(2).all(|w| w[0] < w[1]), "{name}: points run left to right: {xs:?}");
        assert!(c["line"].as_f64().unwrap() > 100.0, "{name}: the line is drawn: {c}");
        assert!(c["band"].as_f64().unwrap() > 1.0, "{name}: the interval band is drawn: {c}");
        // Hovering a point names its run, its commit and its value.
        let last = c["titles"][RUNS - 1].as_str().unwrap();
        assert!(last.contains(&run_id(RUNS - 1)) && last.contains(&commit(RUNS - 1)[..10]), "{name}: {last}");
        assert!(last.contains("pass rate"), "{name}: {last}");
    }
    assert!(charts[0]["titles"][RUNS - 1].as_str().unwrap().contains("pass rate 20.0%"));

    // The regressed point is marked, and the regression row is on screen with its numbers.
    let flagged = browser.find_all("svg.chart.pass circle.pt.flagged");
    assert_eq!(flagged.len(), 1, "one flagged point");
    assert_eq!(browser.attribute(&flagged[0], "data-run"), run_id(RUNS - 1));
    let row = browser.find("#regressions tr.flagged");
    browser.script("document.getElementById('regressions').scrollIntoView(); return null;");
    assert!(browser.displayed(&row), "the regression row is visible");
    let shown = browser.text(&row);
    for want in
        ["agent", "21.1%", "94.7%", "-73.7 pts", "regression", &format!("{}..{}", &commit(4)[..10], &commit(5)[..10])]
    {
        assert!(shown.contains(want), "the regression row shows {want}: {shown}");
    }
    let verdict = browser.text(&browser.find(".verdict-box.bad"));
    assert!(verdict.contains("REGRESSION: agent"), "{verdict}");

    // Flips, quarantine and the category breakdown are there too.
    assert_eq!(browser.find_all("#flips tr.flip").len(), 14, "cases 04..17 flipped pass -> fail");
    let flaky = browser.find_all("#flaky tr.flaky");
    assert_eq!(flaky.len(), 1);
    assert!(browser.text(&flaky[0]).contains("case-19"));
    assert_eq!(browser.find_all("#categories tbody tr").len(), 4, "two categories per profile");
    assert_eq!(browser.severe_logs(), Vec::<String>::new(), "no console errors after scrolling");

    browser.script("window.scrollTo(0, 0); return null;");
    let png = browser.screenshot();
    assert!(png.starts_with(b"\x89PNG"), "the screenshot is a PNG");
    std::fs::write(std::env::temp_dir().join("hcbench-trend.png"), png).unwrap();
}
