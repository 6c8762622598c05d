//! The command line as typed: raw values only. [`crate::settings`] turns them into resolved
//! settings once; nothing downstream sees clap.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(name = "hcbench", version, about = "Batch evaluation and benchmarking for coding agents")]
pub struct Cli {
    /// More diagnostics on stderr (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// Project root holding benchmarks/, fixtures/, suites/ and workspace/.
    #[arg(long, global = true, env = "HCBENCH_ROOT", default_value = ".")]
    pub root: PathBuf,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a benchmark's cases with one profile and print a table of outcomes.
    Run(RunArgs),
    /// Rebuild summaries from a trace.jsonl or a run directory, without running anything.
    Replay(ReplayArgs),
    /// List a benchmark's cases with category, split and fixture size.
    List(ListArgs),
    /// Prove every case sound: baseline fails, oracle passes twice, nop and tamper agents fail.
    Validate(ValidateArgs),
}

#[derive(Debug, Args, Clone)]
pub struct Selection {
    /// Benchmark folder under benchmarks/.
    #[arg(long, default_value = "hc-bench")]
    pub benchmark: String,
    /// Named selection of cases from suites/<SUITE>.yaml.
    #[arg(long)]
    pub suite: Option<String>,
    /// Only cases of this split.
    #[arg(long, value_parser = ["train", "test", "heldout"])]
    pub split: Option<String>,
    /// Only these case ids (repeatable).
    #[arg(long = "case")]
    pub cases: Vec<String>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub selection: Selection,
    /// Profile: `oracle` (built in) or `scripted` (needs --script).
    #[arg(long, default_value = "oracle")]
    pub profile: String,
    /// Action script for the scripted profile (YAML or JSON).
    #[arg(long)]
    pub script: Option<PathBuf>,
    /// Cells running at once (default: number of cores).
    #[arg(long, short)]
    pub jobs: Option<usize>,
    /// Run directory (default: workspace/runs/<run-id>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Output format of the final summary.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// A trace.jsonl file or a run directory.
    pub path: PathBuf,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub selection: Selection,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    #[command(flatten)]
    pub selection: Selection,
    #[arg(long, short)]
    pub jobs: Option<usize>,
    /// Directory for the validation runs (default: workspace/validate/<run-id>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Json,
}
