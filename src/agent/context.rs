//! The context pipeline: what the model sees on one turn, projected from the cell's state.
//!
//! The trace holds the full history; the model sees a projection built by an ordered list of
//! sections, each with a character budget: system, task contract, tools, working memory,
//! recent observations, then a one-line status with the step counter (last, so the prefix
//! stays stable for prompt caches). The task contract is never cut. Old observations are dropped first,
//! and every reduction is reported so the loop can record it in `context_packed`.

use super::spec::AgentSpec;
use crate::bench::Case;
use crate::trace::event::ContextSection;

/// One tool result the model has seen, kept for the observations section.
#[derive(Debug, Clone)]
pub struct Observation {
    pub step: u32,
    pub tool: String,
    pub text: String,
}

/// The state the projection is built from.
pub struct ContextState<'a> {
    pub case: &'a Case,
    pub spec: &'a AgentSpec,
    /// Top-level definitions of the workspace, when the spec asks for a repo map.
    pub repo_map: Option<&'a str>,
    pub step: u32,
    pub files_modified: &'a [String],
    pub observations: &'a [Observation],
}

/// Packs the context; returns the sections' texts and what the budgets did.
pub fn pack(state: &ContextState<'_>) -> (Vec<(String, String)>, Vec<ContextSection>) {
    let case = state.case;
    let spec = state.spec;
    let budgets = &spec.budgets;
    let mut texts = Vec::new();
    let mut report = Vec::new();
    let mut push = |name: &str, text: String, budget: usize, cut: usize, dropped: usize| {
        report.push(ContextSection { name: name.to_string(), chars: text.chars().count(), budget, cut, dropped });
        texts.push((name.to_string(), text));
    };

    let system_text = format!("{}\n\n{}", spec.system_prompt.trim_end(), spec.action_format.trim_end());
    let (system, cut) = clip(&system_text, budgets.system);
    push("system", system, budgets.system, cut, 0);

    // The task contract is never cut: without it the model cannot know what "done" means.
    // It holds nothing that changes between turns, so the context's prefix stays stable and
    // providers' prompt caches can reuse it; the step counter comes last (`status`).
    let contract = format!(
        "Task ({}):\n{}\nTest command: {}\nStep budget: {} actions.",
        case.id,
        case.prompt.trim_end(),
        case.test_command.join(" "),
        case.step_budget
    );
    let contract_len = contract.chars().count();
    push("task", contract, contract_len, 0, 0);

    let tools: String = case.allowed_tools.iter().map(|t| format!("- {}\n", spec.describe(*t))).collect();
    let (tools, cut) = clip(&tools, budgets.tools);
    push("tools", tools, budgets.tools, cut, 0);

    if spec.memory || state.repo_map.is_some() {
        let mut memory = String::new();
        if spec.memory {
            memory = if state.files_modified.is_empty() {
                "Files modified so far: none.".to_string()
            } else {
                format!("Files modified so far: {}.", state.files_modified.join(", "))
            };
        }
        if let Some(map) = state.repo_map {
            memory.push_str("\nRepository map:\n");
            memory.push_str(map);
        }
        let (memory, cut) = clip(&memory, budgets.memory);
        push("memory", memory, budgets.memory, cut, 0);
    }

    // Newest first until the budget is spent; older observations are dropped whole.
    let mut kept: Vec<String> = Vec::new();
    let mut used = 0;
    let mut dropped = 0;
    let mut cut = 0;
    for obs in state.observations.iter().rev() {
        let block = format!("[step {}] {} ->\n{}\n", obs.step, obs.tool, obs.text);
        let len = block.chars().count();
        if used + len <= budgets.observations {
            used += len;
            kept.push(block);
        } else if kept.is_empty() {
            let (clipped, c) = clip(&block, budgets.observations);
            used += clipped.chars().count();
            cut += c;
            kept.push(clipped);
        } else {
            dropped += 1;
        }
    }
    kept.reverse();
    push("observations", kept.concat(), budgets.observations, cut, dropped);
    let status = format!("Step {} of {}: reply with your next action.", state.step, case.step_budget);
    let status_len = status.chars().count();
    push("status", status, status_len, 0, 0);
    (texts, report)
}

fn clip(text: &str, budget: usize) -> (String, usize) {
    let n = text.chars().count();
    if n <= budget { (text.to_string(), 0) } else { (text.chars().take(budget).collect(), n - budget) }
}
