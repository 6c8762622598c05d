//! The engine: plans cells and runs them in parallel.
//!
//! A plan is cases x profiles in a deterministic order (benchmark order, then profile order),
//! each cell with a stable id. A tokio semaphore bounds running cells (`--jobs`). The engine
//! never prints: it reports to an [`EngineSink`], and appends each cell's summary to
//! `results.jsonl` as soon as the cell ends, so an interrupted run loses nothing finished.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::Serialize;

use crate::agent::{run_cell, CellPlan};
use crate::bench::Benchmark;
use crate::model::Profile;
use crate::replay::{CellSummary, SUMMARY_SCHEMA_VERSION};
use crate::trace::event::Outcome;

/// What the engine tells its sinks.
#[derive(Debug)]
pub enum EngineEvent<'a> {
    RunStarted { run_id: &'a str, run_dir: &'a Path, cells: usize },
    CellStarted { cell_id: &'a str },
    CellFinished { summary: &'a CellSummary, done: usize, total: usize },
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

/// The run's description, written once to `manifest.json` before any cell starts.
#[derive(Debug, Serialize)]
pub struct Manifest {
    pub schema_version: u32,
    pub run_id: String,
    pub hcbench_version: String,
    pub command: String,
    pub benchmark: String,
    pub profiles: Vec<String>,
    pub cases: Vec<String>,
    pub jobs: usize,
    pub started_at: String,
}

/// The stable id of a cell.
pub fn cell_id(case_id: &str, profile: &str) -> String {
    format!("{case_id}__{profile}")
}

/// Cases x profiles, in a deterministic order.
pub fn plan(run_id: &str, run_dir: &Path, bench: &Benchmark, case_ids: &[String], profiles: &[Profile]) -> Vec<CellPlan> {
    let mut cells = Vec::new();
    for case_id in case_ids {
        let Some(case) = bench.case(case_id) else { continue };
        let case = Arc::new(case.clone());
        for profile in profiles {
            let id = cell_id(case_id, profile.name());
            cells.push(CellPlan {
                run_id: run_id.to_string(),
                cell_dir: run_dir.join("cells").join(&id),
                cell_id: id,
                benchmark: bench.name.clone(),
                case: case.clone(),
                profile: profile.clone(),
            });
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

/// Runs every cell with at most `jobs` at once; returns summaries in plan order.
pub async fn execute(
    run_id: &str,
    run_dir: &Path,
    cells: Vec<CellPlan>,
    jobs: usize,
    sink: Arc<dyn EngineSink>,
) -> io::Result<Vec<CellSummary>> {
    let results_path = run_dir.join("results.jsonl");
    let results = Arc::new(Mutex::new(OpenOptions::new().create(true).append(true).open(&results_path)?));
    sink.event(EngineEvent::RunStarted { run_id, run_dir, cells: cells.len() });
    let total = cells.len();
    let semaphore = Arc::new(tokio::sync::Semaphore::new(jobs.max(1)));
    let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut set = tokio::task::JoinSet::new();
    for (index, cell) in cells.into_iter().enumerate() {
        let semaphore = semaphore.clone();
        let sink = sink.clone();
        let results = results.clone();
        let done = done.clone();
        set.spawn(async move {
            let _permit = semaphore.acquire_owned().await.expect("semaphore is never closed");
            sink.event(EngineEvent::CellStarted { cell_id: &cell.cell_id });
            tracing::info!(cell = %cell.cell_id, "cell started");
            let summary = match run_cell(&cell).await {
                Ok(s) => s,
                Err(e) => harness_failure(&cell, &e),
            };
            let mut line = serde_json::to_vec(&summary).map_err(io::Error::other)?;
            line.push(b'\n');
            {
                let mut f = results.lock().unwrap_or_else(|p| p.into_inner());
                f.write_all(&line)?;
                f.flush()?;
            }
            tracing::info!(cell = %cell.cell_id, outcome = summary.outcome_label(), wall_ms = summary.wall_ms, "cell finished");
            let n = done.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
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

/// A summary for a cell whose trace could not be written: it still counts, as a harness error.
fn harness_failure(cell: &CellPlan, error: &io::Error) -> CellSummary {
    let mut s = CellSummary {
        schema_version: SUMMARY_SCHEMA_VERSION,
        run_id: cell.run_id.clone(),
        cell_id: cell.cell_id.clone(),
        case_id: cell.case.id.clone(),
        category: cell.case.category.to_string(),
        split: cell.case.split.to_string(),
        profile: cell.profile.name().to_string(),
        step_budget: cell.case.step_budget,
        stop_reason: "harness_error".into(),
        ..Default::default()
    };
    s.outcome = Some(Outcome::HarnessError);
    s.reason = format!("cannot write the cell's trace: {error}");
    s
}

/// Creates the run directory, refusing to reuse one that already holds a run.
pub fn prepare_run_dir(run_dir: &Path) -> io::Result<PathBuf> {
    if run_dir.join("manifest.json").exists() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} already holds a run; choose another --out", run_dir.display()),
        ));
    }
    std::fs::create_dir_all(run_dir.join("cells"))?;
    run_dir.canonicalize()
}
