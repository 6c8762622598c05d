//! The circuit breaker of one HTTP profile: after a run of consecutive connection failures the
//! server is taken to be down, and the profile sends nothing more for the rest of the command.
//!
//! Without it a run against a server that is down makes every attempt of every remaining cell
//! (cells x (max_retries + 1) connection failures, each after its backoff) before it ends.
//! With it the count of consecutive attempts that got no HTTP response at all (connection
//! refused, reset, closed; not a slow reply, not an HTTP error status) is kept per profile,
//! across all its cells; reaching `max_connect_failures` opens the breaker. From then on every
//! request of the profile fails at once as `provider_error` with one message, the engine starts
//! no more cells of the profile (they are recorded as `provider_error` without running), and
//! `--resume` can run them later. Any HTTP response resets the count: a server that answers,
//! even with 500, is up, and its faults are the retry policy's business.
//!
//! The breaker does not close again within the command. Probing a dead server from a benchmark
//! run would trade a clear, resumable result for one that depends on when the server came back.

use std::sync::Mutex;

#[derive(Debug)]
pub(crate) struct Breaker {
    profile: String,
    /// Consecutive connection failures that open the breaker; 0 = never.
    threshold: u32,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    consecutive: u32,
    /// The message every request gets once the breaker is open.
    open: Option<String>,
}

impl Breaker {
    pub(crate) fn new(profile: &str, threshold: u32) -> Breaker {
        Breaker { profile: profile.to_string(), threshold, state: Mutex::new(State::default()) }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The reason the profile is unavailable, when the breaker is open.
    pub(crate) fn open(&self) -> Option<String> {
        self.state().open.clone()
    }

    /// An attempt got an HTTP response (any status): the server is reachable.
    pub(crate) fn on_response(&self) {
        let mut s = self.state();
        if s.open.is_none() {
            s.consecutive = 0;
        }
    }

    /// An attempt got no HTTP response (`detail` says why, already free of secrets). Returns
    /// true when this failure opened the breaker.
    pub(crate) fn on_connection_failure(&self, url: &str, detail: &str) -> bool {
        let mut s = self.state();
        if self.threshold == 0 || s.open.is_some() {
            return false;
        }
        s.consecutive += 1;
        if s.consecutive < self.threshold {
            return false;
        }
        s.open = Some(format!(
            "profile `{}` is unreachable: {} consecutive connection failures on {url} (last: {detail}); \
             its remaining requests and cells were not run. Start the server or fix base_url, then run them with \
             `hcbench matrix --resume RUN_DIR --retry-errors` (max_connect_failures in the models file sets the threshold; 0 turns the breaker off)",
            self.profile, s.consecutive
        ));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_failures_open_it_once_and_a_response_resets_the_count() {
        let b = Breaker::new("p", 3);
        assert!(!b.on_connection_failure("http://x", "refused"));
        assert!(!b.on_connection_failure("http://x", "refused"));
        b.on_response();
        assert!(!b.on_connection_failure("http://x", "refused"));
        assert!(!b.on_connection_failure("http://x", "refused"));
        assert!(b.open().is_none(), "a response in between resets the count");
        assert!(b.on_connection_failure("http://x", "connection refused"), "the third in a row opens it");
        let message = b.open().unwrap();
        assert!(message.contains("profile `p` is unreachable: 3 consecutive connection failures"), "{message}");
        assert!(message.contains("last: connection refused"), "{message}");
        assert!(!b.on_connection_failure("http://x", "refused"), "it opens once");
        b.on_response();
        assert!(b.open().is_some(), "it stays open for the rest of the command");
    }

    #[test]
    fn a_threshold_of_zero_never_opens() {
        let b = Breaker::new("p", 0);
        for _ in 0..100 {
            assert!(!b.on_connection_failure("http://x", "refused"));
        }
        assert!(b.open().is_none());
    }
}
