//! What the engine tells the rest of hcbench while cells run, and the sinks that listen.
//!
//! The engine never prints (STYLE.md, as in nextest's runner/reporter split): it emits typed
//! [`EngineEvent`]s to one [`EngineSink`]. Several listeners (the terminal progress display,
//! the results file, a history writer) are combined with [`Fanout`], which hands every event
//! to each sink in order. A sink must not block for long: it is called from the cells' tasks.

use std::path::Path;
use std::sync::Arc;

use crate::replay::CellSummary;

/// What the engine tells its sinks. It only borrows, so it is `Copy`: a fan-out hands the same
/// event to every sink.
#[derive(Debug, Clone, Copy)]
pub enum EngineEvent<'a> {
    RunStarted {
        run_id: &'a str,
        run_dir: &'a Path,
        cells: usize,
        profiles: &'a [String],
    },
    CellStarted {
        cell_id: &'a str,
    },
    CellFinished {
        summary: &'a CellSummary,
        done: usize,
        total: usize,
    },
    /// Cells kept from an earlier attempt (`--resume`), and cells that had ended in an
    /// infrastructure error and run again (`--retry-errors`).
    CellsKept {
        count: usize,
        retried: usize,
    },
    /// The run's model cost reached its budget: no new cell starts.
    BudgetSpent {
        spent_usd: f64,
        budget_usd: f64,
    },
    /// The first Ctrl-C: no new cell starts, running cells are being stopped.
    Cancelling,
    /// A profile's server is unreachable (its circuit breaker opened): its remaining cells end
    /// as provider_error without running. Sent once per profile.
    ProfileUnavailable {
        profile: &'a str,
        reason: &'a str,
    },
    /// A profile's first provider failure in this command, in full, with the fix where one is
    /// known (a key to check, `base_url` to check). Sent once per profile, as soon as the cell
    /// it ended has finished; later failures of the profile are in the reports.
    ProviderFailed {
        profile: &'a str,
        failure: &'a crate::model::ProviderFailure,
    },
    /// An interrupted cell continued from its last checkpoint (`matrix --resume`).
    CellResumed {
        cell_id: &'a str,
        from_step: u32,
        workspace_restored: bool,
        duration_ms: u64,
    },
    /// An interrupted cell's checkpoint was refused: the cell starts over from step 0.
    ResumeRefused {
        cell_id: &'a str,
        reason: &'a str,
    },
}

/// Receives engine events.
pub trait EngineSink: Send + Sync {
    fn event(&self, event: EngineEvent<'_>);
}

/// A sink that ignores everything.
pub struct NullSink;

impl EngineSink for NullSink {
    fn event(&self, _event: EngineEvent<'_>) {}
}

/// Every event to every sink, in the order the sinks were given.
#[derive(Default)]
pub struct Fanout {
    sinks: Vec<Arc<dyn EngineSink>>,
}

impl Fanout {
    pub fn new(sinks: Vec<Arc<dyn EngineSink>>) -> Fanout {
        Fanout { sinks }
    }
}

impl EngineSink for Fanout {
    fn event(&self, event: EngineEvent<'_>) {
        for sink in &self.sinks {
            sink.event(event);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    struct Log(&'static str, Arc<Mutex<Vec<String>>>);

    impl EngineSink for Log {
        fn event(&self, event: EngineEvent<'_>) {
            let what = match event {
                EngineEvent::CellFinished { summary, done, total } => format!("{} {done}/{total}", summary.cell_id),
                other => format!("{other:?}"),
            };
            self.1.lock().unwrap().push(format!("{}: {what}", self.0));
        }
    }

    #[test]
    fn a_fanout_gives_every_event_to_every_sink_in_order() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let fan = Fanout::new(vec![Arc::new(Log("a", log.clone())), Arc::new(Log("b", log.clone()))]);
        let summary = CellSummary { cell_id: "c1".into(), ..Default::default() };
        fan.event(EngineEvent::CellFinished { summary: &summary, done: 1, total: 2 });
        fan.event(EngineEvent::Cancelling);
        assert_eq!(*log.lock().unwrap(), ["a: c1 1/2", "b: c1 1/2", "a: Cancelling", "b: Cancelling"]);
    }
}
