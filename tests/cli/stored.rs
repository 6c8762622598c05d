//! Stored traces (src/trace/stored.rs, src/trace/pack.rs): a finished cell's trace goes into the
//! run's pack (`cells.pack` and its index) and its folder goes when nothing else is in it; every
//! reader (replay, report, merge, view, --resume) reads the pack and the older layouts (a plain
//! `trace.jsonl`, a per-cell `trace.jsonl.zst`) alike.

use std::io::Write;
use std::path::Path;

use serde_json::Value;

use crate::Test;
use crate::run::{GOOD_CASE, GOOD_ORACLE, Scratch};

const CELLS: [&str; 4] = ["good__oracle", "good__nop", "other__oracle", "other__nop"];

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

/// `hcbench replay --format json PATH`.
fn replay(path: &Path) -> Value {
    Test::new().args(&["replay", "--format", "json"]).arg_path(path).run().code(0).json()
}

fn report(run_dir: &Path) -> Value {
    Test::new().args(&["report", "--format", "json"]).arg_path(run_dir).run().code(0).json()
}

/// The cell ids of the run's pack index, in order.
fn packed(run_dir: &Path) -> Vec<String> {
    std::fs::read_to_string(run_dir.join("cells.pack.index"))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["cell"].as_str().unwrap().to_string())
        .collect()
}

fn outcomes(report: &Value) -> Vec<(String, String)> {
    report["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["cell_id"].as_str().unwrap().to_string(), c["outcome"].as_str().unwrap().to_string()))
        .collect()
}

#[test]
fn finished_traces_go_to_the_pack_and_replay_as_the_older_layouts() {
    let s = scratch();
    let run_dir = s.path().join("m");
    matrix(&s, &run_dir, &[]);
    // No folder and no file per finished cell: cells/ is empty, the pack holds the four.
    let left: Vec<_> = std::fs::read_dir(run_dir.join("cells")).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
    let mut ids = packed(&run_dir);
    ids.sort();
    assert_eq!(ids, ["good__nop", "good__oracle", "other__nop", "other__oracle"]);
    let pack_len = std::fs::metadata(run_dir.join("cells.pack")).unwrap().len() as usize;
    let plain_len: usize = CELLS
        .iter()
        .map(|c| crate::read_trace_bytes(run_dir.join("cells").join(c).join("trace.jsonl")).unwrap().len())
        .sum();
    assert!(pack_len * 3 < plain_len, "{pack_len} bytes packed of {plain_len}");
    // The workspace is reached through the run's one link.
    assert!(run_dir.join("workspaces/good__oracle/calc.py").is_file());
    assert_eq!(replay(&run_dir.join("cells/good__oracle/trace.jsonl"))[0]["outcome"], "passed");
    let packed_run = replay(&run_dir);
    let packed_report = report(&run_dir);
    assert_eq!(outcomes(&packed_report).len(), 4);
    // The same run in each older layout replays and reports the same.
    hcbench::trace::stored::unpack(&run_dir, true).unwrap();
    assert!(run_dir.join("cells/good__nop/trace.jsonl.zst").is_file() && !run_dir.join("cells.pack").exists());
    assert_eq!(replay(&run_dir), packed_run, "per-cell compressed traces replay the same");
    assert_eq!(report(&run_dir)["cells"], packed_report["cells"]);
    for cell in CELLS {
        hcbench::trace::stored::restore_plain(&run_dir.join("cells").join(cell).join("trace.jsonl")).unwrap();
    }
    assert!(run_dir.join("cells/good__nop/trace.jsonl").is_file());
    assert_eq!(replay(&run_dir), packed_run, "plain traces replay the same");
    assert_eq!(report(&run_dir)["cells"], packed_report["cells"]);
}

/// A pack as hcbench wrote it before the trace dictionary: the same run's frames recompressed
/// without one (level 12, checksummed, as it was): one entry in `every` that still has one, so
/// the pack can mix both.
fn without_dictionary(run_dir: &Path, every: usize) {
    let (pack_path, index_path) = (run_dir.join("cells.pack"), run_dir.join("cells.pack.index"));
    let pack = std::fs::read(&pack_path).unwrap();
    let entries: Vec<(String, usize, usize)> = std::fs::read_to_string(&index_path)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| {
            let e: Value = serde_json::from_str(l).unwrap();
            (
                e["cell"].as_str().unwrap().to_string(),
                e["offset"].as_u64().unwrap() as usize,
                e["len"].as_u64().unwrap() as usize,
            )
        })
        .collect();
    std::fs::remove_file(&pack_path).unwrap();
    std::fs::remove_file(&index_path).unwrap();
    let mut writer = hcbench::trace::pack::PackWriter::open(run_dir).unwrap();
    let mut old = zstd::bulk::Compressor::new(12).unwrap();
    old.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true)).unwrap();
    for (n, (cell, offset, len)) in entries.into_iter().enumerate() {
        let frame = &pack[offset..offset + len];
        if n % every == 0 && zstd::zstd_safe::get_dict_id_from_frame(frame).is_some() {
            let mut plain = Vec::new();
            std::io::Read::read_to_end(&mut hcbench::trace::stored::decode_frame(frame).unwrap(), &mut plain).unwrap();
            writer.append(&cell, &old.compress(&plain).unwrap()).unwrap();
        } else {
            writer.append(&cell, frame).unwrap();
        }
    }
}

#[test]
fn packs_made_before_the_dictionary_and_mixed_ones_read_the_same() {
    let s = scratch();
    let run_dir = s.path().join("m");
    matrix(&s, &run_dir, &["--shard", "1/1"]);
    let (new_replay, new_report) = (replay(&run_dir), report(&run_dir));
    let new_len = std::fs::metadata(run_dir.join("cells.pack")).unwrap().len();
    let one = run_dir.join("cells/good__oracle/trace.jsonl");
    let one_replay = replay(&one);
    // One frame in two without the dictionary, then all of them.
    for every in [2, 1] {
        without_dictionary(&run_dir, every);
        assert_eq!(replay(&run_dir), new_replay, "a whole run, one frame in {every} without the dictionary");
        assert_eq!(report(&run_dir)["cells"], new_report["cells"]);
        assert_eq!(replay(&one), one_replay, "one trace by its name");
    }
    let old_len = std::fs::metadata(run_dir.join("cells.pack")).unwrap().len();
    assert!(new_len * 3 < old_len * 2, "the dictionary makes the pack smaller: {new_len} against {old_len} bytes");
    // Merged from such a pack, frames are copied as they are, and read the same.
    let merged = s.path().join("merged");
    Test::new().args(&["merge"]).arg_path(&merged).arg_path(&run_dir).run().code(0);
    assert_eq!(report(&merged)["cells"].as_array().map(Vec::len), Some(4));
    assert_eq!(outcomes(&report(&merged)), outcomes(&new_report));
}

#[test]
fn a_cell_with_artifacts_keeps_its_folder_without_its_trace() {
    let s = Scratch::new();
    s.case("good", GOOD_CASE, GOOD_ORACLE);
    s.loud_case();
    let run_dir = s.path().join("m");
    Test::new().root(s.path()).args(&["matrix", "--benchmark", "demo", "--out"]).arg_path(&run_dir).run().code(0);
    assert!(!run_dir.join("cells/good__oracle").exists(), "nothing else to keep: no folder");
    let loud = run_dir.join("cells/loud__oracle");
    let names: Vec<String> =
        std::fs::read_dir(&loud).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names, ["artifacts"], "the folder keeps its artifacts, not its trace nor a workspace link");
    assert_eq!(replay(&loud.join("trace.jsonl"))[0]["cell_id"], "loud__oracle");
}

#[test]
fn resume_cuts_a_torn_tail_and_finishes_an_interrupted_move() {
    let s = scratch();
    let run_dir = s.path().join("m");
    matrix(&s, &run_dir, &[]);
    let before = report(&run_dir);
    let (pack, index) = (run_dir.join("cells.pack"), run_dir.join("cells.pack.index"));
    let (pack_len, index_text) = (std::fs::metadata(&pack).unwrap().len(), std::fs::read_to_string(&index).unwrap());
    // A crash mid-append: half a frame in the pack, a cut line in the index.
    std::fs::OpenOptions::new().append(true).open(&pack).unwrap().write_all(&[0x28, 0xb5, 0x2f, 0xfd, 1, 2]).unwrap();
    let mut f = std::fs::OpenOptions::new().append(true).open(&index).unwrap();
    write!(f, "{{\"cell\":\"good__nop\",\"offset\":{pack_len},\"le").unwrap();
    assert_eq!(report(&run_dir)["cells"], before["cells"], "readers ignore the torn tail");
    // A crash between a cell's append and the removal of its plain trace: both exist.
    let both = run_dir.join("cells/other__nop/trace.jsonl");
    hcbench::trace::stored::restore_plain(&both).unwrap();
    assert!(both.is_file());
    // An interrupted cell: its entry replaced by a plain trace cut before its verdict.
    let cut = run_dir.join("cells/good__oracle/trace.jsonl");
    hcbench::trace::stored::restore_plain(&cut).unwrap();
    let text = std::fs::read_to_string(&cut).unwrap();
    std::fs::write(&cut, text.lines().take(3).collect::<Vec<_>>().join("\n") + "\n").unwrap();
    let interrupted = Test::new().args(&["report", "--format", "json"]).arg_path(&run_dir).run().code(4).json();
    let good = interrupted["cells"].as_array().unwrap().iter().find(|c| c["cell_id"] == "good__oracle").unwrap();
    assert!(good["outcome"].is_null(), "the plain trace is read before the pack's entry: {good}");
    Test::new()
        .root(s.path())
        .args(&["matrix", "--resume"])
        .arg_path(&run_dir)
        .run()
        .code(0)
        .stderr_has("3 finished cell(s) kept");
    let lines: Vec<&str> = index_text.lines().collect();
    let now = std::fs::read_to_string(&index).unwrap();
    assert!(now.starts_with(&index_text), "the torn tail was cut, the whole entries kept");
    assert_eq!(
        now.lines().count(),
        lines.len() + 1,
        "one entry more: the cell run again; the settled one was not stored twice"
    );
    assert_eq!(packed(&run_dir).last().unwrap(), "good__oracle");
    assert!(!both.exists() && !cut.exists(), "no plain trace is left");
    assert!(std::fs::read_dir(run_dir.join("cells")).unwrap().next().is_none(), "no folder is left");
    assert_eq!(outcomes(&report(&run_dir)), outcomes(&before));
}

#[test]
fn a_corrupt_pack_or_index_is_named() {
    let s = scratch();
    let run_dir = s.path().join("m");
    matrix(&s, &run_dir, &[]);
    let pack = run_dir.join("cells.pack");
    let mut bytes = std::fs::read(&pack).unwrap();
    // The first cell's frame damaged in its middle.
    let first: Value = serde_json::from_str(
        std::fs::read_to_string(run_dir.join("cells.pack.index")).unwrap().lines().nth(1).unwrap(),
    )
    .unwrap();
    let (cell, mid) = (first["cell"].as_str().unwrap().to_string(), first["len"].as_u64().unwrap() as usize / 2);
    for b in &mut bytes[mid..mid + 8] {
        *b ^= 0x5a;
    }
    std::fs::write(&pack, &bytes).unwrap();
    Test::new()
        .args(&["replay"])
        .arg_path(&run_dir.join("cells").join(&cell).join("trace.jsonl"))
        .run()
        .code(2)
        .stderr_has(&format!("the trace of cell {cell} in {}", pack.display()))
        .stderr_has("is corrupt");
    let r = Test::new().args(&["report", "--format", "json"]).arg_path(&run_dir).run().code(4).json();
    let bad = r["cells"].as_array().unwrap().iter().find(|c| c["cell_id"] == cell.as_str()).unwrap().clone();
    assert_eq!(bad["outcome"], "harness_error");
    assert!(bad["reason"].as_str().unwrap().contains("cells.pack"), "{}", bad["reason"]);
    // --resume runs the cell again: its new entry replaces the damaged one.
    Test::new()
        .root(s.path())
        .args(&["matrix", "--resume"])
        .arg_path(&run_dir)
        .run()
        .code(0)
        .stderr_has("3 finished cell(s) kept");
    assert_eq!(replay(&run_dir.join("cells").join(&cell).join("trace.jsonl"))[0]["cell_id"], cell.as_str());
    // A damaged index line is an error naming the index, its line and the fix.
    let index = run_dir.join("cells.pack.index");
    let text = std::fs::read_to_string(&index).unwrap().replacen("\"offset\"", "\"offs\"", 1);
    std::fs::write(&index, text).unwrap();
    let named = format!("{}: line 2 is not a pack entry", index.display());
    Test::new().args(&["replay"]).arg_path(&run_dir).run().code(2).stderr_has(&named);
    let r = Test::new().args(&["report", "--format", "json"]).arg_path(&run_dir).run().code(4).json();
    for c in r["cells"].as_array().unwrap() {
        assert!(c["reason"].as_str().unwrap().contains(&named), "every cell says why: {c}");
    }
}

#[test]
fn shards_in_every_layout_merge_into_one_pack() {
    let s = scratch();
    let (a1, a2) = (s.path().join("s1"), s.path().join("s2"));
    matrix(&s, &a1, &["--shard", "1/2"]);
    matrix(&s, &a2, &["--shard", "2/2"]);
    let whole = s.path().join("whole");
    matrix(&s, &whole, &[]);
    // Shard 1 as an older hcbench left it: one cell plain, the other compressed in its folder.
    hcbench::trace::stored::unpack(&a1, true).unwrap();
    let one = packed_cells_of(&a1);
    hcbench::trace::stored::restore_plain(&a1.join("cells").join(&one[0]).join("trace.jsonl")).unwrap();
    let merged = s.path().join("merged");
    Test::new().args(&["merge"]).arg_path(&merged).arg_path(&a1).arg_path(&a2).run().code(0);
    // Frames (from a pack or a .zst) are copied into the merged pack; a plain trace is linked.
    let mut ids = packed(&merged);
    ids.sort();
    let mut expected: Vec<&str> = CELLS.iter().copied().filter(|c| *c != one[0]).collect();
    expected.sort();
    assert_eq!(ids, expected);
    assert_eq!(packed_cells_of(&merged), [one[0].clone()], "only the plain trace has a folder");
    assert!(merged.join("cells").join(&one[0]).join("trace.jsonl").is_file());
    let r = report(&merged);
    assert_eq!(outcomes(&r), outcomes(&report(&whole)), "the merged run reports as the unsharded one");
    // Each trace keeps its shard's run id, and each workspace is reached through its shard.
    for (shard, cell) in [(&a1, one[0].as_str()), (&a2, packed(&a2)[0].as_str())] {
        let run_id =
            serde_json::from_slice::<Value>(&std::fs::read(shard.join("manifest.json")).unwrap()).unwrap()["run_id"]
                .as_str()
                .unwrap()
                .to_string();
        let events = crate::trace_events(&merged.join("cells").join(cell).join("trace.jsonl"));
        assert_eq!(events[0]["run_id"], run_id.as_str());
        assert!(merged.join("workspaces").join(&run_id).join(cell).join("calc.py").is_file(), "{cell}");
    }
    assert_eq!(replay(&merged).as_array().unwrap().len(), 4);
}

/// The cells a shard holds in folders (after [`hcbench::trace::stored::unpack`]), sorted.
fn packed_cells_of(run_dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(run_dir.join("cells"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}
