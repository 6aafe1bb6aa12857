//! One loopback per workspace: runs and jobs of the same persistent
//! workspace under `network = "loopback"` share one network namespace, so
//! a server a job started is reachable from the next run's client, and
//! runs of other workspaces never see it.
//!
//! Nothing holds the namespace but the runs themselves: each run whose
//! guardian lives in it leaves an entry `PID-STARTTIME` in the workspace's
//! registry, a directory beside its state directory (`NAME-HASH.net`,
//! never inside the state directory, which the run may write). A new run
//! takes the registry's lock, joins the namespace of the first entry whose
//! process is still the one named (same start time, agent-rsh's binary,
//! a network namespace that is not agent-rsh's own), starts its guardian,
//! adds its own entry and lets the lock go. The namespace lives while any
//! of them does; the last one's end destroys it, and the next run makes a
//! new one.
//!
//! The guardian joins the network namespace and, for a caller without
//! CAP_SYS_ADMIN, the user namespace that owns it (the first run's: the
//! same account, mapped 1:1), and makes its PID, IPC and mount namespaces
//! there as a first run does. Each run keeps its own PID namespace, mount
//! view, cgroup, Landlock and seccomp; what the runs of a workspace share
//! is the loopback interface: its ports and abstract UNIX socket names.
//!
//! A forged entry (the registry lies beside what the run writes, but a
//! policy could grant write there) can only name another live process of
//! agent-rsh's binary of the same account in a network namespace of its
//! own: another run's.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The namespaces a new run joins: an earlier run's network namespace,
/// and the user namespace that owns it when that is not agent-rsh's own.
pub struct Join {
    pub net: OwnedFd,
    pub user: Option<OwnedFd>,
}

/// A workspace's registry while a run starts and lives: the lock from
/// `open` to `register`, then the run's entry, removed on drop.
pub struct Shared {
    dir: PathBuf,
    lock: Option<File>,
    join: Option<Join>,
    entry: Option<PathBuf>,
}

/// The registry of the workspace whose state directory is `state`.
pub fn registry(state: &Path) -> PathBuf {
    let mut name = state.file_name().unwrap_or_default().to_os_string();
    name.push(".net");
    state.with_file_name(name)
}

impl Shared {
    /// Takes the registry's lock and finds the namespaces to join, if a
    /// run of the workspace lives. `needs_user` says whether this caller
    /// creates its namespaces inside a user namespace (no CAP_SYS_ADMIN):
    /// only a namespace owned by a user namespace of its own kind fits.
    pub fn open(state: &Path, needs_user: bool) -> io::Result<Shared> {
        let dir = registry(state);
        crate::workspace::make_private(&dir)?;
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join("lock"))?;
        crate::sys::lock(&lock)?;
        let mut shared = Shared {
            dir,
            lock: Some(lock),
            join: None,
            entry: None,
        };
        shared.join = shared.find(needs_user);
        Ok(shared)
    }

    fn find(&self, needs_user: bool) -> Option<Join> {
        let own_net = ns_inode("/proc/self/ns/net")?;
        let own_user = ns_inode("/proc/self/ns/user")?;
        let binary = crate::script::interpreter_program();
        for entry in std::fs::read_dir(&self.dir).ok()?.flatten() {
            let name = entry.file_name();
            let Some((pid, start)) = name.to_str().and_then(parse_entry) else {
                continue;
            };
            if start_time(pid) != Some(start)
                || std::fs::read_link(format!("/proc/{pid}/exe")).ok().as_ref() != Some(&binary)
            {
                let _ = std::fs::remove_file(entry.path());
                continue;
            }
            let (Ok(net), Ok(user)) = (
                open_ns(&format!("/proc/{pid}/ns/net")),
                open_ns(&format!("/proc/{pid}/ns/user")),
            ) else {
                continue;
            };
            // The fds name the namespaces of whatever process had the pid
            // when they were opened: still the one the entry names?
            if start_time(pid) != Some(start) {
                continue;
            }
            let (Some(net_ino), Some(user_ino)) = (fd_inode(&net), fd_inode(&user)) else {
                continue;
            };
            let other_user = user_ino != own_user;
            if net_ino == own_net || other_user != needs_user {
                continue;
            }
            return Some(Join {
                net,
                user: other_user.then_some(user),
            });
        }
        None
    }

    /// The namespaces to join, if any.
    pub fn join(&self) -> Option<&Join> {
        self.join.as_ref()
    }

    /// Joining failed: the run makes a namespace of its own, which later
    /// runs will join.
    pub fn forget_join(&mut self) {
        self.join = None;
    }

    /// Records the run's guardian and lets the lock go.
    pub fn register(&mut self, guardian: i32) {
        if let Some(start) = start_time(guardian) {
            let path = self.dir.join(format!("{guardian}-{start}"));
            if File::create(&path).is_ok() {
                self.entry = Some(path);
            }
        }
        self.join = None;
        self.lock = None;
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Some(p) = self.entry.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn parse_entry(name: &str) -> Option<(i32, u64)> {
    let (pid, start) = name.split_once('-')?;
    Some((pid.parse().ok()?, start.parse().ok()?))
}

/// A process's start time in clock ticks since boot (`/proc/PID/stat`
/// field 22): with the pid, it names one process for good.
fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: the
    // fields after it follow the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

fn ns_inode(path: &str) -> Option<u64> {
    std::fs::metadata(path).ok().map(|m| m.ino())
}

fn fd_inode(fd: &OwnedFd) -> Option<u64> {
    // SAFETY: fstat into a zeroed stat of an fd we own.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    (unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } == 0).then_some(st.st_ino)
}

fn open_ns(path: &str) -> io::Result<OwnedFd> {
    let c = std::ffi::CString::new(path).map_err(io::Error::other)?;
    // SAFETY: open of a NUL-terminated path; the fd is owned at once.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh fd nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// In the joiner, a fork of agent-rsh: enters the namespaces. Raw system
/// calls only.
pub(crate) fn enter(user: Option<i32>, net: i32) -> Result<(), i32> {
    // SAFETY: setns on fds the parent opened.
    unsafe {
        if let Some(u) = user
            && libc::setns(u, libc::CLONE_NEWUSER) != 0
        {
            return Err(super::errno());
        }
        if libc::setns(net, libc::CLONE_NEWNET) != 0 {
            return Err(super::errno());
        }
    }
    Ok(())
}

impl Join {
    /// The raw fds, for the joiner.
    pub fn raw(&self) -> (Option<i32>, i32) {
        (
            self.user.as_ref().map(|u| u.as_raw_fd()),
            self.net.as_raw_fd(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_lies_beside_the_state_directory() {
        assert_eq!(
            registry(Path::new("/s/agent-rsh/workspaces/repo-1a2b")),
            PathBuf::from("/s/agent-rsh/workspaces/repo-1a2b.net")
        );
    }

    #[test]
    fn an_entry_names_a_pid_and_its_start_time() {
        assert_eq!(parse_entry("123-456"), Some((123, 456)));
        assert_eq!(parse_entry("lock"), None);
        assert_eq!(parse_entry("12-x"), None);
        let me = std::process::id() as i32;
        assert!(start_time(me).is_some());
        assert_eq!(start_time(me), start_time(me));
    }
}
