//! `report.md`: GitHub-flavoured Markdown that fits a PR comment or a CI job summary.

use std::fmt::Write as _;

use super::model::MatrixReport;
use super::{ExportError, Exporter, comparisons_sentence, diff_range, pct, pct_range, secs};
use crate::aggregate::{GroupStats, mde_words, p_text};

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
    for line in report.not_run_lines() {
        let _ = writeln!(o, "> {}\n", escape(&line));
    }
    if let Some(warning) = report.isolation_warning() {
        let _ = writeln!(o, "> **{}**\n", escape(warning));
    } else if let Some(sandbox) = &report.sandbox {
        let _ = writeln!(o, "Sandbox: {}\n", escape(&sandbox.label()));
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
            pct_range(&s.pass_rate_ci),
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
        "\nPass rate counts every planned cell; infrastructure errors (timeouts, provider errors, harness errors) count as not passed and lower coverage instead of disappearing. The 95% interval is over the same cells, clustered by case: Wilson with one epoch, the case-clustered standard error with several (docs/statistics.md). pass@k and pass^k use k = epochs.\n"
    );
    let _ = writeln!(o, "**Power:** {}.\n", report.power.sentence());

    if !report.comparisons.is_empty() {
        let _ = writeln!(o, "## Comparisons (paired, on the cases both profiles measured)\n");
        let _ = writeln!(
            o,
            "Infrastructure errors, cancelled and incomplete cells are missing data, not losses: a case either side did not measure is dropped. A difference is called only when p < 0.05."
        );
        if let Some(sentence) = comparisons_sentence(report) {
            let _ = writeln!(o, "{sentence}.");
        }
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "| A | B | cases | dropped | won/lost/tied | mean(A − B) | 95% CI | p | p (Holm) | verdict | MDE |"
        );
        let _ = writeln!(o, "|---|---|---:|---:|---|---:|---|---:|---:|---|---|");
        for c in &report.comparisons {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {}/{}/{} | {:+.3} | {} | {} | {} | {} | {} |",
                escape(&c.a),
                escape(&c.b),
                c.cases,
                c.dropped_cases,
                c.wins,
                c.losses,
                c.ties,
                c.mean_diff,
                diff_range(&c.ci),
                p_text(c.p_value),
                p_text(c.p_adjusted),
                escape(&c.verdict_text),
                mde_words(c.mde)
            );
        }
        let _ = writeln!(o);
    }

    if let Some(a) = &report.ablation {
        ablation(&mut o, a);
    }

    breakdown(&mut o, "By category", "category", &report.category_stats, |s| s.category.as_deref());
    if !report.split_breakdown().is_empty() {
        let _ = writeln!(o);
        breakdown(&mut o, "By split", "split", report.split_breakdown(), |s| s.split.as_deref());
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

/// An ablate run's section: each table of [`super::ablation::tables`] under its title.
fn ablation(o: &mut String, a: &crate::aggregate::context::AblationReport) {
    let _ = writeln!(o, "## Ablations\n");
    for view in super::ablation::tables(a) {
        let _ = writeln!(o, "### {}\n", view.title);
        let _ = writeln!(o, "{}\n", view.note);
        let _ = writeln!(o, "| {} |", view.headers.join(" | "));
        let rule: Vec<&str> = view.numeric.iter().map(|n| if *n { "---:" } else { "---" }).collect();
        let _ = writeln!(o, "|{}|", rule.join("|"));
        for row in &view.rows {
            let cells: Vec<String> = row.iter().map(|c| escape(c)).collect();
            let _ = writeln!(o, "| {} |", cells.join(" | "));
        }
        let _ = writeln!(o);
    }
}

/// A per-category or per-split table: the same columns and intervals as the summary.
fn breakdown(o: &mut String, title: &str, key: &str, stats: &[GroupStats], key_of: fn(&GroupStats) -> Option<&str>) {
    let _ = writeln!(o, "## {title}\n");
    let _ = writeln!(o, "| profile | {key} | cells | pass rate | 95% CI | coverage | infra errors |");
    let _ = writeln!(o, "|---|---|---:|---:|---|---:|---|");
    for s in stats {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} |",
            escape(&s.profile),
            escape(key_of(s).unwrap_or("")),
            s.cells,
            pct(s.pass_rate),
            pct_range(&s.pass_rate_ci),
            pct(s.coverage),
            infra(s)
        );
    }
}

impl Exporter for Markdown {
    fn file_name(&self) -> &'static str {
        "report.md"
    }

    fn render(&self, report: &MatrixReport) -> Result<Vec<u8>, ExportError> {
        Ok(render(report).into_bytes())
    }
}
