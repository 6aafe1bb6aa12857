//! The run's workspace: a fresh private directory, or a persistent one.

use crate::denial::Denial;
use std::io;
use std::path::{Path, PathBuf};

/// A workspace; a fresh one is removed on drop unless kept.
pub struct Workspace {
    root: PathBuf,
    temp: Option<tempfile::TempDir>,
    /// A shared flock on a fresh workspace while its run lives, so
    /// `jobs --gc` can tell a crashed run's leftover from a live one.
    _in_use: Option<std::os::fd::OwnedFd>,
}

/// Mode of a workspace kept on purpose (`--keep`): the sticky bit, which
/// changes nothing in a private directory, tells `jobs --gc` to leave it.
pub const KEPT_MODE: u32 = 0o1700;

impl Workspace {
    /// A new 0700 directory under `parent` (default `/tmp`).
    pub fn fresh(parent: Option<&Path>) -> io::Result<Workspace> {
        let parent = parent.unwrap_or(Path::new("/tmp"));
        let dir = tempfile::Builder::new()
            .prefix("agent-rsh-")
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir_in(parent)?;
        let root = dir.path().canonicalize()?;
        let in_use = std::fs::File::open(&root)
            .ok()
            .map(std::os::fd::OwnedFd::from);
        if let Some(fd) = &in_use {
            use std::os::fd::AsRawFd;
            // SAFETY: flock on an fd we own (O_CLOEXEC: the child does not get it).
            unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) };
        }
        Ok(Workspace {
            root,
            temp: Some(dir),
            _in_use: in_use,
        })
    }

    /// An existing directory that outlives the run.
    pub fn persistent(dir: &Path) -> io::Result<Workspace> {
        let root = dir
            .canonicalize()
            .map_err(|e| io::Error::new(e.kind(), format!("workspace {}: {e}", dir.display())))?;
        if !root.is_dir() {
            return Err(io::Error::other(format!(
                "workspace {} is not a directory",
                dir.display()
            )));
        }
        Ok(Workspace {
            root,
            temp: None,
            _in_use: None,
        })
    }

    /// Whether the workspace was made for this run (and is removed after
    /// it).
    pub fn is_fresh(&self) -> bool {
        self.temp.is_some()
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Keeps a fresh workspace on disk after the run; returns its path.
    pub fn keep(&mut self) -> PathBuf {
        if let Some(t) = self.temp.take() {
            let _ = t.keep();
            let _ = std::fs::set_permissions(
                &self.root,
                std::os::unix::fs::PermissionsExt::from_mode(KEPT_MODE),
            );
        }
        self.root.clone()
    }

    /// The absolute cwd for `rel` (already `..`-free), refused when a
    /// symlink takes it out of the workspace or it does not exist.
    pub fn resolve_cwd(&self, rel: &Path) -> Result<PathBuf, Denial> {
        let joined = self.root.join(rel);
        let real = joined.canonicalize().map_err(|e| {
            Denial::new(
                "cwd.missing",
                format!("cwd `{}` cannot be used: {e}", rel.display()),
                "give an existing directory relative to the workspace root",
            )
        })?;
        if !real.starts_with(&self.root) {
            return Err(Denial::new(
                "cwd.escape",
                format!(
                    "cwd `{}` resolves to {}, outside the workspace",
                    rel.display(),
                    real.display()
                ),
                "stay inside the workspace; symlinks out of it are not followed",
            ));
        }
        if !real.is_dir() {
            return Err(Denial::new(
                "cwd.missing",
                format!("cwd `{}` is not a directory", rel.display()),
                "give an existing directory relative to the workspace root",
            ));
        }
        Ok(real)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_is_private_and_removed() {
        use std::os::unix::fs::PermissionsExt;
        let ws = Workspace::fresh(None).unwrap();
        let root = ws.root().to_path_buf();
        let mode = std::fs::metadata(&root).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        drop(ws);
        assert!(!root.exists());
    }

    #[test]
    fn symlinked_cwd_out_of_workspace_is_refused() {
        let ws = Workspace::fresh(None).unwrap();
        std::os::unix::fs::symlink("/", ws.root().join("up")).unwrap();
        std::fs::create_dir(ws.root().join("sub")).unwrap();
        assert_eq!(
            ws.resolve_cwd(Path::new("up")).unwrap_err().rule,
            "cwd.escape"
        );
        assert_eq!(
            ws.resolve_cwd(Path::new("sub")).unwrap(),
            ws.root().join("sub")
        );
        assert_eq!(
            ws.resolve_cwd(Path::new("nope")).unwrap_err().rule,
            "cwd.missing"
        );
    }
}
