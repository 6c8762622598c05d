//! Profile names -> profiles, with the models file parsed once per command.
//!
//! Resolution order for a name: the fixed built-ins `oracle` (known-good actions, the control
//! arm), `nop` (finishes at once, the floor) and `scripted:PATH` (actions from a script file);
//! then the models file the settings layer chose (`--models`, else `HCBENCH_MODELS`, else
//! `models:` in experiment_config.yaml, else `<root>/models.toml`); then the built-in HTTP
//! profiles `local` and `local-responses` (a models-file entry of the same name overrides them).
//! Everything is checked here, before any cell runs: a bad models file or a missing key stops
//! the command with exit code 2 and a message naming the file, profile and field.
//!
//! A list of names (`--profiles oracle,gpt,deepseek`) is checked whole: every name is tried and
//! every problem is collected into one [`ProfileError::Problems`], one line per profile with
//! its fix, so a user with no keys learns about all of them at once rather than one per
//! attempt. With `--skip-unavailable` ([`Profiles::resolve_available`]) a profile that is only
//! *unavailable* here (its key variable is not set) is set aside as [`NotRun`] instead; a
//! profile that is *wrong* (an unknown name, a broken script) still stops the command, because
//! skipping a typo would silently run less than was asked for.

use std::path::{Path, PathBuf};

use super::Profile;
use super::definition::Definition;
use super::profiles::{self, ModelsError, ModelsFile};
use super::scripted::{Script, ScriptError};
use crate::environment::Environment;
use crate::rundir::NotRun;

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error(
        "unknown profile `{name}`{suggestion} (built-in profiles: oracle, nop, local, local-responses, scripted:PATH; {models})"
    )]
    Unknown { name: String, suggestion: String, models: String },
    #[error(transparent)]
    Script(#[from] ScriptError),
    #[error(transparent)]
    Models(#[from] ModelsError),
    /// `--profiles` (or a config's profile list) is malformed.
    #[error("--profiles: {what}")]
    Listed { what: String },
    /// Every problem of a list of profiles, found before anything ran.
    #[error("{}", render_problems(problems, *skippable))]
    Problems {
        problems: Vec<Problem>,
        /// Whether to say that `--skip-unavailable` would run the other profiles.
        skippable: bool,
        /// Whether some profile of the list resolved.
        runnable: bool,
    },
}

impl ProfileError {
    /// True when the profile is well defined but cannot be used on this machine now: its API
    /// key variable is not set. Only such a profile may be skipped.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, ProfileError::Models(ModelsError::MissingKey { .. }))
    }

    /// For a command that has `--skip-unavailable`: the same error, saying that the flag would
    /// run the other profiles when it would (every problem is a missing key, and some profile
    /// of the list can run). Other commands leave the flag unmentioned.
    pub fn offering_skip(self) -> ProfileError {
        match self {
            ProfileError::Problems { problems, skippable: _, runnable } => {
                let skippable = runnable && problems.iter().all(|p| p.error.is_unavailable());
                ProfileError::Problems { problems, skippable, runnable }
            }
            other => other,
        }
    }
}

/// One profile of a list that cannot be used, and why (the error carries the fix).
#[derive(Debug)]
pub struct Problem {
    pub profile: String,
    pub error: ProfileError,
}

impl Problem {
    /// The problem as one line that names the profile: the error's own text when it already
    /// does (they mostly do), else prefixed with the name.
    fn line(&self) -> String {
        let text = self.error.to_string();
        if text.contains(&format!("`{}`", self.profile)) { text } else { format!("{}: {text}", self.profile) }
    }

    /// Why the profile is not run, for reports that already name it: a missing key without
    /// the profile's name in front.
    fn reason(&self) -> String {
        match &self.error {
            ProfileError::Models(ModelsError::MissingKey { source_name, var, dotenv, .. }) => format!(
                "environment variable {var} (named by `api_key_env` in {source_name}) is not set; export it or add `{var}=...` to {}",
                dotenv.display()
            ),
            other => other.to_string(),
        }
    }
}

/// One problem on one line, or a count and one indented line per profile.
fn render_problems(problems: &[Problem], skippable: bool) -> String {
    let mut text = match problems {
        [one] => one.error.to_string(),
        many => {
            let mut text = format!("{} of the requested profiles cannot be used:", many.len());
            for p in many {
                text.push_str("\n  - ");
                text.push_str(&p.line());
            }
            text
        }
    };
    if skippable {
        text.push_str("\n(--skip-unavailable runs the other profiles and marks these `not run` in every report)");
    }
    text
}

/// Every profile a command can name: the built-ins plus the parsed, fully checked models file.
#[derive(Debug, Clone)]
pub struct Profiles {
    root: PathBuf,
    env: Environment,
    file: Option<ModelsFile>,
    /// The run is one shard of a plan: profiles take their `per_shard` limits.
    sharded: bool,
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
        Ok(Profiles { root: root.to_path_buf(), env: env.clone(), file, sharded: false })
    }

    /// These profiles for a run of `shard` (when there is one): each profile's `per_shard`
    /// limits replace its own (docs/scale-out.md, "Budgets and rate limits").
    pub fn for_shard(self, shard: Option<crate::shard::Shard>) -> Profiles {
        Profiles { sharded: shard.is_some(), ..self }
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
            return Ok(profiles::build(name, table, &file.path.display().to_string(), dir, &self.env, self.sharded)?);
        }
        if let Some(table) = profiles::builtin(name, &self.env) {
            return Ok(profiles::build(name, &table, "built-in profiles", dir, &self.env, self.sharded)?);
        }
        let mut candidates: Vec<&str> = vec!["oracle", "nop", "local", "local-responses"];
        if let Some(f) = &self.file {
            candidates.extend(f.profiles.keys().map(String::as_str));
        }
        let suggestion = crate::util::did_you_mean(name, candidates);
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
        Err(ProfileError::Unknown { name: name.to_string(), suggestion, models })
    }

    /// Resolves a comma-separated list such as `--profiles oracle,gpt`: blanks are skipped,
    /// a name given twice is an error, and every name is checked before any is used; all the
    /// problems found are reported together ([`ProfileError::Problems`]).
    pub fn resolve_list(&self, names: &[String]) -> Result<Vec<Profile>, ProfileError> {
        let (profiles, problems) = self.try_each(names)?;
        if !problems.is_empty() {
            return Err(ProfileError::Problems { problems, skippable: false, runnable: !profiles.is_empty() });
        }
        Ok(profiles)
    }

    /// `--skip-unavailable`: the profiles of the list that can run, and the ones that cannot
    /// because their key is not set, as [`NotRun`] with the reason and its fix. Any other
    /// problem still stops the command (all of them in one error), and so does a list of
    /// which no profile can run.
    pub fn resolve_available(&self, names: &[String]) -> Result<(Vec<Profile>, Vec<NotRun>), ProfileError> {
        let (profiles, problems) = self.try_each(names)?;
        if problems.iter().any(|p| !p.error.is_unavailable()) {
            let problems = problems.into_iter().filter(|p| !p.error.is_unavailable()).collect();
            return Err(ProfileError::Problems { problems, skippable: false, runnable: !profiles.is_empty() });
        }
        if profiles.is_empty() {
            let what = problems.iter().map(|p| format!("\n  - {}", p.line())).collect::<String>();
            return Err(ProfileError::Listed {
                what: format!("--skip-unavailable left no profile to run; none of the requested ones can:{what}"),
            });
        }
        let not_run = problems.iter().map(|p| NotRun { profile: p.profile.clone(), reason: p.reason() }).collect();
        Ok((profiles, not_run))
    }

    /// Tries every name of a list: the profiles that resolved, in order, and the problems of
    /// the others. A malformed list (a name twice, no name) is an error at once.
    fn try_each(&self, names: &[String]) -> Result<(Vec<Profile>, Vec<Problem>), ProfileError> {
        let names: Vec<&str> = names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()).collect();
        if names.is_empty() {
            return Err(ProfileError::Listed { what: "no profile is named; e.g. --profiles oracle,nop".into() });
        }
        for (i, name) in names.iter().enumerate() {
            if names[..i].contains(name) {
                return Err(ProfileError::Listed { what: format!("profile `{name}` is listed twice") });
            }
        }
        let mut profiles: Vec<Profile> = Vec::new();
        let mut problems = Vec::new();
        for name in names {
            match self.resolve(name) {
                // A script's label names the profile: two scripts with one label would share cells.
                Ok(p) if profiles.iter().any(|q| q.name() == p.name()) => {
                    return Err(ProfileError::Listed { what: format!("profile `{}` is listed twice", p.name()) });
                }
                Ok(p) => profiles.push(p),
                Err(error) => problems.push(Problem { profile: name.to_string(), error }),
            }
        }
        Ok((profiles, problems))
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

    /// A root with a models file of two keyed profiles, and an environment without their keys.
    fn two_keyed(dir: &Path) -> Profiles {
        let models = dir.join("models.toml");
        let keyed = |name: &str, var: &str| {
            format!(
                "[{name}]\nprovider = \"openai-chat\"\nmodel = \"m\"\nbase_url = \"http://127.0.0.1:9\"\napi_key_env = \"{var}\"\n"
            )
        };
        std::fs::write(&models, keyed("gpt", "UNIT_GPT_KEY") + &keyed("deepseek", "UNIT_DEEPSEEK_KEY")).unwrap();
        profiles(dir, Some(&models)).unwrap()
    }

    fn names(s: &str) -> Vec<String> {
        s.split(',').map(str::to_string).collect()
    }

    #[test]
    fn every_problem_of_a_list_is_reported_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let all = two_keyed(dir.path());
        let e = all.resolve_list(&names("oracle,gpt,deepseek")).unwrap_err();
        let ProfileError::Problems { problems, .. } = &e else { panic!("{e}") };
        assert_eq!(problems.iter().map(|p| p.profile.as_str()).collect::<Vec<_>>(), ["gpt", "deepseek"]);
        assert!(!e.to_string().contains("--skip-unavailable"), "plan and run have no such flag: {e}");
        let e = e.offering_skip();
        let text = e.to_string();
        assert!(text.starts_with("2 of the requested profiles cannot be used:\n  - "), "{text}");
        assert!(text.contains("UNIT_GPT_KEY") && text.contains("UNIT_DEEPSEEK_KEY"), "{text}");
        assert!(text.ends_with("marks these `not run` in every report)"), "{text}");

        let e = all.resolve_list(&names("oracle,gtp,deepseek")).unwrap_err().offering_skip();
        let ProfileError::Problems { skippable, .. } = &e else { panic!("{e}") };
        assert!(!skippable, "a typo is never skipped");
        assert!(e.to_string().contains("unknown profile `gtp`; did you mean `gpt`?"), "{e}");
        let e = all.resolve_list(&names("gpt,deepseek")).unwrap_err().offering_skip();
        assert!(!e.to_string().contains("--skip-unavailable"), "nothing would be left to run: {e}");
        // One problem reads as the one error it is.
        let one = all.resolve_list(&names("oracle,gtp")).unwrap_err().to_string();
        assert!(one.starts_with("unknown profile `gtp`; did you mean `gpt`? (built-in profiles:"), "{one}");
    }

    #[test]
    fn skipping_sets_aside_only_profiles_without_their_key() {
        let dir = tempfile::tempdir().unwrap();
        let all = two_keyed(dir.path());
        let (run, not_run) = all.resolve_available(&names("oracle,gpt,deepseek")).unwrap();
        assert_eq!(run.iter().map(|p| p.name()).collect::<Vec<_>>(), ["oracle"]);
        assert_eq!(not_run.iter().map(|n| n.profile.as_str()).collect::<Vec<_>>(), ["gpt", "deepseek"]);
        assert!(not_run[0].reason.starts_with("environment variable UNIT_GPT_KEY (named by `api_key_env` in "));
        assert!(!not_run[0].reason.contains("profile `gpt`"), "reports name the profile already");
        let e = all.resolve_available(&names("oracle,gpt,nopp")).unwrap_err().to_string();
        assert!(e.contains("unknown profile `nopp`; did you mean `nop`?") && !e.contains("UNIT_GPT_KEY"), "{e}");
        let e = all.resolve_available(&names("gpt,deepseek")).unwrap_err().to_string();
        assert!(e.contains("left no profile to run") && e.contains("UNIT_DEEPSEEK_KEY"), "{e}");
        assert!(all.resolve_available(&names("oracle,oracle")).unwrap_err().to_string().contains("listed twice"));
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
