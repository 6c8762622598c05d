//! What the gate trusts besides the candidate's files (issue 15, ways 2, 3 and 8, and two
//! earlier refusals): a `--config` of the loop's choosing, the profile's definition in the
//! gitignored models.toml or a `--models` file, agent spec files outside `agent_dir`, a
//! forbidden commit already in HEAD, and train results another profile wrote. Each attack runs
//! against a real git repository through the real binary; each refusal leaves results.tsv and
//! suite.json as they were.

use serde_json::Value;

use crate::gate::{FIX, Project};

/// results.tsv, suite.json and the pending record (what a passing gate writes), by content
/// (None: absent).
fn recorded(p: &Project) -> [Option<String>; 3] {
    ["workspace/results.tsv", "workspace/suite.json", "workspace/pending_record.json"]
        .map(|f| std::fs::read_to_string(p.path().join(f)).ok())
}

/// A passing gate and its record: the history has a row from here on.
fn baseline(p: &Project) {
    p.gate(&[]).code(0);
    p.hcbench(&["record"]).code(0);
}

/// The audit log of `.gate-state.json`.
fn audit(p: &Project) -> Vec<Value> {
    let state: Value = serde_json::from_str(&p.read("workspace/.gate-state.json")).unwrap();
    state["accepted"].as_array().unwrap().clone()
}

fn head(p: &Project) -> String {
    let repo = git2::Repository::open(p.path()).unwrap();
    repo.head().unwrap().peel_to_commit().unwrap().id().to_string()
}

/// A script that passes every case of the demo benchmark, like the oracle.
fn all_passing(ids: &[&str]) -> String {
    let mut s = String::from("default:\n  - {tool: finish}\ncases:\n");
    for id in ids {
        s.push_str(&format!("  {id}:\n{FIX}"));
    }
    s
}

#[test]
fn a_config_given_with_config_needs_the_human_and_is_audited() {
    let p = Project::new(&["tr-1"], &["te-1", "te-2"], "");
    p.script(&["te-1"], "");
    p.commit("baseline agent");
    baseline(&p);
    let before = recorded(&p);

    // Way 2: an allowlisted config that widens the allowlist and switches to the oracle.
    p.write(
        "agent/exp.yaml",
        "benchmark: demo\nprofile: oracle\njobs: 4\nallowlist: [agent/, PROGRAM.md, benchmarks/]\n",
    );
    p.commit("agent: an experiment config");
    let out = p.gate(&["--config", "agent/exp.yaml"]).code(2);
    assert!(out.stderr.contains("--config agent/exp.yaml: not the project's experiment_config.yaml"), "{}", out.stderr);
    assert!(out.stderr.contains("hcbench gate --config agent/exp.yaml --accept-config"), "{}", out.stderr);
    assert!(!out.stderr.contains("Step 0"), "refused before anything ran:\n{}", out.stderr);
    p.hcbench(&["record", "--config", "agent/exp.yaml"]).code(2).stderr_has("--accept-config");
    assert_eq!(recorded(&p), before, "nothing recorded");

    // A human vouches for the file: logged. The profile switch it makes still needs its own
    // word (way 3), so the oracle does not slip in behind an accepted config.
    let out = p.gate(&["--config", "agent/exp.yaml", "--accept-config"]).code(2);
    assert!(out.stderr.contains("accepted --config agent/exp.yaml (sha256 "), "{}", out.stderr);
    assert!(out.stderr.contains("the gate now runs `oracle`"), "{}", out.stderr);
    assert!(out.stderr.contains("hcbench gate --accept-profile-change"), "{}", out.stderr);
    let entry = audit(&p).into_iter().find(|a| a["file"] == "(config) agent/exp.yaml").expect("an audit entry");
    assert_eq!(entry["command"], "hcbench gate --accept-config");
    assert_eq!(recorded(&p), before, "nothing recorded");

    // The acceptance holds for that content only: an edit needs the human again.
    p.write("agent/exp.yaml", "benchmark: demo\nprofile: oracle\njobs: 2\n");
    p.commit("agent: tweak the experiment config");
    p.gate(&["--config", "agent/exp.yaml"]).code(2).stderr_has("--accept-config");
    // The project's own config needs no word, however it is spelt.
    p.gate(&["--config", "./experiment_config.yaml"]).code(0);
}

/// A project whose profile `gpt` comes from the gitignored models.toml.
fn gpt_project() -> Project {
    let p = Project::new(&["tr-1"], &["te-1", "te-2"], "");
    p.write("experiment_config.yaml", "benchmark: demo\nprofile: gpt\njobs: 4\n");
    p.write(".gitignore", "/workspace/\n*.log\nmodels.toml\n");
    p.write("models.toml", "[gpt]\nprovider = \"scripted\"\nscript = \"agent/script.yaml\"\n");
    p.script(&["te-1"], "");
    p.commit("the experiment: profile gpt");
    p
}

#[test]
fn a_profile_redefined_in_models_toml_or_by_models_is_refused() {
    let p = gpt_project();
    let out = p.hcbench(&["gate"]).code(0);
    let digest = {
        let line = out.stdout.lines().next().unwrap();
        assert!(line.contains("profile gpt (definition "), "the start line names the definition: {line}");
        line.split("(definition ").nth(1).unwrap()[..12].to_string()
    };
    p.hcbench(&["record"]).code(0);
    let row: Vec<String> =
        p.read("workspace/results.tsv").lines().nth(1).unwrap().split('\t').map(String::from).collect();
    assert_eq!(row.len(), 9, "{row:?}");
    assert_eq!(row[6], "gpt");
    assert!(row[7].starts_with(&digest) && row[7].len() == 64, "the row keeps the definition's digest: {row:?}");
    assert_eq!(row[8].len(), 64, "and the agent spec's: {row:?}");
    let before = recorded(&p);

    // Way 3: `gpt` redefined as the oracle, in the file git does not see.
    p.write("models.toml", "[gpt]\nprovider = \"oracle\"\n");
    let out = p.gate(&[]).code(2);
    assert!(out.stderr.contains("profile `gpt` is defined as the oracle"), "{}", out.stderr);
    assert!(out.stderr.contains("models.toml: provider = \"oracle\""), "{}", out.stderr);
    assert!(!out.stderr.contains("Step 1"), "no cell ran:\n{}", out.stderr);
    // Even the human cannot run the oracle under another name.
    p.gate(&["--accept-profile-change"]).code(2).stderr_has("is defined as the oracle");
    assert_eq!(recorded(&p), before);

    // Any other redefinition: a script outside the project that passes everything.
    let elsewhere = tempfile::tempdir().unwrap();
    let all = elsewhere.path().join("oracle-all.yaml");
    std::fs::write(&all, all_passing(&["tr-1", "te-1", "te-2"])).unwrap();
    let redefined = format!("[gpt]\nprovider = \"scripted\"\nscript = \"{}\"\n", all.display());
    p.write("models.toml", &redefined);
    let out = p.gate(&[]).code(2);
    assert!(out.stderr.contains("the gated profile changed since the last record: row 1"), "{}", out.stderr);
    assert!(out.stderr.contains(&format!("profile `gpt` (definition {digest})")), "{}", out.stderr);
    assert!(out.stderr.contains(&format!("script = \"{}\"", all.display())), "what changed is shown:\n{}", out.stderr);
    assert!(out.stderr.contains("hcbench gate --accept-profile-change"), "{}", out.stderr);
    assert_eq!(recorded(&p), before);

    // `--models FILE` (outside the project, unseen by git) decides the same way.
    p.write("models.toml", "[gpt]\nprovider = \"scripted\"\nscript = \"agent/script.yaml\"\n");
    let models = elsewhere.path().join("models.toml");
    std::fs::write(&models, &redefined).unwrap();
    let out = p.gate(&["--models", models.to_str().unwrap()]).code(2);
    assert!(out.stderr.contains("the gated profile changed since the last record"), "{}", out.stderr);
    assert!(out.stderr.contains(&models.display().to_string()), "the file is named:\n{}", out.stderr);
    assert_eq!(recorded(&p), before);
    // The same definition from another file is the same profile.
    std::fs::write(&models, "[gpt]\nscript = \"agent/script.yaml\"\nprovider = \"scripted\"\n").unwrap();
    p.gate(&["--models", models.to_str().unwrap()]).code(0);

    // A human who changes the definition on purpose says so: logged, and shown.
    p.write("models.toml", &redefined);
    let out = p.hcbench(&["gate", "--accept-profile-change"]).code(0);
    assert!(out.stdout.contains("accepted the definition of profile `gpt`"), "{}", out.stdout);
    let entry = audit(&p).into_iter().find(|a| a["file"] == "(profile) gpt").expect("an audit entry");
    assert_eq!(entry["command"], "hcbench gate --accept-profile-change");
    assert!(entry["previous"].as_str().unwrap().starts_with(&digest));
}

/// An agent spec whose system prompt is `value` (with format.md beside it).
fn spec_with_prompt(p: &Project, value: &str) {
    p.write("agent/format.md", "reply with one action\n");
    p.write("agent/agent.yaml", &format!("system_prompt_file: '{value}'\naction_format_file: format.md\n"));
}

#[test]
fn agent_spec_files_outside_agent_dir_are_refused() {
    let p = Project::new(&["tr-1"], &["te-1"], "");
    p.script(&["te-1"], "");
    p.write("agent/system.md", "be careful\n");
    spec_with_prompt(&p, "system.md");
    p.commit("an agent spec");
    baseline(&p);
    let before = recorded(&p);

    // Way 8: the same commit would be recorded twice with different spec digests if the prompt
    // could live outside agent/ (here outside the project, or beside it, or behind a link).
    let outside = tempfile::tempdir().unwrap();
    let abs = outside.path().join("prompt.md");
    std::fs::write(&abs, "a prompt nobody commits\n").unwrap();
    std::os::unix::fs::symlink(&abs, p.path().join("agent/link.md")).unwrap();
    for (value, why) in [
        (abs.to_str().unwrap(), "is an absolute path"),
        ("../notes.md", "leaves the agent directory with `..`"),
        ("link.md", "is a symbolic link to"),
    ] {
        spec_with_prompt(&p, value);
        let r = p.gate(&[]).code(1).json();
        let error = r["steps"][0]["detail"]["candidate_error"].as_str().unwrap_or_default().to_string();
        for needle in ["agent/agent.yaml", "field `system_prompt_file`", why, "put the file in"] {
            assert!(error.contains(needle), "{value}: lacks {needle:?}: {error}");
        }
        assert_eq!(recorded(&p), before, "{value}: nothing recorded");
    }
    // Back inside, the gate runs.
    spec_with_prompt(&p, "system.md");
    std::fs::remove_file(p.path().join("agent/link.md")).unwrap();
    p.gate(&[]).code(0);
}

/// The project with a recorded baseline and then a commit that changes a case file.
fn with_forbidden_commit() -> (Project, String, String) {
    let p = Project::new(&["tr-1"], &["te-1", "te-2"], "");
    p.script(&["te-1"], "");
    p.commit("baseline agent");
    baseline(&p);
    let base = head(&p);
    p.write(
        "benchmarks/demo/cases/te-2.yaml",
        &p.read("benchmarks/demo/cases/te-2.yaml").replace("step_budget: 5", "step_budget: 6"),
    );
    let sneaky = p.commit("tweak a case");
    (p, base, sneaky)
}

#[test]
fn a_forbidden_commit_already_in_head_is_refused_before_any_cell() {
    let (p, base, sneaky) = with_forbidden_commit();
    let before = recorded(&p);
    p.script(&["te-1", "te-2"], "");
    let out = p.gate(&[]).code(2);
    for needle in [
        format!("commits since {} change files outside the allowlist", &base[..12]),
        format!("{} (tweak a case): benchmarks/demo/cases/te-2.yaml", &sneaky[..12]),
        format!("git reset --soft {}", &base[..12]),
        "hcbench gate --accept-history".to_string(),
    ] {
        assert!(out.stderr.contains(&needle), "lacks {needle:?}:\n{}", out.stderr);
    }
    assert!(!out.stderr.contains("Step 1") && !out.stderr.contains("Step 2"), "no cell ran:\n{}", out.stderr);
    assert!(!p.path().join("workspace/gate").exists(), "no train cell ran");
    assert_eq!(recorded(&p), before);

    // The advice works: a soft reset keeps the change in the working tree, the file guard names
    // it with its revert command, and after that the gate runs.
    let git = |args: &[&str]| {
        let st = std::process::Command::new("git").args(args).current_dir(p.path()).status().unwrap();
        assert!(st.success(), "git {args:?}");
    };
    git(&["reset", "-q", "--soft", &base]);
    let r = p.gate(&[]).code(1).json();
    assert_eq!(r["steps"][0]["detail"]["violations"][0]["path"], "benchmarks/demo/cases/te-2.yaml", "{r}");
    git(&["checkout", "HEAD", "--", "benchmarks/demo/cases/te-2.yaml"]);
    p.gate(&[]).code(0);
    p.commit("improve the agent");
    p.hcbench(&["record"]).code(0);
}

#[test]
fn a_human_accepts_the_history_once_for_the_gate_and_record() {
    let (p, _, _) = with_forbidden_commit();
    p.script(&["te-1", "te-2"], "");
    let out = p.hcbench(&["gate", "--accept-history"]).code(0);
    assert!(out.stdout.contains("accepted the history up to HEAD"), "{}", out.stdout);
    assert_eq!(audit(&p).last().unwrap()["command"], "hcbench gate --accept-history");
    // The same history is not asked about again: not by the next gate, not by record.
    p.gate(&[]).code(0);
    p.commit("improve the agent");
    let out = p.hcbench(&["record"]).code(0);
    assert!(out.stdout.contains("[record] iteration 1"), "{}", out.stdout);
}

#[test]
fn step_3_does_not_trust_train_results_of_another_profile() {
    let p = Project::new(&["tr-1", "tr-2"], &["te-1"], "");
    p.script(&["te-1"], "");
    p.commit("baseline agent");
    // An oracle run passes every train case: trusted, it would leave Step 3 nothing to promote.
    p.hcbench(&["run", "--benchmark", "demo", "--split", "train", "--profile", "oracle", "--format", "json"]);
    let train: Value = serde_json::from_str(&p.read("workspace/train_results.json")).unwrap();
    assert_eq!(train["cases"]["tr-1"]["outcome"], "passed");
    assert_eq!(train["cases"]["tr-1"]["profile_digest"].as_str().unwrap().len(), 64);

    p.script(&["te-1", "tr-1"], "");
    let out = p.gate(&[]).code(0);
    assert!(out.stderr.contains("2 entry(ies) of workspace/train_results.json were not written by this profile"));
    assert!(out.stderr.contains("tr-1: written by profile `oracle`, not `script`"), "{}", out.stderr);
    assert!(out.stderr.contains("hcbench run --split train --profile scripted:agent/script.yaml"), "{}", out.stderr);
    let s3 = &out.json()["steps"][3]["detail"];
    assert_eq!(s3["candidates"], serde_json::json!(["tr-1", "tr-2"]), "stale entries are re-run: {s3}");
    assert_eq!(s3["promoted"], serde_json::json!(["tr-1"]), "{s3}");
}

#[test]
fn step_3_trusts_train_results_of_heads_spec_as_the_loop_makes_them() {
    let p = Project::new(&["tr-1", "tr-2"], &["te-1"], "");
    p.write("agent/system.md", "be careful\n");
    spec_with_prompt(&p, "system.md");
    p.script(&["te-1", "tr-2"], "");
    p.commit("baseline agent");
    let run = ["run", "--benchmark", "demo", "--split", "train", "--profile", "scripted:agent/script.yaml"];
    p.hcbench(&[&run[..], &["--format", "json"]].concat());
    // The loop edits the spec after the train run: HEAD's spec wrote the train results.
    p.write("agent/system.md", "be very careful\n");
    p.script(&["te-1", "tr-1", "tr-2"], "");
    let out = p.gate(&[]).code(0);
    assert!(!out.stderr.contains("not trusted"), "{}", out.stderr);
    let s3 = &out.json()["steps"][3]["detail"];
    assert_eq!(s3["candidates"], serde_json::json!(["tr-1"]), "only the failing case, as auto-harness: {s3}");
    // A train run with a spec that is neither the candidate's nor HEAD's is stale.
    let other = tempfile::tempdir().unwrap();
    let dir = other.path();
    std::fs::write(dir.join("agent.yaml"), "system_prompt_file: s.md\naction_format_file: f.md\n").unwrap();
    std::fs::write(dir.join("s.md"), "another spec\n").unwrap();
    std::fs::write(dir.join("f.md"), "f\n").unwrap();
    let agent = ["--agent", dir.to_str().unwrap()];
    p.hcbench(&[&agent[..], &run[..], &["--format", "json"]].concat());
    let out = p.gate(&[]).code(0);
    assert!(out.stderr.contains("neither the candidate's nor HEAD's"), "{}", out.stderr);
}
