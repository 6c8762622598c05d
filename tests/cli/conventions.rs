//! CLI conventions a new user meets first: shell completions and the man page, `--help` with
//! examples and exit codes, "did you mean" for names, the hint about `--root` when run from the
//! wrong directory, no colour codes in piped output, and the live lines of a run (its header,
//! its failures with their reasons, the resume command on Ctrl-C).

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::run::{GOOD_CASE, GOOD_ORACLE, Scratch};
use crate::{BIN, Test};

#[test]
fn bash_completions_are_a_script_bash_accepts_and_complete_commands_and_flags() {
    // From a folder that is no project: completions read neither the root nor its .env.
    let elsewhere = tempfile::tempdir().unwrap();
    let out = Test::new().root(elsewhere.path()).args(&["completions", "bash"]).run().code(0);
    let script = elsewhere.path().join("hcbench.bash");
    std::fs::write(&script, &out.stdout).unwrap();
    let check = Command::new("bash").arg("-n").arg(&script).output().unwrap();
    assert!(check.status.success(), "bash -n: {}", String::from_utf8_lossy(&check.stderr));
    for command in ["run", "matrix", "ablate", "gate", "record", "trend", "completions", "man"] {
        assert!(out.stdout.contains(command), "the script names `{command}`");
    }
    // Sourced, its function completes a command and a command's flag as bash would ask it to.
    let complete = |words: &str, cword: usize| {
        let program = format!(
            "source {}; COMP_WORDS=({words}); COMP_CWORD={cword}; _hcbench hcbench \"${{COMP_WORDS[$COMP_CWORD]}}\" \"${{COMP_WORDS[$COMP_CWORD-1]}}\"; echo \"${{COMPREPLY[@]}}\"",
            script.display()
        );
        let out = Command::new("bash").arg("-c").arg(program).output().unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    assert_eq!(complete("hcbench mat", 1), "matrix");
    assert_eq!(complete("hcbench matrix --prof", 2), "--profiles");
    assert!(complete("hcbench completions ''", 2).ends_with("bash elvish fish powershell zsh"));

    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let out = Test::new().args(&["completions", shell]).run().code(0);
        assert!(out.stdout.contains("profiles") && out.stdout.contains("matrix"), "{shell}:\n{}", out.stdout);
    }
    Test::new().args(&["completions", "tcsh"]).run().code(2).stderr_has("invalid value 'tcsh'");
}

#[test]
fn the_man_page_prints_or_is_written_one_page_per_command() {
    let out = Test::new().args(&["man"]).run().code(0);
    assert!(out.stdout.starts_with(".ie \\n(.g .ds Aq"), "roff:\n{}", &out.stdout[..200.min(out.stdout.len())]);
    assert!(out.stdout.contains(".TH hcbench 1"), "{}", out.stdout);
    assert!(out.stdout.contains("Exit codes:"), "the page has the exit codes");
    let dir = tempfile::tempdir().unwrap();
    let out = Test::new().args(&["man", "--out"]).arg_path(dir.path()).run().code(0);
    let matrix = std::fs::read_to_string(dir.path().join("hcbench-matrix.1")).unwrap();
    assert!(matrix.contains(".TH hcbench-matrix 1"), "{matrix}");
    assert!(matrix.contains("hcbench matrix \\-\\-resume workspace/runs/RUN_ID"), "examples in the page:\n{matrix}");
    for page in ["hcbench.1", "hcbench-run.1", "hcbench-gate.1", "hcbench-history-import.1", "hcbench-completions.1"] {
        assert!(dir.path().join(page).is_file(), "{page} written");
        assert!(out.stderr.contains(&format!("wrote {}", dir.path().join(page).display())), "{}", out.stderr);
    }
}

#[test]
fn help_shows_examples_and_exit_codes_and_dash_h_stays_short() {
    let long = Test::new().args(&["matrix", "--help"]).run().code(0).stdout;
    assert!(long.contains("Examples:\n  hcbench matrix --profiles oracle,nop --suite smoke\n"), "{long}");
    assert!(long.contains("hcbench matrix --resume workspace/runs/RUN_ID --retry-errors"), "{long}");
    assert!(long.contains("Exit codes:\n    0  everything ran and every check held\n"), "{long}");
    assert!(long.contains("    6  a profile's pass rate is below --fail-under\n  130  Ctrl-C"), "{long}");
    assert!(!long.contains("    1  verdict negative"), "matrix has no `a case failed` exit:\n{long}");
    let short = Test::new().args(&["matrix", "-h"]).run().code(0).stdout;
    assert!(!short.contains("Examples:") && !short.contains("Exit codes:"), "{short}");
    assert!(short.trim_end().ends_with("Use --help for examples and exit codes."), "{short}");
    assert!(short.lines().count() * 2 < long.lines().count(), "-h is the short list");

    let gate = Test::new().args(&["help", "gate"]).run().code(0).stdout;
    assert!(gate.contains("hcbench gate --accept-state-change workspace/suite.json"), "{gate}");
    assert!(gate.contains("    4  too few cells got a verdict"), "{gate}");
    let top = Test::new().args(&["--help"]).run().code(0).stdout;
    assert!(top.contains("hcbench --root ~/src/my-project list"), "{top}");
    assert!(top.contains("    7  trend --fail-on-regression"), "every code at the top:\n{top}");
    let completions = Test::new().args(&["completions", "--help"]).run().code(0).stdout;
    assert!(completions.contains("hcbench completions zsh > ~/.zfunc/_hcbench"), "{completions}");
    // `run --profile` names where the other profiles come from, not only the built-ins.
    let run = Test::new().args(&["run", "--help"]).run().code(0).stdout;
    let profile = run.split("--profile <PROFILE>").nth(1).and_then(|s| s.split("\n\n").next()).unwrap_or_default();
    assert!(profile.contains("models.toml") && profile.contains("local-responses"), "{profile}");
}

#[test]
fn unknown_names_get_a_did_you_mean() {
    Test::new()
        .args(&["list", "--benchmark", "hc-bnch"])
        .run()
        .code(2)
        .stderr_has("(available: hc-bench); did you mean `hc-bench`?");
    Test::new()
        .args(&["list", "--suite", "smok"])
        .run()
        .code(2)
        .stderr_has("(its suites: nightly, smoke, train); did you mean `smoke`?");
    Test::new()
        .args(&["run", "--case", "policy-01"])
        .run()
        .code(2)
        .stderr_has("--case policy-01: no such case in benchmark `hc-bench` (`hcbench list` shows the ids); did you mean `policy-1`, `policy-2` or `policy-3`?");
    // A name nothing resembles gets no guess.
    let out = Test::new().args(&["list", "--suite", "zzzzzz"]).run().code(2);
    assert!(!out.stderr.contains("did you mean"), "{}", out.stderr);

    let s = Scratch::new();
    s.case("good", GOOD_CASE, GOOD_ORACLE);
    s.write("suites/demo/mine.yaml", "cases: [god]\n");
    Test::new().root(s.path()).args(&["list", "--benchmark", "demo", "--suite", "mine"]).run().code(2).stderr_has(
        "field `cases`: `god` is not a case of benchmark `demo`; fix the id or remove it; did you mean `good`?",
    );
}

#[test]
fn run_from_a_folder_without_benchmarks_names_the_root_and_how_to_choose_one() {
    let elsewhere = tempfile::tempdir().unwrap();
    let shown = elsewhere.path().canonicalize().unwrap();
    Test::new().root(elsewhere.path()).args(&["list"]).run().code(2).stderr_has(&format!(
        "(available: none); no benchmarks/ folder in the project root {}: run hcbench from the project's folder, or name it with `--root DIR` or HCBENCH_ROOT",
        shown.display()
    ));
    // A benchmarks/ folder with nothing in it is named as such.
    std::fs::create_dir(elsewhere.path().join("benchmarks")).unwrap();
    Test::new()
        .root(elsewhere.path())
        .args(&["run"])
        .run()
        .code(2)
        .stderr_has(&format!("no benchmark in the project root {}", shown.display()));
    // The hint's advice works: the same command with HCBENCH_ROOT finds the project.
    let root = crate::repo_root();
    let out = Test::new().root(elsewhere.path()).env("HCBENCH_ROOT", root.to_str().unwrap()).args(&["list"]).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("bugfix-1"), "{}", out.stdout);
}

#[test]
fn piped_output_and_logs_carry_no_colour_codes() {
    let s = Scratch::new();
    s.case("good", GOOD_CASE, GOOD_ORACLE);
    for (args, env) in [
        (&["-vv", "run", "--benchmark", "demo", "--out"][..], None),
        (&["matrix", "--benchmark", "demo", "--profiles", "oracle,nop", "--out"][..], Some(("RUST_LOG", "debug"))),
    ] {
        let mut test = Test::new().root(s.path()).args(args).arg_path(&s.path().join(format!("run-{}", args[0])));
        if let Some((k, v)) = env {
            test = test.env(k, v);
        }
        let out = test.run();
        assert!(out.code == 0 || out.code == 1, "{}", out.stderr);
        assert!(out.stderr.contains("DEBUG"), "debug logs were written:\n{}", out.stderr);
        for (name, text) in [("stderr", &out.stderr), ("stdout", &out.stdout)] {
            assert!(!text.contains("\x1b["), "{args:?}: an escape code on {name}:\n{text}");
        }
    }
    // Errors and clap's own messages too.
    let out = Test::new().args(&["matrix", "--profile", "x"]).run().code(2);
    assert!(!out.stderr.contains("\x1b[") && out.stderr.contains("--profiles"), "{}", out.stderr);
}

fn report_json(run_dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(run_dir.join("reports/report.json")).unwrap()).unwrap()
}

#[test]
fn the_live_lines_name_each_failing_cell_with_its_reason_as_it_finishes() {
    let s = Scratch::new();
    s.case("good", GOOD_CASE, GOOD_ORACLE);
    let run_dir = s.path().join("m");
    let out = Test::new()
        .root(s.path())
        .args(&["matrix", "--benchmark", "demo", "--profiles", "oracle,nop", "--out"])
        .arg_path(&run_dir)
        .run()
        .code(0);
    let header = out.stderr.lines().next().unwrap();
    assert!(header.starts_with("hcbench: run ") && header.ends_with(&format!("2 cell(s) -> {}", run_dir.display())));
    let reason = report_json(&run_dir)["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["cell_id"] == "good__nop")
        .unwrap()["reason"]
        .as_str()
        .unwrap()
        .to_string();
    let line = out.stderr.lines().find(|l| l.contains("good__nop")).unwrap();
    assert!(line.contains("] failed         good__nop ("), "{line}");
    let shown = line.split("): ").nth(1).unwrap();
    let first_words: String = reason.split_whitespace().take(2).collect::<Vec<_>>().join(" ");
    assert!(shown.starts_with(&first_words), "the reason `{reason}` in {line}");
    assert!(line.chars().count() <= 120, "cut to a log's 120 columns: {line}");
    if shown.ends_with('…') {
        let kept = shown.trim_end_matches('…');
        assert!(reason.starts_with(kept) && reason[kept.len()..].starts_with(' '), "cut at a word: {line}");
    }
    let passed = out.stderr.lines().find(|l| l.contains("good__oracle")).unwrap();
    assert!(passed.ends_with("s)") && passed.contains("] passed "), "no reason for a pass: {passed}");
}

#[test]
fn ctrl_c_prints_the_command_that_finishes_the_run() {
    let s = Scratch::new();
    s.case(
        "slow",
        "id: slow\ncategory: bugfix\nsplit: train\nfixture: calc\nprompt: x\nstep_budget: 3\ntimeout_s: 120\ntest_command: [python3, -c, 'import time; time.sleep(60)']\n",
        GOOD_ORACLE,
    );
    let run_dir = s.path().join("m");
    let child = Command::new(BIN)
        .args(["matrix", "--benchmark", "demo", "--out"])
        .arg(&run_dir)
        .current_dir(s.path())
        .env("HCBENCH_HISTORY", s.path().join("history"))
        .env("HCBENCH_WORKSPACES", s.path().join("workspaces"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let trace = run_dir.join("cells/slow__oracle/trace.jsonl");
    crate::interrupt_once_running(&child, &trace);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    let stderr = String::from_utf8(out.stderr).unwrap();
    let resume = format!("hcbench matrix --resume {}", run_dir.canonicalize().unwrap().display());
    assert!(stderr.contains(&format!("hcbench: finish the run later with: {resume}\n")), "{stderr}");
    assert_eq!(report_json(&run_dir)["resume_command"], resume.as_str(), "the same command as the reports");
    // The cancelled cell is named with its reason as it ends.
    assert!(stderr.contains("cancelled      slow__oracle ("), "{stderr}");
}

#[test]
fn on_a_terminal_the_header_and_each_failure_are_printed_above_the_bars() {
    // A real pseudo-terminal through util-linux's `script`, so stderr is a TTY and the bar
    // sink runs; `stty cols 80` gives the width the lines are cut to.
    let s = Scratch::new();
    s.case("good", GOOD_CASE, GOOD_ORACLE);
    let run_dir = s.path().join("tty");
    let inner =
        format!("stty cols 80; {BIN} run --benchmark demo --profile nop --out {} 2>&1 >/dev/null", run_dir.display());
    let out = Command::new("script")
        .args(["-qec", &inner, "/dev/null"])
        .current_dir(s.path())
        .env("HCBENCH_HISTORY", s.path().join("history"))
        .env("HCBENCH_WORKSPACES", s.path().join("workspaces"))
        .stdin(Stdio::null())
        .output()
        .expect("util-linux `script` runs (Debian: bsdutils, essential)");
    assert_eq!(out.status.code(), Some(1), "nop fails the case: {}", String::from_utf8_lossy(&out.stdout));
    // The terminal's bytes: bars redrawn with cursor moves; the printed lines are among them.
    let raw = String::from_utf8_lossy(&out.stdout).replace('\r', "\n");
    let screen = regex::Regex::new(r"\x1b\[[0-9;?]*[A-Za-z]").unwrap().replace_all(&raw, "\n");
    let header = format!("hcbench: run {}", report_json(&run_dir)["run_id"].as_str().unwrap());
    assert!(screen.contains(&format!("{header}: 1 cell(s) -> {}", run_dir.display())), "{screen}");
    let failure = screen.lines().find(|l| l.contains("] failed         good__nop (")).expect("the failure is named");
    // indicatif pads each printed line with spaces to the width; the bars follow.
    let (head, tail) = failure.split_once("): ").expect("a reason follows the cell");
    let failure = format!("{head}): {}", tail.split("    ").next().unwrap());
    assert!(failure.contains("good__nop (") && tail.starts_with("tests failed"), "with its reason: {failure}");
    assert!(failure.chars().count() <= 80, "cut to the terminal's 80 columns: {failure}");
}
