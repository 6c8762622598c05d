//! `hcbench matrix`: cases x profiles x epochs in parallel, then every report. `hcbench ablate`
//! is the same run with ablations of the agent spec as a second axis (src/commands/ablate.rs).
//!
//! The exit code is the report's verdict under the exit policy (src/report/exit_policy.rs):
//! 0 when coverage, the control arm and any `--fail-under` floor hold, whatever the pass rates
//! otherwise (comparing profiles is the point; failing cells are data); 130 when interrupted.

use std::collections::BTreeSet;
use std::sync::Arc;

use anyhow::Context as _;

use super::CommandError;
use crate::agent::CellPlan;
use crate::agent::spec::AgentSpec;
use crate::bench::load_benchmark;
use crate::engine::{self, Budget};
use crate::events::{EngineEvent, EngineSink};
use crate::exit;
use crate::interrupt::Session;
use crate::replay::CellSummary;
use crate::report::{self, progress};
use crate::rundir::{Manifest, Plan, RunDir};
use crate::settings::{MatrixSettings, MatrixStart};

pub fn matrix(s: MatrixSettings, human_test_split: bool) -> Result<i32, CommandError> {
    let progress: Arc<dyn EngineSink> = Arc::from(progress::auto());
    let (run, bench, profiles, spec, kept, retried) = match s.start {
        MatrixStart::New {
            selected,
            profiles,
            spec,
            epochs,
            run_id,
            run_dir,
            budget_usd,
            thresholds,
            ablations,
            not_run,
            shard,
        } => {
            let command = if ablations.is_empty() { "matrix" } else { "ablate" };
            super::test_split::guard(&s.root, &selected.benchmark, &selected.case_ids, human_test_split, command)?;
            let plan = Plan {
                command,
                run_id: &run_id,
                profiles: profiles.iter().map(|p| p.name().to_string()).collect(),
                epochs,
                jobs: s.jobs,
                agent_spec: &spec.digest,
                agent_dir: spec.dir.clone(),
                sandbox: s.isolation.sandbox.info(),
            };
            let mut manifest = Manifest::new(plan, &s.root, &selected.benchmark, &selected.case_ids);
            manifest.budget_usd = budget_usd;
            manifest.min_coverage = Some(thresholds.min_coverage);
            manifest.fail_under = thresholds.fail_under;
            manifest.ablations = ablations;
            // Said before any cell runs, so the run's header is not the first a user hears of it.
            for n in &not_run {
                eprintln!("hcbench: not running profile `{}` (--skip-unavailable): {}", n.profile, n.reason);
            }
            manifest.not_run = not_run;
            manifest.shard = shard;
            manifest.plan_digest = Some(manifest.plan_digest());
            (RunDir::create(&run_dir, manifest)?, selected.benchmark, profiles, spec, Vec::new(), Vec::new())
        }
        MatrixStart::Resume { run_dir, profiles: registry, retry_errors } => {
            let (run, resumed) = RunDir::resume(&run_dir, retry_errors)?;
            let m = run.manifest();
            // A resumed run must finish with the spec it started with, or its cells would mix two agents.
            let spec = Arc::new(match &m.agent_dir {
                Some(d) => AgentSpec::load(d).map_err(|e| CommandError::Usage(e.to_string()))?,
                None => AgentSpec::default(),
            });
            if !m.agent_spec.is_empty() && spec.digest != m.agent_spec {
                return Err(CommandError::Usage(format!(
                    "the agent spec changed since run {} started (digest {} now, {} then); restore it to resume, or start a new run",
                    m.run_id,
                    &spec.digest[..12],
                    &m.agent_spec[..m.agent_spec.len().min(12)]
                )));
            }
            let bench = load_benchmark(&s.root, &m.benchmark)?;
            super::test_split::guard(&s.root, &bench, &m.case_ids(), human_test_split, "matrix --resume")?;
            let profiles = registry
                .for_shard(m.shard)
                .resolve_list(&m.profiles)
                .map_err(|e| CommandError::Usage(e.to_string()))?;
            (run, bench, profiles, spec, resumed.kept, resumed.retried)
        }
    };

    let m = run.manifest();
    let kept_ids: BTreeSet<&str> = kept.iter().map(|s| s.cell_id.as_str()).collect();
    // One spec per ablation (`hcbench ablate`), or the spec alone (no ablation in the cell ids).
    let variants = if m.ablations.is_empty() {
        vec![(String::new(), spec)]
    } else {
        let mut v = Vec::new();
        for a in &m.ablations {
            let applied = spec.with_ablation(a).map_err(|e| CommandError::Usage(format!("run {}: {e}", m.run_id)))?;
            v.push((a.clone(), Arc::new(applied)));
        }
        v
    };
    let target = engine::Target { run_id: &m.run_id, run_dir: run.path(), isolation: &s.isolation };
    let planned = engine::plan_variants(target, &bench, &m.case_ids(), &profiles, &variants, m.epochs);
    let cells: Vec<_> =
        in_this_run(m, planned).into_iter().filter(|c| !kept_ids.contains(c.cell_id.as_str())).collect();
    if !kept.is_empty() || !retried.is_empty() {
        progress.event(EngineEvent::CellsKept { count: kept.len(), retried: retried.len() });
    }
    let budget = m
        .budget_usd
        .map(|limit_usd| Budget { limit_usd, already_spent: kept.iter().filter_map(CellSummary::cost_usd).sum() });
    let session = Session::for_progress(&progress).context("cannot start the async runtime")?;
    let done = session.execute_run(&run, cells, s.jobs, progress, budget)?;

    let report = report::model::build(run.path(), true)?;
    let written = report::write_all(run.path(), &report)?;
    super::report::print(&report, s.format, s.width)?;
    for p in written {
        eprintln!("wrote {}", p.display());
    }
    if !retried.is_empty() {
        eprintln!("{}", retried_line(&retried, &report.cells));
    }
    // The history gets the run once it has its reports; an interrupted run is appended too
    // (its unfinished cells as `incomplete`), and a resumed one replaces its own file. A shard
    // is a part of a run: `hcbench merge` appends the whole run once.
    if let Some(shard) = run.manifest().shard {
        eprintln!("shard {shard}: not added to the results history; `hcbench merge` adds the merged run");
    } else if let Some(dir) = &s.history {
        match crate::history::append_run(dir, run.manifest(), &report.cells) {
            Ok(file) => eprintln!("appended {} cell(s) to {}", report.cells.len(), file.display()),
            // The run and its reports are written; a history that cannot be written is a
            // warning, not a failed run (`hcbench history import` can add it later).
            Err(e) => {
                eprintln!("warning: {e}; add the run later with `hcbench history import {}`", run.path().display())
            }
        }
    }
    // A Ctrl-C between cells cancels none, so the live flag decides 130 too.
    Ok(if done.cancelled { exit::INTERRUPTED } else { report.verdict.exit_code })
}

/// The planned cells this run holds: all of them, or with `--shard` its part (in plan order).
pub(crate) fn in_this_run(m: &Manifest, planned: Vec<CellPlan>) -> Vec<CellPlan> {
    if m.shard.is_none() {
        return planned;
    }
    let mine: BTreeSet<String> = m.cell_ids().into_iter().map(|c| c.cell_id).collect();
    planned.into_iter().filter(|c| mine.contains(&c.cell_id)).collect()
}

/// The summary of `--retry-errors`: how many cells ran again, what they had ended in, and what
/// they ended in now.
fn retried_line(before: &[CellSummary], now: &[CellSummary]) -> String {
    let count = |labels: Vec<&str>| {
        let mut n: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
        for l in labels {
            *n.entry(l).or_default() += 1;
        }
        n.iter().map(|(l, k)| format!("{k} {l}")).collect::<Vec<_>>().join(", ")
    };
    let ids: BTreeSet<&str> = before.iter().map(|c| c.cell_id.as_str()).collect();
    let then = count(before.iter().map(CellSummary::outcome_label).collect());
    let after =
        count(now.iter().filter(|c| ids.contains(c.cell_id.as_str())).map(CellSummary::outcome_label).collect());
    format!("retried {} cell(s) that had ended in an infrastructure error ({then}): now {after}", before.len())
}
