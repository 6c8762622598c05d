//! Unit tests against published reference values and hand computations.

use std::collections::BTreeMap;

use super::power::{Variance, mde_for, min_cases};
use super::*;

fn close(actual: f64, expected: f64, tol: f64) -> bool {
    (actual - expected).abs() <= tol
}

#[track_caller]
fn assert_interval(i: Interval, lo: f64, hi: f64, tol: f64) {
    assert!(close(i.lo, lo, tol) && close(i.hi, hi, tol), "got {:.4}-{:.4}, expected {lo}-{hi}", i.lo, i.hi);
}

fn profile(values: &[(&str, &[f64])]) -> BTreeMap<String, Vec<f64>> {
    values.iter().map(|(case, v)| (case.to_string(), v.to_vec())).collect()
}

/// Newcombe (1998), "Two-sided confidence intervals for the single proportion: comparison of
/// seven methods", Statistics in Medicine 17:857-872, Table II, method 3 (score, Wilson) and
/// method 5 (exact, Clopper-Pearson), 95%, rounded to four places.
#[test]
fn wilson_and_clopper_pearson_match_newcombe_1998() {
    let table = [
        // (x, n, Wilson lo, hi, Clopper-Pearson lo, hi)
        (81, 263, 0.2553, 0.3662, 0.2527, 0.3676),
        (15, 148, 0.0624, 0.1605, 0.0578, 0.1617),
        (0, 20, 0.0, 0.1611, 0.0, 0.1684),
        (1, 29, 0.0061, 0.1718, 0.0009, 0.1776),
    ];
    for (x, n, wl, wh, cl, ch) in table {
        assert_interval(wilson(x, n, 0.95), wl, wh, 6e-5);
        assert_interval(clopper_pearson(x, n, 0.95), cl, ch, 6e-5);
    }
}

#[test]
fn zero_of_five_is_zero_to_forty_three_percent_not_a_point() {
    let i = wilson(0, 5, 0.95);
    assert_eq!(i.lo, 0.0);
    assert_interval(i, 0.0, 0.4345, 1e-4);
    assert_eq!(wilson(5, 5, 0.95).hi, 1.0);
    assert_interval(wilson(5, 5, 0.95), 0.5655, 1.0, 1e-4);
    // Clopper-Pearson 0/5: 1 - 0.025^(1/5).
    assert_interval(clopper_pearson(0, 5, 0.95), 0.0, 1.0 - 0.025_f64.powf(0.2), 1e-9);
    assert_eq!(wilson(0, 0, 0.95), Interval { lo: 0.0, hi: 1.0, method: Method::Wilson });
}

#[test]
fn binary_one_epoch_reports_wilson_over_cases() {
    let e = clustered_mean(&[vec![0.0], vec![0.0], vec![0.0], vec![0.0], vec![0.0]], 0.95);
    assert_eq!((e.mean, e.cases, e.cells), (0.0, 5, 5));
    assert_eq!(e.interval.method, Method::Wilson);
    assert_interval(e.interval, 0.0, 0.4345, 1e-4);
}

#[test]
fn clustered_se_is_over_cases_not_cells() {
    // Three cases, four identical epochs each: the epochs add nothing, the SE is that of three
    // case means. Hand computation: means 0.2, 0.5, 0.8; sd 0.3; se 0.3 / sqrt 3;
    // t(0.975, 2) = 4.302653.
    let per_case: Vec<Vec<f64>> = [0.2, 0.5, 0.8].iter().map(|&x| vec![x; 4]).collect();
    let e = clustered_mean(&per_case, 0.95);
    assert_eq!((e.cases, e.cells), (3, 12));
    assert!(close(e.mean, 0.5, 1e-12));
    assert!(close(e.se, 0.3 / 3f64.sqrt(), 1e-12));
    assert_eq!(e.interval.method, Method::ClusteredSe);
    let half = 4.302653 * 0.3 / 3f64.sqrt();
    assert_interval(e.interval, (0.5 - half).max(0.0), (0.5 + half).min(1.0), 1e-5);

    // Treating the 12 cells as independent would have given a far narrower interval.
    let flat: Vec<Vec<f64>> = per_case.iter().flatten().map(|&x| vec![x]).collect();
    assert!(clustered_mean(&flat, 0.95).interval.width() < e.interval.width() / 2.0);
}

#[test]
fn clustered_mean_weighs_cases_equally_and_skips_missing_cases() {
    let e = clustered_mean(&[vec![1.0, 1.0, 1.0, 0.0], vec![0.0], vec![]], 0.95);
    assert_eq!((e.cases, e.cells), (2, 5));
    assert!(close(e.mean, 0.375, 1e-12));
}

#[test]
fn no_spread_never_gives_a_zero_width_interval() {
    // Every epoch of every case passed: the clustered SE is 0, but five cases cannot prove a
    // 100% pass rate. Wilson over the five cases.
    let e = clustered_mean(&vec![vec![1.0; 3]; 5], 0.95);
    assert_eq!(e.se, 0.0);
    assert_eq!(e.interval.method, Method::Wilson);
    assert_interval(e.interval, 0.5655, 1.0, 1e-4);
    // One case: nothing about spread between cases is known.
    let one = clustered_mean(&[vec![0.4, 0.6]], 0.95);
    assert!(one.interval.width() > 0.5);
    // Unbounded values from one case: an honest "anything".
    let raw = clustered_mean(&[vec![12.0, 14.0]], 0.95);
    assert!(raw.interval.lo.is_infinite() && raw.interval.hi.is_infinite());
}

#[test]
fn pass_fail_with_epochs_is_never_narrower_than_independent_cells() {
    // 39 cases pass all three epochs, one passes two of three: the t interval alone would be
    // about 0.975-1.0; independent cells (119/120) already give 0.954-0.9985.
    let mut per_case = vec![vec![1.0; 3]; 39];
    per_case.push(vec![1.0, 1.0, 0.0]);
    let e = clustered_mean(&per_case, 0.95);
    let cells = wilson(119, 120, 0.95);
    assert_eq!(e.interval.method, Method::ClusteredSe);
    assert!(e.interval.lo <= cells.lo && e.interval.hi >= cells.hi, "{:?} vs {cells:?}", e.interval);
}

/// Exact binomial (sign test / exact McNemar) p-values by hand: 2 * sum of the smaller tail of
/// binomial(k, 1/2).
#[test]
fn sign_test_matches_exact_binomial_p_values() {
    assert!(close(sign_test_p(5, 0), 0.0625, 1e-12));
    assert!(close(sign_test_p(9, 1), 22.0 / 1024.0, 1e-12)); // 0.0215
    assert!(close(sign_test_p(1, 9), 22.0 / 1024.0, 1e-12));
    assert!(close(sign_test_p(6, 0), 0.03125, 1e-12));
    assert!(close(sign_test_p(8, 2), 2.0 * 56.0 / 1024.0, 1e-12)); // 0.109
    assert_eq!(sign_test_p(3, 3), 1.0);
    assert_eq!(sign_test_p(0, 0), 1.0);
}

#[test]
fn five_wins_out_of_five_are_within_noise() {
    // The example: oracle passes 5 of 5 cases, smol none. p = 0.0625.
    let cases = ["a", "b", "c", "d", "e"];
    let oracle = profile(&cases.map(|c| (c, &[1.0][..])));
    let smol = profile(&cases.map(|c| (c, &[0.0][..])));
    let p = paired(&oracle, &smol, 0.05);
    assert_eq!((p.cases, p.wins, p.losses, p.ties), (5, 5, 0, 0));
    assert_eq!(p.method, Method::ExactSign);
    assert!(close(p.p_value, 0.0625, 1e-12));
    assert_eq!(p.verdict, Verdict::WithinNoise);
    assert_eq!(p.mean_diff, 1.0);
    assert!(p.interval.lo < 0.0 && p.interval.hi == 1.0, "{:?}", p.interval);

    // Six out of six is enough at 0.05, and the interval then excludes 0.
    let six = ["a", "b", "c", "d", "e", "f"];
    let p = paired(&profile(&six.map(|c| (c, &[1.0][..]))), &profile(&six.map(|c| (c, &[0.0][..]))), 0.05);
    assert_eq!(p.verdict, Verdict::ABetter);
    assert!(p.interval.lo > 0.0);
    let p = paired(&profile(&six.map(|c| (c, &[0.0][..]))), &profile(&six.map(|c| (c, &[1.0][..]))), 0.05);
    assert_eq!(p.verdict, Verdict::BBetter);
    assert!(p.interval.hi < 0.0);
}

#[test]
fn one_case_never_decides() {
    for (a, b) in [(1.0, 0.0), (0.0, 1.0), (1.0, 1.0)] {
        let p = paired(&profile(&[("only", &[a])]), &profile(&[("only", &[b])]), 0.05);
        assert_eq!(p.verdict, Verdict::WithinNoise);
        assert_eq!(p.p_value, 1.0);
        assert!(p.interval.width() > 1.0);
    }
}

#[test]
fn paired_uses_only_cases_both_sides_measured() {
    // B's "c" and "d" were infrastructure errors (not passed in); A's "e" likewise.
    let a = profile(&[("a", &[1.0]), ("b", &[1.0]), ("c", &[1.0]), ("d", &[1.0]), ("e", &[])]);
    let b = profile(&[("a", &[0.0]), ("b", &[1.0]), ("e", &[0.0])]);
    let p = paired(&a, &b, 0.05);
    assert_eq!((p.cases, p.wins, p.ties), (2, 1, 1));
    assert_eq!(p.mean_diff, 0.5);
    let none = paired(&a, &BTreeMap::new(), 0.05);
    assert_eq!((none.cases, none.verdict), (0, Verdict::WithinNoise));
    assert_eq!((none.interval.lo, none.interval.hi), (-1.0, 1.0));
}

#[test]
fn all_ties_bound_the_difference_instead_of_claiming_zero() {
    let cases: Vec<String> = (0..10).map(|i| format!("c{i}")).collect();
    let a: BTreeMap<String, Vec<f64>> = cases.iter().map(|c| (c.clone(), vec![1.0])).collect();
    let p = paired(&a, &a, 0.05);
    assert_eq!((p.ties, p.verdict), (10, Verdict::WithinNoise));
    let bound = 1.0 - 0.025_f64.powf(0.1);
    assert_interval(p.interval, -bound, bound, 1e-12);
}

#[test]
fn many_cases_use_the_paired_clustered_se() {
    // 40 cases; differences: 10 of +1, 2 of -1, 28 ties. Hand computation of the t test.
    let diffs: Vec<f64> = [vec![1.0; 10], vec![-1.0; 2], vec![0.0; 28]].concat();
    let p = paired_differences(&diffs, true, 0.05);
    assert_eq!(p.method, Method::PairedClusteredSe);
    let m = 8.0 / 40.0;
    let var: f64 = (10.0 * (1.0 - m) * (1.0 - m) + 2.0 * (1.0 + m) * (1.0 + m) + 28.0 * m * m) / 39.0;
    let se = (var / 40.0).sqrt();
    assert!(close(p.mean_diff, m, 1e-12) && close(p.se, se, 1e-12));
    // t = 0.2 / 0.0816497 = 2.449490 with 39 df: two-sided p = 0.01890 (numerical integration
    // of the t density); t(0.975, 39) = 2.022691.
    assert!(close(p.p_value, 0.018900, 1e-5), "{}", p.p_value);
    assert_interval(p.interval, m - 2.022691 * se, m + 2.022691 * se, 1e-5);
    assert_eq!(p.verdict, Verdict::ABetter);

    // With epochs, the per-case mean is the unit: 40 cases x 3 epochs is still 40 pairs.
    let a: BTreeMap<String, Vec<f64>> = (0..40).map(|i| (format!("c{i}"), vec![1.0, 0.0, 1.0])).collect();
    let b: BTreeMap<String, Vec<f64>> = (0..40).map(|i| (format!("c{i}"), vec![0.0, 1.0, 1.0])).collect();
    let p = paired(&a, &b, 0.05);
    assert_eq!((p.cases, p.ties, p.verdict), (40, 40, Verdict::WithinNoise));
}

#[test]
fn interval_and_verdict_agree() {
    // Over a grid of small and large samples, the interval excludes 0 exactly when a
    // difference is called.
    for n in [3usize, 7, 12, 25, 29, 30, 45] {
        for wins in 0..=n {
            for losses in 0..=(n - wins) {
                let diffs: Vec<f64> = [vec![1.0; wins], vec![-1.0; losses], vec![0.0; n - wins - losses]].concat();
                let p = paired_differences(&diffs, true, 0.05);
                let excludes = p.interval.lo > 0.0 || p.interval.hi < 0.0;
                assert_eq!(excludes, p.verdict != Verdict::WithinNoise, "n {n} wins {wins} losses {losses}: {p:?}");
            }
        }
    }
}

/// Holm (1979) as worked in most textbooks: p = 0.01, 0.04, 0.03, 0.005 at alpha 0.05. Sorted
/// thresholds 0.0125, 0.0167, 0.025, 0.05: 0.005 and 0.01 are rejected, 0.03 > 0.025 stops.
#[test]
fn holm_matches_the_worked_example() {
    let p = [0.01, 0.04, 0.03, 0.005];
    assert_eq!(holm(&p, 0.05), vec![true, false, false, true]);
    let adj = holm_adjusted(&p);
    for (a, e) in adj.iter().zip([0.03, 0.06, 0.06, 0.02]) {
        assert!(close(*a, e, 1e-12), "{adj:?}");
    }
    assert_eq!(holm_adjusted(&[0.9, 0.8]), vec![1.0, 1.0]);
    assert!(holm(&[], 0.05).is_empty());
    // One comparison: no correction.
    assert_eq!(holm_adjusted(&[0.03]), vec![0.03]);
}

#[test]
fn mde_matches_a_hand_computation() {
    // z(0.975) + z(0.8) = 1.959964 + 0.841621 = 2.801585.
    // One epoch, p = 0.5: variance of a difference 2 * 0.25 = 0.5; sqrt(0.5 / 40) = 0.111803.
    assert!(close(mde(40, 1, 0.5, 0.05, 0.8), 2.801585 * 0.111803, 1e-5));
    // Three epochs: between 0.125, within 0.125 / 3: 2 * 0.1666667 / 40 -> sqrt = 0.0912871.
    assert!(close(mde(40, 3, 0.5, 0.05, 0.8), 2.801585 * 0.0912871, 1e-5));
    assert_eq!(mde(5, 10, 0.5, 0.05, 0.8), f64::INFINITY);
    assert_eq!(min_cases(0.05), 6);
    assert_eq!(mde(40, 0, 0.5, 0.05, 0.8), f64::INFINITY);
}

#[test]
fn mde_shrinks_with_cases_and_epochs_and_grows_with_stricter_alpha() {
    let mut last = f64::INFINITY;
    for cases in [6, 10, 20, 40, 80, 160, 1000] {
        let m = mde(cases, 1, 0.5, 0.05, 0.8);
        assert!(m < last, "{cases}: {m} !< {last}");
        last = m;
    }
    let mut last = f64::INFINITY;
    for epochs in 1..10 {
        let m = mde(40, epochs, 0.5, 0.05, 0.8);
        assert!(m < last);
        last = m;
    }
    // Epochs never get below the between-case floor.
    assert!(mde(40, 1_000_000, 0.5, 0.05, 0.8) > 2.8 * (2.0 * 0.125 / 40.0_f64).sqrt());
    assert!(mde(40, 1, 0.5, 0.01, 0.8) > mde(40, 1, 0.5, 0.05, 0.8));
    assert!(mde(40, 1, 0.5, 0.05, 0.9) > mde(40, 1, 0.5, 0.05, 0.8));
    // Rates far from one half have less variance, so smaller MDEs; 0% and 100% are clamped.
    assert!(mde(40, 1, 0.9, 0.05, 0.8) < mde(40, 1, 0.5, 0.05, 0.8));
    assert_eq!(mde(40, 1, 1.0, 0.05, 0.8), mde(40, 1, 0.95, 0.05, 0.8));
}

#[test]
fn cases_and_epochs_needed_invert_the_mde() {
    for target in [0.05, 0.1, 0.2, 0.3] {
        for epochs in [1, 3, 5] {
            let n = cases_needed(target, epochs, 0.5, 0.05, 0.8);
            assert!(mde(n, epochs, 0.5, 0.05, 0.8) <= target + 1e-12);
            if n > min_cases(0.05) {
                assert!(mde(n - 1, epochs, 0.5, 0.05, 0.8) > target);
            }
        }
    }
    // Hand computation: 2.801585^2 * 0.5 / 0.1^2 = 392.4 -> 393 cases.
    assert_eq!(cases_needed(0.1, 1, 0.5, 0.05, 0.8), 393);
    assert_eq!(cases_needed(0.9, 1, 0.5, 0.05, 0.8), 6);

    let m = epochs_needed(0.2, 80, 0.5, 0.05, 0.8).expect("reachable");
    assert!(mde(80, m, 0.5, 0.05, 0.8) <= 0.2);
    assert!(m == 1 || mde(80, m - 1, 0.5, 0.05, 0.8) > 0.2);
    // 40 cases cannot reach 0.1 with any number of epochs (the floor is about 0.22).
    assert_eq!(epochs_needed(0.1, 40, 0.5, 0.05, 0.8), None);
    assert_eq!(epochs_needed(0.5, 3, 0.5, 0.05, 0.8), None);
}

#[test]
fn observed_variance_splits_between_and_within() {
    // Case means 0 and 1 with no within-case spread: all between.
    let v = Variance::observed(&[vec![0.0, 0.0], vec![1.0, 1.0]]).expect("two cases");
    assert_eq!(v.within, 0.0);
    assert!(close(v.between, 0.5, 1e-12));
    // Identical cases, noisy epochs: all within.
    let v = Variance::observed(&[vec![0.0, 1.0], vec![1.0, 0.0]]).expect("two cases");
    assert_eq!(v.between, 0.0);
    assert!(close(v.within, 0.5, 1e-12));
    assert!(mde_for(&v, 40, 4, 0.05, 0.8) < mde_for(&v, 40, 1, 0.05, 0.8));
    assert_eq!(Variance::observed(&[vec![1.0]]), None);
}

#[test]
fn method_and_verdict_names_are_stable() {
    assert_eq!(Method::Wilson.as_str(), "Wilson");
    assert_eq!(Method::ExactSign.to_string(), "exact sign test");
    assert_eq!(serde_json::to_string(&Method::PairedClusteredSe).unwrap(), "\"paired_clustered_se\"");
    assert_eq!(serde_json::to_string(&Verdict::WithinNoise).unwrap(), "\"within_noise\"");
    assert_eq!(Verdict::from_test(0.01, 0.05, -0.2), Verdict::BBetter);
    assert_eq!(Verdict::from_test(0.05, 0.05, 0.2), Verdict::WithinNoise);
}

#[test]
fn sign_test_is_exact_for_small_and_continuous_for_large_counts() {
    assert_eq!(sign_test_p(0, 1), 1.0);
    assert_eq!(sign_test_p(0, 0), 1.0);
    // k = 120 (integer path) and k = 122 (statrs path) give neighbouring values.
    let exact = sign_test_p(50, 70);
    let beta = sign_test_p(51, 71);
    assert!(exact > 0.0 && beta > 0.0 && (exact - beta).abs() < 0.01, "{exact} {beta}");
    assert!(sign_test_p(200, 0) < 1e-50);
}
