//! `hcbench trend` and `hcbench history import`.

use std::time::SystemTime;

use super::CommandError;
use crate::cli::{Format, HistoryCommand, TrendArgs};
use crate::history::{self, HistoryError};
use crate::settings::Settings;
use crate::trend::{self, TrendError, TrendOptions};

pub fn trend(settings: &Settings, args: TrendArgs) -> Result<i32, CommandError> {
    if args.window == 0 || args.flip_streak == 0 {
        return Err(CommandError::Usage(
            "--window and --flip-streak count runs: give 1 or more (defaults 5 and 3)".into(),
        ));
    }
    let dir = settings.history_dir(args.history.as_deref());
    let since = match &args.since {
        Some(s) => Some((s.clone(), parse_since(s)?)),
        None => None,
    };
    let loaded = history::load(&dir)?;
    for w in loaded.warnings() {
        eprintln!("warning: {w}");
    }
    let opts = TrendOptions {
        history: dir.display().to_string(),
        since,
        profiles: args.profiles,
        benchmark: args.benchmark,
        window: args.window,
        flip_streak: args.flip_streak,
        control_profile: args.control,
        fail_on_regression: args.fail_on_regression,
    };
    let report = trend::analyze(&loaded, &opts, SystemTime::now()).map_err(|e| match e {
        TrendError::Empty { .. } => CommandError::Usage(e.to_string()),
        TrendError::Polars(_) => CommandError::Internal(anyhow::Error::new(e)),
    })?;
    let out = args.out.unwrap_or_else(|| settings.root.join("reports/trend"));
    let mut written = crate::report::trend::write_all(&out, &report)?;
    let quarantine = crate::trend::quarantine::Quarantine::from_report(&report).write(&out).map_err(|e| {
        CommandError::Internal(anyhow::anyhow!("cannot write the quarantine list in {}: {e}", out.display()))
    })?;
    written.push(quarantine);
    match args.format {
        Format::Table => print!("{}", crate::report::trend::terminal(&report)),
        Format::Json => println!("{}", serde_json::to_string_pretty(&report).map_err(anyhow::Error::new)?),
    }
    for p in written {
        eprintln!("wrote {}", p.display());
    }
    Ok(report.verdict.exit_code)
}

/// `30d`, `12h`, `2w`, `90m`, or anything humantime reads (`1day 12h`).
fn parse_since(s: &str) -> Result<std::time::Duration, CommandError> {
    let t = s.trim();
    let expanded = match t.strip_suffix('w').and_then(|n| n.parse::<u64>().ok()) {
        Some(weeks) => format!("{}d", weeks * 7),
        None => t.to_string(),
    };
    humantime::parse_duration(&expanded)
        .map_err(|e| CommandError::Usage(format!("--since {s:?}: {e}; give a duration such as 30d, 12h or 2w")))
}

pub fn history(settings: &Settings, cmd: HistoryCommand) -> Result<i32, CommandError> {
    match cmd {
        HistoryCommand::Import(args) => {
            let dir = settings.history_dir(args.history.as_deref());
            for run in &args.run_dirs {
                let (file, rows) = history::import_run(run, &dir)?;
                eprintln!("imported {rows} cell(s) of {} into {}", run.display(), file.display());
            }
            Ok(crate::exit::SUCCESS)
        }
    }
}

impl From<history::ImportError> for CommandError {
    fn from(e: history::ImportError) -> Self {
        match e {
            history::ImportError::Run(e) => e.into(),
            history::ImportError::History(e) => e.into(),
        }
    }
}

impl From<HistoryError> for CommandError {
    fn from(e: HistoryError) -> Self {
        match e {
            HistoryError::Write { .. } => CommandError::Internal(anyhow::Error::new(e)),
            _ => CommandError::Usage(e.to_string()),
        }
    }
}
