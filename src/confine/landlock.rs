//! The Landlock rule set of a run, built in the parent before fork.
//!
//! EXECUTE is granted only to the allowlisted programs (resolved as the
//! check resolves a first word), their ELF loaders and the policy's
//! `scopes.exec`; READ to the read scopes, the workspace and those programs; WRITE, create and remove only in the workspace, the write
//! scopes and /dev/null. No other executable is readable, so the loader
//! cannot be used to map a shell either. `/proc` is added in the child
//! (`landlock_in_child`): the view's, of the run's own PID namespace,
//! whole; without it `/proc/self` (a rule opened here would name
//! agent-rsh, not the command).

use super::ConfineError;
use ::landlock::{ABI, Access, AccessFs, AccessNet, BitFlags, Ruleset, RulesetAttr, Scope};
use serde::Serialize;
use std::collections::HashMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The newest ABI this code knows; the crate trims it to the kernel's.
const TARGET: ABI = ABI::V9;

/// What the rule set restricts, for the RunResult.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LandlockReport {
    pub enforced: bool,
    /// The kernel's Landlock ABI (0: none).
    pub abi: u32,
    /// Restricted: "filesystem", "tcp-bind-connect", "abstract-unix-socket",
    /// "signal", "pathname-unix-socket".
    pub restricts: Vec<&'static str>,
    pub execute: Vec<String>,
    pub read: Vec<String>,
    pub write: Vec<String>,
    /// Directories whose entries may be listed (names only, nothing read).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub list: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A created rule set: its fd (applied in the child) and its report.
pub struct Built {
    pub fd: OwnedFd,
    pub report: LandlockReport,
}

/// What a run needs from the rule set.
pub struct Inputs<'a> {
    pub program: &'a Path,
    /// Every allowlisted program, resolved as the check resolves the first
    /// word, and their ELF loaders.
    pub allowed: &'a Programs,
    pub workspace: &'a Path,
    /// A persistent workspace's device and inode as it was opened and
    /// checked: the rule is made on that directory or not at all.
    pub workspace_id: Option<(u64, u64)>,
    pub read: &'a [PathBuf],
    pub write: &'a [PathBuf],
    pub exec: &'a [PathBuf],
    pub network_allowed: bool,
    pub tty: bool,
    /// agent-rsh's binary, executed as the mount view's shells.
    pub shell: Option<&'a Path>,
}

fn exec_rights() -> BitFlags<AccessFs> {
    AccessFs::Execute | AccessFs::ReadFile | AccessFs::ReadDir
}

fn read_rights() -> BitFlags<AccessFs> {
    AccessFs::ReadFile | AccessFs::ReadDir
}

/// Everything but EXECUTE and device creation (a device node made in the
/// workspace would reach the raw disk).
fn write_rights() -> BitFlags<AccessFs> {
    AccessFs::from_all(TARGET) & !(AccessFs::Execute | AccessFs::MakeChar | AccessFs::MakeBlock)
}

/// Rights of the workspace's rule, for a rule set of `abi`.
pub fn workspace_access(abi: u32) -> u64 {
    write_rights().bits() & handled_fs(abi)
}

/// Landlock EXECUTE (a fresh workspace's rule under `commands.workspace`).
pub const EXECUTE: u64 = 1;

/// Rights the child adds for /proc/self: READ_FILE | READ_DIR.
pub const PROC_SELF_ACCESS: u64 = (1 << 2) | (1 << 3);

/// Builds the rule set for `abi` (> 0). Paths that do not exist are skipped.
pub fn build(inp: &Inputs, abi: u32) -> Result<Built, ConfineError> {
    let err = |e: &dyn std::fmt::Display| ConfineError::LandlockRuleset { why: e.to_string() };
    let mut rs = Ruleset::default()
        .handle_access(AccessFs::from_all(TARGET))
        .map_err(|e| err(&e))?;
    let net = !inp.network_allowed && abi >= 4;
    if net {
        rs = rs
            .handle_access(AccessNet::from_all(TARGET))
            .map_err(|e| err(&e))?;
    }
    if abi >= 6 {
        rs = rs.scope(Scope::from_all(TARGET)).map_err(|e| err(&e))?;
    }
    let created = rs.create().map_err(|e| err(&e))?;
    let ruleset: Option<OwnedFd> = created.into();
    let ruleset = ruleset.ok_or(ConfineError::LandlockUnavailable)?;
    let ruleset_fd = ruleset.as_raw_fd();
    let mut report = LandlockReport {
        enforced: true,
        abi,
        ..Default::default()
    };
    report.restricts.push("filesystem");
    if net {
        report.restricts.push("tcp-bind-connect");
    }
    if abi >= 6 {
        report.restricts.push("abstract-unix-socket");
        report.restricts.push("signal");
    }
    if abi >= 9 {
        report.restricts.push("pathname-unix-socket");
    }

    let mut rules: Vec<(PathBuf, BitFlags<AccessFs>, u8)> = Vec::new();
    const X: u8 = 0;
    const R: u8 = 1;
    const W: u8 = 2;
    const L: u8 = 3;
    let program = inp.program.to_path_buf();
    let mut loaders = inp.allowed.loaders.clone();
    if !inp.allowed.programs.contains(&program) {
        rules.push((program.clone(), AccessFs::Execute | AccessFs::ReadFile, X));
        loaders.extend(elf_interpreter(&program));
    }
    for p in &inp.allowed.programs {
        rules.push((p.clone(), AccessFs::Execute | AccessFs::ReadFile, X));
    }
    if let Some(sh) = inp.shell
        && *sh != program
    {
        rules.push((sh.to_path_buf(), AccessFs::Execute | AccessFs::ReadFile, X));
    }
    // The allowed programs' directories may be listed, names only: their
    // other files stay unreadable (so the loader cannot map them), but a
    // program that scans its own directory works (Python puts a script's
    // directory on sys.path, and `pip list` scans /usr/bin).
    let mut dirs: Vec<PathBuf> = inp
        .allowed
        .programs
        .iter()
        .chain(std::iter::once(&program))
        .filter_map(|p| p.parent().map(Path::to_path_buf))
        .collect();
    dirs.sort();
    dirs.dedup();
    for d in dirs {
        rules.push((d, AccessFs::ReadDir.into(), L));
    }
    for p in inp.exec {
        loaders.extend(elf_interpreter(p));
    }
    loaders.sort();
    loaders.dedup();
    for l in loaders {
        rules.push((l, AccessFs::Execute | AccessFs::ReadFile, X));
    }
    for p in inp.exec {
        rules.push((p.clone(), exec_rights(), X));
    }
    for p in inp.read {
        rules.push((p.clone(), read_rights(), R));
    }
    rules.push((inp.workspace.to_path_buf(), write_rights(), W));
    for p in inp.write {
        rules.push((p.clone(), write_rights(), W));
    }
    rules.push((
        "/dev/null".into(),
        AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate,
        W,
    ));
    for dev in ["/dev/zero", "/dev/urandom", "/dev/random"] {
        rules.push((dev.into(), AccessFs::ReadFile.into(), R));
    }
    if inp.tty {
        // The command's controlling terminal, for programs that reopen it
        // (less, password prompts): the pty agent-rsh allocated for the
        // run, never the caller's terminal (the command is in a session of
        // its own); TIOCSTI is refused by seccomp.
        rules.push((
            "/dev/tty".into(),
            AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::IoctlDev,
            W,
        ));
    }
    refresh_path_fds(rules.iter().map(|r| &r.0).filter(|p| **p != inp.workspace));
    let handled = handled_fs(abi);
    let file_only = AccessFs::from_file(TARGET).bits();
    let mut guard = PATH_FDS.lock().unwrap_or_else(|e| e.into_inner());
    let cache = guard.get_or_insert_with(HashMap::new);
    let workspace = inp.workspace.to_path_buf();
    for (path, access, kind) in rules {
        // The workspace is new for every run: not worth keeping open.
        let once;
        let (fd, is_dir) = if path == workspace {
            once = open_path(&path)
                .ok_or_else(|| ConfineError::LandlockWorkspace { path: path.clone() })?;
            if inp
                .workspace_id
                .is_some_and(|id| id != (once.1.st_dev, once.1.st_ino))
            {
                return Err(ConfineError::WorkspaceReplaced { path });
            }
            (once.0.as_raw_fd(), true)
        } else {
            match cache.get(&path) {
                Some(e) => (e.fd.as_raw_fd(), e.is_dir),
                None => continue,
            }
        };
        let mut bits = access.bits() & handled;
        if !is_dir {
            bits &= file_only;
        }
        if bits != 0 {
            super::sys::landlock_add_path_rule(ruleset_fd, fd, bits)
                .map_err(|e| err(&std::io::Error::from_raw_os_error(e)))?;
        }
        let shown = path.display().to_string();
        match kind {
            X => report.execute.push(shown),
            R => report.read.push(shown),
            L => report.list.push(shown),
            _ => report.write.push(shown),
        }
    }
    report.read.push("/proc/self".into());
    Ok(Built {
        fd: ruleset,
        report,
    })
}

/// An O_PATH fd kept open for a path a rule names, with what it was
/// opened on; reused by later runs in the same process while the path
/// still names the same file.
struct PathEntry {
    fd: OwnedFd,
    dev: u64,
    ino: u64,
    is_dir: bool,
    checked: Instant,
}

/// How long a cached fd is trusted before its path is checked again. A
/// program replaced within this window is refused, not wrongly allowed:
/// the stale rule names the old file.
const RECHECK: Duration = Duration::from_secs(1);

static PATH_FDS: Mutex<Option<HashMap<PathBuf, PathEntry>>> = Mutex::new(None);

/// Makes `PATH_FDS` hold a current fd for each path that exists: nothing
/// for a path checked within `RECHECK`, one stat for an older one, an open
/// and an fstat for a new or replaced one.
fn refresh_path_fds<'a>(paths: impl Iterator<Item = &'a PathBuf>) {
    let mut guard = PATH_FDS.lock().unwrap_or_else(|e| e.into_inner());
    let cache = guard.get_or_insert_with(HashMap::new);
    let now = Instant::now();
    for path in paths {
        if let Some(e) = cache.get_mut(path) {
            if now.duration_since(e.checked) < RECHECK {
                continue;
            }
            match std::fs::metadata(path) {
                Ok(m) if m.dev() == e.dev && m.ino() == e.ino => {
                    e.checked = now;
                    continue;
                }
                _ => {
                    cache.remove(path);
                }
            }
        }
        let Some((fd, m)) = open_path(path) else {
            continue;
        };
        cache.insert(
            path.clone(),
            PathEntry {
                fd,
                dev: m.st_dev,
                ino: m.st_ino,
                is_dir: m.st_mode & libc::S_IFMT == libc::S_IFDIR,
                checked: now,
            },
        );
    }
}

/// An O_PATH fd on `path` (following symlinks, as exec and open do) and
/// what it names.
fn open_path(path: &Path) -> Option<(OwnedFd, libc::stat)> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: open and fstat with a NUL-terminated path and a stack buffer.
    unsafe {
        let fd = libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
        if fd < 0 {
            return None;
        }
        let fd = OwnedFd::from_raw_fd(fd);
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd.as_raw_fd(), &mut st) != 0 {
            return None;
        }
        Some((fd, st))
    }
}

/// Filesystem rights a rule set created for `abi` handles.
fn handled_fs(abi: u32) -> u64 {
    let mut r = AccessFs::from_all(ABI::V1);
    if abi >= 2 {
        r |= AccessFs::Refer;
    }
    if abi >= 3 {
        r |= AccessFs::Truncate;
    }
    if abi >= 5 {
        r |= AccessFs::IoctlDev;
    }
    if abi >= 9 {
        r |= AccessFs::ResolveUnix;
    }
    r.bits()
}

/// The allowlist resolved to canonical programs, with their loaders.
#[derive(Debug, Default)]
pub struct Programs {
    pub programs: Vec<PathBuf>,
    pub loaders: Vec<PathBuf>,
    /// The symlinks on the way from an allowed name to its program that
    /// lie outside the search path (`/usr/bin/cc -> /etc/alternatives/cc
    /// -> /usr/bin/gcc`): the mount view recreates them, so a program that
    /// an allowed program starts by name (make's `cc`, xargs' `awk`) is
    /// found as it is outside.
    pub links: Vec<PathBuf>,
}

/// The symlinks a lookup of `name` in the search path passes through
/// after the first, each as the path it is found at.
fn links_on_the_way(policy: &crate::policy::Policy, name: &str) -> Vec<PathBuf> {
    let Some(mut cur) = first_entry(policy, name) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for _ in 0..16 {
        let Ok(target) = std::fs::read_link(&cur) else {
            break;
        };
        let next = match cur.parent() {
            Some(dir) => dir.join(&target),
            None => target,
        };
        if std::fs::symlink_metadata(&next).is_ok_and(|m| m.file_type().is_symlink()) {
            out.push(next.clone());
        }
        cur = next;
    }
    out
}

/// What a file was when a cached answer about it was computed: a write to
/// it, a change of its mode or owner, or (for a directory) an entry added,
/// removed or renamed in it changes one of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Identity {
    /// The identity of what `path` names (symlinks followed).
    fn of(path: &Path) -> Option<Identity> {
        std::fs::metadata(path).ok().map(|m| Identity::from(&m))
    }

    fn from(m: &std::fs::Metadata) -> Identity {
        Identity {
            dev: m.dev(),
            ino: m.ino(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }

    /// Changed so recently that a second change within the file system's
    /// timestamp granularity would leave it as it is: not to be trusted.
    fn recent(&self, now: std::time::SystemTime) -> bool {
        let secs = now
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(i64::MAX);
        self.mtime.0.max(self.ctime.0) >= secs - 2
    }
}

/// The allowlist resolved under one policy, and what makes it still true.
struct Resolved {
    key: String,
    programs: Arc<Programs>,
    /// Every search-path directory: an entry added to or removed from one
    /// changes which file a bare name resolves to.
    dirs: Vec<(PathBuf, Option<Identity>)>,
    /// Every resolved program (its loader is read from it).
    files: Vec<(PathBuf, Identity)>,
    /// Names whose resolution went through a symlink or that are listed as
    /// paths: the directories above say nothing about a link's target, so
    /// they are resolved again on every run. Found out at the first reuse
    /// (a one-shot run never pays it).
    indirect: Option<Vec<(String, Option<PathBuf>)>>,
    /// What each name resolved to.
    answers: Vec<(String, Option<PathBuf>)>,
    /// False when something above changed too recently to be trusted.
    trusted: bool,
}

impl Resolved {
    fn still_true(&self) -> bool {
        self.trusted
            && self.dirs.iter().all(|(d, id)| Identity::of(d) == *id)
            && self
                .files
                .iter()
                .all(|(f, id)| Identity::of(f) == Some(*id))
    }
}

/// Resolves the allowlist (as the check resolves a first word) and reads
/// each program's loader. A process that runs many commands under one
/// policy (the MCP server, the login shell, the job supervisor) pays the
/// lookups once: later runs only compare the identity (device, inode,
/// modification and change times) of the search-path directories and of
/// the resolved programs with what they were, and names that resolved
/// through a symlink are resolved again, so a program installed, removed or
/// replaced since is never granted (or refused) from a stale answer.
pub fn allowed_programs(policy: &crate::policy::Policy) -> Arc<Programs> {
    static CACHE: Mutex<Option<Resolved>> = Mutex::new(None);
    let key = format!(
        "{:?}{:?}{:?}{:?}",
        policy.commands.allow,
        policy.commands.search_path,
        policy.scopes.write,
        policy.workspace.parent
    );
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = cache.as_mut()
        && r.key == key
        && r.still_true()
    {
        let answers = &r.answers;
        let indirect = r.indirect.get_or_insert_with(|| {
            answers
                .iter()
                .filter(|(name, path)| {
                    name.contains('/') || !plainly_found(policy, name, path.as_deref())
                })
                .cloned()
                .collect()
        });
        if indirect
            .iter()
            .all(|(name, path)| crate::check::resolve(policy, name).ok() == *path)
        {
            return r.programs.clone();
        }
    }
    let now = std::time::SystemTime::now();
    let dirs: Vec<(PathBuf, Option<Identity>)> = policy
        .commands
        .search_path
        .iter()
        .map(|d| (d.clone(), Identity::of(d)))
        .collect();
    let mut p = Programs::default();
    let mut files = Vec::new();
    let mut answers = Vec::new();
    let mut trusted = dirs
        .iter()
        .all(|(_, id)| !id.is_some_and(|i| i.recent(now)));
    for name in &policy.commands.allow {
        let path = crate::check::resolve(policy, name).ok();
        answers.push((name.clone(), path.clone()));
        let Some(path) = path else { continue };
        p.links.extend(links_on_the_way(policy, name));
        if p.programs.contains(&path) {
            continue;
        }
        let (loader, id) = read_interpreter(&path);
        match id {
            Some(id) => {
                trusted &= !id.recent(now);
                files.push((path.clone(), id));
            }
            None => trusted = false,
        }
        p.loaders.extend(loader);
        p.programs.push(path);
    }
    p.loaders.sort();
    p.loaders.dedup();
    let programs = Arc::new(p);
    *cache = Some(Resolved {
        key,
        programs: programs.clone(),
        dirs,
        files,
        indirect: None,
        answers,
        trusted,
    });
    programs
}

/// The first entry named `name` in the search path's directories, of
/// whatever kind (as a lookup by name finds it).
fn first_entry(policy: &crate::policy::Policy, name: &str) -> Option<PathBuf> {
    policy
        .commands
        .search_path
        .iter()
        .map(|d| d.join(name))
        .find(|c| std::fs::symlink_metadata(c).is_ok())
}

/// Whether `name` resolved to `path` as a plain file named `name` in the
/// first search-path directory that has such an entry, with no symlink of
/// its own: then only a change in a search-path directory's entries (or
/// the file itself) can change the answer.
fn plainly_found(policy: &crate::policy::Policy, name: &str, path: Option<&Path>) -> bool {
    match (first_entry(policy, name), path) {
        (None, None) => true,
        (Some(c), Some(path)) => {
            std::fs::symlink_metadata(&c).is_ok_and(|m| m.file_type().is_file())
                && std::fs::canonicalize(&c).is_ok_and(|real| real == path)
        }
        _ => false,
    }
}

/// The PT_INTERP of an ELF file (its dynamic loader), if any.
pub fn elf_interpreter(path: &Path) -> Option<PathBuf> {
    read_interpreter(path).0
}

/// The PT_INTERP of an ELF file and the identity of the file it was read
/// from.
fn read_interpreter(path: &Path) -> (Option<PathBuf>, Option<Identity>) {
    let Ok(f) = std::fs::File::open(path) else {
        return (None, None);
    };
    let id = f.metadata().ok().map(|m| Identity::from(&m));
    (interpreter_of(&f), id)
}

/// The PT_INTERP of an open ELF file. The headers and the loader's name
/// normally lie in the first page: one read.
fn interpreter_of(f: &std::fs::File) -> Option<PathBuf> {
    let mut page = [0u8; 4096];
    let mut n = 0;
    while n < page.len() {
        match f.read_at(&mut page[n..], n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    let page = &page[..n];
    // Bytes [off, off + buf.len()) of the file: from the page when there.
    let read = |buf: &mut [u8], off: u64| -> Option<()> {
        let end = off.checked_add(buf.len() as u64)?;
        if end <= page.len() as u64 {
            buf.copy_from_slice(&page[off as usize..end as usize]);
            Some(())
        } else {
            f.read_exact_at(buf, off).ok()
        }
    };
    let mut h = [0u8; 64];
    read(&mut h, 0)?;
    if &h[..4] != b"\x7fELF" || h[4] != 2 || h[5] != 1 {
        return None;
    }
    let u16_at = |b: &[u8], o: usize| u16::from_le_bytes([b[o], b[o + 1]]) as u64;
    let u64_at = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
    let phoff = u64_at(&h, 0x20);
    let phentsize = u16_at(&h, 0x36);
    let phnum = u16_at(&h, 0x38).min(64);
    if phentsize < 56 {
        return None;
    }
    let mut ph = [0u8; 56];
    for i in 0..phnum {
        read(&mut ph, phoff.checked_add(i * phentsize)?)?;
        if u32::from_le_bytes([ph[0], ph[1], ph[2], ph[3]]) == 3 {
            let off = u64_at(&ph, 8);
            let size = u64_at(&ph, 32).min(4096) as usize;
            let mut s = vec![0u8; size];
            read(&mut s, off)?;
            let end = s.iter().position(|&b| b == 0).unwrap_or(size);
            let p = PathBuf::from(std::ffi::OsStr::from_bytes(&s[..end]));
            return p.is_absolute().then_some(p);
        }
    }
    None
}

/// The `#!` interpreter of a script, if the file is one.
pub fn script_interpreter(path: &Path) -> Option<PathBuf> {
    let f = std::fs::File::open(path).ok()?;
    let mut b = [0u8; 256];
    let n = f.read_at(&mut b, 0).ok()?;
    let line = b[..n].strip_prefix(b"#!")?;
    let line = &line[..line.iter().position(|&c| c == b'\n').unwrap_or(line.len())];
    let word = line
        .split(|c| *c == b' ' || *c == b'\t')
        .find(|w| !w.is_empty())?;
    Some(PathBuf::from(std::ffi::OsStr::from_bytes(word)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Policy, Source};
    use std::os::unix::fs::PermissionsExt;

    fn install(dir: &Path, name: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::copy("/bin/true", &p).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p.canonicalize().unwrap()
    }

    /// The workspace rule is made on the directory the workspace was
    /// checked as, or not at all.
    #[test]
    fn a_replaced_workspace_gets_no_rule() {
        let abi = crate::confine::probe::kernel().landlock_abi;
        if abi == 0 {
            return;
        }
        let ws = tempfile::tempdir().unwrap();
        let path = ws.path().canonicalize().unwrap();
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(&path).unwrap();
        let programs = Programs::default();
        let inputs = |id| Inputs {
            program: Path::new("/bin/true"),
            allowed: &programs,
            workspace: &path,
            workspace_id: id,
            read: &[],
            write: &[],
            exec: &[],
            network_allowed: false,
            tty: false,
            shell: None,
        };
        assert!(build(&inputs(Some((m.dev(), m.ino()))), abi).is_ok());
        assert!(build(&inputs(None), abi).is_ok());
        match build(&inputs(Some((m.dev(), m.ino() + 1))), abi) {
            Err(ConfineError::WorkspaceReplaced { path: p }) => assert_eq!(p, path),
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("a rule on another directory"),
        }
    }

    #[test]
    fn a_program_installed_earlier_on_the_search_path_is_granted_at_once() {
        let root = tempfile::tempdir().unwrap();
        let (first, second) = (root.path().join("a"), root.path().join("b"));
        std::fs::create_dir(&first).unwrap();
        std::fs::create_dir(&second).unwrap();
        let text = format!(
            "[commands]\nallow = [\"prog\"]\nsearch_path = [{:?}, {:?}]\n",
            first.display().to_string(),
            second.display().to_string()
        );
        let policy = Policy::parse(&text, Source::Embedded).unwrap();
        let later = install(&second, "prog");
        assert_eq!(allowed_programs(&policy).programs, vec![later.clone()]);
        assert_eq!(allowed_programs(&policy).programs, vec![later]);
        let earlier = install(&first, "prog");
        let p = allowed_programs(&policy);
        assert_eq!(p.programs, vec![earlier]);
        assert_eq!(
            p.loaders,
            elf_interpreter(Path::new("/bin/true"))
                .into_iter()
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn the_loader_is_read_from_the_program_headers() {
        let l = elf_interpreter(Path::new("/bin/true")).expect("a dynamic /bin/true");
        assert!(l.is_absolute() && l.exists(), "{l:?}");
        assert_eq!(elf_interpreter(Path::new("/etc/passwd")), None);
    }
}
