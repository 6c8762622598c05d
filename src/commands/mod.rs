//! One function per subcommand. Each returns the process exit code, or an error that
//! [`CommandError::exit_code`] classifies (bad input vs. hcbench failing).

mod exec;
mod gate;
mod list;
mod matrix;
mod record;
mod replay;
mod report;
mod run;
mod validate;

use crate::cli::{Cli, Command};
use crate::exit;

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
    crate::bench::LoadError,
    crate::bench::suite::SuiteError,
    crate::model::scripted::ScriptError,
    crate::replay::ReplayError,
    crate::engine::ManifestError,
    crate::report::model::ReportError
);

impl From<crate::report::ExportError> for CommandError {
    fn from(e: crate::report::ExportError) -> Self {
        CommandError::Internal(anyhow::Error::new(e))
    }
}

/// Runs the parsed command line.
pub fn dispatch(cli: Cli) -> Result<i32, CommandError> {
    let root = cli.root.clone();
    let agent = cli.agent.clone();
    let spec = || -> Result<std::sync::Arc<crate::agent::spec::AgentSpec>, CommandError> {
        crate::agent::spec::AgentSpec::resolve(&root, agent.as_deref())
            .map(std::sync::Arc::new)
            .map_err(|e| CommandError::Usage(e.to_string()))
    };
    match cli.command {
        Command::Run(args) => run::run(&root, &spec()?, args),
        Command::Matrix(args) => matrix::matrix(&root, &spec()?, args),
        Command::Report(args) => report::report(args),
        Command::Replay(args) => replay::replay(args),
        Command::List(args) => list::list(&root, args),
        Command::Validate(args) => validate::validate(&root, &spec()?, args),
        Command::Gate(args) => gate::gate(&root, agent.as_deref(), args),
        Command::Record(args) => record::record(&root, args),
    }
}

/// A multi-threaded runtime for commands that wait on child processes.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, CommandError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CommandError::Internal(anyhow::anyhow!("cannot start the async runtime: {e}")))
}
