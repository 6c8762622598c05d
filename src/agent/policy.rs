//! The permission gate: the one place that decides whether a tool call may run.
//!
//! Every call is decided here before it runs, and the decision is recorded in the trace before
//! the result. Paths are confined to the workspace: no absolute paths, no `..`, and no symlink
//! that resolves outside. Secrets are never readable. `.git` is never writable. `run_command`
//! starts only allowlisted programs, git only read-only, and never a network tool.

use std::path::{Component, Path};

use super::paths::{confine, is_secret_name};
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

/// Python modules that fetch or serve over the network.
const NETWORK_PY_MODULES: &[&str] = &["pip", "ensurepip", "http.server", "urllib.request", "ftplib", "smtplib"];

/// True when `rel` (or what it resolves to) is a secret.
fn touches_secret(root: &Path, rel: &str) -> bool {
    let joined = root.join(rel);
    let by_name = Path::new(rel).components().any(|c| match c {
        Component::Normal(n) => is_secret_name(&n.to_string_lossy()),
        _ => false,
    });
    let by_target = joined
        .canonicalize()
        .ok()
        .and_then(|real| real.file_name().map(|n| is_secret_name(&n.to_string_lossy())))
        .unwrap_or(false);
    by_name || by_target
}

fn inside_git(root: &Path, rel: &str) -> bool {
    let first_is_git = Path::new(rel).components().any(|c| matches!(c, Component::Normal(n) if n == ".git"));
    let real_is_git = root.join(rel).canonicalize().ok().is_some_and(|real| {
        real.strip_prefix(root).is_ok_and(|r| r.components().any(|c| matches!(c, Component::Normal(n) if n == ".git")))
    });
    first_is_git || real_is_git
}

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
    let check_read = |rel: &str| -> Decision {
        if let Err(e) = confine(root, rel) {
            return Decision::Deny(e);
        }
        if touches_secret(root, rel) {
            return Decision::Deny(format!("`{rel}` holds secrets and is never readable"));
        }
        Decision::Allow
    };
    let check_write = |rel: &str| -> Decision {
        if let Err(e) = confine(root, rel) {
            return Decision::Deny(e);
        }
        if inside_git(root, rel) {
            return Decision::Deny(format!("`{rel}` is inside .git, which is never writable"));
        }
        if touches_secret(root, rel) {
            return Decision::Deny(format!("`{rel}` holds secrets and is never writable"));
        }
        Decision::Allow
    };
    match call {
        Call::ListFiles { path, .. } | Call::RepoMap { path, .. } => match confine(root, path) {
            Ok(_) => Decision::Allow,
            Err(e) => Decision::Deny(e),
        },
        Call::SearchCode { path, .. } => match confine(root, path) {
            Ok(_) => Decision::Allow,
            Err(e) => Decision::Deny(e),
        },
        Call::ReadFile { path, .. } => check_read(path),
        Call::EditFile { path, .. } | Call::WriteFile { path, .. } => check_write(path),
        Call::RunTests {} | Call::Finish { .. } => Decision::Allow,
        Call::RunCommand { argv } => decide_command(argv, case, root),
    }
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
    if program == "git" {
        let sub = argv.get(1).map(String::as_str).unwrap_or("");
        if !READ_ONLY_GIT.contains(&sub) {
            return Decision::Deny(format!(
                "`git {sub}` is not read-only; allowed: git {}",
                READ_ONLY_GIT.join(", git ")
            ));
        }
    }
    if program.starts_with("python")
        && let Some(pos) = argv.iter().position(|a| a == "-m")
        && let Some(module) = argv.get(pos + 1)
        && NETWORK_PY_MODULES.contains(&module.as_str())
    {
        return Decision::Deny(format!("`python3 -m {module}` reaches the network or installs packages; not allowed"));
    }
    for arg in &argv[1..] {
        if arg.starts_with('-') {
            continue;
        }
        if Path::new(arg).is_absolute() {
            return Decision::Deny(format!("argument `{arg}` is an absolute path; stay inside the workspace"));
        }
        if Path::new(arg).components().any(|c| matches!(c, Component::ParentDir)) {
            return Decision::Deny(format!("argument `{arg}` contains `..`; stay inside the workspace"));
        }
        if touches_secret(root, arg) || arg.contains(".env") {
            return Decision::Deny(format!("argument `{arg}` names a secret file"));
        }
    }
    Decision::Allow
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
    fn tools_outside_the_case_are_denied() {
        let (_g, root) = ws();
        let mut c = case();
        c.allowed_tools = vec![Tool::ReadFile, Tool::Finish];
        assert!(denied(decide(&Call::RunTests {}, &c, &root)).contains("not allowed"));
    }
}
