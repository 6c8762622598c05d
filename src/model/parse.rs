//! Turning what a model sent into its [`Action`]s: strict first, then tolerant of the noise real
//! models produce.
//!
//! This module is pure (no I/O, no clock) so every rule is unit-tested, and it must never panic:
//! the input is untrusted text from a network peer. The rules, in order (documented for users
//! in `docs/providers.md`):
//!
//! 1. Native tool calls (`tool_calls` in Chat Completions, `function_call` items in Responses)
//!    win over text. Every native call is an action, in the order the model made them (the agent
//!    runs them as one batch, `docs/architecture.md`); a call whose arguments cannot be decoded
//!    stays in its place with the raw arguments, so the loop refuses that one call and says why.
//!    When no native call can be read at all, the text is tried instead.
//! 2. The whole text, trimmed, as strict JSON. A list of actions (`[{...}, {...}]`, or
//!    `{"tool_calls": [...]}` written out) is every action of the list, in order, as with native
//!    calls; a list with an element that names a tool but cannot be used is an error naming it,
//!    so no call of a list is dropped unseen.
//! 3. Fenced blocks (```` ```json ... ``` ````), each as strict JSON, lists read as in rule 2.
//! 4. Every balanced `{...}` in the text, outermost first and in order, so prose around the
//!    JSON is ignored and of two objects back to back the first complete one wins. A candidate
//!    that fails strict JSON gets two conservative repairs (trailing commas removed; single
//!    quotes turned into double quotes when it has no double quotes at all).
//! 5. An object is an action when it names a tool under `tool` or one of its aliases; the
//!    arguments come from `args` or an alias, may be a JSON-encoded string, and default to the
//!    object's other keys (the flat form `{"tool": "read_file", "path": "a.py"}`).
//! 6. Tool names and argument names are normalized through the alias tables below; unknown
//!    tool names pass through unchanged so the loop can tell the model what exists.
//!
//! When nothing yields an action and the provider said the reply was cut off by the output
//! token limit, the error is [`ModelError::Truncated`], otherwise [`ModelError::Parse`].

use serde_json::{Map, Value};

use super::ModelError;
use crate::action::{Action, ArgKind, TOOLS, Tool};

/// What a provider adapter extracted from one response, before it is turned into an action.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct RawReply {
    /// The assistant's text (may be empty when the model only called a tool).
    pub text: String,
    /// Native tool calls, in the order the model made them.
    pub tool_calls: Vec<RawToolCall>,
    /// True when the provider stopped the reply at the output-token limit.
    pub truncated: bool,
}

/// One native tool call: a name and its arguments (an object, or a JSON-encoded string).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RawToolCall {
    pub name: String,
    pub arguments: Value,
}

/// Longest text the tolerant scan looks at. Replies are bounded by max_output_tokens anyway;
/// this keeps a pathological reply from costing quadratic time.
const MAX_SCAN_BYTES: usize = 256 * 1024;
/// Most balanced-brace candidates tried before giving up.
const MAX_CANDIDATES: usize = 256;
/// Characters of the reply quoted in an error message.
const PREVIEW_CHARS: usize = 200;

/// Keys that may hold the tool name, in order of preference.
const TOOL_KEYS: &[&str] = &["tool", "name", "action", "function", "tool_name", "function_name"];
/// Keys that may hold the arguments, in order of preference.
const ARGS_KEYS: &[&str] =
    &["args", "arguments", "parameters", "params", "input", "tool_input", "action_input", "tool_args"];
/// Keys that are commentary, not arguments, in the flat form.
const META_KEYS: &[&str] =
    &["type", "id", "call_id", "thought", "thoughts", "reasoning", "explanation", "reason_for_call"];

/// Tool-name aliases: what models call our tools when they guess. The canonical names come
/// from [`crate::action::TOOLS`].
const TOOL_ALIASES: &[(Tool, &[&str])] = &[
    (Tool::ListFiles, &["ls", "list", "list_dir", "list_directory", "listdir", "dir", "list_file"]),
    (Tool::ReadFile, &["read", "cat", "open", "open_file", "view", "view_file", "show_file", "readfile"]),
    (Tool::SearchCode, &["search", "grep", "rg", "find", "search_files", "code_search"]),
    (Tool::RepoMap, &["repomap", "map", "outline"]),
    (Tool::EditFile, &["edit", "replace", "str_replace", "str_replace_editor", "modify_file", "patch", "editfile"]),
    (Tool::WriteFile, &["write", "create", "create_file", "new_file", "save_file", "writefile"]),
    (Tool::RunTests, &["test", "tests", "run_test", "pytest", "runtests"]),
    (Tool::RunCommand, &["bash", "shell", "sh", "exec", "execute", "run", "command", "run_shell", "execute_command"]),
    (Tool::DelegateReadonly, &["delegate", "ask_helper", "subagent", "investigate"]),
    (Tool::Finish, &["done", "submit", "stop", "complete", "end", "final_answer", "answer"]),
];

/// Argument-name aliases per tool: (argument name from [`crate::action::TOOLS`], aliases).
/// A unit test checks that every first element is an argument of that tool.
fn arg_aliases(tool: Tool) -> &'static [(&'static str, &'static [&'static str])] {
    const PATH: (&str, &[&str]) = ("path", &["file", "filename", "file_path", "filepath", "file_name", "fname"]);
    const DIR: (&str, &[&str]) =
        ("path", &["file", "filename", "file_path", "filepath", "dir", "directory", "folder", "dir_path"]);
    match tool {
        Tool::ListFiles => &[DIR, ("max_depth", &["depth", "maxdepth", "max-depth"])],
        Tool::ReadFile => &[
            PATH,
            ("start_line", &["start", "from", "line_start", "first_line", "from_line"]),
            ("end_line", &["end", "to", "line_end", "last_line", "to_line"]),
        ],
        Tool::SearchCode => {
            &[("pattern", &["query", "regex", "search", "text", "term", "q"]), DIR, ("glob", &["include", "files"])]
        }
        Tool::RepoMap => &[DIR],
        Tool::EditFile => &[
            PATH,
            ("old", &["old_str", "old_string", "old_text", "search", "find", "original", "before"]),
            ("new", &["new_str", "new_string", "new_text", "replace", "replacement", "updated", "after"]),
        ],
        Tool::WriteFile => &[PATH, ("content", &["contents", "text", "data", "body", "code"])],
        Tool::RunTests => &[],
        Tool::RunCommand => &[("argv", &["cmd", "command", "args", "commandline", "command_line"])],
        Tool::DelegateReadonly => &[("question", &["query", "prompt", "task", "ask"])],
        Tool::Finish => &[("answer", &["result", "message", "summary", "reason", "text", "output", "response"])],
    }
}

/// True for the name of a numeric argument of any tool: models like to send those as strings.
/// Any tool's, not only the called one's, so that a stray `"start_line": "3"` reads the same
/// whichever tool it came with.
fn is_numeric_arg(key: &str) -> bool {
    TOOLS.iter().flat_map(|d| d.args).any(|a| a.kind == ArgKind::Count && a.name == key)
}

/// A reply's first action: what the tests of one-action replies compare (the loop and the fuzz
/// entry points take every action, [`parse_calls`]).
#[cfg(test)]
pub(crate) fn parse_reply(raw: &RawReply) -> Result<Action, ModelError> {
    parse_calls(raw).map(|mut actions| actions.swap_remove(0))
}

/// Turns a provider's raw reply into its actions, in the order the model asked: every native
/// tool call, else the action(s) of the text. The list is never empty. Never panics.
pub(crate) fn parse_calls(raw: &RawReply) -> Result<Vec<Action>, ModelError> {
    let mut first_error: Option<String> = None;
    let mut actions = Vec::with_capacity(raw.tool_calls.len());
    let mut read = 0;
    for call in &raw.tool_calls {
        match action_from_tool_call(&call.name, &call.arguments) {
            Ok(action) => {
                actions.push(action);
                read += 1;
            }
            Err(e) => {
                // Kept in its place with the arguments as sent: `Call::from_action` refuses a
                // non-object, so the model is told about exactly this call.
                actions.push(Action::new(&canonical_tool(&call.name), call.arguments.clone()));
                first_error.get_or_insert(e);
            }
        }
    }
    if read > 0 {
        return Ok(actions);
    }
    match parse_text(&raw.text) {
        Ok(actions) => Ok(actions),
        Err(text_error) => {
            let message = first_error.unwrap_or(text_error);
            if raw.truncated {
                Err(ModelError::Truncated(format!(
                    "the reply stopped at the output-token limit before a complete JSON action ({message})"
                )))
            } else {
                Err(ModelError::Parse(message))
            }
        }
    }
}

/// Finds the actions in a text reply (rules 2 to 6): several only when the whole text or a
/// fenced block is a list of them. Never empty.
pub(crate) fn parse_text(text: &str) -> Result<Vec<Action>, String> {
    let text = crate::util::truncate_str(text, MAX_SCAN_BYTES);
    let visible = strip_thinking(text);
    let trimmed = visible.trim();
    if trimmed.is_empty() {
        return Err(if text.trim().is_empty() {
            "the reply was empty".to_string()
        } else {
            "the reply held only reasoning, no action".to_string()
        });
    }
    // The first action-shaped value that has a problem, reported if nothing better turns up.
    let mut problem: Option<String> = None;
    // A list is final either way: with a broken call in it, the scan below would find one of
    // its other calls and run less than the model asked for.
    let whole = |value: &Value, problem: &mut Option<String>| match actions_from_value(value) {
        Some(Ok(actions)) => Some(Ok(actions)),
        Some(Err(e)) if list_items(value).is_some() => Some(Err(e)),
        Some(Err(e)) => {
            problem.get_or_insert(e);
            None
        }
        None => None,
    };
    if let Ok(value) = serde_json::from_str::<Value>(trimmed)
        && let Some(found) = whole(&value, &mut problem)
    {
        return found;
    }
    for block in fenced_blocks(trimmed) {
        if let Some(value) = parse_lenient(block)
            && let Some(found) = whole(&value, &mut problem)
        {
            return found;
        }
    }
    for (start, end) in balanced_objects(trimmed) {
        if let Some(value) = parse_lenient(&trimmed[start..end]) {
            match action_from_value(&value, 0) {
                Some(Ok(action)) => return Ok(vec![action]),
                Some(Err(e)) => {
                    problem.get_or_insert(e);
                }
                None => {}
            }
        }
    }
    Err(problem.unwrap_or_else(|| format!("no JSON action found in the reply: {}", preview(trimmed))))
}

/// Every action of a value that stands for the whole reply: a list (`[{...}, {...}]`, or
/// `{"tool_calls": [...]}` written out) gives each of its actions in order, skipping elements
/// that are not action-shaped (a stray string); anything else gives its one action. An element
/// that names a tool but cannot be used makes the whole list an error naming its place: running
/// the rest would hide from the model that one of its calls never ran.
fn actions_from_value(value: &Value) -> Option<Result<Vec<Action>, String>> {
    let Some(items) = list_items(value) else {
        return action_from_value(value, 0).map(|r| r.map(|a| vec![a]));
    };
    let mut actions = Vec::new();
    // Bounded like the brace scan; the loop refuses every call past its own cap anyway.
    for (i, item) in items.iter().take(MAX_CANDIDATES).enumerate() {
        match action_from_value(item, 1) {
            Some(Ok(action)) => actions.push(action),
            Some(Err(e)) => return Some(Err(format!("call {} of the list: {e}", i + 1))),
            None => {}
        }
    }
    (!actions.is_empty()).then_some(Ok(actions))
}

/// The calls of a value that is a list of them: an array, or `{"tool_calls": [...]}`.
fn list_items(value: &Value) -> Option<&Vec<Value>> {
    match value {
        Value::Array(items) => Some(items),
        Value::Object(map) => match map.get("tool_calls") {
            Some(Value::Array(calls)) => Some(calls),
            _ => None,
        },
        _ => None,
    }
}

/// An action from a native tool call: the name is the tool, the arguments its args.
fn action_from_tool_call(name: &str, arguments: &Value) -> Result<Action, String> {
    // Some models wrap the real action in a generic tool (`{"name": "action", "arguments":
    // "{\"tool\": ...}"}`); unwrap it when the arguments name a tool themselves.
    let args = decode_args(arguments).map_err(|e| format!("tool call `{name}`: {e}"))?;
    let canonical = canonical_tool(name);
    if !is_known_tool(&canonical)
        && let Some(Ok(action)) = action_from_value(&args, 1)
    {
        return Ok(action);
    }
    finish_action(&canonical, args)
}

/// Interprets one JSON value as an action. `None`: not action-shaped at all (keep looking);
/// `Some(Err)`: action-shaped but unusable (e.g. arguments that are not an object).
fn action_from_value(value: &Value, depth: u8) -> Option<Result<Action, String>> {
    if depth > 3 {
        return None;
    }
    match value {
        // A list nested inside an action-shaped value: its first action (a list that is the
        // whole reply is read whole, `actions_from_value`).
        Value::Array(items) => items.iter().take(8).find_map(|v| action_from_value(v, depth + 1)),
        Value::Object(map) => action_from_object(map, depth),
        _ => None,
    }
}

fn action_from_object(map: &Map<String, Value>, depth: u8) -> Option<Result<Action, String>> {
    // OpenAI shapes written out as text: {"tool_calls": [...]}, {"function_call": {...}},
    // {"function": {"name": ..., "arguments": ...}}.
    if let Some(Value::Array(calls)) = map.get("tool_calls")
        && let Some(found) = calls.iter().take(8).find_map(|c| action_from_value(c, depth + 1))
    {
        return Some(found);
    }
    if let Some(inner @ Value::Object(_)) = map.get("function_call")
        && let Some(found) = action_from_value(inner, depth + 1)
    {
        return Some(found);
    }

    let (tool_key, tool_value) = TOOL_KEYS.iter().find_map(|k| map.get(*k).map(|v| (*k, v)))?;
    let name = match tool_value {
        Value::String(s) if !s.trim().is_empty() => s.clone(),
        // {"action": {"tool": ..., "args": ...}} or {"function": {"name": ..., "arguments": ...}}
        Value::Object(_) => return action_from_value(tool_value, depth + 1),
        _ => return None,
    };

    let args = match ARGS_KEYS.iter().find_map(|k| map.get(*k)) {
        Some(raw) => match decode_args(raw) {
            Ok(v) => v,
            Err(e) => return Some(Err(format!("tool `{name}`: {e}"))),
        },
        None => {
            // The flat form: every other key is an argument.
            let rest: Map<String, Value> = map
                .iter()
                .filter(|(k, _)| k.as_str() != tool_key && !META_KEYS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            Value::Object(rest)
        }
    };
    Some(finish_action(&canonical_tool(&name), args))
}

/// Arguments as sent: an object, null, or a string that should hold a JSON object. A string
/// that is not JSON is kept as a bare string; [`normalize_args`] maps it to the tool's main
/// argument.
fn decode_args(raw: &Value) -> Result<Value, String> {
    match raw {
        Value::Null => Ok(Value::Object(Map::new())),
        Value::Object(_) | Value::Array(_) => Ok(raw.clone()),
        Value::String(s) => {
            let t = s.trim();
            if t.is_empty() {
                return Ok(Value::Object(Map::new()));
            }
            if t.starts_with('{') || t.starts_with('[') {
                match parse_lenient(t) {
                    Some(v) => Ok(v),
                    None => Err(format!("arguments are a string that is not valid JSON: {}", preview(t))),
                }
            } else {
                Ok(raw.clone())
            }
        }
        other => Ok(other.clone()),
    }
}

/// Normalizes the arguments for a canonical tool name and builds the action.
fn finish_action(tool: &str, args: Value) -> Result<Action, String> {
    let args = normalize_args(tool, args)?;
    Ok(Action::new(tool, args))
}

fn normalize_args(tool: &str, args: Value) -> Result<Value, String> {
    let def = Tool::parse(tool).map(Tool::def);
    let main = def.and_then(|d| d.main_arg());
    let one = |name: &str, value: Value| Map::from_iter([(name.to_string(), value)]);
    let mut map = match (args, main) {
        (Value::Object(map), _) => map,
        // A bare value for a tool with one main argument.
        (Value::String(s), Some(main)) => one(main.name, Value::String(s)),
        (Value::String(s), None) => {
            return Err(format!("arguments of `{tool}` must be a JSON object, got the string {}", preview(&s)));
        }
        (Value::Array(items), Some(main)) if main.kind == ArgKind::TextList => one(main.name, Value::Array(items)),
        (other, _) => {
            return Err(format!("arguments of `{tool}` must be a JSON object, got {}", preview(&other.to_string())));
        }
    };
    let Some(def) = def else {
        // An unknown tool keeps its arguments as sent (but for numbers, below); the loop tells
        // the model which tools exist.
        convert_numbers(&mut map);
        return Ok(Value::Object(map));
    };
    for (canonical, aliases) in arg_aliases(def.tool) {
        if map.contains_key(*canonical) {
            continue;
        }
        if let Some(alias) = aliases.iter().find(|a| map.contains_key(**a))
            && let Some(v) = map.remove(*alias)
        {
            map.insert(canonical.to_string(), v);
        }
    }
    for list in def.args.iter().filter(|a| a.kind == ArgKind::TextList) {
        // `"argv": "python3 -m unittest"`: split on whitespace (no shell, no quoting rules).
        if let Some(Value::String(s)) = map.get(list.name) {
            let parts: Vec<Value> = s.split_whitespace().map(|p| Value::String(p.to_string())).collect();
            map.insert(list.name.to_string(), Value::Array(parts));
        }
    }
    convert_numbers(&mut map);
    Ok(Value::Object(map))
}

/// `"start_line": "3"` becomes `3`; anything that is not a plain number stays as sent.
fn convert_numbers(map: &mut Map<String, Value>) {
    for (key, value) in map.iter_mut() {
        if is_numeric_arg(key)
            && let Value::String(s) = value
            && let Ok(n) = s.trim().parse::<u64>()
        {
            *value = Value::from(n);
        }
    }
}

/// The canonical tool name for what the model wrote: case, separators, a `functions.` prefix
/// and the aliases in [`TOOL_ALIASES`] are forgiven. Unknown names come back unchanged.
pub(crate) fn canonical_tool(name: &str) -> String {
    let mut n = name.trim().to_ascii_lowercase().replace(['-', ' '], "_");
    for prefix in ["functions.", "function.", "tools.", "tool."] {
        if let Some(rest) = n.strip_prefix(prefix) {
            n = rest.to_string();
        }
    }
    if is_known_tool(&n) {
        return n;
    }
    for (tool, aliases) in TOOL_ALIASES {
        if aliases.contains(&n.as_str()) {
            return tool.as_str().to_string();
        }
    }
    name.trim().to_string()
}

fn is_known_tool(name: &str) -> bool {
    Tool::parse(name).is_some()
}

/// Removes `<think>...</think>` blocks that reasoning models put before the answer. An
/// unclosed block swallows the rest: it was all reasoning.
fn strip_thinking(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        match rest.find("<think>") {
            None => {
                out.push_str(rest);
                return out;
            }
            Some(i) => {
                out.push_str(&rest[..i]);
                match rest[i..].find("</think>") {
                    Some(j) => rest = &rest[i + j + "</think>".len()..],
                    None => return out,
                }
            }
        }
    }
}

/// The contents of ``` fenced blocks, in order. An unclosed fence runs to the end.
fn fenced_blocks(text: &str) -> Vec<&str> {
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        // Skip the info string (`json`, `JSON`, ...) up to the end of the line.
        let body_start = after.find('\n').map(|i| i + 1).unwrap_or(after.len());
        let info = &after[..body_start];
        let body = if info.trim_start().starts_with('{') { after } else { &after[body_start..] };
        match body.find("```") {
            Some(close) => {
                blocks.push(&body[..close]);
                rest = &body[close + 3..];
            }
            None => {
                blocks.push(body);
                break;
            }
        }
    }
    blocks
}

/// Byte ranges of balanced `{...}` objects, outermost first, in text order. String literals
/// (with escapes) are honoured inside braces; outside braces the text is prose.
fn balanced_objects(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut stack: Vec<usize> = Vec::new();
    let mut found: Vec<(usize, usize)> = Vec::new();
    let mut in_string = false;
    let mut escaped = false;
    for (i, &b) in bytes.iter().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' if !stack.is_empty() => in_string = true,
            b'{' => {
                if stack.len() >= 64 {
                    // Deeper nesting than any action needs: stop looking rather than spend time.
                    break;
                }
                stack.push(i);
            }
            b'}' => {
                if let Some(start) = stack.pop() {
                    found.push((start, i + 1));
                    if found.len() >= MAX_CANDIDATES {
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    // Outermost first: earlier starts first, and for equal starts (impossible) longer first.
    found.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    found
}

/// Strict JSON, else the two conservative repairs (trailing commas; single quotes when there
/// are no double quotes at all).
fn parse_lenient(text: &str) -> Option<Value> {
    let t = text.trim();
    if let Ok(v) = serde_json::from_str::<Value>(t) {
        return Some(v);
    }
    let no_trailing = remove_trailing_commas(t);
    if let Ok(v) = serde_json::from_str::<Value>(&no_trailing) {
        return Some(v);
    }
    if !t.contains('"') && t.contains('\'') {
        let swapped = remove_trailing_commas(&t.replace('\'', "\""));
        if let Ok(v) = serde_json::from_str::<Value>(&swapped) {
            return Some(v);
        }
    }
    None
}

/// Drops a comma that directly precedes `}` or `]` (outside strings).
fn remove_trailing_commas(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut escaped = false;
    for (i, &c) in chars.iter().enumerate() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        if c == '"' {
            in_string = true;
        }
        if c == ',' {
            let next = chars[i + 1..].iter().find(|c| !c.is_whitespace());
            if matches!(next, Some('}') | Some(']')) {
                continue;
            }
        }
        out.push(c);
    }
    out
}

/// A short, single-line quote of untrusted text for an error message.
pub(crate) fn preview(text: &str) -> String {
    let flat: String = text.chars().take(PREVIEW_CHARS).map(|c| if c.is_control() { ' ' } else { c }).collect();
    if text.chars().count() > PREVIEW_CHARS { format!("`{flat}...`") } else { format!("`{flat}`") }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn text(t: &str) -> Result<Action, ModelError> {
        parse_reply(&RawReply { text: t.into(), ..Default::default() })
    }

    fn all(t: &str) -> Result<Vec<Action>, ModelError> {
        parse_calls(&RawReply { text: t.into(), ..Default::default() })
    }

    fn ok(t: &str) -> Action {
        text(t).unwrap_or_else(|e| panic!("{t:?} should parse: {e}"))
    }

    #[test]
    fn strict_json_is_taken_as_is() {
        assert_eq!(
            ok(r#"{"tool": "read_file", "args": {"path": "calc.py"}}"#),
            Action::new("read_file", json!({"path": "calc.py"}))
        );
        assert_eq!(ok("  {\"tool\":\"run_tests\",\"args\":{}}\n"), Action::new("run_tests", json!({})));
    }

    #[test]
    fn prose_around_the_json_is_ignored() {
        let a = ok(
            "Sure! I'll read the file first.\n{\"tool\": \"read_file\", \"args\": {\"path\": \"a.py\"}}\nLet me know.",
        );
        assert_eq!(a, Action::new("read_file", json!({"path": "a.py"})));
        // Braces inside strings do not confuse the scan.
        let a = ok(r#"Plan: {"tool": "write_file", "args": {"path": "x.py", "content": "d = {'a': 1}\n}"}} done"#);
        assert_eq!(a.args["content"], "d = {'a': 1}\n}");
    }

    #[test]
    fn of_two_objects_back_to_back_the_first_complete_one_wins() {
        let a = ok(r#"{"tool": "read_file", "args": {"path": "a.py"}}{"tool": "finish", "args": {}}"#);
        assert_eq!(a.tool, "read_file");
        let a = ok("{\"tool\": \"list_files\", \"args\": {}}\n\n{\"tool\": \"finish\"}");
        assert_eq!(a.tool, "list_files");
    }

    #[test]
    fn fenced_blocks_are_read() {
        let a = ok("Here you go:\n```json\n{\"tool\": \"run_tests\", \"args\": {}}\n```\n");
        assert_eq!(a.tool, "run_tests");
        let a = ok("```\n{\"tool\": \"finish\", \"args\": {\"answer\": \"ok\"}}\n```");
        assert_eq!(a, Action::finish("ok"));
        let a = ok("```json {\"tool\": \"finish\", \"args\": {\"answer\": \"inline\"}}```");
        assert_eq!(a, Action::finish("inline"));
    }

    #[test]
    fn native_tool_calls_win_and_string_arguments_are_decoded() {
        let raw = RawReply {
            text: "{\"tool\": \"finish\"}".into(),
            tool_calls: vec![RawToolCall { name: "read_file".into(), arguments: json!("{\"path\": \"calc.py\"}") }],
            truncated: false,
        };
        assert_eq!(parse_reply(&raw).unwrap(), Action::new("read_file", json!({"path": "calc.py"})));
        let raw = RawReply {
            tool_calls: vec![RawToolCall { name: "functions.run_tests".into(), arguments: json!("") }],
            ..Default::default()
        };
        assert_eq!(parse_reply(&raw).unwrap(), Action::new("run_tests", json!({})));
        // A generic wrapper tool whose arguments name the real tool.
        let raw = RawReply {
            tool_calls: vec![RawToolCall {
                name: "action".into(),
                arguments: json!({"tool": "finish", "args": {"answer": "x"}}),
            }],
            ..Default::default()
        };
        assert_eq!(parse_reply(&raw).unwrap(), Action::finish("x"));
    }

    #[test]
    fn several_native_calls_are_all_actions_in_the_order_asked() {
        let raw = RawReply {
            text: "reading both".into(),
            tool_calls: vec![
                RawToolCall { name: "read_file".into(), arguments: json!("{\"path\": \"a.py\"}") },
                RawToolCall { name: "grep".into(), arguments: json!({"query": "def f"}) },
                RawToolCall { name: "finish".into(), arguments: json!({"answer": "done"}) },
            ],
            truncated: false,
        };
        assert_eq!(
            parse_calls(&raw).unwrap(),
            vec![
                Action::new("read_file", json!({"path": "a.py"})),
                Action::new("search_code", json!({"pattern": "def f"})),
                Action::finish("done"),
            ]
        );
        // A call whose arguments cannot be decoded keeps its place, as sent, for the loop to
        // refuse; the others still run.
        let raw = RawReply {
            tool_calls: vec![
                RawToolCall { name: "read_file".into(), arguments: json!("{\"path\": ") },
                RawToolCall { name: "list_files".into(), arguments: json!({}) },
            ],
            ..Default::default()
        };
        let actions = parse_calls(&raw).unwrap();
        assert_eq!(actions.len(), 2);
        assert_eq!(actions[0].tool, "read_file");
        let refused = crate::action::Call::from_action(&actions[0]).unwrap_err();
        assert!(refused.contains("must be an object"), "{refused}");
        assert_eq!(actions[1], Action::new("list_files", json!({})));
        // When no call can be read, the text is the action, as with one call.
        let raw = RawReply {
            text: "{\"tool\": \"run_tests\"}".into(),
            tool_calls: vec![RawToolCall { name: "read_file".into(), arguments: json!("{oops") }],
            ..Default::default()
        };
        assert_eq!(parse_calls(&raw).unwrap(), vec![Action::new("run_tests", json!({}))]);
    }

    #[test]
    fn a_list_of_actions_as_the_whole_text_is_every_action_in_order() {
        let read = Action::new("read_file", json!({"path": "a.py"}));
        let search = Action::new("search_code", json!({"pattern": "def f"}));
        let two = vec![read.clone(), search.clone()];
        assert_eq!(
            all(r#"[{"tool": "read_file", "args": {"path": "a.py"}}, {"tool": "grep", "query": "def f"}]"#).unwrap(),
            two
        );
        // In a fenced block with prose around it, and as OpenAI's shape written out.
        let fenced = "Reading both.\n```json\n[{\"tool\": \"cat\", \"path\": \"a.py\"}, \"then\", {\"tool\": \"search\", \"q\": \"def f\"}]\n```";
        assert_eq!(all(fenced).unwrap(), two);
        let written = r#"{"tool_calls": [{"function": {"name": "read_file", "arguments": "{\"path\": \"a.py\"}"}}, {"function": {"name": "search_code", "arguments": {"pattern": "def f"}}}]}"#;
        assert_eq!(all(written).unwrap(), two);
        // One broken call makes the list an error that names it, rather than a shorter batch.
        let broken =
            r#"[{"tool": "read_file", "args": {"path": "a.py"}}, {"tool": "edit_file", "args": "{\"path\": "}]"#;
        let Err(ModelError::Parse(m)) = all(broken) else { panic!("a broken list must not parse") };
        assert!(m.starts_with("call 2 of the list: tool `edit_file`"), "{m}");
        // Two objects in prose stay one action (rule 4: the first complete one).
        assert_eq!(
            all(r#"I will read {"tool": "read_file", "path": "a.py"} and then {"tool": "grep", "q": "x"}"#).unwrap(),
            vec![read]
        );
        // A list with no action in it is no action.
        assert!(matches!(all(r#"["read a.py", 3]"#), Err(ModelError::Parse(m)) if m.contains("no JSON action")));
    }

    #[test]
    fn openai_shapes_written_as_text_are_understood() {
        let a = ok(
            r#"{"tool_calls": [{"type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"a.py\"}"}}]}"#,
        );
        assert_eq!(a, Action::new("read_file", json!({"path": "a.py"})));
        let a = ok(r#"{"function_call": {"name": "list_files", "arguments": "{}"}}"#);
        assert_eq!(a.tool, "list_files");
        let a = ok(r#"{"action": {"tool": "finish", "args": {"answer": "nested"}}}"#);
        assert_eq!(a, Action::finish("nested"));
    }

    #[test]
    fn aliases_map_onto_the_tables_names() {
        for (tool, aliases) in TOOL_ALIASES {
            for alias in *aliases {
                assert_eq!(canonical_tool(alias), tool.as_str(), "{alias}");
            }
        }
        for def in TOOLS {
            for (canonical, _) in arg_aliases(def.tool) {
                assert!(def.args.iter().any(|a| a.name == *canonical), "{} has no argument `{canonical}`", def.name);
            }
        }
        // Numbers are converted for the table's integer arguments and nothing else.
        let a = ok(r#"{"tool": "list_files", "args": {"depth": "2", "path": "7"}}"#);
        assert_eq!(a.args, json!({"max_depth": 2, "path": "7"}));
    }

    #[test]
    fn tool_and_argument_aliases_are_normalized() {
        let a = ok(r#"{"name": "cat", "arguments": {"file": "calc.py"}}"#);
        assert_eq!(a, Action::new("read_file", json!({"path": "calc.py"})));
        let a = ok(r#"{"action": "Run-Command", "parameters": {"cmd": "python3 -m unittest  discover"}}"#);
        assert_eq!(a, Action::new("run_command", json!({"argv": ["python3", "-m", "unittest", "discover"]})));
        let a =
            ok(r#"{"function": "edit_file", "input": {"filename": "a.py", "old_str": "a - b", "new_str": "a + b"}}"#);
        assert_eq!(a, Action::new("edit_file", json!({"path": "a.py", "old": "a - b", "new": "a + b"})));
        let a = ok(r#"{"tool": "read_file", "args": {"path": "a.py", "start_line": "3", "end": 9}}"#);
        assert_eq!(a.args, json!({"path": "a.py", "start_line": 3, "end_line": 9}));
        // A canonical key is never overwritten by an alias.
        let a = ok(r#"{"tool": "read_file", "args": {"path": "a.py", "file": "b.py"}}"#);
        assert_eq!(a.args["path"], "a.py");
        let a = ok(r#"{"tool": "done", "args": {"summary": "fixed"}}"#);
        assert_eq!(a, Action::finish("fixed"));
    }

    #[test]
    fn flat_and_bare_arguments_are_accepted() {
        let a = ok(r#"{"tool": "read_file", "path": "calc.py", "thought": "look first"}"#);
        assert_eq!(a, Action::new("read_file", json!({"path": "calc.py"})));
        let a = ok(r#"{"tool": "read_file", "args": "calc.py"}"#);
        assert_eq!(a, Action::new("read_file", json!({"path": "calc.py"})));
        let a = ok(r#"{"tool": "run_command", "args": ["git", "status"]}"#);
        assert_eq!(a.args, json!({"argv": ["git", "status"]}));
        let a = ok(r#"{"tool": "finish", "args": null}"#);
        assert_eq!(a, Action::new("finish", json!({})));
        let a = ok(r#"{"tool": "run_tests", "arguments": "{}"}"#);
        assert_eq!(a, Action::new("run_tests", json!({})));
    }

    #[test]
    fn unknown_tool_names_pass_through_for_the_loop_to_reject() {
        let a = ok(r#"{"tool": "Teleport", "args": {}}"#);
        assert_eq!(a.tool, "Teleport");
    }

    #[test]
    fn small_repairs_rescue_almost_json() {
        let a = ok("{\"tool\": \"list_files\", \"args\": {\"path\": \".\",},}");
        assert_eq!(a.tool, "list_files");
        let a = ok("{'tool': 'read_file', 'args': {'path': 'a.py'}}");
        assert_eq!(a, Action::new("read_file", json!({"path": "a.py"})));
    }

    #[test]
    fn thinking_blocks_are_skipped() {
        let a = ok("<think>maybe {\"tool\": \"finish\"}?</think>\n{\"tool\": \"run_tests\", \"args\": {}}");
        assert_eq!(a.tool, "run_tests");
        assert!(
            matches!(text("<think>still thinking about {\"tool\"..."), Err(ModelError::Parse(m)) if m.contains("only reasoning"))
        );
    }

    #[test]
    fn a_cut_off_reply_is_truncated_not_parse() {
        let raw = RawReply {
            text: "{\"tool\": \"write_file\", \"args\": {\"path\": \"a.py\", \"content\": \"def f(".into(),
            truncated: true,
            ..Default::default()
        };
        assert!(matches!(parse_reply(&raw), Err(ModelError::Truncated(_))));
        // The same text without the limit flag is a plain parse error.
        let raw = RawReply { truncated: false, ..raw };
        assert!(matches!(parse_reply(&raw), Err(ModelError::Parse(_))));
        // A complete action before the cut is still taken.
        let raw = RawReply {
            text: "{\"tool\": \"run_tests\", \"args\": {}} and then I will {\"tool\": ".into(),
            truncated: true,
            ..Default::default()
        };
        assert_eq!(parse_reply(&raw).unwrap().tool, "run_tests");
    }

    #[test]
    fn errors_say_what_was_wrong() {
        assert!(matches!(text(""), Err(ModelError::Parse(m)) if m == "the reply was empty"));
        assert!(
            matches!(text("I think the bug is in calc.py"), Err(ModelError::Parse(m)) if m.contains("no JSON action found"))
        );
        assert!(
            matches!(text(r#"{"tool": "edit_file", "args": 42}"#), Err(ModelError::Parse(m)) if m.contains("must be a JSON object"))
        );
        assert!(
            matches!(text(r#"{"tool": "read_file", "args": "{not json"}"#), Err(ModelError::Parse(m)) if m.contains("not valid JSON"))
        );
        // JSON that is not an action at all.
        assert!(matches!(text(r#"{"answer": 42}"#), Err(ModelError::Parse(m)) if m.contains("no JSON action")));
        let long = "x".repeat(5000);
        let Err(ModelError::Parse(m)) = text(&long) else { panic!() };
        assert!(m.len() < 400, "error messages quote a bounded preview");
    }

    /// Property-style: nothing a model can send panics the parser, and everything it returns
    /// is either an action with an object of arguments or an error.
    #[test]
    fn garbage_and_truncations_never_panic() {
        let seeds = [
            r#"{"tool": "edit_file", "args": {"path": "calc.py", "old": "a - b", "new": "a + b"}}"#,
            r#"```json
{"tool_calls": [{"function": {"name": "read_file", "arguments": "{\"path\": \"é\u00e9\"}"}}]}
```"#,
            "<think>{{{</think>{'tool': 'ls', 'args': {'dir': '.'},}",
            r#"[{"name": "bash", "parameters": {"command": "git log"}}, {"tool": "finish"}]"#,
            "\u{1F600}{\"tool\":\"finish\",\"args\":{\"answer\":\"\\\"}\\\\\"}}",
        ];
        let alphabet: Vec<char> = "{}[]\"'\\:,` \n\ttoolargsé\u{1F600}0123456789-.<>/think".chars().collect();
        let mut rng = fastrand::Rng::with_seed(7);
        let mut inputs: Vec<String> = Vec::new();
        for seed in seeds {
            let chars: Vec<char> = seed.chars().collect();
            for cut in 0..=chars.len() {
                inputs.push(chars[..cut].iter().collect());
                inputs.push(chars[cut..].iter().collect());
            }
            for _ in 0..300 {
                let mut c = chars.clone();
                for _ in 0..rng.usize(1..6) {
                    let i = rng.usize(0..c.len());
                    match rng.u8(0..3) {
                        0 => c[i] = alphabet[rng.usize(0..alphabet.len())],
                        1 => c.insert(i, alphabet[rng.usize(0..alphabet.len())]),
                        _ => {
                            c.remove(i);
                            if c.is_empty() {
                                break;
                            }
                        }
                    }
                }
                inputs.push(c.into_iter().collect());
            }
        }
        for _ in 0..2000 {
            let n = rng.usize(0..200);
            inputs.push((0..n).map(|_| alphabet[rng.usize(0..alphabet.len())]).collect());
        }
        inputs.push("{".repeat(100_000));
        inputs.push("[".repeat(10_000) + &"]".repeat(10_000));
        inputs.push("{\"tool\": \"finish\", \"args\": ".to_string() + &"[".repeat(5000));
        inputs.push("{\"a\":".repeat(3000) + "1" + &"}".repeat(3000));
        for input in &inputs {
            for truncated in [false, true] {
                let raw = RawReply { text: input.clone(), truncated, ..Default::default() };
                if let Ok(action) = parse_reply(&raw) {
                    assert!(action.args.is_object(), "{input:?} gave non-object args {:?}", action.args);
                    assert!(!action.tool.is_empty());
                }
                let call = RawReply {
                    tool_calls: vec![RawToolCall {
                        name: input.chars().take(20).collect(),
                        arguments: Value::String(input.clone()),
                    }],
                    truncated,
                    ..Default::default()
                };
                let _ = parse_reply(&call);
            }
        }
    }
}
