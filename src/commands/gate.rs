//! `hcbench gate`: command-line glue around [`crate::gate`].
//!
//! It resolves the gate's settings from the flags and `experiment_config.yaml` in one function,
//! picks the sink for `--format`, runs the gate and returns the outcome's exit code. The
//! gate itself (steps, output, Ctrl-C) is in `src/gate/`; docs/gate.md describes it.

use std::time::Duration;

use super::CommandError;
use crate::cli::{GateArgs, GateFormat};
use crate::gate::report::{JsonSink, TextSink};
use crate::gate::{self, GateError, GateSettings};
use crate::settings::Settings;

impl From<GateError> for CommandError {
    fn from(e: GateError) -> Self {
        if e.is_usage() { CommandError::Usage(e.to_string()) } else { CommandError::Internal(anyhow::Error::new(e)) }
    }
}

pub fn gate(settings: &Settings, args: GateArgs) -> Result<i32, CommandError> {
    if settings.agent_flag().is_some() {
        return Err(CommandError::Usage(
            "--agent (or HCBENCH_AGENT) does not apply to `gate`: the candidate is `agent_dir` in experiment_config.yaml".into(),
        ));
    }
    if let Some(source) = settings.context_mode_flag() {
        return Err(CommandError::Usage(format!(
            "{source} does not apply to `gate`: the gate judges the candidate spec as written; set `context.mode` in its agent.yaml"
        )));
    }
    let gate_settings = gate_settings(settings, &args)?;
    // Still one thread here (the runtime starts with Step 1), as the private area needs; it is
    // removed when this function returns, by value or by a panic (docs/gate.md).
    let _private = gate::private::enter(&settings.root).map_err(|e| GateError::Setup(e.to_string()))?;
    let outcome = match args.format {
        GateFormat::Text => gate::run(&gate_settings, &mut TextSink::stdout())?,
        GateFormat::Json => gate::run(&gate_settings, &mut JsonSink::stdout())?,
    };
    Ok(outcome.exit_code())
}

/// The gate's settings: flags, else environment, else `experiment_config.yaml`, else defaults.
fn gate_settings(settings: &Settings, args: &GateArgs) -> Result<GateSettings, CommandError> {
    let config = settings.config(args.config.as_deref())?;
    let wait = wait(args.wait)?;
    let profiles = settings.profiles(
        args.models.as_deref(),
        config.models.as_deref(),
        Some(std::slice::from_ref(&config.profile)),
    )?;
    // Whether a profile that does not load is the candidate's fault is the gate's call.
    let profile = settings.profile(&profiles, &config.profile, None).map_err(|e| e.to_string());
    let quarantine = match &args.quarantine {
        Some(path) => {
            crate::trend::quarantine::Quarantine::read(path).map_err(CommandError::Usage)?.cases_of(&config.benchmark)
        }
        None => Default::default(),
    };
    Ok(GateSettings {
        root: settings.root.clone(),
        jobs: crate::settings::jobs(args.jobs, config.jobs)?,
        config,
        profile,
        profiles,
        wait,
        accept_state_change: args.accept_state_change.clone(),
        recover_state: match (args.restore_state, args.accept_state_reset) {
            (true, _) => Some(gate::state::Recovery::Restore),
            (_, true) => Some(gate::state::Recovery::AcceptReset),
            _ => None,
        },
        accept_config: args.accept_config,
        accept_profile_change: args.accept_profile_change,
        accept_history: args.accept_history,
        quarantine,
        isolation: settings.isolation_with(args.checkpoint_interval.as_deref())?,
    })
}

/// `--wait SECONDS` as a duration.
pub(super) fn wait(seconds: f64) -> Result<Duration, CommandError> {
    if !seconds.is_finite() || seconds < 0.0 {
        return Err(CommandError::Usage(format!("--wait {seconds}: give a number of seconds >= 0")));
    }
    Ok(Duration::from_secs_f64(seconds.min(1e9)))
}
