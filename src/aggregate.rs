//! Aggregation: per-profile, per-category and per-split statistics from cell summaries, the
//! paired comparison of every pair of profiles, and the power statement every report carries.
//!
//! Plain synchronous functions over data; every interval, p-value and verdict comes from
//! [`crate::stats`] (docs/statistics.md explains each number). This module decides only *which
//! cells* go into each number, and that choice is what keeps the numbers honest:
//!
//! - A pass rate counts every planned cell: an infrastructure failure is never silently
//!   dropped, `pass_rate` counts it as not passed and `coverage` says how many cells produced a
//!   valid verdict. Its interval is over the same cells, so the number and its interval always
//!   agree, and it is clustered by case ([`stats::clustered_mean`]): Wilson for one epoch,
//!   the case-clustered SE with epochs, because the case is the sampled unit.
//! - A comparison uses only the cells both profiles *measured* (outcome passed or failed).
//!   Timeouts, provider, verifier and harness errors, cancelled and incomplete cells are
//!   missing data, never losses: a model that never ran has not lost. The cases left out are
//!   counted in `dropped_cases`. With more than two profiles the verdicts use Holm-adjusted
//!   p-values over all the report's comparisons.
//! - The minimum detectable effect is computed from the measured cells' variance where it
//!   shows any spread, else assumed at the measured pass rate ([`stats::Variance`]).
//!
//! pass@k and pass^k (unbiased estimators over each case's epochs) are reported beside the
//! pass rate; they describe the agent, not the uncertainty of the estimate.

pub mod context;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::replay::CellSummary;
use crate::stats::{self, Interval, Method, Variance, Verdict};
use crate::trace::event::Outcome;

/// Confidence of every interval in a report.
pub const CONFIDENCE: f64 = 0.95;
/// Error rate at which a comparison calls a difference (two-sided, after Holm): 1 - CONFIDENCE.
pub const ALPHA: f64 = 0.05;
/// Power at which the minimum detectable effect is stated.
pub const POWER: f64 = 0.8;

/// Statistics of one group of cells (a profile, or a profile within a category or a split).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupStats {
    pub profile: String,
    /// None for the whole profile or a split; the category otherwise.
    pub category: Option<String>,
    /// The split, for the per-split breakdown; None otherwise.
    #[serde(default)]
    pub split: Option<String>,
    pub cells: usize,
    pub cases: usize,
    pub passed: usize,
    pub failed: usize,
    /// Count of every outcome class, including `incomplete` (no run_finished).
    pub outcomes: BTreeMap<String, usize>,
    /// passed / cells: infrastructure failures count as not passed.
    pub pass_rate: f64,
    /// 95% interval of the pass rate over the same cells, clustered by case, with the name of
    /// its method (`wilson` for one epoch, `clustered_se` with epochs).
    pub pass_rate_ci: Interval,
    /// Cells with a valid verdict (passed or failed) / cells.
    pub coverage: f64,
    pub test_pass_rate: f64,
    pub verifier_pass_rate: f64,
    pub mean_steps: f64,
    pub mean_tool_calls: f64,
    pub repeated_reads: u64,
    pub invalid_actions: u64,
    pub policy_denials: u64,
    pub tool_failures: u64,
    pub model_errors: u64,
    pub model_retries: u64,
    pub wall_p50_ms: u64,
    pub wall_p95_ms: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// USD, when the profile states prices.
    pub cost_usd: Option<f64>,
    /// Epochs per case (the smallest count seen, so k never exceeds what every case has).
    pub epochs: usize,
    pub pass_at_1: f64,
    /// Probability that at least one of k attempts passes (unbiased estimator), k = epochs.
    pub pass_at_k: f64,
    /// Probability that all k attempts pass, k = epochs.
    pub pass_hat_k: f64,
}

/// A paired comparison of profile `a` with profile `b` on the cases both measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub a: String,
    pub b: String,
    /// Cases both profiles measured (at least one passed or failed cell each): the pairs.
    pub cases: usize,
    /// Cases both profiles ran but left out because one side has no measured cell there
    /// (only infrastructure errors, cancelled or incomplete cells): missing data, not losses.
    pub dropped_cases: usize,
    /// Shared cases where `a`'s share of passed epochs was higher, lower, equal.
    pub wins: usize,
    pub losses: usize,
    pub ties: usize,
    /// Mean over shared cases of (a's share of passed epochs - b's).
    pub mean_diff: f64,
    /// 95% interval of `mean_diff` and its method (`exact_sign` under 30 cases,
    /// `paired_clustered_se` from 30 on). Not adjusted for multiple comparisons.
    pub ci: Interval,
    /// Two-sided p-value of "no difference", from `ci.method`.
    pub p_value: f64,
    /// `p_value` after Holm's correction over the report's `adjusted_over` comparisons (equal
    /// to `p_value` when there is one). The verdict is called on this value.
    pub p_adjusted: f64,
    /// How many comparisons the report made (the m of Holm's correction).
    pub adjusted_over: usize,
    /// `a_better`, `b_better` or `within_noise`, at [`ALPHA`] on `p_adjusted`.
    pub verdict: Verdict,
    /// The verdict in words with the numbers behind it, as every report prints it.
    pub verdict_text: String,
    /// The smallest difference this comparison could have detected (see [`Power`]); None when
    /// no difference could reach significance with so few cases.
    pub mde: Option<f64>,
}

/// Where the variance behind a minimum detectable effect came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VarianceSource {
    /// Estimated from the measured cells of every profile ([`Variance::observed`]).
    Observed,
    /// Assumed from the measured pass rate ([`Variance::assumed`]): too few cases, or no spread.
    Assumed,
    /// Observed for some profiles, assumed for the others.
    Mixed,
}

impl VarianceSource {
    pub fn as_str(self) -> &'static str {
        match self {
            VarianceSource::Observed => "variance observed",
            VarianceSource::Assumed => "variance assumed at the measured pass rate",
            VarianceSource::Mixed => "variance observed where the data show spread, else assumed",
        }
    }
}

/// What a run of this size could detect: the minimum detectable effect (MDE), the smallest
/// difference in pass rate between two profiles that a comparison on `cases` cases with
/// `epochs` epochs would call `power` of the time at error rate `alpha`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Power {
    pub alpha: f64,
    pub power: f64,
    /// Cases every profile measured (for one profile: the cases it measured).
    pub cases: usize,
    pub epochs: usize,
    /// None when nothing is detectable: under [`stats::min_cases`] cases even a clean sweep
    /// cannot reach `alpha` (5 cases: p = 0.0625).
    pub mde: Option<f64>,
    pub variance: VarianceSource,
    /// Pass rate of the measured cells behind the MDE (the baseline of an assumed variance).
    pub measured_pass_rate: f64,
}

impl Power {
    /// One sentence for every report, e.g. "minimum detectable effect 31.3 points of pass rate,
    /// at 80% power and alpha 0.05 over 40 case(s) x 1 epoch(s) (variance observed)".
    pub fn sentence(&self) -> String {
        let why = if self.mde.is_none() {
            format!(
                ": with fewer than {} cases no difference can reach p < {}",
                stats::min_cases(self.alpha),
                self.alpha
            )
        } else {
            String::new()
        };
        format!(
            "minimum detectable effect {}, at {:.0}% power and alpha {} over {} case(s) x {} epoch(s) ({}){why}",
            mde_words(self.mde),
            self.power * 100.0,
            self.alpha,
            self.cases,
            self.epochs,
            self.variance.as_str()
        )
    }
}

/// "31.3 points of pass rate", or "none" when nothing could be detected.
pub fn mde_words(mde: Option<f64>) -> String {
    match mde {
        Some(d) if d < 1.0 => format!("{:.1} points of pass rate", d * 100.0),
        Some(_) => "none in practice (over 100 points)".into(),
        None => "none".into(),
    }
}

/// Per-case pass indicators of one profile: case -> 1.0 (passed) or 0.0 per epoch. With
/// `measured_only`, cells without a verdict (infrastructure errors, cancelled, incomplete) are
/// left out instead of counting as 0. This is pass/fail, not the cell's reward (a partial
/// reward still counts as not passed).
fn case_passes<'a>(cells: impl Iterator<Item = &'a CellSummary>, measured_only: bool) -> BTreeMap<String, Vec<f64>> {
    let mut m: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for c in cells {
        let values = m.entry(c.case_id.to_string()).or_default();
        match c.outcome {
            Some(Outcome::Passed) => values.push(1.0),
            Some(Outcome::Failed) => values.push(0.0),
            _ if !measured_only => values.push(0.0),
            _ => {}
        }
    }
    m
}

fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() { 0.0 } else { xs.iter().sum::<f64>() / xs.len() as f64 }
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// C(n, k) as f64 (small n).
fn choose(n: usize, k: usize) -> f64 {
    if k > n {
        return 0.0;
    }
    let k = k.min(n - k);
    (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
}

/// Unbiased pass@k for one case with n attempts of which c passed.
pub fn pass_at_k(n: usize, c: usize, k: usize) -> f64 {
    if n == 0 || k == 0 {
        return 0.0;
    }
    if n - c < k {
        return 1.0;
    }
    1.0 - choose(n - c, k) / choose(n, k)
}

/// Probability that k attempts drawn from n (c passed) all pass.
pub fn pass_hat_k(n: usize, c: usize, k: usize) -> f64 {
    if n == 0 || k == 0 || k > n {
        return 0.0;
    }
    choose(c, k) / choose(n, k)
}

/// Stats of the cells of one group.
pub fn group_stats(profile: &str, category: Option<&str>, split: Option<&str>, cells: &[&CellSummary]) -> GroupStats {
    let n = cells.len();
    let nf = n.max(1) as f64;
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    for c in cells {
        *outcomes.entry(c.outcome_label().to_string()).or_default() += 1;
    }
    let passed = cells.iter().filter(|c| c.outcome == Some(Outcome::Passed)).count();
    let failed = cells.iter().filter(|c| c.outcome == Some(Outcome::Failed)).count();
    let mut walls: Vec<u64> = cells.iter().map(|c| c.wall_ms).collect();
    walls.sort_unstable();
    let sum = |f: fn(&CellSummary) -> u64| cells.iter().map(|c| f(c)).sum::<u64>();

    // Every planned cell, infrastructure failures as not passed: the cells `pass_rate` counts.
    let by_case = case_passes(cells.iter().copied(), false);
    let per_case: Vec<Vec<f64>> = by_case.values().cloned().collect();
    let epochs = by_case.values().map(Vec::len).min().unwrap_or(0);
    let k = epochs;
    let per_case_mean = |f: fn(usize, usize, usize) -> f64| {
        mean(&by_case.values().map(|r| f(r.len(), r.iter().filter(|x| **x > 0.5).count(), k)).collect::<Vec<_>>())
    };
    // None unless at least one cell's profile states prices.
    let cost_usd = cells.iter().filter_map(|c| c.cost_usd()).reduce(|a, b| a + b);
    GroupStats {
        profile: profile.to_string(),
        category: category.map(str::to_string),
        split: split.map(str::to_string),
        cells: n,
        cases: by_case.len(),
        passed,
        failed,
        outcomes,
        pass_rate: passed as f64 / nf,
        pass_rate_ci: stats::clustered_mean(&per_case, CONFIDENCE).interval,
        coverage: (passed + failed) as f64 / nf,
        test_pass_rate: cells.iter().filter(|c| c.tests_passed == Some(true)).count() as f64 / nf,
        verifier_pass_rate: cells.iter().filter(|c| c.verifier_passed == Some(true)).count() as f64 / nf,
        mean_steps: sum(|c| c.steps as u64) as f64 / nf,
        mean_tool_calls: sum(|c| c.tool_calls as u64) as f64 / nf,
        repeated_reads: sum(|c| c.repeated_reads as u64),
        invalid_actions: sum(|c| c.invalid_actions as u64),
        policy_denials: sum(|c| c.policy_denials as u64),
        tool_failures: sum(|c| c.tool_failures as u64),
        model_errors: sum(|c| c.model_errors as u64),
        model_retries: sum(|c| c.model_retries as u64),
        wall_p50_ms: percentile(&walls, 50.0),
        wall_p95_ms: percentile(&walls, 95.0),
        input_tokens: sum(|c| c.input_tokens),
        output_tokens: sum(|c| c.output_tokens),
        cost_usd,
        epochs,
        pass_at_1: per_case_mean(pass_at_k_1),
        pass_at_k: per_case_mean(pass_at_k),
        pass_hat_k: per_case_mean(pass_hat_k),
    }
}

fn pass_at_k_1(n: usize, c: usize, _k: usize) -> f64 {
    pass_at_k(n, c, 1)
}

/// Per-profile stats, in the given profile order.
pub fn by_profile(profiles: &[String], cells: &[CellSummary]) -> Vec<GroupStats> {
    profiles
        .iter()
        .map(|p| {
            let group: Vec<&CellSummary> = cells.iter().filter(|c| c.group() == p.as_str()).collect();
            group_stats(p, None, None, &group)
        })
        .collect()
}

/// Per profile x category stats, profile-major, categories sorted.
pub fn by_category(profiles: &[String], cells: &[CellSummary]) -> Vec<GroupStats> {
    let categories: BTreeSet<&str> = cells.iter().map(|c| c.category.as_str()).collect();
    let mut out = Vec::new();
    for p in profiles {
        for cat in &categories {
            let group: Vec<&CellSummary> =
                cells.iter().filter(|c| c.group() == p.as_str() && c.category == *cat).collect();
            if !group.is_empty() {
                out.push(group_stats(p, Some(cat), None, &group));
            }
        }
    }
    out
}

/// Per profile x split stats, profile-major, splits sorted; cases without a split are left
/// out, and a run whose cases have no split gets no rows at all.
pub fn by_split(profiles: &[String], cells: &[CellSummary]) -> Vec<GroupStats> {
    let splits: BTreeSet<&str> = cells.iter().map(|c| c.split.as_str()).filter(|s| !s.is_empty()).collect();
    let mut out = Vec::new();
    for p in profiles {
        for split in &splits {
            let group: Vec<&CellSummary> =
                cells.iter().filter(|c| c.group() == p.as_str() && c.split == *split).collect();
            if !group.is_empty() {
                out.push(group_stats(p, None, Some(split), &group));
            }
        }
    }
    out
}

/// The measured pass indicators per case of `cells` (infrastructure errors left out), as the
/// comparisons and the power statement use them; `plan` reads a past run with it too.
pub(crate) fn measured_passes<'a>(cells: impl Iterator<Item = &'a CellSummary>) -> BTreeMap<String, Vec<f64>> {
    case_passes(cells, true)
}

/// The measured per-case values of each profile (infrastructure errors left out), in order.
fn measured(profiles: &[String], cells: &[CellSummary]) -> Vec<BTreeMap<String, Vec<f64>>> {
    profiles.iter().map(|p| measured_passes(cells.iter().filter(|c| c.group() == p.as_str()))).collect()
}

/// One profile's variance over some cases, and the measured cells behind it.
struct ProfileVariance {
    variance: Variance,
    /// Estimated from the cells (else assumed at their pass rate).
    observed: bool,
    passed: f64,
    cells: usize,
}

/// One profile's variance over `cases`: observed when its measured cells there show any spread,
/// else assumed at its measured pass rate (a profile that passed everything would otherwise
/// promise that any difference is detectable).
fn variance_over(values: &BTreeMap<String, Vec<f64>>, cases: &BTreeSet<&str>) -> ProfileVariance {
    let per_case: Vec<Vec<f64>> = cases.iter().filter_map(|c| values.get(*c)).cloned().collect();
    let cells = per_case.iter().map(Vec::len).sum::<usize>();
    let passed = per_case.iter().flatten().sum::<f64>();
    match Variance::observed(&per_case) {
        Some(variance) if variance.between + variance.within > 0.0 => {
            ProfileVariance { variance, observed: true, passed, cells }
        }
        _ => {
            let rate = if cells == 0 { 0.0 } else { passed / cells as f64 };
            ProfileVariance { variance: Variance::assumed(rate), observed: false, passed, cells }
        }
    }
}

/// The MDE of comparing profiles (their measured values) on `cases` with `epochs` epochs: the
/// profiles' variances averaged.
fn power_over(values: &[&BTreeMap<String, Vec<f64>>], cases: &BTreeSet<&str>, epochs: usize) -> Power {
    let parts: Vec<ProfileVariance> = values.iter().map(|v| variance_over(v, cases)).collect();
    let k = parts.len().max(1) as f64;
    let variance = Variance {
        between: parts.iter().map(|p| p.variance.between).sum::<f64>() / k,
        within: parts.iter().map(|p| p.variance.within).sum::<f64>() / k,
    };
    let observed = parts.iter().filter(|p| p.observed).count();
    let source = if observed == 0 {
        VarianceSource::Assumed
    } else if observed == parts.len() {
        VarianceSource::Observed
    } else {
        VarianceSource::Mixed
    };
    let cells: usize = parts.iter().map(|p| p.cells).sum();
    let passed: f64 = parts.iter().map(|p| p.passed).sum();
    let epochs = epochs.max(1);
    let mde = stats::mde_for(&variance, cases.len(), epochs, ALPHA, POWER);
    Power {
        alpha: ALPHA,
        power: POWER,
        cases: cases.len(),
        epochs,
        mde: mde.is_finite().then_some(mde),
        variance: source,
        measured_pass_rate: if cells == 0 { 0.0 } else { passed / cells as f64 },
    }
}

/// Cases with at least one measured cell in every one of `values`.
fn measured_by_all<'a>(values: &[&'a BTreeMap<String, Vec<f64>>]) -> BTreeSet<&'a str> {
    let Some(first) = values.first() else { return BTreeSet::new() };
    first
        .iter()
        .filter(|(case, v)| !v.is_empty() && values[1..].iter().all(|o| o.get(*case).is_some_and(|w| !w.is_empty())))
        .map(|(case, _)| case.as_str())
        .collect()
}

/// What the run could detect between profiles, on the cases every profile measured, with
/// `epochs` epochs per case (the manifest's).
pub fn power(profiles: &[String], cells: &[CellSummary], epochs: usize) -> Power {
    let values = measured(profiles, cells);
    let refs: Vec<&BTreeMap<String, Vec<f64>>> = values.iter().collect();
    power_over(&refs, &measured_by_all(&refs), epochs)
}

/// The paired comparison of every pair of profiles (in order) on the cases both measured,
/// with Holm's correction over all of them. `epochs` is the manifest's, for the MDE.
pub fn compare_all(profiles: &[String], cells: &[CellSummary], epochs: usize) -> Vec<Comparison> {
    let pairs: Vec<(usize, usize)> =
        (0..profiles.len()).flat_map(|i| (i + 1..profiles.len()).map(move |j| (i, j))).collect();
    compare_pairs(profiles, cells, epochs, &pairs)
}

/// The first group (an ablate run's `full`, the reference) against each of the others, with
/// Holm's correction over those comparisons only.
pub fn compare_with_first(groups: &[String], cells: &[CellSummary], epochs: usize) -> Vec<Comparison> {
    let pairs: Vec<(usize, usize)> = (1..groups.len()).map(|j| (0, j)).collect();
    compare_pairs(groups, cells, epochs, &pairs)
}

fn compare_pairs(
    profiles: &[String],
    cells: &[CellSummary],
    epochs: usize,
    pairs: &[(usize, usize)],
) -> Vec<Comparison> {
    let values = measured(profiles, cells);
    let mut tests = Vec::new();
    for &(i, j) in pairs {
        {
            let (a, b) = (&values[i], &values[j]);
            let both_ran = a.keys().filter(|case| b.contains_key(*case)).count();
            let shared = measured_by_all(&[a, b]);
            let p = stats::paired(a, b, ALPHA);
            debug_assert_eq!(p.cases, shared.len());
            let mde = power_over(&[a, b], &shared, epochs).mde;
            tests.push((i, j, both_ran - p.cases, p, mde));
        }
    }
    let adjusted = stats::holm_adjusted(&tests.iter().map(|t| t.3.p_value).collect::<Vec<_>>());
    let m = tests.len();
    tests
        .into_iter()
        .zip(adjusted)
        .map(|((i, j, dropped_cases, p, mde), p_adjusted)| {
            // The exact test's direction is the sign of wins - losses, the t test's that of the
            // mean difference (as in `stats::paired`).
            let direction = if p.method == Method::ExactSign { p.wins as f64 - p.losses as f64 } else { p.mean_diff };
            let verdict = Verdict::from_test(p_adjusted, ALPHA, direction);
            let (a, b) = (&profiles[i], &profiles[j]);
            Comparison {
                a: a.clone(),
                b: b.clone(),
                cases: p.cases,
                dropped_cases,
                wins: p.wins,
                losses: p.losses,
                ties: p.ties,
                mean_diff: p.mean_diff,
                ci: p.interval,
                p_value: p.p_value,
                p_adjusted,
                adjusted_over: m,
                verdict,
                verdict_text: verdict_text(a, b, verdict, &p, p_adjusted, m),
                mde,
            }
        })
        .collect()
}

/// "oracle better than nop (p = 0.0020, exact sign test)", "within noise (p = 0.0625, exact
/// sign test)"; with several comparisons the Holm-adjusted value is the one the verdict used.
fn verdict_text(a: &str, b: &str, verdict: Verdict, p: &stats::Paired, p_adjusted: f64, m: usize) -> String {
    if p.cases == 0 {
        return "no shared measured cases".into();
    }
    let head = match verdict {
        Verdict::ABetter => format!("{a} better than {b}"),
        Verdict::BBetter => format!("{b} better than {a}"),
        Verdict::WithinNoise => "within noise".into(),
    };
    if m > 1 {
        format!("{head} ({}, {} after Holm over {m} comparisons, {})", p_is(p.p_value), p_text(p_adjusted), p.method)
    } else {
        format!("{head} ({}, {})", p_is(p.p_value), p.method)
    }
}

/// "p = 0.0625", "p < 0.0001".
pub fn p_is(p: f64) -> String {
    let text = p_text(p);
    if text.starts_with('<') { format!("p {text}") } else { format!("p = {text}") }
}

/// At most four decimals, never "0": `0.0625`, `0.0313`, `1`, `< 0.0001`.
pub fn p_text(p: f64) -> String {
    if p < 0.0001 { "< 0.0001".into() } else { format!("{}", (p * 10_000.0).round() / 10_000.0) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(case: &str, profile: &str, outcome: Option<Outcome>) -> CellSummary {
        CellSummary {
            case_id: case.into(),
            profile: profile.into(),
            category: "bugfix".into(),
            outcome,
            ..Default::default()
        }
    }

    fn pass_or_fail(pass: bool) -> Option<Outcome> {
        Some(if pass { Outcome::Passed } else { Outcome::Failed })
    }

    fn names(ps: &[&str]) -> Vec<String> {
        ps.iter().map(|p| p.to_string()).collect()
    }

    /// `n` cases, one epoch, where each profile passes case `i` when `pass(profile, i)`.
    fn matrix(profiles: &[&str], n: usize, pass: impl Fn(&str, usize) -> bool) -> Vec<CellSummary> {
        let mut cells = Vec::new();
        for i in 0..n {
            for p in profiles {
                cells.push(cell(&format!("c{i}"), p, pass_or_fail(pass(p, i))));
            }
        }
        cells
    }

    #[test]
    fn pass_at_k_matches_the_closed_form() {
        assert_eq!(pass_at_k(5, 0, 3), 0.0);
        assert_eq!(pass_at_k(5, 5, 3), 1.0);
        // n=4, c=1, k=2: 1 - C(3,2)/C(4,2) = 1 - 3/6.
        assert!((pass_at_k(4, 1, 2) - 0.5).abs() < 1e-12);
        // pass^k: n=4, c=3, k=2: C(3,2)/C(4,2) = 3/6.
        assert!((pass_hat_k(4, 3, 2) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn infrastructure_failures_count_against_pass_rate_and_show_in_coverage() {
        let cells = vec![
            cell("a", "p", Some(Outcome::Passed)),
            cell("b", "p", Some(Outcome::Failed)),
            cell("c", "p", Some(Outcome::ProviderError)),
            cell("d", "p", None),
        ];
        let s = &by_profile(&["p".into()], &cells)[0];
        assert_eq!(s.cells, 4);
        assert_eq!(s.pass_rate, 0.25);
        assert_eq!(s.coverage, 0.5);
        assert_eq!(s.outcomes["provider_error"], 1);
        assert_eq!(s.outcomes["incomplete"], 1);
        // The interval is over the same four cells, so it brackets the rate shown.
        assert!(s.pass_rate_ci.contains(s.pass_rate), "{:?}", s.pass_rate_ci);
    }

    #[test]
    fn zero_of_five_reads_zero_to_forty_three_percent_by_wilson() {
        let cells = matrix(&["nop"], 5, |_, _| false);
        let s = &by_profile(&names(&["nop"]), &cells)[0];
        assert_eq!(s.pass_rate, 0.0);
        assert_eq!(s.pass_rate_ci.method, Method::Wilson);
        assert_eq!(s.pass_rate_ci.lo, 0.0);
        assert!((s.pass_rate_ci.hi - 0.4345).abs() < 0.001, "{:?}", s.pass_rate_ci);
        // 5 of 5: 56.6-100%, not a point either.
        let s = &by_profile(&names(&["oracle"]), &matrix(&["oracle"], 5, |_, _| true))[0];
        assert!((s.pass_rate_ci.lo - 0.566).abs() < 0.001 && s.pass_rate_ci.hi == 1.0, "{:?}", s.pass_rate_ci);
    }

    #[test]
    fn epochs_are_clustered_by_case_not_counted_as_new_cases() {
        // 4 cases x 5 epochs, two cases always pass and two never: 20 cells but 4 units.
        let mut cells = Vec::new();
        for i in 0..4 {
            for _ in 0..5 {
                cells.push(cell(&format!("c{i}"), "p", pass_or_fail(i < 2)));
            }
        }
        let s = &by_profile(&names(&["p"]), &cells)[0];
        assert_eq!((s.cells, s.cases, s.epochs), (20, 4, 5));
        assert_eq!(s.pass_rate_ci.method, Method::ClusteredSe);
        // Twenty independent cells would give Wilson 29.9-70.1%; four cases give far wider.
        let independent = stats::wilson(10, 20, CONFIDENCE);
        assert!(s.pass_rate_ci.width() > independent.width() * 1.5, "{:?} vs {independent:?}", s.pass_rate_ci);
    }

    #[test]
    fn five_clean_wins_are_within_noise() {
        let cells = matrix(&["oracle", "smol"], 5, |p, _| p == "oracle");
        let c = &compare_all(&names(&["oracle", "smol"]), &cells, 1)[0];
        assert_eq!((c.cases, c.wins, c.losses, c.ties), (5, 5, 0, 0));
        assert_eq!(c.p_value, 0.0625);
        assert_eq!(c.p_adjusted, 0.0625, "one comparison: nothing to adjust");
        assert_eq!(c.verdict, Verdict::WithinNoise);
        assert_eq!(c.verdict_text, "within noise (p = 0.0625, exact sign test)");
        assert_eq!(c.ci.method, Method::ExactSign);
        assert!(c.ci.lo < 0.0 && c.ci.hi > 0.0, "{:?}", c.ci);
        assert_eq!(c.mde, None, "five cases cannot detect anything at 5%");
        // Six clean wins can (p = 2/64).
        let cells = matrix(&["oracle", "smol"], 6, |p, _| p == "oracle");
        let c = &compare_all(&names(&["oracle", "smol"]), &cells, 1)[0];
        assert_eq!(c.verdict, Verdict::ABetter);
        assert_eq!(c.verdict_text, "oracle better than smol (p = 0.0313, exact sign test)");
    }

    #[test]
    fn one_case_never_decides() {
        let cells = matrix(&["a", "b"], 1, |p, _| p == "a");
        let c = &compare_all(&names(&["a", "b"]), &cells, 1)[0];
        assert_eq!((c.cases, c.p_value, c.verdict), (1, 1.0, Verdict::WithinNoise));
    }

    #[test]
    fn infrastructure_errors_are_missing_data_in_comparisons_never_losses() {
        // The model never ran (provider errors on every cell): nothing was compared.
        let mut cells = matrix(&["oracle"], 8, |_, _| true);
        cells.extend((0..8).map(|i| cell(&format!("c{i}"), "gpt", Some(Outcome::ProviderError))));
        let c = &compare_all(&names(&["oracle", "gpt"]), &cells, 1)[0];
        assert_eq!((c.cases, c.dropped_cases, c.verdict), (0, 8, Verdict::WithinNoise));
        assert_eq!(c.verdict_text, "no shared measured cases");

        // Half the model's cells broke: only the four measured cases are paired.
        let mut cells = matrix(&["oracle"], 8, |_, _| true);
        for i in 0..8 {
            let outcome = if i < 4 {
                Some(Outcome::Failed)
            } else if i == 4 {
                None
            } else {
                Some(Outcome::Timeout)
            };
            cells.push(cell(&format!("c{i}"), "gpt", outcome));
        }
        let c = &compare_all(&names(&["oracle", "gpt"]), &cells, 1)[0];
        assert_eq!((c.cases, c.dropped_cases, c.wins), (4, 4, 4));
        assert_eq!(c.p_value, 0.125, "4 wins, not 8");
        // With epochs, a case's broken epoch is left out and its measured epoch still counts.
        let cells = vec![
            cell("c0", "a", Some(Outcome::Passed)),
            cell("c0", "a", Some(Outcome::HarnessError)),
            cell("c0", "b", Some(Outcome::Failed)),
            cell("c0", "b", Some(Outcome::Cancelled)),
        ];
        let c = &compare_all(&names(&["a", "b"]), &cells, 2)[0];
        assert_eq!((c.cases, c.mean_diff), (1, 1.0), "a's case mean is 1 (one measured epoch), not 0.5");
    }

    #[test]
    fn holm_is_applied_and_counted_with_three_profiles() {
        // Six cases: `good` passes all, `bad` and `worse` none. Alone, 6 clean wins give
        // p = 0.031 < 0.05; among three comparisons Holm makes them 0.094 and 0.063.
        let cells = matrix(&["good", "bad", "worse"], 6, |p, _| p == "good");
        let cmp = compare_all(&names(&["good", "bad", "worse"]), &cells, 1);
        assert_eq!(cmp.len(), 3);
        assert!(cmp.iter().all(|c| c.adjusted_over == 3));
        assert_eq!(cmp[0].p_value, 0.03125);
        assert_eq!(cmp[0].p_adjusted, 0.09375);
        assert_eq!(cmp[1].p_adjusted, 0.09375, "Holm's adjusted values never decrease");
        assert_eq!(cmp[2].p_adjusted, 1.0);
        assert!(cmp.iter().all(|c| c.verdict == Verdict::WithinNoise), "{cmp:?}");
        assert_eq!(
            cmp[0].verdict_text,
            "within noise (p = 0.0313, 0.0938 after Holm over 3 comparisons, exact sign test)"
        );

        // With 30 cases a real difference survives the correction; noise still does not.
        let cells = matrix(&["good", "bad", "bad2"], 30, |p, i| match p {
            "good" => true,
            "bad" => i % 10 == 0,
            _ => i % 10 == 1,
        });
        let cmp = compare_all(&names(&["good", "bad", "bad2"]), &cells, 1);
        assert_eq!(cmp[0].verdict, Verdict::ABetter);
        assert_eq!(cmp[0].ci.method, Method::PairedClusteredSe);
        assert!(cmp[0].verdict_text.starts_with("good better than bad (p < 0.0001"), "{}", cmp[0].verdict_text);
        assert_eq!(cmp[2].verdict, Verdict::WithinNoise);
        assert!(cmp[0].mde.is_some_and(|d| d > 0.0 && d < 0.5), "{:?}", cmp[0].mde);
    }

    #[test]
    fn ablations_are_grouped_as_profile_slash_ablation_and_compared_with_full_only() {
        // One profile under three ablations: `no_memory` fails every case. Holm counts the two
        // comparisons with `full`, not the three pairs.
        let mut cells = Vec::new();
        for i in 0..6 {
            for a in ["full", "no_memory", "no_repomap"] {
                let mut c = cell(&format!("c{i}"), "p", pass_or_fail(a != "no_memory"));
                c.ablation = a.into();
                cells.push(c);
            }
        }
        let groups = names(&["p/full", "p/no_memory", "p/no_repomap"]);
        let stats = by_profile(&groups, &cells);
        assert_eq!(stats.iter().map(|s| (s.cells, s.passed)).collect::<Vec<_>>(), [(6, 6), (6, 0), (6, 6)]);
        let cmp = compare_with_first(&groups, &cells, 1);
        let pairs: Vec<(&str, &str)> = cmp.iter().map(|c| (c.a.as_str(), c.b.as_str())).collect();
        assert_eq!(pairs, [("p/full", "p/no_memory"), ("p/full", "p/no_repomap")]);
        assert!(cmp.iter().all(|c| c.adjusted_over == 2 && c.cases == 6), "{cmp:?}");
        assert_eq!((cmp[0].p_value, cmp[0].p_adjusted), (0.03125, 0.0625));
    }

    #[test]
    fn per_split_breakdown_uses_the_same_intervals() {
        let mut cells = Vec::new();
        for i in 0..6 {
            let split = if i < 4 { "train" } else { "test" };
            for p in ["a", "b"] {
                let mut c = cell(&format!("c{i}"), p, pass_or_fail(p == "a" && i % 2 == 0));
                c.split = split.into();
                cells.push(c);
            }
        }
        let splits = by_split(&names(&["a", "b"]), &cells);
        let keys: Vec<(&str, &str, usize)> =
            splits.iter().map(|s| (s.profile.as_str(), s.split.as_deref().unwrap(), s.cells)).collect();
        assert_eq!(keys, [("a", "test", 2), ("a", "train", 4), ("b", "test", 2), ("b", "train", 4)]);
        let a_train = &splits[1];
        assert_eq!(a_train.pass_rate, 0.5);
        assert_eq!(a_train.pass_rate_ci, stats::wilson(2, 4, CONFIDENCE));
        assert!(splits.iter().all(|s| s.category.is_none()));
        // Cases without a split give no rows.
        assert!(by_split(&names(&["a"]), &matrix(&["a"], 3, |_, _| true)).is_empty());
    }

    #[test]
    fn power_is_stated_for_the_cases_every_profile_measured() {
        let cells = matrix(&["oracle", "nop"], 5, |p, _| p == "oracle");
        let p = power(&names(&["oracle", "nop"]), &cells, 1);
        assert_eq!((p.cases, p.epochs, p.mde, p.alpha, p.power), (5, 1, None, ALPHA, POWER));
        // No spread anywhere: the variance is assumed (never promising a zero MDE).
        assert_eq!(p.variance, VarianceSource::Assumed);
        assert!(p.sentence().ends_with("with fewer than 6 cases no difference can reach p < 0.05"), "{}", p.sentence());

        // 40 cases at a 50% pass rate, one epoch: the observed variance of 0/1 cells is about
        // 0.25, so the MDE is near 2.802 * sqrt(0.5 / 40) = 0.31.
        let cells = matrix(&["a", "b"], 40, |_, i| i % 2 == 0);
        let p = power(&names(&["a", "b"]), &cells, 1);
        assert_eq!(p.variance, VarianceSource::Observed);
        let mde = p.mde.unwrap();
        assert!((mde - 0.317).abs() < 0.01, "{mde}");
        assert_eq!(p.measured_pass_rate, 0.5);
        // A profile with only infrastructure errors leaves nothing every profile measured.
        let mut cells = matrix(&["a"], 40, |_, i| i % 2 == 0);
        cells.extend((0..40).map(|i| cell(&format!("c{i}"), "gpt", Some(Outcome::ProviderError))));
        assert_eq!(power(&names(&["a", "gpt"]), &cells, 1).cases, 0);
    }

    #[test]
    fn p_values_read_plainly() {
        assert_eq!(p_text(0.0625), "0.0625");
        assert_eq!(p_text(0.03125), "0.0313");
        assert_eq!(p_text(1.0), "1");
        assert_eq!(p_text(1e-7), "< 0.0001");
        assert_eq!((p_is(0.0625), p_is(1e-7)), ("p = 0.0625".to_string(), "p < 0.0001".to_string()));
    }
}
