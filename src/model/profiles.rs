//! Model profiles from `models.toml`: named, validated settings for one provider and model.
//!
//! ```toml
//! [deepseek]
//! provider = "openai-chat"            # openai-chat | openai-responses | oracle | scripted
//! model = "deepseek-chat"
//! base_url = "https://api.deepseek.com"   # with or without /v1
//! api_key_env = "DEEPSEEK_API_KEY"    # the key itself never appears in any file
//! ```
//!
//! Every key is documented in `docs/providers.md`; `models.example.toml` is a working example.
//! The file is found from `--models`, else `HCBENCH_MODELS`, else `models.toml` in the project
//! root. Besides the file there are two built-in profiles for the local test model, `local`
//! (Chat Completions) and `local-responses` (Responses), both against
//! `http://127.0.0.1:18080/v1` unless `HCBENCH_LOCAL_LLM_URL` says otherwise.
//!
//! Validation is strict and complete before anything runs: an unknown key, a wrong type, a
//! field that does not apply to the provider, a missing model or a missing API key variable is
//! an error naming the file, the profile and the field. Keys are read from the environment,
//! where `.env` in the project root fills in variables the process environment lacks; `.env`
//! values are looked up, never exported, so child processes never inherit them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use toml::{Table, Value};

use super::breaker::Breaker;
use super::cache::{Cache, CacheMode};
use super::definition::Definition;
use super::http::{RetryPolicy, Secret, Transport};
use super::openai::{Api, BodyOptions, ResponseFormat, SchemaField};
use super::ratelimit::limiter_for;
use super::remote::HttpProfile;
use super::scripted::Script;
use super::{Profile, ProfileKind};
use crate::environment::Environment;
use crate::trace::event::ModelInfo;

/// Base URL of the local test model (`../shared/tools/local-llm start`).
pub(crate) const LOCAL_LLM_URL: &str = "http://127.0.0.1:18080/v1";

const REASONING_EFFORTS: &[&str] = &["none", "minimal", "low", "medium", "high", "xhigh"];

/// Every key a profile table may have.
const KNOWN_KEYS: &[&str] = &[
    "provider",
    "model",
    "base_url",
    "api_key_env",
    "api_key_header",
    "timeout_s",
    "max_output_tokens",
    "temperature",
    "reasoning_effort",
    "max_concurrency",
    "per_shard",
    "input_price_per_mtok",
    "output_price_per_mtok",
    "headers",
    "native_tools",
    "response_format",
    "json_schema",
    "schema_field",
    "max_retries",
    "retry_base_ms",
    "retry_max_ms",
    "retry_after_max_s",
    "cache",
    "max_reply_mib",
    "max_connect_failures",
    "script",
];

/// Default cap on a reply body: far above any real reply (a long action is tens of KiB), far
/// below what hurts when `--jobs` replies arrive at once.
pub(crate) const DEFAULT_MAX_REPLY_MIB: f64 = 8.0;

/// Default run of consecutive connection failures that opens a profile's circuit breaker: one
/// cell's attempts with the default `max_retries`, so a server that is down costs one cell's
/// worth of retries, not every cell's.
pub(crate) const DEFAULT_MAX_CONNECT_FAILURES: u32 = 5;

/// Headers that would carry a credential: keys belong in the environment.
const CREDENTIAL_HEADERS: &[&str] = &["authorization", "api-key", "x-api-key", "proxy-authorization", "cookie"];

#[derive(Debug, thiserror::Error)]
pub enum ModelsError {
    #[error("cannot read models file {path}: {message}")]
    Read { path: PathBuf, message: String },
    #[error("{path} is not valid TOML: {message}")]
    Syntax { path: PathBuf, message: String },
    #[error("{path}: `{key}` must be a table of profile settings ([{key}]), got {found}")]
    NotATable { path: PathBuf, key: String, found: String },
    #[error("{source_name}: profile `{profile}`: unknown key `{key}`; known keys: {known}")]
    UnknownKey { source_name: String, profile: String, key: String, known: String },
    #[error("{source_name}: profile `{profile}`: field `{field}`: {message}")]
    Field { source_name: String, profile: String, field: String, message: String },
    #[error(
        "{source_name}: profile `{profile}`: environment variable {var} (named by `api_key_env`) is not set; \
         export it or add `{var}=...` to {dotenv}"
    )]
    MissingKey { source_name: String, profile: String, var: String, dotenv: PathBuf },
    #[error("environment variable {var}: {message}")]
    Env { var: String, message: String },
    #[error("cannot build the HTTP client for profile `{profile}`: {message}")]
    Client { profile: String, message: String },
}

/// The parsed models file: profile name -> its table, in file order of names.
#[derive(Debug, Clone)]
pub(crate) struct ModelsFile {
    pub path: PathBuf,
    pub profiles: BTreeMap<String, Table>,
}

impl ModelsFile {
    pub(crate) fn load(path: &Path) -> Result<ModelsFile, ModelsError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ModelsError::Read { path: path.to_path_buf(), message: e.to_string() })?;
        let table: Table = toml::from_str(&text)
            .map_err(|e| ModelsError::Syntax { path: path.to_path_buf(), message: e.to_string() })?;
        let mut profiles = BTreeMap::new();
        for (name, value) in table {
            match value {
                Value::Table(t) => {
                    profiles.insert(name, t);
                }
                other => {
                    return Err(ModelsError::NotATable {
                        path: path.to_path_buf(),
                        key: name,
                        found: other.type_str().into(),
                    });
                }
            }
        }
        Ok(ModelsFile { path: path.to_path_buf(), profiles })
    }

    /// For a command that names only fixed built-ins (`oracle`, `nop`, `scripted:PATH`), which
    /// never come from the file: the file is otherwise not read then (a stale or broken one
    /// does not stop an oracle run), but a table that is named like one of them would be
    /// silently ignored, so it is refused. A file that cannot be read or parsed is left alone.
    pub(crate) fn refuse_builtin_names(path: &Path) -> Result<(), ModelsError> {
        let Ok(text) = std::fs::read_to_string(path) else { return Ok(()) };
        let Ok(table) = toml::from_str::<Table>(&text) else { return Ok(()) };
        match table.keys().find(|name| is_fixed_builtin(name)) {
            Some(name) => Err(ModelsError::Field {
                source_name: path.display().to_string(),
                profile: name.clone(),
                field: "(name)".into(),
                message: builtin_name_message(name),
            }),
            None => Ok(()),
        }
    }

    /// Validates every profile of the file (without reading keys), so a typo in a profile
    /// that is not used today is still reported.
    pub(crate) fn check_all(&self, root: &Path, env: &Environment) -> Result<(), ModelsError> {
        for (name, table) in &self.profiles {
            let source = self.path.display().to_string();
            Spec::read(&source, name, table, root, env)?;
        }
        Ok(())
    }
}

/// The built-ins no models file may define: `oracle`, `nop`, `scripted` and `scripted:PATH`
/// (the HTTP built-ins `local` and `local-responses` may be overridden).
fn is_fixed_builtin(name: &str) -> bool {
    matches!(name, "oracle" | "nop" | "scripted") || name.starts_with("scripted:")
}

fn builtin_name_message(name: &str) -> String {
    format!(
        "`{name}` is a built-in profile and cannot be redefined (the built-in would always be used, this table \
         never); rename the table, e.g. [{name}-model], and name that profile instead"
    )
}

/// The table of a built-in profile, or `None`.
pub(crate) fn builtin(name: &str, env: &Environment) -> Option<Table> {
    let base_url = env.get("HCBENCH_LOCAL_LLM_URL").unwrap_or_else(|| LOCAL_LLM_URL.to_string());
    let provider = match name {
        "local" => "openai-chat",
        "local-responses" => "openai-responses",
        _ => return None,
    };
    let mut t = Table::new();
    t.insert("provider".into(), Value::String(provider.into()));
    // llama-server ignores the model name; `smollm2` is the alias local-llm serves it under.
    t.insert("model".into(), Value::String("smollm2".into()));
    t.insert("base_url".into(), Value::String(base_url));
    // A small model on one CPU thread: slow, but it must finish.
    t.insert("timeout_s".into(), Value::Float(300.0));
    t.insert("max_output_tokens".into(), Value::Integer(192));
    t.insert("temperature".into(), Value::Float(0.0));
    // local-llm starts llama-server with two slots.
    t.insert("max_concurrency".into(), Value::Integer(2));
    t.insert("input_price_per_mtok".into(), Value::Float(0.0));
    t.insert("output_price_per_mtok".into(), Value::Float(0.0));
    t.insert("max_retries".into(), Value::Integer(2));
    if name == "local-responses" {
        // llama.cpp's /v1/responses ignores `text.format` but honours a top-level
        // response_format, which turns on grammar-constrained JSON.
        t.insert("schema_field".into(), Value::String("response_format".into()));
    }
    Some(t)
}

/// A profile table read into typed values, validated, with defaults applied.
#[derive(Debug, Clone)]
struct Spec {
    kind: SpecKind,
}

#[derive(Debug, Clone)]
enum SpecKind {
    Oracle,
    Scripted { script: PathBuf },
    Http(Box<HttpSpec>),
}

#[derive(Debug, Clone)]
struct HttpSpec {
    api: Api,
    model: String,
    base_url: String,
    api_key_env: Option<String>,
    api_key_header: Option<HeaderName>,
    timeout: Duration,
    max_output_tokens: u32,
    temperature: Option<f64>,
    reasoning_effort: Option<String>,
    max_concurrency: usize,
    /// `per_shard.max_concurrency`: the limit in a run of one shard (`--shard`) instead.
    max_concurrency_per_shard: Option<usize>,
    input_price: Option<f64>,
    output_price: Option<f64>,
    headers: HeaderMap,
    native_tools: bool,
    response_format: ResponseFormat,
    schema_field: SchemaField,
    retry: RetryPolicy,
    cache: CacheMode,
    max_reply_bytes: usize,
    max_connect_failures: u32,
}

/// Typed access to one profile table with error messages naming the field.
struct Fields<'a> {
    source: &'a str,
    profile: &'a str,
    table: &'a Table,
}

impl Fields<'_> {
    fn err(&self, field: &str, message: impl Into<String>) -> ModelsError {
        ModelsError::Field {
            source_name: self.source.to_string(),
            profile: self.profile.to_string(),
            field: field.to_string(),
            message: message.into(),
        }
    }

    fn has(&self, key: &str) -> bool {
        self.table.contains_key(key)
    }

    fn string(&self, key: &str) -> Result<Option<String>, ModelsError> {
        match self.table.get(key) {
            None => Ok(None),
            Some(Value::String(s)) if s.trim().is_empty() => Err(self.err(key, "is empty")),
            Some(Value::String(s)) => Ok(Some(s.trim().to_string())),
            Some(other) => Err(self.err(key, format!("expected a string, got {}", other.type_str()))),
        }
    }

    fn number(&self, key: &str) -> Result<Option<f64>, ModelsError> {
        match self.table.get(key) {
            None => Ok(None),
            Some(Value::Float(f)) if f.is_finite() => Ok(Some(*f)),
            Some(Value::Integer(i)) => Ok(Some(*i as f64)),
            Some(other) => Err(self.err(key, format!("expected a number, got {}", other.type_str()))),
        }
    }

    fn integer(&self, key: &str, min: i64, max: i64) -> Result<Option<i64>, ModelsError> {
        match self.table.get(key) {
            None => Ok(None),
            Some(Value::Integer(i)) if (min..=max).contains(i) => Ok(Some(*i)),
            Some(Value::Integer(i)) => Err(self.err(key, format!("{i} is out of range {min}..={max}"))),
            Some(other) => Err(self.err(key, format!("expected an integer, got {}", other.type_str()))),
        }
    }

    fn boolean(&self, key: &str) -> Result<Option<bool>, ModelsError> {
        match self.table.get(key) {
            None => Ok(None),
            Some(Value::Boolean(b)) => Ok(Some(*b)),
            Some(other) => Err(self.err(key, format!("expected true or false, got {}", other.type_str()))),
        }
    }

    /// Errors when any of `keys` is present: they do not apply to this provider.
    fn forbid(&self, keys: &[&str], why: &str) -> Result<(), ModelsError> {
        match keys.iter().find(|k| self.has(k)) {
            Some(k) => Err(self.err(k, why.to_string())),
            None => Ok(()),
        }
    }
}

impl Spec {
    fn read(source: &str, profile: &str, table: &Table, root: &Path, env: &Environment) -> Result<Spec, ModelsError> {
        let f = Fields { source, profile, table };
        if let Some(key) = table.keys().find(|k| !KNOWN_KEYS.contains(&k.as_str())) {
            return Err(ModelsError::UnknownKey {
                source_name: source.into(),
                profile: profile.into(),
                key: key.clone(),
                known: KNOWN_KEYS.join(", "),
            });
        }
        if !profile.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            || profile.starts_with('.')
        {
            return Err(f.err(
                "(name)",
                "a profile name may use only letters, digits, '-', '_' and '.' (it names cells and cache folders)",
            ));
        }
        if is_fixed_builtin(profile) {
            return Err(f.err("(name)", builtin_name_message(profile)));
        }
        let provider = f
            .string("provider")?
            .ok_or_else(|| f.err("provider", "is missing; one of openai-chat, openai-responses, oracle, scripted"))?;
        let api = match provider.as_str() {
            "openai-chat" => Api::Chat,
            "openai-responses" => Api::Responses,
            "oracle" => {
                if let Some(k) = table.keys().find(|k| k.as_str() != "provider") {
                    return Err(f.err(k, "does not apply to provider `oracle` (it takes no settings)"));
                }
                return Ok(Spec { kind: SpecKind::Oracle });
            }
            "scripted" => {
                if let Some(k) = table.keys().find(|k| !matches!(k.as_str(), "provider" | "script")) {
                    return Err(f.err(k, "does not apply to provider `scripted` (it takes only `script`)"));
                }
                let script = f
                    .string("script")?
                    .ok_or_else(|| f.err("script", "is missing; the action script (YAML or JSON) to replay"))?;
                return Ok(Spec { kind: SpecKind::Scripted { script: root.join(script) } });
            }
            other => {
                return Err(f.err(
                    "provider",
                    format!("`{other}` is not a provider; one of openai-chat, openai-responses, oracle, scripted"),
                ));
            }
        };
        f.forbid(&["script"], "applies only to provider `scripted`")?;

        let model =
            f.string("model")?.ok_or_else(|| f.err("model", "is missing; the model name the server expects"))?;
        let base_url = normalize_base_url(
            &f.string("base_url")?.ok_or_else(|| f.err("base_url", "is missing; e.g. https://api.openai.com/v1"))?,
        )
        .map_err(|m| f.err("base_url", m))?;
        let api_key_env = f.string("api_key_env")?;
        if let Some(var) = &api_key_env
            && !var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(f.err(
                "api_key_env",
                format!("`{var}` is not an environment variable name (it names the variable, it is not the key)"),
            ));
        }
        let api_key_header = match f.string("api_key_header")? {
            None => None,
            Some(h) => Some(
                HeaderName::from_bytes(h.as_bytes())
                    .map_err(|_| f.err("api_key_header", format!("`{h}` is not a header name")))?,
            ),
        };
        if api_key_header.is_some() && api_key_env.is_none() {
            return Err(f.err("api_key_header", "needs api_key_env (the variable holding the key)"));
        }
        let timeout_s = f.number("timeout_s")?.unwrap_or(120.0);
        if timeout_s <= 0.0 || timeout_s > 86_400.0 {
            return Err(f.err("timeout_s", "must be more than 0 and at most 86400 seconds"));
        }
        let max_output_tokens = f.integer("max_output_tokens", 1, 1_000_000)?.unwrap_or(4096) as u32;
        let temperature = f.number("temperature")?;
        if let Some(t) = temperature
            && !(0.0..=2.0).contains(&t)
        {
            return Err(f.err("temperature", "must be between 0 and 2"));
        }
        let reasoning_effort = f.string("reasoning_effort")?;
        if let Some(effort) = &reasoning_effort {
            if api == Api::Chat {
                return Err(f.err(
                    "reasoning_effort",
                    "is only supported by provider `openai-responses`; remove it or switch the provider",
                ));
            }
            if !REASONING_EFFORTS.contains(&effort.as_str()) {
                return Err(
                    f.err("reasoning_effort", format!("`{effort}` is not one of {}", REASONING_EFFORTS.join(", ")))
                );
            }
        }
        let max_concurrency = f.integer("max_concurrency", 1, 1024)?.unwrap_or(4) as usize;
        let max_concurrency_per_shard = read_per_shard(&f, max_concurrency)?;
        let price = |key: &str| -> Result<Option<f64>, ModelsError> {
            match f.number(key)? {
                Some(p) if p < 0.0 => Err(f.err(key, "must not be negative")),
                other => Ok(other),
            }
        };
        let input_price = price("input_price_per_mtok")?;
        let output_price = price("output_price_per_mtok")?;
        let headers = read_headers(&f)?;
        let native_tools = f.boolean("native_tools")?.unwrap_or(false);
        let response_format = match (f.string("response_format")?, f.boolean("json_schema")?) {
            (Some(_), Some(_)) => {
                return Err(f.err("json_schema", "give either json_schema or response_format, not both"));
            }
            (None, None) | (None, Some(true)) => ResponseFormat::JsonSchema,
            (None, Some(false)) => ResponseFormat::None,
            (Some(s), None) => match s.as_str() {
                "json_schema" => ResponseFormat::JsonSchema,
                "json_object" => ResponseFormat::JsonObject,
                "none" => ResponseFormat::None,
                other => {
                    return Err(
                        f.err("response_format", format!("`{other}` is not one of json_schema, json_object, none"))
                    );
                }
            },
        };
        let schema_field = match f.string("schema_field")? {
            None => SchemaField::TextFormat,
            Some(_) if api == Api::Chat => {
                return Err(f.err("schema_field", "applies only to provider `openai-responses`"));
            }
            Some(s) => match s.as_str() {
                "text.format" => SchemaField::TextFormat,
                "response_format" => SchemaField::ResponseFormat,
                other => {
                    return Err(f.err("schema_field", format!("`{other}` is not one of text.format, response_format")));
                }
            },
        };
        let retry = RetryPolicy {
            max_retries: f.integer("max_retries", 0, 100)?.unwrap_or(4) as u32,
            base_ms: f.integer("retry_base_ms", 0, 600_000)?.unwrap_or(500) as u64,
            max_ms: f.integer("retry_max_ms", 0, 3_600_000)?.unwrap_or(30_000) as u64,
            retry_after_max_ms: (f.number("retry_after_max_s")?.unwrap_or(120.0).clamp(0.0, 3600.0) * 1000.0) as u64,
        };
        let max_reply_mib = f.number("max_reply_mib")?.unwrap_or(DEFAULT_MAX_REPLY_MIB);
        if !(max_reply_mib > 0.0 && max_reply_mib <= 4096.0) {
            return Err(f.err("max_reply_mib", "must be more than 0 and at most 4096 (MiB of one reply body)"));
        }
        // At least one byte, so a tiny fraction is a tiny cap rather than no reply at all.
        let max_reply_bytes = ((max_reply_mib * 1024.0 * 1024.0) as usize).max(1);
        let max_connect_failures =
            f.integer("max_connect_failures", 0, 10_000)?.unwrap_or(i64::from(DEFAULT_MAX_CONNECT_FAILURES)) as u32;
        let mut cache = match f.string("cache")? {
            None => CacheMode::Off,
            Some(s) => CacheMode::parse(&s)
                .ok_or_else(|| f.err("cache", format!("`{s}` is not one of {}", CacheMode::NAMES)))?,
        };
        if let Some(mode) = env.get("HCBENCH_CACHE") {
            cache = CacheMode::parse(&mode).ok_or_else(|| ModelsError::Env {
                var: "HCBENCH_CACHE".into(),
                message: format!("`{mode}` is not one of {}", CacheMode::NAMES),
            })?;
        }
        Ok(Spec {
            kind: SpecKind::Http(Box::new(HttpSpec {
                api,
                model,
                base_url,
                api_key_env,
                api_key_header,
                timeout: Duration::from_secs_f64(timeout_s),
                max_output_tokens,
                temperature,
                reasoning_effort,
                max_concurrency,
                max_concurrency_per_shard,
                input_price,
                output_price,
                headers,
                native_tools,
                response_format,
                schema_field,
                retry,
                cache,
                max_reply_bytes,
                max_connect_failures,
            })),
        })
    }
}

fn read_headers(f: &Fields<'_>) -> Result<HeaderMap, ModelsError> {
    let mut headers = HeaderMap::new();
    let table = match f.table.get("headers") {
        None => return Ok(headers),
        Some(Value::Table(t)) => t,
        Some(other) => {
            return Err(f.err("headers", format!("expected a table of header = \"value\", got {}", other.type_str())));
        }
    };
    for (name, value) in table {
        let field = format!("headers.{name}");
        if CREDENTIAL_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
            return Err(f.err(
                &field,
                "credentials do not belong in models.toml; set api_key_env (and api_key_header) instead",
            ));
        }
        let Value::String(v) = value else {
            return Err(f.err(&field, format!("expected a string, got {}", value.type_str())));
        };
        let n = HeaderName::from_bytes(name.as_bytes()).map_err(|_| f.err(&field, "is not a valid header name"))?;
        let v = HeaderValue::from_str(v).map_err(|_| f.err(&field, "is not a valid header value"))?;
        headers.insert(n, v);
    }
    Ok(headers)
}

/// `https://host` -> `https://host/v1`; a path already ending in a version (`/v1`, `/v4`) or a
/// trailing slash is kept as is, so `/v1/v1` is never produced. Credentials, queries and
/// fragments are refused: keys come from the environment, and URLs are recorded in traces.
pub(crate) fn normalize_base_url(raw: &str) -> Result<String, String> {
    let url = reqwest::Url::parse(raw.trim()).map_err(|e| format!("`{raw}` is not a URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("`{raw}` must start with http:// or https://"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("must not contain credentials; put the key in the variable named by api_key_env".into());
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!("`{raw}` must not have a query or fragment"));
    }
    let mut s = url.as_str().trim_end_matches('/').to_string();
    let last = s.rsplit('/').next().unwrap_or("");
    let versioned = last.len() >= 2 && last.starts_with('v') && last[1..].chars().all(|c| c.is_ascii_digit());
    if !versioned {
        s.push_str("/v1");
    }
    Ok(s)
}

/// `[NAME.per_shard]`: the profile's limits in each shard of a sharded run, where N shards
/// each keep their own requests in flight (docs/scale-out.md). Only `max_concurrency`, at
/// most the profile's own.
fn read_per_shard(f: &Fields<'_>, whole: usize) -> Result<Option<usize>, ModelsError> {
    let table = match f.table.get("per_shard") {
        None => return Ok(None),
        Some(Value::Table(t)) => t,
        Some(other) => {
            return Err(f.err(
                "per_shard",
                format!(
                    "expected a table (`[PROFILE.per_shard]` with `max_concurrency = N`), got {}",
                    other.type_str()
                ),
            ));
        }
    };
    if let Some(key) = table.keys().find(|k| k.as_str() != "max_concurrency") {
        return Err(f.err(
            &format!("per_shard.{key}"),
            "is not a per-shard limit; `per_shard` takes `max_concurrency` (give --budget-usd per shard on the command line)",
        ));
    }
    let field = "per_shard.max_concurrency";
    match table.get("max_concurrency") {
        None => Err(f.err("per_shard", "is empty; give `max_concurrency = N`, the profile's requests in flight in each shard")),
        Some(Value::Integer(i)) if (1..=whole as i64).contains(i) => Ok(Some(*i as usize)),
        Some(Value::Integer(i)) => Err(f.err(
            field,
            format!("{i} is out of range 1..={whole}: a shard's limit is a part of the profile's `max_concurrency` ({whole})"),
        )),
        Some(other) => Err(f.err(field, format!("expected an integer, got {}", other.type_str()))),
    }
}

/// Turns a profile table into a [`Profile`]: for HTTP providers, reads the key from the
/// environment (failing before any request when it is missing), builds the HTTP client and
/// attaches the process-wide rate limiter and the profile's cache. `sharded`: the run is one
/// shard of a plan, so the profile's `per_shard` limits apply.
pub(crate) fn build(
    name: &str,
    table: &Table,
    source: &str,
    root: &Path,
    env: &Environment,
    sharded: bool,
) -> Result<Profile, ModelsError> {
    let spec = Spec::read(source, name, table, root, env)?;
    let definition = Definition::of_table(source, table);
    let http = match spec.kind {
        SpecKind::Oracle => return Ok(Profile { name: name.to_string(), ..Profile::oracle() }.defined_as(definition)),
        SpecKind::Scripted { script } => {
            let script = Script::load(&script).map_err(|e| ModelsError::Field {
                source_name: source.into(),
                profile: name.into(),
                field: "script".into(),
                message: e.to_string(),
            })?;
            return Ok(Profile::scripted(name, script).defined_as(definition));
        }
        SpecKind::Http(http) => http,
    };
    let key = match &http.api_key_env {
        None => None,
        Some(var) => {
            let value = env.get(var).ok_or_else(|| ModelsError::MissingKey {
                source_name: source.into(),
                profile: name.into(),
                var: var.clone(),
                dotenv: env.dotenv_path().to_path_buf(),
            })?;
            let value = value.trim().to_string();
            // Checked here so a stray control character is a clear configuration error, not a retried
            // request failure. The message names the variable, never the value.
            if HeaderValue::from_str(&format!("Bearer {value}")).is_err() {
                return Err(ModelsError::Field {
                    source_name: source.into(),
                    profile: name.into(),
                    field: "api_key_env".into(),
                    message: format!("the value of {var} cannot be sent in an HTTP header (a control character?)"),
                });
            }
            // From now on the value is scrubbed from every reply and trace line (secrets.rs).
            super::secrets::register(&value);
            Some(Secret::new(value))
        }
    };
    // reqwest is built without a bundled crypto provider (ring builds faster than aws-lc);
    // installing it twice is harmless, the second call just reports it is already there.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .user_agent(concat!("hcbench/", env!("CARGO_PKG_VERSION")))
        .default_headers(http.headers.clone())
        .connect_timeout(http.timeout.min(Duration::from_secs(30)))
        .build()
        .map_err(|e| ModelsError::Client { profile: name.into(), message: e.to_string() })?;
    let info = ModelInfo {
        provider: http.api.provider_name().into(),
        model: http.model.clone(),
        base_url: Some(http.base_url.clone()),
        reasoning_effort: http.reasoning_effort.clone(),
        input_price_per_mtok: http.input_price,
        output_price_per_mtok: http.output_price,
    };
    let transport = Transport {
        profile: name.into(),
        provider: http.api.provider_name().into(),
        model: http.model.clone(),
        client,
        url: format!("{}/{}", http.base_url, http.api.endpoint()),
        key,
        key_header: http.api_key_header.clone(),
        timeout: http.timeout,
        retry: http.retry.clone(),
        limiter: limiter_for(name, http.max_concurrency_per_shard.filter(|_| sharded).unwrap_or(http.max_concurrency)),
        cache: Cache { mode: http.cache, dir: Cache::dir_for(root, name) },
        max_reply_bytes: http.max_reply_bytes,
        breaker: Arc::new(Breaker::new(name, http.max_connect_failures)),
        source: source.to_string(),
        api_key_env: http.api_key_env.clone(),
        base_url: http.base_url.clone(),
        first_failure: Arc::default(),
    };
    let body = BodyOptions {
        api: http.api,
        model: http.model.clone(),
        max_output_tokens: http.max_output_tokens,
        temperature: http.temperature,
        reasoning_effort: http.reasoning_effort.clone(),
        native_tools: http.native_tools,
        response_format: http.response_format,
        schema_field: http.schema_field,
    };
    Ok(Profile {
        name: name.to_string(),
        kind: ProfileKind::Http(Arc::new(HttpProfile { info, body, transport })),
        definition: Arc::new(definition),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> Table {
        toml::from_str(text).unwrap()
    }

    fn read(text: &str) -> Result<Spec, ModelsError> {
        Spec::read("models.toml", "p", &table(text), Path::new("/root"), &Environment::default())
    }

    fn err(text: &str) -> String {
        read(text).unwrap_err().to_string()
    }

    #[test]
    fn base_urls_get_exactly_one_version() {
        assert_eq!(normalize_base_url("https://api.deepseek.com").unwrap(), "https://api.deepseek.com/v1");
        assert_eq!(normalize_base_url("https://api.deepseek.com/").unwrap(), "https://api.deepseek.com/v1");
        assert_eq!(normalize_base_url("https://api.openai.com/v1").unwrap(), "https://api.openai.com/v1");
        assert_eq!(normalize_base_url("https://api.openai.com/v1/").unwrap(), "https://api.openai.com/v1");
        assert_eq!(normalize_base_url("http://127.0.0.1:18080").unwrap(), "http://127.0.0.1:18080/v1");
        assert_eq!(normalize_base_url("https://ark.example.com/api/v3").unwrap(), "https://ark.example.com/api/v3");
        assert_eq!(
            normalize_base_url("https://proxy.example.com/openai").unwrap(),
            "https://proxy.example.com/openai/v1"
        );
        assert!(normalize_base_url("https://user:sk-123@api.example.com").unwrap_err().contains("credentials"));
        assert!(normalize_base_url("https://api.example.com/v1?key=sk").is_err());
        assert!(normalize_base_url("ftp://x").is_err());
        assert!(normalize_base_url("api.openai.com").is_err());
    }

    #[test]
    fn a_full_profile_reads_with_every_key() {
        let spec = read(
            r#"provider = "openai-responses"
               model = "gpt-5"
               base_url = "https://api.openai.com"
               api_key_env = "OPENAI_API_KEY"
               timeout_s = 30
               max_output_tokens = 2000
               temperature = 0.2
               reasoning_effort = "xhigh"
               max_concurrency = 3
               input_price_per_mtok = 1.25
               output_price_per_mtok = 10
               headers = { "OpenAI-Organization" = "org-1" }
               native_tools = true
               response_format = "json_object"
               schema_field = "text.format"
               max_retries = 2
               retry_base_ms = 10
               retry_max_ms = 100
               retry_after_max_s = 5
               cache = "read-write"
               max_reply_mib = 0.5
               max_connect_failures = 0"#,
        )
        .unwrap();
        let SpecKind::Http(h) = spec.kind else { panic!() };
        assert_eq!(h.api, Api::Responses);
        assert_eq!(h.base_url, "https://api.openai.com/v1");
        assert_eq!(h.timeout, Duration::from_secs(30));
        assert_eq!(h.reasoning_effort.as_deref(), Some("xhigh"));
        assert_eq!(h.max_concurrency, 3);
        assert_eq!(h.output_price, Some(10.0));
        assert_eq!(h.headers["openai-organization"], "org-1");
        assert!(h.native_tools);
        assert_eq!(h.response_format, ResponseFormat::JsonObject);
        assert_eq!(h.retry.retry_after_max_ms, 5000);
        assert_eq!(h.cache, CacheMode::ReadWrite);
        assert_eq!(h.max_reply_bytes, 512 * 1024);
        assert_eq!(h.max_connect_failures, 0, "0 turns the breaker off");
    }

    #[test]
    fn defaults_apply_when_keys_are_absent() {
        let SpecKind::Http(h) =
            read("provider = \"openai-chat\"\nmodel = \"m\"\nbase_url = \"http://x\"").unwrap().kind
        else {
            panic!()
        };
        assert_eq!(h.max_output_tokens, 4096);
        assert_eq!(h.max_concurrency, 4);
        assert_eq!(h.retry.max_retries, 4);
        assert_eq!(h.response_format, ResponseFormat::JsonSchema);
        assert_eq!(h.cache, CacheMode::Off);
        assert_eq!(h.max_reply_bytes, 8 * 1024 * 1024);
        assert_eq!(h.max_connect_failures, 5);
        assert!(h.api_key_env.is_none() && h.temperature.is_none());
    }

    #[test]
    fn mistakes_name_the_file_profile_and_field() {
        let base = "provider = \"openai-chat\"\nmodel = \"m\"\nbase_url = \"http://x\"\n";
        let e = err(&format!("{base}temprature = 1"));
        assert!(e.contains("models.toml: profile `p`: unknown key `temprature`"), "{e}");
        let e = err(&format!("{base}reasoning_effort = \"high\""));
        assert!(
            e.contains("profile `p`: field `reasoning_effort`: is only supported by provider `openai-responses`"),
            "{e}"
        );
        let e =
            err("provider = \"openai-responses\"\nmodel = \"m\"\nbase_url = \"http://x\"\nreasoning_effort = \"max\"");
        assert!(e.contains("`max` is not one of none, minimal, low, medium, high, xhigh"), "{e}");
        assert!(err("provider = \"openai-chat\"\nbase_url = \"http://x\"").contains("field `model`: is missing"));
        assert!(err("provider = \"anthropic\"").contains("`anthropic` is not a provider"));
        assert!(err(&format!("{base}max_concurrency = 0")).contains("field `max_concurrency`: 0 is out of range"));
        assert!(err(&format!("{base}timeout_s = \"10\"")).contains("field `timeout_s`: expected a number, got string"));
        assert!(
            err(&format!("{base}headers = {{ Authorization = \"Bearer sk\" }}")).contains("credentials do not belong")
        );
        assert!(err(&format!("{base}api_key_env = \"sk-abc-123\"")).contains("not an environment variable name"));
        assert!(err(&format!("{base}cache = \"on\"")).contains("`on` is not one of off, read-write, replay-only"));
        assert!(err(&format!("{base}max_reply_mib = 0")).contains("field `max_reply_mib`: must be more than 0"));
        assert!(err(&format!("{base}max_connect_failures = -1")).contains("field `max_connect_failures`: -1 is out"));
        assert!(err(&format!("{base}json_schema = false\nresponse_format = \"none\"")).contains("not both"));
        assert!(
            err(&format!("{base}schema_field = \"response_format\"")).contains("only to provider `openai-responses`")
        );
        assert!(
            err("provider = \"oracle\"\nmodel = \"x\"").contains("field `model`: does not apply to provider `oracle`")
        );
        assert!(err("provider = \"scripted\"").contains("field `script`: is missing"));
        let e =
            Spec::read("m.toml", "bad name", &table("provider = \"oracle\""), Path::new("/"), &Environment::default())
                .unwrap_err();
        assert!(e.to_string().contains("profile name may use only"));
        let e = Spec::read("m.toml", "nop", &table("provider = \"oracle\""), Path::new("/"), &Environment::default())
            .unwrap_err();
        assert!(e.to_string().contains("cannot be redefined"));
    }

    #[test]
    fn json_schema_flag_is_a_shorthand() {
        let base = "provider = \"openai-chat\"\nmodel = \"m\"\nbase_url = \"http://x\"\n";
        let SpecKind::Http(h) = read(&format!("{base}json_schema = false")).unwrap().kind else { panic!() };
        assert_eq!(h.response_format, ResponseFormat::None);
    }

    #[test]
    fn a_missing_key_fails_at_build_time_naming_the_variable() {
        let t = table(
            "provider = \"openai-chat\"\nmodel = \"m\"\nbase_url = \"http://x\"\napi_key_env = \"HCBENCH_UNIT_TEST_UNSET_KEY\"",
        );
        let e = build("p", &t, "models.toml", Path::new("/nonexistent"), &Environment::default(), false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("HCBENCH_UNIT_TEST_UNSET_KEY"), "{e}");
        assert!(e.contains("profile `p`"), "{e}");
    }

    #[test]
    fn builtins_point_at_the_local_model() {
        let t = builtin("local", &Environment::default()).unwrap();
        let p = build("local", &t, "built-in", Path::new("/tmp"), &Environment::default(), false).unwrap();
        let ProfileKind::Http(h) = &p.kind else { panic!() };
        assert_eq!(h.info.provider, "openai-chat");
        assert!(h.info.base_url.as_deref().unwrap().ends_with("/v1"));
        let t = builtin("local-responses", &Environment::default()).unwrap();
        let p = build("local-responses", &t, "built-in", Path::new("/tmp"), &Environment::default(), false).unwrap();
        let ProfileKind::Http(h) = &p.kind else { panic!() };
        assert_eq!(h.transport.url.rsplit('/').next(), Some("responses"));
        assert!(builtin("gpt", &Environment::default()).is_none());
    }
}
