//! `hcbench list`: the selected cases with category, split and fixture size.

use std::path::Path;

use anyhow::Context as _;
use serde::Serialize;

use super::CommandError;
use crate::cli::Format;
use crate::exit;
use crate::settings::ListSettings;

#[derive(Serialize)]
struct Row<'a> {
    id: &'a str,
    category: &'a str,
    split: &'a str,
    fixture: &'a str,
    fixture_files: u64,
    fixture_bytes: u64,
    step_budget: u32,
}

pub fn list(ListSettings { selected, format }: ListSettings) -> Result<i32, CommandError> {
    let rows: Vec<Row> = selected
        .case_ids
        .iter()
        .filter_map(|id| selected.benchmark.case(id))
        .map(|c| {
            let (files, bytes) = tree_size(&c.fixture_dir);
            Row {
                id: &c.id,
                category: c.category.as_str(),
                split: c.split.as_str(),
                fixture: &c.fixture,
                fixture_files: files,
                fixture_bytes: bytes,
                step_budget: c.step_budget,
            }
        })
        .collect();
    match format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&rows).context("json")?),
        Format::Table => {
            let mut t = comfy_table::Table::new();
            t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
            t.set_header(["case", "category", "split", "fixture", "files", "size", "budget"]);
            for r in &rows {
                t.add_row([
                    r.id.to_string(),
                    r.category.into(),
                    r.split.into(),
                    r.fixture.into(),
                    r.fixture_files.to_string(),
                    human_bytes(r.fixture_bytes),
                    r.step_budget.to_string(),
                ]);
            }
            println!("{t}");
            println!("{} case(s) in benchmark {}", rows.len(), selected.benchmark.name);
        }
    }
    Ok(exit::SUCCESS)
}

fn tree_size(dir: &Path) -> (u64, u64) {
    let mut files = 0;
    let mut bytes = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let Ok(ty) = e.file_type() else { continue };
            if ty.is_dir() {
                stack.push(e.path());
            } else if ty.is_file() {
                files += 1;
                bytes += e.metadata().map(|m| m.len()).unwrap_or(0);
            }
        }
    }
    (files, bytes)
}

fn human_bytes(b: u64) -> String {
    if b >= 1 << 20 {
        format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
    } else if b >= 1 << 10 {
        format!("{:.1} KiB", b as f64 / 1024.0)
    } else {
        format!("{b} B")
    }
}
