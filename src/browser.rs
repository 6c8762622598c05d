//! Starting the user's browser on a page for `hcbench view`.
//!
//! A browser is started only when one is named (`$BROWSER`) or a display exists for
//! `xdg-open`: on a terminal without a display `xdg-open` would start a text browser in this
//! very terminal. It is started detached (stdin and output closed, its own process group) and
//! never waited for, so the command returns at once; whether the browser then shows the page
//! is its business (xdg-open reports failures only on its own stderr).

use std::process::{Command, Stdio};

use crate::environment::Environment;

/// How to start a browser: `$BROWSER` (the first of its `:`-separated commands; `%s` stands for
/// the URL, else the URL is appended), else `xdg-open` (`open` on macOS) when there is a
/// display to show a window on.
pub struct Browser {
    pub program: String,
    args: Vec<String>,
}

impl Browser {
    pub fn find(env: &Environment) -> Option<Browser> {
        if let Some(value) = env.get("BROWSER") {
            let first = value.split(':').find(|c| !c.trim().is_empty())?;
            let mut words = first.split_whitespace().map(str::to_string);
            let program = words.next()?;
            return Some(Browser { program, args: words.collect() });
        }
        if cfg!(target_os = "macos") {
            return Some(Browser { program: "open".into(), args: Vec::new() });
        }
        let display = env.get("DISPLAY").is_some() || env.get("WAYLAND_DISPLAY").is_some();
        let on_path = env.get("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("xdg-open").is_file()));
        (display && on_path).then(|| Browser { program: "xdg-open".into(), args: Vec::new() })
    }

    /// Starts the browser on `url` without waiting for it.
    pub fn open(&self, url: &str) -> std::io::Result<()> {
        use std::os::unix::process::CommandExt as _;
        let mut args: Vec<String> = self.args.iter().map(|a| a.replace("%s", url)).collect();
        if !self.args.iter().any(|a| a.contains("%s")) {
            args.push(url.to_string());
        }
        let mut child = Command::new(&self.program)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own process group: Ctrl-C on the server must not take the browser with it.
            .process_group(0)
            .spawn()?;
        // Reaped in the background while this process lives (the server); otherwise it
        // simply outlives us.
        std::thread::spawn(move || child.wait());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> Environment {
        let root = tempfile::tempdir().unwrap();
        Environment::new(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())), root.path()).unwrap()
    }

    #[test]
    fn browser_is_the_first_command_and_percent_s_is_the_url() {
        let b = Browser::find(&env(&[("BROWSER", "firefox --new-window %s:chromium")])).unwrap();
        assert_eq!(
            (b.program.as_str(), b.args.as_slice()),
            ("firefox", &["--new-window".to_string(), "%s".into()][..])
        );
    }

    #[test]
    fn no_display_and_no_browser_means_none() {
        if cfg!(target_os = "macos") {
            return;
        }
        assert!(Browser::find(&env(&[("PATH", "/usr/bin:/bin")])).is_none(), "xdg-open needs a display");
        assert!(Browser::find(&env(&[("BROWSER", ""), ("DISPLAY", "")])).is_none());
    }
}
