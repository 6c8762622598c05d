//! File locks that name their holder: one writer at a time for a workspace's gate state
//! (`workspace/.gate.lock`: gate, record, train results) and for a run directory (`.lock`).
//!
//! Two gates on the same workspace would read the same suite.json and results.tsv and the
//! later writer would silently drop the other's promotions or rows; two processes finishing
//! the same run directory would run its cells twice. An OS advisory lock (`flock` through
//! `std::fs::File::try_lock`) serializes them; the OS releases it when the holder exits, even
//! on a crash or SIGKILL, so a stale lock can never wedge anything. The lock file's content
//! names the holder (pid, command, start time) for the "another process holds it" message;
//! the content is informational, the lock is the flock.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A folder of hcbench's own in the temp folder, `$TMPDIR/<prefix>XXXXXX`, removed when the
/// value is dropped, whose owner holds a lock on its `.owner` file for as long as it lives.
///
/// A process killed with SIGKILL (a CI job's time limit, the OOM killer, a test that kills
/// hcbench mid-run) cannot remove its folders. So the first folder a process makes with a
/// prefix sweeps the others of that prefix whose `.owner` lock it can take: the OS released
/// their owner's lock when it died, in whatever pid namespace it ran. A folder without
/// `.owner` (made by an older hcbench) or owned by another user is left alone, and `.owner`
/// appears already locked (locked under another name, then renamed), so a folder being made is
/// never taken for an abandoned one.
#[derive(Debug)]
pub struct ScratchDir {
    dir: tempfile::TempDir,
    _owner: File,
}

/// The lock file of a [`ScratchDir`].
const OWNER: &str = ".owner";

impl ScratchDir {
    pub fn new(prefix: &'static str) -> io::Result<ScratchDir> {
        ScratchDir::new_under(&std::env::temp_dir(), prefix)
    }

    /// [`ScratchDir::new`] in the folder `base` instead of the temp folder (a process uses one
    /// `base` per prefix: the sweep is made once per prefix).
    pub fn new_under(base: &Path, prefix: &'static str) -> io::Result<ScratchDir> {
        static SWEPT: std::sync::Mutex<Vec<&str>> = std::sync::Mutex::new(Vec::new());
        let first = {
            let mut swept = SWEPT.lock().unwrap_or_else(|p| p.into_inner());
            !swept.contains(&prefix) && {
                swept.push(prefix);
                true
            }
        };
        if first {
            sweep_abandoned(base, prefix);
        }
        ScratchDir::new_in(base, prefix)
    }

    fn new_in(tmp: &Path, prefix: &str) -> io::Result<ScratchDir> {
        let dir = tempfile::Builder::new().prefix(prefix).tempdir_in(tmp)?;
        let making = dir.path().join(".owner.new");
        let owner = File::create_new(&making)?;
        owner.lock()?;
        std::fs::rename(&making, dir.path().join(OWNER))?;
        Ok(ScratchDir { dir, _owner: owner })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Keeps the folder for the rest of the process's life, and its lock with it: the lock's
    /// descriptor stays open until the process exits, which is when a later hcbench may sweep
    /// the folder if the process did not remove it itself.
    pub fn keep(self) -> PathBuf {
        use std::os::fd::IntoRawFd;
        let ScratchDir { dir, _owner: owner } = self;
        let _held_until_exit = owner.into_raw_fd();
        dir.keep()
    }
}

/// Removes the folders `<prefix>*` of `tmp` that this user owns and whose `.owner` lock is free.
fn sweep_abandoned(tmp: &Path, prefix: &str) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(tmp) else { return };
    let me = nix::unistd::geteuid().as_raw();
    for entry in entries.flatten() {
        if !entry.file_name().to_str().is_some_and(|n| n.starts_with(prefix)) {
            continue;
        }
        let path = entry.path();
        // Not through a link, and only our own.
        if !std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir() && m.uid() == me) {
            continue;
        }
        let Ok(owner) = File::open(path.join(OWNER)) else { continue };
        if owner.try_lock().is_ok() {
            match std::fs::remove_dir_all(&path) {
                Ok(()) => tracing::debug!(folder = %path.display(), "removed a folder its killed owner left"),
                Err(e) => {
                    tracing::debug!(folder = %path.display(), "cannot remove a folder its killed owner left: {e}")
                }
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error(
        "another hcbench process holds the {name} lock {path} ({holder}); wait for it to finish, or pass --wait SECONDS to wait (waited {waited_s}s)"
    )]
    Busy { name: String, path: PathBuf, holder: String, waited_s: u64 },
    #[error("cannot use the lock {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

/// Held for as long as the value lives; dropping it closes the file and releases the lock.
#[derive(Debug)]
pub struct FileLock {
    _file: File,
}

impl FileLock {
    /// Takes the lock at `path`, waiting up to `wait` for another holder. `on_wait` is called
    /// once, with the holder's description, if the lock is busy and we are going to wait.
    pub fn acquire(
        path: &Path,
        command: &str,
        wait: Duration,
        on_wait: impl FnOnce(&str),
    ) -> Result<FileLock, LockError> {
        let io_err = |source| LockError::Io { path: path.to_path_buf(), source };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io_err)?;
        }
        // Never truncate on open: the current holder's description must stay readable.
        let mut file =
            OpenOptions::new().create(true).truncate(false).read(true).write(true).open(path).map_err(io_err)?;
        let started = Instant::now();
        let mut on_wait = Some(on_wait);
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(TryLockError::WouldBlock) => {
                    let holder = holder_of(path);
                    if started.elapsed() >= wait {
                        return Err(LockError::Busy {
                            name: lock_name(path),
                            path: path.to_path_buf(),
                            holder,
                            waited_s: started.elapsed().as_secs(),
                        });
                    }
                    if let Some(f) = on_wait.take() {
                        f(&holder);
                    }
                    std::thread::sleep(
                        Duration::from_millis(100)
                            .min(wait.saturating_sub(started.elapsed()))
                            .max(Duration::from_millis(1)),
                    );
                }
                Err(TryLockError::Error(e)) => return Err(io_err(e)),
            }
        }
        let info = format!("pid {}, hcbench {command}, since {}\n", std::process::id(), crate::util::now_rfc3339());
        file.set_len(0).and_then(|_| file.rewind()).and_then(|_| file.write_all(info.as_bytes())).map_err(io_err)?;
        Ok(FileLock { _file: file })
    }
}

/// What the lock guards, for messages: `.gate.lock` is "the gate lock".
fn lock_name(path: &Path) -> String {
    let file = path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    let name = file.trim_start_matches('.').trim_end_matches("lock").trim_end_matches('.');
    if name.is_empty() { "run".into() } else { name.to_string() }
}

/// The holder's description. The holder writes it just after taking the lock, so a process
/// that meets the lock in that instant may read nothing, or the line of a holder that has
/// since exited: it reads again for a moment until the line names a live process.
fn holder_of(path: &Path) -> String {
    let read = || std::fs::read_to_string(path).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty());
    let deadline = Instant::now() + Duration::from_millis(500);
    loop {
        let text = read();
        // Signal 0 only asks whether the process exists (EPERM: it does, as another user).
        let live = text.as_deref().and_then(holder_pid).is_some_and(|pid| {
            matches!(
                nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
                Ok(()) | Err(nix::errno::Errno::EPERM)
            )
        });
        if live || Instant::now() >= deadline {
            return text.unwrap_or_else(|| "holder unknown".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The pid in a holder line (`pid 4242, hcbench gate, since ...`).
fn holder_pid(text: &str) -> Option<i32> {
    text.strip_prefix("pid ")?.split(',').next()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scratch_folder_is_swept_once_its_owner_is_killed_and_never_before() {
        use std::io::BufRead;
        let tmp = tempfile::tempdir().unwrap();
        let live = ScratchDir::new_in(tmp.path(), "hcbench-t-").unwrap();
        assert!(live.path().join(OWNER).is_file());
        // Another process's folder, locked as ScratchDir locks it (flock), then that process
        // killed with SIGKILL: no code of its own runs to remove it.
        let killed = tmp.path().join("hcbench-t-killed");
        let script = format!(
            "import fcntl, os, sys, time\nos.makedirs({0:?} + '/inner')\nf = open({0:?} + '/.owner', 'w')\n\
             fcntl.flock(f, fcntl.LOCK_EX)\nprint('locked', flush=True)\ntime.sleep(300)\n",
            killed.to_str().unwrap()
        );
        let mut child = std::process::Command::new("python3")
            .args(["-c", &script])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert_eq!(line, "locked\n");
        // Left alone: an older hcbench's folder (no .owner), another prefix's, a link.
        let old = tmp.path().join("hcbench-t-old");
        std::fs::create_dir(&old).unwrap();
        let other = tmp.path().join("other-t-free");
        std::fs::create_dir(&other).unwrap();
        std::fs::write(other.join(OWNER), "").unwrap();
        std::os::unix::fs::symlink(&other, tmp.path().join("hcbench-t-link")).unwrap();

        sweep_abandoned(tmp.path(), "hcbench-t-");
        assert!(killed.join("inner").is_dir(), "its owner is alive: kept");
        child.kill().unwrap();
        child.wait().unwrap();
        sweep_abandoned(tmp.path(), "hcbench-t-");
        assert!(!killed.exists(), "its owner was killed: removed");
        assert!(live.path().join(OWNER).is_file() && old.is_dir() && other.join(OWNER).is_file());
        assert!(tmp.path().join("hcbench-t-link").symlink_metadata().is_ok());
        let path = live.path().to_path_buf();
        drop(live);
        assert!(!path.exists(), "a dropped scratch folder is removed");
    }

    #[test]
    fn a_second_holder_fails_clearly_or_waits() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ws/.gate.lock");
        let first = FileLock::acquire(&path, "gate", Duration::ZERO, |_| {}).unwrap();
        let e = FileLock::acquire(&path, "record", Duration::from_millis(200), |_| {}).unwrap_err().to_string();
        assert!(e.contains(&format!("pid {}, hcbench gate", std::process::id())), "{e}");
        assert!(e.contains("--wait"), "{e}");
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            drop(first);
        });
        let mut waited = false;
        FileLock::acquire(&path, "record", Duration::from_secs(20), |_| waited = true).unwrap();
        assert!(waited, "the caller is told that it waits");
        releaser.join().unwrap();
        assert!(std::fs::read_to_string(&path).unwrap().contains("hcbench record"));
    }
}
