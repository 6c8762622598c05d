//! The fuzz targets: one per parser of outside input, each fed exactly as hcbench feeds it.
//!
//! A target turns one input into a call of the real entry point and returns a signature of
//! what happened (which action, or which kind of error). The harness keeps an input whose
//! signature it has not seen before as a new corpus entry: without coverage instrumentation,
//! a new kind of outcome is the cheapest sign that an input reached new code.
//!
//! Loaders that read files (traces, benchmarks, suites, models.toml, experiment_config.yaml,
//! scripts) get their input written into a private temporary project root first, on tmpfs
//! when there is one; everything else they need there is a valid copy of the repository's own
//! files, so a mutated file is judged in a project that would otherwise load.

use std::fs;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use arbitrary::{Result, Unstructured};

use crate::structured::{self, Gen, Node};

/// The targets, by name, in the order `all` runs them.
pub const NAMES: &[&str] = &["reply", "trace", "bench", "models", "config", "script"];

pub trait Target {
    fn name(&self) -> &'static str;
    /// Inputs longer than this are cut: the formats' real files are far smaller.
    fn max_len(&self) -> usize {
        64 * 1024
    }
    /// Seed inputs: real files of the repository and the committed corpus.
    fn seeds(&self) -> Vec<Vec<u8>>;
    /// Tokens of the format beyond what the seeds show.
    fn dict(&self) -> Vec<String>;
    /// A structured input drawn from `u`.
    fn structured(&self, u: &mut Unstructured, g: &Gen) -> Result<Vec<u8>>;
    /// Runs one input through the parser; returns a signature of the outcome.
    fn run(&mut self, data: &[u8]) -> u64;
}

/// The target called `name`; `repo` is the hcbench checkout its seeds and fixtures come from.
pub fn by_name(name: &str, repo: &Path) -> std::io::Result<Option<Box<dyn Target>>> {
    Ok(Some(match name {
        "reply" => Box::new(Reply { repo: repo.to_path_buf() }),
        "trace" => Box::new(Trace::new(repo)?),
        "bench" => Box::new(Bench::new(repo)?),
        "models" => Box::new(Models::new(repo)?),
        "config" => Box::new(Config::new(repo)?),
        "script" => Box::new(Script::new(repo)?),
        _ => return Ok(None),
    }))
}

/// A signature of a result: `Ok` with a label, or the shape of the error message (its words
/// without what it quotes, so the same error about different values counts once).
fn signature<T: AsRef<str>>(tag: u8, result: std::result::Result<T, String>) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    tag.hash(&mut h);
    match result {
        Ok(label) => {
            true.hash(&mut h);
            label.as_ref().hash(&mut h);
        }
        Err(message) => {
            false.hash(&mut h);
            shape(&message).hash(&mut h);
        }
    }
    h.finish()
}

/// The letters of `message` outside quotes, backticks and paths (words with a `/`), about 32
/// of them, from its first line: enough to tell kinds of error apart, too few to tell apart
/// the previews of the input some messages quote.
fn shape(message: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    let first_line = message.lines().next().unwrap_or("");
    for word in first_line.split(' ').filter(|w| !w.contains('/')) {
        for c in word.chars() {
            match c {
                '`' | '"' => quoted = !quoted,
                c if !quoted && c.is_ascii_alphabetic() => out.push(c),
                _ => {}
            }
        }
        out.push(' ');
        if out.len() >= 32 {
            break;
        }
    }
    out
}

/// Every file under `dir` (not recursive) whose name ends in one of `exts`, sorted.
fn files(dir: &Path, exts: &[&str]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> =
        fs::read_dir(dir).map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect()).unwrap_or_default();
    out.retain(|p| p.is_file() && exts.iter().any(|x| p.to_string_lossy().ends_with(x)));
    out.sort();
    out
}

fn read_all(paths: &[PathBuf]) -> Vec<Vec<u8>> {
    paths.iter().filter_map(|p| fs::read(p).ok()).collect()
}

fn with_prefix(prefix: u8, inputs: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    inputs
        .into_iter()
        .map(|mut v| {
            v.insert(0, prefix);
            v
        })
        .collect()
}

fn words(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// A private project root for the loaders, on tmpfs when there is one.
fn scratch_root() -> std::io::Result<tempfile::TempDir> {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() { tempfile::Builder::new().prefix("hcbench-fuzz").tempdir_in(shm) } else { tempfile::tempdir() }
}

/// Copies the directory tree `from` to `to`.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

fn block_yaml(entries: Vec<(String, Node)>) -> Vec<u8> {
    let mut out = String::new();
    structured::yaml(&Node::Map(entries), 0, &mut out);
    out.into_bytes()
}

/// YAML in block or flow style, as the generator's first byte says.
fn some_yaml(u: &mut Unstructured, entries: Vec<(String, Node)>) -> Result<Vec<u8>> {
    if u.ratio(3, 4)? {
        return Ok(block_yaml(entries));
    }
    let mut out = String::new();
    structured::json(&Node::Map(entries), &mut out);
    Ok(out.into_bytes())
}

const TOOLS: &[&str] = &[
    "list_files",
    "read_file",
    "search_code",
    "repo_map",
    "edit_file",
    "write_file",
    "run_tests",
    "run_command",
    "finish",
];

/// An action as models and oracle files write it: a tool name and arguments.
fn action_node(u: &mut Unstructured, g: &Gen) -> Result<Node> {
    let tool = if u.ratio(3, 4)? { u.choose(TOOLS)?.to_string() } else { g.key(u)? };
    let mut entries = vec![(if u.ratio(3, 4)? { "tool".into() } else { g.key(u)? }, Node::Str(tool))];
    let args = Node::Map(g.map(u, 2, 4)?);
    if u.ratio(3, 4)? {
        entries.push(("args".into(), args));
    } else if let Node::Map(flat) = args {
        entries.extend(flat);
    }
    entries.extend(g.map(u, 3, 1)?);
    Ok(Node::Map(entries))
}

// ----------------------------------------------------------------------------------------
// reply: what a model sent, as text or as a provider's response body.

/// First byte: 0 = the reply text (`parse_calls` on text), 1 = a Chat Completions body,
/// 2 = a Responses API body (both through `interpret` then `parse_calls`). Every action found
/// is then checked against the tool table (`Call::from_action`), as the agent loop does; the
/// list of actions is never empty (an invariant: a finding if broken).
struct Reply {
    repo: PathBuf,
}

impl Target for Reply {
    fn name(&self) -> &'static str {
        "reply"
    }

    fn max_len(&self) -> usize {
        // Past the parser's own scan limit (256 KiB), so the limit itself is exercised.
        300 * 1024
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        read_all(&files(&self.repo.join("fuzz/corpus/reply"), &[""]))
    }

    fn dict(&self) -> Vec<String> {
        let mut d = words(&[
            "```json\n",
            "```\n",
            "<think>",
            "</think>",
            "{\"tool\": \"",
            "\"args\": {",
            "\"arguments\": \"{\\\"",
            "tool_calls",
            "function_call",
            "finish_reason",
            "\"length\"",
            "choices",
            "message",
            "content",
            "output",
            "output_text",
            "status",
            "incomplete",
            "failed",
            "error",
            "usage",
            "functions.",
            "path",
            "start_line",
            "end_line",
            "max_depth",
            "argv",
            "old",
            "new",
            "content",
            "answer",
            "\"3\"",
            "null",
        ]);
        d.extend(words(TOOLS));
        d
    }

    fn structured(&self, u: &mut Unstructured, g: &Gen) -> Result<Vec<u8>> {
        let action = action_node(u, g)?;
        let mut action_json = String::new();
        structured::json(&action, &mut action_json);
        let mode: u8 = u.int_in_range(0..=2)?;
        let body = match mode {
            0 => {
                // Text: the JSON alone, fenced, or inside prose and thinking.
                let prose = g.string(u)?;
                match u.int_in_range(0..=3)? {
                    0 => action_json,
                    1 => format!("{prose}\n```json\n{action_json}\n```\n"),
                    2 => format!("<think>{prose}</think>{action_json}"),
                    _ => format!("{prose} {action_json} {}", g.string(u)?),
                }
            }
            1 => {
                let mut args = String::new();
                structured::json(&Node::Map(g.map(u, 2, 4)?), &mut args);
                let tool = u.choose(TOOLS)?;
                let finish = u.choose(&["stop", "length", "tool_calls"])?;
                serde_json::json!({"choices": [{"finish_reason": finish, "message": {"role": "assistant",
                    "content": action_json, "tool_calls": [{"type": "function", "function": {"name": tool, "arguments": args}}]}}],
                    "usage": {"prompt_tokens": g.int(u)?, "completion_tokens": g.int(u)?}})
                .to_string()
            }
            _ => {
                let tool = u.choose(TOOLS)?;
                let status = u.choose(&["completed", "incomplete", "failed"])?;
                serde_json::json!({"status": status, "output": [{"type": "function_call", "name": tool, "arguments": action_json},
                    {"type": "message", "content": [{"type": "output_text", "text": action_json}]}],
                    "usage": {"input_tokens": g.int(u)?, "output_tokens": g.int(u)?}})
                .to_string()
            }
        };
        let mut out = vec![mode];
        out.extend_from_slice(body.as_bytes());
        Ok(out)
    }

    fn run(&mut self, data: &[u8]) -> u64 {
        let Some((&mode, rest)) = data.split_first() else { return 0 };
        let mode = mode % 4;
        let result = match mode {
            0 | 3 => hcbench::fuzzing::reply_text(&String::from_utf8_lossy(rest), mode == 3),
            1 => hcbench::fuzzing::response_body(false, rest),
            _ => hcbench::fuzzing::response_body(true, rest),
        };
        // Every call of a batch is checked against the tool table, as the loop checks each; the
        // signature keeps the tools in order, so a change in how many calls parse is new coverage.
        let checked = result.map(|actions| {
            if actions.is_empty() {
                panic!("parse_calls returned no action and no error");
            }
            let tools: Vec<String> = actions
                .iter()
                .map(|a| hcbench::action::Call::from_action(a).map_or_else(|e| e, |c| c.tool().as_str().to_string()))
                .collect();
            tools.join(",")
        });
        signature(mode, checked)
    }
}

// ----------------------------------------------------------------------------------------
// trace: a trace.jsonl file, read by the full reader and by replay.

/// The input is a whole trace file. It goes through `read_trace` (the full reader) and
/// `replay_trace` (the streaming lean parser replay uses). Beyond not crashing, the two must
/// agree: when both read the file, the summary of the full events equals replay's.
struct Trace {
    repo: PathBuf,
    _root: tempfile::TempDir,
    file: PathBuf,
}

impl Trace {
    fn new(repo: &Path) -> std::io::Result<Trace> {
        let root = scratch_root()?;
        let file = root.path().join("trace.jsonl");
        Ok(Trace { repo: repo.to_path_buf(), _root: root, file })
    }
}

const EVENT_KINDS: &[&str] = &[
    "run_started",
    "model_action",
    "model_retry",
    "model_error",
    "policy_decision",
    "policy_retry",
    "tool_result",
    "test_result",
    "verifier_result",
    "run_finished",
    "context_packed",
    "context_compacted",
    "repo_map_built",
    "repo_map_used",
    "memory_updated",
    "state_updated",
];

impl Target for Trace {
    fn name(&self) -> &'static str {
        "trace"
    }

    fn max_len(&self) -> usize {
        32 * 1024
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        read_all(&files(&self.repo.join("fuzz/corpus/trace"), &[".jsonl"]))
    }

    fn dict(&self) -> Vec<String> {
        let mut d =
            words(&["\"schema_version\":", "\"seq\":", "\"kind\":\"", "\"data\":{", "\"run_id\":\"", "\n", "\r\n"]);
        d.extend(EVENT_KINDS.iter().map(|k| format!("\"{k}\"")));
        d
    }

    fn structured(&self, u: &mut Unstructured, g: &Gen) -> Result<Vec<u8>> {
        let run_id = if u.ratio(7, 8)? { "r1".to_string() } else { g.string(u)? };
        let n = u.int_in_range(1..=10)?;
        let mut out = String::new();
        for seq in 0..n {
            let kind =
                if seq == 0 && u.ratio(3, 4)? { "run_started".into() } else { u.choose(EVENT_KINDS)?.to_string() };
            let kind = if u.ratio(15, 16)? { kind } else { g.string(u)? };
            let version = if u.ratio(7, 8)? { Node::Int(2) } else { Node::Int(g.int(u)?) };
            let seq = if u.ratio(7, 8)? { Node::Int(seq) } else { Node::Int(g.int(u)?) };
            let mut envelope = vec![
                ("schema_version".to_string(), version),
                ("run_id".into(), Node::Str(run_id.clone())),
                ("cell_id".into(), Node::Str("c1".into())),
                ("seq".into(), seq),
                ("ts".into(), Node::Str("2026-01-01T00:00:00.000Z".into())),
                ("kind".into(), Node::Str(kind)),
                ("data".into(), Node::Map(g.map(u, 1, 8)?)),
            ];
            if u.ratio(1, 8)? {
                let i = u.choose_index(envelope.len())?;
                envelope.remove(i);
            }
            if u.ratio(1, 8)? {
                envelope.reverse();
            }
            structured::json(&Node::Map(envelope), &mut out);
            out.push('\n');
        }
        if u.ratio(1, 4)? {
            let cut = u.choose_index(out.len())?;
            let cut = (0..=cut).rev().find(|&i| out.is_char_boundary(i)).unwrap_or(0);
            out.truncate(cut);
        }
        Ok(out.into_bytes())
    }

    fn run(&mut self, data: &[u8]) -> u64 {
        fs::write(&self.file, data).expect("the scratch trace can be written");
        let full = hcbench::trace::read_trace(&self.file).map_err(|e| e.to_string());
        let replayed = hcbench::replay::replay_trace(&self.file).map_err(|e| e.to_string());
        match (&full, &replayed) {
            // A trace the full reader reads whole, replay reads to the same summary (or, with
            // no run_started to summarize, refuses as empty).
            (Ok(read), replayed) if !read.stats.truncated => match hcbench::replay::summarize(&read.events) {
                None => assert!(
                    replayed.as_ref().is_err_and(|e| e.ends_with("holds no events")),
                    "no summary from the full events, but replay: {replayed:?}"
                ),
                Some(mut from_events) => {
                    let summary = replayed.as_ref().expect("replay fails on a trace the full reader reads whole");
                    from_events.skipped_events = read.stats.skipped.clone().into();
                    let (a, b) = (format!("{from_events:?}"), format!("{summary:?}"));
                    assert!(a == b, "replay and the full reader disagree:\nfull:   {a}\nreplay: {b}");
                }
            },
            // Replay parses only the fields summaries need, so it may accept a payload the full
            // reader rejects (by design), here the cut last line, and then see what is in it:
            // its version, or its place in the sequence (every complete line passed the full
            // reader's sequence check, so only the cut line can break it).
            (Ok(_), Err(e)) => assert!(
                e.contains("newer than this hcbench reads")
                    || e.ends_with("holds no events")
                    || e.contains("breaks the event sequence"),
                "replay fails on a trace the full reader reads: {e}"
            ),
            _ => {}
        }
        // A complete line that is not UTF-8 is not JSON: corruption for both readers.
        let complete = &data[..data.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1)];
        if std::str::from_utf8(complete).is_err() {
            assert!(full.is_err() && replayed.is_err(), "a line that is not UTF-8 was read: {full:?} {replayed:?}");
        }
        let label = match (&full, &replayed) {
            (Ok(read), Ok(s)) => Ok(format!("{} {:?} {}", read.events.len().min(3), s.outcome, s.truncated)),
            (Ok(_), Err(e)) => Err(format!("replay only: {e}")),
            (Err(e), Ok(_)) => Err(format!("full only: {e}")),
            (Err(e), Err(_)) => Err(e.clone()),
        };
        signature(0, label)
    }
}

// ----------------------------------------------------------------------------------------
// bench: benchmark.yaml, a case file, an oracle file, a suite file.

/// First byte (mod 4) picks the file the rest replaces in a copy of a real benchmark:
/// 0 = `benchmark.yaml`, 1 = the case `cases/bugfix-1.yaml`, 2 = its oracle, 3 = a suite.
/// Then `load_benchmark`, and when it loads, `select_suite` of suite `fuzz`.
struct Bench {
    repo: PathBuf,
    root: tempfile::TempDir,
    originals: [Vec<u8>; 4],
    paths: [PathBuf; 4],
    current: usize,
}

const BENCH: &str = "hc-bench";
const CASE: &str = "bugfix-1";

impl Bench {
    fn new(repo: &Path) -> std::io::Result<Bench> {
        let root = scratch_root()?;
        let src = repo.join("benchmarks").join(BENCH);
        let dst = root.path().join("benchmarks").join(BENCH);
        fs::create_dir_all(dst.join("cases"))?;
        fs::create_dir_all(dst.join("oracle"))?;
        fs::create_dir_all(root.path().join("suites").join(BENCH))?;
        copy_tree(&repo.join("fixtures").join(CASE), &root.path().join("fixtures").join(CASE))?;
        copy_tree(&src.join("verifiers").join(CASE), &dst.join("verifiers").join(CASE))?;
        let paths = [
            dst.join("benchmark.yaml"),
            dst.join("cases").join(format!("{CASE}.yaml")),
            dst.join("oracle").join(format!("{CASE}.yaml")),
            root.path().join("suites").join(BENCH).join("fuzz.yaml"),
        ];
        let originals = [
            fs::read(src.join("benchmark.yaml"))?,
            fs::read(src.join("cases").join(format!("{CASE}.yaml")))?,
            fs::read(src.join("oracle").join(format!("{CASE}.yaml")))?,
            fs::read(repo.join("suites").join(BENCH).join("smoke.yaml"))?,
        ];
        for (p, o) in paths.iter().zip(&originals) {
            fs::write(p, o)?;
        }
        Ok(Bench { repo: repo.to_path_buf(), root, originals, paths, current: 0 })
    }
}

impl Target for Bench {
    fn name(&self) -> &'static str {
        "bench"
    }

    fn max_len(&self) -> usize {
        // Real case files are 1 to 2 KiB; each execution loads four YAML files and stats the
        // fixture, so longer inputs only cost time.
        4 * 1024
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        let mut seeds = Vec::new();
        let mut dirs: Vec<PathBuf> = fs::read_dir(self.repo.join("benchmarks"))
            .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_dir()).collect())
            .unwrap_or_default();
        dirs.sort();
        for dir in dirs {
            seeds.extend(with_prefix(0, read_all(&[dir.join("benchmark.yaml")])));
            seeds.extend(with_prefix(1, read_all(&files(&dir.join("cases"), &[".yaml", ".yml"]))));
            seeds.extend(with_prefix(2, read_all(&files(&dir.join("oracle"), &[".yaml", ".yml"]))));
        }
        seeds.extend(with_prefix(3, read_all(&files(&self.repo.join("suites").join(BENCH), &[".yaml", ".yml"]))));
        seeds
    }

    fn dict(&self) -> Vec<String> {
        let mut d = words(&[
            "id: ",
            "category: ",
            "split: ",
            "fixture: ",
            "prompt: |\n  ",
            "step_budget: ",
            "timeout_s: ",
            "cell_timeout_s: ",
            "tests:\n  ",
            "runner: ",
            "unittest",
            "command",
            "start_dir: ",
            "fail_to_pass:\n    - ",
            "pass_to_pass:\n    - ",
            "test_command: ",
            "verifier:\n  ",
            "unchanged: ",
            "first_read: ",
            "allowed_tools: ",
            "allowed_programs: ",
            "limits:\n  ",
            "memory_mb: ",
            "processes: ",
            "defaults:\n  ",
            "actions:\n  - tool: ",
            "args: {",
            "cases: [",
            "splits: [",
            "categories: [",
            "train",
            "test",
            "heldout",
            "bugfix",
            "policy",
            "&a ",
            "*a",
            "<<: *a",
            "!!str ",
            "!!binary ",
            "---\n",
            "...\n",
            "? ",
            "|-\n",
            ">\n",
        ]);
        d.extend(words(TOOLS));
        d
    }

    fn structured(&self, u: &mut Unstructured, g: &Gen) -> Result<Vec<u8>> {
        let which: u8 = u.int_in_range(0..=3)?;
        let entries = match which {
            2 => {
                let n = u.int_in_range(0..=6)?;
                let actions = (0..n).map(|_| action_node(u, g)).collect::<Result<Vec<_>>>()?;
                let mut e = vec![("actions".to_string(), Node::Seq(actions))];
                e.extend(g.map(u, 1, 1)?);
                e
            }
            _ => g.map(u, 0, 12)?,
        };
        let mut out = vec![which];
        out.extend(some_yaml(u, entries)?);
        Ok(out)
    }

    fn run(&mut self, data: &[u8]) -> u64 {
        let Some((&which, rest)) = data.split_first() else { return 0 };
        let which = usize::from(which % 4);
        if which != self.current {
            fs::write(&self.paths[self.current], &self.originals[self.current]).expect("scratch file written");
            self.current = which;
        }
        fs::write(&self.paths[which], rest).expect("scratch file written");
        let root = self.root.path();
        let result = match hcbench::bench::load_benchmark(root, BENCH) {
            Err(e) => Err(e.to_string()),
            Ok(bench) => hcbench::bench::suite::select_suite(root, "fuzz", &bench)
                .map(|ids| format!("{} case(s)", ids.len().min(2)))
                .map_err(|e| e.to_string()),
        };
        signature(which as u8, result)
    }
}

// ----------------------------------------------------------------------------------------
// models: models.toml.

/// The input is a models file: `Profiles::load` (which checks every profile), then every
/// table name it holds is resolved as a profile, as `--profiles` would.
struct Models {
    repo: PathBuf,
    root: tempfile::TempDir,
    file: PathBuf,
    env: hcbench::environment::Environment,
}

impl Models {
    fn new(repo: &Path) -> std::io::Result<Models> {
        let root = scratch_root()?;
        let file = root.path().join("models.toml");
        let vars = ["OPENAI_API_KEY", "DEEPSEEK_API_KEY", "ANTHROPIC_API_KEY", "API_KEY", "KEY"]
            .iter()
            .map(|k| (k.to_string(), "sk-fuzz".to_string()));
        let env = hcbench::environment::Environment::new(vars, root.path()).map_err(std::io::Error::other)?;
        Ok(Models { repo: repo.to_path_buf(), root, file, env })
    }
}

/// Keys of a models.toml profile (docs/providers.md).
const MODEL_KEYS: &[&str] = &[
    "provider",
    "model",
    "base_url",
    "api_key_env",
    "reasoning_effort",
    "max_output_tokens",
    "timeout_s",
    "max_concurrency",
    "input_price_per_mtok",
    "output_price_per_mtok",
    "cache",
    "response_format",
    "temperature",
    "native_tools",
    "headers",
    "script",
    "retries",
    "max_reply_bytes",
    "requests_per_minute",
];

impl Target for Models {
    fn name(&self) -> &'static str {
        "models"
    }

    fn max_len(&self) -> usize {
        4 * 1024
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        let mut seeds = read_all(&[self.repo.join("models.example.toml")]);
        seeds.extend(read_all(&files(&self.repo.join("fuzz/corpus/models"), &[".toml"])));
        seeds
    }

    fn dict(&self) -> Vec<String> {
        let mut d: Vec<String> = MODEL_KEYS.iter().map(|k| format!("{k} = ")).collect();
        d.extend(words(&[
            "[oracle]\n",
            "[local]\n",
            "[a.b]\n",
            "[[x]]\n",
            "openai-chat",
            "openai-responses",
            "json_object",
            "json_schema",
            "read-write",
            "replay-only",
            "http://127.0.0.1:1/v1",
            "OPENAI_API_KEY",
            "\"\"\"",
            "'''",
            "{ a = 1 }",
            "1979-05-27T07:32:00Z",
        ]));
        d
    }

    fn structured(&self, u: &mut Unstructured, g: &Gen) -> Result<Vec<u8>> {
        let n = u.int_in_range(0..=3)?;
        let mut top = Vec::new();
        for _ in 0..n {
            let name = if u.ratio(3, 4)? {
                u.choose(&["gpt", "local", "a-b", "oracle", "x"])?.to_string()
            } else {
                g.string(u)?
            };
            top.push((name, Node::Map(g.map(u, 1, 10)?)));
        }
        top.extend(g.map(u, 4, 1)?);
        let mut out = String::new();
        structured::toml(&top, &mut out);
        Ok(out.into_bytes())
    }

    fn run(&mut self, data: &[u8]) -> u64 {
        fs::write(&self.file, data).expect("scratch models file written");
        let root = self.root.path();
        let result = hcbench::model::registry::Profiles::load(root, Some(&self.file), &self.env)
            .map_err(|e| e.to_string())
            .map(|profiles| {
                // Resolving builds each profile's HTTP client, which loads the root
                // certificates: 90% of the time and no parsing. One input in 256 is enough.
                if !data.len().is_multiple_of(256) {
                    return String::from("loaded");
                }
                let text = String::from_utf8_lossy(data);
                let names: Vec<String> = text
                    .lines()
                    .filter_map(|l| l.trim().strip_prefix('[')?.strip_suffix(']').map(|n| n.trim().to_string()))
                    .chain(["local".to_string()])
                    .collect();
                let mut resolved = 0;
                for name in &names {
                    if profiles.resolve(name).is_ok() {
                        resolved += 1;
                    }
                }
                format!("{}", resolved.min(3))
            });
        signature(0, result)
    }
}

// ----------------------------------------------------------------------------------------
// config: experiment_config.yaml.

/// The input is an experiment config, loaded as `hcbench gate --config FILE` loads it.
struct Config {
    repo: PathBuf,
    root: tempfile::TempDir,
    file: PathBuf,
}

impl Config {
    fn new(repo: &Path) -> std::io::Result<Config> {
        let root = scratch_root()?;
        let file = root.path().join("experiment_config.yaml");
        Ok(Config { repo: repo.to_path_buf(), root, file })
    }
}

const CONFIG_KEYS: &[&str] = &[
    "benchmark",
    "profile",
    "agent_dir",
    "models",
    "train_split",
    "test_split",
    "threshold",
    "file_guard",
    "allowlist",
    "epochs",
    "jobs",
    "promotion_passes",
    "max_unmeasured",
    "gate",
    "mode",
    "margin",
];

impl Target for Config {
    fn name(&self) -> &'static str {
        "config"
    }

    fn max_len(&self) -> usize {
        8 * 1024
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        let mut seeds = read_all(&[self.repo.join("experiment_config.yaml")]);
        seeds.extend(read_all(&files(&self.repo.join("fuzz/corpus/config"), &[".yaml"])));
        seeds
    }

    fn dict(&self) -> Vec<String> {
        let mut d: Vec<String> = CONFIG_KEYS.iter().map(|k| format!("{k}: ")).collect();
        d.extend(words(&[
            "paired",
            "simple",
            "train",
            "test",
            "heldout",
            "off",
            "no",
            "false",
            "\"\"",
            "agent/",
            "PROGRAM.md",
            "**",
            "../",
            "/etc",
            "  - ",
            "&a ",
            "*a",
            "!!float ",
        ]));
        d
    }

    fn structured(&self, u: &mut Unstructured, g: &Gen) -> Result<Vec<u8>> {
        let entries = g.map(u, 0, 12)?;
        some_yaml(u, entries)
    }

    fn run(&mut self, data: &[u8]) -> u64 {
        fs::write(&self.file, data).expect("scratch config written");
        let result = hcbench::fuzzing::experiment_config(self.root.path(), &self.file).map(|_| String::new());
        signature(0, result)
    }
}

// ----------------------------------------------------------------------------------------
// script: a scripted profile's action file.

/// The input is a script for the `scripted:PATH` profile, loaded by `Script::load`.
struct Script {
    repo: PathBuf,
    _root: tempfile::TempDir,
    file: PathBuf,
}

impl Script {
    fn new(repo: &Path) -> std::io::Result<Script> {
        let root = scratch_root()?;
        let file = root.path().join("script.yaml");
        Ok(Script { repo: repo.to_path_buf(), _root: root, file })
    }
}

impl Target for Script {
    fn name(&self) -> &'static str {
        "script"
    }

    fn max_len(&self) -> usize {
        8 * 1024
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        let mut seeds = read_all(&files(&self.repo.join("fuzz/corpus/script"), &[".yaml", ".json"]));
        // Oracle files are scripts' actions too.
        seeds.extend(
            read_all(&files(&self.repo.join("benchmarks/hc-bench/oracle"), &[".yaml"]))
                .into_iter()
                .map(|o| [b"default:\n  ".as_slice(), &o].concat()),
        );
        seeds
    }

    fn dict(&self) -> Vec<String> {
        let mut d = words(&[
            "default:\n  - ",
            "cases:\n  ",
            "noise: ",
            "seed: ",
            "tool: ",
            "args: {",
            "- if_shown: ",
            "then:\n  - ",
            "else:\n  - ",
            "section: ",
            "repo_map",
            "memory",
        ]);
        d.extend(words(TOOLS));
        d
    }

    fn structured(&self, u: &mut Unstructured, g: &Gen) -> Result<Vec<u8>> {
        let n = u.int_in_range(0..=5)?;
        let actions = (0..n).map(|_| action_node(u, g)).collect::<Result<Vec<_>>>()?;
        let mut entries = vec![("default".to_string(), Node::Seq(actions.clone()))];
        if u.ratio(1, 2)? {
            entries.push(("cases".into(), Node::Map(vec![(g.string(u)?, Node::Seq(actions))])));
        }
        entries.extend(g.map(u, 1, 2)?);
        some_yaml(u, entries)
    }

    fn run(&mut self, data: &[u8]) -> u64 {
        fs::write(&self.file, data).expect("scratch script written");
        let result = hcbench::model::scripted::Script::load(&self.file)
            .map(|s| format!("{} {}", s.default.len().min(3), s.cases.len().min(3)))
            .map_err(|e| e.to_string());
        signature(0, result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_ignore_quoted_values_and_numbers() {
        assert_eq!(
            shape("field `epochs`: 0 is not between 1 and 1000"),
            shape("field `jobs`: 7 is not between 1 and 1000")
        );
    }
}
