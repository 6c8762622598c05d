//! Tool hooks: commands of the agent spec (`hooks:` in `agent.yaml`) run around a tool call.
//!
//! A *pre* hook runs after the policy allowed a call and before it runs; it reads the call as
//! JSON on stdin and answers on stdout whether the call may run (`allow`), may not (`deny`,
//! with a reason the model is told) or runs with other arguments (`rewrite`). A *post* hook runs
//! after the call, reads its result, and may answer a note (`annotate`) that is appended to what
//! the model sees of the result. Several hooks of a phase run in the order the spec lists them;
//! the first `deny` ends the pre phase.
//!
//! Hooks are part of the agent spec, not of the harness: an optimization loop tunes them like a
//! prompt, so their configuration and the files they name (`{agent}/<path>` in a command) are in
//! the spec's digest, and `gate` sees a changed hook as a changed spec.
//!
//! Why it is shaped this way:
//!
//! - A hook runs in the cell's sandbox like every other command of the cell (argv, no shell,
//!   its own process group, killed at its timeout): it sees the workspace and nothing else of
//!   the machine. The files it names are laid down read-only beside hcbench's own scripts.
//! - A rewrite is not trusted: the new arguments are parsed into a typed call and pass the same
//!   policy again, so no hook can smuggle a denied call past the gate.
//! - A hook that fails (cannot start, exits non-zero, times out, prints something that is not
//!   its answer) is never a silent allow and never a crash: a failing pre hook refuses the call
//!   as a tool error naming the hook and the reason; a failing post hook is told to the model
//!   beside the result (the call itself already ran).
//! - Every hook run is one `hook_decision` event, so replay counts denials and errors exactly
//!   as the live run did.

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Value, json};

use super::policy::{self, Decision};
use super::tools::ToolOutput;
use super::{Cell, Gate, Recorder, Turn};
use crate::action::{Action, Call, Tool};
use crate::process;
use crate::sandbox::{Mount, Sandbox};
use crate::trace::event::EventBody;

/// A hook's timeout when the spec gives none.
pub const DEFAULT_TIMEOUT_S: f64 = 10.0;
/// The longest timeout a hook may have: a hook runs on every call it matches, so a longer one
/// would let one hook eat the cell's wall-clock limit.
pub const MAX_TIMEOUT_S: f64 = 120.0;
/// The shortest: below it a sandbox cannot even start.
pub const MIN_TIMEOUT_S: f64 = 0.1;
/// Hooks per phase: each runs on every call it matches.
pub const MAX_HOOKS: usize = 16;
/// What stands for the folder of the agent's files in a hook's command.
pub const AGENT_PLACEHOLDER: &str = "{agent}";
/// Bytes of the tool's output a post hook reads on stdin (`output`; `output_bytes` says all).
const OUTPUT_PREVIEW: usize = 4096;
/// Bytes of a post hook's note the model sees.
pub const ANNOTATION_LIMIT: usize = 2000;
/// Bytes of a deny reason or a hook's error the model sees.
const REASON_LIMIT: usize = 600;
/// Bound on a hook's captured output per stream.
const HOOK_OUTPUT_LIMIT: usize = 64 * 1024;

/// The hooks of an agent spec.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HookSet {
    pub pre: Vec<Hook>,
    pub post: Vec<Hook>,
    /// The agent-directory files the commands name (`{agent}/<path>`), by path: laid down for
    /// each cell, and hashed into the spec's digest.
    pub files: BTreeMap<String, String>,
}

impl HookSet {
    pub fn is_empty(&self) -> bool {
        self.pre.is_empty() && self.post.is_empty()
    }
}

/// One hook: a command, the tools it applies to, and how long it may take.
#[derive(Debug, Clone, PartialEq)]
pub struct Hook {
    pub name: String,
    /// argv; arguments that begin with `{agent}/` name files of the agent directory.
    pub command: Vec<String>,
    /// The tools it runs for; empty: every tool.
    pub tools: Vec<Tool>,
    pub timeout: Duration,
}

impl Hook {
    fn applies(&self, tool: Tool) -> bool {
        self.tools.is_empty() || self.tools.contains(&tool)
    }
}

/// `hooks:` of agent.yaml, as written.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHooks {
    #[serde(default)]
    pre: Vec<RawHook>,
    #[serde(default)]
    post: Vec<RawHook>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHook {
    name: String,
    /// Read as any YAML value, so that `[sleep, 60]` (a number) and a single string get a
    /// message of their own rather than serde's "did not match any variant".
    command: Value,
    #[serde(default)]
    tools: Vec<String>,
    timeout_s: Option<f64>,
}

/// Checks `hooks:` and reads the files its commands name (with `read`, which keeps them inside
/// the agent directory). Errors read `field `hooks.pre[0].command`: ...` with the fix.
pub(super) fn parse(raw: RawHooks, read: &dyn Fn(&str) -> Result<String, String>) -> Result<HookSet, String> {
    let mut set = HookSet::default();
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    for (phase, hooks) in [("pre", raw.pre), ("post", raw.post)] {
        if hooks.len() > MAX_HOOKS {
            return Err(format!(
                "field `hooks.{phase}`: {} hooks; at most {MAX_HOOKS} may run per call: merge some into one script",
                hooks.len()
            ));
        }
        for (i, h) in hooks.into_iter().enumerate() {
            let at = format!("hooks.{phase}[{i}]");
            let hook = check(&at, h, read, &mut set.files)?;
            if let Some(first) = names.insert(hook.name.clone(), at.clone()) {
                return Err(format!(
                    "field `{at}.name`: `{}` is already the name of `{first}`; give every hook its own name \
                     (traces and reports tell hooks apart by it)",
                    hook.name
                ));
            }
            if phase == "pre" { set.pre.push(hook) } else { set.post.push(hook) }
        }
    }
    Ok(set)
}

fn check(
    at: &str,
    h: RawHook,
    read: &dyn Fn(&str) -> Result<String, String>,
    files: &mut BTreeMap<String, String>,
) -> Result<Hook, String> {
    let name = h.name.trim();
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        return Err(format!(
            "field `{at}.name`: `{}` is not a hook name; use letters, digits, `-` and `_` (e.g. `no-secrets`)",
            h.name
        ));
    }
    let command = match h.command {
        Value::Array(words) => {
            let mut argv = Vec::with_capacity(words.len());
            for (k, w) in words.into_iter().enumerate() {
                // YAML reads `60` and `true` as a number and a boolean: as words they are text.
                argv.push(match w {
                    Value::String(s) => s,
                    Value::Number(n) => n.to_string(),
                    Value::Bool(b) => b.to_string(),
                    other => {
                        return Err(format!(
                            "field `{at}.command[{k}]`: {other} is not a word of a command; give a string"
                        ));
                    }
                });
            }
            argv
        }
        // An empty string is an empty command, said as such below.
        Value::String(line) if line.trim().is_empty() => Vec::new(),
        Value::Null => Vec::new(),
        Value::String(line) => {
            return Err(format!(
                "field `{at}.command`: `{line}` is one string; give the program and its arguments as a list, \
                 e.g. [sh, \"{AGENT_PLACEHOLDER}/hooks/guard.sh\"] (hooks run without a shell)"
            ));
        }
        other => {
            return Err(format!(
                "field `{at}.command`: {other} is not a command; give the program and its arguments as a list, \
                 e.g. [sh, \"{AGENT_PLACEHOLDER}/hooks/guard.sh\"]"
            ));
        }
    };
    if command.first().is_none_or(|p| p.trim().is_empty()) {
        return Err(format!(
            "field `{at}.command`: is empty; give the program and its arguments, \
             e.g. [sh, \"{AGENT_PLACEHOLDER}/hooks/guard.sh\"]"
        ));
    }
    for (k, arg) in command.iter().enumerate() {
        let Some(pos) = arg.find(AGENT_PLACEHOLDER) else { continue };
        let rel = arg.strip_prefix(AGENT_PLACEHOLDER).and_then(|r| r.strip_prefix('/'));
        let rel = match rel {
            Some(rel) if pos == 0 && !rel.is_empty() => rel,
            _ => {
                return Err(format!(
                    "field `{at}.command[{k}]`: `{arg}`: `{AGENT_PLACEHOLDER}` may only begin an argument that names \
                     a file of the agent directory, as in `{AGENT_PLACEHOLDER}/hooks/guard.sh`"
                ));
            }
        };
        let text = read(rel).map_err(|m| {
            format!(
                "field `{at}.command[{k}]`: {m} (an argument `{AGENT_PLACEHOLDER}/<path>` names a file of the agent \
                 directory: put the script there, or fix the path)"
            )
        })?;
        files.insert(rel.to_string(), text);
    }
    let mut tools = Vec::new();
    for (k, t) in h.tools.iter().enumerate() {
        let tool = Tool::parse(t).ok_or_else(|| {
            format!(
                "field `{at}.tools[{k}]`: `{t}` is not a tool{}; known tools: {}",
                crate::util::did_you_mean(t, Tool::all().map(Tool::as_str)),
                Tool::names()
            )
        })?;
        tools.push(tool);
    }
    let timeout_s = h.timeout_s.unwrap_or(DEFAULT_TIMEOUT_S);
    if !(MIN_TIMEOUT_S..=MAX_TIMEOUT_S).contains(&timeout_s) {
        return Err(format!(
            "field `{at}.timeout_s`: {timeout_s} is out of range; give seconds from {MIN_TIMEOUT_S} to {MAX_TIMEOUT_S} \
             (default {DEFAULT_TIMEOUT_S})"
        ));
    }
    Ok(Hook { name: name.to_string(), command, tools, timeout: Duration::from_secs_f64(timeout_s) })
}

/// Where a cell's hooks find the agent's files, laid down on the first hook run.
#[derive(Debug, Default)]
pub(super) struct Files {
    laid: OnceLock<Result<Laid, String>>,
}

#[derive(Debug)]
struct Laid {
    /// What `{agent}` stands for.
    dir: PathBuf,
    /// What a hook's command binds besides the cell's usual mounts.
    mounts: Vec<Mount>,
    /// Owns `dir` when it is not in the cell's private folder.
    _tmp: Option<crate::lock::ScratchDir>,
}

impl Files {
    /// The files, written once per cell: in a cell's sandbox into its private `bin/` folder
    /// (read-only inside, bound by every command of the cell, so the cell's one sandbox serves
    /// hooks too); otherwise into a folder of their own, bound read-only.
    fn get(&self, set: &HookSet, sandbox: &Sandbox) -> Result<&Laid, String> {
        self.laid
            .get_or_init(|| lay_down(set, sandbox).map_err(|e| format!("cannot lay down the hook files: {e}")))
            .as_ref()
            .map_err(Clone::clone)
    }
}

fn lay_down(set: &HookSet, sandbox: &Sandbox) -> io::Result<Laid> {
    let (dir, mounts, tmp) = match sandbox.cell() {
        Some(cell) => (cell.bin().join("agent"), Vec::new(), None),
        None => {
            // The files in a folder of their own: the scratch folder's lock file is not theirs.
            let tmp = crate::lock::ScratchDir::new("hcbench-hooks-")?;
            let dir = tmp.path().join("agent");
            std::fs::create_dir(&dir)?;
            let mounts = match sandbox {
                Sandbox::None => Vec::new(),
                _ => vec![Mount::read_only(&dir)],
            };
            (dir, mounts, Some(tmp))
        }
    };
    for (rel, text) in &set.files {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap_or(&dir))?;
        std::fs::write(&path, text)?;
        // Executable, so a script can be the program itself (`{agent}/hooks/guard.sh`).
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o555))?;
    }
    Ok(Laid { dir, mounts, _tmp: tmp })
}

/// What a pre hook answered.
#[derive(Debug, PartialEq)]
enum PreAnswer {
    Allow,
    Deny(String),
    Rewrite(Value),
}

const PRE_PROTOCOL: &str =
    r#"{"decision": "allow"}, {"decision": "deny", "reason": "..."} or {"decision": "rewrite", "args": {...}}"#;

/// The one JSON object a pre hook prints.
fn parse_pre(stdout: &str) -> Result<PreAnswer, String> {
    let v = answer_object(stdout, PRE_PROTOCOL)?;
    let known = |keys: &[&str]| match v.keys().find(|k| !keys.contains(&k.as_str())) {
        Some(k) => Err(format!("answered an unknown field `{k}`; a pre hook answers {PRE_PROTOCOL}")),
        None => Ok(()),
    };
    match v.get("decision").and_then(Value::as_str) {
        Some("allow") => known(&["decision"]).map(|_| PreAnswer::Allow),
        Some("deny") => {
            known(&["decision", "reason"])?;
            match v.get("reason").and_then(Value::as_str).map(str::trim) {
                Some(r) if !r.is_empty() => Ok(PreAnswer::Deny(r.to_string())),
                _ => Err("answered `deny` without a `reason`; the model is told the reason, so give one".into()),
            }
        }
        Some("rewrite") => {
            known(&["decision", "args"])?;
            match v.get("args") {
                Some(args @ Value::Object(_)) => Ok(PreAnswer::Rewrite(args.clone())),
                _ => Err("answered `rewrite` without an `args` object; give the call's new arguments".into()),
            }
        }
        Some(other) => Err(format!("answered the decision `{other}`; a pre hook answers {PRE_PROTOCOL}")),
        None => Err(format!("answered no `decision`; a pre hook answers {PRE_PROTOCOL}")),
    }
}

const POST_PROTOCOL: &str = r#"nothing, {} or {"annotate": "..."}"#;

/// What a post hook printed: nothing or `{}` (no note), or `{"annotate": "..."}`.
fn parse_post(stdout: &str) -> Result<Option<String>, String> {
    if stdout.trim().is_empty() {
        return Ok(None);
    }
    let v = answer_object(stdout, POST_PROTOCOL)?;
    if let Some(k) = v.keys().find(|k| k.as_str() != "annotate") {
        return Err(format!("answered an unknown field `{k}`; a post hook answers {POST_PROTOCOL}"));
    }
    match v.get("annotate") {
        None => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.trim().to_string())),
        Some(other) => Err(format!("answered `annotate` as {other}; give it as a string")),
    }
}

fn answer_object(stdout: &str, protocol: &str) -> Result<serde_json::Map<String, Value>, String> {
    let text = stdout.trim();
    let shown = || format!("{:?}", crate::util::truncate_str(text, 200));
    if text.is_empty() {
        return Err(format!("printed nothing; it must answer {protocol}"));
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(format!("printed {}, which is not a JSON object; it must answer {protocol}", shown())),
        Err(e) => Err(format!("printed {}, which is not JSON ({e}); it must answer {protocol}", shown())),
    }
}

/// Runs one hook with `input` on its stdin; its stdout, or why it failed.
async fn run(cell: &Cell<'_>, hook: &Hook, phase: &str, input: &Value) -> Result<String, String> {
    let spec = cell.plan.spec.as_ref();
    let laid = cell.hooks.get(&spec.hooks, cell.sandbox)?;
    let argv: Vec<String> = hook
        .command
        .iter()
        .map(|a| match a.strip_prefix(AGENT_PLACEHOLDER) {
            Some(rest) => format!("{}{rest}", laid.dir.display()),
            None => a.clone(),
        })
        .collect();
    let case = cell.plan.case.as_ref();
    let mut cmd = super::score::command_spec(case, argv, cell.ws, cell.sandbox);
    cmd.timeout = hook.timeout;
    cmd.output_limit = HOOK_OUTPUT_LIMIT;
    cmd.env = vec![("HCBENCH_HOOK".into(), hook.name.clone()), ("HCBENCH_HOOK_PHASE".into(), phase.into())];
    cmd.mounts.extend(laid.mounts.iter().cloned());
    cmd.stdin = Some(format!("{input}\n"));
    let out = process::run(&cmd).await.map_err(|e| format!("cannot start `{}`: {e}", hook.command[0]))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stderr = stderr.trim();
    let said =
        if stderr.is_empty() { String::new() } else { format!(" (stderr: {})", crate::util::cut_words(stderr, 300)) };
    if out.timed_out {
        return Err(format!(
            "did not answer within its timeout of {}s and was killed{said}",
            hook.timeout.as_secs_f64()
        ));
    }
    match out.exit_code {
        Some(0) => {}
        Some(code) => return Err(format!("exited with code {code}{said}")),
        None => return Err(format!("was killed by a signal{said}")),
    }
    if out.truncated {
        return Err(format!("printed more than {} KiB; an answer is one short JSON object", HOOK_OUTPUT_LIMIT / 1024));
    }
    String::from_utf8(out.stdout).map_err(|_| "printed bytes that are not UTF-8; an answer is one JSON object".into())
}

/// The arguments of a typed call, defaults filled in and unset options left out: what a hook
/// reads and what ran.
fn args_of(call: &Call) -> Value {
    let mut args =
        serde_json::to_value(call).ok().and_then(|mut v| v.get_mut("args").map(Value::take)).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut args {
        map.retain(|_, v| !v.is_null());
    }
    args
}

/// A batched call's input says where the call sits in its reply; a lone call's has no `batch`.
fn with_batch(input: &mut Value, batch: Option<crate::trace::event::Batch>) {
    if let Some(b) = batch {
        input["batch"] = json!(b);
    }
}

fn bounded(text: &str, limit: usize) -> String {
    crate::util::cut_words(text, limit).into_owned()
}

/// What one hook run is traced as.
struct Traced<'a> {
    hook: &'a Hook,
    phase: &'static str,
    decision: &'static str,
    reason: String,
    args: Option<Value>,
    policy_denied: Option<String>,
    started: Instant,
}

impl Turn<'_, '_> {
    fn trace_hook(&self, rec: &mut Recorder, i: usize, tool: Tool, t: Traced<'_>) -> io::Result<()> {
        rec.emit(EventBody::HookDecision {
            step: self.step,
            hook: t.hook.name.clone(),
            phase: t.phase.into(),
            tool: tool.as_str().into(),
            decision: t.decision.into(),
            reason: t.reason,
            args: t.args,
            policy_denied: t.policy_denied,
            duration_ms: t.started.elapsed().as_millis() as u64,
            batch: self.batch(i),
        })
    }

    /// Runs the pre hooks over a call the gate let through, in the spec's order: each sees the
    /// arguments as the hooks before it left them. A refusal from the gate passes unchanged.
    pub(super) async fn pre_hooks(&mut self, rec: &mut Recorder, i: usize, gate: Gate) -> io::Result<Gate> {
        let Gate::Run(mut call) = gate else { return Ok(gate) };
        let cell = self.cell;
        let (spec, case) = (cell.plan.spec.as_ref(), cell.plan.case.as_ref());
        // A rewrite changes the arguments, never the tool.
        let tool = call.tool();
        for hook in spec.hooks.pre.iter().filter(|h| h.applies(tool)) {
            let mut input = json!({
                "phase": "pre",
                "hook": hook.name,
                "tool": tool.as_str(),
                "args": args_of(&call),
                "step": self.step,
                "case": case.id,
                "workspace": cell.ws,
            });
            with_batch(&mut input, self.batch(i));
            let started = Instant::now();
            let answer = run(cell, hook, "pre", &input).await.and_then(|out| parse_pre(&out));
            let traced = |decision, reason: String| Traced {
                hook,
                phase: "pre",
                decision,
                reason,
                args: None,
                policy_denied: None,
                started,
            };
            let error = |why: &str| Gate::Refused {
                text: format!(
                    "not run: pre hook `{}` failed: {why}. The call did not run; the hook is part of the agent, not \
                     of your task: try another way.",
                    hook.name
                ),
                cause: "hook_error",
            };
            match answer {
                Ok(PreAnswer::Allow) => self.trace_hook(rec, i, tool, traced("allow", String::new()))?,
                Ok(PreAnswer::Deny(reason)) => {
                    let reason = bounded(&reason, REASON_LIMIT);
                    self.trace_hook(rec, i, tool, traced("deny", reason.clone()))?;
                    // As with the policy's denials, `no_policy_retry` leaves out the reason and the hint.
                    let text = if spec.explain_denials {
                        format!("denied by hook `{}`: {reason}. Choose an action the hook allows.", hook.name)
                    } else {
                        format!("denied by hook `{}`", hook.name)
                    };
                    return Ok(Gate::Refused { text, cause: "hook_denied" });
                }
                Ok(PreAnswer::Rewrite(args)) => {
                    // The new arguments pass the same parser and the same policy as the model's.
                    match Call::from_action(&Action::new(tool.as_str(), args.clone())) {
                        Err(m) => {
                            let why = format!("it rewrote the arguments into an invalid call: {m}");
                            self.trace_hook(rec, i, tool, traced("error", why.clone()))?;
                            return Ok(error(&why));
                        }
                        Ok(rewritten) => match policy::decide(&rewritten, case, cell.ws) {
                            Decision::Allow => {
                                self.trace_hook(
                                    rec,
                                    i,
                                    tool,
                                    Traced { args: Some(args), ..traced("rewrite", String::new()) },
                                )?;
                                call = rewritten;
                            }
                            Decision::Deny(reason) => {
                                let t = Traced {
                                    args: Some(args.clone()),
                                    policy_denied: Some(reason.clone()),
                                    ..traced("rewrite", String::new())
                                };
                                self.trace_hook(rec, i, tool, t)?;
                                let text = format!(
                                    "denied by policy: hook `{}` rewrote the arguments to {args}, and {reason}. \
                                     Choose an action the policy allows.",
                                    hook.name
                                );
                                return Ok(Gate::Refused { text, cause: "denied" });
                            }
                        },
                    }
                }
                Err(why) => {
                    let why = bounded(&why, REASON_LIMIT);
                    self.trace_hook(rec, i, tool, traced("error", why.clone()))?;
                    return Ok(error(&why));
                }
            }
        }
        Ok(Gate::Run(call))
    }

    /// Runs the post hooks over the result of a call that ran; returns what is appended to the
    /// result the model sees: that the arguments were rewritten, the hooks' notes, and any hook
    /// that failed. Empty when there is nothing to add.
    pub(super) async fn post_hooks(
        &mut self,
        rec: &mut Recorder,
        i: usize,
        action: &Action,
        call: &Call,
        out: &ToolOutput,
    ) -> io::Result<String> {
        let cell = self.cell;
        let (spec, case) = (cell.plan.spec.as_ref(), cell.plan.case.as_ref());
        let mut note = String::new();
        let rewritten = spec.hooks.pre.iter().any(|h| h.applies(call.tool()))
            && Call::from_action(action).is_ok_and(|asked| &asked != call);
        if !rewritten && !spec.hooks.post.iter().any(|h| h.applies(call.tool())) {
            // Nothing here reads the arguments (most specs have no hooks): their JSON is not built.
            return Ok(note);
        }
        let args = args_of(call);
        if rewritten {
            note.push_str(&format!("\n[a pre hook rewrote the arguments; the call ran with {args}]"));
        }
        for hook in spec.hooks.post.iter().filter(|h| h.applies(call.tool())) {
            let mut input = json!({
                "phase": "post",
                "hook": hook.name,
                "tool": call.tool().as_str(),
                "args": args,
                "ok": out.ok,
                "output": crate::util::truncate_str(&out.text, OUTPUT_PREVIEW),
                "output_bytes": out.text.len(),
                "modified": out.modified,
                "step": self.step,
                "case": case.id,
                "workspace": cell.ws,
            });
            with_batch(&mut input, self.batch(i));
            let started = Instant::now();
            let answer = run(cell, hook, "post", &input).await.and_then(|o| parse_post(&o));
            let (decision, reason) = match answer {
                Ok(None) => ("allow", String::new()),
                Ok(Some(text)) => {
                    let text = bounded(&text, ANNOTATION_LIMIT);
                    note.push_str(&format!("\n[hook `{}`: {text}]", hook.name));
                    ("annotate", text)
                }
                Err(why) => {
                    let why = bounded(&why, REASON_LIMIT);
                    note.push_str(&format!("\n[post hook `{}` failed: {why}; the call itself ran]", hook.name));
                    ("error", why)
                }
            };
            let t = Traced { hook, phase: "post", decision, reason, args: None, policy_denied: None, started };
            self.trace_hook(rec, i, call.tool(), t)?;
        }
        Ok(note)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_yaml(yaml: &str, files: &[(&str, &str)]) -> Result<HookSet, String> {
        let raw: RawHooks = serde_saphyr::from_str(yaml).map_err(|e| e.to_string())?;
        let files: BTreeMap<String, String> = files.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        parse(raw, &|name| files.get(name).cloned().ok_or_else(|| format!("cannot read {name}: no such file")))
    }

    #[test]
    fn a_valid_config_reads_hooks_filters_timeouts_and_files() {
        let set = parse_yaml(
            "pre:\n  - {name: guard, command: [sh, '{agent}/hooks/guard.sh'], tools: [read_file, run_command], timeout_s: 2}\npost:\n  - {name: lint, command: [python3, '-c', 'print(1)']}\n",
            &[("hooks/guard.sh", "echo '{\"decision\":\"allow\"}'\n")],
        )
        .unwrap();
        assert_eq!(set.pre[0].tools, [Tool::ReadFile, Tool::RunCommand]);
        assert_eq!(set.pre[0].timeout, Duration::from_secs(2));
        assert_eq!(set.post[0].timeout, Duration::from_secs_f64(DEFAULT_TIMEOUT_S));
        assert!(set.post[0].applies(Tool::EditFile) && !set.pre[0].applies(Tool::EditFile));
        assert_eq!(set.files.keys().collect::<Vec<_>>(), ["hooks/guard.sh"]);
        let set =
            parse_yaml("pre:\n  - {name: s, command: [sleep, 60]}\n  - {name: t, command: [true]}\n", &[]).unwrap();
        assert_eq!(
            (set.pre[0].command.clone(), set.pre[1].command.clone()),
            (vec!["sleep".to_string(), "60".into()], vec!["true".to_string()])
        );
    }

    #[test]
    fn bad_configs_name_the_field_and_the_fix() {
        let cases = [
            ("pre:\n  - {name: a, command: []}\n", "field `hooks.pre[0].command`: is empty"),
            ("pre:\n  - {name: a, command: ''}\n", "field `hooks.pre[0].command`: is empty"),
            ("pre:\n  - {name: a, command: 'sh x.sh'}\n", "give the program and its arguments as a list"),
            (
                "pre:\n  - {name: a, command: {sh: x}}\n",
                "field `hooks.pre[0].command`: {\"sh\":\"x\"} is not a command",
            ),
            ("pre:\n  - {name: a, command: [sh, [x]]}\n", "field `hooks.pre[0].command[1]`: [\"x\"] is not a word"),
            (
                "post:\n  - {name: a, command: [sh], timeout_s: 0}\n",
                "field `hooks.post[0].timeout_s`: 0 is out of range",
            ),
            ("post:\n  - {name: a, command: [sh], timeout_s: 999}\n", "from 0.1 to 120"),
            (
                "pre:\n  - {name: a, command: [sh], tools: [read_fiel]}\n",
                "`read_fiel` is not a tool; did you mean `read_file`?",
            ),
            (
                "pre:\n  - {name: a, command: [sh]}\npost:\n  - {name: a, command: [sh]}\n",
                "`a` is already the name of `hooks.pre[0]`",
            ),
            ("pre:\n  - {name: 'a b', command: [sh]}\n", "field `hooks.pre[0].name`"),
            ("pre:\n  - {name: a, command: [sh, 'x{agent}/y']}\n", "field `hooks.pre[0].command[1]`"),
            ("pre:\n  - {name: a, command: [sh, '{agent}/missing.sh']}\n", "cannot read missing.sh"),
        ];
        for (yaml, needle) in cases {
            let e = parse_yaml(yaml, &[]).unwrap_err();
            assert!(e.contains(needle), "{yaml}: {e}");
        }
        let many: String = (0..=MAX_HOOKS).map(|i| format!("  - {{name: h{i}, command: [sh]}}\n")).collect();
        let e = parse_yaml(&format!("post:\n{many}"), &[]).unwrap_err();
        assert!(e.contains("field `hooks.post`: 17 hooks; at most 16"), "{e}");
        let e = parse_yaml("pre:\n  - {name: a, comand: [sh]}\n", &[]).unwrap_err();
        assert!(e.contains("comand"), "{e}");
    }

    #[test]
    fn hooks_and_the_files_they_name_are_in_the_spec_digest() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("s.md"), "s").unwrap();
        std::fs::write(d.join("f.md"), "f").unwrap();
        std::fs::create_dir(d.join("hooks")).unwrap();
        std::fs::write(d.join("hooks/g.sh"), "echo '{\"decision\":\"allow\"}'\n").unwrap();
        let base = "system_prompt_file: s.md\naction_format_file: f.md\n";
        std::fs::write(d.join("agent.yaml"), base).unwrap();
        let without = crate::agent::spec::AgentSpec::load(d).unwrap();
        assert!(without.hooks.is_empty());
        std::fs::write(
            d.join("agent.yaml"),
            format!("{base}hooks:\n  pre: [{{name: g, command: [sh, '{{agent}}/hooks/g.sh']}}]\n"),
        )
        .unwrap();
        let with = crate::agent::spec::AgentSpec::load(d).unwrap();
        assert_eq!(with.hooks.pre.len(), 1);
        assert_ne!(with.digest, without.digest, "adding a hook changes the spec");
        std::fs::write(d.join("hooks/g.sh"), "echo '{\"decision\":\"deny\",\"reason\":\"no\"}'\n").unwrap();
        let edited = crate::agent::spec::AgentSpec::load(d).unwrap();
        assert_ne!(edited.digest, with.digest, "editing a hook's script changes the spec");
        std::fs::write(
            d.join("agent.yaml"),
            format!("{base}hooks:\n  pre: [{{name: g, command: [sh, '{{agent}}/../g.sh']}}]\n"),
        )
        .unwrap();
        let e = crate::agent::spec::AgentSpec::load(d).unwrap_err().to_string();
        assert!(
            e.contains("agent.yaml")
                && e.contains("hooks.pre[0].command[1]")
                && e.contains("leaves the agent directory"),
            "{e}"
        );
    }

    #[test]
    fn pre_answers_parse_strictly() {
        assert_eq!(parse_pre("{\"decision\":\"allow\"}\n"), Ok(PreAnswer::Allow));
        assert_eq!(parse_pre(r#"{"decision":"deny","reason":" no "}"#), Ok(PreAnswer::Deny("no".into())));
        assert_eq!(
            parse_pre(r#"{"decision":"rewrite","args":{"path":"a.py"}}"#),
            Ok(PreAnswer::Rewrite(json!({"path": "a.py"})))
        );
        for (out, needle) in [
            ("", "printed nothing"),
            ("hello", "is not JSON"),
            ("[1]", "not a JSON object"),
            (r#"{"decision":"maybe"}"#, "the decision `maybe`"),
            (r#"{"decision":"deny"}"#, "without a `reason`"),
            (r#"{"decision":"rewrite","args":[1]}"#, "without an `args` object"),
            (r#"{"decision":"allow","extra":1}"#, "unknown field `extra`"),
            (r#"{"ok":true}"#, "no `decision`"),
        ] {
            let e = parse_pre(out).unwrap_err();
            assert!(e.contains(needle), "{out}: {e}");
        }
    }

    #[test]
    fn post_answers_may_be_empty_or_a_note() {
        assert_eq!(parse_post(""), Ok(None));
        assert_eq!(parse_post("{}"), Ok(None));
        assert_eq!(parse_post(r#"{"annotate":"lint: 2 warnings"}"#), Ok(Some("lint: 2 warnings".into())));
        assert!(parse_post(r#"{"annotate":3}"#).unwrap_err().contains("as a string"));
        assert!(parse_post("garbage").unwrap_err().contains("not JSON"));
        assert!(parse_post(r#"{"decision":"allow"}"#).unwrap_err().contains("unknown field `decision`"));
    }

    #[test]
    fn a_call_s_arguments_come_with_their_defaults() {
        let call = Call::from_action(&Action::new("list_files", json!({}))).unwrap();
        assert_eq!(args_of(&call), json!({"path": ".", "max_depth": 4}));
        let call = Call::from_action(&Action::new("read_file", json!({"path": "a.py"}))).unwrap();
        assert_eq!(args_of(&call), json!({"path": "a.py"}), "unset options are left out");
    }
}
