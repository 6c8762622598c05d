//! `hcbench validate`: command-line glue around [`crate::validate`], which runs the control
//! agents and judges every selected case.

use std::path::Path;

use super::CommandError;
use crate::cli::Format;
use crate::settings::ValidateSettings;
use crate::validate::{self, JsonSink, TableSink, ValidateError};

impl From<ValidateError> for CommandError {
    fn from(e: ValidateError) -> Self {
        if e.is_usage() { CommandError::Usage(e.to_string()) } else { CommandError::Internal(anyhow::Error::new(e)) }
    }
}

pub fn validate(root: &Path, settings: ValidateSettings) -> Result<i32, CommandError> {
    let outcome = match settings.format {
        Format::Table => validate::run(root, &settings, &mut TableSink::stdout())?,
        Format::Json => validate::run(root, &settings, &mut JsonSink::stdout())?,
    };
    Ok(outcome.exit_code())
}
