//! Small shared helpers: atomic file writes, hashing, natural ordering and time stamps.

use std::cmp::Ordering;
use std::io::{self, Write};
use std::path::Path;
use std::time::SystemTime;

use sha2::{Digest, Sha256};

/// Writes `bytes` to `path` atomically: a temporary file in the same directory is written,
/// synced and renamed over the target, so readers see the old or the new content, never half.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    // Temp files are created 0600; the result should have the permissions a plain write would
    // give (an existing file's own, else 0644), so reports stay readable when shared.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).map(|m| m.permissions().mode() & 0o7777).unwrap_or(0o644);
    tmp.as_file().set_permissions(std::fs::Permissions::from_mode(mode))?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
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
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
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

#[cfg(test)]
mod tests {
    use super::*;

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
