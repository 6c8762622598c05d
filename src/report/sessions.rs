//! The multi-session section of a matrix report: for each cell of a multi-session case, the
//! features its hidden checks verified after each session and the features the agent claimed
//! passing that were not (`session_finished` events, folded into the cell's summary, and the
//! verifier's `false_claim_features` metric). Markdown and HTML show it as one table; cells of
//! other cases have no row, and a run without multi-session cells has no section.

use crate::replay::CellSummary;

use super::ablation::TableView;
use super::model::MatrixReport;

const NOTE: &str = "Per cell of a multi-session case: the features that passed the hidden checks after each session (marked passing by the agent's feature_list.json in brackets), and the features marked passing that failed their check after the last session (false claims).";

/// The rows, one per multi-session cell, in report order.
fn rows(cells: &[CellSummary]) -> Vec<Vec<String>> {
    cells
        .iter()
        .filter(|c| !c.sessions.is_empty())
        .map(|c| {
            let total = c.metrics.get("features_total").and_then(|v| v.as_u64());
            let progress: Vec<String> = c.sessions.iter().map(|s| format!("{} ({})", s.verified, s.marked)).collect();
            let last = c.sessions.last().map_or(0, |s| s.verified);
            let claims: Vec<&str> = c
                .metrics
                .get("false_claim_features")
                .and_then(|v| v.as_array())
                .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
                .unwrap_or_default();
            let false_claims = c.sessions.last().map_or(0, |s| s.false_claims);
            vec![
                c.cell_id.clone(),
                c.group().into_owned(),
                c.outcome_label().to_string(),
                c.sessions.len().to_string(),
                progress.join(" → "),
                total.map_or_else(|| last.to_string(), |t| format!("{last}/{t}")),
                if claims.is_empty() {
                    false_claims.to_string()
                } else {
                    format!("{false_claims}: {}", claims.join(", "))
                },
            ]
        })
        .collect()
}

/// The section's table; None when the run has no multi-session cell.
pub(crate) fn table(report: &MatrixReport) -> Option<TableView> {
    let rows = rows(&report.cells);
    (!rows.is_empty()).then(|| TableView {
        id: "sessions",
        title: "Multi-session cells",
        note: NOTE,
        headers: vec![
            "cell",
            "profile",
            "outcome",
            "sessions",
            "features verified (marked) per session",
            "done",
            "false claims",
        ],
        numeric: vec![false, false, false, true, false, true, false],
        rows,
    })
}

/// The section in Markdown, or nothing.
pub(crate) fn markdown(o: &mut String, report: &MatrixReport) {
    use std::fmt::Write as _;
    let Some(t) = table(report) else { return };
    let _ = writeln!(o, "## {}\n\n{}\n", t.title, t.note);
    let _ = writeln!(o, "| {} |", t.headers.join(" | "));
    let align: Vec<&str> = t.numeric.iter().map(|n| if *n { "---:" } else { "---" }).collect();
    let _ = writeln!(o, "|{}|", align.join("|"));
    for row in &t.rows {
        let cells: Vec<String> = row.iter().map(|c| c.replace('|', "\\|")).collect();
        let _ = writeln!(o, "| {} |", cells.join(" | "));
    }
    let _ = writeln!(o);
}

/// The CSV columns of a cell: features passing at the end, false claims, and the features
/// verified after each session (`0;1;2;3`); empty for a cell of another case.
pub(crate) fn csv_fields(c: &CellSummary) -> [String; 3] {
    if c.sessions.is_empty() {
        return Default::default();
    }
    let metric = |k: &str| c.metrics.get(k).map(|v| v.to_string()).unwrap_or_default();
    let per_session: Vec<String> = c.sessions.iter().map(|s| s.verified.to_string()).collect();
    [metric("features_passing"), metric("false_claims"), per_session.join(";")]
}
