//! Workspaces: a fresh, private copy of a fixture for each cell.
//!
//! Fixtures in the repository are never written to: every cell works in its own copy inside the
//! run directory. Files are reflinked where the filesystem supports it (copy-on-write, so a
//! later write never reaches the fixture) and copied otherwise; hard links are never used
//! because they would share mutable bytes. Symlinks are recreated as symlinks, not followed, so
//! the policy sees the same tree the fixture has.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
#[error("cannot create workspace {dest} from fixture {fixture}: {source}")]
pub struct WorkspaceError {
    pub fixture: PathBuf,
    pub dest: PathBuf,
    #[source]
    pub source: io::Error,
}

/// Copies `fixture` into `dest` (which must not exist yet) and returns the canonical `dest`.
pub fn fresh(fixture: &Path, dest: &Path) -> Result<PathBuf, WorkspaceError> {
    let wrap = |source| WorkspaceError { fixture: fixture.to_path_buf(), dest: dest.to_path_buf(), source };
    if dest.exists() {
        return Err(wrap(io::Error::new(io::ErrorKind::AlreadyExists, "destination already exists")));
    }
    fs::create_dir_all(dest).map_err(wrap)?;
    copy_tree(fixture, dest).map_err(wrap)?;
    dest.canonicalize().map_err(wrap)
}

fn copy_tree(src: &Path, dst: &Path) -> io::Result<()> {
    for entry in fs::read_dir(src)? {
        let entry = entry?;
        let from = entry.path();
        let to = dst.join(entry.file_name());
        let ty = entry.file_type()?;
        if ty.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(&from)?, &to)?;
        } else if ty.is_dir() {
            fs::create_dir(&to)?;
            copy_tree(&from, &to)?;
        } else if ty.is_file() {
            reflink_copy::reflink_or_copy(&from, &to)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_is_independent_of_the_fixture() {
        let root = tempfile::tempdir().unwrap();
        let fixture = root.path().join("fx");
        fs::create_dir_all(fixture.join("pkg")).unwrap();
        fs::write(fixture.join("pkg/a.py"), "x = 1\n").unwrap();
        std::os::unix::fs::symlink("pkg/a.py", fixture.join("link.py")).unwrap();
        let ws = fresh(&fixture, &root.path().join("ws")).unwrap();
        fs::write(ws.join("pkg/a.py"), "x = 2\n").unwrap();
        assert_eq!(fs::read_to_string(fixture.join("pkg/a.py")).unwrap(), "x = 1\n");
        assert!(fs::symlink_metadata(ws.join("link.py")).unwrap().file_type().is_symlink());
        assert!(fresh(&fixture, &root.path().join("ws")).is_err(), "an existing workspace is never reused");
    }
}
