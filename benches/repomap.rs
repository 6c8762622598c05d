//! Repo map scale: indexes a generated 10,000-file workspace and renders ranked maps of it,
//! timing `RepoIndex::build` and `RepoIndex::render` separately.
//!
//! Target (issue 12): build + render of a 10,000-file tree under 1 s (0.44 s on 2026-11-23). Run:
//! `cargo bench --bench repomap` (env HCBENCH_BENCH_FILES, default 10000).
//!
//! Then the map a cell injects at its first step, for every HC-Bench case (issue 19: the
//! per-cell harness cost): each case's fixture copied afresh, then its index built and its map
//! rendered against the case's task at the default budget, as a cell's first step does, timed
//! apart (the first render parses the files it shows). HCBENCH_BENCH_FIXTURE_ROUNDS rounds
//! (default 5); `HCBENCH_BENCH_FILES=0` runs this part alone.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use hcbench::agent::repomap::RepoIndex;
use hcbench::agent::spec::AgentSpec;
use hcbench::bench::load_benchmark;

const REPEATS: usize = 5;
const WORDS: &[&str] = &[
    "user",
    "quota",
    "cache",
    "order",
    "invoice",
    "session",
    "token",
    "report",
    "page",
    "route",
    "queue",
    "event",
    "metric",
    "payment",
    "account",
    "catalog",
    "message",
    "config",
    "storage",
    "permission",
];

fn word(i: usize) -> &'static str {
    WORDS[i % WORDS.len()]
}

fn camel(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
}

/// A Python module of a few classes with methods and some functions, about 80 lines, that
/// imports and calls names defined by two other modules.
fn python(i: usize) -> String {
    let (a, b) = (word(i), word(i / 7 + 3));
    let mut s = format!(
        "\"\"\"The {a} {b} service, module {i}.\"\"\"\n\nfrom pkg.m{} import {}{}\n\n",
        (i * 31) % 9000,
        camel(word(i + 1)),
        (i * 31) % 9000
    );
    let _ = writeln!(s, "LIMIT_{i} = {i}\n");
    for c in 0..3 {
        let _ = writeln!(s, "class {}{}{i}x{c}(Base):\n    \"\"\"Keeps {a} records.\"\"\"\n", camel(a), camel(b));
        for m in 0..4 {
            let _ = writeln!(
                s,
                "    def {b}_{m}(self, {a}_id: int, limit: int = 10) -> list:\n        value = self.lookup({a}_id)\n        return [value] * limit\n"
            );
        }
    }
    for f in 0..4 {
        let _ = writeln!(
            s,
            "def load_{a}_{f}(path, *args, **kwargs):\n    data = read(path)\n    return {}{}(data)\n",
            camel(word(i + 1)),
            (i * 31) % 9000
        );
    }
    s
}

fn other(i: usize) -> (String, String) {
    let a = word(i);
    match i % 4 {
        0 => (
            format!("rs/m{i}.rs"),
            format!(
                "pub struct {}{i} {{\n    n: u32,\n}}\n\nimpl {}{i} {{\n    pub fn get_{a}(&self) -> u32 {{\n        self.n\n    }}\n}}\n",
                camel(a),
                camel(a)
            ),
        ),
        1 => (
            format!("web/m{i}.ts"),
            format!(
                "export class {}View{i} {{\n  render(): string {{\n    return \"{a}\";\n  }}\n}}\nexport function load{i}(id: number) {{\n}}\n",
                camel(a)
            ),
        ),
        2 => (
            format!("go/m{i}.go"),
            format!(
                "package main\n\ntype {}{i} struct {{\n}}\n\nfunc (s *{}{i}) Handle() error {{\n\treturn nil\n}}\n",
                camel(a),
                camel(a)
            ),
        ),
        _ => (format!("docs/m{i}.md"), format!("# {a}\n\nHow the {a} part works.\n")),
    }
}

fn generate(root: &Path, files: usize) {
    for i in 0..files {
        let (rel, text) =
            if i % 10 < 8 { (format!("pkg/d{}/s{}/m{i}.py", i % 50, i % 7), python(i)) } else { other(i) };
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let files: usize = std::env::var("HCBENCH_BENCH_FILES").ok().and_then(|s| s.parse().ok()).unwrap_or(10_000);
    if files > 0 {
        large_tree(files);
    }
    fixtures();
}

fn large_tree(files: usize) {
    let dir = tempfile::tempdir().unwrap();
    let t = Instant::now();
    generate(dir.path(), files);
    println!("generated {files} files in {:.2?}", t.elapsed());

    let mut builds = Vec::new();
    let mut renders = Vec::new();
    let mut index = RepoIndex::default();
    for _ in 0..REPEATS {
        let t = Instant::now();
        index = RepoIndex::build(dir.path());
        builds.push(t.elapsed());
    }
    let stats = index.stats();
    println!(
        "indexed {} files, {} symbols, {} skipped, parsers {:?}",
        stats.files, stats.symbols, stats.skipped, stats.parsers
    );
    let queries = [
        "Users who hit a permission problem are shown a message about disk quotas; fix the catalog entry",
        "invoice payment session token",
        "",
    ];
    for _ in 0..REPEATS {
        for q in queries {
            let t = Instant::now();
            let view = index.render(q, ".", 1500);
            renders.push(t.elapsed());
            assert!(view.tokens <= 1500);
        }
    }
    let (b, r) = (median(builds.clone()), median(renders.clone()));
    println!(
        "build:  median {b:.2?} (min {:.2?}, max {:.2?}) over {REPEATS} runs",
        builds.iter().min().unwrap(),
        builds.iter().max().unwrap()
    );
    println!(
        "render: median {r:.2?} (min {:.2?}, max {:.2?}) over {} renders at 1500 tokens",
        renders.iter().min().unwrap(),
        renders.iter().max().unwrap(),
        renders.len()
    );
    println!("build + render: {:.2?} (target: under 1 s)", b + r);
}

/// Copies the fixture `from` to `to`, files and folders (HC-Bench fixtures have no links).
fn copy_fixture(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_fixture(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// The first step's map of every HC-Bench case, built from a fresh copy of its fixture.
fn fixtures() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let rounds: usize = std::env::var("HCBENCH_BENCH_FIXTURE_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(5);
    let bench = load_benchmark(root, "hc-bench").expect("benchmark loads");
    let budget = AgentSpec::default().budgets.repo_map;
    let scratch = tempfile::tempdir().unwrap();
    // category -> (build, first render, second render) per cell
    let mut by_category: std::collections::BTreeMap<String, Vec<[Duration; 3]>> = Default::default();
    for round in 0..rounds {
        for case in &bench.cases {
            let ws = scratch.path().join(format!("{round}-{}", case.id));
            copy_fixture(&case.fixture_dir, &ws);
            let t = Instant::now();
            let index = RepoIndex::build(&ws);
            let built = t.elapsed();
            let t = Instant::now();
            let first = index.render(&case.prompt, ".", budget);
            let rendered = t.elapsed();
            let t = Instant::now();
            let again = index.render(&case.prompt, ".", budget);
            let rendered_again = t.elapsed();
            assert_eq!(first, again, "{}: the same index and query give the same map", case.id);
            by_category.entry(case.category.to_string()).or_default().push([built, rendered, rendered_again]);
        }
    }
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let mean = |v: &[[Duration; 3]], k: usize| v.iter().map(|t| ms(t[k])).sum::<f64>() / v.len() as f64;
    println!("HC-Bench first-step maps, {rounds} rounds, mean per cell (ms): build / first render / render again");
    let all: Vec<[Duration; 3]> = by_category.values().flatten().copied().collect();
    for (category, v) in by_category.iter().chain([(&"all".to_string(), &all)]) {
        println!(
            "  {category:<12} {:>3} cells: {:>6.2} / {:>6.2} / {:>6.2}",
            v.len(),
            mean(v, 0),
            mean(v, 1),
            mean(v, 2)
        );
    }
}
