//! The terminal table of cells, shared by `run` and `replay`.

use comfy_table::{presets, Table};

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
            format!("{:.1}s", s.wall_ms as f64 / 1000.0),
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
    format!("{} cell(s): {}; coverage {coverage:.0}% (cells with a valid verdict)", summaries.len(), parts.join(", "))
}
