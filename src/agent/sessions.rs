//! The loop of a multi-session case: several sessions, each a fresh run of the step loop.
//!
//! Nothing of a session's context carries over to the next: no observations, no working
//! memory, no compacted summary, a new provider. What carries over is the workspace (the
//! agent's code, its `feature_list.json`, `progress.log`, `init.sh` and its git repository),
//! which is the point: the case measures whether an agent can leave a project in a state its
//! next session can pick up. Session 1 gets the case's initializer prompt, the others its
//! coding prompt, each followed by the task (`bench::sessions`).
//!
//! Step numbers run on across sessions (session 2's first turn is the step after session 1's
//! last), so every step of the trace is unique and the summary's `steps` is the cell's total;
//! each session's budget is its own (`sessions.step_budget`), and the context's step counter
//! starts at 1 in each. The cell's wall-clock limit bounds all sessions together.
//!
//! After each session the hidden features are checked (one verifier command per feature,
//! `features:` of the case), beside what the agent's `feature_list.json` claims; both go into
//! `session_finished`, so the trace shows the real progress per session, not only at the end.
//! That costs one short process per feature per session, which HC-Bench's small cases afford,
//! and it is the only honest way to know what was working after session 2 once session 3 has
//! changed the code. The last session's verdict is the case's: it becomes verifier checks and
//! metrics, and a feature marked passing that fails its check is a false claim. The checks'
//! own cost (their private folders, less the commands) is the cell's scoring cost
//! (`process::Part::Scoring`), so the cell's cost event shows it apart.
//!
//! Each later session's repo map is of the workspace the sessions before left. It is looked up
//! by that workspace's files (their paths and digests: a cell run again whose sessions left the
//! same files finds the map, in the process or stored, `repomap::later_session_map`); otherwise
//! the index is kept from one session to the next and brought up to date ([`RepoIndex::update`]):
//! the files a session did not change keep their entries and parses, and the map is the one a
//! fresh build would make.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use super::checkpoint::{Checkpointer, ResumedCell, SessionProgress};
use super::repomap::RepoIndex;
use super::{Cell, CellPlan, Recorder, Start, score};
use crate::bench::sessions::{SessionKind, SessionsSpec};
use crate::bench::{Case, VerifierSpec};
use crate::process::{self, Part, WaitClock};
use crate::sandbox::Sandbox;
use crate::trace::event::{Check, EventBody};

/// The file in which the agent tracks its features.
pub const FEATURE_LIST: &str = "feature_list.json";

/// Bytes of `feature_list.json` read at most; a larger file is not a feature list.
const FEATURE_LIST_LIMIT: u64 = 1 << 20;

/// Runs every session of a multi-session case, then scores the workspace. A resumed cell
/// continues inside the session its checkpoint is of; the sessions before it are not run
/// again (what they left is in the checkpoint's [`SessionProgress`] and in the workspace).
pub(super) async fn work(
    cell: &Cell<'_>,
    rec: &mut Recorder,
    started: Instant,
    mut resumed: Option<ResumedCell>,
) -> io::Result<()> {
    let Cell { plan, ws, trace, sandbox, .. } = *cell;
    let case = plan.case.as_ref();
    let spec = case.sessions.as_ref().expect("sessions::work runs multi-session cases only");
    super::prepare_sandbox(cell);
    let mut at = resumed.as_ref().and_then(|r| r.state.session.clone()).unwrap_or_else(SessionProgress::first);
    let mut checkpoints: Option<Checkpointer> = None;
    // The index of the last session's map, which the next session's map updates.
    let mut map: Option<RepoIndex> = None;
    let mut last = None;
    // The case the feature checks run as, made once: a clone of the case per check (12 in a
    // case of four sessions and three features, each with the oracle's whole script) was a
    // measurable part of a sessions cell's own time. The checks do not use the script.
    // The sessions' own cases are made from it too: the providers are made from `case`, and
    // nothing else of the loop reads the script.
    let bare = Case { oracle: Vec::new(), ..case.clone() };
    let mut probe = bare.clone();
    while at.index <= spec.count {
        let index = at.index;
        let kind = SessionKind::of(index);
        let t0 = Instant::now();
        // The session's own case: its prompt and its budget; everything else is the case's.
        let session_case =
            Case { prompt: spec.prompt(kind, &case.prompt), step_budget: spec.step_budget, ..bare.clone() };
        let session_plan = CellPlan { case: Arc::new(session_case), ..plan.clone() };
        let session_cell = Cell { plan: &session_plan, ..*cell };
        let (provider, start) = match resumed.take() {
            // Its `session_started` is in the trace already, before the checkpoint.
            Some(mut r) => {
                let provider = r.session_provider.take().expect("a resumed session has its model");
                (provider, Start::Resumed(r))
            }
            None => {
                rec.emit(EventBody::SessionStarted {
                    index,
                    role: kind.as_str().into(),
                    step_budget: spec.step_budget,
                    first_step: at.first_step,
                })?;
                let checkpoints = match checkpoints.take() {
                    Some(mut c) => {
                        c.next_session();
                        Some(c)
                    }
                    None => WaitClock::time(Part::Checkpoints, || {
                        let store = super::repo_map_store(plan);
                        Checkpointer::for_fresh(ws, &plan.cell_dir, store.as_deref(), plan.checkpoint_interval)
                    }),
                };
                let provider = plan.profile.provider_for_session(case, plan.epoch, (index - 1) as usize);
                (provider, Start::Fresh { checkpoints, session: Some(at.clone()), map: map.take() })
            }
        };
        let mut end = super::steps(&session_cell, rec, provider, at.first_step, start, started).await?;
        checkpoints = end.checkpoints.take();
        map = end.map.take();
        at.first_step += end.turns;
        for (path, step) in &end.first_reads {
            at.first_reads.entry(path.clone()).or_insert(*step);
        }

        let claims = FeatureList::read(ws);
        // The checks get a copy of the trace as it is now.
        rec.flush()?;
        // The checks are the session's scoring: their own cost (the wrapper's private folder,
        // the command line, the results) is charged to it, apart from the commands they run.
        let verdicts = WaitClock::time_async(Part::Scoring, check_features(&mut probe, spec, ws, trace, sandbox)).await;
        let verified: Vec<String> = verdicts.iter().filter(|v| v.passed).map(|v| v.id.clone()).collect();
        let false_claims = claims.false_claims(&verdicts);
        at.finished.push((verified.len(), claims.marked.len()));
        at.index += 1;
        rec.emit(EventBody::SessionFinished {
            index,
            role: kind.as_str().into(),
            steps_used: end.turns,
            stop_reason: end.stop_reason.into(),
            marked_passing: claims.marked.clone(),
            verified_passing: verified,
            false_claims,
            head: WaitClock::time_async(Part::Scoring, git_head(case, ws, sandbox)).await,
            elapsed_ms: t0.elapsed().as_millis() as u64,
        })?;
        let provider_failed = end.provider_failure.is_some();
        last = Some((end, claims, verdicts));
        if provider_failed {
            // The model is gone: later sessions would fail the same way.
            break;
        }
    }
    let (mut end, claims, verdicts) = last.expect("a multi-session case has at least 2 sessions");
    end.first_reads = at.first_reads;
    let extra = verdict(spec, &claims, &verdicts, &at.finished);
    super::conclude(cell, rec, end, started, Some(extra)).await
}

/// One feature's hidden check after a session.
#[derive(Debug, Clone)]
struct FeatureVerdict {
    id: String,
    passed: bool,
    /// The check's output, or why it did not run.
    detail: String,
}

/// Runs every feature's hidden check in the workspace, as a verifier command (in the cell's
/// sandbox, on a copy of the verifier folder, through the wrapper for Python checks). `probe`
/// is the case, its verifier replaced by each check in turn.
async fn check_features(
    probe: &mut Case,
    spec: &SessionsSpec,
    ws: &Path,
    trace: &Path,
    sandbox: &Sandbox,
) -> Vec<FeatureVerdict> {
    let facts = score::TraceFacts { denials: 0, steps: 0, first_reads: BTreeMap::new() };
    let mut out = Vec::with_capacity(spec.features.len());
    for feature in &spec.features {
        probe.verifier = VerifierSpec { command: Some(feature.check.clone()), ..Default::default() };
        let run = score::run_verifier(probe, ws, trace, &facts, sandbox).await;
        let detail = run.checks.first().map(|c| c.detail.clone()).unwrap_or_default();
        let passed = run.passed && !run.timed_out && run.error.is_none();
        let detail = if run.timed_out { format!("the check timed out\n{detail}") } else { detail };
        out.push(FeatureVerdict { id: feature.id.clone(), passed, detail });
    }
    out
}

/// What the agent's `feature_list.json` says: the features it lists and those it marks as
/// passing, or why it could not be read.
#[derive(Debug, Clone, Default, PartialEq)]
struct FeatureList {
    listed: Vec<String>,
    marked: Vec<String>,
    problem: Option<String>,
}

impl FeatureList {
    /// Reads `feature_list.json`: a JSON list of `{"id": ..., "passes": true|false, ...}`
    /// (or an object holding that list under `features`). Only a regular file is read, never
    /// through a symbolic link: the agent made it, and it must not point hcbench elsewhere.
    fn read(ws: &Path) -> FeatureList {
        let path = ws.join(FEATURE_LIST);
        let broken = |problem: String| FeatureList { problem: Some(problem), ..Default::default() };
        match std::fs::symlink_metadata(&path) {
            Err(_) => return broken(format!("{FEATURE_LIST} does not exist")),
            Ok(m) if !m.file_type().is_file() => return broken(format!("{FEATURE_LIST} is not a regular file")),
            Ok(m) if m.len() > FEATURE_LIST_LIMIT => return broken(format!("{FEATURE_LIST} is larger than 1 MiB")),
            Ok(_) => {}
        }
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => return broken(format!("cannot read {FEATURE_LIST}: {e}")),
        };
        Self::parse(&text)
    }

    fn parse(text: &str) -> FeatureList {
        let broken = |problem: String| FeatureList { problem: Some(problem), ..Default::default() };
        let value: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(e) => return broken(format!("{FEATURE_LIST} is not valid JSON: {e}")),
        };
        let entries = match value.get("features").unwrap_or(&value).as_array() {
            Some(a) => a.clone(),
            None => return broken(format!("{FEATURE_LIST} is not a list of features")),
        };
        let mut list = FeatureList::default();
        for entry in &entries {
            let Some(id) = entry.get("id").and_then(Value::as_str) else {
                list.problem.get_or_insert_with(|| format!("an entry of {FEATURE_LIST} has no string `id`"));
                continue;
            };
            if !list.listed.iter().any(|l| l == id) {
                list.listed.push(id.to_string());
            }
            if entry.get("passes") == Some(&Value::Bool(true)) && !list.marked.iter().any(|m| m == id) {
                list.marked.push(id.to_string());
            }
        }
        list
    }

    /// Features marked passing whose hidden check fails, in the case's order.
    fn false_claims(&self, verdicts: &[FeatureVerdict]) -> Vec<String> {
        verdicts.iter().filter(|v| !v.passed && self.marked.contains(&v.id)).map(|v| v.id.clone()).collect()
    }
}

/// The case's verdict on its features after the last session: a check per feature, the
/// feature list's, the false claims', and the metrics reports show.
fn verdict(
    spec: &SessionsSpec,
    claims: &FeatureList,
    verdicts: &[FeatureVerdict],
    per_session: &[(usize, usize)],
) -> score::Extra {
    let mut checks = Vec::new();
    for v in verdicts {
        let marked = if claims.marked.contains(&v.id) { "marked passing" } else { "not marked passing" };
        let detail = if v.passed {
            format!("passes the hidden check ({marked})")
        } else {
            let first = v.detail.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            format!("fails the hidden check ({marked}): {}", crate::util::truncate_str(first, 300))
        };
        checks.push(Check { name: format!("feature:{}", v.id), passed: v.passed, detail });
    }
    let unlisted: Vec<&str> =
        spec.features.iter().map(|f| f.id.as_str()).filter(|id| !claims.listed.iter().any(|l| l == id)).collect();
    let (passed, detail) = match (&claims.problem, unlisted.is_empty()) {
        (Some(p), _) => (false, p.clone()),
        (None, false) => (false, format!("{FEATURE_LIST} does not list {}", unlisted.join(", "))),
        (None, true) => (true, format!("{FEATURE_LIST} lists every feature")),
    };
    checks.push(Check { name: "feature_list".into(), passed, detail });
    let false_claims = claims.false_claims(verdicts);
    checks.push(Check {
        name: "false_claims".into(),
        passed: false_claims.is_empty(),
        detail: if false_claims.is_empty() {
            "no feature is marked passing that fails its hidden check".into()
        } else {
            format!("marked passing but failing the hidden check: {}", false_claims.join(", "))
        },
    });

    let passing = verdicts.iter().filter(|v| v.passed).count();
    let total = spec.features.len();
    let mut metrics = BTreeMap::new();
    metrics.insert("features_total".into(), Value::from(total));
    metrics.insert("features_passing".into(), Value::from(passing));
    metrics.insert("features_marked".into(), Value::from(claims.marked.len()));
    metrics.insert("feature_score".into(), Value::from(if total == 0 { 0.0 } else { passing as f64 / total as f64 }));
    metrics.insert("false_claims".into(), Value::from(false_claims.len()));
    metrics.insert("false_claim_features".into(), Value::from(false_claims));
    metrics.insert("sessions_run".into(), Value::from(per_session.len()));
    metrics.insert("features_per_session".into(), per_session.iter().map(|(v, _)| Value::from(*v)).collect());
    metrics.insert("marked_per_session".into(), per_session.iter().map(|(_, m)| Value::from(*m)).collect());
    score::Extra { checks, metrics }
}

/// The commit the workspace's repository is at, asked of git in the cell's sandbox (the
/// repository is the agent's: hcbench does not read its files itself). None before the first
/// commit or without a repository.
async fn git_head(case: &Case, ws: &Path, sandbox: &Sandbox) -> Option<String> {
    let argv = ["git", "rev-parse", "--verify", "--quiet", "HEAD"].map(String::from).to_vec();
    let out = process::run(&score::command_spec(case, argv, ws, sandbox)).await.ok()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let head = stdout.trim();
    (out.success() && head.len() == 40 && head.bytes().all(|b| b.is_ascii_hexdigit())).then(|| head.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_feature_list_gives_what_is_listed_and_what_is_marked() {
        let list = FeatureList::parse(
            r#"[{"id": "add", "passes": true}, {"id": "sub", "passes": false}, {"id": "mul", "passes": "yes"}]"#,
        );
        assert_eq!(list.listed, ["add", "sub", "mul"]);
        assert_eq!(list.marked, ["add"], "only a JSON true marks a feature passing");
        assert_eq!(list.problem, None);
        let wrapped = FeatureList::parse(r#"{"features": [{"id": "add", "passes": true}]}"#);
        assert_eq!(wrapped.marked, ["add"]);
        assert!(FeatureList::parse("{oops").problem.unwrap().contains("not valid JSON"));
        assert!(FeatureList::parse(r#"[{"name": "add"}]"#).problem.unwrap().contains("no string `id`"));
    }

    #[test]
    fn a_feature_marked_passing_that_fails_is_a_false_claim() {
        let spec = SessionsSpec {
            count: 2,
            step_budget: 5,
            initializer: "i".into(),
            coding: "c".into(),
            features: ["add", "sub"]
                .map(|id| crate::bench::sessions::Feature { id: id.into(), check: vec!["true".into()] })
                .to_vec(),
        };
        let claims = FeatureList::parse(r#"[{"id": "add", "passes": true}, {"id": "sub", "passes": true}]"#);
        let verdicts = vec![
            FeatureVerdict { id: "add".into(), passed: true, detail: String::new() },
            FeatureVerdict { id: "sub".into(), passed: false, detail: "AssertionError: 1 != 2".into() },
        ];
        let extra = verdict(&spec, &claims, &verdicts, &[(0, 0), (1, 2)]);
        let failed: Vec<&str> = extra.checks.iter().filter(|c| !c.passed).map(|c| c.name.as_str()).collect();
        assert_eq!(failed, ["feature:sub", "false_claims"]);
        assert_eq!(extra.metrics["false_claims"], Value::from(1));
        assert_eq!(extra.metrics["false_claim_features"], serde_json::json!(["sub"]));
        assert_eq!(extra.metrics["features_per_session"], serde_json::json!([0, 1]));
        assert_eq!(extra.metrics["feature_score"], Value::from(0.5));
    }
}
