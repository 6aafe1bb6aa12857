//! A cgroup per run: bounds the memory and the number of tasks of the whole
//! run tree (root's processes included, which RLIMIT_NPROC does not bind).
//!
//! Where it lives:
//! - **cgroup v2**, when the host's unified hierarchy offers the `memory`
//!   and `pids` controllers: `A/agent-rsh/PID-N`, where `A` is the caller's
//!   own cgroup (from `/proc/self/cgroup`) or, because of v2's "no internal
//!   processes" rule, its nearest ancestor whose `cgroup.subtree_control`
//!   already hands out both controllers (the hierarchy's root may be asked
//!   to). `A/agent-rsh` holds no process, so it can pass them on.
//! - **cgroup v1** otherwise, when `memory` and `pids` are each mounted on a
//!   v1 hierarchy: `OWN/agent-rsh/PID-N` in each, `OWN` being the caller's
//!   cgroup in that hierarchy.
//!
//! The run's name is `PID-N-NS`: `PID` is agent-rsh's pid, `N` a counter
//! and `NS` the inode of agent-rsh's PID namespace, so `gc` can tell the
//! leftover of an agent-rsh that was SIGKILLed (its pid is gone from the
//! namespace that named it) from a run still going, and leaves alone the
//! runs of an agent-rsh in another PID namespace, whose pids it cannot
//! judge. A leftover can hold live tasks: without a PID namespace (a
//! container, or the simulation seam), SIGKILLing agent-rsh and its
//! guardian together leaves the tree running inside the run's cgroup; `gc`
//! kills it (v2: `cgroup.kill`; v1: SIGKILL to each listed task, until
//! the cgroup is empty) before removing the directory.
//!
//! Limits: `memory.max` / `memory.limit_in_bytes`, with swap held at zero
//! where the kernel accounts it (`memory.swap.max = 0`,
//! `memory.memsw.limit_in_bytes` = the limit), so swap does not extend it;
//! `pids.max` (which counts threads as well as processes).
//!
//! Joining: the run's first process (the guardian, freshly cloned, raw
//! system calls only) writes `"0"` into each fd of `join_fds`, already-open
//! `cgroup.procs` files (v1: `tasks`, the same for a process of one thread,
//! without the global lock). The kernel checks the opener's credentials, so
//! the write works after the guardian entered a user namespace. Everything
//! it forks afterwards is born inside.

use serde::Serialize;
use std::ffi::{CStr, CString};
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The directory agent-rsh creates its run cgroups in, below the caller's.
pub const PARENT_NAME: &str = "agent-rsh";

/// How long `remove` waits for the kernel to finish tearing down the run's
/// tasks before it gives up (and leaves the directory to `gc`).
const REMOVE_PATIENCE: Duration = Duration::from_secs(2);

/// A leftover is collected only when it is at least this old: between
/// `create` and the guardian's join a live run's cgroup is empty too.
const GC_MIN_AGE: Duration = Duration::from_secs(10);

/// Why a run cgroup could not be created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CgroupError {
    /// No cgroup hierarchy is mounted, or `/proc/self/cgroup` cannot be read.
    NoHierarchy { why: String },
    /// A controller agent-rsh needs is not offered by any hierarchy.
    ControllerMissing {
        controller: &'static str,
        why: String,
    },
    /// The hierarchy exists, but this account may not create cgroups there
    /// (EACCES or EPERM as non-root, EROFS in a container).
    NotPermitted { path: PathBuf, errno: i32 },
    /// Any other failure of a cgroup file operation.
    Io {
        op: &'static str,
        path: PathBuf,
        errno: i32,
    },
}

/// What to do when the cgroup file system is mounted read-only.
pub const READ_ONLY_FIX: &str =
    "give the container a writable cgroup namespace with the memory and pids controllers delegated";

impl CgroupError {
    /// What failed, without the advice `Display` adds.
    pub fn problem(&self) -> String {
        match self {
            CgroupError::NoHierarchy { why } => format!("no cgroup hierarchy: {why}"),
            CgroupError::ControllerMissing { controller, why } => {
                format!("the cgroup controller `{controller}` is missing: {why}")
            }
            CgroupError::NotPermitted { path, errno } => format!(
                "cannot create a cgroup in {}: {}",
                path.display(),
                io::Error::from_raw_os_error(*errno)
            ),
            CgroupError::Io { op, path, errno } => format!(
                "cannot {op} {}: {}",
                path.display(),
                io::Error::from_raw_os_error(*errno)
            ),
        }
    }

    /// What to change, where the error names it.
    fn advice(&self) -> Option<String> {
        match self {
            CgroupError::NotPermitted { errno, .. } if *errno == libc::EROFS => Some(format!(
                "the cgroup file system is mounted read-only, as in a container: {READ_ONLY_FIX}"
            )),
            CgroupError::NotPermitted { .. } => Some(
                "run as root, or give this account a delegated cgroup v2 subtree with the memory and pids controllers, e.g. systemd's Delegate=yes".to_string(),
            ),
            _ => None,
        }
    }

    /// Whether the cgroup file system is mounted read-only (a container's).
    pub fn read_only(&self) -> bool {
        matches!(self, CgroupError::NotPermitted { errno, .. } if *errno == libc::EROFS)
    }
}

impl fmt::Display for CgroupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.advice() {
            Some(a) => write!(f, "{} ({a})", self.problem()),
            None => f.write_str(&self.problem()),
        }
    }
}

impl std::error::Error for CgroupError {}

fn io_err(op: &'static str, path: &Path, e: &io::Error) -> CgroupError {
    let errno = e.raw_os_error().unwrap_or(libc::EIO);
    if matches!(errno, libc::EACCES | libc::EPERM | libc::EROFS) {
        CgroupError::NotPermitted {
            path: path.to_path_buf(),
            errno,
        }
    } else {
        CgroupError::Io {
            op,
            path: path.to_path_buf(),
            errno,
        }
    }
}

/// Which cgroup version holds a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Mechanism {
    #[serde(rename = "cgroup v2")]
    V2,
    #[serde(rename = "cgroup v1 memory+pids")]
    V1,
}

impl Mechanism {
    pub fn describe(self) -> &'static str {
        match self {
            Mechanism::V2 => "cgroup v2",
            Mechanism::V1 => "cgroup v1 memory+pids",
        }
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// Where run cgroups are created on this host: the `agent-rsh` parent
/// directories, one per hierarchy (v2: one; v1: memory, then pids).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub mechanism: Mechanism,
    /// The `agent-rsh` directories run cgroups are created in.
    pub parents: Vec<PathBuf>,
}

/// What the run cgroup bounds, for the RunResult's `confinement`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CgroupReport {
    pub mechanism: Mechanism,
    /// Bytes of memory the whole run may use; None when unbounded.
    pub memory_bytes: Option<u64>,
    /// Whether swap is held at zero, so it does not extend the memory
    /// bound (false when the kernel does not account swap, e.g. no swap).
    pub swap_bounded: bool,
    /// Tasks (processes and threads) the whole run may have at once.
    pub processes: Option<u64>,
    /// The run's cgroup directories.
    pub paths: Vec<String>,
}

/// What the kernel counted in the run's cgroup; read before `remove`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Events {
    /// Processes the OOM killer ended because the run reached its memory
    /// bound.
    pub oom_kills: u64,
    /// fork/clone calls refused because the run reached its task bound.
    pub pids_refused: u64,
}

impl Events {
    /// The run ended (a process of it) at the memory bound.
    pub fn oom_killed(&self) -> bool {
        self.oom_kills > 0
    }

    /// The run tried to exceed its task bound.
    pub fn pids_refused(&self) -> bool {
        self.pids_refused > 0
    }

    /// Warnings for the RunResult, naming the policy key that was reached.
    pub fn warnings(&self, report: &CgroupReport) -> Vec<String> {
        let mut w = Vec::new();
        if self.oom_killed() {
            w.push(format!(
                "the run reached limits.memory_bytes ({}): the kernel's OOM killer ended {} process{} of it (raise limits.memory_bytes in the policy if the command really needs more)",
                report.memory_bytes.map_or("unbounded".into(), |b| format!("{b} bytes")),
                self.oom_kills,
                if self.oom_kills == 1 { "" } else { "es" }
            ));
        }
        if self.pids_refused() {
            w.push(format!(
                "the run reached limits.processes ({}): the kernel refused {} fork{} (raise limits.processes in the policy if the command really needs more processes or threads)",
                report.processes.map_or("unbounded".into(), |p| p.to_string()),
                self.pids_refused,
                if self.pids_refused == 1 { "" } else { "s" }
            ));
        }
        w
    }
}

/// One run's cgroup: created before the guardian is cloned, joined by it,
/// removed when the run has ended (by `remove`, or on drop).
#[derive(Debug)]
pub struct RunCgroup {
    mechanism: Mechanism,
    /// The run's directories, one per hierarchy (v1: memory, pids).
    dirs: Vec<PathBuf>,
    /// Their parents (`agent-rsh`) and the run's name in them.
    parents: Vec<Arc<OwnedFd>>,
    name: String,
    /// O_PATH fds of `dirs`: the interface files are opened relative to them.
    dir_fds: Vec<OwnedFd>,
    /// Open `cgroup.procs` of each directory.
    join: Vec<OwnedFd>,
    join_raw: Vec<RawFd>,
    report: CgroupReport,
    removed: bool,
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

impl RunCgroup {
    /// Creates the cgroup of one run with these bounds (0: not bounded) and
    /// opens its `cgroup.procs` for the guardian to join. Collects the
    /// leftovers of agent-rsh processes that died without removing theirs.
    pub fn create(memory_bytes: u64, processes: u64) -> Result<RunCgroup, CgroupError> {
        let (found, fds) = cached()?;
        if gc_due() {
            gc_parents(&found);
        }
        match RunCgroup::create_in(&found, fds, memory_bytes, processes) {
            // The parent was removed under us (by an administrator): set it
            // up again once.
            Err(CgroupError::Io { errno, .. }) if errno == libc::ENOENT => {
                forget_layout();
                let (found, fds) = cached()?;
                RunCgroup::create_in(&found, fds, memory_bytes, processes)
            }
            r => r,
        }
    }

    fn create_in(
        layout: &Layout,
        parent_fds: Vec<Arc<OwnedFd>>,
        memory_bytes: u64,
        processes: u64,
    ) -> Result<RunCgroup, CgroupError> {
        let pid = std::process::id();
        let n = layout.parents.len();
        let mut cg = RunCgroup {
            mechanism: layout.mechanism,
            dirs: Vec::with_capacity(n),
            parents: Vec::with_capacity(n),
            name: String::new(),
            dir_fds: Vec::with_capacity(n),
            join: Vec::with_capacity(n),
            join_raw: Vec::with_capacity(n),
            report: CgroupReport {
                mechanism: layout.mechanism,
                memory_bytes: (memory_bytes > 0).then_some(memory_bytes),
                swap_bounded: false,
                processes: (processes > 0).then_some(processes),
                paths: Vec::new(),
            },
            removed: false,
        };
        // One name for every hierarchy; a name left by an earlier process
        // with the same pid (another boot, another PID namespace) is skipped.
        // 0: the namespace is unknown (gc then only removes it when empty).
        let ns = own_pid_namespace().unwrap_or(0);
        'name: loop {
            cg.name = format!("{pid}-{}-{ns}", COUNTER.fetch_add(1, Ordering::Relaxed));
            let cname = CString::new(cg.name.as_str()).expect("no NUL in a number");
            for (parent, pfd) in layout.parents.iter().zip(&parent_fds) {
                let dir = parent.join(&cg.name);
                // SAFETY: mkdirat relative to a directory fd we hold.
                if unsafe { libc::mkdirat(pfd.as_raw_fd(), cname.as_ptr(), 0o755) } != 0 {
                    let e = io::Error::last_os_error();
                    if e.kind() == io::ErrorKind::AlreadyExists {
                        cg.remove_dirs_quietly();
                        continue 'name;
                    }
                    return Err(io_err("create the cgroup", &dir, &e));
                }
                cg.dirs.push(dir);
                cg.parents.push(pfd.clone());
                let dfd = open_at(
                    pfd.as_raw_fd(),
                    &cname,
                    libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
                )
                .map_err(|e| io_err("open", cg.dirs.last().unwrap(), &e))?;
                cg.dir_fds.push(dfd);
            }
            break;
        }
        // On any error below, `cg` is dropped and its directories removed.
        let mem = memory_bytes.to_string();
        match cg.mechanism {
            Mechanism::V2 => {
                if memory_bytes > 0 {
                    cg.write(0, c"memory.max", &mem)?;
                    cg.report.swap_bounded = cg.write_if_present(0, c"memory.swap.max", "0")?;
                }
                if processes > 0 {
                    cg.write(0, c"pids.max", &processes.to_string())?;
                }
            }
            Mechanism::V1 => {
                if memory_bytes > 0 {
                    // limit first: memsw may never be below it.
                    cg.write(0, c"memory.limit_in_bytes", &mem)?;
                    cg.report.swap_bounded =
                        cg.write_if_present(0, c"memory.memsw.limit_in_bytes", &mem)?;
                }
                if processes > 0 {
                    cg.write(1, c"pids.max", &processes.to_string())?;
                }
            }
        }
        // v1: the guardian joins through `tasks`, moving only its one
        // thread (it has no other: freshly cloned). Moving the current
        // thread alone spares the kernel's global threadgroup lock, whose
        // write side waits out an RCU grace period (measured here: about
        // 8 ms through cgroup.procs after an idle moment, 40 us through
        // tasks). v2 has no such file outside threaded subtrees.
        let join_file = match cg.mechanism {
            Mechanism::V2 => c"cgroup.procs",
            Mechanism::V1 => c"tasks",
        };
        for i in 0..cg.dirs.len() {
            let fd = open_at(
                cg.dir_fds[i].as_raw_fd(),
                join_file,
                libc::O_WRONLY | libc::O_CLOEXEC,
            )
            .map_err(|e| {
                io_err(
                    "open",
                    &cg.dirs[i].join(join_file.to_string_lossy().as_ref()),
                    &e,
                )
            })?;
            cg.join_raw.push(fd.as_raw_fd());
            cg.join.push(fd);
        }
        cg.report.paths = cg.dirs.iter().map(|d| d.display().to_string()).collect();
        Ok(cg)
    }

    /// Open (O_WRONLY, O_CLOEXEC) `cgroup.procs` files of the run's
    /// cgroup (v1: `tasks`), one per hierarchy. The guardian joins with
    /// `write(fd, "0", 1)` on each, before it forks the command; they stay
    /// valid until `remove` (or drop).
    pub fn join_fds(&self) -> &[RawFd] {
        &self.join_raw
    }

    /// Joins the calling process (the guardian) to the run's cgroup: raw
    /// system calls only, no allocation, safe right after clone. Returns
    /// the errno of the first write that failed.
    pub fn join_in_child(&self) -> Result<(), i32> {
        join_raw(&self.join_raw)
    }

    pub fn mechanism(&self) -> Mechanism {
        self.mechanism
    }

    pub fn report(&self) -> &CgroupReport {
        &self.report
    }

    /// The run cgroup's directories (v1: memory, then pids).
    pub fn paths(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// What the kernel counted so far: OOM kills, hits of the memory bound,
    /// refused forks, peak memory. Call before `remove`.
    pub fn events(&self) -> Events {
        let read = |i: usize, f: &CStr| self.read(i, f).unwrap_or_default();
        match self.mechanism {
            Mechanism::V2 => Events {
                oom_kills: keyed(&read(0, c"memory.events"), "oom_kill").unwrap_or(0),
                pids_refused: keyed(&read(0, c"pids.events"), "max").unwrap_or(0),
            },
            Mechanism::V1 => Events {
                oom_kills: keyed(&read(0, c"memory.oom_control"), "oom_kill").unwrap_or(0),
                pids_refused: keyed(&read(1, c"pids.events"), "max").unwrap_or(0),
            },
        }
    }

    /// The run's highest memory use so far, where the kernel reports it
    /// (`memory.peak`, Linux 5.19+; v1 `memory.max_usage_in_bytes`).
    pub fn memory_peak_bytes(&self) -> Option<u64> {
        let file = match self.mechanism {
            Mechanism::V2 => c"memory.peak",
            Mechanism::V1 => c"memory.max_usage_in_bytes",
        };
        self.read(0, file).ok()?.trim().parse().ok()
    }

    /// The most tasks the run had at once, where the kernel reports it
    /// (`pids.peak`, Linux 6.13+ in v2 and v1).
    pub fn tasks_peak(&self) -> Option<u64> {
        let i = match self.mechanism {
            Mechanism::V2 => 0,
            Mechanism::V1 => 1,
        };
        self.read(i, c"pids.peak").ok()?.trim().parse().ok()
    }

    /// Writes interface file `file` of the run's directory `i`.
    fn write(&self, i: usize, file: &CStr, value: &str) -> Result<(), CgroupError> {
        let path = || self.dirs[i].join(file.to_string_lossy().as_ref());
        let fd = open_at(
            self.dir_fds[i].as_raw_fd(),
            file,
            libc::O_WRONLY | libc::O_CLOEXEC,
        )
        .map_err(|e| io_err("open", &path(), &e))?;
        write_fd(&fd, value).map_err(|e| io_err("write", &path(), &e))
    }

    /// `write`, Ok(false) when the kernel does not have that file.
    fn write_if_present(&self, i: usize, file: &CStr, value: &str) -> Result<bool, CgroupError> {
        match self.write(i, file, value) {
            Ok(()) => Ok(true),
            Err(CgroupError::Io { errno, .. }) if errno == libc::ENOENT => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn read(&self, i: usize, file: &CStr) -> io::Result<String> {
        let fd = open_at(
            self.dir_fds[i].as_raw_fd(),
            file,
            libc::O_RDONLY | libc::O_CLOEXEC,
        )?;
        read_fd(&fd)
    }

    /// Kills whatever is still inside and removes the run's directories,
    /// retrying while the kernel finishes tearing down exiting tasks (up to
    /// about 2 s). On failure the directories stay for a later `gc`.
    pub fn remove(mut self) -> Result<(), CgroupError> {
        self.remove_inner()
    }

    fn remove_inner(&mut self) -> Result<(), CgroupError> {
        if self.removed {
            return Ok(());
        }
        self.removed = true;
        self.join.clear();
        self.join_raw.clear();
        if self.mechanism == Mechanism::V2 && !self.dirs.is_empty() {
            // Kills every task inside, in one step (Linux 5.14+).
            let _ = self.write_if_present(0, c"cgroup.kill", "1");
        }
        self.dir_fds.clear();
        let start = Instant::now();
        let mut result = Ok(());
        let name = CString::new(self.name.as_str()).unwrap_or_default();
        for (dir, parent) in self.dirs.drain(..).zip(self.parents.drain(..)) {
            if let Err(e) = rmdir_patiently(&parent, &name, &dir, start) {
                result = result.and(Err(e));
            }
        }
        result
    }

    fn remove_dirs_quietly(&mut self) {
        self.dir_fds.clear();
        let name = CString::new(self.name.as_str()).unwrap_or_default();
        for parent in self.parents.drain(..).rev() {
            // SAFETY: unlinkat relative to a directory fd we hold.
            unsafe { libc::unlinkat(parent.as_raw_fd(), name.as_ptr(), libc::AT_REMOVEDIR) };
        }
        self.dirs.clear();
    }
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        let _ = self.remove_inner();
    }
}

/// The guardian's join: `write(fd, "0", 1)` on each fd. Raw system calls
/// only.
pub fn join_raw(fds: &[RawFd]) -> Result<(), i32> {
    for &fd in fds {
        // SAFETY: write of a static one-byte buffer to an fd we were given.
        let n = unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) };
        if n != 1 {
            return Err(if n < 0 { super::errno() } else { libc::EIO });
        }
    }
    Ok(())
}

/// rmdir, killing what is still inside and retrying on EBUSY until the
/// kernel has let every task go.
fn rmdir_patiently(
    parent: &OwnedFd,
    name: &CStr,
    dir: &Path,
    start: Instant,
) -> Result<(), CgroupError> {
    let mut pause = Duration::from_micros(50);
    loop {
        // SAFETY: unlinkat relative to a directory fd we hold.
        let r = unsafe { libc::unlinkat(parent.as_raw_fd(), name.as_ptr(), libc::AT_REMOVEDIR) };
        let e = io::Error::last_os_error();
        match r {
            0 => return Ok(()),
            _ if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            _ if e.raw_os_error() == Some(libc::EBUSY) => {
                if start.elapsed() > REMOVE_PATIENCE {
                    return Err(io_err("remove", dir, &e));
                }
                kill_tasks(dir);
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(20));
            }
            _ => return Err(io_err("remove", dir, &e)),
        }
    }
}

/// SIGKILLs the processes listed in `dir/cgroup.procs`. Each pid is pinned
/// with a pidfd first and signalled only if it is still listed afterwards,
/// so a pid that was reused meanwhile by a process outside is never hit.
fn kill_tasks(dir: &Path) {
    let procs = dir.join("cgroup.procs");
    let Ok(first) = read_small(&procs) else {
        return;
    };
    let pinned: Vec<(i32, OwnedFd)> = first
        .lines()
        .filter_map(|l| l.trim().parse::<i32>().ok())
        .filter_map(|pid| {
            // SAFETY: pidfd_open takes integers and returns a new fd.
            let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
            // SAFETY: a valid fd we own from here on.
            (fd >= 0).then(|| (pid, unsafe { OwnedFd::from_raw_fd(fd as RawFd) }))
        })
        .collect();
    let Ok(again) = read_small(&procs) else {
        return;
    };
    let still: Vec<i32> = again
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    for (pid, fd) in &pinned {
        if still.contains(pid) {
            // SAFETY: pidfd_send_signal on a pidfd we own, no siginfo.
            unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    fd.as_raw_fd(),
                    libc::SIGKILL,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                )
            };
        }
    }
}

/// Removes run cgroups left by agent-rsh processes that no longer exist
/// (SIGKILLed before they could remove their own): named `PID-N-NS`, `NS`
/// this process's PID namespace, `PID` not alive in it, and older than a
/// few seconds. Tasks still inside (a tree whose agent-rsh and guardian
/// were SIGKILLed together without a PID namespace) are killed first.
/// A name without `NS` (written by an earlier version, whose namespace is
/// unknown) is only removed when empty. Cheap when nothing is left: one
/// directory listing per hierarchy. Returns what was removed.
pub fn gc() -> Vec<PathBuf> {
    match layout() {
        Ok(l) => gc_parents(&l),
        Err(_) => Vec::new(),
    }
}

/// The owner a run cgroup's name records: (pid, PID namespace inode, if
/// the name has one).
fn owner_of(name: &str) -> Option<(u32, Option<u64>)> {
    let mut parts = name.splitn(3, '-');
    let pid = parts.next()?.parse::<u32>().ok()?;
    parts.next()?.parse::<u64>().ok()?;
    match parts.next() {
        None => Some((pid, None)),
        Some(ns) => Some((pid, Some(ns.parse().ok()?))),
    }
}

fn gc_parents(layout: &Layout) -> Vec<PathBuf> {
    let me = std::process::id();
    let my_ns = own_pid_namespace();
    let mut removed = Vec::new();
    for parent in &layout.parents {
        let Ok(entries) = std::fs::read_dir(parent) else {
            continue;
        };
        let Ok(parent_fd) = CString::new(parent.as_os_str().as_bytes())
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
            .and_then(|c| {
                open_at(
                    libc::AT_FDCWD,
                    &c,
                    libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
                )
            })
        else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some((pid, ns)) = name.to_str().and_then(owner_of) else {
                continue;
            };
            // Another PID namespace's pids cannot be judged from here; a
            // name without one (0: unknown) is only removed when empty.
            let kill = match ns {
                None | Some(0) => false,
                Some(ns) if Some(ns) == my_ns => true,
                Some(_) => continue,
            };
            if pid == me || pid_alive(pid) {
                continue;
            }
            let path = entry.path();
            let old = std::fs::metadata(&path)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age >= GC_MIN_AGE);
            if !old {
                continue;
            }
            let collected = if kill {
                if layout.mechanism == Mechanism::V2 {
                    // Kills every task inside, in one step (Linux 5.14+);
                    // where it is missing, rmdir_patiently's loop does.
                    let _ = write_file(&path.join("cgroup.kill"), "1");
                }
                let cname = CString::new(name.as_bytes()).unwrap_or_default();
                rmdir_patiently(&parent_fd, &cname, &path, Instant::now()).is_ok()
            } else {
                std::fs::remove_dir(&path).is_ok()
            };
            if collected {
                removed.push(path);
            }
        }
    }
    removed
}

/// The inode of this process's PID namespace, when it can be read.
fn own_pid_namespace() -> Option<u64> {
    static NS: OnceLock<Option<u64>> = OnceLock::new();
    *NS.get_or_init(|| {
        std::fs::read_link("/proc/self/ns/pid").ok().and_then(|l| {
            l.to_str()?
                .strip_prefix("pid:[")?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
    })
}

fn pid_alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks for existence.
    let alive = unsafe { libc::kill(pid, 0) } == 0;
    alive || super::errno() != libc::ESRCH
}

/// The host's layout, found once per process (and again if a parent was
/// removed meanwhile).
pub fn layout() -> Result<Layout, CgroupError> {
    cached().map(|(l, _)| l)
}

/// The layout and O_PATH fds of its parent directories.
fn cached() -> Result<(Layout, Vec<Arc<OwnedFd>>), CgroupError> {
    type Cache = Option<(Layout, Vec<Arc<OwnedFd>>)>;
    static CACHE: Mutex<Cache> = Mutex::new(None);
    let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    if FORGET.swap(false, Ordering::Relaxed) {
        *cache = None;
    }
    if let Some((l, fds)) = &*cache {
        return Ok((l.clone(), fds.clone()));
    }
    // One or two reads each (std's read_to_string starts at 32 bytes on a
    // file that reports size 0).
    let read = |p: &str| {
        read_small(Path::new(p)).map_err(|e| CgroupError::NoHierarchy {
            why: format!("cannot read {p}: {e}"),
        })
    };
    let own = read("/proc/self/cgroup")?;
    // Reading mountinfo costs about 0.2 ms on some kernels, most of a run
    // cgroup's cost: the usual mount points are tried first.
    let l = match discover_usual(Path::new(USUAL_ROOT), &own) {
        Some(l) => l,
        None => discover(&read("/proc/self/mountinfo")?, &own)?,
    };
    let fds = l
        .parents
        .iter()
        .map(|p| {
            let c = CString::new(p.as_os_str().as_bytes())
                .map_err(|_| io_err("open", p, &io::Error::from_raw_os_error(libc::EINVAL)))?;
            open_at(
                libc::AT_FDCWD,
                &c,
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
            .map(Arc::new)
            .map_err(|e| io_err("open", p, &e))
        })
        .collect::<Result<Vec<_>, _>>()?;
    *cache = Some((l.clone(), fds.clone()));
    Ok((l, fds))
}

static FORGET: AtomicBool = AtomicBool::new(false);

/// How often a long-lived process (the MCP server, a login shell) sweeps
/// leftovers again; a short-lived one sweeps once, at its first run.
const GC_EVERY: Duration = Duration::from_secs(60);

/// Whether `create` should sweep leftovers now: at the first run of a
/// process, then at most once per `GC_EVERY`.
fn gc_due() -> bool {
    static LAST: Mutex<Option<Instant>> = Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
    let now = Instant::now();
    if last.is_some_and(|t| now.duration_since(t) < GC_EVERY) {
        return false;
    }
    *last = Some(now);
    true
}

fn forget_layout() {
    FORGET.store(true, Ordering::Relaxed);
}

/// The tightest `pids.max` from the caller's own cgroup up to the top of
/// the hierarchy it sees, and the directory that sets it: what bounds the
/// tasks of a root caller when no run cgroup can be made (a container's
/// pids limit, shared with everything else in the container). None when
/// nothing visible bounds them.
pub fn enclosing_pids_max() -> Option<(u64, PathBuf)> {
    let own = read_small(Path::new("/proc/self/cgroup")).ok()?;
    let mountinfo = read_small(Path::new("/proc/self/mountinfo")).ok()?;
    enclosing_pids_max_in(&parse_mounts(&mountinfo), &own)
}

fn enclosing_pids_max_in(mounts: &[Mount], own: &str) -> Option<(u64, PathBuf)> {
    let v1 = own.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, list, path) = (parts.next()?, parts.next()?, parts.next()?);
        list.split(',').any(|c| c == "pids").then_some(path)
    });
    let (mount, own_dir) = match v1 {
        Some(path) => mounts
            .iter()
            .filter(|m| !m.v2 && m.controllers.iter().any(|c| c == "pids"))
            .find_map(|m| dir_in(m, path).map(|d| (m, d)))?,
        None => {
            let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
            mounts
                .iter()
                .filter(|m| m.v2)
                .find_map(|m| dir_in(m, path).map(|d| (m, d)))?
        }
    };
    let mut best: Option<(u64, PathBuf)> = None;
    let mut dir = own_dir.as_path();
    loop {
        // "max" (unbounded) does not parse; the root has no such file.
        if let Ok(n) = read_small(&dir.join("pids.max"))
            .unwrap_or_default()
            .trim()
            .parse::<u64>()
            && best.as_ref().is_none_or(|(b, _)| n < *b)
        {
            best = Some((n, dir.to_path_buf()));
        }
        match dir.parent() {
            Some(p) if dir != mount.mount_point && p.starts_with(&mount.mount_point) => dir = p,
            _ => break,
        }
    }
    best
}

/// Whether a run cgroup can be created here, and which kind: what `doctor`
/// shows. Sets up the `agent-rsh` parent directories as a side effect.
pub fn probe() -> Result<Mechanism, CgroupError> {
    layout().map(|l| l.mechanism)
}

const NEEDED: [&str; 2] = ["memory", "pids"];

/// Where distributions mount cgroup file systems.
const USUAL_ROOT: &str = "/sys/fs/cgroup";
const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;
const CGROUP_SUPER_MAGIC: i64 = 0x0027_e0eb;

/// The file system type of `path`, if it can be asked.
fn fs_magic(path: &Path) -> Option<i64> {
    let c = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statfs into a zeroed struct with a NUL-terminated path.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    (unsafe { libc::statfs(c.as_ptr(), &mut st) } == 0).then_some(st.f_type as i64)
}

/// The layout at the usual mount points, without reading mountinfo: v2 at
/// `ROOT` or `ROOT/unified`, v1 at `ROOT/<controllers as /proc/self/cgroup
/// lists them>`. Each must be a cgroup file system and show the caller's
/// own cgroup at its path (true unless a container mounted a subtree
/// there), and the parent created must carry the controller's files;
/// anything else is left to `discover`.
fn discover_usual(root: &Path, own: &str) -> Option<Layout> {
    if !bound_to_v1(own)
        && let Some(path) = own.lines().find_map(|l| l.strip_prefix("0::"))
    {
        let rel = path.trim_start_matches('/');
        for mount in [root.to_path_buf(), root.join("unified")] {
            if fs_magic(&mount) != Some(CGROUP2_SUPER_MAGIC) {
                continue;
            }
            let own_dir = mount.join(rel);
            if !own_dir.join("cgroup.controllers").exists() {
                break;
            }
            if let Ok(parent) = v2_parent(&mount, &own_dir) {
                return Some(Layout {
                    mechanism: Mechanism::V2,
                    parents: vec![parent],
                });
            }
            break;
        }
    }
    let mut parents = Vec::new();
    for (controller, probe) in [("memory", "memory.limit_in_bytes"), ("pids", "pids.max")] {
        let (list, path) = own.lines().find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, list, path) = (parts.next()?, parts.next()?, parts.next()?);
            list.split(',')
                .any(|c| c == controller)
                .then_some((list, path))
        })?;
        let mount = root.join(list);
        if fs_magic(&mount) != Some(CGROUP_SUPER_MAGIC) {
            return None;
        }
        let own_dir = mount.join(path.trim_start_matches('/'));
        if !own_dir.join("cgroup.procs").exists() {
            return None;
        }
        let parent = own_dir.join(PARENT_NAME);
        mkdir_ok_if_exists(&parent).ok()?;
        if !parent.join(probe).exists() {
            return None;
        }
        parents.push(parent);
    }
    Some(Layout {
        mechanism: Mechanism::V1,
        parents,
    })
}

/// One line of /proc/self/mountinfo for a cgroup file system.
#[derive(Debug)]
struct Mount {
    /// Path inside the hierarchy that is mounted.
    root: String,
    mount_point: PathBuf,
    v2: bool,
    /// v1: the controllers bound to the hierarchy.
    controllers: Vec<String>,
}

fn parse_mounts(mountinfo: &str) -> Vec<Mount> {
    let mut out = Vec::new();
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let f: Vec<&str> = left.split(' ').collect();
        let r: Vec<&str> = right.split(' ').collect();
        if f.len() < 5 || r.len() < 3 {
            continue;
        }
        let v2 = match r[0] {
            "cgroup2" => true,
            "cgroup" => false,
            _ => continue,
        };
        out.push(Mount {
            root: unescape(f[3]),
            mount_point: PathBuf::from(unescape(f[4])),
            v2,
            controllers: if v2 {
                Vec::new()
            } else {
                r[2].split(',').map(str::to_string).collect()
            },
        });
    }
    out
}

/// mountinfo escapes space, tab, newline and backslash as \ooo.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The directory of cgroup `path` (as /proc/self/cgroup names it) under a
/// mount of its hierarchy, when that mount shows it.
fn dir_in(m: &Mount, path: &str) -> Option<PathBuf> {
    let rel = if m.root == "/" {
        path.trim_start_matches('/')
    } else {
        let rest = path.strip_prefix(m.root.as_str())?;
        if !(rest.is_empty() || rest.starts_with('/')) {
            return None;
        }
        rest.trim_start_matches('/')
    };
    Some(if rel.is_empty() {
        m.mount_point.clone()
    } else {
        m.mount_point.join(rel)
    })
}

fn has_all(list: &str, wanted: &[&str]) -> bool {
    wanted
        .iter()
        .all(|w| list.split_whitespace().any(|c| c == *w))
}

/// A controller is bound to one hierarchy at a time: when /proc/self/cgroup
/// lists memory or pids on a v1 hierarchy, v2 cannot offer both.
fn bound_to_v1(own: &str) -> bool {
    own.lines().any(|l| {
        l.split(':')
            .nth(1)
            .is_some_and(|list| list.split(',').any(|c| NEEDED.contains(&c)))
    })
}

/// Finds (and sets up) where run cgroups go, from /proc/self/mountinfo and
/// /proc/self/cgroup. v2 first, v1 when v2 does not offer both controllers.
pub(crate) fn discover(mountinfo: &str, own: &str) -> Result<Layout, CgroupError> {
    let mounts = parse_mounts(mountinfo);
    if mounts.is_empty() {
        return Err(CgroupError::NoHierarchy {
            why: "no cgroup file system is mounted (mount cgroup2 at /sys/fs/cgroup)".into(),
        });
    }
    // v2: the line "0::PATH".
    let v2_path = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::to_string);
    let mut v2_why = String::from("no cgroup v2 hierarchy is mounted");
    if bound_to_v1(own) {
        v2_why = "cgroup v2 cannot offer it while v1 hierarchies hold memory or pids".into();
    } else if let Some(path) = &v2_path
        && let Some((m, own_dir)) = mounts
            .iter()
            .filter(|m| m.v2)
            .find_map(|m| dir_in(m, path).map(|d| (m, d)))
    {
        match v2_parent(&m.mount_point, &own_dir) {
            Ok(parent) => {
                return Ok(Layout {
                    mechanism: Mechanism::V2,
                    parents: vec![parent],
                });
            }
            Err(e @ CgroupError::NotPermitted { .. }) => return Err(e),
            Err(e) => v2_why = e.to_string(),
        }
    }
    // v1: one hierarchy per controller.
    let mut parents = Vec::new();
    for controller in NEEDED {
        let line = own.lines().find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, list, path) = (parts.next()?, parts.next()?, parts.next()?);
            list.split(',').any(|c| c == controller).then_some(path)
        });
        let found = line.and_then(|path| {
            mounts
                .iter()
                .filter(|m| !m.v2 && m.controllers.iter().any(|c| c == controller))
                .find_map(|m| dir_in(m, path))
        });
        let Some(own_dir) = found else {
            return Err(CgroupError::ControllerMissing {
                controller,
                why: format!(
                    "no cgroup v1 hierarchy is mounted with it, and {v2_why} (enable the memory and pids controllers in cgroup v2, or mount them as cgroup v1)"
                ),
            });
        };
        let parent = own_dir.join(PARENT_NAME);
        mkdir_ok_if_exists(&parent)?;
        parents.push(parent);
    }
    Ok(Layout {
        mechanism: Mechanism::V1,
        parents,
    })
}

/// v2: `A/agent-rsh` with memory and pids in its subtree_control, A being
/// the caller's cgroup or its nearest ancestor that hands both out.
fn v2_parent(mount_point: &Path, own_dir: &Path) -> Result<PathBuf, CgroupError> {
    let mut dir = own_dir;
    let anchor = loop {
        let sub = read_small(&dir.join("cgroup.subtree_control"))
            .map_err(|e| io_err("read", &dir.join("cgroup.subtree_control"), &e))?;
        if has_all(&sub, &NEEDED) {
            break dir;
        }
        if dir == mount_point {
            // The visible root: it may enable controllers it has although
            // it holds processes (the real root), or when it holds none.
            let ctl = read_small(&dir.join("cgroup.controllers")).unwrap_or_default();
            if !has_all(&ctl, &NEEDED) {
                let missing = NEEDED
                    .iter()
                    .find(|c| !ctl.split_whitespace().any(|x| x == **c))
                    .copied()
                    .unwrap_or("memory");
                return Err(CgroupError::ControllerMissing {
                    controller: missing,
                    why: format!(
                        "the cgroup v2 hierarchy at {} does not offer it",
                        mount_point.display()
                    ),
                });
            }
            write_file(&dir.join("cgroup.subtree_control"), "+memory +pids")?;
            break dir;
        }
        match dir.parent() {
            Some(p) if p.starts_with(mount_point) => dir = p,
            _ => {
                return Err(CgroupError::ControllerMissing {
                    controller: "memory",
                    why: format!(
                        "no cgroup above {} hands out memory and pids",
                        own_dir.display()
                    ),
                });
            }
        }
    };
    let parent = anchor.join(PARENT_NAME);
    mkdir_ok_if_exists(&parent)?;
    let sub = parent.join("cgroup.subtree_control");
    let have = read_small(&sub).map_err(|e| io_err("read", &sub, &e))?;
    if !has_all(&have, &NEEDED) {
        write_file(&sub, "+memory +pids")?;
    }
    Ok(parent)
}

fn mkdir_ok_if_exists(dir: &Path) -> Result<(), CgroupError> {
    match std::fs::create_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(io_err("create the cgroup", dir, &e)),
    }
}

/// `key N` from a flat keyed file (memory.events, pids.events, oom_control).
fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

fn open_at(dirfd: RawFd, name: &CStr, flags: i32) -> io::Result<OwnedFd> {
    // SAFETY: openat with a NUL-terminated name.
    let fd = unsafe { libc::openat(dirfd, name.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh fd we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn write_fd(fd: &OwnedFd, value: &str) -> io::Result<()> {
    // SAFETY: write from a live buffer to an fd we own.
    let n = unsafe { libc::write(fd.as_raw_fd(), value.as_ptr().cast(), value.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n as usize != value.len() {
        return Err(io::Error::from_raw_os_error(libc::EIO));
    }
    Ok(())
}

/// Writes a cgroup interface file (which exists: never created).
fn write_file(path: &Path, value: &str) -> Result<(), CgroupError> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io_err("open", path, &io::Error::from_raw_os_error(libc::EINVAL)))?;
    let fd = open_at(libc::AT_FDCWD, &c, libc::O_WRONLY | libc::O_CLOEXEC)
        .map_err(|e| io_err("open", path, &e))?;
    write_fd(&fd, value).map_err(|e| io_err("write", path, &e))
}

fn read_fd(fd: &OwnedFd) -> io::Result<String> {
    let mut buf = [0u8; 4096];
    let mut out = Vec::new();
    loop {
        // SAFETY: read into a live stack buffer.
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n as usize]);
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Reads a small interface file.
fn read_small(path: &Path) -> io::Result<String> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    read_fd(&open_at(
        libc::AT_FDCWD,
        &c,
        libc::O_RDONLY | libc::O_CLOEXEC,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID_MOUNTINFO: &str = "\
25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
31 25 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 31 0:32 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
37 31 0:33 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
    const HYBRID_CGROUP: &str = "\
9:name=systemd:/
8:pids:/
4:memory:/process_api/b9a1
0::/
";

    #[test]
    fn mountinfo_is_parsed() {
        let m = parse_mounts(HYBRID_MOUNTINFO);
        assert_eq!(m.len(), 3);
        assert!(!m[0].v2 && m[0].controllers.contains(&"memory".to_string()));
        assert_eq!(m[1].mount_point, Path::new("/sys/fs/cgroup/pids"));
        assert!(m[2].v2);
        assert_eq!(unescape("/a\\040b\\134c"), "/a b\\c");
        assert_eq!(unescape("/trailing\\04"), "/trailing\\04");
    }

    #[test]
    fn cgroup_paths_map_through_the_mount_root() {
        let m = |root: &str| Mount {
            root: root.into(),
            mount_point: "/sys/fs/cgroup".into(),
            v2: true,
            controllers: vec![],
        };
        assert_eq!(
            dir_in(&m("/"), "/a/b"),
            Some(PathBuf::from("/sys/fs/cgroup/a/b"))
        );
        assert_eq!(dir_in(&m("/"), "/"), Some(PathBuf::from("/sys/fs/cgroup")));
        // A container that sees its own subtree mounted at /sys/fs/cgroup.
        assert_eq!(
            dir_in(&m("/docker/x"), "/docker/x/sub"),
            Some(PathBuf::from("/sys/fs/cgroup/sub"))
        );
        assert_eq!(dir_in(&m("/docker/x"), "/docker/xy"), None);
        assert_eq!(dir_in(&m("/docker/x"), "/other"), None);
    }

    #[test]
    fn run_names_record_their_owner() {
        assert_eq!(owner_of("123-4-4026531836"), Some((123, Some(4026531836))));
        assert_eq!(owner_of("123-4"), Some((123, None)));
        for bad in ["123", "x-4", "123-x", "123-4-x", "123-4-5-6", ""] {
            assert_eq!(owner_of(bad), None, "{bad}");
        }
        assert!(own_pid_namespace().is_some_and(|n| n > 0));
    }

    #[test]
    fn keyed_files_are_read() {
        let ev = "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n";
        assert_eq!(keyed(ev, "oom_kill"), Some(1));
        assert_eq!(keyed(ev, "max"), Some(12));
        assert_eq!(keyed(ev, "nope"), None);
        assert!(has_all("cpuset cpu io memory pids", &NEEDED));
        assert!(!has_all("cpu memory", &NEEDED));
    }

    /// A fake v2 tree in a scratch directory: the layout chooses the
    /// nearest ancestor whose subtree_control hands out both controllers,
    /// and sets up `agent-rsh` below it.
    #[test]
    fn v2_parent_respects_no_internal_processes() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        let slice = root.join("user.slice");
        let scope = slice.join("session-1.scope");
        std::fs::create_dir_all(&scope).unwrap();
        std::fs::write(root.join("cgroup.subtree_control"), "cpu memory pids\n").unwrap();
        std::fs::write(slice.join("cgroup.subtree_control"), "memory pids\n").unwrap();
        std::fs::write(scope.join("cgroup.subtree_control"), "").unwrap();
        // The new parent's interface file, as the kernel would create it.
        std::fs::create_dir(slice.join(PARENT_NAME)).unwrap();
        std::fs::write(
            slice.join(PARENT_NAME).join("cgroup.subtree_control"),
            "memory pids\n",
        )
        .unwrap();
        let mountinfo = format!(
            "40 31 0:33 / {} rw,relatime - cgroup2 cgroup2 rw\n",
            root.display()
        );
        let l = discover(&mountinfo, "0::/user.slice/session-1.scope\n").unwrap();
        assert_eq!(l.mechanism, Mechanism::V2);
        assert_eq!(l.parents, vec![slice.join(PARENT_NAME)]);

        // A root that does not offer pids, and no v1: pids is named missing.
        std::fs::write(root.join("cgroup.subtree_control"), "memory\n").unwrap();
        std::fs::write(slice.join("cgroup.subtree_control"), "memory\n").unwrap();
        std::fs::write(root.join("cgroup.controllers"), "cpu memory\n").unwrap();
        match discover(&mountinfo, "0::/user.slice/session-1.scope\n") {
            Err(CgroupError::ControllerMissing { controller, why }) => {
                assert_eq!(controller, "memory", "{why}");
                assert!(why.contains("pids"), "{why}");
            }
            other => panic!("{other:?}"),
        }
    }

    /// This machine's kind: v1 memory and pids, a v2 hierarchy without
    /// controllers. v2 is passed over, v1 is used below the own cgroups.
    #[test]
    fn hybrid_host_uses_v1() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        let own_mem = root.join("memory/process_api/b9a1");
        std::fs::create_dir_all(&own_mem).unwrap();
        std::fs::create_dir_all(root.join("pids")).unwrap();
        std::fs::create_dir_all(root.join("unified")).unwrap();
        std::fs::write(root.join("unified/cgroup.subtree_control"), "").unwrap();
        std::fs::write(root.join("unified/cgroup.controllers"), "").unwrap();
        let mountinfo =
            HYBRID_MOUNTINFO.replace("/sys/fs/cgroup/", &format!("{}/", root.display()));
        let l = discover(&mountinfo, HYBRID_CGROUP).unwrap();
        assert_eq!(l.mechanism, Mechanism::V1);
        assert_eq!(
            l.parents,
            vec![
                own_mem.join(PARENT_NAME),
                root.join("pids").join(PARENT_NAME)
            ]
        );
        assert!(l.parents.iter().all(|p| p.is_dir()));
        // Without the pids hierarchy, pids is named missing, with v2's reason.
        let no_pids: String = mountinfo
            .lines()
            .filter(|l| !l.contains(",pids"))
            .map(|l| format!("{l}\n"))
            .collect();
        match discover(&no_pids, HYBRID_CGROUP) {
            Err(CgroupError::ControllerMissing { controller, why }) => {
                assert_eq!(controller, "pids");
                assert!(why.contains("v1 hierarchies hold"), "{why}");
            }
            other => panic!("{other:?}"),
        }
    }

    /// On this host the shortcut through the usual mount points finds what
    /// mountinfo finds (as root, where the parents can be created).
    #[test]
    fn usual_mount_points_agree_with_mountinfo() {
        if unsafe { libc::geteuid() } != 0 {
            return;
        }
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let Ok(full) = discover(&mountinfo, &own) else {
            assert_eq!(discover_usual(Path::new(USUAL_ROOT), &own), None);
            return;
        };
        assert_eq!(discover_usual(Path::new(USUAL_ROOT), &own), Some(full));
        // Not a cgroup file system: no shortcut.
        let t = tempfile::tempdir().unwrap();
        assert_eq!(discover_usual(t.path(), &own), None);
    }

    /// The tightest pids.max on the way up, through the mount's root (a
    /// container sees its own cgroup at the mount point).
    #[test]
    fn enclosing_pids_bound_is_found() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        let own = root.join("pids/a/b");
        std::fs::create_dir_all(&own).unwrap();
        let mountinfo = format!(
            "36 31 0:32 / {} rw,relatime - cgroup cgroup rw,pids\n",
            root.join("pids").display()
        );
        let mounts = parse_mounts(&mountinfo);
        let cg = "8:pids:/a/b\n0::/\n";
        assert_eq!(enclosing_pids_max_in(&mounts, cg), None);
        std::fs::write(own.join("pids.max"), "max\n").unwrap();
        std::fs::write(root.join("pids/a/pids.max"), "2048\n").unwrap();
        assert_eq!(
            enclosing_pids_max_in(&mounts, cg),
            Some((2048, root.join("pids/a")))
        );
        std::fs::write(own.join("pids.max"), "4096\n").unwrap();
        assert_eq!(
            enclosing_pids_max_in(&mounts, cg),
            Some((2048, root.join("pids/a")))
        );
        // A container: its own cgroup is the mount's root.
        let mountinfo = format!(
            "91 83 0:36 /libpod/x {} ro,relatime - cgroup cgroup rw,pids\n",
            own.display()
        );
        let mounts = parse_mounts(&mountinfo);
        assert_eq!(
            enclosing_pids_max_in(&mounts, "8:pids:/libpod/x\n"),
            Some((4096, own.clone()))
        );
        // No pids hierarchy at all.
        assert_eq!(enclosing_pids_max_in(&[], cg), None);
    }

    #[test]
    fn nothing_mounted_is_named() {
        let e = discover("", "0::/\n").unwrap_err();
        assert!(matches!(e, CgroupError::NoHierarchy { .. }), "{e}");
        assert!(e.to_string().contains("mount"), "{e}");
    }

    #[test]
    fn errors_say_what_to_do() {
        let e = CgroupError::NotPermitted {
            path: "/sys/fs/cgroup/x".into(),
            errno: libc::EACCES,
        };
        let s = e.to_string();
        assert!(
            s.contains("Permission denied") && s.contains("run as root"),
            "{s}"
        );
    }

    #[test]
    fn warnings_name_the_policy_keys() {
        let report = CgroupReport {
            mechanism: Mechanism::V1,
            memory_bytes: Some(1 << 30),
            swap_bounded: true,
            processes: Some(128),
            paths: vec![],
        };
        let quiet = Events::default();
        assert!(quiet.warnings(&report).is_empty());
        let ev = Events {
            oom_kills: 1,
            pids_refused: 3,
        };
        let w = ev.warnings(&report);
        assert!(w[0].contains("limits.memory_bytes") && w[0].contains("1073741824"));
        assert!(w[1].contains("limits.processes") && w[1].contains("128"));
    }
}
