//! The agent's tools at work: running a typed [`Call`] in the workspace.
//!
//! What the tools are, their names and arguments, lives in [`crate::action`]; this module
//! only executes them.
//!
//! Tools run only after [`super::policy::decide`] allowed the call. A tool failure (no match
//! for an edit, a missing file) is a result the model reads and can recover from, never an
//! error of the loop. Outputs may be large: the loop stores full outputs as artifacts and
//! shows the model a bounded preview.

use std::fmt::Write as _;
use std::path::Path;

use grep_regex::RegexMatcher;
use grep_searcher::Searcher;
use grep_searcher::sinks::UTF8;

use super::paths::{confine, is_secret_name, normalize};
use super::repomap::{RepoIndex, RepoMapView};
use crate::action::Call;
use crate::bench::Case;
use crate::process::{self, CommandSpec};
use crate::sandbox::Sandbox;

/// What a tool produced.
#[derive(Debug, Clone, Default)]
pub struct ToolOutput {
    pub ok: bool,
    pub text: String,
    pub modified: Vec<String>,
    pub read: Option<String>,
    /// The map the `repo_map` tool showed (for `repo_map_used`).
    pub repo_map: Option<RepoMapView>,
}

impl ToolOutput {
    fn ok(text: String) -> Self {
        ToolOutput { ok: true, text, ..Default::default() }
    }
    fn fail(text: impl Into<String>) -> Self {
        ToolOutput { ok: false, text: text.into(), ..Default::default() }
    }
}

/// Most entries `list_files` and `search_code` return before saying "more".
const MAX_ENTRIES: usize = 2000;

/// Estimated tokens of the `repo_map` tool's output: room for the few dozen most relevant
/// files with their symbols, well under the preview limit the loop shows the model.
pub const REPO_MAP_TOOL_BUDGET: usize = 1500;

/// Runs an allowed `call` in the workspace at `root` (canonical).
pub async fn execute(call: &Call, case: &Case, root: &Path, sandbox: &Sandbox) -> ToolOutput {
    match call {
        Call::ListFiles { path, max_depth } => list_files(root, path, *max_depth),
        Call::ReadFile { path, start_line, end_line } => read_file(root, path, *start_line, *end_line),
        Call::SearchCode { pattern, path, glob } => search_code(root, pattern, path, glob.as_deref()),
        Call::RepoMap { path, query } => repo_map(root, path, query.as_deref().unwrap_or(&case.prompt)),
        Call::EditFile { path, old, new } => edit_file(root, path, old, new),
        Call::WriteFile { path, content, overwrite } => write_file(root, path, content, *overwrite),
        Call::RunTests {} => {
            // The same runner and verdict as the judge's run (`score::run_tests`).
            let run = super::score::run_tests(case, root, None, sandbox).await;
            let timed_out = run.result.as_ref().is_ok_and(|o| o.timed_out);
            let text = mask_durations(&run.tool_text()).into_owned();
            ToolOutput { ok: run.result.is_ok() && !timed_out, text, ..Default::default() }
        }
        Call::RunCommand { argv } => run_argv(case, root, argv, false, sandbox).await,
        Call::Finish { answer } => ToolOutput::ok(format!("finished: {answer}")),
    }
}

fn walker(root: &Path, dir: &Path, max_depth: Option<usize>) -> ignore::Walk {
    let _ = root;
    ignore::WalkBuilder::new(dir)
        .hidden(false)
        .git_ignore(true)
        .require_git(false)
        .max_depth(max_depth)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(|e| e.file_name() != ".git")
        .build()
}

fn rel(root: &Path, p: &Path) -> String {
    p.strip_prefix(root).unwrap_or(p).to_string_lossy().into_owned()
}

fn list_files(root: &Path, path: &str, max_depth: usize) -> ToolOutput {
    let dir = match confine(root, path) {
        Ok(d) => d,
        Err(e) => return ToolOutput::fail(e),
    };
    if !dir.is_dir() {
        return ToolOutput::fail(format!("`{path}` is not a directory"));
    }
    let mut out = String::new();
    let mut n = 0;
    for entry in walker(root, &dir, Some(max_depth.max(1))).flatten() {
        if entry.depth() == 0 {
            continue;
        }
        n += 1;
        if n > MAX_ENTRIES {
            out.push_str("[more entries omitted; list a subdirectory]\n");
            break;
        }
        let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
        let _ = writeln!(out, "{}{}", rel(root, entry.path()), if is_dir { "/" } else { "" });
    }
    if out.is_empty() {
        out.push_str("(empty)\n");
    }
    ToolOutput::ok(out)
}

fn read_file(root: &Path, path: &str, start: Option<usize>, end: Option<usize>) -> ToolOutput {
    let file = match confine(root, path) {
        Ok(f) => f,
        Err(e) => return ToolOutput::fail(e),
    };
    let bytes = match std::fs::read(&file) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return ToolOutput::fail(format!("`{path}` does not exist; use list_files to see what does"));
        }
        Err(e) => return ToolOutput::fail(format!("cannot read `{path}`: {e}")),
    };
    let text = String::from_utf8_lossy(&bytes);
    let total = text.lines().count();
    let first = start.unwrap_or(1).max(1);
    let last = end.unwrap_or(total).min(total);
    let mut out = String::new();
    if first > total.max(1) || (end.is_some() && last < first) {
        return ToolOutput {
            ok: false,
            text: format!("line range {first}-{} is outside `{path}` ({total} lines)", end.unwrap_or(total)),
            read: Some(path.to_string()),
            ..Default::default()
        };
    }
    if start.is_some() || end.is_some() {
        let _ = writeln!(out, "{path} lines {first}-{last} of {total}");
    }
    for (i, line) in text.lines().enumerate().skip(first - 1).take(last + 1 - first) {
        let _ = writeln!(out, "{:>5}| {line}", i + 1);
    }
    ToolOutput { ok: true, text: out, read: Some(normalize(path)), ..Default::default() }
}

fn search_code(root: &Path, pattern: &str, path: &str, glob: Option<&str>) -> ToolOutput {
    let dir = match confine(root, path) {
        Ok(d) => d,
        Err(e) => return ToolOutput::fail(e),
    };
    let matcher = match RegexMatcher::new_line_matcher(pattern) {
        Ok(m) => m,
        Err(e) => return ToolOutput::fail(format!("invalid regex `{pattern}`: {e}")),
    };
    let glob = match glob.map(|g| globset::Glob::new(g).map(|g| g.compile_matcher())) {
        Some(Err(e)) => return ToolOutput::fail(format!("invalid glob: {e}")),
        Some(Ok(m)) => Some(m),
        None => None,
    };
    let mut out = String::new();
    let mut hits = 0usize;
    let mut searcher = Searcher::new();
    'walk: for entry in walker(root, &dir, None).flatten() {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let relpath = rel(root, entry.path());
        if let Some(g) = &glob
            && !g.is_match(entry.file_name())
            && !g.is_match(&relpath)
        {
            continue;
        }
        if is_secret_name(&entry.file_name().to_string_lossy()) {
            continue;
        }
        let mut stop = false;
        let _ = searcher.search_path(
            &matcher,
            entry.path(),
            UTF8(|line_no, line| {
                hits += 1;
                if hits > MAX_ENTRIES {
                    stop = true;
                    return Ok(false);
                }
                let _ = write!(out, "{relpath}:{line_no}: {}", crate::util::truncate_str(line, 300));
                if !line.ends_with('\n') {
                    out.push('\n');
                }
                Ok(true)
            }),
        );
        if stop {
            out.push_str("[more matches omitted; narrow the pattern or path]\n");
            break 'walk;
        }
    }
    if hits == 0 {
        out = format!("no matches for `{pattern}`\n");
    }
    ToolOutput::ok(out)
}

/// The ranked map of the workspace under `path`. The index is built afresh on every call: the
/// agent edits files between calls, and a build takes milliseconds on a case's workspace.
fn repo_map(root: &Path, path: &str, query: &str) -> ToolOutput {
    let dir = match confine(root, path) {
        Ok(d) => d,
        Err(e) => return ToolOutput::fail(e),
    };
    if !dir.is_dir() {
        return ToolOutput::fail(format!("`{path}` is not a directory"));
    }
    let view = RepoIndex::build(root).render(query, path, REPO_MAP_TOOL_BUDGET);
    ToolOutput { ok: true, text: view.text.clone(), repo_map: Some(view), ..Default::default() }
}

fn edit_file(root: &Path, path: &str, old: &str, new: &str) -> ToolOutput {
    let file = match confine(root, path) {
        Ok(f) => f,
        Err(e) => return ToolOutput::fail(e),
    };
    if old.is_empty() {
        return ToolOutput::fail("`old` is empty; give the exact text to replace (use write_file to create files)");
    }
    let text = match std::fs::read_to_string(&file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return ToolOutput::fail(format!("`{path}` does not exist; create it with write_file"));
        }
        Err(e) => return ToolOutput::fail(format!("cannot read `{path}`: {e}")),
    };
    let count = text.matches(old).count();
    if count != 1 {
        let hint = if count == 0 {
            "read the file and copy the exact text, including indentation"
        } else {
            "include more surrounding lines so that it matches exactly once"
        };
        return ToolOutput::fail(format!("`old` matches {count} times in `{path}`, expected exactly 1; {hint}"));
    }
    let updated = text.replacen(old, new, 1);
    if let Err(e) = std::fs::write(&file, updated) {
        return ToolOutput::fail(format!("cannot write `{path}`: {e}"));
    }
    ToolOutput { ok: true, text: format!("edited `{path}`"), modified: vec![normalize(path)], ..Default::default() }
}

fn write_file(root: &Path, path: &str, content: &str, overwrite: bool) -> ToolOutput {
    let file = match confine(root, path) {
        Ok(f) => f,
        Err(e) => return ToolOutput::fail(e),
    };
    if file.is_dir() {
        return ToolOutput::fail(format!("`{path}` is a directory"));
    }
    if file.exists() && !overwrite {
        return ToolOutput::fail(format!("`{path}` exists; pass overwrite: true to replace it, or use edit_file"));
    }
    if let Some(parent) = file.parent()
        && let Err(e) = std::fs::create_dir_all(parent)
    {
        return ToolOutput::fail(format!("cannot create the folder of `{path}`: {e}"));
    }
    if let Err(e) = std::fs::write(&file, content) {
        return ToolOutput::fail(format!("cannot write `{path}`: {e}"));
    }
    ToolOutput {
        ok: true,
        text: format!("wrote {} bytes to `{path}`", content.len()),
        modified: vec![normalize(path)],
        ..Default::default()
    }
}

/// Replaces elapsed-time figures in command output ("Ran 11 tests in 0.022s", "took 3ms")
/// with `<time>`. The output is part of the model's context: left raw, two runs of the same
/// cell would send different requests, defeating the response cache's replay mode and
/// providers' prompt caches, and adding noise the model cannot use.
pub fn mask_durations(text: &str) -> std::borrow::Cow<'_, str> {
    static DURATION: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"\b(in|took|after) \d+(?:\.\d+)?\s?(?:s|ms|sec|secs|seconds)\b").expect("valid regex")
    });
    DURATION.replace_all(text, "$1 <time>")
}

async fn run_argv(case: &Case, root: &Path, argv: &[String], is_tests: bool, sandbox: &Sandbox) -> ToolOutput {
    let spec = CommandSpec { limits: case.limits, ..CommandSpec::new(argv.to_vec(), root, case.timeout, sandbox) };
    match process::run(&spec).await {
        Ok(out) => {
            let text = mask_durations(&out.combined()).into_owned();
            // A failing test run is information, not a tool failure; a failing command is.
            let ok = if is_tests { !out.timed_out } else { out.success() };
            ToolOutput { ok, text, ..Default::default() }
        }
        Err(e) => ToolOutput::fail(format!("cannot start `{}`: {e}", argv.first().map(String::as_str).unwrap_or(""))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws() -> (tempfile::TempDir, std::path::PathBuf) {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.py"), "x = 1\ny = 1\nz = 2\n").unwrap();
        let root = d.path().canonicalize().unwrap();
        (d, root)
    }

    #[test]
    fn edit_requires_exactly_one_match() {
        let (_d, root) = ws();
        let many = edit_file(&root, "a.py", "= 1", "= 3");
        assert!(!many.ok);
        assert!(many.text.contains("matches 2 times"), "{}", many.text);
        let none = edit_file(&root, "a.py", "q = 9", "");
        assert!(none.text.contains("matches 0 times"), "{}", none.text);
        let one = edit_file(&root, "a.py", "y = 1", "y = 5");
        assert!(one.ok);
        assert_eq!(std::fs::read_to_string(root.join("a.py")).unwrap(), "x = 1\ny = 5\nz = 2\n");
    }

    #[test]
    fn write_refuses_to_overwrite_unless_asked() {
        let (_d, root) = ws();
        assert!(!write_file(&root, "a.py", "new", false).ok);
        assert!(write_file(&root, "a.py", "new", true).ok);
        assert!(write_file(&root, "pkg/b.py", "b", false).ok);
        assert_eq!(std::fs::read_to_string(root.join("pkg/b.py")).unwrap(), "b");
    }

    #[test]
    fn read_file_numbers_lines_and_honours_ranges() {
        let (_d, root) = ws();
        let out = read_file(&root, "a.py", Some(2), Some(3));
        assert!(out.ok);
        assert!(out.text.contains("    2| y = 1") && out.text.contains("    3| z = 2") && !out.text.contains("x = 1"));
        assert!(!read_file(&root, "a.py", Some(9), None).ok);
    }

    #[test]
    fn search_finds_lines_and_skips_ignored_files() {
        let (_d, root) = ws();
        std::fs::write(root.join(".gitignore"), "build/\n").unwrap();
        std::fs::create_dir(root.join("build")).unwrap();
        std::fs::write(root.join("build/a.py"), "y = 1\n").unwrap();
        let out = search_code(&root, r"y = \d", ".", None);
        assert!(out.text.contains("a.py:2: y = 1"), "{}", out.text);
        assert!(!out.text.contains("build/"), "{}", out.text);
        assert!(!search_code(&root, "(", ".", None).ok);
    }

    #[test]
    fn durations_in_command_output_are_masked() {
        let out = "....\n----------------------------------------------------------------------\nRan 11 tests in 0.022s\n\nOK\n";
        assert_eq!(mask_durations(out), out.replace("in 0.022s", "in <time>"));
        assert_eq!(mask_durations("5 passed in 1.20s; took 3ms"), "5 passed in <time>; took <time>");
        assert_eq!(mask_durations("version 1.2s3 unchanged"), "version 1.2s3 unchanged");
    }
}
