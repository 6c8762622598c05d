//! The results history and `hcbench trend` as a nightly job uses them: runs append to the
//! history, older runs are imported, trend reads it, flags what changed and exits by it, and
//! bad history files are reported without losing anything.

use std::path::{Path, PathBuf};

use hcbench::history::{HISTORY_SCHEMA_VERSION, HistoryRow, write_rows};
use serde_json::Value;

use crate::Test;

fn csv_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "csv")).collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

fn smoke_run(history: &Path, out: &Path) {
    Test::new()
        .args(&["matrix", "--profiles", "oracle,nop", "--suite", "smoke", "--out"])
        .arg_path(out)
        .env("HCBENCH_HISTORY", &history.to_string_lossy())
        .run()
        .code(0)
        .stderr_has("appended 10 cell(s) to");
}

#[test]
fn matrix_runs_append_to_the_history_and_trend_reads_them() {
    let tmp = tempfile::tempdir().unwrap();
    let history = tmp.path().join("history");
    for i in 0..3 {
        smoke_run(&history, &tmp.path().join(format!("run{i}")));
    }
    let files = csv_files(&history);
    assert_eq!(files.len(), 3, "one file per run");
    let text = std::fs::read_to_string(&files[0]).unwrap();
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let rows: Vec<HistoryRow> = reader.deserialize().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 10);
    let r = &rows[0];
    assert_eq!((r.schema, r.command.as_str(), r.benchmark.as_str()), (HISTORY_SCHEMA_VERSION, "matrix", "hc-bench"));
    assert_eq!(r.git_commit.len(), 40, "the checkout's commit: {r:?}");
    assert!(r.git_dirty.is_some());
    assert_eq!(r.benchmark_digest.len(), 64);
    assert!(rows.iter().any(|r| r.profile == "oracle" && r.outcome == "passed"));
    assert!(rows.iter().any(|r| r.profile == "nop" && r.outcome == "failed"));

    let out = tmp.path().join("trend");
    let done = Test::new()
        .args(&["trend", "--format", "json", "--history"])
        .arg_path(&history)
        .args(&["--out"])
        .arg_path(&out)
        .run()
        .code(0);
    let report = done.json();
    assert_eq!(report["runs"].as_array().unwrap().len(), 3);
    assert_eq!(report["rows"], 30);
    let labels: Vec<&str> =
        report["series"].as_array().unwrap().iter().map(|s| s["profile"].as_str().unwrap()).collect();
    assert_eq!(labels, ["nop", "oracle"]);
    // Deterministic profiles: nothing changed, nothing is flaky.
    assert_eq!(report["verdict"]["regressions"], 0);
    assert_eq!(report["verdict"]["flaky"], 0);
    for f in ["trend.json", "trend.md", "trend.html"] {
        assert!(out.join(f).is_file(), "{f} written");
    }
    let json: Value = serde_json::from_slice(&std::fs::read(out.join("trend.json")).unwrap()).unwrap();
    assert_eq!(json["runs"], report["runs"]);
}

#[test]
fn an_imported_run_gives_the_rows_the_run_appended() {
    let tmp = tempfile::tempdir().unwrap();
    let live = tmp.path().join("live");
    smoke_run(&live, &tmp.path().join("run"));
    let imported = tmp.path().join("imported");
    Test::new()
        .args(&["history", "import"])
        .arg_path(&tmp.path().join("run"))
        .args(&["--history"])
        .arg_path(&imported)
        .run()
        .code(0)
        .stderr_has("imported 10 cell(s)");
    let (a, b) = (csv_files(&live), csv_files(&imported));
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].file_name(), b[0].file_name(), "same file name: importing twice replaces it");
    assert_eq!(std::fs::read_to_string(&a[0]).unwrap(), std::fs::read_to_string(&b[0]).unwrap());

    // Not a run directory: a clear error, exit 2.
    Test::new()
        .args(&["history", "import"])
        .arg_path(tmp.path())
        .args(&["--history"])
        .arg_path(&imported)
        .run()
        .code(2)
        .stderr_has("is not a run directory");
}

#[test]
fn no_history_appends_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let history = tmp.path().join("history");
    Test::new()
        .args(&["matrix", "--profiles", "oracle", "--case", "bugfix-1", "--no-history", "--out"])
        .arg_path(&tmp.path().join("run"))
        .env("HCBENCH_HISTORY", &history.to_string_lossy())
        .run()
        .code(0);
    assert!(!history.exists());
}

fn row(run: usize, case: usize, profile: &str, pass: bool) -> HistoryRow {
    HistoryRow {
        schema: HISTORY_SCHEMA_VERSION,
        run_id: format!("night{run:02}"),
        started_at: format!("2026-11-{:02}T02:00:00Z", run + 1),
        command: "matrix".into(),
        git_commit: format!("{run:02}aaaaaaaaaaaaaaaa"),
        git_dirty: Some(false),
        hcbench_version: "0.1.0".into(),
        benchmark: "hc-bench".into(),
        benchmark_digest: "d".into(),
        cell_id: format!("case{case}__{profile}"),
        case_id: format!("case{case}"),
        category: "bugfix".into(),
        split: "test".into(),
        profile: profile.into(),
        provider: "openai-chat".into(),
        model: "m".into(),
        ablation: String::new(),
        epoch: 1,
        outcome: if pass { "passed" } else { "failed" }.into(),
        reward: f64::from(u8::from(pass)),
        input_tokens: 10,
        output_tokens: 1,
        cost_usd: Some(0.001),
        wall_ms: 100,
    }
}

/// Nightly history of 6 runs x 30 cases of `gpt`; in the last run it loses cases 10..25.
fn write_history(dir: &Path) {
    for run in 0..6 {
        let rows: Vec<HistoryRow> =
            (0..30).map(|case| row(run, case, "gpt", case < if run == 5 { 10 } else { 25 })).collect();
        write_rows(&dir.join(format!("2026-11-{:02}--night{run:02}.csv", run + 1)), &rows).unwrap();
    }
}

#[test]
fn fail_on_regression_exits_7_and_names_the_commit() {
    let tmp = tempfile::tempdir().unwrap();
    write_history(tmp.path());
    let out = tmp.path().join("out");
    let args = |extra: &[&str]| {
        let mut t = Test::new().args(&["trend", "--history"]).arg_path(tmp.path()).args(&["--out"]).arg_path(&out);
        t = t.args(extra);
        t.run()
    };
    let done = args(&["--fail-on-regression"]).code(7);
    assert!(done.stdout.contains("REGRESSION: gpt -50.0 points at 05aaaaaaaa"), "{}", done.stdout);
    // Without the flag the report is the same and the job goes on.
    args(&[]).code(0);
    let json: Value = serde_json::from_slice(&std::fs::read(out.join("trend.json")).unwrap()).unwrap();
    assert_eq!(json["regressions"][0]["flagged"], true);
    assert_eq!(json["regressions"][0]["window_commits"][0], "00aaaaaaaaaaaaaaaa");
    // A profile filter that leaves the regression out passes.
    Test::new()
        .args(&["trend", "--fail-on-regression", "--profiles", "oracle", "--history"])
        .arg_path(tmp.path())
        .args(&["--out"])
        .arg_path(&out)
        .run()
        .code(2)
        .stderr_has("no runs matching the filters");
}

#[test]
fn bad_history_files_are_reported_not_fatal_and_a_newer_schema_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    write_history(tmp.path());
    let out = tmp.path().join("out");
    // A cut last line and a foreign CSV: skipped, counted, warned; trend still runs.
    let last = tmp.path().join("2026-11-06--night05.csv");
    let text = std::fs::read_to_string(&last).unwrap();
    std::fs::write(&last, &text[..text.len() - 40]).unwrap();
    std::fs::write(tmp.path().join("scores.csv"), "team,score\nred,3\n").unwrap();
    let done =
        Test::new().args(&["trend", "--history"]).arg_path(tmp.path()).args(&["--out"]).arg_path(&out).run().code(0);
    assert!(done.stderr.contains("night05.csv: skipped 1 row(s)"), "{}", done.stderr);
    assert!(done.stderr.contains("scores.csv: skipped 1 row(s)"), "{}", done.stderr);
    let json: Value = serde_json::from_slice(&std::fs::read(out.join("trend.json")).unwrap()).unwrap();
    assert_eq!(json["skipped_rows"], 2);
    assert_eq!(json["rows"], 179);

    // A file written by a newer hcbench: exit 2 naming the file, and trend.json is untouched.
    let before = std::fs::read(out.join("trend.json")).unwrap();
    let mut newer = row(9, 0, "gpt", true);
    newer.schema = HISTORY_SCHEMA_VERSION + 1;
    write_rows(&tmp.path().join("2026-11-20--night09.csv"), &[newer]).unwrap();
    Test::new()
        .args(&["trend", "--history"])
        .arg_path(tmp.path())
        .args(&["--out"])
        .arg_path(&out)
        .run()
        .code(2)
        .stderr_has("night09.csv row 1 has history schema 2, newer than this hcbench reads (1); upgrade hcbench");
    assert_eq!(std::fs::read(out.join("trend.json")).unwrap(), before, "nothing already written is lost");
}

#[test]
fn an_empty_history_says_what_to_run_first() {
    let tmp = tempfile::tempdir().unwrap();
    Test::new()
        .args(&["trend", "--history"])
        .arg_path(&tmp.path().join("none"))
        .run()
        .code(2)
        .stderr_has("has no runs; run `hcbench matrix`");
    Test::new()
        .args(&["trend", "--since", "a while", "--history"])
        .arg_path(tmp.path())
        .run()
        .code(2)
        .stderr_has("--since \"a while\"");
}
