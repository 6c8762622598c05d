//! The engine: plans cells and runs them in parallel.
//!
//! A plan is cases x epochs x profiles in a deterministic order, each cell with a stable id
//! ([`crate::rundir::cell_id`]). A tokio semaphore bounds running cells (`--jobs`); profiles
//! interleave in the plan so no profile waits for another to finish. The engine never prints
//! and writes no file of its own: it reports to an [`EngineSink`] (progress, the results file
//! and anything else, combined with [`crate::events::Fanout`]), and each cell's trace is
//! written by the agent loop.
//!
//! A cell always ends with a summary: an I/O failure while writing its trace, or a panic inside
//! the cell's task, ends that cell as `harness_error` (appended to its trace when possible)
//! instead of aborting the run.
//!
//! Cancellation (Ctrl-C): once [`Cancel::cancel`] is called no new cell starts, and running
//! cells are stopped (their process groups killed when their futures drop) and recorded as
//! `cancelled` with a final `run_finished` event appended to their traces.

use std::future::Future;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::agent::spec::AgentSpec;
use crate::agent::{CellPlan, run_cell_with};
use crate::bench::Benchmark;
use crate::events::{EngineEvent, EngineSink};
use crate::model::Profile;
use crate::replay::{CellSummary, SUMMARY_SCHEMA_VERSION, replay_trace_of};
use crate::rundir::cell_id;
use crate::sandbox::Isolation;
use crate::trace::TraceWriter;
use crate::trace::event::{EventBody, Outcome};

/// A shared cancellation flag with wake-ups.
#[derive(Clone)]
pub struct Cancel {
    tx: Arc<tokio::sync::watch::Sender<bool>>,
}

impl Default for Cancel {
    fn default() -> Self {
        Cancel { tx: Arc::new(tokio::sync::watch::channel(false).0) }
    }
}

impl Cancel {
    pub fn cancel(&self) {
        self.tx.send_replace(true);
    }

    pub fn is_cancelled(&self) -> bool {
        *self.tx.borrow()
    }

    /// Resolves once cancelled.
    pub async fn cancelled(&self) {
        let mut rx = self.tx.subscribe();
        let _ = rx.wait_for(|c| *c).await;
    }
}

/// Which run planned cells belong to, and where they work.
#[derive(Clone, Copy)]
pub struct Target<'a> {
    pub run_id: &'a str,
    /// The run directory: cells' traces go to `cells/<cell_id>/` in it.
    pub run_dir: &'a Path,
    pub isolation: &'a Isolation,
}

/// Cases x epochs x profiles, in a deterministic order: profiles interleave, so every profile
/// makes progress from the start and a slow one does not hold the others back.
pub fn plan(
    target: Target<'_>,
    bench: &Benchmark,
    case_ids: &[String],
    profiles: &[Profile],
    epochs: u32,
    spec: &Arc<AgentSpec>,
) -> Vec<CellPlan> {
    plan_variants(target, bench, case_ids, profiles, &[(String::new(), spec.clone())], epochs).collect()
}

/// [`plan`] with one agent spec per named variant (`hcbench ablate`: (ablation, spec with it
/// applied)): cases x epochs x profiles x variants, variants innermost so every ablation makes
/// progress from the start. An empty name is the plain spec (cell ids without an ablation).
/// The order is [`crate::rundir::Manifest::cell_ids`]'s.
///
/// The cells are made as the iterator is read, so a run holds only those it is running
/// ([`Cells::lazy`]): a plan of 100,000 cells costs no memory of its own. Cells of one case
/// share one copy of it.
pub fn plan_variants<'a>(
    target: Target<'a>,
    bench: &'a Benchmark,
    case_ids: &'a [String],
    profiles: &'a [Profile],
    variants: &'a [(String, Arc<AgentSpec>)],
    epochs: u32,
) -> impl Iterator<Item = CellPlan> + 'a {
    let Target { run_id, run_dir, isolation } = target;
    let cases = case_ids.iter().filter_map(|id| bench.case(id).map(|case| (id, Arc::new(case.clone()))));
    cases.flat_map(move |(case_id, case)| {
        (1..=epochs).flat_map(move |epoch| {
            let case = case.clone();
            profiles.iter().flat_map(move |profile| {
                let case = case.clone();
                variants.iter().map(move |(ablation, spec)| {
                    let id = cell_id(case_id, profile.name(), ablation, epoch, epochs);
                    CellPlan {
                        run_id: run_id.to_string(),
                        cell_dir: run_dir.join("cells").join(&id),
                        workspace: isolation.workspaces.join(run_id).join(&id),
                        cell_id: id,
                        benchmark: bench.name.clone(),
                        case: case.clone(),
                        profile: profile.clone(),
                        epoch,
                        spec: spec.clone(),
                        ablation: ablation.clone(),
                        sandbox: isolation.sandbox.clone(),
                        checkpoint_interval: isolation.checkpoint_interval,
                    }
                })
            })
        })
    })
}

/// The cells of a batch, handed to the scheduler one at a time in plan order, with what the
/// run's header says before the first starts (how many, which profiles).
pub struct Cells<'a> {
    total: usize,
    profiles: Vec<String>,
    cells: Box<dyn Iterator<Item = CellPlan> + 'a>,
}

impl<'a> Cells<'a> {
    /// Cells made as the scheduler takes them: `make` is called twice, once to count the cells
    /// and name their profiles and once to run them, and gives the same cells both times (a
    /// plan is deterministic). So the whole plan is never in memory, only the running cells.
    pub fn lazy<I: Iterator<Item = CellPlan> + 'a>(make: impl Fn() -> I) -> Cells<'a> {
        let mut total = 0;
        let mut profiles: Vec<String> = Vec::new();
        for c in make() {
            total += 1;
            note_profile(&mut profiles, &c);
        }
        Cells { total, profiles, cells: Box::new(make()) }
    }
}

/// Adds `cell`'s profile to `profiles` (first-seen order) unless it is there already.
fn note_profile(profiles: &mut Vec<String>, cell: &CellPlan) {
    if !profiles.iter().any(|p| p == cell.profile.name()) {
        profiles.push(cell.profile.name().to_string());
    }
}

impl From<Vec<CellPlan>> for Cells<'static> {
    /// Cells planned beforehand (the gate's interleaved arms, `validate`, tests).
    fn from(cells: Vec<CellPlan>) -> Cells<'static> {
        let mut profiles: Vec<String> = Vec::new();
        for c in &cells {
            note_profile(&mut profiles, c);
        }
        Cells { total: cells.len(), profiles, cells: Box::new(cells.into_iter()) }
    }
}

/// What [`execute`] gives back. Every summary is in the run's results file and its cell's trace
/// already, and holding all of them is what made a run's memory grow with its cells; so only
/// callers that print or judge each cell keep them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Every finished cell's summary, in plan order (`run`, the gate, `validate`).
    Summaries,
    /// None (`matrix`, `ablate`: their reports are rebuilt from the traces).
    Nothing,
}

/// A cost cap: once the cost of finished cells (plus `already_spent`, from cells kept by
/// `--resume`) reaches `limit_usd`, no new cell starts. Cells already running finish, so the
/// cap can be exceeded by at most their cost.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub limit_usd: f64,
    pub already_spent: f64,
}

/// One batch of cells for the scheduler: which run they belong to, how many run at once, and
/// an optional cost cap.
pub struct Batch<'a> {
    pub run_id: &'a str,
    pub run_dir: &'a Path,
    pub cells: Cells<'a>,
    pub jobs: usize,
    pub budget: Option<Budget>,
    pub keep: Keep,
}

/// Runs every cell with at most `jobs` at once; returns summaries in plan order when the batch
/// keeps them ([`Keep`]), else nothing. Cells not started because of cancellation or the budget
/// are absent from the result.
///
/// Memory: the scheduler holds the cells that are running and nothing per finished cell
/// (unless [`Keep::Summaries`]): cells are taken from the plan as they start, and a finished
/// cell's task is reaped before the next starts.
pub async fn execute(batch: Batch<'_>, sink: Arc<dyn EngineSink>, cancel: Cancel) -> Vec<CellSummary> {
    // Each cell reports its own resume (from a checkpoint, or refused) to the same sink.
    let cells_sink = sink.clone();
    execute_with(batch, sink, cancel, move |cell| {
        let sink = cells_sink.clone();
        async move { run_cell_with(&cell, sink.as_ref()).await }
    })
    .await
}

/// [`execute`] with the function that runs one cell as a parameter: tests drive the scheduler
/// with cells that fail or panic on purpose.
pub(crate) async fn execute_with<F, Fut>(
    batch: Batch<'_>,
    sink: Arc<dyn EngineSink>,
    cancel: Cancel,
    run: F,
) -> Vec<CellSummary>
where
    F: Fn(CellPlan) -> Fut,
    Fut: Future<Output = std::io::Result<CellSummary>> + Send + 'static,
{
    let Batch { run_id, run_dir, cells: Cells { total, profiles, cells }, jobs, budget, keep } = batch;
    let spent = Arc::new(Mutex::new((budget.map_or(0.0, |b| b.already_spent), false)));
    sink.event(EngineEvent::RunStarted { run_id, run_dir, cells: total, profiles: &profiles });
    let semaphore = Arc::new(tokio::sync::Semaphore::new(jobs.max(1)));
    let done = Arc::new(AtomicUsize::new(0));
    let announced: Arc<Mutex<Vec<String>>> = Arc::default();
    let pack = Arc::new(crate::trace::pack::Appender::new(run_dir));
    let tidying: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>> = Arc::default();
    let mut set = tokio::task::JoinSet::new();
    let mut kept: Vec<(usize, CellSummary)> = Vec::new();
    // The outer task only forwards the inner one's result and sends events: a panic there is a
    // panic in a sink, which is a bug to surface, not a cell outcome.
    let mut reap = |joined: Result<(usize, CellSummary), tokio::task::JoinError>| {
        let (index, summary) = joined.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
        if keep == Keep::Summaries {
            kept.push((index, summary));
        }
    };
    // Permits are taken here, in plan order, before each cell is spawned: cells start in plan
    // order whatever the runtime's scheduling, so a budget cut or a Ctrl-C stops the tail of
    // the plan, and no task exists for a cell that has not started.
    for (index, cell) in cells.enumerate() {
        // A cell that must wait for a slot has its workspace copied (and its folder made)
        // meanwhile, while the running cells wait on their commands (`workspace::copy_ahead`):
        // one copy ahead at a time.
        let budget_left = || budget.is_none_or(|b| spent.lock().unwrap_or_else(|p| p.into_inner()).0 < b.limit_usd);
        if semaphore.available_permits() == 0 && !cancel.is_cancelled() && budget_left() && copy_ahead(&cell) {
            crate::workspace::copy_ahead(&cell.case.fixture_dir, &cell.workspace, &cell.cell_dir);
        }
        let permit = semaphore.clone().acquire_owned().await.expect("semaphore is never closed");
        // A finished task keeps its output (and its allocation) until joined: joined here, the
        // set holds only running cells however long the plan.
        while let Some(joined) = set.try_join_next() {
            reap(joined);
        }
        if cancel.is_cancelled() {
            discard_ahead(&cell, &tidying);
            break;
        }
        if let Some(budget) = budget {
            let mut guard = spent.lock().unwrap_or_else(|p| p.into_inner());
            if guard.0 >= budget.limit_usd {
                if !guard.1 {
                    guard.1 = true;
                    sink.event(EngineEvent::BudgetSpent { spent_usd: guard.0, budget_usd: budget.limit_usd });
                }
                drop(guard);
                discard_ahead(&cell, &tidying);
                break;
            }
        }
        announce_unavailable(&cell, &announced, sink.as_ref());
        let (sink, done, cancel, spent, announced, pack, tidying) = (
            sink.clone(),
            done.clone(),
            cancel.clone(),
            spent.clone(),
            announced.clone(),
            pack.clone(),
            tidying.clone(),
        );
        // The cell runs in a task of its own so a panic in it is caught here as a JoinError
        // and ends that cell, not the run.
        let mut task = tokio::spawn(run(cell.clone()));
        set.spawn(async move {
            let _permit = permit;
            sink.event(EngineEvent::CellStarted { cell_id: &cell.cell_id });
            tracing::info!(cell = %cell.cell_id, "cell started");
            let summary = tokio::select! {
                r = &mut task => match r {
                    Ok(Ok(s)) => s,
                    Ok(Err(e)) => harness_failure(&cell, &format!("cannot write the cell's trace: {e}")),
                    Err(e) => ended_by_harness(&cell, &format!("hcbench failed inside this cell: {}", panic_text(e))),
                },
                _ = cancel.cancelled() => {
                    // Wait until the cell's future is dropped (its process groups killed) before
                    // the cancellation is appended to its trace.
                    task.abort();
                    let _ = task.await;
                    finish_trace(&cell, Outcome::Cancelled, "cancelled", "the run was interrupted (Ctrl-C) while this cell was running")
                }
            };
            tracing::info!(cell = %cell.cell_id, outcome = summary.outcome_label(), wall_ms = summary.wall_ms, "cell finished");
            // A workspace copied ahead that the cell did not take (it ended before it needed one,
            // or was cancelled first) is removed.
            discard_ahead(&cell, &tidying);
            store_finished(&cell, &summary, &pack, &tidying);
            spent.lock().unwrap_or_else(|p| p.into_inner()).0 += summary.cost_usd().unwrap_or(0.0);
            // Said as soon as it is known, also when no cell of the profile is left to start.
            announce_first_failure(&cell, &announced, sink.as_ref());
            announce_unavailable(&cell, &announced, sink.as_ref());
            let n = done.fetch_add(1, Ordering::SeqCst) + 1;
            sink.event(EngineEvent::CellFinished { summary: &summary, done: n, total });
            (index, summary)
        });
    }
    while let Some(joined) = set.join_next().await {
        reap(joined);
    }
    let tidying = std::mem::take(&mut *tidying.lock().unwrap_or_else(|p| p.into_inner()));
    for handle in tidying {
        // A removal that panicked leaves an empty folder, which readers pass over.
        let _ = handle.await;
    }
    if let Err(e) = pack.finish() {
        tracing::warn!("cannot sync the run's pack of traces in {}: {e}", run_dir.display());
    }
    kept.sort_unstable_by_key(|(index, _)| *index);
    kept.into_iter().map(|(_, summary)| summary).collect()
}

/// Whether `cell`'s workspace may be copied before it starts: only when no earlier attempt of
/// it exists (its folder is absent), so a cell `--resume` continues from a checkpoint, or
/// refuses to, never finds a copy it did not make, and not when its profile is unreachable (it
/// ends before its workspace exists).
fn copy_ahead(cell: &CellPlan) -> bool {
    cell.profile.unavailable().is_none() && cell.cell_dir.symlink_metadata().is_err()
}

/// Removes `cell`'s workspace copied ahead, if it has one it did not take, kept in `tidying`
/// for `execute_with` to wait for.
fn discard_ahead(cell: &CellPlan, tidying: &Mutex<Vec<tokio::task::JoinHandle<()>>>) {
    if let Some(handle) = crate::workspace::discard_ahead(&cell.workspace) {
        keep_tidying(tidying, handle);
    }
}

/// Tells the sink, once per profile, that `cell`'s profile is unreachable (its circuit breaker
/// is open), so the reason is printed once rather than in every cell it ends.
fn announce_unavailable(cell: &CellPlan, announced: &Mutex<Vec<String>>, sink: &dyn EngineSink) {
    let Some(reason) = cell.profile.unavailable() else { return };
    let mut announced = announced.lock().unwrap_or_else(|p| p.into_inner());
    if !announced.iter().any(|p| p == cell.profile.name()) {
        announced.push(cell.profile.name().to_string());
        sink.event(EngineEvent::ProfileUnavailable { profile: cell.profile.name(), reason: &reason });
    }
}

/// Tells the sink, once per profile, the profile's first provider failure in full with its
/// fix, so the cause (a refused key, an unreachable host) is on the terminal while the run goes,
/// not only in the reports afterwards.
fn announce_first_failure(cell: &CellPlan, announced: &Mutex<Vec<String>>, sink: &dyn EngineSink) {
    let Some(failure) = cell.profile.first_failure() else { return };
    // Kept apart from the breaker's announcement (same list, another key).
    let key = format!("failed:{}", cell.profile.name());
    let mut announced = announced.lock().unwrap_or_else(|p| p.into_inner());
    if !announced.contains(&key) {
        announced.push(key);
        sink.event(EngineEvent::ProviderFailed { profile: cell.profile.name(), failure });
    }
}

fn panic_text(e: tokio::task::JoinError) -> String {
    if !e.is_panic() {
        return "the cell's task was cancelled".into();
    }
    let payload = e.into_panic();
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

/// Stores a cell's trace in the run's pack once the cell has its verdict (src/trace/stored.rs
/// and src/trace/pack.rs say why only then, and how). A cancelled cell is left plain:
/// `--resume` continues or replaces it. A trace that cannot be stored stays plain, which every
/// reader reads as well: a warning, not a failed cell.
///
/// The cell's folder, left empty, is removed on the blocking pool (the removal waits on the
/// file system's journal, which is not work the next cell should wait for); `execute_with`
/// waits for every such removal before it returns.
fn store_finished(
    cell: &CellPlan,
    summary: &CellSummary,
    pack: &crate::trace::pack::Appender,
    tidying: &Mutex<Vec<tokio::task::JoinHandle<()>>>,
) {
    if summary.outcome.is_none_or(|o| o == Outcome::Cancelled) {
        return;
    }
    if !cell.cell_dir.join(crate::trace::stored::TRACE).exists() {
        return;
    }
    match crate::trace::stored::store_finished(pack, &cell.cell_id, &cell.cell_dir) {
        Ok(()) => {
            let (run_dir, cell_id, cell_dir) =
                (pack.run_dir().to_path_buf(), cell.cell_id.clone(), cell.cell_dir.clone());
            tidy_later(tidying, move || crate::trace::stored::tidy_cell_dir(&run_dir, &cell_id, &cell_dir));
        }
        Err(e) => {
            tracing::warn!(cell = %cell.cell_id, "cannot store the finished trace of {} in the run's pack: {e}; it stays plain", cell.cell_dir.display());
            // The cell's folder stays, but not its retired checkpoints (`agent::retire_checkpoints`).
            let retired = cell.cell_dir.join(crate::agent::RETIRED_CHECKPOINTS);
            tidy_later(tidying, move || crate::process::remove_folder(&retired));
        }
    }
}

/// Runs `tidy` on the blocking pool, kept in `tidying` for `execute_with` to wait for. Only the
/// removals still under way are kept: the list stays as short as the journal's backlog, however
/// long the run.
fn tidy_later(tidying: &Mutex<Vec<tokio::task::JoinHandle<()>>>, tidy: impl FnOnce() + Send + 'static) {
    keep_tidying(tidying, tokio::task::spawn_blocking(tidy));
}

/// Keeps `handle`, a removal under way, in `tidying`, dropping those done.
fn keep_tidying(tidying: &Mutex<Vec<tokio::task::JoinHandle<()>>>, handle: tokio::task::JoinHandle<()>) {
    let mut tidying = tidying.lock().unwrap_or_else(|p| p.into_inner());
    tidying.retain(|h| !h.is_finished());
    tidying.push(handle);
}

/// A cell the harness ended (a panic): recorded in its trace so replay agrees with the run.
fn ended_by_harness(cell: &CellPlan, reason: &str) -> CellSummary {
    tracing::error!(cell = %cell.cell_id, "{reason}");
    finish_trace(cell, Outcome::HarnessError, "harness_error", reason)
}

/// Appends a final `run_finished` to the cell's trace and replays it; when the trace cannot be
/// written or read, the summary is built without it.
fn finish_trace(cell: &CellPlan, outcome: Outcome, stop_reason: &str, reason: &str) -> CellSummary {
    let trace = cell.cell_dir.join("trace.jsonl");
    let appended = TraceWriter::append_to(&trace, &cell.run_id, &cell.cell_id).and_then(|mut w| {
        w.append(EventBody::RunFinished {
            outcome,
            reward: 0.0,
            stop_reason: stop_reason.into(),
            reason: reason.into(),
            elapsed_ms: 0,
        })
    });
    match appended.and_then(|_| replay_trace_of(&trace, Some(&cell.run_id)).map_err(std::io::Error::other)) {
        Ok(s) => s,
        Err(e) => {
            let mut s = harness_failure(cell, &format!("{reason}; and its trace cannot be written: {e}"));
            s.outcome = Some(outcome);
            s
        }
    }
}

/// A summary for a cell whose trace could not be written: it still counts, as a harness error.
fn harness_failure(cell: &CellPlan, reason: &str) -> CellSummary {
    CellSummary {
        schema_version: SUMMARY_SCHEMA_VERSION,
        run_id: cell.run_id.as_str().into(),
        cell_id: cell.cell_id.clone(),
        case_id: cell.case.id.as_str().into(),
        category: cell.case.category.to_string().into(),
        split: cell.case.split.to_string().into(),
        profile: cell.profile.name().into(),
        ablation: cell.ablation.as_str().into(),
        step_budget: cell.case.step_budget,
        epoch: cell.epoch,
        stop_reason: "harness_error".into(),
        outcome: Some(Outcome::HarnessError),
        reason: reason.into(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::load_benchmark;
    use crate::events::NullSink;

    /// Two cells of the real benchmark, planned into `run_dir`.
    fn two_cells(run_dir: &Path) -> Vec<CellPlan> {
        let bench = load_benchmark(Path::new(env!("CARGO_MANIFEST_DIR")), "hc-bench").unwrap();
        let ids: Vec<String> = bench.cases.iter().take(2).map(|c| c.id.clone()).collect();
        let isolation = Isolation::unsandboxed(run_dir);
        plan(
            Target { run_id: "r", run_dir, isolation: &isolation },
            &bench,
            &ids,
            &[Profile::oracle()],
            1,
            &Arc::new(AgentSpec::default()),
        )
    }

    /// A batch of `cells` in run `r` that keeps its summaries.
    fn kept_batch(run_dir: &Path, cells: Vec<CellPlan>, jobs: usize) -> Batch<'_> {
        Batch { run_id: "r", run_dir, cells: cells.into(), jobs, budget: None, keep: Keep::Summaries }
    }

    #[tokio::test]
    async fn a_panicking_cell_ends_as_harness_error_and_the_others_run() {
        let dir = tempfile::tempdir().unwrap();
        let cells = two_cells(dir.path());
        let doomed = cells[0].cell_id.clone();
        let batch = kept_batch(dir.path(), cells, 2);
        let summaries = execute_with(batch, Arc::new(NullSink), Cancel::default(), |cell| {
            let doomed = doomed.clone();
            async move {
                std::fs::create_dir_all(&cell.cell_dir)?;
                TraceWriter::create(&cell.cell_dir.join("trace.jsonl"), &cell.run_id, &cell.cell_id)?;
                if cell.cell_id == doomed {
                    panic!("index out of bounds in a tool");
                }
                Ok(CellSummary { cell_id: cell.cell_id.clone(), outcome: Some(Outcome::Passed), ..Default::default() })
            }
        })
        .await;
        assert_eq!(summaries.len(), 2, "both cells have a summary");
        assert_eq!(summaries[0].outcome, Some(Outcome::HarnessError));
        assert!(summaries[0].reason.contains("index out of bounds in a tool"), "{}", summaries[0].reason);
        assert_eq!(summaries[1].outcome, Some(Outcome::Passed), "the other cell is untouched");
        // The verdict is appended to the trace too, so `report` agrees with the live run.
        let mut trace = String::new();
        let path = dir.path().join("cells").join(&doomed).join("trace.jsonl");
        std::io::Read::read_to_string(&mut crate::trace::stored::open(&path).unwrap(), &mut trace).unwrap();
        assert!(!path.exists(), "a finished cell's trace is stored in the run's pack");
        assert!(!path.parent().unwrap().exists(), "and its folder, empty then, is gone");
        let last: serde_json::Value = serde_json::from_str(trace.lines().last().unwrap()).unwrap();
        assert_eq!(last["kind"], "run_finished", "{trace}");
        assert_eq!(last["data"]["outcome"], "harness_error", "{trace}");
    }

    #[tokio::test]
    async fn a_profiles_first_provider_failure_is_announced_once() {
        use crate::environment::Environment;
        use crate::events::{EngineEvent, EngineSink};
        use crate::model::profiles::{build, builtin};
        use crate::model::{FailureClass, ProfileKind, ProviderFailure};
        struct Count(Mutex<Vec<String>>);
        impl EngineSink for Count {
            fn event(&self, event: EngineEvent<'_>) {
                if let EngineEvent::ProviderFailed { profile, failure } = event {
                    self.0.lock().unwrap().push(format!("{profile}: {}", failure.message));
                }
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let env = Environment::default();
        let local = build("local", &builtin("local", &env).unwrap(), "built-in", dir.path(), &env, false).unwrap();
        let mut cells = two_cells(dir.path());
        for c in &mut cells {
            c.profile = local.clone();
        }
        let ProfileKind::Http(http) = &local.kind else { panic!("an http profile") };
        let failure = ProviderFailure { class: FailureClass::Auth, message: "HTTP 401".into(), fix: None };
        http.transport.first_failure.set(failure).unwrap();
        let sink = Arc::new(Count(Mutex::new(Vec::new())));
        let batch = kept_batch(dir.path(), cells, 1);
        execute_with(batch, sink.clone(), Cancel::default(), |cell| async move {
            Ok(CellSummary {
                cell_id: cell.cell_id.clone(),
                outcome: Some(Outcome::ProviderError),
                ..Default::default()
            })
        })
        .await;
        assert_eq!(*sink.0.lock().unwrap(), ["local: HTTP 401"], "two cells failed, one announcement");
    }

    /// A batch that keeps nothing returns nothing, yet every cell finishes and reaches the sink
    /// (the results file is such a sink), and the lazy plan's header counts every cell.
    #[tokio::test]
    async fn a_batch_that_keeps_nothing_still_reports_every_cell_to_the_sink() {
        struct Finished(Mutex<Vec<String>>, Mutex<Option<usize>>);
        impl EngineSink for Finished {
            fn event(&self, event: EngineEvent<'_>) {
                match event {
                    EngineEvent::RunStarted { cells, .. } => *self.1.lock().unwrap() = Some(cells),
                    EngineEvent::CellFinished { summary, .. } => self.0.lock().unwrap().push(summary.cell_id.clone()),
                    _ => {}
                }
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let bench = load_benchmark(Path::new(env!("CARGO_MANIFEST_DIR")), "hc-bench").unwrap();
        let ids: Vec<String> = bench.cases.iter().take(3).map(|c| c.id.clone()).collect();
        let isolation = Isolation::unsandboxed(dir.path());
        let target = Target { run_id: "r", run_dir: dir.path(), isolation: &isolation };
        let variants = [(String::new(), Arc::new(AgentSpec::default()))];
        let profiles = [Profile::oracle()];
        let cells = Cells::lazy(|| plan_variants(target, &bench, &ids, &profiles, &variants, 2));
        let sink = Arc::new(Finished(Mutex::default(), Mutex::default()));
        let batch = Batch { run_id: "r", run_dir: dir.path(), cells, jobs: 2, budget: None, keep: Keep::Nothing };
        let summaries = execute_with(batch, sink.clone(), Cancel::default(), |cell| async move {
            Ok(CellSummary { cell_id: cell.cell_id.clone(), outcome: Some(Outcome::Passed), ..Default::default() })
        })
        .await;
        assert!(summaries.is_empty(), "nothing kept");
        assert_eq!(*sink.1.lock().unwrap(), Some(6), "3 cases x 2 epochs announced");
        let mut finished = sink.0.lock().unwrap().clone();
        finished.sort();
        let mut planned: Vec<String> =
            plan_variants(target, &bench, &ids, &profiles, &variants, 2).map(|c| c.cell_id).collect();
        planned.sort();
        assert_eq!(finished, planned, "every planned cell ran once");
    }

    /// Kept summaries come back in plan order, whatever order the cells finished in (the
    /// first planned cell here finishes last).
    #[tokio::test]
    async fn kept_summaries_are_in_plan_order_when_cells_finish_out_of_order() {
        let dir = tempfile::tempdir().unwrap();
        let cells = two_cells(dir.path());
        let planned: Vec<String> = cells.iter().map(|c| c.cell_id.clone()).collect();
        let slow = planned[0].clone();
        let batch = kept_batch(dir.path(), cells, 2);
        let summaries = execute_with(batch, Arc::new(NullSink), Cancel::default(), |cell| {
            let slow = cell.cell_id == slow;
            async move {
                if slow {
                    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
                }
                Ok(CellSummary { cell_id: cell.cell_id.clone(), outcome: Some(Outcome::Passed), ..Default::default() })
            }
        })
        .await;
        let ids: Vec<String> = summaries.into_iter().map(|s| s.cell_id).collect();
        assert_eq!(ids, planned);
    }

    /// A cell that waits for a slot has its workspace copied while the running cell works, and
    /// takes it when it starts; a cell that never takes its copy (it ends before, or the run is
    /// cancelled before it starts) leaves no workspace behind; a cell with an earlier attempt
    /// (its folder exists: `--resume`) gets no copy ahead.
    #[tokio::test]
    async fn a_waiting_cells_workspace_is_copied_ahead_and_never_left_behind() {
        let dir = tempfile::tempdir().unwrap();
        let cells = two_cells(dir.path());
        let second = cells[1].clone();
        let batch = kept_batch(dir.path(), cells, 1);
        let summaries = execute_with(batch, Arc::new(NullSink), Cancel::default(), |cell| async move {
            let started = std::time::SystemTime::now();
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            std::fs::create_dir_all(&cell.cell_dir)?;
            let link = cell.cell_dir.join("workspace");
            let ws = crate::workspace::fresh_or_ahead(&cell.case.fixture_dir, &cell.workspace, &link).await.unwrap();
            let copied = crate::workspace::take_copied(&ws).expect("the copy's record");
            let reason = if copied.started < started { "ahead" } else { "at start" };
            Ok(CellSummary { cell_id: cell.cell_id.clone(), reason: reason.into(), ..Default::default() })
        })
        .await;
        let how: Vec<&str> = summaries.iter().map(|s| s.reason.as_str()).collect();
        assert_eq!(how, ["at start", "ahead"], "the first cell had no cell before it to wait for");
        assert!(second.workspace.join(".").exists());

        // Not taken: the first cell runs while the second's copy is made, then the run is cancelled.
        let dir = tempfile::tempdir().unwrap();
        let cells = two_cells(dir.path());
        let workspaces: Vec<_> = cells.iter().map(|c| c.workspace.clone()).collect();
        let cancel = Cancel::default();
        let batch = kept_batch(dir.path(), cells, 1);
        let stop = cancel.clone();
        execute_with(batch, Arc::new(NullSink), cancel, move |cell| {
            let stop = stop.clone();
            async move {
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                stop.cancel();
                Ok(CellSummary { cell_id: cell.cell_id.clone(), ..Default::default() })
            }
        })
        .await;
        for ws in &workspaces {
            assert!(ws.symlink_metadata().is_err(), "{} left behind", ws.display());
        }

        // An earlier attempt's folder: nothing is copied for that cell before it starts.
        let dir = tempfile::tempdir().unwrap();
        let cells = two_cells(dir.path());
        std::fs::create_dir_all(&cells[1].cell_dir).unwrap();
        let batch = kept_batch(dir.path(), cells, 1);
        let summaries = execute_with(batch, Arc::new(NullSink), Cancel::default(), |cell| async move {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            let exists = cell.workspace.symlink_metadata().is_ok();
            Ok(CellSummary { cell_id: cell.cell_id.clone(), reason: format!("{exists}").into(), ..Default::default() })
        })
        .await;
        assert_eq!(summaries[1].reason, "false", "no copy made for a cell with an earlier attempt");
    }

    #[tokio::test]
    async fn a_cell_whose_trace_cannot_be_written_is_a_harness_error() {
        let dir = tempfile::tempdir().unwrap();
        let cells = two_cells(dir.path());
        let batch = kept_batch(dir.path(), cells, 1);
        let summaries = execute_with(batch, Arc::new(NullSink), Cancel::default(), |_| async {
            Err(std::io::Error::other("disk full"))
        })
        .await;
        assert!(summaries.iter().all(|s| s.outcome == Some(Outcome::HarnessError) && s.reason.contains("disk full")));
    }
}
