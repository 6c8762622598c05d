//! The action vocabulary shared by benchmarks, models and the agent: the tools, their
//! arguments, the [`Action`] a model sends and the typed [`Call`] the agent runs.
//!
//! This module is a leaf: it imports nothing from `agent`, `bench` or `model`. A case names
//! its allowed tools and oracle actions, a provider produces actions and describes tools to
//! the model, and the agent runs calls; with the vocabulary here, none of the three has to
//! import another to speak about tools.
//!
//! `TOOLS` is the one definition of every tool: its name, what it does, and its arguments
//! with their kinds and how the model is told about them. Everything else that names a tool
//! or an argument derives from it: [`Tool::as_str`] and [`Tool::parse`], the one-line
//! description in the model's context ([`Tool::describe`]), the JSON schema of native tool
//! calls (`model/openai.rs`), and the canonical names that the reply parser's aliases map
//! onto (`model/parse.rs`). The one place that cannot read the table is [`Call`]: serde takes
//! its wire names from the Rust field names, not from a constant, so the tests below hold
//! `Call` and `TOOLS` equal in both directions.

use std::sync::LazyLock;

use serde::de::value::MapDeserializer;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The action a model asks for: a tool name and its arguments.
///
/// Arguments stay a JSON object here; [`Call::from_action`] parses them and turns a mismatch
/// into a message the model can read, so a malformed action never crashes the loop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Action {
    pub tool: String,
    #[serde(default)]
    pub args: Value,
}

impl Action {
    pub fn new(tool: &str, args: Value) -> Self {
        Action { tool: tool.to_string(), args }
    }

    pub fn finish(answer: &str) -> Self {
        Action::new(Tool::Finish.as_str(), serde_json::json!({ "answer": answer }))
    }
}

/// The agent's tools. Their names, descriptions and arguments live in `TOOLS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tool {
    ListFiles,
    ReadFile,
    SearchCode,
    RepoMap,
    EditFile,
    WriteFile,
    RunTests,
    RunCommand,
    DelegateReadonly,
    Finish,
}

/// What kind of value an argument takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ArgKind {
    Text,
    /// An integer of at least 1 (line numbers, depths).
    Count,
    Flag,
    /// A list of strings (a program and its arguments).
    TextList,
}

/// Whether the model must give an argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// A call without it is invalid.
    Required,
    /// May be left out; a default applies. Shown to the model with a `?`.
    Optional,
    /// The model is asked for it (shown without `?`), but a call without it is still valid.
    Expected,
}

/// One argument of a tool.
#[derive(Debug)]
pub(crate) struct ArgDef {
    pub(crate) name: &'static str,
    pub(crate) kind: ArgKind,
    pub(crate) need: Need,
    /// What the one-line description says after `name:`; empty for nothing.
    pub(crate) note: &'static str,
    /// The argument's description in the JSON schema of native tool calls.
    pub(crate) about: &'static str,
}

/// One tool: the single definition the rest of the crate reads.
#[derive(Debug)]
pub(crate) struct ToolDef {
    pub(crate) tool: Tool,
    pub(crate) name: &'static str,
    /// What the tool does, after the argument list in the one-line description.
    pub(crate) summary: &'static str,
    pub(crate) args: &'static [ArgDef],
    /// True for tools that change nothing: several in one reply run concurrently (`agent::batch`).
    pub(crate) read_only: bool,
}

const fn arg(name: &'static str, kind: ArgKind, need: Need, note: &'static str, about: &'static str) -> ArgDef {
    ArgDef { name, kind, need, note, about }
}

use ArgKind::{Count, Flag, Text, TextList};
use Need::{Expected, Optional, Required};

/// Every tool, in the order the model is shown them. The texts are part of the model's
/// context and of native tool-call request bodies; changing one changes what models see
/// and invalidates cached responses.
pub(crate) const TOOLS: &[ToolDef] = &[
    ToolDef {
        tool: Tool::ListFiles,
        name: "list_files",
        summary: "list files, ignore-aware",
        args: &[
            arg("path", Text, Optional, "dir (default \".\")", "directory, default \".\""),
            arg("max_depth", Count, Optional, "int (default 4)", "default 4"),
        ],
        read_only: true,
    },
    ToolDef {
        tool: Tool::ReadFile,
        name: "read_file",
        summary: "read a file (1-based inclusive line range)",
        args: &[
            arg("path", Text, Required, "", "file path"),
            arg("start_line", Count, Optional, "", "first line, 1-based"),
            arg("end_line", Count, Optional, "", "last line, inclusive"),
        ],
        read_only: true,
    },
    ToolDef {
        tool: Tool::SearchCode,
        name: "search_code",
        summary: "search file contents",
        args: &[
            arg("pattern", Text, Required, "regex", "regular expression"),
            arg("path", Text, Optional, "dir", "directory"),
            arg("glob", Text, Optional, "e.g. \"*.py\"", "e.g. *.py"),
        ],
        read_only: true,
    },
    ToolDef {
        tool: Tool::RepoMap,
        name: "repo_map",
        summary: "files and their classes and functions, most relevant to the query first",
        args: &[
            arg("path", Text, Optional, "", "directory"),
            arg("query", Text, Optional, "", "what to rank files by, default the task"),
        ],
        read_only: true,
    },
    ToolDef {
        tool: Tool::EditFile,
        name: "edit_file",
        summary: "replace the exact text `old` (must occur exactly once) by `new`",
        args: &[
            arg("path", Text, Required, "", "file path"),
            arg("old", Text, Required, "", "exact text, must occur once"),
            arg("new", Text, Required, "", "replacement"),
        ],
        read_only: false,
    },
    ToolDef {
        tool: Tool::WriteFile,
        name: "write_file",
        summary: "create a file (overwrite only if asked)",
        args: &[
            arg("path", Text, Required, "", "file path"),
            arg("content", Text, Required, "", "the whole file"),
            arg("overwrite", Flag, Optional, "bool", "replace an existing file"),
        ],
        read_only: false,
    },
    ToolDef {
        tool: Tool::RunTests,
        name: "run_tests",
        summary: "run the task's test command",
        args: &[],
        read_only: false,
    },
    ToolDef {
        tool: Tool::RunCommand,
        name: "run_command",
        summary: "run an allowlisted program (no shell)",
        args: &[arg("argv", TextList, Required, "[program, args...]", "program and arguments")],
        read_only: false,
    },
    ToolDef {
        tool: Tool::DelegateReadonly,
        name: "delegate_readonly",
        summary: "ask a read-only helper a bounded question about the code; it lists, reads and searches, then \
                  returns its evidence (files, symbols, findings)",
        args: &[
            arg("question", Text, Required, "", "what the helper should find out"),
            arg("max_steps", Count, Optional, "int", "the helper's step budget, capped by the agent spec"),
            arg("max_tokens", Count, Optional, "int", "the helper's token budget, capped by the agent spec"),
        ],
        // Not a read in the batch's sense: it runs a model loop of its own, so it runs alone.
        read_only: false,
    },
    ToolDef {
        tool: Tool::Finish,
        name: "finish",
        summary: "stop; your work is then tested",
        args: &[arg("answer", Text, Expected, "", "what was done")],
        read_only: false,
    },
];

impl ToolDef {
    /// The argument a bare value (a string instead of an object) stands for: the only
    /// required argument, or the first one when none is required. `None` when that is
    /// ambiguous (several required arguments) or the tool takes none.
    pub(crate) fn main_arg(&self) -> Option<&'static ArgDef> {
        let mut required = self.args.iter().filter(|a| a.need == Required);
        match (required.next(), required.next()) {
            (Some(only), None) => Some(only),
            (None, _) => self.args.first(),
            (Some(_), Some(_)) => None,
        }
    }

    /// The line the model reads, e.g. `read_file {path, start_line?, end_line?} - read a file`.
    fn one_line(&self) -> String {
        let args: Vec<String> = self
            .args
            .iter()
            .map(|a| {
                let optional = if a.need == Optional { "?" } else { "" };
                let note = if a.note.is_empty() { String::new() } else { format!(": {}", a.note) };
                format!("{}{optional}{note}", a.name)
            })
            .collect();
        format!("{} {{{}}} - {}", self.name, args.join(", "), self.summary)
    }
}

/// The one-line descriptions, built once from `TOOLS` in its order.
static DESCRIPTIONS: LazyLock<Vec<String>> = LazyLock::new(|| TOOLS.iter().map(ToolDef::one_line).collect());

impl Tool {
    /// Every tool, in the order of `TOOLS`.
    pub fn all() -> impl Iterator<Item = Tool> {
        TOOLS.iter().map(|d| d.tool)
    }

    /// The tools a case allows when it names none: every tool but `delegate_readonly`, which
    /// a case opts into by naming it in `allowed_tools`. A delegation spends model tokens of
    /// its own, and offering it to every case would change what models are shown in every
    /// existing case (and invalidate their cached replies).
    pub fn defaults() -> impl Iterator<Item = Tool> {
        Tool::all().filter(|t| *t != Tool::DelegateReadonly)
    }

    fn index(self) -> usize {
        TOOLS.iter().position(|d| d.tool == self).expect("every tool has a row in TOOLS")
    }

    pub(crate) fn def(self) -> &'static ToolDef {
        &TOOLS[self.index()]
    }

    pub fn as_str(self) -> &'static str {
        self.def().name
    }

    pub fn parse(s: &str) -> Option<Tool> {
        TOOLS.iter().find(|d| d.name == s).map(|d| d.tool)
    }

    /// The tool names, comma-separated, for error messages.
    pub fn names() -> String {
        TOOLS.iter().map(|d| d.name).collect::<Vec<_>>().join(", ")
    }

    /// One line for the model: what the tool does and its arguments.
    pub fn describe(self) -> &'static str {
        &DESCRIPTIONS[self.index()]
    }

    /// True for tools that change nothing: several in one reply run concurrently (`agent::batch`).
    pub fn is_read_only(self) -> bool {
        self.def().read_only
    }

    /// Whether a call can change the workspace's files: the editing tools and the ones that run
    /// commands. A step whose calls all cannot leaves the workspace as the step before left it,
    /// so its checkpoint reuses that step's digests instead of walking the files again
    /// (`agent::checkpoint`). A delegation only lists, reads and searches; `finish` ends the loop.
    pub fn may_change_files(self) -> bool {
        match self {
            Tool::EditFile | Tool::WriteFile | Tool::RunTests | Tool::RunCommand => true,
            Tool::ListFiles
            | Tool::ReadFile
            | Tool::SearchCode
            | Tool::RepoMap
            | Tool::DelegateReadonly
            | Tool::Finish => false,
        }
    }
}

fn default_dot() -> String {
    ".".into()
}
fn default_depth() -> usize {
    4
}

/// A tool call with typed arguments. The field names are the argument names of `TOOLS`
/// (serde uses them on the wire); the defaults here are the ones the notes there announce.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "tool", content = "args", rename_all = "snake_case")]
pub enum Call {
    ListFiles {
        #[serde(default = "default_dot")]
        path: String,
        #[serde(default = "default_depth")]
        max_depth: usize,
    },
    ReadFile {
        path: String,
        #[serde(default)]
        start_line: Option<usize>,
        #[serde(default)]
        end_line: Option<usize>,
    },
    SearchCode {
        pattern: String,
        #[serde(default = "default_dot")]
        path: String,
        #[serde(default)]
        glob: Option<String>,
    },
    RepoMap {
        #[serde(default = "default_dot")]
        path: String,
        #[serde(default)]
        query: Option<String>,
    },
    EditFile {
        path: String,
        old: String,
        new: String,
    },
    WriteFile {
        path: String,
        content: String,
        #[serde(default)]
        overwrite: bool,
    },
    RunTests {},
    RunCommand {
        argv: Vec<String>,
    },
    DelegateReadonly {
        question: String,
        #[serde(default)]
        max_steps: Option<usize>,
        #[serde(default)]
        max_tokens: Option<usize>,
    },
    Finish {
        #[serde(default)]
        answer: String,
    },
}

impl Call {
    /// Parses an action into a typed call; the error says what is wrong with the arguments.
    ///
    /// The call is read straight from the action's arguments, borrowed, as the two entries
    /// `tool` then `args`: tag first, serde's adjacently tagged enum reads the arguments
    /// directly into their variant. (Building a JSON object of the two would clone the
    /// arguments, and its keys, sorted, put `args` before `tool`, which makes serde buffer a
    /// second copy until it knows the variant: most of the parse's cost, once per call.)
    pub fn from_action(action: &Action) -> Result<Call, String> {
        let tool = Tool::parse(&action.tool)
            .ok_or_else(|| format!("unknown tool `{}`; known tools: {}", action.tool, Tool::names()))?;
        let no_args = Value::Object(Map::new());
        let args = match &action.args {
            Value::Null => &no_args,
            Value::Object(_) => &action.args,
            other => return Err(format!("arguments of `{}` must be an object, got {other}", tool.as_str())),
        };
        let tag = Value::from(tool.as_str());
        let tagged = MapDeserializer::<_, serde_json::Error>::new([("tool", &tag), ("args", args)].into_iter());
        Call::deserialize(tagged).map_err(|e| format!("invalid arguments for `{}`: {e}", tool.as_str()))
    }

    pub fn tool(&self) -> Tool {
        match self {
            Call::ListFiles { .. } => Tool::ListFiles,
            Call::ReadFile { .. } => Tool::ReadFile,
            Call::SearchCode { .. } => Tool::SearchCode,
            Call::RepoMap { .. } => Tool::RepoMap,
            Call::EditFile { .. } => Tool::EditFile,
            Call::WriteFile { .. } => Tool::WriteFile,
            Call::RunTests {} => Tool::RunTests,
            Call::RunCommand { .. } => Tool::RunCommand,
            Call::DelegateReadonly { .. } => Tool::DelegateReadonly,
            Call::Finish { .. } => Tool::Finish,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::json;

    use super::*;

    /// A valid value of each kind, distinct from every default.
    fn sample(kind: ArgKind) -> Value {
        match kind {
            Text => json!("x"),
            Count => json!(7),
            Flag => json!(true),
            TextList => json!(["x", "y"]),
        }
    }

    fn full_args(def: &ToolDef) -> Map<String, Value> {
        def.args.iter().map(|a| (a.name.to_string(), sample(a.kind))).collect()
    }

    #[test]
    fn every_tool_has_exactly_one_row() {
        let rows: Vec<Tool> = Tool::all().collect();
        let unique: BTreeSet<Tool> = rows.iter().copied().collect();
        assert_eq!(rows.len(), unique.len(), "a tool appears twice in TOOLS");
        // `Call::tool` is an exhaustive match, so every variant of `Tool` is reachable from a
        // call; parsing each row's name back proves every row is reachable from its name.
        for def in TOOLS {
            assert_eq!(Tool::parse(def.name), Some(def.tool));
            assert_eq!(def.tool.def().name, def.name);
        }
        assert_eq!(rows.len(), 10);
    }

    /// Serde's names on `Call` equal the table's, both ways: a call built from the table's
    /// arguments parses into that tool, and serializes back to exactly those arguments.
    #[test]
    fn calls_and_the_table_name_the_same_arguments() {
        for def in TOOLS {
            let args = full_args(def);
            let call = Call::from_action(&Action::new(def.name, Value::Object(args.clone())))
                .unwrap_or_else(|e| panic!("{}: {e}", def.name));
            assert_eq!(call.tool(), def.tool);
            let back = serde_json::to_value(&call).unwrap();
            assert_eq!(back["tool"], def.name);
            assert_eq!(back["args"], Value::Object(args), "{}: Call fields differ from TOOLS", def.name);
        }
    }

    /// Only required arguments may be missing from a valid call, as the table says.
    #[test]
    fn the_table_says_which_arguments_may_be_left_out() {
        for def in TOOLS {
            for a in def.args {
                let mut args = full_args(def);
                args.remove(a.name);
                let parsed = Call::from_action(&Action::new(def.name, Value::Object(args)));
                match a.need {
                    Required => {
                        let e = parsed.expect_err(a.name);
                        assert!(e.contains(&format!("missing field `{}`", a.name)), "{e}");
                    }
                    Optional | Expected => assert!(parsed.is_ok(), "{}.{}: {parsed:?}", def.name, a.name),
                }
            }
        }
    }

    /// The descriptions are part of the model's context: these are the exact texts models
    /// have been shown so far.
    #[test]
    fn descriptions_read_as_before() {
        let lines: Vec<&str> = Tool::all().map(Tool::describe).collect();
        assert_eq!(
            lines,
            [
                "list_files {path?: dir (default \".\"), max_depth?: int (default 4)} - list files, ignore-aware",
                "read_file {path, start_line?, end_line?} - read a file (1-based inclusive line range)",
                "search_code {pattern: regex, path?: dir, glob?: e.g. \"*.py\"} - search file contents",
                "repo_map {path?, query?} - files and their classes and functions, most relevant to the query first",
                "edit_file {path, old, new} - replace the exact text `old` (must occur exactly once) by `new`",
                "write_file {path, content, overwrite?: bool} - create a file (overwrite only if asked)",
                "run_tests {} - run the task's test command",
                "run_command {argv: [program, args...]} - run an allowlisted program (no shell)",
                "delegate_readonly {question, max_steps?: int, max_tokens?: int} - ask a read-only helper a bounded \
                 question about the code; it lists, reads and searches, then returns its evidence (files, symbols, \
                 findings)",
                "finish {answer} - stop; your work is then tested",
            ]
        );
    }

    #[test]
    fn a_bare_value_stands_for_the_main_argument() {
        let main = |t: Tool| t.def().main_arg().map(|a| a.name);
        assert_eq!(main(Tool::ReadFile), Some("path"));
        assert_eq!(main(Tool::ListFiles), Some("path"));
        assert_eq!(main(Tool::SearchCode), Some("pattern"));
        assert_eq!(main(Tool::RunCommand), Some("argv"));
        assert_eq!(main(Tool::Finish), Some("answer"));
        assert_eq!(main(Tool::DelegateReadonly), Some("question"));
        assert_eq!(main(Tool::EditFile), None);
        assert_eq!(main(Tool::WriteFile), None);
        assert_eq!(main(Tool::RunTests), None);
    }

    /// The errors read as they did when the call was parsed from a JSON object of the tag and
    /// the arguments: the model is shown them and they are in traces.
    #[test]
    fn argument_errors_read_as_from_a_tagged_object() {
        let cases = [
            ("edit_file", json!({"path": "a.py"})),
            ("edit_file", json!({"path": 3, "old": "a", "new": "b"})),
            ("read_file", json!({"path": "a.py", "start_line": -1})),
            ("read_file", json!({"path": "a.py", "start_line": 1.5, "end_line": null})),
            ("read_file", json!({"path": "a.py", "end_line": "9"})),
            ("list_files", json!({"max_depth": [1]})),
            ("write_file", json!({"path": "a", "content": {"x": 1}, "overwrite": "yes"})),
            ("run_command", json!({"argv": "ls -l"})),
            ("run_command", json!({"argv": ["ls", 1]})),
            ("search_code", json!({"pattern": null})),
            ("finish", json!({"answer": false, "extra": 1})),
            ("run_tests", json!({"anything": 1})),
        ];
        for (tool, args) in cases {
            let tagged = json!({ "tool": tool, "args": args.clone() });
            let before =
                serde_json::from_value::<Call>(tagged).map_err(|e| format!("invalid arguments for `{tool}`: {e}"));
            assert_eq!(Call::from_action(&Action::new(tool, args)), before, "{tool}");
        }
    }

    #[test]
    fn malformed_arguments_are_reported() {
        let err = Call::from_action(&Action::new("edit_file", json!({"path": "a.py"}))).unwrap_err();
        assert!(err.contains("invalid arguments for `edit_file`"), "{err}");
        let err = Call::from_action(&Action::new("rm_rf", Value::Null)).unwrap_err();
        assert!(err.contains("unknown tool `rm_rf`; known tools: list_files, read_file,"), "{err}");
        assert_eq!(Call::from_action(&Action::new("run_tests", Value::Null)).unwrap(), Call::RunTests {});
        let err = Call::from_action(&Action::new("read_file", json!("a.py"))).unwrap_err();
        assert_eq!(err, "arguments of `read_file` must be an object, got \"a.py\"");
    }
}
