//! Appends events to a cell's `trace.jsonl`.
//!
//! Invariant: this is the only code that writes a trace, and it writes only complete lines,
//! each batch of them with a single `write_all`. [`TraceWriter::append`] writes its event at
//! once; [`TraceWriter::hold`] keeps it with the lines held before it until
//! [`TraceWriter::flush`] (or the writer's drop) writes them together. The agent loop holds a
//! step's events and writes them in one call when the step ends (`agent::Recorder`): a step
//! is about ten events, and one write per event was most of the trace's cost. A crash
//! therefore leaves a valid prefix (whole steps, at worst a cut last line). Once the cell has
//! its verdict the engine stores the trace compressed ([`super::stored`]); appending to it
//! again first makes it plain.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::event::{Event, EventBody, SCHEMA_VERSION};

pub struct TraceWriter {
    path: PathBuf,
    file: File,
    run_id: String,
    cell_id: String,
    next_seq: u64,
    /// Bytes in the trace, the held lines included: where the next line starts (a
    /// checkpoint records it, after a flush).
    bytes: u64,
    line: Vec<u8>,
    /// The last event's time stamp, kept for the next event: written again only when the
    /// millisecond it names has passed (`ts_ms`, since the Unix epoch). A step's events mostly
    /// come within one millisecond, and formatting the stamp was a quarter of the writer's
    /// part of an event (perf samples of the 43-cell oracle matrix, 2026-11-25).
    ts: String,
    ts_ms: Option<u128>,
    /// Complete lines not yet written.
    held: Vec<u8>,
}

impl TraceWriter {
    /// Creates (truncating) the trace file at `path`.
    pub fn create(path: &Path, run_id: &str, cell_id: &str) -> io::Result<Self> {
        let file = OpenOptions::new().create(true).write(true).truncate(true).open(path)?;
        Ok(TraceWriter {
            path: path.to_path_buf(),
            file,
            run_id: run_id.to_string(),
            cell_id: cell_id.to_string(),
            next_seq: 0,
            bytes: 0,
            line: Vec::with_capacity(1024),
            ts: String::with_capacity(24),
            ts_ms: None,
            held: Vec::with_capacity(8 * 1024),
        })
    }

    /// Opens an existing trace to append after its last event (sequence numbers continue).
    /// A cut last line (a write interrupted mid-way) is dropped first, so the file stays a
    /// sequence of complete events. A trace holding kinds this build does not know was written
    /// by a newer hcbench: appending to it is refused, because the skipped events' sequence
    /// numbers are unknown here and one trace must come from one format.
    pub fn append_to(path: &Path, run_id: &str, cell_id: &str) -> io::Result<Self> {
        // A trace stored compressed (its cell had ended) is made plain again to take more lines.
        super::stored::restore_plain(path)?;
        let read = super::reader::read_trace(path).map_err(io::Error::other)?;
        if !read.stats.skipped.is_empty() {
            let kinds: Vec<&str> = read.stats.skipped.keys().map(String::as_str).collect();
            return Err(io::Error::other(format!(
                "trace {} holds event kinds this hcbench does not know ({}): it was written by a newer hcbench; upgrade hcbench to append to it",
                path.display(),
                kinds.join(", ")
            )));
        }
        let bytes = std::fs::read(path)?;
        let complete = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        if complete != bytes.len() {
            OpenOptions::new().write(true).open(path)?.set_len(complete as u64)?;
        }
        let file = OpenOptions::new().append(true).open(path)?;
        Ok(TraceWriter {
            path: path.to_path_buf(),
            file,
            run_id: run_id.to_string(),
            cell_id: cell_id.to_string(),
            next_seq: read.events.last().map_or(0, |e| e.seq + 1),
            bytes: complete as u64,
            line: Vec::with_capacity(1024),
            ts: String::with_capacity(24),
            ts_ms: None,
            held: Vec::with_capacity(8 * 1024),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The run and the cell every event of this trace names.
    pub fn ids(&self) -> (&str, &str) {
        (&self.run_id, &self.cell_id)
    }

    /// The last event appended (its seq; None before the first) and the trace's length after
    /// it, once the held lines are written.
    pub fn position(&self) -> (Option<u64>, u64) {
        (self.next_seq.checked_sub(1), self.bytes)
    }

    /// Stamps `body` with schema version, ids, sequence number and time, appends it (written
    /// at once, after any held lines) and returns its body as written (see [`TraceWriter::hold`]).
    pub fn append(&mut self, body: EventBody) -> io::Result<EventBody> {
        let body = self.hold(body)?;
        self.flush()?;
        Ok(body)
    }

    /// Writes the held lines, in one call.
    pub fn flush(&mut self) -> io::Result<()> {
        if self.held.is_empty() {
            return Ok(());
        }
        let written = self.file.write_all(&self.held);
        // Written or not, they are not held again: a failed write may have put part of them in
        // the file, and the caller gives the trace up (the cell ends as a harness error).
        self.held.clear();
        written
    }

    /// [`TraceWriter::append`], the line held until the next [`TraceWriter::flush`] or
    /// [`TraceWriter::append`], or the writer's drop. Returns the body as its line holds it:
    /// `body` itself, unless a secret had to be scrubbed from it.
    ///
    /// The event is stamped with the writer's own ids and time stamp buffer, moved into it
    /// for the line and moved back after, rather than copies of them: a cell writes about ten
    /// events a step, and the copies were three allocations of each.
    pub fn hold(&mut self, body: EventBody) -> io::Result<EventBody> {
        let now = std::time::SystemTime::now();
        let ms = now.duration_since(std::time::UNIX_EPOCH).ok().map(|d| d.as_millis());
        if ms.is_none() || ms != self.ts_ms {
            crate::util::write_rfc3339_millis(&mut self.ts, now);
            self.ts_ms = ms;
        }
        let mut event = Event {
            schema_version: SCHEMA_VERSION,
            run_id: std::mem::take(&mut self.run_id),
            cell_id: std::mem::take(&mut self.cell_id),
            seq: self.next_seq,
            ts: std::mem::take(&mut self.ts),
            body,
        };
        let written = Self::write_line(&mut self.line, &mut event);
        // Back for the next event, whether or not this one could be written.
        (self.run_id, self.cell_id, self.ts) = (event.run_id, event.cell_id, event.ts);
        written?;
        self.held.extend_from_slice(&self.line);
        self.next_seq += 1;
        self.bytes += self.line.len() as u64;
        Ok(event.body)
    }

    /// `event`'s line, newline included, into `line`.
    fn write_line(line: &mut Vec<u8>, event: &mut Event) -> io::Result<()> {
        line.clear();
        event.write_line(line).map_err(io::Error::other)?;
        line.push(b'\n');
        // The backstop of API-key redaction: no line carries a key the process holds.
        crate::model::secrets::scrub_event(event, line)
    }
}

impl Drop for TraceWriter {
    /// A writer dropped with lines held (a cell cancelled, timed out or panicking mid-step)
    /// writes them: the trace keeps every event the summary saw.
    fn drop(&mut self) {
        if let Err(e) = self.flush() {
            tracing::warn!("cannot write the last events of trace {}: {e}", self.path.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(step: u32) -> EventBody {
        EventBody::StateUpdated { step, steps_used: step, files_modified: Vec::new(), finished: false }
    }

    /// A line is the event's `Serialize` form, byte for byte, whatever the body's shape: a
    /// payload of plain fields, of flattened ones, of JSON values and of escaped text.
    #[test]
    fn lines_are_the_serialized_events() {
        use crate::trace::event::Delegated;
        let bodies = [
            step(7),
            EventBody::ModelAction {
                step: 1,
                tool: "edit_file".into(),
                args: serde_json::json!({"path": "a\"b.py", "old": "x\n\ty", "new": "\u{1f}é"}),
                usage: None,
                latency_ms: 3,
                batch: None,
            },
            EventBody::DelegationCompleted { step: 2, id: 1, spent: Delegated::default() },
            EventBody::ResumeRefused { reason: "no checkpoint".into(), abandoned_trace: String::new() },
        ];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.jsonl");
        let mut w = TraceWriter::create(&path, "run \"1\"", "cell/é").unwrap();
        for body in bodies.clone() {
            assert_eq!(w.append(body.clone()).unwrap(), body, "no secret: the body as given");
        }
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), bodies.len());
        for ((seq, line), body) in text.lines().enumerate().zip(bodies) {
            let event: Event = serde_json::from_str(line).unwrap();
            assert_eq!((event.run_id.as_str(), event.cell_id.as_str(), event.seq), ("run \"1\"", "cell/é", seq as u64));
            assert!(humantime::parse_rfc3339(&event.ts).is_ok() && event.ts.len() == 24, "{}", event.ts);
            assert_eq!(event.body, body);
            assert_eq!(serde_json::to_string(&event).unwrap(), line, "the line is the event's Serialize form");
        }
    }

    /// Held lines reach the file only when flushed, appended after or dropped with the writer,
    /// always whole and in order, and the position counts them once written.
    #[test]
    fn held_lines_are_written_whole_in_order_on_flush_append_or_drop() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.jsonl");
        let lines = || std::fs::read_to_string(&path).unwrap().lines().count();
        let mut w = TraceWriter::create(&path, "r", "c").unwrap();
        w.hold(step(1)).unwrap();
        w.hold(step(2)).unwrap();
        assert_eq!(lines(), 0, "held, not written");
        w.flush().unwrap();
        assert_eq!(lines(), 2);
        assert_eq!(w.position(), (Some(1), std::fs::metadata(&path).unwrap().len()));
        w.hold(step(3)).unwrap();
        w.append(step(4)).unwrap();
        assert_eq!(lines(), 4, "an append writes what was held before it");
        w.hold(step(5)).unwrap();
        drop(w);
        let read = crate::trace::read_trace(&path).unwrap();
        let seqs: Vec<u64> = read.events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [0, 1, 2, 3, 4], "the drop wrote the last held line");
        assert!(!read.stats.truncated);
    }
}
