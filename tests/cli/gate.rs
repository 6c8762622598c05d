//! `hcbench gate` and `hcbench record` in real git repositories, driving the real binary.
//!
//! Each test builds a throwaway project: a small benchmark whose cases pass when the agent
//! edits `calc.py` (the test command is a `grep`, so a cell takes milliseconds), and a
//! scripted profile whose action file, `agent/script.yaml`, is the allowlisted candidate: which
//! cases it fixes is what an "improvement" changes. hcbench's TMPDIR is a directory of the test,
//! so the private directory of the test-split cells can be checked too.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::{Output, Test, tree_hashes};

pub(super) const FIX: &str =
    "    - {tool: edit_file, args: {path: calc.py, old: 'a - b', new: 'a + b'}}\n    - {tool: finish}\n";

/// A throwaway project under optimization, in git; shared with `gate_infra.rs`.
pub(super) struct Project {
    dir: tempfile::TempDir,
    /// TMPDIR of every hcbench started by the test.
    tmp: tempfile::TempDir,
}

impl Project {
    /// A committed project with `train` and `test` cases, an agent that fixes nothing, and a
    /// config (`extra` is appended to it).
    pub(super) fn new(train: &[&str], test: &[&str], extra: &str) -> Project {
        let p = Project::files(train, test, extra);
        let repo = git2::Repository::init(p.path()).unwrap();
        drop(repo);
        p.commit("initial project");
        p
    }

    /// The same files, without git.
    fn files(train: &[&str], test: &[&str], extra: &str) -> Project {
        let p = Project { dir: tempfile::tempdir().unwrap(), tmp: tempfile::tempdir().unwrap() };
        p.write("benchmarks/demo/benchmark.yaml", "name: demo\ndescription: gate tests\ncategories: [bugfix]\n");
        p.write("fixtures/calc/calc.py", "def add(a, b):\n    return a - b\n");
        for (ids, split) in [(train, "train"), (test, "test")] {
            for id in ids {
                p.case(id, split, "test_command: [grep, -q, 'a + b', calc.py]\ntimeout_s: 30\n");
            }
        }
        p.write(".gitignore", "/workspace/\n*.log\n");
        p.write("README.md", "a project under optimization\n");
        p.write(
            "experiment_config.yaml",
            &format!("benchmark: demo\nprofile: scripted:agent/script.yaml\njobs: 4\n{extra}"),
        );
        p.script(&[], "");
        p
    }

    pub(super) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The TMPDIR every hcbench of this project runs with.
    pub(super) fn tmp(&self) -> &Path {
        self.tmp.path()
    }

    pub(super) fn write(&self, rel: &str, text: &str) {
        let path = self.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    pub(super) fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    pub(super) fn case(&self, id: &str, split: &str, test: &str) {
        self.write(
            &format!("benchmarks/demo/cases/{id}.yaml"),
            &format!(
                "id: {id}\ncategory: bugfix\nsplit: {split}\nfixture: calc\nprompt: fix add\nstep_budget: 5\n{test}"
            ),
        );
        self.write(&format!("benchmarks/demo/oracle/{id}.yaml"), &format!("actions:\n{}", FIX.replace("    -", "  -")));
    }

    /// The candidate: an agent that fixes exactly `passing` (plus extra script keys).
    pub(super) fn script(&self, passing: &[&str], extra: &str) {
        let mut s = format!("default:\n  - {{tool: finish}}\n{extra}cases:\n");
        for id in passing {
            s.push_str(&format!("  {id}:\n{FIX}"));
        }
        if passing.is_empty() {
            s.push_str("  {}\n");
        }
        self.write("agent/script.yaml", &s);
    }

    /// `git add -A && git commit`, through git2.
    pub(super) fn commit(&self, message: &str) -> String {
        let repo = git2::Repository::open(self.path()).unwrap();
        let mut index = repo.index().unwrap();
        index.add_all(["*"], git2::IndexAddOption::DEFAULT, None).unwrap();
        index.update_all(["*"], None).unwrap();
        index.write().unwrap();
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("loop", "loop@example.com").unwrap();
        let parent = repo.head().ok().and_then(|h| h.peel_to_commit().ok());
        let parents: Vec<&git2::Commit> = parent.iter().collect();
        repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &parents).unwrap().to_string()
    }

    /// `git add PATH`.
    fn stage(&self, rel: &str) {
        let repo = git2::Repository::open(self.path()).unwrap();
        let mut index = repo.index().unwrap();
        index.add_path(Path::new(rel)).unwrap();
        index.write().unwrap();
    }

    /// Runs hcbench with this project's TMPDIR, and checks it left no process behind: once it
    /// has exited, anything that still names that folder (a cell's sandbox, killed half-started
    /// when a gate step stopped early) has outlived it.
    pub(super) fn hcbench(&self, args: &[&str]) -> Output {
        let out = Test::new().root(self.path()).env("TMPDIR", &self.tmp.path().to_string_lossy()).args(args).run();
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut left = processes_naming(self.tmp());
        while !left.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
            left = processes_naming(self.tmp());
        }
        assert!(left.is_empty(), "hcbench {args:?} left processes behind: {left:#?}");
        out
    }

    /// `hcbench gate --format json ARGS`.
    pub(super) fn gate(&self, args: &[&str]) -> Output {
        let mut all = vec!["gate", "--format", "json"];
        all.extend_from_slice(args);
        self.hcbench(&all)
    }

    fn record(&self, args: &[&str]) -> Output {
        let mut all = vec!["record"];
        all.extend_from_slice(args);
        self.hcbench(&all)
    }

    fn train_run(&self) {
        self.hcbench(&[
            "run",
            "--benchmark",
            "demo",
            "--split",
            "train",
            "--profile",
            "scripted:agent/script.yaml",
            "--format",
            "json",
        ]);
        assert!(
            self.path().join("workspace/train_results.json").is_file(),
            "run --split train writes the train results"
        );
    }

    /// Writes suite.json by hand, as a human would, for the next gate to accept.
    fn hand_suite(&self, tasks: &[&str], threshold: f64) {
        let v = serde_json::json!({ "schema_version": 1, "tasks": tasks, "threshold": threshold, "last_results": {} });
        self.write("workspace/suite.json", &serde_json::to_string_pretty(&v).unwrap());
    }

    fn head(&self) -> String {
        let repo = git2::Repository::open(self.path()).unwrap();
        repo.head().unwrap().peel_to_commit().unwrap().id().to_string()
    }

    /// Files left in hcbench's TMPDIR.
    fn tmp_entries(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.tmp.path()).unwrap().map(|e| e.unwrap().path()).collect()
    }
}

/// Live processes (not zombies) whose command line names `path`.
fn processes_naming(path: &Path) -> Vec<String> {
    let needle = path.to_string_lossy().into_owned();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if !entry.file_name().to_str().is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit())) {
            continue;
        }
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // The state follows the command name in parentheses, which may hold spaces.
        let zombie = stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if !zombie && cmdline.contains(&needle) {
            found.push(format!("{}: {cmdline}", entry.file_name().to_string_lossy()));
        }
    }
    found
}

fn step(report: &Value, n: usize) -> &Value {
    &report["steps"][n]
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

trait Check {
    fn stdout_has(self, needle: &str) -> Self;
}

impl Check for Output {
    fn stdout_has(self, needle: &str) -> Self {
        assert!(
            self.stdout.contains(needle),
            "stdout lacks {needle:?}:\n{}\n--- stderr ---\n{}",
            self.stdout,
            self.stderr
        );
        self
    }
}

#[test]
fn fresh_start_passes_and_record_writes_the_baseline() {
    let p = Project::new(&["tr-1", "tr-2"], &["te-1", "te-2"], "");
    p.script(&["te-1"], "");
    p.commit("agent fixes te-1");

    // Text mode: auto-harness style lines.
    let out = p.hcbench(&["gate"]).code(0);
    for needle in [
        "[gate] Step 0: file guard",
        "ok: no change outside the allowlist (agent/, PROGRAM.md)",
        "[gate] Step 1: regression set is empty: skipped (counts as passed)",
        "[gate] Step 2: full benchmark (test split, 2 case(s) x 1 epoch(s)",
        "val_score 0.5  PASS (no best recorded yet",
        "[gate] Step 3: promotion",
        "no train results yet",
        "[gate] PASSED: all steps clear (val_score 0.5)",
    ] {
        assert!(out.stdout.contains(needle), "missing {needle:?}:\n{}", out.stdout);
    }
    assert!(
        !out.stdout.contains("te-1") && !out.stderr.contains("te-1"),
        "test case ids are never shown:\n{}{}",
        out.stdout,
        out.stderr
    );
    assert!(p.path().join("workspace/pending_record.json").is_file());
    assert!(!p.path().join("workspace/suite.json").exists(), "the regression set is written by record");

    let out = p.record(&[]).code(0).stdout_has("[record] iteration 0: val_score 0.5, evals 0/0");
    let suite: Value = serde_json::from_str(&p.read("workspace/suite.json")).unwrap();
    assert_eq!(suite["tasks"], serde_json::json!([]));
    assert_eq!(suite["threshold"], 0.8);
    let tsv = p.read("workspace/results.tsv");
    let lines: Vec<&str> = tsv.lines().collect();
    assert_eq!(
        lines[0],
        "iteration\tval_score\tcommit\tevals_passed\tevals_total\ttimestamp\tprofile\tprofile_digest\tagent_spec"
    );
    let row: Vec<&str> = lines[1].split('\t').collect();
    assert_eq!(&row[..5], ["0", "0.5", p.head().as_str(), "0", "0"], "{}", out.stdout);
    assert!(!p.path().join("workspace/pending_record.json").exists(), "a pending record is consumed");

    // Nothing left to record: refused, not a silent duplicate.
    p.record(&[]).code(1).stdout_has("refused: no passing gate run to record");
    assert_eq!(p.read("workspace/results.tsv").lines().count(), 2);
}

#[test]
fn a_tie_with_the_best_passes_and_a_regression_fails() {
    let p = Project::new(&["tr-1"], &["te-1", "te-2", "te-3"], "");
    p.script(&["te-1", "te-2"], "");
    p.commit("fix two");
    p.gate(&[]).code(0);
    p.record(&[]).code(0);

    // The same agent again: 2/3 equals the best exactly (2/3 was recorded without rounding).
    let r = p.gate(&[]).code(0).json();
    assert_eq!(step(&r, 2)["detail"]["best"], step(&r, 2)["detail"]["val_score"]);
    assert_eq!(r["verdict"], "passed");

    // A regression: one fewer test case fixed.
    p.script(&["te-1"], "");
    let out = p.gate(&[]).code(1);
    let r = out.json();
    assert_eq!(r["failed_steps"], serde_json::json!([2]));
    assert_eq!(step(&r, 2)["status"], "failed");
    assert_eq!(step(&r, 3)["status"], "skipped");
    let msgs = strings(&r["messages"]);
    assert!(
        msgs.iter().any(|m| m.contains("Step 2 (full benchmark): val_score 0.33 < best 0.67")),
        "the verdict names the step and prints digits that agree with the comparison: {msgs:?}"
    );
}

#[test]
fn best_is_the_maximum_row_not_the_last() {
    let p = Project::new(&["tr-1"], &["te-1", "te-2"], "");
    p.script(&["te-1"], "");
    p.commit("fix one");
    // A history written by hand (a human importing earlier results) must be accepted explicitly.
    p.write(
        "workspace/results.tsv",
        "iteration\tval_score\tcommit\tevals_passed\tevals_total\ttimestamp\n0\t0.25\ta\t0\t0\tt\n1\t1\tb\t0\t0\tt\n2\t0.5\tc\t0\t0\tt\n",
    );
    let r = p.gate(&[]).code(1).json();
    assert!(
        strings(&r["messages"]).iter().any(|m| m.contains("workspace/results.tsv exists but hcbench never wrote it"))
    );
    let r = p.gate(&["--accept-state-change", "workspace/results.tsv"]).code(1).json();
    assert_eq!(step(&r, 2)["detail"]["best"], 1.0, "the best is the maximum row, not the last (0.5)");
    assert_eq!(step(&r, 2)["detail"]["val_score"], 0.5);
    assert!(strings(&r["messages"]).iter().any(|m| m.contains("val_score 0.5 < best 1")));
    let state: Value = serde_json::from_str(&p.read("workspace/.gate-state.json")).unwrap();
    assert_eq!(state["accepted"][0]["file"], "workspace/results.tsv", "the acceptance is logged");
}

#[test]
fn step_1_failures_still_run_step_2_and_skip_step_3() {
    let p = Project::new(&["tr-1", "tr-2"], &["te-1", "te-2"], "");
    p.script(&["te-1", "te-2"], "");
    p.commit("fix the tests only");
    p.hand_suite(&["tr-1", "tr-2"], 0.8);
    let r = p.gate(&["--accept-state-change", "workspace/suite.json"]).code(1).json();
    assert_eq!(r["failed_steps"], serde_json::json!([1]));
    assert_eq!(step(&r, 1)["status"], "failed");
    assert_eq!(step(&r, 1)["detail"]["passed"], 0);
    assert_eq!(step(&r, 2)["status"], "passed", "Step 2 ran although Step 1 failed");
    assert_eq!(step(&r, 2)["detail"]["val_score"], 1.0);
    assert_eq!(step(&r, 3)["status"], "skipped");
    assert_eq!(step(&r, 3)["detail"]["reason"], "Step 1 failed");
    let msgs = strings(&r["messages"]);
    assert!(msgs.iter().any(|m| m.contains("Step 1 (regression set): 0/2 passed, rate 0 < threshold 0.8")), "{msgs:?}");
    let suite: Value = serde_json::from_str(&p.read("workspace/suite.json")).unwrap();
    assert_eq!(suite["last_results"], serde_json::json!({}), "last_results is only updated by a passing gate");
    assert!(!p.path().join("workspace/pending_record.json").exists());

    // Both fail: a best of 1 recorded by hand, and a candidate that fixes nothing.
    p.write(
        "workspace/results.tsv",
        "iteration\tval_score\tcommit\tevals_passed\tevals_total\ttimestamp\n0\t1\ta\t0\t0\tt\n",
    );
    p.script(&[], "");
    let r = p.gate(&["--accept-state-change", "results.tsv"]).code(1).json();
    assert_eq!(r["failed_steps"], serde_json::json!([1, 2]));
    let msgs = strings(&r["messages"]);
    assert!(
        msgs.iter().any(|m| m.contains("FAILED: Step 1")) && msgs.iter().any(|m| m.contains("FAILED: Step 2")),
        "{msgs:?}"
    );
    assert_eq!(step(&r, 3)["detail"]["reason"], "Steps 1 and 2 failed");
}

#[test]
fn four_of_five_meets_a_threshold_of_0_8() {
    let p = Project::new(&["tr-1", "tr-2", "tr-3", "tr-4", "tr-5"], &["te-1"], "");
    p.script(&["tr-1", "tr-2", "tr-3", "tr-4", "te-1"], "");
    p.commit("four of five");
    p.hand_suite(&["tr-1", "tr-2", "tr-3", "tr-4", "tr-5"], 0.8);
    let out = p.hcbench(&["gate", "--accept-state-change", "workspace/suite.json"]).code(0);
    assert!(out.stdout.contains("4/5 passed: rate 0.8 >= threshold 0.8  PASS"), "{}", out.stdout);
    p.record(&[]).code(0);
    let suite: Value = serde_json::from_str(&p.read("workspace/suite.json")).unwrap();
    assert_eq!(suite["last_results"]["tr-4"], 1.0);
    assert_eq!(suite["last_results"]["tr-5"], 0.0, "last_results records the passing gate's scores");
}

#[test]
fn errored_and_missing_suite_tasks_count_as_failures() {
    // One of the two runnable cells times out: tolerated at max_unmeasured 0.5 (under the
    // default 0.1 the gate stops unmeasured, exit 4: tests/cli/gate_infra.rs).
    let p = Project::files(&["tr-1"], &["te-1"], "max_unmeasured: 0.5\n");
    // A train case whose tests hang: it ends as `timeout`, an infrastructure class.
    p.case("tr-hang", "train", "test_command: [python3, -c, 'import time; time.sleep(60)']\ntimeout_s: 1\n");
    git2::Repository::init(p.path()).unwrap();
    p.script(&["tr-1", "te-1"], "");
    p.commit("initial");
    p.hand_suite(&["tr-1", "tr-hang", "ghost-9"], 0.5);
    let r = p.gate(&["--accept-state-change", "workspace/suite.json"]).code(1).json();
    let s1 = &step(&r, 1)["detail"];
    assert_eq!((s1["passed"].as_u64(), s1["tasks"].as_u64()), (Some(1), Some(3)), "{s1}");
    assert_eq!(strings(&s1["missing"]), ["ghost-9"]);
    assert_eq!(strings(&s1["failing"]), ["ghost-9", "tr-hang"]);
    assert_eq!(step(&r, 1)["status"], "failed", "1/3 < 0.5: errored and missing tasks stay in the denominator");
}

#[test]
fn promotion_adds_newly_passing_train_cases_in_natural_order() {
    let p = Project::new(&["tr-1", "tr-2", "tr-3", "tr-10"], &["te-1"], "");
    p.script(&["te-1"], "");
    p.commit("baseline");
    p.train_run(); // every train case fails
    let train: Value = serde_json::from_str(&p.read("workspace/train_results.json")).unwrap();
    assert_eq!(train["cases"]["tr-10"]["outcome"], "failed");
    assert_eq!(train["cases"]["tr-10"]["commit"], p.head(), "train results carry their provenance");
    assert!(train["cases"]["tr-10"]["agent_spec"].as_str().unwrap().len() == 64);

    p.script(&["te-1", "tr-2", "tr-10"], "");
    let r = p.gate(&[]).code(0).json();
    let s3 = &step(&r, 3)["detail"];
    assert_eq!(strings(&s3["candidates"]), ["tr-1", "tr-2", "tr-3", "tr-10"]);
    assert_eq!(strings(&s3["promoted"]), ["tr-2", "tr-10"], "several cases, naturally sorted");
    assert_eq!(strings(&s3["still_failing"]), ["tr-1", "tr-3"]);

    // Next gate: the suite runs the promoted cases (applied when the candidate is recorded);
    // the suite only grows.
    p.commit("fix tr-2 and tr-10");
    p.record(&[]).code(0).stdout_has("evals 0/0");
    let suite: Value = serde_json::from_str(&p.read("workspace/suite.json")).unwrap();
    assert_eq!(strings(&suite["tasks"]), ["tr-2", "tr-10"]);
    p.script(&["te-1", "tr-1", "tr-2", "tr-3", "tr-10"], "");
    p.train_run(); // now every train case passes
    let r = p.gate(&[]).code(0).json();
    assert_eq!(step(&r, 1)["detail"]["passed"], 2);
    assert_eq!(strings(&step(&r, 3)["detail"]["promoted"]), Vec::<String>::new(), "nothing to promote");
    let out = p.hcbench(&["gate"]).code(0);
    assert!(out.stdout.contains("nothing to promote"), "{}", out.stdout);
    assert_eq!(r["evals_passed"], 2);
}

#[test]
fn promotion_can_require_consecutive_passes() {
    let p = Project::new(&["tr-1"], &["te-1"], "promotion_passes: 2\n");
    p.train_run();
    p.script(&["te-1", "tr-1"], "");
    let r = p.gate(&[]).code(0).json();
    assert_eq!(step(&r, 3)["detail"]["pending"]["tr-1"], 1);
    // Streaks count recorded candidates: each gate's streak lands in suite.json with its record.
    p.commit("fix tr-1");
    p.record(&[]).code(0);
    assert!(p.read("workspace/suite.json").contains("\"promotion_streaks\""));
    p.script(&["te-1", "tr-1"], "# the next candidate\n");
    let r = p.gate(&[]).code(0).json();
    assert_eq!(strings(&step(&r, 3)["detail"]["promoted"]), ["tr-1"], "promoted after the second consecutive pass");
}

#[test]
fn the_file_guard_sees_tracked_untracked_and_staged_changes_but_not_ignored_files() {
    let p = Project::new(&["tr-1"], &["te-1"], "");

    // A tracked file outside the allowlist.
    p.write("README.md", "edited by the agent\n");
    let r = p.gate(&[]).code(1).json();
    let v = &step(&r, 0)["detail"]["violations"];
    assert_eq!(v[0]["path"], "README.md");
    assert_eq!(v[0]["kind"], "tracked");
    assert!(strings(&r["messages"])[0].contains("Step 0 (file guard): 1 file(s) changed outside the allowlist"));
    for s in 1..4 {
        assert_eq!(step(&r, s)["status"], "not_run");
    }
    assert!(!p.path().join("workspace/gate").exists(), "no case ran");
    let out = p.hcbench(&["gate"]).code(1);
    assert!(
        out.stdout.contains("README.md (modified): revert with `git checkout HEAD -- README.md`"),
        "{}",
        out.stdout
    );
    p.write("README.md", "a project under optimization\n");

    // An untracked file that is not ignored.
    p.write("scratch/notes.txt", "x");
    let r = p.gate(&[]).code(1).json();
    assert_eq!(step(&r, 0)["detail"]["violations"][0]["path"], "scratch/notes.txt");
    assert_eq!(step(&r, 0)["detail"]["violations"][0]["kind"], "untracked");
    std::fs::remove_dir_all(p.path().join("scratch")).unwrap();

    // Ignored files, the workspace and allowlisted changes are fine.
    p.write("debug.log", "ignored");
    p.write("workspace/learnings.md", "notes of the loop");
    p.write("agent/notes.md", "new allowlisted file");
    p.write("PROGRAM.md", "edited instructions");
    p.script(&["te-1"], "");
    p.gate(&[]).code(0);

    // A forbidden change staged, then undone in the working tree, is still caught.
    p.write("README.md", "sneaky\n");
    p.stage("README.md");
    p.write("README.md", "a project under optimization\n");
    let r = p.gate(&[]).code(1).json();
    let v = &step(&r, 0)["detail"]["violations"][0];
    assert_eq!(v["path"], "README.md");
    assert_eq!(v["detail"], "staged, then modified in the working tree");

    // A new file staged.
    let repo = git2::Repository::open(p.path()).unwrap();
    let mut index = repo.index().unwrap();
    index.read_tree(&repo.head().unwrap().peel_to_tree().unwrap()).unwrap();
    index.write().unwrap();
    p.write("src/evil.rs", "fn main() {}\n");
    p.stage("src/evil.rs");
    let out = p.hcbench(&["gate"]).code(1);
    assert!(
        out.stdout
            .contains("src/evil.rs (new, staged): revert with `git rm --cached -- src/evil.rs && rm src/evil.rs`"),
        "{}",
        out.stdout
    );
}

#[test]
fn file_guard_is_off_only_when_explicitly_off() {
    for (value, guarded) in
        [("off", false), ("'no'", false), ("0", false), ("''", false), ("flase", true), ("null", true), ("yes", true)]
    {
        let p = Project::new(&["tr-1"], &["te-1"], &format!("file_guard: {value}\n"));
        p.write("README.md", "edited\n");
        if !guarded {
            // Turning the guard off is a human's decision, even before the very first gate.
            let refused = p.hcbench(&["gate"]).code(2);
            assert!(refused.stderr.contains("sets `file_guard` off") && refused.stderr.contains("--accept-config"));
            assert!(
                !p.path().join("workspace/results.tsv").exists()
                    && !p.path().join("workspace/pending_record.json").exists()
            );
        }
        let r = p.gate(if guarded { &[] } else { &["--accept-config"] }).json();
        if guarded {
            assert_eq!(r["exit_code"], 1, "file_guard: {value} keeps the guard on");
            assert_eq!(step(&r, 0)["detail"]["guard"], "checked");
        } else {
            assert_eq!(r["exit_code"], 0, "file_guard: {value} turns the guard off");
            assert_eq!(step(&r, 0)["detail"]["guard"], "disabled");
        }
    }
}

#[test]
fn outside_git_the_gate_warns_and_record_writes_no_commit() {
    let p = Project::files(&["tr-1"], &["te-1"], "");
    p.script(&["te-1"], "");
    let out = p.hcbench(&["gate"]).code(0);
    assert!(out.stdout.contains("is not in a git repository; the file guard is skipped"), "{}", out.stdout);
    p.record(&[]).code(0);
    assert!(p.read("workspace/results.tsv").lines().nth(1).unwrap().split('\t').nth(2) == Some("-"));
    // The binding still holds outside git: a changed candidate cannot be recorded.
    p.gate(&[]).code(0);
    p.script(&[], "");
    p.record(&[]).code(1).stdout_has("agent/script.yaml differs from the version the gate judged");
}

#[test]
fn state_tampering_is_caught_until_a_human_accepts_it() {
    let p = Project::new(&["tr-1"], &["te-1"], "");
    p.script(&["te-1"], "");
    p.commit("fix");
    p.gate(&[]).code(0);
    p.record(&[]).code(0);

    // The agent lowers the bar: removes the results history.
    std::fs::remove_file(p.path().join("workspace/results.tsv")).unwrap();
    let r = p.gate(&[]).code(1).json();
    assert_eq!(step(&r, 0)["detail"]["tampered"][0]["file"], "workspace/results.tsv");
    assert_eq!(step(&r, 0)["detail"]["tampered"][0]["kind"], "deleted");
    assert_eq!(step(&r, 1)["status"], "not_run");

    // Or edits the suite.
    p.gate(&["--accept-state-change", "workspace/results.tsv"]).code(0);
    let suite = p.read("workspace/suite.json").replace("0.8", "0.1");
    p.write("workspace/suite.json", &suite);
    let out = p.hcbench(&["gate"]).code(1);
    assert!(out.stdout.contains("workspace/suite.json was changed by something other than hcbench"), "{}", out.stdout);
    assert!(out.stdout.contains("hcbench gate --accept-state-change workspace/suite.json"));

    // Or forges a pending record: record refuses it.
    p.hcbench(&["gate", "--accept-state-change", "workspace/suite.json"]).code(0);
    let forged = p.read("workspace/pending_record.json").replace("\"val_score\": 1.0", "\"val_score\": 2.0");
    p.write("workspace/pending_record.json", &forged);
    p.record(&[]).code(1).stdout_has("workspace/pending_record.json was changed by something other than hcbench");

    // The config is protected from the first gate on.
    p.write("experiment_config.yaml", &format!("{}threshold: 0.1\n", p.read("experiment_config.yaml")));
    p.commit("a human edits the experiment");
    let r = p.gate(&["--accept-state-change", "workspace/pending_record.json"]).code(1).json();
    assert_eq!(step(&r, 0)["detail"]["tampered"][0]["file"], "experiment_config.yaml");
    p.gate(&["--accept-state-change", "experiment_config.yaml"]).code(0);
}

#[test]
fn record_refuses_numbers_for_another_candidate() {
    let p = Project::new(&["tr-1"], &["te-1", "te-2"], "");
    p.script(&["te-1"], "");
    p.gate(&[]).code(0);
    // The agent changes its candidate after the gate passed and commits that instead.
    p.script(&["te-1", "te-2"], "");
    p.commit("not what was gated");
    let out = p.record(&[]).code(1);
    assert!(out.stdout.contains("agent/script.yaml differs from the version the gate judged"), "{}", out.stdout);
    assert!(!p.path().join("workspace/results.tsv").exists());
    // Gating what was committed makes it recordable.
    p.gate(&[]).code(0);
    p.record(&["--format", "json"]).code(0);
}

#[test]
fn record_checks_every_commit_since_the_last_record() {
    let p = Project::new(&["tr-1"], &["te-1", "te-2"], "");
    p.script(&["te-1"], "");
    p.commit("baseline agent");
    p.gate(&[]).code(0);
    p.record(&[]).code(0);
    let baseline = p.head();

    // The gate passes on a clean candidate; the commit of it sneaks in a change outside the
    // allowlist. (A forbidden commit already in HEAD when the gate starts is refused by the
    // gate itself: gate_trust.rs.)
    p.script(&["te-1", "te-2"], "");
    p.gate(&[]).code(0);
    p.write(
        "benchmarks/demo/cases/te-2.yaml",
        &p.read("benchmarks/demo/cases/te-2.yaml").replace("step_budget: 5", "step_budget: 6"),
    );
    let sneaky = p.commit("tweak a case");
    let out = p.record(&[]).code(1);
    assert!(out.stdout.contains(&format!("commits since {}", &baseline[..12])), "{}", out.stdout);
    assert!(
        out.stdout.contains(&format!("{} (tweak a case): benchmarks/demo/cases/te-2.yaml", &sneaky[..12])),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("hcbench record --accept-history"));
    // A human who made that change on purpose says so.
    p.record(&["--accept-history"]).code(0);
    let state: Value = serde_json::from_str(&p.read("workspace/.gate-state.json")).unwrap();
    assert_eq!(state["accepted"].as_array().unwrap().last().unwrap()["command"], "hcbench record --accept-history");
}

#[test]
fn a_headerless_results_tsv_is_an_error_naming_the_line() {
    let p = Project::new(&["tr-1"], &["te-1"], "");
    p.write("workspace/results.tsv", "0\t0.5\tabc\t0\t0\t2026-01-01T00:00:00Z\n");
    let out = p.gate(&["--accept-state-change", "workspace/results.tsv"]).code(2);
    assert!(out.stderr.contains("workspace/results.tsv line 1: expected the header"), "{}", out.stderr);
    assert!(out.stderr.contains("headerless"), "{}", out.stderr);
    p.record(&[]).code(2).stderr_has("workspace/results.tsv line 1");
}

#[test]
fn a_candidate_that_does_not_load_is_a_failed_gate_not_a_broken_setup() {
    let p = Project::new(&["tr-1"], &["te-1"], "");
    p.write("agent/script.yaml", "default: [{tool: finish}]\ncases: {te-1: oops}\n");
    let r = p.gate(&[]).code(1).json();
    assert!(step(&r, 0)["detail"]["candidate_error"].as_str().unwrap().contains("agent/script.yaml"), "{r}");
    assert!(strings(&r["messages"])[0].starts_with("[gate] FAILED: Step 0 (candidate): script"), "{:?}", r["messages"]);
    // The start line blames the script, not an agent.yaml that loads (or does not exist).
    let text = p.hcbench(&["gate"]).code(1).stdout;
    assert!(!text.contains("does not load: see Step 0"), "{text}");
    assert!(text.contains("embedded default; agent/agent.yaml not found"), "{text}");
    // A misspelt action argument is checked at load like any script problem: still the
    // candidate's failure (exit 1), naming the step and the field.
    p.write("agent/script.yaml", "default: [{tool: read_file, args: {pth: calc.py}}, {tool: finish}]\n");
    let r = p.gate(&[]).code(1).json();
    let error = step(&r, 0)["detail"]["candidate_error"].as_str().unwrap().to_string();
    assert!(error.contains("field `default[0].args.pth`: is not an argument of `read_file`"), "{r}");
    p.script(&[], "");
    p.write("agent/agent.yaml", "system_prompt_file: missing.md\naction_format_file: f.md\n");
    let r = p.gate(&[]).code(1).json();
    assert!(step(&r, 0)["detail"]["candidate_error"].as_str().unwrap().contains("system_prompt_file"), "{r}");
}

#[test]
fn bad_configuration_exits_2_never_1() {
    let p = Project::new(&["tr-1"], &["te-1"], "threshhold: 0.9\n");
    p.gate(&[]).code(2).stderr_has("threshhold");
    let p = Project::new(&["tr-1"], &["te-1"], "gate: {mode: paired}\n");
    p.gate(&[]).code(2).stderr_has("needs `epochs` >= 2");
    let p = Project::new(&["tr-1"], &["te-1"], "");
    p.gate(&["--config", "nope.yaml"]).code(2).stderr_has("nope.yaml");
    p.hcbench(&["--agent", "agent", "gate"]).code(2).stderr_has("does not apply to `gate`");
    p.gate(&["--accept-state-change", "Cargo.toml"]).code(2).stderr_has("not a gate state file");
    let p = Project::new(&["tr-1"], &[], "");
    p.gate(&[]).code(2).stderr_has("has no case in split `test`");
}

#[test]
fn a_second_gate_fails_clearly_or_waits_for_the_lock() {
    let p = Project::new(&["tr-1"], &["te-1"], "");
    std::fs::create_dir_all(p.path().join("workspace")).unwrap();
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(p.path().join("workspace/.gate.lock"))
        .unwrap();
    lock.lock().unwrap();
    std::fs::write(p.path().join("workspace/.gate.lock"), "pid 4242, hcbench gate, since now\n").unwrap();
    let out = p.gate(&[]).code(2);
    assert!(out.stderr.contains("another hcbench process holds the gate lock"), "{}", out.stderr);
    assert!(out.stderr.contains("pid 4242, hcbench gate") && out.stderr.contains("--wait"), "{}", out.stderr);
    p.record(&[]).code(2).stderr_has("another hcbench process holds the gate lock");

    let releaser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        drop(lock);
    });
    let started = Instant::now();
    let out = p.hcbench(&["gate", "--wait", "60"]).code(0);
    assert!(started.elapsed() >= Duration::from_millis(1000), "it waited for the holder");
    assert!(out.stdout.contains("[gate] waiting for the workspace lock (pid 4242"), "{}", out.stdout);
    releaser.join().unwrap();
}

/// No trace, artifact or workspace of a test-split case remains anywhere hcbench writes: the
/// project (every new or changed file is scanned for test-case ids) and the temp directory.
#[test]
fn test_split_cells_leave_nothing_on_disk() {
    let p = Project::new(&["tr-1", "tr-2"], &["secret-te-1", "secret-te-2"], "");
    p.train_run();
    p.script(&["tr-1", "secret-te-1"], "");
    let before = tree_hashes(p.path());
    let out = p.hcbench(&["gate"]).code(0);
    assert!(!out.stdout.contains("secret-te") && !out.stderr.contains("secret-te"), "{}\n{}", out.stdout, out.stderr);
    assert_scrubbed(&p, &before);
}

fn assert_scrubbed(p: &Project, before: &BTreeMap<String, String>) {
    let after = tree_hashes(p.path());
    let mut scanned = 0;
    for (rel, hash) in &after {
        if rel.starts_with(".git/") || before.get(rel) == Some(hash) {
            continue;
        }
        scanned += 1;
        let path = p.path().join(rel);
        // A cell directory's `workspace` is a link to the workspace outside the project: its
        // text is where it points.
        let bytes = match std::fs::read_link(&path) {
            Ok(target) => target.to_string_lossy().into_owned().into_bytes(),
            Err(_) => std::fs::read(&path).unwrap(),
        };
        let text = String::from_utf8_lossy(&bytes).into_owned();
        assert!(!text.contains("secret-te"), "{rel} mentions a test case:\n{text}");
        assert!(!text.contains("\"split\":\"test\""), "{rel} holds a test-split trace");
    }
    assert!(scanned >= 3, "the gate wrote its state ({scanned} files scanned)");
    assert!(p.tmp_entries().is_empty(), "the private directory is gone: {:?}", p.tmp_entries());
    // Nor is any test-split workspace in the workspaces folder (HCBENCH_WORKSPACES, see Test::run).
    let workspaces = super::process_dir("workspaces");
    let leaked: Vec<String> = tree_hashes(&workspaces).into_keys().filter(|k| k.contains("secret-te")).collect();
    assert!(leaked.is_empty(), "test-split workspaces left behind: {leaked:?}");
}

#[test]
fn ctrl_c_during_step_2_removes_the_private_directory() {
    let p = Project::files(&["tr-1"], &[], "");
    p.case("slow-te-1", "test", "test_command: [python3, -c, 'import time; time.sleep(60)']\ntimeout_s: 120\n");
    git2::Repository::init(p.path()).unwrap();
    p.commit("initial");
    let (child, rx) = super::gate_private::spawn_gate(&p, &[]);
    // The test cell is running once Step 2 is announced and a moment has passed.
    super::gate_private::wait_for(&rx, "Step 2");
    std::thread::sleep(Duration::from_millis(1000));
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGINT).unwrap();
    let out = child.wait_with_output().unwrap();
    let lines: Vec<String> = rx.try_iter().collect();
    assert_eq!(out.status.code(), Some(130), "{}", lines.join("\n"));
    assert!(p.tmp_entries().is_empty(), "the private directory is gone after Ctrl-C: {:?}", p.tmp_entries());
    assert!(!p.path().join("workspace/pending_record.json").exists(), "an interrupted gate writes no state");
}

/// Paired Step 2 reverts a candidate only when the paired test shows it worse than HEAD
/// (docs/gate.md, "Paired mode"): an improvement passes, a trade is within noise and passes,
/// and a regression on enough cases is reverted.
#[test]
fn paired_mode_accepts_an_improvement_and_a_trade_and_reverts_a_shown_regression() {
    let tests = ["te-1", "te-2", "te-3", "te-4", "te-5", "te-6", "te-7", "te-8"];
    let p = Project::new(&["tr-1"], &tests, "epochs: 4\ngate:\n  mode: paired\n  margin: 0\n");
    // HEAD's agent fixes five of the eight test cases; the model is noisy: 30% of cells give
    // up. Both arms draw the noise with the same seed, so a cell gives up in both or in
    // neither. Each case's difference then has the sign of what the agent changed on it,
    // whichever cells the noise picks, so the exact sign test's counts below are fixed.
    let noisy = "noise: 0.3\nseed: 11\n";
    let head_fixes = &tests[..5];
    p.script(head_fixes, noisy);
    p.commit("baseline agent");
    let before = tree_hashes(p.path());

    // A real improvement: also fixes the other three. Three better cases out of eight cannot
    // show an improvement (p = 0.25), but nothing shows the candidate worse: accepted.
    p.script(&tests, noisy);
    let out = p.hcbench(&["gate"]).code(0);
    assert!(
        out.stdout
            .contains("[gate] Step 2: full benchmark, paired (test split, 8 case(s) x 4 epoch(s), candidate vs HEAD"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(", 95% CI [")
            && out.stdout.contains("p = 0.25 (exact sign test; 8 of 8 case(s) compared: 3 better, 0 worse, 5 tied)")
            && out.stdout.contains(": not shown worse than HEAD  PASS"),
        "{}",
        out.stdout
    );
    let r = p.gate(&[]).code(0).json();
    let s2 = &step(&r, 2)["detail"];
    assert_eq!(s2["identical_to_head"], false, "{s2}");
    assert_eq!((s2["method"].as_str(), s2["p_value"].as_f64()), (Some("exact_sign"), Some(0.25)), "{s2}");
    assert_eq!(
        (s2["wins"].as_u64(), s2["losses"].as_u64(), s2["compared_cases"].as_u64()),
        (Some(3), Some(0), Some(8))
    );
    assert!(s2["mean_diff"].as_f64().unwrap() > 0.0 && s2["ci"][1].as_f64().unwrap() > 0.0, "{s2}");

    // A trade: fixes te-6 and te-7 but no longer te-4 and te-5. Two cases better, two worse:
    // within noise (p = 1), so nothing shows the candidate worse and it passes.
    p.script(&["te-1", "te-2", "te-3", "te-6", "te-7"], noisy);
    let r = p.gate(&[]).code(0).json();
    let s2 = &step(&r, 2)["detail"];
    assert_eq!((s2["wins"].as_u64(), s2["losses"].as_u64(), s2["p_value"].as_f64()), (Some(2), Some(2), Some(1.0)));
    assert!(s2["ci"][0].as_f64().unwrap() < 0.0 && s2["ci"][1].as_f64().unwrap() > 0.0, "{s2}");

    // A regression: HEAD now fixes all eight, the candidate only two. Six cases worse and none
    // better: p = 2/64 = 0.031, the candidate is shown worse and reverted.
    p.script(&tests, noisy);
    p.commit("agent fixes all eight");
    p.script(&tests[..2], noisy);
    let r = p.gate(&[]).code(1).json();
    let s2 = &step(&r, 2)["detail"];
    assert_eq!((s2["wins"].as_u64(), s2["losses"].as_u64(), s2["p_value"].as_f64()), (Some(0), Some(6), Some(0.03125)));
    assert!(s2["ci"][1].as_f64().unwrap() < 0.0, "{s2}");
    assert!(
        strings(&r["messages"]).iter().any(|m| m.contains("Step 2 (full benchmark): worse than HEAD: upper bound -")
            && m.contains("< -margin 0 (exact sign test, p = 0.0312)")),
        "{:?}",
        r["messages"]
    );

    // An unchanged candidate is not run against itself: its difference is 0 by construction.
    p.script(&tests, noisy);
    let r = p.gate(&[]).code(0).json();
    assert_eq!(step(&r, 2)["detail"]["identical_to_head"], true);
    assert!(step(&r, 2)["detail"].get("method").is_none(), "no test ran");
    assert_scrubbed(&p, &before);
}

#[test]
fn quarantined_cases_are_left_out_of_steps_1_and_3_but_not_step_2() {
    let p = Project::new(&["tr-1", "tr-2", "tr-3"], &["te-1"], "");
    p.script(&["tr-1", "te-1"], "");
    p.commit("tr-2 and tr-3 fail");
    p.hand_suite(&["tr-1", "tr-2"], 1.0);
    // Without the quarantine, tr-2 fails Step 1.
    let r = p.gate(&["--accept-state-change", "workspace/suite.json"]).code(1).json();
    assert_eq!(r["failed_steps"], serde_json::json!([1]));

    // trend found tr-2 and tr-3 flaky under the oracle (and a case of another benchmark).
    // Outside the project: an untracked file in it would fail the file guard.
    let outside = tempfile::tempdir().unwrap();
    let q = outside.path().join("quarantine.json");
    std::fs::write(
        &q,
        r#"{"schema_version": 1, "generated_at": "2026-11-23T00:00:00Z", "control_profile": "oracle", "cases": [
            {"benchmark": "demo", "case_id": "tr-2", "reason": "2 passed, 1 failed over 3 run(s) under oracle"},
            {"benchmark": "demo", "case_id": "tr-3", "reason": "1 passed, 1 failed over 2 run(s) under oracle"},
            {"benchmark": "other", "case_id": "tr-1", "reason": "x"}]}"#,
    )
    .unwrap();
    p.train_run();
    let out = p.gate(&["--quarantine", q.to_str().unwrap()]).code(0);
    let r = out.json();
    let s1 = &step(&r, 1)["detail"];
    assert_eq!((s1["passed"].as_u64(), s1["tasks"].as_u64()), (Some(1), Some(1)), "{s1}");
    assert_eq!(step(&r, 2)["detail"]["val_score"], 1.0, "Step 2 keeps every test case");
    // The progress lines (stderr with --format json) name what was left out.
    assert!(
        out.stderr
            .contains("quarantined (flaky under the oracle, from --quarantine): tr-2, tr-3; left out of Steps 1 and 3"),
        "{}",
        out.stderr
    );
    // tr-3 failed in the train run but is quarantined: it is not re-run for promotion, and
    // tr-2 stays in the set for when it is fixed.
    assert_eq!(step(&r, 3)["status"], "passed");
    assert!(!out.stderr.lines().any(|l| l.contains("re-running") && l.contains("tr-3")), "{}", out.stderr);
    let suite: Value = serde_json::from_str(&p.read("workspace/suite.json")).unwrap();
    assert_eq!(strings(&suite["tasks"]), ["tr-1", "tr-2"]);

    // A file that is not a quarantine list: exit 2 naming it.
    let bad = outside.path().join("bad.json");
    std::fs::write(&bad, "{\"cases\": 3}").unwrap();
    let out = p.hcbench(&["gate", "--quarantine", bad.to_str().unwrap()]).code(2);
    assert!(out.stderr.contains("bad.json is not a quarantine file"), "{}", out.stderr);
}

#[test]
fn the_same_commit_cannot_be_recorded_twice() {
    let p = Project::new(&["tr-1"], &["te-1", "te-2"], "");
    p.script(&["te-1"], "");
    p.commit("agent fixes te-1");
    p.gate(&[]).code(0);
    p.record(&[]).code(0);
    let results = std::fs::read(p.path().join("workspace/results.tsv")).unwrap();
    // Gated again with nothing changed, the candidate ties its own score and passes; recording
    // it again would count one commit twice.
    p.gate(&[]).code(0);
    let out = p.record(&[]).code(1);
    let head = p.head();
    assert!(
        out.stdout.contains(&format!("commit {} is already recorded (row 1 of workspace/results.tsv)", &head[..12])),
        "{}",
        out.stdout
    );
    assert_eq!(std::fs::read(p.path().join("workspace/results.tsv")).unwrap(), results, "nothing was recorded");
    // A new commit is recordable.
    p.script(&["te-1", "te-2"], "");
    p.commit("agent fixes te-2");
    p.gate(&[]).code(0);
    p.record(&[]).code(0);
}

#[test]
fn an_agent_yaml_that_does_not_parse_is_reported_as_such_with_its_path() {
    let p = Project::new(&["tr-1"], &["te-1"], "");
    p.write("agent/agent.yaml", "system_prompt_file: [unclosed\n");
    let out = p.hcbench(&["gate"]).code(1);
    assert!(!out.stdout.contains("not found"), "the file exists; it does not load:\n{}", out.stdout);
    assert!(out.stdout.contains("agent/agent.yaml does not load: see Step 0"), "{}", out.stdout);
    assert!(
        out.stdout.contains("the candidate does not load: agent spec ./agent/agent.yaml: is not valid"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("<input>"), "the snippet names the file:\n{}", out.stdout);
    assert!(out.stdout.contains("agent/agent.yaml:1:"), "{}", out.stdout);
    assert!(!p.path().join("workspace/pending_record.json").exists(), "a failed gate writes no pending record");
}
