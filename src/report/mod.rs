//! Rendering summaries for people: the terminal table and progress lines.
//!
//! Reports are plain functions over [`crate::replay::CellSummary`] values, so a live run and a
//! replay render through the same code.

pub mod progress;
pub mod terminal;
