//! What `hcbench ablate --context` reports beside the pass rate: per group (`profile/ablation`)
//! and per group x category, how the agent behaved and what the context pipeline did, and for
//! each ablation its paired difference against `full` in words.
//!
//! The same rules as the rest of [`crate::aggregate`]: plain functions over summaries, no new
//! statistics (the pass-rate interval is [`super::group_stats`]'s, the effect of an ablation is
//! the [`Comparison`] `compare_with_first` made), and every mean says what it is over. Counts
//! are totals over the group's cells (`cells` says how many); a mean carries its denominator,
//! because "0.4 repeated reads" means nothing without "per cell, over 40 cells".

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::{Comparison, GroupStats, group_stats};
use crate::replay::CellSummary;
use crate::stats::{self, Interval, Verdict};

/// The stop reason of an agent that called `finish`.
const FINISHED: &str = "finished";
/// The stop reason of an agent that spent its step budget.
const STEP_BUDGET_EXHAUSTED: &str = "step_budget_exhausted";

/// `count` of `of` cells, and the share.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Share {
    pub count: usize,
    pub of: usize,
    pub rate: f64,
}

impl Share {
    fn of(count: usize, of: usize) -> Share {
        Share { count, of, rate: if of == 0 { 0.0 } else { count as f64 / of as f64 } }
    }
}

/// A mean and how many things it is over (cells, unless the field says otherwise); None when
/// there was nothing to average.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Mean {
    pub mean: Option<f64>,
    pub over: usize,
}

impl Mean {
    fn of(total: f64, over: usize) -> Mean {
        Mean { mean: (over > 0).then(|| total / over as f64), over }
    }
}

/// Context tokens per turn, pooled over the group's turns: total estimated tokens / turns.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TokensPerTurn {
    pub mean: Option<f64>,
    /// Turns whose context was packed.
    pub turns: u64,
    /// Cells with at least one packed turn.
    pub cells: usize,
}

/// The step of the first read of the case's target file, over cells whose case declares one.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TargetRead {
    /// Cells whose case declares a target file.
    pub declared: usize,
    /// Mean step over the cells that read it (`mean.over` of them).
    pub step: Mean,
    /// Cells whose case declares a target the agent never read.
    pub never_read: usize,
}

/// Behaviour and context counters of one group, or one group within one category.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextStats {
    /// `profile/ablation`.
    pub group: String,
    /// None for the whole group; the category otherwise.
    pub category: Option<String>,
    pub cells: usize,
    pub cases: usize,
    /// passed / cells, and its interval: the same numbers as the summary's.
    pub pass_rate: f64,
    pub pass_rate_ci: Interval,
    /// Cells whose agent called `finish` (stop reason `finished`).
    pub agent_success: Share,
    /// Cells whose tests passed.
    pub test_success: Share,
    /// Cells whose verifier passed.
    pub verifier_success: Share,
    /// Cells whose agent spent its step budget (stop reason `step_budget_exhausted`).
    pub step_budget_exhausted: Share,
    /// Tool calls per cell.
    pub tool_calls: Mean,
    /// Totals over the cells.
    pub repeated_reads: u64,
    pub invalid_actions: u64,
    pub policy_denials: u64,
    pub tool_failures: u64,
    pub context_tokens_per_turn: TokensPerTurn,
    pub budget_reductions: u64,
    pub dropped_blocks: u64,
    pub repo_map_injections: u64,
    pub repo_map_tool_uses: u64,
    /// Cells that saw a repo map at least once (injected or by the tool).
    pub repo_map_cells: usize,
    pub first_target_read: TargetRead,
    pub memory_updates: u64,
    pub compactions: u64,
    pub policy_retries: u64,
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    /// Cells that did not pass, by outcome class (`failed`, `timeout`, ..., `incomplete`).
    pub failures: BTreeMap<String, usize>,
    /// Cells that did not pass, by the reason the loop stopped (`not_run` when it never ran).
    pub failure_stop_reasons: BTreeMap<String, usize>,
}

/// The counters of `cells`, one group (and category).
pub fn context_stats(group: &str, category: Option<&str>, cells: &[&CellSummary]) -> ContextStats {
    let n = cells.len();
    let base: GroupStats = group_stats(group, category, None, cells);
    let count = |f: fn(&CellSummary) -> bool| cells.iter().filter(|c| f(c)).count();
    let sum = |f: fn(&CellSummary) -> u64| cells.iter().map(|c| f(c)).sum::<u64>();
    let turns = sum(|c| c.context_turns as u64);
    let read_steps: Vec<u32> = cells.iter().filter_map(|c| c.first_target_read_step).collect();
    let declared = count(|c| c.target_declared);
    let mut failures = BTreeMap::new();
    let mut failure_stop_reasons = BTreeMap::new();
    for c in cells.iter().filter(|c| c.outcome_label() != "passed") {
        *failures.entry(c.outcome_label().to_string()).or_default() += 1;
        let stop = if c.stop_reason.is_empty() { "none" } else { c.stop_reason.as_str() };
        *failure_stop_reasons.entry(stop.to_string()).or_default() += 1;
    }
    ContextStats {
        group: group.to_string(),
        category: category.map(str::to_string),
        cells: n,
        cases: base.cases,
        pass_rate: base.pass_rate,
        pass_rate_ci: base.pass_rate_ci,
        agent_success: Share::of(count(|c| c.stop_reason == FINISHED), n),
        test_success: Share::of(count(|c| c.tests_passed == Some(true)), n),
        verifier_success: Share::of(count(|c| c.verifier_passed == Some(true)), n),
        step_budget_exhausted: Share::of(count(|c| c.stop_reason == STEP_BUDGET_EXHAUSTED), n),
        tool_calls: Mean::of(sum(|c| c.tool_calls as u64) as f64, n),
        repeated_reads: sum(|c| c.repeated_reads as u64),
        invalid_actions: sum(|c| c.invalid_actions as u64),
        policy_denials: sum(|c| c.policy_denials as u64),
        tool_failures: sum(|c| c.tool_failures as u64),
        context_tokens_per_turn: TokensPerTurn {
            mean: (turns > 0).then(|| sum(|c| c.context_tokens) as f64 / turns as f64),
            turns,
            cells: count(|c| c.context_turns > 0),
        },
        budget_reductions: sum(|c| c.budget_reductions as u64),
        dropped_blocks: sum(|c| c.dropped_blocks as u64),
        repo_map_injections: sum(|c| c.repo_map_injections as u64),
        repo_map_tool_uses: sum(|c| c.repo_map_tool_uses as u64),
        repo_map_cells: count(|c| c.repo_map_injections + c.repo_map_tool_uses > 0),
        first_target_read: TargetRead {
            declared,
            step: Mean::of(read_steps.iter().map(|s| *s as f64).sum(), read_steps.len()),
            never_read: count(|c| c.target_declared && c.first_target_read_step.is_none()),
        },
        memory_updates: sum(|c| c.memory_updates as u64),
        compactions: sum(|c| c.compactions as u64),
        policy_retries: sum(|c| c.policy_retries as u64),
        input_tokens: sum(|c| c.input_tokens),
        cached_input_tokens: sum(|c| c.cached_input_tokens),
        failures,
        failure_stop_reasons,
    }
}

/// Per-group counters, in the given group order.
pub fn by_group(groups: &[String], cells: &[CellSummary]) -> Vec<ContextStats> {
    groups
        .iter()
        .map(|g| {
            let of_group: Vec<&CellSummary> = cells.iter().filter(|c| c.group() == g.as_str()).collect();
            context_stats(g, None, &of_group)
        })
        .collect()
}

/// Per group x category counters, group-major, categories sorted, empty pairs left out.
pub fn by_category(groups: &[String], cells: &[CellSummary]) -> Vec<ContextStats> {
    let categories: BTreeSet<&str> = cells.iter().map(|c| c.category.as_str()).collect();
    let mut out = Vec::new();
    for g in groups {
        let of_group: Vec<&CellSummary> = cells.iter().filter(|c| c.group() == g.as_str()).collect();
        for cat in &categories {
            let of_pair: Vec<&CellSummary> = of_group.iter().copied().filter(|c| c.category == *cat).collect();
            if !of_pair.is_empty() {
                out.push(context_stats(g, Some(cat), &of_pair));
            }
        }
    }
    out
}

/// The sections only an ablate run's report has.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AblationReport {
    /// One row per group (`profile/ablation`), in the run's order (`full` first).
    pub context: Vec<ContextStats>,
    /// One row per group x category.
    pub context_by_category: Vec<ContextStats>,
    /// Each ablation against `full`.
    pub effects: Vec<AblationEffect>,
}

impl AblationReport {
    /// `comparisons` are the report's (`compare_with_first` over the same groups).
    pub fn build(groups: &[String], cells: &[CellSummary], comparisons: &[Comparison], epochs: usize) -> Self {
        AblationReport {
            context: by_group(groups, cells),
            context_by_category: by_category(groups, cells),
            effects: effects(comparisons, epochs),
        }
    }
}

/// What an ablation's paired difference against `full` lets one say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectVerdict {
    /// The ablation passed fewer cases than `full`, beyond noise.
    Worse,
    /// The ablation passed more cases than `full`, beyond noise.
    Better,
    /// The interval contains 0 (or the test did not call a difference).
    WithinNoise,
    /// So few shared cases that no difference could reach significance.
    TooFewToTell,
    /// No case was measured by both.
    NoSharedCases,
}

/// One ablation against `full`: the comparison's numbers and a verdict in words.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AblationEffect {
    /// The reference group (`profile/full`).
    pub reference: String,
    /// The ablation's group (`profile/no_memory`).
    pub group: String,
    pub cases: usize,
    pub epochs: usize,
    /// Mean over shared cases of (ablation's share of passed epochs - full's): negative when
    /// turning the switch off costs passes.
    pub diff: f64,
    /// 95% interval of `diff` with the comparison's method.
    pub ci: Interval,
    /// The comparison's p-value after Holm's correction over the ablations.
    pub p_adjusted: f64,
    pub verdict: EffectVerdict,
    pub verdict_text: String,
}

/// Each ablation's effect, from the comparisons of `full` (`a`) with each ablation (`b`): the
/// difference is turned around to read "ablation minus full". `within noise` whenever the
/// interval contains 0 or the paired test did not call a difference, and `too few to tell`
/// when the shared cases could not have shown any difference at all (the comparison has no
/// minimum detectable effect), so a clean sweep on five cases is never read as an effect.
pub fn effects(comparisons: &[Comparison], epochs: usize) -> Vec<AblationEffect> {
    comparisons
        .iter()
        .map(|c| {
            // `0.0 - x`, not `-x`: a tie reads +0.0, never -0.0.
            let diff = 0.0 - c.mean_diff;
            let ci = Interval { lo: 0.0 - c.ci.hi, hi: 0.0 - c.ci.lo, method: c.ci.method };
            let verdict = if c.cases == 0 {
                EffectVerdict::NoSharedCases
            } else if c.mde.is_none() {
                EffectVerdict::TooFewToTell
            } else if c.verdict == Verdict::WithinNoise || ci.contains(0.0) {
                EffectVerdict::WithinNoise
            } else if diff < 0.0 {
                EffectVerdict::Worse
            } else {
                EffectVerdict::Better
            };
            let points = format!("{:+.1} points", diff * 100.0);
            let p = super::p_is(c.p_adjusted);
            let verdict_text = match verdict {
                EffectVerdict::NoSharedCases => "no shared measured cases".to_string(),
                EffectVerdict::TooFewToTell => format!(
                    "within noise: {} case(s) x {epochs} epoch(s) are too few to tell (at least {} cases needed)",
                    c.cases,
                    stats::min_cases(super::ALPHA)
                ),
                EffectVerdict::WithinNoise => format!("within noise ({points}, {p}; the interval contains 0)"),
                EffectVerdict::Worse => format!("worse than {} ({points}, {p})", c.a),
                EffectVerdict::Better => format!("better than {} ({points}, {p})", c.a),
            };
            AblationEffect {
                reference: c.a.clone(),
                group: c.b.clone(),
                cases: c.cases,
                epochs,
                diff,
                ci,
                p_adjusted: c.p_adjusted,
                verdict,
                verdict_text,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::compare_with_first;
    use crate::trace::event::Outcome;

    fn cell(case: &str, ablation: &str, category: &str, passed: bool) -> CellSummary {
        CellSummary {
            case_id: case.into(),
            profile: "p".into(),
            ablation: ablation.into(),
            category: category.into(),
            outcome: Some(if passed { Outcome::Passed } else { Outcome::Failed }),
            stop_reason: FINISHED.into(),
            tests_passed: Some(passed),
            verifier_passed: Some(passed),
            ..Default::default()
        }
    }

    fn groups() -> Vec<String> {
        vec!["p/full".into(), "p/no_repomap".into()]
    }

    #[test]
    fn counters_are_totals_and_means_say_what_they_are_over() {
        let mut a = cell("c1", "full", "context", true);
        a.tool_calls = 6;
        a.repeated_reads = 1;
        a.context_turns = 3;
        a.context_tokens = 300;
        a.budget_reductions = 2;
        a.dropped_blocks = 4;
        a.repo_map_injections = 3;
        a.target_declared = true;
        a.first_target_read_step = Some(2);
        a.memory_updates = 5;
        a.input_tokens = 1000;
        a.cached_input_tokens = 800;
        let mut b = cell("c2", "full", "bugfix", false);
        b.tool_calls = 3;
        b.context_turns = 1;
        b.context_tokens = 500;
        b.repo_map_tool_uses = 1;
        b.policy_retries = 2;
        b.compactions = 1;
        b.stop_reason = STEP_BUDGET_EXHAUSTED.into();
        let mut c = cell("c3", "full", "context", false);
        c.target_declared = true;
        c.outcome = Some(Outcome::Timeout);
        c.stop_reason = FINISHED.into();
        c.tests_passed = None;
        let cells = vec![a, b, c];
        let s = &by_group(&groups(), &cells)[0];
        assert_eq!((s.group.as_str(), s.cells, s.cases), ("p/full", 3, 3));
        assert_eq!(s.agent_success, Share { count: 2, of: 3, rate: 2.0 / 3.0 });
        assert_eq!((s.test_success.count, s.verifier_success.count, s.step_budget_exhausted.count), (1, 1, 1));
        assert_eq!(s.tool_calls, Mean { mean: Some(3.0), over: 3 });
        // 800 tokens over 4 turns, in the 2 cells that packed any.
        assert_eq!(s.context_tokens_per_turn, TokensPerTurn { mean: Some(200.0), turns: 4, cells: 2 });
        assert_eq!((s.budget_reductions, s.dropped_blocks), (2, 4));
        assert_eq!((s.repo_map_injections, s.repo_map_tool_uses, s.repo_map_cells), (3, 1, 2));
        // Two cells declare a target: one read it at step 2, one never did; c2 declares none.
        assert_eq!(
            s.first_target_read,
            TargetRead { declared: 2, step: Mean { mean: Some(2.0), over: 1 }, never_read: 1 }
        );
        assert_eq!((s.memory_updates, s.compactions, s.policy_retries), (5, 1, 2));
        assert_eq!((s.input_tokens, s.cached_input_tokens), (1000, 800));
        assert_eq!(s.failures, [("failed".to_string(), 1), ("timeout".to_string(), 1)].into());
        let stops: BTreeMap<String, usize> = [(FINISHED.to_string(), 1), (STEP_BUDGET_EXHAUSTED.to_string(), 1)].into();
        assert_eq!(s.failure_stop_reasons, stops);
        assert_eq!(s.pass_rate_ci, stats::wilson(1, 3, super::super::CONFIDENCE), "the summary's interval");

        // An empty group: nothing to average, and it says so.
        let empty = &by_group(&groups(), &cells)[1];
        assert_eq!((empty.cells, empty.tool_calls.mean, empty.context_tokens_per_turn.mean), (0, None, None));

        // Per category: group-major, categories sorted.
        let cats = by_category(&groups(), &cells);
        let keys: Vec<(&str, Option<&str>, usize)> =
            cats.iter().map(|s| (s.group.as_str(), s.category.as_deref(), s.cells)).collect();
        assert_eq!(keys, [("p/full", Some("bugfix"), 1), ("p/full", Some("context"), 2)]);
        assert_eq!(cats[1].first_target_read.declared, 2);
    }

    /// `n` cases, `full` passing all, the ablation passing those where `pass(i)`.
    fn run(n: usize, epochs: usize, pass: impl Fn(usize) -> bool) -> Vec<AblationEffect> {
        let mut cells = Vec::new();
        for i in 0..n {
            for _ in 0..epochs {
                cells.push(cell(&format!("c{i}"), "full", "bugfix", true));
                cells.push(cell(&format!("c{i}"), "no_repomap", "bugfix", pass(i)));
            }
        }
        effects(&compare_with_first(&groups(), &cells, epochs), epochs)
    }

    #[test]
    fn the_verdict_says_within_noise_when_the_cases_are_too_few_or_the_interval_holds_zero() {
        // Five clean losses: no test on five cases can call it.
        let e = &run(5, 1, |_| false)[0];
        assert_eq!((e.reference.as_str(), e.group.as_str()), ("p/full", "p/no_repomap"));
        assert_eq!((e.verdict, e.diff), (EffectVerdict::TooFewToTell, -1.0));
        assert_eq!(
            e.verdict_text,
            "within noise: 5 case(s) x 1 epoch(s) are too few to tell (at least 6 cases needed)"
        );
        // Eight cases, one loss: the interval contains 0.
        let e = &run(8, 1, |i| i != 0)[0];
        assert_eq!(e.verdict, EffectVerdict::WithinNoise);
        assert!(e.ci.contains(0.0) && e.diff < 0.0, "{e:?}");
        assert!(e.verdict_text.starts_with("within noise (-12.5 points, p = 1"), "{}", e.verdict_text);
        // Ten clean losses: the ablation is worse, and the difference reads ablation - full.
        let e = &run(10, 2, |_| false)[0];
        assert_eq!(e.verdict, EffectVerdict::Worse);
        assert!(e.ci.hi < 0.0, "{e:?}");
        assert_eq!(e.verdict_text, "worse than p/full (-100.0 points, p = 0.002)");
        // Nothing measured by both.
        let e = &effects(&compare_with_first(&groups(), &[cell("c0", "full", "x", true)], 1), 1)[0];
        assert_eq!((e.verdict, e.verdict_text.as_str()), (EffectVerdict::NoSharedCases, "no shared measured cases"));
    }
}
