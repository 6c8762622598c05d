//! The run directory under abuse: two processes writing one run, traces pieced together or
//! written twice, cells that ended in an infrastructure error and run again, what the manifest
//! says about the benchmark that ran, and what the reports show of a run's splits and cells.
//! Real processes, a real loopback HTTP server and real git repositories.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::run::{GOOD_CASE, GOOD_ORACLE, Scratch};
use crate::{BIN, Test};

/// A case whose tests take `secs` seconds: long enough for a second process to meet the first.
fn slow_case(id: &str, secs: u32) -> String {
    format!(
        "id: {id}\ncategory: bugfix\nsplit: train\nfixture: calc\nprompt: x\nstep_budget: 3\ntimeout_s: 120\n\
         test_command: [python3, -c, 'import time; time.sleep({secs})']\n"
    )
}

/// `hcbench ARGS` started in the background, its output piped, with the environment `Test`
/// gives every hcbench (workspaces and history of this test process).
fn spawn(root: &Path, args: &[&str], run_dir: &Path) -> Child {
    Command::new(BIN)
        .args(args)
        .arg(run_dir)
        .current_dir(root)
        .env_remove("HCBENCH_ROOT")
        .env("HCBENCH_HISTORY", super::process_dir("history"))
        .env("HCBENCH_WORKSPACES", super::process_dir("workspaces"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("hcbench starts")
}

/// Exit code and stderr of a finished child.
fn finish(child: Child) -> (i32, String) {
    let out = child.wait_with_output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn wait_for(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn report_json(run_dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(run_dir.join("reports/report.json")).unwrap()).unwrap()
}

fn outcomes(report: &Value) -> BTreeMap<String, (String, String)> {
    report["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let id = c["cell_id"].as_str().unwrap().to_string();
            (id, (c["outcome"].as_str().unwrap().to_string(), c["reason"].as_str().unwrap_or("").to_string()))
        })
        .collect()
}

/// What a run directory holds must be one run's worth, whoever tried to write it: one results
/// line per planned cell, each trace a single sequence ending in one run_finished, no NUL.
fn assert_whole(run_dir: &Path, cells: &[&str]) {
    let results = std::fs::read_to_string(run_dir.join("results.jsonl")).unwrap();
    let ids: Vec<String> = results
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["cell_id"].as_str().unwrap().to_string())
        .collect();
    let unique: BTreeSet<&str> = ids.iter().map(String::as_str).collect();
    assert_eq!(ids.len(), cells.len(), "one results line per cell: {ids:?}");
    assert_eq!(unique, cells.iter().copied().collect(), "{ids:?}");
    for cell in cells {
        let bytes = crate::read_trace_bytes(run_dir.join("cells").join(cell).join("trace.jsonl")).unwrap();
        assert!(!bytes.contains(&0), "{cell}: NUL bytes in the trace");
        let text = String::from_utf8(bytes).unwrap();
        let seqs: Vec<u64> =
            text.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["seq"].as_u64().unwrap()).collect();
        assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>(), "{cell}: one sequence");
        assert_eq!(text.matches("\"kind\":\"run_finished\"").count(), 1, "{cell}: one run_finished");
    }
}

#[test]
fn a_run_directory_has_one_writer_and_a_second_one_is_told_who_holds_it() {
    let s = Scratch::new();
    s.case("slow", &slow_case("slow", 8), GOOD_ORACLE);
    s.case("good", GOOD_CASE, GOOD_ORACLE);
    let run_dir = s.path().join("m");
    let cells = ["good__oracle", "slow__oracle"];

    // A fresh run is writing the directory: a resume of it, and a new run given the same
    // --out, both leave at once with exit 2 and name the writer.
    let first =
        spawn(s.path(), &["matrix", "--benchmark", "demo", "--jobs", "1", "--format", "json", "--out"], &run_dir);
    let pid = first.id();
    wait_for("the slow cell runs", || run_dir.join("cells/slow__oracle/trace.jsonl").exists());
    for (args, command) in [
        (vec!["matrix", "--resume"], "hcbench matrix"),
        (vec!["matrix", "--benchmark", "demo", "--out"], "hcbench matrix"),
        (vec!["run", "--benchmark", "demo", "--out"], "hcbench matrix"),
    ] {
        let out = Test::new().root(s.path()).args(&args).arg_path(&run_dir).run().code(2);
        assert!(out.stderr.contains(&format!("pid {pid}, {command}, since ")), "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains("another hcbench process is writing run directory"), "{}", out.stderr);
    }
    let (code, stderr) = finish(first);
    assert_eq!(code, 0, "{stderr}");
    assert_whole(&run_dir, &cells);
    assert!(report_json(&run_dir)["status"] == "complete");

    // The layout before the pack (a folder and a plain trace per cell), to edit cells by hand.
    hcbench::trace::stored::unpack(&run_dir, false).unwrap();
    // Two resumes started together: one finishes the run, the other leaves without writing.
    std::fs::remove_dir_all(run_dir.join("cells/slow__oracle")).unwrap();
    let a = spawn(s.path(), &["matrix", "--format", "json", "--resume"], &run_dir);
    let b = spawn(s.path(), &["matrix", "--format", "json", "--resume"], &run_dir);
    let pids = [a.id(), b.id()];
    let (ra, rb) = (finish(a), finish(b));
    let mut codes = [ra.0, rb.0];
    codes.sort();
    assert_eq!(codes, [0, 2], "one resume writes, the other is refused:\n{}\n---\n{}", ra.1, rb.1);
    let (loser, winner_pid) = if ra.0 == 2 { (&ra.1, pids[1]) } else { (&rb.1, pids[0]) };
    assert!(loser.contains(&format!("pid {winner_pid}, hcbench matrix --resume, since ")), "{loser}");
    assert_whole(&run_dir, &cells);

    // Later resumes find every cell finished and run nothing again.
    let kept = crate::read_trace_bytes(run_dir.join("cells/slow__oracle/trace.jsonl")).unwrap();
    Test::new()
        .root(s.path())
        .args(&["matrix", "--resume"])
        .arg_path(&run_dir)
        .run()
        .code(0)
        .stderr_has("2 finished cell(s) kept");
    assert_eq!(crate::read_trace_bytes(run_dir.join("cells/slow__oracle/trace.jsonl")).unwrap(), kept);
    assert_whole(&run_dir, &cells);
}

#[test]
fn a_new_run_refuses_a_folder_that_holds_other_files() {
    let s = Scratch::new();
    s.case("good", GOOD_CASE, GOOD_ORACLE);
    let out_dir = s.path().join("notes");
    s.write("notes/todo.txt", "mine\n");
    Test::new()
        .root(s.path())
        .args(&["matrix", "--benchmark", "demo", "--out"])
        .arg_path(&out_dir)
        .run()
        .code(2)
        .stderr_has("is not empty and holds no run (todo.txt is there)");
    assert_eq!(std::fs::read_to_string(out_dir.join("todo.txt")).unwrap(), "mine\n");
    assert!(!out_dir.join("manifest.json").exists() && !out_dir.join("cells").exists(), "nothing was written");
}

#[test]
fn a_trace_written_twice_or_pieced_from_another_run_is_a_harness_error_and_resume_reruns_it() {
    let s = Scratch::new();
    s.case("good", GOOD_CASE, GOOD_ORACLE);
    s.case("other", &GOOD_CASE.replace("id: good", "id: other"), GOOD_ORACLE);
    let (run_dir, stranger) = (s.path().join("m"), s.path().join("m2"));
    for dir in [&run_dir, &stranger] {
        Test::new().root(s.path()).args(&["matrix", "--benchmark", "demo", "--out"]).arg_path(dir).run().code(0);
    }
    hcbench::trace::stored::unpack(&run_dir, false).unwrap();
    // A model action written twice (as a second writer would), and another run's trace.
    let dup = run_dir.join("cells/good__oracle/trace.jsonl");
    let text = crate::read_trace_text(&dup).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let action = lines.iter().position(|l| l.contains("\"kind\":\"model_action\"")).unwrap();
    let mut doubled: Vec<&str> = lines.clone();
    doubled.insert(action + 1, lines[action]);
    std::fs::write(&dup, doubled.join("\n") + "\n").unwrap();
    let stranger_trace = crate::read_trace_bytes(stranger.join("cells/other__oracle/trace.jsonl")).unwrap();
    std::fs::write(run_dir.join("cells/other__oracle/trace.jsonl"), stranger_trace).unwrap();

    let out = Test::new().args(&["report", "--format", "json"]).arg_path(&run_dir).run().code(4);
    let cells = outcomes(&out.json());
    let (outcome, reason) = &cells["good__oracle"];
    assert_eq!(outcome, "harness_error", "a step counted twice is never a result");
    assert!(
        reason.contains(&format!("line {} breaks the event sequence", action + 2)) && reason.contains("written twice"),
        "{reason}"
    );
    let (outcome, reason) = &cells["other__oracle"];
    assert_eq!(outcome, "harness_error");
    assert!(reason.contains("line 1 breaks the event sequence: an event of run"), "{reason}");
    let md = std::fs::read_to_string(run_dir.join("reports/report.md")).unwrap();
    assert!(md.contains("| `good__oracle` | harness_error |") && md.contains("written twice"), "{md}");
    let replay = Test::new().args(&["replay"]).arg_path(&dup).run();
    assert_ne!(replay.code, 0);
    assert!(replay.stderr.contains("breaks the event sequence"), "{}", replay.stderr);

    // A resume does not keep them: they run again and the run is whole.
    let out =
        Test::new().root(s.path()).args(&["matrix", "--format", "json", "--resume"]).arg_path(&run_dir).run().code(0);
    let cells = outcomes(&out.json());
    assert!(cells.values().all(|(o, _)| o == "passed"), "{cells:?}");
    assert_whole(&run_dir, &["good__oracle", "other__oracle"]);
}

/// A Chat Completions server on 127.0.0.1 that is down (503) until replies are queued, then
/// answers them in order, one per request.
struct Provider {
    port: u16,
    replies: Arc<Mutex<VecDeque<String>>>,
    requests: Arc<Mutex<usize>>,
}

impl Provider {
    fn start() -> Provider {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let replies: Arc<Mutex<VecDeque<String>>> = Arc::default();
        let requests: Arc<Mutex<usize>> = Arc::default();
        let (q, n) = (replies.clone(), requests.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0; length];
                let _ = reader.read_exact(&mut body);
                *n.lock().unwrap() += 1;
                let (status, body) = match q.lock().unwrap().pop_front() {
                    Some(content) => (200, chat(&content)),
                    None => (503, r#"{"error": {"message": "down for maintenance"}}"#.to_string()),
                };
                let mut stream = stream;
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Provider { port, replies, requests }
    }
}

fn chat(content: &str) -> String {
    json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5}
    })
    .to_string()
}

#[test]
fn retry_errors_runs_cells_that_ended_in_infrastructure_errors_again() {
    let provider = Provider::start();
    let s = Scratch::new();
    s.case("good", GOOD_CASE, GOOD_ORACLE);
    s.case("other", &GOOD_CASE.replace("id: good", "id: other"), GOOD_ORACLE);
    s.write(
        "models.toml",
        &format!(
            "[mock]\nprovider = \"openai-chat\"\nmodel = \"m\"\nbase_url = \"http://127.0.0.1:{}\"\n\
             api_key_env = \"HCBENCH_TEST_API_KEY\"\ntimeout_s = 5\nmax_retries = 1\nretry_base_ms = 1\nretry_max_ms = 5\n",
            provider.port
        ),
    );
    let run_dir = s.path().join("m");
    let matrix = |extra: &[&str]| {
        let mut t = Test::new().root(s.path()).args(&["matrix", "--format", "json", "--jobs", "1"]);
        t = t.args(extra);
        t.arg_path(&run_dir).run()
    };

    // The provider is down: every cell is a provider error (coverage 0: exit 4).
    let first = matrix(&["--benchmark", "demo", "--profiles", "mock", "--out"]).code(4);
    let cells = outcomes(&first.json());
    assert!(cells.values().all(|(o, _)| o == "provider_error"), "{cells:?}");
    let asked = *provider.requests.lock().unwrap();
    assert!(asked >= 4, "two cells, each tried twice: {asked}");

    // A plain resume keeps them: they did end, and hcbench cannot know the provider is back.
    let again = matrix(&["--resume"]).code(4).stderr_has("resuming: 2 finished cell(s) kept");
    assert!(outcomes(&again.json()).values().all(|(o, _)| o == "provider_error"));
    assert_eq!(*provider.requests.lock().unwrap(), asked, "nothing was asked of the provider");

    // The provider is back: --retry-errors runs both again, says so, and the run is whole.
    let edit = r#"{"tool": "edit_file", "args": {"path": "calc.py", "old": "a - b", "new": "a + b"}}"#;
    let done = r#"{"tool": "finish", "args": {"answer": "fixed"}}"#;
    provider.replies.lock().unwrap().extend([edit, done, edit, done].map(String::from));
    let retried = matrix(&["--retry-errors", "--resume"])
        .code(0)
        .stderr_has("resuming: 0 finished cell(s) kept; 2 cell(s) that ended in an infrastructure error run again")
        .stderr_has("retried 2 cell(s) that had ended in an infrastructure error (2 provider_error): now 2 passed");
    let cells = outcomes(&retried.json());
    assert_eq!(cells.len(), 2);
    assert!(cells.values().all(|(o, _)| o == "passed"), "{cells:?}");
    assert_whole(&run_dir, &["good__mock", "other__mock"]);

    // The flag only means something with --resume.
    Test::new()
        .root(s.path())
        .args(&["matrix", "--benchmark", "demo", "--retry-errors"])
        .run()
        .code(2)
        .stderr_has("--resume");
}

fn manifest(run_dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(run_dir.join("manifest.json")).unwrap()).unwrap()
}

fn commit_all(repo: &git2::Repository) {
    let mut index = repo.index().unwrap();
    index.add_all(["*"], git2::IndexAddOption::DEFAULT, None).unwrap();
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("t", "t@example.com").unwrap();
    let parent = repo.head().ok().and_then(|h| h.peel_to_commit().ok());
    let parents: Vec<&git2::Commit> = parent.iter().collect();
    repo.commit(Some("HEAD"), &sig, &sig, "c", &tree, &parents).unwrap();
}

#[test]
fn the_manifest_names_the_benchmark_that_ran_and_whether_it_was_committed() {
    let s = Scratch::new();
    s.case("good", GOOD_CASE, GOOD_ORACLE);
    let n = std::cell::Cell::new(0);
    let run = || {
        n.set(n.get() + 1);
        let dir = s.path().join(format!("workspace/runs/r{}", n.get()));
        Test::new().root(s.path()).args(&["matrix", "--benchmark", "demo", "--out"]).arg_path(&dir).run().code(0);
        manifest(&dir)
    };
    // Outside git: a digest, and no claim about a committed tree.
    let outside = run();
    let digest = outside["benchmark_digest"].as_str().unwrap().to_string();
    assert_eq!(digest.len(), 64);
    assert!(outside.get("benchmark_dirty").is_none() && outside.get("git_dirty").is_none(), "{outside}");

    let repo = git2::Repository::init(s.path()).unwrap();
    s.write(".gitignore", "workspace/\n");
    commit_all(&repo);
    let clean = run();
    assert_eq!(clean["benchmark_dirty"], false, "{clean}");
    assert_eq!(clean["benchmark_digest"], digest.as_str(), "same files, same digest");

    // A change elsewhere in the project is not a change of the benchmark.
    s.write("README.md", "notes\n");
    let elsewhere = run();
    assert_eq!((elsewhere["git_dirty"].as_bool(), elsewhere["benchmark_dirty"].as_bool()), (Some(true), Some(false)));

    // An edited fixture and an untracked verifier are: both change the digest too.
    s.write("fixtures/calc/calc.py", "# edited\ndef add(a, b):\n    return a - b\n");
    let edited = run();
    assert_eq!(edited["benchmark_dirty"], true);
    assert_ne!(edited["benchmark_digest"], digest.as_str());
    commit_all(&repo);
    assert_eq!(run()["benchmark_dirty"], false);
    s.write("benchmarks/demo/verifiers/extra.py", "print('x')\n");
    let untracked = run();
    assert_eq!(untracked["benchmark_dirty"], true, "an untracked file under the benchmark counts");
}

#[test]
fn cells_have_artifacts_only_when_an_output_needed_one() {
    let s = Scratch::new();
    s.case("good", GOOD_CASE, GOOD_ORACLE);
    s.loud_case();
    let run_dir = s.path().join("m");
    Test::new().root(s.path()).args(&["matrix", "--benchmark", "demo", "--out"]).arg_path(&run_dir).run().code(0);
    assert!(!run_dir.join("cells/good__oracle/artifacts").exists(), "no empty artifacts/ folder");
    let stored: Vec<String> = std::fs::read_dir(run_dir.join("cells/loud__oracle/artifacts"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(stored, ["test-output.txt"], "the long test output is stored in full");
}

#[test]
fn reports_break_a_run_down_by_split_and_say_what_a_tool_results_size_is() {
    let s = Scratch::new();
    s.case("good", GOOD_CASE, GOOD_ORACLE);
    s.case("later", &GOOD_CASE.replace("id: good", "id: later").replace("split: train", "split: heldout"), GOOD_ORACLE);
    let run_dir = s.path().join("m");
    Test::new()
        .root(s.path())
        .args(&["matrix", "--benchmark", "demo", "--profiles", "oracle,nop", "--out"])
        .arg_path(&run_dir)
        .run()
        .code(0);
    let md = std::fs::read_to_string(run_dir.join("reports/report.md")).unwrap();
    let table = md.split("## By split").nth(1).expect("report.md has a per-split section");
    for row in [
        "| oracle | heldout | 1 | 100.0% |",
        "| oracle | train | 1 | 100.0% |",
        "| nop | heldout | 1 | 0.0% |",
        "| nop | train | 1 | 0.0% |",
    ] {
        assert!(table.contains(row), "{row:?} missing:\n{table}");
    }
    let html = crate::report_html(&run_dir.join("reports/report.html"));
    assert!(html.contains("href=\"#splits\"") && html.contains("id=\"splits\""), "report.html has the section");
    assert!(html.contains("<td>heldout</td>") || html.contains(">heldout<"), "a heldout row in report.html");

    // The size in a tool result's title is of the tool's reply, and says so: edit_file's
    // reply is a sentence, not the file it edited.
    assert!(html.contains("edit_file -&gt; ok (") || html.contains("edit_file -> ok ("), "a timeline entry");
    let title = regex::Regex::new(r"edit_file -(?:&gt;|>) ok \((\d+) bytes of output\)").unwrap();
    assert!(title.is_match(&html), "the size is named as the output's");
    assert!(!regex::Regex::new(r"-(?:&gt;|>) ok \(\d+ bytes\)").unwrap().is_match(&html), "no bare byte counts");
}
