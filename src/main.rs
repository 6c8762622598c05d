//! The `hcbench` binary: parse, run, map the result to an exit code. Nothing else.

use clap::Parser;

fn main() {
    load_dotenv_settings();
    let cli = hcbench::cli::Cli::parse();
    init_tracing(cli.verbose);
    let code = match hcbench::commands::dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            e.exit_code()
        }
    };
    std::process::exit(code);
}

fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
}

/// Loads hcbench settings (HCBENCH_ROOT, HCBENCH_MODELS, ...) from `./.env` before the command
/// line's defaults are computed, without overriding the real environment. Credentials in the
/// same file are not exported: child processes must never see them, so the model profiles
/// read them from `.env` themselves when they need them.
fn load_dotenv_settings() {
    let Ok(iter) = dotenvy::from_path_iter(".env") else { return };
    for (key, value) in iter.flatten() {
        if std::env::var_os(&key).is_none() && !hcbench::process::is_secret_var(&key) {
            // SAFETY: called first thing in main, before any thread exists.
            unsafe { std::env::set_var(key, value) };
        }
    }
}
