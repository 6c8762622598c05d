//! hcbench: a batch evaluation and benchmarking framework for coding agents.
//!
//! The crate is one library plus the thin `hcbench` binary. The data flow follows
//! `docs/architecture.md`: [`commands`] snapshot the [`environment`] and resolve [`settings`]
//! once, [`bench`] loads and validates cases, [`rundir`] creates the run directory and its
//! manifest, [`engine`] runs cells (case x profile x epoch) in parallel under one
//! `interrupt::Session`, each through the embedded [`agent`] loop, which appends every step
//! to a [`trace`]. [`replay`] rebuilds summaries from traces alone and [`report`] renders
//! them, with every interval and verdict from [`stats`]; [`gate`] and [`validate`] drive the engine for their own verdicts. Nothing below
//! `commands` prints: the engine reports to [`events::EngineSink`]s, the gate to a
//! `gate::GateSink`. [`action`] holds the vocabulary that bench, model and agent
//! share (the tools, their arguments, the actions a model sends), so none of the three imports
//! another to speak about tools.

pub mod action;
pub mod agent;
pub mod aggregate;
pub mod bench;
pub mod browser;
pub mod cli;
pub mod commands;
pub mod engine;
pub mod environment;
pub mod events;
pub mod exit;
#[doc(hidden)]
pub mod fuzzing;
pub mod gate;
pub mod history;
pub mod interrupt;
pub mod lock;
pub mod merge;
pub mod model;
pub mod process;
pub mod replay;
pub mod report;
pub mod rundir;
pub mod sandbox;
pub mod serve;
pub mod settings;
pub mod shard;
pub mod stats;
pub mod supervisor;
pub mod trace;
pub mod trend;
pub mod util;
pub mod validate;
pub mod workspace;
