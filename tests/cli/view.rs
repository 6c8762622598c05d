//! `hcbench view` as a user meets it: the index of past runs, the report opened in "a browser"
//! (a real process named by $BROWSER that records what it was asked to open), the report and
//! the index served on 127.0.0.1 and fetched with a real HTTP client, paths out of the served
//! folders refused, and each error message. The last test drives real headless Chromium over
//! a 1,000-cell report served by `hcbench view`: filters, a deep link to a cell the filter
//! hides, a sorted table and a screenshot (ignored in a plain `cargo test`, like
//! tests/cli/html.rs; scripts/test runs it).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::html::{Browser, require_browser};
use crate::{BIN, Test};

/// A project root (a temp dir) with one finished smoke run at workspace/runs/run-a, made from
/// the checkout's benchmark; returns the root.
fn root_with_a_run(tmp: &Path) -> PathBuf {
    let root = tmp.join("project");
    let run = root.join("workspace/runs/run-a");
    Test::new().args(&["matrix", "--profiles", "oracle", "--suite", "smoke", "--out"]).arg_path(&run).run().code(0);
    root
}

/// `hcbench view ARGS` in `root`, with no browser anywhere in its environment.
fn view(root: &Path, args: &[&str]) -> crate::Output {
    Test::new()
        .root(root)
        .args(&["view"])
        .args(args)
        .env("BROWSER", "")
        .env("DISPLAY", "")
        .env("WAYLAND_DISPLAY", "")
        .run()
}

/// A `hcbench view --serve` process; killed when dropped.
struct Served {
    child: Child,
    /// `report: URL` (or `run: URL`) and `index: URL` as printed.
    page: Option<String>,
    index: Option<String>,
    port: u16,
}

impl Served {
    fn start(root: &Path, args: &[&str]) -> Served {
        let mut child = Command::new(BIN)
            .args(["view", "--serve", "--no-open"])
            .args(args)
            .current_dir(root)
            .env_remove("HCBENCH_ROOT")
            .env_remove("BROWSER")
            .env_remove("DISPLAY")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let (mut page, mut index, mut port) = (None, None, None);
        while index.is_none() {
            let Some(Ok(line)) = lines.next() else {
                let mut err = String::new();
                child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
                panic!("hcbench view ended before printing its URLs: {err}");
            };
            let url = |l: &str| l.split_whitespace().last().unwrap().to_string();
            if line.starts_with("serving on http://127.0.0.1:") {
                let rest = line.trim_start_matches("serving on http://127.0.0.1:");
                port = Some(rest.split('/').next().unwrap().parse().unwrap());
            } else if line.starts_with("report:") || line.starts_with("run:") {
                page = Some(url(&line));
            } else if line.starts_with("index:") {
                index = Some(url(&line));
            }
        }
        Served { child, page, index, port: port.expect("a `serving on` line") }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn http() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(None)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}

/// Sends `request` as is over a plain socket (clients normalize `..` away before sending, so
/// a refusal of `..` can only be tested this way) and returns the status line and the body.
fn raw(port: u16, request: &str) -> (String, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    let status = reply.lines().next().unwrap_or_default().to_string();
    let body = reply.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

#[test]
fn view_serves_the_report_and_the_index_and_nothing_outside_them() {
    let tmp = tempfile::tempdir().unwrap();
    let root = root_with_a_run(tmp.path());
    // A run directory whose manifest is corrupt, and a secret beside the runs.
    std::fs::create_dir_all(root.join("workspace/runs/broken")).unwrap();
    std::fs::write(root.join("workspace/runs/broken/manifest.json"), "{").unwrap();
    std::fs::write(root.join("models.toml"), "api_key = \"sk-view-secret\"\n").unwrap();

    let served = Served::start(&root, &["--latest"]);
    let page = served.page.clone().expect("a report URL");
    assert!(page.ends_with("/workspace/runs/run-a/reports/report.html"), "{page}");
    let agent = http();

    let mut r = agent.get(&page).call().unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "text/html; charset=utf-8");
    let html = r.body_mut().with_config().limit(64 << 20).read_to_string().unwrap();
    assert!(html.contains("data-cell=\"bugfix-1__oracle\""), "the run's report comes back");
    assert_eq!(html.as_bytes(), std::fs::read(root.join("workspace/runs/run-a/reports/report.html")).unwrap());

    let mut r = agent.get(served.index.as_deref().unwrap()).call().unwrap();
    assert_eq!(r.status(), 200);
    let index = r.body_mut().read_to_string().unwrap();
    assert!(
        index.contains("href=\"../workspace/runs/run-a/reports/report.html\""),
        "the index links the run:\n{index}"
    );
    assert!(index.contains("oracle 100.0%"), "the index shows the pass rate per profile");
    assert!(
        index.contains("broken") && index.contains("not readable as a run"),
        "an unreadable run is listed:\n{index}"
    );
    // The index's relative link resolves on the server too.
    let linked = format!("http://127.0.0.1:{}/workspace/runs/run-a/reports/report.html", served.port);
    assert_eq!(agent.get(&linked).call().unwrap().status(), 200);

    let json = agent.get(page.replace("report.html", "report.json")).call().unwrap();
    assert_eq!(json.headers()["content-type"], "application/json");
    let head = agent.head(&page).call().unwrap();
    assert_eq!(head.status(), 200);
    assert_eq!(head.headers()["content-length"], html.len().to_string().as_str());
    assert_eq!(agent.get(page.replace("report.html", "nope.html")).call().unwrap().status(), 404);
    assert_eq!(agent.post(&page).send("x").unwrap().status(), 405);

    let host = format!("Host: 127.0.0.1:{}", served.port);
    for path in [
        "/workspace/runs/../../models.toml",
        "/reports/../models.toml",
        "/workspace/runs/%2e%2e/%2e%2e/models.toml",
        "/workspace/runs/run-a/..%2f..%2f..%2fmodels.toml",
    ] {
        let (status, body) = raw(served.port, &format!("GET {path} HTTP/1.1\r\n{host}\r\n\r\n"));
        assert!(status.starts_with("HTTP/1.1 403"), "{path}: {status}");
        assert!(!body.contains("sk-view-secret"), "{path} leaked the secret");
    }
    // Only 127.0.0.1 and localhost: a page elsewhere cannot rebind its name to this server.
    let (status, _) = raw(served.port, "GET /reports/index.html HTTP/1.1\r\nHost: evil.example\r\n\r\n");
    assert!(status.starts_with("HTTP/1.1 403"), "{status}");
    let (status, _) = raw(served.port, &format!("GET /models.toml HTTP/1.1\r\n{host}\r\n\r\n"));
    assert!(status.starts_with("HTTP/1.1 404"), "{status}");
    drop(served);

    // A run without report.html yet (interrupted before its reports): its folder is served.
    let bare = root.join("workspace/runs/run-b");
    std::fs::create_dir_all(&bare).unwrap();
    std::fs::copy(root.join("workspace/runs/run-a/manifest.json"), bare.join("manifest.json")).unwrap();
    let served = Served::start(&root, &["workspace/runs/run-b"]);
    let page = served.page.clone().unwrap();
    assert!(page.ends_with("/workspace/runs/run-b/"), "{page}");
    let mut r = agent.get(&page).call().unwrap();
    assert_eq!(r.status(), 200);
    let listing = r.body_mut().read_to_string().unwrap();
    assert!(listing.contains("href=\"manifest.json\""), "{listing}");
}

#[test]
fn view_opens_the_report_in_the_browser_named_by_browser_and_returns() {
    let tmp = tempfile::tempdir().unwrap();
    let root = root_with_a_run(tmp.path());
    let opened = tmp.path().join("opened.txt");
    let script = tmp.path().join("fake-browser");
    std::fs::write(&script, format!("#!/bin/sh\nprintf '%s' \"$1\" > {}.tmp && mv {0}.tmp {0}\n", opened.display()))
        .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();

    let run = root.join("workspace/runs/run-a");
    let out =
        Test::new().root(&root).args(&["view"]).arg_path(&run).env("BROWSER", script.to_str().unwrap()).run().code(0);
    assert!(out.stdout.starts_with("opened ") && out.stdout.contains("report.html"), "{}", out.stdout);
    let started = Instant::now();
    while !opened.exists() && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let url = std::fs::read_to_string(&opened).expect("the browser was started");
    let want = run.join("reports/report.html").canonicalize().unwrap();
    assert_eq!(url, format!("file://{}", want.display()));
    // The index was refreshed on the way.
    let index = std::fs::read_to_string(root.join("reports/index.html")).unwrap();
    assert!(index.contains("run-a"));
}

#[test]
fn view_no_open_prints_the_page_and_starts_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let root = root_with_a_run(tmp.path());
    let out = view(&root, &["--latest", "--no-open"]).code(0);
    assert_eq!(out.stdout.trim(), "./workspace/runs/run-a/reports/report.html");
    let out = view(&root, &["--no-open"]).code(0);
    assert_eq!(out.stdout.trim(), "./reports/index.html");
    assert!(out.stderr.contains("index of 1 run: ./reports/index.html"), "{}", out.stderr);
}

#[test]
fn view_errors_name_the_path_and_the_fix() {
    let tmp = tempfile::tempdir().unwrap();
    let empty = tmp.path().join("empty-project");
    std::fs::create_dir_all(&empty).unwrap();
    for args in [&["--latest"][..], &[][..]] {
        view(&empty, args)
            .code(2)
            .stderr_has("error: no runs yet under ./workspace/runs: `hcbench matrix` or `hcbench run` writes one there")
            .stderr_has("--root");
    }
    assert!(!empty.join("reports").exists(), "a failed view writes nothing");
    std::fs::create_dir_all(empty.join("workspace/runs/half")).unwrap();
    view(&empty, &["--latest"])
        .code(2)
        .stderr_has("error: no readable run under ./workspace/runs: 1 folder(s) there have no readable manifest.json");
    std::fs::remove_dir_all(empty.join("workspace")).unwrap();

    let missing = tmp.path().join("no-such-run");
    view(&empty, &[missing.to_str().unwrap()])
        .code(2)
        .stderr_has(&format!("error: no such run directory: {}; give a run directory written by", missing.display()))
        .stderr_has("`hcbench view --latest`");
    view(&empty, &[tmp.path().to_str().unwrap()])
        .code(2)
        .stderr_has(&format!("error: {} is not a run directory (it has no manifest.json)", tmp.path().display()));
    let file = tmp.path().join("report.html");
    std::fs::write(&file, "").unwrap();
    view(&empty, &[file.to_str().unwrap()])
        .code(2)
        .stderr_has(&format!("error: {} is not a run directory (it is a file)", file.display()));
    view(&empty, &["--latest", missing.to_str().unwrap()]).code(2).stderr_has("cannot be used with");

    // A port that is taken.
    let root = root_with_a_run(tmp.path());
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    view(&root, &["--latest", "--port", &port])
        .code(2)
        .stderr_has(&format!("error: cannot listen on 127.0.0.1:{port}"))
        .stderr_has("choose another --port, or leave it out for any free port");
}

/// Cases x profiles x epochs of the synthetic report: 50 x 2 x 10 = 1,000 cells.
const CASES: usize = 50;
const EPOCHS: u32 = 10;

/// A run directory of 1,000 cells built from one real smoke run: its manifest with 50 cases
/// and 10 epochs, and each cell's trace copied from the real trace of the same profile with
/// the cell's ids put in. One oracle cell has no trace (incomplete). Rendered by `hcbench
/// report`, so the page is what hcbench writes for such a run.
fn thousand_cell_run(root: &Path) -> PathBuf {
    synthetic_run(root, "run-big", CASES, EPOCHS)
}

/// [`thousand_cell_run`]'s recipe for `cases` x 2 profiles x `epochs` cells, at
/// `workspace/runs/<name>`.
fn synthetic_run(root: &Path, name: &str, cases: usize, epochs: u32) -> PathBuf {
    let real = root.join("workspace/runs/run-a");
    Test::new()
        .args(&["matrix", "--profiles", "oracle,nop", "--case", "bugfix-1", "--out"])
        .arg_path(&real)
        .run()
        .code(0);
    let big = root.join("workspace/runs").join(name);
    let mut manifest: Value = serde_json::from_slice(&std::fs::read(real.join("manifest.json")).unwrap()).unwrap();
    let categories = ["bugfix", "context", "greenfield", "policy", "recovery"];
    let case =
        |i: usize| (format!("case-{i:03}"), categories[i % 5], if i.is_multiple_of(4) { "test" } else { "train" });
    manifest["cases"] =
        (0..cases).map(|i| json!({"id": case(i).0, "category": case(i).1, "split": case(i).2})).collect();
    manifest["epochs"] = json!(epochs);
    std::fs::create_dir_all(big.join("cells")).unwrap();
    std::fs::write(big.join("manifest.json"), serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
    for profile in ["oracle", "nop"] {
        let template = crate::read_trace_text(real.join(format!("cells/bugfix-1__{profile}/trace.jsonl"))).unwrap();
        for i in 0..cases {
            let (id, category, split) = case(i);
            for epoch in 1..=epochs {
                if profile == "oracle" && i == 7 && epoch == 3 {
                    continue;
                }
                let cell_id =
                    if epochs > 1 { format!("{id}__{profile}__e{epoch}") } else { format!("{id}__{profile}") };
                let mut trace = String::new();
                for line in template.lines() {
                    let mut event: Value = serde_json::from_str(line).unwrap();
                    event["cell_id"] = json!(cell_id);
                    if event["kind"] == "run_started" {
                        let data = &mut event["data"];
                        data["case_id"] = json!(id);
                        data["category"] = json!(category);
                        data["split"] = json!(split);
                        data["epoch"] = json!(epoch);
                    }
                    trace.push_str(&serde_json::to_string(&event).unwrap());
                    trace.push('\n');
                }
                std::fs::create_dir_all(big.join("cells").join(&cell_id)).unwrap();
                std::fs::write(big.join("cells").join(&cell_id).join("trace.jsonl"), trace).unwrap();
            }
        }
    }
    let started = Instant::now();
    let out = Test::new().args(&["report"]).arg_path(&big).run();
    eprintln!("hcbench report of {} cells: {:?} (exit {})", cases * 2 * epochs as usize, started.elapsed(), out.code);
    assert!(big.join("reports/report.html").is_file(), "{}", out.stderr);
    big
}

#[test]
#[ignore = "needs chromium and chromium-driver (scripts/test runs it)"]
fn a_thousand_cell_report_filters_deep_links_sorts_and_screenshots_in_chromium() {
    let chromedriver = require_browser();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("project");
    let run = thousand_cell_run(&root);
    let html = crate::report_html(&run.join("reports/report.html"));
    eprintln!("report.html of 1,000 cells: {} bytes", html.len());
    let served = Served::start(&root, &[run.to_str().unwrap()]);
    let page = served.page.clone().unwrap();
    let cells = (CASES * 2 * EPOCHS as usize) as u64;

    let browser = Browser::start(&chromedriver, tmp.path());
    let started = Instant::now();
    browser.open_url(&page);
    eprintln!("load of the 1,000-cell report over http: {:?}", started.elapsed());
    assert_eq!(browser.severe_logs(), Vec::<String>::new(), "the page loads without console errors");
    assert_eq!(browser.script("return document.querySelectorAll('.heatmap [data-cell]').length;"), json!(cells));
    let visible = "return Array.from(document.querySelectorAll('.heatmap [data-cell]')).filter(e => e.offsetParent !== null).map(e => e.dataset.cell);";
    let visible_cells = || -> Vec<String> {
        browser.script(visible).as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect()
    };
    assert_eq!(visible_cells().len() as u64, cells, "every square shows before any filter");

    // Filter by outcome through the select, as a user would (WebDriver clicks the option).
    browser.click(&browser.find("#f-outcome option[value=\"failed\"]"));
    let failed = visible_cells();
    assert_eq!(failed.len(), CASES * EPOCHS as usize, "every nop cell failed, nothing else did");
    assert!(failed.iter().all(|c| c.contains("__nop__")), "only failed cells show");
    assert_eq!(browser.text(&browser.find("#f-count")), format!("showing {} of {cells} cells", failed.len()));
    let timed = browser.script(
        "const s = document.getElementById('f-outcome'); const t = performance.now(); s.value = 'passed'; \
         s.dispatchEvent(new Event('change')); const d = performance.now() - t; s.value = 'failed'; \
         s.dispatchEvent(new Event('change')); return d;",
    );
    eprintln!("one filter change over 1,000 cells: {timed} ms");

    // Typing in the search box narrows further, and the address keeps both.
    browser.send_keys(&browser.find("#f-q"), "case-012");
    let found = visible_cells();
    assert_eq!(found.len(), EPOCHS as usize, "{found:?}");
    assert!(found.iter().all(|c| c.starts_with("case-012__nop__")));
    let hash = browser.script("return location.hash;");
    assert_eq!(hash, json!("#q=case-012&outcome=failed"));
    // The list of cells that did not pass follows the same filter.
    let rows = browser.script(
        "return Array.from(document.querySelectorAll('#failing-table tbody tr')).filter(e => e.offsetParent !== null).length;",
    );
    assert_eq!(rows, json!(EPOCHS), "the failing table is filtered too");

    // Split and category: case-012 is `greenfield` (12 % 5 = 2) and `test` (12 % 4 = 0).
    browser.click(&browser.find("#f-category option[value=\"bugfix\"]"));
    assert_eq!(visible_cells().len(), 0, "case-012 is not a bugfix case");
    browser.click(&browser.find("#f-category option[value=\"greenfield\"]"));
    browser.click(&browser.find("#f-split option[value=\"test\"]"));
    assert_eq!(visible_cells().len(), EPOCHS as usize);
    browser.click(&browser.find("#f-clear"));
    assert_eq!(visible_cells().len() as u64, cells);

    // A deep link to a passed cell with an outcome filter that hides it, opened fresh.
    let target = "case-030__oracle__e5";
    browser.open_url("about:blank");
    browser.open_url(&format!("{page}#cell={target}&outcome=failed&profile=nop"));
    let timeline = browser.find("section.timeline:not([hidden])");
    let shown = browser.text(&timeline);
    assert!(shown.contains(target) && shown.contains("run_finished"), "the deep link opens its timeline:\n{shown}");
    assert_eq!(browser.script("return document.getElementById('f-outcome').value;"), json!("failed"));
    assert_eq!(browser.script("return document.getElementById('f-profile').value;"), json!("nop"));
    let now_visible = visible_cells();
    assert!(now_visible.contains(&target.to_string()), "the linked cell shows although the filter hides it");
    assert_eq!(now_visible.len(), CASES * EPOCHS as usize + 1, "the filter still holds for every other cell");
    let square = browser.find(&format!(".heatmap [data-cell=\"{target}\"]"));
    assert_eq!(browser.attribute(&square, "aria-expanded"), "true");
    assert!(browser.attribute(&square, "class").contains("pinned"));
    assert!(browser.text(&browser.find("#f-count")).contains("outside the filter"));

    // Clicking another square moves the deep link with it.
    let other = browser.find(".heatmap [data-cell=\"case-001__nop__e2\"]");
    browser.click(&other);
    assert_eq!(browser.script("return location.hash;"), json!("#cell=case-001__nop__e2&profile=nop&outcome=failed"));
    assert!(
        browser
            .script(&format!("return document.querySelector('.heatmap [data-cell=\"{target}\"]').offsetParent;"))
            .is_null(),
        "the old pin is gone with its timeline"
    );

    // Sortable tables: the summary by profile, by profile name, both ways.
    let header = browser.find("#summary thead th button.sort");
    browser.click(&header);
    let first_row = "return document.querySelector('#summary tbody tr th').textContent.trim();";
    assert_eq!(browser.script(first_row), json!("nop"));
    browser.click(&header);
    assert_eq!(browser.script(first_row), json!("oracle"));
    assert_eq!(
        browser.script("return document.querySelector('#summary thead th').getAttribute('aria-sort');"),
        json!("descending")
    );

    // A hand-broken address opens the page without a script error.
    browser.open_url(&format!("{page}#q=%E0%A4%A&cell=%zz"));
    assert_eq!(browser.script("return document.getElementById('f-q').value;"), json!("%E0%A4%A"));

    // One epoch's headers are not shown for ten: pass@10 and pass^10 are.
    let headers = browser.text(&browser.find("#summary thead"));
    assert!(headers.contains("pass@10") && headers.contains("pass^10"), "{headers}");
    assert_eq!(browser.severe_logs(), Vec::<String>::new(), "no console errors along the way");

    // A screenshot of the deep-linked view, kept as an artifact.
    browser.open_url(&format!("{page}#cell={target}&outcome=failed"));
    let png = browser.screenshot();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000, "a non-empty PNG ({} bytes)", png.len());
    let width = u32::from_be_bytes(png[16..20].try_into().unwrap());
    let height = u32::from_be_bytes(png[20..24].try_into().unwrap());
    assert!(width >= 800 && height >= 600, "{width}x{height}");
    let artifacts = std::env::temp_dir().join("hcbench-test-artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let shot = artifacts.join("view-deep-link.png");
    std::fs::write(&shot, &png).unwrap();
    eprintln!("screenshot: {} ({width}x{height}, {} bytes)", shot.display(), png.len());

    // The index served beside it lists the run and links it.
    browser.open_url(served.index.as_deref().unwrap());
    let link = browser.find("#runs-table a[href$=\"run-big/reports/report.html\"]");
    browser.click(&link);
    assert_eq!(browser.script("return location.pathname;"), json!("/workspace/runs/run-big/reports/report.html"));
}

/// Cases of the large synthetic report: 650 x 2 profiles x 1 epoch = 1,300 cells, over the
/// 1,000 a one-file report.html holds, so the page is split: 250 cases a page, timelines in
/// report-files/.
const LARGE_CASES: usize = 650;

/// Polls `script` (which returns a value or null) until it returns a value, for what the page
/// does after a side file arrives.
fn wait_for(browser: &Browser, script: &str) -> Value {
    let started = Instant::now();
    loop {
        let v = browser.script(script);
        if !v.is_null() {
            return v;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "gave up waiting for: {script}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The text of the timeline shown once it names `cell` (null until then).
fn shown_timeline(cell: &str) -> String {
    format!(
        "const s = document.querySelector('#detail section.timeline:not([hidden])'); \
         return s && s.textContent.includes({cell:?}) ? s.textContent : null;"
    )
}

#[test]
#[ignore = "needs chromium and chromium-driver (scripts/test runs it)"]
fn a_large_report_loads_each_timeline_on_demand_from_file_and_through_view() {
    let chromedriver = require_browser();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("project");
    let run = synthetic_run(&root, "run-large", LARGE_CASES, 1);
    let cells = LARGE_CASES * 2;
    let html = crate::report_html(&run.join("reports/report.html"));
    eprintln!("report.html of {cells} cells: {} bytes", html.len());
    assert!(!html.contains("<ol class=\"entries\">"), "no timeline is in the page itself");
    assert_eq!(html.matches("<section id=\"tl-").count(), 0);
    let side = run.join("reports/report-files");
    let mut files: Vec<String> =
        std::fs::read_dir(&side).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    files.sort();
    assert_eq!(files.len(), cells.div_ceil(100), "a side file per 100 cells: {files:?}");
    assert_eq!(files[0], "timelines-0001.js");

    let browser = Browser::start(&chromedriver, tmp.path());
    let page_file = format!("file://{}", run.join("reports/report.html").canonicalize().unwrap().display());
    let squares = "return document.querySelectorAll('.heatmap [data-cell]').length;";
    for (how, url) in [("file://", page_file.clone()), ("hcbench view", String::new())] {
        let _served;
        let url = if url.is_empty() {
            let served = Served::start(&root, &[run.to_str().unwrap()]);
            let page = served.page.clone().unwrap();
            _served = served;
            page
        } else {
            url
        };
        let started = Instant::now();
        browser.open_url(&url);
        eprintln!("{how}: load of the {cells}-cell report: {:?}", started.elapsed());
        assert_eq!(browser.severe_logs(), Vec::<String>::new(), "{how}: the page loads without console errors");
        assert_eq!(browser.script(squares), json!(500), "{how}: the first page shows 250 cases x 2 profiles");
        let pager = browser.text(&browser.find("#pager .range"));
        assert_eq!(pager, format!("cases 1–250 of {LARGE_CASES}"), "{how}");
        assert_eq!(browser.script("return document.querySelectorAll('script[src]').length;"), json!(0));

        // A failed cell's square: its timeline arrives from its side file.
        let target = "case-003__nop";
        browser.click(&browser.find(&format!(".heatmap [data-cell=\"{target}\"]")));
        let shown = wait_for(&browser, &shown_timeline(target));
        let shown = shown.as_str().unwrap();
        assert!(shown.contains("run_finished") && shown.contains("tool_result"), "{how}: the timeline:\n{shown}");
        assert_eq!(browser.script("return location.hash;"), json!(format!("#cell={target}")));
        let loaded = browser
            .script("return Array.from(document.querySelectorAll('script[src]')).map(s => s.getAttribute('src'));");
        assert_eq!(loaded, json!(["report-files/timelines-0001.js"]), "{how}: only the square's side file is loaded");

        // The next page, and a passed cell there, from another side file.
        browser.click(&browser.find("#pager button.next"));
        assert_eq!(browser.text(&browser.find("#pager .range")), format!("cases 251–500 of {LARGE_CASES}"));
        let passed = "case-260__oracle";
        browser.click(&browser.find(&format!(".heatmap [data-cell=\"{passed}\"]")));
        let shown = wait_for(&browser, &shown_timeline(passed));
        assert!(shown.as_str().unwrap().contains("passed"), "{how}");
        assert_eq!(browser.script("return document.querySelectorAll('#detail section.timeline').length;"), json!(1));

        // The filter runs over every cell, not the page; the open cell stays pinned.
        browser.click(&browser.find("#f-outcome option[value=\"failed\"]"));
        let count = browser.text(&browser.find("#f-count"));
        assert_eq!(count, format!("showing {LARGE_CASES} of {cells} cells (and the open cell, outside the filter)"));
        assert_eq!(browser.script("return document.querySelectorAll('#failing-table tbody tr').length;"), json!(100));
        assert_eq!(browser.severe_logs(), Vec::<String>::new(), "{how}: no console errors along the way");

        // A deep link to a cell on the last page opens its page and its timeline.
        let deep = "case-640__nop";
        browser.open_url("about:blank");
        browser.open_url(&format!("{url}#cell={deep}&profile=nop"));
        let shown = wait_for(&browser, &shown_timeline(deep));
        assert!(shown.as_str().unwrap().contains("run_finished"), "{how}");
        assert_eq!(browser.text(&browser.find("#pager .range")), format!("cases 501–{LARGE_CASES} of {LARGE_CASES}"));
        let square = browser.find(&format!(".heatmap [data-cell=\"{deep}\"]"));
        assert_eq!(browser.attribute(&square, "aria-expanded"), "true");
        assert_eq!(browser.severe_logs(), Vec::<String>::new(), "{how}");
    }

    // Copied without its side files, the page says what is missing instead of failing silently.
    std::fs::rename(&side, run.join("reports/moved")).unwrap();
    browser.open_url(&format!("{page_file}#cell=case-005__nop"));
    let text = wait_for(&browser, &shown_timeline("case-005__nop"));
    assert!(text.as_str().unwrap().contains("keep report.html and its report-files folder together"), "{}", text);
}

#[test]
fn only_view_writes_the_index_so_a_run_leaves_the_project_as_the_gate_expects() {
    // The gate's file guard counts an untracked file outside its allowlist as a change, so a
    // run (the gate's included) must not write reports/index.html; `view` does, on request.
    let tmp = tempfile::tempdir().unwrap();
    let root = root_with_a_run(tmp.path());
    assert!(!root.join("reports").exists(), "a run wrote {}", root.join("reports").display());
    view(&root, &["--no-open"]).code(0);
    let index = std::fs::read_to_string(root.join("reports/index.html")).unwrap();
    assert!(index.contains("href=\"../workspace/runs/run-a/reports/report.html\""), "{index}");
}
