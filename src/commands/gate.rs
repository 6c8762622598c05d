//! `hcbench gate`: the commit gate of the optimization loop (see docs/gate.md).
//!
//! Order of work, and why: everything that can be a usage error (config, benchmark, profile,
//! agent spec, lock) is resolved before Step 0 prints, so a bad setup exits 2 and never looks
//! like a failed gate (exit 1). Step 0 (file guard and state protection) runs before any cell.
//! Step 2 runs even when Step 1 failed, so the loop learns both numbers; Step 3 only when both
//! passed. State is written only by a passing gate: suite.json (promotions, last results) and
//! the pending record that `hcbench record` consumes. Test-split cells run in a private
//! directory outside the project and only aggregate numbers are printed, so the optimizing
//! agent never sees which test case failed.
//!
//! Text output is one `[gate] ...` line per step and verdict on stdout (cell progress on
//! stderr); `--format json` prints one object with every step on stdout and moves the lines to
//! stderr.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use serde::Serialize;
use serde_json::{Value, json};

use super::CommandError;
use crate::agent::CellPlan;
use crate::agent::spec::AgentSpec;
use crate::bench::{Benchmark, load_benchmark};
use crate::cli::{GateArgs, GateFormat};
use crate::engine::{self, Batch, Cancel};
use crate::events::{EngineEvent, EngineSink, Fanout};
use crate::gate::config::{Config, Mode};
use crate::gate::git::Git;
use crate::gate::state::{self, GateFiles, PENDING, PendingRecord, RESULTS, SUITE, Suite, TRAIN_RESULTS};
use crate::gate::steps::{self, fmt_pair, signed};
use crate::lock::FileLock as GateLock;
use crate::model::Profile;
use crate::model::registry::Profiles;
use crate::replay::CellSummary;
use crate::rundir::{Manifest, Plan, RunDir};
use crate::settings::Settings;
use crate::{exit, process, settings};

/// Version of the `--format json` object.
const REPORT_SCHEMA_VERSION: u32 = 1;

impl From<crate::gate::config::ConfigError> for CommandError {
    fn from(e: crate::gate::config::ConfigError) -> Self {
        CommandError::Usage(e.to_string())
    }
}

impl From<crate::gate::state::StateError> for CommandError {
    fn from(e: crate::gate::state::StateError) -> Self {
        if e.is_usage() { CommandError::Usage(e.to_string()) } else { CommandError::Internal(anyhow::Error::new(e)) }
    }
}

impl From<crate::lock::LockError> for CommandError {
    fn from(e: crate::lock::LockError) -> Self {
        match e {
            // Another gate running is a usage problem (run one at a time), not a failed gate.
            crate::lock::LockError::Busy { .. } => CommandError::Usage(e.to_string()),
            crate::lock::LockError::Io { .. } => CommandError::Internal(anyhow::Error::new(e)),
        }
    }
}

impl From<crate::gate::git::GitError> for CommandError {
    fn from(e: crate::gate::git::GitError) -> Self {
        CommandError::Internal(anyhow::Error::new(e))
    }
}

/// Where the `[gate]` lines go: stdout for people, stderr when stdout carries JSON.
pub(super) struct Out {
    json: bool,
}

impl Out {
    pub(super) fn new(format: GateFormat) -> Out {
        Out { json: format == GateFormat::Json }
    }

    pub(super) fn line(&self, text: impl AsRef<str>) {
        if self.json {
            eprintln!("{}", text.as_ref());
        } else {
            println!("{}", text.as_ref());
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Status {
    Passed,
    Failed,
    Skipped,
    NotRun,
}

#[derive(Debug, Serialize)]
struct StepReport {
    step: u8,
    name: &'static str,
    status: Status,
    detail: Value,
}

/// The `--format json` object.
#[derive(Debug, Serialize)]
struct GateReport {
    schema_version: u32,
    run_id: String,
    /// "passed", "failed" or "interrupted".
    verdict: &'static str,
    exit_code: i32,
    failed_steps: Vec<u8>,
    /// The verdict lines, as printed.
    messages: Vec<String>,
    config: Value,
    steps: Vec<StepReport>,
    val_score: Option<f64>,
    evals_passed: Option<usize>,
    evals_total: Option<usize>,
    pending_record: Option<String>,
}

const STEP_NAMES: [&str; 4] = ["file guard", "regression suite", "full benchmark", "promotion"];

impl GateReport {
    fn set(&mut self, step: u8, status: Status, detail: Value) {
        self.steps[step as usize] = StepReport { step, name: STEP_NAMES[step as usize], status, detail };
    }

    fn finish(mut self, out: &Out, verdict: &'static str, exit_code: i32, messages: Vec<String>) -> i32 {
        for m in &messages {
            out.line(m);
        }
        self.verdict = verdict;
        self.exit_code = exit_code;
        self.messages = messages;
        if out.json {
            println!("{}", serde_json::to_string_pretty(&self).expect("the report serializes"));
        }
        exit_code
    }
}

pub fn gate(settings: &Settings, args: GateArgs) -> Result<i32, CommandError> {
    let (root, agent_flag) = (settings.root.as_path(), settings.agent_flag());
    let out = Out::new(args.format);
    if agent_flag.is_some() {
        return Err(CommandError::Usage(
            "--agent (or HCBENCH_AGENT) does not apply to `gate`: the candidate is `agent_dir` in experiment_config.yaml".into(),
        ));
    }
    let cfg = settings.config(args.config.as_deref())?;
    let files = GateFiles::new(root, &cfg.path);
    if !args.wait.is_finite() || args.wait < 0.0 {
        return Err(CommandError::Usage(format!("--wait {}: give a number of seconds >= 0", args.wait)));
    }
    let _lock = GateLock::acquire(&files.lock_path(), "gate", Duration::from_secs_f64(args.wait.min(1e9)), |holder| {
        out.line(format!("[gate] waiting for the workspace lock ({holder})"));
    })?;
    let mut gstate = files.load_state()?;
    for f in &args.accept_state_change {
        let (rel, sha) = files.accept(&mut gstate, f, "hcbench gate --accept-state-change")?;
        match sha {
            Some(s) => out.line(format!("[gate] accepted the current {rel} (sha256 {}) as a deliberate change; logged in workspace/.gate-state.json", &s[..12])),
            None => out.line(format!("[gate] accepted that {rel} no longer exists; logged in workspace/.gate-state.json")),
        }
    }

    // Everything that can be a usage error is resolved before Step 0.
    let bench = load_benchmark(root, &cfg.benchmark)?;
    let ids_of =
        |split| -> Vec<String> { bench.cases.iter().filter(|c| c.split == split).map(|c| c.id.clone()).collect() };
    let train_ids = ids_of(cfg.train_split);
    let test_ids = ids_of(cfg.test_split);
    if test_ids.is_empty() {
        return Err(CommandError::Usage(format!(
            "benchmark `{}` has no case in split `{}` (test_split in {}); Step 2 would judge nothing",
            bench.name,
            cfg.test_split,
            cfg.path.display()
        )));
    }
    // A candidate that does not load is the candidate's failure (exit 1: revert it), not a
    // broken setup: its files are the ones the loop edits. Outside the allowlist it is exit 2.
    let mut candidate_error: Option<String> = None;
    let spec = match load_spec(root, &cfg.agent_dir) {
        Ok(s) => Arc::new(s),
        Err(e) if cfg.allowlist.allows(&format!("{}/agent.yaml", cfg.agent_dir)) => {
            candidate_error = Some(e.to_string());
            Arc::new(AgentSpec::default())
        }
        Err(e) => return Err(e),
    };
    let script_in_allowlist =
        cfg.profile.strip_prefix("scripted:").is_some_and(|p| cfg.allowlist.allows(p.trim_start_matches("./")));
    let profiles = settings.profiles(args.models.as_deref(), cfg.models.as_deref())?;
    let profile = match settings.profile(&profiles, &cfg.profile, None).map_err(CommandError::from) {
        Ok(p) => p,
        Err(e) if script_in_allowlist => {
            candidate_error.get_or_insert(e.to_string());
            Profile::scripted("candidate", crate::model::scripted::Script::nop())
        }
        Err(e) => return Err(e),
    };
    let jobs = settings::jobs(args.jobs, cfg.jobs)?;
    let git = Git::open(root)?;
    let head = match &git {
        Some(g) => Some(g.head()?.ok_or_else(|| {
            CommandError::Usage(format!(
                "the git repository at {} has no commit yet; commit the project first (the file guard and `record` compare against HEAD)",
                g.workdir().display()
            ))
        })?),
        None => None,
    };
    if cfg.mode == Mode::Paired && head.is_none() {
        return Err(CommandError::Usage(format!(
            "gate.mode `paired` compares the candidate with HEAD, but {} is not in a git repository; use `simple` or run it in a repository",
            root.display()
        )));
    }
    // Fail now, not after Step 1, if test cells could not run privately.
    drop(crate::gate::private_dir(root).map_err(|e| CommandError::Usage(e.to_string()))?);
    let swept = crate::gate::sweep_private_dirs();

    let run_id = crate::rundir::new_run_id();
    let spec_label = match &spec.dir {
        Some(_) => format!("{}/", cfg.agent_dir),
        None => format!("embedded default; {}/agent.yaml not found", cfg.agent_dir),
    };
    out.line(format!(
        "[gate] {run_id}: benchmark {}, profile {}, agent spec {} ({spec_label}), mode {}, epochs {}, jobs {jobs}",
        bench.name,
        profile.name(),
        &spec.digest[..12],
        cfg.mode.as_str(),
        cfg.epochs
    ));
    if !cfg.found {
        out.line(format!("[gate] note: {} not found; every default applies (see docs/gate.md)", cfg.path.display()));
    }
    if swept > 0 {
        out.line(format!("[gate] note: removed {swept} private directory(ies) left by a gate that was killed"));
    }
    let mut report = GateReport {
        schema_version: REPORT_SCHEMA_VERSION,
        run_id: run_id.clone(),
        verdict: "",
        exit_code: 0,
        failed_steps: Vec::new(),
        messages: Vec::new(),
        config: json!({
            "path": cfg.path, "benchmark": bench.name, "profile": profile.name(), "agent_dir": cfg.agent_dir,
            "agent_spec": spec.digest, "mode": cfg.mode.as_str(), "margin": cfg.margin, "epochs": cfg.epochs,
            "train_split": cfg.train_split.as_str(), "test_split": cfg.test_split.as_str(),
            "file_guard": cfg.file_guard, "allowlist": cfg.allowlist.describe(), "promotion_passes": cfg.promotion_passes,
        }),
        steps: (0..4u8)
            .map(|s| StepReport { step: s, name: STEP_NAMES[s as usize], status: Status::NotRun, detail: Value::Null })
            .collect(),
        val_score: None,
        evals_passed: None,
        evals_total: None,
        pending_record: None,
    };

    // ── Step 0: file guard and state protection ─────────────────────────────────────────────
    out.line("[gate] Step 0: file guard");
    let allow = |p: &str| cfg.allowlist.allows(p);
    let mut violations = Vec::new();
    let guard_status = if !cfg.file_guard {
        out.line(format!(
            "       disabled by `file_guard` in {}: changes outside the allowlist are not checked",
            cfg.path.display()
        ));
        "disabled"
    } else if let Some(g) = &git {
        for c in g.changes()? {
            match g.root_rel(&c.path) {
                // hcbench's own state; protected by hashes below.
                Some(rel) if rel == "workspace" || rel.starts_with("workspace/") => {}
                Some(rel) if allow(&rel) => {}
                _ => violations.push(c),
            }
        }
        if violations.is_empty() {
            out.line(format!("       ok: no change outside the allowlist ({})", cfg.allowlist.describe()));
        } else {
            out.line(format!(
                "       FAIL: {} file(s) changed outside the allowlist ({}):",
                violations.len(),
                cfg.allowlist.describe()
            ));
            for v in &violations {
                out.line(format!("         - {} ({}): revert with `{}`", v.path, v.detail, v.revert_hint()));
            }
            if !g.root_is_workdir() {
                out.line(format!("         (paths are relative to the repository root {})", g.workdir().display()));
            }
        }
        "checked"
    } else {
        out.line(format!(
            "       warning: {} is not in a git repository; the file guard is skipped (set `file_guard: false` to silence this)",
            root.display()
        ));
        "no_git"
    };
    let (tampered, newly) = files.check(&mut gstate)?;
    for f in &newly {
        out.line(format!(
            "       note: {f} is now protected: its hash is recorded; change it only with --accept-state-change {f}"
        ));
    }
    if tampered.is_empty() {
        out.line("       ok: gate state intact (suite.json, results.tsv, pending record, train results, config)");
    } else {
        for t in &tampered {
            out.line(format!("       FAIL: {}", t.describe()));
            out.line(format!(
                "         restore it; or, if a human made this change on purpose: hcbench gate --accept-state-change {}",
                t.file()
            ));
        }
    }
    if let Some(e) = &candidate_error {
        out.line(format!("       FAIL: the candidate does not load: {e}"));
    }
    let step0_pass = violations.is_empty() && tampered.is_empty() && candidate_error.is_none();
    report.set(
        0,
        if step0_pass { Status::Passed } else { Status::Failed },
        json!({
            "guard": guard_status, "violations": violations, "tampered": tampered, "newly_protected": newly,
            "candidate_error": candidate_error,
        }),
    );
    if !step0_pass {
        report.failed_steps.push(0);
        let mut msgs = Vec::new();
        if !violations.is_empty() {
            msgs.push(format!(
                "[gate] FAILED: Step 0 (file guard): {} file(s) changed outside the allowlist; revert them and run the gate again (no case was run)",
                violations.len()
            ));
        }
        for t in &tampered {
            msgs.push(format!("[gate] FAILED: Step 0 (state protection): {} (no case was run)", t.describe()));
        }
        if let Some(e) = &candidate_error {
            msgs.push(format!("[gate] FAILED: Step 0 (candidate): {e}; fix or revert the candidate (no case was run)"));
        }
        return Ok(report.finish(&out, "failed", exit::FAILED, msgs));
    }

    // The state as hcbench wrote it; a file that does not parse is a usage error (exit 2).
    let suite_on_disk = files.read_suite()?;
    let suite = suite_on_disk.clone().unwrap_or_else(|| Suite::new(cfg.threshold));
    if suite_on_disk.is_some() && suite.threshold != cfg.threshold {
        out.line(format!(
            "[gate] note: Step 1 uses the threshold in {SUITE} ({}); `threshold` in the config ({}) only seeds a new suite",
            suite.threshold, cfg.threshold
        ));
    }
    let rows = files.read_results()?;
    let train_results = files.read_train_results()?;

    let runner = Runner::new(jobs)?;
    let gate_dir = files.workspace().join("gate").join(&run_id);

    // ── Step 1: regression suite ─────────────────────────────────────────────────────────────
    let train_set: BTreeSet<String> = train_ids.iter().cloned().collect();
    let mut step1_scores: BTreeMap<String, f64> = BTreeMap::new();
    let step1 = if suite.tasks.is_empty() {
        out.line("[gate] Step 1: regression suite is empty: skipped (counts as passed)");
        report.set(1, Status::Skipped, json!({ "tasks": 0 }));
        None
    } else {
        out.line(format!(
            "[gate] Step 1: regression suite ({} task(s) x {} epoch(s), threshold {})",
            suite.tasks.len(),
            cfg.epochs,
            suite.threshold
        ));
        let missing: Vec<String> = suite.tasks.iter().filter(|t| !train_set.contains(*t)).cloned().collect();
        for m in &missing {
            out.line(format!(
                "       {m}: not a {} case of benchmark {}: counted as a failure",
                cfg.train_split, bench.name
            ));
        }
        let runnable: Vec<String> = suite.tasks.iter().filter(|t| train_set.contains(*t)).cloned().collect();
        let summaries = if runnable.is_empty() {
            Vec::new()
        } else {
            match runner.run_train(
                root,
                &gate_dir.join("suite"),
                &run_id,
                &bench,
                &runnable,
                &profile,
                &spec,
                cfg.epochs,
            )? {
                Some(s) => s,
                None => return Ok(interrupted(report, &out)),
            }
        };
        step1_scores = steps::case_scores(&summaries, cfg.epochs);
        let v = steps::judge_suite(&suite.tasks, &step1_scores, &missing, suite.threshold);
        let (rate, threshold) = fmt_pair(v.rate, v.threshold);
        out.line(format!(
            "       {}/{} passed: rate {rate} {} threshold {threshold}  {}",
            v.passed,
            v.tasks,
            if v.pass { ">=" } else { "<" },
            if v.pass { "PASS" } else { "FAIL" }
        ));
        if !v.failing.is_empty() {
            out.line(format!("       not passing: {}", v.failing.join(", ")));
        }
        report.set(1, if v.pass { Status::Passed } else { Status::Failed }, serde_json::to_value(&v).expect("json"));
        Some(v)
    };
    let step1_pass = step1.as_ref().is_none_or(|v| v.pass);
    let (evals_passed, evals_total) = step1.as_ref().map(|v| (v.passed, v.tasks)).unwrap_or((0, 0));

    // ── Step 2: full benchmark (runs even when Step 1 failed) ───────────────────────────────
    let candidate_files = match &git {
        Some(g) => g.candidate_files(&allow)?,
        None => crate::gate::git::files_without_git(root, &allow)?,
    };
    let private = crate::gate::private_dir(root).context("cannot create the private directory for test-split cells")?;
    runner.protect(private.path());
    let step2 = match cfg.mode {
        Mode::Simple => {
            out.line(format!(
                "[gate] Step 2: full benchmark ({} split, {} case(s) x {} epoch(s); per-case results stay private)",
                cfg.test_split,
                test_ids.len(),
                cfg.epochs
            ));
            let arm = Arm::new(
                &run_id,
                "candidate",
                private.path(),
                crate::gate::private_profile(&profile, private.path()),
                spec.clone(),
            );
            let Some(mut by_arm) = runner.run_private(private.path(), &bench, &test_ids, &[arm], cfg.epochs)? else {
                return Ok(interrupted(report, &out));
            };
            let cells = by_arm.remove(0);
            let planned = test_ids.len() * cfg.epochs as usize;
            let rewards: Vec<f64> = cells.iter().map(steps::cell_reward).collect();
            let val = steps::val_score(&rewards, planned);
            let no_verdict = planned - cells.iter().filter(|c| c.outcome.is_some_and(|o| o.is_verdict())).count();
            let best = steps::best(&rows);
            let pass = steps::benchmark_passes(val, best);
            let line = match best {
                None => format!("       val_score {}  PASS (no best recorded yet in {RESULTS})", steps::fmt_num(val)),
                Some(b) => {
                    let (v, bs) = fmt_pair(val, b);
                    format!(
                        "       val_score {v} {} best {bs}  {}",
                        if pass { ">=" } else { "<" },
                        if pass { "PASS" } else { "FAIL" }
                    )
                }
            };
            out.line(line);
            if no_verdict > 0 {
                out.line(format!(
                    "       {no_verdict} of {planned} cell(s) produced no verdict (infrastructure error) and count 0"
                ));
            }
            report.set(
                2,
                if pass { Status::Passed } else { Status::Failed },
                json!({ "mode": "simple", "val_score": val, "best": best, "cases": test_ids.len(), "cells": planned, "no_verdict": no_verdict }),
            );
            Step2 {
                pass,
                val,
                message: best.map(|b| {
                    let (v, bs) = fmt_pair(val, b);
                    format!("val_score {v} < best {bs}")
                }),
            }
        }
        Mode::Paired => {
            let (g, head) = (git.as_ref().expect("paired mode checked git"), head.expect("paired mode checked HEAD"));
            let short = &head.to_string()[..12];
            out.line(format!(
                "[gate] Step 2: full benchmark, paired ({} split, {} case(s) x {} epoch(s), candidate vs HEAD {short}; per-case results stay private)",
                cfg.test_split,
                test_ids.len(),
                cfg.epochs
            ));
            let head_files = g.files_at(head, &allow)?;
            let planned = test_ids.len() * cfg.epochs as usize;
            let cand_arm = Arm::new(
                &run_id,
                "candidate",
                private.path(),
                crate::gate::private_profile(&profile, private.path()),
                spec.clone(),
            );
            if head_files == candidate_files {
                out.line("       the candidate equals HEAD in every allowlisted file: the difference is 0 by construction; running the candidate only");
                let Some(mut by_arm) =
                    runner.run_private(private.path(), &bench, &test_ids, &[cand_arm], cfg.epochs)?
                else {
                    return Ok(interrupted(report, &out));
                };
                let cells = by_arm.remove(0);
                let val = steps::val_score(&cells.iter().map(steps::cell_reward).collect::<Vec<_>>(), planned);
                out.line(format!("       candidate {}; difference 0, interval [0, 0]  PASS", steps::fmt_num(val)));
                report.set(
                    2,
                    Status::Passed,
                    json!({ "mode": "paired", "val_score": val, "head_score": val, "mean_diff": 0.0, "ci": [0.0, 0.0], "margin": cfg.margin, "identical_to_head": true, "cases": test_ids.len(), "cells": planned }),
                );
                Step2 { pass: true, val, message: None }
            } else {
                let head_dir = private.path().join("head-files");
                let agent_dir = cfg.agent_dir.clone();
                let in_spec = |p: &str| allow(p) || p.starts_with(&format!("{agent_dir}/"));
                g.extract(head, &in_spec, &head_dir)?;
                let head_spec = Arc::new(load_spec(&head_dir, &cfg.agent_dir)?);
                let head_profile = head_profile(&cfg, &head_dir, &profile, &profiles)?;
                let head_arm = Arm::new(
                    &run_id,
                    "head",
                    private.path(),
                    crate::gate::private_profile(&head_profile, private.path()),
                    head_spec,
                );
                let Some(by_arm) =
                    runner.run_private(private.path(), &bench, &test_ids, &[cand_arm, head_arm], cfg.epochs)?
                else {
                    return Ok(interrupted(report, &out));
                };
                let cand_scores = steps::case_scores(&by_arm[0], cfg.epochs);
                let head_scores = steps::case_scores(&by_arm[1], cfg.epochs);
                let val = steps::val_score(&by_arm[0].iter().map(steps::cell_reward).collect::<Vec<_>>(), planned);
                let head_val = steps::val_score(&by_arm[1].iter().map(steps::cell_reward).collect::<Vec<_>>(), planned);
                let v = steps::judge_paired(&test_ids, &cand_scores, &head_scores, cfg.margin);
                out.line(format!(
                    "       candidate {}, HEAD {} (mean reward over {planned} cells each)",
                    steps::fmt_num(val),
                    steps::fmt_num(head_val)
                ));
                let (lo, hi) = (fmt_pair(v.ci.0, v.ci.1), fmt_pair(v.ci.0, -cfg.margin));
                out.line(format!(
                    "       difference {}, 95% CI [{}, {}]; lower bound {} {} -margin {}  {}",
                    signed(&steps::fmt_num(v.mean_diff)),
                    signed(&lo.0),
                    signed(&lo.1),
                    signed(&hi.0),
                    if v.pass { ">=" } else { "<" },
                    signed(&hi.1),
                    if v.pass { "PASS" } else { "FAIL" }
                ));
                report.set(
                    2,
                    if v.pass { Status::Passed } else { Status::Failed },
                    json!({ "mode": "paired", "val_score": val, "head_score": head_val, "mean_diff": v.mean_diff, "ci": [v.ci.0, v.ci.1], "margin": cfg.margin, "identical_to_head": false, "cases": test_ids.len(), "cells": planned, "head": head.to_string() }),
                );
                Step2 {
                    pass: v.pass,
                    val,
                    message: Some(format!(
                        "lower bound {} of the 95% CI of (candidate - HEAD) < -margin {}",
                        signed(&hi.0),
                        signed(&hi.1)
                    )),
                }
            }
        }
    };
    // Test-split cells leave nothing behind: the private directory goes now, not at exit.
    runner.unprotect(private.path());
    private.close().context("cannot remove the private directory of the test-split cells")?;
    report.val_score = Some(step2.val);
    report.evals_passed = Some(evals_passed);
    report.evals_total = Some(evals_total);

    // ── Step 3: promotion (only when Steps 1 and 2 passed) ──────────────────────────────────
    let mut next_suite = suite.clone();
    for t in &suite.tasks {
        next_suite.last_results.insert(t.clone(), step1_scores.get(t).copied().unwrap_or(0.0));
    }
    if !(step1_pass && step2.pass) {
        let why = match (step1_pass, step2.pass) {
            (false, false) => "Steps 1 and 2 failed",
            (false, true) => "Step 1 failed",
            _ => "Step 2 failed",
        };
        out.line(format!("[gate] Step 3: promotion skipped ({why})"));
        report.set(3, Status::Skipped, json!({ "reason": why }));
        let mut msgs = Vec::new();
        if let Some(v) = step1.as_ref().filter(|v| !v.pass) {
            report.failed_steps.push(1);
            let (rate, threshold) = fmt_pair(v.rate, v.threshold);
            msgs.push(format!(
                "[gate] FAILED: Step 1 (regression suite): {}/{} passed, rate {rate} < threshold {threshold}",
                v.passed, v.tasks
            ));
        }
        if !step2.pass {
            report.failed_steps.push(2);
            msgs.push(format!("[gate] FAILED: Step 2 (full benchmark): {}", step2.message.clone().unwrap_or_default()));
        }
        msgs.push("[gate] revert the candidate (e.g. `git checkout HEAD -- <file>`) and try another idea".into());
        return Ok(report.finish(&out, "failed", exit::FAILED, msgs));
    }

    out.line("[gate] Step 3: promotion");
    let step3_detail = match &train_results {
        None => {
            out.line(format!("       no train results yet ({TRAIN_RESULTS}): run `hcbench run --split train` first; nothing to promote"));
            json!({ "candidates": [], "promoted": [], "note": "no train results" })
        }
        Some(t) if t.benchmark != bench.name => {
            out.line(format!(
                "       {TRAIN_RESULTS} is for benchmark {}, not {}: nothing to promote (run `hcbench run --benchmark {} --split train`)",
                t.benchmark, bench.name, bench.name
            ));
            json!({ "candidates": [], "promoted": [], "note": "train results of another benchmark" })
        }
        Some(t) => {
            let candidates = steps::promotion_candidates(t, &next_suite, &train_set);
            if candidates.is_empty() {
                out.line(
                    "       nothing to promote: no failing train case outside the suite in the latest train results",
                );
                json!({ "candidates": [], "promoted": [] })
            } else {
                out.line(format!(
                    "       re-running {} previously failing train case(s): {}",
                    candidates.len(),
                    candidates.join(", ")
                ));
                let Some(summaries) = runner.run_train(
                    root,
                    &gate_dir.join("promotion"),
                    &run_id,
                    &bench,
                    &candidates,
                    &profile,
                    &spec,
                    cfg.epochs,
                )?
                else {
                    return Ok(interrupted(report, &out));
                };
                let scores = steps::case_scores(&summaries, cfg.epochs);
                let p = steps::promote(&mut next_suite, &scores, &candidates, cfg.promotion_passes);
                if p.promoted.is_empty() {
                    out.line("       no case promoted");
                } else {
                    out.line(format!(
                        "       promoted {} case(s) into the suite: {}",
                        p.promoted.len(),
                        p.promoted.join(", ")
                    ));
                }
                if !p.pending.is_empty() {
                    let mut pending: Vec<String> = p.pending.keys().cloned().collect();
                    state::sort_ids(&mut pending);
                    let list: Vec<String> =
                        pending.iter().map(|id| format!("{id} ({}/{})", p.pending[id], cfg.promotion_passes)).collect();
                    out.line(format!(
                        "       passing, promoted after more consecutive passing gates: {}",
                        list.join(", ")
                    ));
                }
                if !p.still_failing.is_empty() {
                    out.line(format!("       still failing: {}", p.still_failing.join(", ")));
                }
                json!({ "candidates": candidates, "promoted": p.promoted, "pending": p.pending, "still_failing": p.still_failing })
            }
        }
    };
    report.set(3, Status::Passed, step3_detail);

    // ── Verdict: a passing gate writes the suite and the pending record ─────────────────────
    if runner.cancel.is_cancelled() {
        return Ok(interrupted(report, &out));
    }
    files.write_protected(&mut gstate, SUITE, &state::to_json(&next_suite))?;
    let pending = PendingRecord {
        schema_version: state::STATE_SCHEMA_VERSION,
        created_at: crate::util::now_rfc3339(),
        gate_run_id: run_id.clone(),
        benchmark: bench.name.clone(),
        profile: profile.name().to_string(),
        mode: cfg.mode.as_str().to_string(),
        head: head.map(|h| h.to_string()),
        agent_dir: cfg.agent_dir.clone(),
        agent_spec: spec.digest.clone(),
        candidate: candidate_files,
        config_sha256: files.config_sha()?,
        val_score: step2.val,
        evals_passed: evals_passed as u64,
        evals_total: evals_total as u64,
    };
    files.write_protected(&mut gstate, PENDING, &state::to_json(&pending))?;
    report.pending_record = Some(PENDING.to_string());
    let msgs = vec![format!(
        "[gate] PASSED: all steps clear (val_score {}); commit the candidate, then run `hcbench record` ({PENDING} holds the numbers)",
        steps::fmt_num(step2.val)
    )];
    Ok(report.finish(&out, "passed", exit::SUCCESS, msgs))
}

struct Step2 {
    pass: bool,
    val: f64,
    /// The failure line's detail.
    message: Option<String>,
}

fn interrupted(report: GateReport, out: &Out) -> i32 {
    report.finish(out, "interrupted", exit::INTERRUPTED, vec!["[gate] interrupted: no state was written".into()])
}

/// The agent spec in `<dir>/<agent_dir>`, or the embedded default when it has no agent.yaml.
pub(super) fn load_spec(dir: &Path, agent_dir: &str) -> Result<AgentSpec, CommandError> {
    let d = dir.join(agent_dir);
    if d.join("agent.yaml").is_file() {
        AgentSpec::load(&d).map_err(|e| CommandError::Usage(e.to_string()))
    } else {
        Ok(AgentSpec::default())
    }
}

/// HEAD's version of the profile: a `scripted:PATH` profile whose script is allowlisted is part
/// of the candidate, so the HEAD arm replays HEAD's copy of the script. Other profiles are the
/// same model for both arms.
fn head_profile(
    cfg: &Config,
    head_dir: &Path,
    profile: &Profile,
    profiles: &Profiles,
) -> Result<Profile, CommandError> {
    let Some(path) = cfg.profile.strip_prefix("scripted:") else { return Ok(profile.clone()) };
    let rel = path.trim_start_matches("./");
    if !cfg.allowlist.allows(rel) {
        return Ok(profile.clone());
    }
    if !head_dir.join(rel).is_file() {
        return Err(CommandError::Usage(format!(
            "paired mode runs HEAD's version of the candidate, but HEAD has no {rel} (the script of profile `{}`); commit a first version of it",
            cfg.profile
        )));
    }
    profiles.resolve_at(&cfg.profile, head_dir).map_err(|e| CommandError::Usage(e.to_string()))
}

/// One side of a comparison: its profile and spec, with its own run id so its summaries can be
/// told apart when both arms run in one batch.
struct Arm {
    run_id: String,
    dir: PathBuf,
    profile: Profile,
    spec: Arc<AgentSpec>,
}

impl Arm {
    fn new(run_id: &str, name: &str, base: &Path, profile: Profile, spec: Arc<AgentSpec>) -> Arm {
        Arm { run_id: format!("{run_id}-{name}"), dir: base.join(name), profile, spec }
    }
}

/// Runs batches of cells for the gate on one runtime, with one Ctrl-C handler for the whole
/// gate: the first Ctrl-C stops the batch (running cells are recorded as cancelled) and the gate
/// returns 130 without writing state; the second kills every child process group, removes the
/// private directories and exits at once.
struct Runner {
    rt: tokio::runtime::Runtime,
    jobs: usize,
    cancel: Cancel,
    private: Arc<Mutex<Vec<PathBuf>>>,
}

impl Runner {
    fn new(jobs: usize) -> Result<Runner, CommandError> {
        let rt = super::runtime()?;
        let cancel = Cancel::default();
        let private: Arc<Mutex<Vec<PathBuf>>> = Arc::default();
        {
            let cancel = cancel.clone();
            let private = private.clone();
            rt.spawn(async move {
                if tokio::signal::ctrl_c().await.is_ok() {
                    cancel.cancel();
                    eprintln!("[gate] interrupted: stopping the running cells; press Ctrl-C again to stop at once");
                    if tokio::signal::ctrl_c().await.is_ok() {
                        process::kill_all_groups();
                        for p in private.lock().unwrap_or_else(|p| p.into_inner()).iter() {
                            let _ = std::fs::remove_dir_all(p);
                        }
                        std::process::exit(exit::INTERRUPTED);
                    }
                }
            });
        }
        Ok(Runner { rt, jobs, cancel, private })
    }

    /// Registers a private directory for removal on a forced exit.
    fn protect(&self, dir: &Path) {
        self.private.lock().unwrap_or_else(|p| p.into_inner()).push(dir.to_path_buf());
    }

    fn unprotect(&self, dir: &Path) {
        self.private.lock().unwrap_or_else(|p| p.into_inner()).retain(|p| p != dir);
    }

    /// Train cells in a run directory under workspace/gate/ (kept: the loop may read them).
    /// None when interrupted.
    #[allow(clippy::too_many_arguments)]
    fn run_train(
        &self,
        root: &Path,
        run_dir: &Path,
        run_id: &str,
        bench: &Benchmark,
        case_ids: &[String],
        profile: &Profile,
        spec: &Arc<AgentSpec>,
        epochs: u32,
    ) -> Result<Option<Vec<CellSummary>>, CommandError> {
        let profiles = [profile.clone()];
        let plan = Plan {
            command: "gate",
            run_id,
            profiles: vec![profile.name().to_string()],
            epochs,
            jobs: self.jobs,
            agent_spec: &spec.digest,
            agent_dir: spec.dir.clone(),
        };
        let run = RunDir::create(run_dir, Manifest::new(plan, root, bench, case_ids))?;
        let cells = engine::plan(run_id, run.path(), bench, case_ids, &profiles, epochs, spec);
        let results = Arc::new(run.results()?);
        let sink = Arc::new(Fanout::new(vec![Arc::new(TrainProgress), results.clone()]));
        let r = self.execute(run_id, run.path(), cells, sink);
        results.finish()?;
        r
    }

    /// Test cells of one or more arms, interleaved, in the private directory. Returns the
    /// summaries of each arm, in arm order; None when interrupted.
    fn run_private(
        &self,
        private: &Path,
        bench: &Benchmark,
        case_ids: &[String],
        arms: &[Arm],
        epochs: u32,
    ) -> Result<Option<Vec<Vec<CellSummary>>>, CommandError> {
        let mut per_arm: Vec<std::vec::IntoIter<CellPlan>> = Vec::new();
        for arm in arms {
            std::fs::create_dir_all(arm.dir.join("cells"))
                .with_context(|| format!("cannot create {}", arm.dir.display()))?;
            per_arm.push(
                engine::plan(
                    &arm.run_id,
                    &arm.dir,
                    bench,
                    case_ids,
                    std::slice::from_ref(&arm.profile),
                    epochs,
                    &arm.spec,
                )
                .into_iter(),
            );
        }
        // Interleave the arms so both make progress from the start and share the machine's load.
        let mut cells = Vec::new();
        loop {
            let before = cells.len();
            for it in per_arm.iter_mut() {
                cells.extend(it.next());
            }
            if cells.len() == before {
                break;
            }
        }
        let total = cells.len();
        let Some(summaries) =
            self.execute("gate", private, cells, Arc::new(PrivateProgress { done: AtomicUsize::new(0), total }))?
        else {
            return Ok(None);
        };
        let mut out: Vec<Vec<CellSummary>> = arms.iter().map(|_| Vec::new()).collect();
        for s in summaries {
            if let Some(i) = arms.iter().position(|a| a.run_id == s.run_id) {
                out[i].push(s);
            }
        }
        Ok(Some(out))
    }

    fn execute(
        &self,
        run_id: &str,
        run_dir: &Path,
        cells: Vec<CellPlan>,
        sink: Arc<dyn EngineSink>,
    ) -> Result<Option<Vec<CellSummary>>, CommandError> {
        if self.cancel.is_cancelled() {
            return Ok(None);
        }
        let summaries = self.rt.block_on(engine::execute(
            Batch { run_id, run_dir, cells, jobs: self.jobs, budget: None },
            sink,
            self.cancel.clone(),
        ));
        Ok(if self.cancel.is_cancelled() { None } else { Some(summaries) })
    }
}

/// Progress of train cells: one line per finished cell on stderr (ids are fine to show).
struct TrainProgress;

impl EngineSink for TrainProgress {
    fn event(&self, event: EngineEvent<'_>) {
        if let EngineEvent::CellFinished { summary, done, total } = event {
            eprintln!(
                "[gate]   [{done:>w$}/{total}] {:<14} {} ({:.1}s)",
                summary.outcome_label(),
                summary.cell_id,
                summary.wall_ms as f64 / 1000.0,
                w = total.to_string().len()
            );
        }
    }
}

/// Progress of test cells: a count only. Which test case passed or failed is never shown.
struct PrivateProgress {
    done: AtomicUsize,
    total: usize,
}

impl EngineSink for PrivateProgress {
    fn event(&self, event: EngineEvent<'_>) {
        if let EngineEvent::CellFinished { .. } = event {
            let n = self.done.fetch_add(1, Ordering::SeqCst) + 1;
            // About ten lines whatever the size: enough to see progress, not a wall of text.
            if n == self.total || n.is_multiple_of(self.total.div_ceil(10).max(1)) {
                eprintln!("[gate]   {n}/{} test cell(s) done", self.total);
            }
        }
    }
}
