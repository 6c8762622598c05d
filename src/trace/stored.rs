//! How a trace is stored on disk, and the one way every reader opens it, whichever of the
//! three layouts holds it:
//!
//! 1. plain `cells/<id>/trace.jsonl`: a running, cancelled or interrupted cell (it must stay
//!    appendable: the writer adds whole lines, `--resume` continues it, a crash leaves a valid
//!    prefix), and every trace of runs made before compression;
//! 2. `cells/<id>/trace.jsonl.zst`, one zstd frame: a finished cell of runs made before the
//!    pack (read, never written by new runs; [`compress`] remains for tools and tests);
//! 3. the run's pack ([`super::pack`]): a finished cell's frame appended to `cells.pack`, its
//!    plain file removed, and its folder too when nothing else is in it (no artifacts,
//!    delegations, abandoned attempts). This is what new runs write ([`store_finished`]).
//!
//! Every reader names a trace by its plain path (`cells/<id>/trace.jsonl`: what reports,
//! `--resume` and users name) and opens it through [`open`], which looks in that order: the
//! plain file (the newest: a cell run again after its pack entry was written has a plain
//! trace again), its `.zst`, then the pack of the run directory the path lies in. A file that
//! starts with the zstd magic number is decoded whatever it is called.
//!
//! Decompression reuses one zstd context and one buffer per thread ([`Spare`]): a trace is
//! about 10 KB, and setting up a streaming decoder for each one cost as much as decoding it. A
//! frame is decoded whole into the buffer and its lines parsed where they lie; one too large for
//! that is decoded a chunk at a time into the same buffer.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{self, BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use super::pack::{self, Appender, Index, PackWriter, Slot};

/// A cell's trace file name in its folder.
pub const TRACE: &str = "trace.jsonl";

/// The suffix the compressed form adds to the trace's name.
pub const COMPRESSED_SUFFIX: &str = ".zst";

/// zstd's frame magic number, as it appears at the start of a file.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// zstd level. With the dictionary, a finished trace compresses nearly as well at a low level
/// as at a high one, and the level is paid once per cell on the engine's path, where the next
/// cell waits for it. HC-Bench's 43 oracle traces (31 KB on average), one frame each with the
/// dictionary, in the engine between cells (cold caches): level 12 took 2.2 ms a cell for 2,633
/// bytes; level 5 0.57 ms, 3,094 bytes; level 3 0.36-0.40 ms, 3,255 bytes; level 1 0.14 ms,
/// 3,632 bytes (docs/performance.md, "The engine's part of a cell").
const LEVEL: i32 = 3;

/// The dictionaries trace frames are compressed with, by the id zstd writes in each frame's
/// header (so a frame says which one it needs, and `hcbench merge` copies frames between packs
/// undecoded). A finished trace is small (about 10 KB for a HumanEval-sized cell) and a frame
/// starts with no history, so on its own it compresses only about 5x; most of its bytes (keys,
/// event kinds, section and tool names, the shape of every line) are in every trace, and a
/// dictionary of them halves the frame and doubles zstd's decoding speed (docs/performance.md,
/// "Smaller frames"). Every dictionary ever shipped stays in this list, so frames written by
/// any hcbench read forever; frames without a dictionary id (packs and `.zst` files made before
/// dictionaries) read as they always did. How a dictionary is made: src/trace/dict/README.md.
const DICTIONARIES: [(u32, &[u8]); 1] = [(0x4863_0001, include_bytes!("dict/traces-1.zdict"))];

/// The dictionary new frames are compressed with (its id).
const CURRENT_DICTIONARY: u32 = 0x4863_0001;

/// The dictionaries prepared for decoding, once per process (zstd's `DDict` is read-only and
/// shared by every thread's context).
static DECODER_DICTIONARIES: LazyLock<Vec<(u32, zstd::dict::DecoderDictionary<'static>)>> = LazyLock::new(|| {
    DICTIONARIES.iter().map(|(id, bytes)| (*id, zstd::dict::DecoderDictionary::copy(bytes))).collect()
});

/// The current dictionary prepared for compressing at [`LEVEL`], once per process.
static ENCODER_DICTIONARY: LazyLock<zstd::dict::EncoderDictionary<'static>> = LazyLock::new(|| {
    let (_, bytes) =
        DICTIONARIES.iter().find(|(id, _)| *id == CURRENT_DICTIONARY).expect("the current dictionary is listed");
    zstd::dict::EncoderDictionary::copy(bytes, LEVEL)
});

/// The dictionary the frame `frame` was compressed with, when its header names one; an id this
/// build does not have is an error (`what` names the frame): a newer hcbench wrote it.
fn dictionary_of(
    frame: &[u8],
    what: &dyn Fn() -> String,
) -> io::Result<Option<&'static zstd::zstd_safe::DDict<'static>>> {
    let Some(id) = zstd::zstd_safe::get_dict_id_from_frame(frame) else { return Ok(None) };
    match DECODER_DICTIONARIES.iter().find(|(known, _)| *known == id.get()) {
        Some((_, dictionary)) => Ok(Some(dictionary.as_ddict())),
        None => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} was compressed with dictionary {:#x}, which this hcbench does not have (a newer hcbench wrote it); upgrade hcbench",
                what(),
                id.get()
            ),
        )),
    }
}

/// Largest trace decoded in one piece (its size is in its frame header); a larger one is decoded
/// a chunk at a time, so memory stays bounded whatever a trace holds. Chunks also read faster
/// from a few MB up: a chunk is parsed while it is in the cache, where a trace decoded whole is
/// parsed from memory, into a buffer too large to keep (measured on a 34 MB trace: 0.67x the
/// scan floor decoded whole, 0.93x in chunks, loaded machine, 2026-11-24).
const WHOLE_DECODE_MAX: u64 = 1024 * 1024;

/// `path` with [`COMPRESSED_SUFFIX`] appended.
pub fn compressed_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(COMPRESSED_SUFFIX);
    PathBuf::from(name)
}

/// The run directory and cell id of a trace named `<run_dir>/cells/<cell>/trace.jsonl`.
fn pack_name(path: &Path) -> Option<(PathBuf, String)> {
    if path.file_name()? != TRACE {
        return None;
    }
    let cell_dir = path.parent()?;
    let cell = cell_dir.file_name()?.to_str()?.to_string();
    let cells = cell_dir.parent()?;
    if cells.file_name()? != "cells" {
        return None;
    }
    let run_dir = cells.parent()?;
    let run_dir = if run_dir.as_os_str().is_empty() { Path::new(".") } else { run_dir };
    Some((run_dir.to_path_buf(), cell))
}

/// The file that holds the trace named `path`: `path` itself when it exists, else its
/// compressed form when that exists, else `path` when the run's pack holds it or its index
/// cannot be read (open it with [`open`], which says why). None when the trace is stored
/// nowhere.
pub fn locate(path: &Path) -> Option<PathBuf> {
    if path.is_file() {
        return Some(path.to_path_buf());
    }
    let compressed = compressed_path(path);
    if compressed.is_file() {
        return Some(compressed);
    }
    match in_pack(path) {
        Ok(found) => found.map(|_| path.to_path_buf()),
        // An index that cannot be read: [`open`] of this name says why, naming the file.
        Err(_) => Some(path.to_path_buf()),
    }
}

/// The trace of the cell folder `cell_dir`, in whichever form it is stored.
pub fn in_cell(cell_dir: &Path) -> Option<PathBuf> {
    locate(&cell_dir.join(TRACE))
}

/// Opens the trace named `path` for reading its plain bytes (see the module doc for which file
/// that is). A trace that is compressed and corrupt, or a pack index that cannot be read, fails
/// the read with an error naming the file.
pub fn open(path: &Path) -> io::Result<Box<dyn BufRead + Send>> {
    let (file, real) = match File::open(path) {
        Ok(f) => (f, path.to_path_buf()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let compressed = compressed_path(path);
            match File::open(&compressed) {
                Ok(f) => (f, compressed),
                Err(_) => {
                    if let Some((loaded, slot, cell)) = in_pack(path)? {
                        let frame = pack::read_frame(&loaded.pack, &loaded.path, slot)?;
                        return decode(frame, &|| entry_name(&cell, &loaded.path, slot));
                    }
                    // Say the name that was asked for: no form of it exists.
                    return Err(e);
                }
            }
        }
        Err(e) => return Err(e),
    };
    let mut reader = FileChunks { file, chunk: Spare::take_chunk(), pos: 0, filled: 0 };
    if reader.fill_buf()?.starts_with(&ZSTD_MAGIC) {
        let mut frame = Vec::with_capacity(reader.file.metadata().map_or(0, |m| m.len() as usize));
        reader.read_to_end(&mut frame)?;
        return decode(frame, &|| format!("the compressed trace {}", real.display()));
    }
    Ok(Box::new(reader))
}

/// How much of a plain trace file is read at a time: a line is parsed where it lies in the
/// chunk while the chunk is still in the L2 cache (the kernel's copy just put it there).
const READ_CHUNK: usize = 256 * 1024;

/// A plain trace file read [`READ_CHUNK`] bytes at a time into the thread's spare chunk
/// ([`Spare`]), as a `BufReader` reads into a buffer of its own: reading trace after trace, as
/// a report does, then allocates nothing per trace.
struct FileChunks {
    file: File,
    /// [`READ_CHUNK`] bytes, of which `pos..filled` are still to be read.
    chunk: Vec<u8>,
    pos: usize,
    filled: usize,
}

impl Read for FileChunks {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = self.fill_buf()?.read(out)?;
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for FileChunks {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.pos == self.filled {
            // One `read` per chunk; none left at the end of the file.
            self.filled = self.file.read(&mut self.chunk)?;
            self.pos = 0;
        }
        Ok(&self.chunk[self.pos..self.filled])
    }

    fn consume(&mut self, n: usize) {
        self.pos = (self.pos + n).min(self.filled);
    }
}

impl Drop for FileChunks {
    fn drop(&mut self) {
        Spare::give_back_chunk(std::mem::take(&mut self.chunk));
    }
}

/// A reader of the plain bytes of the zstd frame `frame`; `what` names it in errors. A frame
/// whose size its header gives, up to [`WHOLE_DECODE_MAX`], is decoded whole into the thread's
/// spare buffer and read where it lies ([`Decoded`]); a larger one, or one of unknown size, a
/// chunk at a time ([`Streamed`]).
fn decode<'f>(frame: impl Into<Cow<'f, [u8]>>, what: &dyn Fn() -> String) -> io::Result<Box<dyn BufRead + Send>> {
    let frame = frame.into();
    let size = match zstd::zstd_safe::get_frame_content_size(&frame) {
        Ok(size) => size,
        Err(_) => return Err(corrupt(&what(), io::Error::other("no zstd frame header"))),
    };
    let dictionary = dictionary_of(&frame, what)?;
    let Spare { dctx, mut buffer } = Spare::take()?;
    let mut dctx = Some(dctx);
    match size {
        Some(size) if size <= WHOLE_DECODE_MAX => {
            buffer.clear();
            buffer.reserve(size as usize);
            // Told which dictionary explicitly, whatever the context's last use left behind.
            let context = dctx.as_mut().expect("taken above");
            let decoded = match dictionary {
                Some(d) => context.decompress_using_ddict(&mut buffer, &frame, d),
                None => context.decompress_using_dict(&mut buffer, &frame, &[]),
            };
            // The context is free again at once; the buffer goes back when the reader is done.
            Spare::give_back(dctx.take(), Vec::new());
            match decoded {
                Ok(_) => Ok(Box::new(Decoded { plain: buffer, pos: 0 })),
                Err(code) => {
                    Spare::give_back(None, buffer);
                    Err(corrupt(&what(), zstd_error(code)))
                }
            }
        }
        _ => {
            // A new frame from the start, whatever the context's last use left behind.
            let context = dctx.as_mut().expect("taken above");
            let reset = context.reset(zstd::zstd_safe::ResetDirective::SessionOnly).and_then(|_| match dictionary {
                Some(d) => context.ref_ddict(d),
                None => context.disable_dictionary(),
            });
            if let Err(code) = reset {
                return Err(corrupt(&what(), zstd_error(code)));
            }
            buffer.clear();
            buffer.reserve(STREAM_CHUNK);
            Ok(Box::new(Streamed {
                frame: frame.into_owned(),
                read: 0,
                dctx,
                plain: buffer,
                pos: 0,
                done: false,
                what: what(),
            }))
        }
    }
}

/// A reader of the plain bytes of the zstd frame `frame` (with or without a dictionary), as
/// every reader of a stored trace decodes it: for tools and benches.
pub fn decode_frame(frame: &[u8]) -> io::Result<Box<dyn BufRead + Send>> {
    decode(frame, &|| "the frame".to_string())
}

/// The plain bytes of `bytes`, zstd frames back to back (a whole `cells.pack`), each decoded
/// with the dictionary its header names: what `zstd -dc -D DICT` prints, for tools and tests.
pub fn decode_frames(bytes: &[u8]) -> io::Result<Vec<u8>> {
    let mut plain = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let len = zstd::zstd_safe::find_frame_compressed_size(&bytes[at..])
            .map_err(|code| corrupt(&format!("the frame at byte {at}"), zstd_error(code)))?;
        decode_frame(&bytes[at..at + len])?.read_to_end(&mut plain)?;
        at += len;
    }
    Ok(plain)
}

/// zstd's error `code`, by its name.
fn zstd_error(code: usize) -> io::Error {
    io::Error::other(zstd::zstd_safe::get_error_name(code))
}

/// Size of the chunks a frame too large to decode whole is decoded in: well inside the L2 cache,
/// so a chunk is parsed while it is still there.
const STREAM_CHUNK: usize = 512 * 1024;

/// The largest buffer a thread keeps between traces (see [`Spare`]); a larger one is freed.
const SPARE_MAX: usize = WHOLE_DECODE_MAX as usize;

/// What a thread keeps between the traces it reads, because making them anew per trace costs:
/// the zstd decoding context (setting one up cost as much as decoding a 10 KB trace), the
/// buffer the last trace was decoded into (a fresh large buffer costs the kernel's zeroing of
/// every page it touches), and the chunk plain files are read into.
/// A reader takes them while it reads and gives them back when dropped, on whatever thread
/// that is.
#[derive(Default)]
struct SpareSlot {
    dctx: Option<zstd::zstd_safe::DCtx<'static>>,
    buffer: Vec<u8>,
    chunk: Vec<u8>,
}

/// A context and buffer taken from this thread's [`SpareSlot`] (made when it had none).
struct Spare {
    dctx: zstd::zstd_safe::DCtx<'static>,
    buffer: Vec<u8>,
}

thread_local! {
    /// This thread's decoding context and buffer, between traces.
    static SPARE: RefCell<SpareSlot> = RefCell::new(SpareSlot::default());
    /// The encoding context of this thread.
    static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
}

impl Spare {
    fn take() -> io::Result<Spare> {
        let (dctx, buffer) = SPARE.with(|s| {
            let mut slot = s.borrow_mut();
            (slot.dctx.take(), std::mem::take(&mut slot.buffer))
        });
        let dctx = match dctx {
            Some(d) => d,
            None => zstd::zstd_safe::DCtx::try_create()
                .ok_or_else(|| io::Error::other("cannot make a zstd decoding context (out of memory)"))?,
        };
        Ok(Spare { dctx, buffer })
    }

    /// This thread's chunk for reading plain files, [`READ_CHUNK`] bytes (zeroed once per
    /// thread: a `Vec` is read into through its initialized bytes).
    fn take_chunk() -> Vec<u8> {
        let chunk = SPARE.with(|s| std::mem::take(&mut s.borrow_mut().chunk));
        if chunk.len() == READ_CHUNK { chunk } else { vec![0; READ_CHUNK] }
    }

    fn give_back_chunk(chunk: Vec<u8>) {
        let _ = SPARE.try_with(|s| s.borrow_mut().chunk = chunk);
    }

    /// Keeps `dctx` and `buffer` for this thread's next trace (a buffer larger than
    /// [`SPARE_MAX`] is freed, as is the smaller of two).
    fn give_back(dctx: Option<zstd::zstd_safe::DCtx<'static>>, buffer: Vec<u8>) {
        // A thread being torn down has no slot left: the two are simply dropped.
        let _ = SPARE.try_with(|s| {
            let mut slot = s.borrow_mut();
            if dctx.is_some() {
                slot.dctx = dctx;
            }
            if buffer.capacity() <= SPARE_MAX && buffer.capacity() > slot.buffer.capacity() {
                slot.buffer = buffer;
            }
        });
    }
}

/// The plain bytes of a frame decoded whole, read where they lie: a line is parsed in this
/// buffer, never copied out of it.
struct Decoded {
    plain: Vec<u8>,
    pos: usize,
}

impl Read for Decoded {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = (&self.plain[self.pos..]).read(out)?;
        self.pos += n;
        Ok(n)
    }
}

impl BufRead for Decoded {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        Ok(&self.plain[self.pos..])
    }

    fn consume(&mut self, n: usize) {
        self.pos = (self.pos + n).min(self.plain.len());
    }
}

impl Drop for Decoded {
    fn drop(&mut self) {
        Spare::give_back(None, std::mem::take(&mut self.plain));
    }
}

/// A frame decoded [`STREAM_CHUNK`] bytes at a time into one buffer, which lines are parsed in
/// where they lie (only a line the chunk's end cuts is copied, by the reader). Memory stays at
/// the chunk and zstd's window whatever the trace's size. Several frames back to back read as
/// their plain bytes back to back, as `zstd -d` reads them.
struct Streamed {
    frame: Vec<u8>,
    /// How much of `frame` zstd has taken.
    read: usize,
    /// Always Some but in `drop`.
    dctx: Option<zstd::zstd_safe::DCtx<'static>>,
    plain: Vec<u8>,
    pos: usize,
    done: bool,
    what: String,
}

impl Read for Streamed {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = self.fill_buf()?.read(out)?;
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for Streamed {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        while self.pos == self.plain.len() && !self.done {
            self.plain.clear();
            self.pos = 0;
            let dctx = self.dctx.as_mut().expect("only drop takes it");
            let mut input = zstd::zstd_safe::InBuffer::around(&self.frame[self.read..]);
            let mut output = zstd::zstd_safe::OutBuffer::around(&mut self.plain);
            let step = dctx.decompress_stream(&mut output, &mut input);
            let (taken, made) = (input.pos(), output.pos());
            self.read += taken;
            let frame_ended = step.map_err(|code| corrupt(&self.what, zstd_error(code)))? == 0;
            if frame_ended && self.read == self.frame.len() {
                self.done = true;
            } else if taken == 0 && made == 0 && self.read == self.frame.len() {
                return Err(corrupt(&self.what, io::Error::other("the frame ends before its last block")));
            }
        }
        Ok(&self.plain[self.pos..])
    }

    fn consume(&mut self, n: usize) {
        self.pos = (self.pos + n).min(self.plain.len());
    }
}

impl Drop for Streamed {
    fn drop(&mut self) {
        Spare::give_back(self.dctx.take(), std::mem::take(&mut self.plain));
    }
}

/// How errors name `cell`'s entry at `slot` of the pack file `pack`.
fn entry_name(cell: &str, pack: &Path, slot: Slot) -> String {
    format!("the trace of cell {cell} in {} (bytes {} to {})", pack.display(), slot.offset, slot.offset + slot.len)
}

/// The error of a compressed trace (`what` names it) that does not decode, with what to do.
fn corrupt(what: &str, e: io::Error) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "{what} is corrupt ({e}); restore it from a copy or run the cell again (`hcbench matrix --resume RUN_DIR` runs a cell whose trace does not read)"
        ),
    )
}

/// A run's pack as readers hold it: its index and the open pack file, kept per run directory
/// for the life of the process and read again when the index file changes.
struct Loaded {
    /// The index file's (length, modification time, inode) when it was read.
    stamp: (u64, i128, u64),
    slots: HashMap<String, Slot>,
    pack: File,
    path: PathBuf,
}

static PACKS: LazyLock<Mutex<HashMap<PathBuf, Arc<Loaded>>>> = LazyLock::new(Mutex::default);

/// Where the pack of its run holds the trace named `path` (`<run_dir>/cells/<cell>/trace.jsonl`),
/// with the cell's id; none for a name outside a run directory's `cells/`.
fn in_pack(path: &Path) -> io::Result<Option<(Arc<Loaded>, Slot, String)>> {
    let Some((run_dir, cell)) = pack_name(path) else { return Ok(None) };
    Ok(packed_slot(&run_dir, &cell)?.map(|(loaded, slot)| (loaded, slot, cell)))
}

/// Where the pack of `run_dir` holds `cell`'s trace, if it does.
fn packed_slot(run_dir: &Path, cell: &str) -> io::Result<Option<(Arc<Loaded>, Slot)>> {
    let Some(loaded) = load_pack(run_dir)? else { return Ok(None) };
    Ok(loaded.slots.get(cell).copied().map(|slot| (loaded.clone(), slot)))
}

/// The pack of `run_dir` as readers hold it (read again when its index changed), if it has one.
fn load_pack(run_dir: &Path) -> io::Result<Option<Arc<Loaded>>> {
    use std::os::unix::fs::MetadataExt;
    let index_path = run_dir.join(pack::INDEX);
    let meta = match std::fs::metadata(&index_path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let stamp = (meta.len(), meta.mtime() as i128 * 1_000_000_000 + meta.mtime_nsec() as i128, meta.ino());
    let mut packs = PACKS.lock().unwrap_or_else(|p| p.into_inner());
    let loaded = match packs.get(run_dir) {
        Some(l) if l.stamp == stamp => l.clone(),
        _ => {
            let Some(index) = Index::read(run_dir)? else { return Ok(None) };
            let path = run_dir.join(pack::PACK);
            let pack = File::open(&path)?;
            let loaded = Arc::new(Loaded { stamp, slots: index.slots, pack, path });
            packs.insert(run_dir.to_path_buf(), loaded.clone());
            loaded
        }
    };
    Ok(Some(loaded))
}

/// Where one trace of a run is, as [`RunTraces`] found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoredAt {
    /// A file of the cell's folder, plain or `.zst`: opened by its name ([`open`]).
    File,
    /// An entry of the run's pack.
    Packed(Slot),
}

/// Where every trace of one run is, found once, for readers of a whole run (`replay_run`, the
/// report's build), by the rule [`open`] follows per name: a cell whose folder holds a plain or
/// `.zst` trace is read from there (a cell run again after its pack entry was written has a
/// plain trace again, and it is the newer one); any other cell the pack holds, from its entry.
/// What this saves per trace, against [`open`] of its name: for a pack entry, the failed opens
/// of the plain and `.zst` names and the check of the index's stamp. A snapshot: a trace stored
/// after [`RunTraces::scan`] is not seen (a report reads a run that is not being written).
pub struct RunTraces {
    cells_dir: PathBuf,
    /// Cells whose folder holds a trace file.
    files: HashSet<String>,
    pack: Option<Arc<Loaded>>,
}

impl RunTraces {
    /// Finds the traces of the run directory `run_dir`: one listing of its `cells/` (which
    /// holds a folder only for cells that are running, have artifacts, or were stored before
    /// the pack) and its pack's index. NotFound when it has neither `cells/` nor a pack; an
    /// index that cannot be read is an error naming it (see [`Index::read`]).
    pub fn scan(run_dir: &Path) -> io::Result<RunTraces> {
        let cells_dir = run_dir.join("cells");
        let pack = load_pack(run_dir).map_err(|e| match e.kind() {
            // The index is there, so this is a run directory: its pack is missing.
            io::ErrorKind::NotFound => io::Error::other(format!("{}: {e}", run_dir.join(pack::PACK).display())),
            _ => e,
        })?;
        let mut files = HashSet::new();
        match std::fs::read_dir(&cells_dir) {
            Ok(entries) => {
                for entry in entries.filter_map(Result::ok) {
                    let trace = entry.path().join(TRACE);
                    if trace.is_file() || compressed_path(&trace).is_file() {
                        files.insert(entry.file_name().to_string_lossy().into_owned());
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound && pack.is_some() => {}
            Err(e) => return Err(e),
        }
        Ok(RunTraces { cells_dir, files, pack })
    }

    /// Where `cell`'s trace is; None when it is stored nowhere.
    pub fn find(&self, cell: &str) -> Option<StoredAt> {
        if self.files.contains(cell) {
            return Some(StoredAt::File);
        }
        self.pack.as_ref()?.slots.get(cell).map(|slot| StoredAt::Packed(*slot))
    }

    /// Every cell with a trace and where it is, in no particular order; the pack's cells in
    /// the order of their frames in the pack.
    pub fn cells(&self) -> Vec<(String, StoredAt)> {
        let mut out: Vec<(String, StoredAt)> = self.files.iter().map(|c| (c.clone(), StoredAt::File)).collect();
        if let Some(loaded) = &self.pack {
            let start = out.len();
            for (cell, slot) in &loaded.slots {
                if !self.files.contains(cell) {
                    out.push((cell.clone(), StoredAt::Packed(*slot)));
                }
            }
            out[start..].sort_by_key(|(_, at)| match at {
                StoredAt::Packed(slot) => slot.offset,
                StoredAt::File => 0,
            });
        }
        out
    }

    /// The name a reader gives `cell`'s trace (`<run_dir>/cells/<cell>/trace.jsonl`).
    pub fn path(&self, cell: &str) -> PathBuf {
        // One allocation per trace, where two `join`s made two.
        let mut path = PathBuf::with_capacity(self.cells_dir.as_os_str().len() + cell.len() + TRACE.len() + 2);
        path.push(&self.cells_dir);
        path.push(cell);
        path.push(TRACE);
        path
    }

    /// Opens `cell`'s trace, found at `at` by [`RunTraces::find`] or [`RunTraces::cells`].
    pub fn open(&self, cell: &str, at: StoredAt) -> io::Result<Box<dyn BufRead + Send>> {
        match at {
            StoredAt::File => open(&self.path(cell)),
            StoredAt::Packed(slot) => {
                let loaded = self.loaded()?;
                self.open_frame(cell, slot, &pack::read_frame(&loaded.pack, &loaded.path, slot)?)
            }
        }
    }

    /// The bytes of the pack from the start of `first` to the end of `last` (frames of the pack,
    /// `first` not after `last`), in one read: what [`RunTraces::open_frame`] reads frames from
    /// when many are read in pack order.
    pub fn read_span(&self, first: Slot, last: Slot) -> io::Result<Vec<u8>> {
        let loaded = self.loaded()?;
        let span = Slot { offset: first.offset, len: last.offset + last.len - first.offset };
        pack::read_frame(&loaded.pack, &loaded.path, span)
    }

    /// Opens `cell`'s trace from `frame`, its entry's bytes (read by [`RunTraces::read_span`]).
    pub fn open_frame(&self, cell: &str, slot: Slot, frame: &[u8]) -> io::Result<Box<dyn BufRead + Send>> {
        decode(frame, &|| entry_name(cell, &self.cells_dir.with_file_name(pack::PACK), slot))
    }

    fn loaded(&self) -> io::Result<&Arc<Loaded>> {
        self.pack.as_ref().ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "the run has no pack"))
    }
}

/// `plain` as one zstd frame at [`LEVEL`] with the current dictionary (its id in the frame's
/// header), checksummed, its size in the header (so it decodes in one piece), made with this
/// thread's encoding context.
pub fn compress_frame(plain: &[u8]) -> io::Result<Vec<u8>> {
    COMPRESSOR.with(|c| {
        let mut c = c.borrow_mut();
        if c.is_none() {
            let mut compressor = zstd::bulk::Compressor::with_prepared_dictionary(&ENCODER_DICTIONARY)?;
            compressor.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true))?;
            *c = Some(compressor);
        }
        c.as_mut().expect("made above").compress(plain)
    })
}

/// The stored frame of the trace named `path` whatever its layout (a plain trace is
/// compressed): what `hcbench merge` copies into the merged run's pack.
pub fn stored_frame(path: &Path) -> io::Result<Vec<u8>> {
    match std::fs::read(path) {
        Ok(bytes) if bytes.starts_with(&ZSTD_MAGIC) => return Ok(bytes),
        Ok(bytes) => return compress_frame(&bytes),
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        Err(_) => {}
    }
    match std::fs::read(compressed_path(path)) {
        Ok(bytes) => return Ok(bytes),
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        Err(_) => {}
    }
    if let Some((loaded, slot, _)) = in_pack(path)? {
        return pack::read_frame(&loaded.pack, &loaded.path, slot);
    }
    Err(io::Error::new(io::ErrorKind::NotFound, format!("no trace at {}", path.display())))
}

/// Stores the finished plain trace of `cell`'s folder `cell_dir` in the run's pack (see the
/// module doc), then removes the plain file, the cell's `workspace` link when the run's one
/// `workspaces` link reaches the same folder (src/workspace.rs), and the folder when that
/// leaves it empty ([`tidy_cell_dir`], which the caller may run on another thread: removing a
/// folder waits on the file system's journal, 0.1-2 ms here). A crash after the append leaves
/// the plain file too: readers read it (the same bytes) and `--resume` finishes the move
/// ([`settle`]).
pub fn store_finished(pack: &Appender, cell: &str, cell_dir: &Path) -> io::Result<()> {
    let trace = cell_dir.join(TRACE);
    let plain = std::fs::read(&trace)?;
    let frame = compress_frame(&plain)?;
    pack.append(cell, &frame)?;
    std::fs::remove_file(&trace)?;
    Ok(())
}

/// `--resume` of a cell that ended and still has its plain trace: stores it in the pack,
/// unless the pack already holds these very bytes (a crash came between the append and the
/// removal), then removes the plain file as [`store_finished`] does.
pub fn settle(writer: &mut PackWriter, run_dir: &Path, cell: &str, cell_dir: &Path) -> io::Result<()> {
    let trace = cell_dir.join(TRACE);
    let plain = std::fs::read(&trace)?;
    let stored = match packed_slot(run_dir, cell)? {
        Some((loaded, slot)) => {
            let frame = pack::read_frame(&loaded.pack, &loaded.path, slot)?;
            let mut bytes = Vec::new();
            // An entry that does not decode is not these bytes: the plain file is stored again.
            let _ = decode(frame, &String::new).and_then(|mut r| r.read_to_end(&mut bytes));
            bytes == plain
        }
        None => false,
    };
    if !stored {
        writer.append(cell, &compress_frame(&plain)?)?;
    }
    std::fs::remove_file(&trace)?;
    tidy_cell_dir(run_dir, cell, cell_dir);
    Ok(())
}

/// Removes what a finished cell's folder no longer needs: its retired checkpoints
/// (`agent::retire_checkpoints`), its `workspace` link when the run's `workspaces` link reaches
/// the same place, then the folder itself when it is empty.
pub fn tidy_cell_dir(run_dir: &Path, cell: &str, cell_dir: &Path) {
    crate::process::remove_folder(&cell_dir.join(crate::agent::RETIRED_CHECKPOINTS));
    let link = cell_dir.join("workspace");
    if link.symlink_metadata().is_ok_and(|m| m.file_type().is_symlink()) {
        let through_run = crate::workspace::of_cell(run_dir, cell).canonicalize().ok();
        if through_run.is_some() && link.canonicalize().ok() == through_run {
            let _ = std::fs::remove_file(&link);
        }
    }
    // Fails, as it should, when the cell has anything else there (artifacts, delegations...).
    let _ = std::fs::remove_dir(cell_dir);
}

/// Writes every trace of `run_dir`'s pack back as a file of its cell's folder, plain or (with
/// `compressed`) as `trace.jsonl.zst`, and removes the pack: the layouts of earlier runs, for
/// benches and tests of readers of old run directories.
pub fn unpack(run_dir: &Path, compressed: bool) -> io::Result<()> {
    let Some(index) = Index::read(run_dir)? else { return Ok(()) };
    for cell in &index.order {
        let dir = run_dir.join("cells").join(cell);
        std::fs::create_dir_all(&dir)?;
        let trace = dir.join(TRACE);
        let frame = stored_frame(&trace)?;
        if compressed {
            std::fs::write(compressed_path(&trace), &frame)?;
        } else {
            let mut plain = Vec::new();
            decode(frame, &|| trace.display().to_string())?.read_to_end(&mut plain)?;
            std::fs::write(&trace, plain)?;
        }
    }
    std::fs::remove_file(run_dir.join(pack::PACK))?;
    std::fs::remove_file(run_dir.join(pack::INDEX))
}

/// Replaces the finished plain trace `path` by its compressed form `path.zst` (the layout of
/// runs made before the pack; tools and tests): written beside it under a temporary name,
/// synced and renamed into place, and only then is the plain file removed. Returns the
/// compressed file. A trace already compressed is left as it is.
pub fn compress(path: &Path) -> io::Result<PathBuf> {
    let packed = compressed_path(path);
    if !path.exists() && packed.is_file() {
        return Ok(packed);
    }
    let mut plain = File::open(path)?;
    let size = plain.metadata().ok().map(|m| m.len());
    crate::util::write_atomic_streamed(&packed, true, |out| -> io::Result<()> {
        let mut encoder = encoder(out)?;
        encoder.set_pledged_src_size(size)?;
        io::copy(&mut plain, &mut encoder)?;
        encoder.finish().map(|_| ())
    })
    .map_err(|e| match e {
        crate::util::StreamError::Io(e) | crate::util::StreamError::Writer(e) => e,
    })?;
    std::fs::remove_file(path)?;
    Ok(packed)
}

/// Turns a compressed trace back into the plain, appendable `path` (the writer needs one to
/// append to); nothing to do when `path` exists or the trace is not stored compressed beside
/// it. A trace in the pack is left there: a plain file, once written, is read first.
pub fn restore_plain(path: &Path) -> io::Result<()> {
    if path.exists() {
        return Ok(());
    }
    let packed = compressed_path(path);
    if packed.is_file() {
        let mut bytes = Vec::new();
        open(&packed)?.read_to_end(&mut bytes)?;
        crate::util::write_atomic(path, &bytes)?;
        return std::fs::remove_file(&packed);
    }
    if let Some((run_dir, cell)) = pack_name(path)
        && packed_slot(&run_dir, &cell)?.is_some()
    {
        let mut bytes = Vec::new();
        open(path)?.read_to_end(&mut bytes)?;
        std::fs::create_dir_all(path.parent().expect("a cell folder"))?;
        crate::util::write_atomic(path, &bytes)?;
    }
    Ok(())
}

/// Writes `bytes` to `out` as one zstd frame (tests and benches that make compressed traces).
pub fn encode(bytes: &[u8], out: impl Write) -> io::Result<()> {
    let mut encoder = encoder(out)?;
    encoder.write_all(bytes)?;
    encoder.finish().map(|_| ())
}

/// The streaming encoder of [`compress`] and [`encode`]: one frame at [`LEVEL`], checksummed.
fn encoder<W: Write>(out: W) -> io::Result<zstd::stream::write::Encoder<'static, W>> {
    let mut encoder = zstd::stream::write::Encoder::new(out, LEVEL)?;
    encoder.include_checksum(true)?;
    Ok(encoder)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(path: &Path) -> io::Result<Vec<u8>> {
        let mut v = Vec::new();
        open(path)?.read_to_end(&mut v)?;
        Ok(v)
    }

    #[test]
    fn a_compressed_trace_reads_back_byte_for_byte_under_either_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.jsonl");
        let text: Vec<u8> = (0..500).flat_map(|i| format!("{{\"seq\":{i},\"kind\":\"x\"}}\n").into_bytes()).collect();
        std::fs::write(&path, &text).unwrap();
        let packed = compress(&path).unwrap();
        assert_eq!(packed, dir.path().join("trace.jsonl.zst"));
        assert!(!path.exists(), "the plain file is gone once the compressed one is in place");
        assert!(std::fs::metadata(&packed).unwrap().len() < text.len() as u64 / 4);
        assert_eq!(read_all(&path).unwrap(), text, "the plain name finds the compressed file");
        assert_eq!(read_all(&packed).unwrap(), text);
        assert_eq!(locate(&path), Some(packed.clone()));
        assert_eq!(compress(&path).unwrap(), packed, "compressing twice is harmless");
        restore_plain(&path).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), text);
        assert!(!packed.exists());
        assert_eq!(locate(&path), Some(path.clone()));
    }

    /// `n` numbered lines of about 24 bytes.
    fn lines(n: usize) -> Vec<u8> {
        (0..n).flat_map(|i| format!("{{\"seq\":{i},\"kind\":\"x\"}}\n").into_bytes()).collect()
    }

    /// Frames decoded whole (their header gives their size, up to [`WHOLE_DECODE_MAX`]) and a
    /// chunk at a time (larger, or no size in the header: written by a stream in pieces) read
    /// alike, over several chunks; several readers open at once, and one after another on the
    /// buffer the last one left, each read their own bytes.
    #[test]
    fn frames_read_alike_decoded_whole_or_in_chunks() {
        let (medium, large) = (lines(40_000), lines(60_000));
        assert!(medium.len() as u64 <= WHOLE_DECODE_MAX && medium.len() > STREAM_CHUNK);
        assert!(large.len() as u64 > WHOLE_DECODE_MAX && large.len() > 2 * STREAM_CHUNK);
        let mut no_size = Vec::new();
        let mut encoder = encoder(&mut no_size).unwrap();
        for piece in large.chunks(1000) {
            encoder.write_all(piece).unwrap();
        }
        encoder.finish().unwrap();
        assert_eq!(zstd::zstd_safe::get_frame_content_size(&no_size).ok(), Some(None));
        let short = lines(10);
        for (frame, text) in [
            (compress_frame(&medium).unwrap(), &medium),
            (compress_frame(&large).unwrap(), &large),
            (no_size.clone(), &large),
        ] {
            let mut a = decode(frame.clone(), &String::new).unwrap();
            let mut b = decode(compress_frame(&short).unwrap(), &String::new).unwrap();
            let (mut read_a, mut read_b) = (Vec::new(), Vec::new());
            a.read_to_end(&mut read_a).unwrap();
            b.read_to_end(&mut read_b).unwrap();
            assert_eq!((read_a == *text, read_b == short), (true, true));
            drop((a, b));
            let n = text.iter().filter(|b| **b == b'\n').count();
            for _ in 0..2 {
                let seen: Vec<String> =
                    decode(frame.clone(), &String::new).unwrap().lines().map(Result::unwrap).collect();
                assert_eq!(seen.len(), n);
                assert_eq!(seen[n - 1], format!("{{\"seq\":{},\"kind\":\"x\"}}", n - 1));
                let mut small = Vec::new();
                decode(compress_frame(&short).unwrap(), &String::new).unwrap().read_to_end(&mut small).unwrap();
                assert_eq!(small, short, "a short trace decoded into the larger buffer left behind");
            }
        }
        // Frames back to back read as their bytes back to back, as `zstd -d` reads them.
        let mut two = no_size.clone();
        two.extend_from_slice(&no_size);
        let mut both = Vec::new();
        decode(two, &String::new).unwrap().read_to_end(&mut both).unwrap();
        assert_eq!(both.len(), 2 * large.len());
        assert_eq!(&both[large.len()..], large.as_slice());
    }

    /// A plain trace larger than a read chunk reads back whole, by bytes and by lines, also
    /// while another is open on the same thread and after one was.
    #[test]
    fn a_plain_trace_reads_back_over_several_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let (long, short) = (dir.path().join("long/trace.jsonl"), dir.path().join("short/trace.jsonl"));
        let text = lines(60_000);
        assert!(text.len() > 2 * READ_CHUNK);
        for (path, bytes) in [(&long, &text), (&short, &lines(10))] {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, bytes).unwrap();
        }
        let mut open_meanwhile = open(&short).unwrap();
        for _ in 0..2 {
            assert_eq!(read_all(&long).unwrap(), text);
            assert_eq!(open(&long).unwrap().lines().count(), 60_000);
            assert_eq!(read_all(&short).unwrap(), lines(10));
        }
        let mut first = Vec::new();
        open_meanwhile.read_to_end(&mut first).unwrap();
        assert_eq!(first, lines(10));
    }

    /// A frame cut short or with a byte changed is an error naming the trace, either way it is
    /// decoded.
    #[test]
    fn a_cut_or_damaged_frame_is_an_error_either_way_it_is_decoded() {
        let text = lines(60_000);
        let sized = compress_frame(&text).unwrap();
        let mut no_size = Vec::new();
        encode(&text, &mut no_size).unwrap();
        let what = || "the trace of cell c".to_string();
        for frame in [&sized, &no_size] {
            let mut damaged = frame.clone();
            let n = damaged.len();
            damaged[n / 2] ^= 0x5a;
            for bad in [frame[..frame.len() - 10].to_vec(), frame[..frame.len() / 2].to_vec(), damaged] {
                let mut out = Vec::new();
                let e = decode(bad, &what).and_then(|mut r| r.read_to_end(&mut out)).unwrap_err();
                assert_eq!(e.kind(), io::ErrorKind::InvalidData);
                assert!(e.to_string().starts_with("the trace of cell c is corrupt ("), "{e}");
            }
        }
    }

    #[test]
    fn a_corrupt_compressed_trace_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.jsonl");
        let text: Vec<u8> = (0..2000).flat_map(|i| format!("{{\"seq\":{i}}}\n").into_bytes()).collect();
        let mut packed = Vec::new();
        encode(&text, &mut packed).unwrap();
        let n = packed.len();
        packed[n / 2] ^= 0xff;
        packed[n / 2 + 1] ^= 0xff;
        std::fs::write(compressed_path(&path), &packed).unwrap();
        let e = read_all(&path).unwrap_err().to_string();
        assert!(e.contains("trace.jsonl.zst is corrupt") && e.contains("run the cell again"), "{e}");
        let missing = read_all(&dir.path().join("none/trace.jsonl")).unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
    }

    /// A frame as packs and `.zst` files made before dictionaries hold them: level 12,
    /// checksummed, no dictionary.
    fn frame_without_dictionary(plain: &[u8]) -> Vec<u8> {
        let mut c = zstd::bulk::Compressor::new(LEVEL).unwrap();
        c.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true)).unwrap();
        c.compress(plain).unwrap()
    }

    /// New frames carry the current dictionary's id and are smaller; frames without one (every
    /// pack made before) read as before; decoded whole and in chunks, one after another on the
    /// same thread's context, each reads its own bytes. An id this build does not know is an
    /// error saying to upgrade.
    #[test]
    fn frames_with_and_without_the_dictionary_read_alike() {
        let real =
            std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/trace/bugfix-1.jsonl")).unwrap();
        let (new, old) = (compress_frame(&real).unwrap(), frame_without_dictionary(&real));
        let id = |f: &[u8]| zstd::zstd_safe::get_dict_id_from_frame(f).map(|i| i.get());
        assert_eq!((id(&new), id(&old)), (Some(CURRENT_DICTIONARY), None));
        assert!(new.len() * 3 < old.len() * 2, "{} bytes with the dictionary, {} without", new.len(), old.len());
        let large = lines(60_000);
        let (new_large, old_large) = (compress_frame(&large).unwrap(), frame_without_dictionary(&large));
        assert!(large.len() as u64 > WHOLE_DECODE_MAX);
        for _ in 0..2 {
            for (frame, text) in
                [(&new_large, &large), (&old, &real), (&old_large, &large), (&new, &real), (&old, &real)]
            {
                let mut out = Vec::new();
                decode(frame.as_slice(), &String::new).unwrap().read_to_end(&mut out).unwrap();
                assert!(out == *text, "a frame of {} bytes read back wrong", frame.len());
            }
        }
        // The same frame claiming a dictionary of a newer hcbench.
        let mut unknown = new.clone();
        let at = unknown[..12].windows(4).position(|w| w == CURRENT_DICTIONARY.to_le_bytes()).unwrap();
        unknown[at..at + 4].copy_from_slice(&(CURRENT_DICTIONARY + 1).to_le_bytes());
        let e = decode(unknown, &|| "the trace of cell c".to_string()).err().unwrap().to_string();
        assert!(
            e.contains("the trace of cell c was compressed with dictionary 0x48630002")
                && e.contains("upgrade hcbench"),
            "{e}"
        );
    }

    /// A run's traces found once read as [`open`] reads each name, whatever holds them: pack
    /// entries with and without the dictionary, a re-run cell's plain trace over its pack
    /// entry, a `.zst` file of the layout before the pack; a folder without a trace is no cell.
    #[test]
    fn a_run_found_once_reads_as_each_name_opened() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path();
        let cells = run.join("cells");
        let text = |k: usize| lines(50 + k);
        let mut w = PackWriter::open(run).unwrap();
        w.append("a", &frame_without_dictionary(&text(1))).unwrap();
        w.append("b", &compress_frame(&text(2)).unwrap()).unwrap();
        w.append("c", &compress_frame(b"the run before\n").unwrap()).unwrap();
        w.append("f", &compress_frame(&text(6)).unwrap()).unwrap();
        drop(w);
        for (cell, name, bytes) in [("c", TRACE, text(3)), ("d", "trace.jsonl.zst", frame_without_dictionary(&text(4)))]
        {
            std::fs::create_dir_all(cells.join(cell)).unwrap();
            std::fs::write(cells.join(cell).join(name), bytes).unwrap();
        }
        std::fs::create_dir_all(cells.join("e/artifacts")).unwrap();
        let traces = RunTraces::scan(run).unwrap();
        let mut found = traces.cells();
        let packed: Vec<&str> = found.iter().filter(|(_, at)| *at != StoredAt::File).map(|(c, _)| c.as_str()).collect();
        assert_eq!(packed, ["a", "b", "f"], "the pack's cells in pack order");
        found.sort_by(|x, y| x.0.cmp(&y.0));
        let names: Vec<(&str, bool)> = found.iter().map(|(c, at)| (c.as_str(), *at == StoredAt::File)).collect();
        assert_eq!(names, [("a", false), ("b", false), ("c", true), ("d", true), ("f", false)]);
        for (k, (cell, at)) in [1, 2, 3, 4, 6].into_iter().zip(&found) {
            let mut out = Vec::new();
            traces.open(cell, *at).unwrap().read_to_end(&mut out).unwrap();
            assert_eq!((out == text(k), read_all(&traces.path(cell)).unwrap() == text(k)), (true, true), "cell {cell}");
        }
        assert_eq!((traces.find("e"), traces.find("zz")), (None, None));
        // Frames read in one span, decoded where they lie.
        let (Some(StoredAt::Packed(a)), Some(StoredAt::Packed(f))) = (traces.find("a"), traces.find("f")) else {
            panic!()
        };
        let span = traces.read_span(a, f).unwrap();
        let mut out = Vec::new();
        let last = &span[(f.offset - a.offset) as usize..];
        traces.open_frame("f", f, last).unwrap().read_to_end(&mut out).unwrap();
        assert_eq!(out, text(6));
        // Neither cells/ nor a pack: not a run. An index that does not read: an error naming it.
        assert_eq!(RunTraces::scan(&run.join("none")).err().unwrap().kind(), io::ErrorKind::NotFound);
        std::fs::write(run.join(pack::INDEX), "not an index\n").unwrap();
        let e = RunTraces::scan(run).err().unwrap().to_string();
        assert!(e.contains("cells.pack.index: line 1 is not a pack index header"), "{e}");
    }

    /// A finished cell's retired checkpoints go with its folder, which is removed once empty;
    /// a folder with artifacts keeps them and stays.
    #[test]
    fn tidying_a_cells_folder_removes_its_retired_checkpoints() {
        let run = tempfile::tempdir().unwrap();
        let cell = run.path().join("cells").join("bugfix-1");
        let retired = cell.join(crate::agent::RETIRED_CHECKPOINTS);
        std::fs::create_dir_all(retired.join("blobs")).unwrap();
        std::fs::write(retired.join("state-1.json"), "{}").unwrap();
        std::fs::write(retired.join("blobs").join("ab"), "x").unwrap();
        tidy_cell_dir(run.path(), "bugfix-1", &cell);
        assert!(!cell.exists(), "nothing was left in the cell's folder");

        std::fs::create_dir_all(retired.join("blobs")).unwrap();
        std::fs::create_dir_all(cell.join("artifacts")).unwrap();
        std::fs::write(cell.join("artifacts").join("step-001-read_file.txt"), "out").unwrap();
        tidy_cell_dir(run.path(), "bugfix-1", &cell);
        assert!(!retired.exists());
        assert!(cell.join("artifacts").join("step-001-read_file.txt").is_file(), "artifacts stay");
    }
}
