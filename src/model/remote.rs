//! The HTTP provider: one cell's turns against an OpenAI-compatible server.
//!
//! It composes the pieces: `openai.rs` builds the request body and reads the response,
//! `http.rs` sends it (limiter, retries, cache), `parse.rs` turns the reply into an action.
//! Each turn is stateless: the request carries the whole projected context, so the same
//! context gives the same request body, which is what makes the response cache work.

use std::sync::Arc;

use super::http::Transport;
use super::openai::{self, BodyOptions};
use super::parse;
use super::{BoxFuture, ModelError, ModelReply, ModelRequest, ModelTurn, Provider};
use crate::action::Tool;
use crate::trace::event::{ModelInfo, Usage};

/// A resolved HTTP profile, shared by every cell of the profile.
#[derive(Debug)]
pub struct HttpProfile {
    pub(crate) info: ModelInfo,
    pub(crate) body: BodyOptions,
    pub(crate) transport: Transport,
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
        match parse::parse_reply(&interpreted.raw) {
            Ok(action) => ModelTurn {
                result: Ok(ModelReply { action, usage: interpreted.usage, latency_ms: received.latency_ms }),
                retries,
                usage: None,
            },
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
        let u = |output_tokens| Usage { input_tokens: 10, output_tokens };
        assert!(hit_token_limit(Some(&u(192)), 192));
        assert!(!hit_token_limit(Some(&u(191)), 192));
        assert!(!hit_token_limit(None, 192));
    }
}
