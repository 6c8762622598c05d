//! Profile names -> profiles, with the models file parsed once per command.
//!
//! Resolution order for a name: the fixed built-ins `oracle` (known-good actions, the control
//! arm), `nop` (finishes at once, the floor) and `scripted:PATH` (actions from a script file);
//! then the models file the settings layer chose (`--models`, else `HCBENCH_MODELS`, else
//! `models:` in experiment_config.yaml, else `<root>/models.toml`); then the built-in HTTP
//! profiles `local` and `local-responses` (a models-file entry of the same name overrides them).
//! Everything is checked here, before any cell runs: a bad models file or a missing key stops
//! the command with exit code 2 and a message naming the file, profile and field.

use std::path::{Path, PathBuf};

use super::Profile;
use super::definition::Definition;
use super::profiles::{self, ModelsError, ModelsFile};
use super::scripted::{Script, ScriptError};
use crate::environment::Environment;

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
    /// `--profiles` (or a config's profile list) is malformed.
    #[error("--profiles: {what}")]
    Listed { what: String },
}

/// Every profile a command can name: the built-ins plus the parsed, fully checked models file.
#[derive(Debug, Clone)]
pub struct Profiles {
    root: PathBuf,
    env: Environment,
    file: Option<ModelsFile>,
}

impl Profiles {
    /// Parses and checks `models_file` (if any) once. `root` anchors relative script paths.
    pub fn load(root: &Path, models_file: Option<&Path>, env: &Environment) -> Result<Profiles, ProfileError> {
        let file = match models_file {
            Some(path) => {
                let file = ModelsFile::load(path)?;
                // A typo anywhere in the file is reported even if the profile used today is fine.
                file.check_all(root, env)?;
                Some(file)
            }
            None => None,
        };
        Ok(Profiles { root: root.to_path_buf(), env: env.clone(), file })
    }

    /// For a command naming only fixed built-ins, which does not load the models file: refuses
    /// a file at `path` that defines a table named like one of them, which would be ignored.
    pub fn refuse_builtin_names(path: &Path) -> Result<(), ProfileError> {
        Ok(ModelsFile::refuse_builtin_names(path)?)
    }

    /// False for the fixed built-ins (`oracle`, `nop`, `scripted`, `scripted:PATH`), which no
    /// models file can define or override; true for every other name.
    pub fn may_name_a_model(name: &str) -> bool {
        !matches!(name, "oracle" | "nop" | "scripted") && !name.starts_with("scripted:")
    }

    /// Resolves one profile name; `scripted:PATH` is taken relative to the root.
    pub fn resolve(&self, name: &str) -> Result<Profile, ProfileError> {
        self.resolve_at(name, &self.root)
    }

    /// Resolves a name with `scripted:PATH` (and a models-file `script`) read under `dir`
    /// instead of the root: the gate's HEAD arm replays HEAD's copy of an allowlisted script.
    pub fn resolve_at(&self, name: &str, dir: &Path) -> Result<Profile, ProfileError> {
        match name {
            "oracle" => return Ok(Profile::oracle()),
            "nop" => return Ok(Profile::scripted("nop", Script::nop()).defined_as(Definition::builtin("nop", None))),
            _ => {}
        }
        if let Some(path) = name.strip_prefix("scripted:") {
            let script = Script::load(&dir.join(path))?;
            let label = script.label.clone();
            // The path as written: HEAD's copy of an allowlisted script has the same definition.
            return Ok(Profile::scripted(&label, script).defined_as(Definition::builtin("scripted", Some(path))));
        }
        if let Some(file) = &self.file
            && let Some(table) = file.profiles.get(name)
        {
            return Ok(profiles::build(name, table, &file.path.display().to_string(), dir, &self.env)?);
        }
        if let Some(table) = profiles::builtin(name, &self.env) {
            return Ok(profiles::build(name, &table, "built-in profiles", dir, &self.env)?);
        }
        let models = match &self.file {
            Some(f) if f.profiles.is_empty() => format!("{} defines no profiles", f.path.display()),
            Some(f) => format!(
                "profiles in {}: {}",
                f.path.display(),
                f.profiles.keys().map(String::as_str).collect::<Vec<_>>().join(", ")
            ),
            None => {
                "no models file (pass --models FILE, set HCBENCH_MODELS, or copy models.example.toml to models.toml)"
                    .to_string()
            }
        };
        Err(ProfileError::Unknown { name: name.to_string(), models })
    }

    /// Resolves a comma-separated list such as `--profiles oracle,gpt`: blanks are skipped,
    /// a name given twice is an error, and every name is checked before any is used.
    pub fn resolve_list(&self, names: &[String]) -> Result<Vec<Profile>, ProfileError> {
        let mut out: Vec<Profile> = Vec::new();
        for name in names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
            let p = self.resolve(name)?;
            if out.iter().any(|q| q.name() == p.name()) {
                return Err(ProfileError::Listed { what: format!("profile `{}` is listed twice", p.name()) });
            }
            out.push(p);
        }
        if out.is_empty() {
            return Err(ProfileError::Listed { what: "no profile is named; e.g. --profiles oracle,nop".into() });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ProfileKind;

    fn profiles(root: &Path, models: Option<&Path>) -> Result<Profiles, ProfileError> {
        Profiles::load(root, models, &Environment::default())
    }

    #[test]
    fn models_file_profiles_override_builtins_and_unknown_names_list_what_exists() {
        let dir = tempfile::tempdir().unwrap();
        let models = dir.path().join("models.toml");
        std::fs::write(
            &models,
            "[local]\nprovider = \"oracle\"\n\n[fast]\nprovider = \"openai-chat\"\nmodel = \"m\"\nbase_url = \"http://127.0.0.1:9\"\n",
        )
        .unwrap();
        let all = profiles(dir.path(), Some(&models)).unwrap();
        assert!(matches!(all.resolve("local").unwrap().kind, ProfileKind::Oracle), "the models file wins");
        assert!(matches!(all.resolve("fast").unwrap().kind, ProfileKind::Http(_)));
        let e = all.resolve("gpt9").unwrap_err().to_string();
        assert!(e.contains("unknown profile `gpt9`") && e.contains("fast, local"), "{e}");
        let none = profiles(dir.path(), None).unwrap();
        assert!(matches!(none.resolve("local").unwrap().kind, ProfileKind::Http(_)), "the built-in without a file");
        let e = none.resolve("gpt9").unwrap_err().to_string();
        assert!(e.contains("no models file"), "{e}");
    }

    #[test]
    fn lists_refuse_duplicates_and_emptiness() {
        let all = profiles(Path::new("/nonexistent"), None).unwrap();
        let names = |s: &str| s.split(',').map(str::to_string).collect::<Vec<_>>();
        let got = all.resolve_list(&names("oracle, nop,")).unwrap();
        assert_eq!(got.iter().map(|p| p.name()).collect::<Vec<_>>(), ["oracle", "nop"]);
        assert!(all.resolve_list(&names("oracle,oracle")).unwrap_err().to_string().contains("listed twice"));
        assert!(all.resolve_list(&names(" ,")).unwrap_err().to_string().contains("no profile"));
    }

    #[test]
    fn the_shipped_example_is_valid() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let file = ModelsFile::load(&root.join("models.example.toml")).unwrap();
        file.check_all(root, &Environment::default()).unwrap();
        for name in ["gpt", "deepseek"] {
            assert!(file.profiles.contains_key(name), "the example has `{name}`");
        }
        assert_eq!(file.profiles["gpt"]["provider"].as_str(), Some("openai-responses"));
        assert_eq!(file.profiles["deepseek"]["base_url"].as_str(), Some("https://api.deepseek.com"));
    }

    #[test]
    fn a_broken_profile_anywhere_in_the_file_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let models = dir.path().join("models.toml");
        std::fs::write(&models, "[good]\nprovider = \"oracle\"\n\n[bad]\nprovider = \"openai-chat\"\nmodle = \"x\"\n")
            .unwrap();
        let e = profiles(dir.path(), Some(&models)).unwrap_err().to_string();
        assert!(e.contains("profile `bad`: unknown key `modle`"), "{e}");
        std::fs::write(&models, "[a\n").unwrap();
        let e = profiles(dir.path(), Some(&models)).unwrap_err().to_string();
        assert!(e.contains("is not valid TOML"), "{e}");
    }
}
