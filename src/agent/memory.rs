//! The agent's working memory: a small, bounded record of what the cell's tool results have
//! established, shown to the model in the `memory` context mode.
//!
//! The observations section shows only the newest tool outputs, so what the agent learned a
//! few steps ago (which tests fail, which files it read, what it changed, what went wrong)
//! falls out of view and gets re-learned by repeating calls. Working memory keeps those
//! conclusions as six blocks of short entries ([`Block`]), updated after every call by a
//! reducer.
//!
//! The reducer is deterministic: a pure function of the calls and their outputs, with no
//! clock, no randomness and no hash-ordered iteration. Two runs that see the same tool results
//! hold the same memory and send the same context, so traces replay and response caches hit.
//! Every block has a fixed capacity; when a new entry would overflow it, the oldest entry goes.
//! An entry that is updated (the same file read again, the same file edited again) keeps one
//! row and moves to the newest position, so eviction drops what was touched least recently.
//! Each update returns its diff, one [`MemoryChange`] per changed block, which the loop
//! records as a `memory_updated` event; evictions and replacements show up as removed entries.
//!
//! Rendering fits the memory into a token budget by dropping whole entries, oldest first,
//! block by block in [`Block::DROP_ORDER`]: what another read can recover cheaply goes before
//! what the agent cannot see anywhere else (its own patch and the failing tests).
//! docs/context.md describes every rule; keep the two in step.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use regex::Regex;

use super::paths::normalize;
use super::tokens::estimate;
use super::tools::ToolOutput;
use crate::action::Call;
use crate::trace::event::MemoryChange;

/// One block of working memory. The declaration order is the render order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Block {
    /// The tests the last completed test run reported failing.
    FailingTests,
    /// Files read (with the lines seen) and directories listed.
    ExploredFiles,
    /// Definitions seen in read files whose names share a word with the task.
    RelevantSymbols,
    /// What the agent changed, one entry per file.
    PatchSummary,
    /// Facts a tool established: search results, a passing test run.
    VerifiedFacts,
    /// Problems not yet resolved: failed tools, refused calls, failed commands.
    OpenQuestions,
}

impl Block {
    /// Every block, in render order.
    pub const ALL: [Block; 6] = [
        Block::FailingTests,
        Block::ExploredFiles,
        Block::RelevantSymbols,
        Block::PatchSummary,
        Block::VerifiedFacts,
        Block::OpenQuestions,
    ];

    /// The order in which [`WorkingMemory::render`] drops entries when over budget: first the
    /// blocks another call recovers cheaply (symbols and explored files come back with a read,
    /// facts with a search), last what exists nowhere else in the context once its observation
    /// scrolled away: open problems, the agent's own patch, and the failing tests that define
    /// what is left to do.
    pub const DROP_ORDER: [Block; 6] = [
        Block::RelevantSymbols,
        Block::ExploredFiles,
        Block::VerifiedFacts,
        Block::OpenQuestions,
        Block::PatchSummary,
        Block::FailingTests,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Block::FailingTests => "failing_tests",
            Block::ExploredFiles => "explored_files",
            Block::RelevantSymbols => "relevant_symbols",
            Block::PatchSummary => "patch_summary",
            Block::VerifiedFacts => "verified_facts",
            Block::OpenQuestions => "open_questions",
        }
    }

    /// Most entries the block holds. Small on purpose: memory is a summary, and a block line
    /// of a dozen entries of at most [`MAX_ENTRY_BYTES`] stays a few hundred tokens.
    pub fn capacity(self) -> usize {
        match self {
            Block::FailingTests => 10,
            Block::ExploredFiles => 12,
            Block::RelevantSymbols => 12,
            Block::PatchSummary => 8,
            Block::VerifiedFacts => 8,
            Block::OpenQuestions => 6,
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Longest entry text in bytes; longer texts (a long reason, a long test id) are cut.
pub const MAX_ENTRY_BYTES: usize = 160;

/// The first line of the rendered memory.
const HEADER: &str = "Working memory (kept by the harness from your tool results):\n";

/// Most files a search fact names before "and N more files".
const SEARCH_FILES_SHOWN: usize = 5;

/// One entry of a block. `key` names its subject (a file, a search, a test), so a later
/// result about the same subject replaces the entry instead of adding a second one.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Entry {
    key: String,
    text: String,
}

/// The lines of one file the agent has seen, for merging repeated reads into one entry.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct FileRead {
    total: usize,
    /// Disjoint, sorted, non-adjacent 1-based inclusive ranges.
    ranges: Vec<(usize, usize)>,
}

/// The running change of one file, for the patch summary.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Patch {
    /// Lines of the last `write_file` of this path; edits count from there.
    written: Option<usize>,
    added: usize,
    removed: usize,
}

/// The memory as the model sees it on one turn, and what the budget did to it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RenderedMemory {
    pub text: String,
    /// Estimated tokens of `text`.
    pub tokens: usize,
    /// Estimated tokens of the whole memory, before any entry was dropped.
    pub raw_tokens: usize,
    /// True when entries were dropped to fit the budget.
    pub reduced: bool,
    /// Blocks dropped entirely, in the order they were dropped.
    pub dropped_blocks: Vec<String>,
    /// Entries dropped, counting those of partly kept blocks.
    pub dropped_entries: usize,
}

/// The working memory of one cell. Serializable for the cell's checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WorkingMemory {
    /// The task's words (see [`words`]): a read symbol is relevant when it shares one.
    task_words: BTreeSet<String>,
    blocks: [Vec<Entry>; 6],
    /// Per path in `explored_files`, the lines read (dropped with its entry).
    reads: BTreeMap<String, FileRead>,
    /// Per path in `patch_summary`, its running change (dropped with its entry).
    patches: BTreeMap<String, Patch>,
}

impl WorkingMemory {
    pub fn new(task_prompt: &str) -> WorkingMemory {
        WorkingMemory {
            task_words: words(task_prompt).into_iter().collect(),
            blocks: Default::default(),
            reads: BTreeMap::new(),
            patches: BTreeMap::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.blocks.iter().all(Vec::is_empty)
    }

    /// The entries of `block`, oldest first, as rendered.
    pub fn entries(&self, block: Block) -> Vec<&str> {
        self.blocks[block.index()].iter().map(|e| e.text.as_str()).collect()
    }

    /// A call that ran (policy allowed it) and what it produced. Returns the diff of the
    /// blocks, one [`MemoryChange`] per changed block (empty when nothing changed).
    pub fn observe(&mut self, step: u32, call: &Call, out: &ToolOutput) -> Vec<MemoryChange> {
        let before = self.snapshot();
        match call {
            Call::ReadFile { path, .. } => self.on_read(step, path, out),
            Call::ListFiles { path, .. } => self.on_list(step, path, out),
            Call::SearchCode { pattern, path, glob } => self.on_search(step, pattern, path, glob.as_deref(), out),
            Call::EditFile { path, old, new } => {
                let (added, removed) = line_delta(old, new);
                self.on_change(step, "edit_file", path, out, |p| {
                    p.added += added;
                    p.removed += removed;
                });
            }
            Call::WriteFile { path, content, .. } => {
                let lines = content.lines().count();
                self.on_change(step, "write_file", path, out, |p| {
                    *p = Patch { written: Some(lines), ..Patch::default() }
                });
            }
            Call::RunTests {} => self.on_tests(step, out),
            Call::RunCommand { argv } => {
                let key = question_key("run_command", &argv.join(" "));
                if out.ok {
                    self.remove(Block::OpenQuestions, &key);
                } else {
                    let text = format!("run_command `{}`: {} (step {step})", argv.join(" "), short_reason(&out.text));
                    self.upsert(Block::OpenQuestions, key, text);
                }
            }
            Call::RepoMap { path, .. } => self.on_failure(step, "repo_map", &display_dir(path), out),
            Call::Finish { .. } | Call::DelegateReadonly { .. } => {}
        }
        self.prune();
        self.diff(&before)
    }

    /// A call that did not run: denied by policy or invalid. `reason` is what the model was
    /// told (e.g. `denied by policy: ...`, `invalid action: ...`).
    pub fn observe_refused(&mut self, step: u32, tool: &str, reason: &str) -> Vec<MemoryChange> {
        let before = self.snapshot();
        let reason = first_line(reason);
        // The key leaves out the step: the same refusal again updates one entry.
        let key = format!("refused:{tool}:{reason}");
        self.upsert(Block::OpenQuestions, key, format!("{tool} not run: {reason} (step {step})"));
        self.diff(&before)
    }

    /// The memory as the model sees it, within `budget_tokens`: a header line, then one line per
    /// non-empty block in [`Block::ALL`] order, entries oldest first joined by `; `. Over
    /// budget, entries are dropped oldest first, block by block in [`Block::DROP_ORDER`]; an
    /// empty memory, or a budget too small for the header and one entry, renders as "".
    pub fn render(&self, budget_tokens: usize) -> RenderedMemory {
        if self.is_empty() {
            return RenderedMemory::default();
        }
        let line = |b: Block, keep: usize| -> String {
            let entries = &self.blocks[b.index()];
            if keep == 0 {
                return String::new();
            }
            let texts: Vec<&str> = entries[entries.len() - keep..].iter().map(|e| e.text.as_str()).collect();
            format!("{}: {}\n", b.as_str(), texts.join("; "))
        };
        // Each line ends in a newline and no entry holds one, so the estimate of the whole
        // text is the sum over its lines: dropping an entry re-estimates one line only.
        let mut keep: [usize; 6] = std::array::from_fn(|i| self.blocks[i].len());
        let mut line_tokens: [usize; 6] = std::array::from_fn(|i| estimate(&line(Block::ALL[i], keep[i])));
        let header = estimate(HEADER);
        let total = |t: &[usize; 6]| header + t.iter().sum::<usize>();
        let raw_tokens = total(&line_tokens);
        let mut dropped_entries = 0;
        let mut dropped_blocks = Vec::new();
        for b in Block::DROP_ORDER {
            let i = b.index();
            while total(&line_tokens) > budget_tokens && keep[i] > 0 {
                keep[i] -= 1;
                dropped_entries += 1;
                line_tokens[i] = estimate(&line(b, keep[i]));
            }
            if keep[i] == 0 && !self.blocks[i].is_empty() {
                dropped_blocks.push(b.as_str().to_string());
            }
        }
        if keep.iter().all(|&k| k == 0) {
            return RenderedMemory {
                raw_tokens,
                reduced: true,
                dropped_blocks,
                dropped_entries,
                ..RenderedMemory::default()
            };
        }
        let mut text = HEADER.to_string();
        for b in Block::ALL {
            text.push_str(&line(b, keep[b.index()]));
        }
        // Measured as the sum of its lines, not again whole (it is rendered every turn).
        let tokens = total(&line_tokens);
        debug_assert_eq!(tokens, estimate(&text), "the estimate is additive over lines");
        RenderedMemory { text, tokens, raw_tokens, reduced: dropped_entries > 0, dropped_blocks, dropped_entries }
    }

    fn on_read(&mut self, step: u32, path: &str, out: &ToolOutput) {
        // One spelling per file: the tool reports a failed read's path as given.
        let path = normalize(out.read.as_deref().unwrap_or(path));
        if !out.ok {
            return self.on_failure(step, "read_file", &path, out);
        }
        self.remove(Block::OpenQuestions, &question_key("read_file", &path));
        let (range, total) = read_span(&out.text);
        let seen = match self.reads.get(&path) {
            // A changed length means the file was edited: earlier line numbers are stale.
            Some(prev) if prev.total == total => {
                let mut ranges = prev.ranges.clone();
                ranges.extend(range);
                FileRead { total, ranges: merge_ranges(ranges) }
            }
            _ => FileRead { total, ranges: range.into_iter().collect() },
        };
        let text = if seen.ranges == [(1, total)] || total == 0 {
            format!("{path} (all {total} lines)")
        } else {
            let spans: Vec<String> = seen.ranges.iter().map(|(a, b)| format!("{a}-{b}")).collect();
            format!("{path} lines {} of {total}", spans.join(", "))
        };
        self.reads.insert(path.clone(), seen);
        self.upsert(Block::ExploredFiles, format!("read:{path}"), text);

        for (line, name) in definitions(&out.text) {
            if words(&name).iter().any(|w| self.task_words.contains(w)) {
                // Keyed by path and name: after an edit moved it, a re-read updates the line.
                self.upsert(Block::RelevantSymbols, format!("{path}:{name}"), format!("{path}:{line} {name}"));
            }
        }
    }

    fn on_list(&mut self, step: u32, path: &str, out: &ToolOutput) {
        let dir = display_dir(path);
        if !out.ok {
            return self.on_failure(step, "list_files", &dir, out);
        }
        let entries = out.text.lines().filter(|l| !l.starts_with('[') && *l != "(empty)").count();
        let more = if out.text.contains("[more entries omitted") { "+" } else { "" };
        self.upsert(Block::ExploredFiles, format!("list:{dir}"), format!("{dir}/ listed ({entries}{more} entries)"));
    }

    fn on_search(&mut self, step: u32, pattern: &str, path: &str, glob: Option<&str>, out: &ToolOutput) {
        let dir = display_dir(path);
        let question = question_key("search_code", pattern);
        if !out.ok {
            return self.on_failure(step, "search_code", pattern, out);
        }
        self.remove(Block::OpenQuestions, &question);
        let scope = match glob {
            Some(g) => format!("{dir} ({g})"),
            None => dir.clone(),
        };
        let mut files: Vec<&str> = Vec::new();
        for line in out.text.lines() {
            if let Some(c) = SEARCH_HIT.captures(line) {
                let file = c.get(1).map_or("", |m| m.as_str());
                if !files.contains(&file) {
                    files.push(file);
                }
            }
        }
        let text = if files.is_empty() {
            format!("`{pattern}` has no match under {scope} (step {step})")
        } else {
            let shown = files.iter().take(SEARCH_FILES_SHOWN).copied().collect::<Vec<_>>().join(", ");
            let rest = files.len().saturating_sub(SEARCH_FILES_SHOWN);
            let more = if out.text.contains("[more matches omitted") {
                " and more".to_string()
            } else if rest > 0 {
                format!(" and {rest} more files")
            } else {
                String::new()
            };
            format!("`{pattern}` matches in {shown}{more} (step {step})")
        };
        self.upsert(Block::VerifiedFacts, format!("search:{pattern}\u{1f}{scope}"), text);
    }

    /// An `edit_file` or `write_file`: on success the path's patch entry is updated by `apply`
    /// and the open questions about the path are resolved.
    fn on_change(&mut self, step: u32, tool: &str, path: &str, out: &ToolOutput, apply: impl FnOnce(&mut Patch)) {
        let path = out.modified.first().cloned().unwrap_or_else(|| normalize(path));
        if !out.ok {
            return self.on_failure(step, tool, &path, out);
        }
        for t in ["read_file", "edit_file", "write_file"] {
            self.remove(Block::OpenQuestions, &question_key(t, &path));
        }
        let patch = self.patches.entry(path.clone()).or_default();
        apply(patch);
        let change = format!("+{} -{} lines", patch.added, patch.removed);
        let text = match patch.written {
            None => format!("{path}: {change} (step {step})"),
            Some(n) if patch.added + patch.removed == 0 => format!("{path}: written, {n} lines (step {step})"),
            Some(n) => format!("{path}: written, {n} lines, then {change} (step {step})"),
        };
        self.upsert(Block::PatchSummary, path, text);
    }

    fn on_tests(&mut self, step: u32, out: &ToolOutput) {
        let question = question_key("run_tests", "");
        if !out.ok {
            // For run_tests, `ok` is false only when the run did not complete (a timeout or a
            // command that could not start); failing tests are a completed run.
            let text = format!("run_tests: {} (step {step})", short_reason(&out.text));
            return self.upsert(Block::OpenQuestions, question, text);
        }
        let failing = failing_tests(&out.text);
        let passed = match exit_code(&out.text) {
            Some(code) => code == 0,
            None => failing.is_empty() && PASS_MARKER.is_match(&out.text),
        };
        if passed {
            self.blocks[Block::FailingTests.index()].clear();
            self.remove(Block::OpenQuestions, &question);
            self.upsert(Block::VerifiedFacts, "tests".into(), format!("tests passed at step {step}"));
            return;
        }
        self.remove(Block::VerifiedFacts, "tests");
        if failing.is_empty() {
            // A failed run whose output names no test (a crash before the runner, an unknown
            // runner): the failing set is unknown, so it stays as it was and the run is a question.
            let text = format!("run_tests failed, no failing test recognised: {} (step {step})", last_line(&out.text));
            return self.upsert(Block::OpenQuestions, question, text);
        }
        self.remove(Block::OpenQuestions, &question);
        let cap = Block::FailingTests.capacity();
        let mut entries: Vec<Entry> = failing.iter().map(|t| Entry { key: t.clone(), text: clip_entry(t) }).collect();
        if entries.len() > cap {
            let more = entries.len() - (cap - 1);
            entries.truncate(cap - 1);
            entries.push(Entry { key: "(more)".into(), text: format!("(and {more} more)") });
        }
        self.blocks[Block::FailingTests.index()] = entries;
    }

    /// A tool that ran and failed: an open question about `subject` until a later success.
    fn on_failure(&mut self, step: u32, tool: &str, subject: &str, out: &ToolOutput) {
        if out.ok {
            return;
        }
        let text = format!("{tool} {subject}: {} (step {step})", short_reason(&out.text));
        self.upsert(Block::OpenQuestions, question_key(tool, subject), text);
    }

    /// Adds the entry for `key`, or replaces it (moving it to the newest position) when its
    /// text changed; evicts the oldest entries beyond the block's capacity.
    fn upsert(&mut self, block: Block, key: String, text: String) {
        let text = clip_entry(&text);
        let entries = &mut self.blocks[block.index()];
        if let Some(i) = entries.iter().position(|e| e.key == key) {
            if entries[i].text == text {
                return;
            }
            entries.remove(i);
        }
        entries.push(Entry { key, text });
        let excess = entries.len().saturating_sub(block.capacity());
        entries.drain(..excess);
    }

    fn remove(&mut self, block: Block, key: &str) {
        self.blocks[block.index()].retain(|e| e.key != key);
    }

    /// Forgets the side state of entries that left their block, so memory stays bounded.
    fn prune(&mut self) {
        let explored = &self.blocks[Block::ExploredFiles.index()];
        self.reads.retain(|path, _| explored.iter().any(|e| e.key.strip_prefix("read:") == Some(path.as_str())));
        let patched = &self.blocks[Block::PatchSummary.index()];
        self.patches.retain(|path, _| patched.iter().any(|e| &e.key == path));
    }

    fn snapshot(&self) -> [Vec<String>; 6] {
        std::array::from_fn(|i| self.blocks[i].iter().map(|e| e.text.clone()).collect())
    }

    /// Per block, the entries that left (`removed`, in their old order) and arrived (`added`,
    /// in their new order) since `before`. A replaced entry is one of each.
    fn diff(&self, before: &[Vec<String>; 6]) -> Vec<MemoryChange> {
        let mut changes = Vec::new();
        for b in Block::ALL {
            let (old, now) = (&before[b.index()], &self.blocks[b.index()]);
            // Most calls change one block or two: the others are passed over in one look.
            if old.len() == now.len() && old.iter().zip(now).all(|(t, e)| *t == e.text) {
                continue;
            }
            let new: Vec<&String> = now.iter().map(|e| &e.text).collect();
            let removed: Vec<String> = old.iter().filter(|t| !new.contains(t)).cloned().collect();
            let added: Vec<String> = new.iter().filter(|t| !old.contains(t)).map(|t| t.to_string()).collect();
            if !added.is_empty() || !removed.is_empty() {
                changes.push(MemoryChange { block: b.as_str().to_string(), added, removed });
            }
        }
        changes
    }
}

fn question_key(tool: &str, subject: &str) -> String {
    format!("{tool}:{subject}")
}

/// A directory as the agent named it, `.` for the root.
fn display_dir(path: &str) -> String {
    let p = normalize(path);
    if p.is_empty() { ".".to_string() } else { p }
}

/// One line, at most [`MAX_ENTRY_BYTES`], so entries never break the one-line-per-block render.
fn clip_entry(text: &str) -> String {
    let one_line = text.replace(['\n', '\r'], " ");
    if one_line.len() <= MAX_ENTRY_BYTES {
        return one_line;
    }
    format!("{}...", crate::util::truncate_str(&one_line, MAX_ENTRY_BYTES - 3))
}

fn first_line(text: &str) -> &str {
    text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("")
}

fn last_line(text: &str) -> &str {
    text.lines().map(str::trim).rfind(|l| !l.is_empty()).unwrap_or("")
}

/// Why a tool failed, in one short line: its first line, and for a command's status line
/// (`exit code 1`, `timed out after 5.0s`) also the output's last line, where the error is.
fn short_reason(text: &str) -> String {
    let first = first_line(text);
    let last = last_line(text);
    let status = first.starts_with("exit code ") || first.starts_with("timed out") || first.starts_with("killed");
    let reason = if status && last != first { format!("{first}: {last}") } else { first.to_string() };
    crate::util::truncate_str(&reason, 120).to_string()
}

/// The exit status line `process::Output::combined` puts first; `killed` counts as a failure.
fn exit_code(text: &str) -> Option<i64> {
    let first = text.lines().next()?;
    if first.starts_with("killed by a signal") {
        return Some(-1);
    }
    first.strip_prefix("exit code ")?.trim().parse().ok()
}

/// Lines added and removed by replacing `old` with `new`: the lines left after the common
/// leading and trailing lines are taken off both.
fn line_delta(old: &str, new: &str) -> (usize, usize) {
    let o: Vec<&str> = old.lines().collect();
    let n: Vec<&str> = new.lines().collect();
    let prefix = o.iter().zip(&n).take_while(|(a, b)| a == b).count();
    let suffix = o[prefix..].iter().rev().zip(n[prefix..].iter().rev()).take_while(|(a, b)| a == b).count();
    (n.len() - prefix - suffix, o.len() - prefix - suffix)
}

/// The range a `read_file` output covers and the file's length. A partial read starts with
/// `PATH lines A-B of N`; a whole read is numbered lines only.
fn read_span(text: &str) -> (Option<(usize, usize)>, usize) {
    // Only a header can match: a line that starts with no space and names its lines (a whole
    // file's output starts with its first numbered line, which the regex need not be run on).
    let header = text.lines().next().filter(|l| l.starts_with(|c: char| !c.is_whitespace()) && l.contains(" lines "));
    if let Some(c) = header.and_then(|l| READ_HEADER.captures(l)) {
        let n = |i: usize| c.get(i).and_then(|m| m.as_str().parse::<usize>().ok()).unwrap_or(0);
        let (first, last, total) = (n(1), n(2), n(3));
        return (Some((first, last)), total);
    }
    let total = text.lines().count();
    ((total > 0).then_some((1, total)), total)
}

fn merge_ranges(mut ranges: Vec<(usize, usize)>) -> Vec<(usize, usize)> {
    ranges.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::new();
    for (a, b) in ranges {
        match merged.last_mut() {
            Some(last) if a <= last.1 + 1 => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    merged
}

/// `(line, name)` of each class or function defined in a `read_file` output. Python's `def`,
/// `async def` and `class` (methods too), and the usual keywords of other languages (`fn`,
/// `function`, `func`, `struct`, `enum`, `trait`, `interface`); dunder methods are skipped,
/// they say nothing about the task.
fn definitions(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for line in text.lines() {
        // `read_file` numbers each line as `{:>5}| {line}`.
        let Some((number, code)) = line.split_once("| ") else { continue };
        let Some(name) = defined_name(code) else { continue };
        let Ok(n) = number.trim_start().parse::<usize>() else { continue };
        if !(name.starts_with("__") && name.ends_with("__")) {
            found.push((n, name.to_string()));
        }
    }
    found
}

/// The name a line of code defines: after its indentation, any of [`DEFINITION_MODIFIERS`]
/// (and `pub(...)`), each followed by whitespace, then one of [`DEFINITION_KEYWORDS`],
/// whitespace, and an identifier (ASCII letters, digits and `_`, not starting with a digit).
///
/// Read word by word rather than with a regex: this runs on every line a file read shows, and
/// the capturing regex search it replaces was half of working memory's update (9 of 19 perf
/// samples over the 43 oracle cells, 2026-11-25). No backtracking is needed: every modifier and keyword must be followed by
/// whitespace, and none is another one with whitespace after it, so at most one of them fits a
/// position. The test `definitions_are_the_patterns_matches` holds it to the pattern
/// it replaced.
fn defined_name(code: &str) -> Option<&str> {
    let mut rest = code.trim_start();
    loop {
        if let Some(after) = DEFINITION_KEYWORDS.iter().find_map(|k| word_then_space(rest, k)) {
            let len = after.bytes().take_while(|b| b.is_ascii_alphanumeric() || *b == b'_').count();
            let name = &after[..len];
            return name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_').then_some(name);
        }
        rest = DEFINITION_MODIFIERS.iter().find_map(|m| word_then_space(rest, m)).or_else(|| {
            let args = rest.strip_prefix("pub(")?;
            word_then_space(&args[args.find(')')?..], ")")
        })?;
    }
}

/// What follows `word` and the whitespace after it at the start of `text`; `None` unless
/// `text` starts with `word` and at least one whitespace character.
fn word_then_space<'a>(text: &'a str, word: &str) -> Option<&'a str> {
    let after = text.strip_prefix(word)?;
    let rest = after.trim_start();
    (rest.len() < after.len()).then_some(rest)
}

/// Words too common in task prompts and code to make a symbol relevant.
const STOPWORDS: &[&str] = &[
    "and", "are", "but", "can", "class", "def", "does", "fix", "for", "from", "function", "get", "has", "have", "init",
    "into", "its", "keep", "main", "make", "method", "must", "new", "not", "should", "self", "set", "test", "that",
    "the", "this", "use", "when", "with",
];

/// The words of a text as identifiers split them: on anything not alphanumeric (so
/// snake_case splits), and at case changes (`parseHTTPHeader` -> parse, http, header);
/// lowercased, a plural `s` dropped (`items` -> item), words under three letters, digits and
/// [`STOPWORDS`] left out.
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    // A token's characters and where each starts, kept from token to token: a word is the
    // token's text between two of them, lowercased in one allocation.
    let mut chars: Vec<(usize, char)> = Vec::new();
    for token in text.split(|c: char| !c.is_alphanumeric()).filter(|t| !t.is_empty()) {
        chars.clear();
        chars.extend(token.char_indices());
        let mut start = 0;
        for i in 1..=chars.len() {
            let boundary = i == chars.len() || {
                let (prev, cur) = (chars[i - 1].1, chars[i].1);
                let next_lower = chars.get(i + 1).is_some_and(|(_, c)| c.is_lowercase());
                (cur.is_uppercase() && (prev.is_lowercase() || prev.is_numeric()))
                    || (cur.is_uppercase() && prev.is_uppercase() && next_lower)
            };
            if boundary {
                let end = chars.get(i).map_or(token.len(), |&(at, _)| at);
                let mut word = token[chars[start].0..end].to_lowercase();
                start = i;
                if word.len() > 3 && word.ends_with('s') && !word[..word.len() - 1].ends_with('s') {
                    word.pop();
                }
                if word.chars().count() >= 3 && !word.chars().all(char::is_numeric) && !STOPWORDS.contains(&&*word) {
                    out.push(word);
                }
            }
        }
    }
    out
}

/// The failing tests a test run's output names, in order of appearance, each once:
/// - Python unittest: `FAIL: test_x (pkg.mod.Case.test_x)` and `ERROR: ...` give
///   `pkg.mod.Case.test_x` (before Python 3.11 the parenthesis holds the class only, and the
///   method is appended); a module that failed to import gives `test_mod (import failed)`;
/// - pytest: `FAILED tests/test_a.py::test_x - ...` and `ERROR tests/test_b.py` give the node id
///   (unittest's closing `FAILED (failures=2)` is not one);
/// - cargo test: `test path::name ... FAILED`; go test: `--- FAIL: TestName`.
fn failing_tests(text: &str) -> Vec<String> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for line in text.lines() {
        // Every form below holds `FAIL` or starts with `ERROR`: the other lines (most of a
        // verbose run's) are passed over without the two regexes.
        if !line.contains("FAIL") && !line.starts_with("ERROR") {
            continue;
        }
        let id = if let Some(c) = UNITTEST.captures(line) {
            let (method, place) = (&c[1], &c[2]);
            if place.starts_with("unittest.loader.") {
                format!("{method} (import failed)")
            } else if place.ends_with(&format!(".{method}")) {
                place.to_string()
            } else {
                format!("{place}.{method}")
            }
        } else if let Some(c) = OTHER_RUNNERS.captures(line) {
            c.iter().skip(1).flatten().next().map_or(String::new(), |m| m.as_str().to_string())
        } else {
            continue;
        };
        if !id.is_empty() && seen.insert(id.clone()) {
            out.push(id);
        }
    }
    out
}

static UNITTEST: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(?:FAIL|ERROR): (\S+) \(([^)\s]+)\)").expect("valid regex"));
static OTHER_RUNNERS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:(?:FAILED|ERROR) ([^\s(]\S*)|test (\S+) \.\.\. FAILED$|\s*--- FAIL: (\S+))").expect("valid regex")
});
/// A passing run without an exit status line: unittest's `OK`, pytest's `N passed` summary
/// (nothing failed), cargo's `test result: ok.`
static PASS_MARKER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)^(?:OK(?: \(.*\))?|=*\s*\d+ passed(?:, \d+ (?:skipped|deselected|warnings?|xfailed|xpassed))*(?: in .*)?|test result: ok\..*)$")
        .expect("valid regex")
});
static READ_HEADER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\S.* lines (\d+)-(\d+) of (\d+)$").expect("valid regex"));
/// What may stand before a definition's keyword (`pub(...)` too, in [`defined_name`]).
const DEFINITION_MODIFIERS: &[&str] =
    &["pub", "export", "default", "async", "static", "public", "private", "protected"];
/// The keywords that start a definition.
const DEFINITION_KEYWORDS: &[&str] =
    &["def", "class", "fn", "function", "func", "struct", "enum", "trait", "interface"];
static SEARCH_HIT: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^(.+?):(\d+): ").expect("valid regex"));

/// The memory section as the context pipeline takes it.
impl From<RenderedMemory> for super::context::Rendered {
    fn from(m: RenderedMemory) -> Self {
        super::context::Rendered {
            text: m.text,
            tokens: m.tokens,
            raw_tokens: m.raw_tokens,
            reduced: m.reduced,
            cut: 0,
            dropped_blocks: m.dropped_blocks,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::tools;
    use crate::bench::Case;

    /// The pattern [`defined_name`] reads, as the regex it replaced.
    static DEFINITION: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"^\s*(?:(?:pub(?:\([^)]*\))?|export|default|async|static|public|private|protected)\s+)*(?:def|class|fn|function|func|struct|enum|trait|interface)\s+([A-Za-z_][A-Za-z0-9_]*)",
        )
        .expect("valid regex")
    });

    /// The definitions found are the pattern's matches on every line, and the read spans those
    /// of the header regex on the lines it is run on.
    #[test]
    fn definitions_are_the_patterns_matches() {
        let lines = [
            "def page(items, size):",
            "    async def fetch(self):",
            "pub(in crate::x) fn walk() {",
            "pub(crate) struct Tree;",
            "export default class Widget {",
            "\u{a0}\tdef spaced():",
            "  protected static function run() {}",
            "define = 1",
            "classy = class_of(x)",
            "    return fn(x)",
            "func main() {",
            "interface Shape {",
            "    def __init__(self):",
            "",
            "x = 1  # def hidden():",
            "def",
            "def ",
            "def 9lives():",
            "def _private9(x):",
            "def\u{2003}wide():",
            "class Ünicode:",
            "class Caf\u{e9}:",
            "fn\tx()",
            "function  spaced_out() {",
            "functional x",
            "func(x)",
            "pub fn plain()",
            "pub (crate) fn spaced_parens()",
            "pub(crate)fn glued()",
            "pub(a(b)) fn nested()",
            "pub(crate) pub(super) async fn twice()",
            "public  static  def odd()",
            "publicstatic fn x()",
            "asyncdef x():",
            "async async def again():",
            "export default",
            "static enum Color {",
            "private trait Hidden",
            "default interface I",
            "struct",
            "struct S",
            "enum E{",
            "trait T:",
            "    \t  class   Deep(Base):",
            "class __Dunder__:",
            "class __half:",
            "pub(",
            "pub() fn empty()",
            "async\u{a0}def nbsp():",
            "def\u{0}null()",
            "ctrl def x():",
        ];
        let numbered: String = lines.iter().enumerate().map(|(i, l)| format!("{:>5}| {l}\n", i + 1)).collect();
        let every_line: Vec<(usize, String)> = numbered
            .lines()
            .filter_map(|line| {
                let (number, code) = line.split_once("| ")?;
                let d = DEFINITION.captures(code)?;
                let name = d[1].to_string();
                (!(name.starts_with("__") && name.ends_with("__"))).then(|| (number.trim().parse().unwrap(), name))
            })
            .collect();
        assert_eq!(definitions(&numbered), every_line);
        assert_eq!(every_line.len(), 28, "{every_line:?}");
        let pattern = |code: &str| DEFINITION.captures(code).map(|c| c.get(1).unwrap().as_str().to_string());
        for code in lines {
            assert_eq!(defined_name(code).map(str::to_string), pattern(code), "{code:?}");
        }
        // Every line of up to four of these pieces.
        let pieces = [
            "pub", "(crate)", "(", ")", " ", "\t", "\u{a0}", "def", "class", "fn", "func", "tion", "async", "default",
            "static", "publ", "ic", "x", "_y1", "9", "é",
        ];
        let mut codes = vec![String::new()];
        for _ in 0..4 {
            let longer: Vec<String> =
                codes.iter().flat_map(|c| pieces.iter().map(move |p| format!("{c}{p}"))).collect();
            codes.extend(longer.into_iter().filter(|c| c.len() <= 24));
            codes.sort();
            codes.dedup();
        }
        assert!(codes.len() > 100_000, "{}", codes.len());
        for code in &codes {
            assert_eq!(defined_name(code).map(str::to_string), pattern(code), "{code:?}");
        }

        assert_eq!(read_span("a.py lines 3-9 of 40\n    3| x\n"), (Some((3, 9)), 40));
        assert_eq!(read_span("    1| x lines 3-9 of 40\n    2| y\n"), (Some((1, 2)), 2));
        assert_eq!(read_span(""), (None, 0));
    }

    const PAGER: &str = r#""""Pagination helpers."""


def page(items, size):
    """Split items into pages of `size`."""
    return [items[i:i + size] for i in range(0, len(items) - 1, size)]


def page_count(items, size):
    return len(page(items, size))


class Formatter:
    def __init__(self, width):
        self.width = width

    def render(self, rows):
        return "\n".join(str(r) for r in rows)
"#;

    const TEST_PAGER: &str = "import unittest\n\nfrom pager import page\n\n\nclass PageTest(unittest.TestCase):
    def test_last_page(self):
        self.assertEqual(page([1, 2, 3], 2), [[1, 2], [3]])

    def test_exact(self):
        self.assertEqual(page([1, 2], 2), [[1, 2]])

    def test_single(self):
        self.assertEqual(page([1], 1), [[1]])
";

    const TASK: &str =
        "The last page is lost: page() drops the final item. Fix pager.py so every item lands on a page.";

    /// A workspace with the pager fixture and a case whose tests run it with unittest.
    fn workspace() -> (tempfile::TempDir, std::path::PathBuf, Case) {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("pager.py"), PAGER).unwrap();
        std::fs::create_dir(d.path().join("tests")).unwrap();
        std::fs::write(d.path().join("tests/test_pager.py"), TEST_PAGER).unwrap();
        let root = d.path().canonicalize().unwrap();
        let mut case = Case::sample();
        case.prompt = TASK.into();
        case.tests = crate::bench::TestSpec::Command(
            ["python3", "-m", "unittest", "discover", "-s", "tests"].map(String::from).to_vec(),
        );
        (d, root, case)
    }

    /// Runs `call` with the real tool and feeds its output to the memory.
    async fn step(
        mem: &mut WorkingMemory,
        n: u32,
        call: Call,
        case: &Case,
        root: &std::path::Path,
    ) -> Vec<MemoryChange> {
        let out = tools::execute(&call, case, root, &crate::sandbox::Sandbox::None).await;
        mem.observe(n, &call, &out)
    }

    fn change(block: Block, added: &[&str], removed: &[&str]) -> MemoryChange {
        MemoryChange {
            block: block.as_str().into(),
            added: added.iter().map(|s| s.to_string()).collect(),
            removed: removed.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn read(path: &str, start: Option<usize>, end: Option<usize>) -> Call {
        Call::ReadFile { path: path.into(), start_line: start, end_line: end }
    }

    fn ok(text: &str) -> ToolOutput {
        ToolOutput { ok: true, text: text.into(), ..Default::default() }
    }

    #[tokio::test]
    async fn reads_record_the_lines_seen_merged_per_file_and_the_task_symbols() {
        let (_d, root, case) = workspace();
        let mut mem = WorkingMemory::new(TASK);
        let diff = step(&mut mem, 1, read("pager.py", Some(1), Some(6)), &case, &root).await;
        assert_eq!(
            diff,
            [
                change(Block::ExploredFiles, &["pager.py lines 1-6 of 18"], &[]),
                change(Block::RelevantSymbols, &["pager.py:4 page"], &[]),
            ]
        );
        let diff = step(&mut mem, 2, read("./pager.py", Some(13), Some(18)), &case, &root).await;
        assert_eq!(
            diff,
            [change(Block::ExploredFiles, &["pager.py lines 1-6, 13-18 of 18"], &["pager.py lines 1-6 of 18"])],
            "one entry per file; Formatter and render share no word with the task, __init__ is skipped"
        );
        let diff = step(&mut mem, 3, read("pager.py", Some(7), Some(12)), &case, &root).await;
        assert_eq!(
            diff,
            [
                change(Block::ExploredFiles, &["pager.py (all 18 lines)"], &["pager.py lines 1-6, 13-18 of 18"]),
                change(Block::RelevantSymbols, &["pager.py:9 page_count"], &[]),
            ]
        );
        assert!(
            step(&mut mem, 4, read("pager.py", None, None), &case, &root).await.is_empty(),
            "a repeat read adds nothing"
        );
        assert_eq!(mem.entries(Block::RelevantSymbols), ["pager.py:4 page", "pager.py:9 page_count"]);

        // A failed read is an open question until the path is read.
        let diff = step(&mut mem, 5, read("pagr.py", None, None), &case, &root).await;
        let question = "read_file pagr.py: `pagr.py` does not exist; use list_files to see what does (step 5)";
        assert_eq!(diff, [change(Block::OpenQuestions, &[question], &[])]);
    }

    #[tokio::test]
    async fn searches_become_facts_and_bad_patterns_questions() {
        let (_d, root, case) = workspace();
        let mut mem = WorkingMemory::new(TASK);
        let search = |pattern: &str, glob: Option<&str>| Call::SearchCode {
            pattern: pattern.into(),
            path: ".".into(),
            glob: glob.map(String::from),
        };
        let diff = step(&mut mem, 1, search(r"page\(", None), &case, &root).await;
        assert_eq!(
            diff,
            [change(Block::VerifiedFacts, &[r"`page\(` matches in pager.py, tests/test_pager.py (step 1)"], &[])]
        );
        let diff = step(&mut mem, 2, search("paginate", Some("*.py")), &case, &root).await;
        assert_eq!(diff, [change(Block::VerifiedFacts, &["`paginate` has no match under . (*.py) (step 2)"], &[])]);
        let diff = step(&mut mem, 3, search(r"page\(", None), &case, &root).await;
        assert_eq!(
            diff,
            [change(
                Block::VerifiedFacts,
                &[r"`page\(` matches in pager.py, tests/test_pager.py (step 3)"],
                &[r"`page\(` matches in pager.py, tests/test_pager.py (step 1)"]
            )],
            "the same search again updates its fact"
        );
        let diff = step(&mut mem, 4, search("page(", None), &case, &root).await;
        assert_eq!(diff.len(), 1);
        assert_eq!(diff[0].block, "open_questions");
        assert!(diff[0].added[0].starts_with("search_code page(: invalid regex `page(`"), "{diff:?}");
    }

    #[tokio::test]
    async fn edits_merge_per_file_and_resolve_the_questions_about_it() {
        let (_d, root, case) = workspace();
        let mut mem = WorkingMemory::new(TASK);
        let edit = |old: &str, new: &str| Call::EditFile { path: "pager.py".into(), old: old.into(), new: new.into() };
        let diff = step(&mut mem, 1, edit("len(items) - 2", "len(items)"), &case, &root).await;
        let question = "edit_file pager.py: `old` matches 0 times in `pager.py`, expected exactly 1; read the file \
                        and copy the exact text, including indentation (step 1)";
        assert_eq!(diff, [change(Block::OpenQuestions, &[question], &[])]);

        let diff = step(&mut mem, 2, edit("len(items) - 1, size)", "len(items), size)"), &case, &root).await;
        assert_eq!(
            diff,
            [
                change(Block::PatchSummary, &["pager.py: +1 -1 lines (step 2)"], &[]),
                change(Block::OpenQuestions, &[], &[question]),
            ]
        );
        let diff = step(
            &mut mem,
            3,
            edit("def page_count(items, size):\n", "def page_count(items, size):\n    \"\"\"How many pages.\"\"\"\n"),
            &case,
            &root,
        )
        .await;
        assert_eq!(
            diff,
            [change(Block::PatchSummary, &["pager.py: +2 -1 lines (step 3)"], &["pager.py: +1 -1 lines (step 2)"])]
        );
        let write = Call::WriteFile { path: "docs/notes.md".into(), content: "a\nb\nc\n".into(), overwrite: false };
        let diff = step(&mut mem, 4, write.clone(), &case, &root).await;
        assert_eq!(diff, [change(Block::PatchSummary, &["docs/notes.md: written, 3 lines (step 4)"], &[])]);
        let diff = step(&mut mem, 5, write, &case, &root).await;
        assert_eq!(diff[0].block, "open_questions", "writing over an existing file without overwrite fails");
        assert!(diff[0].added[0].starts_with("write_file docs/notes.md: `docs/notes.md` exists"), "{diff:?}");
    }

    #[test]
    fn line_delta_counts_the_lines_between_common_ends() {
        assert_eq!(line_delta("y = 1", "y = 5"), (1, 1));
        assert_eq!(line_delta("a\nb\n", "a\nx\ny\nb\n"), (2, 0));
        assert_eq!(line_delta("a\nx\nb", "a\nb"), (0, 1));
        assert_eq!(line_delta("a\na", "a"), (0, 1), "prefix and suffix never overlap");
        assert_eq!(line_delta("same", "same"), (0, 0));
    }

    #[tokio::test]
    async fn a_real_unittest_run_sets_the_failing_tests_and_a_pass_clears_them() {
        let (_d, root, case) = workspace();
        let mut mem = WorkingMemory::new(TASK);
        let diff = step(&mut mem, 1, Call::RunTests {}, &case, &root).await;
        assert_eq!(
            diff,
            [change(
                Block::FailingTests,
                &["test_pager.PageTest.test_last_page", "test_pager.PageTest.test_single"],
                &[]
            )]
        );
        // A module that fails to import joins the set.
        std::fs::write(root.join("tests/test_broken.py"), "import nonexistent_module\n").unwrap();
        let diff = step(&mut mem, 2, Call::RunTests {}, &case, &root).await;
        assert_eq!(diff, [change(Block::FailingTests, &["test_broken (import failed)"], &[])]);
        assert_eq!(
            mem.entries(Block::FailingTests),
            ["test_broken (import failed)", "test_pager.PageTest.test_last_page", "test_pager.PageTest.test_single"],
            "exactly the set of the last run, in the runner's order"
        );

        std::fs::remove_file(root.join("tests/test_broken.py")).unwrap();
        std::fs::write(root.join("pager.py"), PAGER.replace("len(items) - 1", "len(items)")).unwrap();
        let diff = step(&mut mem, 3, Call::RunTests {}, &case, &root).await;
        assert_eq!(
            diff,
            [
                change(
                    Block::FailingTests,
                    &[],
                    &[
                        "test_broken (import failed)",
                        "test_pager.PageTest.test_last_page",
                        "test_pager.PageTest.test_single"
                    ]
                ),
                change(Block::VerifiedFacts, &["tests passed at step 3"], &[]),
            ]
        );

        // Failing again: the pass is no longer a fact.
        std::fs::write(root.join("pager.py"), PAGER).unwrap();
        let diff = step(&mut mem, 4, Call::RunTests {}, &case, &root).await;
        assert_eq!(
            diff,
            [
                change(
                    Block::FailingTests,
                    &["test_pager.PageTest.test_last_page", "test_pager.PageTest.test_single"],
                    &[]
                ),
                change(Block::VerifiedFacts, &[], &["tests passed at step 3"]),
            ]
        );
    }

    /// Captured from pytest 9.2.0 (Python 3.11) on the same fixture plus a function-style test
    /// module, with the bug in place, then with a module that fails to import.
    const PYTEST_FAILED: &str = "exit code 1
============================= test session starts ==============================
platform linux -- Python 3.11.7, pytest-9.2.0, pluggy-1.7.0
rootdir: /tmp/ut
collected 5 items

tests/test_funcs.py F.                                                   [ 40%]
tests/test_pager.py .F.                                                  [100%]

=================================== FAILURES ===================================
_________________________________ test_single __________________________________

    def test_single():
>       assert page([1], 1) == [[1]]
E       assert [] == [[1]]

tests/test_funcs.py:4: AssertionError
=========================== short test summary info ============================
FAILED tests/test_funcs.py::test_single - assert [] == [[1]]
FAILED tests/test_pager.py::PageTest::test_last_page - AssertionError: Lists ...
========================= 2 failed, 3 passed in <time> ==========================
";
    const PYTEST_COLLECTION_ERROR: &str = "exit code 2
=========================== short test summary info ============================
ERROR tests/test_broken.py
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
=============================== 1 error in <time> ===============================
";
    const PYTEST_PASSED: &str = "tests/test_funcs.py ..                                                   [ 40%]
tests/test_pager.py ...                                                  [100%]

============================== 5 passed in <time> ===============================
";

    #[test]
    fn pytest_summaries_set_the_failing_tests() {
        let mut mem = WorkingMemory::new(TASK);
        let diff = mem.observe(1, &Call::RunTests {}, &ok(PYTEST_FAILED));
        assert_eq!(
            diff,
            [change(
                Block::FailingTests,
                &["tests/test_funcs.py::test_single", "tests/test_pager.py::PageTest::test_last_page"],
                &[]
            )]
        );
        let diff = mem.observe(2, &Call::RunTests {}, &ok(PYTEST_COLLECTION_ERROR));
        assert_eq!(
            diff,
            [change(
                Block::FailingTests,
                &["tests/test_broken.py"],
                &["tests/test_funcs.py::test_single", "tests/test_pager.py::PageTest::test_last_page"]
            )]
        );
        // Without an exit status line, the pytest summary decides.
        let diff = mem.observe(3, &Call::RunTests {}, &ok(PYTEST_PASSED));
        assert_eq!(
            diff,
            [
                change(Block::FailingTests, &[], &["tests/test_broken.py"]),
                change(Block::VerifiedFacts, &["tests passed at step 3"], &[]),
            ]
        );
        assert!(failing_tests("test result: ok. 3 passed").is_empty());
        assert_eq!(
            failing_tests("test pager::tests::last ... FAILED\n--- FAIL: TestLast (0.00s)\nFAIL: test_x (mod.Case)\n"),
            ["pager::tests::last", "TestLast", "mod.Case.test_x"],
            "cargo, go, and unittest before Python 3.11"
        );
    }

    #[test]
    fn unrecognised_or_unfinished_test_runs_are_questions() {
        let mut mem = WorkingMemory::new(TASK);
        mem.observe(1, &Call::RunTests {}, &ok(PYTEST_FAILED));
        let crash = ok("exit code 1\nTraceback (most recent call last):\nSyntaxError: invalid syntax\n");
        let diff = mem.observe(2, &Call::RunTests {}, &crash);
        assert_eq!(
            diff,
            [change(
                Block::OpenQuestions,
                &["run_tests failed, no failing test recognised: SyntaxError: invalid syntax (step 2)"],
                &[]
            )],
            "the failing set is unknown, so it stays"
        );
        let timeout = ToolOutput { ok: false, text: "timed out after 5.0s\n...\n".into(), ..Default::default() };
        let diff = mem.observe(3, &Call::RunTests {}, &timeout);
        assert_eq!(
            diff,
            [change(
                Block::OpenQuestions,
                &["run_tests: timed out after 5.0s: ... (step 3)"],
                &["run_tests failed, no failing test recognised: SyntaxError: invalid syntax (step 2)"]
            )]
        );
        let diff = mem.observe(4, &Call::RunTests {}, &ok(PYTEST_FAILED));
        assert_eq!(diff, [change(Block::OpenQuestions, &[], &["run_tests: timed out after 5.0s: ... (step 3)"])]);
    }

    #[tokio::test]
    async fn failed_commands_and_refused_calls_are_open_questions() {
        let (_d, root, case) = workspace();
        let mut mem = WorkingMemory::new(TASK);
        let cmd = Call::RunCommand {
            argv: ["python3", "-c", "import sys; sys.exit('no config')"].map(String::from).to_vec(),
        };
        let diff = step(&mut mem, 1, cmd.clone(), &case, &root).await;
        let question = "run_command `python3 -c import sys; sys.exit('no config')`: exit code 1: no config (step 1)";
        assert_eq!(diff, [change(Block::OpenQuestions, &[question], &[])]);
        let fixed = Call::RunCommand { argv: ["python3", "-c", "print('ok')"].map(String::from).to_vec() };
        assert!(step(&mut mem, 2, fixed, &case, &root).await.is_empty(), "another command resolves nothing");

        let diff = mem.observe_refused(3, "read_file", "denied by policy: `.env` holds secrets");
        let denial = "read_file not run: denied by policy: `.env` holds secrets (step 3)";
        assert_eq!(diff, [change(Block::OpenQuestions, &[denial], &[])]);
        let diff = mem.observe_refused(4, "read_file", "denied by policy: `.env` holds secrets");
        let again = "read_file not run: denied by policy: `.env` holds secrets (step 4)";
        assert_eq!(diff, [change(Block::OpenQuestions, &[again], &[denial])], "the same refusal keeps one entry");
        let diff =
            mem.observe_refused(5, "frobnicate", "invalid action: unknown tool `frobnicate`; known tools: ...\n");
        assert_eq!(
            diff[0].added,
            ["frobnicate not run: invalid action: unknown tool `frobnicate`; known tools: ... (step 5)"]
        );

        let ls = Call::ListFiles { path: "src".into(), max_depth: 2 };
        let diff = step(&mut mem, 6, ls, &case, &root).await;
        assert_eq!(diff[0].added, ["list_files src: `src` is not a directory (step 6)"]);
        let diff = step(&mut mem, 7, cmd, &case, &root).await;
        assert_eq!(
            diff,
            [change(Block::OpenQuestions, &[&question.replace("step 1", "step 7")], &[question])],
            "the same failing command again updates its entry"
        );
        let diff = step(&mut mem, 8, Call::ListFiles { path: ".".into(), max_depth: 1 }, &case, &root).await;
        assert_eq!(diff, [change(Block::ExploredFiles, &["./ listed (2 entries)"], &[])]);
    }

    #[test]
    fn full_blocks_evict_their_oldest_entry_and_say_so() {
        let mut mem = WorkingMemory::new(TASK);
        let cap = Block::ExploredFiles.capacity();
        for i in 1..=cap {
            let call = read(&format!("m{i:02}.py"), None, None);
            mem.observe(i as u32, &call, &ToolOutput { read: Some(format!("m{i:02}.py")), ..ok("    1| x = 1\n") });
        }
        assert_eq!(mem.entries(Block::ExploredFiles).len(), cap);
        let call = read("m13.py", None, None);
        let diff = mem.observe(13, &call, &ToolOutput { read: Some("m13.py".into()), ..ok("    1| x = 1\n") });
        assert_eq!(diff, [change(Block::ExploredFiles, &["m13.py (all 1 lines)"], &["m01.py (all 1 lines)"])]);
        assert_eq!(mem.entries(Block::ExploredFiles).first(), Some(&"m02.py (all 1 lines)"));
        assert_eq!(mem.reads.len(), cap, "the evicted file's lines are forgotten too");

        // More failing tests than the block holds: the first ones and a count of the rest.
        let many: String = (1..=14).map(|i| format!("FAILED tests/test_a.py::test_{i:02} - assert 0\n")).collect();
        mem.observe(14, &Call::RunTests {}, &ok(&format!("exit code 1\n{many}")));
        let failing = mem.entries(Block::FailingTests);
        assert_eq!(failing.len(), Block::FailingTests.capacity());
        assert_eq!(failing[0], "tests/test_a.py::test_01");
        assert_eq!(failing[9], "(and 5 more)");
    }

    #[tokio::test]
    async fn the_same_results_give_the_same_memory_and_diffs() {
        let (_d, root, case) = workspace();
        let calls = [
            Call::ListFiles { path: ".".into(), max_depth: 2 },
            Call::SearchCode { pattern: "def page".into(), path: ".".into(), glob: None },
            read("pager.py", None, None),
            Call::RunTests {},
            Call::EditFile { path: "pager.py".into(), old: "len(items) - 1".into(), new: "len(items)".into() },
            Call::EditFile { path: "pager.py".into(), old: "nope".into(), new: "x".into() },
            Call::RunTests {},
        ];
        let mut outputs = Vec::new();
        for call in &calls {
            outputs.push(tools::execute(call, &case, &root, &crate::sandbox::Sandbox::None).await);
        }
        let replay = || {
            let mut mem = WorkingMemory::new(TASK);
            let mut diffs = Vec::new();
            for (i, (call, out)) in calls.iter().zip(&outputs).enumerate() {
                diffs.push(mem.observe(i as u32 + 1, call, out));
            }
            diffs.push(mem.observe_refused(8, "run_command", "denied by policy: `curl` is not allowed"));
            (mem, diffs)
        };
        let (first, first_diffs) = replay();
        let (second, second_diffs) = replay();
        assert_eq!(first, second);
        assert_eq!(first_diffs, second_diffs);
        assert_eq!(first.render(10_000), second.render(10_000));
        assert_eq!(
            first.render(10_000).text,
            "Working memory (kept by the harness from your tool results):
explored_files: ./ listed (3 entries); pager.py (all 18 lines)
relevant_symbols: pager.py:4 page; pager.py:9 page_count
patch_summary: pager.py: +1 -1 lines (step 5)
verified_facts: `def page` matches in pager.py (step 2); tests passed at step 7
open_questions: edit_file pager.py: `old` matches 0 times in `pager.py`, expected exactly 1; read the file and copy the \
exact text, including indentation (step 6); run_command not run: denied by policy: `curl` is not allowed (step 8)
"
        );
    }

    /// A memory with every block filled, from literal tool outputs.
    fn full_memory() -> WorkingMemory {
        let mut mem = WorkingMemory::new(TASK);
        let read_out = ToolOutput { read: Some("pager.py".into()), ..ok(&tools_read_text()) };
        mem.observe(1, &read("pager.py", None, None), &read_out);
        let search = Call::SearchCode { pattern: "page".into(), path: ".".into(), glob: None };
        mem.observe(2, &search, &ok("pager.py:4: def page(items, size):\n"));
        mem.observe(3, &Call::RunTests {}, &ok(PYTEST_FAILED));
        let edit = Call::EditFile { path: "pager.py".into(), old: "a".into(), new: "b".into() };
        mem.observe(4, &edit, &ToolOutput { modified: vec!["pager.py".into()], ..ok("edited `pager.py`") });
        mem.observe_refused(5, "run_command", "denied by policy: `curl` is not allowed");
        mem
    }

    fn tools_read_text() -> String {
        PAGER.lines().enumerate().map(|(i, l)| format!("{:>5}| {l}\n", i + 1)).collect()
    }

    #[test]
    fn render_fits_the_budget_dropping_by_priority_and_naming_dropped_blocks() {
        let mem = full_memory();
        let whole = mem.render(usize::MAX);
        assert!(!whole.reduced && whole.dropped_blocks.is_empty());
        assert_eq!(whole.tokens, estimate(&whole.text));
        assert_eq!(whole.tokens, whole.raw_tokens);
        let lines: Vec<&str> = whole.text.lines().map(|l| l.split(':').next().unwrap()).collect();
        assert_eq!(
            lines,
            [
                "Working memory (kept by the harness from your tool results)",
                "failing_tests",
                "explored_files",
                "relevant_symbols",
                "patch_summary",
                "verified_facts",
                "open_questions"
            ],
            "a header, then the blocks in their fixed order"
        );

        // One token short: the oldest relevant symbol goes first.
        let tight = mem.render(whole.tokens - 1);
        assert!(tight.reduced && tight.tokens < whole.tokens);
        assert_eq!(tight.dropped_entries, 1);
        assert!(tight.dropped_blocks.is_empty());
        assert!(tight.text.contains("relevant_symbols: pager.py:9 page_count\n"), "{}", tight.text);

        // Room for little more than the failing tests: everything else goes, in drop order.
        let failing_line = whole.text.lines().nth(1).unwrap();
        let small = mem.render(estimate(HEADER) + estimate(&format!("{failing_line}\n")) + 2);
        assert_eq!(
            small.dropped_blocks,
            ["relevant_symbols", "explored_files", "verified_facts", "open_questions", "patch_summary"]
        );
        assert_eq!(small.text, format!("{HEADER}{failing_line}\n"));
        assert_eq!(small.tokens, estimate(&small.text));
        assert_eq!(small.raw_tokens, whole.tokens);

        // Too small for the header and one entry: nothing.
        let none = mem.render(estimate(HEADER));
        assert_eq!((none.text.as_str(), none.tokens, none.reduced), ("", 0, true));
        assert_eq!(none.dropped_blocks.len(), 6);

        let empty = WorkingMemory::new(TASK).render(1000);
        assert_eq!(empty, RenderedMemory::default(), "empty memory renders as nothing");
        assert!(WorkingMemory::new(TASK).is_empty() && !mem.is_empty());
    }

    #[test]
    fn task_words_split_identifiers_and_skip_noise() {
        assert_eq!(words("parseHTTPHeader page_count"), ["parse", "http", "header", "page", "count"]);
        assert_eq!(words("Fix the items in pager.py"), ["item", "pager"]);
        assert_eq!(words("class Page2Items: test_x"), ["page2", "item"]);
        // Letters beyond ASCII split and lowercase alike (a final capital sigma lowercases as such).
        assert_eq!(words("ÉtatsUnis straße ΣΑΣ"), ["état", "uni", "straße", "σας"]);
    }

    #[test]
    fn entries_stay_one_short_line() {
        let mut mem = WorkingMemory::new(TASK);
        let long = format!("denied by policy: {}\nsecond line", "x".repeat(400));
        mem.observe_refused(1, "read_file", &long);
        let entry = mem.entries(Block::OpenQuestions)[0];
        assert!(entry.len() <= MAX_ENTRY_BYTES && !entry.contains('\n'), "{entry}");
        assert!(entry.ends_with("..."));
    }
}
