//! How the gate runs cells: batches of train cells in kept run directories, and test cells of
//! one or two arms in the private directory, all on one [`Session`] (one runtime, one Ctrl-C
//! contract for the whole gate).
//!
//! Train cells (Steps 1 and 3) run in `workspace/gate/<run-id>/{suite,promotion}/`, ordinary
//! run directories the loop may read. Test cells (Step 2) run in the private directory
//! (`super::private_dir`, in the gate's private area) and report a count only: [`TestProgress`]
//! turns each finished cell into a number, so no sink ever sees which test case passed, and
//! every log line is silenced while they run ([`SilentLogs`]). A batch returns `None` once
//! Ctrl-C was pressed, and the gate then stops without writing state.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::GateError;
use super::event::{LiveEvent, LiveSink};
use super::private::SilentLogs;
use crate::agent::CellPlan;
use crate::agent::spec::AgentSpec;
use crate::bench::Benchmark;
use crate::engine::{self, Batch, Keep, Target};
use crate::events::{EngineEvent, EngineSink};
use crate::interrupt::Session;
use crate::model::Profile;
use crate::replay::CellSummary;
use crate::rundir::{Manifest, Plan, RunDir};
use crate::sandbox::Isolation;

/// One side of a Step 2 comparison: its profile and spec, with its own run id so its summaries
/// can be told apart when both arms run in one batch.
pub(crate) struct Arm {
    run_id: String,
    dir: PathBuf,
    profile: Profile,
    spec: Arc<AgentSpec>,
}

impl Arm {
    /// An arm named `name` (`candidate` or `head`) in the private directory `private`. Its
    /// profile's response cache moves there too: it would hold test prompts.
    pub(crate) fn new(run_id: &str, name: &str, private: &Path, profile: &Profile, spec: Arc<AgentSpec>) -> Arm {
        let profile = profile.with_cache_dir(&private.join("cache").join(profile.name()));
        Arm { run_id: format!("{run_id}-{name}"), dir: private.join(name), profile, spec }
    }
}

/// Runs the batches of cells of one gate run.
pub(crate) struct Runner {
    session: Session,
    root: PathBuf,
    run_id: String,
    jobs: usize,
    isolation: Isolation,
    live: Arc<dyn LiveSink>,
}

impl Runner {
    /// Starts the session; the first Ctrl-C (or SIGTERM, or SIGHUP) is reported to `live`.
    pub(crate) fn start(
        root: &Path,
        run_id: &str,
        jobs: usize,
        isolation: Isolation,
        live: Arc<dyn LiveSink>,
    ) -> Result<Runner, GateError> {
        let notify = live.clone();
        let session = Session::start_terminable(move || notify.live(LiveEvent::Interrupted))
            .map_err(|source| GateError::Io { context: "cannot start the async runtime".into(), source })?;
        Ok(Runner { session, root: root.to_path_buf(), run_id: run_id.to_string(), jobs, isolation, live })
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.session.is_cancelled()
    }

    /// Deletes `dir` if the user forces an exit while the gate runs.
    pub(crate) fn protect(&self, dir: &Path) {
        self.session.remove_on_forced_exit(dir);
    }

    pub(crate) fn unprotect(&self, dir: &Path) {
        self.session.forget(dir);
    }

    /// Train cells in a run directory under workspace/gate/ (kept: the loop may read them).
    /// None when interrupted.
    pub(crate) fn run_train(
        &self,
        run_dir: &Path,
        bench: &Benchmark,
        case_ids: &[String],
        profile: &Profile,
        spec: &Arc<AgentSpec>,
        epochs: u32,
    ) -> Result<Option<Vec<CellSummary>>, GateError> {
        if self.is_cancelled() {
            return Ok(None);
        }
        let run_id = &self.run_id;
        let plan = Plan {
            command: "gate",
            run_id,
            profiles: vec![profile.name().to_string()],
            epochs,
            jobs: self.jobs,
            agent_spec: &spec.digest,
            agent_dir: spec.dir.clone(),
            sandbox: self.isolation.sandbox.info(),
        };
        // The benchmark is the gate's snapshot (`super::snapshot`): its digest names files
        // relative to the snapshot's root, as a run's names them relative to the project's, so
        // the two agree on the same content; the git state is the project's.
        let bench_root = bench.dir.parent().and_then(Path::parent).unwrap_or(&self.root);
        let mut manifest = Manifest::new(plan, bench_root, bench, case_ids);
        (manifest.git_commit, manifest.git_dirty) = crate::rundir::git_state(&self.root);
        let run = RunDir::create(run_dir, manifest)?;
        let target = Target { run_id, run_dir: run.path(), isolation: &self.isolation };
        let cells = engine::plan(target, bench, case_ids, std::slice::from_ref(profile), epochs, spec);
        let progress = Arc::new(TrainProgress(self.live.clone()));
        let done = self.session.execute_run(&run, cells.into(), self.jobs, progress, None, Keep::Summaries)?;
        Ok((!done.cancelled).then_some(done.summaries))
    }

    /// Test cells of one or more arms, interleaved, in the private directory. Returns the
    /// summaries of each arm, in arm order; None when interrupted.
    pub(crate) fn run_private(
        &self,
        private: &Path,
        bench: &Benchmark,
        case_ids: &[String],
        arms: &[Arm],
        epochs: u32,
    ) -> Result<Option<Vec<Vec<CellSummary>>>, GateError> {
        let mut per_arm = Vec::new();
        // Test-split workspaces hold test fixtures and what the agent made of them: they live
        // in the private directory too, and go with it.
        let isolation = Isolation { workspaces: private.join("workspaces"), ..self.isolation.clone() };
        for arm in arms {
            std::fs::create_dir_all(arm.dir.join("cells"))
                .map_err(|source| GateError::Io { context: format!("cannot create {}", arm.dir.display()), source })?;
            let profiles = std::slice::from_ref(&arm.profile);
            per_arm.push(
                engine::plan(
                    Target { run_id: &arm.run_id, run_dir: &arm.dir, isolation: &isolation },
                    bench,
                    case_ids,
                    profiles,
                    epochs,
                    &arm.spec,
                )
                .into_iter(),
            );
        }
        let cells = interleave(per_arm);
        let folders = cells
            .iter()
            .map(|c| ((c.run_id.clone(), c.cell_id.clone()), [c.cell_dir.clone(), c.workspace.clone()]))
            .collect();
        let progress = Arc::new(TestProgress { live: self.live.clone(), folders });
        // No log line while test cells run, at any verbosity: the engine, the agent loop, child
        // processes and providers log cell ids, outcomes, argv and paths (super::private).
        tracing::info!("Step 2: logging is silent while the test-split cells run");
        let silent = SilentLogs::start();
        let summaries = self.execute("gate", private, cells, progress);
        drop(silent);
        let Some(summaries) = summaries else {
            return Ok(None);
        };
        let mut by_arm: Vec<Vec<CellSummary>> = arms.iter().map(|_| Vec::new()).collect();
        for s in summaries {
            if let Some(i) = arms.iter().position(|a| a.run_id == s.run_id) {
                by_arm[i].push(s);
            }
        }
        Ok(Some(by_arm))
    }

    /// The summaries of a batch; None when Ctrl-C stopped it (or an earlier one).
    fn execute(
        &self,
        run_id: &str,
        run_dir: &Path,
        cells: Vec<CellPlan>,
        sink: Arc<dyn EngineSink>,
    ) -> Option<Vec<CellSummary>> {
        if self.is_cancelled() {
            return None;
        }
        let batch =
            Batch { run_id, run_dir, cells: cells.into(), jobs: self.jobs, budget: None, keep: Keep::Summaries };
        let done = self.session.execute(batch, sink);
        (!done.cancelled).then_some(done.summaries)
    }
}

/// Takes one cell of each arm in turn, so both arms make progress from the start and share the
/// machine's load (and its drift) evenly.
fn interleave(mut per_arm: Vec<std::vec::IntoIter<CellPlan>>) -> Vec<CellPlan> {
    let mut cells = Vec::new();
    loop {
        let before = cells.len();
        for it in per_arm.iter_mut() {
            cells.extend(it.next());
        }
        if cells.len() == before {
            return cells;
        }
    }
}

/// Progress of train cells: each finished cell, with its id.
struct TrainProgress(Arc<dyn LiveSink>);

impl EngineSink for TrainProgress {
    fn event(&self, event: EngineEvent<'_>) {
        if let EngineEvent::CellFinished { summary, done, total } = event {
            self.0.live(LiveEvent::TrainCell { summary, done, total });
        }
    }
}

/// Progress of test cells: a count only. Which test case passed or failed is never passed on.
///
/// A finished test cell's folder (trace, artifacts) and workspace are removed at once: the gate
/// keeps only its summary, in memory. So the private area holds the cells that are running and
/// nothing else, and a process of the same user that reaches the area through a running cell's
/// `/proc/<pid>/root` (docs/security.md) finds no finished cell's trace or verdict there.
struct TestProgress {
    live: Arc<dyn LiveSink>,
    /// (run id, cell id) -> the cell's folder and its workspace.
    folders: std::collections::HashMap<(String, String), [PathBuf; 2]>,
}

impl EngineSink for TestProgress {
    fn event(&self, event: EngineEvent<'_>) {
        if let EngineEvent::CellFinished { summary, done, total } = event {
            if let Some(folders) = self.folders.get(&(summary.run_id.to_string(), summary.cell_id.clone())) {
                for f in folders {
                    let _ = std::fs::remove_dir_all(f);
                }
            }
            self.live.live(LiveEvent::TestCells { done, total });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Keeps what test progress tells the person: counts.
    struct Counts(Mutex<Vec<(usize, usize)>>);

    impl LiveSink for Counts {
        fn live(&self, event: LiveEvent<'_>) {
            if let LiveEvent::TestCells { done, total } = event {
                self.0.lock().unwrap().push((done, total));
            }
        }
    }

    #[test]
    fn a_finished_test_cell_leaves_nothing_on_disk_and_only_a_count_is_told() {
        let area = tempfile::tempdir().unwrap();
        let folder = |cell: &str| {
            let cell_dir = area.path().join("candidate/cells").join(cell);
            let workspace = area.path().join("workspaces").join(cell);
            for d in [&cell_dir, &workspace] {
                std::fs::create_dir_all(d).unwrap();
                std::fs::write(d.join("trace.jsonl"), "{\"kind\":\"test_result\"}\n").unwrap();
            }
            [cell_dir, workspace]
        };
        let (done_cell, running_cell) = (folder("te-1__p"), folder("te-2__p"));
        let live = Arc::new(Counts(Mutex::new(Vec::new())));
        let folders = [
            (("gate-candidate".to_string(), "te-1__p".to_string()), done_cell.clone()),
            (("gate-candidate".to_string(), "te-2__p".to_string()), running_cell.clone()),
        ]
        .into_iter()
        .collect();
        let progress = TestProgress { live: live.clone(), folders };
        let summary =
            CellSummary { run_id: "gate-candidate".into(), cell_id: "te-1__p".into(), ..CellSummary::default() };
        progress.event(EngineEvent::CellFinished { summary: &summary, done: 1, total: 2 });
        assert!(done_cell.iter().all(|d| !d.exists()), "the finished cell's folder and workspace are gone");
        assert!(running_cell.iter().all(|d| d.exists()), "a running cell keeps its own");
        assert_eq!(*live.0.lock().unwrap(), vec![(1, 2)]);
    }
}
