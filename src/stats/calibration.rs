//! Calibration by simulation: does "A better" mean what it says?
//!
//! Each simulated run draws fresh cases, each with its own true pass rate (cases differ in
//! difficulty), and gives two profiles `epochs` pass/fail cells per case. In A/A runs both
//! profiles share every case's true rate, so any called difference is a false alarm; the
//! share of runs with a call must stay near alpha. In A/B runs A's rate on every case is B's
//! plus a known effect, and the 95% interval must cover that effect in about 95% of runs.
//! Seeds are fixed, so the numbers are reproducible; `docs/statistics.md` quotes the output of
//! `cargo test --lib stats::calibration -- --ignored --nocapture`.

use std::collections::BTreeMap;

use super::{Verdict, paired};

/// What a batch of simulated comparisons showed.
#[derive(Debug)]
struct Rates {
    /// Share of runs whose verdict was not "within noise".
    called: f64,
    /// Share of runs whose interval contained the true difference.
    covered: f64,
}

/// `runs` simulated comparisons over `cases` cases with `epochs` epochs. B's true rate on a
/// case is uniform in `[low, high]`; A's is B's plus `effect` (keep `high + effect <= 1`).
fn simulate(runs: usize, cases: usize, epochs: usize, (low, high): (f64, f64), effect: f64, seed: u64) -> Rates {
    assert!(high + effect <= 1.0, "A's rate must stay a probability");
    let mut rng = fastrand::Rng::with_seed(seed);
    let names: Vec<String> = (0..cases).map(|i| format!("case-{i:03}")).collect();
    let cells = |rng: &mut fastrand::Rng, rate: f64| -> Vec<f64> {
        (0..epochs).map(|_| if rng.f64() < rate { 1.0 } else { 0.0 }).collect()
    };
    let (mut called, mut covered) = (0, 0);
    for _ in 0..runs {
        let mut a = BTreeMap::new();
        let mut b = BTreeMap::new();
        for name in &names {
            let rate = low + (high - low) * rng.f64();
            a.insert(name.clone(), cells(&mut rng, rate + effect));
            b.insert(name.clone(), cells(&mut rng, rate));
        }
        let p = paired(&a, &b, 0.05);
        called += usize::from(p.verdict != Verdict::WithinNoise);
        covered += usize::from(p.interval.contains(effect));
    }
    Rates { called: called as f64 / runs as f64, covered: covered as f64 / runs as f64 }
}

const RUNS: usize = 2_000;
/// The spread of true per-case pass rates in A/A runs: from nearly impossible to nearly sure.
const SPREAD: (f64, f64) = (0.02, 0.98);
/// A/B runs: B's rates in [0.10, 0.75], A fifteen points better on every case.
const AB_SPREAD: (f64, f64) = (0.10, 0.75);
const EFFECT: f64 = 0.15;

/// The bar: at most 5% false calls plus simulation error (the standard error of a 5%
/// rate over 2,000 runs is 0.5 points, so 6.5% is three of them), and at least 93% coverage.
#[test]
fn aa_false_calls_and_ab_coverage_are_calibrated_at_40_cases() {
    for epochs in [1, 3] {
        let aa = simulate(RUNS, 40, epochs, SPREAD, 0.0, 11 + epochs as u64);
        assert!(aa.called <= 0.065, "A/A, {epochs} epoch(s): {:.1}% called", aa.called * 100.0);
        assert!(aa.covered >= 0.93, "A/A, {epochs} epoch(s): {:.1}% covered", aa.covered * 100.0);
        let ab = simulate(RUNS, 40, epochs, AB_SPREAD, EFFECT, 23 + epochs as u64);
        assert!(ab.covered >= 0.93, "A/B, {epochs} epoch(s): {:.1}% covered", ab.covered * 100.0);
    }
}

/// Below 30 cases the exact sign test decides; an exact test cannot call more than alpha.
#[test]
fn exact_path_is_conservative() {
    let aa = simulate(RUNS, 12, 1, SPREAD, 0.0, 5);
    assert!(aa.called <= 0.05, "A/A, 12 cases: {:.1}% called", aa.called * 100.0);
}

/// Prints the measured rates quoted in docs/statistics.md: the unit test's 2,000-run figures
/// and a 20,000-run table over more sizes, whose simulation error (0.15 points at 5%) is small
/// enough to show the methods' own error rates.
#[test]
#[ignore = "prints calibration numbers; run with --ignored --nocapture"]
fn print_calibration() {
    println!("alpha 0.05; A/A spread {SPREAD:?}; A/B spread {AB_SPREAD:?} + {EFFECT}");
    for epochs in [1, 3] {
        let aa = simulate(RUNS, 40, epochs, SPREAD, 0.0, 11 + epochs as u64);
        let ab = simulate(RUNS, 40, epochs, AB_SPREAD, EFFECT, 23 + epochs as u64);
        println!(
            "unit test, {RUNS} runs, 40 cases, {epochs} epoch(s): A/A called {:.1}%, A/B covered {:.1}%",
            aa.called * 100.0,
            ab.covered * 100.0
        );
    }
    let runs = 20_000;
    println!(
        "| cases | epochs | A/A: difference called | A/B: interval covers {EFFECT} | A/B: difference called (power) |"
    );
    println!("|---|---|---|---|---|");
    for cases in [10, 20, 40, 100] {
        for epochs in [1, 3] {
            let aa = simulate(runs, cases, epochs, SPREAD, 0.0, 99);
            let ab = simulate(runs, cases, epochs, AB_SPREAD, EFFECT, 98);
            println!(
                "| {cases} | {epochs} | {:.1}% | {:.1}% | {:.1}% |",
                aa.called * 100.0,
                ab.covered * 100.0,
                ab.called * 100.0
            );
        }
    }
}
