//! The statistics behind every "is this difference real?" in hcbench: intervals for pass rates
//! and mean rewards, paired comparisons of two profiles with a three-state verdict, Holm's
//! correction for several comparisons, and power (the minimum detectable effect) up front.
//!
//! Plain synchronous functions over numbers, no I/O, so reports, the gate and `plan` share one
//! implementation and each rule is tested here against published values and by simulation.
//! `docs/statistics.md` explains every number in plain words; keep the two in step.
//!
//! # Why these methods
//!
//! The reference is Miller (2024), "Adding Error Bars to Evals": standard errors from the
//! central limit theorem, **clustered by the sampled unit**, **paired differences** for
//! comparisons, and **power analysis before running**. Here the sampled unit is the *case*:
//! a benchmark's cases are a sample of the problems we care about, while epochs (repeats of a
//! case) only average out the agent's randomness on that case. So every function first reduces
//! a case's epochs to its mean and then treats cases as the independent draws. Twenty epochs of
//! five cases are still five cases; more epochs narrow an interval only as far as the
//! within-case noise allows. With equal epochs per case this is exactly Miller's clustered
//! standard error (with the usual `n / (n - 1)` small-sample factor).
//!
//! Where the central limit theorem is not trustworthy (few cases, or a sample with no visible
//! spread) an exact or score method takes over, so that an interval is never of zero width
//! unless the data truly support it:
//!
//! - [`wilson`]: the Wilson score interval for a pass rate of independent pass/fail cells. It
//!   stays inside [0, 1] and is wide at 0/n and n/n (0/5 gives 0-43%), unlike the normal
//!   ("Wald") interval, which collapses to a point there. [`clopper_pearson`] is the exact
//!   (conservative) alternative and the interval behind the exact paired test.
//! - [`clustered_mean`]: the case-clustered mean with a Student-t interval (n - 1 degrees of
//!   freedom, so small samples pay for their uncertain standard error); Wilson for pass/fail
//!   data with one epoch per case, and wherever the sample shows no spread at all.
//! - [`paired`]: the per-case difference of two profiles on the cases *both* measured. Under
//!   [`EXACT_BELOW_CASES`] cases it uses the exact sign test (for pass/fail data with one epoch
//!   this is the exact McNemar test); from there on the paired clustered standard error with a
//!   t test. Both give a p-value and an interval that agree on the verdict.
//! - [`holm`] / [`holm_adjusted`]: Holm's step-down correction when one report makes several
//!   comparisons, so "one of six pairs looked different" is not mistaken for a finding.
//! - [`power`]: the minimum detectable effect for a number of cases and epochs, and the number
//!   of cases or epochs a target difference needs, with the variance assumption spelled out.
//!
//! Distributions (normal, Student t, beta) come from `statrs`, built without its default
//! `nalgebra` and `rand` features (see docs/performance.md for what that saves).

pub mod power;

#[cfg(test)]
mod calibration;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use statrs::distribution::{Beta, Binomial, ContinuousCDF, DiscreteCDF, Normal, StudentsT};

pub use power::{Variance, cases_needed, epochs_needed, mde, mde_for, min_cases};

/// From this many shared cases on, [`paired`] trusts the central limit theorem (Miller's
/// clustered standard error with a t test); below it, the exact sign test decides. Thirty is
/// the usual rule of thumb; the calibration tests check the t test at 40 cases.
pub const EXACT_BELOW_CASES: usize = 30;

/// Differences of per-case means closer than this are ties (floating-point noise, not a win).
const TIE: f64 = 1e-12;

/// The method an interval came from, named in every report next to the interval itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Wilson score interval for a proportion.
    Wilson,
    /// Clopper-Pearson exact interval for a proportion.
    ClopperPearson,
    /// Case-clustered standard error with a Student-t quantile.
    ClusteredSe,
    /// Exact two-sided sign test on per-case differences (exact McNemar for pass/fail data).
    ExactSign,
    /// Paired case-clustered standard error of the per-case differences, t test.
    PairedClusteredSe,
}

impl Method {
    /// The name reports print, e.g. "95% CI 12-43% (Wilson)".
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Wilson => "Wilson",
            Method::ClopperPearson => "Clopper-Pearson",
            Method::ClusteredSe => "clustered SE",
            Method::ExactSign => "exact sign test",
            Method::PairedClusteredSe => "paired clustered SE",
        }
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A two-sided confidence interval and the method that produced it. Bounds may be infinite
/// only for unbounded values with a single case (no spread can be estimated).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub lo: f64,
    pub hi: f64,
    pub method: Method,
}

impl Interval {
    pub fn width(&self) -> f64 {
        self.hi - self.lo
    }

    pub fn contains(&self, x: f64) -> bool {
        self.lo <= x && x <= self.hi
    }
}

/// A mean over cases with its clustered standard error and interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// The mean of the per-case means: every case weighs the same, whatever its epoch count.
    pub mean: f64,
    /// Case-clustered standard error of `mean` (0 with fewer than two cases).
    pub se: f64,
    /// Cases with at least one value (the sampled units).
    pub cases: usize,
    /// Values in all (cells: cases x their measured epochs).
    pub cells: usize,
    pub interval: Interval,
}

/// The outcome of comparing profile A with profile B.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    ABetter,
    BBetter,
    /// The data do not show a difference at the chosen error rate. Not "equal": the interval
    /// says how large a difference could still hide in the noise.
    WithinNoise,
}

impl Verdict {
    /// The verdict for a test with p-value `p_value` whose estimate has the sign of `direction`
    /// (positive: A scored higher). A difference is called only when `p_value < alpha`.
    pub fn from_test(p_value: f64, alpha: f64, direction: f64) -> Verdict {
        if p_value < alpha && direction > 0.0 {
            Verdict::ABetter
        } else if p_value < alpha && direction < 0.0 {
            Verdict::BBetter
        } else {
            Verdict::WithinNoise
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::ABetter => "A better",
            Verdict::BBetter => "B better",
            Verdict::WithinNoise => "within noise",
        }
    }
}

/// A paired comparison of A against B over the cases both measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Paired {
    /// Cases both sides measured (the pairs).
    pub cases: usize,
    /// Cases where A's mean was higher, lower, and equal (ties count in `mean_diff` and `se`
    /// but carry no information for the sign test).
    pub wins: usize,
    pub losses: usize,
    pub ties: usize,
    /// Mean over shared cases of (A's case mean - B's case mean).
    pub mean_diff: f64,
    /// Clustered standard error of `mean_diff` (the sample sd of the per-case differences over
    /// the square root of the number of cases; 0 with fewer than two cases).
    pub se: f64,
    /// A `1 - alpha` interval for the mean difference; excludes 0 exactly when the verdict is
    /// not `WithinNoise`.
    pub interval: Interval,
    /// Two-sided p-value of "no difference", from `method`.
    pub p_value: f64,
    pub method: Method,
    pub verdict: Verdict,
}

fn z_quantile(q: f64) -> f64 {
    Normal::standard().inverse_cdf(q)
}

fn t_quantile(q: f64, df: f64) -> f64 {
    StudentsT::new(0.0, 1.0, df).expect("degrees of freedom are positive").inverse_cdf(q)
}

/// Two-sided p-value of a t statistic with `df` degrees of freedom.
fn t_p_value(t: f64, df: f64) -> f64 {
    let dist = StudentsT::new(0.0, 1.0, df).expect("degrees of freedom are positive");
    (2.0 * dist.sf(t.abs())).min(1.0)
}

fn check_level(level: f64, what: &str) {
    assert!(level > 0.0 && level < 1.0, "{what} must be strictly between 0 and 1, got {level}");
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// Sample variance with the `n - 1` denominator (0 for fewer than two values).
fn sample_variance(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return 0.0;
    }
    let m = mean(xs);
    xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (xs.len() - 1) as f64
}

fn in_unit(x: f64) -> bool {
    (0.0..=1.0).contains(&x)
}

fn is_binary(x: f64) -> bool {
    x == 0.0 || x == 1.0
}

/// Wilson score interval for `successes` out of `n` independent trials at `confidence` (e.g.
/// 0.95). With `n == 0` nothing is known and the interval is [0, 1].
///
/// # Panics
/// If `successes > n` or `confidence` is not strictly between 0 and 1.
pub fn wilson(successes: u64, n: u64, confidence: f64) -> Interval {
    assert!(successes <= n, "{successes} successes out of {n}");
    if n == 0 {
        check_level(confidence, "confidence");
        return Interval { lo: 0.0, hi: 1.0, method: Method::Wilson };
    }
    wilson_fraction(successes as f64 / n as f64, n as f64, confidence)
}

/// The Wilson interval for an observed share `p_hat` of `n` units, where the share may be
/// fractional (a mean of per-case pass rates): the score interval with the largest variance a
/// [0, 1] value with that mean can have, p(1 - p), so it is conservative for such means.
fn wilson_fraction(p_hat: f64, n: f64, confidence: f64) -> Interval {
    check_level(confidence, "confidence");
    let z = z_quantile(1.0 - (1.0 - confidence) / 2.0);
    let z2 = z * z;
    let denom = 1.0 + z2 / n;
    let center = (p_hat + z2 / (2.0 * n)) / denom;
    let half = z / denom * (p_hat * (1.0 - p_hat) / n + z2 / (4.0 * n * n)).sqrt();
    // At p_hat = 0 or 1 the formula returns the bound itself up to rounding; pin it so that
    // 0/n reports exactly 0% as its lower end.
    let lo = if p_hat <= 0.0 { 0.0 } else { (center - half).max(0.0) };
    let hi = if p_hat >= 1.0 { 1.0 } else { (center + half).min(1.0) };
    Interval { lo, hi, method: Method::Wilson }
}

/// Clopper-Pearson ("exact") interval for `successes` out of `n`: the set of success
/// probabilities that an equal-tailed exact binomial test would not reject. Never narrower
/// than it should be (coverage at least `confidence`), often a little wider than Wilson.
///
/// # Panics
/// If `successes > n` or `confidence` is not strictly between 0 and 1.
pub fn clopper_pearson(successes: u64, n: u64, confidence: f64) -> Interval {
    assert!(successes <= n, "{successes} successes out of {n}");
    check_level(confidence, "confidence");
    let tail = (1.0 - confidence) / 2.0;
    let (x, n) = (successes as f64, n as f64);
    let lo = if successes == 0 { 0.0 } else { Beta::new(x, n - x + 1.0).expect("positive shapes").inverse_cdf(tail) };
    let hi = if successes as f64 >= n {
        1.0
    } else {
        Beta::new(x + 1.0, n - x).expect("positive shapes").inverse_cdf(1.0 - tail)
    };
    Interval { lo, hi, method: Method::ClopperPearson }
}

/// The mean over cases of per-case values (one vector per case, one value per measured epoch)
/// with its case-clustered standard error and a `confidence` interval.
///
/// Empty vectors (cases with no measured cell) are skipped: missing data, not zeros. Which
/// interval is reported:
/// - no cases: [0, 1] (Wilson with nothing observed);
/// - pass/fail values (all 0 or 1) with one epoch per case: Wilson over the cases, the pass-rate
///   interval reports show for binary cells;
/// - otherwise the clustered SE with a Student-t quantile (`cases - 1` degrees of freedom),
///   clipped to [0, 1] when every value lies there. Two guards keep it honest near 0% and 100%:
///   when the case means show no spread at all (or there is one case) a clustered SE of 0 would
///   claim certainty, so [0, 1] values fall back to Wilson over the cases (case means as
///   fractional successes); and for pass/fail values the interval is never narrower than
///   Wilson over the cells, which is what the cells would give if they were independent.
///   Repeats of a case are never *more* informative than independent draws.
pub fn clustered_mean(per_case: &[Vec<f64>], confidence: f64) -> Estimate {
    check_level(confidence, "confidence");
    let measured: Vec<&Vec<f64>> = per_case.iter().filter(|v| !v.is_empty()).collect();
    let cases = measured.len();
    let cells = measured.iter().map(|v| v.len()).sum::<usize>();
    if cases == 0 {
        return Estimate { mean: 0.0, se: 0.0, cases, cells, interval: wilson(0, 0, confidence) };
    }
    let case_means: Vec<f64> = measured.iter().map(|v| mean(v)).collect();
    let m = mean(&case_means);
    let se = (sample_variance(&case_means) / cases as f64).sqrt();
    let values = || measured.iter().flat_map(|v| v.iter().copied());
    let bounded = values().all(in_unit);
    let binary = values().all(is_binary);

    let interval = if binary && cells == cases {
        let passes = values().filter(|&x| x == 1.0).count() as u64;
        wilson(passes, cases as u64, confidence)
    } else if bounded && (cases < 2 || se == 0.0) {
        wilson_fraction(m, cases as f64, confidence)
    } else if cases < 2 {
        Interval { lo: f64::NEG_INFINITY, hi: f64::INFINITY, method: Method::ClusteredSe }
    } else {
        let half = t_quantile(1.0 - (1.0 - confidence) / 2.0, (cases - 1) as f64) * se;
        let (mut lo, mut hi) = (m - half, m + half);
        if bounded {
            lo = lo.max(0.0);
            hi = hi.min(1.0);
        }
        if binary {
            let passes = values().filter(|&x| x == 1.0).count() as u64;
            let floor = wilson(passes, cells as u64, confidence);
            lo = lo.min(floor.lo);
            hi = hi.max(floor.hi);
        }
        Interval { lo, hi, method: Method::ClusteredSe }
    };
    Estimate { mean: m, se, cases, cells, interval }
}

/// Compare A with B, paired by case, over the cases both measured, at error rate `alpha`
/// (0.05 for 95% intervals).
///
/// Callers pass only measured cells (`passed`/`failed` outcomes, or rewards of cells that
/// produced a verdict): an infrastructure error is missing data, never a loss. Cases missing
/// from either side, or with no values, are left out of the comparison.
///
/// Each case contributes one difference, A's case mean minus B's. With fewer than
/// [`EXACT_BELOW_CASES`] shared cases, or when the differences show no spread (a t test would
/// divide by zero), the exact two-sided sign test decides: ties are dropped and the wins are
/// binomial(wins + losses, 1/2) under "no difference"; for pass/fail data with one epoch this
/// is the exact McNemar test. Its interval is the Clopper-Pearson interval for the share of
/// untied cases A wins, mapped onto the mean difference (times the share of untied cases and
/// their mean absolute difference), so it excludes 0 exactly when the test rejects. Otherwise
/// a t test on the differences with the paired clustered SE and `cases - 1` degrees of
/// freedom.
///
/// The verdict is `ABetter`/`BBetter` only when `p_value < alpha`; five wins out of five give
/// p = 0.0625, within noise at 0.05, and one case can never decide anything.
pub fn paired(a: &BTreeMap<String, Vec<f64>>, b: &BTreeMap<String, Vec<f64>>, alpha: f64) -> Paired {
    check_level(alpha, "alpha");
    let pairs: Vec<(&Vec<f64>, &Vec<f64>)> = a
        .iter()
        .filter_map(|(case, va)| b.get(case).map(|vb| (va, vb)))
        .filter(|(va, vb)| !va.is_empty() && !vb.is_empty())
        .collect();
    let diffs: Vec<f64> = pairs.iter().map(|(va, vb)| mean(va) - mean(vb)).collect();
    let bounded = pairs.iter().all(|(va, vb)| va.iter().chain(vb.iter()).copied().all(in_unit));
    paired_differences(&diffs, bounded, alpha)
}

/// [`paired`] on per-case differences already computed; `bounded` says the underlying values
/// lie in [0, 1] (so differences lie in [-1, 1] and intervals are clipped there).
fn paired_differences(diffs: &[f64], bounded: bool, alpha: f64) -> Paired {
    let cases = diffs.len();
    let wins = diffs.iter().filter(|&&d| d > TIE).count();
    let losses = diffs.iter().filter(|&&d| d < -TIE).count();
    let ties = cases - wins - losses;
    let mean_diff = if cases == 0 { 0.0 } else { mean(diffs) };
    let se = (sample_variance(diffs) / cases.max(1) as f64).sqrt();

    let (p_value, method, (mut lo, mut hi)) = if cases >= EXACT_BELOW_CASES && se > 0.0 {
        let df = (cases - 1) as f64;
        let half = t_quantile(1.0 - alpha / 2.0, df) * se;
        (t_p_value(mean_diff / se, df), Method::PairedClusteredSe, (mean_diff - half, mean_diff + half))
    } else {
        (sign_test_p(wins as u64, losses as u64), Method::ExactSign, sign_interval(diffs, wins, losses, alpha))
    };
    if bounded {
        lo = lo.max(-1.0);
        hi = hi.min(1.0);
    }
    let direction = if method == Method::ExactSign { wins as f64 - losses as f64 } else { mean_diff };
    Paired {
        cases,
        wins,
        losses,
        ties,
        mean_diff,
        se,
        interval: Interval { lo, hi, method },
        p_value,
        method,
        verdict: Verdict::from_test(p_value, alpha, direction),
    }
}

/// Exact two-sided sign test: twice the smaller binomial(wins + losses, 1/2) tail, capped at 1.
/// 5 wins 0 losses: 2 / 32 = 0.0625; 9 wins 1 loss: 2 * 11 / 1024 = 0.0215.
pub fn sign_test_p(wins: u64, losses: u64) -> f64 {
    let k = wins + losses;
    let x = wins.min(losses);
    if k <= 120 {
        // Exact in integers: the tail of binomial coefficients (and each coefficient times k)
        // fits in a u128 up to k = 120, so p is the correctly rounded ratio and an even split
        // gives exactly 1 (statrs' incomplete beta returns 0.9999999999999991 for one win).
        let mut coefficient: u128 = 1;
        let mut tail: u128 = 0;
        for i in 0..=x {
            tail += coefficient;
            coefficient = coefficient * u128::from(k - i) / u128::from(i + 1);
        }
        return if 2 * tail >= 1u128 << k { 1.0 } else { tail as f64 / (1u128 << (k - 1)) as f64 };
    }
    let dist = Binomial::new(0.5, k).expect("p = 1/2 is valid");
    (2.0 * dist.cdf(x)).min(1.0)
}

/// The sign test's interval on the mean-difference scale. Conditional on the number of untied
/// cases `k`, A's wins are binomial(k, theta); the Clopper-Pearson interval for theta is the
/// inversion of the same equal-tailed test, so it excludes 1/2 exactly when the test rejects.
/// The mean difference is (k / n) * s * (2 theta - 1) when untied differences have mean size
/// s (exactly so for pass/fail data with one epoch, where s = 1), which maps theta's interval
/// onto the difference without changing which side of 0 it lies on.
///
/// With no untied case the conditional interval would be a point; instead it bounds how often
/// a case could differ without any of `n` showing it (Clopper-Pearson upper bound for 0/n) times
/// the largest possible difference, 1.
fn sign_interval(diffs: &[f64], wins: usize, losses: usize, alpha: f64) -> (f64, f64) {
    let n = diffs.len();
    let k = wins + losses;
    if k == 0 {
        let bound = if n == 0 { 1.0 } else { 1.0 - (alpha / 2.0).powf(1.0 / n as f64) };
        return (-bound, bound);
    }
    let size = diffs.iter().filter(|d| d.abs() > TIE).map(|d| d.abs()).sum::<f64>() / k as f64;
    let theta = clopper_pearson(wins as u64, k as u64, 1.0 - alpha);
    let scale = k as f64 / n as f64 * size;
    (scale * (2.0 * theta.lo - 1.0), scale * (2.0 * theta.hi - 1.0))
}

/// Holm's step-down procedure: which of several comparisons may be called at family-wise
/// error rate `alpha`. Same order as `p_values`.
pub fn holm(p_values: &[f64], alpha: f64) -> Vec<bool> {
    check_level(alpha, "alpha");
    holm_adjusted(p_values).into_iter().map(|p| p < alpha).collect()
}

/// Holm-adjusted p-values, in the order given: sorted ascending, the j-th smallest (from 0) is
/// multiplied by (m - j), capped at 1 and made non-decreasing. A comparison is called when its
/// adjusted p-value is below alpha, the same rule [`Verdict::from_test`] applies.
pub fn holm_adjusted(p_values: &[f64]) -> Vec<f64> {
    let m = p_values.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&i, &j| p_values[i].total_cmp(&p_values[j]));
    let mut adjusted = vec![0.0; m];
    let mut running = 0.0_f64;
    for (rank, &i) in order.iter().enumerate() {
        running = running.max(((m - rank) as f64 * p_values[i]).min(1.0));
        adjusted[i] = running;
    }
    adjusted
}
