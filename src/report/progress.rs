//! Progress display: an engine sink that writes to stderr only (stdout carries results).
//!
//! On a terminal: an indicatif bar with ETA plus one line per profile with its passed /
//! failed / errored counts. Elsewhere (CI logs): one plain line per finished cell.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use crate::events::{EngineEvent, EngineSink};
use crate::replay::CellSummary;
use crate::trace::event::Outcome;

/// The sink for the terminal: bars on a TTY, lines otherwise.
pub fn auto() -> Box<dyn EngineSink> {
    if std::io::stderr().is_terminal() { Box::new(BarProgress::new()) } else { Box::new(LineProgress::stderr()) }
}

pub struct LineProgress;

impl LineProgress {
    pub fn stderr() -> Self {
        LineProgress
    }
}

/// What a resume keeps and runs again, for the line it opens with.
fn kept_line(count: usize, retried: usize) -> String {
    let mut line = format!("{count} finished cell(s) kept");
    if retried > 0 {
        line.push_str(&format!("; {retried} cell(s) that ended in an infrastructure error run again (--retry-errors)"));
    }
    line
}

/// A profile's first provider failure: the whole message, then the fix on a line of its own.
pub(crate) fn failure_text(profile: &str, failure: &crate::model::ProviderFailure) -> String {
    let mut text = format!("hcbench: first provider error of profile `{profile}`: {}", failure.message);
    if let Some(fix) = &failure.fix {
        text.push_str(&format!("\n  fix: {fix}"));
    }
    text
}

/// One finished cell as a progress line: `[ 3/40] passed         bugfix-1__oracle (1.2s)`.
pub(crate) fn cell_line(summary: &CellSummary, done: usize, total: usize) -> String {
    format!(
        "[{done:>width$}/{total}] {:<14} {} ({:.1}s)",
        summary.outcome_label(),
        summary.cell_id,
        summary.wall_ms as f64 / 1000.0,
        width = total.to_string().len()
    )
}

impl EngineSink for LineProgress {
    fn event(&self, event: EngineEvent<'_>) {
        let mut err = std::io::stderr().lock();
        let _ = match event {
            EngineEvent::RunStarted { run_id, run_dir, cells, .. } => {
                writeln!(err, "hcbench: run {run_id}: {cells} cell(s) -> {}", run_dir.display())
            }
            EngineEvent::CellStarted { .. } => Ok(()),
            EngineEvent::CellFinished { summary, done, total } => writeln!(err, "{}", cell_line(summary, done, total)),
            EngineEvent::CellsKept { count, retried } => {
                writeln!(err, "hcbench: resuming: {}", kept_line(count, retried))
            }
            EngineEvent::BudgetSpent { spent_usd, budget_usd } => writeln!(
                err,
                "hcbench: budget reached (${spent_usd:.4} of ${budget_usd:.4}): no new cells start; running cells finish"
            ),
            EngineEvent::ProfileUnavailable { reason, .. } => writeln!(err, "hcbench: {reason}"),
            EngineEvent::ProviderFailed { profile, failure } => writeln!(err, "{}", failure_text(profile, failure)),
            EngineEvent::Cancelling => writeln!(
                err,
                "hcbench: interrupted: running cells are recorded as cancelled and reports written; press Ctrl-C again to stop at once"
            ),
        };
    }
}

#[derive(Default)]
struct Counts {
    passed: usize,
    failed: usize,
    errored: usize,
}

/// The overall bar, and one line (with its counts) per profile.
type Bars = (ProgressBar, BTreeMap<String, (ProgressBar, Counts)>);

pub struct BarProgress {
    multi: MultiProgress,
    state: Mutex<Option<Bars>>,
}

impl BarProgress {
    pub fn new() -> Self {
        BarProgress { multi: MultiProgress::new(), state: Mutex::new(None) }
    }
}

impl Default for BarProgress {
    fn default() -> Self {
        Self::new()
    }
}

impl EngineSink for BarProgress {
    fn event(&self, event: EngineEvent<'_>) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match event {
            EngineEvent::RunStarted { cells, profiles, .. } => {
                let overall = self.multi.add(ProgressBar::new(cells as u64));
                overall.set_style(
                    ProgressStyle::with_template(
                        "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} cells, ETA {eta}",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
                );
                overall.enable_steady_tick(Duration::from_millis(200));
                let mut lines = BTreeMap::new();
                for p in profiles {
                    let line = self.multi.add(ProgressBar::new_spinner());
                    line.set_style(
                        ProgressStyle::with_template("  {msg}").unwrap_or_else(|_| ProgressStyle::default_spinner()),
                    );
                    line.set_message(format!("{p}: 0 passed, 0 failed, 0 errored"));
                    lines.insert(p.clone(), (line, Counts::default()));
                }
                *state = Some((overall, lines));
            }
            EngineEvent::CellFinished { summary, .. } => {
                if let Some((overall, lines)) = state.as_mut() {
                    overall.inc(1);
                    if let Some((line, counts)) = lines.get_mut(&summary.profile) {
                        match summary.outcome {
                            Some(Outcome::Passed) => counts.passed += 1,
                            Some(Outcome::Failed) => counts.failed += 1,
                            _ => counts.errored += 1,
                        }
                        line.set_message(format!(
                            "{}: {} passed, {} failed, {} errored",
                            summary.profile, counts.passed, counts.failed, counts.errored
                        ));
                    }
                }
            }
            EngineEvent::CellsKept { count, retried } => {
                let _ = self.multi.println(format!("resuming: {}", kept_line(count, retried)));
            }
            EngineEvent::BudgetSpent { spent_usd, budget_usd } => {
                let _ = self.multi.println(format!(
                    "budget reached (${spent_usd:.4} of ${budget_usd:.4}): no new cells start; running cells finish"
                ));
            }
            EngineEvent::Cancelling => {
                let _ = self.multi.println(
                    "interrupted: running cells are recorded as cancelled; press Ctrl-C again to stop at once",
                );
            }
            EngineEvent::ProfileUnavailable { reason, .. } => {
                let _ = self.multi.println(reason);
            }
            EngineEvent::ProviderFailed { profile, failure } => {
                let _ = self.multi.println(failure_text(profile, failure));
            }
            EngineEvent::CellStarted { .. } => {}
        }
    }
}

impl Drop for BarProgress {
    fn drop(&mut self) {
        if let Some((overall, lines)) = self.state.lock().unwrap_or_else(|p| p.into_inner()).take() {
            overall.finish();
            for (line, _) in lines.values() {
                line.finish();
            }
        }
    }
}

#[cfg(test)]
mod first_failure_tests {
    use super::*;
    use crate::model::{FailureClass, ProviderFailure};

    #[test]
    fn a_first_failure_reads_in_full_with_its_fix_on_its_own_line() {
        let failure = ProviderFailure {
            class: FailureClass::Auth,
            message: "profile `gpt`: HTTP 401 Unauthorized from https://api.example.com/v1/responses: bad key".into(),
            fix: Some("check the API key in OPENAI_API_KEY".into()),
        };
        assert_eq!(
            failure_text("gpt", &failure),
            "hcbench: first provider error of profile `gpt`: profile `gpt`: HTTP 401 Unauthorized from \
             https://api.example.com/v1/responses: bad key\n  fix: check the API key in OPENAI_API_KEY"
        );
        let other = ProviderFailure { class: FailureClass::Other, fix: None, ..failure };
        assert!(!failure_text("gpt", &other).contains("fix:"));
    }
}
