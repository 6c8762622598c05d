//! `hcbench record`: appends the last passing gate's numbers to `workspace/results.tsv`.
//!
//! The numbers are never typed in: they come from `workspace/pending_record.json`, which only a
//! passing gate writes, and they are recorded only for the candidate that gate judged. The
//! binding, checked against HEAD at record time:
//! 1. the commit the gate ran on is HEAD or an ancestor of HEAD;
//! 2. HEAD's allowlisted files are exactly the candidate's (same paths, same blob ids), i.e.
//!    what was gated is what was committed;
//! 3. HEAD's agent spec has the digest the gate's cells recorded;
//! 4. experiment_config.yaml is unchanged since the gate;
//! 5. with the file guard on, no commit since the last recorded commit (or since the history a
//!    human accepted after it; for the first record, since the gate's commit) touches a file
//!    outside the allowlist;
//! 6. HEAD is not recorded yet: a commit is recorded once, so one candidate cannot fill the
//!    history with its score by being gated again.
//!
//! Anything else is refused with every reason (exit 1). A `--config` other than the project's
//! that no human accepted is exit 2 ([`trust::accept_config`]). The row keeps the profile, its
//! definition's digest and the agent spec's digest the gate measured with. The pending record is consumed by a
//! successful record, so a score can be recorded once. Like the gate, [`run`] never prints: it
//! emits [`RecordEvent`]s to a [`RecordSink`] (text or JSON, in [`super::report`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use git2::Oid;

use super::config::Config;
use super::git::{Git, files_without_git, short};
use super::state::{Acceptance, GateFiles, GateState, PENDING, PendingRecord, Provenance, RESULTS, ResultsRow};
use super::{GateError, candidate_spec, trust};
use crate::exit;
use crate::lock::FileLock;

/// What one `record` runs with.
#[derive(Debug)]
pub(crate) struct RecordSettings {
    pub root: PathBuf,
    pub config: Config,
    /// How long to wait for the workspace lock.
    pub wait: Duration,
    /// `--accept-history`: a human vouches for commits outside the allowlist since the last record.
    pub accept_history: bool,
    /// `--accept-config`: a human vouches for a `--config` other than the project's.
    pub accept_config: bool,
}

/// Receives `record`'s events, in order.
pub(crate) trait RecordSink {
    fn event(&mut self, event: &RecordEvent<'_>);
}

#[derive(Debug)]
pub(crate) enum RecordEvent<'a> {
    /// Another gate or record holds the workspace lock, and `record` waits (`--wait`).
    WaitingForLock { holder: &'a str },
    /// The project is not in git: the binding is checked against the working tree.
    NoGit { root: &'a Path },
    /// The last event.
    Finished(&'a RecordOutcome),
}

#[derive(Debug, Clone)]
pub(crate) enum RecordOutcome {
    /// The row appended to results.tsv.
    Recorded(ResultsRow),
    /// Nothing was written, for these reasons.
    Refused { reasons: Vec<String> },
}

impl RecordOutcome {
    pub(crate) fn exit_code(&self) -> i32 {
        match self {
            RecordOutcome::Recorded(_) => exit::SUCCESS,
            RecordOutcome::Refused { .. } => exit::FAILED,
        }
    }
}

/// Checks the binding and appends the row, under the workspace lock.
pub(crate) fn run(settings: &RecordSettings, sink: &mut dyn RecordSink) -> Result<RecordOutcome, GateError> {
    let files = GateFiles::new(&settings.root, &settings.config.path);
    let _lock = FileLock::acquire(&files.lock_path(), "record", settings.wait, |holder| {
        sink.event(&RecordEvent::WaitingForLock { holder })
    })?;
    let mut state = files.load_state()?;
    trust::accept_config(&files, &mut state, &settings.config, settings.accept_config, "hcbench record")?;
    let outcome = match bind(settings, &files, &mut state, sink)? {
        Binding::Refused(reasons) => RecordOutcome::Refused { reasons },
        Binding::Holds(bound) => RecordOutcome::Recorded(append(settings, &files, &mut state, *bound)?),
    };
    sink.event(&RecordEvent::Finished(&outcome));
    Ok(outcome)
}

enum Binding {
    Holds(Box<Bound>),
    Refused(Vec<String>),
}

/// What a holding binding appends.
struct Bound {
    pending: PendingRecord,
    rows: Vec<ResultsRow>,
    /// HEAD's full id, or `-` outside git.
    commit: String,
}

/// Checks conditions 1 to 5 (and the state protection) and collects every reason to refuse.
fn bind(
    settings: &RecordSettings,
    files: &GateFiles,
    state: &mut GateState,
    sink: &mut dyn RecordSink,
) -> Result<Binding, GateError> {
    let (tampered, _) = files.check(state)?;
    if !tampered.is_empty() {
        return Ok(Binding::Refused(tampered.iter().map(|t| format!("{}; {}", t.describe(), t.advice())).collect()));
    }
    let rows = files.read_results()?;
    let Some(pending) = files.read_pending()? else {
        return Ok(Binding::Refused(vec![format!(
            "no passing gate run to record: {PENDING} does not exist; run `hcbench gate` (it leaves the pending record when every step passes), commit, then record"
        )]));
    };
    if files.config_sha()? != pending.config_sha256 {
        return Ok(Binding::Refused(vec![format!(
            "{} changed since the gate passed; run the gate again",
            files.config_name
        )]));
    }
    let mut reasons = Vec::new();
    let commit = match Git::open(&settings.root)? {
        Some(g) => bind_to_head(settings, &g, &pending, &rows, state, &mut reasons)?,
        None => {
            sink.event(&RecordEvent::NoGit { root: &settings.root });
            bind_to_worktree(settings, &pending, &mut reasons)?;
            "-".to_string()
        }
    };
    Ok(if reasons.is_empty() {
        Binding::Holds(Box::new(Bound { pending, rows, commit }))
    } else {
        Binding::Refused(reasons)
    })
}

/// The binding in git: HEAD descends from the gate's commit and holds exactly the gated
/// candidate; with the file guard on, the history since the last record stays in the
/// allowlist. Returns HEAD's id.
fn bind_to_head(
    settings: &RecordSettings,
    g: &Git,
    pending: &PendingRecord,
    rows: &[ResultsRow],
    state: &GateState,
    reasons: &mut Vec<String>,
) -> Result<String, GateError> {
    let cfg = &settings.config;
    let head = g.head()?.ok_or_else(|| {
        GateError::Setup(format!(
            "the git repository at {} has no commit yet; commit the candidate first",
            g.workdir().display()
        ))
    })?;
    // 1. HEAD descends from the commit the gate ran on.
    let gated_on = pending.head.as_deref().and_then(|h| g.resolve(h));
    match (&pending.head, gated_on) {
        (Some(h), None) => reasons.push(format!("the gate ran on commit {h}, which is not in this repository")),
        (Some(h), Some(id)) if !g.is_ancestor(id, head)? => reasons.push(format!(
            "HEAD {} does not descend from the commit the gate ran on ({}); run the gate on the current history",
            short(&head.to_string()),
            short(h)
        )),
        _ => {}
    }
    // 6. A commit is recorded once.
    let head_id = head.to_string();
    if let Some(n) = rows.iter().position(|r| r.commit == head_id) {
        reasons.push(format!(
            "commit {} is already recorded (row {} of {RESULTS}); a commit is recorded once: commit the next candidate, gate it, then record",
            short(&head_id),
            n + 1
        ));
    }
    // 2. What was gated is what was committed.
    let committed = g.files_at(head, &|p: &str| cfg.allowlist.allows(p))?;
    reasons.extend(binding_differences(&pending.candidate, &committed));
    // 3. HEAD's agent spec is the one the gate ran.
    let spec = trust::head_spec(g, head, &cfg.agent_dir)??;
    if spec.digest != pending.agent_spec {
        reasons.push(format!(
            "HEAD's agent spec ({}/) has digest {}, but the gate judged {}",
            cfg.agent_dir,
            short(&spec.digest),
            short(&pending.agent_spec)
        ));
    }
    // 5. Every commit since the last record stays inside the allowlist.
    if cfg.file_guard && reasons.is_empty() {
        history_reasons(settings, g, rows, state, gated_on, head, reasons)?;
    }
    Ok(head.to_string())
}

/// Condition 5: commits since the last recorded one (or since the history a human accepted
/// after it, or the gate's commit for the first record) that touch files outside the
/// allowlist. Refused unless a human passed `--accept-history`. The gate runs the same check
/// at its start ([`trust::check_before_cells`]).
fn history_reasons(
    settings: &RecordSettings,
    g: &Git,
    rows: &[ResultsRow],
    state: &GateState,
    gated_on: Option<Oid>,
    head: Oid,
    reasons: &mut Vec<String>,
) -> Result<(), GateError> {
    let cfg = &settings.config;
    // Reverting a commit leaves it in the history, which is what is checked: the advice that
    // works takes the branch back onto `base` and lets the gate's file guard name what to undo
    // (no such advice when the base is not in this repository).
    let mut history = |message: String, base: Option<&str>| {
        if !settings.accept_history {
            let fix = base.map_or_else(String::new, |base| {
                format!(
                    "reverting is not enough (the commits stay in the history): {}, then gate, commit and record again; ",
                    trust::undo_advice(base)
                )
            });
            reasons.push(format!("{message}; {fix}if a human made them on purpose: hcbench record --accept-history"));
        }
    };
    let base = match trust::history_base(g, rows, state, head)? {
        Ok(Some(b)) => Some(b),
        Ok(None) => gated_on,
        Err(message) => {
            let last = trust::last_recorded(rows).unwrap_or_default();
            history(message, g.resolve(&last).is_some().then(|| short(&last)));
            None
        }
    };
    let Some(base) = base else { return Ok(()) };
    let outside = trust::outside_allowlist(g, &cfg.allowlist, base, head)?;
    if !outside.is_empty() {
        history(trust::outside_message(base, &cfg.allowlist, &outside), Some(short(&base.to_string())));
    }
    Ok(())
}

/// Outside git: conditions 2 and 3 against the working tree.
fn bind_to_worktree(
    settings: &RecordSettings,
    pending: &PendingRecord,
    reasons: &mut Vec<String>,
) -> Result<(), GateError> {
    let cfg = &settings.config;
    let current = files_without_git(&settings.root, &|p: &str| cfg.allowlist.allows(p))?;
    reasons.extend(binding_differences(&pending.candidate, &current));
    let spec = candidate_spec(&settings.root, &cfg.agent_dir)?;
    if spec.digest != pending.agent_spec {
        reasons.push(format!("the agent spec ({}/) changed since the gate passed", cfg.agent_dir));
    }
    Ok(())
}

/// Appends the row and consumes the pending record.
fn append(
    settings: &RecordSettings,
    files: &GateFiles,
    state: &mut GateState,
    bound: Bound,
) -> Result<ResultsRow, GateError> {
    let Bound { pending, rows, commit } = bound;
    if settings.accept_history {
        state.accepted.push(Acceptance::now(
            trust::HISTORY,
            trust::last_recorded(&rows),
            Some(commit.clone()),
            "hcbench record --accept-history",
        ));
    }
    let row = ResultsRow {
        iteration: rows.last().map(|r| r.iteration + 1).unwrap_or(0),
        val_score: pending.val_score,
        commit,
        evals_passed: pending.evals_passed,
        evals_total: pending.evals_total,
        timestamp: crate::util::now_rfc3339(),
        provenance: Some(Provenance {
            profile: pending.profile.clone(),
            profile_digest: pending.profile_digest.clone().unwrap_or_else(|| "-".into()),
            agent_spec: pending.agent_spec.clone(),
        }),
    };
    // The regression set first: its update is idempotent, so a record interrupted before the
    // row is written and run again leaves the same set.
    files.apply_set_update(state, &pending.regression_set, settings.config.threshold)?;
    let bytes = files.results_with(&row)?;
    files.write_protected(state, RESULTS, &bytes)?;
    files.remove_protected(state, PENDING)?;
    Ok(row)
}

/// How the committed allowlisted files differ from the gated candidate.
fn binding_differences(candidate: &BTreeMap<String, String>, committed: &BTreeMap<String, String>) -> Vec<String> {
    let mut diffs = Vec::new();
    for (path, id) in candidate {
        match committed.get(path) {
            None => diffs.push(format!("{path} was part of the gated candidate but is not committed")),
            Some(c) if c != id => diffs.push(format!("{path} differs from the version the gate judged")),
            _ => {}
        }
    }
    for path in committed.keys().filter(|p| !candidate.contains_key(*p)) {
        diffs.push(format!("{path} is committed but was not part of the gated candidate"));
    }
    if !diffs.is_empty() {
        diffs.push("the pending record belongs to another candidate: run `hcbench gate` on what you committed (with no uncommitted change in the allowlist), then record".into());
    }
    diffs
}
