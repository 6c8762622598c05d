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

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufRead, BufReader};
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
    let stats = for_each_line(path, parse_event, |e| events.push(e))?;
    Ok(TraceRead { events, stats })
}

/// Parses one line into a full event, looking at `kind` before the payload so an unknown
/// kind is reported as such rather than as a payload that does not fit.
fn parse_event(line: &[u8]) -> Result<(u32, Parsed<Event>), serde_json::Error> {
    let wire: WireIn = serde_json::from_slice(line)?;
    let version = wire.schema_version;
    if EventKind::from_tag(&wire.kind).is_none() {
        return Ok((version, Parsed::UnknownKind(wire.kind)));
    }
    Ok((version, Parsed::Known(wire.into_event()?)))
}

/// Streams the trace at `path` through `parse`, handing each event of a known kind to `sink`,
/// with the reading rules above; `parse` returns the line's schema version and what it found.
/// Memory stays bounded by the longest line.
pub fn for_each_line<T>(
    path: &Path,
    mut parse: impl FnMut(&[u8]) -> Result<(u32, Parsed<T>), serde_json::Error>,
    mut sink: impl FnMut(T),
) -> Result<ReadStats, TraceError> {
    let io_err = |source| TraceError::Io { path: path.to_path_buf(), source };
    let file = File::open(path).map_err(io_err)?;
    let mut reader = BufReader::with_capacity(256 * 1024, file);
    let mut buf = Vec::with_capacity(4096);
    let mut line_no = 0;
    let mut stats = ReadStats::default();
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
            Ok((version, parsed)) => {
                if version > SCHEMA_VERSION {
                    return Err(TraceError::TooNew { path: path.to_path_buf(), line: line_no, found: version });
                }
                match parsed {
                    Parsed::Known(item) => sink(item),
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
