//! The gate's arithmetic: plain functions over numbers, so every rule is a unit test.
//!
//! The rules, all inclusive: a case passes when its score (mean reward over epochs, an errored
//! or missing cell counting 0) is >= 0.5; Step 1 passes when passed / size of the regression
//! set >= threshold (the denominator is the whole set, so a case that errored, produced no
//! verdict or no longer exists is a failure, never dropped); Step 2 passes when there is no best yet or val_score >=
//! best (the maximum of results.tsv, baseline included); paired Step 2 passes unless the
//! candidate is shown worse than HEAD by more than the margin: it fails only when the upper end
//! of [`crate::stats::paired`]'s 95% interval of (candidate - HEAD) lies below -margin (see
//! [`judge_paired`] for why, and its error rates). Numbers shown to people go through
//! [`fmt_pair`], which prints just enough digits for the printed comparison to agree with the
//! real one. "Not passing" lists ([`NotPassing`]) give each train case's score and why it did
//! not pass (its cells' outcomes); the test split never gets such a list.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::state::{RegressionSet, TrainResults, sort_ids};
use crate::replay::CellSummary;
use crate::stats::{self, Paired};
use crate::trace::event::Outcome;

/// A case passes at this score or above.
pub(crate) const PASS_SCORE: f64 = 0.5;

/// Error rate of paired Step 2's interval: a two-sided 95% interval, the one every hcbench
/// report shows. The gate looks only at its upper end, so a candidate exactly `margin` worse
/// than HEAD is reverted at most alpha / 2 = 2.5% of the time.
pub(crate) const PAIRED_ALPHA: f64 = 0.05;

/// The reward a cell contributes: its reward when it produced a verdict, else 0.
pub(crate) fn cell_reward(s: &CellSummary) -> f64 {
    if s.outcome.is_some_and(|o| o.is_verdict()) { s.reward } else { 0.0 }
}

/// Score of each planned case: the sum of its cells' rewards over `epochs` (a cell that never
/// reported counts 0). Cases without any cell are absent; callers treat absence as failure.
pub(crate) fn case_scores<'a>(cells: impl IntoIterator<Item = &'a CellSummary>, epochs: u32) -> BTreeMap<String, f64> {
    let mut sums: BTreeMap<String, f64> = BTreeMap::new();
    for c in cells {
        *sums.entry(c.case_id.to_string()).or_default() += cell_reward(c);
    }
    sums.into_iter().map(|(k, v)| (k, v / epochs.max(1) as f64)).collect()
}

pub(crate) fn passes(score: f64) -> bool {
    score >= PASS_SCORE
}

/// A train case that did not pass, as the "not passing" and "still failing" lists show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct NotPassing {
    pub case: String,
    pub score: f64,
    /// The outcomes of its cells that did not pass: "failed", "timeout", "harness error", ...;
    /// over several epochs with counts ("failed 2, timeout 1 of 4 epochs").
    pub reason: String,
}

impl NotPassing {
    /// "bugfix-1 (score 0, failed)".
    pub(crate) fn describe(&self) -> String {
        format!("{} (score {}, {})", self.case, fmt_num(self.score), self.reason)
    }
}

/// Why each case's cells did not pass, from their outcomes; an epoch without a cell is "no
/// result". Cases all of whose cells passed are absent.
pub(crate) fn case_reasons<'a>(
    cells: impl IntoIterator<Item = &'a CellSummary>,
    epochs: u32,
) -> BTreeMap<String, String> {
    let mut by_case: BTreeMap<String, (usize, Vec<(String, usize)>)> = BTreeMap::new();
    for c in cells {
        let (seen, labels) = by_case.entry(c.case_id.to_string()).or_default();
        *seen += 1;
        if c.outcome == Some(Outcome::Passed) {
            continue;
        }
        let label = c.outcome_label().replace('_', " ");
        match labels.iter_mut().find(|(l, _)| *l == label) {
            Some((_, n)) => *n += 1,
            None => labels.push((label, 1)),
        }
    }
    let epochs = epochs.max(1) as usize;
    by_case
        .into_iter()
        .filter_map(|(case, (seen, mut labels))| {
            if seen < epochs {
                labels.push(("no result".into(), epochs - seen));
            }
            if labels.is_empty() {
                return None;
            }
            let reason = if epochs == 1 {
                labels.into_iter().map(|(l, _)| l).collect::<Vec<_>>().join(", ")
            } else {
                let counts: Vec<String> = labels.into_iter().map(|(l, n)| format!("{l} {n}")).collect();
                format!("{} of {epochs} epochs", counts.join(", "))
            };
            Some((case, reason))
        })
        .collect()
}

/// The not-passing entries of `ids`: score and reason (a case without cells has no result).
fn not_passing(ids: &[String], scores: &BTreeMap<String, f64>, reasons: &BTreeMap<String, String>) -> Vec<NotPassing> {
    ids.iter()
        .map(|c| NotPassing {
            case: c.clone(),
            score: scores.get(c).copied().unwrap_or(0.0),
            reason: reasons.get(c).cloned().unwrap_or_else(|| "no result".into()),
        })
        .collect()
}

/// Step 1's verdict. Serialized as Step 1's `detail` in `gate --format json`, whose keys keep
/// the names of suite.json (`tasks` is the size of the set).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct RegressionVerdict {
    #[serde(rename = "tasks")]
    pub cases: usize,
    pub passed: usize,
    /// passed / cases (1.0 for an empty set).
    pub rate: f64,
    pub threshold: f64,
    pub pass: bool,
    /// Score of every case of the set (0 for missing ones).
    pub scores: BTreeMap<String, f64>,
    /// Cases of the set that are not train cases of the benchmark (counted as failures).
    pub missing: Vec<String>,
    /// Cases of the set that did not pass, naturally sorted.
    pub failing: Vec<String>,
    /// The same cases with their scores and reasons.
    pub not_passing: Vec<NotPassing>,
}

/// Judges the regression set: every case counts in the denominator; a case without a score
/// failed. `reasons` is [`case_reasons`] of the cells.
pub(crate) fn judge_regression_set(
    cases: &[String],
    scores: &BTreeMap<String, f64>,
    reasons: &BTreeMap<String, String>,
    missing: &[String],
    threshold: f64,
) -> RegressionVerdict {
    let mut all = BTreeMap::new();
    let mut failing = Vec::new();
    let mut passed = 0;
    for c in cases {
        let s = scores.get(c).copied().unwrap_or(0.0);
        all.insert(c.clone(), s);
        if passes(s) && !missing.contains(c) {
            passed += 1;
        } else {
            failing.push(c.clone());
        }
    }
    sort_ids(&mut failing);
    let mut reasons = reasons.clone();
    for m in missing {
        reasons.insert(m.clone(), "not a train case".into());
    }
    let not_passing = not_passing(&failing, scores, &reasons);
    let rate = if cases.is_empty() { 1.0 } else { passed as f64 / cases.len() as f64 };
    RegressionVerdict {
        cases: cases.len(),
        passed,
        rate,
        threshold,
        // An empty set is skipped and counts as passed.
        pass: cases.is_empty() || rate >= threshold,
        scores: all,
        missing: missing.to_vec(),
        failing,
        not_passing,
    }
}

/// Mean reward over every planned cell; a cell that errored or never reported counts 0.
pub(crate) fn val_score(rewards: &[f64], planned: usize) -> f64 {
    if planned == 0 { 0.0 } else { rewards.iter().sum::<f64>() / planned as f64 }
}

/// How many unmeasured cells a step's message shows as examples (train split only).
pub(crate) const UNMEASURED_EXAMPLES: usize = 3;

/// Why a planned cell gave no measurement of the candidate: the infrastructure, not the agent.
/// A verifier error is not among them: the verifier reads what the agent left, so the agent
/// can cause one, and it stays a 0 like a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Unmeasured {
    HarnessError,
    ProviderError,
    Timeout,
    /// Planned but without a result: never reported, crashed, or cancelled.
    Missing,
}

impl Unmeasured {
    /// The class of a cell's outcome; None when the cell measured the candidate.
    pub(crate) fn of(outcome: Option<Outcome>) -> Option<Unmeasured> {
        match outcome {
            None | Some(Outcome::Cancelled) => Some(Unmeasured::Missing),
            Some(Outcome::HarnessError) => Some(Unmeasured::HarnessError),
            Some(Outcome::ProviderError) => Some(Unmeasured::ProviderError),
            Some(Outcome::Timeout) => Some(Unmeasured::Timeout),
            Some(Outcome::Passed | Outcome::Failed | Outcome::VerifierError) => None,
        }
    }

    pub(crate) fn label(self) -> &'static str {
        match self {
            Unmeasured::HarnessError => "harness error",
            Unmeasured::ProviderError => "provider error",
            Unmeasured::Timeout => "timeout",
            Unmeasured::Missing => "missing",
        }
    }
}

/// One unmeasured train cell shown as an example (never a test cell: the split is private).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct UnmeasuredCell {
    pub case: String,
    pub class: Unmeasured,
    pub reason: String,
}

/// How much of one arm's planned cells the infrastructure left unmeasured, by class.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Coverage {
    pub planned: usize,
    pub harness_error: usize,
    pub provider_error: usize,
    pub timeout: usize,
    pub missing: usize,
    /// Up to [`UNMEASURED_EXAMPLES`] unmeasured cells; always empty for the test split.
    pub examples: Vec<UnmeasuredCell>,
}

impl Coverage {
    pub(crate) fn unmeasured(&self) -> usize {
        self.harness_error + self.provider_error + self.timeout + self.missing
    }

    /// Unmeasured cells / planned cells (0 when nothing was planned).
    pub(crate) fn fraction(&self) -> f64 {
        if self.planned == 0 { 0.0 } else { self.unmeasured() as f64 / self.planned as f64 }
    }

    /// True when more than `max` of the planned cells are unmeasured (inclusive like every gate
    /// rule: exactly `max` still gets a verdict).
    pub(crate) fn exceeds(&self, max: f64) -> bool {
        self.fraction() > max
    }
}

/// Counts one arm's unmeasured cells. `planned` is the cells the step asked for; a planned cell
/// with no summary at all is missing. `examples` is false for the test split, whose case ids
/// must never leave the gate.
pub(crate) fn coverage(cells: &[CellSummary], planned: usize, examples: bool) -> Coverage {
    let mut c = Coverage { planned, harness_error: 0, provider_error: 0, timeout: 0, missing: 0, examples: Vec::new() };
    let mut reported = 0;
    for cell in cells {
        let class = Unmeasured::of(cell.outcome);
        if class != Some(Unmeasured::Missing) {
            reported += 1;
        }
        let Some(class) = class else { continue };
        match class {
            Unmeasured::HarnessError => c.harness_error += 1,
            Unmeasured::ProviderError => c.provider_error += 1,
            Unmeasured::Timeout => c.timeout += 1,
            Unmeasured::Missing => {}
        }
        if examples && c.examples.len() < UNMEASURED_EXAMPLES {
            c.examples.push(UnmeasuredCell { case: cell.case_id.to_string(), class, reason: cell.reason.to_string() });
        }
    }
    // Cells without a result, whether they reported a missing outcome or never reported at all.
    c.missing = planned.saturating_sub(reported);
    c
}

/// The best recorded score (kept beside the rows it reads, [`super::state::best`]).
pub(crate) use super::state::best;

/// Step 2 (simple): pass with no best yet, or when val_score >= best.
pub(crate) fn benchmark_passes(val: f64, best: Option<f64>) -> bool {
    best.is_none_or(|b| val >= b)
}

/// Paired Step 2's verdict.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PairedVerdict {
    /// The comparison of candidate (A) with HEAD (B) over the cases both arms measured.
    pub comparison: Paired,
    pub margin: f64,
    pub pass: bool,
}

/// The rewards of the cells that produced a verdict, per case: what a paired comparison
/// compares. A cell with an infrastructure error (or none at all) is missing data here, not a
/// 0: a provider outage in one arm must not read as that arm being worse. (`val_score` still
/// counts such cells 0; only the comparison leaves them out.)
pub(crate) fn measured_rewards<'a>(cells: impl IntoIterator<Item = &'a CellSummary>) -> BTreeMap<String, Vec<f64>> {
    let mut out: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for c in cells.into_iter().filter(|c| c.outcome.is_some_and(|o| o.is_verdict())) {
        out.entry(c.case_id.to_string()).or_default().push(c.reward);
    }
    out
}

/// Paired Step 2: compares the candidate with HEAD case by case ([`stats::paired`]: the exact
/// sign test under 30 shared cases, the paired clustered SE from 30 on) over the planned
/// `cases` that both arms measured, and fails only when the upper end of the 95% interval of
/// (candidate - HEAD) is below `-margin`, i.e. the candidate is worse than HEAD by more than
/// the margin with confidence. At margin 0 that is exactly the comparison's verdict "HEAD
/// better".
///
/// The burden of proof is on the regression: a gate reverts a candidate only on evidence, so a
/// candidate equal to HEAD is falsely reverted at most 2.5% of the time (one end of a 95%
/// interval), and with few cases nothing can be shown and the gate passes (8 cases need at
/// least 6 worse and none better). The measured rates, and the power against a real
/// regression, are in docs/gate.md ("Paired mode"), measured by `gate::calibration`.
pub(crate) fn judge_paired(
    cases: &[String],
    candidate: &BTreeMap<String, Vec<f64>>,
    head: &BTreeMap<String, Vec<f64>>,
    margin: f64,
) -> PairedVerdict {
    // Only planned cases count: a stray case id in the cells must not join the comparison.
    let planned = |arm: &BTreeMap<String, Vec<f64>>| -> BTreeMap<String, Vec<f64>> {
        cases.iter().filter_map(|c| arm.get(c).map(|v| (c.clone(), v.clone()))).collect()
    };
    let comparison = stats::paired(&planned(candidate), &planned(head), PAIRED_ALPHA);
    // Inclusive like every gate rule: an upper end exactly at -margin passes.
    let pass = comparison.interval.hi >= -margin;
    PairedVerdict { comparison, margin, pass }
}

/// Train cases Step 3 re-runs: failing (score < 0.5, errors included) in the latest train
/// results, still train cases of the benchmark, and not yet in the regression set. Natural
/// order.
pub(crate) fn promotion_candidates(
    train: &TrainResults,
    set: &RegressionSet,
    train_cases: &BTreeSet<String>,
) -> Vec<String> {
    let mut ids: Vec<String> = train
        .cases
        .iter()
        .filter(|(id, c)| !passes(c.reward) && train_cases.contains(*id) && !set.cases.contains(id))
        .map(|(id, _)| id.clone())
        .collect();
    sort_ids(&mut ids);
    ids
}

/// What Step 3 did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct Promotion {
    /// Joined the regression set now.
    pub promoted: Vec<String>,
    /// Passed, but need more consecutive passes: id -> passes so far.
    pub pending: BTreeMap<String, u32>,
    /// Still failing (their streak, if any, is reset).
    pub still_failing: Vec<String>,
    /// The same cases with their scores and reasons.
    pub not_passing: Vec<NotPassing>,
}

/// Applies re-run scores to the regression set: a case passing for the `needed`-th
/// consecutive gate joins it (cases stay naturally sorted); a failing re-run resets the case's
/// streak. The set only grows. `reasons` ([`case_reasons`]) explain the cases still failing.
pub(crate) fn promote(
    set: &mut RegressionSet,
    rerun: &BTreeMap<String, f64>,
    reasons: &BTreeMap<String, String>,
    candidates: &[String],
    needed: u32,
) -> Promotion {
    let mut out = Promotion::default();
    for id in candidates {
        let score = rerun.get(id).copied().unwrap_or(0.0);
        if passes(score) {
            let streak = set.promotion_streaks.get(id).copied().unwrap_or(0) + 1;
            if streak >= needed {
                set.promotion_streaks.remove(id);
                set.cases.push(id.clone());
                set.last_results.insert(id.clone(), score);
                out.promoted.push(id.clone());
            } else {
                set.promotion_streaks.insert(id.clone(), streak);
                out.pending.insert(id.clone(), streak);
            }
        } else {
            set.promotion_streaks.remove(id);
            out.still_failing.push(id.clone());
        }
    }
    sort_ids(&mut set.cases);
    sort_ids(&mut out.promoted);
    sort_ids(&mut out.still_failing);
    out.not_passing = not_passing(&out.still_failing, rerun, reasons);
    out
}

/// Formats two numbers with the fewest decimals (at least 1, trailing zeros trimmed) that keep
/// them distinct when they differ, so "0.7499 < best 0.75" never prints as "0.75 < best 0.75".
/// Rounding is monotonic, so it can merge two values but never swap their order.
pub(crate) fn fmt_pair(a: f64, b: f64) -> (String, String) {
    for digits in 2..=17 {
        let (x, y) = (fixed(a, digits), fixed(b, digits));
        if (x == y) == (a == b) {
            return (x, y);
        }
    }
    (format!("{a}"), format!("{b}"))
}

/// A number shown on its own: up to 4 decimals, trailing zeros trimmed ("0.1", "0.6667").
/// Numbers that are compared in the same line go through [`fmt_pair`] instead.
pub(crate) fn fmt_num(x: f64) -> String {
    fixed(x, 4)
}

/// Signed form for differences: "+0.25", "-0.1", "0".
pub(crate) fn signed(s: &str) -> String {
    if s.starts_with('-') || s == "0" { s.to_string() } else { format!("+{s}") }
}

fn fixed(x: f64, digits: usize) -> String {
    let s = format!("{x:.digits$}");
    let s = if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s };
    if s == "-0" { "0".into() } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::state::{ResultsRow, TrainCase};

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn cell(case: &str, outcome: Option<Outcome>, reward: f64) -> CellSummary {
        CellSummary { case_id: case.into(), outcome, reward, ..Default::default() }
    }

    #[test]
    fn a_score_of_exactly_one_half_passes() {
        // Two epochs, one passed: the mean reward is exactly 0.5, which passes (inclusive).
        let cells = [cell("a", Some(Outcome::Passed), 1.0), cell("a", Some(Outcome::Failed), 0.0)];
        let scores = case_scores(&cells, 2);
        assert_eq!(scores["a"], 0.5);
        assert!(passes(0.5));
        assert!(!passes(0.49999999999999994));
        let v = judge_regression_set(&ids(&["a"]), &scores, &BTreeMap::new(), &[], 1.0);
        assert!(v.pass && v.passed == 1);
    }

    #[test]
    fn four_of_five_meets_a_threshold_of_0_8() {
        let cases = ids(&["a", "b", "c", "d", "e"]);
        let mut scores: BTreeMap<String, f64> = cases.iter().map(|c| (c.clone(), 1.0)).collect();
        scores.insert("e".into(), 0.0);
        let v = judge_regression_set(&cases, &scores, &BTreeMap::new(), &[], 0.8);
        assert_eq!((v.passed, v.cases, v.rate), (4, 5, 0.8));
        assert!(v.pass, "4/5 = 0.8 >= 0.8 is inclusive");
        scores.insert("d".into(), 0.0);
        assert!(!judge_regression_set(&cases, &scores, &BTreeMap::new(), &[], 0.8).pass, "3/5 fails");
    }

    #[test]
    fn errored_and_missing_cases_are_failures_in_the_denominator() {
        let cells = [
            cell("a", Some(Outcome::Passed), 1.0),
            cell("b", Some(Outcome::Timeout), 1.0), // an infra outcome never counts, whatever its reward
            cell("c", None, 0.0),
        ];
        let scores = case_scores(&cells, 1);
        assert_eq!(scores["b"], 0.0);
        let reasons = case_reasons(&cells, 1);
        let v = judge_regression_set(&ids(&["a", "b", "c", "ghost"]), &scores, &reasons, &ids(&["ghost"]), 0.5);
        assert_eq!((v.passed, v.cases), (1, 4));
        assert!(!v.pass);
        assert_eq!(v.failing, ids(&["b", "c", "ghost"]));
        assert_eq!(v.scores["ghost"], 0.0);
        let listed: Vec<String> = v.not_passing.iter().map(NotPassing::describe).collect();
        assert_eq!(listed, ["b (score 0, timeout)", "c (score 0, incomplete)", "ghost (score 0, not a train case)"]);
    }

    #[test]
    fn reasons_name_each_cells_outcome_with_counts_over_epochs() {
        let cells = [
            cell("a", Some(Outcome::Failed), 0.0),
            cell("a", Some(Outcome::Passed), 1.0),
            cell("a", Some(Outcome::Timeout), 0.0),
            cell("a", Some(Outcome::Failed), 0.0),
            cell("b", Some(Outcome::HarnessError), 0.0),
            cell("p", Some(Outcome::Passed), 1.0),
        ];
        let r = case_reasons(&cells, 4);
        assert_eq!(r["a"], "failed 2, timeout 1 of 4 epochs");
        assert_eq!(r["b"], "harness error 1, no result 3 of 4 epochs");
        assert_eq!(r["p"], "no result 3 of 4 epochs", "epochs without a cell are named");
        assert!(!case_reasons(&cells[5..], 1).contains_key("p"), "a case whose cells all passed has no reason");
        assert_eq!(case_reasons(&cells[4..5], 1)["b"], "harness error");
    }

    #[test]
    fn an_empty_regression_set_passes() {
        let v = judge_regression_set(&[], &BTreeMap::new(), &BTreeMap::new(), &[], 0.8);
        assert!(v.pass);
        assert_eq!(v.cases, 0);
    }

    #[test]
    fn unmeasured_cells_are_counted_by_class_against_the_plan() {
        let mut harness = cell("h", Some(Outcome::HarnessError), 0.0);
        harness.reason = "test command: no-such-program not found".into();
        let cells = [
            cell("a", Some(Outcome::Passed), 1.0),
            cell("b", Some(Outcome::Failed), 0.0),
            cell("v", Some(Outcome::VerifierError), 0.0), // the agent can cause it: measured, counts 0
            harness,
            cell("p", Some(Outcome::ProviderError), 0.0),
            cell("t", Some(Outcome::Timeout), 1.0),
            cell("n", None, 0.0),
            cell("x", Some(Outcome::Cancelled), 0.0),
        ];
        // Ten planned: eight reported, of which two without a result, plus two never reported.
        let c = coverage(&cells, 10, true);
        assert_eq!((c.harness_error, c.provider_error, c.timeout, c.missing), (1, 1, 1, 4));
        assert_eq!((c.unmeasured(), c.planned), (7, 10));
        assert_eq!(c.fraction(), 0.7);
        assert!(c.exceeds(0.69) && !c.exceeds(0.7), "exactly max_unmeasured still gets a verdict");
        assert_eq!(c.examples.len(), UNMEASURED_EXAMPLES);
        assert_eq!(
            c.examples[0],
            UnmeasuredCell {
                case: "h".into(),
                class: Unmeasured::HarnessError,
                reason: "test command: no-such-program not found".into()
            }
        );
        // The test split: the same counts, never a case id.
        let private = coverage(&cells, 10, false);
        assert!(private.examples.is_empty());
        assert_eq!(private.unmeasured(), 7);
    }

    #[test]
    fn a_fully_measured_or_empty_step_is_never_unmeasured() {
        let cells = [cell("a", Some(Outcome::Passed), 1.0), cell("b", Some(Outcome::Failed), 0.0)];
        let c = coverage(&cells, 2, true);
        assert_eq!((c.unmeasured(), c.fraction()), (0, 0.0));
        assert!(!c.exceeds(0.0), "max_unmeasured 0 tolerates no error, and there is none");
        let nothing = coverage(&[], 0, true);
        assert!(!nothing.exceeds(0.0), "nothing planned: nothing to measure");
        // One of two cells unmeasured: 0.5 exceeds the default 0.1, not 0.5.
        let half =
            coverage(&[cell("a", Some(Outcome::Passed), 1.0), cell("b", Some(Outcome::ProviderError), 0.0)], 2, true);
        assert!(half.exceeds(0.1) && !half.exceeds(0.5));
        // No summary at all for a planned cell (a crashed worker): missing.
        assert_eq!(coverage(&cells[..1], 2, true).missing, 1);
    }

    #[test]
    fn best_is_the_maximum_row_and_ties_pass() {
        let row = |v: f64| ResultsRow {
            iteration: 0,
            val_score: v,
            commit: "c".into(),
            evals_passed: 0,
            evals_total: 0,
            timestamp: "t".into(),
            provenance: None,
        };
        let rows = [row(0.5), row(0.9), row(0.6)];
        assert_eq!(best(&rows), Some(0.9), "the maximum, not the last row");
        assert_eq!(best(&[]), None);
        assert!(benchmark_passes(0.9, Some(0.9)), "a tie passes");
        assert!(!benchmark_passes(0.8999999999999999, Some(0.9)));
        assert!(benchmark_passes(0.0, None), "no best yet: fresh start passes");
        // Errors count 0 over every planned cell.
        assert_eq!(val_score(&[1.0, 1.0, 0.0], 4), 0.5);
    }

    #[test]
    fn printed_comparisons_agree_with_the_real_ones() {
        assert_eq!(fmt_pair(0.75, 0.75), ("0.75".into(), "0.75".into()));
        assert_eq!(fmt_pair(0.7499, 0.75), ("0.7499".into(), "0.75".into()));
        assert_eq!(fmt_pair(0.8, 0.8), ("0.8".into(), "0.8".into()));
        let (a, b) = fmt_pair(0.8999999999999999, 0.9);
        assert_ne!(a, b, "{a} vs {b}");
        assert_eq!(b, "0.9");
        let (a, b) = fmt_pair(2.0 / 3.0, 0.6667);
        assert_ne!(a, b);
        assert_eq!(fmt_pair(1.0, 0.0), ("1".into(), "0".into()));
        assert_eq!(fmt_pair(-0.0, 0.0), ("0".into(), "0".into()));
        assert_eq!(signed("0.25"), "+0.25");
        assert_eq!(signed("-0.1"), "-0.1");
    }

    #[test]
    fn promotion_takes_failing_train_cases_in_natural_order() {
        let case = |r: f64| TrainCase {
            outcome: if r >= 0.5 { "passed".into() } else { "failed".into() },
            reward: r,
            run_id: "r".into(),
            commit: None,
            agent_spec: "s".into(),
            profile: "p".into(),
            profile_digest: None,
            recorded_at: "t".into(),
        };
        let mut train =
            TrainResults { schema_version: 1, benchmark: "b".into(), updated_at: "t".into(), cases: BTreeMap::new() };
        for (id, r) in [("c-10", 0.0), ("c-2", 0.0), ("c-1", 1.0), ("c-3", 0.0), ("gone", 0.0), ("in-set", 0.0)] {
            train.cases.insert(id.into(), case(r));
        }
        let mut set = RegressionSet::new(0.8);
        set.cases = ids(&["in-set"]);
        let train_cases: BTreeSet<String> =
            ["c-1", "c-2", "c-3", "c-10", "in-set"].iter().map(|s| s.to_string()).collect();
        let cands = promotion_candidates(&train, &set, &train_cases);
        assert_eq!(cands, ids(&["c-2", "c-3", "c-10"]));

        let rerun: BTreeMap<String, f64> =
            [("c-2", 1.0), ("c-3", 0.0), ("c-10", 1.0)].iter().map(|(k, v)| (k.to_string(), *v)).collect();
        let reasons: BTreeMap<String, String> = [("c-3".to_string(), "failed".to_string())].into();
        let p = promote(&mut set, &rerun, &reasons, &cands, 1);
        assert_eq!(p.promoted, ids(&["c-2", "c-10"]));
        assert_eq!(p.still_failing, ids(&["c-3"]));
        assert_eq!(p.not_passing[0].describe(), "c-3 (score 0, failed)");
        assert_eq!(set.cases, ids(&["c-2", "c-10", "in-set"]));

        let nothing = promote(&mut set, &BTreeMap::new(), &BTreeMap::new(), &[], 1);
        assert_eq!(nothing, Promotion::default());
    }

    #[test]
    fn promotion_can_require_consecutive_passes() {
        let mut set = RegressionSet::new(0.8);
        let c = ids(&["x", "y"]);
        let pass_both: BTreeMap<String, f64> = [("x".to_string(), 1.0), ("y".to_string(), 1.0)].into();
        let p = promote(&mut set, &pass_both, &BTreeMap::new(), &c, 2);
        assert!(p.promoted.is_empty());
        assert_eq!(p.pending, [("x".to_string(), 1), ("y".to_string(), 1)].into());
        // y fails once: its streak starts over.
        let only_x: BTreeMap<String, f64> = [("x".to_string(), 1.0), ("y".to_string(), 0.0)].into();
        let p = promote(&mut set, &only_x, &BTreeMap::new(), &c, 2);
        assert_eq!(p.promoted, ids(&["x"]));
        assert!(!set.promotion_streaks.contains_key("y"));
        assert_eq!(set.cases, ids(&["x"]));
    }

    /// Per-case cell rewards for the paired rule: `n` cases named c-0.., case i gets `f(i)`.
    fn arm(n: usize, f: impl Fn(usize) -> Vec<f64>) -> BTreeMap<String, Vec<f64>> {
        (0..n).map(|i| (format!("c-{i}"), f(i))).collect()
    }

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("c-{i}")).collect()
    }

    #[test]
    fn identical_arms_pass_even_without_noise() {
        // A deterministic profile: both arms score the same on every case. The interval is
        // never of zero width (all ties: +- what 8 or 40 tied cases could hide), but it
        // straddles 0, so nothing shows the candidate worse.
        for n in [8, 40] {
            let same = arm(n, |i| vec![if i % 3 == 0 { 0.0 } else { 1.0 }; 4]);
            let v = judge_paired(&names(n), &same, &same, 0.0);
            let c = &v.comparison;
            assert!(v.pass, "{v:?}");
            assert_eq!((c.cases, c.ties, c.mean_diff, c.p_value), (n, n, 0.0, 1.0));
            assert!(c.interval.lo < 0.0 && c.interval.hi > 0.0, "{c:?}");
        }
        // Identical in distribution but with different luck: some cases better, some worse.
        let head = arm(8, |i| vec![1.0, 0.0, 1.0, f64::from(i as u8 % 2)]);
        let cand = arm(8, |i| vec![1.0, 0.0, 1.0, f64::from((i as u8 + 1) % 2)]);
        let v = judge_paired(&names(8), &cand, &head, 0.0);
        assert!(v.pass && v.comparison.wins == 4 && v.comparison.losses == 4, "{v:?}");
    }

    #[test]
    fn a_clearly_worse_candidate_fails() {
        // HEAD solves 12 cases every time, the candidate none: 12 losses, exact sign test
        // p = 2 / 4096.
        let head = arm(12, |_| vec![1.0; 4]);
        let cand = arm(12, |_| vec![0.0; 4]);
        let v = judge_paired(&names(12), &cand, &head, 0.0);
        let c = &v.comparison;
        assert!(!v.pass, "{v:?}");
        assert_eq!((c.method, c.losses, c.mean_diff), (stats::Method::ExactSign, 12, -1.0));
        assert!(c.interval.hi < 0.0 && (c.p_value - 2.0 / 4096.0).abs() < 1e-15, "{c:?}");
        assert_eq!(c.verdict, stats::Verdict::BBetter, "at margin 0 the gate fails exactly on \"HEAD better\"");
        // Six clean losses out of eight cases are already enough (p = 2/64 = 0.031).
        let head = arm(8, |_| vec![1.0; 2]);
        let cand = arm(8, |i| vec![if i < 6 { 0.0 } else { 1.0 }; 2]);
        assert!(!judge_paired(&names(8), &cand, &head, 0.0).pass);
    }

    #[test]
    fn the_margin_is_honoured() {
        // 40 cases: half lose 0.5, half tie. Mean -0.25, paired clustered SE 0.04, upper end
        // of the 95% interval about -0.17.
        let head = arm(40, |_| vec![1.0, 1.0]);
        let cand = arm(40, |i| if i % 2 == 0 { vec![1.0, 0.0] } else { vec![1.0, 1.0] });
        let v = judge_paired(&names(40), &cand, &head, 0.0);
        let hi = v.comparison.interval.hi;
        assert_eq!(v.comparison.method, stats::Method::PairedClusteredSe);
        assert!((-0.18..-0.16).contains(&hi), "{v:?}");
        assert!(!v.pass);
        assert!(!judge_paired(&names(40), &cand, &head, 0.1).pass, "worse by more than 0.1, shown");
        assert!(judge_paired(&names(40), &cand, &head, 0.2).pass, "a loss of up to 0.2 is tolerated");
        assert!(judge_paired(&names(40), &cand, &head, -hi).pass, "inclusive: upper end exactly at -margin");
        assert!(!judge_paired(&names(40), &cand, &head, -hi - 1e-9).pass);
        // A negative margin asks for an improvement: identical deterministic arms fail once the
        // data rule out an improvement of that size (40 ties: the interval ends at +0.088).
        let same = arm(40, |_| vec![1.0, 1.0]);
        assert!(judge_paired(&names(40), &same, &same, -0.05).pass, "+0.05 is still possible");
        assert!(!judge_paired(&names(40), &same, &same, -0.1).pass, "+0.1 is ruled out");
    }

    #[test]
    fn few_cases_cannot_reject() {
        // Five clean losses: p = 2/32 = 0.0625, not shown at 5%. The gate passes, and the
        // output says how little the comparison could show.
        let head = arm(5, |_| vec![1.0; 4]);
        let cand = arm(5, |_| vec![0.0; 4]);
        let v = judge_paired(&names(5), &cand, &head, 0.0);
        assert!(v.pass && v.comparison.losses == 5 && v.comparison.p_value == 0.0625, "{v:?}");
        assert!(v.comparison.interval.hi > 0.0);
        let one = judge_paired(&names(1), &arm(1, |_| vec![0.0; 4]), &arm(1, |_| vec![1.0; 4]), 0.0);
        assert!(one.pass && one.comparison.p_value == 1.0, "one case decides nothing: {one:?}");
        assert!(judge_paired(&[], &BTreeMap::new(), &BTreeMap::new(), 0.0).pass, "nothing measured");
    }

    #[test]
    fn infrastructure_errors_are_missing_data_in_the_comparison() {
        // Case a: the candidate's second epoch hit a provider error; b: HEAD has no verdict at
        // all (left out); c: a case outside the plan (ignored).
        let cells = |rows: &[(&str, Option<Outcome>, f64)]| -> Vec<CellSummary> {
            rows.iter().map(|(c, o, r)| cell(c, *o, *r)).collect()
        };
        let cand = cells(&[
            ("a", Some(Outcome::Passed), 1.0),
            ("a", Some(Outcome::ProviderError), 0.0),
            ("b", Some(Outcome::Failed), 0.0),
            ("b", Some(Outcome::Failed), 0.0),
            ("c", Some(Outcome::Failed), 0.0),
        ]);
        let head = cells(&[
            ("a", Some(Outcome::Passed), 1.0),
            ("a", Some(Outcome::Passed), 1.0),
            ("b", Some(Outcome::Timeout), 1.0),
            ("b", None, 0.0),
            ("c", Some(Outcome::Passed), 1.0),
        ]);
        let (cand, head) = (measured_rewards(&cand), measured_rewards(&head));
        assert_eq!(cand["a"], vec![1.0], "the errored cell is left out, not a 0");
        assert!(!head.contains_key("b"));
        let v = judge_paired(&ids(&["a", "b"]), &cand, &head, 0.0);
        assert_eq!((v.comparison.cases, v.comparison.ties, v.comparison.mean_diff), (1, 1, 0.0));
        // val_score keeps counting errors 0 over every planned cell.
        assert_eq!(val_score(&[1.0, 0.0, 0.0, 0.0], 4), 0.25);
    }
}
