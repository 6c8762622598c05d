//! One function per subcommand: resolve the settings, call the library, print, return the
//! exit code. Errors are classified once here ([`CommandError::exit_code`]): bad input the
//! user can fix (exit 2) vs. hcbench failing (exit 3). This is the only layer that reads the
//! process environment ([`Environment::capture`]).

mod ablate;
mod completions;
mod gate;
mod list;
mod matrix;
mod merge;
mod plan;
mod record;
mod replay;
mod report;
mod run;
mod test_split;
mod trend;
mod validate;
mod view;

use crate::cli::{Cli, Command};
use crate::environment::Environment;
use crate::exit;
use crate::settings::Settings;

#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The user can fix this: bad flags, benchmark, suite, script, trace or run directory.
    #[error("{0}")]
    Usage(String),
    /// hcbench could not do its job: I/O failure or a bug.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl CommandError {
    pub fn exit_code(&self) -> i32 {
        match self {
            CommandError::Usage(_) => exit::USAGE,
            CommandError::Internal(_) => exit::INTERNAL,
        }
    }
}

macro_rules! usage_from {
    ($($t:ty),*) => {$(
        impl From<$t> for CommandError {
            fn from(e: $t) -> Self {
                CommandError::Usage(e.to_string())
            }
        }
    )*};
}
usage_from!(
    crate::settings::SettingsError,
    crate::environment::DotenvError,
    crate::bench::LoadError,
    crate::replay::ReplayError,
    crate::report::model::ReportError
);

impl From<crate::rundir::RunDirError> for CommandError {
    fn from(e: crate::rundir::RunDirError) -> Self {
        if e.is_usage() { CommandError::Usage(e.to_string()) } else { CommandError::Internal(anyhow::Error::new(e)) }
    }
}

impl From<crate::report::ExportError> for CommandError {
    fn from(e: crate::report::ExportError) -> Self {
        CommandError::Internal(anyhow::Error::new(e))
    }
}

/// Runs the parsed command line.
pub fn dispatch(cli: Cli) -> Result<i32, CommandError> {
    // Generated from the parser alone: no project root, no .env.
    match &cli.command {
        Command::Completions(args) => return completions::completions(args),
        Command::Man(args) => return completions::man(args),
        _ => {}
    }
    let settings = Settings::new(&cli, Environment::capture(&cli.root)?);
    match cli.command {
        // A run directory is finished the one way, whichever command started it.
        Command::Run(args) if args.resume.is_some() => {
            let human = args.human_test_split;
            matrix::matrix(settings.run_resume(args)?, human)
        }
        Command::Run(args) => {
            let human = args.human_test_split;
            run::run(&settings, settings.run(args)?, human)
        }
        Command::Matrix(args) => {
            let human = args.control.human_test_split;
            matrix::matrix(settings.matrix(args)?, human)
        }
        Command::Ablate(args) => {
            let human = args.control.human_test_split;
            ablate::ablate(settings.ablate(args)?, human)
        }
        Command::Plan(args) => plan::plan(settings.plan(args)?),
        Command::Report(args) => {
            let width = settings.width(args.wide);
            report::report(args, width)
        }
        Command::Replay(args) => {
            let width = settings.width(args.wide);
            replay::replay(args, width)
        }
        Command::List(args) => list::list(settings.list(args)?),
        Command::Validate(args) => validate::validate(&settings.root, settings.validate(args)?),
        Command::Gate(args) => gate::gate(&settings, args),
        Command::Record(args) => record::record(&settings.root, args),
        Command::Trend(args) => trend::trend(&settings, args),
        Command::History(cmd) => trend::history(&settings, cmd),
        Command::View(args) => view::view(&settings, args),
        Command::Merge(args) => merge::merge(&settings, args),
        Command::Completions(_) | Command::Man(_) => unreachable!("handled before the settings"),
    }
}
