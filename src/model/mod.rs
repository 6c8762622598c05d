//! Model providers: where the agent's next action comes from.
//!
//! Every provider implements [`Provider`]. `oracle` replays a case's known-good actions (the
//! control arm), `scripted` replays actions from a file (tests, demos, validation agents). The
//! HTTP providers implement the same trait. The trait is async because real providers wait
//! on the network; it returns a boxed future so providers can be chosen at run time.

pub mod action;
pub mod scripted;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::bench::Case;
use crate::trace::event::{ModelInfo, Usage};
use action::Action;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the model is shown on one turn: the projected context.
#[derive(Debug, Clone)]
pub struct ModelRequest {
    pub step: u32,
    /// The packed context sections, in order, as (name, text).
    pub sections: Vec<(String, String)>,
}

/// A successful reply: one action, and what it cost.
#[derive(Debug, Clone)]
pub struct ModelReply {
    pub action: Action,
    pub usage: Option<Usage>,
    pub latency_ms: u64,
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum ModelError {
    /// The reply could not be turned into an action; the loop tells the model and goes on.
    #[error("could not parse the model reply: {0}")]
    Parse(String),
    /// The provider failed for good (after retries); the cell ends as provider_error.
    #[error("provider failed: {0}")]
    Provider(String),
}

impl ModelError {
    pub fn kind(&self) -> &'static str {
        match self {
            ModelError::Parse(_) => "parse",
            ModelError::Provider(_) => "provider",
        }
    }
}

/// A source of actions for one cell.
pub trait Provider: Send {
    fn info(&self) -> ModelInfo;
    fn next_action<'a>(&'a mut self, request: &'a ModelRequest) -> BoxFuture<'a, Result<ModelReply, ModelError>>;
}

/// A profile: a named way of producing actions, resolved once from the command line.
#[derive(Debug, Clone)]
pub struct Profile {
    /// The name reports and cell ids use.
    pub name: String,
    pub kind: ProfileKind,
}

#[derive(Debug, Clone)]
pub enum ProfileKind {
    /// The case's known-good actions: the control arm.
    Oracle,
    /// Actions from a script, the same for every cell of a case.
    Scripted(Arc<scripted::Script>),
}

impl Profile {
    pub fn oracle() -> Profile {
        Profile { name: "oracle".into(), kind: ProfileKind::Oracle }
    }

    pub fn scripted(name: &str, script: scripted::Script) -> Profile {
        Profile { name: name.into(), kind: ProfileKind::Scripted(Arc::new(script)) }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// A fresh provider for one cell of `case`.
    pub fn provider_for(&self, case: &Case) -> Box<dyn Provider> {
        match &self.kind {
            ProfileKind::Oracle => Box::new(QueueProvider::new(
                ModelInfo { provider: "oracle".into(), model: "oracle".into(), ..Default::default() },
                case.oracle.clone(),
            )),
            ProfileKind::Scripted(script) => Box::new(QueueProvider::new(
                ModelInfo { provider: "scripted".into(), model: script.label.clone(), ..Default::default() },
                script.actions_for(case),
            )),
        }
    }
}

/// Hands out a fixed list of actions in order, then `finish`. Backs `oracle` and `scripted`.
pub struct QueueProvider {
    info: ModelInfo,
    actions: std::vec::IntoIter<Action>,
}

impl QueueProvider {
    pub fn new(info: ModelInfo, actions: Vec<Action>) -> Self {
        QueueProvider { info, actions: actions.into_iter() }
    }
}

impl Provider for QueueProvider {
    fn info(&self) -> ModelInfo {
        self.info.clone()
    }

    fn next_action<'a>(&'a mut self, _request: &'a ModelRequest) -> BoxFuture<'a, Result<ModelReply, ModelError>> {
        let action = self.actions.next().unwrap_or_else(|| Action::finish("no more scripted actions"));
        Box::pin(async move { Ok(ModelReply { action, usage: None, latency_ms: 0 }) })
    }
}
