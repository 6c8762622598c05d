//! `cells.csv`: one row per cell, for spreadsheets and data frames.

use std::io::Write;

use super::model::MatrixReport;
use super::{ExportError, Exporter};

pub struct Csv;

const HEADER: &[&str] = &[
    "cell_id",
    "case_id",
    "category",
    "split",
    "profile",
    "provider",
    "model",
    "epoch",
    "outcome",
    "reward",
    "tests_passed",
    "verifier_passed",
    "steps",
    "step_budget",
    "tool_calls",
    "policy_denials",
    "invalid_actions",
    "tool_failures",
    "model_errors",
    "model_retries",
    "repeated_reads",
    "first_edit_step",
    "input_tokens",
    "output_tokens",
    "wall_ms",
    "stop_reason",
    "reason",
    "delegations",
    "delegation_steps",
    "delegation_tokens",
    "delegation_cost_usd",
    // Multi-session cells only (src/report/sessions.rs); empty for the others.
    "features_passing",
    "false_claims",
    "features_per_session",
];

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

impl Exporter for Csv {
    fn file_name(&self) -> &'static str {
        "cells.csv"
    }

    fn write(&self, report: &MatrixReport, out: &mut dyn Write) -> Result<(), ExportError> {
        let err = |e: csv::Error| {
            let message = e.to_string();
            match e.into_kind() {
                csv::ErrorKind::Io(e) => ExportError::Stream(e),
                _ => ExportError::Render { format: "csv", message },
            }
        };
        let mut w = csv::Writer::from_writer(out);
        w.write_record(HEADER).map_err(err)?;
        for c in &report.cells {
            let sessions = super::sessions::csv_fields(c);
            w.write_record([
                c.cell_id.clone(),
                c.case_id.to_string(),
                c.category.to_string(),
                c.split.to_string(),
                c.profile.to_string(),
                c.provider.to_string(),
                c.model.to_string(),
                c.epoch.to_string(),
                c.outcome_label().to_string(),
                c.reward.to_string(),
                opt(c.tests_passed),
                opt(c.verifier_passed),
                c.steps.to_string(),
                c.step_budget.to_string(),
                c.tool_calls.to_string(),
                c.policy_denials.to_string(),
                c.invalid_actions.to_string(),
                c.tool_failures.to_string(),
                c.model_errors.to_string(),
                c.model_retries.to_string(),
                c.repeated_reads.to_string(),
                opt(c.first_edit_step),
                c.input_tokens.to_string(),
                c.output_tokens.to_string(),
                c.wall_ms.to_string(),
                c.stop_reason.to_string(),
                c.reason.to_string(),
                c.delegations.to_string(),
                c.delegation_steps.to_string(),
                (c.delegation_input_tokens + c.delegation_output_tokens).to_string(),
                opt(c.delegation_cost_usd()),
                sessions[0].clone(),
                sessions[1].clone(),
                sessions[2].clone(),
            ])
            .map_err(err)?;
        }
        w.flush()?;
        Ok(())
    }
}
