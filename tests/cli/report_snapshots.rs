//! Snapshots (insta) of the reports a user reads after `hcbench matrix`: the terminal table on
//! stdout, and `report.md`, `report.json`, `cells.csv` and `junit.xml` under RUN_DIR/reports.
//! They come from the real binary over a small matrix (three cases in two splits, a passing and
//! a failing profile), so a change to any report's content or layout shows up as a reviewable diff.
//! The terminal summary is taken at its default width (80 columns, stdout being a pipe) and with
//! `--wide`. The long-run layouts (report.md's capped list of cells that did not pass, a
//! 10,000-cell report.md within a PR comment) come from synthetic reports built with the library,
//! since thousands of real cells would take minutes.
//!
//! What differs between runs and machines is redacted before comparing, in the spirit of uv's
//! test filters: the run id, the start time, wall times, and the agent spec's digest (it
//! changes with every edit under `agent/`, which is not a report change). Nothing else in these
//! reports depends on the clock or the machine: the oracle and the scripted nop agent take the
//! same steps every time, and the statistics are exact functions of the outcomes (no resampling,
//! no seeds). `report.html` is checked by
//! tests/cli/html.rs instead: it embeds whole traces, which would make an unreadable snapshot.
//!
//! To accept an intended change: `INSTA_UPDATE=always cargo test --test cli report_snapshots`,
//! then review and commit the `.snap` files (or use `cargo insta review`).

use std::path::Path;

use hcbench::replay::CellSummary;
use hcbench::report::model::from_cells;
use hcbench::rundir::Manifest;
use hcbench::trace::event::Outcome;
use regex::Regex;

use crate::Test;

#[test]
fn matrix_reports_match_their_snapshots() {
    let out = tempfile::tempdir().unwrap();
    let run_dir = out.path().join("run");
    let live = Test::new()
        // Two train cases and a heldout one: the reports break the run down by split.
        .args(&[
            "matrix",
            "--profiles",
            "oracle,nop",
            "--case",
            "bugfix-1",
            "--case",
            "context-1",
            "--case",
            "bugfix-8",
        ])
        .args(&["--out"])
        .arg_path(&run_dir)
        .run()
        .code(0);
    let reports = run_dir.join("reports");
    let files = ["report.md", "report.json", "cells.csv", "junit.xml"];
    let before: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(reports.join(f)).unwrap()).collect();

    insta::assert_snapshot!("terminal", redact_table(&live.stdout));
    assert_fits(&live.stdout, 80);
    insta::assert_snapshot!("report_md", redact_text(&read(&reports, "report.md")));
    insta::assert_snapshot!("report_json", redact_json(&read(&reports, "report.json")));
    insta::assert_snapshot!("cells_csv", redact_csv(&read(&reports, "cells.csv")));
    insta::assert_snapshot!("junit_xml", redact_junit(&read(&reports, "junit.xml")));

    // The same reports come back from the traces alone, byte for byte, and `--wide` prints
    // every column of the same summary.
    let wide = Test::new().args(&["report", "--wide"]).arg_path(&run_dir).run().code(0);
    for (file, bytes) in files.iter().zip(before) {
        assert!(std::fs::read(reports.join(file)).unwrap() == bytes, "`hcbench report` re-renders {file} unchanged");
    }
    insta::assert_snapshot!("terminal_wide", redact_table(&wide.stdout));
    assert!(!wide.stdout.contains("`--wide` adds"), "the wide table leaves nothing out");

    // A narrower terminal gets fewer columns, and still no line wider than it.
    let narrow = Test::new().args(&["report"]).arg_path(&run_dir).env("COLUMNS", "50").run().code(0);
    assert_fits(&narrow.stdout, 50);
    assert!(narrow.stdout.contains("`--wide` adds: coverage, passed, failed, infra"), "{}", narrow.stdout);

    // The replay command in junit.xml's system-out works as written, from the run directory.
    let junit = read(&reports, "junit.xml");
    let replay = junit
        .lines()
        .find_map(|l| l.strip_prefix("replay (from the run directory): hcbench "))
        .expect("a testcase that did not pass says how to replay it");
    let replayed = Test::new().root(&run_dir).args(&replay.split(' ').collect::<Vec<_>>()).run().code(0);
    assert!(replayed.stdout.contains("failed"), "{}", replayed.stdout);
}

/// `run`'s cell table fits 80 columns too: the reason wraps, the least important columns are
/// named, and `--wide` brings them back.
#[test]
fn the_cell_table_of_run_fits_80_columns() {
    let out = tempfile::tempdir().unwrap();
    let run = |extra: &[&str], dir: &str| {
        Test::new()
            .args(&["run", "--profile", "nop", "--case", "bugfix-1", "--case", "context-1", "--out"])
            .arg_path(&out.path().join(dir))
            .args(extra)
            .run()
            .code(1)
    };
    let narrow = run(&[], "narrow");
    assert_fits(&narrow.stdout, 80);
    assert!(narrow.stdout.contains("`--wide` adds: reward, tool calls, denials"), "{}", narrow.stdout);
    let reason: Vec<&str> =
        narrow.stdout.lines().filter_map(|l| l.split('┆').nth(5)).map(|c| c.trim_end_matches('│').trim()).collect();
    assert_eq!(reason[..3], ["reason", "tests failed: 4 required", "test(s) did not pass:…"], "{}", narrow.stdout);
    let wide = run(&["--wide"], "wide");
    assert!(wide.stdout.lines().nth(1).unwrap().contains("┆ reward ┆ steps ┆ tool calls ┆ denials ┆ wall ┆"));
    assert!(wide.stdout.contains("tests failed: 4 required test(s) did not pass:…"), "{}", wide.stdout);
}

/// With several epochs the summary labels pass@k and pass^k with k; with one it shows only the
/// pass rate (the snapshots above), since pass@1 and pass^1 would repeat it.
#[test]
fn epochs_label_pass_at_k_with_k() {
    let out = tempfile::tempdir().unwrap();
    let run_dir = out.path().join("run");
    let live = Test::new()
        .args(&["matrix", "--profiles", "oracle", "--case", "bugfix-1", "--epochs", "2", "--out"])
        .arg_path(&run_dir)
        .env("COLUMNS", "120")
        .run()
        .code(0);
    let header = live.stdout.lines().nth(1).unwrap();
    assert!(header.contains("┆ pass@2 ┆ pass^2 ┆"), "{header}");
    let md = read(&run_dir.join("reports"), "report.md");
    assert!(md.contains("| infra errors | pass@2 | pass^2 |"), "{md}");
    assert!(md.contains("pass@2 is the chance that at least one of k attempts"));
    let one = Test::new().args(&["report", "--wide"]).arg_path(&run_dir).run().code(0);
    assert!(one.stdout.contains("pass@2"));
}

/// No line of `text` is wider than `columns` (every character here is one column wide).
fn assert_fits(text: &str, columns: usize) {
    for line in text.lines() {
        assert!(line.chars().count() <= columns, "wider than {columns} columns: {line:?}\n{text}");
    }
}

/// A synthetic matrix report: profiles x cases cells, each outcome and reason given by `cell`.
fn synthetic(
    profiles: &[&str],
    cases: usize,
    cell: impl Fn(usize, usize) -> (Option<Outcome>, String),
) -> hcbench::report::model::MatrixReport {
    let categories = ["bugfix", "recovery", "greenfield", "context"];
    let manifest: Manifest = serde_json::from_value(serde_json::json!({
        "schema_version": 1,
        "run_id": "synthetic",
        "hcbench_version": "0.0.0",
        "command": "matrix",
        "benchmark": "synthetic",
        "profiles": profiles,
        "cases": (0..cases)
            .map(|i| serde_json::json!({"id": format!("case-{i}"), "category": categories[i % 4], "split": "train"}))
            .collect::<Vec<_>>(),
        "epochs": 1,
        "jobs": 1,
        "started_at": "2026-11-24T00:00:00Z",
    }))
    .expect("a manifest");
    let mut cells = Vec::new();
    for i in 0..cases {
        for (p, profile) in profiles.iter().enumerate() {
            let (outcome, reason) = cell(p, i);
            cells.push(CellSummary {
                run_id: "synthetic".into(),
                cell_id: format!("case-{i}__{profile}"),
                case_id: format!("case-{i}").into(),
                category: categories[i % 4].into(),
                split: "train".into(),
                profile: profile.to_string().into(),
                epoch: 1,
                outcome,
                reason: reason.into(),
                ..Default::default()
            });
        }
    }
    from_cells(&manifest, Path::new("/runs/synthetic"), cells, Vec::new(), Vec::new())
}

/// report.md of a run with 230 cells that did not pass: the counts by class, the most common
/// reasons, 50 open rows sorted by class, 150 folded in `<details>`, and the rest counted;
/// reasons cut at words, and text that would break the table or the fold escaped.
#[test]
fn report_md_caps_the_cells_that_did_not_pass() {
    let report = synthetic(&["oracle", "gpt"], 240, |p, i| {
        match (p, i % 24) {
        (0, _) | (_, 0) => (Some(Outcome::Passed), String::new()),
        (_, 1..=3) => (
            Some(Outcome::ProviderError),
            "model call failed: error sending request for url (http://127.0.0.1:9/v1/chat/completions): dns error: failed to lookup address information; check `base_url`".into(),
        ),
        (_, 4) => (Some(Outcome::Timeout), "tests exceeded 60 s".into()),
        (_, 5) if i < 24 => (
            Some(Outcome::Failed),
            format!("{} | a pipe, a\nnewline and </details> in the reason", "the agent rewrote the parser but ".repeat(12)),
        ),
        _ => (Some(Outcome::Failed), format!("tests failed: test_{i} (failed)")),
    }
    });
    let md = hcbench::report::markdown::render(&report);
    assert!(md.contains("<details><summary>"), "the rest is folded");
    assert_eq!(md.matches("</details>").count(), 1, "a reason cannot close the fold");
    insta::assert_snapshot!("report_md_capped", md);
}

/// 10,000 cells, nearly all not passing, with long reasons that differ cell by cell: report.md
/// stays under 60,000 characters, a PR comment's size, and every cell that did not pass is
/// either listed or counted.
#[test]
fn report_md_of_10000_cells_fits_a_pr_comment() {
    let words = ["traceback", "assertion", "failed", "in", "module", "parse_config", "expected", "got", "None"];
    let long = |n: usize| (0..400).map(|k| words[(n + k) % words.len()]).collect::<Vec<_>>().join(" ");
    let report = synthetic(&["oracle", "gpt", "deepseek", "local"], 2_500, |p, i| match (p, i % 5) {
        (0, 0) => (Some(Outcome::Passed), String::new()),
        (_, 1) => (Some(Outcome::ProviderError), format!("provider said 500 | {}", long(i))),
        (_, 2) => (Some(Outcome::Timeout), format!("<timeout>\n{}", long(i + p))),
        _ => (Some(Outcome::Failed), format!("case-{i}: {}", long(i * 7 + p))),
    });
    let started = std::time::Instant::now();
    let md = hcbench::report::markdown::render(&report);
    let took = started.elapsed();
    let chars = md.chars().count();
    eprintln!(
        "report.md of {} cells ({} not passing): {chars} characters, {} bytes, rendered in {took:?}",
        report.cells.len(),
        report.failing.len(),
        md.len()
    );
    assert!(chars < 60_000, "{chars} characters");

    let failing: std::collections::BTreeMap<&str, &str> =
        report.failing.iter().map(|f| (f.cell_id.as_str(), f.reason.as_str())).collect();
    assert!(md.contains(&format!("## Cells that did not pass ({})", failing.len())));
    let mut listed = std::collections::BTreeSet::new();
    for line in md.lines().filter(|l| l.starts_with("| `")) {
        let id = line.split('`').nth(1).unwrap();
        assert!(listed.insert(id), "{id} listed twice");
        // The reason is whole or cut after a whole word.
        let shown = line.rsplit(" | ").next().unwrap().trim_end_matches(" |");
        let full = failing[id].replace('|', "\\|").replace('\n', " ").replace('<', "&lt;");
        match shown.strip_suffix('…') {
            Some(head) => {
                assert!(full.starts_with(head), "{id}: {shown:?} is a cut of its reason");
                assert!(full[head.len()..].starts_with(' '), "{id}: cut at a word: {shown:?}");
            }
            None => assert_eq!(shown, full),
        }
    }
    let counted: usize = Regex::new(r"(?m)^(\d+) more cell\(s\) that did not pass are not listed here")
        .unwrap()
        .captures(&md)
        .map_or(0, |c| c[1].parse().unwrap());
    assert_eq!(listed.len() + counted, failing.len(), "every cell that did not pass is listed or counted");
    assert!(listed.len() >= 50, "the open list is not starved by the budget: {} listed", listed.len());
}

fn read(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// Run ids (`20261123t064245z-18217`), RFC 3339 times and wall times (`2.2s`), wherever they
/// appear.
fn redact_text(text: &str) -> String {
    let run_id = Regex::new(r"\b\d{8}t\d{6}z-\d+\b").unwrap();
    let time = Regex::new(r"\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z").unwrap();
    let seconds = Regex::new(r"\b\d+\.\ds\b").unwrap();
    // The sandbox's version is the machine's.
    let sandbox = Regex::new(r"\bbubblewrap \d+(\.\d+)*").unwrap();
    let text = sandbox.replace_all(text, "bubblewrap [version]");
    let text = run_id.replace_all(&text, "[run-id]");
    let text = time.replace_all(&text, "[time]");
    seconds.replace_all(&text, "[secs]").into_owned()
}

/// Like [`redact_text`], but keeps the table's columns aligned: each wall time and the padding
/// before it become `[secs]` right-aligned to the same width. The wall columns are as wide as
/// their headers ("wall p50", 8 characters; a time needs 6 up to 999.9 s), so the width does
/// not depend on the times.
fn redact_table(table: &str) -> String {
    // Times are right-aligned: the padding before them varies with their length.
    let seconds = Regex::new(r" *\b\d+\.\ds ").unwrap();
    let table = seconds.replace_all(table, |c: &regex::Captures| format!("{:>1$}", "[secs] ", c[0].len()));
    redact_text(&table)
}

/// Every `*_ms` field, the agent spec's digest, the run id and the start time. The file's own
/// text is compared, not a re-serialization, so the field order a reader sees is checked too.
fn redact_json(text: &str) -> String {
    let millis = Regex::new(r#""(\w+_ms)":( ?)\d+"#).unwrap();
    let digest = Regex::new(r#""agent_spec":( ?)"[0-9a-f]{64}""#).unwrap();
    let text = millis.replace_all(text, r#""$1":$2"[ms]""#);
    let text = digest.replace_all(&text, r#""agent_spec":$1"[digest]""#);
    let sandbox = Regex::new(r#"("mechanism":\s*"bubblewrap",\s*"version":\s*)"[^"]*""#).unwrap();
    let text = sandbox.replace_all(&text, r#"$1"[version]""#);
    // A traceback in a tool's output names the workspace's absolute path, whose length follows
    // the run id (it holds a pid), so the context's size varies by a few tokens between runs.
    // Checked for being there and positive, then redacted.
    let tokens = Regex::new(r#""context_tokens":( ?)(\d+)"#).unwrap();
    assert!(tokens.captures_iter(&text).all(|c| c[2].parse::<u64>().unwrap() > 0), "every cell packs a context");
    assert!(tokens.is_match(&text), "report.json gives each cell's context_tokens");
    let text = tokens.replace_all(&text, r#""context_tokens":$1"[tokens]""#);
    let redacted = redact_text(&text);
    serde_json::from_str::<serde_json::Value>(&redacted).expect("report.json stays JSON after redaction");
    redacted
}

/// The `wall_ms` column, by name, so a reordered header still redacts the right column.
fn redact_csv(text: &str) -> String {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let header = reader.headers().unwrap().clone();
    let wall = header.iter().position(|h| h == "wall_ms").expect("a wall_ms column");
    let mut writer = csv::Writer::from_writer(Vec::new());
    writer.write_record(&header).unwrap();
    for row in reader.records() {
        let row = row.unwrap();
        writer.write_record(row.iter().enumerate().map(|(i, f)| if i == wall { "[ms]" } else { f })).unwrap();
    }
    redact_text(&String::from_utf8(writer.into_inner().unwrap()).unwrap())
}

/// Each test case's `time="…"` (seconds) and any timestamp.
fn redact_junit(xml: &str) -> String {
    let time = Regex::new(r#"\btime="[0-9.]+""#).unwrap();
    redact_text(&time.replace_all(xml, r#"time="[secs]""#))
}
