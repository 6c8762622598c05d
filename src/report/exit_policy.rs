//! The exit policy of `run`, `matrix` and `report`: which exit code a run's report earns, and
//! why, in one function ([`judge`]) over the report model's cells.
//!
//! A CI job branches on the exit code, so the code must not say "fine" when the run measured
//! nothing. The checks, in precedence order (the first that fails decides the code; every
//! failing check is still listed as a [`Finding`]):
//!
//! 1. interrupted (130): a cell was cancelled by Ctrl-C, so the run stopped on purpose;
//! 2. coverage (4): for each profile, cells with a verdict (passed or failed) / planned cells
//!    must reach `--min-coverage`. Per profile, not overall, because one provider being down
//!    in a four-profile matrix still leaves that profile unmeasured. It comes first because
//!    every later check reads numbers that only mean something when the cells ran;
//! 3. control arm (5): the `oracle` profile, when the run has it, must pass every cell it ran
//!    (cells cancelled or never started did not run). A failing oracle means the benchmark or
//!    the machine is broken, so pass rates of the other profiles mean nothing;
//! 4. pass-rate floor (6): for each profile, passed / planned cells must reach `--fail-under`,
//!    when given;
//! 5. a case failed (1): for `run` without `--fail-under` only, every cell must pass, the rule
//!    `run` always had. `matrix` has no such rule: comparing profiles is its point, so failing
//!    cells are data unless a floor says otherwise.
//!
//! The thresholds are part of the plan (written to `manifest.json` by the run), so
//! `hcbench report RUN_DIR` judges a run exactly as the run itself did. Coverage and pass rate
//! are counted here from the cells, not taken from `aggregate`, so the policy does not move
//! when the statistics do.

use serde::{Deserialize, Serialize};

use crate::exit;
use crate::replay::CellSummary;
use crate::rundir::Manifest;
use crate::trace::event::Outcome;

/// `--min-coverage` when not given.
pub const DEFAULT_MIN_COVERAGE: f64 = 0.9;
/// The profile that is the run's control arm when it takes part.
pub const CONTROL_ARM: &str = "oracle";
/// Cell ids named in a control-arm finding; the report lists every cell that did not pass.
const NAMED_CELLS: usize = 3;

/// The thresholds a run is judged by, resolved (see `settings.rs`) and recorded in its manifest.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    /// Smallest share of a profile's planned cells that must end with a verdict.
    pub min_coverage: f64,
    /// Smallest pass rate of every profile, when a floor was asked for.
    pub fail_under: Option<f64>,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds { min_coverage: DEFAULT_MIN_COVERAGE, fail_under: None }
    }
}

impl Thresholds {
    /// The thresholds recorded in a manifest; a manifest from before the policy gets defaults.
    pub fn of(manifest: &Manifest) -> Thresholds {
        Thresholds {
            min_coverage: manifest.min_coverage.unwrap_or(DEFAULT_MIN_COVERAGE),
            fail_under: manifest.fail_under,
        }
    }
}

/// One check of the policy, in precedence order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    Interrupted,
    Coverage,
    ControlArm,
    PassRateFloor,
    CaseFailed,
}

impl Check {
    pub fn exit_code(self) -> i32 {
        match self {
            Check::Interrupted => exit::INTERRUPTED,
            Check::Coverage => exit::COVERAGE_BELOW_THRESHOLD,
            Check::ControlArm => exit::CONTROL_ARM_FAILED,
            Check::PassRateFloor => exit::PASS_RATE_BELOW_FLOOR,
            Check::CaseFailed => exit::FAILED,
        }
    }

    /// Words for people, as in docs/commands.md.
    pub fn describe(self) -> &'static str {
        match self {
            Check::Interrupted => "interrupted",
            Check::Coverage => "coverage below threshold",
            Check::ControlArm => "control arm failed",
            Check::PassRateFloor => "pass rate below floor",
            Check::CaseFailed => "a case failed",
        }
    }
}

/// One check that did not hold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub check: Check,
    /// The profile it concerns (None for the run as a whole).
    pub profile: Option<String>,
    pub message: String,
}

/// The policy's answer: the exit code and every check that did not hold, first the deciding one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Judgement {
    pub exit_code: i32,
    pub min_coverage: f64,
    pub fail_under: Option<f64>,
    /// The control arm, when the run has one.
    pub control_arm: Option<String>,
    pub findings: Vec<Finding>,
}

impl Judgement {
    /// One line for people: `exit 0: every check held` or `exit 4 (coverage below threshold)`.
    pub fn headline(&self) -> String {
        match self.findings.first() {
            None => format!(
                "exit {}: every check held (coverage ≥ {} per profile{}{})",
                self.exit_code,
                super::pct(self.min_coverage),
                self.fail_under.map(|f| format!(", pass rate ≥ {}", super::pct(f))).unwrap_or_default(),
                self.control_arm
                    .as_ref()
                    .map(|p| format!(", control arm `{p}` passed every cell it ran"))
                    .unwrap_or_default()
            ),
            Some(f) => format!("exit {} ({})", self.exit_code, f.check.describe()),
        }
    }
}

/// Judges a run: `command` is the manifest's (`run` or `matrix`), `profiles` the plan's, and
/// `cells` every planned cell (incomplete ones as placeholders without an outcome).
pub fn judge(
    command: &str,
    status: RunStatus,
    profiles: &[String],
    cells: &[CellSummary],
    thresholds: Thresholds,
) -> Judgement {
    let mut findings = Vec::new();
    if status == RunStatus::Interrupted {
        let cancelled = cells.iter().filter(|c| c.outcome == Some(Outcome::Cancelled)).count();
        findings.push(Finding {
            check: Check::Interrupted,
            profile: None,
            message: format!("the run was interrupted: {cancelled} cell(s) were cancelled"),
        });
    }
    for p in profiles {
        let of: Vec<&CellSummary> = cells.iter().filter(|c| c.group() == p.as_str()).collect();
        let planned = of.len().max(1) as f64;
        let verdicts = of.iter().filter(|c| c.outcome.is_some_and(Outcome::is_verdict)).count();
        let coverage = verdicts as f64 / planned;
        if below(coverage, thresholds.min_coverage) {
            findings.push(Finding {
                check: Check::Coverage,
                profile: Some(p.clone()),
                message: format!(
                    "profile `{p}`: coverage {} ({verdicts} of {} planned cell(s) have a verdict) is below --min-coverage {}",
                    super::pct(coverage),
                    of.len(),
                    super::pct(thresholds.min_coverage)
                ),
            });
        }
        if is_control_arm(p) {
            let ran = of.iter().filter(|c| c.outcome.is_some_and(|o| o != Outcome::Cancelled));
            let (ran, not_passed): (Vec<_>, Vec<_>) = (ran.clone().collect(), ran.filter(|c| !passed(c)).collect());
            if !not_passed.is_empty() {
                let named: Vec<String> = not_passed
                    .iter()
                    .take(NAMED_CELLS)
                    .map(|c| format!("{} {}", c.cell_id, c.outcome_label()))
                    .collect();
                let more = not_passed.len().saturating_sub(NAMED_CELLS);
                findings.push(Finding {
                    check: Check::ControlArm,
                    profile: Some(p.clone()),
                    message: format!(
                        "control arm `{p}` did not pass {} of the {} cell(s) it ran ({}{}): the benchmark or this machine is broken",
                        not_passed.len(),
                        ran.len(),
                        named.join(", "),
                        if more > 0 { format!(", {more} more") } else { String::new() }
                    ),
                });
            }
        }
        let passed_cells = of.iter().filter(|c| passed(c)).count();
        let pass_rate = passed_cells as f64 / planned;
        if let Some(floor) = thresholds.fail_under.filter(|f| below(pass_rate, *f)) {
            findings.push(Finding {
                check: Check::PassRateFloor,
                profile: Some(p.clone()),
                message: format!(
                    "profile `{p}`: pass rate {} ({passed_cells} of {} planned cell(s) passed) is below --fail-under {}",
                    super::pct(pass_rate),
                    of.len(),
                    super::pct(floor)
                ),
            });
        }
        if command == "run" && thresholds.fail_under.is_none() && passed_cells < of.len() {
            findings.push(Finding {
                check: Check::CaseFailed,
                profile: Some(p.clone()),
                message: format!("profile `{p}`: {} of {} cell(s) did not pass", of.len() - passed_cells, of.len()),
            });
        }
    }
    // Stable: within one check the findings keep the plan's profile order.
    findings.sort_by_key(|f| f.check);
    Judgement {
        exit_code: findings.first().map_or(exit::SUCCESS, |f| f.check.exit_code()),
        min_coverage: thresholds.min_coverage,
        fail_under: thresholds.fail_under,
        control_arm: profiles.iter().find(|p| is_control_arm(p)).cloned(),
        findings,
    }
}

/// The control arm is the `oracle` profile, and in an ablate run every `oracle/<ablation>`
/// group: the oracle must pass under every ablation.
fn is_control_arm(group: &str) -> bool {
    group.split_once('/').map_or(group, |(profile, _)| profile) == CONTROL_ARM
}

fn passed(c: &CellSummary) -> bool {
    c.outcome == Some(Outcome::Passed)
}

/// `rate < threshold`, with room for floating-point error so 9 of 10 meets 90%.
fn below(rate: f64, threshold: f64) -> bool {
    rate + 1e-9 < threshold
}

/// How much of the plan a run carried out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Every planned cell has a trace that ends with `run_finished`.
    Complete,
    /// Some planned cells never started or their trace ends early (a killed process, a budget
    /// cut), and none was cancelled.
    Partial,
    /// Ctrl-C cancelled at least one cell.
    Interrupted,
}

impl RunStatus {
    /// Complete when every cell has an outcome other than `cancelled`; a cancelled cell makes
    /// the run interrupted, a cell without an outcome (a placeholder for a missing trace, or a
    /// trace cut before `run_finished`) makes it partial.
    pub fn of(cells: &[CellSummary]) -> RunStatus {
        if cells.iter().any(|c| c.outcome == Some(Outcome::Cancelled)) {
            RunStatus::Interrupted
        } else if cells.iter().any(|c| c.outcome.is_none()) {
            RunStatus::Partial
        } else {
            RunStatus::Complete
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(profile: &str, case: &str, outcome: Option<Outcome>) -> CellSummary {
        CellSummary {
            cell_id: format!("{case}__{profile}"),
            case_id: case.into(),
            profile: profile.into(),
            outcome,
            ..Default::default()
        }
    }

    fn profiles(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    fn codes(j: &Judgement) -> Vec<i32> {
        j.findings.iter().map(|f| f.check.exit_code()).collect()
    }

    const P: Option<Outcome> = Some(Outcome::Passed);
    const F: Option<Outcome> = Some(Outcome::Failed);
    const H: Option<Outcome> = Some(Outcome::HarnessError);

    #[test]
    fn a_matrix_with_failing_cells_but_full_coverage_and_a_passing_oracle_exits_0() {
        let cells = [cell("oracle", "a", P), cell("nop", "a", F), cell("oracle", "b", P), cell("nop", "b", F)];
        let j = judge("matrix", RunStatus::Complete, &profiles(&["oracle", "nop"]), &cells, Thresholds::default());
        assert_eq!(j.exit_code, exit::SUCCESS);
        assert!(j.findings.is_empty());
        assert!(j.headline().starts_with("exit 0: every check held"), "{}", j.headline());
    }

    #[test]
    fn the_oracle_is_the_control_arm_under_every_ablation() {
        let ablated =
            |ablation: &str, outcome| CellSummary { ablation: ablation.into(), ..cell("oracle", "a", outcome) };
        let cells = [ablated("full", P), ablated("no_memory", F)];
        let groups = profiles(&["oracle/full", "oracle/no_memory"]);
        let j = judge("ablate", RunStatus::Complete, &groups, &cells, Thresholds::default());
        assert_eq!(j.exit_code, exit::CONTROL_ARM_FAILED);
        assert_eq!(j.findings[0].profile.as_deref(), Some("oracle/no_memory"));
        assert_eq!(j.control_arm.as_deref(), Some("oracle/full"));
        let passing = [ablated("full", P), ablated("no_memory", P)];
        assert_eq!(judge("ablate", RunStatus::Complete, &groups, &passing, Thresholds::default()).exit_code, 0);
    }

    #[test]
    fn harness_errors_everywhere_are_a_coverage_failure_before_a_control_arm_failure() {
        let cells = [cell("oracle", "a", H), cell("oracle", "b", H)];
        let j = judge("matrix", RunStatus::Complete, &profiles(&["oracle"]), &cells, Thresholds::default());
        assert_eq!(codes(&j), [exit::COVERAGE_BELOW_THRESHOLD, exit::CONTROL_ARM_FAILED]);
        assert_eq!(j.exit_code, exit::COVERAGE_BELOW_THRESHOLD);
        assert!(j.findings[0].message.contains("coverage 0.0% (0 of 2 planned cell(s)"), "{}", j.findings[0].message);
        // With the coverage check switched off, the oracle's harness errors are its failures.
        let off = Thresholds { min_coverage: 0.0, fail_under: None };
        let j = judge("matrix", RunStatus::Complete, &profiles(&["oracle"]), &cells, off);
        assert_eq!(j.exit_code, exit::CONTROL_ARM_FAILED);
    }

    #[test]
    fn coverage_is_judged_per_profile_and_nine_of_ten_meets_ninety_percent() {
        let mut cells: Vec<CellSummary> = (0..10).map(|i| cell("a", &format!("c{i}"), P)).collect();
        cells[0].outcome = H;
        cells.extend((0..10).map(|i| cell("b", &format!("c{i}"), Some(Outcome::ProviderError))));
        let j = judge("matrix", RunStatus::Complete, &profiles(&["a"]), &cells[..10], Thresholds::default());
        assert_eq!(j.exit_code, exit::SUCCESS, "{:?}", j.findings);
        let j = judge("matrix", RunStatus::Complete, &profiles(&["a", "b"]), &cells, Thresholds::default());
        assert_eq!(j.exit_code, exit::COVERAGE_BELOW_THRESHOLD);
        assert_eq!(j.findings.len(), 1);
        assert_eq!(j.findings[0].profile.as_deref(), Some("b"), "overall coverage is 45%, but only b is unmeasured");
    }

    #[test]
    fn the_oracle_must_pass_what_it_ran_but_cancelled_and_unstarted_cells_did_not_run() {
        let cells = [cell("oracle", "a", P), cell("oracle", "b", Some(Outcome::Cancelled)), cell("oracle", "c", None)];
        let off = Thresholds { min_coverage: 0.0, fail_under: None };
        let j = judge("matrix", RunStatus::Complete, &profiles(&["oracle"]), &cells, off);
        assert_eq!(j.exit_code, exit::SUCCESS, "{:?}", j.findings);
        let cells = [cell("oracle", "a", P), cell("oracle", "b", F)];
        let j = judge("matrix", RunStatus::Complete, &profiles(&["oracle"]), &cells, off);
        assert_eq!(j.exit_code, exit::CONTROL_ARM_FAILED);
        assert!(j.findings[0].message.contains("did not pass 1 of the 2 cell(s) it ran (b__oracle failed)"));
    }

    #[test]
    fn fail_under_is_a_floor_per_profile_and_replaces_runs_every_case_rule() {
        let cells = [cell("x", "a", P), cell("x", "b", P), cell("x", "c", F), cell("x", "d", P)];
        let run = |fail_under| {
            judge("run", RunStatus::Complete, &profiles(&["x"]), &cells, Thresholds { min_coverage: 0.9, fail_under })
        };
        assert_eq!(run(None).exit_code, exit::FAILED, "run without a floor wants every case");
        assert_eq!(run(Some(0.75)).exit_code, exit::SUCCESS, "3 of 4 meets 75%");
        assert_eq!(run(Some(0.8)).exit_code, exit::PASS_RATE_BELOW_FLOOR);
        let matrix = judge("matrix", RunStatus::Complete, &profiles(&["x"]), &cells, Thresholds::default());
        assert_eq!(matrix.exit_code, exit::SUCCESS, "matrix has no every-case rule");
    }

    #[test]
    fn an_interrupted_run_exits_130_and_still_lists_what_else_failed() {
        let cells = [cell("oracle", "a", Some(Outcome::Cancelled)), cell("oracle", "b", None)];
        let j = judge("matrix", RunStatus::Interrupted, &profiles(&["oracle"]), &cells, Thresholds::default());
        assert_eq!(codes(&j), [exit::INTERRUPTED, exit::COVERAGE_BELOW_THRESHOLD]);
        assert_eq!(j.exit_code, exit::INTERRUPTED);
    }
}
