//! Workspaces: a fresh, private copy of a fixture for each cell.
//!
//! Fixtures in the repository are never written to: every cell works in its own copy, made in
//! a folder outside the project ([`crate::sandbox::Isolation`]), so that nothing a cell runs
//! (git above all, which looks for a repository in every parent folder) can find the project,
//! its benchmark or its history. A cell of a run directory reaches it through the run's one link
//! to its workspaces, `<run_dir>/workspaces/<cell>` ([`of_cell`]), and has no link of its own;
//! any other cell folder links to it (`workspace`). Files are reflinked where the filesystem supports it (copy-on-write, so a
//! later write never reaches the fixture) and copied otherwise; hard links are never used
//! because they would share mutable bytes; whether the file systems reflink is asked once per
//! process, not once per cell. Symlinks are recreated as symlinks, not followed, so
//! the policy sees the same tree the fixture has. A copied file keeps its fixture file's
//! modification time (as `cp -p` does): a later write always moves it, whatever the file
//! system's clock tick, so the checkpoint's first digests can trust a copy's stat at once
//! (src/agent/checkpoint.rs). What a copy made is kept in one record per workspace: for the
//! first digests of the workspace ([`take_copied`]), and, as a listing with each entry's stamp,
//! for the tools' searches and the repo map's stamp of the fixture ([`copy_listing`]). The engine may copy a waiting cell's workspace
//! ahead, while the running cells wait on their commands ([`copy_ahead`], [`fresh_or_ahead`]). The copy names every entry from its open folder (`openat`, `mkdirat`,
//! ...), not by its whole path, and moves a file's bytes in the kernel (`copy_file_range`, or
//! `sendfile` between two file systems that refuse it, asked once per process).

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use crate::util::Stamp;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

#[derive(Debug, thiserror::Error)]
#[error("cannot create workspace {dest} from fixture {fixture}: {source}")]
pub struct WorkspaceError {
    pub fixture: PathBuf,
    pub dest: PathBuf,
    #[source]
    pub source: io::Error,
}

/// Copies `fixture` into `dest` (its parents are made), links `link` to it when `link`
/// differs from `dest` and the workspace cannot be reached through the run's `workspaces` link
/// (see [`link_target`]), and returns the canonical `dest`. A `dest` that exists is the leftover of
/// an interrupted attempt at the same cell (`matrix --resume` runs it again): it is removed
/// first, never reused.
pub fn fresh(fixture: &Path, dest: &Path, link: &Path) -> Result<PathBuf, WorkspaceError> {
    let ws = copy_fixture(fixture, dest)?;
    link_to(&ws, link).map_err(|source| WorkspaceError { fixture: fixture.into(), dest: dest.into(), source })?;
    Ok(ws)
}

/// [`fresh`]'s copy, without the link: returns the canonical `dest`, its copy's record kept.
fn copy_fixture(fixture: &Path, dest: &Path) -> Result<PathBuf, WorkspaceError> {
    let wrap = |source| WorkspaceError { fixture: fixture.to_path_buf(), dest: dest.to_path_buf(), source };
    if dest.symlink_metadata().is_ok() {
        fs::remove_dir_all(dest).map_err(wrap)?;
    }
    if let Some(parent) = dest.parent() {
        fs::create_dir_all(parent).map_err(wrap)?;
    }
    fs::create_dir(dest).map_err(wrap)?;
    let mut copied = Copied {
        fixture: fixture.to_path_buf(),
        started: SystemTime::now(),
        files: HashMap::new(),
        folders: HashMap::new(),
        symlinks: HashMap::new(),
        names_utf8: true,
    };
    let devices = (
        rustix::fs::stat(fixture).map_err(io::Error::from).map_err(wrap)?.st_dev,
        rustix::fs::stat(dest).map_err(io::Error::from).map_err(wrap)?.st_dev,
    );
    let mut listing = CopyListing {
        fixture: copied.fixture.clone(),
        started: copied.started,
        plain: true,
        folders: HashMap::new(),
        files: HashMap::new(),
        fixture_entries: None,
    };
    let mut ways = Ways::known(devices);
    let dirs = open_dir(rustix::fs::CWD, fixture)
        .and_then(|src| Ok((src, open_dir(rustix::fs::CWD, dest)?)))
        .map_err(io::Error::from)
        .map_err(wrap)?;
    listing.fixture_entries =
        copy_tree((fixture, dest), dirs, &mut ways, "", (&mut copied, &mut listing)).map_err(wrap)?;
    ways.remember(devices);
    let dest = dest.canonicalize().map_err(wrap)?;
    listing.plain &= copied.names_utf8;
    keep_record(&dest, copied, listing);
    Ok(dest)
}

/// Links `link` to the workspace `ws` (canonical) unless `link` is `ws` or the run's
/// `workspaces` link reaches it ([`link_target`]).
fn link_to(ws: &Path, link: &Path) -> io::Result<()> {
    if link != ws
        && let Some(target) = link_target(ws, link)?
    {
        std::os::unix::fs::symlink(target, link)?;
    }
    Ok(())
}

/// Workspaces being copied ahead of their cells ([`copy_ahead`]).
static AHEAD: Mutex<Vec<Ahead>> = Mutex::new(Vec::new());

/// One cell's start made ahead ([`copy_ahead`]).
struct Ahead {
    /// The planned workspace path, by which the cell takes it.
    dest: PathBuf,
    /// The cell's folder in the run directory, made ahead with the workspace.
    cell_dir: PathBuf,
    /// The copy's task: the canonical workspace, or None when the copy failed (and left
    /// nothing behind).
    task: tokio::task::JoinHandle<Option<PathBuf>>,
}

/// Starts copying `fixture` into `dest` on the blocking pool, for the cell whose workspace
/// `dest` is to take when it starts ([`fresh_or_ahead`]). The engine calls it for a cell that
/// waits for a free slot (src/engine.rs) and no earlier attempt of which exists: its copy is
/// made while the running cells wait on their commands, instead of on its own clock. A copy
/// that fails removes what it made and is not taken: the cell then copies as it would have,
/// and its error is reported on the cell. A copy not taken is removed ([`discard_ahead`]).
///
/// The cell's folder in the run directory, `cell_dir`, is made first, in the same task: made
/// by the cell as it starts, its `mkdir` waited 0.1-0.3 ms (and up to 7 ms) on the lock of the
/// run's `cells/` folder, which the removal of the folder of the cell before, on the blocking
/// pool at that very moment, held while it waited on the file system's journal (ext4 here,
/// 2026-11-25). Made ahead, the cell finds it with one `stat`. One that cannot be made here is
/// left to the cell, which makes it or reports why not.
///
/// This moves the copy's CPU off the cell's path; it does not remove it.
pub fn copy_ahead(fixture: &Path, dest: &Path, cell_dir: &Path) {
    let (fixture, planned, folder) = (fixture.to_path_buf(), dest.to_path_buf(), cell_dir.to_path_buf());
    let task = tokio::task::spawn_blocking(move || {
        let _ = fs::create_dir_all(&folder);
        match copy_fixture(&fixture, &planned) {
            Ok(ws) => Some(ws),
            Err(e) => {
                tracing::debug!("the copy ahead of {} failed ({e}); its cell copies it again", planned.display());
                let _ = fs::remove_dir_all(&planned);
                None
            }
        }
    });
    let mut ahead = AHEAD.lock().unwrap_or_else(|e| e.into_inner());
    ahead.push(Ahead { dest: dest.to_path_buf(), cell_dir: cell_dir.to_path_buf(), task });
}

/// The copy ahead into `dest`, once: whoever takes it owns the copy.
fn take_ahead(dest: &Path) -> Option<Ahead> {
    let mut ahead = AHEAD.lock().unwrap_or_else(|e| e.into_inner());
    let at = ahead.iter().position(|a| a.dest == dest)?;
    Some(ahead.swap_remove(at))
}

/// [`fresh`], taking the workspace copied ahead into `dest` when there is one (waiting for its
/// copy to end if it has not); else (none, or it failed) copying here, as [`fresh`] does.
pub async fn fresh_or_ahead(fixture: &Path, dest: &Path, link: &Path) -> Result<PathBuf, WorkspaceError> {
    if let Some(ahead) = take_ahead(dest)
        && let Ok(Some(ws)) = ahead.task.await
    {
        link_to(&ws, link).map_err(|source| WorkspaceError { fixture: fixture.into(), dest: dest.into(), source })?;
        return Ok(ws);
    }
    fresh(fixture, dest, link)
}

/// Removes the workspace copied ahead into `dest` if its cell did not take it (the cell ended
/// before its workspace was made, or never started: the run was cancelled or its budget
/// spent), with its copy's record, and the cell's folder made with it when that is still empty
/// (a cell that never started); the returned task ends once they are gone. None when there is
/// no such copy.
pub fn discard_ahead(dest: &Path) -> Option<tokio::task::JoinHandle<()>> {
    let Ahead { dest, cell_dir, task } = take_ahead(dest)?;
    Some(tokio::spawn(async move {
        let copied = task.await;
        let _ = tokio::task::spawn_blocking(move || {
            if let Ok(Some(ws)) = copied {
                forget(&ws);
                crate::process::remove_folder(&dest);
            }
            // Fails, as it should, when the cell wrote anything there.
            let _ = fs::remove_dir(&cell_dir);
        })
        .await;
    }))
}

/// Where the workspace of `cell` of the run directory `run_dir` is reached: through the run's
/// one `workspaces` link. (A merged run's `workspaces` is a folder of one link per shard run,
/// so there it is `workspaces/<shard run id>/<cell>`: src/merge.rs.)
pub fn of_cell(run_dir: &Path, cell: &str) -> PathBuf {
    run_dir.join(RUN_WORKSPACES).join(cell)
}

/// The name of the run directory's one link to the folder its workspaces are in.
pub const RUN_WORKSPACES: &str = "workspaces";

/// What a cell's `workspace` link points to, if it needs one. A cell of a run directory
/// (`link` is `<run_dir>/cells/<cell>/workspace`) is reached through the run's one link to its
/// workspaces' folder, `<run_dir>/workspaces -> <workspaces>/<run_id>`, made by its first cell
/// ([`of_cell`]), and gets no link: a link per cell kept a folder per finished cell alive (4 KiB
/// on ext4) for a path anyone can form from the cell id. Any other link is the absolute path.
fn link_target(dest: &Path, link: &Path) -> io::Result<Option<PathBuf>> {
    let absolute = Ok(Some(dest.to_path_buf()));
    let (Some(name), Some(folder)) = (dest.file_name(), dest.parent()) else { return absolute };
    let Some(cells) = link.parent().and_then(Path::parent) else { return absolute };
    let Some(run_dir) = cells.parent().filter(|_| cells.file_name().is_some_and(|n| n == "cells")) else {
        return absolute;
    };
    if link.parent().and_then(Path::file_name) != Some(name) {
        // A cell folder named otherwise than its workspace: the cell id does not lead there.
        return absolute;
    }
    let shared = run_dir.join(RUN_WORKSPACES);
    match std::os::unix::fs::symlink(folder, &shared) {
        Ok(()) => {}
        // Made by another cell (cells start in parallel), or by this run before a --resume.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    // Only when it leads where this cell's workspace is: a stray folder of that name, or a link
    // to elsewhere, is left alone and the cell links directly.
    if fs::read_link(&shared).is_ok_and(|t| t == folder) {
        return Ok(None);
    }
    absolute
}

/// The work tree of the git repository `path` would belong to, if any: the folder itself or
/// its nearest existing ancestor is what git would start looking from.
pub fn enclosing_repository(path: &Path) -> Option<PathBuf> {
    let start = path.ancestors().find(|p| p.exists())?;
    let repo = git2::Repository::discover(start).ok()?;
    Some(repo.workdir().unwrap_or_else(|| repo.path()).to_path_buf())
}

/// Whether the copy of one workspace reflinks its files.
#[derive(Clone, Copy, PartialEq)]
enum Reflink {
    /// Before the first file: the file system has not answered yet.
    Untried,
    Works,
    /// The first file had to be copied: so will the others (one file system, one answer).
    Unsupported,
}

/// How a copy moves a file's bytes when it cannot reflink: `copy_file_range` (in the kernel,
/// and on some file systems a shared extent), or, between two file systems that refuse it
/// (EXDEV: a fixture on disk copied to a tmpfs), `sendfile`, which moves the same bytes in the
/// kernel too. Asked once per device pair: before, each file of such a copy tried
/// `copy_file_range`, was refused, seeked both files and went through `std::io::copy`, which
/// asked both files' metadata and tried `copy_file_range` again (seven calls before `sendfile`).
#[derive(Clone, Copy, PartialEq)]
enum Bytes {
    CopyRange,
    Sendfile,
}

/// What the file systems answered, by (fixture's device, workspace's device), for the
/// process: asking whether they reflink costs the first file of a copy a file made, refused and
/// removed before it is copied (eight calls, two of them the journal's), asking whether they
/// take `copy_file_range` a refused call, and every cell of a run asks the same pair of file
/// systems.
static REFLINKS: Mutex<Vec<((u64, u64), Ways)>> = Mutex::new(Vec::new());

/// How one copy copies: what the file systems answered so far.
#[derive(Clone, Copy, PartialEq)]
struct Ways {
    reflink: Reflink,
    bytes: Bytes,
}

impl Ways {
    /// What an earlier copy between these devices found, else untried.
    fn known(devices: (u64, u64)) -> Ways {
        let known = REFLINKS.lock().unwrap_or_else(|e| e.into_inner());
        let untried = Ways { reflink: Reflink::Untried, bytes: Bytes::CopyRange };
        known.iter().find(|(d, _)| *d == devices).map_or(untried, |(_, ways)| *ways)
    }

    /// Keeps what this copy found (nothing when it had no file to ask with).
    fn remember(self, devices: (u64, u64)) {
        if self.reflink == Reflink::Untried {
            return;
        }
        let mut known = REFLINKS.lock().unwrap_or_else(|e| e.into_inner());
        match known.iter_mut().find(|(d, _)| *d == devices) {
            Some((_, ways)) => *ways = self,
            None => known.push((devices, self)),
        }
    }
}

/// What one [`fresh`] copy made, as the tools' searches list it (src/agent/tools.rs): every
/// folder with its entries in the order a walk lists them, and every file, each with the
/// copy's stamp once it was made and its fixture entry's stamp after it was copied (the
/// [`Stamp`]s of [`Copied`]'s stats). Kept per workspace for the cell's life, unlike
/// [`Copied`], which the checkpoint takes at the cell's start: a search compares a folder's
/// `lstat` with its copy's stamp and, when equal (any entry added, removed or renamed since
/// moves the folder's modification time off its fixture folder's, which the copy gave it), lists
/// the copy's entries without reading the folder.
pub struct CopyListing {
    /// The fixture copied (as the caller named it).
    pub fixture: PathBuf,
    /// When the copy began.
    pub started: SystemTime,
    /// False when the copy made a name a walk takes ignore rules from (`.gitignore`, `.ignore`,
    /// `.git`) or a name that is not UTF-8, or a folder that did not keep its fixture folder's
    /// modification time: a search of it then walks.
    pub plain: bool,
    pub folders: HashMap<String, ListedFolder>,
    /// Every regular file that kept its fixture file's modification time: (the copy's stamp,
    /// its fixture file's stamp).
    pub files: HashMap<String, (Stamp, Stamp)>,
    /// Every entry of the fixture as the copy found it, a line each ([`entry_line`]): what the
    /// repo map's stamp of the fixture is made of (src/agent/repomap.rs), which then names the
    /// files this copy has, without a walk of the fixture on the cell's clock. None when an
    /// entry the copy skips (a socket, a fifo, a device) could not be looked at.
    pub fixture_entries: Option<FixtureEntries>,
}

/// A fixture's entries below its folder, in the order a walk sorted by name lists them, each as
/// [`entry_line`] writes it (a folder's own entries after its line, then `..`), and the latest
/// modification or change time of any of them, in nanoseconds since the epoch.
pub struct FixtureEntries {
    pub lines: String,
    pub newest_ns: i128,
}

/// Writes an entry's line of [`FixtureEntries`]: its name, mode, size, modification and change
/// times (nanoseconds), device and inode; returns the later of the two times. One definition
/// for the copy and for the repo map's walk of a fixture it has no copy of, so both name the
/// same fixture alike.
pub fn entry_line(
    out: &mut String,
    name: &str,
    mode: u32,
    size: u64,
    times_ns: (i128, i128),
    (dev, ino): (u64, u64),
) -> i128 {
    use std::fmt::Write as _;
    let (mtime, ctime) = times_ns;
    let _ = writeln!(out, "{name}\0{mode:o}\0{size}\0{mtime}\0{ctime}\0{dev}:{ino}");
    mtime.max(ctime)
}

/// [`entry_line`] of a `rustix` stat.
fn stat_line(out: &mut String, name: &str, st: &rustix::fs::Stat) -> i128 {
    let times = (
        st.st_mtime as i128 * 1_000_000_000 + st.st_mtime_nsec as i128,
        st.st_ctime as i128 * 1_000_000_000 + st.st_ctime_nsec as i128,
    );
    entry_line(out, name, st.st_mode, st.st_size as u64, times, (st.st_dev, st.st_ino))
}

/// A folder of a [`CopyListing`].
pub struct ListedFolder {
    /// The copy's stamp once filled and given its fixture folder's modification time, and that
    /// folder's stamp after its entries were copied.
    pub stamps: (Stamp, Stamp),
    /// Its entries, sorted by name.
    pub entries: Vec<(String, Made)>,
}

/// What a copy made of an entry.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Made {
    File,
    Folder,
    Symlink,
}

/// What one [`fresh`] copy made, for the workspace's first digests, which are taken from it
/// rather than by a walk of the copy (src/agent/checkpoint.rs): every folder, regular file and
/// symlink it made, by workspace path (`/`-separated, lossy as the digests name paths; "" is
/// the workspace itself).
pub struct Copied {
    /// The fixture copied (as the caller named it).
    pub fixture: PathBuf,
    /// When the copy began: a fixture file whose stat has not moved since well before this
    /// (the checkpoint's racy window) had the same content all through the copy.
    pub started: SystemTime,
    pub files: HashMap<String, CopiedFile>,
    pub folders: HashMap<String, CopiedFolder>,
    pub symlinks: HashMap<String, PathBuf>,
    /// False when a name is not UTF-8: the paths above name it lossily, so the digests walk.
    pub names_utf8: bool,
}

/// A regular file of a copy.
pub struct CopiedFile {
    /// Its fixture file, and that file's stat taken after its bytes were copied (or reflinked).
    pub source: PathBuf,
    pub source_stat: rustix::fs::Stat,
    /// The copy's own stat, once its bytes and its modification time were set.
    pub stat: rustix::fs::Stat,
}

/// A folder of a copy.
pub struct CopiedFolder {
    /// The names made in it.
    pub names: Vec<std::ffi::OsString>,
    /// Its fixture folder's stat after its entries were copied: the copy was given that
    /// folder's modification time, as a copied file is its file's.
    pub source_stat: rustix::fs::Stat,
    /// Its own stat once filled and given that time.
    pub stat: rustix::fs::Stat,
}

/// What one copy made, kept for its workspace: [`Copied`] until the checkpoint takes it,
/// the [`CopyListing`] for the cell's life.
struct Record {
    copied: Option<Copied>,
    listing: Arc<CopyListing>,
}

/// The records of the last copies, by canonical workspace path, the newest last. Bounded: the
/// oldest is dropped first, so a process's memory does not grow with its cells, and the cells
/// still running (as many as `--jobs`, and one copied ahead) keep theirs. A workspace without
/// one is walked (a search) or hashed file by file (the first digests).
static RECORDS: Mutex<Vec<(PathBuf, Record)>> = Mutex::new(Vec::new());
const RECORDS_KEPT: usize = 64;

fn records() -> std::sync::MutexGuard<'static, Vec<(PathBuf, Record)>> {
    RECORDS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether two workspace paths are the same path (`==` of paths, which compares them component
/// by component; equal bytes settle it at once).
fn same_path(a: &Path, b: &Path) -> bool {
    a.as_os_str() == b.as_os_str() || a == b
}

/// The record of the workspace `ws`, looked for from the newest: a running cell's is among the
/// last few kept, and a search from the oldest compared up to [`RECORDS_KEPT`] paths for each
/// lookup (there is at most one record per workspace, [`keep_record`]).
fn record_of<'a>(all: &'a mut [(PathBuf, Record)], ws: &Path) -> Option<&'a mut Record> {
    all.iter_mut().rev().find(|(dest, _)| same_path(dest, ws)).map(|(_, r)| r)
}

fn keep_record(dest: &Path, copied: Copied, listing: CopyListing) {
    let mut all = records();
    all.retain(|(ws, _)| !same_path(ws, dest));
    if all.len() >= RECORDS_KEPT {
        all.remove(0);
    }
    all.push((dest.to_path_buf(), Record { copied: Some(copied), listing: Arc::new(listing) }));
}

/// Drops the record of the workspace `ws` (a copy removed before its cell took it).
fn forget(ws: &Path) {
    records().retain(|(dest, _)| !same_path(dest, ws));
}

/// What the last [`fresh`] copy into the workspace `ws` (canonical) made, as a search lists it.
pub fn copy_listing(ws: &Path) -> Option<Arc<CopyListing>> {
    record_of(&mut records(), ws).map(|r| r.listing.clone())
}

/// What the last [`fresh`] copy into the workspace `ws` (canonical) made, once.
pub fn take_copied(ws: &Path) -> Option<Copied> {
    record_of(&mut records(), ws)?.copied.take()
}

/// Opens the folder `path` (beneath `dir`) for reading its entries and as the folder the
/// calls for its entries start from.
fn open_dir(dir: impl AsFd, path: impl rustix::path::Arg) -> rustix::io::Result<OwnedFd> {
    rustix::fs::openat(dir, path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
}

/// Copies the folder `src` (open, with its copy `dst`, made and open) entry by entry. Every
/// call names an entry from its open folder (`openat`, `mkdirat`, `symlinkat`, ...), not by
/// its whole path: a context fixture's files are six to ten folders deep, and a path is
/// looked up again, component by component, by every call that names it. Returns the fixture
/// folder's entries as it found them ([`FixtureEntries`]), or None when one it skips could not
/// be looked at.
fn copy_tree(
    (src, dst): (&Path, &Path),
    (src_fd, dst_fd): (OwnedFd, OwnedFd),
    ways: &mut Ways,
    rel: &str,
    (copied, listing): (&mut Copied, &mut CopyListing),
) -> io::Result<Option<FixtureEntries>> {
    let mut names = Vec::new();
    let mut entries_made = Vec::new();
    // Each fixture entry's lines (a folder's with its own entries), sorted by name at the end;
    // `whole` is false once an entry could not be looked at.
    let mut lines: Vec<(OsString, String)> = Vec::new();
    let mut whole = true;
    let mut newest_ns = 0;
    let mut line = |name: &OsStr, st: &rustix::fs::Stat, below: Option<&FixtureEntries>| {
        let mut text = String::new();
        newest_ns = stat_line(&mut text, &name.to_string_lossy(), st).max(newest_ns);
        if let Some(below) = below {
            text.push_str(&below.lines);
            text.push_str("..\n");
            newest_ns = newest_ns.max(below.newest_ns);
        }
        lines.push((name.to_os_string(), text));
    };
    let mut entries = rustix::fs::Dir::new(src_fd)?;
    loop {
        let entry = match entries.read() {
            None => break,
            Some(entry) => entry?,
        };
        let cname = entry.file_name();
        if cname == c"." || cname == c".." {
            continue;
        }
        let src_dir = entries.fd()?;
        let name = OsStr::from_bytes(cname.to_bytes()).to_os_string();
        copied.names_utf8 &= name.to_str().is_some();
        // The names a search's walk reads rules from (src/agent/tools.rs).
        listing.plain &= !matches!(cname.to_bytes(), b".gitignore" | b".ignore" | b".git");
        let ty = match entry.file_type() {
            FileType::Unknown => {
                FileType::from_raw_mode(rustix::fs::statat(src_dir, cname, AtFlags::SYMLINK_NOFOLLOW)?.st_mode)
            }
            ty => ty,
        };
        let path = match rel {
            "" => name.to_string_lossy().into_owned(),
            _ => format!("{rel}/{}", name.to_string_lossy()),
        };
        match ty {
            FileType::Symlink => {
                let target =
                    PathBuf::from(OsString::from_vec(rustix::fs::readlinkat(src_dir, cname, Vec::new())?.into_bytes()));
                rustix::fs::symlinkat(&target, &dst_fd, cname)?;
                line(&name, &rustix::fs::statat(src_dir, cname, AtFlags::SYMLINK_NOFOLLOW)?, None);
                copied.symlinks.insert(path, target);
                entries_made.push((name.to_string_lossy().into_owned(), Made::Symlink));
            }
            FileType::Directory => {
                rustix::fs::mkdirat(&dst_fd, cname, Mode::from_raw_mode(0o777))?;
                let dirs = (open_dir(src_dir, cname)?, open_dir(&dst_fd, cname)?);
                let below =
                    copy_tree((&src.join(&name), &dst.join(&name)), dirs, ways, &path, (&mut *copied, &mut *listing))?;
                whole &= below.is_some();
                line(&name, &copied.folders[&path].source_stat, below.as_ref());
                entries_made.push((name.to_string_lossy().into_owned(), Made::Folder));
            }
            FileType::RegularFile => {
                let from = src.join(&name);
                // A failed reflink creates the file, fails and removes it before the copy
                // creates it again: on a file system without reflinks (ext4) that tripled the
                // cost of every file of the copy, so only the first file asks, and only the first
                // copy between two file systems ([`REFLINKS`]).
                let file = if ways.reflink == Reflink::Unsupported {
                    let (source_stat, stat) = copy_file(src_dir, &dst_fd, cname, &mut ways.bytes)?;
                    CopiedFile { source: from, source_stat, stat }
                } else {
                    let made = reflink_copy::reflink_or_copy(&from, dst.join(&name))?;
                    ways.reflink = if made.is_some() { Reflink::Unsupported } else { Reflink::Works };
                    // The fixture file's modification time, as copy_file gives it (by name: the
                    // copy may be read-only, and its owner may set its times all the same).
                    let source_stat = rustix::fs::statat(src_dir, cname, AtFlags::SYMLINK_NOFOLLOW)?;
                    set_mtime(&dst_fd, cname, &source_stat)?;
                    let stat = rustix::fs::statat(&dst_fd, cname, AtFlags::SYMLINK_NOFOLLOW)?;
                    CopiedFile { source: from, source_stat, stat }
                };
                // Only a copy that kept its fixture file's modification time: a later write moves
                // it off that (settled) time, whatever the clock tick (see `CopyListing`).
                if same_mtime(&file.stat, &file.source_stat) {
                    let stamps = (Stamp::of_stat(&file.stat), Stamp::of_stat(&file.source_stat));
                    listing.files.insert(path.clone(), stamps);
                }
                line(&name, &file.source_stat, None);
                copied.files.insert(path, file);
                entries_made.push((name.to_string_lossy().into_owned(), Made::File));
            }
            // Sockets, fifos and devices are not copied, but they are the fixture's entries.
            _ => {
                match rustix::fs::statat(src_dir, cname, AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(st) => line(&name, &st, None),
                    Err(_) => whole = false,
                }
                continue;
            }
        }
        names.push(name);
    }
    // The folder keeps its fixture folder's modification time too, set once it is filled:
    // adding, removing or renaming an entry later always moves it, so the checkpoint can trust
    // the folder's listing at once (src/agent/checkpoint.rs).
    let source_stat = rustix::fs::fstat(entries.fd()?)?;
    rustix::fs::futimens(&dst_fd, &mtime_of(&source_stat))?;
    let stat = rustix::fs::fstat(&dst_fd)?;
    // In the order a search's walk lists them (by name, as bytes).
    entries_made.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let stamps = (Stamp::of_stat(&stat), Stamp::of_stat(&source_stat));
    listing.plain &= same_mtime(&stat, &source_stat);
    listing.folders.insert(rel.to_string(), ListedFolder { stamps, entries: entries_made });
    copied.folders.insert(rel.to_string(), CopiedFolder { names, source_stat, stat });
    if !whole {
        return Ok(None);
    }
    lines.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    Ok(Some(FixtureEntries { lines: lines.into_iter().map(|(_, text)| text).collect(), newest_ns }))
}

/// Whether two stats have the same modification time (a file system may not keep the one a copy
/// sets).
fn same_mtime(a: &rustix::fs::Stat, b: &rustix::fs::Stat) -> bool {
    (a.st_mtime, a.st_mtime_nsec) == (b.st_mtime, b.st_mtime_nsec)
}

/// Timestamps that set the modification time of `like` and leave the access time.
fn mtime_of(like: &rustix::fs::Stat) -> rustix::fs::Timestamps {
    rustix::fs::Timestamps {
        last_access: rustix::fs::Timespec { tv_sec: 0, tv_nsec: rustix::fs::UTIME_OMIT },
        last_modification: rustix::fs::Timespec { tv_sec: like.st_mtime as _, tv_nsec: like.st_mtime_nsec as _ },
    }
}

/// Gives the entry `name` of `dir` the modification time of `like` (not following a last
/// symlink: it is a file the copy made).
fn set_mtime(dir: impl AsFd, name: &std::ffi::CStr, like: &rustix::fs::Stat) -> io::Result<()> {
    rustix::fs::utimensat(dir, name, &mtime_of(like), AtFlags::SYMLINK_NOFOLLOW)?;
    Ok(())
}

/// Copies the regular file `name` of the folder `from` to the new file `name` of `to` with its
/// permission bits, as `std::fs::copy` does, in fewer calls: the target is created with its
/// mode (so it needs no `fchmod` unless the umask took bits away) and its length is known, so
/// the copy ends without a last call to find the end. A fixture copy is a few of these per file,
/// hundreds per cell on the larger fixtures. The copy gets the source's modification time;
/// returns the source's stat as it is after the copy (a write to it during the copy shows
/// there) and the copy's. `bytes` is how the bytes move ([`Bytes`]), changed to `sendfile` when
/// the file systems refuse `copy_file_range` between them.
fn copy_file(
    from: BorrowedFd<'_>,
    to: impl AsFd,
    name: &std::ffi::CStr,
    bytes: &mut Bytes,
) -> io::Result<(rustix::fs::Stat, rustix::fs::Stat)> {
    let source = rustix::fs::openat(from, name, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())?;
    let meta = rustix::fs::fstat(&source)?;
    let mode = Mode::from_raw_mode(meta.st_mode) & Mode::from_bits_truncate(0o7777);
    let target = rustix::fs::openat(to, name, OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC, mode)?;
    if umask().is_none_or(|mask| mode.bits() & mask != 0) {
        rustix::fs::fchmod(&target, mode)?;
    }
    let len = meta.st_size.max(0) as u64;
    let mut left = len;
    while left > 0 {
        let chunk = left.min(1 << 30) as usize;
        let moved = match *bytes {
            Bytes::CopyRange => rustix::fs::copy_file_range(&source, None, &target, None, chunk),
            Bytes::Sendfile => rustix::fs::sendfile(&target, &source, None, chunk),
        };
        match moved {
            Ok(0) => break, // the file shrank since its length was read: what is there is copied
            Ok(n) => left -= n as u64,
            // Two file systems that will not: `sendfile` from here on, for this copy and the
            // process's later copies between them.
            Err(rustix::io::Errno::XDEV) if *bytes == Bytes::CopyRange => *bytes = Bytes::Sendfile,
            // A file system or kernel that cannot: the plain way, for this file. (Both calls
            // move nothing before they fail, and advance both files' offsets as they copy.)
            Err(rustix::io::Errno::NOSYS | rustix::io::Errno::INVAL | rustix::io::Errno::XDEV) => {
                let (mut source, mut target) = (fs::File::from(source), fs::File::from(target));
                std::io::copy(&mut source, &mut target)?;
                return finish_copy(source.into(), target.into(), &meta);
            }
            Err(e) => return Err(e.into()),
        }
    }
    finish_copy(source, target, &meta)
}

/// Gives the copy `target` the modification time of `meta` (its source's), and returns the
/// source's stat and the copy's, both taken now.
fn finish_copy(
    source: OwnedFd,
    target: OwnedFd,
    meta: &rustix::fs::Stat,
) -> io::Result<(rustix::fs::Stat, rustix::fs::Stat)> {
    rustix::fs::futimens(&target, &mtime_of(meta))?;
    Ok((rustix::fs::fstat(&source)?, rustix::fs::fstat(&target)?))
}

/// This process's umask, from /proc (reading it with umask(2) would change it for a moment, for
/// every thread). None when it cannot be read: then every copy sets its mode.
fn umask() -> Option<u32> {
    static UMASK: std::sync::LazyLock<Option<u32>> = std::sync::LazyLock::new(|| {
        let status = fs::read_to_string("/proc/self/status").ok()?;
        let line = status.lines().find_map(|l| l.strip_prefix("Umask:"))?;
        u32::from_str_radix(line.trim(), 8).ok()
    });
    *UMASK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_is_independent_of_the_fixture() {
        let root = tempfile::tempdir().unwrap();
        let fixture = root.path().join("fx");
        fs::create_dir_all(fixture.join("pkg")).unwrap();
        fs::write(fixture.join("pkg/a.py"), "x = 1\n").unwrap();
        std::os::unix::fs::symlink("pkg/a.py", fixture.join("link.py")).unwrap();
        let link = root.path().join("cell-workspace");
        let ws = fresh(&fixture, &root.path().join("all/run/ws"), &link).unwrap();
        assert_eq!(fs::read_link(&link).unwrap(), ws, "the cell directory links to the workspace");
        fs::write(ws.join("pkg/a.py"), "x = 2\n").unwrap();
        assert_eq!(fs::read_to_string(fixture.join("pkg/a.py")).unwrap(), "x = 1\n");
        assert!(fs::symlink_metadata(ws.join("link.py")).unwrap().file_type().is_symlink());
        fs::write(ws.join("left-over.py"), "").unwrap();
        // A cell of a run directory is reached through the run's one link to its workspaces,
        // and has no link of its own.
        let run = root.path().join("run");
        fs::create_dir_all(run.join("cells/c1")).unwrap();
        let cell_link = run.join("cells/c1/workspace");
        let in_run = fresh(&fixture, &root.path().join("all/run/c1"), &cell_link).unwrap();
        assert!(cell_link.symlink_metadata().is_err(), "no per-cell link");
        assert_eq!(fs::read_link(run.join(RUN_WORKSPACES)).unwrap(), in_run.parent().unwrap());
        assert_eq!(of_cell(&run, "c1").canonicalize().unwrap(), in_run);
        assert_eq!(fs::read_to_string(of_cell(&run, "c1").join("pkg/a.py")).unwrap(), "x = 1\n");
        let again = fresh(&fixture, &ws, &ws).unwrap();
        assert!(!again.join("left-over.py").exists(), "an existing workspace is never reused");
    }

    #[test]
    fn copied_files_keep_their_bytes_and_permission_bits() {
        use std::os::unix::fs::PermissionsExt as _;
        let root = tempfile::tempdir().unwrap();
        let fixture = root.path().join("fx");
        fs::create_dir_all(&fixture).unwrap();
        let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        fs::write(fixture.join("big.bin"), &big).unwrap();
        fs::write(fixture.join("empty.txt"), "").unwrap();
        fs::write(fixture.join("run.sh"), "#!/bin/sh\necho hi\n").unwrap();
        fs::set_permissions(fixture.join("run.sh"), fs::Permissions::from_mode(0o751)).unwrap();
        fs::set_permissions(fixture.join("empty.txt"), fs::Permissions::from_mode(0o600)).unwrap();
        let ws = fresh(&fixture, &root.path().join("ws"), &root.path().join("ws")).unwrap();
        assert_eq!(fs::read(ws.join("big.bin")).unwrap(), big);
        assert_eq!(fs::read(ws.join("empty.txt")).unwrap(), b"");
        let mode = |dir: &Path, p: &str| fs::metadata(dir.join(p)).unwrap().permissions().mode() & 0o7777;
        for name in ["run.sh", "empty.txt", "big.bin"] {
            assert_eq!(mode(&ws, name), mode(&fixture, name), "{name}");
        }
        assert_eq!((mode(&ws, "run.sh"), mode(&ws, "empty.txt")), (0o751, 0o600));
        for name in ["run.sh", "empty.txt", "big.bin"] {
            let mtime = |dir: &Path| fs::metadata(dir.join(name)).unwrap().modified().unwrap();
            assert_eq!(mtime(&ws), mtime(&fixture), "{name} keeps its fixture file's modification time");
        }
        // What the copy made, for the workspace's first digests, once.
        let copied = take_copied(&ws).expect("the copy's facts");
        assert_eq!(copied.files.len(), 3, "every file (the first one too, when reflinks fail)");
        assert_eq!(copied.folders[""].names.len(), 3);
        let mtime = |p: &Path| fs::symlink_metadata(p).unwrap().modified().unwrap();
        assert_eq!(mtime(&ws), mtime(&fixture), "the folder keeps its fixture folder's modification time");
        assert!(take_copied(&ws).is_none());
        // The file systems answered once for the process: a later copy between them starts
        // from that answer, and copies the same.
        let devices = (rustix::fs::stat(&fixture).unwrap().st_dev, rustix::fs::stat(&ws).unwrap().st_dev);
        assert!(Ways::known(devices).reflink != Reflink::Untried, "the answer is kept");
        let again = fresh(&fixture, &root.path().join("ws2"), &root.path().join("ws2")).unwrap();
        assert_eq!(fs::read(again.join("big.bin")).unwrap(), big);
        assert_eq!(mode(&again, "run.sh"), 0o751);
        assert_eq!(take_copied(&again).expect("the second copy's facts").files.len(), 3);
    }

    /// A workspace copied ahead is the one its cell takes, with its copy's record and its link,
    /// and the cell's folder made with it; one not taken is removed with its record, and with
    /// the cell's folder when the cell wrote nothing there; one whose copy failed leaves
    /// nothing, and the cell's own copy reports the error as it would have.
    #[tokio::test]
    async fn a_workspace_copied_ahead_is_taken_or_removed() {
        let root = tempfile::tempdir().unwrap();
        let fixture = root.path().join("fx");
        fs::create_dir_all(fixture.join("pkg")).unwrap();
        fs::write(fixture.join("pkg/a.py"), "x = 1\n").unwrap();
        let (dest, link) = (root.path().join("all/run/c1"), root.path().join("c1-workspace"));
        let cell_dir = root.path().join("run/cells/c1");
        copy_ahead(&fixture, &dest, &cell_dir);
        let ws = fresh_or_ahead(&fixture, &dest, &link).await.unwrap();
        assert!(take_ahead(&dest).is_none(), "taken once");
        assert_eq!(fs::read_link(&link).unwrap(), ws, "linked when taken");
        assert_eq!(fs::read_to_string(ws.join("pkg/a.py")).unwrap(), "x = 1\n");
        assert!(copy_listing(&ws).is_some_and(|l| l.files.contains_key("pkg/a.py")), "the search's record");
        assert_eq!(take_copied(&ws).expect("the checkpoint's record").files.len(), 1);
        assert!(copy_listing(&ws).is_some(), "the listing outlives the checkpoint's take");
        assert!(discard_ahead(&dest).is_none(), "nothing left to discard");
        assert!(ws.exists());
        assert!(cell_dir.is_dir(), "the cell's folder was made with its workspace");

        let other = root.path().join("all/run/c2");
        let (unstarted, written) = (root.path().join("run/cells/c2"), root.path().join("run/cells/c4"));
        copy_ahead(&fixture, &other, &unstarted);
        discard_ahead(&other).expect("not taken").await.unwrap();
        assert!(other.symlink_metadata().is_err(), "removed");
        assert!(unstarted.symlink_metadata().is_err(), "with the folder of a cell that never started");
        let fourth = root.path().join("all/run/c4");
        copy_ahead(&fixture, &fourth, &written);
        fs::create_dir_all(&written).unwrap();
        fs::write(written.join("trace.jsonl"), "{}\n").unwrap();
        discard_ahead(&fourth).expect("not taken").await.unwrap();
        assert!(fourth.symlink_metadata().is_err(), "a copy its cell did not need is removed");
        assert!(written.join("trace.jsonl").is_file(), "but not the folder of a cell that wrote there");
        assert!(copy_listing(&other).is_none() && take_copied(&other).is_none(), "and its record");

        let missing = root.path().join("no-such-fixture");
        let third = root.path().join("all/run/c3");
        copy_ahead(&missing, &third, &root.path().join("run/cells/c3"));
        let err = fresh_or_ahead(&missing, &third, &third).await.unwrap_err();
        assert_eq!(err.fixture, missing, "the cell's own copy says what failed: {err}");
    }

    /// A fixture on one file system copied to another that refuses `copy_file_range` between
    /// them (a disk to a tmpfs: EXDEV) is copied with `sendfile`, asked once for the process,
    /// and every file keeps its bytes, mode and modification time, as does every folder.
    #[test]
    fn a_copy_between_two_file_systems_keeps_everything() {
        use std::os::unix::fs::PermissionsExt as _;
        let disk = tempfile::tempdir().unwrap();
        let Ok(shm) = tempfile::tempdir_in("/dev/shm") else { return };
        let dev = |p: &Path| rustix::fs::stat(p).unwrap().st_dev;
        if dev(disk.path()) == dev(shm.path()) {
            return; // one file system here: the other test covers it
        }
        let fixture = disk.path().join("fx");
        fs::create_dir_all(fixture.join("pkg/sub")).unwrap();
        let big: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
        fs::write(fixture.join("pkg/sub/big.bin"), &big).unwrap();
        fs::write(fixture.join("pkg/a.py"), "x = 1\n").unwrap();
        fs::write(fixture.join("empty"), "").unwrap();
        fs::set_permissions(fixture.join("pkg/a.py"), fs::Permissions::from_mode(0o751)).unwrap();
        std::os::unix::fs::symlink("pkg/a.py", fixture.join("link.py")).unwrap();
        for round in 0..2 {
            let ws = fresh(&fixture, &shm.path().join(format!("ws{round}")), &shm.path().join(format!("ws{round}")))
                .unwrap();
            assert_eq!(fs::read(ws.join("pkg/sub/big.bin")).unwrap(), big);
            assert_eq!(fs::read_to_string(ws.join("pkg/a.py")).unwrap(), "x = 1\n");
            assert_eq!(fs::read(ws.join("empty")).unwrap(), b"");
            assert_eq!(fs::metadata(ws.join("pkg/a.py")).unwrap().permissions().mode() & 0o7777, 0o751);
            assert_eq!(fs::read_link(ws.join("link.py")).unwrap(), Path::new("pkg/a.py"));
            for p in ["", "pkg", "pkg/sub", "pkg/a.py", "pkg/sub/big.bin", "empty"] {
                let mtime = |dir: &Path| fs::symlink_metadata(dir.join(p)).unwrap().modified().unwrap();
                assert_eq!(mtime(&ws), mtime(&fixture), "`{p}` keeps its modification time (round {round})");
            }
            let copied = take_copied(&ws).expect("the copy's facts");
            assert_eq!((copied.files.len(), copied.folders.len(), copied.symlinks.len()), (3, 3, 1));
            let file = &copied.files["pkg/sub/big.bin"];
            assert_eq!(file.source, fixture.join("pkg/sub/big.bin"));
            assert_eq!(file.stat.st_ino, rustix::fs::lstat(ws.join("pkg/sub/big.bin")).unwrap().st_ino);
            assert_eq!(copied.folders["pkg"].stat.st_ino, rustix::fs::lstat(ws.join("pkg")).unwrap().st_ino);
            let mut names = copied.folders[""].names.clone();
            names.sort();
            assert_eq!(names, ["empty", "link.py", "pkg"]);
        }
        let ways = Ways::known((dev(&fixture), dev(shm.path())));
        assert!(ways.reflink == Reflink::Unsupported && ways.bytes == Bytes::Sendfile, "the answers are kept");
    }
}
