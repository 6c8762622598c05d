//! `report.html` as a user gets it, in two tests. The first needs no browser and runs
//! everywhere: the page is self-contained and `hcbench report` re-renders it byte for byte.
//! The second opens it from `file://` in real headless Chromium, driven through chromedriver's
//! W3C WebDriver HTTP API. It needs Debian's `chromium` and `chromium-driver` packages, so a
//! plain `cargo test` lists it as ignored; `scripts/test` (README's test command, also run by
//! `.ci/run`) installs the packages when it can and runs it, and always runs it in CI, where a
//! missing browser fails it with the packages to install instead of letting a broken page
//! through.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

use crate::Test;

const CHROMIUM: &str = "/usr/bin/chromium";
/// The W3C key under which WebDriver returns an element reference.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

/// Runs the smoke suite with a passing and a failing profile, two epochs each, into
/// `out/run`; returns the run directory and the cell ids of results.jsonl.
fn smoke_matrix(out: &Path) -> (PathBuf, Vec<String>) {
    let run_dir = out.join("run");
    Test::new()
        .args(&["matrix", "--profiles", "oracle,nop", "--suite", "smoke", "--epochs", "2", "--out"])
        .arg_path(&run_dir)
        .run()
        .code(0);
    let cell_ids: Vec<String> = std::fs::read_to_string(run_dir.join("results.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["cell_id"].as_str().unwrap().to_string())
        .collect();
    assert!(cell_ids.len() >= 4, "the smoke suite with two profiles and two epochs has cells: {cell_ids:?}");
    (run_dir, cell_ids)
}

#[test]
fn the_html_report_is_self_contained_and_re_renders_byte_for_byte() {
    let out = tempfile::tempdir().unwrap();
    let (run_dir, cell_ids) = smoke_matrix(out.path());
    let report: Value = serde_json::from_slice(&std::fs::read(run_dir.join("reports/report.json")).unwrap()).unwrap();
    assert_eq!(report["cells"].as_array().unwrap().len(), cell_ids.len(), "report.json and results.jsonl agree");

    let html_path = run_dir.join("reports/report.html");
    let live = std::fs::read(&html_path).unwrap();
    let text = String::from_utf8(live.clone()).expect("report.html is UTF-8");
    // Self-contained: every link stays inside the page and nothing is loaded from elsewhere.
    // (URLs may appear as text, e.g. in a diff of a file that contains one.)
    let attributes = regex::Regex::new(r#"\s(href|src|srcset|action|formaction|poster|data)="([^"]*)""#).unwrap();
    for m in attributes.captures_iter(&text) {
        assert!(m[2].starts_with('#') || m[2].starts_with("data:"), "report.html references {}={:?}", &m[1], &m[2]);
    }
    let css = text.split("<style>").nth(1).and_then(|s| s.split("</style>").next()).expect("an inline stylesheet");
    assert!(!css.contains("url(") && !css.contains("@import"), "the stylesheet loads nothing");
    // One heatmap square per run cell, before any script runs (the browser test checks the
    // same on the rendered page).
    for id in &cell_ids {
        assert!(text.contains(&format!("data-cell=\"{id}\"")), "report.html has a square for {id}");
    }

    // The page names each interval's method and states what the run could detect.
    for want in [
        "(Wilson)</span>",
        "exact sign test",
        "within noise (p = 0.0625, exact sign test)",
        "minimum detectable effect",
    ] {
        assert!(text.contains(want), "report.html shows {want:?}");
    }
    // Every smoke case is in train: no per-split table repeating the summary (a run of two
    // splits has one: tests/cli/rundir.rs).
    assert!(!text.contains("By split"), "report.html has no one-split breakdown");
    assert!(!text.contains("bootstrap"), "no report speaks of a bootstrap any more");

    // Re-rendering from the traces alone gives the same bytes.
    Test::new().args(&["report"]).arg_path(&run_dir).run().code(0);
    assert!(std::fs::read(&html_path).unwrap() == live, "`hcbench report` must re-render report.html byte for byte");
}

#[test]
#[ignore = "needs chromium and chromium-driver (scripts/test runs it)"]
fn the_html_report_opens_offline_shows_every_cell_and_each_cells_timeline() {
    // Fail before the slow part when the browser is missing.
    let chromedriver = require_browser();

    let out = tempfile::tempdir().unwrap();
    let (run_dir, cell_ids) = smoke_matrix(out.path());
    let html_path = run_dir.join("reports/report.html");

    let browser = Browser::start(&chromedriver, out.path());
    browser.open(&html_path);
    assert_eq!(browser.severe_logs(), Vec::<String>::new(), "the page loads without console errors");
    assert_eq!(
        browser.script("return performance.getEntriesByType('resource').map(e => e.name);"),
        json!([]),
        "the page fetches nothing"
    );

    // Exactly one heatmap element per run cell, and it is the cells of this run.
    let squares = browser.find_all(".heatmap [data-cell]");
    assert_eq!(squares.len(), cell_ids.len(), "one heatmap square per run cell");
    let mut on_page: Vec<String> = browser
        .script("return Array.from(document.querySelectorAll('.heatmap [data-cell]')).map(e => e.dataset.cell);")
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    let mut expected = cell_ids.clone();
    on_page.sort();
    expected.sort();
    assert_eq!(on_page, expected);
    assert_eq!(browser.displayed_timelines(), 0, "no timeline is open before a click");

    // Click a failed cell, then a passed one: each click shows that cell's timeline only.
    let failed = browser.find(".heatmap [data-outcome=\"failed\"]");
    let passed = browser.find(".heatmap [data-outcome=\"passed\"]");
    let mut first_timeline = None;
    for square in [&failed, &passed] {
        let cell_id = browser.attribute(square, "data-cell");
        let timeline = browser.find(&format!("#{}", browser.attribute(square, "aria-controls")));
        assert!(!browser.displayed(&timeline), "{cell_id}: hidden before the click");
        browser.click(square);
        assert!(browser.displayed(&timeline), "{cell_id}: clicking its square shows its timeline");
        let shown = browser.text(&timeline);
        assert!(shown.contains(&cell_id), "{cell_id}: the timeline names its cell:\n{shown}");
        assert!(shown.contains("run_finished"), "{cell_id}: the timeline has a run_finished entry:\n{shown}");
        assert_eq!(browser.displayed_timelines(), 1, "one timeline at a time");
        // From file:// too, the address follows the open cell, so it can be copied as a link.
        assert_eq!(browser.script("return location.hash;"), json!(format!("#cell={cell_id}")));
        if let Some(previous) = first_timeline.replace(timeline) {
            assert!(!browser.displayed(&previous), "the previous timeline is hidden again");
        }
    }
    assert_eq!(browser.severe_logs(), Vec::<String>::new(), "clicking raises no console errors");

    // The log check above must be able to fail: a console error does show up.
    browser.script("console.error('hcbench-log-probe'); return null;");
    assert!(
        browser.severe_logs().iter().any(|m| m.contains("hcbench-log-probe")),
        "browser logs are collected, so an empty list above means no errors"
    );

    browser.script("document.getElementById('cells').scrollIntoView(); return null;");
    let png = browser.screenshot();
    assert!(png.starts_with(b"\x89PNG"), "the screenshot is a PNG");
    std::fs::write(std::env::temp_dir().join("hcbench-report.png"), png).unwrap();
}

/// Returns chromedriver's path, or fails saying what to install.
pub(crate) fn require_browser() -> PathBuf {
    let chromedriver = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .chain([PathBuf::from("/usr/bin")])
        .map(|d| d.join("chromedriver"))
        .find(|p| p.is_file());
    let missing: Vec<&str> =
        [(!Path::new(CHROMIUM).is_file()).then_some(CHROMIUM), chromedriver.is_none().then_some("chromedriver")]
            .into_iter()
            .flatten()
            .collect();
    assert!(
        missing.is_empty(),
        "the HTML report test needs headless Chromium, but {} is missing: install it with \
         `apt-get update && apt-get install -y chromium chromium-driver` (scripts/test does this when run as root)",
        missing.join(" and ")
    );
    chromedriver.unwrap()
}

/// One chromedriver child with one Chromium session; both end when this is dropped, also
/// when an assertion fails, so no browser outlives the test.
pub(crate) struct Browser {
    driver: Child,
    base: String,
    session: String,
    http: ureq::Agent,
}

impl Browser {
    pub(crate) fn start(chromedriver: &Path, scratch: &Path) -> Browser {
        let http: ureq::Agent = ureq::Agent::config_builder()
            // WebDriver errors come as 4xx/5xx with a JSON body worth showing.
            .http_status_as_error(false)
            // Only 127.0.0.1 is spoken to; a proxy from the environment must not interfere.
            .proxy(None)
            .timeout_global(Some(Duration::from_secs(90)))
            .build()
            .into();
        // A free port: bind to port 0, read the port the kernel chose, release it for chromedriver.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let log = scratch.join("chromedriver.log");
        let mut driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .arg(format!("--log-path={}", log.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", chromedriver.display()));
        let base = format!("http://127.0.0.1:{port}");
        let started = Instant::now();
        loop {
            let ready = http
                .get(format!("{base}/status"))
                .call()
                .ok()
                .and_then(|mut r| r.body_mut().read_json::<Value>().ok())
                .is_some_and(|v| v["value"]["ready"] == true);
            if ready {
                break;
            }
            if let Ok(Some(status)) = driver.try_wait() {
                panic!(
                    "chromedriver exited ({status}) before it was ready:\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            if started.elapsed() > Duration::from_secs(30) {
                let _ = driver.kill();
                let _ = driver.wait();
                panic!("chromedriver was not ready on port {port} after 30s");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let profile = scratch.join("chromium-profile");
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--no-first-run", "--disable-background-networking", "--disable-component-update",
                    "--disable-sync", "--window-size=1440,1000",
                    format!("--user-data-dir={}", profile.display()),
                ],
            },
            "goog:loggingPrefs": {"browser": "ALL"},
        }}});
        let mut browser = Browser { driver, base, session: String::new(), http };
        let created = browser.request("POST", "/session", Some(capabilities));
        browser.session = created["sessionId"].as_str().expect("a session id").to_string();
        browser
    }

    /// Sends one WebDriver command and returns its `value`, failing on a WebDriver error.
    fn request(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}{path}", self.base);
        let response = match (method, body) {
            ("GET", _) => self.http.get(&url).call(),
            ("DELETE", _) => self.http.delete(&url).call(),
            (_, body) => self.http.post(&url).send_json(body.unwrap_or_else(|| json!({}))),
        };
        let mut response = response.unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let status = response.status();
        let reply: Value = response
            .body_mut()
            .with_config()
            .limit(64 << 20)
            .read_json()
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        assert!(status.is_success(), "{method} {path}: HTTP {status}: {reply}");
        reply["value"].clone()
    }

    fn session_path(&self, rest: &str) -> String {
        format!("/session/{}{rest}", self.session)
    }

    pub(crate) fn open(&self, file: &Path) {
        self.open_url(&format!("file://{}", file.canonicalize().unwrap().display()));
    }

    /// Navigates to `url` and waits for the page to load (WebDriver's page load strategy), and
    /// for a report page's timelines to be inflated from their bundle (src/report/bundle.rs).
    pub(crate) fn open_url(&self, url: &str) {
        self.request("POST", &self.session_path("/url"), Some(json!({"url": url})));
        let started = Instant::now();
        let state = loop {
            let v = self.script(
                "return document.getElementById('timelines-z') ? (document.documentElement.dataset.timelines || null) : 'none';",
            );
            if !v.is_null() {
                break v;
            }
            assert!(started.elapsed() < Duration::from_secs(20), "{url}: the timelines were never inflated");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_ne!(state, json!("failed"), "{url}: the page could not inflate its timelines");
    }

    /// Types `text` into `element` as keystrokes (each fires its input event).
    pub(crate) fn send_keys(&self, element: &str, text: &str) {
        self.request("POST", &self.session_path(&format!("/element/{element}/value")), Some(json!({"text": text})));
    }

    pub(crate) fn find_all(&self, css: &str) -> Vec<String> {
        let found =
            self.request("POST", &self.session_path("/elements"), Some(json!({"using": "css selector", "value": css})));
        found.as_array().unwrap().iter().map(|e| e[ELEMENT_KEY].as_str().unwrap().to_string()).collect()
    }

    pub(crate) fn find(&self, css: &str) -> String {
        self.find_all(css).into_iter().next().unwrap_or_else(|| panic!("no element matches {css}"))
    }

    pub(crate) fn attribute(&self, element: &str, name: &str) -> String {
        let v = self.request("GET", &self.session_path(&format!("/element/{element}/attribute/{name}")), None);
        v.as_str().unwrap_or_else(|| panic!("no attribute {name}")).to_string()
    }

    pub(crate) fn displayed(&self, element: &str) -> bool {
        self.request("GET", &self.session_path(&format!("/element/{element}/displayed")), None) == true
    }

    fn displayed_timelines(&self) -> usize {
        self.find_all("section.timeline").iter().filter(|e| self.displayed(e)).count()
    }

    pub(crate) fn text(&self, element: &str) -> String {
        self.request("GET", &self.session_path(&format!("/element/{element}/text")), None).as_str().unwrap().to_string()
    }

    pub(crate) fn click(&self, element: &str) {
        self.request("POST", &self.session_path(&format!("/element/{element}/click")), Some(json!({})));
    }

    pub(crate) fn script(&self, script: &str) -> Value {
        self.request("POST", &self.session_path("/execute/sync"), Some(json!({"script": script, "args": []})))
    }

    /// Browser console messages of level SEVERE since the last call.
    pub(crate) fn severe_logs(&self) -> Vec<String> {
        let logs = self.request("POST", &self.session_path("/se/log"), Some(json!({"type": "browser"})));
        logs.as_array()
            .unwrap()
            .iter()
            .filter(|l| l["level"] == "SEVERE")
            .map(|l| l["message"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    pub(crate) fn screenshot(&self) -> Vec<u8> {
        let b64 = self.request("GET", &self.session_path("/screenshot"), None);
        base64::engine::general_purpose::STANDARD.decode(b64.as_str().unwrap()).unwrap()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            // Closing the session ends Chromium; killing chromedriver alone would orphan it.
            let _ = self.http.delete(format!("{}/session/{}", self.base, self.session)).call();
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
