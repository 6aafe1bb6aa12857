//! Raw kernel calls shared by the faces, the jobs and their supervisor:
//! the few places that need a file descriptor rather than a `std` type.
//! (Pipes are `std::io::pipe`; the confinement's own calls are in `confine`.)

use std::fs::{File, TryLockError};
use std::io;
use std::os::fd::{AsFd, AsRawFd};

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

/// True when another open file description holds a lock on `f`'s file
/// (probed with a shared lock that is released when `f` closes).
pub fn held_by_another(f: &File) -> bool {
    matches!(f.try_lock_shared(), Err(TryLockError::WouldBlock))
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
