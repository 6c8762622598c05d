//! Bringing your own benchmark, as docs/adding-a-benchmark.md tells a user to: a small
//! function-writing benchmark with a category of its own (`codegen`), tests the agent can read
//! and hidden tests it cannot, and suites of its own, built in a temp dir and driven through
//! `list`, `validate`, `run` and `matrix`. Beside it lives a second benchmark, so that suites
//! are seen to belong to one benchmark each.

use serde_json::Value;

use crate::Test;
use crate::run::Scratch;

/// `benchmarks/mini`: two function-writing cases in category `codegen`.
const META: &str = "name: mini
description: Write small functions from a docstring.
categories: [codegen]
defaults:
  step_budget: 6
  timeout_s: 30
  tests:
    runner: unittest
    start_dir: tests
";

/// A case: `solution.py` holds a stub, tests/test_visible.py the tests the agent can read, and
/// the verifier runs hidden checks from the benchmark folder, which cells never see.
fn case(id: &str, split: &str, function: &str) -> String {
    format!(
        "id: {id}
category: codegen
split: {split}
fixture: {id}
prompt: Implement `{function}` in solution.py as its docstring says.
tests:
  fail_to_pass: [test_visible.Visible.test_example]
verifier:
  command: [python3, '{{benchmark_dir}}/verifiers/{id}/hidden.py']
  unchanged: [tests/test_visible.py]
"
    )
}

/// The hidden checks run `solution.py` in a fresh interpreter and compare what it prints, so
/// an exit code forged at import proves nothing.
fn hidden(call: &str, want: &str) -> String {
    let program = format!("from solution import *; print(repr({call}))");
    let complaint = format!("{call} printed %r");
    format!(
        "import subprocess, sys
out = subprocess.run([sys.executable, '-c', {program:?}], capture_output=True, text=True)
if out.stdout.strip() != {want:?}:
    sys.exit({complaint:?} % out.stdout)
"
    )
}

fn visible(call: &str, want: &str) -> String {
    format!(
        "import unittest
from solution import *


class Visible(unittest.TestCase):
    def test_example(self):
        self.assertEqual({call}, {want})
"
    )
}

fn oracle(body: &str) -> String {
    format!(
        "actions:
  - tool: write_file
    args:
      path: solution.py
      overwrite: true
      content: {body:?}
  - tool: run_tests
  - tool: finish
    args: {{answer: implemented}}
"
    )
}

/// The project: benchmark `mini` (with suites `quick` and `all`), benchmark `other` (with suite
/// `smoke`), and a suite lying flat in suites/, as older projects had them.
fn project() -> Scratch {
    let s = Scratch::new();
    s.write("benchmarks/mini/benchmark.yaml", META);
    let cases = [
        ("add-two", "train", "add", "add(2, 3)", "5", "add(-4, 10)", "6", "def add(a, b):\n    return a + b\n"),
        (
            "palindrome",
            "test",
            "is_palindrome",
            "is_palindrome('abba')",
            "True",
            "[is_palindrome(w) for w in ('', 'ab', 'Aba', 'racecar')]",
            "[True, False, False, True]",
            "def is_palindrome(s):\n    return s == s[::-1]\n",
        ),
    ];
    for (id, split, function, seen, seen_want, secret, secret_want, solution) in cases {
        s.write(&format!("benchmarks/mini/cases/{id}.yaml"), &case(id, split, function));
        s.write(&format!("benchmarks/mini/oracle/{id}.yaml"), &oracle(solution));
        s.write(&format!("benchmarks/mini/verifiers/{id}/hidden.py"), &hidden(secret, secret_want));
        s.write(
            &format!("fixtures/{id}/solution.py"),
            &format!("def {function}(*args):\n    \"\"\"See the prompt.\"\"\"\n    raise NotImplementedError\n"),
        );
        s.write(&format!("fixtures/{id}/tests/test_visible.py"), &visible(seen, seen_want));
    }
    s.write("suites/mini/quick.yaml", "description: one case\ncases: [add-two]\n");
    s.write("suites/mini/all.yaml", "categories: [codegen]\n");

    s.write("benchmarks/other/benchmark.yaml", "name: other\ncategories: [chores]\n");
    s.write(
        "benchmarks/other/cases/chore-1.yaml",
        "id: chore-1\ncategory: chores\nsplit: train\nfixture: add-two\nprompt: x\nstep_budget: 2\ntest_command: ['true']\n",
    );
    s.write("benchmarks/other/oracle/chore-1.yaml", "actions: [{tool: finish}]\n");
    s.write("suites/other/smoke.yaml", "cases: [chore-1]\n");
    s.write("suites/legacy.yaml", "cases: [add-two]\n");
    s
}

fn ids(rows: &Value) -> Vec<&str> {
    rows.as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect()
}

#[test]
fn a_benchmark_of_ones_own_lists_validates_runs_and_compares() {
    let s = project();
    let root = s.path();
    let list = |args: &[&str]| {
        Test::new().root(root).args(&["list", "--benchmark", "mini", "--format", "json"]).args(args).run()
    };

    // list: its own category, and its own suites.
    let all = list(&[]).code(0).json();
    assert_eq!(ids(&all), ["add-two", "palindrome"]);
    assert!(all.as_array().unwrap().iter().all(|r| r["category"] == "codegen"), "{all}");
    assert_eq!(ids(&list(&["--suite", "quick"]).code(0).json()), ["add-two"]);
    assert_eq!(ids(&list(&["--suite", "all"]).code(0).json()), ["add-two", "palindrome"]);
    assert_eq!(ids(&list(&["--suite", "suites/mini/quick.yaml"]).code(0).json()), ["add-two"], "a path works");

    // validate: both cases are sound (baseline fails, oracle passes, nop, tamper and every
    // attack fail), and no violator control runs: no case asks for one.
    let v = Test::new()
        .root(root)
        .args(&["validate", "--benchmark", "mini", "--format", "json", "--out"])
        .arg_path(&root.join("v"))
        .run()
        .code(0)
        .json();
    let verdicts = v.as_array().unwrap();
    assert_eq!(verdicts.len(), 2);
    for c in verdicts {
        assert_eq!(c["sound"], true, "{c}");
        assert_eq!(c["violator_fails"], Value::Null, "{c}");
    }

    // run, on a suite: the oracle passes; its hidden checks ran.
    let run = Test::new()
        .root(root)
        .args(&["run", "--benchmark", "mini", "--suite", "quick", "--profile", "oracle", "--format", "json", "--out"])
        .arg_path(&root.join("r"))
        .run()
        .code(0)
        .json();
    let cells = run.as_array().unwrap();
    assert_eq!(cells.len(), 1);
    assert_eq!((cells[0]["case_id"].as_str(), cells[0]["outcome"].as_str()), (Some("add-two"), Some("passed")));
    assert_eq!(cells[0]["verifier_passed"], true, "{}", cells[0]);

    // matrix: oracle passes every case, nop none, and the report groups by `codegen`.
    let run_dir = root.join("m");
    let m = Test::new()
        .root(root)
        .args(&["matrix", "--benchmark", "mini", "--profiles", "oracle,nop", "--format", "json", "--out"])
        .arg_path(&run_dir)
        .run()
        .code(0)
        .json();
    let rate = |i: usize| (m["profile_stats"][i]["profile"].as_str(), m["profile_stats"][i]["pass_rate"].as_f64());
    assert_eq!(rate(0), (Some("oracle"), Some(1.0)));
    assert_eq!(rate(1), (Some("nop"), Some(0.0)));
    let by_category: Vec<(&str, &str, f64)> = m["category_stats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["profile"].as_str().unwrap(), r["category"].as_str().unwrap(), r["pass_rate"].as_f64().unwrap()))
        .collect();
    assert_eq!(by_category, [("oracle", "codegen", 1.0), ("nop", "codegen", 0.0)]);
    let report = std::fs::read_to_string(run_dir.join("reports/report.json")).unwrap();
    let report: Value = serde_json::from_str(&report).unwrap();
    assert!(report["cells"].as_array().unwrap().iter().all(|c| c["category"] == "codegen"), "{}", report["cells"]);
    let csv = std::fs::read_to_string(run_dir.join("reports/cells.csv")).unwrap();
    assert_eq!(csv.lines().filter(|l| l.contains(",codegen,")).count(), 4, "{csv}");
}

#[test]
fn suites_belong_to_their_benchmark() {
    let s = project();
    let list = |args: &[&str]| Test::new().root(s.path()).args(&["list", "--format", "json"]).args(args).run();

    // Another benchmark's suite, by name: the error says whose it is, and the advice works.
    list(&["--benchmark", "mini", "--suite", "smoke"])
        .code(2)
        .stderr_has("benchmark `mini` has no suite `smoke`")
        .stderr_has("(its suites: all, quick)")
        .stderr_has("`smoke` is a suite of benchmark `other`: run it with `--benchmark other`");
    assert_eq!(ids(&list(&["--benchmark", "other", "--suite", "smoke"]).code(0).json()), ["chore-1"]);
    // ... and the other way round: `quick` is never taken from another benchmark.
    list(&["--benchmark", "other", "--suite", "quick"]).code(2).stderr_has("is a suite of benchmark `mini`");
    // By path.
    list(&["--benchmark", "mini", "--suite", "suites/other/smoke.yaml"])
        .code(2)
        .stderr_has("is a suite of benchmark `other`, not of `mini`; run it with `--benchmark other`");
    // A path outside suites/mini/ is refused, however it is spelt.
    for outside in [
        "benchmarks/mini/cases/add-two.yaml",
        "suites/mini/../../benchmarks/mini/cases/add-two.yaml",
        "suites/legacy.yaml",
    ] {
        list(&["--benchmark", "mini", "--suite", outside]).code(2).stderr_has("is outside");
    }
    // A suite lying flat in suites/, as in older projects, is not read; the error says where to move it.
    list(&["--benchmark", "mini", "--suite", "legacy"])
        .code(2)
        .stderr_has("suites/legacy.yaml is not read: a suite belongs to one benchmark, move it to");

    // An id listed twice is refused, naming the file and the id.
    s.write("suites/mini/dup.yaml", "cases: [add-two, palindrome, add-two]\n");
    list(&["--benchmark", "mini", "--suite", "dup"])
        .code(2)
        .stderr_has("suites/mini/dup.yaml: field `cases`: `add-two` is listed twice");
    // A category the benchmark does not declare is refused too.
    s.write("suites/mini/cats.yaml", "categories: [bugfix]\n");
    list(&["--benchmark", "mini", "--suite", "cats"])
        .code(2)
        .stderr_has("`bugfix` is not a category of benchmark `mini` (declared: codegen)");
}

#[test]
fn authoring_mistakes_are_refused_at_load_with_file_and_field() {
    let s = project();
    let run = |args: &[&str]| {
        Test::new()
            .root(s.path())
            .args(&["run", "--benchmark", "mini", "--out"])
            .arg_path(&s.path().join("r"))
            .args(args)
            .run()
    };

    // A scripted profile whose script misspells an argument: exit 2 before any cell runs.
    s.write(
        "bad-script.yaml",
        "cases:\n  add-two:\n    - {tool: read_file, args: {pth: solution.py}}\n    - {tool: finish}\n",
    );
    run(&["--profile", "scripted:bad-script.yaml"])
        .code(2)
        .stderr_has("bad-script.yaml")
        .stderr_has("field `cases.add-two[0].args.pth`: is not an argument of `read_file`");
    assert!(!s.path().join("r").exists(), "nothing ran");

    // An oracle argument misspelt: named with the oracle file, action index and field.
    let good = std::fs::read_to_string(s.path().join("benchmarks/mini/oracle/add-two.yaml")).unwrap();
    s.write("benchmarks/mini/oracle/add-two.yaml", &good.replace("overwrite: true", "overwite: true"));
    run(&["--profile", "oracle"]).code(2).stderr_has(
        "oracle/add-two.yaml: case `add-two`: field `actions[0].args.overwite`: is not an argument of `write_file`",
    );
    s.write("benchmarks/mini/oracle/add-two.yaml", &good);

    // A test program that cannot start: named at load, not a run of harness errors.
    let case_file = s.path().join("benchmarks/mini/cases/palindrome.yaml");
    let text = std::fs::read_to_string(&case_file).unwrap();
    s.write("benchmarks/mini/cases/palindrome.yaml", &text.replace("command: [python3,", "command: [pyhton3,"));
    run(&["--profile", "oracle"]).code(2).stderr_has(
        "cases/palindrome.yaml: case `palindrome`: field `verifier.command`: `pyhton3` is not found on the PATH",
    );
    assert!(!s.path().join("r").exists(), "nothing ran");
    s.write("benchmarks/mini/cases/palindrome.yaml", &text);

    // A case whose category the benchmark does not declare.
    s.write("benchmarks/mini/cases/palindrome.yaml", &text.replace("category: codegen", "category: strings"));
    run(&["--profile", "oracle"])
        .code(2)
        .stderr_has("cases/palindrome.yaml: case `palindrome`: field `category`: `strings` is not declared in benchmark.yaml (declared: codegen)");
}
