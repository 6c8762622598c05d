//! A profile's definition: what a profile name resolves to, as settings without secrets, and
//! the digest of those settings.
//!
//! A profile name alone does not say what answers the agent: `models.toml` (gitignored), the
//! file `--models` or `HCBENCH_MODELS` names, and `HCBENCH_LOCAL_LLM_URL` all decide it, and
//! none of them is in git. The gate therefore records the definition's digest with every
//! result and refuses a changed one without a human's word (docs/gate.md), so "profile `gpt`"
//! redefined as the oracle cannot pass as `gpt`.
//!
//! Why it is shaped this way: the definition is built where the name is resolved (the
//! registry), and travels inside the [`super::Profile`], so the digest always describes the
//! profile that actually runs. Its input is the profile's settings table, which never holds a
//! key (keys are read from the environment variable `api_key_env` names, and credential
//! headers are refused when the file is read); a digest of the settings therefore never
//! depends on, or reveals, a secret. Where the file lives is kept beside the digest for
//! messages but is not hashed: the same settings from another file measure the same thing.
//! A script's *content* is not part of the definition either: a `scripted:PATH` script in the
//! allowlist is the candidate itself (bound by `record`), and one outside it is a project file
//! under the file guard.

use toml::{Table, Value};

/// What a profile name resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Definition {
    /// Where the settings come from: `built-in`, or the models file's path.
    pub source: String,
    /// The settings as `key = value` lines, sorted by key, for messages (header values are
    /// left out: they are not keys, but they are nobody's business in a log either).
    pub text: String,
    /// SHA-256 of the settings in canonical form (every key and value, sorted by key).
    pub digest: String,
}

impl Definition {
    /// The definition of a settings table read from `source`.
    pub(crate) fn of_table(source: &str, table: &Table) -> Definition {
        // A toml::Table without `preserve_order` is sorted by key, so its JSON is canonical.
        let canonical = serde_json::to_string(table).expect("a TOML table serializes as JSON");
        let text = table
            .iter()
            .map(|(key, value)| match (key.as_str(), value) {
                ("headers", Value::Table(h)) => {
                    format!("headers = [{}]", h.keys().map(String::as_str).collect::<Vec<_>>().join(", "))
                }
                _ => format!("{key} = {}", serde_json::to_string(value).expect("a TOML value serializes")),
            })
            .collect::<Vec<_>>()
            .join("\n");
        Definition { source: source.to_string(), text, digest: crate::util::sha256_hex(canonical.as_bytes()) }
    }

    /// A fixed built-in: `provider` and, for a script, its path as written.
    pub(crate) fn builtin(provider: &str, script: Option<&str>) -> Definition {
        let mut t = Table::new();
        t.insert("provider".into(), Value::String(provider.into()));
        if let Some(s) = script {
            t.insert("script".into(), Value::String(s.into()));
        }
        Definition::of_table("built-in", &t)
    }

    /// The settings on one line, for messages: `provider = "oracle"; ...`.
    pub fn one_line(&self) -> String {
        self.text.replace('\n', "; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_covers_settings_not_their_order_or_file() {
        let a: Table = toml::from_str("provider = \"openai-chat\"\nmodel = \"m\"\nbase_url = \"http://x\"\n").unwrap();
        let b: Table = toml::from_str("base_url = \"http://x\"\nmodel = \"m\"\nprovider = \"openai-chat\"\n").unwrap();
        let (da, db) = (Definition::of_table("a.toml", &a), Definition::of_table("b.toml", &b));
        assert_eq!(da.digest, db.digest, "order and file do not matter");
        assert_eq!(da.text, "base_url = \"http://x\"\nmodel = \"m\"\nprovider = \"openai-chat\"");
        let c: Table = toml::from_str("provider = \"oracle\"\n").unwrap();
        assert_eq!(Definition::of_table("m.toml", &c).digest, Definition::builtin("oracle", None).digest);
        assert_ne!(Definition::of_table("m.toml", &c).digest, da.digest);
    }

    #[test]
    fn header_values_are_hashed_but_not_shown() {
        let t: Table = toml::from_str("provider = \"openai-chat\"\n[headers]\nX-Team = \"blue\"\n").unwrap();
        let d = Definition::of_table("m.toml", &t);
        assert!(d.text.contains("headers = [X-Team]") && !d.text.contains("blue"), "{}", d.text);
        let u: Table = toml::from_str("provider = \"openai-chat\"\n[headers]\nX-Team = \"red\"\n").unwrap();
        assert_ne!(Definition::of_table("m.toml", &u).digest, d.digest);
    }
}
