//! `report.html`: one self-contained page for people: summary, comparisons, per-category
//! table, a heatmap of cases x profiles with one square per run cell, and each cell's trace
//! timeline shown when its square is clicked.
//!
//! The page is a tera template compiled into the binary (`include_str!`) with its CSS and JS
//! inlined, so it opens offline from `file://` and can be attached to a CI job as one file. A
//! Content-Security-Policy of `default-src 'none'` makes the browser refuse any network fetch,
//! so a stray external URL would show up as a console error instead of a silent dependency.
//!
//! All formatting (percentages, bar geometry, diff colouring) happens here in Rust, into a
//! plain view model; the template only loops and prints, with HTML autoescaping on. Text from
//! traces (tool output, reasons, diffs) is therefore always escaped. Timelines are rendered as
//! `<section>` markup by the same templates, then carried compressed in one base64 bundle
//! (src/report/bundle.rs), which holds no `<` and so needs no `</script>` escape rule. Output
//! depends only on the [`MatrixReport`] (no render time, no hash-map iteration), so
//! `hcbench report RUN_DIR` reproduces the live run's file byte for byte.

use std::collections::{HashMap, HashSet};

use serde::Serialize;
use tera::{Context, Tera};

use std::io::Write;

use super::model::{MatrixReport, Timeline, TimelineEntry, side_timeline_cells, split_layout};
use super::{ExportError, Exporter, comparisons_sentence, diff_range, pct, pct_range, secs};
use crate::aggregate::{Comparison, GroupStats, mde_words, p_text};
use crate::replay::CellSummary;
use crate::stats::{Interval, Verdict};

/// The `report.html` exporter.
pub struct Html;

/// The template name ends in `.html` so tera autoescapes everything it prints.
const TEMPLATE_NAME: &str = "report.html";
const TEMPLATE: &str = include_str!("templates/report.html");
const CSS: &str = include_str!("templates/report.css");
const JS: &str = include_str!("templates/report.js");
/// `hcbenchInflate`, which both pages' scripts use to open a timeline bundle.
const INFLATE_JS: &str = include_str!("templates/inflate.js");
/// The pass-rate cell shared by the profile and category tables (`{% include %}`d).
const RATE_CELL: &str = include_str!("templates/rate_cell.html");
/// The breakdown table shared by "By category" and "By split" (`{% include %}`d).
const GROUP_TABLE: &str = include_str!("templates/group_table.html");
/// One cell's timeline section: `{% include %}`d by the page, rendered alone for side files.
const TIMELINE_TEMPLATE: &str = "timeline.html";
const TIMELINE: &str = include_str!("templates/timeline.html");
/// The script of a split page: draws the heatmap from the cell index, loads timelines.
const SPLIT_JS: &str = include_str!("templates/report_split.js");

/// Outcome classes in the order the legend shows them: (label in data, words, glyph). The
/// glyph repeats the colour's meaning so the heatmap does not rely on colour alone.
pub(crate) const OUTCOMES: [(&str, &str, &str); 8] = [
    ("passed", "passed", "✓"),
    ("failed", "failed", "✕"),
    ("timeout", "timeout", "T"),
    ("provider_error", "provider error", "P"),
    ("verifier_error", "verifier error", "V"),
    ("harness_error", "harness error", "H"),
    ("cancelled", "cancelled", "C"),
    ("incomplete", "incomplete", "?"),
];

/// Width in SVG user units of the small pass-rate bars.
const BAR_WIDTH: f64 = 120.0;
/// Width of the comparison interval plot, which spans a difference of -1 to +1.
const DIFF_WIDTH: f64 = 160.0;
/// Longest reason shown in a heatmap tooltip; the timeline shows it whole.
pub(crate) const TOOLTIP_REASON: usize = 200;

impl Exporter for Html {
    fn file_name(&self) -> &'static str {
        "report.html"
    }

    /// A run of up to [`TIMELINE_CELLS`](super::model::TIMELINE_CELLS) cells is rendered whole.
    /// A larger run's page holds no per-cell markup: it is rendered (bounded), and its cell
    /// index is streamed in at the template's marker ([`super::html_split::write_index`]).
    fn write(&self, report: &MatrixReport, out: &mut dyn Write) -> Result<(), ExportError> {
        if !split_layout(&report.cells) {
            return render_to(report, out);
        }
        let page = render(report)?;
        let (head, tail) = page.split_once(INDEX_MARKER).ok_or_else(|| ExportError::Render {
            format: "html",
            message: "the template lost its cell index marker".into(),
        })?;
        out.write_all(head.as_bytes())?;
        super::html_split::write_index(report, out)?;
        out.write_all(tail.as_bytes())?;
        Ok(())
    }
}

/// Where a split page's cell index goes. Only the template writes it: text from traces is
/// escaped, so it cannot forge one.
const INDEX_MARKER: &str = "<!--hcbench:cells-index-->";

/// The templates with autoescaping, ready to render the page or one timeline.
pub(crate) fn templates() -> Result<Tera, ExportError> {
    let mut tera = Tera::default();
    tera.add_raw_template("rate_cell.html", RATE_CELL).map_err(tera_error)?;
    tera.add_raw_template("group_table.html", GROUP_TABLE).map_err(tera_error)?;
    tera.add_raw_template(TIMELINE_TEMPLATE, TIMELINE).map_err(tera_error)?;
    tera.add_raw_template(TEMPLATE_NAME, TEMPLATE).map_err(tera_error)?;
    Ok(tera)
}

pub(crate) fn tera_error(e: tera::Error) -> ExportError {
    ExportError::Render { format: "html", message: error_chain(&e) }
}

/// Renders the whole page (a split page with its index marker still in place).
pub(crate) fn render(report: &MatrixReport) -> Result<String, ExportError> {
    let mut out = Vec::new();
    render_to(report, &mut out)?;
    String::from_utf8(out).map_err(|e| ExportError::Render { format: "html", message: e.to_string() })
}

fn render_to(report: &MatrixReport, out: &mut dyn Write) -> Result<(), ExportError> {
    let tera = templates()?;
    let mut page = Page::build(report);
    if !page.timelines.is_empty() {
        let sections = std::mem::take(&mut page.timelines)
            .iter()
            .map(|t| render_view(&tera, t, report.epochs))
            .collect::<Result<Vec<String>, _>>()?;
        page.timelines_z = super::bundle::encode(&sections)?;
    }
    let context = Context::from_serialize(&page).map_err(tera_error)?;
    tera.render_to(TEMPLATE_NAME, &context, out).map_err(tera_error)
}

/// Renders one cell's timeline `<section>`, as a one-file page's bundle holds it, for a split
/// page's side files.
pub(crate) fn render_timeline(
    tera: &Tera,
    cell: &CellSummary,
    timeline: Option<&Timeline>,
    epochs: u32,
) -> Result<String, ExportError> {
    render_view(tera, &timeline_view(cell, &dom_id_of(&cell.cell_id), timeline), epochs)
}

fn render_view(tera: &Tera, view: &TimelineView, epochs: u32) -> Result<String, ExportError> {
    let mut context = Context::new();
    context.insert("t", view);
    context.insert("epochs", &epochs);
    tera.render(TIMELINE_TEMPLATE, &context).map_err(tera_error)
}

/// tera puts the useful part (template line, undefined variable) in the error's sources.
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    message
}

#[derive(Serialize)]
struct Page {
    title: String,
    css: &'static str,
    js: &'static str,
    inflate_js: &'static str,
    version: &'static str,
    command: String,
    benchmark: String,
    run_id: String,
    started_at: String,
    profiles: Vec<String>,
    epochs: u32,
    cases: usize,
    cells: usize,
    passed: usize,
    pass_rate: String,
    /// Every outcome class with its count over all cells, in legend order.
    outcomes: Vec<OutcomeCount>,
    /// The stacked bar of outcome counts in the header.
    totals_bar: Vec<Segment>,
    summary: Vec<SummaryRow>,
    comparisons: Vec<ComparisonRow>,
    /// "3 comparisons; each verdict uses its Holm-adjusted p-value..." with several.
    comparisons_note: Option<String>,
    /// The power statement (minimum detectable effect).
    power: String,
    categories: Vec<BreakdownRow>,
    /// Per-split rows, same shape as the category rows.
    splits: Vec<BreakdownRow>,
    /// An ablate run's tables (context, effects, failures...); empty for other commands.
    ablation: Vec<super::ablation::TableView>,
    /// The multi-session cells' table (src/report/sessions.rs); absent without such cells.
    sessions: Option<super::ablation::TableView>,
    heatmap: Heatmap,
    /// The choices of the filter bar above the heatmap, in first-seen order (profiles are the
    /// heatmap's columns, outcomes the legend's classes with a count).
    filter_categories: Vec<String>,
    /// Empty when every case has the same split (or none): the split filter is then left out.
    filter_splits: Vec<String>,
    failing: Vec<FailingRow>,
    notes: Vec<String>,
    /// The incomplete-run banner, shown before anything else.
    banner: Option<String>,
    /// The warning of a run without a sandbox, shown right after the banner.
    isolation_warning: Option<&'static str>,
    /// Profiles set aside by `--skip-unavailable`, one sentence each.
    not_run: Vec<String>,
    /// The exit policy's headline and its findings.
    verdict: String,
    findings: Vec<String>,
    /// True when the verdict is not exit 0 (the verdict box is drawn as a warning).
    verdict_bad: bool,
    /// The one-file page's timelines, rendered into [`Page::timelines_z`] by [`render_to`].
    #[serde(skip)]
    timelines: Vec<TimelineView>,
    /// Every timeline section of a one-file page, as a bundle (src/report/bundle.rs).
    timelines_z: String,
    /// A large run's page: cells in a streamed index, timelines in side files.
    split: bool,
    split_js: &'static str,
    index_marker: &'static str,
    /// How many cells have a timeline in a split page's side files.
    side_timelines: usize,
    /// Cells that did not pass, all of them, whether listed in the page or drawn by its script.
    failing_count: usize,
}

#[derive(Serialize)]
struct OutcomeCount {
    outcome: &'static str,
    words: &'static str,
    glyph: &'static str,
    count: usize,
}

#[derive(Serialize)]
struct Segment {
    outcome: &'static str,
    x: String,
    width: String,
    label: String,
}

/// A horizontal bar with a whisker for the 95% interval, in SVG user units.
#[derive(Serialize)]
struct Bar {
    fill: String,
    lo: String,
    hi: String,
}

#[derive(Serialize)]
struct SummaryRow {
    profile: String,
    pass_rate: String,
    ci: String,
    bar: Bar,
    coverage: String,
    passed: usize,
    failed: usize,
    infra: Vec<String>,
    infra_count: usize,
    pass_at_1: String,
    pass_at_k: String,
    pass_hat_k: String,
    k: usize,
    steps: String,
    tool_calls: String,
    denials: u64,
    invalid: u64,
    tool_failures: u64,
    model_errors: u64,
    wall_p50: String,
    wall_p95: String,
    tokens: String,
    cost: String,
}

#[derive(Serialize)]
struct ComparisonRow {
    a: String,
    b: String,
    cases: usize,
    dropped: usize,
    record: String,
    mean: String,
    ci: String,
    p: String,
    p_adjusted: String,
    verdict: String,
    /// `better` when a difference was called, `noise` otherwise, `none` without cases.
    verdict_class: &'static str,
    mde: String,
    zero: String,
    lo: String,
    hi: String,
    dot: String,
}

/// A row of the per-category or per-split table.
#[derive(Serialize)]
struct BreakdownRow {
    profile: String,
    /// The category or the split.
    group: String,
    /// The first row of each profile carries the profile name; the others leave it blank.
    first: bool,
    cells: usize,
    pass_rate: String,
    ci: String,
    bar: Bar,
    coverage: String,
    infra: Vec<String>,
    infra_count: usize,
}

#[derive(Serialize)]
struct Heatmap {
    profiles: Vec<String>,
    rows: Vec<HeatRow>,
}

#[derive(Serialize)]
struct HeatRow {
    case_id: String,
    category: String,
    split: String,
    /// One slot per profile (same order as `Heatmap::profiles`), each with its epoch cells.
    slots: Vec<Vec<HeatCell>>,
}

#[derive(Serialize)]
struct HeatCell {
    cell_id: String,
    /// The profile (or profile+ablation group) the filter matches against.
    profile: String,
    dom_id: String,
    outcome: &'static str,
    glyph: &'static str,
    label: String,
    tooltip: String,
}

#[derive(Serialize)]
struct FailingRow {
    cell_id: String,
    dom_id: String,
    /// What the filter bar matches the row against, as on the heatmap.
    case_id: String,
    profile: String,
    category: String,
    split: String,
    outcome: &'static str,
    words: &'static str,
    reason: String,
}

#[derive(Serialize)]
struct TimelineView {
    cell_id: String,
    dom_id: String,
    case_id: String,
    profile: String,
    epoch: u32,
    category: String,
    model: String,
    outcome: &'static str,
    words: &'static str,
    glyph: &'static str,
    reason: String,
    facts: Vec<Fact>,
    entries: Vec<EntryView>,
    omitted: usize,
    /// There is nothing to show: the trace is missing, empty or unreadable, or the report was
    /// built without timelines.
    missing: bool,
}

#[derive(Serialize)]
struct Fact {
    name: &'static str,
    value: String,
}

#[derive(Serialize)]
struct EntryView {
    seq: u64,
    /// The step number on the first entry of each step only, so a step reads as one block.
    step: String,
    kind: String,
    title: String,
    detail: String,
    diff: Vec<DiffLine>,
    /// `ok`, `bad`, `denied`, `allowed` or empty: drives the highlight.
    state: &'static str,
}

#[derive(Serialize)]
struct DiffLine {
    class: &'static str,
    text: String,
}

impl Page {
    fn build(report: &MatrixReport) -> Page {
        let cases = distinct(report.cells.iter().map(|c| c.case_id.as_str())).len();
        let passed = report.cells.iter().filter(|c| c.outcome_label() == "passed").count();
        let outcomes: Vec<OutcomeCount> = OUTCOMES
            .iter()
            .map(|&(outcome, words, glyph)| OutcomeCount {
                outcome,
                words,
                glyph,
                count: report.cells.iter().filter(|c| c.outcome_label() == outcome).count(),
            })
            .collect();
        // A split page draws its squares, its list of cells that did not pass and its
        // timelines from the index and side files: none of their markup is built here.
        let split = split_layout(&report.cells);
        let dom_ids = if split { HashMap::new() } else { dom_ids(&report.cells) };
        let timelines: HashMap<&str, &Timeline> = report.timelines.iter().map(|t| (t.cell_id.as_str(), t)).collect();
        let by_cell: HashMap<&str, &CellSummary> =
            if split { HashMap::new() } else { report.cells.iter().map(|c| (c.cell_id.as_str(), c)).collect() };
        let splits = distinct(report.cells.iter().map(|c| c.split.as_str()).filter(|s| !s.is_empty()));
        Page {
            title: format!("hcbench {} · {} · {}", report.command, report.benchmark, report.run_id),
            css: CSS,
            js: JS,
            inflate_js: INFLATE_JS,
            version: env!("CARGO_PKG_VERSION"),
            command: report.command.clone(),
            benchmark: report.benchmark.clone(),
            run_id: report.run_id.clone(),
            started_at: report.started_at.clone(),
            profiles: report.profiles.clone(),
            epochs: report.epochs,
            cases,
            cells: report.cells.len(),
            passed,
            pass_rate: if report.cells.is_empty() {
                "–".into()
            } else {
                pct(passed as f64 / report.cells.len() as f64)
            },
            totals_bar: totals_bar(&outcomes, report.cells.len()),
            outcomes,
            summary: report.profile_stats.iter().map(summary_row).collect(),
            comparisons: report.comparisons.iter().map(comparison_row).collect(),
            comparisons_note: comparisons_sentence(report),
            power: report.power.sentence(),
            categories: category_rows(&report.category_stats, |s| s.category.as_deref()),
            splits: category_rows(report.split_breakdown(), |s| s.split.as_deref()),
            ablation: report.ablation.as_ref().map(super::ablation::tables).unwrap_or_default(),
            sessions: super::sessions::table(report),
            heatmap: heatmap(report, &dom_ids, split),
            filter_categories: distinct(report.cells.iter().map(|c| c.category.as_str()).filter(|c| !c.is_empty()))
                .into_iter()
                .map(str::to_string)
                .collect(),
            filter_splits: if splits.len() > 1 { splits.into_iter().map(str::to_string).collect() } else { Vec::new() },
            failing: report
                .failing
                .iter()
                .filter(|_| !split)
                .map(|f| {
                    let (outcome, words, _) = outcome_meta(&f.outcome);
                    let cell = by_cell.get(f.cell_id.as_str());
                    FailingRow {
                        cell_id: f.cell_id.clone(),
                        dom_id: dom_ids.get(f.cell_id.as_str()).cloned().unwrap_or_default(),
                        case_id: f.case_id.clone(),
                        profile: cell.map_or_else(|| f.profile.clone(), |c| c.group().into_owned()),
                        category: cell.map(|c| c.category.to_string()).unwrap_or_default(),
                        split: cell.map(|c| c.split.to_string()).unwrap_or_default(),
                        outcome,
                        words,
                        reason: f.reason.clone(),
                    }
                })
                .collect(),
            notes: report.notes.clone(),
            banner: report.banner.clone(),
            isolation_warning: report.isolation_warning(),
            not_run: report.not_run_lines(),
            verdict: report.verdict.headline(),
            findings: report.verdict.findings.iter().map(|f| f.message.clone()).collect(),
            verdict_bad: report.verdict.exit_code != crate::exit::SUCCESS,
            timelines: report
                .cells
                .iter()
                .filter(|_| !split)
                .map(|c| timeline_view(c, &dom_ids[c.cell_id.as_str()], timelines.get(c.cell_id.as_str()).copied()))
                .collect(),
            timelines_z: String::new(),
            split,
            split_js: SPLIT_JS,
            index_marker: INDEX_MARKER,
            side_timelines: if split { side_timeline_cells(&report.cells).len() } else { 0 },
            failing_count: report.failing.len(),
        }
    }
}

/// Distinct values in first-seen order.
pub(crate) fn distinct<'a>(items: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut seen = HashSet::new();
    items.filter(|s| seen.insert(*s)).collect()
}

/// The outcome class of a label, falling back to `incomplete`'s look for a label this
/// version does not know (a newer trace), so the cell still shows.
pub(crate) fn outcome_meta(label: &str) -> (&'static str, &'static str, &'static str) {
    OUTCOMES.iter().copied().find(|(o, _, _)| *o == label).unwrap_or(OUTCOMES[OUTCOMES.len() - 1])
}

/// An HTML id per cell (`tl-` + the cell id with anything outside `[A-Za-z0-9_.-]` replaced),
/// made unique by a numeric suffix should two cell ids map to the same id.
fn dom_ids(cells: &[CellSummary]) -> HashMap<&str, String> {
    let mut used = HashSet::new();
    let mut out = HashMap::new();
    for c in cells {
        let base = dom_id_of(&c.cell_id);
        let mut id = base.clone();
        let mut n = 2;
        while !used.insert(id.clone()) {
            id = format!("tl-{base}-{n}");
            n += 1;
        }
        out.insert(c.cell_id.as_str(), id);
    }
    out
}

/// `tl-` + the cell id with anything outside `[A-Za-z0-9_.-]` replaced. A split page keys its
/// timelines by cell id, so it needs no suffix for the rare ids that map to the same one.
fn dom_id_of(cell_id: &str) -> String {
    let base: String = cell_id
        .chars()
        .map(|ch| if ch.is_ascii_alphanumeric() || matches!(ch, '_' | '-' | '.') { ch } else { '_' })
        .collect();
    format!("tl-{base}")
}

/// A coordinate or size with one decimal, as both HTML pages write them into SVG.
pub(crate) fn num(x: f64) -> String {
    format!("{x:.1}")
}

fn bar(rate: f64, ci: &Interval) -> Bar {
    let at = |v: f64| num(v.clamp(0.0, 1.0) * BAR_WIDTH);
    Bar { fill: at(rate), lo: at(ci.lo), hi: at(ci.hi) }
}

/// Infrastructure classes (neither passed nor failed) as `2 timeout`, `1 provider error`, in
/// legend order, and their total.
fn infra(s: &GroupStats) -> (Vec<String>, usize) {
    let parts: Vec<(usize, &str)> = OUTCOMES
        .iter()
        .filter(|(o, _, _)| *o != "passed" && *o != "failed")
        .filter_map(|(o, words, _)| s.outcomes.get(*o).filter(|n| **n > 0).map(|n| (*n, *words)))
        .collect();
    // A class this version does not know still counts (under its own name).
    let unknown = s.outcomes.iter().filter(|(k, n)| **n > 0 && !OUTCOMES.iter().any(|(o, _, _)| o == k));
    let parts: Vec<(usize, &str)> = parts.into_iter().chain(unknown.map(|(k, n)| (*n, k.as_str()))).collect();
    (parts.iter().map(|(n, words)| format!("{n} {words}")).collect(), parts.iter().map(|(n, _)| n).sum())
}

/// `1234567` -> `1,234,567`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

fn summary_row(s: &GroupStats) -> SummaryRow {
    let (infra, infra_count) = infra(s);
    SummaryRow {
        profile: s.profile.clone(),
        pass_rate: pct(s.pass_rate),
        ci: pct_range(&s.pass_rate_ci),
        bar: bar(s.pass_rate, &s.pass_rate_ci),
        coverage: pct(s.coverage),
        passed: s.passed,
        failed: s.failed,
        infra,
        infra_count,
        pass_at_1: pct(s.pass_at_1),
        pass_at_k: pct(s.pass_at_k),
        pass_hat_k: pct(s.pass_hat_k),
        k: s.epochs,
        steps: num(s.mean_steps),
        tool_calls: num(s.mean_tool_calls),
        denials: s.policy_denials,
        invalid: s.invalid_actions,
        tool_failures: s.tool_failures,
        model_errors: s.model_errors,
        wall_p50: secs(s.wall_p50_ms),
        wall_p95: secs(s.wall_p95_ms),
        tokens: format!("{} / {}", thousands(s.input_tokens), thousands(s.output_tokens)),
        cost: s.cost_usd.map_or("–".into(), |c| format!("${c:.4}")),
    }
}

fn comparison_row(c: &Comparison) -> ComparisonRow {
    let at = |v: f64| num((v.clamp(-1.0, 1.0) + 1.0) / 2.0 * DIFF_WIDTH);
    let verdict_class = match c.verdict {
        _ if c.cases == 0 => "none",
        Verdict::ABetter | Verdict::BBetter => "better",
        Verdict::WithinNoise => "noise",
    };
    ComparisonRow {
        a: c.a.clone(),
        b: c.b.clone(),
        cases: c.cases,
        dropped: c.dropped_cases,
        record: format!("{}/{}/{}", c.wins, c.losses, c.ties),
        mean: format!("{:+.3}", c.mean_diff),
        ci: diff_range(&c.ci),
        p: p_text(c.p_value),
        p_adjusted: p_text(c.p_adjusted),
        verdict: c.verdict_text.clone(),
        verdict_class,
        mde: mde_words(c.mde),
        zero: at(0.0),
        lo: at(c.ci.lo),
        hi: at(c.ci.hi),
        dot: at(c.mean_diff),
    }
}

/// Rows of a per-category or per-split table; `key_of` picks the category or the split.
fn category_rows(stats: &[GroupStats], key_of: fn(&GroupStats) -> Option<&str>) -> Vec<BreakdownRow> {
    let mut previous: Option<&str> = None;
    stats
        .iter()
        .map(|s| {
            let first = previous != Some(s.profile.as_str());
            previous = Some(s.profile.as_str());
            let (infra, infra_count) = infra(s);
            BreakdownRow {
                profile: s.profile.clone(),
                group: key_of(s).unwrap_or_default().to_string(),
                first,
                cells: s.cells,
                pass_rate: pct(s.pass_rate),
                ci: pct_range(&s.pass_rate_ci),
                bar: bar(s.pass_rate, &s.pass_rate_ci),
                coverage: pct(s.coverage),
                infra,
                infra_count,
            }
        })
        .collect()
}

fn totals_bar(outcomes: &[OutcomeCount], cells: usize) -> Vec<Segment> {
    // The bar is drawn in a 1000-unit-wide viewBox stretched to the page width.
    let mut x = 0.0;
    let mut out = Vec::new();
    for o in outcomes.iter().filter(|o| o.count > 0) {
        let width = o.count as f64 / cells.max(1) as f64 * 1000.0;
        out.push(Segment {
            outcome: o.outcome,
            x: num(x),
            width: num(width),
            label: format!("{} {}", o.count, o.words),
        });
        x += width;
    }
    out
}

/// Cases (rows, in plan order) x profiles (columns); each slot holds that pair's cells in
/// epoch order. Every cell of the report lands in exactly one slot, including a cell whose
/// profile is missing from the profile list, so the page has one square per run cell.
/// A split page gets the columns only; its script draws the rows from the cell index.
fn heatmap(report: &MatrixReport, dom_ids: &HashMap<&str, String>, split: bool) -> Heatmap {
    let profiles = heatmap_groups(report);
    if split {
        return Heatmap { profiles, rows: Vec::new() };
    }
    let rows = distinct(report.cells.iter().map(|c| c.case_id.as_str()))
        .into_iter()
        .map(|case_id| {
            let of_case: Vec<&CellSummary> = report.cells.iter().filter(|c| c.case_id == case_id).collect();
            let slots = profiles
                .iter()
                .map(|p| {
                    let mut cells: Vec<&&CellSummary> = of_case.iter().filter(|c| c.group() == p.as_str()).collect();
                    cells.sort_by_key(|c| c.epoch);
                    cells.into_iter().map(|c| heat_cell(c, &dom_ids[c.cell_id.as_str()], report.epochs)).collect()
                })
                .collect();
            HeatRow {
                case_id: case_id.to_string(),
                category: of_case.first().map(|c| c.category.to_string()).unwrap_or_default(),
                split: of_case.first().map(|c| c.split.to_string()).unwrap_or_default(),
                slots,
            }
        })
        .collect();
    Heatmap { profiles, rows }
}

/// The heatmap's columns: the report's groups, then any group only a cell names.
pub(crate) fn heatmap_groups(report: &MatrixReport) -> Vec<String> {
    let mut profiles: Vec<String> = report.profiles.clone();
    let mut seen: HashSet<String> = profiles.iter().cloned().collect();
    for c in &report.cells {
        let p = c.group();
        if !seen.contains(p.as_ref()) {
            seen.insert(p.clone().into_owned());
            profiles.push(p.into_owned());
        }
    }
    profiles
}

fn heat_cell(c: &CellSummary, dom_id: &str, epochs: u32) -> HeatCell {
    let (outcome, words, glyph) = outcome_meta(c.outcome_label());
    let epoch = if epochs > 1 { format!(", epoch {}", c.epoch) } else { String::new() };
    let label = format!("{} with {}{epoch}: {words}", c.case_id, c.group());
    let reason = crate::util::truncate_str(&c.reason, TOOLTIP_REASON);
    let tooltip = if reason.is_empty() { label.clone() } else { format!("{label}. {reason}") };
    HeatCell {
        cell_id: c.cell_id.clone(),
        profile: c.group().into_owned(),
        dom_id: dom_id.to_string(),
        outcome,
        glyph,
        label,
        tooltip,
    }
}

fn yes_no(v: Option<bool>) -> String {
    match v {
        Some(true) => "passed".into(),
        Some(false) => "failed".into(),
        None => "–".into(),
    }
}

fn timeline_view(c: &CellSummary, dom_id: &str, timeline: Option<&Timeline>) -> TimelineView {
    let (outcome, words, glyph) = outcome_meta(c.outcome_label());
    let mut facts = vec![
        Fact { name: "steps", value: format!("{} of {}", c.steps, c.step_budget) },
        Fact { name: "tool calls", value: c.tool_calls.to_string() },
        Fact { name: "denials", value: c.policy_denials.to_string() },
        Fact { name: "tool failures", value: c.tool_failures.to_string() },
        Fact { name: "tests", value: yes_no(c.tests_passed) },
        Fact { name: "verifier", value: yes_no(c.verifier_passed) },
        Fact { name: "wall time", value: secs(c.wall_ms) },
        Fact {
            name: "tokens in / out",
            value: format!("{} / {}", thousands(c.input_tokens), thousands(c.output_tokens)),
        },
    ];
    if !c.files_modified.is_empty() {
        facts.push(Fact { name: "files modified", value: c.files_modified.join(", ") });
    }
    if c.delegations > 0 {
        let failed =
            if c.delegations_failed > 0 { format!(", {} failed", c.delegations_failed) } else { String::new() };
        let cost = c.delegation_cost_usd().map(|d| format!(", ${d:.4}")).unwrap_or_default();
        let value = format!(
            "{} answered{failed}, {} step(s), {} tokens{cost}",
            c.delegations - c.delegations_failed,
            c.delegation_steps,
            thousands(c.delegation_input_tokens + c.delegation_output_tokens)
        );
        facts.push(Fact { name: "delegations", value });
    }
    // Only cells whose agent spec has tool hooks that refused or failed: the others have none.
    if c.hook_denials + c.hook_errors > 0 {
        facts.push(Fact {
            name: "hooks",
            value: format!("{} denied, {} failed (hook_decision)", c.hook_denials, c.hook_errors),
        });
    }
    if c.truncated {
        facts.push(Fact { name: "trace", value: "cut mid-line; the last partial event was dropped".into() });
    }
    let model = match (c.provider.as_str(), c.model.as_str()) {
        ("", "") => String::new(),
        (p, m) => format!("{p} / {m}"),
    };
    TimelineView {
        cell_id: c.cell_id.clone(),
        dom_id: dom_id.to_string(),
        case_id: c.case_id.to_string(),
        profile: c.group().into_owned(),
        epoch: c.epoch,
        category: c.category.to_string(),
        model,
        outcome,
        words,
        glyph,
        reason: c.reason.to_string(),
        facts,
        entries: timeline.map(|t| entries(&t.entries)).unwrap_or_default(),
        omitted: timeline.map_or(0, |t| t.omitted),
        missing: timeline.is_none_or(|t| t.entries.is_empty()),
    }
}

fn entries(entries: &[TimelineEntry]) -> Vec<EntryView> {
    let mut previous_step = None;
    entries
        .iter()
        .map(|e| {
            let step = match e.step {
                Some(s) if previous_step != Some(s) => s.to_string(),
                _ => String::new(),
            };
            previous_step = e.step;
            let state = match (e.kind.as_str(), e.ok) {
                ("policy_decision", Some(false)) => "denied",
                ("policy_decision", Some(true)) => "allowed",
                (_, Some(false)) => "bad",
                (_, Some(true)) => "ok",
                (_, None) => "",
            };
            EntryView {
                seq: e.seq,
                step,
                kind: e.kind.clone(),
                title: e.title.clone(),
                detail: e.detail.clone(),
                diff: e.diff.as_deref().map(diff_lines).unwrap_or_default(),
                state,
            }
        })
        .collect()
}

/// Splits a model diff into lines classed by their `- ` / `+ ` prefix.
fn diff_lines(diff: &str) -> Vec<DiffLine> {
    diff.lines()
        .map(|l| DiffLine {
            class: if l.starts_with("- ") || l == "-" {
                "del"
            } else if l.starts_with("+ ") || l == "+" {
                "add"
            } else {
                "ctx"
            },
            text: l.to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::model::{Timeline, TimelineEntry, from_cells};
    use crate::rundir::{Manifest, ManifestCase};
    use crate::trace::event::Outcome;

    fn manifest() -> Manifest {
        Manifest {
            schema_version: 1,
            run_id: "run-1".into(),
            hcbench_version: "0.0.0".into(),
            git_commit: None,
            git_dirty: None,
            benchmark_digest: None,
            benchmark_dirty: None,
            command: "matrix".into(),
            benchmark: "demo".into(),
            profiles: vec!["oracle".into(), "nop".into()],
            cases: vec![ManifestCase { id: "fix-1".into(), category: "bugfix".into(), split: "train".into() }],
            epochs: 2,
            jobs: 1,
            started_at: "2026-01-01T00:00:00Z".into(),
            agent_spec: String::new(),
            agent_dir: None,
            sandbox: None,
            budget_usd: None,
            min_coverage: None,
            fail_under: None,
            ablations: Vec::new(),
            not_run: Vec::new(),
            shard: None,
            plan_digest: None,
            merged_from: Vec::new(),
        }
    }

    fn cell(profile: &str, epoch: u32, outcome: Option<Outcome>, reason: &str) -> CellSummary {
        CellSummary {
            cell_id: format!("fix-1__{profile}__e{epoch}"),
            case_id: "fix-1".into(),
            category: "bugfix".into(),
            profile: profile.into(),
            epoch,
            outcome,
            reason: reason.into(),
            ..Default::default()
        }
    }

    fn entry(seq: u64, kind: &str, title: &str, detail: &str, diff: Option<&str>, ok: Option<bool>) -> TimelineEntry {
        TimelineEntry {
            seq,
            step: Some(1),
            kind: kind.into(),
            title: title.into(),
            detail: detail.into(),
            diff: diff.map(str::to_string),
            ok,
        }
    }

    fn report() -> MatrixReport {
        let cells = vec![
            cell("oracle", 1, Some(Outcome::Passed), ""),
            cell("nop", 1, Some(Outcome::Failed), "tests failed <script>alert(1)</script>"),
            cell("oracle", 2, Some(Outcome::ProviderError), "provider said 500"),
            cell("nop", 2, None, ""),
        ];
        let timelines = cells
            .iter()
            .map(|c| Timeline {
                cell_id: c.cell_id.clone(),
                entries: vec![
                    entry(1, "model_action", "edit_file {}", "", Some("- old </pre>\n+ new & better\n"), None),
                    entry(2, "policy_decision", "read_file: DENIED", "outside the workspace", None, Some(false)),
                    entry(3, "tool_result", "run -> ok", "<script>alert('tool')</script>", None, Some(true)),
                ],
                omitted: 0,
            })
            .collect();
        from_cells(
            &manifest(),
            std::path::Path::new("/runs/r"),
            cells,
            timelines,
            vec!["a note with <b>markup</b>".into()],
        )
    }

    /// The page as a browser shows it once its timeline bundle is inflated.
    fn readable_page(r: &MatrixReport) -> String {
        crate::report::bundle::readable(&render(r).unwrap()).unwrap()
    }

    #[test]
    fn the_page_is_self_contained_with_one_square_per_cell() {
        let r = report();
        let raw = render(&r).unwrap();
        assert_eq!(raw.matches("<section id=\"tl-").count(), 0, "timelines travel compressed");
        let html = readable_page(&r);
        assert!(!html.contains("http://") && !html.contains("https://"), "the page must not reference any URL");
        assert_eq!(html.matches(" data-cell=").count(), r.cells.len(), "one heatmap element per run cell");
        for c in &r.cells {
            assert_eq!(html.matches(&format!("data-cell=\"{}\"", c.cell_id)).count(), 1, "{}", c.cell_id);
            assert_eq!(html.matches(&format!("<section id=\"tl-{}\"", c.cell_id)).count(), 1, "{}", c.cell_id);
        }
        assert!(html.contains("data-outcome=\"incomplete\""), "a cell without run_finished still shows");
        assert!(html.contains("data-outcome=\"provider_error\""));
    }

    #[test]
    fn text_from_traces_is_escaped() {
        let raw = render(&report()).unwrap();
        // The only <script> elements are the page's own: the inflater, the page's script and
        // the timeline bundle (base64: it holds no `<`).
        assert_eq!(raw.matches("<script").count(), 3);
        let html = readable_page(&report());
        assert_eq!(html.matches("<script").count(), 3, "no script element comes out of a bundle");
        assert!(html.contains("tests failed &lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(html.contains("&lt;script&gt;alert(&#39;tool&#39;)&lt;/script&gt;"));
        assert!(html.contains("a note with &lt;b&gt;markup&lt;/b&gt;"));
        assert!(!html.contains("- old </pre>"), "a diff cannot close the element it sits in");
        assert!(html.contains("<span class=\"del\">- old &lt;/pre&gt;</span>"));
        assert!(html.contains("<span class=\"add\">+ new &amp; better</span>"));
    }

    #[test]
    fn rendering_is_deterministic() {
        let r = report();
        assert_eq!(render(&r).unwrap(), render(&r).unwrap());
    }

    #[test]
    fn denials_and_failures_are_highlighted() {
        let html = readable_page(&report());
        assert!(html.contains("class=\"entry s-denied\""));
        assert!(html.contains("class=\"entry s-ok\""));
    }

    #[test]
    fn a_cell_without_a_timeline_says_so() {
        let mut r = report();
        r.timelines.clear();
        let html = readable_page(&r);
        assert_eq!(html.matches("No timeline for this cell").count(), r.cells.len());
    }

    #[test]
    fn headers_read_right_with_one_epoch_and_with_several() {
        let two = render(&report()).unwrap();
        assert!(two.contains(">pass@2<") && two.contains(">pass^2<") && two.contains(">pass@1<"));
        let mut one = report();
        one.epochs = 1;
        let one = render(&one).unwrap();
        assert!(!one.contains("pass@1") && !one.contains("pass^1"), "one epoch shows the pass rate only");
        assert!(one.contains("With one epoch pass@k and pass^k equal the pass rate"));
    }

    #[test]
    fn the_filter_bar_offers_what_the_cells_have() {
        let html = render(&report()).unwrap();
        assert!(html.contains("id=\"f-q\""));
        assert!(html.contains("<option value=\"oracle\">oracle</option><option value=\"nop\">nop</option>"));
        assert!(
            html.contains("<option value=\"provider_error\">provider error</option>"),
            "outcomes present in the run"
        );
        assert!(!html.contains("<option value=\"timeout\">"), "no choice that would show nothing");
        // One category and one split: no filter that cannot narrow anything.
        assert!(!html.contains("id=\"f-category\"") && !html.contains("id=\"f-split\""));
        assert!(html.contains("data-profile=\"nop\" data-outcome=\"failed\""));
    }

    /// A report of `n` cells (a few cases, two profiles, many epochs) whose first failed cell's
    /// reason tries to close the index's script element.
    fn large_report(n: usize) -> MatrixReport {
        let cells = (0..n)
            .map(|i| {
                let profile = if i % 2 == 0 { "oracle" } else { "nop" };
                let outcome = if i % 2 == 0 { Outcome::Passed } else { Outcome::Failed };
                let reason = if i == 1 { "tests failed </script><script>alert(1)</script>" } else { "" };
                CellSummary {
                    cell_id: format!("case-{}__{profile}__e{}", i / 200, i / 2 % 100 + 1),
                    case_id: format!("case-{}", i / 200).into(),
                    category: "bugfix".into(),
                    profile: profile.into(),
                    epoch: (i / 2 % 100 + 1) as u32,
                    outcome: Some(outcome),
                    reason: reason.into(),
                    ..Default::default()
                }
            })
            .collect();
        from_cells(&manifest(), std::path::Path::new("/runs/r"), cells, Vec::new(), Vec::new())
    }

    fn write_page(r: &MatrixReport) -> String {
        let mut out = Vec::new();
        Html.write(r, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_large_run_gets_an_index_of_every_cell_and_no_per_cell_markup() {
        let r = large_report(1001);
        let html = write_page(&r);
        assert!(!html.contains(INDEX_MARKER), "the marker is replaced by the index");
        assert_eq!(html.matches(" data-cell=").count(), 0, "squares are drawn by the script");
        assert_eq!(html.matches("<section id=\"tl-").count(), 0, "timelines are in side files");
        assert_eq!(
            html.matches("</script>").count(),
            4,
            "the index, the inflater, the page's script and the split script"
        );
        let json = html.split("<script type=\"application/json\" id=\"cells-index\">").nth(1).unwrap();
        let json = json.split("</script>").next().unwrap();
        assert!(json.contains("tests failed \\u003c/script>\\u003cscript>alert(1)"), "no `<` in the index");
        let index: serde_json::Value = serde_json::from_str(json).unwrap();
        assert_eq!(index["cells"].as_array().unwrap().len(), 1001);
        assert_eq!(index["groups"], serde_json::json!(["oracle", "nop"]));
        assert_eq!(index["cases"].as_array().unwrap().len(), 6);
        let second = &index["cells"][1];
        assert_eq!(second[0], "case-0__nop__e1");
        assert_eq!(
            index["reasons"][second[5].as_u64().unwrap() as usize],
            "tests failed </script><script>alert(1)</script>"
        );
        assert_eq!(index["outcomes"][second[4].as_u64().unwrap() as usize][0], "failed");
        assert_eq!(second[6], 1, "a failed cell's timeline is in the first side file");
        assert!(html.contains("Cells that did not pass (500)"));
        // One file up to the limit.
        let html = write_page(&large_report(1000));
        assert!(!html.contains("id=\"cells-index\"") && html.matches(" data-cell=").count() == 1000);
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1234567), "1,234,567");
    }
}
