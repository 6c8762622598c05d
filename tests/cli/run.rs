//! `run`, `replay` and `list` against the HC-Bench benchmark and scratch benchmarks.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::{Test, repo_root, tree_hashes};

pub fn by_cell(summaries: &Value) -> BTreeMap<String, Value> {
    summaries
        .as_array()
        .expect("an array of summaries")
        .iter()
        .map(|s| (s["cell_id"].as_str().unwrap().to_string(), s.clone()))
        .collect()
}

#[test]
fn oracle_passes_every_case_replay_agrees_and_fixtures_stay_untouched() {
    let fixtures_before = tree_hashes(&repo_root().join("fixtures"));
    let out_dir = tempfile::tempdir().unwrap();
    let run_dir = out_dir.path().join("run");
    let live = Test::new().args(&["run", "--format", "json", "--out"]).arg_path(&run_dir).run().code(0);
    let live = by_cell(&live.json());
    assert!(live.len() >= 10, "the benchmark has at least 10 cases");
    for (cell, s) in &live {
        assert_eq!(s["outcome"], "passed", "{cell}: {}", s["reason"]);
        assert_eq!(s["reward"], 1.0);
        assert!(s["tool_calls"].as_u64().unwrap() >= 2, "{cell} did real work");
        assert!(run_dir.join("workspaces").join(cell).is_dir());
    }

    // The summary rebuilt from traces alone equals the one the live run printed.
    let replayed = Test::new().args(&["replay", "--format", "json"]).arg_path(&run_dir).run().code(0);
    assert_eq!(by_cell(&replayed.json()), live);

    // Replay of one trace file works the same way.
    let (cell, summary) = live.iter().next().unwrap();
    let one = Test::new()
        .args(&["replay", "--format", "json"])
        .arg_path(&run_dir.join("cells").join(cell).join("trace.jsonl"))
        .run()
        .code(0);
    assert_eq!(&one.json()[0], summary);

    // results.jsonl holds one line per cell, equal to the live summaries.
    let results = std::fs::read_to_string(run_dir.join("results.jsonl")).unwrap();
    let lines: BTreeMap<String, Value> = results
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|v| (v["cell_id"].as_str().unwrap().to_string(), v))
        .collect();
    assert_eq!(lines, live);

    let fixtures_after = tree_hashes(&repo_root().join("fixtures"));
    let changed: Vec<&String> = fixtures_before
        .keys()
        .chain(fixtures_after.keys())
        .filter(|k| fixtures_before.get(*k) != fixtures_after.get(*k))
        .collect();
    assert!(changed.is_empty(), "a run must never modify fixtures; changed: {changed:?}");
    // No secret from the environment reaches any file the run wrote.
    for (path, _) in tree_hashes(&run_dir) {
        let bytes = std::fs::read(run_dir.join(&path)).unwrap_or_default();
        assert!(!String::from_utf8_lossy(&bytes).contains("sk-canary-never-leaks"), "secret leaked into {path}");
    }
}

#[test]
fn a_do_nothing_agent_fails_every_case() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("nop.yaml");
    std::fs::write(&script, "default:\n  - {tool: finish, args: {answer: done}}\n").unwrap();
    let out = Test::new()
        .args(&["run", "--profile", "scripted", "--format", "json", "--script"])
        .arg_path(&script)
        .args(&["--out"])
        .arg_path(&dir.path().join("run"))
        .run()
        .code(1);
    let cells = by_cell(&out.json());
    // One cell per case of the benchmark, every split included: none was skipped or doubled.
    let listed = Test::new().args(&["list", "--format", "json"]).run().code(0).json();
    let mut case_ids: Vec<&str> = listed.as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
    case_ids.sort_unstable();
    assert!(case_ids.len() >= 10, "the benchmark has at least 10 cases: {case_ids:?}");
    let mut ran: Vec<&str> = cells.values().map(|s| s["case_id"].as_str().unwrap()).collect();
    ran.sort_unstable();
    assert_eq!(ran, case_ids, "one cell per case");
    for (cell, s) in &cells {
        assert_eq!(s["outcome"], "failed", "{cell} must fail when the agent does nothing");
        assert_eq!(s["tests_passed"], false, "{cell}: the baseline tests must fail");
        // One `finish` per session: a multi-session case's sessions each take one step.
        let sessions = s["sessions"].as_array().map_or(1, Vec::len);
        assert_eq!(s["steps"], sessions as u64, "{cell}");
    }
}

#[test]
fn secrets_in_hcbench_environment_never_reach_a_cases_commands() {
    // The harness gives every hcbench it starts HCBENCH_TEST_API_KEY (see `Test::run`). A
    // command's environment is an allowlist: neither the key nor a plain variable of hcbench's
    // reaches it, and the determinism settings do; with and without a sandbox.
    let s = Scratch::new();
    let probe = "import os, sys; sys.exit(0 if 'HCBENCH_TEST_PLAIN' not in os.environ and 'HCBENCH_TEST_API_KEY' not in os.environ and os.environ['TZ'] == 'UTC' else 1)";
    s.case(
        "env",
        &format!(
            "id: env\ncategory: policy\nsplit: train\nfixture: calc\nprompt: x\nstep_budget: 3\ntimeout_s: 30\ntest_command: [python3, -c, \"{probe}\"]\n"
        ),
        "actions:\n  - tool: finish\n",
    );
    for sandbox in ["bubblewrap", "none"] {
        let out = Test::new()
            .root(s.path())
            .env("HCBENCH_TEST_PLAIN", "visible")
            .args(&["run", "--sandbox", sandbox, "--benchmark", "demo", "--format", "json", "--out"])
            .arg_path(&s.path().join(format!("run-{sandbox}")))
            .run()
            .code(0);
        assert_eq!(by_cell(&out.json())["env__oracle"]["tests_passed"], true, "--sandbox {sandbox}");
    }
}

/// A throwaway project root with one benchmark built from `cases` (id, case YAML, oracle YAML).
pub struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    /// `hcbench run` of the `demo` benchmark with `script` (written beside it) under the
    /// scripted profile, JSON out, into `run/`: the command's output (its code checked) and the
    /// run directory.
    pub fn run_script(&self, script: &str, code: i32) -> (crate::Output, PathBuf) {
        let file = self.path().join("script.yaml");
        std::fs::write(&file, script).unwrap();
        let run_dir = self.path().join("run");
        let out = Test::new()
            .root(self.path())
            .args(&["run", "--benchmark", "demo", "--profile", "scripted", "--format", "json", "--script"])
            .arg_path(&file)
            .args(&["--out"])
            .arg_path(&run_dir)
            .run()
            .code(code);
        (out, run_dir)
    }

    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let s = Scratch { dir };
        s.write(
            "benchmarks/demo/benchmark.yaml",
            "name: demo\ndescription: scratch\ncategories: [bugfix, recovery, greenfield, context, policy]\n",
        );
        s.write("fixtures/calc/calc.py", "def add(a, b):\n    return a - b\n");
        s.write(
            "fixtures/calc/tests/test_calc.py",
            "import unittest\nfrom calc import add\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n",
        );
        s
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn write(&self, rel: &str, text: &str) {
        let p = self.dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    pub fn case(&self, id: &str, yaml: &str, oracle: &str) {
        self.write(&format!("benchmarks/demo/cases/{id}.yaml"), yaml);
        self.write(&format!("benchmarks/demo/oracle/{id}.yaml"), oracle);
    }

    /// Case `loud`: [`GOOD_CASE`] whose test command prints 20,000 bytes, more than a trace
    /// keeps inline, so its cell stores the output as an artifact.
    pub fn loud_case(&self) {
        self.case(
            "loud",
            &GOOD_CASE.replace("id: good", "id: loud").replace(
                "test_command: [python3, -m, unittest, discover, -s, tests]",
                "test_command: [python3, -c, 'print(\"x\" * 20000)']",
            ),
            GOOD_ORACLE,
        );
    }
}

pub const GOOD_CASE: &str = "id: good\ncategory: bugfix\nsplit: train\nfixture: calc\nprompt: fix add\nstep_budget: 5\ntimeout_s: 30\ntest_command: [python3, -m, unittest, discover, -s, tests]\nverifier:\n  unchanged: [tests/test_calc.py]\n";
pub const GOOD_ORACLE: &str =
    "actions:\n  - tool: edit_file\n    args: {path: calc.py, old: 'a - b', new: 'a + b'}\n  - tool: finish\n";

#[test]
fn a_broken_benchmark_reports_every_problem_with_file_and_field() {
    let s = Scratch::new();
    s.case("good", GOOD_CASE, GOOD_ORACLE);
    s.case(
        "bad",
        "id: bad\ncategory: bugfx\nsplit: train\nfixture: nowhere\nprompt: x\nallowed_tools: [read_file, teleport, finish]\nstep_budget: 3\ntest_command: [python3]\n",
        "actions: []\n",
    );
    s.case(
        "typo",
        "id: typo\ncategory: bugfix\nsplit: train\nfixture: calc\nprompt: x\nstep_budgett: 3\n",
        GOOD_ORACLE,
    );
    s.write("benchmarks/demo/cases/noracle.yaml", &GOOD_CASE.replace("id: good", "id: noracle"));
    let out = Test::new().root(s.path()).args(&["run", "--benchmark", "demo"]).run().code(2);
    let err = &out.stderr;
    for needle in [
        "bad.yaml: case `bad`: field `category`: `bugfx` is not declared in benchmark.yaml (declared: bugfix, recovery, greenfield, context, policy)",
        "field `fixture`: `nowhere` does not exist",
        "field `allowed_tools`: `teleport` is not a tool",
        "oracle/bad.yaml: case `bad`: field `actions`: is empty",
        "typo.yaml",
        "step_budgett",
        "case `noracle`: field `oracle`: no oracle actions",
    ] {
        assert!(err.contains(needle), "missing {needle:?} in:\n{err}");
    }
    assert!(!s.path().join("workspace").exists(), "nothing is written when the input is bad");
}

#[test]
fn a_hanging_test_command_is_a_timeout_and_the_run_goes_on() {
    let s = Scratch::new();
    s.case("good", GOOD_CASE, GOOD_ORACLE);
    s.case(
        "hang",
        "id: hang\ncategory: bugfix\nsplit: train\nfixture: calc\nprompt: x\nstep_budget: 3\ntimeout_s: 1\ntest_command: [python3, -c, 'import time; time.sleep(120)']\n",
        GOOD_ORACLE,
    );
    let started = std::time::Instant::now();
    let out = Test::new()
        .root(s.path())
        .args(&["run", "--benchmark", "demo", "--format", "json", "--out"])
        .arg_path(&s.path().join("run"))
        .run()
        .code(4)
        .stderr_has("coverage 50.0%");
    assert!(started.elapsed().as_secs() < 60, "the hang must be cut by the timeout");
    let cells = by_cell(&out.json());
    assert_eq!(cells["hang__oracle"]["outcome"], "timeout");
    assert_eq!(cells["good__oracle"]["outcome"], "passed");
}

#[test]
fn policy_denials_are_recorded_and_the_loop_continues() {
    let s = Scratch::new();
    s.write("fixtures/calc/.env", "TOKEN=hunter2\n");
    s.case("good", &GOOD_CASE.replace("  unchanged", "  forbid_denials: true\n  unchanged"), GOOD_ORACLE);
    let script = s.path().join("script.yaml");
    std::fs::write(
        &script,
        "default:\n  - {tool: read_file, args: {path: .env}}\n  - {tool: read_file, args: {path: ../secret}}\n  - {tool: run_command, args: {argv: [curl, 'http://example.com']}}\n  - {tool: edit_file, args: {path: calc.py, old: 'a - b', new: 'a + b'}}\n  - {tool: finish}\n",
    )
    .unwrap();
    let run_dir = s.path().join("run");
    let out = Test::new()
        .root(s.path())
        .args(&["run", "--benchmark", "demo", "--profile", "scripted", "--format", "json", "--script"])
        .arg_path(&script)
        .args(&["--out"])
        .arg_path(&run_dir)
        .run()
        .code(1);
    let cell = &by_cell(&out.json())["good__scripted"];
    assert_eq!(cell["policy_denials"], 3);
    assert_eq!(cell["tests_passed"], true, "the loop went on after the denials and fixed the bug");
    assert_eq!(cell["outcome"], "failed", "forbid_denials fails the case");
    let trace = crate::read_trace_text(run_dir.join("cells/good__scripted/trace.jsonl")).unwrap();
    assert!(!trace.contains("hunter2"), "the secret was never read");
    let kinds: Vec<String> = trace
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["kind"].as_str().unwrap().to_string())
        .collect();
    let first_denial = kinds.iter().position(|k| k == "policy_decision").unwrap();
    assert_eq!(kinds[first_denial + 1], "tool_result", "every decision is followed by its result");
}

#[test]
fn a_trace_cut_mid_line_still_replays_its_prefix() {
    let s = Scratch::new();
    s.case("good", GOOD_CASE, GOOD_ORACLE);
    let run_dir = s.path().join("run");
    Test::new().root(s.path()).args(&["run", "--benchmark", "demo", "--out"]).arg_path(&run_dir).run().code(0);
    // The layout before the pack (a folder and a plain trace per cell), to edit cells by hand.
    hcbench::trace::stored::unpack(&run_dir, false).unwrap();
    let trace = run_dir.join("cells/good__oracle/trace.jsonl");
    let text = crate::read_trace_text(&trace).unwrap();
    // Keep the first three events and half of the fourth, as a crash mid-write would.
    let lines: Vec<&str> = text.lines().collect();
    let cut = format!("{}\n{}\n{}\n{}", lines[0], lines[1], lines[2], &lines[3][..lines[3].len() / 2]);
    std::fs::write(&trace, cut).unwrap();
    let out = Test::new().args(&["replay", "--format", "json"]).arg_path(&trace).run().code(0);
    let s0 = &out.json()[0];
    assert_eq!(s0["truncated"], true);
    assert_eq!(s0["events"], 3);
    assert_eq!(s0["outcome"], Value::Null, "an unfinished trace has no outcome");

    // Corruption in the middle is an error that names the line, not a silent skip.
    std::fs::write(&trace, format!("{}\nnot json\n{}\n", lines[0], lines[1])).unwrap();
    Test::new().args(&["replay"]).arg_path(&trace).run().code(2).stderr_has("line 2");
}

#[test]
fn events_of_a_kind_from_a_newer_hcbench_are_skipped_and_said_but_a_newer_version_is_refused() {
    let s = Scratch::new();
    s.case("good", GOOD_CASE, GOOD_ORACLE);
    let run_dir = s.path().join("run");
    Test::new().root(s.path()).args(&["run", "--benchmark", "demo", "--out"]).arg_path(&run_dir).run().code(0);
    hcbench::trace::stored::unpack(&run_dir, false).unwrap();
    let trace = run_dir.join("cells/good__oracle/trace.jsonl");
    let text = crate::read_trace_text(&trace).unwrap();
    let before = Test::new().args(&["replay", "--format", "json"]).arg_path(&trace).run().code(0).json();
    let (first, rest) = text.split_once('\n').unwrap();
    // The new event takes seq 1 of this run's trace, and the events after it move up by one
    // (the reader checks the sequence).
    let run_id = serde_json::from_str::<serde_json::Value>(first).unwrap()["run_id"].as_str().unwrap().to_string();
    let newer_kind = format!(
        r#"{{"schema_version":1,"run_id":"{run_id}","cell_id":"good__oracle","seq":1,"ts":"t","kind":"subagent_spawned","data":{{"notes":["x"]}}}}"#
    );
    let rest: String = rest
        .lines()
        .enumerate()
        .map(|(i, l)| l.replacen(&format!("\"seq\":{},", i + 1), &format!("\"seq\":{},", i + 2), 1) + "\n")
        .collect();
    std::fs::write(&trace, format!("{first}\n{newer_kind}\n{rest}")).unwrap();

    let after = Test::new().args(&["replay", "--format", "json"]).arg_path(&trace).run().code(0).json();
    assert_eq!(after[0]["skipped_events"], serde_json::json!({"subagent_spawned": 1}));
    assert_eq!(after[0]["events"], before[0]["events"], "the skipped event is in no other number");
    assert_eq!(after[0]["outcome"], "passed");
    let table = Test::new().args(&["replay", "--wide"]).arg_path(&trace).run().code(0);
    assert!(table.stdout.contains("skipped 1 event(s) of kinds this hcbench does not know (1 subagent_spawned)"));
    Test::new().args(&["report"]).arg_path(&run_dir).run().code(0).stderr_has("note: good__oracle: skipped 1 event(s)");
    let md = std::fs::read_to_string(run_dir.join("reports/report.md")).unwrap();
    assert!(md.contains("1 subagent_spawned"), "{md}");

    // The same line from a newer schema version is an error saying to upgrade.
    std::fs::write(
        &trace,
        format!("{first}\n{}\n{rest}", newer_kind.replace("\"schema_version\":1", "\"schema_version\":3")),
    )
    .unwrap();
    Test::new()
        .args(&["replay"])
        .arg_path(&trace)
        .run()
        .code(2)
        .stderr_has("line 2 has schema_version 3")
        .stderr_has("upgrade hcbench");
}

#[test]
fn bad_command_lines_exit_2_with_a_clear_message() {
    Test::new().args(&["run", "--profile", "gpt9"]).run().code(2).stderr_has("unknown profile `gpt9`");
    Test::new().args(&["run", "--benchmark", "nope"]).run().code(2).stderr_has("no benchmark `nope`");
    Test::new().args(&["run", "--profile", "scripted"]).run().code(2).stderr_has("needs --script");
    Test::new().args(&["run", "--case", "no-such-case"]).run().code(2).stderr_has("no such case");
    Test::new().args(&["replay", "/definitely/not/here"]).run().code(2).stderr_has("does not exist");
    let empty = tempfile::tempdir().unwrap();
    Test::new().args(&["replay"]).arg_path(empty.path()).run().code(2).stderr_has("neither a trace.jsonl");
}

#[test]
fn list_shows_cases_with_category_split_and_size() {
    let out = Test::new().args(&["list", "--format", "json"]).run().code(0);
    let rows = out.json();
    let rows = rows.as_array().unwrap();
    assert!(rows.len() >= 10);
    let categories: std::collections::BTreeSet<&str> = rows.iter().map(|r| r["category"].as_str().unwrap()).collect();
    assert_eq!(categories.len(), 6, "all six categories are present: {categories:?}");
    assert!(rows.iter().all(|r| r["fixture_bytes"].as_u64().unwrap() > 0));

    // The split column is each case file's `split:`, and all three splits occur.
    let cases_dir = repo_root().join("benchmarks/hc-bench/cases");
    for r in rows {
        let id = r["id"].as_str().unwrap();
        let yaml = std::fs::read_to_string(cases_dir.join(format!("{id}.yaml"))).unwrap();
        let split = yaml.lines().find_map(|l| l.strip_prefix("split:")).map(str::trim);
        assert_eq!(r["split"].as_str(), split, "{id}: the split of its case file");
    }
    let splits: std::collections::BTreeSet<&str> = rows.iter().map(|r| r["split"].as_str().unwrap()).collect();
    assert_eq!(splits, ["heldout", "test", "train"].into(), "every split is listed");

    // The table shows the same values in its split column.
    let table = Test::new().args(&["list"]).run().code(0).stdout;
    let cells = |line: &str| -> Vec<String> {
        line.trim_matches(['│', ' ']).split('┆').map(|c| c.trim().to_string()).collect()
    };
    let mut lines = table.lines().filter(|l| l.starts_with('│')).map(cells);
    let header = lines.next().unwrap();
    let column = |name: &str| header.iter().position(|h| h == name).unwrap_or_else(|| panic!("no {name}:\n{table}"));
    let (id_col, split_col) = (column("case"), column("split"));
    let shown: BTreeMap<String, String> = lines.map(|row| (row[id_col].clone(), row[split_col].clone())).collect();
    let listed: BTreeMap<String, String> =
        rows.iter().map(|r| (r["id"].as_str().unwrap().into(), r["split"].as_str().unwrap().into())).collect();
    assert_eq!(shown, listed, "the table's split column matches --format json");
}

#[test]
fn dotenv_in_the_project_root_is_read_when_hcbench_runs_from_elsewhere() {
    // One .env, in the root named by --root: its HCBENCH_MODELS names a models file whose
    // profile then resolves, although the command runs from another directory.
    let s = Scratch::new();
    s.case("good", GOOD_CASE, GOOD_ORACLE);
    s.write("models-from-dotenv.toml", "[viadotenv]\nprovider = \"oracle\"\n");
    s.write(".env", &format!("HCBENCH_MODELS={}\n", s.path().join("models-from-dotenv.toml").display()));
    let elsewhere = tempfile::tempdir().unwrap();
    let run = |profile: &str| {
        std::process::Command::new(crate::BIN)
            .arg("--root")
            .arg(s.path())
            .args(["run", "--benchmark", "demo", "--profile", profile, "--format", "json"])
            .current_dir(elsewhere.path())
            .env_remove("HCBENCH_MODELS")
            .env_remove("HCBENCH_ROOT")
            .output()
            .unwrap()
    };
    let out = run("viadotenv");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let cells: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(cells[0]["profile"], "viadotenv");
    assert_eq!(cells[0]["outcome"], "passed");
    std::fs::remove_file(s.path().join(".env")).unwrap();
    let out = run("viadotenv");
    assert_eq!(out.status.code(), Some(2), "without .env the profile is unknown");
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown profile `viadotenv`"));
}

#[test]
fn a_broken_models_file_does_not_stop_an_oracle_run_but_stops_a_model_profile() {
    // The fixed built-ins never come from models.toml, so the file is not even read for them.
    let s = Scratch::new();
    s.case("good", GOOD_CASE, GOOD_ORACLE);
    s.write("models.toml", "[broken\n");
    Test::new().root(s.path()).args(&["run", "--benchmark", "demo"]).run().code(0);
    Test::new()
        .root(s.path())
        .args(&["run", "--benchmark", "demo", "--profile", "local"])
        .run()
        .code(2)
        .stderr_has("is not valid TOML");
}
