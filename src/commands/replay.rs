//! `hcbench replay`: summaries rebuilt from traces alone.

use anyhow::Context as _;

use super::CommandError;
use crate::cli::{Format, ReplayArgs};
use crate::exit;
use crate::replay::{CellSummary, replay_run, replay_trace};
use crate::report::terminal;

pub fn replay(args: ReplayArgs, width: terminal::Width) -> Result<i32, CommandError> {
    let path = &args.path;
    let mut summaries: Vec<CellSummary> = Vec::new();
    let mut problems: Vec<String> = Vec::new();
    // A trace file, or the plain name of a finished cell's compressed trace (src/trace/stored.rs).
    if crate::trace::stored::locate(path).is_some() {
        summaries.push(replay_trace(path)?);
    } else if path.is_dir() {
        // Traces of a run directory must belong to its run, when its manifest says which: in a
        // merged run, to the shard that ran the cell.
        let manifest = crate::rundir::Manifest::read(path).ok();
        let shard_runs = manifest.as_ref().map(|m| m.shard_run_ids()).unwrap_or_default();
        let run_of = |cell_id: &str| -> Option<String> {
            let m = manifest.as_ref()?;
            // A cell outside a merged run's plan: an id no trace carries.
            Some(if m.merged_from.is_empty() {
                m.run_id.clone()
            } else {
                shard_runs.get(cell_id).cloned().unwrap_or_default()
            })
        };
        for (trace, result) in replay_run(path, &run_of)? {
            match result {
                Ok(s) => summaries.push(s),
                Err(e) => problems.push(format!("{}: {e}", trace.display())),
            }
        }
        if summaries.is_empty() && problems.is_empty() {
            return Err(CommandError::Usage(format!("{} holds no cells/*/trace.jsonl", path.display())));
        }
    } else {
        return Err(CommandError::Usage(format!("{} does not exist", path.display())));
    }
    match args.format {
        Format::Table => {
            for line in terminal::cell_lines(&summaries, width) {
                println!("{line}");
            }
        }
        Format::Json => println!("{}", serde_json::to_string_pretty(&summaries).context("json")?),
    }
    for p in &problems {
        eprintln!("error: {p}");
    }
    Ok(if problems.is_empty() { exit::SUCCESS } else { exit::USAGE })
}
