//! Checkpoint and resume inside a cell.
//!
//! A checkpoint protects the work since the one before against an interruption, so it is sized
//! to that work: after a step, the loop saves only when `--checkpoint-interval` of wall time
//! (default 1 s, [`DEFAULT_INTERVAL`]; zero saves every step) has passed since the last save, or
//! since the cell started or resumed ([`Checkpointer::due`]). With a model whose turns take
//! seconds every step is saved; an oracle or a fast local model saves about once a second
//! instead of after each of its millisecond steps (where the saves were most of a small cell's
//! harness time); a kill redoes at most about the interval and the step under way, which a
//! resume already tolerates (the `resumed` event makes replay discard what came after the
//! checkpoint). What a step not saved may have changed is kept ([`Checkpointer::defer`]) and
//! merged into the next save's [`Changes`], so that save's digests are the workspace's as a walk
//! would find them. A session boundary needs nothing more: the next session's first save looks
//! at everything ([`Checkpointer::next_session`]), and a resume from a checkpoint of an earlier
//! session continues that session.
//!
//! When a step is saved, the loop saves what the rest of the cell is built from
//! (the [`LoopState`]: observations, compactor, working memory, repo map, counters, the files
//! changed and read; the provider's own state; the trace position; the token counters; the
//! elapsed time) and the digests of every file in the workspace, in one of two files beside the
//! trace, `checkpoint/state-1.json` and `checkpoint/state-2.json`, in turn. A `checkpoint` event
//! then names the file and its sha256. The event is written after the file, so the last event
//! always names a complete file; each save overwrites (in place, not synced) the file the last
//! event does *not* name, so a kill in the middle of a write spoils only a file no event names,
//! and the older pair is always there. Not synced: a sync costs more than the rest of a
//! checkpoint, the trace beside it is not synced either, and a file a power loss spoiled fails
//! its sha256 check on resume and is refused. (Before 2026-11-24 each step wrote
//! `checkpoint/step-NNNN.json` by a rename and removed the one before; a resume reads either.)
//!
//! The workspace is recorded as digests (path -> sha256, size, mode). The checkpoint is told
//! what the step changed rather than stating the tree every step ([`Changes`]): after a step
//! none of whose calls could change a file (reads, listings, searches, the map, a delegation,
//! `finish`; no hooks in the spec) the digests are the last ones; after a step whose only
//! writes were the harness's `edit_file`/`write_file`, only the paths those calls named are
//! stated and hashed again ([`Digests::update`], which walks instead when it cannot prove its
//! result is a walk's). A step that ran a command (tests, `run_command`, a hook) walks the
//! workspace. Commands are not watched (inotify): a write through a shared mapping raises no
//! event, where a walk sees the modification time it moves, and a change a checkpoint missed
//! would be undone by a resume that rebuilds the workspace from it. A walk is kept cheap by a
//! stat cache: a file is hashed again only when its size, mtime, ctime or inode changed, or
//! when it changed so recently (50 ms) that the file system's coarse clock could hide a second
//! write, and a folder is listed again only when its own stat moved (or within that window).
//! Every content hashed after the cell started is also kept, once, in an append-only store of
//! the cell (`checkpoint/blobs.pack`, one record per content: a scan's new contents are one
//! write, not a file each; runs before 2026-11-25 wrote `checkpoint/blobs/<sha256>`, which a
//! resume still reads), so a workspace can always be rebuilt: a fresh copy of the fixture, the
//! stored contents over it, the paths the checkpoint does not have removed. A
//! content the first scan found at the same path is not stored: a rebuild has it already (the
//! fixture's copy, or after a resume a content stored before).
//!
//! The first digests of a fresh copy (the baseline: what a rebuild's fresh copy has, so none of
//! it is stored) are taken at the first save, so a cell that never saves never pays for them,
//! and they are not a walk ([`Digests::copy_digests`]): the copy ([`crate::workspace::fresh`])
//! says what it made (every folder with its names, file and symlink, each copy's stat), and a
//! cache of fixture digests, kept by the stat cache's rule (per process, and stored beside the
//! repo maps for later processes, [`StoredDigests`]), gives each copy's digest; only a fixture
//! file no cell has digested (or one changed since) is read, from its copy while the copy's stat
//! shows it unchanged (else a walk hashes it and stores its content). The changes of the steps
//! before the first save are then applied as for any save (nothing, an update of the written
//! paths, or a walk whose stat cache and listings are the copy's, so the files unchanged since
//! the copy are not read).
//! A copy keeps its fixture's modification time, a folder's as a file's, so it is not inside
//! the racy window: any write (any entry added, removed or renamed) moves that time, however
//! soon after the copy, and the walk after the first command neither hashes every fixture file
//! a second time nor lists every copied folder again.
//!
//! A resume ([`resume`]) trusts nothing it did not check: the file must be the one the trace's
//! last `checkpoint` event names (sha256), of this schema, of this run and cell, at the trace
//! position it records (the `state_updated` of its step, ending at the byte length it
//! records), with the token counters the trace folds to there. Then the workspace is checked
//! against the digests and rebuilt when it differs, and checked again. Anything that fails is
//! refused with a reason ([`Refusal`]) and the caller starts the cell over with a fresh trace,
//! keeping the old one beside it ([`abandon`]).
//!
//! Traces stay append-only: what the interrupted process wrote after its last checkpoint stays
//! in the file, and the `resumed` event tells replay to discard it (`crate::replay`).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use serde::{Deserialize, Serialize};

use super::compaction::Compactor;
use super::context::Observation;
use super::memory::WorkingMemory;
use crate::replay::SummaryBuilder;
use crate::trace::{EventBody, TraceWriter};
use crate::util::sha256_hex;

/// Version of the checkpoint file format. A checkpoint of another version is refused (the cell
/// starts over): a checkpoint only ever continues the hcbench that wrote it.
pub const CHECKPOINT_SCHEMA_VERSION: u32 = 1;
/// The wall time from one save of a cell to the next unless `--checkpoint-interval` says
/// otherwise: a model's turn of seconds is saved after every step, a fast one about once a
/// second.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);
/// The cell directory's folder of checkpoint files and stored contents.
pub const DIR: &str = "checkpoint";
/// Contents stored one file each (`blobs/<sha256>`), as runs before 2026-11-25 did: still read.
const BLOBS: &str = "blobs";
/// The contents a cell stored, appended one record each: `<sha256> <size>\n`, the bytes, `\n`.
const PACK: &str = "blobs.pack";
/// A scan's new contents are appended at its end, or as soon as they pass this.
const PACK_WRITE_BYTES: usize = 8 << 20;
/// The two checkpoint files a cell writes in turn: each save overwrites the one the last
/// `checkpoint` event does not name, in place (no new file, no rename, no removal per step).
const SLOTS: [&str; 2] = ["state-1.json", "state-2.json"];
/// The observations, one JSON per line, each written once by the step that made it and named
/// by its sha256 in the checkpoints (appended: one write per step, no file per observation).
const OBSERVATIONS: &str = "observations.jsonl";

/// The loop's state between two steps: what the next context projection and the end of the
/// cell are built from. The loop keeps its working state in this one struct so a checkpoint
/// cannot forget a piece of it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LoopState {
    /// The last step whose `state_updated` was written (0 before the first).
    pub step: u32,
    /// True when that step ran `finish`: the loop is over and scoring is next.
    pub finished: bool,
    /// Unusable replies in a row, against `max_invalid_replies`.
    pub invalid_in_a_row: u32,
    /// The repo map injected into the context, ranked once per cell.
    pub repo_map: Option<String>,
    pub memory: Option<WorkingMemory>,
    /// In a checkpoint file this is empty: the observations are stored once each, as lines of
    /// `observations.jsonl`, and named by [`Checkpoint::observations`], so a step writes only
    /// its own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub observations: Vec<Observation>,
    pub compactor: Compactor,
    pub files_modified: Vec<String>,
    /// Per path, the step of its first successful read (the verifier's `first_read_step`).
    pub first_reads: BTreeMap<String, u32>,
    /// In a multi-session cell: which session this is and what the sessions before it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionProgress>,
}

/// Where a multi-session cell stands: the session the loop is in and what the finished ones
/// left (`agent::sessions`). The loop's state is one session's; this is what carries over, so
/// a resume can continue inside a later session without running the earlier ones again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionProgress {
    /// The session (1-based).
    pub index: u32,
    /// The trace's step number of its first turn.
    pub first_step: u32,
    /// Per path, the step of its first read in any session so far.
    pub first_reads: BTreeMap<String, u32>,
    /// Per finished session: (features passing their hidden check, features marked passing).
    pub finished: Vec<(usize, usize)>,
}

impl SessionProgress {
    /// Before session 1.
    pub fn first() -> SessionProgress {
        SessionProgress { index: 1, first_step: 1, first_reads: BTreeMap::new(), finished: Vec::new() }
    }
}

/// Where the trace stood when a checkpoint was taken.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TracePosition {
    /// Seq of the step's `state_updated`, the last event before the checkpoint.
    pub seq: u64,
    /// Length of the trace file after that event.
    pub bytes: u64,
}

/// One workspace path as a checkpoint records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Entry {
    File { sha256: String, size: u64, mode: u32 },
    Symlink { target: String },
    Dir,
}

/// The checkpoint file (`checkpoint/state-N.json`). Borrowed when written, owned when read.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Checkpoint<'a> {
    pub schema_version: u32,
    pub run_id: String,
    pub cell_id: String,
    pub step: u32,
    pub trace: TracePosition,
    /// Cell wall-clock time used so far; a resumed cell's `elapsed_ms` continues from it.
    pub elapsed_ms: u64,
    /// The token counters the trace folds to at the checkpoint (checked on resume).
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// [`crate::model::Provider::saved_state`].
    #[serde(default)]
    pub provider: Option<serde_json::Value>,
    pub state: Cow<'a, LoopState>,
    /// The state's observations, in order, as the sha256 of each one's JSON, a line of
    /// `observations.jsonl` (before the log, a file under `blobs/`). Observations are only ever
    /// appended, so each is written once, by the step that made it, and the file stays small
    /// however long the cell runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub observations: Vec<String>,
    /// Every path of the workspace, relative, with `/` separators.
    pub workspace: Cow<'a, BTreeMap<String, Entry>>,
}

/// What a step may have changed in the workspace, as the loop knows from the calls it ran:
/// what the checkpoint after the step must look at ([`Digests::current`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Changes {
    /// No call could change a file (reads, listings, searches, the map, a delegation,
    /// `finish`).
    #[default]
    None,
    /// Only the harness's own file tools wrote, at these paths (as the calls name them).
    Paths(Vec<String>),
    /// A command ran (a test run, `run_command`, a hook) and may have changed anything.
    Anything,
}

impl Changes {
    /// Adds what `call`, which ran (or was let through to run), may have changed.
    pub fn add(&mut self, call: &crate::action::Call) {
        use crate::action::Call;
        match call {
            Call::EditFile { path, .. } | Call::WriteFile { path, .. } => match self {
                Changes::None => *self = Changes::Paths(vec![path.clone()]),
                Changes::Paths(paths) => paths.push(path.clone()),
                Changes::Anything => {}
            },
            call if call.tool().may_change_files() => *self = Changes::Anything,
            _ => {}
        }
    }

    /// Adds what a later step may have changed: the paths of both, or anything when either
    /// may have changed anything. The changes of steps saved by no checkpoint accumulate so,
    /// and the next save looks at all of them.
    pub fn merge(&mut self, later: Changes) {
        match (&mut *self, later) {
            (Changes::Anything, _) | (_, Changes::None) => {}
            (_, Changes::Anything) => *self = Changes::Anything,
            (Changes::None, later) => *self = later,
            (Changes::Paths(paths), Changes::Paths(more)) => {
                for path in more {
                    if !paths.contains(&path) {
                        paths.push(path);
                    }
                }
            }
        }
    }
}

/// Why a checkpoint could not be used, for the `resume_refused` event and the terminal.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal(pub String);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn refuse<T>(reason: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal(reason.into()))
}

/// What one stat of a file says; a cached digest stands while it is unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stat {
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
    ino: u64,
    mode: u32,
}

impl Stat {
    fn of(st: &rustix::fs::Stat) -> Stat {
        Stat {
            size: u64::try_from(st.st_size).unwrap_or(0),
            mtime_ns: i128::from(st.st_mtime) * 1_000_000_000 + i128::from(st.st_mtime_nsec),
            ctime_ns: i128::from(st.st_ctime) * 1_000_000_000 + i128::from(st.st_ctime_nsec),
            ino: st.st_ino,
            mode: st.st_mode & 0o7777,
        }
    }
}

/// A file written this close to its hashing may be written again within the same time stamp:
/// file systems stamp files from a coarse clock (a jiffy, up to 10 ms), so a second write in
/// the same tick would leave the stat unchanged. Its cached digest is not trusted next time;
/// a file older than this cannot be written again without its mtime moving on.
const RACY_NS: i128 = 50_000_000;

/// The workspace's digests with a stat cache, and the store of contents seen since the start.
pub struct Digests {
    root: PathBuf,
    cache: HashMap<String, (Stat, bool, String)>,
    /// Per folder (by workspace path), its names as last read.
    listings: HashMap<String, Listing>,
    /// `checkpoint/blobs.pack`, its length in whole records, and its handle once appended to.
    pack_path: PathBuf,
    pack_len: u64,
    pack: Option<std::fs::File>,
    /// Records of this scan, appended in one write at its end (before the checkpoint file), or
    /// sooner when they pass [`PACK_WRITE_BYTES`].
    unwritten: Vec<u8>,
    unwritten_shas: HashSet<String>,
    /// Contents in the pack (or, from older runs, under `blobs/`).
    stored: HashSet<String>,
    /// When false (the first scan of a fresh workspace, a verification), contents are not kept.
    keep: bool,
    /// Per path, the content the first scan found there: a rebuild restores it without a blob.
    baseline: HashMap<String, String>,
    /// What the last scan found, for a checkpoint after a step that changed no file.
    last: Option<BTreeMap<String, Entry>>,
    /// For the first scan of a fresh copy: what the copy made ([`crate::workspace::take_copied`]).
    copied: Option<crate::workspace::Copied>,
    /// Files read and hashed so far (the tests' measure of what a scan had to read).
    hashed: usize,
    /// Walks of the whole workspace so far (the tests' measure of what an update saved).
    walks: usize,
    /// Fixture digests this workspace's first scan added to the process's cache.
    learned: usize,
}

/// The digests of fixture files, by their path, with the stat each was taken under: the fixture
/// cache of the first digests. Every cell of a fixture copies the same files; once one cell has
/// hashed a copy, the others take its digest while the fixture file's stat has not moved (the
/// stat cache's rule, applied to the fixture: an entry is made only from a copy of a file that
/// was settled before its copy began). One per process, as large as the fixtures' files.
static FIXTURE_DIGESTS: std::sync::LazyLock<std::sync::Mutex<HashMap<PathBuf, (Stat, String)>>> =
    std::sync::LazyLock::new(Default::default);

fn fixture_digests() -> std::sync::MutexGuard<'static, HashMap<PathBuf, (Stat, String)>> {
    FIXTURE_DIGESTS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The fixture digests kept for later processes, one file per fixture in the store (the
/// folder of stored repo maps, `.repo-maps` beside the runs' workspaces):
/// `fixture-digests-<sha256 of the fixture's path>.json`. Every cell of a one-epoch matrix
/// copies a fixture no earlier cell of its process copied, so without them every first scan
/// read and hashed every file of its copy. An entry is used only as one the process made is:
/// for a copy of a fixture file that was settled before the copy began and whose stat (size,
/// modification and change times, inode, mode) is the one stored, on the same device as when it
/// was stored. A change time cannot be set back, so a fixture file changed since, however its
/// size and modification time were put back, is read and hashed. A file that does not parse,
/// is of another format or of another fixture is ignored (and written again by the next cell
/// that hashes something).
#[derive(Serialize, Deserialize)]
struct StoredDigests {
    format: u32,
    /// The fixture's path, as the cells name it.
    fixture: PathBuf,
    /// The device the fixture is on.
    dev: u64,
    /// Per fixture file, by its path relative to the fixture.
    files: BTreeMap<String, StoredDigest>,
}

#[derive(Serialize, Deserialize)]
struct StoredDigest {
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
    ino: u64,
    mode: u32,
    sha256: String,
}

/// The fixtures whose stored digests this process has read.
static STORED_LOADED: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

impl StoredDigests {
    /// Version of this file's layout.
    const FORMAT: u32 = 1;

    fn path(store: &Path, fixture: &Path) -> PathBuf {
        let name = sha256_hex(fixture.as_os_str().as_bytes());
        store.join(format!("fixture-digests-{name}.json"))
    }

    fn dev(fixture: &Path) -> Option<u64> {
        rustix::fs::stat(fixture).ok().map(|st| st.st_dev)
    }

    /// Puts the digests stored for `fixture` into the process's cache, once per process and
    /// fixture (an entry the process has already is kept).
    fn load(store: &Path, fixture: &Path) {
        {
            let mut loaded = STORED_LOADED.lock().unwrap_or_else(|e| e.into_inner());
            if loaded.iter().any(|f| f == fixture) {
                return;
            }
            loaded.push(fixture.to_path_buf());
        }
        let Ok(bytes) = std::fs::read(Self::path(store, fixture)) else { return };
        let Ok(stored) = serde_json::from_slice::<StoredDigests>(&bytes) else { return };
        if stored.format != Self::FORMAT || stored.fixture != fixture || Self::dev(fixture) != Some(stored.dev) {
            return;
        }
        let mut cache = fixture_digests();
        for (rel, d) in stored.files {
            let stat = Stat {
                size: d.size,
                mtime_ns: i128::from(d.mtime_ns),
                ctime_ns: i128::from(d.ctime_ns),
                ino: d.ino,
                mode: d.mode,
            };
            cache.entry(fixture.join(rel)).or_insert((stat, d.sha256));
        }
    }

    /// Writes what the process's cache holds of `fixture`'s files, atomically.
    fn store(store: &Path, fixture: &Path) -> io::Result<()> {
        let Some(dev) = Self::dev(fixture) else { return Ok(()) };
        let files = fixture_digests()
            .iter()
            .filter_map(|(path, (st, sha))| {
                let rel = path.strip_prefix(fixture).ok()?.to_str()?.to_string();
                let d = StoredDigest {
                    size: st.size,
                    mtime_ns: i64::try_from(st.mtime_ns).ok()?,
                    ctime_ns: i64::try_from(st.ctime_ns).ok()?,
                    ino: st.ino,
                    mode: st.mode,
                    sha256: sha.clone(),
                };
                Some((rel, d))
            })
            .collect();
        let stored = StoredDigests { format: Self::FORMAT, fixture: fixture.to_path_buf(), dev, files };
        std::fs::create_dir_all(store)?;
        crate::util::write_atomic_unsynced(&Self::path(store, fixture), &serde_json::to_vec(&stored)?)
    }
}

impl Digests {
    /// Digests of `ws`, storing contents in `cell_dir/checkpoint/blobs.pack`. What the pack
    /// holds already (a resumed cell's) is read; a last record cut short (a kill in the middle
    /// of an append, of contents no checkpoint names yet) is cut off, so the next append starts
    /// a record of its own.
    pub fn new(ws: &Path, cell_dir: &Path) -> Digests {
        let mut stored: HashSet<String> = std::fs::read_dir(cell_dir.join(DIR).join(BLOBS))
            .map(|d| d.filter_map(Result::ok).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        let pack_path = cell_dir.join(DIR).join(PACK);
        let mut pack_len = 0;
        if let Ok(bytes) = std::fs::read(&pack_path) {
            let (records, whole) = pack_records(&bytes);
            stored.extend(records.into_keys().map(str::to_string));
            pack_len = whole as u64;
            if whole < bytes.len() {
                let cut = std::fs::OpenOptions::new().write(true).open(&pack_path).and_then(|f| f.set_len(pack_len));
                if let Err(e) = cut {
                    tracing::warn!("cannot cut {} to its last whole record: {e}", pack_path.display());
                }
            }
        }
        Digests {
            root: ws.to_path_buf(),
            cache: HashMap::new(),
            listings: HashMap::new(),
            pack_path,
            pack_len,
            pack: None,
            unwritten: Vec::new(),
            unwritten_shas: HashSet::new(),
            stored,
            keep: false,
            baseline: HashMap::new(),
            last: None,
            copied: None,
            hashed: 0,
            walks: 0,
            learned: 0,
        }
    }

    /// The first digests are taken from what [`crate::workspace::fresh`] made in `ws`, if it
    /// knows, and if the copy's paths name every file as it is (all its names UTF-8): see
    /// [`Digests::copy_digests`].
    fn after_copy(mut self, ws: &Path) -> Digests {
        self.copied = crate::workspace::take_copied(ws).filter(|c| c.names_utf8);
        self
    }

    /// Keeps the content `sha` for the pack unless it is stored already (written at the end
    /// of the scan, [`Digests::write_pack`], or now when a scan's new contents grow large: a
    /// scan reads one file at a time, and its records are not held in memory all together).
    fn keep_blob(&mut self, sha: &str, bytes: &[u8]) -> io::Result<()> {
        if self.stored.contains(sha) || self.unwritten_shas.contains(sha) {
            return Ok(());
        }
        self.unwritten.extend_from_slice(format!("{sha} {}\n", bytes.len()).as_bytes());
        self.unwritten.extend_from_slice(bytes);
        self.unwritten.push(b'\n');
        self.unwritten_shas.insert(sha.to_string());
        if self.unwritten.len() > PACK_WRITE_BYTES {
            self.write_pack()?;
        }
        Ok(())
    }

    /// Appends the scan's new contents to the pack in one write: one file per cell, opened
    /// once, instead of a temporary file, a write and a rename per content (a git commit makes
    /// five to ten). Not synced (see the module's doc). A failed append is cut back off, so a
    /// later one never follows a broken record.
    fn write_pack(&mut self) -> io::Result<()> {
        if self.unwritten.is_empty() {
            return Ok(());
        }
        let written = self.append_pack();
        let records = std::mem::take(&mut self.unwritten);
        let shas = std::mem::take(&mut self.unwritten_shas);
        match written {
            Ok(()) => {
                self.pack_len += records.len() as u64;
                self.stored.extend(shas);
                Ok(())
            }
            Err(e) => {
                if let Some(pack) = self.pack.take() {
                    let _ = pack.set_len(self.pack_len);
                }
                Err(e)
            }
        }
    }

    fn append_pack(&mut self) -> io::Result<()> {
        if self.pack.is_none() {
            self.pack =
                Some(open_in_made_folder(&self.pack_path, std::fs::OpenOptions::new().create(true).append(true))?);
        }
        self.pack.as_mut().expect("opened above").write_all(&self.unwritten)
    }

    /// Every path of the workspace now, by a walk. Files whose stat changed since the last scan
    /// are hashed again and, once the baseline is taken, their contents kept. (The first
    /// digests of a fresh copy are no walk: [`Digests::current`] takes them from the copy.)
    pub fn scan(&mut self) -> io::Result<BTreeMap<String, Entry>> {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i128);
        let root = rustix::fs::open(&self.root, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
        let mut out = BTreeMap::new();
        self.walks += 1;
        // The workspace's own folder is always listed (it is where the agent writes most).
        self.walk(root.as_fd(), OsStr::new(""), "", None, now, &mut out)?;
        self.write_pack()?;
        self.cache.retain(|path, _| out.contains_key(path));
        self.listings.retain(|path, _| matches!(out.get(path), Some(Entry::Dir)));
        // From here on, every new content is one a restore may need.
        self.keep = true;
        Ok(out)
    }

    /// The first digests of a copy, from what the copy made ([`crate::workspace::Copied`]) rather
    /// than by walking it: its folders, symlinks and files, each file's stat as the copy left
    /// it. They become the baseline (what a rebuild's fresh copy has) and the stat cache and
    /// listings the next walk starts from. A file's digest is its fixture file's when the
    /// process (or the store, [`StoredDigests`]) has it for that file's stat and the file was
    /// settled before the copy began; otherwise the copy is read and hashed, and the digest kept
    /// for the fixture's next cells.
    ///
    /// `untouched`: nothing has run in the workspace since the copy (a rebuild), so a copy is
    /// read as it is. Otherwise they are taken at a cell's first save, after its first steps,
    /// and a copy is read only while its stat is still the copy's and its modification time
    /// its fixture file's, settled before the copy began (a write since would have moved it,
    /// as below). A copy that fails this is left out of the baseline and the cache, and the
    /// result is None: the caller walks, which hashes that file and stores its content. When
    /// every copy holds, the result is the workspace as the copy made it, which is the
    /// workspace now if nothing changed it since.
    ///
    /// A copied file or folder has its fixture's modification time, long past: any write to
    /// the file, and any entry added, removed or renamed in the folder, moves it, however soon
    /// after the copy. So a copy's stat (and a copied folder's listing) is trusted from here on
    /// if that time is outside the racy window, though its change time, the copy's, is recent
    /// (only a change that also set that exact modification time back within the clock tick of
    /// the copy would go unseen).
    fn copy_digests(
        &mut self,
        copied: crate::workspace::Copied,
        untouched: bool,
    ) -> io::Result<Option<BTreeMap<String, Entry>>> {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i128);
        let root = rustix::fs::open(&self.root, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
        let root = root.as_fd();
        // The baseline is what this takes: any content found later (also by a walk after a
        // failure here) is one a rebuild may need.
        self.keep = true;
        let mut out = BTreeMap::new();
        let mut whole = true;
        let started = copied.started.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i128);
        let settled_before_copy = |st: &Stat| started - st.mtime_ns.max(st.ctime_ns) > RACY_NS;
        for (rel, folder) in copied.folders {
            let (stat, source) = (Stat::of(&folder.stat), Stat::of(&folder.source_stat));
            // The workspace's own folder is always listed (as by a walk).
            if rel.is_empty() {
                continue;
            }
            let settled =
                stat.mtime_ns == source.mtime_ns && settled_before_copy(&source) && now - stat.mtime_ns > RACY_NS;
            self.listings.insert(rel.clone(), Listing { stat, settled, names: folder.names.into() });
            out.insert(rel, Entry::Dir);
        }
        for (rel, target) in copied.symlinks {
            out.insert(rel, Entry::Symlink { target: target.to_string_lossy().into_owned() });
        }
        for (rel, file) in copied.files {
            let (stat, source) = (Stat::of(&file.stat), Stat::of(&file.source_stat));
            let usable = settled_before_copy(&source);
            let known = usable
                .then(|| fixture_digests().get(&file.source).filter(|(st, _)| *st == source).map(|(_, s)| s.clone()))
                .flatten();
            let sha = match known {
                Some(sha) => sha,
                None => {
                    let resolve = rustix::fs::ResolveFlags::BENEATH | rustix::fs::ResolveFlags::NO_SYMLINKS;
                    // Non-blocking: what is there now may be a fifo the agent made.
                    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC;
                    let fd = match rustix::fs::openat2(root, &rel, flags, Mode::empty(), resolve) {
                        Ok(fd) => fd,
                        Err(e) if untouched => return Err(e.into()),
                        Err(_) => {
                            whole = false;
                            continue;
                        }
                    };
                    // The copy as it was made: its stat unmoved, and a modification time (its
                    // fixture file's, settled before the copy) that any write since would
                    // have moved.
                    let still_the_copy = untouched
                        || (usable
                            && stat.mtime_ns == source.mtime_ns
                            && rustix::fs::fstat(&fd).is_ok_and(|st| Stat::of(&st) == stat));
                    if !still_the_copy {
                        whole = false;
                        continue;
                    }
                    let mut bytes = Vec::with_capacity(usize::try_from(stat.size).unwrap_or(0).saturating_add(1));
                    std::fs::File::from(fd).take(u64::MAX).read_to_end(&mut bytes)?;
                    self.hashed += 1;
                    let sha = sha256_hex(&bytes);
                    if usable {
                        fixture_digests().insert(file.source, (source, sha.clone()));
                        self.learned += 1;
                    }
                    sha
                }
            };
            self.baseline.insert(rel.clone(), sha.clone());
            let settled = stat.mtime_ns == source.mtime_ns && now - stat.mtime_ns > RACY_NS;
            self.cache.insert(rel.clone(), (stat, settled, sha.clone()));
            out.insert(rel, Entry::File { sha256: sha, size: stat.size, mode: stat.mode });
        }
        Ok(whole.then_some(out))
    }

    /// The digests of a copy nothing has run in since it was made (a rebuild's): from what the
    /// copy made when it says, else by a walk. Nothing is stored: it is all the fixture's.
    fn of_untouched_copy(mut self) -> io::Result<BTreeMap<String, Entry>> {
        match self.copied.take() {
            Some(copied) => self
                .copy_digests(copied, true)?
                .ok_or_else(|| io::Error::other("a copy nothing has run in is taken whole")),
            None => self.scan(),
        }
    }

    /// The workspace now, from what the steps are known to have changed since the last call:
    /// nothing (the last call's digests as they are), only the paths the harness's own file
    /// tools wrote (those paths stated and hashed again, [`Digests::update`]), or anything (a
    /// new [`Digests::scan`]). Without an earlier call's digests, or when an update cannot
    /// prove its result equal to a walk's, it scans. What it returns is kept for the next call.
    ///
    /// The first call of a fresh copy's digests starts from what the copy made
    /// ([`Digests::copy_digests`]), then applies `changes`, which are everything since the copy.
    pub fn current(&mut self, changes: &Changes) -> io::Result<&BTreeMap<String, Entry>> {
        if let Some(copied) = self.copied.take() {
            self.last = self.copy_digests(copied, false)?;
        }
        let known = match changes {
            _ if self.last.is_none() => false,
            Changes::None => true,
            Changes::Paths(paths) => self.update(paths)?,
            Changes::Anything => false,
        };
        if !known {
            self.last = Some(self.scan()?);
        }
        Ok(self.last.as_ref().expect("set above"))
    }

    /// Brings the last digests up to date after a step whose only writes were the harness's
    /// file tools' (`edit_file`, `write_file`) at `paths`, as the calls named them, without a
    /// walk: each path is followed from the workspace's root one name at a time, stated
    /// without following links, as the walk states it; a folder the write made on the way is
    /// added, and the file is hashed again unless its stat is the cached one. Those tools write
    /// one regular file beneath the root and make the missing folders above it, nothing else,
    /// so every other entry is as the last digests have it. A call that failed is named all the
    /// same: a failed write may have made folders or cut the file short.
    ///
    /// False (the caller walks) for anything this cannot prove to be what a walk would find: a
    /// path that is not plain (`..`, absolute, empty), a name on the way that is a symlink or no
    /// longer a folder (a write may have gone through a symlink to another path of the
    /// workspace), a last name that is a symlink, a folder or a file with another hard link
    /// (written, it changes another path too), and an entry the digests had that is gone.
    fn update(&mut self, paths: &[String]) -> io::Result<bool> {
        let Some(mut entries) = self.last.take() else { return Ok(false) };
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i128);
        let root = rustix::fs::open(&self.root, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
        for path in paths {
            if !self.update_one(root.as_fd(), path, now, &mut entries)? {
                return Ok(false);
            }
        }
        self.write_pack()?;
        self.last = Some(entries);
        Ok(true)
    }

    /// One path of [`Digests::update`]; false when a walk is needed.
    fn update_one(
        &mut self,
        root: BorrowedFd<'_>,
        path: &str,
        now: i128,
        entries: &mut BTreeMap<String, Entry>,
    ) -> io::Result<bool> {
        let names: Vec<&str> = path.split('/').filter(|n| !n.is_empty() && *n != ".").collect();
        if path.starts_with('/') || names.is_empty() || names.contains(&"..") {
            return Ok(false);
        }
        let mut folder: Option<rustix::fd::OwnedFd> = None;
        for (i, name) in names.iter().enumerate() {
            let rel = names[..=i].join("/");
            let dir = folder.as_ref().map_or(root, |f| f.as_fd());
            let st = match rustix::fs::statat(dir, *name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                // Not there: the write failed before it made this name; below it is nothing
                // either. Unless the digests had it: then something removed it.
                Err(rustix::io::Errno::NOENT) => return Ok(!entries.contains_key(&rel)),
                Err(e) => return Err(e.into()),
            };
            let last = i + 1 == names.len();
            match (FileType::from_raw_mode(st.st_mode), last) {
                (FileType::Directory, false) => {
                    match entries.get(&rel) {
                        Some(Entry::Dir) => {}
                        // A folder the write made: nothing is in it but what the step's writes
                        // put there, and each of those is one of the paths.
                        None => {
                            entries.insert(rel, Entry::Dir);
                        }
                        Some(_) => return Ok(false),
                    }
                    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
                    folder = Some(rustix::fs::openat(dir, *name, flags, Mode::empty())?);
                }
                (FileType::RegularFile, true) if st.st_nlink == 1 => {
                    if !matches!(entries.get(&rel), None | Some(Entry::File { .. })) {
                        return Ok(false);
                    }
                    let stat = Stat::of(&st);
                    let sha = match self.cache.get(&rel) {
                        Some((cached, true, sha)) if *cached == stat => sha.clone(),
                        _ => {
                            let bytes = read_at(dir, OsStr::new(name), stat.size)?;
                            self.hashed += 1;
                            let sha = sha256_hex(&bytes);
                            if self.baseline.get(&rel) != Some(&sha) {
                                self.keep_blob(&sha, &bytes)?;
                            }
                            // Trusted by a later walk on the same rule as a file it hashed.
                            let settled = now - stat.mtime_ns.max(stat.ctime_ns) > RACY_NS;
                            self.cache.insert(rel.clone(), (stat, settled, sha.clone()));
                            sha
                        }
                    };
                    entries.insert(rel, Entry::File { sha256: sha, size: stat.size, mode: stat.mode });
                }
                _ => return Ok(false),
            }
        }
        Ok(true)
    }

    /// One folder of the walk: `sub`, relative to the open folder `base` ("" for `base`
    /// itself), whose workspace path is `prefix`, stated (before it is listed) as `stat`.
    ///
    /// Every name is opened or stated relative to an open folder (`openat`, `fstatat`), never
    /// by its whole path: resolving `$TMPDIR/hcbench-workspaces/<run>/<cell>/.git/objects/ab/..`
    /// from the root again for every folder and file was most of a walk's time. A folder whose
    /// stat is the one its listing was read under, and settled (the racy window, as for a
    /// file's digest), has the same names: adding, removing or renaming an entry moves its mtime
    /// and ctime, and replacing the folder changes its inode. Its listing is reused and it is
    /// not opened; its entries are stated by their path from `base` instead. In a git repository
    /// (`.git/objects/` has a folder per object prefix, and a commit touches few of them) that
    /// saves the open, the reads of the listing and the close of most folders at every step.
    /// A folder is opened with `O_NOFOLLOW` and every entry stated without following links, so a
    /// symlink put in a folder's place is recorded as the symlink it is, never followed.
    fn walk(
        &mut self,
        base: BorrowedFd<'_>,
        sub: &OsStr,
        prefix: &str,
        stat: Option<Stat>,
        now: i128,
        out: &mut BTreeMap<String, Entry>,
    ) -> io::Result<()> {
        let reused = match (stat, self.listings.get(prefix)) {
            (Some(st), Some(l)) if l.settled && l.stat == st => Some(l.names.clone()),
            _ => None,
        };
        let listed_now = reused.is_none();
        let mut opened: Option<rustix::fs::Dir> = None;
        let (dir, from, names) = match reused {
            Some(names) => (base, sub, names),
            None => {
                let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
                let here = if sub.is_empty() { OsStr::new(".") } else { sub };
                let fd = rustix::fs::openat(base, here, flags, Mode::empty())?;
                // Owns the descriptor (`Dir::read_from` would open the folder a second time).
                let mut listing = rustix::fs::Dir::new(fd)?;
                let mut names = Vec::new();
                while let Some(entry) = listing.read() {
                    // Kept as the bytes they are: a name that is not UTF-8 is still stated and
                    // read by its own name (the workspace path records it lossily).
                    let name = OsStr::from_bytes(entry?.file_name().to_bytes()).to_os_string();
                    if name != "." && name != ".." {
                        names.push(name);
                    }
                }
                let names: std::sync::Arc<[OsString]> = names.into();
                if let Some(st) = stat {
                    let settled = now - st.mtime_ns.max(st.ctime_ns) > RACY_NS;
                    self.listings.insert(prefix.to_string(), Listing { stat: st, settled, names: names.clone() });
                }
                (opened.insert(listing).fd()?, OsStr::new(""), names)
            }
        };
        for name in names.iter() {
            let rel = match prefix {
                "" => name.to_string_lossy().into_owned(),
                _ => format!("{prefix}/{}", name.to_string_lossy()),
            };
            let at: Cow<'_, OsStr> = if from.is_empty() {
                Cow::Borrowed(name.as_os_str())
            } else {
                let mut joined = from.to_os_string();
                joined.push("/");
                joined.push(name);
                Cow::Owned(joined)
            };
            let st = match rustix::fs::statat(dir, &*at, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                // Gone since the listing was read (a listing read in this scan: a reused one's
                // folder has not changed): what is not there is not recorded.
                Err(e) if e == rustix::io::Errno::NOENT && listed_now => continue,
                Err(e) => return Err(e.into()),
            };
            let stat = Stat::of(&st);
            match FileType::from_raw_mode(st.st_mode) {
                FileType::Symlink => {
                    let target = rustix::fs::readlinkat(dir, &*at, Vec::new())?;
                    out.insert(rel, Entry::Symlink { target: target.to_string_lossy().into_owned() });
                }
                FileType::Directory => {
                    out.insert(rel.clone(), Entry::Dir);
                    self.walk(dir, &at, &rel, Some(stat), now, out)?;
                }
                FileType::RegularFile => {
                    let sha = match self.cache.get(&rel) {
                        Some((cached, true, sha)) if *cached == stat => sha.clone(),
                        _ => {
                            let bytes = read_at(dir, &at, stat.size)?;
                            self.hashed += 1;
                            let sha = sha256_hex(&bytes);
                            if self.keep && self.baseline.get(&rel) != Some(&sha) {
                                self.keep_blob(&sha, &bytes)?;
                            }
                            if !self.keep {
                                self.baseline.insert(rel.clone(), sha.clone());
                            }
                            // Trusted once its last change, of either time, is outside the
                            // racy window.
                            let settled = now - stat.mtime_ns.max(stat.ctime_ns) > RACY_NS;
                            self.cache.insert(rel.clone(), (stat, settled, sha.clone()));
                            sha
                        }
                    };
                    out.insert(rel, Entry::File { sha256: sha, size: stat.size, mode: stat.mode });
                }
                // Sockets, fifos and devices are not the agent's work; a rebuild has none.
                _ => {}
            }
        }
        Ok(())
    }
}

/// A folder's names, as read under its stat (see [`Digests::walk`]).
struct Listing {
    stat: Stat,
    settled: bool,
    names: std::sync::Arc<[OsString]>,
}

/// The whole of the file `name` in the open folder `dir` (`size` is its stat's, a hint).
/// Opens `path` with `options`, making its folder first when it is not there yet (the
/// checkpoint folder is made by the first file a cell writes in it).
fn open_in_made_folder(path: &Path, options: &std::fs::OpenOptions) -> io::Result<std::fs::File> {
    match options.open(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            std::fs::create_dir_all(path.parent().expect("a checkpoint file has a folder"))?;
            options.open(path)
        }
        other => other,
    }
}

fn read_at(dir: BorrowedFd<'_>, name: &OsStr, size: u64) -> io::Result<Vec<u8>> {
    let fd = rustix::fs::openat(dir, name, OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty())?;
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0).saturating_add(1));
    // Through `Take`, whose `read_to_end` reads into the capacity given: `File`'s own would
    // stat the file again for a size the caller knows. Unbounded, so a file that grew since
    // its stat is read whole all the same.
    std::fs::File::from(fd).take(u64::MAX).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The whole records of a pack (`blobs.pack`): by sha256, where its bytes are; and the length
/// of the records that are whole. Reading stops at the first record that is not (a last one cut
/// short by a kill).
fn pack_records(pack: &[u8]) -> (HashMap<&str, std::ops::Range<usize>>, usize) {
    let mut records = HashMap::new();
    let mut at = 0;
    while let Some(nl) = pack[at..].iter().position(|b| *b == b'\n') {
        let header = std::str::from_utf8(&pack[at..at + nl]).ok().and_then(|h| h.split_once(' '));
        let Some((sha, size)) = header.and_then(|(sha, n)| Some((sha, n.parse::<usize>().ok()?))) else { break };
        let start = at + nl + 1;
        let end = start.saturating_add(size);
        if end >= pack.len() || pack[end] != b'\n' {
            break;
        }
        records.insert(sha, start..end);
        at = end + 1;
    }
    (records, at)
}

/// A checkpoint written, not yet named by its event.
pub struct Saved {
    /// Relative to the cell directory.
    pub path: String,
    pub sha256: String,
    pub bytes: u64,
    pub duration_us: u64,
}

/// Writes a cell's checkpoints.
pub struct Checkpointer {
    cell_dir: PathBuf,
    digests: Digests,
    /// The sha256 of each observation stored so far, in order.
    observed: Vec<String>,
    /// The observations log, open for appending once the first observation is written.
    log: Option<std::fs::File>,
    /// Observations in the log, by sha256 (one line each, however often they recur).
    logged: HashSet<String>,
    /// The file of the last checkpoint whose event was written.
    committed: Option<PathBuf>,
    /// The file written last, until its event is.
    pending: Option<PathBuf>,
    /// The two slot files, open for writing once each: a save writes into the open file rather
    /// than opening and closing its whole path again (a path resolution under the run
    /// directory, twice per step).
    slots: [Option<std::fs::File>; 2],
    /// Where fixture digests are kept for later processes ([`StoredDigests`]), until the first
    /// digests are taken.
    store: Option<PathBuf>,
    /// The wall time from one save to the next (`--checkpoint-interval`; zero: every step).
    interval: Duration,
    /// When the last checkpoint was saved, or (before the first) this was made: the cell's
    /// start, or its resume.
    last_save: Instant,
    /// What the steps since the last save may have changed: the next save looks at all of it.
    unsaved: Changes,
}

impl Checkpointer {
    /// For a fresh workspace, saving at most once per `interval` ([`Checkpointer::due`]). Its
    /// first digests, the baseline (the fixture, which a restore copies anyway), are taken at
    /// the first save, from what the copy made ([`Digests::copy_digests`]): a cell that never
    /// saves never pays for them. A workspace the copy says nothing of is walked now, before
    /// anything runs in it. `store` is where fixture digests are kept for later processes
    /// ([`StoredDigests`]): those of the copied fixture are read before the first digests, and
    /// written after them when they hashed fixture files the store did not have.
    pub fn start(ws: &Path, cell_dir: &Path, store: Option<&Path>, interval: Duration) -> io::Result<Checkpointer> {
        let mut digests = Digests::new(ws, cell_dir).after_copy(ws);
        if digests.copied.is_none() {
            digests.current(&Changes::Anything)?;
        }
        Ok(Checkpointer {
            cell_dir: cell_dir.to_path_buf(),
            digests,
            observed: Vec::new(),
            log: None,
            logged: HashSet::new(),
            committed: None,
            pending: None,
            slots: [None, None],
            store: store.map(Path::to_path_buf),
            interval,
            last_save: Instant::now(),
            unsaved: Changes::None,
        })
    }

    /// [`Checkpointer::start`], or None (a warning) when the workspace cannot be read: the cell
    /// then runs without checkpoints, as it did before they existed.
    pub fn for_fresh(ws: &Path, cell_dir: &Path, store: Option<&Path>, interval: Duration) -> Option<Checkpointer> {
        Checkpointer::start(ws, cell_dir, store, interval)
            .map_err(|e| tracing::warn!("cannot digest the workspace {}: {e}; no checkpoints", ws.display()))
            .ok()
    }

    /// Whether the step that just ended is saved: `interval` has passed since the last save
    /// (or, before the first, since the cell started or resumed). A step that is not saved is
    /// [`Checkpointer::defer`]red.
    pub fn due(&self) -> bool {
        self.last_save.elapsed() >= self.interval
    }

    /// A step ended without a save: what it may have changed waits for the next one.
    pub fn defer(&mut self, changes: Changes) {
        self.unsaved.merge(changes);
    }

    /// The workspace's digests after `changes` (everything since the last save), the first
    /// ones with the fixture digests of the store read before and written after.
    fn take_digests(&mut self, changes: &Changes) -> io::Result<()> {
        let fixture = self.digests.copied.as_ref().map(|c| c.fixture.clone());
        let store = fixture.as_ref().and(self.store.take());
        if let (Some(store), Some(fixture)) = (&store, &fixture) {
            StoredDigests::load(store, fixture);
        }
        let learned = self.digests.learned;
        self.digests.current(changes)?;
        if let (Some(store), Some(fixture)) = (&store, &fixture)
            && self.digests.learned > learned
            && let Err(e) = StoredDigests::store(store, fixture)
        {
            tracing::warn!("cannot store the digests of fixture {}: {e}", fixture.display());
        }
        Ok(())
    }

    /// Saves `state` after its step. `position` is the trace writer's (the step's
    /// `state_updated` is the last event); `tokens` the fold's (input, output) counters;
    /// `changes` what the step's calls may have changed ([`Changes`]), to which the deferred
    /// steps' are added: the workspace's digests are the last ones when nothing, those brought
    /// up to date at the written paths when only the file tools wrote, and a walk's otherwise.
    #[allow(clippy::too_many_arguments)]
    pub fn save(
        &mut self,
        changes: &Changes,
        ids: (&str, &str),
        state: &LoopState,
        provider: Option<serde_json::Value>,
        position: (Option<u64>, u64),
        tokens: (u64, u64),
        elapsed_ms: u64,
    ) -> io::Result<Saved> {
        let t0 = Instant::now();
        let (Some(seq), bytes) = position else {
            return Err(io::Error::other("a checkpoint needs the step's state_updated in the trace"));
        };
        // Only the observations made since the last checkpoint are written: appended to the log
        // in one write, before the file that names them.
        let mut lines = Vec::new();
        for o in &state.observations[self.observed.len().min(state.observations.len())..] {
            let json = serde_json::to_vec(o).map_err(io::Error::other)?;
            let sha = sha256_hex(&json);
            if self.logged.insert(sha.clone()) {
                lines.extend_from_slice(&json);
                lines.push(b'\n');
            }
            self.observed.push(sha);
        }
        if !lines.is_empty() {
            self.append_to_log(&lines)?;
        }
        let mut since = std::mem::take(&mut self.unsaved);
        since.merge(changes.clone());
        if let Err(e) = self.take_digests(&since) {
            // What the digests had may be stale now: the next save walks.
            self.unsaved = Changes::Anything;
            return Err(e);
        }
        let workspace = self.digests.last.as_ref().expect("taken above");
        let LoopState {
            step,
            finished,
            invalid_in_a_row,
            repo_map,
            memory,
            observations: _,
            compactor,
            files_modified,
            first_reads,
            session,
        } = state;
        let light = LoopState {
            step: *step,
            finished: *finished,
            invalid_in_a_row: *invalid_in_a_row,
            repo_map: repo_map.clone(),
            memory: memory.clone(),
            observations: Vec::new(),
            compactor: compactor.clone(),
            files_modified: files_modified.clone(),
            first_reads: first_reads.clone(),
            session: session.clone(),
        };
        let checkpoint = Checkpoint {
            schema_version: CHECKPOINT_SCHEMA_VERSION,
            run_id: ids.0.to_string(),
            cell_id: ids.1.to_string(),
            step: state.step,
            trace: TracePosition { seq, bytes },
            elapsed_ms,
            input_tokens: tokens.0,
            output_tokens: tokens.1,
            provider,
            state: Cow::Owned(light),
            observations: self.observed[..state.observations.len()].to_vec(),
            workspace: Cow::Borrowed(workspace),
        };
        let text = serde_json::to_vec(&checkpoint).map_err(io::Error::other)?;
        // The slot the last event does not name: that one stays whole whatever happens to this
        // write, and a kill in the middle leaves a file whose sha256 no event names.
        let slot = match self.committed.as_deref() {
            Some(p) if p == self.cell_dir.join(DIR).join(SLOTS[0]) => 1,
            _ => 0,
        };
        let rel = format!("{DIR}/{}", SLOTS[slot]);
        let path = self.cell_dir.join(&rel);
        // Written over the old content from its start, then cut to the new length; never
        // truncated to nothing first: ext4 takes a write after a truncation to zero for a
        // replacement and flushes the file when it is closed (auto_da_alloc), which measured
        // 1-2 ms a write here against 20-50 us for this.
        let file = match self.slots[slot].take() {
            Some(file) => file,
            None => open_in_made_folder(&path, std::fs::OpenOptions::new().write(true).create(true).truncate(false))?,
        };
        let file = &*self.slots[slot].insert(file);
        std::os::unix::fs::FileExt::write_all_at(file, &text, 0)?;
        file.set_len(text.len() as u64)?;
        self.pending = Some(path);
        self.last_save = Instant::now();
        Ok(Saved {
            path: rel,
            sha256: sha256_hex(&text),
            bytes: text.len() as u64,
            duration_us: t0.elapsed().as_micros() as u64,
        })
    }

    /// Appends whole lines to `checkpoint/observations.jsonl`, opening it on the first call.
    fn append_to_log(&mut self, lines: &[u8]) -> io::Result<()> {
        if self.log.is_none() {
            let path = self.cell_dir.join(DIR).join(OBSERVATIONS);
            self.log = Some(open_in_made_folder(&path, std::fs::OpenOptions::new().create(true).append(true))?);
        }
        self.log.as_mut().expect("opened above").write_all(lines)
    }

    /// A new session of a multi-session cell starts from an empty context: its observations
    /// are counted from the first again (stored contents and the workspace's digests carry on).
    pub fn next_session(&mut self) {
        self.observed.clear();
        // Between sessions the feature checks and `git` ran in the workspace.
        self.unsaved = Changes::Anything;
    }

    /// The last saved checkpoint's event is written: the other slot is free for the next one.
    /// A file of an older layout (`step-NNNN.json`, which a resumed attempt may have
    /// continued from) is no longer needed and is removed.
    pub fn committed(&mut self) {
        let Some(now) = self.pending.take() else { return };
        if let Some(before) = self.committed.replace(now)
            && Some(&before) != self.committed.as_ref()
            && !SLOTS.iter().any(|slot| before.ends_with(slot))
        {
            let _ = std::fs::remove_file(before);
        }
    }

    /// The event the loop writes for `saved`.
    pub fn event(step: u32, saved: &Saved) -> EventBody {
        EventBody::Checkpoint {
            step,
            path: saved.path.clone(),
            sha256: saved.sha256.clone(),
            bytes: saved.bytes,
            duration_us: saved.duration_us,
        }
    }
}

/// An interrupted cell made ready to continue: the trace reopened for append, the fold of its
/// events, the checkpoint's state and the verified workspace.
pub struct Resume {
    pub writer: TraceWriter,
    /// Every event of the trace folded, the discarded ones too: the `resumed` event the caller
    /// writes next puts the fold back to the checkpoint.
    pub summary: SummaryBuilder,
    pub checkpoint: Checkpoint<'static>,
    pub checkpointer: Checkpointer,
    /// The `resumed` event, but for `duration_ms`, which the caller measures to its next step.
    pub from_step: u32,
    pub checkpoint_path: String,
    pub checkpoint_seq: u64,
    pub discarded_events: u64,
    pub workspace_restored: bool,
    pub restore_ms: u64,
    /// The workspace (canonical).
    pub ws: PathBuf,
}

/// What `resume` needs to know about the cell.
pub struct CellPaths<'a> {
    pub run_id: &'a str,
    pub cell_id: &'a str,
    pub cell_dir: &'a Path,
    pub fixture: &'a Path,
    pub workspace: &'a Path,
}

/// Checks the last checkpoint of the cell's trace against the trace and the workspace
/// (restoring the workspace when it differs) and reopens the trace for append.
pub fn resume(cell: &CellPaths<'_>) -> Result<Resume, Refusal> {
    let trace = cell.cell_dir.join("trace.jsonl");
    let read = crate::trace::read_trace(&trace).map_err(|e| Refusal(format!("the trace cannot be read: {e}")))?;
    if !read.stats.skipped.is_empty() {
        return refuse("the trace holds event kinds this hcbench does not know (a newer hcbench wrote it)");
    }
    let events = read.events;
    if let Some(e) = events.iter().find(|e| e.run_id != cell.run_id || e.cell_id != cell.cell_id) {
        return refuse(format!(
            "the trace holds an event of run {:?} cell {:?}, not of this cell",
            e.run_id, e.cell_id
        ));
    }
    let Some(at) = events.iter().rposition(|e| matches!(e.body, EventBody::Checkpoint { .. })) else {
        return refuse("the trace has no checkpoint (the cell was interrupted before its first step ended)");
    };
    let EventBody::Checkpoint { step, path: rel, sha256, .. } = &events[at].body else { unreachable!() };
    let checkpoint_seq = events[at].seq;
    let rel = rel.clone();
    if !rel.starts_with(&format!("{DIR}/")) || rel.split('/').any(|part| part == ".." || part.is_empty()) {
        return refuse(format!("the checkpoint event names {rel:?}, which is not a file under {DIR}/"));
    }
    let file = cell.cell_dir.join(&rel);
    let bytes = std::fs::read(&file).map_err(|e| Refusal(format!("checkpoint {rel} cannot be read: {e}")))?;
    let found = sha256_hex(&bytes);
    if found != *sha256 {
        return refuse(format!(
            "checkpoint {rel} has sha256 {}…, not the {}… its checkpoint event names (the file was changed or cut after it was written)",
            &found[..12],
            &sha256[..sha256.len().min(12)]
        ));
    }
    #[derive(Deserialize)]
    struct Version {
        schema_version: u32,
    }
    let version: Version = serde_json::from_slice(&bytes)
        .map_err(|e| Refusal(format!("checkpoint {rel} is not a checkpoint file: {e}")))?;
    if version.schema_version != CHECKPOINT_SCHEMA_VERSION {
        return refuse(format!(
            "checkpoint {rel} has schema_version {}, this hcbench reads {CHECKPOINT_SCHEMA_VERSION}",
            version.schema_version
        ));
    }
    let checkpoint: Checkpoint<'static> =
        serde_json::from_slice(&bytes).map_err(|e| Refusal(format!("checkpoint {rel} is not valid: {e}")))?;
    if checkpoint.run_id != cell.run_id || checkpoint.cell_id != cell.cell_id || checkpoint.step != *step {
        return refuse(format!(
            "checkpoint {rel} is of run {:?} cell {:?} step {}, but its event is of this cell at step {step}",
            checkpoint.run_id, checkpoint.cell_id, checkpoint.step
        ));
    }
    check_position(&trace, &events, at, &checkpoint).map_err(|why| Refusal(format!("checkpoint {rel}: {why}")))?;
    let mut checkpoint = checkpoint;
    let blobs = cell.cell_dir.join(DIR).join(BLOBS);
    // The log's whole lines; a last line without its newline is what a kill mid-append leaves,
    // of an observation no checkpoint names yet. (Observations stored one blob each, as before
    // the log, are still read.)
    let log_path = cell.cell_dir.join(DIR).join(OBSERVATIONS);
    let mut log = match std::fs::read(&log_path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return refuse(format!("{DIR}/{OBSERVATIONS} cannot be read: {e}")),
    };
    let whole = log.iter().rposition(|b| *b == b'\n').map_or(0, |k| k + 1);
    log.truncate(whole);
    let logged: HashMap<String, &[u8]> =
        log.split(|b| *b == b'\n').filter(|l| !l.is_empty()).map(|l| (sha256_hex(l), l)).collect();
    let mut observations = Vec::with_capacity(checkpoint.observations.len());
    for (i, sha) in checkpoint.observations.iter().enumerate() {
        let bytes = match logged.get(sha) {
            Some(line) => line.to_vec(),
            None => std::fs::read(blobs.join(sha)).map_err(|e| {
                Refusal(format!(
                    "checkpoint {rel}: observation {} ({sha:.12}…) is not in {DIR}/{OBSERVATIONS} and cannot be read from {DIR}/{BLOBS}/: {e}",
                    i + 1
                ))
            })?,
        };
        if sha256_hex(&bytes) != *sha {
            return refuse(format!(
                "checkpoint {rel}: observation {} ({sha:.12}…) was changed after it was stored",
                i + 1
            ));
        }
        observations.push(
            serde_json::from_slice(&bytes)
                .map_err(|e| Refusal(format!("checkpoint {rel}: observation {} is not valid: {e}", i + 1)))?,
        );
    }
    checkpoint.state.to_mut().observations = observations;
    let logged: HashSet<String> = logged.into_keys().collect();
    // The next observation is appended on a line of its own: a partial last line goes.
    if std::fs::metadata(&log_path).is_ok_and(|m| m.len() > whole as u64) {
        std::fs::OpenOptions::new()
            .write(true)
            .open(&log_path)
            .and_then(|f| f.set_len(whole as u64))
            .map_err(|e| Refusal(format!("{DIR}/{OBSERVATIONS} cannot be cut to its last whole line: {e}")))?;
    }
    let mut summary = SummaryBuilder::new();
    for e in &events[..=at] {
        summary.observe(e);
    }
    if summary.token_counts() != (checkpoint.input_tokens, checkpoint.output_tokens) {
        return refuse(format!(
            "checkpoint {rel} counts {} input and {} output tokens, the trace up to it {:?}",
            checkpoint.input_tokens,
            checkpoint.output_tokens,
            summary.token_counts()
        ));
    }
    for e in &events[at + 1..] {
        summary.observe(e);
    }

    let t0 = Instant::now();
    let link = cell.cell_dir.join("workspace");
    let mut workspace_restored = false;
    let mut digests = match verify(cell.workspace, cell.cell_dir, &checkpoint.workspace) {
        Ok(d) => d,
        Err(_) => {
            restore(cell.fixture, cell.workspace, &link, cell.cell_dir, &checkpoint.workspace)
                .map_err(|e| Refusal(format!("the workspace cannot be restored from checkpoint {rel}: {e}")))?;
            workspace_restored = true;
            verify(cell.workspace, cell.cell_dir, &checkpoint.workspace).map_err(|why| {
                Refusal(format!(
                    "the workspace restored from the fixture and the stored contents does not match checkpoint {rel}: {why}"
                ))
            })?
        }
    };
    digests.keep = true;
    let restore_ms = t0.elapsed().as_millis() as u64;
    let ws = cell.workspace.canonicalize().map_err(|e| Refusal(format!("the workspace is gone: {e}")))?;
    if link.symlink_metadata().is_err() {
        let _ = std::os::unix::fs::symlink(&ws, &link);
    }
    let writer = TraceWriter::append_to(&trace, cell.run_id, cell.cell_id)
        .map_err(|e| Refusal(format!("the trace cannot be reopened: {e}")))?;
    Ok(Resume {
        writer,
        summary,
        from_step: checkpoint.step,
        checkpoint_path: rel.clone(),
        checkpoint_seq,
        discarded_events: (events.len() - at - 1) as u64,
        workspace_restored,
        restore_ms,
        checkpointer: Checkpointer {
            cell_dir: cell.cell_dir.to_path_buf(),
            digests,
            observed: checkpoint.observations.clone(),
            log: None,
            logged,
            committed: Some(file),
            pending: None,
            slots: [None, None],
            store: None,
            // Every step until the caller says otherwise (`reopen`: the cell's interval).
            interval: Duration::ZERO,
            last_save: Instant::now(),
            unsaved: Changes::None,
        },
        checkpoint,
        ws,
    })
}

/// What an earlier attempt of a cell left, as [`reopen`] found it.
pub(super) enum Reopened {
    /// No trace: a cell that never started.
    Nothing,
    /// Its checkpoint could not be used; the attempt was set aside and the cell starts over.
    Refused { reason: String, abandoned_trace: String },
    /// Continued: the recorder (its `resumed` event written) and what the loop takes up.
    Resumed(Box<(super::Recorder, ResumedCell)>),
}

/// What the loop of a resumed cell starts from.
pub(super) struct ResumedCell {
    pub(super) state: LoopState,
    pub(super) checkpointer: Checkpointer,
    pub(super) ws: PathBuf,
    /// The cell's start, moved back by the time the interrupted attempt had used.
    pub(super) started: Instant,
    pub(super) used: std::time::Duration,
    /// A multi-session cell's model for the session it is resumed in (the cell's model then
    /// goes unused), continuing from the checkpoint's saved state.
    pub(super) session_provider: Option<Box<dyn crate::model::Provider>>,
}

/// Looks for an earlier attempt of `plan`'s cell and continues it when its last checkpoint
/// holds: the provider continues from its saved state, the trace gets its `resumed` event,
/// and the sink hears of it. A refused checkpoint is said to the sink too. Errs only when the
/// attempt cannot be set aside (the caller could not write a fresh trace either).
pub(super) fn reopen(
    plan: &super::CellPlan,
    provider: &mut dyn crate::model::Provider,
    sink: &dyn crate::events::EngineSink,
) -> io::Result<Reopened> {
    let t0 = Instant::now();
    if !plan.cell_dir.join("trace.jsonl").exists() {
        return Ok(Reopened::Nothing);
    }
    let paths = CellPaths {
        run_id: &plan.run_id,
        cell_id: &plan.cell_id,
        cell_dir: &plan.cell_dir,
        fixture: &plan.case.fixture_dir,
        workspace: &plan.workspace,
    };
    let mut session_provider: Option<Box<dyn crate::model::Provider>> = None;
    let resumed = resume(&paths).and_then(|r| {
        // A multi-session cell continues in the session its checkpoint is of, with that
        // session's model; a checkpoint and a case that disagree on sessions are refused.
        let provider: &mut dyn crate::model::Provider = match (&plan.case.sessions, &r.checkpoint.state.session) {
            (Some(_), Some(at)) => session_provider
                .insert(plan.profile.provider_for_session(&plan.case, plan.epoch, (at.index - 1) as usize))
                .as_mut(),
            (None, None) => provider,
            (Some(_), None) => return refuse("the case has sessions but the checkpoint is not of one"),
            (None, Some(_)) => return refuse("the checkpoint is of a session but the case has no sessions"),
        };
        match &r.checkpoint.provider {
            Some(saved) => provider
                .restore_state(saved)
                .map(|()| r)
                .map_err(|e| Refusal(format!("the model provider cannot continue from the checkpoint: {e}"))),
            None => Ok(r),
        }
    });
    let r = match resumed {
        Ok(r) => r,
        Err(refusal) => {
            let abandoned_trace = abandon(&plan.cell_dir)?;
            sink.event(crate::events::EngineEvent::ResumeRefused { cell_id: &plan.cell_id, reason: &refusal.0 });
            return Ok(Reopened::Refused { reason: refusal.0, abandoned_trace });
        }
    };
    let used = std::time::Duration::from_millis(r.checkpoint.elapsed_ms);
    let mut rec = super::Recorder { writer: r.writer, summary: r.summary };
    let duration_ms = t0.elapsed().as_millis() as u64;
    rec.emit(EventBody::Resumed {
        from_step: r.from_step,
        checkpoint: r.checkpoint_path,
        checkpoint_seq: r.checkpoint_seq,
        discarded_events: r.discarded_events,
        workspace_restored: r.workspace_restored,
        restore_ms: r.restore_ms,
        duration_ms,
    })?;
    sink.event(crate::events::EngineEvent::CellResumed {
        cell_id: &plan.cell_id,
        from_step: r.from_step,
        workspace_restored: r.workspace_restored,
        duration_ms,
    });
    let cell = ResumedCell {
        state: r.checkpoint.state.into_owned(),
        // The interval runs from the resume.
        checkpointer: Checkpointer { interval: plan.checkpoint_interval, last_save: Instant::now(), ..r.checkpointer },
        ws: r.ws,
        started: Instant::now().checked_sub(used).unwrap_or_else(Instant::now),
        used,
        session_provider,
    };
    Ok(Reopened::Resumed(Box::new((rec, cell))))
}

/// After `state`'s step: when a save is due ([`Checkpointer::due`]), saves the checkpoint and
/// writes its event; otherwise keeps what the step may have changed for the next save. A
/// checkpoint that cannot be written is a warning, not the cell's end: a resume then continues
/// from the one before.
pub(super) fn after_step(
    rec: &mut super::Recorder,
    checkpointer: &mut Checkpointer,
    plan: &super::CellPlan,
    state: &LoopState,
    provider: &dyn crate::model::Provider,
    started: Instant,
    changes: Changes,
) -> io::Result<()> {
    if !checkpointer.due() {
        checkpointer.defer(changes);
        return Ok(());
    }
    let saved = checkpointer.save(
        &changes,
        (&plan.run_id, &plan.cell_id),
        state,
        provider.saved_state(),
        rec.writer.position(),
        rec.summary.token_counts(),
        started.elapsed().as_millis() as u64,
    );
    match saved {
        Ok(saved) => {
            rec.emit(Checkpointer::event(state.step, &saved))?;
            checkpointer.committed();
        }
        Err(e) => tracing::warn!(cell = %plan.cell_id, step = state.step, "cannot write the checkpoint: {e}"),
    }
    Ok(())
}

/// The checkpoint must follow its step's `state_updated`, which ends where it says.
fn check_position(trace: &Path, events: &[crate::trace::Event], at: usize, cp: &Checkpoint<'_>) -> Result<(), String> {
    let seq = cp.trace.seq;
    let Some(i) = events.iter().position(|e| e.seq == seq) else {
        return Err(format!("it records trace seq {seq}, which the trace does not have"));
    };
    match events[i].body {
        EventBody::StateUpdated { step, .. } if step == cp.step && i + 1 == at => {}
        _ => return Err(format!("the trace's event at seq {seq} is not the state_updated of step {}", cp.step)),
    }
    // Line `seq` ends at the (seq+1)-th newline: one event per line, seq from 0.
    let bytes = std::fs::read(trace).map_err(|e| format!("the trace cannot be read: {e}"))?;
    let end = bytes.iter().enumerate().filter(|(_, b)| **b == b'\n').nth(seq as usize).map(|(k, _)| k as u64 + 1);
    if end != Some(cp.trace.bytes) {
        return Err(format!(
            "it records the trace at byte {}, but event {seq} ends at byte {}",
            cp.trace.bytes,
            end.map_or("(none)".into(), |e| e.to_string())
        ));
    }
    Ok(())
}

/// Digests of the workspace now, if they are `want`; Err names the first difference.
fn verify(ws: &Path, cell_dir: &Path, want: &BTreeMap<String, Entry>) -> Result<Digests, String> {
    let mut digests = Digests::new(ws, cell_dir);
    let now = digests.scan().map_err(|e| format!("cannot read the workspace {}: {e}", ws.display()))?;
    if let Some(why) = first_difference(&now, want) {
        return Err(why);
    }
    Ok(digests)
}

fn first_difference(now: &BTreeMap<String, Entry>, want: &BTreeMap<String, Entry>) -> Option<String> {
    for (path, entry) in want {
        match now.get(path) {
            None => return Some(format!("{path} is missing")),
            Some(e) if e != entry => return Some(format!("{path} differs ({e:?}, the checkpoint has {entry:?})")),
            Some(_) => {}
        }
    }
    now.keys().find(|p| !want.contains_key(*p)).map(|p| format!("{p} is not in the checkpoint"))
}

/// Rebuilds the workspace: a fresh copy of the fixture, the stored contents over it, and the
/// paths the checkpoint does not have removed.
pub fn restore(
    fixture: &Path,
    ws: &Path,
    link: &Path,
    cell_dir: &Path,
    entries: &BTreeMap<String, Entry>,
) -> io::Result<()> {
    if link.symlink_metadata().is_ok_and(|m| m.file_type().is_symlink()) {
        std::fs::remove_file(link)?;
    }
    let ws = crate::workspace::fresh(fixture, ws, link).map_err(|e| io::Error::other(e.to_string()))?;
    let copied = Digests::new(&ws, cell_dir).after_copy(&ws).of_untouched_copy()?;
    // Children sort after their parents: remove from the end.
    for (path, entry) in copied.iter().rev() {
        if entries.get(path).is_some_and(|want| same_kind(want, entry)) {
            continue;
        }
        let p = ws.join(path);
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&p)?,
            Ok(_) => std::fs::remove_file(&p)?,
            Err(_) => {}
        }
    }
    let blobs = cell_dir.join(DIR).join(BLOBS);
    let pack = match std::fs::read(cell_dir.join(DIR).join(PACK)) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e),
    };
    let (in_pack, _) = pack_records(&pack);
    for (path, entry) in entries {
        let p = ws.join(path);
        match entry {
            Entry::Dir => std::fs::create_dir_all(&p)?,
            Entry::Symlink { target } => {
                if p.symlink_metadata().is_err() {
                    std::os::unix::fs::symlink(target, &p)?;
                }
            }
            Entry::File { sha256, mode, .. } => {
                let matches = matches!(copied.get(path), Some(Entry::File { sha256: s, .. }) if s == sha256);
                if !matches {
                    // From the pack, or a file of the older layout. A content found in neither
                    // is left as it is, and the verification after the rebuild refuses it.
                    match in_pack.get(sha256.as_str()) {
                        Some(range) => std::fs::write(&p, &pack[range.clone()])?,
                        None if blobs.join(sha256).is_file() => std::fs::write(&p, std::fs::read(blobs.join(sha256))?)?,
                        None => {}
                    }
                }
                if p.is_file() {
                    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(*mode))?;
                }
            }
        }
    }
    Ok(())
}

fn same_kind(a: &Entry, b: &Entry) -> bool {
    match (a, b) {
        (Entry::Symlink { target: x }, Entry::Symlink { target: y }) => x == y,
        _ => std::mem::discriminant(a) == std::mem::discriminant(b),
    }
}

/// Sets an interrupted attempt aside so the cell can start over: `trace.jsonl` becomes
/// `trace.jsonl.abandoned-N` and `checkpoint/` `checkpoint.abandoned-N` (the first free N), and
/// the link to the old workspace goes (a fresh one replaces it). Returns the trace's new name.
pub fn abandon(cell_dir: &Path) -> io::Result<String> {
    let n = (1..).find(|n| !cell_dir.join(format!("trace.jsonl.abandoned-{n}")).exists()).unwrap_or(1);
    let name = format!("trace.jsonl.abandoned-{n}");
    std::fs::rename(cell_dir.join("trace.jsonl"), cell_dir.join(&name))?;
    if cell_dir.join(DIR).exists() {
        std::fs::rename(cell_dir.join(DIR), cell_dir.join(format!("{DIR}.abandoned-{n}")))?;
    }
    let link = cell_dir.join("workspace");
    if link.symlink_metadata().is_ok_and(|m| m.file_type().is_symlink()) {
        std::fs::remove_file(link)?;
    }
    Ok(name)
}

/// Whether `cell_dir` holds an interrupted attempt a resume may continue: a trace with a
/// `checkpoint` event. `matrix --resume` keeps such a cell's directory instead of removing it.
pub fn resumable(cell_dir: &Path) -> bool {
    let trace = cell_dir.join("trace.jsonl");
    let Ok(text) = std::fs::read(&trace) else { return false };
    let needle = b"\"kind\":\"checkpoint\"";
    text.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The contents a cell stored, by sha256.
    fn stored(cell: &Path) -> BTreeMap<String, Vec<u8>> {
        let pack = std::fs::read(cell.join(DIR).join(PACK)).unwrap_or_default();
        pack_records(&pack).0.into_iter().map(|(sha, range)| (sha.to_string(), pack[range].to_vec())).collect()
    }

    fn tree(root: &Path, files: &[(&str, &str)]) {
        for (path, text) in files {
            let p = root.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
    }

    #[test]
    fn digests_rehash_only_what_changed_and_keep_new_contents() {
        let dir = tempfile::tempdir().unwrap();
        let (ws, cell) = (dir.path().join("ws"), dir.path().join("cell"));
        tree(&ws, &[("a.py", "x = 1\n"), ("pkg/b.py", "y = 2\n")]);
        let mut d = Digests::new(&ws, &cell);
        let first = d.scan().unwrap();
        assert_eq!(first.len(), 3, "two files and a folder: {first:?}");
        assert!(!cell.join(DIR).join(PACK).exists(), "the baseline is the fixture: nothing stored");
        std::fs::write(ws.join("a.py"), "x = 10\n").unwrap();
        std::fs::remove_file(ws.join("pkg/b.py")).unwrap();
        let second = d.scan().unwrap();
        let Some(Entry::File { sha256, size, .. }) = second.get("a.py") else { panic!("{second:?}") };
        assert_eq!((sha256.as_str(), *size), (sha256_hex(b"x = 10\n").as_str(), 7));
        assert!(!second.contains_key("pkg/b.py"));
        assert_eq!(stored(&cell), BTreeMap::from([(sha256.clone(), b"x = 10\n".to_vec())]));
    }

    #[test]
    fn a_settled_folder_is_not_listed_again_but_every_change_in_it_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let (ws, cell) = (dir.path().join("ws"), dir.path().join("cell"));
        tree(&ws, &[("a.py", "x = 1\n"), (".git/objects/ab/cdef", "blob 1"), (".git/HEAD", "ref\n")]);
        let mut d = Digests::new(&ws, &cell);
        d.scan().unwrap();
        // Past the racy window, the next scan reads every listing under a settled stat.
        std::thread::sleep(std::time::Duration::from_millis(2 * (RACY_NS / 1_000_000) as u64));
        let settled = d.scan().unwrap();
        assert!(d.listings.values().all(|l| l.settled), "every folder settled");
        assert_eq!(d.scan().unwrap(), settled, "nothing changed, nothing differs");
        // A file rewritten in a folder whose listing is reused: its stat moves, it is hashed.
        std::fs::write(ws.join(".git/objects/ab/cdef"), "blob 2, longer").unwrap();
        // A new entry two folders down, and a folder replaced by a symlink.
        tree(&ws, &[(".git/objects/ab/0123", "blob 3")]);
        std::fs::remove_file(ws.join(".git/HEAD")).unwrap();
        std::fs::create_dir_all(ws.join("elsewhere")).unwrap();
        std::fs::remove_dir_all(ws.join(".git/objects/ab")).unwrap();
        tree(&ws, &[("elsewhere/cdef", "not the workspace's")]);
        std::os::unix::fs::symlink("../../elsewhere", ws.join(".git/objects/ab")).unwrap();
        let now = d.scan().unwrap();
        assert_eq!(now.get(".git/objects/ab"), Some(&Entry::Symlink { target: "../../elsewhere".into() }));
        assert!(!now.contains_key(".git/objects/ab/cdef"), "a symlinked folder is not walked: {now:?}");
        assert!(!now.contains_key(".git/HEAD"));
        // Compared with a walk that starts from nothing.
        assert_eq!(now, Digests::new(&ws, &dir.path().join("other")).scan().unwrap());
        // And a change inside a settled folder, after it settled again.
        std::fs::remove_file(ws.join(".git/objects/ab")).unwrap();
        tree(&ws, &[(".git/objects/ab/cdef", "blob 1")]);
        std::thread::sleep(std::time::Duration::from_millis(2 * (RACY_NS / 1_000_000) as u64));
        d.scan().unwrap();
        std::fs::write(ws.join(".git/objects/ab/cdef"), "blob 4").unwrap();
        let Some(Entry::File { sha256, .. }) = d.scan().unwrap().get(".git/objects/ab/cdef").cloned() else { panic!() };
        assert_eq!(sha256, sha256_hex(b"blob 4"));
    }

    #[test]
    fn a_file_whose_name_is_not_utf8_is_digested_by_its_own_name() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let (ws, cell) = (dir.path().join("ws"), dir.path().join("cell"));
        tree(&ws, &[("sub/a.py", "x = 1\n")]);
        let odd = ws.join("sub").join(std::ffi::OsStr::from_bytes(b"bad\xff.txt"));
        std::fs::write(&odd, "one").unwrap();
        let mut d = Digests::new(&ws, &cell);
        let key = "sub/bad\u{FFFD}.txt";
        let first = d.scan().unwrap();
        assert!(matches!(first.get(key), Some(Entry::File { size: 3, .. })), "{first:?}");
        std::fs::write(&odd, "two!").unwrap();
        let Some(Entry::File { sha256, .. }) = d.scan().unwrap().get(key).cloned() else { panic!() };
        assert_eq!(sha256, sha256_hex(b"two!"));
    }

    #[test]
    fn each_observation_is_stored_once_and_the_checkpoint_names_them_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let (ws, cell) = (dir.path().join("ws"), dir.path().join("cell"));
        tree(&ws, &[("a.py", "x = 1\n")]);
        let mut c = Checkpointer::start(&ws, &cell, None, Duration::ZERO).unwrap();
        let big = "1: x = 1\n".repeat(500);
        let mut state = LoopState::default();
        let mut sizes = Vec::new();
        for step in 1..=3 {
            state.step = step;
            state.observations.push(Observation::new(step, "read_file", format!("read_file a.py #{step}"), "ok", &big));
            let saved =
                c.save(&Changes::Anything, ("r", "c"), &state, None, (Some(step as u64 * 3), 10), (0, 0), 1).unwrap();
            c.committed();
            sizes.push(saved.bytes);
            let text = std::fs::read_to_string(cell.join(&saved.path)).unwrap();
            let cp: Checkpoint<'static> = serde_json::from_str(&text).unwrap();
            assert!(cp.state.observations.is_empty(), "the observations are not in the file");
            assert_eq!(cp.observations.len(), step as usize);
            assert_eq!(cp.observations[..step as usize - 1], c.observed[..step as usize - 1], "earlier ones kept");
        }
        // The file grows by one name per step, not by one observation.
        assert!(sizes[2] - sizes[0] < 300, "{sizes:?}");
        assert!(sizes[2] < big.len() as u64, "{sizes:?}");
        // One line per observation in the log, and no blob at all: a.py, written within the
        // racy window, is hashed again, but its content is the first scan's.
        let log = std::fs::read_to_string(cell.join(DIR).join(OBSERVATIONS)).unwrap();
        let shas: Vec<String> = log.lines().map(|l| sha256_hex(l.as_bytes())).collect();
        assert_eq!(shas, c.observed, "one line per observation, each written once, in order");
        assert!(!cell.join(DIR).join(PACK).exists());
    }

    #[test]
    fn a_workspace_is_restored_from_the_fixture_and_the_stored_contents() {
        let dir = tempfile::tempdir().unwrap();
        let (fixture, ws, cell) =
            fresh_copy(dir.path(), &[("a.py", "x = 1\n"), ("old.py", "gone\n"), ("keep.py", "k\n")]);
        let link = cell.join("workspace");
        let mut d = Digests::new(&ws, &cell);
        d.scan().unwrap();
        tree(&ws, &[("a.py", "x = 2\n"), ("new/c.sh", "#!/bin/sh\n")]);
        std::fs::set_permissions(ws.join("new/c.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::remove_file(ws.join("old.py")).unwrap();
        let want = d.scan().unwrap();
        // What a killed step did after the checkpoint, and worse.
        std::fs::write(ws.join("a.py"), "x = 3\n").unwrap();
        std::fs::write(ws.join("stray.txt"), "?").unwrap();
        std::fs::remove_dir_all(ws.join("new")).unwrap();
        let e = verify(&ws, &cell, &want).err().unwrap();
        assert!(e.contains("a.py differs"), "{e}");
        restore(&fixture, &ws, &link, &cell, &want).unwrap();
        assert!(verify(&ws, &cell, &want).is_ok());
        assert_eq!(std::fs::read_to_string(ws.join("a.py")).unwrap(), "x = 2\n");
        assert!(!ws.join("old.py").exists() && !ws.join("stray.txt").exists());
        assert_eq!(std::fs::metadata(ws.join("new/c.sh")).unwrap().permissions().mode() & 0o777, 0o755);
        assert_eq!(std::fs::read_link(&link).unwrap(), ws.canonicalize().unwrap());
    }

    #[test]
    fn a_step_that_changed_no_file_reuses_the_last_scan_and_a_new_session_scans_again() {
        let dir = tempfile::tempdir().unwrap();
        let (ws, cell) = (dir.path().join("ws"), dir.path().join("cell"));
        tree(&ws, &[("a.py", "x = 1\n")]);
        let mut d = Digests::new(&ws, &cell);
        let first = d.current(&Changes::Anything).unwrap().clone();
        // Written behind the digests' back: a step whose calls cannot write does not look.
        tree(&ws, &[("b.py", "y = 2\n")]);
        assert_eq!(d.current(&Changes::None).unwrap(), &first, "no walk after a read-only step");
        let scanned = d.current(&Changes::Anything).unwrap();
        assert!(scanned.contains_key("b.py"), "a step that may have written is scanned: {scanned:?}");
        // A fresh Digests has no scan to reuse.
        tree(&ws, &[("c.py", "z = 3\n")]);
        assert!(Digests::new(&ws, &cell).current(&Changes::None).unwrap().contains_key("c.py"));
        // A new session (feature checks and git ran in between): its first save looks at
        // everything, though its step changed no file.
        let mut c = Checkpointer::start(&ws, &cell, None, Duration::ZERO).unwrap();
        assert!(saved_workspace(&mut c, &cell, 1, Changes::None).contains_key("c.py"));
        tree(&ws, &[("d.py", "w = 4\n")]);
        assert!(!saved_workspace(&mut c, &cell, 2, Changes::None).contains_key("d.py"), "no walk");
        c.next_session();
        assert!(saved_workspace(&mut c, &cell, 3, Changes::None).contains_key("d.py"));
    }

    /// Saves the checkpoint of `step` after `changes` and gives the workspace it recorded.
    fn saved_workspace(c: &mut Checkpointer, cell: &Path, step: u32, changes: Changes) -> BTreeMap<String, Entry> {
        let state = LoopState { step, ..LoopState::default() };
        let saved = c.save(&changes, ("r", "c"), &state, None, (Some(u64::from(step) * 3), 10), (0, 0), 1).unwrap();
        c.committed();
        let cp: Checkpoint<'static> = serde_json::from_slice(&std::fs::read(cell.join(&saved.path)).unwrap()).unwrap();
        cp.workspace.into_owned()
    }

    /// A fixture of `files` in `dir`, copied fresh into the workspace of a cell folder as a
    /// cell's is: (fixture, workspace, cell folder).
    fn fresh_copy(dir: &Path, files: &[(&str, &str)]) -> (PathBuf, PathBuf, PathBuf) {
        let (fixture, cell) = (dir.join("fx"), dir.join("cell"));
        tree(&fixture, files);
        std::fs::create_dir_all(&cell).unwrap();
        let ws = crate::workspace::fresh(&fixture, &dir.join("ws"), &cell.join("workspace")).unwrap();
        (fixture, ws, cell)
    }

    /// A fixture of three files in two folders, as a benchmark's are: written long before its
    /// cells start (past the racy window).
    fn settled_fixture(dir: &Path) -> PathBuf {
        let fixture = dir.join("fx");
        tree(&fixture, &[("a.py", "x = 1\n"), ("pkg/b.py", "y = 1\n"), ("pkg/c.txt", "c")]);
        std::thread::sleep(std::time::Duration::from_millis(2 * (RACY_NS / 1_000_000) as u64));
        fixture
    }

    /// Cell `n`'s fresh copy of `fixture` in `dir`: (workspace, cell folder).
    fn numbered_copy(dir: &Path, fixture: &Path, n: u32) -> (PathBuf, PathBuf) {
        let (ws, cell) = (dir.join(format!("ws{n}")), dir.join(format!("cell{n}")));
        std::fs::create_dir_all(&cell).unwrap();
        (crate::workspace::fresh(fixture, &ws, &cell.join("workspace")).unwrap(), cell)
    }

    /// A walk of `ws` from nothing: what every cheaper way to the digests must equal.
    fn walked(ws: &Path) -> BTreeMap<String, Entry> {
        let scratch = tempfile::tempdir().unwrap();
        Digests::new(ws, scratch.path()).scan().unwrap()
    }

    #[test]
    fn a_step_of_file_tool_writes_updates_the_written_paths_as_a_walk_would_find_them() {
        let dir = tempfile::tempdir().unwrap();
        let (fixture, ws, cell) = fresh_copy(dir.path(), &[("a.py", "x = 1\n"), ("pkg/b.py", "y = 1\n")]);
        let link = cell.join("workspace");
        let mut d = Digests::new(&ws, &cell).after_copy(&ws);
        d.current(&Changes::None).unwrap();
        let paths = |p: &[&str]| Changes::Paths(p.iter().map(|s| s.to_string()).collect());
        // An edit, a new file two new folders down, a rewrite of the same size, and names
        // spelled as a model spells them.
        tree(&ws, &[("a.py", "x = 2\n"), ("new/deep/c.py", "z = 1\n"), ("pkg/b.py", "y = 2\n")]);
        let (hashed, walks) = (d.hashed, d.walks);
        let now = d.current(&paths(&["a.py", "./new/deep/c.py", "pkg//b.py"])).unwrap().clone();
        assert_eq!(now, walked(&ws));
        assert_eq!((d.hashed - hashed, d.walks - walks), (3, 0), "the three written files read, no walk");
        assert!(matches!(now.get("new/deep"), Some(Entry::Dir)), "the folders the write made: {now:?}");
        // A failed write names a path that is not there: nothing changes.
        assert_eq!(d.current(&paths(&["missing/x.py"])).unwrap(), &now);
        assert_eq!(d.walks, walks);
        // Their contents are stored, so a rebuild gives them back.
        std::fs::write(ws.join("new/deep/c.py"), "spoiled").unwrap();
        restore(&fixture, &ws, &link, &cell, &now).unwrap();
        assert!(verify(&ws, &cell, &now).is_ok());
        assert_eq!(std::fs::read_to_string(ws.join("new/deep/c.py")).unwrap(), "z = 1\n");
        // After the rebuild, digests that take up from the checkpoint.
        let mut d = verify(&ws, &cell, &now).unwrap();
        d.keep = true;
        d.last = Some(now);
        // What the update cannot prove it saw whole is walked: a write through a symlinked
        // folder (it reaches pkg/), a file with a second name, a path with `..`, and a path
        // whose folder the digests had and which is gone.
        std::os::unix::fs::symlink("pkg", ws.join("via")).unwrap();
        d.current(&Changes::Anything).unwrap();
        tree(&ws, &[("pkg/d.py", "through the link\n")]);
        assert_eq!(d.current(&paths(&["via/d.py"])).unwrap(), &walked(&ws));
        std::fs::hard_link(ws.join("pkg/d.py"), ws.join("twin.py")).unwrap();
        d.current(&Changes::Anything).unwrap();
        std::fs::write(ws.join("twin.py"), "both names\n").unwrap();
        assert_eq!(d.current(&paths(&["twin.py"])).unwrap(), &walked(&ws));
        std::fs::write(ws.join("a.py"), "x = 3\n").unwrap();
        assert_eq!(d.current(&paths(&["pkg/../a.py"])).unwrap(), &walked(&ws));
        std::fs::remove_dir_all(ws.join("new")).unwrap();
        assert_eq!(d.current(&paths(&["new/deep/c.py"])).unwrap(), &walked(&ws));
        // A file replaced by a folder of that name.
        std::fs::remove_file(ws.join("a.py")).unwrap();
        tree(&ws, &[("a.py/inner.py", "i\n")]);
        assert_eq!(d.current(&paths(&["a.py/inner.py"])).unwrap(), &walked(&ws));
    }

    #[test]
    fn a_step_that_ran_a_command_sees_every_kind_of_change_a_walk_sees() {
        let dir = tempfile::tempdir().unwrap();
        let fixture = dir.path().join("fx");
        tree(
            &fixture,
            &[("a.py", "x = 1\n"), ("b.py", "y = 1\n"), ("c.py", "z\n"), ("pkg/d.py", "d\n"), ("pkg/e.py", "e\n")],
        );
        std::os::unix::fs::symlink("a.py", fixture.join("pkg/link.py")).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(2 * (RACY_NS / 1_000_000) as u64));
        // A write of the same size, a rename, a removal, a folder with files inside, a file
        // replaced by a symlink and a symlink by a file, each by a command as the agent's
        // commands run: at once after the copy (its folders' listings and its files' stats
        // trusted because they keep the fixture's modification times), and after the racy
        // window (everything trusted by its own times).
        let script = "printf 'x = 2\\n' > a.py && mv b.py b2.py && rm c.py && mkdir -p made/sub \
                      && printf 'm' > made/sub/m.py && rm pkg/d.py && ln -s ../a.py pkg/d.py \
                      && mv pkg/e.py pkg/e2.py && rm pkg/link.py && printf 'l' > pkg/link.py";
        for wait in [false, true] {
            let (ws, cell) = (dir.path().join(format!("ws-{wait}")), dir.path().join(format!("cell-{wait}")));
            std::fs::create_dir_all(&cell).unwrap();
            let ws = crate::workspace::fresh(&fixture, &ws, &cell.join("workspace")).unwrap();
            let mut d = Digests::new(&ws, &cell).after_copy(&ws);
            assert_eq!(d.current(&Changes::None).unwrap(), &walked(&ws), "the copy's facts are a walk's");
            assert_eq!(d.walks, 0, "the first digests are not walked");
            assert!(d.listings["pkg"].settled, "a copied folder's listing is trusted at once");
            if wait {
                std::thread::sleep(std::time::Duration::from_millis(2 * (RACY_NS / 1_000_000) as u64));
                d.current(&Changes::Anything).unwrap();
                assert!(d.listings.values().all(|l| l.settled));
            }
            let out = std::process::Command::new("sh").args(["-c", script]).current_dir(&ws).output().unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            let now = d.current(&Changes::Anything).unwrap().clone();
            assert_eq!(now, walked(&ws));
            assert_eq!(now.get("pkg/d.py"), Some(&Entry::Symlink { target: "../a.py".into() }));
            assert!(matches!(now.get("pkg/link.py"), Some(Entry::File { size: 1, .. })));
            assert!(now.contains_key("made/sub/m.py") && now.contains_key("b2.py") && now.contains_key("pkg/e2.py"));
            assert!(!now.contains_key("b.py") && !now.contains_key("c.py") && !now.contains_key("pkg/e.py"));
        }
    }

    #[test]
    fn a_copy_with_a_name_that_is_not_utf8_is_walked_for_its_first_digests() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let (fixture, ws, cell) = (dir.path().join("fx"), dir.path().join("ws"), dir.path().join("cell"));
        tree(&fixture, &[("sub/a.py", "x = 1\n")]);
        std::fs::write(fixture.join("sub").join(std::ffi::OsStr::from_bytes(b"bad\xff.txt")), "one").unwrap();
        std::fs::create_dir_all(&cell).unwrap();
        let ws = crate::workspace::fresh(&fixture, &ws, &cell.join("workspace")).unwrap();
        let mut d = Digests::new(&ws, &cell).after_copy(&ws);
        let first = d.current(&Changes::Anything).unwrap().clone();
        assert_eq!((d.walks, first), (1, walked(&ws)));
    }

    #[test]
    fn a_fresh_copy_takes_its_fixture_digests_and_a_write_right_after_it_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let fixture = settled_fixture(dir.path());
        let cell = |n: u32| numbered_copy(dir.path(), &fixture, n);
        let from_scratch = |ws: &Path| Digests::new(ws, &dir.path().join("scratch")).scan().unwrap();
        // The fixture's first cell reads its copies; the next ones read none.
        let (ws1, cell1) = cell(1);
        let mut first = Checkpointer::start(&ws1, &cell1, None, Duration::ZERO).unwrap();
        assert_eq!((first.digests.hashed, first.digests.last.is_none()), (0, true), "taken at the first save");
        first.take_digests(&Changes::None).unwrap();
        assert_eq!(first.digests.hashed, 3);
        let (ws2, cell2) = cell(2);
        let mut second = Checkpointer::start(&ws2, &cell2, None, Duration::ZERO).unwrap();
        second.take_digests(&Changes::None).unwrap();
        assert_eq!(second.digests.hashed, 0, "every digest from the fixture's");
        assert_eq!(second.digests.last.as_ref(), Some(&from_scratch(&ws2)));
        // A write at once, of the same size: its modification time is no longer the fixture's.
        std::fs::write(ws2.join("a.py"), "x = 2\n").unwrap();
        let now = second.digests.current(&Changes::Anything).unwrap().clone();
        assert_eq!(now, from_scratch(&ws2));
        assert_eq!(second.digests.hashed, 1, "a.py read again, the untouched copies trusted by their stat");
        assert_eq!(stored(&cell2).get(&sha256_hex(b"x = 2\n")).unwrap(), b"x = 2\n", "its new content stored");
        // A fixture file changed between cells, same size: its stat moved, the copy is read.
        std::fs::write(fixture.join("pkg/b.py"), "y = 2\n").unwrap();
        let (ws3, cell3) = cell(3);
        let mut third = Checkpointer::start(&ws3, &cell3, None, Duration::ZERO).unwrap();
        third.take_digests(&Changes::None).unwrap();
        assert_eq!(third.digests.hashed, 1);
        let Some(Entry::File { sha256, .. }) = third.digests.last.as_ref().unwrap().get("pkg/b.py") else { panic!() };
        assert_eq!(*sha256, sha256_hex(b"y = 2\n"));
        // A workspace given to the digests without its copy's facts is read whole, as before.
        assert_eq!(Checkpointer::start(&ws3, &cell3, None, Duration::ZERO).unwrap().digests.hashed, 3);
    }

    #[test]
    fn a_cell_takes_its_first_digests_at_its_first_save_from_the_copy_and_the_steps_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let fixture = settled_fixture(dir.path());
        let cell = |n: u32| numbered_copy(dir.path(), &fixture, n);
        let paths = |p: &[&str]| Changes::Paths(p.iter().map(|s| s.to_string()).collect());
        let hour = Duration::from_secs(3600);
        // The fixture's first cell, no digest of it known: nothing is read before a save.
        let (ws1, cell1) = cell(1);
        let mut c = Checkpointer::start(&ws1, &cell1, None, hour).unwrap();
        assert!(!c.due(), "an hour has not passed");
        assert_eq!((c.digests.hashed, c.digests.walks, c.digests.last.is_none()), (0, 0, true));
        // Two steps not saved: the file tools rewrote a.py (same size) and wrote a new file.
        tree(&ws1, &[("a.py", "x = 2\n")]);
        c.defer(paths(&["a.py"]));
        tree(&ws1, &[("pkg/new.py", "n\n")]);
        c.defer(paths(&["pkg/new.py"]));
        assert_eq!(saved_workspace(&mut c, &cell1, 2, Changes::None), walked(&ws1));
        // The copies unchanged since the copy are read from the workspace (their digests were
        // not known); a.py is not the copy any more, and nobody knew its digest: a walk.
        assert_eq!((c.digests.walks, c.digests.hashed), (1, 4));
        let contents: Vec<Vec<u8>> = stored(&cell1).into_values().collect();
        assert_eq!(contents.len(), 2, "the new contents, not the fixture's: {contents:?}");
        assert!(contents.contains(&b"x = 2\n".to_vec()) && contents.contains(&b"n\n".to_vec()));
        // The next cell knows b.py's and c.txt's digests, and reads a.py's unchanged copy: the
        // written paths are brought up to date without a walk.
        let (ws2, cell2) = cell(2);
        let mut c = Checkpointer::start(&ws2, &cell2, None, hour).unwrap();
        tree(&ws2, &[("pkg/b.py", "y = 2\n")]);
        c.defer(paths(&["pkg/b.py"]));
        tree(&ws2, &[("pkg/new.py", "n\n")]);
        assert_eq!(saved_workspace(&mut c, &cell2, 2, paths(&["pkg/new.py"])), walked(&ws2));
        assert_eq!((c.digests.walks, c.digests.hashed), (0, 3), "a.py's copy and the two written files");
        // A cell that never saves reads nothing at all.
        let (ws3, cell3) = cell(3);
        let c = Checkpointer::start(&ws3, &cell3, None, hour).unwrap();
        assert_eq!((c.digests.hashed, c.digests.walks), (0, 0));
        assert!(!cell3.join(DIR).exists(), "and writes nothing");
    }

    #[test]
    fn the_changes_of_steps_not_saved_reach_the_next_checkpoint_and_a_resume_restores_them() {
        let dir = tempfile::tempdir().unwrap();
        let (fixture, ws, cell) = fresh_copy(dir.path(), &[("a.py", "x = 1\n"), ("b.py", "y = 1\n")]);
        assert!(Checkpointer::start(&ws, &dir.path().join("other"), None, Duration::ZERO).unwrap().due());
        let mut w = TraceWriter::create(&cell.join("trace.jsonl"), "r", "c").unwrap();
        let mut cp = Checkpointer::start(&ws, &cell, None, Duration::from_secs(3600)).unwrap();
        let mut state = LoopState::default();
        let mut step = |w: &mut TraceWriter, n: u32| {
            w.append(EventBody::StateUpdated { step: n, steps_used: n, files_modified: vec![], finished: false })
                .unwrap();
            state.step = n;
            state.clone()
        };
        // Step 1, not saved: the file tools wrote a.py and a file in a new folder.
        tree(&ws, &[("a.py", "x = 2\n"), ("notes/n.txt", "note\n")]);
        step(&mut w, 1);
        assert!(!cp.due());
        cp.defer(Changes::Paths(vec!["a.py".into(), "notes/n.txt".into()]));
        // Step 2, not saved: a command rewrote b.py.
        let out = std::process::Command::new("sh").args(["-c", "printf 'y = 22\\n' > b.py"]).current_dir(&ws).output();
        assert!(out.unwrap().status.success());
        step(&mut w, 2);
        cp.defer(Changes::Anything);
        // Step 3 changed nothing itself, and is saved: with everything since the cell began.
        let at3 = step(&mut w, 3);
        let saved = cp.save(&Changes::None, ("r", "c"), &at3, None, w.position(), (0, 0), 3).unwrap();
        w.append(Checkpointer::event(3, &saved)).unwrap();
        cp.committed();
        let cp_file: Checkpoint<'static> =
            serde_json::from_slice(&std::fs::read(cell.join(&saved.path)).unwrap()).unwrap();
        assert_eq!(cp_file.workspace.as_ref(), &walked(&ws));
        let Some(Entry::File { sha256, .. }) = cp_file.workspace.get("notes/n.txt") else { panic!("{cp_file:?}") };
        assert_eq!(sha256, &sha256_hex(b"note\n"), "a file written at a step not saved");
        // Step 4 is killed after it spoiled the workspace.
        step(&mut w, 4);
        drop((w, cp));
        std::fs::write(ws.join("a.py"), "broken").unwrap();
        std::fs::remove_dir_all(ws.join("notes")).unwrap();
        std::fs::write(ws.join("b.py"), "y = 1\n").unwrap();
        let at = CellPaths { run_id: "r", cell_id: "c", cell_dir: &cell, fixture: &fixture, workspace: &ws };
        let r = resume(&at).map_err(|r| r.0).unwrap();
        assert_eq!((r.from_step, r.workspace_restored, r.discarded_events), (3, true, 1));
        assert_eq!(std::fs::read_to_string(ws.join("a.py")).unwrap(), "x = 2\n");
        assert_eq!(std::fs::read_to_string(ws.join("notes/n.txt")).unwrap(), "note\n");
        assert_eq!(std::fs::read_to_string(ws.join("b.py")).unwrap(), "y = 22\n");
    }

    #[test]
    fn fixture_digests_stored_by_one_process_spare_the_next_its_reads_until_the_fixture_changes() {
        let dir = tempfile::tempdir().unwrap();
        let (fixture, store) = (dir.path().join("fx"), dir.path().join("store"));
        tree(&fixture, &[("a.py", "x = 1\n"), ("pkg/b.py", "y = 1\n"), ("pkg/c.txt", "c")]);
        std::thread::sleep(std::time::Duration::from_millis(2 * (RACY_NS / 1_000_000) as u64));
        let mut n = 0;
        let mut cell = || {
            n += 1;
            let (ws, cell) = (dir.path().join(format!("ws{n}")), dir.path().join(format!("cell{n}")));
            std::fs::create_dir_all(&cell).unwrap();
            let ws = crate::workspace::fresh(&fixture, &ws, &cell.join("workspace")).unwrap();
            let mut c = Checkpointer::start(&ws, &cell, Some(&store), Duration::ZERO).unwrap();
            c.take_digests(&Changes::None).unwrap();
            assert_eq!(c.digests.last.as_ref(), Some(&walked(&ws)), "the digests a walk from nothing takes");
            c.digests.hashed
        };
        // What a new process knows of this fixture: only the store.
        let new_process = || {
            fixture_digests().retain(|path, _| !path.starts_with(&fixture));
            STORED_LOADED.lock().unwrap().retain(|f| *f != fixture);
        };
        assert_eq!(cell(), 3, "nothing stored yet: every copy read");
        let stored = StoredDigests::path(&store, &fixture);
        assert!(stored.is_file());
        new_process();
        assert_eq!(cell(), 0, "every digest from the store");
        // A fixture file rewritten with content of the same size, its modification time put
        // back: its change time moved, so its stored digest is not used.
        let b = fixture.join("pkg/b.py");
        let mtime = std::fs::metadata(&b).unwrap().modified().unwrap();
        std::fs::write(&b, "y = 2\n").unwrap();
        std::fs::File::options().write(true).open(&b).unwrap().set_modified(mtime).unwrap();
        assert_eq!(std::fs::metadata(&b).unwrap().len(), 6, "same size");
        std::thread::sleep(std::time::Duration::from_millis(2 * (RACY_NS / 1_000_000) as u64));
        new_process();
        assert_eq!(cell(), 1, "the changed file read, the others from the store");
        // The store was written again with it: the next process reads nothing.
        new_process();
        assert_eq!(cell(), 0);
        // A store that does not parse is ignored, never trusted.
        std::fs::write(&stored, b"{\"format\":1,\"fixt").unwrap();
        new_process();
        assert_eq!(cell(), 3);
    }

    #[test]
    fn a_fixture_content_is_stored_only_where_the_fixture_does_not_have_it() {
        let dir = tempfile::tempdir().unwrap();
        let (fixture, ws, cell) = fresh_copy(dir.path(), &[("a.py", "x = 1\n"), ("b.py", "y = 1\n")]);
        let link = cell.join("workspace");
        // The first scan of a fresh copy: every file is within the racy window.
        let mut d = Digests::new(&ws, &cell);
        d.scan().unwrap();
        // a.py rewritten with its own content, b.py given a.py's: only the second needs a blob.
        tree(&ws, &[("a.py", "x = 1\n"), ("b.py", "x = 1\n")]);
        let want = d.scan().unwrap();
        let blobs: Vec<String> = stored(&cell).into_keys().collect();
        assert_eq!(blobs, [sha256_hex(b"x = 1\n")], "b.py's new content, once");
        std::fs::remove_dir_all(cell.join(DIR)).unwrap();
        // Without that blob the rebuild cannot give b.py its content; with only a.py unchanged
        // it needs none.
        tree(&ws, &[("b.py", "y = 1\n")]);
        let unchanged = d.scan().unwrap();
        assert!(stored(&cell).is_empty(), "the fixture's own contents: nothing stored");
        std::fs::write(ws.join("a.py"), "broken").unwrap();
        restore(&fixture, &ws, &link, &cell, &unchanged).unwrap();
        assert!(verify(&ws, &cell, &unchanged).is_ok());
        assert!(verify(&ws, &cell, &want).is_err());
    }

    /// A trace of one step with its checkpoint, as the loop writes it; returns the paths.
    fn one_step_cell(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
        let (fixture, ws, cell) = (dir.join("fx"), dir.join("ws"), dir.join("cell"));
        tree(&fixture, &[("a.py", "x = 1\n")]);
        std::fs::create_dir_all(&cell).unwrap();
        crate::workspace::fresh(&fixture, &ws, &cell.join("workspace")).unwrap();
        let mut w = TraceWriter::create(&cell.join("trace.jsonl"), "r", "c").unwrap();
        let mut cp = Checkpointer::start(&ws, &cell, None, Duration::ZERO).unwrap();
        std::fs::write(ws.join("a.py"), "x = 2\n").unwrap();
        w.append(EventBody::StateUpdated { step: 1, steps_used: 1, files_modified: vec![], finished: false }).unwrap();
        let state = LoopState { step: 1, ..LoopState::default() };
        let saved = cp.save(&Changes::Anything, ("r", "c"), &state, None, w.position(), (0, 0), 3).unwrap();
        w.append(Checkpointer::event(1, &saved)).unwrap();
        cp.committed();
        (fixture, ws, cell)
    }

    #[test]
    fn a_resume_after_a_git_commit_rebuilds_a_tampered_object_and_refuses_without_its_content() {
        let dir = tempfile::tempdir().unwrap();
        let (fixture, ws, cell) = fresh_copy(dir.path(), &[("a.py", "x = 1\n")]);
        let mut w = TraceWriter::create(&cell.join("trace.jsonl"), "r", "c").unwrap();
        let mut cp = Checkpointer::start(&ws, &cell, None, Duration::ZERO).unwrap();
        // The step: the agent's session made a repository and committed, as a sessions case does.
        std::fs::write(ws.join("a.py"), "x = 2\n").unwrap();
        for argv in
            [&["init", "-q"][..], &["add", "-A"], &["-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "s1"]]
        {
            let out = std::process::Command::new("git").args(argv).current_dir(&ws).output().unwrap();
            assert!(out.status.success(), "git {argv:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
        w.append(EventBody::StateUpdated { step: 1, steps_used: 1, files_modified: vec![], finished: false }).unwrap();
        let state = LoopState { step: 1, ..LoopState::default() };
        let saved = cp.save(&Changes::Anything, ("r", "c"), &state, None, w.position(), (0, 0), 3).unwrap();
        w.append(Checkpointer::event(1, &saved)).unwrap();
        cp.committed();
        drop((w, cp));
        let paths = CellPaths { run_id: "r", cell_id: "c", cell_dir: &cell, fixture: &fixture, workspace: &ws };
        let ok = resume(&paths).map_err(|r| r.0).unwrap();
        assert!(!ok.workspace_restored, "an intact repository is verified as it is");
        drop(ok);
        // A loose object (its path is the sha1 of its content) spoiled after the checkpoint.
        let objects = ws.join(".git/objects");
        let object = std::fs::read_dir(&objects)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().len() == 2)
            .find_map(|e| std::fs::read_dir(e.path()).unwrap().next().map(|f| f.unwrap().path()))
            .expect("the commit made loose objects");
        let original = std::fs::read(&object).unwrap();
        std::fs::set_permissions(&object, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::write(&object, b"not a zlib stream").unwrap();
        std::fs::set_permissions(&object, std::fs::Permissions::from_mode(0o444)).unwrap();
        let ok = resume(&paths).map_err(|r| r.0).unwrap();
        assert!(ok.workspace_restored, "the object does not match: the workspace is rebuilt");
        assert_eq!(std::fs::read(&object).unwrap(), original, "from the stored content");
        let out = std::process::Command::new("git").args(["fsck", "--strict"]).current_dir(&ws).output().unwrap();
        assert!(out.status.success(), "the rebuilt repository is sound: {}", String::from_utf8_lossy(&out.stderr));
        drop(ok);
        // The contents as runs before the pack stored them, a file each: read all the same.
        let sha = sha256_hex(&original);
        let blobs = cell.join(DIR).join(BLOBS);
        std::fs::create_dir_all(&blobs).unwrap();
        for (sha, bytes) in stored(&cell) {
            std::fs::write(blobs.join(sha), bytes).unwrap();
        }
        std::fs::remove_file(cell.join(DIR).join(PACK)).unwrap();
        std::fs::set_permissions(&object, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::write(&object, b"spoiled in the old layout").unwrap();
        let ok = resume(&paths).map_err(|r| r.0).unwrap();
        assert!(ok.workspace_restored);
        assert_eq!(std::fs::read(&object).unwrap(), original, "from the older layout's file");
        drop(ok);
        // Without the stored content the rebuild cannot give the object back: refused.
        std::fs::remove_file(blobs.join(&sha)).unwrap();
        std::fs::set_permissions(&object, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::write(&object, b"spoiled again").unwrap();
        let e = resume(&paths).err().unwrap().0;
        assert!(e.contains("does not match checkpoint") && e.contains(".git/objects/"), "{e}");
    }

    #[test]
    fn contents_go_to_one_pack_and_a_record_cut_short_is_cut_off_before_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let (fixture, ws, cell) = fresh_copy(dir.path(), &[("a.py", "x = 1\n")]);
        let link = cell.join("workspace");
        let mut d = Digests::new(&ws, &cell);
        d.scan().unwrap();
        tree(&ws, &[("b.py", "one\n"), ("c.py", "two\n"), ("d.py", "two\n")]);
        d.scan().unwrap();
        let pack = cell.join(DIR).join(PACK);
        let whole = std::fs::read(&pack).unwrap();
        assert_eq!(stored(&cell).len(), 2, "one record per content, written once");
        // A kill in the middle of the next append leaves part of a record.
        let mut torn = whole.clone();
        torn.extend_from_slice(b"0123abcd 100\npart of it");
        std::fs::write(&pack, &torn).unwrap();
        let mut again = Digests::new(&ws, &cell);
        assert_eq!(std::fs::read(&pack).unwrap(), whole, "cut back to its whole records");
        again.scan().unwrap();
        tree(&ws, &[("e.py", "three\n")]);
        again.scan().unwrap();
        assert_eq!(stored(&cell).len(), 3, "the next record readable after the earlier ones");
        // Contents larger than one append's bound are written as they come, whole all the same.
        let big = "z".repeat(PACK_WRITE_BYTES + 1);
        tree(&ws, &[("big.txt", big.as_str()), ("f.py", "four\n")]);
        let want = again.scan().unwrap();
        let all = stored(&cell);
        assert_eq!((all.len(), all.get(&sha256_hex(big.as_bytes())).map(Vec::len)), (5, Some(big.len())));
        std::fs::remove_dir_all(&ws).unwrap();
        restore(&fixture, &ws, &link, &cell, &want).unwrap();
        assert!(verify(&ws, &cell, &want).is_ok());
        assert_eq!(std::fs::read_to_string(ws.join("e.py")).unwrap(), "three\n");
        assert_eq!(std::fs::read(ws.join("big.txt")).unwrap().len(), big.len());
    }

    #[test]
    fn checkpoints_take_turns_in_two_files_and_a_kill_mid_write_spoils_neither_named_one() {
        let dir = tempfile::tempdir().unwrap();
        let (fixture, ws, cell) = fresh_copy(dir.path(), &[("a.py", "x = 1\n")]);
        let mut w = TraceWriter::create(&cell.join("trace.jsonl"), "r", "c").unwrap();
        let mut cp = Checkpointer::start(&ws, &cell, None, Duration::ZERO).unwrap();
        let mut state = LoopState::default();
        let mut paths = Vec::new();
        for step in 1..=3 {
            w.append(EventBody::StateUpdated { step, steps_used: step, files_modified: vec![], finished: false })
                .unwrap();
            state.step = step;
            state.observations.push(Observation::new(step, "read_file", format!("read #{step}"), "ok", "x = 1"));
            let saved = cp.save(&Changes::Anything, ("r", "c"), &state, None, w.position(), (0, 0), 3).unwrap();
            w.append(Checkpointer::event(step, &saved)).unwrap();
            cp.committed();
            paths.push(saved.path);
        }
        assert_eq!(paths, ["checkpoint/state-1.json", "checkpoint/state-2.json", "checkpoint/state-1.json"]);
        // Step 4 is killed while its file and its observation are half written: the free slot
        // (not the one step 3's event names) and a log line without its newline.
        w.append(EventBody::StateUpdated { step: 4, steps_used: 4, files_modified: vec![], finished: false }).unwrap();
        std::fs::write(cell.join(DIR).join(SLOTS[1]), "{\"schema_vers").unwrap();
        let mut log = std::fs::OpenOptions::new().append(true).open(cell.join(DIR).join(OBSERVATIONS)).unwrap();
        log.write_all(b"{\"step\":4,\"tool\":\"rea").unwrap();
        drop((w, cp, log));
        let at = CellPaths { run_id: "r", cell_id: "c", cell_dir: &cell, fixture: &fixture, workspace: &ws };
        let mut r = resume(&at).map_err(|r| r.0).unwrap();
        assert_eq!((r.from_step, r.checkpoint_path.as_str()), (3, "checkpoint/state-1.json"));
        assert_eq!(r.checkpoint.state.observations.len(), 3, "every observation named is read back");
        // The resumed cell writes its next checkpoint into the spoiled slot, and its next
        // observation on a line of its own.
        let mut state = r.checkpoint.state.clone().into_owned();
        state.step = 4;
        state.observations.push(Observation::new(4, "read_file", "read #4".into(), "ok", "x = 1"));
        r.writer
            .append(EventBody::StateUpdated { step: 4, steps_used: 4, files_modified: vec![], finished: false })
            .unwrap();
        let saved =
            r.checkpointer.save(&Changes::Anything, ("r", "c"), &state, None, r.writer.position(), (0, 0), 3).unwrap();
        assert_eq!(saved.path, "checkpoint/state-2.json");
        r.writer.append(Checkpointer::event(4, &saved)).unwrap();
        r.checkpointer.committed();
        drop(r);
        let log = std::fs::read_to_string(cell.join(DIR).join(OBSERVATIONS)).unwrap();
        assert_eq!(log.lines().count(), 4, "{log}");
        let again = resume(&at).map_err(|r| r.0).unwrap();
        assert_eq!((again.from_step, again.checkpoint.state.observations.len()), (4, 4));
    }

    #[test]
    fn a_checkpoint_that_does_not_match_its_trace_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (fixture, ws, cell) = one_step_cell(dir.path());
        let paths = CellPaths { run_id: "r", cell_id: "c", cell_dir: &cell, fixture: &fixture, workspace: &ws };
        let ok = resume(&paths).map_err(|r| r.0).unwrap();
        assert_eq!((ok.from_step, ok.discarded_events, ok.workspace_restored), (1, 0, false));
        drop(ok);
        // Another run's cell: refused before anything else is looked at.
        let other = CellPaths { run_id: "r2", ..paths };
        let e = resume(&other).err().unwrap().0;
        assert!(e.contains("an event of run \"r\""), "{e}");
        // The file says the trace ended elsewhere (its sha256 made to match, so the position is
        // what fails).
        let trace = cell.join("trace.jsonl");
        let file = cell.join(DIR).join(SLOTS[0]);
        let text = std::fs::read_to_string(&file).unwrap();
        let moved = text.replacen("\"bytes\":", "\"bytes\":1", 1);
        std::fs::write(&file, &moved).unwrap();
        let t = std::fs::read_to_string(&trace)
            .unwrap()
            .replace(&sha256_hex(text.as_bytes()), &sha256_hex(moved.as_bytes()));
        std::fs::write(&trace, t).unwrap();
        let e = resume(&paths).err().unwrap().0;
        assert!(e.contains("it records the trace at byte 1"), "{e}");
        // No checkpoint at all.
        std::fs::write(&trace, "").unwrap();
        let e = resume(&paths).err().unwrap().0;
        assert!(e.contains("the trace has no checkpoint"), "{e}");
    }

    #[test]
    fn the_loop_state_round_trips_through_a_checkpoint_file() {
        let mut memory = WorkingMemory::new("fix the parser");
        let call = crate::action::Call::from_action(&crate::action::Action::new(
            "read_file",
            serde_json::json!({"path": "a.py"}),
        ))
        .unwrap();
        let out = super::super::tools::ToolOutput {
            ok: true,
            text: "1: def parse():\n".into(),
            read: Some("a.py".into()),
            ..Default::default()
        };
        memory.observe(1, &call, &out);
        let state = LoopState {
            step: 3,
            finished: false,
            invalid_in_a_row: 1,
            repo_map: Some("a.py\n  def parse".into()),
            memory: Some(memory),
            observations: vec![Observation::new(1, "read_file", "read_file a.py".into(), "ok", "1: def parse():")],
            compactor: Compactor::default(),
            files_modified: vec!["a.py".into()],
            first_reads: [("a.py".to_string(), 1)].into(),
            session: Some(SessionProgress {
                index: 2,
                first_step: 3,
                first_reads: [("README.md".to_string(), 1)].into(),
                finished: vec![(0, 0)],
            }),
        };
        let cp = Checkpoint {
            schema_version: CHECKPOINT_SCHEMA_VERSION,
            run_id: "r".into(),
            cell_id: "c".into(),
            step: 3,
            trace: TracePosition { seq: 9, bytes: 900 },
            elapsed_ms: 5,
            input_tokens: 1,
            output_tokens: 2,
            provider: None,
            state: Cow::Borrowed(&state),
            observations: Vec::new(),
            workspace: Cow::Owned(BTreeMap::new()),
        };
        let back: Checkpoint<'static> = serde_json::from_slice(&serde_json::to_vec(&cp).unwrap()).unwrap();
        assert_eq!(back.state.as_ref(), &state);
        let bad = serde_json::to_string(&cp).unwrap().replace("\"status\":\"ok\"", "\"status\":\"maybe\"");
        let e = serde_json::from_str::<Checkpoint<'static>>(&bad).unwrap_err().to_string();
        assert!(e.contains("unknown observation status \"maybe\""), "{e}");
    }
}
