//! `hcbench run`: one profile over the selected cases, a table of outcomes, exit 0 only when
//! every case passed.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;

use super::{CommandError, exec};
use crate::agent::spec::AgentSpec;
use crate::cli::{Format, RunArgs};
use crate::engine::{self, Manifest};
use crate::report::{self, progress, terminal};
use crate::trace::event::Outcome;
use crate::{exit, settings};

pub fn run(root: &Path, spec: &Arc<AgentSpec>, args: RunArgs) -> Result<i32, CommandError> {
    let selected = settings::select(root, &args.selection)?;
    let profile = settings::profile(root, &args.profile, args.script.as_deref(), args.models.as_deref())?;
    let jobs = settings::jobs(args.jobs);
    let run_id = engine::new_run_id();
    let run_dir = settings::run_dir(root, args.out.as_deref(), "runs", &run_id);
    let run_dir = engine::prepare_run_dir(&run_dir)
        .map_err(|e| CommandError::Usage(format!("cannot use run directory {}: {e}", run_dir.display())))?;
    let profiles = [profile];
    let manifest =
        Manifest::new("run", &run_id, root, &selected.benchmark, &selected.case_ids, &profiles, 1, jobs, spec);
    manifest.write(&run_dir).with_context(|| format!("cannot write the manifest in {}", run_dir.display()))?;

    let cells = engine::plan(&run_id, &run_dir, &selected.benchmark, &selected.case_ids, &profiles, 1, spec);
    let done = exec::execute(&run_id, &run_dir, cells, jobs, Arc::from(progress::auto()))?;
    let report = report::model::build(&run_dir, true)?;
    report::write_all(&run_dir, &report)?;
    if args.selection.split.as_deref() == Some("train") {
        // The latest train results feed the gate's Step 3 (promotion); see src/gate/mod.rs.
        let wait =
            |holder: &str| eprintln!("hcbench: waiting for the workspace lock ({holder}) to record the train results");
        match crate::gate::record_train_results(root, &manifest, &done.summaries, wait) {
            Ok(path) => eprintln!("train results: {}", path.display()),
            Err(e) => eprintln!("warning: cannot record the train results for `hcbench gate`: {e}"),
        }
    }

    match args.format {
        Format::Table => {
            println!("{}", terminal::cell_table(&done.summaries));
            println!("{}", terminal::totals_line(&done.summaries));
            println!("run directory: {}", run_dir.display());
        }
        Format::Json => println!("{}", serde_json::to_string_pretty(&done.summaries).context("json")?),
    }
    if done.cancelled {
        return Ok(exit::INTERRUPTED);
    }
    let all_passed = done.summaries.iter().all(|s| s.outcome == Some(Outcome::Passed));
    Ok(if all_passed { exit::SUCCESS } else { exit::FAILED })
}
