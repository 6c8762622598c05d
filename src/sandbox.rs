//! The sandbox every child process of a cell runs in: tests, verifiers and `run_command`.
//!
//! The policy in front of the tools is a list of denials, and a list of denials always misses
//! something. The sandbox is what makes the miss harmless: with bubblewrap (Linux namespaces,
//! the mechanism Flatpak and several local coding agents use) a command gets
//!
//! - no network: its own network namespace, with only a loopback nobody else is on;
//! - a file system where the cell's workspace is the only writable place, beside a private,
//!   empty `/tmp`; the system's programs and libraries are bound read-only; the project
//!   repository, the benchmark folder, other cells and the user's home are simply not there;
//! - its own pid namespace and `/proc`, so no other process's environment or memory can be
//!   read, and every process it starts (daemons, double forks) ends with it: a cell's
//!   supervisor kills them all after each command ([`crate::supervisor`]), and when a
//!   namespace's first process ends, the kernel kills the rest;
//! - an environment built from an allowlist ([`child_env`]), never a copy of hcbench's;
//! - resource limits ([`Limits`]) set before it starts.
//!
//! Binds keep host paths (the workspace is at the same absolute path inside as outside), so a
//! command line, a traceback or a `{workspace}` placeholder means the same thing with and
//! without the sandbox. `--sandbox none` is an explicit opt-out: commands then run directly,
//! with the same environment allowlist and limits but no isolation, and every report says so.
//!
//! A cell sets its sandbox up once and runs its commands in it one at a time, through a
//! supervisor that leaves nothing of one command for the next ([`CellSandbox`]); the verifier,
//! last, on copies of what it reads (`agent::score`).
//!
//! A sandbox is resolved once per hcbench command ([`Sandbox::resolve`]): bubblewrap is found
//! and probed by running one trivial command in it, so a machine where it cannot work (no
//! package, user namespaces disabled) fails before any cell starts, with the fix in the error.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

/// Which sandbox to use, as the user names it (`--sandbox`, `HCBENCH_SANDBOX`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SandboxChoice {
    /// Linux namespaces through bubblewrap (`bwrap`); the default.
    #[default]
    Bubblewrap,
    /// No isolation: commands run directly on the host. Recorded in every report.
    None,
}

impl SandboxChoice {
    pub fn parse(s: &str) -> Option<SandboxChoice> {
        match s {
            "bubblewrap" | "bwrap" => Some(SandboxChoice::Bubblewrap),
            "none" => Some(SandboxChoice::None),
            _ => None,
        }
    }
}

/// What a run records about its isolation (manifest, `run_started`, report headers).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxInfo {
    /// `bubblewrap` or `none`.
    pub mechanism: String,
    /// The mechanism's version (`bwrap --version`), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

impl SandboxInfo {
    pub fn none() -> SandboxInfo {
        SandboxInfo { mechanism: "none".into(), version: None }
    }

    pub fn is_none(&self) -> bool {
        self.mechanism == "none"
    }

    /// `bubblewrap 0.8.0` or `none`.
    pub fn label(&self) -> String {
        match &self.version {
            Some(v) => format!("{} {v}", self.mechanism),
            None => self.mechanism.clone(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(
        "bubblewrap (`bwrap`) is not installed, and hcbench runs every command of a cell in it; \
         install the Debian package `bubblewrap` (apt-get install bubblewrap), or pass `--sandbox none` \
         (HCBENCH_SANDBOX=none) to run cells without isolation"
    )]
    Missing,
    #[error(
        "bubblewrap ({program}) cannot create a sandbox here: {detail}; it needs unprivileged user \
         namespaces (sysctl kernel.unprivileged_userns_clone=1) or root; fix that, or pass `--sandbox none` \
         (HCBENCH_SANDBOX=none) to run cells without isolation"
    )]
    Broken { program: PathBuf, detail: String },
}

/// Where and how a run's cells work: the sandbox of their commands, the folder their
/// workspaces are made in (`<workspaces>/<run_id>/<cell_id>`), which lies outside every
/// repository of the project so that git in a cell sees only the fixture's own files, and how
/// often they save a checkpoint.
#[derive(Debug, Clone)]
pub struct Isolation {
    pub sandbox: Sandbox,
    pub workspaces: PathBuf,
    /// `--checkpoint-interval`: the wall time from one checkpoint of a cell to the next (zero:
    /// after every step; src/agent/checkpoint.rs).
    pub checkpoint_interval: std::time::Duration,
}

impl Isolation {
    /// No sandbox, workspaces under `dir`, the default checkpoint interval: for tests of the
    /// engine.
    pub fn unsandboxed(dir: &Path) -> Isolation {
        Isolation {
            sandbox: Sandbox::None,
            workspaces: dir.join("workspaces"),
            checkpoint_interval: crate::agent::checkpoint::DEFAULT_INTERVAL,
        }
    }
}

/// The sandbox commands run in. Cheap to clone.
#[derive(Debug, Clone)]
pub enum Sandbox {
    Bubblewrap(Arc<Bubblewrap>),
    /// bubblewrap for the commands of one cell: one sandbox, set up once, runs them one at a
    /// time ([`CellSandbox`]).
    Cell(Arc<CellSandbox>),
    None,
}

/// A working bubblewrap.
#[derive(Debug)]
pub struct Bubblewrap {
    program: PathBuf,
    version: String,
    /// How the host lays out /bin, /lib, ...: bound read-only, or recreated as the same symlink.
    system: Vec<SystemPath>,
}

#[derive(Debug)]
enum SystemPath {
    Dir(PathBuf),
    Symlink { path: PathBuf, target: PathBuf },
}

/// Top-level directories of the system a command needs: programs, libraries, the loader.
const SYSTEM_DIRS: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];

/// Files and folders of /etc that programs read to start (the loader cache, users and groups for
/// git and Python, alternatives symlinks, Python's site config). The rest of /etc is not bound:
/// it is none of a test's business, and some of it is sensitive.
const ETC_ENTRIES: &[&str] = &[
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/localtime",
    "/etc/mime.types",
];

/// PATH inside the sandbox: the system's own directories, which are the ones bound.
const SANDBOX_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// A path of the host made visible inside, at the same absolute path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub path: PathBuf,
    pub writable: bool,
}

impl Mount {
    pub fn read_only(path: impl Into<PathBuf>) -> Mount {
        Mount { path: path.into(), writable: false }
    }
    pub fn writable(path: impl Into<PathBuf>) -> Mount {
        Mount { path: path.into(), writable: true }
    }
}

/// Resource limits of one command (and everything it starts), set as rlimits before it runs.
/// A case raises them with a `limits:` block (docs/benchmark-format.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Address space per process, in MiB (RLIMIT_AS).
    pub memory_mb: u64,
    /// Processes (RLIMIT_NPROC). The kernel does not apply it to root: see docs/security.md.
    pub processes: u64,
    /// Largest file a process may write, in MiB (RLIMIT_FSIZE).
    pub file_size_mb: u64,
    /// CPU time per process, in seconds (RLIMIT_CPU).
    pub cpu_s: u64,
    /// Open files per process (RLIMIT_NOFILE).
    pub open_files: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { memory_mb: 4096, processes: 512, file_size_mb: 256, cpu_s: 600, open_files: 1024 }
    }
}

impl Limits {
    /// Sets these limits on the calling process. Runs in the child between fork and exec, so
    /// it only calls setrlimit (async-signal-safe) and allocates nothing.
    pub(crate) fn apply(&self) -> std::io::Result<()> {
        use nix::sys::resource::{Resource, setrlimit};
        const MIB: u64 = 1 << 20;
        let set = |r: Resource, v: u64| setrlimit(r, v, v).map_err(std::io::Error::from);
        set(Resource::RLIMIT_AS, self.memory_mb.saturating_mul(MIB))?;
        set(Resource::RLIMIT_NPROC, self.processes)?;
        set(Resource::RLIMIT_FSIZE, self.file_size_mb.saturating_mul(MIB))?;
        set(Resource::RLIMIT_CPU, self.cpu_s)?;
        set(Resource::RLIMIT_NOFILE, self.open_files)?;
        Ok(())
    }
}

/// The environment of a child, from an allowlist: a search path, a private home, a UTF-8
/// locale, the determinism settings, then `extra` (what hcbench or the case declares). Nothing
/// of hcbench's own environment passes except PATH, and only without a sandbox, where the
/// host's programs are what the command runs.
pub fn child_env(sandbox: &Sandbox, extra: &[(String, String)]) -> Vec<(String, String)> {
    Allowlist::of(sandbox).with(&own_env(extra))
}

/// `extra` as it ends a child's environment ([`child_env`]): a name given twice keeps its last
/// value, at the place of its last.
pub(crate) fn own_env(extra: &[(String, String)]) -> Vec<(String, String)> {
    let mut own: Vec<(String, String)> = Vec::with_capacity(extra.len() + 1);
    for (k, v) in extra {
        own.retain(|(name, _)| name != k);
        own.push((k.clone(), v.clone()));
    }
    own
}

/// The allowlist's entries of a child's environment, before what the command adds: the same
/// for every command of a kind (sandboxed, or not with the host's PATH and temp folder), so
/// they are made once per process and kind ([`Allowlist::of`]) instead of once per command,
/// with the `NAME=value` strings exec takes.
#[derive(Debug)]
pub(crate) struct Allowlist {
    /// PATH, HOME, TMPDIR, then the fixed settings, in this order.
    pairs: Vec<(String, String)>,
    /// The same entries as exec takes them.
    exec: Vec<std::ffi::CString>,
    /// Without a sandbox, the host's PATH and temp folder as read when these were made: they
    /// are read again for every command, and a change makes new ones (the gate points TMPDIR
    /// into its private area after the sandbox was resolved, `gate::private::enter`).
    host: Option<(Option<OsString>, PathBuf)>,
}

/// The settings every child gets, after PATH, HOME and TMPDIR.
const FIXED_ENV: &[(&str, &str)] = &[
    ("LANG", "C.UTF-8"),
    ("LC_ALL", "C.UTF-8"),
    ("TZ", "UTC"),
    ("PYTHONHASHSEED", "0"),
    ("PYTHONDONTWRITEBYTECODE", "1"),
    ("GIT_CONFIG_NOSYSTEM", "1"),
    // Who commits, and when: a multi-session case's agent commits in its workspace, where
    // no git identity is configured; fixed dates make the same work the same commit ids.
    ("GIT_AUTHOR_NAME", "hcbench agent"),
    ("GIT_AUTHOR_EMAIL", "agent@hcbench.invalid"),
    ("GIT_AUTHOR_DATE", "2000-01-01T00:00:00Z"),
    ("GIT_COMMITTER_NAME", "hcbench agent"),
    ("GIT_COMMITTER_EMAIL", "agent@hcbench.invalid"),
    ("GIT_COMMITTER_DATE", "2000-01-01T00:00:00Z"),
];

impl Allowlist {
    /// The allowlist of a command in `sandbox`.
    pub(crate) fn of(sandbox: &Sandbox) -> Arc<Allowlist> {
        static SANDBOXED: std::sync::LazyLock<Arc<Allowlist>> =
            std::sync::LazyLock::new(|| Arc::new(Allowlist::new(SANDBOX_PATH, "/tmp", None)));
        static HOST: Mutex<Option<Arc<Allowlist>>> = Mutex::new(None);
        match sandbox {
            // The sandbox's /tmp is private and empty.
            Sandbox::Bubblewrap(_) | Sandbox::Cell(_) => SANDBOXED.clone(),
            Sandbox::None => {
                let host = (std::env::var_os("PATH"), std::env::temp_dir());
                let mut made = HOST.lock().unwrap_or_else(|p| p.into_inner());
                match made.as_ref() {
                    Some(a) if a.host.as_ref() == Some(&host) => a.clone(),
                    _ => {
                        let path = host.0.as_ref().and_then(|p| p.to_str()).unwrap_or(SANDBOX_PATH).to_string();
                        let tmp = host.1.to_string_lossy().into_owned();
                        let a = Arc::new(Allowlist::new(&path, &tmp, Some(host)));
                        *made = Some(a.clone());
                        a
                    }
                }
            }
        }
    }

    fn new(path: &str, tmp: &str, host: Option<(Option<OsString>, PathBuf)>) -> Allowlist {
        let pairs: Vec<(String, String)> = [("PATH", path), ("HOME", tmp), ("TMPDIR", tmp)]
            .into_iter()
            .chain(FIXED_ENV.iter().copied())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        // Nothing here holds a NUL: the constants do not, and PATH and the temp folder come
        // from the C strings of hcbench's own environment.
        let exec =
            pairs.iter().map(|(k, v)| std::ffi::CString::new(format!("{k}={v}")).expect("no NUL inside")).collect();
        Allowlist { pairs, exec, host }
    }

    /// The search path of a command whose own environment is `extra`.
    pub(crate) fn path<'a>(&'a self, extra: &'a [(String, String)]) -> &'a str {
        let own = extra.iter().rev().find(|(k, _)| k == "PATH");
        own.map_or(self.pairs[0].1.as_str(), |(_, v)| v.as_str())
    }

    /// The whole environment of a command whose own entries are `own` ([`own_env`]): the
    /// entries it keeps, then its own, each as a pair.
    pub(crate) fn with(&self, own: &[(String, String)]) -> Vec<(String, String)> {
        self.kept(own).map(|(pair, _)| pair.clone()).chain(own.iter().cloned()).collect()
    }

    /// The entries a command whose own environment is `extra` keeps (those it does not set
    /// itself), in order, each as a pair and as exec takes it.
    pub(crate) fn kept<'a>(
        &'a self,
        extra: &'a [(String, String)],
    ) -> impl Iterator<Item = (&'a (String, String), &'a std::ffi::CStr)> {
        self.pairs
            .iter()
            .zip(self.exec.iter().map(|c| c.as_c_str()))
            .filter(|((name, _), _)| !extra.iter().any(|(k, _)| k == name))
    }
}

impl Sandbox {
    /// The sandbox for `choice`: bubblewrap is found on PATH and probed once.
    pub fn resolve(choice: SandboxChoice) -> Result<Sandbox, SandboxError> {
        match choice {
            SandboxChoice::None => Ok(Sandbox::None),
            SandboxChoice::Bubblewrap => Bubblewrap::probe().map(|b| Sandbox::Bubblewrap(Arc::new(b))),
        }
    }

    pub fn info(&self) -> SandboxInfo {
        match self.bubblewrap() {
            Some(b) => SandboxInfo { mechanism: "bubblewrap".into(), version: Some(b.version.clone()) },
            None => SandboxInfo::none(),
        }
    }

    fn bubblewrap(&self) -> Option<&Arc<Bubblewrap>> {
        match self {
            Sandbox::Bubblewrap(b) => Some(b),
            Sandbox::Cell(c) => Some(&c.bubblewrap),
            Sandbox::None => None,
        }
    }

    /// The sandbox of one cell's commands: with bubblewrap and an hcbench binary to supervise
    /// them, a [`CellSandbox`], whose private folder is removed when the last clone is
    /// dropped; otherwise this sandbox itself.
    pub fn for_cell(&self) -> std::io::Result<Sandbox> {
        match self {
            Sandbox::Bubblewrap(b) => match supervisor_program() {
                Some(program) => Ok(Sandbox::Cell(Arc::new(CellSandbox::new(b.clone(), program)?))),
                None => Ok(self.clone()),
            },
            other => Ok(other.clone()),
        }
    }

    /// The cell's sandboxes, when this is one cell's.
    pub fn cell(&self) -> Option<&CellSandbox> {
        match self {
            Sandbox::Cell(c) => Some(c),
            _ => None,
        }
    }

    /// The program and arguments that run `argv` in `cwd` inside the sandbox, with `workspace`
    /// bound (writable or not) and `mounts` beside it. Without a sandbox, `argv` itself.
    pub fn wrap(&self, argv: &[String], cwd: &Path, workspace: &Mount, mounts: &[Mount]) -> (OsString, Vec<OsString>) {
        match self.bubblewrap() {
            None => (argv[0].clone().into(), argv[1..].iter().map(OsString::from).collect()),
            Some(b) => (b.program.clone().into(), b.args(argv, cwd, workspace, mounts)),
        }
    }
}

impl Bubblewrap {
    fn probe() -> Result<Bubblewrap, SandboxError> {
        let program = find_on_path("bwrap").ok_or(SandboxError::Missing)?;
        let broken = |detail: String| SandboxError::Broken { program: program.clone(), detail };
        let version = std::process::Command::new(&program)
            .arg("--version")
            .output()
            .map_err(|e| broken(format!("cannot run it: {e}")))?;
        // "bubblewrap 0.8.0"
        let version = String::from_utf8_lossy(&version.stdout).trim().rsplit(' ').next().unwrap_or("").to_string();
        let mut b = Bubblewrap { program: program.clone(), version, system: system_paths() };
        let tmp = std::env::temp_dir();
        let args = b.args(&["true".to_string()], &tmp, &Mount::read_only(&tmp), &[]);
        let out = std::process::Command::new(&program)
            .args(&args)
            .env_clear()
            .envs(child_env(&Sandbox::None, &[]))
            .output()
            .map_err(|e| broken(format!("cannot run it: {e}")))?;
        if !out.status.success() {
            return Err(broken(String::from_utf8_lossy(&out.stderr).trim().to_string()));
        }
        if b.version.is_empty() {
            b.version = "unknown".into();
        }
        Ok(b)
    }

    fn args(&self, argv: &[String], cwd: &Path, workspace: &Mount, mounts: &[Mount]) -> Vec<OsString> {
        self.args_with(&[], argv, cwd, workspace, mounts)
    }

    /// [`Bubblewrap::args`] with `extra` options before the command.
    fn args_with(
        &self,
        extra: &[&std::ffi::OsStr],
        argv: &[String],
        cwd: &Path,
        workspace: &Mount,
        mounts: &[Mount],
    ) -> Vec<OsString> {
        let mut a: Vec<OsString> = Vec::with_capacity(64);
        let mut push = |items: &[&std::ffi::OsStr]| a.extend(items.iter().map(|s| s.to_os_string()));
        // Every namespace (user, ipc, pid, net, uts, cgroup); the sandbox dies if hcbench does;
        // a new session so nothing inside can push keystrokes into a terminal (TIOCSTI).
        push(&["--unshare-all".as_ref(), "--die-with-parent".as_ref(), "--new-session".as_ref()]);
        // No capabilities, even in the sandbox's own user namespace. Run by root, bwrap would
        // otherwise leave them, and CAP_SYS_ADMIN there remounts a read-only bind writable
        // (the host's /usr, the verifier's view of the workspace), as root on the host.
        push(&["--cap-drop".as_ref(), "ALL".as_ref()]);
        push(&["--hostname".as_ref(), "hcbench".as_ref()]);
        for p in &self.system {
            match p {
                SystemPath::Dir(d) => push(&["--ro-bind".as_ref(), d.as_os_str(), d.as_os_str()]),
                SystemPath::Symlink { path, target } => {
                    push(&["--symlink".as_ref(), target.as_os_str(), path.as_os_str()])
                }
            }
        }
        for e in ETC_ENTRIES {
            push(&["--ro-bind-try".as_ref(), e.as_ref(), e.as_ref()]);
        }
        push(&["--dev".as_ref(), "/dev".as_ref(), "--proc".as_ref(), "/proc".as_ref()]);
        push(&["--tmpfs".as_ref(), "/tmp".as_ref()]);
        for m in std::iter::once(workspace).chain(mounts) {
            let how = if m.writable { "--bind" } else { "--ro-bind" };
            push(&[how.as_ref(), m.path.as_os_str(), m.path.as_os_str()]);
        }
        push(extra);
        // The sandbox's own root (a tmpfs holding the mount points) is read-only: what a
        // command can write is the workspace, /tmp, /dev's tmpfs and what a mount allows.
        push(&["--remount-ro".as_ref(), "/".as_ref()]);
        push(&["--chdir".as_ref(), cwd.as_os_str(), "--".as_ref()]);
        a.extend(argv.iter().map(OsString::from));
        a
    }
}

/// The sandbox of one cell's commands: one sandbox, set up once, runs the agent's commands, the
/// tests and the verifier, each through the supervisor ([`crate::supervisor`]) that is its
/// first process. A command that needs another set-up (a verifier whose folder is too large to
/// copy: the workspace read-only, more paths) gets a sandbox of its own, as with
/// [`Sandbox::Bubblewrap`].
///
/// The cell's private folder holds hcbench's scripts (`bin/`, read-only inside) and a folder per
/// test or verifier run (`runs/`, writable inside, each run with its own nonce); the cell's
/// sandboxes all bind both.
#[derive(Debug)]
pub struct CellSandbox {
    bubblewrap: Arc<Bubblewrap>,
    /// The hcbench binary that serves as supervisor.
    supervisor: PathBuf,
    dir: crate::lock::ScratchDir,
    /// The supervised sandbox, while no command uses it; taken out for each command, so a
    /// command that is cancelled takes it down with it.
    session: Mutex<Option<Session>>,
    /// Set once a supervisor could not start: the cell's commands then get a sandbox each.
    broken: AtomicBool,
    started: AtomicUsize,
}

/// A supervised sandbox: bwrap, with the supervisor inside as its pid 1. Dropped, it is killed
/// with everything in it ([`Session::kill`]).
#[derive(Debug)]
pub struct Session {
    /// The workspace as bound, and the other mounts: what a command must need to run in it.
    pub workspace: Mount,
    pub mounts: Vec<Mount>,
    /// bwrap, the leader of its own process group; killed with its group when dropped.
    pub child: tokio::process::Child,
    /// Requests go in here.
    pub input: tokio::process::ChildStdin,
    /// Responses come out here.
    pub output: tokio::io::BufReader<tokio::process::ChildStdout>,
    /// Whether the supervisor's first line was read and matched [`crate::supervisor::PROTOCOL`].
    pub greeted: bool,
}

impl Session {
    /// Kills bwrap and the sandbox's first process, whatever point of its start they are at.
    ///
    /// Killing bwrap alone is not enough. Its inner process (the sandbox's pid 1) waits, at the
    /// start, for bwrap to signal that the namespace's user maps are written; only later does
    /// it make itself die with its parent and start a session of its own (`--die-with-parent`,
    /// `--new-session`). A bwrap killed before that signal leaves it waiting forever, and as a
    /// namespace's first process it ignores every signal but SIGKILL. So: bwrap's children by
    /// pid (the inner process, whether or not it left the group yet), then the whole group
    /// (bwrap, and a child cloned after the listing, which is still in it). bwrap is not reaped
    /// before this returns, so neither its pid nor its group's can have been reused.
    fn kill(&mut self) {
        use nix::sys::signal::{Signal, kill, killpg};
        use nix::unistd::Pid;
        let Some(pid) = self.child.id().and_then(|p| i32::try_from(p).ok()) else { return };
        if let Ok(children) = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")) {
            for child in children.split_whitespace().filter_map(|c| c.parse::<i32>().ok()) {
                let _ = kill(Pid::from_raw(child), Signal::SIGKILL);
            }
        }
        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // The child handle's own kill on drop then finds bwrap dead, and tokio reaps it.
        self.kill();
    }
}

/// The argument that makes the hcbench binary a cell's supervisor ([`crate::supervisor`]).
pub const SUPERVISE_ARG: &str = "__supervise";

/// Where the supervisor's binary is bound inside.
const SUPERVISOR_INSIDE: &str = "/run/hcbench/supervisor";

impl CellSandbox {
    fn new(bubblewrap: Arc<Bubblewrap>, supervisor: PathBuf) -> std::io::Result<CellSandbox> {
        let dir = crate::lock::ScratchDir::new("hcbench-cell-")?;
        std::fs::create_dir(dir.path().join("bin"))?;
        std::fs::create_dir(dir.path().join("runs"))?;
        Ok(CellSandbox {
            bubblewrap,
            supervisor,
            dir,
            session: Mutex::default(),
            broken: AtomicBool::new(false),
            started: AtomicUsize::new(0),
        })
    }

    /// hcbench's scripts (the test runner, the verifier wrapper): read-only inside.
    pub fn bin(&self) -> PathBuf {
        self.dir.path().join("bin")
    }

    /// Where the test and verifier runs keep their nonce and results, a folder each.
    pub fn runs(&self) -> PathBuf {
        self.dir.path().join("runs")
    }

    /// What every sandbox of the cell binds besides the workspace.
    pub fn mounts(&self) -> Vec<Mount> {
        vec![Mount::read_only(self.bin()), Mount::writable(self.runs())]
    }

    /// The supervised sandbox for a command with these mounts, started now if there is none
    /// yet; None when the command needs a sandbox of its own (other mounts, or no supervisor).
    pub fn take(&self, workspace: &Mount, mounts: &[Mount]) -> std::io::Result<Option<Session>> {
        if self.broken.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let mut slot = self.session.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = slot.take() {
            if &s.workspace == workspace && s.mounts == mounts {
                return Ok(Some(s));
            }
            *slot = Some(s);
            return Ok(None);
        }
        self.start(workspace, mounts).map(Some)
    }

    /// Puts back a session that finished its command cleanly.
    pub fn give_back(&self, session: Session) {
        *self.session.lock().unwrap_or_else(|p| p.into_inner()) = Some(session);
    }

    /// Starts the supervised sandbox ahead of the first command, which then finds it set up.
    pub fn prepare(&self, workspace: &Mount, mounts: &[Mount]) -> std::io::Result<()> {
        if let Some(s) = self.take(workspace, mounts)? {
            self.give_back(s);
        }
        Ok(())
    }

    /// The supervisor could not start or spoke another protocol: from now on every command of
    /// the cell gets a sandbox of its own.
    pub fn mark_broken(&self) {
        self.broken.store(true, Ordering::Relaxed);
    }

    /// How many supervised sandboxes this cell has started so far.
    pub fn started(&self) -> usize {
        self.started.load(Ordering::Relaxed)
    }

    fn start(&self, workspace: &Mount, mounts: &[Mount]) -> std::io::Result<Session> {
        let argv = [SUPERVISOR_INSIDE.to_string(), SUPERVISE_ARG.to_string()];
        let extra: [&std::ffi::OsStr; 4] =
            ["--as-pid-1".as_ref(), "--ro-bind".as_ref(), self.supervisor.as_os_str(), SUPERVISOR_INSIDE.as_ref()];
        let args = self.bubblewrap.args_with(&extra, &argv, &workspace.path, workspace, mounts);
        let mut cmd = tokio::process::Command::new(&self.bubblewrap.program);
        cmd.args(args)
            .current_dir(&workspace.path)
            .env_clear()
            .envs(child_env(&Sandbox::Bubblewrap(self.bubblewrap.clone()), &[]))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = cmd.spawn()?;
        let (Some(input), Some(output)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(std::io::Error::other("the supervisor's pipes are missing"));
        };
        self.started.fetch_add(1, Ordering::Relaxed);
        Ok(Session {
            workspace: workspace.clone(),
            mounts: mounts.to_vec(),
            child,
            input,
            output: tokio::io::BufReader::new(output),
            greeted: false,
        })
    }
}

/// Marks every open descriptor above stderr close-on-exec, so no command inherits one: a
/// descriptor hcbench was started with (a CI runner's pipe, a make jobserver, a folder) would
/// otherwise pass through bwrap into the sandbox, and a folder's descriptor reaches outside
/// it. Called once at the start of the hcbench binary and of a cell's supervisor.
pub fn close_inherited_descriptors() {
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else { return };
    let fds: Vec<i32> =
        entries.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).filter(|&fd| fd > 2).collect();
    for fd in fds {
        // SAFETY: `fd` was open when listed; one closed since (the listing's own) only makes
        // fcntl fail, which is ignored. The borrow ends with the call.
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
        let _ = rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::CLOEXEC);
    }
}

/// Set by the hcbench binary's `main`: the running program can supervise a cell's sandbox,
/// whatever its file is named.
static THIS_BINARY_SUPERVISES: AtomicBool = AtomicBool::new(false);

/// Called by the hcbench binary's `main`: the running program is hcbench itself, which serves
/// as a cell's supervisor under any name (a copy renamed for a side-by-side measurement, say).
pub fn this_binary_supervises() {
    THIS_BINARY_SUPERVISES.store(true, Ordering::Relaxed);
}

/// The hcbench binary that can serve as a cell's supervisor: `HCBENCH_SUPERVISOR`, or the
/// running program when it is hcbench (its `main` said so, or it is named so), or an
/// `hcbench` beside it or one folder up (where cargo puts the binary for tests and benches,
/// whose own programs are in `deps/`). When there is none, a warning says so once: each
/// command then gets a sandbox of its own, which costs its set-up every time.
fn supervisor_program() -> Option<PathBuf> {
    let found = find_supervisor();
    if found.is_none() {
        static WARNED: std::sync::Once = std::sync::Once::new();
        WARNED.call_once(|| {
            tracing::warn!(
                "no hcbench binary to supervise the cells' sandboxes: each command gets a bubblewrap sandbox of its own \
                 (about 6 ms more per command); set HCBENCH_SUPERVISOR to the hcbench binary"
            )
        });
    }
    found
}

fn find_supervisor() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("HCBENCH_SUPERVISOR") {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    if THIS_BINARY_SUPERVISES.load(Ordering::Relaxed) || exe.file_name().is_some_and(|n| n == "hcbench") {
        return Some(exe);
    }
    let dir = exe.parent()?;
    [dir.join("hcbench"), dir.parent()?.join("hcbench")].into_iter().find(|p| p.is_file())
}

/// How /usr, /bin, /lib... exist on this host: a merged-/usr system has /bin -> usr/bin, which
/// must be a symlink inside too (binding it would follow it).
fn system_paths() -> Vec<SystemPath> {
    SYSTEM_DIRS
        .iter()
        .filter_map(|d| {
            let path = PathBuf::from(d);
            let meta = std::fs::symlink_metadata(&path).ok()?;
            if meta.file_type().is_symlink() {
                Some(SystemPath::Symlink { target: std::fs::read_link(&path).ok()?, path })
            } else if meta.is_dir() {
                Some(SystemPath::Dir(path))
            } else {
                None
            }
        })
        .collect()
}

/// `name` as the PATH `search` resolves it, when it is an executable file; a name with a slash
/// is relative to `cwd`.
///
/// What a name was found as on a PATH is kept for the process ([`FOUND`]), as a shell's `hash`
/// keeps it: looking it up again is one `stat` of that file instead of one per directory of
/// PATH up to it (every command's program is looked up, on a PATH that may start with several
/// directories of shims). While that file is an executable file, the name resolves to it; once
/// it is gone (or no longer executable), PATH is walked again. A directory earlier on PATH that
/// gains the name afterwards is not seen: as with `hash`, the run goes on with the program it
/// found first, so its cells all run the same one, and a program dropped into a directory of
/// PATH by a command (without a sandbox) cannot stand in for it later. Only what was found
/// through absolute directories is kept; a relative one means another file in another folder.
pub fn find_program(name: &str, search: impl AsRef<std::ffi::OsStr>, cwd: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let is_exe = |p: &Path| p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if name.contains('/') {
        return Some(cwd.join(name)).filter(|p| is_exe(p));
    }
    let search = search.as_ref();
    let known = FOUND.lock().unwrap_or_else(|p| p.into_inner()).get(search).and_then(|n| n.get(name)).cloned();
    if let Some(path) = known
        && is_exe(&path)
    {
        return Some(path);
    }
    let mut absolute = true;
    let found = std::env::split_paths(search).find_map(|d| {
        absolute &= d.is_absolute();
        Some(d.join(name)).filter(|p| is_exe(p))
    });
    let mut kept = FOUND.lock().unwrap_or_else(|p| p.into_inner());
    match &found {
        Some(path) if absolute => {
            kept.entry(search.to_os_string()).or_default().insert(name.to_string(), path.clone());
        }
        _ => {
            if let Some(names) = kept.get_mut(search) {
                names.remove(name);
            }
        }
    }
    found
}

/// What [`find_program`] found, by PATH and name. It holds only executables that exist on a
/// PATH hcbench ran a command with, so it stays as small as those directories.
static FOUND: Mutex<std::collections::BTreeMap<OsString, std::collections::BTreeMap<String, PathBuf>>> =
    Mutex::new(std::collections::BTreeMap::new());

/// `name` on hcbench's own PATH.
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    find_program(name, std::env::var_os("PATH")?, Path::new("."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_is_an_allowlist() {
        let extra = vec![("HCBENCH_CASE".to_string(), "bugfix-1".to_string()), ("TZ".into(), "Asia/Tokyo".into())];
        let env = child_env(&Sandbox::None, &extra);
        let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "PATH",
                "HOME",
                "TMPDIR",
                "LANG",
                "LC_ALL",
                "PYTHONHASHSEED",
                "PYTHONDONTWRITEBYTECODE",
                "GIT_CONFIG_NOSYSTEM",
                "GIT_AUTHOR_NAME",
                "GIT_AUTHOR_EMAIL",
                "GIT_AUTHOR_DATE",
                "GIT_COMMITTER_NAME",
                "GIT_COMMITTER_EMAIL",
                "GIT_COMMITTER_DATE",
                "HCBENCH_CASE",
                "TZ"
            ]
        );
        assert_eq!(env.last().unwrap().1, "Asia/Tokyo", "what a case declares wins");
    }

    /// A program found on a PATH is kept while it is there: a directory earlier on PATH that
    /// gains the name is not seen, the file's removal is; a relative directory is never kept.
    #[test]
    fn a_program_found_is_kept_until_it_goes() {
        use std::os::unix::fs::PermissionsExt as _;
        let tmp = tempfile::tempdir().unwrap();
        let (early, late) = (tmp.path().join("early"), tmp.path().join("late"));
        std::fs::create_dir(&early).unwrap();
        std::fs::create_dir(&late).unwrap();
        let program = |dir: &Path| {
            let path = dir.join("hcbench-kept-tool");
            std::fs::write(&path, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
            path
        };
        let search = std::env::join_paths([&early, &late]).unwrap();
        let find = || find_program("hcbench-kept-tool", &search, Path::new("/"));
        assert_eq!(find(), None);
        let first = program(&late);
        assert_eq!(find(), Some(first.clone()));
        program(&early);
        assert_eq!(find(), Some(first.clone()), "as with a shell's `hash`, the program found first");
        std::fs::remove_file(&first).unwrap();
        assert_eq!(find(), Some(early.join("hcbench-kept-tool")), "gone: PATH is walked again");
        // Through a relative directory (here the same folder), nothing is kept: each lookup
        // resolves it from where hcbench is.
        let relative = std::env::join_paths([Path::new("hcbench-no-such-dir"), &late]).unwrap();
        let again = program(&late);
        assert_eq!(find_program("hcbench-kept-tool", &relative, Path::new("/")), Some(again.clone()));
        let kept = FOUND.lock().unwrap().get(relative.as_os_str()).is_some_and(|n| n.contains_key("hcbench-kept-tool"));
        assert!(!kept, "found through a relative directory: not kept");
    }

    #[test]
    fn choices_parse_by_name() {
        assert_eq!(SandboxChoice::parse("none"), Some(SandboxChoice::None));
        assert_eq!(SandboxChoice::parse("bubblewrap"), Some(SandboxChoice::Bubblewrap));
        assert_eq!(SandboxChoice::parse("docker"), None);
        assert_eq!(SandboxInfo::none().label(), "none");
    }
}
