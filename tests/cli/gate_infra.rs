//! Infrastructure is not a verdict (issue 15, way 9): a gate whose cells could not run says so
//! with its own exit code instead of telling the loop to revert a candidate nobody measured.
//!
//! Each test builds a throwaway git project the way `gate.rs` does: a small benchmark whose
//! cases pass when the agent edits `calc.py` (the test command is a `grep`), and a scripted
//! candidate in `agent/script.yaml`. A case whose `test_command` names a program that does not
//! exist stands for a broken machine: its cells end as harness errors whatever the agent does.
//! The benchmark change is committed, so the file guard (Step 0) has nothing to object to.

use std::path::Path;

use serde_json::Value;

use crate::{Output, Test};

/// The exit code of "the candidate could not be measured" (`exit::COVERAGE_BELOW_THRESHOLD`).
const UNMEASURED: i32 = 4;

const FIX: &str = "    - {tool: edit_file, args: {path: calc.py, old: 'a - b', new: 'a + b'}}\n    - {tool: finish}\n";
const GREP: &str = "[grep, -q, 'a + b', calc.py]";
const BROKEN: &str = "[hcbench-no-such-test-program]";

struct Project {
    dir: tempfile::TempDir,
    /// TMPDIR of every hcbench started by the test.
    tmp: tempfile::TempDir,
}

impl Project {
    /// A committed project with `train` and `test` cases (all with a working test command), an
    /// agent that fixes `passing`, and a config (`extra` is appended to it).
    fn new(train: &[&str], test: &[&str], passing: &[&str], extra: &str) -> Project {
        let p = Project { dir: tempfile::tempdir().unwrap(), tmp: tempfile::tempdir().unwrap() };
        p.write("benchmarks/demo/benchmark.yaml", "name: demo\ndescription: gate infrastructure tests\n");
        p.write("fixtures/calc/calc.py", "def add(a, b):\n    return a - b\n");
        for (ids, split) in [(train, "train"), (test, "test")] {
            for id in ids {
                p.case(id, split, GREP);
            }
        }
        p.write(".gitignore", "/workspace/\n");
        p.write(
            "experiment_config.yaml",
            &format!("benchmark: demo\nprofile: scripted:agent/script.yaml\njobs: 4\n{extra}"),
        );
        let mut script = "default:\n  - {tool: finish}\ncases:\n".to_string();
        for id in passing {
            script.push_str(&format!("  {id}:\n{FIX}"));
        }
        if passing.is_empty() {
            script.push_str("  {}\n");
        }
        p.write("agent/script.yaml", &script);
        drop(git2::Repository::init(p.path()).unwrap());
        p.commit("initial project");
        p
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn write(&self, rel: &str, text: &str) {
        let path = self.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn bytes(&self, rel: &str) -> Vec<u8> {
        std::fs::read(self.path().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    /// A case whose tests run `test_command` (a YAML list).
    fn case(&self, id: &str, split: &str, test_command: &str) {
        self.write(
            &format!("benchmarks/demo/cases/{id}.yaml"),
            &format!(
                "id: {id}\ncategory: bugfix\nsplit: {split}\nfixture: calc\nprompt: fix add\nstep_budget: 5\ntest_command: {test_command}\ntimeout_s: 30\n"
            ),
        );
        self.write(&format!("benchmarks/demo/oracle/{id}.yaml"), &format!("actions:\n{}", FIX.replace("    -", "  -")));
    }

    /// `git add -A && git commit`, through git2.
    fn commit(&self, message: &str) {
        let repo = git2::Repository::open(self.path()).unwrap();
        let mut index = repo.index().unwrap();
        index.add_all(["*"], git2::IndexAddOption::DEFAULT, None).unwrap();
        index.update_all(["*"], None).unwrap();
        index.write().unwrap();
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("loop", "loop@example.com").unwrap();
        let parent = repo.head().ok().and_then(|h| h.peel_to_commit().ok());
        let parents: Vec<&git2::Commit> = parent.iter().collect();
        repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &parents).unwrap();
    }

    fn hcbench(&self, args: &[&str]) -> Output {
        Test::new().root(self.path()).env("TMPDIR", &self.tmp.path().to_string_lossy()).args(args).run()
    }

    /// `hcbench gate --format json ARGS`.
    fn gate(&self, args: &[&str]) -> Output {
        let mut all = vec!["gate", "--format", "json"];
        all.extend_from_slice(args);
        self.hcbench(&all)
    }

    /// The gate's state files a verdict may change, by content.
    fn state(&self) -> Vec<(&'static str, Option<Vec<u8>>)> {
        [
            "workspace/results.tsv",
            "workspace/suite.json",
            "workspace/pending_record.json",
            "workspace/train_results.json",
        ]
        .into_iter()
        .map(|f| (f, std::fs::read(self.path().join(f)).ok()))
        .collect()
    }

    /// A first passing gate and its record: results.tsv and suite.json exist from here on.
    fn baseline(&self, gate_args: &[&str]) {
        self.gate(gate_args).code(0);
        self.hcbench(&["record"]).code(0);
        assert!(!self.bytes("workspace/results.tsv").is_empty() && !self.bytes("workspace/suite.json").is_empty());
    }
}

fn messages(report: &Value) -> Vec<String> {
    report["messages"].as_array().unwrap().iter().map(|m| m.as_str().unwrap().to_string()).collect()
}

#[test]
fn a_test_split_that_cannot_run_is_unmeasured_not_reverted() {
    let p = Project::new(&["tr-1"], &["te-1", "te-2", "te-3"], &["te-1", "te-2"], "");
    p.baseline(&[]);
    // The machine breaks: the test program of every test case is gone.
    for id in ["te-1", "te-2", "te-3"] {
        p.case(id, "test", BROKEN);
    }
    p.commit("the test program is missing");
    let before = p.state();

    let out = p.gate(&[]).code(UNMEASURED);
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
    assert_eq!(p.state(), before, "nothing was recorded or written");

    // The text format tells the same story.
    let out = p.hcbench(&["gate"]).code(UNMEASURED);
    assert!(out.stdout.contains("[gate] UNMEASURED: Step 2 (full benchmark)"), "{}", out.stdout);
    assert!(!out.stdout.contains("te-"), "{}", out.stdout);
    assert_eq!(p.state(), before);
}

#[test]
fn a_regression_set_that_cannot_run_is_unmeasured_and_names_train_cells() {
    let p = Project::new(&["tr-1", "tr-2"], &["te-1"], &["tr-1", "tr-2", "te-1"], "");
    // The regression set as a human seeds it; the first gate accepts it and passes.
    p.write(
        "workspace/suite.json",
        &serde_json::json!({ "schema_version": 1, "tasks": ["tr-1", "tr-2"], "threshold": 0.5, "last_results": {} })
            .to_string(),
    );
    p.baseline(&["--accept-state-change", "workspace/suite.json"]);
    p.case("tr-2", "train", BROKEN);
    p.commit("tr-2's test program is missing");
    let before = p.state();

    // One of two regression cells is a harness error: 0.5 > 0.1. Before this, Step 1 passed at
    // rate 0.5 >= 0.5 and the gate would have gone on; a broken machine is not a measurement.
    let r = p.gate(&[]).code(UNMEASURED).json();
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
    assert_eq!(p.state(), before, "nothing was recorded or written");

    let out = p.hcbench(&["gate"]).code(UNMEASURED);
    assert!(out.stdout.contains("e.g. tr-2 (harness error): "), "{}", out.stdout);
}

#[test]
fn exactly_max_unmeasured_still_gets_a_verdict() {
    // Two test cases, one broken: exactly half the cells are unmeasured. At max_unmeasured 0.5
    // that is tolerated (inclusive) and the gate judges as before: the error counts 0.
    let p = Project::new(&["tr-1"], &["te-1", "te-2"], &["te-1"], "max_unmeasured: 0.5\n");
    p.case("te-2", "test", BROKEN);
    p.commit("te-2's test program is missing");
    let r = p.gate(&[]).code(0).json();
    assert_eq!(r["verdict"], "passed");
    assert_eq!(r["steps"][2]["detail"]["val_score"], 0.5);
    assert_eq!(r["steps"][2]["detail"]["no_verdict"], 1);
    assert_eq!(r["config"]["max_unmeasured"], 0.5);

    // The same project under the default 0.1 is unmeasured.
    let q = Project::new(&["tr-1"], &["te-1", "te-2"], &["te-1"], "");
    q.case("te-2", "test", BROKEN);
    q.commit("te-2's test program is missing");
    let r = q.gate(&[]).code(UNMEASURED).json();
    assert_eq!(r["steps"][2]["detail"]["arms"][0]["harness_error"], 1);
    assert!(!q.path().join("workspace/pending_record.json").exists());
}

#[test]
fn a_bad_max_unmeasured_is_a_usage_error_naming_the_file_and_field() {
    for value in ["1.5", "-0.1", "'many'"] {
        let p = Project::new(&["tr-1"], &["te-1"], &[], &format!("max_unmeasured: {value}\n"));
        let out = p.gate(&[]).code(2);
        assert!(out.stderr.contains("experiment_config.yaml"), "{value}: {}", out.stderr);
        assert!(out.stderr.contains("max_unmeasured"), "{value}: {}", out.stderr);
        assert!(!p.path().join("workspace/suite.json").exists(), "{value}: nothing ran");
    }
    let p = Project::new(&["tr-1"], &["te-1"], &[], "max_unmeasured: 2\n");
    p.gate(&[]).code(2).stderr_has("field `max_unmeasured`: 2 is not between 0 and 1");
}

#[test]
fn jobs_zero_is_a_usage_error_on_the_command_line_as_in_the_config() {
    let p = Project::new(&["tr-1"], &["te-1"], &[], "");
    p.gate(&["--jobs", "0"]).code(2).stderr_has("--jobs 0 would run nothing");
    assert!(!p.path().join("workspace/suite.json").exists(), "nothing ran");
    let q = Project::new(&["tr-1"], &["te-1"], &[], "");
    q.write("experiment_config.yaml", "benchmark: demo\nprofile: scripted:agent/script.yaml\njobs: 0\n");
    q.gate(&[]).code(2).stderr_has("field `jobs`: 0 cells at once would run nothing");
    // run and matrix refuse it the same way.
    p.hcbench(&["run", "--benchmark", "demo", "--jobs", "0"]).code(2).stderr_has("--jobs 0 would run nothing");
    p.hcbench(&["matrix", "--benchmark", "demo", "--jobs", "0"]).code(2).stderr_has("--jobs 0 would run nothing");
}

#[test]
fn paired_mode_counts_each_arm() {
    let p = Project::new(&["tr-1"], &["te-1", "te-2"], &[], "epochs: 2\ngate: {mode: paired}\n");
    for id in ["te-1", "te-2"] {
        p.case(id, "test", BROKEN);
    }
    p.commit("the test program is missing");
    // A candidate that differs from HEAD, so both arms run.
    p.write("agent/script.yaml", &format!("default:\n  - {{tool: finish}}\ncases:\n  te-1:\n{FIX}"));
    let before = p.state();
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
    assert_eq!(p.state(), before);
}
