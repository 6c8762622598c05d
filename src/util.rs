//! Small shared helpers: atomic file writes, hashing, natural ordering, time stamps, text cuts
//! and "did you mean" suggestions.

use std::cmp::Ordering;
use std::io::{self, Write};
use std::path::Path;
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};

/// Writes `bytes` to `path` atomically: a temporary file in the same directory is written,
/// synced and renamed over the target, so readers see the old or the new content, never half.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_with(path, bytes, true)
}

/// [`write_atomic`] without the sync: still all or nothing for any reader and across a killed
/// process (the rename is atomic and the page cache outlives the process), but not across a
/// power loss. For files written every step and checked on read (the cell's checkpoints carry
/// their sha256 in the trace), where a sync would cost more than the rest of the write.
pub fn write_atomic_unsynced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_with(path, bytes, false)
}

fn write_atomic_with(path: &Path, bytes: &[u8], sync: bool) -> io::Result<()> {
    write_atomic_streamed(path, sync, |out| out.write_all(bytes)).map_err(|e| match e {
        StreamError::Io(e) | StreamError::Writer(e) => e,
    })
}

/// Why [`write_atomic_streamed`] failed: the file system, or the function writing the content.
#[derive(Debug)]
pub enum StreamError<E> {
    Io(io::Error),
    Writer(E),
}

impl<E> From<io::Error> for StreamError<E> {
    fn from(e: io::Error) -> Self {
        StreamError::Io(e)
    }
}

/// [`write_atomic`] for content too large to hold in memory (a 100,000-cell report.json):
/// `write` streams it into a buffered temporary file beside `path`, which replaces `path`
/// only once everything was written (and synced, with `sync`). A failed `write` leaves
/// `path` as it was.
pub fn write_atomic_streamed<E>(
    path: &Path,
    sync: bool,
    write: impl FnOnce(&mut dyn Write) -> Result<(), E>,
) -> Result<(), StreamError<E>> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let tmp = tempfile::NamedTempFile::new_in(dir)?;
    // Temp files are created 0600; the result should have the permissions a plain write would
    // give (an existing file's own, else 0644), so reports stay readable when shared.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).map(|m| m.permissions().mode() & 0o7777).unwrap_or(0o644);
    tmp.as_file().set_permissions(std::fs::Permissions::from_mode(mode))?;
    let mut out = io::BufWriter::with_capacity(256 * 1024, tmp);
    write(&mut out).map_err(StreamError::Writer)?;
    let tmp = out.into_inner().map_err(|e| e.into_error())?;
    if sync {
        tmp.as_file().sync_all()?;
    }
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// A command's captured output: the first `limit` bytes of a stream, and whether more came.
#[derive(Debug, Default)]
pub struct Bounded {
    pub kept: Vec<u8>,
    pub truncated: bool,
}

impl Bounded {
    /// Keeps what of `chunk` fits under `limit`; the rest only sets `truncated`.
    pub fn push(&mut self, chunk: &[u8], limit: usize) {
        let room = limit.saturating_sub(self.kept.len());
        self.truncated |= chunk.len() > room;
        self.kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
    }
}

/// A YAML parser's error for `file`: its snippet names the file, not `<input>`.
pub fn yaml_error(e: &impl std::fmt::Display, file: &Path) -> String {
    e.to_string().replace("<input>", &file.display().to_string())
}

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Lower-case hex of `bytes` (a digest).
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// RFC 3339 UTC time stamp with millisecond precision.
pub fn now_rfc3339() -> String {
    let mut stamp = String::with_capacity(24);
    write_rfc3339_millis(&mut stamp, SystemTime::now());
    stamp
}

/// The RFC 3339 UTC time stamp of `at` with millisecond precision (the sub-millisecond part
/// is cut, not rounded) written into `stamp`, cleared first: for a caller that stamps many
/// things and keeps one buffer for it (the trace writer).
pub fn write_rfc3339_millis(stamp: &mut String, at: SystemTime) {
    use std::fmt::Write as _;
    stamp.clear();
    write!(stamp, "{}", humantime::format_rfc3339_millis(at)).expect("a String takes any text");
}

/// Natural ordering for ids: digit runs compare as numbers, so "case-2" < "case-10".
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut a, mut b) = (a.as_bytes(), b.as_bytes());
    loop {
        match (a.first(), b.first()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) if x.is_ascii_digit() && y.is_ascii_digit() => {
                let da = a.iter().take_while(|c| c.is_ascii_digit()).count();
                let db = b.iter().take_while(|c| c.is_ascii_digit()).count();
                let (na, nb) = (trim_zeros(&a[..da]), trim_zeros(&b[..db]));
                let ord = na.len().cmp(&nb.len()).then_with(|| na.cmp(nb)).then(da.cmp(&db));
                if ord != Ordering::Equal {
                    return ord;
                }
                a = &a[da..];
                b = &b[db..];
            }
            (Some(x), Some(y)) => {
                if x != y {
                    return x.cmp(y);
                }
                a = &a[1..];
                b = &b[1..];
            }
        }
    }
}

fn trim_zeros(digits: &[u8]) -> &[u8] {
    let n = digits.iter().take_while(|c| **c == b'0').count();
    &digits[n..]
}

/// Truncates `s` to at most `max` bytes on a char boundary.
pub fn truncate_str(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Cuts `s` to at most `max` bytes at a word boundary and marks the cut with `…`, so a reason
/// in a report never ends mid-word. Text that fits is returned whole; a single word longer
/// than `max` is cut on a char boundary (there is no better place).
pub fn cut_words(s: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if s.len() <= max {
        return std::borrow::Cow::Borrowed(s);
    }
    // Room for the ellipsis (3 bytes in UTF-8).
    let head = truncate_str(s, max.saturating_sub(3));
    let ends_a_word = s[head.len()..].starts_with(char::is_whitespace);
    let at_word = match head.rfind(char::is_whitespace) {
        _ if ends_a_word => head.trim_end(),
        Some(i) if i > head.len() / 2 => head[..i].trim_end(),
        _ => head,
    };
    std::borrow::Cow::Owned(format!("{at_word}…"))
}

/// The candidates close enough to `name` to be what was meant (edit distance at most a third
/// of the longer name, or one is a prefix of the other), nearest first, at most three. For
/// "did you mean" hints on profile, case, suite and benchmark names.
pub fn similar_names<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let lower = name.to_lowercase();
    let mut scored: Vec<(usize, &str)> = candidates
        .into_iter()
        .filter(|c| *c != name)
        .filter_map(|c| {
            let cl = c.to_lowercase();
            let distance = strsim::damerau_levenshtein(&lower, &cl);
            let close = distance <= (lower.chars().count().max(cl.chars().count()) / 3).max(1);
            let prefix = lower.len() >= 3 && (cl.starts_with(&lower) || lower.starts_with(&cl));
            (close || prefix).then_some((distance, c))
        })
        .collect();
    scored.sort();
    scored.dedup();
    scored.into_iter().take(3).map(|(_, c)| c).collect()
}

/// `; did you mean `a` or `b`?` for [`similar_names`], or nothing when none is close.
pub fn did_you_mean<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    let found = similar_names(name, candidates);
    match found.as_slice() {
        [] => String::new(),
        [one] => format!("; did you mean `{one}`?"),
        [init @ .., last] => {
            let init: Vec<String> = init.iter().map(|c| format!("`{c}`")).collect();
            format!("; did you mean {} or `{last}`?", init.join(", "))
        }
    }
}

/// A file or folder as `lstat` shows it: device, inode, size, modification and change times.
/// Kept beside something read from it (bytes, a listing), it says whether that is still its
/// own: the change time cannot be set by a user and moves with every write, rename, `chmod`,
/// `touch` or link (a folder's when a name in it is added, removed or renamed), and an inode
/// reused by a new file has a later change time. The exception is git's "racy" case: a change
/// within the same clock tick as the read before it leaves every field equal, so a stamp is
/// trusted only once it is [`Stamp::SETTLED`] old ([`Stamp::settled`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    /// How long before a read an entry's last change must be for what was read to be kept.
    /// Two seconds: above the timestamp granularity of the file systems a workspace or a
    /// benchmark may be on (a clock tick on ext4, xfs or tmpfs; a second on ext3's small inodes;
    /// two on FAT).
    pub const SETTLED: Duration = Duration::from_secs(2);

    pub fn of(meta: &std::fs::Metadata) -> Stamp {
        use std::os::unix::fs::MetadataExt;
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// The stamp of a `rustix` stat (as [`Stamp::of`] takes it from std's metadata).
    pub fn of_stat(st: &rustix::fs::Stat) -> Stamp {
        Stamp {
            dev: st.st_dev,
            ino: st.st_ino,
            size: u64::try_from(st.st_size).unwrap_or(0),
            mtime: (st.st_mtime, i64::try_from(st.st_mtime_nsec).unwrap_or(0)),
            ctime: (st.st_ctime, i64::try_from(st.st_ctime_nsec).unwrap_or(0)),
        }
    }

    /// Whether the last change was [`Stamp::SETTLED`] before `now`.
    pub fn settled(&self, now: SystemTime) -> bool {
        let changed = SystemTime::UNIX_EPOCH
            + Duration::new(self.ctime.0.max(0) as u64, self.ctime.1.clamp(0, 999_999_999) as u32);
        changed + Stamp::SETTLED <= now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A time stamp names its millisecond whole: two times within one millisecond have the
    /// same stamp (the trace writer reuses it for both), the next millisecond another.
    #[test]
    fn time_stamps_cut_to_the_millisecond() {
        let at = |nanos: u64| SystemTime::UNIX_EPOCH + Duration::from_nanos(1_764_082_800_000_000_000 + nanos);
        let stamp = |t: SystemTime| {
            let mut s = String::from("left over");
            write_rfc3339_millis(&mut s, t);
            s
        };
        assert_eq!(stamp(at(123_000_000)), "2025-11-25T15:00:00.123Z");
        assert_eq!(stamp(at(123_999_999)), "2025-11-25T15:00:00.123Z");
        assert_eq!(stamp(at(124_000_000)), "2025-11-25T15:00:00.124Z");
        assert_eq!(now_rfc3339().len(), 24);
    }

    #[test]
    fn reasons_are_cut_at_whole_words() {
        assert_eq!(cut_words("short", 10), "short");
        let cut = cut_words("connection refused by the remote host at once", 24);
        assert_eq!(cut, "connection refused by…");
        assert!(cut.len() <= 24);
        assert_eq!(cut_words("aaaaaaaaaaaaaaaaaaaa", 8), "aaaaa…", "one long word is cut where it must be");
    }

    #[test]
    fn suggestions_name_only_close_candidates() {
        let names = ["oracle", "gpt", "deepseek", "local", "local-responses"];
        assert_eq!(similar_names("orcale", names), ["oracle"]);
        assert_eq!(similar_names("deepsek", names), ["deepseek"]);
        assert_eq!(similar_names("loc", names), ["local", "local-responses"]);
        assert!(similar_names("zzzzzz", names).is_empty());
        assert_eq!(did_you_mean("gtp", names), "; did you mean `gpt`?");
        assert_eq!(did_you_mean("qwerty", names), "");
    }

    #[test]
    fn natural_order_compares_numbers_by_value() {
        let mut ids = vec!["case-10", "case-2", "case-1", "bugfix-3", "case-02"];
        ids.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(ids, ["bugfix-3", "case-1", "case-2", "case-02", "case-10"]);
    }

    #[test]
    fn atomic_write_replaces_content() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("state.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temp files left");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o644);
    }

    #[test]
    fn truncation_respects_char_boundaries() {
        assert_eq!(truncate_str("héllo", 2), "h");
        assert_eq!(truncate_str("abc", 10), "abc");
    }
}
