//! Read-only delegation (`delegate_readonly`) end to end: a scripted parent whose `delegate`
//! step gives the child its steps, the evidence coming back as the call's result, the child's
//! own trace linked from the parent's, refusals of writes, commands and further delegation in
//! the child, a child out of budget, bad scripts, and a model behind a loopback HTTP server
//! whose child turns cost tokens that count toward the cell and the run's budget.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::Test;
use crate::run::{GOOD_CASE, GOOD_ORACLE, Scratch, by_cell};

/// The `good` case with delegation allowed (a case opts in by naming the tool).
fn delegating_case(id: &str) -> String {
    format!(
        "{}allowed_tools: [list_files, read_file, search_code, repo_map, edit_file, write_file, run_tests, run_command, delegate_readonly, finish]\n",
        GOOD_CASE.replace("id: good", &format!("id: {id}"))
    )
}

const FIX_AND_FINISH: &str = "  - {tool: edit_file, args: {path: calc.py, old: 'a - b', new: 'a + b'}}\n  - {tool: finish, args: {answer: fixed}}\n";

/// Runs the `good` case with `script`; returns the cell's summary, the run directory and the
/// command's stderr.
fn run_script(s: &Scratch, script: &str, code: i32) -> (Value, PathBuf, String) {
    let (out, run_dir) = s.run_script(script, code);
    let cell = if code == 2 { Value::Null } else { by_cell(&out.json())["good__scripted"].clone() };
    (cell, run_dir, out.stderr)
}

fn cell_dir(run_dir: &Path) -> PathBuf {
    run_dir.join("cells/good__scripted")
}

fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["kind"] == kind).collect()
}

/// `kind` (and `:tool` where the event names one) of every event of the parent's `step`.
fn step_events(events: &[Value], step: u64) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["step"] == step)
        .map(|e| match e["tool"].as_str() {
            Some(tool) => format!("{}:{tool}", e["kind"].as_str().unwrap()),
            None => e["kind"].as_str().unwrap().to_string(),
        })
        .collect()
}

#[test]
fn a_scripted_delegation_returns_evidence_links_its_trace_and_counts_in_the_summary() {
    let s = Scratch::new();
    s.case("good", &delegating_case("good"), GOOD_ORACLE);
    let script = format!(
        "default:\n  - delegate:\n      question: where is add computed?\n      max_steps: 3\n      steps:\n        - {{tool: search_code, args: {{pattern: 'def add'}}}}\n        - {{tool: read_file, args: {{path: calc.py}}}}\n        - {{tool: finish, args: {{answer: '{{\"findings\": [\"add subtracts (calc.py:2)\"], \"files\": [\"calc.py\"], \"symbols\": [\"add\"]}}'}}}}\n{FIX_AND_FINISH}"
    );
    let (cell, run_dir, _) = run_script(&s, &script, 0);
    assert_eq!(cell["outcome"], "passed", "{}", cell["reason"]);
    assert_eq!(cell["steps"], 3, "the parent's turns: the delegation is one of them");
    assert_eq!((cell["delegations"].as_u64(), cell["delegation_steps"].as_u64()), (Some(1), Some(3)));
    assert!(cell.get("delegations_failed").is_none(), "{cell}");

    let parent = crate::trace_events(&cell_dir(&run_dir).join("trace.jsonl"));
    // Whether the step was saved (a `checkpoint` after its `state_updated`) depends on time
    // (`--checkpoint-interval`).
    let mut events = step_events(&parent, 1);
    events.retain(|e| e != "checkpoint");
    assert_eq!(
        events,
        [
            "repo_map_used",
            "context_packed",
            "model_action:delegate_readonly",
            "policy_decision:delegate_readonly",
            "delegation_started",
            "delegation_completed",
            "tool_result:delegate_readonly",
            "state_updated",
        ],
        "the delegation sits between the call's decision and its result"
    );
    let started = of_kind(&parent, "delegation_started")[0];
    assert_eq!((started["id"].as_u64(), started["question"].as_str()), (Some(1), Some("where is add computed?")));
    assert_eq!(started["max_steps"], 3, "the step budget the script asked for, within the spec's cap");
    assert_eq!(started["trace"], "delegations/1/trace.jsonl");
    let completed = of_kind(&parent, "delegation_completed")[0];
    assert_eq!((completed["steps"].as_u64(), completed["refusals"].as_u64()), (Some(3), Some(0)));
    assert_eq!(
        (completed["findings"].as_u64(), completed["files"].as_u64(), completed["symbols"].as_u64()),
        (Some(1), Some(1), Some(1))
    );
    // The evidence is the call's result, as the parent's model reads it.
    let result = of_kind(&parent, "tool_result")[0];
    assert_eq!(result["ok"], true);
    let evidence: Value = serde_json::from_str(result["output"].as_str().unwrap()).unwrap();
    assert_eq!(evidence["findings"], json!(["add subtracts (calc.py:2)"]));
    assert_eq!((evidence["files"].clone(), evidence["symbols"].clone()), (json!(["calc.py"]), json!(["add"])));
    assert_eq!((evidence["answered"].as_bool(), evidence["steps"].as_u64()), (Some(true), Some(3)));
    assert_eq!(completed["evidence_bytes"], result["output_bytes"]);

    // The child's own trace: a cell in miniature, with the same event kinds.
    let child_trace = cell_dir(&run_dir).join(started["trace"].as_str().unwrap());
    let child = crate::trace_events(&child_trace);
    assert_eq!(child[0]["kind"], "run_started");
    assert_eq!(child[0]["step_budget"], 3);
    assert!(child.iter().all(|e| e["cell_id"] == "good__scripted/delegation-1"), "one cell id per trace");
    let calls: Vec<&str> = of_kind(&child, "tool_result").iter().map(|e| e["tool"].as_str().unwrap()).collect();
    assert_eq!(calls, ["search_code", "read_file", "finish"]);
    let end = child.last().unwrap();
    assert_eq!((end["kind"].as_str(), end["outcome"].as_str()), (Some("run_finished"), Some("passed")));
    let child_context = of_kind(&child, "context_packed").len();
    assert_eq!(child_context, 3, "the child packs its own context each turn");

    // Replay folds the same summary, and reads the child's trace like any other.
    let replayed = Test::new().args(&["replay", "--format", "json"]).arg_path(&run_dir).run().code(0);
    assert_eq!(by_cell(&replayed.json())["good__scripted"], cell, "replay gives the same summary");
    let child_summary = Test::new().args(&["replay", "--format", "json"]).arg_path(&child_trace).run();
    let child_summary = child_summary.json();
    let child_summary = if child_summary.is_array() { child_summary[0].clone() } else { child_summary };
    assert_eq!((child_summary["steps"].as_u64(), child_summary["outcome"].as_str()), (Some(3), Some("passed")));
}

#[test]
fn a_child_that_tries_to_write_run_a_command_or_delegate_is_refused_in_its_own_trace() {
    let s = Scratch::new();
    s.case("good", &delegating_case("good"), GOOD_ORACLE);
    let script = "default:\n  - delegate:\n      question: can you fix it for me?\n      steps:\n        - {tool: write_file, args: {path: evil.txt, content: pwned}}\n        - {tool: run_command, args: {argv: [ls]}}\n        - {tool: delegate_readonly, args: {question: ask someone else}}\n        - batch:\n          - {tool: edit_file, args: {path: calc.py, old: 'a - b', new: 'a + b'}}\n          - {tool: read_file, args: {path: calc.py}}\n        - {tool: finish, args: {answer: I may only read}}\n  - {tool: read_file, args: {path: calc.py}}\n  - {tool: finish, args: {answer: not fixed}}\n";
    let (cell, run_dir, _) = run_script(&s, script, 1);
    assert_eq!(cell["outcome"], "failed", "nothing fixed the bug: the child could not edit");
    assert_eq!(cell["policy_denials"], 0, "the child's refusals are in its own trace, not the parent's");
    let ws = std::fs::canonicalize(run_dir.join("workspaces/good__scripted")).unwrap();
    assert!(!ws.join("evil.txt").exists(), "the child wrote nothing");
    assert_eq!(std::fs::read_to_string(ws.join("calc.py")).unwrap(), "def add(a, b):\n    return a - b\n");

    let child = crate::trace_events(&cell_dir(&run_dir).join("delegations/1/trace.jsonl"));
    let refused: Vec<(&str, &str)> = of_kind(&child, "policy_decision")
        .iter()
        .filter(|e| e["allowed"] == false)
        .map(|e| (e["tool"].as_str().unwrap(), e["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(
        refused.iter().map(|r| r.0).collect::<Vec<_>>(),
        ["write_file", "run_command", "delegate_readonly", "edit_file"]
    );
    for (tool, reason) in &refused {
        assert!(reason.contains(&format!("`{tool}` is not available in a read-only delegation")), "{reason}");
    }
    let denied = of_kind(&child, "tool_result").iter().filter(|e| e["denied"] == true).count();
    assert_eq!(denied, 4, "each refused call has its result, and the read beside the edit ran");
    assert_eq!(child.last().unwrap()["outcome"], "passed", "the child went on and answered");
    assert!(!cell_dir(&run_dir).join("delegations/2").exists(), "the child started no delegation of its own");

    let parent = crate::trace_events(&cell_dir(&run_dir).join("trace.jsonl"));
    let completed = of_kind(&parent, "delegation_completed")[0];
    assert_eq!(completed["refusals"], 4);
    let evidence = of_kind(&parent, "tool_result")[0]["output"].as_str().unwrap().to_string();
    assert!(evidence.contains("I may only read") && evidence.contains("calc.py"), "{evidence}");
}

#[test]
fn a_delegation_out_of_budget_fails_with_what_it_gathered_and_the_cell_goes_on() {
    let s = Scratch::new();
    s.case("good", &delegating_case("good"), GOOD_ORACLE);
    // The agent spec caps a delegation at 2 steps, whatever the call asks for.
    s.write("agent/system.md", "You fix bugs.\n");
    s.write("agent/format.md", "Reply with one JSON object {\"tool\": ..., \"args\": {...}}.\n");
    s.write(
        "agent/agent.yaml",
        "system_prompt_file: system.md\naction_format_file: format.md\ndelegation: {max_steps: 2, max_tokens: 5000}\n",
    );
    let script = format!(
        "default:\n  - delegate:\n      question: what do the tests expect?\n      max_steps: 10\n      steps:\n        - {{tool: read_file, args: {{path: tests/test_calc.py}}}}\n        - {{tool: read_file, args: {{path: calc.py}}}}\n        - {{tool: finish, args: {{answer: never reached}}}}\n{FIX_AND_FINISH}"
    );
    let (cell, run_dir, _) = run_script(&s, &script, 0);
    assert_eq!(cell["outcome"], "passed", "the cell went on after the failed delegation: {}", cell["reason"]);
    assert_eq!((cell["delegations"].as_u64(), cell["delegations_failed"].as_u64()), (Some(1), Some(1)));
    assert_eq!(cell["delegation_steps"], 2);

    let parent = crate::trace_events(&cell_dir(&run_dir).join("trace.jsonl"));
    assert_eq!(of_kind(&parent, "delegation_started")[0]["max_steps"], 2, "capped by the agent spec");
    let failed = of_kind(&parent, "delegation_failed")[0];
    assert_eq!(failed["reason"], "out_of_steps");
    assert!(failed["message"].as_str().unwrap().contains("used its 2 step(s) without an answer"), "{failed}");
    let result = of_kind(&parent, "tool_result")[0];
    assert_eq!((result["tool"].as_str(), result["ok"].as_bool()), (Some("delegate_readonly"), Some(false)));
    let output = result["output"].as_str().unwrap();
    assert!(output.starts_with("delegation failed: the helper used its 2 step(s) without an answer"), "{output}");
    let evidence: Value = serde_json::from_str(&output[output.find('{').unwrap()..]).unwrap();
    assert_eq!(evidence["files"], json!(["tests/test_calc.py", "calc.py"]), "what it read, in order");
    assert_eq!(evidence["answered"], false);
    let child = crate::trace_events(&cell_dir(&run_dir).join("delegations/1/trace.jsonl"));
    let end = child.last().unwrap();
    assert_eq!((end["outcome"].as_str(), end["stop_reason"].as_str()), (Some("failed"), Some("out_of_steps")));
    let replayed = Test::new().args(&["replay", "--format", "json"]).arg_path(&run_dir).run().code(0);
    assert_eq!(by_cell(&replayed.json())["good__scripted"], cell);
}

#[test]
fn bad_delegation_input_is_refused_naming_the_file_and_field() {
    let s = Scratch::new();
    s.case("good", &delegating_case("good"), GOOD_ORACLE);
    let (_, run_dir, stderr) =
        run_script(&s, "default:\n  - delegate: {question: '', max_steps: 0, steps: [{tool: read_file}]}\n", 2);
    for needle in [
        "script.yaml",
        "field `default[0].delegate.question`: is missing or empty",
        "field `default[0].delegate.max_steps`: must be a whole number of at least 1",
        "field `default[0].delegate.steps[0].args.path`: is missing",
    ] {
        assert!(stderr.contains(needle), "missing {needle:?} in:\n{stderr}");
    }
    assert!(!run_dir.exists(), "nothing is written when the script is bad");

    s.write("agent/system.md", "s\n");
    s.write("agent/format.md", "f\n");
    s.write(
        "agent/agent.yaml",
        "system_prompt_file: system.md\naction_format_file: format.md\ndelegation: {max_tokens: 0}\n",
    );
    let (_, _, stderr) = run_script(&s, "default: [{tool: finish}]\n", 2);
    assert!(
        stderr.contains("agent.yaml") && stderr.contains("field `delegation.max_tokens`: must be at least 1"),
        "{stderr}"
    );
}

#[test]
fn a_case_that_does_not_name_the_tool_does_not_offer_it() {
    let s = Scratch::new();
    s.case("good", GOOD_CASE, GOOD_ORACLE);
    let script = format!("default:\n  - delegate: {{question: where is add?}}\n{FIX_AND_FINISH}");
    let (cell, run_dir, _) = run_script(&s, &script, 0);
    assert_eq!((cell["outcome"].as_str(), cell["policy_denials"].as_u64()), (Some("passed"), Some(1)));
    let parent = crate::trace_events(&cell_dir(&run_dir).join("trace.jsonl"));
    let decision = of_kind(&parent, "policy_decision")[0];
    assert!(decision["reason"].as_str().unwrap().contains("tool `delegate_readonly` is not allowed in this case"));
    assert!(of_kind(&parent, "delegation_started").is_empty() && !cell_dir(&run_dir).join("delegations").exists());
    let context = of_kind(&parent, "context_packed")[0].to_string();
    assert!(!context.contains("delegate_readonly"), "the tool is not shown either");
}

/// A loopback Chat Completions server: answers each request with the next reply of a queue
/// (then `fallback`), and keeps every request body.
struct ChatServer {
    port: u16,
    seen: Arc<Mutex<Vec<Value>>>,
}

impl ChatServer {
    fn start(replies: Vec<Value>, fallback: Value) -> ChatServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let queue = Arc::new(Mutex::new(VecDeque::from(replies)));
        let (seen2, fallback) = (seen.clone(), fallback.to_string());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let body = read_request(&stream);
                seen2.lock().unwrap().push(body);
                let reply = queue.lock().unwrap().pop_front().map_or(fallback.clone(), |v| v.to_string());
                let mut stream = stream;
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    reply.len()
                );
                let _ = stream.write_all(head.as_bytes());
                let _ = stream.write_all(reply.as_bytes());
            }
        });
        ChatServer { port, seen }
    }
}

fn read_request(stream: &TcpStream) -> Value {
    let mut reader = BufReader::new(stream);
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return Value::Null;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).unwrap();
    serde_json::from_slice(&body).unwrap_or(Value::Null)
}

/// A Chat Completions reply whose text is `action`, costing `input` and `output` tokens.
fn chat(action: Value, input: u64, output: u64) -> Value {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "mock",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": action.to_string()}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output}
    })
}

#[test]
fn a_models_delegation_costs_tokens_that_count_toward_the_cell_and_the_run_budget() {
    let answer = json!({"findings": ["add subtracts"], "files": ["calc.py"], "symbols": ["add"]}).to_string();
    let server = ChatServer::start(
        vec![
            chat(json!({"tool": "delegate_readonly", "args": {"question": "where is add?"}}), 1, 0),
            // The child's two turns: 4 tokens.
            chat(json!({"tool": "read_file", "args": {"path": "calc.py"}}), 2, 0),
            chat(json!({"tool": "finish", "args": {"answer": answer}}), 1, 1),
            chat(json!({"tool": "edit_file", "args": {"path": "calc.py", "old": "a - b", "new": "a + b"}}), 1, 0),
            chat(json!({"tool": "finish", "args": {"answer": "fixed"}}), 1, 0),
        ],
        chat(json!({"tool": "finish", "args": {"answer": "not expected"}}), 1, 0),
    );
    let s = Scratch::new();
    for id in ["c1", "c2"] {
        s.case(id, &delegating_case(id), GOOD_ORACLE);
    }
    // A dollar per token, so the budget below is crossed only when the child's tokens count.
    let models = s.path().join("models.toml");
    std::fs::write(
        &models,
        format!(
            "[priced]\nprovider = \"openai-chat\"\nmodel = \"mock-model\"\nbase_url = \"http://127.0.0.1:{}\"\napi_key_env = \"HCBENCH_TEST_API_KEY\"\ntimeout_s = 5\nretry_base_ms = 1\nretry_max_ms = 20\ninput_price_per_mtok = 1000000.0\noutput_price_per_mtok = 1000000.0\n",
            server.port
        ),
    )
    .unwrap();
    let run_dir = s.path().join("m");
    let out = Test::new()
        .root(s.path())
        .args(&["matrix", "--benchmark", "demo", "--profiles", "priced", "--jobs", "1", "--budget-usd", "6"])
        .args(&["--format", "json", "--models"])
        .arg_path(&models)
        .args(&["--out"])
        .arg_path(&run_dir)
        .run()
        .code(4)
        .stderr_has("budget reached");
    let r = out.json();
    let cells: Vec<&Value> = r["cells"].as_array().unwrap().iter().collect();
    let outcomes: Vec<&str> = cells.iter().map(|c| c["outcome"].as_str().unwrap_or("incomplete")).collect();
    assert_eq!(outcomes, ["passed", "incomplete"], "the parent's $3 alone would have left room for the second cell");
    let c1 = cells[0];
    assert_eq!((c1["input_tokens"].as_u64(), c1["output_tokens"].as_u64()), (Some(6), Some(1)), "{c1}");
    assert_eq!((c1["delegation_input_tokens"].as_u64(), c1["delegation_output_tokens"].as_u64()), (Some(3), Some(1)));
    assert_eq!((c1["steps"].as_u64(), c1["delegation_steps"].as_u64()), (Some(3), Some(2)));
    assert_eq!(r["profile_stats"][0]["cost_usd"], 7.0, "the cell's cost includes its delegation");

    let seen = server.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 5, "the second cell never asked the model");
    let (parent_turn, child_turn) = (seen[0].to_string(), seen[1].to_string());
    assert!(parent_turn.contains("delegate_readonly"), "the parent is offered the tool");
    assert!(child_turn.contains("read-only helper") && child_turn.contains("where is add?"), "{child_turn}");
    assert!(
        !child_turn.contains("write_file") && !child_turn.contains("delegate_readonly"),
        "the child is shown only the tools it may call: {child_turn}"
    );

    let trace = crate::trace_events(&run_dir.join("cells/c1__priced/trace.jsonl"));
    let completed = of_kind(&trace, "delegation_completed")[0];
    assert_eq!((completed["input_tokens"].as_u64(), completed["cost_usd"].as_f64()), (Some(3), Some(4.0)));
    let child = crate::trace_events(&run_dir.join("cells/c1__priced/delegations/1/trace.jsonl"));
    assert_eq!(child[0]["model"]["model"], "mock-model", "the same profile's model answered the child");

    // Every report shows the delegation and its cost.
    let csv = std::fs::read_to_string(run_dir.join("reports/cells.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| row[header.iter().position(|h| *h == name).unwrap_or_else(|| panic!("{name}: {csv}"))];
    assert_eq!((col("delegations"), col("delegation_steps"), col("delegation_cost_usd")), ("1", "2", "4"));
    let json: Value = serde_json::from_slice(&std::fs::read(run_dir.join("reports/report.json")).unwrap()).unwrap();
    assert_eq!(json["cells"][0]["delegations"], 1);
    let html = crate::report_html(&run_dir.join("reports/report.html"));
    assert!(html.contains("1 answered, 2 step(s), 4 tokens, $4.0000"), "the cell detail names the delegations");
    let md = std::fs::read_to_string(run_dir.join("reports/report.md")).unwrap();
    assert!(md.contains("Read-only delegations: 1 in 1 cell(s)"), "{md}");
}

#[test]
fn a_child_over_its_token_budget_is_not_asked_again_and_its_delegation_fails() {
    let server = ChatServer::start(
        vec![
            chat(json!({"tool": "delegate_readonly", "args": {"question": "where is add?", "max_tokens": 50}}), 10, 0),
            // The child's first turn costs 60 tokens, over its 50: it runs, and no second turn is asked.
            chat(json!({"tool": "read_file", "args": {"path": "calc.py"}}), 55, 5),
            chat(json!({"tool": "edit_file", "args": {"path": "calc.py", "old": "a - b", "new": "a + b"}}), 10, 0),
            chat(json!({"tool": "finish", "args": {"answer": "fixed"}}), 10, 0),
        ],
        chat(json!({"tool": "finish", "args": {"answer": "not expected"}}), 1, 0),
    );
    let s = Scratch::new();
    s.case("good", &delegating_case("good"), GOOD_ORACLE);
    let models = s.path().join("models.toml");
    std::fs::write(
        &models,
        format!(
            "[local]\nprovider = \"openai-chat\"\nmodel = \"mock-model\"\nbase_url = \"http://127.0.0.1:{}\"\napi_key_env = \"HCBENCH_TEST_API_KEY\"\ntimeout_s = 5\nretry_base_ms = 1\nretry_max_ms = 20\n",
            server.port
        ),
    )
    .unwrap();
    let run_dir = s.path().join("run");
    let out = Test::new()
        .root(s.path())
        .args(&["run", "--benchmark", "demo", "--profile", "local", "--format", "json", "--models"])
        .arg_path(&models)
        .args(&["--out"])
        .arg_path(&run_dir)
        .run()
        .code(0);
    let cell = by_cell(&out.json())["good__local"].clone();
    assert_eq!(cell["outcome"], "passed", "{}", cell["reason"]);
    assert_eq!((cell["delegations_failed"].as_u64(), cell["delegation_steps"].as_u64()), (Some(1), Some(1)));
    assert_eq!((cell["input_tokens"].as_u64(), cell["output_tokens"].as_u64()), (Some(85), Some(5)));
    assert_eq!(server.seen.lock().unwrap().len(), 4, "the child was not asked a second time");
    let trace = crate::trace_events(&run_dir.join("cells/good__local/trace.jsonl"));
    assert_eq!(of_kind(&trace, "delegation_started")[0]["max_tokens"], 50);
    let failed = of_kind(&trace, "delegation_failed")[0];
    assert_eq!((failed["reason"].as_str(), failed["input_tokens"].as_u64()), (Some("out_of_tokens"), Some(55)));
    assert!(failed.get("cost_usd").is_none(), "no prices, no cost: {failed}");
    let output = of_kind(&trace, "tool_result")[0]["output"].as_str().unwrap().to_string();
    assert!(output.starts_with("delegation failed: the helper spent its 50 tokens without an answer"), "{output}");
    assert!(output.contains("calc.py"), "the read it made is its evidence: {output}");
}
