//! Renders a [`TrendReport`]: `trend.json`, `trend.md` (for a CI job summary or a PR comment)
//! and `trend.html` (one self-contained page), plus the terminal summary.
//!
//! PLACEHOLDER: the Markdown and HTML renderers are being written; JSON and the terminal
//! summary are final.

use std::path::{Path, PathBuf};

use super::ExportError;
use crate::trend::TrendReport;

/// Writes trend.json, trend.md and trend.html into `out` (created if needed), atomically.
pub fn write_all(out: &Path, report: &TrendReport) -> Result<Vec<PathBuf>, ExportError> {
    std::fs::create_dir_all(out).map_err(|source| ExportError::Write { path: out.to_path_buf(), source })?;
    let json = serde_json::to_vec_pretty(report)
        .map_err(|e| ExportError::Render { format: "json", message: e.to_string() })?;
    let files: [(&str, Vec<u8>); 1] = [("trend.json", json)];
    let mut written = Vec::new();
    for (name, bytes) in files {
        let path = out.join(name);
        crate::util::write_atomic(&path, &bytes).map_err(|source| ExportError::Write { path: path.clone(), source })?;
        written.push(path);
    }
    Ok(written)
}

/// The terminal summary: the verdict line.
pub fn terminal(report: &TrendReport) -> String {
    format!("{}\n", report.verdict.summary)
}
