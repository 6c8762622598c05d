//! Replays every seed and every kept finding (`fuzz/regressions/<target>/*`) through its
//! target: each must return without a panic and in reasonable time, so a bug the fuzzer found
//! stays fixed. Run with `cargo test -p hcbench-fuzz`.

use std::path::Path;
use std::time::{Duration, Instant};

use hcbench_fuzz::targets::{self, NAMES};

/// Far above any real input's time; a regression that reintroduces a hang or a quadratic
/// blow-up exceeds it by orders of magnitude.
const SLOW: Duration = Duration::from_secs(2);

fn replay(name: &str) -> usize {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut target = targets::by_name(name, repo).unwrap().unwrap();
    let mut inputs = target.seeds();
    let dir = repo.join("fuzz/regressions").join(name);
    let mut kept: Vec<_> =
        std::fs::read_dir(&dir).map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect()).unwrap_or_default();
    kept.sort();
    for file in &kept {
        inputs.push(std::fs::read(file).unwrap());
    }
    for (i, input) in inputs.iter().enumerate() {
        let started = Instant::now();
        target.run(input);
        let took = started.elapsed();
        assert!(took < SLOW, "{name}: input {i} took {took:?}");
    }
    kept.len()
}

#[test]
fn every_target_has_seeds() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    for name in NAMES {
        let target = targets::by_name(name, repo).unwrap().unwrap();
        assert!(!target.seeds().is_empty(), "target {name} has no seeds");
    }
}

#[test]
fn reply_inputs_replay() {
    replay("reply");
}

#[test]
fn trace_inputs_replay() {
    replay("trace");
}

#[test]
fn bench_inputs_replay() {
    replay("bench");
}

#[test]
fn models_inputs_replay() {
    replay("models");
}

#[test]
fn config_inputs_replay() {
    replay("config");
}

#[test]
fn script_inputs_replay() {
    replay("script");
}
