//! Checkpoint and resume inside a cell, end to end: a real `hcbench matrix` child is killed
//! (SIGKILL) at a step picked from a seed while its trace grows, and `matrix --resume`
//! continues the cell from its last checkpoint; `hcbench replay` of the resumed cell gives the
//! summary of an uninterrupted run of the same script. A corrupt checkpoint (cut, or of another
//! schema) is refused with its reason and the cell starts over; a workspace changed after the
//! checkpoint is restored and verified.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::run::{GOOD_CASE, GOOD_ORACLE, Scratch, by_cell};
use crate::{BIN, Test, trace_events};

const CELL: &str = "good__scripter";

/// Fourteen steps: reads, writes, an edit that fixes the case, and commands that take a
/// little time so the test can kill the process between two steps.
fn script() -> String {
    let nap = "{tool: run_command, args: {argv: [python3, -c, 'import time; time.sleep(0.12)']}}";
    let steps = [
        "{tool: read_file, args: {path: calc.py}}",
        nap,
        "{tool: write_file, args: {path: notes/a.txt, content: \"one\\n\"}}",
        nap,
        "{tool: edit_file, args: {path: calc.py, old: 'a - b', new: 'a + b'}}",
        nap,
        "{tool: write_file, args: {path: notes/b.txt, content: \"b\\n\"}}",
        nap,
        "{tool: list_files, args: {path: .}}",
        nap,
        "{tool: write_file, args: {path: notes/a.txt, content: \"two\\n\", overwrite: true}}",
        nap,
        "{tool: read_file, args: {path: notes/a.txt}}",
        "{tool: finish, args: {answer: done}}",
    ];
    let mut s = String::from("default:\n");
    for step in steps {
        s.push_str(&format!("  - {step}\n"));
    }
    s
}

fn scratch() -> Scratch {
    let s = Scratch::new();
    s.case("good", &GOOD_CASE.replace("step_budget: 5", "step_budget: 20"), GOOD_ORACLE);
    // A profile of the models file, so `matrix --resume` finds it again by its name (a
    // `scripted:PATH` profile is named after the file and does not resolve by that name).
    let file = s.path().join("steps.yaml");
    std::fs::write(&file, script()).unwrap();
    s.write("models.toml", "[scripter]\nprovider = \"scripted\"\nscript = \"steps.yaml\"\n");
    s
}

/// A checkpoint after every step, so a test can kill the process right after any step's.
const EVERY_STEP: [&str; 2] = ["--checkpoint-interval", "0"];

/// `hcbench matrix` with the script, as `Test::run` would start it, but as a child to kill,
/// saving a checkpoint after every step.
fn spawn_matrix(s: &Scratch, run_dir: &Path) -> Child {
    spawn_matrix_with(s, run_dir, &EVERY_STEP)
}

fn spawn_matrix_with(s: &Scratch, run_dir: &Path, interval: &[&str]) -> Child {
    let args = ["matrix", "--benchmark", "demo", "--format", "json", "--profiles", "scripter"];
    spawn(s, &[&args[..], interval, &["--out"]].concat(), run_dir)
}

fn spawn(s: &Scratch, args: &[&str], run_dir: &Path) -> Child {
    Command::new(BIN)
        .args(args)
        .env("HCBENCH_TEST_API_KEY", "sk-canary-never-leaks")
        .arg(run_dir)
        .current_dir(s.path())
        .env_remove("HCBENCH_ROOT")
        .env_remove("COLUMNS")
        .env("HCBENCH_HISTORY", super::process_dir("history"))
        .env("HCBENCH_WORKSPACES", super::process_dir("workspaces"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("hcbench starts")
}

/// Kills the child (SIGKILL) as soon as its trace has the checkpoint of `step`.
fn kill_after_checkpoint(child: &mut Child, trace: &Path, step: u64) {
    kill_once(child, trace, &format!("step {step}'s checkpoint"), |e| {
        e["kind"] == "checkpoint" && e["data"]["step"] == step
    });
}

/// Kills the child (SIGKILL) as soon as its trace has an event `seen` (`what` it is).
fn kill_once(child: &mut Child, trace: &Path, what: &str, seen: impl Fn(&Value) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let found = crate::read_trace_text(trace)
            .is_ok_and(|t| t.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).any(|e| seen(&e)));
        if found {
            break;
        }
        assert!(child.try_wait().unwrap().is_none(), "the run ended before {what}");
        assert!(Instant::now() < deadline, "no {what} in {}", trace.display());
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

fn resume(s: &Scratch, run_dir: &Path) -> crate::Output {
    Test::new()
        .root(s.path())
        .args(&["matrix", "--format", "json", "--resume"])
        .arg_path(run_dir)
        .args(&EVERY_STEP)
        .run()
}

fn replayed(run_dir: &Path) -> Value {
    by_cell(&Test::new().args(&["replay", "--format", "json"]).arg_path(run_dir).run().code(0).json())[CELL].clone()
}

/// What an uninterrupted run and a resumed one must agree on.
fn essentials(summary: &Value) -> Value {
    let keys = [
        "outcome",
        "reward",
        "stop_reason",
        "steps",
        "tool_calls",
        "tool_counts",
        "tool_failures",
        "policy_denials",
        "invalid_actions",
        "repeated_reads",
        "files_modified",
        "first_edit_step",
        "tests_passed",
        "verifier_passed",
        "input_tokens",
        "output_tokens",
        "context_turns",
        "context_tokens",
        "memory_updates",
        "compactions",
    ];
    let mut out: serde_json::Map<String, Value> =
        keys.iter().map(|k| (k.to_string(), summary.get(*k).cloned().unwrap_or(Value::Null))).collect();
    out.insert("cost".into(), summary.get("cost_usd").cloned().unwrap_or(Value::Null));
    Value::Object(out)
}

/// The summary of the script run without interruption, once per test.
fn uninterrupted(s: &Scratch) -> Value {
    let run_dir = s.path().join("whole");
    Test::new()
        .root(s.path())
        .args(&["matrix", "--benchmark", "demo", "--format", "json", "--profiles", "scripter"])
        .args(&EVERY_STEP)
        .args(&["--out"])
        .arg_path(&run_dir)
        .run()
        .code(0);
    let whole = replayed(&run_dir);
    assert_eq!(whole["outcome"], "passed", "{}", whole["reason"]);
    assert_eq!(whole["steps"], 14);
    let ev = trace_events(&run_dir.join("cells").join(CELL).join("trace.jsonl"));
    let checkpoints: Vec<u64> =
        ev.iter().filter(|e| e["kind"] == "checkpoint").map(|e| e["step"].as_u64().unwrap()).collect();
    assert_eq!(checkpoints, (1..=14).collect::<Vec<_>>(), "one checkpoint per step");
    whole
}

/// A step from a seed, as the random kill of the issue asks, reproducible from the seed.
fn seeded_step(seed: u64, lo: u64, hi: u64) -> u64 {
    let mut x = seed ^ 0x9e37_79b9_7f4a_7c15;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    lo + x % (hi - lo + 1)
}

#[test]
fn a_cell_killed_at_a_random_step_resumes_and_replays_as_if_never_interrupted() {
    let s = scratch();
    let whole = uninterrupted(&s);
    let seed = std::env::var("HCBENCH_KILL_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(18);
    let step = seeded_step(seed, 2, 12);
    let run_dir = s.path().join("killed");
    let trace = run_dir.join("cells").join(CELL).join("trace.jsonl");
    let mut child = spawn_matrix(&s, &run_dir);
    kill_after_checkpoint(&mut child, &trace, step);
    let before = trace_events(&trace);
    assert!(before.iter().all(|e| e["kind"] != "run_finished"), "killed, not finished (seed {seed}, step {step})");

    let out = resume(&s, &run_dir).code(0);
    assert!(out.stderr.contains(&format!("{CELL}: continuing after step")), "{}", out.stderr);
    let ev = trace_events(&trace);
    assert_eq!(&ev[..before.len()], &before[..], "the trace is only appended to");
    let resumed: Vec<&Value> = ev.iter().filter(|e| e["kind"] == "resumed").collect();
    assert_eq!(resumed.len(), 1, "one resume");
    let r = resumed[0];
    let last_checkpoint = before.iter().rev().find(|e| e["kind"] == "checkpoint").unwrap();
    assert_eq!(r["checkpoint_seq"], last_checkpoint["seq"]);
    assert_eq!(r["from_step"], last_checkpoint["step"]);
    assert!(r["from_step"].as_u64().unwrap() >= step, "seed {seed}: killed after step {step}");
    let after = before.len() as u64 - 1 - last_checkpoint["seq"].as_u64().unwrap();
    assert_eq!(r["discarded_events"].as_u64(), Some(after), "what came after the checkpoint is discarded");
    // The loop continued at the next step: its first action after the resume is that step's.
    let next = ev.iter().skip(before.len()).find(|e| e["kind"] == "model_action").unwrap();
    assert_eq!(next["step"].as_u64(), Some(r["from_step"].as_u64().unwrap() + 1));

    let live = by_cell(&out.json()["cells"])[CELL].clone();
    let again = replayed(&run_dir);
    assert_eq!(again["resumes"], 1);
    assert_eq!(essentials(&again), essentials(&whole), "seed {seed}, killed after step {step}");
    assert_eq!(essentials(&live), essentials(&whole), "the report of the resumed run agrees too");
    let ws = run_dir.join("workspaces").join(CELL);
    assert_eq!(std::fs::read_to_string(ws.join("notes/a.txt")).unwrap(), "two\n");
    assert_eq!(std::fs::read_to_string(ws.join("calc.py")).unwrap(), "def add(a, b):\n    return a + b\n");
}

/// The test's script with naps of `seconds` instead: steps that take the time a model's turn
/// might.
fn scratch_with_naps(seconds: &str) -> Scratch {
    let s = scratch();
    std::fs::write(
        s.path().join("steps.yaml"),
        script().replace("time.sleep(0.12)", &format!("time.sleep({seconds})")),
    )
    .unwrap();
    s
}

/// An event's time stamp, in milliseconds since the epoch.
fn millis(event: &Value) -> u128 {
    let ts = event["ts"].as_str().unwrap_or_else(|| panic!("no ts: {event}"));
    humantime::parse_rfc3339(ts).unwrap().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()
}

#[test]
fn with_an_interval_a_cell_saves_once_it_is_due_and_resumes_from_its_last_save() {
    let s = scratch_with_naps("0.3");
    let whole = uninterrupted(&s);
    let run_dir = s.path().join("spaced");
    let trace = run_dir.join("cells").join(CELL).join("trace.jsonl");
    let mut child = spawn_matrix_with(&s, &run_dir, &["--checkpoint-interval", "1s"]);
    kill_once(&mut child, &trace, "a checkpoint", |e| e["kind"] == "checkpoint");
    let before = trace_events(&trace);
    assert!(before.iter().all(|e| e["kind"] != "run_finished"), "killed, not finished");
    let checkpoints: Vec<&Value> = before.iter().filter(|e| e["kind"] == "checkpoint").collect();
    let steps = before.iter().filter(|e| e["kind"] == "state_updated").count();
    assert!(checkpoints.len() < steps, "{} checkpoints in {steps} steps: not every step is saved", checkpoints.len());
    // No save before one is due: a second after the cell began, then after the last save.
    let started = before.iter().find(|e| e["kind"] == "run_started").unwrap();
    assert!(checkpoints[0]["step"].as_u64().unwrap() > 1, "step 1 takes far less than a second");
    let mut last = millis(started);
    for c in &checkpoints {
        assert!(millis(c) >= last + 1000, "a checkpoint {} ms after the last save", millis(c) - last);
        last = millis(c);
    }

    let out = resume(&s, &run_dir).code(0);
    assert!(out.stderr.contains(&format!("{CELL}: continuing after step")), "{}", out.stderr);
    let ev = trace_events(&trace);
    let r = ev.iter().find(|e| e["kind"] == "resumed").expect("resumed");
    let saved = checkpoints.last().unwrap();
    assert_eq!((&r["from_step"], &r["checkpoint_seq"]), (&saved["step"], &saved["seq"]), "from its last save");
    assert_eq!(essentials(&replayed(&run_dir)), essentials(&whole));
    let ws = run_dir.join("workspaces").join(CELL);
    assert_eq!(std::fs::read_to_string(ws.join("notes/a.txt")).unwrap(), "two\n");
    assert_eq!(std::fs::read_to_string(ws.join("calc.py")).unwrap(), "def add(a, b):\n    return a + b\n");
}

#[test]
fn a_cell_killed_before_its_first_save_is_due_has_no_checkpoint_and_starts_over() {
    let s = scratch();
    let whole = uninterrupted(&s);
    let run_dir = s.path().join("unsaved");
    let cell = run_dir.join("cells").join(CELL);
    let trace = cell.join("trace.jsonl");
    let mut child = spawn_matrix_with(&s, &run_dir, &["--checkpoint-interval", "1h"]);
    kill_once(&mut child, &trace, "step 5", |e| e["kind"] == "state_updated" && e["data"]["step"] == 5);
    let before = trace_events(&trace);
    assert!(before.iter().all(|e| e["kind"] != "checkpoint"), "no save is due within the hour");
    assert!(!cell.join("checkpoint").exists(), "nothing of a checkpoint was written, nor digested");

    let out = resume(&s, &run_dir).code(0);
    assert!(!out.stderr.contains("continuing after step"), "{}", out.stderr);
    let ev = trace_events(&trace);
    assert_eq!(ev.iter().filter(|e| e["kind"] == "run_started").count(), 1, "a fresh trace");
    assert!(ev.iter().all(|e| e["kind"] != "resumed"));
    assert_eq!(essentials(&replayed(&run_dir)), essentials(&whole), "started over, and right");
}

#[test]
fn a_checkpoint_interval_that_is_not_a_duration_is_refused_with_the_fix() {
    let s = scratch();
    for (command, value) in [("run", "soon"), ("matrix", "5"), ("ablate", "1 parsec")] {
        let mut args = vec![command, "--benchmark", "demo", "--checkpoint-interval", value];
        if command == "ablate" {
            args.push("--context");
        }
        let out = Test::new().root(s.path()).args(&args).run().code(2);
        assert!(out.stderr.contains(&format!("--checkpoint-interval {value:?}: ")), "{command}: {}", out.stderr);
        assert!(out.stderr.contains("give a duration such as 1s, 500ms or 2m, or 0"), "{command}: {}", out.stderr);
    }
}

/// Kills a run after step 5's checkpoint; returns its run directory and trace.
fn killed_at_step_5(s: &Scratch, name: &str) -> (PathBuf, PathBuf) {
    let run_dir = s.path().join(name);
    let trace = run_dir.join("cells").join(CELL).join("trace.jsonl");
    let mut child = spawn_matrix(s, &run_dir);
    kill_after_checkpoint(&mut child, &trace, 5);
    (run_dir, trace)
}

/// The file the trace's last checkpoint event names.
fn last_checkpoint(trace: &Path) -> (PathBuf, String) {
    let ev = trace_events(trace);
    let e = ev.iter().rev().find(|e| e["kind"] == "checkpoint").unwrap();
    (trace.parent().unwrap().join(e["path"].as_str().unwrap()), e["sha256"].as_str().unwrap().to_string())
}

#[test]
fn a_corrupt_checkpoint_is_refused_and_the_cell_starts_over_correctly() {
    let s = scratch();
    let whole = uninterrupted(&s);

    // Cut: the file no longer has the sha256 its event names.
    let (run_dir, trace) = killed_at_step_5(&s, "cut");
    let (file, _) = last_checkpoint(&trace);
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
    let out = resume(&s, &run_dir).code(0);
    assert!(
        out.stderr.contains(&format!("warning: {CELL}: checkpoint refused, the cell starts over from step 0")),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("not the") && out.stderr.contains("its checkpoint event names"), "{}", out.stderr);
    let ev = trace_events(&trace);
    assert_eq!(ev[1]["kind"], "resume_refused", "said in the fresh trace, right after run_started");
    assert!(ev[1]["reason"].as_str().unwrap().contains("sha256"), "{}", ev[1]["reason"]);
    assert_eq!(ev[1]["abandoned_trace"], "trace.jsonl.abandoned-1");
    let abandoned = trace.with_file_name("trace.jsonl.abandoned-1");
    assert!(trace_events(&abandoned).iter().any(|e| e["kind"] == "checkpoint"), "the old trace is kept whole");
    assert!(ev.iter().all(|e| e["kind"] != "resumed"));
    assert_eq!(essentials(&replayed(&run_dir)), essentials(&whole), "started over, and still right");

    // Another schema, under a sha256 that matches: refused for the schema.
    let (run_dir, trace) = killed_at_step_5(&s, "schema");
    let (file, sha) = last_checkpoint(&trace);
    let mut cp: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    cp["schema_version"] = 99.into();
    let text = serde_json::to_vec(&cp).unwrap();
    std::fs::write(&file, &text).unwrap();
    let new_sha = {
        use sha2::{Digest, Sha256};
        format!("{:x}", Sha256::digest(&text))
    };
    let t = crate::read_trace_text(&trace).unwrap().replace(&sha, &new_sha);
    std::fs::write(&trace, t).unwrap();
    let out = resume(&s, &run_dir).code(0);
    assert!(out.stderr.contains("has schema_version 99, this hcbench reads 1"), "{}", out.stderr);
    assert_eq!(essentials(&replayed(&run_dir)), essentials(&whole));

    // Garbage in place of the file: refused, and nothing is lost.
    let (run_dir, trace) = killed_at_step_5(&s, "garbage");
    let (file, _) = last_checkpoint(&trace);
    std::fs::write(&file, "not json at all").unwrap();
    resume(&s, &run_dir).code(0).stderr_has("checkpoint refused");
    assert_eq!(essentials(&replayed(&run_dir)), essentials(&whole));
}

#[test]
fn a_workspace_changed_after_the_checkpoint_is_restored_and_verified() {
    let s = scratch();
    let whole = uninterrupted(&s);
    // Started by `hcbench run` and finished by `hcbench run --resume`, which finishes a run
    // directory as `matrix --resume` does.
    let run_dir = s.path().join("changed");
    let trace = run_dir.join("cells").join(CELL).join("trace.jsonl");
    let args =
        ["run", "--benchmark", "demo", "--format", "json", "--profile", "scripter", "--checkpoint-interval", "0"];
    let mut child = spawn(&s, &[&args[..], &["--out"]].concat(), &run_dir);
    kill_after_checkpoint(&mut child, &trace, 5);
    // By step 5 the agent wrote notes/a.txt and fixed calc.py; undo and add to that.
    let ws = run_dir.join("workspaces").join(CELL);
    std::fs::write(ws.join("calc.py"), "broken\n").unwrap();
    std::fs::remove_file(ws.join("notes/a.txt")).unwrap();
    std::fs::write(ws.join("stray.txt"), "not the agent's").unwrap();
    let out =
        Test::new().root(s.path()).args(&["run", "--format", "json", "--resume"]).arg_path(&run_dir).run().code(0);
    assert!(out.stderr.contains("(workspace restored,"), "{}", out.stderr);
    let ev = trace_events(&trace);
    let r = ev.iter().find(|e| e["kind"] == "resumed").expect("resumed");
    assert_eq!(r["workspace_restored"], true);
    assert!(!ws.join("stray.txt").exists(), "what the checkpoint does not have is gone");
    assert_eq!(std::fs::read_to_string(ws.join("notes/a.txt")).unwrap(), "two\n");
    assert_eq!(essentials(&replayed(&run_dir)), essentials(&whole));
}

/// A Chat Completions server on 127.0.0.1 whose reply depends only on the step the request is
/// for (the context's status line "Step N of M"), so a step asked again after a resume gets
/// the same answer, tokens included, as it did in the uninterrupted run. Each reply takes a
/// little time, so the test can kill the process between two steps.
fn step_server(actions: &'static [&'static str]) -> u16 {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut length = 0usize;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let line = line.trim_end().to_ascii_lowercase();
                    if line.is_empty() {
                        break;
                    }
                    if let Some(v) = line.strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0u8; length];
                if reader.read_exact(&mut body).is_err() {
                    return;
                }
                let text = String::from_utf8_lossy(&body);
                let step: usize =
                    text.split("Step ").filter_map(|rest| rest.split(' ').next()?.parse().ok()).last().unwrap_or(1);
                let action = actions[(step - 1).min(actions.len() - 1)];
                std::thread::sleep(Duration::from_millis(120));
                let reply = serde_json::json!({
                    "id": "chatcmpl-1", "object": "chat.completion", "model": "mock",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": action}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 1000 + 37 * step, "completion_tokens": 20 + step}
                })
                .to_string();
                let mut stream = stream;
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
                    reply.len()
                );
            });
        }
    });
    port
}

#[test]
fn an_http_cell_resumed_costs_what_an_uninterrupted_one_costs() {
    const ACTIONS: &[&str] = &[
        r#"{"tool": "read_file", "args": {"path": "calc.py"}}"#,
        r#"{"tool": "list_files", "args": {"path": "."}}"#,
        r#"{"tool": "write_file", "args": {"path": "notes.txt", "content": "plan\n"}}"#,
        r#"{"tool": "read_file", "args": {"path": "tests/test_calc.py"}}"#,
        r#"{"tool": "edit_file", "args": {"path": "calc.py", "old": "a - b", "new": "a + b"}}"#,
        r#"{"tool": "read_file", "args": {"path": "calc.py"}}"#,
        r#"{"tool": "finish", "args": {"answer": "fixed add"}}"#,
    ];
    let port = step_server(ACTIONS);
    let s = Scratch::new();
    s.case("good", &GOOD_CASE.replace("step_budget: 5", "step_budget: 10"), GOOD_ORACLE);
    s.write(
        "models.toml",
        &format!(
            "[mock]\nprovider = \"openai-chat\"\nmodel = \"mock-model\"\nbase_url = \"http://127.0.0.1:{port}\"\n\
             api_key_env = \"HCBENCH_TEST_API_KEY\"\ntimeout_s = 5\nmax_output_tokens = 512\n\
             input_price_per_mtok = 0.5\noutput_price_per_mtok = 2.0\n"
        ),
    );
    let args = [
        "matrix",
        "--benchmark",
        "demo",
        "--format",
        "json",
        "--profiles",
        "mock",
        "--checkpoint-interval",
        "0",
        "--out",
    ];
    let whole_dir = s.path().join("whole");
    Test::new().root(s.path()).args(&args).arg_path(&whole_dir).run().code(0);
    let cell = "good__mock";
    let whole = by_cell(&Test::new().args(&["replay", "--format", "json"]).arg_path(&whole_dir).run().code(0).json())
        [cell]
        .clone();
    assert_eq!((whole["outcome"].as_str(), whole["steps"].as_u64()), (Some("passed"), Some(7)), "{}", whole["reason"]);

    let run_dir = s.path().join("killed");
    let trace = run_dir.join("cells").join(cell).join("trace.jsonl");
    let mut child = spawn(&s, &args, &run_dir);
    kill_after_checkpoint(&mut child, &trace, 3);
    resume(&s, &run_dir).code(0).stderr_has(&format!("{cell}: continuing after step"));
    let again = by_cell(&Test::new().args(&["replay", "--format", "json"]).arg_path(&run_dir).run().code(0).json())
        [cell]
        .clone();
    assert_eq!(again["resumes"], 1);
    for key in ["outcome", "steps", "tool_counts", "files_modified", "input_tokens", "output_tokens", "context_tokens"]
    {
        assert_eq!(again[key], whole[key], "{key}");
    }
    let cost =
        |v: &Value| (v["input_tokens"].as_f64().unwrap() * 0.5 + v["output_tokens"].as_f64().unwrap() * 2.0) / 1e6;
    assert!(cost(&whole) > 0.0);
    assert_eq!(cost(&again), cost(&whole), "the cost of the resumed cell is the uninterrupted one's");
}

const SESSIONS_CELL: &str = "long__scripter";

/// A three-session case over the calc fixture: `add` fixed and `notes/done.txt` written, each
/// checked by a hidden feature check after every session.
const SESSIONS_CASE: &str = "id: long\ncategory: sessions\nsplit: train\nfixture: calc\n\
     prompt: make `add` work and write notes/done.txt; the features are `add` and `notes`\n\
     test_command: [python3, -m, unittest, discover, -s, tests]\ntimeout_s: 60\n\
     sessions:\n  count: 3\n  step_budget: 10\n  prompts: {initializer: set up, coding: code}\n\
     features:\n  - {id: add, check: [python3, -c, 'import calc; assert calc.add(2, 3) == 5']}\n  - {id: notes, check: [test, -f, notes/done.txt]}\n";

/// Nineteen steps in three sessions (5, 7 and 7, each ending with `finish`), with a nap
/// between two steps so the test can kill the process there.
fn sessions_script() -> String {
    let nap = "{tool: run_command, args: {argv: [python3, -c, 'import time; time.sleep(0.12)']}}";
    let list = |add: bool, notes: bool| {
        format!(
            "{{tool: write_file, args: {{path: feature_list.json, overwrite: true, content: '[{{\"id\": \"add\", \"passes\": {add}}}, {{\"id\": \"notes\", \"passes\": {notes}}}]'}}}}"
        )
    };
    let steps = [
        // Session 1, steps 1-5: the initializer.
        list(false, false),
        nap.into(),
        "{tool: write_file, args: {path: progress.log, content: \"session 1: set up\\n\"}}".into(),
        nap.into(),
        "{tool: finish, args: {answer: set up}}".into(),
        // Session 2, steps 6-12.
        "{tool: read_file, args: {path: feature_list.json}}".into(),
        nap.into(),
        "{tool: edit_file, args: {path: calc.py, old: 'a - b', new: 'a + b'}}".into(),
        nap.into(),
        list(true, false),
        nap.into(),
        "{tool: finish, args: {answer: add works}}".into(),
        // Session 3, steps 13-19.
        "{tool: read_file, args: {path: progress.log}}".into(),
        nap.into(),
        "{tool: write_file, args: {path: notes/done.txt, content: \"done\\n\"}}".into(),
        nap.into(),
        list(true, true),
        nap.into(),
        "{tool: finish, args: {answer: notes written}}".into(),
    ];
    let mut s = String::from("default:\n");
    for step in steps {
        s.push_str(&format!("  - {step}\n"));
    }
    s
}

fn sessions_scratch() -> Scratch {
    let s = Scratch::new();
    s.write("benchmarks/demo/benchmark.yaml", "name: demo\ncategories: [sessions]\n");
    s.case("long", SESSIONS_CASE, "actions:\n  - {tool: finish}\n  - {tool: finish}\n  - {tool: finish}\n");
    std::fs::write(s.path().join("steps.yaml"), sessions_script()).unwrap();
    s.write("models.toml", "[scripter]\nprovider = \"scripted\"\nscript = \"steps.yaml\"\n");
    s
}

/// What a multi-session cell's uninterrupted and resumed runs must agree on: the essentials,
/// the progress per session and the features' verdicts.
fn session_essentials(summary: &Value) -> Value {
    let mut out = essentials(summary);
    out["sessions"] = summary["sessions"].clone();
    out["checks"] = summary["checks"].clone();
    out
}

#[test]
fn a_multi_session_cell_killed_in_a_later_session_resumes_there() {
    let s = sessions_scratch();
    let whole_dir = s.path().join("whole");
    Test::new()
        .root(s.path())
        .args(&["matrix", "--benchmark", "demo", "--format", "json", "--profiles", "scripter"])
        .args(&EVERY_STEP)
        .args(&["--out"])
        .arg_path(&whole_dir)
        .run()
        .code(0);
    let whole = by_cell(&Test::new().args(&["replay", "--format", "json"]).arg_path(&whole_dir).run().code(0).json())
        [SESSIONS_CELL]
        .clone();
    assert_eq!(whole["outcome"], "passed", "{}", whole["reason"]);
    assert_eq!(whole["steps"], 19);
    let verified: Vec<&Value> = whole["sessions"].as_array().unwrap().iter().map(|p| &p["verified"]).collect();
    assert_eq!(verified, [0, 1, 2], "features passing after each session");
    let ev = trace_events(&whole_dir.join("cells").join(SESSIONS_CELL).join("trace.jsonl"));
    let checkpoints: Vec<u64> =
        ev.iter().filter(|e| e["kind"] == "checkpoint").map(|e| e["step"].as_u64().unwrap()).collect();
    assert_eq!(checkpoints, (1..=19).collect::<Vec<_>>(), "one checkpoint per step, in every session");

    // A step from a seed inside session 2 or 3, and the last step of session 2 (killed while
    // its features are checked, before session 3 starts).
    let seed = std::env::var("HCBENCH_KILL_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(18);
    for (i, step) in [seeded_step(seed, 6, 18), 12].into_iter().enumerate() {
        let run_dir = s.path().join(format!("killed-{i}"));
        let trace = run_dir.join("cells").join(SESSIONS_CELL).join("trace.jsonl");
        let mut child = spawn_matrix(&s, &run_dir);
        kill_after_checkpoint(&mut child, &trace, step);
        let before = trace_events(&trace);
        assert!(before.iter().all(|e| e["kind"] != "run_finished"), "killed, not finished (step {step})");

        let out = resume(&s, &run_dir).code(0);
        assert!(out.stderr.contains(&format!("{SESSIONS_CELL}: continuing after step")), "{}", out.stderr);
        let ev = trace_events(&trace);
        assert_eq!(&ev[..before.len()], &before[..], "the trace is only appended to");
        let r = ev.iter().find(|e| e["kind"] == "resumed").expect("resumed, not started over");
        let from = r["from_step"].as_u64().unwrap();
        assert!(from >= step, "killed after step {step}, resumed from {from}");
        // The session the checkpoint is of goes on at the next step (or, after its `finish`, to
        // its feature checks); only the sessions after it start after the resume.
        let session_of = |step: u64| {
            if step <= 5 {
                1
            } else if step <= 12 {
                2
            } else {
                3
            }
        };
        let restarted: Vec<u64> = ev[before.len()..]
            .iter()
            .filter(|e| e["kind"] == "session_started")
            .map(|e| e["index"].as_u64().unwrap())
            .collect();
        assert_eq!(restarted, (session_of(from) + 1..=3).collect::<Vec<_>>(), "resumed from step {from}");
        let next = ev[before.len()..].iter().find(|e| e["kind"] == "model_action").unwrap();
        assert_eq!(next["step"].as_u64(), Some(from + 1));

        let again = by_cell(&Test::new().args(&["replay", "--format", "json"]).arg_path(&run_dir).run().code(0).json())
            [SESSIONS_CELL]
            .clone();
        assert_eq!(again["resumes"], 1);
        assert_eq!(session_essentials(&again), session_essentials(&whole), "killed after step {step}");
        let ws = run_dir.join("workspaces").join(SESSIONS_CELL);
        assert_eq!(std::fs::read_to_string(ws.join("notes/done.txt")).unwrap(), "done\n");
        assert!(!run_dir.join("cells").join(SESSIONS_CELL).join("checkpoint").exists(), "finished: no checkpoints");
    }
}

#[test]
fn a_multi_session_cell_saved_by_interval_resumes_in_the_session_of_its_last_save() {
    let s = sessions_scratch();
    let whole_dir = s.path().join("whole");
    let args = ["matrix", "--benchmark", "demo", "--format", "json", "--profiles", "scripter", "--out"];
    Test::new().root(s.path()).args(&args).arg_path(&whole_dir).run().code(0);
    let whole = by_cell(&Test::new().args(&["replay", "--format", "json"]).arg_path(&whole_dir).run().code(0).json())
        [SESSIONS_CELL]
        .clone();
    assert_eq!(whole["outcome"], "passed", "{}", whole["reason"]);

    // Saved at most every half second, killed as session 3's first step ends: the last save
    // written by then is of an earlier session, and the steps after it (its session's last
    // ones, the feature checks, session 3's start) are done again.
    let run_dir = s.path().join("killed");
    let trace = run_dir.join("cells").join(SESSIONS_CELL).join("trace.jsonl");
    let mut child = spawn_matrix_with(&s, &run_dir, &["--checkpoint-interval", "500ms"]);
    kill_once(&mut child, &trace, "step 13", |e| e["kind"] == "state_updated" && e["data"]["step"] == 13);
    let before = trace_events(&trace);
    let saved: Vec<u64> =
        before.iter().filter(|e| e["kind"] == "checkpoint").map(|e| e["step"].as_u64().unwrap()).collect();
    assert!(!saved.is_empty() && saved.len() < 13, "some steps saved, not all: {saved:?}");
    let last = *saved.last().unwrap();
    assert!(last <= 12, "the last save is of session 1 or 2: {saved:?}");

    let out = resume(&s, &run_dir).code(0);
    assert!(out.stderr.contains(&format!("{SESSIONS_CELL}: continuing after step {last}")), "{}", out.stderr);
    let ev = trace_events(&trace);
    let restarted: Vec<u64> = ev[before.len()..]
        .iter()
        .filter(|e| e["kind"] == "session_started")
        .map(|e| e["index"].as_u64().unwrap())
        .collect();
    let session_of_last = if last <= 5 { 1 } else { 2 };
    assert_eq!(restarted, (session_of_last + 1..=3).collect::<Vec<_>>(), "resumed after step {last}");
    let again = by_cell(&Test::new().args(&["replay", "--format", "json"]).arg_path(&run_dir).run().code(0).json())
        [SESSIONS_CELL]
        .clone();
    assert_eq!(again["resumes"], 1);
    assert_eq!(session_essentials(&again), session_essentials(&whole), "resumed after step {last}");
}
