//! A serde deserializer for trace lines as hcbench writes them, faster than serde_json's on
//! them because it reads only that plain subset of JSON and hands every other line back.
//!
//! Why it exists: replay's cost is parsing, and most of a trace is payload replay skips (tool
//! output, arguments, context sections). serde_json checks skipped strings eight bytes at a
//! time and looks for whitespace before every token; a line hcbench wrote has no whitespace
//! between tokens and no control bytes, so here a skipped string is a SIMD search for its next
//! `"` or `\` (`memchr`) and tokens follow each other directly.
//!
//! The contract, which keeps every reading rule of `crate::trace::reader` intact: [`parse`]
//! returns either exactly what serde_json returns for the same line and visitor, or
//! [`Refused`], after which the caller parses the line with serde_json, which then decides
//! (and names the error, when there is one). So this parser may refuse anything it does not
//! expect, but must never accept what serde_json refuses nor read a value differently. It
//! refuses: a line holding a byte below 0x20 (control bytes, but also tabs and line breaks
//! between tokens), spaces between tokens, a `\u` escape in a string it hands to a visitor
//! (skipped strings check the escape's four hex digits, as serde_json does), nesting deeper
//! than [`MAX_DEPTH`], raw values and newtypes, enums written as objects, and map keys read as
//! anything but strings. Everything it accepts goes through the same visitors and derived types
//! as the serde_json path, so the values are those serde_json would build; a number other than
//! a plain unsigned integer is checked against JSON's grammar here and then read by serde_json
//! alone, token by itself. UTF-8 is the reader's: lines arrive as `&str`.
//!
//! The hand-written walks of the hot kinds ([`super::hot`]) read lines with this module's
//! primitives (string search, checked skipping, integers) under the same contract, and fall
//! back here for what they do not take.

use serde::de::{self, Visitor};

/// Deeper nesting is refused (serde_json's own limit is 128, so refusing earlier is safe).
const MAX_DEPTH: u32 = 64;

/// The line is not in the subset this parser reads (or is not valid JSON): parse it with
/// serde_json. It carries no message: serde_json's error is the one users see.
#[derive(Debug)]
pub(crate) struct Refused;

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("not a plain trace line")
    }
}

impl std::error::Error for Refused {}

impl de::Error for Refused {
    fn custom<T: std::fmt::Display>(_: T) -> Self {
        Refused
    }
}

type Result<T> = std::result::Result<T, Refused>;

/// Deserializes `line` (one whole JSON value, nothing after it) with `visitor`, through
/// `deserialize_map`, as the envelope of an event is read.
pub(crate) fn parse<'de, V: Visitor<'de>>(line: &'de str, visitor: V) -> Result<V::Value> {
    let mut scan = Scan::new(line)?;
    let value = de::Deserializer::deserialize_map(&mut scan, visitor)?;
    scan.end()?;
    Ok(value)
}

/// The first `"` or `\\` at or after `from`. Most strings of a trace are short (keys, names,
/// ids, and the runs of text between a tool output's `\n` escapes): their first 32 bytes are
/// looked at eight at a time in a `u64`, which costs less than a call to `memchr2` (measured),
/// and only the rest of a longer string is searched with it.
fn quote_or_backslash(bytes: &[u8], from: usize) -> Result<usize> {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    const QUOTES: u64 = u64::from_ne_bytes([b'"'; 8]);
    const BACKSLASHES: u64 = u64::from_ne_bytes([b'\\'; 8]);
    let stop = bytes.len().min(from + 32);
    let mut at = from;
    while at + 8 <= stop {
        let word = u64::from_le_bytes(bytes[at..at + 8].try_into().expect("eight bytes"));
        // A byte of `x` is zero where the word holds the byte searched for; `(x - 1) & !x`
        // sets the high bit of the lowest such byte exactly (a borrow can only mark bytes
        // above a real match), so the lowest bit set is the first match.
        let (q, b) = (word ^ QUOTES, word ^ BACKSLASHES);
        let found = ((q.wrapping_sub(ONES) & !q) | (b.wrapping_sub(ONES) & !b)) & HIGH;
        if found != 0 {
            return Ok(at + (found.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    memchr::memchr2(b'"', b'\\', &bytes[at..]).map(|i| at + i).ok_or(Refused)
}

/// Whether any byte is below 0x20, without a branch per byte (the loop vectorizes).
fn has_control_byte(bytes: &[u8]) -> bool {
    bytes.chunks(64).any(|chunk| chunk.iter().fold(false, |found, &b| found | (b < 0x20)))
}

/// A line being read; [`super::hot`] walks it by hand with the same primitives.
pub(super) struct Scan<'de> {
    text: &'de str,
    pos: usize,
    depth: u32,
    /// The unescaped text of the last string that had escapes.
    scratch: String,
}

/// A string as read: borrowed from the line, or unescaped into the scratch buffer.
pub(super) enum Text<'de, 's> {
    Line(&'de str),
    Unescaped(&'s str),
}

impl<'de> Scan<'de> {
    /// A scan of `line`, refused at once when it holds a byte below 0x20 (which rules out
    /// control bytes in strings, and whitespace between tokens).
    pub(super) fn new(line: &'de str) -> Result<Scan<'de>> {
        if has_control_byte(line.as_bytes()) {
            return Err(Refused);
        }
        Ok(Scan { text: line, pos: 0, depth: 0, scratch: String::new() })
    }

    /// Checks that the whole line was read.
    pub(super) fn end(&self) -> Result<()> {
        if self.pos != self.text.len() {
            return Err(Refused);
        }
        Ok(())
    }

    /// The bytes of a key without escapes, at its opening quote, and the `:` after it. A key
    /// with an escape is refused (serde would read it unescaped).
    pub(super) fn plain_key(&mut self) -> Result<&'de [u8]> {
        self.expect(b'"')?;
        let bytes = self.text.as_bytes();
        let end = quote_or_backslash(bytes, self.pos)?;
        if bytes[end] != b'"' || bytes.get(end + 1) != Some(&b':') {
            return Err(Refused);
        }
        let key = &bytes[self.pos..end];
        self.pos = end + 2;
        Ok(key)
    }

    /// Opens the object or array that starts with `open`, one level deeper.
    pub(super) fn open(&mut self, open: u8) -> Result<()> {
        self.expect(open)?;
        self.enter()
    }

    /// Moves to the next entry of an object or array opened with [`Scan::open`] (`first`
    /// until its first entry); false at its closing `close`, which is read, back one level.
    pub(super) fn next_entry(&mut self, first: &mut bool, close: u8) -> Result<bool> {
        let byte = self.peek()?;
        if byte == close {
            self.pos += 1;
            self.depth -= 1;
            return Ok(false);
        }
        if std::mem::take(first) {
            return Ok(true);
        }
        if byte != b',' {
            return Err(Refused);
        }
        self.pos += 1;
        Ok(true)
    }

    /// Reads `true` or `false`.
    pub(super) fn boolean(&mut self) -> Result<bool> {
        match self.peek()? {
            b't' => self.literal(b"true").map(|()| true),
            b'f' => self.literal(b"false").map(|()| false),
            _ => Err(Refused),
        }
    }

    /// Reads `null` if it comes next: true when it did.
    pub(super) fn null(&mut self) -> Result<bool> {
        if self.peek()? != b'n' {
            return Ok(false);
        }
        self.literal(b"null")?;
        Ok(true)
    }

    pub(super) fn peek(&self) -> Result<u8> {
        self.text.as_bytes().get(self.pos).copied().ok_or(Refused)
    }

    pub(super) fn expect(&mut self, byte: u8) -> Result<()> {
        if self.peek()? != byte {
            return Err(Refused);
        }
        self.pos += 1;
        Ok(())
    }

    fn literal(&mut self, word: &[u8]) -> Result<()> {
        if !self.text.as_bytes()[self.pos..].starts_with(word) {
            return Err(Refused);
        }
        self.pos += word.len();
        Ok(())
    }

    pub(super) fn enter(&mut self) -> Result<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Refused);
        }
        Ok(())
    }

    /// Reads the string at `pos` (at its opening quote).
    pub(super) fn string(&mut self) -> Result<Text<'de, '_>> {
        self.expect(b'"')?;
        let bytes = self.text.as_bytes();
        let start = self.pos;
        let end = quote_or_backslash(bytes, start)?;
        if bytes[end] == b'"' {
            self.pos = end + 1;
            // Both ends are ASCII quotes, so the slice is on character boundaries.
            return Ok(Text::Line(&self.text[start..end]));
        }
        self.scratch.clear();
        self.scratch.push_str(&self.text[start..end]);
        self.pos = end;
        loop {
            // At a backslash.
            let unescaped = match bytes.get(self.pos + 1).copied().ok_or(Refused)? {
                b'"' => '"',
                b'\\' => '\\',
                b'/' => '/',
                b'b' => '\u{8}',
                b'f' => '\u{c}',
                b'n' => '\n',
                b'r' => '\r',
                b't' => '\t',
                // `\u` (surrogate pairs, lone surrogates) is left to serde_json.
                _ => return Err(Refused),
            };
            self.scratch.push(unescaped);
            let from = self.pos + 2;
            let end = quote_or_backslash(bytes, from)?;
            self.scratch.push_str(&self.text[from..end]);
            self.pos = end;
            if bytes[end] == b'"' {
                self.pos = end + 1;
                return Ok(Text::Unescaped(&self.scratch));
            }
        }
    }

    /// Skips the string at `pos`, checking its escapes as serde_json does when it skips one.
    fn skip_string(&mut self) -> Result<()> {
        self.expect(b'"')?;
        let bytes = self.text.as_bytes();
        loop {
            let at = quote_or_backslash(bytes, self.pos)?;
            if bytes[at] == b'"' {
                self.pos = at + 1;
                return Ok(());
            }
            match bytes.get(at + 1).copied().ok_or(Refused)? {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.pos = at + 2,
                b'u' => {
                    let hex = bytes.get(at + 2..at + 6).ok_or(Refused)?;
                    if !hex.iter().all(u8::is_ascii_hexdigit) {
                        return Err(Refused);
                    }
                    self.pos = at + 6;
                }
                _ => return Err(Refused),
            }
        }
    }

    /// Skips a number, checking JSON's grammar: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
    fn skip_number(&mut self) -> Result<()> {
        if self.peek()? == b'-' {
            self.pos += 1;
        }
        match self.peek()? {
            b'0' => self.pos += 1,
            b'1'..=b'9' => self.digits(),
            _ => return Err(Refused),
        }
        if self.peek_is(b'.') {
            self.pos += 1;
            self.some_digits()?;
        }
        if self.peek_is(b'e') || self.peek_is(b'E') {
            self.pos += 1;
            if self.peek_is(b'+') || self.peek_is(b'-') {
                self.pos += 1;
            }
            self.some_digits()?;
        }
        Ok(())
    }

    fn peek_is(&self, byte: u8) -> bool {
        self.text.as_bytes().get(self.pos) == Some(&byte)
    }

    fn digits(&mut self) {
        let rest = &self.text.as_bytes()[self.pos..];
        self.pos += rest.iter().take_while(|b| b.is_ascii_digit()).count();
    }

    fn some_digits(&mut self) -> Result<()> {
        let from = self.pos;
        self.digits();
        if self.pos == from {
            return Err(Refused);
        }
        Ok(())
    }

    /// Reads an unsigned integer of at most 19 digits (always within u64); anything else that
    /// is a number is refused, so serde_json decides how to read it.
    pub(super) fn unsigned(&mut self) -> Result<u64> {
        let bytes = self.text.as_bytes();
        let from = self.pos;
        self.digits();
        let digits = &bytes[from..self.pos];
        let next = bytes.get(self.pos).copied();
        if digits.is_empty()
            || digits.len() > 19
            || (digits[0] == b'0' && digits.len() > 1)
            || matches!(next, Some(b'.' | b'e' | b'E'))
        {
            return Err(Refused);
        }
        Ok(digits.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0')))
    }

    /// Whether the number at the cursor is an unsigned integer [`Scan::unsigned`] reads (no
    /// sign, fraction or exponent, at most 19 digits, no leading zero).
    fn plain_unsigned_ahead(&self) -> bool {
        let rest = &self.text.as_bytes()[self.pos..];
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        (1..=19).contains(&digits)
            && (rest[0] != b'0' || digits == 1)
            && !matches!(rest.get(digits), Some(b'.' | b'e' | b'E'))
    }

    /// Hands any other number (negative, a fraction, an exponent, more than 19 digits) to
    /// `visitor` as serde_json does: the token is checked against JSON's grammar here, then
    /// serde_json reads that token alone, so the value and the kind of visit (`u64`, `i64` or
    /// `f64`, with serde_json's rounding) are serde_json's own. A `reward` or a price is such a
    /// number, and before this every `run_finished` line went to serde_json whole, after both
    /// fast parsers had read most of it.
    fn other_number<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value> {
        let from = self.pos;
        self.skip_number()?;
        let token = &self.text[from..self.pos];
        let mut de = serde_json::Deserializer::from_str(token);
        let value = de::Deserializer::deserialize_any(&mut de, visitor).map_err(|_| Refused)?;
        de.end().map_err(|_| Refused)?;
        Ok(value)
    }

    /// Skips any value, checking it is JSON.
    pub(super) fn skip_value(&mut self) -> Result<()> {
        match self.peek()? {
            b'"' => self.skip_string(),
            b'{' => {
                self.enter()?;
                self.pos += 1;
                if self.peek()? == b'}' {
                    self.pos += 1;
                } else {
                    loop {
                        self.skip_string()?;
                        self.expect(b':')?;
                        self.skip_value()?;
                        match self.peek()? {
                            b',' => self.pos += 1,
                            b'}' => {
                                self.pos += 1;
                                break;
                            }
                            _ => return Err(Refused),
                        }
                    }
                }
                self.depth -= 1;
                Ok(())
            }
            b'[' => {
                self.enter()?;
                self.pos += 1;
                if self.peek()? == b']' {
                    self.pos += 1;
                } else {
                    loop {
                        self.skip_value()?;
                        match self.peek()? {
                            b',' => self.pos += 1,
                            b']' => {
                                self.pos += 1;
                                break;
                            }
                            _ => return Err(Refused),
                        }
                    }
                }
                self.depth -= 1;
                Ok(())
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.skip_number(),
        }
    }

    fn visit_string<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value> {
        match self.string()? {
            Text::Line(s) => visitor.visit_borrowed_str(s),
            Text::Unescaped(s) => visitor.visit_str(s),
        }
    }
}

impl<'de> de::Deserializer<'de> for &mut Scan<'de> {
    type Error = Refused;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.peek()? {
            b'"' => self.visit_string(visitor),
            b'{' => {
                self.enter()?;
                self.pos += 1;
                let value = visitor.visit_map(Entries { scan: &mut *self, state: State::First })?;
                self.depth -= 1;
                Ok(value)
            }
            b'[' => {
                self.enter()?;
                self.pos += 1;
                let value = visitor.visit_seq(Entries { scan: &mut *self, state: State::First })?;
                self.depth -= 1;
                Ok(value)
            }
            b't' => {
                self.literal(b"true")?;
                visitor.visit_bool(true)
            }
            b'f' => {
                self.literal(b"false")?;
                visitor.visit_bool(false)
            }
            b'n' => {
                self.literal(b"null")?;
                visitor.visit_unit()
            }
            b'0'..=b'9' if self.plain_unsigned_ahead() => {
                let n = self.unsigned()?;
                visitor.visit_u64(n)
            }
            _ => self.other_number(visitor),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.skip_value()?;
        visitor.visit_unit()
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        if self.peek()? == b'n' {
            self.literal(b"null")?;
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        use serde::de::IntoDeserializer as _;
        // Unit variants, written as strings; an enum written as an object is serde_json's.
        match self.string()? {
            Text::Line(s) => visitor.visit_enum(de::value::BorrowedStrDeserializer::new(s)),
            Text::Unescaped(s) => visitor.visit_enum(s.into_deserializer()),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _name: &'static str, _visitor: V) -> Result<V::Value> {
        // serde_json gives newtypes special meanings (raw values): leave them to it.
        Err(Refused)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value> {
        Err(Refused)
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value> {
        Err(Refused)
    }

    fn deserialize_i128<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value> {
        Err(Refused)
    }

    fn deserialize_u128<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value> {
        Err(Refused)
    }

    // Everything else reads as serde_json reads it: by what the next token is.
    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 u8 u16 u32 u64 f32 f64 char str string
        unit unit_struct seq tuple tuple_struct map struct identifier
    }
}

/// Where a map or sequence stands.
#[derive(PartialEq)]
enum State {
    First,
    Rest,
    Closed,
}

/// The entries of an object, or the elements of an array, after its opening bracket.
struct Entries<'a, 'de> {
    scan: &'a mut Scan<'de>,
    state: State,
}

impl Entries<'_, '_> {
    /// Moves to the next entry; false at the closing `close`.
    fn advance(&mut self, close: u8) -> Result<bool> {
        match self.state {
            State::Closed => return Ok(false),
            State::First => {
                self.state = State::Rest;
                if self.scan.peek()? != close {
                    return Ok(true);
                }
            }
            State::Rest => match self.scan.peek()? {
                b',' => {
                    self.scan.pos += 1;
                    return Ok(true);
                }
                b if b == close => {}
                _ => return Err(Refused),
            },
        }
        self.scan.pos += 1;
        self.state = State::Closed;
        Ok(false)
    }
}

impl<'de> de::MapAccess<'de> for Entries<'_, 'de> {
    type Error = Refused;

    fn next_key_seed<K: de::DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        if !self.advance(b'}')? {
            return Ok(None);
        }
        let key = seed.deserialize(Key(&mut *self.scan))?;
        self.scan.expect(b':')?;
        Ok(Some(key))
    }

    fn next_value_seed<S: de::DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value> {
        seed.deserialize(&mut *self.scan)
    }
}

impl<'de> de::SeqAccess<'de> for Entries<'_, 'de> {
    type Error = Refused;

    fn next_element_seed<S: de::DeserializeSeed<'de>>(&mut self, seed: S) -> Result<Option<S::Value>> {
        if !self.advance(b']')? {
            return Ok(None);
        }
        seed.deserialize(&mut *self.scan).map(Some)
    }
}

impl Drop for Entries<'_, '_> {
    fn drop(&mut self) {
        // A visitor that stopped before the closing bracket leaves the rest unread; serde_json
        // calls that an error, so the scan is made to fail at its end check.
        if self.state != State::Closed {
            self.scan.pos = usize::MAX;
        }
    }
}

/// An object's key: always a string, read as serde_json's map keys are for string-like types.
/// Keys read as numbers, booleans or enums mean something else to serde_json: refused.
struct Key<'a, 'de>(&'a mut Scan<'de>);

impl<'de> de::Deserializer<'de> for Key<'_, 'de> {
    type Error = Refused;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.0.visit_string(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.0.skip_string()?;
        visitor.visit_unit()
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.0.visit_string(visitor)
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.0.visit_string(visitor)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.0.visit_string(visitor)
    }

    fn deserialize_bool<V: Visitor<'de>>(self, _v: V) -> Result<V::Value> {
        Err(Refused)
    }
    fn deserialize_i8<V: Visitor<'de>>(self, _v: V) -> Result<V::Value> {
        Err(Refused)
    }
    fn deserialize_i16<V: Visitor<'de>>(self, _v: V) -> Result<V::Value> {
        Err(Refused)
    }
    fn deserialize_i32<V: Visitor<'de>>(self, _v: V) -> Result<V::Value> {
        Err(Refused)
    }
    fn deserialize_i64<V: Visitor<'de>>(self, _v: V) -> Result<V::Value> {
        Err(Refused)
    }
    fn deserialize_u8<V: Visitor<'de>>(self, _v: V) -> Result<V::Value> {
        Err(Refused)
    }
    fn deserialize_u16<V: Visitor<'de>>(self, _v: V) -> Result<V::Value> {
        Err(Refused)
    }
    fn deserialize_u32<V: Visitor<'de>>(self, _v: V) -> Result<V::Value> {
        Err(Refused)
    }
    fn deserialize_u64<V: Visitor<'de>>(self, _v: V) -> Result<V::Value> {
        Err(Refused)
    }
    fn deserialize_f32<V: Visitor<'de>>(self, _v: V) -> Result<V::Value> {
        Err(Refused)
    }
    fn deserialize_f64<V: Visitor<'de>>(self, _v: V) -> Result<V::Value> {
        Err(Refused)
    }
    fn deserialize_char<V: Visitor<'de>>(self, _v: V) -> Result<V::Value> {
        Err(Refused)
    }
    fn deserialize_bytes<V: Visitor<'de>>(self, _v: V) -> Result<V::Value> {
        Err(Refused)
    }
    fn deserialize_byte_buf<V: Visitor<'de>>(self, _v: V) -> Result<V::Value> {
        Err(Refused)
    }
    fn deserialize_option<V: Visitor<'de>>(self, _v: V) -> Result<V::Value> {
        Err(Refused)
    }
    fn deserialize_unit<V: Visitor<'de>>(self, _v: V) -> Result<V::Value> {
        Err(Refused)
    }
    fn deserialize_unit_struct<V: Visitor<'de>>(self, _n: &'static str, _v: V) -> Result<V::Value> {
        Err(Refused)
    }
    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _n: &'static str, _v: V) -> Result<V::Value> {
        Err(Refused)
    }
    fn deserialize_seq<V: Visitor<'de>>(self, _v: V) -> Result<V::Value> {
        Err(Refused)
    }
    fn deserialize_tuple<V: Visitor<'de>>(self, _l: usize, _v: V) -> Result<V::Value> {
        Err(Refused)
    }
    fn deserialize_tuple_struct<V: Visitor<'de>>(self, _n: &'static str, _l: usize, _v: V) -> Result<V::Value> {
        Err(Refused)
    }
    fn deserialize_map<V: Visitor<'de>>(self, _v: V) -> Result<V::Value> {
        Err(Refused)
    }
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _n: &'static str,
        _f: &'static [&'static str],
        _v: V,
    ) -> Result<V::Value> {
        Err(Refused)
    }
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _n: &'static str,
        _variants: &'static [&'static str],
        _v: V,
    ) -> Result<V::Value> {
        Err(Refused)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The word-at-a-time search finds what a byte-by-byte one finds, wherever the quote or
    /// backslash lies against the eight-byte words and the 32-byte head, and whatever the
    /// other bytes are (bytes near `"` and `\\` included, which could fool a careless mask).
    #[test]
    fn the_word_search_finds_the_first_quote_or_backslash() {
        let mut rng = fastrand::Rng::with_seed(20);
        let fillers = [b'a', b'!', b'#', b'[', b']', 0x21, 0x23, 0x5b, 0x5d, 0xc3, 0xa9, 0x7f, 0xff, 0x00];
        for _ in 0..20_000 {
            let len = rng.usize(0..80);
            let mut bytes: Vec<u8> = (0..len).map(|_| fillers[rng.usize(..fillers.len())]).collect();
            for _ in 0..rng.usize(0..3) {
                if len > 0 {
                    bytes[rng.usize(..len)] = if rng.bool() { b'"' } else { b'\\' };
                }
            }
            let from = rng.usize(0..=len);
            let naive = bytes[from..].iter().position(|&b| b == b'"' || b == b'\\').map(|i| from + i);
            assert_eq!(quote_or_backslash(&bytes, from).ok(), naive, "{bytes:?} from {from}");
        }
    }
}
