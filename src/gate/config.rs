//! `experiment_config.yaml`: what the optimization loop optimizes and how the gate judges it.
//!
//! The file is read once per `gate` or `record` and resolved into [`Config`], a struct with
//! every default applied and every value checked, so the steps never see raw YAML. Unknown keys
//! are errors that name the key (a misspelt `threshhold` must not silently mean "0.8"), with one
//! deliberate exception to strictness: `file_guard` is on unless it is *explicitly* off
//! (false/no/off/0/""), because a typo or a null must never disable the safety check.
//! Every key and its default is documented in `docs/gate.md` and in the shipped file.

use std::path::{Component, Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
use serde::Deserialize;
use serde_json::Value;

use crate::bench::Split;

/// The config's file name in the project root.
pub(crate) const CONFIG_FILE: &str = "experiment_config.yaml";

#[derive(Debug, thiserror::Error)]
#[error("experiment config {path}: {message}")]
pub struct ConfigError {
    pub path: PathBuf,
    pub message: String,
}

/// How Step 2 decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// One run of the test split; pass if val_score >= the best recorded score.
    Simple,
    /// The test split for HEAD's agent and the candidate, epochs >= 2; pass unless the upper
    /// end of the paired 95% interval of (candidate - HEAD) is below -margin (the candidate is
    /// shown worse than HEAD by more than the margin).
    Paired,
}

impl Mode {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Mode::Simple => "simple",
            Mode::Paired => "paired",
        }
    }
}

/// The resolved experiment: no `Option` left that means "not given".
#[derive(Debug, Clone)]
pub(crate) struct Config {
    /// Where the config was read from (or would be: a missing default file means all defaults).
    pub path: PathBuf,
    /// False when the default file does not exist and every default applies.
    pub found: bool,
    pub benchmark: String,
    /// Profile under test: `oracle`, `nop`, `scripted:PATH`, or a models.toml profile.
    pub profile: String,
    /// Agent spec directory, relative to the root, without a trailing slash.
    pub agent_dir: String,
    /// models.toml for model profiles (relative to the root); `--models` overrides it.
    pub models: Option<PathBuf>,
    pub train_split: Split,
    pub test_split: Split,
    /// Seeds `threshold` of a new regression set (suite.json); the set's own value is used afterwards.
    pub threshold: f64,
    pub file_guard: bool,
    pub allowlist: Allowlist,
    pub epochs: u32,
    /// None: one cell per core.
    pub jobs: Option<usize>,
    pub promotion_passes: u32,
    pub mode: Mode,
    pub margin: f64,
    /// The largest fraction of a step's planned cells (Step 1's, each arm of Step 2's) that may
    /// end without a measurement (harness error, provider error, timeout, missing) before the
    /// gate stops with "could not be measured" instead of a verdict.
    pub max_unmeasured: f64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    benchmark: Option<String>,
    profile: Option<String>,
    agent_dir: Option<String>,
    models: Option<String>,
    train_split: Option<String>,
    test_split: Option<String>,
    threshold: Option<f64>,
    // Any YAML value: the guard's value table is applied by hand (see `file_guard_value`).
    file_guard: Option<Value>,
    allowlist: Option<Vec<String>>,
    epochs: Option<u32>,
    jobs: Option<usize>,
    promotion_passes: Option<u32>,
    max_unmeasured: Option<f64>,
    gate: Option<RawGate>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGate {
    mode: Option<String>,
    margin: Option<f64>,
}

impl Config {
    /// Loads `flag` (which must exist) or `<root>/experiment_config.yaml` (all defaults when it
    /// does not exist).
    pub(crate) fn load(root: &Path, flag: Option<&Path>) -> Result<Config, ConfigError> {
        let path = match flag {
            Some(p) if p.is_absolute() => p.to_path_buf(),
            Some(p) => root.join(p),
            None => root.join(CONFIG_FILE),
        };
        let err = |message: String| ConfigError { path: path.clone(), message };
        let (text, found) = match std::fs::read_to_string(&path) {
            Ok(t) => (t, true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && flag.is_none() => (String::new(), false),
            Err(e) => return Err(err(format!("cannot read: {e}"))),
        };
        let raw: RawConfig = if text.trim().is_empty() {
            serde_saphyr::from_str("{}").map_err(|e| err(e.to_string()))?
        } else {
            serde_saphyr::from_str(&text)
                .map_err(|e| err(format!("is not valid: {}", crate::util::yaml_error(&e, &path))))?
        };
        Config::resolve(raw, path.clone(), found).map_err(err)
    }

    /// Parses config text (for tests and for `load`).
    #[cfg(test)]
    fn parse(text: &str) -> Result<Config, String> {
        let raw: RawConfig = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
        Config::resolve(raw, PathBuf::from(CONFIG_FILE), true)
    }

    fn resolve(raw: RawConfig, path: PathBuf, found: bool) -> Result<Config, String> {
        let benchmark = non_empty("benchmark", raw.benchmark, "hc-bench")?;
        let profile = non_empty("profile", raw.profile, "oracle")?;
        let agent_dir = raw.agent_dir.unwrap_or_else(|| "agent/".into());
        let agent_dir = relative_path(&agent_dir).map_err(|m| format!("field `agent_dir`: {m}"))?;
        let split = |field: &str, v: Option<String>, default: Split| -> Result<Split, String> {
            match v {
                None => Ok(default),
                Some(s) => {
                    Split::parse(&s).ok_or_else(|| format!("field `{field}`: `{s}` is not train, test or heldout"))
                }
            }
        };
        let train_split = split("train_split", raw.train_split, Split::Train)?;
        let test_split = split("test_split", raw.test_split, Split::Test)?;
        if train_split == test_split {
            return Err(format!(
                "fields `train_split` and `test_split` are both `{train_split}`; the gate must judge on cases the loop never trains on"
            ));
        }
        let threshold = raw.threshold.unwrap_or(0.8);
        if !(0.0..=1.0).contains(&threshold) {
            return Err(format!("field `threshold`: {threshold} is not between 0 and 1 (a pass rate, e.g. 0.8)"));
        }
        let file_guard = file_guard_value(raw.file_guard.as_ref()).map_err(|m| format!("field `file_guard`: {m}"))?;
        let allow_entries = raw.allowlist.unwrap_or_else(|| vec![format!("{agent_dir}/"), "PROGRAM.md".into()]);
        let allowlist = Allowlist::new(&allow_entries).map_err(|m| format!("field `allowlist`: {m}"))?;
        let epochs = raw.epochs.unwrap_or(1);
        if epochs == 0 || epochs > 1000 {
            return Err(format!("field `epochs`: {epochs} is not between 1 and 1000"));
        }
        if raw.jobs == Some(0) {
            return Err("field `jobs`: 0 cells at once would run nothing; give a positive number or remove the key (one per core)".into());
        }
        let promotion_passes = raw.promotion_passes.unwrap_or(1);
        if promotion_passes == 0 {
            return Err("field `promotion_passes`: must be at least 1 (consecutive passing gate runs before a case joins the regression set)".into());
        }
        let max_unmeasured = raw.max_unmeasured.unwrap_or(0.1);
        if !(0.0..=1.0).contains(&max_unmeasured) {
            return Err(format!(
                "field `max_unmeasured`: {max_unmeasured} is not between 0 and 1 (the fraction of a step's cells that may end as harness error, provider error, timeout or missing, e.g. 0.1)"
            ));
        }
        let gate = raw.gate.unwrap_or(RawGate { mode: None, margin: None });
        let mode = match gate.mode.as_deref() {
            None | Some("simple") => Mode::Simple,
            Some("paired") => Mode::Paired,
            Some(other) => return Err(format!("field `gate.mode`: `{other}` is not `simple` or `paired`")),
        };
        let margin = gate.margin.unwrap_or(0.0);
        if !margin.is_finite() || margin.abs() > 1.0 {
            return Err(format!("field `gate.margin`: {margin} is not between -1 and 1 (a difference in mean reward)"));
        }
        if mode == Mode::Paired && epochs < 2 {
            return Err(format!(
                "field `gate.mode`: `paired` needs `epochs` >= 2 to estimate noise (found {epochs}); set e.g. `epochs: 4`"
            ));
        }
        Ok(Config {
            path,
            found,
            benchmark,
            profile,
            agent_dir,
            models: raw.models.filter(|m| !m.trim().is_empty()).map(PathBuf::from),
            train_split,
            test_split,
            threshold,
            file_guard,
            allowlist,
            epochs,
            jobs: raw.jobs,
            promotion_passes,
            mode,
            margin,
            max_unmeasured,
        })
    }
}

fn non_empty(field: &str, v: Option<String>, default: &str) -> Result<String, String> {
    match v {
        None => Ok(default.to_string()),
        Some(s) if s.trim().is_empty() => {
            Err(format!("field `{field}`: is empty; remove the key for the default `{default}`"))
        }
        Some(s) => Ok(s.trim().to_string()),
    }
}

/// The file guard's value table. Off only for an explicit false, `no`, `off`, `0` or the empty
/// string (case-insensitive, YAML booleans or strings alike); everything else, including a
/// missing key, a null and a typo such as `flase`, leaves the guard on.
pub(crate) fn file_guard_value(v: Option<&Value>) -> Result<bool, String> {
    Ok(match v {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64() != Some(0.0),
        Some(Value::String(s)) => !matches!(s.trim().to_ascii_lowercase().as_str(), "false" | "no" | "off" | "0" | ""),
        Some(other) => {
            return Err(format!("{other} is a list or a map; write `file_guard: true` or `file_guard: false`"));
        }
    })
}

/// A project-relative path without `..`, `.` or a trailing slash.
fn relative_path(s: &str) -> Result<String, String> {
    let trimmed = s.trim().trim_end_matches('/');
    if trimmed.is_empty() {
        return Err("is empty".into());
    }
    let p = Path::new(trimmed);
    let mut parts = Vec::new();
    for c in p.components() {
        match c {
            Component::Normal(x) => parts.push(x.to_string_lossy().into_owned()),
            Component::CurDir => {}
            _ => return Err(format!("`{s}` must be a path inside the project (relative, no `..`)")),
        }
    }
    if parts.is_empty() {
        return Err(format!("`{s}` names the whole project; name a file or a folder inside it"));
    }
    Ok(parts.join("/"))
}

/// Files the optimization loop may change: paths, folder prefixes (`agent/`) and globs
/// (`scripts/*.yaml`), all relative to the project root.
#[derive(Debug, Clone)]
pub(crate) struct Allowlist {
    entries: Vec<AllowEntry>,
}

#[derive(Debug, Clone)]
enum AllowEntry {
    /// A file, or a folder and everything under it.
    Path {
        text: String,
        path: String,
    },
    Glob {
        text: String,
        matcher: GlobMatcher,
    },
}

impl Allowlist {
    pub(crate) fn new(entries: &[String]) -> Result<Allowlist, String> {
        let mut out = Vec::new();
        for text in entries {
            if text.contains(['*', '?', '[', '{']) {
                let pattern = text.trim().trim_start_matches("./");
                if pattern.starts_with('/') || pattern.split('/').any(|c| c == "..") {
                    return Err(format!("`{text}` must be a pattern inside the project (relative, no `..`)"));
                }
                let glob = GlobBuilder::new(pattern)
                    .literal_separator(true)
                    .build()
                    .map_err(|e| format!("`{text}` is not a valid glob: {e}"))?;
                out.push(AllowEntry::Glob { text: text.clone(), matcher: glob.compile_matcher() });
            } else {
                let path = relative_path(text).map_err(|m| format!("entry {m}"))?;
                out.push(AllowEntry::Path { text: text.clone(), path });
            }
        }
        Ok(Allowlist { entries: out })
    }

    /// True when `rel` (a `/`-separated path relative to the project root) may change.
    pub(crate) fn allows(&self, rel: &str) -> bool {
        self.entries.iter().any(|e| match e {
            AllowEntry::Path { path, .. } => {
                rel == path || rel.strip_prefix(path.as_str()).is_some_and(|rest| rest.starts_with('/'))
            }
            AllowEntry::Glob { matcher, .. } => matcher.is_match(rel),
        })
    }

    /// The entries as written, for messages.
    pub(crate) fn describe(&self) -> String {
        if self.entries.is_empty() {
            return "(nothing)".into();
        }
        self.entries
            .iter()
            .map(|e| match e {
                AllowEntry::Path { text, .. } | AllowEntry::Glob { text, .. } => text.as_str(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_apply_when_keys_are_missing() {
        let c = Config::parse("{}").unwrap();
        assert_eq!(c.benchmark, "hc-bench");
        assert_eq!(c.profile, "oracle");
        assert_eq!(c.agent_dir, "agent");
        assert_eq!((c.train_split, c.test_split), (Split::Train, Split::Test));
        assert_eq!(c.threshold, 0.8);
        assert!(c.file_guard);
        assert_eq!((c.epochs, c.jobs, c.promotion_passes), (1, None, 1));
        assert_eq!((c.mode, c.margin), (Mode::Simple, 0.0));
        assert_eq!(c.max_unmeasured, 0.1);
        assert!(c.allowlist.allows("agent/system.md") && c.allowlist.allows("PROGRAM.md"));
        assert!(!c.allowlist.allows("agentx/system.md") && !c.allowlist.allows("src/main.rs"));
    }

    #[test]
    fn the_file_guard_value_table() {
        // Explicitly off.
        for text in [
            "false", "False", "no", "NO", "off", "Off", "0", "0.0", "'false'", "'no'", "'off'", "'0'", "''", "\"\"",
            "' OFF '",
        ] {
            let c = Config::parse(&format!("file_guard: {text}\n")).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert!(!c.file_guard, "file_guard: {text} turns the guard off");
        }
        // Everything else leaves it on: true, a typo, null, an empty value, unknown words, numbers.
        for text in ["true", "yes", "on", "1", "2", "flase", "maybe", "null", "~", "", "'disabled'", "'true'"] {
            let c = Config::parse(&format!("file_guard: {text}\n")).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert!(c.file_guard, "file_guard: {text} leaves the guard on");
        }
        assert!(Config::parse("benchmark: x\n").unwrap().file_guard, "a missing key leaves the guard on");
        let e = Config::parse("file_guard: [a]\n").unwrap_err();
        assert!(e.contains("file_guard") && e.contains("list or a map"), "{e}");
    }

    #[test]
    fn unknown_keys_and_bad_values_name_the_field() {
        let e = Config::parse("threshhold: 0.9\n").unwrap_err();
        assert!(e.contains("threshhold"), "{e}");
        let e = Config::parse("gate: {mode: simple, margn: 0.1}\n").unwrap_err();
        assert!(e.contains("margn"), "{e}");
        let cases = [
            ("threshold: 1.5\n", "field `threshold`"),
            ("epochs: 0\n", "field `epochs`"),
            ("jobs: 0\n", "field `jobs`"),
            ("promotion_passes: 0\n", "field `promotion_passes`"),
            ("max_unmeasured: 1.5\n", "field `max_unmeasured`: 1.5 is not between 0 and 1"),
            ("max_unmeasured: -0.1\n", "field `max_unmeasured`"),
            ("max_unmeasured: .nan\n", "field `max_unmeasured`"),
            ("gate: {mode: bayes}\n", "`bayes` is not `simple` or `paired`"),
            ("gate: {mode: paired}\n", "needs `epochs` >= 2"),
            ("train_split: test\n", "both `test`"),
            ("test_split: dev\n", "field `test_split`: `dev`"),
            ("agent_dir: ../elsewhere\n", "field `agent_dir`"),
            ("allowlist: ['../x']\n", "field `allowlist`"),
            ("allowlist: ['src/[']\n", "not a valid glob"),
            ("benchmark: ''\n", "field `benchmark`: is empty"),
        ];
        for (text, needle) in cases {
            let e = Config::parse(text).unwrap_err();
            assert!(e.contains(needle), "{text:?}: {e}");
        }
        let c = Config::parse("gate: {mode: paired, margin: 0.05}\nepochs: 3\n").unwrap();
        assert_eq!((c.mode, c.margin, c.epochs), (Mode::Paired, 0.05, 3));
    }

    #[test]
    fn allowlist_entries_are_paths_folders_or_globs() {
        let a = Allowlist::new(&["agent/".into(), "./PROGRAM.md".into(), "scripts/*.yaml".into()]).unwrap();
        assert!(a.allows("agent") && a.allows("agent/x/y.md") && a.allows("PROGRAM.md"));
        assert!(a.allows("scripts/a.yaml"));
        assert!(!a.allows("scripts/sub/a.yaml"), "`*` does not cross folders");
        assert!(!a.allows("PROGRAM.md.bak") && !a.allows("agents/x") && !a.allows("README.md"));
        assert_eq!(a.describe(), "agent/, ./PROGRAM.md, scripts/*.yaml");
    }

    #[test]
    fn the_shipped_config_states_the_defaults() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let shipped = Config::load(root, None).unwrap();
        let defaults = Config::parse("{}").unwrap();
        assert!(shipped.found);
        assert_eq!(format!("{:?}", Config { path: defaults.path.clone(), ..shipped }), format!("{defaults:?}"));
    }

    #[test]
    fn agent_dir_feeds_the_default_allowlist() {
        let c = Config::parse("agent_dir: ./tuning/agent/\n").unwrap();
        assert_eq!(c.agent_dir, "tuning/agent");
        assert!(c.allowlist.allows("tuning/agent/system.md"));
        assert!(!c.allowlist.allows("agent/system.md"));
    }
}
