//! `report.json`: the whole report model (cells, stats, comparisons) for machines.

use std::io::Write;

use super::model::MatrixReport;
use super::{ExportError, Exporter};

pub struct Json;

impl Exporter for Json {
    fn file_name(&self) -> &'static str {
        "report.json"
    }

    fn write(&self, report: &MatrixReport, out: &mut dyn Write) -> Result<(), ExportError> {
        serde_json::to_writer_pretty(&mut *out, report).map_err(|e| match e.io_error_kind() {
            Some(_) => ExportError::Stream(e.into()),
            None => ExportError::Render { format: "json", message: e.to_string() },
        })?;
        out.write_all(b"\n")?;
        Ok(())
    }
}
