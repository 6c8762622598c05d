//! Named process exit codes, the contract with shells, CI systems and the optimization loop.
//!
//! A crash or a configuration problem must never look like "the cases failed": scripts branch
//! on these numbers (see `docs/commands.md`). For `hcbench gate` the contract is the
//! optimization loop's: 0 commit the candidate, 1 revert it, 2 or more fix the setup and do
//! neither (docs/gate.md).

/// Everything ran and every case passed (or, for `validate`, every case is sound; for `gate`,
/// every step passed; for `record`, the row was appended).
pub const SUCCESS: i32 = 0;
/// hcbench ran correctly and the verdict is negative: a case failed, a case is unsound; for
/// `gate`, a step failed (file guard, state protection, regression set or full benchmark);
/// for `record`, the record was refused.
pub const FAILED: i32 = 1;
/// Bad input: command-line usage, a malformed benchmark, case, trace or run directory; for
/// `gate` and `record` also a bad experiment_config.yaml, a corrupt state file, or another gate
/// holding the workspace lock.
pub const USAGE: i32 = 2;
/// hcbench itself could not run: an I/O failure or an internal bug (never "the gate failed").
pub const INTERNAL: i32 = 3;
/// The run was interrupted (Ctrl-C); what finished is recorded and reported.
pub const INTERRUPTED: i32 = 130;
