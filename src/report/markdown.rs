//! `report.md`: GitHub-flavoured Markdown that fits a PR comment or a CI job summary.
//!
//! A PR comment holds at most 65,536 characters, and a run may have 10,000 cells, so this
//! report is the short one: a summary table of the decisive columns (the rest are in
//! report.html and report.json), and a list of the cells that did not pass whose first
//! [`LISTED`] rows are open, the next [`FOLDED`] folded in `<details>`, and the remainder
//! counted with a pointer to the files that list them. Reasons are cut at whole words. The
//! list is written last against a budget, so the whole file stays under [`MAX_CHARS`] whatever
//! the reasons hold (measured in docs/formats.md).

use std::fmt::Write as _;

use super::model::{FailingCell, MatrixReport};
use super::{ExportError, Exporter, comparisons_sentence, diff_range, pass_k_headers, pct, pct_range};
use crate::aggregate::{GroupStats, mde_words, p_text};
use crate::util::cut_words;

pub struct Markdown;

/// The most characters report.md may hold: under GitHub's 65,536 for a comment, with room for
/// a line or two a CI job adds around it.
pub const MAX_CHARS: usize = 60_000;
/// Cells that did not pass listed in the open table.
pub const LISTED: usize = 50;
/// Further cells listed in the folded `<details>` table; the rest are counted.
pub const FOLDED: usize = 150;
/// Reasons are cut (at a word) to this many bytes in the open table, and the notes too...
const REASON_LISTED: usize = 240;
/// ... and to this many in the folded table.
const REASON_FOLDED: usize = 100;
/// The most frequent (class, reason) pairs shown for a long list.
const COMMON_REASONS: usize = 10;
/// Notes shown; report.json has them all.
const NOTES: usize = 20;
/// Room kept for what follows the last row: the closing of `<details>` and the count line.
const CLOSING: usize = 1_000;

/// Text for a table cell or a line: no pipe ends a cell, no newline ends a row, and no `<`
/// opens a tag (a reason holding `</details>` would close the fold early).
fn escape(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ").replace('<', "&lt;")
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
    summary(&mut o, report);
    let _ = writeln!(o, "**Power:** {}.\n", report.power.sentence());
    if let Some(line) = delegations_line(&report.cells) {
        let _ = writeln!(o, "{line}\n");
    }

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

    super::sessions::markdown(&mut o, report);
    breakdown(&mut o, "By category", "category", &report.category_stats, |s| s.category.as_deref());
    if !report.split_breakdown().is_empty() {
        let _ = writeln!(o);
        breakdown(&mut o, "By split", "split", report.split_breakdown(), |s| s.split.as_deref());
    }

    // The notes go last but are written first, so the list of cells that did not pass knows
    // how much room is left under MAX_CHARS.
    let mut notes = String::new();
    if !report.notes.is_empty() {
        let _ = writeln!(notes, "\n## Notes\n");
        for n in report.notes.iter().take(NOTES) {
            let _ = writeln!(notes, "- {}", escape(&crate::util::cut_words(n, REASON_LISTED)));
        }
        if report.notes.len() > NOTES {
            let _ = writeln!(notes, "- … and {} more note(s), in report.json", report.notes.len() - NOTES);
        }
    }
    let budget = MAX_CHARS.saturating_sub(notes.len() + CLOSING);
    not_passed(&mut o, report, budget);
    o.push_str(&notes);
    o
}

/// One line on the read-only delegations of the run, when there were any: how many, in how
/// many cells, and what they cost (already inside each profile's cost).
fn delegations_line(cells: &[crate::replay::CellSummary]) -> Option<String> {
    let with: Vec<_> = cells.iter().filter(|c| c.delegations > 0).collect();
    if with.is_empty() {
        return None;
    }
    let total: u32 = with.iter().map(|c| c.delegations).sum();
    let failed: u32 = with.iter().map(|c| c.delegations_failed).sum();
    let steps: u32 = with.iter().map(|c| c.delegation_steps).sum();
    let costs: Vec<f64> = with.iter().filter_map(|c| c.delegation_cost_usd()).collect();
    let cost = if costs.is_empty() {
        String::new()
    } else {
        format!(", costing ${:.4} (inside the cost above)", costs.iter().sum::<f64>())
    };
    Some(format!(
        "Read-only delegations: {total} in {} cell(s), {failed} without an answer, {steps} step(s){cost}; per cell in report.html, report.json and cells.csv.",
        with.len()
    ))
}

/// The summary table: the decisive columns only (steps, tool calls, denials, invalid actions,
/// wall times and tokens per profile are in report.html and report.json), pass@k and pass^k
/// only with several epochs, cost only when a profile states prices.
fn summary(o: &mut String, report: &MatrixReport) {
    let stats = &report.profile_stats;
    let pass_k = pass_k_headers(stats);
    let cost = stats.iter().any(|s| s.cost_usd.is_some());
    let mut header = vec!["profile", "pass rate", "95% CI", "coverage", "passed", "failed", "infra errors"];
    let mut rule = vec!["---", "---:", "---", "---:", "---:", "---:", "---"];
    if let Some((at_k, hat_k)) = &pass_k {
        header.extend([at_k.as_str(), hat_k.as_str()]);
        rule.extend(["---:", "---:"]);
    }
    if cost {
        header.push("cost");
        rule.push("---:");
    }
    let _ = writeln!(o, "| {} |", header.join(" | "));
    let _ = writeln!(o, "|{}|", rule.join("|"));
    for s in stats {
        let mut row = vec![
            escape(&s.profile),
            pct(s.pass_rate),
            pct_range(&s.pass_rate_ci),
            pct(s.coverage),
            s.passed.to_string(),
            s.failed.to_string(),
            infra(s),
        ];
        if pass_k.is_some() {
            row.extend([pct(s.pass_at_k), pct(s.pass_hat_k)]);
        }
        if cost {
            row.push(s.cost_usd.map_or("–".into(), |c| format!("${c:.4}")));
        }
        let _ = writeln!(o, "| {} |", row.join(" | "));
    }
    let pass_k_sentence = match &pass_k {
        Some((at_k, hat_k)) => format!(
            " {at_k} is the chance that at least one of k attempts at a case passes, {hat_k} that all k do (k = epochs)."
        ),
        None => String::new(),
    };
    let _ = writeln!(
        o,
        "\nPass rate counts every planned cell; infrastructure errors (timeouts, provider errors, harness errors) count as not passed and lower coverage instead of disappearing. The 95% interval is over the same cells, clustered by case: Wilson with one epoch, the case-clustered standard error with several (docs/statistics.md).{pass_k_sentence} Steps, tool calls, denials, wall times and tokens per profile are in report.html and report.json.\n"
    );
}

/// The order the list of cells that did not pass is read in: the agent's failures first (what
/// a change to the agent is about), then each infrastructure class, then cells without a
/// verdict; within a class by profile, in plan order.
fn class_rank(outcome: &str) -> u8 {
    match outcome {
        "failed" => 0,
        "incomplete" | "cancelled" => 2,
        _ => 1,
    }
}

/// `## Cells that did not pass (N)`: the counts by class, the reasons several cells share when
/// the list is long, the first [`LISTED`] cells, the next [`FOLDED`] in `<details>`, and a count of
/// the rest. Rows stop early when `o` would grow past `budget` bytes (a bound on characters),
/// so every cell is either listed or counted.
fn not_passed(o: &mut String, report: &MatrixReport, budget: usize) {
    let failing = &report.failing;
    let _ = writeln!(o, "\n## Cells that did not pass ({})\n", failing.len());
    if failing.is_empty() {
        let _ = writeln!(o, "None.");
        return;
    }
    let profile_rank = |p: &str| report.profiles.iter().position(|x| x == p).unwrap_or(usize::MAX);
    let mut order: Vec<&FailingCell> = failing.iter().collect();
    order.sort_by(|a, b| {
        (class_rank(&a.outcome), &a.outcome, profile_rank(&a.profile)).cmp(&(
            class_rank(&b.outcome),
            &b.outcome,
            profile_rank(&b.profile),
        ))
    });
    let mut classes: Vec<(&str, usize)> = Vec::new();
    for f in &order {
        match classes.last_mut() {
            Some((class, n)) if *class == f.outcome => *n += 1,
            _ => classes.push((&f.outcome, 1)),
        }
    }
    let by_class: Vec<String> = classes.iter().map(|(c, n)| format!("{n} {c}")).collect();
    let _ = writeln!(o, "By class: {}.\n", by_class.join(", "));
    if failing.len() > LISTED {
        common_reasons(o, &order);
    }
    let row = |f: &FailingCell, reason_max: usize| {
        format!("| `{}` | {} | {} |\n", f.cell_id, f.outcome, escape(&cut_words(&f.reason, reason_max)))
    };
    let header = "| cell | class | reason |\n|---|---|---|\n";
    o.push_str(header);
    let mut listed = 0;
    for f in order.iter().take(LISTED) {
        let line = row(f, REASON_LISTED);
        if o.len() + line.len() > budget {
            break;
        }
        o.push_str(&line);
        listed += 1;
    }
    if listed == LISTED && order.len() > LISTED {
        let folded_total = order.len() - LISTED;
        let _ = writeln!(
            o,
            "\n<details><summary>{folded_total} more cell(s) that did not pass</summary>\n\n{header}",
            header = header.trim_end()
        );
        for f in order.iter().skip(LISTED).take(FOLDED) {
            let line = row(f, REASON_FOLDED);
            if o.len() + line.len() > budget {
                break;
            }
            o.push_str(&line);
            listed += 1;
        }
        let _ = writeln!(o, "\n</details>");
    }
    let rest = order.len() - listed;
    if rest > 0 {
        let _ = writeln!(
            o,
            "\n{rest} more cell(s) that did not pass are not listed here, to keep this report within a PR comment: report.html lists every cell (filter by outcome), and so do report.json, cells.csv and the run directory's results.jsonl."
        );
    }
}

/// The [`COMMON_REASONS`] most frequent (class, reason) pairs that more than one cell gave,
/// with how many cells gave each: a provider outage or a broken fixture shows as one row, not
/// as thousands. Nothing when every reason is its own.
fn common_reasons(o: &mut String, order: &[&FailingCell]) {
    let mut counts: Vec<((&str, &str), usize)> = Vec::new();
    let mut index: std::collections::HashMap<(&str, &str), usize> = Default::default();
    for f in order {
        let key = (f.outcome.as_str(), f.reason.as_str());
        match index.get(&key) {
            Some(i) => counts[*i].1 += 1,
            None => {
                index.insert(key, counts.len());
                counts.push((key, 1));
            }
        }
    }
    counts.retain(|(_, n)| *n > 1);
    if counts.is_empty() {
        return;
    }
    // Most cells first; among equals, the order of the list below.
    counts.sort_by_key(|c| std::cmp::Reverse(c.1));
    let _ = writeln!(o, "Reasons given by more than one cell:\n");
    let _ = writeln!(o, "| cells | class | reason |\n|---:|---|---|");
    for ((class, reason), n) in counts.iter().take(COMMON_REASONS) {
        let _ = writeln!(o, "| {n} | {class} | {} |", escape(&cut_words(reason, REASON_LISTED)));
    }
    if counts.len() > COMMON_REASONS {
        let _ = writeln!(o, "\n… and {} more reason(s) given by more than one cell.", counts.len() - COMMON_REASONS);
    }
    let _ = writeln!(o);
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

    /// The Markdown is bounded (under 60,000 characters at any size), so it is built whole.
    fn write(&self, report: &MatrixReport, out: &mut dyn std::io::Write) -> Result<(), ExportError> {
        out.write_all(render(report).as_bytes())?;
        Ok(())
    }
}
