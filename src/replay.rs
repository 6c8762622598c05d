//! Replay: a pure fold from a cell's events to its [`CellSummary`].
//!
//! The live run feeds the same [`SummaryBuilder`] with each event as it is written, so the
//! summary printed at the end of `hcbench run` and the one rebuilt by `hcbench replay` come
//! from one function and must be equal (a test checks it). Nothing here reads the clock.
//!
//! Replay parses each line into a [`Lean`] event: only the fields the fold reads, dispatched
//! on [`EventKind`], the same table of kinds the writer tags lines with. Events of kinds this
//! build does not know are skipped and counted by the trace reader's rules
//! (`crate::trace::reader`), and the count is kept in [`CellSummary::skipped_events`].

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::trace::event::{Batch, EventBody, EventKind, ModelInfo, Outcome, Usage};
use crate::trace::pack::Slot;
use crate::trace::reader::for_each_line_from;
use crate::trace::stored::{RunTraces, StoredAt};
use crate::trace::{Event, Header, Parsed, TraceError};

mod hot;
mod names;
mod scan;

pub use names::{Name, Names, Tally};

/// Version of the results line format (`results.jsonl`).
pub const SUMMARY_SCHEMA_VERSION: u32 = 1;

/// The verifier metric holding the step of the first read of the case's target file.
const FIRST_READ_METRIC: &str = "first_read_step";

fn one() -> u32 {
    1
}

/// The report group of `profile` under `ablation` (see [`CellSummary::group`]).
pub fn group_label(profile: &str, ablation: &str) -> String {
    if ablation.is_empty() { profile.to_string() } else { format!("{profile}/{ablation}") }
}

/// Everything reports need about one cell, derived from its trace alone.
///
/// A report holds one per cell, so its size is the report's memory per cell: texts that repeat
/// across cells are [`Name`]s a report shares between them, and counts are [`Tally`]s (sorted
/// vectors); both serialize as the `String` and `BTreeMap` they replace (src/replay/names.rs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CellSummary {
    pub schema_version: u32,
    pub run_id: Name,
    pub cell_id: String,
    pub case_id: Name,
    pub category: Name,
    pub split: Name,
    pub profile: Name,
    pub provider: Name,
    pub model: Name,
    /// None when the trace has no run_finished (crash or interruption).
    pub outcome: Option<Outcome>,
    pub reward: f64,
    pub stop_reason: Name,
    pub reason: Name,
    /// Model turns that produced actions (a reply of several calls is one step; see
    /// `batched_calls`), plus unparseable replies.
    pub steps: u32,
    pub step_budget: u32,
    pub tool_calls: u32,
    pub tool_counts: Tally<u32>,
    pub policy_denials: u32,
    pub tool_failures: u32,
    pub invalid_actions: u32,
    pub model_errors: u32,
    pub model_retries: u32,
    /// Reads of a path already read earlier in the cell.
    pub repeated_reads: u32,
    pub files_modified: Vec<String>,
    /// Step of the first successful edit or write.
    pub first_edit_step: Option<u32>,
    pub tests_passed: Option<bool>,
    pub verifier_passed: Option<bool>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Prices from the profile (USD per million tokens), for cost accounting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_price_per_mtok: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_price_per_mtok: Option<f64>,
    /// Digest of the agent spec that drove the cell.
    #[serde(default)]
    pub agent_spec: Name,
    /// The ablation the cell ran (`hcbench ablate`); empty for every other command.
    #[serde(default, skip_serializing_if = "str::is_empty")]
    pub ablation: Name,
    /// Epoch of the cell (1-based).
    #[serde(default = "one")]
    pub epoch: u32,
    pub wall_ms: u64,
    /// The trace's events, and per kind; `checkpoint` events are in neither (the harness's
    /// bookkeeping, as many as time allowed: src/agent/checkpoint.rs).
    pub events: u64,
    pub event_counts: Tally<u64>,
    pub metrics: Tally<serde_json::Value>,
    /// True when a cut last line was dropped while reading the trace.
    pub truncated: bool,
    /// Events of kinds this hcbench does not know (written by a newer one), skipped while
    /// reading the trace, by kind. They are in neither `events` nor `event_counts`.
    #[serde(default, skip_serializing_if = "Tally::is_empty")]
    pub skipped_events: Tally<u64>,
    // What the context pipeline did (`hcbench ablate --context` reports these). Each is
    // omitted from a results line when zero, so lines of cells that had no such events read
    // as they always did, and an older line reads as zeros.
    /// Turns whose context was packed (`context_packed` events).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub context_turns: u32,
    /// Estimated tokens of every packed context, summed over turns (`total_tokens`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub context_tokens: u64,
    /// Sections the budget reduced (cut or dropped blocks), summed over turns.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub budget_reductions: u32,
    /// Blocks dropped whole to fit a section's budget, summed over sections and turns.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_blocks: u32,
    /// Repo maps injected into the context (`repo_map_used` with `via: context`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub repo_map_injections: u32,
    /// Repo maps the model asked for with the `repo_map` tool (`via: tool`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub repo_map_tool_uses: u32,
    /// Working-memory updates (`memory_updated` events).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub memory_updates: u32,
    /// Compactions of older observations (`context_compacted` events).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub compactions: u32,
    /// Corrective retries after a denied, invalid or unparseable action (`policy_retry`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub policy_retries: u32,
    /// Calls a pre hook of the agent spec denied (`hook_decision` with `deny`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub hook_denials: u32,
    /// Hook runs that failed (`hook_decision` with `error`): a pre hook's call did not run.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub hook_errors: u32,
    /// Replies that held several calls (`model_action` events with a `batch`), each counted once.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub batches: u32,
    /// Calls that came in those replies, refused ones included.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub batched_calls: u32,
    /// Input tokens the provider served from its prompt cache, where it reports them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_input_tokens: u64,
    /// True when the case declares a target file (`verifier.first_read`): the verifier then
    /// records `first_read_step`, null when the agent never read it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub target_declared: bool,
    /// Step of the first read of the declared target file; None when never read or when the
    /// case declares none (`target_declared` tells the two apart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_target_read_step: Option<u32>,
    // Read-only delegations (`delegation_completed` and `delegation_failed` events). Their
    // tokens are in `input_tokens` and `output_tokens` too: a delegation's cost is the cell's.
    /// Delegations that ended, answered or not.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub delegations: u32,
    /// Of those, the ones that ended without an answer.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub delegations_failed: u32,
    /// Model turns of all the cell's delegations.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub delegation_steps: u32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub delegation_input_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub delegation_output_tokens: u64,
    /// Times the cell continued from a checkpoint after an interruption (`resumed` events).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub resumes: u32,
    /// A multi-session case's sessions, in order, from their `session_finished` events.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sessions: Vec<SessionProgress>,
}

/// What one session of a multi-session case got done (`session_finished`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionProgress {
    pub index: u32,
    /// `initializer` or `coding`.
    pub role: String,
    pub steps_used: u32,
    pub stop_reason: String,
    /// Features the agent's `feature_list.json` marked passing after the session.
    pub marked: u32,
    /// Features that passed the hidden checks after the session.
    pub verified: u32,
    /// Features marked passing that failed their hidden check.
    pub false_claims: u32,
}

fn is_zero<T: Default + PartialEq>(n: &T) -> bool {
    *n == T::default()
}

impl CellSummary {
    /// Model cost in US dollars, when the profile states prices.
    pub fn cost_usd(&self) -> Option<f64> {
        let (i, o) = (self.input_price_per_mtok?, self.output_price_per_mtok?);
        Some((self.input_tokens as f64 * i + self.output_tokens as f64 * o) / 1e6)
    }

    /// What the cell's delegations cost in US dollars (part of [`Self::cost_usd`]), when the
    /// profile states prices.
    pub fn delegation_cost_usd(&self) -> Option<f64> {
        let (i, o) = (self.input_price_per_mtok?, self.output_price_per_mtok?);
        Some((self.delegation_input_tokens as f64 * i + self.delegation_output_tokens as f64 * o) / 1e6)
    }

    /// The group reports aggregate the cell under: its profile, or `profile/ablation` in an
    /// ablate run, so one code path compares profiles and ablations alike.
    pub fn group(&self) -> std::borrow::Cow<'_, str> {
        if self.ablation.is_empty() {
            std::borrow::Cow::Borrowed(&self.profile)
        } else {
            std::borrow::Cow::Owned(group_label(&self.profile, &self.ablation))
        }
    }

    /// The outcome as reports show it; a trace that never finished is a harness error.
    pub fn outcome_label(&self) -> &'static str {
        self.outcome.map(Outcome::as_str).unwrap_or("incomplete")
    }

    /// Makes this summary's repeated texts (run, case, profile, model, reasons, and the names
    /// its counts are kept under) the copies `names` already holds, so that cells share them.
    pub fn share_names(&mut self, names: &mut Names) {
        for name in [
            &mut self.run_id,
            &mut self.case_id,
            &mut self.category,
            &mut self.split,
            &mut self.profile,
            &mut self.provider,
            &mut self.model,
            &mut self.stop_reason,
            &mut self.reason,
            &mut self.agent_spec,
            &mut self.ablation,
        ] {
            names.share(name);
        }
        names.share_keys(&mut self.tool_counts);
        names.share_keys(&mut self.event_counts);
        names.share_keys(&mut self.metrics);
        names.share_keys(&mut self.skipped_events);
        self.cell_id.shrink_to_fit();
        self.files_modified.shrink_to_fit();
    }

    /// A note for people when events were skipped: the cell and the kinds; None otherwise.
    pub(crate) fn skipped_note(&self) -> Option<String> {
        skipped_sentence(std::slice::from_ref(self)).map(|sentence| format!("{}: {sentence}", self.cell_id))
    }
}

/// What was skipped across `summaries`, by kind, in one sentence; None when nothing was.
pub(crate) fn skipped_sentence(summaries: &[CellSummary]) -> Option<String> {
    let mut by_kind: BTreeMap<&str, u64> = BTreeMap::new();
    for (kind, n) in summaries.iter().flat_map(|s| &s.skipped_events) {
        *by_kind.entry(kind).or_default() += n;
    }
    if by_kind.is_empty() {
        return None;
    }
    let total: u64 = by_kind.values().sum();
    let kinds: Vec<String> = by_kind.iter().map(|(k, n)| format!("{n} {k}")).collect();
    Some(format!(
        "skipped {total} event(s) of kinds this hcbench does not know ({}); a newer hcbench wrote them, upgrade to count them",
        kinds.join(", ")
    ))
}

/// Incremental fold over a cell's events.
///
/// A resumed cell's trace holds events the interrupted process wrote after its last
/// checkpoint; they did happen, but the resumed loop continued from the checkpoint as if they
/// had not. So the fold keeps a copy of itself as it was at each `checkpoint` event, and a
/// `resumed` event puts that copy back: the summary is the one an uninterrupted run of the
/// same actions folds, plus the resume.
#[derive(Debug, Clone)]
pub struct SummaryBuilder {
    s: Option<CellSummary>,
    /// The fold as it stood at the last `checkpoint` event (without its own snapshot).
    at_checkpoint: Option<Box<SummaryBuilder>>,
    /// Events per kind, indexed by `EventKind as usize`: cheaper per event than the summary's
    /// map, which `finish` fills from it.
    kind_counts: [u64; EventKind::ALL.len()],
    modified: BTreeSet<String>,
    read_paths: BTreeSet<String>,
}

// Written out because `Default` for arrays stops at 32 elements, and the table of kinds may grow.
impl Default for SummaryBuilder {
    fn default() -> Self {
        SummaryBuilder {
            s: None,
            at_checkpoint: None,
            kind_counts: [0; EventKind::ALL.len()],
            modified: BTreeSet::new(),
            read_paths: BTreeSet::new(),
        }
    }
}

impl SummaryBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Folds one full event (a trace read back whole).
    pub fn observe(&mut self, event: &Event) {
        self.observe_body(&event.run_id, &event.cell_id, &event.body);
    }

    /// Folds the event of `body` in the cell `cell_id` of run `run_id` (the live run's path,
    /// which holds the body as written and no envelope).
    pub fn observe_body(&mut self, run_id: &str, cell_id: &str, body: &EventBody) {
        self.observe_lean(run_id, cell_id, Lean::from_body(body));
    }

    /// Folds one lean event of the cell `cell_id` of run `run_id` (replay's path; the live
    /// path converts to the same shape, so both go through exactly this code).
    pub fn observe_lean(&mut self, run_id: &str, cell_id: &str, event: Lean) {
        if let LeanBody::Resumed = event.body
            && let Some(saved) = self.at_checkpoint.take()
        {
            // Back to the checkpoint the cell continued from; the resume itself is counted below.
            *self = *saved;
        }
        let s = self.s.get_or_insert_with(|| CellSummary {
            schema_version: SUMMARY_SCHEMA_VERSION,
            run_id: run_id.into(),
            cell_id: cell_id.to_string(),
            ..Default::default()
        });
        // A `checkpoint` is the harness's bookkeeping, not the cell's work, and how many a cell
        // writes depends on time (`--checkpoint-interval`): it is counted in neither `events`
        // nor `event_counts`, so the summaries of two runs of the same cell agree.
        if !matches!(event.body, LeanBody::Checkpoint) {
            s.events += 1;
            self.kind_counts[event.kind as usize] += 1;
        }
        match event.body {
            LeanBody::RunStarted(r) => {
                s.case_id = r.case_id;
                s.category = r.category;
                s.split = r.split;
                s.profile = r.profile;
                s.provider = r.model.provider.into();
                s.model = r.model.model.into();
                s.step_budget = r.step_budget;
                s.input_price_per_mtok = r.model.input_price_per_mtok;
                s.output_price_per_mtok = r.model.output_price_per_mtok;
                s.epoch = r.epoch;
                s.agent_spec = r.agent_spec;
                s.ablation = r.ablation;
            }
            LeanBody::ModelAction { usage, batch } => {
                // A reply is one step however many calls it held: the step budget counts
                // model turns (docs/architecture.md, "Batches").
                match batch {
                    None => s.steps += 1,
                    Some(b) => {
                        s.batched_calls += 1;
                        if b.position == 1 {
                            s.steps += 1;
                            s.batches += 1;
                        }
                    }
                }
                if let Some(u) = usage {
                    s.input_tokens += u.input_tokens;
                    s.output_tokens += u.output_tokens;
                    s.cached_input_tokens += u.cached_input_tokens.unwrap_or(0);
                }
            }
            LeanBody::ModelRetry => s.model_retries += 1,
            LeanBody::ModelError { error_kind, usage } => {
                s.model_errors += 1;
                if let Some(u) = usage {
                    s.input_tokens += u.input_tokens;
                    s.output_tokens += u.output_tokens;
                    s.cached_input_tokens += u.cached_input_tokens.unwrap_or(0);
                }
                if error_kind == "parse" || error_kind == "truncated" {
                    s.steps += 1;
                    s.invalid_actions += 1;
                }
            }
            LeanBody::PolicyDecision { allowed, invalid } => {
                if invalid {
                    s.invalid_actions += 1;
                } else if !allowed {
                    s.policy_denials += 1;
                }
            }
            LeanBody::ToolResult(t) => {
                if t.denied {
                    return;
                }
                s.tool_calls += 1;
                *s.tool_counts.entry(&t.tool) += 1;
                if !t.ok {
                    s.tool_failures += 1;
                }
                if t.ok && !t.modified.is_empty() && s.first_edit_step.is_none() {
                    s.first_edit_step = Some(t.step);
                }
                self.modified.extend(t.modified);
                if let Some(path) = t.read
                    && !self.read_paths.insert(path)
                {
                    s.repeated_reads += 1;
                }
            }
            LeanBody::TestResult { passed } => s.tests_passed = Some(passed),
            LeanBody::VerifierResult { passed, metrics } => {
                s.verifier_passed = Some(passed);
                // The verifier writes `first_read_step` exactly when the case declares a
                // target, as null when the agent never read it.
                if let Some(step) = metrics.get(FIRST_READ_METRIC) {
                    s.target_declared = true;
                    s.first_target_read_step = step.as_u64().and_then(|n| u32::try_from(n).ok());
                }
                s.metrics.extend(metrics);
            }
            LeanBody::ContextPacked(c) => {
                s.context_turns += 1;
                s.context_tokens += c.total_tokens;
                s.budget_reductions += c.reduced_sections;
                s.dropped_blocks += c.dropped_blocks;
            }
            LeanBody::RepoMapUsed { via_tool } => {
                if via_tool {
                    s.repo_map_tool_uses += 1;
                } else {
                    s.repo_map_injections += 1;
                }
            }
            LeanBody::MemoryUpdated => s.memory_updates += 1,
            LeanBody::ContextCompacted => s.compactions += 1,
            LeanBody::PolicyRetry => s.policy_retries += 1,
            LeanBody::Delegation(d) => {
                s.delegations += 1;
                s.delegations_failed += u32::from(d.failed);
                s.delegation_steps += d.steps;
                s.delegation_input_tokens += d.input_tokens;
                s.delegation_output_tokens += d.output_tokens;
                s.input_tokens += d.input_tokens;
                s.output_tokens += d.output_tokens;
            }
            LeanBody::HookDecision { decision, policy_denied } => match decision.as_str() {
                "deny" => s.hook_denials += 1,
                "error" => s.hook_errors += 1,
                // A rewrite the policy refused is a denial of the policy, as if the model had
                // asked for the rewritten call.
                _ if policy_denied => s.policy_denials += 1,
                _ => {}
            },
            LeanBody::SessionFinished(p) => s.sessions.push(p),
            LeanBody::RunFinished(f) => {
                s.outcome = Some(f.outcome);
                s.reward = f.reward;
                s.stop_reason = f.stop_reason;
                s.reason = f.reason;
                s.wall_ms = f.elapsed_ms;
            }
            LeanBody::Resumed => s.resumes += 1,
            LeanBody::Checkpoint => {
                // The earlier checkpoint's state is dropped before the copy, not copied with it.
                self.at_checkpoint = None;
                self.at_checkpoint = Some(Box::new(self.clone()));
            }
            LeanBody::Other => {}
        }
    }

    /// Policy denials seen so far (the verifier's `forbid_denials` check reads this).
    pub fn denials(&self) -> u32 {
        self.s.as_ref().map_or(0, |s| s.policy_denials)
    }

    /// Delegations that ended so far (the next one's number is this plus one).
    pub fn delegations(&self) -> u32 {
        self.s.as_ref().map_or(0, |s| s.delegations)
    }

    /// Input and output tokens seen so far (a delegation's token budget reads this).
    pub fn tokens(&self) -> u64 {
        self.s.as_ref().map_or(0, |s| s.input_tokens + s.output_tokens)
    }

    /// Input and output tokens counted so far (a checkpoint records them).
    pub fn token_counts(&self) -> (u64, u64) {
        self.s.as_ref().map_or((0, 0), |s| (s.input_tokens, s.output_tokens))
    }

    /// Model actions seen so far.
    pub fn steps(&self) -> u32 {
        self.s.as_ref().map_or(0, |s| s.steps)
    }

    /// None when no event was observed.
    pub fn finish(mut self) -> Option<CellSummary> {
        let modified = std::mem::take(&mut self.modified);
        let kind_counts = self.kind_counts;
        self.s.map(|mut s| {
            s.files_modified = modified.into_iter().collect();
            // Built in name order, from names made once per process: a trace's dozen kinds
            // cost one allocation here, not one per kind and the moves of sorted inserts.
            let kinds = kind_names();
            let mut counts = Vec::with_capacity(kind_counts.iter().filter(|n| **n > 0).count());
            for (kind, name) in kinds {
                let n = kind_counts[*kind as usize];
                if n > 0 {
                    counts.push((name.clone(), n));
                }
            }
            s.event_counts = Tally::from_sorted(counts);
            s
        })
    }
}

/// Every kind with its name, in name order, made once per process.
fn kind_names() -> &'static [(EventKind, Name)] {
    static NAMES: std::sync::LazyLock<Vec<(EventKind, Name)>> = std::sync::LazyLock::new(|| {
        let mut names: Vec<(EventKind, Name)> = EventKind::ALL.iter().map(|k| (*k, Name::from(k.as_str()))).collect();
        names.sort_by(|a, b| a.1.as_str().cmp(b.1.as_str()));
        names
    });
    &NAMES
}

/// Folds a list of events.
pub fn summarize(events: &[Event]) -> Option<CellSummary> {
    let mut b = SummaryBuilder::new();
    for e in events {
        b.observe(e);
    }
    b.finish()
}

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error(transparent)]
    Trace(#[from] TraceError),
    #[error("trace {0} holds no events")]
    Empty(PathBuf),
    #[error("cannot read run directory {path}: {source}")]
    RunDir { path: PathBuf, source: std::io::Error },
    #[error("{0} is neither a trace.jsonl file nor a run directory with cells/*/trace.jsonl")]
    NotATrace(PathBuf),
}

/// Replays one trace file, streaming: only the fields summaries need are parsed, and memory
/// stays bounded by the longest line.
pub fn replay_trace(path: &Path) -> Result<CellSummary, ReplayError> {
    replay_trace_of(path, None)
}

/// [`replay_trace`] of a trace that must belong to run `run_id` (the run directory's
/// manifest says which): an event of another run is a broken sequence, not a step.
pub fn replay_trace_of(path: &Path, run_id: Option<&str>) -> Result<CellSummary, ReplayError> {
    replay_opened(crate::trace::stored::open(path), path, run_id)
}

/// Replays the plain bytes `reader` gives of the trace named `path`.
fn replay_reader(reader: impl BufRead, path: &Path, run_id: Option<&str>) -> Result<CellSummary, ReplayError> {
    let mut builder = SummaryBuilder::new();
    let stats =
        for_each_line_from(reader, path, run_id, Lean::parse, |h, e| builder.observe_lean(&h.run_id, &h.cell_id, e))?;
    let mut summary = builder.finish().ok_or_else(|| ReplayError::Empty(path.to_path_buf()))?;
    summary.truncated = stats.truncated;
    summary.skipped_events = stats.skipped.into();
    Ok(summary)
}

/// Replays `cell`'s trace where `traces` found it, checked to belong to run `run_id` when given;
/// None when the run stores no trace of that cell. What the report's build reads a run with.
pub fn replay_stored(traces: &RunTraces, cell: &str, run_id: Option<&str>) -> Option<Result<CellSummary, ReplayError>> {
    let at = traces.find(cell)?;
    let path = traces.path(cell);
    Some(replay_opened(traces.open(cell, at), &path, run_id))
}

/// Replays the trace named `path` that `opened` is the reader of, or says why it did not open.
fn replay_opened(
    opened: std::io::Result<impl BufRead>,
    path: &Path,
    run_id: Option<&str>,
) -> Result<CellSummary, ReplayError> {
    let reader = opened.map_err(|source| TraceError::Io { path: path.to_path_buf(), source })?;
    replay_reader(reader, path, run_id)
}

/// The trace files of a run directory, in cell-id order.
pub fn run_traces(run_dir: &Path) -> Result<Vec<PathBuf>, ReplayError> {
    let traces = scan_run(run_dir)?;
    let mut paths: Vec<PathBuf> = traces.cells().into_iter().map(|(cell, _)| traces.path(&cell)).collect();
    paths.sort_by(|a, b| crate::util::natural_cmp(&a.to_string_lossy(), &b.to_string_lossy()));
    Ok(paths)
}

/// Where the traces of `run_dir` are ([`RunTraces`]), or why it is not a run directory.
fn scan_run(run_dir: &Path) -> Result<RunTraces, ReplayError> {
    RunTraces::scan(run_dir).map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound {
            ReplayError::NotATrace(run_dir.to_path_buf())
        } else {
            ReplayError::RunDir { path: run_dir.join("cells"), source }
        }
    })
}

/// One trace's replay: its path and its summary or why it could not be read.
pub type ReplayedTrace = (PathBuf, Result<CellSummary, ReplayError>);

/// Most bytes of the run's pack read at once when its cells are replayed in pack order: frames
/// back to back, read with one positioned read and decoded where they lie. Small enough that
/// a run's pack splits into many such spans for the threads, and stays in the cache.
const PACK_SPAN: u64 = 256 * 1024;

/// Replays every trace of a run directory in parallel, each checked to belong to the run
/// `run_of` gives for its cell (by the cell folder's name), when it gives one. A corrupt trace
/// does not fail the others: it comes back as its own error, which reports show as a harness
/// error. Results come in cell-id order.
///
/// The run's traces are found once ([`RunTraces`]: a re-run cell's plain trace still wins over
/// its pack entry); the pack's entries are read in pack order, a span of frames at a time
/// ([`PACK_SPAN`]), so a finished cell costs no file lookups and no read of its own.
pub fn replay_run(
    run_dir: &Path,
    run_of: &(dyn Fn(&str) -> Option<String> + Sync),
) -> Result<Vec<ReplayedTrace>, ReplayError> {
    replay_run_in_spans(run_dir, run_of, PACK_SPAN)
}

/// [`replay_run`] reading at most `span_bytes` of the pack at once (tests cut it smaller).
fn replay_run_in_spans(
    run_dir: &Path,
    run_of: &(dyn Fn(&str) -> Option<String> + Sync),
    span_bytes: u64,
) -> Result<Vec<ReplayedTrace>, ReplayError> {
    let traces = scan_run(run_dir)?;
    let mut cells = traces.cells();
    // Cell-id order, as the results come back; each cell keeps its place in it.
    cells.sort_by(|a, b| crate::util::natural_cmp(&a.0, &b.0));
    let mut in_pack: Vec<(usize, Slot)> = Vec::new();
    let mut spans: Vec<Vec<(usize, Slot)>> = Vec::new();
    let mut files: Vec<usize> = Vec::new();
    for (i, (_, at)) in cells.iter().enumerate() {
        match at {
            StoredAt::Packed(slot) => in_pack.push((i, *slot)),
            _ => files.push(i),
        }
    }
    in_pack.sort_by_key(|(_, slot)| slot.offset);
    for entry in in_pack {
        match spans.last_mut() {
            Some(span) if entry.1.offset + entry.1.len - span[0].1.offset <= span_bytes => span.push(entry),
            _ => spans.push(vec![entry]),
        }
    }
    let replay = |i: usize, reader: std::io::Result<Box<dyn BufRead + Send>>| -> (usize, ReplayedTrace) {
        let cell = &cells[i].0;
        let path = traces.path(cell);
        let result = replay_opened(reader, &path, run_of(cell).as_deref());
        (i, (path, result))
    };
    let from_files = files.par_iter().map(|&i| replay(i, traces.open(&cells[i].0, cells[i].1)));
    let from_pack = spans.par_iter().flat_map_iter(|span| -> Vec<(usize, ReplayedTrace)> {
        let (first, last) = (span[0].1, span[span.len() - 1].1);
        match traces.read_span(first, last) {
            Ok(bytes) => span
                .iter()
                .map(|&(i, slot)| {
                    let at = (slot.offset - first.offset) as usize;
                    let frame = &bytes[at..at + slot.len as usize];
                    replay(i, traces.open_frame(&cells[i].0, slot, frame))
                })
                .collect(),
            // Each cell of the span says so.
            Err(e) => span.iter().map(|&(i, _)| replay(i, Err(std::io::Error::new(e.kind(), e.to_string())))).collect(),
        }
    });
    // Made at its final size: grown by doubling, the summaries (several hundred bytes each) were
    // copied again at each doubling, into fresh pages the kernel had to fault in and zero.
    let mut replayed: Vec<(usize, ReplayedTrace)> = Vec::with_capacity(cells.len());
    replayed.par_extend(from_files.chain(from_pack));
    // Each put in its place once: a summary is large, and a sort would move each many times.
    let mut in_order: Vec<Option<ReplayedTrace>> = (0..cells.len()).map(|_| None).collect();
    for (i, r) in replayed {
        in_order[i] = Some(r);
    }
    Ok(in_order.into_iter().map(|r| r.expect("every cell is replayed once")).collect())
}

/// The parts of an event the summary fold reads. Large payloads (tool output, arguments,
/// context sections) are skipped while parsing, which is what makes replay fast. The ids are
/// in the line's [`Header`], which the reader checks and hands over beside it.
#[derive(Debug, Clone)]
pub struct Lean {
    pub kind: EventKind,
    pub body: LeanBody,
}

#[derive(Debug, Clone)]
pub enum LeanBody {
    /// Boxed: it is by far the largest variant and comes once per trace, and every line's
    /// result is moved a few times on its way to the fold (unboxed, those moves were copies of
    /// about 300 bytes per line, a tenth of replay's time).
    RunStarted(Box<LeanRunStarted>),
    ModelAction {
        usage: Option<Usage>,
        batch: Option<Batch>,
    },
    ModelRetry,
    ModelError {
        error_kind: String,
        usage: Option<Usage>,
    },
    PolicyDecision {
        allowed: bool,
        invalid: bool,
    },
    ToolResult(LeanToolResult),
    TestResult {
        passed: bool,
    },
    VerifierResult {
        passed: bool,
        metrics: BTreeMap<String, serde_json::Value>,
    },
    RunFinished(LeanRunFinished),
    ContextPacked(LeanContext),
    RepoMapUsed {
        /// True for the `repo_map` tool, false for an injection into the context.
        via_tool: bool,
    },
    MemoryUpdated,
    ContextCompacted,
    PolicyRetry,
    /// A delegation that ended (`delegation_completed`, or `delegation_failed` with `failed`).
    Delegation(LeanDelegation),
    HookDecision {
        decision: String,
        policy_denied: bool,
    },
    SessionFinished(SessionProgress),
    /// A saved state the fold may come back to.
    Checkpoint,
    /// Back to the last checkpoint.
    Resumed,
    /// Kinds the fold only counts (state_updated, repo_map_built, delegation_started,
    /// session_started, resume_refused).
    Other,
}

/// What the fold reads of a delegation's end: what it spent.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct LeanDelegation {
    #[serde(skip)]
    failed: bool,
    #[serde(default)]
    steps: u32,
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
}

impl LeanDelegation {
    fn of(failed: bool, d: &crate::trace::event::Delegated) -> LeanDelegation {
        LeanDelegation { failed, steps: d.steps, input_tokens: d.input_tokens, output_tokens: d.output_tokens }
    }
}

/// What the fold reads of a `context_packed` event: totals, with the sections already
/// reduced to two counts so the lean path keeps no per-section data.
#[derive(Debug, Clone, Default)]
pub struct LeanContext {
    total_tokens: u64,
    reduced_sections: u32,
    dropped_blocks: u32,
}

impl LeanContext {
    fn of(total_tokens: usize, sections: impl Iterator<Item = (bool, usize)>) -> LeanContext {
        let mut c = LeanContext { total_tokens: total_tokens as u64, ..Default::default() };
        for (reduced, dropped) in sections {
            c.add_section(reduced, dropped);
        }
        c
    }

    /// Counts one section (the hand-written parser counts them as they pass).
    fn add_section(&mut self, reduced: bool, dropped: usize) {
        self.reduced_sections += u32::from(reduced);
        self.dropped_blocks += dropped as u32;
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct LeanRunStarted {
    case_id: Name,
    category: Name,
    split: Name,
    profile: Name,
    model: ModelInfo,
    step_budget: u32,
    #[serde(default = "one")]
    epoch: u32,
    #[serde(default)]
    agent_spec: Name,
    #[serde(default)]
    ablation: Name,
}

#[derive(Debug, Clone, Deserialize)]
pub struct LeanToolResult {
    step: u32,
    tool: String,
    ok: bool,
    #[serde(default)]
    denied: bool,
    #[serde(default)]
    modified: Vec<String>,
    #[serde(default)]
    read: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct LeanRunFinished {
    outcome: Outcome,
    reward: f64,
    stop_reason: Name,
    reason: Name,
    elapsed_ms: u64,
}

#[derive(Deserialize)]
struct JustUsage {
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    batch: Option<Batch>,
}

#[derive(Deserialize)]
struct JustError {
    error_kind: String,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct JustDecision {
    allowed: bool,
    #[serde(default)]
    invalid: bool,
}

#[derive(Deserialize)]
struct JustHook {
    decision: String,
    #[serde(default)]
    policy_denied: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
struct JustContext {
    sections: Vec<JustSection>,
    #[serde(default)]
    total_tokens: usize,
}

#[derive(Deserialize)]
struct JustSection {
    #[serde(default)]
    reduced: bool,
    #[serde(default)]
    dropped: usize,
}

#[derive(Deserialize)]
struct JustVia {
    via: String,
}

/// `repo_map_used.via` of the `repo_map` tool (the other value is `context`).
const VIA_TOOL: &str = "tool";

#[derive(Deserialize)]
struct JustPassed {
    passed: bool,
}

/// What the fold reads of a `session_finished` event.
#[derive(Deserialize)]
struct JustSession {
    index: u32,
    role: String,
    steps_used: u32,
    stop_reason: String,
    marked_passing: Vec<String>,
    verified_passing: Vec<String>,
    #[serde(default)]
    false_claims: Vec<String>,
}

#[derive(Deserialize)]
struct JustVerifier {
    passed: bool,
    #[serde(default)]
    metrics: BTreeMap<String, serde_json::Value>,
}

impl Lean {
    /// Parses one trace line; returns its envelope too (for the reader's checks), and the
    /// kind's tag instead of an event when this build does not know the kind.
    ///
    /// One pass: the envelope is visited key by key, and since writers put `kind` before
    /// `data`, the payload is parsed straight into its lean shape, skipping large fields. A
    /// line with `data` first (another writer) falls back to capturing the payload raw.
    ///
    /// Lines as hcbench writes them are read by hand ([`hot`]), else through the faster
    /// deserializer of [`scan`] with the same visitor; a line both refuse (anything unusual,
    /// or not JSON) is parsed by serde_json with that visitor, which then decides, so all give
    /// one result and serde_json names every error.
    pub fn parse(line: &str) -> Result<(Header<'_>, Parsed<Lean>), serde_json::Error> {
        if let Ok(parsed) = hot::parse(line) {
            return Ok(parsed);
        }
        if let Ok(parsed) = scan::parse(line, EnvelopeVisitor) {
            return Ok(parsed);
        }
        Self::parse_with_serde_json(line)
    }

    /// [`Lean::parse`] by serde_json alone.
    pub fn parse_with_serde_json(line: &str) -> Result<(Header<'_>, Parsed<Lean>), serde_json::Error> {
        use serde::de::Deserializer as _;
        let mut de = serde_json::Deserializer::from_str(line);
        let out = (&mut de).deserialize_map(EnvelopeVisitor)?;
        de.end()?;
        Ok(out)
    }

    /// The same projection of an event's body.
    pub fn from_body(event: &EventBody) -> Lean {
        let body = match event {
            EventBody::RunStarted {
                case_id,
                category,
                split,
                profile,
                model,
                step_budget,
                epoch,
                agent_spec,
                ablation,
                ..
            } => LeanBody::RunStarted(Box::new(LeanRunStarted {
                case_id: case_id.into(),
                category: category.into(),
                split: split.into(),
                profile: profile.into(),
                model: model.clone(),
                step_budget: *step_budget,
                epoch: *epoch,
                agent_spec: agent_spec.into(),
                ablation: ablation.into(),
            })),
            EventBody::ModelAction { usage, batch, .. } => {
                LeanBody::ModelAction { usage: usage.clone(), batch: *batch }
            }
            EventBody::ModelRetry { .. } => LeanBody::ModelRetry,
            EventBody::ModelError { error_kind, usage, .. } => {
                LeanBody::ModelError { error_kind: error_kind.clone(), usage: usage.clone() }
            }
            EventBody::PolicyDecision { allowed, invalid, .. } => {
                LeanBody::PolicyDecision { allowed: *allowed, invalid: *invalid }
            }
            EventBody::ToolResult { step, tool, ok, denied, modified, read, .. } => {
                LeanBody::ToolResult(LeanToolResult {
                    step: *step,
                    tool: tool.clone(),
                    ok: *ok,
                    denied: *denied,
                    modified: modified.clone(),
                    read: read.clone(),
                })
            }
            EventBody::TestResult { passed, .. } => LeanBody::TestResult { passed: *passed },
            EventBody::VerifierResult { passed, metrics, .. } => {
                LeanBody::VerifierResult { passed: *passed, metrics: metrics.clone() }
            }
            EventBody::RunFinished { outcome, reward, stop_reason, reason, elapsed_ms } => {
                LeanBody::RunFinished(LeanRunFinished {
                    outcome: *outcome,
                    reward: *reward,
                    stop_reason: stop_reason.into(),
                    reason: reason.into(),
                    elapsed_ms: *elapsed_ms,
                })
            }
            EventBody::ContextPacked { sections, total_tokens, .. } => {
                LeanBody::ContextPacked(LeanContext::of(*total_tokens, sections.iter().map(|s| (s.reduced, s.dropped))))
            }
            EventBody::RepoMapUsed { via, .. } => LeanBody::RepoMapUsed { via_tool: via == VIA_TOOL },
            EventBody::MemoryUpdated { .. } => LeanBody::MemoryUpdated,
            EventBody::ContextCompacted { .. } => LeanBody::ContextCompacted,
            EventBody::PolicyRetry { .. } => LeanBody::PolicyRetry,
            EventBody::DelegationCompleted { spent, .. } => LeanBody::Delegation(LeanDelegation::of(false, spent)),
            EventBody::DelegationFailed { spent, .. } => LeanBody::Delegation(LeanDelegation::of(true, spent)),
            EventBody::HookDecision { decision, policy_denied, .. } => {
                LeanBody::HookDecision { decision: decision.clone(), policy_denied: policy_denied.is_some() }
            }
            EventBody::SessionFinished {
                index,
                role,
                steps_used,
                stop_reason,
                marked_passing,
                verified_passing,
                false_claims,
                ..
            } => LeanBody::SessionFinished(SessionProgress {
                index: *index,
                role: role.clone(),
                steps_used: *steps_used,
                stop_reason: stop_reason.clone(),
                marked: marked_passing.len() as u32,
                verified: verified_passing.len() as u32,
                false_claims: false_claims.len() as u32,
            }),
            EventBody::Checkpoint { .. } => LeanBody::Checkpoint,
            EventBody::Resumed { .. } => LeanBody::Resumed,
            EventBody::StateUpdated { .. }
            | EventBody::RepoMapBuilt { .. }
            | EventBody::DelegationStarted { .. }
            | EventBody::SessionStarted { .. }
            | EventBody::ResumeRefused { .. } => LeanBody::Other,
        };
        Lean { kind: event.kind(), body }
    }
}

/// Parses a payload of `kind` into its lean shape. The match is exhaustive over the table of
/// kinds, so a kind added there does not compile until replay says what it reads of it.
fn lean_body<'de, D: serde::Deserializer<'de>>(kind: EventKind, d: D) -> Result<LeanBody, D::Error> {
    use serde::de::IgnoredAny;
    Ok(match kind {
        EventKind::RunStarted => LeanBody::RunStarted(Box::new(LeanRunStarted::deserialize(d)?)),
        EventKind::ModelAction => {
            let a = JustUsage::deserialize(d)?;
            LeanBody::ModelAction { usage: a.usage, batch: a.batch }
        }
        EventKind::ModelRetry => {
            IgnoredAny::deserialize(d)?;
            LeanBody::ModelRetry
        }
        EventKind::ModelError => {
            let e = JustError::deserialize(d)?;
            LeanBody::ModelError { error_kind: e.error_kind, usage: e.usage }
        }
        EventKind::PolicyDecision => {
            let x = JustDecision::deserialize(d)?;
            LeanBody::PolicyDecision { allowed: x.allowed, invalid: x.invalid }
        }
        EventKind::ToolResult => LeanBody::ToolResult(LeanToolResult::deserialize(d)?),
        EventKind::TestResult => LeanBody::TestResult { passed: JustPassed::deserialize(d)?.passed },
        EventKind::VerifierResult => {
            let v = JustVerifier::deserialize(d)?;
            LeanBody::VerifierResult { passed: v.passed, metrics: v.metrics }
        }
        EventKind::RunFinished => LeanBody::RunFinished(LeanRunFinished::deserialize(d)?),
        EventKind::ContextPacked => {
            let c = JustContext::deserialize(d)?;
            LeanBody::ContextPacked(LeanContext::of(c.total_tokens, c.sections.iter().map(|s| (s.reduced, s.dropped))))
        }
        EventKind::RepoMapUsed => LeanBody::RepoMapUsed { via_tool: JustVia::deserialize(d)?.via == VIA_TOOL },
        EventKind::MemoryUpdated => {
            IgnoredAny::deserialize(d)?;
            LeanBody::MemoryUpdated
        }
        EventKind::ContextCompacted => {
            IgnoredAny::deserialize(d)?;
            LeanBody::ContextCompacted
        }
        EventKind::PolicyRetry => {
            IgnoredAny::deserialize(d)?;
            LeanBody::PolicyRetry
        }
        EventKind::DelegationCompleted => LeanBody::Delegation(LeanDelegation::deserialize(d)?),
        EventKind::DelegationFailed => {
            LeanBody::Delegation(LeanDelegation { failed: true, ..LeanDelegation::deserialize(d)? })
        }
        EventKind::HookDecision => {
            let h = JustHook::deserialize(d)?;
            LeanBody::HookDecision { decision: h.decision, policy_denied: h.policy_denied.is_some() }
        }
        EventKind::SessionFinished => {
            let f = JustSession::deserialize(d)?;
            LeanBody::SessionFinished(SessionProgress {
                index: f.index,
                role: f.role,
                steps_used: f.steps_used,
                stop_reason: f.stop_reason,
                marked: f.marked_passing.len() as u32,
                verified: f.verified_passing.len() as u32,
                false_claims: f.false_claims.len() as u32,
            })
        }
        EventKind::Checkpoint => {
            IgnoredAny::deserialize(d)?;
            LeanBody::Checkpoint
        }
        EventKind::Resumed => {
            IgnoredAny::deserialize(d)?;
            LeanBody::Resumed
        }
        EventKind::StateUpdated
        | EventKind::RepoMapBuilt
        | EventKind::DelegationStarted
        | EventKind::SessionStarted
        | EventKind::ResumeRefused => {
            IgnoredAny::deserialize(d)?;
            LeanBody::Other
        }
    })
}

struct EnvelopeVisitor;

/// A key of the envelope, matched without allocating.
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum EnvelopeKey {
    SchemaVersion,
    Seq,
    RunId,
    CellId,
    Kind,
    Data,
    #[serde(other)]
    Other,
}

/// A string borrowed from the line unless escapes had to be undone (serde's own `Cow` always
/// allocates).
struct LineText<'de>(std::borrow::Cow<'de, str>);

impl<'de> Deserialize<'de> for LineText<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(LineTextVisitor)
    }
}

struct LineTextVisitor;

impl<'de> serde::de::Visitor<'de> for LineTextVisitor {
    type Value = LineText<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(LineText(std::borrow::Cow::Borrowed(v)))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(LineText(std::borrow::Cow::Owned(v.to_owned())))
    }

    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(LineText(std::borrow::Cow::Owned(v)))
    }
}

/// Parses `data` once the kind is known.
struct DataSeed(EventKind);

impl<'de> serde::de::DeserializeSeed<'de> for DataSeed {
    type Value = LeanBody;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<LeanBody, D::Error> {
        lean_body(self.0, d)
    }
}

impl<'de> serde::de::Visitor<'de> for EnvelopeVisitor {
    type Value = (Header<'de>, Parsed<Lean>);

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a trace event object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        use serde::de::{Error as _, IgnoredAny};
        let mut schema_version = None;
        let mut seq = None;
        let mut run_id = None;
        let mut cell_id = None;
        let mut kind: Option<Parsed<EventKind>> = None;
        let mut body = None;
        let mut raw: Option<Box<serde_json::value::RawValue>> = None;
        while let Some(key) = map.next_key::<EnvelopeKey>()? {
            match key {
                EnvelopeKey::SchemaVersion => schema_version = Some(map.next_value::<u32>()?),
                EnvelopeKey::Seq => seq = Some(map.next_value::<u64>()?),
                EnvelopeKey::RunId => run_id = Some(map.next_value::<LineText>()?.0),
                EnvelopeKey::CellId => cell_id = Some(map.next_value::<LineText>()?.0),
                EnvelopeKey::Kind => {
                    // Borrowed from the line unless escaped: no allocation for known kinds.
                    let tag = map.next_value::<LineText>()?.0;
                    kind = Some(match EventKind::from_tag(&tag) {
                        Some(k) => Parsed::Known(k),
                        None => Parsed::UnknownKind(tag.into_owned()),
                    });
                }
                EnvelopeKey::Data => match &kind {
                    Some(Parsed::Known(k)) => body = Some(map.next_value_seed(DataSeed(*k))?),
                    // The payload of an unknown kind is not looked at.
                    Some(Parsed::UnknownKind(_)) => {
                        map.next_value::<IgnoredAny>()?;
                    }
                    None => raw = Some(map.next_value()?),
                },
                EnvelopeKey::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let schema_version = schema_version.ok_or_else(|| A::Error::missing_field("schema_version"))?;
        let kind = kind.ok_or_else(|| A::Error::missing_field("kind"))?;
        let run_id = run_id.ok_or_else(|| A::Error::missing_field("run_id"))?;
        let cell_id = cell_id.ok_or_else(|| A::Error::missing_field("cell_id"))?;
        let seq = seq.ok_or_else(|| A::Error::missing_field("seq"))?;
        let header = Header { schema_version, seq, run_id, cell_id };
        let kind = match kind {
            Parsed::Known(k) => k,
            Parsed::UnknownKind(tag) => return Ok((header, Parsed::UnknownKind(tag))),
        };
        let body = match (body, raw) {
            (Some(b), _) => b,
            (None, Some(r)) => {
                let mut d = serde_json::Deserializer::from_str(r.get());
                lean_body(kind, &mut d).map_err(A::Error::custom)?
            }
            (None, None) => return Err(A::Error::missing_field("data")),
        };
        Ok((header, Parsed::Known(Lean { kind, body })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::TraceWriter;

    /// A whole run replayed in pack order, in spans of frames, gives what replaying each trace
    /// by its name gives, in cell-id order: pack entries, a re-run cell's plain trace over its
    /// entry, a plain-only cell, and a damaged frame that fails only its own cell.
    #[test]
    fn a_run_replayed_in_pack_order_equals_each_trace_replayed_by_name() {
        use crate::trace::pack::PackWriter;
        use crate::trace::stored::{TRACE, compress_frame};
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path();
        let write = |cell: &str, steps: u32| -> Vec<u8> {
            let path = run.join("cells").join(cell).join(TRACE);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            let mut w = TraceWriter::create(&path, "r", cell).unwrap();
            for step in 1..=steps {
                w.append(EventBody::PolicyDecision {
                    step,
                    tool: "run_command".into(),
                    allowed: false,
                    reason: "network".into(),
                    invalid: false,
                })
                .unwrap();
            }
            drop(w);
            std::fs::read(&path).unwrap()
        };
        // An error's text up to zstd's own words, which depend on where the flipped byte lands
        // and on the output buffer each path decodes into ("Data corruption detected",
        // "Destination buffer is too small"): both paths must say which frame is corrupt.
        let reason = |e: &dyn std::fmt::Display| {
            let text = e.to_string();
            text.find(" is corrupt").map_or(text.clone(), |at| text[..at + " is corrupt".len()].to_string())
        };
        let mut pack = PackWriter::open(run).unwrap();
        for n in 1..=11 {
            let cell = format!("cell-{n}");
            let mut frame = compress_frame(&write(&cell, n)).unwrap();
            if n == 7 {
                let mid = frame.len() / 2;
                frame[mid] ^= 0x5a;
            }
            pack.append(&cell, &frame).unwrap();
            if n != 3 {
                std::fs::remove_dir_all(run.join("cells").join(&cell)).unwrap();
            }
        }
        drop(pack);
        write("cell-3", 20);
        write("cell-12", 12);
        let by_name: Vec<(PathBuf, Result<serde_json::Value, String>)> = run_traces(run)
            .unwrap()
            .into_iter()
            .map(|p| {
                let r =
                    replay_trace_of(&p, Some("r")).map(|s| serde_json::to_value(s).unwrap()).map_err(|e| reason(&e));
                (p, r)
            })
            .collect();
        assert_eq!(by_name.len(), 12);
        assert_eq!(by_name[2].1.as_ref().unwrap()["policy_denials"], 20, "the re-run cell's plain trace wins");
        assert!(by_name[6].1.as_ref().unwrap_err().contains("is corrupt"), "{:?}", by_name[6].1);
        assert!(by_name[9].0.ends_with("cells/cell-10/trace.jsonl"), "cell-id order: {:?}", by_name[9].0);
        for span in [1, 600, PACK_SPAN] {
            let whole: Vec<(PathBuf, Result<serde_json::Value, String>)> =
                replay_run_in_spans(run, &|_| Some("r".to_string()), span)
                    .unwrap()
                    .into_iter()
                    .map(|(p, r)| (p, r.map(|s| serde_json::to_value(s).unwrap()).map_err(|e| reason(&e))))
                    .collect();
            assert_eq!(whole, by_name, "spans of {span} bytes");
        }
    }

    fn sample(dir: &Path) -> PathBuf {
        let path = dir.join("trace.jsonl");
        let mut w = TraceWriter::create(&path, "r", "c").unwrap();
        w.append(EventBody::RunStarted {
            benchmark: "b".into(),
            case_id: "case-1".into(),
            category: "bugfix".into(),
            split: "train".into(),
            profile: "p".into(),
            model: ModelInfo { provider: "oracle".into(), model: "oracle".into(), ..Default::default() },
            step_budget: 5,
            epoch: 2,
            agent_spec: "abc".into(),
            ablation: "no_memory".into(),
            hcbench_version: "0".into(),
            sandbox: None,
        })
        .unwrap();
        w.append(EventBody::ModelAction {
            step: 1,
            tool: "read_file".into(),
            args: serde_json::json!({"path": "a.py"}),
            usage: Some(Usage { input_tokens: 7, output_tokens: 3, ..Default::default() }),
            latency_ms: 1,
            batch: None,
        })
        .unwrap();
        w.append(EventBody::PolicyDecision {
            step: 1,
            tool: "read_file".into(),
            allowed: true,
            reason: "allowed".into(),
            invalid: false,
        })
        .unwrap();
        w.append(EventBody::ToolResult {
            step: 1,
            tool: "read_file".into(),
            ok: true,
            denied: false,
            output: "x\n".repeat(100),
            output_bytes: 200,
            artifact: None,
            modified: vec![],
            read: Some("a.py".into()),
            duration_ms: 1,
            batch: None,
        })
        .unwrap();
        w.append(EventBody::PolicyDecision {
            step: 2,
            tool: "read_file".into(),
            allowed: false,
            reason: "secret".into(),
            invalid: false,
        })
        .unwrap();
        w.append(EventBody::RunFinished {
            outcome: Outcome::Failed,
            reward: 0.0,
            stop_reason: "finished".into(),
            reason: "tests failed".into(),
            elapsed_ms: 42,
        })
        .unwrap();
        path
    }

    /// A reply of three calls is one step: its usage is counted once, every call is a tool
    /// call, and the lean and the full fold agree.
    #[test]
    fn a_batch_is_one_step_of_several_calls_in_both_folds() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.jsonl");
        let mut w = TraceWriter::create(&path, "r", "c").unwrap();
        let mut events = vec![EventBody::RunStarted {
            benchmark: "b".into(),
            case_id: "case-1".into(),
            category: "bugfix".into(),
            split: "train".into(),
            profile: "p".into(),
            model: ModelInfo::default(),
            step_budget: 5,
            epoch: 1,
            agent_spec: String::new(),
            ablation: String::new(),
            hcbench_version: "0".into(),
            sandbox: None,
        }];
        let paths = ["a.py", "b.py", "a.py"];
        for (i, p) in paths.iter().enumerate() {
            events.push(EventBody::ModelAction {
                step: 1,
                tool: "read_file".into(),
                args: serde_json::json!({ "path": p }),
                usage: (i == 0).then(|| Usage { input_tokens: 10, output_tokens: 2, ..Default::default() }),
                latency_ms: 0,
                batch: Batch::of(1, i, paths.len()),
            });
        }
        for (i, p) in paths.iter().enumerate() {
            events.push(EventBody::ToolResult {
                step: 1,
                tool: "read_file".into(),
                ok: true,
                denied: false,
                output: String::new(),
                output_bytes: 0,
                artifact: None,
                modified: vec![],
                read: Some(p.to_string()),
                duration_ms: 0,
                batch: Batch::of(1, i, paths.len()),
            });
        }
        events.push(EventBody::ModelAction {
            step: 2,
            tool: "finish".into(),
            args: serde_json::json!({}),
            usage: None,
            latency_ms: 0,
            batch: None,
        });
        for e in events {
            w.append(e).unwrap();
        }
        let full = summarize(&crate::trace::read_trace(&path).unwrap().events).unwrap();
        let lean = replay_trace(&path).unwrap();
        assert_eq!(full, lean);
        assert_eq!((lean.steps, lean.batches, lean.batched_calls), (2, 1, 3));
        assert_eq!((lean.tool_calls, lean.repeated_reads, lean.input_tokens), (3, 1, 10));
        // A summary without batches writes no batch fields: older results lines are unchanged.
        let plain = serde_json::to_value(CellSummary::default()).unwrap();
        assert!(plain.get("batches").is_none() && plain.get("batched_calls").is_none());
    }

    #[test]
    fn lean_replay_equals_the_fold_over_full_events() {
        let dir = tempfile::tempdir().unwrap();
        let path = sample(dir.path());
        let full = summarize(&crate::trace::read_trace(&path).unwrap().events).unwrap();
        let lean = replay_trace(&path).unwrap();
        assert_eq!(full, lean);
        assert_eq!((lean.steps, lean.policy_denials, lean.input_tokens, lean.epoch, lean.wall_ms), (1, 1, 7, 2, 42));
        assert_eq!(lean.event_counts["policy_decision"], 2);
        assert_eq!((lean.ablation.as_str(), lean.group().as_ref()), ("no_memory", "p/no_memory"));
    }

    /// The full reader's summary: the same fold over fully parsed events, plus what reading
    /// noticed, exactly as `replay_trace` adds it.
    fn full_summary(path: &Path) -> CellSummary {
        let read = crate::trace::read_trace(path).unwrap();
        let mut s = summarize(&read.events).unwrap();
        s.truncated = read.stats.truncated;
        s.skipped_events = read.stats.skipped.into();
        s
    }

    /// Events of `kind` as the engine writes them. The match is exhaustive over the table, so
    /// a new kind does not compile until it has an example here, and the test below then runs
    /// it through the writer and both readers.
    fn examples(kind: EventKind) -> Vec<EventBody> {
        let usage = Some(Usage { input_tokens: 100, output_tokens: 10, ..Default::default() });
        match kind {
            EventKind::RunStarted => vec![EventBody::RunStarted {
                benchmark: "b".into(),
                case_id: "case-1".into(),
                category: "bugfix".into(),
                split: "test".into(),
                profile: "p".into(),
                model: ModelInfo {
                    provider: "openai".into(),
                    model: "m".into(),
                    input_price_per_mtok: Some(1.0),
                    output_price_per_mtok: Some(4.0),
                    ..Default::default()
                },
                step_budget: 9,
                epoch: 3,
                agent_spec: "spec".into(),
                ablation: String::new(),
                hcbench_version: "0".into(),
                sandbox: None,
            }],
            EventKind::ContextPacked => {
                let section =
                    |name: &str, tokens: usize, reduced: bool, dropped: usize| crate::trace::event::ContextSection {
                        name: name.into(),
                        chars: tokens * 4,
                        tokens,
                        raw_tokens: tokens + 6 * dropped,
                        budget: 5,
                        reduced,
                        cut: 0,
                        dropped,
                        dropped_blocks: (0..dropped).map(|i| format!("step-{i}")).collect(),
                    };
                vec![
                    EventBody::ContextPacked {
                        step: 1,
                        mode: "memory".into(),
                        sections: vec![section("task", 40, false, 0), section("observations", 3, true, 1)],
                        total_chars: 172,
                        total_tokens: 43,
                        budget_tokens: 100,
                    },
                    EventBody::ContextPacked {
                        step: 2,
                        mode: "memory".into(),
                        sections: vec![
                            section("task", 40, false, 0),
                            section("memory", 5, true, 0),
                            section("observations", 5, true, 2),
                        ],
                        total_chars: 200,
                        total_tokens: 50,
                        budget_tokens: 100,
                    },
                ]
            }
            EventKind::MemoryUpdated => vec![EventBody::MemoryUpdated {
                step: 1,
                changes: vec![crate::trace::event::MemoryChange {
                    block: "explored_files".into(),
                    added: vec!["a.py".into()],
                    removed: vec![],
                }],
            }],
            EventKind::RepoMapBuilt => vec![EventBody::RepoMapBuilt {
                files: 3,
                symbols: 7,
                skipped: 1,
                parsers: [("regex".to_string(), 3)].into(),
                duration_ms: 2,
            }],
            EventKind::RepoMapUsed => vec![
                EventBody::RepoMapUsed {
                    step: 1,
                    via: "context".into(),
                    query: "fix a".into(),
                    files: vec!["a.py".into()],
                    tokens: 40,
                },
                EventBody::RepoMapUsed {
                    step: 2,
                    via: "context".into(),
                    query: "fix a".into(),
                    files: vec!["a.py".into()],
                    tokens: 40,
                },
                EventBody::RepoMapUsed {
                    step: 3,
                    via: "tool".into(),
                    query: "parse_date".into(),
                    files: vec!["b.py".into()],
                    tokens: 25,
                },
            ],
            EventKind::ContextCompacted => vec![EventBody::ContextCompacted {
                step: 5,
                folded_steps: vec![1, 2],
                folded_tokens: 300,
                summary_tokens: 40,
                carried: [("recent_reads".to_string(), vec!["a.py".to_string()])].into(),
            }],
            EventKind::PolicyRetry => vec![EventBody::PolicyRetry {
                step: 4,
                cause: "denied".into(),
                message: "denied by policy: secret".into(),
            }],
            EventKind::ModelAction => vec![EventBody::ModelAction {
                step: 1,
                tool: "read_file".into(),
                args: serde_json::json!({"path": "a.py"}),
                usage: Some(Usage { cached_input_tokens: Some(64), ..usage.clone().unwrap() }),
                latency_ms: 5,
                batch: None,
            }],
            EventKind::ModelRetry => {
                vec![EventBody::ModelRetry { step: 2, attempt: 1, cause: "429".into(), delay_ms: 10 }]
            }
            EventKind::ModelError => vec![
                EventBody::ModelError {
                    step: 2,
                    error_kind: "parse".into(),
                    message: "?".into(),
                    usage: usage.clone().map(|u| Usage { cached_input_tokens: Some(32), ..u }),
                },
                EventBody::ModelError { step: 3, error_kind: "provider".into(), message: "503".into(), usage: None },
            ],
            EventKind::PolicyDecision => vec![
                EventBody::PolicyDecision {
                    step: 1,
                    tool: "read_file".into(),
                    allowed: true,
                    reason: "allowed".into(),
                    invalid: false,
                },
                EventBody::PolicyDecision {
                    step: 4,
                    tool: "read_file".into(),
                    allowed: false,
                    reason: "secret".into(),
                    invalid: false,
                },
                EventBody::PolicyDecision {
                    step: 5,
                    tool: "edit_file".into(),
                    allowed: false,
                    reason: "missing `old`".into(),
                    invalid: true,
                },
            ],
            EventKind::ToolResult => vec![
                EventBody::ToolResult {
                    step: 1,
                    tool: "read_file".into(),
                    ok: true,
                    denied: false,
                    output: "x".into(),
                    output_bytes: 1,
                    artifact: None,
                    modified: vec![],
                    read: Some("a.py".into()),
                    duration_ms: 1,
                    batch: None,
                },
                EventBody::ToolResult {
                    step: 4,
                    tool: "read_file".into(),
                    ok: false,
                    denied: true,
                    output: "denied".into(),
                    output_bytes: 6,
                    artifact: None,
                    modified: vec![],
                    read: None,
                    duration_ms: 0,
                    batch: None,
                },
                EventBody::ToolResult {
                    step: 6,
                    tool: "edit_file".into(),
                    ok: true,
                    denied: false,
                    output: "ok".into(),
                    output_bytes: 2,
                    artifact: Some(crate::trace::event::Artifact {
                        path: "artifacts/6.txt".into(),
                        sha256: "0".repeat(64),
                        bytes: 9000,
                    }),
                    modified: vec!["a.py".into()],
                    read: None,
                    duration_ms: 1,
                    batch: None,
                },
                EventBody::ToolResult {
                    step: 7,
                    tool: "read_file".into(),
                    ok: true,
                    denied: false,
                    output: "x".into(),
                    output_bytes: 1,
                    artifact: None,
                    modified: vec![],
                    read: Some("a.py".into()),
                    duration_ms: 1,
                    batch: None,
                },
            ],
            EventKind::StateUpdated => vec![EventBody::StateUpdated {
                step: 6,
                steps_used: 6,
                files_modified: vec!["a.py".into()],
                finished: false,
            }],
            EventKind::TestResult => vec![EventBody::TestResult {
                passed: true,
                exit_code: Some(0),
                timed_out: false,
                duration_ms: 30,
                output: "1 passed".into(),
                artifact: None,
                runner: None,
            }],
            EventKind::VerifierResult => vec![EventBody::VerifierResult {
                passed: false,
                duration_ms: 2,
                checks: vec![crate::trace::event::Check {
                    name: "forbid_denials".into(),
                    passed: false,
                    detail: "1 denial".into(),
                }],
                metrics: [("first_read_step".to_string(), serde_json::json!(1))].into(),
            }],
            EventKind::RunFinished => vec![EventBody::RunFinished {
                outcome: Outcome::Failed,
                reward: 0.0,
                stop_reason: "finished".into(),
                reason: "the verifier failed".into(),
                elapsed_ms: 77,
            }],
            // The delegations spend no tokens here, so the totals above stay as they are.
            EventKind::DelegationStarted => vec![EventBody::DelegationStarted {
                step: 5,
                id: 1,
                question: "where is add?".into(),
                max_steps: 4,
                max_tokens: 1000,
                trace: "delegations/1/trace.jsonl".into(),
            }],
            EventKind::DelegationCompleted => vec![EventBody::DelegationCompleted {
                step: 5,
                id: 1,
                spent: crate::trace::event::Delegated { steps: 2, files: 1, ..Default::default() },
            }],
            EventKind::DelegationFailed => vec![EventBody::DelegationFailed {
                step: 6,
                id: 2,
                reason: "out_of_steps".into(),
                message: "the helper used its 4 steps without an answer".into(),
                spent: crate::trace::event::Delegated { steps: 4, ..Default::default() },
            }],
            EventKind::HookDecision => {
                let hook = |decision: &str, reason: &str, policy_denied: Option<&str>| EventBody::HookDecision {
                    step: 2,
                    hook: "guard".into(),
                    phase: "pre".into(),
                    tool: "read_file".into(),
                    decision: decision.into(),
                    reason: reason.into(),
                    args: (decision == "rewrite").then(|| serde_json::json!({"path": "a.py"})),
                    policy_denied: policy_denied.map(Into::into),
                    duration_ms: 3,
                    batch: None,
                };
                vec![
                    hook("allow", "", None),
                    hook("deny", "no secrets", None),
                    hook("error", "exited with code 1", None),
                    hook("rewrite", "", Some("`.env` is a secret")),
                ]
            }
            EventKind::SessionStarted => {
                vec![EventBody::SessionStarted { index: 2, role: "coding".into(), step_budget: 5, first_step: 4 }]
            }
            EventKind::SessionFinished => vec![EventBody::SessionFinished {
                index: 2,
                role: "coding".into(),
                steps_used: 3,
                stop_reason: "finished".into(),
                marked_passing: vec!["add".into(), "sub".into()],
                verified_passing: vec!["add".into()],
                false_claims: vec!["sub".into()],
                head: Some("a".repeat(40)),
                elapsed_ms: 9,
            }],
            // At the end of the trace, nothing follows the checkpoint, so the resume discards
            // nothing and the counts above hold.
            EventKind::Checkpoint => vec![EventBody::Checkpoint {
                step: 7,
                path: "checkpoint/step-0007.json".into(),
                sha256: "0".repeat(64),
                bytes: 2000,
                duration_us: 300,
            }],
            EventKind::Resumed => vec![EventBody::Resumed {
                from_step: 7,
                checkpoint: "checkpoint/step-0007.json".into(),
                checkpoint_seq: 0,
                discarded_events: 0,
                workspace_restored: false,
                restore_ms: 1,
                duration_ms: 3,
            }],
            EventKind::ResumeRefused => vec![EventBody::ResumeRefused {
                reason: "the trace has no checkpoint".into(),
                abandoned_trace: "trace.jsonl.abandoned-1".into(),
            }],
        }
    }

    #[test]
    fn a_resumed_trace_folds_to_the_summary_of_the_run_it_continues() {
        let usage = || Some(Usage { input_tokens: 100, output_tokens: 10, ..Default::default() });
        let action = |step: u32| EventBody::ModelAction {
            step,
            tool: "edit_file".into(),
            args: serde_json::json!({}),
            usage: usage(),
            latency_ms: 5,
            batch: None,
        };
        let result = |step: u32, path: &str| EventBody::ToolResult {
            step,
            tool: "edit_file".into(),
            ok: true,
            denied: false,
            output: "edited".into(),
            output_bytes: 6,
            artifact: None,
            modified: vec![path.into()],
            read: None,
            duration_ms: 1,
            batch: None,
        };
        let checkpoint_at = |step: u32| EventBody::Checkpoint {
            step,
            path: format!("checkpoint/step-{step:04}.json"),
            sha256: "0".repeat(64),
            bytes: 10,
            duration_us: 1,
        };
        let checkpoint = checkpoint_at(1);
        let start = examples(EventKind::RunStarted).remove(0);
        let end = examples(EventKind::RunFinished).remove(0);
        let fold = |bodies: Vec<EventBody>| {
            let mut b = SummaryBuilder::new();
            for (seq, body) in bodies.into_iter().enumerate() {
                b.observe(&Event {
                    schema_version: crate::trace::SCHEMA_VERSION,
                    run_id: "r".into(),
                    cell_id: "c".into(),
                    seq: seq as u64,
                    ts: String::new(),
                    body,
                });
            }
            b.finish().unwrap()
        };
        let whole = fold(vec![
            start.clone(),
            action(1),
            result(1, "a.py"),
            checkpoint.clone(),
            action(2),
            result(2, "b.py"),
            end.clone(),
        ]);
        // Killed during step 2 after its edit ran; resumed from step 1, step 2 ran again.
        let resumed = fold(vec![
            start,
            action(1),
            result(1, "a.py"),
            checkpoint,
            action(2),
            result(2, "killed.py"),
            examples(EventKind::Resumed).remove(0),
            action(2),
            result(2, "b.py"),
            end,
        ]);
        assert_eq!(resumed.resumes, 1);
        assert_eq!(resumed.files_modified, ["a.py", "b.py"], "the killed step's edit is not counted");
        assert_eq!((resumed.steps, resumed.input_tokens, resumed.tool_calls), (2, 200, 2));
        let same = |s: &CellSummary| {
            let mut s = s.clone();
            s.resumes = 0;
            s.events = 0;
            s.event_counts.remove("resumed");
            s
        };
        assert_eq!(same(&resumed), same(&whole), "but for the resume itself, the same summary");
        assert_eq!(resumed.events, whole.events + 1);
        // How many checkpoints a cell saved depends on time (`--checkpoint-interval`): the same
        // cell with one more, or none, has the same summary, its event counts included.
        let more = fold(vec![
            examples(EventKind::RunStarted).remove(0),
            action(1),
            result(1, "a.py"),
            checkpoint_at(1),
            action(2),
            result(2, "b.py"),
            checkpoint_at(2),
            examples(EventKind::RunFinished).remove(0),
        ]);
        let none = fold(vec![
            examples(EventKind::RunStarted).remove(0),
            action(1),
            result(1, "a.py"),
            action(2),
            result(2, "b.py"),
            examples(EventKind::RunFinished).remove(0),
        ]);
        assert_eq!(more, whole);
        assert_eq!(none, whole);
        assert!(whole.event_counts.get("checkpoint").is_none(), "{:?}", whole.event_counts);
    }

    #[test]
    fn the_table_of_kinds_matches_the_writers_tags() {
        for (i, kind) in EventKind::ALL.iter().enumerate() {
            assert_eq!(*kind as usize, i, "ALL is in declaration order");
            assert_eq!(EventKind::from_tag(kind.as_str()), Some(*kind));
            for body in examples(*kind) {
                assert_eq!(body.kind(), *kind);
                let wire = serde_json::to_value(&body).unwrap();
                assert_eq!(wire["kind"], kind.as_str(), "the serde tag of {kind:?} is its table entry");
            }
        }
        assert_eq!(EventKind::from_tag("subagent_spawned"), None);
    }

    #[test]
    fn every_kind_goes_through_the_writer_and_both_readers_alike() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.jsonl");
        let mut w = TraceWriter::create(&path, "r", "c").unwrap();
        let mut written = Vec::new();
        for kind in EventKind::ALL {
            for body in examples(*kind) {
                written.push(w.append(body).unwrap());
            }
        }
        let read = crate::trace::read_trace(&path).unwrap();
        let bodies: Vec<&EventBody> = read.events.iter().map(|e| &e.body).collect();
        assert_eq!(bodies, written.iter().collect::<Vec<_>>(), "the full reader reads back what the writer wrote");
        assert_eq!(read.stats, crate::trace::ReadStats::default());

        let lean = replay_trace(&path).unwrap();
        assert_eq!(full_summary(&path), lean, "the fast parser and the full reader agree");
        let exercised: BTreeSet<&str> = lean.event_counts.keys().collect();
        // A checkpoint is counted in no event count (the harness's bookkeeping).
        let table: BTreeSet<&str> = EventKind::ALL.iter().map(|k| k.as_str()).filter(|k| *k != "checkpoint").collect();
        assert_eq!(exercised, table, "every kind in the table was written and replayed");
        let counted = written.iter().filter(|e| !matches!(e, EventBody::Checkpoint { .. })).count();
        assert!(counted < written.len(), "the examples have a checkpoint");
        // The fold read what each kind carries, not just its tag.
        assert_eq!((lean.case_id.as_str(), lean.epoch, lean.step_budget), ("case-1", 3, 9));
        assert_eq!((lean.steps, lean.model_errors, lean.model_retries, lean.invalid_actions), (2, 2, 1, 2));
        // One denial of the policy, one of a rewrite by a hook that the policy refused.
        assert_eq!((lean.policy_denials, lean.tool_calls, lean.tool_failures, lean.repeated_reads), (2, 3, 0, 1));
        assert_eq!((lean.hook_denials, lean.hook_errors), (1, 1));
        assert_eq!((lean.first_edit_step, lean.files_modified.clone()), (Some(6), vec!["a.py".to_string()]));
        assert_eq!((lean.input_tokens, lean.output_tokens), (200, 20));
        assert_eq!((lean.tests_passed, lean.verifier_passed), (Some(true), Some(false)));
        assert_eq!(lean.metrics["first_read_step"], 1);
        assert_eq!((lean.target_declared, lean.first_target_read_step), (true, Some(1)));
        assert_eq!((lean.outcome, lean.wall_ms, lean.events), (Some(Outcome::Failed), 77, counted as u64));
        assert!(lean.skipped_events.is_empty());
        // The context kinds: two turns of 43 and 50 tokens; 1 + 2 sections reduced, 1 + 2
        // blocks dropped; two injected repo maps and one by the tool; one each of the rest.
        assert_eq!((lean.context_turns, lean.context_tokens), (2, 93));
        assert_eq!((lean.budget_reductions, lean.dropped_blocks), (3, 3));
        assert_eq!((lean.repo_map_injections, lean.repo_map_tool_uses), (2, 1));
        assert_eq!((lean.memory_updates, lean.compactions, lean.policy_retries), (1, 1, 1));
        assert_eq!(lean.cached_input_tokens, 96, "cache hits of model_action and model_error");
        assert_eq!((lean.delegations, lean.delegations_failed, lean.delegation_steps), (2, 1, 6));
        // A results line carries them and reads back equal.
        let line = serde_json::to_string(&lean).unwrap();
        assert!(line.contains("\"context_tokens\":93") && line.contains("\"first_target_read_step\":1"), "{line}");
        assert_eq!(serde_json::from_str::<CellSummary>(&line).unwrap(), lean);
    }

    /// One verifier_result with these metrics, folded alone.
    fn fold_metrics(metrics: serde_json::Value) -> CellSummary {
        let body = EventBody::VerifierResult {
            passed: true,
            duration_ms: 0,
            checks: vec![],
            metrics: serde_json::from_value(metrics).unwrap(),
        };
        let event = Event {
            schema_version: crate::trace::event::SCHEMA_VERSION,
            run_id: "r".into(),
            cell_id: "c".into(),
            seq: 0,
            ts: "t".into(),
            body,
        };
        summarize(&[event]).unwrap()
    }

    #[test]
    fn the_first_read_of_the_target_tells_never_read_from_no_target() {
        let read = fold_metrics(serde_json::json!({"first_read_step": 4}));
        assert_eq!((read.target_declared, read.first_target_read_step), (true, Some(4)));
        let never = fold_metrics(serde_json::json!({"first_read_step": null}));
        assert_eq!((never.target_declared, never.first_target_read_step), (true, None));
        let none = fold_metrics(serde_json::json!({}));
        assert_eq!((none.target_declared, none.first_target_read_step), (false, None));
        // A cell without a target and without context events writes a results line as before.
        let line = serde_json::to_string(&none).unwrap();
        for field in ["target_declared", "first_target_read_step", "context_turns", "cached_input_tokens"] {
            assert!(!line.contains(field), "{field} is omitted when empty: {line}");
        }
        assert!(serde_json::to_string(&never).unwrap().contains("\"target_declared\":true"));
    }

    #[test]
    fn an_old_results_line_reads_with_zero_context_counters() {
        let dir = tempfile::tempdir().unwrap();
        let mut old = serde_json::to_value(replay_trace(&sample(dir.path())).unwrap()).unwrap();
        old.as_object_mut().unwrap().retain(|k, _| !k.starts_with("context_") && k != "target_declared");
        let s: CellSummary = serde_json::from_value(old).unwrap();
        assert_eq!(
            (s.context_turns, s.context_tokens, s.first_target_read_step, s.target_declared),
            (0, 0, None, false)
        );
    }

    /// Inserts `extra` lines after the first line of the trace at `path`, and renumbers the
    /// lines after them so the sequence stays whole (the extra lines carry seq 1, 2, ...).
    fn insert_after_first(path: &Path, extra: &[&str]) {
        let text = std::fs::read_to_string(path).unwrap();
        let (first, rest) = text.split_once('\n').unwrap();
        let mut out = format!("{first}\n");
        for l in extra {
            out.push_str(l);
            out.push('\n');
        }
        for (i, l) in rest.lines().enumerate() {
            let old = format!("\"seq\":{},", i + 1);
            assert!(l.contains(&old), "{l}");
            out.push_str(&l.replacen(&old, &format!("\"seq\":{},", i + 1 + extra.len()), 1));
            out.push('\n');
        }
        std::fs::write(path, out).unwrap();
    }

    /// The trace at `path` with its lines rewritten by `edit` (line index, line).
    fn rewrite(path: &Path, name: &str, edit: impl Fn(usize, &str) -> Vec<String>) -> PathBuf {
        let text = std::fs::read_to_string(path).unwrap();
        let out: Vec<String> = text.lines().enumerate().flat_map(|(i, l)| edit(i, l)).collect();
        let broken = path.with_file_name(format!("{name}.jsonl"));
        std::fs::write(&broken, out.join("\n") + "\n").unwrap();
        broken
    }

    #[test]
    fn a_broken_sequence_is_an_error_saying_what_broke_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = sample(dir.path());
        assert_eq!(replay_trace_of(&path, Some("r")).unwrap(), replay_trace(&path).unwrap(), "its own run reads");
        let cases: Vec<(PathBuf, &str)> = vec![
            // A second writer appended the same step again: without the check it is an extra step.
            (rewrite(&path, "dup", |i, l| if i == 1 { vec![l.into(), l.into()] } else { vec![l.into()] }), "line 3"),
            (rewrite(&path, "gap", |i, l| if i == 2 { vec![] } else { vec![l.into()] }), "1 event(s) missing"),
            (rewrite(&path, "headless", |i, l| if i == 0 { vec![] } else { vec![l.into()] }), "not 0"),
            (
                rewrite(&path, "run", |i, l| {
                    vec![if i == 3 { l.replace("\"run_id\":\"r\"", "\"run_id\":\"other\"") } else { l.into() }]
                }),
                "an event of run \"other\" in a trace of run \"r\"",
            ),
            (
                rewrite(&path, "cell", |i, l| {
                    vec![if i == 3 { l.replace("\"cell_id\":\"c\"", "\"cell_id\":\"d\"") } else { l.into() }]
                }),
                "an event of cell \"d\"",
            ),
        ];
        for (broken, want) in cases {
            for err in [
                replay_trace(&broken).unwrap_err().to_string(),
                crate::trace::read_trace(&broken).unwrap_err().to_string(),
            ] {
                assert!(err.contains("breaks the event sequence") && err.contains(want), "{want}: {err}");
            }
        }
        let dup = rewrite(&path, "dup2", |i, l| if i == 1 { vec![l.into(), l.into()] } else { vec![l.into()] });
        let err = replay_trace(&dup).unwrap_err().to_string();
        assert!(
            err.contains(
                "line 3 breaks the event sequence: seq 1 comes again where seq 2 was due (an event written twice)"
            ),
            "{err}"
        );
        // A whole trace of another run in this run's directory is refused too.
        let err = replay_trace_of(&path, Some("this-run")).unwrap_err().to_string();
        assert!(
            err.contains("line 1") && err.contains("an event of run \"r\" in a trace of run \"this-run\""),
            "{err}"
        );
    }

    #[test]
    fn unknown_kinds_of_a_known_schema_version_are_skipped_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let path = sample(dir.path());
        let before = replay_trace(&path).unwrap();
        insert_after_first(
            &path,
            &[
                r#"{"schema_version":1,"run_id":"r","cell_id":"c","seq":1,"ts":"t","kind":"subagent_spawned","data":{"step":1,"notes":["x"]}}"#,
                // Another writer's field order: the payload before the kind.
                r#"{"data":{"step":1},"schema_version":1,"run_id":"r","cell_id":"c","seq":2,"ts":"t","kind":"plan_revised"}"#,
                r#"{"schema_version":1,"run_id":"r","cell_id":"c","seq":3,"ts":"t","kind":"subagent_spawned","data":null}"#,
            ],
        );
        let lean = replay_trace(&path).unwrap();
        assert_eq!(full_summary(&path), lean);
        let skipped: BTreeMap<String, u64> = [("plan_revised".into(), 1), ("subagent_spawned".into(), 2)].into();
        assert_eq!(lean.skipped_events, skipped.into());
        assert_eq!(CellSummary { skipped_events: Tally::default(), ..lean.clone() }, before, "nothing else changed");
        let note = lean.skipped_note().unwrap();
        assert!(note.contains("skipped 3 event(s)") && note.contains("2 subagent_spawned"), "{note}");
        assert_eq!(before.skipped_note(), None);

        // The count survives results.jsonl, and a results line without the field still reads.
        let line = serde_json::to_string(&lean).unwrap();
        assert_eq!(serde_json::from_str::<CellSummary>(&line).unwrap(), lean);
        let old = serde_json::to_string(&before).unwrap();
        assert!(!old.contains("skipped_events"), "an ordinary summary is written as before");
        assert!(serde_json::from_str::<CellSummary>(&old).unwrap().skipped_events.is_empty());

        // A cell resumed later must not mix formats in one trace.
        let err = TraceWriter::append_to(&path, "r", "c").err().unwrap().to_string();
        assert!(err.contains("subagent_spawned") && err.contains("upgrade hcbench"), "{err}");
    }

    #[test]
    fn a_newer_schema_version_is_an_error_that_names_the_file_and_says_upgrade() {
        let dir = tempfile::tempdir().unwrap();
        let path = sample(dir.path());
        let newer = [
            r#"{"schema_version":3,"run_id":"r","cell_id":"c","seq":1,"ts":"t","kind":"subagent_spawned","data":{}}"#,
            r#"{"schema_version":3,"run_id":"r","cell_id":"c","seq":1,"ts":"t","kind":"model_retry","data":{"step":1}}"#,
            r#"{"schema_version":3,"moved":{"kind":"model_retry"}}"#,
        ];
        for line in newer {
            let path = dir.path().join("newer.jsonl");
            std::fs::copy(dir.path().join("trace.jsonl"), &path).unwrap();
            insert_after_first(&path, &[line]);
            let lean = replay_trace(&path).unwrap_err().to_string();
            let full = crate::trace::read_trace(&path).unwrap_err().to_string();
            for msg in [lean, full] {
                assert!(msg.contains(&*path.to_string_lossy()), "{msg}");
                assert!(msg.contains("line 2 has schema_version 3") && msg.contains("upgrade hcbench"), "{msg}");
            }
        }
        assert!(replay_trace(&path).is_ok());
    }

    #[test]
    fn malformed_lines_stay_corruption() {
        let dir = tempfile::tempdir().unwrap();
        sample(dir.path());
        let malformed = [
            "not json",
            r#"{"schema_version":1,"run_id":"r","cell_id":"c","seq":1,"ts":"t","data":{}}"#,
            r#"{"schema_version":1,"run_id":"r","cell_id":"c","seq":1,"ts":"t","kind":7,"data":{}}"#,
            r#"{"schema_version":1,"cell_id":"c","seq":1,"ts":"t","kind":"subagent_spawned","data":{}}"#,
            r#"{"schema_version":1,"run_id":"r","cell_id":"c","seq":1,"ts":"t","kind":"model_error","data":{"step":1}}"#,
        ];
        for line in malformed {
            let path = dir.path().join("bad.jsonl");
            std::fs::copy(dir.path().join("trace.jsonl"), &path).unwrap();
            insert_after_first(&path, &[line]);
            for err in
                [replay_trace(&path).unwrap_err().to_string(), crate::trace::read_trace(&path).unwrap_err().to_string()]
            {
                assert!(err.contains("line 2 is not a valid event") && err.contains("corrupt"), "{line}: {err}");
            }
        }
    }

    /// Found by the fuzzer (fuzz/, target `trace`): serde_json does not check UTF-8 in the
    /// values it skips, so replay (which skips more) took a line the full reader called corrupt.
    #[test]
    fn invalid_utf8_in_a_skipped_field_is_corruption_for_both_readers() {
        let dir = tempfile::tempdir().unwrap();
        sample(dir.path());
        // A field replay skips (`query`), and a field both skip in an event of an unknown kind.
        let lines: [&[u8]; 2] = [
            b"{\"schema_version\":1,\"run_id\":\"r\",\"cell_id\":\"c\",\"seq\":9,\"ts\":\"t\",\"kind\":\"repo_map_used\",\"data\":{\"step\":1,\"via\":\"context\",\"query\":\"a\x9fb\",\"files\":[],\"tokens\":1}}\n",
            b"{\"schema_version\":1,\"run_id\":\"r\",\"cell_id\":\"c\",\"seq\":9,\"ts\":\"t\",\"kind\":\"teleported\",\"extra\":\"\xed\",\"data\":{}}\n",
        ];
        for line in lines {
            let path = dir.path().join("bad.jsonl");
            let mut bytes = std::fs::read(dir.path().join("trace.jsonl")).unwrap();
            bytes.extend_from_slice(line);
            std::fs::write(&path, bytes).unwrap();
            for err in
                [replay_trace(&path).unwrap_err().to_string(), crate::trace::read_trace(&path).unwrap_err().to_string()]
            {
                assert!(err.contains("is not a valid event") && err.contains("corrupt"), "{err}");
            }
        }
    }

    #[test]
    fn lean_parse_accepts_data_before_kind_and_reports_unknown_kinds() {
        let line = r#"{"data":{"passed":true,"exit_code":0,"timed_out":false,"duration_ms":1,"output":""},"schema_version":1,"run_id":"r","cell_id":"c","seq":0,"ts":"t","kind":"test_result"}"#;
        let (_, e) = Lean::parse(line).unwrap();
        let Parsed::Known(e) = e else { panic!("test_result is a known kind") };
        assert!(matches!(e.body, LeanBody::TestResult { passed: true }));
        let new = r#"{"schema_version":1,"run_id":"r","cell_id":"c","seq":0,"ts":"t","kind":"teleported","data":{}}"#;
        assert!(matches!(Lean::parse(new).unwrap().1, Parsed::UnknownKind(k) if k == "teleported"));
    }

    /// Every kind's examples as the writer writes them, one line each.
    fn example_lines() -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.jsonl");
        let mut w = TraceWriter::create(&path, "r", "c").unwrap();
        for kind in EventKind::ALL {
            for body in examples(*kind) {
                w.append(body).unwrap();
            }
        }
        std::fs::read_to_string(&path).unwrap().lines().map(str::to_string).collect()
    }

    /// The fast parsers' readings of `line`, by name (None when one refused it): the
    /// hand-written one, and the deserializer behind it.
    fn fast_parsers(line: &str) -> [(&'static str, Option<String>); 2] {
        [
            ("hot", hot::parse(line).ok().map(|p| format!("{p:?}"))),
            ("scan", scan::parse(line, EnvelopeVisitor).ok().map(|p| format!("{p:?}"))),
        ]
    }

    /// serde_json's reading of `line`.
    fn serde_json_reading(line: &str) -> Result<String, String> {
        Lean::parse_with_serde_json(line).map(|p| format!("{p:?}")).map_err(|e| e.to_string())
    }

    #[test]
    fn the_fast_parsers_read_every_kind_as_serde_json_does() {
        let mut refused: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
        for line in example_lines() {
            let slow = serde_json_reading(&line).unwrap();
            for (parser, fast) in fast_parsers(&line) {
                match fast {
                    Some(fast) => assert_eq!(fast, slow, "{parser}: {line}"),
                    None => {
                        let kind: serde_json::Value = serde_json::from_str(&line).unwrap();
                        refused.entry(parser).or_default().insert(kind["kind"].as_str().unwrap().to_string());
                    }
                }
            }
        }
        // Every kind is read by both fast parsers: none goes to serde_json (before numbers other
        // than plain unsigned integers were read, a reward, a price or a float metric sent its
        // line there).
        assert!(refused.is_empty(), "refused: {refused:?}");
    }

    /// A `run_started` payload with `before` inserted after its opening brace and `after`
    /// before its closing one.
    fn run_started(before: &str, after: &str) -> String {
        format!(
            r#"{{{before}"benchmark":"b","case_id":"x","category":"c","split":"s","profile":"p","model":{{"provider":"p","model":"m"}},"step_budget":3,"epoch":2,"agent_spec":"a","ablation":"","hcbench_version":"v","sandbox":null{after}}}"#
        )
    }

    /// A `run_finished` payload with the given outcome and reward, as JSON.
    fn run_finished(outcome: &str, reward: &str) -> String {
        format!(r#"{{"outcome":{outcome},"reward":{reward},"stop_reason":"finished","reason":"ok","elapsed_ms":1}}"#)
    }

    #[test]
    fn the_fast_parsers_refuse_what_serde_json_refuses() {
        let line = |data: &str| {
            format!(
                r#"{{"schema_version":2,"run_id":"r","cell_id":"c","seq":1,"ts":"t","kind":"tool_result","data":{data}}}"#
            )
        };
        let bad = [
            r#"{"step":1,"tool":"t","ok":true,"output":"a\qb"}"#,
            r#"{"step":1,"tool":"t","ok":true,"output":"a\u12G4"}"#,
            r#"{"step":1,"tool":"t","ok":true,"output":"a\u12"}"#,
            r#"{"step":1,"tool":"t","ok":true,"output":"abc}"#,
            r#"{"step":1,"tool":"t","ok":true,"output":"abc\"}"#,
            "{\"step\":1,\"tool\":\"t\",\"ok\":true,\"output\":\"raw\ttab\"}",
            "{\"step\":1,\"tool\":\"t\",\"ok\":true,\"output\":\"raw\u{1}byte\"}",
            r#"{"step":1,"tool":"t","ok":true,"output":tru}"#,
            r#"{"step":1,"tool":"t","ok":true,"output":nul}"#,
            r#"{"step":1,"tool":"t","ok":true,"output":01}"#,
            r#"{"step":1,"tool":"t","ok":true,"output":1.}"#,
            r#"{"step":1,"tool":"t","ok":true,"output":.5}"#,
            r#"{"step":1,"tool":"t","ok":true,"output":-}"#,
            r#"{"step":1,"tool":"t","ok":true,"output":1e}"#,
            r#"{"step":1,"tool":"t","ok":true,"output":1e+}"#,
            r#"{"step":1,"tool":"t","ok":true,"output":+1}"#,
            r#"{"step":1,"tool":"t","ok":true,"output":[1,]}"#,
            r#"{"step":1,"tool":"t","ok":true,"output":[1 2]}"#,
            r#"{"step":1,"tool":"t","ok":true,"output":{"a":1,}}"#,
            r#"{"step":1,"tool":"t","ok":true,"output":{"a" 1}}"#,
            r#"{"step":1,"tool":"t","ok":true,"output":{1:1}}"#,
            r#"{"step":1,"tool":"t","ok":true,"output":}"#,
            r#"{"step":1,"tool":"t","ok":true,"output":"x",}"#,
            r#"{"step":1,"tool":"t","ok":true,"output":"x""#,
            r#"{"step":"1","tool":"t","ok":true}"#,
            r#"{"step":1,"tool":"t","ok":true,"step":2}"#,
            r#"{"step":1,"tool":"t","ok":1}"#,
            // What the hand-written walks read themselves: missing, repeated, mistyped or
            // out-of-range fields, and broken brackets around them.
            r#"{"tool":"t","ok":true}"#,
            r#"{"step":4294967296,"tool":"t","ok":true}"#,
            r#"{"step":1,"tool":"t","ok":true,"modified":["a",]}"#,
            r#"{"step":1,"tool":"t","ok":true,"modified":["a",1]}"#,
            r#"{"step":1,"tool":"t","ok":true,"modified":null}"#,
            r#"{"step":1,"tool":"t","ok":true,"read":1}"#,
            r#"{"step":1,"tool":"t","ok":true,"denied":null}"#,
            r#"{"step":1,"tool":"t","ok":true,"ok":true}"#,
            r#"{"step":1,"tool":"t","ok":true,}"#,
            r#"{,"step":1,"tool":"t","ok":true}"#,
            r#"{"step":1"tool":"t","ok":true}"#,
        ];
        let other = |kind: &str, data: &str| {
            format!(
                r#"{{"schema_version":2,"run_id":"r","cell_id":"c","seq":1,"ts":"t","kind":"{kind}","data":{data}}}"#
            )
        };
        let mut lines: Vec<String> = bad.iter().map(|data| line(data)).collect();
        lines.extend([
            other("context_packed", r#"{"total_tokens":1}"#),
            other("context_packed", r#"{"sections":[{"reduced":1}]}"#),
            other("context_packed", r#"{"sections":[{"dropped":-1}]}"#),
            other("context_packed", r#"{"sections":[{"dropped":1,"dropped":2}]}"#),
            other("context_packed", r#"{"sections":[{},]}"#),
            other("context_packed", r#"{"sections":[null]}"#),
            other("context_packed", r#"{"sections":[],"total_tokens":1.5}"#),
            other("model_action", r#"{"usage":{"input_tokens":1}}"#),
            other("model_action", r#"{"usage":{"input_tokens":1,"output_tokens":2,"cached_input_tokens":"3"}}"#),
            other("model_action", r#"{"batch":{"id":1,"position":2}}"#),
            other("model_action", r#"{"batch":{"id":1,"position":2,"size":4294967296}}"#),
            other("model_action", r#"{"usage":null,"usage":null}"#),
            other("policy_decision", r#"{"invalid":true}"#),
            other("policy_decision", r#"{"allowed":"yes"}"#),
            other("state_updated", r#"{"step":1,}"#),
            // The fixed kinds every trace has, read by hand since a small trace's share of
            // them is large.
            other("run_started", &run_started(r#""case_id":"x","#, "")),
            other("run_started", &run_started("", r#","case_id":"y""#)),
            other("run_started", &run_started("", r#","epoch":null"#)),
            other("run_started", &run_started("", r#","epoch":-1"#)),
            other("run_started", &run_started("", r#","agent_spec":null"#)),
            other("run_started", &run_started("", r#","step_budget":4294967296"#).replace(r#""step_budget":3,"#, "")),
            other("run_started", &run_started("", "").replace(r#""step_budget":3,"#, "")),
            other("run_started", &run_started("", "").replace(r#""provider":"p","#, "")),
            other("run_started", &run_started("", "").replace(r#""model":"m""#, r#""model":"m","model":"n""#)),
            other("run_started", &run_started("", "").replace(r#""model":"m""#, r#""model":"m","base_url":1"#)),
            other(
                "run_started",
                &run_started("", "").replace(r#""model":"m""#, r#""model":"m","input_price_per_mtok":"1""#),
            ),
            other(
                "run_started",
                &run_started("", "").replace(r#""model":"m""#, r#""model":"m","output_price_per_mtok":[]"#),
            ),
            other(
                "run_started",
                &run_started("", "").replace(r#""model":"m""#, r#""model":"m","reasoning_effort":true"#),
            ),
            other(
                "run_started",
                r#"{"case_id":"x","category":"c","split":"s","profile":"p","model":null,"step_budget":3}"#,
            ),
            other("test_result", r#"{"exit_code":0}"#),
            other("test_result", r#"{"passed":"yes"}"#),
            other("test_result", r#"{"passed":true,"passed":true}"#),
            other("verifier_result", r#"{"metrics":{}}"#),
            other("verifier_result", r#"{"passed":true,"metrics":null}"#),
            other("verifier_result", r#"{"passed":true,"metrics":[]}"#),
            other("verifier_result", r#"{"passed":true,"metrics":{"a":1,}}"#),
            other("verifier_result", r#"{"passed":true,"metrics":{},"metrics":{}}"#),
            other("run_finished", &run_finished(r#""won""#, "1.0")),
            other("run_finished", &run_finished("1", "1.0")),
            other("run_finished", &run_finished(r#""passed""#, r#""1""#)),
            other("run_finished", &run_finished(r#""passed""#, "1.")),
            other("run_finished", &run_finished(r#""passed""#, "null")),
            other(
                "run_finished",
                &run_finished(r#""passed""#, "1").replace(r#","elapsed_ms":1"#, r#","elapsed_ms":-1"#),
            ),
            other("run_finished", &run_finished(r#""passed""#, "1").replace(r#""reason":"ok","#, "")),
            other("run_finished", &run_finished(r#""passed""#, "1").replace(r#""reward":1,"#, "")),
        ]);
        for line in &lines {
            let slow = serde_json_reading(line);
            for (parser, fast) in fast_parsers(line) {
                assert!(fast.is_none(), "the {parser} parser took {line}");
            }
            assert!(slow.is_err(), "serde_json took {line}");
        }
        // The same for an event of an unknown kind, whose payload is skipped, and for what
        // follows the object.
        let unknown =
            r#"{"schema_version":2,"run_id":"r","cell_id":"c","seq":1,"ts":"t","kind":"teleported","data":{"a":[1,]}}"#;
        let known = line(r#"{"step":1,"tool":"t","ok":true}"#);
        for line in [unknown.to_string(), format!("{known}x"), format!("{known}}}"), format!("{known},")] {
            let slow = serde_json_reading(&line);
            for (parser, fast) in fast_parsers(&line) {
                assert!(fast.is_none() && slow.is_err(), "{parser}: {line}: {fast:?} {slow:?}");
            }
        }
    }

    #[test]
    fn the_fast_parsers_read_escapes_unknown_kinds_and_odd_values_as_serde_json_does() {
        let line = |data: &str| {
            format!(
                r#"{{"schema_version":2,"run_id":"r","cell_id":"c","seq":1,"ts":"t","kind":"tool_result","data":{data}}}"#
            )
        };
        let other = |kind: &str, data: &str| {
            format!(
                r#"{{"schema_version":2,"run_id":"r","cell_id":"c","seq":1,"ts":"t","kind":"{kind}","data":{data}}}"#
            )
        };
        let taken = [
            // Escaped quotes and backslashes in skipped strings, and in strings the fold reads.
            line(
                r#"{"step":1,"tool":"a \"quoted\" \\ tool\/\n","ok":true,"output":"say \"hi\" \\\" \\\\","modified":["dir\\file.py","x\"y"],"read":"a\tb\\"}"#,
            ),
            line(r#"{"step":1,"tool":"t","ok":true,"output":"\"","read":"\\"}"#),
            // Skipped values of every JSON type, \u escapes and fractions among them.
            line(
                r#"{"step":1,"tool":"t","ok":true,"output":"\u00e9\u20AC\ud83d\ude00","x":{"a":[1,2,{"b":null}],"c":-1.5e-3,"d":0,"e":1E+2,"f":true,"g":false,"h":[],"i":{}}}"#,
            ),
            // Fields in another order than the writer's, defaults, nulls for options, and
            // unknown keys repeated (serde skips them each time).
            line(r#"{"read":null,"x":1,"x":2,"ok":false,"denied":true,"tool":"","step":4294967295,"modified":[]}"#),
            other("context_packed", r#"{"total_tokens":7,"sections":[{"reduced":true,"dropped":3,"name":"a"},{}],"mode":"m"}"#),
            other("context_packed", r#"{"sections":[]}"#),
            other(
                "model_action",
                r#"{"args":{"a":[]},"batch":{"size":3,"id":1,"position":2,"x":0},"usage":{"output_tokens":2,"input_tokens":1,"cached_input_tokens":null}}"#,
            ),
            other("model_action", r#"{"usage":null,"batch":null}"#),
            other("model_action", r#"{}"#),
            other("policy_decision", r#"{"allowed":false,"invalid":true,"reason":"r"}"#),
            // The fixed kinds, read by hand: fields in another order, defaults, escapes,
            // nulls for options, prices as integers and fractions, unknown keys.
            other("run_started", &run_started("", "")),
            other(
                "run_started",
                r#"{"model":{"reasoning_effort":"high","model":"m\"1","base_url":null,"provider":"p","input_price_per_mtok":3,"output_price_per_mtok":1.25e1,"x":[]},"step_budget":4294967295,"profile":"p","split":"s","category":"c\n","case_id":"x/\"y\""}"#,
            ),
            other(
                "run_started",
                &run_started("", "").replace(r#""model":"m""#, r#""model":"m","input_price_per_mtok":null,"output_price_per_mtok":-0.0"#),
            ),
            other("test_result", r#"{"passed":false,"exit_code":1,"output":"x"}"#),
            other("verifier_result", r#"{"passed":false}"#),
            other("verifier_result", r#"{"metrics":{"b":[1,{"c":null}],"a":"s","first_read_step":2},"checks":[],"passed":true}"#),
            other("run_finished", &run_finished(r#""provider_error""#, "0")),
            other("run_finished", &run_finished(r#""cancelled""#, "1e-1").replace(r#""reason":"ok""#, r#""reason":"a\"b","x":{}"#)),
            // Unknown kinds, with a valid payload and with a payload before the kind.
            r#"{"schema_version":2,"run_id":"r","cell_id":"c","seq":1,"ts":"t","kind":"teleported","data":{"a":[1,"\""]}}"#
                .to_string(),
            r#"{"schema_version":2,"run_id":"r","cell_id":"c","seq":1,"ts":"t","kind":"te\nleported","data":{}}"#
                .to_string(),
            // Ids with escapes.
            r#"{"schema_version":2,"run_id":"r\"1","cell_id":"c\\d","seq":1,"kind":"state_updated","data":{"step":1,"steps_used":1,"files_modified":[],"finished":false}}"#
                .to_string(),
        ];
        for line in &taken {
            let slow = serde_json_reading(line).unwrap();
            for (parser, fast) in fast_parsers(line) {
                assert_eq!(fast.as_ref(), Some(&slow), "{parser}: {line}");
            }
        }
        // Taken by the deserializer only: a struct written as an array, as serde_json reads
        // it, and an envelope key given twice (serde takes the last).
        let by_scan = [
            line(r#"[1,"t",true]"#),
            r#"{"schema_version":2,"seq":0,"run_id":"r","cell_id":"c","seq":1,"kind":"state_updated","data":{}}"#
                .to_string(),
        ];
        for line in &by_scan {
            let slow = serde_json_reading(line).unwrap();
            let [(_, hot), (_, scan)] = fast_parsers(line);
            assert_eq!((hot, scan.as_ref()), (None, Some(&slow)), "{line}");
            assert_eq!(format!("{:?}", Lean::parse(line).unwrap()), slow, "the fallback reads {line}");
        }
        // Numbers other than plain unsigned integers, which the fold reads (a reward, a price, a
        // metric): both fast parsers take them, through serde_json's reading of the token alone.
        let numbers = [
            r#"{"schema_version":2,"run_id":"r","cell_id":"c","seq":1,"kind":"verifier_result","data":{"passed":true,"metrics":{"m":-1,"f":0.1,"e":1e3,"z":-0,"n":-0.0,"big":18446744073709551615,"bigger":18446744073709551616,"tiny":5e-324,"long":0.30000000000000004441}}}"#,
            r#"{"schema_version":2,"run_id":"r","cell_id":"c","seq":1,"kind":"run_finished","data":{"outcome":"passed","reward":1.0,"stop_reason":"finished","reason":"ok","elapsed_ms":1}}"#,
            r#"{"schema_version":2,"run_id":"r","cell_id":"c","seq":1,"kind":"run_finished","data":{"outcome":"failed","reward":-2.5E-1,"stop_reason":"finished","reason":"ok","elapsed_ms":1}}"#,
        ];
        for line in numbers {
            let slow = serde_json_reading(line).unwrap();
            for (parser, fast) in fast_parsers(line) {
                assert_eq!(fast.as_ref(), Some(&slow), "{parser}: {line}");
            }
        }
        // Left to serde_json, which reads them: a \u escape in a string the fold reads,
        // whitespace, the payload before the kind, nesting deeper than the fast parsers go
        // (serde_json skips any depth).
        let left = [
            line(&format!(r#"{{"step":1,"tool":"t","ok":true,"output":{}{}}}"#, "[".repeat(200), "]".repeat(200))),
            line(r#"{"step":1,"tool":"\u00e9","ok":true}"#),
            line(r#"{ "step":1,"tool":"t","ok":true}"#),
            line(r#"{"step":1,"tool":"t","ok":true} "#),
            r#"{"data":{"passed":true},"schema_version":1,"run_id":"r","cell_id":"c","seq":0,"ts":"t","kind":"test_result"}"#
                .to_string(),
        ];
        for line in &left {
            let slow = serde_json_reading(line);
            for (parser, fast) in fast_parsers(line) {
                assert!(fast.is_none(), "{parser}: {line}");
            }
            assert!(slow.is_ok(), "{line}: {slow:?}");
            assert_eq!(format!("{:?}", Lean::parse(line).unwrap()), slow.unwrap(), "the fallback reads {line}");
        }
    }

    /// Random edits of real lines: whenever a fast parser takes a line, serde_json takes it
    /// too and reads the same (the fuzz target `trace` checks the same end to end).
    #[test]
    fn the_fast_parsers_never_take_an_edited_line_serde_json_refuses() {
        let lines = example_lines();
        let pieces = ["\"", "\\", ",", "}", "{", "]", "[", ":", "0", "-", ".", "e", "u", " ", "1", "n", "\\u", "\\\""];
        let mut rng = fastrand::Rng::with_seed(19);
        let (mut taken, mut refused) = ([0; 2], [0; 2]);
        for _ in 0..40_000 {
            let mut line = lines[rng.usize(..lines.len())].clone();
            for _ in 0..rng.usize(1..=3) {
                let at = rng.usize(..=line.len());
                if !line.is_char_boundary(at) {
                    continue;
                }
                match rng.u8(..3) {
                    0 => line.insert_str(at, pieces[rng.usize(..pieces.len())]),
                    1 if at < line.len() && line.is_char_boundary(at + 1) => {
                        line.remove(at);
                    }
                    _ if at < line.len() && line.is_char_boundary(at + 1) => {
                        line.replace_range(at..at + 1, pieces[rng.usize(..pieces.len())])
                    }
                    _ => {}
                }
            }
            let slow = serde_json_reading(&line);
            for (i, (parser, fast)) in fast_parsers(&line).into_iter().enumerate() {
                match fast {
                    Some(fast) => {
                        taken[i] += 1;
                        assert_eq!(Ok(fast), slow, "{parser}: {line}");
                    }
                    None => refused[i] += 1,
                }
            }
        }
        for i in 0..2 {
            assert!(taken[i] > 1000 && refused[i] > 1000, "taken {taken:?}, refused {refused:?}");
        }
    }
}
