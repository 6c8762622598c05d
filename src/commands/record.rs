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
//! 5. with the file guard on, no commit since the last recorded commit (or, for the first
//!    record, since the gate's commit) touches a file outside the allowlist.
//!
//! Anything else is refused with exit 1 and the reason; the pending record is consumed by a
//! successful record, so a score can be recorded once.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use super::CommandError;
use super::gate::{Out, load_spec};
use crate::cli::RecordArgs;
use crate::exit;
use crate::gate::config::Config;
use crate::gate::git::{Git, files_without_git};
use crate::gate::state::{Acceptance, GateFiles, PENDING, RESULTS, ResultsRow};
use crate::gate::steps::fmt_num;
use crate::lock::FileLock as GateLock;

pub fn record(root: &Path, args: RecordArgs) -> Result<i32, CommandError> {
    let out = Out::new(args.format);
    let json_out = args.format == crate::cli::GateFormat::Json;
    let cfg = Config::load(root, args.config.as_deref())?;
    let files = GateFiles::new(root, &cfg.path);
    if !args.wait.is_finite() || args.wait < 0.0 {
        return Err(CommandError::Usage(format!("--wait {}: give a number of seconds >= 0", args.wait)));
    }
    let _lock =
        GateLock::acquire(&files.lock_path(), "record", Duration::from_secs_f64(args.wait.min(1e9)), |holder| {
            out.line(format!("[record] waiting for the workspace lock ({holder})"));
        })?;
    let mut gstate = files.load_state()?;
    let refuse = |reasons: Vec<String>| -> Result<i32, CommandError> {
        for r in &reasons {
            out.line(format!("[record] refused: {r}"));
        }
        if json_out {
            println!(
                "{}",
                serde_json::to_string_pretty(&json!({ "recorded": false, "reasons": reasons })).expect("json")
            );
        }
        Ok(exit::FAILED)
    };

    let (tampered, _) = files.check(&mut gstate)?;
    if !tampered.is_empty() {
        return refuse(
            tampered
                .iter()
                .map(|t| {
                    format!(
                        "{}; restore it, or if a human changed it on purpose: hcbench gate --accept-state-change {}",
                        t.describe(),
                        t.file()
                    )
                })
                .collect(),
        );
    }
    let rows = files.read_results()?;
    let Some(pending) = files.read_pending()? else {
        return refuse(vec![format!(
            "no passing gate run to record: {PENDING} does not exist; run `hcbench gate` (it leaves the pending record when every step passes), commit, then record"
        )]);
    };
    if files.config_sha()? != pending.config_sha256 {
        return refuse(vec![format!("{} changed since the gate passed; run the gate again", files.config_name)]);
    }
    let allow = |p: &str| cfg.allowlist.allows(p);
    let mut reasons = Vec::new();
    let commit = match Git::open(root)? {
        Some(g) => {
            let head = g.head()?.ok_or_else(|| {
                CommandError::Usage(format!(
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
            // 2. What was gated is what was committed.
            let committed = g.files_at(head, &allow)?;
            reasons.extend(binding_differences(&pending.candidate, &committed));
            // 3. HEAD's agent spec is the one the gate ran.
            let tmp = tempfile::tempdir().map_err(|e| CommandError::Internal(e.into()))?;
            let agent_dir = cfg.agent_dir.clone();
            g.extract(head, &|p: &str| p.starts_with(&format!("{agent_dir}/")), tmp.path())?;
            let spec = load_spec(tmp.path(), &cfg.agent_dir)?;
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
                let last = rows.iter().rev().find(|r| r.commit != "-").map(|r| r.commit.clone());
                let base = match &last {
                    Some(c) => match g.resolve(c) {
                        Some(id) if g.is_ancestor(id, head)? => Some(id),
                        Some(_) => {
                            history(
                                &mut reasons,
                                args.accept_history,
                                format!(
                                    "the last recorded commit {} is not an ancestor of HEAD (history rewritten?)",
                                    short(c)
                                ),
                            );
                            None
                        }
                        None => {
                            history(
                                &mut reasons,
                                args.accept_history,
                                format!("the last recorded commit {} is not in this repository", short(c)),
                            );
                            None
                        }
                    },
                    None => gated_on,
                };
                if let Some(base) = base {
                    let mut outside = Vec::new();
                    for c in g.commits_since(Some(base), head)? {
                        for p in &c.paths {
                            let ok = match g.root_rel(p) {
                                Some(rel) => allow(&rel) || rel == "workspace" || rel.starts_with("workspace/"),
                                None => false,
                            };
                            if !ok {
                                outside.push(format!("{} ({}): {p}", short(&c.id), c.summary));
                            }
                        }
                    }
                    if !outside.is_empty() {
                        history(
                            &mut reasons,
                            args.accept_history,
                            format!(
                                "commits since {} change files outside the allowlist ({}): {}",
                                short(&base.to_string()),
                                cfg.allowlist.describe(),
                                outside.join("; ")
                            ),
                        );
                    }
                }
            }
            head.to_string()
        }
        None => {
            out.line(format!(
                "[record] warning: {} is not in a git repository; the row records no commit",
                root.display()
            ));
            let current = files_without_git(root, &allow)?;
            reasons.extend(binding_differences(&pending.candidate, &current));
            let spec = load_spec(root, &cfg.agent_dir)?;
            if spec.digest != pending.agent_spec {
                reasons.push(format!("the agent spec ({}/) changed since the gate passed", cfg.agent_dir));
            }
            "-".to_string()
        }
    };
    if !reasons.is_empty() {
        return refuse(reasons);
    }
    if args.accept_history {
        gstate.accepted.push(Acceptance {
            at: crate::util::now_rfc3339(),
            file: "(history)".into(),
            previous: rows.iter().rev().find(|r| r.commit != "-").map(|r| r.commit.clone()),
            sha256: Some(commit.clone()),
            command: "hcbench record --accept-history".into(),
        });
    }

    let row = ResultsRow {
        iteration: rows.last().map(|r| r.iteration + 1).unwrap_or(0),
        val_score: pending.val_score,
        commit,
        evals_passed: pending.evals_passed,
        evals_total: pending.evals_total,
        timestamp: crate::util::now_rfc3339(),
    };
    let bytes = files.results_with(&row)?;
    files.write_protected(&mut gstate, RESULTS, &bytes)?;
    files.remove_protected(&mut gstate, PENDING)?;
    out.line(format!(
        "[record] iteration {}: val_score {}, evals {}/{}, commit {} -> {RESULTS}",
        row.iteration,
        fmt_num(row.val_score),
        row.evals_passed,
        row.evals_total,
        short(&row.commit)
    ));
    if json_out {
        let v = json!({
            "recorded": true, "iteration": row.iteration, "val_score": row.val_score, "commit": row.commit,
            "evals_passed": row.evals_passed, "evals_total": row.evals_total, "timestamp": row.timestamp,
        });
        println!("{}", serde_json::to_string_pretty(&v).expect("json"));
    }
    Ok(exit::SUCCESS)
}

/// A history problem: refused, unless a human passed --accept-history.
fn history(reasons: &mut Vec<String>, accepted: bool, message: String) {
    if !accepted {
        reasons.push(format!(
            "{message}; revert those commits, or if a human made them on purpose: hcbench record --accept-history"
        ));
    }
}

fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

/// How the committed allowlisted files differ from the gated candidate.
fn binding_differences(
    candidate: &std::collections::BTreeMap<String, String>,
    committed: &std::collections::BTreeMap<String, String>,
) -> Vec<String> {
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
        diffs.push("the pending record belongs to another candidate: run `hcbench gate` on what you committed".into());
    }
    diffs
}
