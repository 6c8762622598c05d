//! The context pipeline: what the model sees on one turn, projected from the cell's state.
//!
//! The trace holds the full history; the model sees a projection built from ordered sections,
//! each with a budget in estimated tokens ([`super::tokens`]):
//!
//! | section | what | reduced by |
//! |---|---|---|
//! | `system` | system prompt and action format | clipping at a line end |
//! | `task` | the task contract: prompt, test command, step budget | never |
//! | `tools` | the tools the case allows | clipping at a line end |
//! | `repo_map` | the repo map ranked against the task | dropping its least relevant lines |
//! | `packed` | the summary of compacted earlier steps | dropping its oldest lines |
//! | `observations` | recent tool results, oldest first | dropping the oldest whole |
//! | `memory` | the working memory | dropping blocks by priority |
//! | `status` | the step counter | never |
//!
//! The order keeps the prefix stable across turns so providers' prompt caches hit: what never
//! changes in a cell comes first (system, task, tools, the repo map), then what changes only
//! at a compaction (packed), then the observations, which only grow between compactions, and
//! last what changes every turn (memory, status). After each section is fitted to its own
//! budget, the whole projection is fitted to the total budget: lower-priority sections give
//! way first, in [`REDUCE_ORDER`]. Every reduction is reported for `context_packed`.
//!
//! Mode `none` turns all of this off: no budgets, every observation in full, no repo map,
//! memory or summary. It is the baseline that shows what the pipeline buys.

use std::fmt::Write as _;

use super::spec::{AgentSpec, ContextMode};
use super::tokens;
use crate::bench::Case;
use crate::trace::event::ContextSection;

/// Sections that give way when the projection is over its total budget, lowest priority first:
/// orientation aids before the record of what happened, and the instructions last.
pub const REDUCE_ORDER: &[&str] = &["repo_map", "packed", "memory", "observations", "tools", "system"];

/// One tool result the model has seen (or a refusal), kept for the observations section and
/// for compaction. Serializable for the cell's checkpoint (`checkpoint.rs`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Observation {
    pub step: u32,
    pub tool: String,
    /// The call in a few words: `read_file calc.py`.
    pub brief: String,
    /// `ok`, `failed` or `denied`.
    #[serde(deserialize_with = "status_from_checkpoint")]
    pub status: Status,
    /// The path a successful read_file read.
    pub read: Option<String>,
    /// Paths the call changed.
    pub modified: Vec<String>,
    /// The block as the model sees it, and its size (computed once, reused every turn).
    pub block: String,
    pub tokens: usize,
    /// One line for the compacted summary.
    pub digest: String,
}

impl Observation {
    pub fn new(step: u32, tool: &str, brief: String, status: &'static str, text: &str) -> Observation {
        let block = format!("[step {step}] {brief} ->\n{text}\n");
        let tokens = tokens::estimate(&block);
        let digest = digest(tool, status, text);
        Observation {
            step,
            tool: tool.to_string(),
            brief,
            status,
            read: None,
            modified: Vec::new(),
            block,
            tokens,
            digest,
        }
    }
}

/// The few words of an action for observations and summaries: the tool and its main argument.
pub fn brief(tool: &str, args: &serde_json::Value) -> String {
    let main = ["path", "pattern", "argv", "answer"].iter().find_map(|k| args.get(*k));
    let main = match main {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(serde_json::Value::Array(a)) => a
            .iter()
            .map(|v| v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string()))
            .collect::<Vec<_>>()
            .join(" "),
        Some(other) => other.to_string(),
        None => String::new(),
    };
    let main: String = main.chars().take(80).collect();
    if main.is_empty() { tool.to_string() } else { format!("{tool} {main}") }
}

/// An observation's status. Named, not written `&'static str` in the struct, because serde's
/// derive would take a literal `&'static str` field for a borrow of the input and require it to
/// live forever; the status is read back by [`status_from_checkpoint`] instead.
pub type Status = &'static str;

/// An observation's status read back from a checkpoint: one of the three the loop writes.
fn status_from_checkpoint<'de, D: serde::Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
    let s = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(d)?;
    ["ok", "failed", "denied"]
        .into_iter()
        .find(|known| *known == s)
        .ok_or_else(|| serde::de::Error::custom(format!("unknown observation status {s:?} (ok, failed or denied)")))
}

/// What a result amounts to in one line, by tool: sizes for reads and listings, the verdict
/// line for tests, the first line otherwise. Deterministic, so summaries replay exactly.
fn digest(tool: &str, status: &str, text: &str) -> String {
    let lines = || text.lines().filter(|l| !l.trim().is_empty());
    let what = match (tool, status) {
        ("read_file", "ok") => format!("{} lines", lines().count()),
        ("list_files", "ok") => format!("{} entries", lines().count()),
        ("search_code", "ok") => format!("{} matching lines", lines().count()),
        ("run_tests" | "run_command", _) => lines().next_back().unwrap_or("no output").trim().to_string(),
        _ => lines().next().unwrap_or("").trim().to_string(),
    };
    let what: String = what.chars().take(100).collect();
    format!("{status}: {what}")
}

/// A section's text after its budget, and what the budget did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rendered {
    pub text: String,
    pub tokens: usize,
    pub raw_tokens: usize,
    pub reduced: bool,
    /// Characters clipped from a block that was kept in part.
    pub cut: usize,
    pub dropped_blocks: Vec<String>,
}

impl Rendered {
    /// `text` whole: the task contract and the status line are never cut.
    fn whole(text: String) -> Rendered {
        let tokens = tokens::estimate(&text);
        Rendered { text, tokens, raw_tokens: tokens, ..Default::default() }
    }

    /// `text` clipped at a line end to `budget` tokens.
    pub fn clipped(text: &str, budget: usize) -> Rendered {
        let (kept, tokens) = tokens::clip(text, budget);
        // A text that fits was measured whole by the clip: only a cut one is measured again.
        let raw_tokens = if kept.len() == text.len() { tokens } else { tokens::estimate(text) };
        let cut = text.len() - kept.len();
        let cut = text[kept.len()..].chars().count().min(cut);
        Rendered { text: kept.to_string(), tokens, raw_tokens, reduced: cut > 0, cut, dropped_blocks: Vec::new() }
    }
}

/// A section renderer: its text within a given budget. Sections are rendered again with a
/// smaller budget when the whole projection is over its total.
pub type Renderer<'a> = &'a dyn Fn(usize) -> Rendered;

/// The state the projection is built from.
pub struct ContextState<'a> {
    pub case: &'a Case,
    pub spec: &'a AgentSpec,
    /// The repo map ranked against the task, when the spec injects one.
    pub repo_map: Option<&'a str>,
    /// The summary of compacted steps, when there is one.
    pub packed: Option<Renderer<'a>>,
    /// The working memory (mode `memory`).
    pub memory: Option<Renderer<'a>>,
    pub step: u32,
    /// Observations not yet compacted, oldest first.
    pub observations: &'a [Observation],
}

/// The projection for one turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Packed {
    /// (section name, text), in order.
    pub texts: Vec<(String, String)>,
    pub sections: Vec<ContextSection>,
    pub total_tokens: usize,
    pub total_chars: usize,
    /// The total budget; 0 in mode `none` (unbounded).
    pub budget_tokens: usize,
}

impl Packed {
    /// True when older observations were dropped to fit (compaction folds them instead).
    pub fn dropped_observations(&self) -> bool {
        self.sections.iter().any(|s| s.name == "observations" && s.dropped > 0)
    }
}

/// The sections that are the same on every turn of a cell (system, task, tools, the injected
/// repo map), each with its rendering at its own budget, made once per run of the step loop:
/// measuring them again on every turn was most of the cost of packing a context. A section is
/// rendered again only when the whole projection is over its total budget.
pub struct Fixed {
    system: FixedSection,
    task: FixedSection,
    tools: FixedSection,
    repo_map: Option<FixedSection>,
}

/// One section of [`Fixed`]: its text and its rendering at `budget`.
struct FixedSection {
    text: String,
    budget: usize,
    rendered: Rendered,
}

impl FixedSection {
    /// Clipped to `budget` (None: never cut).
    fn new(text: String, budget: Option<usize>) -> FixedSection {
        let (budget, rendered) = match budget {
            Some(budget) => (budget, Rendered::clipped(&text, budget)),
            None => (usize::MAX, Rendered::whole(text.clone())),
        };
        FixedSection { text, budget, rendered }
    }

    fn render(&self, budget: usize) -> Rendered {
        if budget == self.budget { self.rendered.clone() } else { Rendered::clipped(&self.text, budget) }
    }
}

impl Fixed {
    /// The fixed sections of a cell of `case` under `spec`, with the repo map the context
    /// injects (if any).
    pub fn new(case: &Case, spec: &AgentSpec, repo_map: Option<&str>) -> Fixed {
        let b = &spec.budgets;
        let managed = spec.mode != ContextMode::None;
        let cap = |budget: usize| if managed { budget } else { usize::MAX };
        let system_text = format!("{}\n\n{}", spec.system_prompt.trim_end(), spec.action_format.trim_end());
        let tools_text: String = case.allowed_tools.iter().map(|t| format!("- {}\n", spec.describe(*t))).collect();
        // The task contract holds nothing that changes between turns, so the prefix stays
        // stable; the step counter comes last (`status`).
        let contract = format!(
            "Task ({}):\n{}\nTest command: {}\nStep budget: {} actions.",
            case.id,
            case.prompt.trim_end(),
            case.tests.label(),
            case.step_budget
        );
        Fixed {
            system: FixedSection::new(system_text, Some(cap(b.system))),
            task: FixedSection::new(contract, None),
            tools: FixedSection::new(tools_text, Some(cap(b.tools))),
            repo_map: repo_map.filter(|_| managed).map(|m| FixedSection::new(m.to_string(), Some(b.repo_map))),
        }
    }
}

/// Builds the projection for one turn.
pub fn pack(state: &ContextState<'_>) -> Packed {
    pack_with(&Fixed::new(state.case, state.spec, state.repo_map), state)
}

/// [`pack`] with the cell's fixed sections made beforehand (from the same case, spec and repo
/// map as `state`'s).
pub fn pack_with(fixed: &Fixed, state: &ContextState<'_>) -> Packed {
    let case = state.case;
    let spec = state.spec;
    let b = &spec.budgets;
    let managed = spec.mode != ContextMode::None;
    let cap = |budget: usize| if managed { budget } else { usize::MAX };

    let status = format!("Step {} of {}: reply with your next action.", state.step, case.step_budget);
    let observations = |budget: usize| fit_observations(state.observations, budget);
    let system = |budget: usize| fixed.system.render(budget);
    let tools = |budget: usize| fixed.tools.render(budget);

    // (name, budget or None when never cut, renderer); at most the eight sections of the table.
    let mut plan: Vec<(&'static str, Option<usize>, Renderer<'_>)> = Vec::with_capacity(8);
    plan.push(("system", Some(cap(b.system)), &system));
    let task = |_: usize| fixed.task.rendered.clone();
    plan.push(("task", None, &task));
    plan.push(("tools", Some(cap(b.tools)), &tools));
    let repo_map = |budget: usize| fixed.repo_map.as_ref().map(|m| m.render(budget)).unwrap_or_default();
    if fixed.repo_map.is_some() {
        plan.push(("repo_map", Some(b.repo_map), &repo_map));
    }
    if let (true, Some(packed)) = (managed, state.packed) {
        plan.push(("packed", Some(b.packed), packed));
    }
    plan.push(("observations", Some(cap(b.observations)), &observations));
    if let (ContextMode::Memory, Some(memory)) = (spec.mode, state.memory) {
        plan.push(("memory", Some(b.memory), memory));
    }
    let status_r = |_: usize| Rendered::whole(status.clone());
    plan.push(("status", None, &status_r));

    let mut rendered: Vec<(Rendered, usize)> = plan
        .iter()
        .map(|(_, budget, render)| {
            let budget = budget.unwrap_or(usize::MAX);
            (render(budget), budget)
        })
        .collect();
    // Sections whose rendering is empty (no memory yet, no map) are left out.
    if managed {
        let mut sum: usize = rendered.iter().map(|(r, _)| r.tokens).sum();
        for name in REDUCE_ORDER {
            if sum <= b.total {
                break;
            }
            let Some(i) = plan.iter().position(|(n, _, _)| n == name) else { continue };
            let excess = sum - b.total;
            let (before_tokens, raw_tokens) = (rendered[i].0.tokens, rendered[i].0.raw_tokens);
            let mut again = (plan[i].2)(before_tokens.saturating_sub(excess));
            // The raw size is the section's before any budget; keep the first measurement.
            again.raw_tokens = raw_tokens;
            again.reduced = true;
            sum = sum - before_tokens + again.tokens;
            rendered[i].0 = again;
        }
    }

    let mut texts = Vec::with_capacity(plan.len());
    let mut sections = Vec::with_capacity(plan.len());
    for ((name, budget, _), (r, _)) in plan.iter().zip(rendered) {
        if r.text.is_empty() && matches!(*name, "repo_map" | "packed" | "memory") {
            continue;
        }
        sections.push(ContextSection {
            name: name.to_string(),
            chars: r.text.chars().count(),
            tokens: r.tokens,
            raw_tokens: r.raw_tokens,
            budget: budget.filter(|_| managed).unwrap_or(r.tokens),
            reduced: r.reduced,
            cut: r.cut,
            dropped: r.dropped_blocks.len(),
            dropped_blocks: r.dropped_blocks,
        });
        texts.push((name.to_string(), r.text));
    }
    let total_tokens = sections.iter().map(|s| s.tokens).sum();
    let total_chars = sections.iter().map(|s| s.chars).sum();
    Packed { texts, sections, total_tokens, total_chars, budget_tokens: if managed { b.total } else { 0 } }
}

/// Newest observations first until the budget is spent; older ones are dropped whole (named
/// `step-N`), and the newest is clipped when even it alone does not fit.
fn fit_observations(observations: &[Observation], budget: usize) -> Rendered {
    let raw_tokens = observations.iter().map(|o| o.tokens).sum();
    let mut kept = 0;
    let mut used = 0;
    for o in observations.iter().rev() {
        if used + o.tokens > budget {
            break;
        }
        used += o.tokens;
        kept += 1;
    }
    let first_kept = observations.len() - kept;
    let mut out = Rendered { raw_tokens, ..Default::default() };
    if kept == 0 && !observations.is_empty() {
        // Not even the newest fits: keep its beginning.
        let last = observations.last().expect("not empty");
        let clipped = Rendered::clipped(&last.block, budget);
        out.text = clipped.text;
        out.tokens = clipped.tokens;
        out.cut = clipped.cut;
        out.dropped_blocks =
            observations[..observations.len() - 1].iter().map(|o| format!("step-{}", o.step)).collect();
        out.reduced = true;
        return out;
    }
    let kept = &observations[first_kept..];
    out.text.reserve_exact(kept.iter().map(|o| o.block.len()).sum());
    for o in kept {
        out.text.push_str(&o.block);
    }
    out.tokens = used;
    out.dropped_blocks = observations[..first_kept].iter().map(|o| format!("step-{}", o.step)).collect();
    out.reduced = !out.dropped_blocks.is_empty();
    out
}

/// A one-line account of a projection for logs and tests.
pub fn describe(packed: &Packed) -> String {
    let mut s = String::new();
    for sec in &packed.sections {
        let _ = write!(s, "{}={}/{} ", sec.name, sec.tokens, sec.budget);
    }
    let _ = write!(s, "total={}/{}", packed.total_tokens, packed.budget_tokens);
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::spec::Budgets;

    fn obs(step: u32, text: &str) -> Observation {
        Observation::new(step, "read_file", format!("read_file f{step}.py"), "ok", text)
    }

    fn state<'a>(case: &'a Case, spec: &'a AgentSpec, observations: &'a [Observation]) -> ContextState<'a> {
        ContextState { case, spec, repo_map: None, packed: None, memory: None, step: 3, observations }
    }

    fn names(p: &Packed) -> Vec<&str> {
        p.texts.iter().map(|(n, _)| n.as_str()).collect()
    }

    fn section<'a>(p: &'a Packed, name: &str) -> &'a ContextSection {
        p.sections.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no section {name}"))
    }

    #[test]
    fn the_task_contract_is_never_cut_and_every_cut_is_reported() {
        let mut case = Case::sample();
        case.prompt = "Fix the off-by-one in pager.py; keep the public API. ".repeat(40);
        let spec = AgentSpec {
            budgets: Budgets { system: 3, tools: 2, observations: 5, ..Budgets::default() },
            ..AgentSpec::default()
        };
        let observations = [obs(1, "x = 1"), obs(2, "y = 2")];
        let p = pack(&state(&case, &spec, &observations));
        assert_eq!(names(&p), ["system", "task", "tools", "observations", "status"]);
        let contract = format!("Task (t):\n{}\nTest command: true\nStep budget: 5 actions.", case.prompt.trim_end());
        assert_eq!(p.texts[1].1, contract, "the whole prompt reaches the model");
        let task = section(&p, "task");
        assert!(!task.reduced && task.tokens == tokens::estimate(&contract) && task.tokens > 200);
        for name in ["system", "tools"] {
            let s = section(&p, name);
            assert!(s.reduced && s.tokens <= s.budget && s.raw_tokens > s.budget && s.cut > 0, "{s:?}");
        }
        // The newest observation is clipped to the budget; the older one is dropped by name.
        let o = section(&p, "observations");
        assert_eq!((o.dropped, o.dropped_blocks.clone(), o.reduced), (1, vec!["step-1".to_string()], true));
        assert!(o.tokens <= 5 && o.cut > 0);
        assert_eq!(p.texts[4].1, "Step 3 of 5: reply with your next action.");
        for ((_, text), s) in p.texts.iter().zip(&p.sections) {
            assert_eq!(text.chars().count(), s.chars, "{}: the report measures what is sent", s.name);
            assert_eq!(tokens::estimate(text), s.tokens, "{}", s.name);
        }
        assert_eq!(p.total_tokens, p.sections.iter().map(|s| s.tokens).sum::<usize>());
    }

    #[test]
    fn old_observations_are_dropped_whole_newest_kept() {
        let case = Case::sample();
        let observations = [obs(1, "first"), obs(2, "second"), obs(3, "third"), obs(4, "fourth")];
        let kept = format!("{}{}", observations[2].block, observations[3].block);
        let budget = tokens::estimate(&kept) + 1;
        let spec =
            AgentSpec { budgets: Budgets { observations: budget, ..Budgets::default() }, ..AgentSpec::default() };
        let p = pack(&state(&case, &spec, &observations));
        assert_eq!(p.texts[3], ("observations".to_string(), kept.clone()), "oldest first, nothing clipped");
        let o = section(&p, "observations");
        assert_eq!(o.dropped_blocks, ["step-1", "step-2"]);
        assert_eq!((o.cut, o.tokens, o.budget), (0, tokens::estimate(&kept), budget));
        assert!(p.dropped_observations());
    }

    #[test]
    fn over_the_total_budget_lower_priority_sections_give_way_first() {
        let case = Case::sample();
        let map = (0..40).map(|i| format!("mod{i}.py\n  1| def f{i}(x)\n")).collect::<String>();
        let memory = |budget: usize| Rendered::clipped("failing_tests: test_a\nexplored_files: a.py\n", budget);
        let observations = [obs(1, &"alpha beta gamma\n".repeat(30)), obs(2, "short")];
        let base = AgentSpec::default();
        let loose = ContextState { repo_map: Some(&map), memory: Some(&memory), ..state(&case, &base, &observations) };
        let unconstrained = pack(&loose);
        assert_eq!(
            names(&unconstrained),
            ["system", "task", "tools", "repo_map", "observations", "memory", "status"],
            "stable parts first, what changes every turn last"
        );
        assert!(unconstrained.sections.iter().all(|s| !s.reduced), "{}", describe(&unconstrained));
        // A total that leaves room for all but part of the repo map: only the map gives way.
        let excess = 50;
        let tight = AgentSpec {
            budgets: Budgets { total: unconstrained.total_tokens - excess, ..base.budgets.clone() },
            ..base.clone()
        };
        let p = pack(&ContextState { spec: &tight, ..loose });
        assert!(p.total_tokens <= tight.budgets.total, "{}", describe(&p));
        let map_s = section(&p, "repo_map");
        assert!(map_s.reduced && map_s.raw_tokens == section(&unconstrained, "repo_map").tokens);
        for name in ["system", "tools", "observations", "memory", "task"] {
            assert_eq!(section(&p, name), section(&unconstrained, name), "{name} untouched");
        }
    }

    #[test]
    fn fixed_sections_made_once_pack_every_turn_as_made_afresh() {
        let case = Case::sample();
        let map = (0..40).map(|i| format!("mod{i}.py\n  1| def f{i}(x)\n")).collect::<String>();
        let base = AgentSpec::default();
        // Loose, over the total (the map and then the observations give way), and mode none.
        let loose = pack(&ContextState { repo_map: Some(&map), ..state(&case, &base, &[]) }).total_tokens;
        let total = loose - 50;
        let tight = AgentSpec { budgets: Budgets { total, ..base.budgets.clone() }, ..base.clone() };
        let none = AgentSpec { mode: ContextMode::None, ..base.clone() };
        for spec in [&base, &tight, &none] {
            let fixed = Fixed::new(&case, spec, Some(&map));
            let mut observations = Vec::new();
            for step in 1..6 {
                observations.push(obs(step, &"alpha beta gamma\n".repeat(10 * step as usize)));
                let state = ContextState { repo_map: Some(&map), step, ..state(&case, spec, &observations) };
                assert_eq!(pack_with(&fixed, &state), pack(&state), "step {step}: {}", describe(&pack(&state)));
            }
        }
        let p = pack(&ContextState { repo_map: Some(&map), ..state(&case, &tight, &[]) });
        assert!(section(&p, "repo_map").reduced, "the tight budget cuts the map: {}", describe(&p));
    }

    #[test]
    fn mode_none_sends_everything_unbudgeted() {
        let case = Case::sample();
        let big = "line of output\n".repeat(5000);
        let observations = [obs(1, &big), obs(2, &big)];
        let memory = |_: usize| Rendered::clipped("explored_files: a.py", 100);
        let spec = AgentSpec { mode: ContextMode::None, ..AgentSpec::default() };
        let p =
            pack(&ContextState { repo_map: Some("a.py"), memory: Some(&memory), ..state(&case, &spec, &observations) });
        assert_eq!(names(&p), ["system", "task", "tools", "observations", "status"]);
        assert_eq!(p.budget_tokens, 0);
        let o = section(&p, "observations");
        assert!(!o.reduced && o.dropped == 0 && o.tokens > AgentSpec::default().budgets.total);
    }

    #[test]
    fn briefs_and_digests_are_short_and_deterministic() {
        let args = serde_json::json!({"path": "errcat/catalog.py", "start_line": 3});
        assert_eq!(brief("read_file", &args), "read_file errcat/catalog.py");
        assert_eq!(brief("run_command", &serde_json::json!({"argv": ["git", "status"]})), "run_command git status");
        assert_eq!(brief("run_tests", &serde_json::json!({})), "run_tests");
        let o = Observation::new(2, "read_file", "read_file a.py".into(), "ok", "    1| a\n    2| b\n");
        assert_eq!(o.digest, "ok: 2 lines");
        let t =
            Observation::new(3, "run_tests", "run_tests".into(), "failed", "F.\nFAIL: test_x\n\nFAILED (failures=1)\n");
        assert_eq!(t.digest, "failed: FAILED (failures=1)");
    }
}
