//! `junit.xml`: one testcase per cell, one testsuite per profile, for CI systems.
//!
//! Mapping: passed -> success; failed -> failure (the agent's verdict); every infrastructure
//! class (timeout, provider_error, harness_error, ...) -> error, so CI dashboards keep "the
//! agent failed" apart from "the run broke", as the reports do.
//!
//! Every testcase that did not pass carries a `system-out` a CI dashboard shows beside it: the
//! outcome, the reason in full, the cell's trace and the command that replays it. The trace
//! path is relative to the run directory (the folder holding this file's `reports/`), and the
//! replay command is written to be run from there: CI jobs upload the run directory as an
//! artifact and people replay it elsewhere, and `hcbench report` re-renders this file
//! byte-identical from the traces wherever the directory is, neither of which an absolute path
//! of the machine that ran it would survive.

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};

use super::model::MatrixReport;
use super::{ExportError, Exporter};
use crate::replay::CellSummary;
use crate::trace::event::Outcome;

pub struct Junit;

impl Exporter for Junit {
    fn file_name(&self) -> &'static str {
        "junit.xml"
    }

    fn render(&self, report: &MatrixReport) -> Result<Vec<u8>, ExportError> {
        let mut junit = Report::new(format!("hcbench {}", report.benchmark));
        for profile in &report.profiles {
            let mut suite = TestSuite::new(profile.as_str());
            // The profile's numbers ride along as suite properties, for dashboards that show them.
            if let Some(s) = report.profile_stats.iter().find(|s| &s.profile == profile) {
                suite.add_property(("pass_rate", format!("{:.4}", s.pass_rate).as_str()));
                suite.add_property(("pass_rate_ci", super::pct_range(&s.pass_rate_ci).as_str()));
                suite.add_property(("coverage", format!("{:.4}", s.coverage).as_str()));
            }
            suite.add_property(("power", report.power.sentence().as_str()));
            for c in report.cells.iter().filter(|c| c.group() == profile.as_str()) {
                let status = match c.outcome {
                    Some(Outcome::Passed) => TestCaseStatus::success(),
                    Some(Outcome::Failed) => {
                        let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
                        s.set_message(c.reason.as_str());
                        s.set_type("failed");
                        s
                    }
                    other => {
                        let mut s = TestCaseStatus::non_success(NonSuccessKind::Error);
                        s.set_message(c.reason.as_str());
                        s.set_type(other.map_or("incomplete", Outcome::as_str));
                        s
                    }
                };
                let mut tc = TestCase::new(c.cell_id.as_str(), status);
                tc.set_classname(format!("{}.{}", c.category, c.case_id));
                tc.set_time(std::time::Duration::from_millis(c.wall_ms));
                if c.outcome != Some(Outcome::Passed) {
                    tc.set_system_out(system_out(c, report.resume_command.as_deref()));
                }
                suite.add_test_case(tc);
            }
            junit.add_test_suite(suite);
        }
        // A profile set aside by --skip-unavailable is a skipped suite, never a failure.
        for n in &report.not_run {
            let mut status = TestCaseStatus::skipped();
            status.set_message(n.reason.as_str());
            status.set_type("not_run");
            let mut suite = TestSuite::new(n.profile.as_str());
            suite.add_test_case(TestCase::new(format!("{} (not run)", n.profile), status));
            junit.add_test_suite(suite);
        }
        junit
            .to_string()
            .map(String::into_bytes)
            .map_err(|e| ExportError::Render { format: "junit", message: e.to_string() })
    }
}

/// The `system-out` of a testcase that did not pass: outcome, reason (in full), trace, and how
/// to replay it, or how to finish the run when the cell never ran.
fn system_out(c: &CellSummary, resume_command: Option<&str>) -> String {
    let mut text = format!("outcome: {}\nreason: {}\n", c.outcome_label(), c.reason);
    // A cell with no outcome that never started has no trace (see report::model::load_cell).
    if c.outcome.is_none() && c.stop_reason == "not_run" {
        text.push_str("trace: none (the cell never ran)\n");
        if let Some(cmd) = resume_command {
            text.push_str(&format!("finish the run: {cmd}\n"));
        }
    } else {
        let trace = format!("cells/{}/trace.jsonl", c.cell_id);
        text.push_str(&format!("trace: {trace} (in the run directory, the parent of reports/)\n"));
        text.push_str(&format!("replay (from the run directory): hcbench replay {trace}\n"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_out_gives_the_reason_the_trace_and_how_to_replay_or_finish() {
        let failed = CellSummary {
            cell_id: "fix-1__gpt".into(),
            outcome: Some(Outcome::ProviderError),
            reason: "dns error: failed to lookup address information; check `base_url`".into(),
            stop_reason: "provider_error".into(),
            ..Default::default()
        };
        assert_eq!(
            system_out(&failed, None),
            "outcome: provider_error\nreason: dns error: failed to lookup address information; check `base_url`\n\
             trace: cells/fix-1__gpt/trace.jsonl (in the run directory, the parent of reports/)\n\
             replay (from the run directory): hcbench replay cells/fix-1__gpt/trace.jsonl\n"
        );
        let never_ran = CellSummary {
            cell_id: "fix-2__gpt".into(),
            reason: "the cell never ran (interrupted run?)".into(),
            stop_reason: "not_run".into(),
            ..Default::default()
        };
        let text = system_out(&never_ran, Some("hcbench matrix --resume /runs/r"));
        assert!(text.starts_with("outcome: incomplete\nreason: the cell never ran"), "{text}");
        assert!(text.contains("trace: none (the cell never ran)\nfinish the run: hcbench matrix --resume /runs/r\n"));
        assert!(!text.contains("replay"), "no trace to replay: {text}");
    }
}
