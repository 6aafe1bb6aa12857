//! Raw kernel calls shared by the faces, the jobs, their supervisor and
//! the script interpreter: pipes, the `flock` protocol between runs, jobs
//! and `jobs --gc`, writing a whole buffer to a file descriptor, and fork
//! with namespace flags.
//! (The confinement's own calls are in `confine`.)
//!
//! Everything here is a single system call or a loop of them with no
//! allocation, so it may be called in a forked child.

use std::fs::{File, TryLockError};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

/// A pipe whose ends close on exec: (read end, write end).
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (r, w) = io::pipe()?;
    Ok((r.into(), w.into()))
}

/// A connected pair of UNIX sequenced-packet sockets, close-on-exec: a
/// message (with fds) at a time, and end of file when the peer is gone.
pub fn seqpacket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    use std::os::fd::FromRawFd;
    let mut fds = [-1; 2];
    // SAFETY: socketpair into a stack array; both fds are owned at once.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fresh fds nothing else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Whether agent-rsh's standard input is a terminal: then `--stdin`
/// reaches the command through a pty of its own (see `exec`), and the
/// command's `/dev/tty` is that pty.
pub fn stdin_is_terminal() -> bool {
    // SAFETY: isatty has no memory effects.
    unsafe { libc::isatty(0) == 1 }
}

/// Takes an exclusive `flock` on `f`, waiting for it; a signal does not
/// cut the wait short. The lock belongs to the open file description: it
/// is not released when this `File` is dropped while a duplicate (handed
/// to a child) stays open, and a duplicate's holder keeps it.
pub fn lock(f: &File) -> io::Result<()> {
    loop {
        match f.lock() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// Takes an exclusive `flock` on `f` if nobody holds one; true when taken.
/// It lasts as long as `f` (and any duplicate of it) stays open.
pub fn try_lock(f: &File) -> bool {
    f.try_lock().is_ok()
}

/// Takes a shared `flock` on `f` unless someone holds an exclusive one;
/// true when taken. It lasts as long as `f` stays open: a run marks its
/// fresh workspace in use this way.
pub fn try_lock_shared(f: &File) -> bool {
    f.try_lock_shared().is_ok()
}

/// True when another open file description holds an exclusive lock on
/// `f`'s file (probed with a shared lock that is released when `f` closes).
pub fn held_by_another(f: &File) -> bool {
    matches!(f.try_lock_shared(), Err(TryLockError::WouldBlock))
}

/// True when anyone holds any lock (shared or exclusive) on `f`'s file, or
/// the probe fails (probed with an exclusive lock released when `f` closes).
pub fn held(f: &File) -> bool {
    f.try_lock().is_err()
}

/// `fork` with clone flags (new namespaces): returns the child's pid in
/// the parent, 0 in the child, -1 with errno set on failure. The child
/// continues on a copy of the caller's stack, as after fork(2), and in a
/// multi-threaded caller may make raw system calls only.
pub fn fork_with(flags: libc::c_ulong) -> libc::c_long {
    // Only namespace flags and CLONE_PARENT (the child is the caller's
    // sibling): CLONE_VM, CLONE_SETTLS and the like without a stack or
    // pointers would be undefined behaviour reachable from here.
    const NAMESPACES: libc::c_int = libc::CLONE_PARENT
        | libc::CLONE_NEWNS
        | libc::CLONE_NEWUTS
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUSER
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWNET
        | libc::CLONE_NEWCGROUP;
    if flags & !(NAMESPACES as libc::c_ulong) != 0 {
        // SAFETY: setting errno for the caller to read.
        unsafe { *libc::__errno_location() = libc::EINVAL };
        return -1;
    }
    // SAFETY: clone without a new stack and with namespace flags only
    // behaves like fork.
    unsafe {
        libc::syscall(
            libc::SYS_clone,
            flags | libc::SIGCHLD as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    }
}

/// Writes all of `data` to `fd`, retrying short writes and EINTR.
pub fn write_all(fd: impl AsFd, mut data: &[u8]) -> io::Result<()> {
    let fd = fd.as_fd().as_raw_fd();
    while !data.is_empty() {
        // SAFETY: write from a live slice to a borrowed, open fd.
        let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        data = &data[n as usize..];
    }
    Ok(())
}

/// The layer `network.commands` adds before one command's exec: TCP
/// connect handled, allowed to `proxy_port` only (a command granted the
/// network) or to nothing. Bind is not handled, so a server the command
/// starts still listens; the layer stacks on the run's own, so a granted
/// program started by one that is not granted gets no connection either.
/// Needs Landlock ABI 4 (Linux 6.7); None when the kernel has less.
pub fn connect_layer(proxy_port: Option<u16>) -> io::Result<Option<OwnedFd>> {
    use ::landlock::{AccessNet, NetPort, Ruleset, RulesetAttr, RulesetCreatedAttr};
    let err = |e: &dyn std::fmt::Display| io::Error::other(e.to_string());
    // SAFETY: the version query takes no pointer.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32, // LANDLOCK_CREATE_RULESET_VERSION
        )
    };
    if abi < 4 {
        return Ok(None);
    }
    let mut created = Ruleset::default()
        .handle_access(AccessNet::ConnectTcp)
        .map_err(|e| err(&e))?
        .create()
        .map_err(|e| err(&e))?;
    if let Some(port) = proxy_port {
        created = created
            .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
            .map_err(|e| err(&e))?;
    }
    let fd: Option<OwnedFd> = created.into();
    Ok(fd)
}

/// Applies a rule set from `connect_layer` to the calling thread (no
/// allocation: usable between fork and exec). `no_new_privs` must be set,
/// as it is for every process of a run.
pub fn restrict_self(ruleset: std::os::fd::RawFd) -> Result<(), i32> {
    // SAFETY: a raw system call on an fd the caller owns.
    if unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) } != 0 {
        return Err(io::Error::last_os_error().raw_os_error().unwrap_or(0));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn a_lock_is_seen_by_other_opens_and_ends_with_its_last_descriptor() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let held = File::create(&path).unwrap();
        assert!(!held_by_another(&File::open(&path).unwrap()));
        lock(&held).unwrap();
        assert!(held_by_another(&File::open(&path).unwrap()));
        // A duplicate (what a child inherits) keeps it after the original closes.
        let dup = held.try_clone().unwrap();
        drop(held);
        assert!(held_by_another(&File::open(&path).unwrap()));
        drop(dup);
        assert!(!held_by_another(&File::open(&path).unwrap()));
    }

    #[test]
    fn a_shared_lock_is_held_but_not_exclusively() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let shared = File::create(&path).unwrap();
        assert!(!held(&File::open(&path).unwrap()));
        assert!(try_lock_shared(&shared));
        assert!(held(&File::open(&path).unwrap()));
        assert!(!held_by_another(&File::open(&path).unwrap()));
        assert!(!try_lock(&File::open(&path).unwrap()));
        drop(shared);
        let excl = File::open(&path).unwrap();
        assert!(try_lock(&excl));
        assert!(!try_lock_shared(&File::open(&path).unwrap()));
        assert!(held_by_another(&File::open(&path).unwrap()));
    }

    #[test]
    fn fork_with_refuses_anything_but_namespace_flags() {
        let r = fork_with(libc::CLONE_VM as libc::c_ulong);
        assert_eq!(r, -1);
        assert_eq!(
            io::Error::last_os_error().raw_os_error(),
            Some(libc::EINVAL)
        );
    }

    #[test]
    fn pipe_ends_close_on_exec() {
        let (r, w) = pipe().unwrap();
        for fd in [r.as_raw_fd(), w.as_raw_fd()] {
            // SAFETY: F_GETFD on an fd we own.
            let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
            assert_eq!(flags & libc::FD_CLOEXEC, libc::FD_CLOEXEC);
        }
    }

    #[test]
    fn write_all_writes_everything_and_reports_a_closed_reader() {
        let (mut r, w) = io::pipe().unwrap();
        write_all(&w, b"hello").unwrap();
        drop(w);
        let mut got = String::new();
        r.read_to_string(&mut got).unwrap();
        assert_eq!(got, "hello");
        let (r, w) = io::pipe().unwrap();
        drop(r);
        // Rust programs start with SIGPIPE ignored: the write fails instead.
        let e = write_all(&w, b"x").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EPIPE));
    }
}
