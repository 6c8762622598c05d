//! Several tool calls in one reply, end to end with the scripted model: reads together,
//! mutations alone and in order, results in the order asked, one event per call with its
//! place in the batch, the cap on calls per reply, and replay giving the same summary.
//! (The same over a real loopback HTTP server is in `providers.rs`.)

use std::path::Path;

use serde_json::Value;

use crate::Test;
use crate::run::{GOOD_CASE, GOOD_ORACLE, Scratch, by_cell};

/// Runs the `good` case with `script`; returns the cell's summary and its trace's events, each
/// with its payload's fields beside the envelope's.
fn run_script(s: &Scratch, script: &str, code: i32) -> (Value, Vec<Value>, std::path::PathBuf) {
    let (out, run_dir) = s.run_script(script, code);
    let cell = by_cell(&out.json())["good__scripted"].clone();
    (cell, crate::trace_events(&run_dir.join("cells/good__scripted/trace.jsonl")), run_dir)
}

/// `kind:tool` for the events of one step that concern calls.
fn call_events(ev: &[Value], step: u64) -> Vec<String> {
    ev.iter()
        .filter(|e| e["step"] == step)
        .filter(|e| ["model_action", "policy_decision", "tool_result"].contains(&e["kind"].as_str().unwrap()))
        .map(|e| format!("{}:{}", e["kind"].as_str().unwrap(), e["tool"].as_str().unwrap()))
        .collect()
}

fn assert_replay_agrees(run_dir: &Path, live: &Value) {
    let replayed = Test::new().args(&["replay", "--format", "json"]).arg_path(run_dir).run().code(0);
    assert_eq!(&by_cell(&replayed.json())["good__scripted"], live, "replay gives the same summary");
}

#[test]
fn a_script_turn_with_several_calls_is_one_batch_with_mutations_in_order() {
    let s = Scratch::new();
    s.case("good", GOOD_CASE, GOOD_ORACLE);
    let (cell, ev, run_dir) = run_script(
        &s,
        "default:\n  - batch:\n    - {tool: read_file, args: {path: calc.py}}\n    - {tool: list_files}\n    - {tool: read_file, args: {path: .env}}\n    - {tool: edit_file, args: {path: calc.py, old: 'a - b', new: 'a + b'}}\n    - {tool: read_file, args: {path: calc.py}}\n    - {tool: finish, args: {answer: fixed}}\n    - {tool: read_file, args: {path: calc.py}}\n",
        0,
    );
    assert_eq!(cell["outcome"], "passed", "{}", cell["reason"]);
    assert_eq!(cell["steps"], 1, "a reply is one step however many calls it holds");
    assert_eq!((cell["batches"].as_u64(), cell["batched_calls"].as_u64()), (Some(1), Some(7)));
    assert_eq!(cell["tool_calls"], 5, "three reads, the edit and finish ran");
    assert_eq!(cell["policy_denials"], 1, ".env is refused by the one gate, inside a batch too");
    assert_eq!(cell["invalid_actions"], 1, "the call after finish never ran");

    // Every call is announced, then the reads before the edit are gated together and run
    // together, and their results follow in the order asked; the edit, the read after it and
    // finish each run alone.
    let expected = [
        "model_action:read_file",
        "model_action:list_files",
        "model_action:read_file",
        "model_action:edit_file",
        "model_action:read_file",
        "model_action:finish",
        "model_action:read_file",
        "policy_decision:read_file",
        "policy_decision:list_files",
        "policy_decision:read_file",
        "tool_result:read_file",
        "tool_result:list_files",
        "tool_result:read_file",
        "policy_decision:edit_file",
        "tool_result:edit_file",
        "policy_decision:read_file",
        "tool_result:read_file",
        "policy_decision:finish",
        "tool_result:finish",
        "policy_decision:read_file",
        "tool_result:read_file",
    ];
    assert_eq!(call_events(&ev, 1), expected);
    let results: Vec<&Value> = ev.iter().filter(|e| e["kind"] == "tool_result").collect();
    let positions: Vec<u64> = results.iter().map(|e| e["batch"]["position"].as_u64().unwrap()).collect();
    assert_eq!(positions, [1, 2, 3, 4, 5, 6, 7]);
    assert!(results.iter().all(|e| e["batch"]["id"] == 1 && e["batch"]["size"] == 7));
    assert!(results[0]["output"].as_str().unwrap().contains("a - b"), "the read before the edit saw the old code");
    assert!(results[4]["output"].as_str().unwrap().contains("a + b"), "the read after the edit saw the new code");
    assert_eq!(results[2]["denied"], true);
    assert!(results[6]["output"].as_str().unwrap().contains("`finish` came earlier"), "{}", results[6]["output"]);
    let batched: Vec<bool> =
        ev.iter().filter(|e| e["kind"] == "model_action").map(|e| e.get("batch").is_some()).collect();
    assert_eq!(batched, [true; 7], "every call of the reply carries its batch");
    let html = crate::report_html(&run_dir.join("reports/report.html"));
    assert!(html.contains("call 4 of 7: edit_file"), "the timeline shows which calls came together");
    assert_replay_agrees(&run_dir, &cell);
}

#[test]
fn a_reply_with_50_calls_runs_the_first_16_and_refuses_the_rest_clearly() {
    let s = Scratch::new();
    s.case("good", GOOD_CASE, GOOD_ORACLE);
    let reads: String = (0..50).map(|_| "    - {tool: read_file, args: {path: calc.py}}\n".to_string()).collect();
    let (cell, ev, run_dir) = run_script(
        &s,
        &format!(
            "default:\n  - batch:\n{reads}  - {{tool: edit_file, args: {{path: calc.py, old: 'a - b', new: 'a + b'}}}}\n  - {{tool: finish}}\n"
        ),
        0,
    );
    assert_eq!(cell["outcome"], "passed", "the loop went on after the refused calls: {}", cell["reason"]);
    assert_eq!(cell["steps"], 3);
    assert_eq!(cell["batched_calls"], 50);
    assert_eq!(cell["tool_counts"]["read_file"], 16, "the first 16 ran");
    assert_eq!(cell["invalid_actions"], 34, "the other 34 were refused, each on its own");
    let step1 = call_events(&ev, 1);
    assert_eq!(step1.iter().filter(|e| e.starts_with("model_action")).count(), 50);
    assert_eq!(step1.iter().filter(|e| e.starts_with("policy_decision")).count(), 50, "every call passed the gate");
    let results: Vec<&Value> = ev.iter().filter(|e| e["kind"] == "tool_result" && e["step"] == 1).collect();
    assert_eq!(results.len(), 50);
    let refused = &results[16];
    assert_eq!((refused["denied"].as_bool(), refused["batch"]["position"].as_u64()), (Some(true), Some(17)));
    let told = refused["output"].as_str().unwrap();
    assert!(told.contains("at most 16 tool calls") && told.contains("calls 17 to 50"), "{told}");
    assert_replay_agrees(&run_dir, &cell);
}

#[test]
fn a_script_with_an_empty_batch_is_refused_naming_the_field() {
    let s = Scratch::new();
    s.case("good", GOOD_CASE, GOOD_ORACLE);
    let file = s.path().join("script.yaml");
    std::fs::write(&file, "default:\n  - batch: []\n").unwrap();
    Test::new()
        .root(s.path())
        .args(&["run", "--benchmark", "demo", "--profile", "scripted", "--script"])
        .arg_path(&file)
        .run()
        .code(2)
        .stderr_has("field `default[0].batch`: is empty; give it at least one action");
}
