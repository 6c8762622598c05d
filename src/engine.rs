//! The engine: plans cells and runs them in parallel.
//!
//! A plan is cases x epochs x profiles in a deterministic order, each cell with a stable id.
//! A tokio semaphore bounds running cells (`--jobs`); profiles interleave in the plan so no
//! profile waits for another to finish. The engine never prints: it reports to an
//! [`EngineSink`], and appends each cell's summary to `results.jsonl` as soon as the cell
//! ends, so an interrupted run loses nothing that finished.
//!
//! Cancellation (Ctrl-C): once [`Cancel::cancel`] is called no new cell starts, and running
//! cells are stopped (their process groups killed when their futures drop) and recorded as
//! `cancelled` with a final `run_finished` event appended to their traces.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::agent::spec::AgentSpec;
use crate::agent::{CellPlan, run_cell};
use crate::bench::Benchmark;
use crate::model::Profile;
use crate::replay::{CellSummary, SUMMARY_SCHEMA_VERSION, replay_trace};
use crate::trace::TraceWriter;
use crate::trace::event::{EventBody, Outcome};

/// What the engine tells its sinks.
#[derive(Debug)]
pub enum EngineEvent<'a> {
    RunStarted {
        run_id: &'a str,
        run_dir: &'a Path,
        cells: usize,
        profiles: &'a [String],
    },
    CellStarted {
        cell_id: &'a str,
    },
    CellFinished {
        summary: &'a CellSummary,
        done: usize,
        total: usize,
    },
    /// Cells kept from an earlier attempt (`--resume`).
    CellsKept {
        count: usize,
    },
    /// The run's model cost reached its budget: no new cell starts.
    BudgetSpent {
        spent_usd: f64,
        budget_usd: f64,
    },
    Cancelling,
}

/// Receives engine events: the terminal progress display is one; tests use others.
pub trait EngineSink: Send + Sync {
    fn event(&self, event: EngineEvent<'_>);
}

/// A sink that ignores everything.
pub struct NullSink;

impl EngineSink for NullSink {
    fn event(&self, _event: EngineEvent<'_>) {}
}

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

/// Version of `manifest.json`.
pub const MANIFEST_SCHEMA_VERSION: u32 = 1;

/// The run's description, written once to `manifest.json` before any cell starts. It is the
/// plan: `report` and `--resume` rebuild the list of cells from it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    pub schema_version: u32,
    pub run_id: String,
    pub hcbench_version: String,
    /// The git commit of the project root, when it is a git repository.
    #[serde(default)]
    pub git_commit: Option<String>,
    pub command: String,
    pub benchmark: String,
    pub profiles: Vec<String>,
    pub cases: Vec<ManifestCase>,
    pub epochs: u32,
    pub jobs: usize,
    pub started_at: String,
    /// Digest of the agent spec and the folder it came from (None: the embedded default).
    #[serde(default)]
    pub agent_spec: String,
    #[serde(default)]
    pub agent_dir: Option<PathBuf>,
    /// `--budget-usd`: no new cell starts once the run's model cost reaches it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_usd: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ManifestCase {
    pub id: String,
    pub category: String,
    pub split: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("{path} is not a run directory: {source} (expected the manifest.json that run and matrix write)")]
    Missing { path: PathBuf, source: io::Error },
    #[error("{path} is not a valid manifest: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error(
        "{path} has schema_version {found}, newer than this hcbench reads ({MANIFEST_SCHEMA_VERSION}); upgrade hcbench"
    )]
    TooNew { path: PathBuf, found: u32 },
}

impl Manifest {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        command: &str,
        run_id: &str,
        root: &Path,
        bench: &Benchmark,
        case_ids: &[String],
        profiles: &[Profile],
        epochs: u32,
        jobs: usize,
        spec: &AgentSpec,
    ) -> Manifest {
        Manifest {
            schema_version: MANIFEST_SCHEMA_VERSION,
            run_id: run_id.to_string(),
            hcbench_version: env!("CARGO_PKG_VERSION").to_string(),
            git_commit: git_head(root),
            command: command.to_string(),
            benchmark: bench.name.clone(),
            profiles: profiles.iter().map(|p| p.name().to_string()).collect(),
            cases: case_ids
                .iter()
                .filter_map(|id| bench.case(id))
                .map(|c| ManifestCase {
                    id: c.id.clone(),
                    category: c.category.to_string(),
                    split: c.split.to_string(),
                })
                .collect(),
            epochs,
            jobs,
            started_at: crate::util::now_rfc3339(),
            agent_spec: spec.digest.clone(),
            agent_dir: spec.dir.clone(),
            budget_usd: None,
        }
    }

    pub fn read(run_dir: &Path) -> Result<Manifest, ManifestError> {
        let path = run_dir.join("manifest.json");
        let text =
            std::fs::read_to_string(&path).map_err(|source| ManifestError::Missing { path: path.clone(), source })?;
        let m: Manifest = serde_json::from_str(&text)
            .map_err(|e| ManifestError::Invalid { path: path.clone(), message: e.to_string() })?;
        if m.schema_version > MANIFEST_SCHEMA_VERSION {
            return Err(ManifestError::TooNew { path, found: m.schema_version });
        }
        Ok(m)
    }

    pub fn write(&self, run_dir: &Path) -> io::Result<()> {
        let bytes = serde_json::to_vec_pretty(self).map_err(io::Error::other)?;
        crate::util::write_atomic(&run_dir.join("manifest.json"), &bytes)
    }

    /// (cell id, case id, profile) of every planned cell, in plan order.
    pub fn cell_ids(&self) -> Vec<(String, String, String)> {
        let mut out = Vec::new();
        for case in &self.cases {
            for epoch in 1..=self.epochs {
                for p in &self.profiles {
                    out.push((cell_id(&case.id, p, epoch, self.epochs), case.id.clone(), p.clone()));
                }
            }
        }
        out
    }

    pub fn category_of(&self, case_id: &str) -> Option<String> {
        self.cases.iter().find(|c| c.id == case_id).map(|c| c.category.clone())
    }

    pub fn split_of(&self, case_id: &str) -> Option<String> {
        self.cases.iter().find(|c| c.id == case_id).map(|c| c.split.clone())
    }
}

/// The commit HEAD points at, read from `.git` without running git.
fn git_head(root: &Path) -> Option<String> {
    let git = root.join(".git");
    let head = std::fs::read_to_string(git.join("HEAD")).ok()?;
    let head = head.trim();
    if let Some(r) = head.strip_prefix("ref: ") {
        if let Ok(id) = std::fs::read_to_string(git.join(r)) {
            return Some(id.trim().to_string());
        }
        let packed = std::fs::read_to_string(git.join("packed-refs")).ok()?;
        return packed.lines().find(|l| l.ends_with(r)).and_then(|l| l.split_whitespace().next()).map(str::to_string);
    }
    Some(head.to_string())
}

/// The stable id of a cell. The epoch suffix appears only when the plan has several epochs.
pub fn cell_id(case_id: &str, profile: &str, epoch: u32, epochs: u32) -> String {
    if epochs > 1 { format!("{case_id}__{profile}__e{epoch}") } else { format!("{case_id}__{profile}") }
}

/// Cases x epochs x profiles, in a deterministic order: profiles interleave, so every profile
/// makes progress from the start and a slow one does not hold the others back.
pub fn plan(
    run_id: &str,
    run_dir: &Path,
    bench: &Benchmark,
    case_ids: &[String],
    profiles: &[Profile],
    epochs: u32,
    spec: &Arc<AgentSpec>,
) -> Vec<CellPlan> {
    let mut cells = Vec::new();
    for case_id in case_ids {
        let Some(case) = bench.case(case_id) else { continue };
        let case = Arc::new(case.clone());
        for epoch in 1..=epochs {
            for profile in profiles {
                let id = cell_id(case_id, profile.name(), epoch, epochs);
                cells.push(CellPlan {
                    run_id: run_id.to_string(),
                    cell_dir: run_dir.join("cells").join(&id),
                    cell_id: id,
                    benchmark: bench.name.clone(),
                    case: case.clone(),
                    profile: profile.clone(),
                    epoch,
                    spec: spec.clone(),
                });
            }
        }
    }
    cells
}

/// A run id: UTC time plus the process id, sortable and unique on one machine.
pub fn new_run_id() -> String {
    let ts = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let compact: String = ts.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
    format!("{}-{}", compact.to_lowercase(), std::process::id())
}

/// True when the cell's trace ended with a real verdict (kept by `--resume`).
pub fn cell_is_complete(cell_dir: &Path) -> Option<CellSummary> {
    let s = replay_trace(&cell_dir.join("trace.jsonl")).ok()?;
    match s.outcome {
        Some(Outcome::Cancelled) | None => None,
        Some(_) => Some(s),
    }
}

/// Runs every cell with at most `jobs` at once; returns summaries in plan order. Cells not
/// started because of cancellation are absent from the result.
pub async fn execute(
    run_id: &str,
    run_dir: &Path,
    cells: Vec<CellPlan>,
    jobs: usize,
    sink: Arc<dyn EngineSink>,
    cancel: Cancel,
) -> io::Result<Vec<CellSummary>> {
    execute_with_budget(run_id, run_dir, cells, jobs, sink, cancel, None, 0.0).await
}

/// [`execute`] with a cost cap: once the cost of finished cells (plus `already_spent`, from
/// cells kept by `--resume`) reaches `budget_usd`, no new cell starts. Cells already running
/// finish, so the cap can be exceeded by at most their cost.
#[allow(clippy::too_many_arguments)]
pub async fn execute_with_budget(
    run_id: &str,
    run_dir: &Path,
    cells: Vec<CellPlan>,
    jobs: usize,
    sink: Arc<dyn EngineSink>,
    cancel: Cancel,
    budget_usd: Option<f64>,
    already_spent: f64,
) -> io::Result<Vec<CellSummary>> {
    let spent = Arc::new(Mutex::new((already_spent, false)));
    let results_path = run_dir.join("results.jsonl");
    let results = Arc::new(Mutex::new(OpenOptions::new().create(true).append(true).open(&results_path)?));
    let mut profiles: Vec<String> = Vec::new();
    for c in &cells {
        if !profiles.iter().any(|p| p == c.profile.name()) {
            profiles.push(c.profile.name().to_string());
        }
    }
    sink.event(EngineEvent::RunStarted { run_id, run_dir, cells: cells.len(), profiles: &profiles });
    let total = cells.len();
    let semaphore = Arc::new(tokio::sync::Semaphore::new(jobs.max(1)));
    let done = Arc::new(AtomicUsize::new(0));
    let mut set = tokio::task::JoinSet::new();
    // Permits are taken here, in plan order, before each cell is spawned: cells start in plan
    // order whatever the runtime's scheduling, so a budget cut or a Ctrl-C stops the tail of
    // the plan, and no task exists for a cell that has not started.
    for (index, cell) in cells.into_iter().enumerate() {
        let permit = semaphore.clone().acquire_owned().await.expect("semaphore is never closed");
        if cancel.is_cancelled() {
            break;
        }
        if let Some(budget) = budget_usd {
            let mut guard = spent.lock().unwrap_or_else(|p| p.into_inner());
            if guard.0 >= budget {
                if !guard.1 {
                    guard.1 = true;
                    sink.event(EngineEvent::BudgetSpent { spent_usd: guard.0, budget_usd: budget });
                }
                break;
            }
        }
        let sink = sink.clone();
        let results = results.clone();
        let done = done.clone();
        let cancel = cancel.clone();
        let spent = spent.clone();
        set.spawn(async move {
            let _permit = permit;
            sink.event(EngineEvent::CellStarted { cell_id: &cell.cell_id });
            tracing::info!(cell = %cell.cell_id, "cell started");
            let summary = tokio::select! {
                r = run_cell(&cell) => match r {
                    Ok(s) => s,
                    Err(e) => harness_failure(&cell, &e),
                },
                _ = cancel.cancelled() => record_cancelled(&cell),
            };
            tracing::info!(cell = %cell.cell_id, outcome = summary.outcome_label(), wall_ms = summary.wall_ms, "cell finished");
            spent.lock().unwrap_or_else(|p| p.into_inner()).0 += summary.cost_usd().unwrap_or(0.0);
            let mut line = serde_json::to_vec(&summary).map_err(io::Error::other)?;
            line.push(b'\n');
            {
                let mut f = results.lock().unwrap_or_else(|p| p.into_inner());
                f.write_all(&line)?;
                f.flush()?;
            }
            let n = done.fetch_add(1, Ordering::SeqCst) + 1;
            sink.event(EngineEvent::CellFinished { summary: &summary, done: n, total });
            io::Result::Ok((index, summary))
        });
    }
    let mut out: Vec<Option<CellSummary>> = vec![None; total];
    while let Some(joined) = set.join_next().await {
        let (index, summary) = joined.map_err(io::Error::other)??;
        out[index] = Some(summary);
    }
    Ok(out.into_iter().flatten().collect())
}

/// Appends `run_finished: cancelled` to an interrupted cell's trace and replays it.
fn record_cancelled(cell: &CellPlan) -> CellSummary {
    let trace = cell.cell_dir.join("trace.jsonl");
    let appended = TraceWriter::append_to(&trace, &cell.run_id, &cell.cell_id).and_then(|mut w| {
        w.append(EventBody::RunFinished {
            outcome: Outcome::Cancelled,
            reward: 0.0,
            stop_reason: "cancelled".into(),
            reason: "the run was interrupted (Ctrl-C) while this cell was running".into(),
            elapsed_ms: 0,
        })
    });
    match appended.and_then(|_| replay_trace(&trace).map_err(io::Error::other)) {
        Ok(s) => s,
        Err(e) => {
            let mut s = harness_failure(cell, &e);
            s.outcome = Some(Outcome::Cancelled);
            s
        }
    }
}

/// A summary for a cell whose trace could not be written: it still counts, as a harness error.
fn harness_failure(cell: &CellPlan, error: &io::Error) -> CellSummary {
    CellSummary {
        schema_version: SUMMARY_SCHEMA_VERSION,
        run_id: cell.run_id.clone(),
        cell_id: cell.cell_id.clone(),
        case_id: cell.case.id.clone(),
        category: cell.case.category.to_string(),
        split: cell.case.split.to_string(),
        profile: cell.profile.name().to_string(),
        step_budget: cell.case.step_budget,
        epoch: cell.epoch,
        stop_reason: "harness_error".into(),
        outcome: Some(Outcome::HarnessError),
        reason: format!("cannot write the cell's trace: {error}"),
        ..Default::default()
    }
}

/// Creates the run directory, refusing to reuse one that already holds a run.
pub fn prepare_run_dir(run_dir: &Path) -> io::Result<PathBuf> {
    if run_dir.join("manifest.json").exists() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} already holds a run; choose another --out or use --resume", run_dir.display()),
        ));
    }
    std::fs::create_dir_all(run_dir.join("cells"))?;
    // Probe writability now, so a read-only location fails before any cell runs.
    let probe = run_dir.join(".write-probe");
    std::fs::write(&probe, b"")?;
    std::fs::remove_file(&probe)?;
    run_dir.canonicalize()
}
