//! `hcbench merge OUT SHARD_DIR...`: the shard runs of one plan joined into one run directory
//! (src/merge.rs checks and links them), then every report of it and one row set in the
//! results history. The exit code is the merged run's verdict under the exit policy, as
//! `hcbench report` would give it.

use super::CommandError;
use crate::cli::MergeArgs;
use crate::report;
use crate::settings::Settings;

pub fn merge(settings: &Settings, args: MergeArgs) -> Result<i32, CommandError> {
    let merged = crate::merge::merge(&args.out, &args.shards, args.allow_partial).map_err(|e| {
        if e.is_usage() { CommandError::Usage(e.to_string()) } else { CommandError::Internal(anyhow::Error::new(e)) }
    })?;
    let run = &merged.run;
    let m = run.manifest();
    eprintln!(
        "merged {} shard run(s) of {} into {}: {} of {} planned cell(s) have a result",
        m.merged_from.len(),
        m.merged_from.first().map_or(0, |s| s.shard.count),
        run.path().display(),
        merged.merged,
        merged.planned
    );
    if !merged.missing_shards.is_empty() {
        let list: Vec<String> = merged.missing_shards.iter().map(u32::to_string).collect();
        eprintln!(
            "warning: shard(s) {} were not given (--allow-partial): their cells have no verdict",
            list.join(", ")
        );
    }
    let report = report::model::build(run.path(), true)?;
    let written = report::write_all(run.path(), &report)?;
    super::report::print(&report, args.format, settings.width(args.wide))?;
    for p in written {
        eprintln!("wrote {}", p.display());
    }
    if !args.no_history {
        let dir = settings.history_dir(args.history.as_deref());
        match crate::history::append_run(&dir, m, &report.cells) {
            Ok(file) => eprintln!("appended {} cell(s) to {}", report.cells.len(), file.display()),
            Err(e) => {
                eprintln!("warning: {e}; add the run later with `hcbench history import {}`", run.path().display())
            }
        }
    }
    Ok(report.verdict.exit_code)
}
