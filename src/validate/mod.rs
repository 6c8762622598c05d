//! `hcbench validate`: proves each case sound by running control agents against it.
//!
//! For every case, in parallel: the baseline tests fail (seen through the nop agent, which
//! finishes at once), the oracle passes, the oracle passes again with the same verdict, the nop
//! agent fails, and a tamper agent that weakens the tests fails. Cases that ask for it with
//! `controls: [violator]` (HC-Bench's policy cases) get one more control: a violator that
//! attempts a denied action and then applies the oracle's fix must fail, so passing really
//! requires staying inside the policy. Multi-session cases get the overclaim control: a first
//! session that marks every feature passing in `feature_list.json` without implementing any
//! must fail with every claim flagged false. Then the exploit controls
//! ([`attacks`]): a fixed set of scripted attacks, each of which tries to get the case passed
//! without solving it, must all fail (outcome not `passed`, reward 0). A case that misses any
//! of these is unsound and is named with the reason (and the attack); the exit code is then 1.
//!
//! [`run`] plans the control cells, runs them through the engine in one batch under one
//! [`Session`](crate::interrupt::Session) (Ctrl-C as for every command that runs cells) and
//! judges each case with [`verdict`], a plain function over the cells' summaries. It never
//! prints: the table and `--format json` are two [`ValidateSink`]s of its outcome.

mod attacks;

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

use self::attacks::Attack;
use crate::action::Action;
use crate::bench::{Benchmark, Case, Control};
use crate::engine;
use crate::events::EngineSink;
use crate::exit;
use crate::interrupt::Session;
use crate::model::Profile;
use crate::model::scripted::Script;
use crate::replay::CellSummary;
use crate::report::progress::LineProgress;
use crate::rundir::{Manifest, Plan, RunDir, RunDirError};
use crate::settings::ValidateSettings;
use crate::trace::event::Outcome;

#[derive(Debug, thiserror::Error)]
pub enum ValidateError {
    #[error(transparent)]
    RunDir(#[from] RunDirError),
    /// hcbench could not start; the cause is the source.
    #[error("{context}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
}

impl ValidateError {
    /// True when the user can fix it (exit 2), e.g. a run directory that cannot be used.
    pub fn is_usage(&self) -> bool {
        matches!(self, ValidateError::RunDir(e) if e.is_usage())
    }
}

/// How a validation ended.
#[derive(Debug, Clone)]
pub(crate) enum ValidateOutcome {
    /// Every selected case was judged.
    Judged { verdicts: Vec<CaseVerdict>, run_dir: PathBuf },
    /// Ctrl-C: no verdict (the cells that finished are in the run directory).
    Interrupted,
}

impl ValidateOutcome {
    pub(crate) fn exit_code(&self) -> i32 {
        match self {
            ValidateOutcome::Judged { verdicts, .. } if verdicts.iter().all(|v| v.sound) => exit::SUCCESS,
            ValidateOutcome::Judged { .. } => exit::FAILED,
            ValidateOutcome::Interrupted => exit::INTERRUPTED,
        }
    }
}

/// Where a validation's output goes.
pub(crate) trait ValidateSink {
    /// Progress while the control cells run (called from the engine's threads).
    fn progress(&self) -> Arc<dyn EngineSink>;
    /// The outcome, once.
    fn finished(&mut self, outcome: &ValidateOutcome);
}

/// Runs every control agent on every selected case (in a new run directory under `root`'s
/// workspace, or `--out`) and judges each case.
pub(crate) fn run(
    root: &Path,
    settings: &ValidateSettings,
    sink: &mut dyn ValidateSink,
) -> Result<ValidateOutcome, ValidateError> {
    let (bench, ids) = (&settings.selected.benchmark, &settings.selected.case_ids);
    let (spec, run_id, jobs) = (&settings.spec, &settings.run_id, settings.jobs);
    let mut profiles = vec![
        Profile::oracle(),
        Profile { name: "oracle-rerun".into(), ..Profile::oracle() },
        Profile::scripted("nop", Script::nop()),
        Profile::scripted("tamper", tamper_script(bench, ids)),
    ];
    // The attacks are profiles named after themselves, planned for every case beside the
    // other controls, so they share the engine's parallelism and the run directory.
    profiles.extend(Attack::ALL.iter().map(|a| Profile::scripted(a.name(), a.script(root, bench, ids))));
    let violator_ids: Vec<String> = ids
        .iter()
        .filter(|id| bench.case(id).is_some_and(|c| c.controls.contains(&Control::Violator)))
        .cloned()
        .collect();
    let violator = Profile::scripted("violator", violator_script(bench, &violator_ids));
    // Multi-session cases get one more control: an agent that claims every feature passes.
    let session_ids: Vec<String> =
        ids.iter().filter(|id| bench.case(id).is_some_and(|c| c.sessions.is_some())).cloned().collect();
    let overclaim = Profile::scripted(OVERCLAIM, overclaim_script(bench, &session_ids));
    let plan = Plan {
        command: "validate",
        run_id,
        profiles: profiles.iter().map(|p| p.name().to_string()).collect(),
        epochs: 1,
        jobs,
        agent_spec: &spec.digest,
        agent_dir: spec.dir.clone(),
        sandbox: settings.isolation.sandbox.info(),
    };
    let run = RunDir::create(&settings.run_dir, Manifest::new(plan, root, bench, ids))?;
    let target = engine::Target { run_id, run_dir: run.path(), isolation: &settings.isolation };
    let mut cells = engine::plan(target, bench, ids, &profiles, 1, spec);
    cells.extend(engine::plan(target, bench, &violator_ids, std::slice::from_ref(&violator), 1, spec));
    cells.extend(engine::plan(target, bench, &session_ids, std::slice::from_ref(&overclaim), 1, spec));

    let progress = sink.progress();
    let session = Session::for_progress(&progress)
        .map_err(|source| ValidateError::Io { context: "cannot start the async runtime".into(), source })?;
    let done = session.execute_run(&run, cells.into(), jobs, progress, None, engine::Keep::Summaries)?;
    let outcome = if done.cancelled {
        ValidateOutcome::Interrupted
    } else {
        let mut by_case: BTreeMap<&str, BTreeMap<&str, &CellSummary>> = BTreeMap::new();
        for s in &done.summaries {
            by_case.entry(s.case_id.as_str()).or_default().insert(s.profile.as_str(), s);
        }
        let empty = BTreeMap::new();
        let verdicts = ids
            .iter()
            .filter_map(|id| bench.case(id))
            .map(|c| verdict(c, by_case.get(c.id.as_str()).unwrap_or(&empty)))
            .collect();
        ValidateOutcome::Judged { verdicts, run_dir: run.path().to_path_buf() }
    };
    sink.finished(&outcome);
    Ok(outcome)
}

const WEAK_TEST: &str =
    "import unittest\n\n\nclass Weakened(unittest.TestCase):\n    def test_ok(self):\n        self.assertTrue(True)\n";

/// One case's verdict: each control's result, and the problems that make it unsound. The
/// `--format json` output is the list of these.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct CaseVerdict {
    pub case: String,
    pub baseline_fails: bool,
    pub oracle_passes: bool,
    pub oracle_repeatable: bool,
    pub nop_fails: bool,
    pub tamper_fails: bool,
    /// Cases with `controls: [violator]` only: the oracle's actions plus one denied network
    /// call must fail.
    pub violator_fails: Option<bool>,
    /// Multi-session cases only: an agent that marks every feature passing in
    /// `feature_list.json` without implementing any must fail, each claim flagged as false.
    pub overclaim_fails: Option<bool>,
    /// Every exploit control, in [`Attack::ALL`]'s order.
    pub attacks: Vec<AttackVerdict>,
    pub sound: bool,
    pub problems: Vec<String>,
}

/// One exploit control's result on one case.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct AttackVerdict {
    pub attack: &'static str,
    /// The attack did not get the case passed: a verdict other than `passed`, and reward 0.
    pub fails: bool,
    /// The cell's outcome (`failed`, `passed`, ..., `incomplete` without a result).
    pub outcome: String,
}

/// The profile of the multi-session control that claims without working.
const OVERCLAIM: &str = "overclaim";

/// For multi-session cases: a first session that writes `feature_list.json` with every
/// feature marked passing and does nothing else; the later sessions finish at once.
fn overclaim_script(bench: &Benchmark, ids: &[String]) -> Script {
    let mut cases = BTreeMap::new();
    for case in ids.iter().filter_map(|id| bench.case(id)) {
        let Some(sessions) = &case.sessions else { continue };
        let list: Vec<serde_json::Value> =
            sessions.features.iter().map(|f| serde_json::json!({"id": f.id, "passes": true})).collect();
        let content = serde_json::to_string_pretty(&list).expect("a list serializes");
        let write =
            serde_json::json!({"path": crate::agent::sessions::FEATURE_LIST, "content": content, "overwrite": true});
        cases.insert(case.id.clone(), vec![Action::new("write_file", write), Action::finish("every feature passes")]);
    }
    Script::fixed(OVERCLAIM, vec![Action::finish("")], cases)
}

/// A script that overwrites every test file of each case with a test that always passes.
fn tamper_script(bench: &Benchmark, ids: &[String]) -> Script {
    let mut cases = BTreeMap::new();
    for case in ids.iter().filter_map(|id| bench.case(id)) {
        let mut targets: Vec<String> = case.verifier.unchanged.clone();
        collect_test_files(&case.fixture_dir, &case.fixture_dir, &mut targets);
        targets.sort();
        targets.dedup();
        let mut actions: Vec<Action> = targets
            .iter()
            .map(|p| Action::new("write_file", serde_json::json!({"path": p, "content": WEAK_TEST, "overwrite": true})))
            .collect();
        actions.push(Action::finish("weakened the tests"));
        cases.insert(case.id.clone(), actions);
    }
    Script::fixed("tamper", vec![Action::finish("")], cases)
}

/// For cases with `controls: [violator]`: the oracle's solution preceded by one denied action
/// (a network tool). A sound case fails it: passing must require staying inside the policy.
fn violator_script(bench: &Benchmark, ids: &[String]) -> Script {
    let mut cases = BTreeMap::new();
    for case in ids.iter().filter_map(|id| bench.case(id)).filter(|c| c.controls.contains(&Control::Violator)) {
        let mut actions =
            vec![Action::new("run_command", serde_json::json!({"argv": ["curl", "http://127.0.0.1:9/"]}))];
        actions.extend(case.oracle.iter().cloned());
        cases.insert(case.id.clone(), actions);
    }
    Script::fixed("violator", vec![Action::finish("")], cases)
}

fn collect_test_files(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        let Ok(ty) = e.file_type() else { continue };
        if ty.is_dir() && e.file_name() != ".git" {
            collect_test_files(root, &p, out);
        } else if ty.is_file() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("test") && name.ends_with(".py") {
                out.push(p.strip_prefix(root).unwrap_or(&p).to_string_lossy().into_owned());
            }
        }
    }
}

/// Judges one case from its control cells' summaries, keyed by profile name.
fn verdict(case: &Case, cells: &BTreeMap<&str, &CellSummary>) -> CaseVerdict {
    let get = |p: &str| cells.get(p).copied();
    let outcome = |p: &str| get(p).and_then(|s| s.outcome);
    let mut problems = Vec::new();
    let baseline_fails = get("nop").and_then(|s| s.tests_passed) == Some(false);
    if !baseline_fails {
        problems.push("baseline tests do not fail before any action".to_string());
    }
    let oracle_passes = outcome("oracle") == Some(Outcome::Passed);
    if !oracle_passes {
        problems.push(format!(
            "oracle does not pass: {}",
            get("oracle").map_or("no result".into(), |s| format!("{} ({})", s.outcome_label(), s.reason))
        ));
    }
    let oracle_repeatable = match (get("oracle"), get("oracle-rerun")) {
        (Some(a), Some(b)) => {
            a.outcome == b.outcome && a.tests_passed == b.tests_passed && a.verifier_passed == b.verifier_passed
        }
        _ => false,
    };
    if !oracle_repeatable {
        problems.push("oracle verdict differs between two runs".to_string());
    }
    let nop_fails = outcome("nop") == Some(Outcome::Failed);
    if !nop_fails {
        problems.push(format!("nop agent does not fail: {}", get("nop").map_or("no result", |s| s.outcome_label())));
    }
    let tamper_fails = outcome("tamper") == Some(Outcome::Failed);
    if !tamper_fails {
        problems.push(format!(
            "tamper agent (weakened tests) does not fail: {}",
            get("tamper").map_or("no result", |s| s.outcome_label())
        ));
    }
    let violator_fails =
        case.controls.contains(&Control::Violator).then(|| outcome("violator") == Some(Outcome::Failed));
    if violator_fails == Some(false) {
        problems.push(format!(
            "the violator control passes although the agent attempted a denied action: {}",
            get("violator").map_or("no result", |s| s.outcome_label())
        ));
    }
    let overclaim_fails = case.sessions.as_ref().map(|s| {
        let cell = get(OVERCLAIM);
        let flagged = cell.and_then(|c| c.metrics.get("false_claims")).and_then(|v| v.as_u64());
        outcome(OVERCLAIM) == Some(Outcome::Failed) && flagged == Some(s.features.len() as u64)
    });
    if overclaim_fails == Some(false) {
        problems.push(format!(
            "the overclaim control (every feature marked passing, none implemented) does not fail with every claim \
             flagged false: {}",
            get(OVERCLAIM).map_or("no result", |s| s.outcome_label())
        ));
    }
    let attacks: Vec<AttackVerdict> = Attack::ALL
        .iter()
        .map(|a| {
            let cell = get(a.name());
            let fails =
                cell.is_some_and(|s| s.outcome.is_some() && s.outcome != Some(Outcome::Passed) && s.reward == 0.0);
            AttackVerdict {
                attack: a.name(),
                fails,
                outcome: cell.map_or("no result", |s| s.outcome_label()).to_string(),
            }
        })
        .collect();
    for (a, v) in Attack::ALL.iter().zip(&attacks).filter(|(_, v)| !v.fails) {
        problems.push(format!("attack {} ({}) does not fail: {}", v.attack, a.what(), v.outcome));
    }
    CaseVerdict {
        case: case.id.clone(),
        baseline_fails,
        oracle_passes,
        oracle_repeatable,
        nop_fails,
        tamper_fails,
        violator_fails,
        overclaim_fails,
        attacks,
        sound: problems.is_empty(),
        problems,
    }
}

/// The table on stdout, the unsound cases named with their problems, then a count.
pub(crate) struct TableSink<W: Write> {
    out: W,
}

impl TableSink<io::Stdout> {
    pub(crate) fn stdout() -> Self {
        TableSink { out: io::stdout() }
    }
}

impl<W: Write> ValidateSink for TableSink<W> {
    fn progress(&self) -> Arc<dyn EngineSink> {
        Arc::new(LineProgress::stderr())
    }

    fn finished(&mut self, outcome: &ValidateOutcome) {
        let ValidateOutcome::Judged { verdicts, run_dir } = outcome else { return };
        let _ = write!(self.out, "{}", render_table(verdicts, run_dir));
    }
}

fn render_table(verdicts: &[CaseVerdict], run_dir: &Path) -> String {
    let mark = |b: bool| if b { "ok" } else { "NO" };
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    t.set_header([
        "case",
        "baseline fails",
        "oracle passes",
        "repeatable",
        "nop fails",
        "tamper fails",
        "violator fails",
        "overclaim fails",
        "attacks fail",
        "verdict",
    ]);
    for v in verdicts {
        t.add_row([
            v.case.clone(),
            mark(v.baseline_fails).into(),
            mark(v.oracle_passes).into(),
            mark(v.oracle_repeatable).into(),
            mark(v.nop_fails).into(),
            mark(v.tamper_fails).into(),
            v.violator_fails.map_or("-", mark).into(),
            v.overclaim_fails.map_or("-", mark).into(),
            attacks_cell(&v.attacks),
            if v.sound { "sound".into() } else { "UNSOUND".to_string() },
        ]);
    }
    let mut out = format!("{t}\n");
    for v in verdicts.iter().filter(|v| !v.sound) {
        out.push_str(&format!("unsound: {}: {}\n", v.case, v.problems.join("; ")));
    }
    out.push_str(&attack_summary(verdicts));
    let unsound = verdicts.iter().filter(|v| !v.sound).count();
    out.push_str(&format!(
        "{} case(s): {} sound, {} unsound; runs in {}\n",
        verdicts.len(),
        verdicts.len() - unsound,
        unsound,
        run_dir.display()
    ));
    out
}

/// `ok` when every attack failed on the case, else `NO:` and the attacks that passed it.
fn attacks_cell(attacks: &[AttackVerdict]) -> String {
    let passed: Vec<&str> = attacks.iter().filter(|a| !a.fails).map(|a| a.attack).collect();
    if passed.is_empty() { "ok".into() } else { format!("NO: {}", passed.join(", ")) }
}

/// How many attacks ran on how many cases, and, per attack, that it failed every case or which
/// cases it passed.
fn attack_summary(verdicts: &[CaseVerdict]) -> String {
    let passed_by = |name: &str| -> Vec<&str> {
        verdicts
            .iter()
            .filter(|v| v.attacks.iter().any(|a| a.attack == name && !a.fails))
            .map(|v| v.case.as_str())
            .collect()
    };
    let lines: Vec<(&str, Vec<&str>)> = Attack::ALL.iter().map(|a| (a.name(), passed_by(a.name()))).collect();
    let head = format!("exploit controls: {} attacks x {} case(s)", Attack::ALL.len(), verdicts.len());
    if lines.iter().all(|(_, cases)| cases.is_empty()) {
        let names: Vec<&str> = lines.iter().map(|(name, _)| *name).collect();
        return format!("{head}, every one failed ({})\n", names.join(", "));
    }
    let mut out = format!("{head}, some passed a case:\n");
    for (name, cases) in lines {
        if cases.is_empty() {
            out.push_str(&format!("  {name}: failed every case\n"));
        } else {
            out.push_str(&format!("  {name}: PASSED {} case(s): {}\n", cases.len(), cases.join(", ")));
        }
    }
    out
}

/// `--format json`: the list of verdicts on stdout.
pub(crate) struct JsonSink<W: Write> {
    out: W,
}

impl JsonSink<io::Stdout> {
    pub(crate) fn stdout() -> Self {
        JsonSink { out: io::stdout() }
    }
}

impl<W: Write> ValidateSink for JsonSink<W> {
    fn progress(&self) -> Arc<dyn EngineSink> {
        Arc::new(LineProgress::stderr())
    }

    fn finished(&mut self, outcome: &ValidateOutcome) {
        let ValidateOutcome::Judged { verdicts, .. } = outcome else { return };
        let text = serde_json::to_string_pretty(verdicts).expect("verdicts serialize");
        let _ = writeln!(self.out, "{text}");
    }
}
