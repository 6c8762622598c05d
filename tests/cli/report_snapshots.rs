//! Snapshots (insta) of the reports a user reads after `hcbench matrix`: the terminal table on
//! stdout, and `report.md`, `report.json`, `cells.csv` and `junit.xml` under RUN_DIR/reports.
//! They come from the real binary over a small matrix (three cases in two splits, a passing and
//! a failing profile), so a change to any report's content or layout shows up as a reviewable diff.
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
    insta::assert_snapshot!("report_md", redact_text(&read(&reports, "report.md")));
    insta::assert_snapshot!("report_json", redact_json(&read(&reports, "report.json")));
    insta::assert_snapshot!("cells_csv", redact_csv(&read(&reports, "cells.csv")));
    insta::assert_snapshot!("junit_xml", redact_junit(&read(&reports, "junit.xml")));

    // The same reports come back from the traces alone, byte for byte.
    Test::new().args(&["report"]).arg_path(&run_dir).run().code(0);
    for (file, bytes) in files.iter().zip(before) {
        assert!(std::fs::read(reports.join(file)).unwrap() == bytes, "`hcbench report` re-renders {file} unchanged");
    }
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
/// after it become `[secs]` padded to the same width. The wall columns are as wide as their
/// headers ("wall p50", 8 characters; a time needs 6 up to 999.9 s), so the width does not
/// depend on the times.
fn redact_table(table: &str) -> String {
    let seconds = Regex::new(r"\b\d+\.\ds *").unwrap();
    let table = seconds.replace_all(table, |c: &regex::Captures| format!("{:<1$}", "[secs]", c[0].len()));
    redact_text(&table)
}

/// Every `*_ms` field, the agent spec's digest, the run id and the start time. The file's own
/// text is compared, not a re-serialization, so the field order a reader sees is checked too.
fn redact_json(text: &str) -> String {
    let millis = Regex::new(r#""(\w+_ms)": \d+"#).unwrap();
    let digest = Regex::new(r#""agent_spec": "[0-9a-f]{64}""#).unwrap();
    let text = millis.replace_all(text, r#""$1": "[ms]""#);
    let text = digest.replace_all(&text, r#""agent_spec": "[digest]""#);
    let sandbox = Regex::new(r#"("mechanism": "bubblewrap",\s*"version": )"[^"]*""#).unwrap();
    let text = sandbox.replace_all(&text, r#"$1"[version]""#);
    // A traceback in a tool's output names the workspace's absolute path, whose length follows
    // the run id (it holds a pid), so the context's size varies by a few tokens between runs.
    // Checked for being there and positive, then redacted.
    let tokens = Regex::new(r#""context_tokens": (\d+)"#).unwrap();
    assert!(tokens.captures_iter(&text).all(|c| c[1].parse::<u64>().unwrap() > 0), "every cell packs a context");
    assert!(tokens.is_match(&text), "report.json gives each cell's context_tokens");
    let text = tokens.replace_all(&text, r#""context_tokens": "[tokens]""#);
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
