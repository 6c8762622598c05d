//! `hcbench trend`: the results history turned into one answer per profile — did anything
//! get worse, since when, at which commit, and is it real.
//!
//! The history's rows become a polars frame once ([`frame`]); polars' lazy API filters it
//! (`--since`, `--profiles`, `--benchmark`) and folds it into one row per run and one row per
//! (run, benchmark, profile, ablation, case), plus the control profile's verdicts per case.
//! Everything after that works on those small folded tables, with the statistics from
//! [`crate::stats`]:
//!
//! - **Series**: per group and run, pass rate (passed / cells) with its case-clustered
//!   interval, coverage, cost, tokens and wall time, as in run reports.
//! - **Regressions**: each group's latest run against up to `window` runs before it, paired
//!   by case over the cases both measured ([`stats::paired`]); Holm over all the checks; a
//!   check is flagged only when the latest run is worse beyond noise.
//! - **Flips**: a case whose per-run verdict sequence is one stable block of at least
//!   `flip_streak` runs followed by a block of the other verdict reaching the latest run. A case
//!   that changed before, or had mixed epochs, is noise, not a flip. A flip is flagged when it
//!   is unlikely under noise: `1 / C(n, m)` (the chance that the m changed verdicts of n runs all
//!   fall last if their order were random), Holm-adjusted over every case series that could have
//!   flipped, below alpha. A single new failure is listed at once and flagged once it lasts.
//! - **Flaky (quarantine)**: cases whose verdicts vary under the control profile (`oracle`)
//!   within one benchmark digest: a fixture or verifier problem. They are left out of
//!   regression checks and flips and listed apart.

pub mod model;
pub mod quarantine;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use polars::prelude::{
    DataFrame, DataType, IntoLazy, PolarsError, PolarsResult, SortMultipleOptions, StringChunked, UInt32Chunked, col,
    df, len, lit,
};

pub use model::*;

use crate::aggregate::{ALPHA, CONFIDENCE};
use crate::history::{HistoryRow, Loaded};
use crate::stats;

/// Defaults of `hcbench trend`.
pub const DEFAULT_WINDOW: usize = 5;
pub const DEFAULT_FLIP_STREAK: usize = 3;

/// What to analyse and how.
#[derive(Debug, Clone)]
pub struct TrendOptions {
    /// The history folder, as shown in reports.
    pub history: String,
    /// `--since` as given and as a duration.
    pub since: Option<(String, Duration)>,
    pub profiles: Vec<String>,
    pub benchmark: Option<String>,
    pub window: usize,
    pub flip_streak: usize,
    pub control_profile: String,
    /// `--fail-on-regression`: a flagged regression sets the verdict's exit code.
    pub fail_on_regression: bool,
}

impl Default for TrendOptions {
    fn default() -> Self {
        TrendOptions {
            history: crate::history::DEFAULT_DIR.to_string(),
            since: None,
            profiles: Vec::new(),
            benchmark: None,
            window: DEFAULT_WINDOW,
            flip_streak: DEFAULT_FLIP_STREAK,
            control_profile: "oracle".to_string(),
            fail_on_regression: false,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TrendError {
    #[error(
        "the history in {history} has no runs{filtered}; run `hcbench matrix` (it appends to reports/history/), or `hcbench history import RUN_DIR` for an earlier run"
    )]
    Empty { history: String, filtered: String },
    #[error("polars: {0}")]
    Polars(#[from] PolarsError),
}

/// Milliseconds since the epoch of an RFC 3339 time stamp (rows were checked on load).
fn millis(stamp: &str) -> i64 {
    humantime::parse_rfc3339_weak(stamp)
        .ok()
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as i64)
}

/// The history as a frame: one row per cell, run metadata repeated.
pub fn frame(rows: &[HistoryRow]) -> PolarsResult<DataFrame> {
    fn strings<'a>(rows: &'a [HistoryRow], f: impl Fn(&'a HistoryRow) -> &'a str) -> Vec<&'a str> {
        rows.iter().map(f).collect()
    }
    df!(
        "ts" => rows.iter().map(|r| millis(&r.started_at)).collect::<Vec<i64>>(),
        "run_id" => strings(rows, |r| &r.run_id),
        "started_at" => strings(rows, |r| &r.started_at),
        "command" => strings(rows, |r| &r.command),
        "git_commit" => strings(rows, |r| &r.git_commit),
        "git_dirty" => rows.iter().map(|r| r.git_dirty).collect::<Vec<Option<bool>>>(),
        "hcbench_version" => strings(rows, |r| &r.hcbench_version),
        "benchmark" => strings(rows, |r| &r.benchmark),
        "benchmark_digest" => strings(rows, |r| &r.benchmark_digest),
        "case_id" => strings(rows, |r| &r.case_id),
        "category" => strings(rows, |r| &r.category),
        "profile" => strings(rows, |r| &r.profile),
        "model" => strings(rows, |r| &r.model),
        "ablation" => strings(rows, |r| &r.ablation),
        "passed" => rows.iter().map(|r| u32::from(r.passed())).collect::<Vec<u32>>(),
        "verdict" => rows.iter().map(|r| u32::from(r.is_verdict())).collect::<Vec<u32>>(),
        "tokens" => rows.iter().map(|r| r.input_tokens + r.output_tokens).collect::<Vec<u64>>(),
        "cost" => rows.iter().map(|r| r.cost_usd).collect::<Vec<Option<f64>>>(),
        "wall_ms" => rows.iter().map(|r| r.wall_ms as f64).collect::<Vec<f64>>(),
    )
}

/// The folded tables the rules work on.
struct Folded {
    runs: DataFrame,
    cases: DataFrame,
    control: DataFrame,
}

/// Filters and folds the frame with polars' lazy API.
fn fold(df: DataFrame, opts: &TrendOptions, cutoff: Option<i64>) -> PolarsResult<Folded> {
    let mut lf = df.lazy();
    if let Some(c) = cutoff {
        lf = lf.filter(col("ts").gt_eq(lit(c)));
    }
    if let Some(b) = &opts.benchmark {
        lf = lf.filter(col("benchmark").eq(lit(b.as_str())));
    }
    if let Some(any) = opts.profiles.iter().map(|p| col("profile").eq(lit(p.as_str()))).reduce(|a, b| a.or(b)) {
        lf = lf.filter(any);
    }
    // Filtered once; each fold below starts from it (columns are shared, not copied).
    let filtered = lf.collect()?;

    let runs = filtered
        .clone()
        .lazy()
        .group_by([col("run_id")])
        .agg([
            col("ts").first(),
            col("started_at").first(),
            col("command").first(),
            col("git_commit").first(),
            col("git_dirty").first(),
            col("hcbench_version").first(),
            col("benchmark").first(),
            col("benchmark_digest").first(),
            len().alias("cells"),
        ])
        .sort(["ts", "run_id"], SortMultipleOptions::default());

    let cases = filtered
        .clone()
        .lazy()
        .group_by([col("run_id"), col("benchmark"), col("profile"), col("ablation"), col("case_id")])
        .agg([
            col("ts").first(),
            col("git_commit").first(),
            col("benchmark_digest").first(),
            col("category").first(),
            col("model").first(),
            len().alias("cells"),
            col("passed").sum(),
            col("verdict").sum(),
            col("tokens").sum(),
            col("cost").sum().alias("cost"),
            col("cost").count().alias("priced"),
            col("wall_ms").sum(),
        ])
        .sort(["benchmark", "profile", "ablation", "case_id", "ts", "run_id"], SortMultipleOptions::default());

    // The control profile's verdicts per case and benchmark version: varying ones are flaky.
    let control = filtered
        .lazy()
        .filter(col("profile").eq(lit(opts.control_profile.as_str())).and(col("verdict").eq(lit(1u32))))
        .group_by([col("benchmark"), col("benchmark_digest"), col("case_id")])
        .agg([col("passed").sum(), col("verdict").sum(), col("run_id").n_unique().alias("runs")])
        .filter(col("passed").gt(lit(0u32)).and(col("passed").lt(col("verdict"))))
        .sort(["benchmark", "case_id", "benchmark_digest"], SortMultipleOptions::default());

    Ok(Folded { runs: runs.collect()?, cases: cases.collect()?, control: control.collect()? })
}

/// One (run, group, case) row of the folded table.
struct CaseRow {
    run_id: String,
    ts: i64,
    git_commit: String,
    benchmark: String,
    profile: String,
    ablation: String,
    case_id: String,
    category: String,
    model: String,
    cells: u32,
    passed: u32,
    verdicts: u32,
    tokens: u64,
    cost: f64,
    priced: u32,
    wall_ms: f64,
}

fn case_rows(df: &DataFrame) -> PolarsResult<Vec<CaseRow>> {
    let s = |name: &str| df.column(name).and_then(|c| c.str().cloned());
    let (run_id, git_commit, benchmark, profile, ablation, case_id, category, model) = (
        s("run_id")?,
        s("git_commit")?,
        s("benchmark")?,
        s("profile")?,
        s("ablation")?,
        s("case_id")?,
        s("category")?,
        s("model")?,
    );
    let ts = df.column("ts")?.i64()?.clone();
    let u =
        |name: &str| -> PolarsResult<UInt32Chunked> { Ok(df.column(name)?.cast(&DataType::UInt32)?.u32()?.clone()) };
    let (cells, passed, verdicts, priced) = (u("cells")?, u("passed")?, u("verdict")?, u("priced")?);
    let tokens = df.column("tokens")?.cast(&DataType::UInt64)?.u64()?.clone();
    let cost = df.column("cost")?.cast(&DataType::Float64)?.f64()?.clone();
    let wall = df.column("wall_ms")?.f64()?.clone();
    let text = |c: &StringChunked, i: usize| c.get(i).unwrap_or("").to_string();
    Ok((0..df.height())
        .map(|i| CaseRow {
            run_id: text(&run_id, i),
            ts: ts.get(i).unwrap_or(0),
            git_commit: text(&git_commit, i),
            benchmark: text(&benchmark, i),
            profile: text(&profile, i),
            ablation: text(&ablation, i),
            case_id: text(&case_id, i),
            category: text(&category, i),
            model: text(&model, i),
            cells: cells.get(i).unwrap_or(0),
            passed: passed.get(i).unwrap_or(0),
            verdicts: verdicts.get(i).unwrap_or(0),
            tokens: tokens.get(i).unwrap_or(0),
            cost: cost.get(i).unwrap_or(0.0),
            priced: priced.get(i).unwrap_or(0),
            wall_ms: wall.get(i).unwrap_or(0.0),
        })
        .collect())
}

fn run_infos(df: &DataFrame) -> PolarsResult<Vec<RunInfo>> {
    let s = |name: &str| df.column(name).and_then(|c| c.str().cloned());
    let (run_id, started, command, commit, version, benchmark, digest) = (
        s("run_id")?,
        s("started_at")?,
        s("command")?,
        s("git_commit")?,
        s("hcbench_version")?,
        s("benchmark")?,
        s("benchmark_digest")?,
    );
    let dirty = df.column("git_dirty")?.bool()?.clone();
    let cells = df.column("cells")?.cast(&DataType::UInt64)?.u64()?.clone();
    let text = |c: &StringChunked, i: usize| c.get(i).unwrap_or("").to_string();
    Ok((0..df.height())
        .map(|i| RunInfo {
            run_id: text(&run_id, i),
            started_at: text(&started, i),
            command: text(&command, i),
            git_commit: text(&commit, i),
            git_dirty: dirty.get(i),
            hcbench_version: text(&version, i),
            benchmark: text(&benchmark, i),
            benchmark_digest: text(&digest, i),
            cells: cells.get(i).unwrap_or(0) as usize,
        })
        .collect())
}

fn flaky_cases(df: &DataFrame, control: &str) -> PolarsResult<Vec<FlakyCase>> {
    let s = |name: &str| df.column(name).and_then(|c| c.str().cloned());
    let (benchmark, case_id) = (s("benchmark")?, s("case_id")?);
    let u =
        |name: &str| -> PolarsResult<UInt32Chunked> { Ok(df.column(name)?.cast(&DataType::UInt32)?.u32()?.clone()) };
    let (passed, verdicts, runs) = (u("passed")?, u("verdict")?, u("runs")?);
    let mut out: Vec<FlakyCase> = Vec::new();
    for i in 0..df.height() {
        let (p, v, r) = (
            passed.get(i).unwrap_or(0) as usize,
            verdicts.get(i).unwrap_or(0) as usize,
            runs.get(i).unwrap_or(0) as usize,
        );
        let (b, c) = (benchmark.get(i).unwrap_or("").to_string(), case_id.get(i).unwrap_or("").to_string());
        // One entry per case even when several benchmark versions varied.
        if out.last().is_some_and(|f| f.benchmark == b && f.case_id == c) {
            let f = out.last_mut().expect("checked");
            f.passed += p;
            f.failed += v - p;
            f.runs += r;
        } else {
            out.push(FlakyCase { benchmark: b, case_id: c, passed: p, failed: v - p, runs: r, reason: String::new() });
        }
    }
    for f in &mut out {
        f.reason = format!("{} passed, {} failed over {} run(s) under {control}", f.passed, f.failed, f.runs);
    }
    Ok(out)
}

/// Key of a series: benchmark, profile, ablation, category (None: all).
type GroupKey = (String, String, String, Option<String>);

/// A point's running sums.
#[derive(Default)]
struct PointAcc {
    run_id: String,
    git_commit: String,
    cells: usize,
    verdicts: usize,
    passed: usize,
    tokens: u64,
    cost: f64,
    priced: usize,
    wall_ms: f64,
    /// Per case, one value per cell (1 passed, 0 not): the pass rate's clustered interval.
    per_case: Vec<Vec<f64>>,
}

impl PointAcc {
    fn add(&mut self, r: &CaseRow) {
        self.run_id.clone_from(&r.run_id);
        self.git_commit.clone_from(&r.git_commit);
        self.cells += r.cells as usize;
        self.verdicts += r.verdicts as usize;
        self.passed += r.passed as usize;
        self.tokens += r.tokens;
        self.cost += r.cost;
        self.priced += r.priced as usize;
        self.wall_ms += r.wall_ms;
        let mut v = vec![1.0; r.passed as usize];
        v.resize(r.cells as usize, 0.0);
        self.per_case.push(v);
    }

    fn point(self, started_at: &str) -> Point {
        let n = self.cells.max(1) as f64;
        Point {
            run_id: self.run_id,
            started_at: started_at.to_string(),
            git_commit: self.git_commit,
            cells: self.cells,
            verdicts: self.verdicts,
            passed: self.passed,
            pass_rate: self.passed as f64 / n,
            pass_rate_ci: stats::clustered_mean(&self.per_case, CONFIDENCE).interval,
            coverage: self.verdicts as f64 / n,
            cost_usd: (self.priced > 0).then_some(self.cost),
            tokens: self.tokens,
            wall_ms_mean: self.wall_ms / n,
        }
    }
}

/// Analyses a loaded history. `now` anchors `--since`.
pub fn analyze(loaded: &Loaded, opts: &TrendOptions, now: SystemTime) -> Result<TrendReport, TrendError> {
    let cutoff = opts.since.as_ref().map(|(_, d)| now.checked_sub(*d).unwrap_or(SystemTime::UNIX_EPOCH));
    let cutoff_ms = cutoff.map(|t| t.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64));
    let folded = fold(frame(&loaded.rows)?, opts, cutoff_ms)?;
    let runs = run_infos(&folded.runs)?;
    if runs.is_empty() {
        let filtered = if loaded.rows.is_empty() {
            String::new()
        } else {
            format!(" matching the filters ({} rows outside them)", loaded.rows.len())
        };
        return Err(TrendError::Empty { history: opts.history.clone(), filtered });
    }
    let started: BTreeMap<&str, &str> = runs.iter().map(|r| (r.run_id.as_str(), r.started_at.as_str())).collect();
    let rows = case_rows(&folded.cases)?;
    let flaky = flaky_cases(&folded.control, &opts.control_profile)?;
    let quarantined: BTreeSet<(&str, &str)> =
        flaky.iter().map(|f| (f.benchmark.as_str(), f.case_id.as_str())).collect();

    // Series: rows are sorted by group, case, time; points are keyed by (ts, run) per group.
    let mut groups: BTreeMap<GroupKey, BTreeMap<(i64, String), PointAcc>> = BTreeMap::new();
    let mut models: BTreeMap<(String, String, String), BTreeSet<String>> = BTreeMap::new();
    for r in &rows {
        let base = (r.benchmark.clone(), r.profile.clone(), r.ablation.clone());
        if !r.model.is_empty() {
            models.entry(base.clone()).or_default().insert(r.model.clone());
        }
        for key in
            [(base.0.clone(), base.1.clone(), base.2.clone(), None), (base.0, base.1, base.2, Some(r.category.clone()))]
        {
            groups.entry(key).or_default().entry((r.ts, r.run_id.clone())).or_default().add(r);
        }
    }
    let mut series = Vec::new();
    let mut categories = Vec::new();
    for ((benchmark, profile, ablation, category), points) in groups {
        let s = Series {
            models: models
                .get(&(benchmark.clone(), profile.clone(), ablation.clone()))
                .map(|m| m.iter().cloned().collect())
                .unwrap_or_default(),
            benchmark,
            profile,
            ablation,
            category: category.clone(),
            points: points
                .into_values()
                .map(|acc| {
                    let at = started.get(acc.run_id.as_str()).copied().unwrap_or("");
                    acc.point(at)
                })
                .collect(),
        };
        if category.is_some() { categories.push(s) } else { series.push(s) }
    }

    let by_group = by_group(&rows);
    let regressions = regression_checks(&by_group, &quarantined, opts.window);
    let flips = flips(&by_group, &quarantined, opts.flip_streak);
    let mut warnings = loaded.warnings();
    warnings.extend(digest_warnings(&runs));

    let flagged = regressions.iter().filter(|c| c.flagged).count();
    let flagged_flips = flips.iter().filter(|f| f.flagged).count();
    let summary = summary_line(&regressions, &flips, flaky.len(), runs.len());
    let exit_code = if opts.fail_on_regression && flagged > 0 { crate::exit::REGRESSION } else { crate::exit::SUCCESS };
    Ok(TrendReport {
        schema_version: TREND_SCHEMA_VERSION,
        generated_at: crate::util::now_rfc3339(),
        history: opts.history.clone(),
        filters: Filters {
            since: opts.since.as_ref().map(|(s, _)| s.clone()),
            since_cutoff: cutoff.map(|t| humantime::format_rfc3339_seconds(t).to_string()),
            profiles: opts.profiles.clone(),
            benchmark: opts.benchmark.clone(),
        },
        settings: TrendSettings {
            window: opts.window,
            flip_streak: opts.flip_streak,
            alpha: ALPHA,
            control_profile: opts.control_profile.clone(),
        },
        files: loaded.files,
        rows: rows.iter().map(|r| r.cells as usize).sum(),
        skipped_rows: loaded.skipped_rows(),
        warnings,
        runs,
        series,
        categories,
        verdict: TrendVerdict { regressions: flagged, flips: flagged_flips, flaky: flaky.len(), summary, exit_code },
        regressions,
        flips,
        flaky,
    })
}

/// The folded rows of each group (benchmark, profile, ablation), in the folded table's order.
type Groups<'a> = BTreeMap<(&'a str, &'a str, &'a str), Vec<&'a CaseRow>>;

fn by_group(rows: &[CaseRow]) -> Groups<'_> {
    let mut out: BTreeMap<(&str, &str, &str), Vec<&CaseRow>> = BTreeMap::new();
    for r in rows {
        out.entry((&r.benchmark, &r.profile, &r.ablation)).or_default().push(r);
    }
    out
}

/// Per-case measured values (1 passed, 0 failed) of the rows of the given runs.
fn measured<'a>(
    rows: &[&'a CaseRow],
    runs: &BTreeSet<&str>,
    skip: &dyn Fn(&str) -> bool,
) -> BTreeMap<String, Vec<f64>> {
    let mut out: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in rows.iter().filter(|r| runs.contains(r.run_id.as_str()) && !skip(&r.case_id)) {
        if r.verdicts == 0 {
            continue;
        }
        let v = out.entry(r.case_id.clone()).or_default();
        v.extend(std::iter::repeat_n(1.0, r.passed as usize));
        v.extend(std::iter::repeat_n(0.0, (r.verdicts - r.passed) as usize));
    }
    out
}

fn regression_checks(groups: &Groups<'_>, quarantined: &BTreeSet<(&str, &str)>, window: usize) -> Vec<RegressionCheck> {
    let mut checks = Vec::new();
    for (&(benchmark, profile, ablation), group) in groups {
        // The group's runs, oldest first.
        let mut runs: Vec<(i64, &str, &str)> =
            group.iter().map(|r| (r.ts, r.run_id.as_str(), r.git_commit.as_str())).collect();
        runs.sort_unstable();
        runs.dedup();
        let Some(&(_, latest, latest_commit)) = runs.last() else { continue };
        let before = &runs[..runs.len() - 1];
        let base = &before[before.len().saturating_sub(window)..];
        if base.is_empty() {
            continue;
        }
        let skip = |case: &str| quarantined.contains(&(benchmark, case));
        let a = measured(group, &BTreeSet::from([latest]), &skip);
        let b = measured(group, &base.iter().map(|r| r.1).collect(), &skip);
        let p = stats::paired(&a, &b, ALPHA);
        let shared: Vec<&String> = a.keys().filter(|k| b.contains_key(*k)).collect();
        let rate = |m: &BTreeMap<String, Vec<f64>>| {
            if shared.is_empty() {
                0.0
            } else {
                shared.iter().map(|k| m[*k].iter().sum::<f64>() / m[*k].len() as f64).sum::<f64>() / shared.len() as f64
            }
        };
        checks.push(RegressionCheck {
            benchmark: benchmark.to_string(),
            profile: profile.to_string(),
            ablation: ablation.to_string(),
            latest_run: latest.to_string(),
            latest_commit: latest_commit.to_string(),
            window_runs: base.iter().rev().map(|r| r.1.to_string()).collect(),
            window_commits: (base[0].2.to_string(), base[base.len() - 1].2.to_string()),
            latest_rate: rate(&a),
            window_rate: rate(&b),
            diff: p.mean_diff,
            interval: p.interval,
            cases: p.cases,
            wins: p.wins,
            losses: p.losses,
            p_value: p.p_value,
            p_adjusted: p.p_value,
            method: p.method,
            verdict: String::new(),
            flagged: false,
        });
    }
    let adjusted = stats::holm_adjusted(&checks.iter().map(|c| c.p_value).collect::<Vec<_>>());
    for (c, p) in checks.iter_mut().zip(adjusted) {
        c.p_adjusted = p;
        let direction = if c.method == stats::Method::ExactSign { c.wins as f64 - c.losses as f64 } else { c.diff };
        c.verdict = if c.cases == 0 {
            "not comparable".to_string()
        } else {
            match stats::Verdict::from_test(p, ALPHA, direction) {
                stats::Verdict::ABetter => "improvement".to_string(),
                stats::Verdict::BBetter => {
                    c.flagged = true;
                    "regression".to_string()
                }
                stats::Verdict::WithinNoise => "within noise".to_string(),
            }
        };
    }
    checks
}

/// A case's verdict in one run: every measured epoch passed, none did, or mixed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum RunVerdict {
    Pass,
    Fail,
    Mixed,
}

fn flips(groups: &Groups<'_>, quarantined: &BTreeSet<(&str, &str)>, streak: usize) -> Vec<Flip> {
    let mut out = Vec::new();
    // Case series that could have shown a flip: the family Holm corrects over.
    let mut family = 0usize;
    for (&(benchmark, profile, ablation), group) in groups {
        let mut by_case: BTreeMap<&str, Vec<&CaseRow>> = BTreeMap::new();
        for r in group.iter().filter(|r| r.verdicts > 0) {
            by_case.entry(&r.case_id).or_default().push(r);
        }
        for (case, mut seq) in by_case {
            if quarantined.contains(&(benchmark, case)) {
                continue;
            }
            seq.sort_by(|a, b| (a.ts, &a.run_id).cmp(&(b.ts, &b.run_id)));
            let verdicts: Vec<RunVerdict> = seq
                .iter()
                .map(|r| match r.passed {
                    0 => RunVerdict::Fail,
                    p if p == r.verdicts => RunVerdict::Pass,
                    _ => RunVerdict::Mixed,
                })
                .collect();
            let Some(&last) = verdicts.last() else { continue };
            if last == RunVerdict::Mixed || verdicts.len() <= streak {
                continue;
            }
            family += 1;
            let new_len = verdicts.iter().rev().take_while(|v| **v == last).count();
            let old = &verdicts[..verdicts.len() - new_len];
            let Some(&first_old) = old.first() else { continue };
            // One stable block before, of the other verdict, long enough.
            if first_old == RunVerdict::Mixed || old.iter().any(|v| *v != first_old) || old.len() < streak {
                continue;
            }
            let (last_old, first_new) = (seq[old.len() - 1], seq[old.len()]);
            let p_value = 1.0 / binomial(old.len() + new_len, new_len);
            out.push(Flip {
                benchmark: benchmark.to_string(),
                profile: profile.to_string(),
                ablation: ablation.to_string(),
                case_id: case.to_string(),
                direction: if last == RunVerdict::Fail { "pass->fail" } else { "fail->pass" }.to_string(),
                streak: old.len(),
                last_old_run: last_old.run_id.clone(),
                last_old_commit: last_old.git_commit.clone(),
                first_new_run: first_new.run_id.clone(),
                first_new_commit: first_new.git_commit.clone(),
                runs_since: new_len,
                p_value,
                p_adjusted: p_value,
                flagged: false,
            });
        }
    }
    let mut ps: Vec<f64> = out.iter().map(|f| f.p_value).collect();
    ps.resize(family.max(out.len()), 1.0);
    for (f, p) in out.iter_mut().zip(stats::holm_adjusted(&ps)) {
        f.p_adjusted = p;
        f.flagged = p < ALPHA;
    }
    // New failures first, the most recent change first.
    out.sort_by(|a, b| {
        (a.direction != "pass->fail", a.runs_since, &a.benchmark, &a.profile, &a.ablation, &a.case_id).cmp(&(
            b.direction != "pass->fail",
            b.runs_since,
            &b.benchmark,
            &b.profile,
            &b.ablation,
            &b.case_id,
        ))
    });
    out
}

/// C(n, k) as a float (exact for the sizes of a history).
fn binomial(n: usize, k: usize) -> f64 {
    let k = k.min(n - k);
    (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
}

/// Runs of one benchmark under different digests are runs of different case sets.
fn digest_warnings(runs: &[RunInfo]) -> Vec<String> {
    let mut digests: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for r in runs.iter().filter(|r| !r.benchmark_digest.is_empty()) {
        digests.entry(&r.benchmark).or_default().insert(&r.benchmark_digest);
    }
    digests
        .into_iter()
        .filter(|(_, d)| d.len() > 1)
        .map(|(b, d)| {
            format!(
                "benchmark {b} changed over these runs ({} versions by digest): a difference may come from the cases, not the agent",
                d.len()
            )
        })
        .collect()
}

fn summary_line(checks: &[RegressionCheck], flips: &[Flip], flaky: usize, runs: usize) -> String {
    let flagged: Vec<String> = checks
        .iter()
        .filter(|c| c.flagged)
        .map(|c| {
            format!(
                "{} {:+.1} points at {}",
                crate::replay::group_label(&c.profile, &c.ablation),
                c.diff * 100.0,
                short(&c.latest_commit)
            )
        })
        .collect();
    let head = if flagged.is_empty() {
        if checks.is_empty() {
            format!("no regression check yet ({runs} run(s); a check needs an earlier run of the same profile)")
        } else {
            format!("no regression beyond noise in {} check(s)", checks.len())
        }
    } else {
        format!("REGRESSION: {}", flagged.join(", "))
    };
    let flagged = flips.iter().filter(|f| f.flagged).count();
    let flips = match flips.len() - flagged {
        0 => format!("{flagged} flip(s)"),
        n => format!("{flagged} flip(s) beyond noise (+{n} within noise)"),
    };
    format!("{head}; {flips}; {flaky} flaky case(s) in quarantine")
}

/// The first 10 characters of a commit, or `?` when unknown.
pub fn short(commit: &str) -> &str {
    if commit.is_empty() { "?" } else { &commit[..commit.len().min(10)] }
}

#[cfg(test)]
mod tests;
