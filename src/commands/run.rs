//! `hcbench run`: one profile over the selected cases.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;

use super::CommandError;
use crate::cli::{Format, RunArgs};
use crate::engine::{self, Manifest};
use crate::report::{progress::LineProgress, terminal};
use crate::{exit, settings};

pub fn run(root: &Path, args: RunArgs) -> Result<i32, CommandError> {
    let selected = settings::select(root, &args.selection)?;
    let profile = settings::profile(&args.profile, args.script.as_deref())?;
    let jobs = settings::jobs(args.jobs);
    let run_id = engine::new_run_id();
    let run_dir = settings::run_dir(root, args.out.as_deref(), "runs", &run_id);
    let run_dir = engine::prepare_run_dir(&run_dir)
        .map_err(|e| CommandError::Usage(format!("cannot use run directory {}: {e}", run_dir.display())))?;
    let manifest = Manifest {
        schema_version: 1,
        run_id: run_id.clone(),
        hcbench_version: env!("CARGO_PKG_VERSION").into(),
        command: "run".into(),
        benchmark: selected.benchmark.name.clone(),
        profiles: vec![profile.name().to_string()],
        cases: selected.case_ids.clone(),
        jobs,
        started_at: crate::util::now_rfc3339(),
    };
    crate::util::write_atomic(&run_dir.join("manifest.json"), &serde_json::to_vec_pretty(&manifest).context("manifest")?)
        .with_context(|| format!("cannot write {}", run_dir.join("manifest.json").display()))?;

    let cells = engine::plan(&run_id, &run_dir, &selected.benchmark, &selected.case_ids, &[profile]);
    let rt = super::runtime()?;
    let summaries = rt
        .block_on(engine::execute(&run_id, &run_dir, cells, jobs, Arc::new(LineProgress::stderr())))
        .with_context(|| format!("run in {}", run_dir.display()))?;

    match args.format {
        Format::Table => {
            println!("{}", terminal::cell_table(&summaries));
            println!("{}", terminal::totals_line(&summaries));
            println!("run directory: {}", run_dir.display());
        }
        Format::Json => println!("{}", serde_json::to_string_pretty(&summaries).context("json")?),
    }
    let all_passed = summaries.iter().all(|s| s.outcome == Some(crate::trace::event::Outcome::Passed));
    Ok(if all_passed { exit::SUCCESS } else { exit::FAILED })
}
