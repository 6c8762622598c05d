//! `reports/index.html`: one page listing every run under `workspace/runs/`, newest first, with
//! its date, benchmark, command, profiles, pass rate and coverage per profile, and a link to
//! its `report.html`.
//!
//! It is read from what each run already wrote (`manifest.json`, `reports/report.json`), never
//! by replaying traces, so it stays quick with hundreds of runs. A run that cannot be read (no
//! manifest, a corrupt one, a report of a newer schema) is listed with the reason instead of
//! being dropped: a missing row would read as "that run never happened". Links are relative
//! (`../workspace/runs/<id>/reports/report.html`), so the page works from `file://` and when
//! `hcbench view` serves the project's `reports/` and `workspace/runs/` over HTTP alike.
//! Like `report.html` it is self-contained (inline CSS and script, a CSP that forbids fetches).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tera::{Context, Tera};

use super::ExportError;
use super::html::error_chain;

const TEMPLATE: &str = include_str!("templates/index.html");
const CSS: &str = include_str!("templates/report.css");
/// The report's script: its sortable tables work on this page as they are; the heatmap and
/// filter parts find nothing to do.
const JS: &str = include_str!("templates/report.js");

/// Where the run directories are, relative to the project root.
pub const RUNS_DIR: &str = "workspace/runs";
/// Where the index is written, relative to the project root.
pub const INDEX_PATH: &str = "reports/index.html";

/// One run as the index lists it.
#[derive(Debug, Clone, Serialize)]
pub struct RunRow {
    /// The run directory's name (its run id for runs hcbench named).
    pub name: String,
    pub path: PathBuf,
    /// From the manifest; empty when it could not be read.
    pub started_at: String,
    pub command: String,
    pub benchmark: String,
    pub profiles: Vec<String>,
    pub epochs: u32,
    /// Per profile: name, pass rate, coverage (from report.json; empty without one).
    pub rates: Vec<ProfileRate>,
    pub cells: usize,
    /// `complete`, `partial`, `interrupted`, or why the run could not be read.
    pub status: String,
    /// The report's exit code under the exit policy, when there is a report.
    pub exit_code: Option<i32>,
    /// True when the run has a `reports/report.html` to link to.
    pub has_report: bool,
    /// Set when the manifest or report.json could not be read: the row says so.
    pub problem: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProfileRate {
    pub profile: String,
    pub pass_rate: f64,
    pub coverage: f64,
}

/// The few parts of report.json the index reads; serde skips the rest (cells, timelines...).
#[derive(Deserialize)]
struct ReportHead {
    schema_version: u32,
    status: String,
    verdict: VerdictHead,
    profile_stats: Vec<StatsHead>,
}

#[derive(Deserialize)]
struct VerdictHead {
    exit_code: i32,
}

#[derive(Deserialize)]
struct StatsHead {
    profile: String,
    cells: usize,
    pass_rate: f64,
    coverage: f64,
}

/// Every entry of `runs_dir` that is a directory, read into a row, newest first (by start
/// time, then by name, so runs without a readable manifest still have a stable place).
pub fn scan(runs_dir: &Path) -> std::io::Result<Vec<RunRow>> {
    let mut rows = Vec::new();
    let entries = match std::fs::read_dir(runs_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(rows),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        // Follows symlinks: a run linked in from elsewhere is a run too.
        if entry.path().is_dir() {
            rows.push(read_run(&entry.path()));
        }
    }
    rows.sort_by(|a, b| b.started_at.cmp(&a.started_at).then_with(|| b.name.cmp(&a.name)));
    Ok(rows)
}

/// One run directory as a row; never fails, a problem becomes the row's `problem`.
pub fn read_run(dir: &Path) -> RunRow {
    let mut row = RunRow {
        name: dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        path: dir.to_path_buf(),
        started_at: String::new(),
        command: String::new(),
        benchmark: String::new(),
        profiles: Vec::new(),
        epochs: 0,
        rates: Vec::new(),
        cells: 0,
        status: String::new(),
        exit_code: None,
        has_report: dir.join("reports/report.html").is_file(),
        problem: None,
    };
    match crate::rundir::Manifest::read(dir) {
        Ok(m) => {
            row.started_at = m.started_at;
            row.command = m.command;
            row.benchmark = m.benchmark;
            row.profiles = m.profiles;
            row.epochs = m.epochs;
        }
        Err(e) => {
            row.problem = Some(format!("not readable as a run: {e}"));
            return row;
        }
    }
    let report = dir.join("reports/report.json");
    match std::fs::read(&report) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            row.status = "no report yet".into();
            row.problem = Some(format!("no reports/report.json yet: `hcbench report {}` renders it", dir.display()));
        }
        Err(e) => row.problem = Some(format!("cannot read {}: {e}", report.display())),
        Ok(bytes) => match serde_json::from_slice::<ReportHead>(&bytes) {
            Ok(head) if head.schema_version > super::model::REPORT_SCHEMA_VERSION => {
                row.problem = Some(format!(
                    "{} has schema {}, newer than this hcbench reads ({}): upgrade hcbench",
                    report.display(),
                    head.schema_version,
                    super::model::REPORT_SCHEMA_VERSION
                ));
            }
            Ok(head) => {
                row.status = head.status;
                row.exit_code = Some(head.verdict.exit_code);
                row.cells = head.profile_stats.iter().map(|s| s.cells).sum();
                row.rates = head
                    .profile_stats
                    .into_iter()
                    .map(|s| ProfileRate { profile: s.profile, pass_rate: s.pass_rate, coverage: s.coverage })
                    .collect();
            }
            Err(e) => row.problem = Some(format!("cannot read {}: {e}", report.display())),
        },
    }
    row
}

#[derive(Serialize)]
struct Page {
    css: &'static str,
    js: &'static str,
    version: &'static str,
    runs_dir: String,
    runs: Vec<RowView>,
    unreadable: usize,
}

#[derive(Serialize)]
struct RowView {
    name: String,
    started_at: String,
    command: String,
    benchmark: String,
    profiles: String,
    epochs: String,
    cells: String,
    rates: Vec<RateView>,
    status: String,
    bad: bool,
    link: Option<String>,
    problem: Option<String>,
}

#[derive(Serialize)]
struct RateView {
    profile: String,
    pass_rate: String,
    coverage: String,
    low_coverage: bool,
}

/// `href` of a run's report from `reports/index.html`: up one level, into workspace/runs.
fn link(name: &str) -> String {
    let mut encoded = String::new();
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.') {
            encoded.push(b as char);
        } else {
            encoded.push_str(&format!("%{b:02X}"));
        }
    }
    format!("../{RUNS_DIR}/{encoded}/reports/report.html")
}

/// Renders the page for `rows` (as [`scan`] returns them).
pub fn render(rows: &[RunRow], runs_dir: &Path) -> Result<String, ExportError> {
    let err = |e: tera::Error| ExportError::Render { format: "index", message: error_chain(&e) };
    let mut tera = Tera::default();
    tera.add_raw_template("index.html", TEMPLATE).map_err(err)?;
    let page = Page {
        css: CSS,
        js: JS,
        version: env!("CARGO_PKG_VERSION"),
        runs_dir: runs_dir.display().to_string(),
        unreadable: rows.iter().filter(|r| r.problem.is_some() && r.exit_code.is_none()).count(),
        runs: rows
            .iter()
            .map(|r| RowView {
                name: r.name.clone(),
                started_at: r.started_at.clone(),
                command: r.command.clone(),
                benchmark: r.benchmark.clone(),
                profiles: r.profiles.join(", "),
                epochs: if r.epochs == 0 { String::new() } else { r.epochs.to_string() },
                cells: if r.exit_code.is_some() { r.cells.to_string() } else { String::new() },
                rates: r
                    .rates
                    .iter()
                    .map(|p| RateView {
                        profile: p.profile.clone(),
                        pass_rate: super::pct(p.pass_rate),
                        coverage: super::pct(p.coverage),
                        low_coverage: p.coverage < 1.0,
                    })
                    .collect(),
                status: match r.exit_code {
                    Some(code) => format!("{}, exit {code}", r.status),
                    None if r.problem.is_some() && r.status.is_empty() => "unreadable".into(),
                    None => r.status.clone(),
                },
                bad: r.exit_code.is_none_or(|c| c != crate::exit::SUCCESS),
                link: r.has_report.then(|| link(&r.name)),
                problem: r.problem.clone(),
            })
            .collect(),
    };
    let context = Context::from_serialize(&page).map_err(err)?;
    tera.render("index.html", &context).map_err(err)
}

/// Scans `<root>/workspace/runs` and writes `<root>/reports/index.html` atomically. Returns the
/// index's path and the rows it lists.
pub fn write(root: &Path) -> Result<(PathBuf, Vec<RunRow>), ExportError> {
    let runs_dir = root.join(RUNS_DIR);
    let rows = scan(&runs_dir).map_err(|source| ExportError::Write { path: runs_dir.clone(), source })?;
    let html = render(&rows, Path::new(RUNS_DIR))?;
    let path = root.join(INDEX_PATH);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|source| ExportError::Write { path: dir.to_path_buf(), source })?;
    }
    crate::util::write_atomic(&path, html.as_bytes())
        .map_err(|source| ExportError::Write { path: path.clone(), source })?;
    Ok((path, rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_relative_and_encoded() {
        assert_eq!(link("20261124t031400z-42"), "../workspace/runs/20261124t031400z-42/reports/report.html");
        assert_eq!(link("a b\"<"), "../workspace/runs/a%20b%22%3C/reports/report.html");
    }

    #[test]
    fn an_unreadable_run_is_listed_with_its_reason() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("broken")).unwrap();
        std::fs::write(dir.path().join("broken/manifest.json"), "{not json").unwrap();
        std::fs::create_dir_all(dir.path().join("empty")).unwrap();
        std::fs::write(dir.path().join("stray-file"), "").unwrap();
        let rows = scan(dir.path()).unwrap();
        assert_eq!(rows.len(), 2, "both directories are listed, the stray file is not a run");
        assert!(rows.iter().all(|r| r.problem.as_deref().is_some_and(|p| p.contains("not readable as a run"))));
        let html = render(&rows, Path::new(RUNS_DIR)).unwrap();
        assert!(html.contains("broken") && html.contains("empty"));
        assert_eq!(html.matches("unreadable").count(), 2 + 1, "two rows and the count above the table");
        assert!(!html.contains("http://") && !html.contains("https://"));
    }
}
