//! A shard's memory and disk against the number of cells (issue 19): the release `hcbench
//! matrix --profiles oracle --sandbox none` over a generated HumanEval-shaped benchmark (164
//! small single-function Python cases, each with its oracle patch), at 164, 1,640 and 4,920
//! cells (epochs multiply the plan), reporting per size:
//!
//! - peak memory of `matrix` (the largest resident set of hcbench and the test commands it
//!   waited for: `getrusage(RUSAGE_CHILDREN)` of a wrapper process that starts only hcbench), and
//!   of `hcbench report` on the finished run, so the run phase and the end-of-run report can be
//!   told apart;
//! - the run directory on disk: allocated blocks (what `du` says), apparent bytes, files and
//!   folders (empty ones counted apart), and the same for the run's workspaces, which live
//!   outside it (`<workspaces>/<run_id>/`);
//! - the run directory in the pack layout (src/trace/pack.rs) and, converted, in the two
//!   layouts before it (a folder and a `trace.jsonl.zst` per cell; a folder and a plain
//!   `trace.jsonl` per cell), with the time to replay the whole run in each;
//! - replay throughput of one cell's trace, plain beside zstd-compressed in its own file and in
//!   a pack (MB/s of the uncompressed bytes), so a compressed trace is shown to replay as fast
//!   as the bench asks.
//!
//! Run: `cargo bench --bench scale` (env HCBENCH_SCALE_SIZES, default `164,1640`; add 4920 when
//! there is time: about 0.1 s of test commands per cell at `--jobs 2`; HCBENCH_SCALE_JOBS,
//! default 2; HCBENCH_SCALE_BIN, another hcbench binary to measure, e.g. an earlier commit's;
//! HCBENCH_SCALE_NO_REPLAY skips the replay arms). Results are written to docs/performance.md by
//! hand.

use std::fmt::Write as _;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// Cases of the generated benchmark (HumanEval has 164).
const CASES: usize = 164;

fn main() {
    // The wrapper mode: start hcbench, wait, print the children's peak resident set.
    if std::env::var_os("HCBENCH_SCALE_WRAP").is_some() {
        return wrap();
    }
    let sizes: Vec<usize> = std::env::var("HCBENCH_SCALE_SIZES")
        .unwrap_or_else(|_| "164,1640".into())
        .split(',')
        .map(|s| s.trim().parse().expect("HCBENCH_SCALE_SIZES: comma-separated cell counts, multiples of 164"))
        .collect();
    let jobs: usize = std::env::var("HCBENCH_SCALE_JOBS").ok().and_then(|s| s.parse().ok()).unwrap_or(2);
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().join("project");
    generate_humaneval(&root);
    let workspaces = scratch.path().join("workspaces");
    std::fs::create_dir_all(&workspaces).unwrap();
    // HCBENCH_SCALE_BIN: another hcbench binary to measure (e.g. a build of an earlier commit).
    let exe = std::env::var_os("HCBENCH_SCALE_BIN")
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_hcbench")), PathBuf::from);

    println!("HumanEval-shaped oracle matrix, --sandbox none, --jobs {jobs}");
    println!(
        "{:>6} {:>8} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7} {:>6} {:>9} {:>8}",
        "cells",
        "wall_s",
        "matrix_MiB",
        "report_MiB",
        "dir_MB",
        "dir_KB/c",
        "files",
        "dirs",
        "empty",
        "ws_KB/c",
        "ws_files"
    );
    let mut last_run = None;
    for &cells in &sizes {
        assert!(cells % CASES == 0, "sizes must be multiples of {CASES}");
        let epochs = cells / CASES;
        let out = scratch.path().join(format!("run-{cells}"));
        let t0 = Instant::now();
        let (matrix_kib, run_phase_kib) = peak_kib(
            &exe,
            &[
                "matrix",
                "--root",
                root.to_str().unwrap(),
                "--benchmark",
                "humaneval",
                "--profiles",
                "oracle",
                "--sandbox",
                "none",
                "--epochs",
                &epochs.to_string(),
                "--jobs",
                &jobs.to_string(),
                "--out",
                out.to_str().unwrap(),
            ],
            &workspaces,
            cells,
        );
        let wall = t0.elapsed().as_secs_f64();
        let (report_kib, _) = peak_kib(&exe, &["report", out.to_str().unwrap()], &workspaces, cells);
        let run_id = serde_json::from_slice::<serde_json::Value>(&std::fs::read(out.join("manifest.json")).unwrap())
            .unwrap()["run_id"]
            .as_str()
            .unwrap()
            .to_string();
        let dir = usage(&out);
        let (cells_dir, reports) = (usage(&out.join("cells")), usage(&out.join("reports")));
        let ws = usage(&workspaces.join(&run_id));
        println!(
            "{:>6} {:>8.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>7} {:>7} {:>6} {:>9.1} {:>8}",
            cells,
            wall,
            matrix_kib as f64 / 1024.0,
            report_kib as f64 / 1024.0,
            dir.blocks_bytes as f64 / 1e6,
            dir.blocks_bytes as f64 / 1024.0 / cells as f64,
            dir.files,
            dir.dirs,
            dir.empty_dirs,
            ws.blocks_bytes as f64 / 1024.0 / cells as f64,
            ws.files,
        );
        println!(
            "       matrix's run phase (until every cell has its result): {:.1} MiB",
            run_phase_kib as f64 / 1024.0
        );
        println!(
            "       of which cells/ {:.1} KB/cell, reports/ {:.1} MB",
            cells_dir.blocks_bytes as f64 / 1024.0 / cells as f64,
            reports.blocks_bytes as f64 / 1e6
        );
        println!(
            "       apparent bytes: run dir {:.1} KB/cell ({} symlinks); traces: {}",
            dir.apparent as f64 / 1024.0 / cells as f64,
            dir.symlinks,
            dir.by_name
                .iter()
                .map(|(k, (n, b))| format!("{k} x{n} {:.1} KB avg", *b as f64 / 1024.0 / *n as f64))
                .collect::<Vec<_>>()
                .join(", ")
        );
        // Replay of the whole run (every cell, in parallel as `hcbench report` does) in this
        // layout and in the two before it, with the disk each takes: the pack; a folder and a
        // trace.jsonl.zst per cell; a folder and a plain trace.jsonl per cell.
        let replay_s = replay_run_s(&out);
        println!(
            "       pack layout: cells/ + cells.pack(.index) {:.2} KB/cell ({} entries in cells/); whole-run replay {:.3}s",
            (cells_dir.blocks_bytes + pack_bytes(&out)) as f64 / 1024.0 / cells as f64,
            std::fs::read_dir(out.join("cells")).unwrap().count(),
            replay_s
        );
        hcbench::trace::stored::unpack(&out, true).unwrap();
        let zst = (usage(&out), usage(&out.join("cells")), replay_run_s(&out));
        println!(
            "       same run, a folder and a .zst per cell (the layout before the pack): {:.1} KB/cell allocated (cells/ {:.1}); whole-run replay {:.3}s",
            zst.0.blocks_bytes as f64 / 1024.0 / cells as f64,
            zst.1.blocks_bytes as f64 / 1024.0 / cells as f64,
            zst.2
        );
        for cell in std::fs::read_dir(out.join("cells")).unwrap().flatten() {
            hcbench::trace::stored::restore_plain(&cell.path().join("trace.jsonl")).unwrap();
        }
        let old = (usage(&out), usage(&out.join("cells")), replay_run_s(&out));
        println!(
            "       same run, plain traces (the layout before compression): {:.1} MB, {:.1} KB/cell allocated (cells/ {:.1}), {:.1} KB/cell apparent; whole-run replay {:.3}s",
            old.0.blocks_bytes as f64 / 1e6,
            old.0.blocks_bytes as f64 / 1024.0 / cells as f64,
            old.1.blocks_bytes as f64 / 1024.0 / cells as f64,
            old.0.apparent as f64 / 1024.0 / cells as f64,
            old.2
        );
        last_run = Some(out);
    }
    if let Some(run) = last_run.filter(|_| std::env::var_os("HCBENCH_SCALE_NO_REPLAY").is_none()) {
        replay_arms(&run, scratch.path());
    }
}

/// Writes `benchmarks/humaneval` and its fixtures under `root`: 164 cases, each one function to
/// write from its docstring (the fixture raises NotImplementedError), two unittest tests that
/// fail before and pass after, and an oracle that writes the body and finishes.
fn generate_humaneval(root: &Path) {
    let bench = root.join("benchmarks/humaneval");
    for d in ["cases", "oracle"] {
        std::fs::create_dir_all(bench.join(d)).unwrap();
    }
    std::fs::write(
        bench.join("benchmark.yaml"),
        "name: humaneval\n\
         description: A HumanEval-shaped benchmark generated by benches/scale.rs.\n\
         categories: [codegen]\n\
         defaults:\n  step_budget: 8\n  timeout_s: 30\n  tests:\n    runner: unittest\n    start_dir: tests\n",
    )
    .unwrap();
    for i in 0..CASES {
        let id = format!("he-{i:03}");
        let func = format!("solve_{i:03}");
        let fixture = root.join("fixtures").join(&id);
        std::fs::create_dir_all(fixture.join("tests")).unwrap();
        std::fs::write(
            fixture.join("solution.py"),
            format!(
                "def {func}(numbers):\n    \"\"\"Return the sum of the even numbers in `numbers`, plus {i}.\n\n    >>> {func}([1, 2, 3, 4])\n    {}\n    >>> {func}([])\n    {i}\n    \"\"\"\n    raise NotImplementedError\n",
                6 + i
            ),
        )
        .unwrap();
        std::fs::write(
            fixture.join("tests/test_solution.py"),
            format!(
                "import unittest\n\nfrom solution import {func}\n\n\nclass SolveTest(unittest.TestCase):\n    def test_examples(self):\n        self.assertEqual({func}([1, 2, 3, 4]), {})\n\n    def test_empty(self):\n        self.assertEqual({func}([]), {i})\n\n    def test_odd_only(self):\n        self.assertEqual({func}([1, 3, 5]), {i})\n",
                6 + i
            ),
        )
        .unwrap();
        std::fs::write(
            bench.join("cases").join(format!("{id}.yaml")),
            format!(
                "id: {id}\ncategory: codegen\nsplit: train\nfixture: {id}\nprompt: |\n  Implement `{func}` in solution.py as its docstring says.\ntests:\n  fail_to_pass:\n    - test_solution.SolveTest.test_examples\n    - test_solution.SolveTest.test_empty\n    - test_solution.SolveTest.test_odd_only\n"
            ),
        )
        .unwrap();
        std::fs::write(
            bench.join("oracle").join(format!("{id}.yaml")),
            format!(
                "actions:\n  - tool: read_file\n    args: {{path: solution.py}}\n  - tool: edit_file\n    args:\n      path: solution.py\n      old: \"    raise NotImplementedError\\n\"\n      new: \"    return sum(n for n in numbers if n % 2 == 0) + {i}\\n\"\n  - tool: finish\n    args: {{answer: \"implemented\"}}\n"
            ),
        )
        .unwrap();
    }
}

/// Runs hcbench with `args` under a wrapper (this bench re-executed) and returns the peak
/// resident set, in KiB, of the processes the wrapper waited for: hcbench, and through it the
/// test commands (each far smaller than hcbench).
/// Also the run phase's peak (see [`wrap`]), 0 for a command without `--out`.
fn peak_kib(exe: &Path, args: &[&str], workspaces: &Path, cells: usize) -> (u64, u64) {
    let me = std::env::current_exe().unwrap();
    let out = Command::new(me)
        .env("HCBENCH_SCALE_WRAP", exe)
        .env("HCBENCH_WORKSPACES", workspaces)
        .env("TMPDIR", workspaces)
        .env("HCBENCH_SCALE_CELLS", cells.to_string())
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |name: &str| text.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| v.trim().parse::<u64>().ok());
    match (field("maxrss_kib "), field("run_phase_kib ")) {
        (Some(k), Some(r)) if out.status.success() => (k, r),
        _ => panic!("hcbench {args:?} failed: {}\n{}", text, String::from_utf8_lossy(&out.stderr)),
    }
}

fn wrap() {
    let exe = std::env::var_os("HCBENCH_SCALE_WRAP").unwrap();
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let results = args.iter().position(|a| a == "--out").map(|i| PathBuf::from(&args[i + 1]).join("results.jsonl"));
    let cells: Option<usize> = std::env::var("HCBENCH_SCALE_CELLS").ok().and_then(|v| v.parse().ok());
    let mut child = Command::new(exe)
        .env_remove("HCBENCH_SCALE_WRAP")
        .args(&args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let drain = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    // The run phase's peak: the largest resident set sampled (every 50 ms) until every cell
    // has its line in results.jsonl, before the end-of-run report is built.
    let mut run_phase_kib = 0u64;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        let running = match (&results, cells) {
            (Some(r), Some(n)) => std::fs::read(r).map_or(0, |b| b.iter().filter(|c| **c == b'\n').count()) < n,
            _ => false,
        };
        if running {
            let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
            let rss = status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok());
            run_phase_kib = run_phase_kib.max(rss.unwrap_or(0));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let stderr = drain.join().unwrap();
    if !status.success() {
        eprintln!("{stderr}");
        std::process::exit(1);
    }
    println!("run_phase_kib {run_phase_kib}");
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN).unwrap();
    // Linux gives ru_maxrss in KiB.
    println!("maxrss_kib {}", usage.max_rss());
}

#[derive(Default)]
struct Usage {
    blocks_bytes: u64,
    apparent: u64,
    files: u64,
    dirs: u64,
    empty_dirs: u64,
    symlinks: u64,
    /// Files named like a trace: (count, apparent bytes), by name.
    by_name: std::collections::BTreeMap<String, (u64, u64)>,
}

/// `du`-like: every entry under `dir` (the folder itself included), symlinks not followed.
fn usage(dir: &Path) -> Usage {
    let mut u = Usage::default();
    walk(dir, &mut u);
    u
}

fn walk(path: &Path, u: &mut Usage) {
    let Ok(meta) = std::fs::symlink_metadata(path) else { return };
    u.blocks_bytes += meta.blocks() * 512;
    u.apparent += meta.len();
    if meta.file_type().is_symlink() {
        u.symlinks += 1;
    } else if meta.is_dir() {
        u.dirs += 1;
        let entries: Vec<_> = std::fs::read_dir(path).unwrap().flatten().collect();
        if entries.is_empty() {
            u.empty_dirs += 1;
        }
        for e in entries {
            walk(&e.path(), u);
        }
    } else {
        u.files += 1;
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("trace.jsonl") {
            let entry = u.by_name.entry(name).or_default();
            entry.0 += 1;
            entry.1 += meta.len();
        }
    }
}

/// Allocated bytes of the run's pack and its index.
fn pack_bytes(run: &Path) -> u64 {
    ["cells.pack", "cells.pack.index"]
        .iter()
        .filter_map(|n| std::fs::metadata(run.join(n)).ok())
        .map(|m| m.blocks() * 512)
        .sum()
}

/// Seconds to replay every trace of `run` (`hcbench::replay::replay_run`, rayon over the
/// cells), median of three.
fn replay_run_s(run: &Path) -> f64 {
    let mut rounds: Vec<f64> = (0..3)
        .map(|_| {
            let t0 = Instant::now();
            let traces = hcbench::replay::replay_run(run, &|_| None).unwrap();
            assert!(traces.iter().all(|(_, r)| r.is_ok()));
            std::hint::black_box(traces);
            t0.elapsed().as_secs_f64()
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    rounds[1]
}

/// Replay of one cell's trace, many times over, from the plain file, from its zstd form in its
/// folder, and from a run's pack: MB/s of the uncompressed bytes, median of five rounds, side
/// by side, on one thread.
fn replay_arms(run: &Path, scratch: &Path) {
    let cell = std::fs::read_dir(run.join("cells")).unwrap().flatten().next().unwrap().path();
    let plain = scratch.join("replay-plain/trace.jsonl");
    let packed = scratch.join("replay-zst/trace.jsonl");
    let in_pack = scratch.join("replay-pack/cells/c/trace.jsonl");
    for p in [&plain, &packed] {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    }
    // Whatever layout the run left, make one plain and two compressed copies of the same events.
    let mut text = Vec::new();
    std::io::Read::read_to_end(&mut hcbench::trace::stored::open(&cell.join("trace.jsonl")).unwrap(), &mut text)
        .unwrap();
    std::fs::write(&plain, &text).unwrap();
    std::fs::copy(&plain, &packed).unwrap();
    hcbench::trace::stored::compress(&packed).unwrap();
    let zst_len = std::fs::metadata(packed.with_extension("jsonl.zst")).unwrap().len();
    let pack_dir = scratch.join("replay-pack");
    std::fs::create_dir_all(pack_dir.join("cells")).unwrap();
    let frame = hcbench::trace::stored::compress_frame(&text).unwrap();
    hcbench::trace::pack::PackWriter::open(&pack_dir).unwrap().append("c", &frame).unwrap();
    let reps = (64 * 1024 * 1024 / text.len()).max(1);
    let mut report = String::new();
    let mut rates = Vec::new();
    for (name, path) in [("plain", &plain), ("zstd file", &packed), ("pack", &in_pack)] {
        let mut rounds = Vec::new();
        for _ in 0..5 {
            let t0 = Instant::now();
            for _ in 0..reps {
                std::hint::black_box(hcbench::replay::replay_trace(path).unwrap());
            }
            rounds.push((text.len() * reps) as f64 / 1e6 / t0.elapsed().as_secs_f64());
        }
        rounds.sort_by(f64::total_cmp);
        rates.push(rounds[2]);
        let _ = write!(report, "{name}: {:.0} MB/s  ", rounds[2]);
    }
    println!(
        "replay of one cell's trace ({} bytes; {} as a .zst file without the dictionary, {:.1}x; {} in the pack with it, {:.1}x), {reps} times per round, median of 5: {report}(zstd file/plain {:.2}, pack/plain {:.2})",
        text.len(),
        zst_len,
        text.len() as f64 / zst_len as f64,
        frame.len(),
        text.len() as f64 / frame.len() as f64,
        rates[1] / rates[0],
        rates[2] / rates[0]
    );
}
