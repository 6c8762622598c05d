//! The transport of the HTTP providers: one JSON POST with the profile's limits, retries, rate
//! limiter and response cache around it.
//!
//! Which faults are retried is a policy decision written down here once:
//! - retried, with exponential backoff and jitter: 429, 500, 502, 503, 504, timeouts,
//!   connection failures and resets, empty bodies, and bodies that are not a response of the
//!   API (the adapter's `check` fails). A `Retry-After` in seconds replaces the backoff (capped
//!   by `retry_after_max_s`), and on a 429 it also pauses the whole profile (`ratelimit.rs`);
//! - not retried: every other status (400, 401, 403, 404, ...), which no amount of waiting
//!   fixes; the error names the status and the server's message.
//!
//! Each retry is returned as a [`Retry`] so the loop records a `model_retry` event; exhausting
//! `max_retries` is a [`ModelError::Provider`], which ends the cell as `provider_error`.
//!
//! Two limits protect hcbench from the server. A reply body is read chunk by chunk and given up
//! once it passes `max_reply_bytes` (not retried: the same request would get the same flood),
//! so memory stays bounded by the cap per request in flight, whatever `--jobs` is. And the
//! profile's circuit breaker (`breaker.rs`) stops sending once the server has been unreachable
//! for a run of attempts.
//!
//! The API key lives in a [`Secret`] whose `Debug` is redacted; it is sent in one header. Every
//! reply body is scrubbed of it (`secrets.rs`) as it arrives, before it is parsed, cached or
//! quoted, because some servers echo it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use serde_json::Value;

use super::breaker::Breaker;
use super::cache::{Cache, CacheMode, Entry};
use super::openai::error_message;
use super::ratelimit::Limiter;
use super::{FailureClass, ModelError, ProviderFailure, Retry, secrets};

/// A credential read from the environment. Never printed, serialized or hashed.
#[derive(Clone)]
pub(crate) struct Secret(String);

impl Secret {
    pub(crate) fn new(value: String) -> Secret {
        Secret(value)
    }

    fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

/// How often and how patiently to retry.
#[derive(Debug, Clone)]
pub(crate) struct RetryPolicy {
    /// Retries after the first attempt (so `max_retries + 1` attempts in all).
    pub max_retries: u32,
    /// First backoff; doubled per retry.
    pub base_ms: u64,
    /// Largest backoff.
    pub max_ms: u64,
    /// Largest `Retry-After` honoured; a server asking for more gets this.
    pub retry_after_max_ms: u64,
}

/// Everything needed to send one profile's requests. A clone shares the client and the rate
/// limiter (they are per profile, not per copy).
#[derive(Debug, Clone)]
pub(crate) struct Transport {
    pub profile: String,
    pub provider: String,
    pub model: String,
    pub client: reqwest::Client,
    /// The full endpoint URL, e.g. `https://api.deepseek.com/v1/chat/completions`.
    pub url: String,
    pub key: Option<Secret>,
    /// Header carrying the key; `None` means `Authorization: Bearer <key>`.
    pub key_header: Option<HeaderName>,
    pub timeout: Duration,
    pub retry: RetryPolicy,
    pub limiter: Arc<Limiter>,
    pub cache: Cache,
    /// Largest reply body read; a longer one ends the request.
    pub max_reply_bytes: usize,
    /// Shared by every copy of the profile's transport, like the limiter.
    pub breaker: Arc<Breaker>,
    /// Where the profile was defined, for the fix of a failure: the models file (or "built-in
    /// profiles"), the variable named by `api_key_env`, and `base_url` as normalized.
    pub source: String,
    pub api_key_env: Option<String>,
    pub base_url: String,
    /// The profile's first failure in this command, set once; shared like the breaker.
    pub first_failure: Arc<std::sync::OnceLock<ProviderFailure>>,
}

/// A response body the adapter accepted.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    pub body: Value,
    pub latency_ms: u64,
}

/// The result of sending one request, with the retries it took.
#[derive(Debug)]
pub(crate) struct Exchange {
    pub result: Result<Received, ModelError>,
    pub retries: Vec<Retry>,
}

/// What one attempt came to.
enum Attempt {
    Done(Value, u64),
    /// Worth another try: a short cause for the trace, the detail for the final error.
    Again {
        cause: String,
        detail: String,
        retry_after: Option<Duration>,
        throttled: bool,
        /// No HTTP response at all: counts towards the circuit breaker.
        unreachable: bool,
        /// The connection was refused: the host is there, nothing listens on the port.
        refused: bool,
    },
    Fatal(String, FailureClass),
}

impl Transport {
    /// Sends `body`, retrying faults. `check` validates a 2xx body as a response of the API;
    /// only checked bodies are returned or cached.
    pub(crate) async fn send(&self, body: &Value, check: &(dyn Fn(&Value) -> Result<(), String> + Sync)) -> Exchange {
        let key = (self.cache.mode != CacheMode::Off).then(|| Cache::key(body));
        if let Some(key) = &key {
            if let Some(entry) = self.cache.get(key) {
                return match check(&entry.response) {
                    Ok(()) => Exchange {
                        result: Ok(Received { body: entry.response, latency_ms: entry.latency_ms }),
                        retries: Vec::new(),
                    },
                    Err(e) => self.fail(
                        FailureClass::Other,
                        format!(
                            "profile `{}`: cached response {} is not usable: {e}",
                            self.profile,
                            self.cache.path(key).display()
                        ),
                        Vec::new(),
                    ),
                };
            }
            if self.cache.mode == CacheMode::ReplayOnly {
                return self.fail(
                    FailureClass::Other,
                    format!(
                        "cache miss in replay-only mode for profile `{}`: no {} (the request differs from every recorded one; \
                         re-record with cache = \"read-write\" or HCBENCH_CACHE=read-write)",
                        self.profile,
                        self.cache.path(key).display()
                    ),
                    Vec::new(),
                );
            }
        }

        let mut retries = Vec::new();
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            // Checked before every attempt, also a cell's retries: once the server is taken to
            // be down, a request that was waiting out its backoff gives up too.
            if let Some(message) = self.breaker.open() {
                return self.fail(FailureClass::Unreachable, message, retries);
            }
            let permit = self.limiter.acquire().await;
            let outcome = self.attempt(body, check).await;
            match &outcome {
                Attempt::Again { unreachable: true, detail, .. } => {
                    if self.breaker.on_connection_failure(&self.url, &self.redact(detail)) {
                        tracing::debug!(profile = %self.profile, "circuit breaker opened");
                    }
                }
                _ => self.breaker.on_response(),
            }
            let (cause, detail, retry_after, class) = match outcome {
                Attempt::Done(response, latency_ms) => {
                    self.limiter.on_success(&permit);
                    if let Some(key) = &key {
                        self.cache.put(key, &Entry::new(&self.provider, &self.model, latency_ms, response.clone()));
                    }
                    return Exchange { result: Ok(Received { body: response, latency_ms }), retries };
                }
                Attempt::Fatal(message, class) => {
                    return self.fail(class, self.redact(&message), retries);
                }
                Attempt::Again { cause, detail, retry_after, throttled, unreachable, refused } => {
                    if throttled {
                        let pause = retry_after.map(|d| d.min(Duration::from_millis(self.retry.retry_after_max_ms)));
                        self.limiter.on_throttle(&permit, pause);
                        tracing::debug!(profile = %self.profile, limit = self.limiter.limit(), "throttled: concurrency limit lowered");
                    }
                    // The class of the last attempt is the class of the failure if it is the last.
                    let class = match cause.as_str() {
                        _ if refused => FailureClass::Refused,
                        _ if unreachable => FailureClass::Unreachable,
                        "timeout" => FailureClass::Timeout,
                        "http_429" => FailureClass::RateLimited,
                        _ => FailureClass::Other,
                    };
                    (cause, detail, retry_after, class)
                }
            };
            drop(permit);
            if attempt > self.retry.max_retries {
                let message = format!(
                    "profile `{}`: gave up after {attempt} attempt{} on {}: {detail}",
                    self.profile,
                    if attempt == 1 { "" } else { "s" },
                    self.url
                );
                return self.fail(class, self.redact(&message), retries);
            }
            let delay = backoff(&self.retry, attempt, retry_after);
            tracing::debug!(profile = %self.profile, attempt, cause = %cause, delay_ms = delay.as_millis() as u64, "retrying a model request");
            retries.push(Retry { attempt, cause, delay_ms: delay.as_millis() as u64 });
            tokio::time::sleep(delay).await;
        }
    }

    async fn attempt(&self, body: &Value, check: &(dyn Fn(&Value) -> Result<(), String> + Sync)) -> Attempt {
        let mut request = self.client.post(&self.url).timeout(self.timeout).json(body);
        if let Some(key) = &self.key {
            request = match &self.key_header {
                None => request.bearer_auth(key.expose()),
                Some(name) => match HeaderValue::from_str(key.expose()) {
                    Ok(mut value) => {
                        value.set_sensitive(true);
                        let mut headers = HeaderMap::new();
                        headers.insert(name.clone(), value);
                        request.headers(headers)
                    }
                    Err(_) => {
                        return Attempt::Fatal(
                            format!("profile `{}`: the API key is not a valid header value", self.profile),
                            FailureClass::Other,
                        );
                    }
                },
            };
        }
        let started = Instant::now();
        let response = match request.send().await {
            Ok(r) => r,
            Err(e) => return transport_error(&e),
        };
        let status = response.status();
        let retry_after = response.headers().get(RETRY_AFTER).and_then(|v| v.to_str().ok()).and_then(parse_retry_after);
        let bytes = match read_capped(response, self.max_reply_bytes).await {
            Ok(b) => b,
            Err(Capped::Transport(e)) => return transport_error(&e),
            Err(Capped::TooLong { limit, .. }) => {
                return Attempt::Fatal(
                    format!(
                        "profile `{}`: the reply from {} (HTTP {status}) is longer than {} (max_reply_mib); \
                         the rest was not read. Raise max_reply_mib in the profile if replies this long are expected",
                        self.profile,
                        self.url,
                        describe_bytes(limit)
                    ),
                    FailureClass::Other,
                );
            }
        };
        let latency_ms = started.elapsed().as_millis() as u64;
        // The key leaves the reply here, before it is parsed, cached or quoted.
        let text = secrets::redact(&String::from_utf8_lossy(&bytes)).into_owned();

        if status.is_success() {
            if text.trim().is_empty() {
                return again("empty_body", format!("HTTP {status} with an empty body"), None);
            }
            let mut value: Value = match serde_json::from_str(&text) {
                Ok(v) => v,
                Err(e) => {
                    return again(
                        "invalid_body",
                        format!("HTTP {status} with a body that is not JSON ({e}): {}", super::parse::preview(&text)),
                        None,
                    );
                }
            };
            // Again after decoding: a key the server wrote with JSON escapes.
            secrets::redact_json(&mut value);
            return match check(&value) {
                Ok(()) => Attempt::Done(value, latency_ms),
                Err(e) => again("invalid_body", format!("HTTP {status}: {e}"), None),
            };
        }

        let detail = format!("HTTP {status} from {}: {}", self.url, server_message(&text));
        match status {
            StatusCode::TOO_MANY_REQUESTS => Attempt::Again {
                cause: "http_429".into(),
                detail,
                retry_after,
                throttled: true,
                unreachable: false,
                refused: false,
            },
            StatusCode::INTERNAL_SERVER_ERROR
            | StatusCode::BAD_GATEWAY
            | StatusCode::SERVICE_UNAVAILABLE
            | StatusCode::GATEWAY_TIMEOUT => Attempt::Again {
                cause: format!("http_{}", status.as_u16()),
                detail,
                retry_after,
                throttled: false,
                unreachable: false,
                refused: false,
            },
            _ => {
                let class = match status {
                    StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => FailureClass::Auth,
                    StatusCode::NOT_FOUND => FailureClass::NotFound,
                    _ => FailureClass::Other,
                };
                Attempt::Fatal(format!("profile `{}`: {detail}{}", self.profile, hint(status)), class)
            }
        }
    }

    /// Ends a request in failure: the profile's first failure is kept, with its fix, for the
    /// terminal ([`crate::model::Profile::first_failure`]).
    fn fail(&self, class: FailureClass, message: String, retries: Vec<Retry>) -> Exchange {
        let _ = self.first_failure.set(ProviderFailure { class, fix: self.fix(class), message: message.clone() });
        Exchange { result: Err(ModelError::Provider(message)), retries }
    }

    /// What the user can do about a failure of `class`, naming the variable or field to check
    /// (never a key's value); `None` when the message is all there is to say.
    fn fix(&self, class: FailureClass) -> Option<String> {
        let (profile, source) = (&self.profile, &self.source);
        Some(match class {
            FailureClass::Auth => match &self.api_key_env {
                Some(var) => format!(
                    "check the API key in {var} (the variable named by `api_key_env` of profile `{profile}` in {source}): \
                     the server refused it, or it has no access to model `{}`",
                    self.model
                ),
                None => format!(
                    "profile `{profile}` sends no API key: set `api_key_env` in {source} to the variable that holds one"
                ),
            },
            FailureClass::Refused => format!(
                "check `base_url` of profile `{profile}` in {source} ({}): nothing listens on that port \
                 (connection refused); start the server or fix the port",
                self.base_url
            ),
            FailureClass::Unreachable => format!(
                "check `base_url` of profile `{profile}` in {source} ({}): no HTTP reply came from there \
                 (a host name that does not resolve, a network that does not reach it, or a server that drops the connection)",
                self.base_url
            ),
            FailureClass::NotFound => format!(
                "check `base_url` ({}) and `model` ({}) of profile `{profile}` in {source}",
                self.base_url, self.model
            ),
            FailureClass::Timeout => format!(
                "the server did not answer within `timeout_s` ({}s): raise it for profile `{profile}` in {source}, or check the server",
                self.timeout.as_secs_f64()
            ),
            FailureClass::RateLimited => format!(
                "the server kept answering 429 (rate limited): lower `max_concurrency` of profile `{profile}` in {source} or --jobs"
            ),
            FailureClass::Other => return None,
        })
    }

    /// Removes the key from a message built from a server's reply: this profile's key even
    /// when it is too short to be registered as a secret, and every registered one.
    fn redact(&self, message: &str) -> String {
        let message = match &self.key {
            Some(key) if key.expose().len() >= 4 => message.replace(key.expose(), secrets::REDACTED),
            _ => message.to_string(),
        };
        secrets::redact(&message).into_owned()
    }
}

/// Why a body was not read to its end.
#[derive(Debug)]
enum Capped {
    Transport(reqwest::Error),
    /// The body passed `limit` bytes after `read` bytes had arrived.
    TooLong {
        limit: usize,
        #[cfg_attr(not(test), allow(dead_code))]
        read: usize,
    },
}

/// The body of `response`, read chunk by chunk and given up as soon as it passes `limit` bytes:
/// at most `limit` plus one chunk is ever held, however much the server sends. A declared
/// `Content-Length` above the limit is refused before anything is read.
async fn read_capped(mut response: reqwest::Response, limit: usize) -> Result<Vec<u8>, Capped> {
    if response.content_length().is_some_and(|n| n > limit as u64) {
        return Err(Capped::TooLong { limit, read: 0 });
    }
    // Only a declared length within the limit is trusted for the first allocation.
    let mut body = Vec::with_capacity(response.content_length().map_or(0, |n| n as usize).min(limit));
    while let Some(chunk) = response.chunk().await.map_err(Capped::Transport)? {
        if body.len() + chunk.len() > limit {
            return Err(Capped::TooLong { limit, read: body.len() + chunk.len() });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// `8388608` -> `8 MiB (8388608 bytes)`.
fn describe_bytes(n: usize) -> String {
    let mib = n as f64 / (1024.0 * 1024.0);
    format!("{} MiB ({n} bytes)", format!("{mib:.3}").trim_end_matches('0').trim_end_matches('.'))
}

/// The wait before retry number `attempt` (1-based): `base * 2^(attempt-1)` capped at
/// `max_ms`, with equal jitter (half fixed, half random) so cells that failed together do not
/// retry together. A `Retry-After` replaces it (capped by `retry_after_max_ms`), plus a little
/// jitter.
fn backoff(p: &RetryPolicy, attempt: u32, retry_after: Option<Duration>) -> Duration {
    let jitter = |span: u64| if span == 0 { 0 } else { fastrand::u64(0..=span) };
    if let Some(ra) = retry_after {
        let ra = (ra.as_millis() as u64).min(p.retry_after_max_ms);
        return Duration::from_millis(ra + jitter(p.base_ms / 4));
    }
    let exp = p.base_ms.saturating_mul(1u64 << attempt.saturating_sub(1).min(20)).min(p.max_ms);
    Duration::from_millis(exp / 2 + jitter(exp - exp / 2))
}

fn again(cause: &str, detail: String, retry_after: Option<Duration>) -> Attempt {
    Attempt::Again { cause: cause.into(), detail, retry_after, throttled: false, unreachable: false, refused: false }
}

/// Classifies a reqwest failure (no status): all of these are worth retrying.
fn transport_error(e: &reqwest::Error) -> Attempt {
    let cause = if e.is_timeout() {
        "timeout"
    } else if e.is_connect() {
        "connect"
    } else {
        "connection"
    };
    // No HTTP response because the connection failed (refused, reset, closed, or the connect
    // itself timed out): what a server that is down looks like. A reply that is merely slow
    // (a read timeout) is not.
    let unreachable = e.is_connect() || cause == "connection";
    // reqwest's Display names the URL, never headers; the source chain says what broke.
    let mut detail = e.to_string();
    let mut refused = false;
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        detail.push_str(": ");
        detail.push_str(&s.to_string());
        // Read from the OS error's kind, not its text: the host answered, the port did not.
        refused |=
            s.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused);
        source = s.source();
    }
    Attempt::Again { cause: cause.into(), detail, retry_after: None, throttled: false, unreachable, refused }
}

/// `Retry-After` as seconds (integer or decimal). HTTP dates fall back to the backoff.
fn parse_retry_after(v: &str) -> Option<Duration> {
    let secs: f64 = v.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(24.0 * 3600.0)))
}

/// The error message in a failed response's body, or a bounded quote of the body.
fn server_message(text: &str) -> String {
    match serde_json::from_str::<Value>(text) {
        Ok(v) => match v.get("error") {
            Some(err) => error_message(err),
            None => super::parse::preview(text),
        },
        Err(_) if text.trim().is_empty() => "(empty body)".into(),
        Err(_) => super::parse::preview(text),
    }
}

/// What the user can do about a status that is not retried.
fn hint(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 | 403 => " (check the API key in the profile's api_key_env variable)",
        404 => " (check base_url and model)",
        400 | 422 => " (the server rejected the request; check the profile's options for this server)",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_read_as_seconds() {
        assert_eq!(parse_retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after(" 0.5 "), Some(Duration::from_millis(500)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(parse_retry_after("-1"), None);
    }

    #[test]
    fn backoff_doubles_with_jitter_up_to_the_cap_and_retry_after_wins() {
        let p = RetryPolicy { max_retries: 9, base_ms: 100, max_ms: 1000, retry_after_max_ms: 5000 };
        for _ in 0..50 {
            let d1 = backoff(&p, 1, None).as_millis();
            assert!((50..=100).contains(&d1), "{d1}");
            let d3 = backoff(&p, 3, None).as_millis();
            assert!((200..=400).contains(&d3), "{d3}");
            let d9 = backoff(&p, 9, None).as_millis();
            assert!((500..=1000).contains(&d9), "capped: {d9}");
            let ra = backoff(&p, 1, Some(Duration::from_secs(2))).as_millis();
            assert!((2000..=2025).contains(&ra), "{ra}");
            let long = backoff(&p, 1, Some(Duration::from_secs(3600))).as_millis();
            assert!((5000..=5025).contains(&long), "Retry-After is capped: {long}");
        }
        assert_eq!(backoff(&RetryPolicy { base_ms: 0, ..p }, 1, None), Duration::ZERO);
    }

    #[test]
    fn secrets_are_never_debug_printed() {
        let s = Secret::new("sk-very-secret".into());
        assert!(!format!("{s:?}").contains("very"));
    }

    /// A loopback server that answers every connection with `head` and then `body_chunks`
    /// repetitions of a 64 KiB chunk (or hangs up at once when `head` is empty), counting
    /// connections and bytes it managed to write.
    struct Loopback {
        url: String,
        connections: Arc<std::sync::atomic::AtomicUsize>,
        written: Arc<std::sync::atomic::AtomicUsize>,
    }

    fn loopback(head: &'static str, body_chunks: usize) -> Loopback {
        use std::io::{Read, Write};
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1/chat/completions", listener.local_addr().unwrap());
        let connections = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let written = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (c, w) = (connections.clone(), written.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                c.fetch_add(1, Ordering::SeqCst);
                let w = w.clone();
                std::thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
                    let _ = stream.read(&mut buf);
                    if head.is_empty() {
                        return;
                    }
                    let _ = stream.write_all(head.as_bytes());
                    let chunk = vec![b'x'; 64 * 1024];
                    for _ in 0..body_chunks {
                        if stream.write_all(&chunk).is_err() {
                            return;
                        }
                        w.fetch_add(chunk.len(), Ordering::SeqCst);
                    }
                });
            }
        });
        Loopback { url, connections, written }
    }

    /// A client as profiles build it (reqwest has no bundled crypto provider).
    fn client() -> reqwest::Client {
        let _ = rustls::crypto::ring::default_provider().install_default();
        reqwest::Client::new()
    }

    fn transport(url: &str, max_reply_bytes: usize, max_connect_failures: u32) -> Transport {
        Transport {
            profile: "p".into(),
            provider: "openai-chat".into(),
            model: "m".into(),
            client: client(),
            url: url.into(),
            key: None,
            key_header: None,
            timeout: Duration::from_secs(10),
            retry: RetryPolicy { max_retries: 3, base_ms: 1, max_ms: 2, retry_after_max_ms: 10 },
            limiter: Arc::new(Limiter::new(4)),
            cache: Cache { mode: CacheMode::Off, dir: std::env::temp_dir() },
            max_reply_bytes,
            breaker: Arc::new(Breaker::new("p", max_connect_failures)),
            source: "models.toml".into(),
            api_key_env: Some("P_KEY".into()),
            base_url: url.rsplit_once("/chat").map_or(url, |(b, _)| b).to_string(),
            first_failure: Arc::default(),
        }
    }

    /// 1.5 GiB announced without a length (chunked): the read stops after about the cap.
    #[tokio::test]
    async fn a_reply_longer_than_the_cap_is_given_up_after_about_the_cap() {
        let server = loopback("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n", 24_000);
        let limit = 1024 * 1024;
        let response = client().post(&server.url).body("{}").send().await.unwrap();
        let Err(Capped::TooLong { limit: l, read }) = read_capped(response, limit).await else {
            panic!("the body is refused")
        };
        assert_eq!(l, limit);
        assert!(read > limit && read <= limit + 256 * 1024, "no more than the cap plus one chunk is held: {read}");
        // The connection is dropped: the server could not push much more than the socket buffers hold.
        std::thread::sleep(Duration::from_millis(300));
        let written = server.written.load(std::sync::atomic::Ordering::SeqCst);
        assert!(written < 64 * limit, "the server stopped after {written} bytes");

        let t = transport(&server.url, limit, 5);
        let exchange = t.send(&serde_json::json!({}), &|_| Ok(())).await;
        let message = exchange.result.unwrap_err().to_string();
        assert!(message.contains("longer than 1 MiB (1048576 bytes) (max_reply_mib)"), "{message}");
        assert!(message.contains("Raise max_reply_mib"), "{message}");
        assert!(exchange.retries.is_empty(), "the same request would get the same flood: no retry");
    }

    #[tokio::test]
    async fn a_declared_length_above_the_cap_is_refused_before_reading() {
        let server = loopback("HTTP/1.1 200 OK\r\nContent-Length: 999999999\r\nConnection: close\r\n\r\n", 2);
        let response = client().post(&server.url).body("{}").send().await.unwrap();
        assert!(matches!(read_capped(response, 1000).await, Err(Capped::TooLong { read: 0, .. })));
    }

    #[tokio::test]
    async fn the_breaker_opens_after_consecutive_connection_failures_and_nothing_more_is_sent() {
        // A server that accepts and hangs up: every attempt is a connection failure it counts.
        let server = loopback("", 0);
        let t = transport(&server.url, 1024, 6);
        let first = t.send(&serde_json::json!({}), &|_| Ok(())).await;
        assert_eq!(first.retries.len(), 3, "max_retries = 3: four attempts, below the threshold");
        assert!(first.result.unwrap_err().to_string().contains("gave up after 4 attempts"));
        assert!(t.breaker.open().is_none());
        let second = t.send(&serde_json::json!({}), &|_| Ok(())).await;
        let message = second.result.unwrap_err().to_string();
        assert!(message.contains("profile `p` is unreachable: 6 consecutive connection failures"), "{message}");
        assert_eq!(server.connections.load(std::sync::atomic::Ordering::SeqCst), 6);
        let third = t.send(&serde_json::json!({}), &|_| Ok(())).await;
        assert!(third.result.is_err() && third.retries.is_empty());
        assert_eq!(server.connections.load(std::sync::atomic::Ordering::SeqCst), 6, "an open breaker sends nothing");

        // Refused connections count the same way.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let t = transport(&format!("http://{closed}/v1/chat/completions"), 1024, 2);
        let e = t.send(&serde_json::json!({}), &|_| Ok(())).await.result.unwrap_err().to_string();
        assert!(e.contains("2 consecutive connection failures"), "{e}");
    }

    #[tokio::test]
    async fn an_echoed_key_is_scrubbed_from_a_successful_reply() {
        secrets::register("sk-unit-echo-0042");
        let server = loopback(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n\
             {\"echo\": \"sk-unit-echo-0042\", \"escaped\": \"\\u0073k-unit-echo-0042\"}",
            0,
        );
        let t = transport(&server.url, 1024, 5);
        let got = t.send(&serde_json::json!({}), &|_| Ok(())).await.result.unwrap();
        assert_eq!(got.body, serde_json::json!({"echo": "[redacted]", "escaped": "[redacted]"}));
    }

    #[tokio::test]
    async fn the_first_failure_is_kept_with_its_class_and_a_fix_naming_the_variable_or_base_url() {
        let refused = loopback(
            "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n\
             {\"error\": {\"message\": \"bad key\"}}",
            0,
        );
        let t = transport(&refused.url, 1024, 5);
        assert!(t.first_failure.get().is_none());
        let message = t.send(&serde_json::json!({}), &|_| Ok(())).await.result.unwrap_err().to_string();
        let first = t.first_failure.get().unwrap().clone();
        assert_eq!(first.class, FailureClass::Auth);
        assert!(message.contains(&first.message), "the cell's error and the announced one agree");
        let fix = first.fix.unwrap();
        assert!(fix.starts_with("check the API key in P_KEY (the variable named by `api_key_env`"), "{fix}");
        // A later failure does not replace the first.
        let _ = t.send(&serde_json::json!({}), &|_| Ok(())).await;
        assert_eq!(t.first_failure.get().unwrap().message, first.message);
        // Without api_key_env the fix says that no key is sent.
        let t = Transport { api_key_env: None, first_failure: Arc::default(), ..transport(&refused.url, 1024, 5) };
        let _ = t.send(&serde_json::json!({}), &|_| Ok(())).await;
        assert!(t.first_failure.get().unwrap().fix.as_deref().unwrap().contains("sends no API key"));

        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let t = transport(&format!("http://{closed}/v1/chat/completions"), 1024, 0);
        let _ = t.send(&serde_json::json!({}), &|_| Ok(())).await;
        let first = t.first_failure.get().unwrap();
        assert_eq!(first.class, FailureClass::Refused, "read from the OS error, not its text");
        let fix = first.fix.as_deref().unwrap();
        assert!(fix.contains(&format!("check `base_url` of profile `p` in models.toml (http://{closed}/v1)")), "{fix}");
        assert!(fix.contains("nothing listens on that port"), "{fix}");
        // A server that takes the connection and hangs up is reached but gives no reply.
        let hangup = loopback("", 0);
        let t = transport(&hangup.url, 1024, 0);
        let _ = t.send(&serde_json::json!({}), &|_| Ok(())).await;
        assert_eq!(t.first_failure.get().unwrap().class, FailureClass::Unreachable);

        let missing = loopback("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", 0);
        let t = transport(&missing.url, 1024, 5);
        let _ = t.send(&serde_json::json!({}), &|_| Ok(())).await;
        assert_eq!(t.first_failure.get().unwrap().class, FailureClass::NotFound);
        let busy = loopback("HTTP/1.1 429 Too Many Requests\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", 0);
        let t = transport(&busy.url, 1024, 5);
        let _ = t.send(&serde_json::json!({}), &|_| Ok(())).await;
        assert_eq!(t.first_failure.get().unwrap().class, FailureClass::RateLimited);
        let broken = loopback("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", 0);
        let t = transport(&broken.url, 1024, 5);
        let _ = t.send(&serde_json::json!({}), &|_| Ok(())).await;
        assert_eq!(
            (t.first_failure.get().unwrap().class, t.first_failure.get().unwrap().fix.clone()),
            (FailureClass::Other, None)
        );
    }

    #[test]
    fn server_messages_come_from_the_error_object() {
        assert_eq!(
            server_message(r#"{"error": {"message": "Invalid model", "type": "invalid_request_error"}}"#),
            "Invalid model (invalid_request_error)"
        );
        assert_eq!(server_message(""), "(empty body)");
        assert!(server_message("<html>bad gateway</html>").contains("bad gateway"));
    }
}
