//! Terminal tables (comfy-table): cells for `run` and `replay`, profiles for `matrix`.

use comfy_table::{CellAlignment, Table, presets};

use super::exit_policy::Judgement;
use super::model::MatrixReport;
use super::{comparisons_sentence, diff_range, pct, pct_range, secs};
use crate::aggregate::{GroupStats, mde_words};
use crate::replay::CellSummary;

pub fn cell_table(summaries: &[CellSummary]) -> Table {
    let mut t = Table::new();
    t.load_preset(presets::UTF8_FULL_CONDENSED);
    t.set_header(["case", "profile", "outcome", "reward", "steps", "tool calls", "denials", "wall", "reason"]);
    for s in summaries {
        t.add_row([
            s.case_id.clone(),
            s.profile.clone(),
            s.outcome_label().to_string(),
            format!("{:.1}", s.reward),
            format!("{}/{}", s.steps, s.step_budget),
            s.tool_calls.to_string(),
            s.policy_denials.to_string(),
            secs(s.wall_ms),
            crate::util::truncate_str(&s.reason, 60).to_string(),
        ]);
    }
    t
}

/// "N cells: a passed, b failed, ..., coverage x%": infrastructure classes stay separate.
pub fn totals_line(summaries: &[CellSummary]) -> String {
    let mut counts: std::collections::BTreeMap<&str, usize> = Default::default();
    for s in summaries {
        *counts.entry(s.outcome_label()).or_default() += 1;
    }
    let verdicts = summaries.iter().filter(|s| s.outcome.is_some_and(|o| o.is_verdict())).count();
    let parts: Vec<String> = counts.iter().map(|(k, v)| format!("{v} {k}")).collect();
    let coverage = if summaries.is_empty() { 0.0 } else { 100.0 * verdicts as f64 / summaries.len() as f64 };
    let mut line = format!(
        "{} cell(s): {}; coverage {coverage:.0}% (cells with a valid verdict)",
        summaries.len(),
        parts.join(", ")
    );
    // Events a newer hcbench wrote are left out of every number above, so say so.
    if let Some(skipped) = crate::replay::skipped_sentence(summaries) {
        line.push_str("; ");
        line.push_str(&skipped);
    }
    line
}

pub fn profile_table(stats: &[GroupStats]) -> Table {
    let mut t = Table::new();
    t.load_preset(presets::UTF8_FULL_CONDENSED);
    t.set_header([
        "profile",
        "pass rate",
        "95% CI",
        "coverage",
        "passed",
        "failed",
        "infra",
        "pass@k",
        "pass^k",
        "steps",
        "denials",
        "wall p50",
        "wall p95",
        "tokens",
    ]);
    for s in stats {
        let infra: usize = s.cells - s.passed - s.failed;
        t.add_row([
            s.profile.clone(),
            pct(s.pass_rate),
            pct_range(&s.pass_rate_ci),
            pct(s.coverage),
            s.passed.to_string(),
            s.failed.to_string(),
            infra.to_string(),
            pct(s.pass_at_k),
            pct(s.pass_hat_k),
            format!("{:.1}", s.mean_steps),
            s.policy_denials.to_string(),
            secs(s.wall_p50_ms),
            secs(s.wall_p95_ms),
            format!("{}/{}", s.input_tokens, s.output_tokens),
        ]);
    }
    t
}

/// One line per comparison (the paired test and its verdict), the multiple-comparisons note,
/// and the power statement, which every report carries even with one profile.
pub fn comparison_lines(report: &MatrixReport) -> Vec<String> {
    let mut lines: Vec<String> = report
        .comparisons
        .iter()
        .map(|c| {
            let dropped = if c.dropped_cases > 0 {
                format!(", {} case(s) dropped (not measured by both)", c.dropped_cases)
            } else {
                String::new()
            };
            format!(
                "{} vs {}: {} shared case(s) ({} won, {} lost, {} tied{dropped}), mean diff {:+.3}, 95% CI {}: {}; MDE {}",
                c.a,
                c.b,
                c.cases,
                c.wins,
                c.losses,
                c.ties,
                c.mean_diff,
                diff_range(&c.ci),
                c.verdict_text,
                mde_words(c.mde)
            )
        })
        .collect();
    lines.extend(comparisons_sentence(report));
    lines.push(format!("power: {}", report.power.sentence()));
    lines
}

/// An ablate run's tables (outcomes and behaviour, context, effects, failures), each under
/// its title; nothing for other commands. The per-category tables are in report.md and
/// report.html, where width is not a problem.
pub fn ablation_lines(report: &MatrixReport) -> Vec<String> {
    let Some(a) = &report.ablation else { return Vec::new() };
    let mut lines = Vec::new();
    for view in super::ablation::terminal_tables(a) {
        lines.push(format!("{}:", view.title));
        let mut t = Table::new();
        t.load_preset(presets::UTF8_FULL_CONDENSED);
        t.set_header(view.headers.clone());
        for row in &view.rows {
            t.add_row(row.clone());
        }
        for (i, numeric) in view.numeric.iter().enumerate() {
            if *numeric && let Some(column) = t.column_mut(i) {
                column.set_cell_alignment(CellAlignment::Right);
            }
        }
        lines.push(t.to_string());
    }
    lines
}

/// The incomplete-run banner, for the top of a terminal summary (nothing for a complete run).
pub fn banner_lines(report: &MatrixReport) -> Vec<String> {
    let banners = report.banner.iter().map(String::as_str).chain(report.isolation_warning()).map(|b| format!("!! {b}"));
    banners.chain(report.not_run_lines().into_iter().map(|n| format!("-- {n}"))).collect()
}

/// `verdict: exit N ...` and one indented line per check that did not hold.
pub fn verdict_lines(verdict: &Judgement) -> Vec<String> {
    let mut lines = vec![format!("verdict: {}", verdict.headline())];
    lines.extend(verdict.findings.iter().map(|f| format!("  - {}", f.message)));
    lines
}
