//! Trend scale: a results history of 1,000 nightly runs x 100 cells (100,000 rows), written as
//! real history files (one per run, through `history::write_rows` as matrix writes them), then
//! `history::load`, `trend::analyze` and `report::trend::write_all` timed on their own and end
//! to end, the median of several repeats, with the process's peak memory.
//!
//! The history is shaped like a real one so every rule of the analysis has work to do: three
//! profiles (the oracle on 20 cases, `gpt` on 40, `deepseek` on 20 with two epochs), five
//! categories, model costs and tokens, a few infrastructure failures, a benchmark whose digest
//! changes once, an oracle case that is flaky, cases that flip, and a regression of `gpt` in the
//! latest run.
//!
//! Target (issue 13, docs/performance.md#trend-scale): trend over 100,000 rows in under 2 s.
//! Run: `cargo bench --bench trend` (env HCBENCH_BENCH_RUNS, default 1000; HCBENCH_BENCH_REPEATS,
//! default 5). For the peak resident set of the whole process as the OS sees it:
//! `/usr/bin/time -v target/release/deps/trend-<hash>` (the path `cargo bench` prints).

use std::time::{Duration, Instant, SystemTime};

use hcbench::history::{self, HISTORY_SCHEMA_VERSION, HistoryRow};
use hcbench::rundir::{MANIFEST_SCHEMA_VERSION, Manifest};
use hcbench::trend::{self, TrendOptions};

const CATEGORIES: [&str; 5] = ["bugfix", "recovery", "greenfield", "context", "policy"];

/// The profiles of every run: name, provider, model, cases (from case 0), epochs, price of a
/// thousand tokens (None: unpriced). 20 + 40 + 20 x 2 = 100 cells per run.
type Profile = (&'static str, &'static str, &'static str, usize, u32, Option<f64>);
const PROFILES: [Profile; 3] = [
    ("oracle", "oracle", "", 20, 1, None),
    ("gpt", "openai-responses", "gpt-5.1", 40, 1, Some(0.004)),
    ("deepseek", "openai-chat", "deepseek-chat", 20, 2, Some(0.0006)),
];

fn main() {
    let runs: usize = env_or("HCBENCH_BENCH_RUNS", 1000);
    let repeats: usize = env_or("HCBENCH_BENCH_REPEATS", 5);
    let dir = tempfile::tempdir().unwrap();
    let t = Instant::now();
    let (rows, bytes) = write_history(dir.path(), runs);
    println!(
        "wrote {runs} history files, {rows} rows, {:.1} MB, in {:.2}s (peak RSS so far {} MB)",
        bytes as f64 / 1e6,
        t.elapsed().as_secs_f64(),
        peak_mb()
    );

    let opts = TrendOptions { history: dir.path().display().to_string(), ..TrendOptions::default() };
    let out = tempfile::tempdir().unwrap();
    let (mut load, mut analyze, mut render, mut total) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut last = None;
    for _ in 0..repeats {
        let t0 = Instant::now();
        let loaded = history::load(dir.path()).unwrap();
        let t1 = Instant::now();
        let report = trend::analyze(&loaded, &opts, SystemTime::now()).unwrap();
        let t2 = Instant::now();
        hcbench::report::trend::write_all(out.path(), &report).unwrap();
        let t3 = Instant::now();
        load.push(t1 - t0);
        analyze.push(t2 - t1);
        render.push(t3 - t2);
        total.push(t3 - t0);
        assert_eq!(loaded.rows.len(), rows, "every written row reads back");
        last = Some(report);
    }
    let report = last.expect("at least one repeat");
    let written: Vec<String> = std::fs::read_dir(out.path())
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            format!("{} {:.0} kB", e.file_name().to_string_lossy(), e.metadata().unwrap().len() as f64 / 1e3)
        })
        .collect();
    println!(
        "trend of {} runs: {} series, {} category series, {} checks ({} flagged), {} flips, {} flaky, {} warnings",
        report.runs.len(),
        report.series.len(),
        report.categories.len(),
        report.regressions.len(),
        report.verdict.regressions,
        report.flips.len(),
        report.flaky.len(),
        report.warnings.len()
    );
    println!("verdict: {}", report.verdict.summary);
    println!("wrote: {}", written.join(", "));
    println!("median of {repeats} (min..max), {} threads:", rayon::current_num_threads());
    for (name, v) in [
        ("history::load", load),
        ("trend::analyze", analyze),
        ("report::trend::write_all", render),
        ("end to end", total),
    ] {
        let (lo, hi) = (v.iter().min().unwrap().as_secs_f64(), v.iter().max().unwrap().as_secs_f64());
        println!("  {name:<26} {:>7.3}s  ({lo:.3}..{hi:.3})", median(v).as_secs_f64());
    }
    println!("peak memory (VmHWM): {} MB", peak_mb());
}

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// Writes `runs` history files into `dir`; returns the rows and bytes written.
fn write_history(dir: &std::path::Path, runs: usize) -> (usize, u64) {
    let day = 86_400;
    // 2023-11-14T02:00:00Z: nightly runs from there on.
    let first = SystemTime::UNIX_EPOCH + Duration::from_secs(1_699_927_200);
    let mut rng = fastrand::Rng::with_seed(13);
    // Each (profile, case) has its own pass probability; some cases are certain either way,
    // so they can flip; the rest are noisy and never count as flips.
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
    let (mut rows_total, mut bytes) = (0, 0);
    for run in 0..runs {
        let started = first + Duration::from_secs(day * run as u64);
        let started_at = humantime::format_rfc3339_seconds(started).to_string();
        let commit = format!("{:040x}", (run as u128 + 1) * 0x9e37_79b9_7f4a_7c15_u128);
        // The benchmark changed once, six tenths of the way through.
        let digest = if run < runs * 6 / 10 { "a".repeat(64) } else { "b".repeat(64) };
        let near_end = runs - run;
        // Flips: gpt case 4 (always passed) fails from the third-last run; deepseek case 1
        // (always failed) passes in the latest run.
        if near_end == 3 {
            p_case[1][4] = 0.0;
        }
        if near_end == 1 {
            p_case[2][1] = 1.0;
            // The regression: most of gpt's cases that usually pass fail in the latest run.
            for (c, p) in p_case[1].iter_mut().enumerate() {
                if c % 4 != 1 && c % 3 != 0 {
                    *p = 0.0;
                }
            }
        }
        let m = manifest(run, &started_at, &commit, &digest);
        let mut rows = Vec::with_capacity(100);
        for (pi, &(profile, provider, model, cases, epochs, price)) in PROFILES.iter().enumerate() {
            for case in 0..cases {
                for epoch in 1..=epochs {
                    let mut outcome = if rng.f64() < p_case[pi][case] { "passed" } else { "failed" };
                    // The oracle's case 7 is flaky: a fixture problem, not the agent's.
                    if profile == "oracle" && case == 7 && rng.f64() < 0.05 {
                        outcome = "failed";
                    }
                    // Now and then an infrastructure failure, never on a certain case (so the
                    // flips and the regression stay what they were made to be).
                    if profile != "oracle" && case % 4 > 1 && rng.f64() < 0.01 {
                        outcome = if rng.bool() { "timeout" } else { "provider_error" };
                    }
                    let (input, output) =
                        if model.is_empty() { (0, 0) } else { (rng.u64(4_000..60_000), rng.u64(500..8_000)) };
                    rows.push(HistoryRow {
                        schema: HISTORY_SCHEMA_VERSION,
                        run_id: m.run_id.clone(),
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
        let path = history::run_file(dir, &m);
        history::write_rows(&path, &rows).unwrap();
        rows_total += rows.len();
        bytes += std::fs::metadata(&path).unwrap().len();
    }
    (rows_total, bytes)
}

fn manifest(run: usize, started_at: &str, commit: &str, digest: &str) -> Manifest {
    Manifest {
        schema_version: MANIFEST_SCHEMA_VERSION,
        run_id: format!("{}-{run:04}", &started_at[..10]),
        hcbench_version: "0.1.0".into(),
        git_commit: Some(commit.into()),
        git_dirty: Some(false),
        benchmark_digest: Some(digest.into()),
        benchmark_dirty: Some(false),
        command: "matrix".into(),
        benchmark: "hc-bench".into(),
        profiles: PROFILES.iter().map(|p| p.0.to_string()).collect(),
        cases: Vec::new(),
        epochs: 1,
        jobs: 2,
        started_at: started_at.into(),
        agent_spec: String::new(),
        agent_dir: None,
        sandbox: None,
        budget_usd: None,
        min_coverage: None,
        fail_under: None,
        ablations: Vec::new(),
        not_run: Vec::new(),
        shard: None,
        plan_digest: None,
        merged_from: Vec::new(),
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// The process's peak resident set so far (VmHWM), in MB.
fn peak_mb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb / 1024)
}
