//! Checkpoint and resume inside a cell (issue 18, item 1): what a checkpoint costs per step,
//! and how long a killed cell takes to reach its next action when it is resumed.
//!
//! 1. Per step: every HC-Bench case runs a real cell (the embedded loop, no sandbox) of 40
//!    scripted steps on its own fixture: reads of the fixture's files, writes of new files,
//!    searches and listings, so the observations, the working memory and the workspace grow as
//!    a model's would. Each `checkpoint` event carries the time the checkpoint took (gathering
//!    the state, digesting the workspace with its stat cache, storing new contents, writing
//!    the file atomically): the median, p95 and maximum over all steps of all
//!    cases are printed, and the size of the step-40 files. Target: under 2 ms per step.
//! 2. Resume: the largest fixture's cell runs its 40 steps and hangs in step 41 (a command that
//!    sleeps); its task is dropped, as a killed process leaves it (no `run_finished`). Then it
//!    is resumed, again and again, and timed from the call to the moment step 41's
//!    `model_action` is in the trace. Once with the workspace intact (verified against the
//!    digests) and once with it deleted (rebuilt from the fixture and the stored contents: the
//!    `resumed` event's `restore_ms` is printed apart). Target: under 100 ms plus the restore.
//!
//! Run: `cargo bench --bench checkpoint` (env HCBENCH_BENCH_ROUNDS, default 10: resumes per
//! mode). Results are written to docs/performance.md by hand.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hcbench::action::Action;
use hcbench::agent::spec::AgentSpec;
use hcbench::agent::{CellPlan, run_cell};
use hcbench::bench::{Benchmark, load_benchmark};
use hcbench::engine::{self, Target};
use hcbench::model::Profile;
use hcbench::model::scripted::Script;
use hcbench::sandbox::Isolation;
use hcbench::trace::{EventBody, read_trace};
use serde_json::json;

const STEPS: usize = 40;

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let rounds: usize = std::env::var("HCBENCH_BENCH_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(10);
    let mut bench = load_benchmark(&root, "hc-bench").expect("benchmark loads");
    // A multi-session case plays its script one part per session (cut at `finish`); the
    // 40-step script here is one part, so those cases are left out (their checkpoints are the
    // same code, on the same fixtures).
    bench.cases.retain(|c| c.sessions.is_none());
    for case in &mut bench.cases {
        case.step_budget = STEPS as u32 + 5;
        case.cell_timeout = Duration::from_secs(600);
        if !case.allowed_programs.iter().any(|p| p == "python3") {
            case.allowed_programs.push("python3".into());
        }
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let scratch = tempfile::tempdir().unwrap();

    // 1. Checkpoint cost per step, on every fixture.
    let mut per_step_us: Vec<u64> = Vec::new();
    let mut last_bytes: Vec<u64> = Vec::new();
    let mut by_case: Vec<(String, u64, u64, u64)> = Vec::new();
    for case in &bench.cases {
        let script = script_for(&case.fixture_dir, false);
        let plan = plan(&bench, &case.id, script, &scratch.path().join("cost"));
        rt.block_on(run_cell(&plan)).expect("the cell runs");
        let events = read_trace(&plan.cell_dir.join("trace.jsonl")).unwrap().events;
        let mut mine = Vec::new();
        for e in &events {
            if let EventBody::Checkpoint { duration_us, bytes, step, .. } = &e.body {
                mine.push(*duration_us);
                if *step as usize == STEPS {
                    last_bytes.push(*bytes);
                }
            }
        }
        assert!(mine.len() >= STEPS, "{}: {} checkpoints", case.id, mine.len());
        let files = walk_count(&case.fixture_dir);
        by_case.push((case.id.clone(), files, median(&mut mine.clone()), *mine.iter().max().unwrap()));
        per_step_us.extend(mine);
    }
    let n = per_step_us.len();
    let med = median(&mut per_step_us);
    per_step_us.sort_unstable();
    let p95 = per_step_us[(n * 95 / 100).min(n - 1)];
    let max = *per_step_us.last().unwrap();
    println!("checkpoint cost per step: {n} checkpoints over {} HC-Bench cells of {STEPS} steps", bench.cases.len());
    println!(
        "  median {:.3} ms, p95 {:.3} ms, max {:.3} ms",
        med as f64 / 1000.0,
        p95 as f64 / 1000.0,
        max as f64 / 1000.0
    );
    last_bytes.sort_unstable();
    println!(
        "  checkpoint file at step {STEPS}: median {} KB, max {} KB",
        last_bytes[last_bytes.len() / 2] / 1024,
        last_bytes.last().unwrap() / 1024
    );
    by_case.sort_by_key(|c| std::cmp::Reverse(c.1));
    for (id, files, med, max) in by_case.iter().take(3) {
        println!(
            "  largest fixture {id} ({files} files): median {:.3} ms, max {:.3} ms",
            *med as f64 / 1000.0,
            *max as f64 / 1000.0
        );
    }

    // 2. Resume of a killed 40-step cell to its next action, on the largest fixture.
    let largest = by_case[0].0.clone();
    let case = bench.case(&largest).unwrap().clone();
    let plan = plan(&bench, &largest, script_for(&case.fixture_dir, true), &scratch.path().join("resume"));
    let trace = plan.cell_dir.join("trace.jsonl");
    let task = rt.spawn({
        let plan = plan.clone();
        async move { run_cell(&plan).await }
    });
    wait_for(&trace, "\"kind\":\"model_action\"", STEPS as u64 + 1, 1, Duration::from_secs(300));
    kill(&rt, task);
    assert!(!has_step_checkpoint(&trace, STEPS as u32 + 1), "step 41 must hang, not end");
    for restore in [false, true] {
        let mut to_action = Vec::new();
        let mut restore_ms = Vec::new();
        for _ in 0..rounds {
            if restore {
                std::fs::remove_dir_all(&plan.workspace).unwrap();
            }
            let before = count_step(&trace, "\"kind\":\"model_action\"", STEPS as u64 + 1);
            let t0 = Instant::now();
            let task = rt.spawn({
                let plan = plan.clone();
                async move { run_cell(&plan).await }
            });
            wait_for(&trace, "\"kind\":\"model_action\"", STEPS as u64 + 1, before + 1, Duration::from_secs(60));
            to_action.push(t0.elapsed().as_micros() as u64);
            kill(&rt, task);
            let events = read_trace(&trace).unwrap().events;
            let Some(EventBody::Resumed { restore_ms: r, workspace_restored, from_step, .. }) =
                events.iter().rev().map(|e| &e.body).find(|b| matches!(b, EventBody::Resumed { .. }))
            else {
                panic!("no resumed event")
            };
            assert_eq!((*workspace_restored, *from_step), (restore, STEPS as u32));
            restore_ms.push(*r);
        }
        let what = if restore { "workspace deleted, restored" } else { "workspace intact, verified" };
        println!(
            "resume of a killed {STEPS}-step cell ({largest}, {what}): to the next action median {:.1} ms, max {:.1} ms; of which verify/restore median {} ms",
            median(&mut to_action) as f64 / 1000.0,
            *to_action.iter().max().unwrap() as f64 / 1000.0,
            median(&mut restore_ms)
        );
    }
}

/// A cell of the one case with its own script, in its own run directory, saving a checkpoint
/// after every step (`--checkpoint-interval 0`): what one save costs is what is measured.
fn plan(bench: &Benchmark, case_id: &str, script: Vec<Action>, dir: &Path) -> CellPlan {
    let isolation = Isolation { checkpoint_interval: Duration::ZERO, ..Isolation::unsandboxed(dir) };
    let run_dir = dir.join("run");
    std::fs::create_dir_all(run_dir.join("cells")).unwrap();
    let profile = Profile::scripted("bench", Script::fixed("bench", script, BTreeMap::new()));
    let target = Target { run_id: "bench", run_dir: &run_dir, isolation: &isolation };
    let spec = Arc::new(AgentSpec::default());
    engine::plan(target, bench, &[case_id.to_string()], &[profile], 1, &spec).remove(0)
}

/// Forty steps over the fixture's files: a read, a write of a new note, a search, a listing,
/// in turn; then `finish`, or (`hang`) a command that sleeps for an hour.
fn script_for(fixture: &Path, hang: bool) -> Vec<Action> {
    let mut files = Vec::new();
    collect(fixture, fixture, &mut files);
    files.sort();
    let mut out = Vec::new();
    for i in 0..STEPS {
        out.push(match i % 4 {
            0 => Action::new("read_file", json!({"path": files[i / 4 % files.len()]})),
            1 => Action::new(
                "write_file",
                json!({"path": format!("notes/step-{i}.md"), "content": format!("step {i}: {}\n", "x".repeat(400))}),
            ),
            2 => Action::new("search_code", json!({"pattern": "def "})),
            _ => Action::new("list_files", json!({"path": "."})),
        });
    }
    out.push(if hang {
        Action::new("run_command", json!({"argv": ["python3", "-c", "import time; time.sleep(3600)"]}))
    } else {
        Action::finish("done")
    });
    out
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<String>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(root, &p, out);
        } else if !p.to_string_lossy().contains(".env") {
            out.push(p.strip_prefix(root).unwrap().to_string_lossy().into_owned());
        }
    }
}

fn walk_count(dir: &Path) -> u64 {
    let mut v = Vec::new();
    collect(dir, dir, &mut v);
    v.len() as u64
}

/// Lines of `kind` at `step` in the trace.
fn count_step(trace: &Path, kind: &str, step: u64) -> u64 {
    let step = format!("\"step\":{step},");
    std::fs::read_to_string(trace).unwrap_or_default().lines().filter(|l| l.contains(kind) && l.contains(&step)).count()
        as u64
}

fn wait_for(trace: &Path, kind: &str, step: u64, count: u64, limit: Duration) {
    let t0 = Instant::now();
    while count_step(trace, kind, step) < count {
        assert!(t0.elapsed() < limit, "no {kind} of step {step} in {}", trace.display());
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn has_step_checkpoint(trace: &Path, step: u32) -> bool {
    count_step(trace, "\"kind\":\"checkpoint\"", step as u64) > 0
}

/// Drops the cell's task as a killed process would leave it: no `run_finished`.
fn kill(rt: &tokio::runtime::Runtime, task: tokio::task::JoinHandle<std::io::Result<hcbench::replay::CellSummary>>) {
    task.abort();
    let _ = rt.block_on(task);
}

fn median(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}
