//! hcbench's fuzz harness, for the stable toolchain: no libFuzzer, no instrumentation.
//!
//! [`targets`] holds one target per parser of outside input, [`mutate`] and [`structured`]
//! make the inputs (mutated seeds, and documents drawn with `arbitrary`), and the binary
//! (`src/main.rs`) runs a target for N executions while watching for panics, hangs and
//! unbounded allocation. `tests/regressions.rs` replays every seed and every kept finding
//! (`regressions/<target>/`) so a fixed bug stays fixed. How to run it: docs/security.md.

pub mod mutate;
pub mod structured;
pub mod targets;

/// The vocabulary of a format as its seeds show it: keys (`key:` in YAML, `key =` in TOML,
/// `"key":` in JSON) and short bare values, each at most 40 bytes, deduplicated and sorted.
pub fn vocabulary(seeds: &[Vec<u8>]) -> (Vec<String>, Vec<String>) {
    let mut keys = std::collections::BTreeSet::new();
    let mut values = std::collections::BTreeSet::new();
    let word = |s: &str| {
        !s.is_empty() && s.len() <= 40 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-./".contains(&b))
    };
    for seed in seeds {
        let text = String::from_utf8_lossy(seed);
        for line in text.lines() {
            let line = line.trim_start().trim_start_matches("- ");
            // YAML `key: value` and TOML `key = value`.
            for sep in [": ", " = "] {
                if let Some((k, v)) = line.split_once(sep) {
                    if word(k) {
                        keys.insert(k.to_string());
                    }
                    let v = v.trim().trim_matches('"');
                    if word(v) {
                        values.insert(v.to_string());
                    }
                }
            }
            if let Some(k) = line.strip_suffix(':')
                && word(k)
            {
                keys.insert(k.to_string());
            }
        }
        // JSON `"key":` and `"value"`.
        let parts: Vec<&str> = text.split('"').collect();
        for (i, part) in parts.iter().enumerate() {
            if i % 2 == 1 && word(part) {
                if parts.get(i + 1).is_some_and(|after| after.starts_with(':')) {
                    keys.insert(part.to_string());
                } else {
                    values.insert(part.to_string());
                }
            }
        }
    }
    (keys.into_iter().collect(), values.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vocabulary_has_keys_and_values_of_every_syntax() {
        let seeds = vec![
            b"id: bugfix-1\ntests:\n  runner: unittest\n".to_vec(),
            b"[gpt]\nprovider = \"openai-chat\"\n".to_vec(),
            br#"{"kind":"run_started","data":{"split":"train"}}"#.to_vec(),
        ];
        let (keys, values) = vocabulary(&seeds);
        for k in ["id", "tests", "runner", "provider", "kind", "data", "split"] {
            assert!(keys.contains(&k.to_string()), "missing key {k} in {keys:?}");
        }
        for v in ["bugfix-1", "unittest", "openai-chat", "run_started", "train"] {
            assert!(values.contains(&v.to_string()), "missing value {v} in {values:?}");
        }
    }
}
