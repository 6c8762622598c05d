//! `report.json`: the whole report model (cells, stats, comparisons) for machines.

use super::model::MatrixReport;
use super::{ExportError, Exporter};

pub struct Json;

impl Exporter for Json {
    fn file_name(&self) -> &'static str {
        "report.json"
    }

    fn render(&self, report: &MatrixReport) -> Result<Vec<u8>, ExportError> {
        let mut bytes = serde_json::to_vec_pretty(report)
            .map_err(|e| ExportError::Render { format: "json", message: e.to_string() })?;
        bytes.push(b'\n');
        Ok(bytes)
    }
}
