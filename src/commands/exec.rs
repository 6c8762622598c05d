//! Shared execution for the commands that run cells: the runtime, Ctrl-C handling, and the
//! sinks every run has (the progress display and the run directory's results file).
//!
//! Ctrl-C once: no new cell starts, running cells are recorded as cancelled, reports of what
//! finished are written, exit code 130. Ctrl-C twice: every child process group is killed and
//! hcbench exits at once with 130.

use std::sync::Arc;

use super::CommandError;
use crate::agent::CellPlan;
use crate::engine::{self, Batch, Budget, Cancel};
use crate::events::{EngineEvent, EngineSink, Fanout};
use crate::replay::CellSummary;
use crate::rundir::RunDir;
use crate::{exit, process};

pub(crate) struct Execution {
    pub summaries: Vec<CellSummary>,
    pub cancelled: bool,
}

/// Runs `cells` into `run`, reporting to `progress` and appending to `results.jsonl`.
pub(crate) fn execute(
    run: &RunDir,
    cells: Vec<CellPlan>,
    jobs: usize,
    progress: Arc<dyn EngineSink>,
    budget: Option<Budget>,
) -> Result<Execution, CommandError> {
    let results = Arc::new(run.results()?);
    let sink: Arc<dyn EngineSink> = Arc::new(Fanout::new(vec![progress.clone(), results.clone()]));
    let rt = super::runtime()?;
    let cancel = Cancel::default();
    let summaries = rt.block_on(async {
        let watcher = {
            let cancel = cancel.clone();
            tokio::spawn(async move {
                if tokio::signal::ctrl_c().await.is_ok() {
                    cancel.cancel();
                    progress.event(EngineEvent::Cancelling);
                    if tokio::signal::ctrl_c().await.is_ok() {
                        process::kill_all_groups();
                        std::process::exit(exit::INTERRUPTED);
                    }
                }
            })
        };
        let batch = Batch { run_id: &run.manifest().run_id, run_dir: run.path(), cells, jobs, budget };
        let r = engine::execute(batch, sink, cancel.clone()).await;
        watcher.abort();
        r
    });
    results.finish()?;
    Ok(Execution { summaries, cancelled: cancel.is_cancelled() })
}
