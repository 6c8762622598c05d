//! Profiles that explain themselves (issue 17): every problem of a list of profiles in one
//! error, `--skip-unavailable` and its `not run` profiles in every report, and the first
//! provider error of a profile on the terminal with its fix, against a real loopback server
//! that answers 401 and a closed port.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};

use crate::run::{GOOD_CASE, GOOD_ORACLE, Scratch};
use crate::{Output, Test};

/// Two keyed profiles whose key variables are never set.
const TWO_KEYED: &str = "[alpha]\nprovider = \"openai-chat\"\nmodel = \"a\"\nbase_url = \"http://127.0.0.1:9\"\n\
api_key_env = \"HCBENCH_TEST_ALPHA_KEY\"\n\n[beta]\nprovider = \"openai-responses\"\nmodel = \"b\"\n\
base_url = \"http://127.0.0.1:9\"\napi_key_env = \"HCBENCH_TEST_BETA_KEY\"\n";

/// A scratch project with the `good` case and `models` as its models.toml.
fn project(models: &str) -> (Scratch, PathBuf) {
    let s = Scratch::new();
    s.case("good", GOOD_CASE, GOOD_ORACLE);
    let path = s.path().join("models.toml");
    std::fs::write(&path, models).unwrap();
    (s, path)
}

fn hcbench(s: &Scratch, args: &[&str]) -> Output {
    Test::new().root(s.path()).args(args).args(&["--benchmark", "demo"]).run()
}

fn matrix(s: &Scratch, profiles: &str, extra: &[&str]) -> Output {
    hcbench(s, &[&["matrix", "--no-history", "--jobs", "1", "--profiles", profiles], extra].concat())
}

#[test]
fn every_missing_key_and_unknown_name_is_reported_at_once() {
    let (s, _) = project(TWO_KEYED);
    let out = matrix(&s, "oracle,alpha,beta,alhpa", &[]).code(2);
    let err = &out.stderr;
    assert!(err.contains("3 of the requested profiles cannot be used:"), "{err}");
    assert!(err.contains("profile `alpha`: environment variable HCBENCH_TEST_ALPHA_KEY"), "{err}");
    assert!(err.contains("profile `beta`: environment variable HCBENCH_TEST_BETA_KEY"), "{err}");
    assert!(err.contains("unknown profile `alhpa`; did you mean `alpha`?"), "{err}");
    // One problem per line, each with its fix.
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("  - ")).collect();
    assert_eq!(lines.len(), 3, "{err}");
    assert!(lines[..2].iter().all(|l| l.contains("export it or add")), "{err}");
    // A typo cannot be skipped, so the skip hint is not offered.
    assert!(!err.contains("--skip-unavailable"), "{err}");
    assert!(!s.path().join("workspace/runs").exists(), "nothing ran");

    // Only missing keys: the hint says how to run the rest.
    matrix(&s, "oracle,alpha,beta", &[])
        .code(2)
        .stderr_has("2 of the requested profiles cannot be used:")
        .stderr_has("(--skip-unavailable runs the other profiles and marks these `not run` in every report)");
    // `plan` resolves the list the same way.
    let plan = hcbench(&s, &["plan", "--profiles", "alpha,beta"]).code(2);
    assert!(plan.stderr.contains("HCBENCH_TEST_ALPHA_KEY") && plan.stderr.contains("HCBENCH_TEST_BETA_KEY"));
    assert!(!plan.stderr.contains("--skip-unavailable"), "plan has no such flag: {}", plan.stderr);
    // One name: the one problem on one line, a typo with its suggestion.
    hcbench(&s, &["run", "--profile", "betta"]).code(2).stderr_has("unknown profile `betta`; did you mean `beta`?");
    hcbench(&s, &["ablate", "--context", "--profile", "beta"]).code(2).stderr_has(
        "models.toml: profile `beta`: environment variable HCBENCH_TEST_BETA_KEY (named by `api_key_env`) is not set",
    );
}

#[test]
fn skip_unavailable_runs_the_others_and_every_report_names_the_rest_not_run() {
    let (s, _) = project(TWO_KEYED);
    let run_dir = s.path().join("run");
    let out = matrix(&s, "oracle,alpha,beta", &["--skip-unavailable", "--out", run_dir.to_str().unwrap()]).code(0);
    assert!(
        out.stderr
            .contains("not running profile `alpha` (--skip-unavailable): environment variable HCBENCH_TEST_ALPHA_KEY"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.contains("Not run: profile `beta` (--skip-unavailable)"), "terminal summary: {}", out.stdout);

    // No cell was planned for them: they count in no rate, coverage or verdict.
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["profiles"], serde_json::json!(["oracle"]));
    assert_eq!(manifest["not_run"][1]["profile"], "beta");
    assert!(
        std::fs::read_dir(run_dir.join("cells")).unwrap().all(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .ends_with("oracle"))
    );
    let report = |name: &str| std::fs::read_to_string(run_dir.join("reports").join(name)).unwrap();
    let json: serde_json::Value = serde_json::from_str(&report("report.json")).unwrap();
    assert_eq!(json["not_run"].as_array().unwrap().len(), 2);
    assert_eq!(json["profiles"], serde_json::json!(["oracle"]));
    assert_eq!(json["verdict"]["exit_code"], 0);
    let md = report("report.md");
    assert!(
        md.contains("> Not run: profile `alpha` (--skip-unavailable): environment variable HCBENCH_TEST_ALPHA_KEY"),
        "{md}"
    );
    assert!(report("report.html").contains("class=\"banner not-run\">Not run: profile `beta`"));
    let junit = report("junit.xml");
    assert!(junit.contains("skipped=\"2\" failures=\"0\" errors=\"0\""), "{junit}");
    assert!(junit.contains("<testcase name=\"alpha (not run)\">"), "{junit}");

    // `hcbench report` re-renders the same bytes from the run directory alone.
    let before = report("report.md");
    hcbench_report(&run_dir).code(0);
    assert_eq!(report("report.md"), before);
    // A resume keeps them not run, even with the keys set now.
    Test::new()
        .root(s.path())
        .env("HCBENCH_TEST_ALPHA_KEY", "sk-alpha-now-set")
        .args(&["matrix", "--no-history", "--resume"])
        .arg_path(&run_dir)
        .run()
        .code(0);
    assert_eq!(report("report.md"), before);
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["not_run"].as_array().unwrap().len(), 2);
}

fn hcbench_report(run_dir: &Path) -> Output {
    Test::new().args(&["report"]).arg_path(run_dir).run()
}

#[test]
fn skip_unavailable_still_stops_at_a_typo_and_when_nothing_is_left() {
    let (s, _) = project(TWO_KEYED);
    let out = matrix(&s, "oracle,alpha,oracel", &["--skip-unavailable"]).code(2);
    assert!(out.stderr.contains("unknown profile `oracel`; did you mean `oracle`?"), "{}", out.stderr);
    assert!(!out.stderr.contains("HCBENCH_TEST_ALPHA_KEY"), "only what cannot be skipped: {}", out.stderr);
    matrix(&s, "alpha,beta", &["--skip-unavailable"])
        .code(2)
        .stderr_has("--skip-unavailable left no profile to run; none of the requested ones can:")
        .stderr_has("HCBENCH_TEST_BETA_KEY");
    assert!(!s.path().join("workspace/runs").exists(), "nothing ran");
}

/// A loopback server that answers every request with HTTP 401 and an OpenAI-style error.
fn unauthorized_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let reply = r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}"#;
            let _ = write!(
                stream,
                "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
                reply.len()
            );
        }
    });
    format!("http://127.0.0.1:{port}")
}

fn keyed(base_url: &str) -> String {
    format!(
        "[remote]\nprovider = \"openai-chat\"\nmodel = \"m\"\nbase_url = \"{base_url}\"\napi_key_env = \"HCBENCH_TEST_API_KEY\"\n\
         max_retries = 1\nretry_base_ms = 1\nretry_max_ms = 2\nmax_connect_failures = 0\n"
    )
}

#[test]
fn a_refused_key_is_shown_on_the_terminal_with_the_variable_to_check() {
    let (s, _) = project(&keyed(&unauthorized_server()));
    // The cell is a provider error: no valid verdict, so coverage is below the threshold.
    let out = hcbench(&s, &["run", "--profile", "remote", "--jobs", "1"]).code(4);
    let err = &out.stderr;
    assert!(err.contains("first provider error of profile `remote`: profile `remote`: HTTP 401 Unauthorized"), "{err}");
    assert!(err.contains("Incorrect API key provided"), "the server's message in full: {err}");
    assert!(
        err.contains(
            "  fix: check the API key in HCBENCH_TEST_API_KEY (the variable named by `api_key_env` of profile `remote`"
        ),
        "{err}"
    );
    assert!(!err.contains("sk-canary-never-leaks"), "the key itself is never printed");
    assert_eq!(err.matches("first provider error").count(), 1, "once per profile: {err}");
}

#[test]
fn a_closed_port_is_shown_on_the_terminal_with_base_url_to_check() {
    // A port that was just free: nothing listens there, so the connection is refused.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let base = format!("http://127.0.0.1:{port}");
    let (s, _) = project(&keyed(&base));
    let out = matrix(&s, "oracle,remote", &[]).code(4);
    let err = &out.stderr;
    assert!(
        err.contains("first provider error of profile `remote`: profile `remote`: gave up after 2 attempts"),
        "{err}"
    );
    assert!(err.contains("  fix: check `base_url` of profile `remote` in ./models.toml"), "{err}");
    assert!(err.contains(&format!("({base}/v1): nothing listens on that port (connection refused)")), "{err}");
    assert!(!err.contains("first provider error of profile `oracle`"), "{err}");
}
