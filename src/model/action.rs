//! The action a model asks for: a tool name and its arguments.
//!
//! Arguments stay a JSON object here; each tool parses its own arguments and turns a mismatch
//! into a tool error the model can read, so a malformed action never crashes the loop.

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Action {
    pub tool: String,
    #[serde(default)]
    pub args: Value,
}

impl Action {
    pub fn new(tool: &str, args: Value) -> Self {
        Action { tool: tool.to_string(), args }
    }

    pub fn finish(answer: &str) -> Self {
        Action::new("finish", serde_json::json!({ "answer": answer }))
    }
}
