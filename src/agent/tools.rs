//! The agent's tools at work: running a typed [`Call`] in the workspace.
//!
//! What the tools are, their names and arguments, lives in [`crate::action`]; this module
//! only executes them.
//!
//! Tools run only after [`super::policy::decide`] allowed the call. A tool failure (no match
//! for an edit, a missing file) is a result the model reads and can recover from, never an
//! error of the loop. Outputs may be large: the loop stores full outputs as artifacts and
//! shows the model a bounded preview.
//!
//! The file tools go through [`super::paths`], which has the kernel resolve every path beneath
//! the workspace root and opens only regular files with a single link: they never follow a
//! symlink out, never block on a fifo, and never reach a file outside through a hard link,
//! even when the policy was fooled or the workspace changed after it decided. Each refusal is
//! a tool failure whose text says why. Writes go through the descriptor that was checked.

use std::fmt::Write as _;
use std::io::{Read as _, Write as _};
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};

use grep_searcher::Searcher;
use grep_searcher::sinks::UTF8;

use super::paths::{self, Access, PathError, is_secret_name, normalize};
use super::repomap::{RepoIndex, RepoMapView};
use crate::action::Call;
use crate::bench::Case;
use crate::process;
use crate::sandbox::Sandbox;

/// What a tool produced.
#[derive(Debug, Clone, Default)]
pub struct ToolOutput {
    pub ok: bool,
    pub text: String,
    pub modified: Vec<String>,
    pub read: Option<String>,
    /// The map the `repo_map` tool showed (for `repo_map_used`).
    pub repo_map: Option<RepoMapView>,
}

impl ToolOutput {
    fn ok(text: String) -> Self {
        ToolOutput { ok: true, text, ..Default::default() }
    }
    fn fail(text: impl Into<String>) -> Self {
        ToolOutput { ok: false, text: text.into(), ..Default::default() }
    }
}

/// Most entries `list_files` and `search_code` return before saying "more".
pub(crate) const MAX_ENTRIES: usize = 2000;

/// Estimated tokens of the `repo_map` tool's output: room for the few dozen most relevant
/// files with their symbols, well under the preview limit the loop shows the model.
pub const REPO_MAP_TOOL_BUDGET: usize = 1500;

/// Runs an allowed `call` in the workspace at `root` (canonical).
pub async fn execute(call: &Call, case: &Case, root: &Path, sandbox: &Sandbox) -> ToolOutput {
    match call {
        Call::ListFiles { path, max_depth } => list_files(root, path, *max_depth),
        Call::ReadFile { path, start_line, end_line } => read_file(root, path, *start_line, *end_line),
        Call::SearchCode { pattern, path, glob } => search_code(root, pattern, path, glob.as_deref()),
        Call::RepoMap { path, query } => repo_map(root, path, query.as_deref().unwrap_or(&case.prompt)),
        Call::EditFile { path, old, new } => edit_file(root, path, old, new),
        Call::WriteFile { path, content, overwrite } => write_file(root, path, content, *overwrite),
        Call::RunTests {} => {
            // The same runner and verdict as the judge's run (`score::run_tests`).
            let run = super::score::run_tests(case, root, None, sandbox).await;
            let timed_out = run.result.as_ref().is_ok_and(|o| o.timed_out);
            let text = mask_durations(&run.tool_text()).into_owned();
            ToolOutput { ok: run.result.is_ok() && !timed_out, text, ..Default::default() }
        }
        Call::RunCommand { argv } => run_command(case, root, argv, sandbox).await,
        Call::Finish { answer } => ToolOutput::ok(format!("finished: {answer}")),
        // The loop runs a delegation itself (`super::delegate::run`): it needs the model.
        Call::DelegateReadonly { .. } => ToolOutput::fail("delegate_readonly is run by the agent loop, not here"),
    }
}

fn walker(dir: &Path, max_depth: Option<usize>) -> ignore::Walk {
    // `follow_links(false)` is the default, said here because it is load-bearing: a symlink
    // below `dir` is listed as a name, never entered, so no walk leaves the workspace. The user's
    // global git excludes do not count: they would make what the agent sees depend on the
    // machine (and cost reading git's config files on every call). Parent folders' ignore files
    // do, so that listing a subfolder honours the workspace's top `.gitignore`.
    ignore::WalkBuilder::new(dir)
        .hidden(false)
        .git_ignore(true)
        .git_global(false)
        .require_git(false)
        .follow_links(false)
        .max_depth(max_depth)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(|e| e.file_name() != ".git")
        .build()
}

fn rel(root: &Path, p: &Path) -> String {
    p.strip_prefix(root).unwrap_or(p).to_string_lossy().into_owned()
}

/// The folder `path` names, resolved beneath the root by the kernel. A missing folder keeps
/// the message it always had, so the text the model reads (and cache keys) do not change.
fn folder(root: &Path, path: &str) -> Result<PathBuf, String> {
    paths::open_dir(root, path).map_err(|e| match e {
        PathError::NotFound(_) | PathError::NotDirOnTheWay(_) => format!("`{path}` is not a directory"),
        e => e.to_string(),
    })
}

fn list_files(root: &Path, path: &str, max_depth: usize) -> ToolOutput {
    let dir = match folder(root, path) {
        Ok(d) => d,
        Err(why) => return ToolOutput::fail(why),
    };
    let mut out = String::new();
    let mut n = 0;
    for entry in walker(&dir, Some(max_depth.max(1))).flatten() {
        if entry.depth() == 0 {
            continue;
        }
        n += 1;
        if n > MAX_ENTRIES {
            out.push_str("[more entries omitted; list a subdirectory]\n");
            break;
        }
        let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
        let _ = writeln!(out, "{}{}", rel(root, entry.path()), if is_dir { "/" } else { "" });
    }
    if out.is_empty() {
        out.push_str("(empty)\n");
    }
    ToolOutput::ok(out)
}

fn read_file(root: &Path, path: &str, start: Option<usize>, end: Option<usize>) -> ToolOutput {
    let mut opened = match paths::open_file(root, path, Access::Read) {
        Ok(f) => f,
        Err(PathError::NotFound(_)) => {
            return ToolOutput::fail(format!("`{path}` does not exist; use list_files to see what does"));
        }
        Err(e) => return ToolOutput::fail(e.to_string()),
    };
    let mut bytes = Vec::new();
    if let Err(e) = opened.read_to_end(&mut bytes) {
        return ToolOutput::fail(format!("cannot read `{path}`: {e}"));
    }
    // Valid UTF-8 (nearly every file) is checked by `from_utf8`'s word-at-a-time loop rather
    // than the lossy decoder's byte-at-a-time one; the text is the same.
    let text = match std::str::from_utf8(&bytes) {
        Ok(text) => std::borrow::Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(&bytes),
    };
    // `str::lines`'s count, from the newlines (`memchr`): one line per newline, and one more
    // for text after the last. A large file is read a few lines at a time, so it is not split
    // into lines twice (to count them, then to skip to the first wanted).
    let newlines = || memchr::memchr_iter(b'\n', text.as_bytes());
    let total = newlines().count() + usize::from(!text.is_empty() && !text.ends_with('\n'));
    let first = start.unwrap_or(1).max(1);
    let last = end.unwrap_or(total).min(total);
    let mut out = String::new();
    if first > total.max(1) || (end.is_some() && last < first) {
        return ToolOutput {
            ok: false,
            text: format!("line range {first}-{} is outside `{path}` ({total} lines)", end.unwrap_or(total)),
            read: Some(path.to_string()),
            ..Default::default()
        };
    }
    if start.is_some() || end.is_some() {
        let _ = writeln!(out, "{path} lines {first}-{last} of {total}");
    }
    // Line `first` starts after the newline that ends line `first - 1` (there is one: `first`
    // is at most `total`).
    let from = if first == 1 { 0 } else { newlines().nth(first - 2).map_or(text.len(), |at| at + 1) };
    for (i, line) in text[from..].lines().take(last + 1 - first).enumerate() {
        let _ = writeln!(out, "{:>5}| {line}", first + i);
    }
    ToolOutput { ok: true, text: out, read: Some(normalize(path)), ..Default::default() }
}

fn search_code(root: &Path, pattern: &str, path: &str, glob: Option<&str>) -> ToolOutput {
    search_code_at(root, pattern, path, glob, std::time::SystemTime::now())
}

/// [`search_code`] at the time `now` ([`Stamp::SETTLED`](crate::util::Stamp::SETTLED) is reckoned from it).
fn search_code_at(
    root: &Path,
    pattern: &str,
    path: &str,
    glob: Option<&str>,
    now: std::time::SystemTime,
) -> ToolOutput {
    let dir = match folder(root, path) {
        Ok(d) => d,
        Err(why) => return ToolOutput::fail(why),
    };
    let matcher = match search_cache::matcher(pattern) {
        Ok(m) => m,
        Err(e) => return ToolOutput::fail(format!("invalid regex `{pattern}`: {e}")),
    };
    let glob = match glob.map(|g| globset::Glob::new(g).map(|g| g.compile_matcher())) {
        Some(Err(e)) => return ToolOutput::fail(format!("invalid glob: {e}")),
        Some(Ok(m)) => Some(m),
        None => None,
    };
    let mut out = String::new();
    let mut refused = Vec::new();
    let mut hits = 0usize;
    let mut searcher = Searcher::new();
    // Opened once for the walk: each file is then opened beneath it, checked like read_file.
    let opened_root = paths::Root::open(root);
    let mut cache = search_cache::Files::of(root, now);
    // What the copy made, while the workspace is as it made it: the files to search are listed
    // from it, and an unchanged copy's bytes are its fixture file's (`as_copied`).
    let copy = as_copied::Copy::of(root);
    let listed = copy.as_ref().and_then(|c| c.files_below(&rel(root, &dir)));
    let files: Box<dyn Iterator<Item = (String, PathBuf)>> = match listed {
        Some(files) => Box::new(files.into_iter().map(|relpath| {
            let path = root.join(&relpath);
            (relpath, path)
        })),
        // The walker's type is the entry's own (lstat): symlinks, fifos, sockets and devices
        // are skipped here, before anything is opened.
        None => Box::new(
            walker(&dir, None)
                .flatten()
                .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
                .map(|e| (rel(root, e.path()), e.into_path())),
        ),
    };
    'walk: for (relpath, path) in files {
        let name = path.file_name().unwrap_or_default();
        if let Some(g) = &glob
            && !g.is_match(name)
            && !g.is_match(&relpath)
        {
            continue;
        }
        if is_secret_name(&name.to_string_lossy()) {
            continue;
        }
        // A file as the copy made it: its fixture file's bytes (`as_copied`). Else the bytes an
        // earlier search read from this very file, if it has not changed since
        // (`search_cache`); else the file opened beneath the root and checked like read_file:
        // a hard link to a file outside, or a file swapped for a fifo since the walk saw it, is
        // refused, not searched.
        let copied = copy.as_ref().and_then(|c| c.bytes(&relpath));
        let bytes = match copied.or_else(|| cache.get(&relpath, &path)) {
            Some(bytes) => bytes,
            None => match opened_root.as_ref().map(|r| r.open_walked(&relpath, Access::Read)) {
                Ok(Ok(file)) => match cache.read(&relpath, file) {
                    Ok(bytes) => bytes,
                    // Unreadable now (a read error): searched as an empty file, as before.
                    Err(_) => continue,
                },
                // The root itself could not be opened: every file says so, as before.
                Err(e) => {
                    refused.push(e.to_string());
                    continue;
                }
                Ok(Err(e)) => match e {
                    PathError::Secret { .. } => continue,
                    e => {
                        refused.push(e.to_string());
                        continue;
                    }
                },
            },
        };
        let mut stop = false;
        let _ = searcher.search_slice(
            &matcher,
            &bytes,
            UTF8(|line_no, line| {
                hits += 1;
                if hits > MAX_ENTRIES {
                    stop = true;
                    return Ok(false);
                }
                let _ = write!(out, "{relpath}:{line_no}: {}", crate::util::truncate_str(line, 300));
                if !line.ends_with('\n') {
                    out.push('\n');
                }
                Ok(true)
            }),
        );
        if stop {
            out.push_str("[more matches omitted; narrow the pattern or path]\n");
            break 'walk;
        }
    }
    if hits == 0 {
        out = format!("no matches for `{pattern}`\n");
    }
    for why in refused {
        let _ = writeln!(out, "[not searched: {why}]");
    }
    ToolOutput::ok(out)
}

/// What `search_code` keeps between its calls: the bytes of the files it searched, per
/// workspace, and its compiled patterns.
///
/// An agent searches the same tree many times; on a large one, opening every file again under
/// the tools' checks (an `openat2`, a reopen through /proc, two `fstat`s, the read) is most of
/// a search. A file whose bytes were read by an earlier search is searched from those bytes
/// when its `lstat` shows the same file unchanged: the same device and inode, size,
/// modification and change times (nanoseconds), still a regular file with one link. Only
/// bytes read through the checked open are kept, so no file is ever read here that the checks
/// would refuse: a name that now leads elsewhere (a folder swapped for a symlink) shows another
/// inode and is opened under the checks again.
///
/// The change time cannot be set by a user, and moves with every write, rename, `chmod`,
/// `touch` or link, so an unchanged one means unchanged bytes, with one exception git knows as
/// "racy" files: a change within the same clock tick as the read that preceded it leaves the
/// times equal. So a file is kept only when its last change was at least [`Stamp::SETTLED`](crate::util::Stamp::SETTLED) before it
/// was read (a file just written is read again by the next search, until it settles). An inode
/// number reused by a new file cannot match either: the new file's change time is after the
/// read.
///
/// Bounded: at most [`MAX_BYTES`] of bytes in all and the [`MAX_WORKSPACES`] most recently
/// searched workspaces (a cell's workspace is searched during the cell only; the oldest is
/// dropped first), so a process's memory does not grow with its cells.
mod search_cache {
    use std::collections::HashMap;
    use std::io::Read as _;
    use std::os::unix::fs::MetadataExt as _;
    use std::path::{Path, PathBuf};
    use std::sync::{Arc, Mutex};
    use std::time::SystemTime;

    use grep_regex::RegexMatcher;

    /// Bytes kept over all workspaces.
    pub(super) const MAX_BYTES: usize = 32 << 20;
    /// Workspaces kept.
    pub(super) const MAX_WORKSPACES: usize = 8;
    /// Compiled patterns kept (a pattern is often searched again, on another path).
    const MAX_PATTERNS: usize = 16;

    use crate::util::Stamp;

    /// A regular file's stamp: only one with a single name, so no other path reaches its bytes.
    fn file_stamp(meta: &std::fs::Metadata) -> Option<Stamp> {
        (meta.file_type().is_file() && meta.nlink() == 1).then(|| Stamp::of(meta))
    }

    struct Workspace {
        root: PathBuf,
        files: HashMap<String, (Stamp, Arc<[u8]>)>,
        bytes: usize,
    }

    #[derive(Default)]
    struct Kept {
        /// Most recently searched last.
        workspaces: Vec<Workspace>,
        patterns: Vec<(String, RegexMatcher)>,
    }

    static KEPT: Mutex<Kept> = Mutex::new(Kept { workspaces: Vec::new(), patterns: Vec::new() });

    fn kept() -> std::sync::MutexGuard<'static, Kept> {
        KEPT.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The compiled `pattern`, compiled once for the process's last few patterns.
    pub(super) fn matcher(pattern: &str) -> Result<RegexMatcher, grep_regex::Error> {
        if let Some((_, m)) = kept().patterns.iter().find(|(p, _)| p == pattern) {
            return Ok(m.clone());
        }
        let m = RegexMatcher::new_line_matcher(pattern)?;
        let mut kept = kept();
        if kept.patterns.len() >= MAX_PATTERNS {
            kept.patterns.remove(0);
        }
        kept.patterns.push((pattern.to_string(), m.clone()));
        Ok(m)
    }

    /// One search's view of a workspace's kept bytes: taken out of the process's store for
    /// the search (so the lock is not held while it reads), put back when dropped.
    pub(super) struct Files {
        ws: Option<Workspace>,
        now: SystemTime,
    }

    impl Files {
        /// The kept files of the workspace at `root`.
        pub(super) fn of(root: &Path, now: SystemTime) -> Files {
            let mut kept = kept();
            let ws = match kept.workspaces.iter().position(|w| w.root == root) {
                Some(i) => kept.workspaces.remove(i),
                None => Workspace { root: root.to_path_buf(), files: HashMap::new(), bytes: 0 },
            };
            Files { ws: Some(ws), now }
        }

        /// The kept bytes of `rel` (at `path`), if the file is the one they were read from and
        /// has not changed since.
        pub(super) fn get(&mut self, rel: &str, path: &Path) -> Option<Arc<[u8]>> {
            let ws = self.ws.as_mut()?;
            let (stamp, bytes) = ws.files.get(rel)?;
            let now = std::fs::symlink_metadata(path).ok().and_then(|m| file_stamp(&m));
            if now == Some(*stamp) {
                return Some(bytes.clone());
            }
            let (_, gone) = ws.files.remove(rel).expect("found above");
            ws.bytes -= gone.len();
            None
        }

        /// Reads `file`, opened for `rel` under the tools' checks, and keeps its bytes when it
        /// has settled and they fit.
        pub(super) fn read(&mut self, rel: &str, mut file: std::fs::File) -> std::io::Result<Arc<[u8]>> {
            // The stamp before the read: a change during the read makes the next search's
            // `lstat` differ from it, and the bytes are read again.
            let meta = file.metadata().ok();
            let stamp = meta.as_ref().and_then(file_stamp);
            let mut bytes = Vec::with_capacity(meta.map_or(0, |m| m.len() as usize) + 1);
            file.read_to_end(&mut bytes)?;
            let bytes: Arc<[u8]> = bytes.into();
            if let (Some(ws), Some(stamp)) = (self.ws.as_mut(), stamp)
                && stamp.settled(self.now)
                && ws.bytes + bytes.len() <= MAX_BYTES
            {
                ws.bytes += bytes.len();
                if let Some((_, old)) = ws.files.insert(rel.to_string(), (stamp, bytes.clone())) {
                    ws.bytes -= old.len();
                }
            }
            Ok(bytes)
        }
    }

    /// How many files' bytes are kept for the workspace at `root` (for tests).
    #[cfg(test)]
    pub(super) fn kept_files(root: &Path) -> usize {
        kept().workspaces.iter().find(|w| w.root == root).map_or(0, |w| w.files.len())
    }

    impl Drop for Files {
        fn drop(&mut self) {
            let Some(ws) = self.ws.take() else { return };
            let mut kept = kept();
            kept.workspaces.push(ws);
            // The oldest go first, beyond the count or the bytes of all.
            while kept.workspaces.len() > MAX_WORKSPACES
                || kept.workspaces.iter().map(|w| w.bytes).sum::<usize>() > MAX_BYTES
            {
                kept.workspaces.remove(0);
            }
        }
    }
}

/// A search of a workspace as its copy made it ([`crate::workspace::CopyListing`]).
///
/// A cell's first search comes before anything has changed its fresh copy, and most of a later
/// search's files are still as copied; yet a walk lists every folder again (and looks for four
/// ignore files in each, by path), and every file is opened under the tools' checks (an
/// `openat2`, the reopen through /proc, three `fstat`s) before it is read. What the copy made
/// answers both, after one `lstat` of each folder and file:
///
/// - **The listing.** A folder whose `lstat` is its copy's stamp has the entries the copy made:
///   adding, removing or renaming an entry moves its modification time, which the copy set to
///   its fixture folder's, settled before the copy began, and a `chmod` or a folder swapped for
///   another moves its change time or inode. When the copy made no name a walk takes rules
///   from (`.gitignore`, `.ignore`, `.git`) and no folder above the workspace has one, the walk
///   ignores nothing, and lists the entries of every folder by name, depth first, entering
///   folders and not symlinks: that order is read from the copy's listing. One folder that is
///   not as copied, or a rule file anywhere, and the search walks, as before.
/// - **The bytes.** A file whose `lstat` is its copy's stamp (still a regular file with one
///   link) holds what the copy wrote, its fixture file's bytes: a write moves the modification
///   time the copy set to its fixture file's. Those are read from the fixture file, opened
///   without following a last symlink and checked to be the file whose stamp the copy took
///   (settled before the copy began), and kept for the process ([`FIXTURE_BYTES`]), so later
///   cells of the fixture read none. A file changed since the copy is read from the workspace
///   under the checks, as before.
///
/// The one change this cannot see is git's "racy" one, as the checkpoint's first digests
/// cannot (src/agent/checkpoint.rs): a write that also sets the modification time back to its
/// fixture's, within the clock tick of the copy's last change of the entry.
mod as_copied {
    use std::collections::HashMap;
    use std::ffi::OsString;
    use std::io::Read as _;
    use std::os::fd::OwnedFd;
    use std::path::{Path, PathBuf};
    use std::sync::{Arc, Mutex};

    use rustix::fs::{AtFlags, FileType, Mode, OFlags};

    use crate::agent::paths::has_secret_component;
    use crate::util::Stamp;
    use crate::workspace::{CopyListing, Made};

    /// Bytes of fixture files kept for the process, by path, with the stamp they were read at.
    /// Keyed by the path's bytes: hashing a `PathBuf` walks its components, which was a sixth of
    /// a search's reads from the fixture (perf, context cases).
    #[allow(clippy::type_complexity)]
    static FIXTURE_BYTES: std::sync::LazyLock<Mutex<(HashMap<OsString, (Stamp, Arc<[u8]>)>, usize)>> =
        std::sync::LazyLock::new(|| Mutex::new((HashMap::new(), 0)));
    /// The most bytes kept: past it the process starts over.
    const MAX_BYTES: usize = 32 << 20;

    /// The copy of one workspace, opened for a search.
    pub(super) struct Copy {
        listing: Arc<CopyListing>,
        root: OwnedFd,
        root_path: PathBuf,
        /// The fixture's folder, which its files are opened beneath (by their workspace path,
        /// rather than each by its whole path, looked up component by component every time).
        fixture: Option<OwnedFd>,
    }

    impl Copy {
        /// The copy that made the workspace at `root` (canonical), if this process made it.
        pub(super) fn of(root: &Path) -> Option<Copy> {
            #[cfg(test)]
            if super::tests::WALK_ONLY.get() {
                return None;
            }
            let listing = crate::workspace::copy_listing(root)?;
            let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
            let fd = rustix::fs::open(root, flags, Mode::empty()).ok()?;
            let fixture = rustix::fs::open(&listing.fixture, flags, Mode::empty()).ok();
            Some(Copy { listing, root: fd, root_path: root.to_path_buf(), fixture })
        }

        /// The entry `rel` stated without following a last symlink, if it is the one the copy
        /// made and unchanged since: its stamp is `copy`, and its fixture entry's stamp,
        /// `source`, had settled before the copy began.
        fn as_made(&self, rel: &str, (copy, source): &(Stamp, Stamp), ty: FileType) -> bool {
            let path = if rel.is_empty() { "." } else { rel };
            let Ok(st) = rustix::fs::statat(&self.root, path, AtFlags::SYMLINK_NOFOLLOW) else { return false };
            FileType::from_raw_mode(st.st_mode) == ty
                && (ty != FileType::RegularFile || st.st_nlink == 1)
                && Stamp::of_stat(&st) == *copy
                && source.settled(self.listing.started)
        }

        /// The regular files a walk of the folder `dir` (its workspace path) yields, in its
        /// order, when the copy says (see the module's doc); None when the search must walk.
        pub(super) fn files_below(&self, dir: &str) -> Option<Vec<String>> {
            if !self.listing.plain || !self.no_rules_above() {
                return None;
            }
            // The folders above `dir` in the workspace: their rule files count too.
            let mut above = String::new();
            for part in dir.split('/').filter(|p| !p.is_empty()) {
                let folder = self.listing.folders.get(&above)?;
                if !self.as_made(&above, &folder.stamps, FileType::Directory) {
                    return None;
                }
                above = if above.is_empty() { part.to_string() } else { format!("{above}/{part}") };
            }
            let mut files = Vec::new();
            self.list(dir, &mut files)?;
            #[cfg(test)]
            super::tests::LISTED.set(super::tests::LISTED.get() + 1);
            Some(files)
        }

        fn list(&self, dir: &str, files: &mut Vec<String>) -> Option<()> {
            let folder = self.listing.folders.get(dir)?;
            if !self.as_made(dir, &folder.stamps, FileType::Directory) {
                return None;
            }
            for (name, made) in &folder.entries {
                let rel = if dir.is_empty() { name.clone() } else { format!("{dir}/{name}") };
                match made {
                    Made::File => files.push(rel),
                    Made::Folder => self.list(&rel, files)?,
                    Made::Symlink => {}
                }
            }
            Some(())
        }

        /// Whether no folder above the workspace has a file the walk takes rules from (the
        /// walk reads those of every folder above the one it starts from).
        fn no_rules_above(&self) -> bool {
            self.root_path.ancestors().skip(1).all(|folder| {
                [".gitignore", ".ignore", ".git"].iter().all(|name| {
                    matches!(
                        rustix::fs::statat(rustix::fs::CWD, folder.join(name), AtFlags::empty()),
                        Err(rustix::io::Errno::NOENT)
                    )
                })
            })
        }

        /// The bytes of the file `rel` if it is as the copy made it: its fixture file's.
        pub(super) fn bytes(&self, rel: &str) -> Option<Arc<[u8]>> {
            let stamps = self.listing.files.get(rel)?;
            // A name the checks refuse is refused by them, as before.
            if has_secret_component(rel) || !self.as_made(rel, stamps, FileType::RegularFile) {
                return None;
            }
            let source = self.listing.fixture.join(rel);
            let kept = FIXTURE_BYTES.lock().unwrap_or_else(|p| p.into_inner());
            #[cfg(test)]
            super::tests::FROM_FIXTURE.set(super::tests::FROM_FIXTURE.get() + 1);
            if let Some((stamp, bytes)) = kept.0.get(source.as_os_str())
                && stamp == &stamps.1
            {
                return Some(bytes.clone());
            }
            drop(kept);
            let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
            let fd = rustix::fs::openat(self.fixture.as_ref()?, rel, flags, Mode::empty()).ok()?;
            let st = rustix::fs::fstat(&fd).ok()?;
            if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile || Stamp::of_stat(&st) != stamps.1 {
                return None;
            }
            // Read straight into the shared bytes (a `Vec` made into an `Arc` is copied whole, into
            // a second allocation): exactly the size the stamp has, and nothing after it. A
            // fixture file that changed size since its `fstat` is not read from here; the
            // workspace's file is then read under the checks.
            let mut bytes: Arc<[u8]> = std::iter::repeat_n(0, usize::try_from(st.st_size).ok()?).collect();
            let mut file = std::fs::File::from(fd);
            file.read_exact(Arc::get_mut(&mut bytes)?).ok()?;
            if file.read(&mut [0]).ok()? != 0 {
                return None;
            }
            let mut kept = FIXTURE_BYTES.lock().unwrap_or_else(|p| p.into_inner());
            if kept.1 + bytes.len() > MAX_BYTES {
                *kept = (HashMap::new(), 0);
            }
            kept.1 += bytes.len();
            if let Some((_, old)) = kept.0.insert(source.into_os_string(), (stamps.1, bytes.clone())) {
                kept.1 -= old.len();
            }
            Some(bytes)
        }
    }
}

/// The ranked map of the workspace under `path`. The index is built afresh on every call: the
/// agent edits files between calls, and a build takes milliseconds on a case's workspace.
fn repo_map(root: &Path, path: &str, query: &str) -> ToolOutput {
    if let Err(why) = folder(root, path) {
        return ToolOutput::fail(why);
    }
    let view = RepoIndex::build(root).render(query, path, REPO_MAP_TOOL_BUDGET);
    ToolOutput { ok: true, text: view.text.clone(), repo_map: Some(view), ..Default::default() }
}

/// Replaces the whole content of `file` through its descriptor: the file that was checked is
/// the file that is written, whatever its path names by now.
fn overwrite(file: &std::fs::File, content: &[u8]) -> std::io::Result<()> {
    file.set_len(0)?;
    file.write_all_at(content, 0)
}

fn edit_file(root: &Path, path: &str, old: &str, new: &str) -> ToolOutput {
    if old.is_empty() {
        return ToolOutput::fail("`old` is empty; give the exact text to replace (use write_file to create files)");
    }
    let mut opened = match paths::open_file(root, path, Access::Write) {
        Ok(f) => f,
        Err(PathError::NotFound(_)) => {
            return ToolOutput::fail(format!("`{path}` does not exist; create it with write_file"));
        }
        Err(e) => return ToolOutput::fail(e.to_string()),
    };
    let mut text = String::new();
    if let Err(e) = opened.read_to_string(&mut text) {
        return ToolOutput::fail(format!("cannot read `{path}`: {e}"));
    }
    let count = text.matches(old).count();
    if count != 1 {
        let hint = if count == 0 {
            "read the file and copy the exact text, including indentation"
        } else {
            "include more surrounding lines so that it matches exactly once"
        };
        return ToolOutput::fail(format!("`old` matches {count} times in `{path}`, expected exactly 1; {hint}"));
    }
    let updated = text.replacen(old, new, 1);
    if let Err(e) = overwrite(&opened, updated.as_bytes()) {
        return ToolOutput::fail(format!("cannot write `{path}`: {e}"));
    }
    ToolOutput { ok: true, text: format!("edited `{path}`"), modified: vec![normalize(path)], ..Default::default() }
}

fn write_file(root: &Path, path: &str, content: &str, overwrite_existing: bool) -> ToolOutput {
    let written = match paths::create_file(root, path) {
        Ok(created) => (&created).write_all(content.as_bytes()),
        Err(PathError::Exists(_)) if !overwrite_existing => {
            return match paths::open_dir(root, path) {
                Ok(_) => ToolOutput::fail(format!("`{path}` is a directory")),
                Err(_) => {
                    ToolOutput::fail(format!("`{path}` exists; pass overwrite: true to replace it, or use edit_file"))
                }
            };
        }
        Err(PathError::Exists(_)) => match paths::open_file(root, path, Access::Write) {
            Ok(existing) => overwrite(&existing, content.as_bytes()),
            Err(e) => return ToolOutput::fail(e.to_string()),
        },
        Err(e) => return ToolOutput::fail(e.to_string()),
    };
    if let Err(e) = written {
        return ToolOutput::fail(format!("cannot write `{path}`: {e}"));
    }
    ToolOutput {
        ok: true,
        text: format!("wrote {} bytes to `{path}`", content.len()),
        modified: vec![normalize(path)],
        ..Default::default()
    }
}

/// Replaces elapsed-time figures in command output ("Ran 11 tests in 0.022s", "took 3ms")
/// with `<time>`. The output is part of the model's context: left raw, two runs of the same
/// cell would send different requests, defeating the response cache's replay mode and
/// providers' prompt caches, and adding noise the model cannot use.
///
/// Output with no place the pattern could match (most commands' but the tests') is returned
/// as it is, without running the pattern: a run of it cost about 30 us a call over an oracle
/// matrix (perf, 2026-11-25; its tables are cold in the cache between a cell's commands),
/// against a microsecond or two for the look below.
pub fn mask_durations(text: &str) -> std::borrow::Cow<'_, str> {
    static DURATION: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(DURATION_PATTERN).expect("valid regex"));
    if !may_hold_a_duration(text) {
        return std::borrow::Cow::Borrowed(text);
    }
    DURATION.replace_all(text, "$1 <time>")
}

/// A duration a command printed, after the word that introduces it ([`mask_durations`]).
const DURATION_PATTERN: &str = r"\b(in|took|after) \d+(?:\.\d+)?\s?(?:s|ms|sec|secs|seconds)\b";

/// Whether [`mask_durations`]'s pattern can match in `text`: every match has one of its three
/// words, then a space, then a digit, whose first byte is an ASCII digit or, for the other
/// digits `\d` takes (Unicode's), a byte beyond ASCII.
fn may_hold_a_duration(text: &str) -> bool {
    let bytes = text.as_bytes();
    memchr::memchr_iter(b' ', bytes).any(|at| {
        bytes.get(at + 1).is_some_and(|b| b.is_ascii_digit() || !b.is_ascii())
            && [&b"in"[..], b"took", b"after"].iter().any(|word| bytes[..at].ends_with(word))
    })
}

async fn run_command(case: &Case, root: &Path, argv: &[String], sandbox: &Sandbox) -> ToolOutput {
    match process::run(&super::score::command_spec(case, argv.to_vec(), root, sandbox)).await {
        Ok(out) => {
            let text = mask_durations(&out.combined()).into_owned();
            ToolOutput { ok: out.success(), text, ..Default::default() }
        }
        Err(e) => ToolOutput::fail(format!("cannot start `{}`: {e}", argv.first().map(String::as_str).unwrap_or(""))),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use grep_regex::RegexMatcher;

    use super::*;

    fn ws() -> (tempfile::TempDir, std::path::PathBuf) {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.py"), "x = 1\ny = 1\nz = 2\n").unwrap();
        let root = d.path().canonicalize().unwrap();
        (d, root)
    }

    #[test]
    fn edit_requires_exactly_one_match() {
        let (_d, root) = ws();
        let many = edit_file(&root, "a.py", "= 1", "= 3");
        assert!(!many.ok);
        assert!(many.text.contains("matches 2 times"), "{}", many.text);
        let none = edit_file(&root, "a.py", "q = 9", "");
        assert!(none.text.contains("matches 0 times"), "{}", none.text);
        let one = edit_file(&root, "a.py", "y = 1", "y = 5");
        assert!(one.ok);
        assert_eq!(std::fs::read_to_string(root.join("a.py")).unwrap(), "x = 1\ny = 5\nz = 2\n");
    }

    #[test]
    fn write_refuses_to_overwrite_unless_asked() {
        let (_d, root) = ws();
        assert!(!write_file(&root, "a.py", "new", false).ok);
        assert!(write_file(&root, "a.py", "new", true).ok);
        assert!(write_file(&root, "pkg/b.py", "b", false).ok);
        assert_eq!(std::fs::read_to_string(root.join("pkg/b.py")).unwrap(), "b");
    }

    #[test]
    fn read_file_numbers_lines_and_honours_ranges() {
        let (_d, root) = ws();
        let out = read_file(&root, "a.py", Some(2), Some(3));
        assert!(out.ok);
        assert!(out.text.contains("    2| y = 1") && out.text.contains("    3| z = 2") && !out.text.contains("x = 1"));
        assert!(!read_file(&root, "a.py", Some(9), None).ok);
    }

    /// Every range of files whose lines are edge cases for counting (none, an empty last one,
    /// no last newline, CRLF ends, bytes that are not UTF-8) reads as `str::lines` numbers it.
    #[test]
    fn read_file_numbers_lines_as_str_lines_does() {
        let (_d, root) = ws();
        let files: [&[u8]; 7] = [b"", b"\n", b"a", b"a\n\nb", b"a\r\nb\r\n\r\n", b"x\n\xff\xfe y\nz", b"\n\nlast\n"];
        for (i, bytes) in files.iter().enumerate() {
            std::fs::write(root.join(format!("f{i}.txt")), bytes).unwrap();
            let text = String::from_utf8_lossy(bytes);
            let total = text.lines().count();
            for (start, end) in [(None, None), (Some(1), None), (Some(2), Some(3)), (Some(3), None), (None, Some(2))] {
                let out = read_file(&root, &format!("f{i}.txt"), start, end);
                let (first, last) = (start.unwrap_or(1), end.unwrap_or(total).min(total));
                if first > total.max(1) || (end.is_some() && last < first) {
                    assert!(!out.ok && out.text.contains(&format!("({total} lines)")), "f{i} {start:?}-{end:?}");
                    continue;
                }
                let lines = text.lines().enumerate().skip(first - 1).take(last + 1 - first);
                let mut want: String = lines.map(|(n, line)| format!("{:>5}| {line}\n", n + 1)).collect();
                if start.is_some() || end.is_some() {
                    want.insert_str(0, &format!("f{i}.txt lines {first}-{last} of {total}\n"));
                }
                assert_eq!(out.text, want, "f{i} {start:?}-{end:?}");
            }
        }
    }

    #[test]
    fn search_finds_lines_and_skips_ignored_files() {
        let (_d, root) = ws();
        std::fs::write(root.join(".gitignore"), "build/\n").unwrap();
        std::fs::create_dir(root.join("build")).unwrap();
        std::fs::write(root.join("build/a.py"), "y = 1\n").unwrap();
        let out = search_code(&root, r"y = \d", ".", None);
        assert!(out.text.contains("a.py:2: y = 1"), "{}", out.text);
        assert!(!out.text.contains("build/"), "{}", out.text);
        assert!(!search_code(&root, "(", ".", None).ok);
    }

    /// A workspace `ws/` beside files it must never reach: `outside.py`, an outside `.env` and
    /// an outside folder `outdir/`. Returns (guard, root, outer).
    fn escape_ws() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let outer = tempfile::tempdir().unwrap();
        let o = outer.path().canonicalize().unwrap();
        std::fs::create_dir_all(o.join("ws/src")).unwrap();
        std::fs::create_dir_all(o.join("outdir")).unwrap();
        std::fs::write(o.join("ws/src/a.py"), "x = 1\n").unwrap();
        std::fs::write(o.join("outside.py"), "def outside_only_symbol():\n    return 'outside'\n").unwrap();
        std::fs::write(o.join(".env"), "TOKEN=outside-secret\n").unwrap();
        std::fs::write(o.join("outdir/inner.py"), "OUTDIR = 'outside'\n").unwrap();
        (outer, o.join("ws"), o)
    }

    /// Runs `f` on another thread and fails the test if it has not returned within 5 s: a tool
    /// that blocks (on a fifo) must fail the test, not hang it.
    fn within_5s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(std::time::Duration::from_secs(5)).expect("the tool blocked for more than 5 s")
    }

    #[test]
    fn a_hard_link_to_an_outside_file_is_neither_read_nor_modified() {
        let (_g, root, outer) = escape_ws();
        std::fs::hard_link(outer.join("outside.py"), root.join("linked.py")).unwrap();
        let refusal = "`linked.py` has 2 hard links; the tools refuse hard-linked files, since another link may be a file outside the workspace";
        let read = read_file(&root, "linked.py", None, None);
        assert!(!read.ok);
        assert_eq!(read.text, refusal);
        let edit = edit_file(&root, "linked.py", "'outside'", "'pwned'");
        assert_eq!((edit.ok, edit.text.as_str()), (false, refusal));
        let write = write_file(&root, "linked.py", "pwned", true);
        assert_eq!((write.ok, write.text.as_str()), (false, refusal));
        assert_eq!(
            std::fs::read_to_string(outer.join("outside.py")).unwrap(),
            "def outside_only_symbol():\n    return 'outside'\n",
            "the outside file is unchanged"
        );
        let search = search_code(&root, "outside", ".", None);
        assert!(search.text.starts_with("no matches for `outside`"), "{}", search.text);
        assert!(search.text.contains(&format!("[not searched: {refusal}]")), "{}", search.text);
        let map = repo_map(&root, ".", "outside_only_symbol");
        assert!(map.ok && !map.text.contains("outside_only_symbol"), "{}", map.text);
    }

    thread_local! {
        /// Makes this thread's searches walk and open every file, as they did before the
        /// copy's listing was used (the reference the tests compare with).
        pub(super) static WALK_ONLY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
        /// Searches of this thread listed from the copy, and files whose bytes came from the
        /// fixture (counted when the copy's stamp matched).
        pub(super) static LISTED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
        pub(super) static FROM_FIXTURE: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// A fixture of nested folders, a symlink, a secret and a file in a folder with a secret
    /// name, copied fresh into a workspace once it has settled (its last change two seconds
    /// before the copy began). Returns (guard, fixture, workspace).
    fn copied_fixture(with_gitignore: bool) -> (tempfile::TempDir, PathBuf, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let fx = d.path().canonicalize().unwrap().join("fx");
        for dir in ["pkg/sub/deep", "pkg/empty", "docs", "keys.pem"] {
            std::fs::create_dir_all(fx.join(dir)).unwrap();
        }
        let files = [
            ("README.md", "x = 0 in the readme\n"),
            ("pkg/a.py", "x = 1\ny = 2\n"),
            ("pkg/b.py", "def f():\n    return x\n"),
            ("pkg/sub/c.py", "x = 3\n"),
            ("pkg/sub/deep/d.py", "# x = 4\n"),
            ("docs/x.txt", "x marks\n"),
            ("keys.pem/inner.py", "x = 'hidden'\n"),
            (".env", "x=secret\n"),
        ];
        for (path, text) in files {
            std::fs::write(fx.join(path), text).unwrap();
        }
        if with_gitignore {
            std::fs::write(fx.join(".gitignore"), "docs/\n").unwrap();
        }
        std::os::unix::fs::symlink("pkg", fx.join("linked")).unwrap();
        std::thread::sleep(crate::util::Stamp::SETTLED + std::time::Duration::from_millis(100));
        let ws = d.path().join("runs/ws");
        let ws = crate::workspace::fresh(&fx, &ws, &ws).unwrap();
        (d, fx, ws)
    }

    /// The search's output, which must be the walk's (the searches before the copy's listing).
    fn search_both(root: &Path, pattern: &str, path: &str, glob: Option<&str>) -> String {
        let listed = search_code(root, pattern, path, glob).text;
        WALK_ONLY.set(true);
        let walked = search_code(root, pattern, path, glob).text;
        WALK_ONLY.set(false);
        assert_eq!(listed, walked, "search `{pattern}` in `{path}`");
        listed
    }

    /// A fresh copy is searched from its listing and its fixture's bytes, with the walk's
    /// output; every change to it is seen: a write, a new file, a removed one, a file in an
    /// ignored folder, a new `.gitignore`, a folder of rules above the workspace.
    #[test]
    fn a_search_of_a_copy_finds_what_a_walk_finds_before_and_after_every_change() {
        let (_g, _fx, ws) = copied_fixture(false);
        let counts = || (LISTED.get(), FROM_FIXTURE.get());
        let all = "README.md:1: x = 0 in the readme\ndocs/x.txt:1: x marks\npkg/a.py:1: x = 1\n\
                   pkg/b.py:2:     return x\npkg/sub/c.py:1: x = 3\npkg/sub/deep/d.py:1: # x = 4\n";
        assert_eq!(search_both(&ws, "x", ".", None), all);
        assert_eq!(counts(), (1, 6), "listed from the copy, every file's bytes from the fixture");
        assert_eq!(search_both(&ws, "x", "pkg/sub", None), "pkg/sub/c.py:1: x = 3\npkg/sub/deep/d.py:1: # x = 4\n");
        assert_eq!(search_both(&ws, "x", "linked", None), search_both(&ws, "x", "pkg", None));
        assert_eq!(search_both(&ws, "x", ".", Some("*.py")).lines().count(), 4);
        assert_eq!(counts().0, 5);

        // A write of the same size: still listed from the copy; that file is read from the workspace.
        assert!(edit_file(&ws, "pkg/a.py", "x = 1", "x = 9").ok);
        let before = counts().1;
        assert!(search_both(&ws, "x", ".", None).contains("pkg/a.py:1: x = 9\n"));
        assert_eq!(counts(), (6, before + 5));
        // A new file and a removed one: their folders are walked.
        assert!(write_file(&ws, "pkg/sub/new.py", "x = 5\n", false).ok);
        std::fs::remove_file(ws.join("pkg/b.py")).unwrap();
        let out = search_both(&ws, "x", ".", None);
        assert!(out.contains("pkg/sub/new.py:1: x = 5\n") && !out.contains("pkg/b.py"), "{out}");
        assert_eq!(counts().0, 6, "walked");
        // A new .gitignore: the walk's rules hold.
        std::fs::write(ws.join(".gitignore"), "pkg/sub/\n").unwrap();
        let out = search_both(&ws, "x", ".", None);
        assert!(!out.contains("pkg/sub/") && out.contains("pkg/a.py"), "{out}");
        // A folder emptied and filled again within the same second keeps nothing stale.
        std::fs::remove_file(ws.join(".gitignore")).unwrap();
        std::fs::rename(ws.join("docs/x.txt"), ws.join("docs/y.txt")).unwrap();
        assert!(search_both(&ws, "x", ".", None).contains("docs/y.txt:1: x marks\n"));
    }

    /// Rule files the copy made, or one in a folder above the workspace, make the search walk
    /// (files added to an ignored folder stay unsearched); unchanged files' bytes still come
    /// from the fixture.
    #[test]
    fn rules_in_or_above_a_copy_are_the_walks_to_apply() {
        let (_g, fx, ws) = copied_fixture(true);
        let out = search_both(&ws, "x", ".", None);
        assert!(!out.contains("docs/") && out.contains("pkg/a.py:1: x = 1\n"), "{out}");
        assert_eq!((LISTED.get(), FROM_FIXTURE.get() > 0), (0, true));
        std::fs::write(ws.join("docs/more.py"), "x = 7\n").unwrap();
        assert!(!search_both(&ws, "x", ".", None).contains("docs/"));

        let (_g2, _fx2, ws2) = copied_fixture(false);
        std::fs::write(ws2.parent().unwrap().join(".gitignore"), "*.py\n").unwrap();
        let out = search_both(&ws2, "x", ".", None);
        assert_eq!(out, "README.md:1: x = 0 in the readme\ndocs/x.txt:1: x marks\n");
        assert_eq!(LISTED.get(), 0);
        drop(fx);
    }

    /// A later search reads the bytes it kept of files that did not change, and sees every
    /// change the agent or its commands can make: an edit of the same size, a new file, a
    /// removed one, a hard link to a file outside, a folder swapped for a symlink out.
    #[test]
    fn a_search_reuses_what_it_read_and_sees_every_change() {
        let (_g, root, outer) = escape_ws();
        std::fs::write(root.join("src/b.py"), "y = 1\n").unwrap();
        // The files were written a while ago, as far as the searches below know (`later`); the
        // pause puts the changes below on another clock tick than the writes above.
        std::thread::sleep(std::time::Duration::from_millis(50));
        let later = std::time::SystemTime::now() + crate::util::Stamp::SETTLED;
        let search = || search_code_at(&root, r"[xy] = \d|OUTDIR|outside", ".", None, later).text;
        let first = search();
        assert_eq!(first, "src/a.py:1: x = 1\nsrc/b.py:1: y = 1\n");
        assert_eq!(search_cache::kept_files(&root), 2);
        assert_eq!(search(), first, "the same output from the kept bytes");

        assert!(edit_file(&root, "src/a.py", "x = 1", "x = 7").ok);
        assert_eq!(search(), "src/a.py:1: x = 7\nsrc/b.py:1: y = 1\n", "an edit of the same size");
        assert!(write_file(&root, "src/c.py", "x = 3\n", false).ok);
        std::fs::remove_file(root.join("src/b.py")).unwrap();
        assert_eq!(search(), "src/a.py:1: x = 7\nsrc/c.py:1: x = 3\n");

        std::fs::remove_file(root.join("src/a.py")).unwrap();
        std::fs::hard_link(outer.join("outside.py"), root.join("src/a.py")).unwrap();
        let linked = search();
        assert!(linked.starts_with("src/c.py:1: x = 3\n[not searched: `src/a.py` has 2 hard links"), "{linked}");

        std::fs::rename(root.join("src"), root.join("old")).unwrap();
        std::os::unix::fs::symlink("../outdir", root.join("src")).unwrap();
        let swapped = search();
        assert!(!swapped.contains("OUTDIR") && !swapped.contains("src/"), "{swapped}");
    }

    /// A file changed less than [`Stamp::SETTLED`](crate::util::Stamp::SETTLED) ago may change again within the same
    /// clock tick, leaving its times as they were: its bytes are not kept.
    #[test]
    fn a_file_just_written_is_read_again_by_the_next_search() {
        let (_g, root, _outer) = escape_ws();
        let out = search_code(&root, "x", ".", None);
        assert_eq!(out.text, "src/a.py:1: x = 1\n");
        assert_eq!(search_cache::kept_files(&root), 0);
    }

    /// The search reads a file whole and searches the bytes: the same lines as grep's reader
    /// finds in the open file, for the files that differ between the two ways (CRLF line ends,
    /// no last newline, a line that is not UTF-8, a UTF-16 file with its byte order mark).
    #[test]
    fn searching_the_bytes_finds_what_searching_the_file_finds() {
        let dir = tempfile::tempdir().unwrap();
        let mut utf16 = vec![0xff, 0xfe];
        utf16.extend("x = 1\ny = 2\n".encode_utf16().flat_map(|u| u.to_le_bytes()));
        let files: [&[u8]; 5] =
            [b"x = 1\r\ny = 2\r\n", b"x = 1\ny = 2", b"x = 1\n\xff\xfe x\nx = 3\n", &utf16, &[b'x'; 100_000]];
        let matcher = RegexMatcher::new_line_matcher("x").unwrap();
        for (i, bytes) in files.iter().enumerate() {
            let path = dir.path().join(format!("f{i}"));
            std::fs::write(&path, bytes).unwrap();
            let lines = |from_file: bool| {
                let mut found = Vec::new();
                let sink = UTF8(|n, line: &str| {
                    found.push((n, line.to_string()));
                    Ok(true)
                });
                let mut searcher = Searcher::new();
                let done = if from_file {
                    searcher.search_file(&matcher, &std::fs::File::open(&path).unwrap(), sink)
                } else {
                    searcher.search_slice(&matcher, bytes, sink)
                };
                (done.is_ok(), found)
            };
            let from_file = lines(true);
            assert!(!from_file.1.is_empty(), "file {i}");
            assert_eq!(lines(false), from_file, "file {i}");
        }
    }

    #[test]
    fn a_hard_link_to_an_outside_env_is_refused_whatever_its_name() {
        let (_g, root, outer) = escape_ws();
        std::fs::hard_link(outer.join(".env"), root.join("notes.txt")).unwrap();
        let read = read_file(&root, "notes.txt", None, None);
        assert!(!read.ok && read.text.contains("`notes.txt` has 2 hard links"), "{}", read.text);
        let search = search_code(&root, "TOKEN", ".", None);
        assert!(!search.text.contains("outside-secret"), "{}", search.text);
    }

    #[test]
    fn symlinks_out_of_the_workspace_are_refused() {
        let (_g, root, outer) = escape_ws();
        std::os::unix::fs::symlink("../outside.py", root.join("escape.py")).unwrap();
        std::os::unix::fs::symlink(outer.join("outside.py"), root.join("absolute.py")).unwrap();
        std::os::unix::fs::symlink("../outdir", root.join("escape_dir")).unwrap();
        std::os::unix::fs::symlink("../new_outside.py", root.join("dangling.py")).unwrap();
        for path in ["escape.py", "absolute.py", "escape_dir/inner.py"] {
            let read = read_file(&root, path, None, None);
            assert_eq!(read.text, format!("`{path}` resolves outside the workspace (symlink escape)"));
            assert!(!edit_file(&root, path, "outside", "pwned").ok);
            assert!(!write_file(&root, path, "pwned", true).ok);
        }
        let create = write_file(&root, "escape_dir/new.py", "pwned", false);
        assert_eq!(create.text, "`escape_dir/new.py` resolves outside the workspace (symlink escape)");
        let dangling = write_file(&root, "dangling.py", "pwned", true);
        assert!(!dangling.ok, "{}", dangling.text);
        assert!(!outer.join("new_outside.py").exists() && !outer.join("outdir/new.py").exists());
        assert!(std::fs::read_to_string(outer.join("outside.py")).unwrap().contains("'outside'"));
        assert!(std::fs::read_to_string(outer.join("outdir/inner.py")).unwrap().contains("'outside'"));

        let listed = list_files(&root, "escape_dir", 2);
        assert_eq!(listed.text, "`escape_dir` resolves outside the workspace (symlink escape)");
        let all = list_files(&root, ".", 4);
        assert!(all.text.contains("escape_dir\n") && !all.text.contains("inner.py"), "{}", all.text);
        let search = search_code(&root, "outside", ".", None);
        assert!(!search.text.contains("OUTDIR") && !search.text.contains("return"), "{}", search.text);
        assert!(!search_code(&root, "outside", "escape_dir", None).ok);
        assert!(!repo_map(&root, "escape_dir", "x").ok);
    }

    #[test]
    fn symlinks_that_stay_inside_keep_working() {
        let (_g, root, _outer) = escape_ws();
        std::os::unix::fs::symlink("src/a.py", root.join("alias.py")).unwrap();
        std::os::unix::fs::symlink("src", root.join("lib")).unwrap();
        assert_eq!(read_file(&root, "alias.py", None, None).text, "    1| x = 1\n");
        assert_eq!(read_file(&root, "lib/a.py", None, None).text, "    1| x = 1\n");
        assert!(edit_file(&root, "alias.py", "x = 1", "x = 2").ok);
        assert_eq!(std::fs::read_to_string(root.join("src/a.py")).unwrap(), "x = 2\n");
        assert!(write_file(&root, "lib/b.py", "y = 1\n", false).ok);
        assert_eq!(std::fs::read_to_string(root.join("src/b.py")).unwrap(), "y = 1\n");
        assert!(list_files(&root, "lib", 1).text.contains("b.py"));
    }

    #[test]
    fn secrets_and_git_are_judged_by_the_resolved_name() {
        let (_g, root, _outer) = escape_ws();
        std::fs::write(root.join(".env"), "TOKEN=inside-secret\n").unwrap();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::os::unix::fs::symlink(".env", root.join("notes.txt")).unwrap();
        std::os::unix::fs::symlink(".git/hooks", root.join("hooks")).unwrap();
        let read = read_file(&root, "notes.txt", None, None);
        assert_eq!(read.text, "`notes.txt` resolves to `.env`, which holds secrets; it is never readable or writable");
        assert_eq!(read_file(&root, ".env", None, None).text, "`.env` holds secrets; it is never readable or writable");
        let hook = write_file(&root, "hooks/pre-commit", "#!/bin/sh\n", false);
        assert_eq!(
            hook.text,
            "`hooks/pre-commit` resolves to `.git/hooks/pre-commit`, inside .git, which is never writable"
        );
        assert!(!root.join(".git/hooks/pre-commit").exists());
        let nested = write_file(&root, "hooks/sub/x", "x", false);
        assert!(!nested.ok && !root.join(".git/hooks/sub").exists(), "no folder is created inside .git");
    }

    #[test]
    fn a_fifo_fails_promptly_and_never_blocks() {
        let (_g, root, _outer) = escape_ws();
        rustix::fs::mknodat(rustix::fs::CWD, root.join("pipe.py"), rustix::fs::FileType::Fifo, 0o644.into(), 0)
            .unwrap();
        let r = root.clone();
        let read = within_5s(move || read_file(&r, "pipe.py", None, None));
        assert_eq!(read.text, "`pipe.py` is a fifo; the tools read and write regular files only");
        let r = root.clone();
        let edit = within_5s(move || edit_file(&r, "pipe.py", "a", "b"));
        assert_eq!(edit.text, "`pipe.py` is a fifo; the tools read and write regular files only");
        let r = root.clone();
        let write = within_5s(move || write_file(&r, "pipe.py", "a", true));
        assert_eq!(write.text, "`pipe.py` is a fifo; the tools read and write regular files only");
        let r = root.clone();
        let search = within_5s(move || search_code(&r, "x", ".", None));
        assert!(search.text.contains("src/a.py:1: x = 1"), "{}", search.text);
        let r = root.clone();
        let map = within_5s(move || repo_map(&r, ".", "x"));
        assert!(map.ok);
        let r = root.clone();
        assert!(within_5s(move || list_files(&r, ".", 2)).text.contains("pipe.py"));
    }

    #[test]
    fn sockets_and_devices_are_not_files_to_read() {
        let (_g, root, _outer) = escape_ws();
        let _listener = std::os::unix::net::UnixListener::bind(root.join("agent.sock")).unwrap();
        let r = root.clone();
        let read = within_5s(move || read_file(&r, "agent.sock", None, None));
        assert_eq!(read.text, "`agent.sock` is a socket; the tools read and write regular files only");
        // /dev/zero's numbers (1, 5): made where CAP_MKNOD allows, as in a root container.
        let dev = rustix::fs::FileType::CharacterDevice;
        if rustix::fs::mknodat(rustix::fs::CWD, root.join("zero.py"), dev, 0o644.into(), rustix::fs::makedev(1, 5))
            .is_ok()
        {
            let r = root.clone();
            let zero = within_5s(move || read_file(&r, "zero.py", None, None));
            assert_eq!(zero.text, "`zero.py` is a character device; the tools read and write regular files only");
            let r = root.clone();
            assert!(within_5s(move || search_code(&r, "x", ".", None)).text.contains("src/a.py:1"));
        }
        // A link to a device outside leaves the root.
        std::os::unix::fs::symlink("/dev/zero", root.join("zero")).unwrap();
        let r = root.clone();
        let zero = within_5s(move || read_file(&r, "zero", None, None));
        assert_eq!(zero.text, "`zero` resolves outside the workspace (symlink escape)");
    }

    #[test]
    fn new_files_are_created_beneath_the_root_and_never_over_something() {
        let (_g, root, _outer) = escape_ws();
        assert!(write_file(&root, "pkg/sub/mod.py", "m = 1\n", false).ok);
        assert_eq!(std::fs::read_to_string(root.join("pkg/sub/mod.py")).unwrap(), "m = 1\n");
        assert_eq!(write_file(&root, "pkg", "x", false).text, "`pkg` is a directory");
        assert_eq!(write_file(&root, "pkg", "x", true).text, "`pkg` is a directory");
        assert_eq!(
            write_file(&root, "src/a.py/x.py", "x", false).text,
            "`src/a.py/x.py`: a folder on the way is a file"
        );
        assert!(write_file(&root, "pkg/sub/mod.py", "m = 2\n", true).ok);
        assert_eq!(std::fs::read_to_string(root.join("pkg/sub/mod.py")).unwrap(), "m = 2\n");
    }

    #[test]
    fn durations_in_command_output_are_masked() {
        let out = "....\n----------------------------------------------------------------------\nRan 11 tests in 0.022s\n\nOK\n";
        assert_eq!(mask_durations(out), out.replace("in 0.022s", "in <time>"));
        assert_eq!(mask_durations("5 passed in 1.20s; took 3ms"), "5 passed in <time>; took <time>");
        assert_eq!(mask_durations("version 1.2s3 unchanged"), "version 1.2s3 unchanged");
    }

    /// Text the pattern is not run on is text it would leave as it is: the look before it
    /// passes every text the pattern changes, Unicode's digits after the word included.
    #[test]
    fn text_the_duration_pattern_is_spared_has_nothing_it_would_mask() {
        let pattern = regex::Regex::new(DURATION_PATTERN).unwrap();
        let texts = [
            "Ran 7 tests in 0.001s\n",
            "done in \u{0663}s",
            "done in \u{0663}\u{0664}ms then after 2 secs",
            "took 3ms",
            "after 1.5 seconds",
            "Initialized empty Git repository in /w/.git/\n",
            "in  3s and in s3 and into 3s",
            "begin 3s",
            "in 3",
            "in",
            "",
            " 3s",
            "xin 3s",
            "\u{00e9}in 3s",
            "in \u{00e9}3s",
        ];
        for text in texts {
            let masked = pattern.replace_all(text, "$1 <time>");
            if !may_hold_a_duration(text) {
                assert_eq!(masked, text, "{text:?}");
            }
            assert_eq!(mask_durations(text), masked, "{text:?}");
        }
        assert!(!may_hold_a_duration("Initialized empty Git repository in /w/.git/\n"));
        assert!(!may_hold_a_duration("/work/ws\n"));
    }
}
