//! `hcbench view [RUN_DIR | --latest]`: look at a run, or at the list of past runs, in a
//! browser.
//!
//! Every call first refreshes `<root>/reports/index.html` (the index of the runs under
//! `workspace/runs/`, [`crate::report::index`]). Then the page (the run's
//! `reports/report.html`, or the index without RUN_DIR) is opened from `file://` when a browser
//! can be started, since the page is self-contained and needs no server. Where none can (a
//! machine over SSH, a container) or with `--serve`, the page is served on 127.0.0.1
//! ([`crate::serve`]) and its URL printed, for a browser elsewhere through a forwarded port.
//!
//! Which browser, and how it is started without blocking the terminal, is [`crate::browser`].

use std::path::Path;

use super::CommandError;
use crate::browser::Browser;
use crate::cli::ViewArgs;
use crate::exit;
use crate::report::index::{self, INDEX_PATH, RUNS_DIR};
use crate::serve::{Mount, Server, percent_encode_path};
use crate::settings::Settings;

pub fn view(settings: &Settings, args: ViewArgs) -> Result<i32, CommandError> {
    let root = &settings.root;
    let runs_dir = root.join(RUNS_DIR);
    if let Some(dir) = &args.run_dir {
        check_run_dir(dir, &runs_dir)?;
    } else if !runs_dir.is_dir() {
        return Err(no_runs(&runs_dir));
    }
    // Only a project that has runs gets an index: `view /some/run` from elsewhere must not
    // leave a reports/ folder in the current directory.
    let index = if runs_dir.is_dir() { Some(index::write(root)?) } else { None };
    let run_dir = match (&args.run_dir, args.latest) {
        (Some(dir), _) => Some(dir.clone()),
        (None, true) => {
            let rows = index.as_ref().map(|(_, rows)| rows.as_slice()).unwrap_or_default();
            // Newest first; a run whose manifest cannot be read has no start time to compare.
            let newest = rows.iter().find(|r| !r.started_at.is_empty()).ok_or_else(|| match rows.len() {
                0 => no_runs(&runs_dir),
                n => CommandError::Usage(format!(
                    "no readable run under {}: {n} folder(s) there have no readable manifest.json (reports/index.html lists each with the reason); give a RUN_DIR",
                    runs_dir.display()
                )),
            })?;
            Some(newest.path.clone())
        }
        (None, false) => None,
    };
    let index_path = index.as_ref().map(|(p, _)| p.clone());
    if let Some((path, rows)) = &index {
        let unreadable = rows.iter().filter(|r| r.started_at.is_empty()).count();
        let note = if unreadable > 0 { format!(", {unreadable} unreadable") } else { String::new() };
        let runs = if rows.len() == 1 { "run" } else { "runs" };
        eprintln!("index of {} {runs}{note}: {}", rows.len(), path.display());
    }
    let page = match &run_dir {
        Some(dir) => dir.join("reports/report.html"),
        None => root.join(INDEX_PATH),
    };
    let has_page = page.is_file();
    if let Some(dir) = run_dir.as_ref().filter(|_| !has_page) {
        eprintln!(
            "{} has no reports/report.html yet (an interrupted run?): `hcbench report {}` renders it; the run directory is shown instead",
            dir.display(),
            dir.display()
        );
    }
    let browser = if args.no_open { None } else { Browser::find(&settings.env) };

    let serve_asked = args.serve || args.port.is_some();
    if !serve_asked && has_page {
        if let Some(browser) = &browser {
            match browser.open(&file_url(&page)) {
                Ok(()) => {
                    println!("opened {} with {}", page.display(), browser.program);
                    return Ok(exit::SUCCESS);
                }
                Err(e) => eprintln!("warning: cannot start {} ({e}); serving on 127.0.0.1 instead", browser.program),
            }
        } else if args.no_open {
            println!("{}", page.display());
            return Ok(exit::SUCCESS);
        }
    }
    if args.no_open && !serve_asked && !has_page {
        // Only printing was asked for, and there is no page to print: the folder will do.
        println!("{}", run_dir.as_deref().unwrap_or(root).display());
        return Ok(exit::SUCCESS);
    }
    serve(root, &runs_dir, run_dir.as_deref(), index_path.is_some(), has_page, args.port.unwrap_or(0), browser.as_ref())
}

/// Serves the run (and the index) until the process is stopped.
fn serve(
    root: &Path,
    runs_dir: &Path,
    run_dir: Option<&Path>,
    has_index: bool,
    has_page: bool,
    port: u16,
    browser: Option<&Browser>,
) -> Result<i32, CommandError> {
    let internal = |what: &str, path: &Path, e: std::io::Error| {
        CommandError::Internal(anyhow::anyhow!("cannot {what} {}: {e}", path.display()))
    };
    let mut mounts = Vec::new();
    if has_index {
        let reports = root.join("reports");
        mounts.push(Mount::new("/reports/", &reports).map_err(|e| internal("serve", &reports, e))?);
        mounts.push(Mount::new("/workspace/runs/", runs_dir).map_err(|e| internal("serve", runs_dir, e))?);
    }
    // The run's URL: under /workspace/runs/ when it lives there (so the index's relative links
    // and the report agree), else its own mount at /run/.
    let page_url = match run_dir {
        None => "/reports/index.html".to_string(),
        Some(dir) => {
            let canonical = dir.canonicalize().map_err(|e| internal("read", dir, e))?;
            let inside = mounts.iter().find(|m| m.prefix == "/workspace/runs/").and_then(|m| {
                canonical.strip_prefix(&m.dir).ok().map(|rel| format!("/workspace/runs/{}/", rel.display()))
            });
            let base = match inside {
                Some(base) => base,
                None => {
                    mounts.push(Mount::new("/run/", dir).map_err(|e| internal("serve", dir, e))?);
                    "/run/".to_string()
                }
            };
            let base = percent_encode_path(&base);
            if has_page { format!("{base}reports/report.html") } else { base }
        }
    };
    let server = Server::bind(port, mounts, &page_url).map_err(|e| {
        CommandError::Usage(format!(
            "cannot listen on 127.0.0.1:{port}: {e}; choose another --port, or leave it out for any free port"
        ))
    })?;
    let base = format!("http://127.0.0.1:{}", server.port());
    println!("serving on {base}/ (Ctrl-C stops)");
    match run_dir {
        Some(_) if has_page => println!("report: {base}{page_url}"),
        Some(_) => println!("run:    {base}{page_url}"),
        None => {}
    }
    if has_index {
        println!("index:  {base}/reports/index.html");
    }
    if let Some(browser) = browser
        && let Err(e) = browser.open(&format!("{base}{page_url}"))
    {
        eprintln!("warning: cannot start {} ({e}); open the URL above yourself", browser.program);
    }
    server.run().map_err(|e| CommandError::Internal(anyhow::anyhow!("serving failed: {e}")))?;
    Ok(exit::SUCCESS)
}

/// A RUN_DIR argument must exist and hold a manifest.json; each error names the path and the fix.
fn check_run_dir(dir: &Path, runs_dir: &Path) -> Result<(), CommandError> {
    let hint = format!(
        "give a run directory written by `hcbench run`, `matrix` or `ablate` (they live in {}/<run-id>), or use `hcbench view --latest`",
        runs_dir.display()
    );
    if !dir.exists() {
        return Err(CommandError::Usage(format!("no such run directory: {}; {hint}", dir.display())));
    }
    if !dir.join(crate::rundir::MANIFEST).is_file() {
        let what = if dir.is_dir() { "has no manifest.json" } else { "is a file" };
        return Err(CommandError::Usage(format!("{} is not a run directory (it {what}); {hint}", dir.display())));
    }
    Ok(())
}

fn no_runs(runs_dir: &Path) -> CommandError {
    CommandError::Usage(format!(
        "no runs yet under {}: `hcbench matrix` or `hcbench run` writes one there (or pass --root with the project that has them)",
        runs_dir.display()
    ))
}

/// `file://` URL of a page, absolute and percent-encoded.
fn file_url(page: &Path) -> String {
    let absolute = page.canonicalize().unwrap_or_else(|_| page.to_path_buf());
    format!("file://{}", percent_encode_path(&absolute.to_string_lossy()))
}
