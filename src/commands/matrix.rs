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
use crate::engine::{self, Budget, Keep};
use crate::events::{EngineEvent, EngineSink};
use crate::exit;
use crate::interrupt::Session;
use crate::replay::CellSummary;
use crate::report::{self, progress};
use crate::rundir::{Manifest, Plan, RunDir};
use crate::settings::{MatrixSettings, MatrixStart};
use crate::shard::Dealer;

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
    // Kept cells are not run again: their ids are all the run needs of them (and their cost,
    // for the budget), so their summaries are not held while the others run.
    let kept_count = kept.len();
    let already_spent: f64 = kept.iter().filter_map(CellSummary::cost_usd).sum();
    let kept_ids: BTreeSet<String> = kept.into_iter().map(|s| s.cell_id).collect();
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
    let case_ids = m.case_ids();
    let cells = engine::Cells::lazy(|| {
        let planned = engine::plan_variants(target, &bench, &case_ids, &profiles, &variants, m.epochs);
        in_this_run(m, planned).filter(|c| !kept_ids.contains(&c.cell_id))
    });
    if kept_count > 0 || !retried.is_empty() {
        progress.event(EngineEvent::CellsKept { count: kept_count, retried: retried.len() });
    }
    let budget = m.budget_usd.map(|limit_usd| Budget { limit_usd, already_spent });
    let session = Session::for_progress(&progress).context("cannot start the async runtime")?;
    // The report below is rebuilt from the traces: the run keeps no summary.
    let done = session.execute_run(&run, cells, s.jobs, progress, budget, Keep::Nothing)?;

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

/// The planned cells this run holds: all of them, or with `--shard` its part (in plan order),
/// chosen as the plan is read.
pub(crate) fn in_this_run<'a>(
    m: &Manifest,
    planned: impl Iterator<Item = CellPlan> + 'a,
) -> impl Iterator<Item = CellPlan> + 'a {
    let mut shard = m.shard.map(|s| (s.index, Dealer::new(s.count)));
    planned.filter(move |c| match &mut shard {
        None => true,
        Some((index, dealer)) => dealer.deal(c.profile.name(), &c.ablation) == *index,
    })
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::model::Profile;
    use crate::sandbox::Isolation;
    use crate::shard::Shard;

    /// The cells a shard runs, chosen as the lazy plan is read, are the manifest's cells of that
    /// shard (what `merge` checks coverage against), in the same order: two profiles, two
    /// epochs, every shard of three.
    #[test]
    fn a_shard_takes_from_the_lazy_plan_exactly_the_manifests_cells() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let bench = load_benchmark(root, "hc-bench").unwrap();
        let case_ids: Vec<String> = bench.cases.iter().take(5).map(|c| c.id.clone()).collect();
        let mut second = Profile::oracle();
        second.name = "second".into();
        let profiles = [Profile::oracle(), second];
        let dir = tempfile::tempdir().unwrap();
        let isolation = Isolation::unsandboxed(dir.path());
        let target = engine::Target { run_id: "r", run_dir: dir.path(), isolation: &isolation };
        let variants = [(String::new(), Arc::new(AgentSpec::default()))];
        for index in 1..=3 {
            let plan = Plan {
                command: "matrix",
                run_id: "r",
                profiles: profiles.iter().map(|p| p.name().to_string()).collect(),
                epochs: 2,
                jobs: 1,
                agent_spec: "",
                agent_dir: None,
                sandbox: isolation.sandbox.info(),
            };
            let mut manifest = Manifest::new(plan, root, &bench, &case_ids);
            manifest.shard = Some(Shard::new(index, 3).unwrap());
            let planned = engine::plan_variants(target, &bench, &case_ids, &profiles, &variants, 2);
            let ran: Vec<String> = in_this_run(&manifest, planned).map(|c| c.cell_id).collect();
            let expected: Vec<String> = manifest.cell_ids().into_iter().map(|c| c.cell_id).collect();
            assert_eq!(ran, expected, "shard {index}/3");
            assert!(ran.len() >= 6, "shard {index}/3 has its share of 20 cells: {ran:?}");
        }
    }
}
