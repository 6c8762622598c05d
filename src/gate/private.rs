//! Where the gate keeps the test split's data while Step 2 runs, and what keeps it private.
//!
//! Step 2's cells leave traces, artifacts, workspaces, the sandbox's per-cell folders
//! (`hcbench-cell-*`, whose `runs/` hold copies of the trace for the verifier) and cached model
//! responses, all of which name test cases and show how the candidate did on each. The
//! optimizing agent runs as the same user as the gate, so file modes protect nothing (it owns
//! the files and can `chmod` them back). What does hold against the same user, on Linux:
//!
//! - **A private mount namespace.** [`enter`], called while the gate is still one thread,
//!   moves the gate into a user and mount namespace of its own and mounts a tmpfs (memory, not
//!   disk) over its area `$TMPDIR/hcbench-gate-*`. Outside the gate that path is an empty
//!   folder with `owner.pid` in it; the tmpfs exists only in the gate's namespace and is gone
//!   when the gate's last process exits, however it exits (normal end, error, signal, panic,
//!   `kill -9`). `TMPDIR` points into the area, so every temporary folder of the gate's cells
//!   (the sandbox's `hcbench-cell-*` too) is made there.
//! - **A non-dumpable gate.** `prctl(PR_SET_DUMPABLE, 0)`: another process of the same user
//!   cannot ptrace the gate, read its memory, or open `/proc/<gate>/{root,cwd,fd,mem,environ}`
//!   (the ways into its namespace and its open files), and no core dump is written.
//!
//! What the same user can still do is stated in docs/security.md and docs/gate.md: while a test
//! cell's command runs, its processes (the test program, the agent's commands, bubblewrap's
//! outer process) are ordinary processes of that user inside the gate's namespace, so
//! `/proc/<their pid>/root` reaches the area for as long as they live. Where a namespace cannot
//! be made (user namespaces disabled, not Linux) the area is an ordinary `0700` folder, removed
//! on every exit hcbench sees and swept by the next gate after `kill -9`; the gate says so in a
//! warning.
//!
//! Logs: [`SilentLogs`] silences every `tracing` event of the process while test cells run
//! (`main.rs` installs the filter), so no verbosity (`-vv`, `RUST_LOG=trace`) names a test case
//! or its outcome. Silencing the window is simpler and more complete than redacting each call
//! site (the engine, the agent loop, child processes, the HTTP providers all log cell ids,
//! argv and paths).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Prefix of the gate's areas (and of the older per-step private directories) under `$TMPDIR`.
pub(crate) const PRIVATE_PREFIX: &str = "hcbench-gate-";
/// File in an area naming the process that owns it (outside the mount, in namespace mode).
const OWNER_FILE: &str = "owner.pid";

/// How the test split is kept private in this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Confinement {
    /// A tmpfs in the gate's own mount namespace.
    Namespace,
    /// A `0700` folder under `$TMPDIR`; `why` says why no namespace could be made.
    Directory { why: String },
}

/// The gate's area, once [`enter`]ed.
struct Area {
    /// `$TMPDIR/hcbench-gate-*` as the host sees it (the mount point in namespace mode).
    dir: PathBuf,
    confinement: Confinement,
}

static AREA: OnceLock<Area> = OnceLock::new();
/// Areas of dead gates removed by [`enter`], for the gate's start line.
static SWEPT: AtomicUsize = AtomicUsize::new(0);
/// How many [`SilentLogs`] are alive.
static SILENT: AtomicUsize = AtomicUsize::new(0);
static LEFT: AtomicBool = AtomicBool::new(false);

/// Removes the area when the gate ends (normally, with an error, or by a panic that unwinds).
/// A signal the gate handles ends it normally; a second one removes the area itself
/// ([`crate::interrupt`]); `kill -9` leaves at most the area's folder for the next gate.
pub struct AreaGuard(());

impl Drop for AreaGuard {
    fn drop(&mut self) {
        leave();
    }
}

/// Sets up the gate's private area. Call it once, before any thread is started: unsharing a
/// user namespace needs a single-threaded process, and `TMPDIR` is changed here.
pub fn enter(root: &Path) -> io::Result<AreaGuard> {
    // Before anything of the test split exists: from here on no process of the same user can
    // read the gate's memory or its /proc entries, and no core dump is written.
    #[cfg(target_os = "linux")]
    let _ = nix::sys::prctl::set_dumpable(false);
    let tmp = std::env::temp_dir();
    outside_project(&tmp, root)?;
    SWEPT.store(sweep_in(&tmp), Ordering::SeqCst);
    // Its owner file is written before the mount, so the host sees it (and the next gate can
    // sweep the folder).
    let dir = owned_dir(&tmp)?.keep();
    let confinement = match namespace(&dir) {
        Ok(()) => Confinement::Namespace,
        Err(why) => Confinement::Directory { why },
    };
    let tmp_inside = dir.join("tmp");
    std::fs::create_dir_all(&tmp_inside)?;
    // SAFETY: the gate has started no thread yet (enter's contract; the unshare above would
    // have failed otherwise), so nothing reads the environment concurrently.
    unsafe { std::env::set_var("TMPDIR", &tmp_inside) };
    crate::interrupt::remove_on_forced_exit(&dir);
    if let Confinement::Directory { why } = &confinement {
        tracing::warn!(
            "test-split data of this gate is kept in {} (mode 0700), readable by processes of the same user while the gate runs: no private mount namespace ({why}); see docs/security.md",
            dir.display()
        );
    }
    let _ = AREA.set(Area { dir, confinement });
    Ok(AreaGuard(()))
}

/// Removes the area (once).
fn leave() {
    let Some(area) = AREA.get() else { return };
    if LEFT.swap(true, Ordering::SeqCst) {
        return;
    }
    #[cfg(target_os = "linux")]
    if area.confinement == Confinement::Namespace {
        // Detach the tmpfs (its content goes with it) so the host's empty folder can go too.
        let _ = nix::mount::umount2(&area.dir, nix::mount::MntFlags::MNT_DETACH);
    }
    let _ = std::fs::remove_dir_all(&area.dir);
    crate::interrupt::forget_on_forced_exit(&area.dir);
}

/// Moves this process into a user and mount namespace of its own, with a tmpfs over `dir`.
#[cfg(target_os = "linux")]
fn namespace(dir: &Path) -> Result<(), String> {
    use nix::sched::{CloneFlags, unshare};
    let (uid, gid) = (nix::unistd::geteuid(), nix::unistd::getegid());
    if uid.is_root() {
        // Root keeps every id: a gate run as root (the way to keep the loop's own user out,
        // docs/security.md) works on a project that user owns.
        return root_namespace().and_then(|()| tmpfs(dir));
    }
    unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS).map_err(|e| format!("unshare: {e}"))?;
    map_own_ids(uid, gid)?;
    tmpfs(dir)
}

/// Maps this process's own uid and gid to themselves in the namespace it has just entered (all
/// a process may map there by itself): files the gate writes in the project keep their owner.
#[cfg(target_os = "linux")]
fn map_own_ids(uid: nix::unistd::Uid, gid: nix::unistd::Gid) -> Result<(), String> {
    let write = |file: &str, text: String| std::fs::write(file, text).map_err(|e| format!("{file}: {e}"));
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("{uid} {uid} 1\n"))?;
    write("/proc/self/gid_map", format!("{gid} {gid} 1\n"))
}

/// Root's namespace maps every uid and gid to itself. A process may map only its own id into a
/// namespace it has just entered, so a child forked before the unshare, still holding root's
/// capabilities on the host, writes the maps. (A single-uid map would leave root without its
/// powers over any file of another user: they would show as `nobody`.)
#[cfg(target_os = "linux")]
fn root_namespace() -> Result<(), String> {
    use nix::sched::{CloneFlags, unshare};
    use nix::sys::wait::{WaitStatus, waitpid};
    use nix::unistd::{ForkResult, fork, getpid, pipe, read, write};
    let gate = getpid();
    let maps =
        [(format!("/proc/{gate}/uid_map"), "0 0 4294967295\n"), (format!("/proc/{gate}/gid_map"), "0 0 4294967295\n")];
    let (go_r, go_w) = pipe().map_err(|e| format!("pipe: {e}"))?;
    // SAFETY: the process is single-threaded (enter's contract), so the child may allocate.
    match unsafe { fork() }.map_err(|e| format!("fork: {e}"))? {
        ForkResult::Child => {
            drop(go_w);
            let mut byte = [0u8];
            let ok = matches!(read(&go_r, &mut byte), Ok(1))
                && maps.iter().all(|(file, text)| std::fs::write(file, text).is_ok());
            // SAFETY: _exit ends the child without running the parent's destructors.
            unsafe { nix::libc::_exit(if ok { 0 } else { 1 }) }
        }
        ForkResult::Parent { child } => {
            drop(go_r);
            let unshared = unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS);
            // The child writes only after a byte; without one (unshare failed) it exits.
            if unshared.is_ok() {
                let _ = write(&go_w, b"x");
            }
            drop(go_w);
            let status = waitpid(child, None).map_err(|e| format!("waiting for the id mapper: {e}"))?;
            unshared.map_err(|e| format!("unshare: {e}"))?;
            if status == WaitStatus::Exited(child, 0) {
                return Ok(());
            }
            // Already inside the namespace: fall back to root's own id, as for any other user.
            tracing::warn!(
                "mapping every id into the gate's namespace failed ({status:?}); files of other users show as nobody"
            );
            map_own_ids(nix::unistd::Uid::from_raw(0), nix::unistd::Gid::from_raw(0))
        }
    }
}

/// Makes mounts private and puts a tmpfs over `dir`.
#[cfg(target_os = "linux")]
fn tmpfs(dir: &Path) -> Result<(), String> {
    use nix::mount::{MsFlags, mount};
    // Nothing mounted here may propagate back to the host's namespace.
    mount(None::<&str>, "/", None::<&str>, MsFlags::MS_REC | MsFlags::MS_PRIVATE, None::<&str>)
        .map_err(|e| format!("making mounts private: {e}"))?;
    mount(Some("tmpfs"), dir, Some("tmpfs"), MsFlags::MS_NOSUID | MsFlags::MS_NODEV, Some("mode=0700"))
        .map_err(|e| format!("mounting a tmpfs on {}: {e}", dir.display()))?;
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn namespace(_dir: &Path) -> Result<(), String> {
    Err("mount namespaces need Linux".into())
}

/// Test cells must not run inside the project, where the loop reads files.
fn outside_project(tmp: &Path, root: &Path) -> io::Result<()> {
    if let (Ok(t), Ok(r)) = (tmp.canonicalize(), root.canonicalize())
        && t.starts_with(&r)
    {
        return Err(io::Error::other(format!(
            "the temporary directory {} is inside the project {}; test-split cells must run outside it: set TMPDIR elsewhere",
            t.display(),
            r.display()
        )));
    }
    Ok(())
}

/// A private directory for one Step 2: inside the gate's area once [`enter`]ed (so in the
/// private tmpfs), else a `0700` folder under `$TMPDIR` naming its owner. Removed when the
/// value drops (normal end, error, the first signal) or with the area.
pub(crate) fn private_dir(root: &Path) -> io::Result<tempfile::TempDir> {
    if let Some(area) = AREA.get() {
        return tempfile::Builder::new().prefix("step2-").tempdir_in(&area.dir);
    }
    let tmp = std::env::temp_dir();
    outside_project(&tmp, root)?;
    owned_dir(&tmp)
}

/// A `0700` folder `hcbench-gate-*` in `tmp` naming this process as its owner, which
/// [`sweep_private_dirs`] goes by.
fn owned_dir(tmp: &Path) -> io::Result<tempfile::TempDir> {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new().prefix(PRIVATE_PREFIX).tempdir_in(tmp)?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))?;
    std::fs::write(dir.path().join(OWNER_FILE), std::process::id().to_string())?;
    Ok(dir)
}

/// Removes areas and private directories whose owner process no longer exists (a gate killed
/// with SIGKILL cannot clean up after itself). Returns how many were removed: once [`enter`]ed,
/// the ones it removed before the area was made (`$TMPDIR` points into the area since).
pub(crate) fn sweep_private_dirs() -> usize {
    if AREA.get().is_some() {
        return SWEPT.swap(0, Ordering::SeqCst);
    }
    sweep_in(&std::env::temp_dir())
}

fn sweep_in(tmp: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(tmp) else { return 0 };
    let mut removed = 0;
    for e in entries.flatten() {
        if !e.file_name().to_string_lossy().starts_with(PRIVATE_PREFIX) {
            continue;
        }
        let Ok(pid) = std::fs::read_to_string(e.path().join(OWNER_FILE)) else { continue };
        let Ok(pid) = pid.trim().parse::<i32>() else { continue };
        let alive =
            !matches!(nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None), Err(nix::errno::Errno::ESRCH));
        if !alive && std::fs::remove_dir_all(e.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// While one is alive, no `tracing` event of this process is written (see the module doc).
pub(crate) struct SilentLogs(());

impl SilentLogs {
    pub(crate) fn start() -> SilentLogs {
        SILENT.fetch_add(1, Ordering::SeqCst);
        SilentLogs(())
    }
}

impl Drop for SilentLogs {
    fn drop(&mut self) {
        SILENT.fetch_sub(1, Ordering::SeqCst);
    }
}

/// True while test-split cells run: `main.rs`'s log filter drops every event then.
pub fn logs_silenced() -> bool {
    SILENT.load(Ordering::SeqCst) > 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_dirs_are_closed_and_swept_when_orphaned() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let dir = private_dir(root.path()).unwrap();
        let mode = std::fs::metadata(dir.path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        assert!(!dir.path().starts_with(root.path()));
        // A live owner (this process) is never swept.
        sweep_private_dirs();
        assert!(dir.path().exists());
        // An orphan (owner gone) is.
        let orphan = tempfile::Builder::new().prefix(PRIVATE_PREFIX).tempdir().unwrap().keep();
        std::fs::write(orphan.join(OWNER_FILE), "2147483646").unwrap();
        sweep_private_dirs();
        assert!(!orphan.exists());
    }

    #[test]
    fn logs_are_silent_while_a_guard_lives() {
        assert!(!logs_silenced());
        let a = SilentLogs::start();
        let b = SilentLogs::start();
        drop(a);
        assert!(logs_silenced(), "one guard still alive");
        drop(b);
        assert!(!logs_silenced());
    }
}
