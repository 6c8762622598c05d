//! Scripts for the `scripted` provider: fixed actions per case, from a YAML or JSON file.
//!
//! ```yaml
//! default:            # for cases not listed below
//!   - {tool: finish, args: {answer: "nothing"}}
//! cases:
//!   bugfix-1:
//!     - {tool: read_file, args: {path: calc.py}}
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::action::Action;
use crate::bench::Case;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    #[serde(skip)]
    pub label: String,
    #[serde(default)]
    pub default: Vec<Action>,
    #[serde(default)]
    pub cases: BTreeMap<String, Vec<Action>>,
}

#[derive(Debug, thiserror::Error)]
#[error("script {path} is not valid: {message}")]
pub struct ScriptError {
    pub path: PathBuf,
    pub message: String,
}

impl Script {
    /// A script whose agent finishes at once: the "do nothing" control.
    pub fn nop() -> Script {
        Script { label: "nop".into(), default: vec![Action::finish("nothing done")], cases: BTreeMap::new() }
    }

    pub fn load(path: &Path) -> Result<Script, ScriptError> {
        let err = |message: String| ScriptError { path: path.to_path_buf(), message };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        let mut script: Script = serde_saphyr::from_str(&text).map_err(|e| err(e.to_string()))?;
        script.label = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        Ok(script)
    }

    pub fn actions_for(&self, case: &Case) -> Vec<Action> {
        self.cases.get(&case.id).cloned().unwrap_or_else(|| self.default.clone())
    }
}
