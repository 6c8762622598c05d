//! `matrix` and `report`: profiles x cases x epochs, reports from traces, resume, Ctrl-C and
//! bad input.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::run::{GOOD_CASE, GOOD_ORACLE, Scratch};
use crate::{BIN, Test};

fn report_json(run_dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(run_dir.join("reports/report.json")).unwrap()).unwrap()
}

/// Every file under reports/, as (name, bytes).
fn reports(run_dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(run_dir.join("reports"))
        .unwrap()
        .flatten()
        .map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap()))
        .collect();
    v.sort();
    v
}

#[test]
fn matrix_compares_profiles_with_epochs_and_report_rerenders_identically() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("m");
    let out = Test::new()
        .args(&["matrix", "--profiles", "oracle,nop", "--suite", "smoke", "--epochs", "2", "--format", "json", "--out"])
        .arg_path(&run_dir)
        .run()
        .code(0);
    let live = out.json();
    assert_eq!(live["cells"].as_array().unwrap().len(), 5 * 2 * 2, "cases x profiles x epochs");
    let oracle = &live["profile_stats"][0];
    let nop = &live["profile_stats"][1];
    assert_eq!((oracle["profile"].as_str(), oracle["pass_rate"].as_f64()), (Some("oracle"), Some(1.0)));
    assert_eq!((nop["profile"].as_str(), nop["pass_rate"].as_f64()), (Some("nop"), Some(0.0)));
    assert_eq!(oracle["epochs"], 2);
    assert_eq!(oracle["pass_hat_k"], 1.0);
    // Five cases, however clean, cannot show a difference at 5% (p = 2/32): epochs are not cases.
    assert_eq!(live["comparisons"][0]["verdict"], "within_noise");
    assert_eq!(live["comparisons"][0]["cases"], 5);
    let cell_ids: Vec<&str> =
        live["cells"].as_array().unwrap().iter().map(|c| c["cell_id"].as_str().unwrap()).collect();
    assert!(cell_ids.contains(&"bugfix-1__oracle__e2"), "stable ids carry the epoch: {cell_ids:?}");
    assert_eq!(live["category_stats"].as_array().unwrap().len(), 10, "2 profiles x 5 categories");

    // Every format exists; JUnit keeps agent failures apart from infrastructure errors.
    let before = reports(&run_dir);
    let names: Vec<&str> = before.iter().map(|(n, _)| n.as_str()).collect();
    for want in ["cells.csv", "junit.xml", "report.json", "report.md"] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    let junit = String::from_utf8(before.iter().find(|(n, _)| n == "junit.xml").unwrap().1.clone()).unwrap();
    assert_eq!(junit.matches("<testcase").count(), 20);
    assert_eq!(junit.matches("<failure").count(), 10, "nop cells are agent failures");
    let csv = String::from_utf8(before.iter().find(|(n, _)| n == "cells.csv").unwrap().1.clone()).unwrap();
    assert_eq!(csv.lines().count(), 21, "header + one row per cell");
    let md = String::from_utf8(before.iter().find(|(n, _)| n == "report.md").unwrap().1.clone()).unwrap();
    assert!(md.contains("| oracle | 100.0% |") && md.contains("within noise (p = 0.0625, exact sign test)"), "{md}");

    // `report` re-renders every file byte for byte from the traces alone.
    std::fs::remove_dir_all(run_dir.join("reports")).unwrap();
    std::fs::remove_file(run_dir.join("results.jsonl")).unwrap();
    Test::new().args(&["report"]).arg_path(&run_dir).run().code(0);
    assert_eq!(reports(&run_dir), before);
}

/// The smoke suite has five cases: report.json names every interval's method, states the
/// minimum detectable effect (none: five cases cannot reach p < 0.05) and reads the clean sweep
/// of oracle over nop as what it is, within noise.
#[test]
fn smoke_matrix_reports_interval_methods_power_and_an_honest_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("m");
    let live = Test::new()
        .args(&["matrix", "--profiles", "oracle,nop", "--suite", "smoke", "--format", "json", "--out"])
        .arg_path(&run_dir)
        .run()
        .code(0)
        .json();
    assert_eq!(live["schema_version"], 2);
    let nop = &live["profile_stats"][1];
    assert_eq!(nop["pass_rate"], 0.0);
    let ci = &nop["pass_rate_ci"];
    assert_eq!((ci["lo"].as_f64(), ci["method"].as_str()), (Some(0.0), Some("wilson")));
    assert!((ci["hi"].as_f64().unwrap() - 0.434).abs() < 0.001, "0/5 reads 0-43%, not 0-0%: {ci}");
    for group in ["category_stats", "split_stats"] {
        let rows = live[group].as_array().unwrap();
        assert!(!rows.is_empty() && rows.iter().all(|s| s["pass_rate_ci"]["method"] == "wilson"), "{group}");
    }
    assert_eq!(live["split_stats"][0]["split"], "train");

    let c = &live["comparisons"][0];
    assert_eq!((c["a"].as_str(), c["b"].as_str(), c["cases"].as_u64()), (Some("oracle"), Some("nop"), Some(5)));
    assert_eq!((c["wins"].as_u64(), c["dropped_cases"].as_u64()), (Some(5), Some(0)));
    assert_eq!((c["p_value"].as_f64(), c["p_adjusted"].as_f64()), (Some(0.0625), Some(0.0625)));
    assert_eq!(c["ci"]["method"], "exact_sign");
    assert!(c["ci"]["lo"].as_f64().unwrap() < 0.0, "the interval includes 0: {}", c["ci"]);
    assert_eq!(c["verdict"], "within_noise");
    assert_eq!(c["verdict_text"], "within noise (p = 0.0625, exact sign test)");
    assert_eq!(c["mde"], Value::Null);

    let power = &live["power"];
    assert_eq!((power["alpha"].as_f64(), power["power"].as_f64()), (Some(0.05), Some(0.8)));
    assert_eq!((power["cases"].as_u64(), power["epochs"].as_u64()), (Some(5), Some(1)));
    assert_eq!(power["mde"], Value::Null, "five cases can detect nothing at 5%");

    // The Markdown report says the same in words.
    let md = std::fs::read_to_string(run_dir.join("reports/report.md")).unwrap();
    for want in [
        "0.0–43.4% (Wilson)",
        "within noise (p = 0.0625, exact sign test)",
        "**Power:** minimum detectable effect none, at 80% power and alpha 0.05 over 5 case(s) x 1 epoch(s)",
    ] {
        assert!(md.contains(want), "{want:?} missing from report.md:\n{md}");
    }
    // Every smoke case is in train: a per-split table would repeat the summary, so only
    // report.json carries it (tests/cli/rundir.rs shows the table of a run with two splits).
    assert!(!md.contains("## By split"), "{md}");
}

#[test]
fn a_corrupt_trace_marks_its_cell_as_harness_error_and_the_report_still_renders() {
    let s = Scratch::new();
    s.case("good", GOOD_CASE, GOOD_ORACLE);
    s.case("other", &GOOD_CASE.replace("id: good", "id: other"), GOOD_ORACLE);
    let run_dir = s.path().join("m");
    Test::new().root(s.path()).args(&["matrix", "--benchmark", "demo", "--out"]).arg_path(&run_dir).run().code(0);
    // The layout before the pack (a folder and a plain trace per cell), to edit a cell by hand.
    hcbench::trace::stored::unpack(&run_dir, false).unwrap();
    std::fs::write(run_dir.join("cells/good__oracle/trace.jsonl"), "{\"garbage\": true}\n{}\n").unwrap();
    // Half the oracle's cells lost their verdict: below the default 90% coverage, exit 4.
    let out =
        Test::new().args(&["report", "--format", "json"]).arg_path(&run_dir).run().code(4).stderr_has("good__oracle");
    let r = out.json();
    let cells = r["cells"].as_array().unwrap();
    let good = cells.iter().find(|c| c["cell_id"] == "good__oracle").unwrap();
    assert_eq!(good["outcome"], "harness_error");
    assert!(good["reason"].as_str().unwrap().contains("line 1"), "{}", good["reason"]);
    let other = cells.iter().find(|c| c["cell_id"] == "other__oracle").unwrap();
    assert_eq!(other["outcome"], "passed");
    assert_eq!(r["profile_stats"][0]["coverage"], 0.5);
}

#[test]
fn resume_keeps_finished_cells_and_runs_the_rest() {
    let s = Scratch::new();
    s.case("good", GOOD_CASE, GOOD_ORACLE);
    s.case("other", &GOOD_CASE.replace("id: good", "id: other"), GOOD_ORACLE);
    let run_dir = s.path().join("m");
    Test::new()
        .root(s.path())
        .args(&["matrix", "--benchmark", "demo", "--profiles", "oracle,nop", "--out"])
        .arg_path(&run_dir)
        .run()
        .code(0);
    // Simulate an interruption: one trace cut before run_finished, one cell never started
    // (edited by hand in the layout before the pack: a folder and a plain trace per cell).
    hcbench::trace::stored::unpack(&run_dir, false).unwrap();
    let cut = run_dir.join("cells/good__oracle/trace.jsonl");
    let text = crate::read_trace_text(&cut).unwrap();
    let keep: Vec<&str> = text.lines().take(4).collect();
    std::fs::write(&cut, keep.join("\n") + "\n").unwrap();
    std::fs::remove_dir_all(run_dir.join("cells/other__nop")).unwrap();
    let kept_trace = crate::read_trace_bytes(run_dir.join("cells/other__oracle/trace.jsonl")).unwrap();

    // Before the resume, the run is partial: the report says so and how to finish it, and half
    // of each profile's cells without a verdict is exit 4 (coverage), not a result.
    let partial = Test::new().args(&["report", "--format", "json"]).arg_path(&run_dir).run().code(4).json();
    assert_eq!(partial["status"], "partial");
    let resume = format!("hcbench matrix --resume {}", run_dir.canonicalize().unwrap().display());
    assert_eq!(partial["resume_command"], resume.as_str());
    let banner = partial["banner"].as_str().unwrap();
    assert!(banner.starts_with("Partial run: 2 of 4 planned cell(s) have no verdict"), "{banner}");
    assert!(banner.contains(&resume), "{banner}");

    let out = Test::new()
        .root(s.path())
        .args(&["matrix", "--format", "json", "--resume"])
        .arg_path(&run_dir)
        .run()
        .code(0)
        .stderr_has("2 finished cell(s) kept");
    let r = out.json();
    assert_eq!(r["status"], "complete", "the resumed run is whole again");
    assert!(r.get("banner").is_none() && r.get("resume_command").is_none(), "no banner for a complete run");
    let outcomes: Vec<(&str, &str)> = r["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["cell_id"].as_str().unwrap(), c["outcome"].as_str().unwrap()))
        .collect();
    assert_eq!(
        outcomes,
        [("good__oracle", "passed"), ("good__nop", "failed"), ("other__oracle", "passed"), ("other__nop", "failed")]
    );
    assert_eq!(
        crate::read_trace_bytes(run_dir.join("cells/other__oracle/trace.jsonl")).unwrap(),
        kept_trace,
        "finished cells are not re-run"
    );
    let results = std::fs::read_to_string(run_dir.join("results.jsonl")).unwrap();
    assert_eq!(results.lines().count(), 4, "one results line per cell after the resume");
}

#[test]
fn ctrl_c_records_running_cells_as_cancelled_and_writes_reports() {
    let s = Scratch::new();
    s.case(
        "slow",
        "id: slow\ncategory: bugfix\nsplit: train\nfixture: calc\nprompt: x\nstep_budget: 3\ntimeout_s: 120\ntest_command: [python3, -c, 'import time; time.sleep(60)']\n",
        GOOD_ORACLE,
    );
    let run_dir = s.path().join("m");
    let mut child = Command::new(BIN)
        .args(["matrix", "--benchmark", "demo", "--format", "json", "--out"])
        .arg(&run_dir)
        .current_dir(s.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the cell is running its (slow) tests, then interrupt.
    let trace = run_dir.join("cells/slow__oracle/trace.jsonl");
    crate::interrupt_once_running(&child, &trace);
    let started = Instant::now();
    let status = child.wait().unwrap();
    assert!(started.elapsed() < Duration::from_secs(20), "a single Ctrl-C stops promptly");
    assert_eq!(status.code(), Some(130));
    let r = report_json(&run_dir);
    assert_eq!(r["cells"][0]["outcome"], "cancelled");
    let last = crate::read_trace_text(&trace).unwrap().lines().last().unwrap().to_string();
    assert!(last.contains("\"kind\":\"run_finished\"") && last.contains("cancelled"), "{last}");

    // Every report says first that the run was interrupted, and how to finish it.
    let resume = format!("hcbench matrix --resume {}", run_dir.canonicalize().unwrap().display());
    assert_eq!(r["status"], "interrupted");
    assert_eq!(r["resume_command"], resume.as_str());
    assert_eq!(r["verdict"]["exit_code"], 130);
    let banner = r["banner"].as_str().unwrap();
    assert!(banner.starts_with("Interrupted run: 1 of 1 planned cell(s) have no verdict (1 cancelled)"), "{banner}");
    let md = std::fs::read_to_string(run_dir.join("reports/report.md")).unwrap();
    let top: Vec<&str> = md.lines().take(6).collect();
    assert!(
        top.iter().any(|l| l.starts_with("> **Interrupted run") && l.contains(&resume)),
        "the banner and the resume command open report.md:\n{md}"
    );
    let html = crate::report_html(&run_dir.join("reports/report.html"));
    // (tera escapes the slashes of the path, so only the command's words are compared here.)
    assert!(
        html.contains("class=\"banner\" role=\"alert\">Interrupted run:") && html.contains("hcbench matrix --resume ")
    );
    // Re-rendering judges the run as the run judged itself, and the table opens with the banner.
    let table = Test::new().args(&["report"]).arg_path(&run_dir).run().code(130);
    assert!(table.stdout.starts_with("!! Interrupted run:"), "{}", table.stdout);
    assert!(table.stdout.contains("verdict: exit 130 (interrupted)"), "{}", table.stdout);
}

#[test]
fn matrix_rejects_bad_input_before_running_anything() {
    let dir = tempfile::tempdir().unwrap();
    Test::new().args(&["matrix", "--profiles", "oracle,gpt9"]).run().code(2).stderr_has("unknown profile `gpt9`");
    Test::new().args(&["matrix", "--profiles", "oracle,oracle"]).run().code(2).stderr_has("listed twice");
    Test::new().args(&["matrix", "--suite", "nope"]).run().code(2).stderr_has("no suite `nope`");
    Test::new().args(&["matrix", "--case", "bugfix-1", "--split", "test"]).run().code(2).stderr_has("matches no case");
    // An output directory that cannot be created (a file is in the way).
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, "x").unwrap();
    Test::new()
        .args(&["matrix", "--suite", "smoke", "--out"])
        .arg_path(&blocker.join("run"))
        .run()
        .code(2)
        .stderr_has("cannot use run directory");
    Test::new().args(&["report"]).arg_path(dir.path()).run().code(2).stderr_has("not a run directory");
}
