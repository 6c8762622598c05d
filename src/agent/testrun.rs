//! hcbench's controlled test runner: writing it out, running it, and judging what it wrote.
//!
//! A test command that exits 0 proves nothing: code under test can exit 0 itself, at import,
//! before a single test ran. So for a case with `tests.runner`, hcbench runs the tests through
//! a Python script it ships (`src/runner/unittest_runner.py`, embedded in the binary) and
//! judges the per-test results that script writes, not the exit code alone.
//!
//! Every run gets a private folder outside the workspace. In the cell's private folder when
//! the cell has a sandbox of its own (`sandbox::CellSandbox`, which binds `bin/` read-only and
//! `runs/` writable), the run's folder is fresh, made after every earlier command of the cell
//! ended, so nothing the agent ran can have written to it, and removed afterwards. Else it is
//! one of the process's run folders in memory (tmpfs, `runner_base`), emptied after each run
//! (`RunnerHome` says why that is as safe there), bound for this command alone. The script
//! is in `bin/`. hcbench puts a random nonce file in the run's folder; the runner reads and
//! removes it before importing any test module and copies the nonce into its results, so a
//! results file written by the code under test does not carry it. The results are judged by
//! [`judge`], a plain function: tests passed iff the command exited 0, the results are
//! complete, carry the nonce, report no tampering, every test the case requires is there and
//! passed, and every other test that ran did not fail (at least one ran).
//!
//! The limit, written down in docs/security.md: the runner shares its process with the code
//! under test, so code written against this runner (reading the nonce out of the runner's
//! memory, patching and restoring it unseen) can still forge a result. The sandbox keeps the
//! results, the verifier and the benchmark out of reach of everything outside that process.

use std::collections::BTreeMap;
use std::io::{self, Write as _};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::bench::{Case, RunnerSpec};
use crate::process::{self, CommandOutcome, CommandSpec, DropLater};
use crate::sandbox::{Mount, Sandbox};
use crate::trace::event::RunnerReport;
use crate::util::Stamp;

/// The unittest runner, as shipped in the binary.
pub const UNITTEST_RUNNER: &str = include_str!("../runner/unittest_runner.py");

/// The results format the runner writes (`schema` in its JSON).
const RESULTS_SCHEMA: u32 = 1;

/// Names a problem lists before "and N more".
const NAMES_SHOWN: usize = 3;

/// What the runner wrote: `results.json` in the run's folder.
#[derive(Debug, Clone, Deserialize)]
pub struct RunnerResults {
    pub schema: u32,
    #[serde(default)]
    pub nonce: String,
    #[serde(default)]
    pub tests: Vec<TestEntry>,
    #[serde(default)]
    pub tampered: Vec<String>,
    #[serde(default)]
    pub complete: bool,
}

#[derive(Debug, Clone, Deserialize)]
pub struct TestEntry {
    pub id: String,
    pub outcome: String,
}

/// Why there are no results to judge.
#[derive(Debug, Clone, PartialEq)]
pub enum ResultsError {
    /// No results file: the process ended before the runner's last line.
    Missing,
    /// A file that is not the runner's JSON.
    Unreadable(String),
}

/// A prepared run: its private folder, the script it runs and where its results go.
struct Prepared {
    /// The run's own folder, holding the nonce and, once the runner ended, its results.
    folder: RunFolder,
    /// The folder of the script.
    bin: PathBuf,
    /// The script's file name in `bin`.
    script: &'static str,
    nonce: String,
    /// What the command must bind to reach `bin` and the run's folder: nothing in a cell's
    /// sandbox, which binds the cell's private folder that both are in.
    mounts: Vec<Mount>,
}

/// A run's folder: a fresh one in a cell's sandbox, or one of the process's ([`RunnerHome`]).
enum RunFolder {
    /// Made for this run in the cell's `runs/`, removed when dropped (while the cell goes on:
    /// `Removals`).
    Fresh(DropLater<tempfile::TempDir>),
    /// Emptied and given back to the process's folders when dropped.
    Reused(Emptied),
}

impl RunFolder {
    fn path(&self) -> &Path {
        match self {
            RunFolder::Fresh(dir) => dir.path(),
            RunFolder::Reused(folder) => &folder.dir().path,
        }
    }

    /// Creates the new file `name` in the folder, never through a name already there
    /// (`O_EXCL` follows no symlink): through the folder held open when it is one of the
    /// process's, so the folder's path is not looked up again.
    fn create(&self, name: &str) -> io::Result<std::fs::File> {
        match self {
            RunFolder::Fresh(dir) => {
                std::fs::OpenOptions::new().write(true).create_new(true).open(dir.path().join(name))
            }
            RunFolder::Reused(folder) => {
                use rustix::fs::{Mode, OFlags};
                let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC;
                Ok(rustix::fs::openat(&folder.dir().fd, name, flags, Mode::from_raw_mode(0o666))?.into())
            }
        }
    }

    /// Opens the file `name` in the folder to read it, as `File::open` would (following a
    /// symlink): through the folder held open when it is one of the process's.
    fn open(&self, name: &str) -> io::Result<std::fs::File> {
        match self {
            RunFolder::Fresh(dir) => std::fs::File::open(dir.path().join(name)),
            RunFolder::Reused(folder) => {
                use rustix::fs::{Mode, OFlags};
                let flags = OFlags::RDONLY | OFlags::CLOEXEC;
                Ok(rustix::fs::openat(&folder.dir().fd, name, flags, Mode::empty())?.into())
            }
        }
    }
}

impl Prepared {
    /// A folder for one run, with a nonce in it, and `text` as the script: in the cell's
    /// private folder when `sandbox` is a cell's (the script is written once per cell, the
    /// run's folder is made now), else in the process's folder ([`RunnerHome`]).
    fn new(sandbox: &Sandbox, script: &'static str, text: &str) -> io::Result<Prepared> {
        let (folder, bin, mounts) = match sandbox.cell() {
            Some(cell) => {
                let bin = cell.bin();
                if !bin.join(script).exists() {
                    std::fs::write(bin.join(script), text)?;
                }
                let dir = tempfile::Builder::new().prefix("run-").tempdir_in(cell.runs())?;
                (RunFolder::Fresh(DropLater::new(dir)), bin, Vec::new())
            }
            None => {
                let (bin, folder) = RunnerHome::take(script, text)?;
                let mounts = vec![Mount::read_only(&bin), Mount::writable(&folder.dir().path)];
                (RunFolder::Reused(folder), bin, mounts)
            }
        };
        let nonce = nonce();
        // A new file: the folder is empty unless something put an entry in it since it was
        // made or emptied.
        folder.create("nonce")?.write_all(nonce.as_bytes())?;
        Ok(Prepared { folder, bin, script, nonce, mounts })
    }

    fn script_path(&self) -> String {
        self.bin.join(self.script).to_string_lossy().into_owned()
    }

    fn results_dir(&self) -> &Path {
        self.folder.path()
    }

    fn results_file(&self) -> PathBuf {
        self.results_dir().join("results.json")
    }

    fn read(&self) -> Result<RunnerResults, ResultsError> {
        read_results(self.folder.open("results.json"))
    }
}

/// Where the runs outside a cell's sandbox (`--sandbox none`, or bubblewrap started per
/// command) keep their scripts and results: one folder in memory ([`runner_base`]) for the
/// process's life, removed when the process exits, with `bin/` (the scripts) and `runs/N/`,
/// a run's folder, emptied after its run and reused by the next.
///
/// Why not a fresh folder per run, as in a cell's sandbox: making `bin/`, writing the script
/// and removing the folder cost about 0.35 ms of the cell's time per run, and the removal of a
/// folder that had files waits on ext4's journal. A Python loop doing a run's file operations
/// here (2026-11-25, loaded machine): 9-10 ms a run with a fresh folder holding `bin/` and
/// `results/`, 3.6 ms with one fresh folder, 0.13-0.19 ms in a kept folder emptied with
/// unlinks.
///
/// Why that is as safe: outside a cell's sandbox, either nothing isolates the agent's commands
/// (`--sandbox none`, whose reports say that its verdicts carry no protection against forged
/// results), or each command has a sandbox of its own that binds only its own mounts, so no
/// command of the agent can reach this folder, and a command of the runner binds only its own
/// run's folder writable. In a cell's sandbox, where `runs/` is writable by every command of
/// the cell, each run keeps a fresh folder. Either way a script is checked against the
/// binary's before every run (and written again when it differs or was removed: here by its
/// stamp once it has settled, `check_script`), and the nonce is new.
struct RunnerHome {
    /// The process's folder.
    dir: PathBuf,
    /// Each script's file as it was when last found to hold the binary's text.
    checked: Vec<(&'static str, Stamp)>,
    /// Run folders emptied and ready for another run.
    free: Vec<RunDir>,
    /// Run folders made so far (the next one's name).
    made: usize,
}

/// The process's [`RunnerHome`], made by the first run that needs it.
static RUNNER_HOME: std::sync::Mutex<Option<RunnerHome>> = std::sync::Mutex::new(None);

/// The process's folder, for its removal at exit (read there without taking the lock).
static RUNNER_HOME_DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

impl RunnerHome {
    /// The process's scripts folder, with `script` holding `text`, and a run's folder, empty.
    fn take(script: &'static str, text: &str) -> io::Result<(PathBuf, Emptied)> {
        let mut home = RUNNER_HOME.lock().unwrap_or_else(|p| p.into_inner());
        if home.is_none() {
            *home = Some(RunnerHome::make()?);
        }
        let (bin, folder) = home.as_mut().expect("made above").take_folder(script, text)?;
        Ok((bin, Emptied(Some(folder))))
    }

    /// [`RunnerHome::take`] on this home.
    fn take_folder(&mut self, script: &'static str, text: &str) -> io::Result<(PathBuf, RunDir)> {
        let bin = self.dir.join("bin");
        let known = self.checked.iter().position(|(s, _)| *s == script);
        let stamp = check_script(&bin, script, text, known.map(|i| self.checked[i].1))?;
        match known {
            Some(i) => self.checked[i].1 = stamp,
            None => self.checked.push((script, stamp)),
        }
        let folder = match self.free.pop() {
            Some(folder) => folder,
            None => {
                let path = self.dir.join("runs").join(self.made.to_string());
                // `create_dir_all`: the whole home may have been removed since (a clean-up of
                // the temp folder during the process's life).
                std::fs::create_dir_all(&path)?;
                use rustix::fs::{Mode, OFlags};
                let fd = rustix::fs::open(&path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
                self.made += 1;
                RunDir { path, fd }
            }
        };
        Ok((bin, folder))
    }

    fn make() -> io::Result<RunnerHome> {
        // Removed at exit; one a killed process left is swept by a later one (lock::ScratchDir).
        let dir = crate::lock::ScratchDir::new_under(&runner_base(), "hcbench-runner-")?.keep();
        if RUNNER_HOME_DIR.set(dir.clone()).is_ok() {
            // SAFETY: atexit only records a function pointer; `remove_at_exit` catches every
            // panic, so none unwinds into the C library.
            unsafe { nix::libc::atexit(remove_at_exit) };
        }
        Ok(RunnerHome { dir, checked: Vec::new(), free: Vec::new(), made: 0 })
    }
}

/// The folder the process's [`RunnerHome`] is made in: the temp folder when it is in memory
/// (tmpfs), else the first of `$XDG_RUNTIME_DIR` and `/dev/shm` that is a tmpfs this user can
/// write, else the temp folder on disk anyway.
///
/// Why in memory: every run creates its nonce file there and, once judged, unlinks it and the
/// runner's results. On a disk file system each of those is a journalled metadata change: on
/// ext4 (this machine's /tmp, as on CI runners) the nonce's `open(O_CREAT | O_EXCL)` and the
/// emptying took about 0.29 ms of a small cell's harness (perf over 128 small cells,
/// 2026-11-25), on tmpfs a few microseconds. The files are a few hundred bytes and live for one
/// run; the sandboxes bind the run's folder wherever it is, so nothing else changes.
fn runner_base() -> PathBuf {
    let in_memory = |dir: &Path| {
        is_tmpfs(dir) && rustix::fs::access(dir, rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK).is_ok()
    };
    let tmp = std::env::temp_dir();
    if in_memory(&tmp) {
        return tmp;
    }
    std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .into_iter()
        .chain([PathBuf::from("/dev/shm")])
        .find(|dir| dir.is_absolute() && in_memory(dir))
        .unwrap_or(tmp)
}

/// True when `dir` is on a tmpfs (`statfs(2)`'s `f_type`, linux/magic.h's `TMPFS_MAGIC`).
fn is_tmpfs(dir: &Path) -> bool {
    // The field's type differs between architectures (i64 here, u32 on some).
    #[allow(clippy::unnecessary_cast)]
    rustix::fs::statfs(dir).is_ok_and(|fs| fs.f_type as i64 == 0x0102_1994)
}

/// Writes `script` in `bin` again when it is not `text` (missing, or changed since the last
/// run), through a temporary file renamed over it, so no runner reads half a script. Returns
/// the file's stamp as found to hold `text`.
///
/// A file whose stamp is `known` (the one this returned for it before) and settled
/// ([`Stamp::settled`]) is the same file with the same bytes, and is not read again: one
/// `statx` instead of an open, a read and a close, before every run.
fn check_script(bin: &Path, script: &str, text: &str, known: Option<Stamp>) -> io::Result<Stamp> {
    let path = bin.join(script);
    if let Ok(meta) = std::fs::symlink_metadata(&path)
        && meta.is_file()
    {
        let stamp = Stamp::of(&meta);
        if known == Some(stamp) && stamp.settled(std::time::SystemTime::now()) {
            return Ok(stamp);
        }
        if std::fs::read(&path).is_ok_and(|b| b == text.as_bytes()) {
            return Ok(stamp);
        }
    }
    std::fs::create_dir_all(bin)?;
    let tmp = bin.join(format!(".{script}.tmp"));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, &path)?;
    Ok(Stamp::of(&std::fs::symlink_metadata(&path)?))
}

/// Removes the process's [`RunnerHome`] when the process exits (`exit(3)`: the end of `main`,
/// `std::process::exit`, a test binary's end; not a signal's).
extern "C" fn remove_at_exit() {
    let _ = std::panic::catch_unwind(|| {
        if let Some(dir) = RUNNER_HOME_DIR.get() {
            let _ = std::fs::remove_dir_all(dir);
        }
    });
}

/// A run's folder of the process's [`RunnerHome`], to empty, then give back for the next run,
/// when dropped; when it cannot be emptied, it is removed whole and the next run makes
/// another.
///
/// Emptied here, on the cell's task: a listing and one or two unlinks of files nothing
/// synced (the runner does not fsync its results: they are read once, by this process, right
/// after the run, so a crash of the machine loses the cell whatever was synced). It used to be
/// handed to the blocking pool, when the runner fsynced its results and unlinking them waited on
/// the journal's commit; the hop itself cost more than the emptying now does (2026-11-25, perf
/// over an oracle matrix: about 40 us of the cell's time for the hand-over and 90 us of the
/// pool's CPU per run, against 15-25 us inline).
///
/// None once dropped (the folder is moved back to the home's free ones).
struct Emptied(Option<RunDir>);

impl Emptied {
    fn dir(&self) -> &RunDir {
        self.0.as_ref().expect("taken only when dropped")
    }
}

impl Drop for Emptied {
    fn drop(&mut self) {
        let Some(dir) = self.0.take() else { return };
        if empty_folder(&dir.fd).is_ok() {
            if let Some(home) = RUNNER_HOME.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
                home.free.push(dir);
            }
        } else if let Err(e) = std::fs::remove_dir_all(&dir.path)
            && e.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!("cannot remove {}: {e}", dir.path.display());
        }
    }
}

/// A run's folder of the process's [`RunnerHome`], held open for the process's life: its
/// nonce is created and its files are listed and unlinked through `fd`, which spares each run
/// an `open` and a `close` of the folder and the lookups of its path (`empty_folder`).
struct RunDir {
    path: PathBuf,
    fd: OwnedFd,
}

/// Removes the files a run left in the folder open as `folder` (its results, the runner's
/// temporary file, a nonce the runner never read); Err when something else is there (a
/// folder), which [`Emptied`] then removes whole.
///
/// The listing is read with `getdents64` from the start of the open folder (`lseek` back to
/// it: the last emptying read it to its end) into a buffer on the stack, and each name is
/// unlinked relative to the folder.
fn empty_folder(folder: &OwnedFd) -> io::Result<()> {
    use rustix::fs::{AtFlags, RawDir, SeekFrom};
    rustix::fs::seek(folder, SeekFrom::Start(0))?;
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 2048];
    let mut entries = RawDir::new(folder, &mut buf);
    while let Some(entry) = entries.next() {
        let entry = entry?;
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        // Without `AT_REMOVEDIR`, a folder is not removed: `unlinkat` fails with EISDIR.
        rustix::fs::unlinkat(folder, name, AtFlags::empty())?;
    }
    Ok(())
}

/// 128 random bits from the kernel (`getrandom(2)`, one system call), in hex; fastrand's
/// generator if the kernel has none to give.
fn nonce() -> String {
    let mut bytes = [0u8; 16];
    let got = rustix::rand::getrandom(&mut bytes, rustix::rand::GetRandomFlags::empty());
    if got.map_or(true, |n| n < bytes.len()) {
        bytes.iter_mut().for_each(|b| *b = fastrand::u8(..));
    }
    crate::util::hex(&bytes)
}

pub const VERIFIER_WRAPPER: &str = include_str!("../runner/verifier_wrapper.py");

/// A Python verifier (`[python3, SCRIPT.py, ...]`) run through hcbench's wrapper
/// (`src/runner/verifier_wrapper.py`), which writes this run's nonce to a done file only when
/// the script itself ended with status 0. Code under test that ends the verifier's process
/// early (`os._exit(0)` at import) leaves no done file, so exit 0 alone does not pass. Other
/// verifier commands run as they are.
pub struct VerifierWrapper {
    prepared: Prepared,
    /// The wrapped command line.
    pub argv: Vec<String>,
}

impl VerifierWrapper {
    /// The wrapper for `argv` when it runs a Python script, else None.
    pub fn for_argv(argv: &[String], sandbox: &Sandbox) -> io::Result<Option<VerifierWrapper>> {
        let python = argv.first().is_some_and(|p| p == "python3" || p == "python");
        if !python || !argv.get(1).is_some_and(|a| a.ends_with(".py")) {
            return Ok(None);
        }
        let prepared = Prepared::new(sandbox, "verifier_wrapper.py", VERIFIER_WRAPPER)?;
        let s = |p: PathBuf| p.to_string_lossy().into_owned();
        let mut wrapped = vec![
            argv[0].clone(),
            "-s".into(),
            "-B".into(),
            prepared.script_path(),
            "--done".into(),
            s(prepared.results_dir().join("done")),
            "--nonce-file".into(),
            s(prepared.results_dir().join("nonce")),
            "--".into(),
        ];
        wrapped.extend(argv[1..].iter().cloned());
        Ok(Some(VerifierWrapper { prepared, argv: wrapped }))
    }

    /// What the verifier must bind besides its own mounts: the wrapper's folder (read-only)
    /// and its done folder (writable).
    pub fn mounts(&self) -> Vec<Mount> {
        self.prepared.mounts.clone()
    }

    /// Whether the script finished with status 0: the done file holds this run's nonce.
    pub fn finished(&self) -> bool {
        let done = self.prepared.folder.open("done").and_then(read_small);
        done.is_ok_and(|d| d == self.prepared.nonce.as_bytes())
    }
}

/// The bytes of a file a run wrote (its results, its done file), opened by
/// [`RunFolder::open`]: reads until the end, then the close. Not `File::read_to_end`, whose
/// `statx` for the size is a system call more per file, for files of a few KiB at most.
fn read_small(mut file: std::fs::File) -> io::Result<Vec<u8>> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 8 << 10];
    loop {
        match file.read(&mut chunk) {
            Ok(0) => return Ok(bytes),
            Ok(n) => bytes.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Reads the results file `opened`; a missing file is [`ResultsError::Missing`].
fn read_results(opened: io::Result<std::fs::File>) -> Result<RunnerResults, ResultsError> {
    let bytes = match opened.and_then(read_small) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(ResultsError::Missing),
        Err(e) => return Err(ResultsError::Unreadable(e.to_string())),
    };
    serde_json::from_slice(&bytes).map_err(|e| ResultsError::Unreadable(e.to_string()))
}

/// The runner's command line: `-s` keeps the user's site folder (HOME, writable by the agent's
/// commands without a sandbox) from being imported, `-B` writes no bytecode. Not `-I`: its
/// `-E` would drop PYTHONHASHSEED=0 and make set order differ from run to run; the
/// environment is hcbench's allowlist anyway, and a script's folder (ours, read-only), not the
/// working directory, is what Python puts first on sys.path, so a `sitecustomize.py` in the
/// workspace is never imported.
fn argv(spec: &RunnerSpec, prepared: &Prepared) -> Vec<String> {
    let s = |p: PathBuf| p.to_string_lossy().into_owned();
    vec![
        "python3".into(),
        "-s".into(),
        "-B".into(),
        prepared.script_path(),
        "--start-dir".into(),
        spec.start_dir.clone(),
        "--results".into(),
        s(prepared.results_file()),
        "--nonce-file".into(),
        s(prepared.results_dir().join("nonce")),
    ]
}

/// Runs the case's tests through the runner in `workspace` and judges the results. Err when
/// the runner cannot be started (a harness problem, not the agent's).
pub async fn run(
    case: &Case,
    spec: &RunnerSpec,
    workspace: &Path,
    sandbox: &Sandbox,
) -> Result<(CommandOutcome, RunnerReport), String> {
    let prepared = Prepared::new(sandbox, "unittest_runner.py", UNITTEST_RUNNER)
        .map_err(|e| format!("cannot prepare hcbench's test runner: {e}"))?;
    let mut cmd = CommandSpec {
        limits: case.limits,
        ..CommandSpec::new(argv(spec, &prepared), workspace, case.timeout, sandbox)
    };
    cmd.mounts.extend(prepared.mounts.iter().cloned());
    let out = process::run(&cmd).await.map_err(|e| format!("cannot start hcbench's test runner (python3): {e}"))?;
    let report = judge(spec, &out, prepared.read(), &prepared.nonce);
    Ok((out, report))
}

/// Judges a run of the runner: see the module doc for the rule. The report's `problem` is
/// empty exactly when the tests passed.
pub fn judge(
    spec: &RunnerSpec,
    out: &CommandOutcome,
    results: Result<RunnerResults, ResultsError>,
    nonce: &str,
) -> RunnerReport {
    let mut report = RunnerReport::default();
    let results = match results {
        Err(ResultsError::Missing) => {
            report.problem = if out.timed_out {
                "the test runner wrote no results (it timed out)".into()
            } else {
                "the test runner wrote no results (the code under test exited or crashed before the tests finished)"
                    .into()
            };
            return report;
        }
        Err(ResultsError::Unreadable(e)) => {
            report.problem = format!("the test runner's results are unreadable ({e})");
            return report;
        }
        Ok(r) => r,
    };
    if results.schema != RESULTS_SCHEMA || results.nonce != nonce {
        report.problem = "the results file was not written by this run's test runner".into();
        return report;
    }
    if !results.complete {
        report.problem = "the test runner's results are incomplete".into();
        return report;
    }
    report.results = true;
    let RunnerResults { tests, tampered, .. } = results;
    let outcomes: BTreeMap<&str, &str> = tests.iter().map(|t| (t.id.as_str(), t.outcome.as_str())).collect();
    for outcome in outcomes.values() {
        match report.counts.get_mut(*outcome) {
            Some(n) => *n += 1,
            None => {
                report.counts.insert(outcome.to_string(), 1);
            }
        }
    }
    report.tampered = tampered;
    for id in spec.required() {
        match outcomes.get(id.as_str()) {
            None => report.missing.push(id.clone()),
            Some(&"passed") => {}
            Some(other) => report.not_passed.push(format!("{id} ({other})")),
        }
    }
    // Beyond the required ones, unittest's rule: skips and expected failures are fine,
    // anything that failed is not.
    let failing: Vec<String> = outcomes
        .iter()
        .filter(|(_, o)| matches!(**o, "failed" | "error" | "unexpected_success" | "not_run"))
        .map(|(id, o)| format!("{id} ({o})"))
        .collect();
    let ran = outcomes.values().filter(|o| **o != "not_run" && **o != "skipped").count();
    report.problem = if !report.tampered.is_empty() {
        format!("the test runner was tampered with: {}", names(&report.tampered))
    } else if !report.missing.is_empty() {
        format!("{} required test(s) did not run: {}", report.missing.len(), names(&report.missing))
    } else if !report.not_passed.is_empty() {
        format!("{} required test(s) did not pass: {}", report.not_passed.len(), names(&report.not_passed))
    } else if !failing.is_empty() {
        format!("{} test(s) did not pass: {}", failing.len(), names(&failing))
    } else if ran == 0 {
        format!("no test ran (discovery in {}/ found none)", spec.start_dir)
    } else if out.timed_out {
        "the test runner timed out".into()
    } else if out.exit_code != Some(0) {
        format!("the test runner exited with {}", out.exit_code.map_or("a signal".into(), |c| format!("code {c}")))
    } else {
        String::new()
    };
    report
}

/// At most [`NAMES_SHOWN`] names, then how many more.
fn names(list: &[String]) -> String {
    let shown = list.iter().take(NAMES_SHOWN).cloned().collect::<Vec<_>>().join(", ");
    match list.len().saturating_sub(NAMES_SHOWN) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::bench::{RunnerKind, TestSpec};

    fn spec(f2p: &[&str], p2p: &[&str]) -> RunnerSpec {
        RunnerSpec {
            runner: RunnerKind::Unittest,
            start_dir: "tests".into(),
            fail_to_pass: f2p.iter().map(|s| s.to_string()).collect(),
            pass_to_pass: p2p.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn exited(code: i32) -> CommandOutcome {
        CommandOutcome {
            exit_code: Some(code),
            timed_out: false,
            stdout: Vec::new(),
            stderr: Vec::new(),
            truncated: false,
            duration: Duration::from_millis(10),
        }
    }

    fn results(tests: &[(&str, &str)]) -> Result<RunnerResults, ResultsError> {
        let json = serde_json::json!({
            "schema": 1,
            "nonce": "n0",
            "tests": tests.iter().map(|(id, o)| serde_json::json!({"id": id, "outcome": o})).collect::<Vec<_>>(),
            "tampered": [],
            "complete": true,
        });
        Ok(serde_json::from_value(json).unwrap())
    }

    const PASSING: &[(&str, &str)] =
        &[("t.A.test_fix", "passed"), ("t.A.test_old", "passed"), ("t.A.test_skip", "skipped")];

    #[test]
    fn all_required_tests_passing_with_exit_zero_pass() {
        let r = judge(&spec(&["t.A.test_fix"], &["t.A.test_old"]), &exited(0), results(PASSING), "n0");
        assert_eq!(r.problem, "");
        assert!(r.results);
        assert_eq!(r.counts, [("passed".to_string(), 2), ("skipped".to_string(), 1)].into());
        // Without lists, every test that ran must pass: a skipped one is fine.
        assert_eq!(judge(&spec(&[], &[]), &exited(0), results(PASSING), "n0").problem, "");
    }

    #[test]
    fn no_results_file_fails_and_says_the_code_exited_early() {
        let r = judge(&spec(&["t.A.test_fix"], &[]), &exited(0), Err(ResultsError::Missing), "n0");
        assert_eq!(
            r.problem,
            "the test runner wrote no results (the code under test exited or crashed before the tests finished)"
        );
        assert!(!r.results);
        let bad = judge(&spec(&[], &[]), &exited(0), Err(ResultsError::Unreadable("EOF".into())), "n0");
        assert_eq!(bad.problem, "the test runner's results are unreadable (EOF)");
    }

    #[test]
    fn incomplete_or_foreign_results_fail() {
        let mut r = results(PASSING).unwrap();
        r.complete = false;
        assert_eq!(judge(&spec(&[], &[]), &exited(0), Ok(r), "n0").problem, "the test runner's results are incomplete");
        // A results file forged by the code under test does not know this run's nonce.
        let forged = judge(&spec(&[], &[]), &exited(0), results(PASSING), "another");
        assert_eq!(forged.problem, "the results file was not written by this run's test runner");
    }

    #[test]
    fn a_tampered_runner_fails_even_when_everything_passed() {
        let mut r = results(PASSING).unwrap();
        r.tampered = vec!["TestCase.run".into()];
        let report = judge(&spec(&["t.A.test_fix"], &[]), &exited(0), Ok(r), "n0");
        assert_eq!(report.problem, "the test runner was tampered with: TestCase.run");
        assert_eq!(report.tampered, ["TestCase.run"]);
    }

    #[test]
    fn a_required_test_skipped_or_missing_fails_by_name() {
        let tests = [("t.A.test_fix", "skipped"), ("t.A.test_old", "passed")];
        let r = judge(&spec(&["t.A.test_fix"], &["t.A.test_old"]), &exited(0), results(&tests), "n0");
        assert_eq!(r.problem, "1 required test(s) did not pass: t.A.test_fix (skipped)");
        assert_eq!(r.not_passed, ["t.A.test_fix (skipped)"]);
        let r = judge(&spec(&["t.A.test_fix"], &["t.A.gone"]), &exited(0), results(PASSING), "n0");
        assert_eq!(r.problem, "1 required test(s) did not run: t.A.gone");
        assert_eq!(r.missing, ["t.A.gone"]);
    }

    #[test]
    fn failing_tests_no_tests_or_a_bad_exit_fail() {
        let tests = [("t.A.test_fix", "passed"), ("t.B.test_x", "failed"), ("t.B.test_y", "error")];
        let r = judge(&spec(&["t.A.test_fix"], &[]), &exited(1), results(&tests), "n0");
        assert_eq!(r.problem, "2 test(s) did not pass: t.B.test_x (failed), t.B.test_y (error)");
        let none = judge(&spec(&[], &[]), &exited(0), results(&[("t.A.test_skip", "skipped")]), "n0");
        assert_eq!(none.problem, "no test ran (discovery in tests/ found none)");
        let exit = judge(&spec(&[], &[]), &exited(3), results(PASSING), "n0");
        assert_eq!(exit.problem, "the test runner exited with code 3");
    }

    #[test]
    fn long_lists_of_names_are_cut() {
        let list: Vec<String> = (1..=7).map(|i| format!("t{i}")).collect();
        assert_eq!(names(&list), "t1, t2, t3 and 4 more");
    }

    /// A home's run folders are emptied and reused, and its script is written again when it
    /// was changed or removed, or when the whole home was.
    #[test]
    fn run_folders_are_reused_and_the_script_is_restored() {
        let tmp = tempfile::tempdir().unwrap();
        let mut home = RunnerHome { dir: tmp.path().join("home"), checked: Vec::new(), free: Vec::new(), made: 0 };
        let (bin, first) = home.take_folder("runner.py", "print(1)\n").unwrap();
        let (_, second) = home.take_folder("runner.py", "print(1)\n").unwrap();
        assert_ne!(first.path, second.path, "two runs at once get two folders");
        assert_eq!(std::fs::read_to_string(bin.join("runner.py")).unwrap(), "print(1)\n");

        for round in 0..2 {
            std::fs::write(first.path.join("results.json"), "{}").unwrap();
            std::fs::write(first.path.join("nonce"), "n0").unwrap();
            empty_folder(&first.fd).unwrap();
            assert_eq!(std::fs::read_dir(&first.path).unwrap().count(), 0, "round {round}");
        }
        let first_path = first.path.clone();
        home.free.push(first);
        std::fs::write(bin.join("runner.py"), "forged\n").unwrap();
        let (_, again) = home.take_folder("runner.py", "print(1)\n").unwrap();
        assert_eq!(again.path, first_path);
        assert_eq!(std::fs::read_to_string(bin.join("runner.py")).unwrap(), "print(1)\n");

        std::fs::create_dir(again.path.join("left")).unwrap();
        assert!(empty_folder(&again.fd).is_err(), "a folder left in a run's folder is not emptied away");

        std::fs::remove_dir_all(&home.dir).unwrap();
        let (_, made) = home.take_folder("runner.py", "print(1)\n").unwrap();
        assert!(made.path.is_dir());
        assert_eq!(std::fs::read_to_string(bin.join("runner.py")).unwrap(), "print(1)\n");
    }

    /// The process's runner folder is kept in memory when the machine has a tmpfs to keep it
    /// in (here /dev/shm), whether or not the temp folder is one.
    #[test]
    fn the_runner_home_is_in_memory_when_it_can_be() {
        let tmpfs = is_tmpfs;
        let base = runner_base();
        assert!(base.is_dir());
        if tmpfs(Path::new("/dev/shm")) && rustix::fs::access("/dev/shm", rustix::fs::Access::WRITE_OK).is_ok() {
            assert!(tmpfs(&base), "{} is not a tmpfs", base.display());
        } else {
            assert!(tmpfs(&base) || base == std::env::temp_dir(), "{}", base.display());
        }
    }

    /// The real runner on a real workspace, without a sandbox: results are written, a module
    /// exiting at import leaves none, a monkeypatched runner is reported.
    #[tokio::test]
    async fn the_real_runner_reports_outcomes_and_catches_forgeries() {
        let ws = tempfile::tempdir().unwrap();
        let root = ws.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("tests")).unwrap();
        std::fs::write(root.join("calc.py"), "def add(a, b):\n    return a - b\n").unwrap();
        std::fs::write(
            root.join("tests/test_calc.py"),
            "import unittest\nfrom calc import add\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n    def test_zero(self):\n        self.assertEqual(add(0, 0), 0)\n",
        )
        .unwrap();
        let mut case = Case::sample();
        let spec = spec(&["test_calc.T.test_add"], &["test_calc.T.test_zero"]);
        case.tests = TestSpec::Runner(spec.clone());
        let (out, report) = run(&case, &spec, &root, &Sandbox::None).await.unwrap();
        assert_eq!(out.exit_code, Some(1));
        assert_eq!(report.not_passed, ["test_calc.T.test_add (failed)"]);
        assert!(String::from_utf8_lossy(&out.stderr).contains("Ran 2 tests in"), "{}", out.combined());

        std::fs::write(root.join("calc.py"), "def add(a, b):\n    return a + b\n").unwrap();
        let (_, report) = run(&case, &spec, &root, &Sandbox::None).await.unwrap();
        assert_eq!(report.problem, "");
        assert_eq!(report.counts, [("passed".to_string(), 2)].into());

        std::fs::write(root.join("calc.py"), "import os\nos._exit(0)\n").unwrap();
        let (out, report) = run(&case, &spec, &root, &Sandbox::None).await.unwrap();
        assert_eq!(out.exit_code, Some(0), "the forgery exits 0");
        assert!(report.problem.starts_with("the test runner wrote no results"), "{}", report.problem);

        std::fs::write(
            root.join("calc.py"),
            "import unittest\nunittest.TestCase.assertEqual = lambda *a, **k: None\ndef add(a, b):\n    return 0\n",
        )
        .unwrap();
        let (_, report) = run(&case, &spec, &root, &Sandbox::None).await.unwrap();
        assert_eq!(report.tampered, ["TestCase.assertEqual"]);
    }
}
