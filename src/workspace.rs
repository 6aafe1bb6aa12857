//! The run's workspace: a fresh private directory, or a persistent one.

use crate::denial::Denial;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// A workspace; a fresh one is removed on drop unless kept.
pub struct Workspace {
    root: PathBuf,
    /// A persistent workspace: the directory opened once, whose canonical
    /// path the system-directory refusal was applied to, held for the run
    /// (its inode stays the one `identity` names).
    held: Option<(std::os::fd::OwnedFd, DirId)>,
    temp: Option<tempfile::TempDir>,
    /// A shared flock on a fresh workspace while its run lives, so
    /// `jobs --gc` can tell a crashed run's leftover from a live one.
    _in_use: Option<std::fs::File>,
}

/// The per-workspace state directory of a persistent workspace: HOME,
/// TMPDIR, the XDG directories and tool caches of its runs live here, so
/// none of them lands in the workspace (a repository's `git status` stays
/// clean, `git add -A` commits no cache). One per workspace path, kept
/// between runs (caches stay warm): `$XDG_STATE_HOME/agent-rsh/workspaces/
/// NAME-HASH` of agent-rsh's own environment (default
/// `~/.local/state`), or under `/tmp/agent-rsh-UID-state/` when that is
/// not writable or lies inside the workspace.
pub fn state_dir(workspace: &Path) -> io::Result<PathBuf> {
    let leaf = state_leaf(workspace);
    let home = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .filter(|p| p.is_absolute());
    if let Some(base) = home {
        let dir = base.join("agent-rsh/workspaces").join(&leaf);
        if !dir.starts_with(workspace) && make_private(&dir).is_ok() && safe_ancestors(&dir).is_ok()
        {
            return dir.canonicalize();
        }
    }
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let base = PathBuf::from(format!("/tmp/agent-rsh-{uid}-state"));
    make_private(&base)?;
    // A directory someone else made, or a symlink, would put the state
    // where another account can reach it.
    let meta = std::fs::symlink_metadata(&base)?;
    use std::os::unix::fs::MetadataExt;
    if meta.file_type().is_symlink() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(io::Error::other(format!(
            "{} is not a private directory of this account; remove it",
            base.display()
        )));
    }
    let dir = base.join(leaf);
    make_private(&dir)?;
    dir.canonicalize()
}

/// The private `/tmp` of a persistent workspace's runs: `tmp` in its
/// state directory, made 0700 when missing, with its device and inode (the
/// mount view binds that very directory at `/tmp`, or builds no view). A
/// run may write the state directory, so what it left at that name is not
/// trusted: a symlink or a file there is removed (the run's own scratch)
/// and the directory made again; nothing is followed.
pub fn private_tmp(state: &Path) -> io::Result<(PathBuf, DirId)> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    let dir = state.join("tmp");
    match std::fs::symlink_metadata(&dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => std::fs::remove_file(&dir)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: open with a NUL-terminated path; the fd is owned from here.
    let fd = unsafe {
        let fd = libc::open(
            c.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        OwnedFd::from_raw_fd(fd)
    };
    // SAFETY: fstat into a zeroed stack struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((dir, (st.st_dev, st.st_ino)))
}

/// Checks that no other account can replace `dir` or a directory on its
/// way: every one of them, symlinks resolved, owned by this account or by
/// root and not writable by group or others unless sticky (`/tmp`, where
/// only an entry's owner may rename it). A state directory under another
/// account's home (root with `sudo -E`, a shared `jobs.state_dir`) could
/// otherwise be swapped for one of theirs between agent-rsh's checks and
/// its writes. Returns what is wrong, naming the directory.
pub fn safe_ancestors(dir: &Path) -> Result<(), UnsafePath> {
    use std::os::unix::fs::MetadataExt;
    let real = dir.canonicalize().map_err(|e| UnsafePath::Resolve {
        dir: dir.to_path_buf(),
        source: e,
    })?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    for a in real.ancestors() {
        let m = std::fs::metadata(a).map_err(|e| UnsafePath::Read {
            path: a.to_path_buf(),
            source: e,
        })?;
        let owner_ok = m.uid() == me || m.uid() == 0;
        let mode_ok = m.mode() & 0o022 == 0 || m.mode() & libc::S_ISVTX != 0;
        if !owner_ok {
            return Err(UnsafePath::Owner {
                ancestor: a.to_path_buf(),
                dir: dir.to_path_buf(),
                uid: m.uid(),
                me,
            });
        }
        if !mode_ok {
            return Err(UnsafePath::Writable {
                ancestor: a.to_path_buf(),
                dir: dir.to_path_buf(),
                mode: m.mode() & 0o7777,
            });
        }
    }
    Ok(())
}

/// Why `safe_ancestors` refuses a directory, naming it.
#[derive(Debug, thiserror::Error)]
pub enum UnsafePath {
    #[error("cannot resolve {}: {source}", .dir.display())]
    Resolve { dir: PathBuf, source: io::Error },
    #[error("cannot read {}: {source}", .path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error(
        "{} (on the way to {}) is owned by uid {uid}, not by uid {me} or root: another account could replace what agent-rsh keeps there",
        .ancestor.display(),
        .dir.display()
    )]
    Owner {
        ancestor: PathBuf,
        dir: PathBuf,
        uid: u32,
        me: u32,
    },
    #[error(
        "{} (on the way to {}) is writable by others (mode {mode:o}): another account could replace what agent-rsh keeps there",
        .ancestor.display(),
        .dir.display()
    )]
    Writable {
        ancestor: PathBuf,
        dir: PathBuf,
        mode: u32,
    },
}

/// The name of a workspace's state directory inside its base: the
/// workspace's own name and a hash of its path.
pub fn state_leaf(workspace: &Path) -> String {
    let name: String = workspace
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    // FNV-1a: stable across runs and builds.
    let hash = workspace
        .as_os_str()
        .as_encoded_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        });
    format!("{name}-{hash:016x}")
}

pub(crate) fn make_private(dir: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
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
        // A shared flock tells `jobs --gc` the workspace is in use (std
        // opens with O_CLOEXEC: the child does not get it).
        let in_use = std::fs::File::open(&root).ok();
        if let Some(f) = &in_use {
            crate::sys::try_lock_shared(f);
        }
        Ok(Workspace {
            root,
            held: None,
            temp: Some(dir),
            _in_use: in_use,
        })
    }

    /// An existing directory that outlives the run. It is opened once;
    /// the refusal of `refuse_system` (a system directory, an ancestor of
    /// `policy_file`) applies to the canonical path of the directory
    /// actually opened, which the run then uses: a symlink swapped after
    /// an earlier check cannot make it another directory. `identity` lets
    /// each later use (the Landlock rule, the mount view's bind) make sure
    /// it reaches this same directory.
    pub fn persistent(dir: &Path, policy_file: Option<&Path>) -> Result<Workspace, OpenError> {
        let io = |e: io::Error| {
            OpenError::Io(io::Error::new(
                e.kind(),
                format!("workspace {}: {e}", dir.display()),
            ))
        };
        let (fd, id) = open_dir(dir).map_err(io)?;
        let root = held_path(&fd, id).map_err(io)?;
        refuse_canonical(dir, &root, policy_file).map_err(OpenError::Refused)?;
        Ok(Workspace {
            root,
            held: Some((fd, id)),
            temp: None,
            _in_use: None,
        })
    }

    /// The device and inode of a persistent workspace's directory.
    pub fn identity(&self) -> Option<DirId> {
        self.held.as_ref().map(|(_, id)| *id)
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
        if rel.as_os_str().is_empty() && self.is_fresh() {
            // The root of a directory this run just made (0700, canonical
            // since `fresh`): nothing to resolve.
            return Ok(self.root.clone());
        }
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

impl Drop for Workspace {
    /// A fresh workspace is removed: most runs leave it empty (under the
    /// mount view the command writes into a tmpfs over it), so one `rmdir`
    /// first; anything else is removed the careful way (tempfile's
    /// recursive removal, which does not follow symlinks).
    fn drop(&mut self) {
        if let Some(t) = self.temp.take() {
            if std::fs::remove_dir(t.path()).is_ok() {
                // Gone already: only disarm the TempDir.
                let _ = t.keep();
            } else {
                drop(t);
            }
        }
    }
}

/// Directories that must never be a persistent workspace (the workspace is
/// the run's write scope): the system's own. Their first-level children
/// under `/var` and `/run` (`/var/lib`, `/var/log`, `/run/user`, ...) are
/// shared by every service and refused too; everything below `TREES` is.
const SYSTEM_DIRS: [&str; 11] = [
    "/bin", "/boot", "/dev", "/etc", "/lib", "/proc", "/run", "/sbin", "/sys", "/usr", "/var",
];

/// Trees in which no directory is a workspace: the kernel's views, the
/// configuration and the installed programs.
const SYSTEM_TREES: [&str; 8] = [
    "/bin", "/boot", "/dev", "/etc", "/proc", "/sbin", "/sys", "/usr",
];

/// Areas whose own first-level children are system directories too.
const SHARED_AREAS: [&str; 2] = ["/var", "/run"];

/// Why `dir` (canonical) is a system directory, if it is one.
fn system_reason(dir: &Path) -> Option<String> {
    if dir == Path::new("/") {
        return Some("the root directory".into());
    }
    let mut parts = dir.components().skip(1);
    let top = parts.next()?.as_os_str().to_str()?.to_string();
    let depth = 1 + parts.count();
    let top_path = format!("/{top}");
    // /lib, /lib32, /lib64, /libx32, /libexec
    let lib = top.strip_prefix("lib").is_some_and(|rest| {
        rest.chars().all(|c| c.is_ascii_digit()) || rest == "x32" || rest == "exec"
    });
    if depth == 1 && (SYSTEM_DIRS.contains(&top_path.as_str()) || lib) {
        return Some("a system directory".into());
    }
    if SYSTEM_TREES.contains(&top_path.as_str()) || lib {
        return Some(format!("inside the system directory {top_path}"));
    }
    if depth == 2 && SHARED_AREAS.contains(&top_path.as_str()) {
        return Some(format!(
            "a system directory shared by every service under {top_path}"
        ));
    }
    None
}

/// The device and inode of a directory: what makes it the same one at
/// each use, whatever its path names by then.
pub type DirId = (u64, u64);

/// Why a persistent workspace cannot be used.
#[derive(Debug)]
pub enum OpenError {
    /// It cannot be opened, or is not a directory.
    Io(io::Error),
    /// It is a system directory or holds the policy (`workspace.system`).
    Refused(Denial),
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::Io(e) => write!(f, "{e}"),
            OpenError::Refused(d) => write!(f, "{}", d.reason),
        }
    }
}

/// Opens `dir` (following symlinks, once) as an O_PATH directory fd.
fn open_dir(dir: &Path) -> io::Result<(std::os::fd::OwnedFd, DirId)> {
    use std::os::fd::{AsRawFd, FromRawFd};
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: open with a NUL-terminated path; the fd is owned from here.
    let fd = unsafe {
        let fd = libc::open(
            c.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            let e = io::Error::last_os_error();
            return Err(if e.raw_os_error() == Some(libc::ENOTDIR) {
                io::Error::other("not a directory")
            } else {
                e
            });
        }
        std::os::fd::OwnedFd::from_raw_fd(fd)
    };
    // SAFETY: fstat into a zeroed stack struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((fd, (st.st_dev, st.st_ino)))
}

/// The canonical path of the directory `fd` holds, as the kernel names
/// what it opened (/proc/self/fd), checked to name that very directory.
fn held_path(fd: &std::os::fd::OwnedFd, id: DirId) -> io::Result<PathBuf> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;
    let path = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
    let same = path.is_absolute()
        && std::fs::metadata(&path).is_ok_and(|m| m.is_dir() && (m.dev(), m.ino()) == id);
    if !same {
        return Err(io::Error::other(
            "the directory was moved or replaced while it was being opened; try again",
        ));
    }
    Ok(path)
}

/// Refuses a persistent workspace (`--workspace`, the login shell's home)
/// that is `/`, a system directory, an ancestor of the policy file, or a
/// symlink to one of these: the workspace becomes the run's write scope, so
/// any of them would hand the system (or the policy) to the command.
/// A directory that does not exist passes here; opening it fails later.
/// `Workspace::persistent` applies the same refusal to the directory it
/// opened, which is what the run uses.
pub fn refuse_system(dir: &Path, policy_file: Option<&Path>) -> Result<(), Denial> {
    let Ok(real) = dir.canonicalize() else {
        return Ok(());
    };
    refuse_canonical(dir, &real, policy_file)
}

/// `refuse_system` for `dir` whose canonical path is `real`.
fn refuse_canonical(dir: &Path, real: &Path, policy_file: Option<&Path>) -> Result<(), Denial> {
    let shown = if real == dir {
        format!("{}", dir.display())
    } else {
        format!("{} (which is {})", dir.display(), real.display())
    };
    let hint = "use a project directory of your own (under /home, /srv or /tmp, for instance), or leave --workspace out for a fresh private one per run";
    if let Some(why) = system_reason(real) {
        return Err(Denial::new(
            "workspace.system",
            format!("the workspace {shown} is {why}; a run may change everything in its workspace"),
            hint,
        ));
    }
    if let Some(file) = policy_file {
        let file = file.canonicalize().unwrap_or_else(|_| file.to_path_buf());
        if file.starts_with(real) {
            return Err(Denial::new(
                "workspace.system",
                format!(
                    "the workspace {shown} contains the policy file {}; a run could rewrite its own policy",
                    file.display()
                ),
                "use a directory that does not contain the policy (keep the policy in /etc/agent-rsh/, for instance), or leave --workspace out for a fresh private one per run",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_directories_are_named() {
        let refused = [
            "/",
            "/bin",
            "/boot",
            "/dev",
            "/etc",
            "/lib",
            "/lib64",
            "/lib32",
            "/libx32",
            "/proc",
            "/run",
            "/sbin",
            "/sys",
            "/usr",
            "/var",
            "/etc/ssh",
            "/usr/local/bin",
            "/proc/1",
            "/sys/fs/cgroup",
            "/dev/shm",
            "/lib/x86_64-linux-gnu",
            "/var/lib",
            "/var/log",
            "/var/tmp",
            "/run/user",
            "/boot/grub",
        ];
        for d in refused {
            assert!(system_reason(Path::new(d)).is_some(), "{d} accepted");
        }
        let accepted = [
            "/home/me",
            "/home",
            "/tmp",
            "/tmp/x",
            "/srv/proj",
            "/var/tmp/job",
            "/var/lib/ci/work",
            "/run/user/1000",
            "/opt/work",
            "/root",
            "/library",
        ];
        for d in accepted {
            assert_eq!(system_reason(Path::new(d)), None, "{d} refused");
        }
    }

    #[test]
    fn symlinks_and_policy_ancestors_are_refused() {
        let t = tempfile::tempdir().unwrap();
        let link = t.path().join("etc-link");
        std::os::unix::fs::symlink("/etc", &link).unwrap();
        let d = refuse_system(&link, None).unwrap_err();
        assert_eq!(d.rule, "workspace.system");
        assert!(d.reason.contains("(which is /etc)"), "{}", d.reason);
        assert!(d.hint.as_deref().unwrap().contains("--workspace"));
        let dotted = t
            .path()
            .join("..")
            .join("..")
            .join("..")
            .join("..")
            .join("..");
        assert!(
            refuse_system(&dotted, None).is_err(),
            "{}",
            dotted.display()
        );

        let sub = t.path().join("conf");
        std::fs::create_dir(&sub).unwrap();
        let policy = sub.join("policy.toml");
        std::fs::write(&policy, "").unwrap();
        let d = refuse_system(t.path(), Some(&policy)).unwrap_err();
        assert!(
            d.reason.contains("contains the policy file"),
            "{}",
            d.reason
        );
        assert!(refuse_system(&sub, Some(&policy)).is_err());
        let other = t.path().join("work");
        std::fs::create_dir(&other).unwrap();
        refuse_system(&other, Some(&policy)).unwrap();
        refuse_system(&other, None).unwrap();
        // Missing: left to the workspace's own error.
        refuse_system(&t.path().join("missing"), None).unwrap();
    }

    #[test]
    fn persistent_refuses_what_it_opened_and_names_it() {
        let t = tempfile::tempdir().unwrap();
        let link = t.path().join("etc-link");
        std::os::unix::fs::symlink("/etc", &link).unwrap();
        match Workspace::persistent(&link, None) {
            Err(OpenError::Refused(d)) => {
                assert_eq!(d.rule, "workspace.system");
                assert!(d.reason.contains("(which is /etc)"), "{}", d.reason);
            }
            _ => panic!("a symlink to /etc was accepted"),
        }
        let real = t.path().canonicalize().unwrap();
        let policy = real.join("policy.toml");
        std::fs::write(&policy, "").unwrap();
        assert!(matches!(
            Workspace::persistent(t.path(), Some(&policy)),
            Err(OpenError::Refused(_))
        ));
        let work = real.join("work");
        std::fs::create_dir(&work).unwrap();
        let via = t.path().join("via");
        std::os::unix::fs::symlink(&work, &via).unwrap();
        let ws = Workspace::persistent(&via, Some(&policy)).unwrap();
        assert_eq!(ws.root(), work);
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(&work).unwrap();
        assert_eq!(ws.identity(), Some((m.dev(), m.ino())));
        assert!(!ws.is_fresh());
        match Workspace::persistent(&policy, None) {
            Err(OpenError::Io(e)) => assert!(e.to_string().contains("not a directory"), "{e}"),
            _ => panic!("a file was accepted"),
        }
        assert!(matches!(
            Workspace::persistent(&real.join("missing"), None),
            Err(OpenError::Io(_))
        ));
    }

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
