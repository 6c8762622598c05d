use super::*;

pub(crate) fn row(run: &str, started_at: &str, case: &str, profile: &str, outcome: &str) -> HistoryRow {
    HistoryRow {
        schema: HISTORY_SCHEMA_VERSION,
        run_id: run.to_string(),
        started_at: started_at.to_string(),
        command: "matrix".to_string(),
        git_commit: format!("c-{run}"),
        git_dirty: Some(false),
        hcbench_version: "0.1.0".to_string(),
        benchmark: "hc-bench".to_string(),
        benchmark_digest: "d1".to_string(),
        cell_id: format!("{case}__{profile}"),
        case_id: case.to_string(),
        category: "bugfix".to_string(),
        split: "train".to_string(),
        profile: profile.to_string(),
        provider: "scripted".to_string(),
        model: format!("{profile}-model"),
        ablation: String::new(),
        epoch: 1,
        outcome: outcome.to_string(),
        reward: if outcome == "passed" { 1.0 } else { 0.0 },
        input_tokens: 100,
        output_tokens: 20,
        cost_usd: Some(0.001),
        wall_ms: 1500,
    }
}

#[test]
fn rows_round_trip_through_one_file_per_run() {
    let dir = tempfile::tempdir().unwrap();
    let a = vec![row("r1", "2026-11-01T00:00:00Z", "c1", "gpt", "passed"), {
        let mut r = row("r1", "2026-11-01T00:00:00Z", "c2", "gpt", "provider_error");
        r.cost_usd = None;
        r.git_dirty = None;
        r.category = "with, comma \"and quotes\"".into();
        r
    }];
    let b = vec![row("r2", "2026-11-02T00:00:00Z", "c1", "gpt", "failed")];
    write_rows(&dir.path().join("2026-11-01--r1.csv"), &a).unwrap();
    write_rows(&dir.path().join("2026-11-02--r2.csv"), &b).unwrap();
    // Files that are not history files are not read at all.
    std::fs::write(dir.path().join("notes.txt"), "not a csv").unwrap();

    let loaded = load(dir.path()).unwrap();
    assert_eq!(loaded.files, 2);
    assert_eq!(loaded.skipped_rows(), 0);
    let mut want = a.clone();
    want.extend(b);
    assert_eq!(loaded.rows, want);
}

#[test]
fn the_header_names_every_column_in_field_order() {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.serialize(row("r", "2026-11-01T00:00:00Z", "c", "p", "passed")).unwrap();
    let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
    assert_eq!(text.lines().next().unwrap(), header().join(","));
    // An empty run still writes a file that says what it is.
    let dir = tempfile::tempdir().unwrap();
    write_rows(&dir.path().join("e.csv"), &[]).unwrap();
    assert_eq!(std::fs::read_to_string(dir.path().join("e.csv")).unwrap().trim(), header().join(","));
    assert_eq!(load(dir.path()).unwrap().rows, vec![]);
}

#[test]
fn corrupt_and_foreign_rows_are_skipped_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let good = row("r1", "2026-11-01T00:00:00Z", "c1", "gpt", "passed");
    write_rows(&dir.path().join("a.csv"), &[good.clone(), good.clone()]).unwrap();
    // Damage the file: a garbage row, a row cut mid-way, a row with a bad number and a bad time.
    let mut text = std::fs::read_to_string(dir.path().join("a.csv")).unwrap();
    text.push_str("this is not, a history row\n");
    let line = text.lines().nth(1).unwrap().to_string();
    text.push_str(&line[..line.len() / 2]);
    text.push('\n');
    text.push_str(&line.replace(",1.0,", ",lots,"));
    text.push('\n');
    text.push_str(&line.replace("2026-11-01T00:00:00Z", "yesterday"));
    text.push('\n');
    // An unclosed quote costs its own line, not the rows after it.
    text.push_str("1,\"r1,broken\n");
    text.push_str(&line);
    text.push('\n');
    std::fs::write(dir.path().join("a.csv"), text).unwrap();
    // Another tool's CSV in the same folder.
    std::fs::write(dir.path().join("other.csv"), "name,score\nalice,3\nbob,4\n").unwrap();
    // Not CSV at all (a binary blob named .csv).
    std::fs::write(dir.path().join("blob.csv"), [0xff, 0xfe, 0x00, b'\n', 0x80]).unwrap();

    let loaded = load(dir.path()).unwrap();
    assert_eq!(loaded.rows, vec![good.clone(), good.clone(), good]);
    assert_eq!(loaded.skipped[&dir.path().join("a.csv")], 5);
    assert_eq!(loaded.skipped[&dir.path().join("other.csv")], 2);
    assert!(loaded.skipped.contains_key(&dir.path().join("blob.csv")));
    let warnings = loaded.warnings().join("\n");
    assert!(warnings.contains("a.csv: skipped 5 row(s)"), "{warnings}");
}

#[test]
fn a_newer_schema_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = row("r1", "2026-11-01T00:00:00Z", "c1", "gpt", "passed");
    r.schema = HISTORY_SCHEMA_VERSION + 1;
    write_rows(&dir.path().join("new.csv"), &[r]).unwrap();
    let err = load(dir.path()).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("new.csv row 1 has history schema 2"), "{text}");
    assert!(text.contains("upgrade hcbench"), "{text}");
}

#[test]
fn a_missing_folder_is_an_empty_history() {
    let dir = tempfile::tempdir().unwrap();
    let loaded = load(&dir.path().join("nope")).unwrap();
    assert_eq!((loaded.files, loaded.rows.len()), (0, 0));
}
