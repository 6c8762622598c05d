//! Trace event types and the one table of event kinds. This is a serialized format: changing
//! a field is a schema change.
//!
//! Compatibility rule (docs/formats.md, "Trace events"): `schema_version` is a major version.
//! Readers accept any `schema_version <= SCHEMA_VERSION` and refuse newer ones. Within one
//! version a writer may add optional fields (they default on read) and new event kinds (a
//! reader that does not know a kind skips and counts it; see [`super::reader`]). Removing or
//! retyping a field, or changing what a kind means, needs a bump and a note in
//! `docs/formats.md`.
//!
//! [`EventKind`] is the only list of kinds, and everything that names a kind goes through it
//! so a kind cannot be added in one place and forgotten in another: [`EventBody::kind`] maps
//! each variant to its kind (an exhaustive match, so a new variant does not compile without
//! one), the fast replay parser dispatches on [`EventKind`] (exhaustive too), and a test checks
//! that each variant's serde tag is its kind's `as_str()` and that every kind goes through the
//! writer and both readers.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Version of the trace event format written by this build: the major version of the
/// format. Compatible additions (optional fields, new kinds) do not change it.
///
/// History: 1 (first release); 2: `context_packed` budgets are estimated tokens (`budget` was
/// characters), sections gain `tokens`, `raw_tokens`, `reduced` and `dropped_blocks`, and the
/// context kinds (`memory_updated`, `repo_map_built`, `repo_map_used`, `context_compacted`,
/// `policy_retry`) exist. Readers still read version 1 traces. Within 2: the optional `batch` of
/// `model_action` and `tool_result` (replies of several calls; absent otherwise), so no bump.
pub const SCHEMA_VERSION: u32 = 2;

/// Declares [`EventKind`] from one list of `Variant = "tag"` pairs, so its variants, `ALL`,
/// `as_str` and `from_tag` are written once and cannot disagree.
macro_rules! event_kinds {
    ($($(#[$doc:meta])* $variant:ident = $tag:literal,)+) => {
        /// The kind of a trace event: the `kind` tag of a trace line.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum EventKind {
            $($(#[$doc])* $variant,)+
        }

        impl EventKind {
            /// Every kind this build knows, in declaration order (`kind as usize` indexes it).
            pub const ALL: &'static [EventKind] = &[$(EventKind::$variant,)+];

            /// The `kind` tag as written to the trace.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(EventKind::$variant => $tag,)+
                }
            }

            /// The kind a tag names; None for a kind this build does not know (written by a
            /// newer hcbench of the same schema version).
            pub fn from_tag(tag: &str) -> Option<EventKind> {
                match tag {
                    $($tag => Some(EventKind::$variant),)+
                    _ => None,
                }
            }
        }
    };
}

event_kinds! {
    /// First event of every trace: what the cell runs and with which model.
    RunStarted = "run_started",
    /// The context shown to the model at a step, section by section.
    ContextPacked = "context_packed",
    /// The working-memory blocks changed after a tool result (the diff).
    MemoryUpdated = "memory_updated",
    /// The repo map was indexed for the cell.
    RepoMapBuilt = "repo_map_built",
    /// A rendered repo map was shown to the model: injected into the context or by the tool.
    RepoMapUsed = "repo_map_used",
    /// Older observations were folded into the packed summary.
    ContextCompacted = "context_compacted",
    /// The model's reply, parsed into a tool call.
    ModelAction = "model_action",
    /// A provider call that will be tried again.
    ModelRetry = "model_retry",
    /// A reply that could not be used, or a provider failure.
    ModelError = "model_error",
    /// Whether the policy let a call run.
    PolicyDecision = "policy_decision",
    /// A corrective message after a denied, invalid or unparseable action: the model may try again.
    PolicyRetry = "policy_retry",
    /// What a tool call did.
    ToolResult = "tool_result",
    /// The agent's state after a step.
    StateUpdated = "state_updated",
    /// The case's tests, run after the agent stopped.
    TestResult = "test_result",
    /// The case's verifier checks.
    VerifierResult = "verifier_result",
    /// Last event of a complete trace: the outcome.
    RunFinished = "run_finished",
    /// A read-only delegation began: its question, budgets and the child's own trace.
    DelegationStarted = "delegation_started",
    /// A read-only delegation answered: what it spent and the size of its evidence.
    DelegationCompleted = "delegation_completed",
    /// A read-only delegation ended without an answer: why, what it spent and what it gathered.
    DelegationFailed = "delegation_failed",
    /// A tool hook of the agent spec ran: what it decided about one call.
    HookDecision = "hook_decision",
    /// A session of a multi-session case began, with a fresh context.
    SessionStarted = "session_started",
    /// A session of a multi-session case ended: its steps, and the features claimed and verified.
    SessionFinished = "session_finished",
    /// The loop's state after a step was saved beside the trace (`agent/checkpoint.rs`).
    Checkpoint = "checkpoint",
    /// The cell continued from its last checkpoint after an interruption; the events between
    /// that checkpoint and this one are discarded by replay.
    Resumed = "resumed",
    /// An interrupted cell's checkpoint could not be used: the cell started again from step 0.
    ResumeRefused = "resume_refused",
}

fn one() -> u32 {
    1
}

/// The per-test verdict of hcbench's test runner (`test_result.runner`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunnerReport {
    /// Whether the runner left complete results (false: it exited or crashed before the end).
    #[serde(default)]
    pub results: bool,
    /// Tests by outcome: passed, failed, error, skipped, expected_failure, unexpected_success,
    /// not_run.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub counts: BTreeMap<String, u32>,
    /// Required tests (fail_to_pass, pass_to_pass) that are not in the results.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    /// Required tests that ran and did not pass, as `id (outcome)`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_passed: Vec<String>,
    /// What the runner found changed after the run (a monkeypatched runner).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tampered: Vec<String>,
    /// Why the tests did not pass, as the cell's reason says it; empty when they passed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub problem: String,
}

/// One line of `trace.jsonl`: the envelope (schema version, ids, sequence number, time stamp,
/// kind) and the kind's payload under `data`.
///
/// The payload is nested rather than flattened into the envelope because that lets the reader
/// parse it tag-first with no intermediate buffering: replay speed is a product requirement
/// (see docs/performance.md).
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub schema_version: u32,
    pub run_id: String,
    pub cell_id: String,
    /// 0-based, gap-free within a trace.
    pub seq: u64,
    /// RFC 3339 UTC, milliseconds.
    pub ts: String,
    pub body: EventBody,
}

#[derive(Serialize)]
struct WireOut<'a> {
    schema_version: u32,
    run_id: &'a str,
    cell_id: &'a str,
    seq: u64,
    ts: &'a str,
    #[serde(flatten)]
    body: &'a EventBody,
}

/// A trace line's envelope with the payload kept raw, so the reader can look at `kind` before
/// deciding whether to parse `data`.
#[derive(Deserialize)]
pub(super) struct WireIn {
    pub(super) schema_version: u32,
    run_id: String,
    cell_id: String,
    seq: u64,
    ts: String,
    pub(super) kind: String,
    data: Option<Box<serde_json::value::RawValue>>,
}

impl WireIn {
    /// The envelope the reader's sequence rule checks.
    pub(super) fn header(&self) -> super::reader::Header<'static> {
        super::reader::Header {
            schema_version: self.schema_version,
            seq: self.seq,
            run_id: self.run_id.clone().into(),
            cell_id: self.cell_id.clone().into(),
        }
    }

    /// The event this envelope holds; fails when the payload does not fit its kind (or the
    /// kind is unknown, which callers that tolerate it check first).
    pub(super) fn into_event(self) -> Result<Event, serde_json::Error> {
        // Re-assemble `{"kind":..,"data":..}` with the tag first, so the adjacently tagged
        // enum deserializes the payload straight into its variant.
        let data = self.data.as_deref().map_or("null", |r| r.get());
        let mut buf = String::with_capacity(data.len() + self.kind.len() + 20);
        buf.push_str("{\"kind\":");
        buf.push_str(&serde_json::to_string(&self.kind)?);
        buf.push_str(",\"data\":");
        buf.push_str(data);
        buf.push('}');
        let body: EventBody = serde_json::from_str(&buf)?;
        Ok(Event {
            schema_version: self.schema_version,
            run_id: self.run_id,
            cell_id: self.cell_id,
            seq: self.seq,
            ts: self.ts,
            body,
        })
    }
}

impl Event {
    /// Appends the event's line, without its newline, to `out`: the same bytes as its
    /// `Serialize` (a test in `writer.rs` holds them equal), written the short way. The
    /// envelope's fields go in by hand and the body as serde writes it alone,
    /// `{"kind":..,"data":..}`, its opening brace made the comma that continues the envelope.
    /// Through `Serialize` the body is flattened into the envelope, and serde's flattening
    /// goes field by field through a map adapter: a trace writes about ten lines a step.
    pub(super) fn write_line(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        out.extend_from_slice(b"{\"schema_version\":");
        serde_json::to_writer(&mut *out, &self.schema_version)?;
        out.extend_from_slice(b",\"run_id\":");
        serde_json::to_writer(&mut *out, &self.run_id)?;
        out.extend_from_slice(b",\"cell_id\":");
        serde_json::to_writer(&mut *out, &self.cell_id)?;
        out.extend_from_slice(b",\"seq\":");
        serde_json::to_writer(&mut *out, &self.seq)?;
        out.extend_from_slice(b",\"ts\":");
        serde_json::to_writer(&mut *out, &self.ts)?;
        let body = out.len();
        serde_json::to_writer(&mut *out, &self.body)?;
        debug_assert_eq!(out[body], b'{', "an event body serializes as an object");
        out[body] = b',';
        Ok(())
    }
}

impl Serialize for Event {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        WireOut {
            schema_version: self.schema_version,
            run_id: &self.run_id,
            cell_id: &self.cell_id,
            seq: self.seq,
            ts: &self.ts,
            body: &self.body,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        WireIn::deserialize(deserializer)?.into_event().map_err(D::Error::custom)
    }
}

/// What happened. Serialized as `"kind": "<snake_case>", "data": {...}`; the tag of each
/// variant is its [`EventKind`]'s `as_str()` (a test checks it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "data", rename_all = "snake_case")]
pub enum EventBody {
    RunStarted {
        benchmark: String,
        case_id: String,
        category: String,
        split: String,
        profile: String,
        /// Provider and model metadata. Never contains secrets.
        model: ModelInfo,
        step_budget: u32,
        /// 1-based epoch of this cell (the same case run again).
        #[serde(default = "one")]
        epoch: u32,
        /// Digest of the agent spec (`agent/`) that drove this cell.
        #[serde(default)]
        agent_spec: String,
        /// The ablation of the agent spec this cell ran (`hcbench ablate`); empty, and absent
        /// from the line, for every other command.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        ablation: String,
        hcbench_version: String,
        /// The sandbox the cell's commands ran in; absent in traces written before it was
        /// recorded.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sandbox: Option<Box<crate::sandbox::SandboxInfo>>,
    },
    ContextPacked {
        step: u32,
        /// The context mode (`none`, `pack`, `memory`); empty in version 1 traces.
        #[serde(default)]
        mode: String,
        sections: Vec<ContextSection>,
        total_chars: usize,
        /// Estimated tokens of all sections as sent.
        #[serde(default)]
        total_tokens: usize,
        /// The whole projection's budget in estimated tokens (0: unbounded, mode `none`).
        #[serde(default)]
        budget_tokens: usize,
    },
    MemoryUpdated {
        step: u32,
        /// Per changed block, the entries added and removed.
        changes: Vec<MemoryChange>,
    },
    RepoMapBuilt {
        /// Text files indexed.
        files: u32,
        symbols: u32,
        /// Files skipped: secrets, binary, too large.
        skipped: u32,
        /// Files per symbol extractor (`tree-sitter-python`, `regex`, ...).
        parsers: BTreeMap<String, u32>,
        duration_ms: u64,
    },
    RepoMapUsed {
        step: u32,
        /// `context` (injected) or `tool` (the `repo_map` tool).
        via: String,
        /// What the map was ranked against (the task, or the tool's query).
        query: String,
        /// Files shown, most relevant first.
        files: Vec<String>,
        tokens: usize,
    },
    ContextCompacted {
        step: u32,
        /// Steps whose observations were folded into the summary this time.
        folded_steps: Vec<u32>,
        /// Estimated tokens of the folded observations.
        folded_tokens: usize,
        /// Estimated tokens of the packed summary afterwards.
        summary_tokens: usize,
        /// Bounded lists carried over into the summary (`recent_reads`, `edited_files`,
        /// `open_questions`).
        carried: BTreeMap<String, Vec<String>>,
    },
    /// One call the model asked for. A reply with several calls is one `model_action` per
    /// call, each with its [`Batch`]; the first carries the turn's usage and latency.
    ModelAction {
        step: u32,
        tool: String,
        args: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
        #[serde(default)]
        latency_ms: u64,
        /// Where the call sits in its reply; absent for a reply of one call (and in traces
        /// written before batches existed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        batch: Option<Batch>,
    },
    ModelRetry {
        step: u32,
        attempt: u32,
        cause: String,
        delay_ms: u64,
    },
    ModelError {
        step: u32,
        /// `parse`, `truncated`, `provider`.
        error_kind: String,
        message: String,
        /// Tokens of a failed reply, which were still paid for.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
    },
    PolicyDecision {
        step: u32,
        tool: String,
        allowed: bool,
        reason: String,
        /// True when the call was refused because its arguments were malformed (an invalid
        /// action, not a policy violation).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        invalid: bool,
    },
    PolicyRetry {
        step: u32,
        /// `denied`, `invalid_action`, `unparseable`, or `hook_denied` / `hook_error` (a pre hook).
        cause: String,
        /// The corrective message the model is shown.
        message: String,
    },
    ToolResult {
        step: u32,
        tool: String,
        ok: bool,
        /// True when the policy denied the call and the tool never ran.
        #[serde(default)]
        denied: bool,
        /// Bounded preview: what the model sees.
        output: String,
        output_bytes: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        artifact: Option<Artifact>,
        /// Paths (workspace-relative) this call changed.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        modified: Vec<String>,
        /// Path a read_file call read.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        read: Option<String>,
        duration_ms: u64,
        /// The call's place in its reply, as on its `model_action`; absent for one call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        batch: Option<Batch>,
    },
    StateUpdated {
        step: u32,
        steps_used: u32,
        files_modified: Vec<String>,
        finished: bool,
    },
    TestResult {
        passed: bool,
        exit_code: Option<i32>,
        timed_out: bool,
        duration_ms: u64,
        output: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        artifact: Option<Artifact>,
        /// What hcbench's test runner reported, for cases with `tests.runner`; absent for a
        /// plain `test_command` (and in traces written before the runner existed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        runner: Option<RunnerReport>,
    },
    VerifierResult {
        passed: bool,
        /// Time spent in the verifier command (0 when the case has none).
        #[serde(default)]
        duration_ms: u64,
        checks: Vec<Check>,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        metrics: BTreeMap<String, Value>,
    },
    RunFinished {
        outcome: Outcome,
        reward: f64,
        /// Why the agent loop stopped: `finished`, `step_budget_exhausted`, `model_error`...
        stop_reason: String,
        /// One sentence explaining the outcome.
        reason: String,
        elapsed_ms: u64,
    },
    /// The agent called `delegate_readonly`: a child loop with read-only tools starts, with its
    /// own budgets and its own trace (`agent::delegate`).
    DelegationStarted {
        step: u32,
        /// 1-based number of the delegation in the cell.
        id: u32,
        question: String,
        /// The child's budgets after the agent spec's caps.
        max_steps: u32,
        max_tokens: u64,
        /// The child's trace, relative to the cell directory (`delegations/<id>/trace.jsonl`).
        trace: String,
    },
    /// The child finished with an answer; its evidence is the call's result.
    DelegationCompleted {
        step: u32,
        id: u32,
        #[serde(flatten)]
        spent: Delegated,
    },
    /// The child ended without an answer; the call fails, carrying the evidence gathered.
    DelegationFailed {
        step: u32,
        id: u32,
        /// `out_of_steps`, `out_of_tokens`, `model_error`, `invalid_replies` or `trace_error`.
        reason: String,
        /// One sentence for people.
        message: String,
        #[serde(flatten)]
        spent: Delegated,
    },
    /// One run of a tool hook (`hooks:` of the agent spec, docs/formats.md "Hooks"). A pre
    /// hook's event follows its call's `policy_decision`; a post hook's comes before its call's
    /// `tool_result`, which carries the hook's note.
    HookDecision {
        step: u32,
        /// The hook's name in the spec.
        hook: String,
        /// `pre` or `post`.
        phase: String,
        tool: String,
        /// `allow`, `deny`, `rewrite` (pre), `annotate` (post) or `error` (the hook failed).
        decision: String,
        /// The deny reason, the note, or why the hook failed; empty for `allow` and `rewrite`.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        reason: String,
        /// The arguments a `rewrite` gave the call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        args: Option<Value>,
        /// Set when the policy refused the rewritten call: its reason (counted as a policy denial).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        policy_denied: Option<String>,
        duration_ms: u64,
        /// The call's place in its reply, as on its `model_action`; absent for one call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        batch: Option<Batch>,
    },
    /// A session of a multi-session case began (docs/benchmark-format.md, "Multi-session
    /// cases"): the step loop starts again from a fresh context; only the workspace carries over.
    SessionStarted {
        /// 1-based.
        index: u32,
        /// `initializer` (session 1) or `coding`: which prompt it got. (Not `kind`, which
        /// names the event.)
        role: String,
        /// Model turns this session may take.
        step_budget: u32,
        /// The trace step of the session's first turn: steps run on across sessions.
        first_step: u32,
    },
    /// A session of a multi-session case ended. `marked_passing` is what the agent's
    /// `feature_list.json` claims, `verified_passing` what the case's hidden checks found, and
    /// `false_claims` the features in the first and not the second.
    SessionFinished {
        index: u32,
        role: String,
        /// Model turns the session took.
        steps_used: u32,
        /// Why the session's loop stopped (`finished`, `step_budget_exhausted`, ...).
        stop_reason: String,
        marked_passing: Vec<String>,
        verified_passing: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        false_claims: Vec<String>,
        /// The commit the workspace's git repository is at; absent before its first commit.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        head: Option<String>,
        elapsed_ms: u64,
    },
    /// The loop's state after step `step` was written to `path` (relative to the cell
    /// directory), atomically, before this event; `sha256` is of the file's bytes, so a resume
    /// can tell the file it names from another. Written after that step's `state_updated`.
    Checkpoint {
        step: u32,
        path: String,
        sha256: String,
        bytes: u64,
        /// Time spent gathering the state, digesting the workspace and writing the file.
        #[serde(default)]
        duration_us: u64,
    },
    /// The cell continued after an interruption from the checkpoint of step `from_step`, named
    /// by the `checkpoint` event at seq `checkpoint_seq`. Replay discards the events after that
    /// one and before this one (`discarded_events` of them: what the interrupted process wrote
    /// after its last checkpoint), so the summary is the one of an uninterrupted run.
    Resumed {
        from_step: u32,
        checkpoint: String,
        checkpoint_seq: u64,
        discarded_events: u64,
        /// True when the workspace did not match the checkpoint's digests and was rebuilt
        /// from the fixture and the stored contents.
        workspace_restored: bool,
        /// Time spent verifying (and restoring) the workspace.
        #[serde(default)]
        restore_ms: u64,
        /// Time from the start of the resume to the loop's next step, restore included.
        duration_ms: u64,
    },
    /// The interrupted attempt's checkpoint was refused (`reason`); its trace was kept as
    /// `abandoned_trace` (relative to the cell directory) and this trace starts the cell over.
    ResumeRefused {
        reason: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        abandoned_trace: String,
    },
}

/// What a delegation spent and returned, in `delegation_completed` and `delegation_failed`.
/// Its tokens count toward the cell's (the summary adds them to the cell's input and output
/// tokens), so the cell's cost and the run's `--budget-usd` include every delegation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Delegated {
    /// The child's model turns.
    pub steps: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// At the profile's prices; absent when it states none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Calls the child made that the gate refused (a write, a command, another delegation).
    #[serde(default)]
    pub refusals: u32,
    /// Entries of the evidence returned to the agent.
    #[serde(default)]
    pub files: u32,
    #[serde(default)]
    pub symbols: u32,
    #[serde(default)]
    pub findings: u32,
    /// Bytes of the evidence as the agent received it.
    #[serde(default)]
    pub evidence_bytes: u64,
}

impl EventBody {
    /// The kind of this event; its `kind` tag on the wire is `kind().as_str()`.
    pub fn kind(&self) -> EventKind {
        match self {
            EventBody::RunStarted { .. } => EventKind::RunStarted,
            EventBody::ContextPacked { .. } => EventKind::ContextPacked,
            EventBody::MemoryUpdated { .. } => EventKind::MemoryUpdated,
            EventBody::RepoMapBuilt { .. } => EventKind::RepoMapBuilt,
            EventBody::RepoMapUsed { .. } => EventKind::RepoMapUsed,
            EventBody::ContextCompacted { .. } => EventKind::ContextCompacted,
            EventBody::PolicyRetry { .. } => EventKind::PolicyRetry,
            EventBody::ModelAction { .. } => EventKind::ModelAction,
            EventBody::ModelRetry { .. } => EventKind::ModelRetry,
            EventBody::ModelError { .. } => EventKind::ModelError,
            EventBody::PolicyDecision { .. } => EventKind::PolicyDecision,
            EventBody::ToolResult { .. } => EventKind::ToolResult,
            EventBody::StateUpdated { .. } => EventKind::StateUpdated,
            EventBody::TestResult { .. } => EventKind::TestResult,
            EventBody::VerifierResult { .. } => EventKind::VerifierResult,
            EventBody::RunFinished { .. } => EventKind::RunFinished,
            EventBody::DelegationStarted { .. } => EventKind::DelegationStarted,
            EventBody::DelegationCompleted { .. } => EventKind::DelegationCompleted,
            EventBody::DelegationFailed { .. } => EventKind::DelegationFailed,
            EventBody::HookDecision { .. } => EventKind::HookDecision,
            EventBody::SessionStarted { .. } => EventKind::SessionStarted,
            EventBody::SessionFinished { .. } => EventKind::SessionFinished,
            EventBody::Checkpoint { .. } => EventKind::Checkpoint,
            EventBody::Resumed { .. } => EventKind::Resumed,
            EventBody::ResumeRefused { .. } => EventKind::ResumeRefused,
        }
    }
}

/// The place of one call in a reply that held several (`docs/formats.md`, "Batches").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Batch {
    /// The batch: the step of the model turn whose reply it was (one batch per turn).
    pub id: u32,
    /// 1-based position of the call in the reply, in the order the model asked.
    pub position: u32,
    /// Calls in the reply, including any refused for going past the cap.
    pub size: u32,
}

impl Batch {
    /// The place of call `index` (0-based) of a reply of `size` calls at `step`; `None` for a
    /// reply of one call, whose events read as they always did.
    pub fn of(step: u32, index: usize, size: usize) -> Option<Batch> {
        (size > 1).then(|| Batch { id: step, position: index as u32 + 1, size: size as u32 })
    }
}

/// Model and provider metadata recorded in `run_started`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelInfo {
    pub provider: String,
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    /// USD per million input tokens, when the profile states prices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_price_per_mtok: Option<f64>,
    /// USD per million output tokens, when the profile states prices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_price_per_mtok: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Input tokens the provider served from its prompt cache, where it reports them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
}

/// One section of the projected context and what the budget did to it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContextSection {
    pub name: String,
    /// Characters sent.
    pub chars: usize,
    /// Estimated tokens sent.
    #[serde(default)]
    pub tokens: usize,
    /// Estimated tokens before the budget was applied.
    #[serde(default)]
    pub raw_tokens: usize,
    /// The section's budget in estimated tokens (characters in version 1 traces).
    pub budget: usize,
    /// True when the section was cut, or blocks of it dropped, to fit.
    #[serde(default)]
    pub reduced: bool,
    /// Characters removed from a clipped block (0 when nothing was clipped).
    pub cut: usize,
    /// Blocks (e.g. old observations) dropped entirely.
    #[serde(default)]
    pub dropped: usize,
    /// Which blocks were dropped (`step-3`, `explored_files`, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped_blocks: Vec<String>,
}

/// One working-memory block's change in `memory_updated`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryChange {
    /// `failing_tests`, `explored_files`, `relevant_symbols`, `patch_summary`,
    /// `verified_facts` or `open_questions`.
    pub block: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub added: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<String>,
}

/// A large output stored beside the trace. `path` is relative to the cell directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Artifact {
    pub path: String,
    pub sha256: String,
    pub bytes: u64,
}

/// One verifier check (`unchanged`, `forbid_denials`, `max_steps`, `command`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub name: String,
    pub passed: bool,
    pub detail: String,
}

/// The class of a cell's result. Infrastructure classes are never merged with agent failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Tests and verifier passed.
    Passed,
    /// The agent's work did not pass: a real, valid negative verdict.
    Failed,
    /// A child process (tests, verifier) exceeded its time limit.
    Timeout,
    /// The model provider failed after retries.
    ProviderError,
    /// The verifier itself could not run.
    VerifierError,
    /// hcbench could not run the cell (workspace, I/O, bad case).
    HarnessError,
    /// The run was interrupted before the cell ended.
    Cancelled,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::Failed => "failed",
            Outcome::Timeout => "timeout",
            Outcome::ProviderError => "provider_error",
            Outcome::VerifierError => "verifier_error",
            Outcome::HarnessError => "harness_error",
            Outcome::Cancelled => "cancelled",
        }
    }

    /// True when the cell produced a valid verdict on the agent (passed or failed).
    pub fn is_verdict(self) -> bool {
        matches!(self, Outcome::Passed | Outcome::Failed)
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
