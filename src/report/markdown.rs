//! `report.md`: GitHub-flavoured Markdown that fits a PR comment or a CI job summary.

use std::fmt::Write as _;

use super::model::MatrixReport;
use super::{ExportError, Exporter, pct, pct_range, secs};
use crate::aggregate::GroupStats;

pub struct Markdown;

fn escape(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn infra(s: &GroupStats) -> String {
    let parts: Vec<String> = s
        .outcomes
        .iter()
        .filter(|(k, _)| k.as_str() != "passed" && k.as_str() != "failed")
        .map(|(k, v)| format!("{v} {k}"))
        .collect();
    if parts.is_empty() { "0".into() } else { parts.join(", ") }
}

/// Renders the Markdown report as a string (also printed by `hcbench report --format md`).
pub fn render(report: &MatrixReport) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# hcbench {}: {}\n", report.command, report.benchmark);
    let _ = writeln!(
        o,
        "Run `{}` · {} profile(s) · {} case(s) · {} epoch(s) · {} cell(s)\n",
        report.run_id,
        report.profiles.len(),
        report.cells.iter().map(|c| c.case_id.as_str()).collect::<std::collections::BTreeSet<_>>().len(),
        report.epochs,
        report.cells.len()
    );
    // An incomplete run says so before any number, and the exit policy's verdict comes next,
    // so a PR comment or CI job summary cannot be read as a result without them.
    if let Some(banner) = &report.banner {
        let _ = writeln!(o, "> **{}**\n", escape(banner));
    }
    let _ = writeln!(o, "**Verdict:** {}", report.verdict.headline());
    for f in &report.verdict.findings {
        let _ = writeln!(o, "- {}", escape(&f.message));
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "## Summary\n");
    let _ = writeln!(
        o,
        "| profile | pass rate | 95% CI | coverage | passed | failed | infra errors | pass@1 | pass@k | pass^k | steps | tool calls | denials | invalid | wall p50 | wall p95 | tokens in/out | cost |"
    );
    let _ = writeln!(o, "|---|---:|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|");
    for s in &report.profile_stats {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} | {:.1} | {} | {} | {} | {} | {}/{} | {} |",
            escape(&s.profile),
            pct(s.pass_rate),
            pct_range(s.pass_rate_ci),
            pct(s.coverage),
            s.passed,
            s.failed,
            infra(s),
            pct(s.pass_at_1),
            pct(s.pass_at_k),
            pct(s.pass_hat_k),
            s.mean_steps,
            s.mean_tool_calls,
            s.policy_denials,
            s.invalid_actions,
            secs(s.wall_p50_ms),
            secs(s.wall_p95_ms),
            s.input_tokens,
            s.output_tokens,
            s.cost_usd.map_or("–".into(), |c| format!("${c:.4}")),
        );
    }
    let _ = writeln!(
        o,
        "\nPass rate counts every planned cell; infrastructure errors (timeouts, provider errors, harness errors) count as not passed and lower coverage instead of disappearing. pass@k and pass^k use k = epochs.\n"
    );

    if !report.comparisons.is_empty() {
        let _ = writeln!(o, "## Comparisons (paired bootstrap over shared cases)\n");
        let _ = writeln!(o, "| A | B | cases | mean(A − B) | 95% CI | verdict |");
        let _ = writeln!(o, "|---|---|---:|---:|---|---|");
        for c in &report.comparisons {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {:+.3} | {:+.3} … {:+.3} | {} |",
                escape(&c.a),
                escape(&c.b),
                c.cases,
                c.mean_diff,
                c.ci.0,
                c.ci.1,
                escape(&c.verdict)
            );
        }
        let _ = writeln!(o);
    }

    let _ = writeln!(o, "## By category\n");
    let _ = writeln!(o, "| profile | category | cells | pass rate | coverage | infra errors |");
    let _ = writeln!(o, "|---|---|---:|---:|---:|---|");
    for s in &report.category_stats {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} |",
            escape(&s.profile),
            s.category.as_deref().unwrap_or(""),
            s.cells,
            pct(s.pass_rate),
            pct(s.coverage),
            infra(s)
        );
    }

    let _ = writeln!(o, "\n## Cells that did not pass ({})\n", report.failing.len());
    if report.failing.is_empty() {
        let _ = writeln!(o, "None.");
    } else {
        let _ = writeln!(o, "| cell | class | reason |");
        let _ = writeln!(o, "|---|---|---|");
        for f in &report.failing {
            let _ = writeln!(
                o,
                "| `{}` | {} | {} |",
                f.cell_id,
                f.outcome,
                escape(crate::util::truncate_str(&f.reason, 300))
            );
        }
    }
    if !report.notes.is_empty() {
        let _ = writeln!(o, "\n## Notes\n");
        for n in &report.notes {
            let _ = writeln!(o, "- {}", escape(n));
        }
    }
    o
}

impl Exporter for Markdown {
    fn file_name(&self) -> &'static str {
        "report.md"
    }

    fn render(&self, report: &MatrixReport) -> Result<Vec<u8>, ExportError> {
        Ok(render(report).into_bytes())
    }
}
