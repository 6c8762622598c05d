//! The split layout of `report.html`, for runs of more than
//! [`TIMELINE_CELLS`](super::model::TIMELINE_CELLS) cells: what keeps a 100,000-cell report a
//! page a browser opens in a second and a render that holds no per-cell markup.
//!
//! - The page carries every cell once, in a compact JSON index (`<script
//!   type="application/json" id="cells-index">`: case, group, epoch, outcome, a short reason,
//!   and which side file holds its timeline), streamed into the page by [`write_index`]. Its
//!   script (templates/report_split.js) filters the whole index and draws one page of cases
//!   of the heatmap, and of the cells that did not pass, at a time.
//! - Timelines live in side files, `reports/report-files/timelines-NNNN.js`, each a script of
//!   [`CHUNK_CELLS`] cells' `<section>`s in one compressed bundle (src/report/bundle.rs), as
//!   the one-file page carries its own. A square's click adds
//!   a `<script src>` for its file: that works from `file://` (where Chromium refuses `fetch` of
//!   local files) and served by `hcbench view` alike. At most
//!   [`SIDE_TIMELINE_CELLS`](super::model::SIDE_TIMELINE_CELLS) cells get one (not passed
//!   first), so the report's time and disk stay bounded whatever the run's size.
//!
//! Text from traces is escaped twice over: the sections are rendered by the page's own
//! autoescaping templates, every `<` in the index's JSON is written as `\u003c`, and a side
//! file's sections travel as base64, so none can close the element it sits in.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::Serialize;

use super::ExportError;
use super::html::{OUTCOMES, TOOLTIP_REASON, distinct, heatmap_groups, outcome_meta, render_timeline, templates};
use super::model::{MatrixReport, side_timeline_cells, split_layout, timeline, trace_path};
use crate::trace::read_trace;

/// The folder of side files, beside report.html.
pub const SIDE_DIR: &str = "report-files";
/// Timelines per side file: a click loads one file, so this bounds what a click costs
/// (about 0.5 MB for typical cells) against the number of files.
pub const CHUNK_CELLS: usize = 100;
/// The index's own version, for the page's script.
const INDEX_VERSION: u32 = 1;

/// A writer that writes every `<` as the JSON escape `\u003c`. In JSON a `<` can only be
/// inside a string, where the escape means the same character, so the text stays the same
/// JSON while no `</script>` or `<!--` can appear in it.
struct NoAngle<'a>(&'a mut dyn Write);

impl Write for NoAngle<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut rest = buf;
        while let Some(at) = rest.iter().position(|b| *b == b'<') {
            self.0.write_all(&rest[..at])?;
            self.0.write_all(b"\\u003c")?;
            rest = &rest[at + 1..];
        }
        self.0.write_all(rest)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

fn json<T: Serialize + ?Sized>(out: &mut NoAngle<'_>, value: &T) -> Result<(), ExportError> {
    serde_json::to_writer(out, value).map_err(|e| match e.io_error_kind() {
        Some(_) => ExportError::Stream(e.into()),
        None => ExportError::Render { format: "html", message: e.to_string() },
    })
}

/// Streams the cell index of a split page into `out`, one cell at a time. What it holds per
/// cell: `[cell id, case, group, epoch, outcome, reason, side file]`, the numbers indexing the
/// index's own lists (`cases`, `groups`, `outcomes`, `reasons`; the side file is 0 without a
/// timeline). Reasons are cut to the tooltip's length and stored once each.
pub(crate) fn write_index(report: &MatrixReport, out: &mut dyn Write) -> Result<(), ExportError> {
    let out = &mut NoAngle(out);
    let groups = heatmap_groups(report);
    let group_of: HashMap<&str, usize> = groups.iter().enumerate().map(|(i, g)| (g.as_str(), i)).collect();
    let case_ids = distinct(report.cells.iter().map(|c| c.case_id.as_str()));
    let case_of: HashMap<&str, usize> = case_ids.iter().enumerate().map(|(i, c)| (*c, i)).collect();
    let categories = distinct(report.cells.iter().map(|c| c.category.as_str()));
    let category_of: HashMap<&str, usize> = categories.iter().enumerate().map(|(i, c)| (*c, i)).collect();
    let splits = distinct(report.cells.iter().map(|c| c.split.as_str()));
    let split_of: HashMap<&str, usize> = splits.iter().enumerate().map(|(i, c)| (*c, i)).collect();
    // Each case's category and split: its first cell's, as the one-file page's rows show.
    let mut case_rows: Vec<Option<(usize, usize)>> = vec![None; case_ids.len()];
    for c in &report.cells {
        let row = &mut case_rows[case_of[c.case_id.as_str()]];
        if row.is_none() {
            *row = Some((category_of[c.category.as_str()], split_of[c.split.as_str()]));
        }
    }
    let side = side_timeline_cells(&report.cells);

    write!(
        out,
        "{{\"version\":{INDEX_VERSION},\"epochs\":{},\"chunk_cells\":{CHUNK_CELLS},\"side_timelines\":{},\"groups\":",
        report.epochs,
        side.len()
    )?;
    json(out, &groups)?;
    out.write_all(b",\"categories\":")?;
    json(out, &categories)?;
    out.write_all(b",\"splits\":")?;
    json(out, &splits)?;
    out.write_all(b",\"outcomes\":")?;
    json(out, &OUTCOMES)?;
    out.write_all(b",\n\"cases\":[")?;
    for (i, (id, row)) in case_ids.iter().zip(&case_rows).enumerate() {
        let (category, split) = row.unwrap_or_default();
        if i > 0 {
            out.write_all(b",")?;
        }
        json(out, &(id, category, split))?;
    }
    out.write_all(b"],\n\"cells\":[")?;
    let mut reasons: Vec<&str> = Vec::new();
    let mut reason_of: HashMap<&str, usize> = HashMap::new();
    let outcome_of = |label: &str| OUTCOMES.iter().position(|(o, _, _)| *o == outcome_meta(label).0).unwrap_or(0);
    for (i, c) in report.cells.iter().enumerate() {
        let reason = crate::util::truncate_str(&c.reason, TOOLTIP_REASON);
        let next = reasons.len();
        let r = *reason_of.entry(reason).or_insert(next);
        if r == next {
            reasons.push(reason);
        }
        let chunk = side.binary_search(&i).map_or(0, |at| at / CHUNK_CELLS + 1);
        if i > 0 {
            out.write_all(b",\n")?;
        }
        let group = group_of.get(c.group().as_ref()).copied().unwrap_or(0);
        json(out, &(&c.cell_id, case_of[c.case_id.as_str()], group, c.epoch, outcome_of(c.outcome_label()), r, chunk))?;
    }
    out.write_all(b"],\n\"reasons\":")?;
    json(out, &reasons)?;
    out.write_all(b"}")?;
    Ok(())
}

/// The name of side file `n` (from 1).
pub fn side_file_name(n: usize) -> String {
    format!("timelines-{n:04}.js")
}

/// Writes a split page's side files into `dir/report-files/`, or removes that folder for a
/// one-file page (a leftover would only mislead). Returns the folder when written.
///
/// The files are written into a fresh folder beside it, in parallel a side file at a time
/// (each reads its cells' traces, renders their sections and writes them, so memory holds a
/// few side files, not the timelines of the run), then swapped in by two renames: a page
/// being opened meanwhile finds the old complete set or the new one.
pub(crate) fn write_side_files(
    run_dir: &Path,
    dir: &Path,
    report: &MatrixReport,
) -> Result<Option<PathBuf>, ExportError> {
    let target = dir.join(SIDE_DIR);
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ExportError::Write { path, source }
    };
    if !split_layout(&report.cells) {
        if target.exists() {
            std::fs::remove_dir_all(&target).map_err(io(&target))?;
        }
        return Ok(None);
    }
    let fresh = tempfile::Builder::new().prefix(".report-files-").tempdir_in(dir).map_err(io(dir))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(fresh.path(), std::fs::Permissions::from_mode(0o755)).map_err(io(fresh.path()))?;
    let side = side_timeline_cells(&report.cells);
    side.par_chunks(CHUNK_CELLS).enumerate().try_for_each_init(templates, |tera, (n, chunk)| {
        let tera = tera.as_ref().map_err(|e| ExportError::Render { format: "html", message: e.to_string() })?;
        let path = fresh.path().join(side_file_name(n + 1));
        crate::util::write_atomic_streamed(&path, false, |out| {
            // The chunk's sections by cell id, as one bundle (src/report/bundle.rs).
            let mut sections = std::collections::BTreeMap::new();
            for i in chunk {
                let cell = &report.cells[*i];
                let read = read_trace(&trace_path(run_dir, &cell.cell_id)).ok();
                let timeline = read.map(|r| timeline(&cell.cell_id, &r.events));
                sections.insert(cell.cell_id.as_str(), render_timeline(tera, cell, timeline.as_ref(), report.epochs)?);
            }
            write!(out, "{}{},", super::bundle::SIDE_CALL, n + 1)?;
            super::bundle::write_quoted(out, &sections)?;
            out.write_all(b");\n")?;
            Ok(())
        })
        .map_err(|e| match e {
            crate::util::StreamError::Io(source) | crate::util::StreamError::Writer(ExportError::Stream(source)) => {
                ExportError::Write { path: path.clone(), source }
            }
            crate::util::StreamError::Writer(e) => e,
        })
    })?;
    let fresh = fresh.keep();
    let old = dir.join(".report-files-old");
    if old.exists() {
        std::fs::remove_dir_all(&old).map_err(io(&old))?;
    }
    if target.exists() {
        std::fs::rename(&target, &old).map_err(io(&target))?;
    }
    std::fs::rename(&fresh, &target).map_err(io(&target))?;
    if old.exists() {
        std::fs::remove_dir_all(&old).map_err(io(&old))?;
    }
    Ok(Some(target))
}
