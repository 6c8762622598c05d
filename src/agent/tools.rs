//! The agent's tools at work: running a typed [`Call`] in the workspace.
//!
//! What the tools are, their names and arguments, lives in [`crate::action`]; this module
//! only executes them.
//!
//! Tools run only after [`super::policy::decide`] allowed the call. A tool failure (no match
//! for an edit, a missing file) is a result the model reads and can recover from, never an
//! error of the loop. Outputs may be large: the loop stores full outputs as artifacts and
//! shows the model a bounded preview.
//!
//! The file tools go through [`super::paths`], which has the kernel resolve every path beneath
//! the workspace root and opens only regular files with a single link: they never follow a
//! symlink out, never block on a fifo, and never reach a file outside through a hard link,
//! even when the policy was fooled or the workspace changed after it decided. Each refusal is
//! a tool failure whose text says why. Writes go through the descriptor that was checked.

use std::fmt::Write as _;
use std::io::{Read as _, Write as _};
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};

use grep_regex::RegexMatcher;
use grep_searcher::Searcher;
use grep_searcher::sinks::UTF8;

use super::paths::{self, Access, PathError, is_secret_name, normalize};
use super::repomap::{RepoIndex, RepoMapView};
use crate::action::Call;
use crate::bench::Case;
use crate::process;
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
pub(crate) const MAX_ENTRIES: usize = 2000;

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
        Call::RunCommand { argv } => run_command(case, root, argv, sandbox).await,
        Call::Finish { answer } => ToolOutput::ok(format!("finished: {answer}")),
        // The loop runs a delegation itself (`super::delegate::run`): it needs the model.
        Call::DelegateReadonly { .. } => ToolOutput::fail("delegate_readonly is run by the agent loop, not here"),
    }
}

fn walker(dir: &Path, max_depth: Option<usize>) -> ignore::Walk {
    // `follow_links(false)` is the default, said here because it is load-bearing: a symlink
    // below `dir` is listed as a name, never entered, so no walk leaves the workspace. The user's
    // global git excludes do not count: they would make what the agent sees depend on the
    // machine (and cost reading git's config files on every call). Parent folders' ignore files
    // do, so that listing a subfolder honours the workspace's top `.gitignore`.
    ignore::WalkBuilder::new(dir)
        .hidden(false)
        .git_ignore(true)
        .git_global(false)
        .require_git(false)
        .follow_links(false)
        .max_depth(max_depth)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(|e| e.file_name() != ".git")
        .build()
}

fn rel(root: &Path, p: &Path) -> String {
    p.strip_prefix(root).unwrap_or(p).to_string_lossy().into_owned()
}

/// The folder `path` names, resolved beneath the root by the kernel. A missing folder keeps
/// the message it always had, so the text the model reads (and cache keys) do not change.
fn folder(root: &Path, path: &str) -> Result<PathBuf, String> {
    paths::open_dir(root, path).map_err(|e| match e {
        PathError::NotFound(_) | PathError::NotDirOnTheWay(_) => format!("`{path}` is not a directory"),
        e => e.to_string(),
    })
}

fn list_files(root: &Path, path: &str, max_depth: usize) -> ToolOutput {
    let dir = match folder(root, path) {
        Ok(d) => d,
        Err(why) => return ToolOutput::fail(why),
    };
    let mut out = String::new();
    let mut n = 0;
    for entry in walker(&dir, Some(max_depth.max(1))).flatten() {
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
    let mut opened = match paths::open_file(root, path, Access::Read) {
        Ok(f) => f,
        Err(PathError::NotFound(_)) => {
            return ToolOutput::fail(format!("`{path}` does not exist; use list_files to see what does"));
        }
        Err(e) => return ToolOutput::fail(e.to_string()),
    };
    let mut bytes = Vec::new();
    if let Err(e) = opened.read_to_end(&mut bytes) {
        return ToolOutput::fail(format!("cannot read `{path}`: {e}"));
    }
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
    let dir = match folder(root, path) {
        Ok(d) => d,
        Err(why) => return ToolOutput::fail(why),
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
    let mut refused = Vec::new();
    let mut hits = 0usize;
    let mut searcher = Searcher::new();
    // Opened once for the walk: each file is then opened beneath it, checked like read_file.
    let opened_root = paths::Root::open(root);
    'walk: for entry in walker(&dir, None).flatten() {
        // The walker's type is the entry's own (lstat): symlinks, fifos, sockets and devices
        // are skipped here, before anything is opened.
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
        // Opened beneath the root and checked like read_file: a hard link to a file outside,
        // or a file swapped for a fifo since the walk saw it, is refused, not searched.
        let opened = match opened_root.as_ref().map(|r| r.open_file(&relpath, Access::Read)) {
            Ok(Ok(f)) => f,
            // The root itself could not be opened: every file says so, as before.
            Err(e) => {
                refused.push(e.to_string());
                continue;
            }
            Ok(Err(e)) => match e {
                PathError::Secret { .. } => continue,
                e => {
                    refused.push(e.to_string());
                    continue;
                }
            },
        };
        let mut stop = false;
        let _ = searcher.search_file(
            &matcher,
            &opened,
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
    for why in refused {
        let _ = writeln!(out, "[not searched: {why}]");
    }
    ToolOutput::ok(out)
}

/// The ranked map of the workspace under `path`. The index is built afresh on every call: the
/// agent edits files between calls, and a build takes milliseconds on a case's workspace.
fn repo_map(root: &Path, path: &str, query: &str) -> ToolOutput {
    if let Err(why) = folder(root, path) {
        return ToolOutput::fail(why);
    }
    let view = RepoIndex::build(root).render(query, path, REPO_MAP_TOOL_BUDGET);
    ToolOutput { ok: true, text: view.text.clone(), repo_map: Some(view), ..Default::default() }
}

/// Replaces the whole content of `file` through its descriptor: the file that was checked is
/// the file that is written, whatever its path names by now.
fn overwrite(file: &std::fs::File, content: &[u8]) -> std::io::Result<()> {
    file.set_len(0)?;
    file.write_all_at(content, 0)
}

fn edit_file(root: &Path, path: &str, old: &str, new: &str) -> ToolOutput {
    if old.is_empty() {
        return ToolOutput::fail("`old` is empty; give the exact text to replace (use write_file to create files)");
    }
    let mut opened = match paths::open_file(root, path, Access::Write) {
        Ok(f) => f,
        Err(PathError::NotFound(_)) => {
            return ToolOutput::fail(format!("`{path}` does not exist; create it with write_file"));
        }
        Err(e) => return ToolOutput::fail(e.to_string()),
    };
    let mut text = String::new();
    if let Err(e) = opened.read_to_string(&mut text) {
        return ToolOutput::fail(format!("cannot read `{path}`: {e}"));
    }
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
    if let Err(e) = overwrite(&opened, updated.as_bytes()) {
        return ToolOutput::fail(format!("cannot write `{path}`: {e}"));
    }
    ToolOutput { ok: true, text: format!("edited `{path}`"), modified: vec![normalize(path)], ..Default::default() }
}

fn write_file(root: &Path, path: &str, content: &str, overwrite_existing: bool) -> ToolOutput {
    let written = match paths::create_file(root, path) {
        Ok(created) => (&created).write_all(content.as_bytes()),
        Err(PathError::Exists(_)) if !overwrite_existing => {
            return match paths::open_dir(root, path) {
                Ok(_) => ToolOutput::fail(format!("`{path}` is a directory")),
                Err(_) => {
                    ToolOutput::fail(format!("`{path}` exists; pass overwrite: true to replace it, or use edit_file"))
                }
            };
        }
        Err(PathError::Exists(_)) => match paths::open_file(root, path, Access::Write) {
            Ok(existing) => overwrite(&existing, content.as_bytes()),
            Err(e) => return ToolOutput::fail(e.to_string()),
        },
        Err(e) => return ToolOutput::fail(e.to_string()),
    };
    if let Err(e) = written {
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

async fn run_command(case: &Case, root: &Path, argv: &[String], sandbox: &Sandbox) -> ToolOutput {
    match process::run(&super::score::command_spec(case, argv.to_vec(), root, sandbox)).await {
        Ok(out) => {
            let text = mask_durations(&out.combined()).into_owned();
            ToolOutput { ok: out.success(), text, ..Default::default() }
        }
        Err(e) => ToolOutput::fail(format!("cannot start `{}`: {e}", argv.first().map(String::as_str).unwrap_or(""))),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

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

    /// A workspace `ws/` beside files it must never reach: `outside.py`, an outside `.env` and
    /// an outside folder `outdir/`. Returns (guard, root, outer).
    fn escape_ws() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let outer = tempfile::tempdir().unwrap();
        let o = outer.path().canonicalize().unwrap();
        std::fs::create_dir_all(o.join("ws/src")).unwrap();
        std::fs::create_dir_all(o.join("outdir")).unwrap();
        std::fs::write(o.join("ws/src/a.py"), "x = 1\n").unwrap();
        std::fs::write(o.join("outside.py"), "def outside_only_symbol():\n    return 'outside'\n").unwrap();
        std::fs::write(o.join(".env"), "TOKEN=outside-secret\n").unwrap();
        std::fs::write(o.join("outdir/inner.py"), "OUTDIR = 'outside'\n").unwrap();
        (outer, o.join("ws"), o)
    }

    /// Runs `f` on another thread and fails the test if it has not returned within 5 s: a tool
    /// that blocks (on a fifo) must fail the test, not hang it.
    fn within_5s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(std::time::Duration::from_secs(5)).expect("the tool blocked for more than 5 s")
    }

    #[test]
    fn a_hard_link_to_an_outside_file_is_neither_read_nor_modified() {
        let (_g, root, outer) = escape_ws();
        std::fs::hard_link(outer.join("outside.py"), root.join("linked.py")).unwrap();
        let refusal = "`linked.py` has 2 hard links; the tools refuse hard-linked files, since another link may be a file outside the workspace";
        let read = read_file(&root, "linked.py", None, None);
        assert!(!read.ok);
        assert_eq!(read.text, refusal);
        let edit = edit_file(&root, "linked.py", "'outside'", "'pwned'");
        assert_eq!((edit.ok, edit.text.as_str()), (false, refusal));
        let write = write_file(&root, "linked.py", "pwned", true);
        assert_eq!((write.ok, write.text.as_str()), (false, refusal));
        assert_eq!(
            std::fs::read_to_string(outer.join("outside.py")).unwrap(),
            "def outside_only_symbol():\n    return 'outside'\n",
            "the outside file is unchanged"
        );
        let search = search_code(&root, "outside", ".", None);
        assert!(search.text.starts_with("no matches for `outside`"), "{}", search.text);
        assert!(search.text.contains(&format!("[not searched: {refusal}]")), "{}", search.text);
        let map = repo_map(&root, ".", "outside_only_symbol");
        assert!(map.ok && !map.text.contains("outside_only_symbol"), "{}", map.text);
    }

    #[test]
    fn a_hard_link_to_an_outside_env_is_refused_whatever_its_name() {
        let (_g, root, outer) = escape_ws();
        std::fs::hard_link(outer.join(".env"), root.join("notes.txt")).unwrap();
        let read = read_file(&root, "notes.txt", None, None);
        assert!(!read.ok && read.text.contains("`notes.txt` has 2 hard links"), "{}", read.text);
        let search = search_code(&root, "TOKEN", ".", None);
        assert!(!search.text.contains("outside-secret"), "{}", search.text);
    }

    #[test]
    fn symlinks_out_of_the_workspace_are_refused() {
        let (_g, root, outer) = escape_ws();
        std::os::unix::fs::symlink("../outside.py", root.join("escape.py")).unwrap();
        std::os::unix::fs::symlink(outer.join("outside.py"), root.join("absolute.py")).unwrap();
        std::os::unix::fs::symlink("../outdir", root.join("escape_dir")).unwrap();
        std::os::unix::fs::symlink("../new_outside.py", root.join("dangling.py")).unwrap();
        for path in ["escape.py", "absolute.py", "escape_dir/inner.py"] {
            let read = read_file(&root, path, None, None);
            assert_eq!(read.text, format!("`{path}` resolves outside the workspace (symlink escape)"));
            assert!(!edit_file(&root, path, "outside", "pwned").ok);
            assert!(!write_file(&root, path, "pwned", true).ok);
        }
        let create = write_file(&root, "escape_dir/new.py", "pwned", false);
        assert_eq!(create.text, "`escape_dir/new.py` resolves outside the workspace (symlink escape)");
        let dangling = write_file(&root, "dangling.py", "pwned", true);
        assert!(!dangling.ok, "{}", dangling.text);
        assert!(!outer.join("new_outside.py").exists() && !outer.join("outdir/new.py").exists());
        assert!(std::fs::read_to_string(outer.join("outside.py")).unwrap().contains("'outside'"));
        assert!(std::fs::read_to_string(outer.join("outdir/inner.py")).unwrap().contains("'outside'"));

        let listed = list_files(&root, "escape_dir", 2);
        assert_eq!(listed.text, "`escape_dir` resolves outside the workspace (symlink escape)");
        let all = list_files(&root, ".", 4);
        assert!(all.text.contains("escape_dir\n") && !all.text.contains("inner.py"), "{}", all.text);
        let search = search_code(&root, "outside", ".", None);
        assert!(!search.text.contains("OUTDIR") && !search.text.contains("return"), "{}", search.text);
        assert!(!search_code(&root, "outside", "escape_dir", None).ok);
        assert!(!repo_map(&root, "escape_dir", "x").ok);
    }

    #[test]
    fn symlinks_that_stay_inside_keep_working() {
        let (_g, root, _outer) = escape_ws();
        std::os::unix::fs::symlink("src/a.py", root.join("alias.py")).unwrap();
        std::os::unix::fs::symlink("src", root.join("lib")).unwrap();
        assert_eq!(read_file(&root, "alias.py", None, None).text, "    1| x = 1\n");
        assert_eq!(read_file(&root, "lib/a.py", None, None).text, "    1| x = 1\n");
        assert!(edit_file(&root, "alias.py", "x = 1", "x = 2").ok);
        assert_eq!(std::fs::read_to_string(root.join("src/a.py")).unwrap(), "x = 2\n");
        assert!(write_file(&root, "lib/b.py", "y = 1\n", false).ok);
        assert_eq!(std::fs::read_to_string(root.join("src/b.py")).unwrap(), "y = 1\n");
        assert!(list_files(&root, "lib", 1).text.contains("b.py"));
    }

    #[test]
    fn secrets_and_git_are_judged_by_the_resolved_name() {
        let (_g, root, _outer) = escape_ws();
        std::fs::write(root.join(".env"), "TOKEN=inside-secret\n").unwrap();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::os::unix::fs::symlink(".env", root.join("notes.txt")).unwrap();
        std::os::unix::fs::symlink(".git/hooks", root.join("hooks")).unwrap();
        let read = read_file(&root, "notes.txt", None, None);
        assert_eq!(read.text, "`notes.txt` resolves to `.env`, which holds secrets; it is never readable or writable");
        assert_eq!(read_file(&root, ".env", None, None).text, "`.env` holds secrets; it is never readable or writable");
        let hook = write_file(&root, "hooks/pre-commit", "#!/bin/sh\n", false);
        assert_eq!(
            hook.text,
            "`hooks/pre-commit` resolves to `.git/hooks/pre-commit`, inside .git, which is never writable"
        );
        assert!(!root.join(".git/hooks/pre-commit").exists());
        let nested = write_file(&root, "hooks/sub/x", "x", false);
        assert!(!nested.ok && !root.join(".git/hooks/sub").exists(), "no folder is created inside .git");
    }

    #[test]
    fn a_fifo_fails_promptly_and_never_blocks() {
        let (_g, root, _outer) = escape_ws();
        rustix::fs::mknodat(rustix::fs::CWD, root.join("pipe.py"), rustix::fs::FileType::Fifo, 0o644.into(), 0)
            .unwrap();
        let r = root.clone();
        let read = within_5s(move || read_file(&r, "pipe.py", None, None));
        assert_eq!(read.text, "`pipe.py` is a fifo; the tools read and write regular files only");
        let r = root.clone();
        let edit = within_5s(move || edit_file(&r, "pipe.py", "a", "b"));
        assert_eq!(edit.text, "`pipe.py` is a fifo; the tools read and write regular files only");
        let r = root.clone();
        let write = within_5s(move || write_file(&r, "pipe.py", "a", true));
        assert_eq!(write.text, "`pipe.py` is a fifo; the tools read and write regular files only");
        let r = root.clone();
        let search = within_5s(move || search_code(&r, "x", ".", None));
        assert!(search.text.contains("src/a.py:1: x = 1"), "{}", search.text);
        let r = root.clone();
        let map = within_5s(move || repo_map(&r, ".", "x"));
        assert!(map.ok);
        let r = root.clone();
        assert!(within_5s(move || list_files(&r, ".", 2)).text.contains("pipe.py"));
    }

    #[test]
    fn sockets_and_devices_are_not_files_to_read() {
        let (_g, root, _outer) = escape_ws();
        let _listener = std::os::unix::net::UnixListener::bind(root.join("agent.sock")).unwrap();
        let r = root.clone();
        let read = within_5s(move || read_file(&r, "agent.sock", None, None));
        assert_eq!(read.text, "`agent.sock` is a socket; the tools read and write regular files only");
        // /dev/zero's numbers (1, 5): made where CAP_MKNOD allows, as in a root container.
        let dev = rustix::fs::FileType::CharacterDevice;
        if rustix::fs::mknodat(rustix::fs::CWD, root.join("zero.py"), dev, 0o644.into(), rustix::fs::makedev(1, 5))
            .is_ok()
        {
            let r = root.clone();
            let zero = within_5s(move || read_file(&r, "zero.py", None, None));
            assert_eq!(zero.text, "`zero.py` is a character device; the tools read and write regular files only");
            let r = root.clone();
            assert!(within_5s(move || search_code(&r, "x", ".", None)).text.contains("src/a.py:1"));
        }
        // A link to a device outside leaves the root.
        std::os::unix::fs::symlink("/dev/zero", root.join("zero")).unwrap();
        let r = root.clone();
        let zero = within_5s(move || read_file(&r, "zero", None, None));
        assert_eq!(zero.text, "`zero` resolves outside the workspace (symlink escape)");
    }

    #[test]
    fn new_files_are_created_beneath_the_root_and_never_over_something() {
        let (_g, root, _outer) = escape_ws();
        assert!(write_file(&root, "pkg/sub/mod.py", "m = 1\n", false).ok);
        assert_eq!(std::fs::read_to_string(root.join("pkg/sub/mod.py")).unwrap(), "m = 1\n");
        assert_eq!(write_file(&root, "pkg", "x", false).text, "`pkg` is a directory");
        assert_eq!(write_file(&root, "pkg", "x", true).text, "`pkg` is a directory");
        assert_eq!(
            write_file(&root, "src/a.py/x.py", "x", false).text,
            "`src/a.py/x.py`: a folder on the way is a file"
        );
        assert!(write_file(&root, "pkg/sub/mod.py", "m = 2\n", true).ok);
        assert_eq!(std::fs::read_to_string(root.join("pkg/sub/mod.py")).unwrap(), "m = 2\n");
    }

    #[test]
    fn durations_in_command_output_are_masked() {
        let out = "....\n----------------------------------------------------------------------\nRan 11 tests in 0.022s\n\nOK\n";
        assert_eq!(mask_durations(out), out.replace("in 0.022s", "in <time>"));
        assert_eq!(mask_durations("5 passed in 1.20s; took 3ms"), "5 passed in <time>; took <time>");
        assert_eq!(mask_durations("version 1.2s3 unchanged"), "version 1.2s3 unchanged");
    }
}
