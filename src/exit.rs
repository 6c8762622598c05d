//! Named process exit codes, the contract with shells, CI systems and the optimization loop.
//!
//! A crash or a configuration problem must never look like "the cases failed": scripts branch
//! on these numbers (see `docs/commands.md`). For `hcbench gate` the contract is the
//! optimization loop's: 0 commit the candidate, 1 revert it, 2 or more fix the setup and do
//! neither (docs/gate.md); 4 says the setup kept the candidate from being measured.
//!
//! `run`, `matrix` and `report` choose among 0, 1 and 4–6 (and 130) with one function over the
//! report model, [`crate::report::exit_policy::judge`], which also fixes their precedence
//! when several hold. The numbers 4–6 say the run cannot be trusted or missed a floor, in
//! words a CI job can branch on without parsing a report.

/// Everything ran and every case passed (or, for `validate`, every case is sound; for `gate`,
/// every step passed; for `record`, the row was appended; for `matrix`, every check of the
/// exit policy held).
pub const SUCCESS: i32 = 0;
/// hcbench ran correctly and the verdict is negative: a case failed (`run` without
/// `--fail-under`), a case is unsound; for `gate`, a step failed (file guard, state protection,
/// regression set or full benchmark); for `record`, the record was refused.
pub const FAILED: i32 = 1;
/// Bad input: command-line usage, a malformed benchmark, case, trace or run directory; for
/// `gate` and `record` also a bad experiment_config.yaml, a corrupt state file, or another gate
/// holding the workspace lock.
pub const USAGE: i32 = 2;
/// hcbench itself could not run: an I/O failure or an internal bug (never "the gate failed").
pub const INTERNAL: i32 = 3;
/// A profile's coverage (cells with a verdict / planned cells) is below `--min-coverage`: the
/// run measured too little to be read (python3 missing, a provider down, a budget cut, a
/// killed run). Checked before anything else, since every other number rests on it.
/// For `gate` the same meaning, per step: more than `max_unmeasured` of Step 1's or Step 2's
/// planned cells (either arm in paired mode) ended as harness error, provider error, timeout or
/// missing, so the candidate could not be measured; the loop must neither commit nor revert.
pub const COVERAGE_BELOW_THRESHOLD: i32 = 4;
/// The control arm (the `oracle` profile, when it is in the run) did not pass every cell it
/// ran: the benchmark or the machine is broken, so no other profile's numbers can be trusted.
pub const CONTROL_ARM_FAILED: i32 = 5;
/// A profile's pass rate is below `--fail-under`.
pub const PASS_RATE_BELOW_FLOOR: i32 = 6;
/// `hcbench trend --fail-on-regression`: a profile's latest run is worse than its trailing
/// window beyond noise (docs/trend.md).
pub const REGRESSION: i32 = 7;
/// The run was interrupted (Ctrl-C); what finished is recorded and reported.
pub const INTERRUPTED: i32 = 130;

/// One exit code for people: its number, its constant's name and a one-line meaning. The
/// constants' docs above say the whole contract; this table is what `--help` prints
/// ([`help_table`]) and what docs/commands.md's table must list, row for row (a test holds
/// the two together), so the codes a user reads cannot drift from the ones hcbench returns.
#[derive(Debug, Clone, Copy)]
pub struct Described {
    pub code: i32,
    pub name: &'static str,
    pub meaning: &'static str,
}

/// Every exit code, in numeric order.
pub const CODES: &[Described] = &[
    Described { code: SUCCESS, name: "SUCCESS", meaning: "everything ran and every check held" },
    Described {
        code: FAILED,
        name: "FAILED",
        meaning: "verdict negative: a case failed or is unsound, a gate step failed, a record was refused",
    },
    Described {
        code: USAGE,
        name: "USAGE",
        meaning: "bad input (flags, benchmark, case, suite, config, run directory); nothing ran",
    },
    Described { code: INTERNAL, name: "INTERNAL", meaning: "hcbench itself failed (I/O error, bug)" },
    Described {
        code: COVERAGE_BELOW_THRESHOLD,
        name: "COVERAGE_BELOW_THRESHOLD",
        meaning: "too few cells got a verdict (--min-coverage; for gate, max_unmeasured): not measured",
    },
    Described {
        code: CONTROL_ARM_FAILED,
        name: "CONTROL_ARM_FAILED",
        meaning: "the oracle profile failed a cell: the benchmark or the machine is broken",
    },
    Described {
        code: PASS_RATE_BELOW_FLOOR,
        name: "PASS_RATE_BELOW_FLOOR",
        meaning: "a profile's pass rate is below --fail-under",
    },
    Described {
        code: REGRESSION,
        name: "REGRESSION",
        meaning: "trend --fail-on-regression: a regression beyond noise",
    },
    Described {
        code: INTERRUPTED,
        name: "INTERRUPTED",
        meaning: "Ctrl-C: what finished is recorded; finish with --resume",
    },
];

/// The `Exit codes:` block of a command's `--help`, for the codes it can return (`only`), or
/// every code when `only` is empty.
pub fn help_table(only: &[i32]) -> String {
    let mut text = String::from("Exit codes:\n");
    for d in CODES.iter().filter(|d| only.is_empty() || only.contains(&d.code)) {
        text.push_str(&format!("  {:>3}  {}\n", d.code, d.meaning));
    }
    text.push_str("  (docs/commands.md#exit-codes has the full contract)");
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/commands.md's table of exit codes lists exactly the codes of [`CODES`], with their
    /// constants' names, in order: the docs, `--help` and the code cannot drift apart.
    #[test]
    fn the_docs_list_every_exit_code_and_no_other() {
        let docs = include_str!("../docs/commands.md");
        let section = docs.split("## Exit codes").nth(1).expect("docs/commands.md has an Exit codes section");
        let rows: Vec<(i32, &str)> = section
            .lines()
            .skip_while(|l| !l.starts_with('|'))
            .take_while(|l| l.starts_with('|'))
            .filter_map(|l| {
                let mut cells = l.split('|').map(str::trim).skip(1);
                let code = cells.next()?.parse().ok()?;
                Some((code, cells.next()?.trim_matches('`')))
            })
            .collect();
        let want: Vec<(i32, &str)> = CODES.iter().map(|d| (d.code, d.name)).collect();
        assert_eq!(rows, want);
    }

    #[test]
    fn help_lists_the_asked_codes_in_order() {
        let text = help_table(&[USAGE, SUCCESS]);
        assert_eq!(
            text,
            "Exit codes:\n    0  everything ran and every check held\n    2  bad input (flags, benchmark, case, suite, config, run directory); nothing ran\n  (docs/commands.md#exit-codes has the full contract)"
        );
    }
}
