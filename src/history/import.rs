//! `hcbench history import RUN_DIR`: a run's rows rebuilt from its traces, as the run would
//! have appended them.

use std::path::{Path, PathBuf};

use super::{HistoryError, append_run};
use crate::report::model::{self, ReportError};

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error(transparent)]
    Run(#[from] ReportError),
    #[error(transparent)]
    History(#[from] HistoryError),
}

/// Replays every planned cell of `run_dir` (a missing or cut trace is an `incomplete` row,
/// as in the run's reports) and writes the run's history file into `history`. Returns the
/// file and its row count.
pub fn import_run(run_dir: &Path, history: &Path) -> Result<(PathBuf, usize), ImportError> {
    let report = model::build(run_dir, false)?;
    let manifest = crate::rundir::Manifest::read(run_dir).map_err(ReportError::from)?;
    let file = append_run(history, &manifest, &report.cells)?;
    Ok((file, report.cells.len()))
}
