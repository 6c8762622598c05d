//! The run's pack of finished traces: `cells.pack` (the traces, one zstd frame each, back to
//! back) and `cells.pack.index` (which cell's frame is where), beside the run's `cells/`.
//!
//! Why one file rather than a file per cell: a finished HumanEval-sized trace compresses to
//! under 1 KB (with the trace dictionary, src/trace/stored.rs), and a file of its own (in a
//! folder of its own) costs two 4 KiB blocks whatever its size; appended to one file it costs
//! its bytes. Frames stay independent (each names the dictionary it needs), so any one trace is
//! read with one positioned read, and `zstd -dc -D src/trace/dict/traces-1.zdict cells.pack`
//! prints them all.
//!
//! Invariants, enforced by [`PackWriter`], the only code that writes a pack:
//! - both files are append-only; one writer per pack (the run directory's `.lock` keeps other
//!   processes out, and [`Appender`] serializes the cells of this one);
//! - a frame is written whole before its index line, and an index line is one `write`; so a
//!   crash leaves at worst a frame without its line, or a cut last line, never a line whose
//!   frame is missing. Readers ignore both (the cell reads as not stored); the next writer
//!   ([`PackWriter::open`], at `--resume`) cuts them off before appending;
//! - an entry's frame starts where the previous one ended; a later entry for the same cell
//!   replaces an earlier one (`--resume --retry-errors` runs a cell again);
//! - no `fsync` per append (it would cost more than the rest of a cell's bookkeeping): the
//!   files are synced when the batch ends ([`Appender::finish`]). A power cut may lose the last
//!   cells' entries; they read as not run, and `--resume` runs them again. Nothing is misread:
//!   an entry past the end of the pack is ignored, and every frame carries zstd's checksum.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// The pack's name in the run directory.
pub const PACK: &str = "cells.pack";
/// Its index's name.
pub const INDEX: &str = "cells.pack.index";
/// What the index's first line says it is.
const FORMAT: &str = "hcbench-cells-pack";
/// Version of the index's lines.
pub const INDEX_SCHEMA_VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
struct Header {
    format: String,
    schema_version: u32,
}

/// One line of the index after its header: `cell`'s frame is `len` bytes at `offset`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Line {
    cell: String,
    offset: u64,
    len: u64,
}

/// Where a cell's frame is in the pack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub offset: u64,
    pub len: u64,
}

/// A pack's index as read: the cells whose frames are whole in the pack, and how much of each
/// file is valid (what a torn tail is cut to).
#[derive(Debug, Default)]
pub struct Index {
    /// Cell id -> its latest frame.
    pub slots: HashMap<String, Slot>,
    /// Cell ids in the order their latest entry was appended.
    pub order: Vec<String>,
    /// Where the last whole frame ends in the pack.
    pub pack_end: u64,
    /// Where the last whole, valid line ends in the index.
    pub index_end: u64,
}

fn invalid(path: &Path, what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("{}: {what}", path.display()))
}

impl Index {
    /// Reads the index of the pack in `run_dir`; None when the run has no pack. See the module
    /// doc for what a torn tail is; anything else wrong is an error naming the file and line.
    pub fn read(run_dir: &Path) -> io::Result<Option<Index>> {
        let path = run_dir.join(INDEX);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let pack_len = match std::fs::metadata(run_dir.join(PACK)) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
            Err(e) => return Err(e),
        };
        Index::parse(&path, &bytes, pack_len).map(Some)
    }

    fn parse(path: &Path, bytes: &[u8], pack_len: u64) -> io::Result<Index> {
        let fix = "restore the run directory from a copy, or remove cells.pack and cells.pack.index and run `hcbench matrix --resume` to run its finished cells again";
        let mut index = Index::default();
        let mut at = 0usize;
        let mut number = 0usize;
        while at < bytes.len() {
            number += 1;
            let Some(len) = bytes[at..].iter().position(|b| *b == b'\n') else {
                // A cut last line: the append it belonged to did not finish.
                break;
            };
            let text = &bytes[at..at + len];
            if number == 1 {
                let header: Header = serde_json::from_slice(text)
                    .map_err(|e| invalid(path, format!("line 1 is not a pack index header ({e}); {fix}")))?;
                if header.format != FORMAT {
                    return Err(invalid(
                        path,
                        format!("line 1: `format` is {:?}, not {FORMAT:?}; {fix}", header.format),
                    ));
                }
                if header.schema_version > INDEX_SCHEMA_VERSION {
                    return Err(invalid(
                        path,
                        format!(
                            "line 1: `schema_version` {} is newer than this hcbench reads ({INDEX_SCHEMA_VERSION}); upgrade hcbench",
                            header.schema_version
                        ),
                    ));
                }
            } else {
                let line: Line = serde_json::from_slice(text)
                    .map_err(|e| invalid(path, format!("line {number} is not a pack entry ({e}); {fix}")))?;
                if line.offset != index.pack_end {
                    return Err(invalid(
                        path,
                        format!(
                            "line {number}: cell {} starts at byte {} of cells.pack, but the entry before it ends at {}; {fix}",
                            line.cell, line.offset, index.pack_end
                        ),
                    ));
                }
                if line.offset + line.len > pack_len {
                    // Its frame did not all reach the pack (a crash, or a power cut before
                    // the pack was synced): the torn tail; nothing after it can be whole.
                    break;
                }
                index.pack_end = line.offset + line.len;
                if index.slots.insert(line.cell.clone(), Slot { offset: line.offset, len: line.len }).is_some() {
                    index.order.retain(|c| *c != line.cell);
                }
                index.order.push(line.cell);
            }
            at += len + 1;
            index.index_end = at as u64;
        }
        Ok(index)
    }
}

/// The one writer of a run's pack.
pub struct PackWriter {
    run_dir: PathBuf,
    pack: File,
    index: File,
    /// Where the next frame starts.
    end: u64,
    line: Vec<u8>,
}

impl PackWriter {
    /// Opens the pack of `run_dir` for appending, creating it when there is none, and cuts a
    /// torn tail (a frame without its line, a cut line) off both files first.
    pub fn open(run_dir: &Path) -> io::Result<PackWriter> {
        let index = Index::read(run_dir)?.unwrap_or_default();
        let options = || OpenOptions::new().create(true).append(true).clone();
        let pack = options().open(run_dir.join(PACK))?;
        let index_file = options().open(run_dir.join(INDEX))?;
        if pack.metadata()?.len() != index.pack_end {
            pack.set_len(index.pack_end)?;
        }
        if index_file.metadata()?.len() != index.index_end {
            index_file.set_len(index.index_end)?;
        }
        let mut writer = PackWriter {
            run_dir: run_dir.to_path_buf(),
            pack,
            index: index_file,
            end: index.pack_end,
            line: Vec::new(),
        };
        if index.index_end == 0 {
            let header = Header { format: FORMAT.into(), schema_version: INDEX_SCHEMA_VERSION };
            writer.line = serde_json::to_vec(&header).map_err(io::Error::other)?;
            writer.line.push(b'\n');
            writer.index.write_all(&writer.line)?;
        }
        Ok(writer)
    }

    /// Appends `frame` (one whole zstd frame) as `cell`'s trace: the frame, then its line.
    pub fn append(&mut self, cell: &str, frame: &[u8]) -> io::Result<Slot> {
        let slot = Slot { offset: self.end, len: frame.len() as u64 };
        self.line.clear();
        serde_json::to_writer(&mut self.line, &Line { cell: cell.to_string(), offset: slot.offset, len: slot.len })
            .map_err(io::Error::other)?;
        self.line.push(b'\n');
        let written = self.pack.write_all(frame).and_then(|()| self.index.write_all(&self.line));
        if let Err(e) = written {
            // Leave no frame without a line behind, so the next append's offset is right.
            let _ = self.pack.set_len(self.end);
            return Err(invalid(&self.run_dir.join(PACK), format!("cannot append the trace of cell {cell}: {e}")));
        }
        self.end += slot.len;
        Ok(slot)
    }

    /// Syncs both files to disk.
    pub fn sync(&self) -> io::Result<()> {
        self.pack.sync_data()?;
        self.index.sync_data()
    }
}

/// The frame stored for `slot` in the pack of `run_dir`, read with one positioned read.
pub fn read_frame(pack: &File, pack_path: &Path, slot: Slot) -> io::Result<Vec<u8>> {
    let mut frame = vec![0u8; slot.len as usize];
    pack.read_exact_at(&mut frame, slot.offset)
        .map_err(|e| invalid(pack_path, format!("cannot read {} bytes at {}: {e}", slot.len, slot.offset)))?;
    Ok(frame)
}

/// A batch's way into its run's pack: opened on the first finished cell, shared by all the
/// batch's cells, each append made under its lock. See the module doc for the sync policy.
pub struct Appender {
    run_dir: PathBuf,
    writer: Mutex<Option<PackWriter>>,
}

impl Appender {
    pub fn new(run_dir: &Path) -> Appender {
        Appender { run_dir: run_dir.to_path_buf(), writer: Mutex::new(None) }
    }

    /// The run directory whose pack this is.
    pub fn run_dir(&self) -> &Path {
        &self.run_dir
    }

    /// Appends `frame` as `cell`'s trace.
    pub fn append(&self, cell: &str, frame: &[u8]) -> io::Result<Slot> {
        let mut guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            *guard = Some(PackWriter::open(&self.run_dir)?);
        }
        guard.as_mut().expect("opened above").append(cell, frame)
    }

    /// Syncs the pack when anything was appended (the end of a batch).
    pub fn finish(&self) -> io::Result<()> {
        match self.writer.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            Some(w) => w.sync(),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_torn_tail_is_ignored_by_readers_and_cut_by_the_next_writer() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = PackWriter::open(dir.path()).unwrap();
        w.append("a", b"AAAA").unwrap();
        w.append("b", b"BB").unwrap();
        w.append("a", b"CCC").unwrap();
        drop(w);
        let index = Index::read(dir.path()).unwrap().unwrap();
        assert_eq!(index.order, ["b", "a"], "a later entry replaces an earlier one");
        assert_eq!(index.slots["a"], Slot { offset: 6, len: 3 });
        let good_index = std::fs::read(dir.path().join(INDEX)).unwrap();
        // A crash mid-append: a frame written without its line, then a cut line.
        let mut pack = OpenOptions::new().append(true).open(dir.path().join(PACK)).unwrap();
        pack.write_all(b"DDDDD").unwrap();
        let mut idx = OpenOptions::new().append(true).open(dir.path().join(INDEX)).unwrap();
        idx.write_all(b"{\"cell\":\"d\",\"off").unwrap();
        let index = Index::read(dir.path()).unwrap().unwrap();
        assert_eq!((index.order.len(), index.pack_end), (2, 9), "readers see the whole entries only");
        // A line whose frame never reached the pack (a power cut) is ignored too.
        idx.write_all(b"set\":9,\"len\":50}\n").unwrap();
        assert!(!Index::read(dir.path()).unwrap().unwrap().slots.contains_key("d"));
        let mut w = PackWriter::open(dir.path()).unwrap();
        assert_eq!(std::fs::read(dir.path().join(INDEX)).unwrap(), good_index, "the torn tail is cut");
        assert_eq!(std::fs::metadata(dir.path().join(PACK)).unwrap().len(), 9);
        assert_eq!(w.append("d", b"EE").unwrap(), Slot { offset: 9, len: 2 });
    }

    #[test]
    fn a_corrupt_index_is_an_error_naming_the_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        PackWriter::open(dir.path()).unwrap().append("a", b"AAAA").unwrap();
        std::fs::write(
            dir.path().join(INDEX),
            "{\"format\":\"hcbench-cells-pack\",\"schema_version\":1}\nnot json\n{\"cell\":\"a\",\"offset\":0,\"len\":4}\n",
        )
        .unwrap();
        let e = Index::read(dir.path()).unwrap_err().to_string();
        assert!(e.contains("cells.pack.index: line 2 is not a pack entry"), "{e}");
        std::fs::write(dir.path().join(INDEX), "{\"format\":\"other\",\"schema_version\":1}\n").unwrap();
        let e = Index::read(dir.path()).unwrap_err().to_string();
        assert!(e.contains("line 1: `format` is \"other\""), "{e}");
    }
}
