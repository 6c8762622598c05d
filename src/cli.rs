//! The command line as typed: raw values only. [`crate::settings`] combines them with the
//! environment and the config files once; nothing below the commands sees clap.
//!
//! Also what `--help` says beyond each option's doc: examples and exit codes per command
//! ([`command`]), kept here beside the flags they show, so an example can be checked against
//! the flags it uses in one file.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(name = "hcbench", version, about = "Batch evaluation and benchmarking for coding agents")]
pub struct Cli {
    /// More diagnostics on stderr (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// Project root holding benchmarks/, fixtures/ and workspace/.
    #[arg(long, global = true, env = "HCBENCH_ROOT", default_value = ".")]
    pub root: PathBuf,
    /// Agent spec directory (default: $HCBENCH_AGENT, else <root>/agent when it exists, else the embedded default).
    #[arg(long, global = true)]
    pub agent: Option<PathBuf>,
    /// Context mode for this run, overriding the agent spec's `context.mode`: none, pack or memory
    /// (default: $HCBENCH_CONTEXT_MODE, else the spec's).
    #[arg(long, global = true, value_name = "MODE")]
    pub context_mode: Option<String>,
    /// Where cells' commands run: bubblewrap (the default; Debian package `bubblewrap`) or none,
    /// an explicit opt-out every report names (default: $HCBENCH_SANDBOX, else bubblewrap).
    #[arg(long, global = true, value_name = "SANDBOX")]
    pub sandbox: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a benchmark's cases with one profile and print a table of outcomes.
    Run(RunArgs),
    /// Run cases x profiles x epochs in parallel and write comparison reports.
    Matrix(MatrixArgs),
    /// One profile, the same cases, one agent-spec variant per ablation, in parallel; each ablation compared with `full`.
    Ablate(AblateArgs),
    /// Before a matrix: its cell count, cost and time where known, and the smallest difference it could detect.
    Plan(PlanArgs),
    /// Re-render every report of a run directory from its traces alone.
    Report(ReportArgs),
    /// Rebuild summaries from a trace.jsonl or a run directory, without running anything.
    Replay(ReplayArgs),
    /// List a benchmark's cases with category, split and fixture size.
    List(ListArgs),
    /// Prove every case sound: baseline fails, oracle passes twice, nop, tamper and (where a case asks) violator agents fail.
    Validate(ValidateArgs),
    /// The optimization loop's commit gate: file guard, regression set, full benchmark, promotion (exit 0 commit, 1 revert).
    Gate(GateArgs),
    /// Append the last passing gate's numbers for the committed candidate to workspace/results.tsv.
    Record(RecordArgs),
    /// Trends across runs from the results history: pass rates over time, regressions beyond noise, flips, flaky cases.
    Trend(TrendArgs),
    /// Manage the results history that matrix and ablate append to.
    #[command(subcommand)]
    History(HistoryCommand),
    /// Print a shell completion script: bash, zsh, fish, elvish or powershell.
    Completions(CompletionsArgs),
    /// Print hcbench's man page (roff), or write one page per command into a folder.
    Man(ManArgs),
    /// Open a run's report.html (or the index of past runs) in a browser, or serve it on 127.0.0.1.
    View(ViewArgs),
    /// Join the shard runs of one plan (`--shard K/N`) into one run directory with every report.
    Merge(MergeArgs),
}

#[derive(Debug, Args, Clone)]
pub struct Selection {
    /// Benchmark folder under benchmarks/.
    #[arg(long, default_value = "hc-bench")]
    pub benchmark: String,
    /// Named selection of cases from suites/<BENCHMARK>/<SUITE>.yaml (or that file's path).
    #[arg(long)]
    pub suite: Option<String>,
    /// Only cases of this split.
    #[arg(long, value_parser = ["train", "test", "heldout"])]
    pub split: Option<String>,
    /// Only these case ids (repeatable).
    #[arg(long = "case")]
    pub cases: Vec<String>,
}

/// The exit policy's thresholds (docs/commands.md#exit-codes), shared by `run` and `matrix`.
#[derive(Debug, Args, Clone, Default)]
pub struct ThresholdArgs {
    /// Exit 4 when a profile's coverage (cells with a verdict / planned cells) is below RATE,
    /// a fraction from 0 to 1 [default: 0.9].
    #[arg(long, value_name = "RATE", allow_negative_numbers = true)]
    pub min_coverage: Option<f64>,
    /// Exit 6 when a profile's pass rate (passed / planned cells) is below RATE, a fraction from
    /// 0 to 1. For `run` it replaces the rule that every case must pass (exit 1).
    #[arg(long, value_name = "RATE", allow_negative_numbers = true)]
    pub fail_under: Option<f64>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub selection: Selection,
    /// Profile: a built-in (`oracle`, `nop`, `local`, `local-responses`, `scripted:PATH`, or `scripted`
    /// with --script) or a table of the models file (--models, else $HCBENCH_MODELS, else models.toml
    /// in the root). An unknown name is refused with the list of every profile there is.
    #[arg(long, default_value = "oracle")]
    pub profile: String,
    /// Action script for the scripted profile (YAML or JSON).
    #[arg(long)]
    pub script: Option<PathBuf>,
    /// Model profiles file (default: $HCBENCH_MODELS, else models.toml in the root).
    #[arg(long, value_name = "PATH")]
    pub models: Option<PathBuf>,
    /// Cells running at once (default: number of cores).
    #[arg(long, short)]
    pub jobs: Option<usize>,
    /// Run directory (default: workspace/runs/<run-id>).
    #[arg(long, conflicts_with = "resume")]
    pub out: Option<PathBuf>,
    /// Run only part K of N of the plan (`--shard 2/3`), for a job engine running the parts on
    /// several machines; `auto` reads Slurm array, Kubernetes Indexed Job or
    /// HCBENCH_SHARD_INDEX/HCBENCH_SHARD_COUNT variables. Join the parts with `hcbench merge`.
    #[arg(long, value_name = "K/N|auto")]
    pub shard: Option<String>,
    /// Finish an interrupted run: keep cells with a complete trace, continue interrupted cells
    /// from their last checkpoint, run the rest (as `hcbench matrix --resume RUN_DIR`).
    #[arg(long, value_name = "RUN_DIR", conflicts_with = "script")]
    pub resume: Option<PathBuf>,
    /// Wall time from one checkpoint of a cell to the next (`500ms`, `1s`, `2m`): a step is
    /// saved once this much time has passed since the cell's last save, so a kill redoes at most
    /// about this and the step in flight. `0` saves after every step [default: 1s].
    #[arg(long, value_name = "DURATION")]
    pub checkpoint_interval: Option<String>,
    /// Output format of the final summary.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Print the summary table with every column; by default it fits the terminal (COLUMNS,
    /// else the terminal's width, else 80 columns) and names the columns it leaves out.
    #[arg(long)]
    pub wide: bool,
    #[command(flatten)]
    pub thresholds: ThresholdArgs,
    /// Run test-split cases (the split `hcbench gate` keeps private) anyway: for a human, never
    /// for an optimizing loop; recorded in workspace/.gate-state.json when a gate state exists.
    #[arg(long)]
    pub human_test_split: bool,
}

/// What a matrix is made of: shared by `matrix` and `plan`, so a plan describes exactly the
/// matrix the same flags would run.
#[derive(Debug, Args)]
pub struct MatrixShape {
    #[command(flatten)]
    pub selection: Selection,
    /// Comma-separated profiles, e.g. `oracle,gpt,deepseek`: built-ins (oracle, nop, local,
    /// local-responses, scripted:PATH) and the tables of the models file (--models, else
    /// $HCBENCH_MODELS, else models.toml in the root). An unknown name is refused with the list of
    /// every profile there is.
    #[arg(long, value_delimiter = ',', default_value = "oracle")]
    pub profiles: Vec<String>,
    /// Times each case runs per profile (pass@k and pass^k use k = epochs).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub epochs: u32,
    /// Cells running at once (default: number of cores).
    #[arg(long, short)]
    pub jobs: Option<usize>,
    /// Model profiles file (default: $HCBENCH_MODELS, else models.toml in the root).
    #[arg(long, value_name = "PATH")]
    pub models: Option<PathBuf>,
}

/// How a matrix-like run is kept: where, resumed from where, within which budget, printed how,
/// judged by which thresholds. Shared by `matrix` and `ablate`.
#[derive(Debug, Args)]
pub struct RunControl {
    /// Run directory (default: workspace/runs/<run-id>).
    #[arg(long, conflicts_with = "resume")]
    pub out: Option<PathBuf>,
    /// Finish an interrupted run: keep cells with a complete trace, run the rest again.
    #[arg(long, value_name = "RUN_DIR")]
    pub resume: Option<PathBuf>,
    /// With --resume: also run again the cells that ended in an infrastructure error
    /// (provider_error, harness_error, timeout), e.g. once the provider is back.
    #[arg(long, requires = "resume")]
    pub retry_errors: bool,
    /// Stop starting new cells once the run's model cost reaches this many US dollars (from
    /// token usage and the profiles' prices). Cells already running finish.
    // Negative numbers are taken as values (not as flags), so `-1` gets hcbench's own error.
    #[arg(long, value_name = "USD", allow_negative_numbers = true)]
    pub budget_usd: Option<f64>,
    /// Run the profiles that can run and mark those whose API key is not set `not run` (with
    /// the reason, in every report) instead of refusing to start.
    #[arg(long, conflicts_with = "resume")]
    pub skip_unavailable: bool,
    /// Run only part K of N of the plan (`--shard 2/3`), for a job engine running the parts on
    /// several machines; `auto` reads Slurm array, Kubernetes Indexed Job or
    /// HCBENCH_SHARD_INDEX/HCBENCH_SHARD_COUNT variables. Join the parts with `hcbench merge`.
    #[arg(long, value_name = "K/N|auto", conflicts_with = "resume")]
    pub shard: Option<String>,
    /// Wall time from one checkpoint of a cell to the next (`500ms`, `1s`, `2m`): a step is
    /// saved once this much time has passed since the cell's last save, so a kill redoes at most
    /// about this and the step in flight. `0` saves after every step [default: 1s].
    #[arg(long, value_name = "DURATION")]
    pub checkpoint_interval: Option<String>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: ReportFormat,
    /// Print the summary table with every column; by default it fits the terminal (COLUMNS,
    /// else the terminal's width, else 80 columns) and names the columns it leaves out.
    #[arg(long)]
    pub wide: bool,
    /// With --resume the run keeps the thresholds it started with (they are part of its plan).
    #[command(flatten)]
    pub thresholds: ThresholdArgs,
    /// Results history folder the run's rows are appended to (one file per run; default:
    /// $HCBENCH_HISTORY, else <root>/reports/history).
    #[arg(long, value_name = "DIR", env = "HCBENCH_HISTORY")]
    pub history: Option<PathBuf>,
    /// Do not append this run to the results history (wins over --history).
    #[arg(long)]
    pub no_history: bool,
    /// Run test-split cases (the split `hcbench gate` keeps private) anyway: for a human, never
    /// for an optimizing loop; recorded in workspace/.gate-state.json when a gate state exists.
    #[arg(long)]
    pub human_test_split: bool,
}

#[derive(Debug, Args)]
pub struct MatrixArgs {
    #[command(flatten)]
    pub shape: MatrixShape,
    #[command(flatten)]
    pub control: RunControl,
}

#[derive(Debug, Args)]
pub struct AblateArgs {
    /// Ablate the agent's context switches (the only ablation family so far; required).
    #[arg(long, required = true)]
    pub context: bool,
    #[command(flatten)]
    pub selection: Selection,
    /// The one profile every ablation runs with: a built-in or a table of the models file, as for
    /// `run --profile`.
    #[arg(long, default_value = "oracle")]
    pub profile: String,
    /// Comma-separated ablations; `full` (the spec as is, the reference) is always run, first.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "full,no_repomap,no_memory,no_context_compaction,no_policy_retry"
    )]
    pub ablations: Vec<String>,
    /// Times each case runs per ablation.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub epochs: u32,
    /// Cells running at once (default: number of cores).
    #[arg(long, short)]
    pub jobs: Option<usize>,
    /// Model profiles file (default: $HCBENCH_MODELS, else models.toml in the root).
    #[arg(long, value_name = "PATH")]
    pub models: Option<PathBuf>,
    #[command(flatten)]
    pub control: RunControl,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub shape: MatrixShape,
    /// A difference in pass rate to be able to detect (0.1 = ten points): how many cases or epochs it needs.
    #[arg(long, value_name = "RATE", allow_negative_numbers = true)]
    pub target_diff: Option<f64>,
    /// The pass rate you expect (default: from --from, else 0.5, the worst case).
    #[arg(long, value_name = "RATE", allow_negative_numbers = true)]
    pub baseline_rate: Option<f64>,
    /// A finished run whose cost and time per cell, and whose variance, inform the estimates.
    #[arg(long, value_name = "RUN_DIR")]
    pub from: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A run directory written by `run` or `matrix`.
    pub run_dir: PathBuf,
    /// What to print; every format is written to RUN_DIR/reports/ regardless.
    #[arg(long, value_enum, default_value = "table")]
    pub format: ReportFormat,
    /// Print the summary table with every column; by default it fits the terminal (COLUMNS,
    /// else the terminal's width, else 80 columns) and names the columns it leaves out.
    #[arg(long)]
    pub wide: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    Table,
    Json,
    Md,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// A trace.jsonl file or a run directory.
    pub path: PathBuf,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Print the summary table with every column; by default it fits the terminal (COLUMNS,
    /// else the terminal's width, else 80 columns) and names the columns it leaves out.
    #[arg(long)]
    pub wide: bool,
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

#[derive(Debug, Args)]
pub struct GateArgs {
    /// Experiment config (default: <root>/experiment_config.yaml; every default applies when it is absent).
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Cells running at once (default: `jobs` in the config, else the number of cores).
    #[arg(long, short)]
    pub jobs: Option<usize>,
    /// Model profiles file (default: $HCBENCH_MODELS, else models.toml in the root).
    #[arg(long, value_name = "PATH")]
    pub models: Option<PathBuf>,
    /// Seconds to wait when another gate or record holds the workspace lock (default: fail at once).
    #[arg(long, value_name = "SECONDS", default_value_t = 0.0)]
    pub wait: f64,
    /// Wall time from one checkpoint of a cell to the next (`500ms`, `1s`, `2m`), as for
    /// `matrix`. The gate does not resume its cells, so a long interval only spares their
    /// cost. `0` saves after every step [default: 1s].
    #[arg(long, value_name = "DURATION")]
    pub checkpoint_interval: Option<String>,
    /// A gate state file a human changed on purpose (e.g. workspace/suite.json): record its current content as legitimate, then run the gate. Repeatable.
    #[arg(long, value_name = "FILE")]
    pub accept_state_change: Vec<String>,
    /// Write the gate's state anchored in git (refs/hcbench/gate-state) back into workspace/,
    /// e.g. after workspace/ was deleted; then run the gate. Logged in workspace/.gate-state.json.
    #[arg(long, conflicts_with = "accept_state_reset")]
    pub restore_state: bool,
    /// A human starts a new history: the workspace's gate state as it is now (possibly empty)
    /// replaces the one anchored in git (kept in the anchor's history); then run the gate. Logged.
    #[arg(long)]
    pub accept_state_reset: bool,
    /// Use the config given with --config although it is not <root>/experiment_config.yaml (a
    /// human vouches for it; logged in workspace/.gate-state.json, valid while its content stays).
    #[arg(long)]
    pub accept_config: bool,
    /// Run although the gated profile's definition (models.toml, --models, HCBENCH_MODELS, ...)
    /// differs from the one of the last record (a human changed it on purpose; logged).
    #[arg(long)]
    pub accept_profile_change: bool,
    /// Run although commits since the last record touch files outside the allowlist (a human
    /// made them on purpose; logged, and `record` then checks only the commits after it).
    #[arg(long)]
    pub accept_history: bool,
    /// The quarantine.json of `hcbench trend`: its cases of the gate's benchmark (flaky under the
    /// oracle) are left out of Step 1 (regression set) and Step 3 (promotion). Step 2 keeps every
    /// test case, so its score stays comparable with the recorded best.
    #[arg(long, value_name = "FILE")]
    pub quarantine: Option<PathBuf>,
    /// `text`: `[gate] Step N` lines on stdout; `json`: one JSON object on stdout, the lines on stderr.
    #[arg(long, value_enum, default_value = "text")]
    pub format: GateFormat,
}

#[derive(Debug, Args)]
pub struct RecordArgs {
    /// Experiment config (default: <root>/experiment_config.yaml).
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Seconds to wait when another gate or record holds the workspace lock (default: fail at once).
    #[arg(long, value_name = "SECONDS", default_value_t = 0.0)]
    pub wait: f64,
    /// Record even though commits since the last recorded one touch files outside the allowlist
    /// (for a human who changed the project on purpose; logged in workspace/.gate-state.json).
    #[arg(long)]
    pub accept_history: bool,
    /// Use the config given with --config although it is not <root>/experiment_config.yaml (a
    /// human vouches for it; logged in workspace/.gate-state.json).
    #[arg(long)]
    pub accept_config: bool,
    /// `text`: a `[record]` line; `json`: one object with the row, or the reasons it was refused.
    #[arg(long, value_enum, default_value = "text")]
    pub format: GateFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GateFormat {
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct TrendArgs {
    /// Results history folder (default: $HCBENCH_HISTORY, else <root>/reports/history).
    #[arg(long, value_name = "DIR", env = "HCBENCH_HISTORY")]
    pub history: Option<PathBuf>,
    /// Only runs started within this long before now: `30d`, `12h`, `2w` (default: all).
    #[arg(long, value_name = "DURATION")]
    pub since: Option<String>,
    /// Only these profiles (comma-separated; default: all).
    #[arg(long, value_delimiter = ',')]
    pub profiles: Vec<String>,
    /// Only runs of this benchmark (default: all).
    #[arg(long)]
    pub benchmark: Option<String>,
    /// Runs before the latest that a regression check compares it with.
    #[arg(long, default_value_t = crate::trend::DEFAULT_WINDOW, value_parser = clap::value_parser!(usize))]
    pub window: usize,
    /// Agreeing runs a case needs before a change of verdict counts as a flip.
    #[arg(long, default_value_t = crate::trend::DEFAULT_FLIP_STREAK, value_parser = clap::value_parser!(usize))]
    pub flip_streak: usize,
    /// The control profile: a case whose verdicts vary under it is flaky (quarantined).
    #[arg(long, default_value = "oracle", value_name = "PROFILE")]
    pub control: String,
    /// Exit 7 when a regression beyond noise is flagged.
    #[arg(long)]
    pub fail_on_regression: bool,
    /// Folder for trend.md, trend.html, trend.json and quarantine.json (default: <root>/reports/trend).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

#[derive(Debug, Subcommand)]
pub enum HistoryCommand {
    /// Add a finished (or partial) run to the history, rebuilt from its traces.
    Import(HistoryImportArgs),
}

#[derive(Debug, Args)]
pub struct HistoryImportArgs {
    /// Run directory (with manifest.json and cells/).
    #[arg(value_name = "RUN_DIR", required = true)]
    pub run_dirs: Vec<PathBuf>,
    /// Results history folder (default: $HCBENCH_HISTORY, else <root>/reports/history).
    #[arg(long, value_name = "DIR", env = "HCBENCH_HISTORY")]
    pub history: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ViewArgs {
    /// A run directory (default: the index of every run under workspace/runs, reports/index.html).
    #[arg(value_name = "RUN_DIR", conflicts_with = "latest")]
    pub run_dir: Option<PathBuf>,
    /// The newest run under <root>/workspace/runs.
    #[arg(long)]
    pub latest: bool,
    /// Serve the run (and the index) on 127.0.0.1 and print the URL, even when a browser could
    /// open the file directly. Without a browser ($BROWSER, or xdg-open with a display), hcbench
    /// serves anyway. Runs until Ctrl-C.
    #[arg(long)]
    pub serve: bool,
    /// Port to serve on (implies --serve; default: a free port).
    #[arg(long)]
    pub port: Option<u16>,
    /// Start no browser: print the page's path and exit (with --serve or --port: serve, print the URLs).
    #[arg(long)]
    pub no_open: bool,
}

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The merged run directory to write (new or empty).
    #[arg(value_name = "OUT")]
    pub out: PathBuf,
    /// The shard run directories, one per part, in any order.
    #[arg(value_name = "SHARD_DIR", required = true)]
    pub shards: Vec<PathBuf>,
    /// Merge even when parts or cells are missing; the reports count them as cells without a
    /// verdict (coverage below 1).
    #[arg(long)]
    pub allow_partial: bool,
    #[arg(long, value_enum, default_value = "table")]
    pub format: ReportFormat,
    /// Print the summary table with every column.
    #[arg(long)]
    pub wide: bool,
    /// Results history folder the merged run is appended to (default: $HCBENCH_HISTORY, else
    /// <root>/reports/history). Shard runs append nothing; the merge appends the run once.
    #[arg(long, value_name = "DIR", env = "HCBENCH_HISTORY")]
    pub history: Option<PathBuf>,
    /// Do not append the merged run to the results history.
    #[arg(long)]
    pub no_history: bool,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write hcbench.1 and one hcbench-COMMAND.1 per command into DIR instead of printing hcbench.1.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Parses the process's arguments with the help texts of [`command`].
pub fn parse() -> Cli {
    use clap::FromArgMatches as _;
    Cli::from_arg_matches(&command().get_matches()).unwrap_or_else(|e| e.exit())
}

/// The whole command line as clap sees it: the derived parser plus, on every command, the
/// examples and exit codes of its long help (`--help`; `-h` stays the short list of options).
/// `completions` and `man` read this too, so what they describe is what `parse` accepts.
pub fn command() -> clap::Command {
    use clap::CommandFactory as _;
    let top = help_for("hcbench").expect("the top level has help");
    let mut cmd = Cli::command()
        .after_help("`hcbench help COMMAND` or `hcbench COMMAND --help`: examples and exit codes.")
        .after_long_help(long_help(&top));
    add_help(&mut cmd, "");
    cmd
}

/// Gives every subcommand of `cmd` (and theirs: `history import`) its examples and exit codes.
fn add_help(cmd: &mut clap::Command, path: &str) {
    for sub in cmd.get_subcommands_mut() {
        let name = if path.is_empty() { sub.get_name().to_string() } else { format!("{path} {}", sub.get_name()) };
        if let Some(help) = help_for(&name) {
            *sub = std::mem::take(sub)
                .after_help("Use --help for examples and exit codes.")
                .after_long_help(long_help(&help));
        }
        add_help(sub, &name);
    }
}

/// What a command's `--help` adds after its options.
struct CommandHelp {
    /// Two or three real command lines, each with what it does (or "").
    examples: &'static [(&'static str, &'static str)],
    /// The exit codes the command can return ([`crate::exit::CODES`]).
    codes: &'static [i32],
}

fn long_help(help: &CommandHelp) -> String {
    let width = help.examples.iter().map(|(line, _)| line.len()).max().unwrap_or(0);
    let mut text = String::from("Examples:\n");
    for (line, what) in help.examples {
        if what.is_empty() {
            text.push_str(&format!("  {line}\n"));
        } else {
            text.push_str(&format!("  {line:<width$}  # {what}\n"));
        }
    }
    text.push('\n');
    text.push_str(&crate::exit::help_table(help.codes));
    text
}

/// The examples and exit codes of the top level and of each command. Every command has an
/// entry (a unit test checks).
fn help_for(name: &str) -> Option<CommandHelp> {
    use crate::exit::*;
    // Every command can fail on bad input (2) or on I/O (3).
    const PLAIN: &[i32] = &[SUCCESS, USAGE, INTERNAL];
    // The exit policy of `matrix` and `ablate` (src/report/exit_policy.rs): no "a case failed".
    const POLICY: &[i32] =
        &[SUCCESS, USAGE, INTERNAL, COVERAGE_BELOW_THRESHOLD, CONTROL_ARM_FAILED, PASS_RATE_BELOW_FLOOR, INTERRUPTED];
    // `run`'s policy adds it, and `report` judges a run as the run judged itself.
    const RUN: &[i32] = &[
        SUCCESS,
        FAILED,
        USAGE,
        INTERNAL,
        COVERAGE_BELOW_THRESHOLD,
        CONTROL_ARM_FAILED,
        PASS_RATE_BELOW_FLOOR,
        INTERRUPTED,
    ];
    let (examples, codes): (&[(&str, &str)], &[i32]) = match name {
        "hcbench" => (
            &[
                ("hcbench list --suite smoke", "the cases of a suite"),
                ("hcbench run --suite smoke", "run them with the oracle profile"),
                ("hcbench matrix --profiles oracle,gpt,deepseek", "compare profiles (models.toml)"),
                ("hcbench --root ~/src/my-project list", "a project elsewhere (or HCBENCH_ROOT)"),
            ],
            &[],
        ),
        "run" => (
            &[
                ("hcbench run --suite smoke", "the smoke suite with the oracle"),
                ("hcbench run --case bugfix-1 --profile nop", "one case, the do-nothing agent"),
                ("hcbench run --profile gpt --fail-under 0.8 --format json", "a pass-rate floor instead of all-pass"),
            ],
            RUN,
        ),
        "matrix" => (
            &[
                ("hcbench matrix --profiles oracle,nop --suite smoke", ""),
                ("hcbench matrix --profiles oracle,gpt --epochs 3 --fail-under 0.8", "CI: gpt must pass 80%"),
                ("hcbench matrix --resume workspace/runs/RUN_ID --retry-errors", "finish an interrupted run"),
            ],
            POLICY,
        ),
        "ablate" => (
            &[
                ("hcbench ablate --context --suite smoke", "every ablation, oracle profile"),
                ("hcbench ablate --context --profile gpt --ablations full,no_memory --epochs 3", ""),
                ("hcbench matrix --resume workspace/runs/RUN_ID", "finish an interrupted ablate run"),
            ],
            POLICY,
        ),
        "plan" => (
            &[
                ("hcbench plan --profiles oracle,nop --epochs 3 --target-diff 0.1", "cases needed for 10 points"),
                ("hcbench plan --profiles oracle,gpt --from workspace/runs/RUN_ID", "cost and time from a past run"),
            ],
            PLAIN,
        ),
        "report" => (
            &[
                ("hcbench report workspace/runs/RUN_ID", "the terminal summary again"),
                ("hcbench report workspace/runs/RUN_ID --format md", "report.md on stdout"),
            ],
            RUN,
        ),
        "replay" => (
            &[
                ("hcbench replay workspace/runs/RUN_ID/cells/bugfix-1__oracle/trace.jsonl", ""),
                ("hcbench replay workspace/runs/RUN_ID --format json", "every cell of a run"),
            ],
            PLAIN,
        ),
        "list" => (
            &[
                ("hcbench list", "every case of hc-bench"),
                ("hcbench list --suite smoke --split train", ""),
                ("hcbench list --benchmark mini --format json", ""),
            ],
            PLAIN,
        ),
        "validate" => (
            &[("hcbench validate", "every case of hc-bench"), ("hcbench validate --case bugfix-1 --case policy-1", "")],
            &[SUCCESS, FAILED, USAGE, INTERNAL, INTERRUPTED],
        ),
        "gate" => (
            &[
                ("hcbench gate", "0: commit, 1: revert, 2 or more: fix the setup"),
                ("hcbench gate --format json --jobs 4", ""),
                ("hcbench gate --accept-state-change workspace/suite.json", "a human edited the suite"),
            ],
            &[SUCCESS, FAILED, USAGE, INTERNAL, COVERAGE_BELOW_THRESHOLD, INTERRUPTED],
        ),
        "record" => (
            &[("hcbench record", "after a passing gate and its commit"), ("hcbench record --format json", "")],
            &[SUCCESS, FAILED, USAGE, INTERNAL],
        ),
        "trend" => (
            &[
                ("hcbench trend", "every run in reports/history"),
                ("hcbench trend --since 30d --profiles oracle,gpt", ""),
                ("hcbench trend --fail-on-regression", "nightly CI: exit 7 on a regression"),
            ],
            &[SUCCESS, USAGE, INTERNAL, REGRESSION],
        ),
        "history" | "history import" => (
            &[
                ("hcbench history import workspace/runs/RUN_ID", "add a run made with --no-history"),
                ("hcbench history import workspace/runs/* --history /tmp/h", "every run, into another history"),
            ],
            PLAIN,
        ),
        "view" => (
            &[
                ("hcbench view --latest", "the newest run's report"),
                ("hcbench view workspace/runs/RUN_ID --serve --port 8000", "over SSH: forward port 8000"),
                ("hcbench view", "the index of past runs"),
            ],
            PLAIN,
        ),
        "merge" => (
            &[
                ("hcbench matrix --profiles oracle,nop --shard 1/2 --out runs/s1", "each machine runs its part"),
                ("hcbench merge runs/all runs/s1 runs/s2", "one run directory, every report"),
                ("hcbench merge runs/all runs/s1 --allow-partial", "what exists, coverage reported"),
            ],
            &[SUCCESS, USAGE, INTERNAL, COVERAGE_BELOW_THRESHOLD, CONTROL_ARM_FAILED, PASS_RATE_BELOW_FLOOR],
        ),
        "completions" => (
            &[
                ("hcbench completions bash > ~/.local/share/bash-completion/completions/hcbench", ""),
                ("hcbench completions zsh > ~/.zfunc/_hcbench", "with fpath+=~/.zfunc"),
                ("hcbench completions fish > ~/.config/fish/completions/hcbench.fish", ""),
            ],
            PLAIN,
        ),
        "man" => (
            &[
                ("hcbench man | man -l -", "read it now"),
                ("hcbench man --out /usr/local/share/man/man1", "one page per command"),
            ],
            PLAIN,
        ),
        _ => return None,
    };
    Some(CommandHelp { examples, codes })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every example parses with today's flags: an example cannot outlive a renamed flag.
    #[test]
    fn every_example_is_a_command_line_hcbench_accepts() {
        let cmd = command();
        let names = ["hcbench", "history import"].into_iter().map(String::from);
        let names = names.chain(cmd.get_subcommands().map(|s| s.get_name().to_string()));
        let mut checked = 0;
        for name in names {
            let Some(help) = help_for(&name) else { continue };
            for (line, _) in help.examples {
                // The command itself, without the shell around it (`> file`, `| man -l -`).
                let words: Vec<&str> = line.split(['>', '|']).next().unwrap().split_whitespace().collect();
                let parsed = command().try_get_matches_from(&words);
                assert!(parsed.is_ok(), "`{line}` does not parse: {}", parsed.unwrap_err());
                checked += 1;
            }
        }
        assert!(checked > 30, "{checked} examples checked");
    }

    #[test]
    fn every_command_has_examples_and_exit_codes_in_its_long_help_only() {
        let mut cmd = command();
        cmd.build();
        // (clap's own `help` command lists every command again as its children: left out.)
        let commands = || cmd.get_subcommands().filter(|s| s.get_name() != "help");
        let nested = commands().flat_map(|s| s.get_subcommands()).filter(|s| s.get_name() != "help");
        for sub in commands().chain(nested) {
            let long = sub.get_after_long_help().map(|h| h.to_string()).unwrap_or_default();
            assert!(long.contains("Examples:\n  hcbench"), "{} has no examples:\n{long}", sub.get_name());
            assert!(long.contains("Exit codes:\n    0  "), "{} has no exit codes:\n{long}", sub.get_name());
            let short = sub.get_after_help().map(|h| h.to_string()).unwrap_or_default();
            assert!(!short.contains("Examples"), "-h stays short for {}", sub.get_name());
        }
    }
}
