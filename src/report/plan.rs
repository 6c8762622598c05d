//! `hcbench plan`: what a matrix would run, what it would cost and how long it would take where
//! that is known, and the smallest difference between two profiles it could detect, before
//! anything runs (Miller 2024: power analysis comes first).
//!
//! Costs and times are only stated when something measured them: a previous run given with
//! `--from RUN_DIR` (its mean cost and median wall time per cell, per profile). Profiles that
//! call no model (`oracle`, `nop`, scripted) cost nothing. Everything else is "unknown" rather
//! than a guess. The minimum detectable effect uses [`crate::stats::power`]: the variance
//! observed in `--from` when it has the profiles, else the textbook `p (1 - p)` at the
//! baseline pass rate (0.5, the worst case, unless `--baseline-rate` or `--from` says
//! otherwise).

use std::fmt::Write as _;

use serde::Serialize;

use super::model::MatrixReport;
use crate::aggregate::{ALPHA, POWER, measured_passes};
use crate::stats::power::{self, Variance};

/// A profile as the plan sees it.
pub struct PlannedProfile {
    pub name: String,
    /// `oracle`, `scripted`, `openai-chat`...
    pub provider: String,
    /// True when the profile calls a model (and so may cost money).
    pub calls_a_model: bool,
}

/// What the plan is built from.
pub struct PlanInput<'a> {
    pub benchmark: &'a str,
    pub cases: usize,
    pub profiles: Vec<PlannedProfile>,
    pub epochs: u32,
    pub jobs: usize,
    pub target_diff: Option<f64>,
    pub baseline_rate: Option<f64>,
    /// A finished run to take costs, times and variance from.
    pub past: Option<&'a MatrixReport>,
}

#[derive(Debug, Serialize)]
pub struct PlanReport {
    pub benchmark: String,
    pub cases: usize,
    pub epochs: u32,
    pub cells: usize,
    pub jobs: usize,
    pub profiles: Vec<ProfilePlan>,
    /// Pairs of profiles a report will compare (Holm-corrected when more than one).
    pub comparisons: usize,
    /// Sum over profiles, when every profile's cost is known.
    pub est_cost_usd: Option<f64>,
    /// Wall time at `jobs` cells at once, when every profile's time per cell is known.
    pub est_wall_s: Option<f64>,
    pub alpha: f64,
    pub power: f64,
    pub baseline_rate: f64,
    /// Where the variance behind the MDE comes from.
    pub variance: String,
    /// Minimum detectable difference in pass rate between two profiles; None when nothing is
    /// detectable with this many cases.
    pub mde: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<Target>,
}

#[derive(Debug, Serialize)]
pub struct ProfilePlan {
    pub name: String,
    pub provider: String,
    pub cells: usize,
    pub est_cost_usd: Option<f64>,
    pub est_cell_s: Option<f64>,
    /// Where the estimates come from.
    pub basis: String,
}

#[derive(Debug, Serialize)]
pub struct Target {
    pub diff: f64,
    /// Cases needed at the plan's epochs.
    pub cases_needed: usize,
    /// Epochs needed with the plan's cases; None when no number of epochs suffices.
    pub epochs_needed: Option<usize>,
}

pub fn build(input: &PlanInput<'_>) -> PlanReport {
    let per_profile = input.cases * input.epochs as usize;
    let past_stats = |name: &str| input.past.and_then(|r| r.profile_stats.iter().find(|s| s.profile == name));
    let profiles: Vec<ProfilePlan> = input
        .profiles
        .iter()
        .map(|p| {
            let past = past_stats(&p.name).filter(|s| s.cells > 0);
            let measured_cost = past.map(|s| s.cost_usd.unwrap_or(0.0) / s.cells as f64);
            let (est_cost_usd, basis) = match (p.calls_a_model, measured_cost) {
                (false, _) => (Some(0.0), "calls no model".to_string()),
                (true, Some(c)) => (Some(c * per_profile as f64), "measured in --from".to_string()),
                (true, None) => (None, "unknown: pass --from RUN_DIR with a run of this profile".to_string()),
            };
            ProfilePlan {
                name: p.name.clone(),
                provider: p.provider.clone(),
                cells: per_profile,
                est_cost_usd,
                est_cell_s: past.map(|s| s.wall_p50_ms as f64 / 1000.0),
                basis,
            }
        })
        .collect();
    let est_cost_usd = profiles.iter().map(|p| p.est_cost_usd).sum::<Option<f64>>();
    let est_wall_s = profiles
        .iter()
        .map(|p| p.est_cell_s.map(|s| s * p.cells as f64))
        .sum::<Option<f64>>()
        .map(|total| (total / input.jobs.max(1) as f64 * 10.0).round() / 10.0);

    let observed = input.past.and_then(|r| observed_variance(r, &input.profiles));
    let past_rate = input.past.and_then(|r| pooled_pass_rate(r, &input.profiles));
    let baseline_rate = input.baseline_rate.or(past_rate).unwrap_or(0.5);
    let (variance, source) = match (observed, input.baseline_rate) {
        (Some(v), None) => {
            (v, "observed in --from (the largest of the profiles', at least that of a 5% rate)".to_string())
        }
        _ => (Variance::assumed(baseline_rate), format!("assumed: p(1-p) at pass rate {baseline_rate:.2}")),
    };
    let epochs = input.epochs as usize;
    let mde = power::mde_for(&variance, input.cases, epochs, ALPHA, POWER);
    let n = input.profiles.len();
    PlanReport {
        benchmark: input.benchmark.to_string(),
        cases: input.cases,
        epochs: input.epochs,
        cells: per_profile * n,
        jobs: input.jobs,
        comparisons: n * n.saturating_sub(1) / 2,
        est_cost_usd,
        est_wall_s,
        alpha: ALPHA,
        power: POWER,
        baseline_rate,
        variance: source,
        mde: mde.is_finite().then_some(mde),
        target: input.target_diff.map(|diff| Target {
            diff,
            cases_needed: power::cases_needed(diff, epochs, baseline_rate, ALPHA, POWER),
            epochs_needed: power::epochs_needed(diff, input.cases, baseline_rate, ALPHA, POWER),
        }),
        profiles,
    }
}

/// Pass/fail values per case of one profile in a finished run; only cells with a verdict.
fn per_case(report: &MatrixReport, profile: &str) -> Vec<Vec<f64>> {
    measured_passes(report.cells.iter().filter(|c| c.profile == profile)).into_values().collect()
}

/// The largest observed variance among the planned profiles that the past run has (the
/// comparison is only as sensitive as its noisiest arm), never below what
/// [`Variance::assumed`] gives at its most optimistic rate: a control arm that always passes
/// shows no variance at all, which would promise that any difference is detectable.
fn observed_variance(report: &MatrixReport, profiles: &[PlannedProfile]) -> Option<Variance> {
    let floor = Variance::assumed(0.0);
    profiles
        .iter()
        .filter_map(|p| Variance::observed(&per_case(report, &p.name)))
        .max_by(|a, b| (a.between + a.within).total_cmp(&(b.between + b.within)))
        .map(|v| Variance { between: v.between.max(floor.between), within: v.within.max(floor.within) })
}

fn pooled_pass_rate(report: &MatrixReport, profiles: &[PlannedProfile]) -> Option<f64> {
    let values: Vec<f64> = profiles.iter().flat_map(|p| per_case(report, &p.name)).flatten().collect();
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// The plan for people.
pub fn render_text(p: &PlanReport) -> String {
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    t.set_header(["profile", "provider", "cells", "est. cost", "time/cell", "basis"]);
    for r in &p.profiles {
        t.add_row([
            r.name.clone(),
            r.provider.clone(),
            r.cells.to_string(),
            r.est_cost_usd.map_or("unknown".into(), |c| format!("${c:.2}")),
            r.est_cell_s.map_or("unknown".into(), |s| format!("{s:.1}s")),
            r.basis.clone(),
        ]);
    }
    let mut out = format!(
        "plan: benchmark {}, {} case(s) x {} epoch(s) x {} profile(s) = {} cell(s), {} at once\n{t}\n",
        p.benchmark,
        p.cases,
        p.epochs,
        p.profiles.len(),
        p.cells,
        p.jobs
    );
    let cost = p.est_cost_usd.map_or("unknown".into(), |c| format!("${c:.2}"));
    let wall = p.est_wall_s.map_or("unknown".into(), |s| format!("about {}", human_seconds(s)));
    let _ = writeln!(out, "estimated cost: {cost}; estimated wall time: {wall}");
    let _ = match p.mde {
        Some(m) => writeln!(
            out,
            "smallest detectable difference between two profiles: {:.1} points of pass rate \
             ({:.0}% power, two-sided alpha {}; variance {})",
            m * 100.0,
            p.power * 100.0,
            p.alpha,
            p.variance
        ),
        None => writeln!(
            out,
            "smallest detectable difference: none: {} case(s) are too few for any comparison to reach alpha {} \
             (the exact sign test needs at least {} cases)",
            p.cases,
            p.alpha,
            power::min_cases(p.alpha)
        ),
    };
    if p.comparisons > 1 {
        let _ = writeln!(
            out,
            "{} pairwise comparisons: reports correct for them (Holm), so each needs a little more than this",
            p.comparisons
        );
    }
    if let Some(t) = &p.target {
        let epochs = match t.epochs_needed {
            Some(e) => format!("or {e} epoch(s) with these {} cases", p.cases),
            None => format!("no number of epochs suffices with {} cases", p.cases),
        };
        let _ = writeln!(
            out,
            "to detect {:.1} points: {} case(s) at {} epoch(s), {epochs}",
            t.diff * 100.0,
            t.cases_needed,
            p.epochs
        );
    }
    out
}

fn human_seconds(s: f64) -> String {
    match s {
        s if s < 90.0 => format!("{s:.0}s"),
        s if s < 5400.0 => format!("{:.0} min", s / 60.0),
        s => format!("{:.1} h", s / 3600.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(cases: usize, epochs: u32, profiles: &[(&str, bool)]) -> PlanInput<'static> {
        PlanInput {
            benchmark: "b",
            cases,
            profiles: profiles
                .iter()
                .map(|(n, m)| PlannedProfile { name: n.to_string(), provider: "p".into(), calls_a_model: *m })
                .collect(),
            epochs,
            jobs: 2,
            target_diff: Some(0.1),
            baseline_rate: None,
            past: None,
        }
    }

    #[test]
    fn the_plan_counts_cells_and_states_what_it_cannot_know() {
        let p = build(&input(40, 3, &[("oracle", false), ("gpt", true)]));
        assert_eq!((p.cells, p.comparisons), (240, 1));
        assert_eq!(p.profiles[0].est_cost_usd, Some(0.0), "the oracle calls no model");
        assert_eq!(p.profiles[1].est_cost_usd, None, "a model profile without a measured run is unknown");
        assert_eq!(p.est_cost_usd, None);
        assert_eq!(p.est_wall_s, None);
        let mde = p.mde.unwrap();
        assert!(mde > 0.1 && mde < 0.5, "{mde}");
        let t = p.target.as_ref().unwrap();
        assert!(t.cases_needed > 40, "10 points needs more than 40 cases: {}", t.cases_needed);
        let text = render_text(&p);
        assert!(text.contains("240 cell(s)") && text.contains("unknown") && text.contains("detectable"), "{text}");
    }

    #[test]
    fn too_few_cases_detect_nothing() {
        let p = build(&input(5, 1, &[("oracle", false), ("nop", false)]));
        assert_eq!(p.mde, None);
        assert!(render_text(&p).contains("too few"), "{}", render_text(&p));
    }

    #[test]
    fn more_epochs_never_hurt_and_more_cases_help() {
        let mde = |cases, epochs| build(&input(cases, epochs, &[("a", false), ("b", false)])).mde.unwrap();
        assert!(mde(40, 3) < mde(40, 1));
        assert!(mde(160, 1) < mde(40, 1));
    }
}
