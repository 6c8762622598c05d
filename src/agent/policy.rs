//! The permission gate: the one place that decides whether a tool call may run.
//!
//! Every call is decided here before it runs, and the decision is recorded in the trace before
//! the result. The policy is the auditable first line, not the last: what an allowed program
//! does once it runs is contained by the sandbox, and what a file tool opens is checked again
//! by [`super::paths`] when it runs. Denying here still matters: a denial is a trace event the
//! reports count, and the model reads why.
//!
//! Paths are resolved beneath the workspace by the kernel ([`paths::resolve`]): no absolute
//! paths, no `..`, no symlink that resolves outside. Secrets are never readable. `.git` is never
//! writable. `run_command` starts only allowlisted programs, git only read-only, and never a
//! network tool. Its arguments are checked as paths wherever a path can hide: positional
//! arguments, the value after `=` (`--output=/abs`, `of=/abs`), the value joined to a short
//! option (`-o/abs`, `-ro/abs`), the value after a long option (`--output /abs`, which is the
//! next argument). A secret is an argument that names an existing secret file in the
//! workspace, by its spelling or after its symlinks are resolved; a string that merely contains
//! `.env` (`os.environ`) is not. Code given to an interpreter (`python3 -c CODE`) is not a path
//! and is not read as one. Options that run another program or write a file of their own
//! (`sort --compress-program`, `git --output`) are denied by name, abbreviations included.

use std::path::Path;

use super::paths::{self, has_git_component, has_secret_component};
use crate::action::Call;
use crate::bench::Case;

/// The decision on one call.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Allow,
    Deny(String),
}

/// Programs that reach the network; denied even if a case allowlists them.
pub const NETWORK_PROGRAMS: &[&str] = &[
    "curl", "wget", "nc", "ncat", "netcat", "ssh", "scp", "sftp", "rsync", "ftp", "telnet", "pip", "pip3", "npm",
    "npx", "yarn", "apt", "apt-get", "socat", "nslookup", "dig", "ping",
];

/// git subcommands that only read.
pub const READ_ONLY_GIT: &[&str] = &["status", "diff", "log", "show", "ls-files"];

/// git subcommands a multi-session case also allows: the agent keeps its work in a repository
/// of its own inside the workspace (`git init`, then `add` and `commit` each session). They
/// write only `.git` and the index; `.git` stays out of reach of the file tools.
pub const SESSION_GIT: &[&str] = &["init", "add", "commit"];

/// Python modules that fetch or serve over the network (a submodule of one counts as it).
const NETWORK_PY_MODULES: &[&str] = &["pip", "ensurepip", "http.server", "urllib.request", "ftplib", "smtplib"];

/// Long options denied for a program whatever their value, with the reason the model reads.
/// getopt_long and git's option parser accept any unambiguous abbreviation (`--compress=bash`,
/// `--outp=x`), so an option given as a prefix of one of these names is denied too.
const DENIED_OPTIONS: &[(&str, &str, &str)] = &[
    ("sort", "compress-program", "runs a program of the caller's choice"),
    ("sort", "files0-from", "takes the files to read from a file, past the argument checks"),
    ("wc", "files0-from", "takes the files to read from a file, past the argument checks"),
    ("git", "output", "writes a file of its own choosing; use write_file"),
    ("git", "ext-diff", "runs an external diff program"),
    ("git", "template", "copies hooks from a folder of the caller's choice into .git"),
    ("git", "separate-git-dir", "puts the repository outside the workspace"),
];

/// Options and operands through which a program writes a file: these are checked as writes
/// (inside the workspace, not in `.git`, not a secret). `(program, short option, long option,
/// short options that take a value, long options that take a separate value)`.
struct Outputs {
    program: &'static str,
    short: Option<char>,
    long: Option<&'static str>,
    short_with_value: &'static str,
    long_with_value: &'static [&'static str],
    /// The operand (0-based) that names an output file, as uniq's second.
    operand: Option<usize>,
}

const OUTPUTS: &[Outputs] = &[
    Outputs {
        program: "sort",
        short: Some('o'),
        long: Some("output"),
        short_with_value: "kostST",
        long_with_value: &[
            "key",
            "output",
            "field-separator",
            "buffer-size",
            "temporary-directory",
            "compress-program",
            "files0-from",
            "random-source",
            "batch-size",
            "parallel",
            "sort",
        ],
        operand: None,
    },
    Outputs {
        program: "uniq",
        short: None,
        long: None,
        short_with_value: "fsw",
        long_with_value: &["skip-fields", "skip-chars", "check-chars"],
        operand: Some(1),
    },
];

/// Decides `call` for `case` in the workspace at `root` (canonical).
pub fn decide(call: &Call, case: &Case, root: &Path) -> Decision {
    let tool = call.tool();
    if !case.allowed_tools.contains(&tool) {
        let allowed: Vec<&str> = case.allowed_tools.iter().map(|t| t.as_str()).collect();
        return Decision::Deny(format!(
            "tool `{}` is not allowed in this case (allowed: {})",
            tool.as_str(),
            allowed.join(", ")
        ));
    }
    match call {
        Call::ListFiles { path, .. } | Call::RepoMap { path, .. } | Call::SearchCode { path, .. } => {
            match resolve(root, path) {
                Ok(_) => Decision::Allow,
                Err(e) => Decision::Deny(e),
            }
        }
        Call::ReadFile { path, .. } => check_read(root, path),
        Call::EditFile { path, .. } | Call::WriteFile { path, .. } => check_write(root, path),
        Call::RunTests {} | Call::Finish { .. } => Decision::Allow,
        // The child it starts is gated call by call (`super::delegate`); here only the question.
        Call::DelegateReadonly { question, .. } if question.trim().is_empty() => {
            Decision::Deny("the question is empty; ask what the helper should find out".into())
        }
        Call::DelegateReadonly { .. } => Decision::Allow,
        Call::RunCommand { argv } => decide_command(argv, case, root),
    }
}

/// The kernel's resolution of `rel`, as a denial reason when it leaves the workspace. A path
/// that does not resolve for another reason (a file where a folder should be) is the tool's
/// to report: it is allowed here and fails there with the same rules.
fn resolve(root: &Path, rel: &str) -> Result<Option<paths::Resolved>, String> {
    match paths::resolve(root, rel) {
        Ok(r) => Ok(Some(r)),
        Err(e) if e.leaves_workspace() => Err(e.to_string()),
        Err(_) => Ok(None),
    }
}

/// A tool's path names a secret when any component of it, as given or as resolved, is a
/// secret name: the argument of a file tool is a path, whether or not it exists yet.
fn check_read(root: &Path, rel: &str) -> Decision {
    let resolved = match resolve(root, rel) {
        Ok(r) => r,
        Err(e) => return Decision::Deny(e),
    };
    if has_secret_component(rel) || resolved.is_some_and(|r| has_secret_component(&r.rel)) {
        return Decision::Deny(format!("`{rel}` holds secrets and is never readable"));
    }
    Decision::Allow
}

fn check_write(root: &Path, rel: &str) -> Decision {
    let resolved = match resolve(root, rel) {
        Ok(r) => r,
        Err(e) => return Decision::Deny(e),
    };
    let resolved = resolved.map(|r| r.rel).unwrap_or_default();
    if has_git_component(rel) || has_git_component(&resolved) {
        return Decision::Deny(format!("`{rel}` is inside .git, which is never writable"));
    }
    if has_secret_component(rel) || has_secret_component(&resolved) {
        return Decision::Deny(format!("`{rel}` holds secrets and is never writable"));
    }
    Decision::Allow
}

fn decide_command(argv: &[String], case: &Case, root: &Path) -> Decision {
    let Some(program) = argv.first() else {
        return Decision::Deny("argv is empty; give a program and its arguments".into());
    };
    if program.contains('/') {
        return Decision::Deny(format!("`{program}`: give a program name from the allowlist, not a path"));
    }
    if NETWORK_PROGRAMS.contains(&program.as_str()) {
        return Decision::Deny(format!("`{program}` reaches the network; network tools are never allowed"));
    }
    if !case.allowed_programs.iter().any(|p| p == program) {
        return Decision::Deny(format!(
            "program `{program}` is not on this case's allowlist ({})",
            case.allowed_programs.join(", ")
        ));
    }
    let args = &argv[1..];
    if program == "git" {
        let sub = args.first().map(String::as_str).unwrap_or("");
        let mut allowed: Vec<&str> = READ_ONLY_GIT.to_vec();
        if case.sessions.is_some() {
            allowed.extend(SESSION_GIT);
        }
        if sub.starts_with('-') {
            // -c, -C, --exec-path, --git-dir... change what git runs or where it looks.
            return Decision::Deny(format!(
                "`git {sub}`: git options before the subcommand are not allowed; allowed: git {}",
                allowed.join(", git ")
            ));
        }
        if !allowed.contains(&sub) {
            let what = if case.sessions.is_some() { "allowed here" } else { "read-only" };
            return Decision::Deny(format!("`git {sub}` is not {what}; allowed: git {}", allowed.join(", git ")));
        }
    }
    let mut code_arg = None;
    if program.starts_with("python") {
        match python_invocation(args) {
            Python::Module(module) if is_network_module(module) => {
                return Decision::Deny(format!(
                    "`python3 -m {module}` reaches the network or installs packages; not allowed"
                ));
            }
            Python::Code(i) => code_arg = Some(i),
            _ => {}
        }
    }
    if let Some(reason) = denied_option(program, args) {
        return Decision::Deny(reason);
    }
    for (i, arg) in args.iter().enumerate() {
        if code_arg == Some(i) {
            continue;
        }
        if let Err(reason) = check_argument(root, program, arg) {
            return Decision::Deny(reason);
        }
    }
    if let Some(outputs) = OUTPUTS.iter().find(|o| o.program == program) {
        for target in output_files(outputs, args) {
            if let Decision::Deny(reason) = check_write(root, target) {
                return Decision::Deny(format!("`{program}` would write `{target}`: {reason}"));
            }
        }
    }
    Decision::Allow
}

/// What a python command line runs, by CPython's own option rules: short options may be
/// joined (`-Bm pip`, `-mpip`); `-c` and `-m` take the rest of their argument or the next
/// one, and end the interpreter's options.
#[derive(Debug, PartialEq)]
enum Python<'a> {
    Module(&'a str),
    /// The index (in the arguments after the program) of the argument holding the code.
    Code(usize),
    Other,
}

fn python_invocation(args: &[String]) -> Python<'_> {
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        if arg == "--" || arg == "-" || !arg.starts_with('-') {
            return Python::Other;
        }
        if arg.starts_with("--") {
            // --check-hash-based-pycs is the one long option with a separate value.
            i += if arg == "--check-hash-based-pycs" { 2 } else { 1 };
            continue;
        }
        for (at, flag) in arg.char_indices().skip(1) {
            let rest = &arg[at + flag.len_utf8()..];
            match flag {
                'c' => return Python::Code(if rest.is_empty() { i + 1 } else { i }),
                'm' => {
                    let module = if rest.is_empty() { args.get(i + 1).map(String::as_str) } else { Some(rest) };
                    return module.map_or(Python::Other, Python::Module);
                }
                'W' | 'X' => {
                    if rest.is_empty() {
                        i += 1;
                    }
                    break;
                }
                _ => {}
            }
        }
        i += 1;
    }
    Python::Other
}

fn is_network_module(module: &str) -> bool {
    NETWORK_PY_MODULES.iter().any(|m| module == *m || module.strip_prefix(m).is_some_and(|r| r.starts_with('.')))
}

/// The long option name of `arg` (`--name` or `--name=value`), if it is one.
fn long_name(arg: &str) -> Option<&str> {
    let name = arg.strip_prefix("--")?;
    let name = name.split_once('=').map_or(name, |(n, _)| n);
    (!name.is_empty()).then_some(name)
}

/// `name` as given can only mean `full`: equal, or an abbreviation of at least two letters.
fn abbreviates(name: &str, full: &str) -> bool {
    name == full || (name.len() >= 2 && full.starts_with(name))
}

fn denied_option(program: &str, args: &[String]) -> Option<String> {
    for arg in args.iter().take_while(|a| *a != "--") {
        let Some(name) = long_name(arg) else { continue };
        for (_, option, why) in DENIED_OPTIONS.iter().filter(|(p, ..)| *p == program) {
            if abbreviates(name, option) {
                return Some(format!("`{program} --{option}` {why}; not allowed (argument `{arg}`)"));
            }
        }
    }
    None
}

/// Every spelling under which `arg` may hand a path to its program, each checked like a
/// positional path: the argument itself unless it is an option; the value after `=`; for a
/// short option, what follows its letter. In a cluster (`-ro/abs`) the value may start after
/// any letter, so the cluster is read as a path from its first `/`, and each of its tails is
/// resolved; a one-character value (`cut -d/`, `sort -t/`) is a delimiter, not a path. A git
/// `REV:path` names a committed file, which may be a secret that no longer exists on disk.
fn check_argument(root: &Path, program: &str, arg: &str) -> Result<(), String> {
    let deny_secret = |spelling: &str| Err(format!("argument `{arg}` names a secret file (`{spelling}`)"));
    let mut whole: Vec<&str> = Vec::new();
    let mut tails: Vec<&str> = Vec::new();
    if let Some(rest) = arg.strip_prefix("--") {
        if let Some((_, value)) = rest.split_once('=') {
            whole.push(value);
        }
    } else if arg.len() > 1 && arg.starts_with('-') {
        if let Some((_, value)) = arg.split_once('=') {
            whole.push(value);
        }
        if let Some(slash) = arg.find('/')
            && arg.len() - slash > 1
        {
            whole.push(&arg[slash..]);
        }
        let body = &arg[1..];
        tails.extend(body.char_indices().skip(1).map(|(at, _)| &body[at..]).filter(|t| t.chars().count() > 1));
    } else {
        whole.push(arg);
        if let Some((_, value)) = arg.split_once('=') {
            whole.push(value);
        }
        if program == "git"
            && let Some((_, committed)) = arg.split_once(':')
            && has_secret_component(committed)
        {
            return deny_secret(committed);
        }
    }
    for spelling in whole {
        if Path::new(spelling).is_absolute() {
            return Err(format!("argument `{arg}` is an absolute path; stay inside the workspace"));
        }
        if spelling.split('/').any(|c| c == "..") {
            return Err(format!("argument `{arg}` contains `..`; stay inside the workspace"));
        }
        if names_secret(root, spelling).map_err(|e| format!("argument `{arg}`: {e}"))? {
            return deny_secret(spelling);
        }
    }
    for tail in tails {
        if !tail.split('/').any(|c| c == "..")
            && names_secret(root, tail).map_err(|e| format!("argument `{arg}`: {e}"))?
        {
            return deny_secret(tail);
        }
    }
    Ok(())
}

/// True when `spelling` names an existing secret in the workspace, by its components or by
/// what its symlinks resolve to; an error when it resolves outside the workspace. A name
/// that does not exist names nothing: `os.environ` is not `.env`.
fn names_secret(root: &Path, spelling: &str) -> Result<bool, String> {
    match paths::resolve_existing(root, spelling) {
        Ok(Some(resolved)) => Ok(has_secret_component(spelling) || has_secret_component(&resolved)),
        Ok(None) => Ok(false),
        Err(e) if e.leaves_workspace() => Err(e.to_string()),
        Err(_) => Ok(false),
    }
}

/// The files a program writes by its options or operands, getopt-style: options may come
/// after operands, `--` ends them, a short option's value is the rest of its argument or the
/// next one, a long option's is after `=` or the next argument.
fn output_files<'a>(outputs: &Outputs, args: &'a [String]) -> Vec<&'a str> {
    let mut files = Vec::new();
    let mut operands = Vec::new();
    let mut i = 0;
    let mut options_done = false;
    while i < args.len() {
        let arg = args[i].as_str();
        i += 1;
        if options_done || arg == "-" || !arg.starts_with('-') {
            operands.push(arg);
            continue;
        }
        if arg == "--" {
            options_done = true;
            continue;
        }
        if let Some(name) = long_name(arg) {
            let separate =
                arg.split_once('=').is_none() && outputs.long_with_value.iter().any(|full| abbreviates(name, full));
            let value = match arg.split_once('=') {
                Some((_, v)) => Some(v),
                None if separate => {
                    i += 1;
                    args.get(i - 1).map(String::as_str)
                }
                None => None,
            };
            if let (Some(long), Some(value)) = (outputs.long, value)
                && abbreviates(name, long)
            {
                files.push(value);
            }
            continue;
        }
        for (at, flag) in arg.char_indices().skip(1) {
            if !outputs.short_with_value.contains(flag) {
                continue;
            }
            let rest = &arg[at + flag.len_utf8()..];
            let value = if rest.is_empty() {
                i += 1;
                args.get(i - 1).map(String::as_str)
            } else {
                Some(rest)
            };
            if outputs.short == Some(flag)
                && let Some(value) = value
            {
                files.push(value);
            }
            break;
        }
    }
    if let Some(n) = outputs.operand
        && let Some(file) = operands.get(n)
    {
        files.push(file);
    }
    files
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::action::Tool;

    fn case() -> Case {
        Case::sample()
    }

    fn ws() -> (tempfile::TempDir, PathBuf) {
        let outer = tempfile::tempdir().unwrap();
        let root = outer.path().join("ws");
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::write(root.join("src/a.py"), "x = 1\n").unwrap();
        std::fs::write(root.join(".env"), "TOKEN=secret\n").unwrap();
        std::fs::write(outer.path().join("outside.txt"), "outside\n").unwrap();
        std::os::unix::fs::symlink(outer.path().join("outside.txt"), root.join("escape.txt")).unwrap();
        std::os::unix::fs::symlink(outer.path(), root.join("escape_dir")).unwrap();
        std::os::unix::fs::symlink(".env", root.join("innocent.txt")).unwrap();
        let root = root.canonicalize().unwrap();
        (outer, root)
    }

    fn read(path: &str) -> Call {
        Call::ReadFile { path: path.into(), start_line: None, end_line: None }
    }

    fn denied(d: Decision) -> String {
        match d {
            Decision::Deny(r) => r,
            Decision::Allow => panic!("expected a denial"),
        }
    }

    #[test]
    fn path_escapes_are_denied() {
        let (_g, root) = ws();
        let c = case();
        assert!(denied(decide(&read("../outside.txt"), &c, &root)).contains(".."));
        assert!(denied(decide(&read("src/../../outside.txt"), &c, &root)).contains(".."));
        assert!(denied(decide(&read("/etc/passwd"), &c, &root)).contains("absolute"));
        assert!(denied(decide(&read("escape.txt"), &c, &root)).contains("symlink escape"));
        assert!(denied(decide(&read("escape_dir/outside.txt"), &c, &root)).contains("symlink escape"));
        let write = Call::WriteFile { path: "escape_dir/new.txt".into(), content: "x".into(), overwrite: false };
        assert!(denied(decide(&write, &c, &root)).contains("symlink escape"));
        assert_eq!(decide(&read("src/a.py"), &c, &root), Decision::Allow);
        let new_file = Call::WriteFile { path: "src/new/b.py".into(), content: "".into(), overwrite: false };
        assert_eq!(decide(&new_file, &c, &root), Decision::Allow);
    }

    #[test]
    fn secrets_and_git_are_protected() {
        let (_g, root) = ws();
        let c = case();
        assert!(denied(decide(&read(".env"), &c, &root)).contains("secret"));
        assert!(denied(decide(&read("innocent.txt"), &c, &root)).contains("secret"), "symlink to a secret");
        assert!(denied(decide(&read("deploy_key"), &c, &root)).contains("secret"));
        assert!(denied(decide(&read("config/server.pem"), &c, &root)).contains("secret"));
        let hook = Call::WriteFile { path: ".git/hooks/pre-commit".into(), content: "x".into(), overwrite: false };
        assert!(denied(decide(&hook, &c, &root)).contains(".git"));
    }

    #[test]
    fn commands_are_allowlisted_and_offline() {
        let (_g, root) = ws();
        let c = case();
        let cmd = |argv: &[&str]| Call::RunCommand { argv: argv.iter().map(|s| s.to_string()).collect() };
        assert!(denied(decide(&cmd(&["curl", "http://x"]), &c, &root)).contains("network"));
        assert!(denied(decide(&cmd(&["rm", "-rf", "src"]), &c, &root)).contains("allowlist"));
        assert!(denied(decide(&cmd(&["git", "commit", "-am", "x"]), &c, &root)).contains("read-only"));
        assert!(denied(decide(&cmd(&["python3", "-m", "pip", "install", "x"]), &c, &root)).contains("network"));
        assert!(denied(decide(&cmd(&["cat", ".env"]), &c, &root)).contains("secret"));
        assert!(denied(decide(&cmd(&["/bin/ls"]), &c, &root)).contains("not a path"));
        assert!(denied(decide(&cmd(&["cat", "../outside.txt"]), &c, &root)).contains(".."));
        assert_eq!(decide(&cmd(&["git", "diff"]), &c, &root), Decision::Allow);
        assert_eq!(decide(&cmd(&["python3", "-c", "print(1)"]), &c, &root), Decision::Allow);
    }

    #[test]
    fn a_multi_session_case_may_commit_but_not_redirect_git() {
        let (_g, root) = ws();
        let mut c = case();
        c.sessions = Some(crate::bench::sessions::SessionsSpec {
            count: 2,
            step_budget: 5,
            initializer: "i".into(),
            coding: "c".into(),
            features: vec![],
        });
        let cmd = |argv: &[&str]| Call::RunCommand { argv: argv.iter().map(|s| s.to_string()).collect() };
        for argv in [&["git", "init"][..], &["git", "add", "-A"], &["git", "commit", "-m", "session 1: init"]] {
            assert_eq!(decide(&cmd(argv), &c, &root), Decision::Allow, "{argv:?}");
        }
        assert!(denied(decide(&cmd(&["git", "init", "--template=tpl"]), &c, &root)).contains("hooks"));
        assert!(denied(decide(&cmd(&["git", "init", "--separate-git-dir=x"]), &c, &root)).contains("outside"));
        assert!(denied(decide(&cmd(&["git", "push"]), &c, &root)).contains("not allowed here"));
        assert!(denied(decide(&cmd(&["git", "-c", "core.hooksPath=h", "commit"]), &c, &root)).contains("options"));
        let write = Call::WriteFile { path: ".git/hooks/post-commit".into(), content: "x".into(), overwrite: false };
        assert!(denied(decide(&write, &c, &root)).contains(".git"), "committing leaves .git closed to the file tools");
    }

    fn cmd(argv: &[&str]) -> Call {
        Call::RunCommand { argv: argv.iter().map(|s| s.to_string()).collect() }
    }

    /// Decides `argv` in the standard workspace with the default allowlist.
    fn run(root: &Path, argv: &[&str]) -> Decision {
        decide(&cmd(argv), &case(), root)
    }

    #[test]
    fn sort_output_to_an_absolute_path_is_denied_in_every_spelling() {
        let (_g, root) = ws();
        for argv in [
            &["sort", "-o/tmp/pwned", "src/a.py"][..],
            &["sort", "-o", "/tmp/pwned", "src/a.py"],
            &["sort", "-ro/tmp/pwned", "src/a.py"],
            &["sort", "--output=/tmp/pwned", "src/a.py"],
            &["sort", "--output", "/tmp/pwned", "src/a.py"],
        ] {
            assert!(denied(run(&root, argv)).contains("absolute path"), "{argv:?}");
        }
        assert!(denied(run(&root, &["sort", "-o../pwned", "src/a.py"])).contains(".."));
        assert!(denied(run(&root, &["sort", "-oescape.txt", "src/a.py"])).contains("symlink escape"));
        let hook = denied(run(&root, &["sort", "-o", ".git/hooks/pre-commit", "src/a.py"]));
        assert!(hook.contains("would write `.git/hooks/pre-commit`") && hook.contains(".git"), "{hook}");
        assert!(denied(run(&root, &["sort", "--outp=.git/config", "src/a.py"])).contains(".git"));
        assert_eq!(run(&root, &["sort", "-o", "src/sorted.txt", "src/a.py"]), Decision::Allow);
        assert_eq!(run(&root, &["sort", "-t/", "-k2", "src/a.py"]), Decision::Allow, "a one-character delimiter");
    }

    #[test]
    fn sort_compress_program_is_denied() {
        let (_g, root) = ws();
        for argv in [
            &["sort", "--compress-program=bash", "src/a.py"][..],
            &["sort", "--compress-program", "bash", "src/a.py"],
            &["sort", "--compress=sh", "src/a.py"],
        ] {
            assert!(denied(run(&root, argv)).contains("runs a program"), "{argv:?}");
        }
        assert!(denied(run(&root, &["wc", "--files0-from=list", "src/a.py"])).contains("files to read"));
    }

    #[test]
    fn git_output_files_and_global_options_are_denied() {
        let (_g, root) = ws();
        assert!(denied(run(&root, &["git", "log", "--output=/tmp/pwned"])).contains("--output` writes a file"));
        assert!(denied(run(&root, &["git", "log", "--output=notes.txt"])).contains("--output` writes a file"));
        let no_index = denied(run(&root, &["git", "diff", "--no-index", "--output=x.txt", "src/a.py", "src/a.py"]));
        assert!(no_index.contains("--output` writes a file"), "{no_index}");
        assert!(denied(run(&root, &["git", "show", "--outp=x"])).contains("--output"), "abbreviated");
        assert!(denied(run(&root, &["git", "diff", "--ext-diff"])).contains("external diff"));
        for global in ["-c", "-C", "--exec-path=/tmp", "--git-dir=.git"] {
            let reason = denied(run(&root, &["git", global, "core.pager=sh", "log"]));
            assert!(reason.contains("options before the subcommand"), "{global}: {reason}");
        }
        assert!(denied(run(&root, &["git", "show", "HEAD:.env"])).contains("secret"));
        assert_eq!(run(&root, &["git", "diff", "--output-indicator-new=+", "--stat"]), Decision::Allow);
        assert_eq!(run(&root, &["git", "log", "-c", "--oneline"]), Decision::Allow, "log's -c is a diff format");
        assert_eq!(run(&root, &["git", "show", "HEAD:src/a.py"]), Decision::Allow);
    }

    #[test]
    fn diff_from_and_to_files_outside_are_denied() {
        let (_g, root) = ws();
        assert!(denied(run(&root, &["diff", "--from-file=/etc/passwd", "src/a.py"])).contains("absolute"));
        assert!(denied(run(&root, &["diff", "--to-file=../outside.txt", "src/a.py"])).contains(".."));
        assert!(denied(run(&root, &["diff", "--from-file=escape.txt", "src/a.py"])).contains("symlink escape"));
        assert!(denied(run(&root, &["diff", "--from-file=innocent.txt", "src/a.py"])).contains("secret"));
        assert_eq!(run(&root, &["diff", "--from-file=src/a.py", "src/a.py"]), Decision::Allow);
    }

    #[test]
    fn python_modules_are_judged_however_the_option_is_spelled() {
        let (_g, root) = ws();
        for argv in [
            &["python3", "-mpip", "install", "x"][..],
            &["python3", "-m", "pip", "install", "x"],
            &["python3", "-Bmpip", "install", "x"],
            &["python3", "-I", "-m", "pip", "install", "x"],
            &["python3", "-W", "ignore", "-m", "pip"],
            &["python3", "-m", "pip._internal", "install", "x"],
            &["python3", "-mhttp.server"],
        ] {
            assert!(denied(run(&root, argv)).contains("reaches the network"), "{argv:?}");
        }
        assert_eq!(run(&root, &["python3", "-m", "unittest", "discover", "-s", "src"]), Decision::Allow);
        assert_eq!(run(&root, &["python3", "-m", "pipx_not_pip"]), Decision::Allow);
        // After -c, `-m pip` is the code's sys.argv, not an interpreter option.
        assert_eq!(run(&root, &["python3", "-c", "import sys; print(sys.argv)", "-m", "pip"]), Decision::Allow);
    }

    #[test]
    fn code_that_mentions_os_environ_is_not_a_secret_file() {
        let (_g, root) = ws();
        assert_eq!(run(&root, &["python3", "-c", "import os; print(os.environ)"]), Decision::Allow);
        assert_eq!(run(&root, &["python3", "-cimport os; print(os.environ.get('HOME'))"]), Decision::Allow);
        assert_eq!(run(&root, &["grep", "-rn", "os.environ", "src"]), Decision::Allow);
        assert_eq!(run(&root, &["grep", "-rn", "api_key", "src"]), Decision::Allow, "no such file: a pattern");
        assert!(denied(run(&root, &["cat", ".env"])).contains("secret"));
        assert!(denied(run(&root, &["cat", "./innocent.txt"])).contains("secret"), "a symlink to .env");
        assert!(denied(run(&root, &["grep", "-finnocent.txt", "src"])).contains("secret"), "joined to -f");
        assert!(denied(run(&root, &["cat", "escape_dir/outside.txt"])).contains("symlink escape"));
    }

    #[test]
    fn values_after_equals_and_output_operands_are_paths() {
        let (_g, root) = ws();
        assert!(denied(run(&root, &["sort", "--random-source=/dev/urandom", "src/a.py"])).contains("absolute"));
        assert!(denied(run(&root, &["sort", "--temporary-directory=../x", "src/a.py"])).contains(".."));
        let uniq = denied(run(&root, &["uniq", "-f", "1", "src/a.py", ".git/config"]));
        assert!(uniq.contains("would write `.git/config`"), "{uniq}");
        assert_eq!(run(&root, &["uniq", "-f", "1", "src/a.py", "src/out.txt"]), Decision::Allow);
    }

    #[test]
    fn tools_outside_the_case_are_denied() {
        let (_g, root) = ws();
        let mut c = case();
        c.allowed_tools = vec![Tool::ReadFile, Tool::Finish];
        assert!(denied(decide(&Call::RunTests {}, &c, &root)).contains("not allowed"));
    }
}
