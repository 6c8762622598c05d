//! Read-only delegation: the `delegate_readonly` tool.
//!
//! The agent asks a bounded question; a child loop answers it with read-only tools (list,
//! read, search, repo map) and `finish`, within its own step and token budgets (the agent
//! spec's `delegation`, which also caps what a call may ask for), with a fresh provider of the
//! same profile (a script's `delegate` step hands over the child's own steps), and returns a
//! structured evidence summary (findings, files, symbols; JSON) as the call's result.
//!
//! The child is a cell in miniature and is traced like one: its own `trace.jsonl` in
//! `delegations/<id>/` under the cell directory, from `run_started` to `run_finished`, with the
//! same event kinds, so `hcbench replay` and `view` read it as they read a cell. The parent's
//! trace links it with `delegation_started` (question, budgets, the child's trace) and
//! `delegation_completed` or `delegation_failed` (what the child spent, the evidence's size),
//! between the call's `policy_decision` and its `tool_result`. The summary fold adds a
//! delegation's tokens to the cell's, so the cell's cost and the run's `--budget-usd` include
//! every delegation, in a live run and in a replay alike.
//!
//! The child's calls go through the parent's gate (`Turn::gate`, the same policy and the same
//! recording) after one more rule: only read-only tools and `finish`. A write, a command or
//! another delegation is refused and traced in the child's trace, and the child goes on; it
//! is never a crash. The child's calls run one at a time: a child is small, and the parent's
//! batching is not repeated here. A child that runs out of steps or tokens, or whose model
//! fails, ends its delegation as `delegation_failed`: the parent gets a tool error carrying
//! whatever the child read, and its cell goes on.

use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;

use super::context::{self, ContextState, Observation};
use super::spec::{AgentSpec, ContextMode};
use super::tools::ToolOutput;
use super::{Cell, CellPlan, Gate, Recorder, Turn, batch, run_tool};
use crate::action::{Action, Call, Tool};
use crate::bench::Case;
use crate::model::{ModelError, Provider};
use crate::replay::SummaryBuilder;
use crate::trace::TraceWriter;
use crate::trace::event::{Delegated, EventBody, Outcome};

/// What the child is told it is. The agent spec's prompt is the parent's (it fixes code); the
/// child only investigates, and must answer in the shape [`Evidence`] reads.
const CHILD_SYSTEM: &str = "You are a read-only helper of a coding agent. Answer the agent's question by looking at \
the code: list, read and search files, or ask for a repo map. You cannot change files, run commands or delegate. \
When you know the answer, or your budget is nearly spent, call `finish` with `answer` set to a JSON object: \
{\"findings\": [\"one sentence per fact, naming file and line\"], \"files\": [\"paths that matter\"], \
\"symbols\": [\"functions or classes that matter\"]}.";

/// Most entries of each evidence list, and characters of each entry: the evidence is a tool
/// result the parent reads, and must stay well inside what it is shown.
const MAX_ITEMS: usize = 40;
const MAX_ITEM_CHARS: usize = 400;

/// The tools a child may call: the reads, and `finish` to answer.
fn child_may_call(tool: Tool) -> bool {
    tool.is_read_only() || tool == Tool::Finish
}

/// A delegation's budgets after the spec's caps.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Budget {
    max_steps: u32,
    max_tokens: u64,
}

impl Budget {
    /// What the call asked for, within the spec's caps; the caps when it asked for nothing.
    fn of(spec: &AgentSpec, max_steps: Option<usize>, max_tokens: Option<usize>) -> Budget {
        let caps = spec.delegation;
        Budget {
            max_steps: max_steps.map_or(caps.max_steps, |n| n.min(caps.max_steps as usize).max(1) as u32),
            max_tokens: max_tokens.map_or(caps.max_tokens, |n| (n as u64).min(caps.max_tokens).max(1)),
        }
    }
}

/// How a child ended.
#[derive(Debug, Clone, PartialEq)]
enum End {
    /// `finish`, with its answer.
    Answered(String),
    OutOfSteps,
    OutOfTokens,
    /// Too many unparseable replies in a row (the spec's `retry.max_invalid_replies`).
    InvalidReplies(String),
    ModelError(String),
    /// The child's trace could not be written.
    TraceError(String),
}

impl End {
    /// `delegation_failed.reason`, and the child's `run_finished.stop_reason`.
    fn code(&self) -> &'static str {
        match self {
            End::Answered(_) => "finished",
            End::OutOfSteps => "out_of_steps",
            End::OutOfTokens => "out_of_tokens",
            End::InvalidReplies(_) => "invalid_replies",
            End::ModelError(_) => "model_error",
            End::TraceError(_) => "trace_error",
        }
    }

    fn message(&self, budget: Budget) -> String {
        match self {
            End::Answered(_) => "the helper answered".into(),
            End::OutOfSteps => format!("the helper used its {} step(s) without an answer", budget.max_steps),
            End::OutOfTokens => format!("the helper spent its {} tokens without an answer", budget.max_tokens),
            End::InvalidReplies(m) => format!("the helper's model gave no usable reply: {m}"),
            End::ModelError(m) => format!("the helper's model failed: {m}"),
            End::TraceError(m) => format!("the helper's trace could not be written: {m}"),
        }
    }

    fn outcome(&self) -> Outcome {
        match self {
            End::Answered(_) => Outcome::Passed,
            End::OutOfSteps | End::OutOfTokens | End::InvalidReplies(_) => Outcome::Failed,
            End::ModelError(_) => Outcome::ProviderError,
            End::TraceError(_) => Outcome::HarnessError,
        }
    }
}

/// Runs the delegation `call` asks for at the parent's `step`, recording its start and end in
/// the parent's trace; returns the call's result. Errors only when the parent's trace cannot
/// be written: whatever happens to the child is a result.
pub(super) async fn run(
    cell: &Cell<'_>,
    rec: &mut Recorder,
    parent: &mut dyn Provider,
    step: u32,
    call: &Call,
) -> io::Result<ToolOutput> {
    let Call::DelegateReadonly { question, max_steps, max_tokens } = call else {
        unreachable!("the loop delegates only delegate_readonly calls")
    };
    let plan = cell.plan;
    let budget = Budget::of(&plan.spec, *max_steps, *max_tokens);
    let id = rec.summary.delegations() + 1;
    let dir = format!("delegations/{id}");
    let trace_rel = format!("{dir}/trace.jsonl");
    rec.emit(EventBody::DelegationStarted {
        step,
        id,
        question: question.clone(),
        max_steps: budget.max_steps,
        max_tokens: budget.max_tokens,
        trace: trace_rel.clone(),
    })?;

    let child_plan = CellPlan {
        cell_id: format!("{}/delegation-{id}", plan.cell_id),
        case: Arc::new(child_case(&plan.case, question, budget.max_steps)),
        spec: Arc::new(child_spec(&plan.spec)),
        cell_dir: plan.cell_dir.join(&dir),
        ..plan.clone()
    };
    let trace_path = plan.cell_dir.join(&trace_rel);
    let child = Cell { plan: &child_plan, ws: cell.ws, trace: &trace_path, sandbox: cell.sandbox, hooks: cell.hooks };
    let mut provider = parent.delegation().unwrap_or_else(|| plan.profile.provider_for(&child_plan.case, plan.epoch));
    let started = Instant::now();
    let mut state = ChildState::default();
    let (end, summary) = match open_trace(&child) {
        Err(e) => (End::TraceError(e.to_string()), None),
        Ok(mut child_rec) => {
            let end = child_loop(&child, &mut child_rec, provider.as_mut(), budget, &mut state)
                .await
                .unwrap_or_else(|e| End::TraceError(e.to_string()));
            // A child whose trace broke is still asked to end it; that may fail again.
            let _ = child_rec.emit(EventBody::RunFinished {
                outcome: end.outcome(),
                reward: if matches!(end, End::Answered(_)) { 1.0 } else { 0.0 },
                stop_reason: end.code().into(),
                reason: end.message(budget),
                elapsed_ms: started.elapsed().as_millis() as u64,
            });
            (end, child_rec.summary.finish())
        }
    };

    let answer = match &end {
        End::Answered(a) => Some(a.as_str()),
        _ => None,
    };
    let evidence = Evidence::of(question, answer, state.reads(), summary.as_ref().map_or(0, |s| s.steps));
    let json = serde_json::to_string_pretty(&evidence).expect("evidence serializes");
    let text = match answer {
        Some(_) => json,
        None => format!("delegation failed: {}. The evidence it gathered:\n{json}", end.message(budget)),
    };
    let spent = Delegated {
        steps: summary.as_ref().map_or(0, |s| s.steps),
        input_tokens: summary.as_ref().map_or(0, |s| s.input_tokens),
        output_tokens: summary.as_ref().map_or(0, |s| s.output_tokens),
        cost_usd: summary.as_ref().and_then(|s| s.cost_usd()),
        refusals: summary.as_ref().map_or(0, |s| s.policy_denials),
        files: evidence.files.len() as u32,
        symbols: evidence.symbols.len() as u32,
        findings: evidence.findings.len() as u32,
        evidence_bytes: text.len() as u64,
    };
    if answer.is_some() {
        rec.emit(EventBody::DelegationCompleted { step, id, spent })?;
        Ok(ToolOutput { ok: true, text, ..Default::default() })
    } else {
        rec.emit(EventBody::DelegationFailed {
            step,
            id,
            reason: end.code().into(),
            message: end.message(budget),
            spent,
        })?;
        Ok(ToolOutput { ok: false, text, ..Default::default() })
    }
}

/// The case the child works on: the parent's, with the question as its task, only the tools
/// a child may call, and the delegation's step budget.
fn child_case(parent: &Case, question: &str, max_steps: u32) -> Case {
    let mut case = parent.clone();
    case.prompt = format!(
        "Question from the agent: {}\n\nThe agent's own task, for context only (do not do it):\n{}",
        question.trim(),
        parent.prompt.trim_end()
    );
    case.allowed_tools = parent.allowed_tools.iter().copied().filter(|t| child_may_call(*t)).collect();
    if !case.allowed_tools.contains(&Tool::Finish) {
        case.allowed_tools.push(Tool::Finish);
    }
    case.step_budget = max_steps;
    case
}

/// The spec the child's context is packed with: the parent's budgets and action format, the
/// child's own system prompt, and no working memory or injected map (the child asks for a map
/// when it wants one). Its digest stays the parent's, which its trace records.
fn child_spec(parent: &AgentSpec) -> AgentSpec {
    AgentSpec {
        system_prompt: CHILD_SYSTEM.to_string(),
        mode: if parent.mode == ContextMode::Memory { ContextMode::Pack } else { parent.mode },
        repo_map: false,
        ..parent.clone()
    }
}

fn open_trace(child: &Cell<'_>) -> io::Result<Recorder> {
    std::fs::create_dir_all(&child.plan.cell_dir)?;
    let writer = TraceWriter::create(child.trace, &child.plan.run_id, &child.plan.cell_id)?;
    Ok(Recorder { writer, summary: SummaryBuilder::new() })
}

/// The child loop's state, kept by the caller so that what the child read survives a child
/// that ends early.
#[derive(Default)]
struct ChildState {
    observations: Vec<Observation>,
    files_modified: Vec<String>,
    /// Path -> the child's step of its first read.
    first_reads: BTreeMap<String, u32>,
}

impl ChildState {
    /// The files the child read, in the order it first read them.
    fn reads(&self) -> Vec<String> {
        let mut reads: Vec<(&String, &u32)> = self.first_reads.iter().collect();
        reads.sort_by_key(|(path, step)| (**step, (*path).clone()));
        reads.into_iter().map(|(p, _)| p.clone()).collect()
    }
}

/// The child's turns, from `run_started` up to (not including) `run_finished`.
async fn child_loop(
    child: &Cell<'_>,
    rec: &mut Recorder,
    provider: &mut dyn Provider,
    budget: Budget,
    state: &mut ChildState,
) -> io::Result<End> {
    let plan = child.plan;
    let (case, spec) = (plan.case.as_ref(), plan.spec.as_ref());
    rec.emit(EventBody::RunStarted {
        benchmark: plan.benchmark.clone(),
        case_id: case.id.clone(),
        category: case.category.to_string(),
        split: case.split.to_string(),
        profile: plan.profile.name().to_string(),
        model: provider.info(),
        step_budget: budget.max_steps,
        epoch: plan.epoch,
        agent_spec: spec.digest.clone(),
        ablation: plan.ablation.clone(),
        hcbench_version: env!("CARGO_PKG_VERSION").to_string(),
        sandbox: None,
    })?;
    let mut invalid_in_a_row = 0u32;
    for step in 1..=budget.max_steps {
        // A turn already paid for is used; the next one is not asked once the budget is spent.
        if rec.summary.tokens() >= budget.max_tokens {
            return Ok(End::OutOfTokens);
        }
        let packed = context::pack(&ContextState {
            case,
            spec,
            repo_map: None,
            packed: None,
            memory: None,
            step,
            observations: &state.observations,
        });
        let turn = super::ask(rec, provider, spec, (step, step), packed).await?;
        let reply = match turn.result {
            Ok(reply) => reply,
            Err(e) => {
                let message = e.to_string();
                rec.emit(EventBody::ModelError {
                    step,
                    error_kind: e.kind().into(),
                    message: message.clone(),
                    usage: turn.usage.clone(),
                })?;
                if let ModelError::Provider(_) = e {
                    return Ok(End::ModelError(message));
                }
                invalid_in_a_row += 1;
                if invalid_in_a_row >= spec.max_invalid_replies {
                    return Ok(End::InvalidReplies(message));
                }
                super::ask_again(rec, step, &message, &mut state.observations)?;
                continue;
            }
        };
        invalid_in_a_row = 0;
        let size = super::record_actions(rec, step, &reply)?;
        let mut answer: Option<String> = None;
        let mut turn = Turn {
            cell: child,
            step,
            size,
            memory: None,
            observations: &mut state.observations,
            files_modified: &mut state.files_modified,
            first_reads: &mut state.first_reads,
        };
        for (i, action) in reply.actions.iter().enumerate() {
            if answer.is_some() {
                turn.refuse_unrun(rec, i, &action.tool, "not run: `finish` came earlier in the same reply", true)?;
                continue;
            }
            if i >= batch::MAX_BATCH {
                let told = format!("not run: a reply may hold at most {} tool calls", batch::MAX_BATCH);
                turn.refuse_unrun(rec, i, &action.tool, &told, true)?;
                continue;
            }
            // The parent's tool hooks (agent spec) judge the child's calls as they judge its own.
            let gated = gate(&mut turn, rec, action)?;
            match turn.pre_hooks(rec, i, gated).await? {
                Gate::Refused { text, cause } => turn.refused(rec, i, action, &text, cause)?,
                Gate::Run(call) => {
                    let t0 = Instant::now();
                    let out = run_tool(child, &call).await;
                    let duration_ms = t0.elapsed().as_millis() as u64;
                    let note = turn.post_hooks(rec, i, action, &call, &out).await?;
                    turn.record(rec, i, action, &call, &out, duration_ms, &note)?;
                    if let Call::Finish { answer: a } = call {
                        answer = Some(a);
                    }
                }
            }
        }
        rec.emit(EventBody::StateUpdated {
            step,
            steps_used: step,
            files_modified: Vec::new(),
            finished: answer.is_some(),
        })?;
        if let Some(a) = answer {
            return Ok(End::Answered(a));
        }
    }
    Ok(End::OutOfSteps)
}

/// The child's gate: the read-only rule, then the parent's gate for what passes it. The rule
/// is decided here, before the policy, so the child is told why in words about delegation.
fn gate(turn: &mut Turn<'_, '_>, rec: &mut Recorder, action: &Action) -> io::Result<Gate> {
    let Some(tool) = Tool::parse(&action.tool).filter(|t| !child_may_call(*t)) else {
        return turn.gate(rec, action);
    };
    let reason = format!(
        "`{}` is not available in a read-only delegation: the helper may only list, read, search and map the code, \
         then finish with its evidence",
        tool.as_str()
    );
    rec.emit(EventBody::PolicyDecision {
        step: turn.step,
        tool: action.tool.clone(),
        allowed: false,
        reason: reason.clone(),
        invalid: false,
    })?;
    let text = if turn.cell.plan.spec.explain_denials {
        format!("denied by policy: {reason}. Choose an action the policy allows.")
    } else {
        "denied by policy".to_string()
    };
    Ok(Gate::Refused { text, cause: "denied" })
}

/// The evidence a delegation returns: what the child found, in the shape its prompt asks for,
/// and the files it read (whatever it says, those are what its findings rest on).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
struct Evidence {
    question: String,
    answered: bool,
    findings: Vec<String>,
    /// The files the answer names, then the files the child read that it did not name.
    files: Vec<String>,
    symbols: Vec<String>,
    /// The child's model turns.
    steps: u32,
}

impl Evidence {
    /// Reads the child's answer: a JSON object (`findings`, `files`, `symbols`; an `answer` or
    /// `summary` string is a finding too), possibly fenced or with words around it; any other
    /// text is one finding. Lists are bounded ([`MAX_ITEMS`], [`MAX_ITEM_CHARS`]).
    fn of(question: &str, answer: Option<&str>, reads: Vec<String>, steps: u32) -> Evidence {
        let mut e =
            Evidence { question: question.to_string(), answered: answer.is_some(), steps, ..Default::default() };
        let text = answer.unwrap_or("").trim();
        match json_object_in(text) {
            Some(obj) => {
                for key in ["answer", "summary"] {
                    e.findings.extend(strings(obj.get(key)));
                }
                e.findings.extend(strings(obj.get("findings")));
                e.files = strings(obj.get("files"));
                e.symbols = strings(obj.get("symbols"));
            }
            None if !text.is_empty() => e.findings.push(text.to_string()),
            None => {}
        }
        for path in reads {
            if !e.files.contains(&path) {
                e.files.push(path);
            }
        }
        for list in [&mut e.findings, &mut e.files, &mut e.symbols] {
            list.truncate(MAX_ITEMS);
            for item in list.iter_mut() {
                if item.len() > MAX_ITEM_CHARS {
                    *item = format!("{}…", crate::util::truncate_str(item, MAX_ITEM_CHARS));
                }
            }
        }
        e
    }
}

/// The JSON object in `text`: the whole text, or from its first `{` to its last `}` (a
/// fenced block, a sentence around it).
fn json_object_in(text: &str) -> Option<serde_json::Map<String, Value>> {
    let parse = |s: &str| match serde_json::from_str::<Value>(s) {
        Ok(Value::Object(m)) => Some(m),
        _ => None,
    };
    parse(text).or_else(|| parse(&text[text.find('{')?..=text.rfind('}')?]))
}

/// A string or a list of values as strings (non-strings in their JSON form); empty otherwise.
fn strings(v: Option<&Value>) -> Vec<String> {
    let one = |v: &Value| match v {
        Value::String(s) => s.trim().to_string(),
        other => other.to_string(),
    };
    match v {
        Some(Value::String(s)) if !s.trim().is_empty() => vec![s.trim().to_string()],
        Some(Value::Array(items)) => items.iter().map(one).filter(|s| !s.is_empty()).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_json_answer_becomes_evidence_with_the_files_read_after_the_named_ones() {
        let answer = r#"Here it is: ```json
{"findings": ["add subtracts (calc.py:2)", 7], "files": ["calc.py"], "symbols": ["add"], "summary": "a bug"}
```"#;
        let reads = vec!["tests/test_calc.py".to_string(), "calc.py".to_string()];
        let e = Evidence::of("why?", Some(answer), reads, 3);
        assert!(e.answered);
        assert_eq!(e.findings, ["a bug", "add subtracts (calc.py:2)", "7"]);
        assert_eq!(e.files, ["calc.py", "tests/test_calc.py"], "named first, then the other reads, no repeats");
        assert_eq!((e.symbols.as_slice(), e.steps), (&["add".to_string()][..], 3));
    }

    #[test]
    fn a_plain_answer_is_one_finding_and_no_answer_keeps_the_reads() {
        let e = Evidence::of("q", Some("  add is in calc.py  "), vec![], 1);
        assert_eq!(e.findings, ["add is in calc.py"]);
        let e = Evidence::of("q", None, vec!["a.py".into()], 4);
        assert!(!e.answered && e.findings.is_empty());
        assert_eq!(e.files, ["a.py"]);
    }

    #[test]
    fn evidence_is_bounded() {
        let many: Vec<String> = (0..100).map(|i| format!("f{i}.py")).collect();
        let long = "x".repeat(5000);
        let answer = serde_json::json!({ "findings": [long], "files": many }).to_string();
        let e = Evidence::of("q", Some(&answer), many.clone(), 1);
        assert_eq!(e.files.len(), MAX_ITEMS);
        assert!(e.findings[0].len() <= MAX_ITEM_CHARS + '…'.len_utf8());
    }

    #[test]
    fn a_call_asks_within_the_specs_caps() {
        let spec = AgentSpec::default();
        let caps = spec.delegation;
        assert_eq!(Budget::of(&spec, None, None), Budget { max_steps: caps.max_steps, max_tokens: caps.max_tokens });
        assert_eq!(Budget::of(&spec, Some(2), Some(100)), Budget { max_steps: 2, max_tokens: 100 });
        let asked_too_much = Budget::of(&spec, Some(10_000), Some(usize::MAX));
        assert_eq!(asked_too_much, Budget { max_steps: caps.max_steps, max_tokens: caps.max_tokens });
    }

    #[test]
    fn the_child_may_only_read_and_finish() {
        let allowed: Vec<&str> = Tool::all().filter(|t| child_may_call(*t)).map(Tool::as_str).collect();
        assert_eq!(allowed, ["list_files", "read_file", "search_code", "repo_map", "finish"]);
        let mut parent = Case::sample();
        parent.allowed_tools = vec![Tool::ReadFile, Tool::WriteFile, Tool::DelegateReadonly];
        let child = child_case(&parent, " where? ", 3);
        assert_eq!(child.allowed_tools, [Tool::ReadFile, Tool::Finish], "finish is always there to answer");
        assert_eq!(child.step_budget, 3);
        assert!(child.prompt.starts_with("Question from the agent: where?\n"), "{}", child.prompt);
    }

    #[test]
    fn each_end_has_its_code_and_class() {
        let b = Budget { max_steps: 4, max_tokens: 10 };
        assert_eq!((End::OutOfSteps.code(), End::OutOfSteps.outcome()), ("out_of_steps", Outcome::Failed));
        assert!(End::OutOfSteps.message(b).contains("its 4 step(s)"));
        assert!(End::OutOfTokens.message(b).contains("its 10 tokens"));
        assert_eq!(End::ModelError("x".into()).outcome(), Outcome::ProviderError);
        assert_eq!(End::Answered("a".into()).outcome(), Outcome::Passed);
    }
}
