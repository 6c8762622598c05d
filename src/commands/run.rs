//! `hcbench run`: one profile over the selected cases, a table of outcomes, and the exit code
//! of the exit policy (src/report/exit_policy.rs): without `--fail-under`, 0 only when every
//! case passed.

use std::sync::Arc;

use anyhow::Context as _;

use super::CommandError;
use crate::cli::Format;
use crate::events::EngineSink;
use crate::interrupt::Session;
use crate::report::{self, progress, terminal};
use crate::rundir::{Manifest, Plan, RunDir};
use crate::settings::{RunSettings, Settings};
use crate::{engine, exit};

pub fn run(settings: &Settings, s: RunSettings, human_test_split: bool) -> Result<i32, CommandError> {
    let (bench, case_ids) = (&s.selected.benchmark, &s.selected.case_ids);
    super::test_split::guard(&settings.root, bench, case_ids, human_test_split, "run")?;
    let plan = Plan {
        command: "run",
        run_id: &s.run_id,
        profiles: vec![s.profile.name().to_string()],
        epochs: 1,
        jobs: s.jobs,
        agent_spec: &s.spec.digest,
        agent_dir: s.spec.dir.clone(),
        sandbox: s.isolation.sandbox.info(),
    };
    let mut manifest = Manifest::new(plan, &settings.root, bench, case_ids);
    manifest.min_coverage = Some(s.thresholds.min_coverage);
    manifest.fail_under = s.thresholds.fail_under;
    manifest.shard = s.shard;
    manifest.plan_digest = Some(manifest.plan_digest());
    let run = RunDir::create(&s.run_dir, manifest)?;
    let target = engine::Target { run_id: &s.run_id, run_dir: run.path(), isolation: &s.isolation };
    let plain = [(String::new(), s.spec.clone())];
    let cells = engine::Cells::lazy(|| {
        let planned = engine::plan_variants(target, bench, case_ids, std::slice::from_ref(&s.profile), &plain, 1);
        super::matrix::in_this_run(run.manifest(), planned)
    });
    let progress: Arc<dyn EngineSink> = Arc::from(progress::auto());
    let session = Session::for_progress(&progress).context("cannot start the async runtime")?;
    // Every cell's summary is printed below (and recorded for the gate's promotion).
    let done = session.execute_run(&run, cells, s.jobs, progress, None, engine::Keep::Summaries)?;
    let report = report::model::build(run.path(), true)?;
    report::write_all(run.path(), &report)?;
    if s.records_train_results {
        // The latest train results feed the gate's Step 3 (promotion); see src/gate/mod.rs.
        let wait =
            |holder: &str| eprintln!("hcbench: waiting for the workspace lock ({holder}) to record the train results");
        match crate::gate::record_train_results(&settings.root, run.manifest(), &done.summaries, &s.profile, wait) {
            Ok(path) => eprintln!("train results: {}", path.display()),
            Err(e) => eprintln!("warning: cannot record the train results for `hcbench gate`: {e}"),
        }
    }

    let width = s.width;
    let (banner, verdict) = (terminal::banner_lines(&report, width), terminal::verdict_lines(&report.verdict, width));
    match s.format {
        Format::Table => {
            for line in &banner {
                println!("{line}");
            }
            for line in terminal::cell_lines(&done.summaries, width) {
                println!("{line}");
            }
            for line in &verdict {
                println!("{line}");
            }
            println!("run directory: {}", run.path().display());
        }
        Format::Json => {
            println!("{}", serde_json::to_string_pretty(&done.summaries).context("json")?);
            for line in banner.iter().chain(&verdict) {
                eprintln!("{line}");
            }
        }
    }
    // A Ctrl-C between cells cancels none, so the live flag decides 130 too.
    Ok(if done.cancelled { exit::INTERRUPTED } else { report.verdict.exit_code })
}
