//! Reads a trace back, tolerating what a crash can leave behind.
//!
//! A last line without its newline that does not parse is a cut write: it is dropped and the
//! prefix is returned with `truncated = true`. Any other unparsable line is corruption and an
//! error naming the file and line, because silently skipping events would change the numbers.

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};

use super::event::{Event, SCHEMA_VERSION};

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

/// A trace read back: its events and whether a cut last line was dropped.
#[derive(Debug, Clone)]
pub struct TraceRead {
    pub events: Vec<Event>,
    pub truncated: bool,
}

/// Reads every event of the trace at `path`.
pub fn read_trace(path: &Path) -> Result<TraceRead, TraceError> {
    let mut events = Vec::new();
    let truncated = for_each_line(
        path,
        |line| serde_json::from_slice::<Event>(line).map(|e| (e.schema_version, e)),
        |e| events.push(e),
    )?;
    Ok(TraceRead { events, truncated })
}

/// Streams the trace at `path` through `parse`, handing each item to `sink`, with the reading
/// rules above; `parse` returns the line's schema version and the item. Returns whether a cut
/// last line was dropped. Memory stays bounded by the longest line.
pub fn for_each_line<T>(
    path: &Path,
    mut parse: impl FnMut(&[u8]) -> Result<(u32, T), serde_json::Error>,
    mut sink: impl FnMut(T),
) -> Result<bool, TraceError> {
    let io_err = |source| TraceError::Io { path: path.to_path_buf(), source };
    let file = File::open(path).map_err(io_err)?;
    let mut reader = BufReader::with_capacity(256 * 1024, file);
    let mut buf = Vec::with_capacity(4096);
    let mut line_no = 0;
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf).map_err(io_err)?;
        if n == 0 {
            return Ok(false);
        }
        line_no += 1;
        let complete = buf.last() == Some(&b'\n');
        let text = trim_line(&buf);
        if text.is_empty() {
            continue;
        }
        match parse(text) {
            Ok((version, item)) => {
                if version > SCHEMA_VERSION {
                    return Err(TraceError::TooNew { path: path.to_path_buf(), line: line_no, found: version });
                }
                sink(item);
            }
            Err(_) if !complete => return Ok(true),
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
