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
//! A step may also be a batch: several actions the model asks for in one reply, as a model does
//! with several native tool calls. The agent runs them as one batch (reads together, the rest
//! one at a time, in order; `docs/architecture.md`):
//!
//! ```yaml
//!     - batch:
//!         - {tool: read_file, args: {path: a.py}}
//!         - {tool: read_file, args: {path: b.py}}
//! ```
//!
//! A step may also be a read-only delegation: the model asks a `delegate_readonly` question,
//! and the child loop that answers it (`agent::delegate`) is given `steps` as its own script
//! (plain actions, batches and branches; the child ends with `finish`, whose `answer` may be a
//! JSON object with `findings`, `files` and `symbols`):
//!
//! ```yaml
//!     - delegate:
//!         question: where is the total computed?
//!         max_steps: 4          # optional, capped by the agent spec's `delegation`
//!         max_tokens: 20000     # optional, likewise
//!         steps:
//!           - {tool: search_code, args: {pattern: total}}
//!           - {tool: finish, args: {answer: '{"findings": ["calc.py adds"], "files": ["calc.py"]}'}}
//! ```
//!
//! Every action is checked against the tool table when the script loads, as an oracle's are:
//! a misspelt argument is an error naming the step and field, not a run of failed cells. A
//! script that stands in for a model that errs marks the malformed action
//! `{tool: edit_file, args: {path: a.py}, unchecked: true}`: it is sent as written.
//!
//! `noise` makes the script behave like a noisy model for tests and offline demos of the
//! paired gate: each cell's epoch independently replaces its actions with an immediate
//! `finish` with probability `noise`. The draw depends only on (seed, case id, epoch), so the
//! same cell always behaves the same, and two arms with the same seed share their luck.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::action::Action;
use crate::bench::Case;

/// One step of a script: an action, or a branch on what the model is shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Step {
    Branch(Branch),
    Batch(Batch),
    Delegate(Delegate),
    Action(Action),
}

/// A `delegate_readonly` call and the steps of the child that answers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Delegate {
    pub delegate: Delegation,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Delegation {
    pub question: String,
    #[serde(default)]
    pub max_steps: Option<u64>,
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// The child's script.
    #[serde(default)]
    pub steps: Vec<Step>,
}

impl Delegation {
    /// The `delegate_readonly` action the parent's turn asks for.
    pub fn action(&self) -> Action {
        let mut args = serde_json::json!({ "question": self.question });
        for (key, value) in [("max_steps", self.max_steps), ("max_tokens", self.max_tokens)] {
            if let Some(n) = value {
                args[key] = n.into();
            }
        }
        Action::new(crate::action::Tool::DelegateReadonly.as_str(), args)
    }
}

/// Several actions in one reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Batch {
    pub batch: Vec<Action>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

    /// Reads and checks a script file. Every action in it is checked against the tool table
    /// first, as an oracle's are (`bench::check_action`): a misspelt argument would otherwise
    /// be dropped without a word, and every cell would fail instead of the file being refused.
    pub fn load(path: &Path) -> Result<Script, ScriptError> {
        let err = |message: String| ScriptError { path: path.to_path_buf(), message };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        let yaml_err = |e: serde_saphyr::Error| err(crate::util::yaml_error(&e, path));
        let value: serde_json::Value = serde_saphyr::from_str(&text).map_err(yaml_err)?;
        let problems = check_steps_of(&value);
        if !problems.is_empty() {
            return Err(err(problems.join("; ")));
        }
        let mut script: Script = serde_saphyr::from_str(&text).map_err(yaml_err)?;
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

/// Every problem of the steps of a script file's `default` and `cases`, each naming its field
/// (`cases.bugfix-1[2].args.path: ...`). Other shapes are left to serde, whose message is as good.
fn check_steps_of(script: &serde_json::Value) -> Vec<String> {
    let mut problems = Vec::new();
    if let Some(steps) = script.get("default") {
        check_steps(steps, "default", &mut problems);
    }
    if let Some(cases) = script.get("cases").and_then(|c| c.as_object()) {
        for (id, steps) in cases {
            check_steps(steps, &format!("cases.{id}"), &mut problems);
        }
    }
    problems
}

fn check_steps(steps: &serde_json::Value, at: &str, problems: &mut Vec<String>) {
    let Some(steps) = steps.as_array() else { return };
    for (i, step) in steps.iter().enumerate() {
        let at = format!("{at}[{i}]");
        match step.as_object() {
            Some(branch) if branch.contains_key("if_shown") => {
                for key in branch.keys().filter(|k| !BRANCH_KEYS.contains(&k.as_str())) {
                    problems.push(format!(
                        "field `{at}.{key}`: is not a key of a branch; a branch has {}",
                        BRANCH_KEYS.join(", ")
                    ));
                }
                for key in ["then", "else"] {
                    if let Some(inner) = branch.get(key) {
                        check_steps(inner, &format!("{at}.{key}"), problems);
                    }
                }
            }
            Some(batch) if batch.contains_key("batch") => {
                if let Some(key) = batch.keys().find(|k| k.as_str() != "batch") {
                    problems.push(format!("field `{at}.{key}`: is not a key of a batch; a batch has only `batch`"));
                }
                match batch.get("batch").and_then(|b| b.as_array()) {
                    Some(actions) if actions.is_empty() => {
                        problems.push(format!("field `{at}.batch`: is empty; give it at least one action"))
                    }
                    Some(actions) => {
                        if let Some(i) = actions
                            .iter()
                            .position(|a| ["batch", "if_shown", "delegate"].iter().any(|k| a.get(k).is_some()))
                        {
                            problems.push(format!(
                                "field `{at}.batch[{i}]`: a batch holds actions only, not batches, branches or delegations"
                            ));
                        } else {
                            check_steps(&batch["batch"], &format!("{at}.batch"), problems);
                        }
                    }
                    None => problems.push(format!("field `{at}.batch`: must be a list of actions")),
                }
            }
            Some(delegate) if delegate.contains_key("delegate") => check_delegate(delegate, &at, problems),
            Some(action) if action.contains_key(UNCHECKED) => match action.get(UNCHECKED) {
                // Sent as written: a script standing in for a model that errs.
                Some(serde_json::Value::Bool(true)) => {}
                Some(serde_json::Value::Bool(false)) => {
                    let mut action = action.clone();
                    action.remove(UNCHECKED);
                    check_action_at(&serde_json::Value::Object(action), &at, problems);
                }
                _ => problems.push(format!("field `{at}.{UNCHECKED}`: must be true or false")),
            },
            _ => check_action_at(step, &at, problems),
        }
    }
}

/// Keys of a `delegate` step's body, as its serde names them.
const DELEGATION_KEYS: [&str; 4] = ["question", "max_steps", "max_tokens", "steps"];

/// A `delegate` step: a question, optional positive budgets, and the child's steps, which are
/// checked like any others but may not delegate again (the child cannot; a script that tests
/// the refusal gives the child a plain `delegate_readonly` action).
fn check_delegate(step: &serde_json::Map<String, serde_json::Value>, at: &str, problems: &mut Vec<String>) {
    if let Some(key) = step.keys().find(|k| k.as_str() != "delegate") {
        problems.push(format!("field `{at}.{key}`: is not a key of a delegation step; it has only `delegate`"));
    }
    let at = format!("{at}.delegate");
    let Some(body) = step["delegate"].as_object() else {
        problems.push(format!("field `{at}`: must be a mapping with {}", DELEGATION_KEYS.join(", ")));
        return;
    };
    for key in body.keys().filter(|k| !DELEGATION_KEYS.contains(&k.as_str())) {
        problems
            .push(format!("field `{at}.{key}`: is not a key of a delegation; it has {}", DELEGATION_KEYS.join(", ")));
    }
    match body.get("question").and_then(|q| q.as_str()) {
        Some(q) if !q.trim().is_empty() => {}
        _ => problems.push(format!("field `{at}.question`: is missing or empty; say what the child should find out")),
    }
    for key in ["max_steps", "max_tokens"] {
        if let Some(v) = body.get(key)
            && v.as_u64().is_none_or(|n| n == 0)
        {
            problems.push(format!("field `{at}.{key}`: must be a whole number of at least 1, got {v}"));
        }
    }
    match body.get("steps") {
        None => {}
        Some(steps) if steps.is_array() => {
            if let Some(i) = steps.as_array().into_iter().flatten().position(|s| s.get("delegate").is_some()) {
                problems.push(format!(
                    "field `{at}.steps[{i}]`: a child cannot delegate again; to test the refusal, give it a plain \
                     `{{tool: delegate_readonly, args: {{question: ...}}}}` action"
                ));
            } else {
                check_steps(steps, &format!("{at}.steps"), problems);
            }
        }
        Some(_) => problems.push(format!("field `{at}.steps`: must be a list of the child's steps")),
    }
}

fn check_action_at(action: &serde_json::Value, at: &str, problems: &mut Vec<String>) {
    problems
        .extend(crate::bench::check_action(action).into_iter().map(|p| format!("field `{}`: {}", p.at(at), p.message)));
}

/// The key that exempts one action from the check (`unchecked: true`), for scripts that test
/// how the agent handles a malformed action: the action is sent to the agent as written.
const UNCHECKED: &str = "unchecked";

/// The keys of a [`Branch`] step, as its serde names them.
const BRANCH_KEYS: [&str; 4] = ["if_shown", "section", "then", "else"];

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

    /// Loads a script written to a file, as `--script` would, or the error's text.
    fn load_text(text: &str) -> Result<Script, String> {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.yaml");
        std::fs::write(&file, text).unwrap();
        Script::load(&file).map_err(|e| e.to_string())
    }

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

    #[test]
    fn a_batch_step_gives_one_turn_several_actions_and_is_checked() {
        let load = load_text;
        let script = load(
            "default:\n  - batch: [{tool: read_file, args: {path: a.py}}, {tool: list_files}]\n  - {tool: finish}\n",
        )
        .unwrap();
        let Step::Batch(b) = &script.default[0] else { panic!("{:?}", script.default[0]) };
        assert_eq!(b.batch.iter().map(|a| a.tool.as_str()).collect::<Vec<_>>(), ["read_file", "list_files"]);
        let e = load("default: [{batch: [{tool: read_file, args: {pth: a.py}}]}]\n").unwrap_err();
        assert!(e.contains("field `default[0].batch[0].args.pth`"), "{e}");
        let e = load("default: [{batch: []}]\n").unwrap_err();
        assert!(e.contains("field `default[0].batch`: is empty"), "{e}");
        let e = load("default: [{batch: [{tool: finish}], then: []}]\n").unwrap_err();
        assert!(e.contains("field `default[0].then`: is not a key of a batch"), "{e}");
        let e = load("default: [{batch: [{batch: [{tool: finish}]}]}]\n").unwrap_err();
        assert!(e.contains("actions only"), "{e}");
    }

    #[test]
    fn a_delegate_step_holds_the_childs_steps_and_is_checked() {
        let load = load_text;
        let script = load(
            "default:\n  - delegate:\n      question: where?\n      max_steps: 2\n      steps:\n        - {tool: read_file, args: {path: a.py}}\n        - {tool: finish, args: {answer: here}}\n",
        )
        .unwrap();
        let Step::Delegate(d) = &script.default[0] else { panic!("{:?}", script.default[0]) };
        assert_eq!(d.delegate.steps.len(), 2);
        assert_eq!(
            d.delegate.action(),
            Action::new("delegate_readonly", serde_json::json!({"question": "where?", "max_steps": 2}))
        );
        let e = load("default: [{delegate: {question: x, steps: [{tool: read_file, args: {pth: a}}]}}]\n").unwrap_err();
        assert!(e.contains("s.yaml") && e.contains("field `default[0].delegate.steps[0].args.pth`"), "{e}");
        let e = load("default: [{delegate: {question: '', max_steps: 0, budget: 3}}]\n").unwrap_err();
        assert!(e.contains("field `default[0].delegate.question`: is missing or empty"), "{e}");
        assert!(e.contains("field `default[0].delegate.max_steps`: must be a whole number of at least 1"), "{e}");
        assert!(e.contains("field `default[0].delegate.budget`: is not a key of a delegation"), "{e}");
        let e = load("default: [{delegate: {question: x, steps: [{delegate: {question: y}}]}}]\n").unwrap_err();
        assert!(e.contains("field `default[0].delegate.steps[0]`: a child cannot delegate again"), "{e}");
        let e = load("default: [{batch: [{delegate: {question: x}}]}]\n").unwrap_err();
        assert!(e.contains("field `default[0].batch[0]`: a batch holds actions only"), "{e}");
        let e = load("default: [{delegate: {question: x}, then: []}]\n").unwrap_err();
        assert!(e.contains("field `default[0].then`: is not a key of a delegation step"), "{e}");
        // A plain delegate_readonly action for the child is fine: the loop refuses it at run time.
        let ok =
            load("default: [{delegate: {question: x, steps: [{tool: delegate_readonly, args: {question: why}}]}}]\n");
        assert!(ok.is_ok(), "{ok:?}");
    }

    #[test]
    fn a_script_with_a_bad_action_is_refused_naming_the_step_and_field() {
        let load = |text: &str| load_text(text).map(|_| ());
        let e = load("cases:\n  c-1:\n    - {tool: read_file, args: {path: a.py}}\n    - {tool: write_file, args: {pth: a.py, content: x}}\n").unwrap_err();
        assert!(e.contains("field `cases.c-1[1].args.pth`: is not an argument of `write_file`"), "{e}");
        assert!(e.contains("field `cases.c-1[1].args.path`: is missing"), "{e}");
        assert!(e.contains("s.yaml"), "names the file: {e}");
        let e = load(
            "default:\n  - if_shown: x\n    then: [{tool: edit_file, args: {path: a, old: b, nwe: c}}]\n    els: []\n",
        )
        .unwrap_err();
        assert!(e.contains("field `default[0].then[0].args.nwe`"), "{e}");
        assert!(e.contains("field `default[0].els`: is not a key of a branch"), "{e}");
        let e = load("default: [{tool: finish, args: {answer: x}, extra: 1}]\n").unwrap_err();
        assert!(e.contains("field `default[0].extra`"), "{e}");
        // A deliberately malformed action says so, and is then sent as written.
        let malformed = "default: [{tool: edit_file, args: {path: a.py}, unchecked: true}]\n";
        assert_eq!(load(malformed), Ok(()));
        let e = load(&malformed.replace("true", "false")).unwrap_err();
        assert!(e.contains("field `default[0].args.old`: is missing"), "{e}");
        let e = load(&malformed.replace("true", "1")).unwrap_err();
        assert!(e.contains("field `default[0].unchecked`: must be true or false"), "{e}");
        assert_eq!(
            load(
                "default: [{tool: run_tests}, {tool: finish}]\ncases: {a: [{tool: run_command, args: {argv: [ls]}}]}\n"
            ),
            Ok(())
        );
    }
}
