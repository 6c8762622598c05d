//! `gate::run`: the order of the gate's work. One function per step; the arithmetic is in
//! [`super::steps`], the cells run through [`super::cells`], and every word shown to people is
//! an event for the sink ([`super::event`]).
//!
//! Order of work, and why: everything that can be a usage error (config, benchmark, profile,
//! agent spec, lock, git) is resolved before Step 0, so a bad setup exits 2 and never looks
//! like a failed gate (exit 1). Step 0 (file guard and state protection) runs before any cell.
//! Step 2 runs even when Step 1 failed, so the loop learns both numbers; Step 3 only when both
//! passed. A step whose cells are mostly infrastructure errors (harness, provider, timeout,
//! missing; more than `max_unmeasured`) stops the gate with "unmeasured" ([`Stop::Unmeasured`]):
//! a candidate nobody measured must be neither committed nor reverted. State is written only by a passing gate, at the very end: the pending
//! record that `hcbench record` consumes, which also carries the regression set's update
//! (promotions, last results): `record` applies it, so an unrecorded candidate changes nothing. Test-split
//! cells run in a private directory outside the project and only aggregates leave it, so the
//! optimizing agent never learns which test case failed. Ctrl-C stops the gate between or
//! during steps without writing anything ([`Stop::Interrupted`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use git2::Oid;

use super::cells::{Arm, Runner};
use super::config::{Config, Mode};
use super::event::{
    Failure, FileGuard, FullBenchmark, GateEvent, GateOutcome, GateSink, Guard, Note, PromotionStep, RunInfo, Scores,
    StepResult, StepStart, UnmeasuredStep, Verdict,
};
use super::git::Git;
use super::snapshot::{self, Snapshot};
use super::state::{
    self, GateFiles, GateState, PENDING, PendingRecord, Recovery, RegressionSet, ResultsRow, SetUpdate,
};
use super::steps::{self, Coverage, RegressionVerdict};
use super::{GateError, candidate_spec, private_dir, sweep_private_dirs, trust};
use crate::agent::spec::AgentSpec;
use crate::bench::Benchmark;
use crate::lock::FileLock;
use crate::model::Profile;
use crate::model::registry::Profiles;
use crate::model::scripted::Script;
use crate::replay::CellSummary;

/// What one gate runs with: every default applied, every flag and config value combined.
#[derive(Debug)]
pub(crate) struct GateSettings {
    pub root: PathBuf,
    pub config: Config,
    /// The profile under test, or why it does not load. Which of the two that is, the
    /// candidate's fault (exit 1) or the setup's (exit 2), is decided after the lock is taken.
    pub profile: Result<Profile, String>,
    /// Every profile the config may name, to resolve HEAD's version of the profile in paired
    /// mode.
    pub profiles: Profiles,
    pub jobs: usize,
    /// How long to wait for the workspace lock.
    pub wait: Duration,
    /// State files a human changed on purpose (`--accept-state-change`).
    pub accept_state_change: Vec<String>,
    /// `--restore-state` or `--accept-state-reset`: a human recovers state that disagrees with
    /// its anchor in git.
    pub recover_state: Option<Recovery>,
    /// The human's overrides of [`super::trust`]: a `--config` other than the project's, a
    /// changed profile definition, commits outside the allowlist since the last record.
    pub accept_config: bool,
    pub accept_profile_change: bool,
    pub accept_history: bool,
    /// Cases of the benchmark `hcbench trend` quarantined (`--quarantine FILE`): flaky under
    /// the oracle, so left out of Steps 1 and 3. Step 2 keeps them: its score must stay
    /// comparable with the best recorded in results.tsv.
    pub quarantine: BTreeSet<String>,
    /// Where every cell's commands run.
    pub isolation: crate::sandbox::Isolation,
}

/// Runs the gate: Steps 0 to 3, then the verdict. Returns the outcome (also the sink's last
/// event); an error means hcbench could not judge the candidate at all.
pub(crate) fn run(settings: &GateSettings, sink: &mut dyn GateSink) -> Result<GateOutcome, GateError> {
    let cfg = &settings.config;
    let files = GateFiles::new(&settings.root, &cfg.path);
    let _lock = FileLock::acquire(&files.lock_path(), "gate", settings.wait, |holder| {
        sink.event(&GateEvent::WaitingForLock { holder })
    })?;
    let mut state = match settings.recover_state {
        Some(how) => {
            let (state, done) = files.recover(how)?;
            sink.event(&GateEvent::StateRecovered(&done));
            state
        }
        None => files.load_state()?,
    };
    for f in &settings.accept_state_change {
        let (file, sha) = files.accept(&mut state, f, "hcbench gate --accept-state-change")?;
        sink.event(&GateEvent::Accepted { file: &file, sha256: sha.as_deref() });
    }
    if let Some(a) = trust::accept_config(&files, &mut state, cfg, settings.accept_config, "hcbench gate")? {
        sink.event(&GateEvent::Note(Note::Accepted { what: &a.0 }));
    }
    let setup = Setup::resolve(settings)?;
    let run_id = crate::rundir::new_run_id();
    sink.event(&GateEvent::Started(&RunInfo {
        run_id: &run_id,
        config: cfg,
        benchmark: &setup.bench.name,
        profile: setup.profile.name(),
        profile_digest: &setup.profile.definition.digest,
        agent_spec: &setup.spec.digest,
        spec_found: setup.spec.dir.is_some(),
        spec_loads: setup.spec_loads,
        jobs: settings.jobs,
    }));
    if !cfg.found {
        sink.event(&GateEvent::Note(Note::ConfigNotFound { path: &cfg.path }));
    }
    if setup.swept > 0 {
        sink.event(&GateEvent::Note(Note::SweptPrivateDirs(setup.swept)));
    }

    let mut gate = Gate { settings, cfg, files, state, setup, run_id, sink, scores: None };
    let verdict = match gate.steps() {
        Ok(v) => v,
        Err(Stop::Interrupted) => Verdict::Interrupted,
        Err(Stop::Unmeasured(u)) => {
            gate.sink.event(&GateEvent::StepFinished(&StepResult::Unmeasured(u.clone())));
            Verdict::Unmeasured(u)
        }
        Err(Stop::Error(e)) => return Err(e),
    };
    let outcome = GateOutcome { verdict, scores: gate.scores };
    gate.sink.event(&GateEvent::Finished(&outcome));
    Ok(outcome)
}

/// Why the steps stopped early: Ctrl-C, or a step whose cells were mostly infrastructure
/// errors (each a verdict of its own, nothing written), or an error.
enum Stop {
    Interrupted,
    Unmeasured(UnmeasuredStep),
    Error(GateError),
}

impl<E: Into<GateError>> From<E> for Stop {
    fn from(e: E) -> Stop {
        Stop::Error(e.into())
    }
}

/// Everything the steps need, resolved before Step 0.
struct Setup {
    bench: Benchmark,
    /// The benchmark's train cases (Steps 1 and 3).
    train_ids: BTreeSet<String>,
    /// The benchmark's test cases (Step 2), in benchmark order.
    test_ids: Vec<String>,
    spec: Arc<AgentSpec>,
    profile: Profile,
    /// Why the candidate does not load (Step 0 fails with it); `spec` and `profile` are then
    /// stand-ins that are never run.
    candidate_error: Option<String>,
    /// agent.yaml loaded (a failing `scripted:` script is also a candidate error, not this).
    spec_loads: bool,
    git: Option<Git>,
    /// HEAD when the project is in git (the file guard and `record` compare against it).
    head: Option<Oid>,
    /// What every cell runs from; the candidate's blob ids are the pending record's binding.
    snapshot: Snapshot,
    /// Private directories of killed gates removed now.
    swept: usize,
}

impl Setup {
    fn resolve(settings: &GateSettings) -> Result<Setup, GateError> {
        let (root, cfg) = (settings.root.as_path(), &settings.config);
        let git = Git::open(root)?;
        let head = match &git {
            Some(g) => Some(g.head()?.ok_or_else(|| {
                GateError::Setup(format!(
                    "the git repository at {} has no commit yet; commit the project first (the file guard and `record` compare against HEAD)",
                    g.workdir().display()
                ))
            })?),
            None => None,
        };
        // Every cell runs from this snapshot, taken once: HEAD's benchmark and fixtures plus
        // the candidate's allowlisted files (super::snapshot says why).
        let committed = git.as_ref().zip(head);
        let read = snapshot::read_by_cells(cfg);
        let snapshot = Snapshot::take(root, committed, &read, &|p: &str| cfg.allowlist.allows(p))?;
        let bench = snapshot.benchmark(&cfg.benchmark)?;
        let ids_of = |split| bench.cases.iter().filter(move |c| c.split == split).map(|c| c.id.clone());
        // Quarantined cases are never promotion candidates (Step 3 reads `train_ids`).
        let train_ids: BTreeSet<String> =
            ids_of(cfg.train_split).filter(|c| !settings.quarantine.contains(c)).collect();
        let test_ids: Vec<String> = ids_of(cfg.test_split).collect();
        if test_ids.is_empty() {
            return Err(GateError::Setup(format!(
                "benchmark `{}` has no case in split `{}` (test_split in {}); Step 2 would judge nothing",
                bench.name,
                cfg.test_split,
                cfg.path.display()
            )));
        }
        // A candidate that does not load is the candidate's failure (exit 1: revert it), not a
        // broken setup: its files are the ones the loop edits. Outside the allowlist it is exit 2.
        let mut candidate_error = None;
        let spec = match snapshot.spec(&cfg.agent_dir) {
            Ok(s) => s,
            Err(e) if cfg.allowlist.allows(&format!("{}/agent.yaml", cfg.agent_dir)) => {
                candidate_error = Some(e.to_string());
                AgentSpec::default()
            }
            Err(e) => return Err(e.into()),
        };
        // Before the script is loaded: a script that fails is not agent.yaml failing.
        let spec_loads = candidate_error.is_none();
        let profile = match snapshot.profile(cfg, &settings.profiles).unwrap_or_else(|| settings.profile.clone()) {
            Ok(p) => p,
            Err(e) if script_in_allowlist(cfg) => {
                candidate_error.get_or_insert(e.clone());
                Profile::scripted("candidate", Script::nop())
            }
            Err(e) => return Err(GateError::Setup(e.clone())),
        };
        if cfg.mode == Mode::Paired && head.is_none() {
            return Err(GateError::Setup(format!(
                "gate.mode `paired` compares the candidate with HEAD, but {} is not in a git repository; use `simple` or run it in a repository",
                root.display()
            )));
        }
        let swept = sweep_private_dirs();
        Ok(Setup {
            bench,
            train_ids,
            test_ids,
            spec: Arc::new(spec),
            profile,
            candidate_error,
            spec_loads,
            git,
            head,
            snapshot,
            swept,
        })
    }
}

/// True when the profile is a `scripted:PATH` whose script the loop may edit (so it is part of
/// the candidate).
fn script_in_allowlist(cfg: &Config) -> bool {
    super::snapshot::script_path(&cfg.profile).is_some_and(|rel| cfg.allowlist.allows(&rel))
}

/// One gate run in progress.
struct Gate<'a> {
    settings: &'a GateSettings,
    cfg: &'a Config,
    files: GateFiles,
    state: GateState,
    setup: Setup,
    run_id: String,
    sink: &'a mut dyn GateSink,
    /// Step 2's score and Step 1's counts, once Step 2 has run.
    scores: Option<Scores>,
}

impl Gate<'_> {
    fn emit(&mut self, event: GateEvent<'_>) {
        self.sink.event(&event);
    }

    fn allows(&self, rel: &str) -> bool {
        self.cfg.allowlist.allows(rel)
    }

    fn steps(&mut self) -> Result<Verdict, Stop> {
        let step0 = self.file_guard()?;
        if !step0.is_empty() {
            return Ok(Verdict::Failed(step0));
        }
        // The state as hcbench wrote it; a file that does not parse is a usage error (exit 2).
        let on_disk = self.files.read_regression_set()?;
        let set = on_disk.clone().unwrap_or_else(|| RegressionSet::new(self.cfg.threshold));
        if on_disk.is_some() && set.threshold != self.cfg.threshold {
            self.emit(GateEvent::Note(Note::SetThreshold { set: set.threshold, config: self.cfg.threshold }));
        }
        let rows = self.files.read_results()?;
        let train_results = self.files.read_train_results()?;
        self.trust_before_cells(&rows)?;
        let runner = Runner::start(
            &self.settings.root,
            &self.run_id,
            self.settings.jobs,
            self.settings.isolation.clone(),
            self.sink.live(),
        )?;
        runner.protect(self.setup.snapshot.root());
        let gate_dir = self.files.workspace().join("gate").join(&self.run_id);

        let quarantined: Vec<String> = self.settings.quarantine.iter().cloned().collect();
        if !quarantined.is_empty() {
            self.emit(GateEvent::Note(Note::Quarantined { cases: &quarantined }));
        }
        let mut judged = set.clone();
        judged.cases.retain(|c| !self.settings.quarantine.contains(c));
        let step1 = self.regression_set(&runner, &judged, &gate_dir)?;
        let (step2, candidate_files) = self.full_benchmark(&runner, &rows)?;
        let (evals_passed, evals_total) = step1.as_ref().map_or((0, 0), |v| (v.passed, v.cases));
        self.scores = Some(Scores { val_score: step2.val_score(), evals_passed, evals_total });

        // The quarantined cases stay in the set (they return once they are fixed); they are not
        // judged while flaky.
        let mut next = set.clone();
        if let Some(v) = &step1 {
            next.last_results.extend(v.scores.clone());
        }
        let step1_pass = step1.as_ref().is_none_or(|v| v.pass);
        if !(step1_pass && step2.passed()) {
            let reason = match (step1_pass, step2.passed()) {
                (false, false) => "Steps 1 and 2 failed",
                (false, true) => "Step 1 failed",
                _ => "Step 2 failed",
            };
            self.emit(GateEvent::StepFinished(&StepResult::Promotion(PromotionStep::Skipped { reason })));
            let mut failures: Vec<Failure> =
                step1.filter(|v| !v.pass).map(Failure::RegressionSet).into_iter().collect();
            if !step2.passed() {
                failures.push(Failure::FullBenchmark(step2));
            }
            return Ok(Verdict::Failed(failures));
        }
        self.promotion(&runner, &mut next, train_results, &gate_dir)?;
        if runner.is_cancelled() {
            return Err(Stop::Interrupted);
        }
        self.write_state(SetUpdate::between(&set, &next), candidate_files)?;
        Ok(Verdict::Passed)
    }

    /// Step 0: the file guard, the state protection and whether the candidate loads. Returns
    /// its failures (none: passed).
    fn file_guard(&mut self) -> Result<Vec<Failure>, GateError> {
        self.emit(GateEvent::StepStarted(StepStart::FileGuard));
        let mut violations = Vec::new();
        let mut repo_root = None;
        let guard = match &self.setup.git {
            _ if !self.cfg.file_guard => Guard::Disabled { config: self.cfg.path.clone() },
            Some(g) => {
                for c in g.changes()? {
                    match g.root_rel(&c.path) {
                        // hcbench's own state; protected by hashes below.
                        Some(rel) if rel == "workspace" || rel.starts_with("workspace/") => {}
                        Some(rel) if self.allows(&rel) => {}
                        _ => violations.push(c),
                    }
                }
                if !g.root_is_workdir() {
                    repo_root = Some(g.workdir().to_path_buf());
                }
                Guard::Checked
            }
            None => Guard::NoGit { root: self.settings.root.clone() },
        };
        let (tampered, newly_protected) = self.files.check(&mut self.state)?;
        let result = FileGuard {
            guard,
            allowlist: self.cfg.allowlist.describe(),
            violations,
            repo_root,
            tampered,
            newly_protected,
            candidate_error: self.setup.candidate_error.clone(),
        };
        let mut failures = Vec::new();
        if !result.violations.is_empty() {
            failures.push(Failure::FileGuard { files: result.violations.len() });
        }
        failures.extend(result.tampered.iter().cloned().map(Failure::StateProtection));
        failures.extend(result.candidate_error.clone().map(Failure::Candidate));
        self.emit(GateEvent::StepFinished(&StepResult::FileGuard(result)));
        Ok(failures)
    }

    /// Step 1: the regression set's cases, on the train split. None: the set is empty.
    fn regression_set(
        &mut self,
        runner: &Runner,
        set: &RegressionSet,
        gate_dir: &Path,
    ) -> Result<Option<RegressionVerdict>, Stop> {
        if set.cases.is_empty() {
            self.emit(GateEvent::StepFinished(&StepResult::RegressionSet(None)));
            return Ok(None);
        }
        let train = &self.setup.train_ids;
        let (runnable, missing): (Vec<String>, Vec<String>) =
            set.cases.iter().cloned().partition(|c| train.contains(c));
        let (epochs, bench) = (self.cfg.epochs, &self.setup.bench);
        self.sink.event(&GateEvent::StepStarted(StepStart::RegressionSet {
            cases: set.cases.len(),
            epochs,
            threshold: set.threshold,
            missing: &missing,
            train_split: self.cfg.train_split,
            benchmark: &bench.name,
        }));
        let summaries = if runnable.is_empty() {
            Vec::new()
        } else {
            let (profile, spec) = (&self.setup.profile, &self.setup.spec);
            runner
                .run_train(&gate_dir.join("suite"), bench, &runnable, profile, spec, epochs)?
                .ok_or(Stop::Interrupted)?
        };
        // Train case ids may be shown: the examples name the cells and why they did not run.
        self.check_measured(
            1,
            vec![("candidate", steps::coverage(&summaries, runnable.len() * epochs as usize, true))],
        )?;
        let (scores, reasons) = (steps::case_scores(&summaries, epochs), steps::case_reasons(&summaries, epochs));
        let verdict = steps::judge_regression_set(&set.cases, &scores, &reasons, &missing, set.threshold);
        self.emit(GateEvent::StepFinished(&StepResult::RegressionSet(Some(verdict.clone()))));
        Ok(Some(verdict))
    }

    /// Step 2: the test split in the private directory, which is gone when this returns.
    /// Returns the measurement and the candidate's allowlisted files (path -> blob id).
    fn full_benchmark(
        &mut self,
        runner: &Runner,
        rows: &[ResultsRow],
    ) -> Result<(FullBenchmark, BTreeMap<String, String>), Stop> {
        let candidate_files = self.setup.snapshot.candidate().clone();
        let private = private_dir(&self.settings.root).map_err(|source| GateError::Io {
            context: "cannot create the private directory for test-split cells".into(),
            source,
        })?;
        runner.protect(private.path());
        let result = match self.cfg.mode {
            Mode::Simple => self.simple(runner, private.path(), rows),
            Mode::Paired => self.paired(runner, private.path(), &candidate_files),
        };
        if let Ok(r) = &result {
            self.emit(GateEvent::StepFinished(&StepResult::FullBenchmark(r.clone())));
        }
        // Test-split cells leave nothing behind: the private directory goes now, not at exit,
        // whether the step judged, stopped unmeasured or failed.
        runner.unprotect(private.path());
        let closed = private.close();
        let result = result?;
        closed.map_err(|source| GateError::Io {
            context: "cannot remove the private directory of the test-split cells".into(),
            source,
        })?;
        Ok((result, candidate_files))
    }

    fn start_full_benchmark(&mut self, paired_with: Option<&str>) {
        let (test_split, cases, epochs) = (self.cfg.test_split, self.setup.test_ids.len(), self.cfg.epochs);
        self.emit(GateEvent::StepStarted(StepStart::FullBenchmark { test_split, cases, epochs, paired_with }));
    }

    /// The test split for each arm, in the private directory; each arm's summaries, in arm order.
    fn run_arms(&self, runner: &Runner, private: &Path, arms: &[Arm]) -> Result<Vec<Vec<CellSummary>>, Stop> {
        let (bench, ids, epochs) = (&self.setup.bench, &self.setup.test_ids, self.cfg.epochs);
        runner.run_private(private, bench, ids, arms, epochs)?.ok_or(Stop::Interrupted)
    }

    /// Cells Step 2 plans per arm: every test case, every epoch.
    fn planned(&self) -> usize {
        self.setup.test_ids.len() * self.cfg.epochs as usize
    }

    /// Stops the gate when an arm left more than `max_unmeasured` of its planned cells
    /// unmeasured: a score made of infrastructure errors says nothing about the candidate.
    fn check_measured(&self, step: u8, arms: Vec<(&'static str, Coverage)>) -> Result<(), Stop> {
        let max_unmeasured = self.cfg.max_unmeasured;
        if arms.iter().any(|(_, c)| c.exceeds(max_unmeasured)) {
            return Err(Stop::Unmeasured(UnmeasuredStep { step, arms, max_unmeasured }));
        }
        Ok(())
    }

    /// Step 2's counts for one arm: no examples, the test split is private.
    fn test_coverage(&self, cells: &[CellSummary]) -> Coverage {
        steps::coverage(cells, self.planned(), false)
    }

    /// Mean reward over the planned cells of one arm (a missing or errored cell counts 0).
    fn val_score(&self, cells: &[CellSummary]) -> f64 {
        steps::val_score(&cells.iter().map(steps::cell_reward).collect::<Vec<_>>(), self.planned())
    }

    /// Simple mode: the candidate's val_score against the best recorded one.
    fn simple(&mut self, runner: &Runner, private: &Path, rows: &[ResultsRow]) -> Result<FullBenchmark, Stop> {
        self.start_full_benchmark(None);
        let arm = Arm::new(&self.run_id, "candidate", private, &self.setup.profile, self.setup.spec.clone());
        let cells = self.run_arms(runner, private, &[arm])?.remove(0);
        self.check_measured(2, vec![("candidate", self.test_coverage(&cells))])?;
        let val_score = self.val_score(&cells);
        let best = steps::best(rows);
        let planned = self.planned();
        Ok(FullBenchmark::Simple {
            val_score,
            best,
            pass: steps::benchmark_passes(val_score, best),
            cases: self.setup.test_ids.len(),
            cells: planned,
            no_verdict: planned - cells.iter().filter(|c| c.outcome.is_some_and(|o| o.is_verdict())).count(),
        })
    }

    /// Paired mode: the candidate against HEAD's version of the allowlisted files, same cases
    /// and epochs, judged by the paired test of `stats` ([`steps::judge_paired`]).
    fn paired(
        &mut self,
        runner: &Runner,
        private: &Path,
        candidate_files: &BTreeMap<String, String>,
    ) -> Result<FullBenchmark, Stop> {
        let head = self.setup.head.expect("paired mode checked HEAD");
        self.start_full_benchmark(Some(&head.to_string()));
        let g = self.setup.git.as_ref().expect("paired mode checked git");
        let head_files = g.files_at(head, &|p: &str| self.allows(p))?;
        let (run_id, spec) = (&self.run_id, &self.setup.spec);
        let candidate = Arm::new(run_id, "candidate", private, &self.setup.profile, spec.clone());
        let (planned, cases, margin) = (self.planned(), self.setup.test_ids.len(), self.cfg.margin);
        if head_files == *candidate_files {
            self.emit(GateEvent::Note(Note::IdenticalToHead));
            let cells = self.run_arms(runner, private, &[candidate])?.remove(0);
            self.check_measured(2, vec![("candidate", self.test_coverage(&cells))])?;
            let val_score = self.val_score(&cells);
            return Ok(FullBenchmark::Paired {
                val_score,
                head_score: val_score,
                comparison: None,
                margin,
                pass: true,
                cases,
                cells: planned,
                head: None,
            });
        }
        let head_dir = private.join("head-files");
        let agent_dir = format!("{}/", self.cfg.agent_dir);
        g.extract(head, &|p: &str| self.allows(p) || p.starts_with(&agent_dir), &head_dir)?;
        let head_spec = Arc::new(candidate_spec(&head_dir, &self.cfg.agent_dir)?);
        let head_arm = Arm::new(
            run_id,
            "head",
            private,
            &head_profile(self.cfg, &head_dir, &self.setup.profile, &self.settings.profiles)?,
            head_spec,
        );
        let by_arm = self.run_arms(runner, private, &[candidate, head_arm])?;
        self.check_measured(
            2,
            vec![("candidate", self.test_coverage(&by_arm[0])), ("HEAD", self.test_coverage(&by_arm[1]))],
        )?;
        // The comparison uses only cells with a verdict (an infrastructure error is missing
        // data there), while each arm's val_score still counts such cells 0.
        let (cand, head_rewards) = (steps::measured_rewards(&by_arm[0]), steps::measured_rewards(&by_arm[1]));
        let v = steps::judge_paired(&self.setup.test_ids, &cand, &head_rewards, margin);
        Ok(FullBenchmark::Paired {
            val_score: self.val_score(&by_arm[0]),
            head_score: self.val_score(&by_arm[1]),
            comparison: Some(v.comparison),
            margin,
            pass: v.pass,
            cases,
            cells: planned,
            head: Some(head.to_string()),
        })
    }

    /// Step 3: failing train cases re-run; those passing (often enough) join `next`.
    fn promotion(
        &mut self,
        runner: &Runner,
        next: &mut RegressionSet,
        train_results: Option<state::TrainResults>,
        gate_dir: &Path,
    ) -> Result<(), Stop> {
        self.emit(GateEvent::StepStarted(StepStart::Promotion));
        let train_results = match train_results {
            Some(t) => Some(self.trusted_train_results(t)?),
            None => None,
        };
        let bench = &self.setup.bench;
        let result = match train_results {
            None => PromotionStep::NoTrainResults,
            Some(t) if t.benchmark != bench.name => {
                PromotionStep::OtherBenchmark { found: t.benchmark, expected: bench.name.clone() }
            }
            Some(t) => {
                let candidates = steps::promotion_candidates(&t, next, &self.setup.train_ids);
                if candidates.is_empty() {
                    PromotionStep::NoCandidates
                } else {
                    self.sink.event(&GateEvent::Note(Note::Rerunning { candidates: &candidates }));
                    let (profile, spec, epochs) = (&self.setup.profile, &self.setup.spec, self.cfg.epochs);
                    let summaries = runner
                        .run_train(&gate_dir.join("promotion"), bench, &candidates, profile, spec, epochs)?
                        .ok_or(Stop::Interrupted)?;
                    let scores = steps::case_scores(&summaries, epochs);
                    let needed = self.cfg.promotion_passes;
                    let reasons = steps::case_reasons(&summaries, epochs);
                    let result = steps::promote(next, &scores, &reasons, &candidates, needed);
                    PromotionStep::Ran { candidates, result, needed }
                }
            }
        };
        self.emit(GateEvent::StepFinished(&StepResult::Promotion(result)));
        Ok(())
    }

    /// The profile's definition and the history since the last record, checked before any
    /// cell runs ([`trust::check_before_cells`]); a refusal is a usage error (exit 2).
    fn trust_before_cells(&mut self, rows: &[ResultsRow]) -> Result<(), GateError> {
        let s = self.settings;
        let inputs = trust::BeforeCells {
            files: &self.files,
            cfg: self.cfg,
            profile: &self.setup.profile,
            rows,
            git: self.setup.git.as_ref(),
            head: self.setup.head,
            accept_profile_change: s.accept_profile_change,
            accept_history: s.accept_history,
        };
        for a in trust::check_before_cells(&inputs, &mut self.state)? {
            self.emit(GateEvent::Note(Note::Accepted { what: &a.0 }));
        }
        Ok(())
    }

    /// Step 3's train results, with the entries of another profile or agent spec marked
    /// unknown ([`trust::trusted_train_results`]).
    fn trusted_train_results(&mut self, t: state::TrainResults) -> Result<state::TrainResults, GateError> {
        let head_spec = match (&self.setup.git, self.setup.head) {
            (Some(g), Some(head)) => trust::head_spec_digest(g, head, &self.cfg.agent_dir)?,
            _ => None,
        };
        let specs: Vec<&str> =
            [Some(self.setup.spec.digest.as_str()), head_spec.as_deref()].into_iter().flatten().collect();
        let (t, stale) = trust::trusted_train_results(t, &self.setup.profile, &specs);
        if let Some(st) = stale {
            let profile = &self.cfg.profile;
            self.emit(GateEvent::Note(Note::StaleTrainResults {
                cases: st.cases.len(),
                example: &st.example,
                profile,
            }));
        }
        Ok(t)
    }

    /// A passing gate's only write: the pending record, with the regression set's update that
    /// `record` applies.
    fn write_state(&mut self, regression_set: SetUpdate, candidate: BTreeMap<String, String>) -> Result<(), GateError> {
        let scores = self.scores.expect("Step 2 ran");
        let pending = PendingRecord {
            schema_version: state::STATE_SCHEMA_VERSION,
            created_at: crate::util::now_rfc3339(),
            gate_run_id: self.run_id.clone(),
            benchmark: self.setup.bench.name.clone(),
            profile: self.setup.profile.name().to_string(),
            mode: self.cfg.mode.as_str().to_string(),
            head: self.setup.head.map(|h| h.to_string()),
            agent_dir: self.cfg.agent_dir.clone(),
            agent_spec: self.setup.spec.digest.clone(),
            profile_digest: Some(self.setup.profile.definition.digest.clone()),
            candidate,
            config_sha256: self.files.config_sha()?,
            val_score: scores.val_score,
            evals_passed: scores.evals_passed as u64,
            evals_total: scores.evals_total as u64,
            regression_set,
        };
        self.files.write_protected(&mut self.state, PENDING, &state::to_json(&pending))?;
        Ok(())
    }
}

/// HEAD's version of the profile: a `scripted:PATH` profile whose script is allowlisted is part
/// of the candidate, so the HEAD arm replays HEAD's copy of the script. Other profiles are the
/// same model for both arms.
fn head_profile(cfg: &Config, head_dir: &Path, profile: &Profile, profiles: &Profiles) -> Result<Profile, GateError> {
    let Some(rel) = super::snapshot::script_path(&cfg.profile) else { return Ok(profile.clone()) };
    if !cfg.allowlist.allows(&rel) {
        return Ok(profile.clone());
    }
    if !head_dir.join(&rel).is_file() {
        return Err(GateError::Setup(format!(
            "paired mode runs HEAD's version of the candidate, but HEAD has no {rel} (the script of profile `{}`); commit a first version of it",
            cfg.profile
        )));
    }
    Ok(profiles.resolve_at(&cfg.profile, head_dir)?)
}
