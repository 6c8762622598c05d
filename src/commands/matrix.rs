//! `hcbench matrix`: cases x profiles x epochs in parallel, then every report.
//!
//! Exit 0 when every planned cell ran and the reports were written, whatever the pass rates
//! (comparing profiles is the point; failing cells are data). 130 when interrupted.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;

use super::{CommandError, exec};
use crate::agent::spec::AgentSpec;
use crate::bench::load_benchmark;
use crate::cli::MatrixArgs;
use crate::engine::{self, EngineEvent, Manifest};
use crate::model::Profile;
use crate::replay::CellSummary;
use crate::report::{self, progress};
use crate::{exit, settings};

pub fn matrix(root: &Path, spec: &Arc<AgentSpec>, args: MatrixArgs) -> Result<i32, CommandError> {
    let jobs = settings::jobs(args.jobs);
    let sink: Arc<dyn engine::EngineSink> = Arc::from(progress::auto());

    let (run_dir, manifest, bench, profiles, kept, spec) = match &args.resume {
        Some(dir) => {
            let manifest = Manifest::read(dir)?;
            // A resumed run must finish with the spec it started with, or its cells would mix two agents.
            let spec = match &manifest.agent_dir {
                Some(d) => Arc::new(AgentSpec::load(d).map_err(|e| CommandError::Usage(e.to_string()))?),
                None => Arc::new(AgentSpec::default()),
            };
            if !manifest.agent_spec.is_empty() && spec.digest != manifest.agent_spec {
                return Err(CommandError::Usage(format!(
                    "the agent spec changed since run {} started (digest {} now, {} then); restore it to resume, or start a new run",
                    manifest.run_id,
                    &spec.digest[..12],
                    &manifest.agent_spec[..manifest.agent_spec.len().min(12)]
                )));
            }
            let bench = load_benchmark(root, &manifest.benchmark)?;
            let profiles = resolve_all(root, &manifest.profiles, args.models.as_deref())?;
            let run_dir = dir.canonicalize().with_context(|| format!("cannot open {}", dir.display()))?;
            // Keep cells whose trace ended with a verdict; everything else runs again.
            let mut kept: Vec<CellSummary> = Vec::new();
            for (cell_id, _, _) in manifest.cell_ids() {
                let cell_dir = run_dir.join("cells").join(&cell_id);
                match engine::cell_is_complete(&cell_dir) {
                    Some(s) => kept.push(s),
                    None if cell_dir.exists() => std::fs::remove_dir_all(&cell_dir)
                        .with_context(|| format!("cannot clear the unfinished cell {}", cell_dir.display()))?,
                    None => {}
                }
            }
            // results.jsonl is rewritten to hold only the kept cells; new ones are appended.
            let mut lines = Vec::new();
            for s in &kept {
                lines.extend(serde_json::to_vec(s).context("json")?);
                lines.push(b'\n');
            }
            crate::util::write_atomic(&run_dir.join("results.jsonl"), &lines)
                .context("cannot rewrite results.jsonl")?;
            (run_dir, manifest, bench, profiles, kept, spec)
        }
        None => {
            let selected = settings::select(root, &args.selection)?;
            let profiles = resolve_all(root, &args.profiles, args.models.as_deref())?;
            let run_id = engine::new_run_id();
            let run_dir = settings::run_dir(root, args.out.as_deref(), "runs", &run_id);
            let run_dir = engine::prepare_run_dir(&run_dir)
                .map_err(|e| CommandError::Usage(format!("cannot use run directory {}: {e}", run_dir.display())))?;
            if let Some(b) = args.budget_usd.filter(|b| !(*b > 0.0 && b.is_finite())) {
                return Err(CommandError::Usage(format!("--budget-usd {b}: give a positive number of US dollars")));
            }
            let mut manifest = Manifest::new(
                "matrix",
                &run_id,
                root,
                &selected.benchmark,
                &selected.case_ids,
                &profiles,
                args.epochs,
                jobs,
                spec,
            );
            manifest.budget_usd = args.budget_usd;
            manifest.write(&run_dir).with_context(|| format!("cannot write the manifest in {}", run_dir.display()))?;
            (run_dir, manifest, selected.benchmark, profiles, Vec::new(), spec.clone())
        }
    };

    let case_ids: Vec<String> = manifest.cases.iter().map(|c| c.id.clone()).collect();
    let kept_ids: std::collections::BTreeSet<&str> = kept.iter().map(|s| s.cell_id.as_str()).collect();
    let cells: Vec<_> = engine::plan(&manifest.run_id, &run_dir, &bench, &case_ids, &profiles, manifest.epochs, &spec)
        .into_iter()
        .filter(|c| !kept_ids.contains(c.cell_id.as_str()))
        .collect();
    if !kept.is_empty() {
        sink.event(EngineEvent::CellsKept { count: kept.len() });
    }
    let already_spent: f64 = kept.iter().filter_map(CellSummary::cost_usd).sum();
    let done =
        exec::execute_with_budget(&manifest.run_id, &run_dir, cells, jobs, sink, manifest.budget_usd, already_spent)?;

    let report = report::model::build(&run_dir, true)?;
    let written = report::write_all(&run_dir, &report)?;
    super::report::print(&report, args.format)?;
    for p in written {
        eprintln!("wrote {}", p.display());
    }
    Ok(if done.cancelled { exit::INTERRUPTED } else { exit::SUCCESS })
}

fn resolve_all(root: &Path, names: &[String], models: Option<&Path>) -> Result<Vec<Profile>, CommandError> {
    let mut out: Vec<Profile> = Vec::new();
    for name in names {
        let name = name.trim();
        if name.is_empty() {
            continue;
        }
        let p = settings::profile(root, name, None, models)?;
        if out.iter().any(|q| q.name() == p.name()) {
            return Err(CommandError::Usage(format!("profile `{}` is listed twice in --profiles", p.name())));
        }
        out.push(p);
    }
    if out.is_empty() {
        return Err(CommandError::Usage("--profiles names no profile; e.g. --profiles oracle,nop".into()));
    }
    Ok(out)
}
