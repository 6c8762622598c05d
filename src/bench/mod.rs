//! Benchmarks: cases, their fixtures and oracle actions, loaded from `benchmarks/<name>/`.
//!
//! Loading is all-or-nothing and reports every problem at once (file, case, field and the fix),
//! so a user fixes a broken benchmark in one pass instead of one error per run. Nothing
//! downstream sees the raw YAML types: they are turned into [`Case`] here, with defaults
//! applied and every path resolved.

mod actions;
mod load;
pub mod sessions;
pub mod suite;

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::action::{Action, Tool};
use crate::sandbox::Limits;

pub(crate) use actions::check_action;
pub use load::{LoadError, Problem, check_programs, load_benchmark};

/// A loaded, validated benchmark.
#[derive(Debug, Clone)]
pub struct Benchmark {
    pub name: String,
    pub description: String,
    /// Absolute path of `benchmarks/<name>`.
    pub dir: PathBuf,
    /// The categories `benchmark.yaml` declares, in its order; every case has one of them.
    pub categories: Vec<String>,
    /// Sorted naturally by id.
    pub cases: Vec<Case>,
}

impl Benchmark {
    pub fn case(&self, id: &str) -> Option<&Case> {
        self.cases.iter().find(|c| c.id == id)
    }
}

/// SHA-256 identifying what a benchmark is: every file under `benchmarks/<name>/` (cases,
/// oracle, verifiers) and under each of its cases' fixture folders, by path relative to
/// `root` and content, in path order. Ignore files are not consulted (a file a `.gitignore`
/// hides still changes what cells see); `.git` folders and `__pycache__` are left out.
pub fn digest(root: &Path, bench: &Benchmark) -> std::io::Result<String> {
    use sha2::{Digest as _, Sha256};
    let mut dirs: Vec<&Path> = vec![bench.dir.as_path()];
    let mut fixtures: Vec<&Path> = bench.cases.iter().map(|c| c.fixture_dir.as_path()).collect();
    fixtures.sort();
    fixtures.dedup();
    dirs.extend(fixtures);
    let mut files = Vec::new();
    for dir in dirs {
        let walk = ignore::WalkBuilder::new(dir)
            .standard_filters(false)
            .filter_entry(|e| e.file_name() != ".git" && e.file_name() != "__pycache__")
            .build();
        for entry in walk {
            let entry = entry.map_err(std::io::Error::other)?;
            if entry.file_type().is_some_and(|t| t.is_file()) {
                files.push(entry.into_path());
            }
        }
    }
    files.sort();
    files.dedup();
    let mut hash = Sha256::new();
    for f in files {
        let rel = f.strip_prefix(root).unwrap_or(&f);
        let bytes = std::fs::read(&f)?;
        hash.update(rel.to_string_lossy().as_bytes());
        hash.update([0]);
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(&bytes);
    }
    Ok(crate::util::hex(&hash.finalize()))
}

/// An extra control agent `hcbench validate` runs on a case, beyond the ones every case gets
/// (baseline, oracle twice, nop, tamper and the attacks). A case asks for one with
/// `controls: [violator]`; which controls a case needs is a property of the case, not of its
/// category, so a benchmark may name its categories as it likes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Control {
    /// The oracle's fix preceded by one action the policy denies (a network command): a case
    /// whose passing must require staying inside the policy fails it.
    Violator,
}

impl Control {
    pub const ALL: [Control; 1] = [Control::Violator];

    pub fn as_str(self) -> &'static str {
        match self {
            Control::Violator => "violator",
        }
    }

    pub fn parse(s: &str) -> Option<Control> {
        Control::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

impl fmt::Display for Control {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Split {
    Train,
    Test,
    Heldout,
}

impl Split {
    pub const ALL: [Split; 3] = [Split::Train, Split::Test, Split::Heldout];

    pub fn as_str(self) -> &'static str {
        match self {
            Split::Train => "train",
            Split::Test => "test",
            Split::Heldout => "heldout",
        }
    }

    pub fn parse(s: &str) -> Option<Split> {
        Split::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

impl fmt::Display for Split {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One task: a fixture, a prompt, limits, and how to judge the result.
#[derive(Debug, Clone)]
pub struct Case {
    pub id: String,
    /// One of the benchmark's declared categories; reports group by it, nothing else reads it.
    pub category: String,
    pub split: Split,
    /// Name of the folder under `fixtures/`.
    pub fixture: String,
    /// Absolute path of the fixture folder.
    pub fixture_dir: PathBuf,
    pub prompt: String,
    pub allowed_tools: Vec<Tool>,
    pub allowed_programs: Vec<String>,
    pub step_budget: u32,
    /// Limit for each child process (tests, verifier, run_command).
    pub timeout: Duration,
    /// Wall-clock limit of the whole cell (`cell_timeout_s`): past it the cell ends as
    /// `timeout`, whatever it is waiting on.
    pub cell_timeout: Duration,
    /// Resource limits of each child process (`limits:`).
    pub limits: Limits,
    /// How the tests run and what proves they passed (`tests:` or `test_command`).
    pub tests: TestSpec,
    pub verifier: VerifierSpec,
    /// The oracle's known-good actions, in order.
    pub oracle: Vec<Action>,
    /// Extra controls `hcbench validate` runs on this case (`controls:`).
    pub controls: Vec<Control>,
    /// A multi-session case (`sessions:` and `features:`): then `step_budget` is every
    /// session's budget together, and the loop is `agent::sessions`.
    pub sessions: Option<sessions::SessionsSpec>,
    /// The case file, for error messages.
    pub file: PathBuf,
}

impl Case {
    /// The benchmark folder the case file lives in (`benchmarks/<name>`).
    pub fn benchmark_dir(&self) -> PathBuf {
        self.file.parent().and_then(Path::parent).map(Path::to_path_buf).unwrap_or_default()
    }

    /// Substitutes the placeholders a case file may use in `test_command` and
    /// `verifier.command` (docs/benchmark-format.md): `{benchmark_dir}`, `{workspace}` and,
    /// when given, `{trace}`.
    pub fn expand(&self, argv: &[String], workspace: &Path, trace: Option<&Path>) -> Vec<String> {
        self.expand_in(&self.benchmark_dir(), argv, workspace, trace)
    }

    /// [`Case::expand`] with `{benchmark_dir}` standing for `benchmark_dir` (a copy of the
    /// benchmark's verifier folder, for one).
    pub fn expand_in(
        &self,
        benchmark_dir: &Path,
        argv: &[String],
        workspace: &Path,
        trace: Option<&Path>,
    ) -> Vec<String> {
        let bench_dir = benchmark_dir.to_string_lossy().into_owned();
        argv.iter()
            .map(|a| {
                let mut a =
                    a.replace("{benchmark_dir}", &bench_dir).replace("{workspace}", &workspace.to_string_lossy());
                if let Some(t) = trace {
                    a = a.replace("{trace}", &t.to_string_lossy());
                }
                a
            })
            .collect()
    }
}

#[cfg(test)]
impl Case {
    /// A bugfix case with every tool, the default programs, 5 steps and `true` as its test
    /// command, for unit tests that need a case but no benchmark on disk.
    pub(crate) fn sample() -> Case {
        Case {
            id: "t".into(),
            category: "bugfix".into(),
            split: Split::Train,
            fixture: "t".into(),
            fixture_dir: PathBuf::new(),
            prompt: "p".into(),
            allowed_tools: Tool::all().collect(),
            allowed_programs: DEFAULT_PROGRAMS.iter().map(|s| s.to_string()).collect(),
            step_budget: 5,
            timeout: Duration::from_secs(5),
            cell_timeout: Duration::from_secs(60),
            limits: Limits::default(),
            tests: TestSpec::Command(vec!["true".into()]),
            verifier: VerifierSpec::default(),
            oracle: vec![],
            controls: vec![],
            sessions: None,
            file: PathBuf::new(),
        }
    }
}

/// How a case's tests run, and what proves that they passed.
#[derive(Debug, Clone, PartialEq)]
pub enum TestSpec {
    /// hcbench's own runner (`tests:`): the verdict is the per-test results it writes outside
    /// the workspace, checked against the case's lists, not only an exit code.
    Runner(RunnerSpec),
    /// A case's own argv (`test_command`), judged by its exit code alone. Code under test can
    /// forge that (exit 0 at import), so HC-Bench does not use it.
    Command(Vec<String>),
}

impl TestSpec {
    /// What the agent is told runs its tests (the task contract). It names no per-cell path,
    /// so the context stays the same from cell to cell.
    pub fn label(&self) -> String {
        match self {
            TestSpec::Runner(r) => {
                format!("unittest discovery in {}/ through hcbench's test runner (run_tests)", r.start_dir)
            }
            TestSpec::Command(argv) => argv.join(" "),
        }
    }
}

/// Which controlled runner runs a case's tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunnerKind {
    /// Python's unittest, driven by `src/runner/unittest_runner.py`.
    Unittest,
}

/// The `tests:` block of a case, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct RunnerSpec {
    pub runner: RunnerKind,
    /// Workspace-relative folder discovery starts in (`tests`).
    pub start_dir: String,
    /// Tests that fail on the fixture and must pass after the agent's work.
    pub fail_to_pass: Vec<String>,
    /// Tests that pass on the fixture and must still pass.
    pub pass_to_pass: Vec<String>,
}

impl RunnerSpec {
    /// Every test the case names, fail_to_pass first.
    pub fn required(&self) -> impl Iterator<Item = &String> {
        self.fail_to_pass.iter().chain(&self.pass_to_pass)
    }
}

/// How a case is judged beyond its test command. Every given check must pass.
#[derive(Debug, Clone, Default)]
pub struct VerifierSpec {
    /// Argv run in the workspace after the tests; exit 0 passes.
    pub command: Option<Vec<String>>,
    /// Workspace-relative files that must keep the fixture's exact bytes.
    pub unchanged: Vec<String>,
    /// Fail when any tool call was denied by the policy.
    pub forbid_denials: bool,
    /// Fail when the agent used more model actions than this.
    pub max_steps: Option<u32>,
    /// Record the step of the first `read_file` of this path.
    pub first_read: Option<String>,
}

/// Programs `run_command` may start when a case does not say otherwise.
/// Wall-clock limit of a cell when its case and benchmark name none: room for a slow model to
/// use a 30-step budget, and a bound on a cell that hangs.
pub const DEFAULT_CELL_TIMEOUT_S: f64 = 1800.0;

pub const DEFAULT_PROGRAMS: &[&str] =
    &["python3", "git", "ls", "cat", "head", "tail", "wc", "grep", "diff", "sort", "uniq", "echo", "pwd", "true"];
