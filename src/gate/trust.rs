//! What the gate trusts besides the candidate's files, and the human's word that overrides it.
//!
//! The file guard and the state protection cover files in git and the gate's own state. Four
//! more inputs decide a measurement and live elsewhere, so each is checked here, before any
//! cell runs, and each override a human gives is written to the audit log in
//! `.gate-state.json`:
//! - **the config** given with `--config` (way 2 of issue 15): anything but the project's
//!   `experiment_config.yaml` needs `--accept-config`, once per content, and so does a config
//!   that turns the file guard off (set before the very first gate, nothing else would see it);
//! - **the profile's definition** (way 3): `models.toml`, `--models`, `HCBENCH_MODELS` and
//!   `HCBENCH_LOCAL_LLM_URL` decide what a profile name means and none is in git, so every
//!   record keeps the definition's digest ([`crate::model::definition`]) and a different one
//!   needs `--accept-profile-change`; a profile defined as the oracle under another name is
//!   refused outright;
//! - **the history** since the last record: `record`'s check (every commit touches only the
//!   allowlist) also runs at the gate's start, so a committed forbidden change costs no cell;
//! - **the train results** Step 3 reads: an entry written by another profile, definition or
//!   agent spec is not trusted (Step 3 re-runs that case instead).
//!
//! Every refusal here is exit 2, not 1: the problem is not the candidate (reverting it would
//! change nothing), it is a setup only a human can vouch for or repair.

use std::path::Path;

use git2::Oid;

use super::GateError;
use super::config::{Allowlist, CONFIG_FILE, Config};
use super::git::Git;
use super::git::short;
use super::state::{Acceptance, GateFiles, GateState, RESULTS, ResultsRow, TrainResults};
use crate::model::{Profile, ProfileKind};

/// Audit-log names of the overrides (the `file` of an entry).
pub(crate) const HISTORY: &str = "(history)";

fn config_entry(name: &str) -> String {
    format!("(config) {name}")
}

fn profile_entry(name: &str) -> String {
    format!("(profile) {name}")
}

#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error(
        "--config {config}: not the project's {CONFIG_FILE}; a config given with --config decides the allowlist, the profile and every threshold, so a human must vouch for it: `{command} --config {config} --accept-config` (logged in workspace/.gate-state.json, valid while the file's content stays the same), or leave out --config"
    )]
    ConfigNotAccepted { config: String, command: &'static str },
    #[error(
        "{config} sets `file_guard` off: the gate would then not check what changed outside the allowlist (the benchmark, the fixtures, hcbench itself), so a human must vouch for this config: `{command} --accept-config` (logged in workspace/.gate-state.json, valid while the file's content stays the same), or remove `file_guard` from {config}"
    )]
    FileGuardOff { config: String, command: &'static str },
    #[error(
        "profile `{profile}` is defined as the oracle ({defined_in}: {text}): the gate would score the benchmark's known-good actions under another name; give `{profile}` its real definition, or set `profile: oracle` in the config to measure the oracle openly"
    )]
    OracleInDisguise { profile: String, defined_in: String, text: String },
    #[error(
        "the gated profile changed since the last record: row {row} of {RESULTS} was measured with profile `{recorded_profile}` (definition {recorded_digest}), the gate now runs `{profile}` (definition {digest}) from {defined_in}: {text}; restore the definition, or if a human changed it on purpose: hcbench gate --accept-profile-change (logged in workspace/.gate-state.json)"
    )]
    ProfileChanged {
        row: usize,
        recorded_profile: String,
        recorded_digest: String,
        profile: String,
        digest: String,
        defined_in: String,
        text: String,
    },
    #[error(
        "{message}; those commits are already in HEAD, so reverting the candidate cannot undo them (no cell was run): {}, or if a human made them on purpose: hcbench gate --accept-history (logged in workspace/.gate-state.json)",
        undo_advice(.base)
    )]
    History { message: String, base: String },
}

/// How to take committed forbidden changes out of the history without losing them: the advice
/// of both history refusals (the gate's at its start, record's), which works when followed.
pub(crate) fn undo_advice(base: &str) -> String {
    format!(
        "undo them without losing work with `git reset --soft {base}` (their changes stay in the working tree, where the gate's file guard lists each with the command that reverts it)"
    )
}

impl From<TrustError> for GateError {
    fn from(e: TrustError) -> GateError {
        GateError::Trust(Box::new(e))
    }
}

/// A human's override the gate just logged, for its output.
pub(crate) struct Accepted(pub String);

/// Way 2: a config other than `<root>/experiment_config.yaml` is used only when a human
/// accepted its current content, now (`accept`, logged) or before (an entry in the audit log
/// with the same SHA-256). Returns what was accepted now.
pub(crate) fn accept_config(
    files: &GateFiles,
    state: &mut GateState,
    cfg: &Config,
    accept: bool,
    command: &'static str,
) -> Result<Option<Accepted>, GateError> {
    // The project's own config is in git and covered by the file guard, unless it turns the
    // guard off: then nothing stops an agent from having committed that before the very first
    // gate, so the content that disables the guard needs a human's word like any other config.
    let default = is_default_config(&files.root, &cfg.path);
    if default && cfg.file_guard {
        return Ok(None);
    }
    let entry = config_entry(&files.config_name);
    let sha = files.config_sha()?;
    let accepted_before = state.accepted.iter().any(|a| a.file == entry && a.sha256 == sha && sha.is_some());
    if accepted_before {
        return Ok(None);
    }
    if !accept {
        let config = files.config_name.clone();
        return Err(if default {
            TrustError::FileGuardOff { config, command }
        } else {
            TrustError::ConfigNotAccepted { config, command }
        }
        .into());
    }
    let previous = state.accepted.iter().rev().find(|a| a.file == entry).and_then(|a| a.sha256.clone());
    let shown = sha.as_deref().map(short).unwrap_or("none").to_string();
    files.audit(state, Acceptance::now(entry, previous, sha, format!("{command} --accept-config")))?;
    Ok(Some(Accepted(format!("--config {} (sha256 {shown}) as a config a human vouches for", files.config_name))))
}

/// True when `path` is the project's own `experiment_config.yaml`, however it was spelt.
fn is_default_config(root: &Path, path: &Path) -> bool {
    let default = root.join(CONFIG_FILE);
    path == default || matches!((path.canonicalize(), default.canonicalize()), (Ok(a), Ok(b)) if a == b)
}

/// What the checks before the first cell need.
pub(crate) struct BeforeCells<'a> {
    pub files: &'a GateFiles,
    pub cfg: &'a Config,
    pub profile: &'a Profile,
    pub rows: &'a [ResultsRow],
    pub git: Option<&'a Git>,
    pub head: Option<Oid>,
    pub accept_profile_change: bool,
    pub accept_history: bool,
}

/// Ways 3 and the history: the profile is no oracle in disguise and is defined as when last
/// recorded, and no commit since the last record touches a file outside the allowlist. Runs
/// after Step 0, so the rows and the audit log it reads are the ones hcbench wrote. Returns
/// the overrides logged now.
pub(crate) fn check_before_cells(c: &BeforeCells<'_>, state: &mut GateState) -> Result<Vec<Accepted>, GateError> {
    let mut accepted = Vec::new();
    accepted.extend(check_profile(c, state)?);
    if let (Some(g), Some(head), true) = (c.git, c.head, c.cfg.file_guard) {
        accepted.extend(check_history(c, g, head, state)?);
    }
    Ok(accepted)
}

fn check_profile(c: &BeforeCells<'_>, state: &mut GateState) -> Result<Option<Accepted>, GateError> {
    let (p, def) = (c.profile, &c.profile.definition);
    if matches!(p.kind, ProfileKind::Oracle) && p.name != "oracle" {
        return Err(TrustError::OracleInDisguise {
            profile: p.name.clone(),
            defined_in: def.source.clone(),
            text: def.one_line(),
        }
        .into());
    }
    // The last row that knows its definition (rows from before these columns do not).
    let last = c
        .rows
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, r)| r.provenance.as_ref().filter(|v| v.profile_digest != "-").map(|v| (i + 1, v)));
    let Some((row, recorded)) = last else { return Ok(None) };
    if recorded.profile == p.name && recorded.profile_digest == def.digest {
        return Ok(None);
    }
    let entry = profile_entry(&p.name);
    let accepted_before = state.accepted.iter().any(|a| {
        a.file == entry
            && a.previous.as_deref() == Some(recorded.profile_digest.as_str())
            && a.sha256.as_deref() == Some(def.digest.as_str())
    });
    if accepted_before {
        return Ok(None);
    }
    if !c.accept_profile_change {
        return Err(TrustError::ProfileChanged {
            row,
            recorded_profile: recorded.profile.clone(),
            recorded_digest: short(&recorded.profile_digest).to_string(),
            profile: p.name.clone(),
            digest: short(&def.digest).to_string(),
            defined_in: def.source.clone(),
            text: def.one_line(),
        }
        .into());
    }
    c.files.audit(
        state,
        Acceptance::now(
            entry,
            Some(recorded.profile_digest.clone()),
            Some(def.digest.clone()),
            "hcbench gate --accept-profile-change",
        ),
    )?;
    Ok(Some(Accepted(format!(
        "the definition of profile `{}` ({}: {}; definition {}, was {} `{}`)",
        p.name,
        def.source,
        def.one_line(),
        short(&def.digest),
        short(&recorded.profile_digest),
        recorded.profile
    ))))
}

fn check_history(
    c: &BeforeCells<'_>,
    g: &Git,
    head: Oid,
    state: &mut GateState,
) -> Result<Option<Accepted>, GateError> {
    // A last recorded commit that is not in HEAD's history (an imported results.tsv, a
    // rewritten branch) gives no commits to check here; `record` refuses it (condition 5).
    let Ok(Some(base)) = history_base(g, c.rows, state, head)? else { return Ok(None) };
    let outside = outside_allowlist(g, &c.cfg.allowlist, base, head)?;
    if outside.is_empty() {
        return Ok(None);
    }
    if !c.accept_history {
        let message = outside_message(base, &c.cfg.allowlist, &outside);
        return Err(TrustError::History { message, base: short(&base.to_string()).to_string() }.into());
    }
    c.files.audit(
        state,
        Acceptance::now(HISTORY, last_recorded(c.rows), Some(head.to_string()), "hcbench gate --accept-history"),
    )?;
    // Counts only: the paths are in the refusal and in `git log`, and a note is no place for
    // the names of test cases' files.
    Ok(Some(Accepted(format!(
        "the history up to HEAD {}: {} change(s) outside the allowlist since {}",
        short(&head.to_string()),
        outside.len(),
        short(&base.to_string())
    ))))
}

/// The last commit recorded in git (rows recorded outside git have `-`).
pub(crate) fn last_recorded(rows: &[ResultsRow]) -> Option<String> {
    rows.iter().rev().find(|r| r.commit != "-").map(|r| r.commit.clone())
}

/// Where the history check starts: the last commit a human accepted the history up to since
/// the last record (`--accept-history` of `gate` or `record`), else the last recorded commit.
/// `Ok(None)`: nothing recorded in git yet. `Err(why)`: the last recorded commit is not in
/// HEAD's history, which only a human can accept.
pub(crate) fn history_base(
    g: &Git,
    rows: &[ResultsRow],
    state: &GateState,
    head: Oid,
) -> Result<Result<Option<Oid>, String>, GateError> {
    let last = last_recorded(rows);
    for a in state.accepted.iter().rev().filter(|a| a.file == HISTORY && a.previous == last) {
        if let Some(id) = a.sha256.as_deref().and_then(|s| g.resolve(s))
            && g.is_ancestor(id, head)?
        {
            return Ok(Ok(Some(id)));
        }
    }
    let Some(c) = last else { return Ok(Ok(None)) };
    Ok(match g.resolve(&c) {
        Some(id) if g.is_ancestor(id, head)? => Ok(Some(id)),
        Some(_) => {
            Err(format!("the last recorded commit {} is not an ancestor of HEAD (history rewritten?)", short(&c)))
        }
        None => Err(format!("the last recorded commit {} is not in this repository", short(&c))),
    })
}

/// Every commit since `base` that touches a file outside the allowlist (and outside
/// `workspace/`), as `<commit> (<summary>): <path>`.
pub(crate) fn outside_allowlist(
    g: &Git,
    allowlist: &Allowlist,
    base: Oid,
    head: Oid,
) -> Result<Vec<String>, GateError> {
    let mut outside = Vec::new();
    for c in g.commits_since(Some(base), head)? {
        for p in &c.paths {
            let ok = match g.root_rel(p) {
                Some(rel) => allowlist.allows(&rel) || rel == "workspace" || rel.starts_with("workspace/"),
                None => false,
            };
            if !ok {
                outside.push(format!("{} ({}): {p}", short(&c.id), c.summary));
            }
        }
    }
    Ok(outside)
}

pub(crate) fn outside_message(base: Oid, allowlist: &Allowlist, outside: &[String]) -> String {
    format!(
        "commits since {} change files outside the allowlist ({}): {}",
        short(&base.to_string()),
        allowlist.describe(),
        outside.join("; ")
    )
}

/// Train results Step 3 did not trust, for a note.
pub(crate) struct Stale {
    pub cases: Vec<String>,
    /// Why the first of them is stale.
    pub example: String,
}

/// Step 3's view of train_results.json: an entry counts only when the gated profile (same
/// name, same definition digest) wrote it with the candidate's agent spec or HEAD's (the loop
/// trains at HEAD, then edits). Any other entry, e.g. one an oracle run wrote, would pass
/// cases the candidate never passed and silence their promotion, so it is marked unknown
/// (reward 0): Step 3 re-runs it like a failing case instead of trusting it.
pub(crate) fn trusted_train_results(
    mut t: TrainResults,
    profile: &Profile,
    specs: &[&str],
) -> (TrainResults, Option<Stale>) {
    let digest = profile.definition.digest.as_str();
    let mut stale = Vec::new();
    let mut example = None;
    for (id, case) in t.cases.iter_mut() {
        let why = if case.profile != profile.name {
            Some(format!("profile `{}`, not `{}`", case.profile, profile.name))
        } else if case.profile_digest.as_deref() != Some(digest) {
            Some(format!(
                "profile `{}` with definition {}, not {}",
                case.profile,
                case.profile_digest.as_deref().map(short).unwrap_or("(not recorded)"),
                short(digest)
            ))
        } else if !specs.contains(&case.agent_spec.as_str()) {
            Some(format!("agent spec {}, neither the candidate's nor HEAD's", short(&case.agent_spec)))
        } else {
            None
        };
        if let Some(why) = why {
            example.get_or_insert_with(|| format!("{id}: written by {why}"));
            case.reward = 0.0;
            stale.push(id.clone());
        }
    }
    let stale = example.map(|example| Stale { cases: stale, example });
    (t, stale)
}

/// The digest of HEAD's agent spec (`agent_dir` read from HEAD's tree), the spec the loop's
/// train run usually measured; None when HEAD's spec does not load.
pub(crate) fn head_spec_digest(g: &Git, head: Oid, agent_dir: &str) -> Result<Option<String>, GateError> {
    Ok(head_spec(g, head, agent_dir)?.ok().map(|s| s.digest))
}

/// The agent spec of `head`'s committed `agent_dir` (extracted to a temporary folder, loaded as
/// the gate loads the candidate's); the outer error is git's or the folder's, the inner the
/// spec's own.
pub(crate) fn head_spec(
    g: &Git,
    head: Oid,
    agent_dir: &str,
) -> Result<Result<crate::agent::spec::AgentSpec, crate::agent::spec::SpecError>, GateError> {
    let tmp = tempfile::tempdir()
        .map_err(|source| GateError::Io { context: "cannot create a temporary directory".into(), source })?;
    let prefix = format!("{agent_dir}/");
    g.extract(head, &|p: &str| p.starts_with(&prefix), tmp.path())?;
    Ok(super::candidate_spec(tmp.path(), agent_dir))
}
