//! The git side of the gate, read-only and in-process through git2 (never a `git` child).
//!
//! It answers four questions: what changed against HEAD (the file guard), which allowlisted
//! files make up the candidate (the pending record's binding), what HEAD's files were (the
//! gate's snapshot and paired mode run them; `record` compares them with the binding), and what
//! every commit since the last recorded one touched (`record`'s history guard).
//!
//! The file guard compares content, not git's bookkeeping: `git status` trusts the index, and
//! the index can be told to look away (`git update-index --skip-worktree` or
//! `--assume-unchanged`, or an edit that keeps the file's size and timestamps). So every file
//! HEAD tracks is also hashed and compared with HEAD's blob ([`Git::changes`]). Paths are `/`-separated;
//! git reports them relative to the repository's work tree, the gate relative to the project
//! root, which may be a folder inside the repository ([`Git::root_rel`] converts).
//!
//! Nothing here writes to the repository: blob ids of working-tree files are computed with
//! `Oid::hash_*`, which hashes without storing.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};

use git2::{AttrValue, ErrorCode, ObjectType, Oid, Repository, Status, StatusOptions, TreeWalkMode, TreeWalkResult};

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("reading the git repository at {workdir}: {source}")]
    Git { workdir: PathBuf, source: git2::Error },
    #[error("cannot read {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

/// An open repository whose work tree contains the project root.
pub(crate) struct Git {
    repo: Repository,
    workdir: PathBuf,
    /// The project root relative to the work tree, with a trailing `/` (empty when equal).
    prefix: String,
}

/// How a path differs from HEAD.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ChangeKind {
    /// Tracked at HEAD, and the index or the working tree differs.
    Tracked,
    /// Added to the index, not in HEAD.
    StagedNew,
    /// Not tracked and not ignored.
    Untracked,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Change {
    /// Relative to the repository's work tree.
    pub path: String,
    pub kind: ChangeKind,
    /// "modified", "deleted", "staged", "staged and modified", "untracked", ...
    pub detail: String,
    /// What kept `git status` from showing the change; None when it shows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hidden_by: Option<HiddenBy>,
}

/// Why `git status` does not show a working-tree file that differs from HEAD.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum HiddenBy {
    /// `git update-index --skip-worktree`.
    SkipWorktree,
    /// `git update-index --assume-unchanged`.
    AssumeUnchanged,
    /// No flag: the index's cached size and timestamps still match (an edit that restored them).
    IndexStat,
}

impl HiddenBy {
    /// The `git update-index` option that clears the flag, if there is one.
    fn clear_flag(self) -> Option<&'static str> {
        match self {
            HiddenBy::SkipWorktree => Some("--no-skip-worktree"),
            HiddenBy::AssumeUnchanged => Some("--no-assume-unchanged"),
            HiddenBy::IndexStat => None,
        }
    }

    fn describe(self) -> &'static str {
        match self {
            HiddenBy::SkipWorktree => "hidden from `git status` by `git update-index --skip-worktree`",
            HiddenBy::AssumeUnchanged => "hidden from `git status` by `git update-index --assume-unchanged`",
            HiddenBy::IndexStat => "although `git status` shows it unchanged (its size and timestamps were kept)",
        }
    }
}

impl Change {
    /// The command that puts this path back as HEAD has it.
    pub(crate) fn revert_hint(&self) -> String {
        let p = shell_quote(&self.path);
        // A flagged file is left alone by `git checkout`: the flag goes first.
        if let Some(flag) = self.hidden_by.and_then(HiddenBy::clear_flag) {
            return format!("git update-index {flag} -- {p} && git checkout HEAD -- {p}");
        }
        match self.kind {
            ChangeKind::Tracked => format!("git checkout HEAD -- {p}"),
            ChangeKind::StagedNew => format!("git rm --cached -- {p} && rm {p}"),
            ChangeKind::Untracked => format!("rm {p}"),
        }
    }
}

/// One commit and the paths it changed against its first parent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CommitChanges {
    pub id: String,
    pub summary: String,
    /// Relative to the repository's work tree.
    pub paths: Vec<String>,
}

/// The index entry flag `git update-index --assume-unchanged` sets (`CE_VALID`).
const INDEX_ASSUME_VALID: u16 = 0x8000;
/// The extended index entry flag `git update-index --skip-worktree` sets (`CE_SKIP_WORKTREE`).
const INDEX_SKIP_WORKTREE: u16 = 0x4000;

fn shell_quote(s: &str) -> String {
    if s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./+@%=:,".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// `Repository::discover`, with the fix in the error when the repository belongs to another user
/// (git's and libgit2's ownership check, which a gate run as its own user meets: docs/security.md).
pub(crate) fn discover(root: &Path) -> Result<Repository, git2::Error> {
    Repository::discover(root).map_err(|e| {
        if e.code() != ErrorCode::Owner {
            return e;
        }
        let message = format!(
            "{}: to let this user work on it, run as this user: git config --global --add safe.directory {}",
            e.message(),
            shell_quote(&root.to_string_lossy())
        );
        git2::Error::new(e.code(), e.class(), message)
    })
}

impl Git {
    /// Opens the repository containing `root`; None when `root` is not inside a work tree.
    pub(crate) fn open(root: &Path) -> Result<Option<Git>, GitError> {
        let root = root.canonicalize().map_err(|source| GitError::Io { path: root.to_path_buf(), source })?;
        let repo = match discover(&root) {
            Ok(r) => r,
            Err(e) if e.code() == ErrorCode::NotFound => return Ok(None),
            Err(source) => return Err(GitError::Git { workdir: root, source }),
        };
        let Some(workdir) = repo.workdir() else { return Ok(None) };
        let workdir = workdir.canonicalize().map_err(|source| GitError::Io { path: workdir.to_path_buf(), source })?;
        let prefix = match root.strip_prefix(&workdir) {
            Ok(rel) if rel.as_os_str().is_empty() => String::new(),
            Ok(rel) => format!("{}/", rel.to_string_lossy()),
            Err(_) => return Ok(None),
        };
        Ok(Some(Git { repo, workdir, prefix }))
    }

    fn err(&self) -> impl Fn(git2::Error) -> GitError + '_ {
        move |source| GitError::Git { workdir: self.workdir.clone(), source }
    }

    pub(crate) fn workdir(&self) -> &Path {
        &self.workdir
    }

    /// True when the project root is the work tree itself (paths print the same either way).
    pub(crate) fn root_is_workdir(&self) -> bool {
        self.prefix.is_empty()
    }

    /// The commit HEAD points at; None for a repository without commits.
    pub(crate) fn head(&self) -> Result<Option<Oid>, GitError> {
        match self.repo.head() {
            Ok(r) => Ok(Some(r.peel_to_commit().map_err(self.err())?.id())),
            Err(e) if e.code() == ErrorCode::UnbornBranch || e.code() == ErrorCode::NotFound => Ok(None),
            Err(e) => Err(self.err()(e)),
        }
    }

    /// A commit named by a full or abbreviated id; None when there is no such commit.
    pub(crate) fn resolve(&self, spec: &str) -> Option<Oid> {
        self.repo.revparse_single(spec).ok()?.peel_to_commit().ok().map(|c| c.id())
    }

    /// True when `ancestor` is `of` or one of its ancestors.
    pub(crate) fn is_ancestor(&self, ancestor: Oid, of: Oid) -> Result<bool, GitError> {
        Ok(ancestor == of || self.repo.graph_descendant_of(of, ancestor).map_err(self.err())?)
    }

    /// A work-tree path relative to the project root; None when it lies outside the root.
    pub(crate) fn root_rel(&self, repo_path: &str) -> Option<String> {
        repo_path.strip_prefix(self.prefix.as_str()).map(str::to_string)
    }

    /// Tracked paths whose index or working-tree content differs from HEAD, and untracked paths
    /// that are not ignored. A change staged and then undone in the working tree still shows:
    /// the index differs from HEAD. Content decides, not the index: `git status`'s answer is
    /// completed by hashing every file HEAD tracks under the project root
    /// ([`Git::hidden_changes`]), so an edit the index was told to overlook is a change too.
    pub(crate) fn changes(&self) -> Result<Vec<Change>, GitError> {
        let started = std::time::Instant::now();
        let mut out = self.status_changes()?;
        let status_ms = started.elapsed().as_millis() as u64;
        let shown: BTreeSet<String> = out.iter().map(|c| c.path.clone()).collect();
        out.extend(self.hidden_changes(&shown)?);
        let ms = started.elapsed().as_millis() as u64;
        tracing::debug!(status_ms, content_ms = ms - status_ms, "file guard: changes against HEAD");
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    /// Files HEAD tracks under the project root, not in `shown`, whose working-tree content
    /// differs from HEAD's blob (or that are gone), each with what hid it from `git status`.
    fn hidden_changes(&self, shown: &BTreeSet<String>) -> Result<Vec<Change>, GitError> {
        let Some(head) = self.head()? else { return Ok(Vec::new()) };
        let committed = self.files_at(head, &|_| true)?;
        let index = self.repo.index().map_err(self.err())?;
        let autocrlf = self.repo.config().ok().and_then(|c| c.get_string("core.autocrlf").ok());
        let autocrlf =
            autocrlf.is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "true" | "input" | "yes" | "1"));
        let mut out = Vec::new();
        for (rel, id) in committed {
            let repo_path = format!("{}{rel}", self.prefix);
            if shown.contains(&repo_path) {
                continue;
            }
            let abs = self.workdir.join(&repo_path);
            let now = blob_id(&abs).map_err(|source| GitError::Io { path: abs.clone(), source })?;
            if now.as_deref() == Some(id.as_str()) {
                continue;
            }
            let hidden_by = match index.get_path(Path::new(&repo_path), 0) {
                Some(e) if e.flags_extended & INDEX_SKIP_WORKTREE != 0 => HiddenBy::SkipWorktree,
                Some(e) if e.flags & INDEX_ASSUME_VALID != 0 => HiddenBy::AssumeUnchanged,
                // Unflagged, the raw bytes differ from the blob legitimately when git converts
                // them on checkout (line endings, LFS): `git status`, which applies the
                // conversion, has the last word there.
                _ if self.converted(&repo_path, autocrlf) => continue,
                _ => HiddenBy::IndexStat,
            };
            let what = if now.is_none() { "deleted" } else { "modified" };
            out.push(Change {
                path: repo_path,
                kind: ChangeKind::Tracked,
                detail: format!("{what}, {}", hidden_by.describe()),
                hidden_by: Some(hidden_by),
            });
        }
        Ok(out)
    }

    /// True when git may convert the file between blob and working tree (a `filter`, `text`,
    /// `eol`, `ident` or `working-tree-encoding` attribute, or `core.autocrlf`).
    fn converted(&self, repo_path: &str, autocrlf: bool) -> bool {
        autocrlf
            || ["filter", "text", "eol", "ident", "working-tree-encoding"].iter().any(|attr| {
                let v = self.repo.get_attr_bytes(Path::new(repo_path), attr, git2::AttrCheckFlags::FILE_THEN_INDEX);
                !matches!(AttrValue::from_bytes(v.ok().flatten()), AttrValue::Unspecified | AttrValue::False)
            })
    }

    /// What `git status` reports: see [`Git::changes`].
    fn status_changes(&self) -> Result<Vec<Change>, GitError> {
        let mut opts = StatusOptions::new();
        opts.include_untracked(true)
            .recurse_untracked_dirs(true)
            .include_ignored(false)
            .renames_head_to_index(false)
            .renames_index_to_workdir(false)
            .exclude_submodules(false);
        let statuses = self.repo.statuses(Some(&mut opts)).map_err(self.err())?;
        let mut out = Vec::new();
        for entry in statuses.iter() {
            let s = entry.status();
            if s.is_empty() || s.contains(Status::IGNORED) || s == Status::CURRENT {
                continue;
            }
            let path = String::from_utf8_lossy(entry.path_bytes()).into_owned();
            let staged = s.intersects(
                Status::INDEX_MODIFIED | Status::INDEX_DELETED | Status::INDEX_RENAMED | Status::INDEX_TYPECHANGE,
            );
            let (kind, detail) = if s.contains(Status::INDEX_NEW) {
                (ChangeKind::StagedNew, "new, staged".to_string())
            } else if s.contains(Status::WT_NEW) {
                (ChangeKind::Untracked, "untracked".to_string())
            } else {
                let wt = if s.contains(Status::WT_DELETED) {
                    Some("deleted")
                } else if s.intersects(Status::WT_MODIFIED | Status::WT_TYPECHANGE | Status::WT_RENAMED) {
                    Some("modified")
                } else {
                    None
                };
                let what = if s.contains(Status::INDEX_DELETED) { "deletion staged" } else { "staged" };
                let detail = match (staged, wt, s.contains(Status::CONFLICTED)) {
                    (_, _, true) => "conflicted".to_string(),
                    (true, Some(w), _) => format!("{what}, then {w} in the working tree"),
                    (true, None, _) => what.to_string(),
                    (false, Some(w), _) => w.to_string(),
                    (false, None, _) => "changed".to_string(),
                };
                (ChangeKind::Tracked, detail)
            };
            out.push(Change { path, kind, detail, hidden_by: None });
        }
        Ok(out)
    }

    /// The candidate's paths: every file in the working tree that git would commit with
    /// `git add -A` (tracked, or untracked and not ignored) and that `wanted` accepts, relative
    /// to the project root. A path may name a file that no longer exists (deleted, not staged).
    pub(crate) fn candidate_paths(&self, wanted: &dyn Fn(&str) -> bool) -> Result<Vec<String>, GitError> {
        let mut paths: BTreeSet<String> = BTreeSet::new();
        let index = self.repo.index().map_err(self.err())?;
        for e in index.iter() {
            paths.insert(String::from_utf8_lossy(&e.path).into_owned());
        }
        for c in self.status_changes()? {
            if c.kind == ChangeKind::Untracked {
                paths.insert(c.path);
            }
        }
        Ok(paths.iter().filter_map(|p| self.root_rel(p)).filter(|rel| wanted(rel)).collect())
    }

    /// The files of `commit` that `wanted` accepts: root-relative path -> blob id.
    pub(crate) fn files_at(
        &self,
        commit: Oid,
        wanted: &dyn Fn(&str) -> bool,
    ) -> Result<BTreeMap<String, String>, GitError> {
        let tree = self.repo.find_commit(commit).and_then(|c| c.tree()).map_err(self.err())?;
        let mut out = BTreeMap::new();
        tree.walk(TreeWalkMode::PreOrder, |dir, entry| {
            if entry.kind() == Some(ObjectType::Blob) {
                let repo_path = format!("{dir}{}", String::from_utf8_lossy(entry.name_bytes()));
                if let Some(rel) = self.root_rel(&repo_path)
                    && wanted(&rel)
                {
                    out.insert(rel, entry.id().to_string());
                }
            }
            TreeWalkResult::Ok
        })
        .map_err(self.err())?;
        Ok(out)
    }

    /// Writes the files of `commit` that `wanted` accepts under `dest`, laid out as in the
    /// project root (symlinks as symlinks, executables executable). Returns how many were
    /// written. One walk of the tree, each blob written as it is met: the gate's snapshot
    /// extracts a whole benchmark and its fixtures with this.
    pub(crate) fn extract(&self, commit: Oid, wanted: &dyn Fn(&str) -> bool, dest: &Path) -> Result<usize, GitError> {
        let tree = self.repo.find_commit(commit).and_then(|c| c.tree()).map_err(self.err())?;
        let mut written = 0;
        let mut failure = None;
        // Folders made so far: one `mkdir` per folder, not one per file.
        let mut made: BTreeSet<PathBuf> = BTreeSet::new();
        tree.walk(TreeWalkMode::PreOrder, |dir, entry| {
            if entry.kind() != Some(ObjectType::Blob) {
                return TreeWalkResult::Ok;
            }
            let repo_path = format!("{dir}{}", String::from_utf8_lossy(entry.name_bytes()));
            let Some(rel) = self.root_rel(&repo_path).filter(|rel| wanted(rel)) else { return TreeWalkResult::Ok };
            match self.write_blob(entry, &dest.join(rel), &mut made) {
                Ok(()) => {
                    written += 1;
                    TreeWalkResult::Ok
                }
                Err(e) => {
                    failure = Some(e);
                    TreeWalkResult::Abort
                }
            }
        })
        .or_else(|e| if failure.is_some() { Ok(()) } else { Err(self.err()(e)) })?;
        match failure {
            Some(e) => Err(e),
            None => Ok(written),
        }
    }

    fn write_blob(
        &self,
        entry: &git2::TreeEntry<'_>,
        path: &Path,
        made: &mut BTreeSet<PathBuf>,
    ) -> Result<(), GitError> {
        let blob = self.repo.find_blob(entry.id()).map_err(self.err())?;
        let io_err = |source| GitError::Io { path: path.to_path_buf(), source };
        if let Some(dir) = path.parent()
            && !made.contains(dir)
        {
            std::fs::create_dir_all(dir).map_err(io_err)?;
            made.insert(dir.to_path_buf());
        }
        if entry.filemode() == 0o120000 {
            let target = String::from_utf8_lossy(blob.content()).into_owned();
            std::os::unix::fs::symlink(target, path).map_err(io_err)?;
        } else {
            std::fs::write(path, blob.content()).map_err(io_err)?;
            // A fixture's scripts (a git hook, a test runner) must stay executable.
            if entry.filemode() == 0o100755 {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).map_err(io_err)?;
            }
        }
        Ok(())
    }

    /// Every commit reachable from `head` but not from `base` (all of them when `base` is
    /// None), newest first, with the paths each changed against its first parent (a root
    /// commit: everything it holds).
    pub(crate) fn commits_since(&self, base: Option<Oid>, head: Oid) -> Result<Vec<CommitChanges>, GitError> {
        let mut walk = self.repo.revwalk().map_err(self.err())?;
        walk.push(head).map_err(self.err())?;
        if let Some(b) = base {
            walk.hide(b).map_err(self.err())?;
        }
        let mut out = Vec::new();
        for id in walk {
            let id = id.map_err(self.err())?;
            let commit = self.repo.find_commit(id).map_err(self.err())?;
            let tree = commit.tree().map_err(self.err())?;
            let parent_tree = match commit.parents().next() {
                Some(p) => Some(p.tree().map_err(self.err())?),
                None => None,
            };
            let diff = self.repo.diff_tree_to_tree(parent_tree.as_ref(), Some(&tree), None).map_err(self.err())?;
            let mut paths = BTreeSet::new();
            for d in diff.deltas() {
                for f in [d.old_file(), d.new_file()] {
                    if let Some(p) = f.path_bytes() {
                        paths.insert(String::from_utf8_lossy(p).into_owned());
                    }
                }
            }
            out.push(CommitChanges {
                id: id.to_string(),
                summary: String::from_utf8_lossy(commit.summary_bytes().unwrap_or_default()).into_owned(),
                paths: paths.into_iter().collect(),
            });
        }
        Ok(out)
    }
}

/// The git blob id of a working-tree file (a symlink hashes its target, as git stores it);
/// None when the path does not exist or is not a file.
pub(crate) fn blob_id(path: &Path) -> io::Result<Option<String>> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let id = if meta.file_type().is_symlink() {
        let target = std::fs::read_link(path)?;
        Oid::hash_object(ObjectType::Blob, target.to_string_lossy().as_bytes())
    } else if meta.is_file() {
        Oid::hash_file(ObjectType::Blob, path)
    } else {
        return Ok(None);
    };
    id.map(|i| Some(i.to_string())).map_err(io::Error::other)
}

/// Outside git: the allowlisted files under `root` (hidden files included, ignore files
/// honoured, `workspace/` and `.git/` skipped), as root-relative path -> blob id.
pub(crate) fn files_without_git(
    root: &Path,
    wanted: &dyn Fn(&str) -> bool,
) -> Result<BTreeMap<String, String>, GitError> {
    let mut out = BTreeMap::new();
    for (rel, path) in paths_without_git(root, wanted)? {
        if let Some(id) = blob_id(&path).map_err(|source| GitError::Io { path: path.clone(), source })? {
            out.insert(rel, id);
        }
    }
    Ok(out)
}

/// The `/`-separated paths (and where they are) of [`files_without_git`], without hashing.
pub(crate) fn paths_without_git(
    root: &Path,
    wanted: &dyn Fn(&str) -> bool,
) -> Result<Vec<(String, std::path::PathBuf)>, GitError> {
    let mut out = Vec::new();
    let walker = ignore::WalkBuilder::new(root)
        .hidden(false)
        .require_git(false)
        .filter_entry(|e| {
            let name = e.file_name();
            !(e.depth() == 1 && (name == "workspace" || name == ".git"))
        })
        .build();
    for entry in walker {
        let entry = entry.map_err(|e| GitError::Io { path: root.to_path_buf(), source: io::Error::other(e) })?;
        if entry.file_type().is_some_and(|t| t.is_dir()) {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(root) else { continue };
        let rel = rel.to_string_lossy().replace('\\', "/");
        if wanted(&rel) {
            out.push((rel, entry.path().to_path_buf()));
        }
    }
    Ok(out)
}

/// The first 12 characters of a commit id or digest, as shown to people.
pub(crate) fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit_all(repo: &Repository, msg: &str) -> Oid {
        let mut index = repo.index().unwrap();
        index.add_all(["*"], git2::IndexAddOption::DEFAULT, None).unwrap();
        index.update_all(["*"], None).unwrap();
        index.write().unwrap();
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("t", "t@example.com").unwrap();
        let parents: Vec<git2::Commit> = repo.head().ok().and_then(|h| h.peel_to_commit().ok()).into_iter().collect();
        let parents: Vec<&git2::Commit> = parents.iter().collect();
        repo.commit(Some("HEAD"), &sig, &sig, msg, &tree, &parents).unwrap()
    }

    #[test]
    fn changes_candidates_history_and_extraction() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let repo = Repository::init(root).unwrap();
        std::fs::write(root.join(".gitignore"), "/workspace/\n*.log\n").unwrap();
        std::fs::create_dir_all(root.join("agent")).unwrap();
        std::fs::write(root.join("agent/system.md"), "v1").unwrap();
        std::fs::write(root.join("README.md"), "readme").unwrap();
        let first = commit_all(&repo, "first");
        let git = Git::open(root).unwrap().unwrap();
        assert_eq!(git.head().unwrap(), Some(first));
        assert!(git.changes().unwrap().is_empty());

        std::fs::write(root.join("agent/system.md"), "v2").unwrap();
        std::fs::write(root.join("notes.txt"), "x").unwrap();
        std::fs::write(root.join("debug.log"), "ignored").unwrap();
        let changes = git.changes().unwrap();
        let paths: Vec<(&str, ChangeKind)> = changes.iter().map(|c| (c.path.as_str(), c.kind)).collect();
        assert_eq!(paths, [("agent/system.md", ChangeKind::Tracked), ("notes.txt", ChangeKind::Untracked)]);
        assert_eq!(changes[1].revert_hint(), "rm notes.txt");

        let agent = |p: &str| p.starts_with("agent/");
        let cand: BTreeMap<String, String> = git
            .candidate_paths(&agent)
            .unwrap()
            .into_iter()
            .filter_map(|rel| blob_id(&root.join(&rel)).unwrap().map(|id| (rel, id)))
            .collect();
        assert_eq!(cand.len(), 1);
        assert_eq!(cand["agent/system.md"], Oid::hash_object(ObjectType::Blob, b"v2").unwrap().to_string());
        let at_head = git.files_at(first, &agent).unwrap();
        assert_ne!(at_head, cand);

        let out = tempfile::tempdir().unwrap();
        assert_eq!(git.extract(first, &agent, out.path()).unwrap(), 1);
        assert_eq!(std::fs::read_to_string(out.path().join("agent/system.md")).unwrap(), "v1");

        std::fs::remove_file(root.join("notes.txt")).unwrap();
        let second = commit_all(&repo, "second: agent");
        std::fs::write(root.join("README.md"), "changed").unwrap();
        let third = commit_all(&repo, "third: readme");
        let commits = git.commits_since(Some(first), third).unwrap();
        assert_eq!(commits.len(), 2);
        assert_eq!(commits[0].paths, ["README.md"]);
        assert_eq!(commits[1].paths, ["agent/system.md"]);
        assert!(git.is_ancestor(first, third).unwrap() && !git.is_ancestor(third, second).unwrap());
        assert_eq!(git.resolve(&third.to_string()[..10]), Some(third));
        assert_eq!(git.files_at(third, &agent).unwrap(), cand, "the committed candidate matches");
    }

    fn git(dir: &Path, args: &[&str]) {
        let ok = std::process::Command::new("git").current_dir(dir).args(args).status().unwrap().success();
        assert!(ok, "git {args:?}");
    }

    #[test]
    fn edits_hidden_from_git_status_are_changes_by_content() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let repo = Repository::init(root).unwrap();
        for f in ["a.txt", "b.txt", "c.txt", "d.txt"] {
            std::fs::write(root.join(f), "committed\n").unwrap();
        }
        commit_all(&repo, "first");
        git(root, &["update-index", "--skip-worktree", "a.txt"]);
        git(root, &["update-index", "--assume-unchanged", "b.txt"]);
        std::fs::write(root.join("a.txt"), "rigged\n").unwrap();
        std::fs::write(root.join("b.txt"), "rigged\n").unwrap();
        std::fs::remove_file(root.join("c.txt")).unwrap();
        git(root, &["update-index", "--skip-worktree", "d.txt"]); // flagged, content unchanged
        let git = Git::open(root).unwrap().unwrap();
        assert!(git.status_changes().unwrap().iter().all(|c| c.path != "a.txt"), "git status is blind to a.txt");
        let changes = git.changes().unwrap();
        let seen: Vec<(&str, Option<HiddenBy>)> = changes.iter().map(|c| (c.path.as_str(), c.hidden_by)).collect();
        assert_eq!(
            seen,
            [("a.txt", Some(HiddenBy::SkipWorktree)), ("b.txt", Some(HiddenBy::AssumeUnchanged)), ("c.txt", None)]
        );
        assert_eq!(changes[0].detail, "modified, hidden from `git status` by `git update-index --skip-worktree`");
        assert_eq!(
            changes[0].revert_hint(),
            "git update-index --no-skip-worktree -- a.txt && git checkout HEAD -- a.txt"
        );
        assert_eq!(
            changes[1].revert_hint(),
            "git update-index --no-assume-unchanged -- b.txt && git checkout HEAD -- b.txt"
        );
    }

    #[test]
    fn outside_git_there_is_no_repository() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Git::open(dir.path()).unwrap().is_none());
        std::fs::create_dir_all(dir.path().join("agent")).unwrap();
        std::fs::write(dir.path().join("agent/a.md"), "a").unwrap();
        std::fs::create_dir_all(dir.path().join("workspace")).unwrap();
        std::fs::write(dir.path().join("workspace/agent-notes.md"), "a").unwrap();
        let files =
            files_without_git(dir.path(), &|p: &str| p.starts_with("agent/") || p.starts_with("workspace/")).unwrap();
        assert_eq!(files.keys().collect::<Vec<_>>(), ["agent/a.md"]);
    }
}
