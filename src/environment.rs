//! The process environment as one value, read once by the command layer.
//!
//! Nothing below `commands/` calls `std::env::var`: the binary snapshots the process
//! environment once ([`Environment::capture`]) and every setting, model profile and child
//! process reads from that value. This keeps precedence in one place (the process environment
//! wins, `.env` fills in what it lacks) and lets tests build an environment without touching
//! the real one, which is shared by every thread of a test binary.
//!
//! `.env` has one documented home: the project root (`--root`, default the current
//! directory). Its values are looked up, never exported, so child processes never inherit a
//! key written there. `HCBENCH_ROOT` itself can only come from the real environment or the
//! flag, since it says where `.env` is.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
#[error("{path}: {message} (one KEY=value per line; see docs/providers.md)")]
pub struct DotenvError {
    pub path: PathBuf,
    pub message: String,
}

/// `Debug` shows variable names only: values include API keys, which never reach logs.
#[derive(Clone, Default)]
pub struct Environment {
    process: BTreeMap<String, String>,
    dotenv: BTreeMap<String, String>,
    dotenv_path: PathBuf,
}

impl Environment {
    /// The real process environment plus `<root>/.env`. Called once, by the command layer.
    pub fn capture(root: &Path) -> Result<Environment, DotenvError> {
        Environment::new(std::env::vars(), root)
    }

    /// An environment from explicit process variables plus `<root>/.env` (tests use this).
    pub fn new(process: impl IntoIterator<Item = (String, String)>, root: &Path) -> Result<Environment, DotenvError> {
        let path = root.join(".env");
        let mut dotenv = BTreeMap::new();
        if path.is_file() {
            let err = |e: dotenvy::Error| DotenvError { path: path.clone(), message: e.to_string() };
            for item in dotenvy::from_path_iter(&path).map_err(err)? {
                let (k, v) = item.map_err(err)?;
                dotenv.insert(k, v);
            }
        }
        Ok(Environment { process: process.into_iter().collect(), dotenv, dotenv_path: path })
    }

    /// A variable's value: the process environment wins, `.env` fills in; empty counts as unset.
    pub fn get(&self, key: &str) -> Option<String> {
        let non_empty = |m: &BTreeMap<String, String>| m.get(key).filter(|v| !v.is_empty()).cloned();
        non_empty(&self.process).or_else(|| non_empty(&self.dotenv))
    }

    /// Where `.env` is looked for (named in "add KEY=... to <path>" advice).
    pub fn dotenv_path(&self) -> &Path {
        &self.dotenv_path
    }

    /// The process variables only (the base of a child's environment; `.env` is never exported).
    pub fn process_vars(&self) -> impl Iterator<Item = (&str, &str)> {
        self.process.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

impl std::fmt::Debug for Environment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Environment")
            .field("process", &self.process.keys().collect::<Vec<_>>())
            .field("dotenv", &self.dotenv.keys().collect::<Vec<_>>())
            .field("dotenv_path", &self.dotenv_path)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotenv_fills_in_without_overriding_the_process() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".env"), "ONLY_IN_FILE=from-file\nPATH=not-this\nEMPTY_IN_PROCESS=file\n")
            .unwrap();
        let process = [("PATH", "/usr/bin"), ("EMPTY_IN_PROCESS", "")].map(|(k, v)| (k.to_string(), v.to_string()));
        let env = Environment::new(process, dir.path()).unwrap();
        assert_eq!(env.get("ONLY_IN_FILE").as_deref(), Some("from-file"));
        assert_eq!(env.get("PATH").as_deref(), Some("/usr/bin"), "the process environment wins");
        assert_eq!(env.get("EMPTY_IN_PROCESS").as_deref(), Some("file"), "an empty value counts as unset");
        assert_eq!(env.get("NOWHERE"), None);
        let exported: Vec<&str> = env.process_vars().map(|(k, _)| k).collect();
        assert_eq!(exported, ["EMPTY_IN_PROCESS", "PATH"], ".env values are never exported");
    }

    #[test]
    fn a_broken_dotenv_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".env"), "GOOD=1\nthis is not a pair\n").unwrap();
        let e = Environment::new(Vec::new(), dir.path()).unwrap_err().to_string();
        assert!(e.contains(".env") && e.contains("KEY=value"), "{e}");
    }
}
