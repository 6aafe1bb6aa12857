//! Raw kernel calls shared by the faces and the job supervisor: the few
//! places that need a file descriptor rather than a `std` type.

use std::io;
use std::os::fd::{AsFd, AsRawFd};

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
