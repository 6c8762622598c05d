//! Entry points for the fuzz harness in `fuzz/` (docs/security.md, "Fuzzing"): the parsers that
//! take outside input but are crate-private, reachable here without the command layer.
//!
//! Nothing in hcbench calls these. They are thin: each forwards to the function the real code
//! path uses, so a finding here is a finding in that path, and they add no rules of their own.
//! Parsers that are public already (`trace::read_trace`, `replay::replay_trace`,
//! `bench::load_benchmark`, `bench::suite::select_suite`, `model::registry::Profiles::load`,
//! `model::scripted::Script::load`) are fuzzed directly.

use std::path::Path;

use crate::action::Action;
use crate::model::openai::{self, Api};
use crate::model::parse::{RawReply, parse_calls};

/// The actions in a model's text reply, as the agent loop gets them from a provider adapter.
pub fn reply_text(text: &str, truncated: bool) -> Result<Vec<Action>, String> {
    let raw = RawReply { text: text.to_string(), tool_calls: Vec::new(), truncated };
    parse_calls(&raw).map_err(|e| e.to_string())
}

/// The actions in a provider's response body (Chat Completions, or the Responses API when
/// `responses` is true): the bytes an HTTP server sent, read as the transport reads them; every
/// native tool call of the reply, in order, as the agent loop runs them (a batch).
pub fn response_body(responses: bool, body: &[u8]) -> Result<Vec<Action>, String> {
    let value: serde_json::Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let api = if responses { Api::Responses } else { Api::Chat };
    let interpreted = openai::interpret(api, &value)?;
    parse_calls(&interpreted.raw).map_err(|e| e.to_string())
}

/// Loads an experiment config file as `hcbench gate --config FILE` does; `Ok` holds its
/// one-line description for the harness to look at.
pub fn experiment_config(root: &Path, file: &Path) -> Result<String, String> {
    crate::gate::config::Config::load(root, Some(file)).map(|c| format!("{c:?}")).map_err(|e| e.to_string())
}
