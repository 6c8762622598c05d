//! Profile names -> profiles.
//!
//! Resolution order for a name: the fixed built-ins `oracle` (known-good actions, the control
//! arm), `nop` (finishes at once, the floor) and `scripted:PATH` (actions from a script file);
//! then the models file (`--models`, else `HCBENCH_MODELS`, else `<root>/models.toml`); then the
//! built-in HTTP profiles `local` and `local-responses` (a models-file entry of the same name
//! overrides them). `.env` in the root is read first, so keys and `HCBENCH_*` settings may live
//! there. Everything is checked here, before any cell runs: a bad models file or a missing key
//! stops the command with exit code 2 and a message naming the file, profile and field.

use std::path::Path;

use super::Profile;
use super::profiles::{self, Env, ModelsError, ModelsFile};
use super::scripted::{Script, ScriptError};

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error(
        "unknown profile `{name}`; built-in profiles: oracle, nop, local, local-responses, scripted:PATH; {models}"
    )]
    Unknown { name: String, models: String },
    #[error(transparent)]
    Script(#[from] ScriptError),
    #[error(transparent)]
    Models(#[from] ModelsError),
}

/// Resolves one profile name. Relative script paths are taken from `root`; `models` is the
/// `--models` flag, if given.
pub fn resolve_profile(name: &str, root: &Path, models: Option<&Path>) -> Result<Profile, ProfileError> {
    match name {
        "oracle" => return Ok(Profile::oracle()),
        "nop" => return Ok(Profile::scripted("nop", Script::nop())),
        _ => {}
    }
    if let Some(path) = name.strip_prefix("scripted:") {
        let script = Script::load(&root.join(path))?;
        let label = script.label.clone();
        return Ok(Profile::scripted(&label, script));
    }
    let env = Env::load(root)?;
    let file = match profiles::models_path(models, root, &env)? {
        Some(path) => Some(ModelsFile::load(&path)?),
        None => None,
    };
    if let Some(file) = &file {
        // A typo anywhere in the file is reported even if this profile is fine.
        file.check_all(root, &env)?;
        if let Some(table) = file.profiles.get(name) {
            return Ok(profiles::build(name, table, &file.path.display().to_string(), root, &env)?);
        }
    }
    if let Some(table) = profiles::builtin(name, &env) {
        return Ok(profiles::build(name, &table, "built-in profiles", root, &env)?);
    }
    let models = match &file {
        Some(f) if f.profiles.is_empty() => format!("{} defines no profiles", f.path.display()),
        Some(f) => format!(
            "profiles in {}: {}",
            f.path.display(),
            f.profiles.keys().map(String::as_str).collect::<Vec<_>>().join(", ")
        ),
        None => "no models file (pass --models FILE, set HCBENCH_MODELS, or copy models.example.toml to models.toml)"
            .to_string(),
    };
    Err(ProfileError::Unknown { name: name.to_string(), models })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ProfileKind;

    #[test]
    fn models_file_profiles_override_builtins_and_unknown_names_list_what_exists() {
        let dir = tempfile::tempdir().unwrap();
        let models = dir.path().join("models.toml");
        std::fs::write(
            &models,
            "[local]\nprovider = \"oracle\"\n\n[fast]\nprovider = \"openai-chat\"\nmodel = \"m\"\nbase_url = \"http://127.0.0.1:9\"\n",
        )
        .unwrap();
        let p = resolve_profile("local", dir.path(), None).unwrap();
        assert!(matches!(p.kind, ProfileKind::Oracle), "models.toml in the root is found and wins");
        let p = resolve_profile("fast", dir.path(), Some(&models)).unwrap();
        assert!(matches!(p.kind, ProfileKind::Http(_)));
        let e = resolve_profile("gpt9", dir.path(), None).unwrap_err().to_string();
        assert!(e.contains("unknown profile `gpt9`") && e.contains("fast, local"), "{e}");
        let e = resolve_profile("x", dir.path(), Some(&dir.path().join("nope.toml"))).unwrap_err().to_string();
        assert!(e.contains("nope.toml") && e.contains("--models"), "{e}");
    }

    #[test]
    fn the_shipped_example_is_valid() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let file = ModelsFile::load(&root.join("models.example.toml")).unwrap();
        file.check_all(root, &Env::default()).unwrap();
        for name in ["gpt", "deepseek"] {
            assert!(file.profiles.contains_key(name), "the example has `{name}`");
        }
        assert_eq!(file.profiles["gpt"]["provider"].as_str(), Some("openai-responses"));
        assert_eq!(file.profiles["deepseek"]["base_url"].as_str(), Some("https://api.deepseek.com"));
    }

    #[test]
    fn a_broken_profile_anywhere_in_the_file_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("models.toml"),
            "[good]\nprovider = \"oracle\"\n\n[bad]\nprovider = \"openai-chat\"\nmodle = \"x\"\n",
        )
        .unwrap();
        let e = resolve_profile("good", dir.path(), None).unwrap_err().to_string();
        assert!(e.contains("profile `bad`: unknown key `modle`"), "{e}");
        std::fs::write(dir.path().join("models.toml"), "[a\n").unwrap();
        let e = resolve_profile("good", dir.path(), None).unwrap_err().to_string();
        assert!(e.contains("is not valid TOML"), "{e}");
    }
}
