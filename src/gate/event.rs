//! What the gate tells its sinks: typed events, one per thing a person or a program learns.
//!
//! The gate ([`super::run`]) never prints. It emits [`GateEvent`]s in order to one
//! [`GateSink`]; the text output (`[gate] ...` lines) and the `--format json` object are two
//! sinks of the same events ([`super::report`]), so they cannot tell different stories. Each
//! step's result is one typed value ([`StepResult`]) from which both the lines and the JSON
//! `detail` are rendered; the verdict ([`GateOutcome`]) carries the failures as values, and the
//! `[gate] FAILED: ...` lines are rendered from them once.
//!
//! Progress while cells run comes from the engine's worker threads, not the gate's thread, so
//! it goes to a separate, thread-safe [`LiveSink`]. Test-split progress is a count by type
//! ([`LiveEvent::TestCells`]): no sink can show which test case passed or failed.

use std::path::Path;
use std::sync::Arc;

use super::config::Config;
use super::git::Change;
use super::state::{PENDING, Recovered, Tamper};
use super::steps::{Coverage, Promotion, RegressionVerdict};
use crate::bench::Split;
use crate::exit;
use crate::replay::CellSummary;
use crate::stats::Paired;

/// Receives the gate's events, in order, on the gate's thread.
pub(crate) trait GateSink {
    fn event(&mut self, event: &GateEvent<'_>);
    /// Where progress goes while cells run (called from the engine's threads).
    fn live(&self) -> Arc<dyn LiveSink>;
}

/// Receives progress while cells run, from any thread.
pub(crate) trait LiveSink: Send + Sync {
    fn live(&self, event: LiveEvent<'_>);
}

#[derive(Debug)]
pub(crate) enum LiveEvent<'a> {
    /// A train cell finished: train case ids may be shown.
    TrainCell { summary: &'a CellSummary, done: usize, total: usize },
    /// Test cells finished so far: a count only, never an id.
    TestCells { done: usize, total: usize },
    /// The first Ctrl-C: running cells are stopping; a second one stops at once.
    Interrupted,
}

#[derive(Debug)]
pub(crate) enum GateEvent<'a> {
    /// Another gate or record holds the workspace lock, and the gate waits (`--wait`).
    WaitingForLock {
        holder: &'a str,
    },
    /// `--accept-state-change`: the file's current hash (None: its deletion) is now legitimate.
    Accepted {
        file: &'a str,
        sha256: Option<&'a str>,
    },
    /// `--restore-state` or `--accept-state-reset` recovered the gate's state.
    StateRecovered(&'a Recovered),
    /// Everything that could be a usage error is resolved; the steps start.
    Started(&'a RunInfo<'a>),
    Note(Note<'a>),
    /// A step begins (printed before its cells' progress).
    StepStarted(StepStart<'a>),
    StepFinished(&'a StepResult),
    /// The last event.
    Finished(&'a GateOutcome),
}

/// What the gate runs, as resolved.
#[derive(Debug)]
pub(crate) struct RunInfo<'a> {
    pub run_id: &'a str,
    pub config: &'a Config,
    /// The benchmark's name (from its benchmark.yaml).
    pub benchmark: &'a str,
    pub profile: &'a str,
    /// Digest of the profile's definition (what the name resolved to).
    pub profile_digest: &'a str,
    /// Digest of the candidate's agent spec.
    pub agent_spec: &'a str,
    /// False when `agent_dir` has no agent.yaml and the embedded default runs.
    pub spec_found: bool,
    /// False when `agent_dir/agent.yaml` exists but does not load (Step 0 fails with why).
    pub spec_loads: bool,
    pub jobs: usize,
}

#[derive(Debug)]
pub(crate) enum Note<'a> {
    /// The default config file does not exist: every default applies.
    ConfigNotFound { path: &'a Path },
    /// Private directories of killed gates were removed.
    SweptPrivateDirs(usize),
    /// Step 1 uses the regression set's own threshold, not the config's.
    SetThreshold { set: f64, config: f64 },
    /// Paired mode: the candidate's allowlisted files equal HEAD's, so only the candidate runs.
    IdenticalToHead,
    /// Step 3 re-runs these failing train cases.
    Rerunning { candidates: &'a [String] },
    /// `--quarantine`: these cases are left out of Steps 1 and 3.
    Quarantined { cases: &'a [String] },
    /// A human's override (`--accept-config`, `--accept-profile-change`, `--accept-history`)
    /// was logged in the audit log.
    Accepted { what: &'a str },
    /// Step 3 does not trust these train results (another profile, definition or agent spec
    /// wrote them) and re-runs their cases.
    StaleTrainResults { cases: usize, example: &'a str, profile: &'a str },
}

/// The start of a step that runs cells (Steps 0 and 3 start without details).
#[derive(Debug)]
pub(crate) enum StepStart<'a> {
    FileGuard,
    RegressionSet {
        cases: usize,
        epochs: u32,
        threshold: f64,
        /// Cases of the set that are not train cases of the benchmark (they count as failures).
        missing: &'a [String],
        train_split: Split,
        benchmark: &'a str,
    },
    FullBenchmark {
        test_split: Split,
        cases: usize,
        epochs: u32,
        /// Paired mode: HEAD's commit id.
        paired_with: Option<&'a str>,
    },
    Promotion,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Status {
    Passed,
    Failed,
    Skipped,
    NotRun,
    /// Too many of the step's cells ended without a measurement: the gate stopped there.
    Unmeasured,
}

/// Names of the steps, by number, as the JSON object and the failure lines spell them.
pub(crate) const STEP_NAMES: [&str; 4] = ["file guard", "regression set", "full benchmark", "promotion"];

/// One step's result: everything both sinks show about it.
#[derive(Debug, Clone)]
pub(crate) enum StepResult {
    FileGuard(FileGuard),
    /// None: the regression set is empty (skipped, counts as passed).
    RegressionSet(Option<RegressionVerdict>),
    FullBenchmark(FullBenchmark),
    Promotion(PromotionStep),
    /// Step 1 or 2 measured too little to judge; the gate stops after it.
    Unmeasured(UnmeasuredStep),
}

impl StepResult {
    pub(crate) fn number(&self) -> u8 {
        match self {
            StepResult::FileGuard(_) => 0,
            StepResult::RegressionSet(_) => 1,
            StepResult::FullBenchmark(_) => 2,
            StepResult::Promotion(_) => 3,
            StepResult::Unmeasured(u) => u.step,
        }
    }

    pub(crate) fn status(&self) -> Status {
        let pass = |p: bool| if p { Status::Passed } else { Status::Failed };
        match self {
            StepResult::FileGuard(g) => pass(g.passed()),
            StepResult::RegressionSet(None) => Status::Skipped,
            StepResult::RegressionSet(Some(v)) => pass(v.pass),
            StepResult::FullBenchmark(b) => pass(b.passed()),
            StepResult::Promotion(PromotionStep::Skipped { .. }) => Status::Skipped,
            StepResult::Promotion(_) => Status::Passed,
            StepResult::Unmeasured(_) => Status::Unmeasured,
        }
    }
}

/// Step 0: the file guard, the state protection and whether the candidate loads.
#[derive(Debug, Clone)]
pub(crate) struct FileGuard {
    pub guard: Guard,
    /// The allowlist, as shown to people.
    pub allowlist: String,
    /// Changed paths outside the allowlist, relative to the repository's work tree.
    pub violations: Vec<Change>,
    /// The repository's work tree when it is not the project root (paths are relative to it).
    pub repo_root: Option<std::path::PathBuf>,
    pub tampered: Vec<Tamper>,
    /// State files seen for the first time; their hashes are now recorded.
    pub newly_protected: Vec<String>,
    /// Why the candidate (its agent spec or allowlisted script) does not load.
    pub candidate_error: Option<String>,
}

impl FileGuard {
    pub(crate) fn passed(&self) -> bool {
        self.violations.is_empty() && self.tampered.is_empty() && self.candidate_error.is_none()
    }
}

#[derive(Debug, Clone)]
pub(crate) enum Guard {
    /// `file_guard: false` in the config at this path.
    Disabled {
        config: std::path::PathBuf,
    },
    Checked,
    /// The project root is not in a git repository: the guard is skipped with a warning.
    NoGit {
        root: std::path::PathBuf,
    },
}

/// Step 2's measurement; aggregates only, never a test case id.
#[derive(Debug, Clone)]
pub(crate) enum FullBenchmark {
    Simple {
        val_score: f64,
        /// The best recorded val_score (None: nothing recorded yet).
        best: Option<f64>,
        pass: bool,
        cases: usize,
        cells: usize,
        /// Cells that produced no verdict (infrastructure errors); they count 0.
        no_verdict: usize,
    },
    Paired {
        val_score: f64,
        head_score: f64,
        /// Candidate (A) against HEAD (B) over the cases both arms measured; None when the
        /// candidate equals HEAD and only it ran (the difference is 0 by construction).
        comparison: Option<Paired>,
        margin: f64,
        pass: bool,
        cases: usize,
        cells: usize,
        /// HEAD's commit id; None when the candidate equals HEAD and only it ran.
        head: Option<String>,
    },
}

impl FullBenchmark {
    pub(crate) fn passed(&self) -> bool {
        match self {
            FullBenchmark::Simple { pass, .. } | FullBenchmark::Paired { pass, .. } => *pass,
        }
    }

    pub(crate) fn val_score(&self) -> f64 {
        match self {
            FullBenchmark::Simple { val_score, .. } | FullBenchmark::Paired { val_score, .. } => *val_score,
        }
    }
}

/// A step whose planned cells ended mostly without a measurement (harness error, provider
/// error, timeout, missing): neither a pass nor a failure of the candidate.
#[derive(Debug, Clone)]
pub(crate) struct UnmeasuredStep {
    /// 1 (regression set) or 2 (full benchmark).
    pub step: u8,
    /// Each arm's counts: one arm, or in paired mode ("candidate", "HEAD"). Step 2's carry no
    /// examples (the test split is private).
    pub arms: Vec<(&'static str, Coverage)>,
    /// `max_unmeasured` of the config.
    pub max_unmeasured: f64,
}

/// Step 3.
#[derive(Debug, Clone)]
pub(crate) enum PromotionStep {
    /// Step 1 or 2 failed.
    Skipped {
        reason: &'static str,
    },
    NoTrainResults,
    /// The train results are of benchmark `found`, not the gate's.
    OtherBenchmark {
        found: String,
        expected: String,
    },
    /// No failing train case outside the regression set.
    NoCandidates,
    Ran {
        candidates: Vec<String>,
        result: Promotion,
        /// Consecutive passing gates a case needs (`promotion_passes`).
        needed: u32,
    },
}

/// How the gate ended, and why.
#[derive(Debug, Clone)]
pub(crate) struct GateOutcome {
    pub verdict: Verdict,
    /// Step 2's score and Step 1's counts, once Step 2 has run.
    pub scores: Option<Scores>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Scores {
    pub val_score: f64,
    pub evals_passed: usize,
    pub evals_total: usize,
}

#[derive(Debug, Clone)]
pub(crate) enum Verdict {
    /// Every step passed; the regression set and the pending record were written.
    Passed,
    /// At least one step failed; nothing was written.
    Failed(Vec<Failure>),
    /// Ctrl-C; nothing was written.
    Interrupted,
    /// A step's cells were mostly infrastructure errors: the candidate was not measured, so it
    /// is neither committed nor reverted; nothing was written.
    Unmeasured(UnmeasuredStep),
}

/// One reason a gate failed, in the order the failure lines show them.
#[derive(Debug, Clone)]
pub(crate) enum Failure {
    FileGuard { files: usize },
    StateProtection(Tamper),
    Candidate(String),
    RegressionSet(RegressionVerdict),
    FullBenchmark(FullBenchmark),
}

impl Failure {
    pub(crate) fn step(&self) -> u8 {
        match self {
            Failure::FileGuard { .. } | Failure::StateProtection(_) | Failure::Candidate(_) => 0,
            Failure::RegressionSet(_) => 1,
            Failure::FullBenchmark(_) => 2,
        }
    }
}

impl GateOutcome {
    pub(crate) fn exit_code(&self) -> i32 {
        match self.verdict {
            Verdict::Passed => exit::SUCCESS,
            Verdict::Failed(_) => exit::FAILED,
            Verdict::Interrupted => exit::INTERRUPTED,
            // Not a failed gate (1): the loop must not revert a candidate nobody measured.
            Verdict::Unmeasured(_) => exit::COVERAGE_BELOW_THRESHOLD,
        }
    }

    /// The failed steps' numbers, ascending, each once.
    pub(crate) fn failed_steps(&self) -> Vec<u8> {
        let mut steps: Vec<u8> = match &self.verdict {
            Verdict::Failed(f) => f.iter().map(Failure::step).collect(),
            _ => Vec::new(),
        };
        steps.dedup();
        steps
    }

    /// The state file a passing gate leaves for `hcbench record`.
    pub(crate) fn pending_record(&self) -> Option<&'static str> {
        matches!(self.verdict, Verdict::Passed).then_some(PENDING)
    }
}
