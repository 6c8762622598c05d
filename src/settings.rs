//! Resolved settings: the command line, the environment (with `.env`), experiment_config.yaml
//! and models.toml combined once, before anything runs.
//!
//! Like ripgrep's high-level arguments, the structs here carry no `Option` that means "not
//! given": every layer has been combined and every default applied, so commands build workers
//! directly and nothing downstream sees clap or reads the environment. Precedence is one rule
//! everywhere, written once in [`Combine`]: the flag, else the environment variable (the
//! process environment, then `.env` in the project root), else the experiment config, else the
//! built-in default. Each command's settings are resolved by one function here; a value the
//! user can fix is a [`SettingsError`] (exit 2) naming the flag, variable or file.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::agent::spec::{AgentSpec, ContextMode};
use crate::bench::{Benchmark, Split, load_benchmark, suite::select_suite};
use crate::cli::{
    AblateArgs, Cli, Format, ListArgs, MatrixArgs, MatrixShape, PlanArgs, ReportFormat, RunArgs, Selection,
    ThresholdArgs, ValidateArgs,
};
use crate::environment::Environment;
use crate::gate::config::Config;
use crate::model::Profile;
use crate::model::registry::Profiles;
use crate::model::scripted::Script;
use crate::report::exit_policy::{DEFAULT_MIN_COVERAGE, Thresholds};
use crate::report::terminal::Width;
use crate::rundir::NotRun;
use crate::sandbox::{Isolation, Sandbox, SandboxChoice};
use crate::shard::Shard;

/// A user error in the settings: bad flags, variables, benchmark, suite, script or profiles.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Sandbox(#[from] crate::sandbox::SandboxError),
    #[error(transparent)]
    Dotenv(#[from] crate::environment::DotenvError),
    #[error(transparent)]
    Benchmark(#[from] crate::bench::LoadError),
    #[error(transparent)]
    Suite(#[from] crate::bench::suite::SuiteError),
    #[error(transparent)]
    Script(#[from] crate::model::scripted::ScriptError),
    #[error(transparent)]
    Shard(#[from] crate::shard::ShardError),
    #[error(transparent)]
    Profile(#[from] crate::model::registry::ProfileError),
    #[error(transparent)]
    Spec(#[from] crate::agent::spec::SpecError),
    #[error(transparent)]
    Config(#[from] crate::gate::config::ConfigError),
}

/// Layering of one value, as in uv's `Combine`: `self` wins, `other` fills in.
pub trait Combine {
    fn combine(self, other: Self) -> Self;
}

impl<T> Combine for Option<T> {
    fn combine(self, other: Option<T>) -> Option<T> {
        self.or(other)
    }
}

/// What every command shares: the project root and the environment, read once.
#[derive(Debug, Clone)]
pub struct Settings {
    pub root: PathBuf,
    pub env: Environment,
    /// `--agent`, else `HCBENCH_AGENT`; `None` means "the root's agent/ or the embedded default".
    agent_dir: Option<PathBuf>,
    /// `--context-mode`, else `HCBENCH_CONTEXT_MODE`, with where it came from.
    context_mode: Option<(String, &'static str)>,
    /// `--sandbox`, else `HCBENCH_SANDBOX`, with where it came from; None: bubblewrap.
    sandbox: Option<(String, &'static str)>,
}

/// The benchmark and the ids of the selected cases, in benchmark order.
pub struct Selected {
    pub benchmark: Benchmark,
    pub case_ids: Vec<String>,
}

pub struct RunSettings {
    pub selected: Selected,
    pub profile: Profile,
    pub spec: Arc<AgentSpec>,
    pub jobs: usize,
    pub run_id: String,
    pub run_dir: PathBuf,
    pub format: Format,
    /// How wide the summary is printed: `--wide`, else COLUMNS, else the terminal's.
    pub width: Width,
    /// `--split train`: the run's results feed the gate's promotion step.
    pub records_train_results: bool,
    pub isolation: Isolation,
    /// `--min-coverage` and `--fail-under`, recorded in the manifest.
    pub thresholds: Thresholds,
    /// `--shard`: the part of the plan this run holds.
    pub shard: Option<Shard>,
}

pub struct MatrixSettings {
    pub root: PathBuf,
    pub jobs: usize,
    pub format: ReportFormat,
    /// How wide the summary is printed: `--wide`, else COLUMNS, else the terminal's.
    pub width: Width,
    pub start: MatrixStart,
    /// Results history the run appends to; None with `--no-history`.
    pub history: Option<PathBuf>,
    pub isolation: Isolation,
}

/// A matrix either starts a new run or finishes an interrupted one.
pub enum MatrixStart {
    New {
        selected: Selected,
        profiles: Vec<Profile>,
        spec: Arc<AgentSpec>,
        epochs: u32,
        run_id: String,
        run_dir: PathBuf,
        budget_usd: Option<f64>,
        thresholds: Thresholds,
        /// `hcbench ablate`: the ablations, `full` first (one profile); empty for `matrix`.
        ablations: Vec<String>,
        /// `--skip-unavailable`: the requested profiles set aside, with why.
        not_run: Vec<NotRun>,
        /// `--shard`: the part of the plan this run holds.
        shard: Option<Shard>,
    },
    /// The run directory to finish and the profiles registry to re-resolve its profiles with;
    /// `retry_errors` runs cells that ended in an infrastructure error again (`--retry-errors`).
    Resume { run_dir: PathBuf, profiles: Profiles, retry_errors: bool },
}

pub struct PlanSettings {
    pub selected: Selected,
    pub profiles: Vec<Profile>,
    pub epochs: u32,
    pub jobs: usize,
    pub target_diff: Option<f64>,
    pub baseline_rate: Option<f64>,
    /// A finished run to take measured costs, times and variance from.
    pub from: Option<PathBuf>,
    pub format: Format,
}

pub struct ListSettings {
    pub selected: Selected,
    pub format: Format,
}

pub struct ValidateSettings {
    pub selected: Selected,
    pub spec: Arc<AgentSpec>,
    pub jobs: usize,
    pub run_id: String,
    pub run_dir: PathBuf,
    pub format: Format,
    pub isolation: Isolation,
}

impl Settings {
    /// The shared settings of a parsed command line with the given environment snapshot.
    pub fn new(cli: &Cli, env: Environment) -> Settings {
        let agent_dir = cli.agent.clone().combine(env.get("HCBENCH_AGENT").map(PathBuf::from));
        let context_mode = cli
            .context_mode
            .clone()
            .map(|m| (m, "--context-mode"))
            .combine(env.get("HCBENCH_CONTEXT_MODE").map(|m| (m.to_string(), "HCBENCH_CONTEXT_MODE")));
        let sandbox = cli
            .sandbox
            .clone()
            .map(|m| (m, "--sandbox"))
            .combine(env.get("HCBENCH_SANDBOX").map(|m| (m.to_string(), "HCBENCH_SANDBOX")));
        Settings { root: cli.root.clone(), env, agent_dir, context_mode, sandbox }
    }

    /// Whether `--agent`/`HCBENCH_AGENT` was given (the gate refuses it: its candidate is
    /// `agent_dir` in the experiment config).
    pub fn agent_flag(&self) -> Option<&Path> {
        self.agent_dir.as_deref()
    }

    /// The agent spec: `--agent`, else `HCBENCH_AGENT`, else `<root>/agent` when it has an
    /// agent.yaml, else the embedded default.
    pub fn spec(&self) -> Result<Arc<AgentSpec>, SettingsError> {
        let spec = AgentSpec::resolve(&self.root, self.agent_dir.as_deref())?;
        Ok(Arc::new(match &self.context_mode {
            None => spec,
            Some((name, source)) => spec.with_mode(ContextMode::parse(name).ok_or_else(|| {
                SettingsError::Invalid(format!(
                    "{source}: `{name}` is not a context mode; use one of {}",
                    ContextMode::NAMES
                ))
            })?),
        }))
    }

    /// The sandbox cells run in: `--sandbox`, else `HCBENCH_SANDBOX`, else bubblewrap, which
    /// is probed here so a machine that cannot run it fails before any cell starts.
    pub fn sandbox(&self) -> Result<Sandbox, SettingsError> {
        let choice = match &self.sandbox {
            None => SandboxChoice::Bubblewrap,
            Some((name, source)) => SandboxChoice::parse(name).ok_or_else(|| {
                SettingsError::Invalid(format!("{source}: `{name}` is not a sandbox; use bubblewrap or none"))
            })?,
        };
        Ok(Sandbox::resolve(choice)?)
    }

    /// Where cells work: [`Settings::sandbox`], and the folder of their workspaces,
    /// `HCBENCH_WORKSPACES`, else `hcbench-workspaces` in the system's temporary folder. It must
    /// not lie inside a git repository: a cell's git commands would find that repository.
    pub fn isolation(&self) -> Result<Isolation, SettingsError> {
        let (workspaces, source) = match self.env.get("HCBENCH_WORKSPACES") {
            Some(dir) => (self.root.join(dir), "HCBENCH_WORKSPACES"),
            None => (std::env::temp_dir().join("hcbench-workspaces"), "the default workspaces folder"),
        };
        if let Some(repo) = crate::workspace::enclosing_repository(&workspaces) {
            return Err(SettingsError::Invalid(format!(
                "{source} {} lies inside the git repository {}, which cells' git commands would see; set HCBENCH_WORKSPACES to a folder outside any repository",
                workspaces.display(),
                repo.display()
            )));
        }
        Ok(Isolation {
            sandbox: self.sandbox()?,
            workspaces,
            checkpoint_interval: crate::agent::checkpoint::DEFAULT_INTERVAL,
        })
    }

    /// [`Settings::isolation`], its cells saving checkpoints at the interval of
    /// `--checkpoint-interval` (`flag`), else the default.
    pub fn isolation_with(&self, flag: Option<&str>) -> Result<Isolation, SettingsError> {
        let checkpoint_interval = checkpoint_interval(flag)?;
        Ok(Isolation { checkpoint_interval, ..self.isolation()? })
    }

    /// Whether `--context-mode`/`HCBENCH_CONTEXT_MODE` was given (the gate refuses it: it
    /// judges the candidate spec as written).
    pub fn context_mode_flag(&self) -> Option<&str> {
        self.context_mode.as_ref().map(|(_, source)| *source)
    }

    /// The models file: `--models`, else `HCBENCH_MODELS`, else `models:` in the experiment
    /// config, else `<root>/models.toml` when it exists. A named file must exist.
    pub fn models_file(&self, flag: Option<&Path>, config: Option<&Path>) -> Result<Option<PathBuf>, SettingsError> {
        let named = flag
            .map(|p| (p.to_path_buf(), "--models"))
            .combine(self.env.get("HCBENCH_MODELS").map(|p| (PathBuf::from(p), "HCBENCH_MODELS")))
            .combine(config.map(|p| (self.root.join(p), "`models` in experiment_config.yaml")));
        match named {
            Some((path, _)) if path.is_file() => Ok(Some(path)),
            Some((path, source)) => Err(SettingsError::Invalid(format!(
                "models file {} (given by {source}): no such file; fix the path or copy models.example.toml there",
                path.display()
            ))),
            None => Ok(Some(self.root.join("models.toml")).filter(|p| p.is_file())),
        }
    }

    /// Every profile a command may name, with the models file parsed and checked once. The file
    /// is read only when one of `names` can come from it (`None`: not known yet, as for a
    /// resume): the fixed built-ins never do, so a stale or broken models.toml does not stop an
    /// oracle run, as it never did.
    pub fn profiles(
        &self,
        flag: Option<&Path>,
        config: Option<&Path>,
        names: Option<&[String]>,
    ) -> Result<Profiles, SettingsError> {
        let needed = names.is_none_or(|n| n.iter().any(|name| Profiles::may_name_a_model(name.trim())));
        let file = if needed { self.models_file(flag, config)? } else { None };
        if !needed && let Ok(Some(path)) = self.models_file(flag, config) {
            Profiles::refuse_builtin_names(&path)?;
        }
        Ok(Profiles::load(&self.root, file.as_deref(), &self.env)?)
    }

    /// One profile name (and, for `scripted`, its `--script` file).
    pub fn profile(&self, profiles: &Profiles, name: &str, script: Option<&Path>) -> Result<Profile, SettingsError> {
        if name == "scripted" {
            let path = script.ok_or_else(|| {
                SettingsError::Invalid("--profile scripted needs --script FILE (see docs/commands.md)".into())
            })?;
            return Ok(Profile::scripted("scripted", Script::load(path)?));
        }
        Ok(profiles.resolve(name)?)
    }

    /// The experiment config (`--config`, else `<root>/experiment_config.yaml`).
    pub(crate) fn config(&self, flag: Option<&Path>) -> Result<Config, SettingsError> {
        Ok(Config::load(&self.root, flag)?)
    }

    /// Loads the benchmark and applies --suite, --split and --case.
    pub fn select(&self, sel: &Selection) -> Result<Selected, SettingsError> {
        let benchmark = load_benchmark(&self.root, &sel.benchmark)?;
        let mut ids: Vec<String> = match &sel.suite {
            Some(suite) => select_suite(&self.root, suite, &benchmark)?,
            None => benchmark.cases.iter().map(|c| c.id.clone()).collect(),
        };
        if let Some(split) = &sel.split {
            let split = Split::parse(split).expect("clap checked the split");
            ids.retain(|id| benchmark.case(id).is_some_and(|c| c.split == split));
        }
        if let Some(id) = sel.cases.iter().find(|id| benchmark.case(id).is_none()) {
            return Err(SettingsError::Invalid(format!(
                "--case {id}: no such case in benchmark `{}` (`hcbench list` shows the ids){}",
                benchmark.name,
                crate::util::did_you_mean(id, benchmark.cases.iter().map(|c| c.id.as_str()))
            )));
        }
        if !sel.cases.is_empty() {
            ids.retain(|id| sel.cases.contains(id));
        }
        if ids.is_empty() {
            return Err(SettingsError::Invalid(format!(
                "the selection matches no case of benchmark `{}` (suite {:?}, split {:?}); widen it",
                benchmark.name, sel.suite, sel.split
            )));
        }
        Ok(Selected { benchmark, case_ids: ids })
    }

    /// Refuses a selection whose cases name a program their cells could not start: checked
    /// here, where the sandbox is known, against the PATH the cells' commands will get.
    fn check_programs(selected: &Selected, isolation: &Isolation) -> Result<(), SettingsError> {
        let env = crate::sandbox::child_env(&isolation.sandbox, &[]);
        let search = env.iter().find(|(k, _)| k == "PATH").map(|(_, v)| v.as_str()).unwrap_or("");
        Ok(crate::bench::check_programs(&selected.benchmark, &selected.case_ids, search.as_ref())?)
    }

    /// The run directory: the flag, else `<root>/workspace/<kind>/<run-id>`.
    /// The results history folder: the flag as given, else `<root>/reports/history`.
    /// The width terminal summaries fit: `--wide`, else $COLUMNS, else the terminal's.
    /// `--shard K/N`, or with `auto` the shard the job engine's variables name.
    pub fn shard(&self, flag: Option<&str>) -> Result<Option<Shard>, SettingsError> {
        Ok(match flag.map(str::trim) {
            None => None,
            Some("auto") => Some(Shard::from_env(|k| self.env.get(k))?),
            Some(text) => Some(Shard::parse(text)?),
        })
    }

    pub fn width(&self, wide: bool) -> Width {
        Width::detect(wide, self.env.get("COLUMNS").as_deref())
    }

    pub fn history_dir(&self, flag: Option<&Path>) -> PathBuf {
        flag.map_or_else(|| self.root.join(crate::history::DEFAULT_DIR), Path::to_path_buf)
    }

    pub fn run_dir(&self, flag: Option<&Path>, kind: &str, run_id: &str) -> PathBuf {
        flag.map(Path::to_path_buf).unwrap_or_else(|| self.root.join("workspace").join(kind).join(run_id))
    }

    pub fn run(&self, args: RunArgs) -> Result<RunSettings, SettingsError> {
        let selected = self.select(&args.selection)?;
        let shard = self.shard(args.shard.as_deref())?;
        let profiles =
            self.profiles(args.models.as_deref(), None, Some(std::slice::from_ref(&args.profile)))?.for_shard(shard);
        let profile = self.profile(&profiles, &args.profile, args.script.as_deref())?;
        let run_id = crate::rundir::new_run_id();
        let isolation = self.isolation_with(args.checkpoint_interval.as_deref())?;
        Self::check_programs(&selected, &isolation)?;
        Ok(RunSettings {
            selected,
            profile,
            spec: self.spec()?,
            jobs: jobs(args.jobs, None)?,
            run_dir: self.run_dir(args.out.as_deref(), "runs", &run_id),
            run_id,
            format: args.format,
            width: self.width(args.wide),
            records_train_results: args.selection.split.as_deref() == Some("train"),
            isolation,
            thresholds: thresholds(&args.thresholds)?,
            shard,
        })
    }

    /// `hcbench run --resume RUN_DIR`: the run directory is finished as `matrix --resume`
    /// finishes it (its plan, profiles and thresholds are the manifest's); `run` keeps no
    /// history, so none is appended.
    pub fn run_resume(&self, args: RunArgs) -> Result<MatrixSettings, SettingsError> {
        let run_dir = args.resume.expect("called for --resume");
        if args.thresholds.min_coverage.is_some() || args.thresholds.fail_under.is_some() {
            return Err(SettingsError::Invalid(format!(
                "--min-coverage and --fail-under are part of a run's plan; `--resume {}` keeps the ones the run started with (judge it by others with a new run)",
                run_dir.display()
            )));
        }
        let profiles = self.profiles(args.models.as_deref(), None, None)?;
        Ok(MatrixSettings {
            root: self.root.clone(),
            jobs: jobs(args.jobs, None)?,
            format: match args.format {
                Format::Table => ReportFormat::Table,
                Format::Json => ReportFormat::Json,
            },
            width: self.width(args.wide),
            start: MatrixStart::Resume { run_dir, profiles, retry_errors: false },
            history: None,
            isolation: self.isolation_with(args.checkpoint_interval.as_deref())?,
        })
    }

    pub fn matrix(&self, args: MatrixArgs) -> Result<MatrixSettings, SettingsError> {
        let jobs = jobs(args.shape.jobs, None)?;
        let names = args.control.resume.is_none().then_some(args.shape.profiles.as_slice());
        let profiles = self.profiles(args.shape.models.as_deref(), None, names)?;
        let start = match args.control.resume {
            Some(run_dir) => {
                if args.control.thresholds.min_coverage.is_some() || args.control.thresholds.fail_under.is_some() {
                    return Err(SettingsError::Invalid(format!(
                        "--min-coverage and --fail-under are part of a run's plan; `--resume {}` keeps the ones the run started with (judge it by others with a new run)",
                        run_dir.display()
                    )));
                }
                MatrixStart::Resume { run_dir, profiles, retry_errors: args.control.retry_errors }
            }
            None => {
                if let Some(b) = args.control.budget_usd.filter(|b| !(*b > 0.0 && b.is_finite())) {
                    return Err(SettingsError::Invalid(format!(
                        "--budget-usd {b}: give a positive number of US dollars"
                    )));
                }
                let run_id = crate::rundir::new_run_id();
                let shard = self.shard(args.control.shard.as_deref())?;
                let profiles = profiles.for_shard(shard);
                let (resolved, not_run) = if args.control.skip_unavailable {
                    profiles.resolve_available(&args.shape.profiles)?
                } else {
                    (profiles.resolve_list(&args.shape.profiles).map_err(|e| e.offering_skip())?, Vec::new())
                };
                MatrixStart::New {
                    selected: self.select(&args.shape.selection)?,
                    profiles: resolved,
                    not_run,
                    spec: self.spec()?,
                    epochs: args.shape.epochs,
                    run_dir: self.run_dir(args.control.out.as_deref(), "runs", &run_id),
                    run_id,
                    budget_usd: args.control.budget_usd,
                    thresholds: thresholds(&args.control.thresholds)?,
                    ablations: Vec::new(),
                    shard,
                }
            }
        };
        let history = (!args.control.no_history).then(|| self.history_dir(args.control.history.as_deref()));
        let isolation = self.isolation_with(args.control.checkpoint_interval.as_deref())?;
        if let MatrixStart::New { selected, .. } = &start {
            Self::check_programs(selected, &isolation)?;
        }
        Ok(MatrixSettings {
            root: self.root.clone(),
            jobs,
            format: args.control.format,
            width: self.width(args.control.wide),
            start,
            history,
            isolation,
        })
    }

    /// `hcbench ablate`: a matrix of one profile whose second axis is the ablations. Every
    /// ablation is checked here (an unknown or unbuilt one is a usage error before anything runs).
    pub fn ablate(&self, args: AblateArgs) -> Result<MatrixSettings, SettingsError> {
        let AblateArgs { context: _, selection, profile, ablations, epochs, jobs, models, control } = args;
        let shape = MatrixShape { selection, profiles: vec![profile], epochs, jobs, models };
        let matrix = MatrixArgs { shape, control };
        let mut settings = self.matrix(matrix)?;
        if let MatrixStart::New { spec, ablations: planned, .. } = &mut settings.start {
            *planned = ablation_list(&ablations)?;
            for a in planned.iter() {
                spec.with_ablation(a).map_err(|e| SettingsError::Invalid(format!("--ablations: {e}")))?;
            }
        }
        Ok(settings)
    }

    pub fn plan(&self, args: PlanArgs) -> Result<PlanSettings, SettingsError> {
        let rate = |flag: &str, v: Option<f64>, open_zero: bool| match v {
            Some(r) if !(r.is_finite() && r <= 1.0 && (r > 0.0 || (!open_zero && r == 0.0))) => {
                Err(SettingsError::Invalid(format!(
                    "{flag} {r}: give a fraction {} (0.1 = ten points)",
                    if open_zero { "above 0 and at most 1" } else { "from 0 to 1" }
                )))
            }
            v => Ok(v),
        };
        let profiles = self.profiles(args.shape.models.as_deref(), None, Some(&args.shape.profiles))?;
        Ok(PlanSettings {
            selected: self.select(&args.shape.selection)?,
            profiles: profiles.resolve_list(&args.shape.profiles)?,
            epochs: args.shape.epochs,
            jobs: jobs(args.shape.jobs, None)?,
            target_diff: rate("--target-diff", args.target_diff, true)?,
            baseline_rate: rate("--baseline-rate", args.baseline_rate, false)?,
            from: args.from,
            format: args.format,
        })
    }

    pub fn list(&self, args: ListArgs) -> Result<ListSettings, SettingsError> {
        Ok(ListSettings { selected: self.select(&args.selection)?, format: args.format })
    }

    pub fn validate(&self, args: ValidateArgs) -> Result<ValidateSettings, SettingsError> {
        let run_id = crate::rundir::new_run_id();
        let selected = self.select(&args.selection)?;
        let isolation = self.isolation()?;
        Self::check_programs(&selected, &isolation)?;
        Ok(ValidateSettings {
            selected,
            spec: self.spec()?,
            jobs: jobs(args.jobs, None)?,
            run_dir: self.run_dir(args.out.as_deref(), "validate", &run_id),
            run_id,
            format: args.format,
            isolation,
        })
    }
}

/// The exit policy's thresholds: each flag, else its default (`--min-coverage` 0.9, no
/// `--fail-under`). Rates are fractions, so `90` (meant as a percentage) is refused rather
/// than read as a threshold no run can meet.
pub fn thresholds(args: &ThresholdArgs) -> Result<Thresholds, SettingsError> {
    for (flag, value) in [("--min-coverage", args.min_coverage), ("--fail-under", args.fail_under)] {
        if let Some(v) = value.filter(|v| !(0.0..=1.0).contains(v)) {
            return Err(SettingsError::Invalid(format!("{flag} {v}: give a fraction from 0 to 1 (e.g. 0.9 for 90%)")));
        }
    }
    Ok(Thresholds { min_coverage: args.min_coverage.unwrap_or(DEFAULT_MIN_COVERAGE), fail_under: args.fail_under })
}

/// `--ablations` as planned: `full` first (added when left out: it is the reference), each
/// name once, in the given order otherwise.
fn ablation_list(given: &[String]) -> Result<Vec<String>, SettingsError> {
    let mut out = vec!["full".to_string()];
    for a in given.iter().map(|a| a.trim()) {
        if a.is_empty() {
            return Err(SettingsError::Invalid("--ablations: an empty name; give e.g. full,no_memory".into()));
        }
        if !out.iter().any(|x| x == a) {
            out.push(a.to_string());
        }
    }
    Ok(out)
}

/// `--checkpoint-interval`: a duration as humantime reads it (`1s`, `500ms`, `2m`, `0`), else
/// the default ([`crate::agent::checkpoint::DEFAULT_INTERVAL`]).
pub fn checkpoint_interval(flag: Option<&str>) -> Result<std::time::Duration, SettingsError> {
    let Some(text) = flag else { return Ok(crate::agent::checkpoint::DEFAULT_INTERVAL) };
    humantime::parse_duration(text.trim()).map_err(|e| {
        SettingsError::Invalid(format!(
            "--checkpoint-interval {text:?}: {e}; give a duration such as 1s, 500ms or 2m, or 0 to save a checkpoint after every step"
        ))
    })
}

/// Worker count: the flag, else the config's `jobs`, else the number of cores.
pub fn jobs(flag: Option<usize>, config: Option<usize>) -> Result<usize, SettingsError> {
    match flag.combine(config) {
        Some(0) => Err(SettingsError::Invalid(
            "--jobs 0 would run nothing; give a positive number, or leave it out for one per core".into(),
        )),
        Some(n) => Ok(n),
        None => Ok(std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combine_takes_the_first_layer_that_has_a_value() {
        assert_eq!(Some(1).combine(Some(2)).combine(Some(3)), Some(1));
        assert_eq!(None.combine(Some(2)).combine(Some(3)), Some(2));
        assert_eq!(None::<u8>.combine(None).combine(Some(3)), Some(3));
        assert_eq!(None::<u8>.combine(None), None);
    }

    #[test]
    fn jobs_prefer_the_flag_then_the_config_and_refuse_zero() {
        assert_eq!(jobs(Some(3), Some(5)).unwrap(), 3);
        assert_eq!(jobs(None, Some(5)).unwrap(), 5);
        assert!(jobs(None, None).unwrap() >= 1);
        assert!(jobs(Some(0), None).unwrap_err().to_string().contains("--jobs 0"));
    }

    #[test]
    fn the_checkpoint_interval_is_a_duration_zero_or_the_default() {
        use std::time::Duration;
        assert_eq!(checkpoint_interval(None).unwrap(), Duration::from_secs(1));
        assert_eq!(checkpoint_interval(Some("0")).unwrap(), Duration::ZERO);
        assert_eq!(checkpoint_interval(Some(" 250ms ")).unwrap(), Duration::from_millis(250));
        assert_eq!(checkpoint_interval(Some("2m")).unwrap(), Duration::from_secs(120));
        for bad in ["5", "soon", "-1s", ""] {
            let e = checkpoint_interval(Some(bad)).unwrap_err().to_string();
            assert!(e.starts_with(&format!("--checkpoint-interval {bad:?}: ")), "{e}");
            assert!(e.ends_with("or 0 to save a checkpoint after every step"), "{e}");
        }
    }

    #[test]
    fn thresholds_default_to_ninety_percent_coverage_and_refuse_percentages() {
        let t = thresholds(&ThresholdArgs::default()).unwrap();
        assert_eq!((t.min_coverage, t.fail_under), (0.9, None));
        let t = thresholds(&ThresholdArgs { min_coverage: Some(0.5), fail_under: Some(0.8) }).unwrap();
        assert_eq!((t.min_coverage, t.fail_under), (0.5, Some(0.8)));
        let e = thresholds(&ThresholdArgs { min_coverage: None, fail_under: Some(80.0) }).unwrap_err().to_string();
        assert!(e.contains("--fail-under 80") && e.contains("fraction"), "{e}");
        assert!(thresholds(&ThresholdArgs { min_coverage: Some(f64::NAN), fail_under: None }).is_err());
    }

    fn settings(root: &Path, vars: &[(&str, &str)]) -> Settings {
        let env = Environment::new(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())), root).unwrap();
        Settings { root: root.to_path_buf(), env, agent_dir: None, context_mode: None, sandbox: None }
    }

    #[test]
    fn the_models_file_comes_from_flag_then_environment_then_config_then_root() {
        let dir = tempfile::tempdir().unwrap();
        let [flag, envf, cfg, rootf] = ["flag.toml", "env.toml", "cfg.toml", "models.toml"].map(|n| {
            let p = dir.path().join(n);
            std::fs::write(&p, "").unwrap();
            p
        });
        let s = settings(dir.path(), &[("HCBENCH_MODELS", envf.to_str().unwrap())]);
        assert_eq!(s.models_file(Some(&flag), Some(Path::new("cfg.toml"))).unwrap(), Some(flag));
        assert_eq!(s.models_file(None, Some(Path::new("cfg.toml"))).unwrap(), Some(envf.clone()));
        let s = settings(dir.path(), &[]);
        assert_eq!(s.models_file(None, Some(Path::new("cfg.toml"))).unwrap(), Some(cfg));
        assert_eq!(s.models_file(None, None).unwrap(), Some(rootf.clone()));
        std::fs::remove_file(&rootf).unwrap();
        assert_eq!(s.models_file(None, None).unwrap(), None, "no default file is not an error");
        let e = s.models_file(Some(Path::new("/nonexistent/m.toml")), None).unwrap_err().to_string();
        assert!(e.contains("/nonexistent/m.toml") && e.contains("--models"), "{e}");
    }

    #[test]
    fn dotenv_in_the_root_sets_hcbench_variables() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("m.toml"), "").unwrap();
        std::fs::write(dir.path().join(".env"), format!("HCBENCH_MODELS={}\n", dir.path().join("m.toml").display()))
            .unwrap();
        let s = settings(dir.path(), &[]);
        assert_eq!(s.models_file(None, None).unwrap(), Some(dir.path().join("m.toml")));
    }
}
