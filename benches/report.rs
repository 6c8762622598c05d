//! Report scale: builds the report of a synthetic run directory (10,000 cells by default,
//! 100,000 for issue 19) and renders every format, timing each stage and reading the peak
//! resident memory (VmHWM) after each, with the size of every output.
//!
//! Targets: a 10,000-cell report renders in under 2 s with bounded memory (DESIGN.md); a
//! 100,000-cell one in under 10 s, with memory that does not grow with the cells beyond their
//! summaries and a report.html that stays usable (issue 19). Then the same cells as four
//! shard runs are joined by `hcbench merge`'s library call (issue 19: 10,000 cells in under
//! 2 s, reports not included). Run: `cargo bench --bench report` (env HCBENCH_BENCH_CELLS,
//! default 10000; `HCBENCH_BENCH_CELLS=100000` for the large run, about 800 MB of traces in
//! the temp folder; HCBENCH_BENCH_MERGE=0 skips the merge).

use std::path::Path;
use std::time::Instant;

use hcbench::report;
use hcbench::rundir::{MANIFEST_SCHEMA_VERSION, Manifest, ManifestCase, RunDir, cell_id};
use hcbench::trace::event::{Check, ModelInfo, Outcome, Usage};
use hcbench::trace::{EventBody, TraceWriter};

fn main() {
    let cells: usize = std::env::var("HCBENCH_BENCH_CELLS").ok().and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let profiles: Vec<String> = ["oracle", "gpt", "deepseek", "local"].iter().map(|s| s.to_string()).collect();
    let cases = cells / profiles.len();
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path();
    let categories = ["bugfix", "recovery", "greenfield", "context", "policy"];
    let manifest = Manifest {
        schema_version: MANIFEST_SCHEMA_VERSION,
        run_id: "bench".into(),
        hcbench_version: "bench".into(),
        git_commit: None,
        git_dirty: None,
        benchmark_digest: None,
        benchmark_dirty: None,
        command: "matrix".into(),
        benchmark: "synthetic".into(),
        profiles: profiles.clone(),
        cases: (0..cases)
            .map(|i| ManifestCase {
                id: format!("case-{i}"),
                category: categories[i % 5].into(),
                split: "train".into(),
            })
            .collect(),
        epochs: 1,
        jobs: 2,
        started_at: "2026-11-21T00:00:00Z".into(),
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
    };
    let run = RunDir::create(run_dir, manifest).unwrap();
    let manifest = run.manifest().clone();
    let t = Instant::now();
    let mut bytes = 0u64;
    for (i, case) in manifest.cases.iter().enumerate() {
        for (j, p) in profiles.iter().enumerate() {
            let id = cell_id(&case.id, p, "", 1, 1);
            let cdir = run_dir.join("cells").join(&id);
            std::fs::create_dir_all(&cdir).unwrap();
            let path = cdir.join("trace.jsonl");
            let mut w = TraceWriter::create(&path, "bench", &id).unwrap();
            w.append(EventBody::RunStarted {
                benchmark: "synthetic".into(),
                case_id: case.id.clone(),
                category: case.category.clone(),
                split: "train".into(),
                profile: p.clone(),
                model: ModelInfo { provider: "x".into(), model: "y".into(), ..Default::default() },
                step_budget: 20,
                epoch: 1,
                agent_spec: String::new(),
                ablation: String::new(),
                hcbench_version: "bench".into(),
                sandbox: None,
            })
            .unwrap();
            for step in 1..=6 {
                w.append(EventBody::ModelAction {
                    step,
                    tool: "read_file".into(),
                    args: serde_json::json!({"path": "a.py"}),
                    usage: Some(Usage { input_tokens: 900, output_tokens: 30, ..Default::default() }),
                    latency_ms: 700,
                    batch: None,
                })
                .unwrap();
                w.append(EventBody::PolicyDecision {
                    step,
                    tool: "read_file".into(),
                    allowed: true,
                    reason: "allowed".into(),
                    invalid: false,
                })
                .unwrap();
                w.append(EventBody::ToolResult {
                    step,
                    tool: "read_file".into(),
                    ok: true,
                    denied: false,
                    output: "    1| x = 1\n".repeat(30),
                    output_bytes: 420,
                    artifact: None,
                    modified: vec![],
                    read: Some("a.py".into()),
                    duration_ms: 1,
                    batch: None,
                })
                .unwrap();
            }
            let passed = (i + j) % 3 != 0;
            w.append(EventBody::TestResult {
                passed,
                exit_code: Some(if passed { 0 } else { 1 }),
                timed_out: false,
                duration_ms: 300,
                output: "ok".into(),
                artifact: None,
                runner: None,
            })
            .unwrap();
            w.append(EventBody::VerifierResult {
                passed: true,
                duration_ms: 0,
                checks: vec![Check { name: "unchanged".into(), passed: true, detail: "ok".into() }],
                metrics: Default::default(),
            })
            .unwrap();
            let outcome = if passed { Outcome::Passed } else { Outcome::Failed };
            w.append(EventBody::RunFinished {
                outcome,
                reward: if passed { 1.0 } else { 0.0 },
                stop_reason: "finished".into(),
                reason: if passed {
                    "tests passed; verifier passed".into()
                } else {
                    format!(
                        "tests failed: 1 required test(s) did not pass: test_{}.CaseTest.test_path_{} (failed)",
                        case.id.replace('-', "_"),
                        i % 97
                    )
                },
                elapsed_ms: 2000 + (i as u64 % 700),
            })
            .unwrap();
            bytes += std::fs::metadata(&path).unwrap().len();
        }
    }
    println!(
        "wrote {} cells ({:.1} MB of traces) in {:.1}s",
        cases * profiles.len(),
        bytes as f64 / 1e6,
        t.elapsed().as_secs_f64()
    );

    let base = hwm_mib();
    println!("peak memory after writing the traces: {base:.0} MiB");

    let threads = rayon::current_num_threads();
    let t = Instant::now();
    let summaries = report::model::build(run_dir, false).unwrap().cells.len();
    let build = t.elapsed().as_secs_f64();
    let hwm_summaries = hwm_mib();
    let t = Instant::now();
    let full = report::model::build(run_dir, true).unwrap();
    let build_tl = t.elapsed().as_secs_f64();
    let hwm_model = hwm_mib();
    let t = Instant::now();
    let written = report::write_all(run_dir, &full).unwrap();
    let render = t.elapsed().as_secs_f64();
    let hwm_render = hwm_mib();
    assert_eq!(summaries, full.cells.len());
    let sizes: Vec<String> = written
        .iter()
        .map(|p| format!("{} {:.1} MB", p.file_name().unwrap().to_string_lossy(), size(p) as f64 / 1e6))
        .collect();
    let n = full.cells.len();
    println!(
        "{n} cells on {threads} threads: model without timelines {build:.2}s, with timelines {build_tl:.2}s, all exporters {render:.2}s; total {:.2}s ({})",
        build_tl + render,
        sizes.join(", ")
    );
    println!(
        "peak memory (VmHWM): after the summaries-only model {hwm_summaries:.0} MiB, after the model with timelines {hwm_model:.0} MiB, after every exporter {hwm_render:.0} MiB; above the traces' {base:.0} MiB: {:.2} KiB per cell",
        (hwm_render - base) * 1024.0 / n as f64
    );
    if let Ok(files) = std::fs::read_dir(run_dir.join("reports/report-files")) {
        println!("report.html's side files: {} files", files.count());
    }
    drop(full);

    if std::env::var("HCBENCH_BENCH_MERGE").as_deref() != Ok("0") {
        let cells = report::model::build(run_dir, false).unwrap().cells;
        merge_shards(run_dir, &cells);
    }
}

/// The peak resident memory of this process so far (VmHWM), in MiB.
fn hwm_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Bytes in a file, or in every file under a folder.
fn size(path: &Path) -> u64 {
    if path.is_dir() {
        std::fs::read_dir(path).unwrap().map(|e| size(&e.unwrap().path())).sum()
    } else {
        std::fs::metadata(path).unwrap().len()
    }
}

/// Splits the run into four shard runs (manifests with `shard`, each cell's trace in the
/// shard's pack, results.jsonl from the summaries) and times their merge.
fn merge_shards(run_dir: &std::path::Path, cells: &[hcbench::replay::CellSummary]) {
    use hcbench::shard::Shard;
    let count = 4;
    let manifest = Manifest::read(run_dir).unwrap();
    let plan = manifest.plan_cells();
    let root = tempfile::tempdir().unwrap();
    let by_id: std::collections::HashMap<&str, &hcbench::replay::CellSummary> =
        cells.iter().map(|c| (c.cell_id.as_str(), c)).collect();
    let mut dirs = Vec::new();
    for index in 1..=count {
        let shard = Shard::new(index, count).unwrap();
        let dir = root.path().join(format!("shard-{index}"));
        std::fs::create_dir_all(dir.join("cells")).unwrap();
        let mut m = manifest.clone();
        m.shard = Some(shard);
        std::fs::write(dir.join("manifest.json"), serde_json::to_vec_pretty(&m).unwrap()).unwrap();
        let mut lines = String::new();
        // Each shard's traces in its pack, as hcbench writes them (src/trace/pack.rs).
        let mut pack = hcbench::trace::pack::PackWriter::open(&dir).unwrap();
        for cell in shard.select(&plan) {
            let plain = std::fs::read(run_dir.join("cells").join(&cell.cell_id).join("trace.jsonl")).unwrap();
            pack.append(&cell.cell_id, &hcbench::trace::stored::compress_frame(&plain).unwrap()).unwrap();
            let summary = by_id[cell.cell_id.as_str()];
            lines.push_str(&serde_json::to_string(summary).unwrap());
            lines.push('\n');
        }
        std::fs::write(dir.join("results.jsonl"), lines).unwrap();
        dirs.push(dir);
    }
    let out = root.path().join("merged");
    let t = Instant::now();
    let merged = hcbench::merge::merge(&out, &dirs, false).unwrap();
    let merge = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let report = report::model::build(&out, true).unwrap();
    report::write_all(&out, &report).unwrap();
    let reports = t.elapsed().as_secs_f64();
    assert_eq!(merged.merged, cells.len());
    println!(
        "merge of {} cells from {count} shards: {merge:.2}s (checks, frames copied into one pack, results.jsonl); its reports {reports:.2}s",
        merged.merged
    );
}
