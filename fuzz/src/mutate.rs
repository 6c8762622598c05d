//! Byte-level mutation of corpus inputs: the half of the input generator that needs no
//! knowledge of the format beyond a dictionary of its tokens.
//!
//! There is no coverage feedback on the stable toolchain without instrumentation, so the
//! mutations lean on what breaks text parsers in practice: the format's own keys and
//! punctuation in the wrong places, numbers at their limits, splices of two valid files, and a
//! chunk repeated many times (the cheapest way to find quadratic time or unbounded growth).

/// Numbers at the edges of every integer and float type a parser might map them to.
const NUMBERS: &[&str] = &[
    "0",
    "-0",
    "1",
    "-1",
    "255",
    "256",
    "65536",
    "2147483647",
    "-2147483649",
    "4294967295",
    "4294967296",
    "9007199254740993",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "1e308",
    "1e309",
    "-1e309",
    "5e-324",
    "0.1",
    "1.5",
    "NaN",
    "nan",
    ".nan",
    "inf",
    "-inf",
    ".inf",
    "Infinity",
    "0x7f",
    "0o17",
    "1_000",
    "99999999999999999999999999999",
];

/// Single bytes that are syntax in JSON, YAML or TOML, or that trip UTF-8 handling.
const SPECIAL_BYTES: &[u8] =
    b"\0\n\r\t \"'`\\{}[]:,#=&*!|>-?%@.$\x7f\xc3\xa9\xe2\x80\xa8\xef\xbb\xbf\xf0\x9f\x98\x80\xff\xfe";

pub struct Mutator {
    pub rng: fastrand::Rng,
    dict: Vec<Vec<u8>>,
    max_len: usize,
}

impl Mutator {
    pub fn new(seed: u64, dict: Vec<Vec<u8>>, max_len: usize) -> Mutator {
        Mutator { rng: fastrand::Rng::with_seed(seed), dict, max_len }
    }

    /// Applies a stack of 1 to 16 mutations to `data`; `other` is another corpus entry for
    /// splicing.
    pub fn mutate(&mut self, data: &mut Vec<u8>, other: &[u8]) {
        let n = 1 << self.rng.u32(0..5);
        let n = self.rng.u32(1..=n);
        for _ in 0..n {
            self.one(data, other);
        }
        data.truncate(self.max_len);
    }

    fn pos(&mut self, data: &[u8]) -> usize {
        self.rng.usize(0..=data.len())
    }

    /// A range of `data`, biased towards short ones.
    fn range(&mut self, data: &[u8]) -> (usize, usize) {
        if data.is_empty() {
            return (0, 0);
        }
        let start = self.rng.usize(0..data.len());
        let room = data.len() - start;
        let len = if self.rng.bool() { self.rng.usize(1..=room.min(8)) } else { self.rng.usize(1..=room) };
        (start, start + len)
    }

    fn insert(&mut self, data: &mut Vec<u8>, at: usize, bytes: &[u8]) {
        let room = self.max_len.saturating_sub(data.len());
        let bytes = &bytes[..bytes.len().min(room)];
        data.splice(at..at, bytes.iter().copied());
    }

    fn one(&mut self, data: &mut Vec<u8>, other: &[u8]) {
        match self.rng.u8(0..14) {
            0 if !data.is_empty() => {
                let i = self.rng.usize(0..data.len());
                data[i] ^= 1 << self.rng.u8(0..8);
            }
            1 if !data.is_empty() => {
                let i = self.rng.usize(0..data.len());
                data[i] = self.rng.u8(..);
            }
            2 => {
                let b = SPECIAL_BYTES[self.rng.usize(0..SPECIAL_BYTES.len())];
                let at = self.pos(data);
                if self.rng.bool() && at < data.len() {
                    data[at] = b;
                } else {
                    self.insert(data, at, &[b]);
                }
            }
            3 => {
                let len = self.rng.usize(1..=16);
                let bytes: Vec<u8> = (0..len).map(|_| self.rng.u8(..)).collect();
                let at = self.pos(data);
                self.insert(data, at, &bytes);
            }
            4 => {
                let (a, b) = self.range(data);
                data.drain(a..b);
            }
            5 => {
                let (a, b) = self.range(data);
                let chunk = data[a..b].to_vec();
                let at = self.pos(data);
                self.insert(data, at, &chunk);
            }
            6 => {
                // A chunk repeated many times: deep nesting, long keys, huge lists.
                let (a, b) = self.range(data);
                let chunk = data[a..b].to_vec();
                if !chunk.is_empty() {
                    let times = 1 << self.rng.u32(1..14);
                    let mut bytes = Vec::with_capacity(chunk.len() * times);
                    for _ in 0..times {
                        if bytes.len() + chunk.len() > self.max_len {
                            break;
                        }
                        bytes.extend_from_slice(&chunk);
                    }
                    let at = self.pos(data);
                    self.insert(data, at, &bytes);
                }
            }
            7 if !other.is_empty() => {
                // Splice: a piece of another input, inserted or replacing the tail.
                let (a, b) = self.range(other);
                let piece = other[a..b].to_vec();
                let at = self.pos(data);
                if self.rng.bool() {
                    data.truncate(at);
                }
                self.insert(data, at, &piece);
            }
            8 | 9 if !self.dict.is_empty() => {
                let token = self.dict[self.rng.usize(0..self.dict.len())].clone();
                let at = self.pos(data);
                if self.rng.bool() {
                    self.insert(data, at, &token);
                } else {
                    let end = (at + token.len()).min(data.len());
                    data.splice(at..end, token);
                }
            }
            10 => {
                // Replace a run of digits (or insert) with a number at some limit.
                let number = NUMBERS[self.rng.usize(0..NUMBERS.len())].as_bytes();
                let start =
                    (0..data.len()).cycle().skip(self.pos(data)).take(data.len()).find(|&i| data[i].is_ascii_digit());
                match start {
                    Some(s) => {
                        let end = data[s..].iter().position(|b| !b.is_ascii_digit()).map_or(data.len(), |p| s + p);
                        data.splice(s..end, number.iter().copied());
                    }
                    None => {
                        let at = self.pos(data);
                        self.insert(data, at, number);
                    }
                }
            }
            11 => {
                let at = self.pos(data);
                data.truncate(at);
            }
            12 if data.len() > 1 => {
                // Overwrite one range with a copy of another.
                let (a, b) = self.range(data);
                let chunk = data[a..b].to_vec();
                let at = self.rng.usize(0..data.len());
                let end = (at + chunk.len()).min(data.len());
                data.splice(at..end, chunk);
            }
            _ => {
                // Swap the case of a letter or move a line: keys and indentation matter.
                if let Some((a, b)) = line_at(data, self.pos(data)) {
                    let line = data[a..b].to_vec();
                    data.drain(a..b);
                    let at = self.pos(data);
                    self.insert(data, at, &line);
                }
            }
        }
    }
}

/// The line (with its newline) around byte `at`.
fn line_at(data: &[u8], at: usize) -> Option<(usize, usize)> {
    if data.is_empty() {
        return None;
    }
    let at = at.min(data.len() - 1);
    let start = data[..at].iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
    let end = data[at..].iter().position(|&b| b == b'\n').map_or(data.len(), |p| at + p + 1);
    Some((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_stay_within_the_length_limit_and_change_the_input() {
        let mut m = Mutator::new(7, vec![b"key:".to_vec()], 64);
        let seed = b"id: bugfix-1\nsplit: train\n".to_vec();
        let mut changed = 0;
        for _ in 0..10_000 {
            let mut data = seed.clone();
            m.mutate(&mut data, b"other: [1, 2]");
            assert!(data.len() <= 64);
            changed += usize::from(data != seed);
        }
        assert!(changed > 9_000, "only {changed} of 10000 mutations changed the input");
    }
}
