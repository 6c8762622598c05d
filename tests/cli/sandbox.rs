//! The sandbox against each escape class of issue 14. Every attack runs as a case's test
//! command (commands the policy never sees, so this is the sandbox alone) twice: with
//! `--sandbox none` it must succeed, which proves the attack is real, and with the default
//! bubblewrap it must be contained. The tests check the attack's effect on the host (a
//! connection accepted, a file written, a process alive), not only the cell's verdict.

use std::io::Read;
use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::run::{GOOD_ORACLE, Scratch, by_cell};
use super::{Output, Test};

/// A case `id` whose test command is `argv`; the oracle fixes calc, so nothing but the attack
/// decides whether the tests pass.
fn attack_case(s: &Scratch, id: &str, argv: &[&str]) {
    let argv = serde_json::to_string(argv).unwrap();
    s.case(
        id,
        &format!(
            "id: {id}\ncategory: bugfix\nsplit: train\nfixture: calc\nprompt: x\nstep_budget: 5\ntimeout_s: 20\ntest_command: {argv}\n"
        ),
        GOOD_ORACLE,
    );
}

fn run(s: &Scratch, id: &str, sandbox: &str) -> Output {
    Test::new()
        .root(s.path())
        .args(&["run", "--sandbox", sandbox, "--benchmark", "demo", "--case", id, "--format", "json", "--out"])
        .arg_path(&s.path().join(format!("runs/{id}-{sandbox}")))
        .run()
}

/// Whether the attack's test command exited 0 (the attack said it got through).
fn attack_passed(s: &Scratch, id: &str, sandbox: &str) -> bool {
    let out = run(s, id, sandbox);
    let cells = by_cell(&out.json());
    let cell = &cells[&format!("{id}__oracle")];
    cell["tests_passed"].as_bool().unwrap_or_else(|| panic!("no tests_passed in {cell}"))
}

/// The run_started event of a cell's trace.
fn run_started(run_dir: &Path, cell: &str) -> Value {
    let trace = crate::read_trace_text(run_dir.join("cells").join(cell).join("trace.jsonl")).unwrap();
    let line = trace.lines().find(|l| l.contains("\"run_started\"")).unwrap();
    serde_json::from_str::<Value>(line).unwrap()["data"].clone()
}

/// A loopback listener counting the connections it accepts, on a thread of its own.
fn listener() -> (u16, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    std::thread::spawn(move || {
        for stream in l.incoming().flatten() {
            seen.fetch_add(1, Ordering::SeqCst);
            drop(stream);
        }
    });
    (port, count)
}

#[test]
fn no_network_from_python_or_any_other_program() {
    let s = Scratch::new();
    let (port, accepted) = listener();
    let py = format!("import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5).sendall(b'out')");
    attack_case(&s, "net-python", &["python3", "-c", &py]);
    let url = format!("http://127.0.0.1:{port}/repo.git");
    attack_case(&s, "net-git", &["git", "ls-remote", &url]);

    assert!(attack_passed(&s, "net-python", "none"), "without a sandbox python reaches the listener");
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
    run(&s, "net-git", "none");
    assert_eq!(accepted.load(Ordering::SeqCst), 2, "without a sandbox git reaches the listener");

    assert!(!attack_passed(&s, "net-python", "bubblewrap"));
    run(&s, "net-git", "bubblewrap");
    assert_eq!(accepted.load(Ordering::SeqCst), 2, "nothing inside the sandbox reached hcbench's loopback");
}

#[test]
fn writes_outside_the_workspace_do_not_land_and_the_project_is_not_there() {
    let s = Scratch::new();
    git(s.path(), &["init", "-q"]);
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("planted.txt");
    let hook = s.path().join(".git/hooks/post-commit");
    let code = format!("open({:?}, 'w').write('x'); open({:?}, 'w').write('#!/bin/sh\\n')", target, hook);
    attack_case(&s, "write-out", &["python3", "-c", &code]);
    // Through a program's own option, as `sort -o/abs` (the policy denies that spelling for the
    // agent; a case's command, or a spelling the policy missed, meets only the sandbox).
    let sorted = outside.path().join("sorted.txt");
    let out_opt = format!("-o{}", sorted.display());
    attack_case(&s, "sort-out", &["sort", &out_opt, "calc.py"]);

    assert!(attack_passed(&s, "write-out", "none"));
    assert!(target.exists() && hook.exists(), "without a sandbox both files are written");
    assert!(attack_passed(&s, "sort-out", "none") && sorted.exists());
    for f in [&target, &hook, &sorted] {
        std::fs::remove_file(f).unwrap();
    }

    assert!(!attack_passed(&s, "write-out", "bubblewrap"));
    assert!(!attack_passed(&s, "sort-out", "bubblewrap"));
    assert!(!target.exists() && !hook.exists() && !sorted.exists(), "the sandbox wrote no file outside");
}

#[test]
fn hcbench_environment_cannot_be_read_through_proc() {
    // Test::run gives hcbench HCBENCH_TEST_API_KEY=sk-canary-never-leaks; a child that finds
    // the value in any /proc/<pid>/environ has read it from hcbench (or another process).
    let s = Scratch::new();
    let code = "import glob, sys\nfor p in glob.glob('/proc/[0-9]*/environ'):\n    try:\n        if b'sk-canary-never-leaks' in open(p, 'rb').read(): sys.exit(0)\n    except OSError: pass\nsys.exit(1)\n";
    attack_case(&s, "proc-env", &["python3", "-c", code]);
    assert!(attack_passed(&s, "proc-env", "none"), "without a sandbox /proc shows hcbench's environment");
    assert!(!attack_passed(&s, "proc-env", "bubblewrap"), "the sandbox's /proc has only its own processes");
}

#[test]
fn secrets_outside_are_out_of_reach_through_links() {
    let s = Scratch::new();
    s.write(".env", "OPENAI_API_KEY=sk-from-dotenv\n");
    let env = s.path().join(".env");
    let code = format!(
        "import os\nos.symlink({env:?}, 'soft')\ntry:\n    os.link({env:?}, 'hard')\nexcept OSError:\n    pass\nassert 'sk-from-dotenv' in open('soft').read()\n"
    );
    attack_case(&s, "links", &["python3", "-c", &code]);
    assert!(attack_passed(&s, "links", "none"));
    assert!(!attack_passed(&s, "links", "bubblewrap"), "the project's .env is not in the sandbox to link to");
}

#[test]
fn git_in_a_cell_sees_only_the_fixture_never_the_project() {
    let s = Scratch::new();
    git(s.path(), &["init", "-q"]);
    git(s.path(), &["add", "."]);
    git(s.path(), &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "benchmark"]);
    let root = s.path().to_string_lossy().into_owned();
    // The workspace lies outside the project: plain git finds no repository either way.
    attack_case(&s, "git-plain", &["git", "show", "HEAD:benchmarks/demo/oracle/git-plain.yaml"]);
    attack_case(&s, "git-root", &["git", "-C", &root, "show", "HEAD:benchmarks/demo/oracle/git-root.yaml"]);
    s.write("fixtures/calc/.gitignore", "");
    git(s.path(), &["add", "."]);
    git(s.path(), &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "cases"]);

    assert!(!attack_passed(&s, "git-plain", "none"), "the workspace is outside the project's repository");
    assert!(!attack_passed(&s, "git-plain", "bubblewrap"));
    assert!(attack_passed(&s, "git-root", "none"), "without a sandbox an absolute path still reaches it");
    assert!(!attack_passed(&s, "git-root", "bubblewrap"), "the project is not in the sandbox at all");
}

#[test]
fn a_daemon_dies_with_its_cell() {
    let s = Scratch::new();
    let marker = format!("hcbench-daemon-{}-{}", std::process::id(), fastrand_suffix());
    // Double fork and setsid: the grandchild leaves the command's process group and session.
    let code = format!(
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        os.execvp('python3', ['python3', '-c', 'import time; time.sleep(120)', '{marker}'])\n    os._exit(0)\ntime.sleep(0.5)\n"
    );
    attack_case(&s, "daemon", &["python3", "-c", &code]);

    run(&s, "daemon", "none");
    let survivors = processes_with(&marker);
    assert!(!survivors.is_empty(), "without a sandbox the daemon outlives hcbench");
    for pid in survivors {
        let _ = std::process::Command::new("kill").args(["-9", &pid.to_string()]).status();
    }

    run(&s, "daemon", "bubblewrap");
    let deadline = Instant::now() + Duration::from_secs(3);
    while !processes_with(&marker).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(processes_with(&marker), Vec::<u32>::new(), "the sandbox's daemon died with the cell");
}

#[test]
fn runs_record_their_sandbox_and_a_missing_bubblewrap_is_a_clear_error() {
    let s = Scratch::new();
    attack_case(&s, "plain", &["python3", "-m", "unittest", "discover", "-s", "tests"]);
    run(&s, "plain", "bubblewrap").code(0);
    let dir = s.path().join("runs/plain-bubblewrap");
    let started = run_started(&dir, "plain__oracle");
    assert_eq!(started["sandbox"]["mechanism"], "bubblewrap");
    assert!(started["sandbox"]["version"].as_str().is_some_and(|v| !v.is_empty()));
    let manifest: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["sandbox"], started["sandbox"]);

    run(&s, "plain", "none").code(0);
    let dir = s.path().join("runs/plain-none");
    assert_eq!(run_started(&dir, "plain__oracle")["sandbox"]["mechanism"], "none");
    let md = std::fs::read_to_string(dir.join("reports/report.md")).unwrap();
    assert!(md.contains("without a sandbox"), "the report says the run was not isolated:\n{md}");

    // A PATH without bwrap: the run refuses to start, names the package and the opt-out.
    let empty = tempfile::tempdir().unwrap();
    let out = Test::new()
        .root(s.path())
        .env("PATH", &empty.path().to_string_lossy())
        .args(&["run", "--benchmark", "demo", "--out"])
        .arg_path(&s.path().join("runs/refused"))
        .run()
        .code(2)
        .stderr_has("install the Debian package `bubblewrap`")
        .stderr_has("--sandbox none");
    assert!(out.stdout.is_empty());
    assert!(!s.path().join("runs/refused").exists(), "nothing is written when no cell can start");
    Test::new()
        .root(s.path())
        .args(&["run", "--sandbox", "docker", "--benchmark", "demo"])
        .run()
        .code(2)
        .stderr_has("use bubblewrap or none");
}

#[test]
fn a_cell_past_its_wall_clock_limit_ends_as_timeout() {
    let s = Scratch::new();
    s.case(
        "slow",
        "id: slow\ncategory: bugfix\nsplit: train\nfixture: calc\nprompt: x\nstep_budget: 5\ntimeout_s: 60\ncell_timeout_s: 2\ntest_command: [python3, -m, unittest, discover, -s, tests]\n",
        "actions:\n  - tool: run_command\n    args: {argv: [python3, -c, 'import time; time.sleep(60)']}\n  - tool: finish\n",
    );
    let started = Instant::now();
    let out = run(&s, "slow", "bubblewrap");
    assert!(started.elapsed() < Duration::from_secs(20), "the cell stopped at its limit, not the command's");
    let cell = &by_cell(&out.json())["slow__oracle"];
    assert_eq!(cell["outcome"], "timeout", "{cell}");
    assert_eq!(cell["stop_reason"], "cell_timeout", "{cell}");
    assert!(cell["reason"].as_str().unwrap().contains("wall-clock limit of 2s"), "{cell}");
}

fn git(dir: &Path, args: &[&str]) {
    let ok = std::process::Command::new("git").current_dir(dir).args(args).status().unwrap().success();
    assert!(ok, "git {args:?}");
}

fn fastrand_suffix() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 % 1_000_000_007
}

/// Host pids whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        let mut cmdline = Vec::new();
        if std::fs::File::open(e.path().join("cmdline")).and_then(|mut f| f.read_to_end(&mut cmdline)).is_ok()
            && String::from_utf8_lossy(&cmdline).contains(marker)
        {
            pids.push(pid);
        }
    }
    pids
}

#[test]
fn a_fifo_in_the_workspace_is_refused_at_once_and_the_cell_goes_on() {
    // Before: read_file on a fifo blocked forever, and Ctrl-C could not stop the run.
    let s = Scratch::new();
    s.case(
        "fifo",
        "id: fifo\ncategory: bugfix\nsplit: train\nfixture: calc\nprompt: x\nstep_budget: 6\ntimeout_s: 20\ncell_timeout_s: 30\ntest_command: [python3, -m, unittest, discover, -s, tests]\n",
        "actions:\n  - tool: run_command\n    args: {argv: [python3, -c, \"import os; os.mkfifo('pipe')\"]}\n  - tool: read_file\n    args: {path: pipe}\n  - tool: edit_file\n    args: {path: calc.py, old: 'a - b', new: 'a + b'}\n  - tool: finish\n",
    );
    let started = Instant::now();
    let out = run(&s, "fifo", "bubblewrap");
    assert!(started.elapsed() < Duration::from_secs(20), "nothing waited on the fifo");
    let cell = &by_cell(&out.json())["fifo__oracle"];
    assert_eq!(cell["outcome"], "passed", "the cell went on to fix the bug: {cell}");
    let trace = crate::read_trace_text(s.path().join("runs/fifo-bubblewrap/cells/fifo__oracle/trace.jsonl")).unwrap();
    let read = trace
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["kind"] == "tool_result" && e["data"]["tool"] == "read_file")
        .unwrap();
    assert_eq!(read["data"]["ok"], false);
    assert!(read["data"]["output"].as_str().unwrap().contains("is a fifo"), "{read}");
}

#[test]
fn the_verifier_runs_last_in_the_cells_sandbox_on_copies_that_cannot_change_the_benchmark() {
    let s = Scratch::new();
    // The verifier reads a file beside it and the trace, then tries to change both its own
    // folder and the trace, as code under test imported by a verifier could.
    let check = "import os, sys\n\
        here = os.path.dirname(os.path.abspath(__file__))\n\
        assert open(os.path.join(here, 'data.txt')).read() == 'expected', 'sibling file'\n\
        trace = os.environ['HCBENCH_TRACE']\n\
        assert 'run_started' in open(trace).read(), 'trace'\n\
        open(os.path.join(here, 'data.txt'), 'w').write('changed')\n\
        open(__file__, 'a').write('# changed\\n')\n\
        open(trace, 'a').write('forged\\n')\n\
        print('verifier done')\n";
    s.write("benchmarks/demo/verifiers/vcopy/check.py", check);
    s.write("benchmarks/demo/verifiers/vcopy/data.txt", "expected");
    s.case(
        "vcopy",
        "id: vcopy\ncategory: bugfix\nsplit: train\nfixture: calc\nprompt: x\nstep_budget: 5\ntimeout_s: 20\ntest_command: ['true']\nverifier:\n  command: [python3, '{benchmark_dir}/verifiers/vcopy/check.py']\n",
        GOOD_ORACLE,
    );
    let out = run(&s, "vcopy", "bubblewrap");
    let cells = by_cell(&out.json());
    assert_eq!(cells["vcopy__oracle"]["outcome"], "passed", "{}", out.stdout);
    let bench = s.path().join("benchmarks/demo/verifiers/vcopy");
    assert_eq!(std::fs::read_to_string(bench.join("data.txt")).unwrap(), "expected");
    assert_eq!(std::fs::read_to_string(bench.join("check.py")).unwrap(), check);
    let trace = crate::read_trace_text(s.path().join("runs/vcopy-bubblewrap/cells/vcopy__oracle/trace.jsonl")).unwrap();
    assert!(!trace.contains("forged"), "the cell's trace is hcbench's alone");
}
