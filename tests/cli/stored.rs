//! Stored traces (src/trace/stored.rs): a finished cell's trace is kept zstd-compressed, and
//! every reader (replay, report, merge, --resume) reads it and the old plain layout alike.

use std::path::Path;

use serde_json::Value;

use crate::Test;
use crate::run::{GOOD_CASE, GOOD_ORACLE, Scratch};

/// A two-case benchmark run as a matrix of oracle and nop into `out` (with `extra` arguments).
fn matrix(s: &Scratch, out: &Path, extra: &[&str]) {
    Test::new()
        .root(s.path())
        .args(&["matrix", "--benchmark", "demo", "--profiles", "oracle,nop"])
        .args(extra)
        .args(&["--out"])
        .arg_path(out)
        .run()
        .code(0);
}

fn scratch() -> Scratch {
    let s = Scratch::new();
    s.case("good", GOOD_CASE, GOOD_ORACLE);
    s.case("other", &GOOD_CASE.replace("id: good", "id: other"), GOOD_ORACLE);
    s
}

/// `hcbench replay --format json PATH`, with the run-directory-specific `trace` fields left as
/// they are (they name the same cells).
fn replay(path: &Path) -> Value {
    Test::new().args(&["replay", "--format", "json"]).arg_path(path).run().code(0).json()
}

/// Every cell's trace turned back into a plain `trace.jsonl`: the layout hcbench wrote before
/// traces were compressed.
fn to_old_layout(run_dir: &Path) {
    for cell in std::fs::read_dir(run_dir.join("cells")).unwrap().flatten() {
        hcbench::trace::stored::restore_plain(&cell.path().join("trace.jsonl")).unwrap();
        assert!(!cell.path().join("trace.jsonl.zst").exists());
    }
}

#[test]
fn finished_traces_are_stored_compressed_and_replay_as_the_plain_ones() {
    let s = scratch();
    let run_dir = s.path().join("m");
    matrix(&s, &run_dir, &[]);
    for cell in ["good__oracle", "good__nop", "other__oracle", "other__nop"] {
        let dir = run_dir.join("cells").join(cell);
        assert!(dir.join("trace.jsonl.zst").is_file() && !dir.join("trace.jsonl").exists(), "{cell}");
        let packed = std::fs::read(dir.join("trace.jsonl.zst")).unwrap();
        let plain = crate::read_trace_bytes(dir.join("trace.jsonl")).unwrap();
        assert!(packed.len() * 3 < plain.len(), "{cell}: {} compressed of {}", packed.len(), plain.len());
    }
    // The same events, compressed and plain, replay to the same summaries, by either name.
    let zst = run_dir.join("cells/good__oracle/trace.jsonl.zst");
    let by_plain_name = replay(&run_dir.join("cells/good__oracle/trace.jsonl"));
    assert_eq!(replay(&zst), by_plain_name);
    assert_eq!(by_plain_name[0]["outcome"], "passed");
    let compressed_run = replay(&run_dir);
    let report = Test::new().args(&["report", "--format", "json"]).arg_path(&run_dir).run().code(0).json();
    to_old_layout(&run_dir);
    assert_eq!(replay(&run_dir), compressed_run, "the old layout replays to the same summaries");
    let old = Test::new().args(&["report", "--format", "json"]).arg_path(&run_dir).run().code(0).json();
    assert_eq!(old["cells"], report["cells"], "and reports the same cells");
}

#[test]
fn shards_in_the_old_layout_and_the_new_merge_and_resume() {
    let s = scratch();
    let (a1, a2) = (s.path().join("s1"), s.path().join("s2"));
    matrix(&s, &a1, &["--shard", "1/2"]);
    matrix(&s, &a2, &["--shard", "2/2"]);
    // Shard 1 as an older hcbench left it (plain traces), shard 2 compressed.
    to_old_layout(&a1);
    // Shard 2 interrupted: one finished cell's trace cut before its verdict (plain again, as a
    // running cell's is), the other finished cell stays compressed and is kept by --resume.
    let cells: Vec<_> = std::fs::read_dir(a2.join("cells")).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(cells.len(), 2);
    let cut = cells[0].join("trace.jsonl");
    let text = crate::read_trace_text(&cut).unwrap();
    std::fs::remove_file(cells[0].join("trace.jsonl.zst")).unwrap();
    std::fs::write(&cut, text.lines().take(3).collect::<Vec<_>>().join("\n") + "\n").unwrap();
    let kept = std::fs::read(cells[1].join("trace.jsonl.zst")).unwrap();
    Test::new()
        .root(s.path())
        .args(&["matrix", "--resume"])
        .arg_path(&a2)
        .run()
        .code(0)
        .stderr_has("1 finished cell(s) kept");
    assert_eq!(std::fs::read(cells[1].join("trace.jsonl.zst")).unwrap(), kept, "the kept cell is not run again");
    assert!(cells[0].join("trace.jsonl.zst").is_file() && !cut.exists(), "the re-run cell is stored compressed");

    let merged = s.path().join("merged");
    Test::new().args(&["merge"]).arg_path(&merged).arg_path(&a1).arg_path(&a2).run().code(0);
    let r = Test::new().args(&["report", "--format", "json"]).arg_path(&merged).run().code(0).json();
    let outcomes: Vec<(&str, &str)> = r["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["cell_id"].as_str().unwrap(), c["outcome"].as_str().unwrap()))
        .collect();
    assert_eq!(
        outcomes,
        [("good__oracle", "passed"), ("good__nop", "failed"), ("other__oracle", "passed"), ("other__nop", "failed")]
    );
    // Each cell's workspace is reachable from the merged run as from its shard.
    for cell in ["good__oracle", "other__nop"] {
        let ws = merged.join("cells").join(cell).join("workspace");
        assert!(ws.join("calc.py").is_file(), "{}", ws.display());
    }
    for shard in [&a1, &a2] {
        assert_eq!(replay(shard).as_array().unwrap().len(), 2, "each layout replays");
    }
}

#[test]
fn a_corrupt_compressed_trace_is_named_and_its_cell_runs_again() {
    let s = scratch();
    let run_dir = s.path().join("m");
    matrix(&s, &run_dir, &[]);
    let zst = run_dir.join("cells/good__oracle/trace.jsonl.zst");
    // Cut short, as a copy that stopped mid-way leaves it.
    let bytes = std::fs::read(&zst).unwrap();
    std::fs::write(&zst, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let shown = zst.display().to_string();
    Test::new()
        .args(&["replay"])
        .arg_path(&run_dir.join("cells/good__oracle/trace.jsonl"))
        .run()
        .code(2)
        .stderr_has(&format!("the compressed trace {shown} is corrupt"));
    let r = Test::new().args(&["report", "--format", "json"]).arg_path(&run_dir).run().code(4).json();
    let good = r["cells"].as_array().unwrap().iter().find(|c| c["cell_id"] == "good__oracle").unwrap().clone();
    assert_eq!(good["outcome"], "harness_error");
    assert!(good["reason"].as_str().unwrap().contains(&shown), "{}", good["reason"]);
    Test::new()
        .root(s.path())
        .args(&["matrix", "--resume"])
        .arg_path(&run_dir)
        .run()
        .code(0)
        .stderr_has("3 finished cell(s) kept");
    assert_eq!(replay(&zst)[0]["outcome"], "passed", "the cell ran again and was stored anew");
}
