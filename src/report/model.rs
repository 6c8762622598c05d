//! The report model: everything every exporter needs, built from a run directory's traces.
//!
//! Reports are rendered only from this model, and the model only from traces (plus the
//! manifest, which says which cells were planned). So `hcbench report RUN_DIR` re-renders
//! byte-identical reports without running anything. A cell whose trace is missing or corrupt
//! stays in the report as its own row (incomplete or harness_error) instead of failing it.

pub use super::exit_policy::RunStatus;
use crate::sandbox::SandboxInfo;
use std::path::Path;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::exit_policy::{self, Judgement, Thresholds};
use crate::aggregate::context::AblationReport;
use crate::aggregate::{self, Comparison, GroupStats, Power};
use crate::replay::{CellSummary, Names, SUMMARY_SCHEMA_VERSION};
use crate::rundir::{Manifest, PlannedCell, RunDirError};
use crate::trace::event::{EventBody, Outcome};
use crate::trace::{Event, read_trace};

/// 2: intervals carry their method (`{lo, hi, method}`), comparisons carry the paired test
/// (p-value, Holm-adjusted p, three-state verdict, dropped cases), `split_stats` and `power`.
/// Added within 2 (optional, so no bump): `ablation`, an ablate run's context tables and
/// effects against `full`.
pub const REPORT_SCHEMA_VERSION: u32 = 2;

/// Largest text kept per timeline entry; the full text is in the trace and artifacts.
const DETAIL_LIMIT: usize = 4000;
/// Most timeline entries kept per cell.
const TIMELINE_LIMIT: usize = 400;

/// What every report of a run made with `--sandbox none` says before its numbers.
pub const UNSANDBOXED: &str = "This run's commands ran without a sandbox (--sandbox none): nothing kept them off the network, the host's files or hcbench's secrets, so its verdicts carry no protection against escapes or forged results (docs/security.md).";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MatrixReport {
    pub schema_version: u32,
    pub run_id: String,
    pub command: String,
    pub benchmark: String,
    pub profiles: Vec<String>,
    pub epochs: u32,
    pub started_at: String,
    /// Whether every planned cell ended with a verdict; see [`RunStatus`].
    pub status: RunStatus,
    /// For a run that is not complete: what is missing and how to finish it, one paragraph
    /// that every report shows first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub banner: Option<String>,
    /// The sandbox the cells ran in, from the manifest; None for runs from before it was
    /// recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxInfo>,
    /// For a run that is not complete: the command that finishes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_command: Option<String>,
    /// The exit code the run earns under the exit policy, and why (src/report/exit_policy.rs).
    pub verdict: Judgement,
    /// Every planned cell, in plan order.
    pub cells: Vec<CellSummary>,
    pub profile_stats: Vec<GroupStats>,
    pub category_stats: Vec<GroupStats>,
    /// Per profile x split (train, test, ...), the same numbers as per category; empty when
    /// the cases have no split.
    pub split_stats: Vec<GroupStats>,
    /// Every pair of profiles, compared on the cases both measured.
    pub comparisons: Vec<Comparison>,
    /// The smallest difference between profiles this run could have detected.
    pub power: Power,
    /// An ablate run's context tables and each ablation's effect against `full`; absent from
    /// every other command's report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ablation: Option<AblationReport>,
    /// Cells that ended without a valid verdict, with their class and reason.
    pub failing: Vec<FailingCell>,
    /// Traces that could not be read, and other things a reader must know.
    pub notes: Vec<String>,
    /// Requested profiles set aside by `--skip-unavailable`, with why: they have no cells and
    /// count in no rate, coverage or verdict, but every report names them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_run: Vec<crate::rundir::NotRun>,
    /// Per-cell timelines (same order as `cells`), for the HTML report.
    #[serde(skip)]
    pub timelines: Vec<Timeline>,
}

impl MatrixReport {
    /// The per-split rows that Markdown and HTML show: all of them when the run's cases span
    /// more than one split, none otherwise (one split's table would repeat the summary).
    /// `report.json` keeps `split_stats` whole either way.
    pub fn split_breakdown(&self) -> &[GroupStats] {
        let splits: std::collections::BTreeSet<Option<&str>> =
            self.split_stats.iter().map(|s| s.split.as_deref()).collect();
        if splits.len() > 1 { &self.split_stats } else { &[] }
    }

    /// One sentence per profile set aside by `--skip-unavailable`, for the top of a report.
    pub fn not_run_lines(&self) -> Vec<String> {
        self.not_run
            .iter()
            .map(|n| format!("Not run: profile `{}` (--skip-unavailable): {}", n.profile, n.reason))
            .collect()
    }

    /// The warning of a run without a sandbox ([`UNSANDBOXED`]), or None.
    pub fn isolation_warning(&self) -> Option<&'static str> {
        self.sandbox.as_ref().filter(|s| s.is_none()).map(|_| UNSANDBOXED)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FailingCell {
    pub cell_id: String,
    pub case_id: String,
    pub profile: String,
    pub outcome: String,
    pub reason: String,
}

/// What happened in one cell, step by step, for people.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Timeline {
    pub cell_id: String,
    pub entries: Vec<TimelineEntry>,
    /// Entries left out beyond the per-cell limit.
    pub omitted: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TimelineEntry {
    pub seq: u64,
    pub step: Option<u32>,
    /// The event kind (`model_action`, `policy_decision`, ...).
    pub kind: String,
    /// One line: the tool and the gist.
    pub title: String,
    /// Longer text: tool output preview, test output, reason.
    pub detail: String,
    /// For edits and writes: a line diff (`-` old, `+` new).
    pub diff: Option<String>,
    /// Some(false) for denials, failed tools, failing tests.
    pub ok: Option<bool>,
}

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Manifest(#[from] RunDirError),
}

/// Most cells whose report.html is one self-contained file: up to this many, every cell's
/// timeline is embedded in the page. A larger run's page carries its cells as a compact index
/// shown page by page, and its timelines live in side files loaded when a square is clicked
/// (src/report/html.rs, docs/formats.md), which keeps a 100,000-cell page a few megabytes.
pub const TIMELINE_CELLS: usize = 1000;

/// Most timelines a large run's report.html has in its side files: cells that did not pass
/// first (they are the ones people open), then passed ones, in plan order. The rest say how
/// to see theirs (`hcbench replay`). The cap bounds the time and disk a report costs whatever
/// the run's size (about 13 KB of side file per timeline of a typical cell: 2,000 of them
/// cost about what the 25 MB one-file page of 10,000 cells did).
pub const SIDE_TIMELINE_CELLS: usize = 2_000;

/// Where a cell's trace is.
pub fn trace_path(run_dir: &Path, cell_id: &str) -> std::path::PathBuf {
    run_dir.join("cells").join(cell_id).join("trace.jsonl")
}

/// Whether report.html of these cells is split: a cell index in the page and the timelines in
/// side files, rather than one file with every timeline.
pub fn split_layout(cells: &[CellSummary]) -> bool {
    cells.len() > TIMELINE_CELLS
}

/// The cells (indexes, in plan order) whose timelines a split report.html has in its side
/// files: not passed first, then passed, at most [`SIDE_TIMELINE_CELLS`].
pub fn side_timeline_cells(cells: &[CellSummary]) -> Vec<usize> {
    let not_passed = (0..cells.len()).filter(|i| cells[*i].outcome != Some(Outcome::Passed));
    let passed = (0..cells.len()).filter(|i| cells[*i].outcome == Some(Outcome::Passed));
    let mut chosen: Vec<usize> = not_passed.chain(passed).take(SIDE_TIMELINE_CELLS).collect();
    chosen.sort_unstable();
    chosen
}

/// Builds the report of the run in `run_dir`. `timelines` adds per-cell timelines for a
/// report.html that embeds them (at most [`TIMELINE_CELLS`] cells); a larger run's timelines
/// are read by the HTML exporter into its side files, a batch at a time, and never held here.
///
/// Two passes: a lean streaming replay of every trace for the summaries, then a full read of
/// the traces whose timelines are embedded. Both passes run in parallel over cells.
pub fn build(run_dir: &Path, timelines: bool) -> Result<MatrixReport, ReportError> {
    let manifest = Manifest::read(run_dir)?;
    let planned = manifest.cell_ids();
    let run_ids = manifest.trace_run_ids(&planned);
    // Unzipped as they come: the summaries are the report's one per-cell cost, held once, and
    // their repeated texts shared between cells as each is read (src/replay/names.rs).
    let names = std::sync::Mutex::new(Names::default());
    // Where every trace is, found once (src/trace/stored.rs); without it each cell's is found by name.
    let stored = crate::trace::stored::RunTraces::scan(run_dir).ok();
    let (cells, notes): (Vec<CellSummary>, Vec<Option<String>>) = planned
        .par_iter()
        .zip(&run_ids)
        .map(|(planned, run_id)| {
            let (mut cell, note) =
                load_cell(stored.as_ref(), &trace_path(run_dir, &planned.cell_id), planned, run_id, &manifest);
            cell.share_names(&mut names.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
            (cell, note)
        })
        .unzip();
    drop(names);
    drop((planned, run_ids));
    let mut notes: Vec<String> = notes.into_iter().flatten().collect();
    let mut tls = Vec::new();
    if timelines && !split_layout(&cells) {
        tls = cells
            .par_iter()
            .filter_map(|c| {
                read_trace(&trace_path(run_dir, &c.cell_id)).ok().map(|read| timeline(&c.cell_id, &read.events))
            })
            .collect();
    } else if timelines {
        let side = side_timeline_cells(&cells).len();
        if side < cells.len() {
            notes.push(format!(
                "report.html has the timelines of {side} of {} cells (cells that did not pass first); `hcbench replay RUN_DIR/cells/<cell>/trace.jsonl` shows any cell",
                cells.len()
            ));
        }
    }
    Ok(from_cells(&manifest, run_dir, cells, tls, notes))
}

/// Assembles a report from summaries (used by `build` and by tests).
pub fn from_cells(
    manifest: &Manifest,
    run_dir: &Path,
    cells: Vec<CellSummary>,
    timelines: Vec<Timeline>,
    notes: Vec<String>,
) -> MatrixReport {
    // The groups are the profiles, or `profile/ablation` in an ablate run: every table and
    // comparison below is the same code for both.
    let groups = manifest.groups();
    let profile_stats = aggregate::by_profile(&groups, &cells);
    let category_stats = aggregate::by_category(&groups, &cells);
    let split_stats = aggregate::by_split(&groups, &cells);
    let epochs = manifest.epochs as usize;
    let comparisons = if manifest.ablations.is_empty() {
        aggregate::compare_all(&groups, &cells, epochs)
    } else {
        // Each ablation against `full` (the first of each profile), Holm across ablations.
        aggregate::compare_with_first(&groups, &cells, epochs)
    };
    let power = aggregate::power(&groups, &cells, epochs);
    let ablation =
        (!manifest.ablations.is_empty()).then(|| AblationReport::build(&groups, &cells, &comparisons, epochs));
    let mut notes = notes;
    let mut budget_cut = None;
    if let Some(budget) = manifest.budget_usd {
        let spent: f64 = cells.iter().filter_map(CellSummary::cost_usd).sum();
        let not_run = cells.iter().filter(|c| c.stop_reason == "not_run").count();
        if spent >= budget && not_run > 0 {
            notes.push(format!(
                "the budget of ${budget:.4} was reached (${spent:.4} spent): {not_run} cell(s) were not started and count as incomplete"
            ));
            budget_cut = Some(budget);
        }
    }
    let status = RunStatus::of(&cells);
    let resume_command = (status != RunStatus::Complete)
        .then(|| if manifest.merged_from.is_empty() { resume_command(run_dir) } else { MERGED_FINISH.to_string() });
    let banner = resume_command.as_deref().map(|cmd| banner(status, &cells, budget_cut, cmd));
    let verdict = exit_policy::judge(&manifest.command, status, &groups, &cells, Thresholds::of(manifest));
    let failing = cells
        .iter()
        .filter(|c| c.outcome != Some(Outcome::Passed))
        .map(|c| FailingCell {
            cell_id: c.cell_id.clone(),
            case_id: c.case_id.to_string(),
            profile: c.group().into_owned(),
            outcome: c.outcome_label().to_string(),
            reason: c.reason.to_string(),
        })
        .collect();
    MatrixReport {
        schema_version: REPORT_SCHEMA_VERSION,
        run_id: manifest.run_id.clone(),
        command: manifest.command.clone(),
        benchmark: manifest.benchmark.clone(),
        profiles: groups,
        epochs: manifest.epochs,
        started_at: manifest.started_at.clone(),
        status,
        banner,
        sandbox: manifest.sandbox.clone(),
        resume_command,
        verdict,
        cells,
        profile_stats,
        category_stats,
        split_stats,
        comparisons,
        power,
        ablation,
        failing,
        notes,
        not_run: manifest.not_run.clone(),
        timelines,
    }
}

/// `hcbench matrix --resume DIR` for this run directory, absolute so the command works from
/// anywhere under the project root and so a re-render writes the same bytes wherever it runs.
pub(crate) fn resume_command(run_dir: &Path) -> String {
    let dir = run_dir.canonicalize().unwrap_or_else(|_| run_dir.to_path_buf());
    let dir = dir.to_string_lossy();
    if dir.chars().any(|c| c.is_whitespace() || "'\"$`\\".contains(c)) {
        format!("hcbench matrix --resume '{}'", dir.replace('\'', r"'\''"))
    } else {
        format!("hcbench matrix --resume {dir}")
    }
}

/// How a merged run ([`crate::merge`]) is finished: its shards are, then merged again. Set in
/// backticks by the banner, so the inner pair closes the first command and opens the second.
const MERGED_FINISH: &str =
    "hcbench matrix --resume SHARD_DIR` for each shard that did not finish, then `hcbench merge NEW_OUT SHARD_DIR...";

/// The paragraph every report of an incomplete run opens with.
fn banner(status: RunStatus, cells: &[CellSummary], budget_cut: Option<f64>, resume: &str) -> String {
    let cancelled = cells.iter().filter(|c| c.outcome == Some(Outcome::Cancelled)).count();
    let unfinished = cells.iter().filter(|c| c.outcome.is_none()).count();
    let mut missing = Vec::new();
    if cancelled > 0 {
        missing.push(format!("{cancelled} cancelled"));
    }
    if unfinished > 0 {
        missing.push(format!("{unfinished} never started or cut short"));
    }
    let what = if status == RunStatus::Interrupted { "Interrupted run" } else { "Partial run" };
    let mut text = format!(
        "{what}: {} of {} planned cell(s) have no verdict ({}). The numbers below cover only the cells that finished. Finish the run with `{resume}`",
        cancelled + unfinished,
        cells.len(),
        missing.join(", ")
    );
    match budget_cut {
        Some(budget) => text.push_str(&format!(
            " (the budget of ${budget:.4} was reached and still applies on resume; a new run with a larger --budget-usd measures the rest)."
        )),
        None => text.push('.'),
    }
    text
}

/// The summary of one planned cell; a missing or unreadable trace becomes its own row.
/// The summary of one planned cell from its trace, which must belong to run `run_id`.
fn load_cell(
    stored: Option<&crate::trace::stored::RunTraces>,
    path: &Path,
    planned: &PlannedCell,
    run_id: &str,
    manifest: &Manifest,
) -> (CellSummary, Option<String>) {
    let PlannedCell { cell_id, case_id, profile, ablation } = planned;
    let placeholder = |outcome: Option<Outcome>, reason: String| CellSummary {
        schema_version: SUMMARY_SCHEMA_VERSION,
        run_id: manifest.run_id.as_str().into(),
        cell_id: cell_id.to_string(),
        case_id: case_id.as_str().into(),
        category: manifest.category_of(case_id).unwrap_or_default().into(),
        split: manifest.split_of(case_id).unwrap_or_default().into(),
        profile: profile.as_str().into(),
        ablation: ablation.as_str().into(),
        outcome,
        reason: reason.into(),
        stop_reason: "not_run".into(),
        epoch: 1,
        ..Default::default()
    };
    let replayed = match stored {
        Some(stored) => crate::replay::replay_stored(stored, cell_id, Some(run_id)),
        None => crate::trace::stored::locate(path).map(|_| crate::replay::replay_trace_of(path, Some(run_id))),
    };
    let Some(replayed) = replayed else {
        return (placeholder(None, "the cell never ran (interrupted run?)".into()), None);
    };
    match replayed {
        Ok(mut s) => {
            if s.outcome.is_none() {
                s.reason = "the trace ends before run_finished (crash or interruption)".into();
            }
            let note = s.skipped_note();
            (s, note)
        }
        Err(crate::replay::ReplayError::Empty(_)) => (placeholder(None, "the trace is empty".into()), None),
        Err(e) => {
            let note = format!("{cell_id}: {e}");
            (placeholder(Some(Outcome::HarnessError), format!("unreadable trace: {e}")), Some(note))
        }
    }
}

fn clip(s: &str) -> String {
    if s.len() <= DETAIL_LIMIT {
        s.to_string()
    } else {
        format!(
            "{}\n[... {} more bytes in the trace]",
            crate::util::truncate_str(s, DETAIL_LIMIT),
            s.len() - DETAIL_LIMIT
        )
    }
}

/// `call 2 of 5: ` for a call of a reply that held several (one batch), else nothing: the
/// timeline then shows which calls the model asked for together.
fn batch_tag(batch: &Option<crate::trace::event::Batch>) -> String {
    batch.map(|b| format!("call {} of {}: ", b.position, b.size)).unwrap_or_default()
}

fn line_diff(old: &str, new: &str) -> String {
    let mut d = String::new();
    for l in old.lines() {
        d.push_str("- ");
        d.push_str(l);
        d.push('\n');
    }
    for l in new.lines() {
        d.push_str("+ ");
        d.push_str(l);
        d.push('\n');
    }
    clip(&d)
}

/// A model action as a person reads it: `run_tests()` for a call without arguments (JSON
/// `null` or `{}`, which read as noise), else the tool and its arguments cut to 200 bytes.
fn call_title(tool: &str, args: &serde_json::Value) -> String {
    let empty = args.is_null() || args.as_object().is_some_and(|o| o.is_empty());
    if empty { format!("{tool}()") } else { format!("{tool} {}", crate::util::truncate_str(&args.to_string(), 200)) }
}

/// Turns a cell's events into timeline entries for people.
pub fn timeline(cell_id: &str, events: &[Event]) -> Timeline {
    let mut entries = Vec::new();
    for e in events {
        let entry = match &e.body {
            EventBody::RunStarted { case_id, profile, model, .. } => TimelineEntry {
                seq: e.seq,
                step: None,
                kind: "run_started".into(),
                title: format!("{case_id} with profile {profile} ({} / {})", model.provider, model.model),
                detail: String::new(),
                diff: None,
                ok: None,
            },
            EventBody::ContextPacked { .. }
            | EventBody::StateUpdated { .. }
            | EventBody::MemoryUpdated { .. }
            | EventBody::RepoMapBuilt { .. }
            | EventBody::RepoMapUsed { .. }
            | EventBody::ContextCompacted { .. }
            | EventBody::PolicyRetry { .. }
            | EventBody::Checkpoint { .. } => continue,
            EventBody::ModelAction { step, tool, args, batch, .. } => {
                let diff = match tool.as_str() {
                    "edit_file" => Some(line_diff(
                        args.get("old").and_then(|v| v.as_str()).unwrap_or(""),
                        args.get("new").and_then(|v| v.as_str()).unwrap_or(""),
                    )),
                    "write_file" => Some(line_diff("", args.get("content").and_then(|v| v.as_str()).unwrap_or(""))),
                    _ => None,
                };
                let mut brief = args.clone();
                if let Some(obj) = brief.as_object_mut() {
                    for k in ["old", "new", "content"] {
                        if obj.contains_key(k) {
                            obj.insert(k.into(), serde_json::Value::String("…".into()));
                        }
                    }
                }
                TimelineEntry {
                    seq: e.seq,
                    step: Some(*step),
                    kind: "model_action".into(),
                    title: format!("{}{}", batch_tag(batch), call_title(tool, &brief)),
                    detail: String::new(),
                    diff,
                    ok: None,
                }
            }
            EventBody::ModelRetry { step, attempt, cause, delay_ms } => TimelineEntry {
                seq: e.seq,
                step: Some(*step),
                kind: "model_retry".into(),
                title: format!("retry {attempt} after {delay_ms} ms: {cause}"),
                detail: String::new(),
                diff: None,
                ok: Some(false),
            },
            EventBody::ModelError { step, error_kind, message, .. } => TimelineEntry {
                seq: e.seq,
                step: Some(*step),
                kind: "model_error".into(),
                title: format!("model error ({error_kind})"),
                detail: clip(message),
                diff: None,
                ok: Some(false),
            },
            EventBody::PolicyDecision { step, tool, allowed, reason, invalid } => TimelineEntry {
                seq: e.seq,
                step: Some(*step),
                kind: "policy_decision".into(),
                title: if *allowed {
                    format!("{tool}: allowed")
                } else if *invalid {
                    format!("{tool}: invalid action")
                } else {
                    format!("{tool}: DENIED")
                },
                detail: if *allowed { String::new() } else { reason.clone() },
                diff: None,
                ok: Some(*allowed),
            },
            EventBody::ToolResult { step, tool, ok, denied, output, output_bytes, artifact, batch, .. } => {
                if *denied {
                    continue;
                }
                TimelineEntry {
                    seq: e.seq,
                    step: Some(*step),
                    kind: "tool_result".into(),
                    // `output_bytes` is the size of the tool's reply text (what the model was
                    // told), not of a file the tool wrote: say "output" so it reads as such.
                    title: format!(
                        "{}{tool} -> {} ({output_bytes} bytes of output{})",
                        batch_tag(batch),
                        if *ok { "ok" } else { "error" },
                        artifact.as_ref().map(|a| format!(", in full in {}", a.path)).unwrap_or_default()
                    ),
                    detail: clip(output),
                    diff: None,
                    ok: Some(*ok),
                }
            }
            EventBody::Resumed { from_step, discarded_events, workspace_restored, .. } => TimelineEntry {
                seq: e.seq,
                step: None,
                kind: "resumed".into(),
                title: format!(
                    "resumed from the checkpoint of step {from_step} ({discarded_events} later event(s) discarded{})",
                    if *workspace_restored { ", workspace restored" } else { "" }
                ),
                detail: String::new(),
                diff: None,
                ok: None,
            },
            EventBody::ResumeRefused { reason, .. } => TimelineEntry {
                seq: e.seq,
                step: None,
                kind: "resume_refused".into(),
                title: "checkpoint refused: the cell started again from step 0".into(),
                detail: clip(reason),
                diff: None,
                ok: Some(false),
            },
            EventBody::TestResult { passed, exit_code, timed_out, output, .. } => TimelineEntry {
                seq: e.seq,
                step: None,
                kind: "test_result".into(),
                title: if *timed_out {
                    "tests timed out".into()
                } else {
                    format!(
                        "tests {} (exit {})",
                        if *passed { "passed" } else { "failed" },
                        exit_code.map_or("-".into(), |c| c.to_string())
                    )
                },
                detail: clip(output),
                diff: None,
                ok: Some(*passed),
            },
            EventBody::SessionStarted { index, role, step_budget, first_step } => TimelineEntry {
                seq: e.seq,
                step: Some(*first_step),
                kind: "session_started".into(),
                title: format!("session {index} ({role}) starts with a fresh context, {step_budget} step(s)"),
                detail: String::new(),
                diff: None,
                ok: None,
            },
            EventBody::SessionFinished {
                index,
                stop_reason,
                marked_passing,
                verified_passing,
                false_claims,
                head,
                ..
            } => TimelineEntry {
                seq: e.seq,
                step: None,
                kind: "session_finished".into(),
                title: format!(
                    "session {index} ended ({stop_reason}): {} feature(s) verified, {} marked passing{}",
                    verified_passing.len(),
                    marked_passing.len(),
                    if false_claims.is_empty() {
                        String::new()
                    } else {
                        format!(", FALSE claims: {}", false_claims.join(", "))
                    }
                ),
                detail: format!(
                    "verified: {}\nmarked: {}\nHEAD: {}",
                    verified_passing.join(", "),
                    marked_passing.join(", "),
                    head.as_deref().unwrap_or("(no commit)")
                ),
                diff: None,
                ok: Some(false_claims.is_empty()),
            },
            EventBody::VerifierResult { passed, checks, .. } => TimelineEntry {
                seq: e.seq,
                step: None,
                kind: "verifier_result".into(),
                title: format!("verifier {}", if *passed { "passed" } else { "failed" }),
                detail: checks
                    .iter()
                    .map(|c| {
                        format!(
                            "{} {}: {}",
                            if c.passed { "ok  " } else { "FAIL" },
                            c.name,
                            c.detail.lines().next().unwrap_or("")
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n"),
                diff: None,
                ok: Some(*passed),
            },
            EventBody::RunFinished { outcome, reward, reason, .. } => TimelineEntry {
                seq: e.seq,
                step: None,
                kind: "run_finished".into(),
                title: format!("{outcome} (reward {reward:.1})"),
                detail: reason.clone(),
                diff: None,
                ok: Some(*outcome == Outcome::Passed),
            },
            EventBody::DelegationStarted { step, id, question, max_steps, max_tokens, trace } => TimelineEntry {
                seq: e.seq,
                step: Some(*step),
                kind: "delegation_started".into(),
                title: format!("delegation {id}: {max_steps} step(s), {max_tokens} tokens"),
                detail: format!("{}\n(the helper's trace: {trace})", clip(question)),
                diff: None,
                ok: None,
            },
            EventBody::DelegationCompleted { step, id, spent } => TimelineEntry {
                seq: e.seq,
                step: Some(*step),
                kind: "delegation_completed".into(),
                title: format!("delegation {id} answered: {}", delegation_spent(spent)),
                detail: String::new(),
                diff: None,
                ok: Some(true),
            },
            EventBody::DelegationFailed { step, id, message, spent, .. } => TimelineEntry {
                seq: e.seq,
                step: Some(*step),
                kind: "delegation_failed".into(),
                title: format!("delegation {id} failed: {}", delegation_spent(spent)),
                detail: clip(message),
                diff: None,
                ok: Some(false),
            },
            EventBody::HookDecision { step, hook, phase, tool, decision, reason, policy_denied, .. } => TimelineEntry {
                seq: e.seq,
                step: Some(*step),
                kind: "hook_decision".into(),
                title: format!("{phase} hook `{hook}` on {tool}: {decision}"),
                detail: clip(policy_denied.as_ref().map_or(reason, |r| r)),
                diff: None,
                ok: Some(!matches!(decision.as_str(), "deny" | "error") && policy_denied.is_none()),
            },
        };
        entries.push(entry);
    }
    let omitted = entries.len().saturating_sub(TIMELINE_LIMIT);
    entries.truncate(TIMELINE_LIMIT);
    Timeline { cell_id: cell_id.to_string(), entries, omitted }
}

/// What a delegation spent and returned, in a timeline title.
fn delegation_spent(d: &crate::trace::event::Delegated) -> String {
    let cost = d.cost_usd.map(|c| format!(", ${c:.4}")).unwrap_or_default();
    format!(
        "{} step(s), {} tokens{cost}, {} finding(s), {} file(s), {} refused call(s)",
        d.steps,
        d.input_tokens + d.output_tokens,
        d.findings,
        d.files,
        d.refusals
    )
}

#[cfg(test)]
mod tests {
    use super::call_title;
    use serde_json::json;

    #[test]
    fn a_call_without_arguments_reads_as_a_call() {
        assert_eq!(call_title("run_tests", &serde_json::Value::Null), "run_tests()");
        assert_eq!(call_title("run_tests", &json!({})), "run_tests()");
        assert_eq!(call_title("read_file", &json!({"path": "a.py"})), r#"read_file {"path":"a.py"}"#);
    }
}
