//! Token estimates: how big a piece of context is, in the unit models are billed and limited by.
//!
//! hcbench talks to many models with different tokenizers, so an exact count for one of them
//! would still be an estimate for the others, and it would cost a tokenizer's vocabulary (megabytes)
//! and time on every turn. Budgets only need a stable, cheap, slightly pessimistic measure, so
//! this is a documented estimate of a BPE tokenizer on code and English (docs/context.md shows
//! how it compares with a real tokenizer):
//! - a run of letters and underscores (with the digits inside it) counts one token per started
//!   five bytes (`render` 2, `_catalog` 2: BPE vocabularies hold common words whole and split rare
//!   identifiers);
//! - a run of digits counts one token per started three digits (BPE vocabularies split numbers
//!   that way);
//! - one space before a word is free (it belongs to the word's token); other runs of spaces or
//!   tabs count one token per started four;
//! - a run of newlines counts one token;
//! - every other ASCII character (punctuation, operators) counts one, and so does every
//!   non-ASCII character.
//!
//! The estimate is a pure function of the text, so the same context always has the same size
//! and traces replay exactly.

/// Estimated tokens of `text`.
pub fn estimate(text: &str) -> usize {
    let b = text.as_bytes();
    let mut n = 0;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        if c.is_ascii_alphabetic() || c == b'_' {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            n += (i - start).div_ceil(5);
        } else if c.is_ascii_digit() {
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            n += (i - start).div_ceil(3);
        } else if c == b' ' || c == b'\t' {
            while i < b.len() && (b[i] == b' ' || b[i] == b'\t') {
                i += 1;
            }
            let before_word = i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_');
            let len = i - start - usize::from(before_word);
            n += len.div_ceil(4);
        } else if c == b'\n' || c == b'\r' {
            while i < b.len() && (b[i] == b'\n' || b[i] == b'\r') {
                i += 1;
            }
            n += 1;
        } else if c.is_ascii() {
            i += 1;
            n += 1;
        } else {
            // A non-ASCII character: skip its continuation bytes.
            i += 1;
            while i < b.len() && (b[i] & 0xC0) == 0x80 {
                i += 1;
            }
            n += 1;
        }
    }
    n
}

/// The longest prefix of `text` (cut at a character boundary) whose estimate fits `budget`,
/// and its estimate. Cuts at the last line end that fits when there is one, so a clipped block
/// does not end in half a line.
pub fn clip(text: &str, budget: usize) -> (&str, usize) {
    let total = estimate(text);
    if total <= budget {
        return (text, total);
    }
    // The estimate is monotone in the prefix length up to one token at the cut, so a binary
    // search over character boundaries finds the longest fitting prefix in O(n log n).
    let bounds: Vec<usize> = text.char_indices().map(|(i, _)| i).chain([text.len()]).collect();
    let (mut lo, mut hi) = (0, bounds.len() - 1);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if estimate(&text[..bounds[mid]]) <= budget { lo = mid } else { hi = mid - 1 }
    }
    let mut end = bounds[lo];
    if let Some(nl) = text[..end].rfind('\n')
        && nl > 0
    {
        end = nl + 1;
    }
    let prefix = &text[..end];
    (prefix, estimate(prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_follow_the_documented_rules() {
        assert_eq!(estimate(""), 0);
        assert_eq!(estimate("render"), 2);
        assert_eq!(estimate("def page(items, size):"), 8, "def page ( items , size ) :");
        assert_eq!(estimate("12345"), 2);
        assert_eq!(estimate("        return x"), 2 + 2 + 1);
        assert_eq!(estimate("a\n\n\nb"), 3);
        assert_eq!(estimate("héllo"), 1 + 1 + 1);
        let line = "    total = sum(item.price for item in items)\n";
        assert_eq!(estimate(&line.repeat(10)), 10 * estimate(line), "additive across whole lines");
    }

    #[test]
    fn clip_keeps_the_longest_fitting_prefix_at_a_line_end() {
        let text = "alpha beta\ngamma delta\nepsilon zeta\n";
        let (whole, n) = clip(text, 100);
        assert_eq!((whole, n), (text, estimate(text)));
        let (part, n) = clip(text, estimate("alpha beta\ngamma delta\n") + 1);
        assert_eq!(part, "alpha beta\ngamma delta\n");
        assert_eq!(n, estimate(part));
        let (none, n) = clip(text, 0);
        assert_eq!((none, n), ("", 0));
        // A single long line is cut inside the line, at a character boundary.
        let (cut, n) = clip("ééééééééé", 4);
        assert_eq!((cut, n), ("éééé", 4));
    }
}
