//! `hcbench completions SHELL` and `hcbench man`: text generated from the command line itself
//! ([`crate::cli::command`], the parser with its help texts), so a completion script or a man
//! page can never offer a flag hcbench does not take. Both run before the project root and its
//! `.env` are read: they must work anywhere, in a package's build script or a fresh shell.

use std::path::Path;

use anyhow::Context as _;

use super::CommandError;
use crate::cli::{CompletionsArgs, ManArgs};
use crate::exit;

/// Prints the completion script for `args.shell` to stdout.
pub fn completions(args: &CompletionsArgs) -> Result<i32, CommandError> {
    let mut cmd = crate::cli::command();
    let mut out = std::io::stdout().lock();
    clap_complete::generate(args.shell, &mut cmd, "hcbench", &mut out);
    Ok(exit::SUCCESS)
}

/// Prints hcbench.1, or writes hcbench.1 and `hcbench-COMMAND.1` for every command (and
/// `hcbench-history-import.1` for nested ones) into `--out`, naming each file on stderr.
pub fn man(args: &ManArgs) -> Result<i32, CommandError> {
    // Built, so that each subcommand carries its full name (`hcbench-matrix`) for its page.
    let mut cmd = crate::cli::command().disable_help_subcommand(true);
    cmd.build();
    let Some(dir) = &args.out else {
        let page = render(&clap_mangen::Man::new(cmd))?;
        use std::io::Write as _;
        std::io::stdout().lock().write_all(&page).context("cannot write the man page to stdout")?;
        return Ok(exit::SUCCESS);
    };
    std::fs::create_dir_all(dir)
        .map_err(|e| CommandError::Usage(format!("--out {}: cannot create the folder: {e}", dir.display())))?;
    write_pages(cmd, dir)?;
    Ok(exit::SUCCESS)
}

/// The page of `cmd`, then one per visible subcommand, recursively.
fn write_pages(cmd: clap::Command, dir: &Path) -> Result<(), CommandError> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub.clone(), dir)?;
    }
    let man = clap_mangen::Man::new(cmd);
    let file = dir.join(man.get_filename());
    crate::util::write_atomic(&file, &render(&man)?).with_context(|| format!("cannot write {}", file.display()))?;
    eprintln!("wrote {}", file.display());
    Ok(())
}

fn render(man: &clap_mangen::Man) -> Result<Vec<u8>, CommandError> {
    let mut page = Vec::new();
    man.render(&mut page).context("cannot render the man page")?;
    Ok(page)
}
