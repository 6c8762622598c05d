//! Checking actions that a person wrote (oracle files, `scripted` scripts) against the tool
//! table, before anything runs.
//!
//! A model's action is parsed leniently at run time ([`crate::action::Call::from_action`]
//! ignores unknown arguments, and a bad one becomes a message the model can read and recover
//! from). An authored action has no one to read that message: `pth:` instead of `path:` would
//! silently drop the argument, and the oracle would only "not pass". So authored actions are
//! checked strictly, at load, from the same table (`action::TOOLS`) that defines the tools:
//! unknown keys, unknown arguments, missing required arguments and values of the wrong kind are
//! each one problem naming the field. The checks run on the file's parsed value, not on
//! [`Action`](crate::action::Action), because serde's view of an action has already dropped
//! the unknown keys.

use serde_json::Value;

use crate::action::{ArgKind, Need, Tool};

/// One thing wrong with an authored action: the field, relative to the action (`tool`,
/// `args`, `args.path`, or the action itself when empty), and what to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ActionProblem {
    pub field: String,
    pub message: String,
}

impl ActionProblem {
    /// The field below `at` (e.g. `actions[2]`), for messages naming the whole path.
    pub(crate) fn at(&self, at: &str) -> String {
        if self.field.is_empty() { at.to_string() } else { format!("{at}.{}", self.field) }
    }
}

/// Every problem of one authored action (a mapping of `tool` and `args`); empty when it is a
/// call the agent would run exactly as written.
pub(crate) fn check_action(action: &Value) -> Vec<ActionProblem> {
    let mut problems = Vec::new();
    let mut problem = |field: &str, message: String| problems.push(ActionProblem { field: field.into(), message });
    let Some(map) = action.as_object() else {
        problem(
            "",
            format!("is not an action: write a mapping such as {{tool: finish, args: {{answer: done}}}}, not {action}"),
        );
        return problems;
    };
    for key in map.keys().filter(|k| *k != "tool" && *k != "args") {
        problem(key, "is not a key of an action; an action has `tool` and `args`".into());
    }
    let tool = match map.get("tool") {
        None => {
            problem("tool", format!("is missing; name one of {}", Tool::names()));
            return problems;
        }
        Some(Value::String(name)) => match Tool::parse(name) {
            Some(t) => t,
            None => {
                problem("tool", format!("`{name}` is not a tool; known tools: {}", Tool::names()));
                return problems;
            }
        },
        Some(other) => {
            problem("tool", format!("must be a tool name, not {other}"));
            return problems;
        }
    };
    let def = tool.def();
    let empty = serde_json::Map::new();
    let args = match map.get("args") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(args)) => args,
        Some(other) => {
            problem("args", format!("must be a mapping of argument names to values, not {other}"));
            return problems;
        }
    };
    let names = || {
        let list: Vec<&str> = def.args.iter().map(|a| a.name).collect();
        if list.is_empty() { "none".to_string() } else { list.join(", ") }
    };
    for (name, value) in args {
        let field = format!("args.{name}");
        let Some(arg) = def.args.iter().find(|a| a.name == name) else {
            problem(&field, format!("is not an argument of `{}`; its arguments: {}", def.name, names()));
            continue;
        };
        let fits = match arg.kind {
            ArgKind::Text => value.is_string(),
            ArgKind::Count => value.as_u64().is_some_and(|n| n >= 1),
            ArgKind::Flag => value.is_boolean(),
            ArgKind::TextList => {
                value.as_array().is_some_and(|items| !items.is_empty() && items.iter().all(Value::is_string))
            }
        };
        if !fits {
            let want = match arg.kind {
                ArgKind::Text => "a string",
                ArgKind::Count => "a whole number of at least 1",
                ArgKind::Flag => "true or false",
                ArgKind::TextList => "a non-empty list of strings, e.g. [python3, -V]",
            };
            problem(&field, format!("is {value}; `{}` takes {want}", arg.name));
        }
    }
    for arg in def.args.iter().filter(|a| a.need == Need::Required && !args.contains_key(a.name)) {
        problem(&format!("args.{}", arg.name), format!("is missing; `{}` needs it", def.name));
    }
    problems
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn fields(v: Value) -> Vec<(String, String)> {
        check_action(&v).into_iter().map(|p| (p.field, p.message)).collect()
    }

    #[test]
    fn a_well_formed_action_has_no_problem() {
        assert_eq!(fields(json!({"tool": "edit_file", "args": {"path": "a.py", "old": "x", "new": "y"}})), []);
        assert_eq!(fields(json!({"tool": "run_tests"})), []);
        assert_eq!(fields(json!({"tool": "finish", "args": null})), [], "finish's answer is expected, not required");
        assert_eq!(fields(json!({"tool": "read_file", "args": {"path": "a", "start_line": 2, "end_line": 3}})), []);
    }

    #[test]
    fn misspelt_arguments_and_keys_are_named() {
        let p = fields(json!({"tool": "write_file", "args": {"pth": "a.py", "content": "x", "overwite": true}}));
        let named: Vec<&str> = p.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(named, ["args.overwite", "args.pth", "args.path"]);
        assert!(
            p[0].1.contains("is not an argument of `write_file`; its arguments: path, content, overwrite"),
            "{p:?}"
        );
        assert!(p[2].1.contains("is missing; `write_file` needs it"), "{p:?}");

        let p = fields(json!({"tool": "finish", "arg": {"answer": "x"}}));
        assert_eq!(p[0].0, "arg");
        assert!(p[0].1.contains("an action has `tool` and `args`"), "{p:?}");
    }

    #[test]
    fn values_of_the_wrong_kind_are_named() {
        let p = fields(json!({"tool": "run_command", "args": {"argv": "python3 -V"}}));
        assert_eq!(p[0].0, "args.argv");
        assert!(p[0].1.contains("takes a non-empty list of strings"), "{p:?}");
        let p = fields(json!({"tool": "write_file", "args": {"path": "a", "content": "x", "overwrite": "yes"}}));
        assert_eq!(p[0].0, "args.overwrite");
        let p = fields(json!({"tool": "read_file", "args": {"path": "a", "start_line": 0}}));
        assert!(p[0].1.contains("a whole number of at least 1"), "{p:?}");
        let p = fields(json!({"tool": "read_file", "args": "a.py"}));
        assert_eq!(p[0].0, "args");
    }

    #[test]
    fn an_unknown_or_missing_tool_is_one_problem() {
        let p = fields(json!({"tool": "teleport", "args": {"to": "x"}}));
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].1.contains("`teleport` is not a tool; known tools: list_files"), "{p:?}");
        let p = fields(json!({"args": {}}));
        assert_eq!(p[0].0, "tool");
        assert_eq!(fields(json!("finish"))[0].0, "");
    }
}
