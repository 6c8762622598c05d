//! The context pipeline seen from outside: modes and their override, compaction against its
//! ablation, policy retry against its ablation, and a scripted model whose behaviour depends
//! on what it is shown.

use std::path::Path;

use serde_json::Value;

use crate::Test;
use crate::run::{GOOD_CASE, Scratch};

fn events(trace: &Path) -> Vec<Value> {
    crate::read_trace_text(trace).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["kind"] == kind).collect()
}

/// A copy of the repository's agent spec with `context:` replaced.
fn agent_dir(s: &Scratch, context: &str) -> std::path::PathBuf {
    let repo = crate::repo_root().join("agent");
    for f in ["system.md", "format.md"] {
        s.write(&format!("agent/{f}"), &std::fs::read_to_string(repo.join(f)).unwrap());
    }
    s.write(
        "agent/agent.yaml",
        &format!("system_prompt_file: system.md\naction_format_file: format.md\ncontext:\n{context}"),
    );
    s.path().join("agent")
}

#[test]
fn compaction_folds_old_observations_and_without_it_they_are_dropped() {
    let s = Scratch::new();
    // Six big modules: reading them all overflows a small observations budget.
    let mut reads = String::new();
    for i in 1..=6 {
        let body: String = (1..=60).map(|n| format!("def helper_{i}_{n}(x):\n    return x + {n}\n")).collect();
        s.write(&format!("fixtures/calc/mod{i}.py"), &body);
        reads.push_str(&format!("  - {{tool: read_file, args: {{path: mod{i}.py}}}}\n"));
    }
    s.case(
        "good",
        GOOD_CASE,
        "actions:\n  - tool: edit_file\n    args: {path: calc.py, old: 'a - b', new: 'a + b'}\n  - tool: finish\n",
    );
    s.write(
        "script.yaml",
        &format!("default:\n{reads}  - {{tool: edit_file, args: {{path: calc.py, old: 'a - b', new: 'a + b'}}}}\n  - {{tool: finish, args: {{answer: done}}}}\n"),
    );
    let agent = agent_dir(&s, "  budgets: {observations: 1500, packed: 400}\n");
    let run_dir = s.path().join("a");
    let script = format!("scripted:{}", s.path().join("script.yaml").display());
    Test::new()
        .root(s.path())
        .args(&["--agent"])
        .arg_path(&agent)
        .args(&["ablate", "--context", "--benchmark", "demo", "--profile", &script])
        .args(&["--ablations", "full,no_context_compaction", "--format", "json", "--out"])
        .arg_path(&run_dir)
        .run()
        .code(0);

    let full = events(&run_dir.join("cells/good__script__full/trace.jsonl"));
    let compactions = of_kind(&full, "context_compacted");
    assert!(!compactions.is_empty(), "six reads of ~1000 tokens overflow 1500");
    let first = &compactions[0]["data"];
    assert_eq!(first["folded_steps"][0], 1, "the oldest step is folded first: {first}");
    assert!(first["carried"]["recent_reads"].as_array().unwrap().contains(&Value::from("mod1.py")), "{first}");
    // After a compaction the summary is in the context and the observations fit again.
    let packs = of_kind(&full, "context_packed");
    let last = &packs.last().unwrap()["data"];
    let sections = last["sections"].as_array().unwrap();
    let packed = sections.iter().find(|s| s["name"] == "packed").expect("a packed section");
    assert!(packed["tokens"].as_u64().unwrap() <= 400, "{packed}");
    let obs = sections.iter().find(|s| s["name"] == "observations").unwrap();
    assert_eq!(obs["dropped"], 0, "folded, not dropped: {obs}");
    assert_eq!(last["mode"], "memory");

    let ablated = events(&run_dir.join("cells/good__script__no_context_compaction/trace.jsonl"));
    assert!(of_kind(&ablated, "context_compacted").is_empty());
    let dropped: Vec<String> = of_kind(&ablated, "context_packed")
        .iter()
        .flat_map(|e| e["data"]["sections"].as_array().unwrap().iter())
        .filter(|s| s["name"] == "observations")
        .flat_map(|s| s["dropped_blocks"].as_array().cloned().unwrap_or_default())
        .map(|b| b.as_str().unwrap().to_string())
        .collect();
    assert!(dropped.contains(&"step-1".to_string()), "without compaction the oldest read is dropped: {dropped:?}");
    for e in of_kind(&ablated, "context_packed") {
        assert!(e["data"]["sections"].as_array().unwrap().iter().all(|s| s["name"] != "packed"));
    }
}

#[test]
fn a_refused_action_gets_a_corrective_message_unless_policy_retry_is_ablated() {
    let s = Scratch::new();
    s.case("good", GOOD_CASE, "actions:\n  - tool: finish\n");
    s.write(
        "script.yaml",
        "default:\n  - {tool: read_file, args: {path: ../outside.txt}}\n  - {tool: edit_file, args: {path: calc.py}, unchecked: true}\n  - {tool: edit_file, args: {path: calc.py, old: 'a - b', new: 'a + b'}}\n  - {tool: finish, args: {answer: done}}\n",
    );
    let run_dir = s.path().join("a");
    let script = format!("scripted:{}", s.path().join("script.yaml").display());
    Test::new()
        .root(s.path())
        .args(&["ablate", "--context", "--benchmark", "demo", "--profile", &script])
        .args(&["--ablations", "full,no_policy_retry", "--format", "json", "--out"])
        .arg_path(&run_dir)
        .run()
        .code(0);
    let full = events(&run_dir.join("cells/good__script__full/trace.jsonl"));
    let retries: Vec<(&str, &str)> = of_kind(&full, "policy_retry")
        .iter()
        .map(|e| (e["data"]["cause"].as_str().unwrap(), e["data"]["message"].as_str().unwrap()))
        .collect();
    assert_eq!(retries.len(), 2, "{retries:?}");
    assert_eq!(retries[0].0, "denied");
    assert!(
        retries[0].1.starts_with("denied by policy: ") && retries[0].1.contains("Choose an action"),
        "{}",
        retries[0].1
    );
    assert_eq!(retries[1].0, "invalid_action");
    assert!(retries[1].1.contains("Fix the arguments"), "{}", retries[1].1);
    let ablated = events(&run_dir.join("cells/good__script__no_policy_retry/trace.jsonl"));
    assert!(of_kind(&ablated, "policy_retry").is_empty());
    let outputs: Vec<&str> = of_kind(&ablated, "tool_result")
        .iter()
        .filter(|e| e["data"]["denied"] == true)
        .map(|e| e["data"]["output"].as_str().unwrap())
        .collect();
    assert_eq!(outputs, ["denied by policy", "invalid action"], "no reason, no hint");
}

#[test]
fn the_context_mode_is_overridden_per_run_and_bad_modes_are_refused() {
    let s = Scratch::new();
    s.case(
        "good",
        GOOD_CASE,
        "actions:\n  - tool: edit_file\n    args: {path: calc.py, old: 'a - b', new: 'a + b'}\n  - tool: finish\n",
    );
    let mode_of = |run_dir: &Path| {
        let evs = events(&run_dir.join("cells/good__oracle/trace.jsonl"));
        let p = &of_kind(&evs, "context_packed")[0]["data"];
        let names: Vec<String> =
            p["sections"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap().to_string()).collect();
        let digest = of_kind(&evs, "run_started")[0]["data"]["agent_spec"].as_str().unwrap().to_string();
        (p["mode"].as_str().unwrap().to_string(), p["budget_tokens"].as_u64().unwrap(), names, digest)
    };
    let run = |extra: &[&str], env: Option<&str>, name: &str| {
        let dir = s.path().join(name);
        let mut t =
            Test::new().root(s.path()).args(extra).args(&["run", "--benchmark", "demo", "--out"]).arg_path(&dir);
        if let Some(mode) = env {
            t = t.env("HCBENCH_CONTEXT_MODE", mode);
        }
        t.run().code(0);
        mode_of(&dir)
    };
    let (mode, budget, names, spec_digest) = run(&[], None, "default");
    assert_eq!((mode.as_str(), budget), ("memory", 12000));
    assert!(names.contains(&"repo_map".to_string()), "{names:?}");
    let (mode, budget, names, none_digest) = run(&["--context-mode", "none"], None, "none");
    assert_eq!((mode.as_str(), budget), ("none", 0));
    assert_eq!(names, ["system", "task", "tools", "observations", "status"]);
    assert_ne!(none_digest, spec_digest, "the override is part of the spec's identity");
    let (mode, ..) = run(&[], Some("pack"), "env");
    assert_eq!(mode, "pack");

    Test::new()
        .root(s.path())
        .args(&["--context-mode", "full", "run", "--benchmark", "demo"])
        .run()
        .code(2)
        .stderr_has("--context-mode: `full` is not a context mode; use one of none, pack, memory");
    Test::new()
        .root(s.path())
        .args(&["--context-mode", "pack", "gate"])
        .run()
        .code(2)
        .stderr_has("does not apply to `gate`");
}

/// A scripted model whose behaviour depends on what it is shown: it goes straight to the
/// target file when the repo map names it (else it explores first), and it reads the file
/// again unless working memory says it already did. The report must show both differences.
#[test]
fn a_model_that_reacts_to_its_context_shows_what_the_repo_map_and_memory_buy() {
    let s = Scratch::new();
    s.write(
        "fixtures/errs/app/main.py",
        "from errcat.catalog import message\n\ndef run():\n    return message('E1')\n",
    );
    s.write("fixtures/errs/app/__init__.py", "");
    s.write("fixtures/errs/errcat/__init__.py", "");
    s.write(
        "fixtures/errs/errcat/catalog.py",
        "MESSAGES = {'E4271': 'disk quota exceeded'}\n\n\ndef message(code):\n    return MESSAGES.get(code, 'unknown')\n",
    );
    s.write(
        "fixtures/errs/tests/test_catalog.py",
        "import unittest\nfrom errcat.catalog import message\n\nclass T(unittest.TestCase):\n    def test_permission(self):\n        self.assertEqual(message('E4271'), 'permission denied')\n",
    );
    let fix = "{tool: edit_file, args: {path: errcat/catalog.py, old: disk quota exceeded, new: permission denied}}";
    s.case(
        "errs",
        "id: errs\ncategory: context\nsplit: train\nfixture: errs\nprompt: The error catalog message for E4271 talks about a disk quota; it should say permission denied.\nstep_budget: 8\ntimeout_s: 30\ntest_command: [python3, -m, unittest, discover, -s, tests]\nverifier:\n  unchanged: [tests/test_catalog.py]\n  first_read: errcat/catalog.py\n",
        &format!("actions:\n  - {fix}\n  - tool: finish\n"),
    );
    s.write(
        "script.yaml",
        &format!(
            "default:\n\
             - if_shown: errcat/catalog.py\n  section: repo_map\n  then: [{{tool: read_file, args: {{path: errcat/catalog.py}}}}]\n  else:\n    - {{tool: list_files, args: {{path: .}}}}\n    - {{tool: read_file, args: {{path: app/main.py}}}}\n    - {{tool: read_file, args: {{path: errcat/catalog.py}}}}\n\
             - if_shown: errcat/catalog.py\n  section: memory\n  then: []\n  else: [{{tool: read_file, args: {{path: errcat/catalog.py}}}}]\n\
             - {fix}\n\
             - {{tool: finish, args: {{answer: fixed}}}}\n"
        ),
    );
    let run_dir = s.path().join("a");
    let script = format!("scripted:{}", s.path().join("script.yaml").display());
    Test::new()
        .root(s.path())
        .args(&["ablate", "--context", "--benchmark", "demo", "--profile", &script])
        .args(&["--ablations", "full,no_repomap,no_memory", "--format", "json", "--out"])
        .arg_path(&run_dir)
        .run()
        .code(0);
    let results: Vec<Value> = std::fs::read_to_string(run_dir.join("results.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let cell = |ablation: &str| results.iter().find(|c| c["ablation"] == ablation).unwrap().clone();
    let (full, no_map, no_mem) = (cell("full"), cell("no_repomap"), cell("no_memory"));
    for c in [&full, &no_map, &no_mem] {
        assert_eq!(c["outcome"], "passed", "{c}");
    }
    // The repo map named the target: read at step 1; without it, after exploring, at step 3.
    assert_eq!(full["first_target_read_step"], 1, "{full}");
    assert_eq!(no_map["first_target_read_step"], 3, "{no_map}");
    assert_eq!(full["repo_map_injections"], 1);
    assert_eq!(no_map["repo_map_injections"].as_u64().unwrap_or(0), 0);
    // Working memory remembered the read; without it the model read the file again.
    assert_eq!(full["repeated_reads"].as_u64().unwrap_or(0), 0, "{full}");
    assert_eq!(no_mem["repeated_reads"], 1, "{no_mem}");
    assert!(full["memory_updates"].as_u64().unwrap() >= 2, "{full}");
    assert_eq!(no_mem["memory_updates"].as_u64().unwrap_or(0), 0);
    assert!(no_mem["steps"].as_u64() > full["steps"].as_u64());
    // The report shows the same differences, rendered from the traces.
    let md = std::fs::read_to_string(run_dir.join("reports/report.md")).unwrap();
    assert!(md.contains("script/no_repomap") && md.contains("script/no_memory"), "{md}");
    let trace = events(&run_dir.join("cells/errs__script__full/trace.jsonl"));
    let used = of_kind(&trace, "repo_map_used");
    assert_eq!(used[0]["data"]["files"][0], "errcat/catalog.py", "the target ranks first: {}", used[0]);
    assert_eq!(of_kind(&trace, "repo_map_built").len(), 1);
    let first_update = &of_kind(&trace, "memory_updated")[0]["data"];
    assert_eq!(first_update["changes"][0]["block"], "explored_files", "{first_update}");
}

#[test]
fn a_later_run_reuses_the_stored_first_step_map_and_records_the_same_map() {
    let s = Scratch::new();
    s.case("good", GOOD_CASE, crate::run::GOOD_ORACLE);
    let workspaces = s.path().join("workspaces");
    // A fixture changed within the last two seconds is not stored (a change within the file
    // system's clock tick could go unseen): let it age first.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let run = |name: &str| {
        let run_dir = s.path().join(name);
        Test::new()
            .root(s.path())
            .env("HCBENCH_WORKSPACES", workspaces.to_str().unwrap())
            // A save after every step: the first one takes (and stores) the fixture's digests.
            .args(&["run", "--benchmark", "demo", "--sandbox", "none", "--checkpoint-interval", "0", "--out"])
            .arg_path(&run_dir)
            .run()
            .code(0);
        let trace = events(&run_dir.join("cells/good__oracle/trace.jsonl"));
        let mut maps: Vec<Value> = ["repo_map_built", "repo_map_used"]
            .iter()
            .flat_map(|k| of_kind(&trace, k))
            .map(|e| e["data"].clone())
            .collect();
        maps[0].as_object_mut().unwrap().remove("duration_ms").expect("repo_map_built has its duration");
        maps
    };
    // The stored maps, or (`digests`) the fixture digests the checkpoints store beside them.
    let stored = |digests: bool| -> Vec<(std::path::PathBuf, std::time::SystemTime)> {
        let dir = workspaces.join(".repo-maps");
        std::fs::read_dir(&dir)
            .map(|d| {
                d.map(|e| e.unwrap().path())
                    .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("fixture-digests-") == digests)
                    .map(|p| (p.clone(), p.metadata().unwrap().modified().unwrap()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let first = run("a");
    let after_first = stored(false);
    assert_eq!(after_first.len(), 1, "one map stored: {after_first:?}");
    let digests = stored(true);
    assert_eq!(digests.len(), 1, "the fixture's digests stored: {digests:?}");
    let second = run("b");
    // The second process found the map (a miss would have built and stored it again) and
    // recorded the same map: the same files, symbols, query and tokens. It hashed no fixture
    // file either: the stored digests were not written again.
    assert_eq!(stored(false), after_first);
    assert_eq!(stored(true), digests);
    assert_eq!(second, first);
    assert_eq!(first[0]["files"], 2, "calc.py and its test: {first:?}");
}
