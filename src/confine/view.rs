//! The run's private view of the filesystem: a mount namespace whose root
//! holds only what the policy names.
//!
//! Landlock decides which files a run may read, write and execute, but it
//! does not govern a file's metadata (mode, owner, times, extended
//! attributes) nor the reachability of a UNIX socket by its path. The view
//! closes both: the guardian, in its own mount namespace, builds a fresh
//! root on a small tmpfs and binds into it, at their own paths,
//!
//! - the read scopes and the directories of the programs the run may
//!   execute: read-only, nosuid, nodev;
//! - the workspace and the write scopes: read-write, nosuid, nodev and
//!   noexec unless a `scopes.exec` entry covers them (so the ELF loader
//!   finds nothing there to map); a fresh workspace is a tmpfs of
//!   `limits.workspace_bytes` instead, which bounds what a run can write;
//! - `/dev/null`, `/dev/zero`, `/dev/random`, `/dev/urandom` (and
//!   `/dev/tty` when stdin is relayed through a pty, which `/dev/tty` then
//!   names: the command's controlling terminal): read-only mounts, so their
//!   data flows but the host's nodes keep their mode, owner and times; and
//!   a `/proc` of the run's own PID namespace;
//!
//! then makes the tmpfs read-only and pivots into it. Outside the write
//! scopes every change fails with EROFS whatever the process's ids; a
//! socket outside the scopes is not there to connect to. Symlinks on the
//! way to a scope (`/lib -> usr/lib`) are recreated as symlinks.
//!
//! Everything is computed here in the parent; the guardian only makes
//! system calls (`build_in_guardian`), on buffers prepared in advance.

use super::ConfineError;
use std::collections::{HashMap, HashSet};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// Where the new root is assembled before the pivot. Its old content is
/// hidden only inside the run's mount namespace, and every bind source is
/// opened (`open_tree`) before the tmpfs covers it.
const STAGING: &str = "/tmp";

/// Most binds a view may have (the guardian keeps their fds on its stack).
pub const MAX_BINDS: usize = 192;

/// `build`'s error for a bind whose source was unlinked since it was opened
/// (not an errno: negative).
const UNLINKED: i32 = -libc::ENOENT;

/// How often one bind's source is cloned again after it was replaced.
const BIND_TRIES: u32 = 64;

/// How often the whole view is built again when that did not suffice.
const REBUILD_TRIES: u32 = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Kind {
    /// Read scopes, program directories, exec scopes.
    Read,
    /// The workspace and write scopes, not executable.
    Write,
    /// A write scope that an exec scope covers.
    WriteExec,
    /// A device node.
    Device,
    /// A persistent workspace's `.git`: writable like the workspace, but a
    /// mount point of its own, so it cannot be renamed away or removed and
    /// replaced by a directory the run planted (EBUSY).
    GitDir,
    /// What a git run outside the sandbox would execute or obey: a
    /// persistent workspace's `.git/hooks` and `.git/config`, read-only.
    GitProtected,
}

impl Kind {
    fn attr(self) -> u64 {
        let base = MOUNT_ATTR_NOSUID;
        match self {
            Kind::Read => base | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV,
            Kind::Write => base | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
            Kind::WriteExec => base | MOUNT_ATTR_NODEV,
            // Read-only: the node is the host's inode, whose mode, owner,
            // times and ACL a run (root owns it) must not change; opening it
            // to write still works, as a device's data is not the mount's.
            Kind::Device => base | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOEXEC,
            Kind::GitDir => base | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
            Kind::GitProtected => base | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
        }
    }
    fn writable(self) -> bool {
        matches!(self, Kind::Write | Kind::WriteExec | Kind::GitDir)
    }
}

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;
const MOUNT_ATTR_NOEXEC: u64 = 0x8;
const OPEN_TREE_CLONE: u32 = 1;
const MOVE_MOUNT_F_EMPTY_PATH: u32 = 0x4;
const MOVE_MOUNT_T_EMPTY_PATH: u32 = 0x40;

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// How a bind whose source was replaced by a rename (useradd rewriting
/// /etc/passwd, an editor saving a scope file) is cloned again right before
/// its move, so that the window a replacement can hit is two system calls
/// wide, not the whole assembly.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Retry {
    /// Outside the staging directory: its path still resolves to the host's
    /// file after the staging tmpfs is mounted.
    Path,
    /// Under the staging directory, which the tmpfs hides: through its
    /// parent directory, opened before the tmpfs is mounted, and its name.
    Beneath { parent: CString, name: CString },
    /// The staging directory or one of its ancestors: a lookup would cross
    /// into the tmpfs. The whole view is built again instead.
    Rebuild,
}

/// One step of the assembly, in order.
enum Step {
    /// Create a directory (errors ignored: it may exist in a bind).
    Dir(CString),
    /// Create an empty file to mount a file on (errors ignored).
    File(CString),
    Symlink {
        target: CString,
        link: CString,
    },
    /// Move the `index`th cloned tree onto `dest`.
    Bind {
        index: usize,
        dest: Dest,
    },
    /// A fresh tmpfs for the workspace, with its Landlock rule added in the
    /// guardian (the rule the parent made names the directory beneath).
    WorkspaceTmpfs {
        dest: CString,
        options: CString,
        /// An exec scope covers the workspace: mounted without noexec.
        exec: bool,
        /// The private `/tmp` of a fresh workspace's run: its Landlock
        /// rule never grants execution.
        tmp: bool,
    },
    /// Create the directories of `dest` beneath the private `/tmp` (a
    /// mount point for what follows), following no symlink.
    MakeBeneath(Dest),
    Proc(CString),
    /// A file written on the tmpfs (which then becomes read-only), with a
    /// read-only Landlock rule added in the guardian.
    Data {
        dest: CString,
        data: Vec<u8>,
    },
}

/// Where a bind is moved: a path on the staging tmpfs (which only the
/// guardian writes), or a path beneath the private `/tmp`, which a run of
/// the same workspace may have filled with anything: there each directory
/// on the way is made and opened without following a symlink, and the
/// mount point (a directory, or an empty file for a file) is made too.
enum Dest {
    Path(CString),
    Beneath {
        /// The staged `/tmp`.
        root: CString,
        /// The components below it.
        comps: Vec<CString>,
        file: bool,
    },
}

/// What `/tmp` is in a view that gives the run its own.
#[derive(Debug, Clone)]
pub enum PrivateTmp {
    /// A fresh workspace's run: a tmpfs this size (0: the kernel's
    /// default, half the memory; the run's cgroup bounds it either way).
    Tmpfs(u64),
    /// A persistent workspace's runs: this directory in its state
    /// directory, with the device and inode it must have.
    Dir(PathBuf, DirId),
}

/// The paths of the shells that run agent-rsh's interpreter in a view.
pub const SHELL_PATHS: &[&str] = &[
    "/bin/sh",
    "/usr/bin/sh",
    "/bin/bash",
    "/usr/bin/bash",
    "/bin/dash",
    "/usr/bin/dash",
];

use crate::script::{PRIVATE_TMP, SHELL_JOB};

/// Landlock READ_FILE.
const READ_FILE: u64 = 1 << 2;

/// A directory's device and inode.
type DirId = (u64, u64);

/// One mount of the view, in path order.
enum Entry {
    Bind(Kind),
    WorkspaceTmpfs,
    Tmp(PrivateTmp),
}

/// A view ready to be built in the guardian.
pub struct View {
    /// Sources and mount attributes, cloned before the tmpfs is mounted,
    /// and the device and inode a source must have (the persistent
    /// workspace: the directory opened and checked for this run).
    sources: Vec<(CString, u64, Option<DirId>)>,
    /// How a source is cloned again when it was replaced by a rename since
    /// it was first cloned (see `Retry`), one per source.
    retries: Vec<Retry>,
    steps: Vec<Step>,
    /// Landlock ruleset and rights for a tmpfs workspace.
    landlock: Option<(i32, u64)>,
    staging: CString,
    /// What the report says.
    pub workspace_tmpfs: Option<u64>,
    /// The shells run agent-rsh's interpreter.
    pub shells: bool,
    /// What `/tmp` is, when it is the run's own (for the report).
    pub private_tmp: Option<String>,
}

/// What the view is built from.
pub struct Inputs<'a> {
    pub read: &'a [PathBuf],
    /// The policy's search path: visible so that `#!/bin/sh` finds an
    /// allowed `/usr/bin/sh` through a `/bin -> usr/bin` link.
    pub search_path: &'a [PathBuf],
    /// Files (programs, loaders) whose directories are made visible.
    pub programs: Vec<&'a Path>,
    /// Symlinks on the way to the programs, outside the search path
    /// (`landlock::Programs::links`), recreated where they are.
    pub links: &'a [PathBuf],
    pub exec: &'a [PathBuf],
    pub write: &'a [PathBuf],
    pub workspace: &'a Path,
    /// A persistent workspace's device and inode as it was opened and
    /// checked: its bind is made of that directory or the view fails.
    pub workspace_id: Option<(u64, u64)>,
    /// `Some(bytes)`: the workspace is fresh and becomes a tmpfs this size.
    pub workspace_bytes: Option<u64>,
    pub tty: bool,
    /// Nested shells: agent-rsh's binary, bound over every shell of
    /// `SHELL_PATHS`, and the job it reads from `SHELL_JOB`.
    /// Shells the policy allows by name stay the real programs.
    pub shell: Option<(&'a Path, Vec<u8>, &'a [String])>,
    /// `/tmp` is the run's own (`Policy::private_tmp`), not the host's:
    /// mounted first, the binds below it (a workspace under `/tmp`) on it.
    pub private_tmp: Option<PrivateTmp>,
}

#[derive(Default)]
struct Plan {
    /// (dest, kind), dest canonical and symlink-free.
    binds: Vec<(PathBuf, Kind)>,
    symlinks: Vec<(PathBuf, PathBuf)>,
    /// Paths already exposed with a kind: exposing them again would add
    /// nothing (the same binds and symlinks), so it is skipped.
    exposed: HashSet<(PathBuf, Kind)>,
    /// What one planning has learnt of each path it walked: `None` when it
    /// does not exist, `Some(None)` for a directory or file,
    /// `Some(Some((target, canonical)))` for a symlink. Every program of
    /// an allowlist shares `/usr/bin`: it is examined once, not per program.
    walked: HashMap<PathBuf, Option<Option<(PathBuf, PathBuf)>>>,
}

impl Plan {
    /// Makes `path` reachable in the view with `kind`: symlinks on the way
    /// are recreated, the symlink-free path is bound.
    fn expose(&mut self, path: &Path, kind: Kind, depth: u32) {
        if depth > 16 || !path.is_absolute() {
            return;
        }
        if !self.exposed.insert((path.to_path_buf(), kind)) {
            return;
        }
        let mut cur = PathBuf::from("/");
        let comps: Vec<Component> = path.components().collect();
        for (i, c) in comps.iter().enumerate() {
            let Component::Normal(name) = c else {
                if *c == Component::ParentDir {
                    cur.pop();
                }
                continue;
            };
            let next = cur.join(name);
            let walked = self
                .walked
                .entry(next.clone())
                .or_insert_with(|| walk(&next))
                .clone();
            match walked {
                Some(Some((target, real))) => {
                    if !self.symlinks.iter().any(|(l, _)| *l == next) {
                        self.symlinks.push((next, target));
                    }
                    let mut rest = real;
                    for c in &comps[i + 1..] {
                        rest.push(c.as_os_str());
                    }
                    return self.expose(&rest, kind, depth + 1);
                }
                Some(None) => cur = next,
                None => return,
            }
        }
        self.binds.push((cur, kind));
    }
}

/// One path component as `expose` needs it (see `Plan::walked`). A
/// symlink whose target cannot be read or resolved counts as missing.
fn walk(path: &Path) -> Option<Option<(PathBuf, PathBuf)>> {
    let m = std::fs::symlink_metadata(path).ok()?;
    if !m.file_type().is_symlink() {
        return Some(None);
    }
    let target = std::fs::read_link(path).ok()?;
    let real = std::fs::canonicalize(path).ok()?;
    Some(Some((target, real)))
}

/// The binds that keep a persistent workspace's repository from being
/// turned against a later git outside the sandbox: `.git` a mount point of
/// its own, its `hooks` and `config` read-only. Git inside the run still
/// writes objects, refs, the index and logs (add, commit, stash, checkout,
/// switch, rebase); `git config` and `git remote add`, which rewrite the
/// config, fail with EBUSY or EROFS. A missing `hooks` directory is
/// created (empty, owned as `.git` is) so the run cannot create it. A
/// `.git` that is a file (a linked worktree) or a symlink is left alone.
fn git_protection(workspace: &Path) -> Vec<(PathBuf, Kind)> {
    use std::os::unix::fs::MetadataExt;
    let git = workspace.join(".git");
    let Ok(m) = std::fs::symlink_metadata(&git) else {
        return Vec::new();
    };
    if !m.is_dir() {
        return Vec::new();
    }
    let mut v = vec![(git.clone(), Kind::GitDir)];
    let hooks = git.join("hooks");
    if std::fs::symlink_metadata(&hooks).is_err() && std::fs::create_dir(&hooks).is_ok() {
        let _ = std::os::unix::fs::chown(&hooks, Some(m.uid()), Some(m.gid()));
    }
    for p in [hooks, git.join("config")] {
        match std::fs::symlink_metadata(&p) {
            Ok(pm) if !pm.file_type().is_symlink() => v.push((p, Kind::GitProtected)),
            _ => {}
        }
    }
    v
}

/// How `dest` (canonical, symlink-free) is cloned again (see `Retry`).
fn retry_for(dest: &Path) -> Result<Retry, std::ffi::NulError> {
    let staging = Path::new(STAGING);
    if staging.starts_with(dest) {
        return Ok(Retry::Rebuild);
    }
    if !dest.starts_with(staging) {
        return Ok(Retry::Path);
    }
    match (dest.parent(), dest.file_name()) {
        (Some(parent), Some(name)) => Ok(Retry::Beneath {
            parent: CString::new(parent.as_os_str().as_bytes())?,
            name: CString::new(name.as_bytes())?,
        }),
        _ => Ok(Retry::Rebuild),
    }
}

/// Opens (`O_PATH`) the mount point `comps` beneath `root`, making each
/// directory on the way and, last, the directory or (`file`) the empty
/// file: every lookup one component, none following a symlink, so nothing
/// a run left in its private /tmp leads the guardian elsewhere (a symlink
/// on the way fails the view with ELOOP or ENOTDIR).
///
/// # Safety
/// Raw system calls on NUL-terminated strings.
unsafe fn open_beneath(root: &CString, comps: &[CString], file: bool) -> Result<i32, i32> {
    // SAFETY: as the caller promises.
    unsafe {
        let mut fd = libc::open(
            root.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return Err(super::errno());
        }
        for (i, c) in comps.iter().enumerate() {
            let want_file = file && i + 1 == comps.len();
            let want = if want_file {
                libc::S_IFREG
            } else {
                libc::S_IFDIR
            };
            let mut next = -1;
            // What a run left at that name (a symlink, a file) is its own
            // scratch: it is removed and the mount point made again, once.
            for attempt in 0..2 {
                if want_file {
                    libc::mknodat(fd, c.as_ptr(), libc::S_IFREG | 0o644, 0);
                } else {
                    libc::mkdirat(fd, c.as_ptr(), 0o755);
                }
                // O_PATH | O_NOFOLLOW opens a symlink itself, which the
                // type check below then refuses.
                next = libc::openat(
                    fd,
                    c.as_ptr(),
                    libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                );
                let mut st: libc::stat = std::mem::zeroed();
                if next >= 0 && libc::fstat(next, &mut st) == 0 && st.st_mode & libc::S_IFMT == want
                {
                    break;
                }
                if next >= 0 {
                    libc::close(next);
                    next = -1;
                }
                if attempt == 0 {
                    libc::unlinkat(fd, c.as_ptr(), 0);
                }
            }
            libc::close(fd);
            if next < 0 {
                return Err(libc::ENOTDIR);
            }
            fd = next;
        }
        Ok(fd)
    }
}

impl View {
    /// Plans the view. Paths that do not exist are left out, as the
    /// Landlock rule set leaves them out.
    pub fn prepare(inp: &Inputs, ruleset: Option<(i32, u64)>) -> Result<View, ConfineError> {
        let mut plan = Plan::default();
        for p in inp.read {
            plan.expose(p, Kind::Read, 0);
        }
        for p in inp.search_path {
            plan.expose(p, Kind::Read, 0);
        }
        for p in &inp.programs {
            if let Some(dir) = p.parent() {
                plan.expose(dir, Kind::Read, 0);
            }
        }
        for p in inp.links {
            plan.expose(p, Kind::Read, 0);
        }
        for p in inp.exec {
            plan.expose(p, Kind::Read, 0);
        }
        if inp.shell.is_some() {
            for p in SHELL_PATHS {
                plan.expose(Path::new(p), Kind::Read, 0);
            }
        }
        let covered_by_exec = |p: &Path| inp.exec.iter().any(|e| p.starts_with(e));
        for p in inp.write {
            let k = if covered_by_exec(p) {
                Kind::WriteExec
            } else {
                Kind::Write
            };
            plan.expose(p, k, 0);
        }
        for dev in ["/dev/null", "/dev/zero", "/dev/random", "/dev/urandom"] {
            plan.binds.push((dev.into(), Kind::Device));
        }
        if inp.tty {
            plan.binds.push(("/dev/tty".into(), Kind::Device));
        }
        let workspace = inp.workspace.to_path_buf();
        if inp.workspace_bytes.is_none() {
            let k = if covered_by_exec(&workspace) {
                Kind::WriteExec
            } else {
                Kind::Write
            };
            plan.binds.push((workspace.clone(), k));
            plan.binds.extend(git_protection(&workspace));
        }

        // Parents before children; among equal paths the writable kind wins.
        plan.binds.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        plan.binds.dedup_by(|b, a| a.0 == b.0);
        let mut kept: Vec<(PathBuf, Kind)> = Vec::new();
        for (dest, kind) in plan.binds {
            // A path inside an earlier bind is already visible with that
            // bind's rights; it needs its own mount only to become writable
            // (or executable) where the outer one is not.
            let outer = kept.iter().rev().find(|(d, _)| dest.starts_with(d));
            let needed = match outer {
                None => true,
                Some((_, ok)) => {
                    matches!(kind, Kind::Device | Kind::GitDir | Kind::GitProtected)
                        || (kind.writable() && !ok.writable())
                        || (kind == Kind::WriteExec && *ok == Kind::Write)
                }
            };
            if needed {
                kept.push((dest, kind));
            }
        }
        if kept.len() > MAX_BINDS {
            return Err(ConfineError::ViewTooManyMounts {
                needed: kept.len(),
                max: MAX_BINDS,
            });
        }

        let nul = |p: &Path| ConfineError::ViewPath {
            path: p.to_path_buf(),
        };
        let staged = |p: &Path| -> Result<CString, ConfineError> {
            let mut b = STAGING.as_bytes().to_vec();
            b.extend_from_slice(p.as_os_str().as_bytes());
            CString::new(b).map_err(|_| nul(p))
        };
        let cstr = |p: &Path| CString::new(p.as_os_str().as_bytes()).map_err(|_| nul(p));
        let mut steps = Vec::new();
        let mut made: Vec<PathBuf> = Vec::new();
        let mut mounted: Vec<PathBuf> = Vec::new();
        let mut sources = Vec::new();
        let mut retries = Vec::new();
        // Creates the missing parents of `p` inside the tmpfs (those under a
        // bind exist already).
        let mut parents =
            |p: &Path, steps: &mut Vec<Step>, mounted: &[PathBuf]| -> Result<(), ConfineError> {
                let mut acc = PathBuf::from("/");
                let comps: Vec<_> = p.components().skip(1).collect();
                for c in comps.iter().take(comps.len().saturating_sub(1)) {
                    acc.push(c.as_os_str());
                    if mounted.iter().any(|m| acc.starts_with(m)) || made.contains(&acc) {
                        continue;
                    }
                    made.push(acc.clone());
                    steps.push(Step::Dir(staged(&acc)?));
                }
                Ok(())
            };
        // Symlinks first: their parents are tmpfs directories, and a bind
        // below a symlink's target is reached through the target's path.
        for (link, target) in &plan.symlinks {
            parents(link, &mut steps, &mounted)?;
            steps.push(Step::Symlink {
                target: cstr(target)?,
                link: staged(link)?,
            });
        }
        let mut proc_done = false;
        let mut workspace_done = inp.workspace_bytes.is_none();
        // The private /tmp, unless the workspace or a bind is /tmp or lies
        // above it (the run then sees that, as the policy says).
        let tmp = Path::new("/tmp");
        let private_tmp = inp.private_tmp.clone().filter(|_| {
            !tmp.starts_with(&workspace) && !kept.iter().any(|(d, _)| tmp.starts_with(d))
        });
        let mut entries: Vec<(PathBuf, Entry)> =
            kept.into_iter().map(|(d, k)| (d, Entry::Bind(k))).collect();
        if inp.workspace_bytes.is_some() {
            entries.push((workspace.clone(), Entry::WorkspaceTmpfs));
        }
        if let Some(t) = &private_tmp {
            entries.push((tmp.to_path_buf(), Entry::Tmp(t.clone())));
        }
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let staged_tmp = staged(tmp)?;
        // `dest` below the private /tmp and no other mount: made beneath it.
        let beneath = |dest: &Path, mounted: &[PathBuf], file: bool| -> Option<Dest> {
            private_tmp.as_ref()?;
            let innermost = mounted
                .iter()
                .filter(|m| dest.starts_with(m) && m.as_path() != dest)
                .max_by_key(|m| m.components().count())?;
            if innermost != tmp {
                return None;
            }
            let comps = dest
                .strip_prefix(tmp)
                .ok()?
                .components()
                .map(|c| CString::new(c.as_os_str().as_bytes()).ok())
                .collect::<Option<Vec<_>>>()?;
            Some(Dest::Beneath {
                root: staged_tmp.clone(),
                comps,
                file,
            })
        };
        let mut tmp_report = None;
        for (dest, entry) in entries {
            if !proc_done && dest.as_path() > Path::new("/proc") {
                steps.push(Step::Dir(staged(Path::new("/proc"))?));
                steps.push(Step::Proc(staged(Path::new("/proc"))?));
                mounted.push("/proc".into());
                proc_done = true;
            }
            parents(&dest, &mut steps, &mounted)?;
            match entry {
                Entry::WorkspaceTmpfs => {
                    match beneath(&dest, &mounted, false) {
                        Some(d) => steps.push(Step::MakeBeneath(d)),
                        None => steps.push(Step::Dir(staged(&dest)?)),
                    }
                    let bytes = inp.workspace_bytes.unwrap_or(0);
                    steps.push(Step::WorkspaceTmpfs {
                        exec: covered_by_exec(&dest),
                        dest: staged(&dest)?,
                        options: CString::new(format!("size={bytes},mode=0700,nr_inodes=0"))
                            .expect("no NUL"),
                        tmp: false,
                    });
                    workspace_done = true;
                }
                Entry::Tmp(PrivateTmp::Tmpfs(bytes)) => {
                    steps.push(Step::Dir(staged(&dest)?));
                    let size = if bytes > 0 {
                        format!("size={bytes},")
                    } else {
                        String::new()
                    };
                    steps.push(Step::WorkspaceTmpfs {
                        exec: false,
                        dest: staged(&dest)?,
                        options: CString::new(format!("{size}mode=0700,nr_inodes=0"))
                            .expect("no NUL"),
                        tmp: true,
                    });
                    tmp_report = Some(if bytes > 0 {
                        format!("a tmpfs of this run's own ({bytes} B), gone with it")
                    } else {
                        "a tmpfs of this run's own, gone with it".to_string()
                    });
                }
                Entry::Tmp(PrivateTmp::Dir(src, id)) => {
                    steps.push(Step::Dir(staged(&dest)?));
                    steps.push(Step::Bind {
                        index: sources.len(),
                        dest: Dest::Path(staged(&dest)?),
                    });
                    sources.push((cstr(&src)?, Kind::Write.attr(), Some(id)));
                    retries.push(retry_for(&src).map_err(|_| nul(&src))?);
                    tmp_report = Some(format!(
                        "{}, the workspace's own, kept between its runs",
                        src.display()
                    ));
                }
                Entry::Bind(kind) => {
                    let inside = mounted.iter().any(|m| dest.starts_with(m) && *m != dest);
                    let is_dir = std::fs::metadata(&dest)
                        .map(|m| m.is_dir())
                        .unwrap_or(false);
                    let to = match beneath(&dest, &mounted, !is_dir) {
                        Some(d) => d,
                        None => {
                            if !inside {
                                steps.push(if is_dir {
                                    Step::Dir(staged(&dest)?)
                                } else {
                                    Step::File(staged(&dest)?)
                                });
                            }
                            Dest::Path(staged(&dest)?)
                        }
                    };
                    steps.push(Step::Bind {
                        index: sources.len(),
                        dest: to,
                    });
                    let expect = inp.workspace_id.filter(|_| dest == workspace);
                    sources.push((cstr(&dest)?, kind.attr(), expect));
                    retries.push(retry_for(&dest).map_err(|_| nul(&dest))?);
                }
            }
            mounted.push(dest);
        }
        debug_assert!(workspace_done);
        // Nested shells, unless the root itself is a bind (nothing could
        // be written on it without writing to the host's).
        let mut shells = false;
        if let Some((binary, job, allowed)) = &inp.shell
            && !mounted.iter().any(|m| m == Path::new("/"))
        {
            // The real files of shells the policy allows by name stay real,
            // under every name that leads to them.
            let mut done: Vec<PathBuf> = SHELL_PATHS
                .iter()
                .filter(|p| {
                    let name = Path::new(p).file_name().and_then(|n| n.to_str());
                    name.is_some_and(|n| allowed.iter().any(|a| a == n))
                })
                .filter_map(|p| std::fs::canonicalize(p).ok())
                .collect();
            let kept = done.len();
            for p in SHELL_PATHS {
                let Ok(real) = std::fs::canonicalize(p) else {
                    continue;
                };
                let allowed_by_name = real
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| allowed.iter().any(|a| a == n));
                if done.contains(&real)
                    || allowed_by_name
                    || !mounted.iter().any(|m| real.starts_with(m))
                {
                    continue;
                }
                steps.push(Step::Bind {
                    index: sources.len(),
                    dest: Dest::Path(staged(&real)?),
                });
                sources.push((cstr(binary)?, Kind::Read.attr(), None));
                retries.push(retry_for(binary).map_err(|_| nul(binary))?);
                done.push(real);
            }
            let job_path = Path::new(SHELL_JOB);
            if let Some(dir) = job_path.parent() {
                steps.push(Step::Dir(staged(dir)?));
            }
            steps.push(Step::Data {
                dest: staged(job_path)?,
                data: job.clone(),
            });
            shells = done.len() > kept;
        }
        if tmp_report.is_some() {
            let mark = Path::new(PRIVATE_TMP);
            if let Some(dir) = mark.parent() {
                steps.push(Step::Dir(staged(dir)?));
            }
            steps.push(Step::Data {
                dest: staged(mark)?,
                data: b"/tmp is the run's own\n".to_vec(),
            });
        }
        if !proc_done {
            steps.push(Step::Dir(staged(Path::new("/proc"))?));
            steps.push(Step::Proc(staged(Path::new("/proc"))?));
        }
        // The standard links into /proc/self/fd.
        if made.contains(&PathBuf::from("/dev")) {
            for (link, target) in [
                ("/dev/fd", "/proc/self/fd"),
                ("/dev/stdin", "/proc/self/fd/0"),
                ("/dev/stdout", "/proc/self/fd/1"),
                ("/dev/stderr", "/proc/self/fd/2"),
            ] {
                steps.push(Step::Symlink {
                    target: cstr(Path::new(target))?,
                    link: staged(Path::new(link))?,
                });
            }
        }
        Ok(View {
            sources,
            retries,
            steps,
            landlock: ruleset,
            staging: CString::new(STAGING).expect("no NUL"),
            workspace_tmpfs: inp.workspace_bytes,
            shells,
            private_tmp: tmp_report,
        })
    }

    /// Number of mounts the view makes (for the report).
    pub fn mounts(&self) -> usize {
        let tmpfs = self
            .steps
            .iter()
            .filter(|s| matches!(s, Step::WorkspaceTmpfs { .. }))
            .count();
        self.sources.len() + 2 + tmpfs
    }

    /// In the guardian, right after `clone(CLONE_NEWNS | ...)` and before
    /// the command is forked: builds the view and pivots into it. Raw
    /// system calls only; returns the errno of the first failure.
    pub fn build_in_guardian(&self) -> Result<(), i32> {
        let mut fds = [-1i32; MAX_BINDS];
        let mut parents = [-1i32; MAX_BINDS];
        let mut tries = 0;
        loop {
            let r = self.build(&mut fds, &mut parents);
            for fd in fds.iter_mut().chain(parents.iter_mut()) {
                if *fd >= 0 {
                    // SAFETY: closing fds this function opened.
                    unsafe { libc::close(*fd) };
                    *fd = -1;
                }
            }
            match r {
                // A source replaced again and again while its bind was
                // retried, or one that cannot be cloned again alone (see
                // `Retry::Rebuild`): the staging tmpfs, which hides the
                // sources under it, goes, and the view is built again from
                // the paths.
                Err(UNLINKED) if tries < REBUILD_TRIES => {
                    tries += 1;
                    // SAFETY: unmounting the staging tmpfs this function
                    // mounted (only mounted when a bind can fail).
                    unsafe { libc::umount2(self.staging.as_ptr(), libc::MNT_DETACH) };
                }
                Err(UNLINKED) => return Err(libc::ENOENT),
                r => return r,
            }
        }
    }

    /// Clones source `i` (at `path`, relative to `dirfd`) into `fds[i]`,
    /// checks its identity and sets its mount attributes.
    ///
    /// # Safety
    /// Raw system calls; `path` is NUL-terminated, `dirfd` open or AT_FDCWD.
    unsafe fn clone_source(
        &self,
        i: usize,
        dirfd: i32,
        path: &std::ffi::CStr,
        fds: &mut [i32; MAX_BINDS],
    ) -> Result<(), i32> {
        let check = |r: libc::c_long| if r < 0 { Err(super::errno()) } else { Ok(r) };
        let (_, attr, expect) = &self.sources[i];
        // SAFETY: as the caller promises.
        unsafe {
            let fd = check(libc::syscall(
                libc::SYS_open_tree,
                dirfd,
                path.as_ptr(),
                OPEN_TREE_CLONE | libc::O_CLOEXEC as u32 | libc::AT_RECURSIVE as u32,
            ))? as i32;
            fds[i] = fd;
            if let Some((dev, ino)) = expect {
                // The path was replaced since the workspace was checked:
                // no view (the run goes on without it, its Landlock rule
                // made on the checked directory).
                let mut st: libc::stat = std::mem::zeroed();
                check(libc::fstat(fd, &mut st) as libc::c_long)?;
                if (st.st_dev, st.st_ino) != (*dev, *ino) {
                    return Err(libc::ESTALE);
                }
            }
            let ma = MountAttr {
                attr_set: *attr,
                attr_clr: 0,
                propagation: 0,
                userns_fd: 0,
            };
            check(libc::syscall(
                libc::SYS_mount_setattr,
                fd,
                c"".as_ptr(),
                (libc::AT_EMPTY_PATH | libc::AT_RECURSIVE) as u32,
                &ma as *const MountAttr,
                std::mem::size_of::<MountAttr>(),
            ))?;
        }
        Ok(())
    }

    fn build(&self, fds: &mut [i32; MAX_BINDS], parents: &mut [i32; MAX_BINDS]) -> Result<(), i32> {
        let check = |r: libc::c_long| if r < 0 { Err(super::errno()) } else { Ok(r) };
        // SAFETY: raw system calls on NUL-terminated strings prepared in the
        // parent and on stack values.
        unsafe {
            check(libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) as libc::c_long)?;
            for (i, (src, _, _)) in self.sources.iter().enumerate() {
                self.clone_source(i, libc::AT_FDCWD, src, fds)?;
                if let Retry::Beneath { parent, .. } = &self.retries[i] {
                    // Failure only costs the quick retry (a rebuild instead).
                    parents[i] = libc::open(
                        parent.as_ptr(),
                        libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
                    );
                }
            }
            check(libc::mount(
                c"tmpfs".as_ptr(),
                self.staging.as_ptr(),
                c"tmpfs".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                c"mode=0755,size=1m".as_ptr().cast(),
            ) as libc::c_long)?;
            for step in &self.steps {
                match step {
                    Step::Dir(p) => {
                        libc::mkdir(p.as_ptr(), 0o755);
                    }
                    Step::File(p) => {
                        let fd = libc::open(
                            p.as_ptr(),
                            libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC,
                            0o644,
                        );
                        if fd >= 0 {
                            libc::close(fd);
                        }
                    }
                    Step::Symlink { target, link } => {
                        libc::symlink(target.as_ptr(), link.as_ptr());
                    }
                    Step::MakeBeneath(dest) => {
                        if let Dest::Beneath { root, comps, file } = dest {
                            libc::close(open_beneath(root, comps, *file)?);
                        }
                    }
                    Step::Bind { index, dest } => {
                        let i = *index;
                        let mut tries = 0;
                        // Beneath the private /tmp: onto the mount point
                        // opened without following a symlink.
                        let (to_fd, to_path, to_flag) = match dest {
                            Dest::Path(p) => (libc::AT_FDCWD, p.as_c_str(), 0),
                            Dest::Beneath { root, comps, file } => (
                                open_beneath(root, comps, *file)?,
                                c"",
                                MOVE_MOUNT_T_EMPTY_PATH,
                            ),
                        };
                        let close_to = || {
                            if to_fd >= 0 {
                                libc::close(to_fd);
                            }
                        };
                        loop {
                            let moved = check(libc::syscall(
                                libc::SYS_move_mount,
                                fds[i],
                                c"".as_ptr(),
                                to_fd,
                                to_path.as_ptr(),
                                MOVE_MOUNT_F_EMPTY_PATH | to_flag,
                            ));
                            match moved {
                                Ok(_) => {
                                    close_to();
                                    break;
                                }
                                // The source was replaced by a rename after
                                // it was cloned: an unlinked dentry, which
                                // the kernel will not mount. Cloned again
                                // from its path, it is the new file.
                                Err(libc::ENOENT) if tries < BIND_TRIES => {
                                    tries += 1;
                                    libc::close(fds[i]);
                                    fds[i] = -1;
                                    let again = match &self.retries[i] {
                                        Retry::Path => self.clone_source(
                                            i,
                                            libc::AT_FDCWD,
                                            &self.sources[i].0,
                                            fds,
                                        ),
                                        Retry::Beneath { name, .. } if parents[i] >= 0 => {
                                            self.clone_source(i, parents[i], name, fds)
                                        }
                                        _ => Err(UNLINKED),
                                    };
                                    if let Err(e) = again {
                                        close_to();
                                        return Err(e);
                                    }
                                }
                                Err(libc::ENOENT) => {
                                    close_to();
                                    return Err(UNLINKED);
                                }
                                Err(e) => {
                                    close_to();
                                    return Err(e);
                                }
                            }
                        }
                    }
                    Step::WorkspaceTmpfs {
                        dest,
                        options,
                        exec,
                        tmp,
                    } => {
                        let noexec = if *exec { 0 } else { libc::MS_NOEXEC };
                        check(libc::mount(
                            c"tmpfs".as_ptr(),
                            dest.as_ptr(),
                            c"tmpfs".as_ptr(),
                            libc::MS_NOSUID | libc::MS_NODEV | noexec,
                            options.as_ptr().cast(),
                        ) as libc::c_long)?;
                        if let Some((ruleset, access)) = self.landlock {
                            let fd = check(libc::open(
                                dest.as_ptr(),
                                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
                            ) as libc::c_long)? as i32;
                            let access = if *tmp {
                                access & !super::landlock::EXECUTE
                            } else {
                                access
                            };
                            let r = super::sys::landlock_add_path_rule(ruleset, fd, access);
                            libc::close(fd);
                            r?;
                        }
                    }
                    Step::Data { dest, data } => {
                        let fd = check(libc::open(
                            dest.as_ptr(),
                            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                            0o444,
                        ) as libc::c_long)? as i32;
                        let mut at = 0;
                        while at < data.len() {
                            let n = libc::write(fd, data[at..].as_ptr().cast(), data.len() - at);
                            if n <= 0 {
                                let e = super::errno();
                                libc::close(fd);
                                return Err(e);
                            }
                            at += n as usize;
                        }
                        libc::close(fd);
                        if let Some((ruleset, _)) = self.landlock {
                            let fd =
                                check(libc::open(dest.as_ptr(), libc::O_PATH | libc::O_CLOEXEC)
                                    as libc::c_long)? as i32;
                            let r = super::sys::landlock_add_path_rule(ruleset, fd, READ_FILE);
                            libc::close(fd);
                            r?;
                        }
                    }
                    Step::Proc(p) => {
                        check(libc::mount(
                            c"proc".as_ptr(),
                            p.as_ptr(),
                            c"proc".as_ptr(),
                            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                            std::ptr::null(),
                        ) as libc::c_long)?;
                    }
                }
            }
            check(libc::mount(
                std::ptr::null(),
                self.staging.as_ptr(),
                std::ptr::null(),
                libc::MS_REMOUNT
                    | libc::MS_BIND
                    | libc::MS_RDONLY
                    | libc::MS_NOSUID
                    | libc::MS_NODEV,
                std::ptr::null(),
            ) as libc::c_long)?;
            check(libc::chdir(self.staging.as_ptr()) as libc::c_long)?;
            check(libc::syscall(
                libc::SYS_pivot_root,
                c".".as_ptr(),
                c".".as_ptr(),
            ))?;
            check(libc::umount2(c".".as_ptr(), libc::MNT_DETACH) as libc::c_long)?;
            check(libc::chdir(c"/".as_ptr()) as libc::c_long)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &View) -> Vec<String> {
        v.sources
            .iter()
            .map(|(s, _, _)| s.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn nested_scopes_mount_only_where_rights_change() {
        let ws = tempfile::tempdir().unwrap();
        let ws = ws.path().canonicalize().unwrap();
        let read = vec![PathBuf::from("/usr"), PathBuf::from("/usr/share")];
        let inp = Inputs {
            read: &read,
            search_path: &[],
            programs: vec![Path::new("/usr/bin/ls")],
            links: &[],
            exec: &[],
            write: &[],
            workspace: &ws,
            workspace_id: None,
            workspace_bytes: None,
            tty: false,
            shell: None,
            private_tmp: None,
        };
        let v = View::prepare(&inp, None).unwrap();
        let n = names(&v);
        assert!(n.contains(&"/usr".to_string()), "{n:?}");
        assert!(!n.contains(&"/usr/share".to_string()), "{n:?}");
        assert!(!n.contains(&"/usr/bin".to_string()), "{n:?}");
        assert!(n.contains(&ws.display().to_string()), "{n:?}");
        assert!(n.contains(&"/dev/null".to_string()), "{n:?}");
    }

    #[test]
    fn symlinked_scopes_become_symlinks() {
        let ws = tempfile::tempdir().unwrap();
        let ws = ws.path().canonicalize().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink("real", &link).unwrap();
        let read = vec![link.clone()];
        let inp = Inputs {
            read: &read,
            search_path: &[],
            programs: vec![],
            links: &[],
            exec: &[],
            write: &[],
            workspace: &ws,
            workspace_id: None,
            workspace_bytes: Some(1 << 20),
            tty: false,
            shell: None,
            private_tmp: None,
        };
        let v = View::prepare(&inp, None).unwrap();
        let n = names(&v);
        let real = real.canonicalize().unwrap();
        assert!(n.contains(&real.display().to_string()), "{n:?}");
        assert!(
            !n.contains(&ws.display().to_string()),
            "fresh: a tmpfs {n:?}"
        );
        assert!(v.steps.iter().any(
            |s| matches!(s, Step::Symlink { link: l, .. } if l.to_string_lossy().ends_with("/link"))
        ));
        assert!(
            v.steps
                .iter()
                .any(|s| matches!(s, Step::WorkspaceTmpfs { .. }))
        );
    }

    #[test]
    fn the_private_tmp_comes_first_and_what_lies_below_is_made_beneath_it() {
        let base = tempfile::tempdir_in("/tmp").unwrap();
        let ws = base.path().canonicalize().unwrap().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let state = tempfile::tempdir().unwrap();
        let tmp = state.path().canonicalize().unwrap().join("tmp");
        std::fs::create_dir(&tmp).unwrap();
        let inp = Inputs {
            read: &[],
            search_path: &[],
            programs: vec![],
            links: &[],
            exec: &[],
            write: &[],
            workspace: &ws,
            workspace_id: None,
            workspace_bytes: None,
            tty: false,
            shell: None,
            private_tmp: Some(PrivateTmp::Dir(tmp.clone(), (1, 2))),
        };
        let v = View::prepare(&inp, None).unwrap();
        let n = names(&v);
        let at = |p: &Path| n.iter().position(|s| Path::new(s) == p).unwrap();
        assert!(at(&tmp) < at(&ws), "{n:?}");
        assert_eq!(v.sources[at(&tmp)].2, Some((1, 2)));
        let beneath: Vec<Vec<String>> = v
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::Bind {
                    dest: Dest::Beneath { comps, file, .. },
                    ..
                } => {
                    assert!(!file);
                    Some(
                        comps
                            .iter()
                            .map(|c| c.to_string_lossy().into_owned())
                            .collect(),
                    )
                }
                _ => None,
            })
            .collect();
        let expect: Vec<String> = ws
            .strip_prefix("/tmp")
            .unwrap()
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        assert_eq!(beneath, vec![expect]);
        assert!(v.private_tmp.is_some());
        assert!(v.steps.iter().any(
            |s| matches!(s, Step::Data { dest, .. } if dest.to_string_lossy().ends_with(PRIVATE_TMP))
        ));

        // A fresh workspace: a tmpfs at /tmp, the workspace's made beneath.
        let inp = Inputs {
            workspace_bytes: Some(1 << 20),
            private_tmp: Some(PrivateTmp::Tmpfs(1 << 20)),
            ..inp
        };
        let v = View::prepare(&inp, None).unwrap();
        let tmpfs: Vec<bool> = v
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::WorkspaceTmpfs { tmp, .. } => Some(*tmp),
                _ => None,
            })
            .collect();
        assert_eq!(tmpfs, vec![true, false]);
        assert!(v.steps.iter().any(|s| matches!(s, Step::MakeBeneath(_))));

        // A workspace that is /tmp: no private /tmp.
        let slash_tmp = PathBuf::from("/tmp");
        let inp = Inputs {
            workspace: &slash_tmp,
            workspace_bytes: None,
            ..inp
        };
        assert!(View::prepare(&inp, None).unwrap().private_tmp.is_none());
    }
}
