//! Replay throughput: MB/s of trace folded into summaries on one core, and the time to build
//! the report model of a many-cell run directory.
//!
//! Targets: at least 200 MB/s of trace per core (DESIGN.md), and at or above the scan floor
//! measured beside it (issue 19), from a plain file and from the forms a finished cell's trace
//! is stored in (a frame of the run's pack, a `.zst` file), counted on the plain bytes. A second
//! part reads many HumanEval-sized cells one after another, as a report does, against the floor
//! over the same bytes. Run: `cargo bench --bench replay` (env HCBENCH_BENCH_MB, default 64:
//! size of the synthetic trace; HCBENCH_BENCH_CELLS, default 3000: the cells of the second part;
//! HCBENCH_BENCH_TRACES=DIR: real traces, DIR's `*.jsonl` taken in turn, for that part).

use std::io::Write;
use std::time::Instant;

use hcbench::replay::{Lean, SummaryBuilder, replay_run, replay_trace, summarize};
use hcbench::trace::event::{Check, ContextSection, ModelInfo, Outcome, Usage};
use hcbench::trace::pack::PackWriter;
use hcbench::trace::reader::for_each_line_from;
use hcbench::trace::stored;
use hcbench::trace::{EventBody, TraceWriter, for_each_line, read_trace};

/// The trace dictionary hcbench compresses finished traces with (src/trace/dict/README.md).
const TRACE_DICTIONARY: &[u8] = include_bytes!("../src/trace/dict/traces-1.zdict");

fn step_events(step: u32, output: String) -> Vec<EventBody> {
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
            output,
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

fn run_started() -> EventBody {
    EventBody::RunStarted {
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
    }
}

fn run_finished() -> [EventBody; 2] {
    [
        EventBody::VerifierResult {
            passed: true,
            duration_ms: 5,
            checks: vec![Check { name: "unchanged".into(), passed: true, detail: "ok".into() }],
            metrics: Default::default(),
        },
        EventBody::RunFinished {
            outcome: Outcome::Passed,
            reward: 1.0,
            stop_reason: "finished".into(),
            reason: "ok".into(),
            elapsed_ms: 1,
        },
    ]
}

/// A tool output that reads like code and compresses about as real traces do (5x for a whole
/// HumanEval trace at the pack's level, docs/performance.md), unlike the big trace's one
/// repeated line.
fn code_like(rng: &mut fastrand::Rng) -> String {
    const WORDS: [&str; 24] = [
        "request", "handler", "self", "items", "value", "result", "config", "index", "path", "data", "count",
        "response", "parse", "update", "key", "user", "session", "buffer", "limit", "offset", "name", "error", "total",
        "cache",
    ];
    let mut out = String::new();
    let first = rng.u32(1..400);
    for n in first..first + rng.u32(8..30) {
        let mut word = || WORDS[rng.usize(..WORDS.len())];
        let line = match n % 4 {
            0 => format!("{n:>5}| def {}_{}({}, {}):\n", word(), word(), word(), word()),
            1 => format!("{n:>5}|     {} = {}.{}({})\n", word(), word(), word(), rng.u32(0..10_000)),
            2 => format!("{n:>5}|     if {} > {}:\n", word(), rng.u32(0..500)),
            _ => format!("{n:>5}|         return {}[{:?}] + {}\n", word(), word(), rng.u32(0..100_000)),
        };
        out.push_str(&line);
    }
    out
}

/// Writes `cells` HumanEval-sized traces (about 10 KB, a few steps each) as
/// `<run_dir>/cells/<id>/trace.jsonl`; returns their paths.
fn write_cells(run_dir: &std::path::Path, cells: usize) -> Vec<std::path::PathBuf> {
    let mut rng = fastrand::Rng::with_seed(19);
    (0..cells)
        .map(|i| {
            let cell = format!("case-{i}-gpt-e1");
            let path = run_dir.join("cells").join(&cell).join(stored::TRACE);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            let mut w = TraceWriter::create(&path, "bench-cells", &cell).unwrap();
            w.append(run_started()).unwrap();
            for step in 1..=rng.u32(2..6) {
                for e in step_events(step, code_like(&mut rng)) {
                    w.append(e).unwrap();
                }
            }
            for e in run_finished() {
                w.append(e).unwrap();
            }
            path
        })
        .collect()
}

/// zstd's decoding of `frame` alone, through the readers' own path (the thread's context, the
/// prepared dictionary its header names, the thread's buffer), its bytes looked at where they
/// lie and not copied; returns how many there were.
fn decode_only(frame: &[u8]) -> usize {
    use std::io::BufRead;
    let mut reader = stored::decode_frame(frame).unwrap();
    let mut n = 0;
    loop {
        let len = reader.fill_buf().unwrap().len();
        if len == 0 {
            return n;
        }
        n += len;
        reader.consume(len);
    }
}

/// Copies the `*.jsonl` traces of `from`, in name order and taken in turn, as `cells` cells of
/// `<run_dir>/cells/<id>/trace.jsonl`; returns their paths.
fn copy_cells(from: &std::path::Path, run_dir: &std::path::Path, cells: usize) -> Vec<std::path::PathBuf> {
    let mut sources: Vec<std::path::PathBuf> = std::fs::read_dir(from)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    sources.sort();
    assert!(!sources.is_empty(), "HCBENCH_BENCH_TRACES: no *.jsonl in {}", from.display());
    (0..cells)
        .map(|i| {
            let path = run_dir.join("cells").join(format!("real-{i}")).join(stored::TRACE);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::copy(&sources[i % sources.len()], &path).unwrap();
            path
        })
        .collect()
}

fn main() {
    let mb: usize = std::env::var("HCBENCH_BENCH_MB").ok().and_then(|s| s.parse().ok()).unwrap_or(64);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    let mut w = TraceWriter::create(&path, "bench-run", "bench-cell").unwrap();
    w.append(run_started()).unwrap();
    let mut step = 0;
    while std::fs::metadata(&path).unwrap().len() < (mb as u64) << 20 {
        step += 1;
        for e in step_events(step, "   10| def handler(request):\n".repeat(40)) {
            w.append(e).unwrap();
        }
    }
    for e in run_finished() {
        w.append(e).unwrap();
    }
    std::io::stdout().flush().unwrap();
    let bytes = std::fs::metadata(&path).unwrap().len() as f64;

    // The same trace stored as a finished cell is: a frame of its run's pack (what runs write
    // now), and a `.zst` file beside its cell (runs made before the pack); both read by the
    // readers `hcbench replay` and `report` use, through the plain name.
    let plain = std::fs::read(&path).unwrap();
    let frame = stored::compress_frame(&plain).unwrap();
    let run_dir = dir.path().join("run");
    let packed = run_dir.join("cells").join("bench-cell").join(stored::TRACE);
    std::fs::create_dir_all(&run_dir).unwrap();
    PackWriter::open(&run_dir).unwrap().append("bench-cell", &frame).unwrap();
    let old_layout = dir.path().join("old").join(stored::TRACE);
    std::fs::create_dir_all(old_layout.parent().unwrap()).unwrap();
    std::fs::write(stored::compressed_path(&old_layout), &frame).unwrap();
    assert!(!packed.exists() && !old_layout.exists(), "only the compressed forms exist");

    // Replay, replay with serde_json alone (the parser before the fast one), and the floor
    // (scanning every line without building anything, from memory), measured in turns so
    // that a noisy machine weighs on each alike; medians of 5. Beside them, the same replay
    // over the trace's bytes already in memory, as the floor reads them: what the file's
    // reading costs (the kernel's copy from the page cache) is the difference. Then the
    // stored forms, and zstd's decoding alone (into a buffer made once), so the split of a
    // stored replay's time between decoding and parsing shows.
    let text = plain;
    let (mut fast, mut slow, mut scan, mut in_memory) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut from_pack, mut from_zst, mut decode) = (Vec::new(), Vec::new(), Vec::new());
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

        let t = Instant::now();
        assert_eq!(replay_trace(&packed).unwrap().steps, step);
        from_pack.push(t.elapsed().as_secs_f64());

        let t = Instant::now();
        assert_eq!(replay_trace(&old_layout).unwrap().steps, step);
        from_zst.push(t.elapsed().as_secs_f64());

        let t = Instant::now();
        let n = decode_only(&frame);
        decode.push(t.elapsed().as_secs_f64());
        assert_eq!(n, text.len());
    }
    let median = |v: &mut Vec<f64>| -> f64 {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (fast, slow, scan, in_memory) =
        (median(&mut fast), median(&mut slow), median(&mut scan), median(&mut in_memory));
    let (from_pack, from_zst, decode) = (median(&mut from_pack), median(&mut from_zst), median(&mut decode));
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
    println!(
        "replay of the trace stored in its run's pack (zstd, the engine's level, {:.1} MB, {:.1}x smaller): {:.0} MB/s of plain bytes ({:.2}x the scan floor)",
        frame.len() as f64 / 1e6,
        bytes / frame.len() as f64,
        mbs(from_pack),
        scan / from_pack
    );
    println!(
        "replay of the trace stored as trace.jsonl.zst (older runs): {:.0} MB/s ({:.2}x the scan floor)",
        mbs(from_zst),
        scan / from_zst
    );
    println!(
        "of which zstd decoding alone (the readers' path, no copy): {:.0} MB/s of plain bytes, {:.1} ms of the pack replay's {:.1} ms ({:.0}%)",
        mbs(decode),
        decode * 1e3,
        from_pack * 1e3,
        100.0 * decode / from_pack
    );

    // Many HumanEval-sized cells (about 10 KB each, compressing about as real ones do) read
    // one after another as a report reads a run's cells, on one core: the scan floor over the
    // same bytes in memory; a whole run replayed as `hcbench replay RUN_DIR` and `report` do
    // (`replay_run`, here in a one-thread pool: the pack read in pack order, a span of frames at
    // a time), from its pack with the dictionary (what runs write now), from a pack without it
    // (runs made before), and from plain files; each trace replayed by its name from the pack
    // (what `hcbench replay TRACE` does); and zstd's decoding of the frames alone, with and
    // without the dictionary. In turns, medians of 5.
    let cells: usize = std::env::var("HCBENCH_BENCH_CELLS").ok().and_then(|s| s.parse().ok()).unwrap_or(3000);
    let plain_run = dir.path().join("cells-plain");
    // HCBENCH_BENCH_TRACES=DIR: real traces (every *.jsonl of DIR, taken in turn) instead of the
    // synthetic cells, e.g. those of a HumanEval-shaped run (their run ids are their own).
    let real = std::env::var_os("HCBENCH_BENCH_TRACES").map(std::path::PathBuf::from);
    let traces = match &real {
        Some(from) => copy_cells(from, &plain_run, cells),
        None => write_cells(&plain_run, cells),
    };
    let texts: Vec<Vec<u8>> = traces.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let frames: Vec<Vec<u8>> = texts.iter().map(|t| stored::compress_frame(t).unwrap()).collect();
    let mut no_dictionary = zstd::bulk::Compressor::new(12).unwrap();
    no_dictionary.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true)).unwrap();
    let old_frames: Vec<Vec<u8>> = texts.iter().map(|t| no_dictionary.compress(t).unwrap()).collect();
    let pack_run = dir.path().join("cells-pack");
    let old_pack_run = dir.path().join("cells-pack-old");
    let mut in_pack = Vec::new();
    for (run, frames) in [(&pack_run, &frames), (&old_pack_run, &old_frames)] {
        std::fs::create_dir_all(run.join("cells")).unwrap();
        let mut pack = PackWriter::open(run).unwrap();
        in_pack = traces
            .iter()
            .zip(frames)
            .map(|(p, frame)| {
                let cell = p.parent().unwrap().file_name().unwrap().to_str().unwrap();
                pack.append(cell, frame).unwrap();
                run.join("cells").join(cell).join(stored::TRACE)
            })
            .collect();
    }
    let one_core = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let whole_run = |run: &std::path::Path| -> u32 {
        one_core.install(|| {
            replay_run(run, &|_| real.is_none().then(|| "bench-cells".to_string()))
                .unwrap()
                .into_iter()
                .map(|(_, r)| r.unwrap().steps)
                .sum()
        })
    };
    let in_pack: Vec<std::path::PathBuf> =
        in_pack.iter().map(|p| pack_run.join(p.strip_prefix(&old_pack_run).unwrap())).collect();
    let cell_bytes = texts.iter().map(Vec::len).sum::<usize>() as f64;
    let frame_bytes = frames.iter().map(Vec::len).sum::<usize>() as f64;
    let old_frame_bytes = old_frames.iter().map(Vec::len).sum::<usize>() as f64;
    let steps: u32 = traces.iter().map(|p| replay_trace(p).unwrap().steps).sum();
    // The same two on every core (rayon's default pool, as `hcbench report` runs): what a user
    // waits for, beside the floor spread over the same cores.
    let all_cores = || -> u32 {
        replay_run(&pack_run, &|_| real.is_none().then(|| "bench-cells".to_string()))
            .unwrap()
            .into_iter()
            .map(|(_, r)| r.unwrap().steps)
            .sum()
    };
    // What a faster codec would give (issue 19: replay of many small stored traces at the scan
    // floor; docs/performance.md, "Many small stored traces"): the same cells as lz4 HC blocks
    // with the trace dictionary's last 64 KiB as their history (lz4 reads at most 64 KiB of a
    // dictionary, and a zstd dictionary ends with its content), against zstd's frames, each
    // decoded into one buffer and replayed where it lies, beside the parse of the plain bytes
    // alone. No pack, no file: only the codec differs between the three.
    let lz4_dict = &TRACE_DICTIONARY[TRACE_DICTIONARY.len() - 64 * 1024..];
    let lz4_blocks: Vec<Vec<u8>> = texts
        .iter()
        .map(|text| {
            let mut block = Vec::new();
            lzzzz::lz4_hc::Compressor::with_dict(lz4_dict, lzzzz::lz4_hc::CLEVEL_DEFAULT)
                .unwrap()
                .next_to_vec(text, &mut block)
                .unwrap();
            block
        })
        .collect();
    let lz4_bytes = lz4_blocks.iter().map(Vec::len).sum::<usize>() as f64;
    let mut lz4_plain = Vec::new();
    let lz4_decode = |block: &[u8], len: usize, plain: &mut Vec<u8>| {
        plain.resize(len, 0);
        assert_eq!(lzzzz::lz4::decompress_with_dict(block, plain, lz4_dict).unwrap(), len);
    };
    for (block, text) in lz4_blocks.iter().zip(&texts) {
        lz4_decode(block, text.len(), &mut lz4_plain);
        assert_eq!(&lz4_plain, text, "lz4 with the dictionary reads back");
    }
    let parse_steps = |bytes: &[u8]| -> u32 {
        let mut builder = SummaryBuilder::new();
        for_each_line_from(bytes, std::path::Path::new("cell"), None, Lean::parse, |h, e| {
            builder.observe_lean(&h.run_id, &h.cell_id, e)
        })
        .unwrap();
        builder.finish().unwrap().steps
    };
    let mut arms: [Vec<f64>; 14] = Default::default();
    for _ in 0..5 {
        let t = Instant::now();
        for text in &texts {
            for line in text.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                let _: serde::de::IgnoredAny = serde_json::from_slice(line).unwrap();
            }
        }
        arms[0].push(t.elapsed().as_secs_f64());

        let t = Instant::now();
        assert_eq!(whole_run(&pack_run), steps);
        arms[1].push(t.elapsed().as_secs_f64());

        let t = Instant::now();
        assert_eq!(whole_run(&old_pack_run), steps);
        arms[2].push(t.elapsed().as_secs_f64());

        let t = Instant::now();
        assert_eq!(whole_run(&plain_run), steps);
        arms[3].push(t.elapsed().as_secs_f64());

        let t = Instant::now();
        assert_eq!(in_pack.iter().map(|p| replay_trace(p).unwrap().steps).sum::<u32>(), steps);
        arms[4].push(t.elapsed().as_secs_f64());

        let t = Instant::now();
        assert_eq!(traces.iter().map(|p| replay_trace(p).unwrap().steps).sum::<u32>(), steps);
        arms[5].push(t.elapsed().as_secs_f64());

        let t = Instant::now();
        assert_eq!(frames.iter().map(|f| decode_only(f)).sum::<usize>() as f64, cell_bytes);
        arms[6].push(t.elapsed().as_secs_f64());

        let t = Instant::now();
        assert_eq!(old_frames.iter().map(|f| decode_only(f)).sum::<usize>() as f64, cell_bytes);
        arms[7].push(t.elapsed().as_secs_f64());

        let t = Instant::now();
        {
            use rayon::prelude::*;
            texts.par_iter().for_each(|text| {
                for line in text.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                    let _: serde::de::IgnoredAny = serde_json::from_slice(line).unwrap();
                }
            });
        }
        arms[8].push(t.elapsed().as_secs_f64());

        let t = Instant::now();
        assert_eq!(all_cores(), steps);
        arms[9].push(t.elapsed().as_secs_f64());

        let t = Instant::now();
        assert_eq!(texts.iter().map(|text| parse_steps(text)).sum::<u32>(), steps);
        arms[10].push(t.elapsed().as_secs_f64());

        let t = Instant::now();
        let from_zstd: u32 = frames
            .iter()
            .map(|frame| {
                let mut builder = SummaryBuilder::new();
                for_each_line_from(
                    stored::decode_frame(frame).unwrap(),
                    std::path::Path::new("cell"),
                    None,
                    Lean::parse,
                    |h, e| builder.observe_lean(&h.run_id, &h.cell_id, e),
                )
                .unwrap();
                builder.finish().unwrap().steps
            })
            .sum();
        assert_eq!(from_zstd, steps);
        arms[11].push(t.elapsed().as_secs_f64());

        let t = Instant::now();
        let from_lz4: u32 = lz4_blocks
            .iter()
            .zip(&texts)
            .map(|(block, text)| {
                lz4_decode(block, text.len(), &mut lz4_plain);
                parse_steps(&lz4_plain)
            })
            .sum();
        assert_eq!(from_lz4, steps);
        arms[12].push(t.elapsed().as_secs_f64());

        let t = Instant::now();
        for (block, text) in lz4_blocks.iter().zip(&texts) {
            lz4_decode(block, text.len(), &mut lz4_plain);
        }
        arms[13].push(t.elapsed().as_secs_f64());
    }
    let [
        floor,
        pack_whole,
        old_pack_whole,
        plain_whole,
        pack_by_name,
        plain_by_name,
        decoding,
        old_decoding,
        floor_all,
        pack_all,
        parse_alone,
        zstd_parse,
        lz4_parse,
        lz4_decoding,
    ] = arms.map(|mut v| median(&mut v));
    let cell_mbs = |secs: f64| cell_bytes / 1e6 / secs;
    let us = |secs: f64| secs * 1e6 / cells as f64;
    println!(
        "{cells} cells of {:.1} KB ({:.1} MB), one after another on one core: floor: scan only {:.0} MB/s ({:.1} us per cell)",
        cell_bytes / cells as f64 / 1e3,
        cell_bytes / 1e6,
        cell_mbs(floor),
        us(floor)
    );
    println!(
        "  frames: {:.0} bytes per cell with the dictionary ({:.1}x smaller than plain), {:.0} without ({:.1}x)",
        frame_bytes / cells as f64,
        cell_bytes / frame_bytes,
        old_frame_bytes / cells as f64,
        cell_bytes / old_frame_bytes
    );
    for (what, secs) in [
        ("whole run (replay_run), pack with the dictionary", pack_whole),
        ("whole run (replay_run), pack without it (older runs)", old_pack_whole),
        ("whole run (replay_run), plain files", plain_whole),
        ("each trace by its name, pack with the dictionary", pack_by_name),
        ("each trace by its name, plain files", plain_by_name),
    ] {
        println!("  {what}: {:.0} MB/s ({:.2}x the floor; {:.1} us per cell)", cell_mbs(secs), floor / secs, us(secs));
    }
    // Stored traces must be decoded before any parse: a floor for them is zstd's decoding of
    // the same frames (the readers' path) plus the scan of the plain bytes, both measured above.
    let stored_floor = floor + decoding;
    println!(
        "  against a floor for stored traces (zstd's decoding alone plus the scan: {:.1} us per cell): whole run from the pack {:.2}x, each trace by its name {:.2}x",
        us(stored_floor),
        stored_floor / pack_whole,
        stored_floor / pack_by_name
    );
    println!(
        "  on all {} cores: whole run from the pack {:.0} MB/s ({:.2}x the one-core floor, {:.2}x the floor on the same cores: {:.0} MB/s)",
        rayon::current_num_threads(),
        cell_mbs(pack_all),
        floor / pack_all,
        floor_all / pack_all,
        cell_mbs(floor_all)
    );
    println!(
        "  zstd decoding alone: with the dictionary {:.0} MB/s of plain bytes ({:.1} us per cell, {:.0}% of the whole-run pack replay); without {:.0} MB/s ({:.1} us per cell)",
        cell_mbs(decoding),
        us(decoding),
        100.0 * decoding / pack_whole,
        cell_mbs(old_decoding),
        us(old_decoding)
    );
    println!(
        "  the codec alone, bytes in memory decoded into one buffer and replayed there: plain bytes {:.1} us per cell ({:.2}x the floor); zstd with the dictionary {:.1} us ({:.2}x); lz4 HC with its last 64 KiB {:.1} us ({:.2}x), of which lz4's decoding {:.1} us ({:.0} MB/s); lz4 blocks {:.0} bytes per cell ({:.2}x zstd's frames)",
        us(parse_alone),
        floor / parse_alone,
        us(zstd_parse),
        floor / zstd_parse,
        us(lz4_parse),
        floor / lz4_parse,
        us(lz4_decoding),
        cell_mbs(lz4_decoding),
        lz4_bytes / cells as f64,
        lz4_bytes / frame_bytes
    );
}
