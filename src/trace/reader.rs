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
    let io_err = |source| TraceError::Io { path: path.to_path_buf(), source };
    let file = File::open(path).map_err(io_err)?;
    let mut reader = BufReader::with_capacity(256 * 1024, file);
    let mut events = Vec::new();
    let mut buf = Vec::with_capacity(4096);
    let mut line_no = 0;
    let mut truncated = false;
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf).map_err(io_err)?;
        if n == 0 {
            break;
        }
        line_no += 1;
        let complete = buf.last() == Some(&b'\n');
        let text = trim_line(&buf);
        if text.is_empty() {
            continue;
        }
        match serde_json::from_slice::<Event>(text) {
            Ok(event) => {
                if event.schema_version > SCHEMA_VERSION {
                    return Err(TraceError::TooNew {
                        path: path.to_path_buf(),
                        line: line_no,
                        found: event.schema_version,
                    });
                }
                events.push(event);
            }
            Err(_) if !complete => {
                truncated = true;
                break;
            }
            Err(e) => {
                return Err(TraceError::Corrupt {
                    path: path.to_path_buf(),
                    line: line_no,
                    message: e.to_string(),
                });
            }
        }
    }
    Ok(TraceRead { events, truncated })
}

fn trim_line(buf: &[u8]) -> &[u8] {
    let mut end = buf.len();
    while end > 0 && (buf[end - 1] == b'\n' || buf[end - 1] == b'\r') {
        end -= 1;
    }
    &buf[..end]
}
