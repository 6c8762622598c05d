//! Verdicts code under test cannot forge: a case whose tests run through hcbench's runner
//! fails when the module under test exits at import, monkeypatches unittest, or when a test
//! the case requires is skipped, although each of these makes `python3 -m unittest` exit 0.
//! Every cell here runs in the default sandbox (bubblewrap).

use std::path::Path;

use serde_json::Value;

use crate::Test;
use crate::run::{Scratch, by_cell};

/// The calc fixture's case, judged by the runner. No `unchanged` check on purpose: the runner
/// alone must catch a skipped test.
const RUNNER_CASE: &str = "id: calc\ncategory: bugfix\nsplit: train\nfixture: calc\nprompt: fix add\nstep_budget: 5\ntimeout_s: 30\ntests:\n  runner: unittest\n  fail_to_pass: [test_calc.T.test_add]\n  pass_to_pass: [test_calc.T.test_sub]\n";
const ORACLE: &str = "actions:\n  - tool: edit_file\n    args: {path: calc.py, old: 'a - b', new: 'a + b'}\n  - tool: run_tests\n  - tool: finish\n";

fn scratch() -> Scratch {
    let s = Scratch::new();
    s.write("fixtures/calc/calc.py", "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n");
    s.write(
        "fixtures/calc/tests/test_calc.py",
        "import unittest\nfrom calc import add, sub\n\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n    def test_sub(self):\n        self.assertEqual(sub(5, 3), 2)\n",
    );
    s.case("calc", RUNNER_CASE, ORACLE);
    s
}

/// Runs `actions` (YAML list items) as a scripted agent on the calc case; the cell's summary
/// and its trace's events.
fn attack(s: &Scratch, name: &str, actions: &str) -> (Value, Vec<Value>) {
    let script = s.path().join(format!("{name}.yaml"));
    std::fs::write(
        &script,
        format!("cases:\n  calc:\n{actions}  - {{tool: run_tests}}\n  - {{tool: finish, args: {{answer: done}}}}\n"),
    )
    .unwrap();
    let run_dir = s.path().join(format!("run-{name}"));
    let out = Test::new()
        .root(s.path())
        .args(&["run", "--benchmark", "demo", "--format", "json", "--profile"])
        .args(&[&format!("scripted:{}", script.display())])
        .args(&["--out"])
        .arg_path(&run_dir)
        .run();
    let cells = by_cell(&out.json());
    let cell = cells.values().next().expect("one cell").clone();
    (cell, events(&run_dir.join("cells").join(format!("calc__{name}")).join("trace.jsonl")))
}

fn events(trace: &Path) -> Vec<Value> {
    crate::read_trace_text(trace).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["kind"] == kind).collect()
}

fn write_calc(content: &str) -> String {
    let content = serde_json::to_string(content).unwrap();
    format!("  - {{tool: write_file, args: {{path: calc.py, overwrite: true, content: {content}}}}}\n")
}

#[test]
fn the_oracle_passes_through_the_runner_and_the_trace_says_which_tests_ran() {
    let s = scratch();
    let fixed = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n";
    let (cell, events) = attack(&s, "fix", &write_calc(fixed));
    assert_eq!(cell["outcome"], "passed", "{}", cell["reason"]);
    assert_eq!(cell["reward"], 1.0);
    let result = &of_kind(&events, "test_result")[0]["data"];
    assert_eq!(result["passed"], true);
    assert_eq!(result["runner"]["counts"]["passed"], 2, "{result}");
    assert!(result["runner"].get("missing").is_none() && result["runner"].get("not_passed").is_none(), "{result}");
}

#[test]
fn a_module_that_exits_at_import_fails_with_the_runners_reason() {
    let s = scratch();
    let (cell, events) =
        attack(&s, "exit", &write_calc("import os; os._exit(0)\n\ndef add(a, b):\n    return a - b\n"));
    assert_eq!(cell["outcome"], "failed");
    assert_eq!(cell["reward"], 0.0);
    assert_eq!(cell["tests_passed"], false);
    let reason = cell["reason"].as_str().unwrap();
    assert_eq!(
        reason,
        "tests failed: the test runner wrote no results (the code under test exited or crashed before the tests finished)"
    );
    let result = &of_kind(&events, "test_result")[0]["data"];
    assert_eq!(result["exit_code"], 0, "the forgery exits 0, as it did with plain unittest: {result}");
    assert_eq!(result["runner"]["results"], false, "{result}");
    // The agent's run_tests saw the same verdict the judge reached.
    let tool = of_kind(&events, "tool_result").into_iter().find(|e| e["data"]["tool"] == "run_tests").unwrap();
    assert!(
        tool["data"]["output"]
            .as_str()
            .unwrap()
            .contains("hcbench: the tests did not pass: the test runner wrote no results"),
        "{tool}"
    );
}

#[test]
fn a_module_that_monkeypatches_the_test_runner_fails_as_tampered() {
    let s = scratch();
    let patch = "import unittest\n\ndef _run(self, result=None):\n    result.startTest(self)\n    result.addSuccess(self)\n    result.stopTest(self)\n\nunittest.TestCase.run = _run\n\ndef add(a, b):\n    return a - b\n\ndef sub(a, b):\n    return a - b\n";
    let (cell, events) = attack(&s, "patch", &write_calc(patch));
    assert_eq!(cell["outcome"], "failed");
    assert_eq!(cell["reward"], 0.0);
    // Seen twice: unittest.TestCase changed, and the test class runs through a foreign `run`.
    let reason = "tests failed: the test runner was tampered with: TestCase.run, test_calc.T.run";
    assert_eq!(cell["reason"], reason);
    let result = &of_kind(&events, "test_result")[0]["data"];
    assert_eq!(result["exit_code"], 1, "{result}");
    assert_eq!(result["runner"]["tampered"], serde_json::json!(["TestCase.run", "test_calc.T.run"]), "{result}");
}

#[test]
fn a_required_test_that_is_skipped_fails_naming_the_test() {
    let s = scratch();
    let skip = "  - {tool: edit_file, args: {path: tests/test_calc.py, old: '    def test_add', new: \"    @unittest.skip('later')\\n    def test_add\"}}\n";
    let (cell, events) = attack(&s, "skip", skip);
    assert_eq!(cell["outcome"], "failed");
    assert_eq!(cell["reward"], 0.0);
    assert_eq!(cell["reason"], "tests failed: 1 required test(s) did not pass: test_calc.T.test_add (skipped)");
    let result = &of_kind(&events, "test_result")[0]["data"];
    assert_eq!(result["exit_code"], 0, "unittest itself calls a skip a success: {result}");
    assert_eq!(result["runner"]["not_passed"], serde_json::json!(["test_calc.T.test_add (skipped)"]));
}

#[test]
fn a_runner_case_that_also_gives_a_test_command_is_refused_with_file_and_field() {
    let s = scratch();
    s.case(
        "both",
        &RUNNER_CASE
            .replace("id: calc", "id: both")
            .replace("tests:\n", "test_command: [python3, -m, unittest]\ntests:\n"),
        ORACLE,
    );
    s.case(
        "lists",
        &RUNNER_CASE.replace("id: calc", "id: lists").replace("  runner: unittest\n", "  start_dir: nowhere\n"),
        ORACLE,
    );
    let out = Test::new().root(s.path()).args(&["run", "--benchmark", "demo"]).run().code(2);
    for needle in [
        "both.yaml: case `both`: field `test_command`: is given in this case while `tests.runner` is set; remove `test_command`",
        "lists.yaml: case `lists`: field `tests.runner`: is missing; set `runner: unittest`",
    ] {
        assert!(out.stderr.contains(needle), "missing {needle:?} in:\n{}", out.stderr);
    }
}

/// A Python verifier that imports the module under test used to exit 0 when the module ended
/// the process at import; it now runs through hcbench's wrapper, which must see the script
/// finish. The case's tests are a plain `true` here, so the verifier alone decides.
#[test]
fn a_python_verifier_ended_early_by_the_code_under_test_fails() {
    let s = Scratch::new();
    s.write(
        "benchmarks/demo/verifiers/vcalc/check.py",
        "import os, sys\nsys.path.insert(0, os.getcwd())\nfrom calc import add\nassert add(2, 3) == 5, 'add is wrong'\nprint('ok')\n",
    );
    let case = "id: vcalc\ncategory: bugfix\nsplit: train\nfixture: calc\nprompt: fix add\nstep_budget: 5\ntimeout_s: 30\ntest_command: ['true']\nverifier:\n  command: [python3, '{benchmark_dir}/verifiers/vcalc/check.py']\n";
    let fix =
        "actions:\n  - tool: edit_file\n    args: {path: calc.py, old: 'a - b', new: 'a + b'}\n  - tool: finish\n";
    s.case("vcalc", case, fix);
    let run = |name: &str, oracle: &str| {
        s.write("benchmarks/demo/oracle/vcalc.yaml", oracle);
        let out = Test::new()
            .root(s.path())
            .args(&["run", "--benchmark", "demo", "--format", "json", "--out"])
            .arg_path(&s.path().join(name))
            .run();
        by_cell(&out.json())["vcalc__oracle"].clone()
    };
    let honest = run("honest", fix);
    assert_eq!(honest["outcome"], "passed", "{honest}");

    let exit_early = "actions:\n  - tool: write_file\n    args: {path: calc.py, overwrite: true, content: \"import os\\nos._exit(0)\\n\"}\n  - tool: finish\n";
    let cheat = run("cheat", exit_early);
    assert_eq!(cheat["outcome"], "failed", "{cheat}");
    assert_eq!(cheat["reward"], 0.0);
    assert!(cheat["reason"].as_str().unwrap().contains("exited 0 before its script finished"), "{cheat}");

    // A verifier that fails honestly still fails as its script did, its message in the trace.
    let wrong = run("wrong", "actions:\n  - tool: finish\n");
    assert_eq!(wrong["reason"], "verifier failed: command: exit code 1", "{wrong}");
    let trace = events(&s.path().join("wrong/cells/vcalc__oracle/trace.jsonl"));
    let verifier = of_kind(&trace, "verifier_result")[0];
    assert!(
        verifier["data"]["checks"][0]["detail"].as_str().unwrap().contains("AssertionError: add is wrong"),
        "{verifier}"
    );
}
