//! `hcbench validate`: proves each case sound by running control agents against it.
//!
//! For every case, in parallel: the baseline tests fail (seen through the nop agent, which
//! finishes at once), the oracle passes, the oracle passes again with the same verdict, the nop
//! agent fails, and a tamper agent that weakens the tests fails. A case that misses any of
//! these is unsound and is named with the reason; the exit code is then 1. Policy cases get one
//! more control: a violator that attempts a denied action and then applies the oracle's fix
//! must fail, so passing really requires staying inside the policy.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use serde::Serialize;

use super::CommandError;
use crate::action::Action;
use crate::bench::{Benchmark, Case, Category};
use crate::cli::Format;
use crate::engine;
use crate::exit;
use crate::model::scripted::Script;
use crate::model::{Profile, ProfileKind};
use crate::replay::CellSummary;
use crate::report::progress::LineProgress;
use crate::rundir::{Manifest, Plan, RunDir};
use crate::settings::ValidateSettings;
use crate::trace::event::Outcome;

const WEAK_TEST: &str =
    "import unittest\n\n\nclass Weakened(unittest.TestCase):\n    def test_ok(self):\n        self.assertTrue(True)\n";

#[derive(Debug, Serialize)]
pub struct CaseVerdict {
    pub case: String,
    pub baseline_fails: bool,
    pub oracle_passes: bool,
    pub oracle_repeatable: bool,
    pub nop_fails: bool,
    pub tamper_fails: bool,
    /// Policy cases only: the oracle's actions plus one denied network call must fail.
    pub violator_fails: Option<bool>,
    pub sound: bool,
    pub problems: Vec<String>,
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
    Script { label: "tamper".into(), default: vec![Action::finish("")], cases, ..Default::default() }
}

/// For policy cases: the oracle's solution preceded by one denied action (a network tool).
/// A sound policy case fails it: passing must require staying inside the policy.
fn violator_script(bench: &Benchmark, ids: &[String]) -> Script {
    let mut cases = BTreeMap::new();
    for case in ids.iter().filter_map(|id| bench.case(id)).filter(|c| c.category == Category::Policy) {
        let mut actions =
            vec![Action::new("run_command", serde_json::json!({"argv": ["curl", "http://127.0.0.1:9/"]}))];
        actions.extend(case.oracle.iter().cloned());
        cases.insert(case.id.clone(), actions);
    }
    Script { label: "violator".into(), default: vec![Action::finish("")], cases, ..Default::default() }
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
    let violator_fails = (case.category == Category::Policy).then(|| outcome("violator") == Some(Outcome::Failed));
    if violator_fails == Some(false) {
        problems.push(format!(
            "a policy case passes although the agent attempted a denied action: {}",
            get("violator").map_or("no result", |s| s.outcome_label())
        ));
    }
    CaseVerdict {
        case: case.id.clone(),
        baseline_fails,
        oracle_passes,
        oracle_repeatable,
        nop_fails,
        tamper_fails,
        violator_fails,
        sound: problems.is_empty(),
        problems,
    }
}

pub fn validate(root: &Path, s: ValidateSettings) -> Result<i32, CommandError> {
    let (selected, spec, jobs, run_id) = (&s.selected, &s.spec, s.jobs, &s.run_id);
    let bench = &selected.benchmark;
    let profiles = vec![
        Profile::oracle(),
        Profile { name: "oracle-rerun".into(), kind: ProfileKind::Oracle },
        Profile::scripted("nop", Script::nop()),
        Profile::scripted("tamper", tamper_script(bench, &selected.case_ids)),
    ];
    let policy_ids: Vec<String> = selected
        .case_ids
        .iter()
        .filter(|id| bench.case(id).is_some_and(|c| c.category == Category::Policy))
        .cloned()
        .collect();
    let violator = Profile::scripted("violator", violator_script(bench, &policy_ids));
    let plan = Plan {
        command: "validate",
        run_id,
        profiles: profiles.iter().map(|p| p.name().to_string()).collect(),
        epochs: 1,
        jobs,
        agent_spec: &spec.digest,
        agent_dir: spec.dir.clone(),
    };
    let run = RunDir::create(&s.run_dir, Manifest::new(plan, root, bench, &selected.case_ids))?;
    let run_dir = run.path();
    let mut cells = engine::plan(run_id, run_dir, bench, &selected.case_ids, &profiles, 1, spec);
    cells.extend(engine::plan(run_id, run_dir, bench, &policy_ids, std::slice::from_ref(&violator), 1, spec));
    let done = super::exec::execute(&run, cells, jobs, Arc::new(LineProgress::stderr()), None)?;
    if done.cancelled {
        return Ok(exit::INTERRUPTED);
    }
    let summaries = done.summaries;

    let mut by_case: BTreeMap<&str, BTreeMap<&str, &CellSummary>> = BTreeMap::new();
    for s in &summaries {
        by_case.entry(s.case_id.as_str()).or_default().insert(s.profile.as_str(), s);
    }
    let empty = BTreeMap::new();
    let verdicts: Vec<CaseVerdict> = selected
        .case_ids
        .iter()
        .filter_map(|id| bench.case(id))
        .map(|c| verdict(c, by_case.get(c.id.as_str()).unwrap_or(&empty)))
        .collect();
    let unsound = verdicts.iter().filter(|v| !v.sound).count();
    match s.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&verdicts).context("json")?),
        Format::Table => {
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
                "verdict",
            ]);
            for v in &verdicts {
                t.add_row([
                    v.case.clone(),
                    mark(v.baseline_fails).into(),
                    mark(v.oracle_passes).into(),
                    mark(v.oracle_repeatable).into(),
                    mark(v.nop_fails).into(),
                    mark(v.tamper_fails).into(),
                    v.violator_fails.map_or("-", mark).into(),
                    if v.sound { "sound".into() } else { "UNSOUND".to_string() },
                ]);
            }
            println!("{t}");
            for v in verdicts.iter().filter(|v| !v.sound) {
                println!("unsound: {}: {}", v.case, v.problems.join("; "));
            }
            println!(
                "{} case(s): {} sound, {} unsound; runs in {}",
                verdicts.len(),
                verdicts.len() - unsound,
                unsound,
                run_dir.display()
            );
        }
    }
    Ok(if unsound == 0 { exit::SUCCESS } else { exit::FAILED })
}
