//! The run directory: its layout, its manifest, its results file, its lock and its reader.
//!
//! ```text
//! <run_dir>/manifest.json        the plan, written once before any cell starts (atomic)
//! <run_dir>/results.jsonl        one CellSummary per line, appended as cells end
//! <run_dir>/.lock                held by the one process writing cells into the directory
//! <run_dir>/cells/<cell_id>/     trace.jsonl and checkpoint/ (the last step's state and stored
//!                                contents) of a running or interrupted cell, and what a cell
//!                                keeps beyond its trace (artifacts/, delegations/): a finished
//!                                cell with nothing else has no folder
//! <run_dir>/cells.pack(.index)   finished cells' traces (src/trace/pack.rs)
//! <run_dir>/workspaces           the link to the run's workspaces (src/workspace.rs)
//! <run_dir>/reports/             rendered from the traces alone
//! ```
//!
//! `run`, `matrix`, `matrix --resume`, `validate`, `report` and the gate all reach these files
//! through this module, so the layout and its invariants are written down once: the manifest is
//! the plan and is never rewritten by a resume; the traces are the source of truth and
//! `results.jsonl` is an index of them (a resume rewrites it to the cells it keeps, atomically,
//! before appending); only the process holding `.lock` writes cells, so two resumes of one run
//! cannot run its cells twice. The lock is taken before anything in the directory is looked
//! at or changed: a second writer (a resume, or a new run given the same `--out`) leaves
//! without touching a file and names the holder (pid, command, since when).

use crate::sandbox::SandboxInfo;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::bench::Benchmark;
use crate::events::{EngineEvent, EngineSink};
use crate::lock::{FileLock, LockError};
use crate::replay::{CellSummary, SUMMARY_SCHEMA_VERSION, replay_trace_of};
use crate::shard::Shard;
use crate::trace::event::Outcome;
use crate::trace::pack::PackWriter;
use crate::trace::stored;

/// Version of `manifest.json`.
pub const MANIFEST_SCHEMA_VERSION: u32 = 1;
pub const MANIFEST: &str = "manifest.json";
pub const RESULTS: &str = "results.jsonl";
const LOCK: &str = ".lock";

/// The run's description, written once to `manifest.json` before any cell starts. It is the
/// plan: `report` and `--resume` rebuild the list of cells from it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    pub schema_version: u32,
    pub run_id: String,
    pub hcbench_version: String,
    /// The git commit of the project root, when it is a git repository.
    #[serde(default)]
    pub git_commit: Option<String>,
    /// Whether the project's working tree differed from `git_commit` when the run started
    /// (tracked changes, or untracked files that are not ignored). None: no repository, or a
    /// manifest written before this was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_dirty: Option<bool>,
    /// SHA-256 over the benchmark's files and its cases' fixtures ([`crate::bench::digest`]),
    /// so runs of a changed benchmark are not compared as if they were the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub benchmark_digest: Option<String>,
    /// Whether the files the digest covers differed from the committed tree when the run
    /// started (tracked changes, or untracked files that are not ignored, under the benchmark
    /// or a fixture it uses). None: not in a git repository, or a manifest written before it
    /// was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub benchmark_dirty: Option<bool>,
    pub command: String,
    pub benchmark: String,
    pub profiles: Vec<String>,
    pub cases: Vec<ManifestCase>,
    pub epochs: u32,
    pub jobs: usize,
    pub started_at: String,
    /// Digest of the agent spec and the folder it came from (None: the embedded default).
    #[serde(default)]
    pub agent_spec: String,
    #[serde(default)]
    pub agent_dir: Option<PathBuf>,
    /// The sandbox the cells ran in (`--sandbox`); None in manifests written before it was
    /// recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxInfo>,
    /// `--budget-usd`: no new cell starts once the run's model cost reaches it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_usd: Option<f64>,
    /// `--min-coverage` and `--fail-under` as the run resolved them: part of the plan, so
    /// `hcbench report` judges the run by the same thresholds (src/report/exit_policy.rs).
    /// Absent in manifests written before the exit policy existed: the defaults apply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_coverage: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_under: Option<f64>,
    /// `hcbench ablate`: the ablations of the agent spec, `full` first, each run on every case
    /// with the one profile. Empty (and absent) for every other command, so its cells and
    /// groups are the profiles alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ablations: Vec<String>,
    /// `--skip-unavailable`: requested profiles that could not run (their key was not set),
    /// with the reason. They have no cells in the plan, so they count nowhere; every report
    /// names them, and `--resume` keeps them not run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_run: Vec<NotRun>,
    /// `--shard K/N`: this run holds only the K-th of N parts of the plan ([`crate::shard`]).
    /// Its reports, coverage and `--resume` are about that part; `hcbench merge` joins the parts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Shard>,
    /// [`Manifest::plan_digest`] when the run started: what `hcbench merge` checks shards by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_digest: Option<String>,
    /// A run made by `hcbench merge`: the shard runs it joined, by shard index. Each cell's
    /// trace still carries the run id of the shard that ran it ([`Manifest::trace_run_id`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged_from: Vec<MergedShard>,
}

/// One shard run a merged run was made from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergedShard {
    pub run_id: String,
    pub shard: Shard,
    pub started_at: String,
}

/// A requested profile that was set aside before the run, and why (with the fix).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NotRun {
    pub profile: String,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ManifestCase {
    pub id: String,
    pub category: String,
    pub split: String,
}

/// One cell of a manifest's plan.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedCell {
    pub cell_id: String,
    pub case_id: String,
    pub profile: String,
    /// Empty outside `hcbench ablate`.
    pub ablation: String,
}

/// What a new manifest is made from, besides the benchmark and its selected cases.
pub struct Plan<'a> {
    pub command: &'a str,
    pub run_id: &'a str,
    pub profiles: Vec<String>,
    pub epochs: u32,
    pub jobs: usize,
    pub agent_spec: &'a str,
    pub agent_dir: Option<PathBuf>,
    /// The sandbox the cells run in.
    pub sandbox: SandboxInfo,
}

#[derive(Debug, thiserror::Error)]
pub enum RunDirError {
    #[error("{path} is not a run directory: {source} (expected the manifest.json that run and matrix write)")]
    Missing { path: PathBuf, source: io::Error },
    #[error("{path} is not a valid manifest: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error(
        "{path} has schema_version {found}, newer than this hcbench reads ({MANIFEST_SCHEMA_VERSION}); upgrade hcbench"
    )]
    TooNew { path: PathBuf, found: u32 },
    #[error("{path} already holds a run; choose another --out, or finish it with `hcbench matrix --resume {path}`")]
    Taken { path: PathBuf },
    #[error("{path} is not empty and holds no run ({entry} is there); choose another --out (a new or empty folder)")]
    NotEmpty { path: PathBuf, entry: String },
    #[error(
        "{path} was made by `hcbench merge` and cannot be resumed: finish the shard runs it names in its manifest (`hcbench matrix --resume SHARD_DIR`), then merge again into a new folder"
    )]
    Merged { path: PathBuf },
    #[error("another hcbench process is writing run directory {path} ({holder}); wait for it to finish")]
    Busy { path: PathBuf, holder: String },
    /// The place given for a new run cannot hold one (not creatable or not writable).
    #[error("cannot use run directory {path}: {source}; choose another --out")]
    Unusable { path: PathBuf, source: io::Error },
    #[error("cannot write in run directory {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path} line {line} is not a cell summary: {message}")]
    CorruptResults { path: PathBuf, line: usize, message: String },
    #[error(
        "{path} line {line} has schema_version {found}, newer than this hcbench reads ({SUMMARY_SCHEMA_VERSION}); upgrade hcbench"
    )]
    ResultsTooNew { path: PathBuf, line: usize, found: u32 },
}

impl RunDirError {
    /// True when the user can fix it (a wrong path, a corrupt or newer file, a busy directory);
    /// false when hcbench could not do its own I/O.
    pub fn is_usage(&self) -> bool {
        !matches!(self, RunDirError::Io { .. })
    }
}

impl Manifest {
    pub fn new(plan: Plan<'_>, root: &Path, bench: &Benchmark, case_ids: &[String]) -> Manifest {
        let (git_commit, git_dirty) = git_state(root);
        Manifest {
            schema_version: MANIFEST_SCHEMA_VERSION,
            run_id: plan.run_id.to_string(),
            hcbench_version: env!("CARGO_PKG_VERSION").to_string(),
            git_commit,
            git_dirty,
            benchmark_digest: crate::bench::digest(root, bench).ok(),
            benchmark_dirty: benchmark_dirty(bench),
            command: plan.command.to_string(),
            benchmark: bench.name.clone(),
            profiles: plan.profiles,
            cases: case_ids
                .iter()
                .filter_map(|id| bench.case(id))
                .map(|c| ManifestCase {
                    id: c.id.clone(),
                    category: c.category.to_string(),
                    split: c.split.to_string(),
                })
                .collect(),
            epochs: plan.epochs,
            jobs: plan.jobs,
            started_at: crate::util::now_rfc3339(),
            agent_spec: plan.agent_spec.to_string(),
            agent_dir: plan.agent_dir,
            sandbox: Some(plan.sandbox),
            budget_usd: None,
            min_coverage: None,
            fail_under: None,
            ablations: Vec::new(),
            not_run: Vec::new(),
            shard: None,
            plan_digest: None,
            merged_from: Vec::new(),
        }
    }

    /// SHA-256 over what decides the plan's cells and how they are judged: the benchmark and
    /// its digest, the cases, profiles, epochs, ablations, agent spec, thresholds, sandbox
    /// mechanism and hcbench version. Not the run id, times, `--jobs`, `--budget-usd`, the git
    /// commit or the shard: shards of one plan started apart, on other machines, with their own
    /// share of the budget, still have one digest.
    pub fn plan_digest(&self) -> String {
        let identity = serde_json::json!({
            "hcbench_version": self.hcbench_version,
            "command": self.command,
            "benchmark": self.benchmark,
            "benchmark_digest": self.benchmark_digest,
            "cases": self.cases.iter().map(|c| [&c.id, &c.category, &c.split]).collect::<Vec<_>>(),
            "profiles": self.profiles,
            "not_run": self.not_run.iter().map(|n| &n.profile).collect::<Vec<_>>(),
            "epochs": self.epochs,
            "ablations": self.ablations,
            "agent_spec": self.agent_spec,
            "min_coverage": self.min_coverage,
            "fail_under": self.fail_under,
            "sandbox": self.sandbox.as_ref().map(|s| &s.mechanism),
        });
        crate::util::sha256_hex(identity.to_string().as_bytes())
    }

    pub fn read(run_dir: &Path) -> Result<Manifest, RunDirError> {
        let path = run_dir.join(MANIFEST);
        let text =
            std::fs::read_to_string(&path).map_err(|source| RunDirError::Missing { path: path.clone(), source })?;
        let m: Manifest = serde_json::from_str(&text)
            .map_err(|e| RunDirError::Invalid { path: path.clone(), message: e.to_string() })?;
        if m.schema_version > MANIFEST_SCHEMA_VERSION {
            return Err(RunDirError::TooNew { path, found: m.schema_version });
        }
        Ok(m)
    }

    fn write(&self, run_dir: &Path) -> io::Result<()> {
        let bytes = serde_json::to_vec_pretty(self).map_err(io::Error::other)?;
        crate::util::write_atomic(&run_dir.join(MANIFEST), &bytes)
    }

    /// The case ids of the plan, in plan order.
    pub fn case_ids(&self) -> Vec<String> {
        self.cases.iter().map(|c| c.id.clone()).collect()
    }

    /// The cells this run holds, in plan order: the whole plan, or with `--shard` its part.
    pub fn cell_ids(&self) -> Vec<PlannedCell> {
        let plan = self.plan_cells();
        match self.shard {
            Some(shard) => shard.select(&plan).into_iter().cloned().collect(),
            None => plan,
        }
    }

    /// The run id a cell's trace must carry: the run's own, or in a merged run that of the
    /// shard that ran it (the split is deterministic, so the shard follows from the plan).
    /// `cells` is [`Manifest::plan_cells`]; the result is one id per cell.
    /// In a merged run, the run id of the shard that ran each planned cell, by cell id (empty
    /// for any other run).
    pub fn shard_run_ids(&self) -> HashMap<String, String> {
        if self.merged_from.is_empty() {
            return HashMap::new();
        }
        let cells = self.plan_cells();
        let ids = self.trace_run_ids(&cells);
        cells.into_iter().map(|c| c.cell_id).zip(ids).collect()
    }

    pub fn trace_run_ids(&self, cells: &[PlannedCell]) -> Vec<String> {
        let Some(count) = self.merged_from.first().map(|m| m.shard.count) else {
            return vec![self.run_id.clone(); cells.len()];
        };
        crate::shard::assign(cells, count)
            .into_iter()
            .map(|index| {
                // A shard left out by `merge --allow-partial` ran none of its cells: an id no
                // trace carries, so a stray trace in its place is not taken for a result.
                self.merged_from.iter().find(|m| m.shard.index == index).map_or_else(String::new, |m| m.run_id.clone())
            })
            .collect()
    }

    /// Every cell of the plan, in plan order (the order of [`crate::engine::plan`]).
    pub fn plan_cells(&self) -> Vec<PlannedCell> {
        let none = [String::new()];
        let ablations: &[String] = if self.ablations.is_empty() { &none } else { &self.ablations };
        let mut out = Vec::new();
        for case in &self.cases {
            for epoch in 1..=self.epochs {
                for p in &self.profiles {
                    for a in ablations {
                        out.push(PlannedCell {
                            cell_id: cell_id(&case.id, p, a, epoch, self.epochs),
                            case_id: case.id.clone(),
                            profile: p.clone(),
                            ablation: a.clone(),
                        });
                    }
                }
            }
        }
        out
    }

    /// The groups reports aggregate by, in plan order: the profiles, or in an ablate run every
    /// `profile/ablation` ([`crate::replay::CellSummary::group`]).
    pub fn groups(&self) -> Vec<String> {
        if self.ablations.is_empty() {
            return self.profiles.clone();
        }
        let mut out = Vec::new();
        for p in &self.profiles {
            out.extend(self.ablations.iter().map(|a| crate::replay::group_label(p, a)));
        }
        out
    }

    pub fn category_of(&self, case_id: &str) -> Option<String> {
        self.cases.iter().find(|c| c.id == case_id).map(|c| c.category.clone())
    }

    pub fn split_of(&self, case_id: &str) -> Option<String> {
        self.cases.iter().find(|c| c.id == case_id).map(|c| c.split.clone())
    }
}

/// The commit HEAD points at, and whether the working tree differs from it, when `root` is a
/// git repository (a worktree or a submodule too: git2 follows a `.git` file). None otherwise.
pub(crate) fn git_state(root: &Path) -> (Option<String>, Option<bool>) {
    let Ok(repo) = git2::Repository::open(root) else { return (None, None) };
    let head = repo.head().ok().and_then(|h| h.peel_to_commit().ok()).map(|c| c.id().to_string());
    let mut opts = git2::StatusOptions::new();
    opts.include_untracked(true).include_ignored(false).recurse_untracked_dirs(false);
    let dirty = repo.statuses(Some(&mut opts)).ok().map(|s| !s.is_empty());
    (head, dirty)
}

/// Whether the benchmark's folder or a fixture its cases use differs from the committed tree
/// (the files [`crate::bench::digest`] covers). None when the benchmark is not inside a git
/// work tree, or sits in an ignored folder (the gate's snapshot), where "committed" has no
/// meaning.
fn benchmark_dirty(bench: &Benchmark) -> Option<bool> {
    let repo = git2::Repository::discover(&bench.dir).ok()?;
    let workdir = repo.workdir()?.canonicalize().ok()?;
    let mut dirs = vec![bench.dir.clone()];
    dirs.extend(bench.cases.iter().map(|c| c.fixture_dir.clone()));
    let mut specs = Vec::new();
    for dir in dirs {
        let rel = dir.canonicalize().ok()?.strip_prefix(&workdir).ok()?.to_path_buf();
        if rel.as_os_str().is_empty() || repo.is_path_ignored(&rel).unwrap_or(true) {
            return None;
        }
        specs.push(rel.to_string_lossy().into_owned());
    }
    specs.sort();
    specs.dedup();
    let mut opts = git2::StatusOptions::new();
    opts.include_untracked(true).include_ignored(false).recurse_untracked_dirs(true).disable_pathspec_match(false);
    for spec in &specs {
        opts.pathspec(spec);
    }
    repo.statuses(Some(&mut opts)).ok().map(|s| !s.is_empty())
}

/// The stable id of a cell: `<case>__<profile>[__<ablation>][__e<epoch>]`. The ablation
/// appears only in ablate runs (empty otherwise) and the epoch suffix only when the plan has
/// several epochs, so ids of other runs never changed.
pub fn cell_id(case_id: &str, profile: &str, ablation: &str, epoch: u32, epochs: u32) -> String {
    let mut id = format!("{case_id}__{profile}");
    if !ablation.is_empty() {
        id.push_str("__");
        id.push_str(ablation);
    }
    if epochs > 1 {
        id.push_str(&format!("__e{epoch}"));
    }
    id
}

/// A run id: UTC time plus the process id, sortable and unique on one machine.
pub fn new_run_id() -> String {
    let ts = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let compact: String = ts.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
    format!("{}-{}", compact.to_lowercase(), std::process::id())
}

/// A run directory this process writes cells into; holds its lock while it lives.
#[derive(Debug)]
pub struct RunDir {
    path: PathBuf,
    manifest: Manifest,
    _lock: FileLock,
}

/// What `--resume` found in a run directory.
#[derive(Debug, Default)]
pub struct Resumed {
    /// Cells whose trace ended with an outcome the resume keeps; they are not run again.
    pub kept: Vec<CellSummary>,
    /// With `--retry-errors`: cells that had ended in an infrastructure error, as they ended;
    /// they run again.
    pub retried: Vec<CellSummary>,
}

impl RunDir {
    /// Creates a new run directory and writes its manifest. Takes the lock first, so a
    /// directory another process is writing is refused naming that process; then refuses a
    /// directory that already holds a run or holds anything else. Fails now (not after the
    /// first cell) when the place is not writable.
    pub fn create(path: &Path, manifest: Manifest) -> Result<RunDir, RunDirError> {
        let io = |source| RunDirError::Unusable { path: path.to_path_buf(), source };
        std::fs::create_dir_all(path).map_err(io)?;
        let path = path.canonicalize().map_err(io)?;
        let lock = lock(&path, &manifest.command).map_err(|e| match e {
            RunDirError::Io { path, source } => RunDirError::Unusable { path, source },
            e => e,
        })?;
        if path.join(MANIFEST).exists() {
            return Err(RunDirError::Taken { path });
        }
        // Cells and reports of a new run must not mix with files that were there before.
        let stray = std::fs::read_dir(&path)
            .map_err(|source| RunDirError::Unusable { path: path.clone(), source })?
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|name| name != LOCK && !(name == "cells" && dir_is_empty(&path.join("cells"))))
            .min();
        if let Some(entry) = stray {
            return Err(RunDirError::NotEmpty { path, entry });
        }
        std::fs::create_dir_all(path.join("cells"))
            .map_err(|source| RunDirError::Unusable { path: path.clone(), source })?;
        manifest.write(&path).map_err(|source| RunDirError::Unusable { path: path.clone(), source })?;
        Ok(RunDir { path, manifest, _lock: lock })
    }

    /// Opens an existing run directory to finish it (`--resume`): takes its lock, keeps every
    /// cell whose trace ended with an outcome (with `retry_errors`, only those that did not
    /// end in an infrastructure error: see [`is_retried`]), leaves the directories of
    /// interrupted cells that have a checkpoint (they continue from it), removes the
    /// directories of the others, and rewrites `results.jsonl` to hold exactly the kept cells.
    pub fn resume(path: &Path, retry_errors: bool) -> Result<(RunDir, Resumed), RunDirError> {
        let manifest = Manifest::read(path)?;
        // Its traces belong to the shard runs, and its cells to their directories' plans.
        if !manifest.merged_from.is_empty() {
            return Err(RunDirError::Merged { path: path.to_path_buf() });
        }
        let path = path.canonicalize().map_err(|source| RunDirError::Io { path: path.to_path_buf(), source })?;
        let io = |source| RunDirError::Io { path: path.clone(), source };
        let lock = lock(&path, &format!("{} --resume", manifest.command))?;
        // Read again under the lock: the one read before it only found the run to lock.
        let manifest = Manifest::read(&path)?;
        let mut kept = Vec::new();
        let mut retried = Vec::new();
        // Opening the pack's writer cuts a torn tail an interrupted append left (src/trace/pack.rs).
        let has_pack = path.join(crate::trace::pack::INDEX).exists();
        let mut pack = if has_pack { Some(PackWriter::open(&path).map_err(io)?) } else { None };
        for planned in manifest.cell_ids() {
            let cell_dir = path.join("cells").join(&planned.cell_id);
            match completed_cell(&cell_dir, &manifest.run_id) {
                Some(s) if retry_errors && s.outcome.is_some_and(is_retried) => {
                    // Its entry in the pack, if any, is replaced when the cell ends again.
                    if cell_dir.exists() {
                        std::fs::remove_dir_all(&cell_dir).map_err(io)?;
                    }
                    retried.push(s);
                }
                // An ended cell still plain (the run stopped between its end and the move into
                // the pack, or after the append): its trace is moved now, as the run would have.
                Some(s) if cell_dir.join(stored::TRACE).is_file() => {
                    let writer = match &mut pack {
                        Some(w) => w,
                        None => pack.insert(PackWriter::open(&path).map_err(io)?),
                    };
                    stored::settle(writer, &path, &planned.cell_id, &cell_dir).map_err(io)?;
                    kept.push(s);
                }
                Some(s) => kept.push(s),
                // An interrupted cell with a checkpoint continues from it (src/agent/checkpoint.rs).
                None if crate::agent::checkpoint::resumable(&cell_dir) => {}
                None if cell_dir.exists() => std::fs::remove_dir_all(&cell_dir).map_err(io)?,
                None => {}
            }
        }
        let mut lines = Vec::new();
        for s in &kept {
            lines.extend(serde_json::to_vec(s).map_err(|e| io(io::Error::other(e)))?);
            lines.push(b'\n');
        }
        crate::util::write_atomic(&path.join(RESULTS), &lines).map_err(io)?;
        Ok((RunDir { path: path.clone(), manifest, _lock: lock }, Resumed { kept, retried }))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    pub fn cell_dir(&self, cell_id: &str) -> PathBuf {
        self.path.join("cells").join(cell_id)
    }

    /// The appender of `results.jsonl`.
    pub fn results(&self) -> Result<ResultsFile, RunDirError> {
        ResultsFile::open(&self.path.join(RESULTS))
            .map_err(|source| RunDirError::Io { path: self.path.clone(), source })
    }
}

/// The outcomes `--resume --retry-errors` runs again: failures of the infrastructure around the
/// agent (the provider, a time limit, hcbench itself), which a later attempt may not meet.
/// A verifier error is not among them: it is the benchmark's own verifier failing on what the
/// agent left, and running the agent again would not fix it.
pub fn is_retried(outcome: Outcome) -> bool {
    matches!(outcome, Outcome::ProviderError | Outcome::HarnessError | Outcome::Timeout)
}

fn dir_is_empty(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_none())
}

/// Takes the run directory's lock for `command` (how the holder is named to a second writer).
fn lock(path: &Path, command: &str) -> Result<FileLock, RunDirError> {
    FileLock::acquire(&path.join(LOCK), command, Duration::ZERO, |_| {}).map_err(|e| match e {
        LockError::Busy { holder, .. } => RunDirError::Busy { path: path.to_path_buf(), holder },
        LockError::Io { source, .. } => RunDirError::Io { path: path.to_path_buf(), source },
    })
}

/// The cell's summary when its trace, read as a trace of run `run_id`, ended with an outcome
/// (kept by `--resume`). A trace that does not replay (cut, corrupt, a broken sequence) is not
/// a finished cell, so the cell runs again.
fn completed_cell(cell_dir: &Path, run_id: &str) -> Option<CellSummary> {
    let s = replay_trace_of(&cell_dir.join("trace.jsonl"), Some(run_id)).ok()?;
    match s.outcome {
        Some(Outcome::Cancelled) | None => None,
        Some(_) => Some(s),
    }
}

/// `results.jsonl` opened for appending: one line per finished cell, flushed at once so an
/// interrupted run keeps every line it wrote. Lines are written whole under a mutex, so cells
/// finishing together never interleave. As an [`EngineSink`] it appends every finished cell;
/// a failed write is kept and returned by [`ResultsFile::finish`], since a sink cannot fail
/// the cell that produced the event.
pub struct ResultsFile {
    path: PathBuf,
    file: Mutex<(File, Option<io::Error>)>,
}

impl ResultsFile {
    fn open(path: &Path) -> io::Result<ResultsFile> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(ResultsFile { path: path.to_path_buf(), file: Mutex::new((file, None)) })
    }

    pub fn append(&self, summary: &CellSummary) -> io::Result<()> {
        let mut line = serde_json::to_vec(summary).map_err(io::Error::other)?;
        line.push(b'\n');
        let mut f = self.file.lock().unwrap_or_else(|p| p.into_inner());
        f.0.write_all(&line)?;
        f.0.flush()
    }

    /// The first write that failed while the file was a sink, if any.
    pub fn finish(&self) -> Result<(), RunDirError> {
        match self.file.lock().unwrap_or_else(|p| p.into_inner()).1.take() {
            Some(source) => Err(RunDirError::Io { path: self.path.clone(), source }),
            None => Ok(()),
        }
    }
}

impl EngineSink for ResultsFile {
    fn event(&self, event: EngineEvent<'_>) {
        if let EngineEvent::CellFinished { summary, .. } = event
            && let Err(e) = self.append(summary)
        {
            self.file.lock().unwrap_or_else(|p| p.into_inner()).1.get_or_insert(e);
        }
    }
}

/// Reads `results.jsonl` back (tools and tests; reports are always rebuilt from traces).
pub fn read_results(run_dir: &Path) -> Result<Vec<CellSummary>, RunDirError> {
    let path = run_dir.join(RESULTS);
    let text = std::fs::read_to_string(&path).map_err(|source| RunDirError::Io { path: path.clone(), source })?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let s: CellSummary = serde_json::from_str(line).map_err(|e| RunDirError::CorruptResults {
            path: path.clone(),
            line: i + 1,
            message: e.to_string(),
        })?;
        if s.schema_version > SUMMARY_SCHEMA_VERSION {
            return Err(RunDirError::ResultsTooNew { path, line: i + 1, found: s.schema_version });
        }
        out.push(s);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(run_id: &str) -> Manifest {
        Manifest {
            schema_version: MANIFEST_SCHEMA_VERSION,
            run_id: run_id.into(),
            hcbench_version: "0".into(),
            git_commit: None,
            git_dirty: None,
            benchmark_digest: None,
            benchmark_dirty: None,
            command: "matrix".into(),
            benchmark: "b".into(),
            profiles: vec!["oracle".into(), "nop".into()],
            cases: vec![ManifestCase { id: "c-1".into(), category: "bugfix".into(), split: "train".into() }],
            epochs: 2,
            jobs: 1,
            started_at: String::new(),
            agent_spec: String::new(),
            agent_dir: None,
            sandbox: None,
            budget_usd: None,
            min_coverage: None,
            fail_under: None,
            ablations: Vec::new(),
            not_run: Vec::new(),
            shard: None,
            plan_digest: None,
            merged_from: Vec::new(),
        }
    }

    #[test]
    fn cells_are_planned_case_then_epoch_then_profile() {
        let ids: Vec<String> = manifest("r").cell_ids().into_iter().map(|c| c.cell_id).collect();
        assert_eq!(ids, ["c-1__oracle__e1", "c-1__nop__e1", "c-1__oracle__e2", "c-1__nop__e2"]);
        assert_eq!(cell_id("c-1", "oracle", "", 1, 1), "c-1__oracle", "no epoch suffix with one epoch");
        assert_eq!(cell_id("c-1", "oracle", "no_memory", 2, 3), "c-1__oracle__no_memory__e2");
        let mut m = manifest("r");
        m.profiles = vec!["oracle".into()];
        m.ablations = vec!["full".into(), "no_memory".into()];
        let ids: Vec<String> = m.cell_ids().into_iter().map(|c| c.cell_id).collect();
        assert_eq!(
            ids,
            [
                "c-1__oracle__full__e1",
                "c-1__oracle__no_memory__e1",
                "c-1__oracle__full__e2",
                "c-1__oracle__no_memory__e2"
            ]
        );
        assert_eq!(m.groups(), ["oracle/full", "oracle/no_memory"]);
    }

    #[test]
    fn a_run_directory_is_created_once_and_written_by_one_process() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run");
        let run = RunDir::create(&path, manifest("r1")).unwrap();
        assert_eq!(Manifest::read(&path).unwrap().run_id, "r1");
        // While it is written, a new run and a resume are both told who writes it.
        let holder = format!("pid {}, hcbench matrix, since ", std::process::id());
        let e = RunDir::create(&path, manifest("r2")).unwrap_err();
        assert!(matches!(e, RunDirError::Busy { .. }) && e.is_usage() && e.to_string().contains(&holder), "{e}");
        let e = RunDir::resume(&path, false).expect_err("the lock is held");
        assert!(e.to_string().contains("another hcbench process is writing") && e.to_string().contains(&holder), "{e}");
        drop(run);
        let e = RunDir::create(&path, manifest("r2")).unwrap_err();
        assert!(matches!(e, RunDirError::Taken { .. }) && e.is_usage(), "{e}");
        assert_eq!(Manifest::read(&path).unwrap().run_id, "r1", "the manifest is the first run's");
        let (resumed_run, resumed) = RunDir::resume(&path, false).unwrap();
        assert!(resumed.kept.is_empty() && resumed.retried.is_empty());
        // A new run given the folder while the resume holds it is told who holds it, not
        // that the folder holds a run (which it would only learn by looking inside).
        let e = RunDir::create(&path, manifest("r3")).unwrap_err().to_string();
        assert!(e.contains("hcbench matrix --resume, since"), "{e}");
        drop(resumed_run);
    }

    #[test]
    fn a_new_run_takes_only_an_empty_or_new_folder() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.txt"), "mine").unwrap();
        let e = RunDir::create(dir.path(), manifest("r")).unwrap_err();
        assert!(matches!(&e, RunDirError::NotEmpty { entry, .. } if entry == "notes.txt") && e.is_usage(), "{e}");
        assert!(!dir.path().join(MANIFEST).exists());
        // What a refused or failed attempt leaves (its lock file, an empty cells/) is no obstacle.
        std::fs::remove_file(dir.path().join("notes.txt")).unwrap();
        std::fs::create_dir(dir.path().join("cells")).unwrap();
        RunDir::create(dir.path(), manifest("r")).unwrap();
    }

    /// Writes a finished trace with `outcome` for `cell` of run `run_id`.
    fn finished(run: &Path, run_id: &str, cell: &str, outcome: Outcome) {
        let dir = run.join("cells").join(cell);
        std::fs::create_dir_all(&dir).unwrap();
        let mut w = crate::trace::TraceWriter::create(&dir.join("trace.jsonl"), run_id, cell).unwrap();
        w.append(crate::trace::EventBody::RunFinished {
            outcome,
            reward: 0.0,
            stop_reason: outcome.as_str().into(),
            reason: String::new(),
            elapsed_ms: 1,
        })
        .unwrap();
    }

    #[test]
    fn retry_errors_runs_infrastructure_errors_again_and_keeps_verdicts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run");
        drop(RunDir::create(&path, manifest("r")).unwrap());
        let plan: Vec<String> = manifest("r").cell_ids().into_iter().map(|c| c.cell_id).collect();
        let outcomes = [Outcome::Passed, Outcome::ProviderError, Outcome::Timeout, Outcome::VerifierError];
        for (cell, outcome) in plan.iter().zip(outcomes) {
            finished(&path, "r", cell, outcome);
        }
        let (run, plain) = RunDir::resume(&path, false).unwrap();
        assert_eq!(plain.kept.len(), 4, "a plain resume keeps every cell that ended");
        drop(run);
        let (_run, retry) = RunDir::resume(&path, true).unwrap();
        let ids = |v: &[CellSummary]| v.iter().map(|s| s.cell_id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&retry.kept), [plan[0].clone(), plan[3].clone()], "passed and verifier_error stay");
        assert_eq!(ids(&retry.retried), [plan[1].clone(), plan[2].clone()]);
        assert!(!path.join("cells").join(&plan[1]).exists(), "a retried cell starts from nothing");
        assert_eq!(read_results(&path).unwrap().len(), 2, "results.jsonl holds the kept cells only");
        assert!(is_retried(Outcome::HarnessError) && !is_retried(Outcome::Failed));
    }

    #[test]
    fn resume_does_not_keep_a_cell_whose_trace_is_of_another_run() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run");
        drop(RunDir::create(&path, manifest("r")).unwrap());
        let plan: Vec<String> = manifest("r").cell_ids().into_iter().map(|c| c.cell_id).collect();
        finished(&path, "r", &plan[0], Outcome::Passed);
        finished(&path, "another-run", &plan[1], Outcome::Passed);
        let (_run, resumed) = RunDir::resume(&path, false).unwrap();
        assert_eq!(resumed.kept.len(), 1);
        assert!(!path.join("cells").join(&plan[1]).exists(), "it runs again");
    }

    #[test]
    fn results_round_trip_and_a_bad_line_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::create(dir.path(), manifest("r")).unwrap();
        let results = run.results().unwrap();
        for id in ["a", "b"] {
            results.append(&CellSummary { cell_id: id.into(), ..Default::default() }).unwrap();
        }
        let read: Vec<String> = read_results(dir.path()).unwrap().into_iter().map(|s| s.cell_id).collect();
        assert_eq!(read, ["a", "b"]);
        std::fs::write(dir.path().join(RESULTS), "{}\nnot json\n").unwrap();
        let e = read_results(dir.path()).unwrap_err().to_string();
        assert!(e.contains("line 1") || e.contains("line 2"), "{e}");
    }
}
