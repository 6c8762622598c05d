//! Multi-session cases end to end: HC-Bench's `sessions-*` cases with the oracle (one part per
//! session), a script per session that proves each session starts from a fresh context, an
//! agent that marks every feature passing without work (false claims flagged, case failed),
//! a bad case file (exit 2 naming file and field), and `hcbench validate` over the new cases.

use std::path::Path;

use serde_json::Value;

use crate::Test;
use crate::run::{Scratch, by_cell};

/// Runs one HC-Bench case with `profile` (and `script`, for `scripted`) into `out`; returns
/// the cell's summary and its trace's events.
fn run_case(out: &Path, case: &str, profile: &str, script: Option<&Path>, code: i32) -> (Value, Vec<Value>) {
    let mut t =
        Test::new().args(&["run", "--case", case, "--profile", profile, "--format", "json", "--out"]).arg_path(out);
    if let Some(s) = script {
        t = t.args(&["--script"]).arg_path(s);
    }
    let done = t.run().code(code);
    let cell = by_cell(&done.json())[&format!("{case}__{profile}")].clone();
    (cell, crate::trace_events(&out.join(format!("cells/{case}__{profile}/trace.jsonl"))))
}

fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["kind"] == kind).collect()
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array().map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default()
}

#[test]
fn the_oracle_carries_a_multi_session_case_through_its_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let (cell, events) = run_case(&out, "sessions-1", "oracle", None, 0);
    assert_eq!(cell["outcome"], "passed", "{}", cell["reason"]);

    let started = of_kind(&events, "session_started");
    let finished = of_kind(&events, "session_finished");
    assert_eq!((started.len(), finished.len()), (4, 4), "count: 4 sessions");
    let roles: Vec<&str> = started.iter().map(|e| e["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["initializer", "coding", "coding", "coding"]);
    // Steps run on: each session starts at the step after the last one of the session before.
    let mut next = 1;
    for (s, f) in started.iter().zip(&finished) {
        assert_eq!(s["first_step"], next, "{s}");
        assert_eq!(s["step_budget"], 14);
        assert_eq!(f["stop_reason"], "finished");
        next += f["steps_used"].as_u64().unwrap();
    }
    assert_eq!(cell["steps"], next - 1, "the summary's steps are every session's");
    assert_eq!(cell["step_budget"], 56, "4 sessions x 14");

    // One more feature verified and marked per coding session, each session's own commit.
    let verified: Vec<usize> = finished.iter().map(|f| strings(&f["verified_passing"]).len()).collect();
    assert_eq!(verified, [0, 1, 2, 3]);
    let marked: Vec<Vec<&str>> = finished.iter().map(|f| strings(&f["marked_passing"])).collect();
    assert_eq!(marked[3], ["word-count", "top-words", "char-count"]);
    let heads: Vec<&str> = finished.iter().map(|f| f["head"].as_str().expect("a commit per session")).collect();
    assert!(heads.iter().all(|h| h.len() == 40), "{heads:?}");
    let distinct: std::collections::BTreeSet<&&str> = heads.iter().collect();
    assert_eq!(distinct.len(), 4, "each session committed: {heads:?}");

    assert_eq!(cell["metrics"]["features_passing"], 3);
    assert_eq!(cell["metrics"]["false_claims"], 0);
    assert_eq!(cell["metrics"]["features_per_session"], serde_json::json!([0, 1, 2, 3]));
    assert_eq!(cell["sessions"].as_array().unwrap().len(), 4);

    // Replay folds the same summary, and the report shows the progress per session.
    let replayed = Test::new().args(&["replay", "--format", "json"]).arg_path(&out).run().code(0);
    assert_eq!(by_cell(&replayed.json())["sessions-1__oracle"], cell, "replay agrees with the live run");
    Test::new().args(&["report"]).arg_path(&out).run().code(0);
    let md = std::fs::read_to_string(out.join("reports/report.md")).unwrap();
    assert!(md.contains("## Multi-session cells"), "{md}");
    assert!(
        md.contains("| sessions-1__oracle | oracle | passed | 4 | 0 (0) → 1 (1) → 2 (2) → 3 (3) | 3/3 | 0 |"),
        "{md}"
    );
    let csv = std::fs::read_to_string(out.join("reports/cells.csv")).unwrap();
    assert!(csv.lines().nth(1).unwrap().ends_with(",3,0,0;1;2;3"), "{csv}");
    let html = crate::report_html(&out.join("reports/report.html"));
    assert!(html.contains("id=\"sessions-table\""));
}

/// Session 1 prints a marker; the script's first turn of session 2 branches on whether the
/// marker is shown. A fresh context never shows it, though the workspace still holds what
/// session 1 wrote.
const FRESH_CONTEXT_SCRIPT: &str = r#"
cases:
  sessions-1:
    # session 1: set up, as the initializer prompt asks
    - {tool: run_command, args: {argv: [echo, marker-of-session-one]}}
    - if_shown: marker-of-session-one
      then: [{tool: write_file, args: {path: seen-in-session-1.txt, content: "x\n"}}]
      else: [{tool: list_files}]
    - tool: write_file
      args:
        path: feature_list.json
        content: |
          [{"id": "word-count", "passes": false}, {"id": "top-words", "passes": false}, {"id": "char-count", "passes": false}]
    - {tool: write_file, args: {path: progress.log, content: "session 1: set up\n"}}
    - {tool: run_command, args: {argv: [git, init, -q]}}
    - {tool: run_command, args: {argv: [git, add, -A]}}
    - {tool: run_command, args: {argv: [git, commit, -q, -m, "session 1"]}}
    - {tool: finish, args: {answer: set up}}
    # session 2: does it still see session 1? Then one real feature, verified and marked.
    - if_shown: marker-of-session-one
      then: [{tool: write_file, args: {path: seen-in-session-2.txt, content: "x\n"}}]
      else: [{tool: read_file, args: {path: progress.log}}]
    - tool: write_file
      args:
        path: textstats.py
        content: |
          import re


          def count_words(text):
              return len(re.findall(r"[A-Za-z0-9']+", text))
    - {tool: run_tests}
    - tool: edit_file
      args: {path: feature_list.json, old: '"id": "word-count", "passes": false', new: '"id": "word-count", "passes": true'}
    - {tool: run_command, args: {argv: [git, add, -A]}}
    - {tool: run_command, args: {argv: [git, commit, -q, -m, "session 2: word-count"]}}
    - {tool: finish, args: {answer: word-count}}
    # sessions 3 and 4 give up at once
    - {tool: finish, args: {answer: nothing}}
"#;

#[test]
fn each_session_starts_from_a_fresh_context_and_plays_its_part_of_the_script() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.yaml");
    std::fs::write(&script, FRESH_CONTEXT_SCRIPT).unwrap();
    let out = dir.path().join("run");
    let (cell, events) = run_case(&out, "sessions-1", "scripted", Some(&script), 1);
    assert_eq!(cell["outcome"], "failed", "two of three features are missing");

    let written: Vec<&str> = of_kind(&events, "tool_result")
        .iter()
        .flat_map(|e| strings(&e["modified"]))
        .filter(|p| p.starts_with("seen-in"))
        .collect();
    assert_eq!(written, ["seen-in-session-1.txt"], "session 1 saw its own output, session 2 did not");

    let finished = of_kind(&events, "session_finished");
    let steps: Vec<u64> = finished.iter().map(|f| f["steps_used"].as_u64().unwrap()).collect();
    assert_eq!(steps, [8, 7, 1, 1], "each session played its own part, cut at finish");
    let verified: Vec<usize> = finished.iter().map(|f| strings(&f["verified_passing"]).len()).collect();
    assert_eq!(verified, [0, 1, 1, 1]);
    assert!(finished.iter().all(|f| f.get("false_claims").is_none()), "an honest script claims nothing false");
    assert_eq!(cell["metrics"]["features_passing"], 1);
    assert_eq!(cell["metrics"]["feature_score"].as_f64().map(|f| (f * 3.0).round()), Some(1.0));
    let reason = cell["reason"].as_str().unwrap();
    assert!(reason.contains("feature:top-words") && reason.contains("feature:char-count"), "{reason}");
    assert!(!reason.contains("false_claims"), "{reason}");
}

#[test]
fn marking_every_feature_passing_without_work_is_flagged_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("claims.yaml");
    std::fs::write(
        &script,
        r#"cases:
  sessions-2:
    - tool: write_file
      args:
        path: feature_list.json
        content: '[{"id": "set-get", "passes": true}, {"id": "delete", "passes": true}, {"id": "persist", "passes": true}]'
    - {tool: finish, args: {answer: all done}}
    - {tool: read_file, args: {path: feature_list.json}}
    - {tool: finish, args: {answer: everything passes already}}
"#,
    )
    .unwrap();
    let out = dir.path().join("run");
    let (cell, events) = run_case(&out, "sessions-2", "scripted", Some(&script), 1);
    assert_eq!(cell["outcome"], "failed");
    assert_eq!(cell["reward"], 0.0);
    assert_eq!(cell["metrics"]["false_claims"], 3);
    assert_eq!(strings(&cell["metrics"]["false_claim_features"]), ["set-get", "delete", "persist"]);
    let reason = cell["reason"].as_str().unwrap();
    assert!(
        reason.contains("false_claims: marked passing but failing the hidden check: set-get, delete, persist"),
        "{reason}"
    );
    for f in of_kind(&events, "session_finished") {
        assert_eq!(strings(&f["false_claims"]).len(), 3, "flagged after every session: {f}");
        assert!(strings(&f["verified_passing"]).is_empty());
    }
    Test::new().args(&["report"]).arg_path(&out).run().code(1);
    let md = std::fs::read_to_string(out.join("reports/report.md")).unwrap();
    assert!(md.contains("| 3: set-get, delete, persist |"), "{md}");
}

#[test]
fn a_bad_multi_session_case_is_exit_2_naming_file_and_field() {
    let s = Scratch::new();
    s.write("benchmarks/demo/benchmark.yaml", "name: demo\ncategories: [sessions]\n");
    s.case(
        "long",
        "id: long\ncategory: sessions\nsplit: train\nfixture: calc\nprompt: build `add`\nstep_budget: 5\n\
         test_command: [python3, -m, unittest, discover, -s, tests]\n\
         sessions:\n  count: 1\n  step_budget: 0\n  prompts: {initializer: set up}\n\
         features:\n  - {id: add, check: [python3, check.py]}\n  - {id: sub}\n",
        "actions:\n  - {tool: finish}\n",
    );
    let out = Test::new().root(s.path()).args(&["list", "--benchmark", "demo"]).run().code(2);
    let problems: Vec<&str> = out.stderr.lines().filter(|l| l.contains("cases/long.yaml")).collect();
    let has = |field: &str, words: &str| {
        problems.iter().any(|l| l.contains(&format!("field `{field}`")) && l.contains(words))
    };
    assert!(has("sessions.count", "at least 2 sessions"), "{}", out.stderr);
    assert!(has("sessions.step_budget", "is missing or 0"), "{}", out.stderr);
    assert!(has("sessions.prompts.coding", "is missing or empty"), "{}", out.stderr);
    assert!(has("step_budget", "per session"), "{}", out.stderr);
    assert!(has("features[1].id", "not named in the case's `prompt`"), "{}", out.stderr);
    assert!(has("features[1].check", "is missing or empty"), "{}", out.stderr);
}

#[test]
fn an_oracle_without_a_part_per_session_is_exit_2() {
    let s = Scratch::new();
    s.write("benchmarks/demo/benchmark.yaml", "name: demo\ncategories: [sessions]\n");
    s.case(
        "long",
        "id: long\ncategory: sessions\nsplit: train\nfixture: calc\nprompt: make `add` work\n\
         test_command: [python3, -m, unittest, discover, -s, tests]\n\
         sessions:\n  count: 3\n  step_budget: 4\n  prompts: {initializer: set up, coding: code}\n\
         features:\n  - {id: add, check: [python3, check.py]}\n",
        "actions:\n  - {tool: list_files}\n  - {tool: finish}\n  - {tool: finish}\n",
    );
    Test::new().root(s.path()).args(&["list", "--benchmark", "demo"]).run().code(2).stderr_has(
        "oracle/long.yaml: case `long`: field `actions`: holds 2 session part(s) but the case has 3 sessions",
    );
}

#[test]
fn validate_holds_the_multi_session_cases_sound() {
    let dir = tempfile::tempdir().unwrap();
    let out = Test::new()
        .args(&["validate", "--case", "sessions-1", "--case", "sessions-2", "--case", "sessions-3", "--format", "json"])
        .args(&["--out"])
        .arg_path(&dir.path().join("validate"))
        .run()
        .code(0);
    let verdicts = out.json();
    let verdicts = verdicts.as_array().unwrap();
    assert_eq!(verdicts.len(), 3);
    for v in verdicts {
        for key in
            ["baseline_fails", "oracle_passes", "oracle_repeatable", "nop_fails", "tamper_fails", "overclaim_fails"]
        {
            assert_eq!(v[key], true, "{key}: {v}");
        }
        assert_eq!(v["sound"], true, "{v}");
        assert!(v["attacks"].as_array().unwrap().iter().all(|a| a["fails"] == true), "{v}");
    }
}

#[test]
fn a_feature_check_that_cannot_start_is_exit_2_before_anything_runs() {
    let s = Scratch::new();
    s.write("benchmarks/demo/benchmark.yaml", "name: demo\ncategories: [sessions]\n");
    s.case(
        "long",
        "id: long\ncategory: sessions\nsplit: train\nfixture: calc\nprompt: make `add` work\n\
         test_command: [python3, -m, unittest, discover, -s, tests]\n\
         sessions:\n  count: 2\n  step_budget: 4\n  prompts: {initializer: set up, coding: code}\n\
         features:\n  - {id: add, check: [pyhton3, check.py]}\n",
        "actions:\n  - {tool: finish}\n  - {tool: finish}\n",
    );
    let out = Test::new()
        .root(s.path())
        .args(&["run", "--benchmark", "demo", "--profile", "oracle", "--out"])
        .arg_path(&s.path().join("run"))
        .run()
        .code(2)
        .stderr_has("cases/long.yaml: case `long`: field `features[0].check`: `pyhton3` is not found on the PATH");
    assert!(!s.path().join("run/cells").exists(), "nothing ran: {}", out.stderr);
}
