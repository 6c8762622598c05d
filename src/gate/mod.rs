//! The commit gate of an optimization loop: `hcbench gate` and `hcbench record`.
//!
//! An outer coding agent edits the embedded agent's tunable files, runs the gate, commits on
//! exit 0 (then runs `record`) and reverts on exit 1. The gate follows auto-harness: Step 0 file
//! guard, Step 1 regression set (the train cases in `workspace/suite.json`), Step 2 full
//! benchmark on the test split, Step 3 promotion of newly passing train cases into the
//! regression set. It is hardened where auto-harness leaves holes: the state files are
//! hash-protected ([`state`]), `record` accepts only numbers that a passing gate produced for
//! the very candidate that was committed (the pending record's binding), checks every commit
//! since the last record ([`git`]), writes atomically under one lock ([`crate::lock`]), and an optional
//! paired mode measures HEAD alongside the candidate and reverts only a regression shown by the
//! paired test of [`crate::stats`], instead of one noisy comparison with a recorded best.
//!
//! How the module is laid out, and why:
//! - [`run()`] (`run.rs`) is the gate from the lock to the verdict, one function per step;
//!   [`record::run`] is `record`. Both take resolved settings (no CLI types) and a sink.
//! - They never print: they emit typed events ([`event`]); text and `--format json` are two
//!   sinks of the same events ([`report`]), so the two outputs cannot drift.
//! - [`steps`] is the arithmetic (scores, thresholds, the paired rule, promotion), plain synchronous
//!   functions; [`config`] resolves `experiment_config.yaml`; [`cells`] runs batches of cells
//!   on one [`crate::interrupt::Session`] (one Ctrl-C contract for the whole gate).
//! - Test-split cells run in a private directory ([`private_dir`]) inside the gate's private
//!   area ([`private`]: a tmpfs in a mount namespace of the gate's own, on a non-dumpable
//!   process), removed when Step 2 ends, so no trace, artifact, workspace or cached model
//!   response of a test case stays where the optimizing agent could read it.
//!
//! Words: the gate's set of train cases is the *regression set*; "suite" means a
//! `suites/<benchmark>/*.yaml` selection elsewhere. The file keeps auto-harness's name (`suite.json`) and
//! keys (`tasks`), so the data model is unchanged.

pub(crate) mod anchor;
#[cfg(test)]
mod calibration;
pub(crate) mod cells;
pub(crate) mod config;
pub(crate) mod event;
pub(crate) mod git;
pub mod private;
pub(crate) mod record;
pub(crate) mod report;
pub(crate) mod run;
pub(crate) mod snapshot;
pub(crate) mod state;
pub(crate) mod steps;
pub(crate) mod trust;

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::agent::spec::{AgentSpec, SpecError};
use crate::lock::{FileLock, LockError};
use crate::replay::CellSummary;
use crate::rundir::{Manifest, RunDirError};
use crate::trace::event::Outcome;
use state::{GateFiles, STATE_SCHEMA_VERSION, StateError, TRAIN_RESULTS, TrainCase, TrainResults};

pub(crate) use private::{private_dir, sweep_private_dirs};
pub(crate) use run::{GateSettings, run};

/// Why the gate or `record` could not judge at all. [`GateError::is_usage`] separates what
/// the user fixes (exit 2) from hcbench failing (exit 3); neither is ever a failed gate (1).
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    /// A setup problem named in the message: no test case, no commit, paired mode without git...
    #[error("{0}")]
    Setup(String),
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    #[error(transparent)]
    State(#[from] StateError),
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error(transparent)]
    Git(#[from] git::GitError),
    #[error(transparent)]
    Benchmark(#[from] crate::bench::LoadError),
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error(transparent)]
    Profile(#[from] crate::model::registry::ProfileError),
    #[error(transparent)]
    RunDir(#[from] RunDirError),
    /// A config, profile definition or history only a human can vouch for ([`trust`]).
    /// Boxed: its messages carry several fields, and every gate result would pay for them.
    #[error(transparent)]
    Trust(Box<trust::TrustError>),
    /// hcbench could not read, write or run something; the cause is the source.
    #[error("{context}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
}

impl GateError {
    /// True when the user can fix it (exit 2); false when hcbench itself failed (exit 3).
    pub fn is_usage(&self) -> bool {
        match self {
            GateError::State(e) => e.is_usage(),
            GateError::RunDir(e) => e.is_usage(),
            // Another gate running is a usage problem (run one at a time), not a failed gate.
            GateError::Lock(e) => matches!(e, LockError::Busy { .. }),
            // A repository of another user is a set-up matter whose message names the fix.
            GateError::Git(git::GitError::Git { source, .. }) => source.code() == git2::ErrorCode::Owner,
            GateError::Git(_) | GateError::Io { .. } => false,
            GateError::Setup(_)
            | GateError::Config(_)
            | GateError::Benchmark(_)
            | GateError::Spec(_)
            | GateError::Profile(_)
            | GateError::Trust(_) => true,
        }
    }
}

/// The agent spec in `<dir>/<agent_dir>`, or the embedded default when it has no agent.yaml.
pub(crate) fn candidate_spec(dir: &Path, agent_dir: &str) -> Result<AgentSpec, SpecError> {
    let d = dir.join(agent_dir);
    if d.join("agent.yaml").is_file() { AgentSpec::load(&d) } else { Ok(AgentSpec::default()) }
}

#[derive(Debug, thiserror::Error)]
pub enum TrainResultsError {
    #[error(transparent)]
    State(#[from] StateError),
    #[error(transparent)]
    Lock(#[from] LockError),
}

/// Merges the outcomes of a finished `hcbench run --split train` into
/// `workspace/train_results.json` (the latest result of each train case, with commit, agent
/// spec digest, profile and its definition's digest, and run id), atomically and under the
/// workspace lock. Step 3 re-runs the cases that failed there, trusting only entries of the
/// gated profile's definition ([`trust::trusted_train_results`]). A file that was changed
/// behind hcbench's back is not merged into: the run's cases replace it, so a forged entry
/// never survives a real run.
pub(crate) fn record_train_results(
    root: &Path,
    manifest: &Manifest,
    summaries: &[CellSummary],
    profile: &crate::model::Profile,
    on_wait: impl FnOnce(&str),
) -> Result<PathBuf, TrainResultsError> {
    let files = GateFiles::new(root, &root.join(config::CONFIG_FILE));
    let _lock = FileLock::acquire(&files.lock_path(), "run (train results)", Duration::MAX, on_wait)?;
    let mut state = files.load_state()?;
    let (tampered, _) = files.check(&mut state)?;
    let intact = !tampered.iter().any(|t| t.file() == TRAIN_RESULTS);
    let previous = if intact { files.read_train_results().ok().flatten() } else { None };
    let mut results = match previous {
        Some(p) if p.benchmark == manifest.benchmark => p,
        _ => TrainResults {
            schema_version: STATE_SCHEMA_VERSION,
            benchmark: manifest.benchmark.clone(),
            updated_at: String::new(),
            cases: BTreeMap::new(),
        },
    };
    let now = crate::util::now_rfc3339();
    let mut by_case: BTreeMap<&str, Vec<&CellSummary>> = BTreeMap::new();
    for s in summaries.iter().filter(|s| s.outcome.is_some_and(|o| o != Outcome::Cancelled)) {
        by_case.entry(s.case_id.as_str()).or_default().push(s);
    }
    for (case, cells) in by_case {
        let reward = cells.iter().map(|c| steps::cell_reward(c)).sum::<f64>() / cells.len() as f64;
        let outcome =
            cells.iter().find(|c| c.outcome != Some(Outcome::Passed)).map(|c| c.outcome_label()).unwrap_or("passed");
        results.cases.insert(
            case.to_string(),
            TrainCase {
                outcome: outcome.to_string(),
                reward,
                run_id: manifest.run_id.clone(),
                commit: manifest.git_commit.clone(),
                agent_spec: manifest.agent_spec.clone(),
                profile: cells[0].profile.to_string(),
                profile_digest: Some(profile.definition.digest.clone()),
                recorded_at: now.clone(),
            },
        );
    }
    results.updated_at = now;
    files.write_protected(&mut state, TRAIN_RESULTS, &state::to_json(&results))?;
    Ok(root.join(TRAIN_RESULTS))
}
