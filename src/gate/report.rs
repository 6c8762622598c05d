//! The two sinks of the gate's and `record`'s events: text and `--format json`.
//!
//! Every line a person reads is rendered here, by [`gate_lines`] and [`record_lines`], from
//! the typed events of [`super::event`] and [`super::record`]. The text sink writes those
//! lines to stdout. The JSON sink writes the *same* lines to stderr and builds one object from
//! the same events, printed on stdout at the end; its `messages` are the verdict lines as
//! rendered here, so the two formats cannot disagree. The objects' schemas are documented in
//! docs/gate.md; their keys are a contract with the optimization loop and do not change with
//! the wording of the lines.
//!
//! The sinks live beside the gate rather than in `crate::report`, which renders run
//! directories (tables, Markdown, HTML): these sinks speak only the gate's vocabulary and only
//! `gate` and `record` use them.

use std::io::{self, Write};
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Value, json};

use super::event::{
    Failure, FileGuard, FullBenchmark, GateEvent, GateOutcome, GateSink, Guard, LiveEvent, LiveSink, Note,
    PromotionStep, STEP_NAMES, Status, StepResult, StepStart, UnmeasuredStep, Verdict,
};
use super::git::short;
use super::record::{RecordEvent, RecordOutcome, RecordSink};
use super::state::{self, PENDING, REGRESSION_SET, RESULTS, Recovered, Recovery, TRAIN_RESULTS};
use super::steps::{Coverage, PAIRED_ALPHA, fmt_num, fmt_pair, signed};

/// Version of the gate's `--format json` object.
const REPORT_SCHEMA_VERSION: u32 = 1;

/// Indent of the lines under a `[gate] Step N` line.
const IN: &str = "       ";

// ── The gate ─────────────────────────────────────────────────────────────────────────────────

/// `--format text`: the `[gate]` lines on stdout.
pub(crate) struct TextSink<W: Write> {
    out: W,
}

impl TextSink<io::Stdout> {
    pub(crate) fn stdout() -> Self {
        TextSink { out: io::stdout() }
    }
}

impl<W: Write> TextSink<W> {
    fn write(&mut self, lines: &[String]) {
        for l in lines {
            // A closed pipe ends the process (SIGPIPE, see main.rs); other write errors must not
            // turn a verdict into a crash: the exit code still tells it.
            let _ = writeln!(self.out, "{l}");
        }
    }
}

impl<W: Write> GateSink for TextSink<W> {
    fn event(&mut self, event: &GateEvent<'_>) {
        self.write(&gate_lines(event));
    }

    fn live(&self) -> Arc<dyn LiveSink> {
        Arc::new(StderrLive)
    }
}

/// `--format json`: the `[gate]` lines on stderr, one object on stdout when the gate ends.
pub(crate) struct JsonSink<W: Write, L: Write> {
    out: W,
    lines: TextSink<L>,
    report: GateReport,
}

impl JsonSink<io::Stdout, io::Stderr> {
    pub(crate) fn stdout() -> Self {
        JsonSink::new(io::stdout(), io::stderr())
    }
}

impl<W: Write, L: Write> JsonSink<W, L> {
    fn new(out: W, lines: L) -> Self {
        let steps = (0..4u8)
            .map(|s| StepReport { step: s, name: STEP_NAMES[s as usize], status: Status::NotRun, detail: Value::Null })
            .collect();
        let report = GateReport {
            schema_version: REPORT_SCHEMA_VERSION,
            run_id: String::new(),
            verdict: "",
            exit_code: 0,
            failed_steps: Vec::new(),
            messages: Vec::new(),
            config: Value::Null,
            steps,
            val_score: None,
            evals_passed: None,
            evals_total: None,
            pending_record: None,
        };
        JsonSink { out, lines: TextSink { out: lines }, report }
    }
}

impl<W: Write, L: Write> GateSink for JsonSink<W, L> {
    fn event(&mut self, event: &GateEvent<'_>) {
        self.lines.event(event);
        let r = &mut self.report;
        match event {
            GateEvent::Started(info) => {
                let c = info.config;
                r.run_id = info.run_id.to_string();
                r.config = json!({
                    "path": c.path, "benchmark": info.benchmark, "profile": info.profile,
                    "profile_digest": info.profile_digest, "agent_dir": c.agent_dir,
                    "agent_spec": info.agent_spec, "mode": c.mode.as_str(), "margin": c.margin, "epochs": c.epochs,
                    "train_split": c.train_split.as_str(), "test_split": c.test_split.as_str(),
                    "file_guard": c.file_guard, "allowlist": c.allowlist.describe(),
                    "promotion_passes": c.promotion_passes, "max_unmeasured": c.max_unmeasured,
                });
            }
            GateEvent::StepFinished(step) => {
                let n = step.number();
                r.steps[n as usize] =
                    StepReport { step: n, name: STEP_NAMES[n as usize], status: step.status(), detail: detail(step) };
            }
            GateEvent::Finished(outcome) => {
                r.verdict = match outcome.verdict {
                    Verdict::Passed => "passed",
                    Verdict::Failed(_) => "failed",
                    Verdict::Interrupted => "interrupted",
                    Verdict::Unmeasured(_) => "unmeasured",
                };
                r.exit_code = outcome.exit_code();
                r.failed_steps = outcome.failed_steps();
                r.messages = verdict_lines(outcome);
                r.val_score = outcome.scores.map(|s| s.val_score);
                r.evals_passed = outcome.scores.map(|s| s.evals_passed);
                r.evals_total = outcome.scores.map(|s| s.evals_total);
                r.pending_record = outcome.pending_record().map(str::to_string);
                let text = serde_json::to_string_pretty(&self.report).expect("the report serializes");
                let _ = writeln!(self.out, "{text}");
            }
            _ => {}
        }
    }

    fn live(&self) -> Arc<dyn LiveSink> {
        Arc::new(StderrLive)
    }
}

/// The `--format json` object.
#[derive(Debug, Serialize)]
struct GateReport {
    schema_version: u32,
    run_id: String,
    /// "passed", "failed", "interrupted" or "unmeasured".
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

#[derive(Debug, Serialize)]
struct StepReport {
    step: u8,
    name: &'static str,
    status: Status,
    detail: Value,
}

/// A step's `detail` in the JSON object. Keys stay as they are whatever the lines say (the
/// regression set's size is `tasks`, as in suite.json).
fn detail(step: &StepResult) -> Value {
    match step {
        StepResult::FileGuard(g) => json!({
            "guard": match g.guard { Guard::Disabled { .. } => "disabled", Guard::Checked => "checked", Guard::NoGit { .. } => "no_git" },
            "violations": g.violations, "tampered": g.tampered, "newly_protected": g.newly_protected,
            "candidate_error": g.candidate_error,
        }),
        StepResult::RegressionSet(None) => json!({ "tasks": 0 }),
        StepResult::RegressionSet(Some(v)) => serde_json::to_value(v).expect("the verdict serializes"),
        StepResult::FullBenchmark(FullBenchmark::Simple { val_score, best, cases, cells, no_verdict, .. }) => {
            json!({ "mode": "simple", "val_score": val_score, "best": best, "cases": cases, "cells": cells, "no_verdict": no_verdict })
        }
        StepResult::FullBenchmark(FullBenchmark::Paired {
            val_score,
            head_score,
            comparison,
            margin,
            cases,
            cells,
            head,
            ..
        }) => {
            // An unchanged candidate is not compared: difference 0 and interval [0, 0] by
            // construction, and no test ran, so the test's fields are left out.
            let (mean_diff, ci) =
                comparison.as_ref().map_or((0.0, (0.0, 0.0)), |c| (c.mean_diff, (c.interval.lo, c.interval.hi)));
            let mut v = json!({
                "mode": "paired", "val_score": val_score, "head_score": head_score, "mean_diff": mean_diff,
                "ci": [ci.0, ci.1], "margin": margin, "identical_to_head": head.is_none(), "cases": cases, "cells": cells,
            });
            if let Some(h) = head {
                v["head"] = json!(h);
            }
            if let Some(c) = comparison {
                v["method"] = json!(c.method);
                v["p_value"] = json!(c.p_value);
                v["confidence"] = json!(1.0 - PAIRED_ALPHA);
                v["compared_cases"] = json!(c.cases);
                v["wins"] = json!(c.wins);
                v["losses"] = json!(c.losses);
                v["ties"] = json!(c.ties);
            }
            v
        }
        StepResult::Unmeasured(u) => {
            let arms: Vec<Value> = u
                .arms
                .iter()
                .map(|(arm, c)| {
                    let mut v = serde_json::to_value(c).expect("the counts serialize");
                    v["arm"] = json!(arm);
                    v["unmeasured"] = json!(c.unmeasured());
                    v
                })
                .collect();
            json!({ "max_unmeasured": u.max_unmeasured, "arms": arms })
        }
        StepResult::Promotion(p) => match p {
            PromotionStep::Skipped { reason } => json!({ "reason": reason }),
            PromotionStep::NoTrainResults => json!({ "candidates": [], "promoted": [], "note": "no train results" }),
            PromotionStep::OtherBenchmark { .. } => {
                json!({ "candidates": [], "promoted": [], "note": "train results of another benchmark" })
            }
            PromotionStep::NoCandidates => json!({ "candidates": [], "promoted": [] }),
            PromotionStep::Ran { candidates, result, .. } => json!({
                "candidates": candidates, "promoted": result.promoted, "pending": result.pending,
                "still_failing": result.still_failing, "not_passing": result.not_passing,
            }),
        },
    }
}

/// The `[gate]` lines of one event.
pub(crate) fn gate_lines(event: &GateEvent<'_>) -> Vec<String> {
    match event {
        GateEvent::WaitingForLock { holder } => vec![format!("[gate] waiting for the workspace lock ({holder})")],
        GateEvent::Accepted { file, sha256: Some(s) } => vec![format!(
            "[gate] accepted the current {file} (sha256 {}) as a deliberate change; logged in workspace/.gate-state.json",
            short(s)
        )],
        GateEvent::Accepted { file, sha256: None } => {
            vec![format!("[gate] accepted that {file} no longer exists; logged in workspace/.gate-state.json")]
        }
        GateEvent::StateRecovered(r) => vec![recovered_line(r)],
        GateEvent::Started(info) => {
            let c = info.config;
            let spec = if !info.spec_loads {
                format!("{}/agent.yaml does not load: see Step 0; not run", c.agent_dir)
            } else if info.spec_found {
                format!("{}/", c.agent_dir)
            } else {
                format!("embedded default; {}/agent.yaml not found", c.agent_dir)
            };
            vec![format!(
                "[gate] {}: benchmark {}, profile {} (definition {}), agent spec {} ({spec}), mode {}, epochs {}, jobs {}",
                info.run_id,
                info.benchmark,
                info.profile,
                short(info.profile_digest),
                short(info.agent_spec),
                c.mode.as_str(),
                c.epochs,
                info.jobs
            )]
        }
        GateEvent::Note(note) => vec![note_line(note)],
        GateEvent::StepStarted(start) => start_lines(start),
        GateEvent::StepFinished(step) => step_lines(step),
        GateEvent::Finished(outcome) => verdict_lines(outcome),
    }
}

fn recovered_line(r: &Recovered) -> String {
    let commit = r.commit.as_deref().map_or_else(String::new, |c| format!(" (commit {})", short(c)));
    match r.how {
        Recovery::Restore => format!(
            "[gate] restored the gate's state from {}{commit}: {}; logged in workspace/.gate-state.json",
            r.refname,
            r.files.join(", ")
        ),
        Recovery::AcceptReset => format!(
            "[gate] accepted the workspace's gate state as it is now ({} protected file(s)) as the anchored state, replacing {}{commit}, which stays in the anchor's history; logged in workspace/.gate-state.json",
            r.files.len(),
            if r.refname.is_empty() { "nothing (not in git)" } else { r.refname.as_str() },
        ),
    }
}

fn note_line(note: &Note<'_>) -> String {
    match note {
        Note::ConfigNotFound { path } => {
            format!("[gate] note: {} not found; every default applies (see docs/gate.md)", path.display())
        }
        Note::SweptPrivateDirs(n) => {
            format!("[gate] note: removed {n} private directory(ies) left by a gate that was killed")
        }
        Note::SetThreshold { set, config } => format!(
            "[gate] note: Step 1 uses the threshold in {REGRESSION_SET} ({set}); `threshold` in the config ({config}) only seeds a new regression set"
        ),
        Note::IdenticalToHead => format!(
            "{IN}the candidate equals HEAD in every allowlisted file: the difference is 0 by construction; running the candidate only"
        ),
        Note::Rerunning { candidates } => {
            format!("{IN}re-running {} previously failing train case(s): {}", candidates.len(), candidates.join(", "))
        }
        Note::Accepted { what } => format!("[gate] accepted {what}; logged in workspace/.gate-state.json"),
        Note::StaleTrainResults { cases, example, profile } => format!(
            "[gate] note: {cases} entry(ies) of workspace/train_results.json were not written by this profile and agent spec (e.g. {example}): not trusted, Step 3 re-runs them; refresh with `hcbench run --split train --profile {profile}`"
        ),
        Note::Quarantined { cases } => format!(
            "{IN}quarantined (flaky under the oracle, from --quarantine): {}; left out of Steps 1 and 3, kept in Step 2",
            cases.join(", ")
        ),
    }
}

fn start_lines(start: &StepStart<'_>) -> Vec<String> {
    match start {
        StepStart::FileGuard => vec!["[gate] Step 0: file guard".into()],
        StepStart::RegressionSet { cases, epochs, threshold, missing, train_split, benchmark } => {
            let mut lines = vec![format!(
                "[gate] Step 1: regression set ({cases} case(s) x {epochs} epoch(s), threshold {threshold})"
            )];
            for m in missing.iter() {
                lines.push(format!("{IN}{m}: not a {train_split} case of benchmark {benchmark}: counted as a failure"));
            }
            lines
        }
        StepStart::FullBenchmark { test_split, cases, epochs, paired_with: None } => vec![format!(
            "[gate] Step 2: full benchmark ({test_split} split, {cases} case(s) x {epochs} epoch(s); per-case results stay private)"
        )],
        StepStart::FullBenchmark { test_split, cases, epochs, paired_with: Some(head) } => vec![format!(
            "[gate] Step 2: full benchmark, paired ({test_split} split, {cases} case(s) x {epochs} epoch(s), candidate vs HEAD {}; per-case results stay private)",
            short(head)
        )],
        StepStart::Promotion => vec!["[gate] Step 3: promotion".into()],
    }
}

fn step_lines(step: &StepResult) -> Vec<String> {
    match step {
        StepResult::FileGuard(g) => file_guard_lines(g),
        StepResult::RegressionSet(None) => {
            vec!["[gate] Step 1: regression set is empty: skipped (counts as passed)".into()]
        }
        StepResult::RegressionSet(Some(v)) => {
            let (rate, threshold) = fmt_pair(v.rate, v.threshold);
            let mut lines = vec![format!(
                "{IN}{}/{} passed: rate {rate} {} threshold {threshold}  {}",
                v.passed,
                v.cases,
                if v.pass { ">=" } else { "<" },
                pass_fail(v.pass)
            )];
            if !v.not_passing.is_empty() {
                let list: Vec<String> = v.not_passing.iter().map(|n| n.describe()).collect();
                lines.push(format!("{IN}not passing: {}", list.join(", ")));
            }
            lines
        }
        StepResult::FullBenchmark(b) => full_benchmark_lines(b),
        StepResult::Promotion(p) => promotion_lines(p),
        StepResult::Unmeasured(u) => unmeasured_lines(u),
    }
}

/// Each arm's counts, and the train cells given as examples.
fn unmeasured_lines(u: &UnmeasuredStep) -> Vec<String> {
    let mut lines = Vec::new();
    for (arm, c) in &u.arms {
        let who = if u.arms.len() > 1 { format!("{arm}: ") } else { String::new() };
        let (fraction, max) = fmt_pair(c.fraction(), u.max_unmeasured);
        lines.push(format!(
            "{IN}{who}{}  {}",
            unmeasured_counts(c),
            if c.exceeds(u.max_unmeasured) {
                format!("UNMEASURED (fraction {fraction} > max_unmeasured {max})")
            } else {
                format!("ok (fraction {fraction} <= max_unmeasured {max})")
            }
        ));
        for e in &c.examples {
            lines.push(format!("{IN}  e.g. {} ({}): {}", e.case, e.class.label(), e.reason));
        }
    }
    lines
}

/// "4 of 4 planned cell(s) unmeasured: harness error 4, provider error 0, timeout 0, missing 0".
fn unmeasured_counts(c: &Coverage) -> String {
    format!(
        "{} of {} planned cell(s) unmeasured: harness error {}, provider error {}, timeout {}, missing {}",
        c.unmeasured(),
        c.planned,
        c.harness_error,
        c.provider_error,
        c.timeout,
        c.missing
    )
}

fn file_guard_lines(g: &FileGuard) -> Vec<String> {
    let mut lines = Vec::new();
    match &g.guard {
        Guard::Disabled { config } => lines.push(format!(
            "{IN}disabled by `file_guard` in {}: changes outside the allowlist are not checked",
            config.display()
        )),
        Guard::Checked if g.violations.is_empty() => {
            lines.push(format!("{IN}ok: no change outside the allowlist ({})", g.allowlist))
        }
        Guard::Checked => {
            lines.push(format!(
                "{IN}FAIL: {} file(s) changed outside the allowlist ({}):",
                g.violations.len(),
                g.allowlist
            ));
            for v in &g.violations {
                lines.push(format!("{IN}  - {} ({}): revert with `{}`", v.path, v.detail, v.revert_hint()));
            }
            if let Some(repo) = &g.repo_root {
                lines.push(format!("{IN}  (paths are relative to the repository root {})", repo.display()));
            }
        }
        Guard::NoGit { root } => lines.push(format!(
            "{IN}warning: {} is not in a git repository; the file guard is skipped (set `file_guard: false` to silence this)",
            root.display()
        )),
    }
    for f in &g.newly_protected {
        lines.push(format!(
            "{IN}note: {f} is now protected: its hash is recorded; change it only with --accept-state-change {f}"
        ));
    }
    if g.tampered.is_empty() {
        lines.push(format!(
            "{IN}ok: gate state intact (suite.json, results.tsv, pending record, train results, config)"
        ));
    }
    for t in &g.tampered {
        lines.push(format!("{IN}FAIL: {}", t.describe()));
        lines.push(format!("{IN}  {}", t.advice()));
    }
    if let Some(e) = &g.candidate_error {
        lines.push(format!("{IN}FAIL: the candidate does not load: {e}"));
    }
    lines
}

fn full_benchmark_lines(b: &FullBenchmark) -> Vec<String> {
    match b {
        FullBenchmark::Simple { val_score, best, pass, cells, no_verdict, .. } => {
            let mut lines = vec![match best {
                None => format!("{IN}val_score {}  PASS (no best recorded yet in {RESULTS})", fmt_num(*val_score)),
                Some(best) => {
                    let (v, bs) = fmt_pair(*val_score, *best);
                    format!("{IN}val_score {v} {} best {bs}  {}", if *pass { ">=" } else { "<" }, pass_fail(*pass))
                }
            }];
            if *no_verdict > 0 {
                lines.push(format!(
                    "{IN}{no_verdict} of {cells} cell(s) produced no verdict (infrastructure error) and count 0"
                ));
            }
            lines
        }
        FullBenchmark::Paired { val_score, comparison: None, .. } => {
            vec![format!("{IN}candidate {}; difference 0, interval [0, 0]  PASS", fmt_num(*val_score))]
        }
        FullBenchmark::Paired { val_score, head_score, comparison: Some(c), margin, pass, cases, cells, .. } => {
            let (lo, hi) = fmt_pair(c.interval.lo, c.interval.hi);
            let (upper, bound) = fmt_pair(c.interval.hi, -margin);
            vec![
                format!(
                    "{IN}candidate {}, HEAD {} (mean reward over {cells} cells each)",
                    fmt_num(*val_score),
                    fmt_num(*head_score)
                ),
                format!(
                    "{IN}difference {}, {}% CI [{}, {}], p = {} ({}; {} of {cases} case(s) compared: {} better, {} worse, {} tied)",
                    signed(&fmt_num(c.mean_diff)),
                    fmt_num((1.0 - PAIRED_ALPHA) * 100.0),
                    signed(&lo),
                    signed(&hi),
                    fmt_p(c.p_value),
                    c.method,
                    c.cases,
                    c.wins,
                    c.losses,
                    c.ties
                ),
                format!(
                    "{IN}upper bound {} {} -margin {}: {}  {}",
                    signed(&upper),
                    if *pass { ">=" } else { "<" },
                    signed(&bound),
                    if *pass { "not shown worse than HEAD" } else { "worse than HEAD" },
                    pass_fail(*pass)
                ),
            ]
        }
    }
}

/// A p-value as people read it: 4 decimals, and "< 0.0001" rather than a rounded 0.
fn fmt_p(p: f64) -> String {
    if p < 0.0001 { "< 0.0001".into() } else { fmt_num(p) }
}

/// The detail of a failing Step 2, as the `FAILED` line shows it.
fn full_benchmark_failure(b: &FullBenchmark) -> String {
    match b {
        FullBenchmark::Simple { val_score, best, .. } => best
            .map(|best| {
                let (v, bs) = fmt_pair(*val_score, best);
                format!("val_score {v} < best {bs}")
            })
            .unwrap_or_default(),
        FullBenchmark::Paired { comparison: None, .. } => String::new(),
        FullBenchmark::Paired { comparison: Some(c), margin, .. } => {
            let (upper, margin) = fmt_pair(c.interval.hi, -margin);
            format!(
                "worse than HEAD: upper bound {} of the {}% CI of (candidate - HEAD) < -margin {} ({}, p = {})",
                signed(&upper),
                fmt_num((1.0 - PAIRED_ALPHA) * 100.0),
                signed(&margin),
                c.method,
                fmt_p(c.p_value)
            )
        }
    }
}

fn promotion_lines(p: &PromotionStep) -> Vec<String> {
    match p {
        PromotionStep::Skipped { reason } => vec![format!("[gate] Step 3: promotion skipped ({reason})")],
        PromotionStep::NoTrainResults => vec![format!(
            "{IN}no train results yet ({TRAIN_RESULTS}): run `hcbench run --split train` first; nothing to promote"
        )],
        PromotionStep::OtherBenchmark { found, expected } => vec![format!(
            "{IN}{TRAIN_RESULTS} is for benchmark {found}, not {expected}: nothing to promote (run `hcbench run --benchmark {expected} --split train`)"
        )],
        PromotionStep::NoCandidates => vec![format!(
            "{IN}nothing to promote: no failing train case outside the regression set in the latest train results"
        )],
        PromotionStep::Ran { result, needed, .. } => {
            let mut lines = Vec::new();
            if result.promoted.is_empty() {
                lines.push(format!("{IN}no case promoted"));
            } else {
                lines.push(format!(
                    "{IN}promoted {} case(s), joining the regression set when `hcbench record` records this candidate: {}",
                    result.promoted.len(),
                    result.promoted.join(", ")
                ));
            }
            if !result.pending.is_empty() {
                let mut pending: Vec<String> = result.pending.keys().cloned().collect();
                state::sort_ids(&mut pending);
                let list: Vec<String> =
                    pending.iter().map(|id| format!("{id} ({}/{needed})", result.pending[id])).collect();
                lines.push(format!("{IN}passing, promoted after more consecutive passing gates: {}", list.join(", ")));
            }
            if !result.not_passing.is_empty() {
                let list: Vec<String> = result.not_passing.iter().map(|n| n.describe()).collect();
                lines.push(format!("{IN}still failing: {}", list.join(", ")));
            }
            lines
        }
    }
}

/// The verdict lines: the last lines of the text output and the JSON object's `messages`.
fn verdict_lines(outcome: &GateOutcome) -> Vec<String> {
    match &outcome.verdict {
        Verdict::Passed => vec![format!(
            "[gate] PASSED: all steps clear (val_score {}); commit the candidate, then run `hcbench record` ({PENDING} holds the numbers and the regression set's update)",
            fmt_num(outcome.scores.map_or(0.0, |s| s.val_score))
        )],
        Verdict::Interrupted => vec!["[gate] interrupted: no state was written".into()],
        Verdict::Unmeasured(u) => {
            let name = STEP_NAMES[u.step as usize];
            let mut lines: Vec<String> = u
                .arms
                .iter()
                .filter(|(_, c)| c.exceeds(u.max_unmeasured))
                .map(|(arm, c)| {
                    let who = if u.arms.len() > 1 { format!("{arm} arm: ") } else { String::new() };
                    format!(
                        "[gate] UNMEASURED: Step {} ({name}): the candidate could not be measured: {who}{}, more than max_unmeasured {} of the planned cells",
                        u.step,
                        unmeasured_counts(c),
                        fmt_num(u.max_unmeasured)
                    )
                })
                .collect();
            lines.push(
                "[gate] neither commit nor revert: fix what kept the cells from running (test program, provider, time limits) and run the gate again; no state was written".into(),
            );
            lines
        }
        Verdict::Failed(failures) => {
            let mut lines: Vec<String> = failures.iter().map(failure_line).collect();
            // Step 0 failures ran no case, so there is nothing to try differently yet.
            if failures.iter().any(|f| f.step() > 0) {
                lines.push(
                    "[gate] revert the candidate (e.g. `git checkout HEAD -- <file>`) and try another idea".into(),
                );
            }
            lines
        }
    }
}

fn failure_line(f: &Failure) -> String {
    match f {
        Failure::FileGuard { files } => format!(
            "[gate] FAILED: Step 0 (file guard): {files} file(s) changed outside the allowlist; revert them and run the gate again (no case was run)"
        ),
        Failure::StateProtection(t) => {
            format!("[gate] FAILED: Step 0 (state protection): {} (no case was run)", t.describe())
        }
        Failure::Candidate(e) => {
            format!("[gate] FAILED: Step 0 (candidate): {e}; fix or revert the candidate (no case was run)")
        }
        Failure::RegressionSet(v) => {
            let (rate, threshold) = fmt_pair(v.rate, v.threshold);
            format!(
                "[gate] FAILED: Step 1 (regression set): {}/{} passed, rate {rate} < threshold {threshold}",
                v.passed, v.cases
            )
        }
        Failure::FullBenchmark(b) => format!("[gate] FAILED: Step 2 (full benchmark): {}", full_benchmark_failure(b)),
    }
}

fn pass_fail(pass: bool) -> &'static str {
    if pass { "PASS" } else { "FAIL" }
}

/// Progress while cells run, on stderr in both formats.
struct StderrLive;

impl LiveSink for StderrLive {
    fn live(&self, event: LiveEvent<'_>) {
        let mut err = io::stderr().lock();
        let _ = match event {
            LiveEvent::TrainCell { summary, done, total } => {
                writeln!(err, "[gate]   {}", crate::report::progress::cell_line(summary, done, total))
            }
            // About ten lines whatever the size: enough to see progress, not a wall of text.
            LiveEvent::TestCells { done, total } if done == total || done.is_multiple_of(total.div_ceil(10).max(1)) => {
                writeln!(err, "[gate]   {done}/{total} test cell(s) done")
            }
            LiveEvent::TestCells { .. } => Ok(()),
            LiveEvent::Interrupted => {
                writeln!(err, "[gate] interrupted: stopping the running cells; press Ctrl-C again to stop at once")
            }
        };
    }
}

// ── record ───────────────────────────────────────────────────────────────────────────────────

/// `record --format text`: `[record]` lines on stdout.
pub(crate) struct RecordText<W: Write> {
    out: W,
}

impl RecordText<io::Stdout> {
    pub(crate) fn stdout() -> Self {
        RecordText { out: io::stdout() }
    }
}

impl<W: Write> RecordSink for RecordText<W> {
    fn event(&mut self, event: &RecordEvent<'_>) {
        for l in record_lines(event) {
            let _ = writeln!(self.out, "{l}");
        }
    }
}

/// `record --format json`: the `[record]` lines on stderr, one object on stdout at the end.
pub(crate) struct RecordJson<W: Write, L: Write> {
    out: W,
    lines: RecordText<L>,
}

impl RecordJson<io::Stdout, io::Stderr> {
    pub(crate) fn stdout() -> Self {
        RecordJson { out: io::stdout(), lines: RecordText { out: io::stderr() } }
    }
}

impl<W: Write, L: Write> RecordSink for RecordJson<W, L> {
    fn event(&mut self, event: &RecordEvent<'_>) {
        self.lines.event(event);
        let RecordEvent::Finished(outcome) = event else { return };
        let v = match outcome {
            RecordOutcome::Refused { reasons } => json!({ "recorded": false, "reasons": reasons }),
            RecordOutcome::Recorded(row) => json!({
                "recorded": true, "iteration": row.iteration, "val_score": row.val_score, "commit": row.commit,
                "evals_passed": row.evals_passed, "evals_total": row.evals_total, "timestamp": row.timestamp,
            }),
        };
        let _ = writeln!(self.out, "{}", serde_json::to_string_pretty(&v).expect("json"));
    }
}

/// The `[record]` lines of one event.
pub(crate) fn record_lines(event: &RecordEvent<'_>) -> Vec<String> {
    match event {
        RecordEvent::WaitingForLock { holder } => vec![format!("[record] waiting for the workspace lock ({holder})")],
        RecordEvent::NoGit { root } => {
            vec![format!("[record] warning: {} is not in a git repository; the row records no commit", root.display())]
        }
        RecordEvent::Finished(RecordOutcome::Refused { reasons }) => {
            reasons.iter().map(|r| format!("[record] refused: {r}")).collect()
        }
        RecordEvent::Finished(RecordOutcome::Recorded(row)) => vec![format!(
            "[record] iteration {}: val_score {}, evals {}/{}, commit {} -> {RESULTS}",
            row.iteration,
            fmt_num(row.val_score),
            row.evals_passed,
            row.evals_total,
            short(&row.commit)
        )],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::event::Scores;
    use crate::gate::steps::judge_regression_set;

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// The two sinks tell the same story: the JSON sink's stderr is the text sink's stdout, and
    /// its `messages` are the text's last lines.
    #[test]
    fn text_and_json_render_the_same_events() {
        let reasons = [("b".to_string(), "failed".to_string())].into();
        let set = judge_regression_set(&ids(&["a", "b"]), &[("a".to_string(), 1.0)].into(), &reasons, &[], 0.8);
        let bench =
            FullBenchmark::Simple { val_score: 0.25, best: Some(0.5), pass: false, cases: 4, cells: 4, no_verdict: 1 };
        let steps = [
            StepResult::RegressionSet(Some(set.clone())),
            StepResult::FullBenchmark(bench.clone()),
            StepResult::Promotion(PromotionStep::Skipped { reason: "Steps 1 and 2 failed" }),
        ];
        let outcome = GateOutcome {
            verdict: Verdict::Failed(vec![Failure::RegressionSet(set), Failure::FullBenchmark(bench)]),
            scores: Some(Scores { val_score: 0.25, evals_passed: 1, evals_total: 2 }),
        };
        let mut events: Vec<GateEvent<'_>> = steps.iter().map(GateEvent::StepFinished).collect();
        events.push(GateEvent::Finished(&outcome));

        let mut text = TextSink { out: Vec::new() };
        let mut json = JsonSink::new(Vec::new(), Vec::new());
        for e in &events {
            text.event(e);
            json.event(e);
        }
        let text = String::from_utf8(text.out).unwrap();
        assert_eq!(String::from_utf8(json.lines.out).unwrap(), text);
        let expected = "       1/2 passed: rate 0.5 < threshold 0.8  FAIL
       not passing: b (score 0, failed)
       val_score 0.25 < best 0.5  FAIL
       1 of 4 cell(s) produced no verdict (infrastructure error) and count 0
[gate] Step 3: promotion skipped (Steps 1 and 2 failed)
[gate] FAILED: Step 1 (regression set): 1/2 passed, rate 0.5 < threshold 0.8
[gate] FAILED: Step 2 (full benchmark): val_score 0.25 < best 0.5
[gate] revert the candidate (e.g. `git checkout HEAD -- <file>`) and try another idea
";
        assert_eq!(text, expected);

        let v: Value = serde_json::from_slice(&json.out).unwrap();
        assert_eq!(v["verdict"], "failed");
        assert_eq!(v["exit_code"], 1);
        assert_eq!(v["failed_steps"], json!([1, 2]));
        let messages: Vec<&str> = v["messages"].as_array().unwrap().iter().map(|m| m.as_str().unwrap()).collect();
        assert_eq!(messages, text.lines().skip(5).collect::<Vec<_>>());
        assert_eq!(v["steps"][0]["status"], "not_run");
        assert_eq!(v["steps"][1]["name"], "regression set");
        assert_eq!(v["steps"][1]["detail"]["tasks"], 2, "the JSON keys stay those of suite.json");
        assert_eq!(
            v["steps"][2]["detail"],
            json!({"mode": "simple", "val_score": 0.25, "best": 0.5, "cases": 4, "cells": 4, "no_verdict": 1})
        );
        assert_eq!(v["steps"][3]["status"], "skipped");
        assert_eq!((v["val_score"].as_f64(), v["evals_total"].as_u64()), (Some(0.25), Some(2)));
        assert_eq!(v["pending_record"], Value::Null);
    }
}
