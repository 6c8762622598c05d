//! The gate's state files under `workspace/` and their protection.
//!
//! | file | written by | holds |
//! |---|---|---|
//! | `suite.json` | a passing gate | the regression set: its cases (`tasks`), threshold, last results, promotion streaks |
//! | `results.tsv` | `hcbench record` | one row per recorded iteration; Step 2's best is its maximum `val_score` |
//! | `pending_record.json` | a passing gate | the numbers `record` may append, bound to the candidate |
//! | `train_results.json` | `hcbench run --split train` | latest outcome per train case, with provenance |
//! | `.gate-state.json` | every writer above | SHA-256 of each file as hcbench last wrote it; the audit log |
//!
//! **Protection.** These files are gitignored, so the file guard cannot see them, and an agent
//! that edits them (drops a failing case from the regression set, lowers the best score, forges a pending record)
//! would otherwise go unnoticed. Every write goes through [`GateFiles::write_protected`], which
//! writes atomically and then records the new hash; [`GateFiles::check`] compares every file with
//! its recorded hash. `experiment_config.yaml` is protected the same way, except that hcbench
//! never writes it: its hash is recorded the first time a gate sees it. A human who edits a file
//! on purpose says so with `hcbench gate --accept-state-change FILE`, which records the new
//! hash and appends an entry to the audit log. This makes tampering evident, not impossible:
//! a process that also rewrites `.gate-state.json` is not stopped (see docs/gate.md).
//!
//! **Anchor.** Deleting the whole workspace would delete the hashes with the files; so every
//! save of `.gate-state.json` also anchors the state in git ([`super::anchor`]), and every load
//! checks the workspace against the anchor: lost or replaced state is an error naming the
//! recovery (`hcbench gate --restore-state` or `--accept-state-reset`), never a first run.
//!
//! **Promotions wait for `record`.** A passing gate does not write the regression set: Step 1's
//! scores and Step 3's promotions travel in the pending record ([`SetUpdate`]) and `record`
//! applies them, so a candidate that is never committed and recorded never changes the set.
//!
//! **Invariant:** only the functions here write these files, always under the workspace lock.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize, Serializer};

use super::anchor::{Anchor, AnchorError};
use crate::util::{natural_cmp, sha256_hex, write_atomic};

/// Version of suite.json, pending_record.json, train_results.json and .gate-state.json.
pub(crate) const STATE_SCHEMA_VERSION: u32 = 1;

/// The header line of results.tsv: auto-harness's six columns, in its order, then what the
/// gate measured with (the profile, its definition's digest, the agent spec's digest).
pub(crate) const RESULTS_HEADER: &str =
    "iteration\tval_score\tcommit\tevals_passed\tevals_total\ttimestamp\tprofile\tprofile_digest\tagent_spec";
/// The header of a results.tsv written before the provenance columns (and by auto-harness). It
/// still reads; the next `record` rewrites the header and old rows keep their six fields.
const RESULTS_HEADER_V1: &str = "iteration\tval_score\tcommit\tevals_passed\tevals_total\ttimestamp";

/// The regression set. The file keeps the name auto-harness gives it.
pub(crate) const REGRESSION_SET: &str = "workspace/suite.json";
pub(crate) const RESULTS: &str = "workspace/results.tsv";
pub(crate) const PENDING: &str = "workspace/pending_record.json";
pub(crate) const TRAIN_RESULTS: &str = "workspace/train_results.json";
pub(crate) const STATE: &str = "workspace/.gate-state.json";
const LOCK: &str = "workspace/.gate.lock";

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: io::Error },
    #[error("cannot write {path}: {source}")]
    Write { path: String, source: io::Error },
    #[error("{path} is not valid: {message}")]
    Invalid { path: String, message: String },
    #[error("{path} line {line}: {message}")]
    Line { path: String, line: usize, message: String },
    #[error(
        "{path} has schema_version {found}, newer than this hcbench reads ({STATE_SCHEMA_VERSION}); upgrade hcbench"
    )]
    TooNew { path: String, found: u32 },
    #[error("`{given}` is not a gate state file; protected files: {protected}")]
    NotProtected { given: String, protected: String },
    #[error(transparent)]
    Anchor(#[from] AnchorError),
}

impl StateError {
    /// True when the user can fix it (a bad file), false when hcbench failed (I/O).
    pub(crate) fn is_usage(&self) -> bool {
        match self {
            StateError::Read { .. } | StateError::Write { .. } => false,
            StateError::Anchor(e) => e.is_usage(),
            _ => true,
        }
    }
}

fn one() -> u32 {
    1
}

/// Serializes a map with its keys in natural order ("case-2" before "case-10").
fn natural_map<S: Serializer, V: Serialize>(map: &BTreeMap<String, V>, s: S) -> Result<S::Ok, S::Error> {
    let mut entries: Vec<(&String, &V)> = map.iter().collect();
    entries.sort_by(|a, b| natural_cmp(a.0, b.0));
    s.collect_map(entries)
}

/// Sorts ids naturally and removes duplicates.
pub(crate) fn sort_ids(ids: &mut Vec<String>) {
    ids.sort_by(|a, b| natural_cmp(a, b).then_with(|| a.cmp(b)));
    ids.dedup();
}

/// `workspace/suite.json`: the regression set, the train cases Step 1 re-runs. It only grows.
/// The file's name and keys are auto-harness's (`tasks` holds the cases), so the data model
/// stays readable by its tools; only the code says "regression set" and "case".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RegressionSet {
    #[serde(default = "one")]
    pub schema_version: u32,
    /// Train case ids, naturally sorted.
    #[serde(rename = "tasks")]
    pub cases: Vec<String>,
    /// Step 1 passes when passed / cases >= threshold.
    pub threshold: f64,
    /// Score (mean reward over epochs) of each case in the last passing gate.
    #[serde(default, serialize_with = "natural_map")]
    pub last_results: BTreeMap<String, f64>,
    /// Consecutive passing re-runs of cases not yet promoted (only with promotion_passes > 1).
    #[serde(default, serialize_with = "natural_map", skip_serializing_if = "BTreeMap::is_empty")]
    pub promotion_streaks: BTreeMap<String, u32>,
}

impl RegressionSet {
    pub(crate) fn new(threshold: f64) -> RegressionSet {
        RegressionSet {
            schema_version: STATE_SCHEMA_VERSION,
            cases: Vec::new(),
            threshold,
            last_results: BTreeMap::new(),
            promotion_streaks: BTreeMap::new(),
        }
    }
}

/// One row of `workspace/results.tsv`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ResultsRow {
    pub iteration: u64,
    pub val_score: f64,
    /// The recorded commit (full id), or `-` outside git.
    pub commit: String,
    pub evals_passed: u64,
    pub evals_total: u64,
    pub timestamp: String,
    /// What produced the score: None in rows written before these columns existed.
    pub provenance: Option<Provenance>,
}

/// The last three columns of a results.tsv row: what the gate measured with.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Provenance {
    /// The gated profile's name.
    pub profile: String,
    /// Digest of the profile's definition (`-` when the pending record predates it).
    pub profile_digest: String,
    /// Digest of the candidate's agent spec.
    pub agent_spec: String,
}

impl ResultsRow {
    /// The row as a line; `val_score` in shortest round-trip form, so reading it back gives the
    /// exact number the gate computed (a rounded "0.6667" would make a later tie look worse).
    pub(crate) fn render(&self) -> String {
        let mut line = format!(
            "{}\t{}\t{}\t{}\t{}\t{}",
            self.iteration, self.val_score, self.commit, self.evals_passed, self.evals_total, self.timestamp
        );
        if let Some(p) = &self.provenance {
            line.push_str(&format!("\t{}\t{}\t{}", p.profile, p.profile_digest, p.agent_spec));
        }
        line.push('\n');
        line
    }
}

/// The best recorded score: the maximum `val_score` of all rows (the baseline row included).
pub(crate) fn best(rows: &[ResultsRow]) -> Option<f64> {
    rows.iter().map(|r| r.val_score).max_by(|a, b| a.total_cmp(b))
}

/// Parses results.tsv strictly: one of the two exact headers first, then six tab-separated
/// fields per row, or nine under the current header. Blank lines are skipped; anything else
/// that does not parse is an error naming the line.
pub(crate) fn parse_results(path: &str, text: &str) -> Result<Vec<ResultsRow>, StateError> {
    let err = |line: usize, message: String| StateError::Line { path: path.to_string(), line, message };
    let fix = format!(
        "hcbench never writes it that way; restore the file from a backup (or delete it to start a new history), then run `hcbench gate --accept-state-change {RESULTS}`"
    );
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l.strip_suffix('\r').unwrap_or(l)));
    let header = lines.by_ref().find(|(_, l)| !l.trim().is_empty());
    match header {
        None => {
            return Err(err(
                1,
                format!("the file is empty: it has no header line `{}`; {fix}", RESULTS_HEADER.replace('\t', "<TAB>")),
            ));
        }
        Some((n, l)) if l != RESULTS_HEADER && l != RESULTS_HEADER_V1 => {
            return Err(err(
                n,
                format!(
                    "expected the header `{}`, found `{}`; the file is headerless or corrupt; {fix}",
                    RESULTS_HEADER.replace('\t', "<TAB>"),
                    crate::util::truncate_str(&l.replace('\t', "<TAB>"), 120)
                ),
            ));
        }
        Some(_) => {}
    }
    let current = header.is_some_and(|(_, l)| l == RESULTS_HEADER);
    let mut rows = Vec::new();
    for (n, line) in lines {
        if line.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split('\t').collect();
        // Rows recorded before the provenance columns keep six fields under the new header.
        if !(fields.len() == 6 || (current && fields.len() == 9)) {
            let expected = if current { "6 or 9" } else { "6" };
            let header = if current { RESULTS_HEADER } else { RESULTS_HEADER_V1 };
            return Err(err(
                n,
                format!(
                    "has {} tab-separated field(s), expected {expected} ({}); {fix}",
                    fields.len(),
                    header.replace('\t', ", ")
                ),
            ));
        }
        let int = |i: usize, name: &str| -> Result<u64, StateError> {
            fields[i]
                .trim()
                .parse::<u64>()
                .map_err(|_| err(n, format!("field `{name}`: `{}` is not a whole number; {fix}", fields[i])))
        };
        let iteration = int(0, "iteration")?;
        let val_score: f64 = fields[1]
            .trim()
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite())
            .ok_or_else(|| err(n, format!("field `val_score`: `{}` is not a number; {fix}", fields[1])))?;
        let commit = fields[2].trim().to_string();
        if commit.is_empty() {
            return Err(err(n, format!("field `commit` is empty; {fix}")));
        }
        let evals_passed = int(3, "evals_passed")?;
        let evals_total = int(4, "evals_total")?;
        if evals_passed > evals_total {
            return Err(err(n, format!("evals_passed {evals_passed} is more than evals_total {evals_total}; {fix}")));
        }
        let provenance = (fields.len() == 9).then(|| Provenance {
            profile: fields[6].trim().to_string(),
            profile_digest: fields[7].trim().to_string(),
            agent_spec: fields[8].trim().to_string(),
        });
        rows.push(ResultsRow {
            iteration,
            val_score,
            commit,
            evals_passed,
            evals_total,
            timestamp: fields[5].trim().to_string(),
            provenance,
        });
    }
    Ok(rows)
}

/// The numbers a passing gate leaves for `hcbench record`, bound to the candidate it judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PendingRecord {
    pub schema_version: u32,
    pub created_at: String,
    pub gate_run_id: String,
    pub benchmark: String,
    pub profile: String,
    pub mode: String,
    /// HEAD when the gate ran (None outside git). The candidate is this commit's tree plus the
    /// allowlisted changes in the working tree (the file guard allowed nothing else).
    pub head: Option<String>,
    pub agent_dir: String,
    /// Digest of the candidate's agent spec (`agent_spec` in its traces).
    pub agent_spec: String,
    /// Digest of the gated profile's definition (None in a pending record from before it).
    #[serde(default)]
    pub profile_digest: Option<String>,
    /// The candidate's allowlisted files: root-relative path -> git blob id of the content.
    #[serde(serialize_with = "natural_map")]
    pub candidate: BTreeMap<String, String>,
    /// SHA-256 of experiment_config.yaml when the gate ran (None: no config file).
    pub config_sha256: Option<String>,
    pub val_score: f64,
    /// Step 1 numbers, as auto-harness records them.
    pub evals_passed: u64,
    pub evals_total: u64,
    /// What `record` applies to the regression set (Step 1's scores, Step 3's promotions).
    #[serde(default)]
    pub regression_set: SetUpdate,
}

/// A passing gate's changes to the regression set, applied by `record` when it records the
/// candidate ([`SetUpdate::apply`]); a gate alone never changes `suite.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SetUpdate {
    /// Cases Step 3 promoted, naturally sorted.
    #[serde(default)]
    pub promoted: Vec<String>,
    /// Scores of this gate (Step 1's cases and the promoted ones): they become `last_results`.
    #[serde(default, serialize_with = "natural_map")]
    pub last_results: BTreeMap<String, f64>,
    /// The promotion streaks after this gate (absolute, so applying twice changes nothing).
    #[serde(default, serialize_with = "natural_map")]
    pub promotion_streaks: BTreeMap<String, u32>,
}

impl SetUpdate {
    /// The update that turns `before` into `after` (the gate's next regression set).
    pub(crate) fn between(before: &RegressionSet, after: &RegressionSet) -> SetUpdate {
        SetUpdate {
            promoted: after.cases.iter().filter(|c| !before.cases.contains(c)).cloned().collect(),
            last_results: after.last_results.clone(),
            promotion_streaks: after.promotion_streaks.clone(),
        }
    }

    /// Applies the update; idempotent, so a `record` interrupted after writing the set and
    /// run again leaves the same set.
    pub(crate) fn apply(&self, set: &mut RegressionSet) {
        set.cases.extend(self.promoted.iter().cloned());
        sort_ids(&mut set.cases);
        set.last_results.extend(self.last_results.clone());
        set.promotion_streaks = self.promotion_streaks.clone();
    }
}

/// `workspace/train_results.json`: the latest outcome of each train case, with provenance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TrainResults {
    pub schema_version: u32,
    pub benchmark: String,
    pub updated_at: String,
    #[serde(serialize_with = "natural_map")]
    pub cases: BTreeMap<String, TrainCase>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TrainCase {
    /// `passed`, `failed`, or an infrastructure class (`timeout`, `provider_error`, ...).
    pub outcome: String,
    /// Mean reward of the case's cells in that run; errors count 0.
    pub reward: f64,
    pub run_id: String,
    pub commit: Option<String>,
    pub agent_spec: String,
    pub profile: String,
    /// Digest of the profile's definition; None in files from before it (Step 3 then treats
    /// the entry as stale).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_digest: Option<String>,
    pub recorded_at: String,
}

/// `.gate-state.json`: the recorded hashes and the audit log of accepted changes.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GateState {
    pub schema_version: u32,
    /// Protected file (root-relative) -> SHA-256 of the content hcbench last wrote or accepted.
    pub files: BTreeMap<String, String>,
    /// Every change a human accepted, oldest first.
    #[serde(default)]
    pub accepted: Vec<Acceptance>,
    /// True once the state was anchored in git: a missing anchor is then an error, not an
    /// older project meeting the anchor for the first time.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub anchored: bool,
}

/// How a human recovers the gate's state when it disagrees with its anchor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recovery {
    /// `--restore-state`: write the anchored files back into the workspace.
    Restore,
    /// `--accept-state-reset`: the workspace's state, as it is (possibly empty), becomes the
    /// anchored one; the previous anchor commit stays as its parent.
    AcceptReset,
}

/// What a recovery did, for the sinks.
#[derive(Debug, Clone)]
pub(crate) struct Recovered {
    pub how: Recovery,
    pub refname: String,
    /// The anchor commit restored from or replaced (None: there was none).
    pub commit: Option<String>,
    /// The state files written back (restore) or now anchored (reset).
    pub files: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Acceptance {
    pub at: String,
    pub file: String,
    /// What was recorded before (None: nothing).
    pub previous: Option<String>,
    /// What is recorded now (None: the file does not exist).
    pub sha256: Option<String>,
    pub command: String,
}

impl Acceptance {
    /// An entry made now: `file` went from `previous` to `sha256` because of `command`.
    pub(crate) fn now(
        file: impl Into<String>,
        previous: Option<String>,
        sha256: Option<String>,
        command: impl Into<String>,
    ) -> Acceptance {
        Acceptance { at: crate::util::now_rfc3339(), file: file.into(), previous, sha256, command: command.into() }
    }
}

/// A protected file that changed behind hcbench's back.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Tamper {
    Changed {
        file: String,
        recorded: String,
        now: String,
    },
    Deleted {
        file: String,
        recorded: String,
    },
    /// hcbench writes this file but never wrote this one.
    Unrecorded {
        file: String,
        now: String,
    },
}

impl Tamper {
    pub(crate) fn file(&self) -> &str {
        match self {
            Tamper::Changed { file, .. } | Tamper::Deleted { file, .. } | Tamper::Unrecorded { file, .. } => file,
        }
    }

    pub(crate) fn describe(&self) -> String {
        match self {
            Tamper::Changed { file, recorded, now } => format!(
                "{file} was changed by something other than hcbench (recorded sha256 {}, now {})",
                &recorded[..12],
                &now[..12]
            ),
            Tamper::Deleted { file, .. } => format!("{file} was deleted by something other than hcbench"),
            Tamper::Unrecorded { file, .. } => format!("{file} exists but hcbench never wrote it"),
        }
    }

    /// How to undo the change: hcbench's own files come back from the anchor in git, the
    /// config (the human's file, tracked in git) from git.
    pub(crate) fn advice(&self) -> String {
        let file = self.file();
        let restore = if file.starts_with("workspace/") {
            "restore it with `hcbench gate --restore-state` (writes back every state file anchored in git, then runs the gate)".to_string()
        } else {
            format!("restore it (e.g. `git checkout HEAD -- {file}`)")
        };
        format!("{restore}; or, if a human made this change on purpose: hcbench gate --accept-state-change {file}")
    }
}

/// The paths of the gate's files for one project root.
#[derive(Debug, Clone)]
pub(crate) struct GateFiles {
    pub root: PathBuf,
    /// The experiment config, as a root-relative name when it lives in the root.
    pub config_name: String,
    pub config_path: PathBuf,
}

impl GateFiles {
    pub(crate) fn new(root: &Path, config_path: &Path) -> GateFiles {
        let config_name = match config_path.strip_prefix(root) {
            Ok(rel) => rel.to_string_lossy().replace('\\', "/"),
            Err(_) => config_path.to_string_lossy().into_owned(),
        };
        GateFiles { root: root.to_path_buf(), config_name, config_path: config_path.to_path_buf() }
    }

    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        if rel == self.config_name { self.config_path.clone() } else { self.root.join(rel) }
    }

    pub(crate) fn workspace(&self) -> PathBuf {
        self.root.join("workspace")
    }

    pub(crate) fn lock_path(&self) -> PathBuf {
        self.root.join(LOCK)
    }

    /// Protected files: (name, written by hcbench).
    fn protected(&self) -> Vec<(String, bool)> {
        let mut v: Vec<(String, bool)> = WRITTEN.iter().map(|s| (s.to_string(), true)).collect();
        v.push((self.config_name.clone(), false));
        v
    }

    fn sha_of(&self, rel: &str) -> Result<Option<String>, StateError> {
        Ok(read_bytes(&self.path(rel), rel)?.map(|b| sha256_hex(&b)))
    }

    /// The recorded hashes and audit log, checked against the anchor ([`super::anchor`]): a
    /// workspace whose state is missing, replaced, or whose anchor was deleted is an error
    /// naming the recovery. State met without an anchor (a project from before the anchor) is
    /// anchored now.
    pub(crate) fn load_state(&self) -> Result<GateState, StateError> {
        let (bytes, mut state) = self.load_unanchored()?;
        let Some(anchor) = Anchor::open(&self.root)? else { return Ok(state) };
        let (refname, state_name) = (anchor.refname.clone(), STATE);
        match (bytes, anchor.read()?) {
            (None, Some(snap)) => {
                return Err(AnchorError::WorkspaceLost { state: state_name, refname, summary: summary(&snap) }.into());
            }
            (Some(b), Some(snap)) if snap.files.get(STATE) != Some(&b) => {
                let commit = super::git::short(&snap.commit.to_string()).to_string();
                return Err(AnchorError::Differs { state: state_name, refname, commit }.into());
            }
            (Some(_), None) if state.anchored => {
                return Err(AnchorError::AnchorLost { state: state_name, refname }.into());
            }
            (Some(_), None) => self.save_state(&mut state)?,
            _ => {}
        }
        Ok(state)
    }

    /// The workspace's `.gate-state.json` (its bytes and content) without the anchor check.
    fn load_unanchored(&self) -> Result<(Option<Vec<u8>>, GateState), StateError> {
        let bytes = read_bytes(&self.root.join(STATE), STATE)?;
        let state = match &bytes {
            Some(b) => serde_json::from_slice::<GateState>(b)
                .map_err(|e| StateError::Invalid { path: STATE.into(), message: e.to_string() })?,
            None => GateState { schema_version: STATE_SCHEMA_VERSION, ..Default::default() },
        };
        if state.schema_version > STATE_SCHEMA_VERSION {
            return Err(StateError::TooNew { path: STATE.into(), found: state.schema_version });
        }
        Ok((bytes, state))
    }

    /// Writes `.gate-state.json`, then anchors the state: every file whose recorded hash it
    /// holds, from the workspace or, when the workspace's copy no longer matches (tampered
    /// with), from the previous anchor, so the anchor only ever holds what hcbench vouches for.
    fn save_state(&self, state: &mut GateState) -> Result<(), StateError> {
        let anchor = Anchor::open(&self.root)?;
        state.anchored = anchor.is_some();
        let bytes = to_json(state);
        std::fs::create_dir_all(self.workspace()).map_err(|source| StateError::Write { path: STATE.into(), source })?;
        write_atomic(&self.root.join(STATE), &bytes)
            .map_err(|source| StateError::Write { path: STATE.into(), source })?;
        let Some(anchor) = anchor else { return Ok(()) };
        let previous = anchor.read()?.map(|s| s.files).unwrap_or_default();
        let mut files = BTreeMap::from([(STATE.to_string(), bytes)]);
        for rel in WRITTEN {
            let Some(recorded) = state.files.get(rel) else { continue };
            let disk = read_bytes(&self.path(rel), rel)?;
            let vouched = [disk.as_ref(), previous.get(rel)].into_iter().flatten().find(|b| sha256_hex(b) == *recorded);
            if let Some(b) = vouched {
                files.insert(rel.to_string(), b.clone());
            }
        }
        anchor.write(&files)?;
        Ok(())
    }

    /// `--restore-state` or `--accept-state-reset`, done before the state is loaded (the load
    /// would refuse the state being recovered). Returns the state and what was done; both are
    /// logged in the audit log.
    pub(crate) fn recover(&self, how: Recovery) -> Result<(GateState, Recovered), StateError> {
        let anchor = Anchor::open(&self.root)?;
        let snapshot = anchor.as_ref().map(Anchor::read).transpose()?.flatten();
        let refname = anchor.as_ref().map_or_else(String::new, |a| a.refname.clone());
        let commit = snapshot.as_ref().map(|s| s.commit.to_string());
        let (mut state, files, command) = match how {
            Recovery::Restore => {
                let Some(snap) = snapshot else {
                    return Err(AnchorError::NothingToRestore(match anchor {
                        Some(a) => format!("{} does not exist", a.refname),
                        None => format!("{} is not in a git repository", self.root.display()),
                    })
                    .into());
                };
                // The other files first, `.gate-state.json` last: until it is written, a crash
                // leaves a workspace that still disagrees with the anchor (and says so).
                for rel in WRITTEN {
                    match snap.files.get(rel) {
                        Some(b) => write_atomic(&self.path(rel), b)
                            .map_err(|source| StateError::Write { path: rel.into(), source })?,
                        None => match std::fs::remove_file(self.path(rel)) {
                            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                                return Err(StateError::Write { path: rel.into(), source: e });
                            }
                            _ => {}
                        },
                    }
                }
                if let Some(b) = snap.files.get(STATE) {
                    write_atomic(&self.root.join(STATE), b)
                        .map_err(|source| StateError::Write { path: STATE.into(), source })?;
                }
                let files: Vec<String> = snap.files.keys().cloned().collect();
                (self.load_state()?, files, "hcbench gate --restore-state")
            }
            Recovery::AcceptReset => {
                let (_, state) = self.load_unanchored()?;
                let files = state.files.keys().cloned().collect();
                (state, files, "hcbench gate --accept-state-reset")
            }
        };
        let entry = Acceptance::now("(gate state)", commit.clone(), None, command);
        self.audit(&mut state, entry)?;
        Ok((state, Recovered { how, refname, commit, files }))
    }

    /// Compares every protected file with its recorded hash. The config is protected from the
    /// first time it is seen (its hash is recorded and saved here); files hcbench writes must
    /// have been written by it.
    pub(crate) fn check(&self, state: &mut GateState) -> Result<(Vec<Tamper>, Vec<String>), StateError> {
        let mut tampered = Vec::new();
        let mut newly_protected = Vec::new();
        for (rel, ours) in self.protected() {
            let recorded = state.files.get(&rel).cloned();
            let now = self.sha_of(&rel)?;
            match (recorded, now) {
                (Some(r), Some(n)) if r != n => tampered.push(Tamper::Changed { file: rel, recorded: r, now: n }),
                (Some(r), None) => tampered.push(Tamper::Deleted { file: rel, recorded: r }),
                (None, Some(n)) if ours => tampered.push(Tamper::Unrecorded { file: rel, now: n }),
                (None, Some(n)) => {
                    state.files.insert(rel.clone(), n);
                    newly_protected.push(rel);
                }
                _ => {}
            }
        }
        if !newly_protected.is_empty() {
            self.save_state(state)?;
        }
        Ok((tampered, newly_protected))
    }

    /// Records the current content of `given` (a protected file) as legitimate, with an audit
    /// entry. Returns the file's name and its new hash (None: it does not exist).
    pub(crate) fn accept(
        &self,
        state: &mut GateState,
        given: &str,
        command: &str,
    ) -> Result<(String, Option<String>), StateError> {
        let rel = self.resolve_protected(given)?;
        let now = self.sha_of(&rel)?;
        let previous = match &now {
            Some(n) => state.files.insert(rel.clone(), n.clone()),
            None => state.files.remove(&rel),
        };
        state.accepted.push(Acceptance::now(rel.clone(), previous, now.clone(), command));
        self.save_state(state)?;
        Ok((rel, now))
    }

    /// Appends an entry to the audit log (a human's override that is not a file's new
    /// content: a config given with `--config`, a profile's new definition, a history).
    pub(crate) fn audit(&self, state: &mut GateState, entry: Acceptance) -> Result<(), StateError> {
        state.accepted.push(entry);
        self.save_state(state)
    }

    /// `workspace/suite.json`, `suite.json` and `./workspace/suite.json` all name the same file.
    fn resolve_protected(&self, given: &str) -> Result<String, StateError> {
        let norm = given.trim().trim_start_matches("./").replace('\\', "/");
        let protected = self.protected();
        let abs = Path::new(given);
        let hit = protected.iter().find(|(rel, _)| {
            *rel == norm
                || rel.rsplit('/').next() == Some(norm.as_str())
                || (abs.is_absolute() && self.path(rel) == abs)
        });
        match hit {
            Some((rel, _)) => Ok(rel.clone()),
            None => Err(StateError::NotProtected {
                given: given.to_string(),
                protected: protected.iter().map(|(r, _)| r.as_str()).collect::<Vec<_>>().join(", "),
            }),
        }
    }

    /// Writes a protected file atomically, then records its hash.
    pub(crate) fn write_protected(&self, state: &mut GateState, rel: &str, bytes: &[u8]) -> Result<(), StateError> {
        let path = self.path(rel);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| StateError::Write { path: rel.into(), source })?;
        }
        write_atomic(&path, bytes).map_err(|source| StateError::Write { path: rel.into(), source })?;
        state.files.insert(rel.to_string(), sha256_hex(bytes));
        self.save_state(state)
    }

    /// Removes a protected file and its recorded hash.
    pub(crate) fn remove_protected(&self, state: &mut GateState, rel: &str) -> Result<(), StateError> {
        match std::fs::remove_file(self.path(rel)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(source) => return Err(StateError::Write { path: rel.into(), source }),
        }
        state.files.remove(rel);
        self.save_state(state)
    }

    pub(crate) fn read_regression_set(&self) -> Result<Option<RegressionSet>, StateError> {
        let set: Option<RegressionSet> = read_json(&self.path(REGRESSION_SET), REGRESSION_SET)?;
        if let Some(s) = &set {
            if s.schema_version > STATE_SCHEMA_VERSION {
                return Err(StateError::TooNew { path: REGRESSION_SET.into(), found: s.schema_version });
            }
            if !(0.0..=1.0).contains(&s.threshold) {
                return Err(StateError::Invalid {
                    path: REGRESSION_SET.into(),
                    message: format!("field `threshold`: {} is not between 0 and 1", s.threshold),
                });
            }
        }
        Ok(set)
    }

    /// `record`: applies the recorded candidate's [`SetUpdate`] to the regression set (a new
    /// set gets `threshold`). Always written, so the first record fixes the set's threshold.
    pub(crate) fn apply_set_update(
        &self,
        state: &mut GateState,
        update: &SetUpdate,
        threshold: f64,
    ) -> Result<(), StateError> {
        let mut set = self.read_regression_set()?.unwrap_or_else(|| RegressionSet::new(threshold));
        update.apply(&mut set);
        self.write_protected(state, REGRESSION_SET, &to_json(&set))
    }

    pub(crate) fn read_results(&self) -> Result<Vec<ResultsRow>, StateError> {
        match std::fs::read_to_string(self.path(RESULTS)) {
            Ok(text) => parse_results(RESULTS, &text),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(source) => Err(StateError::Read { path: RESULTS.into(), source }),
        }
    }

    /// The current results.tsv text with `row` appended (and the header when the file is new).
    pub(crate) fn results_with(&self, row: &ResultsRow) -> Result<Vec<u8>, StateError> {
        let mut text = match std::fs::read_to_string(self.path(RESULTS)) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => format!("{RESULTS_HEADER}\n"),
            Err(source) => return Err(StateError::Read { path: RESULTS.into(), source }),
        };
        // A file from before the provenance columns gets the current header; its rows stay.
        if let Some(rest) = text.strip_prefix(RESULTS_HEADER_V1)
            && rest.starts_with(['\n', '\r'])
        {
            text = format!("{RESULTS_HEADER}{rest}");
        }
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&row.render());
        Ok(text.into_bytes())
    }

    pub(crate) fn read_pending(&self) -> Result<Option<PendingRecord>, StateError> {
        let p: Option<PendingRecord> = read_json(&self.path(PENDING), PENDING)?;
        if let Some(p) = &p
            && p.schema_version > STATE_SCHEMA_VERSION
        {
            return Err(StateError::TooNew { path: PENDING.into(), found: p.schema_version });
        }
        Ok(p)
    }

    pub(crate) fn read_train_results(&self) -> Result<Option<TrainResults>, StateError> {
        let t: Option<TrainResults> = read_json(&self.path(TRAIN_RESULTS), TRAIN_RESULTS)?;
        if let Some(t) = &t
            && t.schema_version > STATE_SCHEMA_VERSION
        {
            return Err(StateError::TooNew { path: TRAIN_RESULTS.into(), found: t.schema_version });
        }
        Ok(t)
    }

    /// SHA-256 of the config file (None when there is none).
    pub(crate) fn config_sha(&self) -> Result<Option<String>, StateError> {
        self.sha_of(&self.config_name)
    }
}

/// The files hcbench writes (and anchors), besides `.gate-state.json`.
const WRITTEN: [&str; 4] = [REGRESSION_SET, RESULTS, PENDING, TRAIN_RESULTS];

fn read_bytes(path: &Path, name: &str) -> Result<Option<Vec<u8>>, StateError> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(StateError::Read { path: name.into(), source }),
    }
}

/// What an anchored state holds, in a few words: "3 recorded iteration(s), best val_score 0.5,
/// a regression set of 2 case(s)".
fn summary(snap: &super::anchor::Snapshot) -> String {
    let mut parts = Vec::new();
    match snap.files.get(RESULTS).map(|b| parse_results(RESULTS, &String::from_utf8_lossy(b))) {
        Some(Ok(rows)) => {
            let best = best(&rows).map_or_else(String::new, |b| format!(", best val_score {b}"));
            parts.push(format!("{} recorded iteration(s){best}", rows.len()));
        }
        _ => parts.push("no recorded iteration".into()),
    }
    if let Some(Ok(set)) = snap.files.get(REGRESSION_SET).map(|b| serde_json::from_slice::<RegressionSet>(b)) {
        parts.push(format!("a regression set of {} case(s)", set.cases.len()));
    }
    if snap.files.contains_key(PENDING) {
        parts.push("a pending record".into());
    }
    parts.join(", ")
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path, name: &str) -> Result<Option<T>, StateError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(StateError::Read { path: name.into(), source }),
    };
    serde_json::from_str(&text).map(Some).map_err(|e| StateError::Invalid { path: name.into(), message: e.to_string() })
}

/// JSON bytes of a state file.
pub(crate) fn to_json<T: Serialize>(value: &T) -> Vec<u8> {
    let mut v = serde_json::to_vec_pretty(value).expect("state serializes");
    v.push(b'\n');
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_tsv_round_trips_exact_scores() {
        let row = ResultsRow {
            iteration: 3,
            val_score: 2.0 / 3.0,
            commit: "abc".into(),
            evals_passed: 4,
            evals_total: 5,
            timestamp: "2026-01-01T00:00:00.000Z".into(),
            provenance: Some(Provenance {
                profile: "gpt".into(),
                profile_digest: "d".repeat(64),
                agent_spec: "s".repeat(64),
            }),
        };
        let text = format!("{RESULTS_HEADER}\n{}", row.render());
        let rows = parse_results(RESULTS, &text).unwrap();
        assert_eq!(rows, vec![row]);
        assert_eq!(rows[0].val_score, 2.0 / 3.0, "no digits are lost");
    }

    #[test]
    fn a_results_tsv_from_before_the_provenance_columns_still_reads_and_is_upgraded() {
        let dir = tempfile::tempdir().unwrap();
        let files = GateFiles::new(dir.path(), &dir.path().join("experiment_config.yaml"));
        let old = format!("{RESULTS_HEADER_V1}\n0\t0.5\tabc\t1\t2\tts\n");
        std::fs::create_dir_all(dir.path().join("workspace")).unwrap();
        std::fs::write(dir.path().join(RESULTS), &old).unwrap();
        let rows = files.read_results().unwrap();
        assert_eq!((rows.len(), rows[0].provenance.is_none()), (1, true));
        let new_row = ResultsRow {
            iteration: 1,
            commit: "def".into(),
            provenance: Some(Provenance { profile: "p".into(), profile_digest: "d".into(), agent_spec: "s".into() }),
            ..rows[0].clone()
        };
        let text = String::from_utf8(files.results_with(&new_row).unwrap()).unwrap();
        assert_eq!(text, format!("{RESULTS_HEADER}\n0\t0.5\tabc\t1\t2\tts\n1\t0.5\tdef\t1\t2\tts\tp\td\ts\n"));
        assert_eq!(parse_results(RESULTS, &text).unwrap()[1], new_row);
        // Under the old header a nine-field row is not something hcbench writes.
        let e = parse_results(RESULTS, &format!("{RESULTS_HEADER_V1}\n1\t0.5\tdef\t1\t2\tts\tp\td\ts\n"));
        assert!(e.unwrap_err().to_string().contains("expected 6"));
    }

    #[test]
    fn a_headerless_or_corrupt_results_tsv_names_the_line() {
        let e = parse_results(RESULTS, "0\t0.5\tabc\t1\t2\tts\n").unwrap_err().to_string();
        assert!(e.starts_with("workspace/results.tsv line 1: expected the header"), "{e}");
        assert!(e.contains("headerless"), "{e}");
        let e = parse_results(RESULTS, "").unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains("empty"), "{e}");
        let text = format!("{RESULTS_HEADER}\n0\t0.5\tabc\t1\t2\tts\n\n1\tzero\tdef\t1\t2\tts\n");
        let e = parse_results(RESULTS, &text).unwrap_err().to_string();
        assert!(e.contains("line 4") && e.contains("`val_score`: `zero`"), "{e}");
        let text = format!("{RESULTS_HEADER}\n0\t0.5\tabc\t1\n");
        assert!(parse_results(RESULTS, &text).unwrap_err().to_string().contains("line 2: has 4"));
        let text = format!("{RESULTS_HEADER}\n0\t0.5\tabc\t3\t2\tts\n");
        assert!(parse_results(RESULTS, &text).unwrap_err().to_string().contains("more than evals_total"));
        assert_eq!(parse_results(RESULTS, &format!("{RESULTS_HEADER}\n")).unwrap(), vec![]);
    }

    #[test]
    fn regression_set_keys_are_written_in_natural_order() {
        let mut s = RegressionSet::new(0.8);
        s.cases = vec!["case-2".into(), "case-10".into()];
        for id in ["case-10", "case-2", "case-1"] {
            s.last_results.insert(id.into(), 1.0);
        }
        let text = String::from_utf8(to_json(&s)).unwrap();
        let (a, b, c) =
            (text.find("\"case-1\"").unwrap(), text.find("\"case-2\":").unwrap(), text.find("\"case-10\":").unwrap());
        assert!(a < b && b < c, "{text}");
        assert!(!text.contains("promotion_streaks"), "empty streaks are not written");
        assert!(text.contains("\"tasks\": ["), "the file keeps auto-harness's keys: {text}");
        let back: RegressionSet = serde_json::from_str(&text).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn protection_catches_changes_deletions_and_foreign_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("experiment_config.yaml"), "epochs: 1\n").unwrap();
        let files = GateFiles::new(root, &root.join("experiment_config.yaml"));
        let mut state = files.load_state().unwrap();
        let (t, new) = files.check(&mut state).unwrap();
        assert!(t.is_empty());
        assert_eq!(new, vec!["experiment_config.yaml".to_string()], "the config is protected from first sight");

        files.write_protected(&mut state, REGRESSION_SET, b"{}").unwrap();
        let mut state = files.load_state().unwrap();
        assert!(files.check(&mut state).unwrap().0.is_empty(), "what hcbench wrote is fine");

        std::fs::write(root.join(REGRESSION_SET), b"{ }").unwrap();
        std::fs::write(root.join(RESULTS), b"x").unwrap();
        std::fs::write(root.join("experiment_config.yaml"), "epochs: 2\n").unwrap();
        let (t, _) = files.check(&mut state).unwrap();
        let names: Vec<&str> = t.iter().map(Tamper::file).collect();
        assert_eq!(names, [REGRESSION_SET, RESULTS, "experiment_config.yaml"]);
        assert!(t[0].describe().contains("changed by something other than hcbench"));
        assert!(t[1].describe().contains("never wrote it"));

        // A human accepts; the audit log keeps what happened.
        for f in ["suite.json", "workspace/results.tsv", "./experiment_config.yaml"] {
            files.accept(&mut state, f, "hcbench gate").unwrap();
        }
        let mut state = files.load_state().unwrap();
        assert!(files.check(&mut state).unwrap().0.is_empty());
        assert_eq!(state.accepted.len(), 3);
        assert!(files.accept(&mut state, "Cargo.toml", "x").unwrap_err().to_string().contains("not a gate state file"));

        std::fs::remove_file(root.join(REGRESSION_SET)).unwrap();
        let (t, _) = files.check(&mut state).unwrap();
        assert!(matches!(&t[0], Tamper::Deleted { file, .. } if file == REGRESSION_SET));
    }
}
