//! The two OpenAI wire formats: Chat Completions (`/chat/completions`, e.g. DeepSeek, vLLM,
//! llama.cpp) and Responses (`/responses`, e.g. GPT with reasoning effort).
//!
//! Pure functions only: a [`ModelRequest`] becomes a JSON request body, and a JSON response
//! body becomes a [`RawReply`] plus token usage. The network, retries and the cache live in
//! `http.rs`; turning text into an action lives in `parse.rs`. Keeping the bodies pure makes
//! them deterministic, which the response cache depends on (its key is the body's hash).

use serde_json::{Map, Value, json};

use super::ModelRequest;
use super::parse::{RawReply, RawToolCall};
use crate::action::{ArgKind, Need, Tool};
use crate::trace::event::Usage;

/// Which wire format a profile speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Api {
    Chat,
    Responses,
}

impl Api {
    /// The path appended to the profile's base URL (which ends in `/v1` or another version).
    pub(crate) fn endpoint(self) -> &'static str {
        match self {
            Api::Chat => "chat/completions",
            Api::Responses => "responses",
        }
    }

    pub(crate) fn provider_name(self) -> &'static str {
        match self {
            Api::Chat => "openai-chat",
            Api::Responses => "openai-responses",
        }
    }
}

/// How the request asks for JSON output (ignored when native tool calls are used).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResponseFormat {
    /// A JSON schema for `{"tool": ..., "args": {...}}`: grammar-constrained on llama.cpp,
    /// structured outputs on OpenAI.
    JsonSchema,
    /// Plain JSON mode (`{"type": "json_object"}`), e.g. DeepSeek.
    JsonObject,
    /// Nothing: the system prompt alone asks for JSON.
    None,
}

/// Where a Responses request carries its output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SchemaField {
    /// `text.format`, as the OpenAI Responses API defines it.
    TextFormat,
    /// A top-level `response_format`, which llama.cpp's `/v1/responses` honours instead.
    ResponseFormat,
}

/// What a request body depends on besides the context.
#[derive(Debug, Clone)]
pub(crate) struct BodyOptions {
    pub api: Api,
    pub model: String,
    pub max_output_tokens: u32,
    pub temperature: Option<f64>,
    pub reasoning_effort: Option<String>,
    pub native_tools: bool,
    pub response_format: ResponseFormat,
    pub schema_field: SchemaField,
}

/// The system message and the user message for the packed context: the `system` section is
/// the system message, every other non-empty section becomes a titled part of one user message,
/// in the pipeline's order.
pub(crate) fn messages(request: &ModelRequest) -> (String, String) {
    let mut system = String::new();
    let mut user = String::new();
    for (name, text) in &request.sections {
        if name == "system" {
            if !system.is_empty() {
                system.push_str("\n\n");
            }
            system.push_str(text);
        } else if !text.trim().is_empty() {
            if !user.is_empty() {
                user.push_str("\n\n");
            }
            user.push_str(&format!("## {name}\n{text}"));
        }
    }
    if user.is_empty() {
        user.push_str("Choose the next action.");
    }
    (system, user)
}

/// The request body for one turn. `tools` are the case's allowed tools (for native tool
/// calls and the schema's tool enum).
pub(crate) fn request_body(opts: &BodyOptions, request: &ModelRequest, tools: &[Tool]) -> Value {
    let (system, user) = messages(request);
    let mut body = Map::new();
    body.insert("model".into(), Value::String(opts.model.clone()));
    match opts.api {
        Api::Chat => {
            let mut msgs = Vec::new();
            if !system.is_empty() {
                msgs.push(json!({"role": "system", "content": system}));
            }
            msgs.push(json!({"role": "user", "content": user}));
            body.insert("messages".into(), Value::Array(msgs));
            // `max_tokens` is what DeepSeek, vLLM and llama.cpp read; OpenAI still accepts it
            // for non-reasoning chat models (the GPT profile uses the Responses API).
            body.insert("max_tokens".into(), Value::from(opts.max_output_tokens));
            body.insert("stream".into(), Value::Bool(false));
        }
        Api::Responses => {
            if !system.is_empty() {
                body.insert("instructions".into(), Value::String(system));
            }
            body.insert("input".into(), json!([{"role": "user", "content": user}]));
            body.insert("max_output_tokens".into(), Value::from(opts.max_output_tokens));
            // Nothing of a benchmark run should be kept server-side.
            body.insert("store".into(), Value::Bool(false));
            if let Some(effort) = &opts.reasoning_effort {
                body.insert("reasoning".into(), json!({"effort": effort}));
            }
        }
    }
    if let Some(t) = opts.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if opts.native_tools {
        let defs: Vec<Value> = tools
            .iter()
            .map(|t| match opts.api {
                Api::Chat => json!({"type": "function", "function": {
                    "name": t.as_str(), "description": t.describe(), "parameters": tool_parameters(*t)}}),
                Api::Responses => json!({"type": "function", "name": t.as_str(), "description": t.describe(),
                    "parameters": tool_parameters(*t), "strict": false}),
            })
            .collect();
        body.insert("tools".into(), Value::Array(defs));
        body.insert("tool_choice".into(), Value::String("required".into()));
    } else {
        let schema = || action_schema(tools);
        let text_format = opts.api == Api::Responses && opts.schema_field == SchemaField::TextFormat;
        let format = match opts.response_format {
            ResponseFormat::None => None,
            ResponseFormat::JsonObject => Some(json!({"type": "json_object"})),
            // The Responses API flattens name and schema into the format object.
            ResponseFormat::JsonSchema if text_format => {
                Some(json!({"type": "json_schema", "name": "action", "schema": schema(), "strict": false}))
            }
            ResponseFormat::JsonSchema => Some(
                json!({"type": "json_schema", "json_schema": {"name": "action", "schema": schema(), "strict": false}}),
            ),
        };
        if let Some(format) = format {
            if text_format {
                body.insert("text".into(), json!({"format": format}));
            } else {
                body.insert("response_format".into(), format);
            }
        }
    }
    Value::Object(body)
}

/// The schema of one action: a tool from the allowed list and an arguments object.
pub(crate) fn action_schema(tools: &[Tool]) -> Value {
    let names: Vec<&str> = tools.iter().map(|t| t.as_str()).collect();
    json!({
        "type": "object",
        "properties": {
            "tool": {"type": "string", "enum": names},
            "args": {"type": "object"}
        },
        "required": ["tool", "args"]
    })
}

/// JSON-schema parameters of one tool, for native tool calls, built from the tool's row in
/// [`crate::action::TOOLS`]. The body is part of the response cache's key, so the shape of
/// each property must stay as it is.
pub(crate) fn tool_parameters(tool: Tool) -> Value {
    let def = tool.def();
    let props: Map<String, Value> = def
        .args
        .iter()
        .map(|a| {
            let schema = match a.kind {
                ArgKind::Text => json!({"type": "string", "description": a.about}),
                ArgKind::Count => json!({"type": "integer", "minimum": 1, "description": a.about}),
                ArgKind::Flag => json!({"type": "boolean", "description": a.about}),
                ArgKind::TextList => json!({"type": "array", "items": {"type": "string"}, "description": a.about}),
            };
            (a.name.to_string(), schema)
        })
        .collect();
    let required: Vec<&str> = def.args.iter().filter(|a| a.need == Need::Required).map(|a| a.name).collect();
    json!({"type": "object", "properties": props, "required": required})
}

/// What one response body held.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Interpreted {
    pub raw: RawReply,
    pub usage: Option<Usage>,
}

/// Reads a successful response body. An `Err` means the body is not a response of this API
/// at all (an error object, a missing `choices`/`output`): the transport treats that like a
/// server fault and retries.
pub(crate) fn interpret(api: Api, body: &Value) -> Result<Interpreted, String> {
    if let Some(err) = body.get("error").filter(|e| !e.is_null()) {
        return Err(format!("the response is an error: {}", error_message(err)));
    }
    match api {
        Api::Chat => interpret_chat(body),
        Api::Responses => interpret_responses(body),
    }
}

fn interpret_chat(body: &Value) -> Result<Interpreted, String> {
    let choice =
        body.get("choices").and_then(Value::as_array).and_then(|c| c.first()).ok_or("the response has no `choices`")?;
    let message = choice.get("message").filter(|m| m.is_object()).ok_or("the first choice has no `message`")?;
    let text = content_text(message.get("content"));
    let mut tool_calls = Vec::new();
    if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
        for call in calls {
            let function = call.get("function").unwrap_or(call);
            if let Some(name) = function.get("name").and_then(Value::as_str) {
                tool_calls.push(RawToolCall {
                    name: name.to_string(),
                    arguments: function.get("arguments").cloned().unwrap_or(Value::Null),
                });
            }
        }
    }
    // The legacy single `function_call`.
    if let Some(name) = message.pointer("/function_call/name").and_then(Value::as_str) {
        tool_calls.push(RawToolCall {
            name: name.to_string(),
            arguments: message.pointer("/function_call/arguments").cloned().unwrap_or(Value::Null),
        });
    }
    let truncated = choice.get("finish_reason").and_then(Value::as_str) == Some("length");
    let usage = usage(body, "prompt_tokens", "completion_tokens", "/prompt_tokens_details/cached_tokens");
    Ok(Interpreted { raw: RawReply { text, tool_calls, truncated }, usage })
}

fn interpret_responses(body: &Value) -> Result<Interpreted, String> {
    let status = body.get("status").and_then(Value::as_str).unwrap_or("completed");
    if status == "failed" {
        let err = body.get("error").map(error_message).unwrap_or_else(|| "no error given".into());
        return Err(format!("the response failed: {err}"));
    }
    let output = body.get("output").and_then(Value::as_array).ok_or("the response has no `output`")?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for item in output {
        match item.get("type").and_then(Value::as_str) {
            Some("message") => {
                if let Some(parts) = item.get("content").and_then(Value::as_array) {
                    for part in parts {
                        if part.get("type").and_then(Value::as_str) == Some("output_text")
                            && let Some(t) = part.get("text").and_then(Value::as_str)
                        {
                            text.push_str(t);
                        }
                    }
                } else if let Some(t) = item.get("content").and_then(Value::as_str) {
                    text.push_str(t);
                }
            }
            Some("function_call") => {
                if let Some(name) = item.get("name").and_then(Value::as_str) {
                    tool_calls.push(RawToolCall {
                        name: name.to_string(),
                        arguments: item.get("arguments").cloned().unwrap_or(Value::Null),
                    });
                }
            }
            // Reasoning items and anything newer carry no action.
            _ => {}
        }
    }
    // Some compatible servers add the SDK's convenience field instead of message items.
    if text.is_empty()
        && let Some(t) = body.get("output_text").and_then(Value::as_str)
    {
        text.push_str(t);
    }
    let truncated = status == "incomplete"
        && body.pointer("/incomplete_details/reason").and_then(Value::as_str) == Some("max_output_tokens");
    let usage = usage(body, "input_tokens", "output_tokens", "/input_tokens_details/cached_tokens");
    Ok(Interpreted { raw: RawReply { text, tool_calls, truncated }, usage })
}

/// Chat `content` is a string, null, or (some servers) an array of text parts.
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str).or_else(|| p.as_str()))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// Token usage from `usage`, with the prompt-cache hits at `cached` (a JSON pointer inside
/// `usage`) where the provider reports them.
fn usage(body: &Value, input: &str, output: &str, cached: &str) -> Option<Usage> {
    let u = body.get("usage")?;
    let input_tokens = u.get(input).and_then(Value::as_u64);
    let output_tokens = u.get(output).and_then(Value::as_u64);
    if input_tokens.is_none() && output_tokens.is_none() {
        return None;
    }
    Some(Usage {
        input_tokens: input_tokens.unwrap_or(0),
        output_tokens: output_tokens.unwrap_or(0),
        cached_input_tokens: u.pointer(cached).and_then(Value::as_u64),
    })
}

/// The human part of an OpenAI-style error object (`{"message": ..., "type": ..., "code": ...}`)
/// or of whatever else a server sent.
pub(crate) fn error_message(err: &Value) -> String {
    match err {
        Value::String(s) => s.clone(),
        Value::Object(m) => {
            let msg = m.get("message").and_then(Value::as_str).unwrap_or("");
            let code = m.get("code").or_else(|| m.get("type")).and_then(|c| match c {
                Value::String(s) => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            });
            match (msg.is_empty(), code) {
                (false, Some(code)) => format!("{msg} ({code})"),
                (false, None) => msg.to_string(),
                (true, Some(code)) => code,
                (true, None) => err.to_string(),
            }
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::{Action, Call};

    fn opts(api: Api) -> BodyOptions {
        BodyOptions {
            api,
            model: "m".into(),
            max_output_tokens: 256,
            temperature: Some(0.0),
            reasoning_effort: None,
            native_tools: false,
            response_format: ResponseFormat::JsonSchema,
            schema_field: SchemaField::TextFormat,
        }
    }

    fn request() -> ModelRequest {
        ModelRequest {
            step: 1,
            sections: vec![
                ("system".into(), "be careful".into()),
                ("task".into(), "fix add".into()),
                ("observations".into(), String::new()),
            ],
        }
    }

    #[test]
    fn sections_become_a_system_and_a_user_message() {
        let (system, user) = messages(&request());
        assert_eq!(system, "be careful");
        assert_eq!(user, "## task\nfix add", "empty sections are left out");
    }

    #[test]
    fn chat_body_carries_schema_limits_and_messages() {
        let body = request_body(&opts(Api::Chat), &request(), &[Tool::ReadFile, Tool::Finish]);
        assert_eq!(body["messages"][0], json!({"role": "system", "content": "be careful"}));
        assert_eq!(body["messages"][1]["role"], "user");
        assert_eq!(body["max_tokens"], 256);
        assert_eq!(body["temperature"], 0.0);
        assert_eq!(body["response_format"]["type"], "json_schema");
        assert_eq!(
            body["response_format"]["json_schema"]["schema"]["properties"]["tool"]["enum"],
            json!(["read_file", "finish"])
        );
        assert!(body.get("tools").is_none());
        let mut o = opts(Api::Chat);
        o.response_format = ResponseFormat::JsonObject;
        assert_eq!(request_body(&o, &request(), &[])["response_format"], json!({"type": "json_object"}));
        o.response_format = ResponseFormat::None;
        o.temperature = None;
        let body = request_body(&o, &request(), &[]);
        assert!(body.get("response_format").is_none() && body.get("temperature").is_none());
    }

    #[test]
    fn responses_body_uses_instructions_input_effort_and_text_format() {
        let mut o = opts(Api::Responses);
        o.reasoning_effort = Some("low".into());
        let body = request_body(&o, &request(), &[Tool::RunTests]);
        assert_eq!(body["instructions"], "be careful");
        assert_eq!(body["input"][0]["role"], "user");
        assert_eq!(body["max_output_tokens"], 256);
        assert_eq!(body["reasoning"], json!({"effort": "low"}));
        assert_eq!(body["store"], false);
        assert_eq!(body["text"]["format"]["type"], "json_schema");
        assert_eq!(body["text"]["format"]["name"], "action");
        assert!(body.get("response_format").is_none());
        o.schema_field = SchemaField::ResponseFormat;
        let body = request_body(&o, &request(), &[Tool::RunTests]);
        assert_eq!(body["response_format"]["json_schema"]["name"], "action");
        assert!(body.get("text").is_none());
    }

    #[test]
    fn native_tools_replace_the_response_format() {
        let mut o = opts(Api::Chat);
        o.native_tools = true;
        let body = request_body(&o, &request(), &[Tool::EditFile]);
        assert_eq!(body["tools"][0]["function"]["name"], "edit_file");
        assert_eq!(body["tool_choice"], "required");
        assert!(body.get("response_format").is_none());
        let mut o = opts(Api::Responses);
        o.native_tools = true;
        let body = request_body(&o, &request(), &[Tool::EditFile]);
        assert_eq!(body["tools"][0]["name"], "edit_file");
        assert!(body.get("text").is_none());
    }

    /// The schemas are part of request bodies, hence of the response cache's key: one tool of
    /// each argument kind, spelled out.
    #[test]
    fn tool_schemas_keep_their_shape() {
        assert_eq!(
            tool_parameters(Tool::ReadFile),
            json!({"type": "object", "required": ["path"], "properties": {
                "path": {"type": "string", "description": "file path"},
                "start_line": {"type": "integer", "minimum": 1, "description": "first line, 1-based"},
                "end_line": {"type": "integer", "minimum": 1, "description": "last line, inclusive"}}})
        );
        assert_eq!(
            tool_parameters(Tool::WriteFile),
            json!({"type": "object", "required": ["path", "content"], "properties": {
                "path": {"type": "string", "description": "file path"},
                "content": {"type": "string", "description": "the whole file"},
                "overwrite": {"type": "boolean", "description": "replace an existing file"}}})
        );
        assert_eq!(
            tool_parameters(Tool::RunCommand),
            json!({"type": "object", "required": ["argv"], "properties": {
                "argv": {"type": "array", "items": {"type": "string"}, "description": "program and arguments"}}})
        );
        assert_eq!(tool_parameters(Tool::RunTests), json!({"type": "object", "required": [], "properties": {}}));
        assert_eq!(tool_parameters(Tool::Finish)["required"], json!([]), "finish's answer is expected, not required");
    }

    #[test]
    fn every_tool_schema_matches_the_typed_call() {
        for tool in Tool::all() {
            let params = tool_parameters(tool);
            let mut args = Map::new();
            for (name, prop) in params["properties"].as_object().unwrap() {
                let v = match prop["type"].as_str().unwrap() {
                    "string" => json!("x"),
                    "integer" => json!(1),
                    "boolean" => json!(true),
                    "array" => json!(["x"]),
                    t => panic!("{t}"),
                };
                args.insert(name.clone(), v);
            }
            let action = Action::new(tool.as_str(), Value::Object(args));
            let call = Call::from_action(&action).unwrap_or_else(|e| panic!("{}: {e}", tool.as_str()));
            assert_eq!(call.tool(), tool);
        }
    }

    #[test]
    fn chat_responses_are_read_with_usage_tool_calls_and_truncation() {
        let body = json!({"choices": [{"message": {"role": "assistant", "content": "{\"tool\": \"run_tests\"}"}, "finish_reason": "stop"}],
                          "usage": {"prompt_tokens": 120, "completion_tokens": 7,
                                    "prompt_tokens_details": {"cached_tokens": 96}}});
        let r = interpret(Api::Chat, &body).unwrap();
        assert_eq!(r.raw.text, "{\"tool\": \"run_tests\"}");
        assert_eq!(r.usage, Some(Usage { input_tokens: 120, output_tokens: 7, cached_input_tokens: Some(96) }));
        assert!(!r.raw.truncated);
        let body = json!({"choices": [{"message": {"content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}}]},
            "finish_reason": "length"}]});
        let r = interpret(Api::Chat, &body).unwrap();
        assert_eq!(r.raw.tool_calls[0].name, "read_file");
        assert!(r.raw.truncated);
        assert_eq!(r.usage, None);
        assert!(interpret(Api::Chat, &json!({"choices": []})).is_err());
        assert!(
            interpret(Api::Chat, &json!({"error": {"message": "overloaded", "code": 503}}))
                .unwrap_err()
                .contains("overloaded (503)")
        );
    }

    #[test]
    fn responses_are_read_from_output_items() {
        let body = json!({"status": "completed", "output": [
            {"type": "reasoning", "summary": []},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "{\"tool\":"}, {"type": "output_text", "text": " \"finish\"}"}]},
            {"type": "function_call", "name": "list_files", "arguments": "{}", "call_id": "c"}],
            "usage": {"input_tokens": 50, "output_tokens": 9}});
        let r = interpret(Api::Responses, &body).unwrap();
        assert_eq!(r.raw.text, "{\"tool\": \"finish\"}");
        assert_eq!(r.raw.tool_calls.len(), 1);
        assert_eq!(r.usage, Some(Usage { input_tokens: 50, output_tokens: 9, cached_input_tokens: None }));
        let cut = json!({"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}, "output": []});
        assert!(interpret(Api::Responses, &cut).unwrap().raw.truncated);
        let filtered =
            json!({"status": "incomplete", "incomplete_details": {"reason": "content_filter"}, "output": []});
        assert!(!interpret(Api::Responses, &filtered).unwrap().raw.truncated);
        assert!(
            interpret(Api::Responses, &json!({"status": "failed", "error": {"message": "boom"}}))
                .unwrap_err()
                .contains("boom")
        );
        assert!(interpret(Api::Responses, &json!({"id": "x"})).is_err());
    }

    #[test]
    fn several_calls_in_either_api_are_all_kept_in_order() {
        let chat = json!({"choices": [{"finish_reason": "tool_calls", "message": {"content": null, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"a.py\"}"}},
            {"id": "b", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"b.py\"}"}}]}}]});
        let responses = json!({"status": "completed", "output": [
            {"type": "function_call", "name": "read_file", "arguments": "{\"path\": \"a.py\"}", "call_id": "a"},
            {"type": "function_call", "name": "read_file", "arguments": "{\"path\": \"b.py\"}", "call_id": "b"}]});
        for (api, body) in [(Api::Chat, chat), (Api::Responses, responses)] {
            let actions = super::super::parse::parse_calls(&interpret(api, &body).unwrap().raw).unwrap();
            let paths: Vec<&str> = actions.iter().map(|a| a.args["path"].as_str().unwrap()).collect();
            assert_eq!(paths, ["a.py", "b.py"], "{api:?}");
        }
    }
}
