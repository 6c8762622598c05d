//! Replay: a pure fold from a cell's events to its [`CellSummary`].
//!
//! The live run feeds the same [`SummaryBuilder`] with each event as it is written, so the
//! summary printed at the end of `hcbench run` and the one rebuilt by `hcbench replay` come
//! from one function and must be equal (a test checks it). Nothing here reads the clock.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::trace::event::{EventBody, ModelInfo, Outcome, Usage};
use crate::trace::{Event, TraceError, for_each_line};

/// Version of the results line format (`results.jsonl`).
pub const SUMMARY_SCHEMA_VERSION: u32 = 1;

fn one() -> u32 {
    1
}

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
    /// Prices from the profile (USD per million tokens), for cost accounting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_price_per_mtok: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_price_per_mtok: Option<f64>,
    /// Digest of the agent spec that drove the cell.
    #[serde(default)]
    pub agent_spec: String,
    /// Epoch of the cell (1-based).
    #[serde(default = "one")]
    pub epoch: u32,
    pub wall_ms: u64,
    pub events: u64,
    pub event_counts: BTreeMap<String, u64>,
    pub metrics: BTreeMap<String, serde_json::Value>,
    /// True when a cut last line was dropped while reading the trace.
    pub truncated: bool,
}

impl CellSummary {
    /// Model cost in US dollars, when the profile states prices.
    pub fn cost_usd(&self) -> Option<f64> {
        let (i, o) = (self.input_price_per_mtok?, self.output_price_per_mtok?);
        Some((self.input_tokens as f64 * i + self.output_tokens as f64 * o) / 1e6)
    }

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

    /// Folds one full event (the live run's path).
    pub fn observe(&mut self, event: &Event) {
        self.observe_lean(Lean::from_event(event));
    }

    /// Folds one lean event (replay's path; the live path converts to the same shape, so both
    /// go through exactly this code).
    pub fn observe_lean(&mut self, event: Lean) {
        let s = self.s.get_or_insert_with(|| CellSummary {
            schema_version: SUMMARY_SCHEMA_VERSION,
            run_id: event.run_id.clone(),
            cell_id: event.cell_id.clone(),
            ..Default::default()
        });
        s.events += 1;
        match s.event_counts.get_mut(event.kind.as_str()) {
            Some(n) => *n += 1,
            None => {
                s.event_counts.insert(event.kind.clone(), 1);
            }
        }
        match event.body {
            LeanBody::RunStarted(r) => {
                s.case_id = r.case_id;
                s.category = r.category;
                s.split = r.split;
                s.profile = r.profile;
                s.provider = r.model.provider;
                s.model = r.model.model;
                s.step_budget = r.step_budget;
                s.input_price_per_mtok = r.model.input_price_per_mtok;
                s.output_price_per_mtok = r.model.output_price_per_mtok;
                s.epoch = r.epoch;
                s.agent_spec = r.agent_spec;
            }
            LeanBody::ModelAction { usage } => {
                s.steps += 1;
                if let Some(u) = usage {
                    s.input_tokens += u.input_tokens;
                    s.output_tokens += u.output_tokens;
                }
            }
            LeanBody::ModelRetry => s.model_retries += 1,
            LeanBody::ModelError { error_kind, usage } => {
                s.model_errors += 1;
                if let Some(u) = usage {
                    s.input_tokens += u.input_tokens;
                    s.output_tokens += u.output_tokens;
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
                *s.tool_counts.entry(t.tool).or_default() += 1;
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
                s.metrics.extend(metrics);
            }
            LeanBody::RunFinished(f) => {
                s.outcome = Some(f.outcome);
                s.reward = f.reward;
                s.stop_reason = f.stop_reason;
                s.reason = f.reason;
                s.wall_ms = f.elapsed_ms;
            }
            LeanBody::Other => {}
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

/// Replays one trace file, streaming: only the fields summaries need are parsed, and memory
/// stays bounded by the longest line.
pub fn replay_trace(path: &Path) -> Result<CellSummary, ReplayError> {
    let mut builder = SummaryBuilder::new();
    let truncated = for_each_line(path, Lean::parse, |e| builder.observe_lean(e))?;
    let mut summary = builder.finish().ok_or_else(|| ReplayError::Empty(path.to_path_buf()))?;
    summary.truncated = truncated;
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
    let mut traces: Vec<PathBuf> =
        rd.filter_map(|e| e.ok()).map(|e| e.path().join("trace.jsonl")).filter(|p| p.is_file()).collect();
    traces.sort_by(|a, b| crate::util::natural_cmp(&a.to_string_lossy(), &b.to_string_lossy()));
    Ok(traces)
}

/// One trace's replay: its path and its summary or why it could not be read.
pub type ReplayedTrace = (PathBuf, Result<CellSummary, ReplayError>);

/// Replays every trace of a run directory in parallel. A corrupt trace does not fail the
/// others: it comes back as its own error, which reports show as a harness error.
pub fn replay_run(run_dir: &Path) -> Result<Vec<ReplayedTrace>, ReplayError> {
    let traces = run_traces(run_dir)?;
    Ok(traces
        .into_par_iter()
        .map(|p| {
            let r = replay_trace(&p);
            (p, r)
        })
        .collect())
}

/// The parts of an event the summary fold reads. Large payloads (tool output, arguments,
/// context sections) are skipped while parsing, which is what makes replay fast.
#[derive(Debug, Clone)]
pub struct Lean {
    pub run_id: String,
    pub cell_id: String,
    pub kind: String,
    pub body: LeanBody,
}

#[derive(Debug, Clone)]
pub enum LeanBody {
    RunStarted(LeanRunStarted),
    ModelAction {
        usage: Option<Usage>,
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
    /// Kinds the fold does not read (context_packed, state_updated, and kinds added later).
    Other,
}

#[derive(Debug, Clone, Deserialize)]
pub struct LeanRunStarted {
    case_id: String,
    category: String,
    split: String,
    profile: String,
    model: ModelInfo,
    step_budget: u32,
    #[serde(default = "one")]
    epoch: u32,
    #[serde(default)]
    agent_spec: String,
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
    stop_reason: String,
    reason: String,
    elapsed_ms: u64,
}

#[derive(Deserialize)]
struct JustUsage {
    #[serde(default)]
    usage: Option<Usage>,
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
struct JustPassed {
    passed: bool,
}

#[derive(Deserialize)]
struct JustVerifier {
    passed: bool,
    #[serde(default)]
    metrics: BTreeMap<String, serde_json::Value>,
}

impl Lean {
    /// Parses one trace line; returns its schema version too (for the reader's check).
    ///
    /// One pass: the envelope is visited key by key, and since writers put `kind` before
    /// `data`, the payload is parsed straight into its lean shape, skipping large fields. A
    /// line with `data` first (another writer) falls back to capturing the payload raw.
    pub fn parse(line: &[u8]) -> Result<(u32, Lean), serde_json::Error> {
        use serde::de::Deserializer as _;
        let mut de = serde_json::Deserializer::from_slice(line);
        let out = (&mut de).deserialize_map(EnvelopeVisitor)?;
        de.end()?;
        Ok(out)
    }

    /// The same projection of a full event.
    pub fn from_event(e: &Event) -> Lean {
        let body = match &e.body {
            EventBody::RunStarted {
                case_id, category, split, profile, model, step_budget, epoch, agent_spec, ..
            } => LeanBody::RunStarted(LeanRunStarted {
                case_id: case_id.clone(),
                category: category.clone(),
                split: split.clone(),
                profile: profile.clone(),
                model: model.clone(),
                step_budget: *step_budget,
                epoch: *epoch,
                agent_spec: agent_spec.clone(),
            }),
            EventBody::ModelAction { usage, .. } => LeanBody::ModelAction { usage: usage.clone() },
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
                    stop_reason: stop_reason.clone(),
                    reason: reason.clone(),
                    elapsed_ms: *elapsed_ms,
                })
            }
            EventBody::ContextPacked { .. } | EventBody::StateUpdated { .. } => LeanBody::Other,
        };
        Lean { run_id: e.run_id.clone(), cell_id: e.cell_id.clone(), kind: e.body.kind().to_string(), body }
    }
}

/// Parses a payload of `kind` into its lean shape.
fn lean_body<'de, D: serde::Deserializer<'de>>(kind: &str, schema_version: u32, d: D) -> Result<LeanBody, D::Error> {
    use serde::de::{Error as _, IgnoredAny};
    Ok(match kind {
        "run_started" => LeanBody::RunStarted(LeanRunStarted::deserialize(d)?),
        "model_action" => LeanBody::ModelAction { usage: JustUsage::deserialize(d)?.usage },
        "model_retry" => {
            IgnoredAny::deserialize(d)?;
            LeanBody::ModelRetry
        }
        "model_error" => {
            let e = JustError::deserialize(d)?;
            LeanBody::ModelError { error_kind: e.error_kind, usage: e.usage }
        }
        "policy_decision" => {
            let x = JustDecision::deserialize(d)?;
            LeanBody::PolicyDecision { allowed: x.allowed, invalid: x.invalid }
        }
        "tool_result" => LeanBody::ToolResult(LeanToolResult::deserialize(d)?),
        "test_result" => LeanBody::TestResult { passed: JustPassed::deserialize(d)?.passed },
        "verifier_result" => {
            let v = JustVerifier::deserialize(d)?;
            LeanBody::VerifierResult { passed: v.passed, metrics: v.metrics }
        }
        "run_finished" => LeanBody::RunFinished(LeanRunFinished::deserialize(d)?),
        "context_packed" | "state_updated" => {
            IgnoredAny::deserialize(d)?;
            LeanBody::Other
        }
        other => {
            // An unknown kind in this schema version is corruption, not an extension.
            if schema_version <= crate::trace::SCHEMA_VERSION {
                return Err(D::Error::custom(format!("unknown event kind `{other}`")));
            }
            IgnoredAny::deserialize(d)?;
            LeanBody::Other
        }
    })
}

struct EnvelopeVisitor;

struct DataSeed<'k> {
    kind: &'k str,
    schema_version: u32,
}

impl<'de> serde::de::DeserializeSeed<'de> for DataSeed<'_> {
    type Value = LeanBody;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<LeanBody, D::Error> {
        lean_body(self.kind, self.schema_version, d)
    }
}

impl<'de> serde::de::Visitor<'de> for EnvelopeVisitor {
    type Value = (u32, Lean);

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a trace event object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        use serde::de::Error as _;
        let mut schema_version = None;
        let mut run_id = None;
        let mut cell_id = None;
        let mut kind: Option<String> = None;
        let mut body = None;
        let mut raw: Option<Box<serde_json::value::RawValue>> = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match key.as_ref() {
                "schema_version" => schema_version = Some(map.next_value::<u32>()?),
                "run_id" => run_id = Some(map.next_value::<String>()?),
                "cell_id" => cell_id = Some(map.next_value::<String>()?),
                "kind" => kind = Some(map.next_value::<String>()?),
                "data" => match &kind {
                    Some(k) => {
                        body = Some(
                            map.next_value_seed(DataSeed { kind: k, schema_version: schema_version.unwrap_or(0) })?,
                        )
                    }
                    None => raw = Some(map.next_value()?),
                },
                _ => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        let schema_version = schema_version.ok_or_else(|| A::Error::missing_field("schema_version"))?;
        let kind = kind.ok_or_else(|| A::Error::missing_field("kind"))?;
        let body = match (body, raw) {
            (Some(b), _) => b,
            (None, Some(r)) => {
                let mut d = serde_json::Deserializer::from_str(r.get());
                lean_body(&kind, schema_version, &mut d).map_err(A::Error::custom)?
            }
            (None, None) => return Err(A::Error::missing_field("data")),
        };
        Ok((
            schema_version,
            Lean {
                run_id: run_id.ok_or_else(|| A::Error::missing_field("run_id"))?,
                cell_id: cell_id.ok_or_else(|| A::Error::missing_field("cell_id"))?,
                kind,
                body,
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::TraceWriter;

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
            hcbench_version: "0".into(),
        })
        .unwrap();
        w.append(EventBody::ModelAction {
            step: 1,
            tool: "read_file".into(),
            args: serde_json::json!({"path": "a.py"}),
            usage: Some(Usage { input_tokens: 7, output_tokens: 3 }),
            latency_ms: 1,
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

    #[test]
    fn lean_replay_equals_the_fold_over_full_events() {
        let dir = tempfile::tempdir().unwrap();
        let path = sample(dir.path());
        let full = summarize(&crate::trace::read_trace(&path).unwrap().events).unwrap();
        let lean = replay_trace(&path).unwrap();
        assert_eq!(full, lean);
        assert_eq!((lean.steps, lean.policy_denials, lean.input_tokens, lean.epoch, lean.wall_ms), (1, 1, 7, 2, 42));
        assert_eq!(lean.event_counts["policy_decision"], 2);
    }

    #[test]
    fn lean_parse_accepts_data_before_kind_and_rejects_unknown_kinds() {
        let line = br#"{"data":{"passed":true,"exit_code":0,"timed_out":false,"duration_ms":1,"output":""},"schema_version":1,"run_id":"r","cell_id":"c","seq":0,"ts":"t","kind":"test_result"}"#;
        let (_, e) = Lean::parse(line).unwrap();
        assert!(matches!(e.body, LeanBody::TestResult { passed: true }));
        let bad = br#"{"schema_version":1,"run_id":"r","cell_id":"c","seq":0,"ts":"t","kind":"teleported","data":{}}"#;
        assert!(Lean::parse(bad).unwrap_err().to_string().contains("unknown event kind"));
    }
}
