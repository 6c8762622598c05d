//! Reads a trace back, tolerating what a crash and a newer writer can leave behind.
//!
//! The reading rules, shared by the full reader here and the fast replay parser
//! (`crate::replay`), which both go through [`for_each_line`]:
//! - A last line without its newline that does not parse is a cut write: it is dropped and
//!   the prefix is returned with `truncated = true`.
//! - A line whose `schema_version` is newer than [`SCHEMA_VERSION`] is an error saying to
//!   upgrade hcbench: a new major version may change what known kinds mean.
//! - A well-formed line whose `kind` this build does not know, in a version it reads, is an
//!   event added by a newer hcbench without a version bump (docs/formats.md): it is skipped
//!   and counted per kind in `skipped`, so reports can say what they left out.
//! - Any other unparsable line (not JSON, no `kind`, a known kind whose payload does not fit)
//!   is corruption and an error naming the file and line, because silently skipping events
//!   would change the numbers.
//! - Every line, of a known kind or not, continues the trace's sequence: `seq` starts at 0 and
//!   grows by one, and `run_id` and `cell_id` are those of the first line (and the run's, when
//!   the caller knows which run the trace belongs to). A repeated or missing number, or an
//!   event of another run or cell, is [`TraceError::Sequence`]: two writers interleaved (two
//!   processes on one run directory) or a file was pieced together, and folding it would count
//!   a step twice or mix two runs. Replay reports such a cell as a harness error, never
//!   silently.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::{self, BufRead};
use std::path::{Path, PathBuf};

use super::event::{Event, EventKind, SCHEMA_VERSION, WireIn};

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("cannot read trace {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("trace {path} line {line} is not a valid event: {message} (the file is corrupt; re-run the cell)")]
    Corrupt { path: PathBuf, line: usize, message: String },
    #[error(
        "trace {path} line {line} has schema_version {found}, newer than this hcbench reads ({SCHEMA_VERSION}); upgrade hcbench"
    )]
    TooNew { path: PathBuf, line: usize, found: u32 },
    #[error(
        "trace {path} line {line} breaks the event sequence: {message} (two processes wrote the cell, or the file was pieced together; run the cell again)"
    )]
    Sequence { path: PathBuf, line: usize, message: String },
}

/// The envelope fields the reading rules check on every line, whatever its kind. The ids
/// borrow from the line when it holds them unescaped, so checking a line allocates nothing.
#[derive(Debug, Clone, PartialEq)]
pub struct Header<'l> {
    pub schema_version: u32,
    pub seq: u64,
    pub run_id: Cow<'l, str>,
    pub cell_id: Cow<'l, str>,
}

/// The sequence rule: what the next line must carry.
struct Sequence<'a> {
    next_seq: u64,
    /// The run the trace must belong to: the caller's, else the first line's.
    run_id: Option<Cow<'a, str>>,
    cell_id: Option<String>,
}

impl<'a> Sequence<'a> {
    fn new(run_id: Option<&'a str>) -> Self {
        Sequence { next_seq: 0, run_id: run_id.map(Cow::Borrowed), cell_id: None }
    }

    /// Checks `h` against the lines before it; Err says what is wrong, for people. The ids are
    /// compared by bytes with the first line's, which is all a line after the first costs.
    fn check(&mut self, h: &Header) -> Result<(), String> {
        match &self.run_id {
            Some(run) if *run != h.run_id => {
                return Err(format!("an event of run {:?} in a trace of run {run:?}", h.run_id));
            }
            Some(_) => {}
            None => self.run_id = Some(Cow::Owned(h.run_id.to_string())),
        }
        match &self.cell_id {
            Some(cell) if *cell != h.cell_id => {
                return Err(format!("an event of cell {:?} in a trace of cell {cell:?}", h.cell_id));
            }
            Some(_) => {}
            None => self.cell_id = Some(h.cell_id.to_string()),
        }
        let want = self.next_seq;
        if h.seq != want {
            return Err(if h.seq < want {
                format!("seq {} comes again where seq {want} was due (an event written twice)", h.seq)
            } else if want == 0 {
                format!("the first event has seq {}, not 0 (the start of the trace is missing)", h.seq)
            } else {
                format!("seq {} follows seq {} ({} event(s) missing)", h.seq, want - 1, h.seq - want)
            });
        }
        self.next_seq += 1;
        Ok(())
    }
}

/// What a line parser found on a well-formed line.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed<T> {
    /// An event of a kind this build knows.
    Known(T),
    /// An event of a kind this build does not know, by its tag; its payload was not parsed.
    UnknownKind(String),
}

/// What reading a whole trace noticed besides its events.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReadStats {
    /// A cut last line was dropped.
    pub truncated: bool,
    /// Events of kinds this build does not know, skipped, by kind.
    pub skipped: BTreeMap<String, u64>,
}

/// A trace read back: its events and what reading it noticed.
#[derive(Debug, Clone)]
pub struct TraceRead {
    pub events: Vec<Event>,
    pub stats: ReadStats,
}

/// Reads every event of the trace at `path`.
pub fn read_trace(path: &Path) -> Result<TraceRead, TraceError> {
    let mut events = Vec::new();
    let stats = for_each_line(path, None, parse_event, |_, e| events.push(e))?;
    Ok(TraceRead { events, stats })
}

/// Parses one line into a full event, looking at `kind` before the payload so an unknown
/// kind is reported as such rather than as a payload that does not fit.
fn parse_event(line: &str) -> Result<(Header<'_>, Parsed<Event>), serde_json::Error> {
    let wire: WireIn = serde_json::from_str(line)?;
    let header = wire.header();
    if EventKind::from_tag(&wire.kind).is_none() {
        return Ok((header, Parsed::UnknownKind(wire.kind)));
    }
    Ok((header, Parsed::Known(wire.into_event()?)))
}

/// Streams the trace at `path` through `parse`, handing each event of a known kind and its
/// envelope to `sink`, with the reading rules above; `parse` gets each line (checked to be
/// UTF-8, without its line ending) and returns the line's envelope and what it found. `run_id`,
/// when given, is the run every event must belong to (the run directory's manifest says it).
/// Memory stays bounded by the longest line.
pub fn for_each_line<T>(
    path: &Path,
    run_id: Option<&str>,
    parse: impl for<'l> FnMut(&'l str) -> Result<(Header<'l>, Parsed<T>), serde_json::Error>,
    sink: impl FnMut(&Header, T),
) -> Result<ReadStats, TraceError> {
    let reader = super::stored::open(path).map_err(|source| TraceError::Io { path: path.to_path_buf(), source })?;
    read_lines(reader, path, run_id, parse, sink)
}

/// [`for_each_line`] over any byte source (a trace already in memory, a member of a pack);
/// `path` names it in errors.
pub fn for_each_line_from<T>(
    reader: impl BufRead,
    path: &Path,
    run_id: Option<&str>,
    parse: impl for<'l> FnMut(&'l str) -> Result<(Header<'l>, Parsed<T>), serde_json::Error>,
    sink: impl FnMut(&Header, T),
) -> Result<ReadStats, TraceError> {
    read_lines(reader, path, run_id, parse, sink)
}

/// The line loop of [`for_each_line`].
///
/// A line that lies whole in the reader's buffer is parsed where it lies; only a line cut by
/// the buffer's end is copied, so the bytes of a trace are not moved once more before parsing.
fn read_lines<T>(
    mut reader: impl BufRead,
    path: &Path,
    run_id: Option<&str>,
    mut parse: impl for<'l> FnMut(&'l str) -> Result<(Header<'l>, Parsed<T>), serde_json::Error>,
    mut sink: impl FnMut(&Header, T),
) -> Result<ReadStats, TraceError> {
    let io_err = |source| TraceError::Io { path: path.to_path_buf(), source };
    let mut lines = Lines { path, line_no: 0, stats: ReadStats::default(), sequence: Sequence::new(run_id) };
    // The start of a line the buffer cut, and later the rest of it.
    let mut carry: Vec<u8> = Vec::new();
    loop {
        let available = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_err(e)),
        };
        if available.is_empty() {
            // The end of the file: a last line without its newline, if any, is read as such.
            if !carry.is_empty() {
                lines.line(&carry, false, &mut parse, &mut sink)?;
            }
            return Ok(lines.stats);
        }
        let used = match memchr::memchr(b'\n', available) {
            Some(i) if carry.is_empty() => {
                if !lines.line(&available[..=i], true, &mut parse, &mut sink)? {
                    return Ok(lines.stats);
                }
                i + 1
            }
            Some(i) => {
                carry.extend_from_slice(&available[..=i]);
                let go_on = lines.line(&carry, true, &mut parse, &mut sink)?;
                carry.clear();
                if !go_on {
                    return Ok(lines.stats);
                }
                i + 1
            }
            None => {
                carry.extend_from_slice(available);
                available.len()
            }
        };
        reader.consume(used);
    }
}

/// The reading rules applied line by line.
struct Lines<'p, 'r> {
    path: &'p Path,
    line_no: usize,
    stats: ReadStats,
    sequence: Sequence<'r>,
}

impl Lines<'_, '_> {
    /// Reads one line (`complete` when it ended with its newline); Ok(false) when reading
    /// stops here (a cut last line, dropped).
    fn line<T>(
        &mut self,
        raw: &[u8],
        complete: bool,
        parse: &mut impl for<'l> FnMut(&'l str) -> Result<(Header<'l>, Parsed<T>), serde_json::Error>,
        sink: &mut impl FnMut(&Header, T),
    ) -> Result<bool, TraceError> {
        self.line_no += 1;
        let text = trim_line(raw);
        if text.is_empty() {
            return Ok(true);
        }
        // serde_json does not check UTF-8 in the values a parser skips, so without this a line
        // that is not JSON could pass one reader and fail the other, by what each one skips.
        let parsed = match std::str::from_utf8(text) {
            Ok(text) => parse(text),
            Err(e) => Err(serde::de::Error::custom(e)),
        };
        let path = self.path;
        match parsed {
            Ok((header, parsed)) => {
                if header.schema_version > SCHEMA_VERSION {
                    return Err(TraceError::TooNew {
                        path: path.to_path_buf(),
                        line: self.line_no,
                        found: header.schema_version,
                    });
                }
                self.sequence.check(&header).map_err(|message| TraceError::Sequence {
                    path: path.to_path_buf(),
                    line: self.line_no,
                    message,
                })?;
                match parsed {
                    Parsed::Known(item) => sink(&header, item),
                    Parsed::UnknownKind(kind) => *self.stats.skipped.entry(kind).or_default() += 1,
                }
                Ok(true)
            }
            Err(_) if !complete => {
                self.stats.truncated = true;
                Ok(false)
            }
            Err(e) => {
                // A newer writer may have changed the layout: say "upgrade", not "corrupt".
                #[derive(serde::Deserialize)]
                struct Version {
                    schema_version: u32,
                }
                if let Ok(v) = serde_json::from_slice::<Version>(text)
                    && v.schema_version > SCHEMA_VERSION
                {
                    return Err(TraceError::TooNew {
                        path: path.to_path_buf(),
                        line: self.line_no,
                        found: v.schema_version,
                    });
                }
                Err(TraceError::Corrupt { path: path.to_path_buf(), line: self.line_no, message: e.to_string() })
            }
        }
    }
}

fn trim_line(buf: &[u8]) -> &[u8] {
    let mut end = buf.len();
    while end > 0 && (buf[end - 1] == b'\n' || buf[end - 1] == b'\r') {
        end -= 1;
    }
    &buf[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{EventBody, TraceWriter};

    /// Reads `bytes` through a buffer of `capacity` bytes.
    fn read_with(bytes: &[u8], capacity: usize) -> Result<(Vec<Event>, ReadStats), String> {
        let mut events = Vec::new();
        let reader = std::io::BufReader::with_capacity(capacity, bytes);
        read_lines(reader, Path::new("trace.jsonl"), None, parse_event, |_, e| events.push(e))
            .map(|stats| (events, stats))
            .map_err(|e| e.to_string())
    }

    /// Lines parsed where they lie in the buffer and lines cut by its end read alike, whatever
    /// the buffer's size, with the rules for a cut last line, blank lines and `\r\n`.
    #[test]
    fn lines_read_alike_whatever_the_buffer_cuts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.jsonl");
        let mut w = TraceWriter::create(&path, "r", "c").unwrap();
        for step in 1..=4 {
            w.append(EventBody::StateUpdated {
                step,
                steps_used: step,
                files_modified: vec!["a.py".into()],
                finished: false,
            })
            .unwrap();
        }
        let whole = std::fs::read(&path).unwrap();
        let first_line = whole.iter().position(|b| *b == b'\n').unwrap() + 1;
        let mut crlf_and_blank = whole[..first_line - 1].to_vec();
        crlf_and_blank.extend_from_slice(b"\r\n\n");
        crlf_and_blank.extend_from_slice(&whole[first_line..]);
        let cut = &whole[..whole.len() - 9];
        let no_newline = &whole[..whole.len() - 1];
        let (events, stats) = read_with(&whole, 256 * 1024).unwrap();
        assert_eq!((events.len(), stats.truncated), (4, false));
        for capacity in [1, 2, 7, 64, first_line - 1, first_line, first_line + 1, 4096] {
            assert_eq!(read_with(&whole, capacity).unwrap(), (events.clone(), stats.clone()), "buffer {capacity}");
            assert_eq!(read_with(&crlf_and_blank, capacity).unwrap(), (events.clone(), stats.clone()));
            assert_eq!(read_with(no_newline, capacity).unwrap(), (events.clone(), stats.clone()));
            let (prefix, cut_stats) = read_with(cut, capacity).unwrap();
            assert_eq!((prefix.as_slice(), cut_stats.truncated), (&events[..3], true), "buffer {capacity}");
        }
        // A line cut by the buffer and broken is still an error naming its line.
        let mut broken = whole.clone();
        broken.splice(first_line..first_line, b"{\"oops\n".iter().copied());
        for capacity in [3, 4096] {
            let err = read_with(&broken, capacity).unwrap_err();
            assert!(err.contains("trace.jsonl line 2 is not a valid event"), "{err}");
        }
    }
}
