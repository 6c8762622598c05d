//! Starting a command without fork: a child that shares hcbench's memory until it execs.
//!
//! std's `Command` starts a child with posix_spawn (a vfork-style clone) unless it has a
//! `pre_exec` closure, and hcbench needs one: the rlimits of [`Limits`] are set in the child
//! between its start and its exec. With a `pre_exec` std falls back to a real fork(), which
//! copies hcbench's page tables and write-protects every anonymous page of the parent, so the
//! harness then takes ~1,800-1,950 page faults a cell, spread over every part of its work (a
//! profile of an oracle matrix put fork at 16.8% of hcbench's CPU).
//!
//! [`spawn`] does what posix_spawn does, with the rlimits added: `clone(CLONE_VM |
//! CLONE_VFORK)` on a stack of its own, so nothing is copied and the calling thread is
//! suspended until the child has exec'd (or ended). Everything the child needs (paths, argv,
//! envp, pipes, signal sets) is prepared before the clone; the child itself only makes
//! async-signal-safe system calls and allocates nothing, since it shares the allocator's state
//! with a parent whose other threads go on running. An exec that fails leaves its errno in the
//! parent's memory (the child shares it) and the parent returns the io::Error std would.
//!
//! The child is then the caller's: [`Spawned::wait`] waits on a pidfd through tokio (tokio's
//! SIGCHLD handling reaps only the children it started itself), and its output pipes are
//! tokio pipes.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicI32, Ordering};

use nix::sched::{CloneFlags, clone};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, kill, pthread_sigmask};
use nix::unistd::Pid;
use tokio::io::unix::AsyncFd;
use tokio::net::unix::pipe;

use crate::sandbox::Limits;

/// The child's stack until it execs: the calls it makes are shallow (libc wrappers of system
/// calls), and 64 KiB leaves room for a libc that keeps more on its stack.
const CHILD_STACK: usize = 64 * 1024;

/// What a command needs to start, as given to [`spawn`].
pub(crate) struct Start<'a> {
    /// The program, already found in the command's PATH (`sandbox::find_program`).
    pub program: &'a Path,
    /// Its whole argv, argv[0] included.
    pub argv: &'a [std::ffi::OsString],
    /// Its whole environment, `NAME=value` each ([`env_entry`]).
    pub env: &'a [&'a CStr],
    pub cwd: &'a Path,
    /// A pipe on stdin when true; /dev/null otherwise.
    pub stdin: bool,
    pub limits: Limits,
}

/// A started child: the leader of its own process group (its pid is the group's id).
pub(crate) struct Spawned {
    pub pid: Pid,
    pub stdin: Option<pipe::Sender>,
    pub stdout: Option<pipe::Receiver>,
    pub stderr: Option<pipe::Receiver>,
    exit: Exit,
}

impl Spawned {
    /// Waits until the child ends and reaps it. Cancel-safe: dropping the future leaves the
    /// child to be waited for again (or killed and reaped when the [`Spawned`] is dropped).
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        self.exit.wait().await
    }
}

/// How the end of a child is waited for, and whether the child was reaped yet.
struct Exit {
    waiter: Waiter,
    pid: Pid,
    status: Option<ExitStatus>,
}

/// The child's pidfd, registered with tokio; or, on a kernel without pidfds (before Linux
/// 5.4: `pidfd_open` came in 5.3, `waitid` on one in 5.4), a thread of tokio's blocking pool
/// that waits for the pid from the start and reaps it whenever it ends.
enum Waiter {
    Pidfd(Option<AsyncFd<OwnedFd>>),
    Thread(tokio::task::JoinHandle<io::Result<ExitStatus>>),
}

impl Exit {
    fn new(pid: Pid) -> io::Result<Exit> {
        let waiter = if pidfds_work() { Waiter::Pidfd(Some(pidfd_of(pid)?)) } else { Waiter::thread(pid) };
        Ok(Exit { waiter, pid, status: None })
    }

    async fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        let status = match &mut self.waiter {
            Waiter::Pidfd(pidfd) => {
                let pidfd = pidfd.as_ref().expect("kept until the child is reaped");
                loop {
                    let mut ready = pidfd.readable().await?;
                    match reap(pidfd.get_ref(), libc::WNOHANG)? {
                        Some(status) => break status,
                        None => ready.clear_ready(),
                    }
                }
            }
            // Awaited through a reference: a dropped wait leaves the thread to a later one.
            Waiter::Thread(thread) => thread.await.map_err(io::Error::other)??,
        };
        self.status = Some(status);
        Ok(status)
    }
}

impl Waiter {
    fn thread(pid: Pid) -> Waiter {
        #[cfg(test)]
        tests::THREAD_WAITS.set(tests::THREAD_WAITS.get() + 1);
        Waiter::Thread(tokio::task::spawn_blocking(move || {
            let mut raw = 0;
            loop {
                // SAFETY: waitpid writes only into `raw`, which lives across the call.
                if unsafe { libc::waitpid(pid.as_raw(), &mut raw, 0) } == pid.as_raw() {
                    return Ok(ExitStatus::from_raw(raw));
                }
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }))
    }
}

impl Drop for Exit {
    /// A child that was not waited for (its run was cancelled) is killed, and reaped where
    /// waiting blocks nothing: on tokio's blocking pool, or here outside a runtime. (A waiting
    /// thread reaps it by itself.)
    fn drop(&mut self) {
        if self.status.is_some() {
            return;
        }
        let _ = kill(self.pid, Signal::SIGKILL);
        let Waiter::Pidfd(pidfd) = &mut self.waiter else { return };
        let Some(pidfd) = pidfd.take() else { return };
        let pidfd = pidfd.into_inner();
        let finish = move || drop(reap(&pidfd, 0));
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(finish)),
            Err(_) => finish(),
        }
    }
}

/// Whether this kernel has pidfds that can be waited on, asked once per process: a pidfd of
/// hcbench itself, on which `waitid` says "not a child" (ECHILD) where it knows pidfds and
/// EINVAL where it does not. Tests can force the answer (`FORCE_NO_PIDFD`).
fn pidfds_work() -> bool {
    #[cfg(test)]
    if tests::FORCE_NO_PIDFD.get() {
        return false;
    }
    static WORK: std::sync::LazyLock<bool> = std::sync::LazyLock::new(|| {
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
        let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, std::process::id() as libc::pid_t, 0) } as libc::c_int;
        if raw < 0 {
            return false;
        }
        // SAFETY: pidfd_open just returned this new descriptor, owned by nothing else.
        let own = unsafe { OwnedFd::from_raw_fd(raw) };
        matches!(reap(&own, libc::WNOHANG), Err(e) if e.raw_os_error() == Some(libc::ECHILD))
    });
    *WORK
}

/// A pidfd of the child `pid`, registered with tokio.
fn pidfd_of(pid: Pid) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid.as_raw(), 0) } as libc::c_int;
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pidfd_open just returned this new descriptor, owned by nothing else.
    let pidfd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: the AsyncFd owns the pidfd, which stays open until the AsyncFd drops or hands it
    // back (`into_inner`).
    unsafe { AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE) }.map_err(|e| e.into_parts().1)
}

/// `waitid` on a pidfd: the child's status once it ended (and it is reaped then), None while it
/// runs (with `WNOHANG` in `flags`).
fn reap(pidfd: &OwnedFd, flags: libc::c_int) -> io::Result<Option<ExitStatus>> {
    // SAFETY: siginfo_t is plain data, for which all zeroes is a valid value.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: waitid writes only into `info`, which lives across the call.
        let r =
            unsafe { libc::waitid(libc::P_PIDFD, pidfd.as_raw_fd() as libc::id_t, &mut info, libc::WEXITED | flags) };
        if r == 0 {
            break;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    // SAFETY: waitid filled `info` for a child (or left it zeroed with WNOHANG).
    let (pid, status) = unsafe { (info.si_pid(), info.si_status()) };
    if pid == 0 {
        return Ok(None);
    }
    // The wait status std would have read from waitpid.
    let raw = match info.si_code {
        libc::CLD_EXITED => (status & 0xff) << 8,
        libc::CLD_DUMPED => status | 0x80,
        _ => status,
    };
    Ok(Some(ExitStatus::from_raw(raw)))
}

/// A C string of `s`, or the error std gives for a NUL inside an argument.
fn c_string(s: &[u8]) -> io::Result<CString> {
    CString::new(s).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "nul byte found in provided data"))
}

/// An entry of a child's environment as exec takes it, `NAME=value`, or the error std gives
/// for a NUL inside.
pub(crate) fn env_entry(name: &str, value: &str) -> io::Result<CString> {
    c_string(&[name.as_bytes(), b"=", value.as_bytes()].concat())
}

/// `fd` moved above 0-2 (when hcbench itself runs with a standard stream closed, a new pipe
/// can get one of those numbers, which the child's dup2 onto 0-2 would then clobber).
fn above_stdio(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: F_DUPFD_CLOEXEC duplicates a descriptor this function owns.
    let raw = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fcntl just returned this new descriptor, owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// A pipe whose two ends close on exec and are above 0-2: (read end, write end).
fn pipe_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two new descriptors into `fds`.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 just returned these descriptors, owned by nothing else.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((above_stdio(r)?, above_stdio(w)?))
}

/// Starts `start`'s program in a process group of its own, with its limits, its environment
/// (and nothing of hcbench's), in its folder, stdout and stderr piped, stdin piped or
/// /dev/null, and no other descriptor open (not even one hcbench inherited). Errors as std's `Command::spawn` would: a program that
/// cannot be executed, a folder that cannot be entered, a limit that cannot be set.
pub(crate) fn spawn(start: &Start) -> io::Result<Spawned> {
    // Everything the child touches, made here: it must not allocate.
    let program = c_string(start.program.as_os_str().as_bytes())?;
    let cwd = c_string(start.cwd.as_os_str().as_bytes())?;
    let argv: Vec<CString> = start.argv.iter().map(|a| c_string(a.as_bytes())).collect::<io::Result<_>>()?;
    let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argv_ptrs.push(std::ptr::null());
    // A program the kernel cannot execute itself (a script without `#!`) is run by /bin/sh, as
    // execvp (which std uses) does: `/bin/sh PROGRAM ARGS...`.
    let shell = c"/bin/sh";
    let mut shell_ptrs: Vec<*const libc::c_char> = vec![shell.as_ptr(), program.as_ptr()];
    shell_ptrs.extend(argv_ptrs[1..].iter().copied());
    let mut envp_ptrs: Vec<*const libc::c_char> = start.env.iter().map(|e| e.as_ptr()).collect();
    envp_ptrs.push(std::ptr::null());
    let (stdin_read, stdin_write) = if start.stdin {
        let (r, w) = pipe_pair()?;
        (r, Some(w))
    } else {
        (above_stdio(std::fs::File::open("/dev/null")?.into())?, None)
    };
    let (stdout_read, stdout_write) = pipe_pair()?;
    let (stderr_read, stderr_write) = pipe_pair()?;
    let child_fds = [stdin_read.as_raw_fd(), stdout_write.as_raw_fd(), stderr_write.as_raw_fd()];
    let limits = start.limits;
    let last_signal = libc::SIGRTMAX();
    let mut stack = vec![0u8; CHILD_STACK];
    // The errno of the step that failed in the child; the child writes it in this memory,
    // which it shares, before its _exit, and the parent reads it once the clone returns.
    let failed = AtomicI32::new(0);

    // Signals are blocked around the clone so none is handled in the child while it still
    // runs hcbench's handlers on hcbench's memory; the child resets those handlers first.
    let old_mask = pthread_sigmask_all()?;
    let child = || -> isize {
        let fail = |errno: i32| -> isize {
            failed.store(errno.max(1), Ordering::Relaxed);
            // SAFETY: _exit ends the child at once, without running anything of the parent's.
            unsafe { libc::_exit(127) }
        };
        let errno = || io::Error::last_os_error().raw_os_error().unwrap_or(libc::EINVAL);
        // SAFETY: the child shares hcbench's memory (CLONE_VM) while the calling thread is
        // suspended (CLONE_VFORK) and hcbench's other threads run on; it allocates nothing and
        // takes no lock. Each call is a system call that POSIX lists as async-signal-safe
        // (sigaction, setpgid, setrlimit through `Limits::apply`, dup2, close_range, chdir,
        // sigprocmask, execve, _exit), on data prepared above and alive until the clone returns. Its own
        // handler table is a copy (no CLONE_SIGHAND), so resetting it leaves the parent's;
        // errno is the suspended thread's, which nothing reads before the clone returns.
        unsafe {
            for sig in 1..=last_signal {
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, std::ptr::null(), &mut old) == 0
                    && (old.sa_sigaction != libc::SIG_IGN || sig == libc::SIGPIPE)
                    && old.sa_sigaction != libc::SIG_DFL
                {
                    let mut dfl: libc::sigaction = std::mem::zeroed();
                    dfl.sa_sigaction = libc::SIG_DFL;
                    libc::sigaction(sig, &dfl, std::ptr::null_mut());
                }
            }
            if libc::setpgid(0, 0) != 0 {
                return fail(errno());
            }
            if let Err(e) = limits.apply() {
                return fail(e.raw_os_error().unwrap_or(libc::EINVAL));
            }
            for (target, fd) in child_fds.iter().enumerate() {
                if libc::dup2(*fd, target as libc::c_int) < 0 {
                    return fail(errno());
                }
            }
            // Descriptors hcbench inherited without close-on-exec (its own all have it) stay
            // hcbench's: the child gets 0-2 only. Its table is a copy (no CLONE_FILES).
            libc::syscall(libc::SYS_close_range, 3 as libc::c_uint, libc::c_uint::MAX, 0 as libc::c_uint);
            if libc::chdir(cwd.as_ptr()) != 0 {
                return fail(errno());
            }
            let empty: libc::sigset_t = std::mem::zeroed();
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            libc::execve(program.as_ptr(), argv_ptrs.as_ptr(), envp_ptrs.as_ptr());
            if errno() == libc::ENOEXEC {
                libc::execve(shell.as_ptr(), shell_ptrs.as_ptr(), envp_ptrs.as_ptr());
            }
            fail(errno())
        }
    };
    // SAFETY: see the child's closure above; the stack outlives the child's use of it (the
    // parent's thread is suspended until the child has exec'd or ended).
    let cloned = unsafe {
        clone(Box::new(child), &mut stack, CloneFlags::CLONE_VM | CloneFlags::CLONE_VFORK, Some(libc::SIGCHLD))
    };
    let _ = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&old_mask), None);
    let pid = cloned?;
    drop((stdin_read, stdout_write, stderr_write));
    let errno = failed.load(Ordering::Relaxed);
    if errno != 0 {
        // The child has _exit'ed: reap it.
        let _ = nix::sys::wait::waitpid(pid, None);
        return Err(io::Error::from_raw_os_error(errno));
    }
    let exit = match Exit::new(pid) {
        Ok(exit) => exit,
        Err(e) => {
            let _ = kill(pid, Signal::SIGKILL);
            let _ = nix::sys::wait::waitpid(pid, None);
            return Err(e);
        }
    };
    // From here on, dropping `exit` kills and reaps the child.
    Ok(Spawned {
        pid,
        stdin: stdin_write.map(pipe::Sender::from_owned_fd).transpose()?,
        stdout: Some(pipe::Receiver::from_owned_fd(stdout_read)?),
        stderr: Some(pipe::Receiver::from_owned_fd(stderr_read)?),
        exit,
    })
}

/// Blocks every signal on the calling thread; returns the mask it had.
fn pthread_sigmask_all() -> io::Result<SigSet> {
    let mut old = SigSet::empty();
    pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::all()), Some(&mut old))?;
    Ok(old)
}

#[cfg(test)]
pub(super) mod tests {
    thread_local! {
        /// Makes this thread's spawns wait as on a kernel without pidfds (a blocking waitpid).
        pub(in crate::process) static FORCE_NO_PIDFD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
        /// Children this thread started that a thread of the blocking pool waits for.
        pub(in crate::process) static THREAD_WAITS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    #[test]
    fn this_kernel_has_pidfds() {
        // The machines hcbench's tests run on have Linux 5.4 or later; the other path is
        // tested by forcing it (process::tests).
        assert!(super::pidfds_work());
    }
}
