//! What `hcbench trend` computes: plain data, serialized as `trend.json` and rendered as
//! Markdown and HTML (src/report/trend.rs). Every field is documented in docs/formats.md.

use serde::{Deserialize, Serialize};

use crate::stats::{Interval, Method};

/// Version of `trend.json`.
pub const TREND_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrendReport {
    pub schema_version: u32,
    pub generated_at: String,
    /// The history folder as given.
    pub history: String,
    pub filters: Filters,
    pub settings: TrendSettings,
    /// History files read, rows used (after filters), rows skipped as corrupt or foreign.
    pub files: usize,
    pub rows: usize,
    pub skipped_rows: usize,
    /// Skipped rows by file, and anything else a reader should know before trusting the page.
    pub warnings: Vec<String>,
    /// The runs in the report, oldest first.
    pub runs: Vec<RunInfo>,
    /// One series per profile (per profile and ablation in ablate runs), over the runs.
    pub series: Vec<Series>,
    /// The same per category.
    pub categories: Vec<Series>,
    /// Each series' latest run against its trailing window; `flagged` ones are regressions.
    pub regressions: Vec<RegressionCheck>,
    /// Cases whose verdict changed after a stable streak.
    pub flips: Vec<Flip>,
    /// The quarantine list: cases whose verdict varies under the oracle.
    pub flaky: Vec<FlakyCase>,
    pub verdict: TrendVerdict,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Filters {
    /// `--since` as given (`30d`), and the cut-off it resolved to (RFC 3339); None: all runs.
    pub since: Option<String>,
    pub since_cutoff: Option<String>,
    /// `--profiles`; empty: all.
    pub profiles: Vec<String>,
    /// `--benchmark`; None: all benchmarks in the history.
    pub benchmark: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrendSettings {
    /// Runs before the latest that form the baseline of a regression check.
    pub window: usize,
    /// Agreeing runs a case needs before a change counts as a flip.
    pub flip_streak: usize,
    /// Error rate of the regression checks (two-sided, after Holm over all checks).
    pub alpha: f64,
    /// Profile whose varying verdicts put a case in quarantine.
    pub control_profile: String,
}

/// One run of the history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    pub run_id: String,
    pub started_at: String,
    pub command: String,
    /// Empty when unknown.
    pub git_commit: String,
    pub git_dirty: Option<bool>,
    pub hcbench_version: String,
    pub benchmark: String,
    pub benchmark_digest: String,
    pub cells: usize,
}

/// A group's numbers over the runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Series {
    pub benchmark: String,
    pub profile: String,
    /// Empty outside ablate runs.
    pub ablation: String,
    /// None for the whole group; the category in [`TrendReport::categories`].
    pub category: Option<String>,
    /// Models the profile resolved to across the runs (several when it was redefined).
    pub models: Vec<String>,
    /// One point per run that has cells of the group, oldest first.
    pub points: Vec<Point>,
}

impl Series {
    /// `profile` or `profile/ablation`, as matrix and ablate reports name groups.
    pub fn label(&self) -> String {
        crate::replay::group_label(&self.profile, &self.ablation)
    }
}

/// A group's numbers in one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub run_id: String,
    pub started_at: String,
    pub git_commit: String,
    /// Cells of the group in the run, cells with a verdict (passed or failed), cells passed.
    pub cells: usize,
    pub verdicts: usize,
    pub passed: usize,
    /// passed / cells: infrastructure failures count as not passed (as in run reports).
    pub pass_rate: f64,
    /// 95% interval of the pass rate, clustered by case (Wilson with one epoch).
    pub pass_rate_ci: Interval,
    /// verdicts / cells.
    pub coverage: f64,
    /// Summed model cost; None when no cell had prices.
    pub cost_usd: Option<f64>,
    /// Input plus output tokens, summed.
    pub tokens: u64,
    /// Mean wall time per cell.
    pub wall_ms_mean: f64,
}

/// A series' latest run against the runs before it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegressionCheck {
    pub benchmark: String,
    pub profile: String,
    pub ablation: String,
    pub latest_run: String,
    pub latest_commit: String,
    /// The baseline: up to `window` earlier runs of the series, newest first.
    pub window_runs: Vec<String>,
    /// Oldest and newest commit of the window (the range a regression happened after).
    pub window_commits: (String, String),
    /// Pass rates over the measured cells of the shared cases.
    pub latest_rate: f64,
    pub window_rate: f64,
    /// Paired difference latest - window over shared cases (per-case means).
    pub diff: f64,
    pub interval: Interval,
    pub cases: usize,
    pub wins: usize,
    pub losses: usize,
    pub p_value: f64,
    /// After Holm over every check of the report.
    pub p_adjusted: f64,
    pub method: Method,
    /// `regression`, `improvement`, `within noise`, or `not comparable` (no shared cases).
    pub verdict: String,
    /// True for a regression beyond noise: what `--fail-on-regression` acts on.
    pub flagged: bool,
}

/// A case whose verdict changed after a stable streak. Every such change is listed; only one
/// unlikely to be noise is `flagged`. A single new failure is listed the night it happens and
/// flagged once it has lasted (three runs after twenty stable ones, with a hundred cases).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Flip {
    pub benchmark: String,
    pub profile: String,
    pub ablation: String,
    pub case_id: String,
    /// `pass->fail` (a new failure) or `fail->pass`.
    pub direction: String,
    /// Runs that agreed before the change (at least `flip_streak`; every earlier run in the
    /// window agreed, or it would not be stable).
    pub streak: usize,
    /// The last run with the old verdict and the first with the new one: the change happened
    /// between their commits.
    pub last_old_run: String,
    pub last_old_commit: String,
    pub first_new_run: String,
    pub first_new_commit: String,
    /// Runs with the new verdict, the latest included (1: it changed in the latest run).
    pub runs_since: usize,
    /// How likely the change is noise: if the case's verdicts over these `streak + runs_since`
    /// runs were in random order, the chance that all `runs_since` of the minority verdict
    /// came last, `1 / C(streak + runs_since, runs_since)`. One failure after 9 passes: 0.1.
    pub p_value: f64,
    /// `p_value` after Holm over every case series that could have flipped (each profile's
    /// cases with at least `flip_streak + 1` runs and an unmixed latest verdict): with a hundred
    /// cases some stable-looking case changes by chance every few nights.
    pub p_adjusted: f64,
    /// `p_adjusted` below the report's alpha: a change beyond noise.
    pub flagged: bool,
}

/// A case whose verdict varied under the control profile: a fixture or verifier problem, not
/// the agent's. Reports show it apart; the gate can exclude it (`--quarantine FILE`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlakyCase {
    pub benchmark: String,
    pub case_id: String,
    pub passed: usize,
    pub failed: usize,
    /// Runs the verdicts came from.
    pub runs: usize,
    /// A one-line reason: `3 passed, 2 failed over 4 runs under oracle`.
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrendVerdict {
    /// Flagged regression checks and flagged flips; flaky cases in quarantine.
    pub regressions: usize,
    pub flips: usize,
    pub flaky: usize,
    /// One sentence for a CI log.
    pub summary: String,
    /// The exit code `--fail-on-regression` gives ([`crate::exit::REGRESSION`] when a
    /// regression is flagged, else 0); without the flag trend exits 0.
    pub exit_code: i32,
}
