//! How a trace is stored on disk: plain `trace.jsonl` while its cell runs, `trace.jsonl.zst`
//! (one zstd frame) once the cell has its verdict.
//!
//! Why compress only at the end: a running or interrupted cell's trace must stay appendable
//! (the writer adds one whole line at a time, `--resume` continues it, a crash leaves a valid
//! prefix), and a zstd stream cut mid-frame is not readable. A finished trace is never written
//! again, so [`compress`] turns it into its compressed form once, atomically: the `.zst` is
//! written beside it under a temporary name, synced and renamed into place
//! (`util::write_atomic_streamed`), and only then is the
//! plain file removed. A crash in between leaves both, and readers take the plain one, which is
//! complete.
//!
//! Every reader of a trace opens it through [`open`], which accepts either form under either
//! name: the plain path (`cells/<id>/trace.jsonl`, what reports, `--resume` and users name) is
//! read from `trace.jsonl.zst` when only that exists, and a file is decoded when it starts with
//! the zstd magic number, whatever it is called. Old run directories (plain traces only) read as
//! they always did.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

/// The suffix the compressed form adds to the trace's name.
pub const COMPRESSED_SUFFIX: &str = ".zst";

/// zstd's frame magic number, as it appears at the start of a file.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// zstd level: traces are small JSON files written once and read often, so a level well above
/// the default pays (measured on HumanEval-shaped traces in benches/scale.rs: level 19 takes a
/// few ms per cell; this one under 1 ms for nearly the same size).
const LEVEL: i32 = 12;

/// `path` with [`COMPRESSED_SUFFIX`] appended.
pub fn compressed_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(COMPRESSED_SUFFIX);
    PathBuf::from(name)
}

/// The file that holds the trace named `path`: `path` itself when it exists, else its
/// compressed form when that exists.
pub fn locate(path: &Path) -> Option<PathBuf> {
    if path.is_file() {
        return Some(path.to_path_buf());
    }
    let packed = compressed_path(path);
    packed.is_file().then_some(packed)
}

/// The trace of the cell folder `cell_dir`, in whichever form it is stored.
pub fn in_cell(cell_dir: &Path) -> Option<PathBuf> {
    locate(&cell_dir.join("trace.jsonl"))
}

/// Opens the trace named `path` for reading its plain bytes (see the module doc for which file
/// that is). A compressed file that turns out to be corrupt fails the read with an error naming
/// the file.
pub fn open(path: &Path) -> io::Result<Box<dyn BufRead + Send>> {
    let (file, real) = match File::open(path) {
        Ok(f) => (f, path.to_path_buf()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let packed = compressed_path(path);
            match File::open(&packed) {
                Ok(f) => (f, packed),
                // Say the name that was asked for: neither form exists.
                Err(_) => return Err(e),
            }
        }
        Err(e) => return Err(e),
    };
    let mut reader = BufReader::with_capacity(256 * 1024, file);
    if reader.fill_buf()?.starts_with(&ZSTD_MAGIC) {
        let decoder = zstd::stream::read::Decoder::with_buffer(reader)?;
        return Ok(Box::new(BufReader::with_capacity(256 * 1024, Named { inner: decoder, path: real })));
    }
    Ok(Box::new(reader))
}

/// A decoder whose errors name the compressed file and what to do about it.
struct Named<R> {
    inner: R,
    path: PathBuf,
}

impl<R: Read> Read for Named<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "the compressed trace {} is corrupt ({e}); restore it from a copy or run the cell again (`hcbench matrix --resume` after removing the cell's folder)",
                    self.path.display()
                ),
            )
        })
    }
}

/// Replaces the finished plain trace `path` by its compressed form `path.zst` (see the module
/// doc for the order of the steps); returns the compressed file. A trace already compressed is
/// left as it is.
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
/// append to); nothing to do when `path` exists.
pub fn restore_plain(path: &Path) -> io::Result<()> {
    let packed = compressed_path(path);
    if path.exists() || !packed.is_file() {
        return Ok(());
    }
    let mut bytes = Vec::new();
    open(&packed)?.read_to_end(&mut bytes)?;
    crate::util::write_atomic(path, &bytes)?;
    std::fs::remove_file(&packed)
}

/// Writes `bytes` to `out` as one zstd frame (tests and benches that make compressed traces).
pub fn encode(bytes: &[u8], out: impl Write) -> io::Result<()> {
    let mut encoder = encoder(out)?;
    encoder.write_all(bytes)?;
    encoder.finish().map(|_| ())
}

/// The encoder every compressed trace is written with: one frame at [`LEVEL`], checksummed.
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
}
