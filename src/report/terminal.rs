//! The terminal summary that `run`, `replay`, `matrix`, `ablate` and `report` print: tables
//! (comfy-table) and lines, laid out for the width of the terminal.
//!
//! A summary is read in whatever terminal the user has, often 80 columns, and a table wider
//! than that wraps into an unreadable block. So every table here is built from [`Column`]s
//! ranked by importance: at a [`Width`] of N columns the least important are left out until the
//! table fits (a free-text column such as a reason is wrapped instead, down to a floor), a line
//! names what was left out, and every text line is wrapped at words. `--wide` ([`Width::Wide`])
//! prints every column and leaves lines whole; report.html and report.json always carry
//! everything.

use comfy_table::{CellAlignment, ColumnConstraint, ContentArrangement, Table, presets};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

use super::exit_policy::Judgement;
use super::model::MatrixReport;
use super::{comparisons_sentence, diff_range, pass_k_headers, pct, secs};
use crate::aggregate::{GroupStats, mde_words};
use crate::replay::CellSummary;

/// How wide the terminal summary may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Width {
    /// At most this many columns per line.
    Columns(usize),
    /// Every column, lines left whole (`--wide`).
    Wide,
}

/// The width when COLUMNS is not set and stdout is not a terminal (a pipe, a CI log): the
/// classic terminal, which a log viewer shows without scrolling.
pub const DEFAULT_COLUMNS: usize = 80;
/// The narrowest width honoured: below it no table is readable whatever is left out.
const MIN_COLUMNS: usize = 40;

impl Width {
    /// `--wide`; else the COLUMNS variable (`columns_var`, read by the settings layer) when it
    /// holds a number (as `ls` does, so a user or a test can ask for a width); else the
    /// terminal's width when stdout is a terminal; else 80.
    pub fn detect(wide: bool, columns_var: Option<&str>) -> Width {
        if wide {
            return Width::Wide;
        }
        let columns = columns_var.and_then(|v| v.trim().parse::<usize>().ok()).filter(|c| *c > 0);
        // comfy-table asks the terminal for its size, and only when stdout is a terminal.
        let terminal = || Table::new().width().map(usize::from);
        Width::Columns(columns.or_else(terminal).unwrap_or(DEFAULT_COLUMNS).max(MIN_COLUMNS))
    }
}

/// `text` as lines of at most `width` columns, broken at spaces; continuation lines start with
/// `indent`. A word longer than a whole line (a long path) is broken where it must be, since a
/// line that overflows would be wrapped by the terminal anyway, only less readably. Each line
/// of a multi-line `text` is wrapped on its own. With [`Width::Wide`], the lines of `text` as
/// they are.
pub(crate) fn wrap(text: &str, width: Width, indent: &str) -> Vec<String> {
    let Width::Columns(max) = width else { return text.lines().map(str::to_string).collect() };
    let mut lines = Vec::new();
    for paragraph in text.lines() {
        // The paragraph's own leading spaces stay on its first line.
        let lead = &paragraph[..paragraph.len() - paragraph.trim_start_matches(' ').len()];
        let (mut line, mut base) = (lead.to_string(), lead.len());
        for word in paragraph.split(' ').filter(|w| !w.is_empty()) {
            if line.len() > base && line.width() + 1 + word.width() > max {
                lines.push(std::mem::replace(&mut line, indent.to_string()));
                base = indent.len();
            }
            if line.len() > base {
                line.push(' ');
            }
            for c in word.chars() {
                if line.len() > base && line.width() + c.width().unwrap_or(0) > max {
                    lines.push(std::mem::replace(&mut line, indent.to_string()));
                    base = indent.len();
                }
                line.push(c);
            }
        }
        lines.push(line);
    }
    lines
}

/// One column of a terminal table, before the layout decides whether it is shown.
struct Column {
    header: String,
    cells: Vec<String>,
    /// Importance: 0 is always shown; the highest rank is left out first (the rightmost of
    /// equal ranks).
    rank: u8,
    right: bool,
    /// For free text: the narrowest it may be wrapped to instead of being left out.
    wrap_to: Option<usize>,
}

impl Column {
    fn new(header: impl Into<String>, rank: u8, cells: Vec<String>) -> Column {
        Column { header: header.into(), cells, rank, right: false, wrap_to: None }
    }

    fn right(mut self) -> Column {
        self.right = true;
        self
    }

    fn wrap_to(mut self, columns: usize) -> Column {
        self.wrap_to = Some(columns);
        self
    }

    /// The widest line of its header and cells.
    fn natural(&self) -> usize {
        std::iter::once(&self.header).chain(&self.cells).flat_map(|c| c.lines()).map(|l| l.width()).max().unwrap_or(0)
    }

    /// The fewest columns its text needs.
    fn least(&self) -> usize {
        let natural = self.natural();
        self.wrap_to.map_or(natural, |w| natural.min(w.max(self.header.width())))
    }
}

/// A table laid out for a width, and the headers of the columns it left out.
pub struct Fitted {
    pub table: Table,
    pub left_out: Vec<String>,
}

impl Fitted {
    /// The table's lines, then (when columns were left out) a line naming them.
    pub fn lines(&self, width: Width) -> Vec<String> {
        let mut lines: Vec<String> = self.table.to_string().lines().map(str::to_string).collect();
        if !self.left_out.is_empty() {
            // A column's name stays on one line: its spaces do not break until wrapped.
            let names: Vec<String> = self.left_out.iter().map(|h| h.replace(' ', "\u{a0}")).collect();
            let note = format!("`--wide` adds: {}", names.join(", "));
            lines.extend(wrap(&note, width, "  ").into_iter().map(|l| l.replace('\u{a0}', " ")));
        }
        lines
    }
}

/// Lays `columns` (in display order) out for `width`: the least important are left out until
/// the rest fits, and free-text columns wrap into the room that is left. With
/// [`Width::Wide`], every column at its natural width.
fn fit(columns: Vec<Column>, width: Width) -> Fitted {
    let mut shown = vec![true; columns.len()];
    let mut fits = true;
    if let Width::Columns(max) = width {
        // UTF8_FULL_CONDENSED draws a border before each column and after the last, and pads
        // each column with a space on either side.
        let total = |shown: &[bool]| {
            1 + columns.iter().zip(shown).filter(|(_, s)| **s).map(|(c, _)| c.least() + 3).sum::<usize>()
        };
        while total(&shown) > max {
            let least_important =
                (0..columns.len()).filter(|i| shown[*i] && columns[*i].rank > 0).max_by_key(|i| (columns[*i].rank, *i));
            match least_important {
                Some(i) => shown[i] = false,
                None => {
                    fits = false;
                    break;
                }
            }
        }
    }
    let left_out = columns.iter().zip(&shown).filter(|(_, s)| !**s).map(|(c, _)| c.header.clone()).collect();
    let kept: Vec<&Column> = columns.iter().zip(&shown).filter(|(_, s)| **s).map(|(c, _)| c).collect();
    let mut t = Table::new();
    t.load_preset(presets::UTF8_FULL_CONDENSED);
    t.set_header(kept.iter().map(|c| c.header.as_str()));
    let rows = kept.first().map_or(0, |c| c.cells.len());
    for r in 0..rows {
        t.add_row(kept.iter().map(|c| c.cells[r].as_str()));
    }
    // The room a single free-text column may take: what the other columns leave.
    let room = match width {
        Width::Columns(max) if kept.iter().filter(|c| c.wrap_to.is_some()).count() == 1 => {
            let others: usize = kept.iter().filter(|c| c.wrap_to.is_none()).map(|c| c.natural() + 3).sum();
            Some(max.saturating_sub(others + 1))
        }
        _ => None,
    };
    for (i, c) in kept.iter().enumerate() {
        if let Some(column) = t.column_mut(i) {
            if c.right {
                column.set_cell_alignment(CellAlignment::Right);
            }
            // Only free text wraps, into the room the others leave; numbers and names keep
            // their width. When even the essential columns do not fit, comfy-table wraps
            // whatever it must.
            if fits && width != Width::Wide {
                let constraint = match (c.wrap_to, room) {
                    (None, _) => ColumnConstraint::ContentWidth,
                    (Some(_), Some(room)) => {
                        // The room counts the border after the column, not its padding.
                        let text = c.natural().min(room.saturating_sub(3)).max(c.least());
                        ColumnConstraint::Absolute(comfy_table::Width::Fixed(
                            u16::try_from(text + 2).unwrap_or(u16::MAX),
                        ))
                    }
                    (Some(_), None) => continue,
                };
                column.set_constraint(constraint);
            }
        }
    }
    if let Width::Columns(max) = width {
        t.set_width(u16::try_from(max).unwrap_or(u16::MAX));
        t.set_content_arrangement(ContentArrangement::Dynamic);
    }
    Fitted { table: t, left_out }
}

/// One row per cell (`run`, `replay`): case, outcome and reason first.
pub fn cell_table(summaries: &[CellSummary], width: Width) -> Fitted {
    let col = |f: fn(&CellSummary) -> String| summaries.iter().map(f).collect::<Vec<_>>();
    fit(
        vec![
            Column::new("case", 0, col(|s| s.case_id.to_string())),
            Column::new("profile", 3, col(|s| s.group().into_owned())),
            Column::new("outcome", 0, col(|s| s.outcome_label().to_string())),
            Column::new("reward", 7, col(|s| format!("{:.1}", s.reward))).right(),
            Column::new("steps", 4, col(|s| format!("{}/{}", s.steps, s.step_budget))).right(),
            Column::new("tool calls", 6, col(|s| s.tool_calls.to_string())).right(),
            Column::new("denials", 8, col(|s| s.policy_denials.to_string())).right(),
            Column::new("wall", 5, col(|s| secs(s.wall_ms))).right(),
            Column::new("reason", 1, col(|s| crate::util::cut_words(&s.reason, 60).into_owned())).wrap_to(24),
        ],
        width,
    )
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

/// `run` and `replay`: the cell table and the totals.
pub fn cell_lines(summaries: &[CellSummary], width: Width) -> Vec<String> {
    let mut lines = cell_table(summaries, width).lines(width);
    lines.extend(wrap(&totals_line(summaries), width, "  "));
    lines
}

/// One row per profile, most important columns first: profile, pass rate, 95% CI, coverage,
/// passed, failed, infra; then pass@k and pass^k (with several epochs), wall p50, steps,
/// tokens, denials, wall p95.
pub fn profile_table(stats: &[GroupStats], width: Width) -> Fitted {
    let col = |f: &dyn Fn(&GroupStats) -> String| stats.iter().map(f).collect::<Vec<_>>();
    // One method for every row (the usual case) goes in the header, which keeps the column
    // narrow enough for 80 columns; mixed methods stay in each cell.
    let method = stats.first().map(|s| s.pass_rate_ci.method);
    let one_method = method.filter(|m| stats.iter().all(|s| s.pass_rate_ci.method == *m));
    let (ci_header, ci): (String, Vec<String>) = match one_method {
        Some(m) => (format!("95% CI ({m})"), col(&|s| interval(s, false))),
        None => ("95% CI".into(), col(&|s| interval(s, true))),
    };
    let mut columns = vec![
        Column::new("profile", 0, col(&|s| s.profile.clone())),
        Column::new("pass rate", 0, col(&|s| pct(s.pass_rate))).right(),
        Column::new(ci_header, 1, ci),
        Column::new("coverage", 2, col(&|s| pct(s.coverage))).right(),
        Column::new("passed", 3, col(&|s| s.passed.to_string())).right(),
        Column::new("failed", 3, col(&|s| s.failed.to_string())).right(),
        Column::new("infra", 3, col(&|s| (s.cells - s.passed - s.failed).to_string())).right(),
    ];
    // With one epoch pass@1 and pass^1 repeat the pass rate: no columns for them.
    if let Some((at_k, hat_k)) = pass_k_headers(stats) {
        columns.push(Column::new(at_k, 4, col(&|s| pct(s.pass_at_k))).right());
        columns.push(Column::new(hat_k, 5, col(&|s| pct(s.pass_hat_k))).right());
    }
    columns.extend([
        Column::new("steps", 7, col(&|s| format!("{:.1}", s.mean_steps))).right(),
        Column::new("denials", 9, col(&|s| s.policy_denials.to_string())).right(),
        Column::new("wall p50", 6, col(&|s| secs(s.wall_p50_ms))).right(),
        Column::new("wall p95", 10, col(&|s| secs(s.wall_p95_ms))).right(),
        Column::new("tokens", 8, col(&|s| format!("{}/{}", s.input_tokens, s.output_tokens))).right(),
    ]);
    fit(columns, width)
}

/// `43.9–100.0%`, with ` (Wilson)` when asked.
fn interval(s: &GroupStats, method: bool) -> String {
    let r = &s.pass_rate_ci;
    let range = format!("{:.1}–{:.1}%", r.lo * 100.0, r.hi * 100.0);
    if method { format!("{range} ({})", r.method) } else { range }
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
/// its title; nothing for other commands. At a narrow width each keeps its leading columns
/// (the effects table its verdict, wrapped); the per-category tables are in report.md and
/// report.html, where width is not a problem.
pub fn ablation_lines(report: &MatrixReport, width: Width) -> Vec<String> {
    let Some(a) = &report.ablation else { return Vec::new() };
    let mut lines = Vec::new();
    for view in super::ablation::terminal_tables(a) {
        lines.push(format!("{}:", view.title));
        let columns = view
            .headers
            .iter()
            .enumerate()
            .map(|(i, header)| {
                let cells = view.rows.iter().map(|row| row.get(i).cloned().unwrap_or_default()).collect();
                let column = if *header == "verdict" {
                    Column::new(*header, 1, cells).wrap_to(24)
                } else {
                    Column::new(*header, u8::try_from(i).unwrap_or(u8::MAX), cells)
                };
                if view.numeric.get(i).copied().unwrap_or(false) { column.right() } else { column }
            })
            .collect();
        lines.extend(fit(columns, width).lines(width));
    }
    lines
}

/// The incomplete-run banner, for the top of a terminal summary (nothing for a complete run).
pub fn banner_lines(report: &MatrixReport, width: Width) -> Vec<String> {
    let banners = report.banner.iter().map(String::as_str).chain(report.isolation_warning()).map(|b| format!("!! {b}"));
    banners
        .chain(report.not_run_lines().into_iter().map(|n| format!("-- {n}")))
        .flat_map(|b| wrap(&b, width, "   "))
        .collect()
}

/// `verdict: exit N ...` and one indented line per check that did not hold.
pub fn verdict_lines(verdict: &Judgement, width: Width) -> Vec<String> {
    let mut lines = wrap(&format!("verdict: {}", verdict.headline()), width, "  ");
    for f in &verdict.findings {
        lines.extend(wrap(&format!("  - {}", f.message), width, "    "));
    }
    lines
}

/// The whole summary of `matrix`, `ablate` and `report`: banner, profile table, ablation
/// tables, comparisons and power, totals, verdict.
pub fn summary_lines(report: &MatrixReport, width: Width) -> Vec<String> {
    let mut lines = banner_lines(report, width);
    lines.extend(profile_table(&report.profile_stats, width).lines(width));
    lines.extend(ablation_lines(report, width));
    for line in comparison_lines(report) {
        lines.extend(wrap(&line, width, "  "));
    }
    lines.extend(wrap(&totals_line(&report.cells), width, "  "));
    lines.extend(verdict_lines(&report.verdict, width));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn widest(lines: &[String]) -> usize {
        lines.iter().map(|l| l.width()).max().unwrap_or(0)
    }

    #[test]
    fn wrap_breaks_at_words_and_indents() {
        let text = "oracle vs nop: 3 shared case(s) (3 won, 0 lost, 0 tied), mean diff +1.000, within noise";
        let lines = wrap(text, Width::Columns(40), "  ");
        assert!(widest(&lines) <= 40, "{lines:?}");
        assert_eq!(lines[0], "oracle vs nop: 3 shared case(s) (3 won,");
        assert!(lines[1..].iter().all(|l| l.starts_with("  ") && !l.starts_with("   ")), "{lines:?}");
        assert_eq!(lines.join(" ").split_whitespace().collect::<Vec<_>>().join(" "), text, "no word is lost");
        assert_eq!(wrap(text, Width::Wide, "  "), [text]);
    }

    #[test]
    fn wrap_breaks_a_word_longer_than_a_line() {
        let path = format!("/tmp/{}/run", "x".repeat(90));
        let lines = wrap(&format!("finish with `hcbench matrix --resume {path}`"), Width::Columns(40), "  ");
        assert!(widest(&lines) <= 40, "{lines:?}");
        assert!(lines.concat().contains(&path[..30]));
    }

    #[test]
    fn fit_leaves_out_the_least_important_columns_first() {
        let long = |n: usize| vec!["x".repeat(n)];
        let columns = || {
            vec![
                Column::new("a", 0, long(10)),
                Column::new("b", 2, long(20)),
                Column::new("c", 1, long(20)),
                Column::new("d", 3, long(20)),
            ]
        };
        let all = fit(columns(), Width::Wide);
        assert!(all.left_out.is_empty());
        let narrow = fit(columns(), Width::Columns(60));
        assert_eq!(narrow.left_out, ["d"], "the highest rank goes first");
        assert!(widest(&narrow.lines(Width::Columns(60))) <= 60);
        let narrower = fit(columns(), Width::Columns(40));
        assert_eq!(narrower.left_out, ["b", "d"]);
        assert!(narrower.table.to_string().contains(" c "), "rank 1 stays while it fits");
    }

    #[test]
    fn free_text_wraps_instead_of_being_left_out() {
        let reason = "the tests failed: assertion error in test_parse (expected 3, got 4) after two edits";
        let columns = vec![
            Column::new("case", 0, vec!["bugfix-1".into()]),
            Column::new("reason", 1, vec![reason.into()]).wrap_to(24),
            Column::new("tool calls", 6, vec!["12".into()]),
        ];
        let fitted = fit(columns, Width::Columns(50));
        let lines = fitted.lines(Width::Columns(50));
        assert!(widest(&lines) <= 50, "{lines:#?}");
        assert_eq!(fitted.left_out, ["tool calls"]);
        let text = fitted.table.to_string();
        for word in reason.split(' ') {
            assert!(text.contains(word), "{word} is in the wrapped reason:\n{text}");
        }
    }
}
