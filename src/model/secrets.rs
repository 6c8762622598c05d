//! The API keys this process holds, and their removal from everything hcbench writes.
//!
//! A key is registered once, when its profile is built from the environment. From then on its
//! value is replaced by `[redacted]` at two choke points:
//!
//! - where a model's reply enters hcbench (`http.rs`, before the body is parsed, cached or
//!   quoted in an error; `remote.rs`, on the action): a server that echoes the key in its reply
//!   text therefore cannot put it into an action, a workspace file, a tool output, an artifact,
//!   the cache or a message, because the agent loop never sees it;
//! - the trace writer, as a backstop: every line is checked before it is written, so even a
//!   key that arrived by another way (a fixture holding it, a tool printing it) never reaches a
//!   trace, and the reports, results and replays built from traces.
//!
//! The registry is process-wide because both choke points are: the trace writer knows nothing
//! of profiles. Values shorter than [`MIN_LEN`] are not registered: they are placeholders such
//! as `none` or `dummy` that local servers accept, and scrubbing them would mangle ordinary
//! text (a key `test` would turn `run_tests` into `run_[redacted]s`).

use std::borrow::Cow;
use std::sync::RwLock;

use serde_json::Value;

use crate::trace::event::Event;

/// Shortest value treated as a secret.
pub(crate) const MIN_LEN: usize = 8;

/// What a key's value is replaced by.
pub(crate) const REDACTED: &str = "[redacted]";

static KNOWN: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Remembers `value` as a secret to scrub from now on.
pub(crate) fn register(value: &str) {
    if value.len() < MIN_LEN {
        return;
    }
    let mut known = KNOWN.write().unwrap_or_else(|p| p.into_inner());
    if !known.iter().any(|k| k == value) {
        known.push(value.to_string());
    }
}

fn known() -> std::sync::RwLockReadGuard<'static, Vec<String>> {
    KNOWN.read().unwrap_or_else(|p| p.into_inner())
}

/// `text` with every registered secret replaced.
pub(crate) fn redact(text: &str) -> Cow<'_, str> {
    let known = known();
    if !known.iter().any(|k| text.contains(k.as_str())) {
        return Cow::Borrowed(text);
    }
    let mut out = text.to_string();
    for k in known.iter() {
        out = out.replace(k.as_str(), REDACTED);
    }
    Cow::Owned(out)
}

/// Replaces every registered secret in the strings (and object keys) of `value`; true when
/// something was replaced. JSON escapes are already decoded here, so a key the server sent as
/// `\u0073k-...` is found too.
pub(crate) fn redact_json(value: &mut Value) -> bool {
    if known().is_empty() {
        return false;
    }
    walk(value)
}

fn walk(value: &mut Value) -> bool {
    match value {
        Value::String(s) => match redact(s) {
            Cow::Owned(clean) => {
                *s = clean;
                true
            }
            Cow::Borrowed(_) => false,
        },
        Value::Array(items) => items.iter_mut().fold(false, |hit, v| walk(v) | hit),
        Value::Object(map) => {
            let mut hit = false;
            let dirty: Vec<String> = map.keys().filter(|k| matches!(redact(k), Cow::Owned(_))).cloned().collect();
            for k in dirty {
                if let Some(v) = map.remove(&k) {
                    map.insert(redact(&k).into_owned(), v);
                    hit = true;
                }
            }
            map.values_mut().fold(hit, |hit, v| walk(v) | hit)
        }
        _ => false,
    }
}

/// The trace writer's backstop: `line` is `event` serialized. When it holds a registered
/// secret (as JSON writes it), the event's payload is scrubbed and `line` written again, so
/// the file and the event the caller goes on with (the live summary) agree. The common case,
/// no secret, costs one substring search per key.
pub(crate) fn scrub_event(event: &mut Event, line: &mut Vec<u8>) -> std::io::Result<()> {
    let hit = {
        let known = known();
        if known.is_empty() {
            return Ok(());
        }
        // serde_json writes UTF-8; a line that is not (it cannot happen) is checked as text anyway.
        let text = String::from_utf8_lossy(line);
        known.iter().any(|k| {
            // The key as JSON writes it inside a string: its quoted form without the quotes.
            let quoted = serde_json::to_string(k).unwrap_or_default();
            text.contains(&quoted[1..quoted.len().saturating_sub(1).max(1)])
        })
    };
    if !hit {
        return Ok(());
    }
    let mut body = serde_json::to_value(&event.body).map_err(std::io::Error::other)?;
    redact_json(&mut body);
    event.body = serde_json::from_value(body).map_err(std::io::Error::other)?;
    line.clear();
    serde_json::to_writer(&mut *line, &*event).map_err(std::io::Error::other)?;
    line.push(b'\n');
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::event::EventBody;

    // The registry is process-wide: each test uses keys of its own.

    #[test]
    fn registered_keys_are_replaced_in_text_and_json_and_short_values_are_not_keys() {
        register("sk-unit-secrets-1234");
        register("none");
        assert_eq!(redact("key sk-unit-secrets-1234 here"), "key [redacted] here");
        assert_eq!(redact("nothing to hide, none"), "nothing to hide, none");
        let mut v = serde_json::json!({"a": ["x sk-unit-secrets-1234"], "sk-unit-secrets-1234": 1, "n": 2});
        assert!(redact_json(&mut v));
        assert_eq!(v, serde_json::json!({"a": ["x [redacted]"], "[redacted]": 1, "n": 2}));
        assert!(!redact_json(&mut v), "nothing left to replace");
    }

    #[test]
    fn the_trace_backstop_scrubs_the_line_and_the_event() {
        register("sk-unit-trace-5678\"q");
        let mut event = Event {
            schema_version: 1,
            run_id: "r".into(),
            cell_id: "c".into(),
            seq: 0,
            ts: "t".into(),
            body: EventBody::PolicyRetry { step: 1, cause: "c".into(), message: "echo sk-unit-trace-5678\"q".into() },
        };
        let mut line = serde_json::to_vec(&event).unwrap();
        line.push(b'\n');
        scrub_event(&mut event, &mut line).unwrap();
        let text = String::from_utf8(line).unwrap();
        assert!(!text.contains("sk-unit-trace-5678"), "{text}");
        assert!(text.contains("echo [redacted]") && text.ends_with('\n'), "{text}");
        let EventBody::PolicyRetry { message, .. } = &event.body else { panic!() };
        assert_eq!(message, "echo [redacted]");
    }
}
