//! The gate's state anchored in git (way 6 of issue 15), promotions applied only by `record`,
//! "not passing" lists with scores and reasons, and advice that works when it is followed.
//!
//! Each test drives the real binary in a real git repository (`gate.rs`'s `Project`); where the
//! gate or `record` refuses, it also shows that nothing was recorded.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::Output;
use crate::gate::Project;

const ANCHOR: &str = "refs/hcbench/gate-state";

fn record(p: &Project) -> Output {
    p.hcbench(&["record"])
}

fn suite(p: &Project) -> Value {
    serde_json::from_str(&p.read("workspace/suite.json")).unwrap()
}

fn tasks(v: &Value) -> Vec<String> {
    v["tasks"].as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect()
}

fn exists(p: &Project, rel: &str) -> bool {
    p.path().join(rel).exists()
}

/// The anchor commit, or None when the ref does not exist.
fn anchor(p: &Project) -> Option<git2::Oid> {
    let repo = git2::Repository::open(p.path()).unwrap();
    repo.find_reference(ANCHOR).ok().map(|r| r.peel_to_commit().unwrap().id())
}

/// Runs a git command line as printed in hcbench's advice, in the project.
fn git(p: &Project, args: &[&str]) {
    let st = Command::new("git").args(args).current_dir(p.path()).status().expect("git runs");
    assert!(st.success(), "git {args:?} failed");
}

fn train_run(p: &Project) {
    p.hcbench(&["run", "--benchmark", "demo", "--split", "train", "--profile", "scripted:agent/script.yaml"]);
    assert!(exists(p, "workspace/train_results.json"));
}

/// A recorded baseline: the agent fixes te-1 and te-2 (val_score 1).
fn recorded_best() -> Project {
    let p = Project::new(&["tr-1"], &["te-1", "te-2"], "");
    p.script(&["te-1", "te-2"], "");
    p.commit("agent fixes both test cases");
    p.gate(&[]).code(0);
    record(&p).code(0);
    p
}

#[test]
fn a_deleted_workspace_is_exit_2_naming_the_recovery_and_restoring_it_judges_against_the_recorded_best() {
    let p = recorded_best();
    let results = p.read("workspace/results.tsv");
    assert!(anchor(&p).is_some(), "the record anchored the state in {ANCHOR}");

    // A worse candidate, and the agent wipes the workspace to make it pass as a first run.
    p.script(&["te-1"], "");
    std::fs::remove_dir_all(p.path().join("workspace")).unwrap();
    let out = p.gate(&[]).code(2);
    for needle in [
        "the gate's state is missing from workspace/",
        ANCHOR,
        "1 recorded iteration(s), best val_score 1",
        "`hcbench gate --restore-state`",
        "`hcbench gate --accept-state-reset`",
    ] {
        assert!(out.stderr.contains(needle), "stderr lacks {needle:?}:\n{}", out.stderr);
    }
    for f in ["workspace/results.tsv", "workspace/suite.json", "workspace/pending_record.json"] {
        assert!(!exists(&p, f), "nothing was written: {f}");
    }
    // `record` refuses too, with the same recovery.
    record(&p).code(2).stderr_has("hcbench gate --restore-state");
    assert!(!exists(&p, "workspace/results.tsv"));

    // Following the advice restores the state, and the gate judges against the recorded best.
    let r = p.gate(&["--restore-state"]).code(1).json();
    assert_eq!(r["steps"][2]["detail"]["best"], 1.0, "{r}");
    assert_eq!(r["steps"][2]["detail"]["val_score"], 0.5);
    assert!(r["messages"][0].as_str().unwrap().contains("val_score 0.5 < best 1"), "{r}");
    assert_eq!(p.read("workspace/results.tsv"), results, "the history is back, unchanged");
    assert!(!exists(&p, "workspace/pending_record.json"), "the failing gate recorded nothing");
    let state: Value = serde_json::from_str(&p.read("workspace/.gate-state.json")).unwrap();
    let last = state["accepted"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["command"], "hcbench gate --restore-state", "the restore is logged: {state}");

    // Deleting one state file is Step 0's tamper failure; its advice (restore) works too.
    std::fs::remove_file(p.path().join("workspace/results.tsv")).unwrap();
    let out = p.hcbench(&["gate"]).code(1);
    assert!(out.stdout.contains("restore it with `hcbench gate --restore-state`"), "{}", out.stdout);
    p.gate(&["--restore-state"]).code(1);
    assert_eq!(p.read("workspace/results.tsv"), results);
}

#[test]
fn a_human_can_start_a_new_history_and_the_old_one_stays_in_the_anchor() {
    let p = recorded_best();
    let before = anchor(&p).unwrap();
    p.script(&["te-1"], "");
    std::fs::remove_dir_all(p.path().join("workspace")).unwrap();
    p.gate(&[]).code(2);
    let out = p.hcbench(&["gate", "--accept-state-reset"]).code(0);
    assert!(out.stdout.contains("accepted the workspace's gate state as it is now"), "{}", out.stdout);
    assert!(out.stdout.contains("no best recorded yet"), "a human's new history: {}", out.stdout);
    let state: Value = serde_json::from_str(&p.read("workspace/.gate-state.json")).unwrap();
    let reset = &state["accepted"][0];
    assert_eq!(reset["command"], "hcbench gate --accept-state-reset");
    assert_eq!(reset["previous"], before.to_string(), "the log names the anchor commit it replaced");
    assert_ne!(anchor(&p).unwrap(), before, "the anchor moved to the new history");
    // The old history is still reachable from the anchor.
    let repo = git2::Repository::open(p.path()).unwrap();
    let mut walk = repo.revwalk().unwrap();
    walk.push_ref(ANCHOR).unwrap();
    assert!(walk.map(|c| c.unwrap()).any(|c| c == before));
}

#[test]
fn a_workspace_replaced_by_an_older_copy_is_caught() {
    let p = Project::new(&["tr-1"], &["te-1", "te-2"], "");
    p.script(&["te-1"], "");
    p.commit("baseline");
    p.gate(&[]).code(0);
    record(&p).code(0);
    let backup = tempfile::tempdir().unwrap();
    copy_dir(&p.path().join("workspace"), backup.path());
    p.script(&["te-1", "te-2"], "");
    p.commit("better");
    p.gate(&[]).code(0);
    record(&p).code(0);
    let results = p.read("workspace/results.tsv");

    // The older copy is self-consistent (every hash matches), but its best is lower.
    std::fs::remove_dir_all(p.path().join("workspace")).unwrap();
    copy_dir(backup.path(), &p.path().join("workspace"));
    p.script(&["te-1"], "");
    p.gate(&[]).code(2).stderr_has("differs from the copy anchored in refs/hcbench/gate-state");
    assert!(!exists(&p, "workspace/pending_record.json"));
    p.gate(&["--restore-state"]).code(1);
    assert_eq!(p.read("workspace/results.tsv"), results);
}

#[test]
fn a_deleted_anchor_is_caught_while_the_workspace_remains() {
    let p = recorded_best();
    let repo = git2::Repository::open(p.path()).unwrap();
    repo.find_reference(ANCHOR).unwrap().delete().unwrap();
    let results = p.read("workspace/results.tsv");
    p.gate(&[]).code(2).stderr_has("refs/hcbench/gate-state was deleted");
    record(&p).code(2).stderr_has("refs/hcbench/gate-state was deleted").stderr_has("--accept-state-reset");
    assert_eq!(p.read("workspace/results.tsv"), results);
    // The advice: a human anchors the workspace's state again.
    p.gate(&["--accept-state-reset"]).code(0);
    assert!(anchor(&p).is_some());
    p.gate(&[]).code(0);
}

#[test]
fn promotions_join_the_regression_set_only_when_the_candidate_is_recorded() {
    let p = Project::new(&["tr-1", "tr-2"], &["te-1"], "");
    p.script(&["te-1"], "");
    p.commit("baseline");
    p.gate(&[]).code(0);
    record(&p).code(0);
    let set = p.read("workspace/suite.json");
    assert!(tasks(&suite(&p)).is_empty());
    train_run(&p);

    // A candidate that fixes tr-1: Step 3 promotes it, but the set does not change yet.
    p.script(&["te-1", "tr-1"], "");
    let r = p.gate(&[]).code(0).json();
    assert_eq!(r["steps"][3]["detail"]["promoted"], serde_json::json!(["tr-1"]));
    assert_eq!(p.read("workspace/suite.json"), set, "a gate alone never changes the regression set");
    let pending: Value = serde_json::from_str(&p.read("workspace/pending_record.json")).unwrap();
    assert_eq!(pending["regression_set"]["promoted"], serde_json::json!(["tr-1"]));

    // Never committed: the loop reverts it and tries something else; the set stays as it was.
    p.script(&["te-1"], "");
    let r = p.gate(&[]).code(0).json();
    assert_eq!(r["steps"][1]["status"], "skipped", "tr-1 never joined the regression set");
    assert_eq!(p.read("workspace/suite.json"), set);

    // Committed and recorded: now it joins, and the next gate guards it.
    p.script(&["te-1", "tr-1"], "");
    p.gate(&[]).code(0);
    p.commit("fix tr-1");
    record(&p).code(0);
    assert_eq!(tasks(&suite(&p)), ["tr-1"]);
    assert_eq!(suite(&p)["last_results"]["tr-1"], 1.0);
    p.script(&["te-1"], "");
    let r = p.gate(&[]).code(1).json();
    assert_eq!(r["failed_steps"], serde_json::json!([1]));
}

#[test]
fn not_passing_lists_give_each_train_cases_score_and_reason() {
    let p = Project::new(&["tr-1", "tr-2"], &["te-1"], "max_unmeasured: 0.5\n");
    p.case("tr-hang", "train", "test_command: [python3, -c, 'import time; time.sleep(60)']\ntimeout_s: 1\n");
    p.script(&["te-1", "tr-1"], "");
    p.commit("cases");
    let suite =
        serde_json::json!({"schema_version": 1, "tasks": ["tr-1", "tr-2", "tr-hang", "ghost-9"], "threshold": 0.5});
    p.write("workspace/suite.json", &suite.to_string());
    let out = p.hcbench(&["gate", "--accept-state-change", "workspace/suite.json"]).code(1);
    assert!(
        out.stdout.contains(
            "not passing: ghost-9 (score 0, not a train case), tr-2 (score 0, failed), tr-hang (score 0, timeout)"
        ),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("te-1") && !out.stderr.contains("te-1"), "never a test case");
    assert!(!exists(&p, "workspace/pending_record.json"), "nothing recorded");
    let r = p.gate(&[]).code(1).json();
    let np = &r["steps"][1]["detail"]["not_passing"];
    assert_eq!(np[1], serde_json::json!({"case": "tr-2", "score": 0.0, "reason": "failed"}));

    // Step 3's "still failing" list, on a fresh project.
    let p = Project::new(&["tr-1", "tr-2"], &["te-1"], "");
    p.script(&["te-1"], "");
    p.commit("baseline");
    train_run(&p);
    p.script(&["te-1", "tr-1"], "");
    let out = p.hcbench(&["gate"]).code(0);
    assert!(out.stdout.contains("still failing: tr-2 (score 0, failed)"), "{}", out.stdout);
}

#[test]
fn records_history_advice_works_when_followed() {
    let p = Project::new(&["tr-1"], &["te-1", "te-2"], "");
    p.script(&["te-1"], "");
    p.commit("baseline");
    p.gate(&[]).code(0);
    record(&p).code(0);
    let base = git2::Repository::open(p.path()).unwrap().head().unwrap().peel_to_commit().unwrap().id().to_string();
    let results = p.read("workspace/results.tsv");

    // A commit outside the allowlist, then one "reverting" it, then the improvement.
    let case = "benchmarks/demo/cases/te-2.yaml";
    let original = p.read(case);
    p.write(case, &original.replace("step_budget: 5", "step_budget: 6"));
    p.commit("tweak a case");
    p.write(case, &original);
    p.commit("revert the tweak");
    p.script(&["te-1", "te-2"], "");
    p.commit("improve the agent");
    // The gate sees the history at its start (exit 2: no revert of the candidate undoes it).
    let out = p.hcbench(&["gate"]).code(2);
    assert!(out.stderr.contains("reverting the candidate cannot undo them"), "{}", out.stderr);
    let reset = format!("git reset --soft {}", &base[..12]);
    assert!(out.stderr.contains(&format!("`{reset}`")), "{}", out.stderr);
    assert_eq!(p.read("workspace/results.tsv"), results, "nothing recorded");

    // Follow it, word for word: the reverted pair leaves no change, so the gate passes.
    git(&p, &["reset", "--soft", &base[..12]]);
    p.gate(&[]).code(0);
    p.commit("improve the agent");
    record(&p).code(0);
    assert_eq!(p.read("workspace/results.tsv").lines().count(), 3);

    // A change committed after a passing gate: record refuses, and its advice works too.
    p.script(&["te-1", "te-2"], "# same agent, new commit\n");
    p.gate(&[]).code(0);
    p.commit("agent comment");
    p.write(case, &original.replace("step_budget: 5", "step_budget: 7"));
    p.commit("tweak a case again");
    let out = record(&p).code(1);
    assert!(out.stdout.contains("reverting is not enough"), "{}", out.stdout);
    let repo = git2::Repository::open(p.path()).unwrap();
    let last = repo.head().unwrap().peel_to_commit().unwrap().parent(0).unwrap().parent(0).unwrap().id().to_string();
    assert!(out.stdout.contains(&format!("git reset --soft {}", &last[..12])), "{}", out.stdout);
    git(&p, &["reset", "--soft", &last[..12]]);
    // The gate's file guard names the undo of the change outside the allowlist, which works.
    let out = p.hcbench(&["gate"]).code(1);
    let undo = format!("git checkout HEAD -- {case}");
    assert!(out.stdout.contains(&undo), "{}", out.stdout);
    git(&p, &["checkout", "HEAD", "--", case]);
    p.gate(&[]).code(0);
    p.commit("agent comment");
    record(&p).code(0);
    assert_eq!(p.read("workspace/results.tsv").lines().count(), 4);
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}
