//! Scoring: after the loop, run the case's tests and verifier in the workspace.
//!
//! Reward is 1.0 when the tests pass and every verifier check passes, else 0.0. For a case with
//! `tests.runner`, "the tests pass" is the verdict of hcbench's runner on the per-test results
//! it wrote ([`super::testrun`]); for a plain `test_command`, the exit code. Problems of the
//! harness or the benchmark (a command that cannot start, a timeout) get their own outcome
//! class so they are never counted as the agent's failure.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::paths::normalize;
use crate::bench::{Case, TestSpec};
use crate::process::{self, CommandOutcome, CommandSpec};
use crate::sandbox::{Mount, Sandbox};
use crate::trace::event::{Check, Outcome, RunnerReport};

/// What the agent did, as far as the verifier's trace assertions need it.
pub struct TraceFacts {
    pub denials: u32,
    pub steps: u32,
    /// Step of the first read of each path.
    pub first_reads: BTreeMap<String, u32>,
}

pub struct TestRun {
    pub result: Result<CommandOutcome, String>,
    /// The runner's verdict on its results, for a case with `tests.runner`.
    pub runner: Option<RunnerReport>,
}

impl TestRun {
    /// The command exited 0 in time and, with the runner, its results prove the tests passed.
    pub fn passed(&self) -> bool {
        let exited_ok = self.result.as_ref().is_ok_and(CommandOutcome::success);
        exited_ok && self.runner.as_ref().is_none_or(|r| r.problem.is_empty())
    }

    /// What the agent's `run_tests` shows: the command's output, then the runner's verdict.
    pub fn tool_text(&self) -> String {
        let mut text = match &self.result {
            Ok(out) => out.combined(),
            Err(e) => format!("{e}\n"),
        };
        if let Some(r) = &self.runner {
            if r.problem.is_empty() {
                text.push_str("hcbench: the tests passed\n");
            } else {
                text.push_str(&format!("hcbench: the tests did not pass: {}\n", r.problem));
            }
        }
        text
    }
}

pub struct VerifierRun {
    pub passed: bool,
    pub checks: Vec<Check>,
    pub metrics: BTreeMap<String, Value>,
    pub timed_out: bool,
    pub duration_ms: u64,
    /// The verifier command could not be started.
    pub error: Option<String>,
}

/// Checks and metrics a verifier run gets beyond the case's `verifier:` (a multi-session
/// case's hidden features, `super::sessions`).
pub struct Extra {
    pub checks: Vec<Check>,
    pub metrics: BTreeMap<String, Value>,
}

impl Extra {
    /// Adds these to `run`, which then passes only if they pass too.
    pub fn add_to(self, run: &mut VerifierRun) {
        run.passed &= self.checks.iter().all(|c| c.passed);
        run.checks.extend(self.checks);
        run.metrics.extend(self.metrics);
    }
}

/// Runs the case's tests in `workspace`: the judge's run (with the cell's `trace`) and the
/// agent's `run_tests` (without) go through this one function, so the agent sees what the
/// judge will run.
pub async fn run_tests(case: &Case, workspace: &Path, trace: Option<&Path>, sandbox: &Sandbox) -> TestRun {
    match &case.tests {
        TestSpec::Runner(spec) => match super::testrun::run(case, spec, workspace, sandbox).await {
            Ok((out, report)) => TestRun { result: Ok(out), runner: Some(report) },
            Err(e) => TestRun { result: Err(e), runner: None },
        },
        TestSpec::Command(argv) => {
            let argv = case.expand(argv, workspace, trace);
            let spec = command_spec(case, argv, workspace, sandbox);
            let result = process::run(&spec).await.map_err(|e| format!("cannot start `{}`: {e}", spec.argv[0]));
            TestRun { result, runner: None }
        }
    }
}

/// How the agent's commands and the tests run in `workspace`: all in the cell's supervised
/// sandbox ([`crate::sandbox::CellSandbox`]).
pub fn command_spec(case: &Case, argv: Vec<String>, workspace: &Path, sandbox: &Sandbox) -> CommandSpec {
    CommandSpec { limits: case.limits, ..CommandSpec::new(argv, workspace, case.timeout, sandbox) }
}

/// Starts the cell's supervised sandbox ahead of its first command (a cell's sandbox only).
pub fn prepare_commands(case: &Case, workspace: &Path, sandbox: &Sandbox) -> std::io::Result<()> {
    process::prepare(&command_spec(case, Vec::new(), workspace, sandbox))
}

/// Bound on the verifier's captured output per stream.
const VERIFIER_OUTPUT_LIMIT: usize = 64 * 1024;

/// A verifier folder larger than this runs in a sandbox of its own, which binds it, rather than
/// being copied for every cell.
const STAGED_VERIFIERS_MAX_BYTES: u64 = 8 << 20;

/// The verifier's inputs copied into a fresh run folder of the cell's private folder, which the
/// cell's sandbox binds: `verifiers/` (so `{benchmark_dir}` stands for the folder) and the trace
/// as it is now. Copies, never links: the code under test runs inside the verifier, and what it
/// writes must not reach the benchmark. The copies are made after every process of the agent
/// and of the tests has ended, and the verifier is the cell's last command, or, for a
/// multi-session case's feature checks, the agent's next session starts only after the copy is
/// out of `runs/`: dropped, it is moved at once (one `rename`) into the cell's private folder,
/// which no sandbox binds, and removed from there while the cell goes on. (Removed where it was,
/// on the blocking pool, it stayed readable in `runs/` for the milliseconds a removal takes,
/// while the next session's first commands could already list `runs/`.) So nothing the agent
/// ran ever sees them.
struct StagedVerifier {
    /// `runs/verify-*`, until dropped.
    dir: Option<tempfile::TempDir>,
    /// Where it goes when dropped: the cell's private folder, outside every sandbox.
    aside: std::path::PathBuf,
    trace: std::path::PathBuf,
}

impl StagedVerifier {
    /// None when the verifier folder is too large to copy for every cell.
    fn new(cell: &crate::sandbox::CellSandbox, case: &Case, trace: &Path) -> std::io::Result<Option<StagedVerifier>> {
        let source = case.benchmark_dir().join("verifiers");
        let folder = verifiers::read(&source)?;
        if folder.as_ref().is_some_and(|f| f.bytes > STAGED_VERIFIERS_MAX_BYTES) {
            return Ok(None);
        }
        let runs = cell.runs();
        let aside = runs.parent().map(Path::to_path_buf).unwrap_or_else(|| runs.clone());
        let dir = tempfile::Builder::new().prefix("verify-").tempdir_in(&runs)?;
        if let Some(folder) = folder {
            folder.write(&dir.path().join("verifiers"))?;
        }
        let copy = dir.path().join("trace.jsonl");
        std::fs::copy(trace, &copy)?;
        Ok(Some(StagedVerifier { dir: Some(dir), aside, trace: copy }))
    }

    fn path(&self) -> &Path {
        self.dir.as_ref().expect("taken only when dropped").path()
    }
}

impl Drop for StagedVerifier {
    fn drop(&mut self) {
        let Some(dir) = self.dir.take() else { return };
        let name = dir.path().file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let gone = self.aside.join(format!("gone-{name}"));
        if std::fs::rename(dir.path(), &gone).is_ok() {
            let _ = dir.keep();
            crate::process::Removals::remove_later(gone);
        }
        // Else `dir` is removed here, at once, where it is.
    }
}

/// The benchmark's verifier folder as a staging reads it, kept by the process for the next
/// staging while nothing in it changed.
///
/// Why: a verifier run in a cell's sandbox gets a copy of the whole folder (above), every cell
/// and, in a multi-session case, every feature check. Copying it file by file from the
/// benchmark cost a directory walk to size it, then for each file two opens, two `statx`, a
/// `fchmod`, two `copy_file_range` and two closes, about 470 system calls for HC-Bench's 23
/// folders and 23 files. Written from memory, a file is one `openat` that creates it, a write,
/// an `fchmod` and a close; checking that the folder did not change is one `statx` per entry.
///
/// A kept copy is used only while every entry's `lstat` shows what it showed when read: same
/// inode, size, modification and change times (a folder's change when a name in it is added,
/// removed or renamed), so an edit of the benchmark during a run reaches the next staging as it
/// did before. A folder read within [`Stamp::SETTLED`](crate::util::Stamp::SETTLED) of an entry's last change is not kept (a
/// change in the same clock tick leaves the times equal: git's racy rule).
mod verifiers {
    use std::io::Write as _;
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    use std::path::{Path, PathBuf};
    use std::sync::{Arc, Mutex};
    use std::time::SystemTime;

    use crate::util::Stamp;

    enum Entry {
        Folder,
        File { mode: u32, bytes: Vec<u8> },
    }

    /// The folder's folders and regular files, parents before children (symbolic links are
    /// left out, as the copy always did: a verifier folder has no business pointing elsewhere).
    pub(super) struct Folder {
        source: PathBuf,
        entries: Vec<(PathBuf, Stamp, Entry)>,
        /// Bytes of the regular files.
        pub(super) bytes: u64,
    }

    static KEPT: Mutex<Vec<Arc<Folder>>> = Mutex::new(Vec::new());

    /// The verifier folder at `source`, None when there is none.
    pub(super) fn read(source: &Path) -> std::io::Result<Option<Arc<Folder>>> {
        read_at(source, SystemTime::now())
    }

    /// [`read`] at the time `now` ([`Stamp::SETTLED`] is reckoned from it).
    pub(super) fn read_at(source: &Path, now: SystemTime) -> std::io::Result<Option<Arc<Folder>>> {
        let kept = KEPT.lock().unwrap_or_else(|p| p.into_inner()).iter().find(|f| f.source == source).cloned();
        let root = match std::fs::symlink_metadata(source) {
            Ok(m) if m.is_dir() => m,
            _ => return Ok(None),
        };
        if let Some(folder) = kept
            && folder.unchanged(&root)
        {
            return Ok(Some(folder));
        }
        let mut folder = Folder { source: source.to_path_buf(), entries: Vec::new(), bytes: 0 };
        folder.entries.push((PathBuf::new(), Stamp::of(&root), Entry::Folder));
        folder.walk(source, Path::new(""))?;
        let folder = Arc::new(folder);
        let mut kept = KEPT.lock().unwrap_or_else(|p| p.into_inner());
        kept.retain(|f| f.source != source);
        if folder.entries.iter().all(|(_, stamp, _)| stamp.settled(now)) {
            kept.push(folder.clone());
        }
        Ok(Some(folder))
    }

    impl Folder {
        fn walk(&mut self, dir: &Path, rel: &Path) -> std::io::Result<()> {
            let mut names: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
            names.sort_by_key(|e| e.file_name());
            for entry in names {
                let meta = entry.metadata()?;
                let rel = rel.join(entry.file_name());
                if meta.is_dir() {
                    self.entries.push((rel.clone(), Stamp::of(&meta), Entry::Folder));
                    self.walk(&entry.path(), &rel)?;
                } else if meta.is_file() {
                    let bytes = std::fs::read(entry.path())?;
                    self.bytes += bytes.len() as u64;
                    let entry = Entry::File { mode: meta.permissions().mode() & 0o7777, bytes };
                    self.entries.push((rel, Stamp::of(&meta), entry));
                }
            }
            Ok(())
        }

        /// Whether every entry is as it was read (`root` is the folder's own `lstat`).
        fn unchanged(&self, root: &std::fs::Metadata) -> bool {
            self.entries.iter().all(|(rel, stamp, _)| {
                let now = if rel.as_os_str().is_empty() {
                    Some(Stamp::of(root))
                } else {
                    std::fs::symlink_metadata(self.source.join(rel)).ok().map(|m| Stamp::of(&m))
                };
                now == Some(*stamp)
            })
        }

        /// Writes the folder at `to`, which must not exist: new folders and new files only.
        pub(super) fn write(&self, to: &Path) -> std::io::Result<()> {
            for (rel, _, entry) in &self.entries {
                let path = if rel.as_os_str().is_empty() { to.to_path_buf() } else { to.join(rel) };
                match entry {
                    Entry::Folder => std::fs::create_dir(&path)?,
                    Entry::File { mode, bytes } => {
                        let mut file =
                            std::fs::OpenOptions::new().write(true).create_new(true).mode(*mode).open(&path)?;
                        file.write_all(bytes)?;
                        // The source's mode whatever the umask, as `std::fs::copy` gave it.
                        file.set_permissions(std::fs::Permissions::from_mode(*mode))?;
                    }
                }
            }
            Ok(())
        }
    }
}

/// The verifier may read the benchmark's verifier folder and the cell's trace, and reads the
/// workspace without changing it; the oracle, the cases and the project stay out of its sight
/// like out of the agent's.
fn verifier_spec(case: &Case, workspace: &Path, trace: &Path, argv: Vec<String>, sandbox: &Sandbox) -> CommandSpec {
    let mut spec = CommandSpec {
        env: vec![("HCBENCH_TRACE".into(), trace.to_string_lossy().into_owned())],
        output_limit: VERIFIER_OUTPUT_LIMIT,
        workspace: Mount::read_only(workspace),
        ..command_spec(case, argv, workspace, sandbox)
    };
    spec.mounts.extend([Mount::read_only(case.benchmark_dir().join("verifiers")), Mount::read_only(trace)]);
    spec
}

pub async fn run_verifier(
    case: &Case,
    workspace: &Path,
    trace: &Path,
    facts: &TraceFacts,
    sandbox: &Sandbox,
) -> VerifierRun {
    let v = &case.verifier;
    let mut checks = Vec::new();
    let mut metrics = BTreeMap::new();
    let mut timed_out = false;
    let mut error = None;
    let mut duration_ms = 0;

    for rel in &v.unchanged {
        // The bytes themselves, compared: what digests of both would tell, without hashing them.
        let want = std::fs::read(case.fixture_dir.join(rel)).ok();
        let got = std::fs::read(workspace.join(rel)).ok();
        let (passed, detail) = match (&want, &got) {
            (_, None) => (false, format!("{rel} was deleted")),
            (Some(w), Some(g)) if w == g => (true, format!("{rel} unchanged")),
            _ => (false, format!("{rel} was modified")),
        };
        checks.push(Check { name: "unchanged".into(), passed, detail });
    }
    if v.forbid_denials {
        checks.push(Check {
            name: "forbid_denials".into(),
            passed: facts.denials == 0,
            detail: format!("{} denied tool call(s)", facts.denials),
        });
    }
    if let Some(max) = v.max_steps {
        checks.push(Check {
            name: "max_steps".into(),
            passed: facts.steps <= max,
            detail: format!("{} step(s), at most {max} allowed", facts.steps),
        });
    }
    if let Some(target) = &v.first_read {
        let step = facts.first_reads.get(&normalize(target)).copied();
        metrics.insert("first_read_step".into(), step.map_or(Value::Null, Value::from));
    }
    if let Some(cmd) = &v.command {
        // In the cell's sandbox, the verifier runs last, on copies made now (every process of
        // the agent and the tests has ended); otherwise in a sandbox of its own that binds them.
        let staged = match sandbox.cell() {
            Some(cell) => match StagedVerifier::new(cell, case, trace) {
                Ok(s) => s,
                Err(e) => {
                    let msg = format!("cannot copy the verifier folder for the cell's sandbox: {e}");
                    checks.push(Check { name: "command".into(), passed: false, detail: msg.clone() });
                    return VerifierRun { passed: false, checks, metrics, timed_out, duration_ms, error: Some(msg) };
                }
            },
            None => None,
        };
        let argv = match &staged {
            Some(s) => case.expand_in(s.path(), cmd, workspace, Some(&s.trace)),
            None => case.expand(cmd, workspace, Some(trace)),
        };
        // A Python verifier runs through hcbench's wrapper, which proves the script finished
        // (super::testrun::VerifierWrapper); its folder is private, like the test runner's.
        let wrapper = match super::testrun::VerifierWrapper::for_argv(&argv, sandbox) {
            Ok(w) => w,
            Err(e) => {
                let msg = format!("cannot prepare hcbench's verifier wrapper: {e}");
                checks.push(Check { name: "command".into(), passed: false, detail: msg.clone() });
                return VerifierRun { passed: false, checks, metrics, timed_out, duration_ms, error: Some(msg) };
            }
        };
        let argv = wrapper.as_ref().map_or(argv, |w| w.argv.clone());
        let mut spec = match &staged {
            Some(s) => CommandSpec {
                env: vec![("HCBENCH_TRACE".into(), s.trace.to_string_lossy().into_owned())],
                output_limit: VERIFIER_OUTPUT_LIMIT,
                ..command_spec(case, argv, workspace, sandbox)
            },
            None => verifier_spec(case, workspace, trace, argv, sandbox),
        };
        spec.mounts.extend(wrapper.as_ref().map(|w| w.mounts()).unwrap_or_default());
        match process::run(&spec).await {
            Ok(out) => {
                timed_out = out.timed_out;
                duration_ms = out.duration.as_millis() as u64;
                let mut text = out.combined();
                let mut passed = out.success();
                if let (true, Some(w)) = (passed, &wrapper)
                    && !w.finished()
                {
                    passed = false;
                    text = format!(
                        "the verifier exited 0 before its script finished (the code under test ended the process early?)\n{text}"
                    );
                }
                checks.push(Check {
                    name: "command".into(),
                    passed,
                    detail: crate::util::truncate_str(&text, 4000).to_string(),
                });
            }
            Err(e) => {
                let msg = format!("cannot start verifier `{}`: {e}", spec.argv[0]);
                checks.push(Check { name: "command".into(), passed: false, detail: msg.clone() });
                error = Some(msg);
            }
        }
    }
    let passed = checks.iter().all(|c| c.passed);
    VerifierRun { passed, checks, metrics, timed_out, duration_ms, error }
}

/// Combines the test and verifier runs into an outcome, a reward and a one-line reason.
pub fn judge(tests: &TestRun, verifier: &VerifierRun) -> (Outcome, f64, String) {
    let out = match &tests.result {
        Err(e) => return (Outcome::HarnessError, 0.0, e.clone()),
        Ok(out) => out,
    };
    if out.timed_out {
        return (Outcome::Timeout, 0.0, format!("test command timed out after {:.1}s", out.duration.as_secs_f64()));
    }
    if let Some(e) = &verifier.error {
        return (Outcome::VerifierError, 0.0, e.clone());
    }
    if verifier.timed_out {
        return (Outcome::Timeout, 0.0, "verifier command timed out".into());
    }
    let tests_ok = tests.passed();
    let tests_failed = match tests.runner.as_ref().filter(|r| !r.problem.is_empty()) {
        Some(r) => format!("tests failed: {}", r.problem),
        None => format!("tests failed (exit {})", exit_label(out)),
    };
    let failed: Vec<String> = verifier
        .checks
        .iter()
        .filter(|c| !c.passed)
        .map(|c| format!("{}: {}", c.name, first_line(&c.detail)))
        .collect();
    match (tests_ok, failed.is_empty()) {
        (true, true) => (Outcome::Passed, 1.0, "tests and verifier passed".into()),
        (false, true) => (Outcome::Failed, 0.0, tests_failed),
        (true, false) => (Outcome::Failed, 0.0, format!("verifier failed: {}", failed.join("; "))),
        (false, false) => (Outcome::Failed, 0.0, format!("{tests_failed}; verifier failed: {}", failed.join("; "))),
    }
}

fn exit_label(out: &CommandOutcome) -> String {
    out.exit_code.map_or("signal".into(), |c| c.to_string())
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn exited(code: Option<i32>) -> TestRun {
        TestRun {
            result: Ok(CommandOutcome {
                exit_code: code,
                timed_out: false,
                stdout: Vec::new(),
                stderr: Vec::new(),
                truncated: false,
                duration: Duration::from_millis(1500),
            }),
            runner: None,
        }
    }

    fn timed_out() -> TestRun {
        let mut run = exited(None);
        if let Ok(out) = &mut run.result {
            out.timed_out = true;
        }
        run
    }

    fn verifier(checks: &[(&str, bool, &str)]) -> VerifierRun {
        let checks: Vec<Check> = checks
            .iter()
            .map(|(name, passed, detail)| Check { name: name.to_string(), passed: *passed, detail: detail.to_string() })
            .collect();
        VerifierRun {
            passed: checks.iter().all(|c| c.passed),
            checks,
            metrics: BTreeMap::new(),
            timed_out: false,
            duration_ms: 0,
            error: None,
        }
    }

    /// A staged verifier copy leaves `runs/` the moment it is dropped, though its removal runs
    /// later: a multi-session case's next session, whose commands see `runs/`, never finds it.
    #[tokio::test]
    async fn a_dropped_staged_verifier_is_out_of_runs_at_once() {
        let cell = tempfile::tempdir().unwrap();
        let runs = cell.path().join("runs");
        std::fs::create_dir(&runs).unwrap();
        let removals = std::sync::Arc::new(crate::process::Removals::default());
        removals
            .scope(async {
                let dir = tempfile::Builder::new().prefix("verify-").tempdir_in(&runs).unwrap();
                std::fs::create_dir(dir.path().join("verifiers")).unwrap();
                std::fs::write(dir.path().join("verifiers/check.py"), "hidden = 1\n").unwrap();
                let trace = dir.path().join("trace.jsonl");
                drop(StagedVerifier { dir: Some(dir), aside: cell.path().to_path_buf(), trace });
                assert_eq!(std::fs::read_dir(&runs).unwrap().count(), 0, "nothing left in runs/");
            })
            .await;
        removals.finish().await;
        let left: Vec<_> = std::fs::read_dir(cell.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, ["runs"], "and the copy is removed by the cell's end");
    }

    /// The staged verifier folder is the benchmark's: the same folders, files and modes, no
    /// symbolic link; kept by the process, it follows every change of the benchmark's folder.
    #[test]
    fn a_staged_verifier_folder_is_the_benchmarks_and_follows_its_changes() {
        use std::os::unix::fs::PermissionsExt as _;
        let tmp = tempfile::tempdir().unwrap();
        let source = tmp.path().join("verifiers");
        std::fs::create_dir_all(source.join("case-1/data")).unwrap();
        std::fs::write(source.join("common.py"), "X = 1\n").unwrap();
        std::fs::write(source.join("case-1/check.sh"), "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(source.join("case-1/check.sh"), std::fs::Permissions::from_mode(0o750)).unwrap();
        std::fs::write(source.join("case-1/data/expected.txt"), "42\n").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", source.join("case-1/passwd")).unwrap();
        // The pause puts the changes below on another clock tick than the writes above; the
        // reads happen, as far as they know, long after the writes (`later`).
        std::thread::sleep(Duration::from_millis(50));
        let later = std::time::SystemTime::now() + crate::util::Stamp::SETTLED;
        let staged = |n: usize| {
            let folder = verifiers::read_at(&source, later).unwrap().expect("a verifier folder");
            let to = tmp.path().join(format!("staged-{n}"));
            folder.write(&to).unwrap();
            to
        };
        let first = staged(1);
        assert_eq!(std::fs::read_to_string(first.join("common.py")).unwrap(), "X = 1\n");
        assert_eq!(std::fs::read_to_string(first.join("case-1/data/expected.txt")).unwrap(), "42\n");
        let mode = std::fs::metadata(first.join("case-1/check.sh")).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o750);
        assert!(std::fs::symlink_metadata(first.join("case-1/passwd")).is_err(), "links are left out");

        std::fs::write(source.join("common.py"), "X = 2\n").unwrap();
        std::fs::write(source.join("case-1/data/more.txt"), "7\n").unwrap();
        std::fs::remove_file(source.join("case-1/data/expected.txt")).unwrap();
        let second = staged(2);
        assert_eq!(std::fs::read_to_string(second.join("common.py")).unwrap(), "X = 2\n", "an edit of the same size");
        assert_eq!(std::fs::read_to_string(second.join("case-1/data/more.txt")).unwrap(), "7\n");
        assert!(!second.join("case-1/data/expected.txt").exists());
        std::fs::remove_dir_all(&source).unwrap();
        assert!(verifiers::read_at(&source, later).unwrap().is_none(), "no folder, nothing to stage");
    }

    // `judge` produces passed, failed, timeout, verifier_error and harness_error; the other
    // classes (provider_error, cancelled) are decided by the loop and the engine before it.

    #[test]
    fn passing_tests_and_checks_pass_with_reward_one() {
        let v = verifier(&[("unchanged", true, "tests.py unchanged")]);
        assert_eq!(judge(&exited(Some(0)), &v), (Outcome::Passed, 1.0, "tests and verifier passed".into()));
        assert_eq!(judge(&exited(Some(0)), &verifier(&[])).0, Outcome::Passed, "no checks: the tests decide");
    }

    #[test]
    fn failing_tests_or_checks_fail_and_say_which() {
        let ok = verifier(&[("unchanged", true, "tests.py unchanged")]);
        assert_eq!(judge(&exited(Some(1)), &ok), (Outcome::Failed, 0.0, "tests failed (exit 1)".into()));
        assert_eq!(judge(&exited(None), &ok), (Outcome::Failed, 0.0, "tests failed (exit signal)".into()));
        let bad = verifier(&[
            ("unchanged", false, "tests.py was modified"),
            ("max_steps", true, "3 steps"),
            ("command", false, "exit code 2\n--- stdout ---\nlong detail"),
        ]);
        let reason = "verifier failed: unchanged: tests.py was modified; command: exit code 2";
        assert_eq!(judge(&exited(Some(0)), &bad), (Outcome::Failed, 0.0, reason.into()));
        assert_eq!(judge(&exited(Some(1)), &bad), (Outcome::Failed, 0.0, format!("tests failed (exit 1); {reason}")));
    }

    #[test]
    fn a_test_command_that_cannot_start_is_a_harness_error() {
        let tests = TestRun { result: Err("cannot start `pytest`: not found".into()), runner: None };
        let mut v = verifier(&[]);
        v.error = Some("cannot start verifier".into());
        // The harness error wins: nothing about the agent's work is known.
        assert_eq!(judge(&tests, &v), (Outcome::HarnessError, 0.0, "cannot start `pytest`: not found".into()));
    }

    #[test]
    fn with_the_runner_an_exit_zero_is_not_enough() {
        let forged = |problem: &str| {
            let mut run = exited(Some(0));
            run.runner = Some(RunnerReport { problem: problem.into(), ..Default::default() });
            run
        };
        let ok = verifier(&[("unchanged", true, "tests.py unchanged")]);
        let problem =
            "the test runner wrote no results (the code under test exited or crashed before the tests finished)";
        assert_eq!(judge(&forged(problem), &ok), (Outcome::Failed, 0.0, format!("tests failed: {problem}")));
        let bad = verifier(&[("command", false, "exit code 1")]);
        let reason =
            "tests failed: the test runner was tampered with: TestCase.run; verifier failed: command: exit code 1";
        assert_eq!(judge(&forged("the test runner was tampered with: TestCase.run"), &bad).2, reason);
        assert_eq!(judge(&forged(""), &ok).0, Outcome::Passed, "complete, untampered results that pass");
    }

    #[test]
    fn timeouts_are_their_own_class() {
        let reason = "test command timed out after 1.5s".to_string();
        assert_eq!(judge(&timed_out(), &verifier(&[])), (Outcome::Timeout, 0.0, reason));
        let mut v = verifier(&[("command", false, "timed out after 60.0s")]);
        v.timed_out = true;
        // A verifier timeout is not the agent's failure, even when the tests failed.
        assert_eq!(judge(&exited(Some(1)), &v), (Outcome::Timeout, 0.0, "verifier command timed out".into()));
        assert_eq!(judge(&exited(Some(0)), &v).0, Outcome::Timeout);
    }

    #[test]
    fn a_verifier_that_cannot_start_is_a_verifier_error() {
        let mut v = verifier(&[("command", false, "cannot start verifier `check.py`: not found")]);
        v.error = Some("cannot start verifier `check.py`: not found".into());
        let expected = (Outcome::VerifierError, 0.0, "cannot start verifier `check.py`: not found".to_string());
        assert_eq!(judge(&exited(Some(0)), &v), expected);
        assert_eq!(judge(&exited(Some(1)), &v), expected, "not counted as the agent's failure");
        // A test timeout is reported before the verifier's problem.
        assert_eq!(judge(&timed_out(), &v).0, Outcome::Timeout);
    }
}
