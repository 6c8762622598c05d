//! Replay: a pure fold from a cell's events to its [`CellSummary`].
//!
//! The live run feeds the same [`SummaryBuilder`] with each event as it is written, so the
//! summary printed at the end of `hcbench run` and the one rebuilt by `hcbench replay` come
//! from one function and must be equal (a test checks it). Nothing here reads the clock.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::trace::event::{EventBody, Outcome};
use crate::trace::{read_trace, Event, TraceError};

/// Version of the results line format (`results.jsonl`).
pub const SUMMARY_SCHEMA_VERSION: u32 = 1;

/// Everything reports need about one cell, derived from its trace alone.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CellSummary {
    pub schema_version: u32,
    pub run_id: String,
    pub cell_id: String,
    pub case_id: String,
    pub category: String,
    pub split: String,
    pub profile: String,
    pub provider: String,
    pub model: String,
    /// None when the trace has no run_finished (crash or interruption).
    pub outcome: Option<Outcome>,
    pub reward: f64,
    pub stop_reason: String,
    pub reason: String,
    /// Model actions taken.
    pub steps: u32,
    pub step_budget: u32,
    pub tool_calls: u32,
    pub tool_counts: BTreeMap<String, u32>,
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
    pub wall_ms: u64,
    pub events: u64,
    pub event_counts: BTreeMap<String, u64>,
    pub metrics: BTreeMap<String, serde_json::Value>,
    /// True when a cut last line was dropped while reading the trace.
    pub truncated: bool,
}

impl CellSummary {
    /// The outcome as reports show it; a trace that never finished is a harness error.
    pub fn outcome_label(&self) -> &'static str {
        self.outcome.map(Outcome::as_str).unwrap_or("incomplete")
    }
}

/// Incremental fold over a cell's events.
#[derive(Debug, Default)]
pub struct SummaryBuilder {
    s: Option<CellSummary>,
    modified: BTreeSet<String>,
    read_paths: BTreeSet<String>,
}

impl SummaryBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn observe(&mut self, event: &Event) {
        let s = self.s.get_or_insert_with(|| CellSummary {
            schema_version: SUMMARY_SCHEMA_VERSION,
            run_id: event.run_id.clone(),
            cell_id: event.cell_id.clone(),
            ..Default::default()
        });
        s.events += 1;
        *s.event_counts.entry(event.body.kind().to_string()).or_default() += 1;
        match &event.body {
            EventBody::RunStarted { case_id, category, split, profile, model, step_budget, .. } => {
                s.case_id = case_id.clone();
                s.category = category.clone();
                s.split = split.clone();
                s.profile = profile.clone();
                s.provider = model.provider.clone();
                s.model = model.model.clone();
                s.step_budget = *step_budget;
            }
            EventBody::ContextPacked { .. } => {}
            EventBody::ModelAction { usage, .. } => {
                s.steps += 1;
                if let Some(u) = usage {
                    s.input_tokens += u.input_tokens;
                    s.output_tokens += u.output_tokens;
                }
            }
            EventBody::ModelRetry { .. } => s.model_retries += 1,
            EventBody::ModelError { error_kind, .. } => {
                s.model_errors += 1;
                if error_kind == "parse" || error_kind == "truncated" {
                    s.steps += 1;
                    s.invalid_actions += 1;
                }
            }
            EventBody::PolicyDecision { allowed, invalid, .. } => {
                if *invalid {
                    s.invalid_actions += 1;
                } else if !allowed {
                    s.policy_denials += 1;
                }
            }
            EventBody::ToolResult { step, tool, ok, denied, modified, read, .. } => {
                if *denied {
                    return;
                }
                s.tool_calls += 1;
                *s.tool_counts.entry(tool.clone()).or_default() += 1;
                if !ok {
                    s.tool_failures += 1;
                }
                if *ok && !modified.is_empty() && s.first_edit_step.is_none() {
                    s.first_edit_step = Some(*step);
                }
                self.modified.extend(modified.iter().cloned());
                if let Some(path) = read {
                    if !self.read_paths.insert(path.clone()) {
                        s.repeated_reads += 1;
                    }
                }
            }
            EventBody::StateUpdated { .. } => {}
            EventBody::TestResult { passed, .. } => s.tests_passed = Some(*passed),
            EventBody::VerifierResult { passed, metrics, .. } => {
                s.verifier_passed = Some(*passed);
                s.metrics.extend(metrics.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
            EventBody::RunFinished { outcome, reward, stop_reason, reason, elapsed_ms } => {
                s.outcome = Some(*outcome);
                s.reward = *reward;
                s.stop_reason = stop_reason.clone();
                s.reason = reason.clone();
                s.wall_ms = *elapsed_ms;
            }
        }
    }

    /// Policy denials seen so far (the verifier's `forbid_denials` check reads this).
    pub fn denials(&self) -> u32 {
        self.s.as_ref().map_or(0, |s| s.policy_denials)
    }

    /// Model actions seen so far.
    pub fn steps(&self) -> u32 {
        self.s.as_ref().map_or(0, |s| s.steps)
    }

    /// None when no event was observed.
    pub fn finish(mut self) -> Option<CellSummary> {
        let modified = std::mem::take(&mut self.modified);
        self.s.map(|mut s| {
            s.files_modified = modified.into_iter().collect();
            s
        })
    }
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

/// Replays one trace file.
pub fn replay_trace(path: &Path) -> Result<CellSummary, ReplayError> {
    let read = read_trace(path)?;
    let mut summary = summarize(&read.events).ok_or_else(|| ReplayError::Empty(path.to_path_buf()))?;
    summary.truncated = read.truncated;
    Ok(summary)
}

/// The trace files of a run directory, in cell-id order.
pub fn run_traces(run_dir: &Path) -> Result<Vec<PathBuf>, ReplayError> {
    let cells = run_dir.join("cells");
    let rd = std::fs::read_dir(&cells).map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound {
            ReplayError::NotATrace(run_dir.to_path_buf())
        } else {
            ReplayError::RunDir { path: cells.clone(), source }
        }
    })?;
    let mut traces: Vec<PathBuf> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("trace.jsonl"))
        .filter(|p| p.is_file())
        .collect();
    traces.sort_by(|a, b| crate::util::natural_cmp(&a.to_string_lossy(), &b.to_string_lossy()));
    Ok(traces)
}

/// Replays every trace of a run directory in parallel. A corrupt trace does not fail the
/// others: it comes back as its own error, which reports show as a harness error.
pub fn replay_run(run_dir: &Path) -> Result<Vec<(PathBuf, Result<CellSummary, ReplayError>)>, ReplayError> {
    let traces = run_traces(run_dir)?;
    Ok(traces.into_par_iter().map(|p| {
        let r = replay_trace(&p);
        (p, r)
    }).collect())
}
