//! `junit.xml`: one testcase per cell, one testsuite per profile, for CI systems.
//!
//! Mapping: passed -> success; failed -> failure (the agent's verdict); every infrastructure
//! class (timeout, provider_error, harness_error, ...) -> error, so CI dashboards keep "the
//! agent failed" apart from "the run broke", as the reports do.

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};

use super::model::MatrixReport;
use super::{ExportError, Exporter};
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
