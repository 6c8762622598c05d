//! `hcbench ablate --context`: one profile, the same cases, one variant of the agent spec per
//! ablation ([`crate::agent::spec::AgentSpec::with_ablation`]), run as one plan in parallel.
//!
//! It is a matrix whose second axis is the ablations instead of profiles, so it shares
//! everything with `matrix`: the run directory, resume (`--resume`, or `hcbench matrix
//! --resume`, both read the ablations from the manifest), Ctrl-C, the budget, the exit policy
//! (the oracle is the control arm under every ablation) and every report, where the groups
//! are `profile/ablation` and each ablation is compared with `full`.

use super::CommandError;
use crate::settings::MatrixSettings;

pub fn ablate(s: MatrixSettings) -> Result<i32, CommandError> {
    super::matrix::matrix(s)
}
