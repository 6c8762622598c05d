//! Replay throughput: MB/s of trace folded into summaries on one core, and the time to build
//! the report model of a many-cell run directory.
//!
//! Target (DESIGN.md): at least 200 MB/s of trace per core. Run: `cargo bench --bench replay`
//! (env HCBENCH_BENCH_MB, default 64: size of the synthetic trace).

use std::io::Write;
use std::time::Instant;

use hcbench::replay::{replay_trace, summarize};
use hcbench::trace::event::{Check, ContextSection, ModelInfo, Outcome, Usage};
use hcbench::trace::{EventBody, TraceWriter, read_trace};

fn step_events(step: u32) -> Vec<EventBody> {
    vec![
        EventBody::ContextPacked {
            step,
            mode: "memory".into(),
            sections: ["system", "task", "tools", "repo_map", "packed", "observations", "memory", "status"]
                .iter()
                .map(|n| ContextSection {
                    name: n.to_string(),
                    chars: 1200,
                    tokens: 300,
                    raw_tokens: 300,
                    budget: 1000,
                    ..Default::default()
                })
                .collect(),
            total_chars: 9600,
            total_tokens: 2400,
            budget_tokens: 12000,
        },
        EventBody::ModelAction {
            step,
            tool: "read_file".into(),
            args: serde_json::json!({"path": "src/module.py", "start_line": 10, "end_line": 80}),
            usage: Some(Usage { input_tokens: 1800, output_tokens: 40, ..Default::default() }),
            latency_ms: 900,
            batch: None,
        },
        EventBody::PolicyDecision {
            step,
            tool: "read_file".into(),
            allowed: true,
            reason: "allowed".into(),
            invalid: false,
        },
        EventBody::ToolResult {
            step,
            tool: "read_file".into(),
            ok: true,
            denied: false,
            output: "   10| def handler(request):\n".repeat(40),
            output_bytes: 1040,
            artifact: None,
            modified: vec![],
            read: Some("src/module.py".into()),
            duration_ms: 1,
            batch: None,
        },
        EventBody::StateUpdated {
            step,
            steps_used: step,
            files_modified: vec!["src/module.py".into()],
            finished: false,
        },
    ]
}

fn main() {
    let mb: usize = std::env::var("HCBENCH_BENCH_MB").ok().and_then(|s| s.parse().ok()).unwrap_or(64);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    let mut w = TraceWriter::create(&path, "bench-run", "bench-cell").unwrap();
    w.append(EventBody::RunStarted {
        benchmark: "hc-bench".into(),
        case_id: "bugfix-1".into(),
        category: "bugfix".into(),
        split: "train".into(),
        profile: "gpt".into(),
        model: ModelInfo { provider: "openai-responses".into(), model: "gpt-x".into(), ..Default::default() },
        step_budget: u32::MAX,
        epoch: 1,
        agent_spec: "0".repeat(64),
        ablation: String::new(),
        hcbench_version: "bench".into(),
        sandbox: None,
    })
    .unwrap();
    let mut step = 0;
    while std::fs::metadata(&path).unwrap().len() < (mb as u64) << 20 {
        step += 1;
        for e in step_events(step) {
            w.append(e).unwrap();
        }
    }
    w.append(EventBody::VerifierResult {
        passed: true,
        duration_ms: 5,
        checks: vec![Check { name: "unchanged".into(), passed: true, detail: "ok".into() }],
        metrics: Default::default(),
    })
    .unwrap();
    w.append(EventBody::RunFinished {
        outcome: Outcome::Passed,
        reward: 1.0,
        stop_reason: "finished".into(),
        reason: "ok".into(),
        elapsed_ms: 1,
    })
    .unwrap();
    std::io::stdout().flush().unwrap();
    let bytes = std::fs::metadata(&path).unwrap().len() as f64;

    let mut best = f64::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        let s = replay_trace(&path).unwrap();
        assert_eq!(s.steps, step);
        best = best.min(t.elapsed().as_secs_f64());
    }
    // Floors on this machine: scanning every line without building anything, and building a
    // generic JSON tree, to tell parsing cost from hcbench's own cost.
    let text = std::fs::read(&path).unwrap();
    let t = Instant::now();
    for line in text.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let _: serde::de::IgnoredAny = serde_json::from_slice(line).unwrap();
    }
    let scan = t.elapsed().as_secs_f64();
    let t = Instant::now();
    for line in text.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let _: serde_json::Value = serde_json::from_slice(line).unwrap();
    }
    let tree = t.elapsed().as_secs_f64();
    println!("floors: scan only {:.0} MB/s, generic JSON tree {:.0} MB/s", bytes / 1e6 / scan, bytes / 1e6 / tree);
    let t = Instant::now();
    let events = read_trace(&path).unwrap().events;
    let parse = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let _ = summarize(&events);
    let fold = t.elapsed().as_secs_f64();
    println!(
        "replay: {:.1} MB trace, {} events: {:.0} MB/s on one core (best of 3; parse {:.2}s, fold {:.3}s)",
        bytes / 1e6,
        events.len(),
        bytes / 1e6 / best,
        parse,
        fold
    );
}
