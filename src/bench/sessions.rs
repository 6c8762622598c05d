//! Multi-session cases: the `sessions:` and `features:` blocks of a case file, resolved.
//!
//! A multi-session case is worked on across several sessions, each with a fresh context; only
//! the workspace carries over (the loop is `agent::sessions`). Session 1 is the initializer,
//! the others are coding sessions, and each has its own prompt and step budget. `features:`
//! is the hidden verifier: one check command per feature, run in the workspace like a
//! verifier command, never shown to the agent. Its ids are the names the agent's
//! `feature_list.json` must use, so the prompt has to name them too (the loader checks it).
//!
//! The parts of an oracle or a script that belong to each session are cut at `finish`
//! ([`session_part`]): the same list of steps a single-session case plays straight through
//! is played one part per session, so oracles, scripts and the validate controls need no
//! second format.

use serde::Deserialize;

use crate::action::Action;
use crate::model::scripted::Step;

/// The `sessions:` block as written.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSessions {
    count: Option<u32>,
    step_budget: Option<u32>,
    #[serde(default)]
    prompts: RawPrompts,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPrompts {
    initializer: Option<String>,
    coding: Option<String>,
}

/// One entry of `features:` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFeature {
    id: Option<String>,
    check: Option<Vec<String>>,
}

/// How a multi-session case runs and is judged.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionsSpec {
    /// Sessions in all, at least 2 (the initializer and one coding session).
    pub count: u32,
    /// Model turns each session may take.
    pub step_budget: u32,
    /// What session 1 is told before the task.
    pub initializer: String,
    /// What every later session is told before the task.
    pub coding: String,
    /// The hidden verifier, in the case file's order.
    pub features: Vec<Feature>,
}

/// One feature of a multi-session case and the hidden check that decides whether it passes.
#[derive(Debug, Clone, PartialEq)]
pub struct Feature {
    /// The name `feature_list.json` uses for it.
    pub id: String,
    /// Argv run with the workspace as working directory, like `verifier.command`
    /// (placeholders included); exit 0 = the feature works.
    pub check: Vec<String>,
}

/// Which prompt a session gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionKind {
    Initializer,
    Coding,
}

impl SessionKind {
    /// Session `index` (1-based): the first initializes, the rest code.
    pub fn of(index: u32) -> SessionKind {
        if index == 1 { SessionKind::Initializer } else { SessionKind::Coding }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SessionKind::Initializer => "initializer",
            SessionKind::Coding => "coding",
        }
    }
}

impl SessionsSpec {
    /// The prompt of a session of `kind`: its instructions, then the task.
    pub fn prompt(&self, kind: SessionKind, task: &str) -> String {
        let head = match kind {
            SessionKind::Initializer => &self.initializer,
            SessionKind::Coding => &self.coding,
        };
        format!("{}\n\n{}", head.trim_end(), task.trim_end())
    }
}

/// Resolves `sessions:` and `features:`; every problem goes to `problem(field, message)`.
/// `prompt` is the case's task, which must name every feature. Both blocks or neither: a
/// `features:` without `sessions:` (or the reverse) is a problem.
pub(super) fn resolve(
    sessions: Option<RawSessions>,
    features: Option<Vec<RawFeature>>,
    prompt: &str,
    problem: &mut dyn FnMut(&str, String),
) -> Option<SessionsSpec> {
    let raw = match (sessions, features.as_ref()) {
        (None, None) => return None,
        (None, Some(_)) => {
            problem(
                "features",
                "is only for multi-session cases; add a `sessions:` block (count, step_budget, prompts) or remove it"
                    .into(),
            );
            return None;
        }
        (Some(raw), _) => raw,
    };
    let count = raw.count.unwrap_or(0);
    if count < 2 {
        problem(
            "sessions.count",
            format!(
                "is {}; a multi-session case has at least 2 sessions (the initializer and one coding session)",
                count
            ),
        );
    }
    let step_budget = raw.step_budget.unwrap_or(0);
    if step_budget == 0 {
        problem("sessions.step_budget", "is missing or 0; give the model turns each session may take (e.g. 10)".into());
    }
    let mut text = |field: &str, value: Option<String>, what: &str| -> String {
        let value = value.unwrap_or_default();
        if value.trim().is_empty() {
            problem(field, format!("is missing or empty; say what {what} session does"));
        }
        value
    };
    let initializer = text("sessions.prompts.initializer", raw.prompts.initializer, "the first (initializer)");
    let coding = text("sessions.prompts.coding", raw.prompts.coding, "each later (coding)");

    let mut resolved = Vec::new();
    match features {
        None => problem("features", "is missing; list the features and the hidden check of each (id, check)".into()),
        Some(list) if list.is_empty() => {
            problem("features", "is empty; list at least one feature with its hidden check".into())
        }
        Some(list) => {
            for (i, f) in list.into_iter().enumerate() {
                let at = format!("features[{i}]");
                let id = f.id.unwrap_or_default();
                if id.is_empty() {
                    problem(&format!("{at}.id"), "is missing; name the feature as feature_list.json will".into());
                } else if !super::load::valid_id(&id) {
                    problem(&format!("{at}.id"), format!("`{id}` may hold only a-z, 0-9, '-', '_' and '.'"));
                } else if resolved.iter().any(|r: &Feature| r.id == id) {
                    problem(&format!("{at}.id"), format!("`{id}` is listed twice"));
                } else if !prompt.contains(id.as_str()) {
                    problem(
                        &format!("{at}.id"),
                        format!("`{id}` is not named in the case's `prompt`; the agent must be told every feature"),
                    );
                }
                let check = f.check.unwrap_or_default();
                if check.first().is_none_or(String::is_empty) {
                    problem(&format!("{at}.check"), "is missing or empty; give the argv of the hidden check".into());
                }
                resolved.push(Feature { id, check });
            }
        }
    }
    Some(SessionsSpec { count, step_budget, initializer, coding, features: resolved })
}

/// How many sessions a list of oracle or script steps covers: its top-level parts ending in
/// `finish` (a trailing part without one counts too): the same cut as [`session_part`]'s.
pub fn parts(steps: &[Action]) -> usize {
    steps.split_inclusive(Action::ends_session).count()
}

/// A step of an oracle or a script, which may end its session.
pub trait SessionStep {
    /// Whether the step is a top-level `finish` (an action, or a batch holding one).
    fn ends_session(&self) -> bool;
}

impl SessionStep for Action {
    fn ends_session(&self) -> bool {
        self.tool == "finish"
    }
}

impl SessionStep for Step {
    fn ends_session(&self) -> bool {
        match self {
            Step::Action(a) => a.ends_session(),
            Step::Batch(b) => b.batch.iter().any(Action::ends_session),
            // A delegation's own steps end with the child's `finish`, not the session's.
            Step::Branch(_) | Step::Delegate(_) => false,
        }
    }
}

/// The steps of session `index` (0-based): the list is cut after each step that ends a
/// session, and session `index` plays part `index`. Past the last part the session gets
/// nothing, so the provider finishes at once. A slice of `steps`: the caller copies only the
/// session's part, not the whole script (the oracle's is every session's code).
pub fn session_part<S: SessionStep>(steps: &[S], index: usize) -> &[S] {
    steps.split_inclusive(S::ends_session).nth(index).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finish() -> Step {
        Action::finish("done").into()
    }

    fn read(path: &str) -> Step {
        Action::new("read_file", serde_json::json!({ "path": path })).into()
    }

    #[test]
    fn each_session_plays_its_part_up_to_its_finish() {
        let steps = vec![read("a"), finish(), read("b"), read("c"), finish(), read("d")];
        assert_eq!(session_part(&steps, 0), [read("a"), finish()]);
        assert_eq!(session_part(&steps, 1), [read("b"), read("c"), finish()]);
        assert_eq!(session_part(&steps, 2), [read("d")]);
        assert!(session_part(&steps, 3).is_empty());
        let oracle = [Action::finish("first"), Action::new("read_file", serde_json::json!({ "path": "b" }))];
        assert_eq!(session_part(&oracle, 1), &oracle[1..], "an oracle's actions are cut the same way");
        assert!(session_part(&oracle[..1], 1).is_empty(), "a list ending in finish has no part after it");
    }

    #[test]
    fn problems_name_the_field() {
        let mut seen = Vec::new();
        let raw = RawSessions { count: Some(1), step_budget: Some(0), prompts: RawPrompts::default() };
        let features = vec![RawFeature { id: Some("add".into()), check: None }];
        resolve(Some(raw), Some(features), "nothing named", &mut |f, m| seen.push(format!("{f}: {m}")));
        let fields: Vec<&str> = seen.iter().map(|s| s.split(':').next().unwrap()).collect();
        assert_eq!(
            fields,
            [
                "sessions.count",
                "sessions.step_budget",
                "sessions.prompts.initializer",
                "sessions.prompts.coding",
                "features[0].id",
                "features[0].check"
            ]
        );
    }
}
