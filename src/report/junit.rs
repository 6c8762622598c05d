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

use std::io::Write;

use quick_junit::XmlString;
use quick_xml::Writer;
use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, BytesText, Event};

use super::model::MatrixReport;
use super::{ExportError, Exporter};
use crate::replay::CellSummary;
use crate::trace::event::Outcome;

pub struct Junit;

/// How one cell reads in JUnit: passed, a failure (the agent failed), or an error (every
/// infrastructure class and a cell without a verdict).
fn kind(c: &CellSummary) -> Option<&'static str> {
    match c.outcome {
        Some(Outcome::Passed) => None,
        Some(Outcome::Failed) => Some("failure"),
        _ => Some("error"),
    }
}

/// The counts of one suite's `<testsuite>` tag: tests, failures, errors.
fn counts<'a>(cells: impl Iterator<Item = &'a CellSummary>) -> (usize, usize, usize) {
    cells.fold((0, 0, 0), |(t, f, e), c| match kind(c) {
        None => (t + 1, f, e),
        Some("failure") => (t + 1, f + 1, e),
        Some(_) => (t + 1, f, e + 1),
    })
}

/// An element with its attributes, each value cleaned as JUnit readers need (no ANSI
/// escapes or control characters, [`XmlString`]) and escaped by quick-xml.
fn tag<'a>(name: &'a str, attributes: &[(&str, &str)]) -> BytesStart<'a> {
    let mut tag = BytesStart::new(name);
    for (k, v) in attributes {
        tag.push_attribute((*k, XmlString::new(v).as_str()));
    }
    tag
}

impl Exporter for Junit {
    fn file_name(&self) -> &'static str {
        "junit.xml"
    }

    /// Streams the document with quick-xml, one test case at a time: the counts each
    /// `<testsuite>` opens with are taken from the summaries first, so no suite is held whole.
    /// The layout is quick-junit's (four-space indent, the same attributes in the same order),
    /// which junit.xml was written with before it was streamed.
    fn write(&self, report: &MatrixReport, out: &mut dyn Write) -> Result<(), ExportError> {
        let mut w = Writer::new_with_indent(out, b' ', 4);
        w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
        let suites: Vec<(usize, usize, usize)> =
            report.profiles.iter().map(|p| counts(report.cells.iter().filter(|c| c.group() == p.as_str()))).collect();
        let total = suites.iter().fold((0, 0, 0), |a, s| (a.0 + s.0, a.1 + s.1, a.2 + s.2));
        let skipped = report.not_run.len();
        let name = format!("hcbench {}", report.benchmark);
        w.write_event(Event::Start(tag(
            "testsuites",
            &[
                ("name", &name),
                ("tests", &(total.0 + skipped).to_string()),
                ("skipped", &skipped.to_string()),
                ("failures", &total.1.to_string()),
                ("errors", &total.2.to_string()),
            ],
        )))?;
        let power = report.power.sentence();
        for (profile, (tests, failures, errors)) in report.profiles.iter().zip(suites) {
            let cells = || report.cells.iter().filter(|c| c.group() == profile.as_str());
            let head = tag(
                "testsuite",
                &[
                    ("name", profile),
                    ("tests", &tests.to_string()),
                    ("skipped", "0"),
                    ("errors", &errors.to_string()),
                    ("failures", &failures.to_string()),
                ],
            );
            w.write_event(Event::Start(head))?;
            w.write_event(Event::Start(BytesStart::new("properties")))?;
            if let Some(s) = report.profile_stats.iter().find(|s| &s.profile == profile) {
                for (k, v) in [
                    ("pass_rate", format!("{:.4}", s.pass_rate)),
                    ("pass_rate_ci", super::pct_range(&s.pass_rate_ci)),
                    ("coverage", format!("{:.4}", s.coverage)),
                ] {
                    w.write_event(Event::Empty(tag("property", &[("name", k), ("value", &v)])))?;
                }
            }
            w.write_event(Event::Empty(tag("property", &[("name", "power"), ("value", &power)])))?;
            w.write_event(Event::End(BytesEnd::new("properties")))?;
            for c in cells() {
                test_case(&mut w, c, report.resume_command.as_deref())?;
            }
            w.write_event(Event::End(BytesEnd::new("testsuite")))?;
        }
        for n in &report.not_run {
            let suite = tag(
                "testsuite",
                &[("name", &n.profile), ("tests", "1"), ("skipped", "1"), ("errors", "0"), ("failures", "0")],
            );
            w.write_event(Event::Start(suite))?;
            w.write_event(Event::Start(tag("testcase", &[("name", &format!("{} (not run)", n.profile))])))?;
            w.write_event(Event::Empty(tag("skipped", &[("message", &n.reason), ("type", "not_run")])))?;
            w.write_event(Event::End(BytesEnd::new("testcase")))?;
            w.write_event(Event::End(BytesEnd::new("testsuite")))?;
        }
        w.write_event(Event::End(BytesEnd::new("testsuites")))?;
        w.write_indent()?;
        Ok(())
    }
}

/// One `<testcase>`: empty for a passed cell; else its `<failure>` or `<error>` with the reason
/// and a `<system-out>` saying where its trace is.
fn test_case<W: Write>(w: &mut Writer<W>, c: &CellSummary, resume_command: Option<&str>) -> std::io::Result<()> {
    let time = format!("{:.3}", std::time::Duration::from_millis(c.wall_ms).as_secs_f64());
    let classname = format!("{}.{}", c.category, c.case_id);
    let head = tag("testcase", &[("name", &c.cell_id), ("classname", &classname), ("time", &time)]);
    let Some(kind) = kind(c) else {
        return w.write_event(Event::Empty(head));
    };
    w.write_event(Event::Start(head))?;
    let ty = if kind == "failure" { "failed" } else { c.outcome.map_or("incomplete", Outcome::as_str) };
    w.write_event(Event::Empty(tag(kind, &[("message", &c.reason), ("type", ty)])))?;
    w.write_event(Event::Start(BytesStart::new("system-out")))?;
    w.write_event(Event::Text(BytesText::new(XmlString::new(system_out(c, resume_command)).as_str())))?;
    w.write_event(Event::End(BytesEnd::new("system-out")))?;
    w.write_event(Event::End(BytesEnd::new("testcase")))
}

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
