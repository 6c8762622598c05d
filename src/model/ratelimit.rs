//! Per-profile rate limiting: how many requests of one profile may be in flight at once.
//!
//! One [`Limiter`] exists per profile per process ([`limiter_for`]), shared by every cell of the
//! profile, so `--jobs 16` against an API that allows 4 concurrent requests queues the other
//! cells' requests here instead of collecting 429s. The limit adapts like TCP congestion
//! control (AIMD):
//!
//! - it starts at the profile's `max_concurrency` and never exceeds it;
//! - a 429 halves it (not below 1), at most once per "window": a 429 from a request that
//!   started before the last decrease does not decrease again, so a burst of 429s from
//!   requests that were already in flight counts as one signal;
//! - a 429 with `Retry-After` also pauses new requests of the profile until then, since the
//!   server said when it will accept more;
//! - each success adds `1/limit`, so the limit grows back by about one per window of successes.
//!
//! A permit is held only while a request is on the wire, never while a retry waits.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

#[derive(Debug)]
pub(crate) struct Limiter {
    max: usize,
    state: Mutex<State>,
    notify: Notify,
}

#[derive(Debug)]
struct State {
    /// The current limit; fractional so additive increase can be gradual.
    limit: f64,
    in_flight: usize,
    /// Incremented by every decrease; requests remember the epoch they started in.
    epoch: u64,
    paused_until: Option<Instant>,
}

/// One in-flight request. Dropping it frees the slot.
#[derive(Debug)]
pub(crate) struct Permit {
    limiter: Arc<Limiter>,
    epoch: u64,
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut s = self.limiter.lock();
        s.in_flight = s.in_flight.saturating_sub(1);
        drop(s);
        self.limiter.notify.notify_waiters();
    }
}

impl Limiter {
    pub(crate) fn new(max: usize) -> Limiter {
        let max = max.max(1);
        Limiter {
            max,
            state: Mutex::new(State { limit: max as f64, in_flight: 0, epoch: 0, paused_until: None }),
            notify: Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the counters inconsistent in a way that
        // matters more than stopping all requests would, so a poisoned lock is used as is.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The current limit, rounded down (at least 1).
    pub(crate) fn limit(&self) -> usize {
        (self.lock().limit.floor() as usize).max(1)
    }

    /// Waits for a free slot (and for any pause to end).
    pub(crate) async fn acquire(self: &Arc<Self>) -> Permit {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            // Register interest before checking, so a release between the check and the await
            // is not missed.
            notified.as_mut().enable();
            let wait_until = {
                let mut s = self.lock();
                match s.paused_until {
                    Some(until) if until > Instant::now() => Some(until),
                    _ => {
                        s.paused_until = None;
                        let limit = (s.limit.floor() as usize).max(1);
                        if s.in_flight < limit {
                            s.in_flight += 1;
                            return Permit { limiter: self.clone(), epoch: s.epoch };
                        }
                        None
                    }
                }
            };
            match wait_until {
                Some(until) => tokio::time::sleep_until(until).await,
                None => notified.await,
            }
        }
    }

    /// A request of this permit succeeded: additive increase.
    pub(crate) fn on_success(&self, _permit: &Permit) {
        let mut s = self.lock();
        s.limit = (s.limit + 1.0 / s.limit).min(self.max as f64);
        drop(s);
        self.notify.notify_waiters();
    }

    /// A request of this permit was throttled (429): multiplicative decrease, once per window,
    /// and a pause for everyone when the server said how long to wait.
    pub(crate) fn on_throttle(&self, permit: &Permit, retry_after: Option<Duration>) {
        let mut s = self.lock();
        if permit.epoch == s.epoch {
            s.limit = (s.limit / 2.0).max(1.0);
            s.epoch += 1;
        }
        if let Some(wait) = retry_after {
            let until = Instant::now() + wait;
            if s.paused_until.is_none_or(|p| p < until) {
                s.paused_until = Some(until);
            }
        }
    }
}

/// The process-wide limiter of a profile. Profiles are resolved once per command, but a
/// command may resolve the same name more than once (matrix, ablations); all get one limiter.
pub(crate) fn limiter_for(profile: &str, max_concurrency: usize) -> Arc<Limiter> {
    type Registry = Mutex<HashMap<(String, usize), Arc<Limiter>>>;
    static LIMITERS: OnceLock<Registry> = OnceLock::new();
    let map = LIMITERS.get_or_init(Default::default);
    let mut map = map.lock().unwrap_or_else(|p| p.into_inner());
    map.entry((profile.to_string(), max_concurrency)).or_insert_with(|| Arc::new(Limiter::new(max_concurrency))).clone()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test]
    async fn never_more_than_the_limit_in_flight() {
        let limiter = Arc::new(Limiter::new(3));
        let now = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..20 {
            let (limiter, now, peak) = (limiter.clone(), now.clone(), peak.clone());
            tasks.push(tokio::spawn(async move {
                let permit = limiter.acquire().await;
                let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(n, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
                now.fetch_sub(1, Ordering::SeqCst);
                limiter.on_success(&permit);
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(peak.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn throttling_halves_once_per_window_and_success_grows_back() {
        let limiter = Arc::new(Limiter::new(8));
        let permits: Vec<Permit> = acquire_n(&limiter, 8).await;
        // Eight requests of the same window all see a 429: one decrease, not eight.
        for p in &permits {
            limiter.on_throttle(p, None);
        }
        assert_eq!(limiter.limit(), 4);
        drop(permits);
        let p = limiter.acquire().await;
        limiter.on_throttle(&p, None);
        assert_eq!(limiter.limit(), 2, "a request of the new window decreases again");
        for _ in 0..40 {
            limiter.on_success(&p);
        }
        assert_eq!(limiter.limit(), 8, "additive increase returns to max_concurrency and stops there");
    }

    #[tokio::test]
    async fn retry_after_pauses_every_request_of_the_profile() {
        let limiter = Arc::new(Limiter::new(4));
        let p = limiter.acquire().await;
        limiter.on_throttle(&p, Some(Duration::from_millis(150)));
        drop(p);
        let t0 = std::time::Instant::now();
        let _q = limiter.acquire().await;
        assert!(t0.elapsed() >= Duration::from_millis(140), "waited {:?}", t0.elapsed());
    }

    #[test]
    fn one_limiter_per_profile_per_process() {
        let a = limiter_for("test-shared-profile", 2);
        let b = limiter_for("test-shared-profile", 2);
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &limiter_for("test-other-profile", 2)));
    }

    async fn acquire_n(limiter: &Arc<Limiter>, n: usize) -> Vec<Permit> {
        let mut out = Vec::new();
        for _ in 0..n {
            out.push(limiter.acquire().await);
        }
        out
    }
}
