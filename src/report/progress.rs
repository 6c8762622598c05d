//! Progress display: an engine sink that writes to stderr only (stdout carries results).
//!
//! On a terminal: an indicatif bar with ETA plus one line per profile with its passed /
//! failed / errored counts. Elsewhere (CI logs): one plain line per finished cell.
//!
//! Both say the same things a person needs while the run goes, as cargo-nextest does: the run
//! header (its id, its cell count and its directory) first; every cell that did not pass, as
//! it finishes, with its reason cut at a word to the terminal's width; and on Ctrl-C the exact
//! command that finishes the run later (the one every report of an incomplete run names).
//! A cause shared by many cells (a server down, a Ctrl-C) is told once. No colour anywhere,
//! and off a terminal no escape code at all (the bars, which move the cursor, are TTY-only),
//! so a piped stderr stays plain text. `validate` keeps plain lines (see [`LineProgress`]).

use std::collections::{BTreeMap, HashMap};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::events::{EngineEvent, EngineSink};
use crate::replay::CellSummary;
use crate::trace::event::Outcome;

/// The sink for the terminal of a run `matrix --resume` can finish (`run`, `matrix`,
/// `ablate`): bars on a TTY, lines otherwise; both name the resume command on Ctrl-C.
pub fn auto() -> Box<dyn EngineSink> {
    if std::io::stderr().is_terminal() {
        Box::new(BarProgress::new())
    } else {
        Box::new(LineProgress { evaluation: true, ..LineProgress::stderr() })
    }
}

/// Lines for a log: one per finished cell, the not-passing ones with their reason.
pub struct LineProgress {
    /// A run of `run`, `matrix` or `ablate`: a failure is news (named with its reason) and
    /// `matrix --resume` finishes the run. Not so for `validate`, whose control agents fail by
    /// design and whose runs are not resumed: its lines stay one short line per cell.
    evaluation: bool,
    /// Set by `RunStarted`: the directory the resume command names.
    run_dir: Mutex<Option<PathBuf>>,
    reasons: Shown,
}

impl LineProgress {
    pub fn stderr() -> Self {
        LineProgress { evaluation: false, run_dir: Mutex::new(None), reasons: Shown::default() }
    }
}

/// The width lines are cut to when stderr is no terminal (a log file, a CI job): long enough
/// for a reason to say something, short enough to read in a CI page. (Not `$COLUMNS`: nothing
/// below commands/ reads the environment, docs/architecture.md.)
const LOG_WIDTH: usize = 120;

/// The width lines are cut to: the terminal's, else [`LOG_WIDTH`].
fn stderr_width() -> usize {
    console::Term::stderr().size_checked().map(|(_, cols)| usize::from(cols)).filter(|w| *w >= 40).unwrap_or(LOG_WIDTH)
}

/// The run header both sinks open with.
fn header_line(run_id: &str, cells: usize, run_dir: &Path) -> String {
    format!("hcbench: run {run_id}: {cells} cell(s) -> {}", run_dir.display())
}

/// On Ctrl-C: the command that finishes the run, as the reports of an incomplete run give it.
fn resume_line(run_dir: &Path) -> String {
    format!("hcbench: finish the run later with: {}", super::model::resume_command(run_dir))
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

/// The reasons already shown, each with the first cell that had it. When many cells end for
/// one cause (a profile's server down, a Ctrl-C, a budget), the cause is read once and the
/// other cells point at it instead of repeating it. At most [`SHOWN_KEPT`] reasons are kept, so
/// a long run whose every failure has its own reason (test names, paths) does not grow with
/// its cells: later new reasons are printed and not kept.
#[derive(Default)]
struct Shown(Mutex<HashMap<String, String>>);

/// Most reasons [`Shown`] keeps (about 0.5 MB at 500-byte reasons).
const SHOWN_KEPT: usize = 1000;

impl Shown {
    /// [`cell_line`], and for a cell that did not pass its reason, cut at a word so the line
    /// fits `width` columns (`[ 4/40] failed  bugfix-1__nop (0.3s): tests failed: 2 of 3…`), or
    /// `same reason as CELL` when an earlier line gave the same reason.
    fn finished_line(&self, summary: &CellSummary, done: usize, total: usize, width: usize) -> String {
        let line = cell_line(summary, done, total);
        let reason = summary.reason.split_whitespace().collect::<Vec<_>>().join(" ");
        if summary.outcome == Some(Outcome::Passed) || reason.is_empty() {
            return line;
        }
        let mut shown = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(first) = shown.get(&reason) {
            return format!("{line}: same reason as {first}");
        }
        if shown.len() < SHOWN_KEPT {
            shown.insert(reason.clone(), summary.cell_id.clone());
        }
        // A reason always gets a few words, even when the cell id alone fills the line.
        let room = width.saturating_sub(line.chars().count() + 2).max(24);
        format!("{line}: {}", crate::util::cut_words(&reason, room))
    }
}

/// An interrupted cell taken up from its checkpoint.
fn resumed_line(cell_id: &str, from_step: u32, restored: bool, duration_ms: u64) -> String {
    let workspace = if restored { "workspace restored" } else { "workspace verified" };
    format!("{cell_id}: continuing after step {from_step} from its checkpoint ({workspace}, {duration_ms} ms)")
}

/// A checkpoint that could not be used: a warning, the cell starts over.
fn refused_line(cell_id: &str, reason: &str) -> String {
    format!("warning: {cell_id}: checkpoint refused, the cell starts over from step 0: {reason}")
}

impl EngineSink for LineProgress {
    fn event(&self, event: EngineEvent<'_>) {
        let mut err = std::io::stderr().lock();
        let _ = match event {
            EngineEvent::RunStarted { run_id, run_dir, cells, .. } => {
                *self.run_dir.lock().unwrap_or_else(|p| p.into_inner()) = Some(run_dir.to_path_buf());
                writeln!(err, "{}", header_line(run_id, cells, run_dir))
            }
            EngineEvent::CellStarted { .. } => Ok(()),
            EngineEvent::CellFinished { summary, done, total } if self.evaluation => {
                writeln!(err, "{}", self.reasons.finished_line(summary, done, total, stderr_width()))
            }
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
            EngineEvent::CellResumed { cell_id, from_step, workspace_restored, duration_ms } => {
                writeln!(err, "hcbench: {}", resumed_line(cell_id, from_step, workspace_restored, duration_ms))
            }
            EngineEvent::ResumeRefused { cell_id, reason } => writeln!(err, "{}", refused_line(cell_id, reason)),
            EngineEvent::Cancelling => writeln!(
                err,
                "hcbench: interrupted: running cells are recorded as cancelled and reports written; press Ctrl-C again to stop at once"
            )
            .and_then(|()| match self.run_dir.lock().unwrap_or_else(|p| p.into_inner()).as_deref() {
                Some(dir) if self.evaluation => writeln!(err, "{}", resume_line(dir)),
                _ => Ok(()),
            }),
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
    /// Set by `RunStarted`: the directory the resume command names.
    run_dir: Mutex<Option<PathBuf>>,
    /// The width lines are cut to; None: the terminal's, asked each time (it may be resized).
    width: Option<usize>,
    reasons: Shown,
}

impl BarProgress {
    pub fn new() -> Self {
        Self::with_target(ProgressDrawTarget::stderr(), None)
    }

    /// Bars drawn on `target` (a test's recording terminal), lines cut to `width`.
    pub(crate) fn with_target(target: ProgressDrawTarget, width: Option<usize>) -> Self {
        BarProgress {
            multi: MultiProgress::with_draw_target(target),
            state: Mutex::new(None),
            run_dir: Mutex::new(None),
            width,
            reasons: Shown::default(),
        }
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
            EngineEvent::RunStarted { run_id, run_dir, cells, profiles } => {
                // Above the bars, so it stays when they finish, as in the line sink.
                let _ = self.multi.println(header_line(run_id, cells, run_dir));
                *self.run_dir.lock().unwrap_or_else(|p| p.into_inner()) = Some(run_dir.to_path_buf());
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
            EngineEvent::CellFinished { summary, done, total } => {
                // A failure is named as it happens, above the bars, with its reason.
                if summary.outcome != Some(Outcome::Passed) {
                    let width = self.width.unwrap_or_else(stderr_width);
                    let _ = self.multi.println(self.reasons.finished_line(summary, done, total, width));
                }
                if let Some((overall, lines)) = state.as_mut() {
                    overall.inc(1);
                    if let Some((line, counts)) = lines.get_mut(summary.profile.as_str()) {
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
                if let Some(dir) = self.run_dir.lock().unwrap_or_else(|p| p.into_inner()).as_deref() {
                    let _ = self.multi.println(resume_line(dir));
                }
            }
            EngineEvent::ProfileUnavailable { reason, .. } => {
                let _ = self.multi.println(reason);
            }
            EngineEvent::ProviderFailed { profile, failure } => {
                let _ = self.multi.println(failure_text(profile, failure));
            }
            EngineEvent::CellResumed { cell_id, from_step, workspace_restored, duration_ms } => {
                let _ = self.multi.println(resumed_line(cell_id, from_step, workspace_restored, duration_ms));
            }
            EngineEvent::ResumeRefused { cell_id, reason } => {
                let _ = self.multi.println(refused_line(cell_id, reason));
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use indicatif::TermLike;

    use super::*;

    /// A terminal that keeps every line written to it (and ignores cursor moves), so the bar
    /// sink's TTY output can be read back.
    #[derive(Debug, Clone, Default)]
    struct Recorder(Arc<Mutex<Vec<String>>>);

    impl TermLike for Recorder {
        fn width(&self) -> u16 {
            80
        }
        fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn write_line(&self, s: &str) -> std::io::Result<()> {
            self.0.lock().unwrap().push(s.to_string());
            Ok(())
        }
        fn write_str(&self, s: &str) -> std::io::Result<()> {
            self.0.lock().unwrap().push(s.to_string());
            Ok(())
        }
        fn clear_line(&self) -> std::io::Result<()> {
            Ok(())
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn cell(id: &str, outcome: Outcome, reason: &str) -> CellSummary {
        CellSummary {
            cell_id: id.into(),
            profile: "nop".into(),
            outcome: Some(outcome),
            reason: reason.into(),
            wall_ms: 1200,
            ..Default::default()
        }
    }

    const LONG_REASON: &str = "tests failed: 2 of 3 tests failed; test_add expected 5 but the function returned 4 and \
         test_sub raised ZeroDivisionError in calc/ops.py line 12";

    #[test]
    fn a_failing_cell_line_carries_its_reason_cut_at_a_word_to_the_width() {
        let failed = cell("bugfix-1__nop", Outcome::Failed, LONG_REASON);
        let shown = Shown::default();
        let line = shown.finished_line(&failed, 3, 40, 80);
        assert!(line.starts_with("[ 3/40] failed         bugfix-1__nop (1.2s): tests failed: 2 of 3"), "{line}");
        assert!(line.chars().count() <= 80, "{line} is {} columns", line.chars().count());
        assert!(line.ends_with('…') && !line.ends_with(" …"), "cut at a word: {line}");
        let word_before = line.trim_end_matches('…').rsplit(' ').next().unwrap();
        assert!(LONG_REASON.split(' ').any(|w| w == word_before), "`{word_before}` is a whole word of the reason");
        // A passing cell stays one short line; a reason that fits is whole.
        let passed = cell("bugfix-1__oracle", Outcome::Passed, "all tests passed");
        assert_eq!(shown.finished_line(&passed, 4, 40, 80), "[ 4/40] passed         bugfix-1__oracle (1.2s)");
        let short = cell("x__nop", Outcome::Timeout, "tests ran\nlonger than 30s");
        assert_eq!(
            shown.finished_line(&short, 5, 40, 80),
            "[ 5/40] timeout        x__nop (1.2s): tests ran longer than 30s"
        );
        // One cause of many failures is told once; the other cells point at the first.
        let again = cell("bugfix-2__nop", Outcome::Failed, LONG_REASON);
        assert_eq!(
            shown.finished_line(&again, 6, 40, 80),
            "[ 6/40] failed         bugfix-2__nop (1.2s): same reason as bugfix-1__nop"
        );
    }

    #[test]
    fn the_reasons_kept_are_bounded_and_a_reason_past_the_bound_is_printed_whole() {
        let shown = Shown::default();
        for i in 0..SHOWN_KEPT + 5 {
            let line =
                shown.finished_line(&cell(&format!("c{i}__nop"), Outcome::Failed, &format!("reason {i}")), i, 9999, 80);
            assert!(line.ends_with(&format!(": reason {i}")), "{line}");
        }
        assert_eq!(shown.0.lock().unwrap().len(), SHOWN_KEPT);
        // A kept reason still points at its first cell; one past the bound is told again.
        let kept = shown.finished_line(&cell("x__nop", Outcome::Failed, "reason 7"), 1, 9999, 80);
        assert!(kept.ends_with("same reason as c7__nop"), "{kept}");
        let past = format!("reason {}", SHOWN_KEPT + 1);
        let again = shown.finished_line(&cell("y__nop", Outcome::Failed, &past), 1, 9999, 80);
        assert!(again.ends_with(&format!(": {past}")), "{again}");
    }

    #[test]
    fn the_bar_sink_prints_the_header_failures_and_the_resume_command_on_a_terminal() {
        let term = Recorder::default();
        let sink = BarProgress::with_target(ProgressDrawTarget::term_like(Box::new(term.clone())), Some(80));
        let dir = tempfile::tempdir().unwrap();
        let profiles = ["oracle".to_string(), "nop".to_string()];
        sink.event(EngineEvent::RunStarted { run_id: "r1", run_dir: dir.path(), cells: 2, profiles: &profiles });
        let passed = cell("bugfix-1__oracle", Outcome::Passed, "all tests passed");
        sink.event(EngineEvent::CellFinished { summary: &passed, done: 1, total: 2 });
        let failed = cell("bugfix-1__nop", Outcome::Failed, LONG_REASON);
        sink.event(EngineEvent::CellFinished { summary: &failed, done: 2, total: 2 });
        sink.event(EngineEvent::Cancelling);
        drop(sink);
        let text = term.0.lock().unwrap().join("\n");
        let header = format!("hcbench: run r1: 2 cell(s) -> {}", dir.path().display());
        assert!(text.contains(&header), "the run header on a TTY:\n{text}");
        assert!(text.contains("[2/2] failed         bugfix-1__nop (1.2s): tests failed: 2 of 3"), "{text}");
        assert!(!text.contains("[1/2] passed"), "passing cells only count in the bars:\n{text}");
        let resume = format!("hcbench matrix --resume {}", dir.path().canonicalize().unwrap().display());
        assert!(text.contains(&format!("finish the run later with: {resume}")), "{text}");
    }
}
