//! Workspace paths as the agent names them: resolving them beneath the workspace root, opening
//! only what the tools may touch, secret file names, and one spelling per file.
//!
//! The policy decides with these rules and the tools apply them again when they run, so they
//! live below both: neither has to import the other.
//!
//! **The kernel resolves, not this module.** Every path is opened with `openat2(2)` relative to
//! a descriptor of the workspace root, with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`: the kernel
//! refuses, in the same call that opens the file, an absolute path, a `..` or a symlink that
//! would leave the root (EXDEV), and any /proc magic link (ELOOP). A check made on a path and a
//! use made later on the same path can disagree when a symlink is swapped in between; a check
//! made by the call that also opens cannot. Symlinks that stay inside the workspace are followed
//! on purpose (`RESOLVE_NO_SYMLINKS` would refuse them): fixtures may have them (`latest -> v2`),
//! and refusing a harmless link would fail harmless agents. An absolute symlink is refused even
//! when it points inside, as `RESOLVE_BENEATH` refuses every absolute path. Without `openat2`
//! (Linux before 5.6, or a seccomp filter answering ENOSYS) the tools fail closed.
//!
//! **A file is looked at before it is opened.** The first open is `O_PATH`, which never blocks
//! and has no side effect on any kind of file; `fstat` on it decides. Only a regular file with a
//! single link is then reopened for reading or writing, through `/proc/self/fd/N` (the same
//! inode, not the path again). A fifo would block a reader forever; sockets and devices are not
//! source files; and a file with a second hard link may share its content with a file outside
//! the workspace (`link(2)` needs no access to the target's folder), which no check on the name
//! given here can see. New files are created with `O_CREAT | O_EXCL`, which never follows a
//! symlink, in a parent folder opened beneath the root.
//!
//! **The resolved name decides secrets.** The path the kernel resolved is read back from
//! `/proc/self/fd/N`; a secret name (or `.git`, for writes) in any of its components refuses the
//! file, so `notes.txt -> .env` is as secret as `.env`. A path the kernel resolved without
//! following any symlink (asked with `RESOLVE_NO_SYMLINKS` first, `open_named`) is its own
//! resolved name, and is not read back.

use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

/// True for file names that hold credentials.
pub fn is_secret_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower == ".env"
        || lower.starts_with(".env.")
        || lower == "models.toml"
        || lower.ends_with(".pem")
        || lower.ends_with(".key")
        || lower.ends_with("_key")
        || lower.starts_with("id_rsa")
        || lower.starts_with("id_ed25519")
        || lower.starts_with("id_ecdsa")
        || lower.ends_with(".p12")
}

/// True when a component of the workspace-relative `rel` is a secret name.
pub fn has_secret_component(rel: &str) -> bool {
    Path::new(rel).components().any(|c| matches!(c, Component::Normal(n) if is_secret_name(&n.to_string_lossy())))
}

/// True when a component of the workspace-relative `rel` is `.git`.
pub fn has_git_component(rel: &str) -> bool {
    Path::new(rel).components().any(|c| matches!(c, Component::Normal(n) if n == ".git"))
}

/// Why a workspace path cannot be used. The message is what the model reads, so it names the
/// path as the model gave it and says what to do instead.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error("`{0}` is absolute; use a path relative to the workspace root")]
    Absolute(String),
    #[error("`{0}` contains `..`; paths must stay inside the workspace")]
    ParentDir(String),
    #[error("`{0}` resolves outside the workspace (symlink escape)")]
    Escapes(String),
    #[error("`{0}` goes through a symlink loop or a /proc magic link; the tools do not follow those")]
    Loop(String),
    #[error("`{0}` does not exist")]
    NotFound(String),
    #[error("`{0}`: a folder on the way is a file")]
    NotDirOnTheWay(String),
    #[error("`{0}` is a directory")]
    IsDir(String),
    #[error("`{0}` is not a directory")]
    NotDir(String),
    #[error("`{path}` is a {kind}; the tools read and write regular files only")]
    NotRegular { path: String, kind: &'static str },
    #[error(
        "`{path}` has {links} hard links; the tools refuse hard-linked files, since another link may be a file outside the workspace"
    )]
    HardLinked { path: String, links: u64 },
    #[error("{}; it is never readable or writable", named(path, resolved, "holds secrets", "which holds secrets"))]
    Secret { path: String, resolved: String },
    #[error("{}, which is never writable", named(path, resolved, "is inside .git", "inside .git"))]
    InsideGit { path: String, resolved: String },
    #[error("`{0}` exists")]
    Exists(String),
    #[error(
        "the file tools need openat2 (Linux 5.6 or later) to stay inside the workspace, and this kernel does not provide it; `{0}` was not touched"
    )]
    Unsupported(String),
    #[error("cannot use `{path}`: {source}")]
    Io { path: String, source: std::io::Error },
}

impl PathError {
    /// True when the path cannot be used at all, whatever the file: it leaves the workspace (or
    /// could, through a loop or a magic link), or the kernel cannot keep it beneath the root.
    /// The policy denies these; any other error is the tool's to report when it runs.
    pub fn leaves_workspace(&self) -> bool {
        matches!(
            self,
            PathError::Absolute(_)
                | PathError::ParentDir(_)
                | PathError::Escapes(_)
                | PathError::Loop(_)
                | PathError::Unsupported(_)
        )
    }
}

/// "`.env` holds secrets", or "`notes.txt` resolves to `.env`, which holds secrets" when the
/// kernel resolved the path to another name: the model learns which file it reached.
fn named(path: &str, resolved: &str, as_given: &str, as_resolved: &str) -> String {
    if normalize(path) == resolved {
        format!("`{path}` {as_given}")
    } else {
        format!("`{path}` resolves to `{resolved}`, {as_resolved}")
    }
}

/// Whether an opened file will be read or also written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// What a path names once the kernel resolved its existing part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The resolved existing part, relative to the root, followed by the components that do
    /// not exist yet as they were given.
    pub rel: String,
    /// Whether the whole path exists.
    pub exists: bool,
}

/// The flags of every resolution: beneath the root, never through a magic link.
fn beneath() -> ResolveFlags {
    ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS
}

/// Refuses what is wrong in the spelling alone, before the kernel is asked: the messages are
/// clearer than EXDEV, and `..` is refused even where it would stay inside, so that one rule
/// holds for the tools and the policy's command arguments alike.
fn check_spelling(rel: &str) -> Result<&str, PathError> {
    let rel = if rel.is_empty() { "." } else { rel };
    let p = Path::new(rel);
    if p.is_absolute() {
        return Err(PathError::Absolute(rel.to_string()));
    }
    if p.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(PathError::ParentDir(rel.to_string()));
    }
    Ok(rel)
}

/// The workspace root, opened: every resolution starts from this descriptor, and `real` is
/// the root's path as the kernel names it (so the callers' `root` need not be canonical), read
/// back from /proc the first time a path through a symlink needs it ([`open_named`]).
/// A walk that opens many files beneath one root opens it once ([`Root::open`]).
pub struct Root {
    fd: OwnedFd,
    real: std::sync::OnceLock<PathBuf>,
}

impl Root {
    /// Opens the workspace root `root`, for the files a walk opens beneath it.
    pub fn open(root: &Path) -> Result<Root, PathError> {
        open_root(root)
    }

    /// [`open_file`] beneath this root, for a path a walk found. The tools' walks never
    /// follow a symlink (`follow_links(false)`), so every component of `rel` was a real folder
    /// when the walk listed it: the kernel is asked to follow none (`RESOLVE_NO_SYMLINKS`), and
    /// the name it resolves is `rel` itself, which spares reading it back from /proc (a third of
    /// a file's opening, measured on a context fixture). A symlink swapped in since the walk
    /// listed the path is refused by the kernel (ELOOP), and the path then takes
    /// [`open_file`]'s way, which follows it while it stays inside: the same files are
    /// opened, and refused with the same words, either way.
    pub fn open_walked(&self, rel: &str, access: Access) -> Result<File, PathError> {
        let rel = check_spelling(rel)?;
        let fd = match openat2_with(&self.fd, rel, OFlags::PATH, Mode::empty(), beneath() | ResolveFlags::NO_SYMLINKS) {
            Ok(fd) => fd,
            Err(Errno::LOOP) => return open_file_in(self, rel, access),
            Err(e) => return Err(map_errno(rel, e)),
        };
        check_regular(rel, &fd)?;
        check_resolved(rel, &normalize(rel), access)?;
        reopen(&fd, access, rel)
    }

    /// [`read_regular`] beneath this root.
    pub fn read_regular(&self, rel: &str) -> Result<Vec<u8>, PathError> {
        use std::io::Read as _;
        let (file, len) = open_file_sized(self, rel, Access::Read)?;
        // Sized from the length the checks saw: `File::read_to_end` would ask the kernel for
        // the size and the position again before reading. (A file that grew since is still
        // read to its end.)
        let mut bytes = Vec::with_capacity(len as usize + 1);
        (&file)
            .take(u64::MAX)
            .read_to_end(&mut bytes)
            .map_err(|e| PathError::Io { path: rel.to_string(), source: e })?;
        Ok(bytes)
    }
}

fn open_root(root: &Path) -> Result<Root, PathError> {
    let fd = rustix::fs::open(root, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| PathError::Io { path: ".".into(), source: e.into() })?;
    Ok(Root { fd, real: std::sync::OnceLock::new() })
}

impl Root {
    /// The root's path as the kernel names it, read back from /proc once.
    fn real(&self) -> Result<&Path, PathError> {
        if let Some(real) = self.real.get() {
            return Ok(real);
        }
        let real = std::fs::read_link(proc_fd(&self.fd)).map_err(|e| PathError::Io {
            path: ".".into(),
            source: std::io::Error::other(format!("cannot read the workspace root back from /proc/self/fd: {e}")),
        })?;
        Ok(self.real.get_or_init(|| real))
    }
}

/// `rel` opened beneath `dir` with `flags` (`O_PATH` and the like), and whether a symlink was
/// followed on the way.
///
/// The kernel is first asked to follow none (`RESOLVE_NO_SYMLINKS`): then every component of
/// `rel` is a real folder or the file itself, and the name the kernel resolved is `rel`'s own
/// spelling ([`normalize`]), so [`named`](resolved_name) need not read it back from /proc (a
/// `readlink` of `/proc/self/fd/N`, with the root's own the first time: most of a path check's
/// cost after the opening, measured over small cells, 2026-11-25). A path through a symlink is
/// refused by that first call (ELOOP) and opened again following its symlinks while they stay
/// beneath the root, as every path was before; its name is then read back. Either way the same
/// file is opened and the same rules judge its name, as in [`Root::open_walked`].
fn open_named(dir: &Root, rel: &str, flags: OFlags) -> Result<(OwnedFd, bool), Errno> {
    match openat2_with(&dir.fd, rel, flags, Mode::empty(), beneath() | ResolveFlags::NO_SYMLINKS) {
        Err(Errno::LOOP) => openat2(&dir.fd, rel, flags, Mode::empty()).map(|fd| (fd, true)),
        other => other.map(|fd| (fd, false)),
    }
}

/// The workspace-relative name of `fd`, opened from `opened` by [`open_named`]; `path`, the
/// path as given, names it in an error.
fn resolved_name(dir: &Root, fd: &OwnedFd, opened: &str, path: &str, followed: bool) -> Result<String, PathError> {
    if followed { resolved_rel(dir, fd, path) } else { Ok(normalize(opened)) }
}

/// `openat2` beneath `dir`. The kernel answers EAGAIN when a rename raced with the resolution;
/// the call is then simply repeated.
fn openat2(dir: impl AsFd, rel: &str, flags: OFlags, mode: Mode) -> Result<OwnedFd, Errno> {
    openat2_with(dir, rel, flags, mode, beneath())
}

/// [`openat2`] with other resolve flags.
fn openat2_with(dir: impl AsFd, rel: &str, flags: OFlags, mode: Mode, how: ResolveFlags) -> Result<OwnedFd, Errno> {
    let mut tries = 0;
    loop {
        match rustix::fs::openat2(&dir, rel, flags | OFlags::CLOEXEC, mode, how) {
            Err(Errno::AGAIN) if tries < 16 => tries += 1,
            other => return other,
        }
    }
}

fn map_errno(path: &str, e: Errno) -> PathError {
    let path = path.to_string();
    match e {
        Errno::XDEV => PathError::Escapes(path),
        Errno::LOOP => PathError::Loop(path),
        Errno::NOENT => PathError::NotFound(path),
        Errno::NOTDIR => PathError::NotDirOnTheWay(path),
        Errno::ISDIR => PathError::IsDir(path),
        Errno::EXIST => PathError::Exists(path),
        Errno::NOSYS => PathError::Unsupported(path),
        e => PathError::Io { path, source: e.into() },
    }
}

fn proc_fd(fd: &impl AsRawFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// The workspace-relative path the kernel resolved for `fd`, read back from /proc. Anything
/// that does not read back as a path under the root (no /proc, a file deleted meanwhile, a mount
/// that shows another path) is refused rather than guessed.
fn resolved_rel(root: &Root, fd: &OwnedFd, path: &str) -> Result<String, PathError> {
    let unknown = |why: &str| PathError::Io {
        path: path.to_string(),
        source: std::io::Error::other(format!("cannot tell where it resolves ({why})")),
    };
    let real = std::fs::read_link(proc_fd(fd)).map_err(|e| unknown(&format!("/proc/self/fd: {e}")))?;
    let rel = real.strip_prefix(root.real()?).map_err(|_| unknown("not under the workspace root"))?;
    Ok(rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/"))
}

fn kind_name(t: FileType) -> &'static str {
    match t {
        FileType::Fifo => "fifo",
        FileType::Socket => "socket",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        FileType::Symlink => "symlink",
        FileType::Directory => "directory",
        FileType::RegularFile => "regular file",
        _ => "special file",
    }
}

/// Refuses what the tools never touch: secrets (any access) and `.git` (writes).
fn check_resolved(path: &str, resolved: &str, access: Access) -> Result<(), PathError> {
    if has_secret_component(path) || has_secret_component(resolved) {
        return Err(PathError::Secret { path: path.into(), resolved: resolved.into() });
    }
    if access == Access::Write && (has_git_component(path) || has_git_component(resolved)) {
        return Err(PathError::InsideGit { path: path.into(), resolved: resolved.into() });
    }
    Ok(())
}

/// Reopens the `O_PATH` descriptor `fd` for I/O through /proc: the same inode, whatever the
/// path names by now (the magic link is ours to follow, so no `O_NOFOLLOW` here). `O_NONBLOCK`
/// stays as a second guard, though only regular files get here.
fn reopen(fd: &OwnedFd, access: Access, path: &str) -> Result<File, PathError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(access == Access::Write)
        .custom_flags((OFlags::NONBLOCK | OFlags::NOCTTY).bits() as i32)
        .open(proc_fd(fd))
        .map_err(|e| PathError::Io { path: path.to_string(), source: e })?;
    let (before, after) = (rustix::fs::fstat(fd), rustix::fs::fstat(&file));
    match (before, after) {
        (Ok(a), Ok(b)) if a.st_dev == b.st_dev && a.st_ino == b.st_ino => Ok(file),
        _ => Err(PathError::Io {
            path: path.to_string(),
            source: std::io::Error::other("the file changed while it was opened"),
        }),
    }
}

/// Opens the existing regular file `rel` beneath `root`, with a single link, for
/// `access`.
pub fn open_file(root: &Path, rel: &str, access: Access) -> Result<File, PathError> {
    let rel = check_spelling(rel)?;
    open_file_in(&open_root(root)?, rel, access)
}

fn open_file_in(dir: &Root, rel: &str, access: Access) -> Result<File, PathError> {
    open_file_sized(dir, rel, access).map(|(file, _)| file)
}

/// [`open_file_in`], with the file's length when it was checked.
fn open_file_sized(dir: &Root, rel: &str, access: Access) -> Result<(File, u64), PathError> {
    let rel = check_spelling(rel)?;
    let (fd, followed) = open_named(dir, rel, OFlags::PATH).map_err(|e| map_errno(rel, e))?;
    let stat = check_regular(rel, &fd)?;
    let resolved = resolved_name(dir, &fd, rel, rel, followed)?;
    check_resolved(rel, &resolved, access)?;
    Ok((reopen(&fd, access, rel)?, stat.st_size as u64))
}

/// The `O_PATH` descriptor's file, if it is a regular file with a single link.
fn check_regular(rel: &str, fd: &OwnedFd) -> Result<rustix::fs::Stat, PathError> {
    let stat = rustix::fs::fstat(fd).map_err(|e| map_errno(rel, e))?;
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => {}
        FileType::Directory => return Err(PathError::IsDir(rel.to_string())),
        other => return Err(PathError::NotRegular { path: rel.to_string(), kind: kind_name(other) }),
    }
    if stat.st_nlink > 1 {
        return Err(PathError::HardLinked { path: rel.to_string(), links: stat.st_nlink as u64 });
    }
    Ok(stat)
}

/// Creates the new file `rel` beneath `root`, creating its missing parent folders
/// beneath the root too. Fails with [`PathError::Exists`] when anything is already there,
/// a symlink included.
pub fn create_file(root: &Path, rel: &str) -> Result<File, PathError> {
    let rel = check_spelling(rel)?;
    let path = Path::new(rel);
    let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return Err(PathError::IsDir(rel.to_string()));
    };
    let parts: Vec<String> = path
        .parent()
        .into_iter()
        .flat_map(|p| p.components())
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    let dir = open_root(root)?;
    let mut parent = dir.fd.try_clone().map_err(|e| PathError::Io { path: rel.to_string(), source: e })?;
    // The name the kernel resolved for `parent`: the root's is empty.
    let mut parent_rel = String::new();
    for i in 0..parts.len() {
        let prefix = parts[..=i].join("/");
        // The folder is checked before anything is created in it, so no folder appears
        // inside `.git` even for a write that is then refused.
        check_resolved(rel, &parent_rel, Access::Write)?;
        let folder = OFlags::PATH | OFlags::DIRECTORY;
        let (fd, followed) = match open_named(&dir, &prefix, folder) {
            Ok(opened) => opened,
            Err(Errno::NOENT) => {
                // mkdirat never follows its last component; EEXIST means another writer won.
                match rustix::fs::mkdirat(&parent, parts[i].as_str(), Mode::from_raw_mode(0o777)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(map_errno(rel, e)),
                }
                open_named(&dir, &prefix, folder).map_err(|e| map_errno(rel, e))?
            }
            Err(Errno::NOTDIR) => return Err(PathError::NotDirOnTheWay(rel.to_string())),
            Err(e) => return Err(map_errno(rel, e)),
        };
        parent_rel = resolved_name(&dir, &fd, &prefix, rel, followed)?;
        parent = fd;
    }
    let resolved = if parent_rel.is_empty() { name.clone() } else { format!("{parent_rel}/{name}") };
    check_resolved(rel, &resolved, Access::Write)?;
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY;
    let fd = openat2(&parent, name.as_str(), flags, Mode::from_raw_mode(0o666)).map_err(|e| map_errno(rel, e))?;
    Ok(File::from(fd))
}

/// The path of the folder `rel` beneath `root` (`root` joined with what the kernel resolved),
/// for walkers that take a path. The walkers do not follow symlinks below it.
pub fn open_dir(root: &Path, rel: &str) -> Result<PathBuf, PathError> {
    let rel = check_spelling(rel)?;
    let dir = open_root(root)?;
    let (fd, followed) = open_named(&dir, rel, OFlags::PATH).map_err(|e| map_errno(rel, e))?;
    let stat = rustix::fs::fstat(&fd).map_err(|e| map_errno(rel, e))?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::Directory {
        return Err(PathError::NotDir(rel.to_string()));
    }
    let resolved = resolved_name(&dir, &fd, rel, rel, followed)?;
    Ok(if resolved.is_empty() { root.to_path_buf() } else { root.join(resolved) })
}

/// The bytes of the regular file `rel` beneath `root`, under the rules of
/// [`open_file`]: for the walkers, which skip what this refuses.
pub fn read_regular(root: &Path, rel: &str) -> Result<Vec<u8>, PathError> {
    Root::open(root)?.read_regular(rel)
}

/// Resolves `rel` beneath `root` without opening anything for I/O: the longest
/// existing prefix is resolved by the kernel (`O_PATH`, which never blocks), the rest is taken
/// as given. For the policy, which must judge paths that a write will create.
pub fn resolve(root: &Path, rel: &str) -> Result<Resolved, PathError> {
    let rel = check_spelling(rel)?;
    let dir = open_root(root)?;
    let comps: Vec<&str> = rel.split('/').filter(|c| !c.is_empty() && *c != ".").collect();
    for keep in (0..=comps.len()).rev() {
        let prefix = if keep == 0 { ".".to_string() } else { comps[..keep].join("/") };
        match open_named(&dir, &prefix, OFlags::PATH) {
            Ok((fd, followed)) => {
                let mut parts = vec![resolved_name(&dir, &fd, &prefix, rel, followed)?];
                parts.extend(comps[keep..].iter().map(|c| c.to_string()));
                let joined = parts.into_iter().filter(|p| !p.is_empty()).collect::<Vec<_>>().join("/");
                return Ok(Resolved { rel: joined, exists: keep == comps.len() });
            }
            Err(Errno::NOENT) => continue,
            Err(e) => return Err(map_errno(rel, e)),
        }
    }
    Err(PathError::NotFound(rel.to_string()))
}

/// The resolved workspace-relative path of `rel` if it exists, `None` if it does not: one
/// `openat2`, which fails with EXDEV as soon as a symlink on the way leaves the root, whether
/// or not the rest exists. For the policy's command arguments, which are often not paths.
pub fn resolve_existing(root: &Path, rel: &str) -> Result<Option<String>, PathError> {
    let rel = check_spelling(rel)?;
    let dir = open_root(root)?;
    match open_named(&dir, rel, OFlags::PATH) {
        Ok((fd, followed)) => resolved_name(&dir, &fd, rel, rel, followed).map(Some),
        Err(Errno::NOENT | Errno::NOTDIR | Errno::NAMETOOLONG) => Ok(None),
        Err(e) => Err(map_errno(rel, e)),
    }
}

/// `./a/b.py` and `a/b.py` are the same file for repeated-read counting and first-read metrics.
pub fn normalize(path: &str) -> String {
    Path::new(path)
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_spelling_per_file() {
        assert_eq!(normalize("./a/./b.py"), "a/b.py");
        assert_eq!(normalize("a/b.py"), "a/b.py");
    }

    #[test]
    fn secret_names_are_recognized() {
        for name in [".env", ".env.local", "models.toml", "server.PEM", "deploy_key", "id_ed25519.pub"] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in ["env.py", "keys.py", "README.md", "os.environ"] {
            assert!(!is_secret_name(name), "{name}");
        }
    }

    #[test]
    fn resolution_is_the_kernels_and_stays_beneath_the_root() {
        let outer = tempfile::tempdir().unwrap();
        let o = outer.path().canonicalize().unwrap();
        let root = o.join("ws");
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::os::unix::fs::symlink("src", root.join("lib")).unwrap();
        std::os::unix::fs::symlink("..", root.join("up")).unwrap();
        std::os::unix::fs::symlink("/proc/self/root", root.join("magic")).unwrap();
        std::os::unix::fs::symlink("loop", root.join("loop")).unwrap();
        let resolved = resolve(&root, "lib/new/x.py").unwrap();
        assert_eq!(resolved, Resolved { rel: "src/new/x.py".into(), exists: false });
        assert_eq!(resolve(&root, "./lib").unwrap(), Resolved { rel: "src".into(), exists: true });
        assert_eq!(resolve(&root, "").unwrap(), Resolved { rel: String::new(), exists: true });
        assert!(matches!(resolve(&root, "up/ws/src"), Err(PathError::Escapes(_))), "even when it comes back in");
        assert!(matches!(resolve(&root, "magic/etc"), Err(PathError::Escapes(_) | PathError::Loop(_))));
        assert!(matches!(resolve(&root, "loop"), Err(PathError::Loop(_))));
        assert!(matches!(resolve(&root, "/etc"), Err(PathError::Absolute(_))));
        assert!(matches!(resolve(&root, "src/../src"), Err(PathError::ParentDir(_))));
        assert_eq!(open_dir(&root, "lib").unwrap(), root.join("src"));
        assert_eq!(resolve_existing(&root, "lib").unwrap().as_deref(), Some("src"));
        assert_eq!(resolve_existing(&root, "lib/nope").unwrap(), None);
        assert!(matches!(resolve_existing(&root, "up/nope"), Err(PathError::Escapes(_))));
        // A root reached through a symlink works the same: the kernel names the real root.
        std::os::unix::fs::symlink(&root, o.join("alias")).unwrap();
        assert_eq!(resolve(&o.join("alias"), "lib").unwrap(), Resolved { rel: "src".into(), exists: true });
    }

    /// A path without symlinks is named by its spelling (the root is never read back from
    /// /proc); one through a symlink is named by what the kernel resolved, and the secrets and
    /// `.git` rules judge that name, for opening, creating and resolving alike.
    #[test]
    fn paths_without_symlinks_are_their_own_names_and_symlinks_are_read_back() {
        let outer = tempfile::tempdir().unwrap();
        let root = outer.path().join("ws");
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::write(root.join("src/a.py"), "a").unwrap();
        std::fs::write(root.join(".env"), "KEY=1").unwrap();
        std::os::unix::fs::symlink(".env", root.join("notes.txt")).unwrap();
        std::os::unix::fs::symlink(".git", root.join("meta")).unwrap();
        std::os::unix::fs::symlink("src", root.join("lib")).unwrap();

        let opened = Root::open(&root).unwrap();
        assert_eq!(opened.read_regular("./src//a.py").unwrap(), b"a");
        let (_, followed) = open_named(&opened, "src/a.py", OFlags::PATH).unwrap();
        assert!(!followed && opened.real.get().is_none(), "no symlink: nothing read back from /proc");
        assert_eq!(opened.read_regular("lib/a.py").unwrap(), b"a", "through a symlink inside");
        assert!(opened.real.get().is_some(), "a symlink: the root was read back to name the file");

        assert!(
            matches!(open_file(&root, "notes.txt", Access::Read), Err(PathError::Secret { resolved, .. }) if resolved == ".env")
        );
        assert!(matches!(create_file(&root, "meta/hooks/x"), Err(PathError::InsideGit { .. })));
        assert!(!root.join(".git/hooks").exists(), "no folder made inside .git");
        create_file(&root, "lib/new/b.py").unwrap();
        assert!(root.join("src/new/b.py").is_file());
        create_file(&root, "pkg/deep/c.py").unwrap();
        assert!(root.join("pkg/deep/c.py").is_file());
        assert_eq!(
            resolve(&root, "pkg/deep/none/d.py").unwrap(),
            Resolved { rel: "pkg/deep/none/d.py".into(), exists: false }
        );
        assert_eq!(resolve(&root, "lib/new/b.py").unwrap(), Resolved { rel: "src/new/b.py".into(), exists: true });
        assert_eq!(resolve_existing(&root, "meta").unwrap().as_deref(), Some(".git"));
        assert_eq!(resolve_existing(&root, "./pkg/deep").unwrap().as_deref(), Some("pkg/deep"));
        assert_eq!(open_dir(&root, "lib/new").unwrap(), root.join("src/new"));
        assert_eq!(open_dir(&root, "pkg").unwrap(), root.join("pkg"));
    }
}
