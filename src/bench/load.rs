//! Reading and validating `benchmark.yaml`, `cases/*.yaml` and `oracle/*.yaml`.
//!
//! Two stages, like ripgrep's low/high arguments: serde turns each file into a raw struct whose
//! fields are all optional (syntax and type errors come back with line and column), then
//! [`validate_case`] checks meaning and collects every problem instead of stopping at the first.
//!
//! Every problem is reported once, where it is caused. When `benchmark.yaml` itself does not
//! load, the cases are still checked, but not for what `benchmark.yaml` would have given them
//! (its defaults, its categories): one typo in `defaults:` would otherwise come back as two
//! problems per case. Those consequential problems are counted in the one that caused them.
//! Likewise a case without a usable `fixture:` is not checked against a fixture folder.

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::actions::check_action;
use super::{
    Benchmark, Case, Control, DEFAULT_CELL_TIMEOUT_S, DEFAULT_PROGRAMS, RunnerKind, RunnerSpec, Split, TestSpec,
    VerifierSpec,
};
use crate::action::Tool;
use crate::sandbox::Limits;
use crate::util::natural_cmp;

/// One thing wrong with a benchmark, phrased so the user knows what to change.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub file: PathBuf,
    pub case: Option<String>,
    pub field: Option<String>,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(case) = &self.case {
            write!(f, ": case `{case}`")?;
        }
        if let Some(field) = &self.field {
            write!(f, ": field `{field}`")?;
        }
        write!(f, ": {}", self.message)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("no benchmark `{name}`: {path} does not exist (available: {available}){hint}")]
    NotFound { name: String, path: PathBuf, available: String, hint: String },
    #[error("benchmark `{name}` is invalid ({} problem{}):\n{}", .problems.len(), if .problems.len() == 1 { "" } else { "s" }, ProblemList(.problems))]
    Invalid { name: String, problems: Vec<Problem> },
}

struct ProblemList<'a>(&'a [Problem]);

impl fmt::Display for ProblemList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "  - {p}")?;
        }
        Ok(())
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBenchmark {
    name: Option<String>,
    #[serde(default)]
    description: String,
    categories: Option<Vec<String>>,
    #[serde(default)]
    defaults: RawDefaults,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDefaults {
    allowed_tools: Option<Vec<String>>,
    allowed_programs: Option<Vec<String>>,
    step_budget: Option<u32>,
    timeout_s: Option<f64>,
    cell_timeout_s: Option<f64>,
    limits: Option<Limits>,
    test_command: Option<Vec<String>>,
    tests: Option<RawTests>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCase {
    id: Option<String>,
    category: Option<String>,
    split: Option<String>,
    fixture: Option<String>,
    prompt: Option<String>,
    allowed_tools: Option<Vec<String>>,
    allowed_programs: Option<Vec<String>>,
    step_budget: Option<u32>,
    timeout_s: Option<f64>,
    cell_timeout_s: Option<f64>,
    limits: Option<Limits>,
    test_command: Option<Vec<String>>,
    tests: Option<RawTests>,
    #[serde(default)]
    verifier: RawVerifier,
    #[serde(default)]
    controls: Vec<String>,
    /// A multi-session case (`bench::sessions`): how its sessions run, and its hidden features.
    sessions: Option<super::sessions::RawSessions>,
    features: Option<Vec<super::sessions::RawFeature>>,
}

/// `tests:`, in a case or in `defaults:`; a case's keys win over the defaults' one by one.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTests {
    runner: Option<String>,
    start_dir: Option<String>,
    fail_to_pass: Option<Vec<String>>,
    pass_to_pass: Option<Vec<String>>,
}

impl RawTests {
    fn or(self, defaults: Option<&RawTests>) -> RawTests {
        let Some(d) = defaults else { return self };
        RawTests {
            runner: self.runner.or_else(|| d.runner.clone()),
            start_dir: self.start_dir.or_else(|| d.start_dir.clone()),
            fail_to_pass: self.fail_to_pass.or_else(|| d.fail_to_pass.clone()),
            pass_to_pass: self.pass_to_pass.or_else(|| d.pass_to_pass.clone()),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawVerifier {
    command: Option<Vec<String>>,
    #[serde(default)]
    unchanged: Vec<String>,
    #[serde(default)]
    forbid_denials: bool,
    max_steps: Option<u32>,
    first_read: Option<String>,
}

/// An oracle file. The actions stay plain values until [`check_action`] has checked them
/// against the tool table: serde's [`Action`](crate::action::Action) would drop a misspelt key silently.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOracle {
    #[serde(default)]
    actions: Vec<Value>,
}

/// What `benchmark.yaml` gives the cases. `None` fields mean "not known": the file did not
/// load, so checks that depend on them are left out (and counted in `folded`).
struct Given<'a> {
    defaults: Option<&'a RawDefaults>,
    categories: Option<&'a [String]>,
    /// Problems left out because `benchmark.yaml` did not load.
    folded: usize,
}

/// Loads `root/benchmarks/<name>` and validates every case, fixture and oracle.
pub fn load_benchmark(root: &Path, name: &str) -> Result<Benchmark, LoadError> {
    let dir = root.join("benchmarks").join(name);
    if !dir.join("benchmark.yaml").is_file() {
        let names = benchmark_names(root);
        let hint = if names.is_empty() {
            wrong_root_hint(root)
        } else {
            crate::util::did_you_mean(name, names.iter().map(String::as_str))
        };
        let available = if names.is_empty() { "none".into() } else { names.join(", ") };
        return Err(LoadError::NotFound { name: name.to_string(), path: dir.join("benchmark.yaml"), available, hint });
    }
    let dir = dir.canonicalize().unwrap_or(dir);
    let mut problems = Vec::new();
    let meta_file = dir.join("benchmark.yaml");
    let (meta, meta_loads) = match read_yaml(&meta_file) {
        Ok(m) => (m, true),
        Err(p) => {
            problems.push(p);
            (RawBenchmark::default(), false)
        }
    };
    // The declared categories, even from a benchmark.yaml that does not load (read leniently),
    // so that a case's misspelt category is still reported beside a typo in `defaults:`.
    let categories: Option<Vec<String>> = if meta_loads {
        check_categories(meta.categories.as_deref(), &meta_file, &mut problems)
    } else {
        lenient_categories(&meta_file)
    };
    // When benchmark.yaml does not load, its problem is the first one.
    let meta_problem = (!meta_loads).then_some(0);
    if let Some(n) = &meta.name
        && n != name
    {
        problems.push(Problem {
            file: meta_file.clone(),
            case: None,
            field: Some("name".into()),
            message: format!("is `{n}` but the folder is `{name}`; make them equal"),
        });
    }

    let cases_dir = dir.join("cases");
    let mut case_files: Vec<PathBuf> = match fs::read_dir(&cases_dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
            .collect(),
        Err(e) => {
            problems.push(Problem {
                file: cases_dir.clone(),
                case: None,
                field: None,
                message: format!("cannot list the cases folder ({e}); create it with one YAML file per case"),
            });
            Vec::new()
        }
    };
    case_files.sort();
    if case_files.is_empty() && problems.is_empty() {
        problems.push(Problem {
            file: cases_dir.clone(),
            case: None,
            field: None,
            message: "holds no case files; add cases/<case-id>.yaml".into(),
        });
    }

    let fixtures_root = root.join("fixtures");
    let mut given =
        Given { defaults: meta_loads.then_some(&meta.defaults), categories: categories.as_deref(), folded: 0 };
    let mut cases = Vec::new();
    let mut seen: BTreeMap<String, PathBuf> = BTreeMap::new();
    for file in &case_files {
        let raw: RawCase = match read_yaml(file) {
            Ok(c) => c,
            Err(p) => {
                problems.push(p);
                continue;
            }
        };
        if let Some(case) = validate_case(raw, file, &dir, &fixtures_root, &mut given, &mut problems) {
            if let Some(prev) = seen.insert(case.id.clone(), file.clone()) {
                problems.push(Problem {
                    file: file.clone(),
                    case: Some(case.id.clone()),
                    field: Some("id".into()),
                    message: format!("duplicates the id of {}; ids must be unique", prev.display()),
                });
                continue;
            }
            cases.push(case);
        }
    }
    if let Some(i) = meta_problem
        && given.folded > 0
    {
        problems[i].message.push_str(&format!(
            " ({} problem{} of case files that may follow from this are not listed, such as a step_budget or \
             test command the defaults would give; fix this first)",
            given.folded,
            if given.folded == 1 { "" } else { "s" }
        ));
    }
    if !problems.is_empty() {
        return Err(LoadError::Invalid { name: name.to_string(), problems });
    }
    cases.sort_by(|a, b| natural_cmp(&a.id, &b.id));
    Ok(Benchmark {
        name: name.to_string(),
        description: meta.description,
        dir,
        categories: categories.unwrap_or_default(),
        cases,
    })
}

/// The benchmarks under `root` (folders of `benchmarks/` with a benchmark.yaml), sorted.
fn benchmark_names(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(root.join("benchmarks"))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter(|e| e.path().join("benchmark.yaml").is_file())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// A root without any benchmark is most often the wrong directory (hcbench run from a
/// subfolder or from home): say which root was used and how to choose another, since
/// `--root` defaults to the current directory.
fn wrong_root_hint(root: &Path) -> String {
    let shown = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let what = if root.join("benchmarks").is_dir() { "no benchmark in" } else { "no benchmarks/ folder in" };
    format!(
        "; {what} the project root {}: run hcbench from the project's folder, or name it with `--root DIR` or HCBENCH_ROOT",
        shown.display()
    )
}

fn read_yaml<T: for<'de> Deserialize<'de>>(file: &Path) -> Result<T, Problem> {
    let text = fs::read_to_string(file).map_err(|e| Problem {
        file: file.to_path_buf(),
        case: None,
        field: None,
        message: format!("cannot read: {e}"),
    })?;
    serde_saphyr::from_str(&text).map_err(|e| Problem {
        file: file.to_path_buf(),
        case: None,
        field: None,
        message: format!("is not valid: {}", crate::util::yaml_error(&e, file)),
    })
}

fn validate_case(
    raw: RawCase,
    file: &Path,
    bench_dir: &Path,
    fixtures_root: &Path,
    given: &mut Given,
    problems: &mut Vec<Problem>,
) -> Option<Case> {
    let before = problems.len();
    let folded_before = given.folded;
    // Without benchmark.yaml's defaults, checks of what they would give are left out.
    let defaults_known = given.defaults.is_some();
    let no_defaults = RawDefaults::default();
    let defaults = given.defaults.unwrap_or(&no_defaults);
    let stem = file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let case_label = raw.id.clone().or_else(|| Some(stem.clone()));
    let mut problem = |field: &str, message: String| {
        problems.push(Problem {
            file: file.to_path_buf(),
            case: case_label.clone(),
            field: Some(field.to_string()),
            message,
        })
    };

    let id = match raw.id {
        None => {
            problem("id", format!("is missing; add `id: {stem}`"));
            String::new()
        }
        Some(id) => {
            if !valid_id(&id) {
                problem("id", format!("`{id}` may hold only a-z, 0-9, '-', '_' and '.'"));
            } else if id != stem {
                problem("id", format!("`{id}` differs from the file name `{stem}.yaml`; rename one"));
            }
            id
        }
    };
    let declared = |list: &[String]| {
        if list.is_empty() { "none declared".to_string() } else { list.join(", ") }
    };
    let category = match (raw.category, given.categories) {
        (None, Some(list)) => {
            problem(
                "category",
                format!("is missing; use one of the categories benchmark.yaml declares: {}", declared(list)),
            );
            None
        }
        (None, None) => {
            problem("category", "is missing; use one of the categories benchmark.yaml declares".into());
            None
        }
        (Some(c), Some(list)) if !list.contains(&c) => {
            problem(
                "category",
                format!(
                    "`{c}` is not declared in benchmark.yaml (declared: {}); fix the category or add it to \
                     `categories:` there",
                    declared(list)
                ),
            );
            None
        }
        (Some(c), Some(_)) => Some(c),
        (Some(_), None) => {
            given.folded += 1;
            None
        }
    };
    let split = match raw.split.as_deref() {
        None => {
            problem("split", "is missing; use train, test or heldout".into());
            None
        }
        Some(s) => {
            let parsed = Split::parse(s);
            if parsed.is_none() {
                problem("split", format!("`{s}` is unknown; use train, test or heldout"));
            }
            parsed
        }
    };
    let fixture = raw.fixture.unwrap_or_default();
    let fixture_dir = fixtures_root.join(&fixture);
    // The folder the checks below look into, when there is one: a missing or bad `fixture:`
    // is one problem, not one more per file the case names in it.
    let mut fixture_found = None;
    if fixture.is_empty() {
        problem("fixture", "is missing; name a folder under fixtures/".into());
    } else if !is_plain_relative(&fixture) {
        problem("fixture", format!("`{fixture}` must be a plain folder name under fixtures/"));
    } else if !fixture_dir.is_dir() {
        problem("fixture", format!("`{fixture}` does not exist: create {}", fixture_dir.display()));
    } else {
        fixture_found = Some(fixture_dir.as_path());
    }
    let prompt = raw.prompt.unwrap_or_default();
    if prompt.trim().is_empty() {
        problem("prompt", "is missing or empty; say what the agent must do".into());
    }

    let tool_names = raw
        .allowed_tools
        .or_else(|| defaults.allowed_tools.clone())
        .unwrap_or_else(|| Tool::defaults().map(|t| t.as_str().to_string()).collect());
    let mut allowed_tools = Vec::new();
    for name in &tool_names {
        match Tool::parse(name) {
            Some(t) => allowed_tools.push(t),
            None => problem("allowed_tools", format!("`{name}` is not a tool; known tools: {}", Tool::names())),
        }
    }
    if !tool_names.is_empty() && !allowed_tools.contains(&Tool::Finish) && allowed_tools.len() == tool_names.len() {
        problem("allowed_tools", "must include `finish`, or the agent can never end".into());
    }
    let allowed_programs = raw
        .allowed_programs
        .or_else(|| defaults.allowed_programs.clone())
        .unwrap_or_else(|| DEFAULT_PROGRAMS.iter().map(|s| s.to_string()).collect());

    let sessions = super::sessions::resolve(raw.sessions, raw.features, &prompt, &mut problem);
    if sessions.is_some() && raw.step_budget.is_some() {
        problem(
            "step_budget",
            "is per session in a multi-session case; give it as `sessions.step_budget` and remove this one".into(),
        );
    }
    // A multi-session case's budget in all is every session's: what `run_started` records.
    let step_budget = match &sessions {
        Some(s) => s.count.saturating_mul(s.step_budget),
        None => raw.step_budget.or(defaults.step_budget).unwrap_or(0),
    };
    if sessions.is_none() {
        if raw.step_budget.is_none() && !defaults_known {
            given.folded += 1;
        } else if step_budget == 0 {
            problem("step_budget", "is missing or 0; give the number of model actions allowed (e.g. 20)".into());
        }
    }
    let timeout_s = raw.timeout_s.or(defaults.timeout_s).unwrap_or(60.0);
    if !(timeout_s > 0.0 && timeout_s.is_finite()) {
        problem("timeout_s", format!("{timeout_s} must be a positive number of seconds"));
    }
    let cell_timeout_s = raw.cell_timeout_s.or(defaults.cell_timeout_s).unwrap_or(DEFAULT_CELL_TIMEOUT_S);
    if !(cell_timeout_s > 0.0 && cell_timeout_s.is_finite()) {
        problem("cell_timeout_s", format!("{cell_timeout_s} must be a positive number of seconds"));
    }
    let limits = raw.limits.or(defaults.limits).unwrap_or_default();
    if limits.memory_mb == 0
        || limits.processes == 0
        || limits.file_size_mb == 0
        || limits.cpu_s == 0
        || limits.open_files == 0
    {
        problem("limits", format!("{limits:?}: every limit must be at least 1; leave a limit out for its default"));
    }
    let tests =
        if !defaults_known && raw.test_command.is_none() && raw.tests.as_ref().is_none_or(|t| t.runner.is_none()) {
            // Which tests run may come from the defaults that did not load.
            given.folded += 1;
            None
        } else {
            resolve_tests(raw.test_command, raw.tests, defaults, fixture_found, &mut problem)
        };

    let v = raw.verifier;
    if let Some(cmd) = &v.command
        && (cmd.is_empty() || cmd[0].is_empty())
    {
        problem("verifier.command", "is empty; give an argv list or remove the key".into());
    }
    for path in &v.unchanged {
        if !is_plain_relative(path) {
            problem("verifier.unchanged", format!("`{path}` must be a relative path inside the fixture"));
        } else if let Some(dir) = fixture_found
            && !dir.join(path).is_file()
        {
            problem("verifier.unchanged", format!("`{path}` is not a file of fixture `{fixture}`"));
        }
    }
    if let Some(p) = &v.first_read
        && !is_plain_relative(p)
    {
        problem("verifier.first_read", format!("`{p}` must be a relative path"));
    }
    let mut controls = Vec::new();
    for name in &raw.controls {
        match Control::parse(name) {
            Some(c) if !controls.contains(&c) => controls.push(c),
            Some(_) => problem("controls", format!("`{name}` is listed twice")),
            None => problem(
                "controls",
                format!("`{name}` is not a control; known: {}", Control::ALL.map(Control::as_str).join(", ")),
            ),
        }
    }

    // The oracle lives beside the case; a case without one cannot be validated or run as control.
    let oracle_file = bench_dir.join("oracle").join(format!("{stem}.yaml"));
    let mut oracle = Vec::new();
    if !oracle_file.is_file() {
        problem("oracle", format!("no oracle actions: create {}", oracle_file.display()));
    } else {
        match read_yaml::<RawOracle>(&oracle_file) {
            Err(p) => problems.push(Problem { case: case_label.clone(), ..p }),
            Ok(raw) => {
                if raw.actions.is_empty() {
                    problems.push(Problem {
                        file: oracle_file.clone(),
                        case: case_label.clone(),
                        field: Some("actions".into()),
                        message: "is empty; list the known-good actions that solve the case".into(),
                    });
                }
                for (i, action) in raw.actions.iter().enumerate() {
                    for p in check_action(action) {
                        problems.push(Problem {
                            file: oracle_file.clone(),
                            case: case_label.clone(),
                            field: Some(p.at(&format!("actions[{i}]"))),
                            message: p.message,
                        });
                    }
                }
                // Checked above; an action that still does not convert was already reported.
                oracle = raw.actions.into_iter().filter_map(|a| serde_json::from_value(a).ok()).collect();
                if let Some(s) = &sessions
                    && !oracle.is_empty()
                    && super::sessions::parts(&oracle) != s.count as usize
                {
                    problems.push(Problem {
                        file: oracle_file.clone(),
                        case: case_label.clone(),
                        field: Some("actions".into()),
                        message: format!(
                            "holds {} session part(s) but the case has {} sessions; end each session's actions with \
                             `finish`",
                            super::sessions::parts(&oracle),
                            s.count
                        ),
                    });
                }
            }
        }
    }

    if problems.len() != before || given.folded != folded_before {
        return None;
    }
    Some(Case {
        id,
        category: category?,
        split: split?,
        fixture,
        fixture_dir: fixture_dir.canonicalize().unwrap_or(fixture_dir),
        prompt,
        allowed_tools,
        allowed_programs,
        step_budget,
        timeout: Duration::from_secs_f64(timeout_s),
        cell_timeout: Duration::from_secs_f64(cell_timeout_s),
        limits,
        tests: tests?,
        verifier: VerifierSpec {
            command: v.command,
            unchanged: v.unchanged,
            forbid_denials: v.forbid_denials,
            max_steps: v.max_steps,
            first_read: v.first_read,
        },
        oracle,
        controls,
        sessions,
        file: file.to_path_buf(),
    })
}

/// The case's tests: hcbench's runner when `tests.runner` is set (in the case or the defaults),
/// else the plain `test_command`. Both at once is a mistake: the runner builds its own command.
fn resolve_tests(
    test_command: Option<Vec<String>>,
    tests: Option<RawTests>,
    defaults: &RawDefaults,
    fixture_dir: Option<&Path>,
    problem: &mut impl FnMut(&str, String),
) -> Option<TestSpec> {
    let case_gives_command = test_command.is_some();
    let test_command = test_command.or_else(|| defaults.test_command.clone());
    let case_gives_tests = tests.is_some();
    let tests = tests.unwrap_or_default().or(defaults.tests.as_ref());
    let Some(runner) = tests.runner.as_deref() else {
        if case_gives_tests || defaults.tests.is_some() {
            problem(
                "tests.runner",
                "is missing; set `runner: unittest` to run the tests through hcbench's runner \
                 (fail_to_pass, pass_to_pass and start_dir need it)"
                    .into(),
            );
            return None;
        }
        let argv = test_command.unwrap_or_default();
        if argv.is_empty() || argv[0].is_empty() {
            problem(
                "test_command",
                "is missing; add `tests: {runner: unittest}` (hcbench's runner, which checks which tests \
                 passed), or give an argv list judged by exit code, e.g. [\"python3\", \"-m\", \"unittest\"]"
                    .into(),
            );
            return None;
        }
        return Some(TestSpec::Command(argv));
    };
    let mut ok = true;
    if test_command.is_some() {
        let whose = if case_gives_command { "this case" } else { "benchmark.yaml `defaults:`" };
        problem(
            "test_command",
            format!(
                "is given in {whose} while `tests.runner` is set; remove `test_command`: hcbench builds the \
                 command of its runner itself"
            ),
        );
        ok = false;
    }
    let runner = match runner {
        "unittest" => Some(RunnerKind::Unittest),
        other => {
            problem("tests.runner", format!("`{other}` is unknown; use `unittest`"));
            None
        }
    };
    let start_dir = tests.start_dir.unwrap_or_else(|| "tests".into());
    if !is_plain_relative(&start_dir) {
        problem("tests.start_dir", format!("`{start_dir}` must be a relative folder inside the fixture, e.g. tests"));
        ok = false;
    } else if let Some(dir) = fixture_dir
        && !dir.join(&start_dir).is_dir()
    {
        problem(
            "tests.start_dir",
            format!("`{start_dir}` is not a folder of the fixture; name the folder the tests live in"),
        );
        ok = false;
    }
    let fail_to_pass = tests.fail_to_pass.unwrap_or_default();
    let pass_to_pass = tests.pass_to_pass.unwrap_or_default();
    let mut seen = std::collections::BTreeSet::new();
    for (field, list) in [("tests.fail_to_pass", &fail_to_pass), ("tests.pass_to_pass", &pass_to_pass)] {
        for id in list {
            if id.trim().is_empty() || id.contains(char::is_whitespace) {
                problem(field, format!("`{id}` is not a test id; write module.Class.test_method"));
                ok = false;
            } else if !seen.insert(id.as_str()) {
                problem(field, format!("`{id}` is listed twice; a test belongs in one list, once"));
                ok = false;
            }
        }
    }
    let runner = runner?;
    ok.then_some(TestSpec::Runner(RunnerSpec { runner, start_dir, fail_to_pass, pass_to_pass }))
}

pub(super) fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b))
        && !id.starts_with('.')
}

fn is_plain_relative(p: &str) -> bool {
    let path = Path::new(p);
    !p.is_empty() && path.components().all(|c| matches!(c, Component::Normal(_)))
}

/// Checks `categories:` of benchmark.yaml; the declared list when it is usable.
fn check_categories(list: Option<&[String]>, file: &Path, problems: &mut Vec<Problem>) -> Option<Vec<String>> {
    let mut problem = |message: String| {
        problems.push(Problem { file: file.to_path_buf(), case: None, field: Some("categories".into()), message })
    };
    let Some(list) = list else {
        problem(
            "is missing; declare the categories the cases use, e.g. `categories: [bugfix, codegen]` \
             (docs/adding-a-benchmark.md)"
                .into(),
        );
        return None;
    };
    if list.is_empty() {
        problem("is empty; declare at least one category, e.g. `categories: [codegen]`".into());
        return None;
    }
    let mut ok = true;
    for (i, c) in list.iter().enumerate() {
        if !valid_id(c) {
            problem(format!("`{c}` may hold only a-z, 0-9, '-', '_' and '.', and not start with '.'"));
            ok = false;
        } else if list[..i].contains(c) {
            problem(format!("`{c}` is declared twice"));
            ok = false;
        }
    }
    ok.then(|| list.to_vec())
}

/// The categories of a benchmark.yaml that does not load as a whole, when that part of it
/// reads as a list of names.
fn lenient_categories(file: &Path) -> Option<Vec<String>> {
    let text = fs::read_to_string(file).ok()?;
    let value: Value = serde_saphyr::from_str(&text).ok()?;
    let list: Vec<String> = serde_json::from_value(value.get("categories")?.clone()).ok()?;
    (!list.is_empty() && list.iter().all(|c| valid_id(c))).then_some(list)
}

/// Checks that the first word of each command the cases `ids` run names a program that exists: on
/// `search` (the PATH the cells' commands get), or, for a name with a slash, as a file (with
/// `{benchmark_dir}` the benchmark's folder and `{workspace}` or a relative path the case's
/// fixture, which the workspace is a copy of). A misspelt `pyhton3` would otherwise end every
/// cell as a harness error, after a whole run.
pub fn check_programs(bench: &Benchmark, ids: &[String], search: &std::ffi::OsStr) -> Result<(), LoadError> {
    let mut problems = Vec::new();
    for case in ids.iter().filter_map(|id| bench.case(id)) {
        let mut commands: Vec<(String, Vec<String>)> = Vec::new();
        match &case.tests {
            TestSpec::Command(argv) => commands.push(("test_command".into(), argv.clone())),
            // hcbench's runner is a Python program.
            TestSpec::Runner(_) => commands.push(("tests.runner".into(), vec!["python3".into()])),
        }
        if let Some(argv) = &case.verifier.command {
            commands.push(("verifier.command".into(), argv.clone()));
        }
        // A multi-session case's hidden checks run like verifier commands.
        for (i, f) in case.sessions.iter().flat_map(|s| s.features.iter().enumerate()) {
            commands.push((format!("features[{i}].check"), f.check.clone()));
        }
        for (field, argv) in commands {
            let argv = case.expand(&argv, &case.fixture_dir, None);
            let Some(program) = argv.first() else { continue };
            if crate::sandbox::find_program(program, search, &case.fixture_dir).is_none() {
                let where_ = if program.contains('/') {
                    "is not an executable file".to_string()
                } else {
                    format!("is not found on the PATH the cells' commands get ({})", search.to_string_lossy())
                };
                problems.push(Problem {
                    file: case.file.clone(),
                    case: Some(case.id.clone()),
                    field: Some(field.clone()),
                    message: format!(
                        "`{program}` {where_}; fix the program name or install it{}",
                        if field == "tests.runner" { " (hcbench's unittest runner needs python3)" } else { "" }
                    ),
                });
            }
        }
    }
    if problems.is_empty() { Ok(()) } else { Err(LoadError::Invalid { name: bench.name.clone(), problems }) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A project with benchmark `b` and fixture `calc`; `cases` are (id, case YAML, oracle YAML).
    fn project(meta: &str, cases: &[(&str, &str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let write = |rel: &str, text: &str| {
            let p = dir.path().join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        };
        write("benchmarks/b/benchmark.yaml", meta);
        write("fixtures/calc/calc.py", "def add(a, b):\n    return a - b\n");
        write("fixtures/calc/tests/test_calc.py", "import unittest\n");
        for (id, case, oracle) in cases {
            write(&format!("benchmarks/b/cases/{id}.yaml"), case);
            write(&format!("benchmarks/b/oracle/{id}.yaml"), oracle);
        }
        dir
    }

    const META: &str =
        "name: b\ncategories: [codegen, bugfix]\ndefaults:\n  step_budget: 5\n  tests: {runner: unittest}\n";
    const ORACLE: &str =
        "actions:\n  - {tool: edit_file, args: {path: calc.py, old: a - b, new: a + b}}\n  - {tool: finish}\n";

    fn case(id: &str, extra: &str) -> String {
        format!("id: {id}\ncategory: codegen\nsplit: train\nfixture: calc\nprompt: fix add\n{extra}")
    }

    fn problems(dir: &tempfile::TempDir) -> Vec<Problem> {
        match load_benchmark(dir.path(), "b") {
            Err(LoadError::Invalid { problems, .. }) => problems,
            other => panic!("expected problems, got {other:?}"),
        }
    }

    fn fields(problems: &[Problem]) -> Vec<(String, String)> {
        problems
            .iter()
            .map(|p| (p.file.file_name().unwrap().to_string_lossy().into_owned(), p.field.clone().unwrap_or_default()))
            .collect()
    }

    #[test]
    fn a_benchmark_declares_its_own_categories() {
        let dir = project(META, &[("c-1", &case("c-1", ""), ORACLE)]);
        let bench = load_benchmark(dir.path(), "b").unwrap();
        assert_eq!(bench.categories, ["codegen", "bugfix"]);
        assert_eq!(bench.cases[0].category, "codegen");

        let dir = project(META, &[("c-1", &case("c-1", "").replace("codegen", "codgen"), ORACLE)]);
        let p = problems(&dir);
        assert_eq!(fields(&p), [("c-1.yaml".into(), "category".into())]);
        assert!(
            p[0].message.contains("`codgen` is not declared in benchmark.yaml (declared: codegen, bugfix)"),
            "{}",
            p[0]
        );

        let dir = project(
            "name: b\ndefaults: {step_budget: 5, tests: {runner: unittest}}\n",
            &[("c-1", &case("c-1", ""), ORACLE)],
        );
        let p = problems(&dir);
        assert_eq!(fields(&p), [("benchmark.yaml".into(), "categories".into())], "{p:?}");
        assert!(p[0].message.contains("is missing; declare the categories"), "{}", p[0]);
    }

    #[test]
    fn a_typo_in_the_defaults_is_one_problem_not_two_per_case() {
        let meta = META.replace("step_budget", "step_budjet");
        let cases: Vec<(String, String)> = (1..=5).map(|i| (format!("c-{i}"), case(&format!("c-{i}"), ""))).collect();
        let mut refs: Vec<(&str, &str, &str)> = cases.iter().map(|(id, c)| (id.as_str(), c.as_str(), ORACLE)).collect();
        // A problem of a case's own is still reported, and so is an undeclared category (the
        // declared list is read from the file that does not load as a whole).
        let own = case("c-6", "").replace("codegen", "codgen").replace("fixture: calc", "fixture: nowhere");
        refs.push(("c-6", &own, ORACLE));
        let dir = project(&meta, &refs);
        let p = problems(&dir);
        assert_eq!(
            fields(&p),
            [
                ("benchmark.yaml".into(), String::new()),
                ("c-6.yaml".into(), "category".into()),
                ("c-6.yaml".into(), "fixture".into())
            ],
            "{p:#?}"
        );
        assert!(p[0].message.contains("step_budjet"), "{}", p[0]);
        assert!(
            p[0].message.contains("12 problems of case files that may follow from this are not listed"),
            "{}",
            p[0]
        );
    }

    #[test]
    fn a_missing_fixture_is_one_problem() {
        let text = case("c-1", "tests: {start_dir: tests}\nverifier:\n  unchanged: [tests/test_calc.py]\n")
            .replace("fixture: calc\n", "");
        let dir = project(META, &[("c-1", &text, ORACLE)]);
        let p = problems(&dir);
        assert_eq!(fields(&p), [("c-1.yaml".into(), "fixture".into())], "{p:#?}");
    }

    #[test]
    fn oracle_arguments_are_checked_naming_file_action_and_field() {
        let oracle =
            "actions:\n  - {tool: write_file, args: {pth: calc.py, content: x, overwite: true}}\n  - {tool: finish}\n";
        let dir = project(META, &[("c-1", &case("c-1", ""), oracle)]);
        let p = problems(&dir);
        assert_eq!(
            fields(&p),
            [
                ("c-1.yaml".into(), "actions[0].args.overwite".into()),
                ("c-1.yaml".into(), "actions[0].args.pth".into()),
                ("c-1.yaml".into(), "actions[0].args.path".into()),
            ]
        );
        assert!(p.iter().all(|p| p.file.ends_with("oracle/c-1.yaml")), "{p:?}");
        assert!(
            p[1].to_string().contains("case `c-1`: field `actions[0].args.pth`: is not an argument of `write_file`"),
            "{}",
            p[1]
        );
    }

    #[test]
    fn controls_are_a_case_field() {
        let dir = project(META, &[("c-1", &case("c-1", "controls: [violator]\n"), ORACLE)]);
        assert_eq!(load_benchmark(dir.path(), "b").unwrap().cases[0].controls, [Control::Violator]);
        let dir = project(META, &[("c-1", &case("c-1", "controls: [violater]\n"), ORACLE)]);
        let p = problems(&dir);
        assert_eq!(fields(&p), [("c-1.yaml".into(), "controls".into())]);
        assert!(p[0].message.contains("`violater` is not a control; known: violator"), "{}", p[0]);
    }

    #[test]
    fn programs_that_cannot_start_are_named_with_case_file_and_field() {
        let meta = "name: b\ncategories: [codegen]\ndefaults: {step_budget: 5}\n";
        let dir = project(
            meta,
            &[
                ("c-1", &case("c-1", "test_command: [pyhton3, -m, unittest]\n"), ORACLE),
                (
                    "c-2",
                    &case("c-2", "test_command: ['true']\nverifier:\n  command: ['{benchmark_dir}/verifiers/check']\n"),
                    ORACLE,
                ),
                ("c-3", &case("c-3", "test_command: ['true']\n"), ORACLE),
            ],
        );
        let bench = load_benchmark(dir.path(), "b").expect("programs are checked where the PATH is known");
        let ids: Vec<String> = bench.cases.iter().map(|c| c.id.clone()).collect();
        let path = std::env::var_os("PATH").unwrap();
        let Err(LoadError::Invalid { problems, .. }) = check_programs(&bench, &ids, &path) else { panic!() };
        assert_eq!(
            fields(&problems),
            [("c-1.yaml".into(), "test_command".into()), ("c-2.yaml".into(), "verifier.command".into())]
        );
        assert!(problems[0].message.contains("`pyhton3` is not found on the PATH"), "{}", problems[0]);
        assert!(problems[1].message.contains("verifiers/check` is not an executable file"), "{}", problems[1]);
        // Only the selected cases are checked.
        assert!(check_programs(&bench, &["c-3".to_string()], &path).is_ok());
    }
}
