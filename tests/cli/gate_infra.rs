//! Infrastructure is not a verdict (issue 15, way 9): a gate whose cells could not run says so
//! with its own exit code instead of telling the loop to revert a candidate nobody measured.
//!
//! Each test builds a throwaway git project with `gate.rs`'s `Project`: a small benchmark whose
//! cases pass when the agent edits `calc.py` (the test command is a `grep`), and a scripted
//! candidate in `agent/script.yaml`. A case whose `test_command` names a program that does not
//! exist stands for a broken machine: its cells end as harness errors whatever the agent does.
//! The benchmark change is committed, so the file guard (Step 0) has nothing to object to.

use serde_json::Value;

use super::gate::{FIX, Project};

/// The exit code of "the candidate could not be measured" (`exit::COVERAGE_BELOW_THRESHOLD`).
const UNMEASURED: i32 = 4;

const BROKEN: &str = "[hcbench-no-such-test-program]";

/// A committed project (`gate.rs`'s) with `train` and `test` cases, all with a working test
/// command, an agent that fixes `passing`, and a config (`extra` is appended to it).
fn project(train: &[&str], test: &[&str], passing: &[&str], extra: &str) -> Project {
    let p = Project::new(train, test, extra);
    p.script(passing, "");
    p.commit("the candidate");
    p
}

/// Gives case `id` the test command `argv` (a YAML list).
fn set_test(p: &Project, id: &str, split: &str, argv: &str) {
    p.case(id, split, &format!("test_command: {argv}\ntimeout_s: 30\n"));
}

/// The gate's state files a verdict may change, by content.
fn state(p: &Project) -> Vec<(&'static str, Option<Vec<u8>>)> {
    ["workspace/results.tsv", "workspace/suite.json", "workspace/pending_record.json", "workspace/train_results.json"]
        .into_iter()
        .map(|f| (f, std::fs::read(p.path().join(f)).ok()))
        .collect()
}

/// A first passing gate and its record: results.tsv and suite.json exist from here on.
fn baseline(p: &Project, gate_args: &[&str]) {
    p.gate(gate_args).code(0);
    p.hcbench(&["record"]).code(0);
    assert!(!p.read("workspace/results.tsv").is_empty() && !p.read("workspace/suite.json").is_empty());
}

fn messages(report: &Value) -> Vec<String> {
    report["messages"].as_array().unwrap().iter().map(|m| m.as_str().unwrap().to_string()).collect()
}

#[test]
fn a_test_split_that_cannot_run_is_unmeasured_not_reverted() {
    let p = project(&["tr-1"], &["te-1", "te-2", "te-3"], &["te-1", "te-2"], "");
    baseline(&p, &[]);
    // The machine breaks: the test program of every test case is gone.
    for id in ["te-1", "te-2", "te-3"] {
        set_test(&p, id, "test", BROKEN);
    }
    p.commit("the test program is missing");
    let before = state(&p);

    // That commit touches the benchmark, outside the allowlist: the human who made it says so.
    let out = p.gate(&["--accept-history"]).code(UNMEASURED);
    let r = out.json();
    assert_eq!(r["verdict"], "unmeasured");
    assert_eq!(r["exit_code"], UNMEASURED);
    assert_eq!(r["failed_steps"], serde_json::json!([]), "no step failed: nothing was judged");
    assert_eq!(r["val_score"], Value::Null, "no score leaves an unmeasured gate");
    assert_eq!(r["pending_record"], Value::Null);
    let step2 = &r["steps"][2];
    assert_eq!(step2["status"], "unmeasured");
    let arm = &step2["detail"]["arms"][0];
    assert_eq!((arm["planned"].as_u64(), arm["harness_error"].as_u64()), (Some(3), Some(3)), "{step2}");
    assert_eq!(
        (arm["provider_error"].as_u64(), arm["timeout"].as_u64(), arm["missing"].as_u64()),
        (Some(0), Some(0), Some(0))
    );
    assert_eq!(arm["examples"], serde_json::json!([]), "the test split is private: counts only");
    assert_eq!(step2["detail"]["max_unmeasured"], 0.1);
    assert_eq!(r["steps"][3]["status"], "not_run", "the gate stopped at Step 2");
    let msgs = messages(&r);
    assert!(
        msgs.iter().any(|m| m.contains(
            "UNMEASURED: Step 2 (full benchmark): the candidate could not be measured: 3 of 3 planned cell(s) unmeasured: harness error 3, provider error 0, timeout 0, missing 0, more than max_unmeasured 0.1"
        )),
        "{msgs:?}"
    );
    assert!(msgs.iter().any(|m| m.contains("neither commit nor revert")), "{msgs:?}");
    assert!(!msgs.iter().any(|m| m.contains("FAILED") || m.contains("revert the candidate")), "{msgs:?}");
    for id in ["te-1", "te-2", "te-3"] {
        assert!(
            !out.stdout.contains(id) && !out.stderr.contains(id),
            "test case {id} named:\n{}{}",
            out.stdout,
            out.stderr
        );
    }
    assert_eq!(state(&p), before, "nothing was recorded or written");

    // The text format tells the same story.
    let out = p.hcbench(&["gate"]).code(UNMEASURED);
    assert!(out.stdout.contains("[gate] UNMEASURED: Step 2 (full benchmark)"), "{}", out.stdout);
    assert!(!out.stdout.contains("te-"), "{}", out.stdout);
    assert_eq!(state(&p), before);
}

#[test]
fn a_regression_set_that_cannot_run_is_unmeasured_and_names_train_cells() {
    let p = project(&["tr-1", "tr-2"], &["te-1"], &["tr-1", "tr-2", "te-1"], "");
    // The regression set as a human seeds it; the first gate accepts it and passes.
    p.write(
        "workspace/suite.json",
        &serde_json::json!({ "schema_version": 1, "tasks": ["tr-1", "tr-2"], "threshold": 0.5, "last_results": {} })
            .to_string(),
    );
    baseline(&p, &["--accept-state-change", "workspace/suite.json"]);
    set_test(&p, "tr-2", "train", BROKEN);
    p.commit("tr-2's test program is missing");
    let before = state(&p);

    // One of two regression cells is a harness error: 0.5 > 0.1. Before this, Step 1 passed at
    // rate 0.5 >= 0.5 and the gate would have gone on; a broken machine is not a measurement.
    let r = p.gate(&["--accept-history"]).code(UNMEASURED).json();
    assert_eq!(r["verdict"], "unmeasured");
    let step1 = &r["steps"][1];
    assert_eq!(step1["status"], "unmeasured");
    let arm = &step1["detail"]["arms"][0];
    assert_eq!(
        (arm["planned"].as_u64(), arm["harness_error"].as_u64(), arm["unmeasured"].as_u64()),
        (Some(2), Some(1), Some(1))
    );
    // Train cells may be named: the example gives the case and why it did not run.
    assert_eq!(arm["examples"][0]["case"], "tr-2", "{arm}");
    assert_eq!(arm["examples"][0]["class"], "harness_error");
    assert!(!arm["examples"][0]["reason"].as_str().unwrap().is_empty(), "{arm}");
    assert_eq!(r["steps"][2]["status"], "not_run", "no test cell is spent on an unmeasurable candidate");
    let msgs = messages(&r);
    assert!(
        msgs.iter().any(|m| m.contains("UNMEASURED: Step 1 (regression set)") && m.contains("harness error 1")),
        "{msgs:?}"
    );
    assert_eq!(state(&p), before, "nothing was recorded or written");

    let out = p.hcbench(&["gate"]).code(UNMEASURED);
    assert!(out.stdout.contains("e.g. tr-2 (harness error): "), "{}", out.stdout);
}

#[test]
fn exactly_max_unmeasured_still_gets_a_verdict() {
    // Two test cases, one broken: exactly half the cells are unmeasured. At max_unmeasured 0.5
    // that is tolerated (inclusive) and the gate judges as before: the error counts 0.
    let p = project(&["tr-1"], &["te-1", "te-2"], &["te-1"], "max_unmeasured: 0.5\n");
    set_test(&p, "te-2", "test", BROKEN);
    p.commit("te-2's test program is missing");
    let r = p.gate(&[]).code(0).json();
    assert_eq!(r["verdict"], "passed");
    assert_eq!(r["steps"][2]["detail"]["val_score"], 0.5);
    assert_eq!(r["steps"][2]["detail"]["no_verdict"], 1);
    assert_eq!(r["config"]["max_unmeasured"], 0.5);

    // The same project under the default 0.1 is unmeasured.
    let q = project(&["tr-1"], &["te-1", "te-2"], &["te-1"], "");
    set_test(&q, "te-2", "test", BROKEN);
    q.commit("te-2's test program is missing");
    let r = q.gate(&[]).code(UNMEASURED).json();
    assert_eq!(r["steps"][2]["detail"]["arms"][0]["harness_error"], 1);
    assert!(!q.path().join("workspace/pending_record.json").exists());
}

#[test]
fn a_bad_max_unmeasured_is_a_usage_error_naming_the_file_and_field() {
    for value in ["1.5", "-0.1", "'many'"] {
        let p = project(&["tr-1"], &["te-1"], &[], &format!("max_unmeasured: {value}\n"));
        let out = p.gate(&[]).code(2);
        assert!(out.stderr.contains("experiment_config.yaml"), "{value}: {}", out.stderr);
        assert!(out.stderr.contains("max_unmeasured"), "{value}: {}", out.stderr);
        assert!(!out.stdout.contains("[gate] Step") && !out.stderr.contains("[gate] Step"), "{value}: nothing ran");
        assert!(!p.path().join("workspace/pending_record.json").exists(), "{value}: nothing written");
    }
    let p = project(&["tr-1"], &["te-1"], &[], "max_unmeasured: 2\n");
    p.gate(&[]).code(2).stderr_has("field `max_unmeasured`: 2 is not between 0 and 1");
}

#[test]
fn jobs_zero_is_a_usage_error_on_the_command_line_as_in_the_config() {
    let p = project(&["tr-1"], &["te-1"], &[], "");
    let out = p.gate(&["--jobs", "0"]).code(2).stderr_has("--jobs 0 would run nothing");
    assert!(!out.stdout.contains("[gate] Step") && !out.stderr.contains("[gate] Step"), "nothing ran");
    assert!(!p.path().join("workspace/pending_record.json").exists(), "nothing written");
    let q = project(&["tr-1"], &["te-1"], &[], "");
    q.write("experiment_config.yaml", "benchmark: demo\nprofile: scripted:agent/script.yaml\njobs: 0\n");
    q.gate(&[]).code(2).stderr_has("field `jobs`: 0 cells at once would run nothing");
    // run and matrix refuse it the same way.
    p.hcbench(&["run", "--benchmark", "demo", "--jobs", "0"]).code(2).stderr_has("--jobs 0 would run nothing");
    p.hcbench(&["matrix", "--benchmark", "demo", "--jobs", "0"]).code(2).stderr_has("--jobs 0 would run nothing");
}

#[test]
fn paired_mode_counts_each_arm() {
    let p = project(&["tr-1"], &["te-1", "te-2"], &[], "epochs: 2\ngate: {mode: paired}\n");
    for id in ["te-1", "te-2"] {
        set_test(&p, id, "test", BROKEN);
    }
    p.commit("the test program is missing");
    // A candidate that differs from HEAD, so both arms run.
    p.write("agent/script.yaml", &format!("default:\n  - {{tool: finish}}\ncases:\n  te-1:\n{FIX}"));
    let before = state(&p);
    let r = p.gate(&[]).code(UNMEASURED).json();
    let arms = r["steps"][2]["detail"]["arms"].as_array().unwrap().clone();
    let names: Vec<&str> = arms.iter().map(|a| a["arm"].as_str().unwrap()).collect();
    assert_eq!(names, ["candidate", "HEAD"]);
    for a in &arms {
        assert_eq!((a["planned"].as_u64(), a["harness_error"].as_u64()), (Some(4), Some(4)), "{a}");
        assert_eq!(a["examples"], serde_json::json!([]));
    }
    let msgs = messages(&r);
    assert!(
        msgs.iter().any(|m| m.contains("Step 2 (full benchmark)") && m.contains("candidate arm: 4 of 4")),
        "{msgs:?}"
    );
    assert!(msgs.iter().any(|m| m.contains("HEAD arm: 4 of 4")), "{msgs:?}");
    assert_eq!(state(&p), before);
}
