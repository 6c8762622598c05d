//! The `hcbench` binary: parse, run, map the result to an exit code. Nothing else.

fn main() {
    // A cell's supervisor (inside its sandbox): before anything else, and nothing else.
    if std::env::args_os().nth(1).is_some_and(|a| a == hcbench::supervisor::ARG) {
        hcbench::supervisor::serve();
    }
    restore_sigpipe();
    hcbench::sandbox::this_binary_supervises();
    hcbench::sandbox::close_inherited_descriptors();
    let cli = hcbench::cli::parse();
    init_tracing(cli.verbose);
    let code = match hcbench::commands::dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", describe(&e));
            e.exit_code()
        }
    };
    std::process::exit(code);
}

/// The error and each cause its message does not already include (most errors here embed their
/// source's text, and printing the chain again would repeat it).
fn describe(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let part = c.to_string();
        if !text.contains(&part) {
            text = format!("{text}: {part}");
        }
        cause = c.source();
    }
    text
}

fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // While the gate's test-split cells run, nothing is logged at any level (docs/gate.md).
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    // Asked on every event (`sometimes`), never cached per call site: the answer changes.
    let private = tracing_subscriber::filter::DynFilterFn::new(|_, _| !hcbench::gate::private::logs_silenced())
        .with_callsite_filter(|_| tracing::subscriber::Interest::sometimes());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour_on_stderr())
        .finish()
        .with(private)
        .init();
}

/// Colour only for a person at a terminal: logs piped to a file or a CI log must not carry
/// escape codes, and NO_COLOR (no-color.org: set and not empty) turns colour off everywhere.
fn colour_on_stderr() -> bool {
    use std::io::IsTerminal as _;
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    !no_color && std::io::stderr().is_terminal()
}

/// `hcbench list | head` must end quietly when the reader goes away, as other Unix tools do,
/// instead of panicking in `println!`: Rust starts programs with SIGPIPE ignored, so put the
/// default (terminate) back before anything is printed.
fn restore_sigpipe() {
    use nix::sys::signal::{SigHandler, Signal, signal};
    // SAFETY: called first thing in main, before any thread exists; SIG_DFL installs no handler code.
    let _ = unsafe { signal(Signal::SIGPIPE, SigHandler::SigDfl) };
}
