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
//! `hcbench gate` starts its session with [`Session::start_terminable`]: SIGTERM and SIGHUP
//! (a supervisor stopping the loop, a closed terminal) then follow the same contract as Ctrl-C,
//! so the gate never dies with its private test-split data or half its state written. Other
//! commands keep the default action of those signals.
//!
//! A session also runs the batches, so no command drives the engine by hand:
//! [`Session::execute`] for cells anywhere (the gate's private test cells),
//! [`Session::execute_run`] for a run directory's cells (progress plus its results file).

use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::engine::{self, Batch, Budget, Cancel, Cells, Keep};
use crate::events::{EngineEvent, EngineSink, Fanout};
use crate::replay::CellSummary;
use crate::rundir::{RunDir, RunDirError};
use crate::{exit, process};

/// Directories to delete on a forced exit (second Ctrl-C). Process-wide, not per session: the
/// gate's private area ([`crate::gate::private`]) exists before its session and after it.
static CLEANUP: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Registers a directory to delete if the user forces an exit while it exists.
pub(crate) fn remove_on_forced_exit(dir: &Path) {
    lock().push(dir.to_path_buf());
}

/// Undoes [`remove_on_forced_exit`], once the owner removed the directory itself.
pub(crate) fn forget_on_forced_exit(dir: &Path) {
    lock().retain(|p| p != dir);
}

/// Which signals a session treats as Ctrl-C.
#[derive(Clone, Copy)]
enum Signals {
    /// SIGINT only.
    Interrupt,
    /// SIGINT, SIGTERM and SIGHUP.
    Any,
}

/// The runtime, the cancellation flag and the Ctrl-C watcher of one command.
pub(crate) struct Session {
    rt: tokio::runtime::Runtime,
    cancel: Cancel,
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
        Session::start_on(Signals::Interrupt, on_first)
    }

    /// [`Session::start`], with SIGTERM and SIGHUP handled like Ctrl-C (first: cancel; second:
    /// stop at once). For `hcbench gate`.
    pub(crate) fn start_terminable(on_first: impl FnOnce() + Send + 'static) -> io::Result<Session> {
        Session::start_on(Signals::Any, on_first)
    }

    fn start_on(signals: Signals, on_first: impl FnOnce() + Send + 'static) -> io::Result<Session> {
        let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
        let cancel = Cancel::default();
        // The listeners are installed now, not when the watcher first runs, so a signal that
        // arrives right after the session starts is not lost to the default action.
        let mut watch = rt.block_on(async { Watch::new(signals) })?;
        {
            let cancel = cancel.clone();
            rt.spawn(async move {
                if !watch.next().await {
                    return;
                }
                cancel.cancel();
                on_first();
                if watch.next().await {
                    force_exit();
                }
            });
        }
        Ok(Session { rt, cancel })
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
        remove_on_forced_exit(dir);
    }

    /// Undoes [`Session::remove_on_forced_exit`], once the owner removed the directory itself.
    pub(crate) fn forget(&self, dir: &Path) {
        forget_on_forced_exit(dir);
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
        cells: Cells<'_>,
        jobs: usize,
        progress: Arc<dyn EngineSink>,
        budget: Option<Budget>,
        keep: Keep,
    ) -> Result<Execution, RunDirError> {
        let results = Arc::new(run.results()?);
        let sink = Arc::new(Fanout::new(vec![progress, results.clone()]));
        let batch = Batch { run_id: &run.manifest().run_id, run_dir: run.path(), cells, jobs, budget, keep };
        let done = self.execute(batch, sink);
        results.finish()?;
        Ok(done)
    }
}

/// The signals a session listens to.
struct Watch {
    interrupt: tokio::signal::unix::Signal,
    terminate: Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>,
}

impl Watch {
    fn new(signals: Signals) -> io::Result<Watch> {
        use tokio::signal::unix::{SignalKind, signal};
        let terminate = match signals {
            Signals::Interrupt => None,
            Signals::Any => Some((signal(SignalKind::terminate())?, signal(SignalKind::hangup())?)),
        };
        Ok(Watch { interrupt: signal(SignalKind::interrupt())?, terminate })
    }

    /// Waits for the next signal; false when no more can come.
    async fn next(&mut self) -> bool {
        match &mut self.terminate {
            None => self.interrupt.recv().await.is_some(),
            Some((term, hup)) => tokio::select! {
                s = self.interrupt.recv() => s.is_some(),
                s = term.recv() => s.is_some(),
                s = hup.recv() => s.is_some(),
            },
        }
    }
}

/// The second Ctrl-C: kill every child, delete the registered directories, exit 130.
fn force_exit() -> ! {
    process::kill_all_groups();
    for dir in lock().iter() {
        let _ = std::fs::remove_dir_all(dir);
    }
    std::process::exit(exit::INTERRUPTED);
}

/// The list stays usable after a panic elsewhere: a forced exit must still clean up.
fn lock() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    CLEANUP.lock().unwrap_or_else(|p| p.into_inner())
}
