//! Suites: named selections of one benchmark's cases, `suites/<benchmark>/<suite>.yaml`.
//!
//! A suite lists case ids explicitly, or selects by split and category, or both (the union of
//! the explicit ids and the selector). Unknown ids are an error, never silently skipped, and so
//! is an id listed twice.
//!
//! A suite belongs to the benchmark whose folder under `suites/` holds it (the project's
//! top-level `suites/`, DESIGN.md's layout, one folder per benchmark). Suites used to lie flat
//! in `suites/`, where `--benchmark humaneval --suite train` quietly took another benchmark's
//! file; now a suite is looked up only in `suites/<benchmark>/`, and asking for another
//! benchmark's suite says whose it is. `--suite` takes the suite's name (`smoke`) or the path
//! of its file, and a path outside the benchmark's suite folder is refused.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{Benchmark, Case, Split};

#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    #[error("benchmark `{benchmark}` has no suite `{name}`: {path} does not exist (its suites: {available}){hint}")]
    NotFound { name: String, benchmark: String, path: PathBuf, available: String, hint: String },
    #[error(
        "--suite {given}: {path} is a suite of benchmark `{owner}`, not of `{benchmark}`; run it with `--benchmark {owner}`"
    )]
    OtherBenchmark { given: String, path: PathBuf, owner: String, benchmark: String },
    #[error(
        "--suite {given}: {path} is outside {dir}; a suite is a YAML file in suites/<benchmark>/, \
         named by its file name without .yaml (e.g. --suite smoke)"
    )]
    Outside { given: String, path: PathBuf, dir: PathBuf },
    #[error("suite file {path} is not valid: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error(
        "suite file {path}: field `cases`: `{id}` is not a case of benchmark `{benchmark}`; fix the id or remove it{hint}"
    )]
    UnknownCase { path: PathBuf, id: String, benchmark: String, hint: String },
    #[error("suite file {path}: field `cases`: `{id}` is listed twice; list each case once")]
    Duplicate { path: PathBuf, id: String },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSuite {
    #[serde(default)]
    #[allow(dead_code)]
    description: String,
    #[serde(default)]
    cases: Vec<String>,
    #[serde(default)]
    splits: Vec<String>,
    #[serde(default)]
    categories: Vec<String>,
}

/// The folder of `bench`'s suites in the project at `root`.
pub fn suites_dir(root: &Path, bench: &Benchmark) -> PathBuf {
    root.join("suites").join(&bench.name)
}

/// Returns the ids of `bench`'s cases selected by suite `given` (a name, or the path of a file
/// in `suites/<benchmark>/`), in benchmark order.
pub fn select_suite(root: &Path, given: &str, bench: &Benchmark) -> Result<Vec<String>, SuiteError> {
    let path = suite_file(root, given, bench)?;
    let invalid = |message: String| SuiteError::Invalid { path: path.clone(), message };
    let text = std::fs::read_to_string(&path).map_err(|e| invalid(e.to_string()))?;
    let raw: RawSuite = serde_saphyr::from_str(&text).map_err(|e| invalid(crate::util::yaml_error(&e, &path)))?;
    let mut listed = BTreeSet::new();
    for id in &raw.cases {
        if !listed.insert(id.as_str()) {
            return Err(SuiteError::Duplicate { path, id: id.clone() });
        }
        if bench.case(id).is_none() {
            let hint = crate::util::did_you_mean(id, bench.cases.iter().map(|c| c.id.as_str()));
            return Err(SuiteError::UnknownCase { path, id: id.clone(), benchmark: bench.name.clone(), hint });
        }
    }
    let mut splits = Vec::new();
    for s in &raw.splits {
        splits.push(
            Split::parse(s).ok_or_else(|| invalid(format!("field `splits`: `{s}` is not train, test or heldout")))?,
        );
    }
    for c in &raw.categories {
        if !bench.categories.contains(c) {
            return Err(invalid(format!(
                "field `categories`: `{c}` is not a category of benchmark `{}` (declared: {})",
                bench.name,
                bench.categories.join(", ")
            )));
        }
    }
    let has_selector = !splits.is_empty() || !raw.categories.is_empty();
    let selected = |c: &Case| {
        listed.contains(c.id.as_str())
            || (has_selector
                && (splits.is_empty() || splits.contains(&c.split))
                && (raw.categories.is_empty() || raw.categories.contains(&c.category)))
    };
    Ok(bench.cases.iter().filter(|c| selected(c)).map(|c| c.id.clone()).collect())
}

/// The suite file `given` names for `bench`: `<suites>/<given>.yaml` for a name, the file
/// itself for a path (which must lie in the benchmark's suites folder).
fn suite_file(root: &Path, given: &str, bench: &Benchmark) -> Result<PathBuf, SuiteError> {
    let dir = suites_dir(root, bench);
    let is_path = given.contains('/') || given.ends_with(".yaml") || given.ends_with(".yml");
    if !is_path {
        let path = dir.join(format!("{given}.yaml"));
        if path.is_file() {
            return Ok(path);
        }
        let names = names_in(&dir);
        // Another benchmark's suite of that very name says more than a near miss here.
        let mut hint = elsewhere(root, given, bench);
        if hint.is_empty() {
            hint = crate::util::did_you_mean(given, names.iter().map(String::as_str));
        }
        let available = if names.is_empty() { "none".into() } else { names.join(", ") };
        return Err(SuiteError::NotFound { name: given.into(), benchmark: bench.name.clone(), available, hint, path });
    }
    let given_path = Path::new(given);
    let Ok(file) = given_path.canonicalize() else {
        return Err(SuiteError::Invalid { path: given_path.to_path_buf(), message: "does not exist".into() });
    };
    let folder = file.parent().map(Path::to_path_buf).unwrap_or_default();
    if folder == dir.canonicalize().unwrap_or_else(|_| dir.clone()) {
        return Ok(file);
    }
    // Another benchmark's suite is named as such; anything else is outside.
    let suites = root.join("suites").canonicalize().unwrap_or_else(|_| root.join("suites"));
    if folder.parent() == Some(suites.as_path())
        && let Some(owner) = folder.file_name().map(|n| n.to_string_lossy().into_owned())
        && root.join("benchmarks").join(&owner).join("benchmark.yaml").is_file()
    {
        return Err(SuiteError::OtherBenchmark {
            given: given.into(),
            path: file,
            owner,
            benchmark: bench.name.clone(),
        });
    }
    Err(SuiteError::Outside { given: given.into(), path: file, dir })
}

/// Where a suite `name` that `bench` lacks does exist: another benchmark's, or a file lying
/// flat in `suites/`, where suites used to live. Empty when nowhere.
fn elsewhere(root: &Path, name: &str, bench: &Benchmark) -> String {
    let mut owners: Vec<String> = std::fs::read_dir(root.join("suites"))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy() != bench.name)
                .filter(|e| e.path().join(format!("{name}.yaml")).is_file())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    owners.sort();
    if let Some(owner) = owners.first() {
        return format!("; `{name}` is a suite of benchmark `{owner}`: run it with `--benchmark {owner}`");
    }
    let old = root.join("suites").join(format!("{name}.yaml"));
    if old.is_file() {
        return format!(
            "; {} is not read: a suite belongs to one benchmark, move it to {}/",
            old.display(),
            suites_dir(root, bench).display()
        );
    }
    String::new()
}

/// The suite names in `dir`, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
                .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}
