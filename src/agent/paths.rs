//! Workspace paths as the agent names them: confinement to the workspace, secret file
//! names, and one spelling per file.
//!
//! The policy decides with these rules and the tools apply them again when they run, so they
//! live below both: neither has to import the other.

use std::path::{Component, Path, PathBuf};

/// True for file names that hold credentials.
pub fn is_secret_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower == ".env"
        || lower.starts_with(".env.")
        || lower == "models.toml"
        || lower.ends_with(".pem")
        || lower.ends_with(".key")
        || lower.ends_with("_key")
        || lower.starts_with("id_rsa")
        || lower.starts_with("id_ed25519")
        || lower.starts_with("id_ecdsa")
        || lower.ends_with(".p12")
}

/// Resolves a workspace-relative path, refusing anything that could land outside `root`.
/// `root` must be canonical. Returns the joined (not canonicalized) path.
pub fn confine(root: &Path, rel: &str) -> Result<PathBuf, String> {
    let rel = if rel.is_empty() { "." } else { rel };
    let p = Path::new(rel);
    if p.is_absolute() {
        return Err(format!("`{rel}` is absolute; use a path relative to the workspace root"));
    }
    if p.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(format!("`{rel}` contains `..`; paths must stay inside the workspace"));
    }
    let joined = root.join(p);
    // The longest existing ancestor decides: a symlink anywhere along the way is resolved.
    let mut probe = joined.as_path();
    loop {
        if probe.symlink_metadata().is_ok() {
            let real = probe.canonicalize().map_err(|_| format!("`{rel}` is a dangling symlink"))?;
            if !real.starts_with(root) {
                return Err(format!("`{rel}` resolves outside the workspace (symlink escape)"));
            }
            break;
        }
        match probe.parent() {
            Some(parent) => probe = parent,
            None => break,
        }
    }
    Ok(joined)
}

/// `./a/b.py` and `a/b.py` are the same file for repeated-read counting and first-read metrics.
pub fn normalize(path: &str) -> String {
    Path::new(path)
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_spelling_per_file() {
        assert_eq!(normalize("./a/./b.py"), "a/b.py");
        assert_eq!(normalize("a/b.py"), "a/b.py");
    }

    #[test]
    fn secret_names_are_recognized() {
        for name in [".env", ".env.local", "models.toml", "server.PEM", "deploy_key", "id_ed25519.pub"] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in ["env.py", "keys.py", "README.md"] {
            assert!(!is_secret_name(name), "{name}");
        }
    }
}
