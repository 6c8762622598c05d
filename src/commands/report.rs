//! `hcbench report RUN_DIR`: re-render every report from the traces alone.

use anyhow::Context as _;

use super::CommandError;
use crate::cli::{ReportArgs, ReportFormat};
use crate::exit;
use crate::report::{self, model::MatrixReport, terminal};

pub fn report(args: ReportArgs) -> Result<i32, CommandError> {
    let report = report::model::build(&args.run_dir, true)?;
    let written = report::write_all(&args.run_dir, &report)?;
    print(&report, args.format)?;
    for p in written {
        eprintln!("wrote {}", p.display());
    }
    for n in &report.notes {
        eprintln!("note: {n}");
    }
    Ok(exit::SUCCESS)
}

/// Prints the report to stdout in the chosen format.
pub(crate) fn print(report: &MatrixReport, format: ReportFormat) -> Result<(), CommandError> {
    match format {
        ReportFormat::Table => {
            println!("{}", terminal::profile_table(&report.profile_stats));
            for line in terminal::comparison_lines(&report.comparisons) {
                println!("{line}");
            }
            println!("{}", terminal::totals_line(&report.cells));
        }
        ReportFormat::Md => print!("{}", report::markdown::render(report)),
        ReportFormat::Json => println!("{}", serde_json::to_string_pretty(report).context("json")?),
    }
    Ok(())
}
