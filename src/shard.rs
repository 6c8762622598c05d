//! Splitting one plan into N deterministic shards, for running a matrix on several machines
//! under a job engine the user already has (a CI matrix, a Kubernetes Indexed Job, a Slurm job
//! array; docs/scale-out.md).
//!
//! hcbench schedules nothing across machines. Its part is that every shard, given the same
//! plan and its own `K/N`, computes the same split without talking to the others, and that the
//! parts merge back exactly. So the split is a pure function of the plan's cell order
//! ([`crate::rundir::Manifest::cell_ids`]) and `N`: no clock, no hash seed, no file listing.
//!
//! The split deals each group's cells (a profile, or a profile/ablation in `ablate`) round-robin
//! over the shards, starting each group one shard further on. Cells of one profile cost about
//! the same and profiles differ a lot (an oracle cell takes milliseconds, a remote model's
//! minutes), so every shard gets its share of every profile: shards finish together, and a
//! rate limit per profile is shared evenly. Dealing the plan order itself round-robin would
//! not do that: profiles interleave in it, so with as many shards as profiles each shard would
//! get exactly one profile.

use std::collections::HashMap;

use crate::rundir::PlannedCell;

/// One part of a plan: `index` of `count`, both 1-based as the user writes them (`--shard 2/3`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

/// Environment variables `--shard auto` reads, in this order of preference.
pub const SLURM_ID: &str = "SLURM_ARRAY_TASK_ID";
pub const SLURM_MIN: &str = "SLURM_ARRAY_TASK_MIN";
pub const SLURM_COUNT: &str = "SLURM_ARRAY_TASK_COUNT";
/// Kubernetes Indexed Jobs set the index (0-based); the count is the Job's `completions`,
/// which Kubernetes does not put in the environment: the Job sets it (docs/scale-out.md).
pub const K8S_INDEX: &str = "JOB_COMPLETION_INDEX";
/// The explicit pair for CI matrices and anything else, 1-based like `--shard K/N`; also the
/// count that goes with `JOB_COMPLETION_INDEX`.
pub const INDEX: &str = "HCBENCH_SHARD_INDEX";
pub const COUNT: &str = "HCBENCH_SHARD_COUNT";

/// Most shards a plan may be split into.
pub const MAX_SHARDS: u32 = 10_000;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    #[error(
        "--shard {given:?} is not K/N: write e.g. `--shard 2/3` (shard 2 of 3, counting from 1), or `--shard auto`"
    )]
    Syntax { given: String },
    #[error("--shard {index}/{count}: {problem}")]
    OutOfRange { index: u32, count: u32, problem: &'static str },
    #[error(
        "--shard auto found no shard in the environment: set {SLURM_ID} (a Slurm job array), {K8S_INDEX} with {COUNT} (a Kubernetes Indexed Job), or {INDEX} and {COUNT} (a CI matrix); or give --shard K/N"
    )]
    NoEnvironment,
    #[error("--shard auto: {var}={value:?} is not a whole number; {fix}")]
    BadVariable { var: &'static str, value: String, fix: &'static str },
    #[error("--shard auto: {found} is set but {missing} is not; {fix}")]
    Incomplete { found: &'static str, missing: &'static str, fix: &'static str },
}

impl Shard {
    /// `K/N` as written on the command line.
    pub fn parse(text: &str) -> Result<Shard, ShardError> {
        let syntax = || ShardError::Syntax { given: text.to_string() };
        let (k, n) = text.trim().split_once('/').ok_or_else(syntax)?;
        let index: u32 = k.trim().parse().map_err(|_| syntax())?;
        let count: u32 = n.trim().parse().map_err(|_| syntax())?;
        Shard::new(index, count)
    }

    pub fn new(index: u32, count: u32) -> Result<Shard, ShardError> {
        let problem = if count == 0 {
            "N must be at least 1"
        } else if count > MAX_SHARDS {
            "N may be at most 10000"
        } else if index == 0 {
            "K counts from 1 (the first shard is 1/N)"
        } else if index > count {
            "K may be at most N"
        } else {
            return Ok(Shard { index, count });
        };
        Err(ShardError::OutOfRange { index, count, problem })
    }

    /// `--shard auto`: the shard the job engine gave this process, from `var` (the process
    /// environment, passed in so the settings layer reads it once and tests need no globals).
    /// Slurm's and Kubernetes' indexes count from 0 (Slurm's from the array's first task id);
    /// the explicit pair counts from 1 like `--shard K/N`.
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Result<Shard, ShardError> {
        let number = |name: &'static str, fix: &'static str| -> Result<Option<u32>, ShardError> {
            match var(name) {
                // An empty variable is unset: CI matrices leave unused ones empty.
                None => Ok(None),
                Some(v) if v.trim().is_empty() => Ok(None),
                Some(v) => v.trim().parse().map(Some).map_err(|_| ShardError::BadVariable { var: name, value: v, fix }),
            }
        };
        const SLURM_FIX: &str = "run hcbench inside the job array's batch script (`sbatch --array=0-N`)";
        if let Some(id) = number(SLURM_ID, SLURM_FIX)? {
            let count = number(SLURM_COUNT, SLURM_FIX)?.ok_or(ShardError::Incomplete {
                found: SLURM_ID,
                missing: SLURM_COUNT,
                fix: SLURM_FIX,
            })?;
            let min = number(SLURM_MIN, SLURM_FIX)?.unwrap_or(0);
            // An array with a step (`--array=0-10:2`) has ids that are not consecutive: its
            // tasks cannot be numbered 1..N from the id alone.
            let index = id.checked_sub(min).map(|i| i + 1).filter(|i| *i <= count).ok_or(ShardError::OutOfRange {
                index: id,
                count,
                problem: "the array's task ids must be consecutive (no `:step`)",
            })?;
            return Shard::new(index, count);
        }
        const K8S_FIX: &str = "set it in the Job's env to the Job's `completions` (docs/scale-out.md)";
        if let Some(index) = number(K8S_INDEX, K8S_FIX)? {
            let count = number(COUNT, K8S_FIX)?.ok_or(ShardError::Incomplete {
                found: K8S_INDEX,
                missing: COUNT,
                fix: K8S_FIX,
            })?;
            return Shard::new(index + 1, count);
        }
        const PAIR_FIX: &str = "set both, 1-based: HCBENCH_SHARD_INDEX=2 HCBENCH_SHARD_COUNT=3";
        match (number(INDEX, PAIR_FIX)?, number(COUNT, PAIR_FIX)?) {
            (Some(index), Some(count)) => Shard::new(index, count),
            (Some(_), None) => Err(ShardError::Incomplete { found: INDEX, missing: COUNT, fix: PAIR_FIX }),
            (None, Some(_)) => Err(ShardError::Incomplete { found: COUNT, missing: INDEX, fix: PAIR_FIX }),
            (None, None) => Err(ShardError::NoEnvironment),
        }
    }

    /// The cells of `plan` (in plan order) that belong to this shard, in plan order.
    pub fn select<'p>(&self, plan: &'p [PlannedCell]) -> Vec<&'p PlannedCell> {
        assign(plan, self.count).into_iter().zip(plan).filter(|(s, _)| *s == self.index).map(|(_, c)| c).collect()
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// The shard (1-based) of every cell of `plan`, in plan order: each group's cells dealt
/// round-robin, group g starting at shard g + 1 (module doc).
pub fn assign(plan: &[PlannedCell], count: u32) -> Vec<u32> {
    let mut dealer = Dealer::new(count);
    plan.iter().map(|cell| dealer.deal(&cell.profile, &cell.ablation)).collect()
}

/// [`assign`] one cell at a time, for a plan read as it runs (src/engine.rs makes cells lazily,
/// so a shard selects its cells without the whole plan in memory).
pub struct Dealer {
    count: usize,
    /// Per group (profile, ablation), in order of first appearance: its number and how many of
    /// its cells were dealt so far.
    groups: HashMap<(String, String), (usize, usize)>,
}

impl Dealer {
    pub fn new(count: u32) -> Dealer {
        Dealer { count: count.max(1) as usize, groups: HashMap::new() }
    }

    /// The shard (1-based) of the next cell of the plan, of this profile and ablation.
    pub fn deal(&mut self, profile: &str, ablation: &str) -> u32 {
        let next = self.groups.len();
        let key = (profile.to_string(), ablation.to_string());
        let (group, dealt) = self.groups.entry(key).or_insert((next, 0));
        let shard = (*group + *dealt) % self.count;
        *dealt += 1;
        shard as u32 + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(cases: usize, profiles: &[&str], epochs: u32) -> Vec<PlannedCell> {
        let mut out = Vec::new();
        for c in 0..cases {
            for e in 1..=epochs {
                for p in profiles {
                    out.push(PlannedCell {
                        cell_id: crate::rundir::cell_id(&format!("case-{c}"), p, "", e, epochs),
                        case_id: format!("case-{c}"),
                        profile: p.to_string(),
                        ablation: String::new(),
                    });
                }
            }
        }
        out
    }

    #[test]
    fn k_of_n_parses_and_says_what_is_wrong() {
        assert_eq!(Shard::parse("2/3"), Ok(Shard { index: 2, count: 3 }));
        assert_eq!(Shard::parse(" 1 / 1 "), Ok(Shard { index: 1, count: 1 }));
        for bad in ["3", "a/3", "1/", "-1/3", "1/3/4", ""] {
            assert!(matches!(Shard::parse(bad), Err(ShardError::Syntax { .. })), "{bad}");
        }
        let zero = Shard::parse("0/3").unwrap_err().to_string();
        assert!(zero.contains("K counts from 1"), "{zero}");
        assert!(Shard::parse("4/3").unwrap_err().to_string().contains("K may be at most N"));
        assert!(Shard::parse("1/0").unwrap_err().to_string().contains("N must be at least 1"));
        assert!(Shard::parse("1/10001").is_err());
        assert_eq!(Shard::parse("2/3").unwrap().to_string(), "2/3");
    }

    #[test]
    fn every_cell_is_in_exactly_one_shard_and_every_shard_gets_every_profile() {
        let cells = plan(40, &["oracle", "gpt"], 2);
        for n in [1u32, 2, 3, 7, 160, 200] {
            let mut seen: Vec<&str> = Vec::new();
            for k in 1..=n {
                let part = Shard::new(k, n).unwrap().select(&cells);
                // Plan order is kept within a shard.
                let positions: Vec<usize> =
                    part.iter().map(|c| cells.iter().position(|x| x.cell_id == c.cell_id).unwrap()).collect();
                assert!(positions.windows(2).all(|w| w[0] < w[1]));
                // Sizes differ by at most one per group, so by at most two in all.
                let len = part.len() as i64;
                assert!((len - (cells.len() as i64 / n as i64)).abs() <= 2, "n={n} k={k} len={len}");
                if cells.len() >= 2 * n as usize {
                    for p in ["oracle", "gpt"] {
                        assert!(part.iter().any(|c| c.profile == p), "shard {k}/{n} has no {p} cell");
                    }
                }
                seen.extend(part.iter().map(|c| c.cell_id.as_str()));
            }
            seen.sort();
            let mut all: Vec<&str> = cells.iter().map(|c| c.cell_id.as_str()).collect();
            all.sort();
            assert_eq!(seen, all, "n={n}: every cell exactly once");
        }
        // As many shards as profiles: dealing the plan order would give each shard one profile.
        let halves = [Shard::new(1, 2).unwrap().select(&cells), Shard::new(2, 2).unwrap().select(&cells)];
        for half in &halves {
            let gpt = half.iter().filter(|c| c.profile == "gpt").count();
            assert_eq!(gpt, 40, "each half has half the gpt cells");
        }
    }

    #[test]
    fn the_split_depends_on_nothing_but_the_plan_and_n() {
        let cells = plan(9, &["a", "b", "c"], 1);
        assert_eq!(assign(&cells, 4), assign(&cells.clone(), 4));
        assert_eq!(assign(&cells, 4)[..6], [1, 2, 3, 2, 3, 4]);
    }

    #[test]
    fn auto_reads_slurm_kubernetes_or_the_explicit_pair() {
        fn env<'a>(pairs: &'a [(&str, &str)]) -> impl Fn(&str) -> Option<String> + 'a {
            move |k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
        }
        let slurm = [(SLURM_ID, "3"), (SLURM_MIN, "1"), (SLURM_COUNT, "4")];
        assert_eq!(Shard::from_env(env(&slurm)), Ok(Shard { index: 3, count: 4 }));
        let slurm0 = [(SLURM_ID, "0"), (SLURM_COUNT, "2")];
        assert_eq!(Shard::from_env(env(&slurm0)), Ok(Shard { index: 1, count: 2 }));
        let stepped = [(SLURM_ID, "8"), (SLURM_MIN, "0"), (SLURM_COUNT, "3")];
        assert!(Shard::from_env(env(&stepped)).unwrap_err().to_string().contains("consecutive"));
        let k8s = [(K8S_INDEX, "0"), (COUNT, "5")];
        assert_eq!(Shard::from_env(env(&k8s)), Ok(Shard { index: 1, count: 5 }));
        let k8s_alone = [(K8S_INDEX, "0")];
        let e = Shard::from_env(env(&k8s_alone)).unwrap_err().to_string();
        assert!(e.contains("HCBENCH_SHARD_COUNT is not") && e.contains("completions"), "{e}");
        let pair = [(INDEX, "2"), (COUNT, "2")];
        assert_eq!(Shard::from_env(env(&pair)), Ok(Shard { index: 2, count: 2 }));
        let garbage = [(INDEX, "two"), (COUNT, "2")];
        assert!(Shard::from_env(env(&garbage)).unwrap_err().to_string().contains("\"two\" is not a whole number"));
        assert_eq!(Shard::from_env(env(&[])), Err(ShardError::NoEnvironment));
    }
}
