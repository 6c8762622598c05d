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
//! A step may also be a branch on what the model is shown, so a script can stand in for a
//! model whose behaviour depends on its context (tests of the context pipeline):
//!
//! ```yaml
//!     - if_shown: errcat/catalog.py   # text to look for in this turn's context
//!       section: repo_map             # optional: only in this section (default: anywhere)
//!       then: [{tool: read_file, args: {path: errcat/catalog.py}}]
//!       else: [{tool: list_files, args: {path: .}}]
//! ```
//!
//! The branch is decided when it is reached, against the context of that turn, and its
//! actions take its place in the queue (branches may nest).
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

/// One step of a script: an action, or a branch on what the model is shown.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Step {
    Branch(Branch),
    Action(Action),
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Branch {
    /// Text to look for in the turn's context.
    pub if_shown: String,
    /// Only in this section (`repo_map`, `memory`, ...); anywhere when absent.
    #[serde(default)]
    pub section: Option<String>,
    #[serde(default)]
    pub then: Vec<Step>,
    #[serde(default, rename = "else")]
    pub otherwise: Vec<Step>,
}

impl Branch {
    /// The steps this branch stands for, given the turn's (section, text) pairs.
    pub fn choose(&self, sections: &[(String, String)]) -> &[Step] {
        let shown = sections
            .iter()
            .filter(|(name, _)| self.section.as_deref().is_none_or(|s| s == name))
            .any(|(_, text)| text.contains(&self.if_shown));
        if shown { &self.then } else { &self.otherwise }
    }
}

impl From<Action> for Step {
    fn from(a: Action) -> Step {
        Step::Action(a)
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    #[serde(skip)]
    pub label: String,
    #[serde(default)]
    pub default: Vec<Step>,
    #[serde(default)]
    pub cases: BTreeMap<String, Vec<Step>>,
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
        Script::fixed("nop", vec![Action::finish("nothing done")], BTreeMap::new())
    }

    /// A script of plain actions: `default` for cases not in `cases`.
    pub fn fixed(label: &str, default: Vec<Action>, cases: BTreeMap<String, Vec<Action>>) -> Script {
        let steps = |actions: Vec<Action>| actions.into_iter().map(Step::from).collect();
        Script {
            label: label.into(),
            default: steps(default),
            cases: cases.into_iter().map(|(id, a)| (id, steps(a))).collect(),
            ..Default::default()
        }
    }

    pub fn load(path: &Path) -> Result<Script, ScriptError> {
        let err = |message: String| ScriptError { path: path.to_path_buf(), message };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        let mut script: Script = serde_saphyr::from_str(&text).map_err(|e| err(crate::util::yaml_error(&e, path)))?;
        script.label = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        if !(0.0..=1.0).contains(&script.noise) {
            return Err(err(format!("field `noise`: {} is not a probability between 0 and 1", script.noise)));
        }
        Ok(script)
    }

    /// The actions for one cell of `case` in `epoch` (1-based).
    pub fn actions_for(&self, case: &Case, epoch: u32) -> Vec<Step> {
        if self.noise > 0.0 && noise_draw(self.seed, &case.id, epoch) < self.noise {
            return vec![Action::finish("gave up (scripted noise)").into()];
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

    #[test]
    fn branches_parse_beside_actions_and_choose_by_what_is_shown() {
        let yaml = "default:\n  - if_shown: catalog.py\n    section: repo_map\n    then: [{tool: read_file, args: {path: catalog.py}}]\n    else: [{tool: list_files}]\n  - {tool: finish, args: {answer: done}}\n";
        let script: Script = serde_saphyr::from_str(yaml).unwrap();
        let Step::Branch(b) = &script.default[0] else { panic!("{:?}", script.default[0]) };
        assert_eq!(script.default[1], Step::Action(Action::finish("done")));
        let shown = [("repo_map".to_string(), "errcat/catalog.py:\n".to_string())];
        assert_eq!(b.choose(&shown), &b.then[..]);
        let elsewhere = [("observations".to_string(), "catalog.py".to_string())];
        assert_eq!(b.choose(&elsewhere), &b.otherwise[..], "only the named section counts");
        assert!(serde_saphyr::from_str::<Script>("default: [{if_shown: x, then: [], els: []}]\n").is_err());
    }
}
