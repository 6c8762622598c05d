//! `ablate --context`: one profile over ablations of the agent spec, tagged in cell ids,
//! manifest, traces and reports; the oracle as the control arm under every ablation; refusal
//! of ablations that do not exist yet; resume.

use std::path::Path;

use serde_json::Value;

use crate::Test;
use crate::run::{GOOD_CASE, GOOD_ORACLE, Scratch};

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn cell_ids(report: &Value) -> Vec<String> {
    report["cells"].as_array().unwrap().iter().map(|c| c["cell_id"].as_str().unwrap().to_string()).collect()
}

#[test]
fn ablate_tags_cell_ids_manifest_traces_and_report_rows() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("a");
    let r = Test::new()
        .args(&["ablate", "--context", "--suite", "smoke", "--ablations", "full,no_memory", "-j", "4"])
        .args(&["--format", "json", "--out"])
        .arg_path(&run_dir)
        .run()
        .code(0)
        .json();
    assert_eq!(r["command"], "ablate");
    assert_eq!(r["profiles"], serde_json::json!(["oracle/full", "oracle/no_memory"]));
    let ids = cell_ids(&r);
    assert_eq!(ids.len(), 10, "5 smoke cases x 2 ablations");
    assert_eq!(&ids[..2], ["bugfix-1__oracle__full", "bugfix-1__oracle__no_memory"]);
    for c in r["cells"].as_array().unwrap() {
        let id = c["cell_id"].as_str().unwrap();
        assert!(id.ends_with(&format!("__oracle__{}", c["ablation"].as_str().unwrap())), "{c}");
        assert_eq!(c["outcome"], "passed", "the oracle is the control arm under every ablation: {c}");
    }
    let manifest = read_json(&run_dir.join("manifest.json"));
    assert_eq!(manifest["ablations"], serde_json::json!(["full", "no_memory"]));
    let trace = std::fs::read_to_string(run_dir.join("cells/context-1__oracle__no_memory/trace.jsonl")).unwrap();
    let first: Value = serde_json::from_str(trace.lines().next().unwrap()).unwrap();
    assert_eq!((first["kind"].as_str(), first["data"]["ablation"].as_str()), (Some("run_started"), Some("no_memory")));

    // One comparison: the ablation against `full`, on the same cases.
    let comparisons = r["comparisons"].as_array().unwrap();
    assert_eq!(comparisons.len(), 1);
    assert_eq!(
        (comparisons[0]["a"].as_str(), comparisons[0]["b"].as_str()),
        (Some("oracle/full"), Some("oracle/no_memory"))
    );
    assert_eq!(comparisons[0]["cases"], 5);
    let groups: Vec<&str> =
        r["profile_stats"].as_array().unwrap().iter().map(|s| s["profile"].as_str().unwrap()).collect();
    assert_eq!(groups, ["oracle/full", "oracle/no_memory"]);
    let md = std::fs::read_to_string(run_dir.join("reports/report.md")).unwrap();
    assert!(md.contains("oracle/no_memory") && md.contains("oracle/full"), "{md}");
    let html = std::fs::read_to_string(run_dir.join("reports/report.html")).unwrap();
    assert!(html.contains("oracle/no_memory"));
    // `report` re-renders the ablate run from its traces, byte for byte.
    let before = std::fs::read(run_dir.join("reports/report.json")).unwrap();
    Test::new().args(&["report"]).arg_path(&run_dir).run().code(0);
    assert_eq!(std::fs::read(run_dir.join("reports/report.json")).unwrap(), before);
}

#[test]
fn the_oracle_passes_every_case_under_every_ablation_and_full_comes_first() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("a");
    // `full` is left out and a name repeated: it is added first, the repeat dropped.
    let r = Test::new()
        .args(&["ablate", "--context", "--suite", "smoke", "-j", "4", "--format", "json"])
        .args(&["--ablations", "no_policy_retry,no_repomap,no_memory,no_memory", "--out"])
        .arg_path(&run_dir)
        .run()
        .code(0)
        .json();
    assert_eq!(
        r["profiles"],
        serde_json::json!(["oracle/full", "oracle/no_policy_retry", "oracle/no_repomap", "oracle/no_memory"])
    );
    assert_eq!(r["verdict"]["exit_code"], 0);
    for s in r["profile_stats"].as_array().unwrap() {
        assert_eq!((s["cells"].as_u64(), s["passed"].as_u64()), (Some(5), Some(5)), "{s}");
    }
    let comparisons = r["comparisons"].as_array().unwrap();
    assert_eq!(comparisons.len(), 3, "each ablation against full, no other pair");
    for c in comparisons {
        assert_eq!(c["a"], "oracle/full");
        assert_eq!(c["adjusted_over"], 3, "Holm across the ablations: {c}");
    }
}

#[test]
fn ablations_that_do_not_exist_are_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("a");
    Test::new()
        .args(&["ablate", "--context", "--suite", "smoke", "--ablations", "full,no_brain", "--out"])
        .arg_path(&run_dir)
        .run()
        .code(2)
        .stderr_has("`no_brain` is not an ablation")
        .stderr_has("no_context_compaction");
    assert!(!run_dir.exists(), "nothing ran");
    Test::new().args(&["ablate", "--suite", "smoke"]).run().code(2).stderr_has("--context");
}

#[test]
fn an_interrupted_ablate_run_resumes_with_its_ablations() {
    let s = Scratch::new();
    s.case("good", GOOD_CASE, GOOD_ORACLE);
    s.case("other", &GOOD_CASE.replace("id: good", "id: other"), GOOD_ORACLE);
    let run_dir = s.path().join("a");
    Test::new()
        .root(s.path())
        .args(&["ablate", "--context", "--benchmark", "demo", "--ablations", "full,no_memory", "--out"])
        .arg_path(&run_dir)
        .run()
        .code(0);
    let cut = run_dir.join("cells/good__oracle__no_memory/trace.jsonl");
    let text = std::fs::read_to_string(&cut).unwrap();
    std::fs::write(&cut, text.lines().take(3).collect::<Vec<_>>().join("\n") + "\n").unwrap();
    std::fs::remove_dir_all(run_dir.join("cells/other__oracle__full")).unwrap();
    let kept_trace = std::fs::read(run_dir.join("cells/good__oracle__full/trace.jsonl")).unwrap();

    let r = Test::new()
        .root(s.path())
        .args(&["ablate", "--context", "--format", "json", "--resume"])
        .arg_path(&run_dir)
        .run()
        .code(0)
        .stderr_has("2 finished cell(s) kept")
        .json();
    assert_eq!(r["status"], "complete");
    assert_eq!(
        cell_ids(&r),
        ["good__oracle__full", "good__oracle__no_memory", "other__oracle__full", "other__oracle__no_memory"]
    );
    assert!(r["cells"].as_array().unwrap().iter().all(|c| c["outcome"] == "passed"));
    assert_eq!(std::fs::read(run_dir.join("cells/good__oracle__full/trace.jsonl")).unwrap(), kept_trace);
    let rerun = std::fs::read_to_string(&cut).unwrap();
    assert!(rerun.lines().any(|l| l.contains("\"ablation\":\"no_memory\"")), "the re-run cell keeps its ablation");

    // A matrix run is not finished by `ablate`.
    let matrix_dir = s.path().join("m");
    Test::new().root(s.path()).args(&["matrix", "--benchmark", "demo", "--out"]).arg_path(&matrix_dir).run().code(0);
    Test::new()
        .root(s.path())
        .args(&["ablate", "--context", "--resume"])
        .arg_path(&matrix_dir)
        .run()
        .code(2)
        .stderr_has("is not an ablate run");
}
