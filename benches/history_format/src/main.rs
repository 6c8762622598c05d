//! The results-history file format, measured: the same 1,000 runs x 100 cells that
//! `benches/trend.rs` generates, written as one CSV file per run (the csv crate, hcbench's
//! `HistoryRow` columns) and as one Parquet file per run (polars), then read back every way
//! hcbench could read them, with bytes on disk and what each format does with a damaged file.
//!
//! This crate is deliberately not part of hcbench's build (it has its own `[workspace]`): its
//! point is to measure polars features hcbench does not enable. Run it from this folder:
//!
//! ```text
//! cd benches/history_format
//! cargo run --release                        # all of it: CSV, polars CSV, Parquet
//! cargo run --release --no-default-features  # CSV through the csv crate only (polars `lazy`)
//! ./build_cost.sh                            # cold debug builds per polars feature set
//! ```
//!
//! Env: HISTORY_FORMAT_RUNS (default 1000), HISTORY_FORMAT_REPEATS (default 3). Figures and
//! the decision are in docs/performance.md#results-history-format.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

/// The shape of hcbench's `HistoryRow` (src/history/mod.rs, schema 1): same columns, same
/// order, same types.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct HistoryRow {
    schema: u32,
    run_id: String,
    started_at: String,
    command: String,
    git_commit: String,
    git_dirty: Option<bool>,
    hcbench_version: String,
    benchmark: String,
    benchmark_digest: String,
    cell_id: String,
    case_id: String,
    category: String,
    split: String,
    profile: String,
    provider: String,
    model: String,
    ablation: String,
    epoch: u32,
    outcome: String,
    reward: f64,
    input_tokens: u64,
    output_tokens: u64,
    cost_usd: Option<f64>,
    wall_ms: u64,
}

const CATEGORIES: [&str; 5] = ["bugfix", "recovery", "greenfield", "context", "policy"];
const PROFILES: [(&str, &str, &str, usize, u32, Option<f64>); 3] = [
    ("oracle", "oracle", "", 20, 1, None),
    ("gpt", "openai-responses", "gpt-5.1", 40, 1, Some(0.004)),
    ("deepseek", "openai-chat", "deepseek-chat", 20, 2, Some(0.0006)),
];

fn main() {
    let runs: usize = env_or("HISTORY_FORMAT_RUNS", 1000);
    let repeats: usize = env_or("HISTORY_FORMAT_REPEATS", 3);
    let history = generate(runs);
    let rows: usize = history.iter().map(|(_, r)| r.len()).sum();
    println!("{runs} runs, {rows} rows; {} threads for polars", std::thread::available_parallelism().unwrap());
    let tmp = tempfile::tempdir().unwrap();

    let csv_dir = tmp.path().join("csv");
    std::fs::create_dir_all(&csv_dir).unwrap();
    let t = Instant::now();
    for (name, rows) in &history {
        write_atomic(&csv_dir.join(format!("{name}.csv")), &csv_bytes(rows));
    }
    report_write("CSV (csv crate)", t.elapsed(), runs, &csv_dir);

    let read = time(repeats, || {
        let r = read_csv(&csv_dir);
        assert_eq!(r.len(), rows);
    });
    println!("  read all, csv crate + serde -> rows:       {}", fmt(&read));
    let all: Vec<HistoryRow> = read_csv(&csv_dir);
    let to_frame = time(repeats, || {
        let df = frame(&all);
        assert_eq!(df.height(), rows);
    });
    println!("  rows -> polars DataFrame (24 columns):     {}", fmt(&to_frame));

    #[cfg(feature = "polars-csv")]
    {
        let read = time(repeats, || {
            let df = polars_csv(&csv_dir.join("*.csv")).unwrap();
            assert_eq!(df.height(), rows);
        });
        println!("  read all, polars LazyCsvReader -> frame:   {}", fmt(&read));
    }

    #[cfg(feature = "parquet")]
    {
        let pq_dir = tmp.path().join("parquet");
        std::fs::create_dir_all(&pq_dir).unwrap();
        let t = Instant::now();
        for (name, rows) in &history {
            write_atomic(&pq_dir.join(format!("{name}.parquet")), &parquet_bytes(rows));
        }
        report_write("Parquet (polars, zstd)", t.elapsed(), runs, &pq_dir);
        let read = time(repeats, || {
            let df = polars_parquet(&pq_dir.join("*.parquet")).unwrap();
            assert_eq!(df.height(), rows);
        });
        println!("  read all, polars scan_parquet -> frame:    {}", fmt(&read));
    }

    robustness(tmp.path(), &history[..10]);
}

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// The median of `repeats` timings, with the range.
fn time(repeats: usize, mut f: impl FnMut()) -> Vec<Duration> {
    let mut v: Vec<Duration> = (0..repeats)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    v.sort();
    v
}

fn fmt(v: &[Duration]) -> String {
    format!(
        "{:.3}s median ({:.3}..{:.3})",
        v[v.len() / 2].as_secs_f64(),
        v[0].as_secs_f64(),
        v[v.len() - 1].as_secs_f64()
    )
}

fn report_write(what: &str, took: Duration, runs: usize, dir: &Path) {
    let (mut bytes, mut blocks) = (0u64, 0u64);
    for e in std::fs::read_dir(dir).unwrap() {
        let m = e.unwrap().metadata().unwrap();
        bytes += m.len();
        blocks += std::os::unix::fs::MetadataExt::blocks(&m) * 512;
    }
    println!(
        "{what}: write {:.2} ms per run file ({:.2}s for {runs}); {:.2} MB of data, {:.2} MB allocated on disk, {:.1} kB per file",
        took.as_secs_f64() * 1e3 / runs as f64,
        took.as_secs_f64(),
        bytes as f64 / 1e6,
        blocks as f64 / 1e6,
        bytes as f64 / runs as f64 / 1e3
    );
}

/// A temporary file renamed into place, as hcbench writes history files.
fn write_atomic(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn csv_bytes(rows: &[HistoryRow]) -> Vec<u8> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for r in rows {
        w.serialize(r).unwrap();
    }
    w.into_inner().unwrap()
}

/// hcbench's reading rules: every `*.csv` file in name order, a flexible reader, rows that do
/// not parse skipped (and counted there).
fn read_csv(dir: &Path) -> Vec<HistoryRow> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.retain(|p| p.extension().is_some_and(|x| x == "csv"));
    files.sort();
    let mut out = Vec::new();
    for f in files {
        read_csv_file(&std::fs::read(&f).unwrap(), &mut out);
    }
    out
}

/// Returns the rows skipped.
fn read_csv_file(bytes: &[u8], out: &mut Vec<HistoryRow>) -> usize {
    let mut r = csv::ReaderBuilder::new().flexible(true).from_reader(bytes);
    let headers = r.headers().unwrap().clone();
    let mut skipped = 0;
    for rec in r.records() {
        match rec.ok().and_then(|rec| rec.deserialize::<HistoryRow>(Some(&headers)).ok()) {
            Some(row) => out.push(row),
            None => skipped += 1,
        }
    }
    skipped
}

/// All 24 columns as a frame, typed as the struct is.
fn frame(rows: &[HistoryRow]) -> polars::prelude::DataFrame {
    use polars::prelude::*;
    fn s<'a>(rows: &'a [HistoryRow], f: impl Fn(&'a HistoryRow) -> &'a str) -> Vec<&'a str> {
        rows.iter().map(f).collect()
    }
    df!(
        "schema" => rows.iter().map(|r| r.schema).collect::<Vec<u32>>(),
        "run_id" => s(rows, |r| &r.run_id),
        "started_at" => s(rows, |r| &r.started_at),
        "command" => s(rows, |r| &r.command),
        "git_commit" => s(rows, |r| &r.git_commit),
        "git_dirty" => rows.iter().map(|r| r.git_dirty).collect::<Vec<Option<bool>>>(),
        "hcbench_version" => s(rows, |r| &r.hcbench_version),
        "benchmark" => s(rows, |r| &r.benchmark),
        "benchmark_digest" => s(rows, |r| &r.benchmark_digest),
        "cell_id" => s(rows, |r| &r.cell_id),
        "case_id" => s(rows, |r| &r.case_id),
        "category" => s(rows, |r| &r.category),
        "split" => s(rows, |r| &r.split),
        "profile" => s(rows, |r| &r.profile),
        "provider" => s(rows, |r| &r.provider),
        "model" => s(rows, |r| &r.model),
        "ablation" => s(rows, |r| &r.ablation),
        "epoch" => rows.iter().map(|r| r.epoch).collect::<Vec<u32>>(),
        "outcome" => s(rows, |r| &r.outcome),
        "reward" => rows.iter().map(|r| r.reward).collect::<Vec<f64>>(),
        "input_tokens" => rows.iter().map(|r| r.input_tokens).collect::<Vec<u64>>(),
        "output_tokens" => rows.iter().map(|r| r.output_tokens).collect::<Vec<u64>>(),
        "cost_usd" => rows.iter().map(|r| r.cost_usd).collect::<Vec<Option<f64>>>(),
        "wall_ms" => rows.iter().map(|r| r.wall_ms).collect::<Vec<u64>>(),
    )
    .unwrap()
}

#[cfg(feature = "polars-csv")]
fn polars_csv(glob: &Path) -> polars::prelude::PolarsResult<polars::prelude::DataFrame> {
    use polars::prelude::*;
    LazyCsvReader::new(PlRefPath::new(glob.to_str().unwrap())).with_has_header(true).finish()?.collect()
}

#[cfg(feature = "parquet")]
fn parquet_bytes(rows: &[HistoryRow]) -> Vec<u8> {
    use polars::prelude::*;
    let mut df = frame(rows);
    let mut buf = Vec::new();
    ParquetWriter::new(&mut buf).finish(&mut df).unwrap();
    buf
}

#[cfg(feature = "parquet")]
fn polars_parquet(glob: &Path) -> polars::prelude::PolarsResult<polars::prelude::DataFrame> {
    use polars::prelude::*;
    LazyFrame::scan_parquet(PlRefPath::new(glob.to_str().unwrap()), ScanArgsParquet::default())?.collect()
}

/// What each reader does with ten run files of which one is cut mid-way, or has one garbage
/// row (CSV) / 64 overwritten bytes in its middle (Parquet has no rows to garble).
fn robustness(tmp: &Path, runs: &[(String, Vec<HistoryRow>)]) {
    let total: usize = runs.iter().map(|(_, r)| r.len()).sum();
    println!("damage, 10 run files ({total} rows), one of them damaged:");
    for damage in ["cut mid-way", "one garbage row / 64 garbage bytes"] {
        let dir = tmp.join(format!("damaged-{}", damage.len()));
        std::fs::create_dir_all(&dir).unwrap();
        for (i, (name, rows)) in runs.iter().enumerate() {
            let mut bytes = csv_bytes(rows);
            if i == 4 {
                bytes = if damage.starts_with("cut") { cut(bytes) } else { garble_row(bytes) };
            }
            std::fs::write(dir.join(format!("{name}.csv")), bytes).unwrap();
            #[cfg(feature = "parquet")]
            {
                let mut bytes = parquet_bytes(rows);
                if i == 4 {
                    bytes = if damage.starts_with("cut") { cut(bytes) } else { garble_bytes(bytes) };
                }
                std::fs::write(dir.join(format!("{name}.parquet")), bytes).unwrap();
            }
        }
        println!("  {damage}:");
        let mut out = Vec::new();
        let mut skipped = 0;
        for (name, _) in runs {
            skipped += read_csv_file(&std::fs::read(dir.join(format!("{name}.csv"))).unwrap(), &mut out);
        }
        println!("    CSV, csv crate (hcbench rules): {} rows read, {skipped} skipped and counted", out.len());
        #[cfg(feature = "polars-csv")]
        println!("    CSV, polars LazyCsvReader:      {}", outcome(polars_csv(&dir.join("*.csv"))));
        #[cfg(feature = "parquet")]
        {
            println!("    Parquet, polars scan_parquet:   {}", outcome(polars_parquet(&dir.join("*.parquet"))));
            // A read without an error is only good news if the values are the written ones.
            let damaged = runs.get(4).map(|(name, rows)| (polars_parquet(&dir.join(format!("{name}.parquet"))), rows));
            if let Some((Ok(df), rows)) = damaged {
                let same = df.equals_missing(&frame(rows));
                println!(
                    "    Parquet, the damaged file read alone: {} rows, equal to what was written: {same}",
                    df.height()
                );
            }
            // Each file alone: what a reader that skips unreadable files would keep.
            let mut kept = 0;
            for (name, _) in runs {
                if let Ok(df) = polars_parquet(&dir.join(format!("{name}.parquet"))) {
                    kept += df.height();
                }
            }
            println!("    Parquet, file by file, skipping files that fail: {kept} rows read");
        }
    }
}

#[cfg(any(feature = "parquet", feature = "polars-csv"))]
fn outcome(r: polars::prelude::PolarsResult<polars::prelude::DataFrame>) -> String {
    match r {
        Ok(df) => format!("{} rows read, no error", df.height()),
        Err(e) => {
            let e = e.to_string().replace('\n', " ");
            format!("error: {}", e.chars().take(160).collect::<String>())
        }
    }
}

fn cut(mut bytes: Vec<u8>) -> Vec<u8> {
    bytes.truncate(bytes.len() / 2);
    bytes
}

/// Replaces the 50th data line with a line that is not a history row.
fn garble_row(bytes: Vec<u8>) -> Vec<u8> {
    let text = String::from_utf8(bytes).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut out: Vec<&str> = lines.clone();
    out[50] = "1,this,is,\"not a row";
    (out.join("\n") + "\n").into_bytes()
}

#[cfg(feature = "parquet")]
fn garble_bytes(mut bytes: Vec<u8>) -> Vec<u8> {
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 64] {
        *b = 0x5a;
    }
    bytes
}

/// The history of `benches/trend.rs`, run by run: (file stem, rows), the same seed and the
/// same draws, so the same rows. Kept in step with it by hand (this crate cannot depend on
/// hcbench without building it).
fn generate(runs: usize) -> Vec<(String, Vec<HistoryRow>)> {
    let day = 86_400;
    let first = SystemTime::UNIX_EPOCH + Duration::from_secs(1_699_927_200);
    let mut rng = fastrand::Rng::with_seed(13);
    let mut p_case: Vec<Vec<f64>> = PROFILES
        .iter()
        .map(|&(name, _, _, cases, _, _)| {
            (0..cases)
                .map(|c| match (name, c % 4) {
                    ("oracle", _) => 1.0,
                    (_, 0) => 1.0,
                    (_, 1) => 0.0,
                    _ => 0.3 + 0.65 * rng.f64(),
                })
                .collect()
        })
        .collect();
    let mut out = Vec::with_capacity(runs);
    for run in 0..runs {
        let started = first + Duration::from_secs(day * run as u64);
        let started_at = humantime::format_rfc3339_seconds(started).to_string();
        let commit = format!("{:040x}", (run as u128 + 1) * 0x9e37_79b9_7f4a_7c15_u128);
        let digest = if run < runs * 6 / 10 { "a".repeat(64) } else { "b".repeat(64) };
        let near_end = runs - run;
        if near_end == 3 {
            p_case[1][4] = 0.0;
        }
        if near_end == 1 {
            p_case[2][1] = 1.0;
            for (c, p) in p_case[1].iter_mut().enumerate() {
                if c % 4 != 1 && c % 3 != 0 {
                    *p = 0.0;
                }
            }
        }
        let run_id = format!("{}-{run:04}", &started_at[..10]);
        let mut rows = Vec::with_capacity(100);
        for (pi, &(profile, provider, model, cases, epochs, price)) in PROFILES.iter().enumerate() {
            for case in 0..cases {
                for epoch in 1..=epochs {
                    let mut outcome = if rng.f64() < p_case[pi][case] { "passed" } else { "failed" };
                    if profile == "oracle" && case == 7 && rng.f64() < 0.05 {
                        outcome = "failed";
                    }
                    if profile != "oracle" && case % 4 > 1 && rng.f64() < 0.01 {
                        outcome = if rng.bool() { "timeout" } else { "provider_error" };
                    }
                    let (input, output) =
                        if model.is_empty() { (0, 0) } else { (rng.u64(4_000..60_000), rng.u64(500..8_000)) };
                    rows.push(HistoryRow {
                        schema: 1,
                        run_id: run_id.clone(),
                        started_at: started_at.clone(),
                        command: "matrix".into(),
                        git_commit: commit.clone(),
                        git_dirty: Some(run % 50 == 49),
                        hcbench_version: "0.1.0".into(),
                        benchmark: "hc-bench".into(),
                        benchmark_digest: digest.clone(),
                        cell_id: format!("case-{case:03}--{profile}--e{epoch}"),
                        case_id: format!("case-{case:03}"),
                        category: CATEGORIES[case % CATEGORIES.len()].into(),
                        split: if case % 5 == 0 { "test" } else { "train" }.into(),
                        profile: profile.into(),
                        provider: provider.into(),
                        model: model.into(),
                        ablation: String::new(),
                        epoch,
                        outcome: outcome.into(),
                        reward: if outcome == "passed" { 1.0 } else { 0.0 },
                        input_tokens: input,
                        output_tokens: output,
                        cost_usd: price.map(|p| (input + output) as f64 / 1000.0 * p),
                        wall_ms: rng.u64(2_000..180_000),
                    });
                }
            }
        }
        out.push((format!("{}--{run_id}", started_at.replace(':', "-")), rows));
    }
    out
}
