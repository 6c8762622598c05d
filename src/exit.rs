//! Named process exit codes, the contract with shells, CI systems and the optimization loop.
//!
//! A crash or a configuration problem must never look like "the cases failed": scripts branch
//! on these numbers (see `docs/commands.md`).

/// Everything ran and every case passed (or, for `validate`, every case is sound).
pub const SUCCESS: i32 = 0;
/// hcbench ran correctly and the verdict is negative: a case failed, a case is unsound.
pub const FAILED: i32 = 1;
/// Bad input: command-line usage, a malformed benchmark, case, trace or run directory.
pub const USAGE: i32 = 2;
/// hcbench itself could not run: an I/O failure or an internal bug.
pub const INTERNAL: i32 = 3;
