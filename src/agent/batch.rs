//! Scheduling the calls of one reply: read-only calls together, everything else alone.
//!
//! A model may ask for several tool calls in one reply (native `tool_calls`, or a script's
//! `batch` step). Reads cannot change what another read sees, so a run of consecutive
//! read-only calls (list_files, read_file, search_code, repo_map) runs concurrently; a call
//! that writes or runs a command (edit_file, write_file, run_tests, run_command, finish) runs
//! alone, after every call before it has finished, and before any call after it starts, so the
//! workspace each call sees is the one the model's order implies. Results go back in the order
//! the model asked, whatever order they finished in.
//!
//! This module only plans and joins; the agent loop (`super::work`) gates, runs and records
//! each group, so every call still passes the one permission gate and gets its own events.
//! The plan is a pure function of the actions, which keeps the trace's event order a function
//! of the reply alone: replay and reports see the same sequence whatever the timing was.

use std::future::Future;
use std::ops::Range;

use crate::action::{Action, Call};

/// Most calls of one reply that run. A reply is one model turn whatever it holds; without a cap
/// one reply could do a whole cell's work in one step and flood the context with results. The
/// calls past it are refused, each with its own events, and the model is told once to ask
/// again (docs/architecture.md, "Batches").
pub const MAX_BATCH: usize = 16;

/// One group of a reply's calls, by index into the reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Group {
    /// Consecutive calls that run concurrently: read-only calls, and calls that will be refused
    /// anyway (unknown tools, malformed arguments), which run nothing.
    Together(Range<usize>),
    /// One call that writes or runs a command.
    Alone(usize),
    /// The calls past [`MAX_BATCH`]: refused without running.
    OverCap(Range<usize>),
}

/// A reply's schedule: its groups, in the model's order, and its calls as parsed.
pub(crate) struct Plan {
    pub(crate) groups: Vec<Group>,
    /// Each call under the cap parsed ([`Call::from_action`]), by index into the reply, for
    /// its gate to take: a call is parsed once, for the plan and its gate alike (parsed by
    /// each, a write's content was copied out of the reply twice). The calls past the cap are
    /// never parsed.
    pub(crate) calls: Vec<Option<Result<Call, String>>>,
}

/// Splits a reply into groups, in the model's order.
pub(crate) fn plan(actions: &[Action]) -> Plan {
    let runnable = actions.len().min(MAX_BATCH);
    let calls: Vec<Option<Result<Call, String>>> =
        actions[..runnable].iter().map(|a| Some(Call::from_action(a))).collect();
    let mut groups = Vec::new();
    let mut start = 0;
    for (i, call) in calls.iter().enumerate() {
        let alone = matches!(call, Some(Ok(c)) if !c.tool().is_read_only());
        if alone {
            if start < i {
                groups.push(Group::Together(start..i));
            }
            groups.push(Group::Alone(i));
            start = i + 1;
        }
    }
    if start < runnable {
        groups.push(Group::Together(start..runnable));
    }
    if runnable < actions.len() {
        groups.push(Group::OverCap(runnable..actions.len()));
    }
    Plan { groups, calls }
}

/// Runs futures concurrently on the current task and returns their outputs in the order given
/// (not the order they finished): `futures_util`'s `join_all`. The read tools run on the
/// blocking pool, so on this task they only wait, and their work overlaps on the pool's threads.
pub(crate) async fn join_in_order<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    futures_util::future::join_all(futures).await
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use serde_json::json;

    use super::*;

    fn read(path: &str) -> Action {
        Action::new("read_file", json!({"path": path}))
    }

    fn edit() -> Action {
        Action::new("edit_file", json!({"path": "a.py", "old": "x", "new": "y"}))
    }

    #[test]
    fn reads_group_together_and_each_mutation_stands_alone_in_order() {
        let reply = vec![
            read("a.py"),
            Action::new("list_files", json!({})),
            edit(),
            Action::new("run_tests", json!({})),
            read("b.py"),
            Action::new("no_such_tool", json!({})),
            Action::finish("done"),
        ];
        let planned = plan(&reply);
        assert_eq!(
            planned.groups,
            vec![Group::Together(0..2), Group::Alone(2), Group::Alone(3), Group::Together(4..6), Group::Alone(6)]
        );
        let parsed: Vec<_> = reply.iter().map(|a| Some(Call::from_action(a))).collect();
        assert_eq!(planned.calls, parsed, "every call parsed, in order, as the gate would");
        assert_eq!(plan(&[edit()]).groups, vec![Group::Alone(0)]);
        assert_eq!(plan(&[]).groups, vec![]);
    }

    #[test]
    fn calls_past_the_cap_are_one_refused_group() {
        let reply: Vec<Action> = (0..50).map(|i| read(&format!("f{i}.py"))).collect();
        let planned = plan(&reply);
        assert_eq!(planned.groups, vec![Group::Together(0..MAX_BATCH), Group::OverCap(MAX_BATCH..50)]);
        assert_eq!(planned.calls.len(), MAX_BATCH, "the calls past the cap are not parsed");
        let mut reply: Vec<Action> = (0..MAX_BATCH).map(|_| edit()).collect();
        reply.push(read("late.py"));
        let groups = plan(&reply).groups;
        assert_eq!(groups.len(), MAX_BATCH + 1);
        assert_eq!(groups.last(), Some(&Group::OverCap(MAX_BATCH..MAX_BATCH + 1)));
    }

    /// The reads of a group really overlap: each waits at a barrier that opens only when all of
    /// them have started, so run one at a time they would never finish (the timeout says so).
    /// The log then shows every start before the first end, with no clock involved.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_group_runs_concurrently_and_returns_results_in_the_order_asked() {
        let n = 4;
        let barrier = Arc::new(tokio::sync::Barrier::new(n));
        let log = Arc::new(Mutex::new(Vec::new()));
        let futures: Vec<_> = (0..n)
            .map(|i| {
                let (barrier, log) = (barrier.clone(), log.clone());
                async move {
                    log.lock().unwrap().push(format!("start {i}"));
                    barrier.wait().await;
                    // The last asked finishes first: the order of results must not follow.
                    for _ in 0..(n - i) * 3 {
                        tokio::task::yield_now().await;
                    }
                    log.lock().unwrap().push(format!("end {i}"));
                    i * 10
                }
            })
            .collect();
        let results = tokio::time::timeout(std::time::Duration::from_secs(10), join_in_order(futures))
            .await
            .expect("the reads ran one at a time: the barrier never opened");
        assert_eq!(results, vec![0, 10, 20, 30]);
        let log = log.lock().unwrap();
        let first_end = log.iter().position(|e| e.starts_with("end")).unwrap();
        assert_eq!(first_end, n, "every read started before the first ended: {log:?}");
        assert_eq!(log[n], "end 3", "the last asked finished first: {log:?}");
    }

    /// A mutation between reads: the groups run one after another, so the edit starts only
    /// after both reads before it ended, and the read after it starts only after it ended.
    #[tokio::test]
    async fn a_mutation_runs_alone_after_the_reads_before_it() {
        let reply = vec![read("a.py"), read("b.py"), edit(), read("c.py")];
        let log = Arc::new(Mutex::new(Vec::new()));
        for group in plan(&reply).groups {
            let indices: Vec<usize> = match group {
                Group::Together(r) => r.collect(),
                Group::Alone(i) => vec![i],
                Group::OverCap(_) => unreachable!(),
            };
            let futures: Vec<_> = indices
                .into_iter()
                .map(|i| {
                    let log = log.clone();
                    async move {
                        log.lock().unwrap().push(format!("start {i}"));
                        tokio::task::yield_now().await;
                        log.lock().unwrap().push(format!("end {i}"));
                    }
                })
                .collect();
            join_in_order(futures).await;
        }
        let log = log.lock().unwrap().join(", ");
        assert_eq!(log, "start 0, start 1, end 0, end 1, start 2, end 2, start 3, end 3");
    }
}
