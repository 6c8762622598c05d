//! Power up front: the smallest difference between two profiles a run of a given size could
//! detect (the minimum detectable effect, MDE), and the cases or epochs a target difference
//! needs. Reports state the MDE so that "within noise" is read as "smaller than about X, if
//! anything", and `plan` states it before anything runs (Miller 2024, section on power).
//!
//! # The variance assumption
//!
//! A profile's mean on one case, averaged over `m` epochs, varies across cases with variance
//! `between + within / m`: `between` is how much the true pass rates of cases differ (easy and
//! hard cases), `within` is the agent's own randomness on one case (what epochs average out).
//! For pass/fail cells with an overall pass rate `p` the two add up to `p (1 - p)`.
//! [`Variance::assumed`] splits that total in half ([`ASSUMED_BETWEEN_SHARE`]) when nothing
//! has been measured; [`Variance::observed`] estimates both parts from a previous run.
//!
//! The per-case difference of two profiles is taken to have twice that variance, as if the two
//! profiles' results on a case were uncorrelated. Real profiles usually find the same cases
//! hard, which makes the paired test more powerful than this, so the MDE errs on the large
//! (honest) side. The formula is the normal approximation
//! `MDE = (z(1 - alpha/2) + z(power)) * sqrt(2 (between + within / m) / cases)`. Below
//! [`super::EXACT_BELOW_CASES`] cases the verdict comes from the exact sign test, which needs
//! somewhat more than this; with so few cases that even a clean sweep cannot reach `alpha`
//! (5 cases at 0.05: p = 0.0625) nothing is detectable and the MDE is infinite.

use serde::{Deserialize, Serialize};

use super::{check_level, mean, sample_variance, z_quantile};

/// The share of `p (1 - p)` taken to lie between cases when nothing has been measured.
pub const ASSUMED_BETWEEN_SHARE: f64 = 0.5;

/// The variance of one profile's per-cell values, split into the part between cases and the
/// part within a case (across epochs).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Variance {
    pub between: f64,
    pub within: f64,
}

impl Variance {
    /// Pass/fail cells with pass rate `rate`: total `rate (1 - rate)`, split by
    /// [`ASSUMED_BETWEEN_SHARE`]. A rate of exactly 0 or 1 would predict no variance at all,
    /// so the rate is kept within [0.05, 0.95]: a run is never promised more power than that.
    pub fn assumed(rate: f64) -> Variance {
        let p = rate.clamp(0.05, 0.95);
        let total = p * (1.0 - p);
        Variance { between: total * ASSUMED_BETWEEN_SHARE, within: total * (1.0 - ASSUMED_BETWEEN_SHARE) }
    }

    /// Estimated from measured values per case (one vector per case, one value per epoch):
    /// `within` is the mean sample variance across a case's epochs, `between` the variance of
    /// case means minus the share of `within` that leaks into them (never below 0). Without a
    /// case of two or more epochs the split cannot be seen; the observed variance of the case
    /// means is then split by [`ASSUMED_BETWEEN_SHARE`]. `None` with fewer than two cases.
    pub fn observed(per_case: &[Vec<f64>]) -> Option<Variance> {
        let measured: Vec<&Vec<f64>> = per_case.iter().filter(|v| !v.is_empty()).collect();
        if measured.len() < 2 {
            return None;
        }
        let case_means: Vec<f64> = measured.iter().map(|v| mean(v)).collect();
        let of_means = sample_variance(&case_means);
        let repeated: Vec<f64> = measured.iter().filter(|v| v.len() >= 2).map(|v| sample_variance(v)).collect();
        if repeated.is_empty() {
            return Some(Variance {
                between: of_means * ASSUMED_BETWEEN_SHARE,
                within: of_means * (1.0 - ASSUMED_BETWEEN_SHARE),
            });
        }
        let within = mean(&repeated);
        let epochs = measured.iter().map(|v| v.len() as f64).sum::<f64>() / measured.len() as f64;
        Some(Variance { between: (of_means - within / epochs).max(0.0), within })
    }

    /// The variance of one paired per-case difference with `epochs` epochs per profile.
    fn of_difference(&self, epochs: usize) -> f64 {
        2.0 * (self.between + self.within / epochs as f64)
    }
}

/// The fewest cases with which the exact sign test can reach `alpha` at all: a clean sweep of
/// n cases has p = 2 / 2^n (6 cases at alpha 0.05).
pub fn min_cases(alpha: f64) -> usize {
    check_level(alpha, "alpha");
    (1..).find(|&n| 2.0 * 0.5_f64.powi(n as i32) < alpha).expect("alpha > 0")
}

fn z_sum(alpha: f64, power: f64) -> f64 {
    check_level(alpha, "alpha");
    check_level(power, "power");
    z_quantile(1.0 - alpha / 2.0) + z_quantile(power)
}

/// Minimum detectable difference in pass rate between two profiles compared on `cases`
/// cases with `epochs` epochs each, at two-sided error rate `alpha` and the given `power`
/// (0.8 is customary), under [`Variance::assumed`]`(baseline_rate)`. Infinite when no
/// difference is detectable; a value of 1 or more means the same in practice.
pub fn mde(cases: usize, epochs: usize, baseline_rate: f64, alpha: f64, power: f64) -> f64 {
    mde_for(&Variance::assumed(baseline_rate), cases, epochs, alpha, power)
}

/// [`mde`] with a given (e.g. observed) variance.
pub fn mde_for(variance: &Variance, cases: usize, epochs: usize, alpha: f64, power: f64) -> f64 {
    let k = z_sum(alpha, power);
    if epochs == 0 || cases < min_cases(alpha) {
        return f64::INFINITY;
    }
    k * (variance.of_difference(epochs) / cases as f64).sqrt()
}

/// The number of cases needed to detect `target_diff` (e.g. 0.1 for ten points of pass rate)
/// with `epochs` epochs, at `alpha` and `power`, under [`Variance::assumed`]`(baseline_rate)`;
/// never fewer than [`min_cases`].
///
/// # Panics
/// If `target_diff` is not positive or `epochs` is 0.
pub fn cases_needed(target_diff: f64, epochs: usize, baseline_rate: f64, alpha: f64, power: f64) -> usize {
    assert!(target_diff > 0.0, "the target difference must be positive, got {target_diff}");
    assert!(epochs > 0, "at least one epoch");
    let k = z_sum(alpha, power);
    let n = (k * k * Variance::assumed(baseline_rate).of_difference(epochs) / (target_diff * target_diff)).ceil();
    (n as usize).max(min_cases(alpha))
}

/// The number of epochs with which `cases` cases detect `target_diff`, or `None` when no
/// number of epochs can: epochs only average out the within-case part, so the between-case
/// part sets a floor that only more cases lower.
///
/// # Panics
/// If `target_diff` is not positive.
pub fn epochs_needed(target_diff: f64, cases: usize, baseline_rate: f64, alpha: f64, power: f64) -> Option<usize> {
    assert!(target_diff > 0.0, "the target difference must be positive, got {target_diff}");
    let k = z_sum(alpha, power);
    if cases < min_cases(alpha) {
        return None;
    }
    let v = Variance::assumed(baseline_rate);
    // Solve 2 (between + within / m) <= target^2 * cases / k^2 for m.
    let room = target_diff * target_diff * cases as f64 / (2.0 * k * k) - v.between;
    if room <= 0.0 {
        return None;
    }
    Some(((v.within / room).ceil() as usize).max(1))
}
