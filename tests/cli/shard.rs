//! `--shard K/N` and `hcbench merge`: shards of one plan merge into a run whose reports equal
//! an unsharded run's (apart from run ids and times); an interrupted shard resumes and merges;
//! shards that do not make one plan are refused, naming what differs.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::{BIN, Test};

fn manifest(run_dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(run_dir.join("manifest.json")).unwrap()).unwrap()
}

/// A report file with what legitimately differs between two runs of one plan masked: the run
/// ids (`ids`), timestamps, and every duration (JSON `*_ms` fields, the CSV's `wall_ms`
/// column, JUnit `time`, and `0.8s`-style times in text, test output included).
fn normalized(path: &Path, ids: &BTreeSet<String>, resumed: bool) -> String {
    let mut text = crate::report_html(path);
    for id in ids {
        text = text.replace(id.as_str(), "RUN");
    }
    if path.extension().is_some_and(|e| e == "csv") {
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        let wall = header.iter().position(|h| *h == "wall_ms").expect("cells.csv has wall_ms");
        let mut out = vec![header.join(",")];
        for line in lines {
            let mut fields: Vec<String> = line.split(',').map(str::to_string).collect();
            fields[wall] = "T".into();
            out.push(fields.join(","));
        }
        return out.join("\n");
    }
    let masks = [
        (r#"("[a-z0-9_]*_ms"\s*:\s*)[0-9.]+"#, "${1}T"),
        (r#"("started_at"\s*:\s*)"[^"]*""#, "${1}T"),
        (r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", "TIME"),
        (r#"time="[0-9.]+""#, r#"time="T""#),
        (r"\b\d+(\.\d+)?(s|ms)\b", "Ts"),
        // What a cell's commands printed (test output, with temporary folder names, object
        // addresses and timings) differs between any two runs of the same cell; only the
        // HTML timelines quote it. Everything hcbench derives from it is compared.
        (r#"(?s)<pre class="out">.*?</pre>"#, r#"<pre class="out">OUTPUT</pre>"#),
        (r"\(\d+ bytes of output\)", "(N bytes of output)"),
        // ... and so, now and then, the size of the context the next turn sent, which counts
        // that output (one cell in a few hundred runs differed by 21 of 17,000 tokens).
        (r#"("context_tokens"\s*:\s*)\d+"#, "${1}N"),
    ];
    for (pattern, with) in masks {
        text = regex::Regex::new(pattern).unwrap().replace_all(&text, with).into_owned();
    }
    if resumed {
        // The interrupted cell has one event more: `resumed` when it continued from its
        // checkpoint (and says so in `resumes`), `resume_refused` when it had none yet.
        for pattern in
            [r#"\s*"(resumes|resumed|resume_refused)":\s*\d+,"#, r#",\s*"(resumes|resumed|resume_refused)":\s*\d+"#]
        {
            text = regex::Regex::new(pattern).unwrap().replace_all(&text, "").into_owned();
        }
        text = regex::Regex::new(r#""events":\s*\d+"#).unwrap().replace_all(&text, r#""events": N"#).into_owned();
    }
    text
}

/// Asserts every report of `merged` equals `full`'s but for run ids and times (and, with
/// `resumed`, the resume count and event count of cells continued from a checkpoint).
fn assert_same_reports(full: &Path, merged: &Path, shards: &[PathBuf], resumed: bool) {
    let ids: BTreeSet<String> = std::iter::once(full)
        .chain(std::iter::once(merged))
        .chain(shards.iter().map(PathBuf::as_path))
        .map(|d| manifest(d)["run_id"].as_str().unwrap().to_string())
        .collect();
    // The interrupted cell's timeline in report.html shows its interruption (`resumed` or
    // `resume_refused` entries) where an uninterrupted run's cannot: with `resumed` the HTML is
    // left to the test of uninterrupted shards.
    let names: &[&str] = if resumed {
        &["report.md", "report.json", "cells.csv", "junit.xml"]
    } else {
        &["report.md", "report.json", "cells.csv", "junit.xml", "report.html"]
    };
    for name in names {
        let (a, b) = (
            normalized(&full.join("reports").join(name), &ids, resumed),
            normalized(&merged.join("reports").join(name), &ids, resumed),
        );
        if a != b {
            let line = a.lines().zip(b.lines()).position(|(x, y)| x != y).unwrap_or(0);
            panic!(
                "{name} of the merged run differs from the unsharded run's at line {}:\n  unsharded: {}\n  merged:    {}",
                line + 1,
                a.lines().nth(line).unwrap_or(""),
                b.lines().nth(line).unwrap_or("")
            );
        }
    }
}

fn matrix(out: &Path, extra: &[&str]) -> Test {
    Test::new().args(&["matrix", "--profiles", "oracle,nop", "--epochs", "2", "--out"]).arg_path(out).args(extra)
}

#[test]
fn shards_of_hc_bench_merge_into_the_unsharded_run_for_1_2_3_and_7_parts() {
    let dir = tempfile::tempdir().unwrap();
    let full = dir.path().join("full");
    matrix(&full, &[]).run().code(0);
    let cases = manifest(&full)["cases"].as_array().unwrap().len();
    assert!(cases >= 40, "the whole of HC-Bench: {cases} cases");
    let planned = cases * 2 * 2;
    let history = dir.path().join("history");

    let mut merges = 0;
    for n in [1u32, 2, 3, 7] {
        let shards: Vec<PathBuf> = (1..=n).map(|k| dir.path().join(format!("n{n}-s{k}"))).collect();
        let mut cells = 0;
        for (k, shard) in (1..=n).zip(&shards) {
            let out = matrix(shard, &["--shard", &format!("{k}/{n}"), "--history"])
                .arg_path(&history)
                .run()
                .code(0)
                .stderr_has(&format!("shard {k}/{n}: not added to the results history"));
            let m = manifest(shard);
            assert_eq!(m["shard"], serde_json::json!({"index": k, "count": n}), "{}", out.stderr);
            assert_eq!(m["plan_digest"], manifest(&full)["plan_digest"], "one plan, one digest");
            let report: Value =
                serde_json::from_str(&std::fs::read_to_string(shard.join("reports/report.json")).unwrap()).unwrap();
            let here = report["cells"].as_array().unwrap();
            // Every shard gets its share of both profiles, and its report covers its part only.
            for p in ["oracle", "nop"] {
                assert!(here.iter().any(|c| c["profile"] == p), "shard {k}/{n} has no {p} cell");
            }
            assert_eq!(report["status"], "complete");
            cells += here.len();
        }
        assert_eq!(cells, planned, "{n} shards hold every cell once");
        let in_history = || std::fs::read_dir(&history).map_or(0, |d| d.count());
        assert_eq!(in_history(), merges, "shards append nothing to the history");

        let merged = dir.path().join(format!("merged-{n}"));
        let mut args = vec!["merge".to_string(), merged.to_string_lossy().into_owned()];
        // In any order.
        args.extend(shards.iter().rev().map(|s| s.to_string_lossy().into_owned()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Test::new()
            .args(&args)
            .args(&["--history"])
            .arg_path(&history)
            .run()
            .code(0)
            .stderr_has(&format!("merged {n} shard run(s) of {n}"))
            .stderr_has(&format!("{planned} of {planned} planned cell(s) have a result"));
        merges += 1;
        assert_eq!(in_history(), merges, "the merged run is appended once");
        assert_same_reports(&full, &merged, &shards, false);
        let m = manifest(&merged);
        assert!(m.get("shard").is_none());
        assert_eq!(m["merged_from"].as_array().unwrap().len(), n as usize);
        // `hcbench replay` reads each trace as its shard's (run ids differ between shards).
        let replayed = Test::new().args(&["replay", "--format", "json"]).arg_path(&merged).run().code(0).json();
        assert_eq!(replayed.as_array().unwrap().len(), planned, "every cell of the merged run replays");
        // `hcbench report` re-renders the merged run from its traces to the same bytes.
        let before = std::fs::read(merged.join("reports/report.json")).unwrap();
        Test::new().args(&["report"]).arg_path(&merged).run().code(0);
        assert_eq!(before, std::fs::read(merged.join("reports/report.json")).unwrap());
    }
}

#[test]
fn an_interrupted_shard_resumes_and_then_merges_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let smoke = ["--suite", "smoke"];
    let full = dir.path().join("full");
    matrix(&full, &smoke).run().code(0);
    let (s1, s2) = (dir.path().join("s1"), dir.path().join("s2"));
    matrix(&s1, &["--suite", "smoke", "--shard", "1/2"]).run().code(0);

    // Shard 2 is interrupted once its first cell runs.
    let mut child = Command::new(BIN)
        .args([
            "matrix",
            "--profiles",
            "oracle,nop",
            "--epochs",
            "2",
            "--suite",
            "smoke",
            "--shard",
            "2/2",
            "--jobs",
            "1",
            // A checkpoint after every step, so the interrupted cell may continue from one.
            "--checkpoint-interval",
            "0",
        ])
        .arg("--out")
        .arg(&s2)
        .current_dir(crate::repo_root())
        .env("HCBENCH_HISTORY", dir.path().join("history"))
        .env("HCBENCH_WORKSPACES", dir.path().join("ws"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let first = loop {
        let found = std::fs::read_dir(s2.join("cells")).ok().and_then(|d| d.flatten().next()).map(|e| e.path());
        if let Some(cell) = found {
            break cell.join("trace.jsonl");
        }
        assert!(Instant::now() < deadline, "shard 2 never started a cell");
        std::thread::sleep(Duration::from_millis(20));
    };
    crate::interrupt_once_running(&child, &first);
    assert_eq!(child.wait().unwrap().code(), Some(130));

    // Unfinished, it does not merge; the error names a missing cell and both ways on.
    let merged = dir.path().join("merged");
    let out = Test::new().args(&["merge"]).arg_path(&merged).arg_path(&s1).arg_path(&s2).run().code(2);
    assert!(out.stderr.contains("planned cell(s) have no result"), "{}", out.stderr);
    assert!(
        out.stderr.contains("matrix --resume SHARD_DIR") && out.stderr.contains("--allow-partial"),
        "{}",
        out.stderr
    );
    assert!(!merged.join("manifest.json").exists(), "a refused merge writes nothing");

    // With --allow-partial it merges what exists and says how much is missing.
    let partial = dir.path().join("partial");
    let out = Test::new().args(&["merge", "--allow-partial"]).arg_path(&partial).arg_path(&s1).arg_path(&s2).run();
    assert_eq!(out.code, 4, "coverage below the run's --min-coverage\n{}\n{}", out.stdout, out.stderr);
    let md = std::fs::read_to_string(partial.join("reports/report.md")).unwrap();
    assert!(md.contains("planned cell(s) have no verdict"), "{md}");
    assert!(md.contains("for each shard that did not finish, then `hcbench merge"), "{md}");
    // A merged run is not resumed: its shards are.
    Test::new()
        .args(&["matrix", "--resume"])
        .arg_path(&partial)
        .run()
        .code(2)
        .stderr_has("was made by `hcbench merge` and cannot be resumed");

    matrix_resume(&s2);
    let merged = dir.path().join("merged-after-resume");
    Test::new().args(&["merge"]).arg_path(&merged).arg_path(&s1).arg_path(&s2).run().code(0);
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(merged.join("reports/report.json")).unwrap()).unwrap();
    let resumed = report["cells"].as_array().unwrap().iter().filter(|c| c["resumes"] == 1).count();
    // Whether the cell interrupted mid-step had its checkpoint yet is a race with the Ctrl-C:
    // it continued from it, or (none written yet) started over.
    assert!(resumed <= 1, "only the interrupted cell can have resumed: {resumed}");
    assert_same_reports(&full, &merged, &[s1, s2], true);
}

fn matrix_resume(run_dir: &Path) {
    Test::new().args(&["matrix", "--resume"]).arg_path(run_dir).run().code(0);
}

#[test]
fn shards_that_are_not_one_plan_or_not_one_split_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str, args: &[&str]| {
        let out = dir.path().join(name);
        Test::new()
            .args(&[
                "matrix",
                "--profiles",
                "oracle",
                "--case",
                "bugfix-1",
                "--case",
                "bugfix-2",
                "--case",
                "bugfix-3",
                "--out",
            ])
            .arg_path(&out)
            .args(args)
            .run()
            .code(0);
        out
    };
    let a1 = run("a1", &["--shard", "1/2"]);
    let a2 = run("a2", &["--shard", "2/2"]);
    let other_epochs = run("e2", &["--shard", "2/2", "--epochs", "2"]);
    let other_n = run("n3", &["--shard", "2/3"]);
    let whole = run("whole", &[]);
    let merge = |name: &str, shards: &[&Path]| {
        let mut t = Test::new().args(&["merge"]).arg_path(&dir.path().join(name));
        for s in shards {
            t = t.arg_path(s);
        }
        t.run()
    };
    merge("x1", &[&a1, &other_epochs])
        .code(2)
        .stderr_has("is of another plan than")
        .stderr_has("`epochs` is 2 there and 1");
    merge("x2", &[&a1, &other_n]).code(2).stderr_has("`shard count` is 3 there and 2");
    merge("x3", &[&a1, &whole]).code(2).stderr_has("is not a shard: its manifest has no `shard`");
    merge("x4", &[&a1, &a1]).code(2).stderr_has("shard 1/2 is given twice");
    merge("x5", &[&a1]).code(2).stderr_has("shard(s) 2/2 not given");
    // A cell copied into a shard that does not own it (shard 2 in the layout before the pack).
    hcbench::trace::stored::unpack(&a2, false).unwrap();
    let stray = std::fs::read_dir(a2.join("cells")).unwrap().flatten().next().unwrap();
    let copied = a1.join("cells").join(stray.file_name());
    std::fs::create_dir_all(&copied).unwrap();
    std::fs::write(copied.join("trace.jsonl"), crate::read_trace_bytes(stray.path().join("trace.jsonl")).unwrap())
        .unwrap();
    merge("x6", &[&a1, &a2]).code(2).stderr_has("but the plan gives it to shard 2/2");
    std::fs::remove_dir_all(&copied).unwrap();
    merge("ok", &[&a2, &a1]).code(0);
    // Merging into a folder that holds a run is refused like any --out.
    merge("ok", &[&a2, &a1]).code(2).stderr_has("already holds a run");
}

#[test]
fn shard_flags_are_checked_and_auto_reads_the_job_engine() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    for (bad, says) in [
        ("0/3", "K counts from 1"),
        ("4/3", "K may be at most N"),
        ("two/3", "is not K/N"),
        ("auto", "--shard auto found no shard in the environment"),
    ] {
        Test::new()
            .args(&["run", "--suite", "smoke", "--shard", bad, "--out"])
            .arg_path(&out)
            // Whatever job engine runs the tests, none is seen (an empty variable is unset).
            .env("SLURM_ARRAY_TASK_ID", "")
            .env("JOB_COMPLETION_INDEX", "")
            .env("HCBENCH_SHARD_INDEX", "")
            .env("HCBENCH_SHARD_COUNT", "")
            .run()
            .code(2)
            .stderr_has(says);
        assert!(!out.exists(), "nothing is written on bad input");
    }
    // A Slurm array task 4 of tasks 3..=4 is shard 2/2; `run` takes --shard too.
    Test::new()
        .args(&["run", "--suite", "smoke", "--shard", "auto", "--out"])
        .arg_path(&out)
        .env("SLURM_ARRAY_TASK_ID", "4")
        .env("SLURM_ARRAY_TASK_MIN", "3")
        .env("SLURM_ARRAY_TASK_COUNT", "2")
        .run()
        .code(0);
    assert_eq!(manifest(&out)["shard"], serde_json::json!({"index": 2, "count": 2}));
    let k8s = dir.path().join("k");
    Test::new()
        .args(&["matrix", "--suite", "smoke", "--shard", "auto", "--no-history", "--out"])
        .arg_path(&k8s)
        .env("JOB_COMPLETION_INDEX", "0")
        .env("HCBENCH_SHARD_COUNT", "")
        .run()
        .code(2)
        .stderr_has("HCBENCH_SHARD_COUNT is not");
}
