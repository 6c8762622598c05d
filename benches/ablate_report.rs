//! Ablation report scale: builds the report of a synthetic 10,000-cell `hcbench ablate` run
//! directory (2,000 cases x 5 ablations, traces with the context events) and renders every
//! format, timing each stage.
//!
//! Target (issue 12, docs/performance.md): the ablation report of 10,000 cells in under 2 s.
//! Run: `cargo bench --bench ablate_report` (env HCBENCH_BENCH_CELLS, default 10000).

use std::time::Instant;

use hcbench::report;
use hcbench::rundir::{MANIFEST_SCHEMA_VERSION, Manifest, ManifestCase, RunDir, cell_id};
use hcbench::trace::event::{Check, ContextSection, MemoryChange, ModelInfo, Outcome, Usage};
use hcbench::trace::{EventBody, TraceWriter};

const ABLATIONS: [&str; 5] = ["full", "no_repomap", "no_memory", "no_context_compaction", "no_policy_retry"];

fn main() {
    let cells: usize = std::env::var("HCBENCH_BENCH_CELLS").ok().and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let cases = cells / ABLATIONS.len();
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
        command: "ablate".into(),
        benchmark: "synthetic".into(),
        profiles: vec!["local".into()],
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
        ablations: ABLATIONS.iter().map(|a| a.to_string()).collect(),
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
        for (j, a) in ABLATIONS.iter().enumerate() {
            let id = cell_id(&case.id, "local", a, 1, 1);
            let cdir = run_dir.join("cells").join(&id);
            std::fs::create_dir_all(&cdir).unwrap();
            let path = cdir.join("trace.jsonl");
            write_cell(&path, &id, case, a, i, j);
            bytes += std::fs::metadata(&path).unwrap().len();
        }
    }
    println!(
        "wrote {} ablate cells ({:.1} MB of traces) in {:.1}s",
        cases * ABLATIONS.len(),
        bytes as f64 / 1e6,
        t.elapsed().as_secs_f64()
    );

    let threads = rayon::current_num_threads();
    let t = Instant::now();
    let summary_only = report::model::build(run_dir, false).unwrap();
    let build = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let full = report::model::build(run_dir, true).unwrap();
    let build_tl = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let written = report::write_all(run_dir, &full).unwrap();
    let render = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let terminal = report::terminal::ablation_lines(&full, report::terminal::Width::Wide).join("\n");
    let term = t.elapsed().as_secs_f64();
    assert_eq!(summary_only.cells.len(), full.cells.len());
    let ablation = full.ablation.as_ref().expect("an ablate run has the ablation sections");
    assert_eq!(ablation.context.len(), ABLATIONS.len());
    assert!(ablation.context.iter().all(|s| s.context_tokens_per_turn.turns > 0 && s.cells == cases));
    assert!(terminal.contains("Context:"));
    let sizes: Vec<String> = written
        .iter()
        .map(|p| {
            format!(
                "{} {:.1} MB",
                p.file_name().unwrap().to_string_lossy(),
                std::fs::metadata(p).unwrap().len() as f64 / 1e6
            )
        })
        .collect();
    println!(
        "{} cells on {threads} threads: model without timelines {build:.2}s, with timelines {build_tl:.2}s, all exporters {render:.2}s, terminal {term:.3}s; total {:.2}s ({})",
        full.cells.len(),
        build_tl + render + term,
        sizes.join(", ")
    );
}

/// One cell's trace: 8 steps, each with a packed context, a model action with usage (cache
/// hits), a policy decision, a tool result and a memory update; a repo map injected at step 1,
/// a compaction at step 5, a policy retry in some cells, the verifier's first read metric in
/// context cases.
fn write_cell(path: &std::path::Path, id: &str, case: &ManifestCase, ablation: &str, i: usize, j: usize) {
    let mut w = TraceWriter::create(path, "bench", id).unwrap();
    let mut emit = |body: EventBody| {
        w.append(body).unwrap();
    };
    emit(EventBody::RunStarted {
        benchmark: "synthetic".into(),
        case_id: case.id.clone(),
        category: case.category.clone(),
        split: "train".into(),
        profile: "local".into(),
        model: ModelInfo { provider: "x".into(), model: "y".into(), ..Default::default() },
        step_budget: 20,
        epoch: 1,
        agent_spec: String::new(),
        ablation: ablation.into(),
        hcbench_version: "bench".into(),
        sandbox: None,
    });
    emit(EventBody::RepoMapBuilt {
        files: 40,
        symbols: 300,
        skipped: 2,
        parsers: [("regex".to_string(), 40)].into(),
        duration_ms: 3,
    });
    for step in 1..=8u32 {
        let section = |name: &str, tokens: usize, dropped: usize| ContextSection {
            name: name.into(),
            chars: tokens * 4,
            tokens,
            raw_tokens: tokens + 150 * dropped,
            budget: 2000,
            reduced: dropped > 0,
            cut: 0,
            dropped,
            dropped_blocks: (0..dropped).map(|d| format!("step-{d}")).collect(),
        };
        let dropped = usize::from(step > 4);
        emit(EventBody::ContextPacked {
            step,
            mode: "memory".into(),
            sections: vec![
                section("system", 600, 0),
                section("task", 300, 0),
                section("tools", 500, 0),
                section("memory", 200, 0),
                section("repo_map", 400, 0),
                section("observations", 1500, dropped),
            ],
            total_chars: 14000,
            total_tokens: 3500,
            budget_tokens: 8000,
        });
        if step == 1 {
            emit(EventBody::RepoMapUsed {
                step,
                via: "context".into(),
                query: "fix the bug".into(),
                files: vec!["a.py".into(), "b.py".into()],
                tokens: 400,
            });
        }
        if step == 5 {
            emit(EventBody::ContextCompacted {
                step,
                folded_steps: vec![1, 2],
                folded_tokens: 800,
                summary_tokens: 100,
                carried: [("recent_reads".to_string(), vec!["a.py".to_string()])].into(),
            });
        }
        emit(EventBody::ModelAction {
            step,
            tool: "read_file".into(),
            args: serde_json::json!({"path": "a.py"}),
            usage: Some(Usage { input_tokens: 3500, output_tokens: 30, cached_input_tokens: Some(2800) }),
            latency_ms: 700,
            batch: None,
        });
        emit(EventBody::PolicyDecision {
            step,
            tool: "read_file".into(),
            allowed: true,
            reason: "allowed".into(),
            invalid: false,
        });
        emit(EventBody::ToolResult {
            step,
            tool: "read_file".into(),
            ok: true,
            denied: false,
            output: "    1| x = 1\n".repeat(30),
            output_bytes: 420,
            artifact: None,
            modified: vec![],
            read: Some(format!("f{}.py", step % 5)),
            duration_ms: 1,
            batch: None,
        });
        emit(EventBody::MemoryUpdated {
            step,
            changes: vec![MemoryChange { block: "explored_files".into(), added: vec!["a.py".into()], removed: vec![] }],
        });
        if step == 3 && (i + j).is_multiple_of(7) {
            emit(EventBody::PolicyRetry { step, cause: "invalid_action".into(), message: "missing `path`".into() });
        }
    }
    let passed = !(i + j).is_multiple_of(3);
    emit(EventBody::TestResult {
        passed,
        exit_code: Some(i32::from(!passed)),
        timed_out: false,
        duration_ms: 300,
        output: "ok".into(),
        artifact: None,
        runner: None,
    });
    let metrics = if case.category == "context" {
        [("first_read_step".to_string(), serde_json::json!(1 + (i + j) % 4))].into()
    } else {
        Default::default()
    };
    emit(EventBody::VerifierResult {
        passed: true,
        duration_ms: 0,
        checks: vec![Check { name: "unchanged".into(), passed: true, detail: "ok".into() }],
        metrics,
    });
    emit(EventBody::RunFinished {
        outcome: if passed { Outcome::Passed } else { Outcome::Failed },
        reward: if passed { 1.0 } else { 0.0 },
        stop_reason: if passed { "finished" } else { "step_budget_exhausted" }.into(),
        reason: "r".into(),
        elapsed_ms: 2000 + (i as u64 % 700),
    });
}
