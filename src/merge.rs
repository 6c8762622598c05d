//! `hcbench merge`: the shard runs of one plan ([`crate::shard`]) joined into one run directory
//! that reads as if the plan had run on one machine.
//!
//! Nothing is trusted because it is in a folder: every shard must be a shard (`--shard` in its
//! manifest), of the same plan (the same [`Manifest::plan_digest`]: benchmark digest, hcbench
//! version, cases, profiles, epochs, spec), split the same way (one N), each part given once.
//! The cells each shard finished are the ones in its `results.jsonl` (a resume rewrites it to
//! the cells it keeps) that did not end cancelled; a planned cell that no shard finished is missing, and a cell directory
//! in a shard that is not that shard's part is a duplicate. Either refuses the merge, naming
//! the cell, unless `--allow-partial` asks to merge what exists: then the missing cells are the
//! merged run's cells without a verdict, and its reports say so as any incomplete run's do.
//!
//! The merged directory keeps every trace as the shard wrote it (each event still names the
//! shard's run id; the merged manifest lists the shards, and [`Manifest::trace_run_ids`] says
//! which run each cell's trace must belong to). Each trace's stored frame is copied into the
//! merged run's own pack (src/trace/pack.rs), from the shard's pack or its per-cell
//! `trace.jsonl.zst`: finished traces are immutable, so no frame is decoded. A plain trace (a
//! shard written before compression) is hard-linked into the cell's folder, as before. What else a cell's folder holds (artifacts,
//! delegations) is hard-linked where the file system allows it and copied otherwise. The
//! merged run's `workspaces` is a folder with one link per shard run, named by its run id, to
//! that shard's workspaces. The shard directories are only read.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::replay::CellSummary;
use crate::rundir::{self, Manifest, MergedShard, RunDir, RunDirError};
use crate::trace::event::Outcome;

#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("give at least one shard run directory: `hcbench merge OUT SHARD_DIR...`")]
    NoShards,
    #[error("{path}: {source}")]
    Shard { path: PathBuf, source: RunDirError },
    #[error(
        "{path} is not a shard: its manifest has no `shard` (it ran without --shard K/N); merge only the runs of one sharded plan"
    )]
    NotAShard { path: PathBuf },
    #[error(
        "{path} is of another plan than {first}: `{field}` is {theirs} there and {ours} in {first}; merge only shards of one plan (same benchmark, version, cases, profiles, epochs and agent spec)"
    )]
    OtherPlan { path: PathBuf, first: PathBuf, field: &'static str, theirs: String, ours: String },
    #[error("shard {index}/{count} is given twice: {a} and {b}; give each part once")]
    TwiceGiven { index: u32, count: u32, a: PathBuf, b: PathBuf },
    #[error(
        "the shards do not cover the plan: {missing_shards}{cells} of {planned} planned cell(s) have no result ({first}{more}); finish them (`hcbench matrix --resume SHARD_DIR`) or merge what exists with --allow-partial"
    )]
    Missing { missing_shards: String, cells: usize, planned: usize, first: String, more: String },
    #[error(
        "cell {cell} is in {path}, but the plan gives it to shard {owner}/{count}; a cell must come from its own shard only (was a directory copied between shards?)"
    )]
    Duplicate { cell: String, path: PathBuf, owner: u32, count: u32 },
    #[error(transparent)]
    Out(RunDirError),
    #[error("cannot write the merged run {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

impl MergeError {
    /// True when the user can fix it (every error but an I/O failure writing the merged run).
    pub fn is_usage(&self) -> bool {
        match self {
            MergeError::Io { .. } => false,
            MergeError::Shard { source, .. } | MergeError::Out(source) => source.is_usage(),
            _ => true,
        }
    }
}

/// What a merge made.
#[derive(Debug)]
pub struct Merged {
    pub run: RunDir,
    /// Cells of the plan.
    pub planned: usize,
    /// Cells with a result, from all shards.
    pub merged: usize,
    /// Shard indexes no directory was given for (only with `--allow-partial`).
    pub missing_shards: Vec<u32>,
}

/// One shard run as read for the merge.
struct ShardRun {
    path: PathBuf,
    manifest: Manifest,
    /// Its finished cells, by cell id.
    finished: BTreeMap<String, CellSummary>,
}

/// Merges the shard runs in `shards` into a new run directory `out` (which must not hold a
/// run). See the module doc for what is checked.
pub fn merge(out: &Path, shards: &[PathBuf], allow_partial: bool) -> Result<Merged, MergeError> {
    if shards.is_empty() {
        return Err(MergeError::NoShards);
    }
    let runs: Vec<ShardRun> = shards.iter().map(|p| read_shard(p)).collect::<Result<_, _>>()?;
    let first = &runs[0];
    let count = first.manifest.shard.expect("read_shard checked").count;
    for run in &runs[1..] {
        same_plan(first, run)?;
    }
    let mut by_index: BTreeMap<u32, &ShardRun> = BTreeMap::new();
    for run in &runs {
        let index = run.manifest.shard.expect("read_shard checked").index;
        if let Some(other) = by_index.insert(index, run) {
            return Err(MergeError::TwiceGiven { index, count, a: other.path.clone(), b: run.path.clone() });
        }
    }
    let missing_shards: Vec<u32> = (1..=count).filter(|i| !by_index.contains_key(i)).collect();

    let plan = first.manifest.plan_cells();
    let owners = crate::shard::assign(&plan, count);
    // A cell directory in a shard that does not own it would be a second copy of the cell.
    let owner_of: std::collections::HashMap<&str, u32> =
        plan.iter().zip(&owners).map(|(c, o)| (c.cell_id.as_str(), *o)).collect();
    for run in &runs {
        let index = run.manifest.shard.expect("read_shard checked").index;
        let traces = crate::trace::stored::RunTraces::scan(&run.path).map(|t| t.cells()).unwrap_or_default();
        for (cell, _) in traces {
            if let Some(&owner) = owner_of.get(cell.as_str())
                && owner != index
            {
                return Err(MergeError::Duplicate { cell, path: run.path.clone(), owner, count });
            }
        }
    }
    let found: Vec<Option<&CellSummary>> = plan
        .iter()
        .zip(&owners)
        .map(|(cell, owner)| by_index.get(owner).and_then(|run| run.finished.get(&cell.cell_id)))
        .collect();
    let missing: Vec<&str> =
        plan.iter().zip(&found).filter(|(_, f)| f.is_none()).map(|(c, _)| c.cell_id.as_str()).collect();
    if !missing.is_empty() && !allow_partial {
        let missing_text = if missing_shards.is_empty() {
            String::new()
        } else {
            let list: Vec<String> = missing_shards.iter().map(|i| format!("{i}/{count}")).collect();
            format!("shard(s) {} not given; ", list.join(", "))
        };
        return Err(MergeError::Missing {
            missing_shards: missing_text,
            cells: missing.len(),
            planned: plan.len(),
            first: missing[0].to_string(),
            more: if missing.len() > 1 { format!(" and {} more", missing.len() - 1) } else { String::new() },
        });
    }

    let manifest = merged_manifest(&runs, &by_index);
    let run = RunDir::create(out, manifest).map_err(MergeError::Out)?;
    let io_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| MergeError::Io { path: path.clone(), source }
    };
    let to_copy: Vec<(&str, &ShardRun)> = plan
        .iter()
        .zip(&owners)
        .zip(&found)
        .filter(|(_, f)| f.is_some())
        .map(|((cell, owner), _)| (cell.cell_id.as_str(), by_index[owner]))
        .collect();
    copy_traces(run.path(), &to_copy)?;
    // What else cells' folders hold is linked in parallel: each is its own folder.
    to_copy.par_iter().try_for_each(|(cell, shard)| {
        let from = shard.path.join("cells").join(cell);
        let to = run.cell_dir(cell);
        if from.is_dir() { link_tree(&from, &to, true).map_err(io_err(&to)) } else { Ok(()) }
    })?;
    link_workspaces(run.path(), &by_index).map_err(io_err(&run.path().join(crate::workspace::RUN_WORKSPACES)))?;
    let mut lines = Vec::new();
    for summary in found.iter().flatten() {
        lines.extend(serde_json::to_vec(summary).map_err(|e| io_err(run.path())(io::Error::other(e)))?);
        lines.push(b'\n');
    }
    let results = run.path().join(rundir::RESULTS);
    crate::util::write_atomic(&results, &lines).map_err(io_err(&results))?;
    let merged = found.iter().flatten().count();
    Ok(Merged { run, planned: plan.len(), merged, missing_shards })
}

fn read_shard(path: &Path) -> Result<ShardRun, MergeError> {
    let shard_err = |source| MergeError::Shard { path: path.to_path_buf(), source };
    let manifest = Manifest::read(path).map_err(shard_err)?;
    if manifest.shard.is_none() {
        return Err(MergeError::NotAShard { path: path.to_path_buf() });
    }
    let finished = rundir::read_results(path)
        .map_err(shard_err)?
        .into_iter()
        // A cancelled cell is one `--resume` runs again, so it is not a result yet.
        .filter(|s| s.run_id == manifest.run_id && s.outcome.is_some_and(|o| o != Outcome::Cancelled))
        .map(|s| (s.cell_id.clone(), s))
        .collect();
    Ok(ShardRun { path: path.to_path_buf(), manifest, finished })
}

/// Refuses `run` unless it is a part of `first`'s plan split the same way, naming the first
/// field that differs (a digest alone would not tell the user what to fix).
fn same_plan(first: &ShardRun, run: &ShardRun) -> Result<(), MergeError> {
    let (a, b) = (&first.manifest, &run.manifest);
    let show = |v: serde_json::Value| crate::util::truncate_str(&v.to_string(), 120).to_string();
    let fields: [(&'static str, serde_json::Value, serde_json::Value); 9] = [
        ("hcbench_version", a.hcbench_version.clone().into(), b.hcbench_version.clone().into()),
        ("benchmark", a.benchmark.clone().into(), b.benchmark.clone().into()),
        ("benchmark_digest", serde_json::json!(a.benchmark_digest), serde_json::json!(b.benchmark_digest)),
        ("shard count", a.shard.map(|s| s.count).into(), b.shard.map(|s| s.count).into()),
        ("command", a.command.clone().into(), b.command.clone().into()),
        ("profiles", serde_json::json!(a.profiles), serde_json::json!(b.profiles)),
        ("cases", serde_json::json!(a.case_ids()), serde_json::json!(b.case_ids())),
        ("epochs", a.epochs.into(), b.epochs.into()),
        ("agent_spec", a.agent_spec.clone().into(), b.agent_spec.clone().into()),
    ];
    let differs = fields.into_iter().find(|(_, x, y)| x != y).map(|(f, x, y)| (f, show(x), show(y)));
    let differs = differs
        .or_else(|| (a.plan_digest() != b.plan_digest()).then(|| ("plan digest", a.plan_digest(), b.plan_digest())));
    match differs {
        None => Ok(()),
        Some((field, ours, theirs)) => {
            Err(MergeError::OtherPlan { path: run.path.clone(), first: first.path.clone(), field, theirs, ours })
        }
    }
}

/// The manifest of the merged run: the plan as the shards have it, under a new run id, with no
/// shard, started when the first shard started, and the shards listed.
fn merged_manifest(runs: &[ShardRun], by_index: &BTreeMap<u32, &ShardRun>) -> Manifest {
    let mut m = runs[0].manifest.clone();
    m.run_id = rundir::new_run_id();
    m.shard = None;
    m.plan_digest = Some(m.plan_digest());
    m.started_at = runs.iter().map(|r| r.manifest.started_at.clone()).min().unwrap_or_default();
    m.jobs = runs.iter().map(|r| r.manifest.jobs).max().unwrap_or(m.jobs);
    // Each shard had its own share of the budget (docs/scale-out.md): the run had their sum.
    let budgets: Vec<f64> = runs.iter().filter_map(|r| r.manifest.budget_usd).collect();
    m.budget_usd = (budgets.len() == runs.len()).then(|| budgets.iter().sum());
    let commits: BTreeSet<&Option<String>> = runs.iter().map(|r| &r.manifest.git_commit).collect();
    if commits.len() > 1 {
        m.git_commit = None;
    }
    m.git_dirty = runs.iter().filter_map(|r| r.manifest.git_dirty).reduce(|a, b| a || b);
    m.benchmark_dirty = runs.iter().filter_map(|r| r.manifest.benchmark_dirty).reduce(|a, b| a || b);
    m.merged_from = by_index
        .values()
        .map(|r| MergedShard {
            run_id: r.manifest.run_id.clone(),
            shard: r.manifest.shard.expect("read_shard checked"),
            started_at: r.manifest.started_at.clone(),
        })
        .collect();
    m
}

/// Cells whose frames are read at once (in parallel) before being appended in plan order.
const COPY_CHUNK: usize = 512;

/// Appends each cell's stored trace frame, from its shard, to the merged run's pack, in plan
/// order; frames are read a chunk at a time in parallel. A plain trace (a shard from before
/// compressed traces) is hard-linked into the cell's folder instead, as merges always did:
/// compressing it here would cost a merge of 10,000 such cells several seconds.
fn copy_traces(out: &Path, cells: &[(&str, &ShardRun)]) -> Result<(), MergeError> {
    let pack_err = |source| MergeError::Io { path: out.join(crate::trace::pack::PACK), source };
    let mut writer = crate::trace::pack::PackWriter::open(out).map_err(pack_err)?;
    for chunk in cells.chunks(COPY_CHUNK) {
        let frames: Vec<Option<Vec<u8>>> = chunk
            .par_iter()
            .map(|(cell, shard)| {
                let trace = shard.path.join("cells").join(cell).join(crate::trace::stored::TRACE);
                let copied = if trace.is_file() {
                    let to = out.join("cells").join(cell);
                    std::fs::create_dir_all(&to)
                        .and_then(|()| link_or_copy(&trace, &to.join(crate::trace::stored::TRACE)))
                        .map(|()| None)
                } else {
                    crate::trace::stored::stored_frame(&trace).map(Some)
                };
                copied.map_err(|source| MergeError::Io { path: trace.clone(), source })
            })
            .collect::<Result<_, _>>()?;
        for ((cell, _), frame) in chunk.iter().zip(&frames) {
            if let Some(frame) = frame {
                writer.append(cell, frame).map_err(pack_err)?;
            }
        }
    }
    writer.sync().map_err(pack_err)
}

/// A hard link of `src` at `dst`, or a copy across file systems.
fn link_or_copy(src: &Path, dst: &Path) -> io::Result<()> {
    if std::fs::hard_link(src, dst).is_err() {
        std::fs::copy(src, dst)?;
    }
    Ok(())
}

/// The merged run's `workspaces`: a folder with one link per shard, named by the shard's run
/// id, to where that shard's `workspaces` link leads (shards without one are left out).
fn link_workspaces(out: &Path, by_index: &BTreeMap<u32, &ShardRun>) -> io::Result<()> {
    let folder = out.join(crate::workspace::RUN_WORKSPACES);
    for run in by_index.values() {
        let Ok(target) = run.path.join(crate::workspace::RUN_WORKSPACES).canonicalize() else { continue };
        std::fs::create_dir_all(&folder)?;
        std::os::unix::fs::symlink(target, folder.join(&run.manifest.run_id))?;
    }
    Ok(())
}

/// Recreates the tree `from` at `to`: directories made, files hard-linked (copied across file
/// systems), symlinks recreated leading where they led. At the top of a cell's folder
/// (`cell_top`) the trace is left out (it is in the merged pack), and so is a `workspace` link
/// through the shard's `workspaces` (the merged run's `workspaces` folder leads there); the
/// folder is made only when something is left.
fn link_tree(from: &Path, to: &Path, cell_top: bool) -> io::Result<()> {
    if !cell_top {
        std::fs::create_dir_all(to)?;
    }
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type()?;
        if cell_top {
            let name = entry.file_name();
            let trace = crate::trace::stored::TRACE;
            if name == trace || name.to_string_lossy() == format!("{trace}{}", crate::trace::stored::COMPRESSED_SUFFIX)
            {
                continue;
            }
            if name == "workspace" && kind.is_symlink() && std::fs::read_link(&src)?.is_relative() {
                continue;
            }
        }
        std::fs::create_dir_all(to)?;
        if kind.is_symlink() {
            // A relative link would lead nowhere from the merged run: it gets the place it
            // leads to from the shard.
            let mut target = std::fs::read_link(&src)?;
            if target.is_relative() {
                let joined = from.join(&target);
                target = joined.canonicalize().unwrap_or(joined);
            }
            std::os::unix::fs::symlink(target, &dst)?;
        } else if kind.is_dir() {
            link_tree(&src, &dst, false)?;
        } else {
            link_or_copy(&src, &dst)?;
        }
    }
    Ok(())
}
