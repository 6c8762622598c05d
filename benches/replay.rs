//! Replay throughput: MB/s of trace folded into summaries on one core, and the time to build
//! the report model of a many-cell run directory.
//!
//! Targets: at least 200 MB/s of trace per core (DESIGN.md), and at or above the scan floor
//! measured beside it (issue 19). Run: `cargo bench --bench replay`
//! (env HCBENCH_BENCH_MB, default 64: size of the synthetic trace).

use std::io::Write;
use std::time::Instant;

use hcbench::replay::{Lean, SummaryBuilder, replay_trace, summarize};
use hcbench::trace::event::{Check, ContextSection, ModelInfo, Outcome, Usage};
use hcbench::trace::reader::for_each_line_from;
use hcbench::trace::{EventBody, TraceWriter, for_each_line, read_trace};

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

    // Replay, replay with serde_json alone (the parser before the fast one), and the floor
    // (scanning every line without building anything, from memory), measured in turns so
    // that a noisy machine weighs on each alike; medians of 5. Beside them, the same replay
    // over the trace's bytes already in memory, as the floor reads them: what the file's
    // reading costs (the kernel's copy from the page cache) is the difference.
    let text = std::fs::read(&path).unwrap();
    let (mut fast, mut slow, mut scan, mut in_memory) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..5 {
        let t = Instant::now();
        let s = replay_trace(&path).unwrap();
        assert_eq!(s.steps, step);
        fast.push(t.elapsed().as_secs_f64());

        let t = Instant::now();
        let mut builder = SummaryBuilder::new();
        for_each_line(&path, None, Lean::parse_with_serde_json, |h, e| builder.observe_lean(&h.run_id, &h.cell_id, e))
            .unwrap();
        assert_eq!(builder.finish().unwrap().steps, step);
        slow.push(t.elapsed().as_secs_f64());

        let t = Instant::now();
        for line in text.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let _: serde::de::IgnoredAny = serde_json::from_slice(line).unwrap();
        }
        scan.push(t.elapsed().as_secs_f64());

        let t = Instant::now();
        let mut builder = SummaryBuilder::new();
        let reader = std::io::BufReader::with_capacity(256 * 1024, text.as_slice());
        for_each_line_from(reader, &path, None, Lean::parse, |h, e| builder.observe_lean(&h.run_id, &h.cell_id, e))
            .unwrap();
        assert_eq!(builder.finish().unwrap().steps, step);
        in_memory.push(t.elapsed().as_secs_f64());
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (fast, slow, scan, in_memory) =
        (median(&mut fast), median(&mut slow), median(&mut scan), median(&mut in_memory));
    // The other floor: building a generic JSON tree, to tell parsing cost from hcbench's own.
    let t = Instant::now();
    for line in text.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let _: serde_json::Value = serde_json::from_slice(line).unwrap();
    }
    let tree = t.elapsed().as_secs_f64();
    let mbs = |secs: f64| bytes / 1e6 / secs;
    println!("floors: scan only {:.0} MB/s, generic JSON tree {:.0} MB/s", mbs(scan), mbs(tree));
    println!("replay by serde_json alone: {:.0} MB/s ({:.2}x the scan floor)", mbs(slow), scan / slow);
    println!(
        "replay of the trace's bytes in memory (no file read, as the floor): {:.0} MB/s ({:.2}x the scan floor)",
        mbs(in_memory),
        scan / in_memory
    );
    let t = Instant::now();
    let events = read_trace(&path).unwrap().events;
    let parse = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let _ = summarize(&events);
    let fold = t.elapsed().as_secs_f64();
    println!(
        "replay: {:.1} MB trace, {} events: {:.0} MB/s on one core ({:.2}x the scan floor; medians of 5; full reader: parse {:.2}s, fold {:.3}s)",
        bytes / 1e6,
        events.len(),
        mbs(fast),
        scan / fast,
        parse,
        fold
    );
}
