//! Context assembly: the per-turn cost of the context pipeline on HC-Bench's fixtures.
//!
//! For every case, a realistic cell state: the repo map ranked against the task, every Python
//! file of the fixture read once (the observations), working memory fed with those reads, and
//! compaction when the observations overflow. It then times one turn's assembly (fold check,
//! memory render, pack) many times. Target (issue 12): under 1 ms per turn.
//!
//! When HCBENCH_LOCAL_LLM_URL is set (a llama-server, e.g. `../shared/tools/local-llm start`),
//! it also compares the token estimate with the server's real tokenizer (SmolLM2's) on the
//! assembled contexts, via llama-server's `/tokenize`.
//!
//! Run: `cargo bench --bench context` (env HCBENCH_BENCH_TURNS, default 200 per case).

use std::path::{Path, PathBuf};
use std::time::Instant;

use hcbench::action::Call;
use hcbench::agent::compaction::Compactor;
use hcbench::agent::context::{self, ContextState, Observation, Rendered};
use hcbench::agent::memory::WorkingMemory;
use hcbench::agent::repomap::RepoIndex;
use hcbench::agent::spec::AgentSpec;
use hcbench::agent::tokens;
use hcbench::agent::tools::ToolOutput;
use hcbench::bench::load_benchmark;

fn python_files(dir: &Path, root: &Path, out: &mut Vec<String>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<_> = rd.flatten().collect();
    entries.sort_by_key(|e| e.path());
    for e in entries {
        let p = e.path();
        if p.is_dir() {
            python_files(&p, root, out);
        } else if p.extension().is_some_and(|x| x == "py") {
            out.push(p.strip_prefix(root).unwrap().to_string_lossy().into_owned());
        }
    }
}

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let turns: usize = std::env::var("HCBENCH_BENCH_TURNS").ok().and_then(|s| s.parse().ok()).unwrap_or(200);
    let bench = load_benchmark(&root, "hc-bench").expect("benchmark loads");
    let spec = AgentSpec::default();
    let mut per_turn_us: Vec<f64> = Vec::new();
    let mut samples: Vec<String> = Vec::new();
    for case in &bench.cases {
        let index = RepoIndex::build(&case.fixture_dir);
        let map = index.render(&case.prompt, ".", spec.budgets.repo_map).text;
        let mut files = Vec::new();
        python_files(&case.fixture_dir, &case.fixture_dir, &mut files);
        let mut memory = WorkingMemory::new(&case.prompt);
        let mut observations = Vec::new();
        for (i, f) in files.iter().enumerate() {
            let text: String = std::fs::read_to_string(case.fixture_dir.join(f))
                .unwrap_or_default()
                .lines()
                .enumerate()
                .map(|(n, l)| format!("{:>5}| {l}\n", n + 1))
                .collect();
            let text = hcbench::util::truncate_str(&text, 8 * 1024).to_string();
            let call = Call::ReadFile { path: f.clone(), start_line: None, end_line: None };
            let out = ToolOutput { ok: true, text: text.clone(), read: Some(f.clone()), ..Default::default() };
            memory.observe(i as u32 + 1, &call, &out);
            let mut o = Observation::new(i as u32 + 1, "read_file", format!("read_file {f}"), "ok", &text);
            o.read = Some(f.clone());
            observations.push(o);
        }
        let step = observations.len() as u32 + 1;
        let started = Instant::now();
        let mut last = None;
        for _ in 0..turns {
            // One turn: the compaction check, then the projection with memory and summary.
            let mut compactor = Compactor::default();
            compactor.fold(&observations, spec.budgets.observations);
            let summary = |b: usize| compactor.render(b);
            let mem = |b: usize| Rendered::from(memory.render(b));
            let packed = context::pack(&ContextState {
                case,
                spec: &spec,
                repo_map: Some(&map),
                packed: (!compactor.is_empty()).then_some(&summary as context::Renderer<'_>),
                memory: Some(&mem),
                step,
                observations: &observations[compactor.folded()..],
            });
            last = Some(packed);
        }
        per_turn_us.push(started.elapsed().as_secs_f64() * 1e6 / turns as f64);
        let packed = last.unwrap();
        samples.push(packed.texts.iter().map(|(_, t)| t.as_str()).collect::<Vec<_>>().join("\n\n"));
    }
    let mut sorted = per_turn_us.clone();
    sorted.sort_by(f64::total_cmp);
    let mean = sorted.iter().sum::<f64>() / sorted.len() as f64;
    println!(
        "context assembly over {} HC-Bench cases x {turns} turns: mean {:.0} µs/turn, median {:.0} µs, max {:.0} µs (target < 1000 µs)",
        sorted.len(),
        mean,
        sorted[sorted.len() / 2],
        sorted[sorted.len() - 1]
    );

    if let Ok(url) = std::env::var("HCBENCH_LOCAL_LLM_URL") {
        let server = url.trim_end_matches('/').trim_end_matches("/v1");
        let (mut est, mut real) = (0usize, 0usize);
        let mut ratios = Vec::new();
        for text in &samples {
            let body: serde_json::Value = ureq::post(&format!("{server}/tokenize"))
                .send_json(serde_json::json!({"content": text}))
                .expect("llama-server /tokenize")
                .body_mut()
                .read_json()
                .unwrap();
            let n = body["tokens"].as_array().map_or(0, Vec::len);
            let e = tokens::estimate(text);
            est += e;
            real += n;
            ratios.push(e as f64 / n as f64);
        }
        ratios.sort_by(f64::total_cmp);
        println!(
            "token estimate vs SmolLM2's tokenizer on {} assembled contexts: {est} estimated / {real} real = {:.2} overall; per context {:.2} to {:.2} (median {:.2})",
            samples.len(),
            est as f64 / real as f64,
            ratios[0],
            ratios[ratios.len() - 1],
            ratios[ratios.len() / 2]
        );
    }
}
