//! The exit policy a CI job relies on (docs/commands.md#exit-codes): a run that measured
//! nothing, a broken control arm and a missed pass-rate floor each end with their own code,
//! from `run`, `matrix` and `hcbench report` alike.

use std::path::Path;

use serde_json::Value;

use crate::Test;
use crate::run::{GOOD_CASE, GOOD_ORACLE, Scratch};

const COVERAGE: i32 = 4;
const CONTROL_ARM: i32 = 5;
const FLOOR: i32 = 6;

/// A scratch benchmark of two sound cases.
fn two_cases() -> Scratch {
    let s = Scratch::new();
    s.case("good", GOOD_CASE, GOOD_ORACLE);
    s.case("other", &GOOD_CASE.replace("id: good", "id: other"), GOOD_ORACLE);
    s
}

fn report_json(run_dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(run_dir.join("reports/report.json")).unwrap()).unwrap()
}

#[test]
fn without_python3_on_the_cells_path_nothing_runs_and_the_case_file_is_named() {
    // hcbench itself needs nothing from PATH; the cases' test command (python3) does. Without
    // a sandbox, commands search hcbench's PATH (a sandbox has its own, of the system's dirs).
    // That is known before any cell starts, so it is a load-time error (exit 2) naming the case
    // file and field, not a run of harness errors.
    let s = two_cases();
    let empty = tempfile::tempdir().unwrap();
    let out = Test::new()
        .root(s.path())
        .env("PATH", &empty.path().to_string_lossy())
        .args(&["matrix", "--sandbox", "none", "--benchmark", "demo", "--profiles", "oracle,nop", "--out"])
        .arg_path(&s.path().join("m"))
        .run()
        .code(2)
        .stderr_has("cases/good.yaml: case `good`: field `test_command`: `python3` is not found on the PATH");
    assert!(out.stderr.contains("cases/other.yaml"), "{}", out.stderr);
    assert!(!s.path().join("m").exists(), "nothing is written");
}

/// A scratch benchmark of two cases whose test program exists but cannot start: its
/// interpreter is missing, which no check short of running it can see.
fn two_cases_that_cannot_start() -> Scratch {
    let s = Scratch::new();
    s.write("benchmarks/demo/verifiers/run-tests", "#!/nonexistent/python3\n");
    let script = s.path().join("benchmarks/demo/verifiers/run-tests");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    for id in ["good", "other"] {
        let case = GOOD_CASE.replace("id: good", &format!("id: {id}")).replace(
            "test_command: [python3, -m, unittest, discover, -s, tests]",
            "test_command: ['{benchmark_dir}/verifiers/run-tests']",
        );
        s.case(id, &case, GOOD_ORACLE);
    }
    s
}

#[test]
fn when_the_test_program_cannot_start_every_cell_is_a_harness_error_and_matrix_exits_4_not_0() {
    let s = two_cases_that_cannot_start();
    let run_dir = s.path().join("m");
    let out = Test::new()
        .root(s.path())
        .args(&["matrix", "--wide", "--sandbox", "none", "--benchmark", "demo", "--profiles", "oracle,nop", "--out"])
        .arg_path(&run_dir)
        .run()
        .code(COVERAGE);
    assert!(out.stdout.contains("verdict: exit 4 (coverage below threshold)"), "{}", out.stdout);
    assert!(
        out.stdout.contains(
            "profile `oracle`: coverage 0.0% (0 of 2 planned cell(s) have a verdict) is below --min-coverage 90.0%"
        ),
        "{}",
        out.stdout
    );
    let r = report_json(&run_dir);
    assert!(r["cells"].as_array().unwrap().iter().all(|c| c["outcome"] == "harness_error"), "{}", r["cells"]);
    assert_eq!(r["verdict"]["exit_code"], COVERAGE);
    let checks: Vec<&str> =
        r["verdict"]["findings"].as_array().unwrap().iter().map(|f| f["check"].as_str().unwrap()).collect();
    assert_eq!(
        checks,
        ["coverage", "coverage", "control_arm"],
        "every failing check is listed, the deciding one first"
    );
    let md = std::fs::read_to_string(run_dir.join("reports/report.md")).unwrap();
    assert!(md.contains("**Verdict:** exit 4 (coverage below threshold)"), "{md}");

    // The report of the run directory exits as the run did.
    Test::new().args(&["report"]).arg_path(&run_dir).run().code(COVERAGE);

    // `run` too: before the policy it said 1, "a case failed", although nothing was judged.
    Test::new()
        .root(s.path())
        .args(&["run", "--sandbox", "none", "--benchmark", "demo", "--format", "json", "--out"])
        .arg_path(&s.path().join("r"))
        .run()
        .code(COVERAGE)
        .stderr_has("coverage 0.0%");

    // A lower threshold is the user's call: with coverage not checked, the oracle's harness
    // errors are what the control arm ran and did not pass.
    Test::new()
        .root(s.path())
        .args(&["matrix", "--sandbox", "none", "--benchmark", "demo", "--min-coverage", "0", "--out"])
        .arg_path(&s.path().join("m0"))
        .run()
        .code(CONTROL_ARM);
}

#[test]
fn an_oracle_that_fails_a_case_is_exit_5_whatever_the_other_profiles_did() {
    let s = two_cases();
    // The reference solution of `wrong` does not fix the bug: the benchmark is broken.
    s.case("wrong", &GOOD_CASE.replace("id: good", "id: wrong"), &GOOD_ORACLE.replace("'a + b'", "'a * b'"));
    let run_dir = s.path().join("m");
    let out = Test::new()
        .root(s.path())
        .args(&[
            "matrix",
            "--wide",
            "--benchmark",
            "demo",
            "--profiles",
            "oracle,nop",
            "--min-coverage",
            "0.5",
            "--out",
        ])
        .arg_path(&run_dir)
        .run()
        .code(CONTROL_ARM);
    assert!(
        out.stdout.contains("control arm `oracle` did not pass 1 of the 3 cell(s) it ran (wrong__oracle failed)"),
        "{}",
        out.stdout
    );
    let r = report_json(&run_dir);
    assert_eq!(r["status"], "complete");
    assert_eq!(r["verdict"]["control_arm"], "oracle");
    assert_eq!(r["verdict"]["min_coverage"], 0.5, "the thresholds are recorded with the verdict");
    Test::new().args(&["report", "--format", "md"]).arg_path(&run_dir).run().code(CONTROL_ARM);

    // Without the oracle in the run there is no control arm to fail.
    Test::new()
        .root(s.path())
        .args(&["matrix", "--benchmark", "demo", "--profiles", "nop", "--out"])
        .arg_path(&s.path().join("n"))
        .run()
        .code(0);
}

#[test]
fn fail_under_is_a_pass_rate_floor_per_profile_for_matrix_and_run() {
    let s = two_cases();
    let matrix = |fail_under: &str, out: &str| {
        Test::new()
            .root(s.path())
            .args(&[
                "matrix",
                "--wide",
                "--benchmark",
                "demo",
                "--profiles",
                "oracle,nop",
                "--fail-under",
                fail_under,
                "--out",
            ])
            .arg_path(&s.path().join(out))
            .run()
    };
    // nop passes nothing: under any positive floor.
    let out = matrix("0.5", "m").code(FLOOR);
    assert!(
        out.stdout
            .contains("profile `nop`: pass rate 0.0% (0 of 2 planned cell(s) passed) is below --fail-under 50.0%"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("profile `oracle`: pass rate"), "oracle is above the floor:\n{}", out.stdout);
    Test::new().args(&["report"]).arg_path(&s.path().join("m")).run().code(FLOOR);
    matrix("0", "m0").code(0);

    // `run` exits 1 when a case fails; a floor replaces that rule.
    let run = |extra: &[&str], out: &str| {
        Test::new()
            .root(s.path())
            .args(&["run", "--benchmark", "demo", "--profile", "nop", "--out"])
            .arg_path(&s.path().join(out))
            .args(extra)
            .run()
    };
    run(&[], "r1").code(1);
    run(&["--fail-under", "0"], "r2").code(0);
    run(&["--fail-under", "0.1"], "r3").code(FLOOR);
    Test::new().args(&["report"]).arg_path(&s.path().join("r1")).run().code(1);
    Test::new().args(&["report"]).arg_path(&s.path().join("r3")).run().code(FLOOR);

    // Rates are fractions; a percentage is refused before anything runs.
    Test::new()
        .root(s.path())
        .args(&["matrix", "--benchmark", "demo", "--fail-under", "80"])
        .run()
        .code(2)
        .stderr_has("--fail-under 80: give a fraction from 0 to 1");
    Test::new()
        .root(s.path())
        .args(&["matrix", "--min-coverage", "0.5", "--resume"])
        .arg_path(&s.path().join("m"))
        .run()
        .code(2)
        .stderr_has("keeps the ones the run started with");
}
