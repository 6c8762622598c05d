//! The exploit controls of `hcbench validate`: scripted attacks that try to get a case passed
//! without solving it. Every attack must fail every case; one that passes names the case
//! unsound, because a model optimized against the benchmark would find the same hole.
//!
//! Each attack is a fixed list of tool calls built per case from what hcbench knows at plan
//! time ([`Target`]: the module under test, the test files, where the tests start, the oracle
//! and verifier files), run as an ordinary scripted cell in the same engine batch as the other
//! controls. The calls are the ones a model could make: `write_file`, `run_command`. Nothing
//! here is privileged, so an attack that passes shows a real hole, not a harness artefact.
//!
//! The attacks are deliberately naive and each targets one way a verdict can be forged:
//! the exit code of the test command ([`Attack::ExitAtImport`]), Python's startup hooks and
//! pytest's plugins ([`Attack::SiteInjection`]), the tests themselves ([`Attack::DeleteTests`],
//! [`Attack::SkipTests`]), the test runner's bookkeeping ([`Attack::MonkeypatchRunner`]), a
//! results file a runner might trust ([`Attack::FakeResults`]), and the benchmark's own
//! answers ([`Attack::ReadOracle`]).

use std::path::{Path, PathBuf};

use crate::action::Action;
use crate::agent::paths::normalize;
use crate::bench::{Benchmark, Case, TestSpec};
use crate::model::scripted::Script;

/// One scripted attack. [`Attack::ALL`] is the fixed set validate runs, in report order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Attack {
    ExitAtImport,
    SiteInjection,
    DeleteTests,
    SkipTests,
    MonkeypatchRunner,
    FakeResults,
    ReadOracle,
}

impl Attack {
    pub(crate) const ALL: [Attack; 7] = [
        Attack::ExitAtImport,
        Attack::SiteInjection,
        Attack::DeleteTests,
        Attack::SkipTests,
        Attack::MonkeypatchRunner,
        Attack::FakeResults,
        Attack::ReadOracle,
    ];

    /// The attack's name: its profile name in the run directory and its key in every output.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Attack::ExitAtImport => "exit_at_import",
            Attack::SiteInjection => "site_injection",
            Attack::DeleteTests => "delete_tests",
            Attack::SkipTests => "skip_tests",
            Attack::MonkeypatchRunner => "monkeypatch_runner",
            Attack::FakeResults => "fake_results",
            Attack::ReadOracle => "read_oracle",
        }
    }

    /// What the attack does, for the problem line of an unsound case.
    pub(crate) fn what(self) -> &'static str {
        match self {
            Attack::ExitAtImport => "prepends `import os; os._exit(0)` to the module under test",
            Attack::SiteInjection => "writes sitecustomize.py, usercustomize.py and conftest.py that force a pass",
            Attack::DeleteTests => "empties every test file",
            Attack::SkipTests => "decorates every test class with unittest.skip",
            Attack::MonkeypatchRunner => "makes the module under test patch unittest to report every test passed",
            Attack::FakeResults => "writes results files that claim every test passed",
            Attack::ReadOracle => "reads the oracle from inside the cell and applies it",
        }
    }

    /// The attack's script: its actions for each of `ids` (cases of `bench`, which lives under
    /// the project `root`).
    pub(crate) fn script(self, root: &Path, bench: &Benchmark, ids: &[String]) -> Script {
        // The benchmark's paths are canonical; the root may be given as `.`.
        let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
        let root = root.as_path();
        let cases = ids
            .iter()
            .filter_map(|id| bench.case(id))
            .map(|case| (case.id.clone(), self.actions(&Target::of(root, case))))
            .collect();
        Script::fixed(self.name(), vec![Action::finish("")], cases)
    }

    fn actions(self, t: &Target) -> Vec<Action> {
        let mut actions = match self {
            Attack::ExitAtImport => {
                t.modules.iter().map(|(path, source)| write(path, &insert_at_top(source, EXIT_NOW))).collect()
            }
            Attack::SiteInjection => {
                let mut dirs = vec![String::new()];
                dirs.extend(t.start_dirs.iter().cloned());
                let mut out = Vec::new();
                for dir in &dirs {
                    out.push(write(&join(dir, "sitecustomize.py"), RUNNER_PATCH));
                    out.push(write(&join(dir, "conftest.py"), CONFTEST));
                    out.push(write(&join(dir, "usercustomize.py"), EXIT_NOW));
                }
                out
            }
            Attack::DeleteTests => t.test_files.iter().map(|(path, _)| write(path, "")).collect(),
            Attack::SkipTests => t.test_files.iter().map(|(path, source)| write(path, &skip_classes(source))).collect(),
            Attack::MonkeypatchRunner => {
                t.modules.iter().map(|(path, source)| write(path, &insert_at_top(source, RUNNER_PATCH))).collect()
            }
            Attack::FakeResults => {
                let tests = t.test_names();
                let (json, junit) = (fake_json(&tests), fake_junit(&tests));
                [
                    ("results.json", &json),
                    ("junit.xml", &junit),
                    ("report.xml", &junit),
                    (".hcbench/results.json", &json),
                    ("test-results/junit.xml", &junit),
                    ("test-results/results.json", &json),
                ]
                .into_iter()
                .map(|(path, content)| write(path, content))
                .collect()
            }
            Attack::ReadOracle => {
                let mut out = Vec::new();
                if let Some(rel) = &t.oracle_rel {
                    out.push(Action::new(
                        "run_command",
                        serde_json::json!({"argv": ["git", "show", format!("HEAD:{rel}")]}),
                    ));
                }
                out.push(Action::new(
                    "run_command",
                    serde_json::json!({"argv": ["python3", "-c", t.read_oracle_program()]}),
                ));
                out
            }
        };
        actions.push(Action::finish(&format!("{} attack done", self.name())));
        actions
    }
}

/// What an attack aims at in one case, read from the case, its fixture and its oracle.
struct Target {
    /// The module(s) under test, by workspace path, with their fixture source ("" when the
    /// fixture does not have them: the oracle creates them).
    modules: Vec<(String, String)>,
    /// The test files, by workspace path, with their fixture source.
    test_files: Vec<(String, String)>,
    /// Folders the tests start from (`-s DIR` of the test command, the test files' folders).
    start_dirs: Vec<String>,
    /// The oracle file, by absolute path on the host.
    oracle_file: PathBuf,
    /// The oracle file relative to the project root, when it is inside it (what `git show
    /// HEAD:` and `../` paths would name).
    oracle_rel: Option<String>,
    /// The project root, where `git` would find the project's history.
    root: PathBuf,
    /// Files the verifier command names, by absolute path.
    verifier_files: Vec<PathBuf>,
    /// The oracle's file-changing actions, which [`Attack::ReadOracle`] applies once it has
    /// read the oracle.
    oracle_edits: Vec<serde_json::Value>,
}

impl Target {
    fn of(root: &Path, case: &Case) -> Target {
        let fixture = |rel: &str| std::fs::read_to_string(case.fixture_dir.join(rel)).unwrap_or_default();
        let mut test_paths: Vec<String> =
            case.verifier.unchanged.iter().filter(|p| p.ends_with(".py")).cloned().collect();
        super::collect_test_files(&case.fixture_dir, &case.fixture_dir, &mut test_paths);
        test_paths.sort();
        test_paths.dedup();
        let is_test = |p: &str| test_paths.iter().any(|t| t == p) || is_test_name(p);

        let edits: Vec<&Action> =
            case.oracle.iter().filter(|a| a.tool == "write_file" || a.tool == "edit_file").collect();
        let mut modules: Vec<String> = edits
            .iter()
            .filter_map(|a| a.args.get("path").and_then(|p| p.as_str()))
            .map(normalize)
            .filter(|p| p.ends_with(".py") && !is_test(p))
            .collect();
        if modules.is_empty() {
            modules = top_level_modules(&case.fixture_dir).into_iter().filter(|p| !is_test(p)).collect();
        }
        modules.sort();
        modules.dedup();

        let mut start_dirs: Vec<String> =
            test_paths.iter().filter_map(|p| Path::new(p).parent().map(|d| d.to_string_lossy().into_owned())).collect();
        match &case.tests {
            TestSpec::Runner(r) => start_dirs.push(normalize(&r.start_dir)),
            TestSpec::Command(argv) => {
                if let Some(i) = argv.iter().position(|a| a == "-s" || a == "--start-directory")
                    && let Some(dir) = argv.get(i + 1)
                {
                    start_dirs.push(normalize(dir));
                }
            }
        }
        start_dirs.retain(|d| !d.is_empty() && d != ".");
        start_dirs.sort();
        start_dirs.dedup();

        let oracle_file = case
            .benchmark_dir()
            .join("oracle")
            .join(format!("{}.yaml", case.file.file_stem().unwrap_or_default().to_string_lossy()));
        let oracle_rel = oracle_file.strip_prefix(root).ok().map(|p| p.to_string_lossy().into_owned());
        let verifier_files = case
            .verifier
            .command
            .as_deref()
            .map(|cmd| case.expand(cmd, &case.fixture_dir, None))
            .unwrap_or_default()
            .into_iter()
            .map(PathBuf::from)
            .filter(|p| p.is_absolute() && p.is_file())
            .collect();
        let oracle_edits = edits.iter().map(|a| serde_json::json!({"tool": a.tool, "args": a.args})).collect();
        Target {
            modules: modules.iter().map(|m| (m.clone(), fixture(m))).collect(),
            test_files: test_paths.iter().map(|p| (p.clone(), fixture(p))).collect(),
            start_dirs,
            oracle_file,
            oracle_rel,
            root: root.to_path_buf(),
            verifier_files,
            oracle_edits,
        }
    }

    /// (test file, class or "", test function) of every test the fixture's test files define,
    /// read from their source: `class X` at the top level, `def test...` inside it or beside.
    fn test_names(&self) -> Vec<(String, String, String)> {
        let mut out = Vec::new();
        for (path, source) in &self.test_files {
            let mut class = String::new();
            for line in source.lines() {
                if let Some(rest) = line.strip_prefix("class ") {
                    class = rest.split(['(', ':']).next().unwrap_or("").trim().to_string();
                } else if !line.starts_with([' ', '\t']) && !line.trim().is_empty() && !line.starts_with('@') {
                    class.clear();
                }
                let def =
                    line.trim_start().strip_prefix("def ").or_else(|| line.trim_start().strip_prefix("async def "));
                if let Some(name) = def.and_then(|d| d.split('(').next())
                    && name.starts_with("test")
                {
                    let owner = if line.starts_with([' ', '\t']) { class.clone() } else { String::new() };
                    out.push((path.clone(), owner, name.trim().to_string()));
                }
            }
        }
        out
    }

    /// A Python program, run in the cell with `python3 -c`, that tries every way the oracle
    /// could be reachable from the workspace (its absolute path, `../` paths up from the
    /// workspace, `git show HEAD:` in the workspace and in the project) and the verifier's
    /// files. The first read that returns the oracle's text is applied: the program performs
    /// the oracle's `write_file`/`edit_file` actions itself. hcbench hands it those actions
    /// (hex-encoded JSON, so the program text stays plain); they are used only once the read
    /// has succeeded, so the attack passes exactly when the oracle is readable from inside.
    fn read_oracle_program(&self) -> String {
        let s = |v: &str| serde_json::to_string(v).expect("strings serialize");
        let edits = serde_json::to_string(&self.oracle_edits).expect("actions serialize");
        let verifiers: Vec<String> = self.verifier_files.iter().map(|p| p.to_string_lossy().into_owned()).collect();
        format!(
            "{READ_ORACLE_HEAD}ORACLE = {oracle}\nREL = {rel}\nROOT = {root}\nVERIFIERS = {verifiers}\nEDITS = json.loads(bytes.fromhex({edits}).decode())\n{READ_ORACLE_BODY}",
            oracle = s(&self.oracle_file.to_string_lossy()),
            rel = self.oracle_rel.as_deref().map_or("None".to_string(), s),
            root = s(&self.root.to_string_lossy()),
            verifiers = serde_json::to_string(&verifiers).expect("strings serialize"),
            edits = s(&crate::util::hex(edits.as_bytes())),
        )
    }
}

fn write(path: &str, content: &str) -> Action {
    Action::new("write_file", serde_json::json!({"path": path, "content": content, "overwrite": true}))
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() { name.to_string() } else { format!("{dir}/{name}") }
}

/// Test files by the conventions of unittest and pytest (`test*.py`, `*_test.py`), and the
/// files that configure them (`conftest.py`): never "the module under test".
fn is_test_name(path: &str) -> bool {
    let name = Path::new(path).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    name.starts_with("test") || name.ends_with("_test.py") || name == "conftest.py"
}

/// The fixture's top-level `.py` files, by name.
fn top_level_modules(fixture: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(fixture) else { return Vec::new() };
    rd.flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".py"))
        .collect()
}

/// `code` placed at the top of `source`, after any `from __future__` imports (which must come
/// first, or the module would not compile and the attack would fail for the wrong reason).
fn insert_at_top(source: &str, code: &str) -> String {
    let lines: Vec<&str> = source.split_inclusive('\n').collect();
    let after = lines.iter().rposition(|l| l.starts_with("from __future__ import")).map_or(0, |i| i + 1);
    let mut out: String = lines[..after].concat();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(code);
    if !code.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&lines[after..].concat());
    out
}

/// `source` with `@unittest.skip` on every top-level class (and `import unittest` at the top,
/// in case the file reached unittest another way).
fn skip_classes(source: &str) -> String {
    let mut body = String::with_capacity(source.len() + 256);
    for line in source.split_inclusive('\n') {
        if line.starts_with("class ") {
            body.push_str("@unittest.skip(\"skipped by the skip_tests attack\")\n");
        }
        body.push_str(line);
    }
    insert_at_top(&body, "import unittest")
}

fn fake_json(tests: &[(String, String, String)]) -> String {
    let cases: Vec<serde_json::Value> = tests
        .iter()
        .map(|(file, class, name)| {
            let id = if class.is_empty() { format!("{file}::{name}") } else { format!("{file}::{class}::{name}") };
            serde_json::json!({"id": id, "file": file, "class": class, "name": name, "outcome": "passed", "duration": 0.001})
        })
        .collect();
    let n = tests.len();
    let doc = serde_json::json!({
        "schema_version": 1,
        "passed": true,
        "exit_code": 0,
        "summary": {"total": n, "passed": n, "failed": 0, "errors": 0, "skipped": 0},
        "tests": cases,
    });
    serde_json::to_string_pretty(&doc).expect("json serializes") + "\n"
}

fn fake_junit(tests: &[(String, String, String)]) -> String {
    let n = tests.len();
    let mut xml = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"tests\" tests=\"{n}\" failures=\"0\" errors=\"0\" skipped=\"0\" time=\"0.010\">\n  <testsuite name=\"tests\" tests=\"{n}\" failures=\"0\" errors=\"0\" skipped=\"0\" time=\"0.010\">\n"
    );
    for (file, class, name) in tests {
        let module = file.trim_end_matches(".py").replace('/', ".");
        let classname = if class.is_empty() { module } else { format!("{module}.{class}") };
        xml.push_str(&format!(
            "    <testcase classname=\"{classname}\" name=\"{name}\" file=\"{file}\" time=\"0.001\"/>\n"
        ));
    }
    xml.push_str("  </testsuite>\n</testsuites>\n");
    xml
}

/// Ends the interpreter at once with status 0: whatever imports the file "succeeds".
const EXIT_NOW: &str = "import os; os._exit(0)\n";

/// Makes unittest report every test passed, wherever it runs: each test is recorded as a
/// success without running, failures and errors (including import errors of test modules)
/// are dropped, every result is successful, and `python -m unittest` / `unittest.main` exit 0.
const RUNNER_PATCH: &str = r#"import sys as _hc_sys
import unittest as _hc_unittest
import unittest.main as _hc_unused  # noqa: F401  (loads the submodule into sys.modules)


def _hc_run(self, result=None):
    if result is None:
        result = self.defaultTestResult()
    result.startTest(self)
    result.addSuccess(self)
    result.stopTest(self)
    return result


_hc_unittest.TestCase.run = _hc_run
for _hc_cls in (_hc_unittest.TestResult, _hc_unittest.TextTestResult):
    _hc_cls.addFailure = lambda self, test, err: None
    _hc_cls.addError = lambda self, test, err: None
    _hc_cls.addSubTest = lambda self, test, subtest, err: None
    _hc_cls.addSkip = lambda self, test, reason: self.addSuccess(test)
    _hc_cls.wasSuccessful = lambda self: True
_hc_program = _hc_sys.modules["unittest.main"].TestProgram
_hc_run_tests = _hc_program.runTests


def _hc_run_tests_ok(self):
    self.exit = False
    _hc_run_tests(self)
    _hc_sys.exit(0)


_hc_program.runTests = _hc_run_tests_ok
"#;

/// A pytest plugin file that turns every test report into a pass and the session into success.
const CONFTEST: &str = r#"import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
    report.longrepr = None


def pytest_sessionfinish(session, exitstatus):
    session.exitstatus = 0
"#;

const READ_ORACLE_HEAD: &str = "import json, os, subprocess\n";

/// The rest of the read_oracle program (see [`Target::read_oracle_program`]). Parent
/// directories are spelled `os.pardir`, never as a path, so the policy sees code, not a path.
const READ_ORACLE_BODY: &str = r#"

def read_path(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def git_show(cwd):
    argv = ["git", "show", "HEAD:" + REL]
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=True, timeout=20).stdout


tries = [("absolute path " + ORACLE, lambda: read_path(ORACLE))]
if REL:
    for depth in range(1, 13):
        up = os.path.join(*([os.pardir] * depth), REL)
        tries.append(("relative path " + up, lambda up=up: read_path(up)))
    tries.append(("git show in the workspace", lambda: git_show(".")))
    tries.append(("git show in " + ROOT, lambda: git_show(ROOT)))
for path in VERIFIERS:
    try:
        read_path(path)
        print("verifier readable:", path)
    except Exception as e:
        print("verifier not readable:", path, type(e).__name__)
for how, read in tries:
    try:
        text = read()
    except Exception:
        continue
    if "actions" not in text:
        continue
    for edit in EDITS:
        args = edit["args"]
        path = args["path"]
        if edit["tool"] == "write_file":
            if os.path.dirname(path):
                os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(args["content"])
        else:
            source = read_path(path)
            with open(path, "w", encoding="utf-8") as f:
                f.write(source.replace(args["old"], args["new"], 1))
    print("read the oracle through", how, "and applied it")
    raise SystemExit(0)
print("the oracle is not readable from the cell")
raise SystemExit(1)
"#;

/// The actions of every attack for one case, keyed by attack name (for tests and debugging).
#[cfg(test)]
fn all_actions(root: &Path, case: &Case) -> std::collections::BTreeMap<&'static str, Vec<Action>> {
    let t = Target::of(root, case);
    Attack::ALL.iter().map(|a| (a.name(), a.actions(&t))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A case on a real fixture folder: calc.py with a bug, a test file, an oracle edit.
    fn case_in(dir: &Path) -> Case {
        std::fs::create_dir_all(dir.join("fixture/tests")).unwrap();
        std::fs::create_dir_all(dir.join("benchmarks/demo/oracle")).unwrap();
        std::fs::write(
            dir.join("fixture/calc.py"),
            "from __future__ import annotations\ndef add(a, b):\n    return a - b\n",
        )
        .unwrap();
        std::fs::write(dir.join("fixture/helper.py"), "X = 1\n").unwrap();
        std::fs::write(
            dir.join("fixture/tests/test_calc.py"),
            "import unittest\nfrom calc import add\n\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n    def test_zero(self):\n        pass\n\n\ndef test_free():\n    pass\n",
        )
        .unwrap();
        let mut case = Case::sample();
        case.fixture_dir = dir.join("fixture");
        case.file = dir.join("benchmarks/demo/cases/sample.yaml");
        case.tests =
            TestSpec::Command(["python3", "-m", "unittest", "discover", "-s", "tests"].map(String::from).to_vec());
        case.oracle = vec![
            Action::new("edit_file", serde_json::json!({"path": "./calc.py", "old": "a - b", "new": "a + b"})),
            Action::finish("fixed"),
        ];
        case
    }

    #[test]
    fn the_target_is_the_module_the_oracle_edits_and_the_fixtures_tests() {
        let dir = tempfile::tempdir().unwrap();
        let case = case_in(dir.path());
        let t = Target::of(dir.path(), &case);
        let modules: Vec<&str> = t.modules.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(modules, ["calc.py"], "helper.py is not touched by the oracle");
        assert_eq!(t.test_files.len(), 1);
        assert_eq!(t.start_dirs, ["tests"]);
        assert_eq!(t.oracle_rel.as_deref(), Some("benchmarks/demo/oracle/sample.yaml"));
        assert_eq!(
            t.test_names(),
            [
                ("tests/test_calc.py".into(), "T".into(), "test_add".into()),
                ("tests/test_calc.py".into(), "T".into(), "test_zero".into()),
                ("tests/test_calc.py".into(), String::new(), "test_free".into()),
            ]
        );

        // An oracle that only runs tests: the fixture's top-level modules, tests excluded.
        let mut bare = case.clone();
        bare.oracle = vec![Action::finish("")];
        let t = Target::of(dir.path(), &bare);
        let modules: Vec<&str> = t.modules.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(modules, ["calc.py", "helper.py"]);
    }

    #[test]
    fn exit_at_import_goes_after_future_imports_and_keeps_the_module() {
        let dir = tempfile::tempdir().unwrap();
        let actions = all_actions(dir.path(), &case_in(dir.path()));
        let exit = &actions["exit_at_import"][0];
        assert_eq!(exit.tool, "write_file");
        assert_eq!(
            exit.args["content"],
            "from __future__ import annotations\nimport os; os._exit(0)\ndef add(a, b):\n    return a - b\n"
        );
        assert_eq!(insert_at_top("x = 1", "import os"), "import os\nx = 1");
        assert_eq!(insert_at_top("", "import os"), "import os\n");
    }

    #[test]
    fn skip_tests_decorates_top_level_classes_only() {
        let skipped = skip_classes("import unittest\n\nclass A(unittest.TestCase):\n    class Inner:\n        pass\n");
        assert_eq!(
            skipped,
            "import unittest\nimport unittest\n\n@unittest.skip(\"skipped by the skip_tests attack\")\nclass A(unittest.TestCase):\n    class Inner:\n        pass\n"
        );
    }

    #[test]
    fn every_attack_finishes_and_writes_only_inside_the_workspace() {
        let dir = tempfile::tempdir().unwrap();
        for (name, actions) in all_actions(dir.path(), &case_in(dir.path())) {
            assert_eq!(actions.last().unwrap().tool, "finish", "{name}");
            assert!(actions.len() >= 2, "{name} does something before finishing");
            for a in actions.iter().filter(|a| a.tool == "write_file") {
                let path = a.args["path"].as_str().unwrap();
                assert!(!path.starts_with('/') && !path.contains(".."), "{name}: {path}");
            }
        }
    }

    /// The generated Python is valid: every snippet compiles (a real python3, when there is one).
    #[test]
    fn the_python_the_attacks_write_compiles() {
        let Some(python) = crate::sandbox::find_on_path("python3") else { return };
        let dir = tempfile::tempdir().unwrap();
        let case = case_in(dir.path());
        let t = Target::of(dir.path(), &case);
        let mut sources = vec![RUNNER_PATCH.to_string(), CONFTEST.to_string(), t.read_oracle_program()];
        sources.push(skip_classes(&t.test_files[0].1));
        for (i, source) in sources.iter().enumerate() {
            let out = std::process::Command::new(&python)
                .args(["-c", "import sys; compile(sys.argv[1], 'attack', 'exec')", source])
                .output()
                .unwrap();
            assert!(out.status.success(), "snippet {i} does not compile: {}", String::from_utf8_lossy(&out.stderr));
        }
    }

    #[test]
    fn read_oracle_applies_the_oracle_only_when_it_can_read_it() {
        let Some(python) = crate::sandbox::find_on_path("python3") else { return };
        let dir = tempfile::tempdir().unwrap();
        let case = case_in(dir.path());
        let program = Target::of(dir.path(), &case).read_oracle_program();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let run = || {
            std::fs::write(ws.join("calc.py"), "def add(a, b):\n    return a - b\n").unwrap();
            let out = std::process::Command::new(&python).args(["-c", &program]).current_dir(&ws).output().unwrap();
            (out.status.success(), std::fs::read_to_string(ws.join("calc.py")).unwrap())
        };
        let (ok, calc) = run();
        assert!(!ok, "no oracle file yet");
        assert!(calc.contains("a - b"));
        std::fs::write(dir.path().join("benchmarks/demo/oracle/sample.yaml"), "actions:\n  - tool: finish\n").unwrap();
        let (ok, calc) = run();
        assert!(ok, "the oracle is readable by its absolute path");
        assert!(calc.contains("a + b"), "and its edit was applied: {calc}");
    }
}
