//! Harness overhead: an oracle matrix of the whole benchmark with three profiles, with the
//! sandbox on (bubblewrap, the default) and off (`--sandbox none`), against a floor that runs
//! the same test and verifier commands directly, without a sandbox, at the same parallelism.
//!
//! The floor runs with the sandbox's environment (its PATH above all), so both sides start the
//! same programs; the unsandboxed arm uses hcbench's PATH, as `--sandbox none` does.
//!
//! Targets: hcbench without a sandbox <= 1.15x the floor (DESIGN.md: the harness's cost); hcbench
//! with the sandbox <= 1.10x hcbench running the same commands directly, without it (issue 14:
//! the sandbox's cost). The sandboxed run against the floor, both costs together, is printed
//! too. The three arms of a round run back to back, in an order that rotates from round to
//! round, and each ratio is the median of the per-round ratios.
//!
//! Per-cell harness cost (issue 19: under 2 ms mean): a cell's wall time minus the time it
//! waited on its commands and its model, in microseconds, as each cell reports it
//! (`agent::run_cell_with`, the `hcbench::cost` debug event; what counts as a command's time is
//! said at `process::WaitClock`: its sandbox's set-up included). Reported for the matrix's
//! sandboxed and unsandboxed arms (two cells at once on two cores), and for a quick arm of its
//! own: every case's oracle cell run one at a time, alternating without and with the sandbox,
//! HCBENCH_BENCH_CELL_ROUNDS times (default 3). Each of those cells runs through the engine
//! (`engine::execute`, a batch of one into its own run directory with its `results.jsonl`), so
//! the engine's per-cell work outside `run_cell_with` (the cell's task, storing the finished
//! trace, the results line) is reported beside it, as "engine per cell". The old estimate from the traces (millisecond
//! durations, truncated) is printed beside it. Also prints the per-command cost of setting up
//! the sandbox: the same trivial command run many times through hcbench's process runner with
//! and without bubblewrap.
//!
//! Run: `cargo bench --bench overhead` (env HCBENCH_BENCH_ROUNDS, default 3, 0 for the quick
//! arms alone; HCBENCH_BENCH_JOBS, default the number of cores), with a PATH whose `python3` is
//! the system's (a pyenv shim first on PATH makes the `--sandbox none` arm start a slower Python
//! than the other two). Results are written to docs/performance.md by hand.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hcbench::agent::spec::AgentSpec;
use hcbench::bench::load_benchmark;
use hcbench::engine::{self, Cancel};
use hcbench::events::NullSink;
use hcbench::model::Profile;
use hcbench::process::{self, CommandSpec};
use hcbench::rundir::{MANIFEST_SCHEMA_VERSION, Manifest, RunDir};
use hcbench::sandbox::{Isolation, Sandbox, SandboxChoice};
use hcbench::trace::{EventBody, read_trace};
use tracing_subscriber::layer::SubscriberExt;

fn main() {
    let costs = Costs::install();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let env_usize = |name: &str| std::env::var(name).ok().and_then(|s| s.parse::<usize>().ok());
    let rounds = env_usize("HCBENCH_BENCH_ROUNDS").unwrap_or(3);
    let cell_rounds = env_usize("HCBENCH_BENCH_CELL_ROUNDS").unwrap_or(3);
    let jobs = env_usize("HCBENCH_BENCH_JOBS")
        .unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2));
    let bench = load_benchmark(&root, "hc-bench").expect("benchmark loads");
    let case_ids: Vec<String> = bench.cases.iter().map(|c| c.id.clone()).collect();
    let profiles: Vec<Profile> = ["oracle-a", "oracle-b", "oracle-c"]
        .iter()
        .map(|n| Profile { name: n.to_string(), ..Profile::oracle() })
        .collect();
    let spec = Arc::new(AgentSpec::default());
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let scratch = tempfile::tempdir().unwrap();

    let sandbox =
        Sandbox::resolve(SandboxChoice::Bubblewrap).expect("bubblewrap works here (Debian package bubblewrap)");

    // The quick arm: one cell at a time, so a cell's cost is its own, not its neighbour's. Each
    // cell runs through the engine, as in `matrix`, into a run directory of its own.
    let mut quick = Vec::new();
    for round in 0..cell_rounds {
        for (k, case_id) in case_ids.iter().enumerate() {
            for arm in [(k + round) % 2, (k + round + 1) % 2] {
                let run_dir = scratch.path().join(format!("cells-{round}-{k}-{arm}"));
                let isolation = Isolation {
                    sandbox: if arm == 0 { sandbox.clone() } else { Sandbox::None },
                    ..Isolation::unsandboxed(&run_dir)
                };
                let target = engine::Target { run_id: "bench", run_dir: &run_dir, isolation: &isolation };
                let cells = engine::plan(target, &bench, std::slice::from_ref(case_id), &profiles[..1], 1, &spec);
                // The run directory and its results file exist before the clock starts, as in
                // `matrix` (once per run, not per cell).
                let run = RunDir::create(&run_dir, bench_manifest(&bench.name)).unwrap();
                let results = Arc::new(run.results().unwrap());
                let batch = engine::Batch {
                    run_id: "bench",
                    run_dir: run.path(),
                    cells: cells.into(),
                    jobs: 1,
                    budget: None,
                    keep: engine::Keep::Summaries,
                };
                let t0 = Instant::now();
                let summaries = rt.block_on(engine::execute(batch, results.clone(), Cancel::default()));
                let engine_us = t0.elapsed().as_micros() as u64;
                results.finish().unwrap();
                assert_eq!(summaries[0].reward, 1.0, "the oracle must pass {case_id}");
                let [mut cost] = <[Cost; 1]>::try_from(costs.take()).expect("one cost event per cell");
                // The engine's share: everything `execute` did for the cell outside the cell's
                // own `run_cell_with` (its task, storing the finished trace, the results line).
                cost.engine_us = Some(engine_us.saturating_sub(cost.wall_us));
                quick.push(cost);
                drop(run);
                std::fs::remove_dir_all(&run_dir).unwrap();
            }
        }
    }
    report_costs(&format!("one cell at a time ({cell_rounds} x {} cases)", case_ids.len()), &quick, None);

    let mut times: [Vec<f64>; 3] = Default::default();
    let mut ratios: [Vec<f64>; 3] = Default::default();
    let mut matrix: Vec<Cost> = Vec::new();
    let mut from_traces: Vec<f64> = Vec::new();
    for round in 0..rounds {
        let mut t = [0.0f64; 3];
        for k in 0..3 {
            let arm = (round + k) % 3;
            if arm == 2 {
                // The floor: the commands the unsandboxed run of round 0 ran (the oracle's are
                // the same every round), directly in its workspaces, at the same parallelism.
                // Round 0 runs its arms in order, so that run exists before any floor.
                let work = commands_of(&scratch.path().join("round-0-arm-1"), &bench);
                // The sandbox's environment, PATH included: the floor runs the very programs the
                // sandboxed commands run (a PATH of hcbench's may find others first, such as a
                // pyenv shim, which would make the comparison one of two Pythons).
                let floor_env = hcbench::sandbox::child_env(&sandbox, &[]);
                let t1 = Instant::now();
                let pool = rayon::ThreadPoolBuilder::new().num_threads(jobs).build().unwrap();
                pool.install(|| {
                    use rayon::prelude::*;
                    work.par_iter().for_each(|(cwd, argvs)| {
                        for argv in argvs {
                            let _ = std::process::Command::new(&argv[0])
                                .args(&argv[1..])
                                .current_dir(cwd)
                                .env_clear()
                                .envs(floor_env.iter().cloned())
                                .output();
                        }
                    })
                });
                t[2] = t1.elapsed().as_secs_f64();
                continue;
            }
            let run_dir = scratch.path().join(format!("round-{round}-arm-{arm}"));
            std::fs::create_dir_all(run_dir.join("cells")).unwrap();
            let isolation = Isolation {
                sandbox: if arm == 0 { sandbox.clone() } else { Sandbox::None },
                ..Isolation::unsandboxed(&run_dir)
            };
            let target = engine::Target { run_id: "bench", run_dir: &run_dir, isolation: &isolation };
            let cells = engine::plan(target, &bench, &case_ids, &profiles, 1, &spec);
            let n = cells.len();
            let t0 = Instant::now();
            let summaries = rt.block_on(engine::execute(
                engine::Batch {
                    run_id: "bench",
                    run_dir: &run_dir,
                    cells: cells.into(),
                    jobs,
                    budget: None,
                    keep: engine::Keep::Summaries,
                },
                Arc::new(NullSink),
                Cancel::default(),
            ));
            t[arm] = t0.elapsed().as_secs_f64();
            assert_eq!(summaries.len(), n);
            assert!(summaries.iter().all(|s| s.reward == 1.0), "the oracle must pass every case");
            matrix.extend(costs.take());
            if arm == 0 {
                from_traces.extend(harness_cost_from_traces(&run_dir));
            }
        }
        if rounds == 0 {
            break;
        }
        println!(
            "round {round}: {} cells, jobs {jobs}: sandboxed {:.2}s, unsandboxed {:.2}s, floor {:.2}s; sandboxed/floor {:.3}, unsandboxed/floor {:.3}, sandboxed/unsandboxed {:.3}",
            case_ids.len() * profiles.len(),
            t[0],
            t[1],
            t[2],
            t[0] / t[2],
            t[1] / t[2],
            t[0] / t[1]
        );
        for k in 0..3 {
            times[k].push(t[k]);
        }
        ratios[0].push(t[0] / t[2]);
        ratios[1].push(t[1] / t[2]);
        ratios[2].push(t[0] / t[1]);
    }
    if rounds > 0 {
        let median = |v: &mut Vec<f64>| {
            v.sort_by(|a, b| a.total_cmp(b));
            v[v.len() / 2]
        };
        println!(
            "median: sandboxed {:.2}s, unsandboxed {:.2}s, floor {:.2}s; per-round ratios (median): sandboxed/unsandboxed {:.3} (the sandbox's own cost; target <= 1.10, issue 14), unsandboxed/floor {:.3} (the harness's cost; target <= 1.15, DESIGN.md), sandboxed/floor {:.3} (both)",
            median(&mut times[0]),
            median(&mut times[1]),
            median(&mut times[2]),
            median(&mut ratios[2]),
            median(&mut ratios[1]),
            median(&mut ratios[0]),
        );
        report_costs(&format!("in the matrix ({rounds} rounds, jobs {jobs})"), &matrix, Some(&mut from_traces));
    }
    setup_cost(&rt, &sandbox, scratch.path());
}

/// One cell's report of its own cost (the `hcbench::cost` event of `agent::run_cell_with`).
#[derive(Debug, Default, Clone)]
struct Cost {
    sandbox: String,
    wall_us: u64,
    commands_us: u64,
    harness_us: u64,
    /// The parts of `harness_us` the cell timed apart (`process::Part`, and the removals' wait).
    workspace_us: u64,
    repo_map_us: u64,
    checkpoint_us: u64,
    trace_us: u64,
    context_us: u64,
    tools_us: u64,
    scoring_us: u64,
    removal_wait_us: u64,
    /// The quick arm's: the engine's time for the cell outside `run_cell_with`.
    engine_us: Option<u64>,
}

/// A run directory's manifest for the quick arm's one-cell runs (what `RunDir::create` needs).
fn bench_manifest(benchmark: &str) -> Manifest {
    serde_json::from_value(serde_json::json!({
        "schema_version": MANIFEST_SCHEMA_VERSION,
        "run_id": "bench",
        "hcbench_version": env!("CARGO_PKG_VERSION"),
        "command": "bench",
        "benchmark": benchmark,
        "profiles": ["oracle-a"],
        "cases": [],
        "epochs": 1,
        "jobs": 1,
        "started_at": "",
    }))
    .expect("a manifest")
}

impl tracing::field::Visit for Cost {
    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        match field.name() {
            "wall_us" => self.wall_us = value,
            "commands_us" => self.commands_us = value,
            "harness_us" => self.harness_us = value,
            "workspace_us" => self.workspace_us = value,
            "repo_map_us" => self.repo_map_us = value,
            "checkpoint_us" => self.checkpoint_us = value,
            "trace_us" => self.trace_us = value,
            "context_us" => self.context_us = value,
            "tools_us" => self.tools_us = value,
            "scoring_us" => self.scoring_us = value,
            "removal_wait_us" => self.removal_wait_us = value,
            _ => {}
        }
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "sandbox" {
            self.sandbox = format!("{value:?}");
        }
    }
}

/// Collects the cells' cost events: the bench's one subscriber, listening to that target alone.
#[derive(Clone, Default)]
struct Costs(Arc<Mutex<Vec<Cost>>>);

impl Costs {
    fn install() -> Costs {
        use tracing_subscriber::Layer;
        let costs = Costs::default();
        let only = tracing_subscriber::filter::Targets::new().with_target("hcbench::cost", tracing::Level::DEBUG);
        let subscriber = tracing_subscriber::registry().with(costs.clone().with_filter(only));
        tracing::subscriber::set_global_default(subscriber).expect("the bench's only subscriber");
        costs
    }

    /// The costs reported since the last call.
    fn take(&self) -> Vec<Cost> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Costs {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let mut cost = Cost::default();
        event.record(&mut cost);
        self.0.lock().unwrap().push(cost);
    }
}

/// Mean, median and p95 of the harness's own cost per cell, sandboxed and not, in ms; with
/// `from_traces`, the old estimate from the sandboxed traces' millisecond durations beside it.
fn report_costs(label: &str, costs: &[Cost], from_traces: Option<&mut Vec<f64>>) {
    for mechanism in ["bubblewrap", "none"] {
        let mut ms: Vec<f64> =
            costs.iter().filter(|c| c.sandbox == mechanism).map(|c| c.harness_us as f64 / 1000.0).collect();
        if ms.is_empty() {
            continue;
        }
        let commands: f64 = costs.iter().filter(|c| c.sandbox == mechanism).map(|c| c.commands_us as f64).sum();
        let wall: f64 = costs.iter().filter(|c| c.sandbox == mechanism).map(|c| c.wall_us as f64).sum();
        let (mean, median, p95) = stats(&mut ms);
        println!(
            "per-cell harness cost excluding commands and model, {label}, sandbox {mechanism}: {} cells, mean {mean:.2} ms, median {median:.2} ms, p95 {p95:.2} ms (commands {:.1}% of cell wall time, mean cell {:.0} ms)",
            ms.len(),
            100.0 * commands / wall,
            wall / 1000.0 / ms.len() as f64,
        );
        let of_mechanism = || costs.iter().filter(|c| c.sandbox == mechanism);
        let mean_ms =
            |part: fn(&Cost) -> u64| of_mechanism().map(|c| part(c) as f64).sum::<f64>() / 1000.0 / ms.len() as f64;
        let parts = [
            mean_ms(|c| c.workspace_us),
            mean_ms(|c| c.repo_map_us),
            mean_ms(|c| c.checkpoint_us),
            mean_ms(|c| c.trace_us),
            mean_ms(|c| c.context_us),
            mean_ms(|c| c.tools_us),
            mean_ms(|c| c.scoring_us),
            mean_ms(|c| c.removal_wait_us),
        ];
        println!(
            "  of which, mean per cell: fixture copy {:.2} ms, repo map {:.2} ms, checkpoints {:.2} ms, trace {:.2} ms, context {:.2} ms, tools {:.2} ms, scoring {:.2} ms, wait for removals {:.2} ms, the rest {:.2} ms",
            parts[0],
            parts[1],
            parts[2],
            parts[3],
            parts[4],
            parts[5],
            parts[6],
            parts[7],
            mean - parts.iter().sum::<f64>(),
        );
        let mut engine: Vec<f64> = of_mechanism().filter_map(|c| c.engine_us).map(|us| us as f64 / 1000.0).collect();
        if !engine.is_empty() {
            let mut total: Vec<f64> =
                of_mechanism().filter_map(|c| c.engine_us.map(|e| (c.harness_us + e) as f64 / 1000.0)).collect();
            let (mean, median, p95) = stats(&mut engine);
            let (t_mean, t_median, t_p95) = stats(&mut total);
            println!(
                "  engine per cell (its task, storing the finished trace, results.jsonl): mean {mean:.2} ms, median {median:.2} ms, p95 {p95:.2} ms; harness + engine: mean {t_mean:.2} ms, median {t_median:.2} ms, p95 {t_p95:.2} ms"
            );
        }
    }
    if let Some(v) = from_traces.filter(|v| !v.is_empty()) {
        let (mean, median, p95) = stats(v);
        println!(
            "  the same from the sandboxed traces' millisecond durations (the old estimate): mean {mean:.1} ms, median {median:.1} ms, p95 {p95:.1} ms"
        );
    }
}

/// Mean, median and p95 (sorts `v`).
fn stats(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    (mean, v[v.len() / 2], v[(v.len() * 95 / 100).min(v.len() - 1)])
}

/// The per-command cost of the sandbox: `true` run many times through hcbench's process
/// runner, alternating: directly, in a sandbox of its own (as the verifier runs), and in a
/// cell's supervised sandbox (as the agent's commands and the tests run), set up once.
fn setup_cost(rt: &tokio::runtime::Runtime, sandbox: &Sandbox, dir: &Path) {
    const N: usize = 200;
    let cell = sandbox.for_cell().unwrap();
    assert!(cell.cell().is_some(), "the bench finds the hcbench binary to supervise a cell");
    let mut times: [Vec<f64>; 3] = Default::default();
    for i in 0..3 * N {
        let s = [&Sandbox::None, sandbox, &cell][i % 3];
        let spec = CommandSpec::new(vec!["true".into()], dir, Duration::from_secs(10), s);
        let t0 = Instant::now();
        let out = rt.block_on(process::run(&spec)).unwrap();
        let ms = t0.elapsed().as_secs_f64() * 1000.0;
        assert!(out.success());
        // The cell's first run starts its sandbox: that is the once-per-cell cost, not this.
        if i != 2 {
            times[i % 3].push(ms);
        }
    }
    for t in &mut times {
        t.sort_by(|a, b| a.total_cmp(b));
    }
    let [direct, own, cell] = &times;
    let m = |v: &Vec<f64>| v[v.len() / 2];
    let p95 = |v: &Vec<f64>| v[v.len() * 95 / 100];
    println!(
        "per command (`true`, {N} runs each, median / p95): direct {:.2} / {:.2} ms; in a sandbox of its own {:.2} / {:.2} ms (+{:.2} ms); in the cell's supervised sandbox {:.2} / {:.2} ms (+{:.2} ms)",
        m(direct),
        p95(direct),
        m(own),
        p95(own),
        m(own) - m(direct),
        m(cell),
        p95(cell),
        m(cell) - m(direct),
    );
}

/// The direct equivalent of a case's tests: its `test_command`, or for hcbench's runner the
/// plain `python3 -m unittest discover` it stands for (so the ratio includes the runner's cost).
fn test_argv(case: &hcbench::bench::Case) -> Vec<String> {
    match &case.tests {
        hcbench::bench::TestSpec::Command(argv) => argv.clone(),
        hcbench::bench::TestSpec::Runner(r) => {
            ["python3", "-m", "unittest", "discover", "-s", &r.start_dir].map(String::from).to_vec()
        }
    }
}

/// For each cell: its workspace and the argvs hcbench ran in it (the oracle's run_tests calls,
/// the final test command, the verifier command), in order.
fn commands_of(run_dir: &Path, bench: &hcbench::bench::Benchmark) -> Vec<(PathBuf, Vec<Vec<String>>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(run_dir.join("cells")).unwrap().flatten() {
        let cell_dir = entry.path();
        let read = read_trace(&cell_dir.join("trace.jsonl")).unwrap();
        let mut case = None;
        let mut argvs = Vec::new();
        for e in &read.events {
            match &e.body {
                EventBody::RunStarted { case_id, .. } => case = bench.case(case_id),
                EventBody::ToolResult { tool, denied: false, .. } if tool == "run_tests" => {
                    argvs.push(test_argv(case.unwrap()));
                }
                EventBody::TestResult { .. } => argvs.push(test_argv(case.unwrap())),
                EventBody::VerifierResult { .. } => {
                    if let Some(cmd) = &case.unwrap().verifier.command {
                        let ws = cell_dir.join("workspace");
                        let bench_dir = bench.dir.to_string_lossy();
                        argvs.push(
                            cmd.iter()
                                .map(|a| {
                                    a.replace("{benchmark_dir}", &bench_dir)
                                        .replace("{workspace}", &ws.to_string_lossy())
                                })
                                .collect(),
                        );
                    }
                }
                _ => {}
            }
        }
        out.push((cell_dir.join("workspace"), argvs));
    }
    out
}

/// Per cell: elapsed time minus the time spent in child processes, in ms, from the trace's
/// millisecond figures (each truncated: the old estimate, biased upwards).
fn harness_cost_from_traces(run_dir: &Path) -> Vec<f64> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(run_dir.join("cells")).unwrap().flatten() {
        let read = read_trace(&entry.path().join("trace.jsonl")).unwrap();
        let mut commands = 0u64;
        let mut elapsed = 0u64;
        for e in &read.events {
            match &e.body {
                EventBody::ToolResult { tool, duration_ms, .. } if tool == "run_tests" || tool == "run_command" => {
                    commands += duration_ms
                }
                EventBody::TestResult { duration_ms, .. } => commands += duration_ms,
                EventBody::VerifierResult { duration_ms, .. } => commands += duration_ms,
                EventBody::RunFinished { elapsed_ms, .. } => elapsed = *elapsed_ms,
                _ => {}
            }
        }
        out.push(elapsed.saturating_sub(commands) as f64);
    }
    out
}
