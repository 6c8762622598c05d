//! `hcbench ablate --context`: one profile, the same cases, one variant of the agent spec per
//! ablation ([`crate::agent::spec::AgentSpec::with_ablation`]), run as one plan in parallel.
//!
//! It is a matrix whose second axis is the ablations instead of profiles, so it shares
//! everything with `matrix`: the run directory, resume (`--resume`, or `hcbench matrix
//! --resume`, both read the ablations from the manifest), Ctrl-C, the budget, the exit policy
//! (the oracle is the control arm under every ablation) and every report, where the groups
//! are `profile/ablation` and each ablation is compared with `full`.

use super::CommandError;
use crate::rundir::Manifest;
use crate::settings::{MatrixSettings, MatrixStart};

pub fn ablate(s: MatrixSettings, human_test_split: bool) -> Result<i32, CommandError> {
    // `ablate --resume` of a matrix run would silently finish a matrix; say which command does.
    if let MatrixStart::Resume { run_dir, .. } = &s.start
        && Manifest::read(run_dir)?.ablations.is_empty()
    {
        return Err(CommandError::Usage(format!(
            "{} is not an ablate run (its manifest has no ablations); finish it with `hcbench matrix --resume {}`",
            run_dir.display(),
            run_dir.display()
        )));
    }
    super::matrix::matrix(s, human_test_split)
}
