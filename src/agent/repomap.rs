//! The ranked repo map: an index of a workspace's text files and their symbols, and a view of
//! it ranked against a query and rendered within a token budget.
//!
//! The model sees a workspace through a small window, so the map must spend its budget on the
//! files that matter for the case, not on the first files in path order. Building and ranking
//! are therefore separate: [`RepoIndex::build`] does the query-independent work once (walk,
//! read, extract symbols, split identifiers into words, link files that mention each other's
//! symbols), and [`RepoIndex::render`] ranks that index against a query, which is cheap enough
//! to do for every query.
//!
//! - **What is indexed**: every text file the `ignore` walker yields (the workspace's own
//!   `.gitignore` files respected, `.git` skipped, hidden files included, symlinks not
//!   followed). Secret file names ([`is_secret_name`]) are skipped before they are opened, so
//!   they cannot appear in a map; so are binary files (a NUL byte) and files over
//!   [`MAX_FILE_BYTES`]. Each skip is counted.
//! - **Extractors**: Python files are ranked from a line scan ([`python_scan`]) and shown as
//!   tree-sitter's Python grammar parses them (classes, functions, methods and module constants,
//!   with signatures, decorators and `async`), parsed only when a render shows them: parsing
//!   every file of a 10,000-file tree took seconds, the scan takes a fraction of that;
//!   a few other languages get one regex per kind of definition, with nesting taken from
//!   indentation; every other text file has no symbols but is still ranked by its path and words.
//! - **Ranking**: a file's overlap score sums, over the query's words, the word's rarity (BM25
//!   idf) times where the file has it (path 3, a symbol name 2, anywhere in the text 0.5),
//!   scaled by the share of query words it has at all, plus a bonus when the query names the file.
//!   Those scores seed a personalized PageRank over the reference graph (A -> B when A mentions a
//!   name B defines), so the definitions that relevant files use rise too. The final score is the
//!   normalized overlap plus a quarter of the normalized rank; ties go to the path.
//! - Everything is deterministic: files are sorted by path, hashes are FNV-1a (no random seed),
//!   floating sums run in a fixed order, and every sort has a total tie-break.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, OnceLock};
use std::time::Instant;

use rayon::prelude::*;
use regex::Regex;
use sha2::{Digest, Sha256};

use super::paths::{Root, is_secret_name, normalize, read_regular};
use super::tokens::{clip, estimate};

/// Files larger than this are skipped: generated data or vendored bundles, not code to navigate.
pub const MAX_FILE_BYTES: u64 = 2 * 1024 * 1024;
/// Signatures longer than this are cut (with `...`): a map line is a pointer, not the code.
const MAX_SIGNATURE_CHARS: usize = 160;
/// Regex extraction ignores longer lines (minified code would yield noise).
const MAX_REGEX_LINE: usize = 400;
/// A name defined in more files than this links nothing: it is a convention (`run`, `setUp`),
/// not a reference to one definition.
const MAX_DEFINERS: usize = 32;
/// PageRank's damping factor and iteration limit.
const DAMPING: f64 = 0.85;
const RANK_ITERATIONS: usize = 30;
/// Share of a test file's overlap that counts. A task's words often describe the failing test
/// (its names repeat the symptom), but the fix, and so the file to read first, lies elsewhere;
/// the tests stay in the map, lower.
const TEST_FILE_WEIGHT: f64 = 0.4;
/// Weight of the normalized rank next to the normalized overlap in the final score.
const RANK_WEIGHT: f64 = 0.25;
/// Below this many files an index is built and ranked on the calling thread. Handing work to
/// rayon's pool from a cell's thread means waking a worker and waiting for it on a latch: tens of
/// microseconds on an idle machine and milliseconds on a busy one, three times per map, for
/// work that takes microseconds on a fixture of a few files. The results are the same either way
/// (each file is indexed and scored on its own, and collected in order).
const PARALLEL_FROM: usize = 512;

/// `f` over `items`, in order: on rayon's pool for [`PARALLEL_FROM`] items or more, else here.
fn map_items<T: Sync, R: Send>(items: &[T], f: impl Fn(usize, &T) -> R + Sync + Send) -> Vec<R> {
    if items.len() < PARALLEL_FROM {
        items.iter().enumerate().map(|(i, t)| f(i, t)).collect()
    } else {
        items.par_iter().enumerate().map(|(i, t)| f(i, t)).collect()
    }
}

/// Which extractor produced a file's symbols.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Extractor {
    /// Ranked from a line scan ([`python_scan`]); the symbols a map shows come from tree-sitter.
    TreeSitterPython,
    Regex,
    None,
}

impl Extractor {
    pub fn as_str(self) -> &'static str {
        match self {
            Extractor::TreeSitterPython => "tree-sitter-python",
            Extractor::Regex => "regex",
            Extractor::None => "none",
        }
    }
}

/// One definition in a file.
#[derive(Debug, Clone, PartialEq)]
pub struct Symbol {
    pub name: String,
    /// What the map shows, e.g. `async def fetch(url: str) -> bytes`, `class Pager(Base)`.
    pub signature: String,
    /// 1-based line of the definition (of `def`/`class`, after any decorators).
    pub line: u32,
    /// Index of the enclosing symbol in the same file (a method's class).
    pub parent: Option<u32>,
    /// Words of the name (hashes), for ranking.
    words: Vec<u64>,
}

/// One indexed text file.
#[derive(Debug, Clone)]
struct FileEntry {
    /// Workspace-relative, `/`-separated.
    path: String,
    extractor: Extractor,
    symbols: Vec<Symbol>,
    path_words: Vec<u64>,
    /// Sorted, unique: words of every symbol name.
    symbol_words: Vec<u64>,
    /// Sorted, unique: words of every identifier-shaped token in the text (strings and
    /// comments included: an error message's words are how a task describes the file).
    words: Vec<u64>,
    /// Sorted, unique hashes of the raw identifiers (3 bytes or more), for the reference graph;
    /// emptied once the graph is built.
    idents: Vec<u64>,
    /// FNV-1a of the file's bytes when indexed: a lazy parse checks it is reading the same text.
    digest: u64,
    /// SHA-256 of the file's bytes, in an index kept for [`RepoIndex::update`] (which reuses
    /// the entry only for the very same bytes); None otherwise.
    content: Option<[u8; 32]>,
    /// Python: tree-sitter's symbols, parsed the first time a render shows the file (`None`
    /// when the file changed since the build or could not be read: the scan's symbols stand).
    parsed: OnceLock<Option<Vec<Symbol>>>,
}

/// One indexed workspace. Query-independent; [`RepoIndex::render`] ranks it.
#[derive(Debug, Clone, Default)]
pub struct RepoIndex {
    root: PathBuf,
    /// Sorted by path.
    files: Vec<FileEntry>,
    skipped: u32,
    /// Reference graph: per file, (target file, weight), sorted by target.
    edges: Vec<Vec<(u32, f64)>>,
    duration_ms: u64,
    /// Kept for [`RepoIndex::update`]: every entry has its `content` digest and its `idents`
    /// (a one-off index drops them once the graph is made).
    updatable: bool,
}

/// What an index holds, for `repo_map_built`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IndexStats {
    pub files: u32,
    pub symbols: u32,
    /// Secrets, binary files, files over [`MAX_FILE_BYTES`], unreadable entries.
    pub skipped: u32,
    /// Files per extractor name (`tree-sitter-python`, `regex`, `none`).
    pub parsers: BTreeMap<String, u32>,
    /// Wall time of [`RepoIndex::build`].
    pub duration_ms: u64,
}

/// A rendered map, for the model and for `repo_map_used`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RepoMapView {
    pub text: String,
    /// Files shown, most relevant first.
    pub files: Vec<String>,
    /// Estimated tokens of `text`; never above the budget.
    pub tokens: usize,
    pub query: String,
    /// Indexed files under the scope (shown or not).
    pub total_files: usize,
}

/// The injected map of a workspace fresh from its fixture: its index's stats and the view
/// ranked against `query`, under `budget_tokens`.
///
/// Every cell of a case starts from a copy of the same fixture, and the map injected at its
/// first step is a pure function of those files, the task and the budget; a matrix has the
/// same case under every profile and epoch, and nightly runs have the same cases night after
/// night. So a map is built once and reused: kept in this process, and, with `store` (a
/// folder), in a file there that later processes read ([`stored_map`]). Before a map is reused,
/// the fixture's entries are checked (path, kind, size, modification and change times, inode:
/// [`tree_stamp`], as the copy into `workspace` found them when this process made it), and a
/// stored map must also come from this very hcbench binary, be intact
/// and fit its budget. The reusing cell's `duration_ms` is the time it spent (the checks and
/// the read), not the build's. The map is built from the workspace, never from the fixture, so it
/// reads exactly what the cell's tools would.
pub fn fresh_workspace_map(
    fixture: &Path,
    workspace: &Path,
    query: &str,
    budget_tokens: usize,
    store: Option<&Path>,
) -> (IndexStats, RepoMapView) {
    fresh_map(fixture, workspace, (query, budget_tokens), store, RACY_NS)
}

/// Changes this close to now (nanoseconds) could hide another change within the file system's
/// clock tick (git's "racy" index entries; 2 s covers file systems that keep whole or even
/// seconds): a map of such a fixture is not stored for other processes.
const RACY_NS: i128 = 2_000_000_000;

/// [`fresh_workspace_map`] with the racy window as a parameter (tests store maps of fixtures
/// they have just written).
fn fresh_map(
    fixture: &Path,
    workspace: &Path,
    (query, budget_tokens): (&str, usize),
    store: Option<&Path>,
    racy_ns: i128,
) -> (IndexStats, RepoMapView) {
    /// (fixture, query, budget) -> (the fixture's stamp, the map).
    type Maps = HashMap<(PathBuf, String, usize), (u64, IndexStats, RepoMapView)>;
    static MAPS: LazyLock<std::sync::Mutex<Maps>> = LazyLock::new(Default::default);
    /// Maps kept at most: more distinct fixtures than this, and the oldest are built again.
    const KEPT: usize = 1024;
    let started = Instant::now();
    let key = (fixture.to_path_buf(), query.to_string(), budget_tokens);
    let stamp = tree_stamp(fixture, workspace);
    let reused = |stats: &IndexStats| IndexStats { duration_ms: started.elapsed().as_millis() as u64, ..stats.clone() };
    if let Some(stamp) = &stamp
        && let Some((kept, stats, view)) = MAPS.lock().unwrap_or_else(|p| p.into_inner()).get(&key)
        && *kept == stamp.digest
    {
        return (reused(stats), view.clone());
    }
    let stored = match (store, &stamp) {
        (Some(dir), Some(stamp)) => StoredMap::key(fixture, stamp, query, budget_tokens).map(|k| (dir, k)),
        _ => None,
    };
    let found = stored.as_ref().and_then(|(dir, k)| stored_map(dir, k, query, budget_tokens));
    let (stats, view, from_store) = match found {
        Some((stats, view)) => (reused(&stats), view, true),
        None => {
            let index = RepoIndex::build(workspace);
            let view = index.render(query, ".", budget_tokens);
            (index.stats(), view, false)
        }
    };
    if let Some(stamp) = &stamp {
        if !from_store
            && let Some((dir, k)) = &stored
            && !stamp.racy(racy_ns)
        {
            // A map that cannot be stored is built again next time: never an error of the cell.
            if let Err(e) = store_map(dir, k, &stats, &view) {
                tracing::debug!("cannot store the repo map of {} in {}: {e}", fixture.display(), dir.display());
            }
        }
        let mut maps = MAPS.lock().unwrap_or_else(|p| p.into_inner());
        if maps.len() >= KEPT {
            maps.clear();
        }
        maps.insert(key, (stamp.digest, stats.clone(), view.clone()));
    }
    (stats, view)
}

/// The injected map of a later session of a multi-session case (`agent::sessions`), whose
/// workspace is what the sessions before left: its index's stats, the view ranked against
/// `query` under `budget_tokens`, and the index to bring up to date for the session after.
///
/// The workspace is read (walked, each text file read and digested: [`Scan`]) and the map
/// looked up by what it is a function of, the files' paths and SHA-256 digests, the count
/// skipped, the query and the budget: in this process, then, with `store`, in the stored maps
/// ([`stored_map`], under a key that also names this binary). A cell of the same case run again
/// (another epoch, the same model in tonight's run) whose earlier sessions left the same files
/// finds it there, and spares the indexing, the tree-sitter parses and the ranking. Otherwise
/// the index is made from `earlier`, the index of an earlier session of the cell, reusing every
/// file whose bytes it has ([`RepoIndex::update`]), or from scratch; its map is kept and
/// stored when every parse its render made found the bytes the scan digested (else it is
/// not the map those files make). On a hit, `earlier` is handed on as it is: an update from it
/// is right whatever changed since. The reusing cell's `duration_ms` is the time it spent
/// (the scan and the lookup), as with [`fresh_workspace_map`].
pub fn later_session_map(
    earlier: Option<RepoIndex>,
    workspace: &Path,
    query: &str,
    budget_tokens: usize,
    store: Option<&Path>,
) -> (IndexStats, RepoMapView, Option<RepoIndex>) {
    /// (files' digest, query, budget) -> the map.
    type Maps = HashMap<(String, String, usize), (IndexStats, RepoMapView)>;
    static MAPS: LazyLock<std::sync::Mutex<Maps>> = LazyLock::new(Default::default);
    /// Maps kept at most: past this many, the process starts over.
    const KEPT: usize = 1024;
    let scan = Scan::read(workspace);
    let started = scan.started;
    let reused = |stats: &IndexStats| IndexStats { duration_ms: started.elapsed().as_millis() as u64, ..stats.clone() };
    let key = (scan.digest(), query.to_string(), budget_tokens);
    if let Some((stats, view)) = MAPS.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return (reused(stats), view.clone(), earlier);
    }
    let stored = store.zip(StoredMap::key_of_files(&key.0, query, budget_tokens));
    let keep = |stats: &IndexStats, view: &RepoMapView| {
        let mut maps = MAPS.lock().unwrap_or_else(|p| p.into_inner());
        if maps.len() >= KEPT {
            maps.clear();
        }
        maps.insert(key.clone(), (stats.clone(), view.clone()));
    };
    if let Some((stats, view)) = stored.as_ref().and_then(|(dir, k)| stored_map(dir, k, query, budget_tokens)) {
        keep(&stats, &view);
        return (reused(&stats), view, earlier);
    }
    let (index, stable) = RepoIndex::from_scan(scan, earlier);
    let view = index.render(query, ".", budget_tokens);
    let stats = index.stats();
    if stable && index.parses_held() {
        if let Some((dir, k)) = &stored
            && let Err(e) = store_map(dir, k, &stats, &view)
        {
            // A map that cannot be stored is built again next time: never an error of the cell.
            tracing::debug!("cannot store the repo map of {} in {}: {e}", workspace.display(), dir.display());
        }
        keep(&stats, &view);
    }
    (stats, view, Some(index))
}

/// What [`tree_stamp`] found.
struct TreeStamp {
    /// FNV-1a over every entry's path, kind, size, times and inode.
    digest: u64,
    /// The latest modification or change time of any entry, in nanoseconds since the epoch.
    newest_ns: i128,
}

impl TreeStamp {
    /// Whether an entry changed within `window` nanoseconds of now, so that a change within the
    /// file system's clock tick could still go unseen by a later stamp: such a map is not stored
    /// for other processes (this one still keeps it, as it always did).
    fn racy(&self, window: i128) -> bool {
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i128);
        now - self.newest_ns < window
    }
}

/// FNV-1a over every entry below `dir` (sorted by name): its path, kind, size, modification and
/// change times, device and inode ([`crate::workspace::entry_line`]). A file rewritten in place
/// changes its change time (which no program can set back), a file replaced or a fixture copied
/// elsewhere its inode. The entries are the ones the copy into `workspace` found, when this
/// process made that copy of `dir` ([`crate::workspace::CopyListing`]): what the workspace, and
/// so the map, has (a fixture changed since is another stamp, which the next copy finds); else
/// `dir` is walked. None when a folder cannot be listed: the map is then built, never reused.
fn tree_stamp(dir: &Path, workspace: &Path) -> Option<TreeStamp> {
    use std::os::unix::fs::MetadataExt as _;
    fn walk(dir: &Path, listing: &mut String, newest: &mut i128) -> Option<()> {
        let mut entries: Vec<_> = std::fs::read_dir(dir).ok()?.collect::<Result<_, _>>().ok()?;
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            // The entry's own metadata (a symlink's, not its target's), looked up from the open folder.
            let meta = entry.metadata().ok()?;
            let times = (
                i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
                i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
            );
            let name = entry.file_name();
            let changed = crate::workspace::entry_line(
                listing,
                &name.to_string_lossy(),
                meta.mode(),
                meta.len(),
                times,
                (meta.dev(), meta.ino()),
            );
            *newest = (*newest).max(changed);
            if meta.is_dir() {
                walk(&entry.path(), listing, newest)?;
                listing.push_str("..\n");
            }
        }
        Some(())
    }
    let copied = crate::workspace::copy_listing(workspace).filter(|c| c.fixture == dir);
    if let Some(entries) = copied.as_ref().and_then(|c| c.fixture_entries.as_ref()) {
        return Some(TreeStamp { digest: raw_hash_bytes(entries.lines.as_bytes()), newest_ns: entries.newest_ns });
    }
    let mut listing = String::new();
    let mut newest_ns = 0;
    walk(dir, &mut listing, &mut newest_ns)?;
    Some(TreeStamp { digest: raw_hash_bytes(listing.as_bytes()), newest_ns })
}

/// A map stored for later processes: `<store>/<sha256 of key>.json`.
///
/// `key` names everything the map is a function of: the format of this file, the hcbench binary
/// (its version, and the executable's device, inode, size and modification time, so a rebuilt
/// binary never reads a map an older build of the same version made), the fixture's path and
/// stamp, the budget and the query (its sha256). `map` is the map as JSON text, its view without
/// the query (a case's task is not copied out; the reader puts its own back), and `sha256` its
/// digest.
#[derive(serde::Serialize, serde::Deserialize)]
struct StoredMap {
    key: String,
    sha256: String,
    map: String,
}

/// What a stored map holds.
#[derive(serde::Serialize, serde::Deserialize)]
struct StoredView {
    stats: IndexStats,
    view: RepoMapView,
}

impl StoredMap {
    /// Version of this file's layout: raised whenever it, or what a map holds, changes.
    const FORMAT: u32 = 1;

    /// This hcbench binary: its version, and the executable's device, inode, size and
    /// modification time. None when it cannot be looked at.
    fn binary() -> Option<&'static str> {
        static BINARY: LazyLock<Option<String>> = LazyLock::new(|| {
            use std::os::unix::fs::MetadataExt as _;
            let meta = std::env::current_exe().and_then(std::fs::metadata).ok()?;
            Some(format!(
                "{} {}:{} {} {}.{}",
                env!("CARGO_PKG_VERSION"),
                meta.dev(),
                meta.ino(),
                meta.len(),
                meta.mtime(),
                meta.mtime_nsec()
            ))
        });
        BINARY.as_deref()
    }

    /// The key of a map, or None when this binary cannot be identified (then nothing is stored).
    fn key(fixture: &Path, stamp: &TreeStamp, query: &str, budget: usize) -> Option<String> {
        let binary = Self::binary()?;
        // The query by its digest: a case's task (a test-split one too) is not copied out.
        Some(format!(
            "hcbench repo map {}\nbinary {binary}\nfixture {}\nstamp {:016x}\nbudget {budget}\nquery {}",
            Self::FORMAT,
            fixture.display(),
            stamp.digest,
            crate::util::sha256_hex(query.as_bytes())
        ))
    }

    /// The key of a map of a workspace by its files ([`Scan::digest`]), or None when this
    /// binary cannot be identified.
    fn key_of_files(files: &str, query: &str, budget: usize) -> Option<String> {
        Some(format!(
            "hcbench repo map {}\nbinary {}\nfiles {files}\nbudget {budget}\nquery {}",
            Self::FORMAT,
            Self::binary()?,
            crate::util::sha256_hex(query.as_bytes())
        ))
    }

    fn path(store: &Path, key: &str) -> PathBuf {
        store.join(format!("{}.json", crate::util::sha256_hex(key.as_bytes())))
    }
}

/// The map stored under `key` in `store`, if there is one and it passes every check: the same
/// key (not only the same file name), its digest, and a view that fits `budget` and whose
/// token count is its text's. Anything else (no file, another key, a torn or altered file) is
/// None, and the map is built.
fn stored_map(store: &Path, key: &str, query: &str, budget: usize) -> Option<(IndexStats, RepoMapView)> {
    let bytes = std::fs::read(StoredMap::path(store, key)).ok()?;
    let stored: StoredMap = serde_json::from_slice(&bytes).ok()?;
    if stored.key != key || stored.sha256 != crate::util::sha256_hex(stored.map.as_bytes()) {
        return None;
    }
    let StoredView { stats, mut view } = serde_json::from_str(&stored.map).ok()?;
    // Stored without its query (the key has the query's digest): the task is not copied out.
    view.query = query.to_string();
    (view.tokens <= budget && estimate(&view.text) == view.tokens).then_some((stats, view))
}

/// Stores a map under `key` in `store` (made if missing), atomically: a reader sees the old
/// file, the new one, or none. The first store of a process also removes what the folder holds
/// from more than [`STORED_KEPT`] ago ([`prune_store`]).
fn store_map(store: &Path, key: &str, stats: &IndexStats, view: &RepoMapView) -> std::io::Result<()> {
    static PRUNED: std::sync::Once = std::sync::Once::new();
    PRUNED.call_once(|| prune_store(store, STORED_KEPT));
    let view = RepoMapView { query: String::new(), ..view.clone() };
    let map = serde_json::to_string(&StoredView { stats: stats.clone(), view })?;
    let stored = StoredMap { key: key.to_string(), sha256: crate::util::sha256_hex(map.as_bytes()), map };
    std::fs::create_dir_all(store)?;
    crate::util::write_atomic_unsynced(&StoredMap::path(store, key), &serde_json::to_vec(&stored)?)
}

/// How long a stored map is kept after it was written. A map's key names the hcbench binary,
/// so every build (and every fixture, task and budget) adds files; past this age a file is
/// removed and, if it is still wanted, built and stored again once.
const STORED_KEPT: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 3600);

/// Removes the files of `store` last written more than `kept` ago: stored maps of old builds,
/// and the temporary file a process killed while storing may leave. A file that cannot be
/// looked at or removed stays (another process may be reading it; a later prune tries again).
fn prune_store(store: &Path, kept: std::time::Duration) {
    let Ok(entries) = std::fs::read_dir(store) else { return };
    let now = std::time::SystemTime::now();
    for entry in entries.flatten() {
        let old = entry.metadata().ok().filter(std::fs::Metadata::is_file).and_then(|m| m.modified().ok());
        if old.is_some_and(|written| now.duration_since(written).is_ok_and(|age| age > kept)) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The files a map indexes under `root`, sorted by workspace-relative path, and the entries
/// skipped before they are read (walk errors, secret names, files over [`MAX_FILE_BYTES`]).
fn candidates(root: &Path) -> (Vec<String>, u32) {
    let mut skipped = 0u32;
    let mut candidates = Vec::new();
    // The workspace's own ignore files only: not the user's global git excludes nor a
    // `.gitignore` in a folder above the workspace, which made a map depend on the machine
    // and cost reading git's config files and probing every parent folder on each build.
    let walk = ignore::WalkBuilder::new(root)
        .hidden(false)
        .git_ignore(true)
        .git_global(false)
        .parents(false)
        .require_git(false)
        .filter_entry(|e| e.file_name() != ".git")
        .build();
    for entry in walk {
        let Ok(entry) = entry else {
            skipped += 1;
            continue;
        };
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        if is_secret_name(&entry.file_name().to_string_lossy()) {
            skipped += 1;
            continue;
        }
        if entry.metadata().map_or(true, |m| m.len() > MAX_FILE_BYTES) {
            skipped += 1;
            continue;
        }
        let rel = entry.path().strip_prefix(root).unwrap_or(entry.path());
        candidates.push(normalize(&rel.to_string_lossy()));
    }
    candidates.sort();
    (candidates, skipped)
}

/// A workspace's text files as an updatable index reads them: each one's path and SHA-256,
/// which is all a map of them depends on (with the count of entries skipped), so a map can be
/// looked up by them before anything is indexed ([`later_session_map`]).
struct Scan {
    root: PathBuf,
    /// Sorted by path: each text file read, its SHA-256, and its bytes while the scan's kept
    /// bytes stay under [`Scan::KEPT_BYTES`] (the rest are read again if they are indexed).
    files: Vec<ScannedFile>,
    /// Entries skipped: by the walk, unreadable, or binary (a NUL byte).
    skipped: u32,
    started: Instant,
}

/// A file a [`Scan`] read: its workspace-relative path, its SHA-256, and its bytes if kept.
type ScannedFile = (String, [u8; 32], Option<Vec<u8>>);

impl Scan {
    /// Bytes of file contents a scan keeps for the index built from it.
    const KEPT_BYTES: usize = 32 << 20;

    fn read(root: &Path) -> Scan {
        let started = Instant::now();
        let (candidates, mut skipped) = candidates(root);
        // Read beneath the root like read_file: a hard link to a file outside, or an entry
        // swapped for a fifo since the walk, is skipped, never read. The root is opened once.
        let opened = Root::open(root);
        let kept = std::sync::atomic::AtomicUsize::new(0);
        let read: Vec<Option<ScannedFile>> = map_items(&candidates, |_, rel| {
            let bytes = opened.as_ref().ok()?.read_regular(rel).ok()?;
            if bytes.contains(&0) {
                return None;
            }
            let content: [u8; 32] = Sha256::digest(&bytes).into();
            let room = kept.fetch_add(bytes.len(), std::sync::atomic::Ordering::Relaxed) + bytes.len();
            Some((rel.clone(), content, (room <= Self::KEPT_BYTES).then_some(bytes)))
        });
        let mut files = Vec::with_capacity(read.len());
        for file in read {
            match file {
                Some(f) => files.push(f),
                None => skipped += 1,
            }
        }
        Scan { root: root.to_path_buf(), files, skipped, started }
    }

    /// SHA-256 over every file's path and digest and the count skipped: what names the map.
    fn digest(&self) -> String {
        let mut h = Sha256::new();
        for (rel, content, _) in &self.files {
            h.update(rel.as_bytes());
            h.update([0]);
            h.update(content);
        }
        h.update(format!("skipped {}", self.skipped).as_bytes());
        crate::util::hex(&h.finalize())
    }
}

impl RepoIndex {
    /// Indexes the workspace at `root`. Never fails: what cannot be read is counted as skipped.
    pub fn build(root: &Path) -> RepoIndex {
        Self::build_with(root, None, false)
    }

    /// [`RepoIndex::build`], keeping what [`RepoIndex::update`] needs to bring the index up to
    /// date later (a digest of every file's bytes, and the identifiers the graph is made from).
    pub fn build_updatable(root: &Path) -> RepoIndex {
        Self::build_with(root, None, true)
    }

    /// The index of the workspace at `root` as it is now, equal to a fresh
    /// [`RepoIndex::build_updatable`] of it, made from this index of an earlier state of the
    /// same workspace: the walk and the reads are done again (a change to an ignore file, a file
    /// added, removed or swapped for a link all count), but a file whose bytes are the ones this
    /// index has (same path, same SHA-256) keeps its entry, symbols and words, and the
    /// tree-sitter parse an earlier render made of it, instead of being indexed and parsed again.
    /// The reference graph is made again over every file (a changed file changes its links).
    /// An index that is not updatable is simply built again.
    ///
    /// For a multi-session case: each later session's map is of the workspace the sessions
    /// before left, most of whose files (the tests, the README, the features not touched) are
    /// as they were.
    pub fn update(self, root: &Path) -> RepoIndex {
        if !self.updatable {
            return Self::build_updatable(root);
        }
        Self::build_with(root, Some(self), true)
    }

    /// [`RepoIndex::build`], reusing the entries of `earlier` for files whose bytes it has;
    /// `updatable` keeps digests and identifiers.
    fn build_with(root: &Path, earlier: Option<RepoIndex>, updatable: bool) -> RepoIndex {
        if updatable {
            return Self::from_scan(Scan::read(root), earlier).0;
        }
        let started = Instant::now();
        let (candidates, skipped) = candidates(root);
        // Read beneath the root like read_file: a hard link to a file outside, or an entry
        // swapped for a fifo since the walk, is skipped, never read. The root is opened once.
        let opened = Root::open(root);
        let parsed: Vec<Option<FileEntry>> = map_items(&candidates, |_, rel| {
            let bytes = opened.as_ref().ok()?.read_regular(rel).ok()?;
            (!bytes.contains(&0)).then(|| index_file(rel, &bytes))
        });
        Self::assemble(root, parsed, skipped, false, started)
    }

    /// The updatable index of what `scan` read, reusing the entries of `earlier` for files
    /// whose bytes it has; and whether it is the index of exactly the files the scan digested
    /// (false when a file whose bytes the scan did not keep had changed when read again).
    fn from_scan(scan: Scan, earlier: Option<RepoIndex>) -> (RepoIndex, bool) {
        let Scan { root, files, skipped, started } = scan;
        let opened = Root::open(&root);
        // The earlier index's entries by path: one whose bytes are this file's is taken as it is.
        let earlier: HashMap<&str, &FileEntry> =
            earlier.iter().flat_map(|e| e.files.iter().map(|f| (f.path.as_str(), f))).collect();
        let stable = std::sync::atomic::AtomicBool::new(true);
        let parsed: Vec<Option<FileEntry>> = map_items(&files, |_, (rel, content, kept)| {
            if let Some(kept) = earlier.get(rel.as_str()).filter(|f| f.content == Some(*content)) {
                let mut kept = FileEntry::clone(kept);
                // A parse that found the file changed since that build (or failed) is tried
                // again: the file has the indexed bytes now, and a fresh build would parse it.
                if kept.parsed.get().is_some_and(Option::is_none) {
                    kept.parsed = OnceLock::new();
                }
                return Some(kept);
            }
            if let Some(bytes) = kept {
                return Some(FileEntry { content: Some(*content), ..index_file(rel, bytes) });
            }
            // Not kept by the scan: read again, and indexed as it is now.
            let bytes = opened.as_ref().ok()?.read_regular(rel).ok().filter(|b| !b.contains(&0));
            let now = bytes.as_deref().map(|b| <[u8; 32]>::from(Sha256::digest(b)));
            if now.as_ref() != Some(content) {
                stable.store(false, std::sync::atomic::Ordering::Relaxed);
            }
            Some(FileEntry { content: now, ..index_file(rel, &bytes?) })
        });
        let stable = stable.into_inner();
        (Self::assemble(&root, parsed, skipped, true, started), stable)
    }

    /// The index of the files read (None: skipped), with its reference graph.
    fn assemble(
        root: &Path,
        parsed: Vec<Option<FileEntry>>,
        mut skipped: u32,
        updatable: bool,
        started: Instant,
    ) -> RepoIndex {
        let mut files = Vec::with_capacity(parsed.len());
        for entry in parsed {
            match entry {
                Some(f) => files.push(f),
                None => skipped += 1,
            }
        }
        let edges = reference_graph(&mut files, updatable);
        let duration_ms = started.elapsed().as_millis() as u64;
        RepoIndex { root: root.to_path_buf(), files, skipped, edges, duration_ms, updatable }
    }

    /// Whether every parse a render tried found the bytes the file was indexed with: only
    /// then is a render of this index the one a fresh build of those files makes.
    fn parses_held(&self) -> bool {
        self.files.iter().all(|f| f.parsed.get().is_none_or(Option::is_some))
    }

    /// The symbols the map shows for file `i`: for Python, tree-sitter's (parsed now, once, if
    /// the file still has the bytes it was indexed with), otherwise the index's.
    fn shown_symbols(&self, i: usize) -> &[Symbol] {
        let file = &self.files[i];
        if file.extractor != Extractor::TreeSitterPython {
            return &file.symbols;
        }
        let parsed = file.parsed.get_or_init(|| {
            let bytes = read_regular(&self.root, &file.path).ok()?;
            if raw_hash_bytes(&bytes) != file.digest {
                return None;
            }
            let mut symbols = Vec::new();
            with_python_parser(|parser| python_symbols(parser, &String::from_utf8_lossy(&bytes), &mut symbols))?;
            add_words(&mut symbols);
            Some(symbols)
        });
        parsed.as_deref().unwrap_or(&file.symbols)
    }

    pub fn stats(&self) -> IndexStats {
        let mut parsers = BTreeMap::new();
        for f in &self.files {
            *parsers.entry(f.extractor.as_str().to_string()).or_insert(0) += 1;
        }
        IndexStats {
            files: self.files.len() as u32,
            symbols: self.files.iter().map(|f| f.symbols.len() as u32).sum(),
            skipped: self.skipped,
            parsers,
            duration_ms: self.duration_ms,
        }
    }

    /// The map ranked against `query`, only files under `scope` (`.` = all), rendered within
    /// `budget_tokens` (estimated with [`estimate`]).
    pub fn render(&self, query: &str, scope: &str, budget_tokens: usize) -> RepoMapView {
        let scope = normalize(scope);
        let in_scope: Vec<usize> = (0..self.files.len())
            .filter(|&i| {
                let p = &self.files[i].path;
                scope.is_empty() || p == &scope || (p.starts_with(&scope) && p[scope.len()..].starts_with('/'))
            })
            .collect();
        let query_words = Query::new(query, &self.files);
        let scores = self.file_scores(&query_words, query);
        let mut ranked = in_scope.clone();
        ranked.sort_by(|&a, &b| {
            scores[b].total_cmp(&scores[a]).then_with(|| self.files[a].path.cmp(&self.files[b].path))
        });

        let mut view = RepoMapView {
            text: String::new(),
            files: Vec::new(),
            tokens: 0,
            query: query.to_string(),
            total_files: in_scope.len(),
        };
        if ranked.is_empty() {
            let shown = if scope.is_empty() { ".".to_string() } else { scope };
            let line = format!("(no text files to map under `{shown}`)\n");
            let (text, tokens) = clip(&line, budget_tokens);
            view.text = text.to_string();
            view.tokens = tokens;
            return view;
        }

        // The footer always fits: its cost is reserved up front, with the widest count.
        let reserve = estimate(&footer(ranked.len(), ranked.len()));
        let mut used = 0usize;
        let mut text = String::new();
        'files: for (rank, &i) in ranked.iter().enumerate() {
            let file = &self.files[i];
            let header = format!("{}:\n", file.path);
            let cost = estimate(&header);
            if used + cost + reserve > budget_tokens {
                break;
            }
            text.push_str(&header);
            used += cost;
            view.files.push(file.path.clone());
            let lines = symbol_lines(self.shown_symbols(i), &query_words, rank);
            for line in lines {
                let cost = estimate(&line);
                if used + cost + reserve > budget_tokens {
                    break 'files;
                }
                text.push_str(&line);
                used += cost;
            }
        }
        text.push_str(&footer(ranked.len() - view.files.len(), ranked.len()));
        // Line estimates add up to at least the whole text's estimate, so this holds; the clip
        // covers a budget too small even for the footer.
        let (text, tokens) = clip(&text, budget_tokens);
        view.text = text.to_string();
        view.tokens = tokens;
        view
    }

    /// Each file's final score: normalized overlap plus weighted, normalized personalized rank.
    fn file_scores(&self, query: &Query, raw_query: &str) -> Vec<f64> {
        let n = self.files.len();
        let lower = raw_query.to_lowercase();
        let full: f64 = query.words.iter().map(|w| w.idf * 5.5).sum::<f64>().max(1.0);
        let overlap: Vec<f64> = map_items(&self.files, |_, f| {
            let mut score = 0.0;
            let mut matched = 0usize;
            for w in &query.words {
                let mut m = 0.0;
                if f.path_words.binary_search(&w.hash).is_ok() {
                    m += 3.0;
                }
                if f.symbol_words.binary_search(&w.hash).is_ok() {
                    m += 2.0;
                }
                if f.words.binary_search(&w.hash).is_ok() {
                    m += 0.5;
                }
                if m > 0.0 {
                    score += w.idf * m;
                    matched += 1;
                }
            }
            if !query.words.is_empty() {
                score *= matched as f64 / query.words.len() as f64;
            }
            if is_test_path(&f.path) {
                score *= TEST_FILE_WEIGHT;
            }
            // A query that names the file (`errcat/catalog.py`, `catalog.py`) means it.
            let name = f.path.rsplit('/').next().unwrap_or(&f.path);
            if f.path.contains('/') && lower.contains(&f.path.to_lowercase()) {
                score += full;
            } else if name.contains('.') && mentions(&lower, &name.to_lowercase()) {
                score += full / 2.0;
            }
            score
        });
        let total: f64 = overlap.iter().sum();
        let personal: Vec<f64> =
            if total > 0.0 { overlap.iter().map(|s| s / total).collect() } else { vec![1.0 / n as f64; n] };
        let rank = pagerank(&self.edges, &personal);
        let max_overlap = overlap.iter().copied().fold(0.0, f64::max);
        let max_rank = rank.iter().copied().fold(0.0, f64::max);
        (0..n)
            .map(|i| {
                let o = if max_overlap > 0.0 { overlap[i] / max_overlap } else { 0.0 };
                let r = if max_rank > 0.0 { rank[i] / max_rank } else { 0.0 };
                o + RANK_WEIGHT * r
            })
            .collect()
    }
}

/// True for test files: a `test`/`tests` folder, `test_*`, `*_test.*`, `*.test.*`, `*.spec.*`,
/// `conftest.py`.
fn is_test_path(path: &str) -> bool {
    let mut parts = path.rsplit('/');
    let name = parts.next().unwrap_or("").to_ascii_lowercase();
    let stem = name.split('.').next().unwrap_or("");
    parts.any(|d| d == "test" || d == "tests")
        || name.starts_with("test_")
        || stem.ends_with("_test")
        || name.contains(".test.")
        || name.contains(".spec.")
        || name == "conftest.py"
}

/// True when `name` occurs in `text` not glued to a longer name (`a.py` is not in `data.py`).
fn mentions(text: &str, name: &str) -> bool {
    text.match_indices(name).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        before.is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == '.'))
    })
}

fn footer(not_shown: usize, total: usize) -> String {
    if not_shown == 0 {
        format!("[all {total} files shown]\n")
    } else {
        format!("[{not_shown} more files not shown]\n")
    }
}

/// The query's distinct words with their rarity over the index.
struct Query {
    words: Vec<QueryWord>,
}

struct QueryWord {
    hash: u64,
    idf: f64,
}

impl Query {
    fn new(query: &str, files: &[FileEntry]) -> Query {
        let mut hashes = Vec::new();
        for_each_identifier(query, |ident| for_each_word(ident, |w| hashes.push(word_hash(w))));
        hashes.sort_unstable();
        hashes.dedup();
        let n = files.len() as f64;
        let words = hashes
            .into_iter()
            .map(|hash| {
                let df = files
                    .iter()
                    .filter(|f| f.words.binary_search(&hash).is_ok() || f.path_words.binary_search(&hash).is_ok())
                    .count() as f64;
                // BM25's idf: positive, and small for words most files have.
                QueryWord { hash, idf: (1.0 + (n - df + 0.5) / (df + 0.5)).ln() }
            })
            .collect();
        Query { words }
    }

    fn score(&self, words: &[u64]) -> f64 {
        self.words.iter().filter(|w| words.contains(&w.hash)).map(|w| w.idf).sum()
    }
}

/// Symbol lines of `file` for the map: most relevant first, each class's members under it.
/// Files further down the ranking show fewer of their unrelated symbols.
fn symbol_lines(syms: &[Symbol], query: &Query, rank: usize) -> Vec<String> {
    let own: Vec<f64> = syms.iter().map(|s| query.score(&s.words)).collect();
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); syms.len()];
    let mut roots = Vec::new();
    for (i, s) in syms.iter().enumerate() {
        match s.parent {
            Some(p) => children[p as usize].push(i),
            None => roots.push(i),
        }
    }
    // A parent is as relevant as its most relevant member. Parents precede their members, so
    // a backwards pass sees every member before its parent.
    let mut subtree = own.clone();
    for i in (0..syms.len()).rev() {
        if let Some(p) = syms[i].parent {
            subtree[p as usize] = subtree[p as usize].max(subtree[i]);
        }
    }
    let order = |list: &mut Vec<usize>| {
        list.sort_by(|&a, &b| subtree[b].total_cmp(&subtree[a]).then(syms[a].line.cmp(&syms[b].line)))
    };
    order(&mut roots);
    for c in &mut children {
        order(c);
    }
    let mut flat: Vec<(usize, usize)> = Vec::new();
    let mut stack: Vec<(usize, usize)> = roots.iter().rev().map(|&i| (i, 0)).collect();
    while let Some((i, depth)) = stack.pop() {
        flat.push((i, depth));
        stack.extend(children[i].iter().rev().map(|&c| (c, depth + 1)));
    }
    let cap = match rank {
        0 => 24,
        1..=4 => 12,
        _ => 6,
    };
    // Relevant symbols are always kept (up to 40); unrelated ones up to the rank's cap. The
    // order is preorder, so cutting a prefix never shows a member without its parent.
    let relevant = flat.iter().take_while(|&&(i, _)| subtree[i] > 0.0).count();
    let keep = relevant.min(40).max(cap).min(flat.len());
    let mut lines: Vec<String> = flat[..keep]
        .iter()
        .map(|&(i, depth)| format!("{:>6}| {}{}\n", syms[i].line, "  ".repeat(depth), syms[i].signature))
        .collect();
    if keep < flat.len() {
        lines.push(format!("      | ... {} more\n", flat.len() - keep));
    }
    lines
}

/// Personalized PageRank over `edges`, teleporting (and redistributing dangling rank) by
/// `personal`, which sums to 1.
fn pagerank(edges: &[Vec<(u32, f64)>], personal: &[f64]) -> Vec<f64> {
    let n = personal.len();
    let out: Vec<f64> = edges.iter().map(|e| e.iter().map(|(_, w)| w).sum()).collect();
    let mut rank = personal.to_vec();
    let mut next = vec![0.0; n];
    for _ in 0..RANK_ITERATIONS {
        next.iter_mut().for_each(|x| *x = 0.0);
        let mut dangling = 0.0;
        for a in 0..n {
            if out[a] > 0.0 {
                let share = DAMPING * rank[a] / out[a];
                for &(b, w) in &edges[a] {
                    next[b as usize] += share * w;
                }
            } else {
                dangling += rank[a];
            }
        }
        let mut delta = 0.0;
        for i in 0..n {
            next[i] += ((1.0 - DAMPING) + DAMPING * dangling) * personal[i];
            delta += (next[i] - rank[i]).abs();
        }
        std::mem::swap(&mut rank, &mut next);
        if delta < 1e-9 {
            break;
        }
    }
    rank
}

/// Links each file to the files defining names it mentions (weight 1/definers per name), then
/// drops the identifier lists the links were made from, unless they are `kept` (an index
/// [`RepoIndex::update`] will make its graph again from).
fn reference_graph(files: &mut [FileEntry], kept: bool) -> Vec<Vec<(u32, f64)>> {
    let mut definers: HashMap<u64, Vec<u32>> = HashMap::new();
    for (i, f) in files.iter().enumerate() {
        let mut names: Vec<u64> = f
            .symbols
            .iter()
            .filter(|s| s.name.len() >= 3 && !s.name.starts_with("__"))
            .map(|s| raw_hash(&s.name))
            .collect();
        // A code file also defines its module name (a package's `__init__.py`: the folder's).
        if f.extractor != Extractor::None {
            let mut parts = f.path.rsplit('/');
            let name = parts.next().unwrap_or("");
            let stem = name.split('.').next().unwrap_or("");
            let module = if stem == "__init__" { parts.next().unwrap_or("") } else { stem };
            if module.len() >= 3 {
                names.push(raw_hash(module));
            }
        }
        names.sort_unstable();
        names.dedup();
        for h in names {
            definers.entry(h).or_default().push(i as u32);
        }
    }
    let edges = map_items(files, |a, f| {
        let mut acc: HashMap<u32, f64> = HashMap::new();
        for h in &f.idents {
            if let Some(defs) = definers.get(h)
                && defs.len() <= MAX_DEFINERS
            {
                let w = 1.0 / defs.len() as f64;
                for &b in defs {
                    if b as usize != a {
                        *acc.entry(b).or_insert(0.0) += w;
                    }
                }
            }
        }
        let mut list: Vec<(u32, f64)> = acc.into_iter().collect();
        list.sort_by_key(|&(b, _)| b);
        list
    });
    if !kept {
        for f in files.iter_mut() {
            f.idents = Vec::new();
        }
    }
    edges
}

fn python_parser() -> Option<tree_sitter::Parser> {
    let mut parser = tree_sitter::Parser::new();
    parser.set_language(&tree_sitter_python::LANGUAGE.into()).ok()?;
    Some(parser)
}

/// Runs `f` with this thread's Python parser, made on first use: a render parses tens of files,
/// and a parser (its allocations, the language's tables looked up) need not be made for each.
/// None when the grammar cannot be loaded.
fn with_python_parser<R>(f: impl FnOnce(&mut tree_sitter::Parser) -> R) -> Option<R> {
    thread_local! {
        static PARSER: std::cell::RefCell<Option<tree_sitter::Parser>> = const { std::cell::RefCell::new(None) };
    }
    PARSER.with(|cell| {
        let mut parser = cell.try_borrow_mut().ok()?;
        if parser.is_none() {
            *parser = python_parser();
        }
        parser.as_mut().map(f)
    })
}

/// Indexes one file.
fn index_file(path: &str, bytes: &[u8]) -> FileEntry {
    let text = String::from_utf8_lossy(bytes);
    let text = text.as_ref();
    let name = path.rsplit('/').next().unwrap_or(path);
    let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()).unwrap_or_default();
    let mut symbols = Vec::new();
    let extractor = match ext.as_str() {
        "py" | "pyi" => {
            python_scan(text, &mut symbols);
            Extractor::TreeSitterPython
        }
        _ => match regex_language(&ext) {
            Some(patterns) => {
                regex_symbols(patterns, text, &mut symbols);
                Extractor::Regex
            }
            None => Extractor::None,
        },
    };
    add_words(&mut symbols);
    let mut symbol_words: Vec<u64> = symbols.iter().flat_map(|s| s.words.iter().copied()).collect();
    symbol_words.sort_unstable();
    symbol_words.dedup();

    let mut path_words = Vec::new();
    for_each_identifier(path, |ident| for_each_word(ident, |w| path_words.push(word_hash(w))));
    path_words.sort_unstable();
    path_words.dedup();

    // Distinct identifiers first (hash and text), so each is split into words only once.
    let mut idents: Vec<(u64, &str)> = Vec::new();
    for_each_identifier(text, |ident| idents.push((raw_hash(ident), ident)));
    idents.sort_unstable_by_key(|&(h, _)| h);
    idents.dedup_by_key(|&mut (h, _)| h);
    let mut words = Vec::new();
    for (_, ident) in &idents {
        for_each_word(ident, |w| words.push(word_hash(w)));
    }
    words.sort_unstable();
    words.dedup();
    let idents = idents.into_iter().filter(|(_, s)| s.len() >= 3).map(|(h, _)| h).collect();

    let digest = if extractor == Extractor::TreeSitterPython { raw_hash_bytes(bytes) } else { 0 };
    FileEntry {
        path: path.to_string(),
        extractor,
        symbols,
        path_words,
        symbol_words,
        words,
        idents,
        digest,
        content: None,
        parsed: OnceLock::new(),
    }
}

/// Fills in each symbol's name words, for ranking.
fn add_words(symbols: &mut [Symbol]) {
    for s in symbols {
        for_each_word(&s.name, |w| s.words.push(word_hash(w)));
        s.words.sort_unstable();
        s.words.dedup();
    }
}

// ---------------------------------------------------------------------------------------------
// Python, with a line scan (ranking) and tree-sitter (what the map shows)

/// Lexical state carried from one line of Python to the next.
#[derive(Default)]
struct PyLex {
    /// Inside a string: its quote byte and whether it is triple-quoted.
    string: Option<(u8, bool)>,
    /// Open brackets: a line inside them continues a statement.
    depth: u32,
    /// The previous line ended with a backslash.
    continued: bool,
}

impl PyLex {
    /// True when the next line starts a statement (not inside a string, brackets or a `\`).
    fn at_statement(&self) -> bool {
        self.string.is_none() && self.depth == 0 && !self.continued
    }

    /// Advances over one line: strings, comments, brackets and a trailing backslash.
    fn line(&mut self, line: &[u8]) {
        let mut i = 0;
        self.continued = false;
        while i < line.len() {
            let b = line[i];
            match self.string {
                Some((q, triple)) => {
                    if b == b'\\' {
                        i += 2;
                        continue;
                    }
                    if b == q && (!triple || line[i..].starts_with(&[q, q, q])) {
                        self.string = None;
                        i += if triple { 3 } else { 1 };
                        continue;
                    }
                }
                None => match b {
                    b'#' => break,
                    b'"' | b'\'' => {
                        let triple = line[i..].starts_with(&[b, b, b]);
                        self.string = Some((b, triple));
                        i += if triple { 3 } else { 1 };
                        continue;
                    }
                    b'(' | b'[' | b'{' => self.depth += 1,
                    b')' | b']' | b'}' => self.depth = self.depth.saturating_sub(1),
                    b'\\' if i + 1 == line.len() => self.continued = true,
                    _ => {}
                },
            }
            i += 1;
        }
        // A one-quote string ends with its line (or the line is broken Python: start afresh).
        if matches!(self.string, Some((_, false))) && !self.continued {
            self.string = None;
        }
    }
}

/// Python definitions from a line scan: `def`, `async def` and `class` statements with their
/// nesting by indentation, and module constants. It finds the names, lines and nesting the
/// tree-sitter extractor finds for ordinary code (a test holds the two together on every fixture)
/// at a fraction of the cost, so ranking can afford to look at every file; signatures are the
/// statement's text, without decorators. The map shows tree-sitter's symbols for the files it
/// shows ([`RepoIndex::shown_symbols`]).
fn python_scan(text: &str, out: &mut Vec<Symbol>) {
    let lines: Vec<&str> = text.lines().collect();
    let mut lex = PyLex::default();
    // (indent, symbol index) of the open definitions, innermost last.
    let mut open: Vec<(usize, u32)> = Vec::new();
    for (row, line) in lines.iter().enumerate() {
        let statement = lex.at_statement();
        lex.line(line.as_bytes());
        let trimmed = line.trim_start();
        if !statement || trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let indent = line.len() - trimmed.len();
        while open.last().is_some_and(|&(i, _)| i >= indent) {
            open.pop();
        }
        let def = trimmed.strip_prefix("async ").map(str::trim_start).unwrap_or(trimmed);
        let keyword = ["def", "class"]
            .into_iter()
            .find(|k| def.strip_prefix(k).is_some_and(|rest| rest.starts_with([' ', '\t'])));
        if let Some(keyword) = keyword {
            let name_at = &def[keyword.len()..].trim_start();
            let end = name_at.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(name_at.len());
            let name = &name_at[..end];
            if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
                continue;
            }
            // The statement's text up to its colon, over the lines its brackets span.
            let mut statement = String::from(trimmed.trim_end());
            let mut more = PyLex::default();
            more.line(trimmed.as_bytes());
            let mut next = row + 1;
            while !more.at_statement() && next < lines.len() && next <= row + 20 {
                more.line(lines[next].as_bytes());
                statement.push(' ');
                statement.push_str(lines[next].trim());
                next += 1;
            }
            let signature = one_line(&statement[..header_end(&statement)]);
            out.push(symbol(name, shorten(&signature, MAX_SIGNATURE_CHARS), row, open.last().map(|&(_, s)| s)));
            open.push((indent, (out.len() - 1) as u32));
        } else if open.is_empty() {
            // Module constants (`CATALOG = {...}`, `LIMIT: int = 3`), also under `if`/`try`.
            let end = trimmed.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(trimmed.len());
            let (name, rest) = trimmed.split_at(end);
            if !is_constant_name(name) {
                continue;
            }
            let rest = rest.trim_start();
            if let Some(annotation) = rest.strip_prefix(':') {
                let ty = annotation.split('=').next().unwrap_or("").trim();
                out.push(symbol(name, format!("{name}: {}", one_line(ty)), row, None));
            } else if rest.starts_with('=') && !rest.starts_with("==") {
                out.push(symbol(name, format!("{name} = ..."), row, None));
            }
        }
    }
}

/// Where a `def`/`class` statement's header ends: its first colon outside brackets and strings
/// (the whole text when there is none).
fn header_end(statement: &str) -> usize {
    let b = statement.as_bytes();
    let mut depth = 0u32;
    let mut quote: Option<u8> = None;
    let mut i = 0;
    while i < b.len() {
        match (quote, b[i]) {
            (Some(_), b'\\') => i += 1,
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, c @ (b'"' | b'\'')) => quote = Some(c),
            (None, b'(' | b'[' | b'{') => depth += 1,
            (None, b')' | b']' | b'}') => depth = depth.saturating_sub(1),
            (None, b':') if depth == 0 => return i,
            (None, b'#') => return i,
            _ => {}
        }
        i += 1;
    }
    b.len()
}

// ---------------------------------------------------------------------------------------------
// Python, with tree-sitter

fn python_symbols(parser: &mut tree_sitter::Parser, text: &str, out: &mut Vec<Symbol>) {
    let Some(tree) = parser.parse(text, None) else { return };
    python_block(tree.root_node(), text.as_bytes(), None, true, out);
}

fn node_text<'a>(node: tree_sitter::Node<'_>, src: &'a [u8]) -> &'a str {
    node.utf8_text(src).unwrap_or("")
}

/// Definitions among the statements of `node`. Compound statements (`if TYPE_CHECKING:`,
/// `try:` around imports) are looked into; expressions are not.
fn python_block(node: tree_sitter::Node<'_>, src: &[u8], parent: Option<u32>, module: bool, out: &mut Vec<Symbol>) {
    let mut cursor = node.walk();
    for child in node.named_children(&mut cursor) {
        match child.kind() {
            "function_definition" | "class_definition" => python_def(child, src, &[], parent, out),
            "decorated_definition" => {
                let mut c = child.walk();
                let decorators: Vec<String> = child
                    .named_children(&mut c)
                    .filter(|d| d.kind() == "decorator")
                    .map(|d| shorten(&one_line(node_text(d, src)), 40))
                    .collect();
                if let Some(def) = child.child_by_field_name("definition") {
                    python_def(def, src, &decorators, parent, out);
                }
            }
            "expression_statement" if module => {
                // Module constants (`CATALOG = {...}`): often what a task's words point at.
                if let Some(assign) = child.named_child(0).filter(|a| a.kind() == "assignment")
                    && let Some(left) = assign.child_by_field_name("left").filter(|l| l.kind() == "identifier")
                {
                    let name = node_text(left, src);
                    if is_constant_name(name) {
                        let signature = match assign.child_by_field_name("type") {
                            Some(t) => format!("{name}: {}", one_line(node_text(t, src))),
                            None => format!("{name} = ..."),
                        };
                        out.push(symbol(name, signature, child.start_position().row, None));
                    }
                }
            }
            "if_statement" | "elif_clause" | "else_clause" | "try_statement" | "except_clause" | "finally_clause"
            | "with_statement" | "for_statement" | "while_statement" | "block" => {
                python_block(child, src, parent, module, out)
            }
            _ => {}
        }
    }
}

fn python_def(
    node: tree_sitter::Node<'_>,
    src: &[u8],
    decorators: &[String],
    parent: Option<u32>,
    out: &mut Vec<Symbol>,
) {
    let Some(name_node) = node.child_by_field_name("name") else { return };
    let name = node_text(name_node, src);
    let mut signature: String = decorators.iter().map(|d| format!("{d} ")).collect();
    if node.kind() == "class_definition" {
        let _ = write!(signature, "class {name}");
        if let Some(bases) = node.child_by_field_name("superclasses") {
            signature.push_str(&one_line(node_text(bases, src)));
        }
    } else {
        if node.child(0).is_some_and(|c| c.kind() == "async") {
            signature.push_str("async ");
        }
        let _ = write!(signature, "def {name}");
        if let Some(params) = node.child_by_field_name("parameters") {
            signature.push_str(&one_line(node_text(params, src)));
        }
        if let Some(ret) = node.child_by_field_name("return_type") {
            let _ = write!(signature, " -> {}", one_line(node_text(ret, src)));
        }
    }
    out.push(symbol(name, shorten(&signature, MAX_SIGNATURE_CHARS), name_node.start_position().row, parent));
    if let Some(body) = node.child_by_field_name("body") {
        let me = (out.len() - 1) as u32;
        python_block(body, src, Some(me), false, out);
    }
}

fn is_constant_name(name: &str) -> bool {
    name.len() >= 2
        && name.bytes().any(|b| b.is_ascii_uppercase())
        && name.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

fn symbol(name: &str, signature: String, row: usize, parent: Option<u32>) -> Symbol {
    Symbol { name: name.to_string(), signature, line: row as u32 + 1, parent, words: Vec::new() }
}

/// Collapses a multi-line fragment (parameters over several lines) into one line.
fn one_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for w in s.split_whitespace() {
        let glue = out.is_empty() || out.ends_with(['(', '[']) || w.starts_with([')', ']']);
        if !glue {
            out.push(' ');
        }
        out.push_str(w);
    }
    out.replace(",)", ")").replace(",]", "]")
}

fn shorten(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    format!("{}...", crate::util::truncate_str(s, max - 3))
}

// ---------------------------------------------------------------------------------------------
// Other languages, with one regex per kind of definition

/// A definition pattern; each has a `name` group.
fn re(p: &str) -> Regex {
    Regex::new(p).expect("valid regex")
}

/// Rust's optional visibility, before a definition.
const VIS: &str = r"(?:pub(?:\([^)]*\))?\s+)?";
/// The modifiers a definition may start with in the C-like languages.
const MODIFIERS: &str = r"(?:(?:public|private|protected|internal|static|final|abstract|sealed|open|data|partial|override|suspend|async|inline|export|default|readonly)\s+)*";

/// Patterns per language, each compiled the first time a file of its language is indexed:
/// compiling all of them (their `\w` classes are Unicode's) took milliseconds, which a map of
/// a tree with one shell script paid in full. Extensions map onto them in [`regex_language`].
static PATTERNS: [LazyLock<Vec<Regex>>; 8] = [
    // 0: Rust
    LazyLock::new(|| {
        vec![
            re(&format!(r#"^\s*{VIS}(?:(?:const|async|unsafe|extern\s+"[^"]*")\s+)*fn\s+(?P<name>\w+)"#)),
            re(&format!(r"^\s*{VIS}(?:struct|enum|trait|union|type|mod)\s+(?P<name>\w+)")),
            re(r"^\s*(?:unsafe\s+)?impl\b(?:<[^>]*>)?\s+(?:[\w:<>, ]+\s+for\s+)?(?P<name>\w+)"),
            re(r"^\s*macro_rules!\s*(?P<name>\w+)"),
        ]
    }),
    // 1: JavaScript and TypeScript
    LazyLock::new(|| {
        vec![
            re(r"^\s*(?:export\s+)?(?:default\s+)?(?:async\s+)?function\s*\*?\s*(?P<name>[\w$]+)"),
            re(r"^\s*(?:export\s+)?(?:default\s+)?(?:abstract\s+)?(?:class|interface|enum)\s+(?P<name>[\w$]+)"),
            re(r"^\s*(?:export\s+)?type\s+(?P<name>[\w$]+)\s*(?:<[^>]*>)?\s*="),
            re(
                r"^\s*(?:export\s+)?(?:const|let|var)\s+(?P<name>[\w$]+)\s*(?::[^=]+)?=\s*(?:async\s+)?(?:function\b|\([^)]*\)\s*(?::[^=]+)?=>|[\w$]+\s*=>)",
            ),
            re(&format!(
                r"^\s+{MODIFIERS}(?:get\s+|set\s+)?(?P<name>[A-Za-z_$][\w$]*)\s*\([^)]*\)\s*(?::\s*[^{{]+)?\{{\s*$"
            )),
        ]
    }),
    // 2: Go
    LazyLock::new(|| vec![re(r"^func\s+(?:\([^)]*\)\s*)?(?P<name>\w+)"), re(r"^type\s+(?P<name>\w+)")]),
    // 3: Java, Kotlin, C#, Scala, Swift
    LazyLock::new(|| {
        vec![
            re(&format!(r"^\s*{MODIFIERS}(?:class|interface|enum|record|object|struct|trait)\s+(?P<name>\w+)")),
            re(&format!(r"^\s*{MODIFIERS}(?:fun|func|def)\s+(?:<[^>]*>\s*)?(?P<name>\w+)")),
            re(
                r"^\s+(?:(?:public|private|protected|internal|static|final|abstract|synchronized|override|virtual|async)\s+)+[\w<>\[\],.? ]+\s+(?P<name>\w+)\s*\(",
            ),
        ]
    }),
    // 4: Ruby
    LazyLock::new(|| {
        vec![re(r"^\s*def\s+(?:self\.)?(?P<name>\w+[?!]?)"), re(r"^\s*(?:class|module)\s+(?P<name>[\w:]+)")]
    }),
    // 5: C and C++
    LazyLock::new(|| {
        vec![
            re(r"^\s*(?:typedef\s+)?(?:struct|class|enum|union|namespace)\s+(?P<name>\w+)\s*(?:[:{]|$)"),
            re(r"^[A-Za-z_][\w\s\*&:<>,]*[\s\*&](?P<name>[A-Za-z_][\w:~]*)\s*\([^;]*\)\s*(?:const\s*)?\{?\s*$"),
        ]
    }),
    // 6: shell
    LazyLock::new(|| {
        vec![re(r"^\s*(?:function\s+)?(?P<name>[A-Za-z_][\w-]*)\s*\(\)\s*\{?"), re(r"^\s*function\s+(?P<name>[\w-]+)")]
    }),
    // 7: PHP
    LazyLock::new(|| {
        vec![
            re(&format!(r"^\s*{MODIFIERS}function\s+(?P<name>\w+)")),
            re(r"^\s*(?:abstract\s+|final\s+)?(?:class|interface|trait)\s+(?P<name>\w+)"),
        ]
    }),
];

fn regex_language(ext: &str) -> Option<&'static [Regex]> {
    let lang = match ext {
        "rs" => 0,
        "js" | "jsx" | "mjs" | "cjs" | "ts" | "tsx" | "mts" | "cts" => 1,
        "go" => 2,
        "java" | "kt" | "kts" | "cs" | "scala" | "swift" => 3,
        "rb" => 4,
        "c" | "h" | "cc" | "cpp" | "cxx" | "hpp" | "hh" | "hxx" => 5,
        "sh" | "bash" | "zsh" => 6,
        "php" => 7,
        _ => return None,
    };
    Some(PATTERNS[lang].as_slice())
}

/// Words that look like a definition to the method and function patterns but are control flow.
const NOT_NAMES: &[&str] =
    &["catch", "do", "else", "for", "foreach", "function", "if", "return", "sizeof", "switch", "while", "with"];

fn regex_symbols(patterns: &[Regex], text: &str, out: &mut Vec<Symbol>) {
    // (indent, symbol index) of the open definitions, innermost last.
    let mut open: Vec<(usize, u32)> = Vec::new();
    for (row, line) in text.lines().enumerate() {
        if line.len() > MAX_REGEX_LINE || line.trim().is_empty() {
            continue;
        }
        let trimmed = line.trim_start();
        if trimmed.starts_with("//") || trimmed.starts_with('#') || trimmed.starts_with('*') {
            continue;
        }
        let Some(name) = patterns.iter().find_map(|p| p.captures(line).and_then(|c| c.name("name"))) else {
            continue;
        };
        if NOT_NAMES.contains(&name.as_str()) {
            continue;
        }
        let indent = line.len() - trimmed.len();
        while open.last().is_some_and(|&(i, _)| i >= indent) {
            open.pop();
        }
        let signature = trimmed.trim_end().trim_end_matches(['{', ':']).trim_end();
        out.push(symbol(
            name.as_str(),
            shorten(&one_line(signature), MAX_SIGNATURE_CHARS),
            row,
            open.last().map(|&(_, s)| s),
        ));
        open.push((indent, (out.len() - 1) as u32));
    }
}

// ---------------------------------------------------------------------------------------------
// Words

/// Words too common in task prompts to say anything about a file.
const STOP_WORDS: &[&str] = &[
    "an", "and", "are", "as", "at", "be", "but", "by", "can", "def", "do", "doe", "for", "from", "have", "how", "if",
    "in", "into", "is", "it", "its", "no", "not", "of", "on", "or", "self", "so", "such", "that", "the", "their",
    "them", "then", "there", "these", "they", "this", "to", "was", "were", "what", "when", "where", "which", "while",
    "who", "why", "will", "with", "you", "your",
];

/// Calls `f` with every identifier-shaped token (`[A-Za-z_][A-Za-z0-9_]*`) of `text`.
fn for_each_identifier<'a>(text: &'a str, mut f: impl FnMut(&'a str)) {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_alphabetic() || b[i] == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            f(&text[start..i]);
        } else if b[i].is_ascii_digit() {
            // Digits glued to a word stay with it (`E4271`); a number alone is no identifier.
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
}

/// Calls `f` with the lowercase, lightly stemmed words of an identifier: split at `_` and at
/// case changes (`HTTPServerError` -> http, server, error), stop words and one-letter words
/// dropped.
fn for_each_word(ident: &str, mut f: impl FnMut(&str)) {
    let b = ident.as_bytes();
    let mut buf = String::new();
    let mut emit = |part: &str, buf: &mut String| {
        if part.len() < 2 {
            return;
        }
        buf.clear();
        buf.push_str(part);
        buf.make_ascii_lowercase();
        stem(buf);
        if buf.len() >= 2 && STOP_WORDS.binary_search(&buf.as_str()).is_err() {
            f(buf);
        }
    };
    let mut start = 0;
    for i in 0..b.len() {
        if b[i] == b'_' {
            emit(&ident[start..i], &mut buf);
            start = i + 1;
            continue;
        }
        if i > start && b[i].is_ascii_uppercase() {
            let prev = b[i - 1];
            let next_lower = b.get(i + 1).is_some_and(|c| c.is_ascii_lowercase());
            if prev.is_ascii_lowercase() || prev.is_ascii_digit() || (prev.is_ascii_uppercase() && next_lower) {
                emit(&ident[start..i], &mut buf);
                start = i;
            }
        }
    }
    emit(&ident[start..], &mut buf);
}

/// Plural and third-person `s` off (`errors` -> `error`, `entries` -> `entry`), so a prompt's
/// words meet the code's.
fn stem(w: &mut String) {
    if w.len() > 4 && w.ends_with("ies") {
        w.truncate(w.len() - 3);
        w.push('y');
    } else if w.len() > 3 && w.ends_with('s') && !w.ends_with("ss") && !w.ends_with("us") && !w.ends_with("is") {
        w.pop();
    }
}

/// FNV-1a: fixed, seedless, so hashes (and everything sorted by them) are the same every run.
fn raw_hash(s: &str) -> u64 {
    raw_hash_bytes(s.as_bytes())
}

fn raw_hash_bytes(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn word_hash(w: &str) -> u64 {
    raw_hash(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let p = d.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        d
    }

    fn symbols_of(index: &RepoIndex, path: &str) -> Vec<(u32, String, Option<u32>)> {
        let i = index.files.iter().position(|f| f.path == path).unwrap();
        index.shown_symbols(i).iter().map(|s| (s.line, s.signature.clone(), s.parent)).collect()
    }

    const PAGER: &str = r#"import functools

MAX_PAGE = 50
helper = 3


@functools.lru_cache(maxsize=None)
def page(items: list, size: int = 10) -> list:
    """First page."""
    def clamp(n):
        return min(n, MAX_PAGE)
    return items[: clamp(size)]


class Pager(Base, metaclass=Meta):
    class Cursor:
        pass

    @property
    def total(self) -> int:
        return 0

    async def fetch(
        self,
        url: str,
        retries: int = 3,
    ) -> bytes:
        ...

    @staticmethod
    @cached
    def build(x): ...


if TYPE_CHECKING:
    def typed_only(): ...
"#;

    #[test]
    fn a_fresh_workspaces_map_is_built_once_per_fixture_and_again_when_the_fixture_changes() {
        let fixture = tree(&[("pager.py", PAGER), ("README.md", "Pages of items.\n")]);
        let copy = |name: &str| {
            let ws = fixture.path().parent().unwrap().join(format!("{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&ws);
            std::fs::create_dir(&ws).unwrap();
            for f in ["pager.py", "README.md"] {
                std::fs::copy(fixture.path().join(f), ws.join(f)).unwrap();
            }
            ws
        };
        let (a, b) = (copy("ws-a"), copy("ws-b"));
        let built = RepoIndex::build(&a);
        let (stats, view) = fresh_workspace_map(fixture.path(), &a, "the page size", 400, None);
        assert_eq!(view, built.render("the page size", ".", 400));
        assert_eq!(IndexStats { duration_ms: 0, ..stats.clone() }, IndexStats { duration_ms: 0, ..built.stats() });
        // Another cell of the same case: the same map, whatever its workspace's folder.
        let (again_stats, again) = fresh_workspace_map(fixture.path(), &b, "the page size", 400, None);
        assert_eq!(
            (IndexStats { duration_ms: 0, ..again_stats }, &again),
            (IndexStats { duration_ms: 0, ..stats }, &view)
        );
        // Another query or budget is another map.
        assert_ne!(fresh_workspace_map(fixture.path(), &b, "README", 400, None).1.files, view.files);
        // The fixture changed (a file added): built again, from the workspace.
        std::fs::write(fixture.path().join("cursor.py"), "class Cursor:\n    pass\n").unwrap();
        std::fs::copy(fixture.path().join("cursor.py"), b.join("cursor.py")).unwrap();
        let (changed, _) = fresh_workspace_map(fixture.path(), &b, "the page size", 400, None);
        assert_eq!(changed.files, 3);
        for ws in [a, b] {
            std::fs::remove_dir_all(ws).unwrap();
        }
    }

    #[test]
    fn a_fixtures_stamp_from_its_copy_is_the_one_a_walk_finds_and_names_what_the_copy_has() {
        let fixture = tree(&[("README.md", "# pager\n"), ("pkg/pager.py", PAGER), ("pkg/sub/notes.txt", "n\n")]);
        std::os::unix::fs::symlink("pkg/pager.py", fixture.path().join("link")).unwrap();
        let fifo = fixture.path().join("pkg/pipe");
        rustix::fs::mknodat(rustix::fs::CWD, &fifo, rustix::fs::FileType::Fifo, rustix::fs::Mode::RUSR, 0).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ws = crate::workspace::fresh(fixture.path(), &dir.path().join("ws"), &dir.path().join("ws")).unwrap();
        let from_copy = tree_stamp(fixture.path(), &ws).unwrap();
        // No copy into the folder of the workspaces: the fixture is walked.
        let walked = tree_stamp(fixture.path(), dir.path()).unwrap();
        assert_eq!((from_copy.digest, from_copy.newest_ns), (walked.digest, walked.newest_ns));
        // The fixture changed after the copy: a walk sees it; the copy's stamp is still the copy's.
        std::fs::write(fixture.path().join("README.md"), "# pager, changed\n").unwrap();
        assert_ne!(tree_stamp(fixture.path(), dir.path()).unwrap().digest, walked.digest);
        assert_eq!(tree_stamp(fixture.path(), &ws).unwrap().digest, from_copy.digest);
        // Another fixture's copy is not taken for this one.
        let other = tree(&[("README.md", "# pager\n")]);
        assert_ne!(tree_stamp(other.path(), &ws).unwrap().digest, from_copy.digest);
    }

    #[test]
    fn the_store_keeps_maps_written_within_its_lifetime_and_removes_older_files() {
        let store = tempfile::tempdir().unwrap();
        let (fresh, old, stray) =
            (store.path().join("fresh.json"), store.path().join("old.json"), store.path().join(".tmpAbC123"));
        for f in [&fresh, &old, &stray] {
            std::fs::write(f, "{}").unwrap();
        }
        std::fs::create_dir(store.path().join("a-folder")).unwrap();
        let long_ago = std::time::SystemTime::now() - STORED_KEPT - std::time::Duration::from_secs(60);
        for f in [&old, &stray] {
            std::fs::File::options().write(true).open(f).unwrap().set_modified(long_ago).unwrap();
        }
        prune_store(store.path(), STORED_KEPT);
        assert!(fresh.exists(), "a map written within the lifetime stays");
        assert!(!old.exists() && !stray.exists(), "files older than the lifetime go");
        assert!(store.path().join("a-folder").is_dir(), "only files are removed");
        // A store that does not exist yet is nothing to prune.
        prune_store(&store.path().join("missing"), STORED_KEPT);
    }

    #[test]
    fn a_stored_map_is_read_back_only_when_every_check_passes() {
        let fixture = tree(&[("pager.py", PAGER), ("README.md", "Pages of items.\n")]);
        let store = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        for f in ["pager.py", "README.md"] {
            std::fs::copy(fixture.path().join(f), ws.path().join(f)).unwrap();
        }
        let query = ("the stored page size", 400);
        let key = |fixture: &Path| {
            StoredMap::key(fixture, &tree_stamp(fixture, ws.path()).unwrap(), query.0, query.1).unwrap()
        };
        // A fixture written just now is racy: its map is kept in the process, not stored.
        let (stats, view) = fresh_workspace_map(fixture.path(), ws.path(), query.0, query.1, Some(store.path()));
        assert!(stored_map(store.path(), &key(fixture.path()), query.0, query.1).is_none());
        // Outside the racy window it is stored, and read back as it was built.
        let other = tree(&[("pager.py", PAGER), ("README.md", "Pages of items.\n")]);
        let (stored_stats, stored_view) = fresh_map(other.path(), ws.path(), query, Some(store.path()), 0);
        assert_eq!(
            (IndexStats { duration_ms: 0, ..stored_stats.clone() }, &stored_view),
            (IndexStats { duration_ms: 0, ..stats }, &view)
        );
        let path = StoredMap::path(store.path(), &key(other.path()));
        let read = stored_map(store.path(), &key(other.path()), query.0, query.1).expect("stored");
        assert_eq!(read, (stored_stats, stored_view.clone()));
        assert!(!std::fs::read_to_string(&path).unwrap().contains(query.0), "the task is not stored");
        // Another budget, query or fixture is another key; a smaller budget than the view's
        // tokens is refused.
        assert!(stored_map(store.path(), &key(fixture.path()), query.0, query.1).is_none());
        assert!(stored_map(store.path(), &key(other.path()), query.0, stored_view.tokens - 1).is_none());
        // A fixture file rewritten (same size) changes the stamp, so the key.
        let before = key(other.path());
        std::fs::write(other.path().join("README.md"), "Pages of ITEMS.\n").unwrap();
        assert_ne!(key(other.path()), before);
        // An altered or torn file is not trusted.
        let original = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, original.replacen("pager.py", "pagex.py", 1)).unwrap();
        assert!(stored_map(store.path(), &before, query.0, query.1).is_none(), "digest checked");
        std::fs::write(&path, &original[..original.len() / 2]).unwrap();
        assert!(stored_map(store.path(), &before, query.0, query.1).is_none(), "torn");
        std::fs::write(&path, &original).unwrap();
        assert!(stored_map(store.path(), &before, query.0, query.1).is_some());
    }

    #[test]
    fn python_symbols_come_from_the_parser_with_signatures_and_nesting() {
        let d = tree(&[("pkg/pager.py", PAGER)]);
        let index = RepoIndex::build(d.path());
        let syms = symbols_of(&index, "pkg/pager.py");
        let expected: Vec<(u32, String, Option<u32>)> = vec![
            (3, "MAX_PAGE = ...".into(), None),
            (8, "@functools.lru_cache(maxsize=None) def page(items: list, size: int = 10) -> list".into(), None),
            (10, "def clamp(n)".into(), Some(1)),
            (15, "class Pager(Base, metaclass=Meta)".into(), None),
            (16, "class Cursor".into(), Some(3)),
            (20, "@property def total(self) -> int".into(), Some(3)),
            (23, "async def fetch(self, url: str, retries: int = 3) -> bytes".into(), Some(3)),
            (32, "@staticmethod @cached def build(x)".into(), Some(3)),
            (36, "def typed_only()".into(), None),
        ];
        assert_eq!(syms, expected);
        let stats = index.stats();
        assert_eq!(stats.parsers.get("tree-sitter-python"), Some(&1));
        assert_eq!((stats.files, stats.symbols), (1, 9));

        // Methods are indented under their class in the map.
        let view = index.render("fetch the pager", ".", 1000);
        assert!(
            view.text.contains("    15| class Pager(Base, metaclass=Meta)\n    23|   async def fetch("),
            "{}",
            view.text
        );
    }

    /// Names, lines and nesting: what ranking takes from the scan.
    fn outline(symbols: &[Symbol]) -> Vec<(String, u32, Option<u32>)> {
        symbols.iter().map(|s| (s.name.clone(), s.line, s.parent)).collect()
    }

    fn parse(text: &str) -> Vec<Symbol> {
        let mut out = Vec::new();
        python_symbols(&mut python_parser().unwrap(), text, &mut out);
        out
    }

    fn scan(text: &str) -> Vec<Symbol> {
        let mut out = Vec::new();
        python_scan(text, &mut out);
        out
    }

    #[test]
    fn the_line_scan_finds_what_the_parser_finds() {
        assert_eq!(outline(&scan(PAGER)), outline(&parse(PAGER)));
        let signatures: Vec<String> = scan(PAGER).into_iter().map(|s| s.signature).collect();
        assert_eq!(
            signatures,
            [
                "MAX_PAGE = ...",
                "def page(items: list, size: int = 10) -> list",
                "def clamp(n)",
                "class Pager(Base, metaclass=Meta)",
                "class Cursor",
                "def total(self) -> int",
                "async def fetch(self, url: str, retries: int = 3) -> bytes",
                "def build(x)",
                "def typed_only()",
            ]
        );
        // Strings, brackets and continuations hide look-alikes; annotated constants count.
        let tricky = "DOC = \"\"\"\ndef not_a_def():\n\"\"\"\nCALL = f(\n    x,\n)\nLIMIT: int = 3\nx = [\n  1]\nclass A: pass\ndef f(a=\"):\", b={1: 2}) -> Dict[str, int]: return 1\nif A == B:\n    ZED = 1\n";
        assert_eq!(outline(&scan(tricky)), outline(&parse(tricky)));
        let signatures: Vec<String> = scan(tricky).into_iter().map(|s| s.signature).collect();
        assert_eq!(
            signatures,
            [
                "DOC = ...",
                "CALL = ...",
                "LIMIT: int",
                "class A",
                "def f(a=\"):\", b={1: 2}) -> Dict[str, int]",
                "ZED = ..."
            ]
        );

        // Every Python file the project ships: fixtures, benchmarks, scripts.
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut checked = 0;
        for dir in ["fixtures", "benchmarks", "scripts"] {
            for entry in ignore::WalkBuilder::new(root.join(dir)).build().flatten() {
                if entry.path().extension().is_some_and(|e| e == "py") {
                    let text = std::fs::read_to_string(entry.path()).unwrap();
                    assert_eq!(outline(&scan(&text)), outline(&parse(&text)), "{}", entry.path().display());
                    checked += 1;
                }
            }
        }
        assert!(checked > 40, "{checked} files");
    }

    #[test]
    fn a_file_changed_after_the_build_shows_what_was_indexed() {
        let d = tree(&[("pkg/pager.py", PAGER)]);
        let index = RepoIndex::build(d.path());
        std::fs::write(d.path().join("pkg/pager.py"), "def other(): pass\n").unwrap();
        let syms = symbols_of(&index, "pkg/pager.py");
        assert_eq!(syms.len(), 9);
        assert_eq!(
            syms[1],
            (8, "def page(items: list, size: int = 10) -> list".into(), None),
            "the scan's, no decorator"
        );
    }

    /// Everything an index holds of each file, and its graph, for comparing two indexes.
    #[allow(clippy::type_complexity)]
    fn contents(
        index: &RepoIndex,
    ) -> (Vec<(String, Extractor, Vec<Symbol>, Vec<u64>, Vec<u64>, Vec<u64>, Vec<u64>, u64, Option<[u8; 32]>)>, String)
    {
        let files = index
            .files
            .iter()
            .map(|f| {
                let f = f.clone();
                (f.path, f.extractor, f.symbols, f.path_words, f.symbol_words, f.words, f.idents, f.digest, f.content)
            })
            .collect();
        (files, format!("{:?}", index.edges))
    }

    #[test]
    fn an_updated_index_is_the_one_a_fresh_build_makes_and_reuses_the_files_that_did_not_change() {
        let test_file = "from pkg.pager import page, Pager\n\n\ndef test_page():\n    assert page([1]) == [1]\n";
        let d = tree(&[
            ("pkg/pager.py", PAGER),
            ("tests/test_pager.py", test_file),
            ("README.md", "Pages of items: see pkg/pager.py.\n"),
            ("init.sh", "check() {\n  python3 --version\n}\ncheck\n"),
            ("old.py", "def gone():\n    return page([])\n"),
        ]);
        let query = "the pager pages items; Cursor moves to the next page";
        let earlier = RepoIndex::build_updatable(d.path());
        // The render parses the Python files it shows; the update must carry those parses over.
        assert!(earlier.render(query, ".", 2000).files.contains(&"tests/test_pager.py".to_string()));
        // What a session does: edit a file, add one, remove one, and ignore one.
        std::fs::write(d.path().join("pkg/pager.py"), PAGER.replace("helper = 3", "helper = 3\nMIN_PAGE = 1")).unwrap();
        std::fs::write(d.path().join("pkg/cursor.py"), "class Cursor:\n    def next(self, pager): ...\n").unwrap();
        std::fs::remove_file(d.path().join("old.py")).unwrap();
        std::fs::write(d.path().join(".gitignore"), "README.md\n").unwrap();

        let updated = earlier.update(d.path());
        let entry = |index: &RepoIndex, path: &str| index.files.iter().position(|f| f.path == path).unwrap();
        assert!(
            updated.files[entry(&updated, "tests/test_pager.py")].parsed.get().is_some(),
            "an unchanged file keeps the parse an earlier render made"
        );
        assert!(
            updated.files[entry(&updated, "pkg/pager.py")].parsed.get().is_none(),
            "a changed file is indexed anew"
        );
        assert!(!updated.files.iter().any(|f| f.path == "old.py" || f.path == "README.md"));
        let fresh = RepoIndex::build_updatable(d.path());
        assert_eq!(contents(&updated), contents(&fresh));
        assert_eq!(IndexStats { duration_ms: 0, ..updated.stats() }, IndexStats { duration_ms: 0, ..fresh.stats() });
        for (q, scope, budget) in [(query, ".", 2000), (query, "pkg", 2000), ("next cursor", ".", 60), ("", ".", 5000)]
        {
            assert_eq!(updated.render(q, scope, budget), fresh.render(q, scope, budget), "{q:?} under {scope}");
        }
        // And a plain build maps the same.
        assert_eq!(updated.render(query, ".", 2000), RepoIndex::build(d.path()).render(query, ".", 2000));

        // A file changed between a build and its render was shown from the scan, unparsed;
        // once it has the indexed bytes again, an update parses it as a fresh build does.
        let earlier = RepoIndex::build_updatable(d.path());
        std::fs::write(d.path().join("pkg/cursor.py"), "x = 1\n").unwrap();
        let stale = earlier.render("cursor", ".", 2000);
        std::fs::write(d.path().join("pkg/cursor.py"), "class Cursor:\n    def next(self, pager): ...\n").unwrap();
        let updated = earlier.update(d.path());
        assert!(updated.files[entry(&updated, "pkg/cursor.py")].parsed.get().is_none(), "the failed parse is not kept");
        assert_eq!(updated.render("cursor", ".", 2000), RepoIndex::build(d.path()).render("cursor", ".", 2000));
        assert_eq!(stale.files, updated.render("cursor", ".", 2000).files);
        // A one-off index is built again.
        let one_off = RepoIndex::build(d.path());
        assert!(one_off.files.iter().all(|f| f.idents.is_empty() && f.content.is_none()));
        assert_eq!(contents(&one_off.update(d.path())), contents(&RepoIndex::build_updatable(d.path())));
    }

    /// A later session's map is the one a fresh build of its workspace makes, whether it was
    /// built, updated, or found by its files (in the process, or stored for another process,
    /// whatever folder the workspace is in); a file changed is another map.
    #[test]
    fn a_later_sessions_map_is_found_by_its_files_and_is_the_map_a_fresh_build_makes() {
        let files = [("pkg/pager.py", PAGER), ("README.md", "Pages of items: see pkg/pager.py.\n")];
        // A query no other test uses: the process's maps are shared by the tests.
        let (query, budget) = ("later sessions page the stored items of a pager", 700);
        let store = tempfile::tempdir().unwrap();
        let first = tree(&files);
        let fresh = |d: &Path| {
            let index = RepoIndex::build_updatable(d);
            (IndexStats { duration_ms: 0, ..index.stats() }, index.render(query, ".", budget))
        };
        let no_time = |(stats, view, _): &(IndexStats, RepoMapView, Option<RepoIndex>)| {
            (IndexStats { duration_ms: 0, ..stats.clone() }, view.clone())
        };
        let built = later_session_map(None, first.path(), query, budget, Some(store.path()));
        assert_eq!(no_time(&built), fresh(first.path()));
        let earlier = built.2.expect("a map built keeps its index for the next session");
        let key = StoredMap::key_of_files(&Scan::read(first.path()).digest(), query, budget).unwrap();
        assert_eq!(
            stored_map(store.path(), &key, query, budget).map(|(s, v)| (IndexStats { duration_ms: 0, ..s }, v)),
            Some(fresh(first.path())),
            "stored, as built"
        );

        // The same files in another folder: found, and the earlier index is handed on.
        let second = tree(&files);
        let found = later_session_map(Some(earlier), second.path(), query, budget, Some(store.path()));
        assert_eq!(no_time(&found), fresh(second.path()));
        assert!(found.2.is_some_and(|i| i.root == first.path()), "the earlier index, as it was");

        // A file changed: another map, updated from the earlier index, and equal to a fresh build.
        std::fs::write(second.path().join("pkg/cursor.py"), "class Cursor:\n    def next(self, pager): ...\n").unwrap();
        let earlier = RepoIndex::build_updatable(first.path());
        let changed = later_session_map(Some(earlier), second.path(), query, budget, Some(store.path()));
        assert_eq!(no_time(&changed), fresh(second.path()));
        assert_ne!(changed.1, found.1);
        assert!(changed.2.is_some_and(|i| i.root == second.path()));
    }

    #[test]
    fn other_languages_use_the_regex_fallback() {
        let d = tree(&[
            (
                "src/lib.rs",
                "pub struct Store {\n    n: u32,\n}\n\nimpl Store {\n    pub fn get(&self, key: &str) -> Option<u32> {\n        None\n    }\n}\n\npub(crate) enum Kind { A }\ntrait Loader {}\n",
            ),
            (
                "web/app.ts",
                "export class Router {\n  route(path: string): void {\n    if (x) {\n    }\n  }\n}\nexport async function serve(port: number) {\n}\nconst handler = async (req) => {\n};\n",
            ),
            (
                "srv/main.go",
                "package main\n\ntype Server struct {\n}\n\nfunc (s *Server) Handle(w Writer) error {\n}\n\nfunc main() {\n}\n",
            ),
            ("notes.txt", "def not_code(): pass\n"),
        ]);
        let index = RepoIndex::build(d.path());
        let names = |p: &str| symbols_of(&index, p).into_iter().collect::<Vec<_>>();
        assert_eq!(
            names("src/lib.rs"),
            vec![
                (1, "pub struct Store".into(), None),
                (5, "impl Store".into(), None),
                (6, "pub fn get(&self, key: &str) -> Option<u32>".into(), Some(1)),
                (11, "pub(crate) enum Kind { A }".into(), None),
                (12, "trait Loader {}".into(), None),
            ]
        );
        assert_eq!(
            names("web/app.ts"),
            vec![
                (1, "export class Router".into(), None),
                (2, "route(path: string): void".into(), Some(0)),
                (7, "export async function serve(port: number)".into(), None),
                (9, "const handler = async (req) =>".into(), None),
            ]
        );
        assert_eq!(
            names("srv/main.go"),
            vec![
                (3, "type Server struct".into(), None),
                (6, "func (s *Server) Handle(w Writer) error".into(), None),
                (9, "func main()".into(), None),
            ]
        );
        assert!(names("notes.txt").is_empty());
        let parsers = index.stats().parsers;
        assert_eq!(parsers.get("regex"), Some(&3));
        assert_eq!(parsers.get("none"), Some(&1));
    }

    #[test]
    fn secrets_binaries_large_and_ignored_files_never_reach_the_map() {
        let big = "x = 1\n".repeat((MAX_FILE_BYTES as usize) / 6 + 10);
        let d = tree(&[
            ("app.py", "def main(): pass\n"),
            (".env", "OPENAI_API_KEY=sk-canary\n"),
            ("certs/server.pem", "-----BEGIN canary-----\n"),
            ("deploy_key", "canary\n"),
            ("models.toml", "api_key = \"canary\"\n"),
            ("blob.bin", "canary\0\0\0"),
            ("huge.py", &big),
            (".gitignore", "build/\n"),
            ("build/out.py", "def canary_built(): pass\n"),
            (".git/config", "[core] canary\n"),
        ]);
        let index = RepoIndex::build(d.path());
        let stats = index.stats();
        assert_eq!(stats.skipped, 6, "secrets (4), binary, too large");
        assert_eq!(stats.files, 2, "app.py and .gitignore");
        let view = index.render("canary api key env pem deploy", ".", 10_000);
        assert!(
            !view.text.contains("canary") && !view.text.contains("env") && !view.text.contains("pem"),
            "{}",
            view.text
        );
        assert!(!view.text.contains("models.toml") && !view.text.contains("deploy_key"), "{}", view.text);
        assert_eq!(view.files, [".gitignore", "app.py"], "no overlap: path order");
    }

    fn errcat_tree() -> tempfile::TempDir {
        tree(&[
            (
                "errcat/catalog.py",
                "\"\"\"Every user-visible error code and its message.\"\"\"\n\nclass Entry(NamedTuple):\n    template: str\n\nCATALOG = {\n    \"E4271\": Entry(template=\"Disk quota exceeded for {user}\"),\n    \"E5012\": Entry(template=\"Permission denied on {path}\"),\n}\n\ndef message(code):\n    return CATALOG[code].template\n",
            ),
            (
                "errcat/render.py",
                "from .catalog import CATALOG, message\n\ndef render(code, **params):\n    return message(code).format(**params)\n",
            ),
            ("errcat/__init__.py", "from .render import render\n"),
            (
                "quota/disk.py",
                "class DiskQuota:\n    def used(self): ...\n\ndef quota_for(user):\n    return DiskQuota()\n",
            ),
            ("auth/permissions.py", "def check_permission(user, path):\n    return user.admin\n"),
            ("web/views.py", "from errcat import render\n\ndef page(request):\n    return render(\"E1\")\n"),
            ("util/strings.py", "def pad(s, n):\n    return s.ljust(n)\n"),
            ("README.md", "# Service\nRun `svc` to start.\n"),
        ])
    }

    #[test]
    fn the_file_the_query_describes_ranks_first() {
        let d = errcat_tree();
        let index = RepoIndex::build(d.path());
        let view = index.render("quota message for permission errors", ".", 2000);
        assert_eq!(view.files[0], "errcat/catalog.py", "{}", view.text);
        // Its relevant symbol comes before the unrelated ones.
        let catalog = view.text.split("errcat/catalog.py:\n").nth(1).unwrap();
        assert!(catalog.starts_with("    11| def message(code)\n"), "{catalog}");

        // Naming a file puts it first whatever its words.
        let view = index.render("look at util/strings.py", ".", 2000);
        assert_eq!(view.files[0], "util/strings.py");

        // The scope keeps the map inside a folder.
        let view = index.render("quota message for permission errors", "quota", 2000);
        assert_eq!(view.files, ["quota/disk.py"]);
        assert!(view.text.ends_with("[all 1 files shown]\n"), "{}", view.text);
    }

    #[test]
    fn definitions_used_by_relevant_files_rank_above_unrelated_ones() {
        let d = errcat_tree();
        let index = RepoIndex::build(d.path());
        // web/views.py mentions `render` (defined in errcat/render.py) and `errcat` (the package);
        // nothing mentions util/strings.py. With a query only views.py matches, the graph
        // carries relevance to what it uses.
        let view = index.render("request page view", ".", 2000);
        assert_eq!(view.files[0], "web/views.py");
        let pos = |p: &str| view.files.iter().position(|f| f == p).unwrap();
        assert!(pos("errcat/render.py") < pos("util/strings.py"), "{:?}", view.files);
        assert!(pos("errcat/__init__.py") < pos("util/strings.py"), "{:?}", view.files);
    }

    #[test]
    fn the_budget_is_respected_and_the_rest_counted() {
        let files: Vec<(String, String)> = (0..60)
            .map(|i| {
                (
                    format!("pkg/mod{i:02}.py"),
                    format!("class Thing{i}:\n    def run(self, x): ...\n\ndef helper{i}(a, b): ...\n"),
                )
            })
            .collect();
        let refs: Vec<(&str, &str)> = files.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
        let d = tree(&refs);
        let index = RepoIndex::build(d.path());
        for budget in [0, 3, 10, 40, 200, 1500] {
            let view = index.render("thing helper", ".", budget);
            assert!(view.tokens <= budget, "{budget}: {}", view.tokens);
            assert_eq!(view.tokens, estimate(&view.text));
        }
        let view = index.render("thing helper", ".", 200);
        assert!(!view.files.is_empty() && view.files.len() < 60);
        assert!(view.text.ends_with(&format!("[{} more files not shown]\n", 60 - view.files.len())), "{}", view.text);
        let whole = index.render("thing helper", ".", 100_000);
        assert_eq!(whole.files.len(), 60);
        assert!(whole.text.ends_with("[all 60 files shown]\n"));
    }

    #[test]
    fn an_empty_workspace_says_so() {
        let d = tempfile::tempdir().unwrap();
        let view = RepoIndex::build(d.path()).render("anything", ".", 100);
        assert_eq!(view.text, "(no text files to map under `.`)\n");
        assert!(view.files.is_empty());
    }

    #[test]
    fn the_same_workspace_and_query_give_the_same_map() {
        let d = errcat_tree();
        let a = RepoIndex::build(d.path()).render("render a message", ".", 300);
        let b = RepoIndex::build(d.path()).render("render a message", ".", 300);
        assert_eq!(a, b);
        // Files with equal scores keep path order.
        let view = RepoIndex::build(d.path()).render("", ".", 5000);
        let tied: Vec<&String> =
            view.files.iter().filter(|f| f.starts_with("auth/") || f.starts_with("util/")).collect();
        assert_eq!(tied, ["auth/permissions.py", "util/strings.py"]);
    }

    #[test]
    fn identifiers_split_into_words() {
        let words = |s: &str| {
            let mut out = Vec::new();
            for_each_identifier(s, |i| for_each_word(i, |w| out.push(w.to_string())));
            out
        };
        assert_eq!(words("HTTPServerError quota_messages"), ["http", "server", "error", "quota", "message"]);
        assert_eq!(words("the E4271 entries of 42 a"), ["e4271", "entry"]);
        assert_eq!(words("parseV2Header"), ["parse", "v2", "header"]);
        let mut sorted = STOP_WORDS.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, STOP_WORDS, "binary search needs the stop words sorted");
    }

    /// The real HC-Bench case: its prompt finds the catalogue among the package's files.
    #[test]
    fn the_context_3_prompt_finds_the_catalogue() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/context-3");
        let case = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("benchmarks/hc-bench/cases/context-3.yaml"),
        )
        .unwrap();
        let prompt = case.split("prompt: |").nth(1).unwrap().split("step_budget").next().unwrap();
        let view = RepoIndex::build(&root).render(prompt, ".", 1500);
        assert_eq!(view.files[0], "errcat/catalog.py", "{}", view.text);
    }
}
