//! Shared execution for the commands that run cells: the runtime, Ctrl-C handling, and the
//! reports written after the cells end.
//!
//! Ctrl-C once: no new cell starts, running cells are recorded as cancelled, reports of what
//! finished are written, exit code 130. Ctrl-C twice: every child process group is killed and
//! hcbench exits at once with 130.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;

use super::CommandError;
use crate::agent::CellPlan;
use crate::engine::{self, Cancel, EngineEvent, EngineSink};
use crate::replay::CellSummary;
use crate::{exit, process};

pub(crate) struct Execution {
    pub summaries: Vec<CellSummary>,
    pub cancelled: bool,
}

pub(crate) fn execute(
    run_id: &str,
    run_dir: &Path,
    cells: Vec<CellPlan>,
    jobs: usize,
    sink: Arc<dyn EngineSink>,
) -> Result<Execution, CommandError> {
    execute_with_budget(run_id, run_dir, cells, jobs, sink, None, 0.0)
}

pub(crate) fn execute_with_budget(
    run_id: &str,
    run_dir: &Path,
    cells: Vec<CellPlan>,
    jobs: usize,
    sink: Arc<dyn EngineSink>,
    budget_usd: Option<f64>,
    already_spent: f64,
) -> Result<Execution, CommandError> {
    let rt = super::runtime()?;
    let cancel = Cancel::default();
    let summaries = rt.block_on(async {
        let watcher = {
            let cancel = cancel.clone();
            let sink = sink.clone();
            tokio::spawn(async move {
                if tokio::signal::ctrl_c().await.is_ok() {
                    cancel.cancel();
                    sink.event(EngineEvent::Cancelling);
                    if tokio::signal::ctrl_c().await.is_ok() {
                        process::kill_all_groups();
                        std::process::exit(exit::INTERRUPTED);
                    }
                }
            })
        };
        let r =
            engine::execute_with_budget(run_id, run_dir, cells, jobs, sink, cancel.clone(), budget_usd, already_spent)
                .await;
        watcher.abort();
        r
    });
    let summaries = summaries.with_context(|| format!("running cells in {}", run_dir.display()))?;
    Ok(Execution { summaries, cancelled: cancel.is_cancelled() })
}
