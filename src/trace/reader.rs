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

/// The envelope fields the reading rules check on every line, whatever its kind.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    pub schema_version: u32,
    pub seq: u64,
    pub run_id: String,
    pub cell_id: String,
}

/// The sequence rule: what the next line must carry.
struct Sequence<'a> {
    next_seq: u64,
    /// The run the trace must belong to: the caller's, else the first line's.
    run_id: Option<std::borrow::Cow<'a, str>>,
    cell_id: Option<String>,
}

impl<'a> Sequence<'a> {
    fn new(run_id: Option<&'a str>) -> Self {
        Sequence { next_seq: 0, run_id: run_id.map(std::borrow::Cow::Borrowed), cell_id: None }
    }

    /// Checks `h` against the lines before it; Err says what is wrong, for people.
    fn check(&mut self, h: &Header) -> Result<(), String> {
        match &self.run_id {
            Some(run) if *run != h.run_id => {
                return Err(format!("an event of run {:?} in a trace of run {run:?}", h.run_id));
            }
            Some(_) => {}
            None => self.run_id = Some(std::borrow::Cow::Owned(h.run_id.clone())),
        }
        match &self.cell_id {
            Some(cell) if *cell != h.cell_id => {
                return Err(format!("an event of cell {:?} in a trace of cell {cell:?}", h.cell_id));
            }
            Some(_) => {}
            None => self.cell_id = Some(h.cell_id.clone()),
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
fn parse_event(line: &[u8]) -> Result<(Header, Parsed<Event>), serde_json::Error> {
    let wire: WireIn = serde_json::from_slice(line)?;
    let header = wire.header();
    if EventKind::from_tag(&wire.kind).is_none() {
        return Ok((header, Parsed::UnknownKind(wire.kind)));
    }
    Ok((header, Parsed::Known(wire.into_event()?)))
}

/// Streams the trace at `path` through `parse`, handing each event of a known kind and its
/// envelope to `sink`, with the reading rules above; `parse` returns the line's envelope and
/// what it found. `run_id`, when given, is the run every event must belong to (the run
/// directory's manifest says it). Memory stays bounded by the longest line.
pub fn for_each_line<T>(
    path: &Path,
    run_id: Option<&str>,
    mut parse: impl FnMut(&[u8]) -> Result<(Header, Parsed<T>), serde_json::Error>,
    mut sink: impl FnMut(&Header, T),
) -> Result<ReadStats, TraceError> {
    let io_err = |source| TraceError::Io { path: path.to_path_buf(), source };
    let mut reader = super::stored::open(path).map_err(io_err)?;
    let mut buf = Vec::with_capacity(4096);
    let mut line_no = 0;
    let mut stats = ReadStats::default();
    let mut sequence = Sequence::new(run_id);
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf).map_err(io_err)?;
        if n == 0 {
            return Ok(stats);
        }
        line_no += 1;
        let complete = buf.last() == Some(&b'\n');
        let text = trim_line(&buf);
        if text.is_empty() {
            continue;
        }
        // serde_json does not check UTF-8 in the values a parser skips, so without this a line
        // that is not JSON could pass one reader and fail the other, by what each one skips.
        let parsed = match std::str::from_utf8(text) {
            Ok(_) => parse(text),
            Err(e) => Err(serde::de::Error::custom(e)),
        };
        match parsed {
            Ok((header, parsed)) => {
                if header.schema_version > SCHEMA_VERSION {
                    return Err(TraceError::TooNew {
                        path: path.to_path_buf(),
                        line: line_no,
                        found: header.schema_version,
                    });
                }
                sequence.check(&header).map_err(|message| TraceError::Sequence {
                    path: path.to_path_buf(),
                    line: line_no,
                    message,
                })?;
                match parsed {
                    Parsed::Known(item) => sink(&header, item),
                    Parsed::UnknownKind(kind) => *stats.skipped.entry(kind).or_default() += 1,
                }
            }
            Err(_) if !complete => {
                stats.truncated = true;
                return Ok(stats);
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
                        line: line_no,
                        found: v.schema_version,
                    });
                }
                return Err(TraceError::Corrupt { path: path.to_path_buf(), line: line_no, message: e.to_string() });
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
