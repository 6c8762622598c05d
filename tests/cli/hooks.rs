//! Tool hooks of the agent spec end to end with the scripted model: shell scripts in the agent
//! directory run in the cell's sandbox before and after calls. A pre hook allows, denies with a
//! reason the model is shown, or rewrites arguments (and a rewrite that points outside is still
//! refused by the policy); a post hook's note reaches the next context; a hook that hangs is
//! killed at its timeout, and one that prints garbage or exits 1 is a tool error, while the
//! cell goes on; a bad hook config exits 2 naming the file and the field. Replay agrees.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::Test;
use crate::run::{GOOD_CASE, GOOD_ORACLE, Scratch, by_cell};

/// The repository's prompts, `hooks` (YAML under `hooks:`) and the scripts, as `agent/`.
fn agent(s: &Scratch, hooks: &str, scripts: &[(&str, &str)]) -> PathBuf {
    let repo = crate::repo_root().join("agent");
    for f in ["system.md", "format.md"] {
        s.write(&format!("agent/{f}"), &std::fs::read_to_string(repo.join(f)).unwrap());
    }
    s.write(
        "agent/agent.yaml",
        &format!("system_prompt_file: system.md\naction_format_file: format.md\nhooks:\n{hooks}"),
    );
    for (name, body) in scripts {
        s.write(&format!("agent/hooks/{name}"), body);
    }
    s.path().join("agent")
}

/// Runs the `good` case with `script` and the agent spec in `agent`; returns the cell's summary,
/// its trace's events (payload fields beside the envelope's), the run directory and the time
/// the run took.
fn run(s: &Scratch, agent: &Path, script: &str) -> (Value, Vec<Value>, PathBuf, Duration) {
    run_in(s, agent, script, "bubblewrap")
}

/// [`run`] with `--sandbox sandbox`.
fn run_in(s: &Scratch, agent: &Path, script: &str, sandbox: &str) -> (Value, Vec<Value>, PathBuf, Duration) {
    let file = s.path().join("script.yaml");
    std::fs::write(&file, script).unwrap();
    let run_dir = s.path().join(format!("run-{sandbox}"));
    let started = Instant::now();
    let out = Test::new()
        .root(s.path())
        .args(&["--agent"])
        .arg_path(agent)
        .args(&[
            "--sandbox",
            sandbox,
            "run",
            "--benchmark",
            "demo",
            "--profile",
            "scripted",
            "--format",
            "json",
            "--script",
        ])
        .arg_path(&file)
        .args(&["--out"])
        .arg_path(&run_dir)
        .run();
    let took = started.elapsed();
    let cell = by_cell(&out.json())["good__scripted"].clone();
    (cell, crate::trace_events(&run_dir.join("cells/good__scripted/trace.jsonl")), run_dir, took)
}

fn hook_events(ev: &[Value]) -> Vec<String> {
    ev.iter()
        .filter(|e| e["kind"] == "hook_decision")
        .map(|e| {
            format!(
                "{}:{}:{}:{}:{}",
                e["step"],
                e["phase"].as_str().unwrap(),
                e["hook"].as_str().unwrap(),
                e["tool"].as_str().unwrap(),
                e["decision"].as_str().unwrap()
            )
        })
        .collect()
}

fn result_of(ev: &[Value], step: u64) -> &Value {
    ev.iter().find(|e| e["kind"] == "tool_result" && e["step"] == step).expect("a tool_result at the step")
}

fn assert_replay_agrees(run_dir: &Path, live: &Value) {
    let replayed = Test::new().args(&["replay", "--format", "json"]).arg_path(run_dir).run().code(0);
    assert_eq!(&by_cell(&replayed.json())["good__scripted"], live, "replay gives the same summary");
}

/// Denies reads of notes.txt, rewrites reads of old.py to calc.py and of escape.py to a path
/// outside the workspace, allows the rest.
const GUARD: &str = r#"#!/bin/sh
input=$(cat)
case "$input" in
  *'"path":"notes.txt"'*) echo '{"decision": "deny", "reason": "notes.txt is off limits to this agent"}' ;;
  *'"path":"old.py"'*) echo '{"decision": "rewrite", "args": {"path": "calc.py"}}' ;;
  *'"path":"escape.py"'*) echo '{"decision": "rewrite", "args": {"path": "../../../etc/passwd"}}' ;;
  *) echo '{"decision": "allow"}' ;;
esac
"#;

/// A post hook that reads the result and annotates edits.
const LINT: &str = r#"#!/bin/sh
input=$(cat)
case "$input" in
  *'"ok":true'*) echo '{"annotate": "lint: the edit keeps calc.py importable"}' ;;
  *) echo '{}' ;;
esac
"#;

#[test]
fn hooks_allow_deny_rewrite_and_annotate_and_the_model_sees_it() {
    let s = Scratch::new();
    s.case("good", &GOOD_CASE.replace("step_budget: 5", "step_budget: 10"), GOOD_ORACLE);
    s.write("fixtures/calc/notes.txt", "private\n");
    let agent = agent(
        &s,
        "  pre:\n    - {name: guard, command: [sh, '{agent}/hooks/guard.sh'], tools: [read_file], timeout_s: 10}\n\
         \x20   - {name: ok, command: ['{agent}/hooks/allow.sh']}\n\
         \x20 post:\n    - {name: lint, command: ['{agent}/hooks/lint.sh'], tools: [edit_file]}\n",
        &[
            ("guard.sh", GUARD),
            ("allow.sh", "#!/bin/sh\ncat >/dev/null\necho '{\"decision\": \"allow\"}'\n"),
            ("lint.sh", LINT),
        ],
    );
    // The script goes on only when the model was shown what the hooks said; otherwise it reads
    // a file named for what was missing, which the assertions below would see.
    let script = "default:\n\
        - {tool: read_file, args: {path: notes.txt}}\n\
        - if_shown: notes.txt is off limits to this agent\n  then: [{tool: read_file, args: {path: old.py}}]\n  else: [{tool: read_file, args: {path: deny-reason-not-shown}}]\n\
        - {tool: read_file, args: {path: escape.py}}\n\
        - {tool: edit_file, args: {path: calc.py, old: 'a - b', new: 'a + b'}}\n\
        - if_shown: 'lint: the edit keeps calc.py importable'\n  then: [{tool: finish, args: {answer: fixed}}]\n  else: [{tool: read_file, args: {path: annotation-not-shown}}]\n";
    let (cell, ev, run_dir, _) = run(&s, &agent, script);
    assert_eq!(cell["outcome"], "passed", "{}", cell["reason"]);
    assert_eq!((cell["hook_denials"].as_u64(), cell.get("hook_errors")), (Some(1), None), "{cell}");
    assert_eq!(cell["policy_denials"], 1, "the rewrite to a path outside was refused by the policy");
    assert_eq!(
        hook_events(&ev),
        [
            "1:pre:guard:read_file:deny",
            "2:pre:guard:read_file:rewrite",
            "2:pre:ok:read_file:allow",
            "3:pre:guard:read_file:rewrite",
            "4:pre:ok:edit_file:allow",
            "4:post:lint:edit_file:annotate",
            "5:pre:ok:finish:allow",
        ],
        "hooks run in order, filtered by tool; the first deny ends the pre phase"
    );
    let denied = result_of(&ev, 1);
    assert_eq!(denied["denied"], true);
    let told = denied["output"].as_str().unwrap();
    assert!(told.contains("denied by hook `guard`: notes.txt is off limits to this agent"), "{told}");
    let deny = ev.iter().find(|e| e["kind"] == "hook_decision" && e["decision"] == "deny").unwrap();
    assert_eq!(deny["reason"], "notes.txt is off limits to this agent");
    assert!(deny["duration_ms"].as_u64().is_some());

    let rewritten = result_of(&ev, 2);
    assert_eq!((rewritten["ok"].as_bool(), rewritten["read"].as_str()), (Some(true), Some("calc.py")));
    let out = rewritten["output"].as_str().unwrap();
    assert!(out.contains("a - b") && out.contains("a pre hook rewrote the arguments"), "{out}");
    let rewrite = ev.iter().find(|e| e["kind"] == "hook_decision" && e["step"] == 2 && e["hook"] == "guard").unwrap();
    assert_eq!(rewrite["args"]["path"], "calc.py");

    // The rewrite pointing outside passed the policy again and was refused there.
    let outside = result_of(&ev, 3);
    assert_eq!(outside["denied"], true);
    let told = outside["output"].as_str().unwrap();
    assert!(told.contains("denied by policy: hook `guard` rewrote the arguments"), "{told}");
    let rewrite = ev.iter().find(|e| e["kind"] == "hook_decision" && e["step"] == 3).unwrap();
    assert!(rewrite["policy_denied"].as_str().is_some_and(|r| !r.is_empty()), "{rewrite}");
    assert!(!ev.iter().any(|e| e["kind"] == "tool_result" && e["read"] == "../../../etc/passwd"));

    let edit = result_of(&ev, 4);
    assert!(edit["output"].as_str().unwrap().ends_with("[hook `lint`: lint: the edit keeps calc.py importable]"));
    // The post hook's event comes before the result that carries its note.
    let seq = |kind: &str| {
        ev.iter().find(|e| e["kind"] == kind && e["step"] == 4 && e["phase"] != "pre").unwrap()["seq"].as_u64()
    };
    assert!(seq("hook_decision") < seq("tool_result"));
    assert_replay_agrees(&run_dir, &cell);
}

#[test]
fn a_hook_that_hangs_is_killed_at_its_timeout_and_the_cell_goes_on() {
    let s = Scratch::new();
    s.case("good", GOOD_CASE, GOOD_ORACLE);
    let agent = agent(
        &s,
        "  pre:\n    - {name: stuck, command: [sh, '{agent}/hooks/stuck.sh'], tools: [read_file], timeout_s: 1}\n",
        &[("stuck.sh", "#!/bin/sh\nsleep 60 &\nsleep 60\necho '{\"decision\": \"allow\"}'\n")],
    );
    let script = "default:\n\
        - {tool: read_file, args: {path: calc.py}}\n\
        - {tool: edit_file, args: {path: calc.py, old: 'a - b', new: 'a + b'}}\n\
        - {tool: finish, args: {answer: fixed}}\n";
    // In the cell's supervised sandbox, and without one (where hcbench kills the group itself).
    for sandbox in ["bubblewrap", "none"] {
        let (cell, ev, run_dir, took) = run_in(&s, &agent, script, sandbox);
        assert_eq!(cell["outcome"], "passed", "the cell went on after the hook failed: {}", cell["reason"]);
        assert_eq!(cell["hook_errors"], 1);
        assert!(took < Duration::from_secs(30), "nothing waited for the 60 s sleeps: {took:?}");
        let error = ev.iter().find(|e| e["kind"] == "hook_decision").unwrap();
        assert_eq!(error["decision"], "error");
        assert!(error["reason"].as_str().unwrap().contains("did not answer within its timeout of 1s and was killed"));
        let ms = error["duration_ms"].as_u64().unwrap();
        assert!((1000..4000).contains(&ms), "killed at the timeout (plus the grace period): {ms} ms");
        let result = result_of(&ev, 1);
        assert_eq!((result["denied"].as_bool(), result["ok"].as_bool()), (Some(true), Some(false)));
        let told = result["output"].as_str().unwrap();
        assert!(told.contains("pre hook `stuck` failed") && told.contains("The call did not run"), "{told}");
        assert_replay_agrees(&run_dir, &cell);
    }
}

#[test]
fn a_hook_that_prints_garbage_or_exits_1_is_a_tool_error_never_an_allow() {
    let s = Scratch::new();
    s.case("good", &GOOD_CASE.replace("step_budget: 5", "step_budget: 8"), GOOD_ORACLE);
    let agent = agent(
        &s,
        "  pre:\n    - {name: garbage, command: [sh, -c, 'echo hello there'], tools: [read_file]}\n\
         \x20   - {name: failing, command: [sh, -c, 'echo broken >&2; exit 1'], tools: [list_files]}\n\
         \x20 post:\n    - {name: noisy, command: [sh, -c, 'echo not json'], tools: [edit_file]}\n",
        &[],
    );
    let script = "default:\n\
        - {tool: read_file, args: {path: calc.py}}\n\
        - {tool: list_files}\n\
        - {tool: edit_file, args: {path: calc.py, old: 'a - b', new: 'a + b'}}\n\
        - {tool: finish, args: {answer: fixed}}\n";
    let (cell, ev, run_dir, _) = run(&s, &agent, script);
    assert_eq!(cell["outcome"], "passed", "{}", cell["reason"]);
    assert_eq!(cell["hook_errors"], 3);
    assert_eq!(cell["tool_counts"]["read_file"], Value::Null, "the read never ran: {cell}");
    assert_eq!(
        hook_events(&ev),
        ["1:pre:garbage:read_file:error", "2:pre:failing:list_files:error", "3:post:noisy:edit_file:error"]
    );
    let garbage = result_of(&ev, 1)["output"].as_str().unwrap();
    assert!(garbage.contains("pre hook `garbage` failed: printed \"hello there\", which is not JSON"), "{garbage}");
    let failing = result_of(&ev, 2)["output"].as_str().unwrap();
    assert!(failing.contains("pre hook `failing` failed: exited with code 1 (stderr: broken)"), "{failing}");
    // A post hook runs after the call: the edit happened, and the model is told the hook failed.
    let edit = result_of(&ev, 3);
    assert_eq!(edit["ok"], true);
    let out = edit["output"].as_str().unwrap();
    assert!(out.contains("[post hook `noisy` failed: printed \"not json\""), "{out}");
    let html = crate::report_html(&run_dir.join("reports/report.html"));
    assert!(html.contains("0 denied, 3 failed"), "the cell's facts count the hooks");
    assert!(html.contains("pre hook `garbage` on read_file: error"), "the timeline shows the hook runs");
    assert_replay_agrees(&run_dir, &cell);
}

#[test]
fn bad_hook_configs_exit_2_naming_the_file_and_the_field() {
    let s = Scratch::new();
    s.case("good", GOOD_CASE, GOOD_ORACLE);
    s.write("script.yaml", "default:\n  - {tool: finish}\n");
    for (hooks, needle) in [
        (
            "  pre:\n    - {name: a, command: [sh], tools: [read_fiel]}\n",
            "field `hooks.pre[0].tools[0]`: `read_fiel` is not a tool; did you mean `read_file`?",
        ),
        ("  pre:\n    - {name: a, command: []}\n", "field `hooks.pre[0].command`: is empty"),
        (
            "  post:\n    - {name: a, command: [sh], timeout_s: 600}\n",
            "field `hooks.post[0].timeout_s`: 600 is out of range",
        ),
        (
            "  post:\n    - {name: a, command: [sh, '{agent}/hooks/missing.sh']}\n",
            "field `hooks.post[0].command[1]`: cannot read",
        ),
        ("  pre:\n    - {name: a, command: [sh], timeout: 3}\n", "timeout"),
        (
            "  pre:\n    - {name: a, command: 'sh guard.sh'}\n",
            "field `hooks.pre[0].command`: `sh guard.sh` is one string; give the program and its arguments as a list",
        ),
        (
            "  pre:\n    - {name: a, command: [sh]}\n  post:\n    - {name: a, command: [sh]}\n",
            "field `hooks.post[0].name`: `a` is already the name of `hooks.pre[0]`",
        ),
        (
            "  pre:\n    - {name: 'no secrets', command: [sh]}\n",
            "field `hooks.pre[0].name`: `no secrets` is not a hook name",
        ),
        (
            "  pre:\n    - {name: a, command: [sh, '--dir={agent}/x']}\n",
            "field `hooks.pre[0].command[1]`: `--dir={agent}/x`: `{agent}` may only begin an argument",
        ),
    ] {
        let agent = agent(&s, hooks, &[]);
        let out = Test::new()
            .root(s.path())
            .args(&["--agent"])
            .arg_path(&agent)
            .args(&["run", "--benchmark", "demo", "--profile", "scripted", "--script"])
            .arg_path(&s.path().join("script.yaml"))
            .run()
            .code(2)
            .stderr_has("agent.yaml")
            .stderr_has(needle);
        if hooks.contains("missing.sh") {
            assert!(out.stderr.contains("put the script there, or fix the path"), "{}", out.stderr);
        }
        assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    }
}

#[test]
fn a_batch_s_pre_hooks_run_in_call_order_before_its_reads_and_carry_their_place() {
    let s = Scratch::new();
    s.case("good", GOOD_CASE, GOOD_ORACLE);
    s.write("fixtures/calc/notes.txt", "private\n");
    let agent = agent(
        &s,
        "  pre:\n    - {name: guard, command: [sh, '{agent}/hooks/guard.sh'], tools: [read_file]}\n",
        &[("guard.sh", GUARD)],
    );
    let script = "default:\n\
        - batch:\n    - {tool: read_file, args: {path: calc.py}}\n    - {tool: read_file, args: {path: notes.txt}}\n    - {tool: read_file, args: {path: old.py}}\n\
        - {tool: edit_file, args: {path: calc.py, old: 'a - b', new: 'a + b'}}\n\
        - {tool: finish, args: {answer: fixed}}\n";
    let (cell, ev, run_dir, _) = run(&s, &agent, script);
    assert_eq!(cell["outcome"], "passed", "{}", cell["reason"]);
    assert_eq!(cell["hook_denials"], 1);
    let step1: Vec<String> = ev
        .iter()
        .filter(|e| {
            e["step"] == 1 && ["policy_decision", "hook_decision", "tool_result"].contains(&e["kind"].as_str().unwrap())
        })
        .map(|e| format!("{}:{}", e["kind"].as_str().unwrap(), e["decision"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(
        step1,
        [
            "policy_decision:",
            "hook_decision:allow",
            "policy_decision:",
            "hook_decision:deny",
            "policy_decision:",
            "hook_decision:rewrite",
            "tool_result:",
            "tool_result:",
            "tool_result:",
        ],
        "each call's decision and hooks come before the group runs; results in the order asked"
    );
    let positions: Vec<u64> =
        ev.iter().filter(|e| e["kind"] == "hook_decision").map(|e| e["batch"]["position"].as_u64().unwrap()).collect();
    assert_eq!(positions, [1, 2, 3]);
    let reads: Vec<&Value> = ev.iter().filter(|e| e["kind"] == "tool_result" && e["step"] == 1).collect();
    assert_eq!(reads.iter().map(|e| e["denied"].as_bool().unwrap()).collect::<Vec<_>>(), [false, true, false]);
    assert_eq!(reads[2]["read"], "calc.py", "the rewritten read ran in the batch");
    assert_replay_agrees(&run_dir, &cell);
}
