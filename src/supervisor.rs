//! The supervisor: the first process of a cell's sandbox, which runs the cell's commands in it.
//!
//! Setting up a bubblewrap sandbox costs about 6 ms of CPU (the bwrap program, a network
//! namespace, the mounts), as much as a short test run's own start. A cell runs most of its
//! commands (the agent's `run_command` and `run_tests`, the final tests, the verifier) with the same set-up,
//! so it sets that up once: `hcbench __supervise`, hcbench's own binary bound read-only into
//! the sandbox, is the sandbox's pid 1 and runs each command it is sent, then ends everything
//! that command left behind before it answers:
//!
//! - every other process in the sandbox is killed (`kill(-1, SIGKILL)` from a pid namespace's
//!   first process reaches every process of the namespace but itself) and reaped, so a daemon
//!   or a double fork of one command is gone before the next starts, as when each command had
//!   a sandbox of its own;
//! - `/tmp` and `/dev/shm` are emptied, so each command starts with them empty.
//!
//! It cannot be signalled, traced or read from inside: a namespace's first process gets no
//! signal from its namespace it has no handler for, and it makes itself non-dumpable, which
//! closes `ptrace` and `/proc/1/fd` to the commands.
//!
//! The protocol, on the supervisor's stdin and stdout: it first writes [`PROTOCOL`] and a
//! newline; then for each [`Request`] (one JSON line) it writes a [`Response`] (one JSON line)
//! followed by the command's captured stdout and stderr, `stdout_len` and `stderr_len` bytes.

use std::io::{self, BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::waitpid;
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use crate::sandbox::Limits;

/// The first line the supervisor writes; a different one means another hcbench's supervisor.
pub const PROTOCOL: &str = "hcbench-supervisor 1";

/// The argument that makes the hcbench binary a supervisor (named where the sandbox starts it).
pub use crate::sandbox::SUPERVISE_ARG as ARG;

/// How long a timed-out command's group gets between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_millis(500);

/// One command to run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Request {
    pub argv: Vec<String>,
    /// The whole environment.
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    pub timeout_ms: u64,
    /// Bound on captured bytes per stream.
    pub output_limit: usize,
    pub limits: Limits,
    /// What the command reads on stdin; absent: nothing (its stdin is empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin: Option<String>,
}

/// How it ended; the output follows the line.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Response {
    /// Exit code, or None when killed by a signal.
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    pub truncated: bool,
    pub duration_us: u64,
    pub stdout_len: usize,
    pub stderr_len: usize,
    /// The command could not be started.
    pub error: Option<String>,
}

/// Serves requests until stdin closes, then exits. Runs as the sandbox's pid 1.
pub fn serve() -> ! {
    if !first_process() {
        // It kills every other process it can see and empties /tmp: never on a host.
        eprintln!("hcbench {ARG} runs only as the first process of a cell's sandbox");
        std::process::exit(2);
    }
    // Nothing the commands start may trace this process or open its pipes to hcbench, and
    // they inherit no descriptor but their own stdio.
    let _ = nix::sys::prctl::set_dumpable(false);
    crate::sandbox::close_inherited_descriptors();
    let code = match serve_on(io::stdin().lock(), io::stdout().lock()) {
        Ok(()) => 0,
        Err(_) => 1,
    };
    std::process::exit(code)
}

fn serve_on(input: impl BufRead, mut output: impl Write) -> io::Result<()> {
    writeln!(output, "{PROTOCOL}")?;
    output.flush()?;
    for line in input.lines() {
        let line = line?;
        let (response, stdout, stderr) = match serde_json::from_str::<Request>(&line) {
            Ok(request) => run(&request),
            Err(e) => (Response { error: Some(format!("bad request: {e}")), ..Response::default() }, vec![], vec![]),
        };
        // `run` has ended every process already (a request that does not parse started none).
        empty(&["/tmp", "/dev/shm"]);
        let response = Response { stdout_len: stdout.len(), stderr_len: stderr.len(), ..response };
        serde_json::to_writer(&mut output, &response)?;
        output.write_all(b"\n")?;
        output.write_all(&stdout)?;
        output.write_all(&stderr)?;
        output.flush()?;
    }
    Ok(())
}

fn run(request: &Request) -> (Response, Vec<u8>, Vec<u8>) {
    let Some(program) = request.argv.first() else {
        return (Response { error: Some("empty argv".into()), ..Response::default() }, vec![], vec![]);
    };
    let mut cmd = Command::new(program);
    cmd.args(&request.argv[1..])
        .env_clear()
        .envs(request.env.iter().cloned())
        // As bwrap's --chdir sets it for a command started in a sandbox of its own.
        .env("PWD", &request.cwd)
        .current_dir(&request.cwd)
        .stdin(if request.stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let limits = request.limits;
    // SAFETY: the closure runs in the forked child before exec; it only calls setrlimit,
    // which is async-signal-safe, and allocates nothing.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || limits.apply());
    }
    let started = Instant::now();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return (Response { error: Some(e.to_string()), ..Response::default() }, vec![], vec![]),
    };
    let group = Pid::from_raw(child.id() as i32);
    let limit = request.output_limit;
    // A thread of its own: a command that does not read its stdin must not stall the wait.
    if let (Some(mut pipe), Some(input)) = (child.stdin.take(), request.stdin.clone()) {
        std::thread::spawn(move || {
            let _ = pipe.write_all(input.as_bytes());
        });
    }
    let out = child.stdout.take().map(|s| std::thread::spawn(move || read_bounded(s, limit)));
    let err = child.stderr.take().map(|s| std::thread::spawn(move || read_bounded(s, limit)));
    let (done, ended) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait());
    });
    let (status, timed_out) = match ended.recv_timeout(Duration::from_millis(request.timeout_ms)) {
        Ok(status) => (status.ok(), false),
        Err(_) => {
            let _ = killpg(group, Signal::SIGTERM);
            match ended.recv_timeout(GRACE) {
                Ok(status) => (status.ok(), true),
                Err(_) => {
                    let _ = killpg(group, Signal::SIGKILL);
                    (ended.recv().ok().and_then(|s| s.ok()), true)
                }
            }
        }
    };
    let duration_us = started.elapsed().as_micros() as u64;
    // Whatever still holds the output pipes (a grandchild in the background) dies here, so
    // the readers end.
    end_everything_else();
    let join = |t: Option<std::thread::JoinHandle<(Vec<u8>, bool)>>| t.and_then(|t| t.join().ok()).unwrap_or_default();
    let ((stdout, t1), (stderr, t2)) = (join(out), join(err));
    let response = Response {
        exit_code: status.and_then(|s| s.code()),
        timed_out,
        truncated: t1 || t2,
        duration_us,
        ..Response::default()
    };
    (response, stdout, stderr)
}

/// Kills and reaps every process of the sandbox but this one. As the pid namespace's first
/// process, this one is every orphan's parent, so once `waitpid` has no child left, nothing
/// else runs.
fn end_everything_else() {
    if !first_process() {
        return;
    }
    loop {
        let _ = kill(Pid::from_raw(-1), Signal::SIGKILL);
        match waitpid(Pid::from_raw(-1), None) {
            Ok(_) | Err(Errno::EINTR) => continue,
            Err(_) => break,
        }
    }
}

/// Whether this is the first process of its pid namespace (a sandbox's, for the supervisor).
fn first_process() -> bool {
    nix::unistd::getpid().as_raw() == 1
}

/// Removes what is in each folder, leaving the folder, and never crossing into another file
/// system: the workspace and the cell's private folder are bound below `/tmp` (host paths are
/// kept inside), and what is bound stays untouched.
fn empty(dirs: &[&str]) {
    use std::os::unix::fs::MetadataExt;
    if !first_process() {
        return;
    }
    for dir in dirs {
        if let Ok(meta) = std::fs::symlink_metadata(dir) {
            empty_on(Path::new(dir), meta.dev());
        }
    }
}

/// Removes what in `dir` lies on the file system `dev`; a folder holding a mount stays.
fn empty_on(dir: &Path, dev: u64) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
        if meta.dev() != dev {
            continue;
        }
        if meta.is_dir() {
            // A command may have taken its own permissions away from a folder.
            let _ = std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o700));
            empty_on(&path, dev);
            let _ = std::fs::remove_dir(&path);
        } else {
            let _ = std::fs::remove_file(&path);
        }
    }
}

fn read_bounded(mut stream: impl Read, limit: usize) -> (Vec<u8>, bool) {
    let mut out = crate::util::Bounded::default();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
            Ok(n) => out.push(&buf[..n], limit),
        }
    }
    (out.kept, out.truncated)
}
