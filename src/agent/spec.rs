//! The agent spec: the embedded agent's tunable behaviour as data (`agent/` by default).
//!
//! An optimization loop improves the agent by editing these files, never the Rust code: the
//! system prompt, the action-format instructions, tool descriptions, context budgets and
//! switches, and the retry policy. The spec's digest is recorded in every trace, so a result
//! is always tied to the exact spec that produced it (`hcbench record` relies on this).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::action::Tool;

const DEFAULT_YAML: &str = include_str!("../../agent/agent.yaml");
const DEFAULT_SYSTEM: &str = include_str!("../../agent/system.md");
const DEFAULT_FORMAT: &str = include_str!("../../agent/format.md");

#[derive(Debug, Clone, PartialEq)]
pub struct AgentSpec {
    pub system_prompt: String,
    pub action_format: String,
    pub tool_descriptions: BTreeMap<Tool, String>,
    pub budgets: Budgets,
    /// How the context is built each turn (`context.mode`).
    pub mode: ContextMode,
    /// Inject the ranked repo map (modes `pack` and `memory`).
    pub repo_map: bool,
    /// Fold older observations into a summary instead of dropping them (modes `pack`, `memory`).
    pub compaction: bool,
    pub max_invalid_replies: u32,
    pub explain_denials: bool,
    /// Budgets of a read-only delegation (`delegation`): what a `delegate_readonly` call gets
    /// when it names none, and the most it may ask for.
    pub delegation: DelegationBudgets,
    /// Commands run before and after tool calls (`hooks:`, [`super::hooks`]).
    pub hooks: super::hooks::HookSet,
    /// SHA-256 over the spec's files, in a fixed order.
    pub digest: String,
    /// Where it was loaded from; None for the embedded default.
    pub dir: Option<PathBuf>,
}

/// How the context is built each turn (docs/context.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextMode {
    /// No management: every observation in full, no budgets, no repo map, memory or compaction.
    /// The baseline that shows what the pipeline buys.
    None,
    /// Budgeted sections, the repo map and compaction, without working memory.
    Pack,
    /// `pack` plus the working-memory section.
    Memory,
}

impl ContextMode {
    pub const NAMES: &'static str = "none, pack, memory";

    pub fn parse(s: &str) -> Option<ContextMode> {
        match s {
            "none" => Some(ContextMode::None),
            "pack" => Some(ContextMode::Pack),
            "memory" => Some(ContextMode::Memory),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ContextMode::None => "none",
            ContextMode::Pack => "pack",
            ContextMode::Memory => "memory",
        }
    }
}

/// Budgets in estimated tokens ([`super::tokens`]): one per section, and one for the whole
/// projection that lower-priority sections give way to first (`context::pack`).
#[derive(Debug, Clone, PartialEq)]
pub struct Budgets {
    pub total: usize,
    pub system: usize,
    pub tools: usize,
    pub repo_map: usize,
    pub packed: usize,
    pub observations: usize,
    pub memory: usize,
}

impl Default for Budgets {
    fn default() -> Self {
        Budgets {
            total: 12_000,
            system: 1_200,
            tools: 1_000,
            repo_map: 1_000,
            packed: 600,
            observations: 7_000,
            memory: 600,
        }
    }
}

/// A delegation's step and token budgets (`delegation.max_steps`, `delegation.max_tokens`).
/// The child's tokens count toward the cell, so these bound what one question may cost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DelegationBudgets {
    pub max_steps: u32,
    /// Input and output tokens of the child's model turns, summed.
    pub max_tokens: u64,
}

impl Default for DelegationBudgets {
    fn default() -> Self {
        DelegationBudgets { max_steps: 8, max_tokens: 60_000 }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("agent spec {file}: {message}")]
pub struct SpecError {
    pub file: PathBuf,
    pub message: String,
}

/// The context ablations `hcbench ablate --context` knows, `full` (the reference) first.
pub const ABLATIONS: &[&str] = &["full", "no_repomap", "no_memory", "no_context_compaction", "no_policy_retry"];

#[derive(Debug, thiserror::Error)]
pub enum AblationError {
    #[error("`{0}` is not an ablation; known ablations: {list}", list = ABLATIONS.join(", "))]
    Unknown(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    system_prompt_file: String,
    action_format_file: String,
    #[serde(default)]
    context: RawContext,
    #[serde(default)]
    retry: RawRetry,
    #[serde(default)]
    tool_descriptions: BTreeMap<String, String>,
    #[serde(default)]
    delegation: RawDelegation,
    #[serde(default)]
    hooks: super::hooks::RawHooks,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawDelegation {
    max_steps: Option<u32>,
    max_tokens: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawContext {
    mode: Option<String>,
    #[serde(default)]
    budgets: RawBudgets,
    repo_map: Option<bool>,
    compaction: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawBudgets {
    total: Option<usize>,
    system: Option<usize>,
    tools: Option<usize>,
    repo_map: Option<usize>,
    packed: Option<usize>,
    observations: Option<usize>,
    memory: Option<usize>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawRetry {
    max_invalid_replies: Option<u32>,
    explain_denials: Option<bool>,
}

impl Default for AgentSpec {
    fn default() -> Self {
        build(
            DEFAULT_YAML,
            |name| match name {
                "system.md" => Ok(DEFAULT_SYSTEM.to_string()),
                "format.md" => Ok(DEFAULT_FORMAT.to_string()),
                other => Err(format!("the embedded spec has no file {other}")),
            },
            Path::new("<embedded agent.yaml>"),
            None,
        )
        .expect("the embedded agent spec is valid")
    }
}

impl AgentSpec {
    /// Loads `dir/agent.yaml` and the files it names.
    pub fn load(dir: &Path) -> Result<AgentSpec, SpecError> {
        let yaml_path = dir.join("agent.yaml");
        let yaml = std::fs::read_to_string(&yaml_path)
            .map_err(|e| SpecError { file: yaml_path.clone(), message: format!("cannot read: {e}") })?;
        build(
            &yaml,
            |name| {
                let p = inside_agent_dir(dir, name)?;
                std::fs::read_to_string(&p).map_err(|e| format!("cannot read {}: {e}", p.display()))
            },
            &yaml_path,
            Some(dir.to_path_buf()),
        )
    }

    /// The spec for `--agent DIR`, else `<root>/agent` when present, else the embedded default.
    pub fn resolve(root: &Path, flag: Option<&Path>) -> Result<AgentSpec, SpecError> {
        match flag {
            Some(dir) => AgentSpec::load(dir),
            None if root.join("agent/agent.yaml").is_file() => AgentSpec::load(&root.join("agent")),
            None => Ok(AgentSpec::default()),
        }
    }

    /// This spec with one ablation applied ([`ABLATIONS`]). The digest stays the base spec's:
    /// an ablation is a pure function of (spec, name), so the pair identifies the variant, and
    /// the name is recorded next to the digest (manifest `ablations`, trace `run_started`).
    /// Keeping the digest lets `--resume` check the base spec exactly as `matrix` does.
    pub fn with_ablation(&self, name: &str) -> Result<AgentSpec, AblationError> {
        let mut spec = self.clone();
        match name {
            "full" => {}
            "no_repomap" => spec.repo_map = false,
            "no_memory" => {
                if spec.mode == ContextMode::Memory {
                    spec.mode = ContextMode::Pack;
                }
            }
            // Observations that no longer fit are dropped whole instead of folded.
            "no_context_compaction" => spec.compaction = false,
            // With policy retry, a denied, invalid or unparseable action gets a corrective
            // message (`policy_retry`) and the model tries again within its step budget. Without
            // it the first unparseable reply ends the cell (1: the loop stops once one is seen
            // in a row), and a denied or invalid action is reported without its reason or a
            // hint; the step is still spent, as in every variant.
            "no_policy_retry" => {
                spec.max_invalid_replies = 1;
                spec.explain_denials = false;
            }
            other => return Err(AblationError::Unknown(other.to_string())),
        }
        Ok(spec)
    }

    /// This spec with its context mode replaced (`--context-mode`). Unlike an ablation the
    /// override is not recorded beside the digest, so it goes into the digest: a run, its
    /// resume and `hcbench record` then all see a different spec.
    pub fn with_mode(&self, mode: ContextMode) -> AgentSpec {
        if mode == self.mode {
            return self.clone();
        }
        let mut spec = self.clone();
        spec.mode = mode;
        spec.digest = crate::util::sha256_hex(format!("{}\ncontext.mode={}", self.digest, mode.as_str()).as_bytes());
        spec
    }

    /// The description the model sees for `tool`.
    pub fn describe(&self, tool: Tool) -> &str {
        self.tool_descriptions.get(&tool).map(String::as_str).unwrap_or_else(|| tool.describe())
    }
}

/// `dir/name` when it names a file inside the agent directory. A spec file outside it (an
/// absolute path, a `..`, a symbolic link that leads out) would change what the agent does
/// without changing anything `record` binds: the same commit would then be recorded twice with
/// different spec digests, and the gate's record of the spec would mean nothing.
fn inside_agent_dir(dir: &Path, name: &str) -> Result<PathBuf, String> {
    let fix = format!("put the file in {} and name it relative to it (e.g. `system.md`)", dir.display());
    let rel = Path::new(name);
    if rel.is_absolute() {
        return Err(format!("`{name}` is an absolute path; spec files must lie inside the agent directory: {fix}"));
    }
    if rel.components().any(|c| matches!(c, std::path::Component::ParentDir)) {
        return Err(format!("`{name}` leaves the agent directory with `..`; spec files must lie inside it: {fix}"));
    }
    let path = dir.join(rel);
    // A symbolic link (of the file, or of a folder on the way) that resolves outside the
    // directory is refused too; a missing file is reported by the read that follows.
    if let (Ok(real), Ok(real_dir)) = (path.canonicalize(), dir.canonicalize())
        && !real.starts_with(&real_dir)
    {
        return Err(format!(
            "`{name}` is a symbolic link to {}, outside the agent directory; spec files must lie inside it: copy the file in instead of linking it ({fix})",
            real.display()
        ));
    }
    Ok(path)
}

fn build(
    yaml: &str,
    read: impl Fn(&str) -> Result<String, String>,
    yaml_path: &Path,
    dir: Option<PathBuf>,
) -> Result<AgentSpec, SpecError> {
    let err = |message: String| SpecError { file: yaml_path.to_path_buf(), message };
    let raw: RawSpec = serde_saphyr::from_str(yaml)
        .map_err(|e| err(format!("is not valid: {}", crate::util::yaml_error(&e, yaml_path))))?;
    let system_prompt = read(&raw.system_prompt_file).map_err(|m| err(format!("field `system_prompt_file`: {m}")))?;
    let action_format = read(&raw.action_format_file).map_err(|m| err(format!("field `action_format_file`: {m}")))?;
    let mut tool_descriptions = BTreeMap::new();
    for (name, text) in &raw.tool_descriptions {
        let tool = Tool::parse(name).ok_or_else(|| {
            err(format!("field `tool_descriptions`: `{name}` is not a tool; known tools: {}", Tool::names()))
        })?;
        tool_descriptions.insert(tool, text.clone());
    }
    let d = Budgets::default();
    let b = &raw.context.budgets;
    let budgets = Budgets {
        total: b.total.unwrap_or(d.total),
        system: b.system.unwrap_or(d.system),
        tools: b.tools.unwrap_or(d.tools),
        repo_map: b.repo_map.unwrap_or(d.repo_map),
        packed: b.packed.unwrap_or(d.packed),
        observations: b.observations.unwrap_or(d.observations),
        memory: b.memory.unwrap_or(d.memory),
    };
    let mode = match raw.context.mode.as_deref() {
        None => ContextMode::Memory,
        Some(m) => ContextMode::parse(m).ok_or_else(|| {
            err(format!("field `context.mode`: `{m}` is not a context mode; use one of {}", ContextMode::NAMES))
        })?,
    };
    let dd = DelegationBudgets::default();
    let delegation = DelegationBudgets {
        max_steps: raw.delegation.max_steps.unwrap_or(dd.max_steps),
        max_tokens: raw.delegation.max_tokens.unwrap_or(dd.max_tokens),
    };
    if delegation.max_steps == 0 || delegation.max_tokens == 0 {
        let field = if delegation.max_steps == 0 { "max_steps" } else { "max_tokens" };
        return Err(err(format!(
            "field `delegation.{field}`: must be at least 1 (a delegation with no budget can never answer)"
        )));
    }
    // The spec's digest is over its files as written, so these budgets are in it already.
    let hooks = super::hooks::parse(raw.hooks, &read).map_err(err)?;
    let mut hasher_input = Vec::new();
    // The files hooks name follow, by path: a changed hook script is a changed spec. A spec
    // without hooks hashes exactly as before hooks existed.
    let hook_files = hooks.files.iter().flat_map(|(path, text)| [path.as_str(), text.as_str()]);
    for part in [yaml, &system_prompt, &action_format].into_iter().chain(hook_files) {
        hasher_input.extend_from_slice(&(part.len() as u64).to_le_bytes());
        hasher_input.extend_from_slice(part.as_bytes());
    }
    Ok(AgentSpec {
        system_prompt,
        action_format,
        tool_descriptions,
        budgets,
        mode,
        repo_map: raw.context.repo_map.unwrap_or(true),
        compaction: raw.context.compaction.unwrap_or(true),
        max_invalid_replies: raw.retry.max_invalid_replies.unwrap_or(3).max(1),
        explain_denials: raw.retry.explain_denials.unwrap_or(true),
        delegation,
        hooks,
        digest: crate::util::sha256_hex(&hasher_input),
        dir,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_repository_spec_equals_the_embedded_default() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("agent");
        let loaded = AgentSpec::load(&dir).unwrap();
        assert_eq!(loaded.digest, AgentSpec::default().digest);
    }

    #[test]
    fn ablations_switch_one_thing_and_keep_the_digest() {
        let base = AgentSpec::default();
        assert_eq!((base.mode, base.repo_map, base.compaction), (ContextMode::Memory, true, true));
        assert_eq!(base.with_ablation("full").unwrap(), base);
        assert!(!base.with_ablation("no_repomap").unwrap().repo_map);
        assert_eq!(base.with_ablation("no_memory").unwrap().mode, ContextMode::Pack);
        assert!(!base.with_ablation("no_context_compaction").unwrap().compaction);
        let s = base.with_ablation("no_policy_retry").unwrap();
        assert_eq!((s.max_invalid_replies, s.explain_denials), (1, false));
        for name in ABLATIONS {
            assert_eq!(base.with_ablation(name).unwrap().digest, base.digest, "{name}");
        }
        assert!(base.with_ablation("no_brain").unwrap_err().to_string().contains("not an ablation"));
    }

    #[test]
    fn bad_specs_name_the_file_and_field() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("agent.yaml"),
            "system_prompt_file: s.md\naction_format_file: f.md\ntool_descriptions: {teleport: x}\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("s.md"), "s").unwrap();
        std::fs::write(dir.path().join("f.md"), "f").unwrap();
        let e = AgentSpec::load(dir.path()).unwrap_err().to_string();
        assert!(e.contains("agent.yaml") && e.contains("`teleport` is not a tool"), "{e}");
        std::fs::write(dir.path().join("agent.yaml"), "system_prompt_file: missing.md\naction_format_file: f.md\n")
            .unwrap();
        let e = AgentSpec::load(dir.path()).unwrap_err().to_string();
        assert!(e.contains("system_prompt_file") && e.contains("missing.md"), "{e}");
        std::fs::write(
            dir.path().join("agent.yaml"),
            "system_prompt_file: s.md\naction_format_file: f.md\ncontxt: {}\n",
        )
        .unwrap();
        assert!(AgentSpec::load(dir.path()).unwrap_err().to_string().contains("contxt"));
        std::fs::write(
            dir.path().join("agent.yaml"),
            "system_prompt_file: s.md\naction_format_file: f.md\ncontext: {mode: full}\n",
        )
        .unwrap();
        let e = AgentSpec::load(dir.path()).unwrap_err().to_string();
        assert!(e.contains("context.mode") && e.contains("`full`") && e.contains("none, pack, memory"), "{e}");
    }

    #[test]
    fn spec_files_must_lie_inside_the_agent_directory() {
        let outer = tempfile::tempdir().unwrap();
        let dir = outer.path().join("agent");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(outer.path().join("outside.md"), "outside").unwrap();
        std::fs::write(dir.join("f.md"), "f").unwrap();
        let abs = outer.path().join("outside.md");
        std::os::unix::fs::symlink(&abs, dir.join("link.md")).unwrap();
        for (value, needle) in [
            (abs.display().to_string(), "is an absolute path"),
            ("../outside.md".to_string(), "leaves the agent directory with `..`"),
            ("link.md".to_string(), "is a symbolic link to"),
        ] {
            std::fs::write(
                dir.join("agent.yaml"),
                format!("system_prompt_file: '{value}'\naction_format_file: f.md\n"),
            )
            .unwrap();
            let e = AgentSpec::load(&dir).unwrap_err().to_string();
            assert!(e.contains("agent.yaml") && e.contains("field `system_prompt_file`") && e.contains(needle), "{e}");
            assert!(e.contains("put the file in"), "the message says how to fix it: {e}");
        }
        // A link that stays inside is fine.
        std::os::unix::fs::symlink(dir.join("f.md"), dir.join("alias.md")).unwrap();
        std::fs::write(dir.join("agent.yaml"), "system_prompt_file: alias.md\naction_format_file: ./f.md\n").unwrap();
        assert_eq!(AgentSpec::load(&dir).unwrap().system_prompt, "f");
    }

    #[test]
    fn delegation_budgets_default_are_read_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("s.md"), "s").unwrap();
        std::fs::write(dir.path().join("f.md"), "f").unwrap();
        let load = |extra: &str| {
            std::fs::write(
                dir.path().join("agent.yaml"),
                format!("system_prompt_file: s.md\naction_format_file: f.md\n{extra}"),
            )
            .unwrap();
            AgentSpec::load(dir.path()).map_err(|e| e.to_string())
        };
        assert_eq!(load("").unwrap().delegation, DelegationBudgets::default());
        let spec = load("delegation: {max_steps: 3, max_tokens: 500}\n").unwrap();
        assert_eq!(spec.delegation, DelegationBudgets { max_steps: 3, max_tokens: 500 });
        assert_ne!(spec.digest, load("").unwrap().digest, "the budgets are part of the spec's digest");
        let e = load("delegation: {max_steps: 0}\n").unwrap_err();
        assert!(e.contains("agent.yaml") && e.contains("field `delegation.max_steps`: must be at least 1"), "{e}");
        let e = load("delegation: {max_step: 3}\n").unwrap_err();
        assert!(e.contains("max_step"), "{e}");
    }

    #[test]
    fn a_mode_override_changes_the_digest_and_only_the_mode() {
        let base = AgentSpec::default();
        assert_eq!(base.with_mode(ContextMode::Memory), base, "the spec's own mode is no override");
        let none = base.with_mode(ContextMode::None);
        assert_eq!(none.mode, ContextMode::None);
        assert_ne!(none.digest, base.digest);
        assert_eq!(AgentSpec { mode: base.mode, digest: base.digest.clone(), ..none }, base);
    }
}
