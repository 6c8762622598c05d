//! `hcbench plan`: size, cost, time and power of a matrix before it runs.

use crate::Test;

#[test]
fn plan_states_cells_and_power_before_anything_runs() {
    let out = Test::new().args(&["plan", "--profiles", "oracle,nop", "--epochs", "3", "--target-diff", "0.1"]).run();
    let out = out.code(0);
    assert!(out.stdout.contains("43 case(s) x 3 epoch(s) x 2 profile(s) = 258 cell(s)"), "{}", out.stdout);
    assert!(out.stdout.contains("smallest detectable difference between two profiles: 24.7 points"), "{}", out.stdout);
    assert!(out.stdout.contains("to detect 10.0 points: 262 case(s) at 3 epoch(s)"), "{}", out.stdout);

    // Five cases cannot show any difference at 5%: the plan says so instead of a number.
    let out = Test::new().args(&["plan", "--profiles", "oracle,nop", "--suite", "smoke", "--format", "json"]).run();
    let plan = out.code(0).json();
    assert_eq!(plan["cells"], 10);
    assert!(plan["mde"].is_null(), "{plan}");
    assert_eq!(plan["profiles"][1]["est_cost_usd"], 0.0, "nop calls no model");
}

#[test]
fn plan_uses_a_finished_run_for_time_and_variance() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    Test::new().args(&["matrix", "--profiles", "oracle,nop", "--suite", "smoke", "--out"]).arg_path(&run).run().code(0);
    let out =
        Test::new().args(&["plan", "--profiles", "oracle,nop", "--format", "json", "--from"]).arg_path(&run).run();
    let plan = out.code(0).json();
    assert!(plan["profiles"][0]["est_cell_s"].as_f64().unwrap() > 0.0, "{plan}");
    assert!(plan["est_wall_s"].as_f64().unwrap() > 0.0, "{plan}");
    assert!(plan["variance"].as_str().unwrap().starts_with("observed"), "{plan}");
    let mde = plan["mde"].as_f64().unwrap();
    assert!(mde > 0.05 && mde < 0.5, "deterministic arms never promise a zero MDE: {mde}");
}

#[test]
fn plan_refuses_what_matrix_would_refuse() {
    Test::new().args(&["plan", "--profiles", "oracle,gpt9"]).run().code(2).stderr_has("unknown profile `gpt9`");
    Test::new().args(&["plan", "--target-diff", "10"]).run().code(2).stderr_has("--target-diff 10");
    Test::new().args(&["plan", "--baseline-rate=1.5"]).run().code(2).stderr_has("--baseline-rate");
}
