//! The trace: an append-only JSONL record of everything that happened in one cell.
//!
//! The trace is the source of truth. Every number in every report must be recomputable from
//! traces alone (`hcbench replay`, `hcbench report`). Invariants, enforced in [`writer`]:
//! one event per line, sequence numbers start at 0 and increase by one, complete lines only,
//! a step's lines written together with a single `write` before the next step starts, so a
//! crash leaves a valid prefix of whole steps (at worst a cut last line, which [`reader`]
//! tolerates). The kinds of event are listed once,
//! in [`event::EventKind`]; the writer and every reader name kinds only through it. A finished
//! cell's trace is stored zstd-compressed; every reader opens traces through [`stored::open`].

pub mod event;
pub mod pack;
pub mod reader;
pub mod stored;
pub mod writer;

pub use event::{Event, EventBody, EventKind, SCHEMA_VERSION};
pub use reader::{Header, Parsed, ReadStats, TraceError, TraceRead, for_each_line, read_trace};
pub use writer::TraceWriter;
