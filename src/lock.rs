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
