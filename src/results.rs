//! `results.jsonl`: one [`CellSummary`] per line, appended as cells end.
//!
//! The file is a convenience index for tools (and for `--resume` later); reports are always
//! rebuilt from traces, and a results line that disagrees with its trace is a bug.

use std::path::{Path, PathBuf};

use crate::replay::{CellSummary, SUMMARY_SCHEMA_VERSION};

#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    #[error("cannot read {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path} line {line} is not a cell summary: {message}")]
    Corrupt { path: PathBuf, line: usize, message: String },
    #[error(
        "{path} line {line} has schema_version {found}, newer than this hcbench reads ({SUMMARY_SCHEMA_VERSION}); upgrade hcbench"
    )]
    TooNew { path: PathBuf, line: usize, found: u32 },
}

pub fn read_results(path: &Path) -> Result<Vec<CellSummary>, ResultsError> {
    let text = std::fs::read_to_string(path).map_err(|source| ResultsError::Io { path: path.into(), source })?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let s: CellSummary = serde_json::from_str(line).map_err(|e| ResultsError::Corrupt {
            path: path.into(),
            line: i + 1,
            message: e.to_string(),
        })?;
        if s.schema_version > SUMMARY_SCHEMA_VERSION {
            return Err(ResultsError::TooNew { path: path.into(), line: i + 1, found: s.schema_version });
        }
        out.push(s);
    }
    Ok(out)
}
