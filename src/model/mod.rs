//! Model providers: where the agent's next action comes from.
//!
//! Every provider implements [`Provider`]. `oracle` replays a case's known-good actions (the
//! control arm), `scripted` replays actions from a file (tests, demos, validation agents), and
//! the HTTP providers (`openai-chat`, `openai-responses`; `remote.rs`) ask a real model. The
//! trait is async because real providers wait on the network; it returns a boxed future so
//! providers can be chosen at run time.
//!
//! The HTTP side is split by concern: `profiles` (models.toml and the built-in profiles),
//! `openai` (the two wire formats, pure), `parse` (reply text -> action, pure and tolerant),
//! `http` (sending with retries), `ratelimit` (per-profile AIMD concurrency), `cache` (the
//! on-disk response cache), `breaker` (the per-profile circuit breaker), `secrets` (keys
//! scrubbed from replies and traces) and `remote` (the provider that ties them together).

pub(crate) mod breaker;
pub(crate) mod cache;
pub mod definition;
pub(crate) mod http;
pub(crate) mod openai;
pub(crate) mod parse;
pub mod profiles;
pub(crate) mod ratelimit;
pub mod registry;
pub mod remote;
pub mod scripted;
pub(crate) mod secrets;

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;

use crate::action::Action;
use crate::bench::Case;
use crate::trace::event::{ModelInfo, Usage};

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the model is shown on one turn: the projected context.
#[derive(Debug, Clone)]
pub struct ModelRequest {
    pub step: u32,
    /// The packed context sections, in order, as (name, text).
    pub sections: Vec<(String, String)>,
}

/// A successful reply: the actions the model asked for, in its order, and what they cost.
#[derive(Debug, Clone)]
pub struct ModelReply {
    /// Never empty. Several when the model made several tool calls in one reply (or a script
    /// gave one turn a `batch`); the agent runs them as one batch.
    pub actions: Vec<Action>,
    pub usage: Option<Usage>,
    pub latency_ms: u64,
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum ModelError {
    /// The reply could not be turned into an action; the loop tells the model and goes on.
    #[error("could not parse the model reply: {0}")]
    Parse(String),
    /// The reply was cut off by the output-token limit in the middle of the action.
    #[error("the model reply was cut off by max_output_tokens: {0}")]
    Truncated(String),
    /// The provider failed for good (after retries); the cell ends as provider_error.
    #[error("provider failed: {0}")]
    Provider(String),
}

impl ModelError {
    pub fn kind(&self) -> &'static str {
        match self {
            ModelError::Parse(_) => "parse",
            ModelError::Truncated(_) => "truncated",
            ModelError::Provider(_) => "provider",
        }
    }
}

/// What kind of provider failure it was, as far as the fix goes. It is decided where the
/// failure is seen (the HTTP status, the connection error; `http.rs`) and carried with it, so
/// the terminal can name the fix without reading it back out of the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureClass {
    /// HTTP 401 or 403: the key is missing, wrong, or has no access to the model.
    Auth,
    /// The connection was refused: nothing listens at `base_url`'s port.
    Refused,
    /// No HTTP response otherwise: a DNS failure, a reset or closed connection, an open breaker.
    Unreachable,
    /// HTTP 404: a wrong `base_url` or `model`.
    NotFound,
    /// No reply within `timeout_s`, on every attempt.
    Timeout,
    /// HTTP 429 on every attempt.
    RateLimited,
    /// Anything else (a bad reply, a cache miss, a server error): the message says it all.
    Other,
}

/// A profile's first provider failure in this command: what the cell recorded, its class, and
/// the fix where one is known. It names variables and fields, never a key.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderFailure {
    pub class: FailureClass,
    pub message: String,
    pub fix: Option<String>,
}

/// One retried request: why, and how long the provider waited before the next attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct Retry {
    pub attempt: u32,
    pub cause: String,
    pub delay_ms: u64,
}

/// The result of asking for one action, with the retries it took. The loop records each retry
/// as a `model_retry` event before the action or the error.
#[derive(Debug, Clone)]
pub struct ModelTurn {
    pub result: Result<ModelReply, ModelError>,
    pub retries: Vec<Retry>,
    /// Token usage of a reply that failed to parse (it was still paid for).
    pub usage: Option<Usage>,
}

impl From<Result<ModelReply, ModelError>> for ModelTurn {
    fn from(result: Result<ModelReply, ModelError>) -> Self {
        ModelTurn { result, retries: Vec::new(), usage: None }
    }
}

/// A source of actions for one cell.
pub trait Provider: Send {
    fn info(&self) -> ModelInfo;
    fn next_action<'a>(&'a mut self, request: &'a ModelRequest) -> BoxFuture<'a, ModelTurn>;

    /// The provider for the read-only delegation the last reply asked for, when this provider
    /// decides it: a script's `delegate` step carries its child's steps. `None` (a model): the
    /// loop takes a fresh provider of the same profile ([`Profile::provider_for`]).
    fn delegation(&mut self) -> Option<Box<dyn Provider>> {
        None
    }

    /// What the provider carries from one turn to the next, for the cell's checkpoint
    /// (`agent/checkpoint.rs`). None for a provider that carries nothing: the HTTP provider's
    /// turns are stateless (each request is built from the projected context, which the
    /// checkpoint restores), so after a resume it rebuilds the conversation by itself.
    fn saved_state(&self) -> Option<serde_json::Value> {
        None
    }

    /// Continues from a [`Provider::saved_state`]; Err says why it cannot.
    fn restore_state(&mut self, _state: &serde_json::Value) -> Result<(), String> {
        Ok(())
    }
}

/// A profile: a named way of producing actions, resolved once from the command line.
#[derive(Debug, Clone)]
pub struct Profile {
    /// The name reports and cell ids use.
    pub name: String,
    pub kind: ProfileKind,
    /// What the name resolved to (settings and their digest), so results can name the exact
    /// definition that produced them, not only its name.
    pub definition: Arc<definition::Definition>,
}

#[derive(Debug, Clone)]
pub enum ProfileKind {
    /// The case's known-good actions: the control arm.
    Oracle,
    /// Actions from a script, the same for every cell of a case.
    Scripted(Arc<scripted::Script>),
    /// A real model behind an OpenAI-compatible HTTP API. The profile (client, rate limiter,
    /// cache) is shared by all cells.
    Http(Arc<remote::HttpProfile>),
}

impl Profile {
    pub fn oracle() -> Profile {
        Profile {
            name: "oracle".into(),
            kind: ProfileKind::Oracle,
            definition: Arc::new(definition::Definition::builtin("oracle", None)),
        }
    }

    /// A scripted profile; its definition names the script by its label until the registry
    /// says where it came from ([`Profile::defined_as`]).
    pub fn scripted(name: &str, script: scripted::Script) -> Profile {
        let definition = Arc::new(definition::Definition::builtin("scripted", Some(&script.label)));
        Profile { name: name.into(), kind: ProfileKind::Scripted(Arc::new(script)), definition }
    }

    /// The same profile with the definition it was resolved from.
    pub(crate) fn defined_as(self, definition: definition::Definition) -> Profile {
        Profile { definition: Arc::new(definition), ..self }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The same profile with its response cache, if it has one, in `dir` instead of
    /// `workspace/cache/<name>`. Profiles without a cache are returned as they are. The gate
    /// uses it to keep the requests of test-split cells (test prompts) out of the project.
    pub fn with_cache_dir(&self, dir: &Path) -> Profile {
        match &self.kind {
            ProfileKind::Http(http) => {
                Profile { kind: ProfileKind::Http(Arc::new(http.with_cache_dir(dir))), ..self.clone() }
            }
            ProfileKind::Oracle | ProfileKind::Scripted(_) => self.clone(),
        }
    }

    /// Why the profile can take no more requests in this command (its circuit breaker is
    /// open: the server was unreachable), or `None`. The loop ends a cell of such a profile as
    /// `provider_error` before it starts.
    pub fn unavailable(&self) -> Option<String> {
        match &self.kind {
            ProfileKind::Http(http) => http.transport.breaker.open(),
            ProfileKind::Oracle | ProfileKind::Scripted(_) => None,
        }
    }

    /// The profile's first provider failure in this command, once there has been one. The
    /// engine announces it once per profile, as soon as the cell it ended finishes.
    pub fn first_failure(&self) -> Option<&ProviderFailure> {
        match &self.kind {
            ProfileKind::Http(http) => http.transport.first_failure.get(),
            ProfileKind::Oracle | ProfileKind::Scripted(_) => None,
        }
    }

    /// A fresh provider for one cell of `case`. `epoch` (1-based) seeds providers that vary
    /// between epochs (a noisy script), so the same cell always gets the same behaviour.
    pub fn provider_for(&self, case: &Case, epoch: u32) -> Box<dyn Provider> {
        match &self.kind {
            ProfileKind::Oracle => Box::new(QueueProvider::new(
                ModelInfo { provider: "oracle".into(), model: "oracle".into(), ..Default::default() },
                case.oracle.iter().cloned().map(scripted::Step::from).collect(),
            )),
            ProfileKind::Scripted(script) => Box::new(QueueProvider::new(
                ModelInfo { provider: "scripted".into(), model: script.label.clone(), ..Default::default() },
                script.actions_for(case, epoch),
            )),
            ProfileKind::Http(profile) => {
                Box::new(remote::HttpProvider::new(profile.clone(), case.allowed_tools.clone()))
            }
        }
    }
}

impl Profile {
    /// A fresh provider for session `index` (0-based) of a multi-session case. A model gets a
    /// new provider as a cell does; the oracle and a script play the part of their steps that
    /// belongs to the session (`bench::sessions::session_part`: the list is cut at `finish`),
    /// converting only that part.
    pub fn provider_for_session(&self, case: &Case, epoch: u32, index: usize) -> Box<dyn Provider> {
        use crate::bench::sessions::session_part;
        match &self.kind {
            ProfileKind::Oracle => Box::new(QueueProvider::new(
                ModelInfo { provider: "oracle".into(), model: "oracle".into(), ..Default::default() },
                session_part(&case.oracle, index).iter().cloned().map(scripted::Step::from).collect(),
            )),
            ProfileKind::Scripted(script) => Box::new(QueueProvider::new(
                ModelInfo { provider: "scripted".into(), model: script.label.clone(), ..Default::default() },
                session_part(&script.actions_for(case, epoch), index).to_vec(),
            )),
            ProfileKind::Http(_) => self.provider_for(case, epoch),
        }
    }
}

/// Hands out a list of steps in order, then `finish`; a branch is decided against the turn's
/// context when it is reached. Backs `oracle` and `scripted`.
pub struct QueueProvider {
    info: ModelInfo,
    steps: std::collections::VecDeque<scripted::Step>,
    /// The steps of the child of the last `delegate` step handed out, until the loop takes them.
    child: Option<Vec<scripted::Step>>,
}

impl QueueProvider {
    pub fn new(info: ModelInfo, steps: Vec<scripted::Step>) -> Self {
        QueueProvider { info, steps: steps.into(), child: None }
    }

    fn next(&mut self, request: &ModelRequest) -> Vec<Action> {
        loop {
            match self.steps.pop_front() {
                None => return vec![Action::finish("no more scripted actions")],
                Some(scripted::Step::Action(a)) => return vec![a],
                // An empty batch would be a reply with no action; the script check refuses it.
                Some(scripted::Step::Batch(b)) if !b.batch.is_empty() => return b.batch,
                Some(scripted::Step::Batch(_)) => {}
                Some(scripted::Step::Delegate(d)) => {
                    let action = d.delegate.action();
                    self.child = Some(d.delegate.steps);
                    return vec![action];
                }
                Some(scripted::Step::Branch(b)) => {
                    for step in b.choose(&request.sections).iter().rev() {
                        self.steps.push_front(step.clone());
                    }
                }
            }
        }
    }
}

impl Provider for QueueProvider {
    fn info(&self) -> ModelInfo {
        self.info.clone()
    }

    fn next_action<'a>(&'a mut self, request: &'a ModelRequest) -> BoxFuture<'a, ModelTurn> {
        let actions = self.next(request);
        Box::pin(async move { Ok(ModelReply { actions, usage: None, latency_ms: 0 }).into() })
    }

    /// The child's steps from the `delegate` step, or none (it then finishes at once, as a
    /// queue does when it runs dry): a scripted `delegate_readonly` action without a
    /// `delegate` step has a child with nothing to say.
    fn delegation(&mut self) -> Option<Box<dyn Provider>> {
        Some(Box::new(QueueProvider::new(self.info.clone(), self.child.take().unwrap_or_default())))
    }

    /// The steps not yet handed out: branches already decided are gone from the queue, so the
    /// rest continues exactly where the interrupted cell stood, whatever its contexts were.
    fn saved_state(&self) -> Option<serde_json::Value> {
        serde_json::to_value(&self.steps).ok()
    }

    fn restore_state(&mut self, state: &serde_json::Value) -> Result<(), String> {
        self.steps = serde_json::from_value(state.clone()).map_err(|e| format!("the script's remaining steps: {e}"))?;
        Ok(())
    }
}
