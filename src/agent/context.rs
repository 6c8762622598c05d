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
        report.push(ContextSection {
            name: name.to_string(),
            chars: text.chars().count(),
            budget,
            cut,
            dropped,
            ..Default::default()
        });
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::spec::Budgets;

    fn obs(step: u32, text: &str) -> Observation {
        Observation { step, tool: "read_file".into(), text: text.into() }
    }

    fn block(o: &Observation) -> String {
        format!("[step {}] {} ->\n{}\n", o.step, o.tool, o.text)
    }

    fn section(name: &str, chars: usize, budget: usize, cut: usize, dropped: usize) -> ContextSection {
        ContextSection { name: name.into(), chars, budget, cut, dropped, ..Default::default() }
    }

    fn len(s: &str) -> usize {
        s.chars().count()
    }

    #[test]
    fn the_task_contract_is_never_cut_and_every_cut_is_reported() {
        let mut case = Case::sample();
        case.prompt = "Fix the off-by-one in pager.py; keep the public API. ".repeat(40);
        let spec =
            AgentSpec { budgets: Budgets { system: 3, tools: 2, memory: 4, observations: 5 }, ..AgentSpec::default() };
        let observations = [obs(1, "x = 1"), obs(2, "y = 2")];
        let state = ContextState {
            case: &case,
            spec: &spec,
            repo_map: None,
            step: 3,
            files_modified: &[],
            observations: &observations,
        };
        let (texts, report) = pack(&state);

        let contract = format!("Task (t):\n{}\nTest command: true\nStep budget: 5 actions.", case.prompt.trim_end());
        let status = "Step 3 of 5: reply with your next action.";
        let system = format!("{}\n\n{}", spec.system_prompt.trim_end(), spec.action_format.trim_end());
        let tools: String = case.allowed_tools.iter().map(|t| format!("- {}\n", spec.describe(*t))).collect();
        let memory = "Files modified so far: none.";
        assert_eq!(
            report,
            [
                section("system", 3, 3, len(&system) - 3, 0),
                section("task", len(&contract), len(&contract), 0, 0),
                section("tools", 2, 2, len(&tools) - 2, 0),
                section("memory", 4, 4, len(memory) - 4, 0),
                // The newest observation is clipped to the budget; the older one is dropped.
                section("observations", 5, 5, len(&block(&observations[1])) - 5, 1),
                section("status", len(status), len(status), 0, 0),
            ]
        );
        let names: Vec<&str> = texts.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["system", "task", "tools", "memory", "observations", "status"]);
        assert_eq!(texts[1].1, contract, "the whole prompt reaches the model");
        assert_eq!(texts[4].1, "[step");
        assert_eq!(texts[5].1, status);
        for ((_, text), s) in texts.iter().zip(&report) {
            assert_eq!(len(text), s.chars, "{}: the report measures what is sent", s.name);
        }
    }

    #[test]
    fn old_observations_are_dropped_whole_newest_kept() {
        let case = Case::sample();
        let observations = [obs(1, "first"), obs(2, "second"), obs(3, "third"), obs(4, "fourth")];
        let kept = format!("{}{}", block(&observations[2]), block(&observations[3]));
        // Room for the two newest blocks and a little more, but not for a third block.
        let defaults = AgentSpec::default();
        let spec = AgentSpec {
            memory: false,
            budgets: Budgets { observations: len(&kept) + 3, ..defaults.budgets.clone() },
            ..defaults
        };
        let state = ContextState {
            case: &case,
            spec: &spec,
            repo_map: None,
            step: 5,
            files_modified: &[],
            observations: &observations,
        };
        let (texts, report) = pack(&state);
        let names: Vec<&str> = texts.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["system", "task", "tools", "observations", "status"], "no memory section when it is off");
        let (_, text) = &texts[3];
        assert_eq!(text, &kept, "oldest first, nothing clipped");
        assert_eq!(report[3], section("observations", len(&kept), len(&kept) + 3, 0, 2));
    }

    #[test]
    fn the_memory_section_lists_modified_files_and_the_repo_map() {
        let case = Case::sample();
        let spec = AgentSpec::default();
        let modified = ["pager.py".to_string(), "tests/test_pager.py".to_string()];
        let state = ContextState {
            case: &case,
            spec: &spec,
            repo_map: Some("pager.py:\n      3| def page(items, size)\n"),
            step: 1,
            files_modified: &modified,
            observations: &[],
        };
        let (texts, report) = pack(&state);
        let expected = "Files modified so far: pager.py, tests/test_pager.py.\nRepository map:\n\
                        pager.py:\n      3| def page(items, size)\n";
        assert_eq!(texts[3], ("memory".to_string(), expected.to_string()));
        assert_eq!(report[3], section("memory", len(expected), spec.budgets.memory, 0, 0));
        assert_eq!(report[4], section("observations", 0, spec.budgets.observations, 0, 0));
    }
}
