//! The results history: one CSV file per run under `reports/history/` (or `--history DIR`),
//! one row per cell, each row carrying the run's metadata, so `hcbench trend` can read any set
//! of runs without their run directories.
//!
//! - **One file per run**, named `<started_at>--<run_id>.csv` and written atomically (a
//!   temporary file renamed into place): parallel CI jobs and shards never write the same file,
//!   and a reader never sees half of one. Appending the same run again replaces its file.
//! - **Schema-versioned rows**: every row starts with `schema` ([`HISTORY_SCHEMA_VERSION`]);
//!   a row of a newer schema is an error naming the file (upgrade hcbench), a row that does not
//!   parse (or a file of another tool) is skipped and counted, never a crash.
//! - **CSV, not Parquet**: measured in docs/performance.md#results-history-format; in short,
//!   reading 1,000 run files with the csv crate is faster than polars' Parquet scan, CSV needs
//!   no extra polars features (Parquet is +70% of polars' compile work on two cores), a damaged
//!   line loses that row instead of the file (or the whole scan), and a history kept on a git
//!   branch diffs and merges line by line.

mod import;

pub use import::{ImportError, import_run};

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::replay::CellSummary;
use crate::rundir::Manifest;

/// Version of [`HistoryRow`]; bumped when a column changes meaning or is removed.
pub const HISTORY_SCHEMA_VERSION: u32 = 1;

/// Default history folder under the project root.
pub const DEFAULT_DIR: &str = "reports/history";

/// One cell of one run, with the run's metadata. Column order is the field order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryRow {
    pub schema: u32,
    pub run_id: String,
    /// RFC 3339 UTC start of the run (the manifest's `started_at`).
    pub started_at: String,
    /// `matrix`, `ablate`, `run`.
    pub command: String,
    /// Empty when the project was not a git repository.
    pub git_commit: String,
    /// Tracked files differed from the commit (or untracked, unignored files existed); empty
    /// when unknown (no repository, or a run imported from before this was recorded).
    pub git_dirty: Option<bool>,
    pub hcbench_version: String,
    pub benchmark: String,
    /// SHA-256 over the benchmark's files and its cases' fixtures; empty when unknown.
    pub benchmark_digest: String,
    pub cell_id: String,
    pub case_id: String,
    pub category: String,
    pub split: String,
    pub profile: String,
    pub provider: String,
    /// The model the profile resolved to (empty for profiles that call none).
    pub model: String,
    /// Empty outside `hcbench ablate`.
    pub ablation: String,
    pub epoch: u32,
    /// Outcome class (`passed`, `failed`, `timeout`, `provider_error`, ...) or `incomplete`.
    pub outcome: String,
    pub reward: f64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Empty when the profile has no prices.
    pub cost_usd: Option<f64>,
    pub wall_ms: u64,
}

impl HistoryRow {
    pub fn new(m: &Manifest, c: &CellSummary) -> HistoryRow {
        HistoryRow {
            schema: HISTORY_SCHEMA_VERSION,
            run_id: m.run_id.clone(),
            started_at: m.started_at.clone(),
            command: m.command.clone(),
            git_commit: m.git_commit.clone().unwrap_or_default(),
            git_dirty: m.git_dirty,
            hcbench_version: m.hcbench_version.clone(),
            benchmark: m.benchmark.clone(),
            benchmark_digest: m.benchmark_digest.clone().unwrap_or_default(),
            cell_id: c.cell_id.clone(),
            case_id: c.case_id.to_string(),
            category: c.category.to_string(),
            split: c.split.to_string(),
            profile: c.profile.to_string(),
            provider: c.provider.to_string(),
            model: c.model.to_string(),
            ablation: c.ablation.to_string(),
            epoch: c.epoch,
            outcome: c.outcome.map_or("incomplete", |o| o.as_str()).to_string(),
            reward: c.reward,
            input_tokens: c.input_tokens,
            output_tokens: c.output_tokens,
            cost_usd: c.cost_usd(),
            wall_ms: c.wall_ms,
        }
    }

    /// True for a valid verdict (passed or failed): the cells comparisons use.
    pub fn is_verdict(&self) -> bool {
        self.outcome == "passed" || self.outcome == "failed"
    }

    pub fn passed(&self) -> bool {
        self.outcome == "passed"
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("cannot read history folder {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("cannot write history file {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
    #[error(
        "{path} row {row} has history schema {found}, newer than this hcbench reads ({HISTORY_SCHEMA_VERSION}); upgrade hcbench, or move the file out of the history folder"
    )]
    TooNew { path: PathBuf, row: usize, found: u32 },
}

/// The rows of every history file in a folder, and what could not be read.
#[derive(Debug, Default)]
pub struct Loaded {
    pub rows: Vec<HistoryRow>,
    /// History files read (`*.csv`).
    pub files: usize,
    /// Rows skipped, by file: they did not parse as history rows (corrupt, cut, or another
    /// tool's CSV).
    pub skipped: BTreeMap<PathBuf, usize>,
}

impl Loaded {
    pub fn skipped_rows(&self) -> usize {
        self.skipped.values().sum()
    }

    /// One line per file with skipped rows, for a warning.
    pub fn warnings(&self) -> Vec<String> {
        self.skipped
            .iter()
            .map(|(p, n)| format!("{}: skipped {n} row(s) that are not hcbench history rows", p.display()))
            .collect()
    }
}

/// The file a run's rows go to: `<dir>/<started_at>--<run_id>.csv`, with the time stamp's
/// `:` made file-name safe, so a listing sorts by time.
pub fn run_file(dir: &Path, m: &Manifest) -> PathBuf {
    let stamp: String = m.started_at.chars().map(|c| if c == ':' { '-' } else { c }).collect();
    dir.join(format!("{stamp}--{}.csv", m.run_id))
}

/// Writes the run's rows to its own file in `dir` (created if needed), atomically; returns
/// the file. The same run appended twice replaces its file, so a resumed run is counted once.
pub fn append_run(dir: &Path, m: &Manifest, cells: &[CellSummary]) -> Result<PathBuf, HistoryError> {
    // Each row is made as it is written: a run's rows are never all in memory (at 100,000
    // cells they and the file's text would be about as large as the report's summaries).
    write_row_stream(&run_file(dir, m), cells.iter().map(|c| HistoryRow::new(m, c)))?;
    Ok(run_file(dir, m))
}

/// Writes `rows` as one history file, atomically.
pub fn write_rows(path: &Path, rows: &[HistoryRow]) -> Result<(), HistoryError> {
    write_row_stream(path, rows.iter())
}

/// [`write_rows`] of rows made one at a time, streamed into the file.
fn write_row_stream<R: Serialize>(path: &Path, rows: impl Iterator<Item = R>) -> Result<(), HistoryError> {
    let err = |source| HistoryError::Write { path: path.to_path_buf(), source };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    crate::util::write_atomic_streamed(path, true, |out| {
        let mut w = csv::Writer::from_writer(out);
        let mut empty = true;
        for r in rows {
            w.serialize(r).map_err(io::Error::other)?;
            empty = false;
        }
        if empty {
            // A header alone still says what the file is.
            w.write_record(header()).map_err(io::Error::other)?;
        }
        w.flush()
    })
    .map_err(|e| match e {
        crate::util::StreamError::Io(e) | crate::util::StreamError::Writer(e) => err(e),
    })
}

/// The column names, in order.
pub fn header() -> Vec<&'static str> {
    vec![
        "schema",
        "run_id",
        "started_at",
        "command",
        "git_commit",
        "git_dirty",
        "hcbench_version",
        "benchmark",
        "benchmark_digest",
        "cell_id",
        "case_id",
        "category",
        "split",
        "profile",
        "provider",
        "model",
        "ablation",
        "epoch",
        "outcome",
        "reward",
        "input_tokens",
        "output_tokens",
        "cost_usd",
        "wall_ms",
    ]
}

/// Reads every `*.csv` file of `dir` (not recursive), in file-name order. A missing folder is
/// an empty history. Rows that do not parse are skipped and counted; a row of a newer schema
/// is an error.
pub fn load(dir: &Path) -> Result<Loaded, HistoryError> {
    let mut loaded = Loaded::default();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(loaded),
        Err(source) => return Err(HistoryError::Read { path: dir.to_path_buf(), source }),
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "csv") && p.is_file())
        .collect();
    files.sort();
    for path in files {
        let bytes = std::fs::read(&path).map_err(|source| HistoryError::Read { path: path.clone(), source })?;
        let skipped = read_rows(&path, &bytes, &mut loaded.rows)?;
        loaded.files += 1;
        if skipped > 0 {
            loaded.skipped.insert(path, skipped);
        }
    }
    Ok(loaded)
}

/// Parses one file's rows into `out`; returns how many were skipped.
///
/// hcbench never writes a newline inside a field, so a record is a line. A file whose lines all
/// have balanced quotes is read with one CSV reader (fast); a damaged one (an unclosed quote,
/// which would make the reader swallow the rows after it as one bad record) line by line, so
/// the damage costs only its own line.
fn read_rows(path: &Path, bytes: &[u8], out: &mut Vec<HistoryRow>) -> Result<usize, HistoryError> {
    let lines = || bytes.split(|&b| b == b'\n').map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let balanced = lines().all(|l| l.iter().filter(|&&b| b == b'"').count() % 2 == 0);
    let mut records: Box<dyn Iterator<Item = Option<csv::StringRecord>>> = if balanced {
        let reader = csv::ReaderBuilder::new().has_headers(false).flexible(true).from_reader(bytes);
        Box::new(reader.into_records().map(Result::ok))
    } else {
        Box::new(lines().filter(|l| !l.is_empty()).map(parse_line))
    };
    let Some(headers) = records.next() else { return Ok(0) };
    let is_history = headers.as_ref().is_some_and(|h| h.get(0) == Some("schema"));
    let mut skipped = 0;
    for (i, record) in records.enumerate() {
        let (Some(headers), true, Some(record)) = (&headers, is_history, record) else {
            skipped += 1;
            continue;
        };
        // The schema first: a newer one is not "corrupt", it needs a newer hcbench.
        if let Some(found) = record.get(0).and_then(|s| s.trim().parse::<u32>().ok())
            && found > HISTORY_SCHEMA_VERSION
        {
            return Err(HistoryError::TooNew { path: path.to_path_buf(), row: i + 1, found });
        }
        match record.deserialize::<HistoryRow>(Some(headers)) {
            Ok(row) if row.schema == HISTORY_SCHEMA_VERSION && valid(&row) => out.push(row),
            _ => skipped += 1,
        }
    }
    Ok(skipped)
}

/// One CSV record from one line; None when it is not one (bad UTF-8, an unclosed quote).
fn parse_line(line: &[u8]) -> Option<csv::StringRecord> {
    if line.iter().filter(|&&b| b == b'"').count() % 2 == 1 {
        return None;
    }
    let mut reader =
        csv::ReaderBuilder::new().has_headers(false).flexible(true).buffer_capacity(line.len() + 16).from_reader(line);
    let mut record = csv::StringRecord::new();
    match reader.read_record(&mut record) {
        Ok(true) => Some(record),
        _ => None,
    }
}

/// The fields trend groups and orders by must be present, and numbers must be numbers.
fn valid(r: &HistoryRow) -> bool {
    !r.run_id.is_empty()
        && humantime::parse_rfc3339_weak(&r.started_at).is_ok()
        && !r.case_id.is_empty()
        && !r.profile.is_empty()
        && !r.outcome.is_empty()
        && r.reward.is_finite()
        && r.cost_usd.is_none_or(f64::is_finite)
}

#[cfg(test)]
mod tests;
