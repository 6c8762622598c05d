//! The embedded agent loop for one cell.
//!
//! state -> context projection -> model action -> policy decision -> tool result -> state
//! update, until the agent finishes, the step budget runs out, or the provider fails; then the
//! tests and the verifier judge the workspace. A reply may ask for several calls: they run as
//! one batch (`batch.rs`: reads together, the rest alone, in order) within the one step. Every step is appended to the cell's trace
//! before the next one starts, and the summary is folded from exactly those events, so the
//! live summary and a later replay agree by construction. A multi-session case runs the step
//! loop (`steps`) once per session, each from a fresh context, and scores once (`conclude`):
//! `sessions.rs`. After a step, once `--checkpoint-interval` has passed since the last save,
//! the loop's state (one [`checkpoint::LoopState`]) is saved as a checkpoint beside the trace,
//! from which `--resume` continues an interrupted cell (`checkpoint.rs`).

pub mod batch;
pub mod checkpoint;
pub mod compaction;
pub mod context;
pub(crate) mod delegate;
pub mod hooks;
pub mod memory;
pub(crate) mod paths;
pub mod policy;
pub mod repomap;
pub mod score;
pub mod sessions;
pub mod spec;
pub mod testrun;
pub mod tokens;
pub mod tools;

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use crate::action::{Action, Call, Tool};
use crate::bench::Case;
use crate::model::{ModelError, ModelRequest, Profile};
use crate::process::{Part, WaitClock};
use crate::replay::{CellSummary, SummaryBuilder};
use crate::sandbox::Sandbox;
use crate::trace::TraceWriter;
use crate::trace::event::{Artifact, Batch, EventBody, Outcome};
use checkpoint::{Checkpointer, LoopState, Reopened, ResumedCell, SessionProgress};
use compaction::Compactor;
use context::{ContextState, Observation, Rendered};
use memory::WorkingMemory;
use policy::Decision;
use spec::{AgentSpec, ContextMode};
use tools::ToolOutput;

/// Bytes of a tool output the model sees; the rest lives in an artifact.
pub const PREVIEW_LIMIT: usize = 8 * 1024;

/// Everything needed to run one cell.
#[derive(Debug, Clone)]
pub struct CellPlan {
    pub run_id: String,
    pub cell_id: String,
    pub benchmark: String,
    pub case: Arc<Case>,
    pub profile: Profile,
    /// 1-based epoch.
    pub epoch: u32,
    /// The agent's tunable behaviour (with the cell's ablation applied).
    pub spec: Arc<AgentSpec>,
    /// The ablation `spec` carries (`hcbench ablate`); empty for every other command.
    pub ablation: String,
    /// `RUN_DIR/cells/<cell_id>`: holds trace.jsonl, workspace/ and, when an output was too
    /// large for the trace, artifacts/.
    pub cell_dir: PathBuf,
    /// Where the cell's commands run.
    pub sandbox: Sandbox,
    /// The cell's workspace, made fresh from the fixture: outside the run directory and the
    /// project (`cell_dir/workspace` links to it).
    pub workspace: PathBuf,
    /// The wall time from one checkpoint to the next (`--checkpoint-interval`; zero: after
    /// every step). See `checkpoint.rs`.
    pub checkpoint_interval: std::time::Duration,
}

/// Writes events to the trace and folds them into the live summary, in that order.
///
/// A step's events are held and written together when it ends (its `state_updated`), in one
/// call, and so is the end of the cell (`run_finished`); whoever reads the trace in between
/// (the final tests, which may name it, and the verifier's copy of it) calls
/// [`Recorder::flush`] first. So the trace on disk always holds whole steps, the last step's
/// checkpoint records a position that is written, and a cell cut off mid-step writes what it
/// held when its writer drops (src/trace/writer.rs).
struct Recorder {
    writer: TraceWriter,
    summary: SummaryBuilder,
}

impl Recorder {
    fn emit(&mut self, body: EventBody) -> io::Result<()> {
        WaitClock::time(Part::Trace, || {
            let body = self.writer.hold(body)?;
            let (run_id, cell_id) = self.writer.ids();
            self.summary.observe_body(run_id, cell_id, &body);
            if matches!(body, EventBody::StateUpdated { .. } | EventBody::RunFinished { .. }) {
                self.writer.flush()?;
            }
            Ok(())
        })
    }

    /// Writes the events held so far.
    fn flush(&mut self) -> io::Result<()> {
        WaitClock::time(Part::Trace, || self.writer.flush())
    }
}

/// Runs one cell to its end. Errors only when the trace itself cannot be written.
pub async fn run_cell(plan: &CellPlan) -> io::Result<CellSummary> {
    run_cell_with(plan, &crate::events::NullSink).await
}

/// [`run_cell`], telling `sink` when the cell continues an interrupted attempt from its last
/// checkpoint, or cannot and starts over (`checkpoint.rs`).
///
/// The cell's own cost, its wall time minus the time it waited on its commands and its model
/// ([`crate::process::WaitClock`]), goes to the log as a debug event of target `hcbench::cost`
/// (`RUST_LOG=hcbench::cost=debug`), in microseconds: `benches/overhead.rs` collects it. The
/// event also gives the parts of that cost timed apart ([`Part`]) and the cell's removals at its
/// end (its checkpoints' rename, and the wait for the removals on the pool); the rest is the
/// policy, the hooks, the outputs stored as artifacts and the judging (a multi-session cell's
/// feature checks after each session are its scoring).
pub async fn run_cell_with(plan: &CellPlan, sink: &dyn crate::events::EngineSink) -> io::Result<CellSummary> {
    let t0 = Instant::now();
    let clock = WaitClock::default();
    let removals = Arc::new(crate::process::Removals::default());
    let ended = clock.scope(removals.scope(cell_work(plan, sink))).await;
    // The cell's folders go while it goes on; what is left of them is waited for here.
    let waited = Instant::now();
    removals.finish().await;
    let removal_wait_us = waited.elapsed().as_micros() as u64 + clock.part_us(Part::Removals);
    let wall_us = t0.elapsed().as_micros() as u64;
    let (commands_us, model_us) = (clock.commands_us(), clock.model_us());
    tracing::debug!(
        target: "hcbench::cost",
        cell = %plan.cell_id,
        sandbox = %plan.sandbox.info().mechanism,
        wall_us,
        commands_us,
        model_us,
        harness_us = wall_us.saturating_sub(commands_us + model_us),
        workspace_us = clock.part_us(Part::Workspace),
        repo_map_us = clock.part_us(Part::RepoMap),
        checkpoint_us = clock.part_us(Part::Checkpoints),
        trace_us = clock.part_us(Part::Trace),
        context_us = clock.part_us(Part::Context),
        tools_us = clock.part_us(Part::Tools),
        scoring_us = clock.part_us(Part::Scoring),
        removal_wait_us,
        "cell's own cost"
    );
    ended
}

/// [`run_cell_with`]'s work.
async fn cell_work(plan: &CellPlan, sink: &dyn crate::events::EngineSink) -> io::Result<CellSummary> {
    let started = Instant::now();
    // artifacts/ is made by the first output that needs it (`store_output`): most cells have none.
    // The folder itself is most often made ahead, with the workspace (`workspace::copy_ahead`
    // says why): then one stat, which takes no lock of the run's `cells/`, as a mkdir would.
    if !plan.cell_dir.is_dir() {
        std::fs::create_dir_all(&plan.cell_dir)?;
    }
    let trace_path = plan.cell_dir.join("trace.jsonl");
    let case = plan.case.as_ref();
    let mut provider = plan.profile.provider_for(case, plan.epoch);
    // A trace left by an earlier attempt of this cell (`matrix --resume`): continue it from its
    // last checkpoint, or set it aside and start over.
    let (refused, resumed) = match checkpoint::reopen(plan, provider.as_mut(), sink)? {
        Reopened::Resumed(r) => (None, Some(r)),
        Reopened::Refused { reason, abandoned_trace } => {
            (Some(EventBody::ResumeRefused { reason, abandoned_trace }), None)
        }
        Reopened::Nothing => (None, None),
    };
    let (mut rec, resumed) = match resumed {
        Some(r) => (r.0, Some(r.1)),
        None => {
            let writer = TraceWriter::create(&trace_path, &plan.run_id, &plan.cell_id)?;
            (Recorder { writer, summary: SummaryBuilder::new() }, None)
        }
    };
    let started = resumed.as_ref().map_or(started, |r| r.started);

    if resumed.is_none() {
        rec.emit(EventBody::RunStarted {
            benchmark: plan.benchmark.clone(),
            case_id: case.id.clone(),
            category: case.category.to_string(),
            split: case.split.to_string(),
            profile: plan.profile.name().to_string(),
            model: provider.info(),
            step_budget: case.step_budget,
            epoch: plan.epoch,
            agent_spec: plan.spec.digest.clone(),
            ablation: plan.ablation.clone(),
            hcbench_version: env!("CARGO_PKG_VERSION").to_string(),
            sandbox: Some(Box::new(plan.sandbox.info())),
        })?;
        if let Some(refused) = refused {
            rec.emit(refused)?;
        }
    }

    // A profile whose server was found unreachable (its circuit breaker is open) runs nothing
    // more: the cell ends before its workspace exists, as a provider_error `--resume` retries.
    if let Some(message) = plan.profile.unavailable() {
        rec.emit(EventBody::RunFinished {
            outcome: Outcome::ProviderError,
            reward: 0.0,
            stop_reason: "provider_unreachable".into(),
            reason: message,
            elapsed_ms: started.elapsed().as_millis() as u64,
        })?;
        return Ok(finish(rec));
    }

    // A fresh workspace may have been copied ahead while the cell waited to start (src/engine.rs):
    // the cell's copy time is then its wait for that copy, if any.
    let link = plan.cell_dir.join("workspace");
    let fresh = crate::workspace::fresh_or_ahead(&case.fixture_dir, &plan.workspace, &link);
    let made = match resumed.as_ref() {
        Some(r) => Ok(r.ws.clone()),
        None => WaitClock::time_async(Part::Workspace, fresh).await,
    };
    let ws = match made {
        Ok(ws) => ws,
        Err(e) => {
            rec.emit(EventBody::RunFinished {
                outcome: Outcome::HarnessError,
                reward: 0.0,
                stop_reason: "workspace_error".into(),
                reason: e.to_string(),
                elapsed_ms: started.elapsed().as_millis() as u64,
            })?;
            return Ok(finish(rec));
        }
    };

    // The cell's wall-clock limit bounds everything after the workspace exists: the model's
    // turns, the tools, the tests and the verifier. Whatever the cell is waiting on when it
    // runs out (a model that does not answer, a command), its future is dropped, which kills
    // its process groups; the trace then gets the ending the loop could not write.
    // The cell's own sandbox, set up once for its commands (sandbox::CellSandbox).
    let sandbox = match plan.sandbox.for_cell() {
        Ok(s) => s,
        Err(e) => {
            rec.emit(EventBody::RunFinished {
                outcome: Outcome::HarnessError,
                reward: 0.0,
                stop_reason: "sandbox_error".into(),
                reason: format!("cannot make the cell's private folder for its sandbox: {e}"),
                elapsed_ms: started.elapsed().as_millis() as u64,
            })?;
            return Ok(finish(rec));
        }
    };
    let hook_files = hooks::Files::default();
    let cell = Cell { plan, ws: &ws, trace: &trace_path, sandbox: &sandbox, hooks: &hook_files };
    // A resumed cell has what its interrupted attempt left of the limit; a multi-session case
    // runs its sessions inside the same limit.
    let limit = case.cell_timeout.saturating_sub(resumed.as_ref().map_or(std::time::Duration::ZERO, |r| r.used));
    let worked = async {
        match case.sessions {
            Some(_) => sessions::work(&cell, &mut rec, started, resumed).await,
            None => work(&cell, &mut rec, provider, started, resumed).await,
        }
    };
    match tokio::time::timeout(limit, worked).await {
        Ok(ended) => ended?,
        Err(_) => rec.emit(EventBody::RunFinished {
            outcome: Outcome::Timeout,
            reward: 0.0,
            stop_reason: "cell_timeout".into(),
            reason: format!(
                "the cell ran past its wall-clock limit of {}s (cell_timeout_s)",
                case.cell_timeout.as_secs_f64()
            ),
            elapsed_ms: started.elapsed().as_millis() as u64,
        })?,
    }
    // The cell has its verdict and is never continued: its checkpoints, which keep a copy of
    // every file it wrote, would only take disk. (A cancelled cell never gets here: the engine
    // ends its trace, and `--resume` continues it from them.)
    // The checkpoints leave with one rename ([`retire_checkpoints`]; a cell that saved none,
    // `--checkpoint-interval`, has no folder of them and the rename finds nothing); the cell's sandbox is
    // removed on a thread of the blocking pool, which the cell's function waits for
    // (`run_cell_with`). Only a cell's own sandbox has a folder to remove; any other is dropped
    // here rather than waking a thread of the pool for nothing.
    if sandbox.cell().is_some() {
        crate::process::Removals::drop_later(sandbox);
    }
    WaitClock::time(Part::Removals, || retire_checkpoints(&plan.cell_dir));
    Ok(finish(rec))
}

/// The name a finished cell's checkpoints folder is renamed to ([`retire_checkpoints`]).
pub const RETIRED_CHECKPOINTS: &str = "checkpoint.done";

/// Takes a finished cell's checkpoints out of its way: its `checkpoint/` folder is renamed to
/// [`RETIRED_CHECKPOINTS`], which the engine removes with the rest of the cell's folder once
/// its trace is stored (`trace::stored::tidy_cell_dir`, on the blocking pool, which the run
/// waits for at its end), while the next cell runs.
///
/// Why not removed here: removing the folder took 0.3-3 ms of the cell's time on this
/// machine's ext4 (its files and folders are unlinked one by one, each waiting its turn in the
/// journal), and the cell waited for it whether it ran here or on the pool; the rename takes
/// about 30 us. The removal's CPU is the same, spent while the next cell waits on its commands.
/// When the rename cannot be made (a retired folder an interrupted run left in the way), the
/// folder is removed here, as before.
fn retire_checkpoints(cell_dir: &Path) {
    let folder = cell_dir.join(checkpoint::DIR);
    match std::fs::rename(&folder, cell_dir.join(RETIRED_CHECKPOINTS)) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(_) => crate::process::remove_folder(&folder),
    }
}

/// Where first-step repo maps are kept for later processes: `.repo-maps` in the folder of the
/// run's workspaces, which every run of the project (or of the machine, by default) shares and
/// which no cell's sandbox binds. A cell's workspace is `<workspaces>/<run_id>/<cell_id>`
/// (`engine::plan_variants`); a plan laid out otherwise keeps its maps in the process only.
pub(super) fn repo_map_store(plan: &CellPlan) -> Option<PathBuf> {
    let runs = plan.workspace.parent().filter(|p| p.file_name().is_some_and(|n| *n == *plan.run_id))?;
    Some(runs.parent()?.join(REPO_MAP_STORE))
}

/// The folder of stored repo maps, beside the runs' workspace folders (a run id never starts
/// with a dot).
pub const REPO_MAP_STORE: &str = ".repo-maps";

/// What a running cell works with.
struct Cell<'a> {
    plan: &'a CellPlan,
    ws: &'a Path,
    trace: &'a Path,
    /// The cell's sandbox ([`Sandbox::for_cell`]).
    sandbox: &'a Sandbox,
    /// The files the spec's tool hooks name, laid down for the cell on first use (shared with
    /// its delegations, whose calls pass the same hooks).
    hooks: &'a hooks::Files,
}

/// The agent loop and the scoring of one cell, up to and including its `run_finished`.
async fn work(
    cell: &Cell<'_>,
    rec: &mut Recorder,
    provider: Box<dyn crate::model::Provider>,
    started: Instant,
    resumed: Option<ResumedCell>,
) -> io::Result<()> {
    prepare_sandbox(cell);
    let start = match resumed {
        Some(r) => Start::Resumed(r),
        None => Start::Fresh {
            checkpoints: WaitClock::time(Part::Checkpoints, || {
                let store = repo_map_store(cell.plan);
                Checkpointer::for_fresh(cell.ws, &cell.plan.cell_dir, store.as_deref(), cell.plan.checkpoint_interval)
            }),
            session: None,
            map: None,
        },
    };
    let end = steps(cell, rec, provider, 1, start, started).await?;
    conclude(cell, rec, end, started, None).await
}

/// The cell's sandbox sets itself up while the loop starts.
fn prepare_sandbox(cell: &Cell<'_>) {
    if let Err(e) = score::prepare_commands(&cell.plan.case, cell.ws, cell.sandbox) {
        tracing::warn!("cannot start the cell's sandbox: {e}");
    }
}

/// What a run of the step loop starts from.
// Made once per session and moved straight into the loop: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
enum Start {
    /// A fresh context, saved after each step by `checkpoints` when there are any. A session
    /// of a multi-session cell carries where the cell stands (saved with every checkpoint),
    /// and, after the first, the index the session before mapped the workspace with, which its
    /// own map brings up to date ([`repomap::RepoIndex::update`]).
    Fresh { checkpoints: Option<Checkpointer>, session: Option<SessionProgress>, map: Option<repomap::RepoIndex> },
    /// An interrupted cell's last checkpoint.
    Resumed(ResumedCell),
}

/// How a run of the step loop ended.
struct LoopEnd {
    stop_reason: &'static str,
    provider_failure: Option<String>,
    /// Step of the first read of each path.
    first_reads: BTreeMap<String, u32>,
    /// Model turns taken (the budget counts these).
    turns: u32,
    /// The cell's checkpoints, for the next session of a multi-session cell.
    checkpoints: Option<Checkpointer>,
    /// The index a later session's map was made from, for the next session's map.
    map: Option<repomap::RepoIndex>,
}

/// The step loop, from a fresh context: at most `case.step_budget` turns, numbered in the
/// trace from `first_step` (a multi-session case's later sessions go on from the steps
/// before; the context's own counter starts at 1 in every session).
async fn steps(
    cell: &Cell<'_>,
    rec: &mut Recorder,
    mut provider: Box<dyn crate::model::Provider>,
    first_step: u32,
    mut start: Start,
    started: Instant,
) -> io::Result<LoopEnd> {
    let Cell { plan, ws, .. } = *cell;
    let case = plan.case.as_ref();
    let spec = plan.spec.as_ref();
    let managed = spec.mode != ContextMode::None;
    // The injected map is ranked once per cell, against the task: it is the same every turn,
    // which keeps the context's prefix stable (docs/context.md).
    // A resumed cell's map is in its checkpoint, and its events in the trace already.
    let fresh = matches!(start, Start::Fresh { .. });
    let mut map_index = None;
    let repo_map = if fresh && spec.repo_map && managed {
        // The first session starts from the fixture as it is: its map may be one built before
        // for the same fixture (`fresh_workspace_map`), by this process or an earlier one; a
        // later session's workspace has changed, but mostly not: its map is looked up by its
        // files' digests, else updates the index of the session before, which reuses every file
        // whose bytes are the same (the map is the one a fresh build would make), and is kept
        // for the session after (`later_session_map`).
        let (stats, view) = if first_step == 1 {
            let store = repo_map_store(plan);
            WaitClock::time(Part::RepoMap, || {
                repomap::fresh_workspace_map(
                    &case.fixture_dir,
                    ws,
                    &case.prompt,
                    spec.budgets.repo_map,
                    store.as_deref(),
                )
            })
        } else {
            let earlier = match &mut start {
                Start::Fresh { map, .. } => map.take(),
                Start::Resumed(_) => None,
            };
            let store = repo_map_store(plan);
            WaitClock::time(Part::RepoMap, || {
                let (stats, view, index) =
                    repomap::later_session_map(earlier, ws, &case.prompt, spec.budgets.repo_map, store.as_deref());
                map_index = index;
                (stats, view)
            })
        };
        rec.emit(EventBody::RepoMapBuilt {
            files: stats.files,
            symbols: stats.symbols,
            skipped: stats.skipped,
            parsers: stats.parsers,
            duration_ms: stats.duration_ms,
        })?;
        rec.emit(EventBody::RepoMapUsed {
            step: first_step,
            via: "context".into(),
            query: crate::util::truncate_str(&view.query, 200).to_string(),
            files: view.files,
            tokens: view.tokens,
        })?;
        Some(view.text)
    } else {
        None
    };
    // Everything the loop carries from step to step, in one struct so the checkpoint after
    // each step saves all of it (`checkpoint.rs`).
    let (mut state, mut checkpoints) = match start {
        Start::Resumed(r) => (r.state, Some(r.checkpointer)),
        Start::Fresh { checkpoints, session, .. } => {
            let memory = (spec.mode == ContextMode::Memory).then(|| WorkingMemory::new(&case.prompt));
            (LoopState { repo_map, memory, session, ..LoopState::default() }, checkpoints)
        }
    };
    let mut stop_reason = if state.finished { "finished" } else { "step_budget_exhausted" };
    let mut provider_failure: Option<String> = None;
    // A cell resumed after its finishing step goes straight to scoring; one resumed mid-way
    // goes on after the turns its checkpoint had taken.
    let done = state.finished;
    let taken = state.step.saturating_sub(first_step - 1);
    let mut turns = taken;
    // What every turn's context starts with, measured once.
    let fixed = WaitClock::time(Part::Context, || context::Fixed::new(case, spec, state.repo_map.as_deref()));

    for turn_no in (taken + 1..=case.step_budget).filter(move |_| !done) {
        let step = first_step + turn_no - 1;
        turns = turn_no;
        // In a block: the renderers borrow the state and must be gone before the await below.
        let packed = WaitClock::time(Part::Context, || {
            let memory_view =
                |budget: usize| Rendered::from(state.memory.as_ref().map(|m| m.render(budget)).unwrap_or_default());
            let memory_section = state.memory.is_some().then_some(&memory_view as context::Renderer<'_>);
            let pack_with = |compactor: &Compactor| {
                let summary = |budget: usize| compactor.render(budget);
                context::pack_with(
                    &fixed,
                    &ContextState {
                        case,
                        spec,
                        repo_map: state.repo_map.as_deref(),
                        packed: (!compactor.is_empty()).then_some(&summary as context::Renderer<'_>),
                        memory: memory_section,
                        step: turn_no,
                        observations: &state.observations[compactor.folded()..],
                    },
                )
            };
            let mut packed = pack_with(&state.compactor);
            // Observations no longer fit: fold the oldest into the summary instead of losing them.
            if managed
                && spec.compaction
                && packed.dropped_observations()
                && let Some(folded) = state.compactor.fold(&state.observations, spec.budgets.observations)
            {
                rec.emit(EventBody::ContextCompacted {
                    step,
                    folded_steps: folded.steps,
                    folded_tokens: folded.tokens,
                    summary_tokens: folded.summary_tokens,
                    carried: folded.carried,
                })?;
                packed = pack_with(&state.compactor);
            }
            Ok::<_, io::Error>(packed)
        })?;
        let turn = ask(rec, provider.as_mut(), spec, (step, turn_no), packed).await?;
        let reply = match turn.result {
            Ok(reply) => reply,
            Err(e @ (ModelError::Parse(_) | ModelError::Truncated(_))) => {
                let message = e.to_string();
                rec.emit(EventBody::ModelError {
                    step,
                    error_kind: e.kind().into(),
                    message: message.clone(),
                    usage: turn.usage.clone(),
                })?;
                state.invalid_in_a_row += 1;
                if state.invalid_in_a_row >= spec.max_invalid_replies {
                    stop_reason = "invalid_replies";
                    break;
                }
                ask_again(rec, step, &message, &mut state.observations)?;
                continue;
            }
            Err(e @ ModelError::Provider(_)) => {
                rec.emit(EventBody::ModelError {
                    step,
                    error_kind: e.kind().into(),
                    message: e.to_string(),
                    usage: turn.usage.clone(),
                })?;
                provider_failure = Some(e.to_string());
                stop_reason = "provider_error";
                break;
            }
        };
        state.invalid_in_a_row = 0;
        let size = record_actions(rec, step, &reply)?;

        let mut finished = false;
        // What the calls of this step may have changed (what its checkpoint looks at). A hook
        // is a command that may write anywhere.
        let mut changes = if spec.hooks.is_empty() { checkpoint::Changes::None } else { checkpoint::Changes::Anything };
        let mut turn = Turn {
            cell,
            step,
            size,
            memory: state.memory.as_mut(),
            observations: &mut state.observations,
            files_modified: &mut state.files_modified,
            first_reads: &mut state.first_reads,
        };
        let batch::Plan { groups, mut calls } = batch::plan(&reply.actions);
        for group in groups {
            let indices = match group {
                batch::Group::OverCap(range) => {
                    let (first, last) = (range.start + 1, range.end);
                    let told = format!(
                        "not run: a reply may hold at most {} tool calls and this one held {size}; calls {first} to \
                         {last} were not run. Ask for them again.",
                        batch::MAX_BATCH
                    );
                    for i in range {
                        turn.refuse_unrun(rec, i, &reply.actions[i].tool, &told, false)?;
                    }
                    turn.observe_refusal(rec, &format!("calls {first} to {last}"), "(not run)".into(), &told)?;
                    continue;
                }
                batch::Group::Alone(i) => i..i + 1,
                batch::Group::Together(range) => range,
            };
            if finished {
                // `finish` ended the cell: what the reply asked after it never runs.
                let told = "not run: `finish` came earlier in the same reply";
                for i in indices {
                    turn.refuse_unrun(rec, i, &reply.actions[i].tool, told, true)?;
                }
                continue;
            }
            // Every call of the group passes the gate before any of them runs, so each decision
            // is recorded before its result; the calls that may run then run together.
            let mut gated = Vec::with_capacity(indices.len());
            for i in indices {
                let parsed = calls[i].take().expect("a call is gated once");
                let gate = turn.gate_parsed(rec, &reply.actions[i], parsed)?;
                gated.push((i, turn.pre_hooks(rec, i, gate).await?));
            }
            for (_, g) in &gated {
                if let Gate::Run(call) = g {
                    changes.add(call);
                }
            }
            // A delegation runs a model loop of its own (`delegate.rs`): alone, never batched.
            let delegated = match gated.as_slice() {
                [(_, Gate::Run(call @ Call::DelegateReadonly { .. }))] => {
                    let t0 = Instant::now();
                    let out = delegate::run(cell, rec, provider.as_mut(), step, call).await?;
                    Some((out, t0.elapsed().as_millis() as u64))
                }
                _ => None,
            };
            let runs: Vec<_> = gated
                .iter()
                .filter_map(|(_, g)| match g {
                    Gate::Run(Call::DelegateReadonly { .. }) => None,
                    Gate::Run(call) => Some(async move {
                        let t0 = Instant::now();
                        let out = WaitClock::time_async(Part::Tools, run_tool(cell, call)).await;
                        (out, t0.elapsed().as_millis() as u64)
                    }),
                    Gate::Refused { .. } => None,
                })
                .collect();
            let mut outputs = match delegated {
                Some(d) => {
                    drop(runs); // empty: the delegation was the group's one call
                    vec![d]
                }
                None => batch::join_in_order(runs).await,
            }
            .into_iter();
            // Results in the order the model asked, whatever order the calls ended in.
            for (i, g) in gated {
                let action = &reply.actions[i];
                match g {
                    Gate::Refused { text, cause } => turn.refused(rec, i, action, &text, cause)?,
                    Gate::Run(call) => {
                        let (out, duration_ms) = outputs.next().expect("one output per call that ran");
                        let note = turn.post_hooks(rec, i, action, &call, &out).await?;
                        turn.record(rec, i, action, &call, &out, duration_ms, &note)?;
                        finished |= call.tool() == Tool::Finish;
                    }
                }
            }
        }
        state.files_modified.sort();
        rec.emit(EventBody::StateUpdated {
            step,
            steps_used: step,
            files_modified: state.files_modified.clone(),
            finished,
        })?;
        (state.step, state.finished) = (step, finished);
        if let Some(c) = checkpoints.as_mut() {
            WaitClock::time(Part::Checkpoints, || {
                checkpoint::after_step(rec, c, plan, &state, provider.as_ref(), started, changes)
            })?;
        }
        if finished {
            stop_reason = "finished";
            break;
        }
    }
    Ok(LoopEnd { stop_reason, provider_failure, first_reads: state.first_reads, turns, checkpoints, map: map_index })
}

/// Scores the workspace once the agent has stopped (tests, then the verifier, with `extra`
/// checks and metrics added to the verifier's) and writes `run_finished`.
async fn conclude(
    cell: &Cell<'_>,
    rec: &mut Recorder,
    end: LoopEnd,
    started: Instant,
    extra: Option<score::Extra>,
) -> io::Result<()> {
    let Cell { plan, ws, trace: trace_path, sandbox, .. } = *cell;
    let case = plan.case.as_ref();
    let LoopEnd { stop_reason, provider_failure, first_reads, .. } = end;
    let (outcome, reward, reason) = if let Some(message) = provider_failure {
        (Outcome::ProviderError, 0.0, message)
    } else {
        // The final tests may name the trace (`{trace}`): they read it as it is now.
        rec.flush()?;
        let tests = WaitClock::time_async(Part::Scoring, score::run_tests(case, ws, Some(trace_path), sandbox)).await;
        match &tests.result {
            Ok(out) => {
                let text = out.combined();
                let preview = store_output(&plan.cell_dir, "test-output", &text)?;
                rec.emit(EventBody::TestResult {
                    passed: tests.passed(),
                    exit_code: out.exit_code,
                    timed_out: out.timed_out,
                    duration_ms: out.duration.as_millis() as u64,
                    output: preview_text(&text),
                    artifact: preview,
                    runner: tests.runner.clone(),
                })?;
            }
            Err(message) => {
                rec.emit(EventBody::TestResult {
                    passed: false,
                    exit_code: None,
                    timed_out: false,
                    duration_ms: 0,
                    output: message.clone(),
                    artifact: None,
                    runner: None,
                })?;
            }
        }
        let facts = score::TraceFacts { denials: rec.summary.denials(), steps: rec.summary.steps(), first_reads };
        // The verifier gets a copy of the trace as it is now.
        rec.flush()?;
        let mut verifier =
            WaitClock::time_async(Part::Scoring, score::run_verifier(case, ws, trace_path, &facts, sandbox)).await;
        if let Some(extra) = extra {
            extra.add_to(&mut verifier);
        }
        rec.emit(EventBody::VerifierResult {
            passed: verifier.passed,
            duration_ms: verifier.duration_ms,
            checks: verifier.checks.clone(),
            metrics: verifier.metrics.clone(),
        })?;
        score::judge(&tests, &verifier)
    };
    rec.emit(EventBody::RunFinished {
        outcome,
        reward,
        stop_reason: stop_reason.into(),
        reason,
        elapsed_ms: started.elapsed().as_millis() as u64,
    })
}

/// Records the packed context, asks the model for its reply and records the retries the
/// provider made: how every turn starts, the cell's and a delegation's. `step` is the trace's
/// step; `turn_no` the context's own counter (they differ in a multi-session case's later
/// sessions).
async fn ask(
    rec: &mut Recorder,
    provider: &mut dyn crate::model::Provider,
    spec: &AgentSpec,
    (step, turn_no): (u32, u32),
    packed: context::Packed,
) -> io::Result<crate::model::ModelTurn> {
    let context::Packed { texts, sections, total_tokens, total_chars, budget_tokens } = packed;
    rec.emit(EventBody::ContextPacked {
        step,
        mode: spec.mode.as_str().to_string(),
        sections,
        total_chars,
        total_tokens,
        budget_tokens,
    })?;
    let asked = Instant::now();
    let turn = provider.next_action(&ModelRequest { step: turn_no, sections: texts }).await;
    WaitClock::charge_model(asked);
    for retry in &turn.retries {
        rec.emit(EventBody::ModelRetry {
            step,
            attempt: retry.attempt,
            cause: retry.cause.clone(),
            delay_ms: retry.delay_ms,
        })?;
    }
    Ok(turn)
}

/// One `model_action` per call of the reply, in order; returns how many there are.
fn record_actions(rec: &mut Recorder, step: u32, reply: &crate::model::ModelReply) -> io::Result<usize> {
    let size = reply.actions.len();
    for (i, action) in reply.actions.iter().enumerate() {
        rec.emit(EventBody::ModelAction {
            step,
            tool: action.tool.clone(),
            args: action.args.clone(),
            // The turn was paid for once: its cost rides on its first call.
            usage: if i == 0 { reply.usage.clone() } else { None },
            latency_ms: if i == 0 { reply.latency_ms } else { 0 },
            batch: Batch::of(step, i, size),
        })?;
    }
    Ok(size)
}

/// After a reply that held no usable action: the policy retry that asks again, and the
/// observation the model sees of it.
fn ask_again(rec: &mut Recorder, step: u32, message: &str, observations: &mut Vec<Observation>) -> io::Result<()> {
    let text = format!("{message}. Reply with exactly one JSON object {{\"tool\": ..., \"args\": {{...}}}}.");
    rec.emit(EventBody::PolicyRetry { step, cause: "unparseable".into(), message: text.clone() })?;
    observations.push(Observation::new(step, "(invalid reply)", "(invalid reply)".into(), "failed", &text));
    Ok(())
}

/// What the gate made of one call.
enum Gate {
    Run(Call),
    /// Not run: `text` is what the model is told, `cause` the `policy_retry` cause.
    Refused {
        text: String,
        cause: &'static str,
    },
}

/// The state one model turn's calls update, borrowed from the loop for the turn.
struct Turn<'t, 'c> {
    cell: &'t Cell<'c>,
    step: u32,
    /// Calls in the reply.
    size: usize,
    memory: Option<&'t mut WorkingMemory>,
    observations: &'t mut Vec<Observation>,
    files_modified: &'t mut Vec<String>,
    first_reads: &'t mut BTreeMap<String, u32>,
}

impl Turn<'_, '_> {
    fn batch(&self, i: usize) -> Option<Batch> {
        Batch::of(self.step, i, self.size)
    }

    /// The one permission gate: records the decision and says whether the call may run.
    fn gate(&mut self, rec: &mut Recorder, action: &Action) -> io::Result<Gate> {
        self.gate_parsed(rec, action, Call::from_action(action))
    }

    /// [`Turn::gate`] of `action` already parsed (`parsed`, what [`Call::from_action`] made
    /// of it: the cell's loop parses each call once, in its batch plan).
    fn gate_parsed(&mut self, rec: &mut Recorder, action: &Action, parsed: Result<Call, String>) -> io::Result<Gate> {
        let (step, spec, case) = (self.step, self.cell.plan.spec.as_ref(), self.cell.plan.case.as_ref());
        let tool = action.tool.clone();
        let (reason, invalid, text, cause) = match parsed {
            Err(message) => {
                let text = if spec.explain_denials {
                    format!("invalid action: {message}. Fix the arguments and try again.")
                } else {
                    "invalid action".to_string()
                };
                (message, true, text, "invalid_action")
            }
            Ok(call) => match policy::decide(&call, case, self.cell.ws) {
                Decision::Allow => {
                    rec.emit(EventBody::PolicyDecision {
                        step,
                        tool,
                        allowed: true,
                        reason: "allowed".into(),
                        invalid: false,
                    })?;
                    return Ok(Gate::Run(call));
                }
                Decision::Deny(reason) => {
                    let text = if spec.explain_denials {
                        format!("denied by policy: {reason}. Choose an action the policy allows.")
                    } else {
                        "denied by policy".to_string()
                    };
                    (reason, false, text, "denied")
                }
            },
        };
        rec.emit(EventBody::PolicyDecision { step, tool, allowed: false, reason, invalid })?;
        Ok(Gate::Refused { text, cause })
    }

    /// The result of a call the gate refused, at its place among the results.
    fn refused(&mut self, rec: &mut Recorder, i: usize, action: &Action, text: &str, cause: &str) -> io::Result<()> {
        let step = self.step;
        emit_not_run(rec, step, &action.tool, text, self.batch(i))?;
        if self.cell.plan.spec.explain_denials {
            rec.emit(EventBody::PolicyRetry { step, cause: cause.into(), message: text.to_string() })?;
        }
        let brief = context::brief(&action.tool, &action.args);
        self.observe_refusal(rec, &action.tool, brief, text)
    }

    /// A call of the reply that is not run whatever it is (past the cap, after `finish`): its
    /// decision and its result, so the trace still has one of each per call. With `observe`,
    /// the model is told about this call on its own.
    fn refuse_unrun(&mut self, rec: &mut Recorder, i: usize, tool: &str, told: &str, observe: bool) -> io::Result<()> {
        let step = self.step;
        rec.emit(EventBody::PolicyDecision {
            step,
            tool: tool.to_string(),
            allowed: false,
            reason: told.to_string(),
            invalid: true,
        })?;
        emit_not_run(rec, step, tool, told, self.batch(i))?;
        if observe { self.observe_refusal(rec, tool, "(not run)".into(), told) } else { Ok(()) }
    }

    /// Tells the working memory and the observations about a call that did not run.
    fn observe_refusal(&mut self, rec: &mut Recorder, tool: &str, brief: String, told: &str) -> io::Result<()> {
        remember_refusal(rec, self.memory.as_deref_mut(), self.step, tool, told)?;
        self.observations.push(Observation::new(self.step, tool, brief, "denied", told));
        Ok(())
    }

    /// Records the result of a call that ran, and what it changed in the loop's state.
    // One argument per thing the result is made of; a struct for one call site would only rename them.
    #[allow(clippy::too_many_arguments)]
    fn record(
        &mut self,
        rec: &mut Recorder,
        i: usize,
        action: &Action,
        call: &Call,
        out: &ToolOutput,
        duration_ms: u64,
        // What the hooks add to the result (hooks.rs): shown after the preview, never cut by it.
        note: &str,
    ) -> io::Result<()> {
        let step = self.step;
        let mut shown = preview_text(&out.text);
        shown.push_str(note);
        let tool_name = &action.tool;
        // A batched call's artifact is named by its position too: two reads of one reply would
        // otherwise share a name.
        let name = match self.batch(i) {
            None => format!("step-{step:03}-{tool_name}"),
            Some(b) => format!("step-{step:03}.{}-{tool_name}", b.position),
        };
        let preview = store_output(&self.cell.plan.cell_dir, &name, &out.text)?;
        for m in &out.modified {
            if !self.files_modified.contains(m) {
                self.files_modified.push(m.clone());
            }
        }
        if let (true, Some(path)) = (out.ok, &out.read) {
            self.first_reads.entry(path.clone()).or_insert(step);
        }
        // The observation is made from what the model is shown before the result's event takes
        // it: one copy of the output fewer.
        let status = if out.ok { "ok" } else { "failed" };
        let brief = context::brief(tool_name, &action.args);
        let mut o = Observation::new(step, tool_name, brief, status, &shown);
        o.read = out.read.clone().filter(|_| out.ok);
        o.modified = out.modified.clone();
        emit_result(rec, step, tool_name, out, shown, preview, duration_ms, self.batch(i))?;
        if let Some(view) = &out.repo_map {
            rec.emit(EventBody::RepoMapUsed {
                step,
                via: "tool".into(),
                query: crate::util::truncate_str(&view.query, 200).to_string(),
                files: view.files.clone(),
                tokens: view.tokens,
            })?;
        }
        if let Some(m) = self.memory.as_deref_mut() {
            let changes = m.observe(step, call, out);
            if !changes.is_empty() {
                rec.emit(EventBody::MemoryUpdated { step, changes })?;
            }
        }
        self.observations.push(o);
        Ok(())
    }
}

/// Runs an allowed call. Commands stay on the cell's own future, so dropping it kills their
/// process groups.
///
/// The file tools that touch one file or one bounded listing (read, write, edit, list: at most
/// [`tools::MAX_ENTRIES`] names shown, though a folder with far more entries is still read
/// whole to sort it) run here too, on the cell's task. They used to hop to the
/// blocking pool so that a file system that hangs would block only that thread, but the hop
/// bought nothing: the checkpoint walk right after the step, the trace writes and the fixture
/// copy touch the same files on the cell's task, so such a file system hangs the cell anyway.
/// And it cost about 75 us a call here (a wake-up and a wait, 2026-11-25: read_file 122 us
/// with the hop, 47 inline), a quarter of the tools' share of a cell's own time.
///
/// The calls that walk the whole tree (`search_code`, `repo_map`) still hop: on a large
/// workspace they take milliseconds to seconds, and a runtime worker held that long would stall
/// the other cells' tasks at `--jobs` above one; against that the hop is small. (Not
/// `block_in_place`, which would save the wake-up: it panics on a current-thread runtime,
/// which the tests that run cells use.)
async fn run_tool(cell: &Cell<'_>, call: &Call) -> ToolOutput {
    if !matches!(call.tool(), Tool::SearchCode | Tool::RepoMap) {
        return tools::execute(call, &cell.plan.case, cell.ws, cell.sandbox).await;
    }
    let (call, case, ws, sandbox) = (call.clone(), cell.plan.case.clone(), cell.ws.to_path_buf(), cell.sandbox.clone());
    let runtime = tokio::runtime::Handle::current();
    match tokio::task::spawn_blocking(move || runtime.block_on(tools::execute(&call, &case, &ws, &sandbox))).await {
        Ok(out) => out,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

fn finish(rec: Recorder) -> CellSummary {
    rec.summary.finish().expect("run_started was recorded")
}

/// Tells the working memory (mode `memory`) about a call that did not run.
fn remember_refusal(
    rec: &mut Recorder,
    memory: Option<&mut WorkingMemory>,
    step: u32,
    tool: &str,
    told: &str,
) -> io::Result<()> {
    let Some(m) = memory else { return Ok(()) };
    let changes = m.observe_refused(step, tool, told);
    if changes.is_empty() { Ok(()) } else { rec.emit(EventBody::MemoryUpdated { step, changes }) }
}

fn emit_not_run(rec: &mut Recorder, step: u32, tool: &str, text: &str, batch: Option<Batch>) -> io::Result<()> {
    rec.emit(EventBody::ToolResult {
        step,
        tool: tool.to_string(),
        ok: false,
        denied: true,
        output: text.to_string(),
        output_bytes: text.len() as u64,
        artifact: None,
        modified: Vec::new(),
        read: None,
        duration_ms: 0,
        batch,
    })
}

#[allow(clippy::too_many_arguments)]
fn emit_result(
    rec: &mut Recorder,
    step: u32,
    tool: &str,
    out: &ToolOutput,
    shown: String,
    artifact: Option<Artifact>,
    duration_ms: u64,
    batch: Option<Batch>,
) -> io::Result<()> {
    rec.emit(EventBody::ToolResult {
        step,
        tool: tool.to_string(),
        ok: out.ok,
        denied: false,
        output: shown,
        output_bytes: out.text.len() as u64,
        artifact,
        modified: out.modified.clone(),
        read: out.read.clone(),
        duration_ms,
        batch,
    })
}

/// The bounded part of an output that the model and the trace line carry.
fn preview_text(text: &str) -> String {
    if text.len() <= PREVIEW_LIMIT {
        return text.to_string();
    }
    format!(
        "{}\n[output truncated: {} bytes in all; the full output is stored as an artifact]",
        crate::util::truncate_str(text, PREVIEW_LIMIT),
        text.len()
    )
}

/// Stores an output larger than the preview as `artifacts/<name>.txt` and describes it.
fn store_output(cell_dir: &Path, name: &str, text: &str) -> io::Result<Option<Artifact>> {
    if text.len() <= PREVIEW_LIMIT {
        return Ok(None);
    }
    let rel = format!("artifacts/{name}.txt");
    std::fs::create_dir_all(cell_dir.join("artifacts"))?;
    std::fs::write(cell_dir.join(&rel), text)?;
    Ok(Some(Artifact { path: rel, sha256: crate::util::sha256_hex(text.as_bytes()), bytes: text.len() as u64 }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A finished cell's checkpoints are renamed out of its way; when an earlier attempt's
    /// retired folder is in the way, they are removed instead; a cell without them is left as
    /// it is.
    #[test]
    fn a_finished_cells_checkpoints_are_retired_or_removed() {
        let cell = tempfile::tempdir().unwrap();
        let (folder, retired) = (cell.path().join(checkpoint::DIR), cell.path().join(RETIRED_CHECKPOINTS));
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("state-1.json"), "{}").unwrap();
        retire_checkpoints(cell.path());
        assert!(!folder.exists());
        assert_eq!(std::fs::read_to_string(retired.join("state-1.json")).unwrap(), "{}");

        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("state-2.json"), "{}").unwrap();
        retire_checkpoints(cell.path());
        assert!(!folder.exists(), "removed when the retired name is taken");
        assert!(retired.join("state-1.json").is_file() && !retired.join("state-2.json").exists());

        retire_checkpoints(cell.path());
        assert!(retired.is_dir(), "nothing to retire: nothing changes");
    }
}
