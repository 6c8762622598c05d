//! Resolved settings: command-line values, environment and defaults combined once.
//!
//! Like ripgrep's high-level arguments, these carry no `Option`s that mean "not given": every
//! default has been applied and every name checked, so commands can build workers directly.

use std::path::{Path, PathBuf};

use crate::bench::{Benchmark, Split, load_benchmark, suite::select_suite};
use crate::cli::Selection;
use crate::commands::CommandError;
use crate::model::Profile;
use crate::model::registry::resolve_profile;
use crate::model::scripted::Script;

/// The benchmark and the ids of the selected cases, in benchmark order.
pub struct Selected {
    pub benchmark: Benchmark,
    pub case_ids: Vec<String>,
}

/// Loads the benchmark and applies --suite, --split and --case.
pub fn select(root: &Path, sel: &Selection) -> Result<Selected, CommandError> {
    let benchmark = load_benchmark(root, &sel.benchmark)?;
    let mut ids: Vec<String> = match &sel.suite {
        Some(suite) => select_suite(root, suite, &benchmark)?,
        None => benchmark.cases.iter().map(|c| c.id.clone()).collect(),
    };
    if let Some(split) = &sel.split {
        let split = Split::parse(split).expect("clap checked the split");
        ids.retain(|id| benchmark.case(id).is_some_and(|c| c.split == split));
    }
    if !sel.cases.is_empty() {
        for id in &sel.cases {
            if benchmark.case(id).is_none() {
                return Err(CommandError::Usage(format!(
                    "--case {id}: no such case in benchmark `{}`; `hcbench list` shows the ids",
                    benchmark.name
                )));
            }
        }
        ids.retain(|id| sel.cases.contains(id));
    }
    if ids.is_empty() {
        return Err(CommandError::Usage(format!(
            "the selection matches no case of benchmark `{}` (suite {:?}, split {:?}); widen it",
            benchmark.name, sel.suite, sel.split
        )));
    }
    Ok(Selected { benchmark, case_ids: ids })
}

/// Resolves a profile name (and, for `scripted`, its --script file) into a [`Profile`]. Model
/// profiles come from `models` (`--models`), else `HCBENCH_MODELS`, else `<root>/models.toml`;
/// they are validated, and their API keys read, here: before any cell runs.
pub fn profile(root: &Path, name: &str, script: Option<&Path>, models: Option<&Path>) -> Result<Profile, CommandError> {
    if name == "scripted" {
        let path = script.ok_or_else(|| {
            CommandError::Usage("--profile scripted needs --script FILE (see docs/commands.md)".into())
        })?;
        return Ok(Profile::scripted("scripted", Script::load(path)?));
    }
    resolve_profile(name, root, models).map_err(|e| CommandError::Usage(e.to_string()))
}

/// Worker count: the flag, else the number of cores.
pub fn jobs(flag: Option<usize>) -> usize {
    flag.filter(|j| *j > 0).unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2))
}

/// The run directory: the flag, else `<root>/workspace/<kind>/<run-id>`.
pub fn run_dir(root: &Path, out: Option<&Path>, kind: &str, run_id: &str) -> PathBuf {
    out.map(Path::to_path_buf).unwrap_or_else(|| root.join("workspace").join(kind).join(run_id))
}
