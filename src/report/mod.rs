//! Rendering for people and machines. Every exporter is a plain function of the
//! [`model::MatrixReport`], which is itself built from traces only; so a live run and
//! `hcbench report RUN_DIR` produce the same bytes.

pub(crate) mod ablation;
pub mod bundle;
pub mod csv;
pub mod exit_policy;
pub mod html;
pub mod html_split;
pub mod index;
pub mod json;
pub mod junit;
pub mod markdown;
pub mod model;
pub mod plan;
pub mod progress;
pub(crate) mod sessions;
pub mod terminal;
pub mod trend;

use std::io::Write;
use std::path::{Path, PathBuf};

use model::MatrixReport;

use crate::stats::Interval;
use crate::util::StreamError;

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("cannot render {format}: {message}")]
    Render { format: &'static str, message: String },
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    /// An exporter's output stream failed; [`write_all`] names the file.
    #[error("cannot write a report: {0}")]
    Stream(#[from] std::io::Error),
}

/// One output format.
pub trait Exporter {
    /// File name under `RUN_DIR/reports/`.
    fn file_name(&self) -> &'static str;
    /// Writes the format to `out` as it goes: no exporter holds its whole output in memory,
    /// so a 100,000-cell report.json or junit.xml costs the summaries and a write buffer.
    fn write(&self, report: &MatrixReport, out: &mut dyn Write) -> Result<(), ExportError>;
}

/// Every file exporter, in the order they are written.
pub fn exporters() -> Vec<Box<dyn Exporter>> {
    vec![
        Box::new(markdown::Markdown),
        Box::new(json::Json),
        Box::new(csv::Csv),
        Box::new(junit::Junit),
        Box::new(html::Html),
    ]
}

/// Renders every format into `run_dir/reports/`, each file written atomically and streamed.
/// report.html's side files (the timelines of a large run, [`html_split::write_side_files`]) are
/// written first, so the page never names a file that is not there yet. Returns the paths
/// written.
pub fn write_all(run_dir: &Path, report: &MatrixReport) -> Result<Vec<PathBuf>, ExportError> {
    let dir = run_dir.join("reports");
    std::fs::create_dir_all(&dir).map_err(|source| ExportError::Write { path: dir.clone(), source })?;
    let mut written = Vec::new();
    written.extend(html_split::write_side_files(run_dir, &dir, report)?);
    for exporter in exporters() {
        let path = dir.join(exporter.file_name());
        crate::util::write_atomic_streamed(&path, true, |out| exporter.write(report, out)).map_err(|e| match e {
            StreamError::Io(source) | StreamError::Writer(ExportError::Stream(source)) => {
                ExportError::Write { path: path.clone(), source }
            }
            StreamError::Writer(e) => e,
        })?;
        written.push(path);
    }
    Ok(written)
}

/// `0.8333` -> `83.3%`.
pub(crate) fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// A pass-rate interval with its method: `0.0–43.4% (Wilson)`.
pub(crate) fn pct_range(r: &Interval) -> String {
    format!("{:.1}–{:.1}% ({})", r.lo * 100.0, r.hi * 100.0, r.method)
}

/// An interval of a difference with its method: `-0.043 … +1.000 (exact sign test)`.
pub(crate) fn diff_range(r: &Interval) -> String {
    format!("{:+.3} … {:+.3} ({})", r.lo, r.hi, r.method)
}

/// "3 comparisons; verdicts use Holm-adjusted p-values" when a report made several, so a reader
/// knows a called difference survived the correction; nothing for one or none.
pub(crate) fn comparisons_sentence(report: &MatrixReport) -> Option<String> {
    let m = report.comparisons.len();
    (m > 1).then(|| {
        format!("{m} comparisons; each verdict uses its Holm-adjusted p-value, so the chance of any false call in this report stays at 5%")
    })
}

/// The headers of the pass@k and pass^k columns, k being the epochs each case ran: None with one
/// epoch (both would repeat the pass rate, so tables show only that), `pass@3` and `pass^3` when
/// every profile ran three, `pass@k` and `pass^k` when profiles ran different numbers (a partial
/// run; report.json gives each profile's `epochs`).
pub(crate) fn pass_k_headers(stats: &[crate::aggregate::GroupStats]) -> Option<(String, String)> {
    let ks: std::collections::BTreeSet<usize> = stats.iter().map(|s| s.epochs).filter(|k| *k > 0).collect();
    match ks.iter().collect::<Vec<_>>()[..] {
        [] | [1] => None,
        [k] => Some((format!("pass@{k}"), format!("pass^{k}"))),
        _ => Some(("pass@k".into(), "pass^k".into())),
    }
}

pub(crate) fn secs(ms: u64) -> String {
    format!("{:.1}s", ms as f64 / 1000.0)
}
