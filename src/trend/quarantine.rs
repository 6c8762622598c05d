//! The quarantine list: the flaky cases of a trend report (verdicts that vary under the control
//! profile), written as `quarantine.json` beside the trend reports so the gate can leave them
//! out of its regression set and promotions (`hcbench gate --quarantine FILE`, docs/gate.md).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::TrendReport;

pub const QUARANTINE_FILE: &str = "quarantine.json";
pub const QUARANTINE_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quarantine {
    pub schema_version: u32,
    pub generated_at: String,
    pub control_profile: String,
    pub cases: Vec<QuarantinedCase>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuarantinedCase {
    pub benchmark: String,
    pub case_id: String,
    pub reason: String,
}

impl Quarantine {
    pub fn from_report(report: &TrendReport) -> Quarantine {
        Quarantine {
            schema_version: QUARANTINE_SCHEMA_VERSION,
            generated_at: report.generated_at.clone(),
            control_profile: report.settings.control_profile.clone(),
            cases: report
                .flaky
                .iter()
                .map(|f| QuarantinedCase {
                    benchmark: f.benchmark.clone(),
                    case_id: f.case_id.clone(),
                    reason: f.reason.clone(),
                })
                .collect(),
        }
    }

    /// Writes `out/quarantine.json` atomically.
    pub fn write(&self, out: &Path) -> std::io::Result<PathBuf> {
        let path = out.join(QUARANTINE_FILE);
        let bytes = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        crate::util::write_atomic(&path, &bytes)?;
        Ok(path)
    }

    /// Reads a quarantine file; the error names the file and what is wrong with it.
    pub fn read(path: &Path) -> Result<Quarantine, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read quarantine file {}: {e}", path.display()))?;
        let q: Quarantine = serde_json::from_str(&text).map_err(|e| {
            format!(
                "{} is not a quarantine file ({e}); give the quarantine.json that `hcbench trend` writes",
                path.display()
            )
        })?;
        if q.schema_version > QUARANTINE_SCHEMA_VERSION {
            return Err(format!(
                "{} has schema_version {}, newer than this hcbench reads ({QUARANTINE_SCHEMA_VERSION}); upgrade hcbench",
                path.display(),
                q.schema_version
            ));
        }
        Ok(q)
    }

    /// The quarantined case ids of one benchmark.
    pub fn cases_of(&self, benchmark: &str) -> BTreeSet<String> {
        self.cases.iter().filter(|c| c.benchmark == benchmark).map(|c| c.case_id.clone()).collect()
    }
}
