//! Running a run directory's cells from `run` and `matrix`: one [`Session`] (runtime and the
//! Ctrl-C contract of src/interrupt.rs), the progress display told about the first Ctrl-C.

use std::sync::Arc;

use anyhow::Context as _;

use super::CommandError;
use crate::agent::CellPlan;
use crate::engine::Budget;
use crate::events::{EngineEvent, EngineSink};
use crate::interrupt::{Execution, Session};
use crate::rundir::RunDir;

pub(crate) fn execute(
    run: &RunDir,
    cells: Vec<CellPlan>,
    jobs: usize,
    progress: Arc<dyn EngineSink>,
    budget: Option<Budget>,
) -> Result<Execution, CommandError> {
    let notify = progress.clone();
    let session =
        Session::start(move || notify.event(EngineEvent::Cancelling)).context("cannot start the async runtime")?;
    Ok(session.execute_run(run, cells, jobs, progress, budget)?)
}
