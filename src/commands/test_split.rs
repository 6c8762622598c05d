//! `run`, `matrix` and `ablate` refuse the test split unless a human says otherwise.
//!
//! `hcbench gate` keeps per-case results of the test split away from the optimizing loop
//! (docs/gate.md, "Privacy of the test split"); a plain `hcbench run --split test` would hand
//! them over. So in a project where the gate is in use (it has a gate state,
//! `workspace/.gate-state.json`), any selection that contains a case of the gate's test split
//! (`test_split` in `experiment_config.yaml`, `test` when there is none or it does not load),
//! however it was selected (`--split`, `--suite`, `--case`, the whole benchmark, a `--resume`d
//! run), is a usage error (exit 2) naming `--human-test-split`. With the flag the run goes
//! ahead and the use is appended to the audit log, so a loop that used it shows.
//!
//! Why only there: without a gate there is no loop to keep the split from, and the tool's
//! ordinary use (`hcbench matrix --profiles oracle,gpt,deepseek` over a whole benchmark, the
//! README's first command) must not need a flag. Deleting `workspace/` to get rid of the gate
//! state does not help a loop: the state anchored in git ([`crate::gate::anchor`]) still says
//! the gate is in use, and loading it fails, naming the human's recovery.
//!
//! `validate` runs only the control agents (oracle, nop), whose outcomes say nothing about the
//! candidate, so it is not guarded; `plan` runs nothing; `trend` and `report` read runs that
//! were already made (with the flag, by a human).

use std::time::Duration;

use super::CommandError;
use crate::bench::{Benchmark, Split};
use crate::gate::anchor::Anchor;
use crate::gate::config::{CONFIG_FILE, Config};
use crate::gate::state::{Acceptance, GateFiles, STATE as STATE_FILE};
use crate::lock::FileLock;

/// The flag a human passes to run test-split cases.
const FLAG: &str = "--human-test-split";

/// Refuses a selection with test-split cases unless `human`; with it, audits the use.
pub(super) fn guard(
    root: &std::path::Path,
    bench: &Benchmark,
    case_ids: &[String],
    human: bool,
    command: &str,
) -> Result<(), CommandError> {
    if !gate_in_use(root) {
        return Ok(());
    }
    let split = Config::load(root, None).map(|c| c.test_split).unwrap_or(Split::Test);
    let tests = case_ids.iter().filter(|id| bench.case(id).is_some_and(|c| c.split == split)).count();
    if tests == 0 {
        return Ok(());
    }
    if !human {
        // A count, not the ids: the refusal is read by the loop.
        return Err(CommandError::Usage(format!(
            "`hcbench {command}` would run {tests} case(s) of the `{split}` split, which `hcbench gate` keeps private (an optimizing loop must not see per-case results of the test split); select other cases (e.g. --split train), or, as a human, pass {FLAG} (recorded in workspace/.gate-state.json)"
        )));
    }
    let files = GateFiles::new(root, &root.join(CONFIG_FILE));
    let wait = |holder: &str| eprintln!("hcbench: waiting for the workspace lock ({holder}) to audit {FLAG}");
    let _lock = FileLock::acquire(&files.lock_path(), &format!("{command} {FLAG}"), Duration::MAX, wait)
        .map_err(|e| CommandError::Usage(e.to_string()))?;
    let mut state = files.load_state().map_err(|e| CommandError::Usage(e.to_string()))?;
    let entry = Acceptance::now(
        format!("test split: {tests} case(s) of `{split}` in benchmark {}", bench.name),
        None,
        None,
        format!("hcbench {command} {FLAG}"),
    );
    files.audit(&mut state, entry).map_err(|e| CommandError::Internal(anyhow::Error::new(e)))?;
    eprintln!("hcbench: {FLAG}: running {tests} test-split case(s); recorded in {STATE_FILE}");
    Ok(())
}

/// Whether the gate is in use here: a gate state in the workspace, or one anchored in git
/// (a deleted workspace must not make the split public; loading the state then fails, naming
/// the recovery).
fn gate_in_use(root: &std::path::Path) -> bool {
    root.join(STATE_FILE).is_file()
        || Anchor::open(root).ok().flatten().is_some_and(|a| a.head().ok().flatten().is_some())
}
