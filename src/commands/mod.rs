//! One function per subcommand. Each returns the process exit code, or an error that
//! [`CommandError::exit_code`] classifies (bad input vs. hcbench failing).

mod list;
mod replay;
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
    crate::replay::ReplayError
);

/// Runs the parsed command line.
pub fn dispatch(cli: Cli) -> Result<i32, CommandError> {
    let root = cli.root.clone();
    match cli.command {
        Command::Run(args) => run::run(&root, args),
        Command::Replay(args) => replay::replay(args),
        Command::List(args) => list::list(&root, args),
        Command::Validate(args) => validate::validate(&root, args),
    }
}

/// A multi-threaded runtime for commands that wait on child processes.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, CommandError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CommandError::Internal(anyhow::anyhow!("cannot start the async runtime: {e}")))
}
