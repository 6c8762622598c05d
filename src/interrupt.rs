//! Ctrl-C for the commands that run cells: one [`Session`] owns the async runtime, the engine's
//! [`Cancel`] flag and the Ctrl-C watcher, so every command reacts to Ctrl-C the same way.
//!
//! The contract (docs/commands.md, docs/gate.md): the first Ctrl-C cancels: no new cell
//! starts, running cells end as `cancelled`, and the command finishes what it can and exits
//! 130. The second Ctrl-C stops at once: every child process group is killed, the directories
//! registered with [`Session::remove_on_forced_exit`] are deleted (the gate's private
//! directories, which must never outlive the gate), and the process exits 130.
//!
//! Why one owner: the watcher must see the same `Cancel` the engine polls, and the second
//! Ctrl-C has to run cleanup that only the command knows about. The watcher lives as long as
//! the session (not one batch of cells), so a command that runs several batches, like the gate,
//! has one Ctrl-C contract from its first cell to its last write. A session is meant to be the
//! only one in the process: tokio's Ctrl-C listener replaces the default SIGINT behaviour for
//! the rest of the process.
//!
//! A session also runs the batches, so no command drives the engine by hand:
//! [`Session::execute`] for cells anywhere (the gate's private test cells),
//! [`Session::execute_run`] for a run directory's cells (progress plus its results file).

use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::agent::CellPlan;
use crate::engine::{self, Batch, Budget, Cancel};
use crate::events::{EngineEvent, EngineSink, Fanout};
use crate::replay::CellSummary;
use crate::rundir::{RunDir, RunDirError};
use crate::{exit, process};

/// Directories to delete on a forced exit (second Ctrl-C).
type Cleanup = Arc<Mutex<Vec<PathBuf>>>;

/// The runtime, the cancellation flag and the Ctrl-C watcher of one command.
pub(crate) struct Session {
    rt: tokio::runtime::Runtime,
    cancel: Cancel,
    cleanup: Cleanup,
}

/// What a batch of cells came to.
pub(crate) struct Execution {
    pub summaries: Vec<CellSummary>,
    /// True when Ctrl-C stopped the batch: `summaries` then holds what finished.
    pub cancelled: bool,
}

impl Session {
    /// Starts the runtime and the watcher. `on_first` runs once, on the first Ctrl-C, after the
    /// cells were told to stop: the place to tell the user that a second Ctrl-C stops at once.
    pub(crate) fn start(on_first: impl FnOnce() + Send + 'static) -> io::Result<Session> {
        let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
        let cancel = Cancel::default();
        let cleanup = Cleanup::default();
        {
            let (cancel, cleanup) = (cancel.clone(), cleanup.clone());
            rt.spawn(async move {
                if tokio::signal::ctrl_c().await.is_err() {
                    return;
                }
                cancel.cancel();
                on_first();
                if tokio::signal::ctrl_c().await.is_ok() {
                    force_exit(&cleanup);
                }
            });
        }
        Ok(Session { rt, cancel, cleanup })
    }

    /// A session for a run whose progress display should hear about the first Ctrl-C (as an
    /// [`EngineEvent::Cancelling`]), as `run`, `matrix` and `validate` want.
    pub(crate) fn for_progress(progress: &Arc<dyn EngineSink>) -> io::Result<Session> {
        let progress = progress.clone();
        Session::start(move || progress.event(EngineEvent::Cancelling))
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Runs a future on the session's runtime.
    pub(crate) fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.rt.block_on(future)
    }

    /// Registers a directory to delete if the user forces an exit while it exists.
    pub(crate) fn remove_on_forced_exit(&self, dir: &Path) {
        lock(&self.cleanup).push(dir.to_path_buf());
    }

    /// Undoes [`Session::remove_on_forced_exit`], once the owner removed the directory itself.
    pub(crate) fn forget(&self, dir: &Path) {
        lock(&self.cleanup).retain(|p| p != dir);
    }

    /// Runs a batch of cells through the engine under this session's Ctrl-C contract.
    pub(crate) fn execute(&self, batch: Batch<'_>, sink: Arc<dyn EngineSink>) -> Execution {
        let summaries = self.block_on(engine::execute(batch, sink, self.cancel.clone()));
        Execution { summaries, cancelled: self.is_cancelled() }
    }

    /// Runs cells of a run directory: progress goes to `progress`, and every summary is
    /// appended to the run's results file, which is complete when this returns.
    pub(crate) fn execute_run(
        &self,
        run: &RunDir,
        cells: Vec<CellPlan>,
        jobs: usize,
        progress: Arc<dyn EngineSink>,
        budget: Option<Budget>,
    ) -> Result<Execution, RunDirError> {
        let results = Arc::new(run.results()?);
        let sink = Arc::new(Fanout::new(vec![progress, results.clone()]));
        let batch = Batch { run_id: &run.manifest().run_id, run_dir: run.path(), cells, jobs, budget };
        let done = self.execute(batch, sink);
        results.finish()?;
        Ok(done)
    }
}

/// The second Ctrl-C: kill every child, delete the registered directories, exit 130.
fn force_exit(cleanup: &Cleanup) -> ! {
    process::kill_all_groups();
    for dir in lock(cleanup).iter() {
        let _ = std::fs::remove_dir_all(dir);
    }
    std::process::exit(exit::INTERRUPTED);
}

/// The list stays usable after a panic elsewhere: a forced exit must still clean up.
fn lock(cleanup: &Cleanup) -> std::sync::MutexGuard<'_, Vec<PathBuf>> {
    cleanup.lock().unwrap_or_else(|p| p.into_inner())
}
