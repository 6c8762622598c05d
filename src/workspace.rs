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
//! (src/agent/checkpoint.rs). What a copy made is kept for the first digests of the workspace
//! ([`take_copied`]).

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
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
    let mut reflink = Reflink::known(devices);
    copy_tree(fixture, dest, &mut reflink, "", &mut copied).map_err(wrap)?;
    reflink.remember(devices);
    let dest = dest.canonicalize().map_err(wrap)?;
    keep_copied(&dest, copied);
    if link != dest
        && let Some(target) = link_target(&dest, link).map_err(wrap)?
    {
        std::os::unix::fs::symlink(target, link).map_err(wrap)?;
    }
    Ok(dest)
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

/// The answer the file systems gave, by (fixture's device, workspace's device), for the
/// process: asking costs the first file of a copy a file made, refused and removed before it
/// is copied (eight calls, two of them the journal's), and every cell of a run asks the same
/// pair of file systems.
static REFLINKS: Mutex<Vec<((u64, u64), Reflink)>> = Mutex::new(Vec::new());

impl Reflink {
    /// What an earlier copy between these devices found, else [`Reflink::Untried`].
    fn known(devices: (u64, u64)) -> Reflink {
        let known = REFLINKS.lock().unwrap_or_else(|e| e.into_inner());
        known.iter().find(|(d, _)| *d == devices).map_or(Reflink::Untried, |(_, r)| *r)
    }

    /// Keeps what this copy found (nothing when it had no file to ask with).
    fn remember(self, devices: (u64, u64)) {
        if self == Reflink::Untried {
            return;
        }
        let mut known = REFLINKS.lock().unwrap_or_else(|e| e.into_inner());
        if !known.iter().any(|(d, _)| *d == devices) {
            known.push((devices, self));
        }
    }
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

/// The copies made and not yet taken, by canonical workspace path. Bounded: a workspace whose
/// copy is never asked for (a cell without checkpoints) must not keep its entry for the whole
/// run, so a full registry starts over (a lost entry only costs its workspace a hash per file).
static COPIED: Mutex<Vec<(PathBuf, Copied)>> = Mutex::new(Vec::new());
const COPIED_KEPT: usize = 64;

fn keep_copied(dest: &Path, copied: Copied) {
    let mut all = COPIED.lock().unwrap_or_else(|e| e.into_inner());
    all.retain(|(ws, _)| ws != dest);
    if all.len() >= COPIED_KEPT {
        all.clear();
    }
    all.push((dest.to_path_buf(), copied));
}

/// What the last [`fresh`] copy into the workspace `ws` (canonical) made, once.
pub fn take_copied(ws: &Path) -> Option<Copied> {
    let mut all = COPIED.lock().unwrap_or_else(|e| e.into_inner());
    let at = all.iter().position(|(dest, _)| dest == ws)?;
    Some(all.swap_remove(at).1)
}

fn copy_tree(src: &Path, dst: &Path, reflink: &mut Reflink, rel: &str, copied: &mut Copied) -> io::Result<()> {
    let mut names = Vec::new();
    for entry in fs::read_dir(src)? {
        let entry = entry?;
        let from = entry.path();
        let name = entry.file_name();
        copied.names_utf8 &= name.to_str().is_some();
        let to = dst.join(&name);
        let ty = entry.file_type()?;
        let path = match rel {
            "" => name.to_string_lossy().into_owned(),
            _ => format!("{rel}/{}", name.to_string_lossy()),
        };
        if ty.is_symlink() {
            let target = fs::read_link(&from)?;
            std::os::unix::fs::symlink(&target, &to)?;
            copied.symlinks.insert(path, target);
        } else if ty.is_dir() {
            fs::create_dir(&to)?;
            copy_tree(&from, &to, reflink, &path, copied)?;
        } else if ty.is_file() {
            // A failed reflink creates the file, fails and removes it before the copy creates
            // it again: on a file system without reflinks (ext4) that tripled the cost of every
            // file of the copy, so only the first file asks, and only the first copy between
            // two file systems ([`REFLINKS`]).
            let file = if *reflink == Reflink::Unsupported {
                let (source_stat, stat) = copy_file(&from, &to)?;
                CopiedFile { source: from, source_stat, stat }
            } else {
                let made = reflink_copy::reflink_or_copy(&from, &to)?;
                *reflink = if made.is_some() { Reflink::Unsupported } else { Reflink::Works };
                // The fixture file's modification time, as copy_file gives it (by path: the
                // copy may be read-only, and its owner may set its times all the same).
                let source_stat = rustix::fs::lstat(&from)?;
                set_mtime(&to, &source_stat)?;
                CopiedFile { source: from, source_stat, stat: rustix::fs::lstat(&to)? }
            };
            copied.files.insert(path, file);
        } else {
            // Sockets, fifos and devices are not copied.
            continue;
        }
        names.push(name);
    }
    // The folder keeps its fixture folder's modification time too, set once it is filled:
    // adding, removing or renaming an entry later always moves it, so the checkpoint can trust
    // the folder's listing at once (src/agent/checkpoint.rs).
    let source_stat = rustix::fs::stat(src)?;
    set_mtime(dst, &source_stat)?;
    let stat = rustix::fs::lstat(dst)?;
    copied.folders.insert(rel.to_string(), CopiedFolder { names, source_stat, stat });
    Ok(())
}

/// Gives `to` the modification time of `like` (by path, not following a last symlink: `to` is
/// a file or folder the copy made).
fn set_mtime(to: &Path, like: &rustix::fs::Stat) -> io::Result<()> {
    let omit = rustix::fs::Timespec { tv_sec: 0, tv_nsec: rustix::fs::UTIME_OMIT };
    let times = rustix::fs::Timestamps {
        last_access: omit,
        last_modification: rustix::fs::Timespec { tv_sec: like.st_mtime as _, tv_nsec: like.st_mtime_nsec as _ },
    };
    rustix::fs::utimensat(rustix::fs::CWD, to, &times, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)?;
    Ok(())
}

/// Copies the regular file `from` to the new file `to` with `from`'s permission bits, as
/// `std::fs::copy` does, in fewer calls: the target is created with its mode (so it needs no
/// `fchmod` unless the umask took bits away) and its length is known, so the copy ends without
/// a last call to find the end. A fixture copy is a few of these per file, hundreds per cell on
/// the larger fixtures. The copy gets `from`'s modification time; returns `from`'s stat as it
/// is after the copy (a write to it during the copy shows there) and the copy's.
fn copy_file(from: &Path, to: &Path) -> io::Result<(rustix::fs::Stat, rustix::fs::Stat)> {
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    let source = fs::File::open(from)?;
    let meta = source.metadata()?;
    let mode = meta.permissions().mode() & 0o7777;
    let target = fs::OpenOptions::new().write(true).create_new(true).mode(mode).open(to)?;
    if umask().is_none_or(|mask| mode & mask != 0) {
        target.set_permissions(meta.permissions())?;
    }
    let mut left = meta.len();
    while left > 0 {
        match rustix::fs::copy_file_range(&source, None, &target, None, left.min(1 << 30) as usize) {
            Ok(0) => break, // the file shrank since its length was read: what is there is copied
            Ok(n) => left -= n as u64,
            // A file system or kernel that cannot: the plain way, for this file.
            Err(rustix::io::Errno::XDEV | rustix::io::Errno::NOSYS | rustix::io::Errno::INVAL) => {
                let (mut source, mut target) = (&source, &target);
                std::io::Seek::seek(&mut source, std::io::SeekFrom::Start(meta.len() - left))?;
                std::io::Seek::seek(&mut target, std::io::SeekFrom::Start(meta.len() - left))?;
                std::io::copy(&mut source, &mut target)?;
                break;
            }
            Err(e) => return Err(e.into()),
        }
    }
    target.set_modified(meta.modified()?)?;
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
        assert!(Reflink::known(devices) != Reflink::Untried, "the answer is kept");
        let again = fresh(&fixture, &root.path().join("ws2"), &root.path().join("ws2")).unwrap();
        assert_eq!(fs::read(again.join("big.bin")).unwrap(), big);
        assert_eq!(mode(&again, "run.sh"), 0o751);
        assert_eq!(take_copied(&again).expect("the second copy's facts").files.len(), 3);
    }
}
