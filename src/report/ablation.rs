//! The ablate run's sections (`hcbench ablate --context`) as plain tables of text, which the
//! terminal, Markdown and HTML exporters print each in their own syntax.
//!
//! Formatting lives here once, so the three formats cannot disagree on a number, a rounding
//! or a denominator: every exporter only lays out the [`TableView`]s this module returns. A
//! report without [`AblationReport`] (every command but `ablate`) gets no tables at all, which
//! keeps matrix and run reports byte for byte what they were.

use serde::Serialize;

use super::{pct, pct_range};
use crate::aggregate::context::{AblationEffect, AblationReport, ContextStats, Mean, Share};
use crate::aggregate::p_text;

/// One table: a title, a sentence saying how to read it, headers and rows of text.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct TableView {
    /// Also the HTML anchor: `ablation-` + the slug of the title.
    pub id: &'static str,
    pub title: &'static str,
    pub note: &'static str,
    pub headers: Vec<&'static str>,
    /// Per column: right-aligned (numbers) or not.
    pub numeric: Vec<bool>,
    pub rows: Vec<Vec<String>>,
}

const BEHAVIOUR_NOTE: &str = "Per ablation over all its cells. Agent success: the agent called finish; budget out: it spent its step budget. Tool calls are a mean per cell; repeated reads, invalid calls, denials and tool failures are totals over the cells.";
const CONTEXT_NOTE: &str = "Context tokens per turn are estimated tokens of the packed context, pooled over every packed turn of the group (turns and cells in brackets). Budget reductions count sections a budget cut or dropped blocks from, dropped blocks the blocks dropped whole, both summed over turns. Repo map: injected into the context / asked for with the repo_map tool, and the cells that saw one. First target read: the mean step of the first read of the case's target file over the cells that read it, for cases that declare one. Cached input: input tokens the provider served from its prompt cache, where it reports them.";
const BY_CATEGORY_NOTE: &str = "The same columns per ablation and category.";
const FAILURES_NOTE: &str = "Cells that did not pass, by outcome class and by why the agent loop stopped.";
const EFFECTS_NOTE: &str = "Each ablation paired with full on the cases both measured (ablation − full, in points of pass rate); the interval and p-value are the comparison's, Holm-adjusted over the ablations. \"Within noise\" when the interval contains 0, or when there are too few cases for any difference to show.";

/// Every table of an ablate report, in the order reports show them.
pub(crate) fn tables(a: &AblationReport) -> Vec<TableView> {
    vec![
        behaviour(&a.context, false),
        context(&a.context, false),
        effects(&a.effects),
        failures(&a.context),
        behaviour(&a.context_by_category, true),
        context(&a.context_by_category, true),
    ]
}

/// The tables a terminal shows (per category is in the files).
pub(crate) fn terminal_tables(a: &AblationReport) -> Vec<TableView> {
    vec![behaviour(&a.context, false), context(&a.context, false), effects(&a.effects), failures(&a.context)]
}

/// The columns holding one number, right-aligned in every table that has them.
const COUNTS: [&str; 19] = [
    "cells",
    "pass rate",
    "agent success",
    "tests passed",
    "verifier passed",
    "budget out",
    "tool calls/cell",
    "repeated reads",
    "invalid calls",
    "denials",
    "tool failures",
    "budget reductions",
    "dropped blocks",
    "memory updates",
    "compactions",
    "policy retries",
    "not passed",
    "difference (points)",
    "p (Holm)",
];

/// The leading columns: the group, and the category in the per-category tables.
fn keys(s: &ContextStats, with_category: bool) -> Vec<String> {
    let mut k = vec![s.group.clone()];
    if with_category {
        k.push(s.category.clone().unwrap_or_default());
    }
    k
}

fn key_headers(with_category: bool) -> Vec<&'static str> {
    if with_category { vec!["ablation", "category"] } else { vec!["ablation"] }
}

/// `4/5`.
fn share(s: &Share) -> String {
    format!("{}/{}", s.count, s.of)
}

/// `6.0`, or `–` with nothing to average.
fn mean(m: &Mean) -> String {
    m.mean.map_or("–".into(), |v| format!("{v:.1}"))
}

fn behaviour(stats: &[ContextStats], with_category: bool) -> TableView {
    let mut headers = key_headers(with_category);
    headers.extend([
        "cells",
        "pass rate",
        "95% CI",
        "agent success",
        "tests passed",
        "verifier passed",
        "budget out",
        "tool calls/cell",
        "repeated reads",
        "invalid calls",
        "denials",
        "tool failures",
    ]);
    let rows = stats
        .iter()
        .map(|s| {
            let mut r = keys(s, with_category);
            r.extend([
                s.cells.to_string(),
                pct(s.pass_rate),
                pct_range(&s.pass_rate_ci),
                share(&s.agent_success),
                share(&s.test_success),
                share(&s.verifier_success),
                share(&s.step_budget_exhausted),
                mean(&s.tool_calls),
                s.repeated_reads.to_string(),
                s.invalid_actions.to_string(),
                s.policy_denials.to_string(),
                s.tool_failures.to_string(),
            ]);
            r
        })
        .collect();
    let (id, title) = if with_category {
        ("ablation-behaviour-by-category", "Outcomes and behaviour by category")
    } else {
        ("ablation-behaviour", "Outcomes and behaviour")
    };
    let note = if with_category { BY_CATEGORY_NOTE } else { BEHAVIOUR_NOTE };
    view(id, title, note, headers, rows, &COUNTS)
}

fn context(stats: &[ContextStats], with_category: bool) -> TableView {
    let mut headers = key_headers(with_category);
    headers.extend([
        "context tokens/turn",
        "budget reductions",
        "dropped blocks",
        "repo map (context/tool)",
        "first target read",
        "memory updates",
        "compactions",
        "policy retries",
        "cached input tokens",
    ]);
    let rows = stats
        .iter()
        .map(|s| {
            let t = &s.context_tokens_per_turn;
            let tokens = match t.mean {
                Some(m) => format!("{m:.0} ({} turns, {} cells)", t.turns, t.cells),
                None => "– (no turns)".into(),
            };
            let repo_map = format!("{}/{} ({} cells)", s.repo_map_injections, s.repo_map_tool_uses, s.repo_map_cells);
            let r = &s.first_target_read;
            let target = if r.declared == 0 {
                "– (no target)".into()
            } else {
                format!(
                    "step {} over {} cell(s), {} of {} never read it",
                    mean(&r.step),
                    r.step.over,
                    r.never_read,
                    r.declared
                )
            };
            let cached = if s.input_tokens == 0 {
                s.cached_input_tokens.to_string()
            } else {
                format!(
                    "{} of {} ({})",
                    s.cached_input_tokens,
                    s.input_tokens,
                    pct(s.cached_input_tokens as f64 / s.input_tokens as f64)
                )
            };
            let mut row = keys(s, with_category);
            row.extend([
                tokens,
                s.budget_reductions.to_string(),
                s.dropped_blocks.to_string(),
                repo_map,
                target,
                s.memory_updates.to_string(),
                s.compactions.to_string(),
                s.policy_retries.to_string(),
                cached,
            ]);
            row
        })
        .collect();
    let (id, title) = if with_category {
        ("ablation-context-by-category", "Context by category")
    } else {
        ("ablation-context", "Context")
    };
    let note = if with_category { BY_CATEGORY_NOTE } else { CONTEXT_NOTE };
    view(id, title, note, headers, rows, &COUNTS)
}

fn failures(stats: &[ContextStats]) -> TableView {
    let counts = |m: &std::collections::BTreeMap<String, usize>| {
        if m.is_empty() {
            "–".to_string()
        } else {
            m.iter().map(|(k, n)| format!("{n} {k}")).collect::<Vec<_>>().join(", ")
        }
    };
    let rows = stats
        .iter()
        .map(|s| {
            let not_passed: usize = s.failures.values().sum();
            vec![s.group.clone(), not_passed.to_string(), counts(&s.failures), counts(&s.failure_stop_reasons)]
        })
        .collect();
    let headers = vec!["ablation", "not passed", "outcome classes", "stop reasons"];
    view("ablation-failures", "Failure breakdown", FAILURES_NOTE, headers, rows, &COUNTS)
}

fn effects(effects: &[AblationEffect]) -> TableView {
    let rows = effects
        .iter()
        .map(|e| {
            vec![
                e.group.clone(),
                e.reference.clone(),
                format!("{} x {}", e.cases, e.epochs),
                format!("{:+.1}", e.diff * 100.0),
                // In points, like the difference beside it.
                format!("{:+.1} … {:+.1} ({})", e.ci.lo * 100.0, e.ci.hi * 100.0, e.ci.method),
                p_text(e.p_adjusted),
                e.verdict_text.clone(),
            ]
        })
        .collect();
    let headers =
        vec!["ablation", "against", "cases x epochs", "difference (points)", "95% CI (points)", "p (Holm)", "verdict"];
    view("ablation-effects", "Effect of each ablation against full", EFFECTS_NOTE, headers, rows, &COUNTS)
}

/// A table; the columns named in `numeric` are right-aligned.
fn view(
    id: &'static str,
    title: &'static str,
    note: &'static str,
    headers: Vec<&'static str>,
    rows: Vec<Vec<String>>,
    numeric: &[&str],
) -> TableView {
    let numeric = headers.iter().map(|h| numeric.contains(h)).collect();
    TableView { id, title, note, headers, numeric, rows }
}
