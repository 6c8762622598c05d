//! End-to-end tests: the real `hcbench` binary against real fixtures, real child processes,
//! real files and real loopback servers. One test binary; each module is one area. Each test
//! reads like a user session: build a command, run it, check what the user would see (exit
//! code, stdout, files on disk).

mod ablate;
mod batch;
mod bench;
mod byo;
mod checkpoint;
mod context;
mod conventions;
mod delegate;
mod exit_policy;
mod exploits;
mod gate;
mod gate_anchor;
mod gate_infra;
mod gate_private;
mod gate_snapshot;
mod gate_trust;
mod hooks;
mod html;
mod matrix;
mod plan;
mod profiles;
mod providers;
mod report_snapshots;
mod run;
mod rundir;
mod sandbox;
mod sessions;
mod shard;
mod stored;
mod trend;
mod trend_html;
mod verdicts;
mod view;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_hcbench");

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A folder of this test process's own in the temporary directory, `hcbench-test-NAME-PID`:
/// `workspaces` (the cells' workspaces, `HCBENCH_WORKSPACES`) and `history` (`HCBENCH_HISTORY`),
/// shared by every hcbench the process starts. Both are removed when the process exits, and on
/// first use so are those of earlier test processes that are gone (a killed or crashed run's),
/// so repeated runs do not pile up in the temporary directory.
pub fn process_dir(name: &str) -> PathBuf {
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(|| {
        remove_dead_processes_dirs();
        // SAFETY: `remove_own_dirs` takes no arguments, returns nothing and does not unwind.
        unsafe { libc::atexit(remove_own_dirs) };
    });
    own_dir(name)
}

const PROCESS_DIRS: [&str; 2] = ["workspaces", "history"];

fn own_dir(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("hcbench-test-{name}-{}", std::process::id()))
}

extern "C" fn remove_own_dirs() {
    for name in PROCESS_DIRS {
        let _ = std::fs::remove_dir_all(own_dir(name));
    }
}

fn remove_dead_processes_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("hcbench-test-")) else { continue };
        let Some((kind, pid)) = rest.rsplit_once('-') else { continue };
        let Ok(pid) = pid.parse::<u32>() else { continue };
        if PROCESS_DIRS.contains(&kind) && pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A command under test.
pub struct Test {
    pub root: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

/// What the command did.
pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Default for Test {
    fn default() -> Self {
        Self::new()
    }
}

impl Test {
    pub fn new() -> Self {
        Test { root: repo_root(), args: Vec::new(), env: Vec::new() }
    }

    pub fn root(mut self, root: &Path) -> Self {
        self.root = root.to_path_buf();
        self
    }

    pub fn args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|s| s.to_string()));
        self
    }

    pub fn arg_path(mut self, p: &Path) -> Self {
        self.args.push(p.to_string_lossy().into_owned());
        self
    }

    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_string(), value.to_string()));
        self
    }

    pub fn run(self) -> Output {
        let out = Command::new(BIN)
            .args(&self.args)
            .current_dir(&self.root)
            .env_remove("HCBENCH_ROOT")
            // Terminal summaries fit COLUMNS when set; a test that wants a width sets its own.
            .env_remove("COLUMNS")
            .env("HCBENCH_TEST_API_KEY", "sk-canary-never-leaks")
            // Runs append to a history of the test process's own, not the checkout's
            // reports/history/; a test that checks the history sets its own.
            .env("HCBENCH_HISTORY", process_dir("history"))
            // Cell workspaces too, in one folder per test process.
            .env("HCBENCH_WORKSPACES", process_dir("workspaces"))
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .output()
            .expect("hcbench starts");
        Output {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

impl Output {
    pub fn code(self, want: i32) -> Self {
        assert_eq!(self.code, want, "exit code\n--- stdout ---\n{}\n--- stderr ---\n{}", self.stdout, self.stderr);
        self
    }

    pub fn stderr_has(self, needle: &str) -> Self {
        assert!(self.stderr.contains(needle), "stderr lacks {needle:?}:\n{}", self.stderr);
        self
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", self.stdout))
    }
}

/// Sends Ctrl-C (SIGINT) to `child` once the cell whose trace is `trace` is running its tests
/// (its trace has a `state_updated` event), as a user pressing Ctrl-C mid-run would.
pub fn interrupt_once_running(child: &std::process::Child, trace: &Path) {
    use std::time::{Duration, Instant};
    let deadline = Instant::now() + Duration::from_secs(30);
    while !read_trace_text(trace).is_ok_and(|t| t.contains("state_updated")) {
        assert!(Instant::now() < deadline, "the cell never started: {}", trace.display());
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGINT).unwrap();
}

/// A trace's text, in whichever form it is stored (a finished cell's is zstd-compressed).
pub fn read_trace_text(trace: impl AsRef<Path>) -> std::io::Result<String> {
    let mut text = String::new();
    std::io::Read::read_to_string(&mut hcbench::trace::stored::open(trace.as_ref())?, &mut text)?;
    Ok(text)
}

/// [`read_trace_text`] as bytes.
pub fn read_trace_bytes(trace: impl AsRef<Path>) -> std::io::Result<Vec<u8>> {
    read_trace_text(trace).map(String::into_bytes)
}

/// A report.html (or a side file of a split one) as a browser shows it once its timeline
/// bundle is inflated (src/report/bundle.rs): every timeline's markup in place.
pub fn report_html(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    hcbench::report::bundle::readable(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The events of a trace file, each as one flat object: envelope fields and the payload's
/// fields side by side (the payload may be nested under `data`).
pub fn trace_events(trace: &Path) -> Vec<Value> {
    read_trace_text(trace)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", trace.display()))
        .lines()
        .map(|l| {
            let mut e: Value = serde_json::from_str(l).unwrap();
            if let Some(Value::Object(data)) = e.as_object_mut().and_then(|m| m.remove("data")) {
                e.as_object_mut().unwrap().extend(data);
            }
            e
        })
        .collect()
}

/// SHA-256 of every file under `dir`, keyed by relative path.
pub fn tree_hashes(dir: &Path) -> BTreeMap<String, String> {
    use sha2::{Digest, Sha256};
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let ty = e.file_type().unwrap();
            if ty.is_dir() {
                stack.push(p);
            } else {
                let bytes = if ty.is_symlink() {
                    std::fs::read_link(&p).unwrap().to_string_lossy().into_owned().into_bytes()
                } else {
                    std::fs::read(&p).unwrap()
                };
                let digest = Sha256::digest(&bytes);
                out.insert(p.strip_prefix(dir).unwrap().to_string_lossy().into_owned(), format!("{digest:x}"));
            }
        }
    }
    out
}
