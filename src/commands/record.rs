//! `hcbench record`: command-line glue around [`crate::gate::record`], which checks the
//! binding to the gated candidate and appends the row (docs/gate.md).

use std::path::Path;

use super::CommandError;
use super::gate::wait;
use crate::cli::{GateFormat, RecordArgs};
use crate::gate::GateError;
use crate::gate::config::Config;
use crate::gate::record::{self, RecordSettings};
use crate::gate::report::{RecordJson, RecordText};

pub fn record(root: &Path, args: RecordArgs) -> Result<i32, CommandError> {
    let settings = RecordSettings {
        config: Config::load(root, args.config.as_deref()).map_err(GateError::from)?,
        root: root.to_path_buf(),
        wait: wait(args.wait)?,
        accept_history: args.accept_history,
        accept_config: args.accept_config,
    };
    let outcome = match args.format {
        GateFormat::Text => record::run(&settings, &mut RecordText::stdout())?,
        GateFormat::Json => record::run(&settings, &mut RecordJson::stdout())?,
    };
    Ok(outcome.exit_code())
}
