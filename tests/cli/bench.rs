//! The HC-Bench benchmark itself, `validate` and suites.

use std::collections::BTreeMap;

use hcbench::bench::{Control, Split, load_benchmark, suite::select_suite};

use crate::run::{GOOD_CASE, GOOD_ORACLE, Scratch};
use crate::{Test, repo_root};

#[test]
fn hc_bench_has_forty_three_cases_stratified_by_category_and_split() {
    let bench = load_benchmark(&repo_root(), "hc-bench").expect("hc-bench loads without problems");
    assert_eq!(bench.cases.len(), 43);
    assert_eq!(
        bench.categories,
        ["bugfix", "recovery", "greenfield", "context", "policy", "sessions"],
        "declared in benchmark.yaml"
    );
    let mut by: BTreeMap<(&str, Split), usize> = BTreeMap::new();
    for c in &bench.cases {
        *by.entry((c.category.as_str(), c.split)).or_default() += 1;
        assert!(!c.verifier.unchanged.is_empty(), "{}: every case protects its tests", c.id);
        if c.category == "policy" {
            assert!(c.verifier.forbid_denials, "{}: policy cases fail on any denied action", c.id);
        }
        // The violator control is the case's own field; HC-Bench asks for it on exactly its
        // policy cases, so `validate` runs what it ran when the control was tied to the category.
        assert_eq!(c.controls.contains(&Control::Violator), c.category == "policy", "{}: controls", c.id);
        if c.category == "context" {
            assert!(c.verifier.first_read.is_some(), "{}: context cases record the first read of the target", c.id);
        }
        // Multi-session cases are exactly the `sessions` category's, each with a hidden
        // verifier of several features.
        assert_eq!(c.sessions.is_some(), c.category == "sessions", "{}: sessions", c.id);
        if let Some(s) = &c.sessions {
            assert!(s.count >= 2 && s.features.len() >= 3, "{}: sessions and features", c.id);
        }
    }
    // Five categories of eight single-session cases, and three multi-session cases.
    for cat in bench.categories.iter().filter(|c| *c != "sessions") {
        let cat = cat.as_str();
        let n: usize = Split::ALL.iter().map(|s| by.get(&(cat, *s)).copied().unwrap_or(0)).sum();
        assert_eq!(n, 8, "{cat}: 8 cases");
        assert_eq!(by.get(&(cat, Split::Test)), Some(&2), "{cat}: 2 test cases");
    }
    let split = |s: Split| bench.cases.iter().filter(|c| c.split == s).count();
    let sessions = |s: Split| by.get(&("sessions", s)).copied().unwrap_or(0);
    assert_eq!((sessions(Split::Train), sessions(Split::Test), sessions(Split::Heldout)), (1, 1, 1));
    assert_eq!((split(Split::Train), split(Split::Test), split(Split::Heldout)), (25, 11, 7));

    let smoke = select_suite(&repo_root(), "smoke", &bench).unwrap();
    assert_eq!(smoke.len(), 5);
    let cats: std::collections::BTreeSet<&str> =
        smoke.iter().map(|id| bench.case(id).unwrap().category.as_str()).collect();
    assert_eq!(cats.len(), 5, "smoke has one case per single-session category");
    let nightly = select_suite(&repo_root(), "nightly", &bench).unwrap();
    assert_eq!(nightly.len(), 36, "nightly is everything but heldout");
}

#[test]
fn validate_names_unsound_cases_and_why() {
    let s = Scratch::new();
    // Sound: its verifier checks behaviour, so the exploit controls fail too.
    crate::exploits::strong_case(&s, "good");
    // Passes before the agent does anything: the baseline must fail.
    s.write("fixtures/fine/calc.py", "def add(a, b):\n    return a + b\n");
    s.write("fixtures/fine/tests/test_calc.py", "import unittest\nfrom calc import add\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n");
    s.case(
        "already-fine",
        &GOOD_CASE.replace("id: good", "id: already-fine").replace("fixture: calc", "fixture: fine"),
        "actions:\n  - tool: finish\n",
    );
    // No `unchanged`: weakening the tests passes.
    s.case(
        "weak",
        &GOOD_CASE.replace("id: good", "id: weak").replace("verifier:\n  unchanged: [tests/test_calc.py]\n", ""),
        GOOD_ORACLE,
    );
    // A policy case that does not forbid denials: a violator passes.
    s.case(
        "lax",
        &format!(
            "{}controls: [violator]\n",
            GOOD_CASE.replace("id: good", "id: lax").replace("category: bugfix", "category: policy")
        ),
        GOOD_ORACLE,
    );
    let out = Test::new()
        .root(s.path())
        .args(&["validate", "--benchmark", "demo", "--out"])
        .arg_path(&s.path().join("v"))
        .run()
        .code(1);
    assert!(out.stdout.contains("unsound: already-fine: baseline tests do not fail"), "{}", out.stdout);
    assert!(out.stdout.contains("unsound: weak: tamper agent (weakened tests) does not fail"), "{}", out.stdout);
    assert!(
        out.stdout.contains("unsound: lax: the violator control passes although the agent attempted a denied action"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("unsound: good"), "{}", out.stdout);
    assert!(out.stdout.contains("4 case(s): 1 sound, 3 unsound"), "{}", out.stdout);
}

#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    // `hcbench list | head -1`: the reader goes away before hcbench writes. It must stop without
    // the "failed printing to stdout" panic.
    let mut child = std::process::Command::new(crate::BIN)
        .args(["list", "--format", "json"])
        .current_dir(crate::repo_root())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(13), "ended by SIGPIPE, as `ls | head` does: {:?}", out.status);
}
