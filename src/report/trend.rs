//! Renders a [`TrendReport`] for people and machines: `trend.json` (the report as it is),
//! `trend.md` (a CI job summary or a PR comment), `trend.html` (one self-contained page with
//! inline SVG charts) and the terminal summary of `hcbench trend`.
//!
//! Every renderer is a plain function of the report, and every number is formatted here in
//! Rust, the same way in all three text formats (`pct`, `pct_range`, `diff_range`, `p_text`),
//! so the Markdown, the page and the terminal never disagree about a value. Output depends on
//! the report only (no render time, no hash-map order): the same report gives the same bytes.
//!
//! The HTML page follows `report.html` (src/report/html.rs): a tera template compiled in with
//! `include_str!`, autoescaped because its name ends in `.html`, the matrix report's stylesheet
//! plus `trend.css` for what only this page has, and a Content-Security-Policy that refuses
//! every fetch. Charts are SVG computed here (coordinates as plain numbers), so the page needs
//! no script at all; hover text on each point is an SVG `<title>`.
//!
//! Long lists are capped (Markdown at [`MD_ROWS`] rows, the page at [`HTML_ROWS`]) and the
//! report says how many rows were left out: a history with hundreds of flips must still fit in
//! a PR comment, and trend.json always has them all.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use comfy_table::{CellAlignment, ContentArrangement, Table, presets};
use serde::Serialize;
use tera::{Context, Tera};

use super::html::num;
use super::{ExportError, pct, pct_range};
use crate::aggregate::p_text;
use crate::replay::group_label;
use crate::trend::{Flip, Point, RegressionCheck, Series, TrendReport, short};

/// Why a check's rates can differ from the series table's.
const CHECK_NOTE: &str = "latest and window are pass rates over the cases both measured (quarantined cases left out), so they can differ a little from the series table; commits: the window's newest commit .. the latest run's.";

/// Rows per Markdown table before the rest is counted instead of listed.
const MD_ROWS: usize = 50;
/// Rows per table on the HTML page.
const HTML_ROWS: usize = 500;
/// Rows per list in the terminal summary.
const TERMINAL_ROWS: usize = 10;
/// Latest runs a Unicode sparkline shows (one character each).
const SPARK_RUNS: usize = 30;
/// Eight bar heights, lowest first.
const SPARK: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

const TEMPLATE_NAME: &str = "trend.html";
const TEMPLATE: &str = include_str!("templates/trend.html");
/// The matrix report's stylesheet, shared so both pages look like one product.
const BASE_CSS: &str = include_str!("templates/report.css");
/// What only the trend page has (stat cards, line charts).
const TREND_CSS: &str = include_str!("templates/trend.css");

/// Writes trend.json, trend.md and trend.html into `out` (created if needed), each atomically.
/// Everything is rendered before the first file is written, so a render error leaves the
/// previous set of files whole.
pub fn write_all(out: &Path, report: &TrendReport) -> Result<Vec<PathBuf>, ExportError> {
    std::fs::create_dir_all(out).map_err(|source| ExportError::Write { path: out.to_path_buf(), source })?;
    let json = serde_json::to_vec_pretty(report)
        .map_err(|e| ExportError::Render { format: "json", message: e.to_string() })?;
    let files: [(&str, Vec<u8>); 3] =
        [("trend.json", json), ("trend.md", markdown(report).into_bytes()), ("trend.html", html(report)?.into_bytes())];
    let mut written = Vec::new();
    for (name, bytes) in files {
        let path = out.join(name);
        crate::util::write_atomic(&path, &bytes).map_err(|source| ExportError::Write { path: path.clone(), source })?;
        written.push(path);
    }
    Ok(written)
}

// ---------------------------------------------------------------------------------------
// Shared formatting

/// A pass-rate sparkline over the latest [`SPARK_RUNS`] rates, on the absolute 0–100% scale:
/// a steady 95% stays high and flat, and a wobble of a few points does not look like a cliff
/// (a min-max scale would draw any noise as a full-height swing).
pub(crate) fn sparkline(rates: &[f64]) -> String {
    rates[rates.len().saturating_sub(SPARK_RUNS)..]
        .iter()
        .map(|r| SPARK[(r.clamp(0.0, 1.0) * (SPARK.len() - 1) as f64).round() as usize])
        .collect()
}

/// `12345` -> `12.3k`, `1234567` -> `1.2M`: token counts read at a glance in a table.
fn compact(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1}M", n as f64 / 1e6),
        _ => format!("{:.1}G", n as f64 / 1e9),
    }
}

fn cost_text(cost: Option<f64>) -> String {
    cost.map_or("–".into(), |c| format!("${c:.4}"))
}

fn wall_text(ms: f64) -> String {
    format!("{:.1}s", ms / 1000.0)
}

/// A difference of rates in percentage points: `-20.0 pts`.
fn points_text(diff: f64) -> String {
    format!("{:+.1} pts", diff * 100.0)
}

/// An interval of a difference in percentage points with its method:
/// `-73.7 … -39.5 pts (exact sign test)`, in the same unit as the difference beside it.
fn points_range(r: &crate::stats::Interval) -> String {
    format!("{:+.1} … {:+.1} pts ({})", r.lo * 100.0, r.hi * 100.0, r.method)
}

/// `abc1234567..def4567890`: the commits between which something changed.
fn commit_range(from: &str, to: &str) -> String {
    format!("{}..{}", short(from), short(to))
}

/// The date part of an RFC 3339 stamp.
fn day(stamp: &str) -> &str {
    stamp.get(..10).unwrap_or(stamp)
}

/// How a report names a group: `profile[/ablation]`, with the benchmark in front when the
/// report spans several, so two benchmarks' `oracle` never read as one.
struct Namer {
    multi: bool,
}

impl Namer {
    fn new(report: &TrendReport) -> Namer {
        let benchmarks: BTreeSet<&str> = report.series.iter().map(|s| s.benchmark.as_str()).collect();
        Namer { multi: benchmarks.len() > 1 }
    }

    fn name(&self, benchmark: &str, profile: &str, ablation: &str) -> String {
        let label = group_label(profile, ablation);
        if self.multi { format!("{benchmark}: {label}") } else { label }
    }

    fn series(&self, s: &Series) -> String {
        self.name(&s.benchmark, &s.profile, &s.ablation)
    }
}

/// The regression check of a series, if it has one (a series with one run has none).
fn check_of<'a>(report: &'a TrendReport, s: &Series) -> Option<&'a RegressionCheck> {
    report.regressions.iter().find(|c| c.benchmark == s.benchmark && c.profile == s.profile && c.ablation == s.ablation)
}

/// Flagged checks first (they are the news), each group in the report's order.
fn checks_in_order(report: &TrendReport) -> Vec<&RegressionCheck> {
    let mut checks: Vec<&RegressionCheck> = report.regressions.iter().collect();
    checks.sort_by_key(|c| !c.flagged);
    checks
}

fn benchmarks(report: &TrendReport) -> String {
    let names: BTreeSet<&str> = report.runs.iter().map(|r| r.benchmark.as_str()).collect();
    names.into_iter().collect::<Vec<_>>().join(", ")
}

/// `6 run(s), 2026-01-01 to 2026-01-06, latest run-6 at commit abc1234567`; `quote` sets the
/// run id apart (a code span in Markdown, plain text in HTML, where the template escapes).
fn runs_sentence(report: &TrendReport, quote: fn(&str) -> String) -> String {
    let (Some(first), Some(last)) = (report.runs.first(), report.runs.last()) else {
        return "no runs".into();
    };
    let dirty = if last.git_dirty == Some(true) { " (with uncommitted changes)" } else { "" };
    format!(
        "{} run(s), {} to {}, latest {} at commit {}{dirty}",
        report.runs.len(),
        day(&first.started_at),
        day(&last.started_at),
        quote(&last.run_id),
        short(&last.git_commit)
    )
}

/// The filters and settings in one line, so a reader knows what the page covers.
fn settings_sentence(report: &TrendReport) -> String {
    let mut parts = vec![format!("history {}", report.history)];
    if let Some(since) = &report.filters.since {
        let cutoff = report.filters.since_cutoff.as_deref().map(|c| format!(" (from {c})")).unwrap_or_default();
        parts.push(format!("since {since}{cutoff}"));
    }
    if !report.filters.profiles.is_empty() {
        parts.push(format!("profiles {}", report.filters.profiles.join(",")));
    }
    if let Some(b) = &report.filters.benchmark {
        parts.push(format!("benchmark {b}"));
    }
    parts.push(format!("window {} run(s)", report.settings.window));
    parts.push(format!("flip streak {}", report.settings.flip_streak));
    parts.push(format!("control profile {}", report.settings.control_profile));
    parts.push(format!("{} row(s) from {} file(s)", report.rows, report.files));
    if report.skipped_rows > 0 {
        parts.push(format!("{} row(s) skipped", report.skipped_rows));
    }
    parts.join(" · ")
}

/// A flip's p-value and its Holm-adjusted value, as comparisons print them.
fn flip_p(f: &Flip) -> String {
    format!("{} ({})", p_text(f.p_value), p_text(f.p_adjusted))
}

/// How to read the numbers, in one paragraph; the same words in Markdown and HTML.
fn how_to_read(report: &TrendReport) -> String {
    format!(
        "How to read this: pass rate counts every cell (infrastructure errors count as not passed and lower coverage), with its 95% interval clustered by case. \
         Each profile's latest run is compared with up to {} runs before it, paired by case over the cases both measured; \
         a regression is flagged only when the drop is beyond noise after Holm's correction over all checks (alpha {}). \
         A flip is a case that kept one verdict for at least {} runs and then changed; it is beyond noise when its p (the chance the changed runs all fall last if the order were random, Holm-adjusted over every case that could have flipped) is below alpha. \
         Flaky cases (verdicts that vary under {}) are a fixture or verifier problem, listed apart and left out of checks and flips.",
        report.settings.window, report.settings.alpha, report.settings.flip_streak, report.settings.control_profile
    )
}

fn verdict_bad(report: &TrendReport) -> bool {
    report.verdict.regressions > 0
}

// ---------------------------------------------------------------------------------------
// Markdown

/// Escapes text for a GitHub Markdown table cell: a `|` would end the cell, a newline the
/// row, and GitHub renders some inline HTML, so `<`, `>` and `&` are entities.
fn md(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// Text in backticks; a backtick inside would end the code span, so it becomes a quote.
fn code(s: &str) -> String {
    format!("`{}`", s.replace('`', "'").replace('|', "\\|").replace(['\n', '\r'], " "))
}

/// "_… and 12 more (trend.json has them all)._" after a capped table.
fn left_out(o: &mut String, total: usize, shown: usize) {
    if total > shown {
        let _ = writeln!(o, "\n_… and {} more, left out here; trend.json has them all._", total - shown);
    }
}

/// Renders trend.md: a verdict line first, then one table per concern.
pub fn markdown(report: &TrendReport) -> String {
    let names = Namer::new(report);
    let mut o = String::new();
    let icon = if verdict_bad(report) { "🔴" } else { "🟢" };
    let _ = writeln!(o, "# hcbench trend: {}\n", md(&benchmarks(report)));
    let _ = writeln!(o, "{icon} **{}**\n", md(&report.verdict.summary));
    let _ = writeln!(o, "{}  ", runs_sentence(report, code));
    let _ = writeln!(o, "<sub>{}</sub>\n", md(&settings_sentence(report)));

    let _ = writeln!(o, "## Pass rate by profile\n");
    let _ = writeln!(
        o,
        "| profile | model(s) | latest pass rate | 95% CI | vs window | coverage | cost | tokens | wall/cell | runs | trend |"
    );
    let _ = writeln!(o, "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---|");
    for s in report.series.iter().take(MD_ROWS) {
        let Some(p) = s.points.last() else { continue };
        let change = check_of(report, s).map_or("–".into(), |c| {
            let mark = if c.flagged { " 🔻" } else { "" };
            format!("{}{mark}", points_text(c.diff))
        });
        let rates: Vec<f64> = s.points.iter().map(|p| p.pass_rate).collect();
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            md(&names.series(s)),
            if s.models.is_empty() { "–".into() } else { md(&s.models.join(", ")) },
            pct(p.pass_rate),
            pct_range(&p.pass_rate_ci),
            change,
            pct(p.coverage),
            cost_text(p.cost_usd),
            compact(p.tokens),
            wall_text(p.wall_ms_mean),
            s.points.len(),
            code(&sparkline(&rates)),
        );
    }
    left_out(&mut o, report.series.len(), MD_ROWS);
    let _ = writeln!(
        o,
        "\n<sub>latest = the newest run of each profile; vs window = paired change against the runs before it; the trend shows up to the last {SPARK_RUNS} runs, ▁ = 0% … █ = 100%.</sub>\n"
    );

    let _ =
        writeln!(o, "## Regression checks ({} flagged of {})\n", report.verdict.regressions, report.regressions.len());
    if report.regressions.is_empty() {
        let _ = writeln!(o, "None yet: a check needs an earlier run of the same profile.\n");
    } else {
        let _ = writeln!(
            o,
            "| profile | latest | window | diff | 95% CI | cases (won/lost) | p | p (Holm) | verdict | commits |"
        );
        let _ = writeln!(o, "|---|---:|---:|---:|---|---:|---:|---:|---|---|");
        let checks = checks_in_order(report);
        for c in checks.iter().take(MD_ROWS) {
            let verdict = if c.flagged { format!("**{}**", md(&c.verdict)) } else { md(&c.verdict) };
            let _ = writeln!(
                o,
                "| {} | {} | {} ({} run(s)) | {} | {} | {} ({}/{}) | {} | {} | {} | {} |",
                md(&names.name(&c.benchmark, &c.profile, &c.ablation)),
                pct(c.latest_rate),
                pct(c.window_rate),
                c.window_runs.len(),
                points_text(c.diff),
                points_range(&c.interval),
                c.cases,
                c.wins,
                c.losses,
                p_text(c.p_value),
                p_text(c.p_adjusted),
                verdict,
                code(&commit_range(&c.window_commits.1, &c.latest_commit)),
            );
        }
        left_out(&mut o, checks.len(), MD_ROWS);
        let _ = writeln!(o, "\n<sub>{}</sub>\n", CHECK_NOTE);
    }

    let _ = writeln!(o, "## Flips ({})\n", report.flips.len());
    if report.flips.is_empty() {
        let _ = writeln!(o, "None: no case changed its verdict after a stable streak.\n");
    } else {
        let _ = writeln!(o, "| case | profile | change | streak | runs since | p (Holm) | verdict | commits |");
        let _ = writeln!(o, "|---|---|---|---:|---:|---:|---|---|");
        for f in report.flips.iter().take(MD_ROWS) {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                code(&f.case_id),
                md(&names.name(&f.benchmark, &f.profile, &f.ablation)),
                if f.direction == "pass->fail" { "pass → **fail**".to_string() } else { md(&f.direction) },
                f.streak,
                f.runs_since,
                flip_p(f),
                if f.flagged { "**beyond noise**" } else { "within noise" },
                code(&commit_range(&f.last_old_commit, &f.first_new_commit)),
            );
        }
        left_out(&mut o, report.flips.len(), MD_ROWS);
        let _ = writeln!(o);
    }

    let _ = writeln!(o, "## Quarantine: flaky cases ({})\n", report.flaky.len());
    if report.flaky.is_empty() {
        let _ = writeln!(o, "None: every case kept its verdict under {}.\n", md(&report.settings.control_profile));
    } else {
        let _ = writeln!(o, "| case | benchmark | passed | failed | runs | reason |");
        let _ = writeln!(o, "|---|---|---:|---:|---:|---|");
        for f in report.flaky.iter().take(MD_ROWS) {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} |",
                code(&f.case_id),
                md(&f.benchmark),
                f.passed,
                f.failed,
                f.runs,
                md(&f.reason)
            );
        }
        left_out(&mut o, report.flaky.len(), MD_ROWS);
        let _ = writeln!(o);
    }

    if !report.warnings.is_empty() {
        let _ = writeln!(o, "## Warnings\n");
        for w in report.warnings.iter().take(MD_ROWS) {
            let _ = writeln!(o, "- {}", md(w));
        }
        left_out(&mut o, report.warnings.len(), MD_ROWS);
        let _ = writeln!(o);
    }
    let _ = writeln!(o, "<sub>{}</sub>", md(&how_to_read(report)));
    o
}

// ---------------------------------------------------------------------------------------
// Terminal

/// The terminal summary: one row per series, then the flagged regressions, flips and flaky
/// cases (capped), and the verdict line last, where a CI log's reader looks first.
pub fn terminal(report: &TrendReport) -> String {
    let names = Namer::new(report);
    let mut t = Table::new();
    t.load_preset(presets::UTF8_FULL_CONDENSED);
    t.set_content_arrangement(ContentArrangement::Dynamic);
    t.set_width(80);
    t.set_header(["profile", "runs", "latest", "95% CI", "vs window", "verdict"]);
    for s in &report.series {
        let Some(p) = s.points.last() else { continue };
        let check = check_of(report, s);
        t.add_row([
            names.series(s),
            s.points.len().to_string(),
            pct(p.pass_rate),
            pct_range(&p.pass_rate_ci),
            check.map_or("–".into(), |c| points_text(c.diff)),
            check.map_or("first run".into(), |c| c.verdict.clone()),
        ]);
    }
    for i in [1, 2, 4] {
        if let Some(column) = t.column_mut(i) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    let mut lines = vec![t.to_string()];
    let flagged: Vec<&RegressionCheck> = report.regressions.iter().filter(|c| c.flagged).collect();
    if !flagged.is_empty() {
        lines.push(format!("regressions ({}):", flagged.len()));
        for c in flagged.iter().take(TERMINAL_ROWS) {
            // Two lines, so each fits an 80-column terminal.
            lines.push(format!(
                "  {}: {} -> {}, {} between {}",
                names.name(&c.benchmark, &c.profile, &c.ablation),
                pct(c.window_rate),
                pct(c.latest_rate),
                points_text(c.diff),
                commit_range(&c.window_commits.1, &c.latest_commit)
            ));
            lines.push(format!("    95% CI {}, Holm-adjusted p {}", points_range(&c.interval), p_text(c.p_adjusted)));
        }
        more(&mut lines, flagged.len());
    }
    if !report.flips.is_empty() {
        lines.push(format!("flips ({}):", report.flips.len()));
        for f in report.flips.iter().take(TERMINAL_ROWS) {
            lines.push(format!(
                "  {} {} {} after {} run(s), between {} ({})",
                names.name(&f.benchmark, &f.profile, &f.ablation),
                f.case_id,
                f.direction,
                f.streak,
                commit_range(&f.last_old_commit, &f.first_new_commit),
                if f.flagged { "beyond noise" } else { "within noise" }
            ));
        }
        more(&mut lines, report.flips.len());
    }
    if !report.flaky.is_empty() {
        lines.push(format!("flaky, in quarantine ({}):", report.flaky.len()));
        for f in report.flaky.iter().take(TERMINAL_ROWS) {
            lines.push(format!("  {} {}: {}", f.benchmark, f.case_id, f.reason));
        }
        more(&mut lines, report.flaky.len());
    }
    lines.extend(report.warnings.iter().take(TERMINAL_ROWS).map(|w| format!("warning: {w}")));
    lines.push(format!("trend: {}", report.verdict.summary));
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

fn more(lines: &mut Vec<String>, total: usize) {
    if total > TERMINAL_ROWS {
        lines.push(format!("  … and {} more in trend.md", total - TERMINAL_ROWS));
    }
}

// ---------------------------------------------------------------------------------------
// HTML

/// Size of a series' pass-rate chart in SVG user units, and the plot area's margins.
const CHART: Frame = Frame { width: 640.0, height: 200.0, left: 42.0, right: 14.0, top: 12.0, bottom: 30.0 };
/// Size of the small cost, token and wall-time charts.
const MINI: Frame = Frame { width: 200.0, height: 72.0, left: 6.0, right: 6.0, top: 8.0, bottom: 8.0 };

/// A chart's canvas: where values land.
struct Frame {
    width: f64,
    height: f64,
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
}

impl Frame {
    /// x of the i-th of n points, evenly spaced (runs are events, not a clock: a quiet week
    /// would otherwise squeeze a busy day's runs together).
    fn x(&self, i: usize, n: usize) -> f64 {
        let w = self.width - self.left - self.right;
        if n <= 1 { self.left + w / 2.0 } else { self.left + w * i as f64 / (n - 1) as f64 }
    }

    /// y of a value in 0..=1 (0 at the bottom).
    fn y(&self, v: f64) -> f64 {
        let h = self.height - self.top - self.bottom;
        self.top + h * (1.0 - v.clamp(0.0, 1.0))
    }
}

/// `M x y L x y ...` through the given (x, y) points.
fn polyline(points: &[(f64, f64)]) -> String {
    points
        .iter()
        .enumerate()
        .map(|(i, (x, y))| format!("{}{} {}", if i == 0 { "M" } else { "L" }, num(*x), num(*y)))
        .collect::<Vec<_>>()
        .join(" ")
}

#[derive(Serialize)]
struct Page {
    title: String,
    css: String,
    version: &'static str,
    benchmarks: String,
    generated_at: String,
    runs_sentence: String,
    settings_sentence: String,
    how_to_read: String,
    check_note: &'static str,
    verdict: String,
    verdict_bad: bool,
    cards: Vec<Card>,
    series: Vec<SeriesView>,
    /// Rows per list before capping, for the navigation.
    totals: Totals,
    regressions: Vec<CheckRow>,
    regressions_left_out: usize,
    flips: Vec<FlipRow>,
    flips_left_out: usize,
    flaky: Vec<FlakyRow>,
    flaky_left_out: usize,
    control_profile: String,
    categories: Vec<CategoryRow>,
    categories_left_out: usize,
    warnings: Vec<String>,
    runs: Vec<RunRow>,
    runs_left_out: usize,
}

#[derive(Serialize)]
struct Totals {
    regressions: usize,
    flips: usize,
    flaky: usize,
}

/// A stat card of the header.
#[derive(Serialize)]
struct Card {
    label: &'static str,
    value: String,
    /// `bad` draws it as a warning, `good` as all clear, empty as neutral.
    tone: &'static str,
}

#[derive(Serialize)]
struct SeriesView {
    name: String,
    models: String,
    runs: usize,
    latest: String,
    ci: String,
    coverage: String,
    change: String,
    verdict: String,
    flagged: bool,
    chart: Chart,
    minis: Vec<Mini>,
}

/// The pass-rate chart: interval band, pass-rate line with one point per run, coverage line.
#[derive(Serialize)]
struct Chart {
    width: String,
    height: String,
    /// Left and right end of the plot area (grid lines), where the y labels end, and the
    /// baseline of the x labels.
    left: String,
    right: String,
    tick_x: String,
    label_y: String,
    band: String,
    /// With a single run there is no band to draw; its interval is a whisker instead.
    whisker: String,
    line: String,
    coverage: String,
    points: Vec<Dot>,
    grid: Vec<Tick>,
    x_labels: Vec<XLabel>,
    /// Screen-reader summary of the chart.
    label: String,
}

#[derive(Serialize)]
struct Dot {
    x: String,
    y: String,
    run_id: String,
    title: String,
    /// The latest point of a series with a flagged regression.
    flagged: bool,
}

#[derive(Serialize)]
struct Tick {
    y: String,
    label: String,
}

#[derive(Serialize)]
struct XLabel {
    x: String,
    anchor: &'static str,
    text: String,
}

/// A small chart of one resource (cost, tokens, wall time) over the runs, on 0..max.
#[derive(Serialize)]
struct Mini {
    name: &'static str,
    width: String,
    height: String,
    /// The zero line.
    axis: String,
    latest: String,
    max: String,
    line: String,
    points: Vec<Dot>,
    /// No run had a value (a profile without prices has no cost).
    empty: bool,
}

#[derive(Serialize)]
struct CheckRow {
    name: String,
    latest: String,
    window: String,
    window_runs: usize,
    diff: String,
    ci: String,
    cases: usize,
    record: String,
    p: String,
    p_adjusted: String,
    verdict: String,
    flagged: bool,
    commits: String,
    latest_run: String,
}

#[derive(Serialize)]
struct FlipRow {
    case_id: String,
    name: String,
    direction: String,
    new_failure: bool,
    streak: usize,
    runs_since: usize,
    p: String,
    flagged: bool,
    commits: String,
    runs: String,
}

#[derive(Serialize)]
struct FlakyRow {
    case_id: String,
    benchmark: String,
    passed: usize,
    failed: usize,
    runs: usize,
    reason: String,
}

#[derive(Serialize)]
struct CategoryRow {
    name: String,
    category: String,
    /// The first row of each group names it; the rest leave it blank.
    first: bool,
    runs: usize,
    latest: String,
    ci: String,
    coverage: String,
    spark: String,
    spark_label: String,
}

#[derive(Serialize)]
struct RunRow {
    run_id: String,
    started_at: String,
    command: String,
    commit: String,
    dirty: bool,
    benchmark: String,
    cells: usize,
}

/// Renders trend.html.
pub fn html(report: &TrendReport) -> Result<String, ExportError> {
    let err = |e: tera::Error| ExportError::Render { format: "html", message: super::html::error_chain(&e) };
    let mut tera = Tera::default();
    tera.add_raw_template(TEMPLATE_NAME, TEMPLATE).map_err(err)?;
    let context = Context::from_serialize(&page(report)).map_err(err)?;
    tera.render(TEMPLATE_NAME, &context).map_err(err)
}

/// Keeps the first `cap` rows and says how many were dropped.
fn capped<T>(mut rows: Vec<T>, cap: usize) -> (Vec<T>, usize) {
    let dropped = rows.len().saturating_sub(cap);
    rows.truncate(cap);
    (rows, dropped)
}

fn page(report: &TrendReport) -> Page {
    let names = Namer::new(report);
    let flagged = report.verdict.regressions;
    let cards = vec![
        Card {
            label: "regressions",
            value: format!("{flagged} of {}", report.regressions.len()),
            tone: if flagged > 0 { "bad" } else { "good" },
        },
        Card { label: "flips", value: report.verdict.flips.to_string(), tone: "" },
        Card {
            label: "flaky (quarantine)",
            value: report.verdict.flaky.to_string(),
            tone: if report.verdict.flaky > 0 { "warn" } else { "" },
        },
        Card { label: "runs", value: report.runs.len().to_string(), tone: "" },
        Card { label: "series", value: report.series.len().to_string(), tone: "" },
        Card {
            label: "latest commit",
            value: short(report.runs.last().map_or("", |r| r.git_commit.as_str())).to_string(),
            tone: "",
        },
    ];
    let (regressions, regressions_left_out) =
        capped(checks_in_order(report).into_iter().map(|c| check_row(&names, c)).collect(), HTML_ROWS);
    let (flips, flips_left_out) = capped(
        report
            .flips
            .iter()
            .map(|f| FlipRow {
                case_id: f.case_id.clone(),
                name: names.name(&f.benchmark, &f.profile, &f.ablation),
                direction: f.direction.replace("->", " → "),
                new_failure: f.direction == "pass->fail",
                streak: f.streak,
                runs_since: f.runs_since,
                p: flip_p(f),
                flagged: f.flagged,
                commits: commit_range(&f.last_old_commit, &f.first_new_commit),
                runs: format!("{} → {}", f.last_old_run, f.first_new_run),
            })
            .collect(),
        HTML_ROWS,
    );
    let (flaky, flaky_left_out) = capped(
        report
            .flaky
            .iter()
            .map(|f| FlakyRow {
                case_id: f.case_id.clone(),
                benchmark: f.benchmark.clone(),
                passed: f.passed,
                failed: f.failed,
                runs: f.runs,
                reason: f.reason.clone(),
            })
            .collect(),
        HTML_ROWS,
    );
    let (categories, categories_left_out) = capped(category_rows(&names, &report.categories), HTML_ROWS);
    // The newest runs are the ones a reader looks for.
    let (runs, runs_left_out) = capped(
        report
            .runs
            .iter()
            .rev()
            .map(|r| RunRow {
                run_id: r.run_id.clone(),
                started_at: r.started_at.clone(),
                command: r.command.clone(),
                commit: short(&r.git_commit).to_string(),
                dirty: r.git_dirty == Some(true),
                benchmark: r.benchmark.clone(),
                cells: r.cells,
            })
            .collect(),
        HTML_ROWS,
    );
    Page {
        title: format!("hcbench trend · {}", benchmarks(report)),
        css: format!("{BASE_CSS}\n{TREND_CSS}"),
        version: env!("CARGO_PKG_VERSION"),
        benchmarks: benchmarks(report),
        generated_at: report.generated_at.clone(),
        runs_sentence: runs_sentence(report, str::to_string),
        settings_sentence: settings_sentence(report),
        how_to_read: how_to_read(report),
        check_note: CHECK_NOTE,
        verdict: report.verdict.summary.clone(),
        verdict_bad: verdict_bad(report),
        cards,
        totals: Totals { regressions: report.regressions.len(), flips: report.flips.len(), flaky: report.flaky.len() },
        series: report.series.iter().map(|s| series_view(report, &names, s)).collect(),
        regressions,
        regressions_left_out,
        flips,
        flips_left_out,
        flaky,
        flaky_left_out,
        control_profile: report.settings.control_profile.clone(),
        categories,
        categories_left_out,
        warnings: report.warnings.clone(),
        runs,
        runs_left_out,
    }
}

fn check_row(names: &Namer, c: &RegressionCheck) -> CheckRow {
    CheckRow {
        name: names.name(&c.benchmark, &c.profile, &c.ablation),
        latest: pct(c.latest_rate),
        window: pct(c.window_rate),
        window_runs: c.window_runs.len(),
        diff: points_text(c.diff),
        ci: points_range(&c.interval),
        cases: c.cases,
        record: format!("{}/{}", c.wins, c.losses),
        p: p_text(c.p_value),
        p_adjusted: p_text(c.p_adjusted),
        verdict: c.verdict.clone(),
        flagged: c.flagged,
        commits: commit_range(&c.window_commits.1, &c.latest_commit),
        latest_run: c.latest_run.clone(),
    }
}

/// What a point's hover text says: which run, which commit, what value.
fn point_title(p: &Point, what: &str) -> String {
    format!("run {} · commit {} · {} · {what}", p.run_id, short(&p.git_commit), day(&p.started_at))
}

fn series_view(report: &TrendReport, names: &Namer, s: &Series) -> SeriesView {
    let check = check_of(report, s);
    let flagged = check.is_some_and(|c| c.flagged);
    let latest = s.points.last();
    SeriesView {
        name: names.series(s),
        models: s.models.join(", "),
        runs: s.points.len(),
        latest: latest.map_or("–".into(), |p| pct(p.pass_rate)),
        ci: latest.map_or(String::new(), |p| pct_range(&p.pass_rate_ci)),
        coverage: latest.map_or("–".into(), |p| pct(p.coverage)),
        change: check.map_or("–".into(), |c| points_text(c.diff)),
        verdict: check.map_or("first run".into(), |c| c.verdict.clone()),
        flagged,
        chart: pass_chart(names.series(s), &s.points, flagged),
        minis: vec![
            mini("cost", &s.points, |p| p.cost_usd, cost_text),
            mini("tokens", &s.points, |p| Some(p.tokens as f64), |v| compact(v.map_or(0, |v| v.round() as u64))),
            mini("wall time per cell", &s.points, |p| Some(p.wall_ms_mean), |v| v.map_or("–".into(), wall_text)),
        ],
    }
}

fn pass_chart(name: String, points: &[Point], flagged: bool) -> Chart {
    let f = &CHART;
    let n = points.len();
    let at = |i: usize, v: f64| (f.x(i, n), f.y(v));
    let rate: Vec<(f64, f64)> = points.iter().enumerate().map(|(i, p)| at(i, p.pass_rate)).collect();
    let coverage: Vec<(f64, f64)> = points.iter().enumerate().map(|(i, p)| at(i, p.coverage)).collect();
    let band = if n > 1 {
        let upper = points.iter().enumerate().map(|(i, p)| at(i, p.pass_rate_ci.hi));
        let lower = points.iter().enumerate().rev().map(|(i, p)| at(i, p.pass_rate_ci.lo));
        upper.chain(lower).map(|(x, y)| format!("{},{}", num(x), num(y))).collect::<Vec<_>>().join(" ")
    } else {
        String::new()
    };
    let whisker = match points {
        [p] => {
            let (x, lo, hi) = (f.x(0, 1), f.y(p.pass_rate_ci.lo), f.y(p.pass_rate_ci.hi));
            format!("M{0} {1}V{2}M{3} {1}H{4}M{3} {2}H{4}", num(x), num(lo), num(hi), num(x - 5.0), num(x + 5.0))
        }
        _ => String::new(),
    };
    let dots = points
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let (x, y) = at(i, p.pass_rate);
            Dot {
                x: num(x),
                y: num(y),
                run_id: p.run_id.clone(),
                title: point_title(
                    p,
                    &format!(
                        "pass rate {} ({}) · coverage {} · {}/{} passed",
                        pct(p.pass_rate),
                        pct_range(&p.pass_rate_ci),
                        pct(p.coverage),
                        p.passed,
                        p.cells
                    ),
                ),
                flagged: flagged && i + 1 == n,
            }
        })
        .collect();
    let grid = [0.0, 0.25, 0.5, 0.75, 1.0].iter().map(|v| Tick { y: num(f.y(*v)), label: pct(*v) }).collect();
    let label_y = |p: &Point| format!("{} · {}", day(&p.started_at), short(&p.git_commit));
    let x_labels = match points {
        [] => Vec::new(),
        [p] => vec![XLabel { x: num(f.x(0, 1)), anchor: "middle", text: label_y(p) }],
        [first, .., last] => vec![
            XLabel { x: num(f.x(0, n)), anchor: "start", text: label_y(first) },
            XLabel { x: num(f.x(n - 1, n)), anchor: "end", text: label_y(last) },
        ],
    };
    let label = match (points.first(), points.last()) {
        (Some(first), Some(last)) => format!(
            "Pass rate of {name} over {n} run(s): {} in the first, {} in the latest",
            pct(first.pass_rate),
            pct(last.pass_rate)
        ),
        _ => format!("Pass rate of {name}: no runs"),
    };
    Chart {
        width: num(f.width),
        height: num(f.height),
        left: num(f.left),
        right: num(f.width - f.right),
        tick_x: num(f.left - 6.0),
        label_y: num(f.height - 8.0),
        band,
        whisker,
        line: polyline(&rate),
        coverage: polyline(&coverage),
        points: dots,
        grid,
        x_labels,
        label,
    }
}

/// A small chart of one value per run on 0..max; runs without a value are left out of the
/// line (a profile that gained prices mid-history starts its cost line there).
fn mini(
    name: &'static str,
    points: &[Point],
    value: impl Fn(&Point) -> Option<f64>,
    text: impl Fn(Option<f64>) -> String,
) -> Mini {
    let f = &MINI;
    let n = points.len();
    let max = points.iter().filter_map(&value).fold(0.0_f64, f64::max);
    let scaled = |v: f64| if max > 0.0 { v / max } else { 0.0 };
    let mut line = Vec::new();
    let mut dots = Vec::new();
    for (i, p) in points.iter().enumerate() {
        let Some(v) = value(p) else { continue };
        let (x, y) = (f.x(i, n), f.y(scaled(v)));
        line.push((x, y));
        dots.push(Dot {
            x: num(x),
            y: num(y),
            run_id: p.run_id.clone(),
            title: point_title(p, &format!("{name} {}", text(Some(v)))),
            flagged: false,
        });
    }
    Mini {
        name,
        width: num(f.width),
        height: num(f.height),
        axis: format!("M{} {}H{}", num(f.left), num(f.y(0.0)), num(f.width - f.right)),
        latest: text(points.last().and_then(&value)),
        max: if dots.is_empty() { "–".into() } else { text(Some(max)) },
        line: polyline(&line),
        empty: dots.is_empty(),
        points: dots,
    }
}

fn category_rows(names: &Namer, categories: &[Series]) -> Vec<CategoryRow> {
    let mut previous: Option<String> = None;
    categories
        .iter()
        .filter_map(|s| {
            let p = s.points.last()?;
            let name = names.series(s);
            let first = previous.as_deref() != Some(name.as_str());
            previous = Some(name.clone());
            let rates: Vec<f64> = s.points.iter().map(|p| p.pass_rate).collect();
            let shown = &rates[rates.len().saturating_sub(SPARK_RUNS)..];
            Some(CategoryRow {
                name,
                category: s.category.clone().unwrap_or_default(),
                first,
                runs: s.points.len(),
                latest: pct(p.pass_rate),
                ci: pct_range(&p.pass_rate_ci),
                coverage: pct(p.coverage),
                spark: sparkline(&rates),
                spark_label: format!(
                    "pass rate over the last {} run(s): {}",
                    shown.len(),
                    shown.iter().map(|r| pct(*r)).collect::<Vec<_>>().join(", ")
                ),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{Interval, Method};
    use crate::trend::{Filters, FlakyCase, Flip, RunInfo, TREND_SCHEMA_VERSION, TrendSettings, TrendVerdict};

    const HOSTILE: &str = "<script>alert('x')</script>|&\"";

    fn commit(i: usize) -> String {
        format!("{i:x}").repeat(40)[..40].to_string()
    }

    fn point(i: usize, rate: f64) -> Point {
        Point {
            run_id: format!("run-{i}"),
            started_at: format!("2026-01-{:02}T00:00:00Z", i + 1),
            git_commit: commit(i + 1),
            cells: 20,
            verdicts: 20,
            passed: (rate * 20.0).round() as usize,
            pass_rate: rate,
            pass_rate_ci: Interval { lo: (rate - 0.15).max(0.0), hi: (rate + 0.1).min(1.0), method: Method::Wilson },
            coverage: 1.0,
            cost_usd: Some(0.25 + i as f64 * 0.01),
            tokens: 12_000 + i as u64,
            wall_ms_mean: 1500.0,
        }
    }

    fn series(profile: &str, rates: &[f64]) -> Series {
        Series {
            benchmark: "hc-bench".into(),
            profile: profile.into(),
            ablation: String::new(),
            category: None,
            models: vec!["gpt-test".into()],
            points: rates.iter().enumerate().map(|(i, r)| point(i, *r)).collect(),
        }
    }

    fn check(profile: &str, diff: f64, flagged: bool) -> RegressionCheck {
        RegressionCheck {
            benchmark: "hc-bench".into(),
            profile: profile.into(),
            ablation: String::new(),
            latest_run: "run-5".into(),
            latest_commit: commit(6),
            window_runs: (0..5).rev().map(|i| format!("run-{i}")).collect(),
            window_commits: (commit(1), commit(5)),
            latest_rate: 0.9 + diff,
            window_rate: 0.9,
            diff,
            interval: Interval { lo: diff - 0.1, hi: diff + 0.1, method: Method::ExactSign },
            cases: 20,
            wins: 0,
            losses: if flagged { 14 } else { 1 },
            p_value: if flagged { 0.0001 } else { 1.0 },
            p_adjusted: if flagged { 0.0002 } else { 1.0 },
            method: Method::ExactSign,
            verdict: if flagged { "regression" } else { "within noise" }.into(),
            flagged,
        }
    }

    /// Six runs of two profiles; `agent` drops from 90% to 20% in the last run.
    fn report() -> TrendReport {
        let runs = (0..6)
            .map(|i| RunInfo {
                run_id: format!("run-{i}"),
                started_at: format!("2026-01-{:02}T00:00:00Z", i + 1),
                command: "matrix".into(),
                git_commit: commit(i + 1),
                git_dirty: Some(false),
                hcbench_version: "0.1.0".into(),
                benchmark: "hc-bench".into(),
                benchmark_digest: "d".into(),
                cells: 40,
            })
            .collect();
        let mut category = series("agent", &[0.9, 0.9, 0.85, 0.9, 0.9, 0.2]);
        category.category = Some("bugfix".into());
        TrendReport {
            schema_version: TREND_SCHEMA_VERSION,
            generated_at: "2026-01-07T00:00:00Z".into(),
            history: "reports/history".into(),
            filters: Filters { since: None, since_cutoff: None, profiles: Vec::new(), benchmark: None },
            settings: TrendSettings { window: 5, flip_streak: 3, alpha: 0.05, control_profile: "oracle".into() },
            files: 6,
            rows: 240,
            skipped_rows: 0,
            warnings: vec!["a warning with <b>markup</b>".into()],
            runs,
            series: vec![
                series("agent", &[0.9, 0.9, 0.85, 0.9, 0.9, 0.2]),
                series("oracle", &[1.0, 1.0, 1.0, 1.0, 1.0, 1.0]),
            ],
            categories: vec![category],
            regressions: vec![check("agent", -0.7, true), check("oracle", 0.0, false)],
            flips: vec![Flip {
                benchmark: "hc-bench".into(),
                profile: "agent".into(),
                ablation: String::new(),
                case_id: "fix-3".into(),
                direction: "pass->fail".into(),
                streak: 5,
                last_old_run: "run-4".into(),
                last_old_commit: commit(5),
                first_new_run: "run-5".into(),
                first_new_commit: commit(6),
                runs_since: 1,
                p_value: 0.001,
                p_adjusted: 0.02,
                flagged: true,
            }],
            flaky: vec![FlakyCase {
                benchmark: "hc-bench".into(),
                case_id: "fix-9".into(),
                passed: 3,
                failed: 3,
                runs: 6,
                reason: "3 passed, 3 failed over 6 run(s) under oracle".into(),
            }],
            verdict: TrendVerdict {
                regressions: 1,
                flips: 1,
                flaky: 1,
                summary: "REGRESSION: agent -70.0 points at 6666666666; 1 flip(s); 1 flaky case(s) in quarantine"
                    .into(),
                exit_code: 7,
            },
        }
    }

    /// The same report with nothing flagged.
    fn calm() -> TrendReport {
        let mut r = report();
        r.regressions = vec![check("agent", 0.0, false), check("oracle", 0.0, false)];
        r.flips.clear();
        r.flaky.clear();
        r.verdict = TrendVerdict {
            regressions: 0,
            flips: 0,
            flaky: 0,
            summary: "no regression beyond noise in 2 check(s); 0 flip(s); 0 flaky case(s) in quarantine".into(),
            exit_code: 0,
        };
        r
    }

    #[test]
    fn the_sparkline_uses_the_absolute_scale() {
        assert_eq!(sparkline(&[0.0, 0.5, 1.0]), "▁▅█");
        assert_eq!(sparkline(&[0.9, 0.9, 0.2]), "▇▇▂");
        assert_eq!(sparkline(&[]), "");
        // Out-of-range values are clamped, not a panic.
        assert_eq!(sparkline(&[-0.5, 1.5]), "▁█");
        // Only the latest SPARK_RUNS runs are drawn, and the newest is last.
        let mut rates = vec![0.0; 100];
        rates.push(1.0);
        let s = sparkline(&rates);
        assert_eq!(s.chars().count(), SPARK_RUNS);
        assert!(s.ends_with('█'));
    }

    #[test]
    fn a_flagged_regression_shows_in_all_three_formats() {
        let r = report();
        let md = markdown(&r);
        let first = md.lines().find(|l| !l.is_empty() && !l.starts_with('#')).unwrap();
        assert!(first.starts_with("🔴 **REGRESSION: agent"), "the verdict comes first: {first}");
        let row = md.lines().find(|l| l.starts_with("| agent |") && l.contains("**regression**")).expect("a row");
        for want in [
            "90.0%",
            "20.0%",
            "-70.0 pts",
            "-80.0 … -60.0 pts (exact sign test)",
            "0.0001",
            "0.0002",
            "`5555555555..6666666666`",
        ] {
            assert!(row.contains(want), "the regression row shows {want}: {row}");
        }
        assert!(md.contains("| agent | gpt-test | 20.0% |"), "the series table leads with the latest rate:\n{md}");
        assert!(md.contains("`▇▇▇▇▇▂`"), "the series has its sparkline:\n{md}");
        assert!(
            md.contains(
                "| `fix-3` | agent | pass → **fail** | 5 | 1 | 0.001 (0.02) | **beyond noise** | `5555555555..6666666666` |"
            ),
            "{md}"
        );
        assert!(md.contains("## Quarantine: flaky cases (1)") && md.contains("| `fix-9` |"));

        let term = terminal(&r);
        assert!(term.trim_end().lines().last().unwrap().starts_with("trend: REGRESSION: agent"));
        assert!(
            term.contains("regressions (1):")
                && term.contains("agent: 90.0% -> 20.0%, -70.0 pts between 5555555555..6666666666\n    95% CI -80.0 … -60.0 pts (exact sign test), Holm-adjusted p 0.0002")
        );
        assert!(term.contains("agent fix-3 pass->fail after 5 run(s)"));
        assert!(term.contains("fix-9: 3 passed, 3 failed"));
        for line in term.lines() {
            assert!(line.chars().count() <= 80 || !line.starts_with(['│', '┌', '├', '└', '╞']), "{line}");
        }

        let html = html(&r).unwrap();
        assert!(html.contains("<div class=\"verdict-box bad\">"), "the verdict box is a warning");
        assert!(html.contains("<tr class=\"flagged\" data-profile=\"agent\">"));
        assert!(html.contains("class=\"pt flagged\""), "the regressed point is marked on its chart");
        // One point per run on each series' pass-rate chart, with its hover title.
        let dots = html.matches("<circle class=\"pt\"").count() + html.matches("<circle class=\"pt flagged\"").count();
        assert_eq!(dots, 12);
        assert!(html.contains("<title>run run-5 · commit 6666666666 · 2026-01-06 · pass rate 20.0%"));
    }

    #[test]
    fn a_calm_report_says_so() {
        let r = calm();
        let md = markdown(&r);
        assert!(md.contains("🟢 **no regression beyond noise"));
        assert!(!md.contains("**regression**") && !md.contains("🔻"));
        assert!(md.contains("## Flips (0)\n\nNone"));
        let html = html(&r).unwrap();
        assert!(html.contains("<div class=\"verdict-box\">"));
        assert!(!html.contains("class=\"flagged\"") && !html.contains("pt flagged"));
        assert!(terminal(&r).contains("within noise"));
        assert!(!terminal(&r).contains("regressions ("));
    }

    #[test]
    fn hostile_names_are_escaped() {
        let mut r = report();
        r.series[0].profile = HOSTILE.into();
        r.regressions[0].profile = HOSTILE.into();
        r.flips[0].case_id = HOSTILE.into();
        r.flaky[0].case_id = HOSTILE.into();
        r.categories[0].category = Some(HOSTILE.into());
        r.runs[5].run_id = HOSTILE.into();
        r.series[0].points[5].run_id = HOSTILE.into();
        let html = html(&r).unwrap();
        assert!(!html.contains("<script"), "no script element, not even one smuggled in by a name");
        assert!(html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;|&amp;&quot;"));
        assert!(!html.contains("http://") && !html.contains("https://"), "the page references no URL");

        let md = markdown(&r);
        // GitHub renders inline HTML outside code spans; inside one, text shows as it is.
        let outside_code: String = md.lines().flat_map(|l| l.split('`').step_by(2)).collect();
        assert!(!outside_code.contains("<script"), "no raw markup outside code spans:\n{md}");
        assert!(md.contains("| `<script>alert('x')</script>\\|&\"` |"), "a case id is a code span:\n{md}");
        assert!(md.contains("&lt;script&gt;alert('x')&lt;/script&gt;\\|&amp;\""));
        // A `|` in a name cannot split a table row: every row of the series table has the
        // header's cell count.
        let cells = |l: &str| l.replace("\\|", "").matches('|').count();
        let header = md.lines().find(|l| l.starts_with("| profile | model(s)")).unwrap();
        let rows: Vec<&str> = md
            .lines()
            .skip_while(|l| !l.starts_with("| profile | model(s)"))
            .take_while(|l| l.starts_with('|'))
            .collect();
        assert_eq!(rows.len(), 4);
        assert!(rows.iter().all(|l| cells(l) == cells(header)), "{rows:#?}");
    }

    #[test]
    fn long_lists_are_capped_and_say_how_many_were_left_out() {
        let mut r = report();
        let flip = r.flips[0].clone();
        r.flips = (0..MD_ROWS + 7).map(|i| Flip { case_id: format!("case-{i:03}"), ..flip.clone() }).collect();
        r.flaky =
            (0..HTML_ROWS + 3).map(|i| FlakyCase { case_id: format!("flaky-{i:03}"), ..r.flaky[0].clone() }).collect();
        let md = markdown(&r);
        assert!(md.contains(&format!("`case-{:03}`", MD_ROWS - 1)));
        assert!(!md.contains(&format!("`case-{MD_ROWS:03}`")));
        assert!(md.contains("_… and 7 more, left out here; trend.json has them all._"));
        assert!(md.contains(&format!("_… and {} more,", HTML_ROWS + 3 - MD_ROWS)));
        let html = html(&r).unwrap();
        assert_eq!(html.matches("<tr class=\"flaky\"").count(), HTML_ROWS);
        assert!(html.contains("… and 3 more"));
        let term = terminal(&r);
        assert!(term.contains(&format!("… and {} more in trend.md", MD_ROWS + 7 - TERMINAL_ROWS)));
    }

    #[test]
    fn a_single_run_draws_a_whisker_not_a_band() {
        let mut r = calm();
        r.regressions.clear();
        for s in &mut r.series {
            s.points.truncate(1);
        }
        let html = html(&r).unwrap();
        assert_eq!(html.matches("<circle class=\"pt\"").count(), 2);
        assert!(!html.contains("class=\"band\""));
        assert_eq!(html.matches("class=\"whisker\"").count(), 2);
        assert!(terminal(&r).contains("first run"));
    }

    #[test]
    fn rendering_is_deterministic() {
        let r = report();
        assert_eq!(html(&r).unwrap(), html(&r).unwrap());
        assert_eq!(markdown(&r), markdown(&r));
    }

    #[test]
    fn write_all_writes_the_three_files() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("trend");
        let written = write_all(&out, &report()).unwrap();
        let names: Vec<String> =
            written.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
        assert_eq!(names, ["trend.json", "trend.md", "trend.html"]);
        let back: TrendReport = serde_json::from_slice(&std::fs::read(out.join("trend.json")).unwrap()).unwrap();
        assert_eq!(back, report());
        assert_eq!(std::fs::read_to_string(out.join("trend.md")).unwrap(), markdown(&report()));
    }
}
