//! `ablate --context`: one profile over ablations of the agent spec, tagged in cell ids,
//! manifest, traces and reports; the oracle as the control arm under every ablation; refusal
//! of ablations that do not exist yet; resume.

use std::path::Path;

use hcbench::rundir::{MANIFEST_SCHEMA_VERSION, Manifest, ManifestCase, RunDir, cell_id};
use hcbench::trace::event::{Check, ContextSection, MemoryChange, ModelInfo, Outcome, Usage};
use hcbench::trace::{EventBody, TraceWriter};
use serde_json::Value;

use crate::Test;
use crate::run::{GOOD_CASE, GOOD_ORACLE, Scratch};

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn cell_ids(report: &Value) -> Vec<String> {
    report["cells"].as_array().unwrap().iter().map(|c| c["cell_id"].as_str().unwrap().to_string()).collect()
}

#[test]
fn ablate_tags_cell_ids_manifest_traces_and_report_rows() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("a");
    let r = Test::new()
        .args(&["ablate", "--context", "--suite", "smoke", "--ablations", "full,no_memory", "-j", "4"])
        .args(&["--format", "json", "--out"])
        .arg_path(&run_dir)
        .run()
        .code(0)
        .json();
    assert_eq!(r["command"], "ablate");
    assert_eq!(r["profiles"], serde_json::json!(["oracle/full", "oracle/no_memory"]));
    let ids = cell_ids(&r);
    assert_eq!(ids.len(), 10, "5 smoke cases x 2 ablations");
    assert_eq!(&ids[..2], ["bugfix-1__oracle__full", "bugfix-1__oracle__no_memory"]);
    for c in r["cells"].as_array().unwrap() {
        let id = c["cell_id"].as_str().unwrap();
        assert!(id.ends_with(&format!("__oracle__{}", c["ablation"].as_str().unwrap())), "{c}");
        assert_eq!(c["outcome"], "passed", "the oracle is the control arm under every ablation: {c}");
    }
    let manifest = read_json(&run_dir.join("manifest.json"));
    assert_eq!(manifest["ablations"], serde_json::json!(["full", "no_memory"]));
    let trace = crate::read_trace_text(run_dir.join("cells/context-1__oracle__no_memory/trace.jsonl")).unwrap();
    let first: Value = serde_json::from_str(trace.lines().next().unwrap()).unwrap();
    assert_eq!((first["kind"].as_str(), first["data"]["ablation"].as_str()), (Some("run_started"), Some("no_memory")));

    // One comparison: the ablation against `full`, on the same cases.
    let comparisons = r["comparisons"].as_array().unwrap();
    assert_eq!(comparisons.len(), 1);
    assert_eq!(
        (comparisons[0]["a"].as_str(), comparisons[0]["b"].as_str()),
        (Some("oracle/full"), Some("oracle/no_memory"))
    );
    assert_eq!(comparisons[0]["cases"], 5);
    let groups: Vec<&str> =
        r["profile_stats"].as_array().unwrap().iter().map(|s| s["profile"].as_str().unwrap()).collect();
    assert_eq!(groups, ["oracle/full", "oracle/no_memory"]);
    let md = std::fs::read_to_string(run_dir.join("reports/report.md")).unwrap();
    assert!(md.contains("oracle/no_memory") && md.contains("oracle/full"), "{md}");
    let html = crate::report_html(&run_dir.join("reports/report.html"));
    assert!(html.contains("oracle/no_memory"));
    // The ablate sections, in every format. The oracle's context counters depend on the agent
    // loop, so only their shape is checked here; `a_scripted_ablate_run_reports_...` checks
    // values from written traces.
    let ablation = &r["ablation"];
    let context = ablation["context"].as_array().unwrap();
    let groups: Vec<&str> = context.iter().map(|s| s["group"].as_str().unwrap()).collect();
    assert_eq!(groups, ["oracle/full", "oracle/no_memory"]);
    for s in context {
        assert_eq!((s["cells"].as_u64(), s["agent_success"]["count"].as_u64()), (Some(5), Some(5)), "{s}");
        assert_eq!(s["tool_calls"]["over"], 5, "a mean says what it is over: {s}");
        assert!(s["context_tokens_per_turn"]["turns"].as_u64().unwrap() > 0, "every turn packs a context: {s}");
        assert_eq!(s["first_target_read"]["declared"], 1, "the smoke suite's context case declares a target: {s}");
        for field in ["budget_reductions", "dropped_blocks", "repo_map_injections", "memory_updates", "compactions"] {
            assert!(s[field].is_u64(), "{field}: {s}");
        }
    }
    assert_eq!(ablation["context_by_category"].as_array().unwrap().len(), 10, "2 ablations x 5 categories");
    let effect = &ablation["effects"][0];
    assert_eq!(
        (effect["group"].as_str(), effect["verdict"].as_str()),
        (Some("oracle/no_memory"), Some("too_few_to_tell"))
    );
    for heading in
        ["## Ablations", "### Context", "### Context by category", "### Effect of each ablation against full"]
    {
        assert!(md.contains(heading), "report.md has {heading:?}");
    }
    assert!(md.contains("| oracle/no_memory | oracle/full | 5 x 1 | +0.0 |"), "{md}");
    assert!(html.contains("id=\"ablation-context\"") && html.contains("href=\"#ablation\""));
    // `report` re-renders the ablate run from its traces, byte for byte, and its terminal table
    // has the context table too.
    let before = std::fs::read(run_dir.join("reports/report.json")).unwrap();
    let table = Test::new().args(&["report", "--wide"]).arg_path(&run_dir).run().code(0).stdout;
    assert_eq!(std::fs::read(run_dir.join("reports/report.json")).unwrap(), before);
    for want in ["Context:", "context tokens/turn", "Effect of each ablation against full:", "too few to tell"] {
        assert!(table.contains(want), "the terminal report has {want:?}:\n{table}");
    }
}

/// Hand-written traces of an ablate run whose agent depends on what it is shown: 8 cases
/// (even ones `context`, declaring a target file), one profile `local`, three ablations.
/// - `full`: the repo map is injected at step 1 and names the target, read at step 2; working
///   memory is updated every step; the budget drops old observations from step 3 on; the
///   provider serves 600 input tokens from its cache from step 2.
/// - `no_repomap`: no repo map; the target is read at step 4, or never in cases 0 and 4,
///   which spend the step budget and fail.
/// - `no_memory`: no memory updates; the agent reads one file twice, older observations are
///   compacted at step 3; case 1 is denied once and retried; case 3's tests fail.
fn write_ablate_run(run_dir: &Path) {
    let ablations = ["full", "no_repomap", "no_memory"];
    let manifest = Manifest {
        schema_version: MANIFEST_SCHEMA_VERSION,
        run_id: "abl-snap".into(),
        hcbench_version: "test".into(),
        sandbox: None,
        git_commit: None,
        git_dirty: None,
        benchmark_digest: None,
        benchmark_dirty: None,
        command: "ablate".into(),
        benchmark: "written".into(),
        profiles: vec!["local".into()],
        cases: (0..8)
            .map(|i| ManifestCase {
                id: format!("case-{i}"),
                category: if i % 2 == 0 { "context" } else { "bugfix" }.into(),
                split: String::new(),
            })
            .collect(),
        epochs: 1,
        jobs: 1,
        started_at: "2026-11-21T00:00:00Z".into(),
        agent_spec: String::new(),
        agent_dir: None,
        budget_usd: None,
        min_coverage: None,
        fail_under: None,
        ablations: ablations.iter().map(|a| a.to_string()).collect(),
        not_run: Vec::new(),
        shard: None,
        plan_digest: None,
        merged_from: Vec::new(),
    };
    let run = RunDir::create(run_dir, manifest).unwrap();
    for (i, case) in run.manifest().cases.iter().enumerate() {
        for a in ablations {
            let id = cell_id(&case.id, "local", a, 1, 1);
            let dir = run_dir.join("cells").join(&id);
            std::fs::create_dir_all(&dir).unwrap();
            let mut w = TraceWriter::create(&dir.join("trace.jsonl"), "abl-snap", &id).unwrap();
            let mut emit = |body: EventBody| {
                w.append(body).unwrap();
            };
            emit(EventBody::RunStarted {
                benchmark: "written".into(),
                case_id: case.id.clone(),
                category: case.category.clone(),
                split: String::new(),
                profile: "local".into(),
                model: ModelInfo { provider: "scripted".into(), model: "written".into(), ..Default::default() },
                step_budget: 6,
                epoch: 1,
                agent_spec: String::new(),
                ablation: a.into(),
                hcbench_version: "test".into(),
                sandbox: None,
            });
            let context_case = i % 2 == 0;
            let never_reads = a == "no_repomap" && (i == 0 || i == 4);
            let steps: u32 = if never_reads { 6 } else { 4 };
            let target_step = match a {
                "full" => Some(2),
                "no_repomap" if !never_reads => Some(4),
                "no_repomap" => None,
                _ => Some(3),
            };
            for step in 1..=steps {
                let dropped = usize::from(step >= 3);
                let section = |name: &str, tokens: usize, dropped: usize| ContextSection {
                    name: name.into(),
                    chars: tokens * 4,
                    tokens,
                    raw_tokens: tokens + 200 * dropped,
                    budget: 800,
                    reduced: dropped > 0,
                    cut: 0,
                    dropped,
                    dropped_blocks: (0..dropped).map(|d| format!("step-{d}")).collect(),
                };
                let obs = 300 + 100 * step as usize;
                emit(EventBody::ContextPacked {
                    step,
                    mode: if a == "no_memory" { "pack" } else { "memory" }.into(),
                    sections: vec![section("task", 700, 0), section("observations", obs, dropped)],
                    total_chars: (700 + obs) * 4,
                    total_tokens: 700 + obs,
                    budget_tokens: 2000,
                });
                if a != "no_repomap" && step == 1 {
                    emit(EventBody::RepoMapUsed {
                        step,
                        via: "context".into(),
                        query: "task".into(),
                        files: vec!["target.py".into()],
                        tokens: 120,
                    });
                }
                if a == "no_memory" && step == 3 {
                    emit(EventBody::ContextCompacted {
                        step,
                        folded_steps: vec![1],
                        folded_tokens: 400,
                        summary_tokens: 60,
                        carried: Default::default(),
                    });
                }
                let read = if context_case && target_step == Some(step) {
                    "target.py".to_string()
                } else if a == "no_memory" && step == 2 {
                    "a.py".to_string()
                } else {
                    format!("f{step}.py")
                };
                let read = if a == "no_memory" && step == 1 { "a.py".to_string() } else { read };
                let cached = (a == "full" && step >= 2).then_some(600);
                emit(EventBody::ModelAction {
                    step,
                    tool: "read_file".into(),
                    args: serde_json::json!({"path": read}),
                    usage: Some(Usage { input_tokens: 1000, output_tokens: 20, cached_input_tokens: cached }),
                    latency_ms: 10,
                    batch: None,
                });
                let denied = a == "no_memory" && i == 1 && step == 2;
                emit(EventBody::PolicyDecision {
                    step,
                    tool: "read_file".into(),
                    allowed: !denied,
                    reason: if denied { "secret" } else { "allowed" }.into(),
                    invalid: false,
                });
                if denied {
                    emit(EventBody::PolicyRetry { step, cause: "denied".into(), message: "denied: secret".into() });
                    continue;
                }
                emit(EventBody::ToolResult {
                    step,
                    tool: "read_file".into(),
                    ok: true,
                    denied: false,
                    output: "x = 1\n".into(),
                    output_bytes: 6,
                    artifact: None,
                    modified: vec![],
                    read: Some(read.clone()),
                    duration_ms: 1,
                    batch: None,
                });
                if a != "no_memory" {
                    emit(EventBody::MemoryUpdated {
                        step,
                        changes: vec![MemoryChange {
                            block: "explored_files".into(),
                            added: vec![read],
                            removed: vec![],
                        }],
                    });
                }
            }
            let passed = !(never_reads || (a == "no_memory" && i == 3));
            emit(EventBody::TestResult {
                passed,
                exit_code: Some(i32::from(!passed)),
                timed_out: false,
                duration_ms: 5,
                output: String::new(),
                artifact: None,
                runner: None,
            });
            let metrics = if context_case {
                let step = target_step.filter(|s| *s <= steps).map_or(Value::Null, Value::from);
                [("first_read_step".to_string(), step)].into()
            } else {
                Default::default()
            };
            emit(EventBody::VerifierResult {
                passed,
                duration_ms: 0,
                checks: vec![Check { name: "command".into(), passed, detail: String::new() }],
                metrics,
            });
            emit(EventBody::RunFinished {
                outcome: if passed { Outcome::Passed } else { Outcome::Failed },
                reward: if passed { 1.0 } else { 0.0 },
                stop_reason: if never_reads { "step_budget_exhausted" } else { "finished" }.into(),
                reason: if passed { "tests and verifier passed" } else { "tests failed" }.into(),
                elapsed_ms: 1000,
            });
        }
    }
}

#[test]
fn a_scripted_ablate_run_reports_what_each_ablation_changed() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("a");
    write_ablate_run(&run_dir);
    let table = Test::new().args(&["report"]).arg_path(&run_dir).run().code(0).stdout;
    let r = read_json(&run_dir.join("reports/report.json"));
    let ctx = |group: &str| -> Value {
        r["ablation"]["context"].as_array().unwrap().iter().find(|s| s["group"] == group).unwrap().clone()
    };
    let (full, no_repomap, no_memory) = (ctx("local/full"), ctx("local/no_repomap"), ctx("local/no_memory"));
    // The repo map named the target: `full` reads it at step 2, without the map at step 4, or
    // never (2 of the 4 cases that declare one), spending the step budget.
    assert_eq!(
        full["first_target_read"],
        serde_json::json!({"declared": 4, "step": {"mean": 2.0, "over": 4}, "never_read": 0})
    );
    assert_eq!(
        no_repomap["first_target_read"],
        serde_json::json!({"declared": 4, "step": {"mean": 4.0, "over": 2}, "never_read": 2})
    );
    assert_eq!((full["repo_map_injections"].as_u64(), no_repomap["repo_map_injections"].as_u64()), (Some(8), Some(0)));
    assert_eq!(no_repomap["step_budget_exhausted"]["count"], 2);
    assert_eq!(no_repomap["failure_stop_reasons"], serde_json::json!({"step_budget_exhausted": 2}));
    // Without working memory the agent re-reads, nothing updates memory, and the context is compacted.
    // (7, not 8: case 1's second read was denied, and a denied call reads nothing.)
    assert_eq!((full["repeated_reads"].as_u64(), no_memory["repeated_reads"].as_u64()), (Some(0), Some(7)));
    assert_eq!((full["memory_updates"].as_u64(), no_memory["memory_updates"].as_u64()), (Some(32), Some(0)));
    assert_eq!((full["compactions"].as_u64(), no_memory["compactions"].as_u64()), (Some(0), Some(8)));
    assert_eq!((no_memory["policy_denials"].as_u64(), no_memory["policy_retries"].as_u64()), (Some(1), Some(1)));
    // Tokens: 4 turns of 1100, 1200, 1300, 1400 per cell; two sections reduced and dropped per cell.
    assert_eq!(full["context_tokens_per_turn"], serde_json::json!({"mean": 1250.0, "turns": 32, "cells": 8}));
    assert_eq!((full["budget_reductions"].as_u64(), full["dropped_blocks"].as_u64()), (Some(16), Some(16)));
    assert_eq!((full["cached_input_tokens"].as_u64(), full["input_tokens"].as_u64()), (Some(14400), Some(32000)));
    // Two losses of eight are within noise; the verdict says so and why.
    let effects = r["ablation"]["effects"].as_array().unwrap();
    assert_eq!(effects[0]["group"], "local/no_repomap");
    assert_eq!((effects[0]["verdict"].as_str(), effects[0]["diff"].as_f64()), (Some("within_noise"), Some(-0.25)));

    let md = std::fs::read_to_string(run_dir.join("reports/report.md")).unwrap();
    let section = md.split("## Ablations").nth(1).unwrap().split("## By category").next().unwrap();
    insta::assert_snapshot!("ablate_report_md", format!("## Ablations{section}"));
    let terminal: Vec<&str> = table.lines().skip_while(|l| !l.starts_with("Outcomes and behaviour:")).collect();
    let terminal = terminal.split(|l| l.contains(" vs ")).next().unwrap().join("\n");
    insta::assert_snapshot!("ablate_report_terminal", terminal);
    insta::assert_snapshot!("ablate_report_json", serde_json::to_string_pretty(&r["ablation"]["effects"]).unwrap());
    let html = crate::report_html(&run_dir.join("reports/report.html"));
    for id in [
        "ablation-behaviour",
        "ablation-context",
        "ablation-effects",
        "ablation-failures",
        "ablation-context-by-category",
    ] {
        assert!(html.contains(&format!("<table class=\"data\" id=\"{id}\">")), "report.html has {id}");
    }
    assert!(html.contains("step 4.0 over 2 cell(s), 2 of 4 never read it"));
}

#[test]
fn the_oracle_passes_every_case_under_every_ablation_and_full_comes_first() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("a");
    // `full` is left out and a name repeated: it is added first, the repeat dropped.
    let r = Test::new()
        .args(&["ablate", "--context", "--suite", "smoke", "-j", "4", "--format", "json"])
        .args(&["--ablations", "no_policy_retry,no_repomap,no_memory,no_memory", "--out"])
        .arg_path(&run_dir)
        .run()
        .code(0)
        .json();
    assert_eq!(
        r["profiles"],
        serde_json::json!(["oracle/full", "oracle/no_policy_retry", "oracle/no_repomap", "oracle/no_memory"])
    );
    assert_eq!(r["verdict"]["exit_code"], 0);
    for s in r["profile_stats"].as_array().unwrap() {
        assert_eq!((s["cells"].as_u64(), s["passed"].as_u64()), (Some(5), Some(5)), "{s}");
    }
    let comparisons = r["comparisons"].as_array().unwrap();
    assert_eq!(comparisons.len(), 3, "each ablation against full, no other pair");
    for c in comparisons {
        assert_eq!(c["a"], "oracle/full");
        assert_eq!(c["adjusted_over"], 3, "Holm across the ablations: {c}");
    }
}

#[test]
fn ablations_that_do_not_exist_are_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("a");
    Test::new()
        .args(&["ablate", "--context", "--suite", "smoke", "--ablations", "full,no_brain", "--out"])
        .arg_path(&run_dir)
        .run()
        .code(2)
        .stderr_has("`no_brain` is not an ablation")
        .stderr_has("no_context_compaction");
    assert!(!run_dir.exists(), "nothing ran");
    Test::new().args(&["ablate", "--suite", "smoke"]).run().code(2).stderr_has("--context");
}

#[test]
fn an_interrupted_ablate_run_resumes_with_its_ablations() {
    let s = Scratch::new();
    s.case("good", GOOD_CASE, GOOD_ORACLE);
    s.case("other", &GOOD_CASE.replace("id: good", "id: other"), GOOD_ORACLE);
    let run_dir = s.path().join("a");
    Test::new()
        .root(s.path())
        .args(&["ablate", "--context", "--benchmark", "demo", "--ablations", "full,no_memory", "--out"])
        .arg_path(&run_dir)
        .run()
        .code(0);
    // The layout before the pack (a folder and a plain trace per cell), to edit cells by hand.
    hcbench::trace::stored::unpack(&run_dir, false).unwrap();
    let cut = run_dir.join("cells/good__oracle__no_memory/trace.jsonl");
    let text = crate::read_trace_text(&cut).unwrap();
    std::fs::write(&cut, text.lines().take(3).collect::<Vec<_>>().join("\n") + "\n").unwrap();
    std::fs::remove_dir_all(run_dir.join("cells/other__oracle__full")).unwrap();
    let kept_trace = crate::read_trace_bytes(run_dir.join("cells/good__oracle__full/trace.jsonl")).unwrap();

    let r = Test::new()
        .root(s.path())
        .args(&["ablate", "--context", "--format", "json", "--resume"])
        .arg_path(&run_dir)
        .run()
        .code(0)
        .stderr_has("2 finished cell(s) kept")
        .json();
    assert_eq!(r["status"], "complete");
    assert_eq!(
        cell_ids(&r),
        ["good__oracle__full", "good__oracle__no_memory", "other__oracle__full", "other__oracle__no_memory"]
    );
    assert!(r["cells"].as_array().unwrap().iter().all(|c| c["outcome"] == "passed"));
    assert_eq!(crate::read_trace_bytes(run_dir.join("cells/good__oracle__full/trace.jsonl")).unwrap(), kept_trace);
    let rerun = crate::read_trace_text(&cut).unwrap();
    assert!(rerun.lines().any(|l| l.contains("\"ablation\":\"no_memory\"")), "the re-run cell keeps its ablation");

    // A matrix run is not finished by `ablate`.
    let matrix_dir = s.path().join("m");
    Test::new().root(s.path()).args(&["matrix", "--benchmark", "demo", "--out"]).arg_path(&matrix_dir).run().code(0);
    Test::new()
        .root(s.path())
        .args(&["ablate", "--context", "--resume"])
        .arg_path(&matrix_dir)
        .run()
        .code(2)
        .stderr_has("is not an ablate run");
}
