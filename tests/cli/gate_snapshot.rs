//! The gate measures what was committed (issue 15, ways 1, 4 and 5): every cell runs from a
//! snapshot taken once at the gate's start, HEAD's benchmark and fixtures plus the candidate's
//! allowlisted files, and the file guard compares content rather than trusting git's index.
//!
//! Each test plays the optimizing agent with ordinary git commands in a real repository. Where
//! the gate refuses, the test shows that nothing was recorded; where the rigged files are ones
//! git never sees (ignored files), the test first shows the rig works when a fixture is used
//! as the working tree has it, then that the gate's score equals the clean run's.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::BIN;
use crate::gate::Project;

/// A unittest run of the fixture's `test_calc.py`; `import unittest` resolves in the
/// workspace first, which is what an ignored `unittest/` package exploits.
const PY_TEST: &str =
    "test_command: [python3, -c, 'import unittest, test_calc; unittest.main(module=test_calc)']\ntimeout_s: 30\n";

/// A stand-in for `unittest` that reports success without running anything.
const RIGGED_UNITTEST: &str = "def main(*a, **k):\n    raise SystemExit(0)\n\n\nclass TestCase:\n    pass\n";

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git").current_dir(dir).args(args).output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// `git status --porcelain`: what a reviewer of the loop would look at.
fn git_status(dir: &Path) -> String {
    let out = Command::new("git").current_dir(dir).args(["status", "--porcelain"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The state files whose bytes must not change when the gate refuses.
fn state(p: &Project) -> Vec<Option<Vec<u8>>> {
    ["workspace/results.tsv", "workspace/suite.json", "workspace/pending_record.json"]
        .iter()
        .map(|f| std::fs::read(p.path().join(f)).ok())
        .collect()
}

fn step(report: &Value, n: usize) -> &Value {
    &report["steps"][n]
}

/// A project whose test cases run real unittest tests; the agent fixes te-1 of te-1 and te-2,
/// the clean score is 0.5, recorded as the baseline. `*.pyc` is ignored, as in most projects.
fn python_project() -> Project {
    let p = Project::new(&["tr-1"], &["te-1", "te-2"], "");
    p.write(
        "fixtures/calc/test_calc.py",
        "import unittest\nimport calc\n\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(calc.add(2, 3), 5)\n",
    );
    for id in ["te-1", "te-2"] {
        p.case(id, "test", PY_TEST);
    }
    p.write(".gitignore", "/workspace/\n*.log\n*.pyc\n__pycache__/\n");
    p.script(&["te-1"], "");
    p.commit("python tests; the agent fixes te-1");
    let r = p.gate(&[]).code(0).json();
    assert_eq!(step(&r, 2)["detail"]["val_score"], 0.5, "the clean run");
    p.hcbench(&["record"]).code(0);
    p
}

/// Runs the test command of the python cases in the working tree's fixture, as a cell reading
/// it from there would: true when it passes.
fn fixture_tests_pass(p: &Project) -> bool {
    let code = "import unittest, test_calc; unittest.main(module=test_calc)";
    let status = Command::new("python3")
        .args(["-c", code])
        .current_dir(p.path().join("fixtures/calc"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stderr(Stdio::null())
        .status()
        .unwrap();
    status.success()
}

/// After a rigged gate: the honest score, and `record` has nothing new to write (the clean
/// run's commit is recorded already).
fn assert_scored_as_the_clean_run(p: &Project, r: &Value) {
    assert_eq!(step(r, 2)["detail"]["val_score"], 0.5, "the rig reached no cell: {r}");
    let results = p.read("workspace/results.tsv");
    p.hcbench(&["record"]).code(1);
    assert_eq!(p.read("workspace/results.tsv"), results, "nothing new recorded");
}

/// Way 1: `git update-index --skip-worktree` hides an edit of a tracked benchmark file from
/// `git status`. Step 0 compares content, names the file and the flag, and the advice works.
#[test]
fn a_skip_worktree_edit_of_a_benchmark_file_is_refused() {
    let p = Project::new(&["tr-1"], &["te-1", "te-2"], "");
    p.script(&["te-1"], "");
    p.commit("the agent fixes te-1");
    p.gate(&[]).code(0);
    p.hcbench(&["record"]).code(0);
    p.script(&["te-1", "tr-1"], ""); // an allowlisted edit, so there is something to gate

    let case = "benchmarks/demo/cases/te-2.yaml";
    git(p.path(), &["update-index", "--skip-worktree", case]);
    let rigged = p.read(case).replace("[grep, -q, 'a + b', calc.py]", "[\"true\"]");
    p.write(case, &rigged);
    assert!(!git_status(p.path()).contains("te-2"), "git status does not show it:\n{}", git_status(p.path()));
    let before = state(&p);

    let r = p.gate(&[]).code(1).json();
    let v = &step(&r, 0)["detail"]["violations"];
    assert_eq!(v.as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v[0]["path"], case);
    assert_eq!(v[0]["kind"], "tracked");
    assert_eq!(v[0]["hidden_by"], "skip_worktree");
    for s in 1..4 {
        assert_eq!(step(&r, s)["status"], "not_run");
    }
    assert_eq!(state(&p), before, "nothing recorded");
    assert!(!p.path().join("workspace/gate").exists(), "no case ran");

    let out = p.hcbench(&["gate"]).code(1);
    let hint = format!("git update-index --no-skip-worktree -- {case} && git checkout HEAD -- {case}");
    assert!(
        out.stdout.contains(&format!(
            "{case} (modified, hidden from `git status` by `git update-index --skip-worktree`): revert with `{hint}`"
        )),
        "{}",
        out.stdout
    );
    assert_eq!(state(&p), before, "nothing recorded");

    // The advice works when followed.
    git(p.path(), &["update-index", "--no-skip-worktree", "--", case]);
    git(p.path(), &["checkout", "HEAD", "--", case]);
    let r = p.gate(&[]).code(0).json();
    assert_eq!(step(&r, 2)["detail"]["val_score"], 0.5);
}

/// Way 1 with `--assume-unchanged`, on a fixture: the fixed code is planted where every cell
/// copies its workspace from.
#[test]
fn an_assume_unchanged_edit_of_a_fixture_is_refused() {
    let p = Project::new(&["tr-1"], &["te-1", "te-2"], "");
    p.script(&["te-1"], "");
    p.commit("the agent fixes te-1");
    p.gate(&[]).code(0);
    p.hcbench(&["record"]).code(0);
    p.script(&["te-1", "tr-1"], "");

    let fixture = "fixtures/calc/calc.py";
    git(p.path(), &["update-index", "--assume-unchanged", fixture]);
    p.write(fixture, "def add(a, b):\n    return a + b\n");
    assert!(!git_status(p.path()).contains("calc.py"), "git status does not show it");
    let before = state(&p);

    let r = p.gate(&[]).code(1).json();
    let v = &step(&r, 0)["detail"]["violations"];
    assert_eq!(v[0]["path"], fixture, "{v}");
    assert_eq!(v[0]["hidden_by"], "assume_unchanged");
    assert!(v[0]["detail"].as_str().unwrap().contains("--assume-unchanged"), "{v}");
    for s in 1..4 {
        assert_eq!(step(&r, s)["status"], "not_run", "no case ran");
    }
    assert!(
        strings(&r["messages"])[0].contains("Step 0 (file guard): 1 file(s) changed outside the allowlist"),
        "{:?}",
        r["messages"]
    );
    assert_eq!(state(&p), before, "nothing recorded");
    assert!(!p.path().join("workspace/gate").exists(), "no case ran");
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect()
}

/// Way 4: a sourceless `.pyc` dropped into a fixture (ignored by `*.pyc`, so `git status` is
/// clean and the file guard has nothing to see) shadows `unittest` and passes every test.
/// Cells never see it: the fixture comes from HEAD's tree.
#[test]
fn an_ignored_pyc_in_a_fixture_does_not_reach_the_cells() {
    let p = python_project();
    let rig_source = p.path().join("workspace/rig.py");
    std::fs::write(&rig_source, RIGGED_UNITTEST).unwrap();
    std::fs::create_dir_all(p.path().join("fixtures/calc/unittest")).unwrap();
    let compile = format!(
        "import py_compile; py_compile.compile({:?}, cfile={:?}, doraise=True)",
        rig_source.to_str().unwrap(),
        p.path().join("fixtures/calc/unittest/__init__.pyc").to_str().unwrap()
    );
    assert!(Command::new("python3").args(["-c", &compile]).status().unwrap().success());
    std::fs::remove_file(&rig_source).unwrap();
    assert_eq!(git_status(p.path()), "", "the rig is invisible to git status");
    assert!(fixture_tests_pass(&p), "the rig works on the working tree's fixture (the bug is still there)");

    let r = p.gate(&[]).code(0).json();
    assert_eq!(step(&r, 0)["status"], "passed", "an ignored file is no change to guard against");
    assert_scored_as_the_clean_run(&p, &r);
}

/// Way 4: a `.gitignore` that ignores itself and everything new in a fixture hides a planted
/// `unittest` package from `git status`. Cells never see it.
#[test]
fn a_self_ignoring_gitignore_in_a_fixture_does_not_reach_the_cells() {
    let p = python_project();
    p.write("fixtures/calc/.gitignore", "*\n");
    p.write("fixtures/calc/unittest/__init__.py", RIGGED_UNITTEST);
    assert_eq!(git_status(p.path()), "", "the rig is invisible to git status");
    assert!(fixture_tests_pass(&p), "the rig works on the working tree's fixture");

    let r = p.gate(&[]).code(0).json();
    assert_eq!(step(&r, 0)["status"], "passed");
    assert_scored_as_the_clean_run(&p, &r);
}

/// Way 5: files changed once the gate is past Step 0 (the fixture fixed for every case, the
/// candidate given a fix for te-2) and restored after it ends are never measured: the running
/// gate keeps the snapshot it took, and its pending record binds the candidate it ran, so the
/// rigged candidate, committed, cannot be recorded.
#[test]
fn files_changed_after_step_0_do_not_reach_a_running_gate() {
    let p = Project::new(&["tr-1"], &["te-1", "te-2"], "");
    // A regression-set case that takes a few seconds, so Step 2 starts well after Step 1's line.
    p.case("tr-slow", "train", "test_command: [python3, -c, 'import time; time.sleep(4)']\ntimeout_s: 60\n");
    p.script(&["te-1"], "");
    let original_script = p.read("agent/script.yaml");
    p.commit("the agent fixes te-1; a slow train case");
    let suite = serde_json::json!({"schema_version": 1, "tasks": ["tr-slow"], "threshold": 0.8, "last_results": {}});
    p.write("workspace/suite.json", &suite.to_string());

    let tmp = tempfile::tempdir().unwrap();
    let workspaces = super::process_dir("workspaces");
    let mut child = Command::new(BIN)
        .args(["gate", "--accept-state-change", "workspace/suite.json"])
        .current_dir(p.path())
        .env_remove("HCBENCH_ROOT")
        .env("TMPDIR", tmp.path())
        .env("HCBENCH_WORKSPACES", &workspaces)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    let mut line = String::new();
    while !seen.contains("[gate] Step 1: regression set") {
        line.clear();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "the gate ended before Step 1:\n{seen}");
        seen.push_str(&line);
    }
    assert!(seen.contains("ok: no change outside the allowlist"), "Step 0 passed:\n{seen}");
    // The agent, while the gate runs: every case's fixture fixed, and the candidate fixes te-2.
    let fixture = p.read("fixtures/calc/calc.py");
    p.write("fixtures/calc/calc.py", "def add(a, b):\n    return a + b\n");
    p.script(&["te-1", "te-2"], "");
    let rigged_script = p.read("agent/script.yaml");

    let out = child.wait_with_output().unwrap();
    std::io::Read::read_to_string(&mut stdout, &mut seen).unwrap();
    assert_eq!(out.status.code(), Some(0), "{seen}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(seen.contains("val_score 0.5  PASS"), "the gate measured what it started with:\n{seen}");
    p.write("fixtures/calc/calc.py", &fixture); // restored after the gate, as the issue describes

    let pending: Value = serde_json::from_str(&p.read("workspace/pending_record.json")).unwrap();
    assert_eq!(pending["val_score"], 0.5);
    let blob = |text: &str| git2::Oid::hash_object(git2::ObjectType::Blob, text.as_bytes()).unwrap().to_string();
    assert_eq!(pending["candidate"]["agent/script.yaml"], blob(&original_script), "it binds the candidate it ran");
    assert_ne!(blob(&original_script), blob(&rigged_script));

    // Committed, the rigged candidate is not what was gated: nothing is recorded.
    p.commit("the candidate as it was after Step 0");
    let out = p.hcbench(&["record"]).code(1);
    assert!(out.stdout.contains("agent/script.yaml"), "{}", out.stdout);
    assert!(!p.path().join("workspace/results.tsv").exists(), "nothing recorded");
}
