//! The gate's arithmetic: plain functions over numbers, so every rule is a unit test.
//!
//! The rules, all inclusive: a case passes when its score (mean reward over epochs, an errored
//! or missing cell counting 0) is >= 0.5; Step 1 passes when passed / size of the regression
//! set >= threshold (the denominator is the whole set, so a case that errored, produced no
//! verdict or no longer exists is a failure, never dropped); Step 2 passes when there is no best yet or val_score >=
//! best (the maximum of results.tsv, baseline included); paired Step 2 passes when the lower
//! bound of the bootstrap interval of (candidate - HEAD) is >= -margin. Numbers shown to people
//! go through [`fmt_pair`], which prints just enough digits for the printed comparison to agree
//! with the real one.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::state::{RegressionSet, ResultsRow, TrainResults, sort_ids};
use crate::aggregate::{BOOTSTRAP_SAMPLES, bootstrap_ci};
use crate::replay::CellSummary;

/// A case passes at this score or above.
pub(crate) const PASS_SCORE: f64 = 0.5;

/// Seed of the paired bootstrap: the same runs always give the same decision.
const PAIRED_SEED: u64 = 0x6761_7465_7061_6972;

/// The reward a cell contributes: its reward when it produced a verdict, else 0.
pub(crate) fn cell_reward(s: &CellSummary) -> f64 {
    if s.outcome.is_some_and(|o| o.is_verdict()) { s.reward } else { 0.0 }
}

/// Score of each planned case: the sum of its cells' rewards over `epochs` (a cell that never
/// reported counts 0). Cases without any cell are absent; callers treat absence as failure.
pub(crate) fn case_scores<'a>(cells: impl IntoIterator<Item = &'a CellSummary>, epochs: u32) -> BTreeMap<String, f64> {
    let mut sums: BTreeMap<String, f64> = BTreeMap::new();
    for c in cells {
        *sums.entry(c.case_id.clone()).or_default() += cell_reward(c);
    }
    sums.into_iter().map(|(k, v)| (k, v / epochs.max(1) as f64)).collect()
}

pub(crate) fn passes(score: f64) -> bool {
    score >= PASS_SCORE
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
}

/// Judges the regression set: every case counts in the denominator; a case without a score
/// failed.
pub(crate) fn judge_regression_set(
    cases: &[String],
    scores: &BTreeMap<String, f64>,
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
    }
}

/// Mean reward over every planned cell; a cell that errored or never reported counts 0.
pub(crate) fn val_score(rewards: &[f64], planned: usize) -> f64 {
    if planned == 0 { 0.0 } else { rewards.iter().sum::<f64>() / planned as f64 }
}

/// The best recorded score: the maximum `val_score` of all rows (the baseline row included).
pub(crate) fn best(rows: &[ResultsRow]) -> Option<f64> {
    rows.iter().map(|r| r.val_score).max_by(|a, b| a.total_cmp(b))
}

/// Step 2 (simple): pass with no best yet, or when val_score >= best.
pub(crate) fn benchmark_passes(val: f64, best: Option<f64>) -> bool {
    best.is_none_or(|b| val >= b)
}

/// Paired Step 2's verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct PairedVerdict {
    pub cases: usize,
    pub mean_diff: f64,
    /// 95% bootstrap interval of the mean per-case difference (candidate - HEAD).
    pub ci: (f64, f64),
    pub margin: f64,
    pub pass: bool,
}

/// Paired decision over per-case scores of the two arms (each case present in `cases`; a case
/// missing from an arm scores 0 there).
pub(crate) fn judge_paired(
    cases: &[String],
    candidate: &BTreeMap<String, f64>,
    head: &BTreeMap<String, f64>,
    margin: f64,
) -> PairedVerdict {
    let diffs: Vec<f64> =
        cases.iter().map(|c| candidate.get(c).copied().unwrap_or(0.0) - head.get(c).copied().unwrap_or(0.0)).collect();
    let mean_diff = if diffs.is_empty() { 0.0 } else { diffs.iter().sum::<f64>() / diffs.len() as f64 };
    let ci = bootstrap_ci(&diffs, BOOTSTRAP_SAMPLES, PAIRED_SEED);
    PairedVerdict { cases: diffs.len(), mean_diff, ci, margin, pass: ci.0 >= -margin }
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
}

/// Applies re-run scores to the regression set: a case passing for the `needed`-th
/// consecutive gate joins it (cases stay naturally sorted); a failing re-run resets the case's
/// streak. The set only grows.
pub(crate) fn promote(
    set: &mut RegressionSet,
    rerun: &BTreeMap<String, f64>,
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
    use crate::gate::state::TrainCase;
    use crate::trace::event::Outcome;

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
        let v = judge_regression_set(&ids(&["a"]), &scores, &[], 1.0);
        assert!(v.pass && v.passed == 1);
    }

    #[test]
    fn four_of_five_meets_a_threshold_of_0_8() {
        let cases = ids(&["a", "b", "c", "d", "e"]);
        let mut scores: BTreeMap<String, f64> = cases.iter().map(|c| (c.clone(), 1.0)).collect();
        scores.insert("e".into(), 0.0);
        let v = judge_regression_set(&cases, &scores, &[], 0.8);
        assert_eq!((v.passed, v.cases, v.rate), (4, 5, 0.8));
        assert!(v.pass, "4/5 = 0.8 >= 0.8 is inclusive");
        scores.insert("d".into(), 0.0);
        assert!(!judge_regression_set(&cases, &scores, &[], 0.8).pass, "3/5 fails");
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
        let v = judge_regression_set(&ids(&["a", "b", "c", "ghost"]), &scores, &ids(&["ghost"]), 0.5);
        assert_eq!((v.passed, v.cases), (1, 4));
        assert!(!v.pass);
        assert_eq!(v.failing, ids(&["b", "c", "ghost"]));
        assert_eq!(v.scores["ghost"], 0.0);
    }

    #[test]
    fn an_empty_regression_set_passes() {
        let v = judge_regression_set(&[], &BTreeMap::new(), &[], 0.8);
        assert!(v.pass);
        assert_eq!(v.cases, 0);
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
        let p = promote(&mut set, &rerun, &cands, 1);
        assert_eq!(p.promoted, ids(&["c-2", "c-10"]));
        assert_eq!(p.still_failing, ids(&["c-3"]));
        assert_eq!(set.cases, ids(&["c-2", "c-10", "in-set"]));

        let nothing = promote(&mut set, &BTreeMap::new(), &[], 1);
        assert_eq!(nothing, Promotion::default());
    }

    #[test]
    fn promotion_can_require_consecutive_passes() {
        let mut set = RegressionSet::new(0.8);
        let c = ids(&["x", "y"]);
        let pass_both: BTreeMap<String, f64> = [("x".to_string(), 1.0), ("y".to_string(), 1.0)].into();
        let p = promote(&mut set, &pass_both, &c, 2);
        assert!(p.promoted.is_empty());
        assert_eq!(p.pending, [("x".to_string(), 1), ("y".to_string(), 1)].into());
        // y fails once: its streak starts over.
        let only_x: BTreeMap<String, f64> = [("x".to_string(), 1.0), ("y".to_string(), 0.0)].into();
        let p = promote(&mut set, &only_x, &c, 2);
        assert_eq!(p.promoted, ids(&["x"]));
        assert!(!set.promotion_streaks.contains_key("y"));
        assert_eq!(set.cases, ids(&["x"]));
    }

    #[test]
    fn paired_decision_uses_the_lower_bound() {
        let cases = ids(&["a", "b", "c", "d", "e", "f"]);
        let head: BTreeMap<String, f64> = cases.iter().map(|c| (c.clone(), 0.25)).collect();
        let better: BTreeMap<String, f64> = cases.iter().map(|c| (c.clone(), 0.75)).collect();
        let v = judge_paired(&cases, &better, &head, 0.0);
        assert!(v.pass && v.ci.0 > 0.0 && v.mean_diff == 0.5);
        // Same scores: a zero interval passes with margin 0 (a tie) ...
        let v = judge_paired(&cases, &head, &head, 0.0);
        assert_eq!((v.ci, v.pass), ((0.0, 0.0), true));
        // ... and fails when the margin demands an improvement.
        assert!(!judge_paired(&cases, &head, &head, -0.05).pass);
        // Noise in both directions: the lower bound is below zero.
        let mixed: BTreeMap<String, f64> =
            cases.iter().enumerate().map(|(i, c)| (c.clone(), if i % 2 == 0 { 0.75 } else { 0.0 })).collect();
        let v = judge_paired(&cases, &mixed, &head, 0.0);
        assert!(!v.pass && v.ci.0 < 0.0 && v.ci.1 > 0.0, "{v:?}");
        assert!(judge_paired(&cases, &mixed, &head, 1.0).pass, "a wide margin tolerates it");
    }
}
