//! Compaction: older observations fold into a deterministic summary instead of vanishing.
//!
//! When the observations no longer fit their budget ([`super::context::Packed::dropped_observations`]),
//! the loop folds the oldest ones into the `packed` section: one line per folded step (the
//! call and a digest of its result) and three bounded lists carried over from everything
//! folded so far: the files recently read, the files edited, and the open questions (calls
//! that failed or were refused and were not redone successfully since). It folds until the
//! remaining observations take at most half their budget, so a compaction happens once in a
//! while rather than every turn, and between compactions the context's prefix stays stable
//! for prompt caches. The summary is a pure function of the observations, so traces replay
//! exactly. Without compaction (`no_context_compaction`), observations that do not fit are
//! dropped whole, as the pipeline's budgets alone would do.

use std::collections::BTreeMap;

use super::context::{Observation, Rendered};
use super::tokens;

/// Most entries each carried list keeps (the newest).
const RECENT_READS: usize = 6;
const EDITED_FILES: usize = 10;
const OPEN_QUESTIONS: usize = 5;

/// The folded part of a cell's history. Serializable for the cell's checkpoint.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Compactor {
    /// One line per folded step, oldest first.
    lines: Vec<String>,
    /// How many of the cell's observations (from the start) are folded.
    folded: usize,
    recent_reads: Vec<String>,
    edited_files: Vec<String>,
    /// (brief, line): the brief lets a later success of the same call resolve the question.
    open_questions: Vec<(String, String)>,
    /// Estimated tokens of the whole summary, measured once per fold (renders reuse it).
    full_tokens: usize,
}

/// What one compaction folded, for the `context_compacted` event.
#[derive(Debug, Clone, PartialEq)]
pub struct Folded {
    pub steps: Vec<u32>,
    pub tokens: usize,
    pub summary_tokens: usize,
    pub carried: BTreeMap<String, Vec<String>>,
}

impl Compactor {
    /// How many observations, from the start, are folded; the context shows the rest.
    pub fn folded(&self) -> usize {
        self.folded
    }

    pub fn is_empty(&self) -> bool {
        self.folded == 0
    }

    /// Folds the oldest unfolded observations until the rest take at most half of `budget`
    /// (always leaving the newest one). Returns None when nothing was folded.
    pub fn fold(&mut self, observations: &[Observation], budget: usize) -> Option<Folded> {
        let rest = &observations[self.folded..];
        let mut remaining: usize = rest.iter().map(|o| o.tokens).sum();
        let mut n = 0;
        while n + 1 < rest.len() && remaining > budget / 2 {
            remaining -= rest[n].tokens;
            n += 1;
        }
        if n == 0 {
            return None;
        }
        let folding = &rest[..n];
        for o in folding {
            self.absorb(o);
        }
        self.folded += n;
        self.full_tokens = tokens::estimate(&self.text(usize::MAX).0);
        Some(Folded {
            steps: folding.iter().map(|o| o.step).collect(),
            tokens: folding.iter().map(|o| o.tokens).sum(),
            summary_tokens: self.full_tokens,
            carried: self.carried(),
        })
    }

    fn absorb(&mut self, o: &Observation) {
        self.lines.push(format!("[step {}] {} -> {}", o.step, o.brief, o.digest));
        if let Some(path) = &o.read {
            push_bounded(&mut self.recent_reads, path.clone(), RECENT_READS);
        }
        for path in &o.modified {
            push_bounded(&mut self.edited_files, path.clone(), EDITED_FILES);
        }
        if o.status == "ok" {
            self.open_questions.retain(|(brief, _)| brief != &o.brief);
        } else {
            self.open_questions.retain(|(brief, _)| brief != &o.brief);
            self.open_questions.push((o.brief.clone(), format!("step {} {}: {}", o.step, o.brief, o.digest)));
            if self.open_questions.len() > OPEN_QUESTIONS {
                self.open_questions.remove(0);
            }
        }
    }

    /// The carried lists, by name, for `context_compacted`.
    pub fn carried(&self) -> BTreeMap<String, Vec<String>> {
        [
            ("recent_reads", self.recent_reads.clone()),
            ("edited_files", self.edited_files.clone()),
            ("open_questions", self.open_questions.iter().map(|(_, l)| l.clone()).collect()),
        ]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// The summary within `budget` tokens: the carried lists always (they are short and bounded),
    /// then as many of the newest step lines as fit; the oldest lines are dropped first and
    /// named `step-N` in the report.
    pub fn render(&self, budget: usize) -> Rendered {
        let (text, dropped) = self.text(budget);
        let raw_tokens = self.full_tokens;
        let tokens = tokens::estimate(&text);
        if tokens > budget {
            // Even the lists do not fit: clip, keeping the heading.
            let mut clipped = Rendered::clipped(&text, budget);
            clipped.raw_tokens = raw_tokens;
            clipped.dropped_blocks = dropped;
            clipped.reduced = true;
            return clipped;
        }
        Rendered { text, tokens, raw_tokens, reduced: !dropped.is_empty(), cut: 0, dropped_blocks: dropped }
    }

    fn text(&self, budget: usize) -> (String, Vec<String>) {
        if self.folded == 0 {
            return (String::new(), Vec::new());
        }
        let heading = format!("Earlier steps, compacted ({} steps):\n", self.lines.len());
        let mut lists = String::new();
        for (name, items) in [("Recent reads", &self.recent_reads), ("Edited files", &self.edited_files)] {
            if !items.is_empty() {
                lists.push_str(&format!("{name}: {}\n", items.join(", ")));
            }
        }
        for (_, line) in &self.open_questions {
            lists.push_str(&format!("Open question: {line}\n"));
        }
        let mut used = tokens::estimate(&heading) + tokens::estimate(&lists);
        let mut kept = 0;
        for line in self.lines.iter().rev() {
            let t = tokens::estimate(line) + 1;
            if used + t > budget {
                break;
            }
            used += t;
            kept += 1;
        }
        let first = self.lines.len() - kept;
        let dropped = self.lines[..first]
            .iter()
            .map(|l| l.split(']').next().unwrap_or("").trim_start_matches("[step ").to_string())
            .map(|n| format!("step-{n}"))
            .collect();
        let mut text = heading;
        for line in &self.lines[first..] {
            text.push_str(line);
            text.push('\n');
        }
        text.push_str(&lists);
        (text, dropped)
    }
}

/// Appends `item`, moving it to the end when present, and keeps the newest `max`.
fn push_bounded(list: &mut Vec<String>, item: String, max: usize) {
    list.retain(|x| x != &item);
    list.push(item);
    if list.len() > max {
        list.remove(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(step: u32, path: &str, lines: usize) -> Observation {
        let text: String = (1..=lines).map(|i| format!("{i:>5}| line {i} of {path}\n")).collect();
        let mut o = Observation::new(step, "read_file", format!("read_file {path}"), "ok", &text);
        o.read = Some(path.to_string());
        o
    }

    fn failed_edit(step: u32, path: &str) -> Observation {
        Observation::new(step, "edit_file", format!("edit_file {path}"), "failed", "`old` matches 0 times in a.py")
    }

    fn edit(step: u32, path: &str) -> Observation {
        let mut o = Observation::new(step, "edit_file", format!("edit_file {path}"), "ok", "edited");
        o.modified = vec![path.to_string()];
        o
    }

    #[test]
    fn folds_oldest_until_half_the_budget_and_carries_the_lists() {
        let obs = vec![read(1, "a.py", 40), failed_edit(2, "a.py"), read(3, "b.py", 40), read(4, "c.py", 40)];
        let budget = obs[2].tokens + obs[3].tokens;
        let mut c = Compactor::default();
        let f = c.fold(&obs, budget).expect("over half the budget");
        assert_eq!(f.steps, [1, 2, 3], "folds until the rest fits in half: only the newest stays");
        assert_eq!(c.folded(), 3);
        assert_eq!(f.tokens, obs[..3].iter().map(|o| o.tokens).sum::<usize>());
        assert_eq!(f.carried["recent_reads"], ["a.py", "b.py"]);
        assert_eq!(f.carried["open_questions"], ["step 2 edit_file a.py: failed: `old` matches 0 times in a.py"]);
        let text = c.render(1000).text;
        assert_eq!(
            text,
            "Earlier steps, compacted (3 steps):\n\
             [step 1] read_file a.py -> ok: 40 lines\n\
             [step 2] edit_file a.py -> failed: `old` matches 0 times in a.py\n\
             [step 3] read_file b.py -> ok: 40 lines\n\
             Recent reads: a.py, b.py\n\
             Open question: step 2 edit_file a.py: failed: `old` matches 0 times in a.py\n"
        );
        assert_eq!(f.summary_tokens, tokens::estimate(&text));
        // Nothing more to fold while the rest fits.
        assert_eq!(c.fold(&obs, budget), None);
    }

    #[test]
    fn a_later_success_resolves_the_open_question_and_edits_are_carried() {
        let obs = vec![failed_edit(1, "a.py"), edit(2, "a.py"), read(3, "a.py", 5)];
        let mut c = Compactor::default();
        c.fold(&obs, 0).unwrap();
        let carried = c.carried();
        assert!(!carried.contains_key("open_questions"), "{carried:?}");
        assert_eq!(carried["edited_files"], ["a.py"]);
    }

    #[test]
    fn the_summary_drops_its_oldest_lines_to_fit_and_names_them() {
        let obs: Vec<Observation> = (1..=30).map(|s| read(s, &format!("m{s}.py"), 3)).collect();
        let mut c = Compactor::default();
        c.fold(&obs, 0).unwrap();
        let r = c.render(80);
        assert!(r.tokens <= 80 && r.reduced, "{r:?}");
        assert_eq!(r.dropped_blocks.first().map(String::as_str), Some("step-1"));
        assert!(r.text.contains("[step 29]") && !r.text.contains("[step 1]"), "{}", r.text);
        assert!(r.text.contains("Recent reads: m24.py, m25.py, m26.py, m27.py, m28.py, m29.py"));
        // Deterministic: the same observations give the same summary.
        let mut again = Compactor::default();
        again.fold(&obs, 0).unwrap();
        assert_eq!(again, c);
    }
}
