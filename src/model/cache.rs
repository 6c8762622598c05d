//! The response cache: successful provider responses on disk, addressed by their request.
//!
//! `workspace/cache/<profile>/<sha256 of the canonical request body>.json`. The request body is
//! a pure function of the profile and the projected context (`openai.rs`), so a re-run that
//! shows the model the same context gets the same reply, and in `replay-only` mode a recorded
//! matrix re-runs fully offline. Entries hold the response body and its original latency
//! (so replayed traces match), never the API key or any header: nothing secret is ever hashed
//! into the key or written here. Writes are atomic (`util::write_atomic`): concurrent cells
//! asking the same thing both write the same bytes, and a reader never sees half an entry.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Version of the cache entry format.
const CACHE_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CacheMode {
    /// Every request goes to the provider; nothing is stored.
    Off,
    /// Hits are served from disk; misses go to the provider and are stored.
    ReadWrite,
    /// Hits are served from disk; a miss is a provider error. Never touches the network.
    ReplayOnly,
}

impl CacheMode {
    pub(crate) fn parse(s: &str) -> Option<CacheMode> {
        match s {
            "off" => Some(CacheMode::Off),
            "read-write" => Some(CacheMode::ReadWrite),
            "replay-only" => Some(CacheMode::ReplayOnly),
            _ => None,
        }
    }

    pub(crate) const NAMES: &'static str = "off, read-write, replay-only";
}

/// The cache of one profile.
#[derive(Debug, Clone)]
pub(crate) struct Cache {
    pub mode: CacheMode,
    /// `workspace/cache/<profile>`.
    pub dir: PathBuf,
}

/// One stored response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Entry {
    pub schema_version: u32,
    /// The provider kind and model, for people browsing the cache.
    pub provider: String,
    pub model: String,
    pub latency_ms: u64,
    pub response: Value,
}

impl Entry {
    pub(crate) fn new(provider: &str, model: &str, latency_ms: u64, response: Value) -> Entry {
        Entry {
            schema_version: CACHE_SCHEMA_VERSION,
            provider: provider.into(),
            model: model.into(),
            latency_ms,
            response,
        }
    }
}

impl Cache {
    /// The content address of a request body: SHA-256 of its canonical JSON (object keys
    /// sorted, no insignificant whitespace), so key order never splits the cache.
    pub(crate) fn key(body: &Value) -> String {
        let mut canonical = String::new();
        write_canonical(body, &mut canonical);
        crate::util::sha256_hex(canonical.as_bytes())
    }

    pub(crate) fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.json"))
    }

    /// The stored entry for `key`, if there is a readable one of this format version. A
    /// corrupt or foreign file is a miss (and is overwritten by the next store).
    pub(crate) fn get(&self, key: &str) -> Option<Entry> {
        if self.mode == CacheMode::Off {
            return None;
        }
        let bytes = std::fs::read(self.path(key)).ok()?;
        let entry: Entry = serde_json::from_slice(&bytes).ok()?;
        (entry.schema_version == CACHE_SCHEMA_VERSION).then_some(entry)
    }

    /// Stores an entry (read-write mode only). A failure to write is logged, not fatal: the
    /// reply itself is good.
    pub(crate) fn put(&self, key: &str, entry: &Entry) {
        if self.mode != CacheMode::ReadWrite {
            return;
        }
        let result = std::fs::create_dir_all(&self.dir).and_then(|_| {
            let bytes = serde_json::to_vec_pretty(entry).map_err(std::io::Error::other)?;
            crate::util::write_atomic(&self.path(key), &bytes)
        });
        if let Err(e) = result {
            tracing::warn!(path = %self.path(key).display(), error = %e, "cannot store a cached model response");
        }
    }

    /// Where a profile's cache lives under the project root.
    pub(crate) fn dir_for(root: &Path, profile: &str) -> PathBuf {
        root.join("workspace").join("cache").join(profile)
    }
}

/// Canonical JSON: keys sorted at every level; numbers and strings as serde_json writes them.
fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(&map[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn key_ignores_object_key_order_but_not_content() {
        let a: Value =
            serde_json::from_str(r#"{"model": "m", "messages": [{"role": "user", "content": "x"}]}"#).unwrap();
        let b: Value =
            serde_json::from_str(r#"{"messages": [{"content": "x", "role": "user"}], "model": "m"}"#).unwrap();
        let c = json!({"model": "m", "messages": [{"role": "user", "content": "y"}]});
        assert_eq!(Cache::key(&a), Cache::key(&b));
        assert_ne!(Cache::key(&a), Cache::key(&c));
        assert_eq!(Cache::key(&a).len(), 64);
    }

    #[test]
    fn modes_decide_what_is_read_and_written() {
        let dir = tempfile::tempdir().unwrap();
        let entry = Entry::new("openai-chat", "m", 12, json!({"choices": []}));
        let off = Cache { mode: CacheMode::Off, dir: dir.path().join("p") };
        off.put("k", &entry);
        assert!(!off.path("k").exists());
        let rw = Cache { mode: CacheMode::ReadWrite, ..off.clone() };
        rw.put("k", &entry);
        assert_eq!(rw.get("k"), Some(entry.clone()));
        assert_eq!(off.get("k"), None, "off never reads");
        let replay = Cache { mode: CacheMode::ReplayOnly, ..off.clone() };
        assert_eq!(replay.get("k"), Some(entry.clone()));
        replay.put("other", &entry);
        assert!(!replay.path("other").exists(), "replay-only never writes");
        std::fs::write(rw.path("bad"), "{not json").unwrap();
        assert_eq!(rw.get("bad"), None, "a corrupt entry is a miss");
    }
}
