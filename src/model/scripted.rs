//! Scripts for the `scripted` provider: fixed actions per case, from a YAML or JSON file.
//!
//! ```yaml
//! default:            # for cases not listed below
//!   - {tool: finish, args: {answer: "nothing"}}
//! cases:
//!   bugfix-1:
//!     - {tool: read_file, args: {path: calc.py}}
//! noise: 0.3          # optional: chance that a cell gives up at once (a noisy model)
//! seed: 7             # optional: seeds that chance (default 0)
//! ```
//!
//! `noise` makes the script behave like a noisy model for tests and offline demos of the
//! paired gate: each cell's epoch independently replaces its actions with an immediate
//! `finish` with probability `noise`. The draw depends only on (seed, case id, epoch), so the
//! same cell always behaves the same, and two arms with the same seed share their luck.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::action::Action;
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
    /// Probability (0 to 1) that a cell finishes at once instead of acting.
    #[serde(default)]
    pub noise: f64,
    #[serde(default)]
    pub seed: u64,
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
        Script { label: "nop".into(), default: vec![Action::finish("nothing done")], ..Default::default() }
    }

    pub fn load(path: &Path) -> Result<Script, ScriptError> {
        let err = |message: String| ScriptError { path: path.to_path_buf(), message };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        let mut script: Script = serde_saphyr::from_str(&text).map_err(|e| err(e.to_string()))?;
        script.label = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        if !(0.0..=1.0).contains(&script.noise) {
            return Err(err(format!("field `noise`: {} is not a probability between 0 and 1", script.noise)));
        }
        Ok(script)
    }

    /// The actions for one cell of `case` in `epoch` (1-based).
    pub fn actions_for(&self, case: &Case, epoch: u32) -> Vec<Action> {
        if self.noise > 0.0 && noise_draw(self.seed, &case.id, epoch) < self.noise {
            return vec![Action::finish("gave up (scripted noise)")];
        }
        self.cases.get(&case.id).cloned().unwrap_or_else(|| self.default.clone())
    }
}

/// A uniform draw in [0, 1) that depends only on its inputs (FNV-1a of the case id, so it is
/// stable across platforms and Rust versions, unlike the std hasher).
fn noise_draw(seed: u64, case_id: &str, epoch: u32) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in case_id.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    fastrand::Rng::with_seed(seed ^ h ^ (epoch as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)).f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noise_is_deterministic_per_cell_and_near_its_rate() {
        assert_eq!(noise_draw(7, "bugfix-1", 2), noise_draw(7, "bugfix-1", 2));
        assert_ne!(noise_draw(7, "bugfix-1", 2), noise_draw(7, "bugfix-1", 3));
        assert_ne!(noise_draw(7, "bugfix-1", 2), noise_draw(8, "bugfix-1", 2));
        let hits = (1..=2000).filter(|e| noise_draw(1, "case", *e) < 0.3).count();
        assert!((500..700).contains(&hits), "{hits} of 2000 below 0.3");
    }
}
