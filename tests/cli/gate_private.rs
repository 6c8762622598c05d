//! Way 7 of issue 15: the test split stays private. While a gate runs, a process of the same
//! user finds no test-split data under $TMPDIR and cannot enter the gate's own namespace, and a
//! process of another user reads nothing of the gate or of its cells' processes; SIGTERM
//! ends the gate like Ctrl-C with nothing left and nothing written; a `kill -9` leftover is swept
//! by the next gate; logs at any verbosity name no test case; `run`/`matrix` refuse the test
//! split without `--human-test-split`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use super::BIN;
use super::gate::Project;

/// Test cases whose test command takes a while, so Step 2 can be caught running.
fn slow_project() -> Project {
    let p = Project::new(&["tr-1"], &[], "");
    for id in ["secret-1", "secret-2"] {
        p.case(id, "test", "test_command: [sh, -c, 'sleep 4; grep -q \"a + b\" calc.py']\ntimeout_s: 30\n");
    }
    p.commit("slow test cases");
    p
}

/// Starts `hcbench gate` (text format) and returns it with a receiver of its output lines.
pub(super) fn spawn_gate(p: &Project, extra_env: &[(&str, &str)]) -> (Child, mpsc::Receiver<String>) {
    let mut child = Command::new(BIN)
        .args(["gate"])
        .current_dir(p.path())
        .env("TMPDIR", p.tmp())
        .env("HCBENCH_WORKSPACES", p.tmp().join("workspaces"))
        .envs(extra_env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    for stream in [
        Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().unwrap()),
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
    }
    (child, rx)
}

/// Waits until a line containing `needle` arrives; returns every line so far.
pub(super) fn wait_for(rx: &mpsc::Receiver<String>, needle: &str) -> Vec<String> {
    let mut seen = Vec::new();
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(60)) {
        let hit = line.contains(needle);
        seen.push(line);
        if hit {
            return seen;
        }
    }
    panic!("no line with {needle:?}:\n{}", seen.join("\n"));
}

/// Every file under `dir` (not following links) whose path or content names a test case.
fn test_data_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return found };
    for e in entries.flatten() {
        let path = e.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
        if meta.is_dir() {
            found.extend(test_data_under(&path));
        } else if path.to_string_lossy().contains("secret-")
            || std::fs::read_to_string(&path).is_ok_and(|t| t.contains("secret-"))
        {
            found.push(path);
        }
    }
    found
}

/// Can a process of the same (non-root) user list `path`?
fn same_user_can_list(path: &Path) -> bool {
    Command::new("ls").arg(path).stdout(Stdio::null()).stderr(Stdio::null()).status().unwrap().success()
}

#[test]
fn sigterm_during_step_2_leaves_no_test_data_and_writes_nothing() {
    let p = slow_project();
    let (mut gate, rx) = spawn_gate(&p, &[]);
    wait_for(&rx, "Step 2");
    std::thread::sleep(Duration::from_millis(1500));
    // While test cells run: nothing of the test split under $TMPDIR as another process sees it,
    // and the gate's namespace is closed to the same user.
    assert_eq!(test_data_under(p.tmp()), Vec::<PathBuf>::new(), "test-split data visible while the gate runs");
    let pid = gate.id();
    // A non-dumpable gate closes its root to the same user. Root's reader, stripped of
    // CAP_SYS_PTRACE, reaches no root process's root at all, so as root this says nothing:
    // there the boundary is another user (`a_gate_run_as_another_user_...`).
    if !nix::unistd::geteuid().is_root() {
        let mut control = Command::new("sleep").arg("30").spawn().unwrap();
        assert!(same_user_can_list(&PathBuf::from(format!("/proc/{}/root/", control.id()))));
        let _ = control.kill();
        let _ = control.wait();
        assert!(!same_user_can_list(&PathBuf::from(format!("/proc/{pid}/root/"))), "the gate's root is open");
    }

    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = gate.wait().unwrap();
    let rest: Vec<String> = rx.try_iter().collect();
    assert_eq!(status.code(), Some(130), "SIGTERM ends the gate like Ctrl-C:\n{}", rest.join("\n"));
    assert!(rest.iter().any(|l| l.contains("interrupted")), "{}", rest.join("\n"));
    // Nothing left: no area, no trace, no cell folder; nothing recorded.
    let left: Vec<_> = std::fs::read_dir(p.tmp())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("hcbench-gate-") || n.starts_with("hcbench-cell-"))
        .collect();
    assert_eq!(left, Vec::<String>::new());
    assert_eq!(test_data_under(p.tmp()), Vec::<PathBuf>::new());
    for f in ["workspace/results.tsv", "workspace/suite.json", "workspace/pending_record.json"] {
        assert!(!p.path().join(f).exists(), "{f} was written");
    }
}

#[test]
fn a_killed_gate_leaves_no_test_data_and_the_next_gate_sweeps_its_folder() {
    let p = slow_project();
    let (mut gate, rx) = spawn_gate(&p, &[]);
    wait_for(&rx, "Step 2");
    std::thread::sleep(Duration::from_millis(1500));
    gate.kill().unwrap();
    gate.wait().unwrap();
    let areas = || -> Vec<String> {
        std::fs::read_dir(p.tmp())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("hcbench-gate-"))
            .collect()
    };
    // The tmpfs went with the gate: at most its empty folder (naming the dead owner) is left.
    assert_eq!(test_data_under(p.tmp()), Vec::<PathBuf>::new(), "kill -9 left test-split data");
    assert_eq!(areas().len(), 1, "the killed gate's folder");
    std::thread::sleep(Duration::from_secs(5)); // its orphaned test commands end
    let out = p.gate(&[]);
    assert!(areas().is_empty(), "the next gate sweeps the leftover: {:?}\n{}", areas(), out.stderr);
}

#[test]
fn logs_at_any_verbosity_name_no_test_case() {
    let p = Project::new(&["tr-1"], &["secret-1", "secret-2"], "");
    p.script(&["tr-1", "secret-1"], "");
    p.commit("an agent that fixes tr-1 and secret-1");
    let out = p.hcbench(&["-vv", "gate"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("logging is silent while the test-split cells run"), "logs are on:\n{}", out.stderr);
    assert!(!out.stderr.contains("secret-") && !out.stdout.contains("secret-"), "{}\n{}", out.stdout, out.stderr);
    let traced = super::Test::new()
        .root(p.path())
        .env("TMPDIR", &p.tmp().to_string_lossy())
        .env("RUST_LOG", "trace")
        .args(&["gate", "--format", "json"])
        .run();
    assert_eq!(traced.code, 0, "{}", traced.stderr);
    assert!(traced.stderr.contains("logging is silent while the test-split cells run"), "logs are on");
    assert!(!traced.stderr.contains("secret-") && !traced.stdout.contains("secret-"), "{}", traced.stderr);
}

#[test]
fn run_and_matrix_refuse_the_test_split_without_the_human_flag() {
    let p = Project::new(&["tr-1"], &["secret-1"], "");
    let loop_run =
        |args: &[&str]| super::Test::new().root(p.path()).env("TMPDIR", &p.tmp().to_string_lossy()).args(args).run();
    let profile = ["--benchmark", "demo", "--profile", "scripted:agent/script.yaml"];
    // Before the gate is in use there is nothing to keep the split from: it runs without a flag.
    let before = loop_run(&[&["run", "--split", "test"][..], &profile[..]].concat());
    assert_eq!(before.code, 1, "runs (and the agent fails the case): {}", before.stderr);
    assert!(!before.stderr.contains("--human-test-split"), "{}", before.stderr);
    assert_eq!(p.gate(&[]).code, 0, "a gate state exists");
    for args in [
        vec!["run", "--split", "test"],
        vec!["run", "--case", "secret-1"],
        vec!["run"],
        vec!["matrix", "--profiles", "scripted:agent/script.yaml"],
    ] {
        let mut all = args.clone();
        if args[0] == "run" {
            all.extend(profile);
        } else {
            all.extend(["--benchmark", "demo"]);
        }
        let out = loop_run(&all);
        assert_eq!(out.code, 2, "{all:?}: {}", out.stderr);
        assert!(out.stderr.contains("--human-test-split"), "{}", out.stderr);
        assert!(!out.stderr.contains("secret-1"), "the refusal names no test case: {}", out.stderr);
    }
    // The train split is fine; the test split with the flag runs, and the use is audited.
    assert_ne!(loop_run(&[&["run", "--split", "train"][..], &profile[..]].concat()).code, 2);
    let human = loop_run(&[&["run", "--split", "test", "--human-test-split"][..], &profile[..]].concat());
    assert_eq!(human.code, 1, "runs (and the agent fails the case): {}", human.stderr);
    let state = p.read("workspace/.gate-state.json");
    assert!(state.contains("--human-test-split") && state.contains("test split: 1 case(s)"), "{state}");
    // The audit entry is not a tampered state file: the next gate runs.
    assert_eq!(p.gate(&[]).code, 0);
    // Deleting the workspace does not make the split public: the state anchored in git says
    // the gate is in use, and its loss is named.
    std::fs::remove_dir_all(p.path().join("workspace")).unwrap();
    let lost = loop_run(&[&["run", "--split", "test", "--human-test-split"][..], &profile[..]].concat());
    assert_eq!(lost.code, 2, "{}", lost.stderr);
    assert!(lost.stderr.contains("--restore-state"), "{}", lost.stderr);
    let out = loop_run(&[&["run", "--split", "test"][..], &profile[..]].concat());
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("--human-test-split"), "{}", out.stderr);
}

/// Every descendant of `pid`, through `/proc/<pid>/task/*/children`.
fn descendants(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else { continue };
        for task in tasks.flatten() {
            let children = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                found.push(child);
                todo.push(child);
            }
        }
    }
    found
}

/// What a process of uid 65534 (the loop's user here) can read of each of `pids`: their root,
/// environment and open files, and anything naming a test case under `tmp`. One line per thing
/// it could read.
fn what_another_user_reads(pids: &[u32], tmp: &Path) -> Vec<String> {
    let mut script = String::new();
    for pid in pids {
        for what in ["root/", "fd/"] {
            script.push_str(&format!("ls /proc/{pid}/{what} >/dev/null 2>&1 && echo '{pid} {what}'\n"));
        }
        script.push_str(&format!("head -c1 /proc/{pid}/environ >/dev/null 2>&1 && echo '{pid} environ'\n"));
    }
    script.push_str(&format!("grep -rl secret- {} 2>/dev/null | sed 's/^/file /'\n", tmp.display()));
    let out = Command::new("setpriv")
        .args([
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
            "--inh-caps",
            "-all",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect()
}

/// The boundary that holds (docs/security.md): the loop runs as one user, the gate as another
/// (here root, as through a sudo rule). While Step 2 runs, the loop's user reads nothing of the
/// gate or of any process under it, and finds no test-split data; its own processes it reads
/// (the check is not vacuous). The gate works on the project that user owns, and only the gate
/// can change what it wrote.
#[test]
fn a_gate_run_as_another_user_shows_the_loops_user_nothing_of_the_test_split() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: needs root, to run the gate as a user other than the loop's");
        return;
    }
    let p = slow_project();
    let chown = |path: &Path| {
        let st = Command::new("chown").args(["-R", "65534:65534"]).arg(path).status().unwrap();
        assert!(st.success());
    };
    chown(p.path());
    chown(p.tmp());
    // Without git's consent the gate's user refuses a repository another user owns, naming the fix.
    p.hcbench(&["gate"]).code(2).stderr_has("git config --global --add safe.directory");
    let home = tempfile::tempdir().unwrap();
    let safe = p.path().canonicalize().unwrap();
    std::fs::write(home.path().join(".gitconfig"), format!("[safe]\n\tdirectory = {}\n", safe.display())).unwrap();
    let (mut gate, rx) = spawn_gate(&p, &[("HOME", &home.path().to_string_lossy())]);
    wait_for(&rx, "Step 2");
    std::thread::sleep(Duration::from_millis(1500));
    let gate_pid = gate.id();
    let mut pids = vec![gate_pid];
    pids.extend(descendants(gate_pid));
    assert!(pids.len() >= 3, "the test cells' processes run under the gate: {pids:?}");
    let mut control = Command::new("setpriv")
        .args(["--reuid", "65534", "--regid", "65534", "--clear-groups", "--", "sleep", "30"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let read = what_another_user_reads(&[control.id()], p.tmp());
    let own = format!("{} root/", control.id());
    assert!(read.contains(&own), "the reader cannot even read its own process: {read:?}");
    let read = what_another_user_reads(&pids, p.tmp());
    let _ = control.kill();
    let _ = control.wait();
    assert_eq!(read, Vec::<String>::new(), "the loop's user reads the gate's processes {pids:?}");

    let status = gate.wait().unwrap();
    let lines: Vec<String> = rx.try_iter().collect();
    assert_eq!(status.code(), Some(0), "{}", lines.join("\n"));
    let state = p.path().join("workspace/.gate-state.json");
    let meta = std::fs::metadata(&state).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!((meta.uid(), meta.mode() & 0o022), (0, 0), "the gate's state is the gate user's alone");
}
