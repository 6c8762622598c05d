//! Child processes: tests, verifiers and `run_command`.
//!
//! Rules, in the spirit of cargo-nextest's runner: argv only, never a shell unless a case's
//! argv names one; each child leads its own process group so a timeout can stop everything it
//! spawned (SIGTERM to the group, a grace period, then SIGKILL); captured output is bounded;
//! the environment is an allowlist, made deterministic. A timeout is a result
//! (`timed_out = true`), not an error. Every command runs in the [`Sandbox`] its spec names
//! ([`crate::sandbox`]), with its [`Limits`] set in the child before it execs, which is started
//! without a fork ([`spawn`]).
//!
//! The time a cell waits on its commands is charged to the cell's [`WaitClock`] (when the cell
//! runs inside one, [`WaitClock::scope`]), so the harness's own cost per cell can be told apart
//! from the commands' (`agent::run_cell_with`, `benches/overhead.rs`).
//!
//! The private folders a cell's commands needed (a test runner's, a staged verifier, the cell's
//! sandbox) are removed while the cell goes on and awaited at its end ([`Removals`]).

use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};

use crate::sandbox::{self, Limits, Mount, Sandbox, Session, find_program};
use crate::supervisor;
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt};

mod spawn;

/// How long a timed-out group gets between SIGTERM and SIGKILL.
pub const GRACE: Duration = Duration::from_millis(500);
/// Default bound on captured bytes per stream.
pub const DEFAULT_OUTPUT_LIMIT: usize = 1 << 20;

#[derive(Debug, Clone)]
pub struct CommandSpec {
    pub argv: Vec<String>,
    /// Where the command starts; inside `workspace.path`.
    pub cwd: PathBuf,
    pub timeout: Duration,
    /// Extra environment, on top of the allowlist of [`sandbox::child_env`].
    pub env: Vec<(String, String)>,
    pub output_limit: usize,
    /// Where the command runs: bubblewrap, or directly with `--sandbox none`.
    pub sandbox: Sandbox,
    /// The cell's workspace, bound at its own path: writable for the agent's commands and the
    /// tests, read-only for the verifier.
    pub workspace: Mount,
    /// Further host paths the command may see (a verifier folder, a runner's results folder;
    /// in a cell's sandbox, the cell's private folder, which [`CommandSpec::new`] adds).
    pub mounts: Vec<Mount>,
    pub limits: Limits,
    /// Bytes the command reads on stdin (a tool hook's call as JSON); None: stdin is empty.
    pub stdin: Option<String>,
}

impl CommandSpec {
    /// `argv` in the writable workspace `cwd`, with the default limits, no extra environment,
    /// and no mounts but a cell's private folder when `sandbox` is a cell's.
    pub fn new(argv: Vec<String>, cwd: &Path, timeout: Duration, sandbox: &Sandbox) -> CommandSpec {
        CommandSpec {
            argv,
            cwd: cwd.to_path_buf(),
            timeout,
            env: Vec::new(),
            output_limit: DEFAULT_OUTPUT_LIMIT,
            sandbox: sandbox.clone(),
            workspace: Mount::writable(cwd),
            mounts: sandbox.cell().map(|c| c.mounts()).unwrap_or_default(),
            limits: Limits::default(),
            stdin: None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct CommandOutcome {
    /// Exit code, or None when killed by a signal.
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// True when either stream exceeded `output_limit` and was cut.
    pub truncated: bool,
    pub duration: Duration,
}

impl CommandOutcome {
    pub fn success(&self) -> bool {
        !self.timed_out && self.exit_code == Some(0)
    }

    /// Exit status, stdout and stderr as one text for the model and the trace.
    pub fn combined(&self) -> String {
        let mut s = String::new();
        if self.timed_out {
            s.push_str(&format!("timed out after {:.1}s\n", self.duration.as_secs_f64()));
        } else {
            match self.exit_code {
                Some(c) => s.push_str(&format!("exit code {c}\n")),
                None => s.push_str("killed by a signal\n"),
            }
        }
        if !self.stdout.is_empty() {
            s.push_str("--- stdout ---\n");
            s.push_str(&String::from_utf8_lossy(&self.stdout));
            if !s.ends_with('\n') {
                s.push('\n');
            }
        }
        if !self.stderr.is_empty() {
            s.push_str("--- stderr ---\n");
            s.push_str(&String::from_utf8_lossy(&self.stderr));
            if !s.ends_with('\n') {
                s.push('\n');
            }
        }
        if self.truncated {
            s.push_str("[output truncated]\n");
        }
        s
    }
}

/// What a cell waited on, in microseconds: its commands and its model. Cheap to clone (the
/// clones share the counts).
///
/// A command's time is everything from the moment its program was found to the moment its
/// outcome is ready: setting up its sandbox (a bubblewrap of its own, or the cell's supervised
/// sandbox: starting it, its greeting, the request and the response), the process itself, and
/// reading the rest of its output. Starting the cell's supervised sandbox ahead of the first
/// command ([`prepare`]) is a command's time too. Commands of one cell run one at a time, so
/// the sum is time the cell spent waiting.
///
/// It also keeps the time of the parts of the cell's own work that cost the most
/// ([`Part`], charged by [`WaitClock::time`]), so the harness's cost can be broken down
/// without a profiler (`RUST_LOG=hcbench::cost=debug`, `benches/overhead.rs`).
#[derive(Debug, Clone, Default)]
pub struct WaitClock(Arc<[AtomicU64; 2 + Part::COUNT]>);

/// A part of a cell's own work, timed apart from the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// Copying the fixture into the cell's workspace.
    Workspace,
    /// Building (or reusing) the repo map injected into the context.
    RepoMap,
    /// The checkpoints: the workspace's first digests, and every step's save.
    Checkpoints,
    /// Writing the trace's events (and the summary that follows them).
    Trace,
    /// Packing each turn's context.
    Context,
    /// The tools' calls, less the commands they wait on (`run_tests`, `run_command`).
    Tools,
    /// Scoring: the final tests and the verifier with their private folders, less the commands
    /// (and a multi-session cell's feature checks after each session).
    Scoring,
    /// What the cell does on its own task at its end to remove what it made (its checkpoints'
    /// rename out of its way), which the cost event adds to the wait for the removals handed to
    /// the blocking pool.
    Removals,
}

impl Part {
    const COUNT: usize = 8;

    fn slot(self) -> usize {
        2 + self as usize
    }
}

tokio::task_local! {
    /// The clock of the cell whose future is running, if it runs in one.
    static WAIT_CLOCK: WaitClock;
}

impl WaitClock {
    /// Runs `work` with this clock charged for the commands (and the model turns) it waits on.
    /// Only the future itself is covered: a task it spawns is not.
    pub async fn scope<F: Future>(&self, work: F) -> F::Output {
        WAIT_CLOCK.scope(self.clone(), work).await
    }

    /// Microseconds spent in commands.
    pub fn commands_us(&self) -> u64 {
        self.0[0].load(Ordering::Relaxed)
    }

    /// Microseconds spent waiting for the model's replies.
    pub fn model_us(&self) -> u64 {
        self.0[1].load(Ordering::Relaxed)
    }

    /// Charges the time since `since` to the running cell's clock, as model time.
    pub(crate) fn charge_model(since: Instant) {
        charge(1, since);
    }

    /// Runs `work`, charging its time to `part` of the running cell's clock (if any).
    pub(crate) fn time<T>(part: Part, work: impl FnOnce() -> T) -> T {
        let t0 = Instant::now();
        let out = work();
        charge(part.slot(), t0);
        out
    }

    /// Awaits `work`, charging its time less the commands and model turns it waited on to
    /// `part` of the running cell's clock (if any).
    pub(crate) async fn time_async<F: Future>(part: Part, work: F) -> F::Output {
        let waited = || WAIT_CLOCK.try_with(|c| c.commands_us() + c.model_us()).unwrap_or(0);
        let (t0, before) = (Instant::now(), waited());
        let out = work.await;
        let us = (t0.elapsed().as_micros() as u64).saturating_sub(waited() - before);
        let _ = WAIT_CLOCK.try_with(|c| c.0[part.slot()].fetch_add(us, Ordering::Relaxed));
        out
    }

    /// Microseconds spent in `part`.
    pub fn part_us(&self, part: Part) -> u64 {
        self.0[part.slot()].load(Ordering::Relaxed)
    }
}

fn charge(which: usize, since: Instant) {
    let us = since.elapsed().as_micros() as u64;
    let _ = WAIT_CLOCK.try_with(|c| c.0[which].fetch_add(us, Ordering::Relaxed));
}

/// What a cell is done with but still has to remove: a test run's private folder in the cell's
/// sandbox, a staged verifier, the cell's sandbox. (Its checkpoints' folder is renamed out of
/// its way at its end and removed by the engine: `agent::retire_checkpoints`.) Removing a
/// folder that had files in it waits on the file system's journal (1-7 ms per folder on this
/// machine's ext4, against 0.01 ms per file, whatever the folder's size), which made the
/// removals the largest part of a cell's own cost. Within [`Removals::scope`] they run on the
/// blocking pool while the cell goes on, and [`Removals::finish`] waits for the rest: when the
/// cell's function returns, everything it made outside its workspace and its trace is gone. A cell that is cancelled
/// leaves its removals running on the pool. Outside a scope a removal happens at once.
#[derive(Debug, Default)]
pub struct Removals(std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>);

tokio::task_local! {
    /// The removals of the cell whose future is running, if it runs in a scope.
    static REMOVALS: Arc<Removals>;
}

impl Removals {
    /// Runs `work` with its removals handed to the blocking pool.
    pub async fn scope<F: Future>(self: &Arc<Self>, work: F) -> F::Output {
        REMOVALS.scope(self.clone(), work).await
    }

    /// Drops `value` (a [`tempfile::TempDir`], a cell's sandbox) on the blocking pool when the
    /// running cell has a scope, else here.
    pub fn drop_later<T: Send + 'static>(value: T) {
        let mut slot = Some(value);
        let _ = REMOVALS.try_with(|r| {
            if let Some(value) = slot.take() {
                let handle = tokio::task::spawn_blocking(move || drop(value));
                r.0.lock().unwrap_or_else(|p| p.into_inner()).push(handle);
            }
        });
    }

    /// Removes the folder `path` and everything in it, as [`Removals::drop_later`] drops; a
    /// folder that is not there is no error, and any other failure is a warning.
    pub fn remove_later(path: PathBuf) {
        struct Folder(PathBuf);
        impl Drop for Folder {
            fn drop(&mut self) {
                remove_folder(&self.0);
            }
        }
        Removals::drop_later(Folder(path));
    }

    /// Waits until every removal handed over so far is done.
    pub async fn finish(&self) {
        let handles = std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()));
        for handle in handles {
            // A removal that panicked has nothing left to wait for.
            let _ = handle.await;
        }
    }
}

/// Removes the folder `path` and everything in it here, on the caller's thread. A folder that
/// is not there is no error, and any other failure is a warning.
pub fn remove_folder(path: &Path) {
    if let Err(e) = std::fs::remove_dir_all(path)
        && e.kind() != io::ErrorKind::NotFound
    {
        tracing::warn!("cannot remove {}: {e}", path.display());
    }
}

/// `T`, dropped through [`Removals::drop_later`] (a private folder that is removed when
/// dropped: a [`tempfile::TempDir`]).
#[derive(Debug)]
pub struct DropLater<T: Send + 'static>(Option<T>);

impl<T: Send + 'static> DropLater<T> {
    pub fn new(value: T) -> DropLater<T> {
        DropLater(Some(value))
    }
}

impl<T: Send + 'static> std::ops::Deref for DropLater<T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.0.as_ref().expect("taken only when dropped")
    }
}

impl<T: Send + 'static> Drop for DropLater<T> {
    fn drop(&mut self) {
        if let Some(value) = self.0.take() {
            Removals::drop_later(value);
        }
    }
}

/// Charges the command time from its creation to its drop: a command that is cancelled (its
/// future dropped) is charged too.
struct Charged(Instant);

impl Drop for Charged {
    fn drop(&mut self) {
        charge(0, self.0);
    }
}

/// Runs `spec` to completion or timeout. Errors only when the program cannot be started.
pub async fn run(spec: &CommandSpec) -> io::Result<CommandOutcome> {
    let program = spec.argv.first().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty argv"))?;
    let env = environment(spec);
    // A program that does not exist is an error of the case or the harness, not a failing
    // command: find it first, in the PATH the command gets, as the host would have said.
    let search = env.path();
    let Some(found) = find_program(program, search, &spec.cwd) else {
        return Err(io::Error::new(io::ErrorKind::NotFound, format!("`{program}` not found")));
    };
    let _charged = Charged(Instant::now());
    tracing::debug!(argv = ?spec.argv, cwd = %spec.cwd.display(), "spawning");
    if let Some(cell) = spec.sandbox.cell()
        && let Some(session) = cell.take(&spec.workspace, &spec.mounts)?
    {
        match supervised(session, spec, env.pairs()).await {
            Supervised::Ran(outcome, Some(session)) => {
                cell.give_back(*session);
                return outcome;
            }
            Supervised::Ran(outcome, None) => return outcome,
            Supervised::Unavailable(why) => {
                // Nothing was run: the cell's commands get a sandbox each from now on.
                tracing::warn!(
                    "the cell's supervisor is not available ({why}); each command gets a sandbox of its own"
                );
                cell.mark_broken();
            }
        }
    }
    let (program, args) = spec.sandbox.wrap(&spec.argv, &spec.cwd, &spec.workspace, &spec.mounts);
    // The program actually started (the command's own, or bwrap), found as exec would find it
    // in the command's PATH: the child only execs a path.
    let resolved = if program.as_os_str() == std::ffi::OsStr::new(&spec.argv[0]) {
        found
    } else {
        find_program(&program.to_string_lossy(), search, &spec.cwd).ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, format!("`{}` not found", program.to_string_lossy()))
        })?
    };
    let argv: Vec<std::ffi::OsString> = std::iter::once(program).chain(args).collect();
    let own = env.own.iter().map(|(k, v)| spawn::env_entry(k, v)).collect::<io::Result<Vec<_>>>()?;
    let envp: Vec<&std::ffi::CStr> =
        env.allowlist.kept(&env.own).map(|(_, e)| e).chain(own.iter().map(|e| e.as_c_str())).collect();
    let start = spawn::Start {
        program: &resolved,
        argv: &argv,
        env: &envp,
        cwd: &spec.cwd,
        stdin: spec.stdin.is_some(),
        limits: spec.limits,
    };
    let started = Instant::now();
    // Dropped (the run cancelled), the child is killed and reaped, and the guard below kills
    // the rest of its group.
    let mut child = spawn::spawn(&start)?;
    let pgid = Some(child.pid);
    let _guard = GroupGuard::new(pgid);
    let limit = spec.output_limit;
    // Written by a task of its own, so a command that never reads its stdin cannot stall the
    // wait below; a command that exits without reading it ends the write with EPIPE, ignored.
    if let (Some(mut pipe), Some(input)) = (child.stdin.take(), spec.stdin.clone()) {
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            let _ = pipe.write_all(input.as_bytes()).await;
        });
    }
    let out_task = tokio::spawn(read_bounded(child.stdout.take(), limit));
    let err_task = tokio::spawn(read_bounded(child.stderr.take(), limit));

    let (status, timed_out) = match tokio::time::timeout(spec.timeout, child.wait()).await {
        Ok(status) => (Some(status?), false),
        Err(_) => {
            signal_group(pgid, Signal::SIGTERM);
            match tokio::time::timeout(GRACE, child.wait()).await {
                Ok(status) => (Some(status?), true),
                Err(_) => {
                    signal_group(pgid, Signal::SIGKILL);
                    (Some(child.wait().await?), true)
                }
            }
        }
    };
    let duration = started.elapsed();
    tracing::debug!(argv = ?spec.argv, ?status, timed_out, ms = duration.as_millis() as u64, "child ended");
    // The leader is gone; anything it left in its group (a backgrounded grandchild) would keep
    // the output pipes open and outlive the cell. Nothing a test starts may outlive it.
    signal_group(pgid, Signal::SIGKILL);
    let collect = async {
        let (o, e) = tokio::join!(out_task, err_task);
        (o.unwrap_or_default(), e.unwrap_or_default())
    };
    // A process that escaped the group (setsid) could hold the pipes forever: stop waiting.
    let ((stdout, t1), (stderr, t2)) =
        tokio::time::timeout(Duration::from_secs(2), collect).await.unwrap_or(((Vec::new(), true), (Vec::new(), true)));
    let exit_code = status.and_then(|s| s.code());
    Ok(CommandOutcome { exit_code, timed_out, stdout, stderr, truncated: t1 || t2, duration })
}

/// Starts the cell's supervised sandbox ahead of its first command, when `spec.sandbox` is a
/// cell's ([`crate::sandbox::CellSandbox`]); otherwise does nothing.
pub fn prepare(spec: &CommandSpec) -> io::Result<()> {
    match spec.sandbox.cell() {
        Some(cell) => {
            let _charged = Charged(Instant::now());
            cell.prepare(&spec.workspace, &spec.mounts)
        }
        None => Ok(()),
    }
}

/// The whole environment of a command: what [`sandbox::child_env`] gives it, then
/// GIT_CEILING_DIRECTORIES. The allowlist's part is shared with every command of its kind
/// ([`sandbox::Allowlist`]); only the command's own entries are made for it.
struct Environment {
    allowlist: Arc<sandbox::Allowlist>,
    /// The command's own entries, which follow the allowlist's it keeps.
    own: Vec<(String, String)>,
}

impl Environment {
    /// The PATH the command gets.
    fn path(&self) -> &str {
        self.allowlist.path(&self.own)
    }

    /// Every entry, in order, as a pair.
    fn pairs(&self) -> Vec<(String, String)> {
        self.allowlist.with(&self.own)
    }
}

/// The whole environment of `spec`'s command.
fn environment(spec: &CommandSpec) -> Environment {
    let mut own = sandbox::own_env(&spec.env);
    // git stops looking for a repository at the workspace's parent: a fixture without a .git of
    // its own is no repository, whatever folder it was copied into (the sandbox hides the
    // parents anyway; this is for `--sandbox none`).
    if let Some(parent) = spec.workspace.path.parent() {
        own.push(("GIT_CEILING_DIRECTORIES".into(), parent.to_string_lossy().into_owned()));
    }
    Environment { allowlist: sandbox::Allowlist::of(&spec.sandbox), own }
}

/// How a command sent to a cell's supervisor went.
enum Supervised {
    /// It ran (or broke the sandbox: an error); the session, when it can serve again.
    Ran(io::Result<CommandOutcome>, Option<Box<Session>>),
    /// The supervisor did not answer as one: the command was not sent.
    Unavailable(String),
}

/// Runs `spec` through the cell's supervisor ([`crate::supervisor`]).
async fn supervised(mut session: Session, spec: &CommandSpec, env: Vec<(String, String)>) -> Supervised {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
    if !session.greeted {
        let mut line = String::new();
        let greeting = tokio::time::timeout(Duration::from_secs(10), session.output.read_line(&mut line)).await;
        match greeting {
            Ok(Ok(_)) if line.trim_end() == supervisor::PROTOCOL => session.greeted = true,
            Ok(Ok(0)) => return Supervised::Unavailable("it ended before its first line".into()),
            Ok(Ok(_)) => return Supervised::Unavailable(format!("it said {:?}", line.trim_end())),
            Ok(Err(e)) => return Supervised::Unavailable(e.to_string()),
            Err(_) => return Supervised::Unavailable("it said nothing for 10 s".into()),
        }
    }
    let request = supervisor::Request {
        argv: spec.argv.clone(),
        env,
        cwd: spec.cwd.clone(),
        timeout_ms: spec.timeout.as_millis() as u64,
        output_limit: spec.output_limit,
        limits: spec.limits,
        stdin: spec.stdin.clone(),
    };
    let broken = |e: io::Error| Supervised::Ran(Err(io::Error::other(format!("the cell's sandbox broke: {e}"))), None);
    let mut line = match serde_json::to_vec(&request) {
        Ok(l) => l,
        Err(e) => return broken(e.into()),
    };
    line.push(b'\n');
    if let Err(e) = session.input.write_all(&line).await {
        return broken(e);
    }
    tracing::debug!(argv = ?spec.argv, cwd = %spec.cwd.display(), "sent to the cell's supervisor");
    let answer = async {
        let mut header = String::new();
        if session.output.read_line(&mut header).await? == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the supervisor ended"));
        }
        let response: supervisor::Response = serde_json::from_str(&header)?;
        let mut stdout = vec![0u8; response.stdout_len];
        session.output.read_exact(&mut stdout).await?;
        let mut stderr = vec![0u8; response.stderr_len];
        session.output.read_exact(&mut stderr).await?;
        Ok::<_, io::Error>((response, stdout, stderr))
    };
    // The supervisor enforces the timeout; this bounds a supervisor that stopped answering.
    let (response, stdout, stderr) =
        match tokio::time::timeout(spec.timeout + GRACE + Duration::from_secs(10), answer).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => return broken(e),
            Err(_) => {
                let outcome = CommandOutcome {
                    exit_code: None,
                    timed_out: true,
                    stdout: Vec::new(),
                    stderr: Vec::new(),
                    truncated: false,
                    duration: spec.timeout,
                };
                return Supervised::Ran(Ok(outcome), None);
            }
        };
    if let Some(e) = response.error {
        return Supervised::Ran(Err(io::Error::other(e)), Some(Box::new(session)));
    }
    let outcome = CommandOutcome {
        exit_code: response.exit_code,
        timed_out: response.timed_out,
        stdout,
        stderr,
        truncated: response.truncated,
        duration: Duration::from_micros(response.duration_us),
    };
    tracing::debug!(argv = ?spec.argv, code = ?outcome.exit_code, timed_out = outcome.timed_out, "supervised command ended");
    Supervised::Ran(Ok(outcome), Some(Box::new(session)))
}

/// Process groups of children still running, so a forced exit can kill them all.
static ACTIVE_GROUPS: std::sync::Mutex<Vec<i32>> = std::sync::Mutex::new(Vec::new());

/// Kills every running child's process group: used before a forced exit (second Ctrl-C).
pub fn kill_all_groups() {
    let groups = ACTIVE_GROUPS.lock().unwrap_or_else(|p| p.into_inner()).clone();
    for g in groups {
        let _ = killpg(Pid::from_raw(g), Signal::SIGKILL);
    }
}

/// Registers a group while it runs and kills it when dropped, whatever path drops it.
struct GroupGuard(Option<Pid>);

impl GroupGuard {
    fn new(pgid: Option<Pid>) -> Self {
        if let Some(p) = pgid {
            ACTIVE_GROUPS.lock().unwrap_or_else(|e| e.into_inner()).push(p.as_raw());
        }
        GroupGuard(pgid)
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(p) = self.0 {
            signal_group(Some(p), Signal::SIGKILL);
            ACTIVE_GROUPS.lock().unwrap_or_else(|e| e.into_inner()).retain(|g| *g != p.as_raw());
        }
    }
}

fn signal_group(pgid: Option<Pid>, signal: Signal) {
    if let Some(pgid) = pgid {
        // ESRCH (group already gone) is the normal case after a clean exit.
        let _ = killpg(pgid, signal);
    }
}

/// Bytes a command's output is read by at a time.
const READ_CHUNK: usize = 16 * 1024;

async fn read_bounded<R: AsyncRead + Unpin>(stream: Option<R>, limit: usize) -> (Vec<u8>, bool) {
    let Some(mut stream) = stream else { return (Vec::new(), false) };
    let mut out = crate::util::Bounded::default();
    // Read into spare capacity, never zeroed: a zeroed 64 KiB buffer per stream per command
    // cost two page-faulting allocations and their memset (2026-11-25: 3% of hcbench's own
    // CPU over an oracle matrix), for outputs that are mostly a few KiB.
    let mut buf = Vec::with_capacity(READ_CHUNK);
    loop {
        buf.clear();
        match stream.read_buf(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => out.push(&buf, limit),
        }
    }
    (out.kept, out.truncated)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(argv: &[&str], timeout_ms: u64) -> CommandSpec {
        let argv = argv.iter().map(|s| s.to_string()).collect();
        let timeout = Duration::from_millis(timeout_ms);
        CommandSpec { output_limit: 1000, ..CommandSpec::new(argv, &std::env::temp_dir(), timeout, &Sandbox::None) }
    }

    fn alive(pid: i32) -> bool {
        // Signal 0 probes for existence; a zombie would still answer, so also check /proc state.
        if nix::sys::signal::kill(Pid::from_raw(pid), None).is_err() {
            return false;
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        stat.split_whitespace().nth(2).is_none_or(|s| s != "Z")
    }

    #[tokio::test]
    async fn a_cells_clock_charges_its_commands_and_its_parts_and_nothing_outside_its_scope() {
        let clock = WaitClock::default();
        clock
            .scope(async {
                let out = run(&spec(&["sleep", "0.05"], 5000)).await.unwrap();
                assert!(out.success());
                WaitClock::time(Part::Checkpoints, || std::thread::sleep(Duration::from_millis(20)));
            })
            .await;
        // Outside the scope nothing is charged to it (a long part, so it would show).
        WaitClock::time(Part::Checkpoints, || std::thread::sleep(Duration::from_millis(300)));
        run(&spec(&["true"], 5000)).await.unwrap();
        assert!(clock.commands_us() >= 50_000, "the command's 50 ms: {}", clock.commands_us());
        assert!((20_000..300_000).contains(&clock.part_us(Part::Checkpoints)), "{}", clock.part_us(Part::Checkpoints));
        assert_eq!((clock.part_us(Part::Workspace), clock.part_us(Part::RepoMap), clock.model_us()), (0, 0, 0));
    }

    #[tokio::test]
    async fn timeout_kills_the_whole_group_including_grandchildren() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("grandchild.pid");
        let script = format!(
            "import subprocess, time\np = subprocess.Popen(['sleep', '300'])\nopen({:?}, 'w').write(str(p.pid))\ntime.sleep(300)\n",
            pidfile.to_str().unwrap()
        );
        let started = Instant::now();
        let out = run(&spec(&["python3", "-c", &script], 1500)).await.unwrap();
        assert!(out.timed_out, "the command must time out");
        assert!(!out.success());
        assert!(started.elapsed() < Duration::from_secs(10), "timeout must not wait for the sleepers");
        let pid: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(3);
        while alive(pid) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(!alive(pid), "grandchild {pid} survived the timeout");
    }

    #[tokio::test]
    async fn output_is_bounded_and_exit_code_kept() {
        let out = run(&spec(&["python3", "-c", "import sys; print('x'*5000); sys.exit(3)"], 10_000)).await.unwrap();
        assert_eq!(out.exit_code, Some(3));
        assert_eq!(out.stdout.len(), 1000);
        assert!(out.truncated);
    }

    fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[tokio::test]
    async fn the_child_sees_exactly_the_allowlisted_environment_with_and_without_a_sandbox() {
        let bwrap = Sandbox::resolve(crate::sandbox::SandboxChoice::Bubblewrap).expect("bubblewrap is installed");
        let dir = tempfile::tempdir().unwrap();
        let cell = bwrap.for_cell().unwrap();
        for sandbox in [Sandbox::None, bwrap, cell] {
            // `env -0` prints what the child really got, NUL-separated so any value survives.
            let extra = owned(&[("HCBENCH_CASE", "bugfix-1")]);
            let argv = vec!["env".to_string(), "-0".to_string()];
            let spec = CommandSpec {
                env: extra.clone(),
                ..CommandSpec::new(argv, dir.path(), Duration::from_secs(10), &sandbox)
            };
            let out = run(&spec).await.unwrap();
            assert!(out.success() && !out.truncated, "{}", out.combined());
            let seen: std::collections::BTreeMap<String, String> = String::from_utf8(out.stdout)
                .unwrap()
                .split_terminator('\0')
                .map(|kv| kv.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())).unwrap())
                .collect();
            let mut want: std::collections::BTreeMap<String, String> =
                sandbox::child_env(&sandbox, &extra).into_iter().collect();
            want.insert("GIT_CEILING_DIRECTORIES".into(), dir.path().parent().unwrap().to_string_lossy().into_owned());
            if let Sandbox::Bubblewrap(_) | Sandbox::Cell(_) = sandbox {
                // bwrap's --chdir sets PWD to the folder it enters, as a shell would.
                want.insert("PWD".into(), dir.path().to_string_lossy().into_owned());
            }
            assert_eq!(seen, want, "{:?}", sandbox.info());
            assert_eq!(seen["TZ"], "UTC");
            assert_eq!(seen["HCBENCH_CASE"], "bugfix-1");
        }
    }

    /// `sh -c script` in `dir`, with 20 s to run.
    fn sh_in(script: &str, dir: &Path, sandbox: &Sandbox) -> CommandSpec {
        CommandSpec::new(vec!["sh".into(), "-c".into(), script.into()], dir, Duration::from_secs(20), sandbox)
    }

    fn bubblewrap_cell() -> Sandbox {
        let bwrap = Sandbox::resolve(crate::sandbox::SandboxChoice::Bubblewrap).expect("bubblewrap is installed");
        let cell = bwrap.for_cell().unwrap();
        assert!(cell.cell().is_some(), "cargo built the hcbench binary, which supervises a cell's sandbox");
        cell
    }

    #[tokio::test]
    async fn a_cells_commands_share_its_sandbox_and_nothing_of_one_command_is_left_for_the_next() {
        let sandbox = bubblewrap_cell();
        let cell = sandbox.cell().unwrap();
        // Below /tmp, as workspaces are by default: the supervisor empties /tmp after each
        // command, and must leave what is bound there alone.
        let dir = tempfile::tempdir().unwrap();
        let spec = |script: &str| sh_in(script, dir.path(), &sandbox);
        prepare(&spec("")).unwrap();
        assert_eq!(cell.started(), 1);
        // The first command leaves a file in /tmp, one in the workspace, and a daemon behind.
        let first = run(&spec("echo left > /tmp/left; echo kept > kept; setsid sleep 300 >/dev/null 2>&1 & echo $$"))
            .await
            .unwrap();
        assert!(first.success(), "{}", first.combined());
        let second = run(&spec("ls -A /tmp; cat kept; for p in /proc/[0-9]*; do cat $p/comm; done")).await.unwrap();
        assert!(second.success(), "{}", second.combined());
        let seen = String::from_utf8_lossy(&second.stdout).into_owned();
        assert!(!seen.contains("left"), "the first command's /tmp is gone: {seen}");
        assert!(!seen.contains("sleep"), "the first command's daemon was ended with it: {seen}");
        assert!(seen.contains("kept"), "the workspace is untouched: {seen}");
        assert_eq!(std::fs::read_to_string(dir.path().join("kept")).unwrap(), "kept\n");
        assert_eq!(cell.started(), 1, "both ran in the sandbox started once for the cell");
        // A command with another set-up (the workspace read-only) gets a sandbox of its own.
        let read_only = CommandSpec { workspace: Mount::read_only(dir.path()), ..spec("cat kept; touch new") };
        let out = run(&read_only).await.unwrap();
        assert!(!out.success(), "the workspace is read-only here: {}", out.combined());
        assert!(String::from_utf8_lossy(&out.stdout).contains("kept"));
        assert_eq!(cell.started(), 1);
    }

    #[tokio::test]
    async fn the_supervisor_is_out_of_its_commands_reach() {
        let sandbox = bubblewrap_cell();
        let dir = tempfile::tempdir().unwrap();
        let sh = |script: &str| sh_in(script, dir.path(), &sandbox);
        // Its pipes to hcbench, its memory and its environment are closed; signals do nothing;
        // the sandbox's root and the folders a command leaves in /tmp are no way to persist.
        let script = concat!(
            "readlink /proc/1/fd/1 && echo fds-open; echo x > /proc/1/fd/1 && echo wrote-pipe; ",
            "cat /proc/1/environ >/dev/null && echo environ-open; kill -KILL 1; kill -TERM 1; kill -STOP 1; ",
            "touch /persist && echo root-writable; ",
            "mkdir -p /tmp/locked/deep && touch /tmp/locked/deep/f && chmod 000 /tmp/locked; echo done"
        );
        let out = run(&sh(script)).await.unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(text.ends_with("done\n"), "{}", out.combined());
        for leak in ["fds-open", "wrote-pipe", "environ-open", "root-writable"] {
            assert!(!text.contains(leak), "{leak}: {}", out.combined());
        }
        let after = run(&sh("test -e /tmp/locked && echo locked-left; echo served")).await.unwrap();
        assert_eq!(String::from_utf8_lossy(&after.stdout), "served\n", "{}", after.combined());
        assert_eq!(sandbox.cell().unwrap().started(), 1, "the same supervisor served both");
    }

    #[tokio::test]
    async fn no_command_has_a_capability_to_make_a_read_only_bind_writable() {
        let bwrap = Sandbox::resolve(crate::sandbox::SandboxChoice::Bubblewrap).expect("bubblewrap is installed");
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), "orig").unwrap();
        let ws = dir.path().to_string_lossy().into_owned();
        let script = format!(
            "grep CapEff /proc/self/status; mount -o remount,rw,bind {ws} && echo remounted; \
             mount -o remount,rw,bind /usr && echo usr-remounted; echo changed > {ws}/f; \
             unshare -Urm true && echo new-user-namespace; true"
        );
        for sandbox in [bwrap.clone(), bubblewrap_cell()] {
            let spec = CommandSpec {
                workspace: Mount::read_only(dir.path()),
                ..CommandSpec::new(
                    vec!["sh".into(), "-c".into(), script.clone()],
                    dir.path(),
                    Duration::from_secs(20),
                    &sandbox,
                )
            };
            let out = run(&spec).await.unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            assert!(text.contains("CapEff:\t0000000000000000"), "{}", out.combined());
            for escape in ["remounted", "new-user-namespace"] {
                assert!(!text.contains(escape), "{escape}: {}", out.combined());
            }
            assert_eq!(std::fs::read_to_string(dir.path().join("f")).unwrap(), "orig");
        }
    }

    #[tokio::test]
    async fn a_command_in_a_cells_sandbox_times_out_and_keeps_its_arguments() {
        let sandbox = bubblewrap_cell();
        let dir = tempfile::tempdir().unwrap();
        let started = Instant::now();
        let script = "import subprocess, time; subprocess.Popen(['sleep', '300']); time.sleep(300)";
        let argv = vec!["python3".into(), "-c".into(), script.into()];
        let out = run(&CommandSpec::new(argv, dir.path(), Duration::from_millis(800), &sandbox)).await.unwrap();
        assert!(out.timed_out, "{}", out.combined());
        assert!(started.elapsed() < Duration::from_secs(10));
        // The sandbox serves on; arguments reach the command as they are.
        let args = ["a b", "'\"$HOME\"'", "line\nbreak", "", "*"];
        let mut argv =
            vec!["python3".to_string(), "-c".into(), "import sys, json; print(json.dumps(sys.argv[1:]))".into()];
        argv.extend(args.iter().map(|s| s.to_string()));
        let out = run(&CommandSpec::new(argv, dir.path(), Duration::from_secs(20), &sandbox)).await.unwrap();
        let got: Vec<String> = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(got, args);
        assert_eq!(sandbox.cell().unwrap().started(), 1);
        // Output is bounded there too, and the exit code kept.
        let spec = CommandSpec {
            output_limit: 1000,
            ..CommandSpec::new(
                ["python3", "-c", "import sys; print('x'*5000); sys.exit(3)"].map(String::from).to_vec(),
                dir.path(),
                Duration::from_secs(20),
                &sandbox,
            )
        };
        let out = run(&spec).await.unwrap();
        assert_eq!((out.exit_code, out.stdout.len(), out.truncated), (Some(3), 1000, true));
    }

    /// Live processes (not zombies) whose command line names `path` or whose working folder
    /// is `path`: a cell's bwrap, its inner process before it runs the supervisor, and the
    /// supervisor (which works in the workspace, bound at the same path).
    fn processes_in(path: &Path) -> Vec<String> {
        let needle = path.to_string_lossy().into_owned();
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
            if pid == std::process::id() as i32 || !alive(pid) {
                continue;
            }
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            let cwd = std::fs::read_link(entry.path().join("cwd")).ok();
            if cmdline.contains(&needle) || cwd.as_deref() == Some(path) {
                found.push(format!("{pid}: {cmdline}"));
            }
        }
        found
    }

    #[tokio::test]
    async fn a_cells_sandbox_dropped_while_it_starts_leaves_no_process() {
        // A gate step that stops early drops its cells while their sandboxes start: killed
        // then, bwrap's inner process (pid 1 of the sandbox's pid namespace) would wait forever
        // for the set-up signal of an outer process that is gone. Each round drops the sandbox
        // a little later in its start, so some land in that window.
        let dirs: Vec<_> = (0..24).map(|_| tempfile::tempdir().unwrap()).collect();
        for (round, dir) in dirs.iter().enumerate() {
            let sandbox = bubblewrap_cell();
            prepare(&sh_in("", dir.path(), &sandbox)).unwrap();
            std::thread::sleep(Duration::from_micros(250 * round as u64));
            drop(sandbox);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut left: Vec<String> = dirs.iter().flat_map(|d| processes_in(d.path())).collect();
        while !left.is_empty() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
            left = dirs.iter().flat_map(|d| processes_in(d.path())).collect();
        }
        assert!(left.is_empty(), "processes outlived their cell's sandbox: {left:#?}");
    }

    #[tokio::test]
    async fn missing_program_is_an_error() {
        let err = run(&spec(&["definitely-not-a-program-hcbench"], 1000)).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }

    /// `sh -c script` without a sandbox, in a temporary folder, with 20 s to run.
    fn sh(script: &str) -> CommandSpec {
        CommandSpec::new(
            vec!["sh".into(), "-c".into(), script.into()],
            &std::env::temp_dir(),
            Duration::from_secs(20),
            &Sandbox::None,
        )
    }

    #[tokio::test]
    async fn the_child_gets_its_limits_its_own_group_and_only_its_three_streams() {
        let limits = Limits { memory_mb: 3000, processes: 400, file_size_mb: 7, cpu_s: 90, open_files: 77 };
        // ls lists its own descriptors: 0-2, and the one it opened on /proc/self/fd.
        let script =
            "ulimit -n; ulimit -v; ulimit -f; ulimit -t; ulimit -p; cut -d' ' -f1,5 /proc/$$/stat; ls /proc/self/fd";
        let out = run(&CommandSpec { limits, ..sh(script) }).await.unwrap();
        assert!(out.success(), "{}", out.combined());
        let text = String::from_utf8(out.stdout).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        // ulimit -v counts KiB, -f blocks of 1 KiB (bash) or 512 B (dash); -p is dash's -u.
        assert_eq!(lines[0], "77", "{text}");
        assert_eq!(lines[1], (3000 * 1024).to_string(), "{text}");
        assert!(lines[2] == (7 * 1024).to_string() || lines[2] == (7 * 2048).to_string(), "{text}");
        assert_eq!((lines[3], lines[4]), ("90", "400"), "{text}");
        let ids: Vec<&str> = lines[5].split_whitespace().collect();
        assert_eq!(ids[0], ids[1], "the shell leads its own process group: {text}");
        assert_ne!(ids[1], nix::unistd::getpgrp().to_string(), "{text}");
        let mut fds: Vec<u32> = lines[6..].iter().map(|l| l.parse().unwrap()).collect();
        fds.sort();
        assert_eq!(&fds[..3], [0, 1, 2], "{text}");
        assert!(fds.len() == 4 && fds[3] > 2, "nothing of hcbench's is open in the child: {text}");
    }

    #[tokio::test]
    async fn a_program_that_cannot_be_executed_or_a_folder_that_is_not_there_is_the_error_std_gives_and_a_plain_script_runs_in_sh()
     {
        let dir = tempfile::tempdir().unwrap();
        // A script whose interpreter is missing: exec says ENOENT; so does chdir for a folder
        // that is gone.
        let script = dir.path().join("broken");
        std::fs::write(&script, "#!/nonexistent/interpreter\n").unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let argv = vec![script.to_string_lossy().into_owned()];
        let spec = CommandSpec::new(argv, dir.path(), Duration::from_secs(5), &Sandbox::None);
        let err = run(&spec).await.unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT), "{err}");
        // A script without `#!` runs in /bin/sh, as execvp runs it.
        let plain = dir.path().join("plain");
        std::fs::write(&plain, "echo \"plain $1\"\n").unwrap();
        std::fs::set_permissions(&plain, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let argv = vec![plain.to_string_lossy().into_owned(), "script".into()];
        let out = run(&CommandSpec::new(argv, dir.path(), Duration::from_secs(5), &Sandbox::None)).await.unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "plain script\n", "{}", out.combined());
        let gone = dir.path().join("gone");
        let err = run(&CommandSpec { cwd: gone, ..sh("true") }).await.unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT), "{err}");
        // A NUL in an argument cannot reach exec.
        let err = run(&sh("echo a\0b")).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{err}");
    }

    #[tokio::test]
    async fn stdin_is_given_whole_or_ignored_and_a_child_that_never_reads_it_still_ends() {
        let input = "x".repeat(256 * 1024);
        let out = run(&CommandSpec { stdin: Some(input.clone()), ..sh("wc -c") }).await.unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), input.len().to_string());
        // More than a pipe holds, never read: the command's end is what counts.
        let started = Instant::now();
        let out = run(&CommandSpec { stdin: Some(input), ..sh("echo done") }).await.unwrap();
        assert!(out.success() && out.stdout == b"done\n", "{}", out.combined());
        assert!(started.elapsed() < Duration::from_secs(5));
        // Without stdin the child reads /dev/null: at once, nothing.
        let out = run(&sh("wc -c")).await.unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0");
    }

    #[tokio::test]
    async fn a_timeout_ends_a_shell_and_its_backgrounded_grandchild_and_reports_a_signal() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("bg.pid");
        let script = format!("sleep 300 & echo $! > {}; wait", pidfile.display());
        let started = Instant::now();
        let out = run(&CommandSpec { timeout: Duration::from_millis(500), ..sh(&script) }).await.unwrap();
        assert!(out.timed_out && out.exit_code.is_none(), "SIGTERM ended the shell: {}", out.combined());
        assert!(started.elapsed() < Duration::from_secs(5));
        let pid: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(3);
        while alive(pid) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(!alive(pid), "the backgrounded sleep {pid} survived");
        // A command that ignores SIGTERM gets SIGKILL after the grace period.
        let out =
            run(&CommandSpec { timeout: Duration::from_millis(300), ..sh("trap '' TERM; sleep 300") }).await.unwrap();
        assert!(out.timed_out && out.exit_code.is_none(), "{}", out.combined());
    }

    /// Runs a command that would sleep for minutes, cancels the run after 300 ms, and asserts
    /// its process was killed and reaped: /proc/<pid> goes away altogether (a zombie stays).
    async fn cancel_and_check_reaped() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let spec = sh(&format!("echo $$ > {}; exec sleep 300", pidfile.display()));
        let _ = tokio::time::timeout(Duration::from_millis(300), run(&spec)).await;
        let pid: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(3);
        while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(!Path::new(&format!("/proc/{pid}")).exists(), "{pid} is still there (a zombie?)");
    }

    #[tokio::test]
    async fn a_cancelled_run_kills_and_reaps_its_child() {
        // Killed, then reaped on the blocking pool.
        cancel_and_check_reaped().await;
    }

    #[tokio::test]
    async fn without_pidfds_a_command_is_waited_for_on_the_blocking_pool_with_the_same_results() {
        spawn::tests::FORCE_NO_PIDFD.set(true);
        let out = run(&sh("echo out; echo err >&2; exit 3")).await.unwrap();
        assert_eq!(
            (out.exit_code, out.stdout.as_slice(), out.stderr.as_slice()),
            (Some(3), &b"out\n"[..], &b"err\n"[..])
        );
        let out =
            run(&CommandSpec { timeout: Duration::from_millis(300), ..sh("trap '' TERM; sleep 300") }).await.unwrap();
        assert!(out.timed_out && out.exit_code.is_none(), "{}", out.combined());
        // Cancelled: killed, and reaped by the thread that waits for it.
        cancel_and_check_reaped().await;
        spawn::tests::FORCE_NO_PIDFD.set(false);
        assert_eq!(spawn::tests::THREAD_WAITS.get(), 3, "all three were waited for on the blocking pool");
    }
}
