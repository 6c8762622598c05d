//! `hcbench plan`: the size, cost, time and power of a matrix before it runs. Nothing is run
//! and nothing is written; the profiles are resolved exactly as `matrix` would (so a missing
//! key shows up here too).

use anyhow::Context as _;

use super::CommandError;
use crate::cli::Format;
use crate::exit;
use crate::model::ProfileKind;
use crate::report::plan::{self, PlanInput, PlannedProfile};
use crate::settings::PlanSettings;

pub fn plan(s: PlanSettings) -> Result<i32, CommandError> {
    let past = match &s.from {
        Some(dir) => Some(crate::report::model::build(dir, false)?),
        None => None,
    };
    let profiles = s
        .profiles
        .iter()
        .map(|p| {
            let (provider, calls_a_model) = match &p.kind {
                ProfileKind::Oracle => ("oracle".to_string(), false),
                ProfileKind::Scripted(_) => ("scripted".to_string(), false),
                ProfileKind::Http(h) => (h.info.provider.clone(), true),
            };
            PlannedProfile { name: p.name().to_string(), provider, calls_a_model }
        })
        .collect();
    let report = plan::build(&PlanInput {
        benchmark: &s.selected.benchmark.name,
        cases: s.selected.case_ids.len(),
        profiles,
        epochs: s.epochs,
        jobs: s.jobs,
        target_diff: s.target_diff,
        baseline_rate: s.baseline_rate,
        past: past.as_ref(),
    });
    match s.format {
        Format::Table => print!("{}", plan::render_text(&report)),
        Format::Json => println!("{}", serde_json::to_string_pretty(&report).context("json")?),
    }
    Ok(exit::SUCCESS)
}
