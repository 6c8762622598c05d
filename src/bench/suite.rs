//! Suites: named selections of a benchmark's cases (`suites/<name>.yaml`).
//!
//! A suite lists case ids explicitly, or selects by split and category, or both (the union of
//! the explicit ids and the selector). Unknown ids are an error, never silently skipped.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{Benchmark, Case, Category, Split};

#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    #[error("no suite `{name}`: {path} does not exist (available: {available})")]
    NotFound { name: String, path: PathBuf, available: String },
    #[error("suite file {path} is not valid: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error(
        "suite file {path}: field `cases`: `{id}` is not a case of benchmark `{benchmark}`; fix the id or remove it"
    )]
    UnknownCase { path: PathBuf, id: String, benchmark: String },
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

/// Returns the ids of `bench`'s cases selected by suite `name`, in benchmark order.
pub fn select_suite(root: &Path, name: &str, bench: &Benchmark) -> Result<Vec<String>, SuiteError> {
    let path = root.join("suites").join(format!("{name}.yaml"));
    if !path.is_file() {
        let mut available: Vec<String> = std::fs::read_dir(root.join("suites"))
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .filter_map(|e| e.path().file_stem().map(|s| s.to_string_lossy().into_owned()))
                    .collect()
            })
            .unwrap_or_default();
        available.sort();
        return Err(SuiteError::NotFound {
            name: name.into(),
            path,
            available: if available.is_empty() { "none".into() } else { available.join(", ") },
        });
    }
    let invalid = |message: String| SuiteError::Invalid { path: path.clone(), message };
    let text = std::fs::read_to_string(&path).map_err(|e| invalid(e.to_string()))?;
    let raw: RawSuite = serde_saphyr::from_str(&text).map_err(|e| invalid(crate::util::yaml_error(&e, &path)))?;
    for id in &raw.cases {
        if bench.case(id).is_none() {
            return Err(SuiteError::UnknownCase { path, id: id.clone(), benchmark: bench.name.clone() });
        }
    }
    let mut splits = Vec::new();
    for s in &raw.splits {
        splits.push(
            Split::parse(s).ok_or_else(|| invalid(format!("field `splits`: `{s}` is not train, test or heldout")))?,
        );
    }
    let mut categories = Vec::new();
    for c in &raw.categories {
        categories
            .push(Category::parse(c).ok_or_else(|| invalid(format!("field `categories`: `{c}` is not a category")))?);
    }
    let has_selector = !splits.is_empty() || !categories.is_empty();
    let selected = |c: &Case| {
        raw.cases.iter().any(|id| id == &c.id)
            || (has_selector
                && (splits.is_empty() || splits.contains(&c.split))
                && (categories.is_empty() || categories.contains(&c.category)))
    };
    Ok(bench.cases.iter().filter(|c| selected(c)).map(|c| c.id.clone()).collect())
}
