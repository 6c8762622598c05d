//! The HTTP provider: one cell's turns against an OpenAI-compatible server.
//!
//! It composes the pieces: `openai.rs` builds the request body and reads the response,
//! `http.rs` sends it (limiter, retries, cache), `parse.rs` turns the reply into an action.
//! Each turn is stateless: the request carries the whole projected context, so the same
//! context gives the same request body, which is what makes the response cache work.
//!
//! The action handed to the loop is free of registered secrets (`secrets.rs`): the transport
//! scrubs the body as it arrives, and the action is scrubbed once more after parsing.

use std::path::Path;
use std::sync::Arc;

use super::cache::Cache;
use super::http::Transport;
use super::openai::{self, BodyOptions};
use super::{BoxFuture, ModelError, ModelReply, ModelRequest, ModelTurn, Provider};
use super::{parse, secrets};
use crate::action::Tool;
use crate::trace::event::{ModelInfo, Usage};

/// A resolved HTTP profile, shared by every cell of the profile.
#[derive(Debug)]
pub struct HttpProfile {
    pub(crate) info: ModelInfo,
    pub(crate) body: BodyOptions,
    pub(crate) transport: Transport,
}

impl HttpProfile {
    /// The same profile with its response cache in `dir` (same mode). Client, rate limiter and
    /// every other setting are shared with `self`.
    pub(crate) fn with_cache_dir(&self, dir: &Path) -> HttpProfile {
        let cache = Cache { mode: self.transport.cache.mode, dir: dir.to_path_buf() };
        HttpProfile {
            info: self.info.clone(),
            body: self.body.clone(),
            transport: Transport { cache, ..self.transport.clone() },
        }
    }
}

/// One cell's provider: the profile plus the case's allowed tools.
pub(crate) struct HttpProvider {
    profile: Arc<HttpProfile>,
    tools: Vec<Tool>,
}

impl HttpProvider {
    pub(crate) fn new(profile: Arc<HttpProfile>, tools: Vec<Tool>) -> HttpProvider {
        HttpProvider { profile, tools }
    }

    async fn turn(&self, request: &ModelRequest) -> ModelTurn {
        let api = self.profile.body.api;
        let body = openai::request_body(&self.profile.body, request, &self.tools);
        let check = move |v: &serde_json::Value| openai::interpret(api, v).map(|_| ());
        let exchange = self.profile.transport.send(&body, &check).await;
        let retries = exchange.retries;
        let received = match exchange.result {
            Ok(r) => r,
            Err(e) => return ModelTurn { result: Err(e), retries, usage: None },
        };
        let mut interpreted = match openai::interpret(api, &received.body) {
            Ok(i) => i,
            // `send` only returns bodies that passed the same check.
            Err(e) => return ModelTurn { result: Err(ModelError::Provider(e)), retries, usage: None },
        };
        interpreted.raw.truncated |= hit_token_limit(interpreted.usage.as_ref(), self.profile.body.max_output_tokens);
        match parse::parse_calls(&interpreted.raw) {
            Ok(mut actions) => {
                // The body was scrubbed as it arrived; this catches a key spelled with escapes
                // inside the JSON the model wrote as text, which only parsing decodes.
                for action in &mut actions {
                    action.tool = secrets::redact(&action.tool).into_owned();
                    secrets::redact_json(&mut action.args);
                }
                ModelTurn {
                    result: Ok(ModelReply { actions, usage: interpreted.usage, latency_ms: received.latency_ms }),
                    retries,
                    usage: None,
                }
            }
            Err(e) => ModelTurn { result: Err(e), retries, usage: interpreted.usage },
        }
    }
}

/// True when the reply used the whole output budget. Some servers (llama.cpp's Responses
/// endpoint) report `completed` even then, so a reply that spent every allowed token counts as
/// cut off too: its unparsable JSON is `truncated`, which tells the user what to change.
fn hit_token_limit(usage: Option<&Usage>, max_output_tokens: u32) -> bool {
    usage.is_some_and(|u| u.output_tokens >= u64::from(max_output_tokens))
}

impl Provider for HttpProvider {
    fn info(&self) -> ModelInfo {
        self.profile.info.clone()
    }

    fn next_action<'a>(&'a mut self, request: &'a ModelRequest) -> BoxFuture<'a, ModelTurn> {
        Box::pin(self.turn(request))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_that_spent_the_whole_budget_counts_as_cut_off() {
        let u = |output_tokens| Usage { input_tokens: 10, output_tokens, ..Default::default() };
        assert!(hit_token_limit(Some(&u(192)), 192));
        assert!(!hit_token_limit(Some(&u(191)), 192));
        assert!(!hit_token_limit(None, 192));
    }

    #[test]
    fn a_profile_with_another_cache_dir_keeps_everything_else() {
        use crate::environment::Environment;
        use crate::model::profiles::{build, builtin};
        use crate::model::{Profile, ProfileKind};
        let env = Environment::default();
        let p = build("local", &builtin("local", &env).unwrap(), "built-in", Path::new("/proj"), &env, false).unwrap();
        let moved = p.with_cache_dir(Path::new("/private/cache/local"));
        let (ProfileKind::Http(a), ProfileKind::Http(b)) = (&p.kind, &moved.kind) else { panic!("http profiles") };
        assert_eq!(a.transport.cache.dir, Path::new("/proj/workspace/cache/local"));
        assert_eq!(b.transport.cache.dir, Path::new("/private/cache/local"));
        assert_eq!(a.transport.cache.mode, b.transport.cache.mode);
        assert_eq!(
            (&moved.name, &b.transport.url, b.transport.timeout),
            (&p.name, &a.transport.url, a.transport.timeout)
        );
        assert!(Arc::ptr_eq(&a.transport.limiter, &b.transport.limiter), "one rate limiter per profile");
        let oracle = Profile::oracle().with_cache_dir(Path::new("/elsewhere"));
        assert!(matches!(oracle.kind, ProfileKind::Oracle));
    }
}
