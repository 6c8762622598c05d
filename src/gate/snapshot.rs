//! The snapshot: the files every cell of a gate runs from, taken once when the gate starts.
//!
//! Cells used to read the benchmark, its fixtures and the agent spec from the project's working
//! tree, each cell when it started. Whatever sat there reached the measurement, including what
//! `git status` does not show: an edit the index was told to overlook (`git update-index
//! --skip-worktree`), a file git ignores (a sourceless `.pyc` in a fixture shadows its module; a
//! `.gitignore` that ignores itself hides new files), and an edit made after Step 0 and undone
//! once the gate ended. The gate measured one tree and recorded a commit holding another.
//!
//! The snapshot is the tree the committed candidate will be: the paths cells read
//! ([`read_by_cells`]: `benchmarks/<name>/`, `fixtures/`, `agent_dir`, a `scripted:PATH`
//! script) as HEAD's tree has them, read through git2 (ignored and flagged files do not exist
//! there), with the candidate on top: every allowlisted file `git add -A` would commit, copied
//! from the working tree once. The candidate's blob ids are hashed from those copies and become
//! the pending record's binding, so what `record` accepts is byte for byte what ran, and nothing
//! written to the working tree after this point reaches a cell.
//!
//! It lives in a private directory ([`super::private_dir`]: in the gate's private area, a tmpfs
//! in the gate's own mount namespace where one can be made, else a 0700 folder outside the
//! project, swept when its owner died) laid out like the project root, so the benchmark loader, the spec
//! loader and the profile resolver read it as they read a project; their messages are turned
//! back into the project's paths ([`Snapshot::relocate`]). Outside git there is no HEAD: the
//! same paths are copied from the working tree as they are (ignored files included, as cells saw
//! them before), which still keeps later edits away from a running gate. The directory is not a
//! wall against a process of the same user that reaches it (through a running cell's
//! `/proc/<pid>/root`, or in the folder fallback) and writes into it; it removes every ordinary
//! way to make the working tree say something the commit does not.

use std::collections::BTreeMap;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::time::Instant;

use git2::Oid;

use super::config::Config;
use super::git::{Git, blob_id, paths_without_git};
use super::{GateError, candidate_spec, private_dir};
use crate::agent::spec::{AgentSpec, SpecError};
use crate::bench::{Benchmark, LoadError, load_benchmark};
use crate::model::Profile;
use crate::model::registry::Profiles;

/// The root-relative paths cells read: folders end with `/`.
pub(crate) fn read_by_cells(cfg: &Config) -> Vec<String> {
    let mut paths =
        vec![format!("benchmarks/{}/", cfg.benchmark), "fixtures/".to_string(), format!("{}/", cfg.agent_dir)];
    paths.extend(script_path(&cfg.profile));
    paths
}

/// The script of a `scripted:PATH` profile, when it lies inside the project (a relative path
/// without `..`); a script elsewhere is not the project's to snapshot.
pub(crate) fn script_path(profile: &str) -> Option<String> {
    let rel = profile.strip_prefix("scripted:")?.trim_start_matches("./");
    let path = Path::new(rel);
    let inside = !rel.is_empty() && path.components().all(|c| matches!(c, Component::Normal(_)));
    inside.then(|| rel.to_string())
}

fn covers(paths: &[String], rel: &str) -> bool {
    paths.iter().any(|p| if p.ends_with('/') { rel.starts_with(p.as_str()) } else { rel == p })
}

/// A gate's snapshot; the directory goes when the value drops.
pub(crate) struct Snapshot {
    dir: tempfile::TempDir,
    /// `dir`, canonical: the benchmark loader canonicalizes the paths it hands out.
    root: PathBuf,
    project: PathBuf,
    /// True when the committed part came from HEAD (false: from the working tree, outside git).
    from_head: bool,
    /// The candidate as copied: root-relative path -> git blob id.
    candidate: BTreeMap<String, String>,
}

impl Snapshot {
    /// Takes the snapshot of `project`: the `read` paths as `head` has them (or as the working
    /// tree has them outside git) where `allowlisted` refuses them, and the candidate's files
    /// where it accepts them.
    pub(crate) fn take(
        project: &Path,
        git: Option<(&Git, Oid)>,
        read: &[String],
        allowlisted: &dyn Fn(&str) -> bool,
    ) -> Result<Snapshot, GateError> {
        let started = Instant::now();
        let dir = private_dir(project).map_err(|e| GateError::Setup(e.to_string()))?;
        let root = dir.path().canonicalize().map_err(|source| io_error(dir.path(), source))?;
        let committed = |rel: &str| covers(read, rel) && !allowlisted(rel);
        let (from_committed, candidate_paths) = match git {
            Some((g, head)) => (g.extract(head, &committed, &root)?, g.candidate_paths(allowlisted)?),
            None => (
                copy_working_tree(project, read, &committed, &root)?,
                paths_without_git(project, allowlisted)?.into_iter().map(|(rel, _)| rel).collect(),
            ),
        };
        let mut candidate = BTreeMap::new();
        for rel in candidate_paths {
            let to = root.join(&rel);
            if copy_file(&project.join(&rel), &to).map_err(|source| io_error(&project.join(&rel), source))? {
                let id = blob_id(&to).map_err(|source| io_error(&to, source))?;
                candidate.extend(id.map(|id| (rel, id)));
            }
        }
        tracing::debug!(
            committed = from_committed,
            candidate = candidate.len(),
            from_head = git.is_some(),
            ms = started.elapsed().as_millis() as u64,
            "gate snapshot taken"
        );
        Ok(Snapshot { dir, root, project: project.to_path_buf(), from_head: git.is_some(), candidate })
    }

    /// The directory, laid out like the project root.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// The candidate's files as they were copied: root-relative path -> git blob id.
    pub(crate) fn candidate(&self) -> &BTreeMap<String, String> {
        &self.candidate
    }

    /// `text` with the snapshot's paths turned into the project's, for messages.
    pub(crate) fn relocate(&self, text: &str) -> String {
        let project = self.project.to_string_lossy();
        let mut out = text.replace(&*self.root.to_string_lossy(), &project);
        if self.dir.path() != self.root {
            out = out.replace(&*self.dir.path().to_string_lossy(), &project);
        }
        out
    }

    fn relocate_path(&self, path: &Path) -> PathBuf {
        match path.strip_prefix(&self.root) {
            Ok(rest) => self.project.join(rest),
            Err(_) => path.to_path_buf(),
        }
    }

    /// The benchmark `name` from the snapshot. A benchmark that is not committed, or broken as
    /// committed, is a setup error naming the project's files.
    pub(crate) fn benchmark(&self, name: &str) -> Result<Benchmark, GateError> {
        match load_benchmark(&self.root, name) {
            Ok(b) => Ok(b),
            Err(LoadError::NotFound { .. }) if self.from_head => {
                let file = self.project.join("benchmarks").join(name).join("benchmark.yaml");
                if !file.is_file() {
                    // Not in the working tree either: the loader's message lists what exists.
                    return Err(load_benchmark(&self.project, name).err().map_or_else(
                        || GateError::Setup(format!("benchmark `{name}` is not in HEAD's tree")),
                        GateError::Benchmark,
                    ));
                }
                Err(GateError::Setup(format!(
                    "benchmark `{name}` is not in HEAD's tree ({} is not committed); the gate runs the committed benchmark: commit it first",
                    file.display()
                )))
            }
            Err(e) => {
                let committed =
                    if self.from_head { " (as committed in HEAD, which is what the gate runs)" } else { "" };
                Err(GateError::Setup(format!("{}{committed}", self.relocate(&e.to_string()))))
            }
        }
    }

    /// The candidate's agent spec from the snapshot; its `dir` names the project's `agent_dir`.
    pub(crate) fn spec(&self, agent_dir: &str) -> Result<AgentSpec, SpecError> {
        let mut spec = candidate_spec(&self.root, agent_dir)
            .map_err(|e| SpecError { file: self.relocate_path(&e.file), message: self.relocate(&e.message) })?;
        if spec.dir.is_some() {
            spec.dir = Some(self.project.join(agent_dir));
        }
        Ok(spec)
    }

    /// A `scripted:PATH` profile resolved from the snapshot's copy of its script; None for any
    /// other profile (a model is not a file of the project).
    pub(crate) fn profile(&self, cfg: &Config, profiles: &Profiles) -> Option<Result<Profile, String>> {
        script_path(&cfg.profile)?;
        Some(profiles.resolve_at(&cfg.profile, &self.root).map_err(|e| self.relocate(&e.to_string())))
    }
}

fn io_error(path: &Path, source: io::Error) -> GateError {
    GateError::Io { context: format!("cannot take the gate's snapshot of {}", path.display()), source }
}

/// Outside git: copies the files under the `read` paths of `project` that `wanted` accepts
/// into `dest`, as they are (no ignore rules: cells saw every file). Returns how many.
fn copy_working_tree(
    project: &Path,
    read: &[String],
    wanted: &dyn Fn(&str) -> bool,
    dest: &Path,
) -> Result<usize, GateError> {
    let mut copied = 0;
    for top in read {
        let start = project.join(top.trim_end_matches('/'));
        if start.symlink_metadata().is_err() {
            continue;
        }
        for entry in ignore::WalkBuilder::new(&start).standard_filters(false).build() {
            let entry = entry.map_err(|e| io_error(&start, io::Error::other(e)))?;
            if entry.file_type().is_some_and(|t| t.is_dir()) {
                continue;
            }
            let Ok(rel) = entry.path().strip_prefix(project) else { continue };
            let rel = rel.to_string_lossy().replace('\\', "/");
            if wanted(&rel) && copy_file(entry.path(), &dest.join(&rel)).map_err(|e| io_error(entry.path(), e))? {
                copied += 1;
            }
        }
    }
    Ok(copied)
}

/// Copies one file (a symlink as a symlink, permissions kept); false when `from` is gone or
/// not a file.
fn copy_file(from: &Path, to: &Path) -> io::Result<bool> {
    let meta = match from.symlink_metadata() {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    if !(meta.is_file() || meta.file_type().is_symlink()) {
        return Ok(false);
    }
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir)?;
    }
    if meta.file_type().is_symlink() {
        std::os::unix::fs::symlink(std::fs::read_link(from)?, to)?;
    } else {
        std::fs::copy(from, to)?;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_read_the_benchmark_fixtures_agent_and_an_inside_script() {
        let dir = tempfile::tempdir().unwrap();
        let yaml = "benchmark: demo\nprofile: scripted:./tuning/s.yaml\nagent_dir: tuning/agent\n";
        std::fs::write(dir.path().join("experiment_config.yaml"), yaml).unwrap();
        let cfg = Config::load(dir.path(), None).unwrap();
        assert_eq!(read_by_cells(&cfg), ["benchmarks/demo/", "fixtures/", "tuning/agent/", "tuning/s.yaml"]);
        assert_eq!(script_path("scripted:../elsewhere.yaml"), None);
        assert_eq!(script_path("scripted:/abs.yaml"), None);
        assert_eq!(script_path("oracle"), None);
        let read = read_by_cells(&cfg);
        assert!(covers(&read, "fixtures/calc/calc.py") && covers(&read, "tuning/s.yaml"));
        assert!(!covers(&read, "benchmarks/demo2/benchmark.yaml") && !covers(&read, "tuning/s.yaml.bak"));
    }

    #[test]
    fn outside_git_later_edits_do_not_reach_the_snapshot() {
        let project = tempfile::tempdir().unwrap();
        let p = project.path();
        for (rel, text) in [("fixtures/fx/a.py", "x = 1\n"), ("agent/script.yaml", "default: []\n"), ("src/x.rs", "")] {
            std::fs::create_dir_all(p.join(rel).parent().unwrap()).unwrap();
            std::fs::write(p.join(rel), text).unwrap();
        }
        let read = vec!["fixtures/".to_string(), "agent/".to_string()];
        let snap = Snapshot::take(p, None, &read, &|rel: &str| rel.starts_with("agent/")).unwrap();
        std::fs::write(p.join("fixtures/fx/a.py"), "x = 2\n").unwrap();
        std::fs::write(p.join("agent/script.yaml"), "changed\n").unwrap();
        assert_eq!(std::fs::read_to_string(snap.root().join("fixtures/fx/a.py")).unwrap(), "x = 1\n");
        assert_eq!(std::fs::read_to_string(snap.root().join("agent/script.yaml")).unwrap(), "default: []\n");
        assert!(!snap.root().join("src/x.rs").exists(), "only what cells read");
        let id = Oid::hash_object(git2::ObjectType::Blob, b"default: []\n").unwrap().to_string();
        assert_eq!(snap.candidate().get("agent/script.yaml"), Some(&id));
        let shown = snap.relocate(&format!("{}/agent/script.yaml: bad", snap.root().display()));
        assert_eq!(shown, format!("{}/agent/script.yaml: bad", p.display()));
        let dir = snap.root().to_path_buf();
        drop(snap);
        assert!(!dir.exists(), "the snapshot goes with the gate");
    }
}
