//! `hcbench report RUN_DIR`: re-render every report from the traces alone, and exit with the
//! code the run earned under the exit policy (the run's own thresholds, from its manifest), so
//! a CI job can judge a run directory after the fact exactly as the run judged itself.

use anyhow::Context as _;

use super::CommandError;
use crate::cli::{ReportArgs, ReportFormat};
use crate::report::{self, model::MatrixReport, terminal};

pub fn report(args: ReportArgs, width: terminal::Width) -> Result<i32, CommandError> {
    let report = report::model::build(&args.run_dir, true)?;
    let written = report::write_all(&args.run_dir, &report)?;
    print(&report, args.format, width)?;
    for p in written {
        eprintln!("wrote {}", p.display());
    }
    for n in &report.notes {
        eprintln!("note: {n}");
    }
    Ok(report.verdict.exit_code)
}

/// Prints the report to stdout in the chosen format. The table opens with the banner of an
/// incomplete run and ends with the verdict; Markdown and JSON carry both themselves, and
/// they are repeated on stderr so a CI log shows them whatever the format.
/// The table fits `width` (src/report/terminal.rs; `Settings::width`).
pub(crate) fn print(report: &MatrixReport, format: ReportFormat, width: terminal::Width) -> Result<(), CommandError> {
    match format {
        ReportFormat::Table => {
            for line in terminal::summary_lines(report, width) {
                println!("{line}");
            }
        }
        ReportFormat::Md | ReportFormat::Json => {
            if format == ReportFormat::Md {
                print!("{}", report::markdown::render(report));
            } else {
                println!("{}", serde_json::to_string_pretty(report).context("json")?);
            }
            let verdict = terminal::verdict_lines(&report.verdict, width);
            for line in terminal::banner_lines(report, width).into_iter().chain(verdict) {
                eprintln!("{line}");
            }
        }
    }
    Ok(())
}
