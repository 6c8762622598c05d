//! The anchor of the gate's state: a copy of `workspace/`'s state files kept in git, under a ref
//! of hcbench's own, so that losing the workspace is detected instead of read as a first run.
//!
//! **Why.** The state files live in the gitignored `workspace/`, and [`super::state`] protects
//! each one by the hash `.gate-state.json` recorded for it. Deleting the whole directory
//! (`rm -rf workspace`, `git clean -fdx`) deleted the hashes too, and the next gate saw a fresh
//! project: no best score, an empty regression set, no audit log, so a worse candidate passed
//! as "no best recorded yet".
//!
//! **Where, and why there.** Every write of a state file ([`super::state::GateFiles`]'s
//! `save_state`, which every writer goes through: a passing gate, `record`, `run --split train`,
//! an acceptance) also writes a commit whose tree holds the files as hcbench wrote them, and
//! points `refs/hcbench/gate-state` at it (its parent is the previous anchor commit, so the
//! state's whole history is kept). A ref was chosen over a state directory outside the project:
//! it travels with the repository's `.git` (no per-user path keyed by a project path that
//! changes when the project moves), no ordinary command of the loop touches it (`rm -rf
//! workspace`, `git clean -fdx`, `git reset --hard`, `git stash`, `git checkout`), it is written
//! through git2 with the objects git already stores safely, and removing it takes a deliberate
//! `git update-ref -d` on a name that says whose it is. A project below the repository's work
//! tree, or in a linked worktree, gets its own ref (`refs/hcbench/gate-state-<key>`), so two
//! projects never share one.
//!
//! **What is checked** (on every load, under the workspace lock): the workspace's
//! `.gate-state.json` must be byte for byte the anchored copy. Missing while the anchor exists:
//! the workspace was lost ([`AnchorError::WorkspaceLost`]); different: the workspace was
//! replaced, e.g. by an older backup with a lower best ([`AnchorError::Differs`]); present and
//! marked anchored while the ref is gone: the anchor was deleted ([`AnchorError::AnchorLost`]).
//! Each is a usage error (exit 2) naming the human's recovery: `hcbench gate --restore-state`
//! writes the anchored files back, `hcbench gate --accept-state-reset` makes the workspace's
//! state (possibly empty) the anchored one, logged in the audit log. Since `.gate-state.json`
//! holds every other file's hash, equality with the anchor plus the hash check covers them all.
//!
//! Outside git there is no anchor and the state is protected by hashes only, as before. Like the
//! hashes, the anchor makes tampering evident, not impossible: a process that deletes both the
//! workspace and the ref is not stopped.

use std::collections::BTreeMap;
use std::path::Path;

use git2::{ErrorCode, ObjectType, Oid, Repository, Signature};

use crate::util::sha256_hex;

/// The ref of a project at the root of a repository's main work tree.
const REF: &str = "refs/hcbench/gate-state";

#[derive(Debug, thiserror::Error)]
pub enum AnchorError {
    #[error("cannot read or write the anchor of the gate's state ({refname}): {source}")]
    Git { refname: String, source: git2::Error },
    #[error(
        "the gate's state is missing from workspace/ ({state} does not exist) but {refname} holds it ({summary}): the workspace was deleted or reset, and the gate does not start over silently. Restore it with `hcbench gate --restore-state` (it writes the anchored files back, then runs the gate); if a human means to start a new history: `hcbench gate --accept-state-reset` (logged)"
    )]
    WorkspaceLost { state: &'static str, refname: String, summary: String },
    #[error(
        "{state} differs from the copy anchored in {refname} (commit {commit}): the workspace's state was replaced (e.g. by an older copy) or an hcbench write was interrupted. Restore the anchored state with `hcbench gate --restore-state`; if a human means the workspace's state to replace it: `hcbench gate --accept-state-reset` (logged)"
    )]
    Differs { state: &'static str, refname: String, commit: String },
    #[error(
        "{refname} was deleted, but {state} says the gate's state was anchored there, so nothing confirms the workspace's state. If a human deleted the ref on purpose, anchor the workspace's state again: `hcbench gate --accept-state-reset` (logged)"
    )]
    AnchorLost { state: &'static str, refname: String },
    #[error("--restore-state: there is no anchored gate state to restore ({0})")]
    NothingToRestore(String),
}

impl AnchorError {
    /// False only when git itself failed (exit 3); every other case is the human's to resolve.
    pub(crate) fn is_usage(&self) -> bool {
        // A repository of another user is a set-up matter with a fix (the message names it).
        !matches!(self, AnchorError::Git { source, .. } if source.code() != git2::ErrorCode::Owner)
    }
}

/// The anchored state: the files of the anchor commit, by root-relative name
/// (`workspace/suite.json`).
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    pub commit: Oid,
    pub files: BTreeMap<String, Vec<u8>>,
}

/// The ref holding a project's anchored state, in the project's repository.
pub(crate) struct Anchor {
    repo: Repository,
    pub refname: String,
}

impl Anchor {
    /// The anchor of the project at `root`; None outside a git work tree.
    pub(crate) fn open(root: &Path) -> Result<Option<Anchor>, AnchorError> {
        let git = |source| AnchorError::Git { refname: REF.into(), source };
        let Ok(root) = root.canonicalize() else { return Ok(None) };
        let repo = match super::git::discover(&root) {
            Ok(r) => r,
            Err(e) if e.code() == ErrorCode::NotFound => return Ok(None),
            Err(e) => return Err(git(e)),
        };
        let Some(workdir) = repo.workdir().and_then(|w| w.canonicalize().ok()) else { return Ok(None) };
        let Ok(rel) = root.strip_prefix(&workdir) else { return Ok(None) };
        // Refs outside refs/heads are shared by every worktree of a repository: key the ref by
        // the worktree and the project's place in it, so two projects never share an anchor.
        let mut key = rel.to_string_lossy().replace('\\', "/");
        if repo.is_worktree() {
            let wt = git2::Worktree::open_from_repository(&repo).map_err(git)?;
            key = format!("{}:{key}", wt.name().ok().flatten().unwrap_or_default());
        }
        let refname =
            if key.is_empty() { REF.to_string() } else { format!("{REF}-{}", &sha256_hex(key.as_bytes())[..16]) };
        Ok(Some(Anchor { repo, refname }))
    }

    fn err(&self) -> impl Fn(git2::Error) -> AnchorError + '_ {
        |source| AnchorError::Git { refname: self.refname.clone(), source }
    }

    /// The anchor commit the ref points at, without reading its files; None when the ref does
    /// not exist.
    pub(crate) fn head(&self) -> Result<Option<Oid>, AnchorError> {
        match self.repo.find_reference(&self.refname) {
            Ok(r) => Ok(Some(r.peel_to_commit().map_err(self.err())?.id())),
            Err(e) if e.code() == ErrorCode::NotFound => Ok(None),
            Err(e) => Err(self.err()(e)),
        }
    }

    /// The anchored files; None when the ref does not exist.
    pub(crate) fn read(&self) -> Result<Option<Snapshot>, AnchorError> {
        let Some(id) = self.head()? else { return Ok(None) };
        let commit = self.repo.find_commit(id).map_err(self.err())?;
        let mut files = BTreeMap::new();
        for entry in commit.tree().map_err(self.err())?.iter() {
            if entry.kind() != Some(ObjectType::Blob) {
                continue;
            }
            let blob = self.repo.find_blob(entry.id()).map_err(self.err())?;
            files.insert(format!("workspace/{}", entry.name().unwrap_or_default()), blob.content().to_vec());
        }
        Ok(Some(Snapshot { commit: commit.id(), files }))
    }

    /// Anchors `files` (root-relative `workspace/...` names): a new commit on top of the
    /// previous anchor commit, and the ref moved to it only if it still points where it did
    /// when read (the workspace lock makes a race unlikely; this makes one harmless).
    pub(crate) fn write(&self, files: &BTreeMap<String, Vec<u8>>) -> Result<Oid, AnchorError> {
        let err = self.err();
        let previous = self.head()?;
        let mut tree = self.repo.treebuilder(None).map_err(&err)?;
        for (name, bytes) in files {
            let blob = self.repo.blob(bytes).map_err(&err)?;
            tree.insert(name.trim_start_matches("workspace/"), blob, 0o100644).map_err(&err)?;
        }
        let tree = self.repo.find_tree(tree.write().map_err(&err)?).map_err(&err)?;
        // hcbench's own signature: the anchor must not depend on the user's git config.
        let sig = Signature::now("hcbench", "hcbench@localhost").map_err(&err)?;
        let parent = previous.map(|p| self.repo.find_commit(p)).transpose().map_err(&err)?;
        let parents: Vec<&git2::Commit> = parent.iter().collect();
        let id = self.repo.commit(None, &sig, &sig, "hcbench gate state", &tree, &parents).map_err(&err)?;
        let log = "hcbench: gate state";
        match previous {
            Some(p) => self.repo.reference_matching(&self.refname, id, true, p, log),
            None => self.repo.reference(&self.refname, id, false, log),
        }
        .map_err(&err)?;
        Ok(id)
    }
}
