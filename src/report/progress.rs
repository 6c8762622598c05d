//! Progress as plain lines on stderr: one per finished cell. Works the same on a terminal and
//! in CI logs, and never touches stdout, which carries the results.

use std::io::Write;

use crate::engine::{EngineEvent, EngineSink};

pub struct LineProgress {
    quiet: bool,
}

impl LineProgress {
    pub fn stderr() -> Self {
        LineProgress { quiet: false }
    }

    pub fn quiet() -> Self {
        LineProgress { quiet: true }
    }
}

impl EngineSink for LineProgress {
    fn event(&self, event: EngineEvent<'_>) {
        if self.quiet {
            return;
        }
        let mut err = std::io::stderr().lock();
        let _ = match event {
            EngineEvent::RunStarted { run_id, run_dir, cells } => {
                writeln!(err, "hcbench: run {run_id}: {cells} cell(s) -> {}", run_dir.display())
            }
            EngineEvent::CellStarted { .. } => Ok(()),
            EngineEvent::CellFinished { summary, done, total } => writeln!(
                err,
                "[{done:>width$}/{total}] {:<14} {} ({:.1}s)",
                summary.outcome_label(),
                summary.cell_id,
                summary.wall_ms as f64 / 1000.0,
                width = total.to_string().len()
            ),
        };
    }
}
